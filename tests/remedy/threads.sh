#!/bin/sh
# fp4-remedy's results are the same bytes for any thread count: the library's
# (FP4S_THREADS), the BLAS's (OPENBLAS_NUM_THREADS, which MPI's core binding
# changes) and under mpirun -n 2 with the ranks bound to cores. With the BLAS
# deciding its own threads, 520 of 24,322 JSON lines differed at np 2 and on
# one machine between thread counts. Checked on the default (fixed-order) GEMM
# path and on FP4S_GEMM=blas (fixed tiles, one single-threaded call each), and
# the fixed path on the reference kernels (FP4S_FORCE_REF=1: SSE2 against
# AVX2/AVX-512) gives the same bytes as on the best level.
# $FP4S_MPIRUN (optional): the mpirun of the mpi tests.
. "$FP4S_SRCDIR/tests/lib.sh"
count_failures
CAP=$SRC/datasets/synth-moe.h5
ARGS="-f nvfp4 --json --steps 0,3 --sites layers.0.* -r wfq,none,rac:0.25,of:0.5"

for path in fixed blas; do
    # the reference: what a plain run gives (every thread count left to its default)
    unset OPENBLAS_NUM_THREADS FP4S_THREADS
    FP4S_GEMM=$path fp4-remedy $ARGS "$CAP" > ref.json 2> err.txt ||
        { cat err.txt >&2; fail "$path: the plain run failed"; continue; }
    for t in "1 1" "2 -" "3 -" "1 2" "2 3"; do
        ft=${t% *} bt=${t#* }
        if [ "$bt" = - ]; then
            FP4S_GEMM=$path FP4S_THREADS=$ft fp4-remedy $ARGS "$CAP" > got.json 2> err.txt || fail "$path $t"
        else
            FP4S_GEMM=$path FP4S_THREADS=$ft OPENBLAS_NUM_THREADS=$bt fp4-remedy $ARGS "$CAP" > got.json \
                2> err.txt || fail "$path $t"
        fi
        cmp -s ref.json got.json ||
            fail "$path: FP4S_THREADS=$ft OPENBLAS_NUM_THREADS=$bt: $(diff ref.json got.json | grep -c '^>') lines differ"
    done
    if [ "$path" = fixed ]; then
        FP4S_FORCE_REF=1 FP4S_THREADS=2 fp4-remedy $ARGS "$CAP" > got.json 2> err.txt || fail "force ref"
        cmp -s ref.json got.json || fail "fixed: the reference kernels give other bytes"
    fi
    # mpirun -n 2, each rank bound to a core, the BLAS left to pick its threads
    if [ -n "${FP4S_MPIRUN:-}" ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
        export OMPI_MCA_btl_vader_single_copy_mechanism=none
        # the sanitizer build: Open MPI's own allocations are not this
        # project's leaks (as in tests/mpi/common.sh: its suppressions, its
        # components kept loaded, malloc stacks unwound in full)
        export OMPI_MCA_mca_base_component_disable_dlclose=1
        export LSAN_OPTIONS="suppressions=$FP4S_SRCDIR/tests/mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
        export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
        if FP4S_GEMM=$path "$FP4S_MPIRUN" --oversubscribe --bind-to core -n 2 fp4-remedy $ARGS "$CAP" \
            > got.json 2> err.txt; then
            cmp -s ref.json got.json ||
                fail "$path: mpirun -n 2: $(diff ref.json got.json | grep -c '^>') lines differ"
        else
            # a machine that cannot bind two ranks to cores: unbound
            FP4S_GEMM=$path "$FP4S_MPIRUN" --oversubscribe --bind-to none -n 2 fp4-remedy $ARGS "$CAP" \
                > got.json 2> err.txt || { cat err.txt >&2; fail "$path: mpirun -n 2 failed"; }
            cmp -s ref.json got.json || fail "$path: mpirun -n 2 (unbound): output differs"
        fi
    fi
    echo "ok: $path"
done
failures_end
