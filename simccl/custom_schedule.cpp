#include "simccl/custom_schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>
#include <tuple>

#include "engine/errors.hpp"

namespace fabricsim::simccl {

using engine::InputError;

std::uint64_t schedule_chunk_bytes(std::uint64_t bytes, std::uint32_t per_buffer, std::uint32_t chunks) {
  const std::uint64_t b = bytes / std::max<std::uint32_t>(1, per_buffer) * chunks;
  return std::max<std::uint64_t>(1, b);
}

namespace {

std::string read_all(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, field, "cannot open the schedule file", "check the path (relative to the spec file)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string stem(const std::string& path) {
  const auto slash = path.find_last_of('/');
  std::string s = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = s.find_last_of('.');
  return dot == std::string::npos ? s : s.substr(0, dot);
}

struct Flow {
  std::uint32_t chunk, src, a, b, epoch, line;
};

}  // namespace

CustomSchedule load_teccl_schedule(const std::string& path) {
  return parse_teccl_schedule(read_all(path, "schedule"), path);
}

CustomSchedule parse_teccl_schedule(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "json", std::string("not valid JSON: ") + e.what(), "give a TE-CCL schedule JSON");
  }
  if (!j.is_object() || !j.contains("7-Flows") || !j["7-Flows"].is_array() || !j.contains("6-Demand_Met") ||
      !j["6-Demand_Met"].is_object()) {
    throw InputError(path, "7-Flows/6-Demand_Met", "missing", "give a TE-CCL schedule (teccl schedule_output_file)");
  }
  CustomSchedule s;
  s.path = path;
  s.format = "te-ccl";
  s.name = stem(path);
  s.op = models::CollOp::kAllGather;
  std::uint32_t n = 0;
  for (const auto& [key, v] : j["6-Demand_Met"].items()) {
    (void)v;
    unsigned g = 0;
    if (std::sscanf(key.c_str(), "GPU %u", &g) != 1) {
      throw InputError(path, "6-Demand_Met." + key, "not a 'GPU k' key", "give a TE-CCL schedule");
    }
    n = std::max<std::uint32_t>(n, g + 1);
  }
  if (n < 2) throw InputError(path, "6-Demand_Met", "fewer than 2 GPUs", "give a schedule of 2 or more GPUs");
  if (j.contains("3-Epochs_Required") && j["3-Epochs_Required"].is_number()) {
    s.epochs = j["3-Epochs_Required"].get<std::uint32_t>();
  }
  std::vector<Flow> flows;
  std::uint32_t n_chunks = 1;
  std::uint32_t line = 0;
  for (const auto& f : j["7-Flows"]) {
    const std::string field = "7-Flows[" + std::to_string(line) + "]";
    if (!f.is_string()) throw InputError(path, field, "not a string", "give 'Chunk c from s traveled over a->b in epoch e'");
    Flow fl{};
    unsigned c = 0, src = 0, a = 0, b = 0, e = 0;
    if (std::sscanf(f.get<std::string>().c_str(), "Chunk %u from %u traveled over %u->%u in epoch %u", &c, &src, &a, &b,
                    &e) != 5) {
      throw InputError(path, field, "'" + f.get<std::string>() + "' is not a flow line",
                       "give 'Chunk c from s traveled over a->b in epoch e'");
    }
    if (src >= n || a >= n || b >= n || a == b) {
      throw InputError(path, field, "'" + f.get<std::string>() + "' names a node that is not one of the " + std::to_string(n) +
                                        " GPUs (switch nodes are not replayed)",
                       "use a schedule whose flows go GPU to GPU");
    }
    fl = Flow{c, src, a, b, e, line};
    n_chunks = std::max<std::uint32_t>(n_chunks, c + 1);
    flows.push_back(fl);
    ++line;
  }
  // Epoch order (stable: the file's order within an epoch).
  std::stable_sort(flows.begin(), flows.end(), [](const Flow& x, const Flow& y) { return x.epoch < y.epoch; });
  s.n_ranks = n;
  s.chunks_per_buffer = n * n_chunks;
  s.ranks.assign(n, {});
  // have[g][(src, chunk)] = (op index of the receive that brought it, epoch); own chunks: no op.
  constexpr std::uint32_t kOwn = 0xffffffffu;
  std::vector<std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::uint32_t, std::uint32_t>>> have(n);
  for (std::uint32_t g = 0; g < n; ++g) {
    for (std::uint32_t c = 0; c < n_chunks; ++c) have[g][{g, c}] = {kOwn, 0};
  }
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> last_send_on_link;  // (a, b) -> op index at a
  std::uint32_t tag = 0;
  for (const Flow& fl : flows) {
    const std::string field = "7-Flows[" + std::to_string(fl.line) + "]";
    const auto it = have[fl.a].find({fl.src, fl.chunk});
    if (it == have[fl.a].end() || (it->second.first != kOwn && it->second.second >= fl.epoch)) {
      throw InputError(path, field,
                       "GPU " + std::to_string(fl.a) + " forwards chunk " + std::to_string(fl.chunk) + " of GPU " +
                           std::to_string(fl.src) + " in epoch " + std::to_string(fl.epoch) + " before it has it",
                       "give a schedule produced by TE-CCL");
    }
    ScheduleOp send;
    send.is_send = true;
    send.peer = fl.b;
    send.chunks = 1;
    send.tag = tag;
    if (it->second.first != kOwn) send.deps.push_back(it->second.first);
    const auto link = last_send_on_link.find({fl.a, fl.b});
    if (link != last_send_on_link.end()) send.deps.push_back(link->second);
    auto& ops_a = s.ranks[fl.a];
    last_send_on_link[{fl.a, fl.b}] = static_cast<std::uint32_t>(ops_a.size());
    ops_a.push_back(std::move(send));
    ScheduleOp recv;
    recv.peer = fl.a;
    recv.tag = tag;
    auto& ops_b = s.ranks[fl.b];
    // The first arrival of a chunk is the one later sends wait for (TE-CCL never sends it twice).
    have[fl.b].emplace(std::make_pair(fl.src, fl.chunk), std::make_pair(static_cast<std::uint32_t>(ops_b.size()), fl.epoch));
    ops_b.push_back(std::move(recv));
    ++tag;
  }
  s.transfers = tag;
  for (std::uint32_t g = 0; g < n; ++g) {
    if (have[g].size() != static_cast<std::size_t>(n) * n_chunks) {
      throw InputError(path, "7-Flows",
                       "GPU " + std::to_string(g) + " ends with " + std::to_string(have[g].size()) + " of " +
                           std::to_string(n * n_chunks) + " chunks: not a complete AllGather",
                       "give a complete TE-CCL AllGather schedule");
    }
  }
  return s;
}

namespace {

enum class StepKind { kSend, kRecv, kRecvSend, kLocal };

StepKind step_kind(const std::string& t, const std::string& path, const std::string& field) {
  if (t == "s") return StepKind::kSend;
  if (t == "r" || t == "rrc") return StepKind::kRecv;
  if (t == "rcs" || t == "rrs" || t == "rrcs") return StepKind::kRecvSend;
  if (t == "cpy" || t == "re" || t == "nop") return StepKind::kLocal;
  throw InputError(path, field, "unknown step type '" + t + "'", "use s, r, rcs, rrc, rrs, rrcs, cpy, re or nop");
}

models::CollOp msccl_coll(std::string c, const std::string& path) {
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "allreduce") return models::CollOp::kAllReduce;
  if (c == "allgather") return models::CollOp::kAllGather;
  if (c == "reducescatter") return models::CollOp::kReduceScatter;
  if (c == "alltoall") return models::CollOp::kAllToAll;
  if (c == "broadcast") return models::CollOp::kBroadcast;
  if (c == "reduce") return models::CollOp::kReduce;
  throw InputError(path, "algo.coll", "'" + c + "' is not a collective simccl plans",
                   "use allreduce, allgather, reducescatter, alltoall, broadcast or reduce");
}

struct Step {
  StepKind kind;
  std::uint32_t cnt;
  int dep_tb, dep_step;
};
struct Tb {
  int id, send, recv, chan;
  std::vector<Step> steps;
};

}  // namespace

namespace {

/// The common MSCCL reader: parses `*text` when not null, else reads `path`.
CustomSchedule read_msccl_schedule(const std::string& path, const std::string* text) {
  pugi::xml_document doc;
  const pugi::xml_parse_result r =
      text != nullptr ? doc.load_buffer(text->data(), text->size()) : doc.load_file(path.c_str());
  if (!r) {
    if (r.status == pugi::status_file_not_found || r.status == pugi::status_io_error) {
      throw InputError(path, "schedule", "cannot open the schedule file", "check the path (relative to the spec file)");
    }
    throw InputError(path, "offset " + std::to_string(r.offset), std::string("not valid XML: ") + r.description(),
                     "give an MSCCL-IR XML algorithm");
  }
  const pugi::xml_node algo = doc.child("algo");
  if (!algo) throw InputError(path, "algo", "no <algo> element", "give an MSCCL-IR XML algorithm");
  CustomSchedule s;
  s.path = path;
  s.format = "msccl";
  s.name = algo.attribute("name").as_string(stem(path).c_str());
  s.op = msccl_coll(algo.attribute("coll").as_string(), path);
  const int ngpus = algo.attribute("ngpus").as_int(0);
  if (ngpus < 2) throw InputError(path, "algo.ngpus", "missing or below 2", "give ngpus");
  // Per-GPU tables are sized by ngpus before any gpu element is read: bound it (an ngpus of
  // 2^31 asked for 51 GB, found by fuzz_msccl).
  constexpr int kMaxMscclGpus = 1 << 16;
  if (ngpus > kMaxMscclGpus) {
    throw InputError(path, "algo.ngpus", std::to_string(ngpus) + " is above " + std::to_string(kMaxMscclGpus),
                     "give the algorithm's GPU count");
  }
  const int per_loop = algo.attribute("nchunksperloop").as_int(0);
  if (per_loop < 1) throw InputError(path, "algo.nchunksperloop", "missing or below 1", "give nchunksperloop");
  s.n_ranks = static_cast<std::uint32_t>(ngpus);
  s.chunks_per_buffer = static_cast<std::uint32_t>(per_loop);
  s.ranks.assign(s.n_ranks, {});

  // Read every GPU's thread blocks.
  std::vector<std::vector<Tb>> gpus(s.n_ranks);
  std::vector<bool> seen(s.n_ranks, false);
  for (const pugi::xml_node g : algo.children("gpu")) {
    const int id = g.attribute("id").as_int(-1);
    const std::string gf = "gpu id=" + std::to_string(id);
    if (id < 0 || id >= ngpus || seen[static_cast<std::size_t>(id)]) {
      throw InputError(path, gf, "id out of range or repeated", "ids 0..ngpus-1, once each");
    }
    seen[static_cast<std::size_t>(id)] = true;
    for (const pugi::xml_node t : g.children("tb")) {
      Tb tb{t.attribute("id").as_int(-1), t.attribute("send").as_int(-1), t.attribute("recv").as_int(-1),
            t.attribute("chan").as_int(0), {}};
      const std::string tf = gf + " tb id=" + std::to_string(tb.id);
      if (tb.id != static_cast<int>(gpus[static_cast<std::size_t>(id)].size())) {
        throw InputError(path, tf, "thread block ids must be 0, 1, ... in order", "renumber the tb elements");
      }
      if (tb.send >= ngpus || tb.recv >= ngpus || tb.send == id || tb.recv == id || tb.chan < 0) {
        throw InputError(path, tf, "bad send/recv peer or chan", "peers are other GPU ids, -1 for none");
      }
      for (const pugi::xml_node st : t.children("step")) {
        const std::string sf = tf + " step s=" + st.attribute("s").as_string();
        Step step{step_kind(st.attribute("type").as_string(), path, sf),
                  static_cast<std::uint32_t>(std::max(1, st.attribute("cnt").as_int(1))), st.attribute("depid").as_int(-1),
                  st.attribute("deps").as_int(-1)};
        if ((step.kind == StepKind::kSend || step.kind == StepKind::kRecvSend) && tb.send < 0) {
          throw InputError(path, sf, "sends but its thread block has send=-1", "set the tb's send peer");
        }
        if ((step.kind == StepKind::kRecv || step.kind == StepKind::kRecvSend) && tb.recv < 0) {
          throw InputError(path, sf, "receives but its thread block has recv=-1", "set the tb's recv peer");
        }
        tb.steps.push_back(step);
      }
      gpus[static_cast<std::size_t>(id)].push_back(std::move(tb));
    }
  }
  // Expand steps into ops. done[tb][step] = op indices whose completion means the step is done.
  // Steps are expanded in dependency order (round-robin over thread blocks, a step waits for its
  // cross-block dependency to have been expanded); a full pass without progress is a cycle.
  std::map<std::tuple<std::uint32_t, std::uint32_t, int>, std::uint32_t> sends_on, recvs_on;  // (from, to, chan)
  for (std::uint32_t g = 0; g < s.n_ranks; ++g) {
    auto& tbs = gpus[g];
    auto& ops = s.ranks[g];
    std::vector<std::vector<std::vector<std::uint32_t>>> done(tbs.size());
    std::vector<std::size_t> next(tbs.size(), 0);
    std::size_t remaining = 0;
    for (const auto& tb : tbs) remaining += tb.steps.size();
    while (remaining > 0) {
      bool progress = false;
      for (std::size_t t = 0; t < tbs.size(); ++t) {
        while (next[t] < tbs[t].steps.size()) {
          const Step& st = tbs[t].steps[next[t]];
          std::vector<std::uint32_t> pre;
          if (next[t] > 0) pre = done[t][next[t] - 1];
          if (st.dep_tb >= 0 && st.dep_step >= 0) {
            const auto dt = static_cast<std::size_t>(st.dep_tb);
            if (dt >= tbs.size() || static_cast<std::size_t>(st.dep_step) >= tbs[dt].steps.size()) {
              throw InputError(path, "gpu id=" + std::to_string(g) + " tb id=" + std::to_string(t) + " step s=" +
                                         std::to_string(next[t]),
                               "depends on a step that does not exist", "fix depid/deps");
            }
            if (done[dt].size() <= static_cast<std::size_t>(st.dep_step)) break;  // not expanded yet
            const auto& d = done[dt][static_cast<std::size_t>(st.dep_step)];
            pre.insert(pre.end(), d.begin(), d.end());
          }
          std::sort(pre.begin(), pre.end());
          pre.erase(std::unique(pre.begin(), pre.end()), pre.end());
          const Tb& tb = tbs[t];
          std::vector<std::uint32_t> fin;
          if (st.kind == StepKind::kRecv || st.kind == StepKind::kRecvSend) {
            ScheduleOp rv;
            rv.peer = static_cast<std::uint32_t>(tb.recv);
            rv.channel = static_cast<std::uint16_t>(tb.chan);
            const std::uint32_t seq = recvs_on[{static_cast<std::uint32_t>(tb.recv), g, tb.chan}]++;
            rv.tag = (static_cast<std::uint32_t>(tb.chan) << 20) | seq;
            rv.deps = pre;
            pre = {static_cast<std::uint32_t>(ops.size())};
            fin = pre;
            ops.push_back(std::move(rv));
          }
          if (st.kind == StepKind::kSend || st.kind == StepKind::kRecvSend) {
            ScheduleOp sd;
            sd.is_send = true;
            sd.peer = static_cast<std::uint32_t>(tb.send);
            sd.chunks = st.cnt;
            sd.channel = static_cast<std::uint16_t>(tb.chan);
            const std::uint32_t seq = sends_on[{g, static_cast<std::uint32_t>(tb.send), tb.chan}]++;
            sd.tag = (static_cast<std::uint32_t>(tb.chan) << 20) | seq;
            sd.deps = pre;
            fin = {static_cast<std::uint32_t>(ops.size())};
            ops.push_back(std::move(sd));
            ++s.transfers;
          }
          if (st.kind == StepKind::kLocal) fin = pre;  // nothing on the network: pass dependencies on
          done[t].push_back(std::move(fin));
          ++next[t];
          --remaining;
          progress = true;
        }
      }
      if (!progress) {
        throw InputError(path, "gpu id=" + std::to_string(g), "thread-block dependencies form a cycle",
                         "fix depid/deps");
      }
    }
  }
  for (const auto& [key, count] : sends_on) {
    const auto it = recvs_on.find(key);
    const std::uint32_t got = it == recvs_on.end() ? 0 : it->second;
    if (got != count) {
      throw InputError(path, "gpu id=" + std::to_string(std::get<0>(key)) + " -> " + std::to_string(std::get<1>(key)) +
                                 " chan " + std::to_string(std::get<2>(key)),
                       std::to_string(count) + " sends but " + std::to_string(got) + " receives",
                       "every send needs a matching receive step");
    }
  }
  for (const auto& [key, count] : recvs_on) {
    if (sends_on.find(key) == sends_on.end()) {
      throw InputError(path, "gpu id=" + std::to_string(std::get<1>(key)) + " <- " + std::to_string(std::get<0>(key)) +
                                 " chan " + std::to_string(std::get<2>(key)),
                       std::to_string(count) + " receives but no sends", "every receive needs a matching send step");
    }
  }
  return s;
}

}  // namespace

CustomSchedule load_msccl_schedule(const std::string& path) { return read_msccl_schedule(path, nullptr); }

CustomSchedule parse_msccl_schedule(const std::string& text, const std::string& path) {
  return read_msccl_schedule(path, &text);
}

CustomSchedule load_custom_schedule(const std::string& path) {
  const std::string text = read_all(path, "simccl.schedule");
  const auto pos = text.find_first_not_of(" \t\r\n");
  if (pos != std::string::npos && text[pos] == '{') return load_teccl_schedule(path);
  if (pos != std::string::npos && text[pos] == '<') return load_msccl_schedule(path);
  throw InputError(path, "simccl.schedule", "neither a TE-CCL JSON schedule nor an MSCCL-IR XML algorithm",
                   "give a .json TE-CCL schedule or an .xml MSCCL algorithm");
}

}  // namespace fabricsim::simccl
