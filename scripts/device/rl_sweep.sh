#!/bin/sh
# The RL testbed's QUADS sweep over seeds (issue 31 item 5; fp4-rl(1), THE DEMO,
# Over seeds; bench/RESULTS.md, section RL testbed) on the GPU machine's CPU
# cores (no GPU used). One device call, from a checkout with .device carried
# (its debs give GSL and jansson; the host has its own OpenBLAS and HDF5):
#
#   sh scripts/device/rl_sweep.sh
#
# 1. builds fp4-rl (CPU only, GSL on: the confidence intervals and tests) in
#    $FP4S_RL_BUILD (default build-rl-seeds), unpacking .device/debs into
#    .device/rl-seeds-root when pkg-config lacks GSL or jansson;
# 2. runs, with the outlier structure on (the default),
#      fp4-rl --demo --seeds $RL_SEEDS --lr $RL_LR --steps $RL_STEPS \
#             --demo-runs bf16,nvfp4,quads-r0.05,quads,quads-r1,mxfp4,mxfp4-mbs-of
#    on FP4S_THREADS = $RL_PAR processes at once (default nproc): for each of the
#    seeds 1..RL_SEEDS a warm start, then the 7 arms from it (BF16; naive NVFP4;
#    QUADS, the wfq trainer with rac at R = 0.05, 0.25 and 1; naive MXFP4;
#    MXFP4 with mbs:128 + of:0.5), one thread each, in the demo's regime (width
#    64, 16 prompts x 8 samples, held-out accuracy every 20 steps on 128
#    prompts). At RL_TOTAL seconds from the start (330) fp4-rl gets SIGTERM: it
#    stops its runs after their step, and the summary covers the steps done (the
#    script then says which runs are short);
# 3. prints the summary: per arm the final reward's mean over seeds with its 95%
#    Student t-interval, the paired difference against BF16 with its interval,
#    the paired t-test and the exact sign test, the final mismatch, the onsets;
#    and the outlier measures. The CPU, the commit and the command head it.
#
# Expected: 8 seeds x 7 arms = 56 runs of 200 steps on 16 cores, about 4 to 5
# minutes in all (a run of the demo's model takes 0.18-0.23 s a step on one
# core of that machine with 16 runs at once; the build about a minute).
#
# $OUT (the device tool's output folder, else ./out-rl-seeds) receives
# summary.txt, rl_seeds.log (everything), rl_seeds.json (fp4-rl's --json) and
# rl_seeds.tar.gz (every run's --stats table <arm>.s<seed>.tsv, the per-arm
# means <arm>.dat, demo.gp; not the captures).
#
# Environment: RL_SEEDS (8), RL_STEPS (200), RL_LR (3e-4), RL_TOTAL (330), RL_PAR
# (nproc), RL_SMOKE=1 (a tiny model, 2 seeds, 6 steps: a check of this script on
# any machine), RL_RUNS (the --demo-runs list above).
set -eu
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/out-rl-seeds}
B=${FP4S_RL_BUILD:-build-rl-seeds}
SEEDS=${RL_SEEDS:-8}
STEPS=${RL_STEPS:-200}
LR=${RL_LR:-3e-4}
TOTAL=${RL_TOTAL:-330}
PAR=${RL_PAR:-$(nproc)}
RUNS=${RL_RUNS:-bf16,nvfp4,quads-r0.05,quads,quads-r1,mxfp4,mxfp4-mbs-of}
T0=$(date +%s)
mkdir -p "$OUT"
LOG=$OUT/rl_seeds.log
: > "$LOG"

build() {
    if ! pkg-config --exists gsl || ! pkg-config --exists jansson; then
        ls .device/debs/*.deb > /dev/null 2>&1 ||
            { echo "rl_sweep: pkg-config lacks GSL or jansson and there is no .device/debs (carry .device)"; return 1; }
        ROOT=$(pwd)/.device/rl-seeds-root
        rm -rf "$ROOT"
        mkdir -p "$ROOT"
        for d in .device/debs/*.deb; do dpkg -x "$d" "$ROOT"; done
        # every /usr in their pkg-config files is an install path
        pcp=$(find "$ROOT" -name '*.pc' -exec sed -i "s|/usr|$ROOT/usr|g" {} \; -exec dirname {} \; | sort -u | paste -sd: -)
        ldp=$(find "$ROOT" -name '*.so*' -exec dirname {} \; | sort -u | paste -sd: -)
        export PKG_CONFIG_PATH="$pcp${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        export LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LIBRARY_PATH="$ldp${LIBRARY_PATH:+:$LIBRARY_PATH}"
        export CPATH="$ROOT/usr/include${CPATH:+:$CPATH}"
        echo "rl_sweep: packages from .device/debs"
    fi
    export CPATH="/usr/include/hdf5/serial${CPATH:+:$CPATH}"
    if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
        mkdir -p "$B-pc"
        printf 'Name: hdf5\nDescription: shim\nVersion: %s\nRequires: hdf5-serial\n' \
            "$(pkg-config --modversion hdf5-serial)" > "$B-pc/hdf5.pc"
        export PKG_CONFIG_PATH="$(pwd)/$B-pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    fi
    for p in openblas cblas gsl jansson hdf5; do
        pkg-config --exists $p && echo "rl_sweep: pkg-config $p $(pkg-config --modversion $p)"
    done
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dtests=disabled -Dgsl=enabled -Dblas=enabled -Djson=enabled \
        -Dcuda=disabled -Dgnuplot=disabled -Dmpi=disabled
    ninja -C "$B" -j "$(nproc)" tools/fp4-rl
}

{
echo "rl_sweep: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
echo "rl_sweep: CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
build || exit 1
echo "rl_sweep: built in $(( $(date +%s) - T0 )) s ($B: -Dcuda=disabled -Dgsl=enabled, the fixed-order GEMM of fp4-rl's default)"
} >> "$LOG" 2>&1 || { tail -30 "$LOG"; exit 1; }
case $B in /*) RL=$B/tools/fp4-rl ;; *) RL=$(pwd)/$B/tools/fp4-rl ;; esac

SCR=$(mktemp -d "${TMPDIR:-/tmp}/rl_seeds.XXXXXX")
trap 'rm -rf "$SCR"' EXIT INT TERM
D=$SCR/demo
set -- --demo --seeds "$SEEDS" --lr "$LR" --steps "$STEPS" --demo-runs "$RUNS"
if [ "${RL_SMOKE:-0}" = 1 ]; then
    set -- --demo --seeds 2 --steps 6 --demo-runs "$RUNS" --width 32 --prompts 3 --group 4 --sft-max-steps 3 \
        --eval-every 3 --eval-prompts 8
fi
LEFT=$(( TOTAL - ($(date +%s) - T0) ))
[ "$LEFT" -ge 30 ] || { echo "rl_sweep: only $LEFT s left after the build (RL_TOTAL=$TOTAL)"; exit 1; }
echo "rl_sweep: FP4S_THREADS=$PAR fp4-rl $* --json -o DIR (SIGTERM after $LEFT s)" >> "$LOG"
set +e
FP4S_THREADS=$PAR OPENBLAS_NUM_THREADS=1 timeout -k 60 -s TERM "$LEFT" "$RL" "$@" --json --quiet -o "$D" \
    > "$OUT/rl_seeds.json" 2>> "$LOG"
rc=$?
set -e
echo "rl_sweep: fp4-rl exit $rc after $(( $(date +%s) - T0 )) s in all" >> "$LOG"
if [ -f "$D/summary.txt" ]; then
    {
        grep '^rl_sweep: \(20\|CPU\|built\|FP4S\|fp4-rl\)' "$LOG"
        cat "$D/summary.txt"
        # runs stopped by the deadline: their steps
        short=$(for f in "$D"/*.tsv; do
                    n=$(($(wc -l < "$f") - 1))
                    [ "$n" -lt "$STEPS" ] && echo "$(basename "$f" .tsv) $n"
                done)
        if [ -n "$short" ] && [ "${RL_SMOKE:-0}" != 1 ]; then
            echo "runs stopped by the deadline before $STEPS steps (their final tenth is earlier):"
            echo "$short"
        fi
    } > "$OUT/summary.txt"
    tar -czf "$OUT/rl_seeds.tar.gz" -C "$D" $(cd "$D" && ls ./*.tsv ./*.dat demo.gp summary.txt)
fi
cat "$OUT/summary.txt" 2> /dev/null || tail -30 "$LOG"
# stopped by the deadline (timeout: 124) with its summary written: the table holds the steps done
if [ "$rc" = 124 ] && [ -f "$OUT/summary.txt" ]; then
    echo "rl_sweep: the deadline stopped fp4-rl (RL_TOTAL=$TOTAL); the table covers the steps done"
    exit 0
fi
exit $rc
