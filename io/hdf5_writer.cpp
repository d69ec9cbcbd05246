/// @file hdf5_writer.cpp
/// Collective results file writer (parallel HDF5) and results digest. Schema: docs/hdf5_schema.md.
#include "io/hdf5_writer.hpp"

#include <hdf5.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "engine/errors.hpp"

namespace fabricsim::io {
namespace {

using engine::InputError;
using engine::InternalError;

bool g_write_failed = false;  // set when a write failed half way (see hdf5_write_failed)
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "rows are packed in host order and declared little-endian to HDF5");

// ------------------------------------------------------------------------------------------------
// Table schemas: columns in file order, packed without padding.

enum class ColType { U32, I32, U64, I64, F64, Op, Str16, Str8 };

struct Column {
  const char* name;
  ColType type;
  const char* unit;
};

constexpr std::size_t col_size(ColType t) {
  switch (t) {
    case ColType::U32:
    case ColType::I32: return 4;
    case ColType::Op: return kOpChars;
    case ColType::Str16: return 16;
    case ColType::Str8: return 8;
    default: return 8;
  }
}

struct Schema {
  const char* dataset;    // "/ranks"
  const char* sorted_by;  // value of the dataset attribute `sorted_by`
  const Column* cols;
  std::size_t ncols;
  std::size_t digest_cols = 0;  // leading columns hashed by results_digest (schema-1 columns)
  std::size_t row_size() const { return prefix_size(ncols); }
  std::size_t prefix_size(std::size_t n) const {
    std::size_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += col_size(cols[i].type);
    return s;
  }
};

constexpr Column kRankCols[] = {
    {"rank", ColType::U32, "1"},          {"finish_ps", ColType::I64, "ps"},
    {"compute_ps", ColType::I64, "ps"},   {"comm_ps", ColType::I64, "ps"},
    {"exposed_comm_ps", ColType::I64, "ps"},
    // schema 4
    {"exposed_tp_ps", ColType::I64, "ps"},    {"exposed_dp_ps", ColType::I64, "ps"},
    {"exposed_ep_ps", ColType::I64, "ps"},    {"exposed_pp_ps", ColType::I64, "ps"},
    {"exposed_cp_ps", ColType::I64, "ps"},    {"exposed_other_ps", ColType::I64, "ps"},
    {"pp_wait_ps", ColType::I64, "ps"},       {"bubble_ps", ColType::I64, "ps"},
    // schema 5
    {"job", ColType::I32, "1"},
};
constexpr Column kCollCols[] = {
    {"group", ColType::U32, "1"},       {"instance", ColType::U32, "1"},
    {"op", ColType::Op, "text"},        {"bytes", ColType::U64, "bytes"},
    {"ranks", ColType::U32, "1"},       {"start_ps", ColType::I64, "ps"},
    {"end_ps", ColType::I64, "ps"},     {"algbw_GBps", ColType::F64, "GB/s"},
    {"busbw_GBps", ColType::F64, "GB/s"},
    // schema 2
    {"algorithm", ColType::Str16, "text"}, {"protocol", ColType::Str16, "text"},
    {"channels", ColType::U32, "1"},
    // schema 5
    {"job", ColType::I32, "1"},
};
constexpr Column kFlowCols[] = {
    {"flow_id", ColType::U64, "1"},   {"src", ColType::U32, "1"},
    {"dst", ColType::U32, "1"},       {"bytes", ColType::U64, "bytes"},
    {"start_ps", ColType::I64, "ps"}, {"end_ps", ColType::I64, "ps"},
    {"fct_ps", ColType::I64, "ps"},
    // schema 2
    {"first_byte_ps", ColType::I64, "ps"}, {"ideal_ps", ColType::I64, "ps"},
    {"slowdown", ColType::F64, "1"},       {"first_spine", ColType::I32, "1"},
    {"group", ColType::U32, "1"},          {"instance", ColType::U32, "1"},
    // schema 5
    {"job", ColType::I32, "1"},
};
constexpr Column kLinkCols[] = {
    {"link_id", ColType::U32, "1"},      {"from_node", ColType::U32, "1"},
    {"to_node", ColType::U32, "1"},      {"tier", ColType::Str8, "text"},
    {"bin_start_ps", ColType::I64, "ps"}, {"bytes", ColType::U64, "bytes"},
    {"utilization", ColType::F64, "1"},
    // schema 3
    {"pause_ps", ColType::I64, "ps"},     {"pfc_pauses", ColType::U64, "1"},
    {"ecn_marks", ColType::U64, "1"},     {"drops", ColType::U64, "1"},
};
constexpr Column kQueueCols[] = {
    {"link_id", ColType::U32, "1"},      {"from_node", ColType::U32, "1"},
    {"to_node", ColType::U32, "1"},      {"tier", ColType::Str8, "text"},
    {"bin_start_ps", ColType::I64, "ps"}, {"max_queue_bytes", ColType::U64, "bytes"},
};
// schema 5
constexpr Column kLinkTotalCols[] = {
    {"link_id", ColType::U32, "1"},       {"from_node", ColType::U32, "1"},
    {"to_node", ColType::U32, "1"},       {"tier", ColType::Str8, "text"},
    {"bytes", ColType::U64, "bytes"},     {"utilization", ColType::F64, "1"},
    {"pause_ps", ColType::I64, "ps"},     {"pfc_pauses", ColType::U64, "1"},
    {"ecn_marks", ColType::U64, "1"},     {"drops", ColType::U64, "1"},
    {"link_retransmits", ColType::U64, "1"}, {"pfc_sent", ColType::U64, "1"},
    {"jobs", ColType::U32, "1"},
    {"job_mask", ColType::U64, "1"},
};
constexpr Column kJobCols[] = {
    {"job", ColType::U32, "1"},                 {"name", ColType::Op, "text"},
    {"gpus", ColType::U32, "1"},                {"start_ps", ColType::I64, "ps"},
    {"iterations", ColType::U32, "1"},          {"finish_ps", ColType::I64, "ps"},
    {"iteration_time_ps", ColType::I64, "ps"},  {"alone_iteration_time_ps", ColType::I64, "ps"},
    {"slowdown", ColType::F64, "1"},            {"compute_ps", ColType::F64, "ps"},
    {"comm_ps", ColType::F64, "ps"},            {"exposed_comm_ps", ColType::F64, "ps"},
};
constexpr Column kFaultCols[] = {
    {"index", ColType::U32, "1"},         {"kind", ColType::Str16, "text"},
    {"node_a", ColType::U32, "1"},        {"node_b", ColType::U32, "1"},
    {"time_ps", ColType::I64, "ps"},      {"until_ps", ColType::I64, "ps"},
    {"reconverge_ps", ColType::I64, "ps"}, {"ber", ColType::F64, "1"},
    {"rate_bps", ColType::U64, "bit/s"},
};
constexpr Schema kRankSchema{"ranks", "rank", kRankCols, std::size(kRankCols), 0};
constexpr Schema kCollSchema{"collectives", "group,instance", kCollCols, std::size(kCollCols), 9};
constexpr Schema kFlowSchema{"flows", "flow_id", kFlowCols, std::size(kFlowCols), 7};
constexpr Schema kLinkSchema{"links", "link_id,bin_start_ps", kLinkCols, std::size(kLinkCols), 0};
constexpr Schema kQueueSchema{"queues", "link_id,bin_start_ps", kQueueCols, std::size(kQueueCols), 0};
constexpr Schema kLinkTotalSchema{"link_totals", "link_id", kLinkTotalCols, std::size(kLinkTotalCols), 0};
constexpr Schema kJobSchema{"jobs", "job", kJobCols, std::size(kJobCols), 0};
constexpr Schema kFaultSchema{"faults", "index", kFaultCols, std::size(kFaultCols), 0};

// ------------------------------------------------------------------------------------------------
// Packed rows.

/// Rows of one table, packed little-endian in schema order, row_size bytes each.
struct PackedTable {
  std::size_t row_size = 1;
  std::vector<unsigned char> bytes;
  std::size_t rows() const { return bytes.size() / row_size; }
  const unsigned char* row(std::size_t i) const { return bytes.data() + i * row_size; }
};

class RowWriter {
 public:
  explicit RowWriter(std::vector<unsigned char>& out) : out_(out) {}
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void i32(std::int32_t v) { raw(&v, sizeof v); }
  /// Fixed-length NUL-padded string of n bytes.
  void str(const std::string& s, std::size_t n, const char* what) {
    if (s.size() > n) {
      throw InternalError(std::string("write_results_h5: ") + what + " '" + s + "' is longer than " +
                          std::to_string(n) + " characters");
    }
    const std::size_t at = out_.size();
    out_.resize(at + n, 0);
    std::memcpy(out_.data() + at, s.data(), s.size());
  }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void op(const std::string& s) {
    if (s.size() > kOpChars) {
      throw InternalError("write_results_h5: collective op name '" + s + "' is longer than " +
                          std::to_string(kOpChars) + " characters");
    }
    const std::size_t at = out_.size();
    out_.resize(at + kOpChars, 0);
    std::memcpy(out_.data() + at, s.data(), s.size());
  }

 private:
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<unsigned char>& out_;
};

PackedTable pack(const std::vector<RankRecord>& v) {
  PackedTable t{kRankSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& r : v) {
    w.u32(r.rank);
    w.i64(r.finish_ps);
    w.i64(r.compute_ps);
    w.i64(r.comm_ps);
    w.i64(r.exposed_comm_ps);
    for (engine::SimTime v : r.exposed_kind_ps) w.i64(v);
    w.i64(r.pp_wait_ps);
    w.i64(r.bubble_ps);
    w.i32(r.job);
  }
  return t;
}

PackedTable pack(const std::vector<CollectiveRecord>& v) {
  PackedTable t{kCollSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& c : v) {
    w.u32(c.group);
    w.u32(c.instance);
    w.op(c.op);
    w.u64(c.bytes);
    w.u32(c.ranks);
    w.i64(c.start_ps);
    w.i64(c.end_ps);
    w.f64(c.algbw_GBps);
    w.f64(c.busbw_GBps);
    w.str(c.algorithm, 16, "collective algorithm");
    w.str(c.protocol, 16, "collective protocol");
    w.u32(c.channels);
    w.i32(c.job);
  }
  return t;
}

PackedTable pack(const std::vector<FlowRecord>& v) {
  PackedTable t{kFlowSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& f : v) {
    w.u64(f.flow_id);
    w.u32(f.src);
    w.u32(f.dst);
    w.u64(f.bytes);
    w.i64(f.start_ps);
    w.i64(f.end_ps);
    w.i64(f.fct_ps);
    w.i64(f.first_byte_ps);
    w.i64(f.ideal_ps);
    w.f64(f.slowdown);
    w.i32(f.first_spine);
    w.u32(f.group);
    w.u32(f.instance);
    w.i32(f.job);
  }
  return t;
}

const char* tier_name(std::uint32_t tier) {
  switch (tier) {
    case 0: return "nvlink";
    case 1: return "nic";
    case 2: return "fabric";
    case 3: return "core";
    default: throw InternalError("write_results_h5: link tier " + std::to_string(tier) + " is not 0..3");
  }
}

PackedTable pack(const std::vector<LinkBinRecord>& v) {
  PackedTable t{kLinkSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& l : v) {
    w.u32(l.link_id);
    w.u32(l.from_node);
    w.u32(l.to_node);
    w.str(tier_name(l.tier), 8, "tier");
    w.i64(l.bin_start_ps);
    w.u64(l.bytes);
    w.f64(l.utilization);
    w.i64(l.pause_ps);
    w.u64(l.pfc_pauses);
    w.u64(l.ecn_marks);
    w.u64(l.drops);
  }
  return t;
}

PackedTable pack(const std::vector<LinkTotalRecord>& v) {
  PackedTable t{kLinkTotalSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& l : v) {
    w.u32(l.link_id);
    w.u32(l.from_node);
    w.u32(l.to_node);
    w.str(tier_name(l.tier), 8, "tier");
    w.u64(l.bytes);
    w.f64(l.utilization);
    w.i64(l.pause_ps);
    w.u64(l.pfc_pauses);
    w.u64(l.ecn_marks);
    w.u64(l.drops);
    w.u64(l.link_retransmits);
    w.u64(l.pfc_sent);
    w.u32(l.jobs);
    w.u64(l.job_mask);
  }
  return t;
}

PackedTable pack(const std::vector<JobRecord>& v) {
  PackedTable t{kJobSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& j : v) {
    w.u32(j.job);
    w.op(j.name.substr(0, kOpChars));
    w.u32(j.gpus);
    w.i64(j.start_ps);
    w.u32(j.iterations);
    w.i64(j.finish_ps);
    w.i64(j.iteration_time_ps);
    w.i64(j.alone_iteration_time_ps);
    w.f64(j.slowdown);
    w.f64(j.compute_ps);
    w.f64(j.comm_ps);
    w.f64(j.exposed_comm_ps);
  }
  return t;
}

PackedTable pack(const std::vector<FaultRecord>& v) {
  PackedTable t{kFaultSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& f : v) {
    w.u32(f.index);
    w.str(f.kind, 16, "fault kind");
    w.u32(f.node_a);
    w.u32(f.node_b);
    w.i64(f.time_ps);
    w.i64(f.until_ps);
    w.i64(f.reconverge_ps);
    w.f64(f.ber);
    w.u64(f.rate_bps);
  }
  return t;
}

/// Queue rows carry the link's endpoints and tier too; `link_info` maps link_id to them.
struct QueueRow {
  QueueBinRecord q;
  std::uint32_t from = 0, to = 0, tier = 0;
};
PackedTable pack(const std::vector<QueueRow>& v) {
  PackedTable t{kQueueSchema.row_size(), {}};
  t.bytes.reserve(v.size() * t.row_size);
  RowWriter w(t.bytes);
  for (const auto& r : v) {
    w.u32(r.q.link_id);
    w.u32(r.from);
    w.u32(r.to);
    w.str(tier_name(r.tier), 8, "tier");
    w.i64(r.q.bin_start_ps);
    w.u64(r.q.max_queue_bytes);
  }
  return t;
}

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Sort key of a packed row (two unsigned 64-bit numbers, compared lexicographically).
using Key = std::pair<std::uint64_t, std::uint64_t>;
using KeyFn = Key (*)(const unsigned char* row);
Key rank_key(const unsigned char* r) { return {load<std::uint32_t>(r), 0}; }
Key coll_key(const unsigned char* r) {
  return {(std::uint64_t{load<std::uint32_t>(r)} << 32) | load<std::uint32_t>(r + 4), 0};
}
Key flow_key(const unsigned char* r) { return {load<std::uint64_t>(r), 0}; }
// /link_totals and /jobs: a uint32 id at offset 0.
Key id_key(const unsigned char* r) { return {load<std::uint32_t>(r), 0}; }
// /links and /queues: link_id at offset 0, bin_start_ps (>= 0) at offset 20.
Key bin_key(const unsigned char* r) {
  return {load<std::uint32_t>(r), static_cast<std::uint64_t>(load<std::int64_t>(r + 20))};
}

// ------------------------------------------------------------------------------------------------
// MPI helpers.

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
int comm_size(MPI_Comm comm) {
  int s = 1;
  MPI_Comm_size(comm, &s);
  return s;
}

/// Broadcasts `s` from rank 0 (other ranks' value is replaced).
std::string bcast_string(MPI_Comm comm, std::string s) {
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
  s.resize(n);
  // Chunks of at most INT_MAX bytes.
  for (unsigned long long off = 0; off < n;) {
    const int part = static_cast<int>(std::min<unsigned long long>(n - off, INT_MAX));
    MPI_Bcast(s.data() + off, part, MPI_CHAR, 0, comm);
    off += static_cast<unsigned long long>(part);
  }
  return s;
}

/// Agrees on an error: returns the message of the lowest rank whose `local_error` is non-empty,
/// identical on every rank, or "" if no rank had an error. Collective.
std::string agree_on_error(MPI_Comm comm, const std::string& local_error) {
  const int size = comm_size(comm);
  const int mine = local_error.empty() ? size : comm_rank(comm);
  int first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return {};
  unsigned long long n = local_error.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, first, comm);
  std::string msg = local_error;
  msg.resize(n);
  MPI_Bcast(msg.data(), static_cast<int>(n), MPI_CHAR, first, comm);
  if (first != 0) msg += " (on process " + std::to_string(first) + ")";
  return msg;
}

/// Runs `f` on every rank; if it throws on any rank, every rank throws InternalError with the
/// message of the lowest failing rank. Collective.
template <class F>
void collective_step(MPI_Comm comm, F&& f) {
  std::string err;
  try {
    f();
  } catch (const std::exception& e) {
    err = e.what();
    if (err.empty()) err = "unknown error";
  } catch (...) {
    err = "unknown error";
  }
  std::string agreed = agree_on_error(comm, err);
  if (!agreed.empty()) throw InternalError(agreed);
}

/// THE gather+sort helper: every process contributes its local rows; every process returns the
/// global table sorted by `key`, rows with equal keys by their bytes (a total order on contents,
/// so the result is independent of the number of processes and of the local row order).
PackedTable gather_sorted(MPI_Comm comm, const PackedTable& local, KeyFn key) {
  const int size = comm_size(comm);
  const std::size_t rs = local.row_size;
  if (local.rows() > static_cast<std::size_t>(INT_MAX)) {
    throw InternalError("gather_sorted: more than INT_MAX local rows");
  }
  const int mine = static_cast<int>(local.rows());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  long long total = 0;
  for (int i = 0; i < size; ++i) {
    displs[static_cast<std::size_t>(i)] = static_cast<int>(total);
    total += counts[static_cast<std::size_t>(i)];
    // Every rank sees the same counts, so every rank throws here together.
    if (total > INT_MAX) throw InternalError("gather_sorted: more than INT_MAX rows in a table");
  }
  MPI_Datatype row_type;
  MPI_Type_contiguous(static_cast<int>(rs), MPI_BYTE, &row_type);
  MPI_Type_commit(&row_type);
  PackedTable all{rs, std::vector<unsigned char>(static_cast<std::size_t>(total) * rs)};
  MPI_Allgatherv(local.bytes.data(), mine, row_type, all.bytes.data(), counts.data(),
                 displs.data(), row_type, comm);
  MPI_Type_free(&row_type);

  std::vector<std::size_t> idx(all.rows());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const Key ka = key(all.row(a)), kb = key(all.row(b));
    if (ka != kb) return ka < kb;
    return std::memcmp(all.row(a), all.row(b), rs) < 0;
  });
  PackedTable sorted{rs, std::vector<unsigned char>(all.bytes.size())};
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::memcpy(sorted.bytes.data() + i * rs, all.row(idx[i]), rs);
  }
  return sorted;
}

/// Packs the local rows (errors agreed collectively), then gathers and sorts them.
template <class Record>
PackedTable global_table(MPI_Comm comm, const std::vector<Record>& local, KeyFn key) {
  PackedTable packed;
  collective_step(comm, [&] { packed = pack(local); });
  return gather_sorted(comm, packed, key);
}

// ------------------------------------------------------------------------------------------------
// Run metadata broadcast (all processes must write identical attributes).

RunMeta bcast_meta(MPI_Comm comm, const RunMeta& meta) {
  std::string buf;
  if (comm_rank(comm) == 0) {
    auto put_str = [&](const std::string& s) {
      const std::uint64_t n = s.size();
      buf.append(reinterpret_cast<const char*>(&n), sizeof n);
      buf += s;
    };
    auto put = [&](const auto& v) { buf.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put_str(meta.spec_text);
    put_str(meta.version);
    put_str(meta.git_commit);
    put_str(meta.workload);
    put(meta.seed);
    put(meta.processes);
    put(meta.threads);
    put(meta.ranks);
    put(meta.wall_s);
    put(meta.events);
    put(meta.simulated_time_ps);
    put(meta.sample_interval_ps);
    put(meta.fits_memory);
    put(meta.memory_estimate_bytes);
    put(meta.memory_capacity_bytes);
    const std::uint64_t nf = meta.fabric_counters.size();
    put(nf);
    for (const auto& [name, value] : meta.fabric_counters) {
      put_str(name);
      put(value);
    }
  }
  buf = bcast_string(comm, std::move(buf));
  RunMeta m;
  std::size_t at = 0;
  auto get_str = [&](std::string& s) {
    std::uint64_t n;
    std::memcpy(&n, buf.data() + at, sizeof n);
    at += sizeof n;
    s.assign(buf, at, n);
    at += n;
  };
  auto get = [&](auto& v) {
    std::memcpy(&v, buf.data() + at, sizeof v);
    at += sizeof v;
  };
  get_str(m.spec_text);
  get_str(m.version);
  get_str(m.git_commit);
  get_str(m.workload);
  get(m.seed);
  get(m.processes);
  get(m.threads);
  get(m.ranks);
  get(m.wall_s);
  get(m.events);
  get(m.simulated_time_ps);
  get(m.sample_interval_ps);
  get(m.fits_memory);
  get(m.memory_estimate_bytes);
  get(m.memory_capacity_bytes);
  std::uint64_t nf = 0;
  get(nf);
  m.fabric_counters.resize(nf);
  for (auto& [name, value] : m.fabric_counters) {
    get_str(name);
    get(value);
  }
  return m;
}

// ------------------------------------------------------------------------------------------------
// HDF5 helpers.

/// Suppresses HDF5's automatic error-stack printing for its lifetime.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

herr_t innermost_error(unsigned n, const H5E_error2_t* e, void* out) {
  if (n == 0 && e != nullptr) {
    auto& s = *static_cast<std::string*>(out);
    s = std::string(e->func_name ? e->func_name : "?") + ": " + (e->desc ? e->desc : "?");
  }
  return 0;
}

[[noreturn]] void throw_hdf5(const std::string& what) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw InternalError("HDF5: " + what + " failed" + (detail.empty() ? "" : " (" + detail + ")"));
}

herr_t check(herr_t r, const std::string& what) {
  if (r < 0) throw_hdf5(what);
  return r;
}

/// Owning HDF5 identifier; closed (ignoring errors) on destruction unless closed explicitly.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer, const std::string& what) : id_(id), close_(closer) {
    if (id_ < 0) throw_hdf5(what);
  }
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      close_ = o.close_;
    }
    return *this;
  }
  ~Hid() { reset(); }
  hid_t get() const { return id_; }
  /// Closes now and reports failure.
  void close(const std::string& what) {
    const hid_t id = std::exchange(id_, H5I_INVALID_HID);
    if (id >= 0) check(close_(id), what);
  }

 private:
  void reset() {
    if (id_ >= 0) close_(std::exchange(id_, H5I_INVALID_HID));
  }
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

Hid plist(hid_t cls, const char* what) { return Hid(H5Pcreate(cls), H5Pclose, what); }

/// The compound type of a table: used both in memory and in the file, so HDF5 converts nothing
/// (type conversion would disable collective I/O, which filtered parallel writes require).
Hid compound_type(const Schema& s) {
  Hid t(H5Tcreate(H5T_COMPOUND, s.row_size()), H5Tclose, std::string("compound type ") + s.dataset);
  std::size_t off = 0;
  for (std::size_t i = 0; i < s.ncols; ++i) {
    const Column& c = s.cols[i];
    const std::string what = std::string("insert column ") + s.dataset + "." + c.name;
    switch (c.type) {
      case ColType::U32: check(H5Tinsert(t.get(), c.name, off, H5T_STD_U32LE), what); break;
      case ColType::I32: check(H5Tinsert(t.get(), c.name, off, H5T_STD_I32LE), what); break;
      case ColType::U64: check(H5Tinsert(t.get(), c.name, off, H5T_STD_U64LE), what); break;
      case ColType::I64: check(H5Tinsert(t.get(), c.name, off, H5T_STD_I64LE), what); break;
      case ColType::F64: check(H5Tinsert(t.get(), c.name, off, H5T_IEEE_F64LE), what); break;
      case ColType::Op:
      case ColType::Str16:
      case ColType::Str8: {
        Hid str(H5Tcopy(H5T_C_S1), H5Tclose, what);
        check(H5Tset_size(str.get(), col_size(c.type)), what);
        check(H5Tset_strpad(str.get(), H5T_STR_NULLPAD), what);
        check(H5Tinsert(t.get(), c.name, off, str.get()), what);
        break;
      }
    }
    off += col_size(c.type);
  }
  return t;
}

/// Scalar attribute with a fixed-length, NUL-terminated ASCII string (size = length + 1).
void attr_string(hid_t obj, const std::string& name, const std::string& value) {
  const std::string what = "attribute " + name;
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose, what);
  check(H5Tset_size(type.get(), value.size() + 1), what);
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), what);
  Hid space(H5Screate(H5S_SCALAR), H5Sclose, what);
  Hid attr(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose, what);
  check(H5Awrite(attr.get(), type.get(), value.c_str()), what);
  attr.close(what);
}

/// Scalar numeric attribute; `type` is a predefined little-endian HDF5 type matching T.
template <class T>
void attr_number(hid_t obj, const std::string& name, hid_t type, T value) {
  const std::string what = "attribute " + name;
  Hid space(H5Screate(H5S_SCALAR), H5Sclose, what);
  Hid attr(H5Acreate2(obj, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           what);
  check(H5Awrite(attr.get(), type, &value), what);
  attr.close(what);
}

/// Whether datasets get the deflate filter: needs the filter with its encoder in this HDF5 build.
/// HDF5 >= 1.10.2 writes filtered datasets in parallel, but only with collective transfers (which
/// write_table always uses) and without type conversion (memory type == file type here).
bool deflate_available() {
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) return false;
  unsigned int flags = 0;
  if (H5Zget_filter_info(H5Z_FILTER_DEFLATE, &flags) < 0) return false;
  return (flags & H5Z_FILTER_CONFIG_ENCODE_ENABLED) != 0;
}

/// Creates dataset /<name> (chunked, unlimited, possibly deflated) and writes this process's
/// contiguous slice [N*r/P, N*(r+1)/P) of the sorted global table collectively.
void write_table(hid_t file, const Schema& s, const PackedTable& t, int rank, int size,
                 hid_t dxpl, bool deflate, engine::SimTime bin_width_ps = 0) {
  const std::string what = std::string("dataset /") + s.dataset;
  Hid type = compound_type(s);
  const hsize_t n = t.rows();
  const hsize_t dims[1] = {n};
  const hsize_t maxdims[1] = {H5S_UNLIMITED};
  Hid fspace(H5Screate_simple(1, dims, maxdims), H5Sclose, what + " dataspace");
  Hid dcpl = plist(H5P_DATASET_CREATE, "dataset creation plist");
  const hsize_t chunk[1] = {kChunkRows};
  check(H5Pset_chunk(dcpl.get(), 1, chunk), what + " chunking");
  check(H5Pset_obj_track_times(dcpl.get(), 0), what + " track times");
  if (deflate) check(H5Pset_deflate(dcpl.get(), 6), what + " deflate");
  // Fletcher-32 checksum per chunk (HDF5's built-in filter, after deflate: it covers the bytes
  // on disk): a reader sees a damaged chunk as an error instead of wrong numbers. Deflate's own
  // Adler-32 catches most damage to compressed chunks, but not all (tests/results: one in 30
  // random 64-byte overwrites went through), and without deflate nothing did.
  check(H5Pset_fletcher32(dcpl.get()), what + " fletcher32");
  Hid ds(H5Dcreate2(file, (std::string("/") + s.dataset).c_str(), type.get(), fspace.get(),
                    H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
         H5Dclose, what + " create");

  if (n > 0) {
    const hsize_t lo = n * static_cast<hsize_t>(rank) / static_cast<hsize_t>(size);
    const hsize_t hi = n * static_cast<hsize_t>(rank + 1) / static_cast<hsize_t>(size);
    const hsize_t count[1] = {hi - lo};
    const hsize_t start[1] = {lo};
    const hsize_t one[1] = {1};
    Hid mspace(H5Screate_simple(1, count[0] > 0 ? count : one, nullptr), H5Sclose,
               what + " memory dataspace");
    if (count[0] > 0) {
      check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
            what + " hyperslab");
    } else {
      check(H5Sselect_none(fspace.get()), what + " select none");
      check(H5Sselect_none(mspace.get()), what + " select none");
    }
    const unsigned char dummy[1] = {0};
    const void* buf = count[0] > 0 ? static_cast<const void*>(t.row(lo)) : dummy;
    check(H5Dwrite(ds.get(), type.get(), mspace.get(), fspace.get(), dxpl, buf), what + " write");
  }

  attr_string(ds.get(), "sorted_by", s.sorted_by);
  if (bin_width_ps > 0) attr_number<std::int64_t>(ds.get(), "bin_width_ps", H5T_STD_I64LE, bin_width_ps);
  for (std::size_t i = 0; i < s.ncols; ++i) {
    attr_string(ds.get(), std::string("units.") + s.cols[i].name, s.cols[i].unit);
  }
  ds.close(what + " close");
}

/// Unit of the /meta attribute `fabric_<name>`: "ps" for names ending in `_ps`, "bytes" for
/// `_bytes`, "1" (a count) otherwise.
const char* fabric_counter_unit(const std::string& name) {
  auto ends = [&](const char* suf) {
    const std::size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return ends("_ps") ? "ps" : ends("_bytes") ? "bytes" : "1";
}

/// Fabric counter names become attribute names: non-empty, [a-z0-9_] only, unique.
/// @throws InternalError otherwise (identical on every process: the meta is broadcast).
void check_fabric_counter_names(const RunMeta& m) {
  std::vector<std::string> names;
  for (const auto& [name, value] : m.fabric_counters) {
    const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
    });
    if (!ok) {
      throw InternalError("write_results_h5: fabric counter name '" + name + "' is not [a-z0-9_]+");
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  const auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) {
    throw InternalError("write_results_h5: fabric counter '" + *dup + "' given twice");
  }
}

void write_meta(hid_t file, const RunMeta& m) {
  Hid gcpl = plist(H5P_GROUP_CREATE, "group creation plist");
  check(H5Pset_obj_track_times(gcpl.get(), 0), "/meta track times");
  Hid g(H5Gcreate2(file, "/meta", H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose,
        "group /meta create");
  const hid_t gid = g.get();
  // Schema 3: every /meta attribute X has a string attribute units.X, as the table columns do.
  auto unit = [&](const std::string& name, const char* u) { attr_string(gid, "units." + name, u); };
  attr_number<std::int32_t>(gid, "schema_version", H5T_STD_I32LE, kHdf5SchemaVersion);
  unit("schema_version", "1");
  attr_string(gid, "spec_text", m.spec_text);
  unit("spec_text", "text");
  attr_string(gid, "version", m.version);
  unit("version", "text");
  attr_string(gid, "git_commit", m.git_commit);
  unit("git_commit", "text");
  attr_string(gid, "workload", m.workload);
  unit("workload", "text");
  attr_number<std::uint64_t>(gid, "seed", H5T_STD_U64LE, m.seed);
  unit("seed", "1");
  attr_number<std::uint32_t>(gid, "processes", H5T_STD_U32LE, m.processes);
  unit("processes", "1");
  attr_number<std::uint32_t>(gid, "threads", H5T_STD_U32LE, m.threads);
  unit("threads", "1");
  attr_number<std::uint32_t>(gid, "ranks", H5T_STD_U32LE, m.ranks);
  unit("ranks", "1");
  attr_number<double>(gid, "wall_s", H5T_IEEE_F64LE, m.wall_s);
  unit("wall_s", "s");
  attr_number<std::uint64_t>(gid, "events", H5T_STD_U64LE, m.events);
  unit("events", "1");
  attr_number<std::int64_t>(gid, "simulated_time_ps", H5T_STD_I64LE, m.simulated_time_ps);
  unit("simulated_time_ps", "ps");
  attr_number<std::int64_t>(gid, "sample_interval_ps", H5T_STD_I64LE, m.sample_interval_ps);
  unit("sample_interval_ps", "ps");
  if (m.fits_memory >= 0) {  // schema 4: only where the workload has a memory estimate
    attr_number<std::uint8_t>(gid, "fits_memory", H5T_STD_U8LE, static_cast<std::uint8_t>(m.fits_memory));
    unit("fits_memory", "1");
    attr_number<std::uint64_t>(gid, "memory_estimate_bytes", H5T_STD_U64LE, m.memory_estimate_bytes);
    unit("memory_estimate_bytes", "bytes");
    attr_number<std::uint64_t>(gid, "memory_capacity_bytes", H5T_STD_U64LE, m.memory_capacity_bytes);
    unit("memory_capacity_bytes", "bytes");
  }
  for (const auto& [name, value] : m.fabric_counters) {
    attr_number<std::uint64_t>(gid, "fabric_" + name, H5T_STD_U64LE, value);
    unit("fabric_" + name, fabric_counter_unit(name));
  }
  g.close("group /meta close");
}

/// Writes the whole file at `file_path` collectively. Every step's failure is agreed on by all
/// processes, which then all throw InternalError from the same step with their handles closed.
void write_file(MPI_Comm comm, const std::string& file_path, const RunMeta& meta,
                const PackedTable& ranks, const PackedTable& colls, const PackedTable& flows,
                const PackedTable& links, const PackedTable& queues, engine::SimTime bin_width_ps,
                const PackedTable& link_totals, const PackedTable& jobs, const PackedTable& faults) {
  QuietHdf5Errors quiet;
  const int rank = comm_rank(comm), size = comm_size(comm);
  Hid fapl, fcpl, dxpl, file;
  bool deflate = false;
  collective_step(comm, [&] {
    fapl = plist(H5P_FILE_ACCESS, "file access plist");
    check(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    check(H5Pset_all_coll_metadata_ops(fapl.get(), 1), "collective metadata reads");
    check(H5Pset_coll_metadata_write(fapl.get(), 1), "collective metadata writes");
    // 1.8 object format: dense attribute storage, so spec_text may exceed 64 KiB; still readable
    // by HDF5 1.8 and newer.
    check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "libver bounds");
    fcpl = plist(H5P_FILE_CREATE, "file creation plist");
    // No object timestamps (root group here, datasets and /meta below): byte-identical files.
    check(H5Pset_obj_track_times(fcpl.get(), 0), "root group track times");
    dxpl = plist(H5P_DATASET_XFER, "transfer plist");
    check(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
    deflate = deflate_available();
    file = Hid(H5Fcreate(file_path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose,
               "create " + file_path);
  });
  // The same on every process (same library), but make sure: filters need all or none.
  int d = deflate ? 1 : 0, dmin = 0;
  MPI_Allreduce(&d, &dmin, 1, MPI_INT, MPI_MIN, comm);
  deflate = dmin == 1;

  collective_step(comm, [&] { write_meta(file.get(), meta); });
  collective_step(comm, [&] {
    write_table(file.get(), kRankSchema, ranks, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kCollSchema, colls, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kFlowSchema, flows, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kLinkSchema, links, rank, size, dxpl.get(), deflate, bin_width_ps);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kQueueSchema, queues, rank, size, dxpl.get(), deflate, bin_width_ps);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kLinkTotalSchema, link_totals, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kJobSchema, jobs, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] {
    write_table(file.get(), kFaultSchema, faults, rank, size, dxpl.get(), deflate);
  });
  collective_step(comm, [&] { file.close("close " + file_path); });
}

/// Checks the -o path on rank 0: returns {problem, fix}, problem empty if fine.
std::pair<std::string, std::string> check_output_path(const std::string& path) {
  if (path.empty()) return {"output path is empty", "pass a file name, e.g. -o results.h5"};
  const fs::path p(path);
  std::error_code ec;
  if (!p.has_filename() || fs::is_directory(p, ec)) {
    return {"'" + path + "' is a directory", "pass a file name, e.g. -o " +
                                                 (p / "results.h5").string()};
  }
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec)) {
    return {"directory '" + dir.string() + "' does not exist",
            "create it (mkdir -p) or choose another output path"};
  }
  if (!fs::is_directory(dir, ec)) {
    return {"'" + dir.string() + "' is not a directory", "choose another output path"};
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return {"directory '" + dir.string() + "' is not writable",
            "fix its permissions or choose another output path"};
  }
  return {};
}

std::string temp_name(const std::string& path) {
  std::random_device rd;
  const std::uint64_t r = (std::uint64_t{rd()} << 32) ^ rd();
  char buf[64];
  std::snprintf(buf, sizeof buf, ".tmp.%lx.%08llx", static_cast<unsigned long>(::getpid()),
                static_cast<unsigned long long>(r & 0xffffffffull));
  return path + buf;
}

void remove_quietly(const std::string& file) {
  std::error_code ec;
  fs::remove(file, ec);
}

// A SIGINT/SIGTERM while the temporary file exists removes it, then terminates as the signal
// would have: a killed run leaves neither `path` nor a temporary file (docs/hdf5_schema.md).
char g_tmp_path[4096];
struct sigaction g_old_int, g_old_term;

extern "C" void remove_tmp_on_signal(int sig) {
  ::unlink(g_tmp_path);  // async-signal-safe
  ::sigaction(sig, sig == SIGINT ? &g_old_int : &g_old_term, nullptr);
  ::raise(sig);
}

/// Installs the handler for the lifetime of the object (only while the temporary file exists).
class TmpFileGuard {
 public:
  explicit TmpFileGuard(const std::string& tmp) {
    if (tmp.size() >= sizeof g_tmp_path) return;
    std::memcpy(g_tmp_path, tmp.c_str(), tmp.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = remove_tmp_on_signal;
    sigemptyset(&sa.sa_mask);
    installed_ = ::sigaction(SIGINT, &sa, &g_old_int) == 0 && ::sigaction(SIGTERM, &sa, &g_old_term) == 0;
  }
  ~TmpFileGuard() {
    if (!installed_) return;
    ::sigaction(SIGINT, &g_old_int, nullptr);
    ::sigaction(SIGTERM, &g_old_term, nullptr);
  }
  TmpFileGuard(const TmpFileGuard&) = delete;
  TmpFileGuard& operator=(const TmpFileGuard&) = delete;

 private:
  bool installed_ = false;
};

class Fnv1a64 {
 public:
  void bytes(const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;
    }
  }
  void u64(std::uint64_t v) { bytes(reinterpret_cast<const unsigned char*>(&v), sizeof v); }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

void write_results_h5(MPI_Comm comm, const std::string& path, const RunMeta& meta,
                      std::vector<RankRecord> ranks, std::vector<CollectiveRecord> colls,
                      std::vector<FlowRecord> flows, std::vector<LinkBinRecord> links,
                      std::vector<QueueBinRecord> queues, engine::SimTime bin_width_ps,
                      std::vector<LinkTotalRecord> link_totals, std::vector<JobRecord> jobs,
                      std::vector<FaultRecord> faults) {
  const int rank = comm_rank(comm);

  // 1. Output path, checked on rank 0 before anything is created.
  std::pair<std::string, std::string> problem;
  if (rank == 0) problem = check_output_path(path);
  problem.first = bcast_string(comm, problem.first);
  problem.second = bcast_string(comm, problem.second);
  if (!problem.first.empty()) throw InputError("<cli>", "-o", problem.first, problem.second);

  // 2. Global sorted tables (identical on every process), rank 0's metadata, temp file name.
  const PackedTable r = global_table(comm, ranks, rank_key);
  const PackedTable c = global_table(comm, colls, coll_key);
  const PackedTable f = global_table(comm, flows, flow_key);
  // Queue rows take their link's endpoints and tier from the link rows of the same process
  // (a switch LP reports both); a queue bin of a link without transmitted bytes cannot exist.
  std::vector<QueueRow> qrows;
  {
    std::vector<std::pair<std::uint32_t, const LinkBinRecord*>> by_id;
    by_id.reserve(links.size());
    for (const auto& l : links) by_id.emplace_back(l.link_id, &l);
    std::sort(by_id.begin(), by_id.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& q : queues) {
      QueueRow row{q, 0, 0, 0};
      auto it = std::lower_bound(by_id.begin(), by_id.end(), q.link_id,
                                 [](const auto& e, std::uint32_t id) { return e.first < id; });
      if (it != by_id.end() && it->first == q.link_id) {
        row.from = it->second->from_node;
        row.to = it->second->to_node;
        row.tier = it->second->tier;
      }
      qrows.push_back(row);
    }
  }
  const PackedTable l = global_table(comm, links, bin_key);
  const PackedTable q = global_table(comm, qrows, bin_key);
  const PackedTable lt = global_table(comm, link_totals, id_key);
  const PackedTable jt = global_table(comm, jobs, id_key);
  const PackedTable ft = global_table(comm, faults, id_key);
  ranks.clear();
  colls.clear();
  flows.clear();
  links.clear();
  queues.clear();
  const RunMeta m = bcast_meta(comm, meta);
  check_fabric_counter_names(m);
  const std::string tmp = bcast_string(comm, rank == 0 ? temp_name(path) : std::string());

  // 3. Write the temporary file; on failure every process removes it and rethrows.
  // Free space first: an uncompressed upper bound of the file (rows + metadata) must fit.
  {
    std::string space_err;
    if (rank == 0) {
      const double need = static_cast<double>(r.bytes.size() + c.bytes.size() + f.bytes.size() +
                                              l.bytes.size() + q.bytes.size() + lt.bytes.size() + jt.bytes.size() + ft.bytes.size()) +
                          static_cast<double>(m.spec_text.size()) + 1024.0 * 1024.0;
      std::error_code ec;
      const auto info = fs::space(fs::absolute(path).parent_path(), ec);
      if (!ec && static_cast<double>(info.available) < need) {
        space_err = "only " + std::to_string(info.available) + " bytes free, the results need up to " +
                    std::to_string(static_cast<unsigned long long>(need));
      }
    }
    space_err = bcast_string(comm, space_err);
    if (!space_err.empty()) throw InputError("<cli>", "-o " + path, space_err, "free disk space or choose another directory");
  }
  TmpFileGuard guard(tmp);
  try {
    write_file(comm, tmp, m, r, c, f, l, q, bin_width_ps, lt, jt, ft);
  } catch (const std::exception& e) {
    remove_quietly(tmp);
    MPI_Barrier(comm);
    g_write_failed = true;
    // Creating or writing the file failed: a property of the output location (permissions, a
    // full disk, a special file system), so a user error with the reason, not a crash.
    throw InputError("<cli>", "-o " + path, std::string("writing the HDF5 file failed: ") + e.what(),
                     "check free space and permissions of the output directory, or choose another path");
  }

  // 4. All processes have closed the file: rank 0 renames it into place.
  MPI_Barrier(comm);
  std::string err;
  if (rank == 0) {
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) err = "write_results_h5: cannot rename '" + tmp + "' to '" + path + "': " + ec.message();
  }
  err = bcast_string(comm, err);
  if (!err.empty()) {
    remove_quietly(tmp);
    MPI_Barrier(comm);
    throw InternalError(err);
  }
}

std::string results_digest(MPI_Comm comm, const std::vector<CollectiveRecord>& colls,
                           const std::vector<FlowRecord>& flows) {
  const PackedTable c = global_table(comm, colls, coll_key);
  const PackedTable f = global_table(comm, flows, flow_key);
  // Schema-1 columns only (a prefix of each row), so digests stay comparable across schema 2.
  Fnv1a64 h;
  const std::size_t cs = kCollSchema.prefix_size(kCollSchema.digest_cols);
  const std::size_t fs_ = kFlowSchema.prefix_size(kFlowSchema.digest_cols);
  h.u64(c.rows());
  for (std::size_t i = 0; i < c.rows(); ++i) h.bytes(c.row(i), cs);
  h.u64(f.rows());
  for (std::size_t i = 0; i < f.rows(); ++i) h.bytes(f.row(i), fs_);
  return h.hex();
}

bool hdf5_write_failed() { return g_write_failed; }

}  // namespace fabricsim::io
