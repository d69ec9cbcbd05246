// fabricsim command-line entry point.
// Exit codes: 0 success, 2 bad input or usage, 3 internal error.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "engine/heap_pages.hpp"
#include "engine/mpi_init.hpp"
#include "io/hdf5_writer.hpp"

namespace fabricsim::app {
bool is_root() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r == 0;
}
}  // namespace fabricsim::app

namespace {

constexpr const char* kExamples = R"(Examples:
  fabricsim run examples/quickstart.yaml -o out.h5
  fabricsim run --workload tests/data/chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce
  fabricsim run --workload examples/workloads/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt --gpus 16 --summary-json s.json
  fabricsim run examples/quickstart.yaml --set cluster.nic_bandwidth=200Gbps --stats
  mpiexec -n 4 fabricsim run examples/quickstart.yaml -o out.h5
  fabricsim validate examples/quickstart.yaml
  fabricsim describe spec
  fabricsim nccl-tests all_reduce -b 8 -e 1G -f 4 -g 8 --explain
  fabricsim plan all_reduce 1G -g 8 -n 2
  fabricsim sweep examples/sweeps/moe_study_reduced.yaml --local -j 2
  fabricsim regress tests/regress
  fabricsim topo --set cluster.tiers=3 --set cluster.pods=4 --gpus 1024 --export clos.topo
  fabricsim ladder --workload tests/fidelity/data/allreduce_1MiB.txt --gpus 64 --set simccl.planner=ring
  fabricsim kernels scale --from A100 --to H100 --time-us 715 --op layernorm
  fabricsim kernels lookup --gpu H100 --m 4096 --n 4096 --k 4096
  fabricsim generate examples/gpt3_13b_generated.yaml -o gpt13b
  fabricsim report out.h5 -o out_report
  fabricsim compare a.h5 b.h5
)";

/// The lines of `examples` that run subcommand `name` (`fabricsim NAME ...`, also under mpiexec),
/// under an "Examples:" heading; empty when there are none.
std::string subcommand_examples(const std::string& examples, const std::string& name) {
  std::string out;
  std::size_t pos = 0;
  const std::string key = "fabricsim " + name + " ";
  while (pos < examples.size()) {
    std::size_t end = examples.find('\n', pos);
    if (end == std::string::npos) end = examples.size();
    const std::string line = examples.substr(pos, end - pos);
    if ((line + " ").find(key) != std::string::npos) out += line + "\n";
    pos = end + 1;
  }
  return out.empty() ? out : "Examples:\n" + out;
}

}  // namespace

namespace {

/// A shorthand option (`--partition`, `--fidelity`, ...) and `--set` of its key with another
/// value are an error (docs/config.md): the option is applied after every --set whatever the
/// order on the command line, so neither "last wins" nor "first wins" would be what was typed.
/// `--set k=a --set k=b` is allowed (the last wins; scripts layer overrides that way).
/// @throws engine::InputError naming the key and both values.
void check_keys_given_once(int argc, char** argv) {
  static const std::map<std::string, std::string> kShorthand = {
      {"--partition", "sim.partition"}, {"--save-partition", "sim.save_partition"}, {"--fidelity", "sim.fidelity"},
      {"--trace", "output.trace"},      {"--trace-ranks", "output.trace_ranks"},   {"--workload", "workload.path"},
      {"--gpus", "workload.gpus"}};
  std::map<std::string, std::pair<std::string, std::string>> given;  // key -> (value, how it was given)
  auto note = [&](const std::string& key, const std::string& value, const std::string& how, bool shorthand) {
    auto [it, fresh] = given.emplace(key, std::pair{value, how});
    if (fresh) return;
    const bool either_shorthand = shorthand || it->second.second.rfind("--set", 0) != 0;
    if (!either_shorthand) {
      it->second = {value, how};  // --set twice: the last wins
      return;
    }
    if (it->second.first != value) {
      throw fabricsim::engine::InputError("<cli>", key,
                                          "given twice on the command line with different values ('" +
                                              it->second.second + "' and '" + how + "')",
                                          "give it once");
    }
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    const auto eq = a.find('=');
    const std::string opt = a.rfind("--", 0) == 0 && eq != std::string::npos ? a.substr(0, eq) : a;
    if (opt == a && i + 1 < argc) value = argv[i + 1];
    else if (opt != a) value = a.substr(eq + 1);
    if (opt == "--set") {
      const auto k = value.find('=');
      if (k != std::string::npos && k > 0) note(value.substr(0, k), value.substr(k + 1), "--set " + value, false);
    } else if (const auto it = kShorthand.find(opt); it != kShorthand.end()) {
      note(it->second, value, opt + " " + value, true);
    }
    if (opt == a && (opt == "--set" || kShorthand.count(opt) > 0)) ++i;  // skip the value
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Transparent huge pages for the heap (engine/heap_pages.hpp): under the kernel's THP mode
  // "madvise", run this program again once with glibc.malloc.hugetlb=1, before MPI exists. A
  // multi-GB run touches its state (per-GPU executors, the flow rung's flows, links and route
  // cache) all over memory; with 4 KiB pages nearly every such access also misses the TLB.
  // Measured: the 9,216-GPU MoE iteration at the flow rung (examples/moe_9216.yaml, ring_flows
  // stream) 638 -> 493-513 s of CPU, the 2,304-GPU one 88.0 -> 81.3 s, same digests
  // (docs/benchmarks.md). FABRICSIM_HUGEPAGES=0 turns it off; results never depend on it.
  fabricsim::engine::reexec_with_huge_pages(argv);
  fabricsim::engine::init_mpi(&argc, &argv);
  // stdout is fully buffered when redirected (every batch job): line-buffer it, so that each
  // line printed is in the log at once and a job killed later keeps what it printed
  // (docs/progress.md). stderr is unbuffered.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  using namespace fabricsim::app;
  const bool root = is_root();
  CLI::App app{"fabricsim: parallel discrete-event simulator of AI training clusters"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("fabricsim ") + FABRICSIM_VERSION + " (" + FABRICSIM_GIT_COMMIT + ")");
  app.require_subcommand(1);
  // Usage errors follow the one-line error contract: "fabricsim: error: <cli>: ...", exit 2.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    std::string msg = e.what();
    for (char& ch : msg) {
      if (ch == '\n') ch = ' ';
    }
    // An argument CLI11 quotes may hold any byte: escaped as InputError messages are.
    return "fabricsim: error: <cli>: " + fabricsim::engine::printable(msg) + "; see fabricsim --help\n";
  });
  // One line per subcommand (each in app/cmd_<name>.cpp).
  std::vector<Action> actions = {add_run(app), add_validate(app), add_describe(app), add_sweep(app), add_regress(app),
                                 add_nccl_tests(app), add_plan(app), add_kernels(app), add_generate(app),
                                 add_report(app), add_compare(app), add_ladder(app), add_topo(app)};

  // Each subcommand's --help lists only its own examples (CLI11 copies the parent's footer into
  // every subcommand at creation, so without this each ended with all of them). Nested ones
  // (`kernels lookup`) are matched by their full path and get no footer when they have no example.
  const std::function<void(CLI::App*, const std::string&)> set_footers = [&](CLI::App* parent, const std::string& prefix) {
    for (CLI::App* sub : parent->get_subcommands([](CLI::App*) { return true; })) {
      const std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
      sub->footer(subcommand_examples(kExamples, path));
      set_footers(sub, path);
    }
  };
  set_footers(&app, "");

  // `fabricsim nonsense` said only "A subcommand is required": name the word and list the
  // subcommands (one line, exit 2). Options (-h, --version, ...) go to CLI11 as before.
  {
    std::string names;
    bool known = false;
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + s->get_name();
      if (argc > 1 && s->get_name() == argv[1]) known = true;
    }
    if (argc < 2 || (argv[1][0] != '-' && !known)) {
      if (root) {
        std::cerr << "fabricsim: error: <cli>: "
                  << (argc < 2 ? std::string("a subcommand is required")
                               : "'" + fabricsim::engine::printable(argv[1]) + "' is not a subcommand")
                  << "; use one of " << names << " (fabricsim --help)\n";
      }
      MPI_Finalize();
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ValidationError& e) {
    // CLI11 validates positionals (e.g. the spec file exists) before it reports unknown options,
    // so `run --bogus 3` would say "File does not exist: 3" although the mistake is --bogus.
    // Name the unexpected argument first when there is one.
    // Name only the unknown options when there are any: the value after one was taken as the
    // positional, so the real positional shows up among the extras although it is fine.
    std::vector<std::string> extra;
    for (const auto& x : app.remaining(true)) {
      if (x.size() > 1 && x[0] == '-') extra.push_back(x);
    }
    if (extra.empty()) extra = app.remaining(true);
    if (root) {
      if (!extra.empty()) {
        app.exit(CLI::ExtrasError(extra));
      } else {
        app.exit(e);
      }
    }
    MPI_Finalize();
    return 2;
  } catch (const CLI::ParseError& e) {
    const int rc = e.get_exit_code();
    if (root) app.exit(e);
    MPI_Finalize();
    return rc == 0 ? 0 : 2;
  }
  int code = 0;
  try {
    check_keys_given_once(argc, argv);
    for (auto& act : actions) {
      const int rc = act();
      if (rc >= 0) {
        code = rc;
        break;
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
  if (fabricsim::io::hdf5_write_failed()) {
    // See io::hdf5_write_failed(): skip MPI_Finalize, whose HDF5 clean-up would crash.
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
  MPI_Finalize();
  return code;
}
