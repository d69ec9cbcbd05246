// `fabricsim regress REFERENCE_DIR`: run a named suite and compare with stored references.
#include <mpi.h>

#include <iostream>
#include <memory>

#include "app/commands.hpp"
#include "jobs/output_path.hpp"
#include "jobs/regress.hpp"

namespace fabricsim::app {

Action add_regress(CLI::App& app) {
  struct Opt {
    std::string dir;
    jobs::RegressOptions ro;
    std::string report_csv;
  };
  auto o = std::make_shared<Opt>();
  CLI::App* sub = app.add_subcommand(
      "regress", "run a regression suite (REFERENCE_DIR/suite.yaml) and compare with its references; exit 1 on drift");
  sub->add_option("reference_dir", o->dir, "directory with suite.yaml and references/")->required();
  sub->add_flag("--rebaseline", o->ro.rebaseline, "rewrite the references from this run (deliberately!)");
  sub->add_option("--set", o->ro.sets, "extra override for every case: --set cluster.nic_bandwidth=200Gbps (repeatable)");
  sub->add_option("--case", o->ro.only, "run only this case (repeatable)");
  sub->add_option("--report", o->report_csv, "also write the comparison table as CSV");
  return [sub, o]() -> int {
    if (!*sub) return -1;
    o->ro.version = FABRICSIM_VERSION;
    o->ro.git_commit = FABRICSIM_GIT_COMMIT;
    // --report is checked before the cases run (they may take long): empty, a directory, an
    // uncreatable file or a missing directory is one line, exit 2.
    if (sub->count("--report") > 0) jobs::check_output_path(o->report_csv, "--report", {});
    const jobs::RegressSuite suite = jobs::load_suite(o->dir);
    const jobs::RegressReport rep = jobs::run_regress(suite, o->ro, MPI_COMM_WORLD);
    if (is_root()) {
      std::cout << rep.text << std::flush;
      if (!o->report_csv.empty() && !jobs::is_null_device(o->report_csv)) rep.table.write_csv(o->report_csv);
    }
    return (rep.drifted || rep.errors) ? 1 : 0;
  };
}

}  // namespace fabricsim::app
