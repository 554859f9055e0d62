#!/bin/sh
# fp4-quant streams: chunk size, threads and kernel level do not change a bit;
# every input kind (npy f32/f64/f16, safetensors F32/F16/BF16, HDF5 f32/f64/
# bf16, 1-D) reads the same values; NaN/Inf are counted, never averaged away.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np, h5py, json, struct
rng = np.random.default_rng(3)
x = rng.standard_normal((70, 256)).astype('<f4')
np.save('T.in.npy', x)
# bf16-exact values so every container holds the same numbers
xb = (x.view('<u4') & 0xffff0000).view('<f4')
np.save('b32.in.npy', xb)
np.save('b64.in.npy', xb.astype('<f8'))
h16 = x.astype('<f2')
np.save('h16.in.npy', h16)
np.save('h32.in.npy', h16.astype('<f4'))
bf = (xb.view('<u4') >> 16).astype('<u2')
hdr = {'__metadata__': {'format': 'pt'},
       'f32': {'dtype': 'F32', 'shape': list(xb.shape), 'data_offsets': [0, xb.nbytes]},
       'bf16': {'dtype': 'BF16', 'shape': list(xb.shape), 'data_offsets': [xb.nbytes, xb.nbytes + bf.nbytes]},
       'f16': {'dtype': 'F16', 'shape': list(h16.shape), 'data_offsets': [xb.nbytes + bf.nbytes, xb.nbytes + bf.nbytes + h16.nbytes]}}
h = json.dumps(hdr).encode()
open('m.in.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + xb.tobytes() + bf.tobytes() + h16.tobytes())
with h5py.File('m.in.h5', 'w') as f:
    f['f32'] = xb
    f['f64'] = xb.astype('f8')
    d = f.create_dataset('bf16', data=bf, chunks=(7, 64))
    d.attrs['dtype'] = 'bfloat16'
    f['one'] = xb[0]
np.save('one.in.npy', xb[0])
y = x.copy(); y[1, 3] = np.nan; y[2, 40] = np.inf; y[2, 41] = -np.inf
np.save('nf.in.npy', y)
PY

for f in "mxfp4 ocp" "nvfp4 te" "nvfp4 te --2d" "fp8 fp8 --fp8-gran 128x128"; do
    set -- $f
    fmt=$1
    shift 2
    base="-f $fmt $* -o q.h5 --codes c.npy --scales s.npy --dequant d.npy --json"
    expect_exit 0 fp4-quant $base T.in.npy
    for v in c s d; do mv $v.npy $v.ref.npy; done
    mv q.h5 q.ref.h5
    mv out.txt sum.ref.json
    i=0
    # --threads 1 reads on a thread of its own, 2 and more on the workers (run.c)
    for variant in "--chunk-rows 1" "--chunk-rows 17" "--threads 1" "--threads 2" "--threads 5 --chunk-rows 33" "--ref"; do
        i=$((i + 1))
        expect_exit 0 fp4-quant $base $variant T.in.npy
        for v in c s d; do cmp -s $v.npy $v.ref.npy || fail "$fmt $*: $variant changed $v.npy"; done
        # the summary too (its statistics), but the thread count it reports; --ref
        # sums err2 and x2 in another order (their last bits: libfp4scope(3), FP4S_FORCE_REF)
        [ "$variant" = --ref ] || $PY -c "
import json, sys
a, b = json.load(open('out.txt')), json.load(open('sum.ref.json'))
a.pop('threads'); b.pop('threads')
sys.exit(a != b)" || fail "$fmt $*: $variant changed the summary"
        mv q.h5 q.$i.h5
    done
    $PY -c "
import h5py, numpy as np
r = h5py.File('q.ref.h5', 'r')
for i in range(1, 7):
    f = h5py.File('q.%d.h5' % i, 'r')
    for k in ('codes', 'scales', 'tensor_scale'):
        assert np.array_equal(f[k][()], r[k][()]), (i, k)
" || fail "$fmt $*: a variant changed the .h5 file"
    rm -f *.ref.npy q.*.h5 c.npy s.npy d.npy sum.ref.json
done

# every container and dtype of the same values gives the same codes
expect_exit 0 fp4-quant -f nvfp4 --codes ref.npy b32.in.npy
for spec in b64.in.npy m.in.safetensors:f32 m.in.safetensors:bf16 m.in.h5:/f32 m.in.h5:/f64 m.in.h5:/bf16; do
    for t in 1 3; do
        expect_exit 0 fp4-quant -f nvfp4 --codes c.npy --threads $t "$spec"
        cmp -s c.npy ref.npy || fail "$spec: codes differ from the float32 .npy (--threads $t)"
    done
done
expect_exit 0 fp4-quant -f nvfp4 --codes ref.npy h32.in.npy
for spec in h16.in.npy m.in.safetensors:f16; do
    expect_exit 0 fp4-quant -f nvfp4 --codes c.npy "$spec"
    cmp -s c.npy ref.npy || fail "$spec: codes differ from the float32 .npy"
done

# 1-D tensors are one row and keep their shape
for spec in one.in.npy m.in.h5:/one; do
    expect_exit 0 fp4-quant --codes c.npy --dequant d.npy --json "$spec"
    $PY -c "
import json, numpy as np
j = json.load(open('out.txt')); assert j['shape'] == [256], j['shape']
assert np.load('c.npy').shape == (256,) and np.load('d.npy').shape == (256,)
"
done

# NaN and Inf: counted in the summary, per policy in the outputs
for p in ocp ggml microxcaling; do
    expect_exit 0 fp4-quant -p $p --dequant d.npy --json nf.in.npy
    P=$p $PY -c "
import json, os, numpy as np
j = json.load(open('out.txt'))
nf = j['nonfinite']
assert nf['total'] == 3 and nf['nan'] == 1 and nf['inf'] == 2 and nf['blocks'] == 2, nf
assert j['rel_error'] is not None and np.isfinite(j['rel_error'])
d = np.load('d.npy')
assert np.isfinite(d[3:]).all() and np.isfinite(d[0]).all()
"
done
expect_exit 0 fp4-quant -p ocp nf.in.npy
out_has "non-finite inputs"
out_has "3 (NaN 1, Inf 2) in 2 blocks"
# '-' writes a .npy to stdout (and no summary)
expect_exit 0 fp4-quant --codes - T.in.npy
mv out.txt stdout.npy
expect_exit 0 fp4-quant --codes c.npy T.in.npy
cmp -s stdout.npy c.npy || fail "--codes - differs from --codes c.npy"
# --gzip compresses -o without changing its content
expect_exit 0 fp4-quant -o q.h5 T.in.npy
expect_exit 0 fp4-quant -o qz.h5 --gzip 6 T.in.npy
$PY -c "
import h5py, numpy as np
a, b = h5py.File('q.h5', 'r'), h5py.File('qz.h5', 'r')
assert b['codes'].compression == 'gzip' and a['codes'].compression is None
assert np.array_equal(a['codes'][:], b['codes'][:]) and np.array_equal(a['scales'][:], b['scales'][:])
"
rm -f c.npy d.npy ref.npy q.h5 qz.h5 stdout.npy
no_outputs_left .
echo ok
