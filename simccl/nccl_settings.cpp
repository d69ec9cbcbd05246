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

struct KnownName {
  const char* name;
  const char* help;
  bool modelled;
};

const std::vector<KnownName>& known_names() {
  static const std::vector<KnownName> k = {
      {"NCCL_ALGO", "algorithms allowed per collective (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)", true},
      {"NCCL_PROTO", "protocols allowed per collective (LL, LL128, Simple)", true},
      {"NCCL_MIN_NCHANNELS", "minimum channels per communicator", true},
      {"NCCL_MAX_NCHANNELS", "maximum channels per communicator", true},
      {"NCCL_MIN_CTAS", "alias of NCCL_MIN_NCHANNELS (config.minCTAs)", true},
      {"NCCL_MAX_CTAS", "alias of NCCL_MAX_NCHANNELS (config.maxCTAs)", true},
      {"NCCL_BUFFSIZE", "Simple protocol buffer per connection, bytes (default 4 MiB)", true},
      {"NCCL_LL_BUFFSIZE", "LL buffer per connection, bytes (default 512 KiB)", true},
      {"NCCL_LL128_BUFFSIZE", "LL128 buffer per connection, bytes (default 4915200)", true},
      {"NCCL_NVLS_ENABLE", "0 off, 1 force, 2 auto (NVLS where the GPUs are Hopper or newer on one NVSwitch)", true},
      {"NCCL_COLLNET_ENABLE", "CollNet/SHARP (not modelled: 1 is an error)", true},
      {"NCCL_PAT_ENABLE", "PAT for one GPU per node (not modelled: excluded, 1 is an error)", true},
      {"NCCL_CROSS_NIC", "0 rail-aligned rings, 1 any NIC, 2 pairs (rings are rail-aligned in simccl)", true},
      {"NCCL_PXN_DISABLE", "1 disables PXN relays for point-to-point", true},
      {"NCCL_P2P_PXN_LEVEL", "0 never PXN, 1/2 relay through the local GPU on the peer's rail", true},
      {"NCCL_NCHANNELS_PER_NET_PEER", "p2p channels per network peer", true},
      {"NCCL_IB_QPS_PER_CONNECTION", "QPs per connection: each QP has its own RoCEv2 UDP source port, so its own ECMP path (default of nic.qps_per_connection)", true},
      {"NCCL_IB_SPLIT_DATA_ON_QPS", "split each message over all QPs", true},
      {"NCCL_NET_OVERHEAD", "per-message network overhead in ns for the cost model", true},
      {"NCCL_P2P_NET_CHUNKSIZE", "p2p chunk over the network, bytes (128 KiB)", true},
      {"NCCL_NVLS_CHUNKSIZE", "NVLS chunk per head, bytes (128 KiB)", true},
      {"NCCL_P2P_NVL_CHUNKSIZE", "p2p chunk over NVLink, bytes (512 KiB)", true},
      {"NCCL_P2P_PCI_CHUNKSIZE", "p2p chunk over PCIe, bytes (128 KiB)", true},
      {"NCCL_P2P_LL_THRESHOLD", "p2p messages up to this size use LL, bytes (16384)", true},
      {"NCCL_CHUNK_SIZE", "p2p chunk size override, bytes", true},
      {"NCCL_MIN_P2P_NCHANNELS", "minimum p2p channels", true},
      {"NCCL_MAX_P2P_NCHANNELS", "maximum p2p channels", true},
      // Known to NCCL; no effect on the simulation.
      {"NCCL_DEBUG", "logging: VERSION, WARN, INFO, ABORT or TRACE (no effect)", false},
      {"NCCL_DEBUG_SUBSYS", "logging (no effect)", false},
      {"NCCL_DEBUG_FILE", "logging (no effect)", false},
      {"NCCL_SOCKET_IFNAME", "bootstrap interface (no effect)", false},
      {"NCCL_IB_HCA", "NIC selection (no effect: one NIC per GPU)", false},
      {"NCCL_IB_GID_INDEX", "RoCE GID index, -1 (auto) .. 1023 (no effect)", false},
      {"NCCL_IB_TC", "traffic class, -1 (unset) .. 255 (no effect yet)", false},
      {"NCCL_IB_SL", "service level, -1 (unset) .. 15 (no effect yet)", false},
      {"NCCL_IB_TIMEOUT", "IB timeout exponent 1..31 (no effect)", false},
      {"NCCL_IB_RETRY_CNT", "IB retries 0..7 (no effect)", false},
      {"NCCL_NET_GDR_LEVEL", "GPUDirect RDMA level: LOC, PIX, PXB, PHB, SYS or 0..5 (no effect)", false},
      {"NCCL_P2P_LEVEL", "P2P transport cutoff: LOC, NVL, PIX, PXB, PHB, SYS or 0..5 (no effect: GPUs of an NVLink domain use NVLink)", false},
      {"NCCL_P2P_DISABLE", "0/1: disable the P2P transport (no effect: GPUs of an NVLink domain use NVLink)", false},
      {"NCCL_SHM_DISABLE", "0/1: disable the shared-memory transport (no effect)", false},
      {"NCCL_IB_DISABLE", "0/1: disable the IB/RoCE transport (no effect: the network is RoCEv2)", false},
      {"NCCL_TOPO_FILE", "topology XML: GPUs, NVLink bandwidth, NICs and their GPU affinity for the cost model", true},
      {"NCCL_TOPO_DUMP_FILE", "topology dump (no effect)", false},
      {"NCCL_GRAPH_FILE", "graph XML (not read yet)", false},
      {"NCCL_NTHREADS", "threads per CTA, a multiple of 32 in 64..512 (no effect on flows)", false},
      {"NCCL_LL128_NTHREADS", "LL128 threads per CTA, a multiple of 32 in 160..640 (no effect on flows)", false},
      {"NCCL_TUNER_PLUGIN", "tuner plugin (not loaded)", false},
      {"NCCL_NET_PLUGIN", "net plugin (not loaded)", false},
      {"NCCL_LAUNCH_MODE", "PARALLEL or GROUP (no effect)", false},
  };
  return k;
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
  }
  // The rest are names of files, interfaces, devices or plugins: any text.
}

}  // namespace

std::array<std::array<bool, kNumAlgos>, kNumFuncs> parse_algo_list(const std::string& text, const std::string& origin,
                                                                   const std::string& field) {
  // NCCL accepts both CollNetDirect and Collnetdirect spellings; matching is case-insensitive.
  static const char* const names[kNumAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  return parse_list<kNumAlgos>(text, names, "algorithm", origin, field);
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
  for (const auto& [name, r] : raw) {
    const KnownName* known = nullptr;
    for (const auto& k : known_names()) {
      if (name == k.name) known = &k;
    }
    if (known == nullptr) {
      s.warnings.push_back(r.origin + ": " + name + ": unknown NCCL setting, ignored");
      continue;
    }
    s.applied.push_back(r);
    if (!known->modelled) {
      check_unmodelled(r);
      if (name == "NCCL_GRAPH_FILE" || name == "NCCL_TUNER_PLUGIN") {
        s.warnings.push_back(r.origin + ": " + name + ": not read by simccl yet, ignored");
      }
      continue;
    }
    auto bytes = [&](std::uint64_t lo, std::uint64_t hi) {
      return static_cast<std::uint64_t>(parse_int(r, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
    };
    const std::string field = name;
    if (name == "NCCL_ALGO") {
      s.algo_enabled = parse_algo_list(r.value, r.origin, field);
      s.algo_set = true;
    } else if (name == "NCCL_TOPO_FILE") {
      s.topo_file = r.value;
      s.topo_file_origin = r.origin;
    } else if (name == "NCCL_PROTO") {
      s.proto_enabled = parse_proto_list(r.value, r.origin, field);
      s.proto_set = true;
    } else if (name == "NCCL_MIN_NCHANNELS" || name == "NCCL_MIN_CTAS") {
      s.min_nchannels = static_cast<int>(parse_int(r, 1, 64));  // MAXCHANNELS, src/include/device.h
    } else if (name == "NCCL_MAX_NCHANNELS" || name == "NCCL_MAX_CTAS") {
      s.max_nchannels = static_cast<int>(parse_int(r, 1, 64));
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
  if (s.min_nchannels && s.max_nchannels && s.min_nchannels > s.max_nchannels) {
    throw InputError(origin_of({"NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS"}), "NCCL_MIN_NCHANNELS",
                     std::to_string(s.min_nchannels) + " is above NCCL_MAX_NCHANNELS " + std::to_string(s.max_nchannels),
                     "make NCCL_MIN_NCHANNELS <= NCCL_MAX_NCHANNELS");
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
