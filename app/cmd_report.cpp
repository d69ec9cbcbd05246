// `fabricsim report RUN.h5 [-o DIR]`: PNG plots and an HTML page (io/python/fabricsim_results.py).
#include <memory>

#include "app/commands.hpp"
#include "app/results_script.hpp"

namespace fabricsim::app {

Action add_report(CLI::App& app) {
  struct Opt {
    std::string h5, out;
  };
  auto o = std::make_shared<Opt>();
  CLI::App* sub = app.add_subcommand(
      "report", "plots of a results file (PNG + index.html): breakdown, busbw, FCT, flow starts, "
                "queues, links, PFC pauses, ECN marks/drops");
  sub->add_option("run_h5", o->h5, "HDF5 results file (fabricsim run -o)")->required();
  sub->add_option("-o,--output", o->out, "output directory (default: RUN_report next to RUN.h5)");
  return [sub, o]() -> int {
    if (!*sub) return -1;
    require_h5_file(o->h5, "run_h5");
    std::vector<std::string> args{"report", o->h5};
    if (!o->out.empty()) args.insert(args.end(), {"-o", o->out});
    return run_results_script(args);
  };
}

}  // namespace fabricsim::app
