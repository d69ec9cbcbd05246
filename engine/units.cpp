#include "engine/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/errors.hpp"

namespace fabricsim::engine {
namespace {

struct Split {
  double value;
  std::string unit;
};

Split split_number(const std::string& text, const std::string& file, const std::string& field,
                   const char* example) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char* begin = text.c_str() + i;
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) {
    throw InputError(file, field, "'" + text + "' is not a number with a unit",
                     std::string("write it like \"") + example + "\"");
  }
  std::string unit(end);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  if (v < 0) {
    throw InputError(file, field, "'" + text + "' is negative", "give a non-negative value");
  }
  return {v, unit};
}

}  // namespace

SimTime parse_time_ps(const std::string& text, const std::string& file, const std::string& field,
                      SimTime default_unit_ps) {
  const Split s = split_number(text, file, field, "500ns");
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"ps", 1.0}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
  double mult = 0;
  if (s.unit.empty() && default_unit_ps > 0) mult = static_cast<double>(default_unit_ps);
  for (const auto& [u, m] : kUnits) {
    if (s.unit == u) mult = m;
  }
  if (mult == 0) {
    throw InputError(file, field, "unknown time unit '" + s.unit + "' in '" + text + "'",
                     "use ps, ns, us, ms or s, e.g. \"500ns\"");
  }
  const double ps = s.value * mult;
  if (ps > 9.0e18) throw InputError(file, field, "'" + text + "' is too large", "use a smaller time");
  return static_cast<SimTime>(std::llround(ps));
}

double parse_wall_seconds(const std::string& text, const std::string& file, const std::string& field) {
  const std::string fix = "give a positive duration with a unit ms, s, min or h, e.g. 500ms, 60s or 2min";
  const auto first = text.find_first_not_of(" \t");
  if (first != std::string::npos && text[first] == '-') {
    throw InputError(file, field, "'" + text + "' is negative", fix);
  }
  Split s{0, ""};
  try {
    s = split_number(text, file, field, "60s");
  } catch (const InputError&) {
    throw InputError(file, field, "'" + text + "' is not a duration", fix);
  }
  static const std::vector<std::pair<std::string, double>> kUnits = {{"ms", 1e-3}, {"s", 1.0}, {"min", 60.0}, {"h", 3600.0}};
  double mult = 0;
  for (const auto& [u, m] : kUnits) {
    if (s.unit == u) mult = m;
  }
  if (mult == 0) {
    throw InputError(file, field,
                     s.unit.empty() ? "'" + text + "' has no unit" : "unknown unit '" + s.unit + "' in '" + text + "'", fix);
  }
  const double sec = s.value * mult;
  if (!(sec > 0)) throw InputError(file, field, "'" + text + "' is not positive", fix);
  if (sec > 1e9) throw InputError(file, field, "'" + text + "' is too large", fix);
  return sec;
}

bool parse_bool(const std::string& text, const std::string& file, const std::string& field) {
  std::string t = text;
  for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  throw InputError(file, field, "'" + text + "' is not a boolean", "use true or false (also yes/no, on/off, 1/0)");
}

std::uint64_t parse_bytes(const std::string& text, const std::string& file, const std::string& field) {
  const Split s = split_number(text, file, field, "4KiB");
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"", 1.0},      {"B", 1.0},           {"KB", 1e3},          {"MB", 1e6},
      {"GB", 1e9},    {"TB", 1e12},         {"KiB", 1024.0},      {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [u, m] : kUnits) {
    if (s.unit == u) {
      const double b = s.value * m;
      if (b > 1.8e19) throw InputError(file, field, "'" + text + "' is too large", "use a smaller size");
      if (std::floor(b) != b) {
        throw InputError(file, field, "'" + text + "' is not a whole number of bytes",
                         "give an integer byte count");
      }
      return static_cast<std::uint64_t>(b);
    }
  }
  throw InputError(file, field, "unknown size unit '" + s.unit + "' in '" + text + "'",
                   "use B, KB, MB, GB, KiB, MiB or GiB, e.g. \"4KiB\"");
}

std::uint64_t parse_rate_bps(const std::string& text, const std::string& file,
                             const std::string& field) {
  const Split s = split_number(text, file, field, "400Gbps");
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"bps", 1.0},  {"Kbps", 1e3},  {"Mbps", 1e6},  {"Gbps", 1e9},  {"Tbps", 1e12},
      {"B/s", 8.0},  {"KB/s", 8e3},  {"MB/s", 8e6},  {"GB/s", 8e9},  {"GBps", 8e9},
      {"TB/s", 8e12}};
  for (const auto& [u, m] : kUnits) {
    if (s.unit == u) {
      const double r = s.value * m;
      if (!(s.value > 0)) {
        throw InputError(file, field, "rate '" + text + "' must be positive",
                         "give a rate like \"400Gbps\"");
      }
      if (r < 1.0) {
        throw InputError(file, field, "rate '" + text + "' is below 1 bps", "give a rate like \"400Gbps\"");
      }
      // llround past the int64 range is undefined; no link comes near 9.2e18 bit/s.
      if (r > 9.2e18) {
        throw InputError(file, field, "rate '" + text + "' is too large", "give a rate like \"400Gbps\"");
      }
      return static_cast<std::uint64_t>(std::llround(r));
    }
  }
  throw InputError(file, field, "unknown rate unit '" + s.unit + "' in '" + text + "'",
                   "use bps, Kbps, Mbps, Gbps, Tbps or GB/s, e.g. \"400Gbps\"");
}

std::string format_time(SimTime ps) {
  char buf[64];
  const double v = static_cast<double>(ps);
  if (ps >= kPsPerS) std::snprintf(buf, sizeof buf, "%.6f s", v / 1e12);
  else if (ps >= kPsPerMs) std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e9);
  else if (ps >= kPsPerUs) std::snprintf(buf, sizeof buf, "%.3f us", v / 1e6);
  else std::snprintf(buf, sizeof buf, "%.3f ns", v / 1e3);
  return buf;
}

}  // namespace fabricsim::engine
