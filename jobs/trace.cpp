#include "jobs/trace.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <tuple>

namespace fabricsim::jobs {

namespace {
/// ps -> us as a JSON number with 6 decimals (exact to the picosecond).
nlohmann::json us(engine::SimTime ps) { return static_cast<double>(ps) / 1e6; }
}  // namespace

std::string trace_json(const std::vector<models::TraceInterval>& intervals, const models::Workload& w,
                       const std::vector<io::CollectiveRecord>& colls,
                       const std::vector<io::LinkBinRecord>& gpu_links, engine::SimTime bin_ps,
                       const std::vector<TraceFault>& faults, engine::SimTime end_ps) {
  std::vector<models::TraceInterval> v = intervals;
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.start_ps, a.end_ps, a.kind, a.node) <
           std::tie(b.rank, b.start_ps, b.end_ps, b.kind, b.node);
  });
  std::map<std::pair<std::uint32_t, std::uint32_t>, const io::CollectiveRecord*> by_key;
  for (const auto& c : colls) by_key[{c.group, c.instance}] = &c;

  nlohmann::json events = nlohmann::json::array();
  std::uint32_t cur_rank = ~0u;
  std::vector<engine::SimTime> lane_free;  // comm lanes of the current rank: busy until
  constexpr std::uint32_t kHostTid = 1000;  // host (CPU-side) ops' thread, after the comm lanes
  std::set<std::uint32_t> host_named;       // ranks whose host thread is named
  auto meta = [&](const char* name, std::uint32_t pid, std::uint32_t tid, const std::string& value) {
    events.push_back({{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}});
  };
  for (const auto& iv : v) {
    if (iv.rank != cur_rank) {
      cur_rank = iv.rank;
      lane_free.clear();
      meta("process_name", iv.rank, 0, "rank " + std::to_string(iv.rank));
      events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", iv.rank}, {"tid", 0},
                        {"args", {{"sort_index", iv.rank}}}});
      meta("thread_name", iv.rank, 0, "compute");
    }
    const models::WorkNode& node = w.program(iv.rank)[iv.node];
    nlohmann::json e{{"ph", "X"}, {"pid", iv.rank}, {"ts", us(iv.start_ps)}, {"dur", us(iv.end_ps - iv.start_ps)}};
    nlohmann::json args{{"node", node.source_id}, {"start_ps", iv.start_ps}, {"end_ps", iv.end_ps}};
    if (iv.kind == models::TraceInterval::kCompute) {
      e["tid"] = 0;
      e["name"] = node.name.empty() ? std::string("compute") : node.name;
      e["cat"] = "compute";
    } else if (iv.kind == models::TraceInterval::kHost) {
      if (host_named.insert(iv.rank).second) meta("thread_name", iv.rank, kHostTid, "host (CPU ops)");
      e["tid"] = kHostTid;
      e["name"] = node.name.empty() ? std::string("cpu op") : node.name;
      e["cat"] = "host";
    } else {
      std::uint32_t lane = 0;
      while (lane < lane_free.size() && lane_free[lane] > iv.start_ps) ++lane;
      if (lane == lane_free.size()) {
        lane_free.push_back(0);
        meta("thread_name", iv.rank, lane + 1, "comm " + std::to_string(lane));
      }
      lane_free[lane] = iv.end_ps;
      e["tid"] = lane + 1;
      e["cat"] = "comm";
      if (iv.kind == models::TraceInterval::kCollective) {
        const auto g = static_cast<std::uint32_t>(w.group_of(iv.rank, node));
        const std::string& gname = w.groups[g].name;
        e["name"] = std::string(models::coll_op_name(node.op)) + " " + std::to_string(node.bytes) + "B g" +
                    std::to_string(g);
        args["op"] = models::coll_op_name(node.op);
        args["bytes"] = node.bytes;
        args["group"] = g;
        args["group_name"] = gname;
        args["group_size"] = w.groups[g].ranks.size();
        args["instance"] = iv.instance;
        if (auto it = by_key.find({g, iv.instance}); it != by_key.end()) {
          args["algorithm"] = it->second->algorithm;
          args["protocol"] = it->second->protocol;
          args["channels"] = it->second->channels;
        }
      } else {
        const bool send = iv.kind == models::TraceInterval::kSend;
        e["name"] = std::string(send ? "send " : "recv ") + std::to_string(node.bytes) + "B " +
                    (send ? "to " : "from ") + std::to_string(w.peer_of(iv.rank, node));
        args["peer"] = w.peer_of(iv.rank, node);
        args["bytes"] = node.bytes;
        args["tag"] = node.tag;
      }
    }
    e["args"] = std::move(args);
    events.push_back(std::move(e));
  }
  // NIC / NVLink counter tracks, per (rank, link) in bin order.
  if (bin_ps > 0) {
    std::vector<io::LinkBinRecord> l = gpu_links;
    std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) {
      return std::tie(a.from_node, a.link_id, a.bin_start_ps) < std::tie(b.from_node, b.link_id, b.bin_start_ps);
    });
    static const char* const kTier[] = {"nvlink", "nic", "fabric", "core"};
    for (std::size_t i = 0; i < l.size(); ++i) {
      const auto& r = l[i];
      const std::string tier = kTier[std::min<std::uint32_t>(r.tier, 3)];
      const std::string port = tier + " port " + std::to_string(r.link_id);
      const double gbps = static_cast<double>(r.bytes) * 8.0 / (static_cast<double>(bin_ps) * 1e-12) / 1e9;
      events.push_back({{"ph", "C"}, {"pid", r.from_node}, {"tid", 0}, {"name", port + " tx Gb/s"}, {"ts", us(r.bin_start_ps)},
                        {"args", {{"Gbps", gbps}}}});
      if (r.pause_ps > 0) {
        events.push_back({{"ph", "C"}, {"pid", r.from_node}, {"tid", 0}, {"name", port + " PFC paused %"}, {"ts", us(r.bin_start_ps)},
                          {"args", {{"paused", 100.0 * static_cast<double>(r.pause_ps) / static_cast<double>(bin_ps)}}}});
      }
      const bool next_adjacent = i + 1 < l.size() && l[i + 1].link_id == r.link_id &&
                                 l[i + 1].bin_start_ps == r.bin_start_ps + bin_ps;
      if (!next_adjacent) {
        events.push_back({{"ph", "C"}, {"pid", r.from_node}, {"tid", 0}, {"name", port + " tx Gb/s"},
                          {"ts", us(r.bin_start_ps + bin_ps)}, {"args", {{"Gbps", 0.0}}}});
      }
      if (r.pause_ps > 0 && (!next_adjacent || l[i + 1].pause_ps == 0)) {
        events.push_back({{"ph", "C"}, {"pid", r.from_node}, {"tid", 0}, {"name", port + " PFC paused %"},
                          {"ts", us(r.bin_start_ps + bin_ps)}, {"args", {{"paused", 0.0}}}});
      }
    }
  }
  if (!faults.empty()) {
    const std::uint32_t pid = w.ranks;  // after every rank's process
    meta("process_name", pid, 0, "fabric faults");
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    for (std::size_t i = 0; i < faults.size(); ++i) {
      const TraceFault& f = faults[i];
      const auto tid = static_cast<std::uint32_t>(i);
      const std::string name = f.kind + " " + f.target;
      meta("thread_name", pid, tid, "faults[" + std::to_string(i) + "] " + name);
      const engine::SimTime end = f.until_ps >= 0 ? f.until_ps : std::max(end_ps, f.at_ps);
      events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", us(f.at_ps)}, {"dur", us(end - f.at_ps)},
                        {"name", name}, {"cat", "fault"},
                        {"args", {{"index", i}, {"kind", f.kind}, {"target", f.target}, {"time_ps", f.at_ps},
                                  {"until_ps", f.until_ps}, {"reconverge_ps", f.reconverge_ps}}}});
      if (f.reconverge_ps <= 0) continue;
      const auto instant = [&](engine::SimTime t, const char* what) {
        if (t >= end_ps) return;
        events.push_back({{"ph", "i"}, {"s", "t"}, {"pid", pid}, {"tid", tid}, {"ts", us(t)}, {"name", what}, {"cat", "fault"}});
      };
      instant(f.at_ps + f.reconverge_ps, "routing reconverged");
      if (f.until_ps >= 0) instant(f.until_ps + f.reconverge_ps, "routing restored");
    }
  }
  nlohmann::json j{{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)},
                   {"otherData", {{"generator", "fabricsim"}, {"time_unit", "us"}}}};
  return j.dump() + "\n";
}

}  // namespace fabricsim::jobs
