// ns3_chain_workload: writes the fabricsim Chakra ET workload for the ns-3 chain cross-check
// (tests/ns3/chain_workload.hpp): PREFIX.<rank>.et for ranks 0..S (S senders, receiver rank S).
//   ns3_chain_workload --senders 2 --payload 1000B --interval 1us --start 1us --count 150 -o P
// Exit 0 on success, 2 on bad input (one line on stderr).
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "io/chakra_writer.hpp"
#include "tests/ns3/chain_workload.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Chakra ET workload for the ns-3 chain cross-check (docs/validation_ns3.md)"};
  std::string payload = "1000B", interval = "1us", start = "1us", prefix;
  fabricsim::tests::ns3chain::ChainTraffic t;
  app.add_option("--senders", t.senders, "sending ranks (receiver is the next rank)")
      ->capture_default_str();
  app.add_option("--payload", payload, "message size = ns-3 UDP payload (e.g. 1000B)")
      ->capture_default_str();
  app.add_option("--interval", interval, "time between sends of one sender (whole us)")
      ->capture_default_str();
  app.add_option("--start", start, "first send instant (whole us)")->capture_default_str();
  app.add_option("--count", t.count, "messages per sender")->required();
  app.add_option("-o,--output", prefix, "ET prefix: writes PREFIX.<rank>.et")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    t.payload_bytes = fabricsim::engine::parse_bytes(payload, "<cli>", "--payload");
    t.interval_ps = fabricsim::engine::parse_time_ps(interval, "<cli>", "--interval");
    t.start_ps = fabricsim::engine::parse_time_ps(start, "<cli>", "--start");
    fabricsim::io::write_chakra(fabricsim::tests::ns3chain::make_chain_workload(t), prefix);
  } catch (const fabricsim::engine::InputError& e) {
    std::cerr << "ns3_chain_workload: " << e.what() << "\n";
    return 2;
  }
  std::cout << "wrote " << prefix << ".0.et .. " << prefix << "." << t.senders << ".et\n";
  return 0;
}
