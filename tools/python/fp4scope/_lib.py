"""Locate and load libfp4scope.so through ctypes (no pip install needed).

Search order: the FP4SCOPE_LIB environment variable (a path to the .so), the
build directories of the source tree this package sits in (build*/), then the
system library path (ctypes.util.find_library)."""
import ctypes
import ctypes.util
import glob
import os

_lib = None
# what the library malloc'ed, the caller frees with the C library's free()
libc_free = ctypes.CDLL(None).free
libc_free.argtypes = [ctypes.c_void_p]
libc_free.restype = None


class FP4SError(RuntimeError):
    """A libfp4scope call failed: .code is the negative FP4S_E* code."""

    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code


def _candidates():
    env = os.environ.get("FP4SCOPE_LIB")
    if env:
        yield env
        return
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    for pat in ("build/libfp4scope.so", "build*/libfp4scope.so", "_build*/libfp4scope.so"):
        for p in sorted(glob.glob(os.path.join(root, pat))):
            yield p
    found = ctypes.util.find_library("fp4scope")
    if found:
        yield found


def lib():
    """The loaded library (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(path)
        try:
            _lib = ctypes.CDLL(path)
            break
        except OSError:
            continue
    if _lib is None:
        raise FP4SError(-3, "libfp4scope.so not found (tried: %s); build the project or set "
                        "FP4SCOPE_LIB to the library's path" % (", ".join(tried) or "nothing"))
    _declare(_lib)
    return _lib


def _declare(L):
    c = ctypes
    L.fp4s_last_error.restype = c.c_char_p
    L.fp4s_strerror.restype = c.c_char_p
    L.fp4s_strerror.argtypes = [c.c_int]
    L.fp4s_version.restype = c.c_char_p
    L.fp4s_capture_opts_defaults.argtypes = [c.c_void_p]
    L.fp4s_capture_opts_size.restype = c.c_size_t
    L.fp4s_capture_opts_size.argtypes = []
    L.fp4s_capture_create.argtypes = [c.c_char_p, c.c_void_p, c.POINTER(c.c_void_p)]
    L.fp4s_capture_open_append.argtypes = [c.c_char_p, c.c_void_p, c.POINTER(c.c_void_p)]
    L.fp4s_capture_put.argtypes = [c.c_void_p, c.c_int64, c.c_char_p, c.c_char_p, c.c_int,
                                   c.c_void_p, c.c_size_t, c.c_size_t, c.c_size_t, c.c_void_p]
    L.fp4s_capture_put_logprobs.argtypes = [c.c_void_p, c.c_int64, c.c_void_p, c.c_void_p,
                                            c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t]
    L.fp4s_capture_put_tokens.argtypes = [c.c_void_p, c.c_int64, c.c_void_p, c.c_size_t]
    L.fp4s_capture_put_ids.argtypes = [c.c_void_p, c.c_int64, c.c_char_p, c.c_char_p, c.c_void_p, c.c_size_t]
    L.fp4s_capture_attr_str.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_char_p]
    L.fp4s_capture_attr_i64.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_int64]
    L.fp4s_capture_attr_f64.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_double]
    L.fp4s_capture_entry_size.restype = c.c_size_t
    L.fp4s_capture_entry_size.argtypes = []
    L.fp4s_capture_list.argtypes = [c.c_char_p, c.POINTER(c.POINTER(CaptureEntry)), c.POINTER(c.c_size_t)]
    L.fp4s_capture_flush.argtypes = [c.c_void_p]
    L.fp4s_capture_close.argtypes = [c.POINTER(c.c_void_p)]
    L.fp4s_capture_abort.argtypes = [c.POINTER(c.c_void_p)]
    L.fp4s_file_commit.argtypes = [c.c_char_p, c.c_char_p, c.c_bool]
    # quantizer (for fake quantization)
    L.fp4s_spec_size.restype = c.c_size_t
    L.fp4s_spec_size.argtypes = []
    L.fp4s_tscale_size.restype = c.c_size_t
    L.fp4s_tscale_size.argtypes = []
    L.fp4s_qout_size.restype = c.c_size_t
    L.fp4s_qout_size.argtypes = []
    L.fp4s_spec_profile.argtypes = [c.c_void_p, c.c_int, c.c_char_p]
    L.fp4s_amax.restype = c.c_float
    L.fp4s_amax.argtypes = [c.c_void_p, c.c_size_t, c.c_size_t, c.c_size_t, c.c_void_p]
    L.fp4s_tscale_init.argtypes = [c.c_void_p, c.c_float, c.c_void_p]
    L.fp4s_quantize.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t, c.c_size_t,
                                c.c_size_t, c.c_size_t, c.c_void_p, c.c_void_p]


class CaptureEntry(ctypes.Structure):
    """fp4s_capture_entry (capture.h), field by field; checked against
    fp4s_capture_entry_size before use."""
    _fields_ = [("step", ctypes.c_int64), ("_site", ctypes.c_char * 256), ("_side", ctypes.c_char * 16),
                ("_path", ctypes.c_char * 512), ("rows", ctypes.c_size_t), ("cols", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("reserved", ctypes.c_uint32 * 8)]
    site = property(lambda self: self._site.decode("utf-8", "replace"))
    side = property(lambda self: self._side.decode("utf-8", "replace"))
    path = property(lambda self: self._path.decode("utf-8", "replace"))


def capture_list(path):
    """Every dataset of a capture (fp4s_capture_list): a list of CaptureEntry."""
    L = lib()
    if ctypes.sizeof(CaptureEntry) != L.fp4s_capture_entry_size():
        raise FP4SError(-15, "capture: fp4s_capture_entry is %d bytes in libfp4scope, %d in this adapter: "
                        "use the adapter of the same build" % (L.fp4s_capture_entry_size(),
                                                              ctypes.sizeof(CaptureEntry)))
    arr = ctypes.POINTER(CaptureEntry)()
    n = ctypes.c_size_t()
    check(L.fp4s_capture_list(os.fsencode(path), ctypes.byref(arr), ctypes.byref(n)))
    try:
        return [CaptureEntry.from_buffer_copy(arr[i]) for i in range(n.value)]
    finally:
        libc_free(arr)


def check(rc):
    """Raise FP4SError for a negative return code."""
    if rc < 0:
        L = lib()
        detail = L.fp4s_last_error().decode("utf-8", "replace") or L.fp4s_strerror(rc).decode()
        raise FP4SError(rc, detail)
    return rc
