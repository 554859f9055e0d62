"""fp4-ckpt on a checkpoint made from a real PyTorch MoE (Debian's python3-torch).

A small model (attention q/k/v/o, a router and routed experts of nn.Linear, as
DeepSeek- and Qwen2-MoE-style code has them), its parameters in BF16:

- its weights exported in ModelOpt's NVFP4 layout (two shards, an index,
  hf_quant_config.json; q/k/v and each expert's gate/up share the scale_2 of
  the fused GEMM, as ModelOpt exports them; tests/ckpt/make_ckpt.py holds
  ModelOpt's arithmetic), and its BF16 state dict as the trainer's weights;
- fp4-ckpt dequant equals, bit for bit, a dequantization computed here in
  torch from the stored bytes (E2M1 table, E4M3 decoded by its fields);
- fp4-ckpt check -p modelopt finds every scale and code equal, and names the
  block of a code planted in one expert;
- the audit, with the trainer side a capture of the model's own forward pass
  (fp4scope.Capture.hook_linears on the layers the trainer fake-quantizes),
  finds the planted one-sided layer: the trainer quantizes o_proj, the
  checkpoint keeps it in BF16 and its config excludes it."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import fp4scope

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ckpt import modelopt_nvfp4, t_f32, t_u8, write_st  # noqa: E402

T = tempfile.mkdtemp()
CKPT = os.environ.get("FP4S_CKPT_TOOL", "fp4-ckpt")
H, I, E = 64, 32, 3


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(H, H, bias=False)
        self.k_proj = torch.nn.Linear(H, H // 2, bias=False)
        self.v_proj = torch.nn.Linear(H, H // 2, bias=False)
        self.o_proj = torch.nn.Linear(H // 2, H, bias=False)

    def forward(self, x):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        a = torch.softmax(q[..., : H // 2] @ k.transpose(-1, -2) / 4, -1) @ v
        return x + self.o_proj(a)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(H, I, bias=False)
        self.up_proj = torch.nn.Linear(H, I, bias=False)
        self.down_proj = torch.nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(H, E, bias=False)
        self.experts = torch.nn.ModuleList([MLP() for _ in range(E)])

    def forward(self, x):
        flat = x.reshape(-1, H)
        p = torch.softmax(self.gate(flat).float(), -1)
        w, idx = torch.topk(p, 2, dim=-1)
        out = torch.zeros_like(flat)
        for e, ex in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                out.index_add_(0, tok, ex(flat[tok]) * w[tok, slot, None].to(flat.dtype))
        return x + out.reshape(x.shape)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attn()
        self.mlp = MoE()

    def forward(self, x):
        return self.mlp(self.self_attn(x))


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer()])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return x


def run(*args, code=0):
    r = subprocess.run([CKPT] + list(args), capture_output=True, text=True)
    if r.returncode != code:
        sys.exit("FAIL: fp4-ckpt %s exited %d, expected %d\n%s%s" % (" ".join(args), r.returncode, code,
                                                                   r.stdout, r.stderr))
    return r.stdout


def f32(t):
    """a BF16 parameter as float32 numpy (exact)."""
    return t.detach().float().numpy()


def torch_dequant(codes_u8, scales_u8, s2):
    """ModelOpt's dequantization from the stored bytes, in torch: element 2i
    in the low nibble, the E2M1 magnitude index and sign bit 3; the E4M3 byte
    decoded from its exponent and mantissa; value = grid * (scale * s2)."""
    c = torch.from_numpy(codes_u8.astype(np.int64))
    codes = torch.stack([c & 15, c >> 4], -1).reshape(c.shape[0], -1)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float32)
    val = grid[codes & 7] * torch.where(codes & 8 != 0, -1.0, 1.0)
    b = torch.from_numpy(scales_u8.astype(np.int64))
    e, m = (b >> 3) & 15, (b & 7).double()
    sc = torch.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * torch.pow(2.0, (e - 7).double())).float()
    t = sc * torch.tensor(s2, dtype=torch.float32)
    n = codes.shape[0]
    return (val.reshape(n, -1, 16) * t[..., None]).reshape(n, -1).numpy()


def main():
    torch.manual_seed(3)
    model = Model().to(torch.bfloat16)
    with torch.no_grad():                 # an outlier channel, as RL weights grow them
        model.model.layers[0].self_attn.q_proj.weight[5, 17] = 1.75
    pre = "model.layers.0."
    sd = {k[: -len(".weight")]: v for k, v in model.state_dict().items()}

    # the trainer's weights: the BF16 state dict as it is
    os.makedirs(os.path.join(T, "trainer"))
    write_st(os.path.join(T, "trainer", "model.safetensors"),
             {n + ".weight": ("BF16", list(w.shape), w.contiguous().view(torch.int16).numpy().tobytes())
              for n, w in sd.items()})

    # the rollout's checkpoint in ModelOpt's layout; o_proj and the router stay BF16 (excluded)
    att = pre + "self_attn."
    fused = {att + p: [att + "q_proj", att + "k_proj", att + "v_proj"] for p in ("q_proj", "k_proj", "v_proj")}
    for e in range(E):
        ex = pre + "mlp.experts.%d." % e
        for p in ("gate_proj", "up_proj"):
            fused[ex + p] = [ex + "gate_proj", ex + "up_proj"]
        fused[ex + "down_proj"] = [ex + "down_proj"]
    excluded = [pre + "mlp.gate", att + "o_proj"]
    shards, stored = [{}, {}], {}
    for i, (n, w) in enumerate(sorted(sd.items())):
        shard = shards[i % 2]
        if n not in fused:
            shard[n + ".weight"] = ("BF16", list(w.shape), w.contiguous().view(torch.int16).numpy().tobytes())
            continue
        amax = max(float(f32(sd[g]).__abs__().max()) for g in fused[n])
        q, sb, s2, deq = modelopt_nvfp4(f32(w), amax)
        shard[n + ".weight"] = t_u8(q)
        shard[n + ".weight_scale"] = t_u8(sb, "F8_E4M3")
        shard[n + ".weight_scale_2"] = t_f32(s2, [])
        shard[n + ".input_scale"] = t_f32(np.float32(4.0) / np.float32(2688.0), [])
        stored[n] = (q, sb, s2, deq)
    ck = os.path.join(T, "ckpt")
    os.makedirs(ck)
    index = {"metadata": {}, "weight_map": {}}
    for j, shard in enumerate(shards):
        f = "model-%05d-of-00002.safetensors" % (j + 1)
        write_st(os.path.join(ck, f), shard)
        index["weight_map"].update({k: f for k in shard})
    json.dump(index, open(os.path.join(ck, "model.safetensors.index.json"), "w"))
    json.dump({"producer": {"name": "modelopt", "version": "0.39.0"},
               "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": excluded}},
              open(os.path.join(ck, "hf_quant_config.json"), "w"))

    # dequant: bit for bit the dequantization computed here in torch
    for n in (att + "q_proj", att + "v_proj", pre + "mlp.experts.2.up_proj", pre + "mlp.experts.0.down_proj"):
        out = os.path.join(T, n + ".npy")
        run("dequant", ck, n, "-o", out)
        q, sb, s2, deq = stored[n]
        got, want = np.load(out), torch_dequant(q, sb, s2)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes(), n
        assert got.tobytes() == deq.tobytes(), n

    # check: every scale and code is what ModelOpt's profile makes of the trainer's weights
    doc = json.loads(run("check", ck, "--trainer", os.path.join(T, "trainer"), "-p", "modelopt", "--json"))
    ws = {w["name"]: w for w in doc["weights"]}
    assert set(ws) == set(stored), sorted(ws)
    for n, w in ws.items():
        assert w["scale_diff"] == 0 and w["code_diff"] == 0, w

    # a planted code: expert 1's down_proj [H, I], row 9, the code of column 20 (block 1)
    n = pre + "mlp.experts.1.down_proj"
    f = os.path.join(ck, index["weight_map"][n + ".weight"])
    b = bytearray(open(f, "rb").read())
    hl = int.from_bytes(b[:8], "little")
    off = 8 + hl + json.loads(b[8:8 + hl])[n + ".weight"]["data_offsets"][0] + 9 * (I // 2) + 20 // 2
    b[off] ^= 0x01                        # column 20: the low nibble's magnitude index
    open(f, "wb").write(bytes(b))
    r = subprocess.run([CKPT, "check", ck, "--trainer", os.path.join(T, "trainer"), "-p", "modelopt",
                        "--names", "*experts.1.down_proj"], capture_output=True, text=True)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "first differing block: row 9, block 1 (columns 16..31)" in r.stdout, r.stdout
    b[off] ^= 0x01
    open(f, "wb").write(bytes(b))

    # audit: the trainer side is a capture of the forward pass of the layers it fake-quantizes
    cap_path = os.path.join(T, "trainer.h5")
    cap = fp4scope.Capture(cap_path)
    hooked = cap.hook_linears(model, side="trainer", names="*_proj")
    assert att + "o_proj" in hooked and pre + "mlp.gate" not in hooked, hooked
    x = torch.randn(2, 5, H).to(torch.bfloat16)
    with cap.step(0), torch.no_grad():
        model(x)
    cap.close()
    out = run("audit", ck, "--trainer", cap_path, "--trainer-format", "nvfp4", "--trainer-profile", "te",
              "--check", code=1)
    bad = [ln for ln in out.splitlines() if "DISAGREE" in ln]
    assert len(bad) == 1 and "self_attn.o_proj" in bad[0], out
    a = json.loads(run("audit", ck, "--trainer", cap_path, "--trainer-format", "nvfp4", "--json"))
    probs = {ly["layer"] for ly in a["layers"] if ly["problems"]}
    assert probs == {"layers.0.self_attn.o_proj"}, probs
    # the router is BF16 on both sides, and every expert agrees
    agree = {ly["layer"] for ly in a["layers"] if not ly["problems"]}
    assert {"layers.0.self_attn.qkv_proj", "layers.0.mlp.gate"} <= agree, agree
    assert all("layers.0.mlp.experts.%d.gate_up_proj" % e in agree for e in range(E)), agree
    print("ok")


if __name__ == "__main__":
    main()
