#include "jobs/run.hpp"

#include <algorithm>
#include <unistd.h>
#include <fcntl.h>
#include <cstring>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "engine/errors.hpp"
#include "engine/heap_pages.hpp"
#include "engine/rng.hpp"
#include "engine/units.hpp"
#include "io/chakra_reader.hpp"
#include "io/digest.hpp"
#include "io/hdf5_writer.hpp"
#include "io/simai_reader.hpp"
#include "jobs/generators.hpp"
#include "jobs/output_path.hpp"
#include "jobs/spec.hpp"
#include "jobs/trace.hpp"
#include "kernels/compute_time.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_model.hpp"
#include "models/rank/gpu_rank.hpp"
#include "models/packet/switch_lp.hpp"
#include "partition/partition.hpp"
#include "simccl/custom_planner.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/planner_factory.hpp"

namespace fabricsim::jobs {

using engine::InputError;
namespace fs = std::filesystem;

models::Workload load_workload(const std::string& path, const std::string& format,
                               std::uint32_t gpus, const std::string& comm_groups) {
  if (path.empty()) {
    throw InputError("<spec>", "workload.path", "no workload given",
                     "pass --workload PATH or set workload.path in the spec");
  }
  std::string fmt_used = format;
  if (fmt_used == "auto") {
    if (io::looks_like_chakra_prefix(path)) {
      fmt_used = "chakra";
    } else if (fs::is_regular_file(path)) {
      fmt_used = "simai";
    } else {
      throw InputError(path, "workload.path", "no such file, and no Chakra ET files " + path + ".0.et ...",
                       "give a SimAI/AICB workload file or a Chakra ET prefix (files PREFIX.<rank>.et)");
    }
  }
  if (fmt_used == "chakra") {
    const std::string prefix = fs::exists(path + ".0.et") ? path : io::chakra_prefix_of(path);
    return io::read_chakra(prefix, comm_groups);
  }
  return io::read_simai(path, gpus);
}

namespace {

/// What the workload generator reported (for the MFU line of the summary).
struct GenInfo {
  bool used = false;
  GenStats stats;
  double peak_flops = 0;  ///< dense peak of the GPU for the GEMM dtype (FLOP/s)
  std::uint32_t iterations = 1;  ///< workload.generator.iterations
  bool fp8 = false;              ///< the peak is the FP8 one
  InferStats infer;              ///< inference workloads (infer.used)
  std::uint32_t batch = 0, prompt_tokens = 0, output_tokens = 0, replicas = 0;  ///< inference config
};

/// The spec's workload: generated when workload.generator.model is set, else read from a file.
models::Workload load_spec_workload(const Spec& spec, GenInfo* info) {
  if (spec.generator.count("model") == 0) {
    return load_workload(spec.workload_path, spec.workload_format, spec.workload_gpus, spec.comm_groups);
  }
  if (!spec.workload_path.empty()) {
    throw InputError(spec.file_of_any({"workload.path", "workload.generator.model"}), "workload.path", "both workload.path and workload.generator.model are set",
                     "remove one of them (the generator builds the workload itself)");
  }
  const TrainConfig cfg = train_config_from_spec(spec);
  const std::uint64_t world = std::uint64_t{cfg.tp} * cfg.pp * cfg.dp * cfg.cp;
  if (spec.workload_gpus != 0 && spec.workload_gpus != world) {
    throw InputError(spec.file_of_any({"workload.gpus", "workload.generator.tp", "workload.generator.pp",
                                       "workload.generator.dp", "workload.generator.cp"}),
                     "workload.gpus",
                     fmt::format("is {} but the generated workload has TP·PP·DP·CP = {}·{}·{}·{} = {} ranks",
                                 spec.workload_gpus, cfg.tp, cfg.pp, cfg.dp, cfg.cp, world),
                     "drop --gpus/workload.gpus or make tp*pp*dp*cp equal to it");
  }
  const auto db = load_kernel_db(spec.generator.count("kernel_db") ? spec.generator.at("kernel_db") : "");
  Generated g = generate_training(cfg, db);
  if (info) {
    info->used = true;
    info->stats = g.stats;
    info->peak_flops = kernels::find_gpu(cfg.gpu).peak_flops(cfg.dtype);
    info->iterations = std::max<std::uint32_t>(1, cfg.iterations);
    info->fp8 = cfg.dtype == kernels::Dtype::kFp8;
    info->infer = std::move(g.infer);
    info->batch = cfg.batch;
    info->prompt_tokens = cfg.prompt_tokens;
    info->output_tokens = cfg.output_tokens;
    info->replicas = cfg.dp;
  }
  return std::move(g.workload);
}

double now_s() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count()) /
         1e6;
}

void check_workload(const models::Workload& w) {
  // Communicators may only name ranks of the workload (readers check their own group files;
  // this covers every source, in-memory workloads and generators included).
  for (const auto& g : w.groups) {
    std::vector<char> seen(w.ranks, 0);
    for (std::uint32_t r : g.ranks) {
      if (r >= w.ranks) {
        throw InputError(w.source, "communicator '" + g.name + "'",
                         "names rank " + std::to_string(r) + " but the workload has ranks 0.." +
                             std::to_string(w.ranks - 1),
                         "list only ranks below " + std::to_string(w.ranks) + " in the group definition");
      }
      if (seen[r]++) {
        throw InputError(w.source, "communicator '" + g.name + "'", "lists rank " + std::to_string(r) + " twice",
                         "list each rank once");
      }
    }
  }
  w.check_shared();
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    for (const auto& n : w.program(r)) {
      if (n.type == models::NodeType::kSend || n.type == models::NodeType::kRecv) {
        const std::int32_t peer = w.peer_of(r, n);
        if (peer < 0 || static_cast<std::uint32_t>(peer) >= w.ranks || static_cast<std::uint32_t>(peer) == r) {
          throw InputError(w.source, "rank " + std::to_string(r) + " node " + std::to_string(n.source_id) +
                                         " ('" + n.name + "') peer",
                           "peer rank " + std::to_string(peer) + " is not another rank of the " +
                               std::to_string(w.ranks) + "-rank workload",
                           "fix comm_src/comm_dst in the trace");
        }
      }
      if (n.type == models::NodeType::kCollective) {
        const std::int32_t g = w.group_of(r, n);
        if (g < 0 || static_cast<std::size_t>(g) >= w.groups.size()) {
          throw engine::InternalError("reader produced a collective with no group");
        }
      }
    }
  }
  // Every member of a communicator must issue the same collectives (op, size, root) in the same
  // order; otherwise the run would deadlock or mix sizes. Checked before simulating so the error
  // names the rank and node that disagree with the communicator's first member.
  // per_group[g][k]: the collective nodes of the group's k-th member on it, in program order
  // (memory: one entry per collective node and one list per membership, not groups x ranks).
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> member_of(w.ranks);  // rank -> (group, k)
  for (std::size_t g = 0; g < w.groups.size(); ++g) {
    const auto& members = w.groups[g].ranks;
    for (std::size_t k = 0; k < members.size(); ++k) {
      member_of[members[k]].emplace_back(static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(k));
    }
  }
  std::vector<std::vector<std::vector<std::uint32_t>>> per_group(w.groups.size());
  for (std::size_t g = 0; g < w.groups.size(); ++g) per_group[g].resize(w.groups[g].ranks.size());
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    const auto& prog = w.program(r);
    for (std::uint32_t i = 0; i < prog.size(); ++i) {
      const auto& n = prog[i];
      if (n.type != models::NodeType::kCollective) continue;
      const auto g = static_cast<std::uint32_t>(w.group_of(r, n));
      const auto it = std::find_if(member_of[r].begin(), member_of[r].end(), [g](const auto& e) { return e.first == g; });
      if (it == member_of[r].end()) {
        throw InputError(w.source, "rank " + std::to_string(r) + " node " + std::to_string(n.source_id) + " ('" + n.name + "')",
                         "issues a collective on communicator '" + w.groups[g].name + "', which does not list the rank",
                         "add the rank to the communicator or move the collective to one that holds it");
      }
      per_group[g][it->second].push_back(i);
    }
  }
  for (std::size_t g = 0; g < w.groups.size(); ++g) {
    const auto& members = w.groups[g].ranks;
    if (members.empty()) continue;
    const std::uint32_t first = members.front();
    // Chakra traces without a comm-group file put every collective on one 'world' communicator.
    const std::string fix =
        w.format == "chakra" && w.groups[g].name == "world"
            ? "make every member issue the same collectives in the same order, or give the trace's communicators "
              "with workload.comm_groups (fabricsim generate writes PREFIX.comm_groups.json)"
            : "make every member issue the same collectives in the same order";
    const auto& ref = per_group[g][0];
    for (std::size_t m = 0; m < members.size(); ++m) {
      const std::uint32_t r = members[m];
      const auto& got = per_group[g][m];
      const std::size_t common = std::min(ref.size(), got.size());
      for (std::size_t k = 0; k < common; ++k) {
        const auto& a = w.program(first)[ref[k]];
        const auto& b = w.program(r)[got[k]];
        if (a.op != b.op || a.bytes != b.bytes || a.root != b.root) {
          throw InputError(w.source, "rank " + std::to_string(r) + " node " + std::to_string(b.source_id) + " ('" +
                                         b.name + "')",
                           fmt::format("collective #{} on communicator '{}' is {} of {} bytes, but rank {} issues {} of {} bytes",
                                       k, w.groups[g].name, models::coll_op_name(b.op), b.bytes, first,
                                       models::coll_op_name(a.op), a.bytes),
                           fix);
        }
      }
      if (ref.size() != got.size()) {
        throw InputError(w.source, "rank " + std::to_string(r),
                         fmt::format("issues {} collectives on communicator '{}' but rank {} issues {}", got.size(),
                                     w.groups[g].name, first, ref.size()),
                         fix);
      }
    }
  }
}

std::string workload_desc(const models::Workload& w) {
  const std::uint64_t nodes = w.total_nodes();
  return fmt::format("{} ({}, {} ranks, {} nodes, {} communicators)", w.source, w.format, w.ranks, nodes,
                     w.groups.size());
}

std::string cluster_desc(const models::Topology& t) {
  const auto& c = t.spec();
  std::string shape = c.fabric == models::FabricKind::kRailOptimized ? "rail-optimized"
                      : c.fabric == models::FabricKind::kLeafSpine   ? "leaf-spine"
                                                                      : models::fabric_kind_name(c.fabric);
  if (c.dual_plane) shape += ", dual-plane";
  std::string counts = fmt::format("{} leaves, {} spines", t.num_leaves(), t.num_spines());
  if (t.num_cores() > 0) counts += fmt::format(", {} cores", t.num_cores());
  std::string domains;
  if (c.domain_size() != c.gpus_per_host) domains = fmt::format(", NVLink domains of {} GPUs", c.domain_size());
  return fmt::format("{} hosts x {} GPUs, {} ({}){}, NIC {:g} Gb/s, NVLink {:g} Gb/s, MTU {} B", c.hosts,
                     c.gpus_per_host, shape, counts, domains, static_cast<double>(c.nic_bps) / 1e9,
                     static_cast<double>(c.nvlink_bps) / 1e9, c.mtu_bytes);
}

template <class T>
std::vector<T> allgather_pod(MPI_Comm comm, const std::vector<T>& local) {
  static_assert(std::is_trivially_copyable_v<T>);
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return local;
  int mine = static_cast<int>(local.size() * sizeof(T));
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size), 0);
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (int i = 1; i < size; ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<T> all(static_cast<std::size_t>(displs.back() + counts.back()) / sizeof(T));
  MPI_Allgatherv(local.data(), mine, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm);
  return all;
}

// Writes `text` to `path`; returns "" or the reason it failed (disk full included). On failure
// the partial file is removed.
std::string write_file_checked(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return std::string("cannot create ") + path + ": " + std::strerror(errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int flush_err = std::fflush(f);
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || flush_err != 0 || !closed) {
    std::remove(path.c_str());
    return "cannot write " + path + ": " + std::strerror(err ? err : EIO);
  }
  return "";
}

// Rank 0's error string, made collective: every process throws the same InputError.
void bcast_error(MPI_Comm comm, std::string err, const std::string& field) {
  int len = static_cast<int>(err.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, comm);
  err.resize(static_cast<std::size_t>(len));
  MPI_Bcast(err.data(), len, MPI_CHAR, 0, comm);
  if (len > 0) throw InputError("<cli>", field, err, "check free space and permissions, or choose another path");
}

/// The planner's algorithm, protocol and channels for a collective record (NCCL planner: its cost
/// model's decision for the call; ring planner: its fixed schedule, one channel, Simple).
void describe_algorithm(const models::CollectivePlanner& planner, const models::Workload& w, models::CollOp op,
                        io::CollectiveRecord& c) {
  if (const auto* custom = dynamic_cast<const simccl::CustomPlanner*>(&planner); custom != nullptr && c.ranks > 1) {
    models::CollRequest req;
    req.op = op;
    req.bytes = c.bytes;
    req.ranks = &w.groups[c.group].ranks;
    if (const simccl::CustomSchedule* s = custom->match(req)) {
      c.algorithm = s->format == "msccl" ? "MSCCL" : "TE-CCL";  // replayed schedule (simccl/custom_planner.hpp)
      c.protocol = "Simple";
      c.channels = 1;
      return;
    }
    describe_algorithm(custom->base(), w, op, c);
    return;
  }
  if (const auto* nccl = dynamic_cast<const simccl::NcclPlanner*>(&planner); nccl != nullptr && c.ranks > 1) {
    models::CollRequest req;
    req.op = op;
    req.bytes = c.bytes;
    req.ranks = &w.groups[c.group].ranks;
    const simccl::TuningDecision d = nccl->decision(req);
    c.algorithm = simccl::algo_name(d.algo);
    c.protocol = simccl::proto_name(d.proto);
    c.channels = static_cast<std::uint32_t>(d.n_channels);
    return;
  }
  if (c.ranks <= 1) {
    c.algorithm = "none";
    c.protocol = "none";
    c.channels = 0;
    return;
  }
  switch (op) {
    case models::CollOp::kBroadcast:
    case models::CollOp::kReduce: c.algorithm = "Chain"; break;
    case models::CollOp::kAllToAll: c.algorithm = "Direct"; break;
    default: c.algorithm = "Ring"; break;
  }
  c.protocol = "Simple";
  c.channels = 1;
}

/// Tier of the directed link at -> peer: 0 NVLink (GPU <-> NVSwitch), 1 NIC (GPU <-> leaf),
/// 2 fabric (leaf <-> spine).
std::uint32_t link_tier(const models::Topology& t, engine::LpId a, engine::LpId b) {
  const auto ka = t.kind(a), kb = t.kind(b);
  if (ka == models::NodeKind::kNvSwitch || kb == models::NodeKind::kNvSwitch) return 0;
  if (ka == models::NodeKind::kGpu || kb == models::NodeKind::kGpu) return 1;
  if (ka == models::NodeKind::kCore || kb == models::NodeKind::kCore) return 3;
  return 2;
}

/// This process's sampled link and queue bins as records. link_id = index of the directed port in
/// the order (LP id, port index) over the whole topology (identical on every process).
void collect_link_series(const models::Topology& topo, const std::vector<std::unique_ptr<models::GpuRankLp>>& gpus,
                         const std::vector<std::unique_ptr<models::SwitchLp>>& switches, engine::SimTime bin_ps,
                         std::vector<io::LinkBinRecord>& links, std::vector<io::QueueBinRecord>& queues) {
  std::vector<std::uint32_t> base(topo.num_nodes() + 1, 0);
  for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
    base[n + 1] = base[n] + static_cast<std::uint32_t>(topo.ports(n).size());
  }
  auto add = [&](engine::LpId node, const models::LinkSampler& s) {
    // One row per (port, bin) with traffic, PFC pause, ECN marks or drops; ordered by (port, bin).
    std::map<std::pair<std::uint32_t, engine::SimTime>, io::LinkBinRecord> rows;
    auto row = [&](std::uint32_t port, engine::SimTime bin) -> io::LinkBinRecord& {
      auto [it, fresh] = rows.try_emplace({port, bin});
      if (fresh) {
        const models::Port& p = topo.ports(node)[port];
        io::LinkBinRecord& r = it->second;
        r.link_id = base[node] + port;
        r.from_node = node;
        r.to_node = p.peer;
        r.tier = link_tier(topo, node, p.peer);
        r.bin_start_ps = bin;
      }
      return it->second;
    };
    for (const auto& b : s.tx_bins()) {
      const models::Port& p = topo.ports(node)[b.port];
      io::LinkBinRecord& r = row(b.port, b.bin_start_ps);
      r.bytes = b.value;
      r.utilization = static_cast<double>(b.value) * 8.0 /
                      (static_cast<double>(p.rate_bps) * static_cast<double>(bin_ps) * 1e-12);
    }
    for (const auto& b : s.pause_bins()) row(b.port, b.bin_start_ps).pause_ps = static_cast<engine::SimTime>(b.value);
    for (const auto& c : s.count_bins()) {
      io::LinkBinRecord& r = row(c.port, c.bin_start_ps);
      r.pfc_pauses = c.xoff;
      r.ecn_marks = c.marks;
      r.drops = c.drops;
    }
    for (const auto& [k, r] : rows) links.push_back(r);
    for (const auto& b : s.queue_bins()) {
      queues.push_back(io::QueueBinRecord{base[node] + b.port, b.bin_start_ps, b.value});
    }
  };
  for (const auto& g : gpus) add(g->rank_record().rank, g->sampler());
  for (const auto& sw : switches) add(sw->lp_id(), sw->sampler());
}

}  // namespace

std::string validate_only(const RunOptions& opt, MPI_Comm comm) {
  RunOptions o = opt;
  o.dry_run = true;
  o.write_h5 = false;
  return run_simulation(o, comm, "", "").summary_text;
}

RunResult run_simulation(const RunOptions& opt, MPI_Comm comm, const std::string& version,
                         const std::string& git_commit) {
  const double t0 = now_s();
  int rank = 0, nprocs = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nprocs);
  // Log on rank 0 only, to stderr, "fabricsim: <level>: ..." (spdlog; one logger per run).
  auto log = std::make_shared<spdlog::logger>("fabricsim", std::make_shared<spdlog::sinks::stderr_sink_st>());
  log->set_pattern("fabricsim: %l: %v");
  {
    const auto lvl = spdlog::level::from_str(opt.log_level);
    if (opt.log_level != "error" && opt.log_level != "warn" && opt.log_level != "info" && opt.log_level != "debug") {
      throw InputError("<cli>", "--log-level", "'" + opt.log_level + "' is not a log level", "use error, warn, info or debug");
    }
    log->set_level(rank == 0 ? lvl : spdlog::level::off);
    log->flush_on(spdlog::level::debug);
  }

  // Command-line options are applied as --set keys, so the recorded spec is the effective one.
  std::vector<std::string> sets = opt.sets;
  if (!opt.workload.empty()) sets.push_back("workload.path=" + opt.workload);
  if (opt.gpus) sets.push_back("workload.gpus=" + std::to_string(opt.gpus));
  if (!opt.out_h5.empty()) sets.push_back("output.h5=" + opt.out_h5);
  if (!opt.summary_json.empty()) sets.push_back("output.summary_json=" + opt.summary_json);
  if (opt.threads) sets.push_back("sim.threads=" + std::to_string(opt.threads));
  Spec spec = load_spec(opt.spec_path, sets);
  const std::uint32_t threads = spec.threads;
  const std::vector<std::string> inputs = {spec.workload_path, spec.comm_groups, opt.spec_path};
  // The null device as an output discards it (the writers would rename a temporary file onto it).
  bool write_h5 = opt.write_h5;
  // validate: the HDF5 path only when one was named (the default is the working directory's
  // fabricsim_results.h5, which `validate` should not require to be writable).
  if (opt.dry_run && spec.output_h5 != "fabricsim_results.h5") write_h5 = true;
  if (write_h5) check_output_path(spec.output_h5, "-o", inputs);
  if (write_h5 && is_null_device(spec.output_h5)) write_h5 = false;
  if (!spec.summary_json.empty()) {
    std::vector<std::string> others = inputs;
    if (write_h5) others.push_back(spec.output_h5);
    check_output_path(spec.summary_json, "--summary-json", others);
  }
  if (!spec.trace_path.empty()) {
    std::vector<std::string> others = inputs;
    if (write_h5) others.push_back(spec.output_h5);
    others.push_back(spec.summary_json);
    check_output_path(spec.trace_path, "--trace", others);
  }
  if (!spec.save_partition.empty()) check_output_path(spec.save_partition, "--save-partition", inputs);
  if (!spec.summary_json.empty() && is_null_device(spec.summary_json)) spec.summary_json.clear();
  if (!spec.trace_path.empty() && is_null_device(spec.trace_path)) spec.trace_path.clear();
  {
    // Two outputs on one path would overwrite each other, the later writer silently winning
    // (the checks above only see files that already exist).
    std::vector<std::pair<std::string, std::string>> outs;
    if (write_h5) outs.emplace_back("-o", spec.output_h5);
    if (!spec.summary_json.empty()) outs.emplace_back("--summary-json", spec.summary_json);
    if (!spec.trace_path.empty()) outs.emplace_back("--trace", spec.trace_path);
    if (!spec.save_partition.empty()) outs.emplace_back("--save-partition", spec.save_partition);
    for (std::size_t j = 1; j < outs.size(); ++j) {
      std::error_code ec;
      const fs::path pj = fs::weakly_canonical(fs::absolute(outs[j].second), ec);
      for (std::size_t i = 0; i < j; ++i) {
        if (fs::weakly_canonical(fs::absolute(outs[i].second), ec) == pj) {
          throw InputError("<cli>", outs[j].first + " " + outs[j].second,
                           "is the same path as " + outs[i].first + " " + outs[i].second,
                           "give each output its own file");
        }
      }
    }
  }

  GenInfo gen;
  models::Workload w = opt.workload_data != nullptr ? *opt.workload_data : load_spec_workload(spec, &gen);
  if (!spec.trace_path.empty() && spec.trace_rank_lo >= w.ranks) {
    throw InputError(spec.file_of("output.trace_ranks"), "output.trace_ranks",
                     fmt::format("starts at rank {} but the workload has {} ranks (0..{}): the trace would be empty",
                                 spec.trace_rank_lo, w.ranks, w.ranks - 1),
                     "give ranks below " + std::to_string(w.ranks) + ", or all");
  }
  if (w.format == "chakra" && spec.workload_gpus != 0 && spec.workload_gpus != w.ranks) {
    throw InputError(spec.file_of_any({"workload.gpus", "workload.path"}), "workload.gpus",
                     fmt::format("is {} but the Chakra trace has {} ranks", spec.workload_gpus, w.ranks),
                     "drop workload.gpus/--gpus (Chakra traces carry their world size)");
  }
  check_workload(w);
  for (const auto& warning : w.warnings) log->warn("{}", engine::printable(warning));  // may quote input bytes
  log->info("workload {}: {} ranks, {} nodes ({:.3f} s)", w.source, w.ranks,
            w.total_nodes(), now_s() - t0);
  for (auto& prog : w.programs) {
    for (auto& n : prog) n.duration_ps = kernels::scaled_duration(n.duration_ps, spec.compute_scale);
  }
  const models::ClusterSpec cspec = resolve_cluster(spec, w.ranks);
  const models::Topology topo(cspec);
  log->info("topology: {} ({} LPs) ({:.3f} s)", cluster_desc(topo), topo.num_nodes(), now_s() - t0);
  // Partition: a scale-up domain's GPUs + NVSwitch stay together; Ethernet switches are dealt
  // round-robin (in LP order: leaves, spines, cores), then each leaf moves to its hosts' unit.
  partition::Blocks blocks(topo.num_domains());
  for (std::uint32_t g = 0; g < topo.num_gpus(); ++g) blocks[topo.domain_of(g)].push_back(g);
  for (std::uint32_t d = 0; d < topo.num_domains(); ++d) {
    if (topo.domain_switch(d) != models::Topology::kNoLp) blocks[d].push_back(topo.domain_switch(d));
  }
  std::vector<engine::LpId> loose;
  for (engine::LpId n = topo.first_lp(models::NodeKind::kLeaf); n < topo.num_nodes(); ++n) loose.push_back(n);
  // Flow rung: one network LP (id = num_nodes, after every topology node) owns all links; each GPU
  // talks to it with its smallest port latency at least, which is the lookahead across the cut.
  const models::Fidelity fidelity = models::parse_fidelity(spec.fidelity, spec.file, "sim.fidelity");
  const bool net_lp = fidelity == models::Fidelity::kFlow;
  const models::RingFlows ring_flows = models::parse_ring_flows(spec.ring_flows, spec.file, "sim.ring_flows");
  // sim.ring_flows: stream changes only the ring planner's rings at the coarse rungs: say so
  // where it does nothing (the summary line then leaves it out too).
  const bool stream_applies = fidelity != models::Fidelity::kPacket && spec.planner == "ring";
  if (ring_flows == models::RingFlows::kStream && !stream_applies && rank == 0) {
    log->warn("{}: sim.ring_flows: stream has no effect {} (it streams the ring planner's rings at the flow and "
              "analytical rungs)", spec.file_of("sim.ring_flows"),
              fidelity == models::Fidelity::kPacket ? "at the packet rung" : "with simccl.planner: " + spec.planner);
  }
  const engine::LpId net_id = topo.num_nodes();
  if (net_lp) loose.push_back(net_id);
  const std::uint32_t num_lps = topo.num_nodes() + (net_lp ? 1 : 0);
  std::vector<partition::Edge> edges;
  for (const auto& l : topo.links()) edges.push_back({l.a, l.b, l.latency_ps});
  if (net_lp) {
    const engine::SimTime gpu_net_ps = std::min(cspec.nvlink_latency_ps, cspec.nic_latency_ps);
    for (engine::LpId g = 0; g < topo.num_gpus(); ++g) edges.push_back({g, net_id, gpu_net_ps});
  }
  // Expected traffic (issue 7): an edge carries traffic in proportion to its bandwidth (NVLink
  // edges weigh more than NIC edges), an LP's events to its number of ports.
  std::vector<std::uint32_t> edge_weight(edges.size(), 1), lp_weight(num_lps, 1);
  for (std::size_t i = 0; i < edges.size(); ++i) {
    auto nvs = [&](engine::LpId n) { return n < topo.num_nodes() && topo.kind(n) == models::NodeKind::kNvSwitch; };
    const bool nvlink = nvs(edges[i].a) || nvs(edges[i].b);
    edge_weight[i] = nvlink && cspec.nic_bps > 0
                         ? std::max<std::uint32_t>(1, static_cast<std::uint32_t>(cspec.nvlink_bps / cspec.nic_bps))
                         : 1;
    ++lp_weight[edges[i].a];
    ++lp_weight[edges[i].b];
  }
  engine::Placement placement;
  // validate --processes N: place (or read the partition file) for N processes.
  const auto part_procs = opt.dry_run && opt.validate_processes > 0 ? opt.validate_processes
                                                                    : static_cast<std::uint32_t>(nprocs);
  if (spec.partition == "topology") {
    placement = partition::place_blocks(num_lps, blocks, loose, part_procs, threads);
    // Leaves (ToRs, rail switches) join the unit holding most of their hosts' GPUs; spines and
    // cores stay dealt round robin (they are wired to every leaf of their pod).
    std::vector<engine::LpId> leaves;
    for (std::uint32_t i = 0; i < topo.count(models::NodeKind::kLeaf); ++i) leaves.push_back(topo.leaf_lp(i));
    partition::attach_to_neighbors(placement, leaves, edges);
  } else if (spec.partition == "metis") {
    // Links below 1 ns stay inside one unit: a window that short would make the run crawl.
    placement = partition::place_metis(num_lps, edges, edge_weight, lp_weight, part_procs, threads, 1000);
  } else {
    placement = partition::read_partition(spec.partition, num_lps, part_procs, threads);
  }
  const engine::SimTime w_ps = partition::lookahead(placement, edges);
  if (w_ps < 1) {
    throw engine::InputError(spec.file_of("sim.partition"), "sim.partition",
                             "the placement cuts a zero-latency link, so no conservative window exists",
                             "keep such links inside one process/thread (sim.partition: topology or metis)");
  }
  if (!spec.save_partition.empty() && rank == 0 && !opt.dry_run) partition::write_partition(spec.save_partition, placement, static_cast<std::uint32_t>(nprocs));

  simccl::PlannerBuild planned =
      simccl::make_planner(spec.planner, spec.nccl, spec.file, spec.gpu_sm, cspec, true, spec.simccl_extras);
  for (const auto& warning : planned.warnings) log->warn("{}", engine::printable(warning));
  // NCCL_* taken from the shell changed the run: record them with the spec (HDF5 spec_text,
  // summary JSON nccl_env) so the results file says what it was run with.
  std::vector<std::pair<std::string, std::string>> nccl_env;
  for (const auto& a : planned.from_env) nccl_env.emplace_back(a.name, a.value);
  spec.text = spec_text_with_env_nccl(spec.text, nccl_env);
  log->info("planner {}; fabric: cc {}, pfc {}, ecn {}, routing {}, {} QP(s) per connection", spec.planner,
            models::cc_name(spec.fabric.nic.cc), spec.fabric.sw.pfc, spec.fabric.sw.ecn,
            models::routing_name(spec.fabric.sw.routing), spec.fabric.nic.qps_per_connection);
  const models::CollectivePlanner& planner = *planned.planner;
  if (!spec.fabric.nic.qps_given && planned.qps_given) {
    spec.fabric.nic.qps_per_connection = static_cast<std::uint32_t>(std::max(1, planned.ib_qps_per_connection));
    spec.fabric.nic.split_data_on_qps = planned.ib_split_data_on_qps;
  }
  simccl::check_workload_plans(planner, w);
  if (opt.dry_run) {
    RunResult r;
    r.summary_text = "workload: " + workload_desc(w) + "\ncluster: " + cluster_desc(topo) + "\n" +
                     fmt::format("partition: {} process(es) x {} thread(s), lookahead {}\n", part_procs, threads,
                                 w_ps >= engine::kInfinity ? std::string("none (nothing cut)") : engine::format_time(w_ps));
    return r;
  }
  // Flow records are kept only where they are read: the HDF5 /flows table (output.flows) or
  // RunResult::flow_records; the digest needs none of them (io/digest.hpp).
  const bool keep_flow_records = opt.keep_flows || (write_h5 && spec.output_flows);
  engine::Simulator sim(comm, placement, w_ps);
  std::vector<std::unique_ptr<models::GpuRankLp>> gpus;
  // Ranks of one shared program share its executor index (models::ProgramIndex).
  std::vector<std::shared_ptr<const models::ProgramIndex>> shared_index(w.shared() ? w.programs.size() : 0);
  std::vector<std::unique_ptr<models::SwitchLp>> switches;
  for (engine::LpId id = 0; id < topo.num_nodes(); ++id) {
    if (!sim.is_local(id)) continue;
    if (topo.kind(id) == models::NodeKind::kGpu) {
      std::shared_ptr<const models::ProgramIndex> index;
      if (id < w.ranks && models::ProgramIndex::shareable(w, id)) {
        auto& shared = shared_index[w.program_of[id]];
        if (!shared) shared = models::ProgramIndex::of_shared(w, w.program_of[id]);
        index = shared;
      }
      gpus.push_back(std::make_unique<models::GpuRankLp>(topo, id, &w, planner, spec.fabric, std::move(index)));
      gpus.back()->set_fidelity(fidelity, net_id);
      gpus.back()->set_ring_flows(ring_flows);
      gpus.back()->keep_flows(keep_flow_records);
      if (write_h5 || opt.keep_flows || !spec.trace_path.empty()) gpus.back()->enable_sampling(spec.sample_interval_ps);
      if (!spec.trace_path.empty() && id < w.ranks && id >= spec.trace_rank_lo && id <= spec.trace_rank_hi) {
        gpus.back()->enable_trace();
      }
      if (gen.infer.used && id < w.ranks && !gen.infer.phase_end_nodes[id].empty()) {
        gpus.back()->watch_nodes(gen.infer.phase_end_nodes[id]);
      }
      sim.add_lp(id, gpus.back().get());
    } else {
      switches.push_back(std::make_unique<models::SwitchLp>(topo, id, spec.fabric,
                                                              topo.kind(id) == models::NodeKind::kNvSwitch));
      if (write_h5 || opt.keep_flows) switches.back()->enable_sampling(spec.sample_interval_ps);
      sim.add_lp(id, switches.back().get());
    }
  }
  std::unique_ptr<models::FlowNetLp> net;
  if (net_lp && sim.is_local(net_id)) {
    net = std::make_unique<models::FlowNetLp>(topo, net_id);
    net->set_groups(&w.groups);
    sim.add_lp(net_id, net.get());
  }
  // Progress on stderr for long runs: rank 0, only on a terminal and without --quiet. The share
  // of DAG nodes done is taken over the GPU LPs of engine thread 0 (the callback runs there).
  bool progress_printed = false;
  if (rank == 0 && !opt.quiet && ::isatty(STDERR_FILENO)) {
    std::vector<const models::GpuRankLp*> mine;
    std::uint64_t total_nodes = 0;
    for (const auto& g : gpus) {
      const auto id = g->rank_record().rank;
      if (placement.thread[id] == 0 && g->total_nodes() > 0) {
        mine.push_back(g.get());
        total_nodes += g->total_nodes();
      }
    }
    sim.set_progress([mine, total_nodes, &progress_printed](const engine::ProgressInfo& p) {
      std::uint64_t done = 0;
      for (const auto* g : mine) done += g->done_nodes();
      const double frac = total_nodes ? static_cast<double>(done) / static_cast<double>(total_nodes) : 0.0;
      std::string eta = "?";
      if (frac > 0.001) eta = fmt::format("{:.0f} s", p.wall_s * (1.0 - frac) / frac);
      std::fprintf(stderr, "\rfabricsim: simulated %s, %.1f%% of DAG nodes, %.3g events/s, ETA %s   ",
                   engine::format_time(p.now_ps).c_str(), 100.0 * frac,
                   p.wall_s > 0 ? static_cast<double>(p.events) / p.wall_s : 0.0, eta.c_str());
      std::fflush(stderr);
      progress_printed = true;
    });
  }
  log->info("simulating on {} process(es) x {} thread(s), lookahead {}, heap pages: {}", nprocs, threads,
            w_ps == engine::kInfinity ? std::string("none") : engine::format_time(w_ps), engine::heap_pages_note());
  try {
    sim.run();
  } catch (const InputError& e) {
    // The engine knows no file names: its horizon error says "<spec>". Name the inputs whose
    // values decide simulated time (the workload's durations, the spec's rates and latencies).
    const std::string msg = e.what();
    const std::string engine_prefix = "<spec>: simulated time: ";
    if (msg.rfind(engine_prefix, 0) != 0) throw;
    const std::string where = !spec.workload_path.empty()
                                  ? spec.workload_path + (spec.file != "<spec>" ? " with " + spec.file : std::string())
                                  : spec.file_of_any({"workload.generator.model"}) == "<cli>" || spec.file == "<spec>"
                                        ? std::string("<cli>")
                                        : spec.file;
    throw InputError(InputError::Whole{}, where + ": simulated time: " + msg.substr(engine_prefix.size()));
  }
  log->info("simulated ({:.3f} s)", now_s() - t0);
  if (progress_printed) std::fprintf(stderr, "\n");
  const engine::EngineStats stats = sim.global_stats();

  // Deadlock / mismatch detection: every rank's DAG must have completed.
  struct Stuck {
    std::int64_t rank;
    std::int64_t node;
  };
  Stuck local_stuck{-1, -1};
  for (const auto& g : gpus) {
    const std::int64_t n = g->first_unfinished();
    const std::int64_t r = static_cast<std::int64_t>(g->rank_record().rank);
    if (n >= 0 && r < static_cast<std::int64_t>(w.ranks) && local_stuck.rank < 0) local_stuck = {r, n};
  }
  const auto all_stuck = allgather_pod(comm, std::vector<Stuck>{local_stuck});
  for (const Stuck& s : all_stuck) {
    if (s.rank < 0) continue;
    const auto& node = w.program(static_cast<std::uint32_t>(s.rank))[static_cast<std::size_t>(s.node)];
    throw InputError(w.source, "rank " + std::to_string(s.rank) + " node " + std::to_string(node.source_id) +
                                   " ('" + node.name + "')",
                     "never completed: its collective or receive has no matching peer",
                     "make every rank of a communicator issue the same collectives in the same order, "
                     "and give every recv a matching send (same tag)");
  }

  // Gather results.
  std::vector<io::RankRecord> local_ranks;
  std::vector<io::FlowRecord> local_flows;
  io::FlowDigest local_flow_digest;
  std::vector<models::CollectivePartial> local_parts;
  for (const auto& g : gpus) {
    const io::RankRecord rr = g->rank_record();
    if (rr.rank < w.ranks) local_ranks.push_back(rr);
    local_flows.insert(local_flows.end(), g->flow_records().begin(), g->flow_records().end());
    local_flow_digest.merge(g->flow_digest());
    local_parts.insert(local_parts.end(), g->collective_partials().begin(), g->collective_partials().end());
  }
  std::vector<io::RankRecord> all_ranks = allgather_pod(comm, local_ranks);
  std::sort(all_ranks.begin(), all_ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  std::map<std::pair<std::uint32_t, std::uint32_t>, io::CollectiveRecord> merged;
  for (const auto& p : allgather_pod(comm, local_parts)) {
    auto [it, fresh] = merged.try_emplace({p.group, p.instance});
    io::CollectiveRecord& c = it->second;
    if (fresh) {
      c.group = p.group;
      c.instance = p.instance;
      c.op = models::coll_op_name(p.op);
      c.bytes = p.bytes;
      c.ranks = p.ranks;
      c.start_ps = p.start_ps;
      c.end_ps = p.end_ps;
    } else {
      c.start_ps = std::min(c.start_ps, p.start_ps);
      c.end_ps = std::max(c.end_ps, p.end_ps);
    }
  }
  // Inference: a phase (prefill, decode step k) ends when the last of its sampling nodes (one per
  // last-stage rank of every replica) completes.
  std::vector<engine::SimTime> phase_end;
  if (gen.infer.used) {
    struct Mark {
      std::uint32_t rank, phase;
      engine::SimTime ps;
    };
    std::vector<Mark> local_marks;
    for (const auto& g : gpus) {
      const auto& v = g->watched_done_ps();
      for (std::size_t i = 0; i < v.size(); ++i) {
        local_marks.push_back(Mark{g->rank_record().rank, static_cast<std::uint32_t>(i), v[i]});
      }
    }
    phase_end.assign(gen.output_tokens, 0);
    for (const Mark& mk : allgather_pod(comm, local_marks)) {
      if (mk.phase < phase_end.size()) phase_end[mk.phase] = std::max(phase_end[mk.phase], mk.ps);
    }
  }
  RunResult res;
  for (auto& [k, c] : merged) {
    const engine::SimTime dt = c.end_ps - c.start_ps;
    const models::CollOp op = [&] {
      for (int o = 0; o <= static_cast<int>(models::CollOp::kAllToAll); ++o) {
        if (c.op == models::coll_op_name(static_cast<models::CollOp>(o))) return static_cast<models::CollOp>(o);
      }
      return models::CollOp::kAllReduce;
    }();
    c.algbw_GBps = dt > 0 ? static_cast<double>(c.bytes) / (static_cast<double>(dt) * 1e-12) / 1e9 : 0.0;
    c.busbw_GBps = c.algbw_GBps * models::busbw_factor(op, c.ranks);
    describe_algorithm(planner, w, op, c);
    res.collectives.push_back(c);
  }
  long long nflows = static_cast<long long>(local_flow_digest.count), total_flows = nflows;
  MPI_Allreduce(&nflows, &total_flows, 1, MPI_LONG_LONG, MPI_SUM, comm);
  res.flows = static_cast<std::uint64_t>(total_flows);
  res.ranks = all_ranks;
  res.stats = stats;

  engine::SimTime sim_end = 0;
  for (const auto& r : all_ranks) sim_end = std::max(sim_end, r.finish_ps);
  res.iterations = gen.used ? gen.iterations : 1;
  // Mean iteration time (the simulated time when the workload is one iteration).
  const engine::SimTime iter = sim_end / res.iterations;
  io::RunMeta& m = res.meta;
  m.spec_text = spec.text;
  m.version = version;
  m.git_commit = git_commit;
  m.workload = w.source;
  m.seed = spec.seed;
  m.processes = static_cast<std::uint32_t>(nprocs);
  m.threads = threads;
  m.ranks = w.ranks;
  m.events = stats.events;
  m.simulated_time_ps = sim_end;
  m.wall_s = now_s() - t0;
  m.sample_interval_ps = spec.sample_interval_ps;

  {
    FabricTotals& f = res.fabric;
    std::uint64_t sums[17] = {};
    std::uint64_t maxbuf = 0;
    for (const auto& sw : switches) {
      const auto& c = sw->counters();
      sums[0] += c.packets;
      sums[2] += c.pause_frames;
      sums[3] += c.resume_frames;
      sums[4] += static_cast<std::uint64_t>(c.paused_ps);
      sums[7] += c.ecn_marks;
      sums[8] += c.drops;
      sums[9] += c.headroom_drops;
      sums[15] += c.nvls_absorbed;
      sums[16] += c.nvls_copies;
      maxbuf = std::max(maxbuf, c.max_buffer_bytes);
    }
    for (const auto& g : gpus) {
      const auto& c = g->nic().counters();
      sums[1] += c.data_packets;
      sums[5] += static_cast<std::uint64_t>(c.paused_ps);
      sums[6] += c.pauses_received;
      sums[10] += c.retransmits;
      sums[11] += c.timeouts;
      sums[12] += c.nacks_sent;
      sums[13] += c.cnps_sent;
      sums[14] += c.acks_sent;
    }
    MPI_Allreduce(MPI_IN_PLACE, sums, 17, MPI_UINT64_T, MPI_SUM, comm);
    MPI_Allreduce(MPI_IN_PLACE, &maxbuf, 1, MPI_UINT64_T, MPI_MAX, comm);
    f = FabricTotals{sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7],
                     sums[8], sums[9], sums[10], sums[11], sums[12], sums[13], sums[14], maxbuf,
                     sums[15], sums[16]};
  }
  if (fidelity == models::Fidelity::kPacket) {
    const FabricTotals& f = res.fabric;
    m.fabric_counters = {{"switch_packets", f.switch_packets}, {"nic_data_packets", f.nic_data_packets},
                         {"pause_frames", f.pause_frames},     {"resume_frames", f.resume_frames},
                         {"switch_paused_ps", f.switch_paused_ps}, {"nic_paused_ps", f.nic_paused_ps},
                         {"nic_pauses", f.nic_pauses},         {"ecn_marks", f.ecn_marks},
                         {"drops", f.drops},                   {"headroom_drops", f.headroom_drops},
                         {"retransmits", f.retransmits},       {"timeouts", f.timeouts},
                         {"nacks", f.nacks},                   {"cnps", f.cnps},
                         {"acks", f.acks},                     {"max_buffer_bytes", f.max_buffer_bytes},
                         {"nvls_absorbed", f.nvls_absorbed},   {"nvls_copies", f.nvls_copies}};
  }
  if (opt.keep_flows) {
    res.flow_records = allgather_pod(comm, local_flows);
    std::sort(res.flow_records.begin(), res.flow_records.end(),
              [](const io::FlowRecord& a, const io::FlowRecord& b) { return a.flow_id < b.flow_id; });
  }
  res.digest = io::results_digest_sum(comm, res.collectives, local_flow_digest);
  {
    // Fold the fabric counters in: equal digests also mean equal pauses, marks, drops, retransmits.
    const FabricTotals& f = res.fabric;
    const std::uint64_t v[] = {f.switch_packets, f.nic_data_packets, f.pause_frames, f.resume_frames,
                               f.switch_paused_ps, f.nic_paused_ps, f.ecn_marks, f.drops, f.retransmits,
                               f.timeouts, f.cnps, f.acks, f.max_buffer_bytes};
    std::uint64_t h = std::stoull(res.digest, nullptr, 16);
    for (std::uint64_t x : v) h = engine::mix64(h ^ (x + 0x9E3779B97F4A7C15ull));
    res.digest = fmt::format("{:016x}", h);
  }
  if (write_h5) res.output_h5 = spec.output_h5;

  // Summary text.
  std::ostringstream out;
  double comp = 0, commu = 0, exposed = 0;
  for (const auto& r : all_ranks) {
    comp += static_cast<double>(r.compute_ps);
    commu += static_cast<double>(r.comm_ps);
    exposed += static_cast<double>(r.exposed_comm_ps);
  }
  const double nr = std::max<double>(1, static_cast<double>(all_ranks.size()));
  // Per-rank sums cover every iteration; reported per iteration like the iteration time.
  comp /= res.iterations;
  commu /= res.iterations;
  exposed /= res.iterations;
  out << "fabricsim " << version << "\n";
  out << "workload:  " << workload_desc(w) << "\n";
  out << "cluster:   " << cluster_desc(topo) << "\n";
  if (fidelity != models::Fidelity::kPacket) {
    out << "fidelity:  " << models::fidelity_name(fidelity)
        << (ring_flows == models::RingFlows::kStream && stream_applies ? " (ring flows: stream)" : "") << "\n";
  }
  // Inference: time to first token (end of the prefill), time per output token (mean decode step,
  // as vLLM's benchmark counts TPOT: (end-to-end - TTFT) / (output tokens - 1)), throughput.
  const std::uint32_t decode_steps = gen.infer.used ? gen.output_tokens - 1 : 0;
  const engine::SimTime ttft = gen.infer.used ? phase_end[0] : 0;
  const engine::SimTime tpot = decode_steps > 0 ? (phase_end[decode_steps] - phase_end[0]) / decode_steps : 0;
  const double out_tok_s = gen.infer.used && sim_end > 0
                               ? double(gen.replicas) * gen.batch * gen.output_tokens / (double(sim_end) * 1e-12)
                               : 0.0;
  const double prompt_tok_s =
      gen.infer.used && ttft > 0 ? double(gen.replicas) * gen.batch * gen.prompt_tokens / (double(ttft) * 1e-12) : 0.0;
  if (gen.infer.used) {
    res.ttft_ps = ttft;
    res.tpot_ps = decode_steps > 0 ? tpot : -1;
    out << fmt::format("inference: {} requests per replica x {} replica(s), prompt {} tokens, {} output tokens each "
                       "({} decode steps after the prefill)\n",
                       gen.batch, gen.replicas, gen.prompt_tokens, gen.output_tokens, decode_steps);
    out << fmt::format("time to first token: {}  ({} ps; end of the prefill)\n", engine::format_time(ttft), ttft);
    if (decode_steps > 0) {
      out << fmt::format("time per output token: {}  ({} ps; mean of {} decode steps, first {}, last {})\n",
                         engine::format_time(tpot), tpot, decode_steps, engine::format_time(phase_end[1] - phase_end[0]),
                         engine::format_time(phase_end[decode_steps] - phase_end[decode_steps - 1]));
    } else {
      out << "time per output token: - (output_tokens 1: no decode step)\n";
    }
    out << fmt::format("end-to-end: {}  ({} ps)   throughput: {:.1f} output tokens/s, prefill {:.1f} prompt tokens/s "
                       "(all replicas)\n",
                       engine::format_time(sim_end), sim_end, out_tok_s, prompt_tok_s);
  } else if (res.iterations > 1) {
    out << fmt::format("iteration time: {}  ({} ps; mean of {} iterations, simulated time {})\n",
                       engine::format_time(iter), iter, res.iterations, engine::format_time(sim_end));
  } else {
    out << fmt::format("iteration time: {}  ({} ps)\n", engine::format_time(iter), iter);
  }
  out << fmt::format("per rank (mean{}): compute {}, communication {}, exposed communication {}\n",
                     gen.infer.used ? "" : ", per iteration",
                     engine::format_time(static_cast<engine::SimTime>(comp / nr)),
                     engine::format_time(static_cast<engine::SimTime>(commu / nr)),
                     engine::format_time(static_cast<engine::SimTime>(exposed / nr)));
  double mfu = 0, tflops_per_gpu = 0;
  if (gen.used && iter > 0) {
    tflops_per_gpu = gen.stats.model_flops / (static_cast<double>(iter) * 1e-12) / nr / 1e12;
    mfu = tflops_per_gpu * 1e12 / gen.peak_flops;
    out << fmt::format("model FLOPs: {:.4g} per {}, {:.1f} TFLOP/s per GPU, MFU {:.1f}% of {} dense peak\n",
                       gen.stats.model_flops, gen.infer.used ? "request batch (prefill + decode)" : "iteration",
                       tflops_per_gpu, 100 * mfu, gen.fp8 ? "FP8" : "BF16/FP16");
  }
  if (gen.used && !gen.stats.memory.stages.empty()) {
    const auto& mem = gen.stats.memory;
    const auto& pk = mem.peak();
    out << fmt::format(
        "memory per GPU (estimate, lower bound): {:.1f} GB on pipeline rank {} ({} {:.1f} GB, {} "
        "{:.1f} GB) of {:.0f} GB HBM{}\n",
        pk.total_bytes() / 1e9, pk.pp_rank, gen.infer.used ? "weights" : "model states",
        (pk.weights_bytes + pk.grads_bytes + pk.optimizer_bytes) / 1e9,
        gen.infer.used ? "KV cache and activations" : "activations", pk.activation_bytes / 1e9,
        mem.capacity_bytes / 1e9, mem.exceeds() ? "  ** exceeds the GPU's memory **" : "");
  }
  out << fmt::format("collectives: {}   flows: {}\n", res.collectives.size(), res.flows);
  // Per (op, communicator size, bytes): count, mean time, and the bus bandwidth of that mean
  // time (as nccl-tests computes busbw from its average time; a mean of per-instance busbw would
  // disagree with the mean time whenever instances differ). Size-1 communicators are no-ops and
  // only counted.
  struct Agg {
    std::uint64_t count = 0;
    double time_s = 0;
    double factor = 0;  // busbw / algbw of the op at this size (nccl-tests factors)
  };
  std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>, Agg> agg;
  std::uint64_t trivial = 0;
  for (const auto& c : res.collectives) {
    if (c.ranks <= 1) {
      ++trivial;
      continue;
    }
    Agg& a = agg[{c.op, c.ranks, c.bytes}];
    ++a.count;
    a.time_s += static_cast<double>(c.end_ps - c.start_ps) * 1e-12;
    if (c.algbw_GBps > 0) a.factor = c.busbw_GBps / c.algbw_GBps;
  }
  if (!agg.empty()) {
    out << fmt::format("  {:<15} {:>6} {:>14} {:>6} {:>14} {:>11}\n", "op", "ranks", "bytes", "count",
                       "mean time", "busbw GB/s");
    std::size_t shown = 0;
    for (const auto& [k, a] : agg) {
      if (++shown > 30) {
        out << fmt::format("  ... {} more kinds; every collective is in the HDF5 file (/collectives)\n",
                           agg.size() - 30);
        break;
      }
      const double n = static_cast<double>(a.count);
      const double mean_s = a.time_s / n;
      const double busbw = mean_s > 0 ? static_cast<double>(std::get<2>(k)) / mean_s / 1e9 * a.factor : 0.0;
      out << fmt::format("  {:<15} {:>6} {:>14} {:>6} {:>14} {:>11.2f}\n", std::get<0>(k), std::get<1>(k),
                         std::get<2>(k), a.count, engine::format_time(static_cast<engine::SimTime>(mean_s * 1e12)),
                         busbw);
    }
  }
  if (!agg.empty()) {
    out << "  (time: first rank's start to last rank's end, so it includes waiting for late ranks; "
           "busbw from the mean time, nccl-tests factors)\n";
  }
  if (trivial) out << fmt::format("  ({} collectives on single-rank communicators take no time)\n", trivial);
  if (fidelity == models::Fidelity::kPacket && res.fabric.nic_data_packets > 0) {
    const FabricTotals& f = res.fabric;
    out << fmt::format("fabric: cc {}, pfc {}, routing {}; {} switch packet hops, {} PFC pauses ({} paused), "
                       "{} ECN marks, {} CNPs, {} drops, {} retransmits, max buffer {} B\n",
                       models::cc_name(spec.fabric.nic.cc), spec.fabric.sw.pfc ? "on" : "off",
                       models::routing_name(spec.fabric.sw.routing), f.switch_packets, f.pause_frames,
                       engine::format_time(static_cast<engine::SimTime>(f.switch_paused_ps + f.nic_paused_ps)),
                       f.ecn_marks, f.cnps, f.drops, f.retransmits, f.max_buffer_bytes);
  }
  out << fmt::format("engine: {} events, {} windows, {:.3g} events/s, {} processes x {} threads, wall {:.3f} s\n",
                     stats.events, stats.windows, stats.events_per_s(), nprocs, threads, stats.wall_s);
  if (opt.stats) {
    out << partition::partition_report(placement, edges, lp_weight);
    out << fmt::format("stats: lookahead {}, remote events {}, cross-thread events {}, time in sync {:.3f} s, "
                       "exchange {} messages {} B, cut links {}\n",
                       w_ps == engine::kInfinity ? std::string("none (nothing cut)") : engine::format_time(w_ps),
                       stats.remote_events, stats.thread_events, stats.sync_s, stats.exchange_messages,
                       stats.exchange_bytes, partition::cut_edges(placement, edges));
    if (net) {  // the flow rung's network LP lives on one process: its counters, when it is this one
      out << fmt::format("flow solver: {} flows, {} re-solves, {} flows re-solved ({:.1f} per re-solve)\n",
                         net->flows(), net->solves(), net->resolved_flows(),
                         net->solves() ? double(net->resolved_flows()) / double(net->solves()) : 0.0);
      out << fmt::format("flow routes: {} look-ups, {} misses ({:.1f}%), {} cache entries\n", net->route_lookups(),
                         net->route_misses(),
                         net->route_lookups() ? 100.0 * double(net->route_misses()) / double(net->route_lookups()) : 0.0,
                         net->route_entries());
    }
  }
  out << "results digest: " << res.digest << "\n";
  if (!res.output_h5.empty()) out << "output: " << fs::absolute(res.output_h5).string() << "\n";
  res.summary_text = out.str();

  std::string json_text;
  if (!spec.summary_json.empty()) {
    nlohmann::json j;
    j["simulated_time_ps"] = sim_end;
    j["iteration_time_ps"] = iter;
    j["iterations"] = res.iterations;
    j["events"] = stats.events;
    j["windows"] = stats.windows;
    j["wall_s"] = m.wall_s;
    j["processes"] = nprocs;
    j["threads"] = threads;
    j["fidelity"] = models::fidelity_name(fidelity);
    j["ranks"] = w.ranks;
    j["workload"] = w.source;
    j["format"] = w.format;
    j["digest"] = res.digest;
    j["nccl_env"] = nlohmann::json::object();
    for (const auto& [name, value] : nccl_env) j["nccl_env"][name] = value;
    j["flows"] = res.flows;
    {
      const FabricTotals& f = res.fabric;
      j["fabric"] = {{"cc", models::cc_name(spec.fabric.nic.cc)}, {"pfc", spec.fabric.sw.pfc},
                     {"routing", models::routing_name(spec.fabric.sw.routing)},
                     {"switch_packets", f.switch_packets}, {"nic_data_packets", f.nic_data_packets},
                     {"pause_frames", f.pause_frames}, {"resume_frames", f.resume_frames},
                     {"switch_paused_ps", f.switch_paused_ps}, {"nic_paused_ps", f.nic_paused_ps},
                     {"ecn_marks", f.ecn_marks}, {"drops", f.drops}, {"headroom_drops", f.headroom_drops},
                     {"retransmits", f.retransmits}, {"timeouts", f.timeouts}, {"nacks", f.nacks},
                     {"cnps", f.cnps}, {"acks", f.acks}, {"max_buffer_bytes", f.max_buffer_bytes},
                     {"nvls_absorbed", f.nvls_absorbed}, {"nvls_copies", f.nvls_copies}};
    }
    j["output_h5"] = res.output_h5;
    j["compute_ps_mean"] = comp / nr;
    j["comm_ps_mean"] = commu / nr;
    j["exposed_comm_ps_mean"] = exposed / nr;
    if (gen.used) {
      j["model_flops"] = gen.stats.model_flops;
      j["tflops_per_gpu"] = tflops_per_gpu;
      j["mfu"] = mfu;
      if (!gen.stats.memory.stages.empty()) {
        const auto& mem = gen.stats.memory;
        const auto& pk = mem.peak();
        j["memory_per_gpu"] = {{"estimate_bytes", pk.total_bytes()},
                               {"pp_rank", pk.pp_rank},
                               {"weights_bytes", pk.weights_bytes},
                               {"grads_bytes", pk.grads_bytes},
                               {"optimizer_bytes", pk.optimizer_bytes},
                               {"activation_bytes", pk.activation_bytes},
                               {"inflight_microbatches", pk.inflight},
                               {"hbm_bytes", mem.capacity_bytes},
                               {"exceeds_hbm", mem.exceeds()}};
      }
    }
    if (gen.infer.used) {
      nlohmann::json inf;
      inf["batch"] = gen.batch;
      inf["replicas"] = gen.replicas;
      inf["prompt_tokens"] = gen.prompt_tokens;
      inf["output_tokens"] = gen.output_tokens;
      inf["decode_steps"] = decode_steps;
      inf["ttft_ps"] = ttft;
      inf["tpot_ps"] = tpot;
      inf["total_ps"] = sim_end;
      inf["output_tokens_per_s"] = out_tok_s;
      inf["prompt_tokens_per_s"] = prompt_tok_s;
      inf["prefill_flops"] = gen.infer.phase_flops.empty() ? 0.0 : gen.infer.phase_flops[0];
      double dec = 0;
      for (std::size_t i = 1; i < gen.infer.phase_flops.size(); ++i) dec += gen.infer.phase_flops[i];
      inf["decode_flops"] = dec;
      std::vector<engine::SimTime> steps;
      for (std::uint32_t k = 1; k <= decode_steps; ++k) steps.push_back(phase_end[k] - phase_end[k - 1]);
      inf["decode_step_ps"] = steps;
      j["inference"] = inf;
    }
    j["collectives"] = nlohmann::json::array();
    for (const auto& c : res.collectives) {
      j["collectives"].push_back({{"group", c.group}, {"instance", c.instance}, {"op", c.op}, {"bytes", c.bytes},
                                  {"ranks", c.ranks}, {"start_ps", c.start_ps}, {"end_ps", c.end_ps},
                                  {"algbw_GBps", c.algbw_GBps}, {"busbw_GBps", c.busbw_GBps}});
    }
    json_text = j.dump(2) + "\n";
  }
  // Outputs, all or nothing: the JSON is staged under a temporary name, then the HDF5 file is
  // written (itself atomically), then the JSON is renamed into place.
  const std::string json_tmp = spec.summary_json.empty() ? std::string() : spec.summary_json + ".tmp";
  if (!json_tmp.empty()) {
    std::string err;
    if (rank == 0) err = write_file_checked(json_tmp, json_text);
    bcast_error(comm, err, "--summary-json " + spec.summary_json);
  }
  // The trace is staged like the JSON (rank 0 gathers the traced ranks' intervals).
  const std::string trace_tmp = spec.trace_path.empty() ? std::string() : spec.trace_path + ".tmp";
  if (!trace_tmp.empty()) {
    std::vector<models::TraceInterval> local_trace;
    for (const auto& g : gpus) local_trace.insert(local_trace.end(), g->trace().begin(), g->trace().end());
    const auto all_trace = allgather_pod(comm, local_trace);
    // NIC tracks: the traced ranks' own port bins.
    std::vector<std::unique_ptr<models::SwitchLp>> no_switches;
    std::vector<io::LinkBinRecord> gpu_bins, traced_bins;
    std::vector<io::QueueBinRecord> unused;
    collect_link_series(topo, gpus, no_switches, spec.sample_interval_ps, gpu_bins, unused);
    for (const auto& b : gpu_bins) {
      if (b.from_node < w.ranks && b.from_node >= spec.trace_rank_lo && b.from_node <= spec.trace_rank_hi) {
        traced_bins.push_back(b);
      }
    }
    const auto all_bins = allgather_pod(comm, traced_bins);
    std::string err;
    if (rank == 0) {
      err = write_file_checked(trace_tmp, trace_json(all_trace, w, res.collectives, all_bins, spec.sample_interval_ps));
    }
    if (!err.empty() && !json_tmp.empty()) fs::remove(json_tmp);
    bcast_error(comm, err, "--trace " + spec.trace_path);
  }
  auto drop_staged = [&] {
    if (rank != 0) return;
    std::error_code ec;
    if (!json_tmp.empty()) fs::remove(json_tmp, ec);
    if (!trace_tmp.empty()) fs::remove(trace_tmp, ec);
  };
  if (opt.keep_flows) {
    std::vector<io::LinkBinRecord> local_links;
    std::vector<io::QueueBinRecord> local_queues;
    collect_link_series(topo, gpus, switches, spec.sample_interval_ps, local_links, local_queues);
    res.link_records = allgather_pod(comm, local_links);
    res.queue_records = allgather_pod(comm, local_queues);
  }
  if (write_h5) {
    std::vector<io::LinkBinRecord> local_links;
    std::vector<io::QueueBinRecord> local_queues;
    collect_link_series(topo, gpus, switches, spec.sample_interval_ps, local_links, local_queues);
    try {
      io::write_results_h5(comm, spec.output_h5, m, local_ranks,
                           rank == 0 ? res.collectives : std::vector<io::CollectiveRecord>{}, local_flows,
                           std::move(local_links), std::move(local_queues), spec.sample_interval_ps);
    } catch (...) {
      drop_staged();
      throw;
    }
  }
  if (!trace_tmp.empty()) {
    std::string err;
    if (rank == 0) {
      std::error_code ec;
      fs::rename(trace_tmp, spec.trace_path, ec);
      if (ec) err = "cannot rename " + trace_tmp + ": " + ec.message();
    }
    if (!err.empty()) drop_staged();
    bcast_error(comm, err, "--trace " + spec.trace_path);
  }
  if (!json_tmp.empty()) {
    std::string err;
    if (rank == 0) {
      std::error_code ec;
      fs::rename(json_tmp, spec.summary_json, ec);
      if (ec) {
        err = "cannot rename " + json_tmp + ": " + ec.message();
        fs::remove(json_tmp);
      }
    }
    bcast_error(comm, err, "--summary-json " + spec.summary_json);
  }
  log->info("done: iteration {}, {} events, wall {:.3f} s", engine::format_time(res.meta.simulated_time_ps),
            res.stats.events, now_s() - t0);
  return res;
}

}  // namespace fabricsim::jobs
