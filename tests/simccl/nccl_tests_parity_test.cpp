// `fabricsim nccl-tests` as nccl-tests prints (github.com/NVIDIA/nccl-tests src/util.cu: column
// widths and number formats, header and footer lines; src/common.cu: data types and element
// sizes) and `--compare LOG`: its own output read back gives zero error, hand-written logs in
// tests/data/nccl/ read as written, truncated and foreign logs are refused in one line.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "jobs/nccl_tests.hpp"
#include "tests/support/paths.hpp"

namespace {

using fabricsim::engine::InputError;
namespace jobs = fabricsim::jobs;

std::string data_dir() { return (fabricsim::testing::data_dir() / "nccl").string() + "/"; }

std::string parse_error(const std::string& text) {
  try {
    jobs::parse_nccl_tests_log_text(text, "t.log");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclTestsParity, NumberFormatsOfNcclTests) {
  // util.cu getFloatStr: two decimals while the integer digits leave room, then one, then none,
  // then exponent notation; right-aligned in the column width.
  EXPECT_EQ(jobs::nccl_tests_float(1.2345, 6), "  1.23");
  EXPECT_EQ(jobs::nccl_tests_float(0.04, 6), "  0.04");
  EXPECT_EQ(jobs::nccl_tests_float(123.456, 6), "123.46");
  EXPECT_EQ(jobs::nccl_tests_float(1234.5, 6), "1234.5");
  EXPECT_EQ(jobs::nccl_tests_float(12345.6, 6), " 12346");
  EXPECT_EQ(jobs::nccl_tests_float(1234567.0, 6), " 1e+06");
  EXPECT_EQ(jobs::nccl_tests_float(56.78, 7), "  56.78");
  EXPECT_EQ(jobs::nccl_tests_float(123456.7, 7), " 123457");
  EXPECT_EQ(jobs::nccl_tests_float(12345678.0, 7), "1.2e+07");
}

TEST(NcclTestsParity, DataTypesAndReductions) {
  EXPECT_EQ(jobs::nccl_tests_type_size("int8"), 1u);
  EXPECT_EQ(jobs::nccl_tests_type_size("half"), 2u);
  EXPECT_EQ(jobs::nccl_tests_type_size("bfloat16"), 2u);
  EXPECT_EQ(jobs::nccl_tests_type_size("float"), 4u);
  EXPECT_EQ(jobs::nccl_tests_type_size("uint64"), 8u);
  EXPECT_EQ(jobs::nccl_tests_type_size("f8e5m2"), 1u);
  EXPECT_THROW(jobs::nccl_tests_type_size("fp32"), InputError);
  EXPECT_NO_THROW(jobs::check_nccl_tests_redop("avg"));
  EXPECT_THROW(jobs::check_nccl_tests_redop("all"), InputError);
}

TEST(NcclTestsParity, ReadsAHandWrittenLog) {
  const jobs::NcclTestsLog log = jobs::parse_nccl_tests_log(data_dir() + "good.log");
  EXPECT_EQ(log.collective, "all_reduce");
  EXPECT_EQ(log.ranks, 4u);
  EXPECT_EQ(log.nodes, 2u);
  EXPECT_EQ(log.ngpus, 1u);
  ASSERT_EQ(log.rows.size(), 4u);  // the NCCL INFO line between rows is skipped
  EXPECT_EQ(log.rows[0].bytes, 1024u);
  EXPECT_EQ(log.rows[3].bytes, 65536u);
  EXPECT_EQ(log.rows[3].count, 16384u);
  EXPECT_EQ(log.rows[3].type, "float");
  EXPECT_EQ(log.rows[3].redop, "sum");
  EXPECT_DOUBLE_EQ(log.rows[3].oop_busbw_GBps, 3.28);
  EXPECT_DOUBLE_EQ(log.rows[3].ip_busbw_GBps, 3.30);
  EXPECT_EQ(log.rows[2].line, 17);
}

TEST(NcclTestsParity, RefusesTruncatedAndForeignLogsInOneLine) {
  std::string e;
  try {
    jobs::parse_nccl_tests_log(data_dir() + "truncated.log");
  } catch (const InputError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("truncated.log: line 15: the table ends without nccl-tests' '# Avg bus bandwidth' footer"),
            std::string::npos) << e;
  e.clear();
  try {
    jobs::parse_nccl_tests_log(data_dir() + "foreign.log");
  } catch (const InputError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("foreign.log: line 5: no nccl-tests table header"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  const std::string head =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";
  const std::string foot = "# Avg bus bandwidth    : 1\n";
  // A non-numeric row.
  e = parse_error(head + "        1024           256     float     sum      -1    20.10    0.05    abc       0    19.90    0.05    0.08       0\n" + foot);
  EXPECT_NE(e.find("t.log: line 2: out-of-place busbw 'abc' is not a number"), std::string::npos) << e;
  e = parse_error(head + "        1K           256     float     sum      -1    20.10    0.05    0.08       0    19.90    0.05    0.08       0\n" + foot);
  EXPECT_NE(e.find("t.log: line 2:"), std::string::npos) << e;
  // Sizes that do not grow.
  const std::string row = "        4096          1024     float     sum      -1    21.00    0.20    0.29       0    20.80    0.20    0.30       0\n";
  e = parse_error(head + row + row + foot);
  EXPECT_NE(e.find("t.log: line 3: size 4096 does not grow from the previous row's 4096"), std::string::npos) << e;
  // A row cut short.
  e = parse_error(head + "        4096          1024     float     sum      -1    21.00\n" + foot);
  EXPECT_NE(e.find("t.log: line 2: row has 6 of the 9 columns"), std::string::npos) << e;
  // No rows.
  EXPECT_NE(parse_error(head + foot).find("the table has no rows"), std::string::npos);
  EXPECT_EQ(parse_error(head + row + foot), "");
}

// The simulated table in nccl-tests' layout, read back by --compare: the same sizes, type and
// ranks, and zero error up to the two printed decimals.
TEST(NcclTestsParity, OwnOutputReadsBackWithZeroError) {
  jobs::NcclTestsOptions o;
  o.collective = "all_gather";
  o.gpus_per_node = 4;
  o.nodes = 2;
  o.min_bytes = 8192;
  o.max_bytes = 1 << 20;
  o.factor = 8;
  o.datatype = "half";
  o.sets = {"sim.fidelity=analytical"};
  std::vector<jobs::NcclTestsRow> rows;
  const std::string table = jobs::run_nccl_tests(o, MPI_COMM_WORLD, "test", "none", &rows);
  ASSERT_EQ(rows.size(), 3u);  // 8 KiB, 64 KiB, 512 KiB
  std::istringstream in(table);
  int data_rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::vector<std::string> t;
    for (std::string w; ls >> w;) t.push_back(w);
    ASSERT_EQ(t.size(), 13u) << line;
    EXPECT_EQ(t[2], "half");
    EXPECT_EQ(t[3], "none");  // AllGather reduces nothing
    EXPECT_EQ(t[4], "-1");    // and has no root
    EXPECT_EQ(t[8], "N/A");
    // count = bytes / 2 B / 8 ranks (per-rank count of ncclAllGather).
    EXPECT_EQ(std::stoull(t[1]) * 2 * 8, std::stoull(t[0]));
    ++data_rows;
  }
  EXPECT_EQ(data_rows, 3);
  EXPECT_NE(table.find("# Avg bus bandwidth    : "), std::string::npos);
  EXPECT_NE(table.find("# Collective test starting: all_gather_perf"), std::string::npos);
  const jobs::NcclTestsLog log = jobs::parse_nccl_tests_log_text(table, "self.log");
  EXPECT_EQ(log.collective, "all_gather");
  EXPECT_EQ(log.ranks, 8u);
  EXPECT_EQ(log.nodes, 2u);
  std::vector<jobs::NcclTestsCompareRow> cmp;
  jobs::NcclTestsOptions c = o;
  c.datatype = "float";  // the log's type wins
  jobs::compare_nccl_tests(c, log, MPI_COMM_WORLD, "test", "none", &cmp);
  ASSERT_EQ(cmp.size(), 3u);
  for (std::size_t k = 0; k < cmp.size(); ++k) {
    EXPECT_EQ(cmp[k].bytes, rows[k].bytes);
    EXPECT_NEAR(cmp[k].simulated_GBps, rows[k].busbw_GBps, 1e-9);
    EXPECT_NEAR(cmp[k].measured_oop_GBps, rows[k].busbw_GBps, 0.005 + 1e-9);  // printed with 2 decimals
  }
  // The element size sets count and rounding only: half and float give the same busbw.
  jobs::NcclTestsOptions f = o;
  f.datatype = "float";
  std::vector<jobs::NcclTestsRow> frows;
  jobs::run_nccl_tests(f, MPI_COMM_WORLD, "test", "none", &frows);
  ASSERT_EQ(frows.size(), rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(frows[k].count * 2, rows[k].count);
    EXPECT_DOUBLE_EQ(frows[k].busbw_GBps, rows[k].busbw_GBps);
  }
  // -i steps add bytes when the factor is 1 (nccl-tests' default stepping).
  jobs::NcclTestsOptions st = o;
  st.factor = 1;
  st.min_bytes = 8192;
  st.max_bytes = 3 * 8192;
  st.step_bytes = 8192;
  std::vector<jobs::NcclTestsRow> srows;
  jobs::run_nccl_tests(st, MPI_COMM_WORLD, "test", "none", &srows);
  ASSERT_EQ(srows.size(), 3u);
  EXPECT_EQ(srows[2].bytes, 3u * 8192u);
}

TEST(NcclTestsParity, CompareRefusesSizesThatDoNotFitTheRanks) {
  jobs::NcclTestsLog log = jobs::parse_nccl_tests_log(data_dir() + "good.log");
  jobs::NcclTestsOptions o;
  o.collective = "reduce_scatter";  // per-rank count: 1024 B is not whole floats for 3 x 1 ranks
  o.gpus_per_node = 3;
  o.nodes = 1;
  o.sets = {"sim.fidelity=analytical"};
  std::string e;
  try {
    jobs::compare_nccl_tests(o, log, MPI_COMM_WORLD, "test", "none");
  } catch (const InputError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("good.log: line 14: size 1024 is not whole float elements per rank for 3 ranks"), std::string::npos) << e;
}

}  // namespace
