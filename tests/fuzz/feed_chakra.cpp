#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "io/chakra_reader.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

namespace {

/// A private folder for the rank files, made once per process (read_chakra takes only a path
/// prefix: it discovers the rank count from the files present).
const std::string& chakra_prefix() {
  static const std::string prefix = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/fabricsim-fuzz-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) std::abort();
    return dir + "/fuzz";
  }();
  return prefix;
}

}  // namespace

Outcome feed_chakra(std::string_view bytes) {
  io::ChakraReadOptions options;
  if (bytes.substr(0, kChakraGpusPrefix.size()) == kChakraGpusPrefix) {
    bytes.remove_prefix(kChakraGpusPrefix.size());
    std::uint32_t gpus = 0;
    while (!bytes.empty() && bytes.front() >= '0' && bytes.front() <= '9') {
      gpus = std::min<std::uint32_t>(gpus * 10 + static_cast<std::uint32_t>(bytes.front() - '0'), kMaxChakraGpus);
      bytes.remove_prefix(1);
    }
    if (!bytes.empty() && bytes.front() == '\n') bytes.remove_prefix(1);
    options.world_size = gpus;
  }
  std::vector<std::string_view> parts;
  while (static_cast<int>(parts.size()) + 1 < kMaxChakraRanks) {
    const auto at = bytes.find(kChakraRankSep);
    if (at == std::string_view::npos) break;
    parts.push_back(bytes.substr(0, at));
    bytes.remove_prefix(at + kChakraRankSep.size());
  }
  parts.push_back(bytes);
  const std::string& prefix = chakra_prefix();
  for (int r = 0; r < kMaxChakraRanks; ++r) {
    const std::string file = prefix + "." + std::to_string(r) + ".et";
    if (r < static_cast<int>(parts.size())) {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(parts[static_cast<std::size_t>(r)].data(), static_cast<std::streamsize>(parts[static_cast<std::size_t>(r)].size()));
      if (!out) std::abort();
    } else {
      std::remove(file.c_str());
    }
  }
  try {
    (void)io::read_chakra(prefix, "", options);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
