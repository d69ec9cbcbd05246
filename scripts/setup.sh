#!/usr/bin/env bash
# Installs every build/test dependency of fabricsim from Debian 12 packages.
# Idempotent and non-interactive: packages already present are skipped.
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config make
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  libprotobuf-dev protobuf-compiler libtrilinos-kokkos-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libpugixml-dev
  libmetis-dev libzstd-dev python3-h5py python3-numpy python3-matplotlib
  slurm-wlm munge   # slurm-wlm + munge: the real single-node Slurm of tests/slurm
  libns3-dev        # ns-3 3.37 for the cross-check in tests/ns3 (headers /usr/include/ns3,
                    # libns3-<module>.so.37); linked directly, so ns-3's CMake config and the
                    # libgsl-dev it names are not needed (docs/validation_ns3.md)
  libsimgrid-dev    # SimGrid 3.32 for the flow rung's max-min cross-check (tests/fidelity,
                    # docs/fidelity.md); found through its pkg-config file
  clang libclang-rt-14-dev llvm)  # clang 14 with libFuzzer and the ASan/UBSan runtimes for
                    # scripts/sanitize.sh and scripts/fuzz.sh (docs/testing.md); llvm: llvm-symbolizer
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} Debian packages already installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
  --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
