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
expect_exit 1 fp4-mismatch --gate --baseline boom.csv --gate-metrics mean_abs reward.csv
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
echo ok
