#include "jobs/nccl_tests.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"
#include "simccl/custom_planner.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/planner_factory.hpp"

namespace fabricsim::jobs {

using engine::InputError;

std::uint64_t parse_nccl_tests_size(const std::string& text, const std::string& flag) {
  // nccl-tests parsesize(): a number with an optional K/M/G suffix (x1024 each).
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) throw InputError("<cli>", flag + " " + text, "not a size", "give bytes with an optional K, M or G suffix, e.g. 128M");
  const std::string suf = text.substr(i);
  if (!suf.empty() && suf[0] == '.') {
    throw InputError("<cli>", flag + " " + text, "decimal sizes are not supported", "give whole bytes or K/M/G, e.g. 1536K");
  }
  unsigned shift = 0;
  if (suf == "K" || suf == "k") shift = 10;
  else if (suf == "M" || suf == "m") shift = 20;
  else if (suf == "G" || suf == "g") shift = 30;
  else if (!suf.empty()) throw InputError("<cli>", flag + " " + text, "unknown suffix '" + suf + "'", "use K, M or G");
  // Sizes from 1 B to 64 GiB: 0 would never grow under -f, and a plan's message count grows with
  // the size (a 64 GiB AllReduce is already ~2 M messages per rank pair chain).
  constexpr std::uint64_t kMax = std::uint64_t{64} << 30;
  const std::string digits = text.substr(0, i);
  std::uint64_t v = 0;
  for (char ch : digits) {
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
    if (v > kMax) break;
  }
  if (v <= kMax) v <<= shift;
  if (v == 0 || v > kMax) {
    throw InputError("<cli>", flag + " " + text, v == 0 ? "a size of 0 bytes" : "above 64G",
                     "give a size from 1 to 64G bytes");
  }
  return v;
}

namespace {

struct CollInfo {
  const char* name;
  bool p2p;
  models::CollOp op;
  const char* redop;
  bool rooted;
  std::uint32_t per_rank_split;  // sizes are rounded to a multiple of nranks x 4 B
};

CollInfo coll_info(const std::string& name) {
  using models::CollOp;
  if (name == "all_reduce") return {"all_reduce", false, CollOp::kAllReduce, "sum", false, 0};
  if (name == "all_gather") return {"all_gather", false, CollOp::kAllGather, "none", false, 1};
  if (name == "reduce_scatter") return {"reduce_scatter", false, CollOp::kReduceScatter, "sum", false, 1};
  if (name == "alltoall") return {"alltoall", false, CollOp::kAllToAll, "none", false, 1};
  if (name == "broadcast") return {"broadcast", false, CollOp::kBroadcast, "none", true, 0};
  if (name == "reduce") return {"reduce", false, CollOp::kReduce, "sum", true, 0};
  if (name == "sendrecv") return {"sendrecv", true, CollOp::kAllReduce, "none", false, 0};
  throw InputError("<cli>", "collective '" + name + "'", "not an nccl-tests collective",
                   "use all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce or sendrecv");
}

}  // namespace

models::Workload nccl_tests_workload(const std::string& collective, std::uint32_t ranks, std::uint64_t bytes,
                                     std::uint32_t root) {
  const CollInfo ci = coll_info(collective);
  models::Workload w;
  w.source = "nccl-tests:" + collective;
  w.format = "generated";
  w.ranks = ranks;
  models::CommGroup world;
  world.name = "world";
  for (std::uint32_t r = 0; r < ranks; ++r) world.ranks.push_back(r);
  w.groups.push_back(world);
  w.programs.resize(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (ci.p2p) {
      if (ranks < 2) continue;
      // sendrecv_perf: every rank sends to rank+1 and receives from rank-1.
      models::WorkNode s;
      s.name = "send";
      s.type = models::NodeType::kSend;
      s.bytes = bytes;
      s.peer = static_cast<std::int32_t>((r + 1) % ranks);
      models::WorkNode v;
      v.name = "recv";
      v.type = models::NodeType::kRecv;
      v.bytes = bytes;
      v.peer = static_cast<std::int32_t>((r + ranks - 1) % ranks);
      v.source_id = 1;
      w.programs[r] = {s, v};
    } else {
      models::WorkNode n;
      n.name = collective;
      n.type = models::NodeType::kCollective;
      n.op = ci.op;
      n.bytes = bytes;
      n.group = 0;
      n.root = static_cast<std::int32_t>(root);
      w.programs[r] = {n};
    }
  }
  return w;
}

namespace {

simccl::Func func_of_op(models::CollOp op) {
  switch (op) {
    case models::CollOp::kBroadcast: return simccl::Func::kBroadcast;
    case models::CollOp::kReduce: return simccl::Func::kReduce;
    case models::CollOp::kAllGather: return simccl::Func::kAllGather;
    case models::CollOp::kReduceScatter: return simccl::Func::kReduceScatter;
    default: return simccl::Func::kAllReduce;
  }
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.4g} {}", b, units[u]);
}

/// nccl-tests and plan size the cluster from -g and -n: a --set of the same keys would be
/// overridden without a word. @throws InputError naming the key.
void refuse_cluster_size_sets(const std::vector<std::string>& sets) {
  for (const std::string& s : sets) {
    for (const char* key : {"cluster.gpus_per_host", "cluster.hosts"}) {
      const std::string k = key;
      if (s.rfind(k, 0) == 0 && s.size() > k.size() && (s[k.size()] == '=' || s[k.size()] == ' ')) {
        throw InputError("<cli>", "--set " + k, "is set by -g (GPUs per node) and -n (nodes) here",
                         "give -g/-n instead of --set " + k);
      }
    }
  }
}

}  // namespace

std::string plan_report(const NcclTestsOptions& opt, std::uint64_t bytes) {
  const CollInfo ci = coll_info(opt.collective);
  const std::uint32_t n = opt.gpus_per_node * opt.nodes;
  if (ci.rooted && opt.root >= n) {
    throw InputError("<cli>", "-r " + std::to_string(opt.root), "root is not a rank of the " + std::to_string(n) + "-rank run",
                     "give -r below " + std::to_string(n));
  }
  refuse_cluster_size_sets(opt.sets);
  std::vector<std::string> sets = opt.sets;
  sets.push_back("cluster.gpus_per_host=" + std::to_string(opt.gpus_per_node));
  sets.push_back("cluster.hosts=" + std::to_string(opt.nodes));
  const Spec spec = load_spec(opt.spec_path, sets);
  const models::ClusterSpec cluster = resolve_cluster(spec, n);
  simccl::PlannerBuild pb =
      simccl::make_planner(spec.planner, spec.nccl, spec.file, spec.gpu_sm, cluster, true, spec.simccl_extras);
  const auto* nccl = simccl::nccl_planner_of(*pb.planner);
  const auto* custom = dynamic_cast<const simccl::CustomPlanner*>(pb.planner.get());
  const std::uint64_t unit = 4ull * (ci.per_rank_split ? n : 1);
  const std::uint64_t S = bytes / unit * unit;  // whole elements per rank, as nccl-tests

  std::ostringstream out;
  out << fmt::format("# fabricsim plan: {} of {} B ({}) on {} ranks = {} nodes x {} GPUs, planner {}\n", ci.name, S,
                     human_bytes(static_cast<double>(S)), n, opt.nodes, opt.gpus_per_node, spec.planner);
  out << fmt::format("# cluster: NVLink {:.1f} GB/s per GPU, NIC {:.1f} GB/s per GPU, sm{}\n",
                     static_cast<double>(cluster.nvlink_bps) / 8e9, static_cast<double>(cluster.nic_bps) / 8e9,
                     spec.gpu_sm);
  if (nccl != nullptr) {
    const auto& st = nccl->config().settings;
    if (st.applied.empty()) out << "# NCCL settings: none (NCCL 2.28 defaults)\n";
    for (const auto& a : st.applied) out << fmt::format("# {}={}  ({})\n", a.name, a.value, a.origin);
  }
  for (const auto& w : pb.warnings) out << "# warning: " << w << "\n";
  if (n < 2 || S == 0) {
    if (n < 2) {
      out << "nothing to plan: one rank\n";
    } else {
      out << fmt::format("nothing to plan: {} B rounds down to 0 whole 4-byte float elements{} (as nccl-tests "
                         "rounds sizes); give at least {} B\n",
                         bytes, ci.per_rank_split ? fmt::format(" for each of the {} ranks", n) : std::string(), unit);
    }
    return out.str();
  }
  std::vector<std::uint32_t> world(n);
  for (std::uint32_t r = 0; r < n; ++r) world[r] = r;
  models::CollRequest req;
  req.op = ci.op;
  req.bytes = S;
  req.ranks = &world;
  req.root_index = ci.rooted ? opt.root : 0;
  const simccl::CustomSchedule* sched = (custom && !ci.p2p) ? custom->match(req) : nullptr;

  if (sched != nullptr) {
    out << fmt::format("choice: {} schedule {} ({} transfers, {} chunks per buffer), replayed as given; the cost model "
                       "is not consulted\n",
                       sched->format, sched->path, sched->transfers, sched->chunks_per_buffer);
  } else if (nccl != nullptr && !ci.p2p && ci.op != models::CollOp::kAllToAll) {
    const simccl::Func f = func_of_op(ci.op);
    const simccl::NcclTuner& t = nccl->tuner(world);
    out << fmt::format("cost model (NCCL 2.28 tuning.cc): {} B, {} nodes x {} per node; ring graph {} ch x {:.1f} GB/s "
                       "intra, {:.1f} inter; tree graph {} ch x {:.1f} / {:.1f}; comm channels {}\n",
                       S, t.topo().n_nodes, t.topo().ppn, t.ring_graph().n_channels, t.ring_graph().bw_intra,
                       t.ring_graph().bw_inter, t.tree_graph().n_channels, t.tree_graph().bw_intra,
                       t.tree_graph().bw_inter, t.comm_channels());
    out << fmt::format("  {:<14} {:<7} {:>9} {:>10} {:>12}  {}\n", "algorithm", "proto", "lat(us)", "bw(GB/s)",
                       "time(us)", "status");
    const simccl::TuningDecision d = nccl->decision(req);
    for (int a = 0; a < simccl::kNumAlgos; ++a) {
      for (int p = 0; p < simccl::kNumProtos; ++p) {
        const auto A = static_cast<simccl::Algo>(a);
        const auto P = static_cast<simccl::Proto>(p);
        const double tm = t.time_us(f, A, P, S);
        const bool chosen = A == d.algo && P == d.proto;
        if (tm < 0) {
          out << fmt::format("  {:<14} {:<7} {:>9} {:>10} {:>12}  disabled: {}\n", simccl::algo_name(A),
                             simccl::proto_name(P), "-", "-", "-", t.unavailable_reason(f, A, P));
        } else {
          out << fmt::format("  {:<14} {:<7} {:>9.2f} {:>10.2f} {:>12.2f}  {}\n", simccl::algo_name(A),
                             simccl::proto_name(P), t.latency(f, A, P), t.bandwidth(f, A, P), tm,
                             chosen ? "enabled  <- chosen (lowest time)" : "enabled");
        }
      }
    }
    out << fmt::format("choice: {}/{} with {} of {} channels, {} threads, estimated {:.2f} us (time = latency + "
                       "bytes / bandwidth; channels drop while bytes < channels x threads x threshold)\n",
                       simccl::algo_name(d.algo), simccl::proto_name(d.proto), d.n_channels, t.comm_channels(),
                       d.n_threads, d.time_us);
  } else if (nccl != nullptr && ci.op == models::CollOp::kAllToAll && !ci.p2p) {
    const simccl::TuningDecision d = nccl->decision(req);
    out << fmt::format("choice: grouped point-to-point (not tuned: nccl.md §1.1), protocol {} (per-peer {} B vs "
                       "NCCL_P2P_LL_THRESHOLD), {} comm channels\n",
                       simccl::proto_name(d.proto), S / n, d.n_channels);
  } else if (ci.p2p) {
    out << "choice: point-to-point send/recv (not tuned); route per send from the planner (PXN rules, nccl.md §3.4)\n";
  } else {
    out << "choice: simccl.planner=" << spec.planner << " (one ring, no cost model)\n";
  }

  // The plan over all ranks.
  struct Sum {
    std::uint64_t msgs = 0, wire = 0, payload = 0, nvl = 0, net = 0, relay_msgs = 0, min_msg = ~0ull, max_msg = 0;
    std::set<std::uint32_t> channels;
    std::uint64_t max_sends_per_channel = 0;
  } sum;
  const std::uint32_t g = opt.gpus_per_node;
  auto account = [&](std::uint32_t src, std::uint32_t dst, std::uint64_t wire, std::uint64_t payload, bool relay) {
    ++sum.msgs;
    sum.wire += wire;
    sum.payload += payload;
    (src / g == dst / g ? sum.nvl : sum.net) += wire;
    if (relay) ++sum.relay_msgs;
    sum.min_msg = std::min(sum.min_msg, payload);
    sum.max_msg = std::max(sum.max_msg, payload);
  };
  if (ci.p2p) {
    for (std::uint32_t r = 0; r < n; ++r) {
      const std::uint32_t dst = (r + 1) % n;
      const models::P2pRoute route = pb.planner->p2p_route(r, dst, S);
      const bool relay = route.relay != models::P2pRoute::kDirect && route.relay != r && route.relay / g == r / g &&
                         dst / g != r / g;
      if (!relay) {
        account(r, dst, S, S, false);
        continue;
      }
      for (std::uint64_t off = 0; off < S; off += route.chunk_bytes) {
        const std::uint64_t b = std::min(route.chunk_bytes, S - off);
        account(r, route.relay, b, b, false);
        account(route.relay, dst, b, b, true);
      }
    }
    sum.channels.insert(0);
  } else {
    // Lazy Tree/NVLS plans are read op by op (no dependency lists built): `plan` at 32,768
    // ranks and 1 GiB visits ~7e8 messages.
    std::vector<std::uint64_t> per_channel;
    std::vector<bool> used_channel;
    for (std::uint32_t r = 0; r < n; ++r) {
      req.my_index = r;
      const models::RankPlan lazy = pb.planner->plan(req);
      per_channel.assign(per_channel.size(), 0);
      auto visit = [&](const models::P2pOp& op) {
        if (!op.is_send) return;
        const std::uint64_t payload = op.payload_bytes ? op.payload_bytes : op.bytes;
        account(r, op.peer, op.bytes, payload, op.relay);
        if (op.channel >= per_channel.size()) {
          per_channel.resize(op.channel + 1, 0);
          used_channel.resize(op.channel + 1, false);
        }
        used_channel[op.channel] = true;
        ++per_channel[op.channel];
      };
      if (lazy.lazy_tree) {
        for (std::uint32_t o = 0; o < lazy.lazy_tree->total; ++o) visit(lazy.lazy_tree->op(o));
      } else if (lazy.lazy_nvls) {
        for (std::uint32_t o = 0; o < lazy.lazy_nvls->total; ++o) visit(lazy.lazy_nvls->op(o));
      } else if (lazy.lazy_channels) {
        // The ring family's sends by cursor (channel, loop, step, slice), as the executor walks
        // them: ring plans grow as ranks x steps, so materializing each rank's plan with its
        // dependency lists made `plan` take minutes at 1,024 nodes.
        const models::LazyChannelRing& x = *lazy.lazy_channels;
        for (std::uint32_t c = 0; c < x.channels; ++c) {
          models::RingCursor cur;
          for (x.first(c, cur); !cur.done; x.advance(c, cur)) {
            const std::uint64_t data = x.send_data(c, cur);
            models::P2pOp op{true, x.next[c], x.wire(data), 0};
            op.payload_bytes = data;
            op.channel = static_cast<std::uint16_t>(c);
            visit(op);
          }
        }
      } else if (lazy.ops.empty()) {
        for (const auto& op : lazy.expanded().ops) visit(op);
      } else {
        for (const auto& op : lazy.ops) visit(op);
      }
      for (const std::uint64_t k : per_channel) sum.max_sends_per_channel = std::max(sum.max_sends_per_channel, k);
    }
    for (std::size_t c = 0; c < used_channel.size(); ++c) {
      if (used_channel[c]) sum.channels.insert(static_cast<std::uint32_t>(c));
    }
  }
  out << fmt::format("plan: {} messages over {} channels", sum.msgs, sum.channels.size());
  if (sum.max_sends_per_channel > 0) out << fmt::format(", at most {} sends per rank and channel (steps x slices)", sum.max_sends_per_channel);
  out << "\n";
  if (sum.msgs > 0) {
    out << fmt::format("  message payload: {} .. {} B (chunks/slices as planned)\n", sum.min_msg, sum.max_msg);
  }
  out << fmt::format("  bytes on the wire: {} B = {} on NVLink + {} on the network; payload {} B", sum.wire,
                     human_bytes(static_cast<double>(sum.nvl)), human_bytes(static_cast<double>(sum.net)), sum.payload);
  if (sum.wire > sum.payload) {
    out << fmt::format(" (protocol overhead {:.1f}%)",
                       100.0 * static_cast<double>(sum.wire - sum.payload) / static_cast<double>(sum.wire));
  }
  out << "\n";
  if (sum.relay_msgs > 0) out << fmt::format("  PXN: {} messages forwarded by a relay GPU on the receiver's rail\n", sum.relay_msgs);
  return out.str();
}

std::string run_nccl_tests(const NcclTestsOptions& opt, MPI_Comm comm, const std::string& version,
                           const std::string& git_commit, std::vector<NcclTestsRow>* rows) {
  const CollInfo ci = coll_info(opt.collective);
  const std::uint32_t n = opt.gpus_per_node * opt.nodes;
  if (opt.min_bytes > opt.max_bytes) {
    throw InputError("<cli>", "-b/-e", "minimum size above maximum", "give -b <= -e");
  }
  if (opt.factor < 2) throw InputError("<cli>", "-f", "factor must be >= 2", "e.g. -f 2");
  if (ci.rooted && opt.root >= n) {
    throw InputError("<cli>", "-r " + std::to_string(opt.root), "root is not a rank of the " + std::to_string(n) + "-rank run",
                     "give -r below " + std::to_string(n));
  }
  refuse_cluster_size_sets(opt.sets);
  RunOptions ro;
  ro.spec_path = opt.spec_path;
  ro.sets = opt.sets;
  ro.sets.push_back("cluster.gpus_per_host=" + std::to_string(opt.gpus_per_node));
  ro.sets.push_back("cluster.hosts=" + std::to_string(opt.nodes));
  ro.write_h5 = false;
  ro.quiet = true;

  // nccl-tests times many back-to-back launches of each size, so every op's time includes NCCL's
  // fixed per-op latency: charge the cost model's latency (simccl.launch_latency=nccl) unless the
  // spec or --set chose otherwise. `fabricsim run` keeps it opt-in.
  if (!load_spec(ro.spec_path, ro.sets).launch_latency_given) ro.sets.push_back("simccl.launch_latency=nccl");
  // The planner the runs will use, for --explain.
  const Spec spec = load_spec(ro.spec_path, ro.sets);
  const models::ClusterSpec cluster = resolve_cluster(spec, n);
  simccl::PlannerBuild pb =
      simccl::make_planner(spec.planner, spec.nccl, spec.file, spec.gpu_sm, cluster, true, spec.simccl_extras);
  const auto* nccl = simccl::nccl_planner_of(*pb.planner);
  const auto* custom = dynamic_cast<const simccl::CustomPlanner*>(pb.planner.get());

  std::ostringstream out;
  out << fmt::format("# fabricsim {} nccl-tests: {}  minBytes {} maxBytes {} step: {}(factor)\n", version, ci.name,
                     opt.min_bytes, opt.max_bytes, opt.factor);
  // nccl-tests prints -g (GPUs per process) as nGpus; one simulated process per node.
  out << fmt::format("# nThread 1 nGpus {} nRanks {} ({} nodes x {} GPUs), simulated at fidelity {} (no data moved)\n#\n",
                     opt.gpus_per_node, n, opt.nodes, opt.gpus_per_node, spec.fidelity);
  // Only the NCCL planner has a latency model (NcclPlannerConfig::launch_latency): say so rather
  // than name a latency the ring planner does not charge.
  out << (spec.simccl_extras.launch_latency && nccl == nullptr
              ? "# per-op latency: none (simccl.planner " + spec.planner +
                    " has no latency model; simccl.launch_latency applies to the NCCL planner)\n"
          : spec.simccl_extras.launch_latency
              ? (opt.collective == "alltoall" || opt.collective == "sendrecv"
                     ? std::string("# per-op latency: one step of NCCL's Ring latency model, base + one hop (NCCL does "
                                   "not tune point-to-point operations; simccl.launch_latency=nccl; set it to none to "
                                   "drop it)\n")
                     : std::string("# per-op latency: NCCL cost model's (simccl.launch_latency=nccl; set it to none to "
                                   "drop it)\n"))
              : std::string("# per-op latency: none (simccl.launch_latency=none)\n"));
  for (const auto& warning : pb.warnings) out << "# warning: " << warning << "\n";
  if (n < 2) {
    // nccl-tests on one GPU copies locally (out-of-place) or does nothing; fabricsim moves no data.
    out << "# one rank: nothing crosses a link and nothing is planned (NCCL settings have no effect); rows are 0\n";
  }
  out << "#                                                              out-of-place                       in-place          \n";
  out << "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  out << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
  double bus_sum = 0;
  int count = 0;
  std::vector<std::uint32_t> world(n);
  for (std::uint32_t r = 0; r < n; ++r) world[r] = r;
  for (std::uint64_t size = opt.min_bytes; size <= opt.max_bytes;) {
    // nccl-tests rounds each size down to whole elements per rank.
    const std::uint64_t unit = 4ull * (ci.per_rank_split ? n : 1);
    const std::uint64_t bytes = size / unit * unit;
    NcclTestsRow row;
    row.bytes = bytes;
    // unit is 4 B x ranks where the NCCL call takes a per-rank count (NcclTestsRow::count).
    row.count = bytes / unit;
    if (bytes > 0 && n > 1) {
      const models::Workload w = nccl_tests_workload(opt.collective, n, bytes, opt.root);
      ro.workload_data = &w;
      const RunResult res = run_simulation(ro, comm, version, git_commit);
      engine::SimTime dt = res.meta.simulated_time_ps;
      if (!ci.p2p && !res.collectives.empty()) dt = res.collectives[0].end_ps - res.collectives[0].start_ps;
      row.time_us = static_cast<double>(dt) * 1e-6;
      row.algbw_GBps = dt > 0 ? static_cast<double>(bytes) / (static_cast<double>(dt) * 1e-12) / 1e9 : 0;
      row.busbw_GBps = ci.p2p ? row.algbw_GBps : row.algbw_GBps * models::busbw_factor(ci.op, n);
      models::CollRequest req;
      req.op = ci.op;
      req.bytes = bytes;
      req.ranks = &world;
      if (const simccl::CustomSchedule* s = custom ? custom->match(req) : nullptr; s != nullptr && !ci.p2p) {
        row.choice = fmt::format("{} schedule {} ({} transfers, {} chunks per buffer)", s->format, s->path, s->transfers,
                                 s->chunks_per_buffer);
      } else if (nccl && !ci.p2p) {
        const simccl::TuningDecision d = nccl->decision(req);
        row.choice = fmt::format("{}/{} {} channels (cost model {:.1f} us)", simccl::algo_name(d.algo),
                                 simccl::proto_name(d.proto), d.n_channels, d.time_us);
      }
    }
    const int root = ci.rooted ? static_cast<int>(opt.root) : -1;
    const std::string half = fmt::format("  {:7.2f}  {:6.2f}  {:6.2f}  {:>5}", row.time_us, row.algbw_GBps, row.busbw_GBps, "N/A");
    out << fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", bytes, row.count, "float", ci.redop, root) << half << half
        << "\n";
    if (opt.explain && !row.choice.empty()) out << "#   simccl: " << row.choice << "\n";
    bus_sum += row.busbw_GBps;
    ++count;
    if (rows) rows->push_back(row);
    if (size > opt.max_bytes / opt.factor) break;
    size *= opt.factor;
  }
  out << "# Out of bounds values : 0 OK\n";
  out << fmt::format("# Avg bus bandwidth    : {:.4g} \n#\n", count ? bus_sum / count : 0.0);
  return out.str();
}

}  // namespace fabricsim::jobs
