#!/bin/bash
# Run 9 of bench/RESULTS-H200.md (baseline on main f7973fc): the "Not done" parts, SASS + pipe counts of the BF16 quantize kernels,
# and the OpenBLAS-at-load CPU cost.
# Through the device tool with carry [".device"] (.device/debs: jansson, GSL, Check, subunit .debs), $OUT set.
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
FP4S_DEADLINE=300 bash scripts/device/cuda_check.sh --parts remedy,quant,ncu-decomp,rm-sanitizer
rc=$?
mv $OUT/summary.txt $OUT/summary_check.txt; mv $OUT/logs.tgz $OUT/logs_check.tgz
. .device/env.sh
B=build-device
X=$OUT/x; mkdir -p $X
{
  echo "== OpenBLAS at load: fp4-quant --version, 16 cores"
  for v in "" 1; do
    for i in 1 2 3; do
      if [ -n "$v" ]; then /usr/bin/time -f "OPENBLAS_NUM_THREADS=1 %e s wall %U user %S sys" env OPENBLAS_NUM_THREADS=1 $B/tools/fp4-quant --version >/dev/null
      else /usr/bin/time -f "default %e s wall %U user %S sys" $B/tools/fp4-quant --version > /dev/null; fi
    done
  done
  ldd $B/libfp4scope.so | grep -i blas
} > $X/blas_load.txt 2>&1
cat $X/blas_load.txt
timeout 120 ninja -C $B bench/bench_cuda > $X/build_bench.log 2>&1 || echo "bench build failed"
# SASS of the BF16 and F32 quantize objects (one kernel family each), resource usage
for o in quantize_bf16 quantize_f32; do
  f=$(ls $B/kernels/cuda/libfp4s_cuda.a.p/*$o*.o 2>/dev/null | head -1)
  [ -n "$f" ] && cuobjdump -sass -res-usage "$f" > $X/sass_$o.txt 2>&1
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
M=smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_fmaheavy.sum,smsp__inst_executed_pipe_fp16.sum,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_uniform.sum,smsp__inst_executed_pipe_adu.sum,smsp__inst_executed_pipe_cbu.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
for only in mxfp4-floor nvfp4-te; do
  timeout 100 $NCU --clock-control none --metrics $M --kernel-name regex:quant16 \
     $B/bench/bench_cuda --rows 16384 --reps 1 --warmup 0 --only $only > $X/ncu_pipes_$only.txt 2>&1
done
grep -E "quant16_kernel|inst_executed|pipe_|dram__|duration" $X/ncu_pipes_mxfp4-floor.txt | head -80
tar -czf $OUT/extra.tgz -C $OUT x; rm -rf $X
echo "batch1 done in $((SECONDS-T0)) s, check rc=$rc"
