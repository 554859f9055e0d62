#!/usr/bin/env python3
"""Pack engine_arith's output (from scripts/gpu/engines/run.sh on the GPU
machine) into one HDF5 file that tests/engines/h200_compare reads.

    pack_results.py DIR OUT.h5 [PREFIX]

DIR holds in/ (tensors.txt, tensors.bf16) and out/ (R.codes, R.scales, R.txt
per recipe R), as $OUT/engines.tar.gz unpacks. Only the tensors whose name
starts with PREFIX are kept (all without one). OUT.h5 gets

  /tensors/name (strings), rows, cols, offset (int64), /tensors/x (uint16: the
  BF16 inputs, concatenated)
  /recipes/R/codes (uint8: two E2M1 codes a byte, the first in the low nibble;
  engine_arith's fi-* left out where FlashInfer's own kernel gave fi-real-*),
  /recipes/R/scales (uint8), /recipes/R/global_scale (uint32: S's float32 bits
  per tensor), attribute "profile" (the fp4scope profile and format it is
  compared with)

Needs numpy and h5py."""
import os
import sys

import h5py
import numpy as np

# engine_arith's recipes (and run_ext.sh's builds of an engine's own source)
PROFILE = {
    "fi-nv": "flashinfer nvfp4", "fi-nv-exact": "flashinfer-exact nvfp4", "fi-mx": "flashinfer mxfp4",
    "fi-real-nv": "flashinfer nvfp4", "fi-real-nv-exact": "flashinfer-exact nvfp4", "fi-real-mx": "flashinfer mxfp4",
    "vllm-nv": "vllm nvfp4", "vllm-mx": "vllm mxfp4", "vllm-mx-old": "vllm@pre-43557 mxfp4",
}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: pack_results.py DIR OUT.h5 [PREFIX]")
    d, out = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) == 4 else ""
    ts = [l.split() for l in open(os.path.join(d, "in", "tensors.txt")) if l.strip()]
    x = np.fromfile(os.path.join(d, "in", "tensors.bf16"), dtype="<u2")
    keep = [i for i, t in enumerate(ts) if t[0].startswith(prefix)]
    rows = np.array([int(ts[i][1]) for i in keep], np.int64)
    cols = np.array([int(ts[i][2]) for i in keep], np.int64)
    offs = np.array([int(ts[i][3]) for i in keep], np.int64)
    n = rows * cols
    newoff = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    with h5py.File(out, "w") as f:
        f.attrs["producer"] = "scripts/gpu/engines/engine_arith.cu (run.sh on an NVIDIA H200, sm_90)"
        g = f.create_group("tensors")
        g.create_dataset("name", data=np.array([ts[i][0] for i in keep], dtype=h5py.string_dtype()))
        g.create_dataset("rows", data=rows)
        g.create_dataset("cols", data=cols)
        g.create_dataset("offset", data=newoff)
        g.create_dataset("x", data=np.concatenate([x[o:o + k] for o, k in zip(offs, n)]),
                         compression="gzip", compression_opts=9, shuffle=True)
        gr = f.create_group("recipes")
        for r in sorted(PROFILE):
            cp = os.path.join(d, "out", r + ".codes")
            if not os.path.exists(cp):
                continue
            # engine_arith's fi-* where FlashInfer's own kernel ran (fi-real-*): the latter only
            real = os.path.join(d, "out", r.replace("fi-", "fi-real-", 1) + ".codes")
            if r.startswith("fi-") and not r.startswith("fi-real-") and os.path.exists(real):
                continue
            codes = np.fromfile(cp, np.uint8)
            scales = np.fromfile(os.path.join(d, "out", r + ".scales"), np.uint8)
            block = 32 if PROFILE[r].endswith("mxfp4") else 16
            txt = [l.split() for l in open(os.path.join(d, "out", r + ".txt")) if l.strip()]
            allo = np.concatenate([[0], np.cumsum([int(t[1]) * int(t[2]) for t in ts])]).astype(np.int64)
            c = np.concatenate([codes[allo[i]:allo[i] + int(ts[i][1]) * int(ts[i][2])] for i in keep])
            s = np.concatenate([scales[allo[i] // block:(allo[i] + int(ts[i][1]) * int(ts[i][2])) // block]
                                for i in keep])
            packed = (c[0::2] | (c[1::2] << 4)).astype(np.uint8)
            h = gr.create_group(r)
            h.attrs["profile"] = PROFILE[r]
            h.create_dataset("codes", data=packed, compression="gzip", compression_opts=9)
            h.create_dataset("scales", data=s, compression="gzip", compression_opts=9)
            h.create_dataset("global_scale", data=np.array([int(txt[i][1], 16) for i in keep], np.uint32))
    print("pack_results.py: %s: %d tensors, %d values" % (out, len(keep), int(n.sum())))


if __name__ == "__main__":
    main()
