#include "jobs/metrics.hpp"

#include <algorithm>

#include "engine/errors.hpp"

namespace fabricsim::jobs {

namespace {

struct OpAgg {
  double sum = 0;
  double n = 0;
};

void add_busbw(Metrics& m, const std::map<std::string, OpAgg>& ops) {
  for (const auto& [op, a] : ops) {
    if (a.n > 0) m["busbw_" + op + "_GBps"] = a.sum / a.n;
  }
}

}  // namespace

Metrics metrics_of(const RunResult& r) {
  Metrics m;
  double iter = 0, comp = 0, comm = 0, exposed = 0;
  for (const auto& rr : r.ranks) {
    iter = std::max(iter, static_cast<double>(rr.finish_ps));
    comp += static_cast<double>(rr.compute_ps);
    comm += static_cast<double>(rr.comm_ps);
    exposed += static_cast<double>(rr.exposed_comm_ps);
  }
  const double n = std::max<double>(1, static_cast<double>(r.ranks.size())) * std::max<std::uint32_t>(1, r.iterations);
  m["iteration_time_ps"] = static_cast<double>(static_cast<std::uint64_t>(iter) / std::max<std::uint32_t>(1, r.iterations));
  m["events"] = static_cast<double>(r.stats.events);
  m["flows"] = static_cast<double>(r.flows);
  m["collectives"] = static_cast<double>(r.collectives.size());
  m["compute_ps_mean"] = comp / n;
  m["comm_ps_mean"] = comm / n;
  m["exposed_comm_ps_mean"] = exposed / n;
  std::map<std::string, OpAgg> ops;
  for (const auto& c : r.collectives) {
    if (c.ranks <= 1) continue;
    ops[c.op].sum += c.busbw_GBps;
    ops[c.op].n += 1;
  }
  add_busbw(m, ops);
  if (r.ttft_ps >= 0) m["ttft_ps"] = static_cast<double>(r.ttft_ps);
  if (r.tpot_ps >= 0) m["tpot_ps"] = static_cast<double>(r.tpot_ps);
  return m;
}

Metrics metrics_of_summary(const nlohmann::json& j, const std::string& file) {
  Metrics m;
  auto num = [&](const char* key) -> double {
    if (!j.contains(key) || !j[key].is_number()) {
      throw engine::InputError(file, key, "missing from the summary JSON", "rerun the point (delete its summary.json)");
    }
    return j[key].get<double>();
  };
  m["iteration_time_ps"] = num("iteration_time_ps");
  m["events"] = num("events");
  m["flows"] = num("flows");
  m["compute_ps_mean"] = num("compute_ps_mean");
  m["comm_ps_mean"] = num("comm_ps_mean");
  m["exposed_comm_ps_mean"] = num("exposed_comm_ps_mean");
  std::map<std::string, OpAgg> ops;
  double count = 0;
  if (j.contains("collectives") && j["collectives"].is_array()) {
    // One entry per (op, bytes, ranks) with its count and mean (jobs/run/report.cpp); an entry
    // without a count is one instance (summary files of earlier versions).
    for (const auto& c : j["collectives"]) {
      const double k = c.contains("count") ? c.value("count", 0.0) : 1.0;
      count += k;
      if (c.value("ranks", 0u) <= 1) continue;
      auto& a = ops[c.value("op", std::string("?"))];
      a.sum += k * (c.contains("count") ? c.value("busbw_GBps_mean", 0.0) : c.value("busbw_GBps", 0.0));
      a.n += k;
    }
  }
  m["collectives"] = count;
  add_busbw(m, ops);
  if (j.contains("inference") && j["inference"].is_object()) {
    const auto& inf = j["inference"];
    if (inf.contains("ttft_ps") && inf["ttft_ps"].is_number()) m["ttft_ps"] = inf["ttft_ps"].get<double>();
    if (inf.value("decode_steps", 0) > 0 && inf.contains("tpot_ps") && inf["tpot_ps"].is_number()) {
      m["tpot_ps"] = inf["tpot_ps"].get<double>();
    }
  }
  return m;
}

}  // namespace fabricsim::jobs
