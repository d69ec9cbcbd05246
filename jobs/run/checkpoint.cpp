// Stage `setup_checkpoints` of `fabricsim run` (docs/checkpoint.md): checkpoint and restart flags,
// the stop request of a signal, and the result of a run that a stop request ended.
#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "engine/checkpoint.hpp"
#include "engine/errors.hpp"
#include "engine/state_io.hpp"
#include "engine/units.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;

namespace {

/// The flag a user gave that needs checkpoints ("" when none).
std::string checkpoint_flag(const RunOptions& o) {
  if (!o.restart.empty()) return "--restart";
  if (!o.checkpoint_at.empty()) return "--checkpoint-at";
  if (o.checkpoint_every_s > 0) return "--checkpoint-every";
  if (o.checkpoint_at_signal) return "--checkpoint-at-signal";
  return "";
}

/// What a checkpoint of this run must match: the build, and a hash of everything that decides
/// the run's events: the effective spec (after --set, with its seed), the fidelity rung and the
/// workload's description (source, ranks, nodes, communicators).
engine::CheckpointIdentity identity(const RunContext& c) {
  engine::StateWriter w;
  const std::string desc = workload_desc(c.w);
  w.put_vector(std::vector<char>(c.spec.text.begin(), c.spec.text.end()));
  w.put_vector(std::vector<char>(desc.begin(), desc.end()));
  w.put(c.spec.seed);
  w.put(static_cast<std::uint32_t>(c.fidelity));
  engine::CheckpointIdentity id;
  id.build = c.version + " (" + c.git_commit + ")";
  id.run_hash = engine::checkpoint_checksum(w.bytes());
  id.processes = static_cast<std::uint32_t>(c.nprocs);
  id.threads = c.plan.placement.threads;
  return id;
}

/// The LP's type_name(), or its C++ class name (demangled, without namespaces) for an LP type
/// that keeps the default.
std::string type_of(const engine::Lp& lp) {
  std::string name(lp.type_name());
  if (name != "Lp") return name;
  int status = 0;
  char* d = abi::__cxa_demangle(typeid(lp).name(), nullptr, nullptr, &status);
  if (status == 0 && d != nullptr) name = d;
  std::free(d);
  const auto colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

/// Collective: the type name of the lowest process's first LP that cannot be checkpointed, or "".
std::string uncheckpointable_type(const RunContext& c) {
  const engine::Lp* lp = c.sim->first_uncheckpointable();
  std::string name = lp != nullptr ? type_of(*lp) : std::string();
  int mine = lp != nullptr ? c.rank : c.nprocs, first = mine;
  if (c.nprocs > 1) MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c.comm);
  if (first == c.nprocs) return "";
  if (c.nprocs > 1) {
    int len = static_cast<int>(name.size());
    MPI_Bcast(&len, 1, MPI_INT, first, c.comm);
    name.resize(static_cast<std::size_t>(len));
    MPI_Bcast(name.data(), len, MPI_CHAR, first, c.comm);
  }
  return name;
}

}  // namespace

void setup_checkpoints(RunContext& c) {
  const RunOptions& o = c.opt;
  engine::RunControl control;
  control.stop_flag = o.stop_flag;
  const std::string flag = checkpoint_flag(o);
  if (flag.empty()) {
    c.sim->set_control(std::move(control));
    return;
  }
  const bool writes = !o.checkpoint_at.empty() || o.checkpoint_every_s > 0 || o.checkpoint_at_signal;
  if (writes && o.checkpoint_dir.empty()) {
    throw InputError("<cli>", "--checkpoint-dir", "missing: checkpoint flags need a directory to write to",
                     "add --checkpoint-dir DIR");
  }
  const engine::CheckpointIdentity id = identity(c);
  engine::LoadedCheckpoint loaded;
  if (!o.restart.empty()) loaded = engine::read_checkpoint(c.comm, o.restart, id);
  // Refused before anything is simulated or written: an LP whose state cannot be saved.
  const std::string type = uncheckpointable_type(c);
  if (!type.empty()) {
    throw InputError("<cli>", flag,
                     fmt::format("the {} rung's LP type {} cannot be checkpointed in this build",
                                 models::fidelity_name(c.fidelity), type),
                     "run without --checkpoint-* and --restart (docs/checkpoint.md lists what can)");
  }
  if (!o.restart.empty()) {
    // --checkpoint-at times at or before the restart's boundary pass at its first window.
    c.sim->load_state(loaded.payload, loaded.path);
    c.log->info("restarted from {} at {}", loaded.path, engine::format_time(loaded.time_ps));
  }
  control.checkpoint_at = o.checkpoint_at;
  control.checkpoint_every_s = o.checkpoint_every_s;
  control.checkpoint_at_stop = o.checkpoint_at_signal;
  if (writes) {
    RunContext* cp = &c;
    control.on_checkpoint = [cp, id](engine::SimTime t) {
      RunContext& ctx = *cp;
      ctx.last_checkpoint = engine::write_checkpoint(ctx.comm, ctx.opt.checkpoint_dir, id, t,
                                                     ctx.sim->handled_events(), ctx.sim->save_state());
      ctx.last_checkpoint_ps = t;
      ctx.log->info("checkpoint at {}: {}", engine::format_time(t), ctx.last_checkpoint);
    };
  }
  c.sim->set_control(std::move(control));
}

RunResult stopped_result(RunContext& c) {
  RunResult r;
  r.stopped = true;
  r.stats = c.stats;
  r.stopped_at_ps = c.sim->boundary_ps();
  r.checkpoint = c.last_checkpoint;
  if (r.checkpoint.empty() || c.sim->boundary_ps() != c.last_checkpoint_ps) r.checkpoint.clear();
  return r;
}

}  // namespace fabricsim::jobs::run_stages
