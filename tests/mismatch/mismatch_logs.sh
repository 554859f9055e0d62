#!/bin/sh
# Reading RL frameworks' logs and gating on them: what a user of verl, slime
# or NeMo-RL meets (issue 24 items 4 and 8, issue 26 item 6, issue 28 item 6).
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

# a token trace whose mismatch explodes (k3 about 1e308 at the end), and a verl log of it
$PY - <<'PYEOF'
import json, math
with open("boom.csv", "w") as f:
    f.write("step,seq,trainer_logprob,rollout_logprob\n")
    for s in range(30):
        for q in range(4):
            d = 0.01 if s < 20 else 709.0 * (s - 19) / 10
            f.write("%d,%d,%.17g,%.17g\n" % (s, q, -1.0 - d, -1.0))
with open("verl.jsonl", "w") as f:
    for s in range(30):
        k3 = 1e-4 * (1.0 + 0.1 * (s % 3)) * (1 if s < 20 else 10 ** (s - 19))
        f.write(json.dumps({"step": s, "data": {"rollout_corr/k3_kl": k3, "rollout_corr/kl": k3 / 2,
                                                "critic/score/mean": 0.5 + s / 100}}) + "\n")
with open("reward.csv", "w") as f:
    f.write("step,reward\n")
    for s in range(30):
        f.write("%d,%g\n" % (s, 0.5 + s / 100))
PYEOF

# ---- a gate that gates nothing fails (issue 24 item 4): exit 1, and says why
expect_exit 1 fp4-mismatch --gate --baseline reward.csv boom.csv
expect_err "--gate: run boom: nothing gated: none of --gate-metrics mean_abs,k3,is_frac_high,is_frac_low,is_max has a floor"
expect_err "mean_abs: 0 finite values in the baseline reward.csv (2 needed)"
grep -q "^gate: FAILED: nothing gated" out.txt || { cat out.txt; fail "nothing gated: report line"; }
grep -q "^gate: passed" out.txt && fail "nothing gated: reported as passed"
expect_exit 1 fp4-mismatch --gate --baseline verl.jsonl --gate-metrics mean_abs,is_max --metric k3 verl.jsonl
expect_err "nothing gated"
fp4-mismatch --json --gate --baseline reward.csv boom.csv > g.json 2> /dev/null && fail "nothing gated: exit 0"
[ "$(jget g.json 'j["runs"][0]["gate"]["passed"]')" = False ] || fail "nothing gated: JSON passed"
jget g.json 'j["runs"][0]["gate"]["failed"]' | grep -q "^nothing gated: mean_abs" || fail "nothing gated: JSON reason"
# the run side without values of a metric is not gated on it either (it would never cross)
expect_exit 1 fp4-mismatch --gate --baseline boom.csv --gate-metrics mean_abs --metric reward reward.csv
expect_err "mean_abs: no finite value in run reward"
# one gated metric is enough to gate
expect_exit 0 fp4-mismatch --gate --baseline verl.jsonl --gate-metrics mean_abs,k3 --metric k3 verl.jsonl
grep -q "^gate: passed: run verl" out.txt || { cat out.txt; fail "k3 gated against itself"; }

# ---- a UTF-8 byte order mark before a scalar log (issue 24 item 8)
printf '\357\273\277' > bom.jsonl
cat verl.jsonl >> bom.jsonl
expect_exit 0 fp4-mismatch --metric k3 bom.jsonl
grep -q "per-step scalar log of 3 columns" out.txt || { cat out.txt err.txt; fail "BOM JSONL not read as a scalar log"; }
printf '\357\273\277' > bom.csv
cat reward.csv >> bom.csv
expect_exit 0 fp4-mismatch --metric reward bom.csv
grep -q "per-step scalar log of 1 columns" out.txt || { cat out.txt err.txt; fail "BOM CSV not read as a scalar log"; }
printf '\357\273\277' > bomtok.csv
cat boom.csv >> bomtok.csv
expect_exit 0 fp4-mismatch bomtok.csv
printf '\357\273x{"step": 1}\n' > badbom.jsonl
expect_exit 3 fp4-mismatch --format scalars badbom.jsonl
expect_err "badbom.jsonl: line 1: starts with a byte 0xEF that is not a UTF-8 byte order mark"

# ---- steps out of int64 range are an error naming the file and line (issue 24 item 8)
printf '{"step": 0, "data": {"rollout_corr/k3_kl": 0.1}}\n{"step": 1e19, "data": {"rollout_corr/k3_kl": 0.1}}\n' > big.jsonl
expect_exit 3 fp4-mismatch --metric k3 big.jsonl
expect_err "big.jsonl: line 2: field 'step': step 1e+19 is out of range"
printf '{"step": 99999999999999999999, "data": {"rollout_corr/k3_kl": 0.1}}\n' > big2.jsonl
expect_exit 3 fp4-mismatch --metric k3 big2.jsonl
expect_err "big2.jsonl: line 1: invalid JSON: too big integer"
printf 'step,reward\n0,1\n-9223372036854775809,1\n' > big.csv
expect_exit 3 fp4-mismatch --metric reward big.csv
expect_err "big.csv: line 3: step '-9223372036854775809' is out of range"
printf 'step,reward\n9223372036854775807,1\n' > max.csv
expect_exit 0 fp4-mismatch --json --metric reward max.csv
[ "$(jget out.txt 'j["runs"][0]["steps"][0]["step"]')" = 9223372036854775807 ] || fail "int64 max step"
printf '{"step": 1e19, "seq": 0, "trainer_logprob": -1, "rollout_logprob": -1}\n' > tokbig.jsonl
expect_exit 3 fp4-mismatch tokbig.jsonl
expect_err "tokbig.jsonl: line 1: field 'step': expected an integer, got a real"

# ---- the default metric is one the log has (issue 26 item 6): verl logs k3 as rollout_corr/k3_kl
expect_exit 0 fp4-mismatch verl.jsonl
grep -q "^metric: k3 (logged as rollout_corr/k3_kl), the first of the default order (mean_abs, mean_abs_per_seq, k3," out.txt \
    || { head -3 out.txt; fail "default metric on a verl log"; }
grep -q "^onset: step 2[0-4] (k3 " out.txt || { cat out.txt; fail "verl log: onset of k3"; }
grep -q "nan" out.txt && { cat out.txt; fail "verl log: nan rows"; }
fp4-mismatch --json verl.jsonl > d.json
[ "$(jget d.json 'j["metric"]')" = k3 ] || fail "JSON metric"
[ "$(jget d.json 'j["metric_default_order"][:3]')" = "['mean_abs', 'mean_abs_per_seq', 'k3']" ] || fail "JSON order"
# slime's name (mean_abs_per_seq) comes before k3, NeMo-RL's token_mult_prob_error after it
printf 'step,train/train_rollout_logprob_abs_diff,train/gen_kl_error,train/token_mult_prob_error\n0,0.01,0.001,1.01\n1,0.02,0.002,1.02\n' > slime.csv
expect_exit 0 fp4-mismatch slime.csv
grep -q "^metric: mean_abs_per_seq (logged as train/train_rollout_logprob_abs_diff)" out.txt || fail "slime's metric"
printf 'step,train/gen_kl_error,train/token_mult_prob_error\n0,0.001,1.01\n1,0.002,1.02\n' > nemo.csv
expect_exit 0 fp4-mismatch nemo.csv
grep -q "^metric: k3 (logged as train/gen_kl_error)" out.txt || fail "NeMo-RL's k3"
# a log without any mismatch metric: a usage error naming what it has
expect_exit 2 fp4-mismatch reward.csv
expect_err "no mismatch metric in every run: none of mean_abs, mean_abs_per_seq, k3"
expect_err "run reward (reward.csv) has: reward"
# the onset's reason when the metric has no value
expect_exit 0 fp4-mismatch --metric mean_abs verl.jsonl
grep -q "^onset: not computed (no value of mean_abs in this run" out.txt || { cat out.txt; fail "onset reason"; }

# ---- Python's NaN, Infinity and -Infinity in JSONL (what json.dumps writes for a diverged grad_norm)
$PY - <<'PYEOF'
import json, math
with open("py.jsonl", "w") as f:
    for s in range(12):
        g = [1.0, float("nan"), float("inf"), -float("inf")][s % 4]
        f.write(json.dumps({"step": s, "data": {"rollout_corr/k3_kl": 1e-3 * (s + 1), "actor/grad_norm": g,
                                                "note": "NaN is a word here"}}) + "\n")
with open("pytok.jsonl", "w") as f:
    for q, lr in enumerate([-1.1, -float("inf"), float("nan"), -1.2]):
        f.write(json.dumps({"step": 0, "seq": q, "trainer_logprob": -1.0, "rollout_logprob": lr}) + "\n")
PYEOF
grep -q '"actor/grad_norm": NaN' py.jsonl || fail "python did not write a bare NaN"
expect_exit 0 fp4-mismatch --json --metric actor/grad_norm py.jsonl
$PY - out.txt <<'PYEOF' || fail "NaN/Infinity of a JSONL scalar log"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["runs"][0]
g = [s["scalars"]["actor/grad_norm"] for s in r["steps"][:4]]
assert g == [1.0, None, None, None], g          # JSON has no NaN/Inf: null
assert len(r["steps"]) == 12 and r["steps"][3]["k3"] == 0.004
assert "note" not in r["steps"][0]["scalars"]   # a string is not a number
PYEOF
expect_exit 0 fp4-mismatch --metric actor/grad_norm py.jsonl
sed -n '3,6p' out.txt | awk '{print $2}' | tr '\n' ' ' | grep -q "^1 nan inf -inf " || { cat out.txt; fail "NaN/Inf values"; }
expect_exit 0 fp4-mismatch --json pytok.jsonl
[ "$(jget out.txt 'j["runs"][0]["steps"][0]["nonfinite"]')" = 2 ] || fail "-Infinity/NaN log-probs: nonfinite"
[ "$(jget out.txt 'j["runs"][0]["steps"][0]["tokens"]')" = 2 ] || fail "-Infinity/NaN log-probs: tokens"

# ---- --csv carries every per-step scalar, headers are not cut
$PY - <<'PYEOF'
import json
with open("wide.jsonl", "w") as f:
    for s in range(15):
        d = {"rollout_corr/k3_kl": 1e-3, "critic/score/mean": 0.5 + s}
        for k in range(9):
            d["actor/a_rather_long_metric_name_%d" % k] = k + s
        f.write(json.dumps({"step": s, "data": d}) + "\n")
PYEOF
fp4-mismatch --csv wide.jsonl > w.csv
$PY - w.csv <<'PYEOF' || fail "--csv: every scalar"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 15
assert float(rows[3]["critic/score/mean"]) == 3.5, rows[3]
assert float(rows[14]["actor/a_rather_long_metric_name_8"]) == 22
assert float(rows[0]["rollout_corr/k3_kl"]) == 1e-3
PYEOF
# a scalar named as a column (a logged k3, fp4-rl's is_frac_high) keeps one name per column
printf 'step,k3,is_frac_high,reward\n0,0.001,0.5,1\n1,0.002,0.25,2\n' > named.csv
fp4-mismatch --csv named.csv > n.csv
$PY - n.csv <<'PYEOF' || fail "--csv: a scalar named as a column"
import csv, sys
head = next(csv.reader(open(sys.argv[1])))
assert len(head) == len(set(head)), [h for h in head if head.count(h) > 1]
rows = list(csv.DictReader(open(sys.argv[1])))
assert float(rows[1]["scalar.k3"]) == 0.002 and float(rows[1]["k3"]) == 0.002, rows[1]
assert float(rows[0]["scalar.is_frac_high"]) == 0.5 and float(rows[1]["reward"]) == 2, rows
PYEOF
expect_exit 0 fp4-mismatch wide.jsonl
grep -q " actor/a_rather_long_metric_name_0 " out.txt || { head -3 out.txt; fail "scalar header cut"; }
grep -q "more columns: --json or --csv has them" out.txt || fail "footer"
cp verl.jsonl a_run_with_a_long_name.jsonl
expect_exit 0 fp4-mismatch verl.jsonl a_run_with_a_long_name.jsonl
grep -q " a_run_with_a_long_name  *ratio:a_run_with_a_long_name$" out.txt || { grep -A1 comparison out.txt; fail "comparison header cut"; }

# ---- the trend after the change point, "high from the first step", the level and its source

$PY - <<'PYEOF'
import random
random.seed(3)
with open("bend.csv", "w") as f:     # flat 0.01, then x1.05 a step from step 60
    f.write("step,seq,trainer_logprob,rollout_logprob\n")
    for s in range(100):
        m = 0.01 * (1.05 ** max(0, s - 60))
        for q in range(50):
            d = m * random.uniform(0.9, 1.1)
            f.write("%d,%d,%.17g,%.17g\n" % (s, q, -1.0, -1.0 - d))
with open("high.csv", "w") as f:     # 0.3 nats from step 0, flat
    f.write("step,seq,trainer_logprob,rollout_logprob\n")
    for s in range(30):
        for q in range(20):
            f.write("%d,%d,%.17g,%.17g\n" % (s, q, -1.0, -1.3 - 0.01 * random.random()))
PYEOF
expect_exit 0 fp4-mismatch bend.csv
grep -q "^change point: step 6[0-2] " out.txt || { cat out.txt; fail "bend: change point"; }
grep -q "^trend: after the change point (from step 6[0-2]): ln(mean_abs) slope 0.04[6-9]" out.txt \
    || { cat out.txt; fail "bend: trend after the change point (ln 1.05 = 0.0488)"; }
fp4-mismatch --json bend.csv > b.json
$PY - b.json <<'PYEOF' || fail "bend: trend JSON"
import json, sys
t = json.load(open(sys.argv[1]))["runs"][0]["trend"]
assert 60 <= t["from_step"] <= 62 and abs(t["slope"] - 0.0488) < 3e-3, t
assert t["all_steps"]["slope"] < 0.035, t     # over all steps the floor dilutes it
PYEOF
expect_exit 0 fp4-mismatch high.csv
grep -q "^onset: none" out.txt || fail "high: no onset"
grep -q "^verdict: high from the first step: the median of mean_abs over the first 10 steps is 0.30[0-9]*, above the level 0.1 called harmful (the level: slime's CI bound 0.1" out.txt \
    || { cat out.txt; fail "high from the first step"; }
fp4-mismatch --json high.csv > h.json
[ "$(jget h.json 'j["runs"][0]["verdict"]["verdict"]')" = high_from_start ] || fail "high: JSON verdict"
jget h.json 'j["runs"][0]["verdict"]["level_source"]' | grep -q "THUDM/slime" || fail "high: level source"
# against a reference run the level is its noise floor, and says so
expect_exit 0 fp4-mismatch --baseline bend.csv high.csv
grep -q "^verdict: high from the first step: .* (the level: the noise floor of the reference run bend.csv: mean" out.txt \
    || { cat out.txt; fail "high: level from the reference"; }
expect_exit 0 fp4-mismatch bend.csv
grep -q "^verdict: diverges from step 6[0-2] (the change point); the level called harmful is 0.1, not crossed: the run stays within 0.06" out.txt \
    || { grep verdict out.txt; fail "bend: verdict"; }

# ---- the gate states the level it calls harmful and where it comes from
expect_exit 1 fp4-mismatch --gate --baseline bend.csv high.csv
grep -q "^gate: CROSSED mean_abs at step 0: .* the level called harmful is [0-9.e-]*, the noise floor of the reference run bend.csv; the documented level is 0.1 (slime's CI bound" out.txt \
    || { grep gate out.txt; fail "gate: level and source"; }
# without a reference: the documented levels (slime's 0.1 on the mean |log-prob difference|)
expect_exit 1 fp4-mismatch --gate high.csv
grep -q "^gate: CROSSED mean_abs at step 0: 0.30[0-9]*, over the level 0.1 called harmful (3 steps in a row; the level: slime's CI bound 0.1" out.txt \
    || { grep gate out.txt; fail "gate without a reference"; }
expect_err "gate: k3: no documented level and no --baseline, not gated"
expect_exit 0 fp4-mismatch --gate --gate-metrics mean_abs --every 10 bend.csv
grep -q "^gate: passed: run bend stays within the documented levels (1 quantities, 3 steps in a row): mean_abs above 0.1" out.txt \
    || { grep gate out.txt; fail "gate passed without a reference"; }
fp4-mismatch --json --gate high.csv > gh.json || true
jget gh.json 'j["runs"][0]["gate"]["metrics"][0]["level_source"]' | grep -q "slime/utils/arguments.py" || fail "gate JSON source"
# a verl log has no documented level: the gate needs a reference and says so
expect_exit 1 fp4-mismatch --gate verl.jsonl
expect_err "none of --gate-metrics mean_abs,k3,is_frac_high,is_frac_low,is_max has a level documented by a framework"

# ---- --gate exact (issue 28 item 6): passes only when the log-probs are the same numbers
printf 'step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1\n0,1,-0.5,-0.5\n1,0,-2,-2\n1,1,-0.25,-0.25\n' > same.csv
expect_exit 0 fp4-mismatch --gate exact same.csv
grep -q "^gate exact: passed: run same has the same log-probs on both sides at all 2 steps" out.txt || fail "exact: same"
# one ulp apart at one token: k3 rounds to exactly 0 there, the gate still fails (max |rho| > 0)
printf 'step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1\n1,0,-2,-2.0000000000000004\n1,1,-0.25,-0.25\n' > ulp.csv
expect_exit 1 fp4-mismatch --gate=exact ulp.csv
grep -q "^gate exact: FAILED: run ulp differs at 1 of 2 steps, first at step 1 (max |rho| 4.441e-16, k3 0)" out.txt \
    || { grep gate out.txt; fail "exact: one ulp"; }
fp4-mismatch --json --gate exact ulp.csv > e.json || true
[ "$(jget e.json 'j["runs"][0]["gate"]["passed"]')" = False ] || fail "exact: JSON"
[ "$(jget e.json 'j["runs"][0]["gate"]["first_step"]')" = 1 ] || fail "exact: JSON first step"
# a NaN log-prob on one side is not the same log-prob
printf 'step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1\n0,1,-1,nan\n' > nanx.csv
expect_exit 1 fp4-mismatch --gate exact nanx.csv
grep -q "and NaN/Inf log-probs" out.txt || fail "exact: NaN"
# from a scalar log: k3 exactly 0 at every step (verl's rollout_corr/k3_kl)
printf '{"step": 0, "data": {"rollout_corr/k3_kl": 0.0}}\n{"step": 1, "data": {"rollout_corr/k3_kl": 0.0}}\n' > k30.jsonl
expect_exit 0 fp4-mismatch --gate exact k30.jsonl
printf '{"step": 0, "data": {"rollout_corr/k3_kl": 0.0}}\n{"step": 1, "data": {"rollout_corr/k3_kl": 1e-12}}\n' > k3x.jsonl
expect_exit 1 fp4-mismatch --gate exact k3x.jsonl
grep -q "first at step 1 (max |rho| nan, k3 1e-12)" out.txt || { grep gate out.txt; fail "exact: scalar log"; }
expect_exit 1 fp4-mismatch --gate exact --metric reward reward.csv
expect_err "--gate exact: run reward: nothing to check"
expect_exit 2 fp4-mismatch --gate exact --baseline same.csv same.csv
expect_err "--gate exact compares each run's log-probs with each other: it takes no --baseline"
expect_exit 2 fp4-mismatch --gate=bytes same.csv
expect_err "--gate: expected floor (the default) or exact, got 'bytes'"
echo ok
