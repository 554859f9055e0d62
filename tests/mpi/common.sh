# Shared by the MPI tool tests: mpirun for P ranks on this machine, the
# one-process reference, and exact comparisons. Sourced.
set -eu
: "${FP4S_MPIRUN:=mpirun}"
export FP4S_THREADS=1 OPENBLAS_NUM_THREADS=1
# CI runs as root; more ranks than cores; no binding (the ranks share the cores);
# no single-copy transport (containers often forbid the ptrace it needs)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# the sanitizer build: Open MPI's own allocations are not this project's leaks
# (lsan.supp); its components stay loaded and stacks are unwound in full
# (through libraries without frame pointers: ranks only, mpi below) so that
# their frames have names
export OMPI_MCA_mca_base_component_disable_dlclose=1
if [ -n "${FP4S_SRCDIR:-}" ] && [ -f "$FP4S_SRCDIR/tests/mpi/lsan.supp" ]; then
    export LSAN_OPTIONS="suppressions=$FP4S_SRCDIR/tests/mpi/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
W=$(mktemp -d /tmp/fp4s_mpi_XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
fails=0
# the rank counts of a case: its own short list (PS, else 3) in the default
# suite; P = 1, 2, 3 and 4 for every case with FP4S_MPI_FULL=1 (.ci/run's mpi phase)
ranks() { if [ "${FP4S_MPI_FULL:-0}" = 1 ]; then echo "1 2 3 4"; else echo "${PS:-3}"; fi; }
mpi() {
    p=$1
    shift
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
        "$FP4S_MPIRUN" --oversubscribe -n "$p" "$@"
}
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# an HDF5 file's content with every float exact (%a), without its name
h5text() { h5dump -m %a "$1" | tail -n +2; }
