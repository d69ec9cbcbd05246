// simgrid_maxmin: the SimGrid side of the flow-rung cross-check.
//
// Reads a set of flows over explicit routes of directed links, simulates them with SimGrid's
// s4u API under its plain max-min sharing model, and writes each flow's completion time.
// It links SimGrid only (no MPI, no fabricsim code): SimGrid's library also exports SMPI's MPI_*
// symbols, so it must not share a process with Open MPI. tests/fidelity/simgrid_crosscheck_test.cpp
// writes the input from a real fabricsim topology and compares with the flow rung.
//
// Usage: simgrid_maxmin INPUT OUTPUT
// INPUT (text, whitespace-separated, '#' starts a comment line):
//   link <id> <capacity_bps>                         one directed link, capacity in bits/s
//   flow <id> <src> <dst> <start_ps> <bytes> <n> <link_1> ... <link_n>
//                                                    src/dst: host ids (GPUs); start in ps
// OUTPUT: one line per flow, "<id> <finish_ps>" (finish time in ps, fractional).
// Bad input: one line on stderr naming the file, line and fix, exit 2.
//
// SimGrid configuration (keys checked against Debian's libsimgrid 3.32: they are the flag names
// in libsimgrid.so.3.32 and in the 3.32 sources, src/surf/network_cm02.cpp):
//   network/model:CM02            max-min sharing of link capacity (Casanova & Marchal, LIP
//                                 RR-2002-40); the default LV08 scales bandwidth by 0.97,
//                                 latency by 13.01 and adds RTT-unfair weights, which we disable:
//   network/bandwidth-factor:1, network/latency-factor:1  (CM02's defaults; set explicitly)
//   network/weight-S:0            every flow has sharing penalty 1 (no RTT-unfairness)
//   network/crosstraffic:0        no 5% reverse-path (ACK) load on the backward route
//   network/TCP-gamma             the window bound gamma / (2 * route latency) only applies to
//                                 routes with latency > 0; ours have 0 (see below). Set huge anyway.
// Links get latency 0: the caller starts each flow when its bytes start sharing links and adds
// the store-and-forward tail itself, so SimGrid computes exactly the max-min sharing phase.
//
// Units: SimGrid's numeric tolerances are absolute (surf/precision 1e-9 in time units,
// maxmin/precision 1e-5 in rate units), so we run it in microseconds and bytes: 400 Gb/s is
// 5e4 bytes/us and a 16 MB flow lasts ~300 us, far above both tolerances.
#include <simgrid/s4u.hpp>
#include <simgrid/version.h>
#include <xbt/config.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Flow {
  long long id = 0;
  long long src = 0, dst = 0;
  long long start_ps = 0;
  unsigned long long bytes = 0;
  std::vector<long long> links;
  double finish_us = -1;
  int line = 0;  // input line, for messages
};

[[noreturn]] void bad(const std::string& file, int line, const std::string& what, const std::string& fix) {
  std::fprintf(stderr, "simgrid_maxmin: %s:%d: %s; %s\n", file.c_str(), line, what.c_str(), fix.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: simgrid_maxmin INPUT OUTPUT\n");
    return 2;
  }
  const std::string in_path = argv[1], out_path = argv[2];
  std::ifstream in(in_path);
  if (!in) bad(in_path, 0, "cannot open", "give a readable input file");
  std::map<long long, double> link_bps;
  std::vector<Flow> flows;
  std::string text;
  int lineno = 0;
  while (std::getline(in, text)) {
    ++lineno;
    if (text.empty() || text[0] == '#') continue;
    std::istringstream ls(text);
    std::string kind;
    ls >> kind;
    if (kind == "link") {
      long long id = 0;
      double bps = 0;
      if (!(ls >> id >> bps) || bps <= 0) bad(in_path, lineno, "bad link line", "write: link <id> <capacity_bps > 0>");
      if (!link_bps.emplace(id, bps).second) bad(in_path, lineno, "link " + std::to_string(id) + " twice", "give each link once");
    } else if (kind == "flow") {
      Flow f;
      f.line = lineno;
      std::size_t n = 0;
      if (!(ls >> f.id >> f.src >> f.dst >> f.start_ps >> f.bytes >> n) || n == 0 || f.bytes == 0 || f.start_ps < 0) {
        bad(in_path, lineno, "bad flow line", "write: flow <id> <src> <dst> <start_ps >= 0> <bytes > 0> <n > 0> <links...>");
      }
      for (std::size_t i = 0; i < n; ++i) {
        long long l = 0;
        if (!(ls >> l) || link_bps.count(l) == 0) bad(in_path, lineno, "flow link missing or undeclared", "declare every link before the flows using it");
        f.links.push_back(l);
      }
      flows.push_back(std::move(f));
    } else {
      bad(in_path, lineno, "unknown line '" + kind + "'", "use link or flow lines");
    }
  }
  if (flows.empty()) bad(in_path, lineno, "no flows", "add flow lines");

  int sg_argc = 2;
  char arg0[] = "simgrid_maxmin";
  char arg1[] = "--log=root.thres:warning";
  char* sg_argv[] = {arg0, arg1, nullptr};
  sg4::Engine engine(&sg_argc, sg_argv);
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/weight-S:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:1e30");

  auto* zone = sg4::create_full_zone("fabric");
  std::map<long long, sg4::Host*> hosts;
  auto host = [&](long long id) {
    auto it = hosts.find(id);
    if (it != hosts.end()) return it->second;
    sg4::Host* h = zone->create_host("gpu" + std::to_string(id), 1e9)->seal();
    hosts.emplace(id, h);
    return h;
  };
  std::map<long long, sg4::Link*> links;
  for (const auto& [id, bps] : link_bps) {
    // bits/s -> bytes/us; latency stays 0 (SimGrid's default).
    links[id] = zone->create_link("link" + std::to_string(id), bps / 8.0 / 1e6)->seal();
  }
  std::map<std::pair<long long, long long>, long long> route_of;  // (src, dst) -> flow id
  for (const Flow& f : flows) {
    if (!route_of.emplace(std::make_pair(f.src, f.dst), f.id).second) {
      bad(in_path, f.line, "flows " + std::to_string(route_of[{f.src, f.dst}]) + " and " + std::to_string(f.id) + " share (src, dst)",
          "a SimGrid route is per host pair: give each flow its own pair");
    }
    std::vector<sg4::LinkInRoute> route;
    for (long long l : f.links) route.emplace_back(links[l]);
    zone->add_route(host(f.src)->get_netpoint(), host(f.dst)->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();

  for (Flow& f : flows) {
    Flow* fp = &f;
    sg4::Host* src = host(f.src);
    sg4::Host* dst = host(f.dst);
    sg4::Actor::create("flow" + std::to_string(f.id), src, [fp, src, dst]() {
      sg4::this_actor::sleep_until(static_cast<double>(fp->start_ps) * 1e-6);
      sg4::Comm::sendto(src, dst, fp->bytes);
      fp->finish_us = sg4::Engine::get_clock();
    });
  }
  engine.run();

  std::FILE* out = std::fopen(out_path.c_str(), "w");
  if (out == nullptr) bad(out_path, 0, "cannot write", "give a writable output path");
  // Read the configuration back, so the output records what SimGrid really used.
  std::fprintf(out, "# simgrid %d.%d network/model:%s network/weight-S:%g network/crosstraffic:%d\n",
               SIMGRID_VERSION_MAJOR, SIMGRID_VERSION_MINOR,
               simgrid::config::get_value<std::string>("network/model").c_str(),
               simgrid::config::get_value<double>("network/weight-S"),
               simgrid::config::get_value<bool>("network/crosstraffic") ? 1 : 0);
  std::fprintf(out, "# id finish_ps\n");
  for (const Flow& f : flows) {
    if (f.finish_us < 0) bad(in_path, f.line, "flow " + std::to_string(f.id) + " never finished", "check its route");
    std::fprintf(out, "%lld %.6f\n", f.id, f.finish_us * 1e6);
  }
  return std::fclose(out) == 0 ? 0 : 2;
}
