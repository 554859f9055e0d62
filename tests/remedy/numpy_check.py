"""Independent check of the remedies: every remedy of remedy.h written again
in numpy from its definition (MXFP4 with the FLOOR and CEIL rules, NVFP4 with
TransformerEngine's recipe in 1-D and 2-D, the counter-based generator, keep,
mbs max and mse, of, rac with each residual kind, per tensor and per tile,
rac-rand, aqn with each target, the trainer kinds) and compared with the
library through tests/remedy/rlinear_npy (Y within 1e-5 of max |Y|, the
weight operand bit for bit), on random LLM-like tensors with hot channels.

Then fp4-remedy --json (on PATH) against the same quantities: every output
error against its reference, the activation and weight errors, the dead-zone
split, the noise of aqn, the extra FLOPs and bytes and the predicted time.

usage: numpy_check.py WORKDIR RLINEAR_NPY [--no-tool]"""
import json
import math
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from np_e2m1 import e2m1_rne  # noqa: E402 (tests/np_e2m1.py)

f32 = np.float32
M64 = (1 << 64) - 1


# ---- the generator (remedy.h) ------------------------------------------------
def mix(z):
    z = np.asarray(z, dtype=np.uint64)
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(seed, stream, i):
    with np.errstate(over="ignore"):
        s = np.array([(stream + 0x632BE59BD9B4E019) & M64], dtype=np.uint64)
        key = mix(np.array([seed], dtype=np.uint64) ^ mix(s))[0]
        i = np.asarray(i, dtype=np.uint64)
        b = mix(key + (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))
    return ((b >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53


def normal(seed, stream, i):
    i = np.asarray(i, dtype=np.uint64)
    u = uniform(seed, stream, 2 * i)
    v = uniform(seed, stream, 2 * i + 1)
    return np.sqrt(-2.0 * np.log(u)) * np.cos(6.283185307179586 * v)


# ---- codecs -------------------------------------------------------------------
# e2m1_rne: tests/np_e2m1.py


def e4m3_rne(v):
    """E4M3 value of v >= 0 (float32), RNE, satfinite 448."""
    v = np.asarray(v, dtype=np.float64)
    _, fe = np.frexp(np.where(v > 0, v, 1.0))
    e = fe - 1.0  # exact floor(log2 v)
    e = np.maximum(e, -6.0)
    step = np.ldexp(1.0, (e - 3).astype(int))
    q = np.round(v / step) * step
    return np.minimum(q, 448.0)


def bf16(x):
    x = np.ascontiguousarray(x, dtype=f32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return r.view(f32)


# ---- quantizers -------------------------------------------------------------------
class Spec:
    def __init__(self, fmt, rule="floor", tile2d=False, four6=None, sr=None):
        self.fmt, self.rule, self.tile2d = fmt, rule, tile2d
        self.block = 32 if fmt == "mxfp4" else 16
        self.four6 = four6   # None or (err "mae"/"mse", bound 256/448): TE's 4over6
        self.sr = sr         # None or the seed of the stochastic rounding bits


def copy_spec(sp, **kw):
    n = Spec(sp.fmt, sp.rule, sp.tile2d, sp.four6, sp.sr)
    for k, v in kw.items():
        setattr(n, k, v)
    return n


# ---- TransformerEngine's engine options ---------------------------------------------
def sr_bits(seed, n):
    """fp4s_sr_bits(seed, i) for i = 0..n-1: the top byte of mix(seed 2^32 + C + (i+1) G)."""
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) << np.uint64(32)) + np.uint64(0x632BE59BD9B4E019) + \
            (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = mix(z)
    return (z >> np.uint64(56)).astype(np.uint32)


def sr_round(v, rb):
    """TE stochastic_round_fp4_e2m1 in float32 (signed grid values)."""
    v = np.asarray(v, dtype=f32)
    u = (rb.astype(f32) * f32(1.0 / 256.0)).astype(f32)
    a = np.abs(v)
    step = np.where(a >= 4, f32(2), np.where(a >= 2, f32(1), f32(0.5))).astype(f32)
    t = (a + (u * step).astype(f32)).astype(f32)
    step_t = np.where(t >= 4, f32(2), np.where(t >= 2, f32(1), f32(0.5))).astype(f32)
    inv_t = np.where(t >= 4, f32(0.5), np.where(t >= 2, f32(1), f32(2))).astype(f32)
    q = np.minimum(np.floor((t * inv_t).astype(f32)) * step_t, f32(6)).astype(f32)
    return np.where(v < 0, -q, q).astype(f32)


def rht(x, signs):
    """Each 16-block of each row times diag(s) H16 / 4, exact, then float32, then BF16."""
    i = np.arange(16)
    pc = np.vectorize(lambda a: bin(a).count("1"))(i[:, None] & i[None, :])
    H = np.where(pc % 2 == 1, -1.0, 1.0)
    sg = np.where((signs >> i) & 1, -1.0, 1.0)
    R = sg[:, None] * H / 4
    rows, cols = x.shape
    y = (x.astype(np.float64).reshape(rows, cols // 16, 16) @ R).reshape(rows, cols)
    return bf16(y.astype(f32))


def nv_block_amax(spec, ax):
    """The NVFP4 block maxima of |x| [rows, cols / 16], each 2-D tile's repeated on its 16 rows."""
    rows, cols = ax.shape
    if spec.tile2d:
        r16 = (rows + 15) // 16
        pad = np.zeros((r16 * 16, cols), dtype=f32)
        pad[:rows] = ax
        return np.repeat(pad.reshape(r16, 16, cols // 16, 16).max(axis=(1, 3)), 16, axis=0)[:rows]
    return ax.reshape(rows, cols // 16, 16).max(axis=2)


def qdq_4over6(spec, x, ts=None):
    err_mode, bound = spec.four6
    rows, cols = x.shape
    amax = f32(np.abs(x).max()) if x.size else f32(0)
    num = f32(2688) if bound == 448 else f32(1536)
    if ts is None:
        s_enc = f32(num / amax) if amax > 0 else f32(1)
        if not np.isfinite(s_enc) or s_enc > np.finfo(f32).max:
            s_enc = np.finfo(f32).max
        if s_enc == 0:
            s_enc = f32(1)
        s_dec = f32(1) / f32(s_enc)
    else:
        s_enc, s_dec = ts
    ax = np.abs(x)
    amb = nv_block_amax(spec, ax)
    amb = amb.astype(f32)
    base = ((amb / f32(6)).astype(f32) * f32(s_enc)).astype(f32)
    cands = []
    for mult in (f32(1), f32(1.5)):
        c = np.minimum((base * mult).astype(f32), f32(448))
        sb = e4m3_rne(c).astype(f32)
        with np.errstate(divide="ignore"):
            enc = np.minimum(f32(1) / (sb * f32(s_dec)).astype(f32), np.finfo(f32).max).astype(f32)
        v = np.clip((x * np.repeat(enc, 16, axis=1)).astype(f32), -6, 6).astype(f32)
        q = (np.sign(v) * e2m1_rne(np.abs(v).astype(np.float64))).astype(f32)
        val = (q * np.repeat(sb, 16, axis=1)).astype(f32)
        val = (val * amax).astype(f32)
        val = (val / num).astype(f32)
        d = (val - x).astype(f32)
        e = (d * d).astype(f32) if err_mode == "mse" else np.abs(d)
        e = e.reshape(rows, cols // 16, 16)
        acc = np.zeros((rows, cols // 16), dtype=f32)
        for j in range(16):
            acc = (acc + e[:, :, j]).astype(f32)
        cands.append((sb, q, acc))
    (sb6, q6, e6), (sb4, q4, e4) = cands
    if spec.tile2d:
        def tree(e):
            r16 = (rows + 15) // 16
            pad = np.zeros((r16 * 16, e.shape[1]), dtype=f32)
            pad[:rows] = e
            t = pad.reshape(r16, 16, -1)
            t = (t[:, 0:8] + t[:, 8:16]).astype(f32)
            t = (t[:, 0:4] + t[:, 4:8]).astype(f32)
            t = (t[:, 0:2] + t[:, 2:4]).astype(f32)
            t = (t[:, 0] + t[:, 1]).astype(f32)
            return np.repeat(t, 16, axis=0)[:rows]
        pick = tree(e4) < tree(e6)
    else:
        pick = e4 < e6
    sb = np.where(pick, sb4, sb6)
    q = np.where(np.repeat(pick, 16, axis=1), q4, q6)
    return ((q * np.repeat(sb, 16, axis=1)).astype(f32) * f32(s_dec)).astype(f32)


def tscale(spec, amax):
    """TE NVFP4 (S_enc, S_dec) in fp32."""
    amax = f32(amax)
    if amax == 0:
        return f32(1), f32(1)
    s_enc = f32(2688) / amax
    if not np.isfinite(s_enc) or s_enc > np.finfo(f32).max:
        s_enc = np.finfo(f32).max
    if s_enc == 0:
        s_enc = f32(1)
    return f32(s_enc), f32(1) / f32(s_enc)


def qdq(spec, x, ts=None, codes=False):
    """Dequantized Q(x) (float32) of a 2-D float32 array; ts = (S_enc, S_dec)
    or None for the tensor's own. codes: also the signed E2M1 magnitudes."""
    x = np.ascontiguousarray(x, dtype=f32)
    rows, cols = x.shape
    if spec.four6 is not None:
        return qdq_4over6(spec, x, ts)
    rb = sr_bits(spec.sr, rows * cols).reshape(rows, cols) if spec.sr is not None else None
    if spec.fmt == "mxfp4":
        xb = x.reshape(rows, cols // 32, 32).astype(np.float64)
        m = np.abs(xb).max(axis=2)
        _, e = np.frexp(np.where(m > 0, m, 1.0))
        kf = (e - 1) - 2
        if spec.rule == "ceil":
            k = np.where(m / np.ldexp(1.0, kf) <= 6.0, kf, kf + 1)
        else:
            k = kf
        k = np.where(m > 0, k, -127)
        k = np.clip(k, -127, 127)
        s = np.ldexp(1.0, k)[..., None]
        if rb is not None:
            g = np.abs(sr_round((xb / s).reshape(rows, cols).astype(f32), rb)).reshape(xb.shape).astype(np.float64)
        else:
            g = e2m1_rne(np.abs(xb) / s)
        q = np.sign(xb) * g * s
        if codes:
            return q.reshape(rows, cols).astype(f32), (np.sign(xb) * g).reshape(rows, cols)
        return q.reshape(rows, cols).astype(f32)
    # NVFP4, TransformerEngine
    if ts is None:
        ts = tscale(spec, np.abs(x).max() if x.size else 0)
    s_enc, s_dec = ts
    ax = np.abs(x)
    amb = nv_block_amax(spec, ax)
    amb = amb.astype(f32)
    t = np.minimum(amb * (s_enc * (f32(1) / f32(6))), np.finfo(f32).max).astype(f32)
    sb = e4m3_rne(t).astype(f32)
    with np.errstate(divide="ignore"):
        enc = np.minimum(f32(1) / (sb * s_dec), np.finfo(f32).max).astype(f32)
    enc_e = np.repeat(enc, 16, axis=1)
    v = (x * enc_e).astype(f32)
    if rb is not None:
        qm = np.abs(sr_round(v, rb)).astype(np.float64)
    else:
        qm = e2m1_rne(np.abs(v).astype(np.float64))
    q = (np.sign(v) * qm).astype(f32)
    dq = ((q * np.repeat(sb, 16, axis=1)).astype(f32) * s_dec).astype(f32)
    if codes:
        return dq, np.sign(v) * qm
    return dq


# ---- remedy pieces -------------------------------------------------------------------
def keep_split(x, block, K):
    rows, cols = x.shape
    b = x.copy()
    mask = np.zeros(x.shape, dtype=bool)
    a = np.abs(x).reshape(rows, cols // block, block)
    # largest |x| first, ties to the lower index: stable sort on -|x|
    order = np.argsort(-a, axis=2, kind="stable")[:, :, :K]
    mb = mask.reshape(rows, cols // block, block)
    np.put_along_axis(mb, order, True, axis=2)
    b[mask] = 0
    return b, mask


def mbs_max_div(a):
    if not a > 0:
        return 1.0
    _, e = math.frexp(float(a) / 6.0)
    t = math.ldexp(6.0, e - 1)
    while t > a:
        t *= 0.5
    while t * 2 <= a:
        t *= 2
    for m in range(256):
        if t * (256 + m) / 256 >= a:
            return 1.0 + m / 256
    return 1.0


def units(spec, rows, cols, G):
    rt = 16 if spec.tile2d else 1
    for r0 in range(0, rows, rt):
        for c0 in range(0, cols, G):
            yield slice(r0, min(r0 + rt, rows)), slice(c0, min(c0 + G, cols))


def mbs_pass(spec, b, G, rule):
    if rule == "auto":
        rule = "max" if spec.fmt == "mxfp4" else "mse"
    rows, cols = b.shape
    ts = tscale(spec, np.abs(b).max() if b.size else 0) if spec.fmt == "nvfp4" else None
    if rule == "max":
        d = np.ones(b.shape, dtype=f32)
        for rs, cs in units(spec, rows, cols, G):
            d[rs, cs] = f32(mbs_max_div(float(np.abs(b[rs, cs]).max())))
        xs = (b / d).astype(f32)
        return (qdq(spec, xs, ts) * d).astype(f32)
    out = np.zeros(b.shape, dtype=f32)
    best = {}
    for j in range(16):
        c, dv = f32(2.0 ** (-j / 16)), f32(2.0 ** (j / 16))
        tmp = (qdq(spec, (b * c).astype(f32), ts) * dv).astype(f32)
        for rs, cs in units(spec, rows, cols, G):
            e = float(((tmp[rs, cs].astype(np.float64) - b[rs, cs].astype(np.float64)) ** 2).sum())
            key = (rs.start, cs.start)
            if key not in best or e < best[key]:
                best[key] = e
                out[rs, cs] = tmp[rs, cs]
    return out


def one_pass(spec, x, mbs, keep):
    b, mask = (keep_split(x, spec.block, keep) if keep else (x.copy(), None))
    if mbs:
        q = mbs_pass(spec, b, mbs[0], mbs[1])
    else:
        q = qdq(spec, b)
    if keep:
        q = q.copy()
        q[mask] = bf16(x)[mask]
    ts = tscale(spec, np.abs(b).max()) if spec.fmt == "nvfp4" else None
    return q, ts


def operand(spec, x, mbs, keep, of):
    q, ts = one_pass(spec, x, mbs, keep)
    if of is not None:
        r = (x - q).astype(f32)
        q2, _ = one_pass(spec, r, mbs, 0)
        q = (q + (f32(of) * q2).astype(f32)).astype(f32)
    return q, ts


def ceil_share(r, k):
    v = r * k
    c = math.ceil(v - 1e-9 * (v if v > 1 else 1))
    return int(min(max(c, 1), k))


def rac(spec_a, spec_w, xa, xq, wmain, wraw, ts_x, R, resid, tile, order, rand_seed):
    m, k = xa.shape
    n = wmain.shape[0]
    sel = ceil_share(R, k)
    pad = sel if resid == "bf16" else -(-sel // spec_a.block) * spec_a.block
    trows = tile if tile and tile < m else m
    tiles = -(-m // trows)
    ec = np.zeros((m, pad), dtype=f32)
    idxs = []
    for t in range(tiles):
        r0, r1 = t * trows, min((t + 1) * trows, m)
        e2 = ((xa[r0:r1].astype(np.float64) - xq[r0:r1].astype(np.float64)) ** 2).sum(axis=0)
        if rand_seed is not None:
            allc = list(range(k))
            for i in range(sel):
                u = float(uniform(rand_seed, 256 + t, i))
                j = min(i + int(u * (k - i)), k - 1)
                allc[i], allc[j] = allc[j], allc[i]
            I = np.array(allc[:sel])
            if order == "rank":
                I = I[np.lexsort((I, -e2[I]))]
            else:
                I = np.sort(I)
        else:
            ranked = np.lexsort((np.arange(k), -e2))
            I = ranked[:sel]
            if order == "index":
                I = np.sort(I)
        idxs.append(I)
        ec[r0:r1, :sel] = (xa[r0:r1][:, I] - xq[r0:r1][:, I]).astype(f32)
    if resid == "bf16":
        eq = bf16(ec)
    else:
        eq = qdq(spec_a, ec, ts_x if resid == "aug" else None)
    xhat = xq.copy()
    for t in range(tiles):
        r0, r1 = t * trows, min((t + 1) * trows, m)
        for p_, j in enumerate(idxs[t]):
            xhat[r0:r1, j] = (xhat[r0:r1, j] + eq[r0:r1, p_]).astype(f32)
    add = np.zeros((m, n))
    wts = tscale(spec_w, np.abs(wraw).max()) if spec_w.fmt == "nvfp4" else None
    for t in range(tiles):
        r0, r1 = t * trows, min((t + 1) * trows, m)
        I = idxs[t]
        wc = np.zeros((n, pad), dtype=f32)
        wc[:, :sel] = (wraw if resid == "aug" else wmain)[:, I]
        if resid == "aug":
            wc = qdq(spec_w, wc, wts)
        add[r0:r1] = eq[r0:r1].astype(np.float64) @ wc.astype(np.float64).T
    return add, xhat, sel, pad, tiles


def parse(item):
    """The subset of the grammar the cases below use."""
    d = {"kind": "rollout"}
    for comp in item.split("+"):
        f = comp.split(":")
        name = f[0]
        if name in ("bf16", "wfq", "w4a4qat", "bf16-rollout"):
            d["kind"] = name
        elif name == "none":
            pass
        elif name in ("rac", "rac-rand"):
            d["rac"] = float(f[1])
            d["resid"] = "fp4"
            d["seed"] = 1 if name == "rac-rand" else None
            for p in f[2:]:
                if p in ("bf16", "fp4", "aug"):
                    d["resid"] = p
                else:
                    d["seed"] = int(p)
        elif name == "mbs":
            d["mbs"] = (int(f[1]), f[2] if len(f) > 2 else "auto")
        elif name == "of":
            d["of"] = float(f[1]) if len(f) > 1 else 0.5
        elif name == "keep":
            d["keep"] = int(f[1])
        elif name == "4over6":
            d["four6"] = ("mse" if "mse" in f[1:] else "mae", 448 if "448" in f[1:] else 256)
        elif name == "rht":
            d["rht"] = 0xD7E8 if len(f) < 2 or f[1] == "te" else 0 if f[1] == "none" else int(f[1], 16)
        elif name == "sr":
            d["sr"] = int(f[1]) if len(f) > 1 else 1
        elif name == "aqn":
            d["aqn"] = float(f[1])
            d["aqn_seed"], d["aqn_target"] = 1, "gain"
            for p in f[2:]:
                if p in ("gain", "weight", "elem"):
                    d["aqn_target"] = p
                else:
                    d["aqn_seed"] = int(p)
    return d


def forward(item, sa, sw, X, W, tile=0, operands="both", order="index"):
    y, wq, _ = forward_ex(item, sa, sw, X, W, tile, operands, order)
    return y, wq


def forward_ex(item, sa, sw, X, W, tile=0, operands="both", order="index"):
    """Y (float64), the weight operand, and a dict of what the evaluation reports."""
    d = parse(item)
    info = {"xhat": X, "noise": None, "sel": 0, "pad": 0, "tiles": 1}
    on_a, on_w = operands != "weight", operands != "act"
    Wa = W.copy()
    if "aqn" in d and d["aqn_target"] != "gain":
        n, k = W.shape
        if d["aqn_target"] == "weight":
            z = normal(d["aqn_seed"], 1, np.arange(k))[None, :]
        else:
            z = normal(d["aqn_seed"], 2, np.arange(n * k)).reshape(n, k)
        Wa = (Wa * (1.0 + d["aqn"] * z).astype(f32)).astype(f32)
    if "aqn" in d and d["aqn_target"] != "gain":
        info["noise"] = np.linalg.norm(Wa.astype(np.float64) - W) / np.linalg.norm(W.astype(np.float64))
    kind = d["kind"]
    if kind in ("bf16", "bf16-rollout"):
        return X.astype(np.float64) @ Wa.astype(np.float64).T, Wa, info
    if kind in ("wfq", "w4a4qat"):
        wq = qdq(sw, Wa)
        xq = X if kind == "wfq" else qdq(sa, X)
        info["xhat"] = xq
        return xq.astype(np.float64) @ wq.astype(np.float64).T, wq, info
    mbs, keep, of = d.get("mbs"), d.get("keep", 0), d.get("of")
    if "four6" in d:
        if on_a:
            sa = copy_spec(sa, four6=d["four6"])
        if on_w:
            sw = copy_spec(sw, four6=d["four6"])
    if "sr" in d:
        if on_a:
            sa = copy_spec(sa, sr=d["sr"])
        if on_w:
            sw = copy_spec(sw, sr=(d["sr"] + 0x9E3779B9) % 2 ** 32)
    if "rht" in d:
        Wa = rht(Wa, d["rht"])
    wq, _ = operand(sw, Wa, mbs if on_w else None, keep if on_w else 0, of if on_w else None)
    xa = X
    if "aqn" in d and d["aqn_target"] == "gain":
        g = (1.0 + d["aqn"] * normal(d["aqn_seed"], 1, np.arange(X.shape[1]))).astype(f32)
        xa = (X * g[None, :]).astype(f32)
        info["noise"] = np.linalg.norm(xa.astype(np.float64) - X) / np.linalg.norm(X.astype(np.float64))
    if "rht" in d:
        xa = rht(xa, d["rht"])
    xq, tsx = operand(sa, xa, mbs if on_a else None, keep if on_a else 0, of if on_a else None)
    y = xq.astype(np.float64) @ wq.astype(np.float64).T
    info["xhat"] = xq
    if "rac" in d:
        add, xhat, sel, pad, tiles = rac(sa, sw, xa, xq, wq, Wa, tsx, d["rac"], d["resid"], tile, order, d["seed"])
        y = y + add
        info.update(xhat=xhat, sel=sel, pad=pad, tiles=tiles)
    return y, wq, info


# ---- the tool's evaluation (fp4-remedy --json) ------------------------------------
def dz_mask(x, block):
    """Entries the ideal-scale quantizer sends to 0 (RNE: |x| <= m_b/24 in D)."""
    rows, cols = x.shape
    a = np.abs(x.astype(np.float64)).reshape(rows, cols // block, block)
    mb = a.max(axis=2, keepdims=True)
    return ((mb == 0) | (a * 24 <= mb)).reshape(rows, cols)


def cost(item, sa, sw, m, n, k, sel, pad, tiles, operands="both"):
    """The cost of fp4-remedy(1), written again from the man page."""
    d = parse(item)
    ab, wb = 4 + 8 / sa.block, 4 + 8 / sw.block
    fb = 2.0 * m * n * k
    base_bytes = (m * k * ab + n * k * wb) / 8 + 2 * m * n
    if d["kind"] != "rollout":
        return 0.0, 2 * m * k + 2 * n * k + 2 * m * n - base_bytes, {"bf16": fb}
    on_a, on_w = operands != "weight", operands != "act"
    tx = 2 if ("of" in d and on_a) else 1
    tw = 2 if ("of" in d and on_w) else 1
    fl = {"fp4": fb * tx * tw, "bf16": 0.0, "fp32": 0.0}
    by = base_bytes + (m * k * ab / 8 if tx == 2 else 0) + (n * k * wb / 8 if tw == 2 else 0)
    if "mbs" in d:
        G, rule = d["mbs"]
        units = math.ceil(k / G)
        for on, spec, rows, t, rt in ((on_a, sa, m, tx, 1), (on_w, sw, n, tw, 16 if sw.tile2d else 1)):
            if on:
                r_ = rule if rule != "auto" else ("max" if spec.fmt == "mxfp4" else "mse")
                by += rows * k * (8 if r_ == "max" else 4) / (G * rt) * t / 8
                fl["fp32"] += 2.0 * m * n * units * tx * tw
    if "keep" in d:
        K = d["keep"]
        ka = m * (k // sa.block) * K if on_a else 0
        kw = n * (k // sw.block) * K if on_w else 0
        by += (ka + kw) * 3
        fl["bf16"] += 2.0 * n * ka + 2.0 * m * kw
    if "rht" in d:
        fl["bf16"] += 32.0 * m * k  # the activation's 16-point transforms (the weight's once per sync)
    if "rac" in d:
        if d["resid"] == "bf16":
            fl["bf16"] += 2.0 * m * n * sel
            by += 2 * m * sel + tiles * 2 * n * sel + 4 * sel * tiles
        else:
            wt = tw if d["resid"] == "fp4" else 1
            fl["fp4"] += 2.0 * m * n * pad * wt
            by += m * pad * ab / 8 + tiles * n * pad * wb / 8 * wt + 4 * sel * tiles
    return sum(fl.values()) - fb, by - base_bytes, fl


def with_sr_seed(item, seed):
    """The item with its sr component's seed replaced."""
    return "+".join("sr:%d" % seed if c.split(":")[0] == "sr" else c for c in item.split("+"))


def check_capture_mode(work, fmt, args, X, Xt, W, plain):
    """The same site as a capture (fp4-capture import: the rollout and trainer activations at step 4, the weight
    under /weights/): fp4-remedy on the capture must give the plain-tensor numbers, each field equal."""
    cap = os.path.join(work, "site.h5")
    if os.path.exists(cap):
        os.unlink(cap)
    site = "layers.0.mlp.down_proj"
    bad = 0
    for i, (arr, side, extra) in enumerate(((X, "rollout", ["--step", "4"]), (Xt, "trainer", ["--step", "4"]),
                                            (W, "weight", ["--const"]))):
        src = os.path.join(work, "imp_%s.npy" % side)
        np.save(src, arr)
        r = subprocess.run(["fp4-capture", "import", src, "-o", cap, "--side", side, "--site", site] + extra +
                           (["-a"] if i else []), capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL fp4-capture import %s: exit %d: %s" % (side, r.returncode, r.stderr.strip()))
            return 1
    r = subprocess.run(["fp4-remedy"] + args + [cap], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL fp4-remedy %s on the capture: exit %d: %s" % (fmt, r.returncode, r.stderr.strip()))
        return 1
    got = json.loads(r.stdout)
    if len(got) != len(plain):
        print("FAIL fp4-remedy %s on the capture: %d rows, %d on the tensors" % (fmt, len(got), len(plain)))
        return 1
    skip = ("source", "site", "step", "synthetic")
    for a, b in zip(got, plain):
        if a["site"] != site or a["step"] != 4:
            print("FAIL fp4-remedy %s on the capture: site %r step %r" % (fmt, a["site"], a["step"]))
            bad += 1
        for key, v in b.items():
            if key not in skip and key != "seconds" and a.get(key) != v:
                print("FAIL fp4-remedy %s %s on the capture: %s = %r, %r on the tensors" % (fmt, b["remedy"], key,
                                                                                         a.get(key), v))
                bad += 1
    print("%s fp4-remedy %s on a capture: %d remedies, every field as on the tensors" % ("ok  " if not bad else "FAIL",
                                                                                        fmt, len(plain)))
    return bad


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def check_tool(work, X, Xt, W):
    """fp4-remedy --json against the same quantities computed here."""
    xp, tp, wp = (os.path.join(work, n) for n in ("tx.npy", "tt.npy", "tw.npy"))
    np.save(xp, X)
    np.save(tp, Xt)
    np.save(wp, W)
    common = ["bf16", "wfq", "w4a4qat", "none", "bf16-rollout", "rac:0.125", "rac:0.5:bf16", "rac:0.25:aug",
              "rac-rand:0.25", "mbs:128", "of:0.5", "keep:1", "mbs:128+of:0.5", "aqn:0.05", "aqn:0.02:weight",
              "rht", "rht:0x00f3+rac:0.25", "sr", "sr:3+rac:0.25:bf16"]
    bad = 0
    for fmt, prof, sa, sw in (("mxfp4", "ocp", Spec("mxfp4", "floor"), Spec("mxfp4", "floor")),
                              ("nvfp4", "te", Spec("nvfp4"), Spec("nvfp4", tile2d=True))):
        items = common + (["4over6", "4over6:mse:448+of:0.5", "rht+4over6"] if fmt == "nvfp4" else [])
        args = ["-f", fmt, "-p", prof, "--remedy", ",".join(items), "--json"]
        r = subprocess.run(["fp4-remedy"] + args + ["--act", xp, "--trainer-act", tp, "--weight", wp],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL fp4-remedy %s: exit %d: %s" % (fmt, r.returncode, r.stderr.strip()))
            bad += 1
            continue
        out = json.loads(r.stdout)
        bad += check_capture_mode(work, fmt, args, X, Xt, W, out)
        m, k = X.shape
        n = W.shape[0]
        X64, Xt64, W64 = (a.astype(np.float64) for a in (X, Xt, W))
        qw = qdq(sw, W).astype(np.float64)
        qxt = qdq(sa, Xt).astype(np.float64)
        yb = Xt64 @ W64.T
        yo = X64 @ W64.T
        site = {"act_only_rel_error": rel(qdq(sa, X).astype(np.float64) @ W64.T, yo),
                "weight_only_rel_error": rel(X64 @ qw.T, yo), "input_rel_diff": rel(X64, Xt64)}
        for it, o in zip(items, out):
            trainer = it in ("bf16", "wfq", "w4a4qat")
            xin = Xt if trainer else X
            y, wq, info = forward_ex(it, sa, sw, xin, W)
            wq64 = wq.astype(np.float64)
            d = parse(it)
            xh = info["xhat"].astype(np.float64)
            if "rht" in d:
                # the references and the errors in the rotated coordinates: X_t R, Qa(X_t R), X R, W R
                xtr = rht(Xt, d["rht"])
                yw = xtr.astype(np.float64) @ wq64.T
                y4 = qdq(sa, xtr).astype(np.float64) @ wq64.T
                want = {"act_rel_error": rel(xh, rht(X, d["rht"]).astype(np.float64)),
                        "weight_rel_error": rel(wq64, rht(W, d["rht"]).astype(np.float64))}
                for key in ("dz_left", "rest_left"):
                    if o[key] is not None:
                        print("FAIL fp4-remedy %s %s: %s = %r, undefined in rotated coordinates" % (fmt, it, key,
                                                                                                    o[key]))
                        bad += 1
            else:
                aligned = not trainer and it != "bf16-rollout" and not np.array_equal(wq, qw.astype(f32))
                yw = Xt64 @ (wq64 if aligned else qw).T
                y4 = qxt @ (wq64 if aligned else qw).T
                q0 = (Xt if trainer else X)
                qb = qdq(sa, q0).astype(np.float64)
                D = dz_mask(q0, sa.block)
                e0, e1 = (qb - q0) ** 2, (xh - q0) ** 2
                want = {"act_rel_error": rel(xh, q0), "weight_rel_error": rel(wq64, W64),
                        "dz_left": e1[D].sum() / e0[D].sum(), "rest_left": e1[~D].sum() / e0[~D].sum()}
            want.update({"out_rel_error": rel(y, yb), "out_rel_error_vs_wfq": rel(y, yw),
                         "out_rel_error_vs_w4a4qat": rel(y, y4), "out_rel_error_vs_own": rel(y, yb if trainer else yo)})
            if "sr" in d:
                # the bias over the default 8 seeds SEED, SEED + 1, ...: the mean output against Y_bf16, and the
                # standard deviation of out_rel_error
                ys = [y] + [forward_ex(with_sr_seed(it, d["sr"] + t), sa, sw, X, W)[0] for t in range(1, 8)]
                want["sr_bias"] = rel(np.mean(ys, axis=0), yb)
                want["sr_error_spread"] = float(np.std([rel(v, yb) for v in ys], ddof=1))
            elif o["sr_bias"] is not None:
                print("FAIL fp4-remedy %s %s: sr_bias %r without sr" % (fmt, it, o["sr_bias"]))
                bad += 1
            if info["noise"] is not None:
                want["noise_rel"] = info["noise"]
            want.update(site)
            fx, bx, fl = cost(it, sa, sw, m, n, k, info["sel"], info["pad"], info["tiles"])
            want["flops_extra"], want["bytes_extra"] = fx, bx
            # the roofline on b200 (9000/4500/2250/75 TFLOPS, 8 TB/s)
            comp = (fl.get("fp4", 0) / 9000 + fl.get("bf16", 0) / 2250 + fl.get("fp32", 0) / 75) / 1e12
            want["predicted_seconds"] = max(comp, (bx + (m * k * (4 + 8 / sa.block) + n * k * (4 + 8 / sw.block)) / 8
                                                   + 2 * m * n) / 8e12)
            for key, v in want.items():
                got = o[key]
                # sgemm against float64: errors agree to ~1e-6 absolute (the FP32 accumulation)
                tol = 2e-5 * abs(v) + 1e-6 if key.startswith(("out_rel", "sr_")) else 1e-6 * abs(v) + 1e-12
                if got is None or abs(got - v) > tol:
                    print("FAIL fp4-remedy %s %s: %s = %r, numpy %r" % (fmt, it, key, got, v))
                    bad += 1
        print("%s fp4-remedy %s: %d remedies x %d fields compared" % ("ok  " if not bad else "FAIL", fmt, len(items),
                                                                      len(want)))
    return bad


def qstar(x, block):
    """Q*(x) with the ideal scale m_b/6 (RNE; ties at 0.25 into the dead zone) and the dead-zone mask."""
    rows, cols = x.shape
    xb = x.astype(np.float64).reshape(rows, cols // block, block)
    m = np.abs(xb).max(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(m > 0, 6 * np.abs(xb) / m, 0.0)
    g = e2m1_rne(t)
    q = np.where(m > 0, np.sign(xb) * g * m / 6, 0.0)
    return q.reshape(rows, cols), (g == 0).reshape(rows, cols)


def check_compare(work, X, Xt, W):
    """fp4-compare --json against numpy: the flips, the amplification and the split of D."""
    xp, tp, wp = (os.path.join(work, n) for n in ("tx.npy", "tt.npy", "tw.npy"))
    bad = 0
    for fmt, prof, sa, sw in (("mxfp4", "ocp", Spec("mxfp4", "floor"), Spec("mxfp4", "floor")),
                              ("nvfp4", "te", Spec("nvfp4"), Spec("nvfp4", tile2d=True))):
        r = subprocess.run(["fp4-compare", "-f", fmt, "-p", prof, "--act", xp, "--trainer-act", tp, "--weight", wp,
                            "--json", "--top", "0"], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL fp4-compare %s: exit %d: %s" % (fmt, r.returncode, r.stderr.strip()))
            bad += 1
            continue
        doc = json.loads(r.stdout)
        o = doc["sites"][0]
        # the same site as a capture (written by check_capture_mode): the same numbers and ranking
        cap = os.path.join(work, "site.h5")
        rc = subprocess.run(["fp4-compare", "-f", fmt, "-p", prof, "--json", "--top", "0", cap], capture_output=True,
                            text=True)
        if rc.returncode != 0:
            print("FAIL fp4-compare %s on the capture: exit %d: %s" % (fmt, rc.returncode, rc.stderr.strip()))
            bad += 1
        else:
            dc = json.loads(rc.stdout)
            oc = dc["sites"][0]
            diff = [k for k in o if k not in ("source", "site", "step", "synthetic") and oc.get(k) != o[k]]
            rk = [(a["channel"], a["component"], a["contribution"]) for a in doc["ranking"]]
            rkc = [(a["channel"], a["component"], a["contribution"]) for a in dc["ranking"]]
            if diff or rk != rkc or oc["step"] != 4:
                print("FAIL fp4-compare %s on the capture: fields %s differ, ranking %s" %
                      (fmt, diff, "differs" if rk != rkc else "equal"))
                bad += 1
        X64, Xt64 = X.astype(np.float64), Xt.astype(np.float64)
        qr, cr = qdq(sa, X, codes=True)
        qt, ct = qdq(sa, Xt, codes=True)
        qr, qt = qr.astype(np.float64), qt.astype(np.float64)
        qw = qdq(sw, W).astype(np.float64)
        d = qr - Xt64
        D = d @ qw.T
        G = D @ qw
        qs, dz = qstar(X, sa.block)
        comps = {"input": X64 - Xt64, "scale": qr - qs, "deadzone": np.where(dz, qs - X64, 0),
                 "grid": np.where(dz, 0, qs - X64)}
        m2 = float((D ** 2).sum())
        want = {"input_rel_diff": rel(X64, Xt64), "amplification": float(np.linalg.norm(qr - qt) / np.linalg.norm(X64 - Xt64)),
                "mismatch2": m2, "mismatch_rel": float(np.sqrt(m2 / ((Xt64 @ qw.T) ** 2).sum())),
                "code_flips": float((cr != ct).mean())}  # signed magnitudes: +0 and -0 are equal
        for key, v in want.items():
            if abs(o[key] - v) > 1e-9 * abs(v) + 1e-12:
                print("FAIL fp4-compare %s: %s = %r, numpy %r" % (fmt, key, o[key], v))
                bad += 1
        for c, arr in comps.items():
            contrib = (arr * G).sum(axis=0)
            got = np.array([ch["contribution"][c] for ch in o["channels"]])
            if np.abs(got - contrib).max() > 1e-9 * m2:
                print("FAIL fp4-compare %s: %s contributions differ by %g" % (fmt, c, np.abs(got - contrib).max()))
                bad += 1
            if abs(o["shares"][c] - contrib.sum() / m2) > 1e-9:
                print("FAIL fp4-compare %s: share of %s" % (fmt, c))
                bad += 1
        print("%s fp4-compare %s: flips, amplification and the split of ||D||^2 over %d channels" %
              ("ok  " if not bad else "FAIL", fmt, X.shape[1]))
    return bad


def check_logits(work):
    """fp4-remedy --logits on a generated capture against the log-probs computed here."""
    import h5py
    cap = os.path.join(work, "logits.h5")
    gen = os.path.join(os.environ["FP4S_BUILDDIR"], "tests", "remedy", "make_logits_capture")
    r = subprocess.run([gen, cap, "5"], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL make_logits_capture: %s" % r.stderr.strip())
        return 1
    items = ["none", "rac:0.25", "rac:1:bf16", "of:0.5", "keep:1", "aqn:0.05", "rht", "rht+rac:0.25", "4over6",
             "sr"]
    sa, sw = Spec("nvfp4"), Spec("nvfp4", tile2d=True)
    bad = 0
    f = h5py.File(cap, "r")
    for trainer in ("wfq", "w4a4qat"):
        r = subprocess.run(["fp4-remedy", "-f", "nvfp4", "-p", "te", "--logits", "--logits-trainer", trainer,
                            "--remedy", ",".join(items), "--json", cap], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL fp4-remedy --logits: exit %d: %s" % (r.returncode, r.stderr.strip()))
            return 1
        rows = json.loads(r.stdout)
        bad += logits_rows(f, rows, trainer, sa, sw)
    return bad


def logits_rows(f, rows, trainer, sa, sw):
    bad = 0
    for row in rows:
        if row["step"] is None:
            continue
        g = f["steps/%d" % row["step"]]
        hr, ht, w = (g["lm_head/" + k][()].astype(f32) for k in ("rollout", "trainer", "weight"))
        tok, seq = g["logprobs/token"][()], g["logprobs/seq"][()]
        y, wq, _ = forward_ex(row["remedy"], sa, sw, hr, w)
        d = parse(row["remedy"])
        if "rht" in d:
            ht = rht(ht, d["rht"])   # the weight operand is Qw(W R): the trainer's states rotated the same way
        if trainer == "w4a4qat":
            ht = qdq(sa, ht)
        yt = ht.astype(np.float64) @ wq.astype(np.float64).T     # the trainer aligned with the remedy's weight
        def lsm(z):
            m = z.max(axis=1, keepdims=True)
            lz = np.log(np.exp(z - m).sum(axis=1, keepdims=True))
            return z - m - lz
        lr, lt = lsm(y), lsm(yt)
        i = np.arange(len(tok))
        rho = lt[i, tok] - lr[i, tok]
        pr, pt = np.exp(lr), np.exp(lt)
        want = {"max_abs": np.abs(rho).max(), "mean_abs": np.abs(rho).mean(), "k3": (np.exp(rho) - rho - 1).mean(),
                "entropy_rollout": -(pr * lr).sum(axis=1).mean(), "entropy_trainer": -(pt * lt).sum(axis=1).mean(),
                "argmax_flips": (y.argmax(axis=1) != yt.argmax(axis=1)).mean()}
        for k, v in want.items():
            tol = 1e-4 * max(1.0, abs(v)) if k != "argmax_flips" else 1.5 / len(tok)
            if abs(row[k] - v) > tol:
                print("FAIL --logits step %d %s: %s = %r, numpy %r" % (row["step"], row["remedy"], k, row[k], v))
                bad += 1
    print("%s fp4-remedy --logits (trainer %s): %d rows against numpy" % ("ok  " if not bad else "FAIL", trainer,
                                                                         len(rows)))
    return bad


# ---- data ------------------------------------------------------------------------
def llm_like(rng, rows, cols, hot, scale=1.0):
    x = rng.standard_t(4, size=(rows, cols)) * np.exp(rng.normal(0, 0.7, size=cols))[None, :] * scale
    x[:, hot] *= 30
    x[rng.random((rows, cols)) < 0.02] = 0.0
    return x.astype(f32)


def main():
    work, drv = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20260515)
    M, K, N = 48, 256, 40
    X = llm_like(rng, M, K, [3, 77, 200])
    W = (rng.normal(0, 0.05, size=(N, K)) * np.exp(rng.normal(0, 0.3, size=K))[None, :]).astype(f32)
    X[5, 10] = 0.375 * 2 ** -3   # a few exact values
    W[2, 4] = 6.0 * 2 ** -5
    xp, wp = os.path.join(work, "x.npy"), os.path.join(work, "w.npy")
    np.save(xp, X)
    np.save(wp, W)
    specs = [("mxfp4", "ocp", Spec("mxfp4", "floor"), Spec("mxfp4", "floor"), "-1"),
             ("mxfp4", "ceil", Spec("mxfp4", "ceil"), Spec("mxfp4", "ceil"), "-1"),
             ("nvfp4", "te", Spec("nvfp4"), Spec("nvfp4", tile2d=True), "-1"),
             ("nvfp4", "te", Spec("nvfp4"), Spec("nvfp4"), "0")]
    items = ["bf16", "wfq", "w4a4qat", "none",
             "rac:0.125", "rac:0.25:bf16", "rac:0.1:aug", "rac:1:bf16", "rac:1", "rac-rand:0.25",
             "rac-rand:0.25:bf16:7", "mbs:128", "mbs:64:mse", "mbs:256:mse", "of", "of:1", "of:0",
             "keep:1", "keep:3", "mbs:128+of:0.5", "keep:1+mbs:64:mse+of:0.5", "aqn:0.05",
             "aqn:0.02:9:weight", "aqn:0.01:elem", "aqn:0.05+rac:0.25", "rac:0.25+of:0.5+keep:2"]
    extra = [("rac:0.25", ["--tile", "16"]), ("rac:0.2:aug", ["--tile", "20"]),
             ("rac:0.25:bf16", ["--order", "rank"]), ("rac:0.25", ["--order", "rank"]),
             ("rac-rand:0.25:5", ["--tile", "16", "--order", "rank"]),
             ("of:0.5+mbs:64:mse", ["--operands", "act"]), ("keep:2", ["--operands", "weight"])]
    engine = ["rht", "rht:none", "rht:0x00f3+rac:0.25", "sr", "sr:5+rac:0.25:bf16", "rht+sr:2"]
    engine_nv = ["4over6", "4over6:mse", "4over6:448", "4over6+rac:0.25", "rht+4over6", "4over6+of:0.5"]
    runs = []
    for fmt, prof, sa, sw, w2d in specs:
        for it in items:
            runs.append((fmt, prof, sa, sw, w2d, it, []))
        for it, opts in extra:
            runs.append((fmt, prof, sa, sw, w2d, it, opts))
        for it in engine + (engine_nv if fmt == "nvfp4" else []):
            runs.append((fmt, prof, sa, sw, w2d, it, []))
        if fmt == "nvfp4":
            runs.append((fmt, prof, sa, sw, w2d, "4over6", ["--operands", "act"]))
    bad = 0
    for fmt, prof, sa, sw, w2d, it, opts in runs:
        yp, wqp = os.path.join(work, "y.npy"), os.path.join(work, "wq.npy")
        r = subprocess.run([drv, it, fmt, prof, w2d, xp, wp, yp, wqp] + opts, capture_output=True, text=True)
        label = "%s/%s w2d=%s %s %s" % (fmt, prof, w2d, it, " ".join(opts))
        if r.returncode != 0:
            print("FAIL %s: driver exit %d: %s" % (label, r.returncode, r.stderr.strip()))
            bad += 1
            continue
        kw = {}
        for i in range(0, len(opts), 2):
            kw[{"--tile": "tile", "--operands": "operands", "--order": "order"}[opts[i]]] = \
                int(opts[i + 1]) if opts[i] == "--tile" else opts[i + 1]
        y_np, wq_np = forward(it, sa, sw, X, W, **kw)
        y_c, wq_c = np.load(yp), np.load(wqp)
        scale = np.abs(y_np).max()
        err = np.abs(y_c - y_np).max() / scale
        wbad = int((wq_c != wq_np.astype(f32)).sum())  # -0 == +0: the sign of a zero is not compared
        ok = err < 1e-5 and wbad == 0
        print("%s %s: max|dY|/max|Y| = %.3g, weight entries differing %d" % ("ok  " if ok else "FAIL", label, err,
                                                                              wbad))
        bad += not ok
    # sanity: remedies differ from each other (so the comparison is not vacuous)
    y0, _ = forward("none", specs[0][2], specs[0][3], X, W)
    y1, _ = forward("rac:0.25", specs[0][2], specs[0][3], X, W)
    yb, _ = forward("bf16", specs[0][2], specs[0][3], X, W)
    e0 = np.linalg.norm(y0 - yb) / np.linalg.norm(yb)
    e1 = np.linalg.norm(y1 - yb) / np.linalg.norm(yb)
    print("mxfp4 none %.4f, rac:0.25 %.4f (relative output error vs bf16)" % (e0, e1))
    if not e1 < e0:
        print("FAIL: rac:0.25 does not reduce the error")
        bad += 1
    if "--no-tool" in sys.argv[3:]:
        print("fp4-remedy not built (no jansson): only the library was checked")
    else:
        Xt = (X * (1 + 1e-3 * rng.standard_normal(X.shape))).astype(f32)
        bad += check_tool(work, X, Xt, W)
        bad += check_compare(work, X, Xt, W)
        bad += check_logits(work)
    print("%d failures (%d library runs and the tool)" % (bad, len(runs)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
