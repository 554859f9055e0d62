#!/bin/sh
# The RL testbed's sweep on the GPU machine's CPU cores (fp4-rl(1), section
# RESULTS; bench/RESULTS.md, section RL testbed). One command: builds
# fp4-rl and fp4-mismatch, checks that a run is the same on 1 and 4 threads,
# times one step, then runs a phase's grid of runs in parallel (one thread
# each) for a fixed wall-time budget, and summarises. Everything goes to $OUT
# (the device tool's output folder), or ./out-rl.
#
#   sh scripts/gpu/rl_sweep.sh [a|b|c]        (default a; each fits 10 minutes)
#
#   a  the faithful regime (width 128, 2 layers, 4 experts top-2, 64 prompts x 8,
#      0.93M parameters) at lr 1e-4 and 3e-4: bf16, naive nvfp4, nvfp4 with a
#      wfq trainer alone, QUADS (wfq + rac) at R = 0.25 and 1, nvfp4 with token
#      TIS, naive mxfp4, mxfp4 + mbs:128 + of:0.5 (16 runs)
#   b  model size and experts at lr 1e-4: widths 64 / 128 / 256, 8 experts,
#      4 layers x 8 experts (3.4M), bf16 against naive nvfp4; and lr 2e-4 at
#      width 128 (16 runs)
#   c  the demo's regime (width 64, 16 prompts) run long: lr 1e-4 / 2e-4 / 3e-4,
#      bf16, nvfp4, quads, mxfp4, mxfp4-mbs-of, and nvfp4 with symmetric QAT
#      (16 runs)
#   t  a check of this script (2 tiny runs; RL_BUDGET=20 makes it quick)
#
# Each run is stopped by SIGTERM at the budget (RL_BUDGET seconds, default
# 420) if it has not finished its steps: fp4-rl then keeps the steps done.
# Captures are written to a scratch directory, read by fp4-mismatch (per-step
# metrics and onset, kept), and deleted (they are large). $OUT receives four
# files: summary.txt, build.log, rl_sweep_<phase>.log and rl_sweep_<phase>.tar.gz
# (per run: <run>.tsv, the per-step scalars; <run>.mm.json and .mm.csv,
# fp4-mismatch's metrics of every 10th step and its onset; <run>.err).
# Here: tar -xzf rl_sweep_a.tar.gz && python3 scripts/gpu/rl_sweep.py a
set -eu
cd "$(dirname "$0")/../.."
PHASE=${1:-a}
OUT=${OUT:-$(pwd)/out-rl}
mkdir -p "$OUT"
run_phase() {
B=${FP4S_RL_BUILD:-build-rl}
BUDGET=${RL_BUDGET:-420}
t0=$(date +%s)
TARGETS="tools/fp4-rl tools/fp4-mismatch"
. scripts/gpu/build.sh
# shellcheck disable=SC2086
gpu_build "$B" "-Dtests=disabled -Dgsl=disabled -Dblas=enabled" $TARGETS > "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; exit 1; }
[ -f .device/env.sh ] && . .device/env.sh
RL=$(pwd)/$B/tools/fp4-rl
MM=$(pwd)/$B/tools/fp4-mismatch
[ -x "$RL" ] || { echo "rl_sweep: $RL was not built (no BLAS or no jansson?): see $OUT/build.log"; exit 1; }
echo "rl_sweep: phase $PHASE, $(nproc) CPUs, budget $BUDGET s per run; $("$RL" --version | tail -1)"
lscpu | grep -E "Model name|^CPU\(s\)" || true
SCR=$(mktemp -d "${TMPDIR:-/tmp}/rl_sweep.XXXXXX")
trap 'rm -rf "$SCR"' EXIT INT TERM
RUNS=$SCR/$PHASE
mkdir -p "$RUNS"

# 1. a run is the same on 1 and 4 threads (the per-step scalars, times aside,
#    and every step's mismatch metrics)
tiny="--width 64 --prompts 8 --steps 4 --sft-max-steps 30 --eval-every 2 --rollout nvfp4 --trainer wfq --remedy rac:0.25"
for t in 1 4; do
    # shellcheck disable=SC2086
    FP4S_THREADS=$t "$RL" $tiny --stats "$SCR/det$t.tsv" -o "$SCR/det$t.h5" --quiet
    "$MM" --csv "$SCR/det$t.h5" | sed 's/^det[14],/det,/' > "$SCR/det$t.csv"
    # every column but the times (t_*)
    awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /^t_/ }
                 { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s $i "\t"; print s }' \
        "$SCR/det$t.tsv" > "$SCR/det$t.cut"
done
if cmp -s "$SCR/det1.csv" "$SCR/det4.csv" && cmp -s "$SCR/det1.cut" "$SCR/det4.cut"; then
    echo "determinism: 1 and 4 threads give the same log-prob metrics and scalars: ok"
else
    echo "determinism: 1 and 4 threads DIFFER"; diff "$SCR/det1.cut" "$SCR/det4.cut" | head; exit 1
fi

# 2. the jobs of the phase: NAME then fp4-rl options
JOBS=$SCR/jobs.txt
: > "$JOBS"
job() { echo "$*" >> "$JOBS"; }
numerics() { # $1 prefix, then the options common to the group
    p=$1; shift
    job "$p-bf16 $*"
    job "$p-nvfp4 --rollout nvfp4 $*"
    job "$p-nvfp4-wfq --rollout nvfp4 --trainer wfq $*"
    job "$p-quads25 --rollout nvfp4 --trainer wfq --remedy rac:0.25 $*"
    job "$p-quads100 --rollout nvfp4 --trainer wfq --remedy rac:1 $*"
    job "$p-nvfp4-tis --rollout nvfp4 --is-corr tis $*"
    job "$p-mxfp4 --rollout mxfp4 $*"
    job "$p-mxfp4-mbs-of --rollout mxfp4 --remedy mbs:128+of:0.5 $*"
}
case $PHASE in
a)
    numerics d128-lr1e-4 --lr 1e-4 --steps 2000
    numerics d128-lr3e-4 --lr 3e-4 --steps 2000 ;;
b)
    for w in 64 128 256; do
        job "w$w-e4-bf16 --width $w --steps 2000"
        job "w$w-e4-nvfp4 --width $w --rollout nvfp4 --steps 2000"
    done
    for w in 64 128; do
        job "w$w-e8-bf16 --width $w --experts 8 --steps 2000"
        job "w$w-e8-nvfp4 --width $w --experts 8 --rollout nvfp4 --steps 2000"
    done
    job "w128-l4e8-bf16 --layers 4 --experts 8 --steps 2000"
    job "w128-l4e8-nvfp4 --layers 4 --experts 8 --rollout nvfp4 --steps 2000"
    job "w128-lr2e-4-bf16 --lr 2e-4 --steps 2000"
    job "w128-lr2e-4-nvfp4 --lr 2e-4 --rollout nvfp4 --steps 2000"
    job "w128-lr2e-4-quads25 --lr 2e-4 --rollout nvfp4 --trainer wfq --remedy rac:0.25 --steps 2000"
    job "w128-lr2e-4-mxfp4 --lr 2e-4 --rollout mxfp4 --steps 2000" ;;
c)
    for lr in 1e-4 2e-4 3e-4; do
        job "demo-lr$lr-bf16 --width 64 --prompts 16 --lr $lr --steps 3000"
        job "demo-lr$lr-nvfp4 --width 64 --prompts 16 --lr $lr --rollout nvfp4 --steps 3000"
        job "demo-lr$lr-quads25 --width 64 --prompts 16 --lr $lr --rollout nvfp4 --trainer wfq --remedy rac:0.25 --steps 3000"
        job "demo-lr$lr-mxfp4 --width 64 --prompts 16 --lr $lr --rollout mxfp4 --steps 3000"
        job "demo-lr$lr-mxfp4-mbs-of --width 64 --prompts 16 --lr $lr --rollout mxfp4 --remedy mbs:128+of:0.5 --steps 3000"
    done
    job "demo-lr2e-4-w4a4qat --width 64 --prompts 16 --lr 2e-4 --rollout nvfp4 --trainer w4a4qat --steps 3000" ;;
t)
    job "t-bf16 --width 32 --prompts 4 --steps 100000 --sft-max-steps 10"
    job "t-nvfp4 --width 32 --prompts 4 --rollout nvfp4 --steps 100000 --sft-max-steps 10" ;;
*) echo "rl_sweep: unknown phase '$PHASE' (a, b, c or t)"; exit 2 ;;
esac
echo "rl_sweep: $(wc -l < "$JOBS") runs, $(nproc) at a time"

# 3. run them: one thread each, stopped at the budget; keep the TSV and the
#    mismatch metrics, drop the capture
cat > "$SCR/one.sh" <<'ONE'
#!/bin/sh
name=$1; shift
FP4S_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout -s TERM "$BUDGET" "$RL" "$@" --eval-every 20 --act-every 0 \
    --stats "$RUNS/$name.tsv" -o "$SCR/$name.h5" --quiet 2> "$RUNS/$name.err"
rc=$?
"$MM" --json --every 10 "$SCR/$name.h5" > "$RUNS/$name.mm.json" 2>> "$RUNS/$name.err"
"$MM" --csv --every 10 "$SCR/$name.h5" > "$RUNS/$name.mm.csv" 2>> "$RUNS/$name.err"
rm -f "$SCR/$name.h5"
echo "$name: exit $rc, $(($(wc -l < "$RUNS/$name.tsv") - 1)) steps"
ONE
export RL MM RUNS SCR BUDGET
# shellcheck disable=SC2016
xargs -P "$(nproc)" -L 1 sh "$SCR/one.sh" < "$JOBS"

# 4. the summary, and the runs' files in one archive
python3 scripts/gpu/rl_sweep.py "$RUNS" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
tar -czf "$OUT/rl_sweep_$PHASE.tar.gz" -C "$SCR" "$PHASE"
echo "rl_sweep: phase $PHASE done in $(( $(date +%s) - t0 )) s"
}
# the whole log to $OUT, its end on stdout
( run_phase ) > "$OUT/rl_sweep_$PHASE.log" 2>&1
rc=$?
tail -45 "$OUT/rl_sweep_$PHASE.log"
exit $rc
