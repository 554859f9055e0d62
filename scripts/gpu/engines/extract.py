#!/usr/bin/env python3
"""Write the BF16 tensors of fp4scope captures as raw little-endian uint16 in
engine_arith's input format (DIR/tensors.bf16 and DIR/tensors.txt, one line
"name rows cols offset" per tensor), appending to what DIR already holds.

    extract.py DIR CAPTURE.h5...

Every 2-D dataset stored as uint16 with the attribute dtype = "bfloat16" whose
column count is a multiple of 32 is taken (activations, weights); its name is
CAPTURE-stem:dataset-path. Needs h5py and numpy (the GPU machine has both)."""
import os
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: extract.py DIR CAPTURE.h5...")
    out = sys.argv[1]
    man = os.path.join(out, "tensors.txt")
    raw = os.path.join(out, "tensors.bf16")
    off = os.path.getsize(raw) // 2 if os.path.exists(raw) else 0
    n = 0
    with open(raw, "ab") as fr, open(man, "a") as fm:
        for path in sys.argv[2:]:
            stem = os.path.splitext(os.path.basename(path))[0]
            with h5py.File(path, "r") as f:
                items = []
                f.visititems(lambda name, obj: items.append((name, obj)) if isinstance(obj, h5py.Dataset) else None)
                for name, d in items:
                    dt = d.attrs.get("dtype")
                    if isinstance(dt, bytes):
                        dt = dt.decode()
                    if d.dtype != np.uint16 or dt != "bfloat16" or d.ndim != 2 or d.shape[1] % 32 or d.shape[0] == 0:
                        continue
                    a = np.ascontiguousarray(d[()], dtype="<u2")
                    fr.write(a.tobytes())
                    fm.write("%s:%s %d %d %d\n" % (stem, name, a.shape[0], a.shape[1], off))
                    off += a.size
                    n += 1
    print("extract.py: %d tensors, %d bf16 values in %s" % (n, off, out))


if __name__ == "__main__":
    main()
