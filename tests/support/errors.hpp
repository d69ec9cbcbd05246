#pragma once
// The check that a call rejects bad input the project's way (engine::InputError, one line).
#include <gtest/gtest.h>

#include <string>

#include "engine/errors.hpp"

/// Runs `stmt`, expects engine::InputError whose what() is one line containing each of the
/// given substrings.
#define EXPECT_INPUT_ERROR(stmt, ...)                                                       \
  do {                                                                                      \
    try {                                                                                   \
      stmt;                                                                                 \
      ADD_FAILURE() << "expected InputError from " #stmt;                                   \
    } catch (const ::fabricsim::engine::InputError& e) {                                    \
      const std::string msg = e.what();                                                     \
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;              \
      for (const std::string& part : {__VA_ARGS__}) {                                       \
        EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg; \
      }                                                                                     \
    }                                                                                       \
  } while (0)
