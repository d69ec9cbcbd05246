#include "io/simai_reader.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "engine/errors.hpp"
#include "engine/time.hpp"

namespace fabricsim::io {
namespace {

using engine::InputError;
using models::CollOp;
using models::NodeType;
using models::WorkNode;

constexpr std::array<const char*, 12> kColumns = {
    "name",           "reserved",      "fwd_compute_time", "fwd_comm_type",
    "fwd_comm_size",  "ig_compute_time", "ig_comm_type",   "ig_comm_size",
    "wg_compute_time", "wg_comm_type",  "wg_comm_size",    "wg_update_time"};

constexpr const char* kCommTypesHelp =
    "use NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL or BROADCAST, "
    "optionally suffixed _EP or _DP_EP";

enum class Policy { kMicro, kData, kTransformer, kInference };

/// Which communicator family a comm column addresses.
enum class Family { kTp, kDp, kEp, kDpEp };

struct Comm {
  bool present = false;  ///< false for NONE or size 0
  CollOp op = CollOp::kAllReduce;
  Family family = Family::kTp;
  std::uint64_t bytes = 0;
};

struct Layer {
  std::size_t line = 0;
  std::string name;
  engine::SimTime fwd_ps = 0, ig_ps = 0, wg_ps = 0, update_ps = 0;
  Comm fwd, ig, wg;
};

struct Header {
  std::string policy_token;
  Policy policy = Policy::kTransformer;
  std::uint64_t tp = 1, ep = 1, pp = 1, ga = 1, all_gpus = 0;
};

std::string where(const std::string& path, std::size_t line) {
  return path + ":" + std::to_string(line);
}

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

bool is_blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n\v\f") == std::string::npos;
}

/// Parses a signed 64-bit integer covering the whole token.
std::optional<std::int64_t> parse_int(std::string_view tok) {
  if (!tok.empty() && tok.front() == '+') tok.remove_prefix(1);
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec != std::errc() || p != tok.data() + tok.size()) return std::nullopt;
  return v;
}

/// Non-negative integer (bytes, counts) or InputError naming the column.
std::uint64_t parse_count(const std::string& file_line, const std::string& field, const std::string& tok,
                          const std::string& what) {
  const auto v = parse_int(tok);
  if (!v) {
    std::string_view t = tok;
    if (!t.empty() && (t.front() == '+' || t.front() == '-')) t.remove_prefix(1);
    const bool digits = !t.empty() && t.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits) {  // an integer, but outside what a signed 64-bit count holds
      throw InputError(file_line, field, "'" + tok + "' is out of range (above 2^63 - 1)",
                       "write " + what + " as a non-negative integer below 2^63");
    }
    throw InputError(file_line, field, "'" + tok + "' is not an integer",
                     "write " + what + " as a non-negative integer");
  }
  if (*v < 0) {
    throw InputError(file_line, field, "negative value " + tok, "write " + what + " as a non-negative integer");
  }
  return static_cast<std::uint64_t>(*v);
}

/// A header key without its trailing ':' (for error messages).
std::string bare_key(const std::string& key) {
  return !key.empty() && key.back() == ':' ? key.substr(0, key.size() - 1) : key;
}

/// Compute time in ns (integer, or decimal rounded to whole ps) -> ps.
engine::SimTime parse_ns(const std::string& file_line, const std::string& field, const std::string& tok) {
  constexpr std::int64_t kMaxNs = engine::kInfinity / engine::kPsPerNs / 2;
  const std::string fix = "write the compute time as a non-negative integer number of ns";
  if (const auto v = parse_int(tok)) {
    if (*v < 0) throw InputError(file_line, field, "negative compute time " + tok, fix);
    if (*v > kMaxNs) throw InputError(file_line, field, "compute time " + tok + " ns is absurd", fix);
    return *v * engine::kPsPerNs;
  }
  double d = 0.0;
  const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
  if (ec != std::errc() || p != tok.data() + tok.size() || !std::isfinite(d)) {
    throw InputError(file_line, field, "'" + tok + "' is not a number", fix);
  }
  if (d < 0) throw InputError(file_line, field, "negative compute time " + tok, fix);
  if (d > static_cast<double>(kMaxNs)) throw InputError(file_line, field, "compute time " + tok + " ns is absurd", fix);
  return static_cast<engine::SimTime>(std::llround(d * static_cast<double>(engine::kPsPerNs)));
}

/// Parses a comm type token and its size column.
Comm parse_comm(const std::string& file_line, std::size_t type_col, const std::vector<std::string>& cols,
                Family default_family) {
  Comm c;
  std::string tok = cols[type_col];
  const std::string size_field = std::string("column ") + kColumns[type_col + 1];
  c.bytes = parse_count(file_line, size_field, cols[type_col + 1], "the size in bytes");
  if (c.bytes > (1ull << 40)) {
    throw InputError(file_line, size_field, "size " + cols[type_col + 1] + " bytes is over 1 TiB",
                     "write the per-rank buffer size in bytes");
  }
  c.family = default_family;
  const auto strip = [&tok](std::string_view suffix) {
    if (tok.size() > suffix.size() && tok.compare(tok.size() - suffix.size(), suffix.size(), suffix) == 0) {
      tok.resize(tok.size() - suffix.size());
      return true;
    }
    return false;
  };
  if (strip("_DP_EP")) {
    c.family = Family::kDpEp;
  } else if (strip("_EP")) {
    c.family = Family::kEp;
  }
  if (tok == "NONE") {
    c.present = false;
    return c;
  }
  if (tok == "ALLREDUCE" || tok == "ALLREDUCEALLTOALL") {
    c.op = CollOp::kAllReduce;
  } else if (tok == "ALLGATHER") {
    c.op = CollOp::kAllGather;
  } else if (tok == "REDUCESCATTER") {
    c.op = CollOp::kReduceScatter;
  } else if (tok == "ALLTOALL") {
    c.op = CollOp::kAllToAll;
  } else if (tok == "BROADCAST") {
    c.op = CollOp::kBroadcast;
  } else {
    throw InputError(file_line, std::string("column ") + kColumns[type_col],
                     "unknown comm type '" + cols[type_col] + "'", kCommTypesHelp);
  }
  c.present = c.bytes > 0;
  return c;
}

Header parse_header(const std::string& path, const std::string& line) {
  const std::string at = where(path, 1);
  const auto toks = split_ws(line);
  if (toks.empty()) {
    throw InputError(at, "policy", "empty header line",
                     "start the file with a policy such as HYBRID_TRANSFORMER_FWD_IN_BCKWD or MICRO");
  }
  Header h;
  h.policy_token = toks[0];
  const std::string& p = toks[0];
  if (p == "MICRO") {
    h.policy = Policy::kMicro;
  } else if (p == "DATA") {
    h.policy = Policy::kData;
  } else if (p == "DISTRIBUTED_INFERENCE") {
    h.policy = Policy::kInference;
  } else if (p == "HYBRID_TRANSFORMER" || p == "HYBRID_TRANSFORMER_FWD_IN_BCKWD" || p == "MODEL" ||
             p == "HYBRID_DATA_MODEL" || p == "HYBRID_MODEL_DATA" || p == "HYBRID_CUSTOMIZED") {
    h.policy = Policy::kTransformer;
  } else if (p == "HYBRID_DLRM" || p == "HYBRID_DLRM_ENHANCED") {
    throw InputError(at, "policy", p + " workloads are not supported",
                     "use a transformer, DATA or MICRO workload");
  } else {
    throw InputError(at, "policy", "unknown parallelism policy '" + p + "'",
                     "use HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_TRANSFORMER, MODEL, DATA, MICRO, "
                     "HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED or DISTRIBUTED_INFERENCE");
  }

  std::size_t i = 1;
  const auto value = [&](const std::string& key) -> std::uint64_t {
    if (i >= toks.size()) {
      throw InputError(at, bare_key(key), "missing value", "write '" + key + " <integer>'");
    }
    return parse_count(at, key, toks[i++], "the value of " + key);
  };
  while (i < toks.size()) {
    const std::string key = toks[i++];
    if (key == "model_parallel_NPU_group:") {
      h.tp = value(key);
      if (h.tp == 0) {
        throw InputError(at, bare_key(key), "TP size 0", "write model_parallel_NPU_group: 1 (or larger)");
      }
    } else if (key == "ep:") {
      h.ep = std::max<std::uint64_t>(value(key), 1);
    } else if (key == "pp:") {
      h.pp = std::max<std::uint64_t>(value(key), 1);
    } else if (key == "vpp:") {
      (void)value(key);
    } else if (key == "ga:") {
      h.ga = std::max<std::uint64_t>(value(key), 1);
      if (h.ga > 100000) {
        throw InputError(at, "ga", std::to_string(h.ga) + " gradient-accumulation steps is absurd",
                         "write the micro-batches per iteration (at most 100000)");
      }
    } else if (key == "all_gpus:") {
      h.all_gpus = value(key);
    } else if (key == "pp_comm" || key == "pp_comm:") {
      (void)value(key);
    } else if (key == "checkpoints:" || key == "checkpoint_initiates:") {
      const std::uint64_t n = value(key);
      for (std::uint64_t k = 0; k < n; ++k) (void)value(key);
    } else if (key.size() > 1 && key.back() == ':') {
      (void)value(key);  // a key we do not use (newer AICB versions); skip its value
    } else {
      throw InputError(at, "header token " + std::to_string(i), "unexpected token '" + key + "'",
                       "write the header as POLICY followed by 'key: value' pairs");
    }
  }
  return h;
}

Layer parse_layer(const std::string& path, std::size_t line_no, const std::string& line, const Header& h) {
  const std::string at = where(path, line_no);
  const auto cols = split_ws(line);
  const std::size_t want = h.policy_token == "HYBRID_CUSTOMIZED" ? 13 : 12;
  if (cols.size() != want) {
    throw InputError(at, "columns",
                     "expected " + std::to_string(want) + " whitespace-separated columns, found " +
                         std::to_string(cols.size()),
                     "write name, reserved, then fwd/ig/wg compute time, comm type and size, and "
                     "wg_update_time");
  }
  Layer l;
  l.line = line_no;
  l.name = cols[0];
  if (!parse_int(cols[1])) {
    throw InputError(at, "column reserved", "'" + cols[1] + "' is not an integer", "write -1");
  }
  const auto col = [](std::size_t c) { return std::string("column ") + kColumns[c]; };
  l.fwd_ps = parse_ns(at, col(2), cols[2]);
  l.fwd = parse_comm(at, 3, cols, Family::kTp);
  l.ig_ps = parse_ns(at, col(5), cols[5]);
  l.ig = parse_comm(at, 6, cols, Family::kTp);
  l.wg_ps = parse_ns(at, col(8), cols[8]);
  l.wg = parse_comm(at, 9, cols, Family::kDp);
  l.update_ps = parse_ns(at, col(11), cols[11]);
  return l;
}

/// Lazily built communicator families over a world of `world` ranks.
class Groups {
 public:
  Groups(std::string path, std::uint32_t world, std::uint32_t tp, std::uint32_t ep)
      : path_(std::move(path)), world_(world), tp_(tp), ep_(ep) {
    models::CommGroup w{"world", {}};
    for (std::uint32_t r = 0; r < world; ++r) w.ranks.push_back(r);
    groups_.push_back(std::move(w));
  }

  /// Group index of `rank` in `family` (line_no names the first layer needing it, for errors).
  std::int32_t of(Family family, std::uint32_t rank, std::size_t line_no) {
    auto& table = member_of_[static_cast<std::size_t>(family)];
    if (table.empty()) build(family, line_no);
    return table[rank];
  }

  std::vector<models::CommGroup> take() { return std::move(groups_); }

 private:
  void build(Family family, std::size_t line_no) {
    auto& table = member_of_[static_cast<std::size_t>(family)];
    table.assign(world_, 0);
    const std::uint32_t dp = world_ / tp_;
    // SimAI's group types (AICB/SimAI workload layer: TP, DP, EP, DP_EP): DP_EP is the expert
    // data-parallel group, which reduces expert gradients, so it counts as DP.
    const models::CommKind kind = family == Family::kTp   ? models::CommKind::kTp
                                  : family == Family::kEp ? models::CommKind::kEp
                                                          : models::CommKind::kDp;
    const auto add = [&](std::string name, std::vector<std::uint32_t> ranks) {
      const auto index = static_cast<std::int32_t>(groups_.size());
      for (const auto r : ranks) table[r] = index;
      groups_.push_back(models::CommGroup{std::move(name), std::move(ranks), kind});
    };
    // DP group of TP index t, as an ordered list of ranks.
    const auto dp_members = [&](std::uint32_t t) {
      std::vector<std::uint32_t> m;
      for (std::uint32_t k = 0; k < dp; ++k) m.push_back(t + k * tp_);
      return m;
    };
    if ((family == Family::kEp || family == Family::kDpEp) && dp % ep_ != 0) {
      throw InputError(where(path_, line_no), "ep",
                       "ep " + std::to_string(ep_) + " does not divide the DP size " + std::to_string(dp),
                       "choose ep dividing all_gpus / model_parallel_NPU_group");
    }
    switch (family) {
      case Family::kTp:
        for (std::uint32_t i = 0; i < world_ / tp_; ++i) {
          std::vector<std::uint32_t> m;
          for (std::uint32_t k = 0; k < tp_; ++k) m.push_back(i * tp_ + k);
          add("tp" + std::to_string(i), std::move(m));
        }
        break;
      case Family::kDp:
        for (std::uint32_t t = 0; t < tp_; ++t) add("dp" + std::to_string(t), dp_members(t));
        break;
      case Family::kEp:
        for (std::uint32_t t = 0; t < tp_; ++t) {
          const auto members = dp_members(t);
          for (std::uint32_t k = 0; k < dp / ep_; ++k) {
            std::vector<std::uint32_t> m(members.begin() + k * ep_, members.begin() + (k + 1) * ep_);
            add("ep" + std::to_string(t) + "." + std::to_string(k), std::move(m));
          }
        }
        break;
      case Family::kDpEp:
        for (std::uint32_t t = 0; t < tp_; ++t) {
          const auto members = dp_members(t);
          for (std::uint32_t j = 0; j < ep_; ++j) {
            std::vector<std::uint32_t> m;
            for (std::uint32_t k = j; k < dp; k += ep_) m.push_back(members[k]);
            add("dpep" + std::to_string(t) + "." + std::to_string(j), std::move(m));
          }
        }
        break;
    }
  }

  std::string path_;
  std::uint32_t world_, tp_, ep_;
  std::array<std::vector<std::int32_t>, 4> member_of_;
  std::vector<models::CommGroup> groups_;
};

/// Appends nodes to one rank's program, keeping track of the serial chain's tail.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::vector<WorkNode>& out) : out_(out) {}

  /// Compute node on the chain (skipped when ps == 0). Returns its index, if emitted.
  std::optional<std::uint32_t> compute(const std::string& name, std::size_t line, engine::SimTime ps,
                                       bool on_chain = true,
                                       std::optional<std::uint32_t> dep = std::nullopt) {
    if (ps == 0) return std::nullopt;
    WorkNode n;
    n.source_id = line;
    n.name = name;
    n.type = NodeType::kCompute;
    n.duration_ps = ps;
    return push(std::move(n), on_chain, dep);
  }

  /// Collective node (skipped when not present). on_chain=false: issued asynchronously.
  std::optional<std::uint32_t> collective(const std::string& name, std::size_t line, const Comm& c,
                                          std::int32_t group, bool on_chain = true) {
    if (!c.present) return std::nullopt;
    WorkNode n;
    n.source_id = line;
    n.name = name;
    n.type = NodeType::kCollective;
    n.op = c.op;
    n.bytes = c.bytes;
    n.group = group;
    n.root = 0;
    return push(std::move(n), on_chain, std::nullopt);
  }

  std::optional<std::uint32_t> tail() const { return tail_; }

 private:
  std::uint32_t push(WorkNode n, bool on_chain, std::optional<std::uint32_t> dep) {
    const std::optional<std::uint32_t> d = dep ? dep : tail_;
    if (d) n.deps.push_back(*d);
    const auto index = static_cast<std::uint32_t>(out_.size());
    out_.push_back(std::move(n));
    if (on_chain) tail_ = index;
    return index;
  }

  std::vector<WorkNode>& out_;
  std::optional<std::uint32_t> tail_;
};

std::vector<WorkNode> build_program(const Header& h, const std::vector<Layer>& layers, std::uint32_t rank,
                                    Groups& groups) {
  std::vector<WorkNode> prog;
  ProgramBuilder b(prog);
  const auto group = [&](const Comm& c, const Layer& l) {
    return c.present ? groups.of(c.family, rank, l.line) : 0;
  };
  const auto label = [](std::size_t i, const char* what) { return "L" + std::to_string(i) + "." + what; };

  if (h.policy == Policy::kMicro || h.policy == Policy::kData) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      b.compute(label(i, "wg.compute"), l.line, l.wg_ps);
      b.collective(label(i, "wg.comm"), l.line, l.wg, group(l.wg, l));
    }
    return prog;
  }

  const std::uint64_t ga = h.ga;
  for (std::uint64_t mb = 0; mb < ga; ++mb) {
    const std::string pre = ga > 1 ? "mb" + std::to_string(mb) + "." : "";
    const bool last = mb + 1 == ga;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      b.compute(pre + label(i, "fwd.compute"), l.line, l.fwd_ps);
      b.collective(pre + label(i, "fwd.comm"), l.line, l.fwd, group(l.fwd, l));
    }
    if (h.policy == Policy::kInference) continue;
    for (std::size_t k = layers.size(); k-- > 0;) {
      const Layer& l = layers[k];
      b.compute(pre + label(k, "ig.compute"), l.line, l.ig_ps);
      b.collective(pre + label(k, "ig.comm"), l.line, l.ig, group(l.ig, l));
      b.compute(pre + label(k, "wg.compute"), l.line, l.wg_ps);
      if (!last) continue;
      const auto wg = b.collective(pre + label(k, "wg.comm"), l.line, l.wg, group(l.wg, l), false);
      b.compute(pre + label(k, "wg.update"), l.line, l.update_ps, false, wg ? wg : b.tail());
    }
  }
  return prog;
}

}  // namespace

models::Workload read_simai(const std::string& path, std::uint32_t gpus_override) {
  std::ifstream in(path);
  if (!in) {
    throw InputError(path, "file", "cannot open for reading", "check the path and permissions");
  }
  std::vector<std::string> lines;
  for (std::string s; std::getline(in, s);) lines.push_back(s);
  // A UTF-8 byte-order mark (some editors write one) is not part of the policy token.
  if (!lines.empty() && lines[0].rfind("\xEF\xBB\xBF", 0) == 0) lines[0].erase(0, 3);

  if (lines.empty() || is_blank(lines[0])) {
    throw InputError(where(path, 1), "policy", "missing header line",
                     "start the file with a policy line such as 'MICRO' or 'HYBRID_TRANSFORMER_FWD_IN_BCKWD "
                     "model_parallel_NPU_group: 8 ...'");
  }
  const Header h = parse_header(path, lines[0]);

  // World size.
  std::uint64_t world = h.all_gpus;
  if (world == 0 && gpus_override == 0) {
    throw InputError(where(path, 1), "all_gpus", "the file does not give the number of GPUs",
                     "pass --gpus N");
  }
  if (world != 0 && gpus_override != 0 && world != gpus_override) {
    throw InputError(where(path, 1), "all_gpus",
                     "file says " + std::to_string(world) + " GPUs but --gpus is " + std::to_string(gpus_override),
                     "drop --gpus or make it match all_gpus");
  }
  if (world == 0) world = gpus_override;
  if (world > (1u << 24)) {
    throw InputError(where(path, 1), "all_gpus", std::to_string(world) + " GPUs is absurd", "check the value");
  }
  if (h.pp > 1) {
    throw InputError(where(path, 1), "pp",
                     "pp > 1 is not supported yet (pipeline send/recv arrive with the workload generators)",
                     "use a pp: 1 workload");
  }
  if (h.tp > world || world % h.tp != 0) {
    throw InputError(where(path, 1), "model_parallel_NPU_group",
                     "TP size " + std::to_string(h.tp) + " does not divide the " + std::to_string(world) + " GPUs",
                     "choose all_gpus (or --gpus) as a multiple of model_parallel_NPU_group");
  }

  // Layer count and layer lines.
  if (lines.size() < 2 || is_blank(lines[1])) {
    throw InputError(where(path, 2), "layer count", "missing", "write the number of layer lines on line 2");
  }
  const auto count_toks = split_ws(lines[1]);
  if (count_toks.size() != 1) {
    throw InputError(where(path, 2), "layer count", "expected a single integer, found '" + lines[1] + "'",
                     "write the number of layer lines on line 2");
  }
  const std::uint64_t declared = parse_count(where(path, 2), "layer count", count_toks[0], "the layer count");
  std::vector<Layer> layers;
  for (std::size_t i = 2; i < lines.size(); ++i) {
    if (is_blank(lines[i])) continue;
    if (layers.size() == declared) {
      throw InputError(where(path, i + 1), "layer count",
                       "line 2 declares " + std::to_string(declared) + " layers but more lines follow",
                       "set line 2 to the number of layer lines");
    }
    layers.push_back(parse_layer(path, i + 1, lines[i], h));
  }
  if (declared == 0) {
    throw InputError(where(path, 2), "layer count", "the workload has no layers", "give at least one layer line");
  }
  if (layers.size() != declared) {
    throw InputError(where(path, 2), "layer count",
                     "declares " + std::to_string(declared) + " layers but the file has " +
                         std::to_string(layers.size()),
                     "set line 2 to the number of layer lines");
  }

  models::Workload w;
  w.source = path;
  w.format = "simai";
  w.ranks = static_cast<std::uint32_t>(world);
  Groups groups(path, w.ranks, static_cast<std::uint32_t>(h.tp), static_cast<std::uint32_t>(h.ep));
  w.programs.reserve(w.ranks);
  for (std::uint32_t r = 0; r < w.ranks; ++r) w.programs.push_back(build_program(h, layers, r, groups));
  w.groups = groups.take();
  return w;
}

}  // namespace fabricsim::io
