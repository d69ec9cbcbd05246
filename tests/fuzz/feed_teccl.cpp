#include <string>

#include "engine/errors.hpp"
#include "simccl/custom_schedule.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_teccl(std::string_view bytes) {
  try {
    (void)simccl::parse_teccl_schedule(std::string(bytes), "fuzz-input.json");
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
