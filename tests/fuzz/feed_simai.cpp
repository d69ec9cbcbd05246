#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "io/simai_reader.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_simai(std::string_view bytes) {
  const std::string text(bytes);
  try {
    std::istringstream in(text);
    (void)io::read_simai(in, "fuzz-input.txt", 0);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    if (e.field() != "all_gpus") return std::string(e.what());
  }
  // AICB files do not name the world size (fabricsim's --gpus does): read it again as 8 GPUs.
  try {
    std::istringstream in(text);
    (void)io::read_simai(in, "fuzz-input.txt", 8);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
