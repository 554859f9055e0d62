#!/bin/sh
# fp4-mismatch on the per-step scalar logs of RL frameworks (verl's file logger
# JSONL, W&B and TensorBoard CSV exports, a capture's per-step scalars), the
# frameworks' metric names (--metric rollout_corr/k3_kl, --names verl), the
# change-point onset, and --gate calibrated on a reference run: a planted
# divergence crosses, 1,000 clean steps do not.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
TR=$SRC/datasets/traces/planted.csv
GEN="$PY $SRC/tests/mismatch/gen_growth.py"

# ---- verl names: --names verl emits them, --metric takes them
fp4-mismatch --json --names verl "$TR" > verl.json
[ "$(jget verl.json 'j["names"]')" = verl ] || fail "names not recorded"
jget verl.json '"rollout_corr/k3_kl" in j["runs"][0]["steps"][0] and "k3" not in j["runs"][0]["steps"][0]' | grep -q True \
    || fail "--names verl: rollout_corr/k3_kl expected instead of k3"
jget verl.json '"training/rollout_probs_diff_mean" in j["runs"][0]["steps"][0]' | grep -q True || fail "training/ names"
fp4-mismatch --csv --names nemo-rl "$TR" | head -1 | grep -q "train/token_mult_prob_error" || fail "--names nemo-rl CSV"
fp4-mismatch --metric rollout_corr/k3_kl "$TR" > k3v.txt
fp4-mismatch --metric k3 "$TR" > k3.txt
grep "^onset" k3v.txt | sed 's|rollout_corr/k3_kl|k3|' > a.txt; grep "^onset" k3.txt > b.txt
cmp -s a.txt b.txt || fail "--metric rollout_corr/k3_kl differs from --metric k3"
expect_exit 2 fp4-mismatch --names nosuch "$TR"
expect_err "unknown name set 'nosuch'"
expect_exit 2 fp4-mismatch --metric rollout_corr/nosuch "$TR"
expect_err "unknown metric 'rollout_corr/nosuch'"

# ---- a verl run's own log: the same onset, trend and change point as the tokens
$PY "$SRC/tests/mismatch/make_verl_log.py" verl.json nvfp4.jsonl nvfp4
fp4-mismatch --metric rollout_corr/k3_kl nvfp4.jsonl > log.txt
grep -q "per-step scalar log" log.txt || fail "not read as a scalar log"
grep -q "^onset: step 50 " log.txt || { cat log.txt; fail "onset from the verl log"; }
grep -q "^change point: step 50 " log.txt || fail "change point from the verl log"
fp4-mismatch --metric k3 --every 1000 "$TR" | grep "^trend" | head -1 > t1.txt
grep "^trend" log.txt | sed 's|rollout_corr/k3_kl|k3|' > t2.txt
cmp -s t1.txt t2.txt || { cat t1.txt t2.txt; fail "trend from the log differs from the tokens'"; }
fp4-mismatch --json --metric actor/entropy nvfp4.jsonl > ent.json
[ "$(jget ent.json 'j["runs"][0]["steps"][3]["scalars"]["actor/entropy"]')" = 0.5 ] || fail "other scalars kept by name"

# ---- W&B CSV export (two runs as "RUN - METRIC" columns, __MIN/__MAX ignored) and TensorBoard CSV
$PY - "$TR" <<'PY'
import json, subprocess, sys
j = json.loads(subprocess.check_output(["fp4-mismatch", "--json", "--names", "verl", sys.argv[1]]))
runs = {r["name"]: {s["step"]: s["rollout_corr/k3_kl"] for s in r["steps"]} for r in j["runs"]}
with open("wandb.csv", "w") as f:
    f.write('"Step","nvfp4 - rollout_corr/k3_kl","nvfp4 - rollout_corr/k3_kl__MIN","nvfp4 - rollout_corr/k3_kl__MAX",'
            '"bf16 - rollout_corr/k3_kl"\n')
    for s in sorted(runs["nvfp4"]):
        f.write('%d,%r,%r,%r,%s\n' % (s, runs["nvfp4"][s], 0.0, 1.0, "" if s % 7 == 3 else repr(runs["bf16"][s])))
with open("run-nvfp4-tag-rollout_corr_k3_kl.csv", "w") as f:
    f.write("Wall time,Step,Value\n")
    for s in sorted(runs["nvfp4"], reverse=True):   # any order
        f.write("1700000000.5,%d,%r\n" % (s, runs["nvfp4"][s]))
PY
fp4-mismatch --json --metric k3 wandb.csv > wb.json
[ "$(jget wb.json 'len(j["runs"])')" = 2 ] || fail "W&B: two runs expected"
[ "$(jget wb.json '[r["name"] for r in j["runs"]]')" = "['nvfp4', 'bf16']" ] || fail "W&B run names"
[ "$(jget wb.json 'j["runs"][0]["onset"]["step"]')" = 50 ] || fail "W&B onset"
[ "$(jget wb.json 'j["runs"][1]["onset"]["found"]')" = False ] || fail "W&B bf16 has no onset"
[ "$(jget wb.json 'j["runs"][1]["steps"][3]["k3"]')" = None ] || fail "W&B empty cell is missing (null)"
fp4-mismatch --json run-nvfp4-tag-rollout_corr_k3_kl.csv > tb.json
[ "$(jget tb.json 'j["runs"][0]["steps"][0]["step"]')" = 0 ] || fail "TensorBoard: steps sorted"
fp4-mismatch --metric k3 run-nvfp4-tag-rollout_corr_k3_kl.csv | grep -q "^onset: step 50 " || fail "TensorBoard onset"
fp4-plot mismatch wandb.csv --metric rollout_corr/k3_kl -o wb.svg
[ -s wb.nvfp4.dat ] && [ -s wb.bf16.dat ] || fail "plot of a W&B export"
# malformed scalar logs: exit 3 naming the file and line
printf 'step,reward\n0,1.5\n1,abc\n' > bad.csv
expect_exit 3 fp4-mismatch bad.csv
expect_err "bad.csv: line 3: column 'reward': expected a number, got 'abc'"
printf '{"step": 0, "data": {"a": 1}}\n{"data": {"a": 2}}\n' > bad.jsonl
expect_exit 3 fp4-mismatch bad.jsonl
expect_err "bad.jsonl: line 2: no integer step field"

# ---- a capture's per-step scalars (what fp4-rl writes) next to its log-probs
fp4-mismatch --json --metric rollout_corr/kl "$SRC/datasets/synth-moe.h5" > cap.json
[ "$(jget cap.json 'j["runs"][0]["summary"]["steps"]')" = 12 ] || fail "capture run"

# ---- change point vs the threshold onset on smooth growth from step 150
$GEN g.csv --rate 0.0184 --seed 2
fp4-mismatch --json g.csv > g.json
on=$(jget g.json 'j["runs"][0]["onset"]["step"]'); cp=$(jget g.json 'j["runs"][0]["changepoint"]["step"]')
echo "growth 0.0184/step from 150: threshold onset $on, change point $cp"
[ "$on" -ge 165 ] || fail "the threshold onset lags the growth (documented delay); got $on"
[ "$cp" -ge 140 ] && [ "$cp" -le 165 ] || fail "change point $cp not near 150"

# ---- --gate: a planted divergence crosses, a clean run of 1,000 steps does not
$GEN base.csv --steps 1000 --rate 0 --seed 11 --run bf16
$GEN clean.csv --steps 1000 --rate 0 --seed 12 --run bf16
$GEN div.csv --steps 300 --onset 150 --rate 0.05 --seed 13 --run nvfp4
expect_exit 0 fp4-mismatch --gate --baseline base.csv --every 1000 clean.csv
grep -q "^gate: passed: run bf16" out.txt || { cat out.txt; fail "clean run: gate should pass"; }
grep -q "CROSSED" out.txt && fail "false alarm on 1,000 clean steps"
expect_exit 1 fp4-mismatch --gate --baseline base.csv --every 1000 div.csv
grep -q "^gate: CROSSED mean_abs at step 1[5-6][0-9]: " out.txt || { cat out.txt; fail "planted divergence: mean_abs"; }
grep -q "spreads over the floor" out.txt || fail "by how much over the floor"
grep -q "^gate: CROSSED slope of ln(mean_abs)" out.txt || fail "slope gate"
grep -q "^gate: CROSSED is_max" out.txt || fail "pre-clamp IS weight gate"
fp4-mismatch --gate --baseline base.csv --json div.csv > gate.json || true
[ "$(jget gate.json 'j["runs"][0]["gate"]["passed"]')" = False ] || fail "gate JSON"
[ "$(jget gate.json '[g["metric"] for g in j["runs"][0]["gate"]["metrics"]][:5]')" = \
  "['mean_abs', 'k3', 'is_frac_high', 'is_frac_low', 'is_max']" ] || fail "gated metrics"
# the floor of a run against itself: the shipped trace's bf16 run passes, nvfp4 crosses
expect_exit 1 fp4-mismatch --gate --baseline "$TR" --baseline-run bf16 "$TR"
grep -q "^gate: passed: run bf16" out.txt || fail "bf16 against its own floor"
# without a reference run, the level a framework documents (slime's CI bound 0.1 on mean_abs)
expect_exit 1 fp4-mismatch --gate --every 1000 "$TR"
grep -q "^gate: CROSSED mean_abs at step [0-9]*: .*, over the level 0.1 called harmful" out.txt || fail "documented level"
grep -q "^gate: passed: run bf16 stays within the documented levels" out.txt || fail "documented level: bf16"
expect_exit 2 fp4-mismatch --gate --baseline "$TR" --baseline-run nosuch "$TR"
echo "ok"
