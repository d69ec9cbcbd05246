// `fabricsim ladder`: the same spec at each fidelity rung, differences side by side.
#include <mpi.h>

#include <fmt/format.h>

#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/run.hpp"
#include "models/flow/flow_model.hpp"

namespace fabricsim::app {
namespace {

struct LadderOptions {
  jobs::RunOptions run;
  std::string rungs = "packet,flow,analytical";
};

std::vector<std::string> split_rungs(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    models::parse_fidelity(item, "<cli>", "--rungs");  // one-line InputError for unknown names
    out.push_back(item);
  }
  if (out.empty()) throw engine::InputError("<cli>", "--rungs", "no rung given", "e.g. --rungs packet,flow,analytical");
  return out;
}

double pct(double a, double ref) { return ref != 0 ? 100.0 * (a - ref) / ref : 0.0; }

}  // namespace

Action add_ladder(CLI::App& app) {
  auto opt = std::make_shared<LadderOptions>();
  CLI::App* sub = app.add_subcommand("ladder", "run one spec at each fidelity rung and print the differences");
  sub->add_option("spec", opt->run.spec_path, "experiment spec (YAML); optional with --workload")->check(CLI::ExistingFile);
  sub->add_option("--workload", opt->run.workload, "workload: Chakra ET prefix or SimAI/AICB file");
  sub->add_option("--gpus", opt->run.gpus, "world size for SimAI/AICB files without all_gpus")->check(CLI::Range(1u, 1u << 24));
  sub->add_option("--set", opt->run.sets, "override a spec key (repeatable)");
  sub->add_option("--rungs", opt->rungs, "comma-separated rungs, first is the reference (default packet,flow,analytical)");
  return [sub, opt]() -> int {
    if (!*sub) return -1;
    const std::vector<std::string> rungs = split_rungs(opt->rungs);
    struct Row {
      std::string rung;
      jobs::RunResult res;
    };
    std::vector<Row> rows;
    for (const auto& r : rungs) {
      jobs::RunOptions o = opt->run;
      o.write_h5 = false;
      o.quiet = true;
      o.sets.push_back("sim.fidelity=" + r);
      rows.push_back({r, jobs::run_simulation(o, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT)});
    }
    if (!is_root()) return 0;
    const double ref_iter = static_cast<double>(rows.front().res.meta.simulated_time_ps);
    std::ostringstream out;
    out << fmt::format("ladder (reference: {})\n", rows.front().rung);
    out << fmt::format("  {:<11} {:>16} {:>9} {:>12} {:>10} {:>10}\n", "rung", "iteration", "vs ref", "events",
                       "wall s", "flows");
    for (const auto& row : rows) {
      const auto& m = row.res.meta;
      out << fmt::format("  {:<11} {:>16} {:>8.2f}% {:>12} {:>10.3f} {:>10}\n", row.rung,
                         engine::format_time(m.simulated_time_ps), pct(static_cast<double>(m.simulated_time_ps), ref_iter),
                         m.events, m.wall_s, row.res.flows);
    }
    // Mean collective time per (op, ranks, bytes), one column per rung.
    std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>, std::vector<double>> agg, cnt;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (const auto& c : rows[i].res.collectives) {
        if (c.ranks <= 1) continue;
        auto key = std::make_tuple(c.op, c.ranks, c.bytes);
        auto& a = agg[key];
        auto& n = cnt[key];
        a.resize(rows.size(), 0.0);
        n.resize(rows.size(), 0.0);
        a[i] += static_cast<double>(c.end_ps - c.start_ps);
        n[i] += 1;
      }
    }
    if (!agg.empty()) {
      out << fmt::format("  {:<15} {:>6} {:>12}", "collective", "ranks", "bytes");
      for (const auto& row : rows) out << fmt::format(" {:>14}", row.rung);
      out << "   (mean time; % vs reference)\n";
      std::size_t shown = 0;
      for (const auto& [k, a] : agg) {
        if (++shown > 30) {
          out << fmt::format("  ... {} more kinds\n", agg.size() - 30);
          break;
        }
        out << fmt::format("  {:<15} {:>6} {:>12}", std::get<0>(k), std::get<1>(k), std::get<2>(k));
        const auto& n = cnt[k];
        const double ref = n[0] > 0 ? a[0] / n[0] : 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const double mean = n[i] > 0 ? a[i] / n[i] : 0;
          if (i == 0) {
            out << fmt::format(" {:>14}", engine::format_time(static_cast<engine::SimTime>(mean)));
          } else {
            out << fmt::format(" {:>14}", fmt::format("{} {:+.1f}%", engine::format_time(static_cast<engine::SimTime>(mean)),
                                                       pct(mean, ref)));
          }
        }
        out << "\n";
      }
    }
    std::cout << out.str() << std::flush;
    return 0;
  };
}

}  // namespace fabricsim::app
