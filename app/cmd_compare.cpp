// `fabricsim compare A.h5 B.h5`: key metrics side by side (io/python/fabricsim_results.py).
#include <memory>

#include "app/commands.hpp"
#include "app/results_script.hpp"

namespace fabricsim::app {

Action add_compare(CLI::App& app) {
  struct Opt {
    std::string a, b;
  };
  auto o = std::make_shared<Opt>();
  CLI::App* sub = app.add_subcommand(
      "compare", "key metrics of two results files side by side with relative differences (B/A - 1)");
  sub->add_option("a_h5", o->a, "baseline results file")->required();
  sub->add_option("b_h5", o->b, "results file compared with it")->required();
  return [sub, o]() -> int {
    if (!*sub) return -1;
    require_h5_file(o->a, "a_h5");
    require_h5_file(o->b, "b_h5");
    return run_results_script({"compare", o->a, o->b});
  };
}

}  // namespace fabricsim::app
