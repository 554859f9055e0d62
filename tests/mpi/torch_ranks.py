"""Per-rank captures from the PyTorch adapter under torch.distributed: two
processes in a gloo group, an expert-parallel MoE layer (rank r holds experts
r and r + 2), each rank hooks its own experts and writes its own file
(fp4scope.rank_path); rank 0 writes the step's log-probs gathered from both
ranks. Then fp4-capture merge joins the files: every rank's tensors are in
the merged capture bit for bit, and fp4-decompose gives the same roll-up over
the merged file as over the per-rank files.

usage: torch_ranks.py WORKDIR"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fp4scope

E, K, N, T = 4, 64, 32, 48


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleList(torch.nn.Linear(K, N, bias=False) for _ in range(E))


def worker(rank, world, wd):
    dist.init_process_group("gloo", init_method="file://" + os.path.join(wd, "pg"), rank=rank, world_size=world)
    torch.manual_seed(7)  # the same weights on every rank
    model = Experts()
    mine = [e for e in range(E) if e % world == rank]
    cap = fp4scope.Capture(fp4scope.rank_path(os.path.join(wd, "run.h5")))
    for e in mine:
        cap.hook_linears(model, "rollout", names="experts.%d" % e, weights=True)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(2):
        with cap.step(step):
            for e in mine:
                x = torch.randn(T + 5 * e, K, generator=g) * (1 + e)
                model.experts[e](x.to(torch.bfloat16).float())
            # per-token log-probs of this rank's sequences, gathered on rank 0
            lt = -torch.rand(T, generator=g)
            lr = lt - 0.01 * torch.rand(T, generator=g)
            both = [torch.zeros(2, T) for _ in range(world)]
            dist.all_gather(both, torch.stack([lt, lr]))
            if rank == 0:
                t = torch.cat([b[0] for b in both])
                r = torch.cat([b[1] for b in both])
                seq = torch.arange(world * T) // T
                cap.put_logprobs(step, t, r, seq)
    cap.close()
    dist.barrier()
    dist.destroy_process_group()


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("FAIL: %s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr))
    return p.stdout


def main():
    wd = sys.argv[1]
    world = 2
    mp.spawn(worker, args=(world, wd), nprocs=world, join=True)
    files = [fp4scope.rank_path(os.path.join(wd, "run.h5"), r) for r in range(world)]
    merged = os.path.join(wd, "run.h5")
    run("fp4-capture", "merge", *files, "-o", merged)
    with h5py.File(merged, "r") as m:
        for r, f in enumerate(files):
            with h5py.File(f, "r") as h:
                names = []
                h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
                if not names:
                    sys.exit("FAIL: %s holds no dataset" % f)
                for n in names:
                    a, b = np.asarray(h[n]), np.asarray(m[n])
                    if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                        sys.exit("FAIL: %s:%s differs in the merged capture" % (f, n))
        for e in range(E):
            if "steps/1/experts.%d/rollout" % e not in m or "weights/experts.%d" % e not in m:
                sys.exit("FAIL: expert %d missing from the merged capture" % e)
        if m["steps/0/logprobs/trainer"].shape != (world * T,):
            sys.exit("FAIL: the gathered log-probs of step 0 have shape %s" % (m["steps/0/logprobs/trainer"].shape,))
    one = json.loads(run("fp4-decompose", "--json", "--steps", "0,1", merged))["rollup"]
    per = json.loads(run("fp4-decompose", "--json", "--steps", "0,1", *files))["rollup"]
    if one != per:
        sys.exit("FAIL: the roll-up over the merged capture differs from the one over the rank files")
    mm = json.loads(run("fp4-mismatch", "--json", merged))
    print("ok: %d ranks, %d experts merged, roll-up of %d elements, %d log-prob steps"
          % (world, E, one["n"], len(mm["runs"][0]["steps"])))


if __name__ == "__main__":
    main()
