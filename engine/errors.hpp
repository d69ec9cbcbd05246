#pragma once
/// @file errors.hpp
/// Error types: user-input errors (exit 2) and broken invariants (exit 3).
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fabricsim::engine {

/// `text` with every byte a terminal would not show as itself written as a visible escape
/// "\xNN" (two lowercase hex digits): ASCII control bytes (0x00-0x1f, so also NUL, tab and
/// newline) and DEL (0x7f), C1 controls (U+0080-U+009F) and bytes that are not part of a valid
/// UTF-8 sequence (RFC 3629: no overlong forms, surrogates or code points above U+10FFFF).
/// Printable ASCII and valid UTF-8 text pass unchanged; the result is one line, and applying it
/// again changes nothing. Error messages quote file content through it (InputError does), so a
/// NUL or newline in an input cannot cut or split the message.
inline std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char b) {
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  };
  const auto byte = [&text](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char b = byte(i);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f) {
        escape(b);
      } else {
        out += static_cast<char>(b);
      }
      ++i;
      continue;
    }
    // A multi-byte UTF-8 sequence: its length from the lead byte, the valid range of the second
    // byte (RFC 3629 Sec. 4), continuation bytes 0x80-0xbf.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) len = 2;
    else if (b == 0xe0) { len = 3; lo = 0xa0; }
    else if (b == 0xed) { len = 3; hi = 0x9f; }
    else if (b >= 0xe1 && b <= 0xef) len = 3;
    else if (b == 0xf0) { len = 4; lo = 0x90; }
    else if (b == 0xf4) { len = 4; hi = 0x8f; }
    else if (b >= 0xf1 && b <= 0xf3) len = 4;
    bool ok = len > 0 && i + len <= text.size() && byte(i + 1) >= lo && byte(i + 1) <= hi;
    for (std::size_t k = 2; ok && k < len; ++k) ok = byte(i + k) >= 0x80 && byte(i + k) <= 0xbf;
    if (ok && b == 0xc2 && byte(i + 1) <= 0x9f) ok = false;  // C1 control: escape both bytes
    if (!ok) {
      escape(b);
      ++i;
      continue;
    }
    out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

/// Bad user input (spec, trace, topology, CLI). `what()` is one line: "FILE: FIELD: problem; fix",
/// passed through printable() so that input bytes quoted in it (a NUL, a newline, invalid UTF-8)
/// show as "\xNN" escapes instead of cutting or splitting the line. Caught in main(), printed,
/// exit code 2, and no output file is left behind.
class InputError : public std::runtime_error {
 public:
  /// @param file  the input file (or "<cli>", "<spec>")
  /// @param field the key, line or record at fault
  /// @param problem what is wrong
  /// @param fix   what the user should do
  InputError(const std::string& file, const std::string& field, const std::string& problem,
             const std::string& fix)
      : std::runtime_error(printable(file + ": " + field + ": " + problem + (fix.empty() ? "" : "; " + fix))),
        file_(file), field_(field) {}
  /// Rebuilds an error from its full message (used to re-raise one process's error on all).
  struct Whole {};
  InputError(Whole, const std::string& message) : std::runtime_error(printable(message)) {}
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
