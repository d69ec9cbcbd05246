// `fabricsim nccl-tests COLL [SPEC.yaml] -b MIN -e MAX -f FACTOR|-i STEP -g GPUS --nodes NODES
// [-d TYPE -o OP -r ROOT -n ITERS -w WARMUP -c CHECK -z BLOCKING] [--set k=v]`: runs one collective
// per size on the simulated cluster and prints the nccl-tests table (github.com/NVIDIA/nccl-tests:
// size, count, type, redop, root, then time/algbw/busbw/#wrong out-of-place and in-place; busbw
// factors of doc/PERFORMANCE.md). `--compare LOG` re-runs a published log's sizes and prints the
// measured and simulated busbw per size with the error.
#include <mpi.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "jobs/nccl_tests.hpp"

namespace fabricsim::app {

namespace {

bool is_collective_name(const std::string& c) {
  for (const char* n : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"}) {
    if (c == n) return true;
  }
  return false;
}

}  // namespace

Action add_nccl_tests(CLI::App& app) {
  auto opt = std::make_shared<jobs::NcclTestsOptions>();
  // nccl-tests steps by -i 1M unless -f is given (common.cu: stepFactor 1, stepBytes 1M).
  opt->factor = 1;
  opt->collective.clear();
  auto sizes = std::make_shared<std::vector<std::string>>(std::vector<std::string>{"32M", "32M", "1M"});
  auto compare = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("nccl-tests", "run an nccl-tests style size sweep of one collective on the simulated "
                                                   "cluster, or compare with a published nccl-tests log (--compare)");
  sub->add_option("collective", opt->collective,
                  "all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce or sendrecv (a _perf suffix is "
                  "accepted); optional with --compare when the log names it");
  sub->add_option("spec", opt->spec_path, "experiment spec (YAML) for the cluster and nccl: settings")
      ->check(CLI::ExistingFile);
  sub->add_option("-b,--minbytes", (*sizes)[0], "smallest size (K/M/G suffixes, as nccl-tests)")->default_str("32M");
  sub->add_option("-e,--maxbytes", (*sizes)[1], "largest size")->default_str("32M");
  sub->add_option("-i,--stepbytes", (*sizes)[2], "add this many bytes per step when -f is 1 (takes effect)")->default_str("1M");
  sub->add_option("-f,--stepfactor", opt->factor, "multiply the size by this factor (1: add -i instead; takes effect)")
      ->check(CLI::Range(1u, 1024u))
      ->default_str("1");
  sub->add_option("-g,--ngpus", opt->gpus_per_node, "GPUs per node (ranks per host; takes effect)")->check(CLI::Range(1u, 1024u));
  sub->add_option("--nodes", opt->nodes, "nodes (hosts; takes effect)")->check(CLI::Range(1u, 65536u));
  sub->add_option("-r,--root", opt->root, "root rank for broadcast/reduce (takes effect)")->check(CLI::Range(0u, 1u << 24));
  sub->add_option("-d,--datatype", opt->datatype,
                  "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2 (takes "
                  "effect on count and rounding: count = bytes / element size; the simulated time of a byte is the same "
                  "for every type)")
      ->default_str("float");
  sub->add_option("-o,--op", opt->redop, "sum, prod, max, min, avg, mulsum (printed in redop; no effect: no data is "
                                         "reduced)")
      ->default_str("sum");
  sub->add_option("-n,--iters", opt->iters, "iterations (printed; no effect: every simulated iteration is the same)")
      ->check(CLI::Range(1u, 1u << 30));
  sub->add_option("-w,--warmup_iters", opt->warmup_iters, "warm-up iterations (printed; no effect: no warm-up state is "
                                                          "simulated)")
      ->check(CLI::Range(0u, 1u << 30));
  sub->add_option("-c,--check", opt->check, "check results (printed; no effect: no data is moved, #wrong is N/A)")
      ->check(CLI::Range(0u, 1u << 30));
  sub->add_option("-z,--blocking", opt->blocking, "blocking collectives (printed; no effect: one collective runs at a "
                                                  "time)")
      ->check(CLI::Range(0u, 2u));
  sub->add_option("--set", opt->sets, "override a spec key (repeatable), e.g. --set nccl.NCCL_ALGO=Ring");
  sub->add_flag("--explain", opt->explain, "print simccl's algorithm/protocol/channel choice under each row");
  sub->add_option("--compare", *compare,
                  "published nccl-tests log: re-run its collective, sizes, type and GPU count (from its header lines, "
                  "or -g/--nodes/collective given here) and print measured vs simulated busbw per size");
  auto fidelity = std::make_shared<std::string>();
  sub->add_option("--fidelity", *fidelity, "network rung: packet (default), flow or analytical (sim.fidelity)");
  return [sub, opt, sizes, fidelity, compare]() -> int {
    if (!*sub) return -1;
    // Like `run --fidelity`: a --set after it, validated by the spec loader (one-line error, exit 2).
    if (sub->count("--fidelity") > 0) opt->sets.push_back("sim.fidelity=" + *fidelity);
    if (opt->collective.size() > 5 && opt->collective.compare(opt->collective.size() - 5, 5, "_perf") == 0) {
      opt->collective.resize(opt->collective.size() - 5);
    }
    if (!compare->empty()) {
      // With --compare the collective may come from the log, so a lone positional may be the spec.
      if (!opt->collective.empty() && opt->spec_path.empty() && !is_collective_name(opt->collective) &&
          std::filesystem::is_regular_file(opt->collective)) {
        opt->spec_path = opt->collective;
        opt->collective.clear();
      }
      const jobs::NcclTestsLog log = jobs::parse_nccl_tests_log(*compare);
      if (opt->collective.empty()) opt->collective = log.collective;
      if (opt->collective.empty()) {
        throw engine::InputError(*compare, "collective", "the log does not name its collective (no '# Collective test "
                                                         "starting' line)",
                                 "give it: fabricsim nccl-tests all_reduce --compare LOG");
      }
      if (!log.collective.empty() && log.collective != opt->collective) {
        throw engine::InputError(*compare, "collective", "the log is " + log.collective + ", not " + opt->collective,
                                 "give the log's collective or none");
      }
      const bool g_given = sub->count("-g") > 0, nodes_given = sub->count("--nodes") > 0;
      if (!nodes_given) {
        if (log.nodes > 0) opt->nodes = log.nodes;
        else if (!g_given) {
          throw engine::InputError(*compare, "GPU count", "the log has no '#  Rank' lines to count GPUs and nodes from",
                                   "give -g GPUS_PER_NODE and --nodes NODES");
        }
      }
      if (!g_given && log.ranks > 0) {
        if (log.ranks % opt->nodes != 0) {
          throw engine::InputError(*compare, "GPU count", fmt::format("{} ranks do not split evenly over {} nodes", log.ranks, opt->nodes),
                                   "give -g GPUS_PER_NODE and --nodes NODES");
        }
        opt->gpus_per_node = log.ranks / opt->nodes;
      }
      const std::string text = jobs::compare_nccl_tests(*opt, log, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT);
      if (is_root()) std::cout << text << std::flush;
      return 0;
    }
    if (opt->collective.empty()) {
      throw engine::InputError("<cli>", "collective", "missing", "give one, e.g. fabricsim nccl-tests all_reduce -b 8 -e 128M -f 2");
    }
    opt->min_bytes = jobs::parse_nccl_tests_size((*sizes)[0], "-b");
    opt->max_bytes = jobs::parse_nccl_tests_size((*sizes)[1], "-e");
    opt->step_bytes = jobs::parse_nccl_tests_size((*sizes)[2], "-i");
    const std::string table = jobs::run_nccl_tests(*opt, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT);
    if (is_root()) std::cout << table << std::flush;
    return 0;
  };
}

}  // namespace fabricsim::app
