"""The analyses on tensors, as plain dicts and numpy arrays (pandas-ready:
pd.DataFrame(d["channels"]), pd.DataFrame(remedy(...))): the numbers
fp4-decompose, fp4-channels, fp4-compare, fp4-remedy and fp4-mismatch print,
through the same library calls.

    decompose(x, "nvfp4", "te")            the three-way error decomposition
    channels(x, w, "nvfp4", "te")          per-channel ranking, coverage, cost
    compare(x_rollout, x_trainer, w, ...)  why rollout and trainer disagree
    remedy(x, w, "none,rac:0.125", ...)    remedies on one linear site
    mismatch(lp_trainer, lp_rollout, seq)  the log-prob metrics, verl's names

decompose and channels run on CUDA tensors on the GPU (the library's
decomposition kernels, the tensor's device and current stream, into the same
exact accumulators: the same bits as on the CPU); compare and remedy take CPU
tensors (the library computes them on the host: fp4-remedy's --device cuda
runs its GEMMs through cuBLAS from there, device="cuda" here); mismatch takes
log-probs anywhere (they are copied to the host: the accumulator is there).
Where the library takes float32, bfloat16 and float16 CPU values are widened
first (exactly; a copy of that size)."""
import ctypes

import numpy as np

from . import _lib
from ._lib import DT_BF16, DT_F16, DT_F32, FP4SError, check, cstr, lib
from ._tensor import check_block, is_torch, same_device, view, where
from .quant import Spec, _cpu_chunks, _cuda_check, _device_ctx, _stream, spec_of

_BY = {"tensor": _lib.GROUP_TENSOR, "block": _lib.GROUP_BLOCK, "row": _lib.GROUP_ROW,
       "channel": _lib.GROUP_CHANNEL}
_DZ = {"spec": 0, "in": 1, "out": 2}
_SCORES = {"residual": 0, "relative": 1, "hcp": 2, "deadzone": 3}


def _choice(value, table, what):
    if value not in table:
        raise FP4SError(-1, "%s %r: expected one of %s" % (what, value, ", ".join(table)))
    return table[value]


class Decomposer:
    """The library's decomposition accumulator (fp4s_decomp) of one spec and
    tensor scale: add rows of tensors (CPU, or CUDA on the GPU), merge others
    into it, read its summary, groups and histograms. Decomposer.rollup(spec,
    by="tensor") takes only merges (by="channel": channel groups of any rows,
    the K of the first)."""

    def __init__(self, spec, ts=None, rows=0, cols=0, by="tensor", dz_tie="spec", _handle=None):
        self.spec = spec
        self._d = ctypes.c_void_p()
        if _handle is not None:
            self._d = _handle
            return
        o = _lib.DecompOpts()
        _lib.check_size(_lib.DecompOpts, "fp4s_decomp_opts_size")
        lib().fp4s_decomp_opts_defaults(ctypes.byref(o))
        o.by = _choice(by, _BY, "by")
        o.dz_tie = _choice(dz_tie, _DZ, "dz_tie")
        check(lib().fp4s_decomp_open(spec.ref(), None if ts is None else ctypes.byref(ts), ctypes.byref(o),
                                     rows, cols, ctypes.byref(self._d)))

    @classmethod
    def rollup(cls, spec, by="tensor", cols=0, dz_tie="spec"):
        return cls(spec, None, 0, cols if by == "channel" else 0, by=by, dz_tie=dz_tie)

    def add(self, v, row0=0):
        """Add a View's rows (CPU float32 as they are; bfloat16/float16
        widened; CUDA through fp4s_cuda_decomp_add on its stream)."""
        L = lib()
        if v.cuda:
            with _device_ctx(v):
                check(L.fp4s_cuda_decomp_add(self._d, v.dtype, v.ptr, v.rows, v.ld, row0, _stream(v)))
            return
        for r0, n, p, ld in _cpu_chunks(self.spec, v):
            check(L.fp4s_decomp_add(self._d, p, n, ld, row0 + r0))

    def merge(self, other):
        check(lib().fp4s_decomp_merge(self._d, other._d))

    @property
    def rows(self):
        return int(lib().fp4s_decomp_rows(self._d))

    @property
    def cols(self):
        return int(lib().fp4s_decomp_cols(self._d))

    def summary(self):
        buf = _lib._decomp_result_type()()
        check(lib().fp4s_decomp_summary(self._d, buf))
        return _lib.decomp_result_dict(buf)

    def groups(self):
        """Every group's result as {field: numpy array} (empty for by=tensor)."""
        L = lib()
        n = L.fp4s_decomp_ngroups(self._d)
        fields = _lib.decomp_fields()
        cols = {name: np.empty(n, np.uint64 if cnt else np.float64) for name, cnt, _, _ in fields}
        buf = _lib._decomp_result_type()()
        for i in range(n):
            check(L.fp4s_decomp_group(self._d, i, buf))
            for k, val in _lib.decomp_result_dict(buf, fields).items():
                cols[k][i] = val
        return cols

    def hist(self, kind):
        """{"edges": float64 [161], "counts": uint64 [160]} of "delta" or "error"."""
        h = _lib.DecompHist()
        _lib.check_size(_lib.DecompHist, "fp4s_decomp_hist_size")
        check(lib().fp4s_decomp_hist_get(self._d, {"delta": _lib.HIST_DELTA, "error": _lib.HIST_ERROR}[kind],
                                         ctypes.byref(h)))
        return {"edges": np.linspace(h.lo, h.hi, _lib.HIST_BINS + 1),
                "counts": np.ctypeslib.as_array(h.counts).astype(np.uint64)}

    def close(self):
        if self._d:
            lib().fp4s_decomp_close(ctypes.byref(self._d))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def decomposer_for(x, spec, by="tensor", dz_tie="spec", amax=None, name="x", rows=None):
    """A Decomposer for tensor x with its tensor scale (from amax, default x's
    own largest finite |x|, after the RHT where the spec has it), and x's View."""
    from .quant import _tscale
    v = view(x, name)
    check_block(v, spec.block, spec.format.upper())
    if v.cuda:
        _cuda_check(spec, v)
    ts, _ = _tscale(spec, v, amax)
    return Decomposer(spec, ts, v.rows if rows is None else rows, v.cols, by=by, dz_tie=dz_tie), v


def decompose(x, fmt="nvfp4", profile=None, *, by="tensor", dz_tie="spec", amax=None, name="x"):
    """The three-way decomposition of x's quantization error (fp4-decompose):
    a dict of the summary fields (fp4-decompose's names), "hist_delta" and
    "hist_error" ({"edges", "counts"}) and, with by = "block", "row" or
    "channel", "groups" ({field: array}, one entry per group)."""
    spec = spec_of(fmt, profile)
    d, v = decomposer_for(x, spec, by=by, dz_tie=dz_tie, amax=amax, name=name)
    try:
        if v.numel:
            d.add(v)
        out = d.summary()
        out["hist_delta"] = d.hist("delta")
        out["hist_error"] = d.hist("error")
        if by != "tensor":
            out["groups"] = d.groups()
        return out
    finally:
        d.close()


def _channels_opts(score, top, ratio, weight_tile2d, n_out, dz_tie):
    o = _lib.ChannelsOpts()
    _lib.check_size(_lib.ChannelsOpts, "fp4s_channels_opts_size")
    lib().fp4s_channels_opts_defaults(ctypes.byref(o))
    o.score = _choice(score, _SCORES, "score")
    o.top = int(top)
    if ratio is not None:
        o.ratio = float(ratio)
    o.weight_tile2d = int(weight_tile2d)
    o.n_out = int(n_out)
    o.decomp.dz_tie = _choice(dz_tie, _DZ, "dz_tie")
    return o


def channels_report(act, weight, spec, score="residual", top=0, ratio=0.125, weight_tile2d=-1, n_out=0,
                    dz_tie="spec"):
    """fp4s_channels_rank of two channel Decomposers (weight may be None) as a dict."""
    L = lib()
    o = _channels_opts(score, top, ratio, weight_tile2d, n_out, dz_tie)
    rep = ctypes.c_void_p()
    check(L.fp4s_channels_rank(act._d, None if weight is None else weight._d, ctypes.byref(o), ctypes.byref(rep)))
    try:
        return _read_report(rep)
    finally:
        L.fp4s_channels_free(ctypes.byref(rep))


def _report_type():
    """fp4s_channels_report: the head, then two fp4s_decomp_result (of the
    library's size, 8-byte aligned as the C struct has them) around the
    weight's fields, then the cost."""
    R = lib().fp4s_decomp_result_size()
    blob = ctypes.c_uint64 * ((R + 7) // 8)
    return type("ChannelsReport", (ctypes.Structure,), {"_fields_": list(_lib.ChannelsReportHead._fields_) + [
        ("summary", blob), ("have_weight", ctypes.c_bool), ("weight_rows", ctypes.c_size_t),
        ("weight_tile2d", ctypes.c_bool), ("weight_summary", blob), ("cost", _lib.ChannelsCost)]})


def _read_report(rep):
    R = lib().fp4s_decomp_result_size()
    r = ctypes.cast(rep, ctypes.POINTER(_report_type())).contents
    _lib.check_size(_lib.ChannelStat, "fp4s_channel_stat_size")
    k = r.k
    names = [n for n, _ in _lib.ChannelStat._fields_ if n != "reserved"]
    chans = {n: [] for n in names}
    for i in range(k):
        c = r.ch[i]
        for n in names:
            chans[n].append(getattr(c, n))
    ints = ("channel", "rank", "n", "nonfinite")
    table = {n: np.asarray(vals, dtype=np.int64 if n in ints else (bool if n == "selected" else np.float64))
             for n, vals in chans.items()}
    out = {"k": k, "tokens": r.tokens, "count": r.count, "energy_total": r.energy_total,
           "score": [s for s, i in _SCORES.items() if i == r.score][0],
           "channels": table,
           "selected_channels": table["channel"][table["selected"]].astype(np.int64),
           "coverage": {"ratio": np.array([r.coverage[i].ratio for i in range(r.ncoverage)]),
                        "channels": np.array([r.coverage[i].channels for i in range(r.ncoverage)], np.int64),
                        "share": np.array([r.coverage[i].share for i in range(r.ncoverage)])},
           "summary": _lib.decomp_result_dict(bytes(r.summary)[:R]),
           "weight_summary": _lib.decomp_result_dict(bytes(r.weight_summary)[:R]) if r.have_weight else None,
           "cost": {n: getattr(r.cost, n) for n, _ in _lib.ChannelsCost._fields_}}
    return out


def channels(x, weight=None, fmt="nvfp4", profile=None, *, score="residual", top=0, ratio=0.125,
             weight_tile2d=-1, n_out=0, dz_tie="spec"):
    """Per-channel statistics of activations x [tokens, K] (and the weight
    [N, K] of the layer they feed), the ranking by score, the compensation
    set (top channels, or ceil(ratio K)), its coverage curve and cost
    (fp4-channels). "channels" is the table, best first."""
    spec = spec_of(fmt, profile)
    o = _channels_opts(score, top, ratio, weight_tile2d, n_out, dz_tie)
    act, av = decomposer_for(x, spec, by="channel", dz_tie=dz_tie, name="x")
    w = None
    try:
        if weight is not None:
            ws = Spec(spec)
            lib().fp4s_channels_weight_spec(spec.ref(), ctypes.byref(o), ws.ref())
            w, wv = decomposer_for(weight, ws, by="channel", dz_tie=dz_tie, name="weight")
            same_device([av, wv])
            if wv.cols != av.cols:
                raise FP4SError(-6, "weight: K = %d, x: K = %d" % (wv.cols, av.cols))
            if wv.numel:
                w.add(wv)
        if av.numel:
            act.add(av)
        return channels_report(act, w, spec, score, top, ratio, weight_tile2d, n_out, dz_tie)
    finally:
        act.close()
        if w is not None:
            w.close()


def _host_f32(x, name, rows_cols=None):
    """x as a C-contiguous float32 numpy view for the library's host
    analyses (bfloat16/float16 widened: a copy)."""
    v = view(x, name, cuda=False)
    if not v.contiguous:
        raise FP4SError(-6, "%s: rows with a stride (%d > %d): the library takes packed rows here; pass a "
                        "contiguous tensor" % (name, v.ld, v.cols))
    if v.dtype == DT_F32:
        a = x.detach().numpy() if v.kind == "torch" else x
        return np.ascontiguousarray(a).reshape(v.rows, v.cols), v
    a = np.empty((v.rows, v.cols), np.float32)
    conv = lib().fp4s_bf16_to_f32 if v.dtype == DT_BF16 else lib().fp4s_fp16_to_f32
    conv(v.ptr, a.ctypes.data, v.rows * v.cols)
    return a, v


def _weight_spec(act, tile2d):
    from .quant import Spec
    w = Spec(act)
    lib().fp4s_remedy_weight_spec(act.ref(), int(tile2d), w.ref())
    return w


def compare(rollout, trainer, weight, fmt="nvfp4", profile=None, *, weight_tile2d=-1, dz_tie="spec"):
    """fp4-compare on one site: the mismatch of the rollout's W4A4 output
    against the asymmetric-QAT trainer, D = Qa(X_r) Qw(W)^T - X_t Qw(W)^T,
    split exactly by component (input, scale, deadzone, grid; routing, the
    tokens one side alone routed to an MoE expert, is 0 here: the two sides
    hold the same tokens) and channel. rollout and trainer: [m, K]
    activations of the same tokens; weight [N, K]."""
    spec = spec_of(fmt, profile)
    wt = _weight_spec(spec, weight_tile2d)
    xr, vr = _host_f32(rollout, "rollout")
    xt, vt = _host_f32(trainer, "trainer")
    w, vw = _host_f32(weight, "weight")
    if vr.shape != vt.shape:
        raise FP4SError(-6, "rollout %s and trainer %s: the same tokens and K expected" % (vr.shape, vt.shape))
    if vw.cols != vr.cols:
        raise FP4SError(-6, "weight: K = %d, rollout: K = %d" % (vw.cols, vr.cols))
    check_block(vr, spec.block, spec.format.upper())
    o = _lib.CompareOpts()
    _lib.check_size(_lib.CompareOpts, "fp4s_compare_opts_size")
    lib().fp4s_compare_opts_defaults(ctypes.byref(o))
    o.dz_tie = _choice(dz_tie, _DZ, "dz_tie")
    s = _lib.CompareSite()
    _lib.check_size(_lib.CompareSite, "fp4s_compare_site_size")
    check(lib().fp4s_compare_eval(spec.ref(), wt.ref(), xr.ctypes.data, xt.ctypes.data, vr.rows, w.ctypes.data,
                                  vw.rows, vr.cols, ctypes.byref(o), ctypes.byref(s)))
    try:
        k = s.k
        comps = [lib().fp4s_cmp_component_name(i).decode() for i in range(_lib.CMP_COUNT)]
        out = {n: getattr(s, n) for n in ("m", "n", "k", "input_rel_diff", "code_flips", "scale_flips",
                                          "tscale_rel_diff", "amplification", "mismatch2", "ref2", "mismatch_rel")}
        out["contrib"] = {comps[i]: s.contrib[i] for i in range(_lib.CMP_COUNT)}
        arr = lambda p, n: np.ctypeslib.as_array(p, shape=(n,)).copy() if n else np.zeros(0)
        ch = {"channel": np.arange(k), "input_rel_diff": arr(s.ch_input_rel_diff, k),
              "code_flips": arr(s.ch_code_flips, k), "scale_flips": arr(s.ch_scale_flips, k),
              "amplification": arr(s.ch_amplification, k)}
        contrib = arr(s.ch_contrib, k * _lib.CMP_COUNT).reshape(k, _lib.CMP_COUNT)
        energy = arr(s.ch_energy, k * _lib.CMP_COUNT).reshape(k, _lib.CMP_COUNT)
        for i, cname in enumerate(comps):
            ch["contrib_" + cname] = contrib[:, i].copy()
            ch["energy_" + cname] = energy[:, i].copy()
        out["channels"] = ch
        return out
    finally:
        lib().fp4s_compare_site_free(ctypes.byref(s))


def remedy(x, weight, remedies="none", fmt="nvfp4", profile=None, *, trainer=None, weight_tile2d=-1,
           device="cpu", decompose=True, dz_tie="spec"):
    """fp4-remedy on one linear site: each remedy of the list (fp4-remedy's
    grammar: "none,rac:0.125,mbs:128,wfq") applied to Y = X W^T, a list of
    dicts (one per remedy: "remedy" its label, then fp4-remedy's fields).
    trainer: the trainer's activations of the same tokens (else X)."""
    spec = spec_of(fmt, profile)
    wt = _weight_spec(spec, weight_tile2d)
    X, vx = _host_f32(x, "x")
    W, vw = _host_f32(weight, "weight")
    Xt = None
    if trainer is not None:
        Xt, vt = _host_f32(trainer, "trainer")
        if vt.shape != vx.shape:
            raise FP4SError(-6, "trainer %s and x %s: the same tokens and K expected" % (vt.shape, vx.shape))
    if vw.cols != vx.cols:
        raise FP4SError(-6, "weight: K = %d, x: K = %d" % (vw.cols, vx.cols))
    check_block(vx, spec.block, spec.format.upper())
    L = lib()
    arr = ctypes.c_void_p()
    n = ctypes.c_size_t()
    check(L.fp4s_remedy_list_parse(cstr(remedies, "remedies"), ctypes.byref(arr), ctypes.byref(n)))
    o = _lib.RemedyEvalOpts()
    _lib.check_size(_lib.RemedyEvalOpts, "fp4s_remedy_eval_opts_size")
    L.fp4s_remedy_eval_opts_defaults(ctypes.byref(o))
    o.device = _choice(device, {"cpu": 0, "cuda": 1, "auto": 2}, "device")
    o.decompose = bool(decompose)
    o.dz_tie = _choice(dz_tie, _DZ, "dz_tie")
    site = (ctypes.c_uint8 * L.fp4s_remedy_site_size())()
    rsz = L.fp4s_remedy_result_size()
    res = (ctypes.c_uint8 * (rsz * n.value))()
    try:
        check(L.fp4s_remedy_eval(arr, n.value, spec.ref(), wt.ref(), X.ctypes.data,
                                 None if Xt is None else Xt.ctypes.data, vx.rows, W.ctypes.data, vw.rows,
                                 vx.cols, ctypes.byref(o), site, res))
        try:
            nf = ctypes.c_size_t()
            fields = L.fp4s_remedy_fields(ctypes.byref(nf))
            rows = []
            base = ctypes.addressof(res)
            for i in range(n.value):
                rp = base + i * rsz
                row = {"remedy": L.fp4s_remedy_label(rp).decode()}
                for j in range(nf.value):
                    row[fields[j].name.decode()] = fields[j].get(ctypes.addressof(site), rp)
                rows.append(row)
            return rows
        finally:
            L.fp4s_remedy_results_free(res, n.value)
    finally:
        _lib.libc_free(arr)


_NAMES = {"fp4scope": 0, "verl": 1, "slime": 2, "nemo-rl": 3, "nemo": 3}


def metric_names(names="verl"):
    """[(metric id, fp4scope name, the framework's name)] for every metric:
    the framework's name where it logs an exact equivalent, else fp4scope's."""
    fw = _choice(names, _NAMES, "names")
    L = lib()
    out = []
    for i in range(L.fp4s_mm_metric_count()):
        own = L.fp4s_mm_metric_name(i).decode()
        alias = L.fp4s_mm_metric_alias(i, fw)
        out.append((i, own, alias.decode() if alias else own))
    return out


class MismatchAccumulator:
    """The library's log-prob mismatch accumulator (fp4s_mm_acc) of one step."""

    def __init__(self, is_cap=2.0, clamp=20.0, allow_positive=False):
        o = _lib.MmOpts()
        _lib.check_size(_lib.MmOpts, "fp4s_mm_opts_size")
        lib().fp4s_mm_opts_defaults(ctypes.byref(o))
        o.is_cap, o.clamp, o.allow_positive = float(is_cap), float(clamp), bool(allow_positive)
        self._a = ctypes.c_void_p()
        check(lib().fp4s_mm_acc_open(ctypes.byref(o), ctypes.byref(self._a)))

    def add(self, trainer, rollout, seq, mask=None):
        t, r = _lp(trainer, "trainer", np.float64), _lp(rollout, "rollout", np.float64)
        s = _lp(seq, "seq", np.int64)
        m = None if mask is None else _lp(mask, "mask", np.uint8)
        n = t.shape[0]
        for nm, a in (("rollout", r), ("seq", s), ("mask", m)):
            if a is not None and a.shape[0] != n:
                raise FP4SError(-6, "%s has %d entries, trainer %d" % (nm, a.shape[0], n))
        check(lib().fp4s_mm_acc_add(self._a, n, t.ctypes.data, r.ctypes.data, s.ctypes.data,
                                    None if m is None else m.ctypes.data, None))

    def finish(self, names="verl"):
        m = _lib.MmMetrics()
        _lib.check_size(_lib.MmMetrics, "fp4s_mm_metrics_size")
        check(lib().fp4s_mm_acc_finish(self._a, ctypes.byref(m)))
        out = {"tokens": m.tokens, "sequences": m.sequences, "masked": m.masked, "nonfinite": m.nonfinite}
        for i, own, name in metric_names(names):
            out[name] = lib().fp4s_mm_metric_value(ctypes.byref(m), i)
        return out

    def reset(self):
        lib().fp4s_mm_acc_reset(self._a)

    def close(self):
        if self._a:
            lib().fp4s_mm_acc_close(ctypes.byref(self._a))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _lp(a, name, dt):
    """A 1-D host array of dtype dt from a tensor or array anywhere (log-probs
    are small: copied to the host, where the accumulator is)."""
    if is_torch(a):
        t = a.detach()
        if t.is_complex():
            raise FP4SError(-5, "%s: complex values" % name)
        a = t.cpu().numpy() if t.dtype != _torch_bf16() else t.float().cpu().numpy()
    a = np.asarray(a)
    if a.dtype.kind not in "fiub":
        raise FP4SError(-5, "%s: dtype %s is not numeric" % (name, a.dtype))
    if np.dtype(dt).kind in "iu" and a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise FP4SError(-5, "%s: holds values that are not integers" % name)
    return np.ascontiguousarray(a.reshape(-1), dtype=dt)


def _torch_bf16():
    import torch
    return torch.bfloat16


def mismatch(trainer, rollout, seq, mask=None, *, names="verl", is_cap=2.0, clamp=20.0):
    """The rollout / trainer log-prob mismatch metrics of one step
    (fp4-mismatch's formulas): a dict by the framework's metric names (verl's
    by default: "rollout_corr/k3_kl", ...; fp4scope's own for the metrics it
    has no name for), with tokens, sequences, masked and nonfinite counts.
    trainer, rollout: per-token log-probs (1-D, any device); seq: the
    sequence of each token; mask: 1 = counted."""
    a = MismatchAccumulator(is_cap=is_cap, clamp=clamp)
    try:
        a.add(trainer, rollout, seq, mask)
        return a.finish(names)
    finally:
        a.close()
