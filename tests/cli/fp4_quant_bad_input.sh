#!/bin/sh
# fp4-quant on bad input and bad usage: the documented exit code, a message
# naming the file and the problem, and no output file left behind.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np, h5py, json, struct
x = np.arange(4 * 64, dtype='<f4').reshape(4, 64)
np.save('ok.in.npy', x)
np.save('r3.in.npy', np.zeros((2, 2, 32), '<f4'))
np.save('int.in.npy', np.zeros((2, 32), '<i4'))
np.save('big.in.npy', np.zeros((2, 32), '>f4'))
np.save('fortran.in.npy', np.asfortranarray(np.zeros((32, 64), '<f4')))
np.save('w100.in.npy', np.ones((4, 100), '<f4'))
raw = open('ok.in.npy', 'rb').read()
open('trunc.in.npy', 'wb').write(raw[:len(raw) - 10])
open('garbage.in.npy', 'wb').write(b'\x93NUMPY\x01\x00\x20\x00{"descr": nonsense}           \n' + b'\0' * 64)
open('empty.in.npy', 'wb').close()
def st(name, header, data):
    h = json.dumps(header).encode()
    open(name, 'wb').write(struct.pack('<Q', len(h)) + h + data)
st('m.in.safetensors', {'layers.0.w': {'dtype': 'F32', 'shape': [2, 32], 'data_offsets': [0, 256]},
                        'layers.1.w': {'dtype': 'I64', 'shape': [2, 32], 'data_offsets': [256, 768]}}, bytes(768))
st('lie.in.safetensors', {'w': {'dtype': 'F32', 'shape': [2, 64], 'data_offsets': [0, 256]}}, bytes(256))
st('past.in.safetensors', {'w': {'dtype': 'F32', 'shape': [2, 32], 'data_offsets': [0, 256]}}, bytes(100))
open('hlen.in.safetensors', 'wb').write(struct.pack('<Q', 1 << 60) + b'{}')
with h5py.File('a.in.h5', 'w') as f:
    f['act/x'] = np.ones((2, 32), 'f4')
    f['u16'] = np.ones((2, 32), 'u2')
    f['r3'] = np.ones((2, 2, 32), 'f4')
PY
mkdir -p out

# input problems: exit 3, file and problem named, nothing written
run_bad() {
    spec=$1
    text=$2
    expect_exit 3 fp4-quant -o out/q.h5 --codes out/c.npy --dequant out/d.npy "$spec"
    err_has "fp4-quant: "
    err_has "$text"
    # one line: the library's own message, no HDF5 error stack dump
    [ "$(wc -l <err.txt)" -eq 1 ] || { cat err.txt >&2; fail "$spec: more than one line on stderr"; }
    no_outputs_left out
}
run_bad missing.npy "missing.npy: cannot open: No such file or directory"
run_bad empty.in.npy "empty.in.npy: file is empty"
run_bad trunc.in.npy "trunc.in.npy: truncated"
run_bad garbage.in.npy "garbage.in.npy: header"
run_bad int.in.npy "int.in.npy: dtype '<i4' is not supported"
run_bad big.in.npy "big.in.npy: dtype '>f4' is big-endian"
run_bad fortran.in.npy "fortran.in.npy: fortran_order is True"
run_bad m.in.safetensors:nope "nope: tensor not found; tensors: layers.0.w, layers.1.w"
run_bad m.in.safetensors "name a tensor as"
run_bad m.in.safetensors:layers.1.w "layers.1.w: dtype I64 is not supported"
run_bad lie.in.safetensors:w "data_offsets span 256 bytes but shape (2, 64) of F32 needs 512"
run_bad past.in.safetensors:w "run past the 100-byte data buffer"
run_bad hlen.in.safetensors:w "header length 1152921504606846976 does not fit"
run_bad a.in.h5:/act/y "a.in.h5: /act/y: dataset not found; did you mean '/act/x'? datasets: /act/x"
run_bad a.in.h5:/u16 "dtype = \"bfloat16\""
run_bad w100.in.npy "w100.in.npy: shape (4, 100): last dimension 100 is not a multiple of the mxfp4 block size 32 (use --pad"
expect_exit 3 fp4-quant -f nvfp4 w100.in.npy
err_has "block size 16"

$PY -c "import numpy as np; np.save('w48.in.npy', np.ones((4, 48), '<f4'))"
expect_exit 3 fp4-quant -f nvfp4 -p ggml -o out/q.h5 w48.in.npy
err_has "w48.in.npy: shape (4, 48): -o with split nibble packing needs a last dimension that is a multiple of 32"
no_outputs_left out
expect_exit 0 fp4-quant -f nvfp4 -p ggml -o out/q.h5 --pad w48.in.npy
out_has "16 zero columns added (last dim 48 -> 64)"
rm -f out/q.h5

# --pad makes the same input work; codes and dequant keep the input's shape
expect_exit 0 fp4-quant --pad --codes out/c.npy --scales out/s.npy --dequant out/d.npy w100.in.npy
out_has "28 zero columns added"
$PY -c "
import numpy as np
c = np.load('out/c.npy'); s = np.load('out/s.npy'); d = np.load('out/d.npy')
assert c.shape == (4, 100) and d.shape == (4, 100) and s.shape == (4, 4), (c.shape, s.shape)
assert (d == 1).all()
"
rm -f out/*

# output problems: exit 4, nothing left behind (neither the outputs that could be written)
expect_exit 4 fp4-quant --codes out/c.npy -o /nonexistent-fp4s-dir/q.h5 ok.in.npy
err_has "/nonexistent-fp4s-dir/q.h5: cannot create output"
no_outputs_left out
expect_exit 4 fp4-quant --codes out/c.npy --dequant out ok.in.npy
err_has "out: is a directory"
no_outputs_left out

# usage problems: exit 2
expect_exit 2 fp4-quant --bogus ok.in.npy
err_has "unknown option '--bogus'"
err_has "Try 'fp4-quant --help'"
expect_exit 2 fp4-quant -p nosuch ok.in.npy
err_has "unknown profile 'nosuch'"
err_has "ocp"
expect_exit 2 fp4-quant -f nvfp4 --diff nosuch ok.in.npy
err_has "unknown profile 'nosuch'"
expect_exit 2 fp4-quant -f mxfp5 ok.in.npy
err_has "-f: expected mxfp4, nvfp4 or fp8, got 'mxfp5'"
expect_exit 2 fp4-quant --round nearest ok.in.npy
err_has "--round"
expect_exit 2 fp4-quant --scale-rule up ok.in.npy
err_has "--scale-rule"
expect_exit 2 fp4-quant --threads 0 ok.in.npy
err_has "--threads"
expect_exit 2 fp4-quant --zero-block-code 255 ok.in.npy
expect_exit 2 fp4-quant -f nvfp4 --scale-rule ceil ok.in.npy
err_has "--scale-rule applies to mxfp4 only"
expect_exit 2 fp4-quant -f mxfp4 --2d ok.in.npy
err_has "apply to nvfp4 only"
expect_exit 2 fp4-quant -f nvfp4 --fp8-gran tensor ok.in.npy
# a NaN block needs a NaN scale code, which ggml's UE4M3 has not (0x7F decodes to 0)
for nf in scale-nan block-nan; do
    expect_exit 2 fp4-quant -f nvfp4 -p ggml --nonfinite $nf --dequant out/d.npy ok.in.npy
    err_has "non-finite policy $nf needs a block scale with a NaN code"
    err_has "take nonfinite ignore (ggml's own) or cvt"
done
expect_exit 2 fp4-quant -f nvfp4 --recipe ggml --round rtz ok.in.npy
err_has "the ggml NVFP4 recipe's scale (ue4m3-ggml) has none"
expect_exit 0 fp4-quant -f nvfp4 --recipe ggml --round rtz --nonfinite ignore ok.in.npy
expect_exit 2 fp4-quant -f mxfp4 --packing nibbles ok.in.npy
err_has "--packing: expected one of pairs, split"
expect_exit 2 fp4-quant
err_has "missing INPUT"
expect_exit 2 fp4-quant ok.in.npy ok.in.npy
expect_exit 2 fp4-quant --codes out/x.npy --dequant out/x.npy ok.in.npy
err_has "named twice"
expect_exit 2 fp4-quant -o
err_has "needs an argument"
no_outputs_left out

expect_exit 0 fp4-quant --help
out_has "Usage: fp4-quant"
expect_exit 0 fp4-quant --version
out_has "fp4-quant (fp4scope)"
echo ok
