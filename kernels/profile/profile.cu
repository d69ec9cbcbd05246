// kernel_profile: measures kernel times on the local NVIDIA GPU and writes kernel-database rows
// (format: kernels/kernel_db.hpp). GEMMs run through cuBLASLt (BF16/FP16 in and out, FP32
// accumulate, the heuristic's first algorithm); norms, elementwise, embedding gather and the
// Adam step are plain CUDA kernels written here (one pass over memory each, like the fused
// kernels frameworks use). Attention is not measured: its fast kernels (FlashAttention/cuDNN)
// are not part of the CUDA toolkit, so the database gets its attention rows from elsewhere.
//
// Usage:
//   kernel_profile [--plan PLAN.csv] [--gpu NAME] [--iters N] [-o OUT.csv]
// PLAN.csv is what `fabricsim kernels profile-plan` writes (op,dtype,shape,flops,bytes; shape is
// "key=value ..."); its flops/bytes columns are copied to the output so that the generator's
// lookups match exactly. Without a plan a default sweep is measured.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "kernel_profile: %s: %s\n", #x, cudaGetErrorString(e_));       \
      std::exit(3);                                                                       \
    }                                                                                     \
  } while (0)
#define CKB(x)                                                                            \
  do {                                                                                    \
    cublasStatus_t s_ = (x);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      std::fprintf(stderr, "kernel_profile: %s: cublas status %d\n", #x, int(s_));        \
      std::exit(3);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

using bf16 = __nv_bfloat16;

struct PlanRow {
  std::string op, dtype, shape;
  double flops = 0, bytes = 0;
  std::map<std::string, long long> p;
};

std::map<std::string, long long> parse_shape(const std::string& s) {
  std::map<std::string, long long> m;
  std::istringstream in(s);
  std::string kv;
  while (in >> kv) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) m[kv.substr(0, eq)] = std::atoll(kv.c_str() + eq + 1);
  }
  return m;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char c : line) {
    if (c == '"') q = !q;
    else if (c == ',' && !q) { out.push_back(cur); cur.clear(); }
    else if (c != '\r') cur += c;
  }
  out.push_back(cur);
  return out;
}

// ---- device kernels --------------------------------------------------------------------------
template <bool kRms>
__global__ void norm_kernel(const bf16* x, const bf16* w, bf16* y, int hidden) {
  const bf16* row = x + static_cast<size_t>(blockIdx.x) * hidden;
  bf16* out = y + static_cast<size_t>(blockIdx.x) * hidden;
  float s = 0, s2 = 0;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(row[i]);
    s += v;
    s2 += v * v;
  }
  __shared__ float sh[2][32];
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    s2 += __shfl_down_sync(0xffffffffu, s2, o);
  }
  if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = s; sh[1][threadIdx.x >> 5] = s2; }
  __syncthreads();
  if (threadIdx.x == 0) {
    float a = 0, b = 0;
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) { a += sh[0][i]; b += sh[1][i]; }
    sh[0][0] = a; sh[1][0] = b;
  }
  __syncthreads();
  const float mean = kRms ? 0.f : sh[0][0] / hidden;
  const float var = sh[1][0] / hidden - mean * mean;
  const float inv = rsqrtf(var + 1e-5f);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[i] = __float2bfloat16((__bfloat162float(row[i]) - mean) * inv * __bfloat162float(w[i]));
  }
}

__global__ void gelu_kernel(const bf16* x, bf16* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    y[i] = __float2bfloat16(0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
  }
}
__global__ void swiglu_kernel(const bf16* x, bf16* y, size_t n) {  // x: [n gate | n up] per row-block
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float g = __bfloat162float(x[i]), u = __bfloat162float(x[i + n]);
    y[i] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
  }
}
__global__ void add_kernel(const bf16* a, const bf16* b, bf16* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
}
__global__ void embedding_kernel(const int* ids, const bf16* table, bf16* y, int hidden, long long tokens) {
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    const bf16* src = table + static_cast<size_t>(ids[t]) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) y[static_cast<size_t>(t) * hidden + i] = src[i];
  }
}
__global__ void adam_kernel(float* p, float* m, float* v, const bf16* g, bf16* p16, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float gi = __bfloat162float(g[i]);
    m[i] = 0.9f * m[i] + 0.1f * gi;
    v[i] = 0.95f * v[i] + 0.05f * gi * gi;
    p[i] -= 1e-4f * (m[i] / (sqrtf(v[i]) + 1e-8f) + 0.1f * p[i]);
    p16[i] = __float2bfloat16(p[i]);
  }
}

// ---- measurement ------------------------------------------------------------------------------
struct Buf {
  void* p = nullptr;
  size_t n = 0;
  void* get(size_t bytes) {
    if (bytes > n) {
      if (p) CK(cudaFree(p));
      CK(cudaMalloc(&p, bytes));
      CK(cudaMemset(p, 0, bytes));
      n = bytes;
    }
    return p;
  }
};

template <class F>
double time_us(F&& launch, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;  // median, µs
}

struct Ctx {
  cublasLtHandle_t lt{};
  Buf a, b, c, d, ws;
  int iters = 20;
};

/// C[m,n] = A[m,k] · B[k,n] (row-major view; cuBLASLt column-major: C^T = B^T A^T).
double gemm(Ctx& cx, long long m, long long n, long long k, bool fp16) {
  const cudaDataType_t t = fp16 ? CUDA_R_16F : CUDA_R_16BF;
  void* A = cx.a.get(size_t(m) * k * 2);
  void* B = cx.b.get(size_t(k) * n * 2);
  void* C = cx.c.get(size_t(m) * n * 2);
  const size_t ws_bytes = 64u << 20;
  void* W = cx.ws.get(ws_bytes);
  cublasLtMatmulDesc_t op;
  CKB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, lc;
  CKB(cublasLtMatrixLayoutCreate(&la, t, n, k, n));  // B^T as (n x k) col-major
  CKB(cublasLtMatrixLayoutCreate(&lb, t, k, m, k));  // A^T as (k x m)
  CKB(cublasLtMatrixLayoutCreate(&lc, t, n, m, n));
  cublasLtMatmulPreference_t pref;
  CKB(cublasLtMatmulPreferenceCreate(&pref));
  CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  CKB(cublasLtMatmulAlgoGetHeuristic(cx.lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0) { std::fprintf(stderr, "kernel_profile: no cuBLASLt algorithm for %lld x %lld x %lld\n", m, n, k); std::exit(3); }
  const float alpha = 1.f, beta = 0.f;
  const double us = time_us([&] {
    CKB(cublasLtMatmul(cx.lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &heur.algo, W, ws_bytes, 0));
  }, cx.iters);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return us;
}

long long need(const PlanRow& r, const char* key) {
  const auto it = r.p.find(key);
  if (it == r.p.end() || it->second <= 0) {
    std::fprintf(stderr, "kernel_profile: %s row '%s' needs %s=...\n", r.op.c_str(), r.shape.c_str(), key);
    std::exit(2);
  }
  return it->second;
}

/// Measures one plan row; returns < 0 for ops this program cannot measure.
double measure(Ctx& cx, const PlanRow& r) {
  const int tb = 256, grid = 132 * 8;
  if (r.op == "gemm" || r.op == "grouped_gemm" || r.op == "logits_gemm") {
    const long long batch = r.p.count("groups") ? r.p.at("groups") : 1;
    return gemm(cx, need(r, "m"), need(r, "n"), need(r, "k"), r.dtype == "fp16") * double(batch);
  }
  if (r.op == "layernorm" || r.op == "rmsnorm") {
    const long long t = need(r, "tokens"), h = need(r, "hidden");
    auto* x = static_cast<bf16*>(cx.a.get(size_t(t) * h * 2));
    auto* y = static_cast<bf16*>(cx.b.get(size_t(t) * h * 2));
    auto* w = static_cast<bf16*>(cx.c.get(size_t(h) * 2));
    if (r.op == "rmsnorm") return time_us([&] { norm_kernel<true><<<unsigned(t), 512>>>(x, w, y, int(h)); }, cx.iters);
    return time_us([&] { norm_kernel<false><<<unsigned(t), 512>>>(x, w, y, int(h)); }, cx.iters);
  }
  if (r.op == "gelu" || r.op == "swiglu" || r.op == "residual_add" || r.op == "moe_permute") {
    const size_t n = size_t(need(r, "elements"));
    auto* x = static_cast<bf16*>(cx.a.get(n * 4));
    auto* y = static_cast<bf16*>(cx.b.get(n * 2));
    if (r.op == "gelu") return time_us([&] { gelu_kernel<<<grid, tb>>>(x, y, n); }, cx.iters);
    if (r.op == "swiglu") return time_us([&] { swiglu_kernel<<<grid, tb>>>(x, y, n); }, cx.iters);
    if (r.op == "moe_permute") return time_us([&] { CK(cudaMemcpyAsync(y, x, n * 2, cudaMemcpyDeviceToDevice)); }, cx.iters);
    return time_us([&] { add_kernel<<<grid, tb>>>(x, x + n, y, n); }, cx.iters);
  }
  if (r.op == "embedding") {
    const long long t = need(r, "tokens"), h = need(r, "hidden"), v = need(r, "vocab");
    auto* table = static_cast<bf16*>(cx.a.get(size_t(v) * h * 2));
    auto* y = static_cast<bf16*>(cx.b.get(size_t(t) * h * 2));
    std::vector<int> ids(static_cast<size_t>(t));
    for (long long i = 0; i < t; ++i) ids[size_t(i)] = int((i * 2654435761LL) % v);
    auto* d_ids = static_cast<int*>(cx.d.get(ids.size() * 4));
    CK(cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    return time_us([&] { embedding_kernel<<<grid, tb>>>(d_ids, table, y, int(h), t); }, cx.iters);
  }
  if (r.op == "adam") {
    const size_t n = size_t(need(r, "params"));
    auto* base = static_cast<char*>(cx.a.get(n * 16));
    auto* g = static_cast<bf16*>(cx.b.get(n * 4));
    float* p = reinterpret_cast<float*>(base);
    return time_us([&] { adam_kernel<<<grid, tb>>>(p, p + n, p + 2 * n, g, g + n, n); }, cx.iters);
  }
  return -1;
}

std::string gpu_short_name(const std::string& dev) {
  for (const char* n : {"GB300", "GB200", "B200", "H200", "H800", "H100", "H20", "A100", "MI300X"}) {
    if (dev.find(n) != std::string::npos) return n;
  }
  return dev;
}

std::vector<PlanRow> default_plan() {
  std::vector<PlanRow> rows;
  auto add = [&](const std::string& op, const std::string& shape, double flops, double bytes) {
    PlanRow r{op, "bf16", shape, flops, bytes, parse_shape(shape)};
    rows.push_back(r);
  };
  for (long long s : {512LL, 1024LL, 2048LL, 4096LL, 8192LL, 16384LL}) {
    const double f = 2.0 * s * s * s, b = 3.0 * s * s * 2;
    add("gemm", "m=" + std::to_string(s) + " n=" + std::to_string(s) + " k=" + std::to_string(s), f, b);
  }
  for (long long t : {2048LL, 8192LL, 32768LL}) {
    for (long long h : {4096LL, 8192LL, 12288LL}) {
      const std::string sh = "tokens=" + std::to_string(t) + " hidden=" + std::to_string(h);
      add("layernorm", sh, 8.0 * t * h, 2.0 * t * h * 2 + 2.0 * h * 2);
      add("rmsnorm", sh, 4.0 * t * h, 2.0 * t * h * 2 + 2.0 * h * 2);
      const std::string el = "elements=" + std::to_string(t * h);
      add("residual_add", el, 1.0 * t * h, 3.0 * t * h * 2);
      add("gelu", el, 8.0 * t * h, 2.0 * t * h * 2);
    }
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  std::string plan_path, out_path, gpu_name;
  Ctx cx;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "kernel_profile: %s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--plan") plan_path = val();
    else if (a == "-o") out_path = val();
    else if (a == "--gpu") gpu_name = val();
    else if (a == "--iters") cx.iters = std::max(1, std::atoi(val().c_str()));
    else {
      std::fprintf(stderr, "usage: kernel_profile [--plan PLAN.csv] [--gpu NAME] [--iters N] [-o OUT.csv]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  std::vector<PlanRow> plan;
  if (plan_path.empty()) {
    plan = default_plan();
  } else {
    std::ifstream in(plan_path);
    if (!in) { std::fprintf(stderr, "kernel_profile: %s: cannot open the plan\n", plan_path.c_str()); return 2; }
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (header) { header = false; continue; }
      const auto f = split(line);
      if (f.size() < 5) { std::fprintf(stderr, "kernel_profile: %s: short line '%s'\n", plan_path.c_str(), line.c_str()); return 2; }
      PlanRow r{f[0], f[1], f[2], std::atof(f[3].c_str()), std::atof(f[4].c_str()), parse_shape(f[2])};
      plan.push_back(r);
    }
  }
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (gpu_name.empty()) gpu_name = gpu_short_name(prop.name);
  CKB(cublasLtCreate(&cx.lt));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::ostringstream out;
  out << "gpu,op,dtype,shape,flops,bytes,time_us,source,quality\n";
  int skipped = 0;
  for (const auto& r : plan) {
    const double us = measure(cx, r);
    if (us < 0) { ++skipped; std::fprintf(stderr, "kernel_profile: skipped %s (%s): not measurable here\n", r.op.c_str(), r.shape.c_str()); continue; }
    char line[1024];
    std::snprintf(line, sizeof line, "%s,%s,%s,\"%s\",%.17g,%.17g,%.3f,\"kernels/profile on %s (%s), cuBLASLt %zu, median of %d\",measured\n",
                  gpu_name.c_str(), r.op.c_str(), r.dtype.c_str(), r.shape.c_str(), r.flops, r.bytes, us, prop.name,
                  date, cublasLtGetVersion(), cx.iters);
    out << line;
    std::fputs(line, stderr);
  }
  cublasLtDestroy(cx.lt);
  if (out_path.empty()) std::cout << out.str();
  else std::ofstream(out_path) << out.str();
  std::fprintf(stderr, "kernel_profile: %zu rows measured, %d skipped\n", plan.size() - size_t(skipped), skipped);
  return 0;
}
