// Host (CPU-side) compute nodes, WorkNode::host (Chakra is_cpu_op): one host op runs at a time
// on the rank's host thread, concurrently with GPU compute, as ASTRA-sim @0383c20 keeps one
// in-flight slot for CPU ops and one for GPU ops (workload/HardwareResource.cc). The expected
// times are the DAG's critical paths under that rule, worked out by hand below.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;
constexpr long long kUs = 1'000'000;  // ps per us

m::WorkNode op(const char* name, long long us, bool host, std::vector<std::uint32_t> deps = {}) {
  m::WorkNode n;
  n.name = name;
  n.type = m::NodeType::kCompute;
  n.duration_ps = us * kUs;
  n.host = host;
  n.deps = std::move(deps);
  return n;
}

// Rank 0: host A (10 us) beside GPU B (4 us), then GPU C (3 us) after both: max(10, 4) + 3 = 13 us.
// Rank 1: host D (5 us) and host E (6 us) share the one host thread: 5 + 6 = 11 us, then GPU F
// (1 us): 12 us. The run ends with rank 0 at 13 us. GPU compute time: 7 us and 1 us.
m::Workload mixed(bool host) {
  m::Workload w = fabricsim::testing::world_workload(2, "chakra");
  w.programs[0] = {op("A", 10, host), op("B", 4, false), op("C", 3, false, {0, 1})};
  w.programs[1] = {op("D", 5, host), op("E", 6, host), op("F", 1, false, {0, 1})};
  return w;
}

TEST(HostOps, RunBesideGpuComputeOneAtATime) {
  for (const char* rung : {"packet", "flow"}) {
    SCOPED_TRACE(rung);
    const m::Workload w = mixed(true);
    const auto r = fabricsim::testing::run_quiet(&w, {std::string("sim.fidelity=") + rung});
    EXPECT_EQ(fabricsim::testing::iteration(r), 13 * kUs);
    ASSERT_EQ(r.ranks.size(), 2u);
    EXPECT_EQ(r.ranks[0].compute_ps, 7 * kUs);  // B + C; the host op is not GPU time
    EXPECT_EQ(r.ranks[1].compute_ps, 1 * kUs);
    EXPECT_EQ(r.ranks[1].finish_ps, 12 * kUs);
  }
}

// The same DAG with every op on the GPU: rank 0 runs A, B, C one after another (17 us) and rank 1
// D, E, F (12 us).
TEST(HostOps, OnTheGpuTheySerializeWithCompute) {
  const m::Workload w = mixed(false);
  const auto r = fabricsim::testing::run_quiet(&w, {});
  EXPECT_EQ(fabricsim::testing::iteration(r), 17 * kUs);
  EXPECT_EQ(r.ranks[0].compute_ps, 17 * kUs);
}

}  // namespace
