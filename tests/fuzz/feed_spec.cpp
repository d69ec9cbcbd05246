#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "jobs/spec.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

Outcome feed_spec(std::string_view bytes) {
  // The YAML ends at the first line "#--set"; each later non-empty line is one --set entry.
  constexpr std::string_view kSets = "#--set";
  std::string yaml;
  std::vector<std::string> sets;
  bool in_sets = false;
  while (!bytes.empty()) {
    const std::size_t eol = bytes.find('\n');
    const std::string_view line = bytes.substr(0, eol);
    if (in_sets) {
      if (!line.empty()) sets.emplace_back(line);
    } else if (line == kSets) {
      in_sets = true;
    } else {
      yaml.append(line);
      if (eol != std::string_view::npos) yaml.push_back('\n');
    }
    bytes.remove_prefix(eol == std::string_view::npos ? bytes.size() : eol + 1);
  }
  try {
    (void)jobs::parse_spec(yaml, "fuzz-input.yaml", sets);
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
