#!/bin/sh
# The one CPU switch reaches every SIMD path of the tools: run the quantizer,
# decomposition, channel and mismatch tools (tool_outputs.sh) normally and
# with FP4S_FORCE_REF=1 (the portable C everywhere), and compare all they
# write (compare_outputs.sh --levels: byte for byte, HDF5 by h5diff). With
# the reference forced, fp4-quant --json must also name the level "ref".
# Then fp4-quant's runs over the input that is split over threads
# (tool_outputs.sh --threads-cases) on 1, 2 and 7 threads, the 2-thread run
# with the reference forced: the same bytes again, error statistics included.
set -eu
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
K=$SRC/tests/kernels
if ! command -v h5diff >/dev/null 2>&1 && [ -z "${FP4S_PYTHON:-}" ]; then
    echo "SKIP: neither h5diff (Debian: hdf5-tools) nor a python3 with h5py (-Dpython) to compare HDF5 outputs"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_forceref.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset FP4S_FORCE_REF
sh "$K/tool_outputs.sh" "$T/simd"
FP4S_FORCE_REF=1 sh "$K/tool_outputs.sh" "$T/ref"
FP4S_THREADS=1 sh "$K/tool_outputs.sh" --threads-cases "$T/q1"
FP4S_THREADS=2 FP4S_FORCE_REF=1 sh "$K/tool_outputs.sh" --threads-cases "$T/q2ref"
FP4S_THREADS=7 sh "$K/tool_outputs.sh" --threads-cases "$T/q7"
for d in simd ref q1 q2ref q7; do
    if grep -l -v '^0$' "$T/$d"/*.rc >/dev/null 2>&1; then
        for f in $(grep -l -v '^0$' "$T/$d"/*.rc); do
            echo "FAIL: $d run: ${f##*/} exited $(cat "$f"): $(head -c 300 "${f%.rc}.err")" >&2
        done
        exit 1
    fi
done
nq=$(grep -l '"kernels":' "$T/ref"/q*.json | wc -l)
nr=$(grep -l '"kernels": "ref"' "$T/ref"/q*.json | wc -l)
[ "$nq" -gt 40 ] && [ "$nr" = "$nq" ] ||
    { echo "FAIL: with FP4S_FORCE_REF=1, $nr of $nq fp4-quant reports name the reference kernels" >&2; exit 1; }
echo "simd run: $(sed -n 's/^ *"kernels": "\(.*\)",*$/\1/p' "$T/simd/q1-mxfp4-ocp.json" | head -1) kernels"
bad=0
sh "$K/compare_outputs.sh" --levels "$T/simd" "$T/ref" || bad=1
echo "fp4-quant on 1 thread against 7, and against 2 with the reference forced:"
sh "$K/compare_outputs.sh" --threads "$T/q1" "$T/q7" || bad=1
sh "$K/compare_outputs.sh" --levels --threads "$T/q1" "$T/q2ref" || bad=1
exit $bad
