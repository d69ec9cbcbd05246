#pragma once
/// @file ns3_csv.hpp
/// Reader for the per-packet CSV written by tests/ns3/ns3_chain.cc:
/// `sender,seq,send_time_ps,recv_time_ps,delay_ps,dropped,wire_bytes` (integer ps, bytes).
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fabricsim::tests::ns3chain {

/// One row of the ns-3 CSV.
struct Ns3Row {
  std::uint32_t sender = 0;
  std::uint32_t seq = 0;
  std::int64_t send_ps = 0;     ///< socket send instant, ps
  std::int64_t recv_ps = -1;    ///< receive instant, ps; -1 if dropped
  std::int64_t delay_ps = -1;   ///< recv - send, ps; -1 if dropped
  bool dropped = false;
  std::int64_t wire_bytes = 0;  ///< PPP frame bytes on the sender's first link
};

/// Reads the CSV at `path` (header line required).
/// @throws std::runtime_error naming the file and line on a missing file or a malformed row.
inline std::vector<Ns3Row> read_ns3_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line) ||
      line != "sender,seq,send_time_ps,recv_time_ps,delay_ps,dropped,wire_bytes") {
    throw std::runtime_error(path + ": line 1: not an ns3_chain CSV header");
  }
  std::vector<Ns3Row> rows;
  for (int lineno = 2; std::getline(in, line); ++lineno) {
    std::istringstream ss(line);
    Ns3Row r;
    char c[6];
    int dropped = 0;
    if (!(ss >> r.sender >> c[0] >> r.seq >> c[1] >> r.send_ps >> c[2] >> r.recv_ps >> c[3] >>
          r.delay_ps >> c[4] >> dropped >> c[5] >> r.wire_bytes)) {
      throw std::runtime_error(path + ": line " + std::to_string(lineno) + ": malformed row");
    }
    r.dropped = dropped != 0;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace fabricsim::tests::ns3chain
