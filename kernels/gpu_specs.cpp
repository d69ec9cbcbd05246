#include "kernels/gpu_specs.hpp"

#include <algorithm>
#include <cctype>

#include "engine/errors.hpp"

namespace fabricsim::kernels {

using engine::InputError;

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kFp32: return "fp32";
    case Dtype::kTf32: return "tf32";
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp16: return "fp16";
    case Dtype::kFp8: return "fp8";
  }
  return "?";
}

std::uint32_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kTf32: return 4;
    case Dtype::kBf16:
    case Dtype::kFp16: return 2;
    case Dtype::kFp8: return 1;
  }
  return 2;
}

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

Dtype parse_dtype(const std::string& text, const std::string& file, const std::string& field) {
  const std::string t = lower(text);
  if (t == "fp32" || t == "float32" || t == "float") return Dtype::kFp32;
  if (t == "tf32") return Dtype::kTf32;
  if (t == "bf16" || t == "bfloat16" || t == "fp16/bf16") return Dtype::kBf16;
  if (t == "fp16" || t == "half" || t == "float16") return Dtype::kFp16;
  if (t == "fp8" || t == "e4m3" || t == "e5m2") return Dtype::kFp8;
  throw InputError(file, field, "'" + text + "' is not a dtype", "use fp32, tf32, bf16, fp16 or fp8");
}

double GpuSpec::peak_flops(Dtype d) const {
  double tf = 0;
  switch (d) {
    case Dtype::kFp32: tf = fp32_tflops; break;
    case Dtype::kTf32: tf = tf32_tflops; break;
    case Dtype::kBf16:
    case Dtype::kFp16: tf = bf16_tflops; break;
    case Dtype::kFp8: tf = fp8_tflops; break;
  }
  if (!(tf > 0)) {
    throw InputError("<gpu table>", name + " " + dtype_name(d), "this GPU has no " + std::string(dtype_name(d)) +
                                                                   " tensor-core peak",
                     "use bf16 for this GPU (FP8 needs Hopper or later)");
  }
  return tf * 1e12;
}

const std::vector<GpuSpec>& gpu_specs() {
  // Values transcribed from ../shared/reference/gpu-specs.csv (dense peaks; sparse halved there).
  static const std::vector<GpuSpec> table = {
      {"A100", "A100-SXM4-80GB", 312, 0, 156, 19.5, 80, 2.039, 600, 8,
       "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"},
      {"H100", "H100-SXM5-80GB", 989.4, 1978.9, 494.7, 66.9, 80, 3.35, 900, 8,
       "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), dense"},
      {"H200", "H200-SXM-141GB", 989.4, 1978.9, 494.7, 66.9, 141, 4.8, 900, 8,
       "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/)"},
      {"H800", "H800-SXM5-80GB", 989.4, 1978.9, 494.7, 66.9, 80, 3.35, 400, 8,
       "NVIDIA H800 product brief; DeepSeek-V3 report arXiv:2412.19437 Sec 3.2.2"},
      {"H20", "H20-96GB", 148, 296, 74, 44, 96, 4.0, 900, 8,
       "aliyun/SimAI vidur device_sku_config.py @cef83f9 (148/296 TFLOPS); press specs 96 GB, 4.0 TB/s"},
      {"B200", "B200-HGX", 2250, 4500, 1100, 75, 180, 7.7, 1800, 8,
       "NVIDIA HGX/DGX B200 datasheet (8-GPU totals / 8, sparsity halved)"},
      {"GB200", "GB200-NVL72", 2500, 5000, 1250, 80, 186, 8.0, 1800, 72,
       "NVIDIA GB200 NVL72 datasheet (rack figures / 72, sparsity halved)"},
      {"GB300", "GB300-NVL72", 2500, 5000, 1250, 80, 288, 8.0, 1800, 72,
       "NVIDIA GB300 NVL72 product page; per-GPU dense table (verda.com/blog/gb300-nvl72-architecture)"},
      {"MI300X", "MI300X", 1307.4, 2614.9, 653.7, 163.4, 192, 5.3, 896, 8,
       "AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)"},
  };
  return table;
}

const GpuSpec& find_gpu(const std::string& name, const std::string& file, const std::string& field) {
  const std::string n = lower(name);
  for (const auto& g : gpu_specs()) {
    if (lower(g.name) == n || lower(g.full_name) == n) return g;
  }
  // Accept datasheet-style prefixes such as "H100-SXM5" or "A100-SXM4-40GB".
  for (const auto& g : gpu_specs()) {
    const std::string s = lower(g.name) + "-";
    if (n.rfind(s, 0) == 0) return g;
  }
  std::string known;
  for (const auto& g : gpu_specs()) known += (known.empty() ? "" : ", ") + g.name;
  throw InputError(file, field, "unknown GPU '" + name + "'", "use one of " + known);
}

}  // namespace fabricsim::kernels
