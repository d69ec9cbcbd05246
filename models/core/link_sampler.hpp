#pragma once
/// @file link_sampler.hpp
/// Sparse per-port time series of an LP's egress links: bytes serialized per bin and the largest
/// queue backlog per bin (HDF5 /links and /queues, docs/hdf5_schema.md). Off (no cost beyond one
/// branch per packet) until enable() is called.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/state_io.hpp"
#include "engine/time.hpp"

namespace fabricsim::models {

__extension__ typedef unsigned __int128 SamplerU128;  // exact bytes x time products

/// Collects bins of width `bin_ps` for the ports of one LP. A port's transmissions and arrivals
/// happen in non-decreasing time order (FIFO egress), so each series is append-only and only
/// bins with traffic exist: memory is bounded by min(packets, simulated time / bin width) per port.
class LinkSampler {
 public:
  /// One bin of one port.
  struct Bin {
    std::uint32_t port = 0;
    engine::SimTime bin_start_ps = 0;
    std::uint64_t value = 0;  ///< bytes (tx series) or max backlog bytes (queue series)
  };

  /// @param bin_ps bin width (ps, > 0); @param ports number of egress ports of the LP
  void enable(engine::SimTime bin_ps, std::size_t ports) {
    bin_ps_ = bin_ps;
    last_tx_.assign(ports, kNone);
    last_q_.assign(ports, kNone);
    last_pause_.assign(ports, kNone);
    last_cnt_.assign(ports, kNone);
  }
  bool enabled() const { return bin_ps_ > 0; }

  /// `bytes` serialized on `port` during [start, end) (ps); split over the bins it spans in
  /// proportion to time, integer parts assigned so that the bins sum to `bytes` exactly.
  void tx(std::uint32_t port, engine::SimTime start, engine::SimTime end, std::uint64_t bytes) {
    if (bin_ps_ <= 0 || bytes == 0) return;
    if (end <= start) {
      add(tx_, last_tx_[port], port, start - start % bin_ps_, bytes, false);
      return;
    }
    const auto dur = static_cast<SamplerU128>(end - start);
    std::uint64_t given = 0;
    for (engine::SimTime b = start - start % bin_ps_; b < end; b += bin_ps_) {
      const engine::SimTime upto = std::min(end, b + bin_ps_);
      const auto cum = static_cast<std::uint64_t>(
          static_cast<SamplerU128>(bytes) * static_cast<SamplerU128>(upto - start) / dur);
      add(tx_, last_tx_[port], port, b, cum - given, false);
      given = cum;
    }
  }
  /// A packet arrived at `t` (ps) and found `backlog_bytes` ahead of it on `port`.
  void queue(std::uint32_t port, engine::SimTime t, std::uint64_t backlog_bytes) {
    if (bin_ps_ <= 0) return;
    add(q_, last_q_[port], port, t - t % bin_ps_, backlog_bytes, true);
  }

  /// The port's transmitter was paused by PFC during [start, end) (ps); split over the bins.
  /// Intervals of one port arrive in time order (recorded when the XON comes).
  void paused(std::uint32_t port, engine::SimTime start, engine::SimTime end) {
    if (bin_ps_ <= 0 || end <= start) return;
    for (engine::SimTime b = start - start % bin_ps_; b < end; b += bin_ps_) {
      const engine::SimTime lo = std::max(start, b), hi = std::min(end, b + bin_ps_);
      add(pause_, last_pause_[port], port, b, static_cast<std::uint64_t>(hi - lo), false);
    }
  }
  /// Counters of one port per bin: PFC XOFF frames received (they pause this port's
  /// transmitter), ECN marks and drops at this egress port.
  struct CountBin {
    std::uint32_t port = 0;
    engine::SimTime bin_start_ps = 0;
    std::uint64_t xoff = 0, marks = 0, drops = 0;
  };
  enum class Count { kXoff, kMark, kDrop };
  void count(std::uint32_t port, engine::SimTime t, Count what) {
    if (bin_ps_ <= 0) return;
    const engine::SimTime b = t - t % bin_ps_;
    std::size_t& last = last_cnt_[port];
    if (last == kNone || cnt_[last].bin_start_ps != b) {
      last = cnt_.size();
      cnt_.push_back(CountBin{port, b, 0, 0, 0});
    }
    CountBin& c = cnt_[last];
    (what == Count::kXoff ? c.xoff : what == Count::kMark ? c.marks : c.drops) += 1;
  }

  const std::vector<Bin>& tx_bins() const { return tx_; }
  const std::vector<Bin>& queue_bins() const { return q_; }
  /// Paused picoseconds per bin (value), per port.
  const std::vector<Bin>& pause_bins() const { return pause_; }
  const std::vector<CountBin>& count_bins() const { return cnt_; }

  /// Checkpoints: writes every bin and per-port cursor; load() restores them exactly.
  void save(engine::StateWriter& w) const {
    w.put(bin_ps_);
    w.put_vector(last_tx_);
    w.put_vector(last_q_);
    w.put_vector(last_pause_);
    w.put_vector(last_cnt_);
    w.put_vector(tx_);
    w.put_vector(q_);
    w.put_vector(pause_);
    w.put_vector(cnt_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    bin_ps_ = r.get<engine::SimTime>();
    last_tx_ = r.get_vector<std::size_t>();
    last_q_ = r.get_vector<std::size_t>();
    last_pause_ = r.get_vector<std::size_t>();
    last_cnt_ = r.get_vector<std::size_t>();
    tx_ = r.get_vector<Bin>();
    q_ = r.get_vector<Bin>();
    pause_ = r.get_vector<Bin>();
    cnt_ = r.get_vector<CountBin>();
  }

 private:
  static constexpr std::size_t kNone = ~std::size_t{0};
  static void add(std::vector<Bin>& v, std::size_t& last, std::uint32_t port, engine::SimTime b,
                  std::uint64_t value, bool take_max) {
    if (last != kNone && v[last].bin_start_ps == b) {
      v[last].value = take_max ? std::max(v[last].value, value) : v[last].value + value;
      return;
    }
    last = v.size();
    v.push_back(Bin{port, b, value});
  }

  engine::SimTime bin_ps_ = 0;
  std::vector<std::size_t> last_tx_, last_q_, last_pause_, last_cnt_;
  std::vector<Bin> tx_, q_, pause_;
  std::vector<CountBin> cnt_;
};

}  // namespace fabricsim::models
