#include "tests/ns3/chain_workload.hpp"

#include <string>

#include "engine/errors.hpp"

namespace fabricsim::tests::ns3chain {

namespace {
constexpr std::int64_t kPsPerUs = 1'000'000;

void require(bool ok, const std::string& field, const std::string& problem,
             const std::string& fix) {
  if (!ok) throw engine::InputError("<chain workload>", field, problem, fix);
}
}  // namespace

models::Workload make_chain_workload(const ChainTraffic& t) {
  require(t.senders > 0, "senders", "must be positive", "use 1 or more senders");
  require(t.count > 0, "count", "must be positive", "send at least one packet");
  require(t.payload_bytes > 0, "payload", "must be positive", "give the UDP payload in bytes");
  require(t.interval_ps > 0 && t.interval_ps % kPsPerUs == 0, "interval",
          std::to_string(t.interval_ps) + " ps is not a positive whole number of microseconds",
          "Chakra COMP_NODE durations are whole us; pick e.g. 1us");
  require(t.start_ps > 0 && t.start_ps % kPsPerUs == 0, "start",
          std::to_string(t.start_ps) + " ps is not a positive whole number of microseconds",
          "Chakra COMP_NODE durations are whole us; pick e.g. 1us");
  models::Workload w;
  w.source = "ns3-chain";
  w.format = "chakra";
  w.ranks = t.senders + 1;
  models::CommGroup world{"world", {}};
  for (std::uint32_t r = 0; r < w.ranks; ++r) world.ranks.push_back(r);
  w.groups.push_back(world);
  w.programs.resize(w.ranks);
  const std::uint32_t receiver = t.senders;
  for (std::uint32_t s = 0; s < t.senders; ++s) {
    auto& prog = w.programs[s];
    std::uint32_t prev_timer = 0;
    for (std::uint32_t k = 0; k < t.count; ++k) {
      models::WorkNode timer;
      timer.type = models::NodeType::kCompute;
      timer.name = "timer" + std::to_string(k);
      timer.duration_ps = k == 0 ? t.start_ps : t.interval_ps;
      if (k > 0) timer.deps = {prev_timer};
      prev_timer = static_cast<std::uint32_t>(prog.size());
      prog.push_back(timer);
      models::WorkNode send;
      send.type = models::NodeType::kSend;
      send.name = "send" + std::to_string(k);
      send.bytes = t.payload_bytes;
      send.peer = static_cast<std::int32_t>(receiver);
      send.tag = k;
      send.deps = {prev_timer};
      prog.push_back(send);
    }
    for (std::size_t i = 0; i < prog.size(); ++i) prog[i].source_id = i;
  }
  auto& rx = w.programs[receiver];
  for (std::uint32_t s = 0; s < t.senders; ++s) {
    for (std::uint32_t k = 0; k < t.count; ++k) {
      models::WorkNode recv;
      recv.type = models::NodeType::kRecv;
      recv.name = "recv" + std::to_string(s) + "." + std::to_string(k);
      recv.bytes = t.payload_bytes;
      recv.peer = static_cast<std::int32_t>(s);
      recv.tag = k;
      recv.source_id = rx.size();
      rx.push_back(recv);
    }
  }
  return w;
}

}  // namespace fabricsim::tests::ns3chain
