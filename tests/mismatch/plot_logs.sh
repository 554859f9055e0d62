#!/bin/sh
# fp4-plot mismatch on RL frameworks' logs (issue 26 item 6): the default
# metric is one the log has, a metric a run lacks is named with what the run
# has (never gnuplot's errors), and --y2 draws a per-step scalar (reward) on a
# second axis.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
mkdir out
$PY - <<'PYEOF'
import json
with open("verl.jsonl", "w") as f:
    for s in range(40):
        k3 = 2e-4 * (1 if s < 25 else 1.2 ** (s - 25))
        f.write(json.dumps({"step": s, "data": {"rollout_corr/k3_kl": k3, "rollout_corr/kl": k3 / 3,
                                                "critic/score/mean": 0.2 + s / 100}}) + "\n")
PYEOF
# the default: k3, the first of the default order a verl log has (mean_abs plotted NaN before)
expect_exit 0 fp4-plot mismatch verl.jsonl -o out/d.png
grep -q "k3 per step" out/d.gp || { cat out/d.gp; fail "default metric: k3 expected in the title"; }
awk '!/^#/ && $2 == "NaN" { bad = 1 } END { exit bad }' out/d.verl.dat || fail "default metric: NaN values"
! grep -q "warning\|Skipping data file" err.txt || { cat err.txt; fail "gnuplot warned"; }
# a metric the run lacks: exit 2 naming it and what the run has, no image, no gnuplot message
expect_exit 2 fp4-plot mismatch --metric mean_abs verl.jsonl -o out/m.png
expect_err "--metric: run 'verl' (verl.jsonl) has no value of 'mean_abs'; it has: k1 (rollout_corr/kl), k3 (rollout_corr/k3_kl)"
expect_err "critic/score/mean"
! grep -q "gnuplot\|line [0-9]*:" err.txt || { cat err.txt; fail "a gnuplot message leaked"; }
[ ! -e out/m.png ] && [ ! -e out/m.gp ] || fail "files written for a missing metric"
# the reward on a second axis
expect_exit 0 fp4-plot mismatch --y2 critic/score/mean verl.jsonl -o out/y.png
grep -q "^set y2label \"critic/score/mean\"" out/y.gp || { cat out/y.gp; fail "--y2: no y2 label"; }
grep -q "^set y2tics" out/y.gp || fail "--y2: no y2 tics"
grep -q "using 1:4 axes x1y2 with lines .* title \"verl: critic/score/mean (right axis)\"" out/y.gp || fail "--y2: no series"
awk '!/^#/ && NF == 4 { n++ } END { exit n != 40 }' out/y.verl.dat || fail "--y2: the data lacks column 4"
[ "$(awk '!/^#/ && $1 == 10 { print $4 }' out/y.verl.dat)" = 0.3 ] || fail "--y2: value at step 10"
expect_exit 2 fp4-plot mismatch --y2 nosuch verl.jsonl -o out/n.png
expect_err "--y2: no run has a value of 'nosuch'"
echo ok
