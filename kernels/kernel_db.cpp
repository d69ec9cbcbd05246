#include "kernels/kernel_db.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/errors.hpp"

#ifndef FABRICSIM_SOURCE_DIR_DEFAULT
#define FABRICSIM_SOURCE_DIR_DEFAULT "."
#endif

namespace fabricsim::kernels {

using engine::InputError;

const char* kernel_class_name(KernelClass c) { return c == KernelClass::kCompute ? "compute" : "memory"; }

KernelClass default_class(const std::string& op) {
  static const char* kMatrix[] = {"gemm", "attn", "attention", "linear", "logit", "matmul", "mlp", "qkv", "proj", "fc"};
  for (const char* m : kMatrix) {
    if (op.find(m) != std::string::npos) return KernelClass::kCompute;
  }
  return KernelClass::kMemory;
}

bool known_kind(const std::string& op) {
  if (default_class(op) == KernelClass::kCompute) return true;
  static const char* kMemory[] = {"norm",    "gelu",  "silu",    "swiglu",  "act",   "softmax", "dropout",
                                  "embed",   "adam",  "optim",   "rope",    "rotary", "residual", "add",
                                  "cast",    "permute", "router", "topk",    "entropy", "loss",   "copy",
                                  "elementwise", "bias", "scale", "transpose", "grad", "relu"};
  for (const char* m : kMemory) {
    if (op.find(m) != std::string::npos) return true;
  }
  return false;
}

KernelClass classify(const std::string& op, double flops, double bytes, const GpuSpec& gpu, Dtype d) {
  if (!(flops > 0) || !(bytes > 0)) {
    if (flops > 0 && !(bytes > 0)) return KernelClass::kCompute;
    if (bytes > 0 && !(flops > 0)) return KernelClass::kMemory;
    return default_class(op);
  }
  return flops / bytes >= gpu.ridge_flops_per_byte(d) ? KernelClass::kCompute : KernelClass::kMemory;
}

double roofline_scale_us(double t_us, KernelClass cls, const GpuSpec& from, const GpuSpec& to, Dtype d) {
  if (cls == KernelClass::kCompute) return t_us * from.peak_flops(d) / to.peak_flops(d);
  return t_us * from.hbm_bytes_per_s() / to.hbm_bytes_per_s();
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

namespace {

std::string key_of(const std::string& gpu, const std::string& op, Dtype d) {
  return gpu + "|" + op + "|" + dtype_name(d);
}

double parse_num(const std::string& text, const std::string& file, const std::string& field, bool allow_empty) {
  if (text.empty()) {
    if (allow_empty) return 0;
    throw InputError(file, field, "empty", "give a number");
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
    throw InputError(file, field, "'" + text + "' is not a number >= 0", "give a plain decimal number");
  }
  return v;
}

}  // namespace

void KernelDb::add(KernelRow row) {
  by_key_[key_of(row.gpu, row.op, row.dtype)].push_back(rows_.size());
  rows_.push_back(std::move(row));
}

KernelDb KernelDb::load(const std::string& path) {
  KernelDb db;
  db.load_more(path);
  return db;
}

void KernelDb::load_more(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "<file>", "cannot open the kernel database", "check the path (kernels/data/kernels.csv is the shipped one)");
  load_more(in, path);
}

void KernelDb::load_more(std::istream& in, const std::string& path) {
  static const std::vector<std::string> kCols = {"gpu", "op", "dtype", "shape", "flops", "bytes", "time_us", "source", "quality"};
  std::string line;
  std::size_t lineno = 0;
  std::vector<int> col(kCols.size(), -1);
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#' || line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto f = split_csv_line(line);
    const std::string where = "line " + std::to_string(lineno);
    if (!header) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        for (std::size_t c = 0; c < kCols.size(); ++c) {
          if (f[i] == kCols[c]) col[c] = static_cast<int>(i);
        }
      }
      for (std::size_t c = 0; c < kCols.size(); ++c) {
        if (col[c] < 0) {
          throw InputError(path, where + " (header)", "missing column '" + kCols[c] + "'",
                           "the header must name gpu,op,dtype,shape,flops,bytes,time_us,source,quality");
        }
      }
      header = true;
      continue;
    }
    auto get = [&](std::size_t c) -> std::string {
      const auto i = static_cast<std::size_t>(col[c]);
      return i < f.size() ? f[i] : std::string();
    };
    KernelRow r;
    r.gpu = find_gpu(get(0), path, where + " column gpu").name;
    r.op = get(1);
    if (r.op.empty()) throw InputError(path, where + " column op", "empty op", "name the kernel kind, e.g. gemm");
    r.dtype = parse_dtype(get(2), path, where + " column dtype");
    r.shape = get(3);
    r.flops = parse_num(get(4), path, where + " column flops", true);
    r.bytes = parse_num(get(5), path, where + " column bytes", true);
    r.time_us = parse_num(get(6), path, where + " column time_us", false);
    if (!(r.time_us > 0)) throw InputError(path, where + " column time_us", "must be > 0", "give the measured time in microseconds");
    r.source = get(7);
    r.quality = get(8);
    if (r.source.empty()) throw InputError(path, where + " column source", "every row needs its provenance", "say where the time comes from");
    add(std::move(r));
  }
  if (!header) throw InputError(path, "<file>", "no header line", "start with gpu,op,dtype,shape,flops,bytes,time_us,source,quality");
}

std::string KernelDb::default_path() {
  if (const char* p = std::getenv("FABRICSIM_KERNEL_DB")) return p;
  if (const char* d = std::getenv("FABRICSIM_SOURCE_DIR")) {
    const std::string p = std::string(d) + "/kernels/data/kernels.csv";
    if (std::filesystem::exists(p)) return p;
  }
  return std::string(FABRICSIM_SOURCE_DIR_DEFAULT) + "/kernels/data/kernels.csv";
}

double KernelDb::analytic_us(const GpuSpec& gpu, Dtype d, double flops, double bytes, const RooflineEfficiency& eff) {
  const double tc = flops > 0 ? flops / (eff.compute * gpu.peak_flops(d)) : 0.0;
  const double tm = bytes > 0 ? bytes / (eff.memory * gpu.hbm_bytes_per_s()) : 0.0;
  return std::max(tc, tm) * 1e6 + eff.launch_us;
}

std::optional<KernelEstimate> KernelDb::on_gpu(const GpuSpec& gpu, const std::string& op, Dtype d, double flops,
                                               double bytes, bool extrapolate, std::string* why) const {
  const auto it = by_key_.find(key_of(gpu.name, op, d));
  if (it == by_key_.end()) return std::nullopt;
  const KernelClass cls = classify(op, flops, bytes, gpu, d);
  // Exact match on the work (both coordinates, relative 1e-9).
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); };
  for (std::size_t i : it->second) {
    const KernelRow& r = rows_[i];
    if (same(r.flops, flops) && same(r.bytes, bytes)) return KernelEstimate{r.time_us, cls, "measured"};
  }
  const bool by_flops = cls == KernelClass::kCompute;
  const double x = by_flops ? flops : bytes;
  if (!(x > 0)) return std::nullopt;
  std::vector<std::pair<double, double>> pts;  // (work, time)
  for (std::size_t i : it->second) {
    const KernelRow& r = rows_[i];
    const double w = by_flops ? r.flops : r.bytes;
    if (w > 0) pts.emplace_back(w, r.time_us);
  }
  if (pts.empty()) return std::nullopt;
  std::sort(pts.begin(), pts.end());
  const double lo = pts.front().first, hi = pts.back().first;
  if (x < lo * (1 - 1e-9) || x > hi * (1 + 1e-9)) {
    if (why) {
      std::ostringstream s;
      s << op << " " << dtype_name(d) << " on " << gpu.name << ": " << (by_flops ? "FLOPs " : "bytes ") << x
        << " outside the measured range [" << lo << ", " << hi << "]";
      *why = s.str();
    }
    if (!extrapolate) return std::nullopt;
    const auto& p = x < lo ? pts.front() : pts.back();
    return KernelEstimate{x / (p.first / p.second), cls, "extrapolated"};
  }
  for (std::size_t i = 0; i + 1 < pts.size(); ++i) {
    const auto& a = pts[i];
    const auto& b = pts[i + 1];
    if (x >= a.first * (1 - 1e-9) && x <= b.first * (1 + 1e-9)) {
      if (same(a.first, b.first) || same(x, a.first)) return KernelEstimate{a.second * x / a.first, cls, "interpolated"};
      const double ra = a.first / a.second, rb = b.first / b.second;
      const double u = (std::log(x) - std::log(a.first)) / (std::log(b.first) - std::log(a.first));
      const double rate = ra + (rb - ra) * u;
      return KernelEstimate{x / rate, cls, "interpolated"};
    }
  }
  return KernelEstimate{pts.front().second * x / pts.front().first, cls, "interpolated"};
}

std::optional<KernelEstimate> KernelDb::from_tables(const GpuSpec& gpu, Dtype d, const KernelShape& shape,
                                                    double flops, double bytes, Fallback fb,
                                                    const RooflineEfficiency& eff) const {
  std::optional<TableTime> t;
  double ratio = 1;
  if (shape.kind == KernelShape::Kind::kGemm && shape.batch == 1) {
    t = tables_->gemm(gpu, d, shape.m, shape.n, shape.k);
  } else if (shape.kind == KernelShape::Kind::kAttention && shape.causal && shape.heads > 0 && shape.kv_heads > 0 &&
             shape.seq > 0) {
    const double b = shape.batch / shape.heads;  // KernelShape::batch is batch·heads
    t = tables_->attention(gpu, d, b, shape.seq, shape.heads, shape.kv_heads, shape.head_dim, shape.window);
    if (shape.backward) ratio = kAttnBwdOverFwd;
  }
  if (!t || (fb == Fallback::kNone && t->how == TableHow::kExtrapolated)) return std::nullopt;
  KernelEstimate e;
  e.time_us = t->time_us * ratio;
  e.cls = classify(shape.kind == KernelShape::Kind::kGemm ? "gemm" : "attention", flops, bytes, gpu, d);
  if (eff.sustained_tables && e.cls == KernelClass::kCompute) {
    const GpuEfficiency* ge = find_efficiency(gpu);
    if (ge != nullptr && ge->sustained > 0) e.time_us /= ge->sustained;
  }
  e.how = std::string("table ") + table_how_name(t->how);
  e.source = t->how == TableHow::kMeasured     ? EstimateSource::kMeasured
             : t->how == TableHow::kInterpolated ? EstimateSource::kInterpolated
                                                  : EstimateSource::kExtrapolated;
  return e;
}

namespace {
EstimateSource source_of(const std::string& how) {
  if (how == "measured") return EstimateSource::kMeasured;
  if (how == "interpolated") return EstimateSource::kInterpolated;
  if (how == "extrapolated") return EstimateSource::kExtrapolated;
  return EstimateSource::kModel;
}
}  // namespace

KernelEstimate KernelDb::estimate(const GpuSpec& gpu, const std::string& op, Dtype d, double flops, double bytes,
                                  Fallback fb, const RooflineEfficiency& eff, const KernelShape& shape,
                                  bool tables) const {
  if (tables && tables_ != nullptr && shape.kind != KernelShape::Kind::kNone) {
    if (auto e = from_tables(gpu, d, shape, flops, bytes, fb, eff)) return *e;
  }
  KernelEstimate e = estimate_rows(gpu, op, d, flops, bytes, fb, eff, shape);
  e.source = source_of(e.how);
  return e;
}

KernelEstimate KernelDb::estimate_rows(const GpuSpec& gpu, const std::string& op, Dtype d, double flops,
                                       double bytes, Fallback fb, const RooflineEfficiency& eff,
                                       const KernelShape& shape) const {
  std::string why;
  if (auto e = on_gpu(gpu, op, d, flops, bytes, false, &why)) return *e;
  // Another GPU with data for this op, scaled by the roofline (most rows first, then table order).
  std::vector<std::pair<std::size_t, const GpuSpec*>> others;
  for (const auto& g : gpu_specs()) {
    if (g.name == gpu.name) continue;
    const auto it = by_key_.find(key_of(g.name, op, d));
    if (it != by_key_.end()) others.emplace_back(it->second.size(), &g);
  }
  std::stable_sort(others.begin(), others.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (const auto& [n, g] : others) {
    std::string why2;
    if (auto e = on_gpu(*g, op, d, flops, bytes, false, &why2)) {
      if (gpu.peak_flops(d) <= 0) break;
      const KernelClass cls = classify(op, flops, bytes, *g, d);
      return KernelEstimate{roofline_scale_us(e->time_us, cls, *g, gpu, d), cls, "scaled from " + g->name};
    }
    if (why.empty()) why = why2;
  }
  if (fb == Fallback::kNone) {
    if (why.empty()) {
      why = std::string("no measured rows for ") + op + " " + dtype_name(d) + " on " + gpu.name + " or any other GPU";
    }
    throw InputError("<kernel db>", op, why, "add measurements (fabricsim kernels profile-plan) or allow the roofline model");
  }
  if (auto e = on_gpu(gpu, op, d, flops, bytes, true, nullptr)) return *e;
  for (const auto& [n, g] : others) {
    if (auto e = on_gpu(*g, op, d, flops, bytes, true, nullptr)) {
      const KernelClass cls = classify(op, flops, bytes, *g, d);
      return KernelEstimate{roofline_scale_us(e->time_us, cls, *g, gpu, d), cls, "extrapolated, scaled from " + g->name};
    }
  }
  const KernelClass cls = classify(op, flops, bytes, gpu, d);
  if (eff.shape_model && shape.kind != KernelShape::Kind::kNone) {
    const auto t = shape.kind == KernelShape::Kind::kGemm ? gemm_model_us(gpu, d, shape, flops, bytes, eff.memory)
                                                          : attention_model_us(gpu, d, shape, flops, bytes, eff.memory);
    if (t) return KernelEstimate{*t + eff.launch_us, cls, "efficiency model"};
  }
  return KernelEstimate{analytic_us(gpu, d, flops, bytes, eff), cls, "roofline model"};
}

}  // namespace fabricsim::kernels
