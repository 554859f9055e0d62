#!/bin/sh
# The plot and report defects a new user found (issue 12.2), one check each:
# each fails on the code before its fix.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
TR=$SRC/datasets/traces/planted.csv
ln -s "$SRC/datasets" datasets
mkdir out
cap=datasets/synth-moe.h5
has_gnuplot=1
fp4-plot mismatch "$TR" -o out/probe.png 2> probe.err || fail "probe"
grep -q "gnuplot not found" probe.err && has_gnuplot=0

# 1. the onset label must not cover the data: no label in the plot area, the onset named in the key
fp4-plot mismatch "$TR" -o out/mm.png
! grep -q "^set label" out/mm.gp || fail "a label is drawn over the data: $(grep '^set label' out/mm.gp)"
grep -q "NaN with lines dt 2 .* title \"onset nvfp4: step 50\"" out/mm.gp || fail "onset not in the key"

# 2. hist names every input (10 here: both qkv_proj entries were dropped) and labels the error axis e/s*_b
fp4-decompose --json --steps 0 --sites 'layers.0.*' $cap > dec.json
[ "$(jget dec.json 'len(j["inputs"])')" = 10 ] || fail "10 inputs expected"
if [ $has_gnuplot = 1 ]; then
    fp4-plot hist dec.json --term dumb -o - > hist.txt
    for l in $(jget dec.json '" ".join(i["site"] + "@" + i["side"] for i in j["inputs"])'); do
        site=${l%@*}; side=${l#*@}
        grep -F -q "$site [step 0, $side]" hist.txt || fail "hist legend lacks $site [step 0, $side]"
    done
fi
fp4-plot hist dec.json -o out/hist.png
grep -F -q 'quantization error e / s*' out/hist.gp || fail "hist error axis not in units of s*_b (as fp4-decompose(1))"

# 3. titles say the scale rule of the run
fp4-decompose --json --scale-rule ceil --steps 0 --sites 'layers.0.*' $cap > ceil.json
fp4-plot components ceil.json -o out/c.png
grep -q '^set multiplot title ".*scale rule ceil' out/c.gp || fail "components title ignores --scale-rule"
fp4-plot hist ceil.json -o out/h.png
grep -q 'title ".*scale rule ceil' out/h.gp || fail "hist title ignores --scale-rule"

# 4. channels: ranks on a log axis; the coverage curve sampled where it bends (the top channels)
fp4-channels -f nvfp4 -p te --json datasets/synth-moe.h5:/steps/0/layers.0.self_attn.qkv_proj/rollout > ch.json
fp4-plot channels ch.json -o out/ch.png
grep -q "^set logscale x" out/ch.gp || fail "channel ranks on a linear axis"
awk '!/^#/ && $2 <= 4' out/ch.coverage.dat | wc -l | grep -q '^4$' || fail "coverage at the first 4 channels missing"
top4=$(awk '!/^#/ && $2 == 4 {print $3}' out/ch.coverage.dat)
[ "$($PY -c "print(float('$top4') < 0.01)")" = False ] || fail "coverage share of the top 4 channels"

# 5. components: absolute energies too, and several reports side by side (FLOOR vs CEIL)
fp4-decompose --json --scale-rule floor --steps 0 --sites 'layers.0.*' $cap > floor.json
fp4-plot components floor.json ceil.json -o out/fc.png
grep -q 'energy (units of x^2)' out/fc.gp || fail "no energy panel"
[ "$(grep -c '^[0-9]' out/fc.dat)" = 22 ] || fail "two reports x (10 inputs + roll-up) rows"
grep -q 'R2 = mxfp4 ocp, scale rule ceil' out/fc.gp || fail "reports named in the title"
$PY - out/fc.dat <<'PY' || fail "FLOOR and CEIL energies should differ"
import sys
rows = [l.split('"') for l in open(sys.argv[1]) if l[0].isdigit()]
e = [float(r[2].split()[8]) for r in rows]          # energy_total column
assert abs(e[0] - e[11]) > 0.05 * e[0], (e[0], e[11])
PY

# 6. fp4-plot mismatch plots fp4-mismatch --json output
fp4-mismatch --json "$TR" > mm.json
fp4-plot mismatch mm.json -o out/fromjson.png
[ "$(grep -c '^[0-9]' out/fromjson.nvfp4.dat)" = 80 ] || fail "plot of a JSON report"
grep -q "onset nvfp4: step 50" out/fromjson.gp || fail "onset of the JSON report"

# 7. no doubling time for a trend whose interval contains 0 (the trend fit
# is GSL's: a build without it says so for each run)
fp4-mismatch datasets/traces/planted.csv > t.txt
if [ "${FP4S_HAVE_GSL:-1}" = 1 ]; then
    grep "^trend" t.txt | sed -n 2p | grep -q "no significant trend" || { grep "^trend" t.txt; fail "bf16: not significant"; }
    grep "^trend" t.txt | sed -n 2p | grep -q "doubles" && fail "doubling time printed for an insignificant slope"
    grep "^trend" t.txt | sed -n 1p | grep -q "doubles every" || fail "nvfp4 trend"
else
    [ "$(grep -c "^trend: unavailable (built without GSL)" t.txt)" = 2 ] || { grep "^trend" t.txt; fail "trend without GSL"; }
fi

# 8. fp4-decompose --by block lists --show N groups (default 20), not 262,167 lines
fp4-decompose --by block $cap:/steps/0/layers.0.self_attn.qkv_proj/rollout > blk.txt
[ "$(wc -l < blk.txt)" -lt 60 ] || fail "--by block floods the terminal ($(wc -l < blk.txt) lines)"
grep -q "more groups; --show 0 lists all" blk.txt || fail "no --show note"
fp4-decompose --by block --show 0 $cap:/steps/0/layers.0.self_attn.qkv_proj/rollout | wc -l | \
    awk '{ exit !($1 > 1000) }' || fail "--show 0 lists all"

# 9. a dataset addressed by path has step/site/side in JSON; groups are "group" in JSON and CSV
fp4-decompose --json --by row $cap:/steps/3/layers.0.self_attn.qkv_proj/rollout > p.json
[ "$(jget p.json '(j["inputs"][0]["step"], j["inputs"][0]["site"], j["inputs"][0]["side"])')" = \
  "(3, 'layers.0.self_attn.qkv_proj', 'rollout')" ] || fail "path-addressed dataset: step/site/side null"
[ "$(jget p.json 'j["inputs"][0]["groups"][2]["group"]')" = 2 ] || fail "JSON group key"
fp4-decompose --csv --by row $cap:/steps/3/layers.0.self_attn.qkv_proj/rollout | head -1 | grep -q ",group," || fail "CSV"

# 10. the group table prints the cross-term column (shares above 100% otherwise look like a bug)
grep -q " cross " blk.txt || fail "no cross column"
echo ok
