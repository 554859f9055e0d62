"""Import torch.save dumps (.pt, .pth, .bin) into a capture, bit for bit.

    python3 -m fp4scope.pt DUMP.pt... -o CAP.h5 --step N --side SIDE [--site TEMPLATE]
        [--names GLOB] [--const] [-a] [--overwrite]

What fp4-capture import does for .npy, safetensors and HDF5, for what PyTorch
users have: the file is read with torch.load(map_location="cpu",
weights_only=True) (no code in the file runs), every floating-point tensor
found in it (nested dicts and lists are walked; names join keys with '.':
{"layers.0": {"x": t}} is layers.0.x, lists add their index) is appended to
/steps/N/SITE/SIDE as float32, float16 or bfloat16 exactly as stored, its
last dimension K ([..., K] flattened to rows; a 1-D tensor is one row).
Other objects (integer tensors, numbers, strings) are skipped and listed on
standard error. SITE is --site with {name} the tensor's name and {stem} the
file's stem (default {name}); --names GLOB (fnmatch) selects tensors.
--const with --side weight stores once under /weights/SITE. -a appends to
CAP.h5 (created if missing); otherwise CAP.h5 must not exist unless
--overwrite. Exit status: 0 ok, 2 usage, 3 a dump unreadable or holding no
selected tensor, 4 the capture not written."""
import argparse
import fnmatch
import os
import sys

from ._lib import FP4SError, check, lib
from .capture import CONST_STEP, Capture


def tensors(obj, prefix=""):
    """(name, tensor) of every tensor in obj, nested dicts and lists walked;
    other leaves as (name, None)."""
    import torch
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors(v, "%s.%s" % (prefix, k) if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors(v, "%s.%d" % (prefix, i) if prefix else str(i))
    else:
        yield prefix, None


def load(path):
    """torch.load without running code from the file (weights_only)."""
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:   # a PyTorch without weights_only (< 1.13)
        raise FP4SError(-5, "%s: this PyTorch cannot load without running the file's code (weights_only); "
                        "use PyTorch 1.13 or later" % path)


def convert(paths, out, step=None, side="rollout", site="{name}", names="*", const=False, append=False,
            overwrite=False, log=sys.stderr):
    """Import the tensors of torch.save dumps into the capture `out`. Returns
    the number of tensors written."""
    import torch
    if side not in ("trainer", "rollout", "weight"):
        raise ValueError("side must be trainer, rollout or weight")
    if const and side != "weight":
        raise ValueError("--const needs --side weight")
    if not const and step is None:
        raise ValueError("--step N is required (or --const with --side weight)")
    found = []
    for p in paths:
        try:
            obj = load(p)
        except FP4SError:
            raise
        except Exception as e:
            raise FP4SError(-4, "%s: cannot load as a torch.save file: %s" % (p, e))
        stem = os.path.splitext(os.path.basename(p))[0]
        n = 0
        for name, t in tensors(obj):
            if not fnmatch.fnmatchcase(name, names):
                continue
            if t is None or t.dtype not in (torch.float32, torch.float16, torch.bfloat16) or t.numel() == 0:
                what = "not a tensor" if t is None else "%s tensor" % t.dtype if t.numel() else "empty"
                print("fp4scope.pt: %s: %s: %s, skipped" % (p, name or "(top)", what), file=log)
                continue
            found.append((site.replace("{name}", name).replace("{stem}", stem), t))
            n += 1
        if n == 0:
            raise FP4SError(-7, "%s: no float32, float16 or bfloat16 tensor matches '%s'" % (p, names))
    # one K and dtype per site, before anything is written
    seen = {}
    for s, t in found:
        k = (t.shape[-1], t.dtype)
        if seen.setdefault(s, k) != k:
            raise FP4SError(-6, "site %s: tensors of K %d (%s) and K %d (%s) would share it; use --site "
                            "with {name}" % (s, seen[s][0], seen[s][1], k[0], k[1]))
    if append:
        existed = os.path.exists(out)
        cap = Capture(out, mode="a", producer="fp4scope.pt")
        try:
            for s, t in found:
                cap.put(CONST_STEP if const else int(step), s, side, t)
        except BaseException:
            cap.abort()          # the capture as it was (a new one removed)
            if not existed:
                os.unlink(out)
            raise
        cap.close()
    else:
        # a new capture through a temporary beside it, renamed into place at the end
        if os.path.exists(out) and not overwrite:
            raise FP4SError(-8, "%s: already exists (--overwrite replaces it, -a appends)" % out)
        tmp = "%s.tmp.%d" % (out, os.getpid())
        try:
            with Capture(tmp, mode="w", overwrite=True, producer="fp4scope.pt") as cap:
                for s, t in found:
                    cap.put(CONST_STEP if const else int(step), s, side, t)
            check(lib().fp4s_file_commit(tmp.encode(), out.encode(), bool(overwrite)))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return len(found)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m fp4scope.pt",
                                 description="Import torch.save dumps into an fp4scope capture, bit for bit.")
    ap.add_argument("dumps", nargs="+", metavar="DUMP.pt")
    ap.add_argument("-o", "--output", required=True, metavar="CAP.h5")
    ap.add_argument("--step", type=int)
    ap.add_argument("--side", required=True, choices=["trainer", "rollout", "weight"])
    ap.add_argument("--site", default="{name}", metavar="TEMPLATE")
    ap.add_argument("--names", default="*", metavar="GLOB")
    ap.add_argument("--const", action="store_true")
    ap.add_argument("-a", "--append", action="store_true")
    ap.add_argument("--overwrite", action="store_true")
    a = ap.parse_args(argv)
    try:
        n = convert(a.dumps, a.output, a.step, a.side, a.site, a.names, a.const, a.append, a.overwrite)
    except ValueError as e:
        ap.error(str(e))
    except FP4SError as e:
        print("fp4scope.pt: %s" % e, file=sys.stderr)
        return 4 if e.code in (-8, -16) else 3 if e.code in (-1, -3, -4, -5, -6, -7, -12) else 5
    print("fp4scope.pt: %d tensors into %s" % (n, a.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
