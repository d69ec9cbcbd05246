#pragma once
/// @file registry.hpp
/// The congestion-control algorithms fabricsim knows, and everything generated from that list:
/// CcKind (the nic.cc values), CcParams (every algorithm's parameters, in FabricParams), the
/// name <-> kind parse and print, the spec keys (cc.*, jobs/fabric_spec.cpp) and CcStates, the
/// per-NIC store of per-QP state with the switch that dispatches each hook (models/cc/cc.hpp).
/// Adding an algorithm: its file pair models/cc/<name>.{hpp,cpp}, its #include below and one
/// X(<name>, <Class>) line in FABRICSIM_CC_LIST.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/state_io.hpp"
#include "engine/time.hpp"
#include "models/cc/cc.hpp"
#include "models/cc/dcqcn.hpp"
#include "models/cc/hpcc.hpp"
#include "models/cc/none.hpp"
#include "models/cc/timely.hpp"

/// X(name, Class) per algorithm: `name` is its nic.cc value and its CcParams member, `Class`
/// its plug-in class in fabricsim::models::cc and CcKind::k<Class>. Order: nic.cc help, the
/// spec keys in `fabricsim describe spec`.
#define FABRICSIM_CC_LIST(X) \
  X(none, None)              \
  X(dcqcn, Dcqcn)            \
  X(hpcc, Hpcc)              \
  X(timely, Timely)          \
  /* end of FABRICSIM_CC_LIST */

namespace fabricsim::models {

/// Congestion control at the NIC (nic.cc), one value per registered algorithm.
enum class CcKind : std::uint8_t {
#define FABRICSIM_CC_ENUM(name, Class) k##Class,
  FABRICSIM_CC_LIST(FABRICSIM_CC_ENUM)
#undef FABRICSIM_CC_ENUM
};

/// Every registered algorithm's parameters (member `name` of type Class::Params).
struct CcParams {
#define FABRICSIM_CC_PARAMS(name, Class) cc::Class::Params name;
  FABRICSIM_CC_LIST(FABRICSIM_CC_PARAMS)
#undef FABRICSIM_CC_PARAMS
};

/// The nic.cc value of `k` ("?" for a value outside the enum).
const char* cc_name(CcKind k);
/// Parses a registered nic.cc value. @throws engine::InputError naming `file` and `field`, with
/// the registered names as the fix.
CcKind parse_cc(const std::string& v, const std::string& file, const std::string& field);

namespace cc {

/// The help text of nic.cc: every registered name with its summary.
const std::string& kind_help();
/// Every registered algorithm's spec keys, in list order.
const std::vector<ParamDecl>& param_decls();
/// Reads every algorithm's keys into `p`. @throws engine::InputError.
void parse_params(const SpecReader& r, CcParams& p);
/// Every algorithm's cross-field checks. @throws engine::InputError.
void validate_params(const CcParams& p, const SpecReader& r);

/// The traits of algorithm `k` (CcTraits).
constexpr CcTraits traits(CcKind k) {
  switch (k) {
#define FABRICSIM_CC_TRAITS(name, Class) \
  case CcKind::k##Class: return Class::kTraits;
    FABRICSIM_CC_LIST(FABRICSIM_CC_TRAITS)
#undef FABRICSIM_CC_TRAITS
  }
  return CcTraits{};
}

#define FABRICSIM_CC_CHECK(name, Class)                                                     \
  static_assert(!(Class::kTraits.wants_int && Class::kTraits.echo_send_time),                \
                #Class ": the send-time echo uses the INT slot hops[0], so not both");
FABRICSIM_CC_LIST(FABRICSIM_CC_CHECK)
#undef FABRICSIM_CC_CHECK

/// Bytes the NIC stores per acknowledged QP for algorithm `k` (0 for an empty State).
constexpr std::size_t state_bytes(CcKind k) {
  switch (k) {
#define FABRICSIM_CC_BYTES(name, Class) \
  case CcKind::k##Class: return std::is_empty_v<Class::State> ? 0 : sizeof(Class::State);
    FABRICSIM_CC_LIST(FABRICSIM_CC_BYTES)
#undef FABRICSIM_CC_BYTES
  }
  return 0;
}

/// Per-QP state of the selected algorithm for one NIC's acknowledged QPs (index: the QP's
/// acknowledged-QP index, as the NIC's RelQp), and the dispatch of every hook: a switch on
/// the kind, no virtual call. Only the selected algorithm's vector holds elements.
class CcStates {
 public:
  /// `params` must outlive this object.
  CcStates(CcKind kind, const CcParams& params) : kind_(kind), traits_(cc::traits(kind)), params_(&params) {}

  CcKind kind() const { return kind_; }
  const CcTraits& traits() const { return traits_; }

  /// Appends the state of the next acknowledged QP (index = the number added before).
  void add(const QpInit& q) {
    switch (kind_) {
#define FABRICSIM_CC_ADD(name, Class)                                                    \
  case CcKind::k##Class:                                                                 \
    if constexpr (!std::is_empty_v<Class::State>) name##_.push_back(Class::init(params_->name, q)); \
    return;
      FABRICSIM_CC_LIST(FABRICSIM_CC_ADD)
#undef FABRICSIM_CC_ADD
    }
  }
  /// Pacing rate of QP `i` (bits/s); the line rate when not limited.
  double rate_bps(std::uint32_t i, const QpLink& l) const {
    switch (kind_) {
#define FABRICSIM_CC_RATE(name, Class) \
  case CcKind::k##Class: return Class::rate_bps(at(name##_, i), l);
      FABRICSIM_CC_LIST(FABRICSIM_CC_RATE)
#undef FABRICSIM_CC_RATE
    }
    return static_cast<double>(l.line_bps);
  }
  /// Whether QP `i` may send its next data packet now (windowed algorithms).
  bool window_open(std::uint32_t i, const TxWindow& w) const {
    switch (kind_) {
#define FABRICSIM_CC_WINDOW(name, Class) \
  case CcKind::k##Class: return Class::window_open(at(name##_, i), w);
      FABRICSIM_CC_LIST(FABRICSIM_CC_WINDOW)
#undef FABRICSIM_CC_WINDOW
    }
    return true;
  }
  /// QP `i` sent a data packet of `wire_bytes` at `now`.
  void on_send(std::uint32_t i, const QpLink& l, std::uint32_t wire_bytes, engine::SimTime now) {
    switch (kind_) {
#define FABRICSIM_CC_SEND(name, Class) \
  case CcKind::k##Class: Class::on_send(at(name##_, i), params_->name, l, wire_bytes, now); return;
      FABRICSIM_CC_LIST(FABRICSIM_CC_SEND)
#undef FABRICSIM_CC_SEND
    }
  }
  /// QP `i` got a cumulative ACK (before the NIC advances snd_una).
  void on_ack(std::uint32_t i, const QpLink& l, const AckInfo& a, engine::SimTime now) {
    switch (kind_) {
#define FABRICSIM_CC_ACK(name, Class) \
  case CcKind::k##Class: Class::on_ack(at(name##_, i), params_->name, l, a, now); return;
      FABRICSIM_CC_LIST(FABRICSIM_CC_ACK)
#undef FABRICSIM_CC_ACK
    }
  }
  /// QP `i` got a congestion notification packet.
  void on_cnp(std::uint32_t i, const QpLink& l, engine::SimTime now) {
    switch (kind_) {
#define FABRICSIM_CC_CNP(name, Class) \
  case CcKind::k##Class: Class::on_cnp(at(name##_, i), params_->name, l, now); return;
      FABRICSIM_CC_LIST(FABRICSIM_CC_CNP)
#undef FABRICSIM_CC_CNP
    }
  }
  /// Receiver: CE-marked data arrived on a receive QP whose last CNP went out at `last_cnp`
  /// (< 0: none yet); true = send a CNP now (the algorithm updated `last_cnp`).
  bool notify_ce(engine::SimTime& last_cnp, engine::SimTime now) const {
    switch (kind_) {
#define FABRICSIM_CC_NOTIFY(name, Class) \
  case CcKind::k##Class: return Class::notify_ce(params_->name, last_cnp, now);
      FABRICSIM_CC_LIST(FABRICSIM_CC_NOTIFY)
#undef FABRICSIM_CC_NOTIFY
    }
    return false;
  }

  /// Checkpoints: writes every QP's state of the selected algorithm; load() restores it (the
  /// kind and parameters come from the spec, by construction).
  void save(engine::StateWriter& w) const {
#define FABRICSIM_CC_SAVE(name, Class) w.put_vector(name##_);
    FABRICSIM_CC_LIST(FABRICSIM_CC_SAVE)
#undef FABRICSIM_CC_SAVE
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
#define FABRICSIM_CC_LOAD(name, Class) name##_ = r.get_vector<Class::State>();
    FABRICSIM_CC_LIST(FABRICSIM_CC_LOAD)
#undef FABRICSIM_CC_LOAD
  }

 private:
  /// Element `i` of an algorithm's vector. An empty State is stored nowhere: every QP shares
  /// one value without members (nothing to race on between threads).
  template <class S>
  static S& at(std::vector<S>& v, std::uint32_t i) {
    if constexpr (std::is_empty_v<S>) {
      static S empty;
      return empty;
    } else {
      return v[i];
    }
  }
  template <class S>
  static const S& at(const std::vector<S>& v, std::uint32_t i) {
    if constexpr (std::is_empty_v<S>) {
      static const S empty{};
      return empty;
    } else {
      return v[i];
    }
  }

  CcKind kind_;
  CcTraits traits_;
  const CcParams* params_;
#define FABRICSIM_CC_STATES(name, Class) std::vector<Class::State> name##_;
  FABRICSIM_CC_LIST(FABRICSIM_CC_STATES)
#undef FABRICSIM_CC_STATES
};

}  // namespace cc
}  // namespace fabricsim::models
