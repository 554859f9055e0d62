#!/bin/bash
# The CPU scaling table of fp4-quant and fp4-decompose against the plain read,
# for 1 to 16 threads (bench/RESULTS-H200.md). On the GPU machine (16 cores),
# one device call from a checkout with .device/debs, carried:
#
#   bash scripts/device/cpu_scaling.sh --build
#
# or anywhere with a build of the tools and bench/ (no GPU needed):
#
#   scripts/device/cpu_scaling.sh [--build] [BUILD_DIR] [THREADS...]   (default build-cpu, 1 2 4 8 12 16)
#
# --build: scripts/device/setup.sh first, CPU only (-Dcuda=disabled, SIMD on),
# into BUILD_DIR, only the targets used here. Then it writes a float32 .npy
# [FP4S_SCALING_ROWS (default 262144), 1024] = 1 GiB (bench/scaling_input:
# gaussian values times a random power of two per 32-block, fixed seed) in
# ${TMPDIR:-/tmp}/fp4s_scaling, reads it once (page cache warm), and for each
# thread count (FP4S_THREADS) takes the best of 3 wall times of:
#   plain read      bench/bench_read: every chunk through fp4s_source_read, nothing else
#   quant -o        fp4-quant -f mxfp4 -p ocp -o q.h5 (a packed HDF5 output, fsync'ed at commit)
#   quant summary   the same without an output (read and quantize, statistics on)
#   decomp mxfp4    fp4-decompose -f mxfp4 --json (statistics: what it computes)
#   decomp nvfp4    fp4-decompose -f nvfp4 --json (reads once: the amax pass keeps the input)
# and prints a markdown table of seconds and times the plain read (targets of
# issue 14: fp4-quant at >= 80% of the read bandwidth, i.e. <= 1.25x the read
# time; fp4-decompose <= 1.5x at 8+ threads). Then, at the largest thread
# count, the diagnostics: NVFP4 read twice (--keep 0), each tool with
# OPENBLAS_NUM_THREADS=1 (OpenBLAS starts its own threads when the library
# is loaded, which spin for a while), and fp4-quant -o's commit alone.
# The table and the diagnostics go to stdout and to $OUT/summary.txt
# (${TMPDIR:-/tmp}/fp4s_scaling/summary.txt without OUT). Exit status: 0 when every run succeeded, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=0
if [ "${1:-}" = --build ]; then
    build=1
    shift
fi
B=${1:-build-cpu}
[ $# -gt 0 ] && shift
THREADS=${*:-1 2 4 8 12 16}
T0=$SECONDS
if [ "$build" = 1 ]; then
    FP4S_DEVICE_BUILD=$B FP4S_MESON_ARGS="${FP4S_MESON_ARGS:-} -Dcuda=disabled" \
        sh scripts/device/setup.sh tools/fp4-quant tools/fp4-decompose bench/bench_read bench/scaling_input \
        > "${OUT:-.}/cpu_scaling_build.log" 2>&1 || { tail -20 "${OUT:-.}/cpu_scaling_build.log"; exit 1; }
    . .device/env.sh
    echo "cpu_scaling: built $B in $((SECONDS - T0)) s"
fi
for p in tools/fp4-quant tools/fp4-decompose bench/bench_read bench/scaling_input; do
    [ -x "$B/$p" ] || { echo "cpu_scaling: $B/$p missing (build it, or pass --build)" >&2; exit 1; }
done
T=${TMPDIR:-/tmp}/fp4s_scaling
mkdir -p "$T"
ROWS=${FP4S_SCALING_ROWS:-262144}
X=$T/x_$ROWS.npy
[ -f "$X" ] || "$B/bench/scaling_input" "$X" "$ROWS" 1024 || exit 1
cat "$X" > /dev/null
failed=0
runs=() # the wall times of the last best() call
best() { # best of 3 wall seconds of a command (its output discarded; q.h5 removed before each)
    local b="" t
    for _ in 1 2 3; do
        rm -f "$T/q.h5"
        local s=$(date +%s.%N)
        "$@" >/dev/null 2>"$T/err.txt" || { failed=1; echo "cpu_scaling: failed: $* ($(head -c 300 "$T/err.txt"))" >&2; }
        t=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
        if [ -z "$b" ] || awk -v t="$t" -v b="$b" 'BEGIN { exit !(t < b) }'; then b=$t; fi
    done
    echo "$b"
}
x() { awk -v a="$1" -v r="$2" 'BEGIN { printf "%.2fx", a / r }'; }
Q=$B/tools/fp4-quant
D=$B/tools/fp4-decompose
S=${OUT:-$T}/summary.txt
{
echo "cpu_scaling: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "cpu_scaling: input $X ($ROWS x 1024 float32, $(du -h "$X" | cut -f1)), $("$Q" --version | sed -n 2p)"
echo "cpu_scaling: commit $(git rev-parse --short HEAD 2>/dev/null || cat .commit 2>/dev/null || echo unknown), best of 3 wall seconds"
echo
echo "| threads | plain read s | fp4-quant mxfp4 -o s | x read | fp4-quant mxfp4, summary only s | x read | fp4-decompose mxfp4 s | x read | fp4-decompose nvfp4 s | x read |"
echo "|---|---|---|---|---|---|---|---|---|---|"
last=1
for n in $THREADS; do
    export FP4S_THREADS=$n
    last=$n
    r=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
    q=$(best "$Q" -f mxfp4 -p ocp -o "$T/q.h5" "$X")
    qs=$(best "$Q" -f mxfp4 -p ocp "$X")
    dm=$(best "$D" -f mxfp4 --json "$X")
    dn=$(best "$D" -f nvfp4 --json "$X")
    echo "| $n | $r | $q | $(x "$q" "$r") | $qs | $(x "$qs" "$r") | $dm | $(x "$dm" "$r") | $dn | $(x "$dn" "$r") |"
done
export FP4S_THREADS=$last
r=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
echo
echo "Diagnostics at $last threads (plain read $r s):"
echo "- fp4-decompose nvfp4 --keep 0 (read twice): $(best "$D" -f nvfp4 --keep 0 --json "$X") s"
export OPENBLAS_NUM_THREADS=1
echo "- OPENBLAS_NUM_THREADS=1: fp4-quant -o $(best "$Q" -f mxfp4 -p ocp -o "$T/q.h5" "$X") s," \
     "summary $(best "$Q" -f mxfp4 -p ocp "$X") s, decompose mxfp4 $(best "$D" -f mxfp4 --json "$X") s," \
     "nvfp4 $(best "$D" -f nvfp4 --json "$X") s"
unset OPENBLAS_NUM_THREADS
if command -v strace >/dev/null; then
    rm -f "$T/q.h5"
    strace -f -T -e trace=fsync -o "$T/strace.txt" "$Q" -f mxfp4 -p ocp -o "$T/q.h5" "$X" >/dev/null 2>&1
    echo "- fp4-quant -o: output $(du -h "$T/q.h5" | cut -f1), fsync calls $(grep -c 'fsync(' "$T/strace.txt")," \
         "longest $(grep -o '<[0-9.]*>' "$T/strace.txt" | tr -d '<>' | sort -g | tail -1) s (under strace)"
fi
echo "cpu_scaling: load $(cut -d' ' -f1-3 /proc/loadavg) at the end, $((SECONDS - T0)) s in all"
} > >(tee "$S")
sleep 0.2 # tee's last lines
rm -f "$T/q.h5"
[ "${FP4S_SCALING_KEEP_INPUT:-0}" = 1 ] || rm -f "$X"
exit $failed
