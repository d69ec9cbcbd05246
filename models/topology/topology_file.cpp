#include "models/topology/topology_file.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "engine/errors.hpp"
#include "engine/units.hpp"

namespace fabricsim::models {

using engine::InputError;
using engine::LpId;

namespace {

struct Token {
  std::string text;
  std::size_t line;
};

/// Whitespace-separated tokens with their 1-based line; `#` starts a comment to end of line.
std::vector<std::vector<Token>> lines_of(const std::string &text) {
  std::vector<std::vector<Token>> out;
  std::istringstream in(text);
  std::string line;
  std::size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (auto h = line.find('#'); h != std::string::npos)
      line.resize(h);
    std::istringstream ls(line);
    std::vector<Token> toks;
    std::string t;
    while (ls >> t)
      toks.push_back({t, no});
    if (!toks.empty())
      out.push_back(std::move(toks));
  }
  return out;
}

std::string at_line(std::size_t n) { return "line " + std::to_string(n); }

// Refuses a second link between the same two nodes (either direction): builders never make
// parallel links, routing counts one port per neighbour pair, and in a hand-written or generated
// file a repeated line is a mistake that silently doubles the pair's capacity. `seen` maps the
// unordered pair to the line that first linked it.
void check_duplicate_link(std::unordered_map<std::uint64_t, std::size_t> &seen, std::uint32_t a,
                          std::uint32_t b, std::size_t line, const std::string &path,
                          const std::string &what) {
  const std::uint64_t key = (std::uint64_t{std::min(a, b)} << 32) | std::max(a, b);
  const auto [it, fresh] = seen.emplace(key, line);
  if (!fresh) {
    throw InputError(path, at_line(line),
                     "duplicate link " + what + " (already linked on line " +
                         std::to_string(it->second) + ")",
                     "remove one of them; for more capacity give one link with the summed rate");
  }
}

std::uint64_t rate_of(const Token &t, const std::string &path) {
  const std::uint64_t r = engine::parse_rate_bps(t.text, path, at_line(t.line));
  if (r == 0)
    throw InputError(path, at_line(t.line), "zero bandwidth '" + t.text + "'",
                     "give a rate like 400Gbps");
  // The spec's physical range: below 1 Mb/s a run only crawls for (simulated) hours.
  if (r < 1'000'000 || r > 100'000'000'000'000ull)
    throw InputError(path, at_line(t.line), "rate '" + t.text + "' is outside 1 Mbps .. 100 Tbps",
                     "give a rate like 400Gbps");
  return r;
}

engine::SimTime latency_of(const Token &t, const std::string &path) {
  const engine::SimTime l = engine::parse_time_ps(t.text, path, at_line(t.line));
  if (l == 0) {
    throw InputError(path, at_line(t.line), "zero latency '" + t.text + "'",
                     "give a latency >= 1ps (it is the simulator's lookahead), e.g. 500ns");
  }
  if (l > engine::kPsPerS) {
    throw InputError(path, at_line(t.line), "latency '" + t.text + "' is longer than 1 s", "give a link latency like 500ns");
  }
  return l;
}

/// Nodes in file order, re-numbered into LP order: GPUs, NVSwitches, switches by tier (stable).
struct Renumber {
  std::vector<NodeKind> kind;
  std::vector<std::uint8_t> tier;
  std::vector<LpId> lp; // file index -> LP

  TopoGraph graph(std::vector<TopoGraph::Link> links) {
    const auto n = kind.size();
    std::vector<std::uint32_t> order(n);
    for (std::uint32_t i = 0; i < n; ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (kind[a] == NodeKind::kGpu || kind[b] == NodeKind::kGpu ||
          kind[a] == NodeKind::kNvSwitch || kind[b] == NodeKind::kNvSwitch) {
        return kind[a] < kind[b];
      }
      return tier[a] < tier[b];
    });
    TopoGraph g;
    lp.assign(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      lp[order[i]] = i;
      g.add(kind[order[i]], tier[order[i]]);
    }
    for (auto &l : links) {
      l.a = lp[l.a];
      l.b = lp[l.b];
    }
    g.links = std::move(links);
    // gpus_per_host: the largest scale-up domain (GPUs per NVSwitch), or 1.
    std::vector<std::uint32_t> per(n, 0);
    std::uint32_t gph = 1;
    for (const auto &l : g.links) {
      for (auto [x, y] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
        if (g.kind[x] == NodeKind::kNvSwitch && g.kind[y] == NodeKind::kGpu)
          gph = std::max(gph, ++per[x]);
      }
    }
    g.gpus_per_host = gph;
    return g;
  }
};

NodeKind kind_of_tier(std::uint32_t tier) {
  return tier == 1 ? NodeKind::kLeaf : tier == 2 ? NodeKind::kSpine : NodeKind::kCore;
}

} // namespace

TopoGraph parse_fabricsim_topology(const std::string &text, const std::string &path,
                                   const ClusterSpec &spec) {
  const auto lines = lines_of(text);
  if (lines.empty() || lines[0][0].text != "fabricsim-topology") {
    throw InputError(path, "line 1", "missing the 'fabricsim-topology 1' header",
                     "start the file with it");
  }
  if (lines[0].size() != 2 || lines[0][1].text != "1") {
    throw InputError(path, at_line(lines[0][0].line), "unsupported version",
                     "this fabricsim reads 'fabricsim-topology 1'");
  }
  Renumber r;
  std::unordered_map<std::string, std::uint32_t> index;
  std::vector<TopoGraph::Link> links;
  std::vector<std::pair<std::size_t, std::pair<std::string, std::string>>> ends; // line, names
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto &t = lines[i];
    const std::string where = at_line(t[0].line);
    if (t[0].text == "node") {
      if (t.size() < 3)
        throw InputError(path, where, "node needs a name and a kind",
                         "write 'node NAME gpu|nvswitch|switch TIER'");
      NodeKind k;
      std::uint32_t tier = 0;
      if (t[2].text == "gpu" || t[2].text == "nvswitch") {
        k = t[2].text == "gpu" ? NodeKind::kGpu : NodeKind::kNvSwitch;
        if (t.size() != 3)
          throw InputError(path, where, "extra fields after '" + t[2].text + "'",
                           "write 'node NAME " + t[2].text + "'");
      } else if (t[2].text == "switch") {
        if (t.size() != 4 || t[3].text.empty() || t[3].text.size() > 2 ||
            t[3].text.find_first_not_of("0123456789") != std::string::npos ||
            std::stoul(t[3].text) < 1 || std::stoul(t[3].text) > 15) {
          throw InputError(path, where, "a switch needs a tier 1..15",
                           "write 'node NAME switch 1' (1 leaf, 2 spine, 3 core)");
        }
        tier = static_cast<std::uint32_t>(std::stoul(t[3].text));
        k = kind_of_tier(tier);
      } else {
        throw InputError(path, where, "unknown node kind '" + t[2].text + "'",
                         "use gpu, nvswitch or switch");
      }
      if (!index.emplace(t[1].text, static_cast<std::uint32_t>(r.kind.size())).second) {
        throw InputError(path, where, "duplicate node '" + t[1].text + "'",
                         "give every node a unique name");
      }
      r.kind.push_back(k);
      r.tier.push_back(static_cast<std::uint8_t>(tier));
    } else if (t[0].text == "link") {
      if (t.size() != 5 && t.size() != 6) {
        throw InputError(
            path, where, "link needs 4 or 5 fields",
            "write 'link A B RATE LATENCY [MTU]', e.g. 'link gpu0 leaf0 400Gbps 500ns'");
      }
      TopoGraph::Link l;
      l.rate_bps = rate_of(t[3], path);
      l.latency_ps = latency_of(t[4], path);
      if (t.size() == 6) {
        const std::uint64_t m = engine::parse_bytes(t[5].text, path, where);
        // The bounds of cluster.mtu (ClusterSpec::kMinMtuBytes/kMaxMtuBytes, with their sources).
        if (m < ClusterSpec::kMinMtuBytes || m > ClusterSpec::kMaxMtuBytes)
          throw InputError(path, where, "MTU '" + t[5].text + "' outside 256 B .. 16 MiB",
                           "e.g. 4KiB (RoCEv2 path MTUs are 256..4096 B)");
        l.mtu_bytes = static_cast<std::uint32_t>(m);
      }
      links.push_back(l);
      ends.push_back({t[0].line, {t[1].text, t[2].text}});
    } else {
      throw InputError(path, where, "unknown record '" + t[0].text + "'",
                       "lines start with 'node' or 'link' (# for comments)");
    }
  }
  std::unordered_map<std::uint64_t, std::size_t> seen;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto &[a, b] = ends[i].second;
    for (const auto *name : {&a, &b}) {
      if (!index.count(*name)) {
        throw InputError(path, at_line(ends[i].first),
                         "dangling link: node '" + *name + "' is not defined",
                         "define it with a 'node' line or fix the name");
      }
    }
    links[i].a = index[a];
    links[i].b = index[b];
    if (links[i].a == links[i].b)
      throw InputError(path, at_line(ends[i].first), "link from '" + a + "' to itself",
                       "remove it");
    check_duplicate_link(seen, links[i].a, links[i].b, ends[i].first, path,
                         "between '" + a + "' and '" + b + "'");
    if (links[i].mtu_bytes == 0) {
      const bool nvl =
          r.kind[links[i].a] == NodeKind::kNvSwitch || r.kind[links[i].b] == NodeKind::kNvSwitch;
      links[i].mtu_bytes = nvl ? spec.nvlink_mtu_bytes : spec.mtu_bytes;
    }
  }
  if (std::find(r.kind.begin(), r.kind.end(), NodeKind::kGpu) == r.kind.end()) {
    throw InputError(path, "nodes", "no gpu node", "add 'node NAME gpu' lines");
  }
  return r.graph(std::move(links));
}

TopoGraph parse_simai_topology(const std::string &text, const std::string &path,
                               const ClusterSpec &spec) {
  const auto lines = lines_of(text);
  std::vector<Token> tok;
  for (const auto &l : lines)
    tok.insert(tok.end(), l.begin(), l.end());
  std::size_t pos = 0;
  auto field = [&](const char *what) -> const Token & {
    if (pos >= tok.size()) {
      throw InputError(path, "end of file", std::string("missing ") + what,
                       "the file is truncated; check the header counts");
    }
    return tok[pos++];
  };
  auto number = [&](const char *what, std::uint64_t max) {
    const Token &t = field(what);
    if (t.text.empty() || t.text.size() > 9 ||
        t.text.find_first_not_of("0123456789") != std::string::npos || std::stoull(t.text) > max) {
      throw InputError(path, at_line(t.line),
                       std::string(what) + " '" + t.text +
                           "' is not an integer <= " + std::to_string(max),
                       "SimAI topology files start with 'nodes gpus_per_server nvswitches switches "
                       "links gpu_type'");
    }
    return static_cast<std::uint32_t>(std::stoull(t.text));
  };
  const std::uint32_t n = number("node count", 1u << 24);
  const std::uint32_t gps = number("gpus_per_server", 1u << 20);
  const std::uint32_t nvs = number("nvswitch count", n);
  const std::uint32_t sws = number("switch count", n);
  const std::uint32_t nl = number("link count", 1u << 28);
  field("gpu_type");
  if (static_cast<std::uint64_t>(nvs) + sws > n) {
    throw InputError(path, "line 1", "nvswitches + switches exceed the node count",
                     "fix the header counts");
  }
  Renumber r;
  r.kind.assign(n, NodeKind::kGpu);
  r.tier.assign(n, 0);
  for (std::uint32_t i = 0; i < nvs + sws; ++i) {
    const std::size_t line = pos < tok.size() ? tok[pos].line : 0;
    const std::uint32_t id = number(i < nvs ? "nvswitch id" : "switch id", n - 1);
    if (r.kind[id] != NodeKind::kGpu)
      throw InputError(path, at_line(line), "duplicate node " + std::to_string(id),
                       "list each id once");
    r.kind[id] = i < nvs ? NodeKind::kNvSwitch : NodeKind::kLeaf;
  }
  std::vector<TopoGraph::Link> links;
  std::vector<std::vector<std::uint32_t>> adj(n);
  std::unordered_map<std::uint64_t, std::size_t> seen;
  for (std::uint32_t i = 0; i < nl; ++i) {
    const std::size_t line = pos < tok.size() ? tok[pos].line : 0;
    TopoGraph::Link l;
    l.a = number("link source", n - 1);
    l.b = number("link destination", n - 1);
    if (l.a == l.b)
      throw InputError(path, at_line(line), "link from node " + std::to_string(l.a) + " to itself",
                       "remove it");
    check_duplicate_link(seen, l.a, l.b, line, path,
                         "between nodes " + std::to_string(l.a) + " and " + std::to_string(l.b));
    l.rate_bps = rate_of(field("link rate"), path);
    l.latency_ps = latency_of(field("link delay"), path);
    field("link error rate");
    const bool nvl = r.kind[l.a] == NodeKind::kNvSwitch || r.kind[l.b] == NodeKind::kNvSwitch;
    l.mtu_bytes = nvl ? spec.nvlink_mtu_bytes : spec.mtu_bytes;
    adj[l.a].push_back(l.b);
    adj[l.b].push_back(l.a);
    links.push_back(l);
  }
  if (pos != tok.size()) {
    throw InputError(path, at_line(tok[pos].line),
                     "more records than the header's " + std::to_string(nl) + " links",
                     "fix the link count in the header");
  }
  // Tiers: switches next to a GPU are tier 1, then BFS distance + 1 through switches.
  std::vector<std::uint32_t> queue;
  for (std::uint32_t v = 0; v < n; ++v) {
    if (r.kind[v] != NodeKind::kLeaf)
      continue;
    for (std::uint32_t u : adj[v]) {
      if (r.kind[u] == NodeKind::kGpu) {
        r.tier[v] = 1;
        queue.push_back(v);
        break;
      }
    }
  }
  for (std::size_t h = 0; h < queue.size(); ++h) {
    for (std::uint32_t u : adj[queue[h]]) {
      if (r.kind[u] == NodeKind::kLeaf && r.tier[u] == 0) {
        r.tier[u] = static_cast<std::uint8_t>(std::min(15, r.tier[queue[h]] + 1));
        queue.push_back(u);
      }
    }
  }
  for (std::uint32_t v = 0; v < n; ++v) {
    if (r.kind[v] == NodeKind::kLeaf) {
      if (r.tier[v] == 0)
        r.tier[v] = 1; // not connected to any GPU: reported as a leaf
      r.kind[v] = kind_of_tier(r.tier[v]);
    }
  }
  TopoGraph g = r.graph(std::move(links));
  if (gps > 0)
    g.gpus_per_host = gps;
  return g;
}

TopoGraph read_topology_file(const ClusterSpec &spec) {
  const std::string &path = spec.topology_file;
  if (path.empty())
    throw InputError(spec.source, "cluster.topology_file", "is empty",
                     "give the path of a topology file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, "<file>", "cannot open the topology file",
                     "check cluster.topology_file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_topology_text(ss.str(), path, spec);
}

TopoGraph parse_topology_text(const std::string &text, const std::string &path, const ClusterSpec &spec) {
  // The format is named by the first token that is not in a '#' comment line (the fabricsim
  // format allows comment lines before its header).
  auto first = text.find_first_not_of(" \t\r\n");
  while (first != std::string::npos && text[first] == '#') {
    const auto eol = text.find('\n', first);
    first = eol == std::string::npos ? std::string::npos : text.find_first_not_of(" \t\r\n", eol);
  }
  if (first != std::string::npos && text.compare(first, 18, "fabricsim-topology") == 0) {
    return parse_fabricsim_topology(text, path, spec);
  }
  if (first != std::string::npos && (std::isdigit(static_cast<unsigned char>(text[first])) != 0)) {
    return parse_simai_topology(text, path, spec);
  }
  throw InputError(
      path, "line 1", "unknown topology file format",
      "start with 'fabricsim-topology 1' (docs/topology.md) or use a SimAI ns-3 topology file");
}

std::string topology_to_text(const Topology &topo, const std::string &comment) {
  std::string out = "fabricsim-topology 1\n";
  if (!comment.empty())
    out += "# " + comment + "\n";
  out += "# node NAME gpu|nvswitch|switch TIER ; link A B RATE LATENCY MTU (docs/topology.md)\n";
  for (LpId n = 0; n < topo.num_nodes(); ++n) {
    out += "node " + topo.node_name(n) + " ";
    switch (topo.kind(n)) {
    case NodeKind::kGpu:
      out += "gpu\n";
      break;
    case NodeKind::kNvSwitch:
      out += "nvswitch\n";
      break;
    default:
      out += "switch " + std::to_string(topo.tier(n)) + "\n";
      break;
    }
  }
  for (LpId a = 0; a < topo.num_nodes(); ++a) {
    for (const Port &p : topo.ports(a)) {
      if (p.peer <= a)
        continue;
      out += "link " + topo.node_name(a) + " " + topo.node_name(p.peer) + " " +
             std::to_string(p.rate_bps) + "bps " + std::to_string(p.latency_ps) + "ps " +
             std::to_string(p.mtu_bytes) + "B\n";
    }
  }
  return out;
}

} // namespace fabricsim::models
