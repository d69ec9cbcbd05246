// Issue 7 (memory per simulated GPU), NIC side: the bytes of the NIC's per-QP and per-message
// records are a contract (static_assert in models/packet/nic.hpp, checked again here so that a change
// shows up as a failing test with the old and new sizes), the packed part size of a queued
// message keeps every value below kMaxFlowBytes, and a part above 4 GiB (which needs the high
// bits of that packing) is delivered whole, on time by the store-and-forward closed form.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/rng.hpp"
#include "jobs/run.hpp"
#include "models/packet/nic.hpp"
#include "models/core/packet.hpp"
#include "models/core/workload.hpp"
#include "tests/support/workloads.hpp"
#include "tests/support/run.hpp"

namespace fabricsim::models {
namespace {

TEST(NicLayout, RecordSizesAreTheDocumentedBytes) {
  const Nic::Layout l = Nic::layout();
  // Sums of the documented fields (models/packet/nic.hpp), rounded up to the record's alignment.
  EXPECT_EQ(l.tx_part, 16u);   // 4 x 4 B: bytes low, bytes high/multi/key, done index, tag or done slot
  EXPECT_EQ(l.tx_run, 28u);    // a TxPart + count + the two 4 B steps
  EXPECT_EQ(l.qp, 56u);        // 16 B of ids and flags + 16 B FifoPool handle + 4 x 4 B PSNs + 8 B next_tx
  EXPECT_EQ(l.rel_qp, 24u);    // only acknowledged (RoCE) QPs: line rate, last progress, MTU, highest PSN
  // Each congestion control's own per-QP state (models/cc): none stores nothing; DCQCN's 6 x 8 B
  // rates, byte count and times + 2 x 4 B counters + 1 B flag, HPCC's 5 x 8 B + 4 B stage + 4 B sequence + 1 B hop
  // count + 5 x 8 B INT hops, rounded up to 8 B.
  EXPECT_EQ(cc::state_bytes(CcKind::kNone), 0u);
  EXPECT_EQ(cc::state_bytes(CcKind::kDcqcn), 64u);
  EXPECT_EQ(cc::state_bytes(CcKind::kHpcc), 96u);
  // Per acknowledged QP with DCQCN (the default): the 88 B RelQp held with DCQCN inline; with
  // HPCC below the former 88 B RelQp + 88 B HpccState.
  EXPECT_LE(l.rel_qp + cc::state_bytes(CcKind::kDcqcn), 88u);
  EXPECT_LE(l.rel_qp + cc::state_bytes(CcKind::kHpcc), 176u);
  EXPECT_EQ(l.rx_qp, 32u);     // 4 + 4 + 8 B counters + 16 B FifoPool handle of descriptors
  EXPECT_EQ(l.rx_desc, 48u);   // flow id, bytes|aux, part bytes, start, tag: 8 B each; group, instance
  EXPECT_EQ(l.nvls_key, 24u);
  // What they replaced (the earlier layout): TxPart 48 B, Qp 176 B, MsgDesc kept whole (64 B).
  EXPECT_LT(l.tx_part, 48u);
  EXPECT_LT(l.qp + 0, 176u);
  EXPECT_LT(l.rx_desc, sizeof(MsgDesc));
}

TEST(NicLayout, TxPartKeepsEveryPartSizeBelowTheFlowLimit) {
  const std::vector<std::uint64_t> sizes = {0,
                                            1,
                                            4096,
                                            (std::uint64_t{1} << 32) - 1,
                                            std::uint64_t{1} << 32,
                                            5 * (std::uint64_t{1} << 30),
                                            kMaxFlowBytes};
  for (std::uint64_t b : sizes) {
    Nic::TxPart p;
    p.multi = 1;
    p.key = Nic::kMaxNvlsKeys - 1;
    p.set_bytes(b);
    EXPECT_EQ(p.bytes(), b);
    EXPECT_EQ(p.multi, 1u);  // neighbours in the packed word untouched
    EXPECT_EQ(p.key, Nic::kMaxNvlsKeys - 1);
  }
}

// 2 GPUs on one NVSwitch, one 5 GiB message in 1 MiB units (one part of 5,120 packets):
// store and forward over 2 equal hops, FCT = (n + 1) * T + 2 * latency with T = 1 MiB at
// 4,096 Gb/s = 2,048 ns exactly (no header bytes).
TEST(NicLayout, PartAbove4GiBArrivesWholeAtTheClosedForm) {
  Workload w = fabricsim::testing::world_workload(2, "chakra", "<nic_layout_test>");
  const std::uint64_t bytes = 5 * (std::uint64_t{1} << 30);
  fabricsim::testing::add_p2p(w, 0, 1, bytes, 7);
  const jobs::RunResult res = fabricsim::testing::run_quiet(
      &w, {"cluster.hosts=1", "cluster.gpus_per_host=2", "cluster.nvlink_bandwidth=4096Gbps", "cluster.nvlink_latency=100ns",
           "cluster.nvlink_mtu=1MiB", "nic.header_bytes=0",
           "cluster.nvlink_efficiency=1"},
      MPI_COMM_SELF, 0, /*keep_flows=*/true);
  ASSERT_EQ(res.flow_records.size(), 1u);
  EXPECT_EQ(res.flow_records[0].bytes, bytes);
  const long long n = 5 * 1024, t = 2'048'000, lat = 100'000;
  EXPECT_EQ(res.flow_records[0].fct_ps, (n + 1) * t + 2 * lat);
}


// TxRun against a std::deque<TxPart> as the reference: parts in arithmetic steps (as an NVLS
// QP's window: done index +20, tag +4), with random breaks (another size, key, multi flag or
// step), steps that wrap modulo 2^32 and random pops give back every part exactly, in order; an
// unbroken sequence is one run, and the runs never outnumber the breaks + 1.
TEST(NicLayout, TxRunsGiveBackEveryPartInOrder) {
  std::deque<Nic::TxPart> ref;
  std::deque<Nic::TxRun> runs;
  engine::CounterRng rng(77, 3);
  auto same = [](const Nic::TxPart& a, const Nic::TxPart& b) {
    return a.bytes() == b.bytes() && a.multi == b.multi && a.key == b.key && a.done_idx == b.done_idx &&
           a.word == b.word;
  };
  auto check_all = [&] {
    std::size_t i = 0;
    for (const Nic::TxRun& r : runs) {
      ASSERT_GE(r.count, 1u);
      for (std::uint32_t k = 0; k < r.count; ++k, ++i) {
        ASSERT_LT(i, ref.size());
        ASSERT_TRUE(same(r.part(k), ref[i])) << "part " << i;
      }
    }
    ASSERT_EQ(i, ref.size());
  };
  Nic::TxPart next;
  next.set_bytes(65536);
  next.done_idx = 0xFFFFFFF0u;  // wraps within the first run
  next.word = 3;
  std::uint32_t step_idx = 20, step_word = 0xFFFFFFFCu;  // word steps by -4 (mod 2^32)
  std::size_t breaks = 0;
  for (int step = 0; step < 20000; ++step) {
    if (rng.next_below(3) != 0) {
      if (rng.next_below(10) == 0) {  // a part that does not continue the sequence
        ++breaks;
        switch (rng.next_below(4)) {
          case 0: next.set_bytes(rng.next_below(std::uint64_t{1} << 40)); break;
          case 1: next.key = static_cast<std::uint32_t>(rng.next_below(Nic::kMaxNvlsKeys)); break;
          case 2: next.multi ^= 1u; break;
          default:
            step_idx = static_cast<std::uint32_t>(rng.next_u64());
            step_word = static_cast<std::uint32_t>(rng.next_u64());
            break;
        }
      }
      ref.push_back(next);
      if (runs.empty() || !runs.back().append(next)) runs.push_back(Nic::TxRun{next});
      next.done_idx += step_idx;
      next.word += step_word;
    } else if (!ref.empty()) {
      ASSERT_TRUE(same(runs.front().part(0), ref.front()));
      if (runs.front().count > 1) {
        runs.front().pop_front();
      } else {
        runs.pop_front();
      }
      ref.pop_front();
    }
    if (step % 97 == 0) check_all();
    // Each break starts at most one run (a new size, key or flag: the part with it; new steps:
    // the first part on them), whose steps come from the part after it.
    ASSERT_LE(runs.size(), breaks + 1);
  }
  check_all();
  // An unbroken arithmetic sequence is one run of 28 bytes, whatever its length.
  std::deque<Nic::TxRun> one;
  Nic::TxPart p;
  p.set_bytes(1 << 20);
  for (std::uint32_t i = 0; i < 1000; ++i) {
    p.done_idx = 5 + 20 * i;
    p.word = 4 * i;
    if (one.empty() || !one.back().append(p)) one.push_back(Nic::TxRun{p});
  }
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.front().count, 1000u);
  EXPECT_EQ(one.front().part(999).done_idx, 5u + 20u * 999u);
  EXPECT_EQ(one.front().part(999).word, 4u * 999u);
}

}  // namespace
}  // namespace fabricsim::models
