#!/bin/sh
# tool_outputs.sh [--threads-cases] OUTDIR: run the quantizer, decomposition,
# channel and mismatch tools over the shipped datasets (and a few generated
# tensors with ties, non-finite values and several chunks) and leave every
# report and file they write in OUTDIR: JSON, CSV, tables, HDF5 reports,
# packed quantized files and .npy codes, scales and dequantized values.
# --threads-cases: only fp4-quant's runs over act.npy, the input large enough
# to be split over threads. The fp4-* tools are taken from PATH, so the same list runs
# against any build (force_ref.sh runs it in one build at two CPU levels and
# three thread counts; compare a branch with main by running it with each
# build's tools/ first on PATH).
set -eu
act_only=0
if [ "${1:-}" = --threads-cases ]; then act_only=1; shift; fi
OUT=${1:?usage: tool_outputs.sh [--threads-cases] OUTDIR}
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
D=$SRC/datasets
mkdir -p "$OUT"
cd "$OUT"
log() { printf '%s\n' "$*" >> commands.txt; }
# run NAME CMD...: stdout to NAME (the exit status is kept in NAME.rc)
run() {
    name=$1; shift
    log "$name: $*"
    set +e
    "$@" > "$name" 2> "$name.err"
    echo $? > "$name.rc"
    set -e
}

PY=""
# the tests' python (meson's FP4S_PYTHON: -Dpython, e.g. a virtual environment's) first
for p in "${FP4S_PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$p" ] || continue
    if "$p" -c 'import numpy' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "tool_outputs.sh: needs python3 with numpy" >&2; exit 1; }
"$PY" - <<'EOF'
import numpy as np
rng = np.random.default_rng(2024)
# heavy-tailed activations with outlier channels (several read chunks with
# --chunk and --chunk-rows)
a = rng.standard_t(3, size=(1024, 512)).astype(np.float32)
a[:, 7] *= 40; a[:, 300] *= 25
np.save("act.npy", a)
# E2M1 midpoints times powers of two (ties of every rule), zeros, -0,
# subnormals, huge values, NaN and Inf blocks, a row with one nonzero
mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.0, -0.0], dtype=np.float32)
t = np.empty((96, 256), dtype=np.float32)
for r in range(t.shape[0]):
    scale = np.float32(2.0) ** np.float32(r % 40 - 20)
    t[r] = mids[(np.arange(256) + r) % mids.size] * scale * np.where(np.arange(256) % 3 == 0, -1, 1)
t[5, 40] = np.nan; t[9, 255] = np.inf; t[11, 17] = -np.inf
t[20, :] = 0.0; t[21, 33] = 1e-42; t[22, :16] = 3e38
np.save("ties.npy", t)
EOF
log "act.npy ties.npy: generated (numpy default_rng(2024))"

W=$D/weight-small.npy
CAP=$D/synth-moe.h5
SITE=layers.0.mlp.experts.0.up_proj

# ---- fp4-quant over act.npy (512K elements: split over up to 8 threads)
quant_act() {
    for f in mxfp4 nvfp4 fp8; do
        run "q-act-$f.json" fp4-quant -f "$f" --json -o "q-act-$f.h5" --dequant "q-act-$f.dq.npy" act.npy
    done
    run q-diff-mx.json fp4-quant -f mxfp4 -p ocp --diff ceil --json act.npy
    run q-2d.json fp4-quant -f nvfp4 -p te --2d --json -o q-2d.h5 act.npy
    run q-chunks.json fp4-quant -f nvfp4 -p torchao --chunk-rows 48 --json --dequant q-chunks.dq.npy act.npy
    run q-chunks-fp8.json fp4-quant -f fp8 --chunk-rows 100 --json -o q-chunks-fp8.h5 act.npy
    run q-diff-fp8.txt fp4-quant -f fp8 -p fp8-tensor --diff fp8-1x128 act.npy
}
if [ $act_only = 1 ]; then
    quant_act
    exit 0
fi

# ---- fp4-quant: every profile of every format, every output kind
fp4-quant --list-profiles --json > profiles.json
# "FORMAT PROFILE" for every profile of every format
"$PY" -c 'import json, sys
for p in json.load(open(sys.argv[1])):
    for f in p["formats"].split(","): print(f, p["profile"])' profiles.json | sort -s -k1,1 > profiles.txt
[ "$(grep -c . profiles.txt)" -ge 10 ] || { echo "tool_outputs.sh: fp4-quant --list-profiles gave too few profiles" >&2; exit 1; }
i=0
for f in mxfp4 nvfp4 fp8; do
    for p in $(awk -v f="$f" '$1 == f { print $2 }' profiles.txt); do
        for x in "$W" ties.npy; do
            i=$((i + 1))
            b=q$i-$f-$p
            run "$b.json" fp4-quant -f "$f" -p "$p" --json -o "$b.h5" --codes "$b.codes.npy" \
                --scales "$b.scales.npy" --dequant "$b.dq.npy" "$x"
        done
    done
done
quant_act
run q-diff-nv.txt fp4-quant -f nvfp4 -p te --diff torchao --show 6 ties.npy
run q-rtz.json fp4-quant -f mxfp4 -p ocp --round rtz --scale-rule even --json ties.npy

# ---- fp4-decompose: formats, groupings, tie conventions, captures
for f in mxfp4 nvfp4; do
    for by in tensor row block channel; do
        for x in act.npy ties.npy; do
            i=$((i + 1))
            run "d$i-$f-$by.json" fp4-decompose -f "$f" --by "$by" --json -o "d$i.h5" "$x"
            run "d$i-$f-$by.csv" fp4-decompose -f "$f" --by "$by" --csv "$x"
        done
    done
done
run d-ceil-in.json fp4-decompose -f mxfp4 -p ceil --dz-tie in --json ties.npy
run d-rha-out.json fp4-decompose -f mxfp4 -p microxcaling --dz-tie out --json act.npy
run d-chunk.json fp4-decompose -f nvfp4 -p torchao --chunk 65536 --json act.npy
run d-cap.json fp4-decompose -f mxfp4 -p ceil --sites 'layers.*' --steps 0,3 --json -o d-cap.h5 "$CAP"
run d-cap.txt fp4-decompose -f nvfp4 --sites "$SITE" --steps 0 --sides rollout "$CAP"

# ---- fp4-channels: scores, weights, sets
for s in residual relative deadzone; do
    run "c-$s.json" fp4-channels -f nvfp4 -p te --score "$s" --json act.npy
done
run c-hcp.json fp4-channels -f nvfp4 -p te --score hcp --weight "$CAP:/weights/$SITE" --json -o c-set.h5 \
    "$CAP:/steps/0/$SITE/rollout"
run c-top.csv fp4-channels -f mxfp4 --top 12 --csv -o c-set.json act.npy
run c-cap.txt fp4-channels -f mxfp4 -p ceil --ratio 0.25 --show 0 "$CAP:/steps/3/$SITE/trainer"

# ---- fp4-mismatch: traces and captures, every output
for t in "$D/traces/planted.csv" "$CAP" "$D/synth-tiny.h5" "$D/moe-h200.h5"; do
    i=$((i + 1))
    run "m$i.json" fp4-mismatch --json "$t"
    run "m$i.csv" fp4-mismatch --csv --by-position "$t"
    run "m$i.txt" fp4-mismatch --metric k3 "$t"
done
run m-two.json fp4-mismatch --json --metric chi2_token --is-cap 3 "$D/traces/planted.csv" "$CAP"

# ---- the other tools whose quantizer, decomposition or mismatch statistics run on the
# same kernels: fp4-remedy, fp4-compare, fp4-plot mismatch, fp4-report, fp4-rl
run r-cap.json fp4-remedy -f nvfp4 --sites "$SITE" --steps 0 --json -o r-cap.h5 "$CAP"
run r-mx.csv fp4-remedy -f mxfp4 -p ceil --act "$CAP:/steps/0/$SITE/rollout" --weight "$CAP:/weights/$SITE" --csv
run cmp-cap.json fp4-compare -f nvfp4 --sites "$SITE" --steps 0 --json "$CAP"
run cmp-mx.csv fp4-compare -f mxfp4 --sites "$SITE" --csv "$CAP"
run pm.out fp4-plot mismatch "$D/traces/planted.csv" "$CAP" -o pm.png
# the report's files, flattened; index.html without the line that says when it was written
run rep.out fp4-report "$D/synth-tiny.h5" --drill 1 --profiles ceil --remedy none,rac:0.25 -o rep --quiet
if [ -d rep ]; then
    for f in $(cd rep && find . -type f | sort); do
        g=rep$(printf '%s' "${f#.}" | tr / .)
        case $f in
        *.html) grep -v '<p class="meta">.*Written ' "rep/$f" > "$g" || true ;;
        *) cp "rep/$f" "$g" ;;
        esac
    done
    rm -rf rep
fi
# a tiny RL run with NVFP4 rollouts: the capture read back through fp4-mismatch and
# fp4-decompose, and the per-step log without its timing columns (t_*)
run rl.out fp4-rl --width 32 --prompts 3 --group 4 --steps 2 --sft-max-steps 3 --eval-every 1 --eval-prompts 8 \
    --rollout nvfp4 --act-every 1 --stats rl.stats -o rl.capture --quiet
if [ -f rl.capture ]; then
    run rl-mismatch.json fp4-mismatch --json rl.capture
    run rl-decompose.json fp4-decompose -f nvfp4 --sites '*' --json rl.capture
    awk -F '\t' 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /^t_/ }
        { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s (s == "" ? "" : "\t") $i; print s }' rl.stats > rl.tsv
    rm -f rl.capture rl.stats
fi
