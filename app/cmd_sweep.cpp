// `fabricsim sweep SWEEP.yaml`: expand, run locally or as a Slurm array, collect.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "jobs/sweep.hpp"

namespace fabricsim::app {
namespace {

namespace fs = std::filesystem;

struct SweepCli {
  std::string file;
  bool dry_run = false, local = false, submit = false, collect = false, script_only = false;
  unsigned jobs = 1;
  std::string out_dir;
  std::string point;
  double timeout_s = 0;
  std::uint32_t threads = 0;
  std::string launcher;
  unsigned throttle = 8;
  unsigned ntasks = 1;
  std::string time_limit, partition;
  std::vector<std::string> sbatch_args;
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

void print_collect(const jobs::Sweep& sw, const std::string& out_dir, const jobs::Table& t) {
  const std::string csv = jobs::write_aggregate(sw, out_dir, t);
  std::size_t ok = 0, failed = 0, pending = 0;
  const auto& status = std::get<std::vector<std::string>>(t.columns()[static_cast<std::size_t>(t.find("status"))].values);
  for (const auto& s : status) (s == "ok" ? ok : s == "failed" ? failed : pending)++;
  std::cout << fmt::format("aggregate: {} points: {} ok, {} failed, {} pending\n", t.rows(), ok, failed, pending);
  const auto& names = std::get<std::vector<std::string>>(t.columns()[static_cast<std::size_t>(t.find("point"))].values);
  const auto& err = std::get<std::vector<std::string>>(t.columns()[static_cast<std::size_t>(t.find("error"))].values);
  const auto& iter = std::get<std::vector<std::int64_t>>(t.columns()[static_cast<std::size_t>(t.find("iteration_time_ps"))].values);
  const auto& rel = std::get<std::vector<double>>(t.columns()[static_cast<std::size_t>(t.find("time_vs_fastest"))].values);
  std::size_t w = 5;
  for (const auto& n : names) w = std::max(w, n.size());
  std::cout << fmt::format("  {:<{}} {:>7} {:>16} {:>8}\n", "point", w, "status", "iteration (us)", "vs best");
  for (std::size_t i = 0; i < t.rows(); ++i) {
    if (status[i] == "ok") {
      std::cout << fmt::format("  {:<{}} {:>7} {:>16.3f} {:>8.3f}\n", names[i], w, status[i],
                               static_cast<double>(iter[i]) * 1e-6, rel[i]);
    } else {
      std::cout << fmt::format("  {:<{}} {:>7}  {}\n", names[i], w, status[i], err[i]);
    }
  }
  std::cout << "written: " << fs::absolute(csv).string() << " and "
            << fs::absolute(fs::path(out_dir) / "aggregate.h5").string() << " (dataset /points)\n";
}

}  // namespace

Action add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCli>();
  CLI::App* sub = app.add_subcommand("sweep", "expand a parameter sweep; run it locally or as a Slurm job array; collect");
  sub->add_option("sweep", o->file, "sweep file (YAML: base spec + axes)")->required()->check(CLI::ExistingFile);
  sub->add_flag("--dry-run", o->dry_run, "list the points (name, overrides, status) and stop");
  sub->add_flag("--local", o->local, "run the points not done yet on this machine, then collect");
  sub->add_flag("--submit", o->submit, "write OUT_DIR/sweep.sbatch (one array task per point not done) and sbatch it");
  sub->add_flag("--collect", o->collect, "aggregate finished points into OUT_DIR/aggregate.{csv,h5}");
  sub->add_option("--point", o->point, "run one point (name or index) into OUT_DIR; used by the array tasks");
  sub->add_option("-o,--out-dir", o->out_dir, "output directory (default: the sweep's output_dir, else sweeps/<name>)");
  sub->add_option("-j,--jobs", o->jobs, "concurrent points with --local (default 1)")->check(CLI::Range(1u, 1024u));
  sub->add_option("--timeout", o->timeout_s, "per-point wall-clock limit in seconds with --local (0 = none)")
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("--threads", o->threads, "engine threads per point (default: the spec's)")->check(CLI::Range(1u, 256u));
  sub->add_option("--launcher", o->launcher, "command prefix for each point, e.g. \"srun --mpi=pmix -n 4\"");
  sub->add_option("--throttle", o->throttle, "--submit: at most K array tasks at once (%K, default 8)")
      ->check(CLI::Range(1u, 100000u));
  sub->add_option("--ntasks", o->ntasks, "--submit: MPI processes per point (srun inside the task if > 1)")
      ->check(CLI::Range(1u, 1u << 20));
  sub->add_option("--time", o->time_limit, "--submit: time limit per array task (sbatch --time)");
  sub->add_option("--partition", o->partition, "--submit: Slurm partition");
  sub->add_option("--sbatch-arg", o->sbatch_args, "--submit: extra #SBATCH option, e.g. --sbatch-arg=--mem=4G (repeatable)");
  sub->add_flag("--script-only", o->script_only, "--submit: write the script but do not call sbatch");
  return [sub, o]() -> int {
    if (!*sub) return -1;
    if (!is_root()) return 0;  // a sweep is driven by one process; its points are separate jobs
    const int modes = int(o->dry_run) + int(o->local) + int(o->submit) + int(o->collect) + int(!o->point.empty());
    if (modes != 1) {
      throw engine::InputError("<cli>", "sweep", modes ? "choose only one mode" : "no mode given",
                               "pass one of --dry-run, --local, --submit, --collect or --point NAME");
    }
    const jobs::Sweep sw = jobs::load_sweep(o->file);
    const std::string out_dir = fs::absolute(o->out_dir.empty() ? sw.output_dir : o->out_dir).lexically_normal().string();
    if (o->dry_run) {
      std::cout << fmt::format("sweep {}: {} points, base {}, output {}\n", sw.name, sw.points.size(), sw.base_spec, out_dir);
      for (const auto& a : sw.axes) {
        std::string keys;
        for (const auto& k : a.keys) {
          if (!keys.empty()) keys += " + ";
          keys += k;
        }
        std::cout << fmt::format("  axis {}: {} ({} values)\n", a.name, keys, a.values.size());
      }
      for (const auto& p : sw.points) {
        std::string sets;
        for (const auto& [k, v] : p.sets) sets += " " + k + "=" + v;
        std::cout << fmt::format("{:>5} {:<8} {}  :{}\n", p.index, jobs::point_status(out_dir, p).status, p.name, sets);
      }
      return 0;
    }
    // Every other mode writes under OUT_DIR: refuse an unusable one before any point runs
    // (a filesystem_error here was reported as an internal error).
    {
      const std::string field = o->out_dir.empty() ? "output_dir" : "-o";
      const std::string where = o->out_dir.empty() ? o->file : std::string("<cli>");
      std::error_code ec;
      if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec)) {
        throw engine::InputError(where, field, "'" + out_dir + "' exists and is not a directory",
                                 "give a directory path (it is created if missing)");
      }
      fs::create_directories(out_dir, ec);
      if (ec) {
        throw engine::InputError(where, field, "cannot create the output directory '" + out_dir + "': " + ec.message(),
                                 "give a writable directory");
      }
    }
    if (o->collect) {
      print_collect(sw, out_dir, jobs::aggregate(sw, out_dir));
      return 0;
    }
    jobs::LocalRunOptions lo;
    lo.out_dir = out_dir;
    lo.jobs = o->jobs;
    lo.timeout_s = o->timeout_s;
    lo.threads = o->threads;
    lo.launcher = split_words(o->launcher);
    if (!o->point.empty()) {
      const jobs::SweepPoint& p = jobs::find_point(sw, o->point);
      const std::size_t failed = jobs::run_points(sw, lo, {p.name}, std::cout);
      return failed ? 1 : 0;
    }
    if (o->local) {
      std::cout << fmt::format("sweep {}: {} points, {} at a time, output {}\n", sw.name, sw.points.size(), lo.jobs, out_dir)
                << std::flush;
      const std::size_t failed = jobs::run_points(sw, lo, {}, std::cout);
      print_collect(sw, out_dir, jobs::aggregate(sw, out_dir));
      return failed ? 1 : 0;
    }
    // --submit
    jobs::SubmitOptions so;
    so.exe = fs::read_symlink("/proc/self/exe").string();
    so.out_dir = out_dir;
    so.throttle = o->throttle;
    so.ntasks = o->ntasks;
    so.threads = o->threads ? o->threads : 1;
    so.time_limit = o->time_limit;
    so.partition = o->partition;
    so.sbatch_args = o->sbatch_args;
    const std::string script = jobs::array_script(sw, so);
    if (script.empty()) {
      std::cout << "sweep " << sw.name << ": every point is done; nothing to submit (use --collect)\n";
      return 0;
    }
    fs::create_directories(fs::path(out_dir) / "slurm");
    const fs::path path = fs::path(out_dir) / "sweep.sbatch";
    {
      std::ofstream f(path);
      if (!f) throw engine::InputError(path.string(), "<file>", "cannot write", "check OUT_DIR is writable");
      f << script;
    }
    fs::permissions(path, fs::perms::owner_exec, fs::perm_options::add);
    std::cout << "wrote " << path.string() << "\n";
    if (o->script_only) return 0;
    const std::string cmd = "sbatch --parsable '" + path.string() + "' 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw engine::InputError("<cli>", "--submit", "cannot run sbatch", "is Slurm installed? use --script-only");
    std::string out;
    std::array<char, 512> buf{};
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int st = pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::string line = out.substr(0, out.find('\n'));
      throw engine::InputError("<cli>", "--submit", "sbatch failed: " + line,
                               "check the Slurm setup or submit " + path.string() + " by hand");
    }
    std::cout << "submitted array job " << out << "; collect with: fabricsim sweep " << o->file << " --collect -o "
              << out_dir << "\n";
    return 0;
  };
}

}  // namespace fabricsim::app
