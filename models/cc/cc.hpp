#pragma once
/// @file cc.hpp
/// The interface between the NIC (models/packet/nic.cpp) and a congestion-control algorithm:
/// the sender's per-QP reaction point and the receiver's notification point.
///
/// An algorithm is a class with static members only (no object, no virtual call): the NIC keeps
/// the algorithm's per-QP `State` in a vector of its own (models/cc/registry.hpp, CcStates) and
/// dispatches every hook with a switch on CcKind. A class `A` provides:
///
///   using Params = ...;  // its spec parameters (a plain struct with defaults), in CcParams
///   struct State {...};  // per acknowledged QP; an empty struct is stored nowhere
///   static constexpr const char* kName;      // the nic.cc value
///   static constexpr const char* kSummary;   // one phrase for the nic.cc help
///   static constexpr CcTraits kTraits;
///   static ParamDecls decls();               // its spec keys (cc.<name>_*), documentation order
///   static void parse(const SpecReader&, Params&);         // reads those keys
///   static void validate(const Params&, const SpecReader&); // cross-field checks
///   static State init(const Params&, const QpInit&);       // a new acknowledged QP
///   static double rate_bps(const State&, const QpLink&);   // pacing rate now
///   static bool window_open(const State&, const TxWindow&); // may the QP send one more packet
///   static void on_send(State&, const Params&, const QpLink&, std::uint32_t wire_bytes, engine::SimTime now);
///   static void on_ack(State&, const Params&, const QpLink&, const AckInfo&, engine::SimTime now);
///   static void on_cnp(State&, const Params&, const QpLink&, engine::SimTime now);
///   static bool notify_ce(const Params&, engine::SimTime& last_cnp, engine::SimTime now);
///
/// Timers (DCQCN's alpha and rate timers) are evaluated lazily, in time order, at the QP's next
/// hook call: an algorithm schedules no events.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "engine/time.hpp"
#include "models/core/packet.hpp"
#include "models/core/param_decl.hpp"

namespace fabricsim::models::cc {

/// What the NIC needs to know about an algorithm outside its hooks.
struct CcTraits {
  /// Default of nic.ack_interval (one ACK per this many in-order packets) when the spec gives 0.
  std::uint32_t ack_interval = 4;
  /// Switches append in-band telemetry (INT, models/core/packet.hpp IntHop) to data packets,
  /// and the receiver echoes it in the ACK (AckInfo::hops).
  bool wants_int = false;
  /// The receiver calls notify_ce for CE-marked data and sends a CNP when it returns true.
  bool notify_on_ce = false;
  /// The QP's base path RTT (QpInit::path_rtt_ps) is computed at QP creation.
  bool needs_path_rtt = false;
  /// window_open can return false (the scheduler asks it before every data packet).
  bool windowed = false;
  /// rate_bps can be below the line rate (the NIC paces the QP's packets).
  bool paced = true;
  /// Every data packet carries the time its last byte left the sender, the receiver echoes it
  /// in the ACK, and on_ack gets the RTT sample (AckInfo::rtt_ps). The stamp travels in the INT
  /// slot hops[0]: not together with wants_int.
  bool echo_send_time = false;
};

/// The link of an acknowledged QP, as every hook sees it.
struct QpLink {
  std::uint64_t line_bps = 0;  ///< line rate of the QP's NIC port (bits/s)
  std::uint32_t mtu = 0;       ///< MTU of that port (payload bytes)
};

/// What an algorithm starts a new acknowledged QP from.
struct QpInit {
  QpLink link;
  /// Base RTT of the QP's path (ps): twice the sum of link latencies plus one full data packet
  /// and one control frame serialization per hop. Computed only with CcTraits::needs_path_rtt
  /// (else 0).
  engine::SimTime path_rtt_ps = 0;
};

/// A cumulative ACK as the sender's algorithm sees it.
struct AckInfo {
  std::uint32_t psn = 0;      ///< next PSN the receiver expects
  std::uint32_t snd_nxt = 0;  ///< the QP's next PSN to send, when the ACK arrives
  std::uint32_t nint = 0;     ///< INT hops in `hops` (CcTraits::wants_int; else 0)
  const IntHop* hops = nullptr;
  /// RTT sample (ps): the ACK's arrival minus the time the last byte of the data packet that
  /// triggered it left the sender (CcTraits::echo_send_time; else -1). Without that packet's
  /// serialization at the sender, with everything after it: propagation and queueing both
  /// ways, the receiver's nic.nic_delay, the ACK's serialization.
  engine::SimTime rtt_ps = -1;
};

/// The send window of a QP when the scheduler considers its next data packet.
struct TxWindow {
  std::uint32_t snd_una = 0;       ///< oldest unacknowledged PSN
  std::uint32_t snd_nxt = 0;       ///< next PSN to send (>= snd_una)
  std::uint32_t packet_bytes = 0;  ///< wire bytes of a full data packet (MTU + nic.header_bytes)
};

/// Reads spec values for an algorithm's parse and validate.
struct SpecReader {
  /// The key's text if the spec gives it (recording where it came from), else nullopt.
  std::function<std::optional<std::string>(const std::string&)> get;
  /// The file (or "<cli>") to name in an error about the key.
  std::function<std::string(const std::string&)> file_of;
};

/// One spec key of an algorithm: its declaration, the member of `P` it sets, and the accepted
/// range [lo, hi] (in the member's unit: ps, bytes, bits/s or the plain number). The member's
/// type follows the declaration's type: "double" double, "time" engine::SimTime, "bytes" and
/// "rate" (bits/s) std::uint64_t, "int" std::uint32_t.
template <class P>
struct ParamField {
  ParamDecl decl;
  std::variant<double P::*, engine::SimTime P::*, std::uint64_t P::*, std::uint32_t P::*> member;
  double lo = 0;
  double hi = 0;
};

/// The declarations of `fields`, in their order (what an algorithm's decls() returns).
template <class P, std::size_t N>
constexpr std::array<ParamDecl, N> decls_of(const ParamField<P> (&fields)[N]) {
  std::array<ParamDecl, N> d{};
  for (std::size_t i = 0; i < N; ++i) d[i] = fields[i].decl;
  return d;
}

/// Parses the value of `key` (a "double" in [lo, hi]) into `out` if given.
/// @throws engine::InputError naming the file, the key and the range.
void read_double(const SpecReader& r, const std::string& key, double lo, double hi, double& out);
/// Parses a "time" in [lo, hi] (ps). @throws engine::InputError.
void read_time(const SpecReader& r, const std::string& key, engine::SimTime lo, engine::SimTime hi, engine::SimTime& out);
/// Parses a "bytes" value in [lo, hi]. @throws engine::InputError.
void read_bytes(const SpecReader& r, const std::string& key, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out);
/// Parses a "rate" (e.g. 10Mbps) in [lo, hi] bits/s. @throws engine::InputError.
void read_rate(const SpecReader& r, const std::string& key, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out);
/// Parses an "int" (non-negative integer) in [lo, hi]. @throws engine::InputError.
void read_count(const SpecReader& r, const std::string& key, std::uint32_t lo, std::uint32_t hi, std::uint32_t& out);
/// An algorithm's fields' declaration or member type do not match (a programming error).
/// @throws engine::InternalError naming the key.
[[noreturn]] void field_type_mismatch(const char* key);

/// Reads every field of `fields` into `p` by its declared type (ParamField).
/// @throws engine::InputError for a bad value, engine::InternalError for a mismatched field.
template <class P>
void read_fields(std::span<const ParamField<P>> fields, const SpecReader& r, P& p) {
  for (const ParamField<P>& f : fields) {
    const std::string key = f.decl.path;
    const std::string type = f.decl.type;
    if (type == "double" && std::holds_alternative<double P::*>(f.member)) {
      read_double(r, key, f.lo, f.hi, p.*std::get<double P::*>(f.member));
    } else if (type == "time" && std::holds_alternative<engine::SimTime P::*>(f.member)) {
      read_time(r, key, static_cast<engine::SimTime>(f.lo), static_cast<engine::SimTime>(f.hi), p.*std::get<engine::SimTime P::*>(f.member));
    } else if (type == "bytes" && std::holds_alternative<std::uint64_t P::*>(f.member)) {
      read_bytes(r, key, static_cast<std::uint64_t>(f.lo), static_cast<std::uint64_t>(f.hi),
                 p.*std::get<std::uint64_t P::*>(f.member));
    } else if (type == "rate" && std::holds_alternative<std::uint64_t P::*>(f.member)) {
      read_rate(r, key, static_cast<std::uint64_t>(f.lo), static_cast<std::uint64_t>(f.hi),
                p.*std::get<std::uint64_t P::*>(f.member));
    } else if (type == "int" && std::holds_alternative<std::uint32_t P::*>(f.member)) {
      read_count(r, key, static_cast<std::uint32_t>(f.lo), static_cast<std::uint32_t>(f.hi),
                 p.*std::get<std::uint32_t P::*>(f.member));
    } else {
      field_type_mismatch(f.decl.path);
    }
  }
}

}  // namespace fabricsim::models::cc
