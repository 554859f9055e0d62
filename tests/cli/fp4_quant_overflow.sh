#!/bin/sh
# Finite inputs whose dequantized value is Inf or NaN (FLT_MAX under a rule
# that rounds the scale up, as ceil and ggml do) are counted as
# overflow_to_inf in the table and the JSON, checked against numpy on
# --dequant; a block holding NaN/Inf input is left to the NaN policy and not
# counted; --diff never calls such values identical (issue 8, item 14).
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np
f = np.finfo(np.float32).max
rng = np.random.default_rng(4)
x = rng.standard_normal((8, 64)).astype('<f4')
x[0, :] = f                  # a whole row at FLT_MAX
x[1, 3] = -f                 # one in an otherwise normal block
x[2, 10] = np.nan            # a NaN block holding FLT_MAX: the policy's
x[2, 11] = f
x[3, 40] = np.inf
np.save('big.in.npy', x)
np.save('fmax.in.npy', np.full((2, 32), f, dtype='<f4'))
np.save('ok.in.npy', rng.standard_normal((8, 64)).astype('<f4'))
PY

for p in ceil ggml ocp; do
    for nf in scale-nan block-nan; do
        expect_exit 0 fp4-quant -p $p --nonfinite $nf --json --dequant d_$p.npy big.in.npy
        $PY - "$p" <<'PY'
import json, sys, numpy as np
j = json.load(open('out.txt'))
x, d = np.load('big.in.npy'), np.load('d_%s.npy' % sys.argv[1])
blocks_clean = np.isfinite(x).reshape(8, 2, 32).all(axis=2)          # blocks of 32 without NaN/Inf input
bad = (np.isfinite(x) & ~np.isfinite(d)).reshape(8, 2, 32) & blocks_clean[:, :, None]
want = int(bad.sum())
assert j['overflow_to_inf'] == want, (sys.argv[1], j['overflow_to_inf'], want)
assert (want > 0) == (sys.argv[1] != 'ocp'), (sys.argv[1], want)
PY
    done
done
expect_exit 0 fp4-quant -p ceil big.in.npy
out_has "finite inputs -> Inf/NaN"
expect_exit 0 fp4-quant -p ceil ok.in.npy
grep -q "Inf/NaN" out.txt && fail "an overflow row for a tensor without overflow"
expect_exit 0 fp4-quant -p ceil --json ok.in.npy
$PY -c "import json; assert json.load(open('out.txt'))['overflow_to_inf'] == 0"

# --diff: values that differ only through Inf are not 'identical'
expect_exit 0 fp4-quant -p ceil --diff ocp fmax.in.npy
grep -q "identical" out.txt && { cat out.txt >&2; fail "--diff called Inf-vs-finite values identical"; }
out_has "dequantized values differ    64 (100%)"
out_has "none between two finite values"
expect_exit 0 fp4-quant -p ceil --diff ocp --json fmax.in.npy
$PY - <<'PY'
import json
d = json.load(open('out.txt'))
assert d['overflow_to_inf'] == 64 and d['diff']['overflow_to_inf'] == 0, d['overflow_to_inf']
assert d['diff']['dequant_values_differ'] == 64
assert d['diff']['max_dequant_diff']['abs'] is None, d['diff']['max_dequant_diff']
PY
expect_exit 0 fp4-quant -p ocp --diff ocp --json ok.in.npy
$PY -c "import json; assert json.load(open('out.txt'))['diff']['max_dequant_diff']['abs'] == 0.0"
echo ok
