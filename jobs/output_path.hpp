#pragma once
/// @file output_path.hpp
/// Where an output file really goes: every writer writes a temporary file next to the target and
/// renames it into place (no partial output), which would replace a symbolic link by a file and a
/// device, pipe or socket by a regular file (as root, `-o /dev/null` replaced the machine's
/// /dev/null).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <string>
#include <vector>

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

/// Checks an output path before anything runs: not empty, not a directory, in an existing
/// writable directory (a probe file is created and removed: access() says yes to root on
/// read-only and pseudo file systems), and not one of `inputs`. `path` is resolved through links
/// (resolve_output_file). `field` names the option in the error ("-o", "--report").
/// @throws engine::InputError ("<cli>", field and path) naming what is wrong.
inline void check_output_path(std::string& path, const std::string& field, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw engine::InputError("<cli>", field, "the path is empty", "give a file name");
  path = resolve_output_file(path, field);
  if (is_null_device(path)) return;  // discarded: nothing is created next to it
  const fs::path abs = fs::absolute(path);
  if (fs::is_directory(abs)) throw engine::InputError("<cli>", field + " " + path, "is a directory", "give a file name");
  const fs::path dir = abs.parent_path();
  if (!fs::is_directory(dir)) {
    throw engine::InputError("<cli>", field + " " + path, "directory " + dir.string() + " does not exist",
                     "create it or choose another output path");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw engine::InputError("<cli>", field + " " + path, "directory " + dir.string() + " is not writable",
                     "choose a writable directory");
  }
  {
    // access() says yes to root everywhere, also on read-only and pseudo file systems (/proc,
    // /sys); creating and removing a probe file is the test that the results can be written.
    const fs::path probe = dir / (".fabricsim-probe." + std::to_string(::getpid()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      const int e = errno;
      if (e != EEXIST) {
        throw engine::InputError("<cli>", field + " " + path,
                         "cannot create a file in " + dir.string() + " (" + std::strerror(e) + ")",
                         "choose a writable directory on a regular file system");
      }
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(abs, ec);
  for (const auto& in : inputs) {
    if (in.empty()) continue;
    std::error_code ec2;
    for (const fs::path& cand : {fs::path(in), fs::path(in + ".0.et")}) {
      if (fs::exists(cand, ec2) && fs::weakly_canonical(fs::absolute(cand), ec2) == canon) {
        throw engine::InputError("<cli>", field + " " + path, "is the same file as " + cand.string() + " (an input or the other output)",
                         "choose another output path");
      }
    }
  }
}

}  // namespace fabricsim::jobs
