"""One-byte corruptions of a capture at its metadata, through every tool.

    corrupt.py CAPTURE N [--seed S] [--out DIR] [--timeout T] [--keep-failures] [--raw]

The raw-data bytes of every dataset are located with h5py (chunk by chunk);
every other byte of the file is metadata (superblock, object headers,
B-trees, heaps, the global heap that holds variable-length strings), and
the live part of it lies within 8 bytes of a non-zero byte (the writer's
large B-tree nodes and heaps are mostly zero fill). N offsets are drawn
among the live metadata bytes, each in one of four categories by the
structure signature it lies after (superblock, GCOL global heap, group
structures TREE/SNOD/HEAP, and the rest: object headers and others), the
byte at each replaced by a different random value, and the copy is handed
to fp4-capture ls, ls --check, merge and import, fp4-decompose,
fp4-channels, fp4-mismatch and fp4-quant, each under a time limit. A run
passes when every tool exits 0, 1 (a failed --check) or 3 (input refused)
and the corrupted copy is byte for byte what it was before the tools ran
(no tool writes to its input). Prints a JSON summary; exit status 1 when
any run died by a signal, ran past the limit, exited otherwise or changed
its input. Tools are found on PATH.

--raw corrupts the raw data instead (one byte of a dataset's stored chunks or
contiguous data): no tool may fail then, but a run that exits 0 and prints
other output than on the pristine file has given other numbers silently; the
summary counts those (wrong_output_exit_0) and the refusals. A capture written
with Fletcher-32 checksums (fp4-capture import --checksum, checksum=True in
Python) refuses every such copy whose data a tool reads."""
import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import h5py


def raw_ranges(path):
    """(offset, size) of every dataset's stored raw data."""
    out = []

    def visit(name, obj):
        if not isinstance(obj, h5py.Dataset):
            return
        dsid = obj.id
        if obj.chunks:
            for i in range(dsid.get_num_chunks()):
                info = dsid.get_chunk_info(i)
                if info.byte_offset is not None and info.size:
                    out.append((info.byte_offset, info.size))
        else:
            off = dsid.get_offset()
            if off is not None:
                out.append((off, dsid.get_storage_size()))
    with h5py.File(path, "r") as f:
        f.visititems(visit)
        # the datasets a tool is pointed at
        act = sorted(n for n in _datasets(f) if n.endswith("/rollout") and "/logprobs/" not in n)
        wts = sorted(n for n in _datasets(f) if n.startswith("weights/") or n.endswith("/weight"))
    return out, act, wts


def _datasets(f):
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return names


SIGS = {b"GCOL": "global-heap", b"TREE": "group-structure", b"SNOD": "group-structure",
        b"HEAP": "group-structure", b"OHDR": "object-header", b"OCHK": "object-header",
        b"BTHD": "other", b"BTIN": "other", b"BTLF": "other", b"FRHP": "other", b"FHDB": "other",
        b"FHIB": "other", b"FSHD": "other", b"FSSE": "other"}


def categories(data, raw):
    """Category of every metadata byte: by the last structure signature before it."""
    israw = bytearray(len(data))
    for off, size in raw:
        israw[off:off + size] = b"\x01" * min(size, len(data) - off)
    starts = []
    for sig, cat in SIGS.items():
        i = data.find(sig)
        while i >= 0:
            if not israw[i]:
                starts.append((i, cat))
            i = data.find(sig, i + 1)
    starts.sort()
    sb_end = 96  # superblock v0 with its root symbol table entry
    cat_of = {}
    k = 0
    cur = "object-header"
    # live metadata: skip the zero fill of the large, mostly unused nodes and
    # heaps the writer allocates (a byte counts when a non-zero byte lies
    # within 8 bytes of it)
    live = bytearray(len(data))
    for off in range(len(data)):
        if data[off] and not israw[off]:
            live[max(0, off - 8):off + 9] = b"\x01" * (min(len(data), off + 9) - max(0, off - 8))
    for off in range(len(data)):
        if israw[off] or not live[off]:
            continue
        while k < len(starts) and starts[k][0] <= off:
            cur = starts[k][1]
            k += 1
        cat_of[off] = "superblock" if off < sb_end else cur
    return cat_of


def run(cmd, timeout, cwd):
    try:
        p = subprocess.run(cmd, cwd=cwd, timeout=timeout, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, errors="replace")
        return p.returncode, p.stderr[-2000:], p.stdout
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--keep-failures", action="store_true")
    ap.add_argument("--raw", action="store_true", help="corrupt raw data bytes, not metadata")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    pristine = open(a.capture, "rb").read()
    raw, act, wts = raw_ranges(a.capture)
    if a.raw:
        cats = {}
        for off, size in raw:
            for o in range(off, min(off + size, len(pristine))):
                cats[o] = "raw-data"
    else:
        cats = categories(pristine, raw)
    by_cat = collections.defaultdict(list)
    for off, c in cats.items():
        by_cat[c].append(off)
    names = sorted(by_cat)
    work = tempfile.mkdtemp(prefix="fp4s-corrupt-")
    keep = a.out or work
    os.makedirs(keep, exist_ok=True)
    site = act[0] if act else None
    weight = wts[0] if wts else None
    tools = [
        ("ls", lambda F: ["fp4-capture", "ls", F]),
        ("ls-check", lambda F: ["fp4-capture", "ls", "--check", "--json", F]),
        ("merge", lambda F: ["fp4-capture", "merge", F, "-o", "m.h5"]),
        ("decompose", lambda F: ["fp4-decompose", "--sites", "*", F]),
        ("mismatch", lambda F: ["fp4-mismatch", F]),
    ]
    if site:
        tools += [("import", lambda F: ["fp4-capture", "import", F + ":/" + site, "-o", "i.h5", "--step", "0",
                                        "--side", "rollout"]),
                  ("channels", lambda F: ["fp4-channels", F + ":/" + site])]
    if weight:
        tools += [("quant", lambda F: ["fp4-quant", F + ":/" + weight])]
    tried = collections.Counter()
    codes = collections.defaultdict(collections.Counter)
    failures = []
    signals = hangs = other = changed = wrong = 0
    ref = {}
    if a.raw:  # each tool's output on the pristine file (twice: only what repeats is compared)
        d = os.path.join(work, "r")
        for _ in range(2):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            F = os.path.join(d, "c.h5")
            shutil.copyfile(a.capture, F)
            for name, mk in tools:
                rc, err, out = run(mk(F), a.timeout, d)
                ref.setdefault(name, []).append((rc, out))
        ref = {k: v[0][1] for k, v in ref.items() if v[0] == v[1] and v[0][0] == 0}
    for i in range(a.n):
        cat = names[i % len(names)]
        off = rng.choice(by_cat[cat])
        val = rng.randrange(255)
        if val >= pristine[off]:
            val += 1
        data = bytearray(pristine)
        data[off] = val
        d = os.path.join(work, "r")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        F = os.path.join(d, "c.h5")
        with open(F, "wb") as f:
            f.write(data)
        digest = hashlib.sha256(data).digest()
        tried[cat] += 1
        for name, mk in tools:
            rc, err, out = run(mk(F), a.timeout, d)
            codes[name][str(rc)] += 1
            bad = None
            if rc == "timeout":
                hangs += 1
                bad = "ran past %g s" % a.timeout
            elif rc < 0 or rc >= 128:
                signals += 1
                bad = "signal %d" % (-rc if rc < 0 else rc - 128)
            elif rc not in (0, 1, 3):
                other += 1
                bad = "exit %d" % rc
            elif "HDF5-DIAG" in err or "\nHDF5:" in "\n" + err:
                other += 1
                bad = "libhdf5 printed to stderr"
            elif a.raw and rc == 0 and name in ref and out != ref[name]:
                wrong += 1  # other numbers, exit 0: not a failure of the tool, counted
            if hashlib.sha256(open(F, "rb").read()).digest() != digest:
                changed += 1
                bad = (bad + "; " if bad else "") + "the input changed"
            if bad:
                failures.append({"offset": off, "byte": val, "was": pristine[off], "category": cat,
                                 "tool": name, "problem": bad, "stderr": err})
                if a.keep_failures:
                    with open(os.path.join(keep, "fail-%d-%s.h5" % (off, name)), "wb") as f:
                        f.write(data)
    shutil.rmtree(os.path.join(work, "r"), ignore_errors=True)
    summary = {"capture": a.capture, "corruptions": a.n, "seed": a.seed, "metadata_bytes": len(cats),
               "tried_per_category": dict(tried), "tool_runs": sum(sum(c.values()) for c in codes.values()),
               "exit_codes": {k: dict(v) for k, v in codes.items()}, "signals": signals, "hangs": hangs,
               "other_exits": other, "inputs_changed": changed, "failures": failures[:50]}
    if a.raw:
        summary["compared_tools"] = sorted(ref)
        summary["wrong_output_exit_0"] = wrong
    print(json.dumps(summary, indent=1))
    if not a.keep_failures and not a.out:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if signals or hangs or other or changed else 0)


if __name__ == "__main__":
    main()
