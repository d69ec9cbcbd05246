#include "jobs/nccl_tests.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <cmath>
#include <fstream>
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

std::uint32_t nccl_tests_type_size(const std::string& type) {
  // nccl-tests common.cu test_typenames and wordSize(); fp8 types are NCCL 2.24's ncclFloat8e4m3
  // and ncclFloat8e5m2 (one byte each).
  static const std::pair<const char*, std::uint32_t> types[] = {
      {"int8", 1},   {"uint8", 1},  {"int32", 4},  {"uint32", 4},    {"int64", 8},  {"uint64", 8},
      {"half", 2},   {"float", 4},  {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  std::string names;
  for (const auto& [n, sz] : types) {
    if (type == n) return sz;
    names += (names.empty() ? "" : ", ") + std::string(n);
  }
  throw InputError("<cli>", "-d " + type, "not an nccl-tests data type", "use one of " + names);
}

void check_nccl_tests_redop(const std::string& op) {
  for (const char* o : {"sum", "prod", "max", "min", "avg", "mulsum"}) {
    if (op == o) return;
  }
  throw InputError("<cli>", "-o " + op, "not an nccl-tests reduction", "use sum, prod, max, min, avg or mulsum");
}

std::string nccl_tests_float(double value, int width) {
  // Digits before the decimal point (0 below 1), as nccl-tests counts them for its columns.
  int digits = 0;
  for (double v = 1; value >= v && digits < 40; v *= 10) ++digits;
  if (digits < width - 2) return fmt::format("{:{}.2f}", value, width);
  if (digits < width - 1) return fmt::format("{:{}.1f}", value, width);
  if (digits < width + 1) return fmt::format("{:{}.0f}", value, width);
  return width >= 7 ? fmt::format("{:{}.1e}", value, width) : fmt::format("{:{}.0e}", value, width);
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

namespace {

/// The sizes of a sweep: opt.sizes, or -b..-e by -f (factor > 1) or by -i (factor 1), as
/// nccl-tests steps them.
std::vector<std::uint64_t> sweep_sizes(const NcclTestsOptions& opt) {
  if (!opt.sizes.empty()) return opt.sizes;
  if (opt.min_bytes > opt.max_bytes) throw InputError("<cli>", "-b/-e", "minimum size above maximum", "give -b <= -e");
  if (opt.factor < 1) throw InputError("<cli>", "-f", "factor must be >= 1", "e.g. -f 2");
  if (opt.factor == 1 && opt.step_bytes == 0) {
    throw InputError("<cli>", "-i 0", "a step of 0 bytes never reaches -e", "give -i above 0 or -f 2");
  }
  std::vector<std::uint64_t> out;
  constexpr std::size_t kMaxSizes = 100000;
  for (std::uint64_t size = opt.min_bytes; size <= opt.max_bytes;) {
    out.push_back(size);
    if (out.size() > kMaxSizes) {
      throw InputError("<cli>", "-b/-e/-i", "more than 100000 sizes",
                       "give a larger -i or a factor, e.g. -f 2 (nccl-tests steps by -i 1M unless -f is given)");
    }
    if (opt.factor > 1) {
      if (size > opt.max_bytes / opt.factor) break;
      size *= opt.factor;
    } else {
      if (opt.max_bytes - size < opt.step_bytes) break;
      size += opt.step_bytes;
    }
  }
  return out;
}

bool reducing(const CollInfo& ci) {
  return !ci.p2p && (ci.op == models::CollOp::kAllReduce || ci.op == models::CollOp::kReduceScatter ||
                     ci.op == models::CollOp::kReduce);
}

}  // namespace

std::string run_nccl_tests(const NcclTestsOptions& opt, MPI_Comm comm, const std::string& version,
                           const std::string& git_commit, std::vector<NcclTestsRow>* rows) {
  const CollInfo ci = coll_info(opt.collective);
  const std::uint32_t n = opt.gpus_per_node * opt.nodes;
  const std::uint32_t word = nccl_tests_type_size(opt.datatype);
  check_nccl_tests_redop(opt.redop);
  const std::vector<std::uint64_t> sizes = sweep_sizes(opt);
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

  // The planner the runs will use, for --explain.
  const Spec spec = load_spec(ro.spec_path, ro.sets);
  const models::ClusterSpec cluster = resolve_cluster(spec, n);
  simccl::PlannerBuild pb =
      simccl::make_planner(spec.planner, spec.nccl, spec.file, spec.gpu_sm, cluster, true, spec.simccl_extras);
  const auto* nccl = simccl::nccl_planner_of(*pb.planner);
  const auto* custom = dynamic_cast<const simccl::CustomPlanner*>(pb.planner.get());

  std::ostringstream out;
  // The header lines of nccl-tests (util.cu writeDeviceReport), so that this output reads back
  // with --compare; fabricsim's own lines follow them.
  out << fmt::format("# fabricsim {} nccl-tests (simulated; nccl-tests' columns)\n", version);
  out << fmt::format("# Collective test starting: {}_perf\n", ci.name);
  const bool by_factor = opt.sizes.empty() && opt.factor > 1;
  out << fmt::format("# nThread 1 nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: 1 "
                     "validation: {} graph: 0\n",
                     opt.gpus_per_node, sizes.front(), sizes.back(), by_factor ? opt.factor : opt.step_bytes,
                     by_factor ? "factor" : "bytes", opt.warmup_iters, opt.iters, opt.check);
  if (opt.blocking) out << "# Blocking Enabled: wait for completion and barrier after each collective \n";
  out << "#\n";
  // nccl-tests lists every rank; one simulated process per node with -g GPUs.
  constexpr std::uint32_t kMaxRankLines = 1024;
  out << "# Using devices\n";
  if (n <= kMaxRankLines) {
    for (std::uint32_t r = 0; r < n; ++r) {
      out << fmt::format("#  Rank {:2} Group  0 Pid {:6} on {:>10} device {:2} [sim] simulated GPU sm{}\n", r,
                         r / opt.gpus_per_node, fmt::format("node{}", r / opt.gpus_per_node), r % opt.gpus_per_node,
                         spec.gpu_sm);
    }
  } else {
    out << fmt::format("#  ({} rank lines left out)\n", n);
  }
  out << fmt::format("# fabricsim: nRanks {} ({} nodes x {} GPUs), simulated at fidelity {}; no data is moved, so "
                     "out-of-place and in-place are one run, #wrong is N/A, and -n/-w/-c/-z/-o do not change the "
                     "time\n",
                     n, opt.nodes, opt.gpus_per_node, spec.fidelity);
  // Only the NCCL planner has a latency model (NcclPlannerConfig::launch_latency): say so rather
  // than name a latency the ring planner does not charge.
  const auto& ex = spec.simccl_extras;
  if (nccl == nullptr && (ex.launch_latency || ex.step_latency)) {
    out << "# per-op latency: none (simccl.planner " + spec.planner +
               " has no latency model; simccl.launch_latency and step_latency apply to the NCCL planner)\n";
  } else if (opt.collective == "alltoall" || opt.collective == "sendrecv") {
    out << (ex.launch_latency ? "# per-op latency: one step of NCCL's Ring latency model, base + one hop (NCCL does not "
                                "tune point-to-point operations; simccl.launch_latency=nccl; set it to none to drop it)\n"
                              : "# per-op latency: none (simccl.launch_latency=none)\n");
  } else {
    out << fmt::format("# per-op latency: launch {} (simccl.launch_latency={}), per-step hops {} (simccl.step_latency={}); "
                       "NCCL 2.28.9 tuning.cc tables\n",
                       ex.launch_latency ? (ex.step_latency ? "base latency (Ring, Tree) or the model's whole latency (NVLS)"
                                                            : "the cost model's whole latency")
                                         : "none",
                       ex.launch_latency ? "nccl" : "none", ex.step_latency ? "on Ring receives and Tree sends" : "none",
                       ex.step_latency ? "nccl" : "none");
  }
  for (const auto& warning : pb.warnings) out << "# warning: " << warning << "\n";
  if (n < 2) {
    // nccl-tests on one GPU copies locally (out-of-place) or does nothing; fabricsim moves no data.
    out << "# one rank: nothing crosses a link and nothing is planned (NCCL settings have no effect); rows are 0\n";
  }
  // Column header of nccl-tests (util.cu writeResultHeader).
  out << "#\n";
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
                     "", "", "", "", "");
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "size",
                     "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                     "#wrong");
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n", "(B)",
                     "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  double bus_sum = 0;
  int count = 0;
  std::vector<std::uint32_t> world(n);
  for (std::uint32_t r = 0; r < n; ++r) world[r] = r;
  const std::string redop = reducing(ci) ? opt.redop : std::string("none");
  for (const std::uint64_t size : sizes) {
    // nccl-tests rounds each size down to whole elements (per rank where the call takes a
    // per-rank count).
    const std::uint64_t unit = std::uint64_t{word} * (ci.per_rank_split ? n : 1);
    const std::uint64_t bytes = size / unit * unit;
    NcclTestsRow row;
    row.bytes = bytes;
    // unit is the element size x ranks where the NCCL call takes a per-rank count (NcclTestsRow::count).
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
    const std::string half = fmt::format("  {}  {}  {}    N/A", nccl_tests_float(row.time_us, 7),
                                         nccl_tests_float(row.algbw_GBps, 6), nccl_tests_float(row.busbw_GBps, 6));
    out << fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", bytes, row.count, opt.datatype, redop, root) << half << half
        << "\n";
    if (opt.explain && !row.choice.empty()) out << "#   simccl: " << row.choice << "\n";
    bus_sum += row.busbw_GBps;
    ++count;
    if (rows) rows->push_back(row);
  }
  // Footer of nccl-tests (util.cu writeResultFooter): the average is over every row printed.
  out << fmt::format("# {:<20} : {} {}\n", "Out of bounds values", 0, "OK");
  out << fmt::format("# {:<20} : {:g} \n#\n", "Avg bus bandwidth", count ? bus_sum / count : 0.0);
  out << fmt::format("# Collective test concluded: {}_perf\n#\n", ci.name);
  return out.str();
}

namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> t;
  std::istringstream in(line);
  for (std::string w; in >> w;) t.push_back(w);
  return t;
}

bool parse_u64(const std::string& t, std::uint64_t& v) {
  if (t.empty() || t.size() > 20) return false;
  for (char c : t) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  v = std::stoull(t);
  return true;
}

bool parse_double(const std::string& t, double& v) {
  if (t.empty()) return false;
  std::size_t pos = 0;
  try {
    v = std::stod(t, &pos);
  } catch (...) {
    return false;
  }
  return pos == t.size() && std::isfinite(v) && v >= 0;
}

}  // namespace

NcclTestsLog parse_nccl_tests_log_text(const std::string& text, const std::string& path) {
  NcclTestsLog log;
  log.path = path;
  const std::string fix_foreign = "give the stdout of one nccl-tests *_perf run (e.g. all_reduce_perf -b 8 -e 8G -f 2 -g 8)";
  std::istringstream in(text);
  std::string line;
  int ln = 0;
  // Column indexes from the table header ("size count type redop root time algbw busbw #wrong ..."
  // since nccl-tests 2.x; "bytes N type op ..." in the first versions).
  int c_size = -1, c_count = -1, c_type = -1, c_redop = -1, c_root = -1;
  std::vector<int> c_busbw;
  std::size_t min_tokens = 0;
  int header_line = 0;
  bool footer = false;
  std::set<std::string> hosts;
  for (; std::getline(in, line); ) {
    ++ln;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto t = tokens(line);
    if (t.empty()) continue;
    if (t[0][0] == '#') {
      std::vector<std::string> h = t;
      if (h[0] == "#") {
        h.erase(h.begin());
      } else {
        h[0] = h[0].substr(1);
      }
      if (h.empty()) continue;
      if (header_line == 0 && h.size() >= 4 && h[0] == "Collective" && h[1] == "test" && h[2] == "starting:") {
        std::string prog = h[3];
        if (const auto slash = prog.find_last_of('/'); slash != std::string::npos) prog = prog.substr(slash + 1);
        if (prog.size() > 5 && prog.compare(prog.size() - 5, 5, "_perf") == 0) prog.resize(prog.size() - 5);
        log.collective = prog;
      } else if (header_line == 0 && h.size() >= 4 && h[0] == "nThread") {
        for (std::size_t k = 0; k + 1 < h.size(); ++k) {
          std::uint64_t v = 0;
          if (h[k] == "nGpus" && parse_u64(h[k + 1], v)) log.ngpus = static_cast<std::uint32_t>(v);
        }
      } else if (header_line == 0 && h.size() >= 6 && h[0] == "Rank" && h[2] == "Group") {
        for (std::size_t k = 0; k + 1 < h.size(); ++k) {
          if (h[k] == "on") hosts.insert(h[k + 1]);
        }
        ++log.ranks;
      } else if ((h[0] == "size" || h[0] == "bytes") && std::find(h.begin(), h.end(), "busbw") != h.end()) {
        if (header_line != 0) {
          throw InputError(path, "line " + std::to_string(ln),
                           "a second nccl-tests table (the first starts at line " + std::to_string(header_line) + ")",
                           "give one nccl-tests run per file");
        }
        header_line = ln;
        for (std::size_t k = 0; k < h.size(); ++k) {
          const std::string& w = h[k];
          const int ki = static_cast<int>(k);
          if (w == "size" || w == "bytes") c_size = ki;
          else if (w == "count" || w == "N") c_count = ki;
          else if (w == "type") c_type = ki;
          else if (w == "redop" || w == "op") c_redop = ki;
          else if (w == "root") c_root = ki;
          else if (w == "busbw") c_busbw.push_back(ki);
        }
        if (c_count < 0 || c_type < 0) {
          throw InputError(path, "line " + std::to_string(ln), "a table header without count and type columns",
                           fix_foreign);
        }
        min_tokens = static_cast<std::size_t>(c_busbw.front()) + 2;  // up to out-of-place #wrong
      } else if (h.size() >= 3 && h[0] == "Avg" && h[1] == "bus" && header_line != 0) {
        footer = true;
      }
      continue;
    }
    if (header_line == 0) continue;  // text before the table (launcher output): not nccl-tests'
    if (footer) {
      throw InputError(path, "line " + std::to_string(ln), "a table row after the '# Avg bus bandwidth' footer",
                       "give one nccl-tests run per file");
    }
    // NCCL's own debug output interleaved with the table (NCCL_DEBUG=INFO/WARN).
    if (line.find("NCCL INFO") != std::string::npos || line.find("NCCL WARN") != std::string::npos) continue;
    const std::string where = "line " + std::to_string(ln);
    if (t.size() < min_tokens) {
      throw InputError(path, where,
                       "row has " + std::to_string(t.size()) + " of the " + std::to_string(min_tokens) +
                           " columns up to the out-of-place #wrong (truncated log?)",
                       "give the whole log as nccl-tests printed it");
    }
    NcclTestsLogRow row;
    row.line = ln;
    double busbw = 0;
    if (!parse_u64(t[static_cast<std::size_t>(c_size)], row.bytes) ||
        !parse_u64(t[static_cast<std::size_t>(c_count)], row.count)) {
      throw InputError(path, where, "'" + line + "' is not an nccl-tests row (size and count must be whole numbers)",
                       fix_foreign);
    }
    if (!parse_double(t[static_cast<std::size_t>(c_busbw.front())], busbw)) {
      throw InputError(path, where, "out-of-place busbw '" + t[static_cast<std::size_t>(c_busbw.front())] + "' is not a number",
                       fix_foreign);
    }
    row.oop_busbw_GBps = busbw;
    if (c_busbw.size() > 1 && t.size() > static_cast<std::size_t>(c_busbw[1])) {
      if (!parse_double(t[static_cast<std::size_t>(c_busbw[1])], busbw)) {
        throw InputError(path, where, "in-place busbw '" + t[static_cast<std::size_t>(c_busbw[1])] + "' is not a number",
                         fix_foreign);
      }
      row.ip_busbw_GBps = busbw;
    }
    row.type = t[static_cast<std::size_t>(c_type)];
    if (c_redop >= 0) row.redop = t[static_cast<std::size_t>(c_redop)];
    if (c_root >= 0) {
      try {
        row.root = std::stoi(t[static_cast<std::size_t>(c_root)]);
      } catch (...) {
        throw InputError(path, where, "root '" + t[static_cast<std::size_t>(c_root)] + "' is not a number", fix_foreign);
      }
    }
    if (!log.rows.empty() && row.bytes <= log.rows.back().bytes) {
      throw InputError(path, where,
                       "size " + std::to_string(row.bytes) + " does not grow from the previous row's " +
                           std::to_string(log.rows.back().bytes) + " (two runs, or -d/-o all, in one file)",
                       "give one nccl-tests run of one type and one reduction per file");
    }
    if (!log.rows.empty() && row.type != log.rows.back().type) {
      throw InputError(path, where, "type '" + row.type + "' differs from the previous row's '" + log.rows.back().type + "'",
                       "give one nccl-tests run of one type per file");
    }
    log.rows.push_back(row);
  }
  if (header_line == 0) {
    throw InputError(path, "line " + std::to_string(std::max(ln, 1)),
                     "no nccl-tests table header ('#  size  count  type  redop  root  time  algbw  busbw ...') in " +
                         std::to_string(ln) + " lines: not an nccl-tests log",
                     fix_foreign);
  }
  if (log.rows.empty()) {
    throw InputError(path, "line " + std::to_string(ln), "the table has no rows (truncated log?)",
                     "give the whole log as nccl-tests printed it");
  }
  if (!footer) {
    throw InputError(path, "line " + std::to_string(ln),
                     "the table ends without nccl-tests' '# Avg bus bandwidth' footer (truncated log?)",
                     "give the whole log as nccl-tests printed it");
  }
  log.nodes = static_cast<std::uint32_t>(hosts.size());
  return log;
}

NcclTestsLog parse_nccl_tests_log(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path, "--compare", "cannot read the file", "give the path of an nccl-tests log");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_nccl_tests_log_text(ss.str(), path);
}

std::string compare_nccl_tests(const NcclTestsOptions& opt_in, const NcclTestsLog& log, MPI_Comm comm,
                               const std::string& version, const std::string& git_commit,
                               std::vector<NcclTestsCompareRow>* rows) {
  NcclTestsOptions opt = opt_in;
  const CollInfo ci = coll_info(opt.collective);
  const std::uint32_t n = opt.gpus_per_node * opt.nodes;
  opt.datatype = log.rows.front().type;
  const std::uint32_t word = nccl_tests_type_size(opt.datatype);
  if (reducing(ci) && !log.rows.front().redop.empty() && log.rows.front().redop != "none") opt.redop = log.rows.front().redop;
  if (ci.rooted && log.rows.front().root >= 0) opt.root = static_cast<std::uint32_t>(log.rows.front().root);
  opt.sizes.clear();
  const std::uint64_t unit = std::uint64_t{word} * (ci.per_rank_split ? n : 1);
  for (const auto& r : log.rows) {
    if (r.bytes % unit != 0) {
      throw InputError(log.path, "line " + std::to_string(r.line),
                       fmt::format("size {} is not whole {} elements{} for {} ranks", r.bytes, opt.datatype,
                                   ci.per_rank_split ? " per rank" : "", n),
                       "check the collective, -g and --nodes against the log");
    }
    opt.sizes.push_back(r.bytes);
  }
  std::vector<NcclTestsRow> sim;
  const std::string table = run_nccl_tests(opt, comm, version, git_commit, &sim);
  std::ostringstream out;
  // The simulated run's header lines (cluster, latency, warnings), without its table.
  std::istringstream tin(table);
  for (std::string l; std::getline(tin, l);) {
    if (l.rfind("# fabricsim:", 0) == 0 || l.rfind("# per-op latency", 0) == 0 || l.rfind("# warning", 0) == 0) out << l << "\n";
  }
  out << fmt::format("# fabricsim nccl-tests --compare {}: {} on {} ranks ({} nodes x {} GPUs), type {}, {} rows\n",
                     log.path, ci.name, n, opt.nodes, opt.gpus_per_node, opt.datatype, log.rows.size());
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>10}  {:>10}  {:>10}  {:>8}\n", "size", "count", "type", "measured",
                     "measured", "simulated", "error");
  out << fmt::format("# {:>10}  {:>12}  {:>8}  {:>10}  {:>10}  {:>10}  {:>8}\n", "(B)", "(elements)", "", "oop busbw",
                     "ip busbw", "busbw", "(%)");
  int within10 = 0;
  std::vector<double> abs_err;
  for (std::size_t k = 0; k < log.rows.size() && k < sim.size(); ++k) {
    const auto& m = log.rows[k];
    NcclTestsCompareRow c;
    c.bytes = m.bytes;
    c.measured_oop_GBps = m.oop_busbw_GBps;
    c.measured_ip_GBps = m.ip_busbw_GBps;
    c.simulated_GBps = sim[k].busbw_GBps;
    const bool has_err = m.oop_busbw_GBps > 0;
    c.error_pct = has_err ? 100.0 * (c.simulated_GBps - m.oop_busbw_GBps) / m.oop_busbw_GBps : 0;
    if (has_err) {
      abs_err.push_back(std::fabs(c.error_pct));
      if (std::fabs(c.error_pct) <= 10.0) ++within10;
    }
    out << fmt::format("{:12}  {:12}  {:>8}  {:>10.2f}  {:>10}  {:>10.2f}  {:>8}\n", m.bytes, m.count, m.type,
                       m.oop_busbw_GBps, m.ip_busbw_GBps < 0 ? std::string("-") : fmt::format("{:.2f}", m.ip_busbw_GBps),
                       c.simulated_GBps, has_err ? fmt::format("{:+.1f}", c.error_pct) : std::string("n/a"));
    if (rows) rows->push_back(c);
  }
  std::sort(abs_err.begin(), abs_err.end());
  const double median = abs_err.empty() ? 0
                        : abs_err.size() % 2 ? abs_err[abs_err.size() / 2]
                                             : 0.5 * (abs_err[abs_err.size() / 2 - 1] + abs_err[abs_err.size() / 2]);
  out << fmt::format("# within 10%: {} of {} rows; median |error| {:.1f}%; worst |error| {:.1f}% (error = simulated vs "
                     "measured out-of-place busbw)\n",
                     within10, abs_err.size(), median, abs_err.empty() ? 0.0 : abs_err.back());
  return out.str();
}

}  // namespace fabricsim::jobs
