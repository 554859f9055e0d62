#!/bin/sh
# The engines' measurements on the GPU machine (an H200, sm_90), one command:
#
#   OUT=/some/dir sh scripts/gpu/engines/run.sh
#
# 1. builds approx_scan.cu and runs it: every float32 input through
#    rcp.approx[.ftz].f32, ex2.approx[.ftz].f32 and lg2.approx[.ftz].f32, and
#    the conversions fp4scope takes as exact (summary on stdout and in
#    $OUT/summary.txt; the rcp tables rcp_approx_ftz.dev / rcp_approx.dev);
# 2. builds engine_arith.cu twice (-DFAST -use_fast_math: FlashInfer's
#    recipes; plain: vLLM's), writes the conformance corpus, extracts every
#    BF16 tensor of datasets/moe-h200.h5 and datasets/synth-moe.h5
#    (extract.py, h5py), and quantizes all of them with every recipe;
# 3. if FP4S_ENGINES_EXT names a folder holding run_ext.sh, runs it with the
#    input and output folders (an engine's own kernel built outside the
#    repository; nothing in the repository builds engine code);
# 4. packs inputs, outputs and tables into $OUT/engines.tar.gz.
# Then, on the development machine: make_table.py writes the rcp table from
# scan/, pack_results.py the outputs into one HDF5 file, and
# tests/engines/h200_compare compares it with fp4scope's profiles (see
# RESULTS.md here).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../../.." && pwd)
: "${OUT:?set OUT to the output folder}"
W=$(mktemp -d)
mkdir -p "$W/in" "$W/out" "$W/scan"
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null 2>&1 || NVCC=/usr/local/cuda/bin/nvcc
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true
"$NVCC" --version | tail -1
t0=$(date +%s)
"$NVCC" -O3 -arch=sm_90 -o "$W/approx_scan" "$HERE/approx_scan.cu" &
"$NVCC" -O3 -arch=sm_90 -DFAST -use_fast_math -o "$W/ea_fast" "$HERE/engine_arith.cu" &
"$NVCC" -O3 -arch=sm_90 -o "$W/ea_ieee" "$HERE/engine_arith.cu" &
wait
for b in approx_scan ea_fast ea_ieee; do
    [ -x "$W/$b" ] || { echo "run.sh: $b did not build" >&2; exit 5; }
done
echo "run.sh: built in $(( $(date +%s) - t0 )) s"
"$W/ea_ieee" --corpus "$W/in"
python3 "$HERE/extract.py" "$W/in" "$TOP/datasets/moe-h200.h5" "$TOP/datasets/synth-moe.h5"
"$W/ea_fast" "$W/in" "$W/out"
"$W/ea_ieee" "$W/in" "$W/out"
if [ -n "${FP4S_ENGINES_EXT:-}" ] && [ -f "$FP4S_ENGINES_EXT/run_ext.sh" ]; then
    sh "$FP4S_ENGINES_EXT/run_ext.sh" "$W/in" "$W/out" || echo "run.sh: run_ext.sh failed ($?)"
fi
t1=$(date +%s)
"$W/approx_scan" "$W/scan"
echo "run.sh: scan took $(( $(date +%s) - t1 )) s"
cp "$W/scan/summary.txt" "$OUT/summary.txt"
tar -czf "$OUT/engines.tar.gz" -C "$W" in out scan
ls -la "$OUT"
