#!/bin/sh
# The RL testbed's sweep on the GPU machine's CPU cores (fp4-rl(1), section
# RESULTS; bench/RESULTS.md, section RL testbed). One command per phase, each
# finishing within RL_TOTAL seconds of wall time (default 235) on 16 cores:
# builds fp4-rl and fp4-mismatch (CPU only), checks that a run is the same on 1
# and 4 threads, runs the phase's 16 runs in parallel (one thread each) until
# their steps are done or the time is up, and summarises. Everything goes to
# $OUT (the device tool's output folder), or ./out-rl.
#
#   sh scripts/gpu/rl_sweep.sh [a|b|c|d|t]        (default a)
#
# Every run: the demo's model (width 64, 2 layers, 4 experts top-2, 233,664
# parameters; task sort), 16 prompts x 8 samples, RL_STEPS GRPO steps (600),
# held-out accuracy every 20 steps on 256 prompts; run names are
# <config>.<numerics>.s<seed>.
#   a  lr 3e-4 (where one seed of naive NVFP4 collapsed and BF16 did not),
#      seeds 1-4: bf16, naive nvfp4, QUADS (wfq trainer + rac) at R = 0.25 and 1
#   b  lr 2e-4, seeds 1-4: bf16, nvfp4, naive mxfp4, mxfp4 + mbs:128 + of:0.5
#   c  lr 2e-4, seeds 1-2: the other corrections and numerics: nvfp4 with token
#      TIS and MIS (C = 2), with the symmetric QAT trainer (w4a4qat), with the
#      wfq trainer alone (no rac), with router and lm_head in BF16
#      (--quant-sites qkv,o,experts), with aqn:0.01 (QeRL's schedule); an FP8
#      rollout; bf16 with the engine keeping activations in BF16 (splitk-bf16)
#   d  model size and experts at lr 2e-4, seed 1, bf16 against nvfp4: 8
#      experts; width 96 and 128; width 128 with 8 experts; 4 layers; top-1 of 4;
#      lr 1e-4 at width 64 and 128 (the wider ones do fewer steps in the time)
#   t  a check of this script: 2 tiny runs (RL_TOTAL=90 is enough)
#
# The runs of a phase start together and are stopped by SIGTERM at the
# deadline if their steps are not done: fp4-rl then keeps the steps done and
# rl_sweep.py compares the runs of one config over their common steps.
# Captures are written to a scratch directory, read by fp4-mismatch (per-step
# metrics of every 10th step and the onset, kept) and deleted.
#
# $OUT receives: summary.txt (the tables), build.log, rl_sweep_<phase>.log,
# rl_sweep_<phase>.tar.gz (per run: <run>.tsv, the per-step scalars;
# <run>.mm.json and .mm.csv, fp4-mismatch's metrics and onset; <run>.err).
# Here: tar -xzf rl_sweep_a.tar.gz && python3 scripts/gpu/rl_sweep.py a
#
# Build: the system's OpenBLAS (or any cblas) and jansson when pkg-config
# finds them, else the Debian packages in .device/debs (dpkg -x into
# .device/rl-root): jansson, and libopenblas0-pthread, libopenblas-pthread-dev,
# libgfortran5, libquadmath0 for the BLAS. No CUDA, no tests.
#
# Environment: RL_TOTAL (235) wall seconds in all; RL_STEPS (600); RL_PAR
# (nproc) runs at once (the phase's runs are cut into waves of RL_PAR and the
# time shared between the waves); RL_SMOKE=1 makes every run tiny (a check of
# the job lines on a small machine); RL_FORCE_DEBS=1 builds against .device/debs
# even where pkg-config finds the system's packages; FP4S_RL_BUILD (build-rl);
# RL_ONLY (an extended regular expression) runs only the jobs whose name it
# matches whole, e.g. RL_ONLY='.*bf16.*' to repeat the BF16 side of a phase;
# RL_LIST=1 prints the phase's job lines and runs nothing (tests/rl/sweep_jobs.sh).
set -eu
cd "$(dirname "$0")/../.."
PHASE=${1:-a}
case $PHASE in
a|b|c|d|t) ;;
*) echo "rl_sweep: unknown phase '$PHASE' (a, b, c, d or t)" >&2; exit 2 ;;
esac
OUT=${OUT:-$(pwd)/out-rl}
T0=$(date +%s)

# ---- the build ---------------------------------------------------------------------------
rl_env() { # pkg-config, headers and libraries of the carried .debs
    ROOT=$(pwd)/.device/rl-root
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    for d in .device/debs/*.deb; do dpkg -x "$d" "$ROOT"; done
    # every /usr in the pkg-config files is an install path
    pcp=$(find "$ROOT" -name '*.pc' -exec sed -i "s|/usr|$ROOT/usr|g" {} \; -exec dirname {} \; | sort -u | paste -sd: -)
    ldp=$(find "$ROOT" -name '*.so*' -exec dirname {} \; | sort -u | paste -sd: -)
    export PKG_CONFIG_PATH="$pcp${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    # the linker resolves libopenblas's own libraries (libgfortran) through these
    export LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$ldp${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export CPATH="$ROOT/usr/include${CPATH:+:$CPATH}"
}
rl_build() {
    B=$1
    export CPATH="/usr/include/hdf5/serial${CPATH:+:$CPATH}"
    if [ "${RL_FORCE_DEBS:-0}" = 1 ] || ! pkg-config --exists jansson || \
       ! { pkg-config --exists openblas || pkg-config --exists cblas; }; then
        if ls .device/debs/*.deb >/dev/null 2>&1; then
            rl_env
            echo "rl_sweep: packages from .device/debs: $(ls .device/debs | tr '\n' ' ')"
        else
            echo "rl_sweep: no jansson or no OpenBLAS/cblas for pkg-config, and no .device/debs to unpack"
            return 1
        fi
    fi
    if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
        mkdir -p "$B-pc"
        printf 'Name: hdf5\nDescription: shim\nVersion: %s\nRequires: hdf5-serial\n' \
            "$(pkg-config --modversion hdf5-serial)" > "$B-pc/hdf5.pc"
        PKG_CONFIG_PATH="$(pwd)/$B-pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        export PKG_CONFIG_PATH
    fi
    for p in openblas cblas jansson hdf5; do
        pkg-config --exists $p && echo "rl_sweep: pkg-config $p $(pkg-config --modversion $p)"
    done
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dtests=disabled -Dgsl=disabled -Dblas=enabled -Djson=enabled \
        -Dcuda=disabled -Dgnuplot=disabled
    ninja -C "$B" -j "$(nproc)" tools/fp4-rl tools/fp4-mismatch
}

# The phase's jobs on stdout, one a line: NAME then fp4-rl options (the model and
# the regime first). make_jobs PHASE STEPS
make_jobs() {
{
REGIME="--width 64 --prompts 16 --group 8 --steps $2 --eval-every 20 --eval-prompts 256"
# no trailing blank: xargs -L 1 joins a line that ends in one with the next
job() { printf '%s\n' "$1 $REGIME $2" | sed 's/[[:space:]]*$//'; }
for_seeds() { # config, numerics, seeds, options
    for s in $3; do job "$1.$2.s$s" "--seed $s $4"; done
}
NVFP4="--rollout nvfp4"
QUADS="--rollout nvfp4 --trainer wfq --remedy"
case $1 in
a)
    for s in 1 2 3 4; do
        for_seeds lr3e-4 bf16 "$s" "--lr 3e-4"
        for_seeds lr3e-4 nvfp4 "$s" "--lr 3e-4 $NVFP4"
        for_seeds lr3e-4 quads25 "$s" "--lr 3e-4 $QUADS rac:0.25"
        for_seeds lr3e-4 quads100 "$s" "--lr 3e-4 $QUADS rac:1"
    done ;;
b)
    for s in 1 2 3 4; do
        for_seeds lr2e-4 bf16 "$s" "--lr 2e-4"
        for_seeds lr2e-4 nvfp4 "$s" "--lr 2e-4 $NVFP4"
        for_seeds lr2e-4 mxfp4 "$s" "--lr 2e-4 --rollout mxfp4"
        for_seeds lr2e-4 mxfp4-mbs-of "$s" "--lr 2e-4 --rollout mxfp4 --remedy mbs:128+of:0.5"
    done ;;
c)
    for s in 1 2; do
        for_seeds lr2e-4 nvfp4-tis "$s" "--lr 2e-4 $NVFP4 --is-corr tis"
        for_seeds lr2e-4 nvfp4-mis "$s" "--lr 2e-4 $NVFP4 --is-corr mis"
        for_seeds lr2e-4 nvfp4-w4a4qat "$s" "--lr 2e-4 $NVFP4 --trainer w4a4qat"
        for_seeds lr2e-4 nvfp4-wfq "$s" "--lr 2e-4 $NVFP4 --trainer wfq"
        for_seeds lr2e-4 nvfp4-bf16-router-head "$s" "--lr 2e-4 $NVFP4 --quant-sites qkv,o,experts"
        for_seeds lr2e-4 nvfp4-aqn "$s" "--lr 2e-4 $NVFP4 --remedy aqn:0.01"
        for_seeds lr2e-4 fp8 "$s" "--lr 2e-4 --rollout fp8"
        for_seeds lr2e-4 bf16-splitk-bf16 "$s" "--lr 2e-4 --drift splitk-bf16"
    done ;;
d)
    for n in bf16 nvfp4; do
        o=""; [ $n = nvfp4 ] && o=$NVFP4
        job "w64-e8.$n.s1" "--lr 2e-4 --experts 8 $o"
        job "w96-e4.$n.s1" "--lr 2e-4 --width 96 $o"
        job "w128-e4.$n.s1" "--lr 2e-4 --width 128 $o"
        job "w128-e8.$n.s1" "--lr 2e-4 --width 128 --experts 8 $o"
        job "w64-l4.$n.s1" "--lr 2e-4 --layers 4 $o"
        job "w64-top1.$n.s1" "--lr 2e-4 --top-k 1 $o"
        job "w64-lr1e-4.$n.s1" "--lr 1e-4 $o"
        job "w128-lr1e-4.$n.s1" "--lr 1e-4 --width 128 $o"
    done ;;
t)
    job "t.bf16.s1" "--width 32 --prompts 4 --steps 100000 --sft-max-steps 10"
    job "t.nvfp4.s1" "--width 32 --prompts 4 --rollout nvfp4 --steps 100000 --sft-max-steps 10" ;;
esac
} | if [ "${RL_SMOKE:-0}" = 1 ]; then # later options win: every run tiny
    sed 's/$/ --width 32 --prompts 2 --group 4 --steps 3 --sft-max-steps 3 --eval-every 2 --eval-prompts 8/'
else
    cat
fi
}

# RL_LIST=1: the phase's job lines (after RL_ONLY and RL_SMOKE) on stdout, nothing run
if [ "${RL_LIST:-0}" = 1 ]; then
    make_jobs "$PHASE" "${RL_STEPS:-600}" | grep -E "^(${RL_ONLY:-.*})( |\$)"
    exit
fi
mkdir -p "$OUT"

run_phase() {
B=${FP4S_RL_BUILD:-build-rl}
TOTAL=${RL_TOTAL:-235}
STEPS=${RL_STEPS:-600}
PAR=${RL_PAR:-$(nproc)}
rl_build "$B" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
grep '^rl_sweep:' "$OUT/build.log" || true
RL=$(pwd)/$B/tools/fp4-rl
MM=$(pwd)/$B/tools/fp4-mismatch
[ -x "$RL" ] || { echo "rl_sweep: $RL was not built: see $OUT/build.log"; exit 1; }
echo "rl_sweep: phase $PHASE, $(nproc) CPUs, $PAR runs at once, $STEPS steps, $TOTAL s in all; built in $(( $(date +%s) - T0 )) s"
lscpu | grep -E "Model name|^CPU\(s\)" || true
SCR=$(mktemp -d "${TMPDIR:-/tmp}/rl_sweep.XXXXXX")
trap 'rm -rf "$SCR"' EXIT INT TERM
RUNS=$SCR/$PHASE
mkdir -p "$RUNS"

# 1. a run is the same on 1 and 4 threads (the per-step scalars, times aside,
#    and every step's mismatch metrics); both at once
tiny="--width 64 --prompts 8 --steps 3 --sft-max-steps 20 --eval-every 2 --eval-prompts 64 --rollout nvfp4 --trainer wfq --remedy rac:0.25"
for t in 1 4; do
    # shellcheck disable=SC2086
    FP4S_THREADS=$t "$RL" $tiny --stats "$SCR/det$t.tsv" -o "$SCR/det$t.h5" --quiet &
done
wait
for t in 1 4; do
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

# 2. the jobs of the phase
JOBS=$SCR/jobs.txt
make_jobs "$PHASE" "$STEPS" | grep -E "^(${RL_ONLY:-.*})( |\$)" > "$JOBS" || {
    echo "rl_sweep: no run of phase $PHASE matches RL_ONLY='${RL_ONLY:-}'"; exit 2; }
NJ=$(wc -l < "$JOBS")
WAVES=$(( (NJ + PAR - 1) / PAR ))
# the time left, less 35 s: the step under way at SIGTERM (a second or two; SIGKILL
# after 20), fp4-mismatch, the summary and the archive
LEFT=$(( TOTAL - ($(date +%s) - T0) - 35 ))
BUDGET=$(( LEFT / WAVES ))
[ "$BUDGET" -ge 20 ] || { echo "rl_sweep: only $LEFT s left for $WAVES waves of runs (RL_TOTAL=$TOTAL)"; exit 1; }
echo "rl_sweep: $NJ runs, $PAR at a time ($WAVES waves of at most $BUDGET s)"

# 3. run them: one thread each, stopped at the budget; keep the TSV and the
#    mismatch metrics, drop the capture
cat > "$SCR/one.sh" <<'ONE'
#!/bin/sh
name=$1; shift
FP4S_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout -k 20 -s TERM "$BUDGET" "$RL" "$@" --act-every 0 \
    --stats "$RUNS/$name.tsv" -o "$SCR/$name.h5" --quiet 2> "$RUNS/$name.err"
rc=$?
if [ -f "$SCR/$name.h5" ]; then
    "$MM" --json --every 10 "$SCR/$name.h5" > "$RUNS/$name.mm.json" 2>> "$RUNS/$name.err"
    "$MM" --csv --every 10 "$SCR/$name.h5" > "$RUNS/$name.mm.csv" 2>> "$RUNS/$name.err"
fi
rm -f "$SCR/$name.h5"
n=0; [ -f "$RUNS/$name.tsv" ] && n=$(($(wc -l < "$RUNS/$name.tsv") - 1))
echo "$name: exit $rc, $n steps"
ONE
export RL MM RUNS SCR BUDGET
xargs -P "$PAR" -L 1 sh "$SCR/one.sh" < "$JOBS" | tee "$SCR/ran.txt"
NR=$(grep -c ': exit ' "$SCR/ran.txt" || true)
[ "$NR" -eq "$NJ" ] || echo "rl_sweep: WARNING: $NR runs reported for $NJ jobs"

# 4. the summary, and the runs' files in one archive
python3 scripts/gpu/rl_sweep.py "$RUNS" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
tar -czf "$OUT/rl_sweep_$PHASE.tar.gz" -C "$SCR" "$PHASE"
echo "rl_sweep: phase $PHASE done in $(( $(date +%s) - T0 )) s"
}
# the whole log to $OUT, its end on stdout
set +e
( run_phase ) > "$OUT/rl_sweep_$PHASE.log" 2>&1
rc=$?
tail -60 "$OUT/rl_sweep_$PHASE.log"
exit $rc
