// `fabricsim nccl-tests COLL -b MIN -e MAX -f FACTOR -g GPUS -n NODES [SPEC.yaml] [--set k=v]`:
// runs one collective per size on the simulated cluster and prints the nccl-tests table
// (github.com/NVIDIA/nccl-tests: size, count, type, redop, root, then time/algbw/busbw/#wrong
// out-of-place and in-place; busbw factors of doc/PERFORMANCE.md). The simulation does not move
// data, so out-of-place and in-place columns are the same run and #wrong is N/A.
#include <mpi.h>

#include <cctype>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "jobs/nccl_tests.hpp"

namespace fabricsim::app {

Action add_nccl_tests(CLI::App& app) {
  auto opt = std::make_shared<jobs::NcclTestsOptions>();
  auto sizes = std::make_shared<std::pair<std::string, std::string>>("32M", "32M");
  CLI::App* sub = app.add_subcommand("nccl-tests", "run an nccl-tests style size sweep of one collective on the simulated cluster");
  sub->add_option("collective", opt->collective,
                  "all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce or sendrecv")
      ->required();
  sub->add_option("spec", opt->spec_path, "experiment spec (YAML) for the cluster and nccl: settings")
      ->check(CLI::ExistingFile);
  sub->add_option("-b,--minbytes", sizes->first, "smallest size (K/M/G suffixes, as nccl-tests)")->default_str("32M");
  sub->add_option("-e,--maxbytes", sizes->second, "largest size")->default_str("32M");
  sub->add_option("-f,--stepfactor", opt->factor, "multiply the size by this factor")->check(CLI::Range(2u, 1024u));
  sub->add_option("-g,--ngpus", opt->gpus_per_node, "GPUs per node (ranks per host)")->check(CLI::Range(1u, 1024u));
  sub->add_option("-n,--nodes", opt->nodes, "nodes (hosts)")->check(CLI::Range(1u, 65536u));
  sub->add_option("-r,--root", opt->root, "root rank for broadcast/reduce")->check(CLI::Range(0u, 1u << 24));
  sub->add_option("--set", opt->sets, "override a spec key (repeatable), e.g. --set nccl.NCCL_ALGO=Ring");
  sub->add_flag("--explain", opt->explain, "print simccl's algorithm/protocol/channel choice under each row");
  auto fidelity = std::make_shared<std::string>();
  sub->add_option("--fidelity", *fidelity, "network rung: packet (default), flow or analytical (sim.fidelity)");
  return [sub, opt, sizes, fidelity]() -> int {
    if (!*sub) return -1;
    // Like `run --fidelity`: a --set after it, validated by the spec loader (one-line error, exit 2).
    if (sub->count("--fidelity") > 0) opt->sets.push_back("sim.fidelity=" + *fidelity);
    opt->min_bytes = jobs::parse_nccl_tests_size(sizes->first, "-b");
    opt->max_bytes = jobs::parse_nccl_tests_size(sizes->second, "-e");
    const std::string table = jobs::run_nccl_tests(*opt, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT);
    if (is_root()) std::cout << table << std::flush;
    return 0;
  };
}

}  // namespace fabricsim::app
