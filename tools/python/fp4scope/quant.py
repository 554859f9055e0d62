"""Quantize, dequantize and fake-quantize tensors with the library's
quantizers, bit for bit what fp4-quant and the C API give.

Tensors in and out: torch tensors on the CPU or on CUDA (float32, bfloat16,
float16) and numpy arrays (float32, float16); results come back in the
input's kind and device. Blocks run along the last dimension (K, a multiple
of the block: 32 for MXFP4, 16 for NVFP4, 128 for the FP8 tiles); a tensor
[..., K] is the matrix [prod(...), K] of its rows. Rows may be strided
(a slice of a larger tensor); anything else that is not rows of contiguous
elements is refused, never copied.

On the CPU the library's quantizer (fp4s_quantize, its SIMD kernels and
threads) runs on the tensor's memory; bfloat16 and float16 values are widened
to float32 (exactly) in chunks of about 2^20 elements first. On CUDA the
library's kernels (fp4s_cuda_quantize_ex, fp4s_cuda_dequantize_ex,
fp4s_cuda_amax_ex) run on the tensor's device and torch's current stream;
nothing goes through the host but the tensor amax (one float, the only
synchronisation) for the formats with a tensor scale. Profiles the CUDA
kernels do not implement are refused for CUDA tensors with the reason.

The tensor amax of NVFP4 (and FP8 per tensor) is, as fp4-quant takes it, the
largest finite |x| (of the rotated rows with the RHT); amax= gives one
instead (a calibrated static scale)."""
import ctypes

import numpy as np

from . import _lib
from ._lib import (DT_BF16, DT_F16, DT_F32, FORMATS, FP4S_FP8, FP4S_MXFP4, FP4S_NVFP4, FP4SError, check,
                   cstr, lib)
from ._tensor import check_block, is_torch, same_device, view, where

SCOPE_ROW = 1  # fp4s_nv_scope FP4S_SCOPE_ROW (spec.h)
CHUNK = 1 << 20  # elements widened at a time (bfloat16 / float16 on the CPU)
_FMT_NAMES = {v: k for k, v in FORMATS.items()}


class Spec:
    """A quantizer: the library's fp4s_spec of a profile and format
    (fp4s_spec_profile). Spec("nvfp4", "te"), Spec("mxfp4") (the format's
    default profile: ocp for MXFP4, te for NVFP4, fp8-1x128 for FP8).
    fp4scope.profiles() lists the profiles."""

    def __init__(self, fmt="nvfp4", profile=None):
        if isinstance(fmt, Spec):
            if profile is not None:
                raise FP4SError(-1, "Spec: a Spec and a profile: give one")
            self._s = type(fmt._s).from_buffer_copy(fmt._s)
            return
        if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
            raise FP4SError(-1, "format %r: expected mxfp4, nvfp4 or fp8" % (fmt,))
        self._s = _lib.Spec()
        prof = None if profile is None else cstr(profile, "profile")
        check(lib().fp4s_spec_profile(ctypes.byref(self._s), FORMATS[fmt.lower()], prof))

    # -- what it is ---------------------------------------------------------
    @property
    def format(self):
        return _FMT_NAMES[self._s.format]

    @property
    def profile(self):
        return self._s._profile.decode()

    @property
    def block(self):
        return int(self._s.block)

    @property
    def tile2d(self):
        return bool(self._s.tile2d)

    @property
    def packing(self):
        return "split" if self._s.packing == _lib.PACK_SPLIT else "pairs"

    @property
    def rht(self):
        return bool(self._s.rht)

    @property
    def row_align(self):
        return int(lib().fp4s_spec_row_align(self.ref()))

    @property
    def needs_amax(self):
        """Whether quantizing needs the tensor amax (NVFP4, FP8 per tensor)."""
        s = self._s
        return s.format == FP4S_NVFP4 or (s.format == FP4S_FP8 and s.fp8_gran == _lib.FP8_TENSOR)

    @property
    def cuda_supported(self):
        """Whether the CUDA kernels implement it (fp4s_cuda_supports)."""
        return bool(lib().fp4s_cuda_supports(self.ref()))

    def describe(self):
        """Every rule of the spec in one line (fp4s_spec_describe)."""
        n = lib().fp4s_spec_describe(self.ref(), None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib().fp4s_spec_describe(self.ref(), buf, n + 1)
        return buf.value.decode()

    def ref(self):
        return ctypes.byref(self._s)

    def _row_scaled(self):
        """NVFP4 with one tensor scale per row (te-row, flashinfer-per-token, ...)."""
        return self._s.format == FP4S_NVFP4 and self._s.nv_scope == SCOPE_ROW

    def finite_amax_spec(self):
        """A copy whose tensor amax is the finite one (what fp4-quant takes)."""
        t = Spec(self)
        t._s.tensor_amax = _lib.TAMAX_FINITE
        return t

    def __eq__(self, other):
        return isinstance(other, Spec) and bytes(self._s) == bytes(other._s)

    def __hash__(self):
        return hash(bytes(self._s))

    def __repr__(self):
        return "Spec(%r, %r)" % (self.format, self.profile)


def spec_of(fmt="nvfp4", profile=None):
    """fmt may be a Spec (then no profile) or a format name."""
    if isinstance(fmt, Spec):
        if profile is not None:
            raise FP4SError(-1, "a Spec and a profile: give one")
        return fmt
    return Spec(fmt, profile)


def profiles(fmt=None):
    """The library's profile names (of one format when fmt is given)."""
    L = lib()
    out = []
    for i in range(L.fp4s_profile_count()):
        p = L.fp4s_profile_at(i)
        name = p[0].decode()
        if fmt is not None:
            s = _lib.Spec()
            L.fp4s_error_clear()
            if L.fp4s_spec_profile(ctypes.byref(s), FORMATS[fmt], p[0]) != 0:
                continue
        out.append(name)
    return out


def cuda_available():
    """Whether the library has CUDA built in and a GPU it can use."""
    return bool(lib().fp4s_cuda_available())


def cuda_describe():
    """The GPU the library would use, or why none is usable."""
    n = lib().fp4s_cuda_describe(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib().fp4s_cuda_describe(buf, n + 1)
    return buf.value.decode("utf-8", "replace")


class QTensor:
    """What quantize() gives: codes (uint8, one E2M1 code per byte with the
    sign in bit 3, or packed two per byte in the spec's packing; FP8: E4M3
    bytes), scales (FP4: uint8 block scale bytes [..., K/block], 2-D tiles
    repeated per row; FP8: float32 tile scales as fp4-quant --scales writes
    them), the tensor amax the tensor scale came from and the scale values
    (tensor_scale: the one recorded, s_enc, s_dec), the spec, whether the
    codes are packed, and the input's shape."""
    __slots__ = ("codes", "scales", "amax", "tensor_scale", "s_enc", "s_dec", "spec", "packed", "shape")

    def dequantize(self, out=None):
        return dequantize(self, out=out)

    def __repr__(self):
        return "QTensor(%s, shape %s, packed %s, amax %r)" % (self.spec, self.shape, self.packed, self.amax)


# ---- helpers ---------------------------------------------------------------------

def _torch():
    import torch
    return torch


def _empty(v, shape, np_dtype, device_like=None):
    """A new array of the input's kind and device."""
    if v.kind == "torch":
        torch = _torch()
        tdt = {np.uint8: torch.uint8, np.float32: torch.float32}[np_dtype]
        return torch.empty(shape, dtype=tdt, device=v.obj.device)
    return np.empty(shape, dtype=np_dtype)


def _ptr(a):
    return a.data_ptr() if is_torch(a) else a.ctypes.data


def _stream(v):
    torch = _torch()
    return ctypes.c_void_p(torch.cuda.current_stream(v.obj.device).cuda_stream)


def _device_ctx(v):
    if v.cuda:
        return _torch().cuda.device(v.obj.device)
    import contextlib
    return contextlib.nullcontext()


def _cuda_check(spec, v):
    """Refuse a CUDA tensor for a spec the kernels (or this build) cannot run."""
    got = ctypes.c_int()
    L = lib()
    rc = L.fp4s_cuda_device_resolve(spec.ref(), _lib.DEVICE_CUDA, ctypes.byref(got))
    if rc < 0:
        raise FP4SError(rc, "%s: on %s with %s: %s; pass %s.cpu() for the CPU quantizer" % (
            v.name, where(v), spec, L.fp4s_last_error().decode(), v.name))


def _row_chunk(spec, cols):
    align = spec.row_align
    n = max(1, CHUNK // max(cols, 1))
    return max(align, n // align * align)


def _widen(v, r0, n, scratch):
    """Rows [r0, r0+n) of a CPU bfloat16/float16 view as float32 into scratch
    (exact: the library's converters)."""
    L = lib()
    conv = L.fp4s_bf16_to_f32 if v.dtype == DT_BF16 else L.fp4s_fp16_to_f32
    if v.ld == v.cols or n == 1:
        conv(v.ptr + r0 * v.ld * 2, scratch.ctypes.data, n * v.cols)
    else:
        for i in range(n):
            conv(v.ptr + (r0 + i) * v.ld * 2, scratch.ctypes.data + i * v.cols * 4, v.cols)


def _cpu_chunks(spec, v):
    """(r0, n, pointer to float32 rows, their row stride) over the rows of a CPU view."""
    if v.dtype == DT_F32:
        yield 0, v.rows, v.ptr, v.ld
        return
    step = _row_chunk(spec, v.cols)
    scratch = np.empty((min(step, v.rows), v.cols), np.float32)
    for r0 in range(0, v.rows, step):
        n = min(step, v.rows - r0)
        _widen(v, r0, n, scratch)
        yield r0, n, scratch.ctypes.data, v.cols


def tensor_amax(spec, v):
    """The largest finite |x| (after the RHT where the spec has it), as
    fp4-quant takes it; on CUDA through fp4s_cuda_amax_ex."""
    L = lib()
    nf = ctypes.c_uint64(0)
    if v.cuda:
        a = ctypes.c_float()
        with _device_ctx(v):
            check(L.fp4s_cuda_amax_ex(v.dtype, v.ptr, v.rows, v.cols, v.ld, ctypes.byref(a), ctypes.byref(nf),
                                      _stream(v)))
        return a.value
    fin = spec.finite_amax_spec() if spec.rht else None
    amax = 0.0
    for _, n, p, ld in _cpu_chunks(spec, v):
        if fin is not None:
            a = L.fp4s_spec_amax(fin.ref(), p, n, v.cols, ld, ctypes.byref(nf))
        else:
            a = L.fp4s_amax(p, n, v.cols, ld, ctypes.byref(nf))
        amax = L.fp4s_amax_merge(amax, a)
    return amax


def _tscale(spec, v, amax):
    """(fp4s_tscale, the amax it came from) for the spec and tensor."""
    if amax is None:
        amax = tensor_amax(spec, v) if spec.needs_amax else 0.0
    else:
        try:
            amax = float(amax)
        except (TypeError, ValueError):
            raise FP4SError(-1, "amax must be a number, not %r" % (amax,))
    ts = _lib.Tscale()
    _lib.check_size(_lib.Tscale, "fp4s_tscale_size")
    check(lib().fp4s_tscale_init(spec.ref(), ctypes.c_float(amax), ctypes.byref(ts)))
    return ts, amax


def _prep(x, fmt, profile, name, input_scale=None):
    spec = spec_of(fmt, profile)
    if input_scale is not None:
        # a static global scale (NVFP4, the decode convention: a ModelOpt checkpoint's input_scale, as vLLM
        # and SGLang run it) on a copy; the library checks the value and the format
        spec = Spec(spec)
        check(lib().fp4s_spec_set_input_scale(spec.ref(), ctypes.c_float(float(input_scale))))
    v = view(x, name)
    if spec.format == "fp8":
        check_block(v, 128 if spec._s.fp8_gran != _lib.FP8_TENSOR else 1, "FP8 tile")
    else:
        check_block(v, spec.block, spec.format.upper())
    if v.cuda:
        _cuda_check(spec, v)
    return spec, v


def _scale_shape(spec, v):
    """Shape of the scales output: FP4 [..., K/block]; FP8 as fp4-quant
    --scales: [ceil(rows/128), K/128] for 128x128 tiles, [..., K/128] for
    1x128, [1] per tensor."""
    lead = v.shape[:-1]
    if spec.format != "fp8":
        return lead + (v.cols // spec.block,), np.uint8
    g = spec._s.fp8_gran
    if g == _lib.FP8_TENSOR:
        return (1,), np.float32
    if g == _lib.FP8_1x128:
        return lead + (v.cols // 128,), np.float32
    return ((v.rows + 127) // 128, v.cols // 128), np.float32


def _scale_ld(spec, v):
    if spec.format != "fp8":
        return v.cols // spec.block
    return 1 if spec._s.fp8_gran == _lib.FP8_TENSOR else v.cols // 128


def _scale_row(spec, r0):
    """The scale row of input row r0 (a chunk start)."""
    if spec.format != "fp8":
        return r0
    g = spec._s.fp8_gran
    return 0 if g == _lib.FP8_TENSOR else (r0 if g == _lib.FP8_1x128 else r0 // 128)


def _qout(spec, v, r0, codes=None, ld_codes=0, scales=None, dequant=None, ld_dequant=0):
    q = lib_qout()
    if codes is not None:
        q.codes, q.ld_codes = codes + r0 * ld_codes, ld_codes
    if scales is not None:
        lds = _scale_ld(spec, v)
        off = _scale_row(spec, r0) * lds
        if spec.format == "fp8":
            q.scale_f32, q.ld_scale_f32 = scales + 4 * off, lds
        else:
            q.scales, q.ld_scales = scales + off, lds
    if dequant is not None:
        q.dequant, q.ld_dequant = dequant + 4 * r0 * ld_dequant, ld_dequant
    return q


def lib_qout():
    return _lib.QOut()


# ---- quantize ----------------------------------------------------------------------

def quantize(x, fmt="nvfp4", profile=None, *, packed=False, amax=None, input_scale=None, name="x"):
    """Quantize x [..., K] with a profile: a QTensor of codes, scales and the
    tensor scale (fp4-quant --codes/--scales/-o give the same bytes).
    packed: two E2M1 codes per byte in the spec's packing (FP4 only).
    amax: the tensor amax to take the tensor scale from (NVFP4, FP8 per
    tensor), default the tensor's own (largest finite |x|).
    input_scale: NVFP4, a static global scale in the decode convention (a
    ModelOpt checkpoint's input_scale) in place of the amax's (fp4-quant
    --input-scale). A row-scaled spec (te-row, ...: one tensor scale per row)
    is refused: a QTensor holds one tensor scale (fake_quant() takes it;
    fp4-quant --row-scales writes the row scales)."""
    spec, v = _prep(x, fmt, profile, name, input_scale)
    if spec._row_scaled():
        raise FP4SError(-13, "%s: %s is row-scaled (one tensor scale per row): quantize() keeps one tensor "
                        "scale; fake_quant() takes it, fp4-quant --codes/--scales/--row-scales write it"
                        % (name, spec.profile))
    if packed and spec.format == "fp8":
        raise FP4SError(-1, "%s: packed codes are E2M1 pairs: FP8 has one code per byte" % name)
    if packed and v.cols % 2:
        raise FP4SError(-6, "%s: packing needs an even K, not %d" % (name, v.cols))
    pc = v.cols // 2 if packed else v.cols
    codes = _empty(v, v.shape[:-1] + (pc,), np.uint8)
    sshape, sdt = _scale_shape(spec, v)
    scales = _empty(v, sshape, sdt)
    L = lib()
    if v.numel == 0:
        ts, amax = _tscale(spec, v, amax if amax is not None else 0.0)
        return _qtensor(codes, scales, ts, amax, spec, packed, v.shape)
    ts, amax = _tscale(spec, v, amax)
    if v.cuda:
        with _device_ctx(v):
            check(L.fp4s_cuda_quantize_ex(spec.ref(), ctypes.byref(ts), v.dtype, v.ptr, v.rows, v.cols, v.ld,
                                          bool(packed), _ptr(codes), _ptr(scales), _stream(v)))
        return _qtensor(codes, scales, ts, amax, spec, packed, v.shape)
    cp, sp = _ptr(codes), _ptr(scales)
    scratch = None
    for r0, n, p, ld in _cpu_chunks(spec, v):
        if packed:
            if scratch is None or scratch.shape[0] < n:
                scratch = np.empty((n, v.cols), np.uint8)
            q = _qout(spec, v, 0, codes=scratch.ctypes.data, ld_codes=v.cols)
            qs = _qout(spec, v, r0, scales=sp)
            q.scales, q.ld_scales = qs.scales, qs.ld_scales
            check(L.fp4s_quantize(spec.ref(), ctypes.byref(ts), p, n, v.cols, ld, r0, ctypes.byref(q), None))
            # one "row" of n * K codes: pairs and blocks never cross rows (K is a multiple of the block)
            check(L.fp4s_pack_e2m1_block(spec._s.packing, spec.block, scratch.ctypes.data, n * v.cols,
                                         cp + r0 * pc))
        else:
            q = _qout(spec, v, r0, codes=cp, ld_codes=v.cols, scales=sp)
            check(L.fp4s_quantize(spec.ref(), ctypes.byref(ts), p, n, v.cols, ld, r0, ctypes.byref(q), None))
    return _qtensor(codes, scales, ts, amax, spec, packed, v.shape)


def _qtensor(codes, scales, ts, amax, spec, packed, shape):
    q = QTensor()
    q.codes, q.scales, q.spec, q.packed, q.shape = codes, scales, spec, bool(packed), tuple(shape)
    q.amax = float(amax)
    q.tensor_scale, q.s_enc, q.s_dec = float(ts.stored), float(ts.s_enc), float(ts.s_dec)
    return q


# ---- dequantize ----------------------------------------------------------------------

def dequantize(q, out=None):
    """The float32 values of a QTensor (fp4-quant --dequant gives the same
    bits), in q's kind and device. out: a float32 tensor of q.shape to write
    (contiguous, on the same device)."""
    if not isinstance(q, QTensor):
        raise FP4SError(-1, "dequantize takes what quantize() returned (a QTensor), not %s" % type(q).__name__)
    spec = q.spec
    codes = q.codes
    rows = 1
    for s in q.shape[:-1]:
        rows *= s
    cols = q.shape[-1]
    pc = cols // 2 if q.packed else cols
    tor = is_torch(codes)
    dev = codes.device if tor else None
    if out is None:
        if tor:
            out = _torch().empty(q.shape, dtype=_torch().float32, device=dev)
        else:
            out = np.empty(q.shape, np.float32)
    _check_out(out, q.shape, dev, "out")
    _check_buffer(codes, q.shape[:-1] + (pc,), "codes", dev)
    ts = _lib.Tscale()
    check(lib().fp4s_tscale_init(spec.ref(), ctypes.c_float(q.amax), ctypes.byref(ts)))
    if rows * cols == 0:
        return out
    L = lib()
    if tor and dev.type == "cuda":
        torch = _torch()
        with torch.cuda.device(dev):
            check(L.fp4s_cuda_dequantize_ex(spec.ref(), ctypes.byref(ts), q.packed, codes.data_ptr(),
                                            q.scales.data_ptr(), rows, cols, out.data_ptr(),
                                            ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)))
        return out
    sp = _ptr(q.scales)
    sf32 = spec.format == "fp8"
    lds = (1 if spec._s.fp8_gran == _lib.FP8_TENSOR else cols // 128) if sf32 else cols // spec.block
    step = max(spec.row_align, _row_chunk(spec, cols)) if q.packed else rows
    scratch = np.empty((min(step, rows), cols), np.uint8) if q.packed else None
    for r0 in range(0, rows, step):
        n = min(step, rows - r0)
        if q.packed:
            check(L.fp4s_unpack_e2m1_block(spec._s.packing, spec.block, _ptr(codes) + r0 * pc, n * cols,
                                           scratch.ctypes.data))
            cptr = scratch.ctypes.data
        else:
            cptr = _ptr(codes) + r0 * cols
        srow = (0 if spec._s.fp8_gran == _lib.FP8_TENSOR else (r0 if spec._s.fp8_gran == _lib.FP8_1x128
                                                               else r0 // 128)) if sf32 else r0
        if sf32:
            args = (None, 0, sp + 4 * srow * lds, lds)
        else:
            args = (sp + srow * lds, lds, None, 0)
        check(L.fp4s_dequantize(spec.ref(), ctypes.byref(ts), cptr, cols, args[0], args[1], args[2], args[3],
                                n, cols, r0, _ptr(out) + 4 * r0 * cols, cols))
    return out


def _check_buffer(a, shape, name, dev):
    if is_torch(a):
        if tuple(a.shape) != tuple(shape) or not a.is_contiguous() or a.dtype != _torch().uint8:
            raise FP4SError(-6, "%s: expected a contiguous uint8 tensor of shape %s" % (name, tuple(shape)))
        if a.device != dev:
            raise FP4SError(-1, "%s: on %s, expected %s" % (name, a.device, dev))
    elif isinstance(a, np.ndarray):
        if tuple(a.shape) != tuple(shape) or not a.flags.c_contiguous or a.dtype != np.uint8:
            raise FP4SError(-6, "%s: expected a C-contiguous uint8 array of shape %s" % (name, tuple(shape)))
    else:
        raise FP4SError(-5, "%s: a %s, expected codes from quantize()" % (name, type(a).__name__))


def _check_out(out, shape, dev, name):
    """out must be a contiguous float32 tensor of shape on the device (dev
    None: a numpy array or CPU tensor)."""
    if is_torch(out):
        torch = _torch()
        want = dev if dev is not None else torch.device("cpu")
        if out.dtype != torch.float32 or tuple(out.shape) != tuple(shape) or not out.is_contiguous():
            raise FP4SError(-6, "%s: expected a contiguous float32 tensor of shape %s, got %s %s%s" % (
                name, tuple(shape), out.dtype, tuple(out.shape), "" if out.is_contiguous() else " (strided)"))
        if out.device.type != want.type or (want.type == "cuda" and out.device.index != want.index):
            raise FP4SError(-1, "%s: on %s, the input on %s" % (name, out.device, want))
    elif isinstance(out, np.ndarray):
        if dev is not None and dev.type != "cpu":
            raise FP4SError(-1, "%s: a numpy array for a tensor on %s" % (name, dev))
        if out.dtype != np.float32 or tuple(out.shape) != tuple(shape) or not out.flags.c_contiguous:
            raise FP4SError(-6, "%s: expected a C-contiguous float32 array of shape %s, got %s %s" % (
                name, tuple(shape), out.dtype, out.shape))
    else:
        raise FP4SError(-5, "%s: a %s, expected a float32 tensor" % (name, type(out).__name__))


# ---- fake quantization ---------------------------------------------------------------

def fake_quant(x, fmt="nvfp4", profile=None, *, amax=None, input_scale=None, out=None, dtype=None, name="x"):
    """dequantize(quantize(x)) in one pass: x [..., K] through the profile's
    quantizer and back, bit for bit fp4-quant --dequant. The result has x's
    kind, device and (default) dtype: float32 values rounded to nearest even
    where x is bfloat16 or float16 (dtype="float32" or torch.float32 keeps
    them all). out: a contiguous float32 tensor to write instead.
    input_scale: as quantize()'s. A row-scaled profile (te-row, ...) gives
    every row its own tensor scale."""
    spec, v = _prep(x, fmt, profile, name, input_scale)
    want32 = _wants_f32(dtype, v)
    dev = v.obj.device if v.kind == "torch" else None
    if out is not None:
        _check_out(out, v.shape, dev if v.kind == "torch" else None, "out")
        res = out
    else:
        res = _empty(v, v.shape, np.float32)
    if v.numel:
        _fake_quant_into(spec, v, res, amax)
    if out is None and not want32:
        res = _cast(res, v)
    return res


def _wants_f32(dtype, v):
    if dtype is None:
        return v.dtype == DT_F32
    if dtype in ("float32", np.float32) or (is_torch_dtype(dtype) and str(dtype) == "torch.float32"):
        return True
    if dtype in ("same", "input"):
        return v.dtype == DT_F32
    raise FP4SError(-1, "dtype: float32 or None (the input's), not %r" % (dtype,))


def is_torch_dtype(d):
    import sys
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(d, torch.dtype)


def _cast(res, v):
    if v.dtype == DT_F32:
        return res
    if v.kind == "torch":
        torch = _torch()
        return res.to(torch.bfloat16 if v.dtype == DT_BF16 else torch.float16)
    return res.astype(np.float16)


def _fake_quant_into(spec, v, res, amax):
    L = lib()
    ts, amax = _tscale(spec, v, amax)
    rp = _ptr(res)
    if v.cuda:
        torch = _torch()
        with _device_ctx(v):
            st = _stream(v)
            codes = torch.empty((v.rows, v.cols // 2), dtype=torch.uint8, device=v.obj.device)
            scales = torch.empty((v.rows, v.cols // spec.block), dtype=torch.uint8, device=v.obj.device)
            check(L.fp4s_cuda_quantize_ex(spec.ref(), ctypes.byref(ts), v.dtype, v.ptr, v.rows, v.cols, v.ld,
                                          True, codes.data_ptr(), scales.data_ptr(), st))
            check(L.fp4s_cuda_dequantize_ex(spec.ref(), ctypes.byref(ts), True, codes.data_ptr(),
                                            scales.data_ptr(), v.rows, v.cols, rp, st))
        return
    for r0, n, p, ld in _cpu_chunks(spec, v):
        q = _qout(spec, v, r0, dequant=rp, ld_dequant=v.cols)
        check(L.fp4s_quantize(spec.ref(), ctypes.byref(ts), p, n, v.cols, ld, r0, ctypes.byref(q), None))
