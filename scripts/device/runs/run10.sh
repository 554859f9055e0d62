#!/bin/bash
# Run 10 of bench/RESULTS-H200.md: the new quantize kernels (main + gpuk) on the GPU: correctness (test_cuda GPU, the other CUDA tests),
# bench_cuda against the baseline tree f7973fc built and run on the same machine, ncu, torch.compile.
# Through the device tool with carry [".device"] (.device/debs: jansson, GSL, Check, subunit .debs), $OUT set;
# the baseline tree as .device/base.tar.gz: git archive --format=tar.gz --prefix=base/ f7973fc -o .device/base.tar.gz
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
TOP=$(pwd)
X=$OUT/x; mkdir -p $X
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > $X/gpu.txt 2>&1; cat $X/gpu.txt
# baseline tree: unpack and build bench_cuda in the background (CUDA only, same flags as cuda_check's -Dsimd=false)
( rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf .device/base.tar.gz -C /tmp && cd /tmp/base &&
  mkdir -p .device && cp -r $TOP/.device/debs .device/ && FP4S_DEVICE_BUILD=build-base FP4S_MESON_ARGS=-Dsimd=false \
  nice scripts/device/setup.sh bench/bench_cuda ) > $X/base_build.log 2>&1 &
bpid=$!
FP4S_DEADLINE=330 FP4S_BENCH_REPS=9 bash scripts/device/cuda_check.sh --parts test,bench,ncu
rc=$?
mv $OUT/summary.txt $X/summary_check.txt; mv $OUT/logs.tgz $X/logs_check.tgz
. .device/env.sh
B=build-device
timeout 100 ninja -C $B tests/cuda/test_cuda_qstats tests/cuda/test_cuda_remedy tests/cuda/test_cuda_decomp > $X/build_more.log 2>&1
for t in test_cuda_qstats test_cuda_remedy; do timeout 60 $B/tests/cuda/$t --quiet > $X/$t.log 2>&1; echo "$t rc=$? $(tail -1 $X/$t.log)"; done
timeout 60 $B/tests/cuda/test_cuda_decomp --quiet datasets/*.h5 > $X/test_cuda_decomp.log 2>&1; echo "test_cuda_decomp rc=$? $(tail -1 $X/test_cuda_decomp.log)"
wait $bpid; echo "base build rc=$?"
left=$((560 - (SECONDS - T0)))
if [ -x /tmp/base/build-base/bench/bench_cuda ] && [ $left -gt 30 ]; then
  timeout $left /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base.log 2>&1; echo "base bench rc=$?"
fi
cd $X && tar xzf logs_check.tgz ./bench_cuda.log 2>/dev/null
for f in bench_cuda.log bench_base.log; do [ -f $X/$f ] && { echo "== $f"; grep "^RESULT" $X/$f | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %7.0f GB/s %5.1f%%\n", $2, $3, $4, $5, $6, $7, 100*$8}'; }; done
cat $X/summary_check.txt | head -40
cd $OUT && tar -czf $OUT/call2.tgz x && rm -rf $X
echo "batch2 done in $((SECONDS-T0)) s, check rc=$rc"
