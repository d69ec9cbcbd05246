#pragma once
/// @file output_path.hpp
/// Where an output file really goes: every writer writes a temporary file next to the target and
/// renames it into place (no partial output), which would replace a symbolic link by a file and a
/// device, pipe or socket by a regular file (as root, `-o /dev/null` replaced the machine's
/// /dev/null).
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "engine/errors.hpp"

namespace fabricsim::jobs {

/// True when `path` (after links) is the null device: writing results there discards them, so
/// the writers skip the file instead of renaming a temporary file onto the device.
inline bool is_null_device(const std::string& path) {
  struct stat a {}, b {};
  return ::stat(path.c_str(), &a) == 0 && S_ISCHR(a.st_mode) && ::stat("/dev/null", &b) == 0 &&
         S_ISCHR(b.st_mode) && a.st_rdev == b.st_rdev;
}

/// Resolves `path` through symbolic links (so the rename replaces the link's target and keeps the
/// link) and refuses a target that exists and is not a regular file, a directory or the null
/// device (callers skip writing to the null device: is_null_device). `field` names
/// the option in the error ("-o", "--summary-json"). @returns the path to write (unchanged when
/// it is not a link). @throws engine::InputError for a device, pipe or socket.
inline std::string resolve_output_file(const std::string& path, const std::string& field) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string out = path;
  // Follow a chain of links by hand: weakly_canonical leaves a dangling link's name unresolved.
  fs::path p = fs::absolute(path, ec);
  for (int hops = 0; hops < 40 && !ec && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : p.parent_path() / t;
    out = fs::weakly_canonical(p, ec).string();
  }
  const fs::file_status st = fs::status(out, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st) && !is_null_device(out)) {
    throw engine::InputError("<cli>", field + " " + path,
                             "is not a regular file (a device, pipe or socket); results are written to a temporary "
                             "file and renamed into place, which would replace it",
                             "give a regular file path (without -q the summary is printed on stdout)");
  }
  return out;
}

}  // namespace fabricsim::jobs
