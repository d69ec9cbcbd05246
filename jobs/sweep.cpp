#include "jobs/sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "jobs/generators.hpp"

#include "engine/errors.hpp"
#include "jobs/metrics.hpp"
#include "jobs/spec.hpp"

extern char** environ;

namespace fabricsim::jobs {

using engine::InputError;
namespace fs = std::filesystem;

namespace {

bool is_path_key(const std::string& key) { return key == "workload.path" || key == "workload.comm_groups"; }

/// Appends `sep` (if `s` is not empty) and `x` to `s`.
void append_sep(std::string& s, const char* sep, const std::string& x) {
  if (!s.empty()) s += sep;
  s += x;
}

std::string last_component(const std::string& key) {
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string safe_chars(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '+' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string scalar(const YAML::Node& n, const std::string& file, const std::string& field) {
  if (!n.IsScalar()) throw InputError(file, field, "must be a single value", "write a number or a string");
  return n.as<std::string>();
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

/// The line a failed child left: its "fabricsim: error" / "internal error" line, else the last
/// non-empty line of its log.
std::string error_line_of_log(const std::string& log) {
  std::istringstream in(log);
  std::string line, last, err;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.rfind("fabricsim: error:", 0) == 0 || line.rfind("fabricsim: internal error", 0) == 0) err = line;
  }
  return err.empty() ? last : err;
}

/// Environment for a child run: the parent's, minus the variables an MPI launcher or singleton
/// set for *this* process (the child is its own MPI job).
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string v = *e;
    auto starts = [&](const char* p) { return v.rfind(p, 0) == 0; };
    if (starts("PMIX_") || starts("PMI_") || starts("ORTE_") || starts("OMPI_COMM_WORLD") ||
        starts("OMPI_UNIVERSE_SIZE") || starts("OMPI_MCA_orte_") || starts("OMPI_MCA_ess") ||
        starts("OMPI_MCA_pmix") || starts("OMPI_APP_CTX") || starts("OMPI_FIRST_RANKS") ||
        starts("OMPI_NUM_APP_CTX") || starts("OMPI_ARGV") || starts("OMPI_COMMAND") ||
        starts("OMPI_FILE_LOCATION") || starts("OMPI_MCA_initial_wdir") || starts("OMPI_MCA_ompi_") ||
        starts("OMPI_LOCAL_") || starts("OMPI_MCA_shmem_RUNTIME_QUERY_hint") || starts("OMPI_MCA_mpi_yield")) {
      continue;
    }
    env.push_back(v);
  }
  return env;
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> av;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  const std::vector<std::string> env = child_environment();
  std::vector<char*> ev;
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  // Each child leads its own process group, so a timeout or an interrupt ends the whole tree
  // (e.g. srun and its tasks, or a shell and its children), not just the direct child.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, av[0], &fa, &attr, av.data(), ev.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

/// Quotes a word for bash (single quotes).
std::string shq(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-/=:,") ==
                        std::string::npos) {
    return w;
  }
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string safe_label(const std::string& value) {
  std::string v = value;
  if (v.find('/') != std::string::npos) v = fs::path(v).stem().string();
  return safe_chars(v);
}

std::vector<SweepPoint> expand_axes(const std::string& file,
                                    const std::vector<std::pair<std::string, std::string>>& fixed,
                                    const std::vector<SweepAxis>& axes) {
  std::size_t total = 1;
  for (const auto& a : axes) total *= a.values.size();
  std::vector<SweepPoint> points;
  points.reserve(total);
  std::map<std::string, std::size_t> seen;
  std::vector<std::size_t> step(axes.size(), 0);
  for (std::size_t i = 0; i < total; ++i) {
    // Mixed-radix decomposition of i, last axis fastest.
    std::size_t rest = i;
    for (std::size_t a = axes.size(); a-- > 0;) {
      step[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    SweepPoint p;
    p.index = i;
    p.sets = fixed;
    std::string name;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const SweepAxis& ax = axes[a];
      for (std::size_t k = 0; k < ax.keys.size(); ++k) p.sets.emplace_back(ax.keys[k], ax.values[step[a]][k]);
      p.labels.push_back(ax.labels[step[a]]);
      append_sep(name, "__", ax.name + "-" + ax.labels[step[a]]);
    }
    p.name = name.empty() ? "base" : name;
    if (auto it = seen.find(p.name); it != seen.end()) {
      throw InputError(file, "axes", "points " + std::to_string(it->second) + " and " + std::to_string(i) +
                                         " get the same name '" + p.name + "'",
                       "give distinct 'labels:' to the axis whose values map to the same label");
    }
    seen.emplace(p.name, i);
    points.push_back(std::move(p));
  }
  return points;
}

Sweep load_sweep(const std::string& path) {
  Sweep sw;
  sw.file = path;
  YAML::Node root;
  {
    std::ifstream in(path);
    if (!in) throw InputError(path, "<file>", "cannot open the sweep file", "check the path");
    try {
      root = YAML::Load(in);
    } catch (const YAML::Exception& e) {
      throw InputError(path, "line " + std::to_string(e.mark.line + 1), "YAML syntax error: " + e.msg,
                       "fix the YAML syntax");
    }
  }
  if (!root.IsMap()) throw InputError(path, "<top>", "the sweep must be a YAML mapping", "see examples/sweeps/");
  const fs::path dir = fs::absolute(path).parent_path();
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (k != "name" && k != "base" && k != "output_dir" && k != "set" && k != "axes") {
      throw InputError(path, k, "unknown sweep field", "use name, base, output_dir, set and axes");
    }
  }
  sw.name = root["name"] ? safe_chars(scalar(root["name"], path, "name")) : safe_chars(fs::path(path).stem().string());
  if (!root["base"]) throw InputError(path, "base", "missing", "name the base spec: 'base: ../quickstart.yaml'");
  {
    const fs::path b = scalar(root["base"], path, "base");
    sw.base_spec = (b.is_absolute() ? b : dir / b).lexically_normal().string();
    if (!fs::is_regular_file(sw.base_spec)) {
      throw InputError(path, "base", "no such file: " + sw.base_spec, "give the base spec relative to the sweep file");
    }
  }
  sw.output_dir = root["output_dir"] ? scalar(root["output_dir"], path, "output_dir") : "sweeps/" + sw.name;

  std::set<std::string> used;
  auto value_of = [&](const std::string& key, const YAML::Node& n, const std::string& field) {
    std::string v = scalar(n, path, field);
    if (is_path_key(key) && !v.empty() && !fs::path(v).is_absolute()) v = (dir / v).lexically_normal().string();
    return v;
  };
  auto claim = [&](const std::string& key, const std::string& field) {
    if (key.rfind("output.", 0) == 0) {
      throw InputError(path, field, "'" + key + "' is set by the sweep (OUT_DIR/<point>/results.h5, summary.json)",
                       "remove it");
    }
    if (!used.insert(key).second) {
      throw InputError(path, field, "key '" + key + "' appears twice", "set each key in one place only");
    }
  };
  if (const YAML::Node s = root["set"]) {
    if (!s.IsMap()) throw InputError(path, "set", "must be a mapping key: value", "e.g. set: {cluster.hosts: 4}");
    for (const auto& kv : s) {
      const std::string key = kv.first.as<std::string>();
      claim(key, "set." + key);
      sw.fixed_sets.emplace_back(key, value_of(key, kv.second, "set." + key));
    }
  }
  if (const YAML::Node axes = root["axes"]) {
    if (!axes.IsSequence()) throw InputError(path, "axes", "must be a list", "write '- key: ...' entries");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const YAML::Node a = axes[i];
      const std::string field = "axes[" + std::to_string(i) + "]";
      if (!a.IsMap()) throw InputError(path, field, "must be a mapping", "give key + values, or zip");
      for (const auto& kv : a) {
        const std::string k = kv.first.as<std::string>();
        if (k != "key" && k != "values" && k != "zip" && k != "name" && k != "labels") {
          throw InputError(path, field + "." + k, "unknown axis field", "use key + values, or zip, and optional name, labels");
        }
      }
      SweepAxis ax;
      if (a["key"]) {
        if (a["zip"]) throw InputError(path, field, "has both key and zip", "use one of them");
        const std::string key = scalar(a["key"], path, field + ".key");
        claim(key, field + ".key");
        const YAML::Node vals = a["values"];
        if (!vals || !vals.IsSequence() || vals.size() == 0) {
          throw InputError(path, field + ".values", "missing or empty", "give a list: values: [a, b]");
        }
        ax.keys.push_back(key);
        for (std::size_t j = 0; j < vals.size(); ++j) {
          ax.values.push_back({value_of(key, vals[j], field + ".values[" + std::to_string(j) + "]")});
        }
        ax.name = last_component(key);
      } else if (a["zip"]) {
        const YAML::Node z = a["zip"];
        if (!z.IsMap() || z.size() == 0) throw InputError(path, field + ".zip", "must map keys to lists", "zip: {a: [1, 2], b: [3, 4]}");
        std::size_t n = 0;
        std::string joined;
        for (const auto& kv : z) {
          const std::string key = kv.first.as<std::string>();
          const std::string kf = field + ".zip." + key;
          claim(key, kf);
          if (!kv.second.IsSequence() || kv.second.size() == 0) throw InputError(path, kf, "must be a non-empty list", "key: [v1, v2]");
          if (ax.keys.empty()) {
            n = kv.second.size();
            ax.values.resize(n);
          } else if (kv.second.size() != n) {
            throw InputError(path, kf, "has " + std::to_string(kv.second.size()) + " values but '" + ax.keys[0] +
                                           "' has " + std::to_string(n),
                             "zipped lists must have the same length");
          }
          ax.keys.push_back(key);
          for (std::size_t j = 0; j < n; ++j) ax.values[j].push_back(value_of(key, kv.second[j], kf + "[" + std::to_string(j) + "]"));
          append_sep(joined, "+", last_component(key));
        }
        ax.name = joined;
      } else {
        throw InputError(path, field, "has neither key nor zip", "give 'key:' + 'values:' or 'zip:'");
      }
      if (a["name"]) ax.name = scalar(a["name"], path, field + ".name");
      ax.name = safe_chars(ax.name);
      for (const auto& other : sw.axes) {
        if (other.name == ax.name) {  // two axis_NAME columns, and point names that cannot be told apart
          throw InputError(path, field + ".name", "'" + ax.name + "' names another axis too",
                           "give every axis its own name");
        }
      }
      if (const YAML::Node l = a["labels"]) {
        if (!l.IsSequence() || l.size() != ax.values.size()) {
          throw InputError(path, field + ".labels", "must be a list as long as the values (" +
                                                        std::to_string(ax.values.size()) + ")",
                           "one label per value");
        }
        for (std::size_t j = 0; j < l.size(); ++j) ax.labels.push_back(safe_chars(scalar(l[j], path, field + ".labels")));
      } else {
        for (const auto& vs : ax.values) {
          std::string lab;
          for (const auto& v : vs) append_sep(lab, "-", safe_label(v));
          ax.labels.push_back(lab);
        }
      }
      sw.axes.push_back(std::move(ax));
    }
  }
  sw.points = expand_axes(path, sw.fixed_sets, sw.axes);
  // Check every point's spec now: an unknown key or a bad value must not surface after hours.
  for (const auto& p : sw.points) {
    std::vector<std::string> sets;
    for (const auto& [k, v] : p.sets) sets.push_back(k + "=" + v);
    try {
      const Spec spec = load_spec(sw.base_spec, sets);
      // The generator's own cross-key checks (heads vs TP, layers vs PP, ...) too: they name the
      // point instead of surfacing as a failed point after the others ran.
      if (spec.generator.count("model") > 0) validate_train(train_config_from_spec(spec));
    } catch (const InputError& e) {
      std::string msg = e.what();
      if (msg.rfind("<cli>: ", 0) == 0) msg = msg.substr(7);
      else if (msg.rfind(sw.base_spec + ": ", 0) == 0) msg = "base spec " + msg;
      throw InputError(path, "point " + p.name, msg, "");
    }
  }
  return sw;
}

std::vector<std::string> point_command(const Sweep& sw, const SweepPoint& p, const std::string& exe,
                                       const std::string& out_dir, std::uint32_t threads) {
  const fs::path d = fs::path(out_dir) / p.name;
  std::vector<std::string> cmd = {exe, "run", sw.base_spec};
  for (const auto& [k, v] : p.sets) {
    cmd.push_back("--set");
    cmd.push_back(k + "=" + v);
  }
  cmd.insert(cmd.end(), {"-o", (d / "results.h5").string(), "--summary-json", (d / "summary.json").string(), "-q"});
  if (threads) {
    cmd.push_back("--threads");
    cmd.push_back(std::to_string(threads));
  }
  return cmd;
}

PointStatus point_status(const std::string& out_dir, const SweepPoint& p) {
  const fs::path d = fs::path(out_dir) / p.name;
  if (fs::is_regular_file(d / "summary.json")) return {"ok", ""};
  if (fs::is_regular_file(d / "error.txt")) return {"failed", first_line(read_text(d / "error.txt"))};
  return {"pending", ""};
}

const SweepPoint& find_point(const Sweep& sw, const std::string& name_or_index) {
  for (const auto& p : sw.points) {
    if (p.name == name_or_index) return p;
  }
  if (!name_or_index.empty() && name_or_index.find_first_not_of("0123456789") == std::string::npos) {
    const std::size_t i = std::stoul(name_or_index);
    if (i < sw.points.size()) return sw.points[i];
  }
  throw InputError(sw.file, "--point " + name_or_index, "no such point",
                   "fabricsim sweep " + sw.file + " --dry-run lists the points");
}

std::size_t run_points(const Sweep& sw, const LocalRunOptions& opt, const std::vector<std::string>& only,
                       std::ostream& log) {
  const std::string exe = opt.exe.empty() ? fs::read_symlink("/proc/self/exe").string() : opt.exe;
  fs::create_directories(opt.out_dir);
  std::vector<const SweepPoint*> todo;
  std::size_t done_before = 0;
  for (const auto& p : sw.points) {
    if (!only.empty() && std::find(only.begin(), only.end(), p.name) == only.end()) continue;
    if (point_status(opt.out_dir, p).status == "ok") {
      ++done_before;
      continue;
    }
    todo.push_back(&p);
  }
  if (done_before) log << fmt::format("sweep {}: {} point(s) already done (summary.json present), skipped\n", sw.name, done_before);
  struct Running {
    const SweepPoint* p;
    pid_t pid;
    double start;
    bool term_sent;
    bool timed_out;
  };
  std::vector<Running> running;
  std::size_t next = 0, finished = 0, failed = 0;
  const unsigned jobs = std::max(1u, opt.jobs);
  auto finish = [&](const Running& r, int wstatus) {
    const fs::path d = fs::path(opt.out_dir) / r.p->name;
    const double wall = now_s() - r.start;
    ++finished;
    const bool exited_ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (exited_ok && fs::is_regular_file(d / "summary.json")) {
      log << fmt::format("[{}/{}] ok      {} ({:.1f} s)\n", finished, todo.size(), r.p->name, wall);
      return;
    }
    std::string err = error_line_of_log(read_text(d / "run.log"));
    if (r.timed_out) err = fmt::format("timed out after {:.0f} s (--timeout)", opt.timeout_s);
    else if (WIFSIGNALED(wstatus)) err = fmt::format("killed by signal {}{}", WTERMSIG(wstatus), err.empty() ? std::string() : ": " + err);
    else if (err.empty()) err = fmt::format("exit code {}", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) err = "exited 0 but wrote no summary.json: " + err;
    std::ofstream(d / "error.txt") << err << "\n";
    ++failed;
    log << fmt::format("[{}/{}] FAILED  {} ({:.1f} s): {}\n", finished, todo.size(), r.p->name, wall, err);
  };
  // SIGINT/SIGTERM (Ctrl-C, scancel) stop the children's process groups, then this process.
  g_stop_signal = 0;
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  bool stopping = false;
  while (next < todo.size() || !running.empty()) {
    if (g_stop_signal && !stopping) {
      stopping = true;
      next = todo.size();
      log << "interrupted: stopping " << running.size() << " running point(s)\n" << std::flush;
      for (auto& r : running) kill(-r.pid, SIGTERM);
    }
    while (next < todo.size() && running.size() < jobs) {
      const SweepPoint* p = todo[next++];
      const fs::path d = fs::path(opt.out_dir) / p->name;
      fs::create_directories(d);
      std::error_code ec;
      fs::remove(d / "error.txt", ec);
      std::vector<std::string> cmd = opt.launcher;
      const auto run_cmd = point_command(sw, *p, exe, opt.out_dir, opt.threads);
      cmd.insert(cmd.end(), run_cmd.begin(), run_cmd.end());
      nlohmann::json pj;
      pj["sweep"] = sw.name;
      pj["index"] = p->index;
      pj["name"] = p->name;
      pj["base"] = sw.base_spec;
      pj["sets"] = nlohmann::json::object();
      for (const auto& [k, v] : p->sets) pj["sets"][k] = v;
      pj["command"] = cmd;
      if (const char* j = std::getenv("SLURM_JOB_ID")) pj["slurm_job_id"] = j;
      if (const char* j = std::getenv("SLURM_ARRAY_JOB_ID")) pj["slurm_array_job_id"] = j;
      if (const char* j = std::getenv("SLURM_ARRAY_TASK_ID")) pj["slurm_array_task_id"] = j;
      std::ofstream(d / "point.json") << pj.dump(2) << "\n";
      const pid_t pid = spawn(cmd, (d / "run.log").string());
      if (pid < 0) {
        ++finished;
        ++failed;
        const std::string err = "cannot start " + cmd[0];
        std::ofstream(d / "error.txt") << err << "\n";
        log << fmt::format("[{}/{}] FAILED  {}: {}\n", finished, todo.size(), p->name, err);
        continue;
      }
      running.push_back({p, pid, now_s(), false, false});
    }
    bool reaped = false;
    for (std::size_t i = 0; i < running.size();) {
      int st = 0;
      const pid_t r = waitpid(running[i].pid, &st, WNOHANG);
      if (r == running[i].pid) {
        finish(running[i], st);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        reaped = true;
        continue;
      }
      Running& rr = running[i];
      if (opt.timeout_s > 0) {
        const double age = now_s() - rr.start;
        if (!rr.term_sent && age > opt.timeout_s) {
          kill(-rr.pid, SIGTERM);
          rr.term_sent = rr.timed_out = true;
        } else if (rr.term_sent && age > opt.timeout_s + 10) {
          kill(-rr.pid, SIGKILL);
        }
      }
      ++i;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (stopping) {
    const int sig = g_stop_signal;
    signal(sig, SIG_DFL);
    raise(sig);  // exit as killed by that signal (what Slurm and shells expect)
  }
  return failed;
}

Table aggregate(const Sweep& sw, const std::string& out_dir) {
  struct Row {
    PointStatus st;
    Metrics m;
    double wall = std::nan("");
    std::string digest;
  };
  std::vector<Row> rows(sw.points.size());
  std::set<std::string> busbw;
  double fastest = 0;
  for (std::size_t i = 0; i < sw.points.size(); ++i) {
    Row& r = rows[i];
    r.st = point_status(out_dir, sw.points[i]);
    if (r.st.status != "ok") continue;
    const fs::path f = fs::path(out_dir) / sw.points[i].name / "summary.json";
    try {
      const nlohmann::json j = nlohmann::json::parse(read_text(f));
      r.m = metrics_of_summary(j, f.string());
      r.wall = j.value("wall_s", std::nan(""));
      r.digest = j.value("digest", std::string());
    } catch (const std::exception& e) {
      r.st = {"failed", std::string("unreadable summary.json: ") + e.what()};
      continue;
    }
    for (const auto& [k, v] : r.m) {
      if (k.rfind("busbw_", 0) == 0) busbw.insert(k);
    }
    const double t = r.m["iteration_time_ps"];
    if (t > 0 && (fastest == 0 || t < fastest)) fastest = t;
  }
  Table t;
  // Columns in a fixed order first (so the table's layout does not depend on which point ran).
  t.strings("point");
  t.ints("index");
  t.strings("status");
  for (const auto& a : sw.axes) t.strings("axis_" + a.name);  // the point's label on each axis
  std::vector<std::string> key_cols;
  for (const auto& [k, v] : sw.fixed_sets) key_cols.push_back(k);
  for (const auto& a : sw.axes) key_cols.insert(key_cols.end(), a.keys.begin(), a.keys.end());
  for (const auto& k : key_cols) t.strings(k);
  const std::vector<std::string> int_metrics = {"iteration_time_ps", "events", "flows", "collectives"};
  const std::vector<std::string> dbl_metrics = {"compute_ps_mean", "comm_ps_mean", "exposed_comm_ps_mean"};
  for (const auto& k : int_metrics) t.ints(k);
  t.doubles("time_vs_fastest");
  for (const auto& k : dbl_metrics) t.doubles(k);
  for (const auto& k : busbw) t.doubles(k);
  t.doubles("wall_s");
  t.strings("digest");
  t.strings("error");
  for (std::size_t i = 0; i < sw.points.size(); ++i) {
    const SweepPoint& p = sw.points[i];
    const Row& r = rows[i];
    const std::size_t row = t.add_row();
    t.strings("point")[row] = p.name;
    t.ints("index")[row] = static_cast<std::int64_t>(p.index);
    t.strings("status")[row] = r.st.status;
    for (std::size_t a = 0; a < sw.axes.size(); ++a) t.strings("axis_" + sw.axes[a].name)[row] = p.labels[a];
    for (const auto& [k, v] : p.sets) t.strings(k)[row] = v;
    t.strings("error")[row] = r.st.error;
    if (r.st.status != "ok") continue;
    for (const auto& k : int_metrics) t.ints(k)[row] = static_cast<std::int64_t>(std::llround(r.m.at(k)));
    for (const auto& k : dbl_metrics) t.doubles(k)[row] = r.m.at(k);
    for (const auto& k : busbw) {
      if (auto it = r.m.find(k); it != r.m.end()) t.doubles(k)[row] = it->second;
    }
    if (fastest > 0) t.doubles("time_vs_fastest")[row] = r.m.at("iteration_time_ps") / fastest;
    t.doubles("wall_s")[row] = r.wall;
    t.strings("digest")[row] = r.digest;
  }
  return t;
}

std::string write_aggregate(const Sweep& sw, const std::string& out_dir, const Table& t) {
  fs::create_directories(out_dir);
  const std::string csv = (fs::path(out_dir) / "aggregate.csv").string();
  t.write_csv(csv);
  std::string axes;
  for (const auto& a : sw.axes) {
    append_sep(axes, ";", a.name + "=");
    for (std::size_t k = 0; k < a.keys.size(); ++k) axes += (k ? "," : "") + a.keys[k];
  }
  t.write_h5((fs::path(out_dir) / "aggregate.h5").string(), "/points",
             {{"sweep", sw.name}, {"sweep_file", fs::absolute(sw.file).string()}, {"base_spec", sw.base_spec},
              {"axes", axes}, {"points", std::to_string(sw.points.size())}});
  return csv;
}

std::string array_script(const Sweep& sw, const SubmitOptions& opt) {
  std::vector<std::size_t> pending;
  for (const auto& p : sw.points) {
    if (point_status(opt.out_dir, p).status != "ok") pending.push_back(p.index);
  }
  if (pending.empty()) return "";
  // Compress the index list into ranges: 0-3,7,9-12.
  std::string array;
  for (std::size_t i = 0; i < pending.size();) {
    std::size_t j = i;
    while (j + 1 < pending.size() && pending[j + 1] == pending[j] + 1) ++j;
    append_sep(array, ",", j == i ? std::to_string(pending[i]) : std::to_string(pending[i]) + "-" + std::to_string(pending[j]));
    i = j + 1;
  }
  const std::string sweep_abs = fs::absolute(sw.file).lexically_normal().string();
  std::ostringstream s;
  s << "#!/usr/bin/env bash\n";
  s << "# Generated by `fabricsim sweep " << sw.file << " --submit`: one array task per design point of\n";
  s << "# sweep '" << sw.name << "' (" << pending.size() << " of " << sw.points.size() << " points not done).\n";
  s << "# Each task runs its point into OUT_DIR/<point>/ (results.h5, summary.json, run.log); a point whose\n";
  s << "# summary.json exists is skipped, outputs are written atomically, so requeued or resubmitted\n";
  s << "# tasks are safe. Collect with: fabricsim sweep " << sweep_abs << " --collect -o " << opt.out_dir << "\n";
  s << "#SBATCH --job-name=fabricsim-" << sw.name << "\n";
  s << "#SBATCH --array=" << array << "%" << std::max(1u, opt.throttle) << "\n";
  s << "#SBATCH --ntasks=" << std::max(1u, opt.ntasks) << "\n";
  s << "#SBATCH --cpus-per-task=" << std::max<std::uint32_t>(1, opt.threads) << "\n";
  s << "#SBATCH --output=" << opt.out_dir << "/slurm/%A_%a.out\n";  // sbatch reads this line literally
  s << "#SBATCH --open-mode=append\n";
  s << "#SBATCH --requeue\n";
  if (!opt.time_limit.empty()) s << "#SBATCH --time=" << opt.time_limit << "\n";
  if (!opt.partition.empty()) s << "#SBATCH --partition=" << opt.partition << "\n";
  for (const auto& a : opt.sbatch_args) s << "#SBATCH " << a << "\n";
  s << "set -euo pipefail\n";
  s << "# Optional environment modules, e.g. FABRICSIM_MODULES=\"gcc openmpi hdf5\" sbatch ...\n";
  s << "if [ -n \"${FABRICSIM_MODULES:-}\" ] && command -v module >/dev/null 2>&1; then module load $FABRICSIM_MODULES; fi\n";
  s << "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n";
  s << "FABRICSIM=${FABRICSIM:-" << shq(opt.exe) << "}\n";
  s << "POINTS=(\n";
  for (const auto& p : sw.points) s << "  " << p.name << "\n";
  s << ")\n";
  s << "POINT=${POINTS[$SLURM_ARRAY_TASK_ID]}\n";
  s << "echo \"fabricsim sweep " << sw.name << ": task $SLURM_ARRAY_JOB_ID.$SLURM_ARRAY_TASK_ID point $POINT on $(hostname)"
       " (restart ${SLURM_RESTART_COUNT:-0})\"\n";
  s << "exec \"$FABRICSIM\" sweep " << shq(sweep_abs) << " --point \"$POINT\" -o " << shq(opt.out_dir);
  if (opt.threads) s << " --threads " << opt.threads;
  if (opt.ntasks > 1) s << " --launcher \"srun --mpi=pmix -n $SLURM_NTASKS\"";
  s << "\n";
  return s.str();
}

}  // namespace fabricsim::jobs
