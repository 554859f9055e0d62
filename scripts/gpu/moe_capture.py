#!/usr/bin/env python3
"""Capture a tiny pure-PyTorch MoE as an RL trainer (BF16) and a rollout
engine (BF16 with NVFP4 fake-quantized linear inputs), a few steps, through
the fp4scope Python adapter; then run fp4-decompose and fp4-channels on it.

The model: token embedding, L blocks of [RMSNorm -> router (top-k) ->
experts (up_proj, SiLU, down_proj)] with residuals, and an LM head. The
rollout uses the same weights; a forward pre-hook on every expert linear and
the LM head quantize-dequantizes the input with NVFP4 (TransformerEngine
recipe: 16-element blocks, E4M3 block scales, one FP32 tensor scale) through
libfp4scope, after the capture hook has recorded the unquantized input (what
a rollout engine holds before its FP4 quantization). The rollout replays the
trainer's routing (as routing-replay RL recipes do), so both sides of every
expert site hold the same tokens. Between steps the weights get a small
random update (an optimizer step). Per-token log-probs of the sampled
"response" tokens are written for both sides, and for the logits path of
fp4-remedy --logits the LM head's inputs on both sides (the final hidden
states after the norm, site lm_head), its weight and the tokens.

  python3 scripts/gpu/moe_capture.py --out DIR [--device cuda] [--steps 3] ...

Needs torch, numpy, h5py, the built libfp4scope.so (FP4SCOPE_LIB or the
source tree's build directory) and, for the analysis, fp4-decompose and
fp4-channels on PATH."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "python"))
import fp4scope  # noqa: E402


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight


class Expert(torch.nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.up_proj = torch.nn.Linear(d, f, bias=False)
        self.down_proj = torch.nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.up_proj(x)))


class MoE(torch.nn.Module):
    def __init__(self, d, f, n, k):
        super().__init__()
        self.norm = RMSNorm(d)
        self.router = torch.nn.Linear(d, n, bias=False)
        self.experts = torch.nn.ModuleList(Expert(d, f) for _ in range(n))
        self.k = k
        self.replay = None     # routing to reuse (rollout), or None
        self.last = None       # routing of the last call

    def forward(self, x):
        h = self.norm(x)
        if self.replay is None:
            logits = self.router(h).float()
            w, idx = torch.topk(torch.softmax(logits, -1), self.k, dim=-1)
            w = w / w.sum(-1, keepdim=True)
        else:
            w, idx = self.replay
        self.last = (w, idx)
        out = torch.zeros_like(x)
        for e, ex in enumerate(self.experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            out.index_add_(0, tok, (ex(h[tok]).float() * w[tok, slot, None]).to(x.dtype))
        return x + out


class TinyMoE(torch.nn.Module):
    def __init__(self, vocab, d, f, n, k, layers):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList(MoE(d, f, n, k) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.layers:
            x = blk(x)
        return self.lm_head(self.norm(x))


def nvfp4_hook(module, inputs):
    """Forward pre-hook: NVFP4 (TE) fake quantization of the linear's input."""
    x = inputs[0]
    if x.numel() == 0:
        return None
    q = fp4scope.fake_quant(x.detach().float().cpu().numpy(), "nvfp4", "te")
    return (torch.from_numpy(q).to(device=x.device, dtype=x.dtype),)


def run_tool(args, log, echo=True):
    print("$ " + " ".join(args) + ("" if echo else "   (stdout saved, not shown)"), flush=True)
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    if echo:
        print(r.stdout, end="")
    print(r.stderr, end="", file=sys.stderr)
    log.append({"cmd": args, "rc": r.returncode, "seconds": round(time.time() - t0, 3)})
    if r.returncode != 0:
        print("exit status %d" % r.returncode)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out-moe")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-tools", action="store_true", help="skip fp4-decompose / fp4-channels")
    ap.add_argument("--no-lm-head", action="store_true",
                    help="do not capture the LM head's inputs, weight and the tokens (the logits path)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    print("torch %s on %s%s; libfp4scope %s" % (torch.__version__, dev,
          " (%s)" % torch.cuda.get_device_name(0) if dev.type == "cuda" else "",
          fp4scope.lib().fp4s_version().decode()))

    model = TinyMoE(a.vocab, a.hidden, a.ffn, a.experts, a.top_k, a.layers).to(dev, torch.bfloat16)
    with torch.no_grad():  # LLM-like: a few hot channels in the embedding
        hot = torch.randperm(a.hidden)[:4]
        model.embed.weight[:, hot] *= 20
    path = os.path.join(a.out, "moe-capture.h5")
    if os.path.exists(path):
        os.remove(path)
    cap = fp4scope.Capture(path, producer="scripts/gpu/moe_capture.py")
    for k, v in vars(a).items():
        cap.attr("moe_" + k.replace("-", "_"), v if isinstance(v, (int, float)) else str(v))
    cap.attr("moe_rollout", "nvfp4 te fake-quantized inputs of every expert linear and the LM head, "
             "routing replayed from the trainer")
    if not a.no_lm_head:
        cap.attr("lm_head_site", "lm_head")
    sites = "layers.*.experts.*"
    mods = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
            and (fp4scope.capture.fnmatch.fnmatchcase(n, sites) or n == "lm_head")]
    B = a.seqs * a.seq_len
    seq = torch.arange(B) // a.seq_len
    pos = torch.arange(B) % a.seq_len
    for step in range(a.steps):
        ids = torch.randint(0, a.vocab, (B + 1,), device=dev)
        inp, tgt = ids[:-1], ids[1:]
        cap.step(step)
        with torch.no_grad():
            # trainer: BF16
            hooks = cap.hook_linears(model, "trainer", names=sites)
            if not a.no_lm_head:
                cap.hook_linears(model, "trainer", names="lm_head")
            lp_t = torch.log_softmax(model(inp).float(), -1).gather(-1, tgt[:, None])[:, 0]
            cap.remove_hooks()
            routing = [blk.last for blk in model.layers]
            # rollout: same weights, same routing, NVFP4 fake-quantized linear inputs
            cap.hook_linears(model, "rollout", names=sites)       # records the input first
            if not a.no_lm_head:
                cap.hook_linears(model, "rollout", names="lm_head")
            qh = [m.register_forward_pre_hook(nvfp4_hook) for _, m in mods]  # then quantizes it
            for blk, r in zip(model.layers, routing):
                blk.replay = r
            lp_r = torch.log_softmax(model(inp).float(), -1).gather(-1, tgt[:, None])[:, 0]
            for blk in model.layers:
                blk.replay = None
            for h in qh:
                h.remove()
            cap.remove_hooks()
            for n, m in mods:
                if n != "lm_head" or not a.no_lm_head:
                    cap.put(step, n, "weight", m.weight)
        cap.put_logprobs(step, lp_t, lp_r, seq, pos)
        if not a.no_lm_head:
            cap.put_tokens(step, tgt)
        cap.flush()
        d = (lp_r - lp_t).abs()
        counts = [int((routing[0][1] == e).sum()) for e in range(a.experts)]
        print("step %d: %d hooked linears, tokens per expert (layer 0) %s, |logp_rollout - logp_trainer| "
              "mean %.4g max %.4g" % (step, len(hooks), counts, d.mean().item(), d.max().item()), flush=True)
        with torch.no_grad():  # a small optimizer-like update
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 1e-3 * p.abs().mean())
    cap.close()
    print("wrote %s (%.1f MiB)" % (path, os.path.getsize(path) / 2**20))

    log = []
    if not a.no_tools:
        for t in ("fp4-capture", "fp4-decompose", "fp4-channels"):
            if shutil.which(t) is None:
                print("%s not on PATH: analysis not run" % t)
                sys.exit(3)
        run_tool(["fp4-capture", "ls", "--check", "--steps", "0", "--sites", "layers.0.experts.0.*", path], log)
        run_tool(["fp4-decompose", "-f", "nvfp4", "-p", "te", "--sites", "layers.0.experts.*.up_proj",
                  "--steps", "0", "--sides", "trainer,rollout", path], log)
        r = run_tool(["fp4-decompose", "-f", "nvfp4", "-p", "te", "--steps", "0:%d" % a.steps,
                      "--sides", "rollout", "--json", path], log, echo=False)
        if r.returncode == 0:
            open(os.path.join(a.out, "decompose.json"), "w").write(r.stdout)
        if not a.no_lm_head and shutil.which("fp4-remedy"):
            run_tool(["fp4-remedy", "-f", "nvfp4", "-p", "te", "--logits", "--remedy",
                      "none,rac:0.125,rac:0.25,rac:0.5,rac:0.75,rac:1,rac:1:bf16,mbs:128,of:0.5,keep:1,aqn:0.01",
                      path], log)
        spec = "%s:/steps/0/layers.0.experts.0.down_proj/rollout" % path
        run_tool(["fp4-channels", "-f", "nvfp4", "-p", "te", "--show", "10", spec], log)
        r = run_tool(["fp4-channels", "-f", "nvfp4", "-p", "te", "--json", spec], log, echo=False)
        if r.returncode == 0:
            open(os.path.join(a.out, "channels.json"), "w").write(r.stdout)
    json.dump({"args": vars(a), "tools": log}, open(os.path.join(a.out, "moe_capture.json"), "w"), indent=2)
    bad = [t for t in log if t["rc"] != 0]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
