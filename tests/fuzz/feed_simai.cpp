#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "io/simai_reader.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_simai(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  try {
    (void)io::read_simai(in, "fuzz-input.txt", 0);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
