#pragma once
/// @file gpu_specs.hpp
/// GPU datasheet table: dense peak FLOP/s per dtype, HBM capacity and bandwidth, scale-up
/// (NVLink / Infinity Fabric) bandwidth. Figures come from ../shared/reference/gpu-specs.csv,
/// which cites the vendor datasheet of each part (the source string of every entry repeats it).
/// Sparse (2:4) figures are never used: every FLOP/s here is the dense peak.
#include <cstdint>
#include <string>
#include <vector>

namespace fabricsim::kernels {

/// Element type of a kernel's math.
enum class Dtype : std::uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };

/// "fp32" | "tf32" | "bf16" | "fp16" | "fp8".
const char* dtype_name(Dtype d);
/// Bytes per element (tf32 is stored as fp32: 4).
std::uint32_t dtype_bytes(Dtype d);
/// Parses a dtype name (also "fp16/bf16" as bf16, "float32"/"bfloat16"/"half"/"e4m3").
/// @throws engine::InputError naming `file` and `field` with the accepted names.
Dtype parse_dtype(const std::string& text, const std::string& file, const std::string& field);

/// One GPU type. FLOP/s are dense peaks; 0 means "not supported by this part".
struct GpuSpec {
  std::string name;                 ///< short canonical name: "A100", "H100", ...
  std::string full_name;            ///< datasheet name, e.g. "A100-SXM4-80GB"
  double bf16_tflops = 0;           ///< dense BF16/FP16 tensor-core peak (TFLOP/s)
  double fp8_tflops = 0;            ///< dense FP8 tensor-core peak (TFLOP/s); 0 = no FP8
  double tf32_tflops = 0;           ///< dense TF32 tensor-core peak (TFLOP/s)
  double fp32_tflops = 0;           ///< FP32 (non-tensor) peak (TFLOP/s)
  double hbm_gb = 0;                ///< HBM capacity (GB)
  double hbm_tbps = 0;              ///< HBM bandwidth (TB/s = 1e12 B/s)
  double scaleup_gbps_bidir = 0;    ///< scale-up bandwidth per GPU, both directions (GB/s)
  std::uint32_t scaleup_domain = 8; ///< GPUs in one scale-up (NVLink) domain
  std::string source;               ///< where the figures come from

  /// Dense peak for `d` in FLOP/s. @throws engine::InputError if the part has no such peak
  /// (e.g. FP8 on A100).
  double peak_flops(Dtype d) const;
  /// HBM bandwidth in B/s.
  double hbm_bytes_per_s() const { return hbm_tbps * 1e12; }
  /// Ridge point of the roofline for `d`: peak FLOP/s / HBM B/s (FLOP per byte). A kernel whose
  /// arithmetic intensity is at or above it is compute-bound.
  double ridge_flops_per_byte(Dtype d) const { return peak_flops(d) / hbm_bytes_per_s(); }
};

/// The built-in table (A100, H100, H200, H800, H20, B200, GB200, GB300, MI300X).
const std::vector<GpuSpec>& gpu_specs();

/// Finds a GPU by short name or datasheet name, case-insensitively ("h100", "H100-SXM5-80GB").
/// @throws engine::InputError naming `file`/`field` and listing the known names.
const GpuSpec& find_gpu(const std::string& name, const std::string& file = "<cli>",
                        const std::string& field = "gpu");

}  // namespace fabricsim::kernels
