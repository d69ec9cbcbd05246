// `fabricsim describe spec`: every spec key with type, default and meaning.
#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.hpp"
#include "jobs/spec.hpp"

namespace fabricsim::app {

Action add_describe(CLI::App& app) {
  auto what = std::make_shared<std::string>("spec");
  CLI::App* sub = app.add_subcommand("describe", "print every spec key with its type, default and meaning");
  sub->add_option("what", *what, "what to describe (spec)")->check(CLI::IsMember({"spec"}));
  return [sub, what]() -> int {
    if (!*sub) return -1;
    if (is_root()) {
      for (const auto& k : jobs::spec_keys()) {
        std::printf("%-26s %-9s default %-22s %s\n", k.path, k.type, (*k.default_text ? k.default_text : "\"\""),
                    k.help);
      }
    }
    return 0;
  };
}

}  // namespace fabricsim::app
