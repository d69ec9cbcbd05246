#pragma once
/// @file simai_reader.hpp
/// Reader for SimAI / AICB workload text files (the input of SimAI's astra-sim workload layer).
///
/// Format (see docs: shared/reference/formats.md 2a):
///  * line 1: policy token, then `key: value` pairs in any order: `model_parallel_NPU_group:` (TP),
///    `ep:`, `pp:`, `vpp:`, `ga:`, `all_gpus:`, `checkpoints: n l1..ln`,
///    `checkpoint_initiates: n l1..ln`, and `pp_comm` / `pp_comm:` (bytes). Unknown `key:` pairs
///    are skipped; values 0 for ep/pp/vpp/ga mean 1.
///  * line 2: number of layer lines L (must equal the number of non-blank lines that follow).
///  * L layer lines of 12 whitespace-separated columns (13 for HYBRID_CUSTOMIZED, the last one is
///    ignored): name, reserved, fwd_compute_ns, fwd_comm_type, fwd_comm_bytes, ig_compute_ns,
///    ig_comm_type, ig_comm_bytes, wg_compute_ns, wg_comm_type, wg_comm_bytes, wg_update_ns.
///    Compute times are ns (integer; a decimal fraction is accepted and rounded to ps) and become
///    ps (x1000). Sizes are bytes and are passed through unchanged as WorkNode::bytes.
///  * Comm types: NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL (modeled
///    as an AllReduce of the same size), BROADCAST (root = group index 0), each optionally suffixed
///    `_EP` or `_DP_EP`.
///
/// World size W = all_gpus from the file, or the caller's override (CLI --gpus); both given and
/// different is an error.
///
/// Communicators (groups[0] is always the world "world"; the others are created on first use):
///  * TP (`tp<i>`): consecutive blocks of tp ranks: {i*tp .. i*tp+tp-1}.
///  * DP (`dp<t>`): the W/tp ranks with TP index t: {t, t+tp, t+2tp, ...}.
///  * EP (`ep<t>.<k>`): consecutive ep members of a DP group (DP positions k*ep .. k*ep+ep-1).
///  * DP_EP (`dpep<t>.<j>`): the DP members with the same EP index j (DP positions j, j+ep, ...).
///  Unsuffixed comm types use TP in the fwd/ig columns and DP in the wg column; `_EP` and `_DP_EP`
///  select the EP / DP_EP group of the rank. tp must divide W; ep must divide W/tp when an
///  `_EP`/`_DP_EP` collective is used. Groups of size 1 are legal (the executor completes them
///  instantly).
///
/// DAG per rank (all ranks get the same structure; only the communicators differ):
///  * MICRO and DATA: for each layer in file order: compute(wg_compute) -> collective(wg comm, DP
///    group, or EP/DP_EP by suffix); one serial chain. fwd/ig columns are ignored.
///  * Transformer policies (HYBRID_TRANSFORMER, HYBRID_TRANSFORMER_FWD_IN_BCKWD, MODEL,
///    HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED, DISTRIBUTED_INFERENCE): repeat ga
///    micro-batches, each one serial chain continuing the previous one:
///      forward, layers 0..L-1: compute(fwd) -> blocking collective(fwd comm, TP unless suffixed);
///      backward, layers L-1..0 (not for DISTRIBUTED_INFERENCE): compute(ig) -> blocking
///      collective(ig comm, TP unless suffixed) -> compute(wg); on the last micro-batch only, the
///      layer's wg collective (DP unless suffixed) is issued asynchronously after compute(wg) — the
///      chain does not wait for it — and compute(wg_update) depends on that collective (on
///      compute(wg) when the layer has no wg collective). The DAG ends when all nodes are done.
///  * HYBRID_DLRM and HYBRID_DLRM_ENHANCED are rejected (unsupported).
///  * A NONE comm type or a size of 0 produces no collective node; a compute time of 0 produces no
///    compute node (the chain just continues from the previous node).
///  * Node names: "L<layer>.<fwd|ig|wg>.<compute|comm>" and "L<layer>.wg.update", prefixed with
///    "mb<m>." when ga > 1. source_id is the 1-based line number of the layer in the file.
///  * Written-out micro-batches (AICB's layout: head lines, ga blocks with the same names and comm
///    columns, tail lines): with pp = 1 the list runs once, as SimAI's Workload.cc runs it (a
///    warning says so); ga repeats only files without that layout.
///
/// pp > 1 (docs/input_formats.md, "Pipeline stages"): rank = t + tp * (s + pp * d); DP, EP and
/// DP_EP groups are per stage; every stage runs the file's micro-batch block cut into vpp chunks,
/// in Megatron-LM's 1F1B / interleaved 1F1B order, receiving pp_comm bytes from the previous
/// virtual stage before each chunk's forward and sending them on after it (backward mirrored);
/// head lines' forward before the pipeline, tail lines after it, then the tail's and head's
/// backward. The result has one shared program per stage (Workload::program_of, group slots =
/// TP, DP, EP, DP_EP; peer slots = previous, next stage).
///
/// Limitations: activation recomputation (`checkpoints`, the FWD_IN_BCKWD recompute) and
/// HYBRID_CUSTOMIZED's per-layer policy column are not modeled.
#include <cstdint>
#include <istream>
#include <string>

#include "models/core/workload.hpp"

namespace fabricsim::io {

/// Reads a SimAI/AICB workload text file into a Workload (format "simai").
/// @param path           the workload .txt file
/// @param gpus_override  world size from the CLI (--gpus); 0 = take `all_gpus` from the file.
///                       Required when the file has no `all_gpus`; must agree with it otherwise.
/// @return one program per rank (pp = 1) or one shared program per stage (pp > 1; see file
///         comment for the DAG), compute durations in ps, sizes in bytes, groups[0] = world.
/// @throws engine::InputError naming file:line, the column/key and a fix, for: unreadable file,
///         malformed header, missing/conflicting world size, tp/ep not dividing the world, tp x pp
///         not dividing the world, pp > 1 without pp_comm or with a non-transformer policy, vpp
///         above a micro-batch's lines, vpp > 1 with ga not a multiple of pp, unsupported policy, wrong layer count, wrong column count, non-numeric or negative
///         values, unknown comm types.
models::Workload read_simai(const std::string& path, std::uint32_t gpus_override);

/// As read_simai(path, ...), reading the file's content from `in`; `path` names it in messages.
/// @throws engine::InputError as read_simai(path, ...), except for an unreadable file.
models::Workload read_simai(std::istream& in, const std::string& path, std::uint32_t gpus_override);

}  // namespace fabricsim::io
