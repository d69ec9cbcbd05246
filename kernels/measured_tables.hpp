#pragma once
/// @file measured_tables.hpp
/// Measured per-call kernel tables (aiconfigurator, kernels/data/measured/SOURCES.md): GEMM by
/// (m, n, k, dtype) and causal context attention by (batch, sequence, heads, KV heads, head dim,
/// window, dtype), for H100, H200, B200, GB200 and A100. The `.csv.zst` files are read with
/// libzstd, parsed by their header's column names, loaded lazily per GPU and op on the first
/// lookup, and kept in memory. Table times are milliseconds per call; this interface returns µs.
///
/// Lookup on a 3-axis grid (GEMM: m, n, k; attention: batch, sequence, query heads on the GPU):
///  * a query on a grid point returns that row's time unchanged ("measured");
///  * between grid points, log(time) is multilinear in log(x) over the 2³ corners of the cell
///    ("interpolated"). Along any one axis, with the others fixed, log(time) is then linear in
///    log(x) between the two neighbouring values, so the result lies between them (monotone
///    between adjacent grid points, in whichever direction the measurements go);
///  * off the grid ("extrapolated"): above an axis' largest value the time at that edge is
///    scaled linearly, t = t_edge · x / x_max (the work grows linearly in each dimension and the
///    rate reached at the edge is kept); below the smallest value the edge time is used
///    unchanged (small kernels are bound by launch and latency, not work);
///  * a cell with an unmeasured corner (the largest GEMMs of some dtypes; attention batch·
///    sequence beyond what fitted in memory) gives no answer, except for attention with batch > 1,
///    which then uses batch 1 scaled linearly in the batch ("extrapolated"). No answer means the
///    caller's model applies.
/// Attention rows are matched exactly on head dim, window, dtype and the GQA group size
/// heads/KV heads; the heads axis runs over the table's pairs with that group size.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/gpu_specs.hpp"

namespace fabricsim::kernels {

/// How a table time was obtained (see the file comment).
enum class TableHow : std::uint8_t { kMeasured, kInterpolated, kExtrapolated };
/// "measured" | "interpolated" | "extrapolated".
const char* table_how_name(TableHow h);

/// One table answer.
struct TableTime {
  double time_us = 0;  ///< one call (µs)
  TableHow how = TableHow::kMeasured;
};

/// Decompresses a whole zstd file. @throws engine::InputError naming `path` when it cannot be
/// read or is not a valid zstd frame.
std::string read_zstd_file(const std::string& path);

/// A 3-axis grid of measured times (ms), with the lookup of the file comment.
class Grid3 {
 public:
  /// Adds a measured point; the first time given for a point is kept (as aiconfigurator's
  /// loader does). Coordinates must be > 0.
  void add(const std::array<double, 3>& x, double ms);
  /// Sorts the axes and indexes the points; call once after the last add() (the added list is
  /// released then).
  void finish();
  /// Time (µs) at `x`, or nullopt when a needed corner was not measured.
  std::optional<TableTime> lookup(const std::array<double, 3>& x) const;
  /// The sorted distinct values of axis `a`.
  const std::vector<double>& axis(int a) const { return axis_[static_cast<std::size_t>(a)]; }
  /// The measured time (ms) at grid indices, or nullopt.
  std::optional<double> at(std::size_t i, std::size_t j, std::size_t k) const;
  /// Measured points (after finish()).
  std::size_t size() const { return ms_.size(); }

 private:
  static std::uint64_t pack(std::size_t i, std::size_t j, std::size_t k) {
    return std::uint64_t(i) | (std::uint64_t(j) << 21) | (std::uint64_t(k) << 42);
  }
  std::array<std::vector<double>, 3> axis_;
  std::vector<std::pair<std::array<double, 3>, double>> raw_;
  std::unordered_map<std::uint64_t, double> ms_;
};

/// The table folder of `gpu` ("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "a100_sxm"), or ""
/// when no table was measured on it (H800, H20, GB300, MI300X).
std::string table_system(const GpuSpec& gpu);

/// The measured tables under one folder (`<dir>/<system>/{gemm,context_attention}.csv.zst`).
/// Thread-safe: lookups lock while a table is loaded.
class MeasuredTables {
 public:
  explicit MeasuredTables(std::string dir) : dir_(std::move(dir)) {}
  /// The shipped tables: $FABRICSIM_MEASURED_KERNELS, else kernels/data/measured under
  /// $FABRICSIM_SOURCE_DIR or the source tree.
  static const MeasuredTables& shipped();
  const std::string& dir() const { return dir_; }
  /// True when `<dir>/<system>/<op>.csv.zst` exists for the GPU (op "gemm" or "context_attention").
  bool has(const GpuSpec& gpu, const std::string& op) const;

  /// One GEMM y[m×n] = x[m×k]·W^T of `d` (bf16/fp16: the `bfloat16` rows, fp16 having the same
  /// tensor-core peak on these parts; fp8: the per-tensor `fp8` rows). nullopt: no table for the
  /// GPU/dtype or an unmeasured cell. @throws engine::InputError for a malformed file.
  std::optional<TableTime> gemm(const GpuSpec& gpu, Dtype d, double m, double n, double k) const;

  /// One causal context-attention forward of `batch` sequences of `seq` tokens, `heads` query and
  /// `kv_heads` KV heads on this GPU, head dim `head_dim`, sliding `window` tokens (0 = full).
  /// bf16/fp16: bfloat16 attention and KV cache; fp8: fp8 attention and KV cache.
  /// @throws engine::InputError for a malformed file.
  std::optional<TableTime> attention(const GpuSpec& gpu, Dtype d, double batch, double seq, double heads,
                                     double kv_heads, double head_dim, double window) const;

  /// Wall seconds spent reading and parsing tables so far.
  double load_seconds() const;

 private:
  struct Gemm {
    std::map<std::string, Grid3> by_dtype;
  };
  struct Attn {
    /// (head_dim, window, attn dtype, kv dtype, heads/kv_heads) -> grid over (batch, isl, heads)
    std::map<std::tuple<int, int, std::string, std::string, int>, Grid3> grids;
  };
  const Gemm* gemm_table(const std::string& sys) const;
  const Attn* attn_table(const std::string& sys) const;
  std::string dir_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Gemm>> gemm_;
  mutable std::map<std::string, std::unique_ptr<Attn>> attn_;
  mutable double load_s_ = 0;
};

/// Parses a gemm table (CSV text of `file`). @throws engine::InputError naming file, line, column.
void parse_gemm_table(const std::string& text, const std::string& file, std::map<std::string, Grid3>& out);

/// An attention grid's key: (head dim, window, attention dtype, KV-cache dtype, heads / KV heads).
using AttentionKey = std::tuple<int, int, std::string, std::string, int>;

/// Parses a context-attention table (CSV text of `file`) into one grid per AttentionKey.
/// @throws engine::InputError naming file, line, column.
void parse_attention_table(const std::string& text, const std::string& file, std::map<AttentionKey, Grid3>& out);

}  // namespace fabricsim::kernels
