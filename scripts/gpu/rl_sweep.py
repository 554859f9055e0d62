#!/usr/bin/env python3
"""Summarise fp4-rl runs: one row per run from its --stats TSV and its
`fp4-mismatch --json` output (the onset of mean_abs), as a table and a TSV.

    rl_sweep.py DIR            reads DIR/*.tsv (and DIR/<run>.mm.json when present)

Runs named <config>.<numerics>.s<seed> (scripts/gpu/rl_sweep.sh) are compared
over the steps that every run of their config finished (the horizon: runs
stopped by the time budget keep different step counts); other names are
taken as they are.

Per run: steps done and the horizon; reward, mismatch, entropy, argmax flips,
max gap in the first and last tenth of the horizon (means); the held-out
greedy accuracy of both sides at the first and the last evaluation; the
largest gradient norm; fp4-mismatch's onset; seconds per step. Then per
config and numerics, over the seeds: the mean reward of the last tenth (and
its range), its paired difference from bf16 of the same config and seed, the
seeds whose last-tenth reward ended below their first tenth (decayed), the
trainer's last held-out accuracy, and the mismatch. Only the standard
library. Also writes DIR/summary.tsv (the per-run table)."""
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


def split_name(run):
    """(config, numerics, seed) of <config>.<numerics>.s<seed>, else (run, run, None)."""
    p = run.split(".")
    if len(p) == 3 and p[2][:1] == "s" and p[2][1:].isdigit():
        return p[0], p[1], int(p[2][1:])
    return run, run, None


def read_rows(tsv):
    return list(csv.DictReader(open(tsv), delimiter="\t"))


def summarise(tsv, mmjson, horizon=None):
    rows = read_rows(tsv)
    steps = len(rows)
    if horizon is not None:
        rows = rows[:horizon]
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
        "steps": steps, "horizon": n,
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


def fmt(v):
    return ("%.4g" % v) if isinstance(v, float) else str(v)


def aggregate(out):
    """Per (config, numerics): seeds, mean last reward and its range, paired gap to bf16, decays."""
    by = {}
    for r in out:
        c, num, seed = split_name(r["run"])
        by.setdefault((c, num), []).append((seed, r))
    base = {(split_name(r["run"])[0], split_name(r["run"])[2]): r for r in out if split_name(r["run"])[1] == "bf16"}
    rows = []
    for (c, num), lst in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] != "bf16", kv[0][1])):
        r1 = [r["reward1"] for _, r in lst]
        gaps = [r["reward1"] - base[(c, sd)]["reward1"] for sd, r in lst if (c, sd) in base and num != "bf16"]
        rows.append({
            "config": c, "numerics": num, "seeds": len(lst), "horizon": min(r["horizon"] for _, r in lst),
            "reward0": mean([r["reward0"] for _, r in lst]), "reward1": mean(r1),
            "reward1_min": min(r1), "reward1_max": max(r1),
            "gap": mean(gaps) if gaps else math.nan, "gap_n": len(gaps),
            "gap_neg": sum(1 for g in gaps if g < 0),
            "decayed": sum(1 for _, r in lst if r["reward1"] < r["reward0"]),
            "acc_t1": mean([r["acc_t1"] for _, r in lst]),
            "mm0": mean([r["mm0"] for _, r in lst]), "mm1": mean([r["mm1"] for _, r in lst]),
            "onsets": sum(1 for _, r in lst if r["onset"] not in ("none", "?")),
        })
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    tsvs = sorted(f for f in os.listdir(d) if f.endswith(".tsv") and f != "summary.tsv")
    # the horizon of each config: the fewest steps any of its runs finished
    horizon = {}
    for f in tsvs:
        c = split_name(f[:-4])[0]
        n = len(read_rows(os.path.join(d, f)))
        horizon[c] = min(horizon.get(c, n), n)
    out = []
    for f in tsvs:
        s = summarise(os.path.join(d, f), os.path.join(d, f[:-4] + ".mm.json"), horizon[split_name(f[:-4])[0]])
        if s:
            out.append(s)
    keys = ["run", "steps", "horizon", "reward0", "reward1", "mm0", "mm1", "maxgap1", "ent0", "ent1", "flip1",
            "ish0", "ish1", "acc_r0", "acc_r1", "acc_t0", "acc_t1", "gn_max", "onset", "s_step"]
    with open(os.path.join(d, "summary.tsv"), "w") as f:
        f.write("\t".join(keys) + "\n")
        for s in out:
            f.write("\t".join(str(s[k]) for k in keys) + "\n")
    print("%-36s %5s %5s %7s %7s %8s %8s %7s %6s %6s %7s %6s %6s %6s %6s %7s %6s" % (
        "run", "steps", "hor", "reward0", "reward1", "mm0", "mm1", "maxgap", "ent0", "ent1", "is>C1", "acc_t0",
        "acc_t1", "acc_r1", "flip1", "onset", "s/step"))
    for s in out:
        print("%-36s %5d %5d %7s %7s %8s %8s %7s %6s %6s %7s %6s %6s %6s %6s %7s %6s" % (
            s["run"], s["steps"], s["horizon"], fmt(s["reward0"]), fmt(s["reward1"]), fmt(s["mm0"]), fmt(s["mm1"]),
            fmt(s["maxgap1"]), fmt(s["ent0"]), fmt(s["ent1"]), fmt(s["ish1"]), fmt(s["acc_t0"]), fmt(s["acc_t1"]),
            fmt(s["acc_r1"]), fmt(s["flip1"]), s["onset"], fmt(s["s_step"])))
    print("first (0) / last (1): means over the first and last tenth of the horizon (hor: the steps every run of "
          "the config finished; at least 10 steps a tenth); mm: mean |lp_t - lp_r|; maxgap: its max per step; "
          "is>C: fraction of tokens with exp(lp_t - lp_r) > 2; acc: held-out greedy accuracy at the first and last "
          "evaluation within the horizon (_t trainer numerics, _r rollout); onset: fp4-mismatch's, on mean_abs "
          "(over every step done)")
    agg = aggregate(out)
    if any(a["seeds"] > 1 or a["gap_n"] for a in agg):
        print()
        print("%-14s %-24s %5s %5s %7s %7s %13s %14s %7s %6s %8s %8s %6s" % (
            "config", "numerics", "seeds", "hor", "reward0", "reward1", "reward1 range", "vs bf16 (<0)",
            "decayed", "acc_t1", "mm0", "mm1", "onsets"))
        for a in agg:
            gap = "%+.3f (%d/%d)" % (a["gap"], a["gap_neg"], a["gap_n"]) if a["gap_n"] else "-"
            print("%-14s %-24s %5d %5d %7.3f %7.3f %6.3f-%-6.3f %14s %4d/%-2d %6.3f %8.2g %8.2g %3d/%-2d" % (
                a["config"], a["numerics"], a["seeds"], a["horizon"], a["reward0"], a["reward1"],
                a["reward1_min"], a["reward1_max"], gap, a["decayed"], a["seeds"], a["acc_t1"], a["mm0"],
                a["mm1"], a["onsets"], a["seeds"]))
        print("per config and numerics, means over the seeds; vs bf16: mean paired difference of the last-tenth "
              "reward from bf16 of the same config and seed (in brackets: seeds below bf16 / seeds paired); "
              "decayed: seeds whose last tenth ended below their first tenth; onsets: seeds where fp4-mismatch "
              "found an onset")


if __name__ == "__main__":
    main()
