#!/bin/sh
# On the GPU machine: the Python adapter's functional capture on a CUDA MoE,
# bit-exact against copies taken before the hooks
# (scripts/device/moe_capture_check.py: transformers-style fused experts run
# as a loop of F.linear on W[e], as capacity-padded torch.bmm packs and, where
# PyTorch has it, as torch._grouped_mm; a shared expert of nn.Linear).
#
#   scripts/device/moe_capture_check.sh [moe_capture_check.py options]
#
# Builds libfp4scope.so and fp4-capture only (CPU; -Dcuda=disabled: the
# capture needs no kernel) in build-capcheck with scripts/gpu/build.sh, then
# runs the check with the machine's python3 (PyTorch with CUDA, numpy, h5py).
# Writes its log and the captures to $OUT (default ./out-capcheck). Exit 1 when
# a capture differs from the copies. About 1-2 minutes on a 16-core machine.
set -eu
cd "$(dirname "$0")/../.."
B=${FP4S_CAPCHECK_BUILD:-build-capcheck}
OUT=${OUT:-$(pwd)/out-capcheck}
. scripts/gpu/build.sh
start=$(date +%s)
# the library's ninja target is its versioned file (libfp4scope.so is a link)
gpu_build "$B" "-Dtests=disabled -Dgsl=disabled -Dcuda=disabled -Dmpi=disabled" \
    "libfp4scope.so.$(sh scripts/version.sh)" tools/fp4-capture
echo "build: $(( $(date +%s) - start )) s"
export FP4SCOPE_LIB="$(pwd)/$B/libfp4scope.so"
export PATH="$(pwd)/$B/tools:$PATH"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
set +e
python3 scripts/device/moe_capture_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/moe_capture_check.log"
rc=$(tail -1 "$OUT/moe_capture_check.log" | grep -q ': ok$' && echo 0 || echo 1)
rm -f "$OUT"/capture-*.h5
echo "total: $(( $(date +%s) - start )) s"
exit "$rc"
