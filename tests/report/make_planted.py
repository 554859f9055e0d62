"""A capture with a planted answer for fp4-report's ranking and advice (issue 26):
    make_planted.py OUT.h5 [SEED]
Three linear sites, MXFP4 (ocp), one step, the trainer's activations equal to the rollout's (no
input difference), float32 datasets:
  layers.0.mlp.down_proj   the largest share of the output mismatch, all of it from 8 hot
                           activation channels (one per 32-block of K = 256): every other
                           activation and every weight is exactly representable in MXFP4, so
                           the only error is the hot channels' grid error, which rac at 5% of
                           the channels (13 of 256: the 8 hot ones first) removes;
  layers.0.self_attn.o_proj  the largest relative error (Laplace activations: a wide dead zone)
                           on outputs 1000 times smaller: a tiny share;
  layers.0.mlp.up_proj     weight-dominated: exact activations, Gaussian weights (their
                           quantization error is all there is against a BF16 trainer).
Exactly representable: each 32-block has its maximum at 6 * 2^e (the E8M0 scale 2^e) and every
other value on the E2M1 grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} times 2^e, with a sign.
"""
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)


def exact(rows, k, e=0):
    """Values on the MXFP4 grid at scale 2^e, each 32-block's maximum 6 * 2^e."""
    v = rng.choice(GRID, size=(rows, k)) * rng.choice([-1.0, 1.0], size=(rows, k))
    v[:, ::32] = 6.0  # the block maximum: the scale is 2^e whatever else the block holds
    return (v * 2.0 ** e).astype(np.float32)


def site(f, name, x, w):
    f["steps/0/%s/rollout" % name] = x
    f["steps/0/%s/trainer" % name] = x  # the same activations on both sides
    f["weights/%s" % name] = w


m, k = 256, 256
with h5py.File(out, "w") as f:
    f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
    f.attrs["producer"] = "tests/report/make_planted.py"
    # A: hot channels 5, 37, ..., 229 (one per block, not the block's first column) at 5.3: between the
    # grid points 4 and 6 of the scale 2^0 that the column of 6s sets, so each rounds with error 0.7
    xa = exact(m, k)
    hot = np.arange(5, k, 32)
    xa[:, hot] = 5.3 * np.sign(rng.standard_normal((m, hot.size))).astype(np.float32)
    wa = exact(512, k, e=2)  # a large weight: a large output, so the largest share
    site(f, "layers.0.mlp.down_proj", xa, wa)
    # B: Laplace activations (many values in the dead zone of their block), a tiny weight
    xb = rng.laplace(0, 1, (m, k)).astype(np.float32)
    wb = exact(64, k, e=-12)
    site(f, "layers.0.self_attn.o_proj", xb, wb)
    # C: exact activations, Gaussian weights
    xc = exact(m, k)
    wc = rng.standard_normal((256, k)).astype(np.float32)
    site(f, "layers.0.mlp.up_proj", xc, wc)
    f["steps/0"].attrs["step"] = np.int64(0)
