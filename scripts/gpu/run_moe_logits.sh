#!/bin/sh
# On the GPU machine, one command: the MoE capture of run_moe.sh with the
# logits path recorded (the LM head's inputs on both sides, its weight and the
# tokens: fp4scope-capture(5)), at the shipped size, repacked for datasets/,
# checked, and analysed with fp4-remedy --logits and fp4-compare when the build
# has a BLAS. Everything goes to $OUT (the device tool's output folder).
#
#   sh scripts/gpu/run_moe_logits.sh            then, here:
#   cp "$OUT/moe-h200-logits.h5" datasets/      (about 2 MiB)
#
# The capture is the small configuration of scripts/gpu/RESULTS.md (2 layers,
# 4 experts top-2, hidden 64, ffn 128, 3 steps of 2 x 32 tokens) with the
# vocabulary cut to 512 so that the LM-head weight stays small.
set -eu
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/out-moe-logits}
export OUT
mkdir -p "$OUT"
t0=$(date +%s)
sh scripts/gpu/run_moe.sh --device cuda --hidden 64 --ffn 128 --experts 4 --steps 3 --seqs 2 --seq-len 32 \
    --vocab 512 --seed 1 > "$OUT/run_moe.log" 2>&1 || { tail -40 "$OUT/run_moe.log"; exit 1; }
tail -30 "$OUT/run_moe.log"
B=${FP4S_MOE_BUILD:-build-moe}
[ -f .device/env.sh ] && . .device/env.sh
export PATH="$(pwd)/$B/tools:$PATH"
CAP="$OUT/moe-capture.h5"
if command -v h5repack >/dev/null 2>&1; then
    h5repack -f SHUF -f GZIP=9 "$CAP" "$OUT/moe-h200-logits.h5"
else
    echo "h5repack not found: the capture is copied uncompressed"
    cp "$CAP" "$OUT/moe-h200-logits.h5"
fi
fp4-capture ls --check "$OUT/moe-h200-logits.h5" | tail -12
ls -l "$OUT/moe-h200-logits.h5"
# the analysis needs fp4-remedy and fp4-compare, built only with a BLAS
if ninja -C "$B" tools/fp4-remedy tools/fp4-compare > "$OUT/ninja-remedy.log" 2>&1; then
    L=none,rac:0.125,rac:0.25,rac:0.5,rac:0.75,rac:1,rac:1:bf16,mbs:128,of:0.5,keep:1,aqn:0.01
    fp4-remedy -f nvfp4 -p te --logits --remedy "$L" "$OUT/moe-h200-logits.h5" | tee "$OUT/logits.txt"
    fp4-remedy -f nvfp4 -p te --logits --remedy "$L" --json -o "$OUT/logits.json" "$OUT/moe-h200-logits.h5" > /dev/null
    fp4-compare -f nvfp4 -p te --top 20 "$OUT/moe-h200-logits.h5" | tee "$OUT/compare.txt" | tail -25
else
    echo "fp4-remedy / fp4-compare not built here (no BLAS in this build; see $OUT/ninja-remedy.log):"
    echo "run them on the development machine on the shipped file"
fi
echo "run_moe_logits: $(( $(date +%s) - t0 )) s"
