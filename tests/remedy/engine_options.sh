#!/bin/sh
# TransformerEngine's options in the quantizer option group of every tool
# (--4over6-error, --4over6-bound, --sr, --rht): they give the engine profiles'
# codes (te-rht, te-sr, te-4over6), the choices they leave open change the
# codes as the arithmetic says (a hand case for MAE against MSE), and bad
# values or a combination no engine defines are a usage error (exit 2).
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
err_has() { grep -qF -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks: $1"; }; }
$PY -c "
import numpy as np
rng = np.random.default_rng(5)
x = (rng.standard_t(4, size=(32, 64)) * np.exp(rng.normal(0, 0.7, 64))).astype('<f4')
np.save('x.npy', x)
# the 4over6 hand case of tests/remedy/test_remedy.c: [6, 2.25, 2.25, 3.625, 0...] with tensor amax 6
h = np.zeros((1, 16), '<f4'); h[0, :4] = [6, 2.25, 2.25, 3.625]
np.save('h.npy', h)"
# same NAME ARGS...: fp4-quant's codes and scales equal under the two option sets (A... -- B...)
codes() { # codes OUT.npy SCALES.npy ARGS...
    c=$1 s=$2
    shift 2
    expect_exit 0 fp4-quant -f nvfp4 "$@" --codes "$c" --scales "$s" x.npy
}
codes a.c.npy a.s.npy -p te-rht
codes b.c.npy b.s.npy -p te --rht te
codes c.c.npy c.s.npy -p te
codes d.c.npy d.s.npy -p te-sr
codes e.c.npy e.s.npy -p te --sr 1
codes f.c.npy f.s.npy -p te --sr 2
codes g.c.npy g.s.npy -p te-sr --sr off
codes i.c.npy i.s.npy -p te --rht 0x00f3
$PY - <<'PY'
import numpy as np
L = lambda n: (np.load(n + ".c.npy"), np.load(n + ".s.npy"))
eq = lambda a, b: all(np.array_equal(p, q) for p, q in zip(L(a), L(b)))
assert eq("a", "b"), "--rht te differs from -p te-rht"
assert not eq("a", "c"), "--rht te changed nothing"
assert eq("d", "e"), "--sr 1 differs from -p te-sr"
assert not eq("e", "f"), "--sr 2 gives the codes of --sr 1"
assert not eq("d", "c") and eq("g", "c"), "--sr off is not te"
assert not eq("i", "a"), "another sign mask gives TE's codes"
PY
# MAE keeps map-to-4 (scale byte 0x7C, codes 6 3 3 4), MSE map-to-6 (0x78, codes 7 4 4 6); bound 448: 0x7E
for e in mae mse; do
    expect_exit 0 fp4-quant -f nvfp4 -p te-4over6 --4over6-error $e --codes h$e.c.npy --scales h$e.s.npy h.npy
done
expect_exit 0 fp4-quant -f nvfp4 --recipe te-4over6 --4over6-bound 448 --json --codes hb.c.npy --scales hb.s.npy h.npy
grep -q "4over6_bound=448" out.txt || fail "--4over6-bound 448 not in the spec"
$PY - <<'PY'
import numpy as np
def unpack(n):
    c = np.load(n + ".c.npy").astype(np.uint8).ravel()   # --codes: one code per element
    return [int(v) for v in c[:4]], int(np.load(n + ".s.npy").ravel()[0])
assert unpack("hmae") == ([6, 3, 3, 4], 0x7C), unpack("hmae")
assert unpack("hmse") == ([7, 4, 4, 6], 0x78), unpack("hmse")
assert unpack("hb")[1] == 0x7E, unpack("hb")
PY
# every tool that quantizes takes them
expect_exit 0 fp4-decompose -f nvfp4 --rht te --json x.npy
grep -q "rht_signs=0xd7e8" out.txt || fail "fp4-decompose --rht te: no rht in the spec"
expect_exit 0 fp4-channels -f nvfp4 -p te-4over6 --4over6-error mse --json x.npy
grep -q "4over6_err=mse" out.txt || fail "fp4-channels --4over6-error mse: not in the spec"
# bad values and combinations
expect_exit 2 fp4-quant -f nvfp4 -p te-4over6 --4over6-error l1 x.npy
err_has "--4over6-error: expected mae or mse, got 'l1'"
expect_exit 2 fp4-quant -f nvfp4 -p te-4over6 --4over6-bound 300 x.npy
err_has "--4over6-bound: expected 256 or 448, got '300'"
expect_exit 2 fp4-quant -f nvfp4 -p te --4over6-error mse x.npy
err_has "apply to the nvfp4 4over6 recipes only"
expect_exit 2 fp4-quant -f mxfp4 --4over6-bound 448 x.npy
err_has "apply to the nvfp4 4over6 recipes only"
expect_exit 2 fp4-quant -f nvfp4 --sr -1 x.npy
expect_exit 2 fp4-quant -f nvfp4 --rht 0x1ffff x.npy
err_has "--rht: expected te, none, off or a 16-bit mask 0xHHHH, got '0x1ffff'"
expect_exit 2 fp4-quant -f nvfp4 --rht maybe x.npy
expect_exit 2 fp4-quant -f nvfp4 -p ggml --sr 3 x.npy
err_has "stochastic rounding needs a recipe that scales the elements"
expect_exit 2 fp4-quant -f nvfp4 -p te-4over6 --sr 3 x.npy
err_has "stochastic rounding with 4over6 is not defined"
expect_exit 2 fp4-quant -f fp8 --rht te x.npy
err_has "FP4 options"
echo "engine_options: ok"
