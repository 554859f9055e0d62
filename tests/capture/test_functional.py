"""Capture from what real model code runs (tools/python/fp4scope/functional.py,
engine.py), with real PyTorch on modules that mirror current MoE model code:

- transformers' fused experts (Qwen3-MoE / Qwen2-MoE since transformers v5:
  gate_up_proj [E, 2I, H], down_proj [E, H, I], a loop over the experts hit
  with torch.where on the one-hot routing, F.linear(x, W[e]), index_add_);
- gpt-oss's experts (gate_up_proj [E, H, 2I], down_proj [E, I, H], in-out
  layout: the training path x @ W[e] over the tokens of each expert, the
  inference path torch.bmm over the stream repeated for every expert and
  weighted by the dense routing);
- DeepSeek-style experts (a ModuleList of MLPs of nn.Linear) with a shared
  expert on every token;
- a TransformerEngine GroupedLinear stand-in (weight0..weight{n-1},
  forward(inp, m_splits)) and a TE Linear stand-in (a module with a weight
  that is not an nn.Linear);
- a stand-in of vLLM's linear layers (LinearBase.forward calls
  quant_method.apply(layer, x, bias), layer.prefix its path) for the engine
  capture.

Every captured row is checked bit for bit against copies of the expert inputs
taken independently of the capture (the expected rows computed from the
routing), every id against the routing, every weight against the parameter."""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn.functional as F

import fp4scope
from fp4scope import Capture, FP4SError

T = tempfile.mkdtemp()
CAP = os.environ.get("FP4S_CAPTURE_TOOL", "fp4-capture")
D, I, E, K = 32, 16, 4, 2          # hidden, expert intermediate, experts, top-k
B, S = 3, 7                        # sequences, positions


def bits(t):
    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(E, D) * 0.5)

    def forward(self, x):
        logits = F.linear(x, self.weight)
        w, idx = torch.topk(torch.softmax(logits.float(), -1), K, dim=-1)
        return (w / w.sum(-1, keepdim=True)).to(x.dtype), idx


class QwenExperts(torch.nn.Module):
    """transformers' fused experts: F.linear on W[e], the tokens of expert e."""

    def __init__(self):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(E, 2 * I, D) * 0.1)
        self.down_proj = torch.nn.Parameter(torch.randn(E, D, I) * 0.1)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        mask = F.one_hot(top_k_index, num_classes=E).permute(2, 1, 0)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero():
            e = e[0]
            pos, tok = torch.where(mask[e])
            gate, up = F.linear(hidden_states[tok], self.gate_up_proj[e]).chunk(2, dim=-1)
            h = F.linear(F.silu(gate) * up, self.down_proj[e])
            out.index_add_(0, tok, (h * top_k_weights[tok, pos, None]).to(out.dtype))
        return out


class GptOssExperts(torch.nn.Module):
    """gpt-oss: [E, in, out] stacks; x @ W[e] per expert (training), or bmm
    over the stream repeated E times with dense routing weights (inference)."""

    def __init__(self):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(E, D, 2 * I) * 0.1)
        self.down_proj = torch.nn.Parameter(torch.randn(E, I, D) * 0.1)
        self.batched = False

    def forward(self, hidden_states, router_indices=None, routing_weights=None):
        n = hidden_states.shape[0]
        if self.batched:
            x = hidden_states.repeat(E, 1).view(E, n, D)
            gate, up = torch.bmm(x, self.gate_up_proj).chunk(2, dim=-1)
            h = torch.bmm(F.silu(gate) * up, self.down_proj)
            dense = torch.zeros(n, E, dtype=hidden_states.dtype).scatter_(1, router_indices, routing_weights)
            return (h * dense.t()[..., None]).sum(0)
        out = torch.zeros_like(hidden_states)
        for e in range(E):
            tok = (router_indices == e).any(-1).nonzero().flatten()
            if len(tok) == 0:
                continue
            gate, up = (hidden_states[tok] @ self.gate_up_proj[e]).chunk(2, dim=-1)
            h = (F.silu(gate) * up) @ self.down_proj[e]
            wt = (routing_weights * (router_indices == e)).sum(-1)[tok]
            out.index_add_(0, tok, h * wt[:, None])
        return out


class PackedExperts(QwenExperts):
    """the same weights run as a capacity-padded pack per expert through bmm."""

    def forward(self, hidden_states, top_k_index, top_k_weights):
        out = torch.zeros_like(hidden_states)
        flat = top_k_index.flatten()
        order = flat.argsort()
        tok = order // top_k_index.shape[1]
        counts = torch.bincount(flat, minlength=E)
        cap = int(counts.max()) + 2                       # padding in every pack
        packed = hidden_states.new_zeros(E, cap, D)
        starts = torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])
        slot = torch.arange(len(flat)) - starts[flat[order]]
        packed[flat[order], slot] = hidden_states[tok]
        gate, up = torch.bmm(packed, self.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)
        h = torch.bmm(F.silu(gate) * up, self.down_proj.transpose(1, 2))
        w = top_k_weights.flatten()[order, None]
        out.index_add_(0, tok, h[flat[order], slot] * w)
        return out


class MLP(torch.nn.Module):
    def __init__(self, d_ff=I):
        super().__init__()
        self.gate_proj = torch.nn.Linear(D, d_ff, bias=False)
        self.up_proj = torch.nn.Linear(D, d_ff, bias=False)
        self.down_proj = torch.nn.Linear(d_ff, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DeepSeekMoE(torch.nn.Module):
    """a ModuleList of nn.Linear MLPs, tokens sorted by expert, a shared expert."""

    def __init__(self):
        super().__init__()
        self.gate = Router()
        self.experts = torch.nn.ModuleList(MLP() for _ in range(E))
        self.shared_experts = MLP(2 * I)

    def forward(self, h):
        x = h.reshape(-1, D)
        w, idx = self.gate(x)
        flat = idx.flatten()
        order = flat.argsort()
        sorted_tok = x[order // K]
        counts = torch.bincount(flat, minlength=E).tolist()
        out = torch.zeros_like(x)
        start = 0
        for e, c in enumerate(counts):
            if c:
                y = self.experts[e](sorted_tok[start:start + c])
                out.index_add_(0, order[start:start + c] // K, y * w.flatten()[order[start:start + c], None])
            start += c
        return (out + self.shared_experts(x)).reshape(h.shape)


class Block(torch.nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.gate = Router()
        self.experts = experts

    def forward(self, h):
        x = h.reshape(-1, D)
        w, idx = self.gate(x)
        return self.experts(x, idx, w).reshape(h.shape)


class Model(torch.nn.Module):
    def __init__(self, block):
        super().__init__()
        self.layers = torch.nn.ModuleList([block])

    def forward(self, h):
        return self.layers[0](h)


def ids_grid():
    seq = torch.arange(B).unsqueeze(1).expand(B, S)
    pos = torch.arange(S).unsqueeze(0).expand(B, S) + 10
    return seq, pos


def routing(model, h):
    """Each token's experts, computed from a copy of the input (no capture)."""
    with torch.no_grad():
        return model.layers[0].gate(h.reshape(-1, D))[1]


def expected(h, idx, e):
    tok = (idx == e).any(-1).nonzero().flatten()
    return h.reshape(-1, D)[tok], tok


def check_sites(path, model_name, h, idx, stack, leaf, side="rollout", in_out=False):
    """Rows, ids and weight of every expert's first GEMM, bit for bit."""
    f = h5py.File(path, "r")
    seq, pos = ids_grid()
    flat_ids = torch.stack([seq, pos], -1).reshape(-1, 2)
    for e in range(E):
        rows, tok = expected(h, idx, e)
        site = "layers.0.experts.%d.%s" % (e, leaf)
        p = "/steps/0/%s/%s" % (site, side)
        if len(tok) == 0:
            assert p not in f, p
            continue
        got = f[p][()]
        assert got.shape == (len(tok), D), (model_name, p, got.shape)
        got_ids = f[p + "_ids"][()]
        # the rows come in the model's order: compare as sets keyed by id, then row by row
        want = {tuple(flat_ids[t].tolist()): bits(rows[i]) for i, t in enumerate(tok.tolist())}
        assert set(map(tuple, got_ids.tolist())) == set(want), (model_name, p)
        for r, i in zip(got, got_ids.tolist()):
            assert (r == want[tuple(i)]).all(), (model_name, p, i)
        w = stack[e].t() if in_out else stack[e]
        assert (f["/weights/" + site][()] == bits(w)).all(), (model_name, site)
        assert f[p].attrs["expert"] == e and f[p].attrs["layer"] == 0
    f.close()


def run_capture(model, path, names="*experts*", h=None):
    if h is None:
        h = torch.randn(B, S, D, dtype=torch.bfloat16)
    copy = h.clone()
    idx = routing(model, copy)
    cap = Capture(path, overwrite=True)
    with cap.step(0), cap.tokens(ids_grid()), fp4scope.capture_gemms(cap, model, "rollout", names=names,
                                                                      weights=True):
        y = model(h)
    cap.close()
    assert torch.equal(h, copy), "the capture changed the input"
    return copy, idx, y


def test_qwen_fused():
    torch.manual_seed(2)
    m = Model(Block(QwenExperts())).to(torch.bfloat16)
    with torch.no_grad():
        y_plain = m(torch.zeros(1, 1, D, dtype=torch.bfloat16))
    p = os.path.join(T, "qwen.h5")
    h, idx, y = run_capture(m, p)
    with torch.no_grad():
        assert torch.equal(y, m(h)), "the capture changed the model's output"
    check_sites(p, "qwen", h, idx, m.layers[0].experts.gate_up_proj, "gate_up_proj")
    f = h5py.File(p, "r")
    # down_proj rows are the intermediate of the same tokens, in the same order
    for e in range(E):
        s = "/steps/0/layers.0.experts.%d" % e
        if s + ".gate_up_proj/rollout" in f:
            assert (f[s + ".down_proj/rollout_ids"][()] == f[s + ".gate_up_proj/rollout_ids"][()]).all()
            assert f[s + ".down_proj/rollout"].shape[1] == I
    assert "/steps/0/layers.0.gate/rollout" not in f   # not selected by the glob
    f.close()
    del y_plain


def test_packed_bmm_drops_padding():
    torch.manual_seed(8)
    m = Model(Block(PackedExperts())).to(torch.bfloat16)
    p = os.path.join(T, "packed.h5")
    h, idx, _ = run_capture(m, p)
    check_sites(p, "packed", h, idx, m.layers[0].experts.gate_up_proj, "gate_up_proj")
    f = h5py.File(p, "r")
    for e in range(E):
        s = "/steps/0/layers.0.experts.%d" % e
        if s + ".gate_up_proj/rollout" in f:
            assert (f[s + ".down_proj/rollout_ids"][()] == f[s + ".gate_up_proj/rollout_ids"][()]).all(), e
    f.close()


def test_gptoss_both_paths():
    torch.manual_seed(3)
    ex = GptOssExperts()
    m = Model(Block(ex)).to(torch.bfloat16)
    h0 = torch.randn(B, S, D, dtype=torch.bfloat16)
    for batched in (False, True):
        ex.batched = batched
        p = os.path.join(T, "gptoss%d.h5" % batched)
        h, idx, _ = run_capture(m, p, h=h0)
        check_sites(p, "gpt-oss batched=%s" % batched, h, idx, ex.gate_up_proj, "gate_up_proj", in_out=True)
    # both paths captured the same rows per expert (the batched one only the routed tokens)
    a, b = h5py.File(os.path.join(T, "gptoss0.h5"), "r"), h5py.File(os.path.join(T, "gptoss1.h5"), "r")
    for e in range(E):
        s = "/steps/0/layers.0.experts.%d.gate_up_proj/rollout" % e
        if s in a:
            ka = {tuple(i): r.tobytes() for i, r in zip(a[s + "_ids"][()].tolist(), a[s][()])}
            kb = {tuple(i): r.tobytes() for i, r in zip(b[s + "_ids"][()].tolist(), b[s][()])}
            assert ka == kb, e


def test_deepseek_linear_and_shared():
    torch.manual_seed(4)
    moe = DeepSeekMoE()
    m = torch.nn.Module()
    m.layers = torch.nn.ModuleList([moe])
    m = m.to(torch.bfloat16)

    def fwd(h):
        return m.layers[0](h)
    h = torch.randn(B, S, D, dtype=torch.bfloat16)
    copy = h.clone()
    with torch.no_grad():
        idx = moe.gate(copy.reshape(-1, D))[1]
    p = os.path.join(T, "ds.h5")
    cap = Capture(p)
    with cap.step(0), cap.tokens(ids_grid()), fp4scope.capture_gemms(cap, m, "trainer", names="*experts*"):
        fwd(h)
    cap.close()
    f = h5py.File(p, "r")
    seq, pos = ids_grid()
    flat_ids = torch.stack([seq, pos], -1).reshape(-1, 2)
    for e in range(E):
        rows, tok = expected(copy, idx, e)
        s = "/steps/0/layers.0.experts.%d.gate_proj/trainer" % e
        if len(tok) == 0:
            assert s not in f
            continue
        got_ids = [tuple(i) for i in f[s + "_ids"][()].tolist()]
        assert sorted(got_ids) == sorted(tuple(flat_ids[t].tolist()) for t in tok.tolist())
        want = {tuple(flat_ids[t].tolist()): bits(copy.reshape(-1, D)[t]) for t in tok.tolist()}
        for r, i in zip(f[s][()], got_ids):
            assert (r == want[i]).all()
    shared = f["/steps/0/layers.0.shared_experts.up_proj/trainer"]
    assert (shared[()] == bits(copy.reshape(-1, D))).all()
    assert f["/steps/0/layers.0.shared_experts.up_proj/trainer_ids"][()].tolist() == flat_ids.tolist()
    f.close()


def test_routing_flips_between_sides():
    """A rollout whose router differs routes some tokens elsewhere: the ids of
    each expert on each side equal that side's routing, and the flipped tokens
    are the symmetric difference."""
    torch.manual_seed(5)
    m = Model(Block(QwenExperts())).to(torch.bfloat16)
    p = os.path.join(T, "flips.h5")
    h = torch.randn(B, S, D, dtype=torch.bfloat16)
    seq, pos = ids_grid()
    flat_ids = torch.stack([seq, pos], -1).reshape(-1, 2)
    cap = Capture(p)
    routes = {}
    for side in ("trainer", "rollout"):
        if side == "rollout":
            with torch.no_grad():
                m.layers[0].gate.weight.add_(0.4 * torch.randn_like(m.layers[0].gate.weight))
        routes[side] = routing(m, h)
        with cap.step(0), cap.tokens((seq, pos)), fp4scope.capture_gemms(cap, m, side, names="*experts*"):
            m(h)
    cap.close()
    f = h5py.File(p, "r")
    flips = 0
    for e in range(E):
        got = {}
        for side in routes:
            tok = (routes[side] == e).any(-1).nonzero().flatten().tolist()
            want = set(tuple(flat_ids[t].tolist()) for t in tok)
            s = "/steps/0/layers.0.experts.%d.gate_up_proj/%s_ids" % (e, side)
            have = set(map(tuple, f[s][()].tolist())) if s in f else set()
            assert have == want, (e, side)
            got[side] = have
        flips += len(got["trainer"] ^ got["rollout"])
    f.close()
    assert flips > 0
    subprocess.run([CAP, "ls", "--check", p], check=True, capture_output=True)


class LM(torch.nn.Module):
    """Two MoE layers with residuals and an LM head. quant: the rollout, whose
    expert inputs are fake-quantized to NVFP4 (fp4scope.fake_quant, TE's
    recipe), so that its second layer's router sees other hidden states and
    flips some routes."""

    def __init__(self, V=11):
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(QwenExperts()), Block(QwenExperts())])
        self.lm_head = torch.nn.Linear(D, V, bias=False)
        self.quant = False
        self.routes = []

    def forward(self, h):
        self.routes = []
        x = h.reshape(-1, D)
        for blk in self.layers:
            w, idx = blk.gate(x)
            self.routes.append(idx.clone())
            xin = x
            if self.quant:
                xin = torch.from_numpy(fp4scope.fake_quant(x.float().numpy(), "nvfp4", "te")).to(x.dtype)
            x = x + blk.experts(xin, idx, w)
        return torch.log_softmax(self.lm_head(x).float(), -1)


def test_compare_counts_flips():
    """The issue's case: a routed MoE whose quantized rollout flips some
    routes. fp4-compare exits 0, pairs the rows by id, and counts per site the
    tokens routed on one side only and, per step, the share of the log-prob
    mismatch those tokens carry; both equal an independent count here."""
    import json
    torch.manual_seed(11)
    m = LM()
    with torch.no_grad():
        for blk in m.layers:      # experts strong enough that layer 0's quantization moves layer 1's router
            blk.experts.gate_up_proj.mul_(4)
            blk.experts.down_proj.mul_(4)
    m = m.to(torch.bfloat16)
    p = os.path.join(T, "flip_lp.h5")
    Bq, Sq = 8, 16
    seq = torch.arange(Bq).unsqueeze(1).expand(Bq, Sq)
    pos = torch.arange(Sq).unsqueeze(0).expand(Bq, Sq) + 10
    h = torch.randn(Bq, Sq, D, dtype=torch.bfloat16) * 2
    target = torch.randint(0, 11, (Bq * Sq,))
    cap = Capture(p)
    lps, routes = {}, {}
    for side in ("trainer", "rollout"):
        m.quant = side == "rollout"
        with torch.no_grad(), cap.step(0), cap.tokens((seq, pos)), \
                fp4scope.capture_gemms(cap, m, side, names="layers.*", weights=side == "trainer"):
            lp = m(h)
        lps[side] = lp[torch.arange(Bq * Sq), target]
        routes[side] = [r.clone() for r in m.routes]
    cap.put_logprobs(0, lps["trainer"], lps["rollout"], seq.reshape(-1), pos.reshape(-1))
    cap.close()
    # the independent count: per layer and expert, tokens routed there on one side only
    want, flipped = {}, set()
    flat_ids = torch.stack([seq, pos], -1).reshape(-1, 2).tolist()
    for L in range(2):
        for e in range(E):
            t_in = set((routes["trainer"][L] == e).any(-1).nonzero().flatten().tolist())
            r_in = set((routes["rollout"][L] == e).any(-1).nonzero().flatten().tolist())
            want[(L, e)] = (len(r_in - t_in), len(t_in - r_in), len(t_in & r_in))
            flipped |= t_in ^ r_in
    assert flipped, "the quantized rollout flipped no route; pick another seed"
    d = (lps["trainer"].float().double() - lps["rollout"].float().double()).abs()   # as stored: float32
    share = float(d[sorted(flipped)].sum() / d.sum())
    out = subprocess.run(["fp4-compare", "-f", "nvfp4", "-p", "te", "--json", p], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    seen = 0
    for site in j["sites"]:
        if "expert" not in site:      # the routers: every token on both sides
            assert site["rollout_only"] == site["trainer_only"] == 0 and site["m"] == Bq * Sq, site["site"]
            continue
        L, e = site["layer"], site["expert"]
        assert (site["rollout_only"], site["trainer_only"], site["m"]) == want[(L, e)], (site["site"], want[(L, e)])
        seen += 1
    assert seen == sum(1 for v in want.values() if v[0] + v[1] + v[2]) * 2   # gate_up_proj and down_proj
    fl = j["routing_flips"]
    assert len(fl) == 1 and fl[0]["flipped_tokens"] == len(flipped), (fl, len(flipped))
    assert abs(fl[0]["abs_share"] - share) < 1e-12, (fl[0]["abs_share"], share)
    assert sum(r["component"] == "routing" for r in j["ranking"]) > 0
    routing = sum(s["mismatch2"] * s["shares"]["routing"] for s in j["sites"])
    assert routing > 0
    ex = {(x["layer"], x["expert"]): x for x in j["experts"]}
    for (L, e), (ro, to, both) in want.items():
        if ro + to + both:
            assert (ex[(L, e)]["rollout_only"], ex[(L, e)]["trainer_only"]) == (2 * ro, 2 * to)
    # the table says the same
    txt = subprocess.run(["fp4-compare", "-f", "nvfp4", "-p", "te", p], capture_output=True, text=True)
    assert txt.returncode == 0 and "routing flips" in txt.stdout and "per expert" in txt.stdout, txt.stderr
    subprocess.run([CAP, "ls", "--check", p], check=True, capture_output=True)
    # the other tools take the routed capture whole: exit 0
    rep = os.path.join(T, "routed-report")
    for cmd in (["fp4-report", "-f", "nvfp4", "-p", "te", "-r", "none,rac:0.25", "--quiet", "-o", rep, p],
                ["fp4-remedy", "-f", "nvfp4", "-p", "te", "-r", "none,mbs:128", p],
                ["fp4-decompose", "-f", "nvfp4", "-p", "te", "--sites", "*experts*", p],
                ["fp4-mismatch", p]):
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, (cmd[0], out.stderr)
        assert cmd[0] != "fp4-decompose" or "per expert" in out.stdout, out.stdout
    with open(os.path.join(rep, "compare-experts.csv")) as fh:
        assert "rollout_only" in fh.readline()
    # one damaged site (sides of other lengths, no ids) is left out, said, and --strict refuses
    with Capture(p, mode="a") as c:
        c.put(0, "layers.9.bad", "trainer", np.ones((3, D), np.float32))
        c.put(0, "layers.9.bad", "rollout", np.ones((2, D), np.float32))
        c.put(fp4scope.CONST_STEP, "layers.9.bad", "weight", np.ones((4, D), np.float32))
    out = subprocess.run(["fp4-compare", "-f", "nvfp4", "-p", "te", "--json", p], capture_output=True, text=True)
    assert out.returncode == 0 and "left out" in out.stderr and "/steps/0/layers.9.bad" in out.stderr, out.stderr
    assert len(json.loads(out.stdout)["sites"]) == seen + 2
    out = subprocess.run(["fp4-compare", "-f", "nvfp4", "-p", "te", "--strict", p], capture_output=True, text=True)
    assert out.returncode == 3 and "trainer is [3, 32] but rollout is [2, 32]" in out.stderr, out.stderr


def test_te_style_modules():
    class TELinear(torch.nn.Module):          # a weight, not an nn.Linear
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(I, D))

        def forward(self, inp, is_first_microbatch=None):
            return inp @ self.weight.t()

    class GroupedLinear(torch.nn.Module):     # TE GroupedLinear: weight0..weight{n-1}
        def __init__(self):
            super().__init__()
            for i in range(E):
                self.register_parameter("weight%d" % i, torch.nn.Parameter(torch.randn(I, D)))

        def forward(self, inp, m_splits, is_first_microbatch=None):
            outs, start = [], 0
            for i, n in enumerate(m_splits):
                outs.append(inp[start:start + n] @ getattr(self, "weight%d" % i).t())
                start += n
            return torch.cat(outs)

    torch.manual_seed(6)
    m = torch.nn.Module()
    m.linear_qkv = TELinear()
    m.experts = torch.nn.Module()
    m.experts.linear_fc1 = GroupedLinear()
    m = m.to(torch.bfloat16)
    x = torch.randn(10, D, dtype=torch.bfloat16)
    splits = [3, 0, 5, 2]
    p = os.path.join(T, "te.h5")
    cap = Capture(p)
    names = fp4scope.hook_modules(cap, m, "trainer", names="*linear*", weights=True)
    assert names == ["linear_qkv", "experts.linear_fc1"], names
    with cap.step(0):
        m.linear_qkv(x)
        m.experts.linear_fc1(x, splits)
        try:
            m.experts.linear_fc1(x, [1, 2])
            raise AssertionError("wrong m_splits accepted")
        except FP4SError as e:
            assert "m_splits" in str(e)
    cap.close()
    f = h5py.File(p, "r")
    assert (f["/steps/0/linear_qkv/trainer"][()] == bits(x)).all()
    start = 0
    for i, n in enumerate(splits):
        s = "/steps/0/experts.%d.linear_fc1/trainer" % i
        if n == 0:
            assert s not in f
        else:
            assert (f[s][()] == bits(x[start:start + n])).all()
            assert (f["/weights/experts.%d.linear_fc1" % i][()] == bits(getattr(m.experts.linear_fc1, "weight%d" % i))).all()
            assert f[s].attrs["expert"] == i
        start += n
    f.close()


def test_engine_linear_method_standin():
    """vLLM's linear layers call quant_method.apply(layer, x, bias) and know
    their path as layer.prefix (vllm/model_executor/layers/linear.py): a
    stand-in with that signature, a subclass defined after the patch, and a
    subclass whose apply calls its parent's (captured once)."""
    from fp4scope import engine

    class LinearMethodBase:
        def apply(self, layer, x, bias=None):
            raise NotImplementedError

    class Unquantized(LinearMethodBase):
        def apply(self, layer, x, bias=None):
            return F.linear(x, layer.weight, bias)

    class Layer(torch.nn.Module):
        def __init__(self, prefix, method):
            super().__init__()
            self.prefix, self.quant_method = prefix, method
            self.weight = torch.nn.Parameter(torch.randn(I, D))

        def forward(self, x):
            return self.quant_method.apply(self, x, None)

    p = os.path.join(T, "engine.h5")
    step_file = os.path.join(T, "step")
    with open(step_file, "w") as f:
        f.write("4\n")
    cap = Capture(p)
    engine.patch_methods(LinearMethodBase, cap, max_rows=5, step_file=step_file)

    class FakeQuant(Unquantized):                 # defined after the patch
        def apply(self, layer, x, bias=None):
            return super().apply(layer, x, bias)

    a = Layer("model.layers.0.self_attn.qkv_proj", Unquantized())
    b = Layer("model.layers.0.mlp.down_proj", FakeQuant())
    x = torch.randn(3, D)
    a(x)
    b(x)
    b(x)          # 6 rows for a site capped at 5
    with open(step_file, "w") as f:
        f.write("5\n")
    os.utime(step_file, ns=(os.stat(step_file).st_atime_ns, os.stat(step_file).st_mtime_ns + 10**9))
    a(x)
    cap.close()
    engine._state["cap"] = None
    f = h5py.File(p, "r")
    assert f["/steps/4/model.layers.0.self_attn.qkv_proj/rollout"][()].tobytes() == x.numpy().tobytes()
    assert f["/steps/4/model.layers.0.mlp.down_proj/rollout"].shape == (5, D)   # once per call, capped
    assert f["/steps/5/model.layers.0.self_attn.qkv_proj/rollout"].shape == (3, D)
    f.close()


if __name__ == "__main__":
    test_qwen_fused()
    test_packed_bmm_drops_padding()
    test_gptoss_both_paths()
    test_deepseek_linear_and_shared()
    test_routing_flips_between_sides()
    test_compare_counts_flips()
    test_te_style_modules()
    test_engine_linear_method_standin()
    print("ok")
