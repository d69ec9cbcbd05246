#pragma once
/// @file link_fault.hpp
/// Link faults as a schedule in simulated time (spec `faults:`, docs/jobs_and_faults.md): a link
/// down and up again, a bit-error rate, a lower rate. The schedule is fixed before the run, so
/// every LP reads the state of a link at its own simulated time from the same list: no fault
/// event crosses LPs, and results are the same on any number of processes and threads.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/event.hpp"
#include "engine/time.hpp"

namespace fabricsim::models {

/// What a fault does to its link.
enum class FaultKind : std::uint8_t {
  kLinkDown,  ///< both directions carry nothing in [at_ps, until_ps)
  kBer,       ///< each frame is lost with probability 1 - (1 - ber)^bits in [at_ps, until_ps)
  kDegrade,   ///< both directions run at rate_bps in [at_ps, until_ps)
};

/// One fault on every link between nodes `a` and `b` (both directions, parallel links too): two
/// Ethernet switches, or (kLinkDown only) a GPU's NIC and its switch.
struct LinkFault {
  static constexpr engine::SimTime kNever = std::numeric_limits<engine::SimTime>::max();
  FaultKind kind = FaultKind::kLinkDown;
  engine::LpId a = 0, b = 0;              ///< the link's ends (LP ids: Ethernet switches, or a GPU and its switch)
  engine::SimTime at_ps = 0;              ///< start (ps)
  engine::SimTime until_ps = kNever;      ///< end (ps, exclusive); kNever = for the rest of the run
  /// kLinkDown: routing drops the link from ECMP sets this long after at_ps (detection +
  /// convergence, ps) and takes it back this long after until_ps.
  engine::SimTime reconverge_ps = 0;
  double ber = 0;             ///< kBer: bit-error rate (0, 1)
  std::uint64_t rate_bps = 0; ///< kDegrade: the lower rate (bits/s)
  /// Index of the spec's `faults:` entry this link fault comes from. A `nic_down` or
  /// `switch_down` entry takes down every link of its NIC or switch: one LinkFault per link,
  /// all with the entry's index.
  std::uint32_t entry = 0;

  bool joins(engine::LpId x, engine::LpId y) const { return (a == x && b == y) || (a == y && b == x); }
  bool active(engine::SimTime t) const { return t >= at_ps && t < until_ps; }
  /// kLinkDown: routing sees the link as down at t (the down window shifted by reconverge_ps).
  bool routed_down(engine::SimTime t) const {
    if (kind != FaultKind::kLinkDown || t < at_ps + reconverge_ps) return false;
    return until_ps == kNever || t < until_ps + reconverge_ps;
  }
};

/// Probability that a frame of `bits` bits is hit by at least one bit error at rate `ber`,
/// 1 - (1 - ber)^bits (independent bit errors), computed without cancellation.
inline double frame_error_probability(double ber, std::uint64_t bits) {
  return -std::expm1(static_cast<double>(bits) * std::log1p(-ber));
}

}  // namespace fabricsim::models
