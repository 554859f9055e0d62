#!/bin/sh
# fp4-quant's row scales, static input scales, tensor-scale rules and 4over6
# options: what each does, checked against numpy, and each option's bad input
# (exit 2 for usage, 3 for an unreadable scale tensor, nothing written).
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np, json, struct
g = np.random.default_rng(7)
x = (g.standard_normal((6, 64)) * np.array([[0.01], [0.5], [1], [3], [20], [0.2]])).astype('<f4')
np.save('x.in.npy', x)
# tensor amax 168 = 2688 * 2^-4: S_enc = 16 and amax / 2688 = 2^-4 are exact
p = (g.standard_normal((4, 64)) * 20).astype('<f4')
p[1, 5] = 168.0
np.save('p.in.npy', p)
def st(name, tensors):
    hdr, off, blob = {}, 0, b''
    for n, (dt, shape, data) in tensors.items():
        hdr[n] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(data)]}
        off += len(data)
        blob += data
    h = json.dumps(hdr).encode()
    open(name, 'wb').write(struct.pack('<Q', len(h)) + h + blob)
st('ck.in.safetensors', {'q.input_scale': ('F32', [], np.float32(0.0625).tobytes()),
                         'fused.input_scale': ('F32', [3], np.array([0.01, 0.0625, 0.02], '<f4').tobytes()),
                         'b.input_scale': ('BF16', [], b'\x80\x3d'),   # bf16 0x3d80 = 0.0625
                         'i.input_scale': ('I32', [], b'\x01\0\0\0'),
                         'z.input_scale': ('F32', [], bytes(4))})
np.save('s.in.npy', np.array([0.0625], '<f4'))
np.save('big.in.npy', np.ones((5, 1000), '<f4'))
PY
mkdir -p out

# --scope row / te-row: each row's S_enc is 2688 / its amax, the codes those of each row alone under te
expect_exit 0 fp4-quant -f nvfp4 -p te-row --codes row.npy --row-scales rs.npy x.in.npy
out_has "row tensor scales"
for r in 0 1 2 3 4 5; do
    $PY -c "import numpy as np; np.save('r$r.in.npy', np.load('x.in.npy')[$r:$r+1])"
    expect_exit 0 fp4-quant -f nvfp4 -p te --codes c$r.npy r$r.in.npy
done
expect_exit 0 fp4-quant -f nvfp4 -p te --scope row --codes row2.npy x.in.npy
# the packed file holds the row scales, and its decode recipe gives --dequant's values
for p in te-row flashinfer-per-token miles-nvfp4-train; do
    expect_exit 0 fp4-quant -f nvfp4 -p $p -o q.h5 --dequant dq.npy --force x.in.npy
    $PY -c "
import numpy as np
PATH = 'q.h5'
exec(__import__('h5py').File(PATH, 'r').attrs['decode'].split('  #')[0])
assert f.attrs['scale_scope'] == 'row' and f['row_scale'].shape == (6, 1)
assert x.astype(np.float32).tobytes() == np.load('dq.npy').astype(np.float32).tobytes(), '$p'"
done
$PY - <<'PY'
import numpy as np
x = np.load('x.in.npy'); rs = np.load('rs.npy'); row = np.load('row.npy')
want = np.minimum(np.float32(2688) / np.abs(x).max(1).astype(np.float32), np.finfo(np.float32).max)
assert rs.dtype == np.float32 and rs.shape == (6,), rs.shape
assert (rs == want.astype(np.float32)).all(), (rs, want)
for r in range(6):
    assert (row[r] == np.load('c%d.npy' % r)[0]).all(), r
assert (np.load('row2.npy') == row).all()
PY

# --input-scale: with the tensor's own amax/2688 it is the dynamic scale; smaller, block scales clamp
expect_exit 0 fp4-quant -f nvfp4 -p vllm --codes dyn.npy p.in.npy
for s in 0.0625 0x1p-4 ck.in.safetensors:q.input_scale ck.in.safetensors:fused.input_scale \
         ck.in.safetensors:b.input_scale s.in.npy; do
    expect_exit 0 fp4-quant -f nvfp4 -p vllm --input-scale "$s" --codes st.npy p.in.npy
    out_has "static input scale           0.0625"
    cmp -s dyn.npy st.npy || fail "--input-scale $s: codes differ from the dynamic scale"
done
expect_exit 0 fp4-quant -f nvfp4 -p vllm --input-scale 0.001 --json p.in.npy
$PY - <<'PY'
import json
d = json.load(open('out.txt'))
assert abs(d['tensor_scale']['input_scale'] - 0.001) < 1e-9 and d['scale_clamped'] > 0 and d['saturated'] > 0, d
PY
expect_exit 0 fp4-quant -f nvfp4 -p vllm --input-scale 0.001 --input-scale off --json p.in.npy
$PY -c "import json; d = json.load(open('out.txt')); assert d['scale_clamped'] == 0 and 'input_scale' not in d['tensor_scale'], d"

# --4over6-math fp16 is te-4over6-fast; the knobs apply to FlashInfer's 4over6 too
expect_exit 0 fp4-quant -f nvfp4 -p te-4over6 --4over6-math fp16 --codes a.npy x.in.npy
expect_exit 0 fp4-quant -f nvfp4 -p te-4over6-fast --codes b.npy x.in.npy
cmp -s a.npy b.npy || fail "--4over6-math fp16 is not te-4over6-fast"
expect_exit 0 fp4-quant -f nvfp4 -p flashinfer-4over6 --4over6-error mse --4over6-bound 256 --4over6-math amax x.in.npy
expect_exit 0 fp4-quant -f nvfp4 -p te-row --tscale-rule floor --diff te-per-token@pr3045 x.in.npy

# bad usage: exit 2, nothing written
bad() {
    expect_exit 2 fp4-quant "$@" --codes out/c.npy x.in.npy
    err_has "$msg"
    no_outputs_left out
}
msg="--input-scale: expected a finite value > 0" bad -f nvfp4 -p vllm --input-scale -1
msg="--input-scale: expected a finite value > 0" bad -f nvfp4 -p vllm --input-scale 0
msg="--input-scale: expected a number, FILE:TENSOR or off, got 'abc'" bad -f nvfp4 -p vllm --input-scale abc
msg="apply to nvfp4 only" bad -f mxfp4 --input-scale 0.1
msg="apply to nvfp4 only" bad -f mxfp4 --scope row
msg="--scope: expected one of tensor, row (token per-token), got 'col'" bad -f nvfp4 --scope col
msg="--tscale-rule: expected one of" bad -f nvfp4 --tscale-rule nope
msg="--4over6-math: expected one of amax, decode, fp16 (fast)" bad -f nvfp4 -p te-4over6 --4over6-math x
msg="apply to the nvfp4 4over6 recipes only" bad -f nvfp4 -p te --4over6-math fp16
msg="row-scaled NVFP4 has 1x16 blocks only" bad -f nvfp4 -p te-2d --scope row
msg="a static input scale is one scale for the tensor" bad -f nvfp4 -p te-row --input-scale 0.1
msg="no row scales, tensor-scale rule or static input scale" bad -f nvfp4 -p ggml --input-scale 0.1
msg="--row-scales: the spec has one tensor scale" bad -f nvfp4 -p te --row-scales out/r.npy

# an unreadable scale tensor: exit 3, the file and tensor named, nothing written
bad3() {
    expect_exit 3 fp4-quant -f nvfp4 -p vllm --input-scale "$1" --codes out/c.npy x.in.npy
    err_has "$2"
    no_outputs_left out
}
bad3 missing.safetensors:q.input_scale "--input-scale missing.safetensors:q.input_scale: missing.safetensors: cannot open"
bad3 ck.in.safetensors:nope "ck.in.safetensors: no tensor 'nope'"
bad3 ck.in.safetensors:i.input_scale "tensor 'i.input_scale' is not a float tensor"
bad3 ck.in.safetensors:z.input_scale "the scale is 0, not a finite value > 0"
bad3 big.in.npy "expected 1 to 4096 values, found 5000"
bad3 p.in.npy:x "p.in.npy:x"
echo "fp4_quant_recipes: ok"
