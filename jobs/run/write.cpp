// Stage `write_outputs` of `fabricsim run`: summary JSON, trace and HDF5 file, all or nothing.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/errors.hpp"
#include "io/hdf5_writer.hpp"
#include "jobs/run/context.hpp"
#include "jobs/trace.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;
namespace fs = std::filesystem;

namespace {

// Writes `text` to `path`; returns "" or the reason it failed (disk full included). On failure
// the partial file is removed.
std::string write_file_checked(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return std::string("cannot create ") + path + ": " + std::strerror(errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int flush_err = std::fflush(f);
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || flush_err != 0 || !closed) {
    std::remove(path.c_str());
    return "cannot write " + path + ": " + std::strerror(err ? err : EIO);
  }
  return "";
}

// Rank 0's error string, made collective: every process throws the same InputError.
void bcast_error(MPI_Comm comm, std::string err, const std::string& field) {
  int len = static_cast<int>(err.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, comm);
  err.resize(static_cast<std::size_t>(len));
  MPI_Bcast(err.data(), len, MPI_CHAR, 0, comm);
  if (len > 0) throw InputError("<cli>", field, err, "check free space and permissions, or choose another path");
}

}  // namespace

std::uint32_t link_tier(const models::Topology& t, engine::LpId a, engine::LpId b) {
  const auto ka = t.kind(a), kb = t.kind(b);
  if (ka == models::NodeKind::kNvSwitch || kb == models::NodeKind::kNvSwitch) return 0;
  if (ka == models::NodeKind::kGpu || kb == models::NodeKind::kGpu) return 1;
  if (ka == models::NodeKind::kCore || kb == models::NodeKind::kCore) return 3;
  return 2;
}

namespace {

/// This process's sampled link and queue bins as records. link_id = index of the directed port in
/// the order (LP id, port index) over the whole topology (identical on every process).
void collect_link_series(const models::Topology& topo, const std::vector<std::unique_ptr<models::GpuRankLp>>& gpus,
                         const std::vector<std::unique_ptr<models::SwitchLp>>& switches, engine::SimTime bin_ps,
                         std::vector<io::LinkBinRecord>& links, std::vector<io::QueueBinRecord>& queues) {
  std::vector<std::uint32_t> base(topo.num_nodes() + 1, 0);
  for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
    base[n + 1] = base[n] + static_cast<std::uint32_t>(topo.ports(n).size());
  }
  auto add = [&](engine::LpId node, const models::LinkSampler& s) {
    // One row per (port, bin) with traffic, PFC pause, ECN marks or drops; ordered by (port, bin).
    std::map<std::pair<std::uint32_t, engine::SimTime>, io::LinkBinRecord> rows;
    auto row = [&](std::uint32_t port, engine::SimTime bin) -> io::LinkBinRecord& {
      auto [it, fresh] = rows.try_emplace({port, bin});
      if (fresh) {
        const models::Port& p = topo.ports(node)[port];
        io::LinkBinRecord& r = it->second;
        r.link_id = base[node] + port;
        r.from_node = node;
        r.to_node = p.peer;
        r.tier = link_tier(topo, node, p.peer);
        r.bin_start_ps = bin;
      }
      return it->second;
    };
    for (const auto& b : s.tx_bins()) {
      const models::Port& p = topo.ports(node)[b.port];
      io::LinkBinRecord& r = row(b.port, b.bin_start_ps);
      r.bytes = b.value;
      r.utilization = static_cast<double>(b.value) * 8.0 /
                      (static_cast<double>(p.rate_bps) * static_cast<double>(bin_ps) * 1e-12);
    }
    for (const auto& b : s.pause_bins()) row(b.port, b.bin_start_ps).pause_ps = static_cast<engine::SimTime>(b.value);
    for (const auto& c : s.count_bins()) {
      io::LinkBinRecord& r = row(c.port, c.bin_start_ps);
      r.pfc_pauses = c.xoff;
      r.ecn_marks = c.marks;
      r.drops = c.drops;
    }
    for (const auto& [k, r] : rows) links.push_back(r);
    for (const auto& b : s.queue_bins()) {
      queues.push_back(io::QueueBinRecord{base[node] + b.port, b.bin_start_ps, b.value});
    }
  };
  for (const auto& g : gpus) add(g->rank_record().rank, g->sampler());
  for (const auto& sw : switches) add(sw->lp_id(), sw->sampler());
}

/// Writes the trace of the traced ranks (rank 0 gathers their intervals and NIC port bins) to
/// `trace_tmp`. On failure the staged JSON `json_tmp` is removed too.
void stage_trace(const RunContext& c, const std::string& trace_tmp, const std::string& json_tmp) {
  const Spec& spec = c.spec;
  std::vector<models::TraceInterval> local_trace;
  for (const auto& g : c.gpus) local_trace.insert(local_trace.end(), g->trace().begin(), g->trace().end());
  const auto all_trace = allgather_pod(c.comm, local_trace);
  // NIC tracks: the traced ranks' own port bins.
  std::vector<std::unique_ptr<models::SwitchLp>> no_switches;
  std::vector<io::LinkBinRecord> gpu_bins, traced_bins;
  std::vector<io::QueueBinRecord> unused;
  collect_link_series(*c.topo, c.gpus, no_switches, spec.sample_interval_ps, gpu_bins, unused);
  for (const auto& b : gpu_bins) {
    if (b.from_node < c.w.ranks && b.from_node >= spec.trace_rank_lo && b.from_node <= spec.trace_rank_hi) {
      traced_bins.push_back(b);
    }
  }
  const auto all_bins = allgather_pod(c.comm, traced_bins);
  std::string err;
  if (c.rank == 0) {
    std::vector<TraceFault> faults;
    for (const FaultEntry& e : spec.faults) {
      faults.push_back({e.kind, e.target, e.fault.at_ps, e.fault.until_ps == models::LinkFault::kNever ? -1 : e.fault.until_ps,
                        e.fault.kind == models::FaultKind::kLinkDown ? e.fault.reconverge_ps : 0});
    }
    err = write_file_checked(trace_tmp, trace_json(all_trace, c.w, c.res.collectives, all_bins, spec.sample_interval_ps,
                                                   faults, c.sim_end));
  }
  if (!err.empty() && !json_tmp.empty()) fs::remove(json_tmp);
  bcast_error(c.comm, err, "--trace " + spec.trace_path);
}

/// The HDF5 file (io::write_results_h5, itself atomic) from this process's records.
void write_h5(RunContext& c) {
  std::vector<io::LinkBinRecord> local_links;
  std::vector<io::QueueBinRecord> local_queues;
  collect_link_series(*c.topo, c.gpus, c.switches, c.spec.sample_interval_ps, local_links, local_queues);
  // /link_totals and /jobs are global on every process: rank 0 passes them.
  std::vector<io::JobRecord> jobs;
  if (c.rank == 0) {
    std::size_t i = 0;
    for (std::size_t k = 0; k < c.jobs.size(); ++k) {
      if (!c.jobs[k].simulated || i >= c.res.jobs.size()) continue;
      const JobResult& r = c.res.jobs[i++];
      io::JobRecord j;
      j.job = static_cast<std::uint32_t>(k);
      j.name = r.name;
      j.gpus = static_cast<std::uint32_t>(r.gpus.size());
      j.start_ps = r.start_ps;
      j.iterations = r.iterations;
      j.finish_ps = r.finish_ps;
      j.iteration_time_ps = r.iteration_ps;
      j.alone_iteration_time_ps = r.alone_iteration_ps > 0 ? r.alone_iteration_ps : -1;
      j.slowdown = r.alone_iteration_ps > 0 ? static_cast<double>(r.iteration_ps) / static_cast<double>(r.alone_iteration_ps) : 0.0;
      j.compute_ps = r.compute_ps;
      j.comm_ps = r.comm_ps;
      j.exposed_comm_ps = r.exposed_comm_ps;
      jobs.push_back(std::move(j));
    }
  }
  std::vector<io::FaultRecord> faults;
  if (c.rank == 0) {
    const auto& fs = c.spec.fabric.faults;  // resolved to LP ids, one per affected link, in the spec's order
    for (std::uint32_t i = 0; i < fs.size(); ++i) {
      const models::LinkFault& f = fs[i];
      io::FaultRecord r;
      r.index = f.entry;
      r.kind = c.spec.faults[f.entry].kind;
      r.node_a = f.a;
      r.node_b = f.b;
      r.time_ps = f.at_ps;
      r.until_ps = f.until_ps == models::LinkFault::kNever ? -1 : f.until_ps;
      r.reconverge_ps = f.reconverge_ps;
      r.ber = f.ber;
      r.rate_bps = f.rate_bps;
      faults.push_back(std::move(r));
    }
  }
  io::write_results_h5(c.comm, c.spec.output_h5, c.res.meta, c.local_ranks,
                       c.rank == 0 ? c.res.collectives : std::vector<io::CollectiveRecord>{}, c.local_flows,
                       std::move(local_links), std::move(local_queues), c.spec.sample_interval_ps,
                       c.rank == 0 ? c.res.link_totals : std::vector<io::LinkTotalRecord>{}, std::move(jobs),
                       std::move(faults));
}

}  // namespace

void write_outputs(RunContext& c) {
  const Spec& spec = c.spec;
  const int rank = c.rank;
  // The JSON is staged under a temporary name, then the trace likewise, then the HDF5 file is
  // written, then the staged files are renamed into place.
  const std::string json_tmp = spec.summary_json.empty() ? std::string() : spec.summary_json + ".tmp";
  if (!json_tmp.empty()) {
    std::string err;
    if (rank == 0) err = write_file_checked(json_tmp, c.json_text);
    bcast_error(c.comm, err, "--summary-json " + spec.summary_json);
  }
  const std::string trace_tmp = spec.trace_path.empty() ? std::string() : spec.trace_path + ".tmp";
  if (!trace_tmp.empty()) stage_trace(c, trace_tmp, json_tmp);
  auto drop_staged = [&] {
    if (rank != 0) return;
    std::error_code ec;
    if (!json_tmp.empty()) fs::remove(json_tmp, ec);
    if (!trace_tmp.empty()) fs::remove(trace_tmp, ec);
  };
  if (c.opt.keep_flows) {
    std::vector<io::LinkBinRecord> local_links;
    std::vector<io::QueueBinRecord> local_queues;
    collect_link_series(*c.topo, c.gpus, c.switches, spec.sample_interval_ps, local_links, local_queues);
    c.res.link_records = allgather_pod(c.comm, local_links);
    c.res.queue_records = allgather_pod(c.comm, local_queues);
  }
  if (c.write_h5) {
    try {
      write_h5(c);
    } catch (...) {
      drop_staged();
      throw;
    }
  }
  if (!trace_tmp.empty()) {
    std::string err;
    if (rank == 0) {
      std::error_code ec;
      fs::rename(trace_tmp, spec.trace_path, ec);
      if (ec) err = "cannot rename " + trace_tmp + ": " + ec.message();
    }
    if (!err.empty()) drop_staged();
    bcast_error(c.comm, err, "--trace " + spec.trace_path);
  }
  if (!json_tmp.empty()) {
    std::string err;
    if (rank == 0) {
      std::error_code ec;
      fs::rename(json_tmp, spec.summary_json, ec);
      if (ec) {
        err = "cannot rename " + json_tmp + ": " + ec.message();
        fs::remove(json_tmp);
      }
    }
    bcast_error(c.comm, err, "--summary-json " + spec.summary_json);
  }
}

}  // namespace fabricsim::jobs::run_stages
