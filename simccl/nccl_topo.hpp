#pragma once
/// @file nccl_topo.hpp
/// NCCL topology XML (the NCCL_TOPO_FILE format, ../shared/reference/nccl.md §4; NCCL
/// src/graph/xml.cc, src/graph/topo.cc) read into what simccl's cost model needs about one node:
/// its GPUs, NVLink presence and bandwidth, NICs and their speed, and which GPU each NIC is
/// closest to in the PCI tree (rails). Full dumps (`gpu`, `nvlink`, `nic`/`net` elements) and
/// skeletons (PCI functions only: GPUs by class 0x03xxxx, NICs by class 0x02xxxx, as the Azure
/// files ship) are both accepted.
#include <string>
#include <vector>

namespace fabricsim::simccl {

/// One GPU of the node.
struct TopoGpu {
  std::string busid;    ///< PCI bus id of its PCI function
  int dev = -1;         ///< CUDA index (`gpu dev`; skeletons: order of appearance)
  int sm = 0;           ///< compute capability x10 (`gpu sm`; 0 = not in the file)
  int nvlinks = 0;      ///< NVLink count to NVSwitches or GPUs (sum of `nvlink count`)
  int nic = -1;         ///< index in NcclTopo::nics of the closest NIC (-1 = none)
  int cpu = 0;          ///< index of its `cpu` (NUMA node) element
};

/// One NIC port (`net` element; skeletons: one per NIC PCI function).
struct TopoNic {
  std::string name;     ///< `net name` (skeletons: the bus id)
  std::string busid;    ///< PCI bus id of the NIC function
  double speed_GBps = 0;  ///< `net speed` Mb/s / 8000 (NCCL's bw); 0 = not in the file
  int gpu = -1;         ///< index in NcclTopo::gpus of the closest GPU (-1 = none)
  int cpu = 0;
};

/// The node as the file describes it.
struct NcclTopo {
  std::string path;                 ///< file read ("" for the fallback)
  bool fallback = false;            ///< NCCL's detected flat PCIe topology (no file)
  bool skeleton = false;            ///< no `gpu` elements: GPUs found by PCI class
  std::vector<TopoGpu> gpus;
  std::vector<TopoNic> nics;
  int cpus = 0;                     ///< `cpu` (NUMA) elements
  /// True when every GPU has NVLinks (full dumps only; skeletons do not say).
  bool nvlink = false;
  /// Per-GPU NVLink bandwidth GB/s, the smallest over the GPUs: links x NCCL's per-link bw for
  /// the GPU's sm (src/graph/topo.h); 0 without NVLink or when the file does not say.
  double nvlink_GBps = 0;
};

/// Reads an NCCL topology XML.
/// @param default_sm compute capability for GPUs whose `gpu` element lacks `sm` (skeletons)
/// @throws engine::InputError naming `path` (field NCCL_TOPO_FILE) when the file is missing or
/// unreadable, is not XML, has no `system` root, describes no GPU, or gives a GPU NVLink counts
/// that are not 1 or more per `nvlink` element and at most 64 in all.
NcclTopo load_nccl_topo(const std::string& path, int default_sm);

/// As load_nccl_topo, parsing the XML `text` (the file's content; `path` names it in messages).
/// @throws engine::InputError as load_nccl_topo, except for an unreadable file.
NcclTopo parse_nccl_topo(const std::string& text, const std::string& path, int default_sm);

/// NCCL's fallback when it has no usable topology: `gpus` GPUs and `nics` NICs on one flat PCIe
/// tree (one CPU), no NVLink, so intra-node traffic is bounded by PCIe (the cost model's
/// pci_GBps); NIC i is closest to GPU i x gpus / nics.
NcclTopo fallback_nccl_topo(int gpus, int nics, double nic_GBps);

/// One line per GPU and NIC (for `fabricsim plan` and tests): "GPU 0 sm 90 nvlinks 18 -> NIC 0 mlx5_0".
std::string describe(const NcclTopo& t);

}  // namespace fabricsim::simccl
