#!/bin/sh
# On the GPU machine: build fp4scope (library and the tools the MoE run
# needs) and run scripts/gpu/moe_capture.py, writing to $OUT (the device
# tool's output folder) or ./out-moe.
#
#   scripts/gpu/run_moe.sh [moe_capture.py options]
#
# The build: scripts/gpu/build.sh.
set -eu
cd "$(dirname "$0")/../.."
B=${FP4S_MOE_BUILD:-build-moe}
OUT=${OUT:-$(pwd)/out-moe}
TARGETS="tools/fp4-capture tools/fp4-decompose tools/fp4-channels tools/fp4-quant"
. scripts/gpu/build.sh
# shellcheck disable=SC2086
gpu_build "$B" "-Dtests=disabled -Dgsl=disabled" $TARGETS
export FP4SCOPE_LIB="$(pwd)/$B/libfp4scope.so"
export PATH="$(pwd)/$B/tools:$PATH"
mkdir -p "$OUT"
python3 -c 'import torch, numpy, h5py; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
set +e
python3 scripts/gpu/moe_capture.py --out "$OUT" "$@" > "$OUT/moe_capture.log" 2>&1
rc=$?
cat "$OUT/moe_capture.log"
exit $rc
