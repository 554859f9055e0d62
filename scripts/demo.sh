#!/bin/sh
# The main job on the shipped data (datasets/, all synthetic): what 4-bit
# quantization does to one RL run's numbers, and where to look first.
#   1. engines disagree: the same weight through two quantizer profiles
#   2. what the error is made of: the three-way decomposition per site
#   3. which channels carry it: the compensation set QUADS-style rollouts need;
#      3b. what compensating 5% of them removes, against the Gaussian control
#   4. the symptom: rollout/trainer log-prob mismatch per step, its onset
#   5. plots of all of it in out/ (PNG + the gnuplot script and data)
#   6. all of it as one report to read: out/report/index.html (fp4-report)
# Usage: scripts/demo.sh [BUILD_DIR]   (default build; outputs in $FP4S_OUT or out/)
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${FP4S_OUT:-out}
case $B in /*) ;; *) B="$PWD/$B" ;; esac # BUILD_DIR absolute or relative to the repository
PATH="$B/tools:$PATH"
mkdir -p "$OUT"
cap=datasets/synth-moe.h5
site=layers.0.self_attn.qkv_proj

step() { printf '\n==== %s\n\n' "$*"; }

step "0. the shipped capture (synthetic, see datasets/README.md)"
fp4-capture ls "$cap" --sites "$site" --steps 0

step "1. do two engines quantize this weight alike? NVFP4: TransformerEngine vs torchao"
fp4-quant -f nvfp4 -p te --diff torchao --show 4 datasets/weight-small.npy

step "1b. MXFP4: OCP FLOOR scale rule vs the CEIL rule (cuBLAS, TRT-LLM, the decomposition paper)"
fp4-quant -f mxfp4 -p ocp --diff ceil --show 4 datasets/weight-small.npy

step "2. what the MXFP4 error of the rollout activations is made of (step 0, layer 0)"
fp4-decompose -f mxfp4 -p ceil --sites 'layers.0.*' --steps 0 --sides rollout "$cap" \
    --json > "$OUT/decompose.json"
fp4-decompose -f mxfp4 -p ceil --sites "$site" --steps 0 --sides rollout "$cap"

step "3. which activation channels carry the NVFP4 error (QUADS residual compensation set)"
fp4-channels -f nvfp4 -p te --ratio 0.125 --show 10 \
    --weight "$cap:/weights/$site" "$cap:/steps/0/$site/rollout" \
    -o "$OUT/channels-set.h5" --force  # the set of an earlier run is replaced
fp4-channels -f nvfp4 -p te --ratio 0.125 --weight "$cap:/weights/$site" \
    "$cap:/steps/0/$site/rollout" --json > "$OUT/channels.json"

step "3b. the regime: what compensating the top 5% of channels removes, outlier channels vs the Gaussian control"
# synth-moe.h5 has persistent outlier channels as real LLMs' activations do;
# synth-moe-gauss.h5 is the same capture without them (datasets/README.md, Regimes)
ctl=datasets/synth-moe-gauss.h5
if command -v fp4-remedy > /dev/null; then
    for c in "$cap" "$ctl"; do
        printf '%s, NVFP4 (vllm): vs_wfq is the error against the aligned (QAT) trainer\n' "$c"
        fp4-remedy -f nvfp4 -p vllm -r none,rac:0.05 --sites "$site" --steps 0 "$c" | awk '
            /^  (remedy|none|rac)/ { print }
            $1 == "none" { w = $3 } $1 == "rac:0.05" { r = $3 }
            END { printf "  => rac:0.05 removes %.0f%% of the error against the aligned trainer\n", 100 * (1 - r / w) }'
    done
else
    echo "fp4-remedy is not built (it needs a BLAS): the comparison is skipped"
fi
for c in "$cap" "$ctl"; do
    printf '%s: NVFP4 activation error energy held by the top 1%% of channels: ' "$c"
    fp4-channels -f nvfp4 -p te --show 1 "$c:/steps/0/$site/rollout" | awk '$1 == "1.0%" { print $3 }'
done

step "4. rollout/trainer log-prob mismatch per step, with the onset found (planted at step 50)"
fp4-mismatch --every 10 datasets/traces/planted.csv

step "5. plots"
fp4-plot mismatch datasets/traces/planted.csv -o "$OUT/mismatch.png" \
    --title "Rollout vs trainer log-prob mismatch: mean_abs per step (synthetic trace, onset planted at 50)"
fp4-plot components "$OUT/decompose.json" -o "$OUT/components.png"
fp4-plot channels "$OUT/channels.json" -o "$OUT/channels.png"
fp4-plot hist "$OUT/decompose.json" -o "$OUT/hist.png"
printf '\nWrote %s/: mismatch.png components.png channels.png hist.png (+ .gp scripts and data),\n' "$OUT"
printf 'decompose.json, channels.json, channels-set.h5 (the selected channels for the rollout side).\n'

step "6. the whole analysis as one report (profiles, decomposition, channels, rollout vs trainer, remedies, mismatch)"
# --force: the report of an earlier run of this script is replaced (only a report is)
index=$(fp4-report "$cap" --trace datasets/traces/planted.csv -o "$OUT/report" --force)
printf '\nThe report: open %s in a browser (file://%s)\n' "$index" "$(cd "$(dirname "$index")" && pwd)/index.html"
