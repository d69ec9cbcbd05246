#pragma once
/// @file kernel_db.hpp
/// Measured kernel database and roofline scaling.
///
/// File format (CSV, one header line, '#' lines are comments, fields may be "quoted"):
///   gpu,op,dtype,shape,flops,bytes,time_us,source,quality
///  * gpu: a name find_gpu() knows ("A100", "H100-SXM5-80GB"); op: kernel kind ("gemm",
///    "flash_attn_fwd", "layernorm", ... see docs/kernels.md); dtype: parse_dtype();
///  * shape: free text (e.g. "m=4096 n=4096 k=4096"), for people;
///  * flops, bytes: work of one call (FLOP, bytes moved to/from HBM); empty or 0 = unknown;
///  * time_us: measured time of one call (µs, > 0); source, quality: provenance of the row.
///
/// Lookup (KernelDb::estimate) for (gpu, op, dtype, flops, bytes), in order:
///  0. with measured tables attached (use_tables) and the call's shape known: a single GEMM
///     (shape kind kGemm, batch 1) or a fused attention forward (kAttention with heads and KV
///     heads) is looked up in the GPU's measured tables (kernels/measured_tables.hpp); an
///     attention backward is the table's forward time × kAttnBwdOverFwd. Grouped/batched GEMMs
///     (batch > 1), non-causal attention and every other kernel go on to the steps below;
///  1. rows of that gpu/op/dtype: an exact (flops, bytes) match is returned as measured; a query
///     inside the measured range of its work coordinate (FLOPs for a compute-bound query, bytes
///     for a memory-bound one) is interpolated: the achieved rate (work / time) is linear in
///     log(work) between the two neighbouring rows, t = work / rate;
///  2. the same on another GPU that has rows for op/dtype, then roofline-scaled to the target;
///  3. if the caller allows a model: rows outside the range keep the nearest row's achieved rate;
///     no rows at all gives the analytic roofline t = max(F / (eff_c·peak), B / (eff_m·BW)).
///  Without a model, a query that the data does not cover raises engine::InputError.
///
/// Roofline scaling (SimAI NSDI'25 Sec. 4 uses the same idea; direction as in
/// ../shared/reference/README.md): a compute-bound kernel scales as t' = t · F / F', a
/// memory-bound one as t' = t · B / B', where F is the dense peak for the dtype and B the HBM
/// bandwidth. The class is compute-bound when the arithmetic intensity flops/bytes is at or above
/// the source GPU's ridge point F/B; rows without flops/bytes use the op's default class.
#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/efficiency_model.hpp"
#include "kernels/gpu_specs.hpp"
#include "kernels/measured_tables.hpp"

namespace fabricsim::kernels {

/// Roofline class of a kernel.
enum class KernelClass : std::uint8_t { kCompute, kMemory };
/// "compute" | "memory".
const char* kernel_class_name(KernelClass c);

/// Default class of an op when its work is unknown: matrix kinds (gemm, attention, linear,
/// logits, mlp/attention blocks) are compute-bound, everything else (norms, elementwise,
/// embedding, optimizer, permute) memory-bound.
KernelClass default_class(const std::string& op);

/// True if default_class(op) rests on a recognized kind: a matrix kind (as above) or a
/// memory-bound one (norms, activations, softmax, dropout, embedding, optimizer, RoPE,
/// residual/elementwise, casts, MoE router/permute, loss). `kernels scale --op NAME` without
/// FLOPs/bytes refuses other names instead of guessing "memory".
bool known_kind(const std::string& op);

/// Class from arithmetic intensity: compute-bound iff flops/bytes >= gpu's ridge point for `d`.
/// With flops or bytes unknown (<= 0) returns default_class(op).
KernelClass classify(const std::string& op, double flops, double bytes, const GpuSpec& gpu, Dtype d);

/// Roofline-scales a time measured on `from` to `to` (both for dtype `d`):
/// compute-bound t·F_from/F_to, memory-bound t·B_from/B_to. @param t_us time on `from` (µs).
/// @returns time on `to` (µs). @throws engine::InputError if a GPU lacks a peak for `d`.
double roofline_scale_us(double t_us, KernelClass cls, const GpuSpec& from, const GpuSpec& to, Dtype d);

/// One database row (see the file format above).
struct KernelRow {
  std::string gpu;      ///< canonical GPU name (GpuSpec::name)
  std::string op;
  Dtype dtype = Dtype::kBf16;
  std::string shape;
  double flops = 0;     ///< FLOP per call (0 = unknown)
  double bytes = 0;     ///< HBM bytes per call (0 = unknown)
  double time_us = 0;   ///< µs per call
  std::string source;
  std::string quality;
};

/// What to do when the data does not cover a query.
enum class Fallback : std::uint8_t {
  kNone,      ///< measured or interpolated (possibly roofline-scaled from another GPU) only
  kRoofline,  ///< also extrapolate at the nearest row's rate, or the analytic roofline
};

/// Efficiencies of the analytic roofline (fractions of peak), used only when no row applies.
/// They are assumptions, not measurements: set them from a profile of the target when possible.
struct RooflineEfficiency {
  double compute = 0.70;  ///< achieved / peak FLOP/s for matrix kernels
  double memory = 0.80;   ///< achieved / peak HBM bandwidth for streaming kernels
  double launch_us = 0.0; ///< fixed per-kernel overhead added to modelled times (µs)
  /// Use the shape-dependent efficiency model (efficiency_model.hpp) for GEMMs and fused
  /// attention when the shape is known and the GPU has published figures; false = the flat
  /// `compute` fraction for every matrix kernel (the pre-model behaviour).
  bool shape_model = true;
  /// Run compute-bound table times at the GPU's sustained clock: divide them by the sustained /
  /// burst matmul rate of its architecture (GpuEfficiency::sustained, efficiency_model.cpp). The
  /// measured tables time one GPU alone in short CUDA-graph replays, i.e. at the boost (burst)
  /// clock; a training node runs all its GPUs power-saturated, which ml-engineering's "alone vs
  /// all-8 concurrent" matmul measurement (H200 698.6 / 823.9, B200 1426.4 / 1751.2 TFLOP/s)
  /// quantifies. false = the table times as measured (lookups, `kernels` CLI).
  bool sustained_tables = false;
};

/// Time of a fused-attention backward over its forward, applied to measured forward tables:
/// the backward does 2.5× the forward's matmul FLOPs (5 matmuls against 2) and reaches 63% of
/// A100 peak against the forward's 73% (Dao, FlashAttention-2, arXiv:2307.08691: abstract and
/// Sec. 4.1), so t_bwd = t_fwd · 2.5 · 73/63 ≈ 2.897.
inline constexpr double kAttnBwdOverFwd = 2.5 * 73.0 / 63.0;

/// Where an estimate came from, coarsely (the run's compute-time shares).
enum class EstimateSource : std::uint8_t {
  kMeasured,      ///< a measured row or table point
  kInterpolated,  ///< between measured points
  kExtrapolated,  ///< off the measured range by a documented rule
  kModel,         ///< efficiency/roofline model, or rows of another GPU roofline-scaled
};

/// The result of a lookup.
struct KernelEstimate {
  double time_us = 0;
  KernelClass cls = KernelClass::kCompute;
  /// "measured", "interpolated", "extrapolated", "scaled from <GPU>", "efficiency model",
  /// "roofline model"; from the measured tables "table measured", "table interpolated",
  /// "table extrapolated"
  std::string how;
  EstimateSource source = EstimateSource::kModel;
};

/// A loaded kernel database.
class KernelDb {
 public:
  /// Loads a CSV file (format above). @throws engine::InputError naming the file, line and
  /// column for unreadable files, missing columns, unknown GPUs/dtypes, bad numbers, time <= 0.
  static KernelDb load(const std::string& path);
  /// Appends the rows of another CSV file (later files add rows; duplicates are kept).
  void load_more(const std::string& path);
  /// As load_more(path), reading the CSV text from `in`; `path` names it in messages.
  /// @throws engine::InputError as load(), except for an unreadable file.
  void load_more(std::istream& in, const std::string& path);
  /// Path of the shipped database (kernels/data/kernels.csv under the source tree or
  /// $FABRICSIM_SOURCE_DIR, or $FABRICSIM_KERNEL_DB when set).
  static std::string default_path();
  /// Adds a row (tests, the profiler).
  void add(KernelRow row);
  /// All rows in load order.
  const std::vector<KernelRow>& rows() const { return rows_; }
  /// Attaches measured tables consulted first by estimate() (nullptr detaches). Not owned.
  void use_tables(const MeasuredTables* t) { tables_ = t; }
  /// The attached tables, or nullptr.
  const MeasuredTables* tables() const { return tables_; }

  /// Estimates one call of `op` on `gpu` (see the file comment for the order of attempts).
  /// @param flops FLOP of the call, @param bytes HBM bytes of the call (0 = unknown).
  /// @param shape the call's GEMM/attention shape (kind kNone = unknown): used only by the
  /// model fallback and the measured tables (step 0), never to pick rows of the CSV database.
  /// @param tables false: skip the attached measured tables (`kernels: model`).
  /// @throws engine::InputError when nothing covers the query and `fb` is kNone (a table
  /// extrapolation counts as not covered then).
  KernelEstimate estimate(const GpuSpec& gpu, const std::string& op, Dtype d, double flops, double bytes,
                          Fallback fb, const RooflineEfficiency& eff = {}, const KernelShape& shape = {},
                          bool tables = true) const;

  /// The analytic roofline time (µs): max(F/(eff_c·peak), B/(eff_m·BW)) + launch.
  static double analytic_us(const GpuSpec& gpu, Dtype d, double flops, double bytes,
                            const RooflineEfficiency& eff);

 private:
  std::optional<KernelEstimate> on_gpu(const GpuSpec& gpu, const std::string& op, Dtype d, double flops,
                                       double bytes, bool extrapolate, std::string* why) const;
  KernelEstimate estimate_rows(const GpuSpec& gpu, const std::string& op, Dtype d, double flops, double bytes,
                               Fallback fb, const RooflineEfficiency& eff, const KernelShape& shape) const;
  std::optional<KernelEstimate> from_tables(const GpuSpec& gpu, Dtype d, const KernelShape& shape, double flops,
                                            double bytes, Fallback fb, const RooflineEfficiency& eff) const;
  std::vector<KernelRow> rows_;
  const MeasuredTables* tables_ = nullptr;
  std::map<std::string, std::vector<std::size_t>> by_key_;  ///< "gpu|op|dtype" -> row indices
};

/// Splits one CSV line into fields (RFC 4180 quotes; "" inside quotes is a quote).
std::vector<std::string> split_csv_line(const std::string& line);

}  // namespace fabricsim::kernels
