"""Token traces whose mismatch grows smoothly from a step on (no jump):
trainer = rollout + N(0, sigma(step)) with sigma = scale * exp(rate * max(0, step - onset)),
rollout log-probs -Exponential(1), trainer capped at 0. One CSV (step,seq,trainer_logprob,
rollout_logprob[,run]) on stdout or to FILE.
    gen_growth.py FILE --steps 300 --onset 150 --rate 0.0184 --seed 1 [--tokens 60] [--scale 0.015]
"""
import argparse
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--onset", type=int, default=150)
ap.add_argument("--rate", type=float, default=0.0)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--tokens", type=int, default=60)
ap.add_argument("--seqs", type=int, default=3)
ap.add_argument("--scale", type=float, default=0.015)
ap.add_argument("--run", default=None)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
f = sys.stdout if a.out == "-" else open(a.out, "w")
f.write("step,seq,trainer_logprob,rollout_logprob" + (",run" if a.run else "") + "\n")
per = a.tokens // a.seqs
for s in range(a.steps):
    sig = a.scale * np.exp(a.rate * max(0, s - a.onset))
    lr = -rng.exponential(1.0, a.tokens)
    lt = np.minimum(lr + rng.normal(0.0, sig, a.tokens), 0.0)
    run = ("," + a.run) if a.run else ""
    for i in range(a.tokens):
        f.write("%d,%d,%.6g,%.6g%s\n" % (s, i // per, lt[i], lr[i], run))
if f is not sys.stdout:
    f.close()
