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
#   decomp nvfp4    fp4-decompose -f nvfp4 --json (the default --keep auto: the input is in the
#                   page cache, so nothing is kept and the input is read twice)
# and prints a markdown table of seconds and times the plain read (targets of
# issue 14: fp4-quant at >= 80% of the read bandwidth, i.e. <= 1.25x the read
# time; fp4-decompose <= 1.5x at 8+ threads), and a second table of the CPU
# seconds (user + sys) of those best runs. Then, at the largest thread count,
# the diagnostics: NVFP4 read twice (--keep 0) and read once (--keep 2048, the
# amax pass keeps the input), then on a cold cache (the input's pages dropped
# before each run: dd iflag=nocache) the plain read, auto (which reads twice
# there too: 1 GiB fits in the memory available) and --keep 2048, whether a tool has the BLAS
# loaded at start (it should not: libfp4scope opens it at the first GEMM) and
# fp4-quant with OPENBLAS_NUM_THREADS=1 (no change expected), and fp4-quant
# -o's fsync. FP4S_DEADLINE (seconds since the start, default 230): a thread
# count, or the diagnostics, that would end past it is left out, and said so.
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
DEADLINE=${FP4S_DEADLINE:-230}
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
# the children's CPU seconds (user + sys) so far of this shell (`times`' second line) in the file $1:
# `times` is run here, not in a command substitution (a new process, whose children are others)
cpu_at() { times > "$1"; }
cpu_of() { awk 'NR == 2 { sub(/s$/, "", $1); sub(/s$/, "", $2); split($1, u, "m"); split($2, s, "m")
                          printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"; }
best() { # best of 3 wall seconds of a command (its output discarded; q.h5 removed before each);
         # the CPU seconds (user + sys) of that run are appended to $T/cpu.txt
    local b="" t c bc=""
    for _ in 1 2 3; do
        rm -f "$T/q.h5"
        cpu_at "$T/c0.txt"
        local s=$(date +%s.%N)
        "$@" >/dev/null 2>"$T/err.txt" || { failed=1; echo "cpu_scaling: failed: $* ($(head -c 300 "$T/err.txt"))" >&2; }
        local e=$(date +%s.%N)
        cpu_at "$T/c1.txt"
        t=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", b - a }')
        c=$(awk -v a="$(cpu_of "$T/c0.txt")" -v b="$(cpu_of "$T/c1.txt")" 'BEGIN { printf "%.2f", b - a }')
        if [ -z "$b" ] || awk -v t="$t" -v b="$b" 'BEGIN { exit !(t < b) }'; then b=$t; bc=$c; fi
    done
    echo "$bc" >> "$T/cpu.txt"
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
echo "| threads | plain read s | fp4-quant mxfp4 -o s | x read | fp4-quant mxfp4, summary only s | x read | fp4-decompose mxfp4 s | x read | fp4-decompose nvfp4 (--keep auto) s | x read |"
echo "|---|---|---|---|---|---|---|---|---|---|"
last=1 row=0 cpurows="" skipped=""
for n in $THREADS; do
    # a row takes at most about as long as the one before it (more threads)
    if [ $((SECONDS - T0 + row + 5)) -gt "$DEADLINE" ]; then skipped="$skipped $n"; continue; fi
    t1=$SECONDS
    export FP4S_THREADS=$n
    last=$n
    : > "$T/cpu.txt"
    r=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
    q=$(best "$Q" -f mxfp4 -p ocp -o "$T/q.h5" "$X")
    qs=$(best "$Q" -f mxfp4 -p ocp "$X")
    dm=$(best "$D" -f mxfp4 --json "$X")
    dn=$(best "$D" -f nvfp4 --json "$X")
    echo "| $n | $r | $q | $(x "$q" "$r") | $qs | $(x "$qs" "$r") | $dm | $(x "$dm" "$r") | $dn | $(x "$dn" "$r") |"
    cpurows="$cpurows| $n | $(paste -sd'|' "$T/cpu.txt" | sed 's/|/ | /g') |
"
    row=$((SECONDS - t1))
done
[ -z "$skipped" ] || echo "(threads$skipped left out: FP4S_DEADLINE $DEADLINE s)"
echo
echo "CPU seconds (user + sys) of the best runs above:"
echo
echo "| threads | fp4-quant -o | summary only | fp4-decompose mxfp4 | fp4-decompose nvfp4 (auto) |"
echo "|---|---|---|---|---|"
printf '%s' "$cpurows"
export FP4S_THREADS=$last
echo
if [ $((SECONDS - T0 + 20)) -gt "$DEADLINE" ]; then
    echo "Diagnostics left out (FP4S_DEADLINE $DEADLINE s)"
else
r=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
echo "Diagnostics at $last threads (plain read $r s):"
echo "- fp4-decompose nvfp4 --keep 0 (read twice): $(best "$D" -f nvfp4 --keep 0 --json "$X") s"
echo "- fp4-decompose nvfp4 --keep 2048 (read once, the input kept): $(best "$D" -f nvfp4 --keep 2048 --json "$X") s"
cold() { dd if="$X" iflag=nocache count=0 status=none && "$@"; }
left=$(cold fincore -nb -o RES "$X" 2>/dev/null | tr -d ' ') # where dropping works (not tmpfs): 0 or nearly
echo "- cold cache ($(du -h "$X" | cut -f1) input, ${left:-unknown (no fincore)} bytes of it left in the page cache after a drop):" \
     "plain read (cat) $(best cold cat "$X") s, fp4-decompose nvfp4 (auto: read twice, the input fits in memory)" \
     "$(best cold "$D" -f nvfp4 --json "$X") s, --keep 2048 $(best cold "$D" -f nvfp4 --keep 2048 --json "$X") s"
cat "$X" > /dev/null
blas=$(LD_DEBUG=files "$Q" --version 2>&1 >/dev/null | grep -o 'file=[^ ]*blas[^ ]*' | grep -v gslcblas | sort -u | tr '\n' ' ')
echo "- libraries with 'blas' in their name loaded by fp4-quant --version: ${blas:-none} (LD_DEBUG=files)"
echo "- OPENBLAS_NUM_THREADS=1: fp4-quant summary $(OPENBLAS_NUM_THREADS=1 best "$Q" -f mxfp4 -p ocp "$X") s"
fi
if [ $((SECONDS - T0 + 5)) -le "$DEADLINE" ] && command -v strace >/dev/null; then
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
