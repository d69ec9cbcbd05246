#pragma once
/// @file chakra_writer.hpp
/// Writes a models::Workload as Chakra execution traces, one file per rank (`PREFIX.<rank>.et`),
/// in Chakra's framing: varint32-length-delimited protobuf records, a GlobalMetadata first, then
/// one Node per DAG node (io/et_def.proto, wire-compatible with upstream mlcommons/chakra), and a
/// comm-group file `PREFIX.comm_groups.json` (ASTRA-sim `--comm-group-configuration` format,
/// `{"<pg_name>": [ranks...]}`) for every communicator other than the world that a collective
/// node names (an unused communicator of the workload, e.g. an inference job's DP groups, is not
/// written; the reader creates groups on first use, so the round trip is unchanged).
///
/// Node mapping (the inverse of io/chakra_reader.hpp): id = index in the rank's program (the
/// programs are topologically ordered, so the reader's "smallest ready id first" order gives
/// back the same order); deps -> ctrl_deps; compute -> COMP_NODE with duration_micros =
/// round(duration_ps / 1e6) (the ET schema stores whole microseconds; sub-µs precision is lost);
/// collectives -> COMM_COLL_NODE with int64 attrs comm_type (CollectiveCommType), comm_size
/// (bytes) and string pg_name (empty for the world); send/recv -> COMM_SEND_NODE/COMM_RECV_NODE
/// with comm_dst/comm_src, comm_size and comm_tag. Every node also carries bool is_cpu_op = false
/// as upstream's converters write it.
#include <string>

#include "models/core/workload.hpp"

namespace fabricsim::io {

/// Writes `w` to PREFIX.<rank>.et (+ PREFIX.comm_groups.json when a node uses a non-world group).
/// @returns the comm-group file's path, or "" if none was needed.
/// All files are written under temporary names and renamed into place only when every one was
/// written whole; on any failure (disk full, file size limit) none is left behind.
/// @throws engine::InputError if a file cannot be written (names the file).
std::string write_chakra(const models::Workload& w, const std::string& prefix);

}  // namespace fabricsim::io
