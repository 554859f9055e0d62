#!/usr/bin/env python3
"""fp4scope's CUDA quantizer against PyTorch on the same device tensors.

    python3 scripts/device/bench_torch.py LIBFP4SCOPE.so [--rows R] [--cols C] [--reps N]

One [rows, cols] tensor (default 2^30 elements) of gaussian-like values with a
random exponent per 32-block is made on the GPU in float32 and rounded to
BF16. For MXFP4 (OCP FLOOR, round-half-even) and NVFP4 (the TE recipe, 1-D)
and for each input type, the same tensor is quantized to packed codes (pairs)
and scale bytes by:
  - fp4scope: fp4s_cuda_quantize_ex through ctypes on the tensor's memory;
  - torch.compile of a branch-free formulation (the E2M1 magnitude as a sum of
    seven comparisons, the scale from the exponent bits / an E4M3 cast);
  - the same function in eager PyTorch;
next to a device-to-device copy of the float32 tensor (bytes read + written).
Times are CUDA-event medians of --reps launches after warm-up. Bytes counted:
input + packed codes (1/2 byte per element) + one scale byte per block. The
compiled codes and scales are compared with fp4scope's (mismatching bytes are
printed: the formulations compute the same thing). Lines starting RESULT are
for scripts."""
import argparse
import ctypes
import statistics
import sys

import torch

FP4S_MXFP4, FP4S_NVFP4 = 1, 2
FP4S_DT_F32, FP4S_DT_BF16 = 0, 3


def lib_open(path):
    lib = ctypes.CDLL(path)
    lib.fp4s_spec_size.restype = ctypes.c_size_t
    lib.fp4s_tscale_size.restype = ctypes.c_size_t
    lib.fp4s_spec_profile.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    lib.fp4s_tscale_init.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p]
    lib.fp4s_cuda_quantize_ex.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                          ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_bool,
                                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.fp4s_last_error.restype = ctypes.c_char_p
    return lib


def check(lib, rc, what):
    if rc != 0:
        sys.exit("bench_torch: %s: %s" % (what, lib.fp4s_last_error().decode()))


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


def e2m1_codes(v):
    """Packed E2M1 codes (pairs) of v [N, B] float32, round-half-even."""
    a = v.abs()
    m = ((a > 0.25).to(torch.uint8) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5)
         + (a > 5.0))
    q = m | (torch.signbit(v).to(torch.uint8) << 3)
    return q


def mx_ocp(x):
    """MXFP4, OCP FLOOR: k = exponent(amax) - 2, codes of x * 2^-k."""
    rows = x.shape[0]
    xf = x.float().reshape(-1, 32)
    amax = xf.abs().amax(1, keepdim=True)
    e = (amax.view(torch.int32) >> 23) & 0xFF
    code = (e - 2).clamp(1, 254)
    inv = ((254 - code) << 23).view(torch.float32)
    q = e2m1_codes(xf * inv).reshape(rows, -1)
    return q[:, 0::2] | (q[:, 1::2] << 4), code.to(torch.uint8).reshape(rows, -1)


def nv_te(x, s_enc, s_dec):
    """NVFP4, TE recipe: s_b = e4m3(amax_b * (S_enc / 6)), codes of x * (1 / (s_b * S_dec))."""
    rows = x.shape[0]
    xf = x.float().reshape(-1, 16)
    amax = xf.abs().amax(1, keepdim=True)
    sb = (amax * (s_enc * (1.0 / 6.0))).to(torch.float8_e4m3fn)
    enc = torch.clamp(1.0 / (sb.float() * s_dec), max=3.4028234663852886e38)
    q = e2m1_codes(xf * enc).reshape(rows, -1)
    return q[:, 0::2] | (q[:, 1::2] << 4), sb.view(torch.uint8).reshape(rows, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--rows", type=int, default=262144)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    lib = lib_open(a.lib)
    dev = torch.device("cuda")
    rows, cols, n = a.rows, a.cols, a.rows * a.cols
    print("bench_torch: torch %s, %s, tensor %d x %d" % (torch.__version__, torch.cuda.get_device_name(0), rows, cols))
    g = torch.Generator(device=dev).manual_seed(1234)
    x32 = torch.randn(rows, cols, device=dev, generator=g)
    ex = torch.randint(-20, 20, (rows, cols // 32, 1), device=dev, generator=g).float()
    x32 = (x32.view(rows, cols // 32, 32) * torch.exp2(ex)).view(rows, cols).contiguous()
    del ex
    xbf = x32.to(torch.bfloat16)
    y = torch.empty_like(x32)
    t_copy = timed(lambda: y.copy_(x32), a.reps)
    copy_tbs = 8.0 * n / (t_copy * 1e-3) / 1e12
    print("RESULT copy float32 - d2d %.4f %.1f 1.0000" % (t_copy, copy_tbs * 1000))
    del y
    codes = torch.empty(rows, cols // 2, dtype=torch.uint8, device=dev)
    spec = ctypes.create_string_buffer(lib.fp4s_spec_size())
    ts = ctypes.create_string_buffer(lib.fp4s_tscale_size())
    comp_mx = torch.compile(mx_ocp, fullgraph=True, dynamic=False)
    comp_nv = torch.compile(nv_te, fullgraph=True, dynamic=False)
    rows_out = []
    for fmt, name in ((FP4S_MXFP4, "mxfp4-ocp"), (FP4S_NVFP4, "nvfp4-te")):
        check(lib, lib.fp4s_spec_profile(spec, fmt, b"ocp" if fmt == FP4S_MXFP4 else b"te"), "spec")
        bs = 32 if fmt == FP4S_MXFP4 else 16
        for x, dt, dtn, esz in ((x32, FP4S_DT_F32, "float32", 4), (xbf, FP4S_DT_BF16, "bfloat16", 2)):
            amax = float(x.float().abs().max())
            check(lib, lib.fp4s_tscale_init(spec, ctypes.c_float(amax), ts), "tscale")
            sc = torch.empty(rows, cols // bs, dtype=torch.uint8, device=dev)

            def f4s():
                check(lib, lib.fp4s_cuda_quantize_ex(spec, ts, dt, x.data_ptr(), rows, cols, cols, True,
                                                     codes.data_ptr(), sc.data_ptr(), None), "quantize")

            if fmt == FP4S_MXFP4:
                fc, fe = (lambda: comp_mx(x)), (lambda: mx_ocp(x))
            else:
                s_enc = torch.tensor(min(2688.0 / amax, 3.4028234663852886e38), dtype=torch.float32, device=dev)
                s_dec = 1.0 / s_enc
                fc, fe = (lambda: comp_nv(x, s_enc, s_dec)), (lambda: nv_te(x, s_enc, s_dec))
            f4s()
            torch.cuda.synchronize()
            cq, cs = fc()
            torch.cuda.synchronize()
            bad = int((cq != codes).sum()) + int((cs != sc).sum())
            nbytes = esz * n + n / 2 + n / bs
            t_f, t_c = timed(f4s, a.reps), timed(fc, a.reps)
            t_e = timed(fe, max(3, a.reps // 4), warm=1)
            tb = [nbytes / (t * 1e-3) / 1e12 for t in (t_f, t_c, t_e)]
            print("RESULT torchcmp %s %s fp4scope=%.4f compiled=%.4f eager=%.4f TBs=%.3f,%.3f,%.3f copy=%.3f "
                  "mismatch=%d" % (name, dtn, t_f, t_c, t_e, tb[0], tb[1], tb[2], copy_tbs, bad))
            rows_out.append((name, dtn, tb, bad))
            del cq, cs
    print("\n| op | input | fp4scope TB/s | of copy | torch.compile TB/s | eager TB/s | fp4scope / compiled | codes differing |")
    print("|---|---|---|---|---|---|---|---|")
    print("| d2d copy (read+write) | float32 | %.2f | 100%% | | | | |" % copy_tbs)
    for name, dtn, tb, bad in rows_out:
        print("| %s packed | %s | %.2f | %.0f%% | %.2f | %.3f | %.2fx | %d |" % (
            name, dtn, tb[0], 100 * tb[0] / copy_tbs, tb[1], tb[2], tb[0] / tb[1], bad))


if __name__ == "__main__":
    main()
