// Issue 7 (memory per simulated GPU), NIC side: the bytes of the NIC's per-QP and per-message
// records are a contract (static_assert in models/nic.hpp, checked again here so that a change
// shows up as a failing test with the old and new sizes), the packed part size of a queued
// message keeps every value below kMaxFlowBytes, and a part above 4 GiB (which needs the high
// bits of that packing) is delivered whole, on time by the store-and-forward closed form.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "models/nic.hpp"
#include "models/packet.hpp"
#include "models/workload.hpp"

namespace fabricsim::models {
namespace {

TEST(NicLayout, RecordSizesAreTheDocumentedBytes) {
  const Nic::Layout l = Nic::layout();
  // Sums of the documented fields (models/nic.hpp), rounded up to the record's alignment.
  EXPECT_EQ(l.tx_part, 16u);   // 4 x 4 B: bytes low, bytes high/multi/key, done index, tag or done slot
  EXPECT_EQ(l.qp, 56u);        // 16 B of ids and flags + 16 B FifoPool handle + 4 x 4 B PSNs + 8 B next_tx
  EXPECT_EQ(l.rel_qp, 88u);    // only acknowledged (RoCE) QPs
  EXPECT_EQ(l.rx_qp, 32u);     // 4 + 4 + 8 B counters + 16 B FifoPool handle of descriptors
  EXPECT_EQ(l.rx_desc, 48u);   // flow id, bytes|aux, part bytes, start, tag: 8 B each; group, instance
  EXPECT_EQ(l.nvls_key, 24u);
  // What they replaced (issue 7 baseline): TxPart 48 B, Qp 176 B, MsgDesc kept whole (64 B).
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
  Workload w;
  w.source = "<nic_layout_test>";
  w.format = "chakra";
  w.ranks = 2;
  w.groups.push_back({"world", {0, 1}});
  w.programs.resize(2);
  const std::uint64_t bytes = 5 * (std::uint64_t{1} << 30);
  WorkNode s;
  s.name = "send";
  s.type = NodeType::kSend;
  s.peer = 1;
  s.bytes = bytes;
  s.tag = 7;
  w.programs[0].push_back(s);
  WorkNode r = s;
  r.name = "recv";
  r.type = NodeType::kRecv;
  r.peer = 0;
  w.programs[1].push_back(r);
  jobs::RunOptions opt;
  opt.workload_data = &w;
  opt.sets = {"cluster.hosts=1", "cluster.gpus_per_host=2", "cluster.nvlink_bandwidth=4096Gbps",
              "cluster.nvlink_latency=100ns", "cluster.nvlink_mtu=1MiB", "nic.header_bytes=0"};
  opt.write_h5 = false;
  opt.quiet = true;
  opt.keep_flows = true;
  const jobs::RunResult res = jobs::run_simulation(opt, MPI_COMM_SELF, "test", "test");
  ASSERT_EQ(res.flow_records.size(), 1u);
  EXPECT_EQ(res.flow_records[0].bytes, bytes);
  const long long n = 5 * 1024, t = 2'048'000, lat = 100'000;
  EXPECT_EQ(res.flow_records[0].fct_ps, (n + 1) * t + 2 * lat);
}

}  // namespace
}  // namespace fabricsim::models
