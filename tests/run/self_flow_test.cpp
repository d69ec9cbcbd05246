// /flows records of flows from a GPU to itself: they cross no link, so their ideal FCT is 0 and
// their slowdown 1 (docs/hdf5_schema.md); every other flow has a positive ideal FCT.
#include <gtest/gtest.h>


#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;

TEST(SelfFlows, HaveNoIdealPathAndSlowdownOne) {
  FABRICSIM_SEQUENTIAL_ONLY("reads the flow records of one process");
  // A 64 MiB AllReduce over 16 GPUs (2 hosts): its NCCL plan has flows from a rank to itself.
  const m::Workload w = fabricsim::testing::collective_workload(16, m::CollOp::kAllReduce, 64ull << 20, "ar");
  std::size_t self = 0, other = 0;
  for (const char* rung : {"flow", "packet"}) {
    const auto r = fabricsim::testing::run_quiet(&w, {std::string("sim.fidelity=") + rung}, MPI_COMM_SELF, 1, true);
    for (const auto& f : r.flow_records) {
      if (f.src == f.dst) {
        ++self;
        EXPECT_EQ(f.ideal_ps, 0);
        EXPECT_EQ(f.slowdown, 1.0);
      } else {
        ++other;
        EXPECT_GT(f.ideal_ps, 0);
      }
    }
  }
  EXPECT_GT(other, 0u);
  EXPECT_GT(self, 0u);  // the case is exercised
}

}  // namespace
