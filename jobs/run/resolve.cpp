// Stage `resolve` of `fabricsim run`: logger, effective spec, output paths.
#include <filesystem>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "engine/errors.hpp"
#include "jobs/output_path.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;
namespace fs = std::filesystem;

namespace {

/// Log on rank 0 only, to stderr, "fabricsim: <level>: ..." (spdlog; one logger per run).
std::shared_ptr<spdlog::logger> make_logger(const std::string& level, int rank) {
  auto log = std::make_shared<spdlog::logger>("fabricsim", std::make_shared<spdlog::sinks::stderr_sink_st>());
  log->set_pattern("fabricsim: %l: %v");
  const auto lvl = spdlog::level::from_str(level);
  if (level != "error" && level != "warn" && level != "info" && level != "debug") {
    throw InputError("<cli>", "--log-level", "'" + level + "' is not a log level", "use error, warn, info or debug");
  }
  log->set_level(rank == 0 ? lvl : spdlog::level::off);
  log->flush_on(spdlog::level::debug);
  return log;
}

/// The spec with the command-line options applied as --set keys, so the recorded spec is the
/// effective one.
Spec effective_spec(const RunOptions& opt) {
  std::vector<std::string> sets = opt.sets;
  if (!opt.workload.empty()) sets.push_back("workload.path=" + opt.workload);
  if (opt.gpus) sets.push_back("workload.gpus=" + std::to_string(opt.gpus));
  if (!opt.out_h5.empty()) sets.push_back("output.h5=" + opt.out_h5);
  if (!opt.summary_json.empty()) sets.push_back("output.summary_json=" + opt.summary_json);
  if (opt.threads) sets.push_back("sim.threads=" + std::to_string(opt.threads));
  return load_spec(opt.spec_path, sets);
}

/// Two outputs on one path would overwrite each other, the later writer silently winning
/// (check_output_path only sees files that already exist).
void check_distinct_outputs(const Spec& spec, bool write_h5) {
  std::vector<std::pair<std::string, std::string>> outs;
  if (write_h5) outs.emplace_back("-o", spec.output_h5);
  if (!spec.summary_json.empty()) outs.emplace_back("--summary-json", spec.summary_json);
  if (!spec.trace_path.empty()) outs.emplace_back("--trace", spec.trace_path);
  if (!spec.save_partition.empty()) outs.emplace_back("--save-partition", spec.save_partition);
  for (std::size_t j = 1; j < outs.size(); ++j) {
    std::error_code ec;
    const fs::path pj = fs::weakly_canonical(fs::absolute(outs[j].second), ec);
    for (std::size_t i = 0; i < j; ++i) {
      if (fs::weakly_canonical(fs::absolute(outs[i].second), ec) == pj) {
        throw InputError("<cli>", outs[j].first + " " + outs[j].second,
                         "is the same path as " + outs[i].first + " " + outs[i].second,
                         "give each output its own file");
      }
    }
  }
}

/// Checks every output path against the inputs and each other; outputs named as the null
/// device are dropped (the writers would rename a temporary file onto it).
void check_outputs(RunContext& c) {
  Spec& spec = c.spec;
  const std::vector<std::string> inputs = {spec.workload_path, spec.comm_groups, c.opt.spec_path};
  c.write_h5 = c.opt.write_h5;
  // validate: the HDF5 path only when one was named (the default is the working directory's
  // fabricsim_results.h5, which `validate` should not require to be writable).
  if (c.opt.dry_run && spec.output_h5 != "fabricsim_results.h5") c.write_h5 = true;
  if (c.write_h5) check_output_path(spec.output_h5, "-o", inputs);
  if (c.write_h5 && is_null_device(spec.output_h5)) c.write_h5 = false;
  if (!spec.summary_json.empty()) {
    std::vector<std::string> others = inputs;
    if (c.write_h5) others.push_back(spec.output_h5);
    check_output_path(spec.summary_json, "--summary-json", others);
  }
  if (!spec.trace_path.empty()) {
    std::vector<std::string> others = inputs;
    if (c.write_h5) others.push_back(spec.output_h5);
    others.push_back(spec.summary_json);
    check_output_path(spec.trace_path, "--trace", others);
  }
  if (!spec.save_partition.empty()) check_output_path(spec.save_partition, "--save-partition", inputs);
  if (!spec.summary_json.empty() && is_null_device(spec.summary_json)) spec.summary_json.clear();
  if (!spec.trace_path.empty() && is_null_device(spec.trace_path)) spec.trace_path.clear();
  check_distinct_outputs(spec, c.write_h5);
}

}  // namespace

void resolve(RunContext& c) {
  c.t0 = now_s();
  MPI_Comm_rank(c.comm, &c.rank);
  MPI_Comm_size(c.comm, &c.nprocs);
  c.log = make_logger(c.opt.log_level, c.rank);
  c.spec = effective_spec(c.opt);
  check_outputs(c);
  if (c.opt.only_job >= 0) {  // --isolated's run of one job alone: nothing is written
    c.write_h5 = false;
    c.spec.summary_json.clear();
    c.spec.trace_path.clear();
    c.spec.save_partition.clear();
  }
  if (c.opt.isolated && c.spec.jobs.empty()) {
    throw InputError("<cli>", "--isolated", "the spec has no jobs: list", "drop --isolated, or give a spec with jobs:");
  }
}

}  // namespace fabricsim::jobs::run_stages
