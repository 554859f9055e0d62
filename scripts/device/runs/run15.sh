#!/bin/bash
# Run 15 of bench/RESULTS-H200.md: the coalesced 2-D tile kernel with two slab widths (FP4S_CU_SLAB=128, the
# default, and 256 bytes a row): the CUDA test on the device for both, the whole bench_cuda against the tree before
# (ecdf24a, built and run on the same machine), fp4scope against torch.compile and eager PyTorch
# (scripts/device/bench_torch.py), and Nsight Compute on the NVFP4 te kernels, 1-D and 2-D, of both widths.
# Through the device tool with carry [".device"]; the baseline tree as .device/base.tar.gz:
#   git archive --format=tar.gz --prefix=base/ ecdf24a -o .device/base.tar.gz
# The FP4S_CU_SLAB knob (a getenv in launch_2d choosing W = 8 or 16) existed only in the tree this ran on;
# after this run the 256-byte slabs are the only layout and the knob is gone.
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
TOP=$(pwd)
X=$OUT/x; mkdir -p $X
nvidia-smi --query-gpu=name,memory.total --format=csv > $X/gpu.txt 2>&1; cat $X/gpu.txt
( rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf .device/base.tar.gz -C /tmp && cd /tmp/base &&
  mkdir -p .device && cp -r $TOP/.device/debs .device/ && FP4S_DEVICE_BUILD=build-base FP4S_MESON_ARGS=-Dsimd=false \
  nice scripts/device/setup.sh bench/bench_cuda ) > $X/base_build.log 2>&1 &
bpid=$!
FP4S_MESON_ARGS=-Dsimd=false scripts/device/setup.sh tests/cuda/test_cuda bench/bench_cuda libfp4scope.so.0.1.0 > $X/build.log 2>&1
echo "build rc=$? at $((SECONDS-T0)) s"; tail -3 $X/build.log
. .device/env.sh
B=build-device
timeout 100 $B/tests/cuda/test_cuda --quiet > $X/test_gpu.log 2>&1; echo "test_cuda gpu rc=$? $(tail -1 $X/test_gpu.log) at $((SECONDS-T0)) s"
FP4S_CU_SLAB=256 timeout 100 $B/tests/cuda/test_cuda --quiet > $X/test_gpu256.log 2>&1; echo "test_cuda gpu slab 256 rc=$? $(tail -1 $X/test_gpu256.log) at $((SECONDS-T0)) s"
timeout 150 $B/bench/bench_cuda --reps 9 > $X/bench.log 2>&1; echo "bench rc=$? at $((SECONDS-T0)) s"
FP4S_CU_SLAB=256 timeout 60 $B/bench/bench_cuda --reps 9 --only 2d > $X/bench_2d256.log 2>&1; echo "bench 2d slab 256 rc=$?"
wait $bpid; echo "base build rc=$? at $((SECONDS-T0)) s"
timeout 150 /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base.log 2>&1; echo "base bench rc=$? at $((SECONDS-T0)) s"
ls $B/libfp4scope.so* > /dev/null 2>&1 && { timeout 150 env PYTHONUNBUFFERED=1 python3 scripts/device/bench_torch.py $B/libfp4scope.so --reps 9 > $X/bench_torch.log 2>&1; echo "torch rc=$? at $((SECONDS-T0)) s"; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
for v in 128 256; do
  left=$((560 - (SECONDS - T0))); [ $left -lt 30 ] && break
  only=te; [ $v = 256 ] && only=te-2d
  FP4S_CU_SLAB=$v timeout $((v == 128 ? left * 2 / 3 : left)) "$NCU" --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --kernel-name regex:'quant16|quant2d' "$B/bench/bench_cuda" --rows 16384 --reps 1 --warmup 0 --only $only > $X/ncu_$v.log 2>&1
  echo "ncu slab $v rc=$? at $((SECONDS-T0)) s"
done
fmt() { grep -E "^RESULT" $1 | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %5.1f%%\n", $2, $3, $4, $5, $6, 100*$8}'; }
for f in bench.log bench_2d256.log bench_base.log; do echo "== $f"; fmt $X/$f | grep -v "^copy\|^amax" ; grep -c MISMATCH $X/$f; done
grep -E "^RESULT copy" $X/bench.log
grep -E "^\||ratio|x " $X/bench_torch.log | tail -30
for v in 128 256; do echo "== ncu $v"; grep -E "quant(16|2d)_kernel|DRAM Throughput|Duration|smsp__inst_executed.sum|issue_active|Achieved Occupancy|Registers Per" $X/ncu_$v.log | sed -E 's/\(fp4s_cu_params.*//' | cut -c1-110 | head -80; done
cd $OUT && tar -czf $OUT/run15.tgz x && rm -rf $X
echo "run15 done in $((SECONDS-T0)) s"
