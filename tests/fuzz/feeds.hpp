#pragma once
/// @file feeds.hpp
/// One function per parser that fuzzing covers: each feeds `bytes` to the parser's real entry
/// point and returns what happened. Shared by the libFuzzer binaries (fuzz_main.cpp, one per
/// parser) and fuzz_regress_test (every seed and regression input under tests/data/bad/fuzz).
///
/// A feed catches engine::InputError, the one way a parser may refuse input, and nothing else:
/// any other exception, a crash, a leak or undefined behaviour is a finding.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fabricsim::fuzz {

/// nullopt: the input was accepted; otherwise the InputError message (one line).
using Outcome = std::optional<std::string>;

/// Chakra ET (io/chakra_reader): up to kMaxChakraRanks rank files, separated by kChakraRankSep,
/// written to a private temporary folder as PREFIX.<rank>.et and read with read_chakra(PREFIX).
/// An input that starts with kChakraGpusPrefix, digits and a newline reads with that world size
/// (workload.gpus, at most kMaxChakraGpus); otherwise the world size comes from the files.
Outcome feed_chakra(std::string_view bytes);
/// SimAI/AICB workload text (io/simai_reader): world size from the file (gpus_override 0), and
/// when it names none (AICB files), 8 GPUs.
Outcome feed_simai(std::string_view bytes);
/// YAML spec (jobs/spec): the text up to a line "#--set", then one `--set key=value` per line.
Outcome feed_spec(std::string_view bytes);
/// Topology file (models/topology/topology_file), either format, default cluster keys.
Outcome feed_topology(std::string_view bytes);
/// NCCL topology XML (simccl/nccl_topo), default compute capability 90.
Outcome feed_nccl_topo(std::string_view bytes);
/// MSCCL-IR XML algorithm (simccl/custom_schedule).
Outcome feed_msccl(std::string_view bytes);
/// TE-CCL JSON schedule (simccl/custom_schedule).
Outcome feed_teccl(std::string_view bytes);
/// Kernel CSV (kernels/): the first byte picks the reader (mod 3: 0 kernel database
/// KernelDb::load_more, 1 measured GEMM table, 2 measured context-attention table), the rest is
/// the CSV text; parsed tables are then looked up once per grid.
Outcome feed_kernels(std::string_view bytes);
/// Partition file (partition/): the first line gives the run's "lps procs threads" (clamped to
/// 1..4096, 1..64, 1..64), the rest is the file read by read_partition.
Outcome feed_partition(std::string_view bytes);
/// Checkpoint file header (engine/checkpoint: parse_checkpoint_header), the bytes as a part or
/// manifest file holds them; an accepted header must come back unchanged from encode_checkpoint.
/// The same bytes with the header checksum made right are parsed too (for coverage behind the
/// checksum; that outcome is not returned).
Outcome feed_checkpoint(std::string_view bytes);

/// Separator between rank files in a feed_chakra input.
inline constexpr std::string_view kChakraRankSep = "\n--fabricsim-next-rank--\n";
/// Most rank files one feed_chakra input makes.
inline constexpr int kMaxChakraRanks = 4;
/// Start of a feed_chakra input that gives the world size (ChakraReadOptions::world_size).
inline constexpr std::string_view kChakraGpusPrefix = "--fabricsim-gpus=";
/// Largest world size a feed_chakra input may give (larger is cut to it): a one-rank trace is
/// replicated to every rank, so this bounds one input's work.
inline constexpr std::uint32_t kMaxChakraGpus = 256;

}  // namespace fabricsim::fuzz
