// Units parser and serialization time.
#include <gtest/gtest.h>

#include <string>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "engine/units.hpp"

namespace fabricsim::engine {
namespace {

__extension__ typedef unsigned __int128 U128;

SimTime T(const std::string& s, SimTime def = 0) { return parse_time_ps(s, "f.yaml", "k", def); }
std::uint64_t B(const std::string& s) { return parse_bytes(s, "f.yaml", "k"); }
std::uint64_t R(const std::string& s) { return parse_rate_bps(s, "f.yaml", "k"); }

TEST(Units, TimeGood) {
  EXPECT_EQ(T("0ps"), 0);
  EXPECT_EQ(T("7ps"), 7);
  EXPECT_EQ(T("500ns"), 500'000);
  EXPECT_EQ(T("1.5us"), 1'500'000);
  EXPECT_EQ(T("2 ms"), 2 * kPsPerMs);
  EXPECT_EQ(T("  3s "), 3 * kPsPerS);
  EXPECT_EQ(T("0.0004ns"), 0);   // rounds to nearest ps
  EXPECT_EQ(T("0.0006ns"), 1);
  EXPECT_EQ(T("1e3ns"), kPsPerUs);
  EXPECT_EQ(T("10", kPsPerNs), 10'000);  // bare number with a default unit
}

TEST(Units, TimeBad) {
  EXPECT_THROW(T("10"), InputError);  // units are mandatory
  EXPECT_THROW(T("-1ns"), InputError);
  EXPECT_THROW(T("-0.5us"), InputError);
  EXPECT_THROW(T(""), InputError);
  EXPECT_THROW(T("ns"), InputError);
  EXPECT_THROW(T("abc"), InputError);
  EXPECT_THROW(T("5 parsecs"), InputError);
  EXPECT_THROW(T("5NS"), InputError);
  EXPECT_THROW(T("1e400s"), InputError);
  EXPECT_THROW(T("1e7s"), InputError);  // > int64 ps
  EXPECT_THROW(T("nan s"), InputError);
  EXPECT_THROW(T("-1", kPsPerNs), InputError);
}

TEST(Units, ErrorMessageNamesFileAndField) {
  try {
    T("-1ns");
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "f.yaml");
    EXPECT_EQ(e.field(), "k");
    EXPECT_EQ(std::string(e.what()).rfind("f.yaml: k: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
}

TEST(Units, BytesGood) {
  EXPECT_EQ(B("0"), 0u);
  EXPECT_EQ(B("100"), 100u);
  EXPECT_EQ(B("100B"), 100u);
  EXPECT_EQ(B("4KiB"), 4096u);
  EXPECT_EQ(B("1.5KB"), 1500u);
  EXPECT_EQ(B("2MB"), 2'000'000u);
  EXPECT_EQ(B("2MiB"), 2u << 20);
  EXPECT_EQ(B("1GiB"), 1ull << 30);
  EXPECT_EQ(B("3GB"), 3'000'000'000ull);
  EXPECT_EQ(B("1TiB"), 1ull << 40);
}

TEST(Units, BytesBad) {
  EXPECT_THROW(B("-4KiB"), InputError);
  EXPECT_THROW(B("-1"), InputError);
  EXPECT_THROW(B("1.5B"), InputError);  // not whole bytes
  EXPECT_THROW(B("4kib"), InputError);
  EXPECT_THROW(B("4 bits"), InputError);
  EXPECT_THROW(B("KiB"), InputError);
  EXPECT_THROW(B("1e30B"), InputError);
}

TEST(Units, RateGood) {
  EXPECT_EQ(R("1bps"), 1u);
  EXPECT_EQ(R("400Gbps"), 400'000'000'000ull);
  EXPECT_EQ(R("1.6Tbps"), 1'600'000'000'000ull);
  EXPECT_EQ(R("100Mbps"), 100'000'000ull);
  EXPECT_EQ(R("50GB/s"), 400'000'000'000ull);
  EXPECT_EQ(R("50GBps"), 400'000'000'000ull);
  EXPECT_EQ(R("1KB/s"), 8'000u);
}

TEST(Units, RateBad) {
  EXPECT_THROW(R("0Gbps"), InputError);
  EXPECT_THROW(R("-1Gbps"), InputError);
  EXPECT_THROW(R("400"), InputError);
  EXPECT_THROW(R("400 furlongs"), InputError);
  EXPECT_THROW(R("Gbps"), InputError);
  // A positive rate that rounds to 0 is not called "not positive"; one past int64 is refused
  // (std::llround would be undefined there).
  const std::pair<std::string, std::string> worded[] = {
      {"1e-30Gbps", "below 1 bps"}, {"0.4bps", "below 1 bps"}, {"1e30Gbps", "too large"}, {"0Gbps", "must be positive"}};
  for (const auto& [text, needle] : worded) {
    try {
      R(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(Units, FormatTime) {
  EXPECT_EQ(format_time(1'500), "1.500 ns");
  EXPECT_EQ(format_time(2'500'000), "2.500 us");
  EXPECT_EQ(format_time(3 * kPsPerMs), "3.000 ms");
  EXPECT_EQ(format_time(kPsPerS), "1.000000 s");
}

TEST(Time, SerializationClosedForm) {
  // bytes * 8 / rate seconds, rounded up to whole ps.
  EXPECT_EQ(serialization_ps(1, 8), kPsPerS);                    // 8 bits at 8 bit/s: 1 s
  EXPECT_EQ(serialization_ps(4096, 400'000'000'000ull), 81'920);  // 4 KiB at 400 Gb/s: 81.92 ns
  EXPECT_EQ(serialization_ps(1, 3'000'000'000'000ull), 3);       // 8/3 ps rounds up
  EXPECT_EQ(serialization_ps(0, 1'000'000'000ull), 0);
  EXPECT_EQ(serialization_ps(125, 1'000'000'000ull), 1'000'000);  // 1000 bits at 1 Gb/s: 1 us
  // 1 TiB at 1 Gb/s needs 128-bit intermediate: 2^40 * 8 * 1e12 / 1e9 ps.
  EXPECT_EQ(serialization_ps(1ull << 40, 1'000'000'000ull), static_cast<SimTime>((1ull << 40) * 8'000));
  for (std::uint64_t b : {1ull, 7ull, 1000ull, 123457ull, 1ull << 30}) {
    for (std::uint64_t r : {1'000'000'000ull, 25'000'000'000ull, 400'000'000'000ull, 3'200'000'000'000ull}) {
      const U128 num = static_cast<U128>(b) * 8 * 1'000'000'000'000ull;
      const auto s = static_cast<U128>(serialization_ps(b, r));
      EXPECT_GE(s * r, num);       // s >= exact
      EXPECT_LT((s - 1) * r, num);  // s - 1 < exact
    }
  }
}

TEST(Time, SatAdd) {
  EXPECT_EQ(sat_add(5, 7), 12);
  EXPECT_EQ(sat_add(kInfinity - 1, 7), kInfinity);
  EXPECT_EQ(sat_add(kInfinity, 0), kInfinity);
}

// Input bytes quoted in an error message are escaped, so a NUL cannot cut the line (c_str()
// stops there) and a newline or an escape sequence cannot split or recolour it (a partition
// file with a NUL gave "bad entry '0 0 0" and nothing after it).
TEST(Errors, InputErrorEscapesUnprintableBytes) {
  using namespace std::string_literals;
  EXPECT_EQ(printable("a\0b"s), "a\\x00b");
  EXPECT_EQ(printable("tab\there\nnl\r\x1b[31m\x7f"s), "tab\\x09here\\x0anl\\x0d\\x1b[31m\\x7f");
  // Valid UTF-8 passes; invalid bytes, overlong forms, surrogates, C1 controls are escaped.
  EXPECT_EQ(printable("µs ≥ 1 · 😀"), "µs ≥ 1 · 😀");
  EXPECT_EQ(printable("\xff\xc0\xaf\xed\xa0\x80\xc2\x85"s), "\\xff\\xc0\\xaf\\xed\\xa0\\x80\\xc2\\x85");
  EXPECT_EQ(printable("cut \xe2\x89"s), "cut \\xe2\\x89");  // a sequence cut short at the end
  // Idempotent: an escaped message (e.g. re-raised on every MPI process) is not escaped twice.
  EXPECT_EQ(printable(printable("a\0b\xff"s)), printable("a\0b\xff"s));
  // InputError applies it to the whole line: every part, one line, the text after a NUL kept.
  const InputError e("p\0.txt"s, "line 2", "bad entry '0 0 0\0 junk'"s, "fix\nit");
  EXPECT_STREQ(e.what(), "p\\x00.txt: line 2: bad entry '0 0 0\\x00 junk'; fix\\x0ait");
  const InputError whole(InputError::Whole{}, "f: k: x\0y"s);
  EXPECT_STREQ(whole.what(), "f: k: x\\x00y");
}

}  // namespace
}  // namespace fabricsim::engine
