"""The binding (tools/python/fp4scope/_lib.py) against the library it loads:
every symbol it declares is exported, and every C struct it lays out has the
C compiler's offsets and sizes (tests/python/layout.c prints them); a copy of
the wrong size is refused before the library reads through it."""
import ctypes
import os
import subprocess

import numpy as np

import fp4scope
from fp4scope import _lib
from harness import expect_error, run


def c_layout():
    exe = os.environ.get("FP4S_PY_LAYOUT")
    if not exe:
        exe = os.path.join(os.environ["FP4S_BUILDDIR"], "tests", "python", "py_layout")
    out = {}
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        s, f, *v = line.split()
        out.setdefault(s, {})[f] = tuple(int(a) for a in v)
    return out


def test_every_symbol_exported():
    L = ctypes.CDLL(fp4scope.lib_path())
    missing = [n for n in _lib.SYMBOLS if not hasattr(L, n)]
    assert not missing, missing
    assert len(_lib.SYMBOLS) > 100


def check_struct(cls, cname, layout, complete=True):
    want = layout[cname]
    for name, ctype in cls._fields_:
        key = name.lstrip("_")
        if key == "tail":
            continue
        assert key in want, "%s.%s: not in the C struct" % (cname, key)
        off, size = want[key]
        got = getattr(cls, name)
        assert (got.offset, got.size) == (off, size), "%s.%s: ctypes offset %d size %d, C %d %d" % (
            cname, key, got.offset, got.size, off, size)
    if complete:
        assert ctypes.sizeof(cls) == want["sizeof"][0], "%s: ctypes %d bytes, C %d" % (
            cname, ctypes.sizeof(cls), want["sizeof"][0])


def test_struct_layouts_match_the_compiler():
    lay = c_layout()
    for cls, cname in ((_lib.CaptureOpts, "fp4s_capture_opts"), (_lib.CaptureEntry, "fp4s_capture_entry"),
                       (_lib.Tscale, "fp4s_tscale"),
                       (_lib.DecompOpts, "fp4s_decomp_opts"), (_lib.DecompField, "fp4s_decomp_field"),
                       (_lib.DecompItem, "fp4s_decomp_item"), (_lib.DecompHist, "fp4s_decomp_hist"),
                       (_lib.ChannelsOpts, "fp4s_channels_opts"), (_lib.ChannelStat, "fp4s_channel_stat"),
                       (_lib.CoveragePoint, "fp4s_coverage_point"), (_lib.ChannelsCost, "fp4s_channels_cost"),
                       (_lib.CompareOpts, "fp4s_compare_opts"), (_lib.CompareSite, "fp4s_compare_site"),
                       (_lib.RemedyEvalOpts, "fp4s_remedy_eval_opts"), (_lib.RemedyField, "fp4s_remedy_field"),
                       (_lib.MmOpts, "fp4s_mm_opts"), (_lib.MmMetrics, "fp4s_mm_metrics")):
        check_struct(cls, cname, lay)
    # prefix copies, padded to the library's size
    check_struct(type(_lib.Spec()), "fp4s_spec", lay)
    check_struct(type(_lib.QOut()), "fp4s_qout", lay)
    # the channels report as analysis reads it
    from fp4scope.analysis import _report_type
    check_struct(_report_type(), "fp4s_channels_report", lay)
    # every struct with a size query has the library's size
    for cls, fn in _lib.CHECKED:
        _lib.check_size(cls, fn)


def test_wrong_size_refused():
    class Short(ctypes.Structure):
        _fields_ = _lib.DecompOpts._fields_[:-1]
    expect_error(lambda: _lib.check_size(Short, "fp4s_decomp_opts_size"), "fp4s_decomp_opts is", code=-15)
    good = _lib.DecompOpts
    _lib.DecompOpts = Short
    try:
        expect_error(lambda: fp4scope.decompose(np.zeros((2, 32), np.float32), "mxfp4"), "fp4s_decomp_opts is",
                     code=-15)
    finally:
        _lib.DecompOpts = good


if __name__ == "__main__":
    run(globals())
