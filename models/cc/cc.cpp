#include "models/cc/cc.hpp"

#include <cstdlib>

#include "engine/errors.hpp"
#include "engine/units.hpp"

namespace fabricsim::models::cc {

using engine::InputError;

void read_double(const SpecReader& r, const std::string& key, double lo, double hi, double& out) {
  if (auto v = r.get(key)) {
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(x >= lo && x <= hi)) {
      throw InputError(r.file_of(key), key, "'" + *v + "' must be a number in [" + std::to_string(lo) + ", " +
                                              std::to_string(hi) + "]", "e.g. the default from `fabricsim describe`");
    }
    out = x;
  }
}

void read_time(const SpecReader& r, const std::string& key, engine::SimTime lo, engine::SimTime hi, engine::SimTime& out) {
  if (auto v = r.get(key)) {
    out = engine::parse_time_ps(*v, r.file_of(key), key);
    if (out < lo || out > hi) {
      const auto ps = [](engine::SimTime t) {
        return t == 0 ? std::string("0") : t == engine::kPsPerS ? std::string("1s") : std::to_string(t) + "ps";
      };
      throw InputError(r.file_of(key), key, "'" + *v + "' is outside " + ps(lo) + " .. " + ps(hi), "e.g. 55us");
    }
  }
}

void read_bytes(const SpecReader& r, const std::string& key, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  if (auto v = r.get(key)) {
    const std::uint64_t b = engine::parse_bytes(*v, r.file_of(key), key);
    if (b < lo || b > hi) {
      throw InputError(r.file_of(key), key, "'" + *v + "' is outside " + std::to_string(lo) + " .. " +
                                              std::to_string(hi) + " bytes", "e.g. 4KiB, 64MiB");
    }
    out = b;
  }
}

void read_rate(const SpecReader& r, const std::string& key, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  if (auto v = r.get(key)) {
    const std::uint64_t b = engine::parse_rate_bps(*v, r.file_of(key), key);
    if (b < lo || b > hi) {
      throw InputError(r.file_of(key), key, "'" + *v + "' is outside " + std::to_string(lo) + " .. " +
                                              std::to_string(hi) + " bits/s", "e.g. 10Mbps");
    }
    out = b;
  }
}

void read_count(const SpecReader& r, const std::string& key, std::uint32_t lo, std::uint32_t hi, std::uint32_t& out) {
  if (auto v = r.get(key)) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || v->front() == '-' || x < lo || x > hi) {
      throw InputError(r.file_of(key), key, "'" + *v + "' must be an integer in [" + std::to_string(lo) + ", " +
                                              std::to_string(hi) + "]", "e.g. the default from `fabricsim describe`");
    }
    out = static_cast<std::uint32_t>(x);
  }
}

void field_type_mismatch(const char* key) {
  throw engine::InternalError(std::string("congestion-control parameter ") + key +
                              ": the declared type does not match the member it sets");
}

}  // namespace fabricsim::models::cc
