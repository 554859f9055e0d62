"""Fake quantization through libfp4scope's quantizer (bit-exact with the C
tools): x -> dequant(quant(x)) along the last dimension, for a named profile."""
import ctypes

import numpy as np

from ._lib import FP4SError, check, lib

FORMATS = {"mxfp4": 1, "nvfp4": 2}


class _QOut(ctypes.Structure):
    """fp4s_qout (quant.h), field by field; its size is checked against the
    library's (fp4s_qout_size) before each use."""
    _fields_ = [("codes", ctypes.c_void_p), ("ld_codes", ctypes.c_size_t),
                ("scales", ctypes.c_void_p), ("ld_scales", ctypes.c_size_t),
                ("scale_f32", ctypes.c_void_p), ("ld_scale_f32", ctypes.c_size_t),
                ("dequant", ctypes.c_void_p), ("ld_dequant", ctypes.c_size_t),
                ("reserved", ctypes.c_uint32 * 8)]


def fake_quant(x, fmt="nvfp4", profile="te"):
    """Quantize-dequantize a float32 numpy array [..., K] (K a multiple of the
    block: 16 for NVFP4, 32 for MXFP4) with one tensor scale over the whole
    array. Returns a new float32 array of the same shape."""
    L = lib()
    if ctypes.sizeof(_QOut) != L.fp4s_qout_size():
        raise FP4SError(-15, "fake_quant: fp4s_qout is %d bytes in libfp4scope, %d in this adapter: "
                        "use the adapter of the same build" % (L.fp4s_qout_size(), ctypes.sizeof(_QOut)))
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    shape = a.shape
    a = a.reshape(-1, shape[-1])
    rows, cols = a.shape
    # fp4s_spec and fp4s_tscale are opaque here: the library says how big they are
    spec = ctypes.create_string_buffer(L.fp4s_spec_size())
    ts = ctypes.create_string_buffer(L.fp4s_tscale_size())
    check(L.fp4s_spec_profile(spec, FORMATS[fmt], profile.encode()))
    block = 16 if fmt == "nvfp4" else 32
    if cols % block:
        raise FP4SError(-6, "fake_quant: K = %d is not a multiple of the %s block (%d)" % (cols, fmt, block))
    amax = L.fp4s_amax(a.ctypes.data, rows, cols, cols, None)
    check(L.fp4s_tscale_init(spec, ctypes.c_float(amax), ts))
    out = np.empty_like(a)
    q = _QOut()
    q.dequant = out.ctypes.data
    q.ld_dequant = cols
    codes = np.empty((rows, cols), np.uint8)
    q.codes = codes.ctypes.data
    q.ld_codes = cols
    check(L.fp4s_quantize(spec, ts, a.ctypes.data, rows, cols, cols, 0, ctypes.byref(q), None))
    return out.reshape(shape)
