#pragma once
/// @file nccl_settings.hpp
/// NCCL_* settings as simccl understands them: parsed from the experiment spec (`nccl:` section,
/// keys are NCCL environment variable names) and from the process environment, the spec winning.
/// Names and semantics follow NCCL 2.28 (../shared/reference/nccl.md §3.6). Every NCCL_* name is
/// one of three kinds: modelled (takes effect), accepted without effect (where that is what NCCL
/// would do on the simulated system, e.g. NCCL_DEBUG), or refused as not modelled. An unknown
/// name, a bad value or a combination NCCL refuses is an engine::InputError naming the setting,
/// where it came from (spec file, `<cli>` or `<env>`) and the fix (exit 2).
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fabricsim::simccl {

/// NCCL algorithms, in NCCL's index order (src/include/plugin/nccl_tuner.h).
enum class Algo : std::uint8_t { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
inline constexpr int kNumAlgos = 7;
/// NCCL protocols, in NCCL's index order (src/include/device.h).
enum class Proto : std::uint8_t { kLL, kLL128, kSimple };
inline constexpr int kNumProtos = 3;
/// Collective functions NCCL_ALGO/NCCL_PROTO prefixes name (NCCL's ncclFunc order:
/// Broadcast, Reduce, AllGather, ReduceScatter, AllReduce).
enum class Func : std::uint8_t { kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce };
inline constexpr int kNumFuncs = 5;

/// NCCL's spelling of an algorithm ("Tree", "Ring", "CollNetDirect", ...).
const char* algo_name(Algo a);
/// NCCL's spelling of a protocol ("LL", "LL128", "Simple").
const char* proto_name(Proto p);
/// NCCL's spelling of a function ("Broadcast", ..., "AllReduce").
const char* func_name(Func f);

/// One raw setting and where it came from (for error messages).
struct RawSetting {
  std::string name;    ///< e.g. "NCCL_ALGO"
  std::string value;   ///< as written
  std::string origin;  ///< "spec.yaml: nccl.NCCL_ALGO" style file label, or "<env>"
};

/// Parsed NCCL settings. Defaults are NCCL 2.28's (source file per field).
struct NcclSettings {
  /// enabled[func][algo] after NCCL_ALGO (tuning.cc parseList); all true by default.
  std::array<std::array<bool, kNumAlgos>, kNumFuncs> algo_enabled{};
  /// enabled[func][proto] after NCCL_PROTO; all true by default.
  std::array<std::array<bool, kNumProtos>, kNumFuncs> proto_enabled{};
  bool algo_set = false;   ///< NCCL_ALGO given (no algorithm available is then an input error)
  bool proto_set = false;  ///< NCCL_PROTO given
  int min_nchannels = 0;   ///< NCCL_MIN_NCHANNELS (0 = unset)
  int max_nchannels = 0;   ///< NCCL_MAX_NCHANNELS (0 = unset)
  std::uint64_t buffsize_simple = 1ull << 22;  ///< NCCL_BUFFSIZE, bytes (src/init.cc, 4 MiB)
  std::uint64_t buffsize_ll = 512 * 1024;      ///< NCCL_LL_BUFFSIZE, bytes (8 lines x 512 thr x 8 steps x 16 B)
  std::uint64_t buffsize_ll128 = 4915200;      ///< NCCL_LL128_BUFFSIZE, bytes (120 x 640 x 8 x 8 B)
  int nvls_enable = 2;       ///< NCCL_NVLS_ENABLE 0/1/2 (2 = auto)
  int mnnvl_enable = 2;      ///< NCCL_MNNVL_ENABLE 0/1/2 (2 = auto; checked against the cluster by
                             ///< check_nccl_settings_for_cluster)
  int cumem_enable = -2;     ///< NCCL_CUMEM_ENABLE 0/1 (-2 = NCCL's auto, src/misc/cudawrap.cc)
  int collnet_enable = 0;    ///< NCCL_COLLNET_ENABLE
  int pat_enable = 2;        ///< NCCL_PAT_ENABLE
  int cross_nic = 2;         ///< NCCL_CROSS_NIC 0/1/2
  int pxn_disable = 0;       ///< NCCL_PXN_DISABLE
  int p2p_pxn_level = 2;     ///< NCCL_P2P_PXN_LEVEL 0/1/2
  int nchannels_per_net_peer = 0;  ///< NCCL_NCHANNELS_PER_NET_PEER (0 = auto)
  int ib_qps_per_connection = 1;   ///< NCCL_IB_QPS_PER_CONNECTION (1..128)
  int ib_split_data_on_qps = 0;    ///< NCCL_IB_SPLIT_DATA_ON_QPS
  double net_overhead_us = -1;     ///< NCCL_NET_OVERHEAD given in ns, stored in us (-1 = CPU default)
  std::uint64_t p2p_net_chunksize = 128 * 1024;  ///< NCCL_P2P_NET_CHUNKSIZE, bytes
  std::uint64_t nvls_chunksize = 128 * 1024;     ///< NCCL_NVLS_CHUNKSIZE, bytes (src/transport/nvls.cc)
  std::uint64_t p2p_nvl_chunksize = 512 * 1024;  ///< NCCL_P2P_NVL_CHUNKSIZE, bytes
  std::uint64_t p2p_pci_chunksize = 128 * 1024;  ///< NCCL_P2P_PCI_CHUNKSIZE, bytes
  std::uint64_t p2p_ll_threshold = 16384;        ///< NCCL_P2P_LL_THRESHOLD, bytes
  std::uint64_t chunk_size = 0;                  ///< NCCL_CHUNK_SIZE (0 = unset; p2p only)
  int min_p2p_nchannels = 1;   ///< NCCL_MIN_P2P_NCHANNELS
  int max_p2p_nchannels = 64;  ///< NCCL_MAX_P2P_NCHANNELS (MAXCHANNELS)
  std::string topo_file;         ///< NCCL_TOPO_FILE ("" = unset; simccl/nccl_topo.hpp reads it)
  std::string topo_file_origin;  ///< where NCCL_TOPO_FILE came from (spec file or "<env>")
  std::vector<std::string> warnings;  ///< notes on accepted settings, one line each
  std::vector<RawSetting> applied;    ///< effective settings, spec over environment
  /// Where NCCL_ALGO / NCCL_PROTO / NCCL_MNNVL_ENABLE / NCCL_CUMEM_ENABLE came from ("" = unset),
  /// for errors raised after parsing (no algorithm left for a call, a setting the cluster refutes).
  std::string algo_origin, proto_origin, mnnvl_origin, cumem_origin;

  NcclSettings();
};

/// Parses NCCL_ALGO syntax into enabled[func][algo] (NCCL tuning.cc parseList): entries separated
/// by ';', the first may omit the "func:" prefix and applies to every function; a list starting
/// with '^' disables the listed names and enables the rest; a func entry resets that row.
/// Names are case-insensitive. @throws engine::InputError(origin, field, ...) on a bad name.
std::array<std::array<bool, kNumAlgos>, kNumFuncs> parse_algo_list(const std::string& text,
                                                                   const std::string& origin,
                                                                   const std::string& field);
/// Same for NCCL_PROTO (LL, LL128, Simple).
std::array<std::array<bool, kNumProtos>, kNumFuncs> parse_proto_list(const std::string& text,
                                                                     const std::string& origin,
                                                                     const std::string& field);

/// Builds settings from the spec's `nccl:` pairs (name, value; `spec_file` labels errors) and
/// the environment (`environ`, only names starting with NCCL_), the spec winning.
/// @param use_env read the process environment too (false in tests for isolation)
/// @param origins where each spec pair came from (name -> spec file or "<cli>" for --set); names
///        not listed are labelled `spec_file`
/// @throws engine::InputError for a bad value (e.g. NCCL_ALGO=Foo, NCCL_BUFFSIZE=-1).
NcclSettings load_nccl_settings(const std::vector<std::pair<std::string, std::string>>& spec_pairs,
                                const std::string& spec_file, bool use_env,
                                const std::map<std::string, std::string>* origins = nullptr);

/// Checks the settings against the simulated cluster, as NCCL checks them at communicator init:
/// NCCL_MNNVL_ENABLE=1 on several hosts without an NVLink domain spanning them (NCCL src/init.cc:
/// "MNNVL is not supported on this system", ncclSystemError); NCCL_MNNVL_ENABLE=0 or
/// NCCL_CUMEM_ENABLE=0 where cluster.nvlink_domain spans hosts (NCCL would then join the hosts
/// through the NICs; MNNVL needs cuMem fabric handles) is refused as not modelled.
/// @param gpus_per_host GPUs per host; @param domain_gpus GPUs per NVLink domain; @param hosts hosts
/// @throws engine::InputError naming the setting, its origin and the fix.
void check_nccl_settings_for_cluster(const NcclSettings& s, std::uint32_t gpus_per_host, std::uint32_t domain_gpus,
                                     std::uint32_t hosts);

/// How simccl treats a known NCCL_* name.
enum class SettingKind : std::uint8_t {
  kModelled,  ///< takes effect on the simulated plan or fabric
  kNoEffect,  ///< accepted (value checked) without effect; the help text says why that is right
  kRefused,   ///< refused with exit 2: NCCL would behave differently and simccl does not model it
};

/// One known NCCL_* name: its meaning and how simccl treats it.
struct KnownSetting {
  const char* name;  ///< e.g. "NCCL_ALGO"
  const char* help;  ///< one line: meaning, and why it has no effect where it has none
  SettingKind kind;  ///< see SettingKind
};

/// Every NCCL_* name simccl knows, with its kind (for `fabricsim describe`, docs and tests).
const std::vector<KnownSetting>& known_nccl_setting_kinds();

/// Every NCCL_* name simccl knows, with a one-line meaning (for `fabricsim describe` and docs).
const std::vector<std::pair<const char*, const char*>>& known_nccl_settings();

}  // namespace fabricsim::simccl
