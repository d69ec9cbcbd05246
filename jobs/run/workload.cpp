// Stage `load_workloads` of `fabricsim run`: the workload, read or generated, and its checks.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "io/chakra_reader.hpp"
#include "io/simai_reader.hpp"
#include "jobs/generators.hpp"
#include "jobs/run/context.hpp"
#include "kernels/compute_time.hpp"

namespace fabricsim::jobs {

using engine::InputError;
namespace fs = std::filesystem;

models::Workload load_workload(const std::string& path, const std::string& format,
                               std::uint32_t gpus, const std::string& comm_groups,
                               const io::ChakraReadOptions& chakra) {
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
    io::ChakraReadOptions options = chakra;
    options.world_size = gpus;
    return io::read_chakra(prefix, comm_groups, options);
  }
  return io::read_simai(path, gpus);
}

namespace run_stages {

/// The spec's workload: generated when workload.generator.model is set, else read from a file.
models::Workload load_spec_workload(const Spec& spec, GenInfo* info) {
  if (spec.generator.count("model") == 0) {
    return load_workload(spec.workload_path, spec.workload_format, spec.workload_gpus, spec.comm_groups,
                         spec.chakra);
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
    info->tp = cfg.tp;
    info->cp = cfg.cp;
    info->pp = cfg.pp;
    info->ep = cfg.ep;
  }
  return std::move(g.workload);
}

namespace {

/// Communicators may only name ranks of the workload, each once (readers check their own group
/// files; this covers every source, in-memory workloads and generators included).
void check_groups(const models::Workload& w) {
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
}

/// Every send and receive names another rank of the workload; every collective has a group.
void check_peers(const models::Workload& w) {
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
}

/// Every member of a communicator must issue the same collectives (op, size, root) in the same
/// order; otherwise the run would deadlock or mix sizes. Checked before simulating so the error
/// names the rank and node that disagree with the communicator's first member.
void check_collective_order(const models::Workload& w) {
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

}  // namespace

void check_workload(const models::Workload& w) {
  check_groups(w);
  w.check_shared();
  check_peers(w);
  check_collective_order(w);
}

std::string workload_desc(const models::Workload& w) {
  const std::uint64_t nodes = w.total_nodes();
  return fmt::format("{} ({}, {} ranks, {} nodes, {} communicators)", w.source, w.format, w.ranks, nodes,
                     w.groups.size());
}

void load_workloads(RunContext& c) {
  const Spec& spec = c.spec;
  models::Workload& w = c.w;
  if (!spec.jobs.empty()) {
    merge_jobs(c);  // jobs/run/multi_job.cpp: every job's workload on its placement, scaled
    check_workload(w);
    c.log->info("jobs: {} ranks on {} GPUs, {} nodes ({:.3f} s)", c.jobs.size(), w.ranks, w.total_nodes(), now_s() - c.t0);
    return;
  }
  w = c.opt.workload_data != nullptr ? *c.opt.workload_data : load_spec_workload(spec, &c.gen);
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
  for (const auto& warning : w.warnings) c.log->warn("{}", engine::printable(warning));  // may quote input bytes
  c.log->info("workload {}: {} ranks, {} nodes ({:.3f} s)", w.source, w.ranks, w.total_nodes(), now_s() - c.t0);
  for (auto& prog : w.programs) {
    for (auto& n : prog) n.duration_ps = kernels::scaled_duration(n.duration_ps, spec.compute_scale);
  }
}

}  // namespace run_stages
}  // namespace fabricsim::jobs
