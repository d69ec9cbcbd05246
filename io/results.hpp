#pragma once
/// @file results.hpp
/// Result records of a run, as written to HDF5 and the summary JSON. Plain data; times in ps.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/time.hpp"

namespace fabricsim::io {

/// Run metadata (HDF5 group /meta, attributes).
struct RunMeta {
  std::string spec_text;     ///< the effective spec (after --set), YAML
  std::string version;       ///< fabricsim version
  std::string git_commit;    ///< commit the binary was built from
  std::string workload;      ///< workload path / prefix
  std::uint64_t seed = 0;
  std::uint32_t processes = 1;
  std::uint32_t threads = 1;
  std::uint32_t ranks = 0;
  double wall_s = 0;
  std::uint64_t events = 0;
  engine::SimTime simulated_time_ps = 0;
  engine::SimTime sample_interval_ps = 0;  ///< bin width of /links and /queues (ps); schema 2
  /// Packet-fabric totals (schema 3), name -> value, e.g. {"pause_frames", 12}; written as
  /// /meta attributes "fabric_<name>" (uint64). Empty at the coarse rungs.
  std::vector<std::pair<std::string, std::uint64_t>> fabric_counters;
  /// Schema 4: whether the per-GPU memory estimate (generated workloads, jobs/memory_estimate.hpp)
  /// fits the GPU's HBM: 1 fits, 0 does not, -1 no estimate (trace files; the /meta attributes
  /// fits_memory, memory_estimate_bytes and memory_capacity_bytes are then absent).
  std::int32_t fits_memory = -1;
  std::uint64_t memory_estimate_bytes = 0;  ///< peak estimate over pipeline ranks (bytes), when fits_memory >= 0
  std::uint64_t memory_capacity_bytes = 0;  ///< the GPU's HBM (bytes), when fits_memory >= 0
};

/// Per-rank summary (dataset /ranks). Ordered by rank.
struct RankRecord {
  std::uint32_t rank = 0;
  engine::SimTime finish_ps = 0;         ///< when the rank's DAG completed
  engine::SimTime compute_ps = 0;        ///< time with compute running
  engine::SimTime comm_ps = 0;           ///< time with >= 1 communication op in flight
  engine::SimTime exposed_comm_ps = 0;   ///< communication time not overlapped by compute
  // Schema 4 (appended; the /ranks table is not part of the results digest):
  /// exposed_comm_ps by what the communication serves, in models::CommKind order: TP, DP, EP,
  /// PP, CP, other. Time with communication of several kinds in flight (and no compute) is split
  /// equally among them, leftover picoseconds to the first kinds in that order, so the six add
  /// up to exposed_comm_ps exactly (docs/hdf5_schema.md, "/ranks").
  std::array<engine::SimTime, 6> exposed_kind_ps{};
  /// Part of exposed_kind_ps[PP] during which every communication op in flight is a receive
  /// from a neighbour pipeline stage: the stage waits for its input.
  engine::SimTime pp_wait_ps = 0;
  /// The pipeline bubble: pp_wait_ps plus the time the rank has nothing in flight at all
  /// (simulated_time - compute_ps - exposed_comm_ps: after its own DAG finished until the last
  /// rank's did). Filled when the ranks are gathered (it needs the simulated time).
  engine::SimTime bubble_ps = 0;
  // Schema 5: the rank's job in a `jobs:` spec (index in the spec's list), -1 for a single-job
  // spec or a GPU no job holds.
  std::int32_t job = -1;
};

/// Per-collective record (dataset /collectives). Ordered by (group, instance).
struct CollectiveRecord {
  std::uint32_t group = 0;       ///< communicator index (Workload::groups)
  std::uint32_t instance = 0;    ///< n-th collective on that communicator
  std::string op;                ///< nccl-tests name, e.g. "all_reduce"
  std::uint64_t bytes = 0;       ///< nccl-tests "size"
  std::uint32_t ranks = 0;       ///< communicator size
  engine::SimTime start_ps = 0;  ///< earliest start over the ranks
  engine::SimTime end_ps = 0;    ///< latest completion over the ranks
  double algbw_GBps = 0;         ///< bytes / (end-start), GB/s = 1e9 B/s
  double busbw_GBps = 0;         ///< algbw * nccl-tests factor
  // Schema 2 (appended; not part of the results digest):
  std::string algorithm;         ///< planner's algorithm, e.g. "Ring", "Tree" (at most 16 chars)
  std::string protocol;          ///< "LL", "LL128", "Simple" (at most 16 chars)
  std::uint32_t channels = 0;    ///< channels the call uses
  // Schema 5 (not part of the results digest):
  std::int32_t job = -1;         ///< the communicator's job (`jobs:` specs), -1 otherwise
};

/// Per-flow record (dataset /flows): one point-to-point transfer. Ordered by flow_id.
struct FlowRecord {
  std::uint64_t flow_id = 0;     ///< (src rank << 32) | per-source counter: unique, deterministic
  std::uint32_t src = 0;         ///< source rank
  std::uint32_t dst = 0;         ///< destination rank
  std::uint64_t bytes = 0;
  engine::SimTime start_ps = 0;  ///< first packet handed to the NIC/NVLink port
  engine::SimTime end_ps = 0;    ///< last byte received
  engine::SimTime fct_ps = 0;    ///< end - start
  // Schema 2 (appended; not part of the results digest):
  engine::SimTime first_byte_ps = 0;  ///< first packet fully received at the destination
  engine::SimTime ideal_ps = 0;       ///< bytes / bottleneck rate + path latency (no queueing)
  double slowdown = 0;                ///< fct / ideal (>= 1 up to store-and-forward of one packet per hop)
  std::int32_t first_spine = -1;      ///< ECMP choice: spine index the flow crossed, -1 = none
  std::uint32_t group = 0xFFFFFFFFu;  ///< collective's communicator, 0xFFFFFFFF = point-to-point
  std::uint32_t instance = 0;         ///< collective instance on that communicator (0 for p2p)
  // Schema 5 (not part of the results digest):
  std::int32_t job = -1;              ///< the source rank's job (`jobs:` specs), -1 otherwise
};

/// One bin of one directed link's time series (dataset /links). Sparse: bins without traffic are
/// absent. Ordered by (link_id, bin_start_ps).
struct LinkBinRecord {
  std::uint32_t link_id = 0;       ///< directed port id (docs/hdf5_schema.md)
  std::uint32_t from_node = 0;     ///< LP id of the transmitting node
  std::uint32_t to_node = 0;       ///< LP id of the receiving node
  std::uint32_t tier = 0;          ///< 0 nvlink, 1 nic (GPU <-> leaf), 2 fabric (switch <-> switch below core), 3 core
  engine::SimTime bin_start_ps = 0;
  std::uint64_t bytes = 0;         ///< bytes serialized onto the link during the bin
  double utilization = 0;          ///< bytes * 8 / (rate * bin width), 0..1
  // Schema 3 (packet fabric):
  engine::SimTime pause_ps = 0;    ///< time the transmitter was paused by PFC in the bin (ps)
  std::uint64_t pfc_pauses = 0;    ///< PFC XOFF frames that paused this link's transmitter in the bin
  std::uint64_t ecn_marks = 0;     ///< packets CE-marked at this egress in the bin
  std::uint64_t drops = 0;         ///< packets dropped at this egress in the bin
};

/// One bin of one switch egress queue (dataset /queues). Sparse: only bins in which a packet
/// arrived for the port. Ordered by (link_id, bin_start_ps).
struct QueueBinRecord {
  std::uint32_t link_id = 0;          ///< directed port id, as in /links
  engine::SimTime bin_start_ps = 0;
  std::uint64_t max_queue_bytes = 0;  ///< largest backlog ahead of an arriving packet in the bin
};

/// Totals over the run of one directed link out of a switch egress port (dataset /link_totals,
/// schema 5; the summary's per-link lines). Ordered by link_id.
struct LinkTotalRecord {
  std::uint32_t link_id = 0;         ///< directed port id, as in /links
  std::uint32_t from_node = 0;       ///< LP id of the transmitting switch
  std::uint32_t to_node = 0;         ///< LP id of the receiving node
  std::uint32_t tier = 0;            ///< as LinkBinRecord::tier
  std::uint64_t bytes = 0;           ///< data payload bytes serialized over the run
  double utilization = 0;            ///< bytes * 8 / (link rate * simulated time), 0..1
  engine::SimTime pause_ps = 0;      ///< time PFC held the transmitter (intervals closed by an XON)
  std::uint64_t pfc_pauses = 0;      ///< XOFF frames that paused the transmitter
  std::uint64_t ecn_marks = 0;       ///< data packets CE-marked at this egress
  std::uint64_t drops = 0;           ///< packets dropped that were bound for this egress
  std::uint64_t link_retransmits = 0;  ///< link-level retry units sent again (switch.link_retry)
  /// XOFF frames the switch sent on this port: they pause the reverse link (to_node -> from_node),
  /// e.g. a leaf pausing a NIC.
  std::uint64_t pfc_sent = 0;
  std::uint32_t jobs = 0;            ///< `jobs:` specs: how many jobs' data crossed the link
  std::uint64_t job_mask = 0;        ///< bit j: job j's data crossed it (jobs 0..63)
};

/// One entry of the spec's `faults:` list as simulated (dataset /faults, schema 5). Ordered by
/// index.
struct FaultRecord {
  std::uint32_t index = 0;          ///< position in the spec's faults: list (a nic_down or switch_down entry has one row per link)
  std::string kind;                 ///< "link_down", "ber", "degrade", "nic_down" or "switch_down"
  std::uint32_t node_a = 0, node_b = 0;  ///< LP ids of the link's two ends (for nic_down / switch_down: the GPU or switch, then its peer)
  engine::SimTime time_ps = 0;      ///< start
  engine::SimTime until_ps = -1;    ///< end (exclusive), -1 = the rest of the run
  engine::SimTime reconverge_ps = 0;  ///< link_down: detect + converge
  double ber = 0;                   ///< ber: the bit-error rate
  std::uint64_t rate_bps = 0;       ///< degrade: the lower rate
};

/// One job of a `jobs:` spec (dataset /jobs, schema 5). Ordered by job.
struct JobRecord {
  std::uint32_t job = 0;                     ///< index in the spec's jobs list
  std::string name;                          ///< jobs[i].name (at most 24 characters are written)
  std::uint32_t gpus = 0;                    ///< GPUs it runs on
  engine::SimTime start_ps = 0;              ///< jobs[i].start
  std::uint32_t iterations = 1;              ///< iterations run
  engine::SimTime finish_ps = 0;             ///< its last rank's finish
  engine::SimTime iteration_time_ps = 0;     ///< (finish - start) / iterations
  engine::SimTime alone_iteration_time_ps = -1;  ///< the job alone (run --isolated), -1 unknown
  double slowdown = 0;                       ///< iteration time / alone, 0 unknown
  double compute_ps = 0, comm_ps = 0, exposed_comm_ps = 0;  ///< per rank and iteration, mean
};

}  // namespace fabricsim::io
