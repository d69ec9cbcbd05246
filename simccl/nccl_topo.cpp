#include "simccl/nccl_topo.hpp"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <pugixml.hpp>

#include "engine/errors.hpp"
#include "simccl/nccl_tuner.hpp"

namespace fabricsim::simccl {

using engine::InputError;

/// Most NVLinks one GPU may have in a topology file (the sum of its `nvlink count`s): NVLink 4
/// and 5 GPUs have 18 (H100, B200), so 64 leaves room and keeps every sum in int.
constexpr long long kMaxNvlinks = 64;

namespace {

// PCI class as a number ("0x030200" -> 0x030200); -1 when absent.
long pci_class(const pugi::xml_node& pci) {
  const char* c = pci.attribute("class").as_string(nullptr);
  return c == nullptr ? -1 : std::strtol(c, nullptr, 16);
}

// Depth of the deepest common ancestor of two nodes (root = 0).
int common_depth(const std::vector<pugi::xml_node>& a, const std::vector<pugi::xml_node>& b) {
  int d = 0;
  while (static_cast<std::size_t>(d) < a.size() && static_cast<std::size_t>(d) < b.size() && a[d] == b[d]) ++d;
  return d;
}

std::vector<pugi::xml_node> chain(pugi::xml_node n) {
  std::vector<pugi::xml_node> c;
  for (; n; n = n.parent()) c.push_back(n);
  std::reverse(c.begin(), c.end());
  return c;
}

// Pairs every GPU with its closest NIC and every NIC with its closest GPU (deepest common
// ancestor in the PCI tree: same switch before same CPU before another CPU). A GPU prefers a NIC
// no other GPU has taken at the same distance, so one-NIC-per-GPU nodes get distinct rails.
void pair_up(NcclTopo& t, const std::vector<std::vector<pugi::xml_node>>& gpu_chain,
             const std::vector<std::vector<pugi::xml_node>>& nic_chain) {
  std::vector<int> taken(t.nics.size(), 0);
  for (std::size_t g = 0; g < t.gpus.size(); ++g) {
    int best = -1, best_depth = -1;
    for (std::size_t n = 0; n < t.nics.size(); ++n) {
      const int d = common_depth(gpu_chain[g], nic_chain[n]);
      if (d > best_depth || (d == best_depth && taken[n] < taken[static_cast<std::size_t>(best)])) {
        best = static_cast<int>(n);
        best_depth = d;
      }
    }
    t.gpus[g].nic = best;
    if (best >= 0) ++taken[static_cast<std::size_t>(best)];
  }
  for (std::size_t n = 0; n < t.nics.size(); ++n) {
    int best = -1, best_depth = -1;
    for (std::size_t g = 0; g < t.gpus.size(); ++g) {
      const int d = common_depth(gpu_chain[g], nic_chain[n]);
      if (d > best_depth) {
        best = static_cast<int>(g);
        best_depth = d;
      }
    }
    t.nics[n].gpu = best;
  }
}

}  // namespace

namespace {

/// The common reader: parses `*text` when not null, else reads `path`.
NcclTopo read_nccl_topo(const std::string& path, int default_sm, const std::string* text) {
  pugi::xml_document doc;
  const pugi::xml_parse_result r =
      text != nullptr ? doc.load_buffer(text->data(), text->size()) : doc.load_file(path.c_str());
  if (!r) {
    if (r.status == pugi::status_file_not_found || r.status == pugi::status_io_error) {
      throw InputError(path, "NCCL_TOPO_FILE", "cannot read the NCCL topology file",
                       "fix the path, or set simccl.topo_fallback: true for NCCL's flat PCIe fallback");
    }
    throw InputError(path, "NCCL_TOPO_FILE", std::string("not valid XML at offset ") + std::to_string(r.offset) + ": " +
                                                 r.description(),
                     "give an NCCL topology XML (NCCL_TOPO_DUMP_FILE output)");
  }
  pugi::xml_node sys = doc.child("system");
  if (!sys) throw InputError(path, "NCCL_TOPO_FILE", "no <system> root element", "give an NCCL topology XML");
  NcclTopo t;
  t.path = path;
  std::vector<std::vector<pugi::xml_node>> gpu_chain, nic_chain;
  int cpu_index = -1;
  // Depth-first in document order, so GPUs and NICs keep the file's order.
  struct Walker : pugi::xml_tree_walker {
    NcclTopo* t;
    std::vector<std::vector<pugi::xml_node>>* gc;
    std::vector<std::vector<pugi::xml_node>>* nc;
    int* cpu;
    int sm;
    std::string bad, bad_value;  ///< the field and value of the first bad attribute ("" = none)
    bool for_each(pugi::xml_node& n) override {
      const std::string name = n.name();
      if (name == "cpu") {
        ++*cpu;
        ++t->cpus;
      } else if (name == "gpu") {
        TopoGpu g;
        g.busid = n.parent().attribute("busid").as_string();
        g.dev = n.attribute("dev").as_int(static_cast<int>(t->gpus.size()));
        g.sm = n.attribute("sm").as_int(sm);
        for (const pugi::xml_node l : n.children("nvlink")) {
          // Counts are small (NVLink 4: 18 links per GPU); bounding each and the sum keeps the
          // sum in int. The walker cannot throw through pugixml: it records the error and stops.
          const long long count = l.attribute("count").as_llong(1);
          if (count < 1 || count > kMaxNvlinks || g.nvlinks + count > kMaxNvlinks) {
            bad = "gpu " + std::to_string(t->gpus.size()) + " nvlink count";
            bad_value = l.attribute("count").as_string();
            return false;
          }
          g.nvlinks += static_cast<int>(count);
        }
        g.cpu = std::max(0, *cpu);
        t->gpus.push_back(g);
        gc->push_back(chain(n.parent()));
      } else if (name == "net") {
        TopoNic nic;
        nic.name = n.attribute("name").as_string();
        const pugi::xml_node pci = n.parent().parent();
        nic.busid = std::string(pci.name()) == "pci" ? pci.attribute("busid").as_string() : "";
        nic.speed_GBps = n.attribute("speed").as_double(0) / 8000.0;  // Mb/s -> GB/s as NCCL does
        nic.cpu = std::max(0, *cpu);
        t->nics.push_back(nic);
        nc->push_back(chain(std::string(pci.name()) == "pci" ? pci : n.parent()));
      }
      return true;
    }
  } w;
  w.t = &t;
  w.gc = &gpu_chain;
  w.nc = &nic_chain;
  w.cpu = &cpu_index;
  w.sm = default_sm;
  sys.traverse(w);
  if (!w.bad.empty()) {
    throw InputError(path, w.bad, "'" + w.bad_value + "' is not 1.." + std::to_string(kMaxNvlinks) + " in all",
                     "give the NVLink counts NCCL dumped (NVLink 4: 18 links per GPU)");
  }
  if (t.gpus.empty()) {
    // Skeleton: PCI functions only (NCCL fuses detected devices into them by bus id).
    t.skeleton = true;
    struct Skel : pugi::xml_tree_walker {
      NcclTopo* t;
      std::vector<std::vector<pugi::xml_node>>* gc;
      std::vector<std::vector<pugi::xml_node>>* nc;
      int* cpu;
      int sm;
      bool for_each(pugi::xml_node& n) override {
        const std::string name = n.name();
        if (name == "cpu") ++*cpu;
        if (name != "pci") return true;
        const long cls = pci_class(n);
        if ((cls >> 16) == 0x03) {
          TopoGpu g;
          g.busid = n.attribute("busid").as_string();
          g.dev = static_cast<int>(t->gpus.size());
          g.sm = sm;
          g.cpu = std::max(0, *cpu);
          t->gpus.push_back(g);
          gc->push_back(chain(n));
        } else if ((cls >> 16) == 0x02 && !n.child("nic")) {
          TopoNic nic;
          nic.busid = nic.name = n.attribute("busid").as_string();
          nic.cpu = std::max(0, *cpu);
          t->nics.push_back(nic);
          nc->push_back(chain(n));
        }
        return true;
      }
    } s;
    int cpu2 = -1;
    s.t = &t;
    s.gc = &gpu_chain;
    s.nc = &nic_chain;
    s.cpu = &cpu2;
    s.sm = default_sm;
    sys.traverse(s);
  }
  if (t.gpus.empty()) {
    throw InputError(path, "NCCL_TOPO_FILE", "describes no GPU (no <gpu> element and no PCI function of class 0x03xxxx)",
                     "give the topology of a node with GPUs (NCCL_TOPO_DUMP_FILE of a GPU node)");
  }
  pair_up(t, gpu_chain, nic_chain);
  if (!t.skeleton) {
    t.nvlink = std::all_of(t.gpus.begin(), t.gpus.end(), [](const TopoGpu& g) { return g.nvlinks > 0; });
    if (t.nvlink) {
      t.nvlink_GBps = 1e300;
      for (const auto& g : t.gpus) t.nvlink_GBps = std::min(t.nvlink_GBps, g.nvlinks * nvlink_per_link_GBps(g.sm));
    }
  }
  return t;
}

}  // namespace

NcclTopo load_nccl_topo(const std::string& path, int default_sm) {
  return read_nccl_topo(path, default_sm, nullptr);
}

NcclTopo parse_nccl_topo(const std::string& text, const std::string& path, int default_sm) {
  return read_nccl_topo(path, default_sm, &text);
}

NcclTopo fallback_nccl_topo(int gpus, int nics, double nic_GBps) {
  NcclTopo t;
  t.fallback = true;
  t.cpus = 1;
  for (int g = 0; g < gpus; ++g) {
    TopoGpu gpu;
    gpu.dev = g;
    gpu.nic = nics > 0 ? g * nics / std::max(1, gpus) : -1;
    t.gpus.push_back(gpu);
  }
  for (int n = 0; n < nics; ++n) {
    TopoNic nic;
    nic.name = "fallback" + std::to_string(n);
    nic.speed_GBps = nic_GBps;
    nic.gpu = n * gpus / std::max(1, nics);
    t.nics.push_back(nic);
  }
  return t;
}

std::string describe(const NcclTopo& t) {
  std::string out = fmt::format("{}: {} GPUs, {} NICs, {} CPUs, NVLink {}\n",
                                t.fallback ? std::string("fallback (flat PCIe)") : t.path, t.gpus.size(), t.nics.size(),
                                t.cpus, t.nvlink ? fmt::format("{:.1f} GB/s per GPU", t.nvlink_GBps)
                                                 : (t.skeleton ? std::string("not described") : std::string("none")));
  for (const auto& g : t.gpus) {
    out += fmt::format("  GPU {} sm {} nvlinks {} -> NIC {}\n", g.dev, g.sm, g.nvlinks,
                       g.nic >= 0 ? t.nics[static_cast<std::size_t>(g.nic)].name : std::string("none"));
  }
  for (const auto& n : t.nics) {
    out += fmt::format("  NIC {} {:.1f} GB/s closest GPU {}\n", n.name, n.speed_GBps,
                       n.gpu >= 0 ? t.gpus[static_cast<std::size_t>(n.gpu)].dev : -1);
  }
  return out;
}

}  // namespace fabricsim::simccl
