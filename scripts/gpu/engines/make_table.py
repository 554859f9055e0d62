#!/usr/bin/env python3
"""Write lib/base/approx/rcp_approx_ftz_sm90.h5 from approx_scan's output.

    make_table.py SCANDIR OUT.h5

SCANDIR is approx_scan's output folder (from scripts/gpu/engines/run.sh on the
GPU machine: the scan/ folder of $OUT/engines.tar.gz). The file holds

  /rcp_approx_ftz/deviation  int8[2^23], gzip 9: bits(rcp.approx.ftz.f32(1.m))
                             minus bits(the correctly rounded 1/(1.m)) for
                             mantissa m (the table fp4scope compiles in)
  /ex2_approx_ftz/integers   float32[321]: ex2.approx.ftz.f32(n), n = -160..160
  /ex2_approx/integers       float32[321]: ex2.approx.f32(n)

with the device, the command and approx_scan's findings as attributes. It
refuses a scan whose mantissa hypothesis failed for any input, whose
rcp.approx.f32 table differs from the ftz one, or whose deviations are not
-1, 0 or +1. Needs numpy and h5py."""
import os
import re
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_table.py SCANDIR OUT.h5")
    scan, out = sys.argv[1], sys.argv[2]
    summary = open(os.path.join(scan, "summary.txt")).read()
    dev = np.fromfile(os.path.join(scan, "rcp_approx_ftz.dev"), dtype=np.int8)
    dev_noftz = np.fromfile(os.path.join(scan, "rcp_approx.dev"), dtype=np.int8)
    if dev.size != 1 << 23 or not np.array_equal(dev, dev_noftz):
        sys.exit("make_table.py: the rcp tables are missing, short or differ between ftz and non-ftz")
    if not np.isin(dev, (-1, 0, 1)).all():
        sys.exit("make_table.py: a deviation outside -1..1")
    block = summary.split("rcp.approx.ftz.f32 (")[1].split("rcp.approx.f32 (")[0]
    bad = [int(x) for x in re.findall(r"mismatches (\d+)", block)]
    if not bad or any(bad):
        sys.exit("make_table.py: the mantissa hypothesis failed for some input: no table")
    device = summary.splitlines()[0].replace("device: ", "")
    ints = {}
    for line in open(os.path.join(scan, "ex2_int.txt")):
        if line.startswith("#"):
            continue
        n, a, b = line.split()
        ints[int(n)] = (int(a, 16), int(b, 16))
    ns = list(range(-160, 161))
    ex2f = np.array([ints[n][0] for n in ns], dtype=np.uint32).view(np.float32)
    ex2 = np.array([ints[n][1] for n in ns], dtype=np.uint32).view(np.float32)
    vals, counts = np.unique(dev, return_counts=True)
    with h5py.File(out, "w") as f:
        f.attrs["title"] = "NVIDIA GPU approximate instructions, measured for fp4scope's engine profiles"
        f.attrs["device"] = device
        f.attrs["arch"] = "sm_90"
        f.attrs["command"] = ("OUT=DIR sh scripts/gpu/engines/run.sh (on the GPU machine), then "
                              "python3 scripts/gpu/engines/make_table.py SCAN lib/base/approx/rcp_approx_ftz_sm90.h5")
        f.attrs["producer"] = "scripts/gpu/engines/approx_scan.cu"
        g = f.create_group("rcp_approx_ftz")
        d = g.create_dataset("deviation", data=dev, chunks=(1 << 20,), compression="gzip", compression_opts=9)
        d.attrs["definition"] = ("bits(rcp.approx.ftz.f32(x)) - bits(RN(1/x)) for x = 1 + m * 2^-23, "
                                 "m = 0 .. 2^23-1 (units in the last place)")
        d.attrs["hypothesis"] = ("for every one of the 2^32 float32 inputs rcp.approx.ftz.f32 equals the "
                                 "table's value scaled by the input's exponent and sign, with zero and "
                                 "subnormal inputs -> +-Inf, results below 2^-126 -> +-0, Inf -> +-0, NaN "
                                 "-> 0x7FFFFFFF: 0 mismatches")
        d.attrs["counts"] = "; ".join("%d: %d" % (v, c) for v, c in zip(vals, counts))
        d.attrs["rcp_approx_f32"] = "rcp.approx.f32 has the same table (it differs only for subnormal inputs and results)"
        for name, v in (("ex2_approx_ftz", ex2f), ("ex2_approx", ex2)):
            g = f.create_group(name)
            e = g.create_dataset("integers", data=v)
            e.attrs["definition"] = "%s.f32(n) for n = -160 .. 160" % name.replace("_", ".")
        f.attrs["summary"] = summary
    print("make_table.py: %s: %s" % (out, "; ".join("%d: %d" % (v, c) for v, c in zip(vals, counts))))


if __name__ == "__main__":
    main()
