#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint.hpp"
#include "engine/errors.hpp"
#include "tests/fuzz/feeds.hpp"

namespace fabricsim::fuzz {

namespace {

/// Offset of the header checksum (the header's last 8 bytes, docs/checkpoint.md).
constexpr std::size_t kHeadSumOffset = engine::kCheckpointHeaderBytes - 8;

/// Every field but the payload's, which encode_checkpoint recomputes from the payload given.
bool same_fields(const engine::CheckpointHeader& a, const engine::CheckpointHeader& b) {
  return a.format_version == b.format_version && a.kind == b.kind && a.part == b.part &&
         a.processes == b.processes && a.threads == b.threads && a.build_hash == b.build_hash &&
         a.run_hash == b.run_hash && a.time_ps == b.time_ps && a.events == b.events && a.build == b.build;
}

/// A header that parse_checkpoint_header accepted must survive encode_checkpoint and a second
/// parse unchanged; anything else is a finding (abort).
void check_round_trip(const engine::CheckpointHeader& h, std::span<const std::byte> bytes) {
  const auto payload = bytes.subspan(engine::kCheckpointHeaderBytes);
  const auto again = engine::encode_checkpoint(h, payload);
  const auto h2 = engine::parse_checkpoint_header(again, "<re-encoded>");
  if (!same_fields(h, h2) || h2.payload_bytes != payload.size() ||
      h2.payload_checksum != engine::checkpoint_checksum(payload)) {
    std::abort();
  }
}

}  // namespace

Outcome feed_checkpoint(std::string_view text) {
  const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
  Outcome outcome;
  try {
    check_round_trip(engine::parse_checkpoint_header(bytes, "fuzz.bin"), bytes);
  } catch (const engine::InputError& e) {
    outcome = std::string(e.what());
  }
  // The header checksum stops almost every mutation at the first check: parse a copy whose
  // checksum is made right as well, so that the fuzzer reaches the field checks behind it.
  if (bytes.size() >= engine::kCheckpointHeaderBytes) {
    std::vector<std::byte> fixed(bytes.begin(), bytes.end());
    const std::uint64_t sum = engine::checkpoint_checksum(std::span<const std::byte>(fixed).first(kHeadSumOffset));
    std::memcpy(fixed.data() + kHeadSumOffset, &sum, sizeof sum);
    try {
      check_round_trip(engine::parse_checkpoint_header(fixed, "fuzz.bin"), fixed);
    } catch (const engine::InputError&) {
      // refused: the outcome is the unmodified input's
    }
  }
  return outcome;
}

}  // namespace fabricsim::fuzz
