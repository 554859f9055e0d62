#!/usr/bin/env python3
"""The functional capture on a CUDA model, bit-exact against copies taken
before the hooks (scripts/device/moe_capture_check.sh runs it on the GPU
machine).

A BF16 MoE block on the GPU, its experts written as current model code
writes them, in three implementations of the same fused weights
(gate_up_proj [E, 2I, H], down_proj [E, H, I], transformers' layout):
  loop     F.linear(x[tok], W[e]) per expert hit (transformers' eager experts)
  bmm      torch.bmm over the tokens packed per expert, capacity-padded
  grouped  torch._grouped_mm(x_sorted, W.transpose(1, 2), offs=...) (transformers'
           grouped_mm experts; where this PyTorch has it)
plus a shared expert of nn.Linear. For each: the input and the routing are
copied first (clone), the model runs once without capture and once under
fp4scope.capture_gemms with token ids, and then
  - the output is the same bits with and without the capture;
  - every expert's captured gate_up rows are the bits of the copied input rows
    of the tokens routed to it, their ids those tokens' (sequence, position);
  - down_proj rows carry the same ids in the same order;
  - every captured weight is the bits of W[e];
  - fp4-capture ls --check accepts the capture.
Prints one line per implementation and exits 1 on any difference."""
import argparse
import os
import subprocess
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "python"))
import fp4scope  # noqa: E402


def bits(t):
    return t.detach().contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


class Experts(torch.nn.Module):
    def __init__(self, e, h, i, impl):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(e, 2 * i, h) * 0.05)
        self.down_proj = torch.nn.Parameter(torch.randn(e, h, i) * 0.05)
        self.impl, self.e = impl, e

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        E = self.e
        if self.impl == "loop":
            mask = F.one_hot(top_k_index, num_classes=E).permute(2, 1, 0)
            for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
                e = e[0]
                pos, tok = torch.where(mask[e])
                gate, up = F.linear(hidden_states[tok], self.gate_up_proj[e]).chunk(2, dim=-1)
                h = F.linear(F.silu(gate) * up, self.down_proj[e])
                out.index_add_(0, tok, (h * top_k_weights[tok, pos, None]).to(out.dtype))
            return out
        flat = top_k_index.flatten()
        order = torch.sort(flat, stable=True)[1]
        tok = order // top_k_index.shape[1]
        counts = torch.bincount(flat, minlength=E)
        xs = hidden_states[tok]
        w = top_k_weights.flatten()[order, None]
        if self.impl == "grouped":
            offs = counts.cumsum(0).to(torch.int32)
            gate, up = torch._grouped_mm(xs, self.gate_up_proj.transpose(1, 2), offs=offs).chunk(2, dim=-1)
            h = torch._grouped_mm(F.silu(gate) * up, self.down_proj.transpose(1, 2), offs=offs)
            out.index_add_(0, tok, (h * w).to(out.dtype))
            return out
        # bmm: packed per expert, padded to the largest expert with zero rows
        cap = int(counts.max())
        packed = hidden_states.new_zeros(E, cap, hidden_states.shape[1])
        starts = torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])
        slot = torch.arange(len(flat), device=flat.device) - starts[flat[order]]
        packed[flat[order], slot] = xs
        gate, up = torch.bmm(packed, self.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)
        h = torch.bmm(F.silu(gate) * up, self.down_proj.transpose(1, 2))
        out.index_add_(0, tok, (h[flat[order], slot] * w).to(out.dtype))
        return out


class Block(torch.nn.Module):
    def __init__(self, e, h, i, k, impl):
        super().__init__()
        self.gate = torch.nn.Linear(h, e, bias=False)
        self.experts = Experts(e, h, i, impl)
        self.shared_expert = torch.nn.ModuleDict({"up_proj": torch.nn.Linear(h, 2 * i, bias=False),
                                                  "down_proj": torch.nn.Linear(2 * i, h, bias=False)})
        self.k = k

    def route(self, x):
        w, idx = torch.topk(torch.softmax(self.gate(x).float(), -1), self.k, dim=-1)
        return (w / w.sum(-1, keepdim=True)).to(x.dtype), idx

    def forward(self, h):
        x = h.reshape(-1, h.shape[-1])
        w, idx = self.route(x)
        s = self.shared_expert["down_proj"](F.silu(self.shared_expert["up_proj"](x)))
        return (self.experts(x, idx, w) + s).reshape(h.shape)


class Model(torch.nn.Module):
    def __init__(self, block):
        super().__init__()
        self.layers = torch.nn.ModuleList([block])

    def forward(self, h):
        return self.layers[0](h)


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device_name(dev):
    return torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"


def check(impl, args, out_dir, log):
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    E, H, I, K, B, S = args.experts, args.hidden, args.ffn, args.top_k, args.seqs, args.seq_len
    m = Model(Block(E, H, I, K, impl)).to(dev, torch.bfloat16)
    h = torch.randn(B, S, H, device=dev, dtype=torch.bfloat16)
    seq = torch.arange(B).unsqueeze(1).expand(B, S)
    pos = torch.arange(S).unsqueeze(0).expand(B, S)
    # the copies, before any hook: the input, the routing, the weights
    h_copy = h.clone()
    with torch.no_grad():
        idx_copy = m.layers[0].route(h_copy.reshape(-1, H))[1].clone()
        gu_copy = m.layers[0].experts.gate_up_proj.detach().clone()
        y_plain = m(h)
    path = os.path.join(out_dir, "capture-%s.h5" % impl)
    cap = fp4scope.Capture(path, overwrite=True)
    sync()
    t0 = time.time()
    with torch.no_grad(), cap.step(0), cap.tokens((seq, pos)), \
            fp4scope.capture_gemms(cap, m, "rollout", names="*", weights=True):
        y_cap = m(h)
    sync()
    dt = time.time() - t0
    cap.close()
    bad = []
    if not torch.equal(y_plain, y_cap):
        bad.append("the output changed under the capture")
    if not torch.equal(h, h_copy):
        bad.append("the input changed under the capture")
    f = h5py.File(path, "r")
    flat_ids = torch.stack([seq, pos], -1).reshape(-1, 2)
    hx = bits(h_copy.reshape(-1, H))
    rows_total = 0
    for e in range(E):
        tok = (idx_copy == e).any(-1).nonzero().flatten().cpu().tolist()
        site = "layers.0.experts.%d.gate_up_proj" % e
        p = "/steps/0/%s/rollout" % site
        if not tok:
            if p in f:
                bad.append("%s: captured, but no token was routed to expert %d" % (site, e))
            continue
        if p not in f:
            bad.append("%s: missing" % site)
            continue
        got, ids = f[p][()], f[p + "_ids"][()]
        want = {tuple(flat_ids[t].tolist()): hx[t] for t in tok}
        rows_total += len(got)
        if set(map(tuple, ids.tolist())) != set(want):
            bad.append("%s: ids are not the routed tokens" % site)
        elif any((r != want[tuple(i)]).any() for r, i in zip(got, ids.tolist())):
            bad.append("%s: rows differ from the copies" % site)
        dn = "/steps/0/layers.0.experts.%d.down_proj/rollout_ids" % e
        if dn not in f or (f[dn][()] != ids).any():
            bad.append("%s: down_proj rows do not follow gate_up_proj's tokens" % site)
        if (f["/weights/" + site][()] != bits(gu_copy[e])).any():
            bad.append("%s: weight differs" % site)
    sh = "/steps/0/layers.0.shared_expert.up_proj/rollout"
    if sh not in f or (f[sh][()] != hx).any():
        bad.append("shared expert: rows differ")
    f.close()
    ls = subprocess.run(["fp4-capture", "ls", "--check", path], capture_output=True, text=True)
    if ls.returncode:
        bad.append("fp4-capture ls --check: " + ls.stdout[-300:] + ls.stderr)
    line = "%-8s %s: %d expert rows of %d tokens x top-%d, capture %.3f s: %s" % (
        impl, device_name(args.device), rows_total, B * S, K, dt, "; ".join(bad) if bad else "bit-exact")
    print(line, file=log, flush=True)
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke test)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print("torch %s, cuda %s, %s" % (torch.__version__, torch.version.cuda, device_name(a.device)), flush=True)
    impls = ["loop", "bmm"] + (["grouped"] if hasattr(torch, "_grouped_mm") and a.device == "cuda" else [])
    if "grouped" not in impls:
        print("grouped: this PyTorch has no torch._grouped_mm, not run", flush=True)
    ok = all([check(i, a, a.out, sys.stdout) for i in impls])
    print("moe_capture_check: %s" % ("ok" if ok else "FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
