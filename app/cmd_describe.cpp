// `fabricsim describe spec`: every spec key with type, default and meaning.
// `fabricsim describe nic [PROFILE]`: the built-in NIC profiles (models/core/nic_profile.hpp).
#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/spec.hpp"
#include "models/core/nic_profile.hpp"

namespace fabricsim::app {

namespace {

/// One profile, a field per line with its unit and the spec key that overrides it.
void print_profile(const models::NicProfile& p) {
  auto limit = [](double v, const char* unit) {
    return v > 0 ? std::to_string(static_cast<unsigned long long>(v)) + unit : std::string("unlimited");
  };
  std::printf("nic profile %s: %s\n", p.name, p.summary);
  std::printf("  %-16s %-22s %s\n", "line_rate", (std::to_string(p.line_bps / 1'000'000'000ull) + "Gbps").c_str(),
              "cluster.nic_bandwidth");
  std::printf("  %-16s %-22s %s\n", "msg_rate", limit(p.msg_rate_per_s, " msg/s").c_str(), "nic.msg_rate");
  std::printf("  %-16s %-22s %s\n", "qp_cache", limit(p.qp_cache, " QP contexts").c_str(), "nic.qp_cache");
  std::printf("  %-16s %-22s %s\n", "qp_miss_latency", engine::format_time(p.qp_miss_ps).c_str(), "nic.qp_miss_latency");
  std::printf("  %-16s %-22s %s\n", "tx_sched", models::tx_sched_name(p.tx_sched), "(the only scheduler modelled)");
  std::printf("  %-16s %-22s %s\n", "max_rd_atom", std::to_string(p.max_rd_atom).c_str(),
              "(informational: the packet rung issues RDMA writes only)");
  std::printf("  %-16s %-22s %s\n", "flow_start", p.flow_start == models::FlowStart::kStaggered ? "staggered" : "all",
              "nic.flow_start");
  std::printf("  %-16s %-22s %s (%s)\n", "cc", models::cc_name(p.cc), "nic.cc", p.cc_params);
  std::printf("  sources: %s\n", p.sources);
}

}  // namespace

Action add_describe(CLI::App& app) {
  auto what = std::make_shared<std::string>("spec");
  auto name = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("describe", "print every spec key with its type, default and meaning, or the NIC profiles");
  sub->add_option("what", *what, "what to describe: spec, or nic (the NIC profiles of cluster.nic_profile)")
      ->check(CLI::IsMember({"spec", "nic"}));
  sub->add_option("name", *name, "describe nic: the profile to print (default: all)");
  return [sub, what, name]() -> int {
    if (!*sub) return -1;
    if (*what == "nic") {
      // Checked on every process, so that all exit 2 alike on an unknown name.
      const models::NicProfile* one =
          name->empty() ? nullptr : &models::find_nic_profile(*name, "<cli>", "describe nic");
      if (is_root()) {
        for (const models::NicProfile& p : models::nic_profiles()) {
          if (one == nullptr || one == &p) print_profile(p);
        }
      }
      return 0;
    }
    if (!name->empty()) {
      throw engine::InputError("<cli>", "describe spec", "takes no name ('" + *name + "')", "run `fabricsim describe spec`");
    }
    if (is_root()) {
      for (const auto& k : jobs::spec_keys()) {
        std::printf("%-26s %-9s default %-22s %s\n", k.path, k.type, (*k.default_text ? k.default_text : "\"\""),
                    k.help);
      }
    }
    return 0;
  };
}

}  // namespace fabricsim::app
