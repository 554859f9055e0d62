#!/bin/sh
# fp4-capture import: bit-exact from .npy (f32, f16), safetensors (F32, F16,
# BF16, patterns with {1}), HDF5 (float32 and bfloat16 uint16); append (-a);
# float64 conversion; refusals.
. "$(dirname "$0")/common.sh"
C=fp4-capture
"$PY" - "$T" <<'PYEOF'
import json, struct, sys
import numpy as np, h5py
d = sys.argv[1]
rng = np.random.default_rng(0)
def bits(n, dt):  # random bit patterns, NaNs and infinities included
    return rng.integers(0, 2**(8*np.dtype(dt).itemsize), size=n, dtype=np.uint64).astype(dt)
a32 = bits(5 * 7, np.uint32).view(np.float32).reshape(5, 7)
np.save(f'{d}/a32.npy', a32)
a16 = bits(3 * 8, np.uint16).view(np.float16).reshape(3, 8)
np.save(f'{d}/a16.npy', a16)
np.save(f'{d}/a64.npy', np.linspace(-1, 1, 12).reshape(3, 4))
np.save(f'{d}/v32.npy', np.arange(6, dtype=np.float32))
# safetensors: experts of a layer (BF16), an F16 and an F32 tensor
tensors = {}
for e in range(4):
    tensors[f'model.layers.0.mlp.experts.{e}.w1.weight'] = ('BF16', bits(6 * 16, np.uint16).reshape(6, 16))
tensors['model.layers.0.self_attn.q_proj.weight'] = ('F16', bits(4 * 16, np.uint16).reshape(4, 16))
tensors['lm_head.weight'] = ('F32', bits(2 * 16, np.uint32).reshape(2, 16))
hdr, blobs, off = {}, [], 0
for k, (dt, arr) in tensors.items():
    b = arr.astype('<u%d' % arr.dtype.itemsize).tobytes()
    hdr[k] = {'dtype': dt, 'shape': list(arr.shape), 'data_offsets': [off, off + len(b)]}
    blobs.append(b); off += len(b)
hdr['__metadata__'] = {'format': 'pt'}
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
with open(f'{d}/dump.safetensors', 'wb') as f:
    f.write(struct.pack('<Q', len(h))); f.write(h); f.write(b''.join(blobs))
for k, (dt, arr) in tensors.items():
    np.save(f'{d}/ref_{k}.npy', arr)
with h5py.File(f'{d}/src.h5', 'w') as f:
    f['/acts/layer0/x'] = bits(4 * 8, np.uint32).view(np.float32).reshape(4, 8)
    f['/acts/layer0/b'] = bits(4 * 8, np.uint16).reshape(4, 8)
    f['/acts/layer0/b'].attrs['dtype'] = 'bfloat16'
PYEOF

$C import "$T/a32.npy" -o "$T/c.h5" --step 3 --side trainer --site layers.0.q_proj
$C import "$T/a16.npy" -o "$T/c.h5" -a --step 3 --side trainer --site 'half.{stem}'
$C import "$T/dump.safetensors:model.layers.0.mlp.experts.*.w1.weight" -o "$T/c.h5" -a \
    --step 3 --side weight --site 'layers.0.mlp.experts.{1}.w1'
$C import "$T/dump.safetensors" -o "$T/c.h5" -a --step 4 --side rollout
$C import "$T/src.h5:/acts/layer0/x" "$T/src.h5:/acts/layer0/b" -o "$T/c.h5" -a --step 5 --side rollout
$C import "$T/v32.npy" -o "$T/c.h5" -a --const --side weight --site vec
expect 0 "float64 converted to float32" $C import "$T/a64.npy" -o "$T/c.h5" -a --step 6 --side trainer

"$PY" - "$T" <<'PYEOF'
import sys, numpy as np, h5py
d = sys.argv[1]
f = h5py.File(f'{d}/c.h5', 'r')
assert f.attrs['fp4scope_schema'] == 'fp4scope-capture/1'
def same(path, ref, attr=None):
    ds = f[path]
    assert ds.attrs.get('dtype') == attr if attr else True, (path, ds.attrs.get('dtype'))
    a = ds[()]
    assert a.shape == ref.shape, (path, a.shape, ref.shape)
    assert a.tobytes() == np.ascontiguousarray(ref).tobytes(), path + ' differs'
same('/steps/3/layers.0.q_proj/trainer', np.load(f'{d}/a32.npy'), 'float32')
same('/steps/3/half.a16/trainer', np.load(f'{d}/a16.npy'), 'float16')
for e in range(4):
    same(f'/steps/3/layers.0.mlp.experts.{e}.w1/weight', np.load(f'{d}/ref_model.layers.0.mlp.experts.{e}.w1.weight.npy'), 'bfloat16')
    same(f'/steps/4/model.layers.0.mlp.experts.{e}.w1.weight/rollout', np.load(f'{d}/ref_model.layers.0.mlp.experts.{e}.w1.weight.npy'), 'bfloat16')
same('/steps/4/model.layers.0.self_attn.q_proj.weight/rollout', np.load(f'{d}/ref_model.layers.0.self_attn.q_proj.weight.npy').view(np.float16), 'float16')
same('/steps/4/lm_head.weight/rollout', np.load(f'{d}/ref_lm_head.weight.npy').view(np.float32), 'float32')
s = h5py.File(f'{d}/src.h5', 'r')
same('/steps/5/acts.layer0.x/rollout', s['/acts/layer0/x'][()], 'float32')
same('/steps/5/acts.layer0.b/rollout', s['/acts/layer0/b'][()], 'bfloat16')
same('/weights/vec', np.arange(6, dtype=np.float32).reshape(1, 6), 'float32')
same('/steps/6/a64/trainer', np.load(f'{d}/a64.npy').astype(np.float32), 'float32')
assert f['/steps/3/layers.0.mlp.experts.2.w1/weight'].attrs['expert'] == 2
assert f['/steps/3/layers.0.mlp.experts.2.w1/weight'].attrs['layer'] == 0
PYEOF

# appending the same tensor again appends rows
$C import "$T/a32.npy" -o "$T/c.h5" -a --step 3 --side trainer --site layers.0.q_proj
$C ls --json "$T/c.h5" --steps 3 --sites layers.0.q_proj > "$T/j"
grep -q '"shape": \[' "$T/j" && "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['datasets'][0]['shape']==[10,7], j" "$T/j"

# without -a the output is replaced atomically
$C import "$T/v32.npy" -o "$T/c.h5" --step 0 --side trainer --force
[ "$(fp4-capture ls --json "$T/c.h5" | grep -c '"path"')" = 1 ] || fail "import without -a did not replace"

# refusals: nothing written, clear messages
cp "$T/c.h5" "$T/keep.h5"
expect 2 "both map to site 'same'" $C import "$T/a32.npy" "$T/a16.npy" -o "$T/c.h5" -a --step 1 --side trainer --site same
expect 2 "--step N is required" $C import "$T/a32.npy" -o "$T/c.h5" --side trainer
expect 2 "--side" $C import "$T/a32.npy" -o "$T/c.h5" --step 1 --side student
expect 2 "--const needs --side weight" $C import "$T/a32.npy" -o "$T/c.h5" --const --side trainer
expect 3 "no such file" $C import "$T/nope.npy" -o "$T/c.h5" --step 1 --side trainer --force
expect 3 "no tensor matches 'model.layers.9.*'" $C import "$T/dump.safetensors:model.layers.9.*" -o "$T/c.h5" --step 1 --side trainer --force
expect 3 "nothing" $C import "$T/dump.safetensors:nothing" -o "$T/c.h5" --step 1 --side trainer --force
expect 3 "/acts/missing" $C import "$T/src.h5:/acts/missing" -o "$T/c.h5" --step 1 --side trainer --force
cmp -s "$T/c.h5" "$T/keep.h5" || fail "a refused import changed the capture"
ls "$T" | grep -q '\.tmp\.' && fail "temporary file left behind"

# tensor names with '*', '?' and '/': importable by their exact names (an
# escape or --exact); a '/' that would land in a site is an input error naming
# the file; a pathological pattern is matched in polynomial time
"$PY" - "$T" <<'PYEOF'
import json, struct, sys
import numpy as np
d = sys.argv[1]
def st(path, tensors):
    hdr, blobs, off = {}, [], 0
    for k, arr in tensors.items():
        b = arr.astype('<f4').tobytes()
        hdr[k] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h); f.write(b''.join(blobs))
st(f'{d}/odd.safetensors', {'w*x': np.full((2, 4), 1, np.float32), 'wax': np.full((2, 4), 2, np.float32),
                            'q?r': np.full((2, 4), 3, np.float32), 'model/layer/0/w': np.full((2, 4), 4, np.float32)})
st(f'{d}/long.safetensors', {'a' * 60: np.ones((1, 4), np.float32)})
PYEOF
expect 3 "odd.safetensors: tensor 'model/layer/0/w' gives site 'model/layer/0/w': slashes" $C import "$T/odd.safetensors" -o "$T/odd.h5" --step 0 --side weight
[ ! -e "$T/odd.h5" ] || fail "a refused import left an output"
$C import "$T/odd.safetensors:w\*x" -o "$T/odd.h5" --step 0 --side weight --site star
$C import "$T/odd.safetensors:w*x" --exact -o "$T/odd.h5" -a --step 1 --side weight --site star
$C import "$T/odd.safetensors:q\?r" -o "$T/odd.h5" -a --step 2 --side weight --site q
$C import "$T/odd.safetensors:model/layer/0/w" -o "$T/odd.h5" -a --step 3 --side weight
expect 3 "w\*y: tensor not found" $C import "$T/odd.safetensors:w\*y" -o "$T/odd2.h5" --step 0 --side weight
"$PY" - "$T/odd.h5" <<'PYEOF'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
got = {k: sorted(f['steps'][k]) for k in f['steps']}
assert got == {'0': ['star'], '1': ['star'], '2': ['q'], '3': ['model.layer.0.w']}, got
assert (f['/steps/0/star/weight'][()] == 1).all() and (f['/steps/1/star/weight'][()] == 1).all()
assert (f['/steps/2/q/weight'][()] == 3).all() and (f['/steps/3/model.layer.0.w/weight'][()] == 4).all()
PYEOF
# *a*a*a*a*a*a*a*a*b against a 60-character name ran for minutes (exponential)
expect 3 "no tensor matches" timeout 10 $C import "$T/long.safetensors:*a*a*a*a*a*a*a*a*a*a*a*a*b" -o "$T/l.h5" --step 0 --side weight
$C import "$T/long.safetensors:*a*a*a*a*a*a*a*a*" -o "$T/l.h5" --step 0 --side weight --site '{1}x{9}'
fp4-capture ls "$T/l.h5" | grep -q " x$(printf 'a%.0s' $(seq 52)) " || fail "captures of a long match"

# a dump of rank 3 [batch, seq, hidden] imports as batch*seq rows, bit for bit,
# with its shape kept
"$PY" -c "
import numpy as np
np.save('$T/dump3.npy', np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8))"
$C import "$T/dump3.npy" -o "$T/r3.h5" --step 0 --side trainer --site layers.0.x
"$PY" - "$T/r3.h5" "$T/dump3.npy" <<'PYEOF'
import sys, h5py, numpy as np
d = h5py.File(sys.argv[1], 'r')['/steps/0/layers.0.x/trainer']
ref = np.load(sys.argv[2])
assert d.shape == (6, 8) and d[()].tobytes() == ref.reshape(6, 8).tobytes(), d.shape
s = d.attrs['source_shape']
assert (s.decode() if isinstance(s, bytes) else s) == '2,3,8', s
PYEOF

# one safetensors header limit (100 MiB) and one true message for every reader
"$PY" -c "
import struct
with open('$T/bighdr.safetensors', 'wb') as f:
    f.write(struct.pack('<Q', (100 << 20) + 8)); f.truncate(8 + (100 << 20) + 8 + 16)"
expect 3 "bighdr.safetensors: safetensors header length 104857608 exceeds the limit of 104857600 bytes (100 MiB)" $C import "$T/bighdr.safetensors" -o "$T/bh.h5" --step 0 --side weight
expect 3 "bighdr.safetensors: safetensors header length 104857608 exceeds the limit of 104857600 bytes (100 MiB)" fp4-quant "$T/bighdr.safetensors:w"

# one import is one transaction: a later source that fails undoes the earlier
# ones (a new site, rows appended to a site, a new step), whatever the order
$C import "$T/a32.npy" -o "$T/tx.h5" --step 0 --side trainer --site layers.0.q_proj
$C ls --json "$T/tx.h5" > "$T/before.json"
mkdir "$T/k9" "$T/k7"
"$PY" -c "
import numpy as np
np.save('$T/k9/layers.0.q_proj.npy', np.ones((2, 9), np.float32))
np.save('$T/k7/layers.0.q_proj.npy', np.ones((3, 7), np.float32))
np.save('$T/bad.npy', np.ones((2, 7), np.int32))"
# new sites in an old step, then a source whose K differs from the capture's
expect 3 "has shape \[5, 7\], cannot append rows of 9 columns" $C import "$T/a32.npy" "$T/v32.npy" "$T/k9/layers.0.q_proj.npy" -a -o "$T/tx.h5" --step 0 --side trainer
grep -q "nothing of this import was added" "$T/err" || fail "the message does not say the import was undone"
# rows appended to an old dataset, then a source that cannot be read
expect 3 "dtype .<i4. is not supported" $C import "$T/k7/layers.0.q_proj.npy" "$T/bad.npy" -a -o "$T/tx.h5" --step 0 --side trainer
# a new step, then the same
expect 3 "dtype .<i4. is not supported" $C import "$T/a32.npy" "$T/bad.npy" -a -o "$T/tx.h5" --step 4 --side trainer
$C ls --json "$T/tx.h5" > "$T/after.json"
"$PY" - "$T/before.json" "$T/after.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
strip = lambda j: [(d['path'], d['shape']) for d in j['datasets']]
assert strip(a) == strip(b), (strip(a), strip(b))
assert b['interrupted'] is False
PYEOF
echo ok
