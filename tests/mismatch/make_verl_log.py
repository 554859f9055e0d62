"""A verl file-logger JSONL ({"step": N, "data": {...}} per line, verl's metric names) from the
JSON of `fp4-mismatch --json --names verl TRACE`: the per-step scalars a verl run logs.
    make_verl_log.py REPORT.json OUT.jsonl [RUN]
"""
import json
import sys

rep = json.load(open(sys.argv[1]))
runs = rep["runs"]
run = next(r for r in runs if len(sys.argv) < 4 or r["name"] == sys.argv[3])
with open(sys.argv[2], "w") as f:
    for s in run["steps"]:
        data = {k: v for k, v in s.items() if k.startswith(("rollout_corr/", "training/")) and v is not None}
        data["actor/entropy"] = 0.5  # a metric of another kind, as in a real log
        f.write(json.dumps({"step": s["step"], "data": data}, sort_keys=True) + "\n")
