/// @file gen_checkpoint_fuzz_seeds.cpp
/// Writes the seed corpus of the checkpoint fuzz target (tests/data/bad/fuzz/checkpoint/) with
/// the real writer (engine::write_checkpoint on one process): the part and manifest files as
/// written, plus copies broken in one way each. Not part of the build; run from the repo root:
///   mpicxx -std=c++20 -I. scripts/gen_checkpoint_fuzz_seeds.cpp engine/checkpoint.cpp -o /tmp/gen
///   /tmp/gen tests/data/bad/fuzz/checkpoint
#include <mpi.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/checkpoint.hpp"

namespace {

std::vector<char> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const std::filesystem::path& p, const std::vector<char>& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  namespace fs = std::filesystem;
  const fs::path out = argc > 1 ? argv[1] : "tests/data/bad/fuzz/checkpoint";
  const fs::path tmp = fs::temp_directory_path() / "fabricsim-ckpt-seeds";
  fs::remove_all(tmp);
  fs::create_directories(out);
  using fabricsim::engine::CheckpointIdentity;
  // A short build string, and one longer than the 40 bytes the header keeps.
  const CheckpointIdentity a{"0.9.0 (abc1234)", 0x1234'5678'9abc'def0ull, 1, 4};
  const CheckpointIdentity b{"0.9.0-dev+a-build-description-longer-than-40-bytes (0c81c20)", 42, 1, 1};
  const std::string payload = "lp state: 24 bytes here!";
  const auto bytes = std::as_bytes(std::span(payload.data(), payload.size()));
  const fs::path da = fabricsim::engine::write_checkpoint(MPI_COMM_SELF, (tmp / "a").string(), a, 5'000'000, 77, bytes);
  const fs::path db = fabricsim::engine::write_checkpoint(MPI_COMM_SELF, (tmp / "b").string(), b, 0, 0, {});
  const auto part = slurp(da / "part-0.bin");
  put(out / "ok-part-t5us-4threads.bin", part);
  put(out / "ok-manifest-t5us.bin", slurp(da / "manifest.bin"));
  put(out / "ok-part-t0-long-build-empty-payload.bin", slurp(db / "part-0.bin"));
  put(out / "ok-manifest-t0-long-build.bin", slurp(db / "manifest.bin"));
  // Broken copies: the header alone is checked, so a cut payload still parses; a cut header not.
  put(out / "bad-truncated-header-100-bytes.bin", std::vector<char>(part.begin(), part.begin() + 100));
  put(out / "bad-empty.bin", {});
  auto magic = part;
  magic[0] = 'X';
  put(out / "bad-wrong-magic.bin", magic);
  auto flipped = part;
  flipped[48] ^= 1;  // time_ps
  put(out / "bad-header-checksum-bit-flip.bin", flipped);
  // Right checksums, wrong fields (encode_checkpoint writes any header it is given).
  using fabricsim::engine::CheckpointHeader;
  const auto encoded = [&](auto edit) {
    CheckpointHeader h;
    h.processes = 2;
    h.threads = 2;
    h.build = a.build;
    h.time_ps = 1000;
    edit(h);
    const auto e = fabricsim::engine::encode_checkpoint(h, bytes);
    return std::vector<char>(reinterpret_cast<const char*>(e.data()), reinterpret_cast<const char*>(e.data()) + e.size());
  };
  put(out / "ok-part-1-of-2.bin", encoded([](CheckpointHeader& h) { h.part = 1; }));
  put(out / "bad-format-version-2.bin", encoded([](CheckpointHeader& h) { h.format_version = 2; }));
  put(out / "bad-kind-7.bin", encoded([](CheckpointHeader& h) { h.kind = static_cast<CheckpointHeader::Kind>(7); }));
  put(out / "bad-part-2-of-2.bin", encoded([](CheckpointHeader& h) { h.part = 2; }));
  put(out / "bad-zero-threads.bin", encoded([](CheckpointHeader& h) { h.threads = 0; }));
  put(out / "bad-negative-time.bin", encoded([](CheckpointHeader& h) { h.time_ps = -1; }));
  MPI_Finalize();
  fs::remove_all(tmp);
  return 0;
}
