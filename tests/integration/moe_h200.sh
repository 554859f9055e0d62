#!/bin/sh
# The capture made on the H200 (datasets/moe-h200.h5) reads with every tool: the
# schema check passes, trainer/rollout pairs match, the decomposition is exact,
# and the log-probs give the gaps its run printed (scripts/gpu/RESULTS.md).
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
cap="$FP4S_SRCDIR/datasets/moe-h200.h5"
fp4-capture ls --check "$cap" > /dev/null
n=$(fp4-capture ls --json "$cap" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["datasets"]))')
[ "$n" -eq 156 ] || { echo "expected 156 datasets, found $n"; exit 1; }
out=$(fp4-decompose -f nvfp4 -p te --sides trainer,rollout "$cap")
# 3 steps x 2 layers x 4 experts x (up, down) x (trainer, rollout) = 96 inputs,
# each with its element check, plus the roll-up's
[ "$(echo "$out" | grep -c '^\[')" -eq 96 ] || { echo "expected 96 inputs"; exit 1; }
[ "$(echo "$out" | grep -c 'check: worst element residual 0,')" -eq 97 ] ||
    { echo "$out" | grep "check:"; echo "decomposition not exact on every input"; exit 1; }
fp4-mismatch --json "$cap" | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["runs"][0]["steps"]
got = [round(s["mean_abs"], 4) for s in r]
# the run printed mean |logp_rollout - logp_trainer| 0.04669, 0.04327, 0.04294
assert got == [0.0467, 0.0433, 0.0429], got
print("mean_abs per step", got)'
