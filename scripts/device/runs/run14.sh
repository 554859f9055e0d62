#!/bin/bash
# Run 14 of bench/RESULTS-H200.md: the coalesced 2-D tile kernel (quant2d_kernel): the CUDA test on the device
# (every spec, type, layout and shape against the C reference), the 2-D rows of bench_cuda against the tree
# before it (ecdf24a, built and run on the same machine), and Nsight Compute on the 2-D kernels of both.
# Through the device tool with carry [".device"] (.device/debs: jansson, GSL, Check, subunit .debs), $OUT set;
# the baseline tree as .device/base.tar.gz: git archive --format=tar.gz --prefix=base/ ecdf24a -o .device/base.tar.gz
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
echo "build rc=$? at $((SECONDS-T0)) s"
. .device/env.sh
B=build-device
timeout 100 $B/tests/cuda/test_cuda --quiet > $X/test_gpu.log 2>&1; echo "test_cuda gpu rc=$? $(tail -2 $X/test_gpu.log | tr '\n' ' ') at $((SECONDS-T0)) s"
timeout 90 $B/bench/bench_cuda --reps 9 --only 2d > $X/bench_2d.log 2>&1; echo "bench 2d rc=$?"
wait $bpid; echo "base build rc=$? at $((SECONDS-T0)) s"
timeout 90 /tmp/base/build-base/bench/bench_cuda --reps 9 --only 2d > $X/bench_2d_base.log 2>&1; echo "base bench rc=$?"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
for v in new base; do
  bin=$B/bench/bench_cuda; [ $v = base ] && bin=/tmp/base/build-base/bench/bench_cuda
  left=$((540 - (SECONDS - T0))); [ $left -lt 40 ] && break
  timeout $((left / 2)) "$NCU" --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
    --kernel-name regex:'quant16|quant2d' "$bin" --rows 16384 --reps 1 --warmup 0 --only te-2d > $X/ncu_$v.log 2>&1
  echo "ncu $v rc=$?"
done
for f in bench_2d.log bench_2d_base.log; do echo "== $f"; grep -E "^RESULT" $X/$f | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %5.1f%%\n", $2, $3, $4, $5, $6, 100*$8}'; grep -c MISMATCH $X/$f; done
grep -E "copy|d2d" $X/bench_2d.log | head -3
for v in new base; do echo "== ncu $v"; grep -E "quant(16|2d)_kernel|DRAM Throughput|L1/TEX Hit|Memory Throughput|Duration|smsp__inst_executed.sum|L1/TEX Cache Throughput" $X/ncu_$v.log | sed -E 's/\(fp4s_cu_params.*//' | cut -c1-120 | head -40; done
cd $OUT && tar -czf $OUT/run14.tgz x && rm -rf $X
echo "run14 done in $((SECONDS-T0)) s"
