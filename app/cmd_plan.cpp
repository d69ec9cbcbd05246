// `fabricsim plan COLL SIZE [SPEC.yaml] [-g GPUS] [-n NODES] [-r ROOT] [--set k=v ...]`: what simccl
// chooses for one collective on a cluster and why (the cost table per algorithm and protocol, the
// choice, the plan's channels, message sizes and bytes on NVLink vs the network); the
// counterpart of NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING. Nothing is simulated.
#include <mpi.h>

#include <iostream>
#include <memory>
#include <string>

#include "app/commands.hpp"
#include "jobs/nccl_tests.hpp"

namespace fabricsim::app {

Action add_plan(CLI::App& app) {
  auto opt = std::make_shared<jobs::NcclTestsOptions>();
  auto size = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("plan", "show how simccl plans one collective: NCCL cost table, choice, plan summary");
  sub->add_option("collective", opt->collective,
                  "all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce or sendrecv")
      ->required();
  sub->add_option("size", *size, "size in nccl-tests convention (K/M/G suffixes), e.g. 1G")->required();
  sub->add_option("spec", opt->spec_path, "experiment spec (YAML) for the cluster and nccl: settings")
      ->check(CLI::ExistingFile);
  sub->add_option("-g,--ngpus", opt->gpus_per_node, "GPUs per node (ranks per host)")->check(CLI::Range(1u, 1024u));
  sub->add_option("-n,--nodes", opt->nodes, "nodes (hosts)")->check(CLI::Range(1u, 65536u));
  sub->add_option("-r,--root", opt->root, "root rank for broadcast/reduce")->check(CLI::Range(0u, 1u << 24));
  sub->add_option("--set", opt->sets, "override a spec key (repeatable), e.g. --set nccl.NCCL_PROTO=^LL128");
  return [sub, opt, size]() -> int {
    if (!*sub) return -1;
    const std::uint64_t bytes = jobs::parse_nccl_tests_size(*size, "size");
    const std::string text = jobs::plan_report(*opt, bytes);
    if (is_root()) std::cout << text << std::flush;
    return 0;
  };
}

}  // namespace fabricsim::app
