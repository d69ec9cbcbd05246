// rail_only: rail-optimized leaves, spines only within a rail, so rails never interconnect
// (cross-rail traffic must use NVLink first). docs/topology.md.
#include "models/topology/builders/clos.hpp"

namespace fabricsim::models {

namespace {

TopoGraph build(const ClusterSpec &s) { return builders::build_clos(s, {.rail_only = true}); }

} // namespace

const TopologyBuilder kRailOnlyBuilder = {
    FabricKind::kRailOnly, "rail_only",
    "rail-optimized leaves with spines per rail; rails never interconnect",
    builders::clos_params(), build, nullptr, nullptr, false};

} // namespace fabricsim::models
