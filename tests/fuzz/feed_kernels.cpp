#include <array>
#include <map>
#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "kernels/kernel_db.hpp"
#include "kernels/measured_tables.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

namespace {

/// One lookup per grid, at the middle of each axis' range (exercises the indexing finish() built).
void probe(const kernels::Grid3& g) {
  std::array<double, 3> x{};
  for (int a = 0; a < 3; ++a) {
    const auto& ax = g.axis(a);
    x[static_cast<std::size_t>(a)] = ax.empty() ? 1.0 : (ax.front() + ax.back()) / 2;
  }
  (void)g.lookup(x);
}

}  // namespace

Outcome feed_kernels(std::string_view bytes) {
  if (bytes.empty()) return std::nullopt;
  const int which = static_cast<unsigned char>(bytes[0]) % 3;
  const std::string text(bytes.substr(1));
  try {
    if (which == 0) {
      kernels::KernelDb db;
      std::istringstream in(text);
      db.load_more(in, "fuzz-input.csv");
    } else if (which == 1) {
      std::map<std::string, kernels::Grid3> grids;
      kernels::parse_gemm_table(text, "fuzz-input.csv", grids);
      for (const auto& [dtype, g] : grids) probe(g);
    } else {
      std::map<kernels::AttentionKey, kernels::Grid3> grids;
      kernels::parse_attention_table(text, "fuzz-input.csv", grids);
      for (const auto& [key, g] : grids) probe(g);
    }
    return std::nullopt;
  } catch (const engine::InputError& e) {
    return std::string(e.what());
  }
}

}  // namespace fabricsim::fuzz
