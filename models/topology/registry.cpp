#include "models/topology/registry.hpp"

#include "engine/errors.hpp"
#include "models/topology/builders/common.hpp"
#include "models/topology/cluster.hpp"

namespace fabricsim::models {

namespace {

#define FABRICSIM_TOPOLOGY_PTR(id, name) &k##id##Builder,
constexpr const TopologyBuilder *kBuilders[] = {FABRICSIM_TOPOLOGIES(FABRICSIM_TOPOLOGY_PTR)};
#undef FABRICSIM_TOPOLOGY_PTR

} // namespace

std::span<const TopologyBuilder *const> topology_builders() { return kBuilders; }

const TopologyBuilder &topology_builder(FabricKind k) {
  return *kBuilders[static_cast<std::size_t>(k)];
}

const TopologyBuilder *find_topology(const std::string &name) {
  for (const TopologyBuilder *b : kBuilders) {
    if (name == b->name)
      return b;
  }
  return nullptr;
}

std::string topology_names() {
  std::string out;
  const std::size_t n = std::size(kBuilders);
  for (std::size_t i = 0; i < n; ++i) {
    out += i == 0 ? "" : i + 1 == n ? " or " : ", ";
    out += kBuilders[i]->name;
  }
  return out;
}

const char *fabric_kind_name(FabricKind k) {
  const auto i = static_cast<std::size_t>(k);
  return i < std::size(kBuilders) ? kBuilders[i]->name : "?";
}

TopoGraph build_graph(const ClusterSpec &spec) {
  const TopologyBuilder &b = topology_builder(spec.fabric);
  if (b.fixes_gpus)
    return b.build(spec);
  builders::check_general(spec);
  if (static_cast<std::uint64_t>(spec.hosts) * spec.gpus_per_host > (1u << 20)) {
    throw engine::InputError(spec.source, "cluster.hosts",
                             "hosts x gpus_per_host is more than 1,048,576 GPUs",
                             "use fewer hosts");
  }
  return b.build(spec);
}

} // namespace fabricsim::models
