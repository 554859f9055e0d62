#!/bin/sh
# fp4-quant against an independent numpy model of the OCP MXFP4 quantizer
# (FLOOR shared exponent from the exponent bits, E2M1 round-half-even,
# satfinite, -0 kept, zero block code 0) on float32, float16 and bfloat16
# inputs in all three containers: catches any reader or writer that changes a
# value, a byte order or a row.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np, h5py, json, struct
rng = np.random.default_rng(21)
x = (rng.standard_normal((33, 160)) * np.exp2(rng.integers(-12, 12, (33, 1)))).astype('<f4')
x[0, :32] = 0
x[1, 5] = 6.0 * 2 ** -3     # ties and saturation on the grid
x[1, 6] = 7.5 * 2 ** -3
x[1, 7] = 2.5 * 2 ** -3
x[1, 8] = -0.25 * 2 ** -3
x[1, 9] = 8.0 * 2 ** -3 - 2 ** -30
np.save('x.in.npy', x)
h = x.astype('<f2'); np.save('h.in.npy', h)
b = ((x.view('<u4') + 0x7fff + ((x.view('<u4') >> 16) & 1)) >> 16).astype('<u2')
hd = json.dumps({'b': {'dtype': 'BF16', 'shape': list(b.shape), 'data_offsets': [0, b.nbytes]}}).encode()
open('b.in.safetensors', 'wb').write(struct.pack('<Q', len(hd)) + hd + b.tobytes())
with h5py.File('b.in.h5', 'w') as f:
    d = f.create_dataset('t/b', data=b, chunks=(4, 32), compression='gzip')
    d.attrs['dtype'] = 'bfloat16'
PY

for spec in x.in.npy h.in.npy b.in.safetensors:b b.in.h5:/t/b; do
    expect_exit 0 fp4-quant -f mxfp4 -p ocp --codes c.npy --scales s.npy --chunk-rows 5 "$spec"
    SPEC=$spec $PY - <<'PY'
import os, numpy as np, h5py
spec = os.environ['SPEC']
if spec == 'x.in.npy':
    x = np.load('x.in.npy')
elif spec == 'h.in.npy':
    x = np.load('h.in.npy').astype(np.float32)
else:
    if spec.startswith('b.in.safetensors'):
        raw = open('b.in.safetensors', 'rb').read()
        n = int.from_bytes(raw[:8], 'little')
        b = np.frombuffer(raw[8 + n:], '<u2').reshape(33, 160)
    else:
        b = h5py.File('b.in.h5', 'r')['t/b'][:]
    x = (b.astype(np.uint32) << 16).view(np.float32)
R, C = x.shape
blk = x.reshape(R, C // 32, 32).astype(np.float32)
amax = np.abs(blk).max(axis=2)
_, e = np.frexp(amax)                       # amax = m * 2^e, m in [0.5, 1)
k = np.where(amax > 0, e - 3, -127)         # floor(log2 amax) - 2
code = np.clip(k + 127, 0, 254).astype(np.uint8)
scale = np.ldexp(np.float32(1), code.astype(np.int32) - 127).astype(np.float32)
v = blk / scale[:, :, None]
a = np.abs(v)
grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], np.float32)
mids = (grid[1:] + grid[:-1]) / 2
lo = np.searchsorted(mids, a, 'left')
hi = np.searchsorted(mids, a, 'right')
idx = np.where(lo == hi, lo, np.where(lo % 2 == 0, lo, hi))   # ties to the even code
idx = np.where(a > 6, 7, idx)
q = (idx | np.where(np.signbit(v), 8, 0)).astype(np.uint8).reshape(R, C)
c = np.load('c.npy'); s = np.load('s.npy')
assert np.array_equal(s, code), (spec, np.argwhere(s != code)[:5])
bad = np.argwhere(c != q)
assert len(bad) == 0, (spec, bad[:5], c[tuple(bad[0])], q[tuple(bad[0])], x[tuple(bad[0])])
PY
done
rm -f c.npy s.npy
no_outputs_left .
echo ok
