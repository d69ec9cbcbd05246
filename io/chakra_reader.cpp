#include "io/chakra_reader.hpp"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "et_def.pb.h"

namespace fabricsim::io {
namespace {

namespace fs = std::filesystem;
using engine::InputError;
using models::CollOp;
using models::NodeType;
using models::WorkNode;

/// Largest plausible serialized record; anything longer is treated as corruption.
constexpr std::uint32_t kMaxRecordBytes = 1u << 30;

std::string rank_file(const std::string& prefix, std::uint32_t rank) {
  return prefix + "." + std::to_string(rank) + ".et";
}

/// Reads a whole file into memory.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path, "file", "cannot open for reading", "check the path and permissions");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "node 12 'name'" for error messages.
std::string node_field(const ChakraProtoMsg::Node& n) {
  return "node " + std::to_string(n.id()) + " '" + n.name() + "'";
}

/// Finds the ranks present as PREFIX.<n>.et; they must be exactly 0..N-1.
std::uint32_t discover_ranks(const std::string& prefix) {
  std::uint32_t n = 0;
  std::error_code ec;
  while (fs::is_regular_file(rank_file(prefix, n), ec)) ++n;
  if (n == 0) {
    throw InputError(rank_file(prefix, 0), "file", "no Chakra ET file for rank 0",
                     "pass the trace prefix X such that X.0.et, X.1.et, ... exist");
  }
  // Look for stragglers beyond the first missing rank (a gap in the numbering).
  const fs::path p(prefix);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string base = p.filename().string() + ".";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= base.size() + 3 || name.compare(0, base.size(), base) != 0 ||
        name.compare(name.size() - 3, 3, ".et") != 0) {
      continue;
    }
    const std::string mid = name.substr(base.size(), name.size() - base.size() - 3);
    if (mid.empty() || !std::all_of(mid.begin(), mid.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const unsigned long long r = std::stoull(mid);
    if (r >= n) {
      throw InputError(entry.path().string(), "file",
                       "rank " + mid + " present but rank " + std::to_string(n) + " is missing",
                       "provide one file per rank numbered 0.." + mid + " without gaps");
    }
  }
  return n;
}

/// Reads one varint32; returns false if the buffer ends in the middle of it.
bool read_varint32(const std::string& buf, std::size_t& pos, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (pos >= buf.size()) return false;
    const auto byte = static_cast<unsigned char>(buf[pos++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  value = std::numeric_limits<std::uint64_t>::max();  // over-long varint: garbage
  return true;
}

/// Walks a file's length-delimited records: next() yields (offset, length) of each record and
/// throws InputError on a broken frame. Records are decoded as they are framed, so a garbage file
/// is reported at its first undecodable record rather than at a later framing error.
class RecordReader {
 public:
  RecordReader(const std::string& file, const std::string& buf) : file_(file), buf_(buf) {}

  /// False at a clean end of file.
  bool next(std::size_t& offset, std::size_t& length) {
    if (pos_ >= buf_.size()) return false;
    const std::size_t start = pos_;
    std::uint64_t len = 0;
    const std::string field = "record " + std::to_string(index_) + " (byte offset " + std::to_string(start) + ")";
    if (!read_varint32(buf_, pos_, len)) {
      throw InputError(file_, field, "file ends inside a record length (truncated trace)",
                       "regenerate or re-copy the ET file");
    }
    if (len > kMaxRecordBytes) {
      throw InputError(file_, field,
                       "record length " + std::to_string(len) + " is not plausible (garbage bytes?)",
                       "check that this is a Chakra ET file (varint-length-delimited protobuf)");
    }
    if (len > buf_.size() - pos_) {
      throw InputError(file_, field,
                       "record of " + std::to_string(len) + " bytes but only " +
                           std::to_string(buf_.size() - pos_) + " remain (truncated trace or garbage bytes)",
                       "regenerate or re-copy the ET file");
    }
    offset = pos_;
    length = static_cast<std::size_t>(len);
    pos_ += length;
    ++index_;
    return true;
  }

 private:
  const std::string& file_;
  const std::string& buf_;
  std::size_t pos_ = 0;
  std::size_t index_ = 0;
};

/// Integer value of an attribute in any integer encoding; nullopt for non-integers.
std::optional<long double> attr_int(const ChakraProtoMsg::AttributeProto& a) {
  using A = ChakraProtoMsg::AttributeProto;
  switch (a.value_case()) {
    case A::kInt32Val: return a.int32_val();
    case A::kInt64Val: return a.int64_val();
    case A::kUint32Val: return a.uint32_val();
    case A::kUint64Val: return a.uint64_val();
    case A::kSint32Val: return a.sint32_val();
    case A::kSint64Val: return a.sint64_val();
    case A::kFixed32Val: return a.fixed32_val();
    case A::kFixed64Val: return a.fixed64_val();
    case A::kSfixed32Val: return a.sfixed32_val();
    case A::kSfixed64Val: return a.sfixed64_val();
    default: return std::nullopt;
  }
}

/// Attributes of one node, looked up by name.
class Attrs {
 public:
  Attrs(const std::string& file, const ChakraProtoMsg::Node& node) : file_(file), node_(node) {
    for (const auto& a : node.attr()) by_name_.emplace(a.name(), &a);
  }

  const ChakraProtoMsg::AttributeProto* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  /// Integer attribute in [lo, hi]; nullopt when absent. Throws when present but not an integer
  /// or out of range.
  std::optional<std::int64_t> integer(const std::string& name, std::int64_t lo, std::int64_t hi,
                                      const std::string& what) const {
    const auto* a = find(name);
    if (a == nullptr) return std::nullopt;
    const auto v = attr_int(*a);
    if (!v) {
      throw InputError(file_, node_field(node_) + ": attr " + name, "is not an integer attribute",
                       "write " + name + " as int32/int64/uint32/uint64");
    }
    if (*v < lo || *v > hi) {
      std::ostringstream val;
      val << static_cast<long double>(*v);
      throw InputError(file_, node_field(node_) + ": attr " + name,
                       what + " " + val.str() + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]",
                       "fix the trace generator (negative or absurd value)");
    }
    return static_cast<std::int64_t>(*v);
  }

  /// Like integer() but the attribute must be present.
  std::int64_t required(const std::string& name, std::int64_t lo, std::int64_t hi,
                        const std::string& what) const {
    const auto v = integer(name, lo, hi, what);
    if (!v) {
      throw InputError(file_, node_field(node_), "communication node without attr " + name,
                       "add the " + name + " attribute (" + what + ") to the node");
    }
    return *v;
  }

  /// Bool attribute (bool_val, or an integer 0/1); nullopt when absent. Throws otherwise.
  std::optional<bool> boolean(const std::string& name) const {
    const auto* a = find(name);
    if (a == nullptr) return std::nullopt;
    if (a->value_case() == ChakraProtoMsg::AttributeProto::kBoolVal) return a->bool_val();
    const auto v = attr_int(*a);
    if (!v || (*v != 0 && *v != 1)) {
      throw InputError(file_, node_field(node_) + ": attr " + name, "is not a bool attribute",
                       "write " + name + " as bool_val (true/false)");
    }
    return *v == 1;
  }

  /// String attribute (empty if absent).
  std::string string(const std::string& name) const {
    const auto* a = find(name);
    if (a == nullptr) return {};
    if (a->value_case() != ChakraProtoMsg::AttributeProto::kStringVal) {
      throw InputError(file_, node_field(node_) + ": attr " + name, "is not a string attribute",
                       "write " + name + " as string_val");
    }
    return a->string_val();
  }

 private:
  const std::string& file_;
  const ChakraProtoMsg::Node& node_;
  std::unordered_map<std::string, const ChakraProtoMsg::AttributeProto*> by_name_;
};

/// Maps a Chakra CollectiveCommType value to our op (and a byte override for BARRIER).
CollOp coll_op(const std::string& file, const ChakraProtoMsg::Node& node, std::int64_t type,
               bool& is_barrier) {
  is_barrier = false;
  switch (type) {
    case ChakraProtoMsg::ALL_REDUCE: return CollOp::kAllReduce;
    case ChakraProtoMsg::REDUCE: return CollOp::kReduce;
    case ChakraProtoMsg::ALL_GATHER: return CollOp::kAllGather;
    case ChakraProtoMsg::BROADCAST: return CollOp::kBroadcast;
    case ChakraProtoMsg::ALL_TO_ALL: return CollOp::kAllToAll;
    case ChakraProtoMsg::REDUCE_SCATTER:
    case ChakraProtoMsg::REDUCE_SCATTER_BLOCK: return CollOp::kReduceScatter;
    case ChakraProtoMsg::BARRIER: is_barrier = true; return CollOp::kAllReduce;
    case ChakraProtoMsg::GATHER:
    case ChakraProtoMsg::SCATTER:
      throw InputError(file, node_field(node) + ": attr comm_type",
                       std::string(ChakraProtoMsg::CollectiveCommType_Name(
                           static_cast<ChakraProtoMsg::CollectiveCommType>(type))) +
                           " is not supported yet",
                       "replace it by ALL_GATHER/BROADCAST or drop the node");
    default:
      throw InputError(file, node_field(node) + ": attr comm_type",
                       "unknown collective type " + std::to_string(type),
                       "use a CollectiveCommType value 0..9");
  }
}

/// One process group of PyTorch's process-group metadata.
struct PgDef {
  std::string name;                  ///< pg_name
  std::vector<std::uint32_t> ranks;  ///< listed ranks (empty: every rank)
  std::uint64_t size = 0;            ///< pg_size (0 when absent)
};

/// True for the METADATA_NODE that carries PyTorch's process-group configuration.
bool is_pg_metadata(const ChakraProtoMsg::Node& node) {
  return node.type() == ChakraProtoMsg::METADATA_NODE &&
         node.name().find("process_group:init") != std::string::npos;
}

/// Parses a "## process_group:init ##" node's inputs.values: a JSON list of pg objects, a JSON
/// list holding one string that is such a list, or the Python repr of a one-string list
/// (`['[{...}]']`, as Chakra's PyTorch converter writes it).
std::vector<PgDef> parse_pg_metadata(const std::string& file, const ChakraProtoMsg::Node& node) {
  const std::string field = node_field(node) + ": inputs.values";
  const std::string fix = "write inputs.values as the JSON list of {\"pg_name\": ..., \"ranks\": [...], "
                          "\"pg_size\": N} objects that PyTorch records";
  const std::string& raw = node.inputs().values();
  if (raw.empty()) return {};
  nlohmann::json doc = nlohmann::json::parse(raw, nullptr, false);
  if (doc.is_discarded() && raw.size() >= 4 && raw.compare(0, 2, "['") == 0 &&
      raw.compare(raw.size() - 2, 2, "']") == 0) {
    doc = nlohmann::json::parse(raw.substr(2, raw.size() - 4), nullptr, false);
  }
  if (!doc.is_discarded() && doc.is_array() && doc.size() == 1 && doc[0].is_string()) {
    doc = nlohmann::json::parse(doc[0].get<std::string>(), nullptr, false);
  }
  if (doc.is_discarded() || !doc.is_array()) {
    throw InputError(file, field, "is not a process-group list", fix);
  }
  std::vector<PgDef> defs;
  for (const auto& item : doc) {
    if (!item.is_object() || !item.contains("pg_name") ||
        !(item["pg_name"].is_string() || item["pg_name"].is_number_integer())) {
      throw InputError(file, field, "an entry has no pg_name", fix);
    }
    PgDef d;
    d.name = item["pg_name"].is_string() ? item["pg_name"].get<std::string>() : item["pg_name"].dump();
    if (item.contains("ranks")) {
      if (!item["ranks"].is_array()) throw InputError(file, field, "ranks of '" + d.name + "' is not a list", fix);
      for (const auto& v : item["ranks"]) {
        if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1ll << 31)) {
          throw InputError(file, field, "ranks of '" + d.name + "' has " + v.dump() + ", not a rank", fix);
        }
        d.ranks.push_back(v.get<std::uint32_t>());
      }
    }
    if (item.contains("pg_size")) {
      const auto& s = item["pg_size"];
      if (!s.is_number_integer() || s.get<long long>() < 1 || s.get<long long>() > (1ll << 31)) {
        throw InputError(file, field, "pg_size of '" + d.name + "' is " + s.dump() + ", not a size", fix);
      }
      d.size = s.get<std::uint64_t>();
      if (!d.ranks.empty() && d.ranks.size() != d.size) {
        throw InputError(file, field,
                         "'" + d.name + "' lists " + std::to_string(d.ranks.size()) + " ranks but pg_size " +
                             std::to_string(d.size),
                         fix);
      }
    }
    defs.push_back(std::move(d));
  }
  return defs;
}

/// Communicator registry for one read.
class Groups {
 public:
  Groups(std::uint32_t ranks, const std::string& json_path) : ranks_(ranks), json_path_(json_path) {
    models::CommGroup world{"world", {}};
    for (std::uint32_t r = 0; r < ranks; ++r) world.ranks.push_back(r);
    groups_.push_back(std::move(world));
    if (!json_path.empty()) load_json();
  }

  /// Group index for a pg_name used by `rank`'s node (creates the group on first use).
  std::int32_t resolve(const std::string& file, const ChakraProtoMsg::Node& node,
                       const std::string& pg_name, std::uint32_t rank) {
    if (pg_name.empty()) return 0;
    std::int32_t index = 0;
    const auto known = index_.find(pg_name);
    if (known != index_.end()) {
      index = known->second;
    } else {
      // The comm-group file when given, else the trace's process-group metadata.
      const auto& defs = json_path_.empty() ? pt_defs_ : defs_;
      const auto def = defs.find(pg_name);
      if (def == defs.end() && json_path_.empty()) {
        // As ASTRA-sim does without --comm-group-configuration: the world communicator. Said
        // once per name, never silently.
        if (warned_.insert(pg_name).second) {
          warnings_.push_back(file + ": " + node_field(node) + ": attr pg_name: communicator '" +
                              pg_name + "' has no definition; treated as the world communicator "
                              "(pass workload.comm_groups to define it)");
        }
        return 0;
      }
      if (def == defs.end()) {
        throw InputError(file, node_field(node) + ": attr pg_name",
                         "communicator '" + pg_name + "' is not in " + json_path_,
                         "add \"" + pg_name + "\": [ranks...] to the comm group file");
      }
      index = static_cast<std::int32_t>(groups_.size());
      groups_.push_back(models::CommGroup{pg_name, def->second});
      index_.emplace(pg_name, index);
    }
    const auto& members = groups_[static_cast<std::size_t>(index)].ranks;
    if (std::find(members.begin(), members.end(), rank) == members.end()) {
      throw InputError(file, node_field(node) + ": attr pg_name",
                       "rank " + std::to_string(rank) + " is not a member of communicator '" +
                           pg_name + "'",
                       "fix the rank list of '" + pg_name + "' in the comm group file");
    }
    return index;
  }

  /// Records the process groups of a rank file's PyTorch metadata (empty ranks: every rank).
  /// @throws InputError on a rank outside the world, a rank listed twice, or a pg_name that
  /// another file defines with other ranks.
  void add_pg_defs(const std::string& file, const ChakraProtoMsg::Node& node, const std::vector<PgDef>& defs) {
    const std::string field = node_field(node) + ": inputs.values";
    for (const auto& d : defs) {
      std::vector<std::uint32_t> members = d.ranks;
      if (members.empty()) {
        for (std::uint32_t r = 0; r < ranks_; ++r) members.push_back(r);
      }
      std::set<std::uint32_t> seen;
      for (const auto r : members) {
        if (r >= ranks_) {
          throw InputError(file, field, "process group '" + d.name + "' names rank " + std::to_string(r) +
                                            " of a " + std::to_string(ranks_) + "-rank world",
                           "set workload.gpus to the job's world size, or fix the trace");
        }
        if (!seen.insert(r).second) {
          throw InputError(file, field, "process group '" + d.name + "' lists rank " + std::to_string(r) + " twice",
                           "list each rank once");
        }
      }
      const auto [it, inserted] = pt_defs_.emplace(d.name, members);
      if (!inserted && it->second != members) {
        throw InputError(file, field, "process group '" + d.name + "' has other ranks than in an earlier file",
                         "regenerate the traces from one job");
      }
    }
  }

  std::vector<models::CommGroup> take() { return std::move(groups_); }
  std::vector<std::string> take_warnings() { return std::move(warnings_); }

 private:
  void load_json() {
    std::ifstream in(json_path_);
    if (!in) {
      throw InputError(json_path_, "file", "cannot open comm group file", "check the path");
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(json_path_, "json", std::string("not valid JSON (") + e.what() + ")",
                       "write an object {\"<pg_name>\": [rank, ...], ...}");
    }
    if (!doc.is_object()) {
      throw InputError(json_path_, "json", "top level is not an object",
                       "write an object {\"<pg_name>\": [rank, ...], ...}");
    }
    for (const auto& [name, list] : doc.items()) {
      if (!list.is_array() || list.empty()) {
        throw InputError(json_path_, name, "is not a non-empty array of ranks",
                         "write \"" + name + "\": [rank, ...]");
      }
      std::vector<std::uint32_t> members;
      std::set<std::uint32_t> seen;
      for (const auto& v : list) {
        if (!v.is_number_integer() || v.get<long long>() < 0 ||
            v.get<long long>() >= static_cast<long long>(ranks_)) {
          throw InputError(json_path_, name,
                           "rank " + v.dump() + " is not an integer in 0.." + std::to_string(ranks_ - 1),
                           "list global ranks of this " + std::to_string(ranks_) + "-rank trace");
        }
        const auto r = v.get<std::uint32_t>();
        if (!seen.insert(r).second) {
          throw InputError(json_path_, name, "rank " + std::to_string(r) + " listed twice",
                           "list each rank once");
        }
        members.push_back(r);
      }
      defs_.emplace(name, std::move(members));
    }
  }

  std::uint32_t ranks_;
  std::string json_path_;
  std::map<std::string, std::vector<std::uint32_t>> defs_;
  std::map<std::string, std::vector<std::uint32_t>> pt_defs_;  ///< from process-group metadata
  std::unordered_map<std::string, std::int32_t> index_;
  std::vector<models::CommGroup> groups_;
  std::set<std::string> warned_;
  std::vector<std::string> warnings_;
};

/// Converts one decoded Chakra node (without deps) into a WorkNode.
WorkNode convert_node(const std::string& file, const ChakraProtoMsg::Node& node, std::uint32_t rank,
                      std::uint32_t ranks, Groups& groups, CpuOps cpu_ops) {
  WorkNode w;
  w.source_id = node.id();
  w.name = node.name();
  const Attrs attrs(file, node);
  constexpr std::int64_t kMaxBytes = static_cast<std::int64_t>(kMaxChakraBytes);
  const std::int64_t max_rank = static_cast<std::int64_t>(ranks) - 1;
  switch (node.type()) {
    case ChakraProtoMsg::COMP_NODE:
    case ChakraProtoMsg::METADATA_NODE:
    case ChakraProtoMsg::MEM_LOAD_NODE:
    case ChakraProtoMsg::MEM_STORE_NODE: {
      constexpr std::uint64_t kMaxMicros =
          static_cast<std::uint64_t>(engine::kInfinity / engine::kPsPerUs) / 2;
      if (node.duration_micros() > kMaxMicros) {
        throw InputError(file, node_field(node) + ": duration_micros",
                         "duration " + std::to_string(node.duration_micros()) + " us is absurd",
                         "fix the trace (durations are in microseconds)");
      }
      w.type = NodeType::kCompute;
      w.duration_ps = static_cast<engine::SimTime>(node.duration_micros()) * engine::kPsPerUs;
      if (node.type() == ChakraProtoMsg::COMP_NODE && attrs.boolean("is_cpu_op").value_or(false)) {
        if (cpu_ops == CpuOps::kSkip) {
          w.duration_ps = 0;
        } else {
          w.host = true;
        }
      }
      break;
    }
    case ChakraProtoMsg::COMM_COLL_NODE: {
      w.type = NodeType::kCollective;
      const std::int64_t type = attrs.required("comm_type", 0, 1000, "collective type");
      bool barrier = false;
      w.op = coll_op(file, node, type, barrier);
      if (barrier) {
        w.bytes = 4;  // one float, like torch.distributed.barrier's internal all-reduce
        (void)attrs.integer("comm_size", 0, kMaxBytes, "size (bytes)");
      } else {
        w.bytes = static_cast<std::uint64_t>(attrs.required("comm_size", 0, kMaxBytes, "size (bytes)"));
      }
      w.group = groups.resolve(file, node, attrs.string("pg_name"), rank);
      w.root = 0;
      break;
    }
    case ChakraProtoMsg::COMM_SEND_NODE:
    case ChakraProtoMsg::COMM_RECV_NODE: {
      const bool send = node.type() == ChakraProtoMsg::COMM_SEND_NODE;
      w.type = send ? NodeType::kSend : NodeType::kRecv;
      w.bytes = static_cast<std::uint64_t>(attrs.required("comm_size", 0, kMaxBytes, "size (bytes)"));
      const std::string peer_attr = send ? "comm_dst" : "comm_src";
      w.peer = static_cast<std::int32_t>(attrs.required(peer_attr, 0, max_rank, "peer rank"));
      if (static_cast<std::uint32_t>(w.peer) == rank) {
        throw InputError(file, node_field(node) + ": attr " + peer_attr,
                         "rank " + std::to_string(rank) + " sends to / receives from itself",
                         "use a different peer rank");
      }
      w.tag = attrs.integer("comm_tag", std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max(), "tag")
                  .value_or(0);
      break;
    }
    default:
      throw InputError(file, node_field(node) + ": type",
                       "unknown node type " + std::to_string(static_cast<int>(node.type())),
                       "use a Chakra NodeType (COMP_NODE, COMM_COLL_NODE, COMM_SEND_NODE, ...)");
  }
  return w;
}

/// Reads one rank's file into its program (topologically ordered).
/// Control dependencies dropped because their node is absent (MissingDeps::kIgnore), over all
/// ranks: the count and the first one, for the workload's one warning.
struct DroppedDeps {
  std::uint64_t count = 0;
  std::string first;  ///< "FILE: node ID 'NAME' -> id X" of the first dropped dependency
};

std::vector<WorkNode> read_rank(const std::string& file, std::uint32_t rank, std::uint32_t ranks,
                                Groups& groups, const ChakraReadOptions& options, DroppedDeps& dropped) {
  const std::string buf = slurp(file);
  RecordReader records(file, buf);
  std::size_t off = 0, len = 0;
  if (!records.next(off, len)) {
    throw InputError(file, "record 0", "empty file (no GlobalMetadata record)", "regenerate the ET file");
  }
  {
    ChakraProtoMsg::GlobalMetadata meta;  // fresh message: Parse* merges in protobuf 3.21
    if (!meta.ParseFromArray(buf.data() + off, static_cast<int>(len)) ||
        !meta.GetReflection()->GetUnknownFields(meta).empty()) {
      throw InputError(file, "record 0 (GlobalMetadata)",
                       "cannot be decoded as Chakra GlobalMetadata (garbage bytes?)",
                       "check that this is a Chakra ET file (schema 0.0.4 or later)");
    }
  }

  std::vector<ChakraProtoMsg::Node> nodes;
  std::unordered_map<std::uint64_t, std::uint32_t> by_id;
  for (std::size_t i = 1; records.next(off, len); ++i) {
    ChakraProtoMsg::Node node;  // fresh message per record
    const std::string field = "record " + std::to_string(i) + " (byte offset " + std::to_string(off) + ")";
    if (!node.ParseFromArray(buf.data() + off, static_cast<int>(len))) {
      throw InputError(file, field, "cannot be decoded as a Chakra Node (garbage bytes?)",
                       "regenerate or re-copy the ET file");
    }
    if (!node.GetReflection()->GetUnknownFields(node).empty()) {
      throw InputError(file, field + " " + node_field(node),
                       "has fields that are not in the Chakra Node schema (garbage bytes?)",
                       "regenerate the ET file with Chakra schema 0.0.4");
    }
    if (!by_id.emplace(node.id(), static_cast<std::uint32_t>(nodes.size())).second) {
      throw InputError(file, node_field(node), "duplicate node id " + std::to_string(node.id()),
                       "give every node of a rank's file a unique id");
    }
    nodes.push_back(std::move(node));
  }

  // Process-group metadata first: it defines the communicators the nodes name.
  for (const auto& node : nodes) {
    if (is_pg_metadata(node)) groups.add_pg_defs(file, node, parse_pg_metadata(file, node));
  }

  // Convert nodes and resolve dependencies (ctrl ∪ data) to input positions.
  const std::size_t n = nodes.size();
  std::vector<WorkNode> converted;
  converted.reserve(n);
  std::vector<std::vector<std::uint32_t>> deps(n);
  std::vector<std::vector<std::uint32_t>> users(n);
  std::vector<std::uint32_t> pending(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& node = nodes[i];
    converted.push_back(convert_node(file, node, rank, ranks, groups, options.cpu_ops));
    std::set<std::uint32_t> unique;
    const auto add = [&](std::uint64_t id, const char* kind) {
      const auto it = by_id.find(id);
      if (it == by_id.end()) {
        const bool ctrl = kind[0] == 'c';
        if (ctrl && options.missing_ctrl_deps == MissingDeps::kIgnore) {
          if (dropped.count++ == 0) dropped.first = file + ": " + node_field(node) + " -> id " + std::to_string(id);
          return;
        }
        throw InputError(file, node_field(node) + ": " + kind,
                         "depends on unknown node id " + std::to_string(id),
                         ctrl ? "add the missing node, or set workload.chakra.missing_deps: ignore to drop "
                                "control dependencies on nodes absent from the trace"
                              : "remove the dependency or add the missing node");
      }
      if (it->second == i) {
        throw InputError(file, node_field(node) + ": " + kind, "node depends on itself (cycle)",
                         "remove the self-dependency");
      }
      unique.insert(it->second);
    };
    if (options.ctrl_deps) {
      for (const auto id : node.ctrl_deps()) add(id, "ctrl_deps");
    }
    for (const auto id : node.data_deps()) add(id, "data_deps");
    deps[i].assign(unique.begin(), unique.end());
    pending[i] = static_cast<std::uint32_t>(deps[i].size());
    for (const auto d : deps[i]) users[d].push_back(static_cast<std::uint32_t>(i));
  }

  // Kahn's algorithm; among ready nodes the smallest Chakra id goes first.
  using Ready = std::pair<std::uint64_t, std::uint32_t>;  // (id, input position)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.emplace(nodes[i].id(), static_cast<std::uint32_t>(i));
  }
  std::vector<std::uint32_t> out_index(n, std::numeric_limits<std::uint32_t>::max());
  std::vector<WorkNode> program;
  program.reserve(n);
  while (!ready.empty()) {
    const auto [id, i] = ready.top();
    ready.pop();
    out_index[i] = static_cast<std::uint32_t>(program.size());
    WorkNode w = std::move(converted[i]);
    for (const auto d : deps[i]) w.deps.push_back(out_index[d]);
    std::sort(w.deps.begin(), w.deps.end());
    program.push_back(std::move(w));
    for (const auto u : users[i]) {
      if (--pending[u] == 0) ready.emplace(nodes[u].id(), u);
    }
  }
  if (program.size() != n) {
    // Report the smallest-id node left over (it is on or behind a cycle).
    std::size_t worst = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (out_index[i] == std::numeric_limits<std::uint32_t>::max() &&
          (worst == n || nodes[i].id() < nodes[worst].id())) {
        worst = i;
      }
    }
    throw InputError(file, node_field(nodes[worst]) + ": deps",
                     "dependency cycle (" + std::to_string(n - program.size()) +
                         " nodes can never become ready)",
                     "remove the circular ctrl_deps/data_deps");
  }
  return program;
}

/// Every send must have a matching receive: per (src, dst, tag) the same count and total bytes.
void check_point_to_point(const std::string& prefix, const models::Workload& w) {
  using Key = std::tuple<std::uint32_t, std::uint32_t, std::int64_t>;
  std::map<Key, std::pair<long long, unsigned long long>> balance_send;
  std::map<Key, std::pair<long long, unsigned long long>> balance_recv;
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    for (const auto& node : w.programs[r]) {
      if (node.type == NodeType::kSend) {
        auto& b = balance_send[Key{r, static_cast<std::uint32_t>(node.peer), node.tag}];
        ++b.first;
        b.second += node.bytes;
      } else if (node.type == NodeType::kRecv) {
        auto& b = balance_recv[Key{static_cast<std::uint32_t>(node.peer), r, node.tag}];
        ++b.first;
        b.second += node.bytes;
      }
    }
  }
  if (balance_send == balance_recv) return;
  // Name the first mismatching (src, dst, tag).
  auto describe = [&](const Key& k) {
    const auto s = balance_send.count(k) ? balance_send.at(k) : std::pair<long long, unsigned long long>{};
    const auto r = balance_recv.count(k) ? balance_recv.at(k) : std::pair<long long, unsigned long long>{};
    throw InputError(rank_file(prefix, std::get<0>(k)),
                     "send " + std::to_string(std::get<0>(k)) + "->" + std::to_string(std::get<1>(k)) +
                         " tag " + std::to_string(std::get<2>(k)),
                     std::to_string(s.first) + " sends (" + std::to_string(s.second) + " B) but " +
                         std::to_string(r.first) + " receives (" + std::to_string(r.second) +
                         " B) in " + rank_file(prefix, std::get<1>(k)),
                     "make every COMM_SEND_NODE match a COMM_RECV_NODE on the peer (same tag, size)");
  };
  for (const auto& [k, v] : balance_send) {
    const auto it = balance_recv.find(k);
    if (it == balance_recv.end() || it->second != v) describe(k);
  }
  for (const auto& [k, v] : balance_recv) {
    if (!balance_send.count(k)) describe(k);
  }
}

/// Splits "X.<digits>.et" into X; nullopt if `path` does not have that shape.
std::optional<std::string> split_rank_file(const std::string& path) {
  if (path.size() < 5 || path.compare(path.size() - 3, 3, ".et") != 0) return std::nullopt;
  const std::size_t end = path.size() - 3;
  std::size_t begin = end;
  while (begin > 0 && path[begin - 1] >= '0' && path[begin - 1] <= '9') --begin;
  if (begin == end || begin < 2 || path[begin - 1] != '.') return std::nullopt;
  return path.substr(0, begin - 1);
}

/// The world size that a single rank file's process-group metadata implies: the largest pg_size
/// (or rank list + 1) of its "## process_group:init ##" nodes; 1 without such metadata.
std::uint32_t pg_world_size(const std::string& file) {
  const std::string buf = slurp(file);
  RecordReader records(file, buf);
  std::size_t off = 0, len = 0;
  if (!records.next(off, len)) return 1;  // read_rank reports the empty file
  std::uint64_t world = 1;
  for (std::size_t i = 1; records.next(off, len); ++i) {
    ChakraProtoMsg::Node node;
    if (!node.ParseFromArray(buf.data() + off, static_cast<int>(len))) return 1;  // read_rank reports it
    if (!is_pg_metadata(node)) continue;
    for (const auto& d : parse_pg_metadata(file, node)) {
      world = std::max<std::uint64_t>(world, d.size);
      for (const auto r : d.ranks) world = std::max<std::uint64_t>(world, std::uint64_t{r} + 1);
    }
  }
  if (world > (1u << 24)) {
    throw InputError(file, "process_group:init", "pg_size " + std::to_string(world) + " is absurd",
                     "fix the trace, or set workload.gpus");
  }
  return static_cast<std::uint32_t>(world);
}

/// Runs rank 0's program on every rank of w.ranks (file comment: "One rank's trace, many
/// ranks"): rank r's copy names, for each communicator of rank 0, the translated group holding r.
void replicate_rank0(const std::string& file, models::Workload& w) {
  const std::uint32_t n = w.ranks;
  const std::vector<WorkNode> prog0 = w.programs[0];
  for (const auto& node : prog0) {
    if (node.type == NodeType::kSend || node.type == NodeType::kRecv) {
      throw InputError(file, "node " + std::to_string(node.source_id) + " '" + node.name + "'",
                       "a point-to-point node cannot be replicated from rank 0's trace to " + std::to_string(n) +
                           " ranks (its peer on other ranks is unknown)",
                       "provide one trace file per rank (PREFIX.0.et ... PREFIX." + std::to_string(n - 1) + ".et)");
    }
  }
  // Stride and size of each communicator rank 0 uses; the world-sized ones stay as they are.
  struct Family {
    std::uint32_t stride = 0, size = 0;  // stride 0: same group on every rank
  };
  std::map<std::int32_t, Family> family;
  for (const auto& node : prog0) {
    if (node.type != NodeType::kCollective || family.count(node.group)) continue;
    const models::CommGroup& g = w.groups[static_cast<std::size_t>(node.group)];
    Family f;
    if (g.ranks.size() != n) {
      const auto k = static_cast<std::uint32_t>(g.ranks.size());
      const std::uint32_t s = k > 1 ? g.ranks[1] : 1;
      bool ok = s >= 1 && g.ranks[0] == 0 && std::uint64_t{k} * s <= n && n % (k * s) == 0;
      for (std::uint32_t i = 0; ok && i < k; ++i) ok = g.ranks[i] == i * s;
      if (!ok) {
        throw InputError(file, "communicator '" + g.name + "'",
                         "ranks are not {0, s, 2s, ...} with size*stride dividing the world of " +
                             std::to_string(n) + ", so rank 0's trace cannot be replicated",
                         "provide one trace file per rank, or a communicator layout with uniform stride");
      }
      f = Family{s, k};
    }
    family.emplace(node.group, f);
  }
  std::map<std::string, std::int32_t> index;
  for (std::size_t i = 0; i < w.groups.size(); ++i) index.emplace(w.groups[i].name, static_cast<std::int32_t>(i));
  for (std::uint32_t r = 1; r < n; ++r) {
    std::vector<WorkNode> prog = prog0;
    for (auto& node : prog) {
      if (node.type != NodeType::kCollective) continue;
      const Family f = family.at(node.group);
      if (f.stride == 0) continue;
      const std::uint32_t span = f.size * f.stride;
      const std::uint32_t base = (r / span) * span + r % f.stride;
      if (base == 0) continue;
      const std::string name = w.groups[static_cast<std::size_t>(node.group)].name + "+" + std::to_string(base);
      auto [it, inserted] = index.emplace(name, static_cast<std::int32_t>(w.groups.size()));
      if (inserted) {
        models::CommGroup g{name, {}, w.groups[static_cast<std::size_t>(node.group)].kind};
        for (std::uint32_t i = 0; i < f.size; ++i) g.ranks.push_back(base + i * f.stride);
        w.groups.push_back(std::move(g));
      }
      node.group = it->second;
    }
    w.programs.push_back(std::move(prog));
  }
  w.warnings.push_back(file + ": the only rank file; its program runs on all " + std::to_string(n) +
                       " ranks, each communicator translated to the group of the same stride holding the rank");
}

}  // namespace

std::string chakra_prefix_of(const std::string& path) {
  return split_rank_file(path).value_or(path);
}

CpuOps parse_cpu_ops(const std::string& v, const std::string& file, const std::string& field) {
  if (v == "host") return CpuOps::kHost;
  if (v == "skip") return CpuOps::kSkip;
  throw InputError(file, field, "unknown value '" + engine::printable(v) + "'", "use host or skip");
}

bool looks_like_chakra_prefix(const std::string& path) {
  std::error_code ec;
  if (split_rank_file(path) && fs::is_regular_file(path, ec)) return true;
  return fs::is_regular_file(rank_file(path, 0), ec);
}

MissingDeps parse_missing_deps(const std::string& v, const std::string& file, const std::string& field) {
  if (v == "ignore") return MissingDeps::kIgnore;
  if (v == "error") return MissingDeps::kError;
  throw InputError(file, field, "unknown value '" + engine::printable(v) + "'", "use ignore or error");
}

models::Workload read_chakra(const std::string& prefix, const std::string& comm_groups_json,
                             const ChakraReadOptions& options) {
  // protobuf logs parse problems (e.g. invalid UTF-8 in a string) on stderr; we report our own
  // one-line error instead, so its logging is off while reading.
  struct QuietProtobuf {
    google::protobuf::LogHandler* old = google::protobuf::SetLogHandler(nullptr);
    ~QuietProtobuf() { google::protobuf::SetLogHandler(old); }
  } quiet;
  models::Workload w;
  w.source = prefix;
  w.format = "chakra";
  const std::uint32_t files = discover_ranks(prefix);
  std::uint32_t world = files;
  if (options.world_size != 0 && files > 1 && options.world_size != files) {
    throw InputError(prefix, "workload.gpus",
                     std::to_string(options.world_size) + " ranks asked for, but the trace has " +
                         std::to_string(files) + " rank files",
                     "remove workload.gpus (the files give the world size) or provide every rank's file");
  }
  if (files == 1) world = options.world_size != 0 ? options.world_size : pg_world_size(rank_file(prefix, 0));
  w.ranks = world;
  Groups groups(world, comm_groups_json);
  w.programs.reserve(world);
  DroppedDeps dropped;
  for (std::uint32_t r = 0; r < files; ++r) {
    w.programs.push_back(read_rank(rank_file(prefix, r), r, world, groups, options, dropped));
  }
  w.groups = groups.take();
  w.warnings = groups.take_warnings();
  if (world > files) replicate_rank0(rank_file(prefix, 0), w);
  if (dropped.count > 0) {
    w.warnings.push_back(prefix + ": dropped " + std::to_string(dropped.count) +
                         " control dependencies on nodes absent from the trace (first: " + dropped.first +
                         "), as Chakra's PyTorch converter leaves them; set workload.chakra.missing_deps: error "
                         "to refuse such traces");
  }
  check_point_to_point(prefix, w);
  return w;
}

}  // namespace fabricsim::io
