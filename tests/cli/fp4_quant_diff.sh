#!/bin/sh
# fp4-quant --diff: the counts, the largest difference and its position agree
# with numpy comparing two separate runs; the table names both profiles.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(11)
x = (rng.standard_normal((40, 128)) * np.exp(rng.standard_normal((40, 1)))).astype('<f4')
np.save('T.in.npy', x)
PY

check_pair() {
    f=$1 a=$2 b=$3
    expect_exit 0 fp4-quant -f "$f" -p "$a" --codes ca.npy --scales sa.npy --dequant da.npy T.in.npy
    expect_exit 0 fp4-quant -f "$f" -p "$b" --codes cb.npy --scales sb.npy --dequant db.npy T.in.npy
    expect_exit 0 fp4-quant -f "$f" -p "$a" --diff "$b" --json --show 5 T.in.npy
    cp out.txt diff.json
    $PY - <<'PY'
import json, numpy as np
j = json.load(open('diff.json'))['diff']
ca, cb = np.load('ca.npy'), np.load('cb.npy')
sa, sb = np.load('sa.npy'), np.load('sb.npy')
da, db = np.load('da.npy'), np.load('db.npy')
x = np.load('T.in.npy')
assert j['element_codes_compared'] == ca.size
assert j['element_codes_differ'] == int((ca != cb).sum()), (j['element_codes_differ'], int((ca != cb).sum()))
assert j['scale_codes_compared'] == sa.size
assert j['scale_codes_differ'] == int((sa != sb).sum())
assert abs(j['scale_codes_differ_fraction'] - (sa != sb).mean()) < 1e-12
fs = j['first_scale_difference']
if (sa != sb).any():
    r, b = np.argwhere(sa != sb)[0]
    assert (fs['row'], fs['block']) == (int(r), int(b)), (fs, r, b)
else:
    assert fs is None
diff = np.abs(da.astype(np.float64) - db)
m = j['max_dequant_diff']
assert m['abs'] == diff.max(), (m['abs'], diff.max())
if diff.max() > 0:
    r, c = np.unravel_index(np.argmax(diff), diff.shape)
    assert (m['row'], m['col']) == (int(r), int(c)), (m, r, c)
    assert m['x'] == float(x[r, c])
valdiff = (da != db) & ~(np.isnan(da) & np.isnan(db))
assert j['dequant_values_differ'] == int(valdiff.sum())
blk = ca.shape[1] // sa.shape[1]
sdiff = np.repeat(sa != sb, blk, axis=1)
rounding = valdiff & (ca == cb) & ~sdiff
assert j['dequant_values_differ_rounding_only'] == int(rounding.sum())
fr = j['first_rounding_only_differences']
assert [(p['row'], p['col']) for p in fr] == [tuple(map(int, q)) for q in np.argwhere(rounding)[:5]]
fd = j['first_differences']
pos = np.argwhere(valdiff & ~rounding)[:5]
assert [(p['row'], p['col']) for p in fd] == [tuple(map(int, q)) for q in pos], (fd, pos)
for p in fd:
    assert p['code_a'] == ca[p['row'], p['col']] and p['code_b'] == cb[p['row'], p['col']]
    assert p['a'] == da[p['row'], p['col']] and p['b'] == db[p['row'], p['col']]
fc = j['first_code_only_differences']
pos = np.argwhere((ca != cb) & ~valdiff)[:5]
assert [(p['row'], p['col']) for p in fc] == [tuple(map(int, q)) for q in pos], (fc, pos)
PY
    rm -f ca.npy cb.npy sa.npy sb.npy da.npy db.npy diff.json
}

check_pair mxfp4 ocp ceil
check_pair nvfp4 te torchao
check_pair mxfp4 ocp ggml

# the human table: both profile names, the rule that differs, the counts
expect_exit 0 fp4-quant -f mxfp4 -p ocp --diff ceil T.in.npy
out_has "ocp vs ceil"
out_has "scale rule"
out_has "scale codes differing"
out_has "element codes differing"
out_has "largest |dequant diff|"
out_has "first elements whose values differ through their code or scale"
grep -E "scale rule +floor +ceil" out.txt >/dev/null || fail "scale rule row does not show floor vs ceil"

expect_exit 0 fp4-quant -f nvfp4 -p te --diff torchao T.in.npy
out_has "te vs torchao"
out_has "recipe (fp32 op order)"

# a profile against itself: nothing differs
expect_exit 0 fp4-quant -f mxfp4 -p ocp --diff ocp --json T.in.npy
$PY -c "
import json; j = json.load(open('out.txt'))['diff']
assert j['element_codes_differ'] == 0 and j['scale_codes_differ'] == 0 and j['max_dequant_diff']['abs'] == 0
"
# an override applies to -p only: ocp with the ceil rule equals ceil's scales
expect_exit 0 fp4-quant -f mxfp4 -p ocp --scale-rule ceil --diff ocp --json T.in.npy
$PY -c "
import json; j = json.load(open('out.txt'))
assert j['rules']['scale_rule'] == 'ceil' and j['diff']['rules']['scale_rule'] != 'ceil', j['rules']
"
# FP8 tiles of different shapes: element codes compared, scales declared not comparable
$PY -c "
import numpy as np; np.save('W.in.npy', np.random.default_rng(2).standard_normal((256, 256)).astype('<f4'))"
expect_exit 0 fp4-quant -f fp8 -p fp8-1x128 --codes ca.npy W.in.npy
expect_exit 0 fp4-quant -f fp8 -p fp8-128x128 --codes cb.npy W.in.npy
expect_exit 0 fp4-quant -f fp8 -p fp8-1x128 --diff fp8-128x128 --json W.in.npy
$PY -c "
import json, numpy as np; j = json.load(open('out.txt'))['diff']
assert j['scale_layouts_differ'] is True and j['scale_codes_compared'] == 0
assert j['element_codes_differ'] == int((np.load('ca.npy') != np.load('cb.npy')).sum())
"
expect_exit 0 fp4-quant -f fp8 -p fp8-1x128 --diff fp8-128x128 W.in.npy
out_has "not comparable (1x128 vs 128x128 tiles)"
rm -f ca.npy cb.npy
no_outputs_left .
echo ok
