/// @file fuzz_main.cpp
/// libFuzzer entry point of one parser's fuzz target: FABRICSIM_FUZZ_FEED names its feed
/// function (feeds.hpp), set per target by fabricsim_add_fuzzer (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/feeds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)fabricsim::fuzz::FABRICSIM_FUZZ_FEED(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
