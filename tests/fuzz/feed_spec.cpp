#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "jobs/spec.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_spec(std::string_view bytes) {
  constexpr std::string_view kSets = "#--set\n";
  std::string yaml(bytes);
  std::vector<std::string> sets;
  std::size_t at = yaml.rfind(kSets, 0) == 0 ? 0 : yaml.find("\n" + std::string(kSets));
  if (at != std::string::npos) {
    const std::size_t begin = at + (at == 0 ? kSets.size() : kSets.size() + 1);
    std::string rest = yaml.substr(begin);
    yaml.resize(at);
    std::size_t pos = 0;
    while (pos <= rest.size()) {
      const std::size_t eol = rest.find('\n', pos);
      const std::string line = rest.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
      if (!line.empty()) sets.push_back(line);
      if (eol == std::string::npos) break;
      pos = eol + 1;
    }
  }
  try {
    (void)jobs::parse_spec(yaml, "fuzz-input.yaml", sets);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
