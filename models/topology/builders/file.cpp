// file: the topology is read from cluster.topology_file (fabricsim text format or SimAI ns-3
// format, models/topology/topology_file.hpp); the file fixes the GPUs and their links.
#include <algorithm>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/cluster.hpp"
#include "models/topology/registry.hpp"
#include "models/topology/topology_file.hpp"

namespace fabricsim::models {

namespace {

using engine::InputError;

constexpr ParamDecl kFileParams[] = {
    {"cluster.topology_file", "string", "", "topology file (fabricsim text format or SimAI ns-3 format); implies topology: file; relative to the spec file", ""},
};

TopoGraph build(const ClusterSpec &s) { return read_topology_file(s); }

void check(const ClusterSpec &c, const std::string &file) {
  if (c.topology_file.empty()) {
    throw InputError(file, "cluster.topology", "is file but cluster.topology_file is not set",
                     "set cluster.topology_file: PATH");
  }
}

// The file fixes the GPUs; hosts x gpus_per_host and the rates the NCCL model sees come from it.
void resolve(ClusterSpec &c, const TopologyResolve &how) {
  const TopoGraph g = read_topology_file(c);
  std::uint32_t gpus = 0;
  for (auto k : g.kind)
    gpus += k == NodeKind::kGpu;
  c.gpus_per_host = std::max<std::uint32_t>(1, g.gpus_per_host);
  c.hosts = (gpus + c.gpus_per_host - 1) / c.gpus_per_host;
  bool nic = false, nvl = false;
  for (const auto &l : g.links) {
    const bool gpu_end = g.kind[l.a] == NodeKind::kGpu || g.kind[l.b] == NodeKind::kGpu;
    const bool nvs_end = g.kind[l.a] == NodeKind::kNvSwitch || g.kind[l.b] == NodeKind::kNvSwitch;
    if (gpu_end && nvs_end && !nvl)
      c.nvlink_bps = l.rate_bps, c.nvlink_latency_ps = l.latency_ps, nvl = true;
    if (gpu_end && !nvs_end && !nic)
      c.nic_bps = l.rate_bps, c.nic_latency_ps = l.latency_ps, nic = true;
  }
  if (gpus < how.ranks) {
    throw InputError(c.topology_file, "nodes",
                     "the workload has " + std::to_string(how.ranks) +
                         " ranks but the topology has " + std::to_string(gpus) + " GPUs",
                     "use a topology with >= " + std::to_string(how.ranks) + " GPUs");
  }
}

} // namespace

const TopologyBuilder kFileBuilder = {FabricKind::kFile,
                                      "file",
                                      "read from cluster.topology_file",
                                      kFileParams,
                                      build,
                                      check,
                                      resolve,
                                      /*fixes_gpus=*/true};

} // namespace fabricsim::models
