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
  std::string sig;  ///< name and comm columns, space-joined (finds repeated micro-batch blocks)
  std::string name;
  engine::SimTime fwd_ps = 0, ig_ps = 0, wg_ps = 0, update_ps = 0;
  Comm fwd, ig, wg;
};

struct Header {
  std::string policy_token;
  Policy policy = Policy::kTransformer;
  std::uint64_t tp = 1, ep = 1, pp = 1, vpp = 1, ga = 1, all_gpus = 0;
  std::uint64_t pp_comm = 0;  ///< bytes of one activation (or gradient) between pipeline stages
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
      h.vpp = std::max<std::uint64_t>(value(key), 1);
    } else if (key == "ga:") {
      h.ga = std::max<std::uint64_t>(value(key), 1);
      if (h.ga > 100000) {
        throw InputError(at, "ga", std::to_string(h.ga) + " gradient-accumulation steps is absurd",
                         "write the micro-batches per iteration (at most 100000)");
      }
    } else if (key == "all_gpus:") {
      h.all_gpus = value(key);
    } else if (key == "pp_comm" || key == "pp_comm:") {
      h.pp_comm = value(key);
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
  // Compute times stay out: AICB's measured times differ between micro-batches (the first
  // micro-batch's embedding line of SimAI's example/workload_analytical.txt, for one).
  for (const std::size_t c : {std::size_t{0}, std::size_t{3}, std::size_t{4}, std::size_t{6}, std::size_t{7},
                              std::size_t{9}, std::size_t{10}}) {
    l.sig += cols[c];
    l.sig += ' ';
  }
  return l;
}

/// Lazily built communicator families over a world of `world` ranks laid out as
/// rank = t + tp * (s + pp * d) (TP index t, pipeline stage s, DP index d).
class Groups {
 public:
  Groups(std::string path, std::uint32_t world, std::uint32_t tp, std::uint32_t pp, std::uint32_t ep)
      : path_(std::move(path)), world_(world), tp_(tp), pp_(pp), ep_(ep) {
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
    const std::uint32_t stride = tp_ * pp_;  // ranks per pipeline replica
    const std::uint32_t dp = world_ / stride;
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
    // DP group of replica position i = t + tp * s, as an ordered list of ranks (SimAI
    // MockNcclGroup::MockNcclGroup: rank = i + j * DP_nums with DP_nums = TP * PP).
    const auto dp_members = [&](std::uint32_t i) {
      std::vector<std::uint32_t> m;
      for (std::uint32_t k = 0; k < dp; ++k) m.push_back(i + k * stride);
      return m;
    };
    if ((family == Family::kEp || family == Family::kDpEp) && dp % ep_ != 0) {
      throw InputError(where(path_, line_no), "ep",
                       "ep " + std::to_string(ep_) + " does not divide the DP size " + std::to_string(dp),
                       pp_ > 1 ? "choose ep dividing all_gpus / (model_parallel_NPU_group x pp)"
                               : "choose ep dividing all_gpus / model_parallel_NPU_group");
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
        for (std::uint32_t t = 0; t < stride; ++t) add("dp" + std::to_string(t), dp_members(t));
        break;
      case Family::kEp:
        for (std::uint32_t t = 0; t < stride; ++t) {
          const auto members = dp_members(t);
          for (std::uint32_t k = 0; k < dp / ep_; ++k) {
            std::vector<std::uint32_t> m(members.begin() + k * ep_, members.begin() + (k + 1) * ep_);
            add("ep" + std::to_string(t) + "." + std::to_string(k), std::move(m));
          }
        }
        break;
      case Family::kDpEp:
        for (std::uint32_t t = 0; t < stride; ++t) {
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
  std::uint32_t world_, tp_, pp_, ep_;
  std::array<std::vector<std::int32_t>, 4> member_of_;
  std::vector<models::CommGroup> groups_;
};

/// Node name "L<i>.<what>" (built by appending: GCC 12's -Wrestrict misfires on the operator+ chain).
std::string layer_label(std::size_t i, const char* what) {
  std::string out = "L";
  out += std::to_string(i);
  out += '.';
  out += what;
  return out;
}

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

  /// Point-to-point node: kSend issued off the chain (the chain does not wait for it), kRecv on
  /// the chain. `peer` is a peer slot (shared programs).
  std::uint32_t p2p(const std::string& name, NodeType type, std::int32_t peer, std::uint64_t bytes,
                    std::int64_t tag) {
    WorkNode n;
    n.source_id = 0;
    n.name = name;
    n.type = type;
    n.peer = peer;
    n.bytes = bytes;
    n.tag = tag;
    n.kind = models::CommKind::kPp;  // the only point-to-point traffic of a SimAI file: pp_comm
    return push(std::move(n), type == NodeType::kRecv, std::nullopt);
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
  const auto label = [](std::size_t i, const char* what) { return layer_label(i, what); };

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

/// Where the micro-batches sit in the layer list: lines [0, start) run once before them,
/// `count` copies of block [start, start + block) follow (written out in the file when
/// `unrolled`, else the one block repeats), and the lines after them run once at the end.
struct MicroBatches {
  std::size_t start = 0, block = 0, count = 1;
  bool unrolled = false;
};

/// Finds `ga` consecutive blocks with the same layer names and comm columns line by line, as
/// AICB's SimAI_training_workload_generator.py workload_generate writes them ("for _ in
/// range(self.ga_num)" around the model's layers): the longest block, then the earliest start.
std::optional<MicroBatches> find_unrolled(const std::vector<Layer>& layers, std::uint64_t ga) {
  const std::size_t n = layers.size();
  if (ga < 2 || n < ga) return std::nullopt;
  for (std::size_t b = n / ga; b >= 1; --b) {
    // run = consecutive i with line i equal to line i + b; ga blocks need (ga - 1) * b of them.
    const std::size_t need = (ga - 1) * b;
    std::size_t run = 0;
    for (std::size_t i = 0; i + b < n; ++i) {
      run = layers[i].sig == layers[i + b].sig ? run + 1 : 0;
      if (run == need) return MicroBatches{i + 1 - need, b, ga, true};
    }
  }
  return std::nullopt;
}

/// One step of a pipeline schedule: forward or backward of micro-batch `mb` on model chunk `chunk`.
struct PipeStep {
  bool forward = true;
  std::uint32_t mb = 0, chunk = 0;
};

/// The order in which stage `s` of `p` runs `m` micro-batches over `v` model chunks: Megatron-LM's
/// 1F1B (v = 1) and interleaved 1F1B (v > 1) schedules (megatron/core/pipeline_parallel/
/// schedules.py, forward_backward_pipelining_with_interleaving: warm-up (p - s - 1) * 2 +
/// (v - 1) * p forwards (p - s - 1 for v = 1), then one forward and one backward alternately,
/// then the remaining backwards; virtual micro-batch k runs chunk (k mod p*v) / p (backward:
/// v - 1 minus that) of micro-batch (k / (p*v)) * p + k mod p). Needs m % p == 0 when v > 1.
std::vector<PipeStep> pipeline_order(std::uint32_t s, std::uint32_t p, std::uint32_t v, std::uint32_t m) {
  const std::uint64_t total = std::uint64_t{m} * v;
  std::uint64_t warmup = v == 1 ? p - s - 1 : std::uint64_t{p - s - 1} * 2 + std::uint64_t{v - 1} * p;
  warmup = std::min(warmup, total);
  const auto step = [&](std::uint64_t k, bool fwd) {
    const std::uint64_t in_group = k % (std::uint64_t{p} * v);
    std::uint32_t chunk = static_cast<std::uint32_t>(in_group / p);
    if (!fwd) chunk = v - 1 - chunk;
    const auto mb = v == 1 ? static_cast<std::uint32_t>(k)
                           : static_cast<std::uint32_t>(k / (std::uint64_t{p} * v) * p + k % p);
    return PipeStep{fwd, mb, chunk};
  };
  std::vector<PipeStep> out;
  out.reserve(2 * total);
  for (std::uint64_t k = 0; k < warmup; ++k) out.push_back(step(k, true));
  for (std::uint64_t k = 0; k < total - warmup; ++k) {
    out.push_back(step(warmup + k, true));
    out.push_back(step(k, false));
  }
  for (std::uint64_t k = total - warmup; k < total; ++k) out.push_back(step(k, false));
  return out;
}

/// Group slots of a shared pipeline program: one per communicator family.
constexpr std::uint32_t kGroupWidth = 4;
/// Peer slots: the previous and the next pipeline stage of the same TP index and DP replica.
constexpr std::int32_t kPrevStage = 0, kNextStage = 1;
constexpr std::uint32_t kPeerWidth = 2;

/// Stage `s`'s program (shared by every rank of that stage: collectives name family slots,
/// sends/receives the kPrevStage/kNextStage slots). See read_simai's file comment for the rules.
std::vector<WorkNode> build_stage(const Header& h, const std::vector<Layer>& layers, const MicroBatches& mbs,
                                  std::uint32_t s) {
  const auto p = static_cast<std::uint32_t>(h.pp);
  const auto v = static_cast<std::uint32_t>(h.vpp);
  const auto m = static_cast<std::uint32_t>(mbs.count);
  std::vector<WorkNode> prog;
  ProgramBuilder b(prog);
  const auto slot = [](const Comm& c) { return static_cast<std::int32_t>(c.family); };
  const auto label = [](std::size_t i, const char* what) { return layer_label(i, what); };
  const auto fwd_line = [&](const std::string& pre, std::size_t i) {
    const Layer& l = layers[i];
    b.compute(pre + label(i, "fwd.compute"), l.line, l.fwd_ps);
    b.collective(pre + label(i, "fwd.comm"), l.line, l.fwd, slot(l.fwd));
  };
  const auto bwd_line = [&](const std::string& pre, std::size_t i, bool with_wg) {
    const Layer& l = layers[i];
    b.compute(pre + label(i, "ig.compute"), l.line, l.ig_ps);
    b.collective(pre + label(i, "ig.comm"), l.line, l.ig, slot(l.ig));
    b.compute(pre + label(i, "wg.compute"), l.line, l.wg_ps);
    if (!with_wg) return;
    const auto wg = b.collective(pre + label(i, "wg.comm"), l.line, l.wg, slot(l.wg), false);
    b.compute(pre + label(i, "wg.update"), l.line, l.update_ps, false, wg ? wg : b.tail());
  };
  // Chunk c of the micro-batch block: lines [start + c*block/v, start + (c+1)*block/v).
  const auto chunk_begin = [&](std::uint32_t c) { return mbs.start + std::size_t{c} * mbs.block / v; };
  // Tags: one per (micro-batch, receiving chunk, direction); the source rank tells stages apart.
  const auto tag = [&](std::uint32_t mb, std::uint32_t chunk, bool fwd) {
    return static_cast<std::int64_t>((std::uint64_t{mb} * v + chunk) * 2 + (fwd ? 0 : 1));
  };
  const std::size_t end = mbs.start + mbs.block * (mbs.unrolled ? mbs.count : 1);

  for (std::size_t i = 0; i < mbs.start; ++i) fwd_line("", i);
  for (const PipeStep& st : pipeline_order(s, p, v, m)) {
    const std::string pre = "mb" + std::to_string(st.mb) + ".c" + std::to_string(st.chunk) + ".";
    const bool first_virtual = s == 0 && st.chunk == 0;
    const bool last_virtual = s + 1 == p && st.chunk + 1 == v;
    // In the unrolled layout every micro-batch has its own lines (SimAI runs each of them).
    const std::size_t base = mbs.unrolled ? std::size_t{st.mb} * mbs.block : 0;
    if (st.forward) {
      if (!first_virtual) b.p2p(pre + "recv.act", NodeType::kRecv, kPrevStage, h.pp_comm, tag(st.mb, st.chunk, true));
      for (std::size_t i = chunk_begin(st.chunk); i < chunk_begin(st.chunk + 1); ++i) fwd_line(pre, base + i);
      if (!last_virtual) {
        const std::uint32_t to = s + 1 < p ? st.chunk : st.chunk + 1;
        b.p2p(pre + "send.act", NodeType::kSend, kNextStage, h.pp_comm, tag(st.mb, to, true));
      }
    } else {
      if (!last_virtual) b.p2p(pre + "recv.grad", NodeType::kRecv, kNextStage, h.pp_comm, tag(st.mb, st.chunk, false));
      const bool with_wg = mbs.unrolled || st.mb + 1 == m;
      for (std::size_t i = chunk_begin(st.chunk + 1); i-- > chunk_begin(st.chunk);) bwd_line(pre, base + i, with_wg);
      if (!first_virtual) {
        const std::uint32_t to = s > 0 ? st.chunk : st.chunk - 1;
        b.p2p(pre + "send.grad", NodeType::kSend, kPrevStage, h.pp_comm, tag(st.mb, to, false));
      }
    }
  }
  for (std::size_t i = end; i < layers.size(); ++i) fwd_line("", i);
  for (std::size_t i = layers.size(); i-- > end;) bwd_line("", i, true);
  for (std::size_t i = mbs.start; i-- > 0;) bwd_line("", i, true);
  return prog;
}

/// Header checks for pp > 1 (one InputError line each, naming the header field).
void check_pipeline(const std::string& path, const Header& h, std::uint64_t world, const MicroBatches& mbs) {
  const std::string at = where(path, 1);
  if (h.policy != Policy::kTransformer) {
    throw InputError(at, "pp", "pp " + std::to_string(h.pp) + " with policy " + h.policy_token +
                     " (pipeline stages need a training transformer policy)",
                     "use pp: 1, or a HYBRID_TRANSFORMER / HYBRID_TRANSFORMER_FWD_IN_BCKWD workload");
  }
  if (world % (h.tp * h.pp) != 0) {
    throw InputError(at, "pp", "model_parallel_NPU_group x pp = " + std::to_string(h.tp * h.pp) +
                     " does not divide the " + std::to_string(world) + " GPUs",
                     "choose pp so that model_parallel_NPU_group x pp divides all_gpus");
  }
  if (h.pp_comm == 0) {
    throw InputError(at, "pp_comm", "pp " + std::to_string(h.pp) + " but no pp_comm bytes between stages",
                     "write 'pp_comm: <bytes>' (AICB writes 2 x micro_batch x seq_length x hidden, / TP with "
                     "sequence parallelism)");
  }
  if (h.pp_comm > (1ull << 40)) {
    throw InputError(at, "pp_comm", std::to_string(h.pp_comm) + " bytes is over 1 TiB",
                     "write the bytes of one micro-batch's activation");
  }
  if (h.vpp > mbs.block) {
    throw InputError(at, "vpp", "vpp " + std::to_string(h.vpp) + " virtual stages but a micro-batch has " +
                     std::to_string(mbs.block) + " layer lines",
                     "write vpp at most the layer lines of one micro-batch (AICB writes the layers per stage)");
  }
  if (h.vpp > 1 && mbs.count % h.pp != 0) {
    throw InputError(at, "ga", "ga " + std::to_string(mbs.count) + " is not a multiple of pp " +
                     std::to_string(h.pp) + " (the interleaved schedule needs it)",
                     "choose ga as a multiple of pp, or write vpp: 1");
  }
  if (h.pp > 4096 || h.vpp > 4096) {
    throw InputError(at, h.pp > 4096 ? "pp" : "vpp", "more than 4096 stages is absurd", "check the value");
  }
}

/// Fills `w` with the p shared stage programs and each rank's group and peer slots.
void build_pipeline(const std::string& path, const Header& h, const std::vector<Layer>& layers,
                    const MicroBatches& mbs, models::Workload& w) {
  const auto tp = static_cast<std::uint32_t>(h.tp);
  const auto pp = static_cast<std::uint32_t>(h.pp);
  Groups groups(path, w.ranks, tp, pp, static_cast<std::uint32_t>(h.ep));
  // Build the families the file uses (first use names the line, for the ep error).
  std::array<std::size_t, 4> first_line{};
  for (const Layer& l : layers) {
    for (const Comm* c : {&l.fwd, &l.ig, &l.wg}) {
      if (c->present && first_line[static_cast<std::size_t>(c->family)] == 0) {
        first_line[static_cast<std::size_t>(c->family)] = l.line;
      }
    }
  }
  for (std::uint32_t s = 0; s < pp; ++s) w.programs.push_back(build_stage(h, layers, mbs, s));
  w.program_of.resize(w.ranks);
  w.group_width = kGroupWidth;
  w.peer_width = kPeerWidth;
  w.group_slots.assign(std::size_t{w.ranks} * kGroupWidth, 0);
  w.peer_slots.assign(std::size_t{w.ranks} * kPeerWidth, -1);
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    const std::uint32_t t = r % tp;
    const std::uint32_t s = r / tp % pp;
    const std::uint32_t replica = r / (tp * pp) * (tp * pp);
    w.program_of[r] = s;
    for (std::size_t f = 0; f < 4; ++f) {
      if (first_line[f] == 0) continue;
      w.group_slots[std::size_t{r} * kGroupWidth + f] = groups.of(static_cast<Family>(f), r, first_line[f]);
    }
    w.peer_slots[std::size_t{r} * kPeerWidth + kPrevStage] = static_cast<std::int32_t>(replica + t + tp * ((s + pp - 1) % pp));
    w.peer_slots[std::size_t{r} * kPeerWidth + kNextStage] = static_cast<std::int32_t>(replica + t + tp * ((s + 1) % pp));
  }
  w.groups = groups.take();
  // Replicas of the pipeline (MockNcclGroup's rank = i + j * TP * PP): sim.fold: dp folds them.
  w.replica_stride = tp * pp;
  w.replicas = w.ranks / (tp * pp);
}

}  // namespace

models::Workload read_simai(const std::string& path, std::uint32_t gpus_override) {
  std::ifstream in(path);
  if (!in) {
    throw InputError(path, "file", "cannot open for reading", "check the path and permissions");
  }
  return read_simai(in, path, gpus_override);
}

models::Workload read_simai(std::istream& in, const std::string& path, std::uint32_t gpus_override) {
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

  // Micro-batches: AICB writes the ga copies of the stage's layers into the file.
  MicroBatches mbs;
  mbs.block = layers.size();
  mbs.count = h.ga;
  const auto unrolled = h.policy == Policy::kTransformer ? find_unrolled(layers, h.ga) : std::nullopt;
  if (unrolled) mbs = *unrolled;
  if (h.pp > 1) {
    check_pipeline(path, h, world, mbs);
    build_pipeline(path, h, layers, mbs, w);
    return w;
  }
  Header flat = h;
  if (unrolled) {
    // SimAI runs the layer list once (Workload.cc iterate_hybrid_parallel_Transformer*); the
    // list already holds the ga micro-batches.
    flat.ga = 1;
    w.warnings.push_back(where(path, 1) + ": ga: " + std::to_string(h.ga) + " micro-batches are written out in the "
                         "file (lines " + std::to_string(layers[mbs.start].line) + ".." +
                         std::to_string(layers[mbs.start + mbs.block * mbs.count - 1].line) +
                         "); the layer list runs once, as in SimAI");
  }
  Groups groups(path, w.ranks, static_cast<std::uint32_t>(h.tp), static_cast<std::uint32_t>(h.pp),
                static_cast<std::uint32_t>(h.ep));
  w.programs.reserve(w.ranks);
  for (std::uint32_t r = 0; r < w.ranks; ++r) w.programs.push_back(build_program(flat, layers, r, groups));
  w.groups = groups.take();
  return w;
}

}  // namespace fabricsim::io
