#!/usr/bin/env python3
"""Independent numpy reference for fp4-mismatch, written from the frameworks'
formulas (verl rollout_corr_helper / debug metrics, slime, OpenRLHF, llama.cpp
percentiles), plus random trace generation.

  ref_mismatch.py gen OUT.csv|OUT.jsonl [--seed S] [--steps N] [--seqs M] [--nan K] [--mask]
  ref_mismatch.py check TRACE.csv FP4_MISMATCH_JSON [--is-cap C] [--rtol R]
  ref_mismatch.py planted OUT.csv --onset STEP [--steps N] [--seed S]

`check` recomputes every metric of every step from the CSV with numpy and
compares it with the JSON of `fp4-mismatch --json`; exit 1 on any mismatch.
"""
import json
import math
import sys

import numpy as np

CLAMP = 20.0
PCTS = [("abs_p99_9", 0.999), ("abs_p99", 0.99), ("abs_p95", 0.95), ("abs_p90", 0.90),
        ("abs_p50", 0.50), ("abs_p10", 0.10), ("abs_p1", 0.01)]


def llama_percentile(sorted_vals, f):
    # llama.cpp perplexity.cpp: p = f * (n - 1), linear interpolation
    n = len(sorted_vals)
    if f <= 0:
        return sorted_vals[0]
    if f >= 1:
        return sorted_vals[-1]
    p = f * (n - 1)
    ip = int(p)
    p -= ip
    return (1 - p) * sorted_vals[ip] + p * sorted_vals[min(ip + 1, n - 1)]


def metrics(lt, lr, seq, cap):
    """Metrics of one step from the counted tokens (1-D arrays)."""
    out = {}
    n = len(lt)
    rho = lt - lr
    a = np.abs(rho)
    out["tokens"] = n
    out["mean_abs"] = a.mean()
    out["max_abs"] = a.max()
    # verl rollout_corr/kl and OpenRLHF vllm_kl: masked_mean(rollout - old)
    out["k1"] = (lr - lt).mean()
    out["k2"] = (rho ** 2 / 2).mean()
    # verl k3_kl: exp(log_ratio) - log_ratio - 1, log_ratio not clamped
    out["k3"] = (np.exp(rho) - rho - 1).mean()
    # NeMo-RL token_mult_prob_error and policy_kl_error (k3 of the reverse ratio)
    out["mult_prob_error"] = np.exp(a).mean()
    out["k3_reverse"] = (np.exp(-rho) + rho - 1).mean()
    w = np.exp(np.clip(rho, -CLAMP, CLAMP))
    out["chi2_token"] = (w ** 2).mean() - 1
    # verl debug metrics: probs, |diff|, torch.std (unbiased), corrcoef
    pt, pr = np.exp(lt), np.exp(lr)
    d = np.abs(pt - pr)
    out["probs_diff_mean"] = d.mean()
    out["probs_diff_max"] = d.max()
    out["probs_diff_std"] = d.std(ddof=1) if n > 1 else float("nan")
    out["probs_pearson"] = np.corrcoef(np.stack([pt, pr]))[0, 1] if n > 1 else float("nan")
    # IS (verl compute_is_metrics, token level)
    out["is_mean"] = w.mean()
    out["is_max"] = w.max()
    out["is_min"] = w.min()
    out["is_frac_high"] = (w > cap).mean()
    out["is_frac_low"] = (w < 1.0 / cap).mean()
    wc = np.clip(w, 1.0 / cap, cap)
    if n > 1:
        var = (wc ** 2).mean() - wc.mean() ** 2
        out["is_std"] = math.sqrt(max(var, 0.0))
    else:
        out["is_std"] = 0.0
    wn = wc / (wc.mean() + 1e-8)
    out["is_ess"] = 1.0 / (wn ** 2).mean()
    # sequences
    ids = np.unique(seq)
    out["sequences"] = len(ids)
    mabs, sums, mt, mr = [], [], [], []
    for s in ids:
        sel = seq == s
        mabs.append(a[sel].mean())          # slime: per-sample mean, then mean over samples
        sums.append(rho[sel].sum())
        mt.append(lt[sel].mean())
        mr.append(lr[sel].mean())
    mabs, sums, mt, mr = map(np.array, (mabs, sums, mt, mr))
    out["mean_abs_per_seq"] = mabs.mean()
    out["chi2_seq"] = np.exp(2 * np.clip(sums, -CLAMP, CLAMP)).mean() - 1
    out["ppl_trainer"] = np.exp(-mt).mean()
    out["ppl_rollout"] = np.exp(-mr).mean()
    dl = mr - mt
    out["log_ppl_diff_mean"] = dl.mean()
    out["log_ppl_abs_diff"] = np.abs(dl).mean()
    out["log_ppl_diff_max"] = dl.max()
    out["log_ppl_diff_min"] = dl.min()
    out["ppl_ratio"] = np.exp(dl).mean()
    sa = np.sort(a)
    for name, f in PCTS:
        out[name] = llama_percentile(sa, f)
    return out


def read_csv(path):
    import csv
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = {k: [r[k] for r in rows] for k in rows[0].keys()}
    step = np.array([int(x) for x in cols["step"]])
    seq = np.array([int(x) for x in cols["seq"]])
    lt = np.array([float(x) for x in cols["trainer_logprob"]])
    lr = np.array([float(x) for x in cols["rollout_logprob"]])
    mask = np.array([int(x) for x in cols["mask"]]) if "mask" in cols else np.ones(len(step), dtype=int)
    return step, seq, lt, lr, mask


def read_h5(path):
    import h5py
    st, sq, a, b, m = [], [], [], [], []
    with h5py.File(path, "r") as f:
        for name in sorted(f["steps"].keys(), key=int):
            g = f["steps"][name]
            if "logprobs" not in g:
                continue
            g = g["logprobs"]
            n = g["trainer"].shape[0]
            st.append(np.full(n, int(name)))
            sq.append(g["seq"][...].astype(np.int64))
            a.append(g["trainer"][...].astype(np.float64))
            b.append(g["rollout"][...].astype(np.float64))
            m.append(g["mask"][...].astype(int) if "mask" in g else np.ones(n, dtype=int))
    return tuple(np.concatenate(x) for x in (st, sq, a, b, m))


def capture(path, onset, steps=40, seed=9, tokens=300):
    """Capture file with float32 log-probs, pos and mask, planted onset."""
    import h5py
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
        f.attrs["producer"] = "ref_mismatch.py"
        for st in range(steps):
            sigma = 0.02 * (1.0 if st < onset else 2.0 * 1.08 ** (st - onset))
            lr = -rng.exponential(1.0, tokens)
            lt = np.minimum(lr + rng.normal(0, sigma, tokens), 0.0)
            seq = np.arange(tokens) // 25
            g = f.create_group("steps/%d/logprobs" % (st * 5))
            g["trainer"] = lt.astype(np.float32)
            g["rollout"] = lr.astype(np.float32)
            g["seq"] = seq.astype(np.int64)
            g["pos"] = (np.arange(tokens) % 25).astype(np.int64)
            g["mask"] = (rng.random(tokens) > 0.05).astype(np.uint8)


def gen(path, seed=1, steps=6, seqs=9, nan=0, with_mask=False, jsonl=False):
    rng = np.random.default_rng(seed)
    rows = []
    for st in range(steps):
        for s in range(seqs):
            L = int(rng.integers(1, 40))
            lr = -rng.exponential(1.5, L)
            lr[rng.random(L) < 0.1] *= 8           # a few very unlikely tokens
            noise = rng.normal(0, 0.02 * (1 + st), L)
            noise[rng.random(L) < 0.02] *= 60        # outliers, some beyond the clamp
            lt = np.minimum(lr + noise, 0.0)
            big = rng.random(L) < 0.01               # rho beyond the +-20 clamp
            lt[big] = 0.0
            lr[big] = -float(rng.uniform(20, 30))
            for p in range(L):
                m = 1
                if with_mask and rng.random() < 0.1:
                    m = 0
                rows.append((st, 1000 * st + s, p, float(lt[p]), float(lr[p]), m))
    if nan:
        idx = rng.choice(len(rows), nan, replace=False)
        for i in idx:
            r = list(rows[i])
            r[3 + int(rng.integers(0, 2))] = float("nan")
            rows[i] = tuple(r)
    with open(path, "w") as f:
        if jsonl:
            for r in rows:
                o = {"step": r[0], "seq": r[1], "pos": r[2],
                     "trainer_logprob": None if math.isnan(r[3]) else r[3],
                     "rollout_logprob": None if math.isnan(r[4]) else r[4]}
                if with_mask:
                    o["mask"] = r[5]
                f.write(json.dumps(o) + "\n")
        else:
            f.write("step,seq,pos,trainer_logprob,rollout_logprob" + (",mask" if with_mask else "") + "\n")
            for r in rows:
                f.write("%d,%d,%d,%r,%r" % r[:5] + (",%d" % r[5] if with_mask else "") + "\n")


def planted(path, onset, steps=60, seed=7, tokens=400, run=None, append=False, scale=0.02, digits=17):
    """Flat mismatch until `onset`, then growing by 8% per step."""
    rng = np.random.default_rng(seed)
    with open(path, "a" if append else "w") as f:
        if not append:
            f.write("step,seq,trainer_logprob,rollout_logprob" + (",run" if run else "") + "\n")
        for st in range(steps):
            sigma = scale * (1.0 if st < onset else 2.0 * 1.08 ** (st - onset))
            lr = -rng.exponential(1.0, tokens)
            lt = np.minimum(lr + rng.normal(0, sigma, tokens), 0.0)
            if digits < 17:
                lr = np.minimum(np.array([float("%.*g" % (digits, x)) for x in lr]), 0.0)
                lt = np.minimum(np.array([float("%.*g" % (digits, x)) for x in lt]), 0.0)
            for i in range(tokens):
                f.write("%d,%d,%s,%s" % (st, 1000 * st + i // 20, "%.*g" % (digits, lt[i]), "%.*g" % (digits, lr[i]))
                        + (",%s" % run if run else "") + "\n")


def check(trace, jpath, cap=2.0, rtol=1e-9):
    step, seq, lt, lr, mask = read_h5(trace) if trace.endswith(".h5") else read_csv(trace)
    with open(jpath) as f:
        j = json.load(f)
    recs = {r["step"]: r for r in j["runs"][0]["steps"]}
    bad = 0
    nchk = 0
    for st in sorted(set(step.tolist())):
        sel = (step == st) & (mask == 1)
        fin = sel & np.isfinite(lt) & np.isfinite(lr)
        ref = metrics(lt[fin], lr[fin], seq[fin], cap)
        got = recs.get(st)
        if got is None:
            print("step %d missing in JSON" % st)
            bad += 1
            continue
        if got["nonfinite"] != int((sel & ~(np.isfinite(lt) & np.isfinite(lr))).sum()):
            print("step %d: nonfinite %s" % (st, got["nonfinite"]))
            bad += 1
        for k, v in ref.items():
            g = got[k]
            nchk += 1
            if g is None:
                ok = isinstance(v, float) and math.isnan(v)
            else:
                ok = math.isclose(g, v, rel_tol=rtol, abs_tol=1e-12)
            if not ok:
                print("step %d %s: fp4-mismatch %r, numpy %r" % (st, k, g, v))
                bad += 1
    print("%d values compared, %d differ" % (nchk, bad))
    return 1 if bad else 0


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("out")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--steps", type=int, default=6)
    g.add_argument("--seqs", type=int, default=9)
    g.add_argument("--nan", type=int, default=0)
    g.add_argument("--mask", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("trace")
    c.add_argument("json")
    c.add_argument("--is-cap", type=float, default=2.0)
    c.add_argument("--rtol", type=float, default=1e-9)
    p = sub.add_parser("planted")
    p.add_argument("out")
    p.add_argument("--onset", type=int, required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--run")
    p.add_argument("--append", action="store_true")
    p.add_argument("--scale", type=float, default=0.02)
    p.add_argument("--tokens", type=int, default=400)
    p.add_argument("--digits", type=int, default=17)
    h = sub.add_parser("capture")
    h.add_argument("out")
    h.add_argument("--onset", type=int, required=True)
    h.add_argument("--steps", type=int, default=40)
    h.add_argument("--seed", type=int, default=9)
    a = ap.parse_args(argv)
    if a.cmd == "capture":
        capture(a.out, a.onset, a.steps, a.seed)
        return 0
    if a.cmd == "gen":
        gen(a.out, a.seed, a.steps, a.seqs, a.nan, a.mask, a.out.endswith(".jsonl"))
        return 0
    if a.cmd == "check":
        return check(a.trace, a.json, a.is_cap, a.rtol)
    planted(a.out, a.onset, a.steps, a.seed, tokens=a.tokens, run=a.run, append=a.append, scale=a.scale,
            digits=a.digits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
