#include "jobs/regress.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"

namespace fabricsim::jobs {

using engine::InputError;
namespace fs = std::filesystem;

namespace {

double parse_tol(const YAML::Node& n, const std::string& file, const std::string& field) {
  const std::string t = n.IsScalar() ? n.as<std::string>() : "";
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
    throw InputError(file, field, "'" + t + "' is not a relative tolerance", "give a number >= 0, e.g. 1e-6");
  }
  return v;
}

std::map<std::string, double> parse_tols(const YAML::Node& n, const std::string& file, const std::string& field) {
  std::map<std::string, double> m;
  if (!n) return m;
  if (!n.IsMap()) throw InputError(file, field, "must map metric names to tolerances", "e.g. {events: 0}");
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    m[k] = parse_tol(kv.second, file, field + "." + k);
  }
  return m;
}

std::string reference_path(const RegressSuite& s, const RegressCase& c) {
  return (fs::path(s.dir) / "references" / (c.name + ".json")).string();
}

std::string fmt_value(double v) {
  if (std::isnan(v)) return "-";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.6g}", v);
}

}  // namespace

bool within(double ref, double value, double tol) {
  if (std::isnan(ref) || std::isnan(value)) return false;
  if (ref == 0) return std::fabs(value) <= tol;
  return std::fabs(value - ref) <= tol * std::fabs(ref);
}

double tolerance_of(const RegressSuite& s, const RegressCase& c, const std::string& metric) {
  if (auto it = c.tolerances.find(metric); it != c.tolerances.end()) return it->second;
  if (auto it = s.tolerances.find(metric); it != s.tolerances.end()) return it->second;
  return s.default_tolerance;
}

RegressSuite load_suite(const std::string& reference_dir) {
  RegressSuite s;
  s.dir = fs::absolute(reference_dir).lexically_normal().string();
  s.file = (fs::path(s.dir) / "suite.yaml").string();
  if (!fs::is_directory(s.dir)) {
    throw InputError(reference_dir, "<dir>", "not a directory", "give the reference directory (it holds suite.yaml)");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(s.file);
  } catch (const YAML::BadFile&) {
    throw InputError(s.file, "<file>", "cannot open the suite file", "create REFERENCE_DIR/suite.yaml (see tests/regress/)");
  } catch (const YAML::Exception& e) {
    throw InputError(s.file, "line " + std::to_string(e.mark.line + 1), "YAML syntax error: " + e.msg, "fix the YAML syntax");
  }
  if (!root.IsMap()) throw InputError(s.file, "<top>", "must be a YAML mapping", "see tests/regress/suite.yaml");
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (k != "name" && k != "default_tolerance" && k != "tolerances" && k != "cases") {
      throw InputError(s.file, k, "unknown suite field", "use name, default_tolerance, tolerances and cases");
    }
  }
  s.name = root["name"] ? root["name"].as<std::string>() : fs::path(s.dir).filename().string();
  if (root["default_tolerance"]) s.default_tolerance = parse_tol(root["default_tolerance"], s.file, "default_tolerance");
  s.tolerances = parse_tols(root["tolerances"], s.file, "tolerances");
  const YAML::Node cases = root["cases"];
  if (!cases || !cases.IsSequence() || cases.size() == 0) {
    throw InputError(s.file, "cases", "missing or empty", "list the cases: '- name: ...'");
  }
  std::set<std::string> names;
  auto rel = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (fs::path(s.dir) / p).lexically_normal().string(); };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const YAML::Node c = cases[i];
    const std::string field = "cases[" + std::to_string(i) + "]";
    if (!c.IsMap() || !c["name"]) throw InputError(s.file, field, "a case needs a name", "- name: my_case");
    for (const auto& kv : c) {
      const std::string k = kv.first.as<std::string>();
      if (k != "name" && k != "spec" && k != "workload" && k != "gpus" && k != "set" && k != "tolerances") {
        throw InputError(s.file, field + "." + k, "unknown case field", "use name, spec, workload, gpus, set, tolerances");
      }
    }
    RegressCase rc;
    rc.name = c["name"].as<std::string>();
    if (rc.name.empty() || rc.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                               std::string::npos) {
      throw InputError(s.file, field + ".name", "'" + rc.name + "' is not a file-name-safe case name", "use letters, digits, . _ -");
    }
    if (!names.insert(rc.name).second) throw InputError(s.file, field + ".name", "duplicate case name", "give every case its own name");
    if (c["spec"]) rc.spec = rel(c["spec"].as<std::string>());
    if (c["workload"]) rc.workload = rel(c["workload"].as<std::string>());
    if (rc.spec.empty() && rc.workload.empty()) {
      throw InputError(s.file, field, "has neither spec nor workload", "give at least one of them");
    }
    if (c["gpus"]) {
      const int g = c["gpus"].as<int>(0);
      if (g < 1) throw InputError(s.file, field + ".gpus", "must be >= 1", "give the world size");
      rc.gpus = static_cast<std::uint32_t>(g);
    }
    if (const YAML::Node st = c["set"]) {
      if (!st.IsMap()) throw InputError(s.file, field + ".set", "must be a mapping key: value", "set: {cluster.hosts: 4}");
      for (const auto& kv : st) {
        const std::string key = kv.first.as<std::string>();
        std::string v = kv.second.as<std::string>();
        // Path-valued keys are relative to the reference directory, like spec/workload above.
        if ((key == "workload.path" || key == "workload.comm_groups") && !v.empty()) v = rel(v);
        rc.sets.push_back(key + "=" + v);
      }
    }
    rc.tolerances = parse_tols(c["tolerances"], s.file, field + ".tolerances");
    s.cases.push_back(std::move(rc));
  }
  return s;
}

RegressReport run_regress(const RegressSuite& suite, const RegressOptions& opt, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<const RegressCase*> cases;
  for (const auto& c : suite.cases) {
    if (opt.only.empty() || std::find(opt.only.begin(), opt.only.end(), c.name) != opt.only.end()) cases.push_back(&c);
  }
  for (const auto& o : opt.only) {
    if (std::none_of(suite.cases.begin(), suite.cases.end(), [&](const RegressCase& c) { return c.name == o; })) {
      throw InputError(suite.file, "--case " + o, "no such case", "see the names under cases:");
    }
  }
  // A --set key that does not exist is bad input (exit 2), found before anything runs; it used to
  // fail every case as a run error (exit 1 with rebaseline advice).
  check_set_keys(opt.sets);
  MPI_Barrier(comm);  // every process sees the same reference files
  // References first: a missing one is bad input, found before anything runs.
  std::map<std::string, nlohmann::json> refs;
  for (const RegressCase* c : cases) {
    const std::string p = reference_path(suite, *c);
    std::ifstream in(p);
    if (!in) {
      if (opt.rebaseline) continue;
      throw InputError(p, "<file>", "no reference for case '" + c->name + "'",
                       "create it deliberately with: fabricsim regress " + suite.dir + " --rebaseline");
    }
    try {
      refs[c->name] = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw InputError(p, "<file>", std::string("not valid JSON: ") + e.what(), "rebaseline or restore it from git");
    }
    if (!refs[c->name].contains("metrics") || !refs[c->name]["metrics"].is_object()) {
      throw InputError(p, "metrics", "missing", "rebaseline or restore it from git");
    }
  }
  RegressReport rep;
  Table& t = rep.table;
  t.strings("case");
  t.strings("metric");
  t.doubles("reference");
  t.doubles("current");
  t.doubles("rel_diff");
  t.doubles("tolerance");
  t.strings("status");
  std::ostringstream out;
  out << fmt::format("regression suite '{}' ({} cases){}\n", suite.name, cases.size(),
                     opt.rebaseline ? ": REBASELINE (references are rewritten)" : "");
  if (!opt.sets.empty()) {
    out << "  extra overrides for every case:";
    for (const auto& s : opt.sets) out << " --set " << s;
    out << "\n";
  }
  out << fmt::format("  {:<28} {:<28} {:>18} {:>18} {:>10} {:>8}  {}\n", "case", "metric", "reference", "current",
                     "rel.diff", "tol", "status");
  for (const RegressCase* c : cases) {
    RunOptions ro;
    ro.spec_path = c->spec;
    ro.workload = c->workload;
    ro.gpus = c->gpus;
    ro.sets = c->sets;
    ro.sets.insert(ro.sets.end(), opt.sets.begin(), opt.sets.end());
    ro.write_h5 = false;
    ro.quiet = true;
    Metrics m;
    std::string digest;
    double wall = 0;
    // A case that could not run is one ERROR row (the report goes on with the other cases).
    const auto run_error = [&](const char* what) {
      ++rep.errors;
      const std::size_t row = t.add_row();
      t.strings("case")[row] = c->name;
      t.strings("metric")[row] = "<run>";
      t.strings("status")[row] = std::string("ERROR: ") + what;
      out << fmt::format("  {:<28} {:<28} ERROR: {}\n", c->name, "<run>", what);
    };
    try {
      const RunResult r = run_simulation(ro, comm, opt.version, opt.git_commit);
      m = metrics_of(r);
      digest = r.digest;
      wall = r.meta.wall_s;
    } catch (const InputError& e) {
      // A value given with regress --set that the run refuses is the command line's fault, not
      // the case's: one line, exit 2, nothing written (was: every case failed, exit 1, with
      // rebaseline advice). The report is only printed after the loop.
      if (e.file() == "<cli>" && std::any_of(opt.sets.begin(), opt.sets.end(), [&](const std::string& kv) {
            return kv.substr(0, kv.find('=')) == e.field();
          })) {
        throw;
      }
      run_error(e.what());
      continue;
    } catch (const std::exception& e) {
      run_error(e.what());
      continue;
    }
    if (opt.rebaseline) {
      nlohmann::json j;
      j["case"] = c->name;
      j["suite"] = suite.name;
      j["metrics"] = m;
      j["digest"] = digest;
      j["fabricsim_version"] = opt.version;
      j["git_commit"] = opt.git_commit;
      j["note"] = "written by `fabricsim regress --rebaseline`; wall time is not compared";
      if (rank == 0) {
        fs::create_directories(fs::path(suite.dir) / "references");
        const std::string p = reference_path(suite, *c);
        {
          std::ofstream f(p + ".tmp");
          f << j.dump(2) << "\n";
          if (!f) throw InputError(p, "<file>", "cannot write the reference", "check the directory is writable");
        }
        fs::rename(p + ".tmp", p);
      }
    }
    const nlohmann::json* ref = refs.count(c->name) ? &refs[c->name]["metrics"] : nullptr;
    std::set<std::string> names;
    for (const auto& [k, v] : m) names.insert(k);
    if (ref) {
      for (const auto& [k, v] : ref->items()) names.insert(k);
    }
    bool case_ok = true;
    for (const auto& k : names) {
      const double cur = m.count(k) ? m.at(k) : std::nan("");
      const double rv = (ref && ref->contains(k) && (*ref)[k].is_number()) ? (*ref)[k].get<double>() : std::nan("");
      const double tol = tolerance_of(suite, *c, k);
      double rd = std::nan("");
      if (!std::isnan(rv) && !std::isnan(cur)) rd = rv == 0 ? std::fabs(cur) : std::fabs(cur - rv) / std::fabs(rv);
      std::string status;
      if (opt.rebaseline) {
        status = std::isnan(rv) ? "new reference" : (within(rv, cur, tol) ? "rebaselined" : "REBASELINED (changed)");
      } else if (std::isnan(rv)) {
        status = "DRIFT (not in reference)";
      } else if (std::isnan(cur)) {
        status = "DRIFT (missing now)";
      } else {
        status = within(rv, cur, tol) ? "ok" : "DRIFT";
      }
      if (!opt.rebaseline && status != "ok") {
        ++rep.drifted;
        case_ok = false;
      }
      const std::size_t row = t.add_row();
      t.strings("case")[row] = c->name;
      t.strings("metric")[row] = k;
      t.doubles("reference")[row] = rv;
      t.doubles("current")[row] = cur;
      t.doubles("rel_diff")[row] = rd;
      t.doubles("tolerance")[row] = tol;
      t.strings("status")[row] = status;
      out << fmt::format("  {:<28} {:<28} {:>18} {:>18} {:>10} {:>8}  {}\n", c->name, k, fmt_value(rv), fmt_value(cur),
                         std::isnan(rd) ? std::string("-") : fmt::format("{:.2e}", rd), fmt::format("{:g}", tol), status);
    }
    std::string dnote;
    if (ref && refs[c->name].contains("digest")) {
      dnote = refs[c->name]["digest"].get<std::string>() == digest ? ", results digest unchanged"
                                                                    : ", results digest differs from the reference";
    }
    out << fmt::format("  {:<28} {} (wall {:.2f} s{})\n", c->name, opt.rebaseline ? "reference written" : case_ok ? "PASS" : "FAIL",
                       wall, dnote);
  }
  if (opt.rebaseline) {
    out << fmt::format("rebaselined {} case(s) into {}/references ({} error(s))\n", cases.size() - rep.errors, suite.dir,
                       rep.errors);
  } else if (rep.drifted == 0 && rep.errors == 0) {
    out << fmt::format("PASS: {} case(s), every metric within tolerance\n", cases.size());
  } else {
    out << fmt::format("FAIL: {} metric(s) drifted, {} case(s) failed to run (if the change is intended and "
                       "reviewed: fabricsim regress {} --rebaseline)\n",
                       rep.drifted, rep.errors, suite.dir);
  }
  rep.text = out.str();
  MPI_Barrier(comm);  // rewritten references are visible to every process before it returns
  return rep;
}

}  // namespace fabricsim::jobs
