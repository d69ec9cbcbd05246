#pragma once
/// @file units.hpp
/// The one parser of human units at the edge ("400Gbps", "1us", "4KiB"). Inside, integers.
#include <cstdint>
#include <string>

#include "engine/time.hpp"

namespace fabricsim::engine {

/// Parses a duration: a number with unit ps|ns|us|ms|s (e.g. "500ns", "1.5us").
/// A bare number is rejected (units are mandatory) unless `default_unit_ps` > 0.
/// @returns picoseconds, rounded to nearest. @throws InputError(file, field) on bad text or < 0.
SimTime parse_time_ps(const std::string& text, const std::string& file, const std::string& field,
                      SimTime default_unit_ps = 0);

/// Parses a wall-clock duration (the CLI's --progress-interval, --checkpoint-every): a number
/// with unit ms|s|min|h, e.g. "500ms", "1s", "2min", "1.5h". @returns seconds, > 0.
/// @throws InputError(file, field) on bad text, a missing or unknown unit, or a value <= 0.
double parse_wall_seconds(const std::string& text, const std::string& file, const std::string& field);

/// Parses a size: number with unit B|KB|MB|GB|KiB|MiB|GiB (decimal KB=1000, binary KiB=1024),
/// or a bare integer meaning bytes. @returns bytes. @throws InputError on bad text or < 0.
std::uint64_t parse_bytes(const std::string& text, const std::string& file, const std::string& field);

/// Parses a rate: number with unit bps|Kbps|Mbps|Gbps|Tbps or B/s|KB/s|MB/s|GB/s|GBps (bytes/s x8).
/// @returns bits per second. @throws InputError on bad text, or a value <= 0.
std::uint64_t parse_rate_bps(const std::string& text, const std::string& file,
                             const std::string& field);

/// Parses a boolean spec value: true/false, yes/no, on/off or 1/0, any letter case (YAML 1.1's
/// boolean words plus 0/1). @throws InputError(file, field) naming the accepted words otherwise.
bool parse_bool(const std::string& text, const std::string& file, const std::string& field);

/// Formats picoseconds for humans ("12.345 us").
std::string format_time(SimTime ps);

}  // namespace fabricsim::engine
