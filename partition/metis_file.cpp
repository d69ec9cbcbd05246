// METIS partitioning, partition files and the partition report.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "engine/errors.hpp"
#include "partition/partition.hpp"

#ifdef FABRICSIM_HAVE_METIS
#include <metis.h>
#endif

namespace fabricsim::partition {
namespace {
// Union-find for contracting links that must not be cut.
struct Dsu {
  std::vector<std::uint32_t> parent;
  explicit Dsu(std::uint32_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};
}  // namespace

bool have_metis() {
#ifdef FABRICSIM_HAVE_METIS
  return true;
#else
  return false;
#endif
}

engine::Placement place_metis(std::uint32_t num_lps, const std::vector<Edge>& edges,
                              const std::vector<std::uint32_t>& edge_weight,
                              const std::vector<std::uint32_t>& lp_weight, std::uint32_t procs,
                              std::uint32_t threads, engine::SimTime min_cut_latency_ps) {
  if (procs == 0 || threads == 0) {
    throw engine::InputError("<cli>", "--threads", "process and thread counts must be >= 1", "pass --threads 1 or more");
  }
  const std::uint32_t units = procs * threads;
  engine::Placement p;
  p.threads = threads;
  p.proc.assign(num_lps, 0);
  p.thread.assign(num_lps, 0);
  if (units == 1 || num_lps == 0) return p;
  // Contract links that may not be cut, then build the CSR graph of the super-vertices.
  Dsu dsu(num_lps);
  for (const Edge& e : edges) {
    if (e.latency_ps < min_cut_latency_ps) dsu.unite(e.a, e.b);
  }
  std::vector<std::uint32_t> id(num_lps, UINT32_MAX);
  std::uint32_t nv = 0;
  for (std::uint32_t v = 0; v < num_lps; ++v) {
    const std::uint32_t r = dsu.find(v);
    if (id[r] == UINT32_MAX) id[r] = nv++;
    id[v] = id[r];
  }
#ifdef FABRICSIM_HAVE_METIS
  std::vector<std::vector<std::pair<idx_t, idx_t>>> adj(nv);
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const idx_t a = static_cast<idx_t>(id[edges[i].a]), b = static_cast<idx_t>(id[edges[i].b]);
    if (a == b) continue;
    const idx_t w = static_cast<idx_t>(std::max<std::uint32_t>(1, i < edge_weight.size() ? edge_weight[i] : 1));
    adj[static_cast<std::size_t>(a)].emplace_back(b, w);
    adj[static_cast<std::size_t>(b)].emplace_back(a, w);
  }
  std::vector<idx_t> xadj{0}, adjncy, adjwgt, vwgt(nv, 0);
  for (std::uint32_t v = 0; v < num_lps; ++v) {
    vwgt[id[v]] += static_cast<idx_t>(std::max<std::uint32_t>(1, v < lp_weight.size() ? lp_weight[v] : 1));
  }
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    // Merge parallel edges (METIS wants a simple graph).
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (!adjncy.empty() && k > 0 && a[k].first == a[k - 1].first) {
        adjwgt.back() += a[k].second;
      } else {
        adjncy.push_back(a[k].first);
        adjwgt.push_back(a[k].second);
      }
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
  }
  std::vector<idx_t> part(nv, 0);
  if (nv <= units) {
    for (std::uint32_t v = 0; v < nv; ++v) part[v] = static_cast<idx_t>(v);
  } else {
    idx_t n = static_cast<idx_t>(nv), ncon = 1, nparts = static_cast<idx_t>(units), objval = 0;
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = 1;
    options[METIS_OPTION_NUMBERING] = 0;
    const int rc = METIS_PartGraphKway(&n, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr,
                                       adjwgt.data(), &nparts, nullptr, nullptr, options, &objval,
                                       part.data());
    if (rc != METIS_OK) {
      throw engine::InputError("<spec>", "sim.partition", "METIS failed (code " + std::to_string(rc) + ")",
                               "use sim.partition: topology");
    }
  }
  for (std::uint32_t v = 0; v < num_lps; ++v) {
    const auto u = static_cast<std::uint32_t>(part[id[v]]);
    p.proc[v] = static_cast<std::int32_t>(u / threads);
    p.thread[v] = static_cast<std::uint16_t>(u % threads);
  }
  return p;
#else
  (void)edge_weight;
  (void)lp_weight;
  throw engine::InputError("<spec>", "sim.partition", "this build has no METIS",
                           "install libmetis-dev and rebuild, or use sim.partition: topology");
#endif
}

void write_partition(const std::string& path, const engine::Placement& p, std::uint32_t procs) {
  std::ofstream f(path);
  f << "# fabricsim partition v1 lps " << p.proc.size() << " procs " << procs << " threads " << p.threads << '\n';
  for (std::size_t i = 0; i < p.proc.size(); ++i) f << i << ' ' << p.proc[i] << ' ' << p.thread[i] << '\n';
  f.flush();
  if (!f) throw engine::InputError(path, "--save-partition", "cannot write the partition file", "give a writable path");
}

engine::Placement read_partition(const std::string& path, std::uint32_t num_lps, std::uint32_t procs,
                                 std::uint32_t threads) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw engine::InputError(path, "sim.partition", "is a directory, not a partition file",
                             "give topology, metis or a file written by --save-partition");
  }
  std::ifstream f(path);
  if (!f) throw engine::InputError(path, "sim.partition", "cannot read the partition file", "give topology, metis or an existing file");
  return read_partition(f, path, num_lps, procs, threads);
}

engine::Placement read_partition(std::istream& f, const std::string& path, std::uint32_t num_lps,
                                 std::uint32_t procs, std::uint32_t threads) {
  std::string line;
  std::getline(f, line);
  std::istringstream h(line);
  std::string hash, name, what, ver, k1, k2, k3;
  std::uint64_t lps = 0, pr = 0, th = 0;
  if (!(h >> hash >> name >> what >> ver >> k1 >> lps >> k2 >> pr >> k3 >> th) || hash != "#" ||
      name != "fabricsim" || what != "partition" || ver != "v1" || k1 != "lps" || k2 != "procs" || k3 != "threads") {
    throw engine::InputError(path, "line 1", "not a fabricsim partition file", "write one with --save-partition FILE");
  }
  if (lps != num_lps || th != threads || pr != procs) {
    throw engine::InputError(path, "line 1",
                             "made for " + std::to_string(lps) + " LPs, " + std::to_string(pr) + " processes x " +
                                 std::to_string(th) + " threads; this run has " + std::to_string(num_lps) +
                                 " LPs, " + std::to_string(procs) + " x " + std::to_string(threads),
                             "save a partition for this cluster, process and thread count");
  }
  engine::Placement p;
  p.threads = threads;
  p.proc.assign(num_lps, -1);
  p.thread.assign(num_lps, 0);
  std::uint64_t lineno = 1;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::uint64_t lp = 0, proc = 0, thread = 0;
    std::string extra;
    if (!(s >> lp >> proc >> thread) || (s >> extra) || lp >= num_lps || proc >= procs || thread >= threads || p.proc[lp] != -1) {
      throw engine::InputError(path, "line " + std::to_string(lineno), "bad entry '" + line + "'",
                               "each line is 'lp proc thread', every LP once, within the run's counts");
    }
    p.proc[lp] = static_cast<std::int32_t>(proc);
    p.thread[lp] = static_cast<std::uint16_t>(thread);
  }
  for (std::uint32_t i = 0; i < num_lps; ++i) {
    if (p.proc[i] == -1) {
      throw engine::InputError(path, "lp " + std::to_string(i), "missing from the partition file", "list every LP once");
    }
  }
  return p;
}

std::string partition_report(const engine::Placement& p, const std::vector<Edge>& edges,
                             const std::vector<std::uint32_t>& lp_weight) {
  const std::uint32_t procs =
      p.proc.empty() ? 1 : static_cast<std::uint32_t>(*std::max_element(p.proc.begin(), p.proc.end())) + 1;
  std::uint64_t cut_proc = 0, cut_thread = 0;
  for (const Edge& e : edges) {
    if (p.proc[e.a] != p.proc[e.b]) ++cut_proc;
    else if (p.thread[e.a] != p.thread[e.b]) ++cut_thread;
  }
  std::vector<std::uint64_t> load(static_cast<std::size_t>(procs) * p.threads, 0);
  std::vector<std::uint64_t> lps(load.size(), 0);
  for (std::size_t i = 0; i < p.proc.size(); ++i) {
    const std::size_t u = static_cast<std::size_t>(p.proc[i]) * p.threads + p.thread[i];
    load[u] += i < lp_weight.size() ? lp_weight[i] : 1;
    ++lps[u];
  }
  const engine::SimTime w = lookahead(p, edges);
  std::ostringstream o;
  o << "partition: lookahead " << (w == engine::kInfinity ? std::string("inf") : std::to_string(w) + " ps")
    << ", cut links " << cut_proc << " between processes + " << cut_thread << " between threads (of "
    << edges.size() << ")\n";
  std::uint64_t mx = 0, sum = 0;
  for (std::size_t u = 0; u < load.size(); ++u) {
    o << "  process " << u / p.threads << " thread " << u % p.threads << ": " << lps[u] << " LPs, expected load "
      << load[u] << '\n';
    mx = std::max(mx, load[u]);
    sum += load[u];
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "  load imbalance (max/mean): %.3f\n",
                sum ? static_cast<double>(mx) * static_cast<double>(load.size()) / static_cast<double>(sum) : 1.0);
  o << buf;
  return o.str();
}

}  // namespace fabricsim::partition
