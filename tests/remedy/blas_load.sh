#!/bin/sh
# The BLAS is loaded when a GEMM on the BLAS path runs (FP4S_GEMM=blas or
# --gemm blas), not with the library (OpenBLAS starts a thread per CPU when
# loaded, each spinning for a while): a tool that runs no GEMM never maps it,
# nor does one on the default fixed-order path; a remedy's GEMM on the BLAS
# path opens it and works, and a BLAS that cannot be loaded (FP4S_BLAS) then
# stops fp4-remedy, fp4-compare and fp4-rl with exit status 2, the file
# named, nothing written. What is loaded is read from the dynamic loader's
# LD_DEBUG=files trace (glibc; skipped without one).
. "$FP4S_SRCDIR/tests/lib.sh"
CAP=$SRC/datasets/synth-tiny.h5

# the BLAS among the files the loader opened (not GSL's own cblas)
blas_files() { grep -o 'file=[^ ]*blas[^ ]*' "$1" | grep -v gslcblas || true; }

LD_DEBUG=files fp4-quant -f mxfp4 "$SRC/datasets/weight-small.npy" > out.txt 2> ld.txt ||
    { cat ld.txt >&2; fail "fp4-quant failed"; }
if ! grep -q 'file=[^ ]*libfp4scope' ld.txt; then
    echo "SKIP: the dynamic loader gives no LD_DEBUG=files trace" >&2
    exit 77
fi
[ -z "$(blas_files ld.txt)" ] || fail "fp4-quant loaded the BLAS without a GEMM: $(blas_files ld.txt)"
LD_DEBUG=files fp4-decompose -f nvfp4 "$SRC/datasets/weight-small.npy" > out.txt 2> ld.txt || fail "fp4-decompose failed"
[ -z "$(blas_files ld.txt)" ] || fail "fp4-decompose loaded the BLAS: $(blas_files ld.txt)"
# fp4-remedy before its first GEMM: --help
LD_DEBUG=files fp4-remedy --help > out.txt 2> ld.txt || fail "fp4-remedy --help failed"
[ -z "$(blas_files ld.txt)" ] || fail "fp4-remedy --help loaded the BLAS: $(blas_files ld.txt)"

# the default GEMM path (fixed order) needs no BLAS
LD_DEBUG=files fp4-remedy -f nvfp4 --remedy none,rac:0.25 --json "$CAP" > fixed.json 2> ld.txt ||
    { tail -5 ld.txt >&2; fail "fp4-remedy failed on the fixed path"; }
[ -z "$(blas_files ld.txt)" ] || fail "fp4-remedy loaded the BLAS on the fixed path: $(blas_files ld.txt)"

# on the BLAS path its GEMMs open it (dlopen), and give the same report with or without the trace
FP4S_GEMM=blas fp4-remedy -f nvfp4 --remedy none,rac:0.25 --json "$CAP" > plain.json || fail "fp4-remedy failed"
FP4S_GEMM=blas LD_DEBUG=files fp4-remedy -f nvfp4 --remedy none,rac:0.25 --json "$CAP" > traced.json 2> ld.txt ||
    { tail -5 ld.txt >&2; fail "fp4-remedy failed with the trace"; }
grep 'file=[^ ]*blas' ld.txt | grep -v gslcblas > blas.txt || true
grep -q 'dynamically loaded by' blas.txt || fail "fp4-remedy: the BLAS not opened at run time: $(cat blas.txt)"
! grep -q 'needed by' blas.txt || fail "fp4-remedy: the BLAS linked: $(cat blas.txt)"
cmp -s plain.json traced.json || fail "fp4-remedy: another report with LD_DEBUG"
fp4-remedy --gemm blas -f nvfp4 --remedy none,rac:0.25 --json "$CAP" > opt.json || fail "fp4-remedy --gemm blas failed"
cmp -s plain.json opt.json || fail "fp4-remedy: --gemm blas and FP4S_GEMM=blas differ"

# a BLAS that cannot be loaded: on the BLAS path exit 2, the file and the problem named, no output
bad=$T/nowhere/libnoblas.so.0
expect 2 "the BLAS $bad (FP4S_BLAS) could not be loaded" env FP4S_BLAS="$bad" FP4S_GEMM=blas \
    fp4-remedy -f nvfp4 --remedy none -o rep.h5 "$CAP"
[ ! -e rep.h5 ] || fail "fp4-remedy wrote rep.h5 without a BLAS"
expect 2 "could not be loaded" env FP4S_BLAS="$bad" FP4S_GEMM=blas fp4-compare -o cmp.h5 "$CAP"
[ ! -e cmp.h5 ] || fail "fp4-compare wrote cmp.h5 without a BLAS"
expect 2 "the BLAS $bad (FP4S_BLAS) could not be loaded" env FP4S_BLAS="$bad" \
    fp4-rl --gemm blas --width 32 --prompts 4 --steps 1 -o rl.h5
[ ! -e rl.h5 ] || fail "fp4-rl wrote rl.h5 without a BLAS"
# and on the fixed path it is never needed
expect 0 "" env FP4S_BLAS="$bad" fp4-remedy -f nvfp4 --remedy none -o rep.h5 "$CAP"
[ -e rep.h5 ] || fail "fp4-remedy on the fixed path wrote no report"
# an FP4S_GEMM that names no path: exit 2, the value named
expect 2 "FP4S_GEMM.*mkl" env FP4S_GEMM=mkl fp4-remedy -f nvfp4 --remedy none "$CAP"
# a library that loads but is no BLAS
libm=$(grep -o 'file=[^ ]*libm\.so[^ ]*' ld.txt | head -1 | cut -d= -f2)
if [ -n "$libm" ]; then
    expect 2 "has no cblas_sgemm" env FP4S_BLAS="$libm" FP4S_GEMM=blas fp4-remedy -f nvfp4 --remedy none "$CAP"
fi
echo "ok"
