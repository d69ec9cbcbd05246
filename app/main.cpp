// fabricsim command-line entry point.
// Exit codes: 0 success, 2 bad input or usage, 3 internal error.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "engine/errors.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"

namespace {

constexpr const char* kExamples = R"(Examples:
  fabricsim run examples/quickstart.yaml -o out.h5
  fabricsim run --workload tests/data/chakra/all_reduce/8npus_1MB/all_reduce   (Chakra ET prefix)
  fabricsim run --workload tests/data/simai/micro_all_reduce.txt --gpus 16 --summary-json s.json
  fabricsim run examples/quickstart.yaml --set cluster.nic_bandwidth=200Gbps --stats
  mpiexec -n 4 fabricsim run examples/quickstart.yaml -o out.h5
  fabricsim validate examples/quickstart.yaml
  fabricsim describe spec
)";

int rank_of_world() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);  // engine threads never call MPI
  const bool root = rank_of_world() == 0;
  int code = 0;
  CLI::App app{"fabricsim: parallel discrete-event simulator of AI training clusters"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("fabricsim ") + FABRICSIM_VERSION + " (" + FABRICSIM_GIT_COMMIT + ")");
  app.require_subcommand(1);

  fabricsim::jobs::RunOptions opt;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("spec", opt.spec_path, "experiment spec (YAML); optional with --workload")->check(CLI::ExistingFile);
    sub->add_option("--workload", opt.workload, "workload: Chakra ET prefix (PREFIX.<rank>.et) or SimAI/AICB file");
    sub->add_option("--gpus", opt.gpus, "world size for SimAI/AICB files without all_gpus (SimAI's -g)")
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--set", opt.sets, "override a spec key: --set cluster.nic_bandwidth=200Gbps (repeatable)");
  };
  CLI::App* run = app.add_subcommand("run", "simulate a workload on a cluster");
  add_common(run);
  run->add_option("-o,--output", opt.out_h5, "HDF5 results file (default: output.h5 key, fabricsim_results.h5)");
  run->add_option("--summary-json", opt.summary_json, "write the summary as JSON");
  run->add_option("--threads", opt.threads, "engine threads per MPI process (default: sim.threads or OMP_NUM_THREADS)")
      ->check(CLI::Range(1u, 256u));
  run->add_flag("--stats", opt.stats, "print engine statistics (events, windows, events/s, remote events, sync time)");
  run->add_flag("-q,--quiet", opt.quiet, "no summary on stdout");
  CLI::App* validate = app.add_subcommand("validate", "check a spec and its workload without simulating");
  add_common(validate);
  CLI::App* describe = app.add_subcommand("describe", "print every spec key with its type, default and meaning");
  std::string what = "spec";
  describe->add_option("what", what, "what to describe (spec)")->check(CLI::IsMember({"spec"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = e.get_exit_code();
    if (root) app.exit(e);
    MPI_Finalize();
    return rc == 0 ? 0 : 2;
  }

  try {
    if (opt.threads == 0) {
      if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
        const int t = std::atoi(omp);
        if (t >= 1 && t <= 256) opt.threads = static_cast<std::uint32_t>(t);
      }
    }
    if (*run) {
      const auto res = fabricsim::jobs::run_simulation(opt, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT);
      if (root && !opt.quiet) std::cout << res.summary_text << std::flush;
    } else if (*validate) {
      opt.write_h5 = false;
      const std::string d = fabricsim::jobs::validate_only(opt);
      if (root) std::cout << "ok\n" << d;
    } else if (*describe) {
      if (root) {
        for (const auto& k : fabricsim::jobs::spec_keys()) {
          std::printf("%-26s %-9s default %-22s %s\n", k.path, k.type,
                      (*k.default_text ? k.default_text : "\"\""), k.help);
        }
      }
    }
  } catch (const fabricsim::engine::InputError& e) {
    if (root) std::cerr << "fabricsim: error: " << e.what() << "\n";
    code = 2;
  } catch (const fabricsim::engine::InternalError& e) {
    std::cerr << "fabricsim: internal error (please report): " << e.what() << "\n";
    code = 3;
  } catch (const std::exception& e) {
    std::cerr << "fabricsim: internal error (please report): " << e.what() << "\n";
    code = 3;
  }
  MPI_Finalize();
  return code;
}
