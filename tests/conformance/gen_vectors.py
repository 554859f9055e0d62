#!/usr/bin/env python3
"""Write the conformance corpus (vectors.txt): for every profile and format,
small tensors chosen at E2M1 ties, scale-rule boundaries, fp32 subnormals,
huge values, zeros and non-finite values, with the scale bytes, element codes
and tensor scale each engine's documented arithmetic gives them.

The expectations are computed here, not by fp4scope: this is a second,
independent statement of the arithmetic of fp4scope-formats(7), written from
the engines' source as that page describes it. Codecs are exact (fractions
on the bit pattern); the engines' float32 operations are numpy float32
scalar operations, one IEEE rounding each, in the engine's order. Where an
engine's bytes are not meaningful (element codes inside a NaN-scale block)
the corpus holds fp4scope's documented choice, code 0.

    python3 gen_vectors.py > vectors.txt     # regenerate
    python3 gen_vectors.py --check vectors.txt   # exit 1 if it differs

File format, one record per line:
    input NAME FORMAT ROWS COLS      then lines "x HEX..." (float32 bits)
    expect NAME PROFILE FORMAT amax=HEX tscale=HEX scales=HEX.. codes=HEX..
scales and codes are two hex digits per byte (FP8 scales: eight digits per
float32 tile scale), row-major; amax is the tensor amax the engine takes and
tscale the stored tensor scale (fp4s_tscale.stored: NVFP4 by the profile's
convention, FP8 amax/448, MXFP4 1)."""
import math
import struct
import sys
from fractions import Fraction as Fr

import numpy as np

f32 = np.float32
FLT_MAX = f32(np.finfo(np.float32).max)


def bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0] if x == x else (
        0x7FC00000 | (0x80000000 if math.copysign(1.0, float(x)) < 0 else 0))


def fb(u):
    return f32(struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0])


def up(x):
    return np.nextafter(f32(x), f32(np.inf))


def down(x):
    return np.nextafter(f32(x), f32(-np.inf))


def isnan(x):
    return x != x


def isfin(x):
    return bool(np.isfinite(x))


# ---- codecs (exact) ----------------------------------------------------------------------------
E2M1 = [Fr(0), Fr(1, 2), Fr(1), Fr(3, 2), Fr(2), Fr(3), Fr(4), Fr(6)]


def nearest(a, grid, tie):
    """Index into the ascending grid of the value nearest to a >= 0 (ties by
    the rule; "rne" picks the even index), saturating at the top."""
    if a >= grid[-1]:
        return len(grid) - 1
    i = 0
    while grid[i + 1] < a:
        i += 1
    lo, hi = grid[i], grid[i + 1]
    if a == lo:
        return i
    mid = (lo + hi) / 2
    if a < mid:
        return i
    if a > mid:
        return i + 1
    if tie == "rne":
        return i if i % 2 == 0 else i + 1
    return i if tie == "rtz" else i + 1


def e2m1(v, tie="rne", keep_neg_zero=True, zero_in="sign"):
    v = f32(v)
    if isnan(v):
        return 0
    neg = math.copysign(1.0, float(v)) < 0
    if v == 0:
        return 8 if zero_in == "neg" else 0 if zero_in == "pos" else (8 if neg and keep_neg_zero else 0)
    a = Fr(6) if not isfin(v) else abs(Fr(float(v)))
    m = nearest(a, E2M1, tie)
    if m == 0:
        return 8 if neg and keep_neg_zero else 0
    return m | (8 if neg else 0)


def e4m3_value(c):
    e, m = (c >> 3) & 15, c & 7
    if e == 15 and m == 7:
        return None
    v = Fr(m, 512) if e == 0 else Fr(8 + m, 1) * Fr(2) ** (e - 10)
    return -v if c & 0x80 else v


# magnitudes of codes 0x00..0x7E and 0x7F taken as 480 for rounding, then saturated
E4M3_GRID = [e4m3_value(c) for c in range(0x7F)] + [Fr(480)]


def e4m3(v, tie="rne"):
    """E4M3 byte of float32 v: nearest, satfinite, NaN -> 0x7F, Inf -> +-448."""
    v = f32(v)
    if isnan(v):
        return 0x7F
    neg = math.copysign(1.0, float(v)) < 0
    a = Fr(480) if not isfin(v) else abs(Fr(float(v)))
    c = min(nearest(a, E4M3_GRID, tie), 0x7E)
    return c | (0x80 if neg else 0)


def e4m3_f(c):
    v = e4m3_value(c)
    return f32(np.nan) if v is None else f32(float(v))


def ue4m3_ggml(v):
    """ggml_fp32_to_ue4m3 as fp4scope-formats(7) documents it."""
    v = f32(v)
    if not v > 0:
        return 0
    if v > 448:
        v = f32(448)
    u = bits(v)
    e = ((u >> 23) & 0xFF) - 127 + 7
    if e <= 0:
        r = f32(v * f32(512)) + f32(0.5)
        man = min(int(r), 7)
        return 0 if man < 1 else man
    if e >= 15:
        return 0x7E
    man = ((u >> 20) & 7) + ((u >> 19) & 1)
    if man > 7:
        man, e = 0, e + 1
        if e >= 15:
            return 0x7E
    return (e << 3) | man


def ue4m3_ggml_f(c):
    if c in (0, 0x7F):
        return f32(0)
    e, m = (c >> 3) & 15, c & 7
    return f32(float(Fr(m, 512) if e == 0 else Fr(8 + m) * Fr(2) ** (e - 10)))


def pow2(k):
    return f32(2.0 ** k)


# ---- the GPU instructions of the engines' kernels (fp4scope-formats(7), THE GPU INSTRUCTIONS) ----
# rcp.approx.ftz.f32 as measured on an H200: the correctly rounded 1/(1.m) plus
# the measured deviation of lib/base/approx/rcp_approx_ftz_sm90.h5 (read with
# h5py), the input's exponent applied, zero and subnormal inputs -> +-Inf,
# results below 2^-126 -> +-0, Inf -> +-0, NaN -> 0x7FFFFFFF.
_RCP_DEV = []


def rcp_dev(m):
    if not _RCP_DEV:
        import os
        import h5py
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "base", "approx",
                            "rcp_approx_ftz_sm90.h5")
        with h5py.File(path, "r") as f:
            _RCP_DEV.append(f["/rcp_approx_ftz/deviation"][()])
    return int(_RCP_DEV[0][m])


def rcp_ftz(x):
    u = bits(x) if x == x else 0x7FC00000
    s, a = u & 0x80000000, u & 0x7FFFFFFF
    if a > 0x7F800000:
        return fb(0x7FFFFFFF)
    if a == 0x7F800000:
        return fb(s)
    if a < 0x00800000:
        return fb(s | 0x7F800000)
    e, m = a >> 23, a & 0x7FFFFF
    if m == 0:
        t = 0x3F800000
    else:  # 1/(1.m) in (0.5, 1), rounded to 24 bits, half to even
        t = (126 << 23) | (round(Fr(1 << 24) / (1 + Fr(m, 1 << 23))) - (1 << 23))
    t += rcp_dev(m)
    re = (t >> 23) - (e - 127)
    return fb(s) if re < 1 else fb(s | (re << 23) | (t & 0x7FFFFF))


def ex2_ftz_int(n):
    """ex2.approx.ftz.f32 of an integer (measured exact; 0 below 2^-126)."""
    return f32(0) if n < -126 else f32(np.inf) if n > 127 else pow2(n)


def daz(v):
    v = f32(v)
    return f32(math.copysign(0.0, float(v))) if isfin(v) and v != 0 and abs(v) < f32(2.0 ** -126) else v


def _ftz(exact, rounded):
    """mul/div.rn.ftz: +-0 where the exact result rounded to 24 bits with an
    unbounded exponent is below 2^-126 (IEEE tininess after rounding)."""
    if exact != 0 and abs(exact) < Fr(2) ** -126 * (1 - Fr(2) ** -25):
        return f32(-0.0) if exact < 0 else f32(0.0)
    return rounded


def mul_ftz(a, b):
    a, b = daz(a), daz(b)
    with np.errstate(all="ignore"):
        r = f32(a) * f32(b)
    return _ftz(Fr(float(a)) * Fr(float(b)), r) if isfin(a) and isfin(b) else r


def div_ftz(a, b):
    a, b = daz(a), daz(b)
    with np.errstate(all="ignore"):
        r = f32(a) / f32(b)
    return _ftz(Fr(float(a)) / Fr(float(b)), r) if isfin(a) and isfin(b) and b != 0 else r


def add_ftz(a, b):
    """add.rn.ftz: subnormal operands read as +-0; a sum below 2^-126 (exact there) flushes."""
    with np.errstate(all="ignore"):
        return daz(f32(daz(a)) + f32(daz(b)))


def bf16_rne(v):
    """float32 -> BF16 (round to nearest even on the bits) -> float32, exactly."""
    return bf16_round(v)


# ---- MXFP4 scale rules: the E8M0 code of a block amax > 0 -----------------------------------------
def fl_log2(a):
    """log2f as a correctly rounded float32 (glibc's log2f on the values used
    here); log2f(0) = -Inf."""
    return f32(-np.inf) if a == 0 else f32(math.log2(float(a)))


def clamp_code(k):
    return min(max(k, -127), 127) + 127


def mx_code(rule, amax, u=None):
    """u: the amax's bits where they matter for a NaN (the cvt policy's
    all-NaN block: 0x7FFF0000, the bf16 NaN widened)."""
    u = (bits(amax) if u is None else u) & 0x7FFFFFFF
    e32 = u >> 23
    if rule == "floor":
        return clamp_code(e32 - 127 - 2)
    if rule == "even":
        return clamp_code(((u + (1 << 21)) >> 23 & 0xFF) - 127 - 2)
    if rule == "even-nan":
        r = (u + (1 << 21)) >> 23
        return 0xFF if r >= 255 else clamp_code(r - 127 - 2)
    if rule == "ceil":  # smallest k with amax <= 6 * 2^k
        if not isfin(amax):
            return 254
        a, k = Fr(float(amax)), -200
        while a > 6 * Fr(2) ** k:
            k += 1
        return clamp_code(k)
    if rule == "rceil-mul":
        if not isfin(amax):
            return 254
        d = bits(f32(amax) * f32(1.0 / 6.0)) & 0x7FFFFFFF
        de, dm = d >> 23, d & 0x7FFFFF
        return de + (dm != 0) if de else int(dm > 0x400000)
    if rule in ("log2f", "rtn"):
        if not isfin(amax):
            return 254
        l = fl_log2(amax)
        return clamp_code(int(math.floor(l) if rule == "log2f" else np.rint(l)) - 2)
    if rule == "ceil-log2f":
        if not isfin(amax):
            return 254
        l = max(fl_log2(f32(amax) / f32(6)), f32(-127))
        return clamp_code(int(math.ceil(l)))
    # the engines' kernels
    if rule == "rceil-rcp-ftz":  # cvt.rp.satfinite.ue8m0 of mul.ftz(amax, rcp(6))
        d = mul_ftz(amax, rcp_ftz(f32(6)))
        if isnan(d):
            return 0xFF
        if not isfin(d):
            return 254
        if d == 0:
            return 0
        k = -127
        while Fr(float(d)) > Fr(2) ** k:
            k += 1
        return min(k + 127, 254)
    if rule == "floor-rcp":  # the exponent field of amax * rcp(6)
        with np.errstate(all="ignore"):
            d = f32(amax) * rcp_ftz(f32(6))
        return 0xFF if not isfin(d) else (bits(d) >> 23) & 0xFF
    if rule == "rceil-min":  # exponent of max(amax, 1e-10) * fl(1/6), + 1 if not a power of two
        d = bits(max(f32(amax), f32(1e-10)) * f32(1.0 / 6.0)) & 0x7FFFFFFF
        e = d >> 23
        return e + 1 if e < 255 and d & 0x7FFFFF else e
    if rule == "round-min":  # max(amax, 1e-10) to the nearest power of two at 1.5, times 1/4
        a = max(f32(amax), f32(1e-10))
        if not isfin(a):
            return 0xFF
        k = math.floor(math.log2(float(a)))
        while Fr(2) ** k > Fr(float(a)):
            k -= 1
        while Fr(2) ** (k + 1) <= Fr(float(a)):
            k += 1
        if Fr(float(a)) >= Fr(3, 2) * Fr(2) ** k:
            k += 1
        return 0xFF if k + 127 >= 255 else max(k + 127 - 2, 0)
    if rule == "even-sat":  # Quark: floor(log2(Inf)) clamps to 127
        r = (u + (1 << 21)) >> 23
        return 254 if r >= 255 else clamp_code(r - 127 - 2)
    if rule == "ceil-log2f-min":  # Brevitas: ceil(log2(max(amax, 1e-10))) - 2
        a = max(f32(amax), f32(1e-10))
        if not isfin(a):
            return 254
        return clamp_code(int(math.ceil(fl_log2(a))) - 2)
    raise ValueError(rule)


def mx_factor(elem, code):
    """(the elements' factor, multiply with ftz) from the scale code."""
    if elem == "exact":
        return pow2(127 - code), False
    if code == 0:
        return f32(0), elem == "ex2-ftz"
    if elem == "zero-at-0":
        return pow2(127 - code), False
    if elem == "ex2-ftz":  # exp2f(127 - code) under -use_fast_math
        return ex2_ftz_int(127 - code), True
    if elem == "rcp-ftz":  # rcp(bits(code << 23) * rcp(1))
        with np.errstate(all="ignore"):
            return rcp_ftz(fb(code << 23) * rcp_ftz(f32(1))), False
    raise ValueError(elem)


# ---- profiles: a transcription of fp4scope-formats(7) PROFILES ----------------------------------
def mx(rule, tie="rne", knz=True, zin="sign", nf="scale-nan", zero=0, elem="exact"):
    return dict(rule=rule, tie=tie, knz=knz, zin=zin, nf=nf, zero=zero, elem=elem)


def nv(recipe, tie="rne", knz=True, zin="sign", nf="scale-nan", tile2d=False, tamax="finite", gs="decode",
       bound=None, err="mae", rht=None, sr=None, scope="tensor", tsr="recipe", math_="amax", inscale=0.0):
    # bound, err, math_: a 4over6 recipe's tensor-scale bound (te-4over6 256, FlashInfer's 448 by default),
    # error and its arithmetic; rht: the sign mask of a transform first; sr: the seed; scope: "row" for one
    # amax per row; tsr: the tensor-scale rule; inscale: a static input scale (decode convention)
    if bound is None:
        bound = 256 if recipe == "te-4over6" else 448
    return dict(recipe=recipe, tie=tie, knz=knz, zin=zin, nf=nf, tile2d=tile2d, tamax=tamax, gs=gs, bound=bound,
                err=err, rht=rht, sr=sr, scope=scope, tsr=tsr, math=math_, inscale=inscale)


FOUR6 = ("te-4over6", "flashinfer-4over6", "flashinfer-4over6-exact")
TE_NV = dict(zin="pos", gs="encode", tamax="all")


PROFILES = {
    "ocp": {"mxfp4": mx("floor")},
    "ceil": {"mxfp4": mx("ceil")},
    "torchao": {"mxfp4": mx("floor", nf="block-nan"), "nvfp4": nv("torchao-rcp", tamax="all")},
    "torchao@0.18": {"mxfp4": mx("floor"), "nvfp4": nv("torchao-rcp", tamax="all")},
    "torchao@0.16": {"mxfp4": mx("floor"), "nvfp4": nv("torchao-div", tamax="all")},
    "torchao-cuda": {"mxfp4": mx("floor", nf="block-nan"), "nvfp4": nv("torchao-rcp-cuda", tamax="all")},
    "torchao-cuda@0.18": {"mxfp4": mx("floor"), "nvfp4": nv("torchao-rcp-cuda", tamax="all")},
    "torchao-cuda@0.16": {"mxfp4": mx("floor"), "nvfp4": nv("torchao-div-cuda", tamax="all")},
    "torchao-rceil": {"mxfp4": mx("rceil-mul", nf="block-nan")},
    "torchao-rceil@0.18": {"mxfp4": mx("ceil")},
    "even": {"mxfp4": mx("even-nan", nf="block-nan")},
    "even@0.18": {"mxfp4": mx("even")},
    "vllm": {"mxfp4": mx("even", elem="zero-at-0", nf="cvt"), "nvfp4": nv("vllm", nf="cvt", gs="encode")},
    "vllm@pre-43557": {"mxfp4": mx("floor-rcp", elem="rcp-ftz", nf="cvt"),
                       "nvfp4": nv("vllm", nf="cvt", gs="encode")},
    "sglang": {"nvfp4": nv("vllm", nf="cvt", gs="encode")},
    "flashinfer": {"mxfp4": mx("rceil-rcp-ftz", elem="ex2-ftz", nf="cvt"),
                   "nvfp4": nv("flashinfer", nf="cvt", gs="encode")},
    "flashinfer-exact": {"mxfp4": mx("rceil-rcp-ftz", elem="ex2-ftz", nf="cvt"),
                         "nvfp4": nv("flashinfer-exact", nf="cvt", gs="encode")},
    "trtllm": {"mxfp4": mx("rceil-rcp-ftz", elem="ex2-ftz", nf="cvt"),
               "nvfp4": nv("flashinfer", nf="cvt", gs="encode")},
    "trtllm-exact": {"mxfp4": mx("rceil-rcp-ftz", elem="ex2-ftz", nf="cvt"),
                     "nvfp4": nv("flashinfer-exact", nf="cvt", gs="encode")},
    "flashinfer-per-token": {"nvfp4": nv("flashinfer", nf="cvt", tamax="no-nan", scope="row", tsr="rcp")},
    "flashinfer-per-token-exact": {"nvfp4": nv("flashinfer-exact", nf="cvt", tamax="no-nan", scope="row", tsr="div")},
    "flashinfer-4over6": {"nvfp4": nv("flashinfer-4over6", nf="cvt", gs="encode", math_="decode")},
    "flashinfer-4over6-exact": {"nvfp4": nv("flashinfer-4over6-exact", nf="cvt", gs="encode", math_="decode")},
    "flashinfer-per-token-4o6": {"nvfp4": nv("flashinfer-4over6", nf="cvt", tamax="no-nan", scope="row", tsr="rcp")},
    "flashinfer-per-token-4o6-exact": {"nvfp4": nv("flashinfer-4over6-exact", nf="cvt", tamax="no-nan", scope="row",
                                                   tsr="div-zero")},
    "miles-nvfp4-rollout": {"nvfp4": nv("flashinfer-4over6-exact", nf="cvt", tamax="no-nan", scope="row", tsr="div-zero",
                                        bound=256, err="mse")},
    "vllm-per-token": {"nvfp4": nv("flashinfer", nf="cvt", tamax="no-nan", scope="row", tsr="rcp")},
    "sglang-per-token": {"nvfp4": nv("flashinfer", nf="cvt", tamax="no-nan", scope="row", tsr="rcp")},
    "aiter": {"mxfp4": mx("rceil-min", nf="ignore", zero=92)},
    "aiter@pre-3212": {"mxfp4": mx("round-min", nf="ignore", zero=92)},
    "quark": {"mxfp4": mx("even-sat")},
    "brevitas-ceil": {"mxfp4": mx("ceil-log2f-min", zero=92)},
    "te": {"mxfp4": mx("ceil-log2f", zin="pos"), "nvfp4": nv("te", zin="pos", gs="encode", tamax="all")},
    "te-2d": {"nvfp4": nv("te", zin="pos", gs="encode", tamax="all", tile2d=True)},
    "te-4over6": {"nvfp4": nv("te-4over6", zin="pos", gs="encode", tamax="all")},
    "te-4over6-2d": {"nvfp4": nv("te-4over6", zin="pos", gs="encode", tamax="all", tile2d=True)},
    "te-rht": {"nvfp4": nv("te", zin="pos", gs="encode", tamax="all", rht=0xD7E8)},
    "te-sr": {"nvfp4": nv("te", zin="pos", gs="encode", tamax="all", sr=1)},
    "te-row": {"nvfp4": nv("te", scope="row", **TE_NV)},
    "te-row-4over6": {"nvfp4": nv("te-4over6", scope="row", **TE_NV)},
    "miles-nvfp4-train": {"nvfp4": nv("te-4over6", scope="row", err="mse", **TE_NV)},
    "te-4over6-fast": {"nvfp4": nv("te-4over6", math_="fp16", **TE_NV)},
    "te@pre-2639": {"nvfp4": nv("te-sdiv", **TE_NV)},
    "te-fast-math": {"nvfp4": nv("te-bf16", **TE_NV)},
    "te-per-token@pr3045": {"nvfp4": nv("te-sdiv0", scope="row", tsr="floor", **TE_NV)},
    "modelopt": {"mxfp4": mx("ceil-log2f", tie="rtz", zin="neg"), "nvfp4": nv("modelopt", zin="pos")},
    "ggml": {"mxfp4": mx("log2f", tie="rtz", knz=False, zin="pos", nf="ignore"),
             "nvfp4": nv("ggml", tie="rtz", knz=False, zin="pos", nf="ignore", gs="none")},
    "microxcaling": {"mxfp4": mx("log2f", tie="rha", nf="block-nan")},
    "fp8-tensor": {"fp8": "tensor"},
    "fp8-1x128": {"fp8": "1x128"},
    "fp8-128x128": {"fp8": "128x128"},
    "deepseek": {"fp8": "1x128"},
}


# ---- the quantizers ---------------------------------------------------------------------------------
def scan(vals):
    """amax without NaN (Inf enters), the finite amax, NaN and Inf present."""
    am = fam = f32(0)
    nan = inf = False
    for v in vals:
        a = abs(f32(v))
        if isnan(a):
            nan = True
        elif not isfin(a):
            inf, am = True, a
        else:
            am, fam = max(am, a), max(fam, a)
    return am, fam, nan, inf


def nan_block(nf, nan, inf):
    return (nf == "block-nan" and (nan or inf)) or (nf == "scale-nan" and nan)


def quant_mx(p, x):
    rows, cols = x.shape
    scales, codes = [], []
    for r in range(rows):
        for b in range(cols // 32):
            blk = x[r, 32 * b:32 * b + 32]
            am, _, nan, inf = scan(blk)
            cvt = p["nf"] == "cvt"
            code = 0xFF
            if cvt and all(isnan(f32(v)) for v in blk):
                code = mx_code(p["rule"], f32(np.nan), 0x7FFF0000)
            elif not nan_block(p["nf"], nan, inf):
                code = p["zero"] if am == 0 else mx_code(p["rule"], am)
            scales.append(code)
            if code == 0xFF and p["elem"] == "exact":
                codes += [0] * 32
                continue
            inv, ftz = mx_factor(p["elem"], code)
            for v in blk:
                if p["nf"] == "ignore" and not isfin(v):
                    codes.append(0)
                    continue
                with np.errstate(all="ignore"):
                    t = mul_ftz(v, inv) if ftz else f32(v) * inv
                codes.append(7 if cvt and isnan(t) else e2m1(t, p["tie"], p["knz"], p["zin"]))
    return scales, codes


def tensor_amax(x, mode):
    am, fam, nan, inf = scan(x.ravel())
    if mode == "all":
        return f32(np.nan) if nan else am
    if mode == "no-nan":  # NaN skipped, Inf enters
        return am
    return fam


ENCODE_RECIPES = ("te", "flashinfer", "flashinfer-exact", "vllm", "te-sdiv", "te-sdiv0", "te-bf16") + FOUR6


def nv_tscale(p, amax):
    """(s_enc, s_dec, stored) of the recipe, its tensor-scale rule or a static input scale."""
    rec = p["recipe"]
    if rec == "ggml":
        return f32(1), f32(1), f32(1)
    b6 = f32(6 * p["bound"]) if rec in FOUR6 else f32(2688)
    encode = rec in ENCODE_RECIPES
    with np.errstate(all="ignore"):
        if p["inscale"] > 0:  # vLLM / SGLang: input_scale_inv = (1 / input_scale) in float32
            d = f32(p["inscale"])
            e = f32(1) / d
            return e, d, e if p["gs"] == "encode" else d
        if p["tsr"] == "floor":  # TE PR #3045: 2688 / max(amax, 1e-12), FLT_MAX at most, 1 for 0
            a = f32(1e-12) if amax < f32(1e-12) else f32(amax)
            e = f32(b6 / a)
            e = FLT_MAX if e > FLT_MAX else e
            e = f32(1) if e == 0 else e
            d = f32(1) / e
            return e, d, e if p["gs"] == "encode" else d
        if p["tsr"] == "rcp":  # FlashInfer per-token, fast math: stored rowAmax * fl(1/(6B)), S its rcp
            d = f32(amax) * f32(1.0 / float(b6))
            e = rcp_ftz(d)
            return e, d, e if p["gs"] == "encode" else d
        if p["tsr"] in ("div", "div-zero"):  # FlashInfer per-token, exact (div.rn.ftz, fminf)
            G = div_ftz(f32(1), f32(1.0 / float(b6)))
            if daz(amax) == 0 and p["tsr"] == "div-zero":
                return f32(0), f32(0), f32(0)
            e = FLT_MAX
            if daz(amax) != 0:
                e = div_ftz(G, f32(amax))
                e = FLT_MAX if e > FLT_MAX else e
            e = f32(1) if e == 0 else e
            d = div_ftz(f32(1), e)
            return e, d, e if p["gs"] == "encode" else d
    if encode:
        if amax == 0:
            e = f32(1)
        else:
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                e = f32(b6) / f32(amax)
            if e > FLT_MAX:
                e = FLT_MAX
            if e == 0:
                e = f32(1)
        d = f32(1) / e
        return e, d, e if p["gs"] == "encode" else d
    with np.errstate(all="ignore"):
        d = f32(amax) * f32(1.0 / 2688.0) if rec.endswith("-cuda") else f32(amax) / f32(2688)
        e = f32(1) / d
    return e, d, d


def nv_block(p, senc, sdec, amax_b):
    """(scale byte, decoded s_b, element op, factor, dequant factor)."""
    rec = p["recipe"]
    with np.errstate(all="ignore"):
        if rec in ("te", "te-sdiv", "te-sdiv0", "te-bf16"):
            mult = senc * f32(1.0 / 6.0)
            sbf = f32(amax_b) * mult
            if sbf > FLT_MAX:
                sbf = FLT_MAX
            code = e4m3(sbf)
            sbv = e4m3_f(code)
            if rec == "te":  # the reference: min(1 / (s_b S_dec), FLT_MAX)
                enc = f32(1) / (sbv * sdec)
                if enc > FLT_MAX:
                    enc = FLT_MAX
            elif rec == "te-sdiv0" and sbv == 0:  # PR #3045: 0 for a zero scale
                enc = f32(0)
            else:  # one division S_enc / s_b; NVTE_USE_FAST_MATH rounds it to BF16 (max 0x7F7F)
                enc = senc / sbv
                top = fb(0x7F7F0000) if rec == "te-bf16" else FLT_MAX
                if enc > top:
                    enc = top
                if rec == "te-bf16":
                    enc = bf16_rne(enc)
            return code, sbv, "mul", enc
        if rec.startswith("torchao"):
            pts = sdec
            bs = f32(amax_b) * f32(1.0 / 6.0) if rec.endswith("-cuda") else f32(amax_b) / f32(6)
            sc = bs / pts
            if sc < f32(2.0 ** -6):
                sc = f32(2.0 ** -6)
            if sc > f32(448):
                sc = f32(448)
            code = e4m3(sc)
            sbv = e4m3_f(code)
            if rec.startswith("torchao-div"):
                return code, sbv, "div", pts * sbv
            return code, sbv, "mul", senc / sbv  # (1/pts) / s_b
        if rec == "modelopt":
            sc2 = sdec
            pbs = f32(amax_b) / (f32(6) * sc2)
            if pbs == 0:
                pbs = f32(1)
            if pbs < f32(2.0 ** -9):
                pbs = f32(2.0 ** -9)
            code = 0x7F if not pbs <= 464 else e4m3(pbs)
            sbv = e4m3_f(code)
            return code, sbv, "div", sbv * sc2
        if rec == "ggml":
            code = ue4m3_ggml(f32(amax_b) / f32(6))
            sbv = ue4m3_ggml_f(code)
            return code, sbv, "search", sbv
        S = senc
        if rec == "flashinfer":  # fast math: mul.ftz, rcp.approx.ftz
            code = e4m3(mul_ftz(S, mul_ftz(amax_b, rcp_ftz(f32(6)))))
            sbv = e4m3_f(code)
            # "vecMax != 0" compiles to setp.ftz: a subnormal amax compares as 0
            enc = rcp_ftz(mul_ftz(sbv, rcp_ftz(S))) if daz(amax_b) != 0 else f32(0)
            return code, sbv, "mul-ftz", enc
        if rec == "flashinfer-exact":  # div.rn.ftz, mul.ftz, fminf, setp.ftz
            code = e4m3(mul_ftz(amax_b, mul_ftz(S, f32(1.0 / 6.0))) if daz(amax_b) != 0 else f32(0))
            sbv = e4m3_f(code)
            enc = f32(0)
            if daz(amax_b) != 0:
                q = div_ftz(f32(1), mul_ftz(sbv, div_ftz(f32(1), S)))
                enc = FLT_MAX if isnan(q) or q > FLT_MAX else q
            return code, sbv, "mul-ftz", enc
        if rec == "vllm":  # IEEE multiplies, rcp.approx.ftz, factor 0 for a zero scale
            code = e4m3(S * (f32(amax_b) * rcp_ftz(f32(6))))
            sbv = e4m3_f(code)
            enc = rcp_ftz(sbv * rcp_ftz(S)) if sbv != 0 else f32(0)
            return code, sbv, "mul", enc
    raise ValueError(rec)


def ggml_best(v, s, knz):
    ax = abs(f32(v))
    best, be = 0, abs(f32(E2M1[0]) * s - ax)
    for i in range(1, 8):
        e = abs(f32(float(E2M1[i])) * s - ax)
        if e < be:
            best, be = i, e
    if best == 0:
        return 8 if knz and v < 0 else 0
    return best | (8 if math.copysign(1.0, float(v)) < 0 else 0)


# ---- TransformerEngine's options (fp4scope-formats(7): te-4over6, te-rht, te-sr) -------------------
def bf16_round(v):
    """float32 -> BF16 (RNE on the bit pattern) -> float32; NaN stays NaN."""
    v = f32(v)
    if isnan(v):
        return v
    u = bits(v)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return fb(u)


def rht_rows(x, signs):
    """Each 16-block of each row times diag(s) H16 / 4: the sum in double in k order (the terms x*(+-1/4) are
    exact), rounded to float32, then to BF16."""
    rows, cols = x.shape
    y = np.zeros_like(x)
    for r in range(rows):
        for c0 in range(0, cols, 16):
            for j in range(16):
                acc = 0.0
                for k in range(16):
                    h = -1.0 if bin(k & j).count("1") % 2 else 1.0
                    sk = -0.25 if (signs >> k) & 1 else 0.25
                    acc += float(x[r, c0 + k]) * (sk * h)
                with np.errstate(over="ignore"):
                    y[r, c0 + j] = bf16_round(f32(acc))
    return y


def sr_bits(seed, i):
    """The top byte of splitmix64's finalizer of seed 2^32 + 0x632BE59BD9B4E019 + (i + 1) 0x9E3779B97F4A7C15."""
    m = (1 << 64) - 1
    z = ((seed << 32) + 0x632BE59BD9B4E019 + (i + 1) * 0x9E3779B97F4A7C15) & m
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & m
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return z >> 56


def sr_code(t, rb, knz, zin):
    """TE's stochastic_round_fp4_e2m1 of the scaled element t with 8 random bits, in float32; 0 and NaN as the
    deterministic codec; a negative t rounded to 0 keeps its sign under keep_neg_zero."""
    t = f32(t)
    if t == 0 or isnan(t):
        return e2m1(t, "rne", knz, zin)
    with np.errstate(all="ignore"):
        u = f32(rb) * f32(1.0 / 256.0)
        a = abs(t)
        step = f32(2) if a >= 4 else f32(1) if a >= 2 else f32(0.5)
        tt = f32(a + f32(u * step))
        step_t = f32(2) if tt >= 4 else f32(1) if tt >= 2 else f32(0.5)
        inv_t = f32(0.5) if tt >= 4 else f32(1) if tt >= 2 else f32(2)
        q = min(f32(np.floor(f32(tt * inv_t)) * step_t), f32(6))
    neg = math.copysign(1.0, float(t)) < 0
    if q == 0:
        return 8 if neg and knz else 0
    return E2M1.index(Fr(float(q))) | (8 if neg else 0)


def four6_term(p, fi, senc, gdec, amax, denom, q, sbv, xv):
    """One element's error term (the recipe's arithmetic: amax, decode or fp16), in float32; FlashInfer's
    _rn intrinsics are .ftz under -use_fast_math."""
    qv = f32(float(E2M1[q & 7]) * (-1 if q & 8 else 1))
    with np.errstate(all="ignore"):
        if p["math"] == "fp16":  # the FP16 product q*s is exact; x in the scaled domain
            d = add_ftz(f32(qv * sbv), -mul_ftz(xv, senc)) if fi else f32(f32(qv * sbv) - f32(xv * senc))
        elif p["math"] == "decode":
            d = add_ftz(mul_ftz(mul_ftz(qv, sbv), gdec), -xv) if fi else f32(f32(f32(qv * sbv) * gdec) - xv)
        elif fi:
            d = add_ftz(div_ftz(mul_ftz(mul_ftz(qv, sbv), amax), denom), -xv)
        else:
            d = f32(f32(f32(f32(qv * sbv) * amax) / denom) - xv)
        if p["err"] == "mse":
            return mul_ftz(d, d) if fi else f32(d * d)
        return abs(d)


def four6_tile(p, senc, sdec, amax, tile):
    """4over6 on one tile (h rows x 16): (scale byte, codes [h][16]). TE: candidates map-to-6 (scale
    e4m3(min(base, 448))) and map-to-4 (e4m3(min(1.5 base, 448))), base = (amax_b / 6) S_enc, factors
    min(1/(s S_dec), FLT_MAX), elements clamped to +-6; FlashInfer: base = S *f (amax_b *f rcp(6)) (fast)
    or (amax_b /f 6) *f S (exact), D = rcp(S) or 1 /f S, factors rcp(s *f D) or min(1 /f (s *f D), FLT_MAX),
    x *f factor, a (flushed) zero block amax gives scale 0 and codes 0. Per row the float32 sum in element
    order of the error terms (four6_term); 2-D tiles add the 16 row sums as TE's warp reduction does; the
    map-to-4 candidate wins only when strictly smaller."""
    rec = p["recipe"]
    fi, fast = rec != "te-4over6", rec == "flashinfer-4over6"
    denom = f32(6 * p["bound"])
    cvt = p["nf"] == "cvt"
    am_b = scan(tile.ravel())[0]
    if cvt and all(isnan(f32(v)) for v in tile.ravel()):
        am_b = f32(np.nan)
    h = tile.shape[0]
    with np.errstate(all="ignore"):
        if not fi:
            b6 = f32(f32(am_b) / f32(6)) * senc
            bases, gdec = (b6, f32(b6 * f32(1.5))), sdec
        elif fast:
            b6 = mul_ftz(senc, mul_ftz(am_b, rcp_ftz(f32(6))))
            bases, gdec = (b6, mul_ftz(b6, f32(1.5))), rcp_ftz(senc)
        else:
            b6 = mul_ftz(div_ftz(am_b, f32(6)), senc)
            bases, gdec = (b6, mul_ftz(b6, f32(1.5))), div_ftz(f32(1), senc)
        fi_zero = fi and daz(am_b) == 0
        cand = []
        for c in bases:
            if not fi and c > 448:
                c = f32(448)
            code = 0 if fi_zero else e4m3(c)
            sbv = e4m3_f(code)
            if not fi:
                enc = f32(1) / f32(sbv * sdec)
                if enc > FLT_MAX:
                    enc = FLT_MAX
            elif fast:
                enc = rcp_ftz(mul_ftz(sbv, gdec))
            else:
                enc = div_ftz(f32(1), mul_ftz(sbv, gdec))
                enc = FLT_MAX if isnan(enc) or enc > FLT_MAX else enc  # CUDA's fminf: NaN -> FLT_MAX
            if fi_zero:
                enc = f32(0)
            codes, errs = [], [f32(0)] * 16
            for i in range(h):
                e, row = f32(0), []
                for j in range(16):
                    xv = f32(tile[i, j])
                    v = mul_ftz(xv, enc) if fi else f32(xv * enc)
                    if not fi:
                        v = f32(6) if v > 6 else f32(-6) if v < -6 else v
                    q = 0 if fi_zero else 7 if cvt and isnan(v) else e2m1(v, p["tie"], p["knz"], p["zin"])
                    row.append(q)
                    if fi_zero:
                        continue
                    t = four6_term(p, fi, senc, gdec, amax, denom, q, sbv, xv)
                    e = add_ftz(e, t) if fi else f32(e + t)
                codes.append(row)
                errs[i] = e
            if p["tile2d"]:
                r8 = [f32(errs[k] + errs[k + 8]) for k in range(8)]
                r4 = [f32(r8[k] + r8[k + 4]) for k in range(4)]
                r2 = [f32(r4[k] + r4[k + 2]) for k in range(2)]
                tot = f32(r2[0] + r2[1])
            else:
                tot = errs[0]
            cand.append((code, codes, tot))
    pick = 0 if fi_zero else 1 if cand[1][2] < cand[0][2] else 0
    return cand[pick][0], cand[pick][1]


def quant_nv(p, x):
    """(amax, stored, scales, codes); row-scaled: amax and stored are lists, one per row."""
    rows, cols = x.shape
    if p["rht"] is not None:
        # the transform first; the engine's amax is that of the rotated values (finite ones), NaN or Inf when
        # the input holds one (the "all" amax)
        _, _, nan, inf = scan(x.ravel())
        x = rht_rows(x, p["rht"])
        amax = f32(np.nan) if nan else f32(np.inf) if inf else scan(x.ravel())[1]
    else:
        amax = tensor_amax(x, p["tamax"])
    if p["scope"] == "row":
        per_row = [tensor_amax(x[r:r + 1], p["tamax"]) for r in range(rows)]
        rts = []
        for a in per_row:
            e, d, st = nv_tscale(p, a)
            rts.append((a, e, d, e if p["gs"] == "encode" else st))
        amax, stored = per_row, [t[3] for t in rts]
    else:
        senc, sdec, stored = nv_tscale(p, amax)
        if p["gs"] == "encode":
            stored = senc
        rts = [(amax, senc, sdec, stored)] * rows
    H = 16 if p["tile2d"] else 1
    scales = np.zeros((rows, cols // 16), np.uint8)
    codes = np.zeros((rows, cols), np.uint8)
    for r0 in range(0, rows, H):
        h = min(H, rows - r0)
        ramax, senc, sdec, _ = rts[r0]
        for b in range(cols // 16):
            tile = x[r0:r0 + h, 16 * b:16 * b + 16]
            am, _, nan, inf = scan(tile.ravel())
            cvt = p["nf"] == "cvt"
            if cvt and all(isnan(f32(v)) for v in tile.ravel()):
                am = f32(np.nan)
            if nan_block(p["nf"], nan, inf):
                scales[r0:r0 + h, b] = 0x7F
                continue
            if p["recipe"] in FOUR6:
                code, cs = four6_tile(p, senc, sdec, ramax, tile)
                scales[r0:r0 + h, b] = code
                codes[r0:r0 + h, 16 * b:16 * b + 16] = cs
                continue
            code, sbv, op, fac = nv_block(p, senc, sdec, am)
            scales[r0:r0 + h, b] = code
            for i in range(h):
                for j in range(16):
                    v = f32(x[r0 + i, 16 * b + j])
                    if p["nf"] == "ignore" and not isfin(v):
                        q = 0
                    elif op == "search":
                        q = ggml_best(v, sbv, p["knz"])
                    else:
                        with np.errstate(all="ignore"):
                            t = mul_ftz(v, fac) if op == "mul-ftz" else v * fac if op == "mul" else v / fac
                        if cvt and isnan(t):
                            q = 7
                        elif p["sr"] is not None:
                            q = sr_code(t, sr_bits(p["sr"], (r0 + i) * cols + 16 * b + j), p["knz"], p["zin"])
                        else:
                            q = e2m1(t, p["tie"], p["knz"], p["zin"])
                    codes[r0 + i, 16 * b + j] = q
    return amax, stored, list(scales.ravel()), list(codes.ravel())


def quant_fp8(gran, x):
    rows, cols = x.shape
    codes = np.zeros((rows, cols), np.uint8)
    amax = tensor_amax(x, "finite")
    tiles = []
    if gran == "tensor":
        H, W = rows, cols
    else:
        H, W = (1, 128) if gran == "1x128" else (128, 128)
    for r0 in range(0, rows, H):
        for t in range(cols // W):
            tile = x[r0:r0 + H, t * W:(t + 1) * W]
            fam = scan(tile.ravel())[1]
            sc = fam / f32(448) if fam > 0 else f32(1)
            tiles.append(sc)
            with np.errstate(all="ignore"):
                for i in range(tile.shape[0]):
                    for j in range(W):
                        codes[r0 + i, t * W + j] = e4m3(f32(tile[i, j]) / sc)
    stored = amax / f32(448) if amax > 0 else f32(1)  # fp4s_tscale.stored: the per-tensor scale
    return amax, stored, tiles, list(codes.ravel())


# ---- the inputs ----------------------------------------------------------------------------------
def filler(n, top, seed):
    """n deterministic values of magnitude below top (mixed signs)."""
    g = np.random.default_rng(seed)
    return (g.uniform(-1, 1, n) * float(top) * 0.9).astype(np.float32)


def blocks(amaxes, B, seed, extra=None):
    """One row of blocks of B values, block i having amax amaxes[i] at
    position i % B (the rest below it)."""
    out = []
    for i, a in enumerate(amaxes):
        blk = filler(B, abs(a) if isfin(a) and a != 0 else 1.0, seed + i)
        if a == 0:
            blk[:] = 0
        blk[i % B] = a
        out.append(blk)
    x = np.concatenate(out).astype(np.float32).reshape(1, -1)
    if extra:
        extra(x)
    return x


def ties_row(B, scale):
    """Exact E2M1 midpoints and grid values (both signs) times scale, amax 6 * scale."""
    pts = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.5, 1.0, 3.0, 4.0]
    v = [f32(s * p * scale) for p in pts for s in (1, -1)]
    v += [f32(0.0), f32(-0.0), f32(0.2 * scale), f32(-0.2 * scale)]
    v += [f32(up(0.25 * scale)), f32(down(0.75 * scale)), f32(up(2.5 * scale)), f32(down(5.0 * scale))]
    return np.array((v * 2)[:B], np.float32)


def mx_inputs():
    ins = {}
    ins["mx-ties"] = np.stack([np.concatenate([ties_row(32, 1.0), ties_row(32, 2.0 ** -20)])])
    # amax on the boundaries of every rule (one block each)
    b = [6.0, up(6.0), 4.0, down(4.0), down(8.0), 1.75, down(1.75), up(1.5), 3.5, 7.0,
         6.0 * 2 ** 20, up(6.0 * 2 ** -20), down(2.0 ** 10), 2.0 ** -100 * 6, down(2.0 ** -30)]
    ins["mx-boundaries"] = blocks([f32(a) for a in b], 32, 10)
    # fp32 subnormals and the bottom of E8M0; 0x01400001 is torchao RCEIL's one difference
    sub = [fb(0x00400000), fb(0x00400001), fb(0x00000001), fb(0x007FFFFF), fb(0x00800000),
           fb(0x01400001), fb(0x01400002), fb(0x01400000), f32(2.0 ** -125 * 6), f32(2.0 ** -140)]
    ins["mx-subnormal"] = blocks(sub, 32, 20)
    huge = [FLT_MAX, f32(1.75 * 2 ** 127), down(1.75 * 2 ** 127), f32(2.0 ** 127), f32(3e38), f32(6.0 * 2 ** 125)]
    ins["mx-huge"] = blocks(huge, 32, 30)

    def zeros(x):
        x[0, 32:64] = -0.0
        x[0, 64:96] = filler(32, 2.0 ** -140, 5)
        x[0, 96:128] = 0
        x[0, 96] = 3.0
        x[0, 97] = -0.0
        x[0, 98] = -0.01
    ins["mx-zeros"] = blocks([0.0, 1.0, 1.0, 1.0], 32, 40, zeros)

    def nonfin(x):
        x[0, 3] = np.nan
        x[0, 40] = np.inf
        x[0, 70] = -np.inf
        x[0, 100] = np.nan
        x[0, 101] = np.inf
    ins["mx-nonfinite"] = blocks([2.0, 3.0, 5.0, 7.0, 1.0], 32, 50, nonfin)

    # the engines' kernels: FlashInfer's flush below d = amax*rcp(6) = 2^-126, aiter's and
    # Brevitas' amax floor 1e-10, aiter's rounding at mantissa 1.5, subnormal elements of a
    # normal block (flushed by a -use_fast_math multiply), an all-NaN block (the cvt policy's
    # NaN amax), Inf alone, NaN among finite values
    def engines(x):
        x[0, 32 * 10:32 * 11] = filler(32, 2.0 ** -127, 61)
        x[0, 32 * 10] = f32(2.0 ** -123)
        x[0, 32 * 10 + 1] = fb(0x00600000)
        x[0, 32 * 11:32 * 12] = np.nan
        x[0, 32 * 12:32 * 13] = filler(32, 3.0, 62)
        x[0, 32 * 12 + 4] = np.inf
        x[0, 32 * 13 + 9] = np.nan
    ea = [f32(6 * 2.0 ** -126), down(6 * 2.0 ** -126), up(6 * 2.0 ** -126), f32(1e-10), down(1e-10),
          f32(1e-12), f32(1.5), down(1.5), up(1.5), f32(3.0 * 2 ** 100), 1.0, 1.0, 1.0, f32(5.0)]
    ins["mx-engines"] = blocks(ea, 32, 60, engines)
    return ins


def torchao_div_vs_rcp():
    """One block (tensor amax = block amax T, pts = T/2688 inexact) whose
    elements sit where x/(pts*s_b) and x*((1/pts)/s_b) round to different
    codes: ties of the division that the multiply moves off."""
    T = f32(5.0)
    pts = T / f32(2688)
    sb = e4m3_f(e4m3(max(min((T / f32(6)) / pts, f32(448)), f32(2.0 ** -6))))
    t, r = pts * sb, (f32(1) / pts) / sb
    found = []
    for mid in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        x0 = f32(float(Fr(mid) * Fr(float(t))))
        for k in range(0, 81):
            x = x0
            for _ in range(k // 2):
                x = up(x) if k % 2 else down(x)
            if abs(x) >= T or e2m1(x / t) == e2m1(x * r):
                continue
            found.append(x)
            break
    assert found, "no element where torchao's division and multiply differ"
    row = filler(16, T, 7)
    row[0] = T
    row[1:1 + len(found)] = found
    return row


def cuda_tensor_amax():
    """A tensor amax whose amax/2688 and amax*fl(1/2688) differ (torchao's
    pts on the CPU and on CUDA)."""
    for u in range(0x3F800000, 0x3F800000 + 100000):
        a = fb(u)
        if a / f32(2688) != a * f32(1.0 / 2688.0):
            return a
    raise AssertionError("no tensor amax where CPU and CUDA pts differ")


def cuda_block_amax(T):
    """A block amax whose E4M3 scale differs between torchao on the CPU
    (amax_b/6, pts = T/2688) and on CUDA (amax_b*fl(1/6), T*fl(1/2688))."""
    p_cpu, p_gpu = T / f32(2688), T * f32(1.0 / 2688.0)
    for mid in (8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 17.0, 19.0, 21.0, 23.0, 25.0, 27.0, 29.0):
        b = f32(6 * mid)
        for k in range(64):
            for v in (b, up(b), down(b)):
                sc_cpu = e4m3(min(max((v / f32(6)) / p_cpu, f32(2.0 ** -6)), f32(448)))
                sc_gpu = e4m3(min(max((v * f32(1.0 / 6.0)) / p_gpu, f32(2.0 ** -6)), f32(448)))
                if sc_cpu != sc_gpu:
                    return v
            b = down(b) if k % 2 else up(b)
    raise AssertionError("no block amax where torchao's CPU and CUDA scales differ")


def nv_inputs():
    ins = {}
    # tensor amax 2688 * 2^-4: S_enc and pts powers of two, block scales exact; ties at two scales
    x = np.zeros((2, 32), np.float32)
    x[0, :16] = ties_row(16, 1.0 / 16)
    x[0, 16:] = ties_row(16, 1.0 / 64)
    x[1, :16] = ties_row(16, 1.0 / 32)[::-1]
    x[1, 16:] = filler(16, 2.0, 3)
    x[1, 31] = f32(2688.0 / 16)
    ins["nv-ties"] = x
    ins["nv-torchao-div-rcp"] = torchao_div_vs_rcp().reshape(1, 16)
    # torchao on CUDA: pts = amax*fl(1/2688) differs here from amax/2688, and
    # amax_b*fl(1/6) from amax_b/6 where amax_b/6 is an E4M3 tie (51/6 = 8.5)
    ta = cuda_tensor_amax()
    x = np.zeros((1, 48), np.float32)
    x[0, :16] = ties_row(16, float(ta) / 6)
    x[0, 0] = ta
    x[0, 16:32] = filler(16, 51.0 / 2688 * float(ta), 11)
    x[0, 16] = f32(51.0 / 2688) * ta
    x[0, 32:48] = filler(16, 0.3, 13)
    ins["nv-cuda-scalar"] = x
    # ... and a block amax near 6 * (an E4M3 midpoint) where amax_b/6 rounds
    # below the midpoint and amax_b*fl(1/6) onto it (tensor amax 2688)
    x = np.zeros((1, 32), np.float32)
    x[0, :16] = filler(16, 2688.0, 14)
    x[0, 0] = 2688.0
    x[0, 16:32] = filler(16, 50.0, 15)
    x[0, 16] = cuda_block_amax(f32(2688.0))
    ins["nv-cuda-tie"] = x
    # block amax at E4M3 scale ties and the top of E4M3: amax_b / 6 / pts = s with
    # pts = 1 (tensor amax 2688, its own block); 2.5 * 2^-9 is a subnormal tie,
    # 470 above ModelOpt's unsaturated 464
    ss = [8.5, 9.5, 2.5 * 2 ** -9, 440.0, 449.0, 470.0]
    x = np.zeros((1, 16 * (1 + len(ss))), np.float32)
    x[0, :16] = filler(16, 2688.0, 12)
    x[0, 0] = 2688.0
    for i, sv in enumerate(ss):
        blk = filler(16, 6 * sv, 13 + i)
        blk[5] = f32(6 * sv)
        x[0, 16 * (i + 1):16 * (i + 2)] = blk
    ins["nv-scale-boundaries"] = x
    # every value subnormal: torchao's 1/pts overflows; TE's 2688/amax overflows (S_enc FLT_MAX)
    x = np.zeros((1, 32), np.float32)
    x[0, :] = filler(32, 1.4e-39, 18)
    x[0, 0] = fb(0x000FFFFF)
    x[0, 17] = fb(0x80000001)
    ins["nv-subnormal"] = x
    x = np.zeros((1, 32), np.float32)
    x[0, :] = filler(32, 2.0 ** -126, 17)
    x[0, 0] = f32(2.0 ** -126)
    x[0, 20] = fb(0x05280000)  # 0x1.5p-117: 2688 / amax = 2^128 exactly
    ins["nv-tiny-tensor"] = x
    x = np.zeros((1, 48), np.float32)
    x[0, :16] = filler(16, 3e38, 19)
    x[0, 0] = FLT_MAX
    x[0, 16:32] = filler(16, 1e30, 21)
    x[0, 32:48] = filler(16, 1e-30, 23)
    ins["nv-huge"] = x
    x = np.zeros((2, 32), np.float32)
    x[0, 16:] = -0.0
    x[1, :16] = filler(16, 1.0, 29)
    x[1, 3] = -0.0
    x[1, 4] = 0.0
    x[1, 16:] = filler(16, 1e-5, 31)
    ins["nv-zeros"] = x
    ins["nv-all-zero"] = np.zeros((1, 16), np.float32)
    x = np.zeros((2, 32), np.float32)
    x[0, :] = filler(32, 4.0, 37)
    x[0, 5] = np.nan
    x[1, :] = filler(32, 4.0, 41)
    x[1, 20] = np.inf
    ins["nv-nan"] = x           # the tensor amax is NaN where the engine takes every value
    x = x.copy()
    x[0, 5] = 1.0
    ins["nv-inf"] = x           # ... +Inf (TE: S_enc 1)
    # 2-D tiles: 32 rows, the second tile row half (16 rows) present
    x = np.zeros((24, 32), np.float32)
    for r in range(24):
        x[r] = filler(32, 1.0 + r, 43 + r)
    x[3, 7] = 9.0
    x[20, 30] = 12.0
    ins["nv-2d"] = x
    ins["nv-engines"] = nv_engines()
    ins["nv-knobs"] = nv_knobs()
    ins["nv-rows"] = nv_rows()
    return ins


def hexrow(h):
    return [fb(int(w, 16)) for w in h.split()]


def nv_knobs():
    """Rows of 32 (block 0 holds the tensor amax 3.1) whose block 1 separates the engines' switches, found by a
    random search near the E2M1 midpoints: row 0 the 4over6 error through the amax against through the decode
    scale (bound 448), row 1 against the FP16 error, row 2 FlashInfer's 4over6 fast math against exact, row 3
    TransformerEngine's reference factor against the tuned kernel's S_enc/s_b and its BF16 factor; then rows for
    the row scales: a small row, an all-zero row, a row with Inf, an all-NaN row and a row whose amax is below
    1e-12."""
    found = [
        "40466666 be343ab3 bf1629f7 bde228de 3ed8f197 3f0b5d2c bf32af84 be714aec bee76193 bf059526 beab01ae "
        "3e289979 bf7b8a38 bf70042d 3f59d8dd bed11696 3fa39f2c bec5e727 3e6c60c7 3ec4d25f 3f218bf1 bf0338d1 "
        "bf258412 bce662e5 3f3c39a4 3bb84148 beb0e7cf bd19c38f beafbbd3 bca82376 3f233a4e bcfcdd83",
        "40466666 3db7d498 be6efceb 3f0586f3 3f795bd8 be23a6f6 3ec9bcac bf194e87 be8aadcf 3f53c9bc bf7004a1 "
        "3b84b6d9 becc3ef9 3e98d944 beb90f00 3f4f20ca be46e619 be35b1cf 3e435ec7 3ba1523b 3eaf7c2a be4cff10 "
        "be65cd8e bee480bc 3e975c15 bcba016b 3e365538 3d53884f beb3e5f9 3e80cefa 3f425dbf bea549e9",
        "40466666 bf7c2db2 bf0fe5bf 3db870cd 3f1653de be49e2b6 bed8c55f 3e0caa1b 3fb2d885 3f6a2c1f 3edf5ba3 "
        "3e703b88 3ea51f31 3f844ee3 3d9c13c2 be49d7ae 3e01e79d 3e01e79f bccfd8fc be81e79d be35dddc 00000000 "
        "3e35ddde 3e81e79e 3ccfd8ff 3e35ddde 3e9a610d 00000000 00000000 00000000 be35dddd 3ccfd8fb",
        "40466666 3e9f6f11 3f354025 3f1f0350 3f145a7e 3d5c5fa5 bd53afda beabd077 beb933f1 bfc9af05 3f69931f "
        "bcc58a38 be77ced5 beec9d87 3dbb2d14 bf1c6bcb bea55554 bea55557 beec30c5 3e0db6d7 3f8bdc19 be6c30c5 "
        "bf255551 bea55554 bf6c30c3 be6c30c5 beec30c3 3e0db6dd 3d3cf3d0 be0db6d7 3e6c30c4 bf255553",
    ]
    x = np.zeros((7, 32), np.float32)
    for i, h in enumerate(found):
        x[i] = hexrow(h)
    x[4] = filler(32, 0.02, 81)
    x[4, 7] = f32(0.02)
    x[5] = 0.0                                  # all zero: FlashInfer's fast per-token S = rcp(0) = Inf
    x[6] = filler(32, 1e-13, 83)                # row amax below TE PR #3045's floor 1e-12
    return x


def nv_rows():
    """Row scales and non-finite values: a row with Inf (row amax Inf under no-nan and all, 1 when finite),
    an all-NaN row (the cvt policy's NaN block amax; row amax 0 under no-nan), a NaN among values, a plain
    row."""
    x = np.zeros((4, 32), np.float32)
    for r in range(4):
        x[r] = filler(32, 1.0 + r, 91 + r)
    x[0, 9] = np.inf
    x[1] = np.nan
    x[2, 20] = np.nan
    return x


def nv_engines():
    """A tensor (amax 3.1: S = 2688/3.1 is not a power of two) for the engines'
    kernels: a block whose E4M3 scale underflows to 0 (FlashInfer: rcp(0) = Inf,
    elements +-6 and 0 -> NaN -> 7; vLLM: factor 0; TE: FLT_MAX), an all-zero
    block, elements where FlashInfer's rcp.approx.ftz factor and its exact
    variant round to different codes, a block amax where S*(amax_b*fl(1/6))
    and amax_b*(S*fl(1/6)) are different E4M3 scales, an all-NaN block and Inf."""
    T = f32(3.1)
    S = f32(2688) / T
    x = np.zeros((1, 16 * 8), np.float32)
    x[0, :16] = filler(16, T, 71)
    x[0, 0] = T
    x[0, 16:32] = filler(16, 1e-6, 72)
    x[0, 16] = f32(1e-6)
    x[0, 17] = f32(0.0)
    x[0, 18] = f32(-0.0)
    # block 2 all zero; block 3: elements on which the two FlashInfer factors differ
    am = f32(0.01)
    for _ in range(1000):
        fi = nv_block({"recipe": "flashinfer"}, S, f32(1) / S, am)
        ex = nv_block({"recipe": "flashinfer-exact"}, S, f32(1) / S, am)
        if fi[0] == ex[0] and fi[3] != ex[3]:
            break
        am = f32(am * f32(1.03))
    else:
        raise AssertionError("no block amax where FlashInfer's approximate and exact factors differ")
    found = []
    for mid in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        x0 = f32(float(Fr(mid) / Fr(float(ex[3]))))
        v = x0
        for k in range(400):
            v = up(v) if k % 2 else down(v)
            w = x0
            for _ in range(k // 2 + 1):
                w = up(w) if k % 2 else down(w)
            if abs(w) < am and e2m1(mul_ftz(w, fi[3])) != e2m1(mul_ftz(w, ex[3])):
                found.append(w)
                break
    assert found, "no element where FlashInfer's approximate and exact factors differ"
    x[0, 48:64] = filler(16, am, 73)
    x[0, 48] = am
    x[0, 49:49 + len(found)] = found
    # block 4: an amax_b where the association of S, amax_b and fl(1/6) changes the E4M3 scale
    r6 = f32(1.0 / 6.0)

    def assoc():
        for c in range(8, 0x7E):  # near each E4M3 midpoint (s_b values below T*S/6)
            mid = (e4m3_value(c) + e4m3_value(c + 1)) / 2
            a0 = f32(float(mid * 6 / Fr(float(S))))
            for k in range(64):
                a = a0
                for _ in range(k // 2):
                    a = up(a) if k % 2 else down(a)
                if a < T and e4m3(S * (a * r6)) != e4m3(a * (S * r6)):
                    return a
        raise AssertionError("no block amax where the two associations give different E4M3 scales")
    a = assoc()
    x[0, 64:80] = filler(16, a, 74)
    x[0, 64] = a
    x[0, 80:96] = np.nan
    x[0, 96:112] = filler(16, 1.0, 75)
    x[0, 97] = np.inf
    x[0, 112:128] = filler(16, 0.01, 76)
    return x


def fp8_inputs():
    x = np.zeros((2, 256), np.float32)
    x[0, :128] = filler(128, 448.0, 51)
    x[0, 0] = 448.0
    # E4M3 ties at scale 1: (m + 0.5) * 2^e
    x[0, 1:9] = [f32(v) for v in (8.5 * 2 ** -3, 9.5 * 2 ** -3, 0.5 * 2 ** -9 * 3, 0.5 * 2 ** -9, 464.0 / 2, 1.0625, -1.1875, -1.0625)]
    x[0, 128:256] = 0
    x[1, :128] = filler(128, 1e-30, 53)
    x[1, 128:256] = filler(128, 3e38, 55)
    x[1, 200] = np.nan
    x[1, 201] = np.inf
    return {"fp8-mixed": x}


# ---- the corpus --------------------------------------------------------------------------------------
def facts(exp):
    """The behaviours the corpus must show (fp4scope-formats(7), ENGINE
    VERSIONS): each as differing records of the same input."""
    def rec(name, prof):
        return exp[(name, prof)]
    checks = [
        ("torchao >= 0.17 multiplies by (1/pts)/s_b, up to 0.16 divides by pts*s_b: ties move",
         rec("nv-torchao-div-rcp", "torchao")[3] != rec("nv-torchao-div-rcp", "torchao@0.16")[3]),
        ("on CUDA amax/2688 is amax*fl(1/2688): the tensor scale differs",
         rec("nv-cuda-scalar", "torchao")[1] != rec("nv-cuda-scalar", "torchao-cuda")[1]),
        ("on CUDA amax_b/6 is amax_b*fl(1/6): an E4M3 tie becomes another scale",
         rec("nv-cuda-tie", "torchao")[2] != rec("nv-cuda-tie", "torchao-cuda")[2]),
        ("torchao >= 0.17 on an all-subnormal tensor: 1/pts is Inf, the elements saturate",
         rec("nv-subnormal", "torchao")[3] != rec("nv-subnormal", "torchao@0.16")[3]),
        ("torchao RCEIL since 5d73a0c10 differs from exact ceil at amax 0x01400001",
         rec("mx-subnormal", "torchao-rceil")[2] != rec("mx-subnormal", "torchao-rceil@0.18")[2]),
        ("torchao EVEN since 5d73a0c10 writes 0xFF for amax >= 1.75*2^127",
         "ff" in rec("mx-huge", "even")[2] and "ff" not in rec("mx-huge", "even@0.18")[2]),
        ("TransformerEngine's global amax includes NaN: every scale NaN",
         set(rec("nv-nan", "te")[2][i:i + 2] for i in range(0, 8, 2)) == {"7f"}
         and set(rec("nv-nan", "vllm")[2][i:i + 2] for i in range(0, 8, 2)) != {"7f"}),
        ("TE: 2688/amax overflows for amax <= 0x1.5p-117, S_enc = FLT_MAX",
         rec("nv-tiny-tensor", "te")[1] == "7f7fffff"),
        ("FlashInfer: a block whose E4M3 scale underflows: rcp(0) = Inf, elements +-6, +-0 NaN -> 7",
         rec("nv-engines", "flashinfer")[3][32:38] == "070707" and rec("nv-engines", "vllm")[3][32:38] == "000008"),
        ("FlashInfer's rcp.approx.ftz factor rounds elements apart from its exact variant",
         rec("nv-engines", "flashinfer")[3] != rec("nv-engines", "flashinfer-exact")[3]),
        ("aiter's and Brevitas' amax floor 1e-10: all-zero blocks get code 92",
         rec("mx-zeros", "aiter")[2][:2] == "5c" and rec("mx-zeros", "brevitas-ceil")[2][:2] == "5c"),
        ("vLLM before PR #43557 floors amax*rcp(6): other scales than since",
         rec("mx-boundaries", "vllm@pre-43557")[2] != rec("mx-boundaries", "vllm")[2]),
        ("Quark's even_round saturates at code 254 where even gives 253",
         rec("mx-huge", "quark")[2] != rec("mx-huge", "even@0.18")[2]),
        ("FlashInfer flushes amax*rcp(6) below 2^-126 (code 0) where ceil gives 1",
         rec("mx-engines", "flashinfer")[2] != rec("mx-engines", "ceil")[2]),
    ]
    for what, ok in checks:
        assert ok, "the corpus does not show: " + what


# Records of knob settings that no profile has: (input, profile, options), the options overriding the
# profile's spec (the runner applies the same: bound, err, math, input_scale as float bits)
OPTION_RECORDS = [
    ("nv-knobs", "te-4over6", dict(bound=448)),
    ("nv-knobs", "te-4over6", dict(bound=448, math_="decode")),
    ("nv-knobs", "flashinfer-4over6", dict(err="mse", bound=256)),
    ("nv-knobs", "flashinfer-4over6-exact", dict(math_="fp16")),
    ("nv-knobs", "vllm", dict(inscale=fb(0x3a000000))),      # 2^-11: 3.1 needs 2^-9.8, block scales clamp
    ("nv-knobs", "modelopt", dict(inscale=fb(0x3a000000))),
    ("nv-knobs", "te", dict(inscale=fb(0x3a000000))),
    ("nv-ties", "flashinfer", dict(inscale=fb(0x3c000000))),  # 2^-7
]


def opt_name(prof, o):
    keys = {"bound": "bound", "err": "err", "math_": "math"}
    parts = [prof]
    for k, v in o.items():
        parts.append("input_scale=%08x" % bits(v) if k == "inscale" else "%s=%s" % (keys[k], v))
    return ",".join(parts)


def hexbytes(v):
    return "".join("%02x" % int(c) for c in v)


def corpus():
    lines = ["# fp4scope conformance corpus: written by gen_vectors.py from the documented arithmetic",
             "# (fp4scope-formats(7)), not by fp4scope. Regenerate: python3 gen_vectors.py > vectors.txt"]
    sets = [("mxfp4", mx_inputs()), ("nvfp4", nv_inputs()), ("fp8", fp8_inputs())]
    exp = {}
    for fmt, ins in sets:
        for name, x in ins.items():
            rows, cols = x.shape
            lines.append("input %s %s %d %d" % (name, fmt, rows, cols))
            flat = x.ravel()
            for i in range(0, flat.size, 16):
                lines.append("x " + " ".join("%08x" % bits(v) for v in flat[i:i + 16]))
            runs = [(prof, fmts[fmt]) for prof, fmts in PROFILES.items() if fmt in fmts]
            for inp, prof, o in OPTION_RECORDS:
                if inp == name:
                    q = dict(PROFILES[prof][fmt])
                    q.update({("math" if k == "math_" else k): v for k, v in o.items()})
                    runs.append((opt_name(prof, o), q))
            for prof, p in runs:
                if fmt == "mxfp4":
                    sc, co = quant_mx(p, x)
                    amax, stored, shex = tensor_amax(x, "finite"), f32(1), hexbytes(sc)
                elif fmt == "nvfp4":
                    amax, stored, sc, co = quant_nv(p, x)
                    shex = hexbytes(sc)
                    if isinstance(amax, list):  # row-scaled: one amax and tensor scale per row
                        rec = (",".join("%08x" % bits(a) for a in amax), ",".join("%08x" % bits(t) for t in stored),
                               shex, hexbytes(co))
                        exp[(name, prof)] = rec
                        lines.append("expect %s %s %s amax=%s tscale=%s scales=%s codes=%s" % ((name, prof, fmt) + rec))
                        continue
                else:
                    amax, stored, tiles, co = quant_fp8(p, x)
                    shex = "".join("%08x" % bits(t) for t in tiles)
                rec = ("%08x" % bits(amax), "%08x" % bits(stored), shex, hexbytes(co))
                exp[(name, prof)] = rec
                lines.append("expect %s %s %s amax=%s tscale=%s scales=%s codes=%s" % ((name, prof, fmt) + rec))
    facts(exp)
    facts_recipes(exp)
    return "\n".join(lines) + "\n"


def facts_recipes(exp):
    """The behaviours of the per-token, 4over6, fast-math and static-scale records."""
    def rec(name, prof):
        return exp[(name, prof)]

    def n7e(h):  # scale bytes 0x7e (448)
        return sum(h[i:i + 2] == "7e" for i in range(0, len(h), 2))

    def row(r, k, n=32):  # hex of row k's codes (n per row) or scales (2 per row: n=2)
        return r[k * n * 2:(k + 1) * n * 2]
    kn = "nv-knobs"
    checks = [
        ("4over6: the error through the amax and through the decode scale pick different candidates",
         row(rec(kn, "te-4over6,bound=448")[2], 0, 2) != row(rec(kn, "te-4over6,bound=448,math=decode")[2], 0, 2)),
        ("4over6: the FP16 (fast-math) error picks another candidate than the FP32 one",
         row(rec(kn, "te-4over6")[2], 1, 2) != row(rec(kn, "te-4over6-fast")[2], 1, 2)),
        ("FlashInfer 4over6: fast math and exact give different codes",
         row(rec(kn, "flashinfer-4over6")[3], 2) != row(rec(kn, "flashinfer-4over6-exact")[3], 2)),
        ("TE's tuned kernel before PR #2639 (S_enc/s_b) and its BF16 factor differ from the reference",
         row(rec(kn, "te")[3], 3) != row(rec(kn, "te@pre-2639")[3], 3)
         and row(rec(kn, "te")[3], 3) != row(rec(kn, "te-fast-math")[3], 3)),
        ("row-scaled: a small row gets other scales than under the tensor's amax",
         row(rec(kn, "te")[2], 4, 2) != row(rec(kn, "te-row")[2], 4, 2)),
        ("FlashInfer per-token, fast math: an all-zero row gets the NaN scale byte (Inf * 0); exact: 0",
         row(rec(kn, "flashinfer-per-token")[2], 5, 2) == "7f7f"
         and row(rec(kn, "flashinfer-per-token-exact")[2], 5, 2) == "0000"),
        ("a static input scale below the tensor's amax/2688 clamps block scales at 448 (0x7e)",
         n7e(rec(kn, "vllm,input_scale=3a000000")[2]) > n7e(rec(kn, "vllm")[2])),
        ("TE PR #3045 floors the row amax at 1e-12: another tensor scale than te-row for a tinier row",
         rec(kn, "te-per-token@pr3045")[1].split(",")[6] != rec(kn, "te-row")[1].split(",")[6]),
        ("FlashInfer's per-token row amax skips NaN (an all-NaN row: 0) where TE's takes it",
         rec("nv-rows", "flashinfer-per-token")[0].split(",")[1] == "00000000"
         and rec("nv-rows", "te-row")[0].split(",")[1] == "7fc00000"),
    ]
    for what, ok in checks:
        assert ok, "the corpus does not show: " + what


def main():
    text = corpus()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        have = open(sys.argv[2]).read()
        if have != text:
            a, b = have.splitlines(), text.splitlines()
            for i, (p, q) in enumerate(zip(a, b)):
                if p != q:
                    print("%s:%d: committed and regenerated corpus differ:\n  committed   %s\n  regenerated %s"
                          % (sys.argv[2], i + 1, p[:160], q[:160]))
                    break
            else:
                print("%s: %d lines committed, %d regenerated" % (sys.argv[2], len(a), len(b)))
            return 1
        print("ok: %s is the documented arithmetic (%d lines)" % (sys.argv[2], len(text.splitlines())))
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
