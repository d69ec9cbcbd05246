#include <string>

#include "engine/errors.hpp"
#include "simccl/nccl_topo.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_nccl_topo(std::string_view bytes) {
  try {
    const simccl::NcclTopo t = simccl::parse_nccl_topo(std::string(bytes), "fuzz-input.xml", 90);
    (void)simccl::describe(t);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
