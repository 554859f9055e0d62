#!/bin/sh
# fp4-quant outputs: --codes/--scales/--dequant/-o agree with each other and
# with an independent numpy decode; the .h5 explains itself (attributes and
# the decode recipe); --json fields match numpy's own computation.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
x = rng.standard_normal((48, 256)).astype('<f4')
x[3, :32] = 0                       # an all-zero block
x[5, 7] = 7.0 * 2 ** 3              # floor rule saturates 7*2^k
x[9, 40:72] *= 1e-3
np.save('T.in.npy', x)
PY

for fmt in "mxfp4 ocp" "mxfp4 ceil" "mxfp4 ggml" "nvfp4 te" "nvfp4 torchao" "nvfp4 modelopt" ; do
    set -- $fmt
    f=$1 p=$2
    expect_exit 0 fp4-quant -f "$f" -p "$p" -o q.h5 --codes c.npy --scales s.npy --dequant d.npy --json T.in.npy
    cp out.txt summary.json
    F=$f P=$p $PY - <<'PY'
import json, os, numpy as np, h5py
f, p = os.environ['F'], os.environ['P']
x = np.load('T.in.npy')
c = np.load('c.npy'); s = np.load('s.npy'); d = np.load('d.npy')
blk = 32 if f == 'mxfp4' else 16
assert c.dtype == np.uint8 and c.shape == x.shape, (c.dtype, c.shape)
assert s.dtype == np.uint8 and s.shape == (48, 256 // blk), s.shape
assert d.dtype == np.float32 and d.shape == x.shape
assert c.max() <= 15
e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
h = h5py.File('q.h5', 'r')
a = h.attrs
assert a['schema'] == 'fp4scope-quant' and a['format'] == f and a['profile'] == p, dict(a)
assert list(a['shape']) == [48, 256] and a['block'] == blk
for k in ('spec', 'tie', 'packing', 'nonfinite', 'fp4scope_version', 'source', 'decode', 'element_lut', 'scale_lut'):
    assert k in a, k
assert a['source'] == 'T.in.npy'
assert np.array_equal(a['element_lut'], e2m1) or np.allclose(a['element_lut'], e2m1)
if f == 'mxfp4':
    assert 'scale_rule' in a
    # independent decode: E2M1 value times 2^(e-127)
    ref = e2m1[c] * np.repeat(np.ldexp(np.float32(1), s.astype(np.int32) - 127).astype(np.float32), 32, axis=1)
    if a['scale_is_ggml'] == 0:
        assert np.array_equal(ref, d), np.abs(ref - d).max()
else:
    assert 'recipe' in a and 'global_scale' in a
# packed codes unpack to --codes
pk = h['codes'][:]
assert pk.shape == (48, 128) and pk.dtype == np.uint8
if a['packing'] == 'pairs':
    u = np.empty_like(c); u[:, 0::2] = pk & 15; u[:, 1::2] = pk >> 4
else:
    c3 = pk.reshape(48, -1, 16); u = np.concatenate([c3 & 15, c3 >> 4], axis=2).reshape(48, 256)
assert np.array_equal(u, c)
assert np.array_equal(h['scales'][:], s)
# the decode recipe rebuilds --dequant exactly
PATH = 'q.h5'
env = {'PATH': PATH}
exec(a['decode'], env)
xx = env['x']
assert xx.dtype == np.float32, xx.dtype
assert np.array_equal(xx, d), (p, np.abs(xx - d).max())
# JSON summary
j = json.load(open('summary.json'))
assert j['format'] == f and j['profile'] == p and j['shape'] == [48, 256] and j['block'] == blk
assert j['elements'] == x.size and j['blocks'] == x.size // blk
assert j['nonfinite']['total'] == 0
zb = int((np.abs(x.reshape(-1, blk)).max(axis=1) == 0).sum())
assert j['zero_blocks'] == zb, (j['zero_blocks'], zb)
rel = float(np.linalg.norm((d.astype(np.float64) - x)) / np.linalg.norm(x.astype(np.float64)))
assert abs(j['rel_error'] - rel) <= 1e-6 * rel, (j['rel_error'], rel)
assert j['tensor_scale']['amax'] is not None
if f == 'nvfp4':
    assert j['tensor_scale']['amax'] == float(np.abs(x).max())
for k in ('saturated', 'neg_zero', 'rules', 'kernels', 'outputs'):
    assert k in j, k
assert h['tensor_scale'][()] == np.float32(j['tensor_scale']['stored'] if j['tensor_scale']['stored'] is not None else 1)
PY
    rm -f q.h5 c.npy s.npy d.npy summary.json
done

# FP8 baselines: per tensor and 1x128 tiles
for g in tensor 1x128; do
    expect_exit 0 fp4-quant -f fp8 --fp8-gran $g -o q.h5 --codes c.npy --scales s.npy --dequant d.npy T.in.npy
    G=$g $PY - <<'PY'
import os, numpy as np, h5py
x = np.load('T.in.npy'); c = np.load('c.npy'); s = np.load('s.npy'); d = np.load('d.npy')
assert c.shape == x.shape and s.dtype == np.float32
assert s.shape == ((1, 1) if os.environ['G'] == 'tensor' else (48, 2)), s.shape
env = {'PATH': 'q.h5'}
exec(h5py.File('q.h5', 'r').attrs['decode'], env)
assert np.array_equal(env['x'], d), np.abs(env['x'] - d).max()
assert np.abs(d - x).max() <= 0.07 * np.abs(x).max()
PY
    rm -f q.h5 c.npy s.npy d.npy
done
# rank 3 (a PyTorch dump [batch, seq, hidden]) reads as [prod(leading), last]: the
# summary says so, with the shape the file has (--json: shape and source_shape)
$PY -c "import numpy as np; np.save('R.in.npy', np.linspace(-3, 3, 2 * 3 * 64, dtype=np.float32).reshape(2, 3, 64))"
expect_exit 0 fp4-quant -f nvfp4 R.in.npy
out_has "(6, 64) from (2, 3, 64)"
expect_exit 0 fp4-quant -f nvfp4 --json --codes c.npy R.in.npy
$PY - <<'PY'
import json, numpy as np
j = json.load(open('out.txt'))
assert j['shape'] == [6, 64] and j['source_shape'] == [2, 3, 64], (j['shape'], j.get('source_shape'))
assert np.load('c.npy').shape == (6, 64)
PY
expect_exit 0 fp4-quant -f nvfp4 --json T.in.npy
$PY -c "import json; j = json.load(open('out.txt')); assert 'source_shape' not in j and len(j['shape']) == 2, j['shape']"
rm -f c.npy
no_outputs_left .
echo ok
