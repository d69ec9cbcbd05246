#include "io/digest.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/errors.hpp"

namespace fabricsim::io {

namespace {

class Fnv {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 0x100000001b3ull;
    }
  }
  // Integers little-endian whatever the host order.
  void uint(std::uint64_t v, int n) {
    unsigned char b[8];
    for (int i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    bytes(b, static_cast<std::size_t>(n));
  }
  void f64(double d) {
    std::uint64_t v = 0;
    std::memcpy(&v, &d, sizeof v);
    uint(v, 8);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

constexpr std::size_t kOpBytes = 24;  // io::kOpChars (hdf5_writer.hpp)

}  // namespace

std::string results_digest_sum(MPI_Comm comm, std::vector<CollectiveRecord> colls, FlowDigest local_flows) {
  std::sort(colls.begin(), colls.end(), [](const CollectiveRecord& a, const CollectiveRecord& b) {
    return a.group != b.group ? a.group < b.group : a.instance < b.instance;
  });
  Fnv h;
  h.uint(colls.size(), 8);
  for (const CollectiveRecord& c : colls) {
    if (c.op.size() > kOpBytes) {
      throw engine::InternalError("results digest: op name '" + c.op + "' longer than 24 characters");
    }
    h.uint(c.group, 4);
    h.uint(c.instance, 4);
    char op[kOpBytes] = {};
    std::memcpy(op, c.op.data(), c.op.size());
    h.bytes(op, kOpBytes);
    h.uint(c.bytes, 8);
    h.uint(c.ranks, 4);
    h.uint(static_cast<std::uint64_t>(c.start_ps), 8);
    h.uint(static_cast<std::uint64_t>(c.end_ps), 8);
    h.f64(c.algbw_GBps);
    h.f64(c.busbw_GBps);
  }
  std::uint64_t v[2] = {local_flows.count, local_flows.sum};
  MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_SUM, comm);  // unsigned: wraps mod 2^64
  h.uint(v[0], 8);
  h.uint(v[1], 8);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.value()));
  return buf;
}

}  // namespace fabricsim::io
