#!/usr/bin/env python3
"""A corpus of valid HDF5 files as h5py writes them, for tests/io/h5corpus.sh.

    h5corpus.py DIR [CAPTURE]

writes DIR/*.h5 and DIR/manifest.tsv, one line per dataset:

    FILE  PATH  EXPECT  GROUP

EXPECT: 'read' (a float tensor every reader must read), 'empty' (a zero-size
dimension: the readers say the dataset is empty), 'scalar', 'other' (not a
float tensor: strings, integers, compounds; the readers say what they expected),
'nofilter' (a filter libhdf5 does not ship: LZF is h5py's own). GROUP names
the data: every 'read' line of one group holds the same numbers, stored
losslessly, so every reader must see the same values ('-': no group; a name
ending in '~' holds the group's numbers through a lossy filter).

The files cover what h5py can write: the old and the newest file format
(libver earliest / latest: symbol-table and compact/dense link storage, every
chunk index: B-tree v1, single chunk, fixed array, extensible array, B-tree
v2), compact, contiguous, chunked and external storage, every filter libhdf5
ships (deflate, shuffle, Fletcher-32, N-bit, scale-offset, szip where the
library has it), fill values and chunks never written, empty and zero-size
datasets, a user block, variable- and fixed-length strings, attributes in
compact and dense storage, soft, hard, external and dangling links, virtual
datasets, nested groups, big-endian, float16 and float64 data; references,
opaque, boolean, complex, array and variable-length types, dimension scales,
creation-order groups, paged and persistent file space, files a SWMR writer
appended to, and datasets created and never written (a shape far larger than
the file: every element is the fill value).

With CAPTURE, also DIR/cap-<variant>.h5: the capture rewritten dataset by
dataset with each storage and filter (attributes and groups kept), and
DIR/captures.tsv: VARIANT LOSSLESS.
"""
import os
import sys

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t, h5z

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rows = []
rng = np.random.default_rng(24)
BASE = (rng.standard_normal((16, 64)) * 3).astype(np.float32)
BASE[0, :8] = 0.0  # a constant run (scale-offset and N-bit see it)


def note(fname, path, expect, group="-"):
    rows.append((fname, path, expect, group))


def can(filt):
    if not h5z.filter_avail(filt):
        return False
    info = h5z.get_filter_info(filt)
    return bool(info & h5z.FILTER_CONFIG_ENCODE_ENABLED) and bool(info & h5z.FILTER_CONFIG_DECODE_ENABLED)


def low_level(f, name, data, layout=None, chunk=None, nbit=False, ftype=None):
    """A dataset made through the low-level API (compact storage, N-bit)."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    if layout is not None:
        dcpl.set_layout(layout)
    if chunk is not None:
        dcpl.set_chunk(chunk)
    if nbit:
        dcpl.set_filter(h5z.FILTER_NBIT, h5z.FLAG_OPTIONAL, ())  # what H5Pset_nbit does
    tid = ftype if ftype is not None else h5t.py_create(data.dtype)
    space = h5s.create_simple(data.shape)
    ds = h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl)
    ds.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(data))
    ds.close()


def filtered(f, fname, prefix, group, data):
    """One dataset per storage and lossless filter of `data`, and the lossy ones."""
    d = data
    f.create_dataset(prefix + "contiguous", data=d)
    note(fname, "/" + prefix + "contiguous", "read", group)
    low_level(f, prefix + "compact", d, layout=h5d.COMPACT)
    note(fname, "/" + prefix + "compact", "read", group)
    for name, kw in [("chunked", dict(chunks=(4, 32))),
                     ("chunk_whole", dict(chunks=d.shape)),
                     ("chunk_edge", dict(chunks=(5, 24))),  # partial edge chunks
                     ("unlimited", dict(chunks=(4, 64), maxshape=(None, d.shape[1]))),
                     ("unlimited2", dict(chunks=(4, 16), maxshape=(None, None))),
                     ("deflate", dict(compression="gzip", compression_opts=9, chunks=(4, 32))),
                     ("shuffle_deflate", dict(shuffle=True, compression="gzip", chunks=(8, 64))),
                     ("shuffle", dict(shuffle=True, chunks=(8, 64))),
                     ("fletcher32", dict(fletcher32=True, chunks=(4, 64))),
                     ("all", dict(shuffle=True, compression="gzip", fletcher32=True, chunks=(4, 32))),
                     ("scaleoffset_lossless", dict(scaleoffset=None, chunks=(4, 32)))]:
        if name == "scaleoffset_lossless":
            continue  # floats have no lossless scale-offset; the integer case is below
        f.create_dataset(prefix + name, data=d, **kw)
        note(fname, "/" + prefix + name, "read", group)
    if can(h5z.FILTER_SZIP):
        f.create_dataset(prefix + "szip", data=d, compression="szip", compression_opts=("nn", 16), chunks=(8, 64))
        note(fname, "/" + prefix + "szip", "read", group)
        f.create_dataset(prefix + "szip_ec", data=d, compression="szip", compression_opts=("ec", 8),
                         chunks=(4, 64), shuffle=True)
        note(fname, "/" + prefix + "szip_ec", "read", group)
    low_level(f, prefix + "nbit", d, chunk=(4, 64), nbit=True)
    note(fname, "/" + prefix + "nbit", "read", group)
    # lossy: scale-offset with a decimal scale factor (floats), N-bit of a
    # float type with fewer mantissa bits
    f.create_dataset(prefix + "scaleoffset", data=d, scaleoffset=3, chunks=(4, 32))
    note(fname, "/" + prefix + "scaleoffset", "read", group + "~")
    f.create_dataset(prefix + "scaleoffset_deflate", data=d, scaleoffset=2, compression="gzip", chunks=(16, 64))
    note(fname, "/" + prefix + "scaleoffset_deflate", "read", group + "~")
    if d.dtype == np.float32:
        t = h5t.IEEE_F32LE.copy()
        t.set_fields(31, 23, 8, 10, 13)  # sign, exponent at 23 (8 bits), 13-bit mantissa at 10
        t.set_offset(10)  # (the size grows to hold offset + precision)
        t.set_precision(22)
        t.set_size(4)
        low_level(f, prefix + "nbit_short", d, chunk=(8, 64), nbit=True, ftype=t)
        note(fname, "/" + prefix + "nbit_short", "read", group + "~")


def basic(libver):
    fname = "basic-%s.h5" % libver
    with h5py.File(os.path.join(out, fname), "w", libver=libver) as f:
        filtered(f, fname, "f32_", "f32", BASE)
        g = f.create_group("deep/er/still")
        g.create_dataset("x", data=BASE)
        note(fname, "/deep/er/still/x", "read", "f32")
        f.create_dataset("be", data=BASE.astype(">f4"))
        note(fname, "/be", "read", "f32")
        f.create_dataset("f64", data=BASE.astype(np.float64))
        note(fname, "/f64", "read", "f32")
        f.create_dataset("f16", data=BASE.astype(np.float16))
        note(fname, "/f16", "read", "f16")
        f.create_dataset("f16_ref", data=BASE.astype(np.float16).astype(np.float32))
        note(fname, "/f16_ref", "read", "f16")
        f.create_dataset("f16_be", data=BASE.astype(">f2"), chunks=(4, 64), compression="gzip")
        note(fname, "/f16_be", "read", "f16")
        f.create_dataset("rank3", data=BASE.reshape(2, 8, 64), chunks=(1, 4, 64))
        note(fname, "/rank3", "read", "f32")
        f.create_dataset("rank4", data=BASE.reshape(2, 2, 4, 64), compression="gzip")
        note(fname, "/rank4", "read", "f32")
        f.create_dataset("odd", data=BASE[:, :50])  # read with --pad
        note(fname, "/odd", "read")
        f.create_dataset("vector", data=BASE.ravel())
        note(fname, "/vector", "read", "f32")
        # fill values and chunks never written
        f.create_dataset("fill_unwritten", shape=(8, 64), dtype="f4", chunks=(4, 32), fillvalue=1.5)
        note(fname, "/fill_unwritten", "read")
        f.create_dataset("fill_default", shape=(8, 64), dtype="f4", chunks=(4, 64), compression="gzip")
        note(fname, "/fill_default", "read")
        part = f.create_dataset("fill_part", shape=(16, 64), dtype="f4", chunks=(4, 64), fillvalue=-2.0)
        part[4:8] = BASE[4:8]
        note(fname, "/fill_part", "read")
        f.create_dataset("contig_unwritten", shape=(8, 64), dtype="f4")
        note(fname, "/contig_unwritten", "read")
        # empty and zero-size datasets
        for name, shape, kw in [("empty_rows", (0, 64), {}), ("empty_cols", (4, 0), {}),
                                ("empty_1d", (0,), {}), ("empty_mid", (3, 0, 64), {}),
                                ("empty_chunked", (0, 64), dict(chunks=(4, 64), maxshape=(None, 64))),
                                ("empty_chunked_cols", (4, 0), dict(chunks=(4, 8), maxshape=(4, None))),
                                ("empty_deflate", (0, 64), dict(chunks=(4, 64), maxshape=(None, 64),
                                                                compression="gzip")),
                                ("empty_scaleoffset", (0, 64), dict(chunks=(4, 64), maxshape=(None, 64),
                                                                    scaleoffset=2))]:
            f.create_dataset(name, shape=shape, dtype="f4", **kw)
            note(fname, "/" + name, "empty")
        f.create_dataset("null", data=h5py.Empty("f4"))
        note(fname, "/null", "scalar")
        f.create_dataset("scalar", data=np.float32(2.5))
        note(fname, "/scalar", "scalar")
        # what is not a float tensor
        f.create_dataset("ints", data=np.arange(64, dtype=np.int32).reshape(2, 32))
        note(fname, "/ints", "other")
        f.create_dataset("ints_so", data=np.arange(128, dtype=np.int32).reshape(2, 64), scaleoffset=0,
                         chunks=(1, 64))
        note(fname, "/ints_so", "other")
        f.create_dataset("strings", data=np.array(["a", "bc", "déf"], dtype=h5py.string_dtype()))
        note(fname, "/strings", "other")
        f.create_dataset("fixed", data=np.array([b"abc", b"de"], dtype="S4"))
        note(fname, "/fixed", "other")
        comp = np.zeros(4, dtype=[("a", "f4"), ("b", "i8")])
        f.create_dataset("compound", data=comp)
        note(fname, "/compound", "other")
        f.create_dataset("enum", data=np.array([0, 1, 1], dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1")))
        note(fname, "/enum", "other")
        f.create_dataset("vlen_floats", data=np.array([np.arange(3, dtype="f4"), np.arange(5, dtype="f4")],
                                                      dtype=object), dtype=h5py.vlen_dtype("f4"))
        note(fname, "/vlen_floats", "other")
        # attributes: every kind, compact and (new format, many) dense storage
        a = f["f32_contiguous"].attrs
        a["text"] = "variable-length UTF-8 ✓"
        a["bytes"] = np.bytes_(b"fixed ascii")
        a["num"] = 3.25
        a["arr"] = np.arange(10, dtype=np.float32)
        a["empty_arr"] = np.zeros((0,), dtype=np.float32)
        a["strs"] = np.array(["x", "yy"], dtype=h5py.string_dtype())
        a["null"] = h5py.Empty("f8")
        for i in range(40):
            f["f32_chunked"].attrs["a%02d" % i] = i
        f.attrs["producer"] = "h5py corpus"
        f.attrs["created"] = "2026"
        # links
        f["hard"] = f["f32_contiguous"]
        note(fname, "/hard", "read", "f32")
        f["soft"] = h5py.SoftLink("/f32_chunked")
        note(fname, "/soft", "read", "f32")
        f["dangling"] = h5py.SoftLink("/nowhere")
        f["external_missing"] = h5py.ExternalLink("no-such-file.h5", "/x")
        # a group with many links (dense link storage in the newest format)
        many = f.create_group("many")
        for i in range(30):
            many.create_dataset("d%02d" % i, data=BASE[i % 16:i % 16 + 1])
        note(fname, "/many/d07", "read")


def special():
    # a user block before the HDF5 signature
    fname = "userblock.h5"
    with h5py.File(os.path.join(out, fname), "w", userblock_size=1024) as f:
        f["x"] = BASE
        note(fname, "/x", "read", "f32")
    # external raw storage: the data lives in another file beside it
    fname = "external.h5"
    raw = os.path.join(out, "external.raw")
    with h5py.File(os.path.join(out, fname), "w") as f:
        f.create_dataset("x", shape=BASE.shape, dtype="f4", external=[(raw, 0, BASE.nbytes)])
        f["x"][...] = BASE
        note(fname, "/x", "read", "f32")
    # a virtual dataset over two source files
    # (holding far more data than the file itself: 16 sources of 16 x 64)
    srcs = []
    for k in range(16):
        sname = "vds-src%d.h5" % k
        with h5py.File(os.path.join(out, sname), "w") as f:
            f["part"] = BASE
        srcs.append(sname)
    fname = "vds.h5"
    layout = h5py.VirtualLayout(shape=(256, 64), dtype="f4")
    for k, sname in enumerate(srcs):
        layout[16 * k:16 * (k + 1)] = h5py.VirtualSource(sname, "part", shape=(16, 64))
    with h5py.File(os.path.join(out, fname), "w", libver="latest") as f:
        f.create_virtual_dataset("v", layout, fillvalue=0)
        note(fname, "/v", "read")
    # LZF: h5py's own filter, which libhdf5 does not ship
    fname = "lzf.h5"
    with h5py.File(os.path.join(out, fname), "w") as f:
        # (data LZF compresses: an optional filter that does not pay is skipped)
        f.create_dataset("x", data=np.tile(BASE[:1, :8], (16, 8)), compression="lzf", chunks=(4, 64))
        note(fname, "/x", "nofilter")
        f["plain"] = BASE
        note(fname, "/plain", "read", "f32")
    # one file holding only empty datasets, as the reproducer (x beside an empty one)
    fname = "repro.h5"
    with h5py.File(os.path.join(out, fname), "w") as f:
        f["x"] = BASE
        f.create_dataset("e", shape=(4, 0), dtype="f4")
        note(fname, "/x", "read", "f32")
        note(fname, "/e", "empty")


def more():
    """What else h5py writes: other datatypes, group and file-space options,
    SWMR, dimension scales, and datasets created and never written."""
    def one(fname, fn, **kw):
        with h5py.File(os.path.join(out, fname), "w", **kw) as f:
            f["x"] = BASE
            note(fname, "/x", "read", "f32")
            fn(f)

    def types(f):
        f.create_dataset("ref", data=np.array([f["x"].ref] * 3, dtype=h5py.ref_dtype))
        note("types.h5", "/ref", "other")
        f.create_dataset("regref", data=np.array([f["x"].regionref[0:2, 0:3]], dtype=h5py.regionref_dtype))
        note("types.h5", "/regref", "other")
        f["x"].attrs["self"] = f["x"].ref
        f.create_dataset("opaque", data=np.array([b"ab", b"cd"], dtype="V2"))
        note("types.h5", "/opaque", "other")
        f.create_dataset("bool", data=np.array([True, False]))
        note("types.h5", "/bool", "other")
        f.create_dataset("complex", data=np.ones((4, 4), dtype="c8"))
        note("types.h5", "/complex", "other")
        f.create_dataset("vlen_ints", data=np.array([np.arange(3), np.arange(0)], dtype=object),
                         dtype=h5py.vlen_dtype("i4"))
        note("types.h5", "/vlen_ints", "other")
        f.create_dataset("vlen_ascii", data=np.array([b"x", b"yy"], dtype=h5py.string_dtype("ascii")))
        note("types.h5", "/vlen_ascii", "other")
        f.create_dataset("vlen_chunked", data=np.array(["a", "bb"] * 100, dtype=h5py.string_dtype()),
                         chunks=(16,), compression="gzip")
        note("types.h5", "/vlen_chunked", "other")
        f["x"].attrs.create("long_text", data=np.array(["a" * 100000, "b"], dtype=h5py.string_dtype()))
        at = h5t.array_create(h5t.IEEE_F32LE, (3,))  # elements that are arrays (H5T_ARRAY)
        ds = h5d.create(f.id, b"farray", at, h5s.create_simple((4,)))
        ds.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(BASE[:4, :3]), mtype=at)
        ds.close()
        note("types.h5", "/farray", "other")
        f["scale"] = np.arange(16.0)
        f["scale"].make_scale("rows")
        f["x"].dims[0].attach_scale(f["scale"])
        note("types.h5", "/scale", "read")
    one("types.h5", types)
    one("trackorder.h5", lambda f: (f.create_group("g", track_order=True).create_dataset("y", data=BASE),
                                     note("trackorder.h5", "/g/y", "read", "f32")), track_order=True)
    one("page.h5", lambda f: (f.create_dataset("y", data=BASE, chunks=(4, 64)),
                               note("page.h5", "/y", "read", "f32")),
        fs_strategy="page", fs_persist=True, fs_page_size=4096, libver="latest")
    one("fsm.h5", lambda f: None, fs_strategy="fsm", fs_persist=True, fs_threshold=1)
    one("v108.h5", lambda f: None, libver=("v108", "v108"))
    one("v110.h5", lambda f: None, libver=("v110", "v110"))
    one("bigattr.h5", lambda f: f["x"].attrs.create("big", data=np.zeros(40000)), libver="latest")

    # created and never written: every element is the fill value, and the
    # shape claims far more than the file holds (before: "damaged: its shape
    # ... claims more data than the file stores", the whole file refused)
    def unwritten(f):
        f.create_dataset("big_chunked", shape=(1 << 20, 4096), dtype="f4", chunks=(64, 4096))
        f.create_dataset("big_contiguous", shape=(1 << 18, 4096), dtype="f4")
        f.create_dataset("big_fill", shape=(1 << 16, 4096), dtype="f4", chunks=(16, 4096), fillvalue=7.0,
                         compression="gzip")
    one("unwritten.h5", unwritten)
    one("unwritten-latest.h5", unwritten, libver="latest")

    # written by a SWMR writer (appended in steps, flushed)
    fname = "swmr.h5"
    with h5py.File(os.path.join(out, fname), "w", libver="latest") as f:
        d = f.create_dataset("x", shape=(0, 64), maxshape=(None, 64), chunks=(4, 64), dtype="f4")
        f.swmr_mode = True
        for r in range(0, 16, 4):
            d.resize((r + 4, 64))
            d[r:r + 4] = BASE[r:r + 4]
            d.flush()
    note(fname, "/x", "read", "f32")


basic("earliest")
basic("latest")
special()
more()
with open(os.path.join(out, "manifest.tsv"), "w") as m:
    for r in rows:
        m.write("\t".join(r) + "\n")

# ---- the capture, rewritten with each storage and filter --------------------------------
if len(sys.argv) > 2:
    cap = sys.argv[2]
    variants = [("contiguous", True, {}), ("compact", True, None), ("chunked", True, dict(chunks=True)),
                ("deflate", True, dict(compression="gzip", shuffle=True)),
                ("fletcher32", True, dict(fletcher32=True)),
                ("nbit", True, "nbit"), ("scaleoffset", False, dict(scaleoffset=3)),
                ("latest", True, dict(compression="gzip"))]
    if can(h5z.FILTER_SZIP):
        variants.append(("szip", True, dict(compression="szip")))
    lines = []
    with h5py.File(cap, "r") as src:
        for name, lossless, kw in variants:
            path = os.path.join(out, "cap-%s.h5" % name)
            with h5py.File(path, "w", libver="latest" if name == "latest" else "earliest") as dst:
                for k, v in src.attrs.items():
                    dst.attrs[k] = v

                def copy(objname, obj):
                    if isinstance(obj, h5py.Group):
                        g = dst.require_group(objname)
                        for k, v in obj.attrs.items():
                            g.attrs[k] = v
                        return
                    data = obj[()]
                    parent = dst.require_group(os.path.dirname(objname) or "/")
                    base = os.path.basename(objname)
                    if kw is None and data.nbytes < 60000 and data.ndim >= 1:
                        low_level(parent, base, data, layout=h5d.COMPACT)
                    elif kw == "nbit" and data.ndim >= 1 and data.size:
                        low_level(parent, base, data, chunk=tuple(max(1, min(s, 64)) for s in data.shape),
                                  nbit=True)
                    elif isinstance(kw, dict) and data.ndim >= 1 and data.size:
                        opts = dict(kw)
                        if "scaleoffset" in opts and data.dtype.kind in "iu":
                            opts["scaleoffset"] = 0  # lossless for integers
                        if "scaleoffset" in opts and data.dtype.kind not in "iuf":
                            del opts["scaleoffset"]
                        if "compression" in opts and opts["compression"] == "szip" and data.dtype.kind not in "iuf":
                            del opts["compression"]
                        mx = obj.maxshape if obj.chunks else None
                        parent.create_dataset(base, data=data, maxshape=mx, **opts)
                    else:
                        parent.create_dataset(base, data=data)
                    for k, v in obj.attrs.items():
                        parent[base].attrs[k] = v

                src.visititems(copy)
            lines.append("%s\t%s\n" % (name, "lossless" if lossless else "lossy"))
    with open(os.path.join(out, "captures.tsv"), "w") as m:
        m.writelines(lines)
