#include "simccl/nccl_settings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <map>

#include "engine/errors.hpp"

extern char** environ;  // NOLINT: POSIX

namespace fabricsim::simccl {

using engine::InputError;

const char* algo_name(Algo a) {
  static const char* const names[kNumAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain",
                                               "NVLS", "NVLSTree", "PAT"};
  return names[static_cast<int>(a)];
}
const char* proto_name(Proto p) {
  static const char* const names[kNumProtos] = {"LL", "LL128", "Simple"};
  return names[static_cast<int>(p)];
}
const char* func_name(Func f) {
  static const char* const names[kNumFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                               "AllReduce"};
  return names[static_cast<int>(f)];
}

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Generic parseList over N names (NCCL src/graph/tuning.cc): see parse_algo_list's doc.
template <int N>
std::array<std::array<bool, N>, kNumFuncs> parse_list(const std::string& text, const char* const* names,
                                                      const std::string& what, const std::string& origin,
                                                      const std::string& field) {
  std::array<std::array<bool, N>, kNumFuncs> en{};
  for (auto& row : en) row.fill(true);
  std::string valid;
  for (int i = 0; i < N; ++i) valid += (i ? ", " : "") + std::string(names[i]);
  const std::string fix = "use a list of " + valid +
                          " separated by ',', '^' to exclude, and 'func:list' entries separated by ';' "
                          "(e.g. \"" + std::string(names[0]) + "," + names[1] + ";allreduce:^" + names[0] + "\")";
  const auto entries = split(text, ';');
  for (std::size_t e = 0; e < entries.size(); ++e) {
    std::string entry = trim(entries[e]);
    if (entry.empty()) {
      if (entries.size() == 1) throw InputError(origin, field, "empty value", fix);
      continue;
    }
    std::vector<int> funcs;
    const auto colon = entry.find(':');
    if (colon != std::string::npos) {
      const std::string fn = lower(trim(entry.substr(0, colon)));
      int found = -1;
      for (int f = 0; f < kNumFuncs; ++f) {
        if (fn == lower(func_name(static_cast<Func>(f)))) found = f;
      }
      if (found < 0) {
        throw InputError(origin, field, "'" + trim(entry.substr(0, colon)) + "' is not a collective function",
                         "prefix with Broadcast, Reduce, AllGather, ReduceScatter or AllReduce");
      }
      funcs.push_back(found);
      entry = trim(entry.substr(colon + 1));
    } else {
      if (e != 0) {
        throw InputError(origin, field, "entry '" + entry + "' after the first needs a 'func:' prefix", fix);
      }
      for (int f = 0; f < kNumFuncs; ++f) funcs.push_back(f);
    }
    bool negate = false;
    if (!entry.empty() && entry[0] == '^') {
      negate = true;
      entry = trim(entry.substr(1));
    }
    std::array<bool, N> listed{};
    for (const auto& tok_raw : split(entry, ',')) {
      const std::string tok = lower(trim(tok_raw));
      if (tok.empty()) throw InputError(origin, field, "empty " + what + " name in '" + text + "'", fix);
      int found = -1;
      for (int i = 0; i < N; ++i) {
        if (tok == lower(names[i])) found = i;
      }
      if (found < 0) throw InputError(origin, field, "'" + trim(tok_raw) + "' is not an NCCL " + what, fix);
      listed[static_cast<std::size_t>(found)] = true;
    }
    for (int f : funcs) {
      for (int i = 0; i < N; ++i) en[static_cast<std::size_t>(f)][static_cast<std::size_t>(i)] = negate != listed[static_cast<std::size_t>(i)];
    }
  }
  return en;
}

using K = SettingKind;

// The names simccl knows. kNoEffect entries say in their help why accepting them without effect
// is right on a simulated cluster; kRefused ones would change what NCCL does in a way simccl does
// not model, so a run with them would claim a configuration it did not simulate.
const std::vector<KnownSetting>& known_names() {
  static const std::vector<KnownSetting> k = {
      {"NCCL_ALGO", "algorithms allowed per collective (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; "
                    "lists, ^exclusions, func:list entries separated by ';')", K::kModelled},
      {"NCCL_PROTO", "protocols allowed per collective (LL, LL128, Simple; same syntax as NCCL_ALGO)", K::kModelled},
      {"NCCL_MIN_NCHANNELS", "minimum channels per communicator, 1..64", K::kModelled},
      {"NCCL_MAX_NCHANNELS", "maximum channels per communicator, 1..64", K::kModelled},
      {"NCCL_MIN_CTAS", "config.minCTAs from the environment, 1..64: the minimum is the larger of it and NCCL_MIN_NCHANNELS", K::kModelled},
      {"NCCL_MAX_CTAS", "config.maxCTAs from the environment, 1..64: the maximum is the smaller of it and NCCL_MAX_NCHANNELS", K::kModelled},
      {"NCCL_BUFFSIZE", "Simple protocol buffer per connection, bytes (default 4 MiB)", K::kModelled},
      {"NCCL_LL_BUFFSIZE", "LL buffer per connection, bytes (default 512 KiB)", K::kModelled},
      {"NCCL_LL128_BUFFSIZE", "LL128 buffer per connection, bytes (default 4915200)", K::kModelled},
      {"NCCL_NVLS_ENABLE", "0 off, 1 force, 2 auto (NVLS where the GPUs are Hopper or newer on one NVSwitch)", K::kModelled},
      {"NCCL_MNNVL_ENABLE", "0 off, 1 on (refused without an NVLink domain spanning hosts, as NCCL refuses it), 2 auto: "
                            "NVLink between hosts where cluster.nvlink_domain spans them; 0 there is refused (not modelled)", K::kModelled},
      {"NCCL_COLLNET_ENABLE", "CollNet/SHARP (not modelled: 1 is an error)", K::kModelled},
      {"NCCL_PAT_ENABLE", "PAT for one GPU per node (not modelled: excluded, 1 is an error)", K::kModelled},
      {"NCCL_CROSS_NIC", "0 rail-aligned rings, 1 any NIC, 2 pairs (rings are rail-aligned in simccl)", K::kModelled},
      {"NCCL_PXN_DISABLE", "1 disables PXN relays for point-to-point", K::kModelled},
      {"NCCL_P2P_PXN_LEVEL", "0 never PXN, 1/2 relay through the local GPU on the peer's rail", K::kModelled},
      {"NCCL_NCHANNELS_PER_NET_PEER", "p2p channels per network peer", K::kModelled},
      {"NCCL_IB_QPS_PER_CONNECTION", "QPs per connection, 1..128: each QP has its own RoCEv2 UDP source port, so its own ECMP path (default of nic.qps_per_connection)", K::kModelled},
      {"NCCL_IB_SPLIT_DATA_ON_QPS", "split each message over all QPs", K::kModelled},
      {"NCCL_NET_OVERHEAD", "per-message network overhead in ns for the cost model", K::kModelled},
      {"NCCL_P2P_NET_CHUNKSIZE", "p2p chunk over the network, bytes (128 KiB)", K::kModelled},
      {"NCCL_NVLS_CHUNKSIZE", "NVLS chunk per head, bytes (128 KiB)", K::kModelled},
      {"NCCL_P2P_NVL_CHUNKSIZE", "p2p chunk over NVLink, bytes (512 KiB)", K::kModelled},
      {"NCCL_P2P_PCI_CHUNKSIZE", "p2p chunk over PCIe, bytes (128 KiB)", K::kModelled},
      {"NCCL_P2P_LL_THRESHOLD", "p2p messages up to this size use LL, bytes (16384)", K::kModelled},
      {"NCCL_CHUNK_SIZE", "p2p chunk size override, bytes", K::kModelled},
      {"NCCL_MIN_P2P_NCHANNELS", "minimum p2p channels", K::kModelled},
      {"NCCL_MAX_P2P_NCHANNELS", "maximum p2p channels", K::kModelled},
      {"NCCL_TOPO_FILE", "topology XML: GPUs, NVLink bandwidth, NICs and their GPU affinity for the cost model", K::kModelled},
      // Known to NCCL; accepted without effect on the simulation (the help says why).
      {"NCCL_DEBUG", "logging: VERSION, WARN, INFO, ABORT or TRACE (no effect: logging does not change timing)", K::kNoEffect},
      {"NCCL_DEBUG_SUBSYS", "logging (no effect)", K::kNoEffect},
      {"NCCL_DEBUG_FILE", "logging (no effect)", K::kNoEffect},
      {"NCCL_SOCKET_IFNAME", "bootstrap interface (no effect: bootstrap traffic is not simulated)", K::kNoEffect},
      {"NCCL_IB_HCA", "NIC selection (no effect: one NIC per GPU)", K::kNoEffect},
      {"NCCL_IB_GID_INDEX", "RoCE GID index, -1 (auto) .. 1023 (no effect)", K::kNoEffect},
      {"NCCL_IB_TC", "traffic class, -1 (unset) .. 255 (no effect yet)", K::kNoEffect},
      {"NCCL_IB_SL", "service level, -1 (unset) .. 15 (no effect yet)", K::kNoEffect},
      {"NCCL_IB_TIMEOUT", "IB timeout exponent 1..31 (no effect: no packet is lost for good)", K::kNoEffect},
      {"NCCL_IB_RETRY_CNT", "IB retries 0..7 (no effect)", K::kNoEffect},
      {"NCCL_NET_GDR_LEVEL", "GPUDirect RDMA level: LOC, PIX, PXB, PHB, SYS or 0..5 (no effect)", K::kNoEffect},
      {"NCCL_NET_GDR_C2C", "GPUDirect RDMA over NVLink-C2C on Grace systems: 1 is what is simulated (the NIC reads and "
                           "writes GPU memory directly); 0 (stage through host memory) is refused as not modelled", K::kNoEffect},
      {"NCCL_CUMEM_ENABLE", "cuMem allocation API, 0 or 1 (no effect on transfer times; 0 is refused where "
                            "cluster.nvlink_domain spans hosts, as multi-node NVLink needs cuMem fabric handles)", K::kNoEffect},
      {"NCCL_WORK_FIFO_BYTES", "host-to-GPU work FIFO, a power of two from 4 KiB to 1 GiB (no effect: the simulated "
                               "launch never waits for FIFO space; one collective is in flight per stream)", K::kNoEffect},
      {"NCCL_P2P_LEVEL", "P2P transport cutoff: LOC, NVL, PIX, PXB, PHB, SYS or 0..5 (no effect: GPUs of an NVLink domain use NVLink)", K::kNoEffect},
      {"NCCL_P2P_DISABLE", "0/1: disable the P2P transport (no effect: GPUs of an NVLink domain use NVLink)", K::kNoEffect},
      {"NCCL_SHM_DISABLE", "0/1: disable the shared-memory transport (no effect)", K::kNoEffect},
      {"NCCL_IB_DISABLE", "0/1: disable the IB/RoCE transport (no effect: the network is RoCEv2)", K::kNoEffect},
      {"NCCL_TOPO_DUMP_FILE", "topology dump (no effect)", K::kNoEffect},
      {"NCCL_NTHREADS", "threads per CTA, a multiple of 32 in 64..512 (no effect on flows)", K::kNoEffect},
      {"NCCL_LL128_NTHREADS", "LL128 threads per CTA, a multiple of 32 in 160..640 (no effect on flows)", K::kNoEffect},
      {"NCCL_NET_PLUGIN", "net plugin library (no effect: the transport is the spec's fabric)", K::kNoEffect},
      {"NCCL_LAUNCH_MODE", "PARALLEL or GROUP (no effect)", K::kNoEffect},
      // Known to NCCL; they change its choices in ways simccl does not model.
      {"NCCL_GRAPH_FILE", "graph XML (not modelled: simccl searches its own graphs; refused)", K::kRefused},
      {"NCCL_TUNER_PLUGIN", "tuner plugin (not modelled: simccl's cost model picks algorithm and protocol; refused)", K::kRefused},
  };
  return k;
}

// The known name nearest to `name` (edit distance, at most 3), or "" when none is that close.
std::string nearest_known(const std::string& name) {
  std::string best;
  std::size_t best_d = 4;
  for (const auto& k : known_names()) {
    const std::string t = k.name;
    std::vector<std::size_t> prev(t.size() + 1), cur(t.size() + 1);
    for (std::size_t j = 0; j <= t.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= name.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= t.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (name[i - 1] == t[j - 1] ? 0 : 1)});
      }
      std::swap(prev, cur);
    }
    if (prev[t.size()] < best_d) {
      best_d = prev[t.size()];
      best = t;
    }
  }
  return best;
}

std::int64_t parse_int(const RawSetting& s, std::int64_t lo, std::int64_t hi) {
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(s.value, &pos, 0);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || pos != s.value.size()) {
    throw InputError(s.origin, s.name, "'" + s.value + "' is not an integer",
                     "give a whole number between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  if (v < lo || v > hi) {
    throw InputError(s.origin, s.name, "'" + s.value + "' is out of range",
                     "give a value between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return v;
}

// One of `allowed` (case-insensitive, as NCCL compares them with strcasecmp) or, when `int_hi`
// >= 0, an integer 0..int_hi; the error names the setting, where it came from and the values.
void check_word(const RawSetting& s, std::initializer_list<const char*> allowed, int int_hi) {
  const std::string v = lower(trim(s.value));
  for (const char* a : allowed) {
    if (v == lower(a)) return;
  }
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  if (int_hi >= 0) {
    std::size_t pos = 0;
    long long n = -1;
    try {
      n = std::stoll(v, &pos, 10);
    } catch (...) {
      pos = 0;
    }
    if (pos != 0 && pos == v.size() && n >= 0 && n <= int_hi) return;
    list += " or 0.." + std::to_string(int_hi);
  }
  throw InputError(s.origin, s.name, "'" + s.value + "' is not an allowed value", "use " + list);
}

// Values of the NCCL_* names simccl knows but does not model. NCCL itself reads them (and would
// reject or misread a bad one), so a bad value is an input error here too: the run would claim a
// configuration NCCL would not have run. Allowed values: NCCL user guide, "Environment Variables"
// (NCCL 2.28), and ../shared/reference/nccl.md (NTHREADS: multiple of 32 in 64..512; LL128:
// 160..640, src/init.cc / device.h NCCL_LL128_MAX_NTHREADS 640). IB fields: ibverbs widths
// (service level 4 bits, traffic class 8 bits, timeout exponent 5 bits, retry count 3 bits).
void check_unmodelled(const RawSetting& r) {
  const std::string& n = r.name;
  auto threads = [&](long long lo, long long hi) {
    std::size_t pos = 0;
    long long t = -1;
    try {
      t = std::stoll(r.value, &pos, 10);
    } catch (...) {
      pos = 0;
    }
    if (pos == 0 || pos != r.value.size() || t < lo || t > hi || t % 32 != 0) {
      throw InputError(r.origin, n, "'" + r.value + "' is not a thread count NCCL accepts",
                       "give a multiple of 32 (the warp size) between " + std::to_string(lo) + " and " +
                           std::to_string(hi));
    }
  };
  if (n == "NCCL_DEBUG") {
    check_word(r, {"VERSION", "WARN", "INFO", "ABORT", "TRACE"}, -1);
  } else if (n == "NCCL_P2P_LEVEL") {
    check_word(r, {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"}, 5);
  } else if (n == "NCCL_NET_GDR_LEVEL") {
    check_word(r, {"LOC", "PIX", "PXB", "PHB", "SYS"}, 5);
  } else if (n == "NCCL_LAUNCH_MODE") {
    check_word(r, {"PARALLEL", "GROUP"}, -1);
  } else if (n == "NCCL_P2P_DISABLE" || n == "NCCL_SHM_DISABLE" || n == "NCCL_IB_DISABLE") {
    parse_int(r, 0, 1);
  } else if (n == "NCCL_NTHREADS") {
    threads(64, 512);
  } else if (n == "NCCL_LL128_NTHREADS") {
    threads(160, 640);
  } else if (n == "NCCL_IB_GID_INDEX") {
    parse_int(r, -1, 1023);
  } else if (n == "NCCL_IB_TC") {
    parse_int(r, -1, 255);
  } else if (n == "NCCL_IB_SL") {
    parse_int(r, -1, 15);
  } else if (n == "NCCL_IB_TIMEOUT") {
    parse_int(r, 1, 31);
  } else if (n == "NCCL_IB_RETRY_CNT") {
    parse_int(r, 0, 7);
  } else if (n == "NCCL_NET_GDR_C2C") {
    if (parse_int(r, 0, 1) == 0) {
      throw InputError(r.origin, n, "0 (network buffers staged through host memory on Grace systems) is not modelled: "
                       "simulated NICs read and write GPU memory directly",
                       "remove NCCL_NET_GDR_C2C or set it to 1 (on systems without NVLink-C2C it has no effect)");
    }
  } else if (n == "NCCL_CUMEM_ENABLE") {
    parse_int(r, 0, 1);
  } else if (n == "NCCL_WORK_FIFO_BYTES") {
    // NCCL src/init.cc: a value that is not a power of two is ignored with a warning (default
    // 1 MiB is used); the FIFO is capped at 1 GiB. Ignoring the user's value silently would let a
    // study believe it ran with it, so it is refused here.
    const auto v = parse_int(r, 4096, std::int64_t{1} << 30);
    if ((v & (v - 1)) != 0) {
      throw InputError(r.origin, n, "'" + r.value + "' is not a power of two (NCCL ignores it and uses 1 MiB)",
                       "give a power of two between 4096 and 1073741824, e.g. 1048576");
    }
  }
  // The rest are names of files, interfaces, devices or plugins: any text.
}

}  // namespace

std::array<std::array<bool, kNumAlgos>, kNumFuncs> parse_algo_list(const std::string& text, const std::string& origin,
                                                                   const std::string& field) {
  // NCCL accepts both CollNetDirect and Collnetdirect spellings; matching is case-insensitive.
  static const char* const names[kNumAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  auto en = parse_list<kNumAlgos>(text, names, "algorithm", origin, field);
  // An explicit "func:list" entry that leaves the function no algorithm it has (nccl.md §1.1,
  // NCCL src/graph/tuning.cc: Broadcast and Reduce run Ring only; AllGather and ReduceScatter Ring,
  // PAT, NVLS, CollNetDirect; AllReduce all but PAT) makes every such call fail in NCCL ("no
  // algorithm available", ncclInvalidUsage). A prefix-less first entry applies to all functions,
  // so NCCL_ALGO=Tree stays valid for a job that only runs AllReduce.
  using A = Algo;
  static const std::vector<A> has[kNumFuncs] = {
      {A::kRing},
      {A::kRing},
      {A::kRing, A::kPat, A::kNvls, A::kCollNetDirect},
      {A::kRing, A::kPat, A::kNvls, A::kCollNetDirect},
      {A::kTree, A::kRing, A::kCollNetDirect, A::kCollNetChain, A::kNvls, A::kNvlsTree}};
  for (const auto& entry_raw : split(text, ';')) {
    const std::string entry = trim(entry_raw);
    const auto colon = entry.find(':');
    if (colon == std::string::npos) continue;
    const std::string fn = lower(trim(entry.substr(0, colon)));
    for (int f = 0; f < kNumFuncs; ++f) {
      if (fn != lower(func_name(static_cast<Func>(f)))) continue;
      bool any = false;
      std::string list;
      for (A a : has[f]) {
        any = any || en[static_cast<std::size_t>(f)][static_cast<std::size_t>(a)];
        list += (list.empty() ? "" : ", ") + std::string(algo_name(a));
      }
      if (!any) {
        throw InputError(origin, field, "'" + entry + "' enables no algorithm " + func_name(static_cast<Func>(f)) +
                                            " has (NCCL fails every such call)",
                         "name one of " + list + " for " + func_name(static_cast<Func>(f)));
      }
    }
  }
  return en;
}

std::array<std::array<bool, kNumProtos>, kNumFuncs> parse_proto_list(const std::string& text, const std::string& origin,
                                                                     const std::string& field) {
  static const char* const names[kNumProtos] = {"LL", "LL128", "Simple"};
  return parse_list<kNumProtos>(text, names, "protocol", origin, field);
}

NcclSettings::NcclSettings() {
  for (auto& row : algo_enabled) row.fill(true);
  for (auto& row : proto_enabled) row.fill(true);
}

const std::vector<KnownSetting>& known_nccl_setting_kinds() { return known_names(); }

void check_nccl_settings_for_cluster(const NcclSettings& s, std::uint32_t gpus_per_host, std::uint32_t domain_gpus,
                                     std::uint32_t hosts) {
  const bool multi_host_domain = domain_gpus > gpus_per_host && hosts > 1;
  if (s.mnnvl_enable == 1 && hosts > 1 && !multi_host_domain) {
    // NCCL src/init.cc initTransportsRank: nNodes > 1, no MNNVL fabric and NCCL_MNNVL_ENABLE=1
    // -> WARN "MNNVL is not supported on this system", ncclSystemError.
    throw InputError(s.mnnvl_origin, "NCCL_MNNVL_ENABLE", "1 needs an NVLink domain spanning hosts; NCCL refuses it here "
                     "(\"MNNVL is not supported on this system\")",
                     "set cluster.nvlink_domain to a multiple of cluster.gpus_per_host (e.g. 72), or NCCL_MNNVL_ENABLE to 2");
  }
  if (multi_host_domain && s.mnnvl_enable == 0) {
    throw InputError(s.mnnvl_origin, "NCCL_MNNVL_ENABLE",
                     "0 on a cluster whose NVLink domain spans hosts is not modelled (NCCL would join the hosts through "
                     "their NICs)",
                     "set cluster.nvlink_domain to cluster.gpus_per_host to simulate hosts joined by the network");
  }
  if (multi_host_domain && s.cumem_enable == 0) {
    throw InputError(s.cumem_origin, "NCCL_CUMEM_ENABLE",
                     "0 on a cluster whose NVLink domain spans hosts is not modelled (multi-node NVLink needs cuMem "
                     "fabric handles; NCCL would fall back to the NICs)",
                     "remove NCCL_CUMEM_ENABLE, or set cluster.nvlink_domain to cluster.gpus_per_host");
  }
}

const std::vector<std::pair<const char*, const char*>>& known_nccl_settings() {
  static const std::vector<std::pair<const char*, const char*>> out = [] {
    std::vector<std::pair<const char*, const char*>> v;
    for (const auto& k : known_names()) v.emplace_back(k.name, k.help);
    return v;
  }();
  return out;
}

NcclSettings load_nccl_settings(const std::vector<std::pair<std::string, std::string>>& spec_pairs,
                                const std::string& spec_file, bool use_env,
                                const std::map<std::string, std::string>* origins) {
  // Spec wins: collect the environment first, then overwrite with the spec.
  std::map<std::string, RawSetting> raw;
  if (use_env && environ != nullptr) {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (kv.rfind("NCCL_", 0) != 0) continue;
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      raw[kv.substr(0, eq)] = RawSetting{kv.substr(0, eq), kv.substr(eq + 1), "<env>"};
    }
  }
  for (const auto& [name, value] : spec_pairs) {
    const auto o = origins ? origins->find(name) : std::map<std::string, std::string>::const_iterator{};
    raw[name] = RawSetting{name, value, origins && o != origins->end() ? o->second : spec_file};
  }
  NcclSettings s;
  int min_ctas = 0, max_ctas = 0;  // config.minCTAs / maxCTAs (0 = unset)
  for (const auto& [name, r] : raw) {
    const KnownSetting* known = nullptr;
    for (const auto& k : known_names()) {
      if (name == k.name) known = &k;
    }
    if (known == nullptr) {
      const std::string near = nearest_known(name);
      throw InputError(r.origin, name, "unknown NCCL setting (simccl neither models nor knows it)",
                       (near.empty() ? std::string() : "did you mean " + near + "? ") +
                           "remove it; `fabricsim describe` lists the NCCL_* names simccl reads");
    }
    if (known->kind == SettingKind::kRefused) {
      throw InputError(r.origin, name, std::string("not modelled by simccl: ") + known->help, "remove " + name);
    }
    s.applied.push_back(r);
    if (known->kind == SettingKind::kNoEffect) {
      check_unmodelled(r);
      if (name == "NCCL_CUMEM_ENABLE") {
        s.cumem_enable = static_cast<int>(parse_int(r, 0, 1));
        s.cumem_origin = r.origin;
      }
      continue;
    }
    // Captures a reference, not the structured binding `r` itself (clang 14, the sanitizer build's
    // compiler, lacks C++20 lambda capture of structured bindings).
    const RawSetting& setting = r;
    auto bytes = [&setting](std::uint64_t lo, std::uint64_t hi) {
      return static_cast<std::uint64_t>(parse_int(setting, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
    };
    const std::string field = name;
    if (name == "NCCL_ALGO") {
      s.algo_enabled = parse_algo_list(r.value, r.origin, field);
      s.algo_set = true;
      s.algo_origin = r.origin;
    } else if (name == "NCCL_TOPO_FILE") {
      s.topo_file = r.value;
      s.topo_file_origin = r.origin;
    } else if (name == "NCCL_PROTO") {
      s.proto_enabled = parse_proto_list(r.value, r.origin, field);
      s.proto_set = true;
      s.proto_origin = r.origin;
    } else if (name == "NCCL_MIN_NCHANNELS") {
      s.min_nchannels = static_cast<int>(parse_int(r, 1, 64));  // MAXCHANNELS, src/include/device.h
    } else if (name == "NCCL_MAX_NCHANNELS") {
      s.max_nchannels = static_cast<int>(parse_int(r, 1, 64));
    } else if (name == "NCCL_MIN_CTAS") {
      min_ctas = static_cast<int>(parse_int(r, 1, 64));
    } else if (name == "NCCL_MAX_CTAS") {
      max_ctas = static_cast<int>(parse_int(r, 1, 64));
    } else if (name == "NCCL_MNNVL_ENABLE") {
      s.mnnvl_enable = static_cast<int>(parse_int(r, 0, 2));
      s.mnnvl_origin = r.origin;
    } else if (name == "NCCL_BUFFSIZE") {
      s.buffsize_simple = bytes(8 * 1024, 1ull << 34);
    } else if (name == "NCCL_LL_BUFFSIZE") {
      s.buffsize_ll = bytes(8 * 1024, 1ull << 34);
    } else if (name == "NCCL_LL128_BUFFSIZE") {
      s.buffsize_ll128 = bytes(8 * 1024, 1ull << 34);
    } else if (name == "NCCL_NVLS_ENABLE") {
      s.nvls_enable = static_cast<int>(parse_int(r, 0, 2));
    } else if (name == "NCCL_COLLNET_ENABLE") {
      s.collnet_enable = static_cast<int>(parse_int(r, 0, 1));
    } else if (name == "NCCL_PAT_ENABLE") {
      s.pat_enable = static_cast<int>(parse_int(r, 0, 2));
    } else if (name == "NCCL_CROSS_NIC") {
      s.cross_nic = static_cast<int>(parse_int(r, 0, 2));
    } else if (name == "NCCL_PXN_DISABLE") {
      s.pxn_disable = static_cast<int>(parse_int(r, 0, 1));
    } else if (name == "NCCL_P2P_PXN_LEVEL") {
      s.p2p_pxn_level = static_cast<int>(parse_int(r, 0, 2));
    } else if (name == "NCCL_NCHANNELS_PER_NET_PEER") {
      s.nchannels_per_net_peer = static_cast<int>(parse_int(r, 1, 64));
    } else if (name == "NCCL_IB_QPS_PER_CONNECTION") {
      s.ib_qps_per_connection = static_cast<int>(parse_int(r, 1, 128));  // net_ib.cc max 128
    } else if (name == "NCCL_IB_SPLIT_DATA_ON_QPS") {
      s.ib_split_data_on_qps = static_cast<int>(parse_int(r, 0, 1));
    } else if (name == "NCCL_NET_OVERHEAD") {
      s.net_overhead_us = static_cast<double>(parse_int(r, 0, 1'000'000)) / 1000.0;
    } else if (name == "NCCL_P2P_NET_CHUNKSIZE") {
      s.p2p_net_chunksize = bytes(512, 1ull << 30);
    } else if (name == "NCCL_NVLS_CHUNKSIZE") {
      s.nvls_chunksize = bytes(4096, 1ull << 30);
    } else if (name == "NCCL_P2P_NVL_CHUNKSIZE") {
      s.p2p_nvl_chunksize = bytes(512, 1ull << 30);
    } else if (name == "NCCL_P2P_PCI_CHUNKSIZE") {
      s.p2p_pci_chunksize = bytes(512, 1ull << 30);
    } else if (name == "NCCL_P2P_LL_THRESHOLD") {
      s.p2p_ll_threshold = bytes(0, 1ull << 30);
    } else if (name == "NCCL_CHUNK_SIZE") {
      s.chunk_size = bytes(512, 1ull << 30);
    } else if (name == "NCCL_MIN_P2P_NCHANNELS") {
      s.min_p2p_nchannels = static_cast<int>(parse_int(r, 1, 64));
    } else if (name == "NCCL_MAX_P2P_NCHANNELS") {
      s.max_p2p_nchannels = static_cast<int>(parse_int(r, 1, 64));
    }
  }
  // Where a setting came from (spec file, "<cli>" or "<env>"), for the checks across settings.
  auto origin_of = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (const auto it = raw.find(n); it != raw.end()) return it->second.origin;
    }
    return spec_file;
  };
  // NCCL src/graph/connect.cc ncclTopoPostset: channels are clamped to min(NCCL_MAX_NCHANNELS,
  // config.maxCTAs) and raised to max(NCCL_MIN_NCHANNELS, config.minCTAs).
  if (min_ctas) s.min_nchannels = std::max(s.min_nchannels, min_ctas);
  if (max_ctas) s.max_nchannels = s.max_nchannels ? std::min(s.max_nchannels, max_ctas) : max_ctas;
  if (s.min_nchannels && s.max_nchannels && s.min_nchannels > s.max_nchannels) {
    const bool min_from_ctas = raw.count("NCCL_MIN_CTAS") && s.min_nchannels == min_ctas;
    const bool max_from_ctas = raw.count("NCCL_MAX_CTAS") && s.max_nchannels == max_ctas;
    const std::string min_name = min_from_ctas ? "NCCL_MIN_CTAS" : "NCCL_MIN_NCHANNELS";
    const std::string max_name = max_from_ctas ? "NCCL_MAX_CTAS" : "NCCL_MAX_NCHANNELS";
    throw InputError(origin_of({min_name.c_str()}), min_name,
                     std::to_string(s.min_nchannels) + " is above " + max_name + " " + std::to_string(s.max_nchannels),
                     "make " + min_name + " <= " + max_name);
  }
  if (s.collnet_enable == 1) {
    throw InputError(origin_of({"NCCL_COLLNET_ENABLE"}), "NCCL_COLLNET_ENABLE",
                     "CollNet (SHARP in-network reduction) is not modelled by simccl",
                     "remove NCCL_COLLNET_ENABLE or set it to 0");
  }
  if (s.pat_enable == 1) {
    throw InputError(origin_of({"NCCL_PAT_ENABLE"}), "NCCL_PAT_ENABLE", "the PAT algorithm is not modelled by simccl",
                     "remove NCCL_PAT_ENABLE or set it to 0 or 2 (auto, treated as unsupported)");
  }
  return s;
}

}  // namespace fabricsim::simccl
