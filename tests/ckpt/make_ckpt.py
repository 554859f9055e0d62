"""Quantized checkpoints for the tests of fp4-ckpt, written from the producers'
arithmetic in numpy (not from fp4scope's code), with their trainer weights.

    make_ckpt.py DIR

writes into DIR:
  trainer/model.safetensors   BF16 trainer weights: dense q/k/v/o, per-expert MLPs
                              (Qwen-style names) and fused experts ([E, 2I, H]
                              gate_up_proj, [E, H, I] down_proj), gpt-oss experts
                              ([E, H, 2I] / [E, I, H], in-out)
  modelopt/                   ModelOpt NVFP4 of the dense and per-expert weights,
                              sharded in two files with model.safetensors.index.json,
                              gate/up of each expert sharing one weight_scale_2 (the
                              fused amax, as ModelOpt exports them), hf_quant_config.json
  ct/model.safetensors        compressed-tensors NVFP4 of q_proj (reciprocal global scales)
  gptoss/model.safetensors    gpt-oss MXFP4 blocks and scales (rule: smallest power of
                              two with amax <= 6 * 2^k)
  ref/*.npy                   the producers' dequantized weights (float32), for the
                              bit-exact check of fp4-ckpt dequant
The arithmetic follows ModelOpt's NVFP4QTensor (modelopt/torch/quantization/qtensor/
nvfp4_tensor.py): scale_2 = amax / 2688, per-block amax / (6 scale_2), zero blocks 1,
clamp [2^-9, 448], E4M3 by round to nearest even; elements x / (s_b scale_2), E2M1
round to nearest even; codes packed two a byte, element 2i in the low nibble."""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from np_e2m1 import GRID, e2m1_rne  # noqa: E402 (tests/np_e2m1.py)

F32 = np.float32


def bf16(x):
    """float32 -> BF16 bits (round to nearest even) and the float32 values they hold."""
    b = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return r, (r.astype(np.uint32) << 16).view(F32)


def e4m3_rne(p):
    """E4M3 (FN) byte of each p in [2^-9, 448] (float64 exact), round to nearest even."""
    p = np.asarray(p, np.float64)
    e = np.floor(np.log2(p))
    e = np.maximum(e, -6)                       # subnormals share the step 2^-9
    step = 2.0 ** (e - 3)
    v = np.rint(p / step) * step                # np.rint: ties to even
    v = np.minimum(v, 448.0)
    out = np.zeros(p.shape, np.uint8)
    sub = v < 2.0 ** -6
    out[sub] = np.rint(v[sub] / 2.0 ** -9).astype(np.uint8)
    ee = np.floor(np.log2(np.where(sub, 1.0, v)))
    m = np.rint(np.where(sub, 0, v / 2.0 ** ee * 8 - 8)).astype(np.int64)
    out[~sub] = (((ee[~sub] + 7).astype(np.int64) << 3) | m[~sub]).astype(np.uint8)
    return out


def e4m3_value(code):
    code = np.asarray(code, np.int64)
    e, m = (code >> 3) & 15, code & 7
    return np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7)).astype(F32)


def codes_of(q):
    """E2M1 magnitude (float64 on the grid) and sign -> 4-bit codes."""
    return np.searchsorted(GRID, q).astype(np.uint8)


def pack(codes):
    c = codes.reshape(*codes.shape[:-1], -1, 2)
    return (c[..., 0] | (c[..., 1] << 4)).astype(np.uint8)


def modelopt_nvfp4(w, amax=None, s2=None):
    """ModelOpt's export of w [N, K] (float32 holding BF16 values): packed codes,
    E4M3 block scales, scale_2 and the dequantized weight (float32). amax: the
    tensor amax (default the weight's own); s2: the decode scale itself."""
    if s2 is None:
        amax = F32(np.abs(w).max()) if amax is None else F32(amax)
        s2 = F32(amax / F32(2688.0))
    n, k = w.shape
    blocks = w.reshape(n, k // 16, 16)
    bamax = np.abs(blocks).max(axis=-1).astype(F32)
    p = (bamax / (F32(6.0) * s2)).astype(F32)
    p[p == 0] = 1.0
    p = np.clip(p, F32(2.0 ** -9), F32(448.0))
    sb = e4m3_rne(p)
    t = (e4m3_value(sb) * s2).astype(F32)
    x = (blocks / t[..., None]).astype(F32)
    mag = e2m1_rne(np.abs(x).astype(np.float64))
    codes = codes_of(mag) | ((x < 0).astype(np.uint8) << 3)
    deq = (np.where(codes & 8, -1.0, 1.0) * GRID[codes & 7]).astype(F32) * t[..., None]
    return pack(codes.reshape(n, k)), sb, s2, deq.astype(F32).reshape(n, k)


def mxfp4_ceil(w):
    """gpt-oss blocks [N, K/32, 16] and scales [N, K/32] of w [N, K] with the
    scale 2^k, k the smallest with amax <= 6 * 2^k, and the dequantized weight."""
    n, k = w.shape
    blocks = w.reshape(n, k // 32, 32).astype(np.float64)
    bamax = np.abs(blocks).max(axis=-1)
    kk = np.where(bamax > 0, np.ceil(np.log2(np.where(bamax > 0, bamax, 1) / 6.0)), -127)
    kk = np.clip(kk, -127, 127)
    x = blocks / 2.0 ** kk[..., None]
    mag = e2m1_rne(np.abs(x))
    codes = codes_of(mag) | ((x < 0).astype(np.uint8) << 3)
    deq = (np.where(codes & 8, -1.0, 1.0) * GRID[codes & 7] * 2.0 ** kk[..., None]).astype(F32)
    packed = pack(codes).reshape(n, k // 32, 16)
    return packed, (kk + 127).astype(np.uint8), deq.reshape(n, k)


def write_st(path, tensors):
    """tensors: name -> (dtype string, shape, bytes); a safetensors file."""
    header, off, blobs = {}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def t_bf16(a):
    return ("BF16", a.shape, bf16(a)[0].tobytes())


def t_f32(a, shape=None):
    a = np.asarray(a, F32)
    return ("F32", a.shape if shape is None else shape, a.tobytes())


def t_u8(a, dt="U8"):
    return (dt, a.shape, np.ascontiguousarray(a, np.uint8).tobytes())


def main(d):
    rng = np.random.default_rng(7)
    H, I, E, GE = 64, 32, 2, 2      # hidden, expert intermediate, experts, gpt-oss experts
    GI = 64                         # gpt-oss intermediate: down_proj [H, GI] is square, as gpt-oss-20b's is
    for sub in ("trainer", "modelopt", "ct", "gptoss", "ref"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)

    def weight(n, k, outlier=True):
        w = rng.standard_normal((n, k)).astype(F32) * F32(0.05)
        if outlier:
            w[rng.integers(0, n), rng.integers(0, k)] = F32(1.0 + rng.random())
        w[0, :16] = 0.0                  # one all-zero block: ModelOpt's scale 1.0
        return bf16(w)[1]

    trainer, mo = {}, [{}, {}]
    dense = {"model.layers.0.self_attn.q_proj": weight(64, H), "model.layers.0.self_attn.k_proj": weight(32, H),
             "model.layers.0.self_attn.v_proj": weight(32, H), "model.layers.0.self_attn.o_proj": weight(H, 64)}
    for name, w in dense.items():
        trainer[name + ".weight"] = t_bf16(w)
    # q/k/v share the scale_2 of their largest amax, as ModelOpt exports a fused layer
    qkv_amax = max(np.abs(w).max() for n, w in dense.items() if "o_proj" not in n)
    for i, (name, w) in enumerate(dense.items()):
        q, sb, s2, deq = modelopt_nvfp4(w, None if "o_proj" in name else qkv_amax)
        shard = mo[i % 2]
        shard[name + ".weight"] = t_u8(q)
        shard[name + ".weight_scale"] = t_u8(sb, "F8_E4M3")
        shard[name + ".weight_scale_2"] = t_f32(s2, [])
        shard[name + ".input_scale"] = t_f32(F32(3.5) / F32(2688.0), [])
        np.save(os.path.join(d, "ref", name + ".npy"), deq)
    # experts: fused in the trainer, per expert in the checkpoint; gate and up share the fused amax
    gu = np.stack([np.concatenate([weight(I, H), weight(I, H)]) for _ in range(E)])
    dn = np.stack([weight(H, I) for _ in range(E)])
    trainer["model.layers.1.mlp.experts.gate_up_proj"] = t_bf16(gu)
    trainer["model.layers.1.mlp.experts.down_proj"] = t_bf16(dn)
    for e in range(E):
        fused_amax = np.abs(gu[e]).max()
        parts = {"gate_proj": (gu[e, :I], fused_amax), "up_proj": (gu[e, I:], fused_amax), "down_proj": (dn[e], None)}
        for proj, (w, amax) in parts.items():
            name = "model.layers.1.mlp.experts.%d.%s" % (e, proj)
            q, sb, s2, deq = modelopt_nvfp4(w, amax)
            mo[1][name + ".weight"] = t_u8(q)
            mo[1][name + ".weight_scale"] = t_u8(sb, "F8_E4M3")
            mo[1][name + ".weight_scale_2"] = t_f32(s2, [])
            np.save(os.path.join(d, "ref", name + ".npy"), deq)
    # an unquantized layer in both (the router), and the LM head
    trainer["model.layers.1.mlp.gate.weight"] = t_bf16(weight(E, H, False))
    mo[0]["model.layers.1.mlp.gate.weight"] = trainer["model.layers.1.mlp.gate.weight"]
    trainer["lm_head.weight"] = t_bf16(weight(96, H, False))
    mo[0]["lm_head.weight"] = trainer["lm_head.weight"]
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = {"metadata": {}, "weight_map": {}}
    for f, shard in zip(files, mo):
        write_st(os.path.join(d, "modelopt", f), shard)
        for n in shard:
            index["weight_map"][n] = f
    with open(os.path.join(d, "modelopt", "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=1)
    with open(os.path.join(d, "modelopt", "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt", "version": "0.39.0"},
                   "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                    "exclude_modules": ["lm_head", "model.layers.1.mlp.gate"]}}, f, indent=1)

    # compressed-tensors: the same codes as ModelOpt's with the decode scale 1 / (2688 / amax)
    w = dense["model.layers.0.self_attn.q_proj"]
    amax = F32(np.abs(w).max())
    gs = F32(F32(2688.0) / amax)
    q, sb, s2, deq = modelopt_nvfp4(w, s2=F32(F32(1.0) / gs))
    # dequantized as compressed-tensors does: q * (float(s_b) / global_scale)
    codes = np.stack([q & 15, q >> 4], -1).reshape(w.shape)
    t = (e4m3_value(sb) / gs).astype(F32)
    deq_ct = ((np.where(codes & 8, -1.0, 1.0) * GRID[codes & 7]).astype(F32).reshape(64, -1, 16) * t[..., None])
    write_st(os.path.join(d, "ct", "model.safetensors"), {
        "model.layers.0.self_attn.q_proj.weight_packed": t_u8(q),
        "model.layers.0.self_attn.q_proj.weight_scale": t_u8(sb, "F8_E4M3"),
        "model.layers.0.self_attn.q_proj.weight_global_scale": t_f32([gs]),
        "model.layers.0.self_attn.q_proj.input_global_scale": t_f32([F32(2688.0) / F32(3.5)])})
    np.save(os.path.join(d, "ref", "ct.q_proj.npy"), deq_ct.astype(F32).reshape(w.shape))

    # gpt-oss: trainer [E, in, out], checkpoint blocks along in
    ggu = np.stack([weight(2 * GI, H) for _ in range(GE)])    # [E, out=2 GI, in=H]
    gdn = np.stack([weight(H, GI) for _ in range(GE)])        # [E, out=H, in=GI]
    trainer["model.layers.2.mlp.experts.gate_up_proj"] = t_bf16(np.ascontiguousarray(ggu.transpose(0, 2, 1)))
    trainer["model.layers.2.mlp.experts.down_proj"] = t_bf16(np.ascontiguousarray(gdn.transpose(0, 2, 1)))
    st = {}
    for name, ws in (("gate_up_proj", ggu), ("down_proj", gdn)):
        parts = [mxfp4_ceil(ws[e]) for e in range(GE)]
        st["model.layers.2.mlp.experts.%s_blocks" % name] = t_u8(np.stack([p[0] for p in parts]))
        st["model.layers.2.mlp.experts.%s_scales" % name] = t_u8(np.stack([p[1] for p in parts]))
        np.save(os.path.join(d, "ref", "gptoss.%s.npy" % name),
                np.concatenate([p[2] for p in parts]).astype(F32))
    write_st(os.path.join(d, "gptoss", "model.safetensors"), st)
    write_st(os.path.join(d, "trainer", "model.safetensors"), trainer)


if __name__ == "__main__":
    main(sys.argv[1])
