#include "kernels/measured_tables.hpp"

#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

#include "engine/errors.hpp"

#ifndef FABRICSIM_SOURCE_DIR_DEFAULT
#define FABRICSIM_SOURCE_DIR_DEFAULT "."
#endif

namespace fabricsim::kernels {

using engine::InputError;

const char* table_how_name(TableHow h) {
  switch (h) {
    case TableHow::kMeasured: return "measured";
    case TableHow::kInterpolated: return "interpolated";
    case TableHow::kExtrapolated: return "extrapolated";
  }
  return "?";
}

std::string read_zstd_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "<file>", "cannot open the measured kernel table", "check the path (kernels/data/measured/SOURCES.md lists the shipped files)");
  const std::string packed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ZSTD_DStream* ds = ZSTD_createDStream();
  if (ds == nullptr) throw InputError(path, "<file>", "out of memory for the zstd decoder", "");
  std::string out;
  std::vector<char> buf(ZSTD_DStreamOutSize());
  ZSTD_inBuffer ib{packed.data(), packed.size(), 0};
  std::size_t ret = 1;
  while (ib.pos < ib.size) {
    ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
    ret = ZSTD_decompressStream(ds, &ob, &ib);
    if (ZSTD_isError(ret)) {
      const std::string why = ZSTD_getErrorName(ret);
      ZSTD_freeDStream(ds);
      throw InputError(path, "<file>", "not a valid zstd file (" + why + ")", "give the table as CSV compressed with zstd");
    }
    out.append(buf.data(), ob.pos);
  }
  ZSTD_freeDStream(ds);
  if (ret != 0) throw InputError(path, "<file>", "truncated zstd file", "copy the table again (kernels/data/measured/SOURCES.md)");
  return out;
}

// ---- Grid3 ---------------------------------------------------------------------------------

void Grid3::add(const std::array<double, 3>& x, double ms) { raw_.emplace_back(x, ms); }

void Grid3::finish() {
  for (std::size_t a = 0; a < 3; ++a) {
    auto& ax = axis_[a];
    ax.clear();
    for (const auto& r : raw_) ax.push_back(r.first[a]);
    std::sort(ax.begin(), ax.end());
    ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  }
  ms_.clear();
  ms_.reserve(raw_.size());
  auto idx = [&](std::size_t a, double v) {
    return static_cast<std::size_t>(std::lower_bound(axis_[a].begin(), axis_[a].end(), v) - axis_[a].begin());
  };
  for (const auto& r : raw_) ms_.emplace(pack(idx(0, r.first[0]), idx(1, r.first[1]), idx(2, r.first[2])), r.second);
  raw_.clear();
  raw_.shrink_to_fit();
}

std::optional<double> Grid3::at(std::size_t i, std::size_t j, std::size_t k) const {
  const auto it = ms_.find(pack(i, j, k));
  if (it == ms_.end()) return std::nullopt;
  return it->second;
}

std::optional<TableTime> Grid3::lookup(const std::array<double, 3>& x) const {
  std::array<std::size_t, 3> lo{}, hi{};
  std::array<double, 3> w{};  // weight of the hi index
  double scale = 1;
  bool off = false;
  for (std::size_t a = 0; a < 3; ++a) {
    const auto& ax = axis_[a];
    if (ax.empty() || !(x[a] > 0)) return std::nullopt;
    if (x[a] <= ax.front()) {
      lo[a] = hi[a] = 0;
      off = off || x[a] < ax.front();
    } else if (x[a] >= ax.back()) {
      lo[a] = hi[a] = ax.size() - 1;
      if (x[a] > ax.back()) {
        off = true;
        scale *= x[a] / ax.back();
      }
    } else {
      const auto h = static_cast<std::size_t>(std::upper_bound(ax.begin(), ax.end(), x[a]) - ax.begin());
      if (ax[h - 1] == x[a]) {
        lo[a] = hi[a] = h - 1;
      } else {
        lo[a] = h - 1;
        hi[a] = h;
        w[a] = (std::log(x[a]) - std::log(ax[h - 1])) / (std::log(ax[h]) - std::log(ax[h - 1]));
      }
    }
  }
  if (lo == hi) {
    const auto t = at(lo[0], lo[1], lo[2]);
    if (!t) return std::nullopt;
    return TableTime{*t * 1e3 * scale, off ? TableHow::kExtrapolated : TableHow::kMeasured};
  }
  double logt = 0;
  for (int c = 0; c < 8; ++c) {
    double wt = 1;
    std::array<std::size_t, 3> i{};
    for (std::size_t a = 0; a < 3; ++a) {
      const bool up = (c >> a) & 1;
      if (up && lo[a] == hi[a]) {
        wt = 0;
        break;
      }
      i[a] = up ? hi[a] : lo[a];
      wt *= up ? w[a] : 1 - w[a];
    }
    if (wt == 0) continue;
    const auto t = at(i[0], i[1], i[2]);
    if (!t) return std::nullopt;
    logt += wt * std::log(*t);
  }
  return TableTime{std::exp(logt) * 1e3 * scale, off ? TableHow::kExtrapolated : TableHow::kInterpolated};
}

// ---- parsing -------------------------------------------------------------------------------

namespace {

/// Splits one plain CSV line (the tables have no quoted fields) into views of `text`.
void split_fields(const std::string& text, std::size_t b, std::size_t e, std::vector<std::string_view>& f) {
  f.clear();
  const std::string_view all(text);
  std::size_t s = b;
  for (std::size_t i = b; i <= e; ++i) {
    if (i == e || text[i] == ',') {
      std::size_t t = i;
      if (t > s && text[t - 1] == '\r') --t;
      f.push_back(all.substr(s, t - s));
      s = i + 1;
    }
  }
}

/// Line iteration with header-by-name column lookup.
struct CsvReader {
  CsvReader(const std::string& t, const std::string& fl) : text(t), file(fl) {}
  const std::string& text;
  const std::string& file;
  std::size_t pos = 0, lineno = 0;
  std::vector<std::string_view> f;
  std::vector<std::string> header;

  bool next() {
    while (pos < text.size()) {
      const std::size_t e = std::min(text.find('\n', pos), text.size());
      const std::size_t b = pos;
      pos = e + 1;
      ++lineno;
      if (e == b || (e == b + 1 && text[b] == '\r')) continue;
      split_fields(text, b, e, f);
      return true;
    }
    return false;
  }
  std::string where() const { return "line " + std::to_string(lineno); }
  void read_header() {
    if (!next()) throw InputError(file, "line 1", "no header line", "the table must start with its column names");
    header.assign(f.begin(), f.end());
  }
  std::size_t col(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    throw InputError(file, "line 1 (header)", "missing column '" + name + "'", "give the table with aiconfigurator's column names (kernels/data/measured/SOURCES.md)");
  }
  std::string_view get(std::size_t c, const std::string& name) const {
    if (c >= f.size()) {
      throw InputError(file, where() + " column " + name, "missing field (" + std::to_string(f.size()) + " fields)", "every row needs all header columns");
    }
    return f[c];
  }
  double num(std::size_t c, const std::string& name, bool positive) const {
    const std::string_view s = get(c, name);
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 ||
        (positive && !(v > 0))) {
      throw InputError(file, where() + " column " + name, "'" + std::string(s) + "' is not a number " + (positive ? "> 0" : ">= 0"),
                       "fix the row (times are ms per call, dimensions whole numbers)");
    }
    return v;
  }
  /// A dimension that keys a grid (head dim, window, head counts): a whole number >= 0 (> 0 when
  /// `positive`) of at most kMaxDim, so that it converts to int exactly.
  double whole(std::size_t c, const std::string& name, bool positive) const {
    constexpr double kMaxDim = 1 << 30;
    const double v = num(c, name, positive);
    if (v != std::floor(v) || v > kMaxDim) {
      throw InputError(file, where() + " column " + name, "'" + std::string(get(c, name)) + "' is not a whole number up to 2^30",
                       "fix the row (dimensions are whole numbers)");
    }
    return v;
  }
};

}  // namespace

void parse_gemm_table(const std::string& text, const std::string& file, std::map<std::string, Grid3>& out) {
  CsvReader r(text, file);
  r.read_header();
  const std::size_t cd = r.col("gemm_dtype"), cm = r.col("m"), cn = r.col("n"), ck = r.col("k"), cl = r.col("latency");
  std::string last_name;
  Grid3* last = nullptr;
  while (r.next()) {
    const std::string_view d = r.get(cd, "gemm_dtype");
    if (d.empty()) throw InputError(file, r.where() + " column gemm_dtype", "empty dtype", "name the GEMM dtype, e.g. bfloat16");
    if (d != last_name) {
      last_name = std::string(d);
      last = &out[last_name];
    }
    last->add({r.num(cm, "m", true), r.num(cn, "n", true), r.num(ck, "k", true)}, r.num(cl, "latency", true));
  }
  for (auto& [d, g] : out) g.finish();
}

void parse_attention_table(const std::string& text, const std::string& file, std::map<AttentionKey, Grid3>& out) {
  CsvReader r(text, file);
  r.read_header();
  const std::size_t cb = r.col("batch_size"), cs = r.col("isl"), ch = r.col("num_heads"),
                    ckv = r.col("num_key_value_heads"), chd = r.col("head_dim"), cw = r.col("window_size"),
                    cad = r.col("attn_dtype"), ckd = r.col("kv_cache_dtype"), cl = r.col("latency");
  // Optional label columns: only the TensorRT-LLM backend's rows, beam 1, no prefix.
  std::size_t csrc = SIZE_MAX, cbeam = SIZE_MAX, cstep = SIZE_MAX;
  for (std::size_t i = 0; i < r.header.size(); ++i) {
    if (r.header[i] == "kernel_source") csrc = i;
    if (r.header[i] == "beam_width") cbeam = i;
    if (r.header[i] == "step") cstep = i;
  }
  while (r.next()) {
    if (csrc != SIZE_MAX && r.get(csrc, "kernel_source") != "torch_flow") continue;
    if (cbeam != SIZE_MAX && r.num(cbeam, "beam_width", false) != 1) continue;
    if (cstep != SIZE_MAX && r.num(cstep, "step", false) != 0) continue;
    const double h = r.whole(ch, "num_heads", true), kv = r.whole(ckv, "num_key_value_heads", true);
    const double hd = r.whole(chd, "head_dim", true), win = r.whole(cw, "window_size", false);
    if (std::fmod(h, kv) != 0) continue;  // not a whole GQA group: never matched by a query
    const AttentionKey key{int(hd), int(win), std::string(r.get(cad, "attn_dtype")), std::string(r.get(ckd, "kv_cache_dtype")),
                      int(h / kv)};
    out[key].add({r.num(cb, "batch_size", true), r.num(cs, "isl", true), h}, r.num(cl, "latency", true));
  }
  for (auto& [k, g] : out) g.finish();
}

// ---- MeasuredTables ------------------------------------------------------------------------

std::string table_system(const GpuSpec& gpu) {
  if (gpu.name == "H100") return "h100_sxm";
  if (gpu.name == "H200") return "h200_sxm";
  if (gpu.name == "B200") return "b200_sxm";
  if (gpu.name == "GB200") return "gb200";
  if (gpu.name == "A100") return "a100_sxm";
  return "";
}

const MeasuredTables& MeasuredTables::shipped() {
  static const MeasuredTables t([] {
    if (const char* p = std::getenv("FABRICSIM_MEASURED_KERNELS")) return std::string(p);
    if (const char* d = std::getenv("FABRICSIM_SOURCE_DIR")) {
      const std::string p = std::string(d) + "/kernels/data/measured";
      if (std::filesystem::exists(p)) return p;
    }
    return std::string(FABRICSIM_SOURCE_DIR_DEFAULT) + "/kernels/data/measured";
  }());
  return t;
}

bool MeasuredTables::has(const GpuSpec& gpu, const std::string& op) const {
  const std::string sys = table_system(gpu);
  return !sys.empty() && std::filesystem::exists(dir_ + "/" + sys + "/" + op + ".csv.zst");
}

double MeasuredTables::load_seconds() const {
  std::lock_guard<std::mutex> g(mu_);
  return load_s_;
}

const MeasuredTables::Gemm* MeasuredTables::gemm_table(const std::string& sys) const {
  auto it = gemm_.find(sys);
  if (it != gemm_.end()) return it->second.get();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = dir_ + "/" + sys + "/gemm.csv.zst";
  std::unique_ptr<Gemm> t;
  if (std::filesystem::exists(path)) {
    t = std::make_unique<Gemm>();
    parse_gemm_table(read_zstd_file(path), path, t->by_dtype);
  }
  load_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return gemm_.emplace(sys, std::move(t)).first->second.get();
}

const MeasuredTables::Attn* MeasuredTables::attn_table(const std::string& sys) const {
  auto it = attn_.find(sys);
  if (it != attn_.end()) return it->second.get();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = dir_ + "/" + sys + "/context_attention.csv.zst";
  std::unique_ptr<Attn> t;
  if (std::filesystem::exists(path)) {
    t = std::make_unique<Attn>();
    parse_attention_table(read_zstd_file(path), path, t->grids);
  }
  load_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return attn_.emplace(sys, std::move(t)).first->second.get();
}

std::optional<TableTime> MeasuredTables::gemm(const GpuSpec& gpu, Dtype d, double m, double n, double k) const {
  const std::string sys = table_system(gpu);
  if (sys.empty()) return std::nullopt;
  const char* dt = d == Dtype::kBf16 || d == Dtype::kFp16 ? "bfloat16" : d == Dtype::kFp8 ? "fp8" : nullptr;
  if (dt == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  const Gemm* t = gemm_table(sys);
  if (t == nullptr) return std::nullopt;
  const auto it = t->by_dtype.find(dt);
  if (it == t->by_dtype.end()) return std::nullopt;
  return it->second.lookup({m, n, k});
}

std::optional<TableTime> MeasuredTables::attention(const GpuSpec& gpu, Dtype d, double batch, double seq, double heads,
                                                   double kv_heads, double head_dim, double window) const {
  const std::string sys = table_system(gpu);
  if (sys.empty() || !(kv_heads > 0) || !(heads > 0) || std::fmod(heads, kv_heads) != 0) return std::nullopt;
  const char* dt = d == Dtype::kBf16 || d == Dtype::kFp16 ? "bfloat16" : d == Dtype::kFp8 ? "fp8" : nullptr;
  if (dt == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> g(mu_);
  const Attn* t = attn_table(sys);
  if (t == nullptr) return std::nullopt;
  // Only whole dimensions within int range can match a row (the parser keeps no others); checked
  // before the conversions, which are undefined for values int cannot hold.
  constexpr double kMaxDim = 1 << 30;
  const auto whole = [](double v) { return v >= 0 && v <= kMaxDim && v == std::floor(v); };
  if (!whole(head_dim) || !whole(window) || !whole(heads / kv_heads)) return std::nullopt;
  const auto it = t->grids.find(AttentionKey{int(head_dim), int(window), dt, dt, int(heads / kv_heads)});
  if (it == t->grids.end()) return std::nullopt;
  if (auto r = it->second.lookup({batch, seq, heads})) return r;
  if (batch > 1) {
    if (auto r = it->second.lookup({1, seq, heads})) return TableTime{r->time_us * batch, TableHow::kExtrapolated};
  }
  return std::nullopt;
}

}  // namespace fabricsim::kernels
