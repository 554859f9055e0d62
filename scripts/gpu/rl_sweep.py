#!/usr/bin/env python3
"""Summarise fp4-rl runs: one row per run from its --stats TSV and its
`fp4-mismatch --json` output (the onset of mean_abs), as a table and a TSV.

    rl_sweep.py DIR            reads DIR/*.tsv (and DIR/<run>.mm.json when present)

Columns: steps done; reward, mismatch, entropy, argmax flips, max gap in the
first and last tenth of the steps (means); the held-out greedy accuracy of
both sides at the first and the last evaluation; the largest gradient norm;
fp4-mismatch's onset; seconds per step. Only the standard library."""
import csv
import json
import math
import os
import sys


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def mean(v):
    v = [x for x in v if not math.isnan(x)]
    return sum(v) / len(v) if v else math.nan


def summarise(tsv, mmjson):
    rows = list(csv.DictReader(open(tsv), delimiter="\t"))
    n = len(rows)
    if not n:
        return None
    w = max(1, min(n, max(10, n // 10)))
    col = lambda k: [fnum(r.get(k)) for r in rows]
    first = lambda k: mean(col(k)[:w])
    last = lambda k: mean(col(k)[-w:])
    evals = [(fnum(r["acc_rollout"]), fnum(r["acc_trainer"])) for r in rows if not math.isnan(fnum(r["acc_rollout"]))]
    onset = None
    if mmjson and os.path.exists(mmjson):
        try:
            j = json.load(open(mmjson))
            o = j["runs"][0].get("onset") or {}
            onset = o.get("step")
        except (ValueError, KeyError, IndexError):
            onset = "?"
    return {
        "run": os.path.basename(tsv)[:-4],
        "steps": n,
        "reward0": first("reward"), "reward1": last("reward"),
        "mm0": first("mismatch"), "mm1": last("mismatch"),
        "maxgap1": last("max_mismatch"),
        "ent0": first("entropy"), "ent1": last("entropy"),
        "flip1": last("flip_frac"),
        "ish0": first("is_frac_high"), "ish1": last("is_frac_high"),
        "acc_r0": evals[0][0] if evals else math.nan, "acc_r1": evals[-1][0] if evals else math.nan,
        "acc_t0": evals[0][1] if evals else math.nan, "acc_t1": evals[-1][1] if evals else math.nan,
        "gn_max": max([x for x in col("grad_norm") if not math.isnan(x)] or [math.nan]),
        "onset": "none" if onset is None else onset,
        "s_step": mean(col("t_total")),
    }


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    out = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".tsv") and f != "summary.tsv":
            s = summarise(os.path.join(d, f), os.path.join(d, f[:-4] + ".mm.json"))
            if s:
                out.append(s)
    keys = ["run", "steps", "reward0", "reward1", "mm0", "mm1", "maxgap1", "ent0", "ent1", "flip1", "ish0", "ish1",
            "acc_r0", "acc_r1", "acc_t0", "acc_t1", "gn_max", "onset", "s_step"]
    with open(os.path.join(d, "summary.tsv"), "w") as f:
        f.write("\t".join(keys) + "\n")
        for s in out:
            f.write("\t".join(str(s[k]) for k in keys) + "\n")
    fmt = lambda v: ("%.4g" % v) if isinstance(v, float) else str(v)
    print("%-28s %5s %7s %7s %8s %8s %7s %6s %6s %7s %6s %6s %6s %6s %7s %6s" % (
        "run", "steps", "reward0", "reward1", "mm0", "mm1", "maxgap", "ent0", "ent1", "is>C1", "acc_t0",
        "acc_t1", "acc_r1", "flip1", "onset", "s/step"))
    for s in out:
        print("%-28s %5d %7s %7s %8s %8s %7s %6s %6s %7s %6s %6s %6s %6s %7s %6s" % (
            s["run"], s["steps"], fmt(s["reward0"]), fmt(s["reward1"]), fmt(s["mm0"]), fmt(s["mm1"]),
            fmt(s["maxgap1"]), fmt(s["ent0"]), fmt(s["ent1"]), fmt(s["ish1"]), fmt(s["acc_t0"]), fmt(s["acc_t1"]),
            fmt(s["acc_r1"]), fmt(s["flip1"]), s["onset"], fmt(s["s_step"])))
    print("first (0) / last (1): means over the first and last tenth of the steps done (at least 10 steps); "
          "mm: mean |lp_t - lp_r|; maxgap: its max per step; is>C: fraction of tokens with exp(lp_t - lp_r) > 2; "
          "acc: held-out greedy accuracy at the first and last evaluation (_t trainer numerics, _r rollout); "
          "onset: fp4-mismatch's, on mean_abs")


if __name__ == "__main__":
    main()
