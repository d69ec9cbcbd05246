#include "tests/support/workloads.hpp"

#include <mpi.h>

#include <fstream>

namespace fabricsim::testing {

namespace m = fabricsim::models;

m::Workload world_workload(std::uint32_t n, const std::string& format, const std::string& source) {
  m::Workload w;
  w.source = source;
  w.format = format;
  w.ranks = n;
  m::CommGroup g{"world", {}};
  for (std::uint32_t r = 0; r < n; ++r) g.ranks.push_back(r);
  w.groups.push_back(g);
  w.programs.resize(n);
  return w;
}

void add_collective(m::Workload& w, m::CollOp op, std::uint64_t bytes, const std::string& name, std::int32_t group) {
  for (auto& p : w.programs) {
    m::WorkNode c;
    c.name = name;
    c.type = m::NodeType::kCollective;
    c.op = op;
    c.bytes = bytes;
    c.group = group;
    p.push_back(c);
  }
}

m::Workload collective_workload(std::uint32_t n, m::CollOp op, std::uint64_t bytes, const std::string& name) {
  m::Workload w = world_workload(n);
  add_collective(w, op, bytes, name);
  return w;
}

void add_p2p(m::Workload& w, std::uint32_t src, std::uint32_t dst, std::uint64_t bytes, std::int64_t tag,
             std::vector<std::uint32_t> deps) {
  m::WorkNode s;
  s.name = "send";
  s.type = m::NodeType::kSend;
  s.peer = static_cast<std::int32_t>(dst);
  s.bytes = bytes;
  s.tag = tag;
  s.deps = std::move(deps);
  m::WorkNode r = s;
  r.name = "recv";
  r.type = m::NodeType::kRecv;
  r.peer = static_cast<std::int32_t>(src);
  r.deps.clear();
  w.programs[src].push_back(std::move(s));
  w.programs[dst].push_back(std::move(r));
}

m::Workload incast_workload(std::uint32_t n, std::uint64_t bytes) {
  m::Workload w = world_workload(n);
  for (std::uint32_t r = 1; r < n; ++r) add_p2p(w, r, 0, bytes, r);
  return w;
}

m::Workload p2p_workload(unsigned ranks, const std::vector<P2pFlow>& flows, const std::string& format,
                         const std::string& source) {
  m::Workload w = world_workload(ranks, format, source);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const P2pFlow& f = flows[i];
    auto& sp = w.programs[f.src];
    std::vector<std::uint32_t> deps;
    if (f.start_ps > 0) {
      m::WorkNode c;
      c.name = "delay";
      c.type = m::NodeType::kCompute;
      c.duration_ps = f.start_ps;
      sp.push_back(c);
      deps.push_back(static_cast<std::uint32_t>(sp.size() - 1));
    }
    add_p2p(w, f.src, f.dst, f.bytes, static_cast<std::int64_t>(i), std::move(deps));
  }
  return w;
}

std::vector<P2pFlow> incast_flows(unsigned senders, unsigned receiver, unsigned long long bytes) {
  std::vector<P2pFlow> flows;
  for (unsigned i = 0; i < senders; ++i) flows.push_back({i, receiver, bytes});
  return flows;
}

std::vector<P2pFlow> shift_permutation_flows(unsigned ranks, unsigned shift, unsigned long long bytes) {
  std::vector<P2pFlow> flows;
  for (unsigned i = 0; i < ranks; ++i) flows.push_back({i, (i + shift) % ranks, bytes});
  return flows;
}

std::string micro_workload(const std::string& dir, const std::string& comm, unsigned long long bytes) {
  const std::string path = dir + "/micro_" + comm + "_" + std::to_string(bytes) + ".txt";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::ofstream f(path);
    f << "MICRO\n1\nmicro_test -1 0 NONE 0 0 NONE 0 0 " << comm << " " << bytes << " 0\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

}  // namespace fabricsim::testing
