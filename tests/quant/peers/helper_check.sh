#!/bin/sh
# peers-helper: the ctypes helper of peers_torch.py loads (every symbol it
# needs is linked in) and its entry points give known results.
#   helper_check.sh LIBPEERS
. "$FP4S_SRCDIR/tests/python.sh"
exec "$PY" - "$1" <<'PYEOF'
import ctypes
import sys

import numpy as np

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
lib.ph_quant.argtypes = [ctypes.c_char_p, ctypes.c_char_p, P, ctypes.c_size_t, ctypes.c_size_t, P, P]
lib.ph_e4m3_encode.argtypes = [P, P, ctypes.c_size_t]
lib.ph_mx_k.argtypes = [ctypes.c_int, P, P, ctypes.c_size_t]
bad = 0


def expect(name, got, want):
    global bad
    if list(got) != list(want):
        print(f"FAIL {name}: {list(got)}, expected {list(want)}")
        bad += 1
    else:
        print(f"ok {name}")


x = np.array([1.0, 448.0, -2.0, 0.0], np.float32)
e = np.zeros(4, np.uint8)
lib.ph_e4m3_encode(x.ctypes.data, e.ctypes.data, 4)
expect("ph_e4m3_encode", e, [0x38, 0x7E, 0xC0, 0x00])

a = np.array([6.0, 6.5, 1.0], np.float32)
k = np.zeros(3, np.int32)
lib.ph_mx_k(0, a.ctypes.data, k.ctypes.data, 3)  # FLOOR: floor(log2 a) - 2
expect("ph_mx_k floor", k, [0, 0, -2])
lib.ph_mx_k(1, a.ctypes.data, k.ctypes.data, 3)  # CEIL: smallest k with a <= 6 * 2^k
expect("ph_mx_k ceil", k, [0, 1, -2])

# one MXFP4 block with amax 6: scale 2^0 (E8M0 127) under either rule
q = np.zeros((1, 32), np.float32)
q[0, :4] = [6.0, 3.0, 0.5, -1.5]
codes = np.zeros((1, 32), np.uint8)
scales = np.zeros((1, 1), np.uint8)
rc = lib.ph_quant(b"mxfp4", b"", q.ctypes.data, 1, 32, codes.ctypes.data, scales.ctypes.data)
expect("ph_quant rc", [rc], [0])
expect("ph_quant scale", scales[0], [127])
expect("ph_quant codes", codes[0, :5], [7, 5, 1, 11, 0])
sys.exit(1 if bad else 0)
PYEOF
