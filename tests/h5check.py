#!/usr/bin/env python3
"""The tests' stand-in for h5diff and h5ls where hdf5-tools is not installed
(the GPU machine has h5py but not the HDF5 command-line tools).

    h5check.py same A B   exit 0 when A and B hold the same groups, datasets
                          (dtype, shape and every byte of the data) and
                          attributes (dtype, shape, bytes); 1 and the
                          differences otherwise.
    h5check.py read F     exit 0 when every object and attribute of F can be
                          read; 1 and the reason otherwise.
"""
import sys

import h5py
import numpy as np


def objects(f):
    """name -> object for every group and dataset, the root included."""
    out = {"/": f}
    f.visititems(lambda name, obj: out.__setitem__("/" + name, obj))
    return out


def raw(value):
    a = np.asarray(value)
    if a.dtype.kind == "O":  # variable-length strings
        return a.dtype.str, a.shape, repr(a.tolist()).encode()
    return a.dtype.str, a.shape, a.tobytes()


def same(pa, pb):
    diffs = []
    with h5py.File(pa, "r") as fa, h5py.File(pb, "r") as fb:
        oa, ob = objects(fa), objects(fb)
        for name in sorted(set(oa) ^ set(ob)):
            diffs.append(f"{name}: only in {pa if name in oa else pb}")
        for name in sorted(set(oa) & set(ob)):
            a, b = oa[name], ob[name]
            if isinstance(a, h5py.Dataset) != isinstance(b, h5py.Dataset):
                diffs.append(f"{name}: a dataset in one file, a group in the other")
                continue
            if isinstance(a, h5py.Dataset) and raw(a[()]) != raw(b[()]):
                diffs.append(f"{name}: the data differ ({a.dtype} {a.shape} vs {b.dtype} {b.shape})")
            ka, kb = set(a.attrs), set(b.attrs)
            for k in sorted(ka ^ kb):
                diffs.append(f"{name}: attribute {k} only in {pa if k in ka else pb}")
            for k in sorted(ka & kb):
                if raw(a.attrs[k]) != raw(b.attrs[k]):
                    diffs.append(f"{name}: attribute {k} differs ({a.attrs[k]!r} vs {b.attrs[k]!r})")
    for d in diffs[:20]:
        print(d)
    return 1 if diffs else 0


def read(path):
    with h5py.File(path, "r") as f:
        for obj in objects(f).values():
            if isinstance(obj, h5py.Dataset):
                obj[()]
            for k in obj.attrs:
                obj.attrs[k]
    return 0


def main(argv):
    try:
        if len(argv) == 4 and argv[1] == "same":
            return same(argv[2], argv[3])
        if len(argv) == 3 and argv[1] == "read":
            return read(argv[2])
    except (OSError, KeyError, ValueError) as e:
        print(f"{argv[-1]}: {e}")
        return 1
    print("usage: h5check.py same A B | h5check.py read FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
