#pragma once
/// @file errors.hpp
/// Error types: user-input errors (exit 2) and broken invariants (exit 3).
#include <stdexcept>
#include <string>

namespace fabricsim::engine {

/// Bad user input (spec, trace, topology, CLI). `what()` is one line: "FILE: FIELD: problem; fix".
/// Caught in main(), printed, exit code 2, and no output file is left behind.
class InputError : public std::runtime_error {
 public:
  /// @param file  the input file (or "<cli>", "<spec>")
  /// @param field the key, line or record at fault
  /// @param problem what is wrong
  /// @param fix   what the user should do
  InputError(const std::string& file, const std::string& field, const std::string& problem,
             const std::string& fix)
      : std::runtime_error(file + ": " + field + ": " + problem + (fix.empty() ? "" : "; " + fix)),
        file_(file), field_(field) {}
  /// Rebuilds an error from its full message (used to re-raise one process's error on all).
  struct Whole {};
  InputError(Whole, const std::string& message) : std::runtime_error(message) {}
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  std::string field_;
};

/// A broken internal invariant (a bug in fabricsim). Caught in main(), exit code 3.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace fabricsim::engine
