#!/bin/bash
# One call on the GPU machine: setup + build (scripts/device/setup.sh), the
# CUDA-vs-reference test (tests/cuda, also the big/slow variant and a
# compute-sanitizer memcheck pass) and the benchmark, logs to $OUT.
#
#   scripts/device/cuda_check.sh [--no-bench] [--no-sanitizer] [--profile]
#
# --profile adds an Nsight Compute (ncu) speed-of-light pass over the kernels
# of a small benchmark run (profile.log; clocks left alone).
# Run through the device tool with carry: [".device"]. Prints a short summary
# last. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/out}
mkdir -p "$OUT"
B=${FP4S_DEVICE_BUILD:-build-device}
export FP4S_DEVICE_BUILD=$B
bench=1 sanit=1 prof=0
for a in "$@"; do
    case $a in
    --no-bench) bench=0 ;;
    --no-sanitizer) sanit=0 ;;
    --profile) prof=1 ;;
    *) echo "usage: cuda_check.sh [--no-bench] [--no-sanitizer] [--profile]" >&2; exit 2 ;;
    esac
done
summary=()
step() { # step NAME LOGFILE CMD...: run, tee the log, record the status
    local name=$1 log=$2
    shift 2
    local t0=$SECONDS
    "$@" > >(tee "$OUT/$log") 2>&1
    local rc=$?
    sleep 0.2
    summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}

{ nvidia-smi; nvidia-smi -q -d CLOCK; } > "$OUT/nvidia-smi.txt" 2>&1
ok=1
# -Dsimd=false: the CUDA test and benchmark compare with the scalar reference
# only, and the SIMD sources are then not compiled at all.
export FP4S_MESON_ARGS="${FP4S_MESON_ARGS:--Dsimd=false}"
if ! step setup+build build.log scripts/device/setup.sh tests/cuda/test_cuda bench/bench_cuda; then
    ok=0
else
    . .device/env.sh
    step test-emulate test_emulate.log "$B/tests/cuda/test_cuda" --emulate --quiet || ok=0
    # both 1-D quantize kernels (FP4S_CUDA_VARIANT, see kernels/cuda/cuda.cu)
    step test-gpu test_gpu.log sh -c "'$B/tests/cuda/test_cuda' --iterations 3 &&
        FP4S_CUDA_VARIANT=4 '$B/tests/cuda/test_cuda' --iterations 3" || ok=0
    step test-gpu-big test_gpu_big.log sh -c "'$B/tests/cuda/test_cuda' --big --quiet &&
        FP4S_CUDA_VARIANT=4 '$B/tests/cuda/test_cuda' --big --quiet" || ok=0
    if [ $sanit = 1 ] && command -v compute-sanitizer >/dev/null; then
        step memcheck memcheck.log sh -c "timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
            '$B/tests/cuda/test_cuda' --quiet && FP4S_CUDA_VARIANT=4 timeout 240 compute-sanitizer \
            --tool memcheck --error-exitcode 9 '$B/tests/cuda/test_cuda' --quiet" || ok=0
    fi
    if [ $bench = 1 ]; then
        # both kernel variants, the default one twice (noise)
        step bench bench_cuda.log sh -c "'$B/bench/bench_cuda' && FP4S_CUDA_VARIANT=4 '$B/bench/bench_cuda' &&
            '$B/bench/bench_cuda'" || ok=0
    fi
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
    if [ $prof = 1 ] && [ -n "$NCU" ]; then
        # speed of light of each kernel once, on a 256 MiB tensor (> L2)
        step ncu profile.log sh -c "'$NCU' --clock-control none --section SpeedOfLight \
            --kernel-name regex:'quant1d|quant2d|dequant|amax' --launch-count 24 \
            '$B/bench/bench_cuda' --rows 16384 --reps 1 --warmup 0 &&
            FP4S_CUDA_VARIANT=4 '$NCU' --clock-control none --section SpeedOfLight \
            --kernel-name regex:'quant1d_kernel' --launch-count 8 \
            '$B/bench/bench_cuda' --rows 16384 --reps 1 --warmup 0" || ok=0
    fi
fi
echo "== cuda_check summary"
printf '%s\n' "${summary[@]}"
grep -h "mismatches\|seed\|VARIANT" "$OUT"/test_*.log 2>/dev/null
[ -f "$OUT/bench_cuda.log" ] && grep -E "^(op|d2d|amax|quantize|dequantize)" "$OUT/bench_cuda.log"
[ $ok = 1 ]
