// Tests of io/hdf5_writer: collective write of /meta, /ranks, /collectives, /flows with 1, 2 or 4
// processes; the global tables (and so the file contents and the digest) do not depend on P.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "io/hdf5_writer.hpp"
#include "io/results.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/scratch.hpp"

using fabricsim::testing::world_procs;
using fabricsim::testing::world_rank;

namespace fabricsim::io {
namespace {

namespace fs = std::filesystem;

// ---- The known global tables (independent of the number of processes). ----

constexpr int kRows = 16;
const char* const kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall",
                            "abcdefghijklmnopqrstuvwx" /* exactly 24 chars */, "x"};

RankRecord rank_row(int i) {
  RankRecord r;
  r.rank = static_cast<std::uint32_t>(i);
  r.finish_ps = 1'000'000'000'000LL + i * 7;
  r.compute_ps = i * 1000 + 1;
  r.comm_ps = i * 2000 + 2;
  r.exposed_comm_ps = (i % 3 == 0) ? 0 : i * 300 + 3;
  for (std::size_t k = 0; k < r.exposed_kind_ps.size(); ++k) r.exposed_kind_ps[k] = i * 10 + static_cast<int>(k);
  r.pp_wait_ps = i * 3;
  r.bubble_ps = i * 11 + 5;
  return r;
}

CollectiveRecord coll_row(int i) {
  CollectiveRecord c;
  c.group = static_cast<std::uint32_t>(i % 3);
  c.instance = static_cast<std::uint32_t>(i / 3);
  c.op = kOps[i % 6];
  c.bytes = std::uint64_t{1} << (i + 20);
  c.ranks = static_cast<std::uint32_t>(2 + i);
  c.start_ps = 5'000LL * i;
  c.end_ps = 5'000LL * i + 123'456'789LL * (i + 1);
  c.algbw_GBps = 0.1 * i + 1.0 / 3.0;
  c.busbw_GBps = (i == 5) ? -0.0 : (i == 6 ? std::numeric_limits<double>::denorm_min() : 1.5 * i);
  return c;
}

FlowRecord flow_row(int i) {
  FlowRecord f;
  const std::uint64_t src = static_cast<std::uint64_t>(i % 4);
  f.flow_id = (src << 32) | static_cast<std::uint64_t>(i / 4);
  f.src = static_cast<std::uint32_t>(src);
  f.dst = static_cast<std::uint32_t>((i + 1) % 4);
  f.bytes = 4096u * static_cast<std::uint64_t>(i + 1);
  f.start_ps = 100LL * i;
  f.end_ps = 100LL * i + 77 * (i + 1);
  f.fct_ps = f.end_ps - f.start_ps;
  return f;
}

// Each process contributes the rows i with i % P == r, in reverse order (so the writer must sort).
template <class Rec, class Make>
std::vector<Rec> local_rows(int n, Make make) {
  const int r = world_rank(), p = world_procs();
  std::vector<Rec> v;
  for (int i = n - 1; i >= 0; --i) {
    if (i % p == r) v.push_back(make(i));
  }
  return v;
}

std::vector<RankRecord> expected_ranks() {
  std::vector<RankRecord> v;
  for (int i = 0; i < 8; ++i) v.push_back(rank_row(i));
  return v;
}
std::vector<CollectiveRecord> expected_colls() {
  std::vector<CollectiveRecord> v;
  for (int i = 0; i < kRows; ++i) v.push_back(coll_row(i));
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.group != b.group ? a.group < b.group : a.instance < b.instance;
  });
  return v;
}
std::vector<FlowRecord> expected_flows() {
  std::vector<FlowRecord> v;
  for (int i = 0; i < kRows; ++i) v.push_back(flow_row(i));
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.flow_id < b.flow_id; });
  return v;
}

RunMeta make_meta() {
  RunMeta m;
  m.spec_text = "cluster:\n  gpus: 16\n";
  // > 64 KiB: needs dense attribute storage.
  for (int i = 0; i < 5000; ++i) m.spec_text += "# padding line " + std::to_string(i) + "\n";
  m.version = "0.1.0";
  m.git_commit = "0123456789ab";
  m.workload = "examples/llama/et";
  m.seed = 0xdeadbeefcafef00dull;
  m.processes = static_cast<std::uint32_t>(world_procs());
  m.threads = 3;
  m.ranks = 8;
  m.wall_s = 1.25;
  m.events = 1'234'567'890'123ull;
  m.simulated_time_ps = 9'876'543'210'987LL;
  m.fabric_counters = {{"pause_frames", 12}, {"switch_paused_ps", 3'000'000'000'123ull},
                       {"max_buffer_bytes", 0xFFFF'FFFF'FFFF'FFFFull}, {"drops", 0}};
  return m;
}

// ---- Independent digest: FNV-1a 64 over the documented byte stream. ----

struct Fnv {
  std::uint64_t h = 14695981039346656037ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 1099511628211ull;
  }
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) byte(static_cast<unsigned char>(v >> (8 * i)));
  }
};

std::string expected_digest(const std::vector<CollectiveRecord>& colls,
                            const std::vector<FlowRecord>& flows) {
  Fnv f;
  f.le(colls.size(), 8);
  for (const auto& c : colls) {
    f.le(c.group, 4);
    f.le(c.instance, 4);
    for (std::size_t k = 0; k < 24; ++k) {
      f.byte(k < c.op.size() ? static_cast<unsigned char>(c.op[k]) : 0);
    }
    f.le(c.bytes, 8);
    f.le(c.ranks, 4);
    f.le(static_cast<std::uint64_t>(c.start_ps), 8);
    f.le(static_cast<std::uint64_t>(c.end_ps), 8);
    f.le(std::bit_cast<std::uint64_t>(c.algbw_GBps), 8);
    f.le(std::bit_cast<std::uint64_t>(c.busbw_GBps), 8);
  }
  f.le(flows.size(), 8);
  for (const auto& x : flows) {
    f.le(x.flow_id, 8);
    f.le(x.src, 4);
    f.le(x.dst, 4);
    f.le(x.bytes, 8);
    f.le(static_cast<std::uint64_t>(x.start_ps), 8);
    f.le(static_cast<std::uint64_t>(x.end_ps), 8);
    f.le(static_cast<std::uint64_t>(x.fct_ps), 8);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(f.h));
  return buf;
}

// ---- Shared scratch directory (ScratchDirTest: created by rank 0, same path everywhere). ----

class Hdf5WriterTest : public fabricsim::testing::ScratchDirTest {
 protected:
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
};

// ---- Reading back with the (serial) HDF5 C API. ----

struct RankRow {
  std::uint32_t rank;
  std::int64_t finish_ps, compute_ps, comm_ps, exposed_comm_ps;
  std::int64_t kind[6];
  std::int64_t pp_wait_ps, bubble_ps;
};
struct CollRow {
  std::uint32_t group, instance;
  char op[24];
  std::uint64_t bytes;
  std::uint32_t ranks;
  std::int64_t start_ps, end_ps;
  double algbw, busbw;
};
struct FlowRow {
  std::uint64_t flow_id;
  std::uint32_t src, dst;
  std::uint64_t bytes;
  std::int64_t start_ps, end_ps, fct_ps;
};

hid_t op_type() {
  hid_t s = H5Tcopy(H5T_C_S1);
  H5Tset_size(s, 24);
  H5Tset_strpad(s, H5T_STR_NULLPAD);
  return s;
}

template <class Row>
std::vector<Row> read_rows(hid_t file, const char* name, hid_t mem_type) {
  hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  EXPECT_GE(ds, 0) << name;
  if (ds < 0) return {};
  hid_t space = H5Dget_space(ds);
  hsize_t dims[1] = {0}, maxdims[1] = {0};
  EXPECT_EQ(H5Sget_simple_extent_dims(space, dims, maxdims), 1);
  EXPECT_EQ(maxdims[0], H5S_UNLIMITED);
  hid_t dcpl = H5Dget_create_plist(ds);
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_CHUNKED);
  H5Pclose(dcpl);
  std::vector<Row> rows(dims[0]);
  if (dims[0] > 0) {
    EXPECT_GE(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  }
  H5Sclose(space);
  H5Dclose(ds);
  return rows;
}

std::string read_string_attr(hid_t obj, const char* name) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  EXPECT_GE(a, 0) << name;
  if (a < 0) return "<missing>";
  hid_t t = H5Aget_type(a);
  EXPECT_EQ(H5Tget_class(t), H5T_STRING);
  EXPECT_FALSE(H5Tis_variable_str(t));
  std::string s(H5Tget_size(t), '\0');
  EXPECT_GE(H5Aread(a, t, s.data()), 0);
  H5Tclose(t);
  H5Aclose(a);
  s.resize(std::strlen(s.c_str()));
  return s;
}

template <class T>
T read_num_attr(hid_t obj, const char* name, hid_t mem_type) {
  T v{};
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  EXPECT_GE(a, 0) << name;
  if (a < 0) return v;
  EXPECT_GE(H5Aread(a, mem_type, &v), 0);
  H5Aclose(a);
  return v;
}

void check_units(hid_t file, const char* ds_name, const std::vector<std::pair<std::string, std::string>>& units,
                 const char* sorted_by) {
  hid_t ds = H5Dopen2(file, ds_name, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  EXPECT_EQ(read_string_attr(ds, "sorted_by"), sorted_by);
  for (const auto& [col, unit] : units) {
    EXPECT_EQ(read_string_attr(ds, ("units." + col).c_str()), unit) << ds_name << "." << col;
  }
  EXPECT_EQ(H5Aget_num_attrs(ds), static_cast<int>(units.size()) + 1);
  H5Dclose(ds);
}

void check_file(const std::string& path, const RunMeta& meta, const std::vector<RankRecord>& ranks,
                const std::vector<CollectiveRecord>& colls, const std::vector<FlowRecord>& flows) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;

  // /meta
  hid_t g = H5Gopen2(file, "/meta", H5P_DEFAULT);
  ASSERT_GE(g, 0);
  EXPECT_EQ(read_num_attr<std::int32_t>(g, "schema_version", H5T_NATIVE_INT32), 5);
  EXPECT_EQ(read_string_attr(g, "spec_text"), meta.spec_text);
  EXPECT_EQ(read_string_attr(g, "version"), meta.version);
  EXPECT_EQ(read_string_attr(g, "git_commit"), meta.git_commit);
  EXPECT_EQ(read_string_attr(g, "workload"), meta.workload);
  EXPECT_EQ(read_num_attr<std::uint64_t>(g, "seed", H5T_NATIVE_UINT64), meta.seed);
  EXPECT_EQ(read_num_attr<std::uint32_t>(g, "processes", H5T_NATIVE_UINT32), meta.processes);
  EXPECT_EQ(read_num_attr<std::uint32_t>(g, "threads", H5T_NATIVE_UINT32), meta.threads);
  EXPECT_EQ(read_num_attr<std::uint32_t>(g, "ranks", H5T_NATIVE_UINT32), meta.ranks);
  EXPECT_EQ(read_num_attr<double>(g, "wall_s", H5T_NATIVE_DOUBLE), meta.wall_s);
  EXPECT_EQ(read_num_attr<std::uint64_t>(g, "events", H5T_NATIVE_UINT64), meta.events);
  EXPECT_EQ(read_num_attr<std::int64_t>(g, "simulated_time_ps", H5T_NATIVE_INT64),
            meta.simulated_time_ps);
  EXPECT_EQ(read_num_attr<std::int64_t>(g, "sample_interval_ps", H5T_NATIVE_INT64), meta.sample_interval_ps);
  // Schema 3: units.X for every attribute X; fabric counters as fabric_<name> (uint64).
  const std::pair<const char*, const char*> units[] = {
      {"schema_version", "1"}, {"spec_text", "text"}, {"version", "text"}, {"git_commit", "text"},
      {"workload", "text"},    {"seed", "1"},         {"processes", "1"},  {"threads", "1"},
      {"ranks", "1"},          {"wall_s", "s"},       {"events", "1"},     {"simulated_time_ps", "ps"},
      {"sample_interval_ps", "ps"}};
  for (const auto& [name, unit] : units) {
    EXPECT_EQ(read_string_attr(g, (std::string("units.") + name).c_str()), unit) << name;
  }
  for (const auto& [name, value] : meta.fabric_counters) {
    const std::string a = "fabric_" + name;
    hid_t at = H5Aopen(g, a.c_str(), H5P_DEFAULT);
    ASSERT_GE(at, 0) << a;
    hid_t t = H5Aget_type(at);
    EXPECT_GT(H5Tequal(t, H5T_STD_U64LE), 0) << a;
    H5Tclose(t);
    H5Aclose(at);
    EXPECT_EQ(read_num_attr<std::uint64_t>(g, a.c_str(), H5T_NATIVE_UINT64), value) << a;
    const char* want = name.ends_with("_ps") ? "ps" : name.ends_with("_bytes") ? "bytes" : "1";
    EXPECT_EQ(read_string_attr(g, ("units." + a).c_str()), want) << a;
  }
  // Schema 4: fits_memory (uint8 0/1) and the estimate only where the workload has one.
  const int memory_attrs = meta.fits_memory >= 0 ? 3 : 0;
  EXPECT_EQ(H5Aexists(g, "fits_memory") > 0, meta.fits_memory >= 0);
  if (meta.fits_memory >= 0) {
    EXPECT_EQ(read_num_attr<std::uint32_t>(g, "fits_memory", H5T_NATIVE_UINT32),
              static_cast<std::uint32_t>(meta.fits_memory));
    EXPECT_EQ(read_num_attr<std::uint64_t>(g, "memory_estimate_bytes", H5T_NATIVE_UINT64), meta.memory_estimate_bytes);
    EXPECT_EQ(read_num_attr<std::uint64_t>(g, "memory_capacity_bytes", H5T_NATIVE_UINT64), meta.memory_capacity_bytes);
    EXPECT_EQ(read_string_attr(g, "units.memory_estimate_bytes"), "bytes");
  }
  EXPECT_EQ(H5Aget_num_attrs(g), 2 * (13 + memory_attrs + static_cast<int>(meta.fabric_counters.size())));
  H5Gclose(g);

  // /ranks
  hid_t rt = H5Tcreate(H5T_COMPOUND, sizeof(RankRow));
  H5Tinsert(rt, "rank", HOFFSET(RankRow, rank), H5T_NATIVE_UINT32);
  H5Tinsert(rt, "finish_ps", HOFFSET(RankRow, finish_ps), H5T_NATIVE_INT64);
  H5Tinsert(rt, "compute_ps", HOFFSET(RankRow, compute_ps), H5T_NATIVE_INT64);
  H5Tinsert(rt, "comm_ps", HOFFSET(RankRow, comm_ps), H5T_NATIVE_INT64);
  H5Tinsert(rt, "exposed_comm_ps", HOFFSET(RankRow, exposed_comm_ps), H5T_NATIVE_INT64);
  const char* const kinds[] = {"exposed_tp_ps", "exposed_dp_ps", "exposed_ep_ps",
                               "exposed_pp_ps", "exposed_cp_ps", "exposed_other_ps"};
  for (std::size_t k = 0; k < 6; ++k) {
    H5Tinsert(rt, kinds[k], HOFFSET(RankRow, kind) + k * sizeof(std::int64_t), H5T_NATIVE_INT64);
  }
  H5Tinsert(rt, "pp_wait_ps", HOFFSET(RankRow, pp_wait_ps), H5T_NATIVE_INT64);
  H5Tinsert(rt, "bubble_ps", HOFFSET(RankRow, bubble_ps), H5T_NATIVE_INT64);
  const auto rr = read_rows<RankRow>(file, "/ranks", rt);
  H5Tclose(rt);
  ASSERT_EQ(rr.size(), ranks.size());
  for (std::size_t i = 0; i < rr.size(); ++i) {
    EXPECT_EQ(rr[i].rank, ranks[i].rank) << i;
    EXPECT_EQ(rr[i].finish_ps, ranks[i].finish_ps) << i;
    EXPECT_EQ(rr[i].compute_ps, ranks[i].compute_ps) << i;
    EXPECT_EQ(rr[i].comm_ps, ranks[i].comm_ps) << i;
    EXPECT_EQ(rr[i].exposed_comm_ps, ranks[i].exposed_comm_ps) << i;
    for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(rr[i].kind[k], ranks[i].exposed_kind_ps[k]) << i << " kind " << k;
    EXPECT_EQ(rr[i].pp_wait_ps, ranks[i].pp_wait_ps) << i;
    EXPECT_EQ(rr[i].bubble_ps, ranks[i].bubble_ps) << i;
  }

  // /collectives
  hid_t ct = H5Tcreate(H5T_COMPOUND, sizeof(CollRow));
  hid_t st = op_type();
  H5Tinsert(ct, "group", HOFFSET(CollRow, group), H5T_NATIVE_UINT32);
  H5Tinsert(ct, "instance", HOFFSET(CollRow, instance), H5T_NATIVE_UINT32);
  H5Tinsert(ct, "op", HOFFSET(CollRow, op), st);
  H5Tinsert(ct, "bytes", HOFFSET(CollRow, bytes), H5T_NATIVE_UINT64);
  H5Tinsert(ct, "ranks", HOFFSET(CollRow, ranks), H5T_NATIVE_UINT32);
  H5Tinsert(ct, "start_ps", HOFFSET(CollRow, start_ps), H5T_NATIVE_INT64);
  H5Tinsert(ct, "end_ps", HOFFSET(CollRow, end_ps), H5T_NATIVE_INT64);
  H5Tinsert(ct, "algbw_GBps", HOFFSET(CollRow, algbw), H5T_NATIVE_DOUBLE);
  H5Tinsert(ct, "busbw_GBps", HOFFSET(CollRow, busbw), H5T_NATIVE_DOUBLE);
  const auto cr = read_rows<CollRow>(file, "/collectives", ct);
  H5Tclose(st);
  H5Tclose(ct);
  ASSERT_EQ(cr.size(), colls.size());
  for (std::size_t i = 0; i < cr.size(); ++i) {
    EXPECT_EQ(cr[i].group, colls[i].group) << i;
    EXPECT_EQ(cr[i].instance, colls[i].instance) << i;
    EXPECT_EQ(std::string(cr[i].op, strnlen(cr[i].op, 24)), colls[i].op) << i;
    EXPECT_EQ(cr[i].bytes, colls[i].bytes) << i;
    EXPECT_EQ(cr[i].ranks, colls[i].ranks) << i;
    EXPECT_EQ(cr[i].start_ps, colls[i].start_ps) << i;
    EXPECT_EQ(cr[i].end_ps, colls[i].end_ps) << i;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(cr[i].algbw),
              std::bit_cast<std::uint64_t>(colls[i].algbw_GBps)) << i;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(cr[i].busbw),
              std::bit_cast<std::uint64_t>(colls[i].busbw_GBps)) << i;
  }

  // /flows
  hid_t ft = H5Tcreate(H5T_COMPOUND, sizeof(FlowRow));
  H5Tinsert(ft, "flow_id", HOFFSET(FlowRow, flow_id), H5T_NATIVE_UINT64);
  H5Tinsert(ft, "src", HOFFSET(FlowRow, src), H5T_NATIVE_UINT32);
  H5Tinsert(ft, "dst", HOFFSET(FlowRow, dst), H5T_NATIVE_UINT32);
  H5Tinsert(ft, "bytes", HOFFSET(FlowRow, bytes), H5T_NATIVE_UINT64);
  H5Tinsert(ft, "start_ps", HOFFSET(FlowRow, start_ps), H5T_NATIVE_INT64);
  H5Tinsert(ft, "end_ps", HOFFSET(FlowRow, end_ps), H5T_NATIVE_INT64);
  H5Tinsert(ft, "fct_ps", HOFFSET(FlowRow, fct_ps), H5T_NATIVE_INT64);
  const auto fr = read_rows<FlowRow>(file, "/flows", ft);
  H5Tclose(ft);
  ASSERT_EQ(fr.size(), flows.size());
  for (std::size_t i = 0; i < fr.size(); ++i) {
    EXPECT_EQ(fr[i].flow_id, flows[i].flow_id) << i;
    EXPECT_EQ(fr[i].src, flows[i].src) << i;
    EXPECT_EQ(fr[i].dst, flows[i].dst) << i;
    EXPECT_EQ(fr[i].bytes, flows[i].bytes) << i;
    EXPECT_EQ(fr[i].start_ps, flows[i].start_ps) << i;
    EXPECT_EQ(fr[i].end_ps, flows[i].end_ps) << i;
    EXPECT_EQ(fr[i].fct_ps, flows[i].fct_ps) << i;
  }

  check_units(file, "/ranks",
              {{"rank", "1"}, {"finish_ps", "ps"}, {"compute_ps", "ps"}, {"comm_ps", "ps"},
               {"exposed_comm_ps", "ps"}, {"exposed_tp_ps", "ps"}, {"exposed_dp_ps", "ps"},
               {"exposed_ep_ps", "ps"}, {"exposed_pp_ps", "ps"}, {"exposed_cp_ps", "ps"},
               {"exposed_other_ps", "ps"}, {"pp_wait_ps", "ps"}, {"bubble_ps", "ps"}, {"job", "1"}},
              "rank");
  check_units(file, "/collectives",
              {{"group", "1"}, {"instance", "1"}, {"op", "text"}, {"bytes", "bytes"},
               {"ranks", "1"}, {"start_ps", "ps"}, {"end_ps", "ps"}, {"algbw_GBps", "GB/s"},
               {"busbw_GBps", "GB/s"}, {"algorithm", "text"}, {"protocol", "text"}, {"channels", "1"},
               {"job", "1"}},
              "group,instance");
  check_units(file, "/flows",
              {{"flow_id", "1"}, {"src", "1"}, {"dst", "1"}, {"bytes", "bytes"},
               {"start_ps", "ps"}, {"end_ps", "ps"}, {"fct_ps", "ps"}, {"first_byte_ps", "ps"},
               {"ideal_ps", "ps"}, {"slowdown", "1"}, {"first_spine", "1"}, {"group", "1"},
               {"instance", "1"}, {"job", "1"}},
              "flow_id");
  EXPECT_GE(H5Fclose(file), 0);
}

// ---- Tests ----

TEST_F(Hdf5WriterTest, WritesSortedGlobalTablesAndMeta) {
  const std::string path = dir_.string() + "/out.h5";
  const RunMeta meta = make_meta();
  RunMeta local_meta = meta;
  if (world_rank() != 0) local_meta.wall_s = 99.0 + world_rank();  // rank 0's meta is written
  write_results_h5(MPI_COMM_WORLD, path, local_meta, local_rows<RankRecord>(8, rank_row),
                   local_rows<CollectiveRecord>(kRows, coll_row),
                   local_rows<FlowRecord>(kRows, flow_row));
  MPI_Barrier(MPI_COMM_WORLD);
  check_file(path, meta, expected_ranks(), expected_colls(), expected_flows());
  EXPECT_EQ(entries(), std::vector<std::string>{"out.h5"});  // no .tmp.* left

  // Overwriting an existing file replaces it.
  RunMeta meta2 = meta;
  meta2.seed = 7;
  meta2.spec_text = "small";
  meta2.fits_memory = 0;  // a memory verdict: the three schema-4 attributes appear
  meta2.memory_estimate_bytes = 1'400'000'000'000ull;
  meta2.memory_capacity_bytes = 80'000'000'000ull;
  write_results_h5(MPI_COMM_WORLD, path, meta2, local_rows<RankRecord>(8, rank_row),
                   local_rows<CollectiveRecord>(kRows, coll_row),
                   local_rows<FlowRecord>(kRows, flow_row));
  MPI_Barrier(MPI_COMM_WORLD);
  check_file(path, meta2, expected_ranks(), expected_colls(), expected_flows());
  EXPECT_EQ(entries(), std::vector<std::string>{"out.h5"});
}

TEST_F(Hdf5WriterTest, DigestIsIndependentOfProcessCount) {
  const std::string got = results_digest(MPI_COMM_WORLD, local_rows<CollectiveRecord>(kRows, coll_row),
                                         local_rows<FlowRecord>(kRows, flow_row));
  // Computed from the full expected tables, the same on every rank and for every P.
  const std::string want = expected_digest(expected_colls(), expected_flows());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.size(), 16u);
  // The digest of empty tables is FNV-1a of 16 zero bytes.
  EXPECT_EQ(results_digest(MPI_COMM_WORLD, {}, {}), expected_digest({}, {}));
  // Any change of a row changes it.
  auto colls = local_rows<CollectiveRecord>(kRows, coll_row);
  if (world_rank() == 0) colls.front().busbw_GBps = std::nextafter(colls.front().busbw_GBps, 1e9);
  EXPECT_NE(results_digest(MPI_COMM_WORLD, colls, local_rows<FlowRecord>(kRows, flow_row)), want);
  // All ranks agree.
  char mine[17] = {}, root[17] = {};
  std::memcpy(mine, got.c_str(), 16);
  std::memcpy(root, got.c_str(), 16);
  MPI_Bcast(root, 17, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_STREQ(mine, root);
}

TEST_F(Hdf5WriterTest, EmptyTables) {
  const std::string path = dir_.string() + "/empty.h5";
  RunMeta meta;  // defaults, empty strings
  write_results_h5(MPI_COMM_WORLD, path, meta, {}, {}, {});
  MPI_Barrier(MPI_COMM_WORLD);
  check_file(path, meta, {}, {}, {});
  EXPECT_EQ(entries(), std::vector<std::string>{"empty.h5"});
}

TEST_F(Hdf5WriterTest, FewerRowsThanProcesses) {
  const std::string path = dir_.string() + "/one.h5";
  const RunMeta meta = make_meta();
  std::vector<FlowRecord> flows;
  if (world_rank() == world_procs() - 1) flows.push_back(flow_row(5));
  write_results_h5(MPI_COMM_WORLD, path, meta, {}, {}, flows);
  MPI_Barrier(MPI_COMM_WORLD);
  check_file(path, meta, {}, {}, {flow_row(5)});
}

TEST_F(Hdf5WriterTest, MissingDirectoryThrowsInputErrorAndLeavesNothing) {
  const std::string path = dir_.string() + "/no/such/dir/out.h5";
  try {
    write_results_h5(MPI_COMM_WORLD, path, make_meta(), local_rows<RankRecord>(8, rank_row),
                     local_rows<CollectiveRecord>(kRows, coll_row),
                     local_rows<FlowRecord>(kRows, flow_row));
    ADD_FAILURE() << "no exception";
  } catch (const engine::InputError& e) {
    EXPECT_EQ(e.file(), "<cli>");
    EXPECT_EQ(e.field(), "-o");
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(entries().empty());
  // A directory as the output path is an input error too.
  EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, dir_.string(), make_meta(), {}, {}, {}), engine::InputError);
  EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, "", make_meta(), {}, {}, {}), engine::InputError);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(entries().empty());
}

TEST_F(Hdf5WriterTest, TooLongOpThrowsInternalErrorOnEveryProcess) {
  const std::string path = dir_.string() + "/bad.h5";
  std::vector<CollectiveRecord> colls = local_rows<CollectiveRecord>(kRows, coll_row);
  if (world_rank() == world_procs() - 1) colls.front().op = std::string(25, 'y');
  EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, path, make_meta(), {}, colls, {}),
               engine::InternalError);
  EXPECT_THROW(results_digest(MPI_COMM_WORLD, colls, {}), engine::InternalError);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(entries().empty());
}

TEST_F(Hdf5WriterTest, BadFabricCounterNameThrowsInternalErrorOnEveryProcess) {
  // Rank 0's meta is written: its bad name makes every process throw, nothing is created.
  const std::string path = dir_.string() + "/bad.h5";
  for (const char* bad : {"", "Pause", "a/b", "units.x"}) {
    RunMeta m = make_meta();
    if (world_rank() == 0) m.fabric_counters.emplace_back(bad, 1);
    EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, path, m, {}, {}, {}), engine::InternalError) << bad;
  }
  RunMeta dup = make_meta();
  dup.fabric_counters.emplace_back("pause_frames", 1);
  EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, path, dup, {}, {}, {}), engine::InternalError);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(entries().empty());
}

TEST_F(Hdf5WriterTest, ParentIsRegularFileThrowsInputError) {
  // The -o directory is a regular file: refused up front, nothing created.
  const std::string file_as_dir = dir_.string() + "/plain";
  if (world_rank() == 0) std::fclose(std::fopen(file_as_dir.c_str(), "w"));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_THROW(write_results_h5(MPI_COMM_WORLD, file_as_dir + "/out.h5", make_meta(), {}, {}, {}),
               engine::InputError);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(entries(), std::vector<std::string>{"plain"});
}

}  // namespace
}  // namespace fabricsim::io
