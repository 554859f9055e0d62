"""Tensors in: what the library is given of a torch tensor or a numpy array
(its memory, element type, rows, columns and row stride), and the checks
that refuse, with the tensor's name, what it cannot take as it is. Nothing
here copies: a tensor whose memory is not rows of contiguous elements is
refused, never copied behind the caller's back."""
import numbers
import sys

import numpy as np

from ._lib import DT_BF16, DT_F16, DT_F32, FP4SError

_DT_NAMES = {DT_F32: "float32", DT_BF16: "bfloat16", DT_F16: "float16"}


def _torch():
    # a torch tensor exists only where torch was imported: never import it here
    # (importing torch takes seconds; numpy users need not pay them)
    return sys.modules.get("torch")


def is_torch(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


class View:
    """The memory of a 2-D view [rows, cols] of a tensor (row stride ld, in
    elements) and where it lives."""
    __slots__ = ("obj", "kind", "dtype", "ptr", "rows", "cols", "ld", "shape", "device", "index", "name")

    @property
    def cuda(self):
        return self.device == "cuda"

    @property
    def numel(self):
        return self.rows * self.cols

    @property
    def contiguous(self):
        return self.ld == self.cols or self.rows <= 1

    def dtype_name(self):
        return _DT_NAMES[self.dtype]


def _rows_stride(name, shape, strides, kind):
    """Row stride (elements) of the view [prod(shape[:-1]), shape[-1]] of a
    tensor with these strides (elements), or a refusal naming the problem."""
    cols = shape[-1] if shape else 1
    if len(shape) >= 1 and cols > 1 and strides[-1] != 1:
        raise FP4SError(-6, "%s: the last dimension is not contiguous (strides %s): fp4scope copies nothing "
                        "silently; pass %s" % (name, tuple(strides), "x.contiguous()" if kind == "torch"
                                                 else "np.ascontiguousarray(x)"))
    lead = [(s, t) for s, t in zip(shape[:-1], strides[:-1]) if s != 1]
    if not lead:
        return cols
    for (s0, t0), (s1, t1) in zip(lead, lead[1:]):
        if t0 != t1 * s1:
            raise FP4SError(-6, "%s: its rows are not evenly spaced in memory (shape %s, strides %s): "
                            "fp4scope copies nothing silently; pass %s" % (
                                name, tuple(shape), tuple(strides),
                                "x.contiguous()" if kind == "torch" else "np.ascontiguousarray(x)"))
    ld = lead[-1][1]
    if ld < cols:
        raise FP4SError(-6, "%s: its rows overlap in memory (row stride %d < %d columns: an expanded or "
                        "broadcast view): pass a tensor that owns its rows" % (name, ld, cols))
    return ld


def view(x, name="x", dtypes=(DT_F32, DT_BF16, DT_F16), cuda=True):
    """View of tensor x for the library. Refuses (FP4SError naming `name`):
    types other than torch tensors and numpy arrays, element types not in
    dtypes, devices other than the CPU and CUDA (CUDA only where cuda is
    true), layouts whose rows are not evenly spaced contiguous runs, and
    torch's lazy negation and conjugation bits."""
    v = View()
    v.obj, v.name = x, name
    allowed = ", ".join(_DT_NAMES[d] for d in dtypes)
    if is_torch(x):
        torch = _torch()
        tmap = {torch.float32: DT_F32, torch.bfloat16: DT_BF16, torch.float16: DT_F16}
        if x.layout != torch.strided:
            raise FP4SError(-5, "%s: a %s tensor: fp4scope takes dense (strided) tensors" % (name, x.layout))
        if x.dtype not in tmap or tmap[x.dtype] not in dtypes:
            raise FP4SError(-5, "%s: dtype %s is not supported here (%s)" % (name, x.dtype, allowed))
        if x.device.type not in ("cpu", "cuda") or (x.device.type == "cuda" and not cuda):
            raise FP4SError(-1, "%s: a tensor on %s: this takes %s tensors" % (
                name, x.device, "CPU or CUDA" if cuda else "CPU (it runs on the CPU: pass x.cpu())"))
        if getattr(x, "is_neg", None) and x.is_neg():
            raise FP4SError(-1, "%s: has torch's lazy negation bit: pass x.resolve_neg()" % name)
        if getattr(x, "is_conj", None) and x.is_conj():
            raise FP4SError(-1, "%s: has torch's lazy conjugation bit: pass x.resolve_conj()" % name)
        v.kind = "torch"
        v.dtype = tmap[x.dtype]
        shape = tuple(x.shape)
        strides = tuple(x.stride())
        v.ptr = x.data_ptr()
        v.device = x.device.type
        v.index = x.device.index if v.device == "cuda" else None
        if v.device == "cuda" and v.index is None:
            v.index = torch.cuda.current_device()
    elif isinstance(x, np.ndarray):
        nmap = {np.dtype(np.float32): DT_F32, np.dtype(np.float16): DT_F16}
        if not x.dtype.isnative:
            raise FP4SError(-5, "%s: dtype %s is not in the machine's byte order" % (name, x.dtype.str))
        if x.dtype not in nmap or nmap[x.dtype] not in dtypes:
            hint = " (bfloat16 comes as torch tensors)" if DT_BF16 in dtypes else ""
            raise FP4SError(-5, "%s: numpy dtype %s is not supported here (%s%s)" % (
                name, x.dtype, ", ".join(_DT_NAMES[d] for d in dtypes if d != DT_BF16), hint))
        dt = x.dtype
        v.kind = "numpy"
        v.dtype = nmap[dt]
        shape = tuple(x.shape)
        if any(s % x.itemsize for s in x.strides):
            raise FP4SError(-6, "%s: strides %s are not whole elements" % (name, x.strides))
        strides = tuple(s // x.itemsize for s in x.strides)
        v.ptr = x.ctypes.data
        v.device, v.index = "cpu", None
    else:
        raise FP4SError(-5, "%s: a %s: fp4scope takes torch tensors and numpy arrays" % (name, type(x).__name__))
    if len(shape) == 0:
        raise FP4SError(-6, "%s: a 0-dimensional tensor: blocks run along the last dimension" % name)
    v.shape = shape
    v.cols = shape[-1]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    v.rows = rows
    v.ld = _rows_stride(name, shape, strides, v.kind) if rows and v.cols else v.cols
    return v


def check_block(v, block, what):
    """Refuse a last dimension that is not a multiple of the block."""
    if v.cols % block:
        raise FP4SError(-6, "%s: the last dimension K = %d is not a multiple of the %s block (%d)"
                        % (v.name, v.cols, what, block))


def same_device(views):
    """Refuse views on different devices (named)."""
    first = views[0]
    for v in views[1:]:
        if (v.device, v.index) != (first.device, first.index):
            raise FP4SError(-1, "%s is on %s, %s on %s: put them on one device" % (
                first.name, where(first), v.name, where(v)))


def where(v):
    return "cuda:%d" % v.index if v.cuda else "cpu"


def as_int(value, name, lo=None, hi=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise FP4SError(-1, "%s must be an integer, not %r" % (name, value))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise FP4SError(-11, "%s = %d is outside %s..%s" % (name, value, lo, hi))
    return value
