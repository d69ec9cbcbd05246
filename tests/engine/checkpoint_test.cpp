// Checkpoint and restart at the engine level (engine/checkpoint.hpp, Simulator::save_state):
// PHOLD checkpointed at three simulated times and restarted from each gives the uninterrupted
// run's events, checksum and window count, sequentially, with 2 threads and on 2 or 4 MPI
// processes; checkpoints of another run, build, process or thread count, and truncated or corrupt
// files are refused with one line naming the file; a stop request stops every process at the same
// window boundary.
#include <gtest/gtest.h>
#include <mpi.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/phold/phold_lp.hpp"
#include "engine/checkpoint.hpp"
#include "engine/errors.hpp"
#include "engine/simulator.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/scratch.hpp"

namespace fabricsim::models {
namespace {

using engine::SimTime;
namespace fs = std::filesystem;

PholdConfig small_config(std::uint32_t threads) {
  PholdConfig c;
  c.lps = 256;
  c.population = 4;
  c.remote_fraction = 0.5;
  c.mean_delay_ps = 200'000;
  c.lookahead_ps = 50'000;
  c.end_time_ps = 4'000'000;
  c.seed = 7;
  c.threads = threads;
  return c;
}

std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

void write_bytes(const fs::path& p, const std::vector<std::byte>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

bool is_root() { return testing::world_rank() == 0; }

/// Rank 0 changes a file (others wait).
template <class F>
void on_root(F&& f) {
  if (is_root()) f();
  MPI_Barrier(MPI_COMM_WORLD);
}

/// The message of the InputError `f` throws ("" if none).
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const engine::InputError& e) {
    return e.what();
  }
  return "";
}

class CheckpointTest : public testing::ScratchDirTest, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(CheckpointTest, RestartFromEachOfThreeCheckpointsMatchesUninterruptedRun) {
  const PholdConfig cfg = small_config(GetParam());
  const PholdResult whole = run_phold(MPI_COMM_WORLD, cfg);
  ASSERT_GT(whole.events, 1000u);
  PholdCheckpoints ck;
  ck.at = {1'000'000, 2'000'000, 3'000'000};
  ck.dir = (dir_ / "ck").string();
  std::vector<std::string> written;
  ck.written = &written;
  const PholdResult with_ckpt = run_phold(MPI_COMM_WORLD, cfg, ck);
  // Writing checkpoints changes nothing.
  EXPECT_EQ(with_ckpt.events, whole.events);
  EXPECT_EQ(with_ckpt.checksum, whole.checksum);
  ASSERT_EQ(written.size(), 3u);
  for (std::size_t i = 0; i < written.size(); ++i) {
    // Each checkpoint's boundary is at or after its requested time and before the next one.
    const SimTime t = engine::parse_checkpoint_header(read_bytes(fs::path(written[i]) / "manifest.bin")).time_ps;
    EXPECT_GE(t, ck.at[i]);
    if (i + 1 < ck.at.size()) {
      EXPECT_LT(t, ck.at[i + 1]);
    }
    PholdCheckpoints restart;
    restart.restart = written[i];
    const PholdResult r = run_phold(MPI_COMM_WORLD, cfg, restart);
    EXPECT_EQ(r.events, whole.events) << written[i];
    EXPECT_EQ(r.checksum, whole.checksum) << written[i];
    // With the same checkpoint times (windows end at them), the engine's counters continue
    // exactly too: the boundary's repeated exchange is not counted.
    PholdCheckpoints same = ck;
    same.restart = written[i];
    same.dir = (dir_ / ("re" + std::to_string(i))).string();
    same.written = nullptr;
    const PholdResult rs = run_phold(MPI_COMM_WORLD, cfg, same);
    EXPECT_EQ(rs.checksum, whole.checksum) << written[i];
    EXPECT_EQ(rs.stats.windows, with_ckpt.stats.windows) << written[i];
    EXPECT_EQ(rs.stats.exchange_messages, with_ckpt.stats.exchange_messages) << written[i];
    EXPECT_EQ(rs.stats.exchange_bytes, with_ckpt.stats.exchange_bytes) << written[i];
  }
  // --restart DIR follows DIR/latest: the last checkpoint.
  PholdCheckpoints latest;
  latest.restart = ck.dir;
  EXPECT_EQ(run_phold(MPI_COMM_WORLD, cfg, latest).checksum, whole.checksum);
  // A restart may checkpoint again (times up to its own boundary are passed: one checkpoint
  // here), and restarting from that gives the same result too.
  PholdCheckpoints again;
  again.restart = written[0];
  again.at = {ck.at[0], 2'500'000};
  again.dir = (dir_ / "ck2").string();
  std::vector<std::string> w2;
  again.written = &w2;
  EXPECT_EQ(run_phold(MPI_COMM_WORLD, cfg, again).checksum, whole.checksum);
  ASSERT_EQ(w2.size(), 1u);
  PholdCheckpoints from2;
  from2.restart = w2[0];
  EXPECT_EQ(run_phold(MPI_COMM_WORLD, cfg, from2).checksum, whole.checksum);
}

TEST_P(CheckpointTest, WallClockCheckpointsAgreeAcrossProcessesAndRestart) {
  const PholdConfig cfg = small_config(GetParam());
  const PholdResult whole = run_phold(MPI_COMM_WORLD, cfg);
  PholdCheckpoints ck;
  ck.every_s = 1e-9;  // due at every window (rank 0's clock decides; all processes follow)
  ck.dir = (dir_ / "every").string();
  std::vector<std::string> written;
  ck.written = &written;
  EXPECT_EQ(run_phold(MPI_COMM_WORLD, cfg, ck).checksum, whole.checksum);
  ASSERT_GE(written.size(), 3u);
  EXPECT_LE(written.size(), whole.stats.windows + 1);  // at most one per window boundary
  for (const std::string& w : {written.front(), written[written.size() / 2]}) {
    PholdCheckpoints r;
    r.restart = w;
    EXPECT_EQ(run_phold(MPI_COMM_WORLD, cfg, r).checksum, whole.checksum) << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, CheckpointTest, ::testing::Values(1u, 2u));

class CheckpointRefusal : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    testing::ScratchDirTest::SetUp();
    cfg_ = small_config(1);
    PholdCheckpoints ck;
    ck.at = {1'500'000};
    ck.dir = (dir_ / "ck").string();
    std::vector<std::string> written;
    ck.written = &written;
    run_phold(MPI_COMM_WORLD, cfg_, ck);
    ASSERT_EQ(written.size(), 1u);
    path_ = written[0];
  }
  /// The error of restarting `cfg` (default: the checkpoint's own config) from the checkpoint.
  std::string restart_error(const PholdConfig* cfg = nullptr, const std::string& build = "phold") {
    PholdCheckpoints r;
    r.restart = path_;
    r.build = build;
    return input_error([&] { run_phold(MPI_COMM_WORLD, cfg ? *cfg : cfg_, r); });
  }
  /// Re-encodes the manifest's header with `edit` applied (valid checksums: only the field differs).
  template <class F>
  void edit_manifest(F&& edit) {
    on_root([&] {
      const fs::path m = fs::path(path_) / "manifest.bin";
      auto bytes = read_bytes(m);
      auto h = engine::parse_checkpoint_header(bytes, m.string());
      edit(h);
      write_bytes(m, engine::encode_checkpoint(h, std::span<const std::byte>(bytes).subspan(engine::kCheckpointHeaderBytes)));
    });
  }
  PholdConfig cfg_;
  std::string path_;
};

TEST_F(CheckpointRefusal, IntactCheckpointRestarts) { EXPECT_EQ(restart_error(), ""); }

TEST_F(CheckpointRefusal, OtherSpecIsRefused) {
  PholdConfig other = cfg_;
  other.seed = 8;
  const std::string e = restart_error(&other);
  EXPECT_NE(e.find("manifest.bin: spec: written for another spec or seed"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, OtherBuildIsRefused) {
  const std::string e = restart_error(nullptr, "phold-2");
  EXPECT_NE(e.find("manifest.bin: build: written by fabricsim phold, this is fabricsim phold-2"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, OtherThreadCountIsRefused) {
  PholdConfig other = cfg_;
  other.threads = 2;
  const std::string e = restart_error(&other);
  EXPECT_NE(e.find("threads: written with 1 engine thread(s) per process, this run has 2"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, OtherProcessCountIsRefused) {
  const std::uint32_t procs = static_cast<std::uint32_t>(testing::world_procs());
  edit_manifest([&](engine::CheckpointHeader& h) { h.processes = procs + 1; });
  const std::string e = restart_error();
  EXPECT_NE(e.find("manifest.bin: processes: written by " + std::to_string(procs + 1) + " MPI process(es), this run has " +
                   std::to_string(procs)),
            std::string::npos)
      << e;
}

TEST_F(CheckpointRefusal, OtherFormatVersionIsRefused) {
  edit_manifest([](engine::CheckpointHeader& h) { h.format_version = engine::kCheckpointFormatVersion + 1; });
  const std::string e = restart_error();
  EXPECT_NE(e.find("manifest.bin: header: format version " + std::to_string(engine::kCheckpointFormatVersion + 1)),
            std::string::npos)
      << e;
}

TEST_F(CheckpointRefusal, TruncatedPartIsRefused) {
  on_root([&] {
    const fs::path p = fs::path(path_) / "part-0.bin";
    auto b = read_bytes(p);
    b.resize(b.size() - 5);
    write_bytes(p, b);
  });
  const std::string e = restart_error();
  EXPECT_NE(e.find("part-0.bin: payload:"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, TruncatedHeaderIsRefused) {
  on_root([&] {
    const fs::path p = fs::path(path_) / "manifest.bin";
    auto b = read_bytes(p);
    b.resize(100);
    write_bytes(p, b);
  });
  const std::string e = restart_error();
  EXPECT_NE(e.find("manifest.bin: header: 100 bytes, fewer than the 128-byte checkpoint header"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, CorruptPayloadIsRefused) {
  on_root([&] {
    const fs::path p = fs::path(path_) / "part-0.bin";
    auto b = read_bytes(p);
    b[b.size() / 2] ^= std::byte{0x10};
    write_bytes(p, b);
  });
  const std::string e = restart_error();
  EXPECT_NE(e.find("part-0.bin: payload: checksum does not match"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, CorruptHeaderIsRefused) {
  on_root([&] {
    const fs::path p = fs::path(path_) / "manifest.bin";
    auto b = read_bytes(p);
    b[50] ^= std::byte{1};  // inside the time field
    write_bytes(p, b);
  });
  const std::string e = restart_error();
  EXPECT_NE(e.find("manifest.bin: header: header checksum does not match"), std::string::npos) << e;
}

TEST_F(CheckpointRefusal, IncompleteCheckpointWithoutManifestIsRefused) {
  on_root([&] { fs::remove(fs::path(path_) / "manifest.bin"); });
  const std::string e = restart_error();
  EXPECT_NE(e.find("manifest.bin: checkpoint: missing"), std::string::npos) << e;
}

TEST(CheckpointHeader, ParserRejectsShortAndRandomBytesWithoutReadingPast) {
  std::mt19937_64 gen(3);
  for (std::size_t n : {0u, 1u, 8u, 127u, 128u, 129u, 4096u}) {
    std::vector<std::byte> b(n);
    for (auto& x : b) x = static_cast<std::byte>(gen());
    EXPECT_THROW(engine::parse_checkpoint_header(b), engine::InputError) << n;
  }
  // A valid header round-trips.
  engine::CheckpointHeader h;
  h.kind = engine::CheckpointHeader::kManifest;
  h.processes = 3;
  h.threads = 2;
  h.time_ps = 12345;
  h.build = "x y";
  const std::vector<std::byte> payload(17, std::byte{9});
  const auto enc = engine::encode_checkpoint(h, payload);
  const auto d = engine::parse_checkpoint_header(enc);
  EXPECT_EQ(d.processes, 3u);
  EXPECT_EQ(d.threads, 2u);
  EXPECT_EQ(d.time_ps, 12345);
  EXPECT_EQ(d.build, "x y");
  EXPECT_EQ(d.payload_bytes, 17u);
  EXPECT_EQ(d.payload_checksum, engine::checkpoint_checksum(payload));
}

// A stop request seen by one process stops every process at the same boundary; a checkpoint
// written there continues to the uninterrupted result.
TEST_F(CheckpointRefusal, StopRequestOnRankZeroStopsAllAtOneBoundaryAndRestarts) {
  const PholdResult whole = run_phold(MPI_COMM_WORLD, cfg_);
  int procs = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  engine::Simulator sim(MPI_COMM_WORLD, phold_placement(cfg_.lps, procs, 1), cfg_.lookahead_ps);
  std::vector<std::unique_ptr<PholdLp>> lps;
  for (engine::LpId i = 0; i < cfg_.lps; ++i) {
    if (!sim.is_local(i)) continue;
    lps.push_back(std::make_unique<PholdLp>(i, cfg_));
    sim.add_lp(i, lps.back().get());
  }
  volatile std::sig_atomic_t flag = 0;
  const engine::CheckpointIdentity id{"phold", phold_run_hash(cfg_), static_cast<std::uint32_t>(procs), 1};
  std::string written;
  engine::RunControl control;
  control.stop_flag = &flag;
  control.checkpoint_at_stop = true;
  control.checkpoint_at = {2'000'000};
  int calls = 0;
  control.on_checkpoint = [&](SimTime t) {
    // The first call (at 2 us) plays the signal arriving at rank 0 only; the second is the stop.
    if (++calls == 1) {
      if (rank == 0) flag = 1;
      return;
    }
    written = engine::write_checkpoint(MPI_COMM_WORLD, (dir_ / "stop").string(), id, t, 0, sim.save_state());
  };
  sim.set_control(std::move(control));
  sim.run(cfg_.end_time_ps);
  EXPECT_TRUE(sim.stopped());
  EXPECT_EQ(calls, 2);
  long long t = sim.boundary_ps(), tmin = 0, tmax = 0;
  MPI_Allreduce(&t, &tmin, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&t, &tmax, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(tmin, tmax);
  EXPECT_GT(t, 2'000'000);
  EXPECT_LT(sim.global_stats().events, whole.events);
  ASSERT_FALSE(written.empty());
  PholdCheckpoints restart;
  restart.restart = written;
  const PholdResult r = run_phold(MPI_COMM_WORLD, cfg_, restart);
  EXPECT_EQ(r.events, whole.events);
  EXPECT_EQ(r.checksum, whole.checksum);
}

}  // namespace
}  // namespace fabricsim::models
