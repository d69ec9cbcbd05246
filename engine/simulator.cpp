#include "engine/simulator.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <limits>
#include <string>
#include <thread>

#include "engine/errors.hpp"
#include "engine/state_io.hpp"

namespace fabricsim::engine {
namespace {
double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Context::bad_send(LpId dst, SimTime time) const {
  if (dst >= num_lps_) {
    throw InternalError("event to LP " + std::to_string(dst) + " which does not exist (from LP " +
                        std::to_string(self_) + " at t=" + std::to_string(now_) + " ps)");
  }
  if (time > kMaxSimTime) {
    throw InputError("<spec>", "simulated time",
                     "an event at t=" + std::to_string(time) + " ps is beyond the simulator's horizon of 2^60 ps (13 days)",
                     "check bandwidths, latencies, compute.scale and trace durations for absurd values");
  }
  throw InternalError("event from LP " + std::to_string(self_) + " to LP " + std::to_string(dst) +
                      " at t=" + std::to_string(time) + " ps is not after now=" + std::to_string(now_) +
                      " ps");
}

Simulator::Simulator(MPI_Comm comm, Placement placement, SimTime lookahead_ps)
    : placement_(std::move(placement)), lookahead_ps_(lookahead_ps) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  if (lookahead_ps_ < 1) throw InternalError("lookahead must be >= 1 ps");
  if (placement_.proc.size() >= (std::size_t{1} << kSrcBits)) {
    throw InputError("<spec>", "cluster", "more than 2^24 simulated nodes", "simulate a smaller cluster");
  }
  if (placement_.thread.size() != placement_.proc.size()) {
    throw InternalError("placement: proc and thread vectors differ in length");
  }
  if (placement_.threads == 0) placement_.threads = 1;
  if (placement_.threads >= kNotLocal) {
    throw InputError("<partition>", "threads", "more than 65,534 threads per process", "use fewer threads");
  }
  for (std::size_t i = 0; i < placement_.proc.size(); ++i) {
    if (placement_.proc[i] < 0 || placement_.proc[i] >= size_ ||
        placement_.thread[i] >= placement_.threads) {
      throw InputError("<partition>", "lp " + std::to_string(i),
                       "assigned to a process or thread that does not exist",
                       "regenerate the partition for this process and thread count");
    }
  }
  MPI_Comm_dup(comm, &comm_);  // after validation: a throwing constructor leaks nothing
  const std::size_t n = placement_.proc.size();
  lps_.assign(n, nullptr);
  seq_.assign(n, 0);
  owner_.assign(n, kNotLocal);
  for (std::size_t i = 0; i < n; ++i) {
    if (placement_.proc[i] == rank_) owner_[i] = placement_.thread[i];
  }
  for (std::uint32_t t = 0; t < placement_.threads; ++t) {
    auto ts = std::make_unique<ThreadState>();
    // Calendar bucket width: about W/16 (a power of two), so a window spans 8-16 buckets; 1 ns
    // to start with when nothing is cut, widened by the queue as the events' spacing asks.
    // Speed only, never order (engine/event_queue.hpp: kRingLog2, set_adaptive).
    unsigned width_log2 = 10;
    if (lookahead_ps_ != kInfinity) {
      width_log2 = 0;
      while (width_log2 < 30 && (SimTime{2} << width_log2) <= lookahead_ps_ / 16) ++width_log2;
      width_log2 = std::max(width_log2, 4u);
    }
    ts->queue.set_bucket_width_log2(width_log2);
    // Nothing cut: no window bounds the event spacing, so the queue adapts its width to it.
    ts->queue.set_adaptive(lookahead_ps_ == kInfinity);
    ts->to_thread.resize(placement_.threads);
    ts->to_proc.resize(static_cast<std::size_t>(size_));
    if (t == 0) {
      for (auto& v : ts->to_proc) std::fill_n(v.grow(kWireHeaderWords), kWireHeaderWords, 0);
    }
    ts->ctx.sim_ = this;
    ts->ctx.queue_ = &ts->queue;
    ts->ctx.seq_ = seq_.data();
    ts->ctx.owner_ = owner_.data();
    ts->ctx.num_lps_ = static_cast<LpId>(n);
    ts->ctx.thread_ = t;
    queues_.push_back(&ts->queue);
    threads_.push_back(std::move(ts));
  }
  recv_buf_.resize(static_cast<std::size_t>(size_));
  headers_.assign(static_cast<std::size_t>(size_) * kWireHeaderWords, 0);
  send_req_.reserve(static_cast<std::size_t>(size_));
  stats_.processes = static_cast<std::uint32_t>(size_);
  stats_.threads = placement_.threads;
  stats_.lookahead_ps = lookahead_ps_;
}

Simulator::~Simulator() {
  if (comm_ != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
}

void Simulator::add_lp(LpId id, Lp* lp) {
  if (id >= lps_.size() || !is_local(id)) {
    throw InternalError("add_lp: LP " + std::to_string(id) + " is not local to process " +
                        std::to_string(rank_));
  }
  lps_[id] = lp;
}

void Simulator::route_out(std::uint32_t from_thread, LpId dst, SimTime time, std::uint32_t kind,
                          LpId src, std::uint64_t seq, const void* payload, std::size_t bytes) {
  ThreadState& from = *threads_[from_thread];
  const std::int32_t p = placement_.proc[dst];
  const std::uint16_t t = placement_.thread[dst];
  // The destination may already have run up to its own window end (wider for one unit).
  const SimTime dst_end = (p == wide_proc_ && t == wide_thread_) ? wide_end_ : window_end_;
  if (time < dst_end) {
    throw InternalError("lookahead violated: event from LP " + std::to_string(src) + " to LP " +
                        std::to_string(dst) + " at t=" + std::to_string(time) +
                        " ps falls inside the destination's current window ending at " +
                        std::to_string(dst_end) + " ps");
  }
  if (p == rank_) {
    Event& ev = from.to_thread[t].emplace_back(NoInit{});
    ev.time = time;
    ev.dst = dst;
    ev.src = src;
    ev.seq = seq;
    ev.kind = kind;
    ev.reserved = 0;
    if (bytes) std::memcpy(ev.payload.data(), payload, bytes);
    if (bytes < kPayloadBytes) std::memset(ev.payload.data() + bytes, 0, kPayloadBytes - bytes);
    ++from.cross_thread;
    return;
  }
  // Wire form: four header words, then the payload up to its last non-zero word (PHOLD, timers
  // and most control events carry none: 32 bytes on the wire instead of the 96 of an Event).
  std::uint64_t pay[kPayloadBytes / 8];
  std::size_t words = (bytes + 7) / 8;
  if (words != 0) {
    pay[words - 1] = 0;
    std::memcpy(pay, payload, bytes);
    while (words > 0 && pay[words - 1] == 0) --words;
  }
  std::uint64_t* w = from.to_proc[static_cast<std::size_t>(p)].grow(kWireEventWords + words);
  w[0] = static_cast<std::uint64_t>(time);
  w[1] = seq;
  w[2] = std::uint64_t{dst} | (std::uint64_t{src} << 32);
  w[3] = std::uint64_t{kind} | (std::uint64_t{words} << 32);
  if (words != 0) std::memcpy(w + kWireEventWords, pay, words * 8);
  from.to_proc_min = std::min(from.to_proc_min, time);
  ++from.remote;
}

namespace {
// Wall time the window exchange polls before each further poll also yields the core: a peer
// a few microseconds behind is answered at once, a descheduled one gets the core back. Scaled
// GPT-3 at 2 processes on the shared 2-core machine at load 4-5 (docs/benchmarks.md): yield at
// once 32.6 s, spin ~20 us 20-33 s, ~200 us 23.6 s, 50 us 31 s (noisy; all far from the 122 s
// of Open MPI's spinning collectives). On a quiet machine waits are short and never yield.
constexpr double kSpinSeconds = 50e-6;
constexpr std::size_t kPrefetchBody = 8;  // events ahead whose body is fetched
constexpr std::size_t kPrefetchLp = 2;    // events ahead whose LP state is fetched
constexpr std::size_t kPrefetchLpLines = 4;  // cache lines of that LP fetched (models keep their
                                             // per-event fields first, e.g. models/rank/gpu_rank.hpp)
}  // namespace

void Simulator::process_window(std::uint32_t t) {
  ThreadState& ts = *threads_[t];
  Context& ctx = ts.ctx;
  EventQueue& q = ts.queue;
  Lp* const* const lps = lps_.data();  // every local LP is registered (checked by run())
  // Progress (rank 0, thread 0): a clock read every progress_mask_ + 1 events. One unit alone
  // reports here (it owns every LP); otherwise the next exchange asks for a round.
  const bool check = t == 0 && rank_ == 0 && progress_ != nullptr;
  const bool solo = progress_solo_;
  // Stop and wall-clock checkpoint requests end a long window early (a window is unbounded when
  // nothing is cut): a unit that handles less of its window than allowed stays conservative.
  const bool watch = control_.stop_flag != nullptr || (t == 0 && control_.checkpoint_every_s > 0);
  std::uint64_t events = ts.events;
  // The queue writes each event whole into this buffer; the handler reads it there. Pushes made
  // by the handler never touch it.
  Event ev{NoInit{}};
  const SimTime window_end = ts.window_end;
  while (q.pop_before(window_end, ev)) {
    // Payload lines and LP states are scattered in memory: fetch the payload kPrefetchBody
    // events ahead and the LP kPrefetchLp ahead while this one is handled (the records of the
    // current bucket are contiguous and already sorted).
    if (const EventQueue::Rec* far = q.peek_near(kPrefetchBody)) {
      if (const void* p = q.payload_address(*far)) __builtin_prefetch(p);
    }
    if (const EventQueue::Rec* nx = q.peek_near(kPrefetchLp)) {
      const char* lp = reinterpret_cast<const char*>(lps[nx->dst]);
      for (std::size_t i = 0; i < kPrefetchLpLines; ++i) __builtin_prefetch(lp + 64 * i);
    }
    ctx.now_ = ev.time;
    ctx.self_ = ev.dst;
    lps[ev.dst]->handle(ev, ctx);
    ++events;
    if (check && (events & progress_mask_) == 0 && !progress_request_) {
      ts.events = events;
      ts.last_time = ev.time;
      const double wall = now_s();
      if (progress_due(wall)) {
        if (solo) {
          progress_last_s_ = wall;
          const ProgressWork w = progress_sample_ ? progress_sample_(ev.time) : ProgressWork{};
          progress_(ProgressInfo{ev.time, events, wall - run_start_s_, w});
        } else {
          progress_request_ = true;
        }
      }
    }
    if (watch && (events & 0xFFFF) == 0 && cut_window(t)) break;
  }
  if (events != ts.events) ts.last_time = ctx.now_;
  ts.events = events;
}

bool Simulator::cut_window(std::uint32_t t) const {
  if (control_.stop_flag != nullptr && *control_.stop_flag != 0) return true;
  return t == 0 && control_.checkpoint_every_s > 0 && now_s() - last_checkpoint_s_ >= control_.checkpoint_every_s;
}

void Simulator::set_progress(std::function<ProgressWork(SimTime)> sample,
                             std::function<void(const ProgressInfo&)> report, double interval_s,
                             std::uint64_t check_events) {
  progress_sample_ = std::move(sample);
  progress_ = std::move(report);
  progress_interval_s_ = interval_s;
  std::uint64_t n = 1;
  while (n < check_events && n < (std::uint64_t{1} << 62)) n <<= 1;
  progress_mask_ = n - 1;
}

void Simulator::progress_round(SimTime now_ps) {
  // Every thread is between windows here: every LP may be read.
  const ProgressWork w = progress_sample_ ? progress_sample_(now_ps) : ProgressWork{};
  std::uint64_t events = 0;
  for (const auto& ts : threads_) events += ts->events;
  // Events travel as a double: exact below 2^53.
  double in[3] = {w.done, w.total, static_cast<double>(events)};
  double sum[3] = {in[0], in[1], in[2]};
  if (size_ > 1) MPI_Reduce(in, sum, 3, MPI_DOUBLE, MPI_SUM, 0, comm_);
  if (rank_ != 0) return;
  const double wall = now_s();
  progress_last_s_ = wall;
  progress_request_ = false;
  if (progress_) {
    progress_(ProgressInfo{now_ps, static_cast<std::uint64_t>(sum[2]), wall - run_start_s_, {sum[0], sum[1]}});
  }
}

void Simulator::pull_thread_mail(std::uint32_t t) {
  ThreadState& dst = *threads_[t];
  for (auto& src : threads_) {
    for (const Event& ev : src->to_thread[t]) dst.queue.push(ev);
    src->to_thread[t].clear();
  }
}

void Simulator::unpack_remote(const std::uint64_t* w, std::size_t n, int from) {
  EventQueue* const* const queues = queues_.data();
  std::size_t i = 0;
  while (i < n) {
    if (n - i < kWireEventWords) break;
    const std::uint64_t time = w[i];
    const std::uint64_t seq = w[i + 1];
    const LpId dst = static_cast<LpId>(w[i + 2]);
    const LpId src = static_cast<LpId>(w[i + 2] >> 32);
    const auto kind = static_cast<std::uint32_t>(w[i + 3]);
    const std::size_t words = static_cast<std::size_t>(w[i + 3] >> 32);
    if (words > kPayloadBytes / 8 || n - i - kWireEventWords < words) break;
    const std::uint16_t owner = dst < owner_.size() ? owner_[dst] : kNotLocal;
    if (owner == kNotLocal || time > static_cast<std::uint64_t>(kMaxSimTime)) {
      throw InternalError("received an event for a non-local LP " + std::to_string(dst) +
                          " from process " + std::to_string(from));
    }
    queues[owner]->push(static_cast<SimTime>(time), dst, src, seq, kind, w + i + kWireEventWords,
                        words * 8);
    i += kWireEventWords + words;
  }
  if (i != n) {
    throw InternalError("malformed window-exchange message from process " + std::to_string(from));
  }
}

SimTime Simulator::set_window_bounds(const std::uint64_t* headers, SimTime end_time) {
  const auto row = [&](int p) { return headers + static_cast<std::size_t>(p) * kWireHeaderWords; };
  // The earliest event in flight anywhere; it may be for any unit, the holder's included.
  SimTime in_flight = kInfinity;
  SimTime global_min = kInfinity;
  for (int p = 0; p < size_; ++p) {
    global_min = std::min(global_min, static_cast<SimTime>(row(p)[0]));
    in_flight = std::min(in_flight, static_cast<SimTime>(row(p)[4]));
  }
  global_min = std::min(global_min, in_flight);
  window_end_ = std::min(sat_add(global_min, lookahead_ps_), end_time);
  wide_proc_ = -1;
  wide_end_ = window_end_;
  // The unit holding the minimum alone: exactly one process with its queue minimum at the global
  // minimum, one thread of it there, and no event in flight to anybody at that time.
  int holder = -1;
  for (int p = 0; p < size_; ++p) {
    if (static_cast<SimTime>(row(p)[0]) != global_min) continue;
    holder = holder == -1 ? p : -2;
  }
  if (holder >= 0 && row(holder)[2] != kNoThread && lookahead_ps_ != kInfinity) {
    // m2: a lower bound on the next event of every other unit (an event in flight counts as
    // possibly any unit's, the holder's included).
    SimTime m2 = std::min(static_cast<SimTime>(row(holder)[3]), in_flight);
    for (int r = 0; r < size_; ++r) {
      if (r != holder) m2 = std::min(m2, static_cast<SimTime>(row(r)[0]));
    }
    if (m2 > global_min) {
      wide_proc_ = holder;
      wide_thread_ = static_cast<std::uint32_t>(row(holder)[2]);
      const SimTime reach = std::min(m2, sat_add(global_min, lookahead_ps_));
      wide_end_ = std::min(sat_add(reach, lookahead_ps_), end_time);
    }
  }
  // A window never crosses the next checkpoint time (shorter windows are always conservative),
  // so the checkpoint's boundary comes at it even when the window is unbounded. Times at or
  // before global_min are taken at this boundary (run()), so the window ends at the first later one.
  std::size_t next_cap = next_checkpoint_;
  while (next_cap < control_.checkpoint_at.size() && control_.checkpoint_at[next_cap] <= global_min) ++next_cap;
  if (next_cap < control_.checkpoint_at.size()) {
    const SimTime cap = control_.checkpoint_at[next_cap];
    window_end_ = std::min(window_end_, cap);
    wide_end_ = std::min(wide_end_, cap);
  }
  for (std::uint32_t t = 0; t < threads_.size(); ++t) {
    threads_[t]->window_end = (rank_ == wide_proc_ && t == wide_thread_) ? wide_end_ : window_end_;
  }
  return global_min;
}

SimTime Simulator::exchange_remote_and_min(bool local_error, bool& any_error, SimTime end_time) {
  const double t0 = now_s();
  const std::size_t hw = kWireHeaderWords;
  // This process's header: queue minimum, error, the thread alone at that minimum, the other
  // threads' minimum, and the earliest event it is sending (to any process).
  std::uint64_t* mine = headers_.data() + static_cast<std::size_t>(rank_) * hw;
  SimTime qmin = kInfinity, q2 = kInfinity;
  std::uint64_t qthread = kNoThread;
  for (std::uint32_t t = 0; t < threads_.size(); ++t) {
    EventQueue& q = threads_[t]->queue;  // top_time may make the next bucket current
    const SimTime top = q.empty() ? kInfinity : q.top_time();
    if (top < qmin) {
      q2 = qmin;
      qmin = top;
      qthread = t;
    } else if (top < q2) {
      q2 = top;
    }
  }
  if (qmin == kInfinity || q2 == qmin) qthread = kNoThread;
  mine[0] = static_cast<std::uint64_t>(qmin);
  // Word 1: the error bit, the stop/checkpoint requests, and (rank 0 only) a progress round
  // after this exchange.
  mine[1] = (local_error ? kErrorBit : 0) | requests_local_ | (progress_request_ ? kProgressBit : 0);
  mine[2] = qthread;
  mine[3] = static_cast<std::uint64_t>(q2);
  SimTime out_min = kInfinity;
  for (auto& ts : threads_) {
    out_min = std::min(out_min, ts->to_proc_min);
    ts->to_proc_min = kInfinity;
  }
  mine[4] = static_cast<std::uint64_t>(out_min);
  any_error = local_error;
  requests_ = requests_local_;
  if (size_ > 1) {
    // Same tag for every window: MPI keeps the order of messages between a pair, and a process
    // sends its next window's message only after it received this one from everybody.
    constexpr int kTag = 7;
    send_req_.clear();
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      WireBuffer& buf = threads_[0]->to_proc[static_cast<std::size_t>(p)];
      for (std::size_t t = 1; t < threads_.size(); ++t) {
        WireBuffer& v = threads_[t]->to_proc[static_cast<std::size_t>(p)];
        buf.append(v);
        v.truncate(0);
      }
      std::copy(mine, mine + hw, buf.data());
      if (buf.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) / 8) {
        throw InternalError("window exchange: more than 2 GiB of events for process " +
                            std::to_string(p) + " in one window");
      }
      send_req_.emplace_back();
      MPI_Isend(buf.data(), static_cast<int>(buf.size() * 8), MPI_BYTE, p, kTag, comm_,
                &send_req_.back());
      stats_.exchange_bytes += buf.size() * 8;
      ++stats_.exchange_messages;
    }
    // Receive from every peer, in whatever order the messages arrive.
    std::vector<int>& pending = pending_;
    pending.clear();
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) pending.push_back(p);
    }
    auto receive = [&](int p, MPI_Message& msg, MPI_Status& st) {
      int bytes = 0;
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      WireBuffer& rb = recv_buf_[static_cast<std::size_t>(p)];
      rb.truncate(0);
      rb.grow(static_cast<std::size_t>(bytes + 7) / 8);
      MPI_Mrecv(rb.data(), bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
      if (bytes % 8 != 0 || rb.size() < hw) {
        throw InternalError("malformed window-exchange message from process " + std::to_string(p));
      }
      std::copy(rb.data(), rb.data() + hw,
                headers_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(p) * hw));
      any_error = any_error || (rb.data()[1] & kErrorBit) != 0;
      requests_ |= rb.data()[1] & (kStopBit | kCheckpointBit);
      unpack_remote(rb.data() + hw, rb.size() - hw, p);
    };
    // Waiting: poll for a while (a peer a few microseconds behind answers fastest that way),
    // then poll and yield: Open MPI's blocking calls spin forever, which on an oversubscribed
    // node takes the core from the very process being waited for.
    const double wait_start = now_s();
    std::uint32_t polls = 0;
    bool yielding = false;  // past the spin phase: yield after every poll
    const auto idle = [wait_start, &yielding](std::uint32_t n) {
      if (!yielding && (n & 15) == 15) yielding = now_s() - wait_start > kSpinSeconds;
      if (yielding) std::this_thread::yield();
    };
    while (!pending.empty()) {
      bool got = false;
      for (std::size_t i = 0; i < pending.size();) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        MPI_Improbe(pending[i], kTag, comm_, &flag, &msg, &st);
        if (flag) {
          receive(pending[i], msg, st);
          pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
          got = true;
        } else {
          ++i;
        }
      }
      if (!got) idle(polls++);
    }
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(send_req_.size()), send_req_.data(), &done, MPI_STATUSES_IGNORE);
      if (done) break;
      idle(polls++);
    }
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) threads_[0]->to_proc[static_cast<std::size_t>(p)].truncate(hw);
    }
  }
  // Every process has the same headers here, so the same bounds.
  const SimTime global_min = set_window_bounds(headers_.data(), end_time);
  stats_.sync_s += now_s() - t0;
  return global_min;
}

void Simulator::run(SimTime end_time) {
  const double t_start = now_s();
  run_start_s_ = t_start;
  progress_last_s_ = t_start;
  progress_request_ = false;
  const std::uint32_t nthreads = placement_.threads;
  // Thread 0 may sample inside a window, alone, when it runs every LP of the run (the other
  // processes, if any, have none: their figures are zero).
  progress_solo_ = true;
  for (LpId id = 0; id < lps_.size() && progress_solo_; ++id) {
    progress_solo_ = placement_.proc[id] == rank_ && placement_.thread[id] == 0;
  }
  // init: sequential, in LP id order, each LP with its own thread's context.
  window_end_ = 0;
  wide_proc_ = -1;
  stopped_ = false;
  last_checkpoint_s_ = t_start;
  for (LpId id = 0; id < lps_.size(); ++id) {
    if (placement_.proc[id] != rank_) continue;
    if (lps_[id] == nullptr) throw InternalError("local LP " + std::to_string(id) + " not registered");
    if (resumed_) continue;  // load_state() restored the state init() would have begun
    Context& ctx = threads_[placement_.thread[id]]->ctx;
    ctx.now_ = 0;
    ctx.self_ = id;
    lps_[id]->init(ctx);
  }
  for (std::uint32_t t = 0; t < nthreads; ++t) pull_thread_mail(t);
  // A restart repeats the exchange of the boundary it was saved at: its messages are not counted
  // again, so the counters equal an uninterrupted run's.
  bool uncount_exchange = resumed_;
  resumed_ = false;

  std::atomic<bool> stop{false};
  std::vector<std::exception_ptr> errors(nthreads);
  auto guarded = [&](std::uint32_t t, auto&& fn) {
    try {
      fn();
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(nthreads));
  std::vector<std::thread> workers;
  for (std::uint32_t t = 1; t < nthreads; ++t) {
    workers.emplace_back([&, t] {
      for (;;) {
        sync.arrive_and_wait();  // window start
        if (stop.load()) return;
        guarded(t, [&] { process_window(t); });
        sync.arrive_and_wait();  // all handlers done
        guarded(t, [&] { pull_thread_mail(t); });
        sync.arrive_and_wait();  // all mail delivered
      }
    });
  }
  std::exception_ptr fatal;
  try {
    bool local_err = false;
    for (;;) {
      // Errors are collective: they travel with the exchange, so every process learns of them in
      // the same window, before any further MPI call.
      bool any_err = false;
      requests_local_ = 0;
      if (control_.stop_flag != nullptr && *control_.stop_flag != 0) requests_local_ |= kStopBit;
      if (control_.checkpoint_every_s > 0 && rank_ == 0 && now_s() - last_checkpoint_s_ >= control_.checkpoint_every_s) {
        requests_local_ |= kCheckpointBit;
      }
      const std::uint64_t bytes_before = stats_.exchange_bytes, messages_before = stats_.exchange_messages;
      // Rank 0 reads its clock at every 16th boundary (windows with fewer than 2^16 events).
      if (progress_ && rank_ == 0 && !progress_request_ && (stats_.windows & 15) == 0 && progress_due(now_s())) {
        progress_request_ = true;
      }
      const SimTime t_min = exchange_remote_and_min(local_err, any_err, end_time);
      const bool restart_boundary = uncount_exchange;
      if (uncount_exchange) {
        stats_.exchange_bytes = bytes_before;
        stats_.exchange_messages = messages_before;
        uncount_exchange = false;
      }
      if (any_err) raise_collectively(errors);
      if (t_min == kInfinity || t_min >= end_time) break;
      // The boundary a restart continues from was checkpointed already: checkpoint times up to
      // it are passed without writing it again.
      while (restart_boundary && next_checkpoint_ < control_.checkpoint_at.size() &&
             control_.checkpoint_at[next_checkpoint_] <= t_min) {
        ++next_checkpoint_;
      }
      // Window boundary: every process has the same t_min and requests_ here.
      bool checkpoint = (requests_ & kCheckpointBit) != 0;
      while (next_checkpoint_ < control_.checkpoint_at.size() && control_.checkpoint_at[next_checkpoint_] <= t_min) {
        checkpoint = true;
        ++next_checkpoint_;
      }
      const bool stop = (requests_ & kStopBit) != 0;
      if ((checkpoint || (stop && control_.checkpoint_at_stop)) && control_.on_checkpoint) {
        boundary_ps_ = t_min;
        control_.on_checkpoint(t_min);
        last_checkpoint_s_ = now_s();
      }
      if (stop) {
        stopped_ = true;
        boundary_ps_ = t_min;
        break;
      }
      // Every process sees rank 0's flag in the same exchange, so all take part in the round.
      if (size_ > 1 ? (headers_[1] & kProgressBit) != 0 : progress_request_) progress_round(t_min);
      ++stats_.windows;
      sync.arrive_and_wait();
      guarded(0, [&] { process_window(0); });
      sync.arrive_and_wait();
      guarded(0, [&] { pull_thread_mail(0); });
      sync.arrive_and_wait();
      for (auto& e : errors) local_err = local_err || (e != nullptr);
    }
  } catch (...) {
    fatal = std::current_exception();
  }
  stop.store(true);
  if (nthreads > 1) sync.arrive_and_wait();
  for (auto& w : workers) w.join();
  stats_.events = 0;
  stats_.remote_events = 0;
  stats_.thread_events = 0;
  for (auto& ts : threads_) {
    stats_.events += ts->events;
    stats_.remote_events += ts->remote;
    stats_.thread_events += ts->cross_thread;
    stats_.end_time_ps = std::max(stats_.end_time_ps, ts->last_time);
  }
  stats_.wall_s = now_s() - t_start;
  if (fatal) std::rethrow_exception(fatal);
}

void Simulator::set_control(RunControl control) {
  control_ = std::move(control);
  std::sort(control_.checkpoint_at.begin(), control_.checkpoint_at.end());
  next_checkpoint_ = 0;
}

const Lp* Simulator::first_uncheckpointable() const {
  for (LpId id = 0; id < lps_.size(); ++id) {
    if (is_local(id) && lps_[id] != nullptr && !lps_[id]->checkpointable()) return lps_[id];
  }
  return nullptr;
}

namespace {
constexpr std::uint64_t kStateMagic = 0x31474E4554415453ull;  // "STATENG1"
}  // namespace

std::vector<std::byte> Simulator::save_state() {
  StateWriter w;
  w.put(kStateMagic);
  w.put<std::uint32_t>(placement_.threads);
  w.put<std::uint64_t>(lps_.size());
  w.put<std::uint64_t>(stats_.windows);
  w.put<std::uint64_t>(stats_.exchange_bytes);
  w.put<std::uint64_t>(stats_.exchange_messages);
  std::vector<Event> pending;
  for (auto& ts : threads_) {
    w.put<std::uint64_t>(ts->events);
    w.put<std::uint64_t>(ts->remote);
    w.put<std::uint64_t>(ts->cross_thread);
    w.put<SimTime>(ts->last_time);
    // At a boundary every event is in a queue (outboxes are empty). The queue is drained in its
    // order and refilled: the order is a strict total order (EventLater), so it is unchanged.
    pending.clear();
    pending.reserve(ts->queue.size());
    Event ev{NoInit{}};
    while (!ts->queue.empty()) {
      ts->queue.pop(ev);
      pending.push_back(ev);
    }
    for (const Event& e : pending) ts->queue.push(e);
    w.put_vector(pending);
  }
  for (LpId id = 0; id < lps_.size(); ++id) {
    if (!is_local(id)) continue;
    const Lp* lp = lps_[id];
    if (lp == nullptr || !lp->checkpointable()) {
      throw InternalError("save_state: LP " + std::to_string(id) + " (" +
                          std::string(lp ? lp->type_name() : "unregistered") + ") cannot be checkpointed");
    }
    w.put<LpId>(id);
    w.put<std::uint64_t>(seq_[id]);
    StateWriter lw;
    lp->save_state(lw);
    w.put_vector(lw.bytes());
  }
  return std::move(w.bytes());
}

void Simulator::load_state(std::span<const std::byte> bytes, const std::string& what) {
  StateReader r(bytes, what);
  if (r.get<std::uint64_t>() != kStateMagic || r.get<std::uint32_t>() != placement_.threads ||
      r.get<std::uint64_t>() != lps_.size()) {
    r.fail();
  }
  stats_.windows = r.get<std::uint64_t>();
  stats_.exchange_bytes = r.get<std::uint64_t>();
  stats_.exchange_messages = r.get<std::uint64_t>();
  for (std::uint32_t t = 0; t < threads_.size(); ++t) {
    ThreadState& ts = *threads_[t];
    ts.events = r.get<std::uint64_t>();
    ts.remote = r.get<std::uint64_t>();
    ts.cross_thread = r.get<std::uint64_t>();
    ts.last_time = r.get<SimTime>();
    while (!ts.queue.empty()) {
      Event drop{NoInit{}};
      ts.queue.pop(drop);
    }
    for (const Event& ev : r.get_vector<Event>()) {
      if (ev.dst >= owner_.size() || owner_[ev.dst] != t || ev.time < 0 || ev.time > kMaxSimTime) r.fail();
      ts.queue.push(ev);
    }
  }
  for (LpId id = 0; id < lps_.size(); ++id) {
    if (!is_local(id)) continue;
    if (r.get<LpId>() != id || lps_[id] == nullptr) r.fail();
    seq_[id] = r.get<std::uint64_t>();
    const auto n = r.get<std::uint64_t>();
    if (n > r.remaining()) r.fail();
    StateReader lr(r.take(static_cast<std::size_t>(n)), what);
    lps_[id]->load_state(lr);
    if (lr.remaining() != 0) lr.fail();
  }
  if (r.remaining() != 0) r.fail();
  resumed_ = true;
}

void Simulator::raise_collectively(const std::vector<std::exception_ptr>& errors) {
  // kind: 0 none, 1 InputError, 2 anything else. The lowest process with an error wins, and every
  // process throws the same error, so only rank 0 needs to print it.
  int kind = 0;
  std::string message;
  for (const auto& e : errors) {
    if (!e || kind) continue;
    try {
      std::rethrow_exception(e);
    } catch (const InputError& x) {
      kind = 1;
      message = x.what();
    } catch (const std::exception& x) {
      kind = 2;
      message = x.what();
    } catch (...) {
      kind = 2;
      message = "unknown exception";
    }
  }
  if (size_ > 1) {
    int mine = kind ? rank_ : size_;
    int first = size_;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_);
    int len = static_cast<int>(message.size());
    MPI_Bcast(&kind, 1, MPI_INT, first, comm_);
    MPI_Bcast(&len, 1, MPI_INT, first, comm_);
    message.resize(static_cast<std::size_t>(len));
    MPI_Bcast(message.data(), len, MPI_CHAR, first, comm_);
  }
  if (kind == 1) throw InputError(InputError::Whole{}, message);
  throw InternalError(message);
}

EngineStats Simulator::global_stats() const {
  EngineStats g = stats_;
  if (size_ > 1) {
    unsigned long long in[5] = {stats_.events, stats_.remote_events, stats_.thread_events,
                                stats_.exchange_bytes, stats_.exchange_messages};
    unsigned long long out[5] = {0, 0, 0, 0, 0};
    MPI_Allreduce(in, out, 5, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_);
    g.events = out[0];
    g.remote_events = out[1];
    g.thread_events = out[2];
    g.exchange_bytes = out[3];
    g.exchange_messages = out[4];
    double din[2] = {stats_.wall_s, stats_.sync_s};
    double dout[2] = {0, 0};
    MPI_Allreduce(din, dout, 2, MPI_DOUBLE, MPI_MAX, comm_);
    g.wall_s = dout[0];
    g.sync_s = dout[1];
    long long tin = stats_.end_time_ps, tout = 0;
    MPI_Allreduce(&tin, &tout, 1, MPI_LONG_LONG, MPI_MAX, comm_);
    g.end_time_ps = tout;
  }
  return g;
}

}  // namespace fabricsim::engine
