#pragma once
/// @file simulator.hpp
/// The PDES kernel: conservative synchronous windows across MPI processes and threads.
///
/// Each MPI process owns a set of LPs, split among its threads (one writer per LP). A window is
/// [T, T + W): T is the global minimum next-event time (gathered by the window exchange, so idle
/// time is skipped) and W the lookahead, the minimum latency of the links cut by the partition
/// (between processes or threads). Inside a window each thread handles only its own LPs'
/// events; events for other threads or processes go to outboxes and are exchanged at the
/// window's end (DESIGN.md §2).
///
/// Window exchange between processes: one point-to-point message per ordered pair of
/// processes and window, no collective call (was MPI_Alltoall + MPI_Alltoallv + two
/// MPI_Allreduce). The message header carries the sender's queue minimum (and which of its
/// threads holds it alone, and the other threads' minimum), its error flag, and the earliest
/// event it is sending; the global minimum is the minimum over all of these
/// (events in flight count, so no second round is needed after the exchange), and every process
/// computes it, and learns of any error, from the same headers. The events follow in a compact
/// wire form (32-byte header + the payload up to its last non-zero 8-byte word). Waits poll for
/// 50 us, then poll and yield.
///
/// Widened window: a unit (a process's thread) can only receive an event generated at or after
/// the earliest next-event time of the other units, plus W. So when one unit alone holds the
/// global minimum T and every other unit's next event (any event in flight counted as
/// possibly its) is at m2 > T, that unit runs to min(m2, T + W) + W instead of T + W;
/// the others run to T + W. The bound is the classic conservative one (Chandy-Misra-Bryant
/// earliest input time with a uniform lookahead); results never depend on window bounds.
#include <mpi.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/event.hpp"
#include "engine/event_queue.hpp"
#include "engine/lp.hpp"
#include "engine/time.hpp"

namespace fabricsim::engine {

/// Engine counters. Per process from stats(), summed over processes from global_stats().
struct EngineStats {
  std::uint64_t events = 0;          ///< events handled (committed: conservative sync never rolls back)
  std::uint64_t windows = 0;         ///< synchronization windows
  std::uint64_t remote_events = 0;   ///< events sent to another MPI process
  std::uint64_t thread_events = 0;   ///< events sent to another thread of the same process
  /// Bytes of window-exchange messages sent to other processes (headers included); summed.
  std::uint64_t exchange_bytes = 0;
  /// Window-exchange messages sent to other processes (one per peer and window); summed.
  std::uint64_t exchange_messages = 0;
  double wall_s = 0;                 ///< wall time of run(), max over processes in global_stats()
  /// Wall time in the window exchange: packing, MPI (including waiting for the slowest process)
  /// and queueing received events; max over processes in global_stats().
  double sync_s = 0;
  std::uint32_t processes = 1;
  std::uint32_t threads = 1;
  SimTime lookahead_ps = kInfinity;  ///< the window width W
  SimTime end_time_ps = 0;           ///< time of the last handled event (max over processes)
  /// Committed events per wall second.
  double events_per_s() const { return wall_s > 0 ? static_cast<double>(events) / wall_s : 0.0; }
};

/// A model's own progress figures on one process (Simulator::set_progress). The engine sums
/// them over processes; their unit is the model's (fabricsim's run: work in ps, see
/// jobs/progress.hpp).
struct ProgressWork {
  double done = 0;   ///< work completed so far
  double total = 0;  ///< work of the whole run
};

/// What a progress report carries: figures of the whole run, summed over every thread and
/// process (rank 0 receives them; see Simulator::set_progress).
struct ProgressInfo {
  /// Simulated time reached (ps): every event before it has been handled. At a window boundary
  /// the global minimum next-event time; inside the window of a one-unit run (one process, one
  /// thread) the time of the latest event.
  SimTime now_ps = 0;
  std::uint64_t events = 0;   ///< events handled so far, all threads and processes
  double wall_s = 0;          ///< wall time since run() started (rank 0's clock)
  ProgressWork work;          ///< the model's figures (ProgressWork), summed over processes
};

/// Checkpoints and stop requests (docs/checkpoint.md). Both act only at a window boundary, where
/// every event of every process is in an event queue (none in flight) and every process has the
/// same view: requests travel in the window-exchange headers (bits of the error word), so every
/// process sees them in the same window at no extra message.
struct RunControl {
  /// Simulated times (ps, ascending): a checkpoint at the first boundary at or after each, i.e.
  /// once every event before it was handled. Times at or before a restart's time are skipped.
  std::vector<SimTime> checkpoint_at;
  /// Wall seconds between checkpoints (0: off); rank 0's clock, read once per window (and every
  /// 2^16 events inside a window, which ends early when one is due).
  double checkpoint_every_s = 0;
  /// Set asynchronously (a signal handler): stop at the next boundary. Read once per window and
  /// every 2^16 events inside a window, which then ends early (a window is unbounded when
  /// nothing is cut, e.g. one process with one thread).
  const volatile std::sig_atomic_t* stop_flag = nullptr;
  /// Write a checkpoint at the boundary where a stop request stops the run.
  bool checkpoint_at_stop = false;
  /// Called on every process's thread 0 at a checkpoint boundary with its time (ps); collective.
  /// It may call Simulator::save_state(). Exceptions end the run (rethrown by run()).
  std::function<void(SimTime)> on_checkpoint;
};

/// Where every LP runs. `proc[lp]` is the MPI rank, `thread[lp]` the thread inside it.
struct Placement {
  std::vector<std::int32_t> proc;
  std::vector<std::uint16_t> thread;
  std::uint32_t threads = 1;  ///< threads per process
};

class Simulator;

/// What a handler may do: read the clock and schedule events. One per thread.
class Context {
 public:
  /// Current simulated time (ps).
  SimTime now() const { return now_; }
  /// The LP being run.
  LpId self() const { return self_; }
  /// Schedules `kind` with `payload` for `dst` at absolute time `time`.
  /// Rules (violations throw InternalError, exit 3): time >= now; an event to another LP needs
  /// time > now; an event to an LP of another thread or process needs time >= the window end,
  /// which holds whenever the delay is at least the cut link's latency.
  template <class T>
  void send(LpId dst, SimTime time, std::uint32_t kind, const T& payload) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kPayloadBytes);
    // The payload is written once, where it is queued: the model's bytes, then zeros.
    dispatch(dst, time, kind, &payload, sizeof(T));
  }
  /// Schedules an event without payload (all 64 payload bytes read as zero).
  void send(LpId dst, SimTime time, std::uint32_t kind) { dispatch(dst, time, kind, nullptr, 0); }
  /// Schedules a prepared event (src and seq are filled in here).
  void send_event(const Event& ev) { dispatch(ev.dst, ev.time, ev.kind, ev.payload.data(), kPayloadBytes); }

 private:
  friend class Simulator;
  /// Numbers the event (src, seq), checks the rules and queues it: in this thread's queue when
  /// the destination is one of its LPs (the hot path, inline), else in an outbox.
  inline void dispatch(LpId dst, SimTime time, std::uint32_t kind, const void* payload,
                       std::size_t bytes);
  /// Throws the error for a send that breaks a rule (cold path).
  [[noreturn]] void bad_send(LpId dst, SimTime time) const;
  Simulator* sim_ = nullptr;
  EventQueue* queue_ = nullptr;          // this thread's queue
  std::uint64_t* seq_ = nullptr;         // per-LP send counters (Simulator::seq_)
  const std::uint16_t* owner_ = nullptr;  // per LP: its thread if local, else kNotLocal
  LpId num_lps_ = 0;
  std::uint32_t thread_ = 0;
  SimTime now_ = 0;
  LpId self_ = 0;
};

/// The engine. Construct on every MPI process with the same placement, register the local LPs,
/// then run(). Not copyable.
class Simulator {
 public:
  /// @param comm       MPI communicator of the run (the engine duplicates it)
  /// @param placement  proc/thread per LP (all processes pass the same)
  /// @param lookahead_ps window width W: minimum latency of links cut by the placement
  ///                    (kInfinity when nothing is cut). Must be >= 1.
  /// @throws InputError if the placement names a process outside comm or a thread >= threads.
  Simulator(MPI_Comm comm, Placement placement, SimTime lookahead_ps);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  /// True if `lp` runs in this process.
  bool is_local(LpId lp) const { return placement_.proc[lp] == rank_; }
  /// Registers a local LP (not owned). Every local LP must be registered before run().
  void add_lp(LpId id, Lp* lp);
  /// Runs until no events remain, the next event is at or after `end_time`, or a stop request
  /// (RunControl::stop_flag) was seen at a window boundary (then stopped() is true).
  /// After load_state() it continues from the restored state instead of calling init().
  void run(SimTime end_time = kInfinity);

  /// Sets the checkpoint times and the stop flag (before run()).
  void set_control(RunControl control);
  /// True if the last run() ended on a stop request, before the events were exhausted.
  bool stopped() const { return stopped_; }
  /// The boundary where run() last stopped or checkpointed: every event before it was handled (ps).
  SimTime boundary_ps() const { return boundary_ps_; }
  /// Events this process handled so far (between windows: from RunControl::on_checkpoint).
  std::uint64_t handled_events() const {
    std::uint64_t n = 0;
    for (const auto& ts : threads_) n += ts->events;
    return n;
  }
  /// The first local LP (in id order) whose checkpointable() is false, or nullptr.
  const Lp* first_uncheckpointable() const;
  /// This process's state at a window boundary (only from RunControl::on_checkpoint, or after
  /// run() returned): engine counters, per-LP sequence counters, every pending event (as bytes)
  /// and every local LP's save_state(). @throws InternalError for an LP that is not checkpointable.
  std::vector<std::byte> save_state();
  /// Restores what save_state() wrote on the same process of a simulator built with the same
  /// placement and LPs (all registered), before run(). @param what names the source in errors.
  /// @throws InputError when the bytes do not fit this simulator's placement or LPs.
  void load_state(std::span<const std::byte> bytes, const std::string& what);

  /// Progress reports during run(). About every `interval_s` wall seconds (rank 0's clock) the
  /// engine calls `sample` on every process at a point where no LP runs (between windows; or,
  /// when thread 0 of rank 0 runs every LP of the run, there between two events), sums the figures
  /// over the processes (one MPI_Reduce of 3 doubles to rank 0) and calls `report` on rank 0
  /// only. Rank 0 reads its clock on thread 0 every `check_events` events (rounded up to a power
  /// of two; default 65,536) and at every 16th window boundary, so progress costs a clock read
  /// per 2^16 events plus one reduction per report; it never changes what is simulated. When
  /// the interval is due, rank 0 raises a flag in its next window-exchange header, so every
  /// process takes part in the same window's reduction. A run of several units that share no
  /// link (nothing cut: one window) therefore reports nothing. Call on every process before
  /// run(), with the same arguments (other processes' `report` is never called); `interval_s` 0
  /// reports at every check (tests).
  void set_progress(std::function<ProgressWork(SimTime now_ps)> sample,
                    std::function<void(const ProgressInfo&)> report, double interval_s,
                    std::uint64_t check_events = 65536);

  /// This process's counters.
  const EngineStats& stats() const { return stats_; }
  /// Counters summed over all processes (collective call).
  EngineStats global_stats() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::uint32_t num_lps() const { return static_cast<std::uint32_t>(placement_.proc.size()); }
  MPI_Comm comm() const { return comm_; }

 private:
  friend class Context;
  /// owner_[lp] of an LP of another process.
  static constexpr std::uint16_t kNotLocal = 0xFFFF;
  /// A growable array of 64-bit words that, unlike std::vector::resize, does not zero what it
  /// adds (the exchange writes or receives every word it grows by).
  class WireBuffer {
   public:
    std::uint64_t* data() { return data_.get(); }
    const std::uint64_t* data() const { return data_.get(); }
    std::size_t size() const { return size_; }
    /// Appends n uninitialized words and returns a pointer to the first.
    std::uint64_t* grow(std::size_t n) {
      if (size_ + n > cap_) reserve(std::max(size_ + n, 2 * cap_));
      std::uint64_t* w = data_.get() + size_;
      size_ += n;
      return w;
    }
    /// Drops words beyond n (n <= size()).
    void truncate(std::size_t n) { size_ = n; }
    void append(const WireBuffer& o) {
      if (o.size_ != 0) std::memcpy(grow(o.size_), o.data(), o.size_ * 8);
    }

   private:
    void reserve(std::size_t cap) {
      auto d = std::make_unique_for_overwrite<std::uint64_t[]>(cap);
      if (size_ != 0) std::memcpy(d.get(), data_.get(), size_ * 8);
      data_ = std::move(d);
      cap_ = cap;
    }
    std::unique_ptr<std::uint64_t[]> data_;
    std::size_t size_ = 0;
    std::size_t cap_ = 0;
  };
  struct ThreadState {
    EventQueue queue;
    std::vector<std::vector<Event>> to_thread;
    /// Per destination process: events in wire form (see route_out); thread 0's vector starts
    /// with the message header (kWireHeaderWords).
    std::vector<WireBuffer> to_proc;
    SimTime to_proc_min = kInfinity;  ///< earliest time among the events in to_proc
    SimTime window_end = 0;            ///< this thread's window end (see "Widened window")
    std::uint64_t events = 0;
    std::uint64_t remote = 0;
    std::uint64_t cross_thread = 0;
    SimTime last_time = 0;
    Context ctx;
  };
  /// Puts an event for an LP of another thread or process into the sender's outbox (after the
  /// lookahead check): a whole Event for another thread, the wire form for another process.
  /// The payload is `bytes` bytes at `payload`, then zeros.
  void route_out(std::uint32_t from_thread, LpId dst, SimTime time, std::uint32_t kind, LpId src,
                 std::uint64_t seq, const void* payload, std::size_t bytes);
  void process_window(std::uint32_t t);
  /// Thread t ends its window early: a stop request, or (thread 0) a wall-clock checkpoint due.
  bool cut_window(std::uint32_t t) const;
  void pull_thread_mail(std::uint32_t t);
  /// Sends this process's outboxes and next-event time to every other process, receives theirs,
  /// queues the received events and returns the global minimum next-event time (kInfinity when
  /// none). `local_error` goes out with the messages; `any_error` is set when any process had
  /// one (then the received events may be incomplete and the run must stop).
  /// `requests_local` (kStopBit | kCheckpointBit) goes out the same way; requests_ receives the
  /// OR over all processes.
  SimTime exchange_remote_and_min(bool local_error, bool& any_error, SimTime end_time);
  /// Queues the events of one received message body (words after the header).
  /// @throws InternalError on a malformed message or an event for an LP of another process.
  void unpack_remote(const std::uint64_t* words, std::size_t n, int from);
  /// Words of a message header: queue minimum, error flag, the thread holding the queue minimum
  /// alone (or kNoThread), the other threads' minimum, the earliest event being sent.
  static constexpr std::size_t kWireHeaderWords = 5;
  /// Bits of a header's error word (word 1): an error, a stop request, a checkpoint request, and
  /// (rank 0 only) a progress round after this exchange.
  static constexpr std::uint64_t kErrorBit = 1, kStopBit = 2, kCheckpointBit = 4, kProgressBit = 8;
  static constexpr std::uint64_t kNoThread = ~std::uint64_t{0};
  /// Sets every thread's window end from the gathered headers (rows of kWireHeaderWords
  /// words, one per process) and returns the global minimum next-event time.
  SimTime set_window_bounds(const std::uint64_t* headers, SimTime end_time);
  /// Words of an event's wire header: time, seq, dst | src << 32, kind | payload words << 32.
  static constexpr std::size_t kWireEventWords = 4;
  /// Collective: re-raises the lowest failing process's error on every process.
  [[noreturn]] void raise_collectively(const std::vector<std::exception_ptr>& errors);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  Placement placement_;
  SimTime lookahead_ps_;
  SimTime window_end_ = 0;
  std::vector<Lp*> lps_;
  std::vector<std::uint64_t> seq_;
  std::vector<std::uint16_t> owner_;  // per LP: thread index if local, else kNotLocal
  std::vector<std::unique_ptr<ThreadState>> threads_;
  std::vector<WireBuffer> recv_buf_;                  // per source process
  std::vector<EventQueue*> queues_;                   // per thread: its queue
  std::vector<std::uint64_t> headers_;                // per process: its header words
  std::vector<int> pending_;                          // processes whose message is still awaited
  // The unit with a widened window this window (process, thread), or wide_proc_ = -1.
  std::int32_t wide_proc_ = -1;
  std::uint32_t wide_thread_ = 0;
  SimTime wide_end_ = 0;
  std::vector<MPI_Request> send_req_;
  EngineStats stats_;
  /// A progress report is due (rank 0): reports in-window for a one-unit run, else flags the
  /// next exchange header (bit 1 of word 1).
  bool progress_due(double wall) const { return wall - progress_last_s_ >= progress_interval_s_; }
  /// One progress round at a window boundary (every process, in the same window): sample, sum
  /// to rank 0, report there. `now_ps`: the global minimum next-event time.
  void progress_round(SimTime now_ps);
  std::function<ProgressWork(SimTime)> progress_sample_;
  std::function<void(const ProgressInfo&)> progress_;
  double progress_interval_s_ = 60.0;
  std::uint64_t progress_mask_ = 0xFFFF;  ///< thread 0 reads the clock when (events & mask) == 0
  double progress_last_s_ = 0;
  bool progress_request_ = false;  ///< rank 0: ask for a progress round in the next exchange
  bool progress_solo_ = false;     ///< this process's thread 0 runs every LP of the run (run())
  double run_start_s_ = 0;
  RunControl control_;
  std::size_t next_checkpoint_ = 0;   // control_.checkpoint_at[next_checkpoint_] is the next one
  double last_checkpoint_s_ = 0;      // wall clock of the last checkpoint (or the run's start)
  std::uint64_t requests_local_ = 0;  // this process's request bits for the coming exchange
  std::uint64_t requests_ = 0;        // the OR over all processes, after the exchange
  bool resumed_ = false;              // load_state() ran: run() skips init()
  bool stopped_ = false;
  SimTime boundary_ps_ = 0;
};

inline void Context::dispatch(LpId dst, SimTime time, std::uint32_t kind, const void* payload,
                              std::size_t bytes) {
  // One test for every rule on the hot path: dst exists, time within the horizon, time >= now,
  // and time > now for another LP.
  if (dst >= num_lps_ || time > kMaxSimTime || time < now_ + (dst != self_ ? 1 : 0)) {
    bad_send(dst, time);
  }
  const std::uint64_t seq = seq_[self_]++;
  if (owner_[dst] == thread_) {
    queue_->push(time, dst, self_, seq, kind, payload, bytes);
    return;
  }
  sim_->route_out(thread_, dst, time, kind, self_, seq, payload, bytes);
}

}  // namespace fabricsim::engine
