// torus and mesh: a grid of switches (cluster.dims, first dimension slowest in LP order) with
// (torus) or without (mesh) wrap-around links; NICs fill switches in GPU order, nics_per_leaf
// per switch. docs/topology.md.
#include <algorithm>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/builders/common.hpp"
#include "models/topology/registry.hpp"

namespace fabricsim::models {

namespace {

using builders::add_gpus_and_nvswitches;
using builders::ceil_div;
using engine::InputError;
using engine::LpId;

constexpr ParamDecl kGridParams[] = {
    {"cluster.dims", "string", "", "torus/mesh switch grid, e.g. \"4x4\" or \"4x4x2\" (first dimension slowest in LP order)", ""},
};

TopoGraph build_grid(const ClusterSpec &s, bool torus) {
  const std::string &f = s.source;
  if (s.dims.empty() || s.dims.size() > 3) {
    throw InputError(f, "cluster.dims", "a torus/mesh needs 1 to 3 dimensions",
                     "write e.g. \"4x4\" or \"4x4x2\"");
  }
  if (s.dual_plane)
    throw InputError(f, "cluster.dual_plane", "is not supported for torus/mesh", "set it to false");
  if (s.tiers != 2 || s.pods != 1) {
    throw InputError(f, "cluster.tiers", "torus/mesh have no Clos tiers",
                     "drop cluster.tiers/cluster.pods");
  }
  std::uint64_t n = 1;
  for (std::uint32_t d : s.dims) {
    if (d == 0)
      throw InputError(f, "cluster.dims", "a dimension is 0", "give sizes >= 1, e.g. \"4x4\"");
    n *= d;
  }
  if (n > (1u << 20))
    throw InputError(f, "cluster.dims", "more than 1,048,576 switches", "use a smaller grid");
  const std::uint32_t G = s.hosts * s.gpus_per_host;
  if (ceil_div(G, s.nics_per_leaf) > n) {
    throw InputError(f, "cluster.dims",
                     std::to_string(n) + " switches x " + std::to_string(s.nics_per_leaf) +
                         " NIC ports hold fewer than the " + std::to_string(G) + " NICs",
                     "enlarge cluster.dims or cluster.nics_per_leaf");
  }
  TopoGraph g;
  add_gpus_and_nvswitches(g, s);
  const LpId first = static_cast<LpId>(g.kind.size());
  for (std::uint64_t i = 0; i < n; ++i)
    g.add(NodeKind::kLeaf, 1);
  for (std::uint32_t gpu = 0; gpu < G; ++gpu) {
    g.links.push_back(
        {gpu, first + gpu / s.nics_per_leaf, s.nic_bps, s.nic_latency_ps, s.mtu_bytes});
  }
  // Row-major coordinates, dims[0] slowest; one link per neighbour pair in the + direction.
  std::uint64_t stride = n;
  for (std::size_t k = 0; k < s.dims.size(); ++k) {
    const std::uint32_t size = s.dims[k];
    stride /= size;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t c = (i / stride) % size;
      std::uint64_t j;
      if (c + 1 < size) {
        j = i + stride;
      } else if (torus && size > 2) {
        j = i - c * stride; // wrap to coordinate 0
      } else {
        continue;
      }
      g.links.push_back({first + static_cast<LpId>(i), first + static_cast<LpId>(j), s.fabric_bps,
                         s.fabric_latency_ps, s.mtu_bytes});
    }
  }
  return g;
}

TopoGraph build_torus(const ClusterSpec &s) { return build_grid(s, true); }
TopoGraph build_mesh(const ClusterSpec &s) { return build_grid(s, false); }

void check(const ClusterSpec &c, const std::string &file) {
  if (c.dims.empty()) {
    throw InputError(file, "cluster.topology",
                     std::string("'") + fabric_kind_name(c.fabric) +
                         "' needs the switch grid cluster.dims",
                     "set cluster.dims, e.g. \"4x4\"");
  }
}

// auto NIC ports per switch: the NICs spread evenly over the grid.
void resolve(ClusterSpec &c, const TopologyResolve &how) {
  if (!how.nics_per_leaf_auto)
    return;
  const std::uint64_t nics = static_cast<std::uint64_t>(c.hosts) * c.gpus_per_host;
  std::uint64_t n = 1;
  for (auto d : c.dims)
    n *= std::max<std::uint32_t>(d, 1);
  c.nics_per_leaf = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (nics + n - 1) / n));
}

} // namespace

const TopologyBuilder kTorusBuilder = {FabricKind::kTorus, "torus",
                                       "grid of switches (cluster.dims) with wrap-around links",
                                       kGridParams, build_torus, check, resolve, false};
const TopologyBuilder kMeshBuilder = {FabricKind::kMesh, "mesh",
                                      "grid of switches (cluster.dims) without wrap-around",
                                      kGridParams, build_mesh, check, resolve, false};

} // namespace fabricsim::models
