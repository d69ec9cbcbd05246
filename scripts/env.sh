# Sourced by the scripts: Open MPI as root on a small machine, shared memory and loopback only
# (build-notes: OMPI_ALLOW_RUN_AS_ROOT*, btl self,vader, oob on lo, oversubscribe).
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_rmaps_base_oversubscribe=1
# Window-exchange messages are ~10-200 KB per process pair and window: copying them through the
# shared-memory segment beats CMA single-copy (a process_vm_readv per message) here. PHOLD
# (bench_phold defaults) 1 -> 2 processes on the quiet 2-core machine, five alternating runs:
# efficiency 0.852-0.864 with CMA, 0.891-0.916 without (docs/benchmarks.md, session 10).
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
