#include "io/chakra_writer.hpp"

#include <google/protobuf/util/delimited_message_util.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "et_def.pb.h"

namespace fabricsim::io {
namespace {

using models::CollOp;
using models::NodeType;

ChakraProtoMsg::CollectiveCommType comm_type(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return ChakraProtoMsg::ALL_REDUCE;
    case CollOp::kAllGather: return ChakraProtoMsg::ALL_GATHER;
    case CollOp::kReduceScatter: return ChakraProtoMsg::REDUCE_SCATTER;
    case CollOp::kBroadcast: return ChakraProtoMsg::BROADCAST;
    case CollOp::kReduce: return ChakraProtoMsg::REDUCE;
    case CollOp::kAllToAll: return ChakraProtoMsg::ALL_TO_ALL;
  }
  return ChakraProtoMsg::ALL_REDUCE;
}

void attr_i64(ChakraProtoMsg::Node& n, const char* name, std::int64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}

}  // namespace

namespace {

/// The files of one write_chakra call, first under temporary names; renamed into place only when
/// every file was written whole, removed otherwise (no partial trace set on a full disk).
class StagedFiles {
 public:
  ~StagedFiles() {
    if (committed_) return;
    std::error_code ec;
    for (const auto& [tmp, final_path] : files_) std::filesystem::remove(tmp, ec);
  }
  /// Opens the temporary file for `final_path`. @throws InputError if it cannot be created.
  std::ofstream open(const std::string& final_path, std::ios::openmode mode) {
    std::error_code ec;
    const auto st = std::filesystem::status(final_path, ec);
    if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
      throw engine::InputError(final_path, "<file>", "exists and is not a regular file (a directory?)",
                               "remove it or choose another prefix; nothing was written");
    }
    const std::string tmp = final_path + ".tmp." + std::to_string(::getpid());
    std::ofstream out(tmp, mode | std::ios::trunc);
    if (!out) throw engine::InputError(final_path, "<file>", "cannot write", "check the directory exists and is writable");
    files_.emplace_back(tmp, final_path);
    return out;
  }
  /// Closes `out` (the last file opened) and checks that every byte reached the disk.
  void close(std::ofstream& out) {
    out.close();
    if (!out) {
      throw engine::InputError(files_.back().second, "<file>", "write failed (disk full?)",
                               "check free disk space; nothing was written");
    }
  }
  /// Renames every temporary file into place. @throws InputError if a rename fails.
  void commit() {
    for (const auto& [tmp, final_path] : files_) {
      std::error_code ec;
      std::filesystem::rename(tmp, final_path, ec);
      if (ec) {
        throw engine::InputError(final_path, "<file>", "cannot rename into place: " + ec.message(),
                                 "check the directory is writable");
      }
    }
    committed_ = true;
  }

 private:
  std::vector<std::pair<std::string, std::string>> files_;
  bool committed_ = false;
};

}  // namespace

std::string write_chakra(const models::Workload& w, const std::string& prefix) {
  StagedFiles staged;
  // Communicators some collective node names (the comm-group file lists only those: ASTRA-sim
  // and the reader look groups up by a node's pg_name, so an unused entry is dead weight, e.g.
  // the DP groups of an inference job, which has no gradient reduction).
  std::vector<char> used(w.groups.size(), 0);
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    const std::string file = prefix + "." + std::to_string(r) + ".et";
    std::ofstream out = staged.open(file, std::ios::out | std::ios::binary);
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("0.0.4");
    auto* src = meta.add_attr();
    src->set_name("fabricsim_source");
    src->set_string_val(w.source);
    google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
    const auto& prog = w.program(r);
    ChakraProtoMsg::Node n;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const models::WorkNode& wn = prog[i];
      n.Clear();
      n.set_id(i);
      n.set_name(wn.name);
      for (auto d : wn.deps) n.add_ctrl_deps(d);
      auto* cpu = n.add_attr();
      cpu->set_name("is_cpu_op");
      cpu->set_bool_val(wn.host);
      switch (wn.type) {
        case NodeType::kCompute:
          n.set_type(ChakraProtoMsg::COMP_NODE);
          n.set_duration_micros(static_cast<std::uint64_t>(
              std::llround(static_cast<double>(wn.duration_ps) / static_cast<double>(engine::kPsPerUs))));
          break;
        case NodeType::kCollective: {
          n.set_type(ChakraProtoMsg::COMM_COLL_NODE);
          attr_i64(n, "comm_type", comm_type(wn.op));
          attr_i64(n, "comm_size", static_cast<std::int64_t>(wn.bytes));
          auto* pg = n.add_attr();
          pg->set_name("pg_name");
          const std::int32_t group = w.group_of(r, wn);
          used[static_cast<std::size_t>(group)] = 1;
          pg->set_string_val(group == 0 ? std::string() : w.groups[static_cast<std::size_t>(group)].name);
          break;
        }
        case NodeType::kSend:
        case NodeType::kRecv:
          n.set_type(wn.type == NodeType::kSend ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE);
          attr_i64(n, wn.type == NodeType::kSend ? "comm_dst" : "comm_src", w.peer_of(r, wn));
          attr_i64(n, "comm_size", static_cast<std::int64_t>(wn.bytes));
          attr_i64(n, "comm_tag", wn.tag);
          break;
      }
      google::protobuf::util::SerializeDelimitedToOstream(n, &out);
    }
    staged.close(out);
  }
  std::string groups_path;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t g = 1; g < w.groups.size(); ++g) {
    if (used[g]) j[w.groups[g].name] = w.groups[g].ranks;
  }
  if (!j.empty()) {
    groups_path = prefix + ".comm_groups.json";
    std::ofstream out = staged.open(groups_path, std::ios::out);
    out << j.dump() << "\n";
    staged.close(out);
  }
  staged.commit();
  return groups_path;
}

}  // namespace fabricsim::io
