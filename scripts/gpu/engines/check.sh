#!/bin/sh
# The GPU checks of the engine profiles, one command on the GPU machine (after
# run.sh has produced the shipped table):
#
#   OUT=/some/dir sh scripts/gpu/engines/check.sh
#
# 1. builds fp4scope there (scripts/device/setup.sh: gcc 13, no CUDA kernels,
#    only the test programs needed) and approx_sample.cu;
# 2. regenerates a random sample of the instructions fp4scope emulates on the
#    GPU (rcp.approx.ftz over 17.8 M inputs, ex2.approx.ftz of integers,
#    mul.rn.ftz and div.rn.ftz near 2^-126) and compares it with the
#    emulation built from the shipped table (test_approx SAMPLES), then runs
#    test_approx, the conformance corpus and h200-corpus with that build;
# 3. runs run.sh again and compares all of its output with fp4scope
#    (pack_results.py, h200_compare), so the comparison also holds for the
#    machine's compiler;
# 4. leaves the logs and run.sh's summary in $OUT.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../../.." && pwd)
: "${OUT:?set OUT to the output folder}"
cd "$TOP"
W=$(mktemp -d)
B=build-engines
t0=$(date +%s)
FP4S_DEVICE_BUILD=$B FP4S_MESON_ARGS="-Dcuda=disabled -Dblas=disabled -Dgsl=disabled" \
    sh scripts/device/setup.sh tests/engines/test_approx tests/engines/h200_compare \
    tests/conformance/conformance >"$W/build.log" 2>&1 || { tail -30 "$W/build.log"; exit 5; }
. .device/env.sh
nvcc -O3 -arch=sm_90 -o "$W/approx_sample" "$HERE/approx_sample.cu"
echo "check.sh: built in $(( $(date +%s) - t0 )) s"
rc=0
"$W/approx_sample" "$W/samples.bin"
"$B/tests/engines/test_approx" "$W/samples.bin" || rc=1
FP4S_SRCDIR=$TOP "$B/tests/engines/test_approx" || rc=1
"$B/tests/conformance/conformance" --quiet tests/conformance/vectors.txt || rc=1
"$B/tests/engines/h200_compare" --quiet tests/engines/h200_corpus.h5 || rc=1
OUT="$W/run" sh -c 'mkdir -p "$OUT" && sh "$0" >"$OUT/log.txt" 2>&1' "$HERE/run.sh" || { tail -20 "$W/run/log.txt"; rc=1; }
( cd "$W/run" && tar -xzf engines.tar.gz ) && python3 "$HERE/pack_results.py" "$W/run" "$W/all.h5" &&
    "$B/tests/engines/h200_compare" --quiet "$W/all.h5" | tee "$OUT/h200_compare.txt" || rc=1
cp "$W/run/summary.txt" "$OUT/summary.txt" 2>/dev/null || true
cp "$W/run/log.txt" "$OUT/run_log.txt" 2>/dev/null || true
echo "check.sh: done in $(( $(date +%s) - t0 )) s, rc $rc"
exit $rc
