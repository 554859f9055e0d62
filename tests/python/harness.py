"""The package tests' runner and shared helpers (no pytest on Debian 12's
python3 by default): run(globals()) calls every test_* function of a
module in order, prints one line each, and exits 1 if any failed, 77 if a
requirement of all of them is missing. Helpers: hostile tensors, the fp4-*
tools, a safetensors writer, the devices to test."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

TMP = tempfile.mkdtemp(prefix="fp4s-py-")


class Skip(Exception):
    pass


def run(ns):
    names = [n for n in ns if n.startswith("test_") and callable(ns[n])]
    only = os.environ.get("FP4S_PY_ONLY")
    failed = skipped = 0
    for n in names:
        if only and only not in n:
            continue
        t0 = time.time()
        try:
            ns[n]()
            print("ok   %-48s %.2fs" % (n, time.time() - t0), flush=True)
        except Skip as e:
            skipped += 1
            print("skip %-48s %s" % (n, e), flush=True)
        except Exception:
            failed += 1
            print("FAIL %s" % n, flush=True)
            traceback.print_exc()
    print("%d failed, %d skipped" % (failed, skipped))
    sys.exit(1 if failed else 0)


def tool(name):
    """The fp4-* tool of the build under test (FP4S_BUILDDIR/tools), else PATH's."""
    b = os.environ.get("FP4S_BUILDDIR")
    if b and os.path.exists(os.path.join(b, "tools", name)):
        return os.path.join(b, "tools", name)
    return name


def cli(*args, check=True):
    p = subprocess.run([tool(args[0])] + [str(a) for a in args[1:]], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(map(str, args)), p.returncode, p.stderr[-2000:]))
    return p


def cli_json(*args):
    return json.loads(cli(*args).stdout)


def tmp(name):
    return os.path.join(TMP, name)


def hostile(rows, cols, seed=0, nonfinite=True):
    """float32 [rows, cols] that tries every corner of the quantizers: block
    magnitudes from 2^-149 to 2^127, exact E2M1 ties at many scales, values
    just above and below ties, subnormals, +-0, all-zero blocks and rows,
    blocks of one value, the largest float, and (nonfinite) NaN and +-Inf in
    a few blocks."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    nb = cols // 16
    exps = rng.integers(-40, 40, size=(rows, nb))
    exps[rng.random((rows, nb)) < 0.05] = rng.integers(-149, -120, size=1)[0]
    exps[rng.random((rows, nb)) < 0.03] = rng.integers(100, 124, size=1)[0]
    x *= np.repeat(np.exp2(exps.astype(np.float64)), 16, axis=1).astype(np.float32)
    grid = np.array([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6], np.float32)
    ties = rng.random((rows, cols)) < 0.2
    sc = np.exp2(rng.integers(-20, 20, size=(rows, cols))).astype(np.float32)
    x[ties] = (rng.choice(grid, size=(rows, cols)) * sc * rng.choice([-1, 1], size=(rows, cols)))[ties]
    near = rng.random((rows, cols)) < 0.03
    x[near] = np.nextafter(x[near], np.where(x[near] >= 0, np.float32(np.inf), np.float32(-np.inf)))
    x[rng.random((rows, cols)) < 0.02] = 0.0
    x[rng.random((rows, cols)) < 0.02] = -0.0
    sub = rng.random((rows, cols)) < 0.01
    x[sub] = (rng.integers(1, 1 << 23, size=(rows, cols)).astype(np.uint32).view(np.float32))[sub]
    if rows > 3:
        x[1, :] = 0.0                      # an all-zero row
        x[2, :32] = np.float32(3.0)        # blocks of one value
        x[3, 16:32] = np.finfo(np.float32).max
    if nonfinite and rows > 8:
        x[5, 3] = np.nan
        x[6, 40 % cols] = np.inf
        x[7, 70 % cols] = -np.inf
    return x


def save_safetensors_bf16(path, name, bits, shape):
    """A .safetensors file with one BF16 tensor (bits: uint16 array)."""
    data = np.ascontiguousarray(bits, dtype="<u2").tobytes()
    head = json.dumps({name: {"dtype": "BF16", "shape": list(shape), "data_offsets": [0, len(data)]}}).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data)


def devices():
    """"cpu", and "cuda" where torch sees a GPU and the library has CUDA.
    FP4S_REQUIRE_CUDA=1 makes a missing GPU an error (the GPU machine)."""
    import fp4scope
    out = ["cpu"]
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu and fp4scope.cuda_available():
        out.append("cuda")
    elif os.environ.get("FP4S_REQUIRE_CUDA") == "1":
        raise AssertionError("FP4S_REQUIRE_CUDA=1 but no GPU for the package (torch %s, library: %s)"
                             % ("sees one" if gpu else "sees none", fp4scope.cuda_describe()))
    return out


def expect_error(fn, *words, code=None):
    import fp4scope
    try:
        fn()
    except fp4scope.FP4SError as e:
        for w in words:
            assert w in str(e), "expected %r in: %s" % (w, e)
        assert code is None or e.code == code, (e.code, str(e))
        return str(e)
    raise AssertionError("accepted: expected an error with %s" % (words,))
