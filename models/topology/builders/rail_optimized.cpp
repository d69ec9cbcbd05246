// rail_optimized: NIC j of every host in a group of nics_per_leaf hosts goes to rail j's leaf;
// leaves under spines (2 tiers) or pods under a core (3 tiers). docs/topology.md.
#include <algorithm>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/builders/clos.hpp"

namespace fabricsim::models {

namespace {

TopoGraph build(const ClusterSpec &s) { return builders::build_clos(s, {}); }

void resolve(ClusterSpec &c, const TopologyResolve &how) {
  if (!how.nics_per_leaf_auto && c.hosts > c.nics_per_leaf && c.hosts % c.nics_per_leaf != 0) {
    // Every rail group must be whole: each rail has one NIC per host, nics_per_leaf hosts per
    // leaf. (leaf_spine keeps a partly filled last leaf: NICs simply fill leaves in order.)
    throw engine::InputError(
        how.sizing_file, "cluster.nics_per_leaf",
        std::to_string(c.nics_per_leaf) + " does not divide the " + std::to_string(c.hosts) +
            " hosts of each rail (one NIC per host per rail)",
        "choose nics_per_leaf dividing " + std::to_string(c.hosts) + " or leave it auto");
  }
}

} // namespace

const TopologyBuilder kRailOptimizedBuilder = {
    FabricKind::kRailOptimized, "rail_optimized",
    "NIC j of every host in a group of nics_per_leaf hosts on rail j's leaf",
    builders::clos_params(), build, nullptr, resolve, false};

} // namespace fabricsim::models
