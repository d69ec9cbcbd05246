#pragma once
/// @file mpi_init.hpp
/// MPI start-up shared by the fabricsim binaries.
#include <mpi.h>

#include <cstdlib>

namespace fabricsim::engine {

/// True when a launcher started this process (Open MPI's mpiexec sets OMPI_COMM_WORLD_SIZE, any
/// PMIx launcher - mpiexec, srun --mpi=pmix - sets PMIX_RANK, PMI-1/2 launchers (MPICH's hydra,
/// srun --mpi=pmi2) set PMI_RANK).
inline bool launched_by_mpiexec() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

/// MPI_Init_thread(FUNNELED) (engine threads never call MPI). A process started without a
/// launcher is an MPI singleton (one process, MPI_COMM_WORLD of size 1), and Open MPI 4 then
/// spends most of a short run starting up things a single process never uses:
///  * `ess_singleton_isolated=1`: no supporting daemon (orted) is forked; only MPI_Comm_spawn
///    would need it, and fabricsim never spawns;
///  * `sharedfp=^sm`: MPI-IO shared file pointers without the shared-memory component, which
///    prints "mca_sharedfp_sm_component_file_query: Error, unable to open file for mmap" when
///    two fabricsim processes run at once (HDF5 output never uses shared file pointers);
///  * `pml=ob1`: the point-to-point layer over the self/shared-memory transports, instead of
///    probing the network ones (UCX, OFI, PSM: Debian's libpsm-infinipath calibrates a cycle
///    counter for ~0.25 s at load even without the hardware).
/// On the project machine (Open MPI 4.1.4) `fabricsim --version` takes 0.13-0.19 s instead of
/// 0.7-0.9 s. A value the user set in the environment is kept, and under a launcher nothing is
/// changed (mpiexec's choices stand). The first two are removed again after MPI_Init, so
/// processes this one starts (sweep children, mpiexec, srun) inherit the user's environment.
/// Harmless with another MPI (OMPI_MCA_* are then unused).
/// @returns the thread support level MPI provides.
inline int init_mpi(int* argc, char*** argv) {
  static constexpr const char* kSingleton[][2] = {{"OMPI_MCA_ess_singleton_isolated", "1"},
                                                  {"OMPI_MCA_pml", "ob1"},
                                                  {"OMPI_MCA_sharedfp", "^sm"}};
  bool ours[3] = {false, false, false};
  if (!launched_by_mpiexec()) {
    for (int i = 0; i < 3; ++i) {
      if (std::getenv(kSingleton[i][0]) == nullptr) ours[i] = setenv(kSingleton[i][0], kSingleton[i][1], 0) == 0;
    }
  }
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  // sharedfp stays set: MPI-IO opens that framework (and reads its parameters) at the first
  // MPI_File_open, after MPI_Init.
  for (int i = 0; i < 2; ++i) {
    if (ours[i]) unsetenv(kSingleton[i][0]);
  }
  return provided;
}

}  // namespace fabricsim::engine
