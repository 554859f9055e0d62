#!/bin/bash
# Run 18 of bench/RESULTS-H200.md: after run 17, the packed BF16 MXFP4 path with ties away as a template parameter
# and the tiny-quotient sign as bits: the CUDA test on the device, bench_cuda against 6cbf3e9 (built and run in the
# same call), Nsight Compute on the te NVFP4 1-D kernels of both trees (BF16 one code per byte lost 5% in runs
# 16-17 with no change in its element code), and the SASS of that kernel in both (cuobjdump, opcode counts).
# As it ran, its SASS counts stop at 4096 instructions a kernel (the address pattern /*xxxx*/ has four hex
# digits, cuobjdump writes five past 0xffff): only the ncu counts of this run are reported.
# Through the device tool with carry [".device"]; the baseline tree as .device/base.tar.gz:
#   git archive --format=tar.gz --prefix=base/ 6cbf3e9 -o .device/base.tar.gz
set -uo pipefail
cd "$(dirname "$0")/../../.."
T0=$SECONDS
TOP=$(pwd)
X=$OUT/x; mkdir -p $X
nvidia-smi --query-gpu=name --format=csv,noheader
( rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf .device/base.tar.gz -C /tmp && cd /tmp/base &&
  mkdir -p .device && cp -r $TOP/.device/debs .device/ && FP4S_DEVICE_BUILD=build-base FP4S_MESON_ARGS=-Dsimd=false \
  nice scripts/device/setup.sh bench/bench_cuda ) > $X/base_build.log 2>&1 &
bpid=$!
FP4S_MESON_ARGS=-Dsimd=false scripts/device/setup.sh tests/cuda/test_cuda bench/bench_cuda > $X/build.log 2>&1
echo "build rc=$? at $((SECONDS-T0)) s"
. .device/env.sh
B=build-device
timeout 120 $B/tests/cuda/test_cuda --quiet > $X/test_gpu.log 2>&1; echo "test_cuda gpu rc=$? at $((SECONDS-T0)) s"
grep -E "disagreements|specs" $X/test_gpu.log
wait $bpid; echo "base build rc=$? at $((SECONDS-T0)) s"
timeout 100 $B/bench/bench_cuda --reps 9 > $X/bench.log 2>&1; echo "bench rc=$? at $((SECONDS-T0)) s"
timeout 100 /tmp/base/build-base/bench/bench_cuda --reps 9 > $X/bench_base.log 2>&1; echo "base bench rc=$? at $((SECONDS-T0)) s"
grep -c MISMATCH $X/bench.log
fmt() { grep -E "^RESULT quantize" $1 | awk '{printf "%s %s %s %.3f %.1f\n", $3, $4, $5, $6, 100*$8}'; }
paste -d' ' <(fmt $X/bench_base.log) <(fmt $X/bench.log | cut -d' ' -f4,5) |
  awk '{printf "%-9s %-6s %-26s base %6.3f ms %5.1f%%  new %6.3f ms %5.1f%%\n",$1,$2,$3,$4,$5,$6,$7}'
grep -E "^RESULT copy" $X/bench.log $X/bench_base.log
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
for t in new base; do
  bin=$B/bench/bench_cuda; [ $t = base ] && bin=/tmp/base/build-base/bench/bench_cuda
  timeout 60 "$NCU" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --kernel-name regex:'quant16' "$bin" --rows 16384 --reps 1 --warmup 0 --only nvfp4-te > $X/ncu_te_$t.log 2>&1
  echo "== ncu te $t rc=$?"
  grep -E "quant16_kernel|DRAM Throughput|Duration|smsp__inst_executed.sum|issue_active|Achieved Occupancy|Registers Per" \
    $X/ncu_te_$t.log | sed -E 's/\(fp4s_cu_params.*//' | cut -c1-110 | head -32
done
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null)
for t in new base; do
  o=$B/kernels/cuda/libfp4s_cuda.a.p/quantize_bf16.o
  [ $t = base ] && o=/tmp/base/build-base/kernels/cuda/libfp4s_cuda.a.p/quantize_bf16.o
  "$CUOBJ" -sass $o > $X/sass_$t.txt 2>&1; echo "sass $t rc=$? $(wc -l < $X/sass_$t.txt) lines"
done
python3 - $X/sass_base.txt $X/sass_new.txt <<'PY'
import re, sys, collections
def kern(fn):
    d = {}; cur = None
    for line in open(fn):
        m = re.search(r"Function : (\S+)", line)
        if m:
            g = re.search(r"quant16_kernelILi(\d+)ELi(\d)ELi(\d)ELi(\d)ELb([01])", m.group(1))
            cur = g.groups() if g else None
            if cur: d[cur] = collections.Counter()
            continue
        if cur:
            m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if m: d[cur][m.group(2).split(".")[0]] += 1
    return d
b, n = kern(sys.argv[1]), kern(sys.argv[2])
for k in sorted(b):
    if k in n: print("quant16", k, "SASS instructions base", sum(b[k].values()), "new", sum(n[k].values()))
k = ("16", "0", "1", "0", "0")
if k in b and k in n:
    diff = {op: (b[k][op], n[k][op]) for op in set(b[k]) | set(n[k]) if b[k][op] != n[k][op]}
    print("te-like kernel (BS 16, MODE 0, BF16, bytes), opcodes that differ:", sorted(diff.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:25])
PY
cd $OUT && tar -czf $OUT/run18.tgz x && rm -rf $X
echo "run18 done in $((SECONDS-T0)) s"
