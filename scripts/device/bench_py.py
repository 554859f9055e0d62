#!/usr/bin/env python3
"""The Python package on the GPU: fake_quant / quantize throughput against the
library's own kernels called directly, and the Monitor's overhead on a MoE
training step.

    python3 scripts/device/bench_py.py quant [--rows R] [--cols C] [--reps N]
    python3 scripts/device/bench_py.py monitor [--steps N] [--every K]

quant: one [rows, cols] tensor (default 262144 x 4096 = 2^30 elements, the
size of bench/bench_cuda) on the GPU in float32 and bfloat16; for NVFP4 te
and MXFP4 ocp: fp4scope.quantize(packed=True) and fp4scope.fake_quant
against the same library entry points called through ctypes with no Python
layer between (fp4s_cuda_amax_ex, fp4s_cuda_quantize_ex,
fp4s_cuda_dequantize_ex on preallocated buffers): the package's overhead is
the difference (argument checks, the output allocation by torch's caching
allocator, the amax's one synchronisation). Times are CUDA-event medians of
--reps calls after warm-up; GB/s counts the bytes an op must move (input,
packed codes, one scale byte per block; fake_quant adds the float32 output
and the dequantize's reads). RESULT lines are for scripts:
  RESULT quant OP DTYPE PROFILE package_ms direct_ms ratio GB/s

monitor: a MoE of about 105M parameters (2 layers: attention projections
d=768, 8 experts of d -> 4d -> d with top-2 routing, vocabulary 16384) trained
in bfloat16 autocast with AdamW on 8 sequences of 1024 tokens; the step time
without a monitor and with fp4scope.Monitor(every=K, channels=True) on every
linear layer, alternating blocks of K steps so that drift hits both alike.
Overhead = (mean step with monitor / mean step without) - 1, over whole
windows of K steps (one monitored step each).
  RESULT monitor params steps every base_ms monitored_ms overhead_pct

compare: the package against the C benchmark (bench/bench_cuda's RESULT
lines, same size, same profiles): the C time of quantize is its tensor amax
(where the format has a tensor scale) plus the packed quantize kernel, of
fake_quant that plus the packed dequantize kernel (bench_cuda times the
dequantize once, from float32 codes; its input dtype does not matter). The
target: within 10% (package / C <= 1.10); the monitor's: under 2%.
    python3 scripts/device/bench_py.py compare QUANT_LOG MONITOR_LOG CUDA_LOG...
  RESULT vs_c OP DTYPE PROFILE package_ms c_ms ratio PASS|FAIL"""
import argparse
import ctypes
import statistics
import sys
import time

import torch

import fp4scope
from fp4scope import _lib


def timed(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def bench_quant(args):
    L = fp4scope.lib()
    rows, cols = args.rows, args.cols
    n = rows * cols
    print("bench_py quant: torch %s, %s, library %s, tensor %d x %d" % (
        torch.__version__, torch.cuda.get_device_name(0), fp4scope.lib_path(), rows, cols))
    g = torch.Generator(device="cuda").manual_seed(0)
    x32 = torch.randn(rows, cols, device="cuda", generator=g)
    x32 *= torch.exp2(torch.randint(-20, 20, (rows, cols // 32, 1), device="cuda", generator=g).float()).expand(
        rows, cols // 32, 32).reshape(rows, cols)
    for dt in (torch.float32, torch.bfloat16):
        x = x32.to(dt)
        esz = x.element_size()
        dcode = _lib.DT_F32 if dt == torch.float32 else _lib.DT_BF16
        for fmt, prof in (("nvfp4", "te"), ("mxfp4", "ocp")):
            spec = fp4scope.Spec(fmt, prof)
            codes = torch.empty(rows, cols // 2, dtype=torch.uint8, device="cuda")
            scales = torch.empty(rows, cols // spec.block, dtype=torch.uint8, device="cuda")
            out = torch.empty(rows, cols, dtype=torch.float32, device="cuda")
            st = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            ts = _lib.Tscale()

            def direct_quant():
                if spec.needs_amax:
                    a = ctypes.c_float()
                    nf = ctypes.c_uint64()
                    L.fp4s_cuda_amax_ex(dcode, x.data_ptr(), rows, cols, cols, ctypes.byref(a), ctypes.byref(nf), st)
                    L.fp4s_tscale_init(spec.ref(), a, ctypes.byref(ts))
                else:
                    L.fp4s_tscale_init(spec.ref(), ctypes.c_float(0), ctypes.byref(ts))
                rc = L.fp4s_cuda_quantize_ex(spec.ref(), ctypes.byref(ts), dcode, x.data_ptr(), rows, cols, cols,
                                             True, codes.data_ptr(), scales.data_ptr(), st)
                assert rc == 0

            def direct_fq():
                direct_quant()
                rc = L.fp4s_cuda_dequantize_ex(spec.ref(), ctypes.byref(ts), True, codes.data_ptr(),
                                               scales.data_ptr(), rows, cols, out.data_ptr(), st)
                assert rc == 0

            qbytes = esz * n + 0.5 * n + n / spec.block
            fqbytes = qbytes + 0.5 * n + n / spec.block + 4 * n
            for op, pkg, direct, nbytes in (
                    ("quantize", lambda: fp4scope.quantize(x, spec, packed=True), direct_quant, qbytes),
                    ("fake_quant", lambda: fp4scope.fake_quant(x, spec, dtype="float32"), direct_fq, fqbytes)):
                tp = timed(pkg, args.reps)
                td = timed(direct, args.reps)
                print("RESULT quant %s %s %s %.3f %.3f %.3f %.0f" % (op, str(dt).replace("torch.", ""), prof, tp, td,
                                                                    tp / td, nbytes / tp / 1e6))
            # the package's result is the kernels' (and the CPU's on a sample of rows)
            q = fp4scope.quantize(x, spec, packed=True)
            direct_quant()
            torch.cuda.synchronize()
            assert torch.equal(q.codes, codes) and torch.equal(q.scales, scales), "package != direct"
            del codes, scales, out, q


def make_moe(d=768, experts=8, layers=2, vocab=16384, top=2):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
            self.o = torch.nn.Linear(d, d, bias=False)
            self.router = torch.nn.Linear(d, experts, bias=False)
            self.experts = torch.nn.ModuleList(
                torch.nn.ModuleDict({"up": torch.nn.Linear(d, 4 * d, bias=False),
                                     "down": torch.nn.Linear(4 * d, d, bias=False)}) for _ in range(experts))
            self.n1 = torch.nn.LayerNorm(d)
            self.n2 = torch.nn.LayerNorm(d)

        def forward(self, h):
            b, t, _ = h.shape
            q, k, v = self.qkv(self.n1(h)).view(b, t, 3, 12, d // 12).unbind(2)
            a = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                 v.transpose(1, 2), is_causal=True)
            h = h + self.o(a.transpose(1, 2).reshape(b, t, d))
            x = self.n2(h).reshape(-1, d)
            w, idx = torch.softmax(self.router(x).float(), -1).topk(top, -1)
            y = torch.zeros_like(x)
            for e, ex in enumerate(self.experts):
                tok, slot = (idx == e).nonzero(as_tuple=True)
                if len(tok):
                    z = ex["down"](torch.nn.functional.gelu(ex["up"](x[tok])))
                    y.index_add_(0, tok, (z * w[tok, slot, None]).to(y.dtype))
            return h + y.view(b, t, d)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, d)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
            self.head = torch.nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            h = self.emb(ids)
            for blk in self.blocks:
                h = blk(h)
            return self.head(h)
    return Model()


def bench_monitor(args):
    torch.manual_seed(0)
    model = make_moe().cuda()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 16384, (8, 1025), device="cuda")
    print("bench_py monitor: %s, %.1fM parameters, 8 x 1024 tokens, bfloat16 autocast, every %d"
          % (torch.cuda.get_device_name(0), params / 1e6, args.every))

    def step(mon, s):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if mon is not None:
                with mon.step(s):
                    logits = model(ids[:, :-1])
            else:
                logits = model(ids[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 16384), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    mon = fp4scope.Monitor(model, "nvfp4", "te", every=args.every, sites="*")
    for s in range(args.every):          # warm-up: the allocator, cuDNN, the monitor's first step
        step(None, s)
        step(mon, s)
    torch.cuda.synchronize()
    base, mond = [], []
    s = 0
    for w in range(args.steps // args.every):
        for which, acc in ((None, base), (mon, mond)) if w % 2 == 0 else ((mon, mond), (None, base)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(args.every):
                step(which, s + i)
            torch.cuda.synchronize()
            acc.append((time.perf_counter() - t0) / args.every)
        s += args.every
    mon.close()
    b, m = statistics.mean(base), statistics.mean(mond)
    print("windows of %d steps: without %s ms, with %s ms" % (args.every, " ".join("%.1f" % (1e3 * v) for v in base),
                                                             " ".join("%.1f" % (1e3 * v) for v in mond)))
    print("RESULT monitor %d %d %d %.3f %.3f %.2f" % (params, args.steps, args.every, 1e3 * b, 1e3 * m,
                                                      100 * (m / b - 1)))


C_LABEL = {"te": "nvfp4-te", "ocp": "mxfp4-floor(ocp)"}


def read_results(paths):
    out = []
    for p in paths:
        try:
            with open(p) as f:
                out += [line.split() for line in f if line.startswith("RESULT ")]
        except OSError as e:
            print("bench_py compare: %s: %s" % (p, e))
    return out


def compare(args):
    """Print the package's times against the C benchmark's; exit 1 if a
    target is missed or a number is missing."""
    ok = True
    pk = read_results([args.quant_log])
    c = {}
    for r in read_results(args.cuda_logs):
        # RESULT op dtype layout label... median_ms GB/s of_copy (labels may hold spaces)
        if len(r) < 8 or r[-3] == "MISMATCH":
            continue
        op, dt, lay, label = r[1], r[2], r[3], " ".join(r[4:-3])
        if op in ("quantize", "dequantize") and lay == "bytes":
            continue
        c[(op, dt, label)] = float(r[-3])
    print("%-10s %-8s %-4s %11s %9s %7s  %s" % ("op", "dtype", "prof", "package ms", "C ms", "ratio", "target <= 1.10"))
    for r in pk:
        if len(r) < 9 or r[1] != "quant":
            continue
        op, dt, prof, ms = r[2], r[3], r[4], float(r[5])
        label = C_LABEL.get(prof)
        parts = [("quantize", dt, label)]
        if prof == "te":
            parts.insert(0, ("amax", dt, "tensor amax (incl. sync)"))
        if op == "fake_quant":
            parts.append(("dequantize", "float32", label))
        missing = [p for p in parts if p not in c]
        if missing:
            print("%-10s %-8s %-4s %11.3f %9s %7s  MISSING (bench_cuda gave no %s)" % (
                op, dt, prof, ms, "-", "-", "; ".join(" ".join(m) for m in missing)))
            ok = False
            continue
        cms = sum(c[p] for p in parts)
        verdict = "PASS" if ms / cms <= 1.10 else "FAIL"
        ok &= verdict == "PASS"
        print("%-10s %-8s %-4s %11.3f %9.3f %7.3f  %s" % (op, dt, prof, ms, cms, ms / cms, verdict))
        print("RESULT vs_c %s %s %s %.3f %.3f %.3f %s" % (op, dt, prof, ms, cms, ms / cms, verdict))
    mon = [r for r in read_results([args.monitor_log]) if len(r) >= 8 and r[1] == "monitor"]
    if not mon:
        print("monitor: no RESULT line: FAIL")
        ok = False
    for r in mon:
        pct = float(r[7])
        verdict = "PASS" if pct < 2.0 else "FAIL"
        ok &= verdict == "PASS"
        print("monitor: %.1fM parameters, every %s steps over %s steps: %s ms -> %s ms a step, overhead %.2f%% "
              "(target < 2%%): %s" % (int(r[2]) / 1e6, r[4], r[3], r[5], r[6], pct, verdict))
    sys.exit(0 if ok else 1)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        ap = argparse.ArgumentParser(prog="bench_py.py compare")
        ap.add_argument("quant_log")
        ap.add_argument("monitor_log")
        ap.add_argument("cuda_logs", nargs="+")
        compare(ap.parse_args(sys.argv[2:]))
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["quant", "monitor"])
    ap.add_argument("--rows", type=int, default=262144)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available() or not fp4scope.cuda_available():
        sys.exit("bench_py: needs a GPU and a CUDA build of the library (%s)" % fp4scope.cuda_describe())
    bench_quant(args) if args.what == "quant" else bench_monitor(args)


if __name__ == "__main__":
    main()
