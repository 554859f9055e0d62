"""Token ids of captured rows: (sequence, position) per activation row.

A forward pass works on a token stream [batch, seq] (flattened: T tokens);
the caller gives its ids once per forward (Capture.tokens). A layer that sees
all T tokens gets them as they are. A routed expert sees a gathered subset,
rows copied bit for bit from the T rows that entered the MoE block: those
rows are found by value (a fingerprint of each row's bits, then a second,
independent fingerprint to confirm), so the ids follow whatever gather the
model code does. Rows with equal bits (the same token and prefix in two
samples of a group) get the ids of their copies in increasing order. An
expert's second GEMM (down_proj) sees no copy of the hidden states: its rows
are those of the same expert's first GEMM call, in the same order, and take
their ids (the most recent call under the same parent with as many rows)."""
import numpy as np

from ._lib import FP4SError

_WEIGHTS = {}


def as_ids(ids):
    """ids as a C-contiguous int64 numpy array [T, 2] (sequence, position).
    Accepts [..., 2] arrays or tensors, or a pair (seq, pos) of arrays of the
    same shape ([batch, seq] position grids included)."""
    try:
        import torch
    except ImportError:
        torch = None

    def np_of(v):
        if torch is not None and isinstance(v, torch.Tensor):
            return v.detach().to("cpu").numpy()
        return np.asarray(v)
    if isinstance(ids, (tuple, list)) and len(ids) == 2 and not np.isscalar(ids[0]):
        s, p = np_of(ids[0]), np_of(ids[1])
        if s.shape != p.shape:
            raise FP4SError(-6, "token ids: sequence %s and position %s arrays differ in shape"
                            % (s.shape, p.shape))
        a = np.stack([s.reshape(-1), p.reshape(-1)], axis=1)
    else:
        a = np_of(ids)
        if a.ndim < 1 or a.shape[-1] != 2:
            raise FP4SError(-6, "token ids: expected [..., 2] (sequence, position), got shape %s" % (a.shape,))
        a = a.reshape(-1, 2)
    if a.dtype.kind not in "iu":
        raise FP4SError(-5, "token ids: integers expected, got %s" % a.dtype)
    return np.ascontiguousarray(a, dtype=np.int64)


def _weights(k, device, which):
    """Random multipliers in [1, 2^20) for rows of k 16-bit words (fixed seed)."""
    import torch
    key = (k, str(device), which)
    w = _WEIGHTS.get(key)
    if w is None:
        g = np.random.default_rng(0x5EED + which).integers(1, 1 << 20, size=k, dtype=np.int64)
        w = torch.from_numpy(g).to(device)
        _WEIGHTS[key] = w
    return w


def fingerprints(x):
    """Two int64 fingerprints of each row of a tensor [R, K] (exact sums of
    the rows' 16-bit words times fixed random multipliers: no overflow for
    K < 2^26 words), as numpy arrays [R]."""
    import torch
    if x.dtype in (torch.bfloat16, torch.float16):
        words = x.contiguous().view(torch.int16).to(torch.int64) & 0xFFFF
    elif x.dtype == torch.float32:
        v = x.contiguous().view(torch.int32).to(torch.int64)
        words = torch.stack([v & 0xFFFF, (v >> 16) & 0xFFFF], dim=-1).reshape(x.shape[0], -1)
    else:
        raise FP4SError(-5, "token ids: rows of dtype %s cannot be identified (float32, float16, "
                        "bfloat16)" % x.dtype)
    k = words.shape[1]
    f1 = (words * _weights(k, words.device, 1)).sum(dim=1)
    f2 = (words * _weights(k, words.device, 2)).sum(dim=1)
    return f1.cpu().numpy(), f2.cpu().numpy()


class TokenIds:
    """The ids of one forward's token stream, and the rows seen so far."""

    def __init__(self, ids):
        self.ids = as_ids(ids)
        self.anchors = {}     # K -> (f1 sorted, order, f2) of the latest full-stream rows of that width
        self.calls = {}       # parent module path -> [(rows, ids)] of identified calls, latest last

    @property
    def tokens(self):
        return self.ids.shape[0]

    def watch(self, x):
        """Record x (any tensor [..., K] whose rows are the whole stream) as
        the rows that gathered expert inputs of width K are copies of."""
        import torch
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.numel() == 0:
            return
        k = x.shape[-1]
        rows = x.detach().reshape(-1, k)
        if rows.shape[0] != self.tokens or x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            return
        f1, f2 = fingerprints(rows)
        order = np.argsort(f1, kind="stable")
        self.anchors[k] = (f1[order], order, f2)

    def _by_value(self, rows):
        a = self.anchors.get(rows.shape[1])
        if a is None:
            return None
        s1, order, a2 = a
        f1, f2 = fingerprints(rows)
        xo = np.argsort(f1, kind="stable")
        xs = f1[xo]
        # rank of each row among the rows with the same fingerprint, in row order
        first = np.searchsorted(xs, xs, side="left")
        rank = np.arange(len(xs)) - first
        pos = np.searchsorted(s1, xs, side="left") + rank
        if len(pos) and (pos.max() >= len(s1) or (s1[np.minimum(pos, len(s1) - 1)] != xs).any()):
            return None
        src = np.empty(len(xs), dtype=np.int64)
        src[xo] = order[pos]
        if (a2[src] != f2).any():
            return None
        return self.ids[src]

    def identify(self, site, x):
        """The ids [R, 2] of the rows of x [..., K] seen at `site`, or raise."""
        k = x.shape[-1]
        rows = x.detach().reshape(-1, k)
        r = rows.shape[0]
        parent = site.rsplit(".", 1)[0] if "." in site else ""
        if r == self.tokens:
            ids = self.ids
            self.watch(rows)
        else:
            ids = self._by_value(rows)
            if ids is None:
                for rr, ii in reversed(self.calls.get(parent, [])):
                    if rr == r:
                        ids = ii
                        break
        if ids is None:
            raise FP4SError(-3, "%s: cannot tell which tokens its %d rows are: they are not the %d tokens of "
                            "the stream given to Capture.tokens(), not copies of rows that entered the "
                            "block (K = %d), and no earlier call under %s had %d rows; give the ids "
                            "explicitly with Capture.put(..., ids=)" % (site, r, self.tokens, k,
                                                                        parent or "the model", r))
        self.calls.setdefault(parent, []).append((r, ids))
        return ids
