#!/bin/bash
# Run 13 of bench/RESULTS-H200.md: the final tree on the GPU: the quantize kernels (test, bench against the baseline
# tree built and run on the same machine, ncu, sanitizers), the decomposition (test, 10 GiB bench, sanitizers), the
# other CUDA tests, and the CPU table at 8-16 threads.
# Through the device tool with carry [".device"] (.device/debs: jansson, GSL, Check, subunit .debs), $OUT set;
# the baseline tree as .device/base.tar.gz: git archive --format=tar.gz --prefix=base/ f7973fc -o .device/base.tar.gz
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
FP4S_DEADLINE=${RUN13_CHECK:-380} FP4S_BENCH_REPS=9 FP4S_DECOMP_GIB=${RUN13_GIB:-2} \
    bash scripts/device/cuda_check.sh --parts test,bench,ncu,sanitizer,decomp
rc=$?
mv $OUT/summary.txt $X/summary_check.txt; mv $OUT/logs.tgz $X/logs_check.tgz
. .device/env.sh
B=build-device
timeout 60 ninja -C $B tests/cuda/test_cuda_qstats tests/cuda/test_cuda_remedy > $X/build_more.log 2>&1
for t in test_cuda_qstats test_cuda_remedy; do timeout 40 $B/tests/cuda/$t --quiet > $X/$t.log 2>&1; echo "$t rc=$? $(tail -1 $X/$t.log)"; done
wait $bpid; echo "base build rc=$?"
if [ -x /tmp/base/build-base/bench/bench_cuda ]; then
  timeout 60 /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base.log 2>&1; echo "base bench rc=$?"
fi
left=$((570 - (SECONDS - T0)))
if [ $left -gt 60 ]; then
  mkdir -p $X/cs; OUT=$X/cs FP4S_DEADLINE=$((left - 10)) bash scripts/device/cpu_scaling.sh --build build-cpu 8 12 16 > $X/cpu_scaling.log 2>&1
  echo "cpu_scaling rc=$?"; grep -E "^\||^- " $X/cs/summary.txt 2>/dev/null | head -30
fi
cd $X && tar xzf logs_check.tgz ./bench_cuda.log 2>/dev/null
for f in bench_cuda.log bench_base.log; do [ -f $X/$f ] && { echo "== $f"; grep "^RESULT" $X/$f | grep -E "bfloat16|2d" | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %5.1f%%\n", $2, $3, $4, $5, $6, 100*$8}'; }; done
head -60 $X/summary_check.txt
cd $OUT && tar -czf $OUT/run13.tgz x && rm -rf $X
echo "run13 done in $((SECONDS-T0)) s, check rc=$rc"
