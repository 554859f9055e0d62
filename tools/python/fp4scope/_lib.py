"""The binding: every libfp4scope symbol the package calls is declared here,
with its C types, and so is every C struct the package lays out itself. A
change of the C API is a change of this module (tests/python/test_binding.py
checks each symbol against the library's exports and each struct against the
C compiler's layout).

Which library: the FP4SCOPE_LIB environment variable (a path to the .so),
else the libfp4scope.so installed in this package (pip install), else the
build directories of the source tree the package sits in (build*/: the
source-tree route, tools/python on sys.path), else the system's
(ctypes.util.find_library)."""
import ctypes
import ctypes.util
import glob
import os

_lib = None
# what the library malloc'ed, the caller frees with the C library's free()
libc_free = ctypes.CDLL(None).free
libc_free.argtypes = [ctypes.c_void_p]
libc_free.restype = None

# enum values of the headers that the package passes
FP4S_MXFP4, FP4S_NVFP4, FP4S_FP8 = 1, 2, 3
FORMATS = {"mxfp4": FP4S_MXFP4, "nvfp4": FP4S_NVFP4, "fp8": FP4S_FP8}
DT_F32, DT_F64, DT_F16, DT_BF16, DT_U8, DT_U16, DT_I32, DT_I64 = range(8)
DEVICE_CPU, DEVICE_CUDA, DEVICE_AUTO = 0, 1, 2
GROUP_TENSOR, GROUP_BLOCK, GROUP_ROW, GROUP_CHANNEL = 0, 1, 2, 3
HIST_DELTA, HIST_ERROR = 0, 1
HIST_BINS = 160
COVERAGE_POINTS = 16
CMP_COUNT = 5
MM_METRIC_SLOTS = 64
NAMES_PROFILE = 9
PACK_PAIRS, PACK_SPLIT = 0, 1
FP8_TENSOR, FP8_1x128, FP8_128x128 = 0, 1, 2
TAMAX_FINITE, TAMAX_ALL = 0, 1
CUDA_CAP_BUILT, CUDA_CAP_DEVICE, CUDA_CAP_QUANTIZE, CUDA_CAP_BF16, CUDA_CAP_F16 = 1, 2, 4, 8, 16
CUDA_CAP_PACKED, CUDA_CAP_DECOMPOSE, CUDA_CAP_REMEDY = 32, 64, 128

E = {"EINVAL": -1, "ENOMEM": -2, "EOPEN": -3, "EFORMAT": -4, "EDTYPE": -5, "ESHAPE": -6,
     "ENOTFOUND": -7, "EWRITE": -8, "EVERSION": -9, "ENOTSUP": -10, "ERANGE": -11, "EEMPTY": -12,
     "ECHECK": -13, "EDUP": -14, "EINTERNAL": -15, "EBUSY": -16}


class FP4SError(RuntimeError):
    """A libfp4scope call failed, or the package refused an argument: .code
    is the negative FP4S_E* code (fp4scope.E names them)."""

    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code


def _candidates():
    env = os.environ.get("FP4SCOPE_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libfp4scope.so")
    root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    for pat in ("build/libfp4scope.so", "build*/libfp4scope.so", "_build*/libfp4scope.so"):
        for p in sorted(glob.glob(os.path.join(root, pat))):
            yield p
    found = ctypes.util.find_library("fp4scope")
    if found:
        yield found


def lib_path():
    """The path of the library in use (loading it if needed)."""
    lib()
    return _lib_path


_lib_path = None


def lib():
    """The loaded library (loaded once, its functions declared)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if not os.path.exists(path) and os.sep in path:
            tried.append(path + " (absent)")
            continue
        try:
            L = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(L, path)
        _lib, _lib_path = L, path
        break
    if _lib is None:
        raise FP4SError(-3, "libfp4scope.so not found (tried: %s); pip install the package, build the "
                        "project, or set FP4SCOPE_LIB to the library's path" % (", ".join(tried) or "nothing"))
    return _lib


# ---- structs the package lays out (each checked against the library's size
# query where it has one, and field by field against the C compiler's layout by
# tests/python/test_binding.py) ---------------------------------------------------

c = ctypes
_sz, _u8, _u16, _u32, _u64, _i64, _f32, _f64, _b, _i = (c.c_size_t, c.c_uint8, c.c_uint16, c.c_uint32,
                                                      c.c_uint64, c.c_int64, c.c_float, c.c_double,
                                                      c.c_bool, c.c_int)
_p = c.c_void_p


class CaptureOpts(c.Structure):
    """fp4s_capture_opts (capture.h)."""
    _fields_ = [("gzip", _i), ("shuffle", _b), ("chunk_rows", _sz), ("producer", c.c_char_p),
                ("overwrite", _b), ("checksum", _u32), ("reserved", _u32 * 7)]


class CaptureEntry(c.Structure):
    """fp4s_capture_entry (capture.h)."""
    _fields_ = [("step", _i64), ("_site", c.c_char * 256), ("_side", c.c_char * 16),
                ("_path", c.c_char * 512), ("rows", _sz), ("cols", _sz),
                ("dtype", _i), ("reserved", _u32 * 8)]
    site = property(lambda self: self._site.decode("utf-8", "replace"))
    side = property(lambda self: self._side.decode("utf-8", "replace"))
    path = property(lambda self: self._path.decode("utf-8", "replace"))


# fp4s_spec (spec.h): the fields up to nv_scope, which the package reads (and
# tensor_amax, which it sets on a copy); the rest is kept as bytes, so that
# fields added in reserved[] need no change here. Spec() is sized by the
# library: fp4s_spec_size().
SPEC_FIELDS = [("format", _i), ("block", _u32), ("tie", _i), ("keep_neg_zero", _b), ("zero_in", _i),
               ("packing", _i), ("nonfinite", _i), ("mx_rule", _i), ("mx_zero_block_code", _u8),
               ("mx_scale_is_ggml", _b), ("nv_recipe", _i), ("global_scale", _i), ("tile2d", _b),
               ("fp8_gran", _i), ("_profile", c.c_char * 32), ("tensor_amax", _i), ("mx_elem", _i),
               ("nv_4over6_err", _i), ("nv_scale_bound", _u16), ("rht_signs", _u16), ("rht", _b),
               ("sr", _b), ("sr_seed", _u32), ("nv_scope", _i)]


class _SpecHead(c.Structure):
    _fields_ = SPEC_FIELDS


class Tscale(c.Structure):
    """fp4s_tscale (quant.h)."""
    _fields_ = [("amax", _f32), ("s_enc", _f32), ("s_dec", _f32), ("stored", _f32), ("fp8_scale", _f32),
                ("reserved", _f32 * 3)]


# fp4s_qout (quant.h): the four outputs; the rest (fields added in reserved[])
# stays zero, sized by fp4s_qout_size().
QOUT_FIELDS = [("codes", _p), ("ld_codes", _sz), ("scales", _p), ("ld_scales", _sz),
               ("scale_f32", _p), ("ld_scale_f32", _sz), ("dequant", _p), ("ld_dequant", _sz)]


class _QOutHead(c.Structure):
    _fields_ = QOUT_FIELDS


class DecompOpts(c.Structure):
    """fp4s_decomp_opts (decompose.h)."""
    _fields_ = [("dz_tie", _i), ("by", _i), ("chunk_elems", _sz), ("max_groups", _sz), ("device", _i),
                ("keep_bytes", _sz), ("reserved", _u32 * 8)]


class DecompField(c.Structure):
    """fp4s_decomp_field (decompose.h): a row of the library's field table."""
    _fields_ = [("name", c.c_char_p), ("is_count", _b), ("offset", _sz), ("desc", c.c_char_p)]


class DecompItem(c.Structure):
    """fp4s_decomp_item (decompose.h): one input of a report."""
    _fields_ = [("source", c.c_char_p), ("step", _i64), ("site", c.c_char_p), ("side", c.c_char_p),
                ("synthetic", _b), ("acc", _p), ("reserved", _u32 * 8)]


class DecompHist(c.Structure):
    """fp4s_decomp_hist (decompose.h)."""
    _fields_ = [("lo", _f64), ("hi", _f64), ("counts", _u64 * HIST_BINS), ("reserved", _u32 * 8)]


class ChannelsOpts(c.Structure):
    """fp4s_channels_opts (channels.h)."""
    _fields_ = [("score", _i), ("top", _sz), ("ratio", _f64), ("weight_tile2d", _i), ("n_out", _sz),
                ("decomp", DecompOpts), ("reserved", _u32 * 8)]


class ChannelStat(c.Structure):
    """fp4s_channel_stat (channels.h)."""
    _fields_ = [("channel", _sz), ("rank", _sz), ("score", _f64), ("selected", _b), ("n", _u64),
                ("nonfinite", _u64), ("energy_total", _f64), ("energy_scale", _f64),
                ("energy_deadzone", _f64), ("energy_grid", _f64), ("relative_error", _f64),
                ("residual_norm", _f64), ("amax", _f64), ("deadzone_fraction", _f64),
                ("mean_abs_dx", _f64), ("mean_abs_dw", _f64), ("hcp", _f64), ("reserved", _u32 * 8)]


class CoveragePoint(c.Structure):
    """fp4s_coverage_point (channels.h)."""
    _fields_ = [("ratio", _f64), ("channels", _sz), ("share", _f64)]


class ChannelsCost(c.Structure):
    """fp4s_channels_cost (channels.h)."""
    _fields_ = [("tokens", _sz), ("n_out", _sz), ("k", _sz), ("selected", _sz), ("padded", _sz),
                ("n_out_assumed", _b), ("flops_base", _f64), ("flops_extra", _f64), ("flops_ratio", _f64),
                ("bytes_base", _f64), ("bytes_extra", _f64), ("bytes_ratio", _f64)]


def _decomp_result_type():
    """fp4s_decomp_result as an opaque block of the library's size (its fields
    are read through the library's field table, fp4s_decomp_fields)."""
    return c.c_uint8 * lib().fp4s_decomp_result_size()


class ChannelsReportHead(c.Structure):
    """fp4s_channels_report (channels.h) up to `summary`, which is an
    fp4s_decomp_result of the library's size: read with channels_report()."""
    _fields_ = [("k", _sz), ("tokens", _sz), ("score", _i), ("top", _sz), ("ratio", _f64), ("count", _sz),
                ("ch", c.POINTER(ChannelStat)), ("coverage", CoveragePoint * COVERAGE_POINTS),
                ("ncoverage", _sz), ("energy_total", _f64)]


class CompareOpts(c.Structure):
    """fp4s_compare_opts (remedy.h)."""
    _fields_ = [("dz_tie", _i), ("reserved", _u32 * 8)]


class CompareSite(c.Structure):
    """fp4s_compare_site (remedy.h)."""
    _fields_ = [("m", _sz), ("n", _sz), ("k", _sz), ("input_rel_diff", _f64), ("code_flips", _f64),
                ("scale_flips", _f64), ("tscale_rel_diff", _f64), ("amplification", _f64),
                ("mismatch2", _f64), ("ref2", _f64), ("mismatch_rel", _f64), ("contrib", _f64 * CMP_COUNT),
                ("ch_input_rel_diff", c.POINTER(_f64)), ("ch_code_flips", c.POINTER(_f64)),
                ("ch_scale_flips", c.POINTER(_f64)), ("ch_amplification", c.POINTER(_f64)),
                ("ch_contrib", c.POINTER(_f64)), ("ch_energy", c.POINTER(_f64)), ("rollout_only", _sz),
                ("trainer_only", _sz), ("reserved", _u32 * 2)]


class RemedyEvalOpts(c.Structure):
    """fp4s_remedy_eval_opts (remedy.h)."""
    _fields_ = [("dz_tie", _i), ("decompose", _b), ("accel", _p), ("device", _i), ("reserved", _u32 * 8)]


# fp4s_remedy_field (remedy.h): name, description and the getter the writers call
RemedyGetter = c.CFUNCTYPE(_f64, _p, _p)


class RemedyField(c.Structure):
    _fields_ = [("name", c.c_char_p), ("desc", c.c_char_p), ("get", RemedyGetter)]


class MmOpts(c.Structure):
    """fp4s_mm_opts (mismatch.h)."""
    _fields_ = [("is_cap", _f64), ("clamp", _f64), ("allow_positive", _b), ("by_position", _b),
                ("skip_empty", _b), ("reserved", _u32 * 8)]


class MmMetrics(c.Structure):
    """fp4s_mm_metrics (mismatch.h); v[id] by metric id."""
    _fields_ = [("step", _i64), ("tokens", _u64), ("sequences", _u64), ("masked", _u64),
                ("nonfinite", _u64), ("nmetrics", _u32), ("reserved", _u32), ("v", _f64 * MM_METRIC_SLOTS)]


def sized(head, size_fn):
    """A struct type laid out as `head` and padded to the library's size of
    the C struct (its later fields zero): for structs the package fills only
    in part."""
    size = getattr(lib(), size_fn)()
    if c.sizeof(head) > size:
        raise FP4SError(-15, "%s: the adapter's copy is %d bytes, the library's %d: use the adapter of "
                        "the same build" % (size_fn[:-5], c.sizeof(head), size))
    return type(head.__name__.lstrip("_"), (c.Structure,),
                {"_fields_": list(head._fields_) + [("_tail", c.c_uint8 * (size - c.sizeof(head)))]})


_sized_cache = {}


def Spec():
    """A zeroed fp4s_spec of the library's size (fields: SPEC_FIELDS)."""
    t = _sized_cache.get("spec")
    if t is None:
        t = _sized_cache["spec"] = sized(_SpecHead, "fp4s_spec_size")
    return t()


def QOut():
    """A zeroed fp4s_qout of the library's size (fields: QOUT_FIELDS)."""
    t = _sized_cache.get("qout")
    if t is None:
        t = _sized_cache["qout"] = sized(_QOutHead, "fp4s_qout_size")
    return t()


# the structs with a size query: (ctypes type, the query)
CHECKED = [(CaptureOpts, "fp4s_capture_opts_size"), (CaptureEntry, "fp4s_capture_entry_size"),
           (Tscale, "fp4s_tscale_size"),
           (DecompOpts, "fp4s_decomp_opts_size"), (DecompHist, "fp4s_decomp_hist_size"),
           (DecompItem, "fp4s_decomp_item_size"),
           (ChannelsOpts, "fp4s_channels_opts_size"), (ChannelStat, "fp4s_channel_stat_size"),
           (CompareOpts, "fp4s_compare_opts_size"), (CompareSite, "fp4s_compare_site_size"),
           (RemedyEvalOpts, "fp4s_remedy_eval_opts_size"), (MmOpts, "fp4s_mm_opts_size"),
           (MmMetrics, "fp4s_mm_metrics_size")]


def check_size(cls, size_fn):
    """Refuse (FP4S_EINTERNAL) a struct copy whose size is not the library's
    (size_fn: the library's size query of the struct)."""
    size = getattr(lib(), size_fn)()
    if c.sizeof(cls) != size:
        name = size_fn[:-len("_size")]
        raise FP4SError(-15, "%s is %d bytes in libfp4scope, %d in this adapter: use the adapter of the "
                        "same build" % (name, size, c.sizeof(cls)))


# ---- the functions: name -> (return type, argument types) -------------------------
_cp, _pp, _psz = c.c_char_p, c.POINTER(c.c_void_p), c.POINTER(c.c_size_t)
SYMBOLS = {
    # common.h
    "fp4s_last_error": (_cp, []),
    "fp4s_strerror": (_cp, [_i]),
    "fp4s_error_clear": (None, []),
    "fp4s_version": (_cp, []),
    "fp4s_features": (_cp, []),
    "fp4s_set_threads": (None, [_i]),
    "fp4s_get_threads": (_i, []),
    # spec.h
    "fp4s_spec_size": (_sz, []),
    "fp4s_spec_profile": (_i, [_p, _i, _cp]),
    "fp4s_spec_set_input_scale": (_i, [_p, _f32]),
    "fp4s_spec_check": (_i, [_p]),
    "fp4s_spec_describe": (_sz, [_p, _cp, _sz]),
    "fp4s_spec_blocks_per_row": (_sz, [_p, _sz]),
    "fp4s_spec_row_align": (_sz, [_p]),
    "fp4s_default_profile": (_cp, [_i]),
    "fp4s_format_parse": (_i, [_cp, c.POINTER(_i)]),
    "fp4s_names": (_sz, [_i, _cp, _cp, _cp, _sz]),
    "fp4s_profile_count": (_sz, []),
    "fp4s_profile_at": (c.POINTER(c.c_char_p), [_sz]),   # the first field: the name
    "fp4s_profile_find": (_p, [_cp]),
    # quant.h
    "fp4s_tscale_size": (_sz, []),
    "fp4s_qout_size": (_sz, []),
    "fp4s_qstats_size": (_sz, []),
    "fp4s_amax": (_f32, [_p, _sz, _sz, _sz, c.POINTER(_u64)]),
    "fp4s_spec_amax": (_f32, [_p, _p, _sz, _sz, _sz, c.POINTER(_u64)]),
    "fp4s_amax_merge": (_f32, [_f32, _f32]),
    "fp4s_rht_apply": (_i, [_p, _p, _sz, _sz, _sz, _p, _sz]),
    "fp4s_tscale_init": (_i, [_p, _f32, _p]),
    "fp4s_quantize": (_i, [_p, _p, _p, _sz, _sz, _sz, _sz, _p, _p]),
    "fp4s_dequantize": (_i, [_p, _p, _p, _sz, _p, _sz, _p, _sz, _sz, _sz, _sz, _p, _sz]),
    "fp4s_qstats_merge": (None, [_p, _p]),
    "fp4s_scale_decode": (_f32, [_p, _u8]),
    "fp4s_pack_e2m1_block": (_i, [_i, _u32, _p, _sz, _p]),
    "fp4s_unpack_e2m1_block": (_i, [_i, _u32, _p, _sz, _p]),
    "fp4s_bf16_to_f32": (None, [_p, _p, _sz]),
    "fp4s_fp16_to_f32": (None, [_p, _p, _sz]),
    # cuda.h (every build has them: without CUDA they say FP4S_ENOTSUP)
    "fp4s_cuda_available": (_b, []),
    "fp4s_cuda_describe": (_sz, [_cp, _sz]),
    "fp4s_cuda_caps": (c.c_uint, []),
    "fp4s_cuda_supports": (_b, [_p]),
    "fp4s_cuda_device_resolve": (_i, [_p, _i, c.POINTER(_i)]),
    "fp4s_cuda_quantize_ex": (_i, [_p, _p, _i, _p, _sz, _sz, _sz, _b, _p, _p, _p]),
    "fp4s_cuda_dequantize_ex": (_i, [_p, _p, _b, _p, _p, _sz, _sz, _p, _p]),
    "fp4s_cuda_amax_ex": (_i, [_i, _p, _sz, _sz, _sz, c.POINTER(_f32), c.POINTER(_u64), _p]),
    "fp4s_cuda_decomp_add": (_i, [_p, _i, _p, _sz, _sz, _sz, _p]),
    # decompose.h
    "fp4s_decomp_opts_defaults": (None, [_p]),
    "fp4s_decomp_opts_size": (_sz, []),
    "fp4s_decomp_open": (_i, [_p, _p, _p, _sz, _sz, _pp]),
    "fp4s_decomp_close": (None, [_pp]),
    "fp4s_decomp_add": (_i, [_p, _p, _sz, _sz, _sz]),
    "fp4s_decomp_merge": (_i, [_p, _p]),
    "fp4s_decomp_summary": (_i, [_p, _p]),
    "fp4s_decomp_ngroups": (_sz, [_p]),
    "fp4s_decomp_group": (_i, [_p, _sz, _p]),
    "fp4s_decomp_hist_get": (_i, [_p, _i, _p]),
    "fp4s_decomp_fields": (c.POINTER(DecompField), [_psz]),
    "fp4s_decomp_result_size": (_sz, []),
    "fp4s_decomp_hist_size": (_sz, []),
    "fp4s_decomp_rows": (_sz, [_p]),
    "fp4s_decomp_item_size": (_sz, []),
    "fp4s_decomp_write_h5": (_i, [_cp, _p, _p, _sz, _p]),
    "fp4s_decomp_cols": (_sz, [_p]),
    # channels.h
    "fp4s_channels_opts_defaults": (None, [_p]),
    "fp4s_channels_opts_size": (_sz, []),
    "fp4s_channel_stat_size": (_sz, []),
    "fp4s_channels_rank": (_i, [_p, _p, _p, _pp]),
    "fp4s_channels_weight_spec": (None, [_p, _p, _p]),
    "fp4s_channels_free": (None, [_pp]),
    "fp4s_chscore_parse": (_i, [_cp, c.POINTER(_i)]),
    # remedy.h: compare and remedies
    "fp4s_compare_opts_defaults": (None, [_p]),
    "fp4s_compare_opts_size": (_sz, []),
    "fp4s_compare_site_size": (_sz, []),
    "fp4s_compare_eval": (_i, [_p, _p, _p, _p, _sz, _p, _sz, _sz, _p, _p]),
    "fp4s_compare_site_free": (None, [_p]),
    "fp4s_cmp_component_name": (_cp, [_i]),
    "fp4s_remedy_list_parse": (_i, [_cp, _pp, _psz]),
    "fp4s_remedy_size": (_sz, []),
    "fp4s_remedy_label": (_cp, [_p]),
    "fp4s_remedy_weight_spec": (None, [_p, _i, _p]),
    "fp4s_remedy_eval_opts_defaults": (None, [_p]),
    "fp4s_remedy_eval_opts_size": (_sz, []),
    "fp4s_remedy_site_size": (_sz, []),
    "fp4s_remedy_result_size": (_sz, []),
    "fp4s_remedy_eval": (_i, [_p, _sz, _p, _p, _p, _p, _sz, _p, _sz, _sz, _p, _p, _p]),
    "fp4s_remedy_results_free": (None, [_p, _sz]),
    "fp4s_remedy_fields": (c.POINTER(RemedyField), [_psz]),
    # mismatch.h
    "fp4s_mm_opts_defaults": (None, [_p]),
    "fp4s_mm_opts_size": (_sz, []),
    "fp4s_mm_metrics_size": (_sz, []),
    "fp4s_mm_acc_open": (_i, [_p, _pp]),
    "fp4s_mm_acc_close": (None, [_pp]),
    "fp4s_mm_acc_reset": (None, [_p]),
    "fp4s_mm_acc_add": (_i, [_p, _sz, _p, _p, _p, _p, _p]),
    "fp4s_mm_acc_finish": (_i, [_p, _p]),
    "fp4s_mm_metric_count": (_sz, []),
    "fp4s_mm_metric_name": (_cp, [_sz]),
    "fp4s_mm_metric_value": (_f64, [_p, _sz]),
    "fp4s_mm_metric_alias": (_cp, [_sz, _i]),
    "fp4s_mm_names_parse": (_i, [_cp, c.POINTER(_i)]),
    # capture.h
    "fp4s_capture_opts_defaults": (None, [_p]),
    "fp4s_capture_opts_size": (_sz, []),
    "fp4s_capture_create": (_i, [_cp, _p, _pp]),
    "fp4s_capture_open_append": (_i, [_cp, _p, _pp]),
    "fp4s_capture_put": (_i, [_p, _i64, _cp, _cp, _i, _p, _sz, _sz, _sz, _p]),
    "fp4s_capture_put_logprobs": (_i, [_p, _i64, _p, _p, _p, _p, _p, _sz]),
    "fp4s_capture_put_tokens": (_i, [_p, _i64, _p, _sz]),
    "fp4s_capture_put_ids": (_i, [_p, _i64, _cp, _cp, _p, _sz]),
    "fp4s_capture_put_scalar": (_i, [_p, _i64, _cp, _f64]),
    "fp4s_capture_attr_str": (_i, [_p, _cp, _cp, _cp]),
    "fp4s_capture_attr_i64": (_i, [_p, _cp, _cp, _i64]),
    "fp4s_capture_attr_f64": (_i, [_p, _cp, _cp, _f64]),
    "fp4s_capture_flush": (_i, [_p]),
    "fp4s_capture_close": (_i, [_pp]),
    "fp4s_capture_abort": (_i, [_pp]),
    "fp4s_capture_entry_size": (_sz, []),
    "fp4s_capture_list": (_i, [_cp, c.POINTER(c.POINTER(CaptureEntry)), _psz]),
    "fp4s_site_check": (_i, [_cp]),
    # tensor.h: an output file committed (pt.py's capture)
    "fp4s_file_commit": (_i, [_cp, _cp, _b]),
}


def _declare(L, path="libfp4scope"):
    missing = []
    for name, (res, args) in SYMBOLS.items():
        try:
            f = getattr(L, name)
        except AttributeError:
            missing.append(name)
            continue
        f.restype = res
        f.argtypes = args
    if missing:
        raise FP4SError(-15, "%s lacks %s: the package and the library are of different versions"
                        % (path, ", ".join(missing)))


def check(rc):
    """Raise FP4SError for a negative return code."""
    if rc < 0:
        L = lib()
        detail = L.fp4s_last_error().decode("utf-8", "replace") or L.fp4s_strerror(rc).decode()
        raise FP4SError(rc, detail)
    return rc


def cstr(value, what, where="fp4scope"):
    """value as a C string: a str without NUL (C would cut it there)."""
    if not isinstance(value, str):
        raise FP4SError(-1, "%s: %s must be a str, not %s" % (where, what, type(value).__name__))
    if "\0" in value:
        raise FP4SError(-1, "%s: %s %r contains a NUL byte (C would cut it there)" % (where, what, value))
    return value.encode()


def capture_list(path):
    """Every dataset of a capture (fp4s_capture_list): a list of CaptureEntry."""
    L = lib()
    check_size(CaptureEntry, "fp4s_capture_entry_size")
    arr = c.POINTER(CaptureEntry)()
    n = c.c_size_t()
    check(L.fp4s_capture_list(os.fsencode(path), c.byref(arr), c.byref(n)))
    try:
        return [CaptureEntry.from_buffer_copy(arr[i]) for i in range(n.value)]
    finally:
        libc_free(arr)


def decomp_fields():
    """The library's table of fp4s_decomp_result fields: [(name, is_count, offset, desc)]."""
    n = c.c_size_t()
    t = lib().fp4s_decomp_fields(c.byref(n))
    return [(t[i].name.decode(), bool(t[i].is_count), t[i].offset, t[i].desc.decode()) for i in range(n.value)]


def decomp_result_dict(buf, fields=None):
    """An fp4s_decomp_result (bytes of the library's size) as a dict by the
    library's field names."""
    out = {}
    raw = bytes(buf)
    for name, is_count, off, _ in fields or decomp_fields():
        if is_count:
            out[name] = int.from_bytes(raw[off:off + 8], "little")
        else:
            out[name] = c.c_double.from_buffer_copy(raw, off).value
    return out
