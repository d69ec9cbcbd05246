// leaf_spine: NICs fill leaves in GPU order, nics_per_leaf per leaf; leaves under spines
// (2 tiers) or pods under a core (3 tiers). docs/topology.md.
#include <algorithm>

#include "models/topology/builders/clos.hpp"

namespace fabricsim::models {

namespace {

TopoGraph build(const ClusterSpec &s) { return builders::build_clos(s, {.nic_major = true}); }

void resolve(ClusterSpec &c, const TopologyResolve &how) {
  if (how.nics_per_leaf_auto) {
    const std::uint64_t nics = static_cast<std::uint64_t>(c.hosts) * c.gpus_per_host;
    c.nics_per_leaf = static_cast<std::uint32_t>(std::min<std::uint64_t>(nics, 32));
  }
}

} // namespace

const TopologyBuilder kLeafSpineBuilder = {FabricKind::kLeafSpine, "leaf_spine",
                                           "NICs fill leaves in order, nics_per_leaf per leaf",
                                           builders::clos_params(), build, nullptr, resolve, false};

} // namespace fabricsim::models
