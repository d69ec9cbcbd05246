#include "tests/support/paths.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fabricsim::testing {

namespace {

/// The value of environment variable `name`, or nullopt when it is unset or empty.
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

std::string source_dir() {
  if (auto d = env("FABRICSIM_SOURCE_DIR")) return *d;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

std::filesystem::path data_dir() { return std::filesystem::path(source_dir()) / "tests" / "data"; }

std::string data(const std::string& rel) { return source_dir() + "/tests/data/" + rel; }

std::string shared_dir() {
  if (auto d = env("FABRICSIM_SHARED_DIR")) return *d;
  return source_dir() + "/../shared";
}

std::optional<std::string> shared_file(const std::string& rel) {
  const std::string p = shared_dir() + "/" + rel;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  return p;
}

std::string fabricsim_binary() { return env("FABRICSIM_BINARY").value_or("fabricsim"); }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace fabricsim::testing
