#!/bin/sh
# The onset of a planted divergence is found at the planted step; runs are
# compared at equal steps; --fail-on-onset; a run column splits one file.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

$REF planted a.csv --onset 30 --steps 60 --seed 3
$REF planted b.csv --onset 1000 --steps 60 --seed 4
fp4-mismatch --json a.csv b.csv > ab.json
[ "$(jget ab.json 'j["runs"][0]["onset"]["step"]')" = 30 ] || fail "onset of run a not at step 30"
[ "$(jget ab.json 'j["runs"][0]["onset"]["metric"]')" = mean_abs ] || fail "onset metric"
[ "$(jget ab.json 'j["runs"][1]["onset"]["found"]')" = False ] || fail "flat run b has an onset"
if fp4-mismatch --version | grep -q -w gsl; then
    [ "$(jget ab.json 'j["runs"][0]["trend"]["slope"] > 0.02')" = True ] || fail "trend slope of a"
    [ "$(jget ab.json 'j["runs"][0]["trend"]["lo"] < j["runs"][0]["trend"]["slope"] < j["runs"][0]["trend"]["hi"]')" = True ] || fail "trend CI"
else # built without GSL: the trend is reported as unavailable
    [ "$(jget ab.json 'j["runs"][0]["trend"]["note"]')" = "built without GSL" ] || fail "trend without GSL"
fi
[ "$(jget ab.json 'j["comparison"]["common_steps"]')" = 60 ] || fail "common steps"
[ "$(jget ab.json 'j["comparison"]["geomean_ratio"]["b"] < 1')" = True ] || fail "ratio b/a"

# the same with other metrics and seeds
for m in k2 k3 abs_p99 max_abs mean_abs_per_seq; do
    fp4-mismatch --json --metric $m a.csv > m.json
    [ "$(jget m.json 'j["runs"][0]["onset"]["step"]')" = 30 ] || fail "onset with --metric $m"
done

# tables: onset line, comparison, --every
fp4-mismatch --every 10 a.csv b.csv > t.txt
grep -q "^onset: step 30 " t.txt || fail "table onset line"
grep -q "^comparison of mean_abs at equal steps (60 common steps)" t.txt || fail "comparison table"
grep -q '^      10 ' t.txt || fail "--every 10: step 10 missing"
! grep -q '^       5 ' t.txt || fail "--every 10: step 5 listed"

# --fail-on-onset: 1 when found, 0 otherwise
expect_exit 1 fp4-mismatch --fail-on-onset a.csv
expect_exit 0 fp4-mismatch --fail-on-onset b.csv
# knobs: more consecutive steps than the run has after baseline -> none
fp4-mismatch --json --consecutive 200 a.csv > c.json
[ "$(jget c.json 'j["runs"][0]["onset"]["found"]')" = False ] || fail "--consecutive 200"
fp4-mismatch --json --margin 100 --sigma 0 a.csv > c.json
[ "$(jget c.json 'j["runs"][0]["onset"]["found"]')" = False ] || fail "--margin 100"

# one file with a run column holds two runs; --name prefixes them
$REF planted ab.csv --onset 20 --steps 40 --seed 5 --run fp4
$REF planted ab.csv --onset 999 --steps 40 --seed 6 --run bf16 --append
fp4-mismatch --json --name exp ab.csv > r.json
[ "$(jget r.json '[r["name"] for r in j["runs"]]')" = "['exp/fp4', 'exp/bf16']" ] || fail "run names"
[ "$(jget r.json 'j["runs"][0]["onset"]["step"]')" = 20 ] || fail "onset in run column file"
echo ok
