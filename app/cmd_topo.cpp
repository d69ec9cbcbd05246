// `fabricsim topo SPEC [--set k=v] [--gpus N] [--export FILE]`: builds the spec's topology and
// prints node/link counts, per-tier oversubscription, bisection bandwidth, diameter and ECMP
// width (docs/topology.md); --export writes it in the fabricsim topology text format.
#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "jobs/output_path.hpp"
#include "engine/errors.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"
#include "models/topology/cluster.hpp"
#include "models/topology/topology_file.hpp"
#include "models/topology/topology_stats.hpp"

namespace fabricsim::app {

namespace {
struct TopoOptions {
  std::string spec_path;
  std::vector<std::string> sets;
  std::uint32_t gpus = 0;
  std::string export_path;
};
} // namespace

Action add_topo(CLI::App &app) {
  auto opt = std::make_shared<TopoOptions>();
  CLI::App *sub =
      app.add_subcommand("topo", "build the spec's cluster topology and print its figures");
  sub->add_option("spec", opt->spec_path, "experiment spec (YAML); optional")
      ->check(CLI::ExistingFile);
  sub->add_option("--set", opt->sets,
                  "override a spec key: --set cluster.topology=torus (repeatable)");
  sub->add_option("--gpus", opt->gpus,
                  "GPUs to size an auto cluster for (default: the spec's workload, else 1 host)")
      ->check(CLI::Range(1u, 1u << 20));
  sub->add_option("--export", opt->export_path,
                  "write the topology to FILE (fabricsim topology text format)");
  return [sub, opt]() -> int {
    if (!*sub)
      return -1;
    if (sub->count("--export") > 0 && opt->export_path.empty()) {
      throw engine::InputError("<cli>", "--export", "the path is empty", "give a file name");
    }
    const jobs::Spec spec = jobs::load_spec(opt->spec_path, opt->sets);
    std::uint32_t ranks = opt->gpus;
    if (ranks == 0 && !spec.workload_path.empty() && spec.generator.count("model") == 0) {
      ranks = jobs::load_workload(spec.workload_path, spec.workload_format, spec.workload_gpus,
                                  spec.comm_groups, spec.chakra)
                  .ranks;
    }
    const models::ClusterSpec c = jobs::resolve_cluster(spec, ranks);
    const models::Topology topo(c);
    const models::TopologyStats s = models::topology_stats(topo);
    if (!opt->export_path.empty() && is_root() && !jobs::is_null_device(opt->export_path)) {
      // Written under a temporary name and renamed into place: a full disk leaves no partial file.
      const std::string target = jobs::resolve_output_file(opt->export_path, "--export");
      const std::string tmp = target + ".tmp." + std::to_string(::getpid());
      {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) {
          throw engine::InputError("<cli>", "--export", "cannot write " + opt->export_path, "check the directory");
        }
        out << models::topology_to_text(topo,
                                        std::string("exported by fabricsim topo from ") +
                                            (opt->spec_path.empty() ? "<defaults>" : opt->spec_path));
        out.close();
        if (!out) {
          std::error_code ec;
          std::filesystem::remove(tmp, ec);
          throw engine::InputError("<cli>", "--export", "writing " + opt->export_path + " failed",
                                   "check free space; nothing was written");
        }
      }
      std::error_code ec;
      std::filesystem::rename(tmp, target, ec);
      if (ec) {
        std::filesystem::remove(tmp, ec);
        throw engine::InputError("<cli>", "--export", "cannot move the file into place at " + opt->export_path,
                                 "give a writable file path");
      }
    }
    if (is_root()) {
      std::fputs(models::format_topology_stats(topo, s).c_str(), stdout);
      if (!opt->export_path.empty())
        std::printf("exported: %s\n", opt->export_path.c_str());
    }
    return 0;
  };
}

} // namespace fabricsim::app
