"""A verl file-logger JSONL ({"step": N, "data": {...}} per line, verl's metric names) from the
JSON of `fp4-mismatch --json --names verl TRACE`: the per-step scalars a verl run logs.
    make_verl_log.py REPORT.json OUT.jsonl [RUN] [--reward ONSET]
With --reward ONSET the log also has what a verl run logs beside the mismatch: a reward
(critic/score/mean) that rises slowly, then falls from step ONSET + 10 on, and a grad norm
(actor/grad_norm) that is NaN at the last step, written as Python's json writes it (a bare NaN).
"""
import json
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
onset = None
if "--reward" in sys.argv:
    onset = int(sys.argv[sys.argv.index("--reward") + 1])
    args = [a for a in args if a != str(onset)]
rep = json.load(open(args[0]))
runs = rep["runs"]
run = next(r for r in runs if len(args) < 3 or r["name"] == args[2])
last = run["steps"][-1]["step"]
with open(args[1], "w") as f:
    for s in run["steps"]:
        data = {k: v for k, v in s.items() if k.startswith(("rollout_corr/", "training/")) and v is not None}
        data["actor/entropy"] = 0.5  # a metric of another kind, as in a real log
        if onset is not None:
            st = s["step"]
            data["critic/score/mean"] = round(0.55 + 0.002 * st - (0.02 * (st - onset - 10) if st > onset + 10 else 0), 6)
            data["actor/grad_norm"] = float("nan") if st == last else round(1.0 + 0.01 * st, 6)
        f.write(json.dumps({"step": s["step"], "data": data}, sort_keys=True) + "\n")
