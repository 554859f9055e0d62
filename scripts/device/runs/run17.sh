#!/bin/bash
# Run 17 of bench/RESULTS-H200.md: after run 16, the tiny-quotient sign test as an integer compare (the BF16
# dividing kernels back from 61 to 40-42 registers): the CUDA test on the device, the whole bench_cuda against the
# tree before the session's changes (6cbf3e9) twice, alternating (new, base, new, base: how far two runs of the
# same binary scatter), Nsight Compute on the ModelOpt NVFP4 1-D kernels, then the CPU scaling table at 16 threads (scripts/device/cpu_scaling.sh --build).
# Through the device tool with carry [".device"]; the baseline tree as .device/base.tar.gz:
#   git archive --format=tar.gz --prefix=base/ 6cbf3e9 -o .device/base.tar.gz
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
FP4S_MESON_ARGS=-Dsimd=false scripts/device/setup.sh tests/cuda/test_cuda bench/bench_cuda > $X/build.log 2>&1
echo "build rc=$? at $((SECONDS-T0)) s"; tail -2 $X/build.log
. .device/env.sh
B=build-device
timeout 120 $B/tests/cuda/test_cuda --quiet > $X/test_gpu.log 2>&1; echo "test_cuda gpu rc=$? at $((SECONDS-T0)) s"
grep -E "disagreements|specs" $X/test_gpu.log
wait $bpid; echo "base build rc=$? at $((SECONDS-T0)) s"
for i in 1 2; do
  timeout 100 $B/bench/bench_cuda --reps 9 > $X/bench$i.log 2>&1; echo "bench $i rc=$? at $((SECONDS-T0)) s"
  timeout 100 /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base$i.log 2>&1; echo "base bench $i rc=$? at $((SECONDS-T0)) s"
done
grep -c MISMATCH $X/bench1.log $X/bench2.log
fmt() { grep -E "^RESULT quantize" $1 | awk '{printf "%s %s %s %.1f\n", $3, $4, $5, 100*$8}'; }
paste -d' ' <(fmt $X/bench_base1.log) <(fmt $X/bench_base2.log | cut -d' ' -f4) <(fmt $X/bench1.log | cut -d' ' -f4) \
  <(fmt $X/bench2.log | cut -d' ' -f4) | awk '{printf "%-9s %-6s %-26s base %5.1f %5.1f  new %5.1f %5.1f\n",$1,$2,$3,$4,$5,$6,$7}'
grep -E "^RESULT copy" $X/bench1.log $X/bench_base1.log
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
if [ $((SECONDS - T0)) -lt 260 ]; then
  timeout 90 "$NCU" --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --kernel-name regex:'quant16' "$B/bench/bench_cuda" --rows 16384 --reps 1 --warmup 0 --only nvfp4-modelopt > $X/ncu_modelopt.log 2>&1
  echo "ncu modelopt rc=$? at $((SECONDS-T0)) s"
  grep -E "quant16_kernel|DRAM Throughput|Duration|smsp__inst_executed.sum|issue_active|Achieved Occupancy|Registers Per" $X/ncu_modelopt.log | sed -E 's/\(fp4s_cu_params.*//' | cut -c1-110 | head -60
fi
FP4S_DEADLINE=$((560 - (SECONDS - T0))) bash scripts/device/cpu_scaling.sh --build build-cpu 16 > $X/cpu.log 2>&1
echo "cpu scaling rc=$? at $((SECONDS-T0)) s"; tail -40 $X/cpu.log
cd $OUT && tar -czf $OUT/run17.tgz x && rm -rf $X
echo "run17 done in $((SECONDS-T0)) s"
