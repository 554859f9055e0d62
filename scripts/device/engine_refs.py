#!/usr/bin/env python3
"""The TransformerEngine NVFP4 profiles against TE's own pure-PyTorch reference
quantizer (reference_nvfp4.py, NVFP4QuantizerRef), run from TE's source on the
CPU and, where PyTorch sees one, on the GPU.

    python3 scripts/device/engine_refs.py tests/conformance/vectors.txt [OUT.txt]

(scripts/device/engine_refs.sh sets PYTHONPATH to .device/engines/te, where
scripts/device/engine_refs_prepare.sh put TE's files.)

The inputs are the NVFP4 records of the conformance corpus: ties, E4M3 scale
ties, subnormals, values up to FLT_MAX, zero blocks, all-zero rows and
tensors, NaN and Inf, 2-D tiles, rows of very different amax. Their expected
bytes are what fp4scope's profiles give (the conformance test checks
fp4scope against the same lines on every build), so "0 differ" here is TE's
reference against fp4scope, byte for byte: every block scale (E4M3 byte),
every element code (E2M1 nibble) and every row's amax (per tensor: the
tensor's). A NaN amax equals any NaN.

Each fp4scope profile is TE's quantizer with these arguments (1x16 tiles
unless said): te: defaults; te-2d: 16x16 tiles; te-4over6 (NVTE_NVFP4_4OVER6,
E4M3 bound 256, MAE); te-4over6,bound=448; te-4over6-2d; te-4over6-fast
(nvfp4_4over6_err_use_fast_math); te-row (row_scaled_nvfp4); te-row-4over6;
miles-nvfp4-train (row-scaled, 4over6, MSE). te-rht and te-sr are not
compared (TE's reference applies RHT to the columnwise copy and has no SR).
Needs PyTorch >= 2.1 (float8_e4m3fn). Exit 0 when nothing differs, 1 else.
"""
import math
import struct
import sys
import time

import torch

te_ref = reference_utils = None  # TE's modules, imported by main() once PyTorch is checked

# profile (as named in the corpus) -> NVFP4QuantizerRef arguments
PROFILES = {
    "te": dict(),
    "te-2d": dict(quant_tile_shape=(16, 16)),
    "te-4over6": dict(nvfp4_use_4over6=True, nvfp4_e4m3_max=256),
    "te-4over6,bound=448": dict(nvfp4_use_4over6=True, nvfp4_e4m3_max=448),
    "te-4over6-2d": dict(nvfp4_use_4over6=True, nvfp4_e4m3_max=256, quant_tile_shape=(16, 16)),
    "te-4over6-fast": dict(nvfp4_use_4over6=True, nvfp4_e4m3_max=256, nvfp4_4over6_err_use_fast_math=True),
    "te-row": dict(row_scaled_nvfp4=True),
    "te-row-4over6": dict(row_scaled_nvfp4=True, nvfp4_use_4over6=True, nvfp4_e4m3_max=256),
    "miles-nvfp4-train": dict(row_scaled_nvfp4=True, nvfp4_use_4over6=True, nvfp4_e4m3_max=256,
                              nvfp4_4over6_err_mode="MSE"),
}


def read_corpus(path):
    """{name: (rows, cols, [float32 bits])} and [(name, profile, fields)] of NVFP4."""
    inputs, expects, cur = {}, [], None
    with open(path) as f:
        for line in f:
            t = line.split()
            if not t or t[0].startswith("#"):
                continue
            if t[0] == "input":
                cur = t[1] if t[2] == "nvfp4" else None
                if cur:
                    inputs[cur] = (int(t[3]), int(t[4]), [])
            elif t[0] == "x" and cur:
                inputs[cur][2].extend(int(h, 16) for h in t[1:])
            elif t[0] == "expect" and t[3] == "nvfp4":
                fields = dict(kv.split("=", 1) for kv in t[4:])
                expects.append((t[1], t[2], fields))
    return inputs, expects


def f32(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def same_f32(a, b):
    fa, fb = f32(a), f32(b)
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) and math.isnan(fb)
    return a == b


def run_te(args, x, dev):
    q = te_ref.NVFP4QuantizerRef(dtype=reference_utils.Fp4Formats.E2M1, rowwise=True, columnwise=False,
                                 **args)
    qx, sx, _, _, amax_row, _ = q._quantize(x.to(dev))
    m, n = x.shape
    qx = qx.cpu().to(torch.int32)
    codes = torch.stack([qx & 15, qx >> 4], dim=-1).reshape(m, n)   # low nibble: the even element
    scales = sx.cpu().contiguous().view(torch.uint8)[:m, : n // 16]
    amax = amax_row.cpu().to(torch.float32).reshape(-1).view(torch.int32).tolist()
    return codes.reshape(-1).tolist(), scales.reshape(-1).tolist(), [a & 0xFFFFFFFF for a in amax]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: engine_refs.py vectors.txt [OUT.txt]")
    if not hasattr(torch, "float8_e4m3fn"):
        sys.exit("engine_refs.py: PyTorch %s has no float8_e4m3fn (TE's reference needs >= 2.1)" % torch.__version__)
    global te_ref, reference_utils
    from transformer_engine.pytorch.custom_recipes import reference_nvfp4 as te_ref
    from transformer_engine.pytorch.custom_recipes import reference_utils
    inputs, expects = read_corpus(sys.argv[1])
    devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    out = [f"TransformerEngine reference_nvfp4.py against fp4scope's profiles (conformance corpus)",
           f"torch {torch.__version__}; devices: " + ", ".join(
               d if d == "cpu" else f"cuda ({torch.cuda.get_device_name(0)})" for d in devs)]
    bad_total = 0
    t0 = time.time()
    for dev in devs:
        tot = {}
        for name, prof, fields in expects:
            if prof not in PROFILES:
                continue
            rows, cols, xb = inputs[name]
            xs = [u - (1 << 32) if u >= 1 << 31 else u for u in xb]
            x = torch.tensor(xs, dtype=torch.int32).view(torch.float32).reshape(rows, cols)
            codes, scales, amax = run_te(PROFILES[prof], x, dev)
            want_codes = bytes.fromhex(fields["codes"])
            want_scales = bytes.fromhex(fields["scales"])
            want_amax = [int(a, 16) for a in fields["amax"].split(",")]
            dc = sum(a != b for a, b in zip(codes, want_codes)) + abs(len(codes) - len(want_codes))
            ds = sum(a != b for a, b in zip(scales, want_scales)) + abs(len(scales) - len(want_scales))
            da = sum(not same_f32(a, b) for a, b in zip(amax, want_amax)) + abs(len(amax) - len(want_amax))
            t = tot.setdefault(prof, [0, 0, 0, 0, 0, 0, 0])
            t[0] += 1
            t[1] += len(want_codes)
            t[2] += dc
            t[3] += len(want_scales)
            t[4] += ds
            t[5] += len(want_amax)
            t[6] += da
            if dc or ds or da:
                first = next((i for i, (a, b) in enumerate(zip(codes, want_codes)) if a != b), None)
                out.append(f"DIFF {dev} {name} {prof}: codes {dc}, scales {ds}, amax {da}"
                           + (f" (first code at element {first}: TE {codes[first]:x}, fp4scope "
                              f"{want_codes[first]:x})" if first is not None else ""))
        out.append(f"\n{dev}: profile, inputs, codes (differ), scales (differ), amax (differ)")
        for prof, t in tot.items():
            out.append(f"  {prof:24s} {t[0]:3d}  {t[1]:6d} ({t[2]})  {t[3]:5d} ({t[4]})  {t[5]:3d} ({t[6]})")
            bad_total += t[2] + t[4] + t[6]
    out.append(f"\n{'all equal' if bad_total == 0 else f'{bad_total} values differ'} ({time.time() - t0:.1f} s)")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    sys.exit(0 if bad_total == 0 else 1)


if __name__ == "__main__":
    main()
