#include <string>

#include "engine/errors.hpp"
#include "models/topology/topology_file.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_topology(std::string_view bytes) {
  models::ClusterSpec spec;
  spec.topology_file = "fuzz-input.topo";
  try {
    (void)models::parse_topology_text(std::string(bytes), spec.topology_file, spec);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
