// `jobs:` specs (docs/jobs_and_faults.md, "Jobs"): placement of each job on the cluster's hosts,
// the merged workload all jobs run in on one fabric, per-job planners and per-job results.
#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/units.hpp"
#include "jobs/run/context.hpp"
#include "kernels/compute_time.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;

namespace {

/// The hosts a job gets, from the hosts still free (`owner[h] < 0`), per its placement.
/// leaf_of_host / pod_of_host: the leaf (first NIC's) and pod of each host.
std::vector<std::uint32_t> place_job(const JobSpec& j, std::uint32_t need, const std::vector<std::int32_t>& owner,
                                     const std::vector<std::uint32_t>& leaf_of_host,
                                     const std::vector<std::uint32_t>& pod_of_host, const std::vector<JobRun>& placed,
                                     const std::string& file) {
  const auto hosts = static_cast<std::uint32_t>(owner.size());
  if (j.placement == "hosts") {
    if (j.hosts.size() != need) {
      throw InputError(file, j.key + ".hosts",
                       fmt::format("lists {} hosts but job '{}' needs {}", j.hosts.size(), j.name, need),
                       fmt::format("list exactly {} hosts (its ranks / cluster.gpus_per_host, rounded up)", need));
    }
    for (std::uint32_t h : j.hosts) {
      if (h >= hosts) {
        throw InputError(file, j.key + ".hosts", fmt::format("host {} is beyond the cluster's {} hosts (0..{})", h, hosts, hosts - 1),
                         "list hosts below cluster.hosts, or raise cluster.hosts");
      }
      if (owner[h] >= 0) {
        throw InputError(file, j.key + ".hosts",
                         fmt::format("host {} is also placed for job '{}': job placements overlap", h, placed[owner[h]].name),
                         "give the jobs disjoint host lists (or let this job take free hosts: placement packed)");
      }
    }
    return j.hosts;
  }
  std::vector<std::uint32_t> order;  // candidate hosts in the policy's order
  for (std::uint32_t h = 0; h < hosts; ++h) {
    if (owner[h] < 0) order.push_back(h);
  }
  if (order.size() < need) {
    throw InputError(file, j.key + ".placement",
                     fmt::format("job '{}' needs {} hosts but only {} are free after the jobs before it", j.name, need,
                                 order.size()),
                     "raise cluster.hosts, or give the jobs fewer GPUs");
  }
  if (j.placement == "spread") {
    // Round-robin over leaves: the i-th free host of every leaf before the (i+1)-th of any.
    std::map<std::uint32_t, std::uint32_t> seen;  // leaf -> free hosts taken so far in the order
    std::vector<std::pair<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t>> keyed;
    for (std::uint32_t h : order) keyed.push_back({{seen[leaf_of_host[h]]++, leaf_of_host[h]}, h});
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = keyed[i].second;
  } else if (j.placement == "random") {
    engine::CounterRng rng(j.seed, 0x6a6f6273);  // "jobs": the job's own stream of its seed
    for (std::size_t i = order.size(); i > 1; --i) {
      const std::size_t k = static_cast<std::size_t>(rng.next_u64() % i);
      std::swap(order[i - 1], order[k]);
    }
  } else if (j.placement == "leaf" || j.placement == "pod") {
    // Whole free groups (leaves, or pods) first, in index order, then the partly used ones.
    const auto& group_of = j.placement == "leaf" ? leaf_of_host : pod_of_host;
    std::map<std::uint32_t, bool> whole;  // group -> no host of it taken
    for (std::uint32_t h = 0; h < hosts; ++h) whole.emplace(group_of[h], true);
    for (std::uint32_t h = 0; h < hosts; ++h) {
      if (owner[h] >= 0) whole[group_of[h]] = false;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const bool wa = whole[group_of[a]], wb = whole[group_of[b]];
      if (wa != wb) return wa;
      return group_of[a] < group_of[b];
    });
  }
  order.resize(need);
  return order;
}

/// `w` (one job's workload, unshared) with its DAG run `iterations` times back to back: the
/// first nodes of each iteration depend on the last nodes (nodes no other node depends on) of
/// the one before; and, when start_ps > 0, one host op of start_ps before the first nodes.
std::vector<models::WorkNode> repeat_program(const std::vector<models::WorkNode>& prog, std::uint32_t iterations,
                                             engine::SimTime start_ps) {
  const auto n = static_cast<std::uint32_t>(prog.size());
  std::vector<std::uint32_t> sinks;
  {
    std::vector<char> has_child(n, 0);
    for (const auto& node : prog) {
      for (std::uint32_t d : node.deps) has_child[d] = 1;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!has_child[i]) sinks.push_back(i);
    }
  }
  std::vector<models::WorkNode> out;
  const std::uint32_t base = start_ps > 0 ? 1 : 0;
  out.reserve(std::size_t{n} * iterations + base);
  if (n == 0) return out;
  if (base) {
    models::WorkNode s;
    s.name = "job start";
    s.duration_ps = start_ps;
    s.host = true;
    s.type = models::NodeType::kCompute;
    out.push_back(std::move(s));
  }
  for (std::uint32_t k = 0; k < iterations; ++k) {
    const std::uint32_t off = base + k * n;
    for (std::uint32_t i = 0; i < n; ++i) {
      models::WorkNode node = prog[i];
      for (auto& d : node.deps) d += off;
      if (prog[i].deps.empty()) {
        if (k > 0) {
          for (std::uint32_t s : sinks) node.deps.push_back(off - n + s);
        } else if (base) {
          node.deps.push_back(0);
        }
      }
      out.push_back(std::move(node));
    }
  }
  return out;
}

/// Per-job planners behind one: a collective goes to the planner of its communicator's job, a
/// send to the sender's. Each planner is a pure function of its requests, so this is one too.
class JobsPlanner final : public models::CollectivePlanner {
 public:
  JobsPlanner(std::vector<std::unique_ptr<models::CollectivePlanner>> per_job, std::vector<std::int32_t> job_of_gpu)
      : per_(std::move(per_job)), job_of_(std::move(job_of_gpu)) {}
  models::RankPlan plan(const models::CollRequest& req) const override { return of(req.ranks->front()).plan(req); }
  models::P2pRoute p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override {
    return of(src).p2p_route(src, dst, bytes);
  }
  std::int64_t start_latency_ps(const models::CollRequest& req) const override {
    return of(req.ranks->front()).start_latency_ps(req);
  }
  std::int64_t p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override {
    return of(src).p2p_start_latency_ps(src, dst, bytes);
  }

 private:
  const models::CollectivePlanner& of(std::uint32_t gpu) const {
    const std::int32_t j = gpu < job_of_.size() ? job_of_[gpu] : -1;
    if (j < 0) throw engine::InternalError("a collective on a GPU that runs no job");
    return *per_[static_cast<std::size_t>(j)];
  }
  std::vector<std::unique_ptr<models::CollectivePlanner>> per_;
  std::vector<std::int32_t> job_of_;
};

}  // namespace

void merge_jobs(RunContext& c) {
  const Spec& spec = c.spec;
  const std::string& file = spec.file;
  const std::uint32_t gph = spec.cluster.gpus_per_host;
  const std::uint64_t cluster_gpus = std::uint64_t{spec.cluster.hosts} * gph;
  // Every job's workload first: the sizes decide whether the jobs fit at all.
  std::vector<models::Workload> ws;
  std::uint64_t need_gpus = 0, need_hosts = 0;
  for (const JobSpec& j : spec.jobs) {
    GenInfo gi;
    models::Workload wj;
    try {
      wj = load_spec_workload(*j.spec, &gi);
    } catch (const InputError& e) {
      std::string m = e.what();
      const auto at = m.find(": " + e.field());
      if (at != std::string::npos && e.field().rfind("workload", 0) == 0) m.insert(at + 2, j.key + ".");
      throw InputError(InputError::Whole{}, m);
    }
    check_workload(wj);
    wj.unshare();
    for (auto& prog : wj.programs) {
      for (auto& n : prog) n.duration_ps = kernels::scaled_duration(n.duration_ps, j.spec->compute_scale);
    }
    for (const auto& warning : wj.warnings) c.log->warn("{}: {}", j.name, engine::printable(warning));
    JobRun jr;
    jr.name = j.name;
    jr.source = workload_desc(wj);
    jr.start_ps = j.start_ps;
    jr.iterations = j.iterations * (gi.used ? std::max<std::uint32_t>(1, gi.iterations) : 1);
    need_gpus += wj.ranks;
    need_hosts += (wj.ranks + gph - 1) / gph;
    c.jobs.push_back(std::move(jr));
    ws.push_back(std::move(wj));
  }
  if (need_hosts > spec.cluster.hosts) {
    throw InputError(file, "jobs",
                     fmt::format("the {} jobs need {} GPUs ({} hosts of {} GPUs) but the cluster has {} GPUs "
                                 "(cluster.hosts {} x cluster.gpus_per_host {})",
                                 spec.jobs.size(), need_gpus, need_hosts, gph, cluster_gpus, spec.cluster.hosts, gph),
                     fmt::format("set cluster.hosts >= {}, or give the jobs fewer GPUs", need_hosts));
  }
  // Leaf and pod of each host, from the cluster the run builds.
  const models::ClusterSpec cs = resolve_cluster(spec, static_cast<std::uint32_t>(cluster_gpus));
  const models::Topology topo(cs);
  const std::uint32_t hosts = cs.hosts;
  std::vector<std::uint32_t> leaf_of_host(hosts), pod_of_host(hosts, 0);
  const std::uint32_t leaves = std::max<std::uint32_t>(1, topo.num_leaves());
  const std::uint32_t pods = cs.tiers == 3 ? std::max<std::uint32_t>(1, cs.pods) : 1;
  for (std::uint32_t h = 0; h < hosts; ++h) {
    leaf_of_host[h] = topo.num_leaves() > 0 ? topo.leaf_of(h * gph) : 0;
    pod_of_host[h] = leaf_of_host[h] / std::max<std::uint32_t>(1, leaves / pods);
  }
  std::vector<std::int32_t> owner(hosts, -1);
  for (std::size_t k = 0; k < spec.jobs.size(); ++k) {
    const std::uint32_t need = (ws[k].ranks + gph - 1) / gph;
    JobRun& jr = c.jobs[k];
    jr.hosts = place_job(spec.jobs[k], need, owner, leaf_of_host, pod_of_host, c.jobs, file);
    for (std::uint32_t h : jr.hosts) owner[h] = static_cast<std::int32_t>(k);
    for (std::uint32_t h : jr.hosts) {
      for (std::uint32_t g = 0; g < gph && jr.gpus.size() < ws[k].ranks; ++g) jr.gpus.push_back(h * gph + g);
    }
    jr.simulated = c.opt.only_job < 0 || c.opt.only_job == static_cast<int>(k);
  }
  if (c.opt.only_job >= static_cast<int>(spec.jobs.size())) {
    throw engine::InternalError("only_job beyond the spec's jobs");
  }
  // The merged workload: rank = GPU, the world of all GPUs first, then each job's communicators.
  models::Workload& w = c.w;
  w = models::Workload{};
  w.format = "jobs";
  w.ranks = static_cast<std::uint32_t>(cluster_gpus);
  w.programs.resize(w.ranks);
  models::CommGroup world;
  world.name = "world";
  world.ranks.resize(w.ranks);
  std::iota(world.ranks.begin(), world.ranks.end(), 0u);
  w.groups.push_back(std::move(world));
  c.job_of_gpu.assign(w.ranks, -1);
  std::string source;
  for (std::size_t k = 0; k < ws.size(); ++k) {
    JobRun& jr = c.jobs[k];
    models::Workload& wj = ws[k];
    source += (k ? ", " : "") + jr.name + " " + wj.source;
    jr.group_begin = static_cast<std::uint32_t>(w.groups.size());
    for (const auto& g : wj.groups) {
      models::CommGroup m = g;
      m.name = jr.name + "/" + g.name;
      for (auto& r : m.ranks) r = jr.gpus[r];
      w.groups.push_back(std::move(m));
    }
    jr.group_end = static_cast<std::uint32_t>(w.groups.size());
    for (std::uint32_t r = 0; r < wj.ranks; ++r) {
      const std::uint32_t gpu = jr.gpus[r];
      c.job_of_gpu[gpu] = static_cast<std::int32_t>(k);
      if (!jr.simulated) continue;
      auto& prog = wj.programs[r];
      for (auto& n : prog) {
        if (n.type == models::NodeType::kCollective) n.group += static_cast<std::int32_t>(jr.group_begin);
        if ((n.type == models::NodeType::kSend || n.type == models::NodeType::kRecv) && n.peer >= 0) {
          n.peer = static_cast<std::int32_t>(jr.gpus[static_cast<std::uint32_t>(n.peer)]);
        }
      }
      w.programs[gpu] = repeat_program(prog, spec.jobs[k].iterations, jr.start_ps);
      prog.clear();
      prog.shrink_to_fit();
    }
  }
  w.source = "jobs: " + source;
  if (c.rank == 0) {
    for (const JobRun& jr : c.jobs) {
      c.log->info("job {}: {} GPUs on hosts {}..., start {}, {} iteration(s)", jr.name, jr.gpus.size(),
                  jr.hosts.empty() ? 0 : jr.hosts.front(), engine::format_time(jr.start_ps), jr.iterations);
    }
  }
}

void make_job_planners(RunContext& c) {
  const Spec& spec = c.spec;
  if (spec.jobs.empty()) return;
  bool own = false;
  for (const JobSpec& j : spec.jobs) own = own || j.spec->nccl != spec.nccl;
  if (!own) return;
  std::vector<std::unique_ptr<models::CollectivePlanner>> per;
  for (const JobSpec& j : spec.jobs) {
    simccl::PlannerBuild b = simccl::make_planner(spec.planner, j.spec->nccl, spec.file, spec.gpu_sm, c.cspec, true,
                                                  j.spec->simccl_extras);
    for (const auto& warning : b.warnings) c.log->warn("{}: {}", j.name, engine::printable(warning));
    per.push_back(std::move(b.planner));
  }
  c.planned.planner = std::make_unique<JobsPlanner>(std::move(per), c.job_of_gpu);
}

std::vector<JobMetrics> job_metrics(const RunContext& c) {
  std::vector<JobMetrics> out(c.jobs.size());
  for (std::size_t k = 0; k < c.jobs.size(); ++k) {
    const JobRun& jr = c.jobs[k];
    JobMetrics& m = out[k];
    if (!jr.simulated || jr.gpus.empty()) continue;
    for (std::uint32_t g : jr.gpus) {
      const io::RankRecord& r = c.res.ranks[g];
      m.finish_ps = std::max(m.finish_ps, r.finish_ps);
      m.compute_ps += static_cast<double>(r.compute_ps);
      m.comm_ps += static_cast<double>(r.comm_ps);
      m.exposed_ps += static_cast<double>(r.exposed_comm_ps);
    }
    const double div = static_cast<double>(jr.gpus.size()) * jr.iterations;
    m.compute_ps /= div;
    m.comm_ps /= div;
    m.exposed_ps /= div;
    m.iter_ps = std::max<engine::SimTime>(0, m.finish_ps - jr.start_ps) / jr.iterations;
  }
  return out;
}

namespace {

/// Per (op, bytes) of a job's collectives: count and mean bus bandwidth (GB/s).
struct BusbwRow {
  std::string op;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  double busbw_sum = 0;
};

std::vector<BusbwRow> busbw_rows(const RunContext& c, const JobRun& jr) {
  std::map<std::pair<std::string, std::uint64_t>, BusbwRow> rows;
  for (const auto& r : c.res.collectives) {
    if (r.group < jr.group_begin || r.group >= jr.group_end) continue;
    BusbwRow& row = rows[{r.op, r.bytes}];
    row.op = r.op;
    row.bytes = r.bytes;
    ++row.count;
    row.busbw_sum += r.busbw_GBps;
  }
  std::vector<BusbwRow> out;
  for (auto& [key, row] : rows) out.push_back(row);
  return out;
}

engine::SimTime alone_of(const RunContext& c, std::size_t k) {
  return k < c.opt.alone_iter_ps.size() ? c.opt.alone_iter_ps[k] : -1;
}

}  // namespace

std::string jobs_summary(const RunContext& c, const std::vector<JobMetrics>& m) {
  std::string out;
  for (std::size_t k = 0; k < c.jobs.size(); ++k) {
    const JobRun& jr = c.jobs[k];
    if (!jr.simulated) continue;
    const JobMetrics& jm = m[k];
    std::string alone;
    if (const engine::SimTime a = alone_of(c, k); a > 0) {
      alone = fmt::format(", alone {}, slowdown {:.4f}x", engine::format_time(a),
                          static_cast<double>(jm.iter_ps) / static_cast<double>(a));
    }
    out += fmt::format("job {}: {} GPUs on {} hosts ({}..{}), start {}, {} iteration(s): iteration time {} ({} ps){}\n",
                       jr.name, jr.gpus.size(), jr.hosts.size(), jr.hosts.front(), jr.hosts.back(),
                       engine::format_time(jr.start_ps), jr.iterations, engine::format_time(jm.iter_ps), jm.iter_ps, alone);
    out += fmt::format("  per rank and iteration: compute {}, communication {}, exposed communication {}\n",
                       engine::format_time(static_cast<engine::SimTime>(jm.compute_ps)),
                       engine::format_time(static_cast<engine::SimTime>(jm.comm_ps)),
                       engine::format_time(static_cast<engine::SimTime>(jm.exposed_ps)));
    for (const BusbwRow& r : busbw_rows(c, jr)) {
      out += fmt::format("  {} {} B x{}: busbw {:.2f} GB/s (mean)\n", r.op, r.bytes, r.count,
                         r.busbw_sum / static_cast<double>(r.count));
    }
  }
  return out;
}

std::string jobs_json(const RunContext& c, const std::vector<JobMetrics>& m) {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t k = 0; k < c.jobs.size(); ++k) {
    const JobRun& jr = c.jobs[k];
    if (!jr.simulated) continue;
    const JobMetrics& jm = m[k];
    nlohmann::json j;
    j["name"] = jr.name;
    j["workload"] = jr.source;
    j["gpus"] = jr.gpus.size();
    j["hosts"] = jr.hosts;
    j["start_ps"] = jr.start_ps;
    j["iterations"] = jr.iterations;
    j["finish_ps"] = jm.finish_ps;
    j["iteration_time_ps"] = jm.iter_ps;
    const engine::SimTime a = alone_of(c, k);
    if (a > 0) {
      j["alone_iteration_time_ps"] = a;
      j["slowdown"] = static_cast<double>(jm.iter_ps) / static_cast<double>(a);
    } else {
      j["alone_iteration_time_ps"] = nullptr;
      j["slowdown"] = nullptr;
    }
    j["compute_ps"] = jm.compute_ps;
    j["comm_ps"] = jm.comm_ps;
    j["exposed_comm_ps"] = jm.exposed_ps;
    nlohmann::json colls = nlohmann::json::array();
    for (const BusbwRow& r : busbw_rows(c, jr)) {
      colls.push_back({{"op", r.op}, {"bytes", r.bytes}, {"count", r.count},
                       {"busbw_GBps_mean", r.busbw_sum / static_cast<double>(r.count)}});
    }
    j["collectives"] = std::move(colls);
    list.push_back(std::move(j));
  }
  return list.dump();
}

}  // namespace fabricsim::jobs::run_stages
