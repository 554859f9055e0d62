#!/bin/bash
# Run 16 of bench/RESULTS-H200.md: ties away from zero (RHA: the microxcaling profile, or --tie away) on the
# fast element paths (the lowest significand bit of |x| set, then the round-to-nearest-even magic add; BF16
# MXFP4 on the packed words), ggml's MXFP4 on BF16 on the packed words too (specs dropping -0), and the sign of
# the fast division's tiny quotients (ModelOpt NVFP4): the CUDA test on the device (its new checks: every float32 up to 8 through the
# float32 fast path, every BF16 pattern x 255 scales through the packed path, RNE/RTZ/RHA), compute-sanitizer
# memcheck on the profiles' specs, the whole bench_cuda against the tree before (6cbf3e9, built and run on the
# same machine), fp4scope against torch.compile and eager PyTorch (scripts/device/bench_torch.py), and Nsight
# Compute on the microxcaling kernels (float32 and BF16) and on the 2-D te kernel (BF16).
# Through the device tool with carry [".device"]; the baseline tree as .device/base.tar.gz:
#   git archive --format=tar.gz --prefix=base/ 6cbf3e9 -o .device/base.tar.gz
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
TOP=$(pwd)
X=$OUT/x; mkdir -p $X
left() { echo $((560 - (SECONDS - T0))); }
nvidia-smi --query-gpu=name,memory.total --format=csv > $X/gpu.txt 2>&1; cat $X/gpu.txt
( rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf .device/base.tar.gz -C /tmp && cd /tmp/base &&
  mkdir -p .device && cp -r $TOP/.device/debs .device/ && FP4S_DEVICE_BUILD=build-base FP4S_MESON_ARGS=-Dsimd=false \
  nice scripts/device/setup.sh bench/bench_cuda ) > $X/base_build.log 2>&1 &
bpid=$!
FP4S_MESON_ARGS=-Dsimd=false scripts/device/setup.sh tests/cuda/test_cuda bench/bench_cuda libfp4scope.so.0.1.0 > $X/build.log 2>&1
echo "build rc=$? at $((SECONDS-T0)) s"; tail -3 $X/build.log
. .device/env.sh
B=build-device
timeout 120 $B/tests/cuda/test_cuda --quiet > $X/test_gpu.log 2>&1; echo "test_cuda gpu rc=$? at $((SECONDS-T0)) s"
grep -E "disagreements|specs" $X/test_gpu.log
timeout 150 $B/bench/bench_cuda --reps 9 > $X/bench.log 2>&1; echo "bench rc=$? at $((SECONDS-T0)) s"
wait $bpid; echo "base build rc=$? at $((SECONDS-T0)) s"
timeout 150 /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base.log 2>&1; echo "base bench rc=$? at $((SECONDS-T0)) s"
[ "$(left)" -gt 120 ] && ls $B/libfp4scope.so* > /dev/null 2>&1 && {
  timeout 100 env PYTHONUNBUFFERED=1 python3 scripts/device/bench_torch.py $B/libfp4scope.so --reps 9 > $X/bench_torch.log 2>&1
  echo "torch rc=$? at $((SECONDS-T0)) s"; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
for only in microxcaling te-2d; do
  l=$(left); [ "$l" -lt 40 ] && { echo "ncu $only left out (time)"; continue; }
  lim=$((l - 30)); [ $only = microxcaling ] && lim=$((l / 2))
  timeout $lim "$NCU" --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --kernel-name regex:'quant16|quant2d' "$B/bench/bench_cuda" --rows 16384 --reps 1 --warmup 0 --only $only > $X/ncu_$only.log 2>&1
  echo "ncu $only rc=$? at $((SECONDS-T0)) s"
done
l=$(left)
if [ "$l" -gt 25 ] && command -v compute-sanitizer > /dev/null; then
  timeout $((l - 10)) compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/cuda/test_cuda --profiles --quiet > $X/memcheck.log 2>&1
  echo "memcheck rc=$? at $((SECONDS-T0)) s"; grep -E "ERROR SUMMARY|specs" $X/memcheck.log
else echo "memcheck left out (time)"; fi
fmt() { grep -E "^RESULT" $1 | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %5.1f%%\n", $2, $3, $4, $5, $6, 100*$8}'; }
for f in bench.log bench_base.log; do echo "== $f"; fmt $X/$f | grep -v "^copy\|^amax" ; grep -c MISMATCH $X/$f; done
grep -E "^RESULT copy" $X/bench.log $X/bench_base.log
grep -E "^\||ratio|x " $X/bench_torch.log | tail -30
for only in microxcaling te-2d; do echo "== ncu $only"; grep -E "quant(16|2d)_kernel|DRAM Throughput|Duration|smsp__inst_executed.sum|issue_active|Achieved Occupancy|Registers Per" $X/ncu_$only.log | sed -E 's/\(fp4s_cu_params.*//' | cut -c1-110 | head -60; done
cd $OUT && tar -czf $OUT/run16.tgz x && rm -rf $X
echo "run16 done in $((SECONDS-T0)) s"
