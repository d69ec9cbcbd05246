#include <algorithm>
#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "partition/partition.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_partition(std::string_view bytes) {
  const auto eol = bytes.find('\n');
  std::istringstream counts{std::string(bytes.substr(0, eol))};
  long long lps = 1, procs = 1, threads = 1;
  counts >> lps >> procs >> threads;
  const std::string file(eol == std::string_view::npos ? std::string_view() : bytes.substr(eol + 1));
  std::istringstream in(file);
  try {
    (void)partition::read_partition(in, "fuzz-input.part", static_cast<std::uint32_t>(std::clamp(lps, 1LL, 4096LL)),
                                    static_cast<std::uint32_t>(std::clamp(procs, 1LL, 64LL)),
                                    static_cast<std::uint32_t>(std::clamp(threads, 1LL, 64LL)));
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
