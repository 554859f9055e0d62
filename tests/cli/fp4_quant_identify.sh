#!/bin/sh
# fp4-quant --identify: every profile's own output on a hostile tensor is
# recovered (that profile among the exact matches), unpacked, packed two a
# byte and from a safetensors U8 tensor; a knob setting no profile has is
# named as "PROFILE --option value"; a planted difference gives "no profile"
# (exit 1) with the nearest and the planted block; every bad input.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np
g = np.random.default_rng(3)
x = (g.standard_normal((8, 64)) * np.exp(g.standard_normal((8, 1)) * 2)).astype('<f4')
x[0, :16] = [0.25, -0.75, 1.25, -1.75, 2.5, -3.5, 5.0, 6.0, 0.5, -1.0, 3.0, -4.0, 0, -0.0, 1e-3, 7.0]  # ties
x[1, 16:48] = 0.0                                     # zero blocks
x[2, :32] = np.float32(1e-41) * np.arange(1, 33)      # subnormals
x[3, 5] = 3.0e38                                      # near FLT_MAX
x[4] *= 1e-3                                          # a small row
x[5, 40] = 4000.0                                     # an outlier token
np.save('x.in.npy', x)
PY

# every profile of both formats: its own codes and scales are reproduced
$PY - <<'PY' > profiles.txt
import json, subprocess
for p in json.loads(subprocess.run(['fp4-quant', '--list-profiles', '--json'], capture_output=True, check=True,
                                   text=True).stdout):
    for f in p['formats'].split(','):
        if f in ('mxfp4', 'nvfp4'):
            print(f, p['profile'])
PY
[ "$(wc -l < profiles.txt)" -gt 40 ] || fail "too few profiles listed: $(cat profiles.txt)"
n=0
while read -r f p; do
    fp4-quant -f "$f" -p "$p" --codes c.npy --scales s.npy x.in.npy > /dev/null 2>&1 ||
        { echo "skip $f $p: fp4-quant refuses this input"; continue; }
    expect_exit 0 fp4-quant --identify c.npy --identify-scales s.npy --json x.in.npy
    $PY - "$p" "$f" <<'PY' || fail "$f $p: not among the matches"
import json, sys
d = json.load(open('out.txt'))
names = [m['candidate'] for m in d['matches']]
assert d['reproduced'] and d['format'] == sys.argv[2] and sys.argv[1] in names, names
PY
    n=$((n + 1))
done < profiles.txt
[ "$n" -gt 40 ] || fail "only $n profiles checked"
echo "identified: $n profile outputs"

# packed two a byte (low nibble first) and a safetensors U8 tensor; the text form
fp4-quant -f nvfp4 -p te-row --codes c.npy --scales s.npy x.in.npy > /dev/null
$PY - <<'PY'
import json, struct, numpy as np
c = np.load('c.npy')
p = (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)
np.save('packed.npy', p)
s = np.load('s.npy')
h = json.dumps({'codes': {'dtype': 'U8', 'shape': list(p.shape), 'data_offsets': [0, p.nbytes]},
                'scales': {'dtype': 'U8', 'shape': list(s.shape), 'data_offsets': [p.nbytes, p.nbytes + s.nbytes]}})
h = h.encode() + b' ' * (-len(h) % 8)
open('eng.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + p.tobytes() + s.tobytes())
PY
expect_exit 0 fp4-quant --identify packed.npy --identify-scales s.npy x.in.npy
out_has "two a byte, low nibble first"
out_has "reproduced bit for bit"
out_has "  te-row"
expect_exit 0 fp4-quant -f nvfp4 --identify eng.safetensors:codes --identify-scales eng.safetensors:scales x.in.npy
out_has "  te-row"

# a knob setting that is no profile's: named with its option
fp4-quant -f nvfp4 -p te-4over6 --4over6-bound 448 --codes c.npy --scales s.npy x.in.npy > /dev/null
expect_exit 0 fp4-quant --identify c.npy --identify-scales s.npy x.in.npy
out_has "  te-4over6 --4over6-bound 448"
if grep -qx "  te-4over6" out.txt; then fail "te-4over6 (bound 256) reproduces the bound-448 output"; fi

# a static input scale is given to every candidate
fp4-quant -f nvfp4 -p vllm --input-scale 0.01 --codes c.npy --scales s.npy x.in.npy > /dev/null
expect_exit 0 fp4-quant --input-scale 0.01 --identify c.npy --identify-scales s.npy x.in.npy
out_has "  vllm"
expect_exit 2 fp4-quant --input-scale -1 --identify c.npy --identify-scales s.npy x.in.npy

# a planted difference: no profile, the nearest with the planted block first
fp4-quant -f nvfp4 -p te --codes c.npy --scales s.npy x.in.npy > /dev/null
$PY -c "
import numpy as np
s = np.load('s.npy'); s[2, 1] ^= 1; np.save('s2.npy', s)"
expect_exit 1 fp4-quant --identify c.npy --identify-scales s2.npy --show 3 x.in.npy
out_has "no profile or single option reproduces it"
grep -A1 -E '^  te +scales 1 of 32, codes 0 of 512' out.txt | grep -F "first differing block: row 2, block 1" \
    > /dev/null || { cat out.txt; fail "te with the planted block is not among the nearest"; }
[ "$(grep -c 'scales .* of 32' out.txt)" -eq 3 ] || fail "--show 3 did not list 3"
expect_exit 1 fp4-quant --identify c.npy --identify-scales s2.npy --json x.in.npy
$PY -c "
import json
d = json.load(open('out.txt'))
assert not d['reproduced'] and d['nearest'][0]['first_difference']['row'] == 2, d['nearest'][0]"

# usage: exit 2
expect_exit 2 fp4-quant --identify c.npy x.in.npy
err_has "--identify C and --identify-scales S go together"
expect_exit 2 fp4-quant -p te --identify c.npy --identify-scales s.npy x.in.npy
err_has "of the quantizer options it takes -f and --input-scale only"
expect_exit 2 fp4-quant --identify c.npy --identify-scales s.npy --codes o.npy x.in.npy
err_has "--identify writes nothing"
expect_exit 2 fp4-quant -f fp8 --identify c.npy --identify-scales s.npy x.in.npy
err_has "-f must be mxfp4 or nvfp4"
# input: exit 3
$PY - <<'PY'
import numpy as np
c = np.load('c.npy')
np.save('short.in.npy', c[:7])
bad = c.copy(); bad[0, 0] = 16; np.save('big.in.npy', bad)
np.save('frac.in.npy', c.astype('<f4') + 0.5)
np.save('s8.in.npy', np.zeros((8, 8), np.uint8))
PY
expect_exit 3 fp4-quant --identify short.in.npy --identify-scales s.npy x.in.npy
err_has "short.in.npy: the codes are [7, 64]; the input's [8, 64] needs [8, 64]"
expect_exit 3 fp4-quant --identify big.in.npy --identify-scales s.npy x.in.npy
err_has "big.in.npy: code 0 is 16, not an E2M1 code 0..15"
expect_exit 3 fp4-quant --identify frac.in.npy --identify-scales s.npy x.in.npy
err_has "frac.in.npy: --identify codes: value 0 is"
expect_exit 3 fp4-quant --identify c.npy --identify-scales s8.in.npy x.in.npy
err_has "s8.in.npy: the scales are [8, 8]"
expect_exit 3 fp4-quant -f mxfp4 --identify c.npy --identify-scales s.npy x.in.npy
err_has "16-element blocks are nvfp4, not mxfp4"
expect_exit 3 fp4-quant --identify missing.npy --identify-scales s.npy x.in.npy
err_has "missing.npy"
echo "identify: ok"
