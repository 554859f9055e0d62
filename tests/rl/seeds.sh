#!/bin/sh
# fp4-rl --demo --seeds N: every arm on every seed, and the summary's
# statistics equal an independent computation from the runs' own --stats
# tables (DIR/<run>.s<seed>.tsv): each run's final value (the mean of its
# last tenth of the steps, at least 10), their mean, the Student t-interval
# (two degrees of freedom: the quantile from P(|T| > t) = 1 - t / sqrt(2 + t^2)
# in closed form) and the paired t-test p of that closed form, the sign test.
set -eu
. "$FP4S_SRCDIR/tests/rl/common.sh"
. "$FP4S_SRCDIR/tests/python.sh"
tiny="--width 32 --prompts 3 --group 4 --steps 12 --sft-max-steps 3 --eval-every 4 --eval-prompts 8 --act-every 0"

expect_exit 2 fp4-rl --seeds 3 $tiny -o x.h5
expect_err "--seeds runs the demo's arms"
fp4-rl --demo --seeds 3 --seed 5 --demo-runs bf16,nvfp4,mxfp4 $tiny --json -o sd > sd.json 2> err.txt ||
    { cat err.txt >&2; fail "--seeds 3 failed"; }
for r in bf16 nvfp4 mxfp4; do
    for s in 5 6 7; do
        [ -s sd/$r.s$s.h5 ] && [ -s sd/$r.s$s.tsv ] || fail "no sd/$r.s$s.h5 or .tsv"
    done
    [ -s sd/$r.dat ] || fail "no sd/$r.dat (the means over seeds)"
done
fp4-rl --demo --seeds 3 --seed 5 --demo-runs bf16,nvfp4,mxfp4 $tiny --force -o sd > table.txt 2> err.txt
grep -q "paired-t p" table.txt && grep -q "^nvfp4 " table.txt || { cat table.txt; fail "no summary table"; }
"$PY" - sd.json <<'PYEOF'
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["seeds"] == [5, 6, 7], j["seeds"]
def final(path, col):
    rows = [l.rstrip("\n").split("\t") for l in open(path)]
    i = rows[0].index(col)
    v = [float(r[i]) for r in rows[1:]]
    n = len(v)
    w = n // 10 if n // 10 > 10 else (n if n < 10 else 10)
    return sum(v[-w:]) / w
q = math.sqrt(0.95 ** 2 * 2 / (1 - 0.95 ** 2))  # t_{0.975, 2}: 1 - t / sqrt(2 + t^2) = 0.05
def check(got, want, what, tol=2e-5):
    assert abs(got - want) <= tol * max(1.0, abs(want)), "%s: %r, expected %r" % (what, got, want)
def mean_sd(v):
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
runs = {r["name"]: r for r in j["runs"]}
base = [final("sd/bf16.s%d.tsv" % s, "reward") for s in (5, 6, 7)]
for name, r in runs.items():
    for key, col in (("reward_last", "reward"), ("mismatch_last", "mismatch")):
        v = [final("sd/%s.s%d.tsv" % (name, s), col) for s in (5, 6, 7)]
        for a, b in zip(r[key]["values"], v):
            check(a, b, name + " " + key + " per seed")
        m, sd = mean_sd(v)
        check(r[key]["mean"], m, name + " " + key + " mean")
        check(r[key]["ci_low"], m - q * sd / math.sqrt(3), name + " " + key + " ci_low")
        check(r[key]["ci_high"], m + q * sd / math.sqrt(3), name + " " + key + " ci_high")
    p = r["reward_last"].get("vs_bf16")
    assert (p is None) == (name == "bf16"), name
    if p:
        d = [a - b for a, b in zip(r["reward_last"]["values"], runs["bf16"]["reward_last"]["values"])]
        dm, dsd = mean_sd(d)
        check(p["diff_mean"], dm, name + " diff")
        wins, losses = sum(x > 0 for x in d), sum(x < 0 for x in d)
        assert (p["wins"], p["losses"]) == (wins, losses), (name, p["wins"], p["losses"], wins, losses)
        m_, k = wins + losses, min(wins, losses)
        ps = 1.0 if m_ == 0 else min(1.0, 2 * sum(math.comb(m_, i) for i in range(k + 1)) / 2 ** m_)
        check(p["p_sign"], ps, name + " sign p", 1e-12)
        if dsd > 0:
            t = dm / (dsd / math.sqrt(3))
            check(p["t"], t, name + " t", 1e-9)
            check(p["p_paired_t"], 1 - abs(t) / math.sqrt(2 + t * t), name + " paired-t p", 1e-9)
        else:
            assert p["p_paired_t"] is None or p["p_paired_t"] != p["p_paired_t"], p
print("seeds: statistics ok")
PYEOF
echo ok
