#pragma once
/// @file checkpoint.hpp
/// Checkpoint files (docs/checkpoint.md). A checkpoint is a directory holding one part per MPI
/// process (`part-<rank>.bin`: that process's engine and LP state, Simulator::save_state) and a
/// manifest (`manifest.bin`, written by rank 0 once every part exists). Each file starts with a
/// 128-byte header (CheckpointHeader) that names the build, the run (spec and seed hash), the
/// process and thread counts, the simulated time, and checksums of itself and of the payload.
/// Every file is written to a temporary name, synced and renamed; the manifest comes last, so a
/// directory without a manifest is an incomplete checkpoint and is refused.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/time.hpp"

namespace fabricsim::engine {

/// Bytes of a checkpoint file header.
inline constexpr std::size_t kCheckpointHeaderBytes = 128;
/// Version of the checkpoint layout (header and Simulator::save_state); a checkpoint of another
/// format version is refused.
inline constexpr std::uint32_t kCheckpointFormatVersion = 1;
/// Bytes of CheckpointHeader::build kept in the file (the rest is cut).
inline constexpr std::size_t kCheckpointBuildChars = 40;

/// What a checkpoint must match to be restarted from: refused otherwise (one line naming what
/// differs).
struct CheckpointIdentity {
  std::string build;            ///< fabricsim version and git commit ("0.9.0 (abc1234)")
  std::uint64_t run_hash = 0;   ///< hash of the resolved spec and seed (jobs layer; PHOLD: its config)
  std::uint32_t processes = 1;  ///< MPI processes
  std::uint32_t threads = 1;    ///< engine threads per process
};

/// The decoded header of a checkpoint file.
struct CheckpointHeader {
  enum Kind : std::uint32_t { kPart = 0, kManifest = 1 };
  std::uint32_t format_version = kCheckpointFormatVersion;
  Kind kind = kPart;
  std::uint32_t part = 0;       ///< the process that wrote a part (0 for the manifest)
  std::uint32_t processes = 1;
  std::uint32_t threads = 1;
  std::uint64_t build_hash = 0;  ///< checkpoint_checksum of the whole build string
  std::uint64_t run_hash = 0;
  SimTime time_ps = 0;           ///< the window boundary: every event before it was handled
  std::uint64_t events = 0;      ///< events handled up to time_ps (this process; all for the manifest)
  std::uint64_t payload_bytes = 0;
  std::uint64_t payload_checksum = 0;
  std::string build;             ///< build string, at most kCheckpointBuildChars bytes
};

/// 64-bit checksum of bytes (a SplitMix64-mixed sum over 8-byte words and the length). Detects
/// truncation and corruption; not a cryptographic hash.
std::uint64_t checkpoint_checksum(std::span<const std::byte> bytes);

/// Decodes and checks the header at the start of `bytes` (at least kCheckpointHeaderBytes):
/// magic, header checksum, format version, kind. Does not look at the payload.
/// @param file names the file in the error message.
/// @throws InputError "FILE: header: ..." for too few bytes, a wrong magic, a header checksum
///   that does not match or another format version. Never reads past `bytes`.
CheckpointHeader parse_checkpoint_header(std::span<const std::byte> bytes, const std::string& file = "<bytes>");

/// Header + payload as a file's bytes: fills payload_bytes, payload_checksum and the header
/// checksum.
std::vector<std::byte> encode_checkpoint(CheckpointHeader h, std::span<const std::byte> payload);

/// Throws the InputError for a header whose build, run, process or thread count differs from `id`
/// (one line naming `file` and what differs); returns if it matches.
void check_checkpoint_identity(const CheckpointHeader& h, const CheckpointIdentity& id, const std::string& file);

/// Writes a checkpoint collectively on `comm`: every process writes its `part` to
/// `dir`/ckpt-t<time_ps>ps/part-<rank>.bin, then rank 0 the manifest and `dir`/latest (the
/// checkpoint's directory name). All files temp + rename.
/// @param events this process's handled events so far.
/// @returns the checkpoint's directory. @throws InputError on every process when any process
///   could not write (naming the first failing path).
std::string write_checkpoint(MPI_Comm comm, const std::string& dir, const CheckpointIdentity& id, SimTime time_ps,
                             std::uint64_t events, std::span<const std::byte> part);

/// A checkpoint part read back for this process.
struct LoadedCheckpoint {
  std::string path;              ///< the checkpoint directory
  SimTime time_ps = 0;
  std::vector<std::byte> payload;  ///< this process's part payload (Simulator::load_state)
};

/// Reads this process's part of the checkpoint at `path` (a checkpoint directory, or a
/// --checkpoint-dir whose `latest` names one) collectively on `comm`, after checking the manifest
/// and the part against `expected` and their checksums.
/// @throws InputError on every process (the lowest failing process's message) for a missing,
///   incomplete, truncated, corrupt or mismatched checkpoint.
LoadedCheckpoint read_checkpoint(MPI_Comm comm, const std::string& path, const CheckpointIdentity& expected);

/// The checkpoint directory `path` names: `path` itself when it holds manifest.bin, else
/// `path`/<contents of path/latest> when that exists, else `path` (which read_checkpoint
/// then refuses).
std::string resolve_checkpoint_path(const std::string& path);

}  // namespace fabricsim::engine
