"""Independent check of fp4-decompose and fp4-channels: MXFP4 (FLOOR and CEIL
scale rules, RNE elements, OCP zero-block code 0) quantized and decomposed in
numpy float64 from the definitions, compared with the tools' --json on random
and adversarial tensors (ties at every E2M1 midpoint, zeros, huge, tiny,
subnormal, NaN and Inf blocks).

usage: numpy_check.py WORKDIR   (fp4-decompose and fp4-channels on PATH)"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from np_e2m1 import e2m1_rne as rne_grid  # noqa: E402 (tests/np_e2m1.py)


def mx_quant(x, rule):
    """Q(x) of MXFP4 blocks of 32 along the last axis; returns q, scale, codes."""
    rows, cols = x.shape
    xb = x.reshape(rows, cols // 32, 32).astype(np.float64)
    m = np.abs(xb).max(axis=2)
    _, e = np.frexp(np.where(m > 0, m, 1.0))
    kfloor = (e - 1) - 2                     # floor(log2 m) - 2, exact
    if rule == "ceil":
        k = np.where(m / np.ldexp(1.0, kfloor) <= 6.0, kfloor, kfloor + 1)
    else:
        k = kfloor
    k = np.where(m > 0, k, -127)             # OCP zero block: code 0
    k = np.clip(k, -127, 127)
    s = np.ldexp(1.0, k)
    t = np.abs(xb) / s[..., None]
    g = rne_grid(t)
    q = np.sign(xb) * g * s[..., None]
    return q.reshape(rows, cols), s, k + 127, g.reshape(rows, cols)


def decompose(x, rule):
    rows, cols = x.shape
    xf = x.astype(np.float64)
    xb = xf.reshape(rows, cols // 32, 32)
    finite_block = np.isfinite(xb).all(axis=2)
    xs = np.where(np.isfinite(xb), xb, 0.0)
    q, s, code, g = mx_quant(xs.reshape(rows, cols), rule)
    qb = q.reshape(rows, cols // 32, 32)
    gb = g.reshape(rows, cols // 32, 32)
    m = np.abs(xs).max(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(m[..., None] > 0, 6.0 * np.abs(xs) / m[..., None], 0.0)
    gs = np.where(m[..., None] > 0, rne_grid(t), 0.0)
    qs = np.sign(xs) * gs * m[..., None] / 6.0
    e = qb - xs
    es = qb - qs
    est = qs - xs
    dz = gs == 0
    edz = np.where(dz, est, 0.0)
    eg = np.where(dz, 0.0, est)
    fb = finite_block[..., None] & np.ones_like(dz)
    uf = (code == 0) & (m > 0)
    clip = (gb == 6) & (np.abs(xs) > np.abs(qb)) & ~uf[..., None]

    def S(a):
        return float(np.sum(np.where(fb, a, 0.0)))

    gam_ok = finite_block & (m > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        gam = np.where(gam_ok, 6.0 * s / np.where(m > 0, m, 1.0), np.nan)
    res = {
        "n": int(fb.sum()),
        "energy_x": S(xs * xs),
        "energy_total": S(e * e),
        "energy_scale": S(es * es),
        "energy_deadzone": S(edz * edz),
        "energy_grid": S(eg * eg),
        "cross_scale_grid": 2 * S(es * eg),
        "cross_scale_deadzone": 2 * S(es * edz),
        "energy_scale_clip": S(np.where(clip, es * es, 0.0)),
        "energy_scale_underflow": S(np.where(uf[..., None], es * es, 0.0)),
        "deadzone": int((dz & fb).sum()),
        "deadzone_ties": int(((t == 0.25) & fb).sum()),
        "zeros": int(((xs == 0) & fb).sum()),
        "clipped": int((clip & fb).sum()),
        "blocks": int(finite_block.sum()),
        "zero_blocks": int((finite_block & (m == 0)).sum()),
        "underflow_blocks": int((finite_block & uf).sum()),
        "nan": int(np.isnan(x).sum()),
        "inf": int(np.isinf(x).sum()),
        "nonfinite_blocks": int((~finite_block).sum()),
        "gamma_mean": float(np.nanmean(gam)) if gam_ok.any() else None,
        "gamma_min": float(np.nanmin(gam)) if gam_ok.any() else None,
        "gamma_max": float(np.nanmax(gam)) if gam_ok.any() else None,
        "delta_mean": float(np.nanmean(np.log2(gam))) if gam_ok.any() else None,
    }
    ch_e = np.where(fb, e * e, 0.0).reshape(rows, cols).sum(axis=0)
    row_e = np.where(fb, e * e, 0.0).reshape(rows, cols).sum(axis=1)
    blk = {k: np.where(fb, v, 0.0).sum(axis=2).ravel() for k, v in
           (("energy_total", e * e), ("energy_scale", es * es), ("energy_deadzone", edz * edz),
            ("energy_grid", eg * eg))}
    blk["deadzone"] = (dz & fb).sum(axis=2).ravel()
    return res, ch_e, row_e, blk


def close(a, b, tol):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(abs(b), 1e-300) or a == b


def check(name, x, rule, workdir):
    path = os.path.join(workdir, name + ".npy")
    np.save(path, x)
    want, ch_e, row_e, blk = decompose(x, rule)
    bad = []
    for by in ("tensor", "channel", "row", "block"):
        out = subprocess.run(["fp4-decompose", "-p", "ocp", "--scale-rule", rule, "--by", by, "--json", path],
                             capture_output=True, text=True)
        if out.returncode != 0:
            bad.append(f"{name}/{rule}/{by}: exit {out.returncode}: {out.stderr.strip()}")
            continue
        got = json.loads(out.stdout)
        summ = got["inputs"][0]["summary"]
        if by == "tensor":
            for k, v in want.items():
                tol = 0 if isinstance(v, int) else 1e-9
                if k.startswith("gamma") or k.startswith("delta"):
                    tol = 1e-12
                if isinstance(v, int):
                    ok = summ[k] == v
                else:
                    ok = close(summ[k], v, tol)
                if not ok:
                    bad.append(f"{name}/{rule}: {k} tool {summ[k]!r} numpy {v!r}")
        elif by == "block":
            groups = got["inputs"][0]["groups"]
            for gi, gr in enumerate(groups):
                for k, ref in blk.items():
                    v = float(ref[gi])
                    if not (gr[k] == v if k == "deadzone" else close(gr[k], v, 1e-9)):
                        bad.append(f"{name}/{rule}/block {gi}: {k} tool {gr[k]} numpy {v}")
        else:
            groups = got["inputs"][0]["groups"]
            ref = ch_e if by == "channel" else row_e
            if len(groups) != len(ref):
                bad.append(f"{name}/{rule}/{by}: {len(groups)} groups, expected {len(ref)}")
                continue
            for gi, gr in enumerate(groups):
                if not close(gr["energy_total"], float(ref[gi]), 1e-9):
                    bad.append(f"{name}/{rule}/{by}: group {gi} energy_total {gr['energy_total']} numpy {ref[gi]}")
                    break
    # fp4-channels ranks by residual norm = sqrt of the channel energy
    if np.isfinite(x).all():
        out = subprocess.run(["fp4-channels", "-p", "ocp", "--scale-rule", rule, "--json", "--top", "3", path],
                             capture_output=True, text=True)
        if out.returncode != 0:
            bad.append(f"{name}/{rule}/channels: exit {out.returncode}: {out.stderr.strip()}")
        else:
            got = json.loads(out.stdout)
            order = sorted(range(len(ch_e)), key=lambda j: (-np.sqrt(ch_e[j]), j))
            if [c["channel"] for c in got["channels"][:3]] != order[:3]:
                bad.append(f"{name}/{rule}/channels: top 3 {[c['channel'] for c in got['channels'][:3]]} "
                           f"numpy {order[:3]}")
            total = ch_e.sum()
            for p in got["coverage"]:
                k = p["channels"]
                share = float(sum(ch_e[j] for j in order[:k]) / total) if total > 0 else None
                if not close(p["share"], share, 1e-9):
                    bad.append(f"{name}/{rule}/channels: coverage {p['ratio']} share {p['share']} numpy {share}")
    return bad


def adversarial(rng, rows, cols):
    x = np.zeros((rows, cols), dtype=np.float32)
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.2, 6.0, 0.0])
    for r in range(rows):
        for b in range(cols // 32):
            kind = (r + b) % 8
            sl = x[r, b * 32:(b + 1) * 32]
            m = np.float32(1.5 * 2.0 ** int(rng.integers(-10, 10)))
            if kind == 0:
                vals = (m / np.float32(6.0)) * mids[np.arange(32) % 10].astype(np.float32)
                vals = vals * np.where(np.arange(32) % 2 == 1, -1, 1)
                vals[0] = m
                sl[:] = vals
            elif kind == 1:
                sl[:] = 0
            elif kind == 2:
                sl[:] = rng.standard_normal(32) * 1e37
            elif kind == 3:
                sl[:] = (rng.standard_normal(32) * 1e-39).astype(np.float32)
            elif kind == 4:
                sl[:] = rng.standard_normal(32)
                sl[5] = np.nan
            elif kind == 5:
                sl[:] = rng.standard_normal(32)
                sl[7] = -np.inf
            elif kind == 6:
                sl[:] = rng.standard_normal(32) * 3e-6
            else:
                sl[:] = rng.standard_normal(32) * 0.01
                sl[0] = 2688.0
    return x


def main():
    workdir = sys.argv[1]
    rng = np.random.default_rng(2026)
    cases = {
        "gauss": rng.standard_normal((48, 256)).astype(np.float32),
        "laplace_outliers": (rng.laplace(size=(32, 128)) * np.where(rng.random((32, 128)) < 0.01, 50, 1)
                             ).astype(np.float32),
        "adversarial": adversarial(rng, 16, 256),
    }
    bad = []
    for name, x in cases.items():
        for rule in ("floor", "ceil"):
            bad += check(name, x, rule, workdir)
    if bad:
        print("\n".join(bad[:40]))
        print(f"FAIL: {len(bad)} disagreements")
        sys.exit(1)
    print("numpy and fp4-decompose/fp4-channels agree on", ", ".join(cases))


if __name__ == "__main__":
    main()
