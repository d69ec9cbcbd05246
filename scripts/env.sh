# Sourced by the scripts: Open MPI as root on a small machine, shared memory and loopback only
# (build-notes: OMPI_ALLOW_RUN_AS_ROOT*, btl self,vader, oob on lo, oversubscribe).
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_rmaps_base_oversubscribe=1
