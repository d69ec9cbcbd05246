#pragma once
/// @file registry.hpp
/// The topology kinds (cluster.topology) and their builders. Each kind is one builder file in
/// models/topology/builders/ that defines a TopologyBuilder named k<Id>Builder (its spec keys as
/// a ParamDecl list beside it) and one line in FABRICSIM_TOPOLOGIES below. The FabricKind enum,
/// the cluster.topology enum, the spec key table (jobs/spec.cpp), `fabricsim describe spec`,
/// docs/config.md and the per-kind checks all come from this list.
#include <cstdint>
#include <span>
#include <string>

#include "models/core/param_decl.hpp"

/// One line per kind: X(Id, name) with Id the FabricKind enumerator suffix (FabricKind::k<Id>)
/// and name the cluster.topology spelling; the builder object is k<Id>Builder. Order is the
/// enum order and the documentation order. Every line ends in a backslash; the list ends at the
/// empty line after it.
#define FABRICSIM_TOPOLOGIES(X) \
  X(RailOptimized, rail_optimized) \
  X(LeafSpine, leaf_spine) \
  X(RailOnly, rail_only) \
  X(Torus, torus) \
  X(Mesh, mesh) \
  X(File, file) \
  X(Dragonfly, dragonfly) \


namespace fabricsim::models {

struct ClusterSpec;
struct TopoGraph;

/// Shape of the Ethernet fabric (cluster.topology), one enumerator per registered kind.
enum class FabricKind : std::uint8_t {
#define FABRICSIM_TOPOLOGY_ENUM(id, name) k##id,
  FABRICSIM_TOPOLOGIES(FABRICSIM_TOPOLOGY_ENUM)
#undef FABRICSIM_TOPOLOGY_ENUM
};

/// What a kind's resolve hook knows when the spec's auto values are filled in for a workload.
struct TopologyResolve {
  std::uint32_t ranks = 0;          ///< the workload's ranks
  bool nics_per_leaf_auto = true;   ///< cluster.nics_per_leaf was not given (or "auto")
  std::string sizing_file;  ///< where cluster.hosts / cluster.nics_per_leaf came from (for InputError)
};

/// One topology kind: its name, its spec keys and the functions that check, size and build it.
/// Plain constant data (function pointers may be null where noted).
struct TopologyBuilder {
  FabricKind kind;      ///< its enumerator
  const char *name;     ///< cluster.topology spelling, e.g. "leaf_spine"
  const char *summary;  ///< one phrase for the cluster.topology help
  ParamDecls params;    ///< the kind's own spec keys (documentation order); may be shared by kinds
  /// Builds the graph from a validated spec (null for kinds read from a file).
  /// @throws engine::InputError naming the key and its fix.
  TopoGraph (*build)(const ClusterSpec &spec);
  /// Load-time check of the kind's keys (after the spec is read; `file` is where
  /// cluster.topology came from). Null = none. @throws engine::InputError.
  void (*check)(const ClusterSpec &spec, const std::string &file);
  /// Fills kind-dependent auto values (e.g. NIC ports per switch) once hosts are known. Null =
  /// none. @throws engine::InputError.
  void (*resolve)(ClusterSpec &spec, const TopologyResolve &how);
  /// True when the topology itself fixes the GPUs (a file): hosts/gpus_per_host are not sized
  /// to the workload and resolve() does it all.
  bool fixes_gpus = false;
};

#define FABRICSIM_TOPOLOGY_DECL(id, name) extern const TopologyBuilder k##id##Builder;
FABRICSIM_TOPOLOGIES(FABRICSIM_TOPOLOGY_DECL)
#undef FABRICSIM_TOPOLOGY_DECL

/// Every registered kind, in FABRICSIM_TOPOLOGIES order (index = FabricKind value).
std::span<const TopologyBuilder *const> topology_builders();

/// The builder of a kind.
const TopologyBuilder &topology_builder(FabricKind k);

/// The builder named `name` (cluster.topology spelling), or nullptr.
const TopologyBuilder *find_topology(const std::string &name);

/// The registered names joined as "a, b, c or d" (for help texts and errors).
std::string topology_names();

} // namespace fabricsim::models
