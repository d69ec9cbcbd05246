#pragma once
/// @file common.hpp
/// Pieces every generated topology shares: the checks of the general cluster keys, the GPUs and
/// their NVSwitches (the first nodes of every generated graph), and the reading of a builder's
/// own raw keys (ClusterSpec::topology_params).
#include <cstdint>
#include <string>

#include "models/topology/cluster.hpp"

namespace fabricsim::models::builders {

/// ceil(a / b) for b > 0.
inline std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

/// Checks the keys every generated topology reads (hosts, GPUs, rates, latencies, MTUs, tiers,
/// pods, NVLink domain, NIC ports per switch, oversubscription ratios).
/// @throws engine::InputError naming the key and its fix.
void check_general(const ClusterSpec &s);

/// Appends the spec's hosts x gpus_per_host GPU nodes (LP i = GPU i) and one NVSwitch per
/// scale-up domain of more than one GPU, linked to its GPUs at the NVLink rate.
void add_gpus_and_nvswitches(TopoGraph &g, const ClusterSpec &s);

/// A builder's own whole-number key from ClusterSpec::topology_params: `fallback` when the key
/// is absent or "auto", else its value, which must lie in [min_value, 2^32 - 1].
/// @throws engine::InputError (spec.source, key) when it is not such a number.
std::uint32_t param_uint(const ClusterSpec &s, const std::string &key, std::uint32_t fallback,
                         std::uint32_t min_value);

/// True when the builder key `key` is given (and not "auto") in ClusterSpec::topology_params.
bool param_given(const ClusterSpec &s, const std::string &key);

} // namespace fabricsim::models::builders
