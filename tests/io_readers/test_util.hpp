#pragma once
// Helpers shared by the io reader tests: locating tests/data, scratch directories, error checks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "engine/errors.hpp"

namespace fabricsim::test {

/// tests/data: $FABRICSIM_SOURCE_DIR/tests/data (set by ctest), else relative to this file.
inline std::filesystem::path data_dir() {
  if (const char* src = std::getenv("FABRICSIM_SOURCE_DIR"); src != nullptr && *src != '\0') {
    return std::filesystem::path(src) / "tests" / "data";
  }
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "data";
}

/// A fresh, empty scratch directory for one test (removed on destruction).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("fabricsim_io_" + tag + "_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace fabricsim::test

/// Runs `stmt`, expects engine::InputError whose what() contains each of the given substrings.
#define EXPECT_INPUT_ERROR(stmt, ...)                                                   \
  do {                                                                                  \
    try {                                                                               \
      stmt;                                                                             \
      ADD_FAILURE() << "expected InputError from " #stmt;                               \
    } catch (const ::fabricsim::engine::InputError& e) {                                \
      const std::string msg = e.what();                                                 \
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;          \
      for (const std::string& part : {__VA_ARGS__}) {                                   \
        EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg; \
      }                                                                                 \
    }                                                                                   \
  } while (0)
