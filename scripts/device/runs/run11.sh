#!/bin/bash
# Runs 11-12 of bench/RESULTS-H200.md (main 9cc9b62): the whole suite on the GPU machine's toolchain, the CPU scaling table after the
# BLAS-at-first-GEMM and parallel-read changes, fp4scope against torch.compile with the new BF16 kernels.
# Through the device tool with carry [".device"] (.device/debs: jansson, GSL, Check, subunit .debs), $OUT set.
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
X=$OUT/x; mkdir -p $X
nvidia-smi --query-gpu=name,memory.total --format=csv > $X/gpu.txt 2>&1; cat $X/gpu.txt; nproc
mkdir -p $X/tc; OUT=$X/tc FP4S_DEADLINE=250 bash scripts/device/toolchain_check.sh /opt/torch/.venv/bin/python3 > $X/toolchain.log 2>&1
echo "toolchain rc=$?"; tail -30 $X/tc/summary.txt 2>/dev/null
mkdir -p $X/cs; OUT=$X/cs FP4S_DEADLINE=200 bash scripts/device/cpu_scaling.sh --build build-cpu 1 2 4 8 12 16 > $X/cpu_scaling.log 2>&1
echo "cpu_scaling rc=$?"; grep -E "^\||^[A-Za-z]" $X/cs/summary.txt 2>/dev/null | head -60
left=$((575 - (SECONDS - T0)))
if [ $left -gt 40 ] && [ -f build-toolchain/libfp4scope.so ]; then
  . .device/env.sh
  timeout $left env PYTHONUNBUFFERED=1 /opt/torch/.venv/bin/python3 scripts/device/bench_torch.py build-toolchain/libfp4scope.so --reps 15 > $X/bench_torch.log 2>&1
  echo "torch rc=$?"; grep "^|" $X/bench_torch.log
fi
cd $OUT && tar -czf $OUT/call3.tgz x && rm -rf $X
echo "batch3 done in $((SECONDS-T0)) s"
