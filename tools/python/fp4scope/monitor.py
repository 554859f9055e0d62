"""A live monitor: what 4-bit quantization does to a model's activations,
measured inside the training loop.

    mon = fp4scope.Monitor(model, "nvfp4", "te", every=10, sites="layers.*.mlp.*",
                           logdir="runs/fp4", capture="run.h5")
    for step, batch in enumerate(loader):
        with mon.step(step):
            loss = model(batch).loss
        loss.backward(); opt.step()
        mon.log_probs(lp_trainer, lp_rollout, seq)     # when the step has them
    mon.close()

Every `every` steps (step % every == 0) forward pre-hooks on the selected
linear layers (nn.Linear, QuantLinear included; `sites` a glob of qualified
names, '*' matching dots) take each call's input [..., K] and add its
decomposition, grouped by channel, to the library's exact accumulators: on
the GPU for CUDA tensors (fp4s_cuda_decomp_add on the tensor's device and
current stream; the tensor amax is the one float that comes to the host), on
the CPU's threads otherwise. No activation is copied to the host. Each call
is quantized with its own tensor scale, as the engine's GEMM call would be;
the calls of a site in one step are merged exactly (the same bits for any
order and split). The hooks exist only during monitored steps.

gemms=True sees real model code instead of nn.Linear modules: during
monitored steps fp4scope.capture_gemms' patches (torch.nn.functional.linear,
matmul, mm, bmm, _grouped_mm; see fp4scope.functional) give the Monitor the
input of every GEMM whose weight is a parameter matching `sites` (a 2-D
weight P.weight is the site P, as with nn.Linear, which calls F.linear; an
expert e of a fused 3-D stack P.experts.w the site P.experts.<e>.w). Sites
then appear as they are first called.

At the end of a monitored step (the next step(), end_step() or close()):
  - per site and for the whole model (every site merged): the decomposition's
    fields (relative_error, ratio_scale, ratio_deadzone, ratio_grid,
    deadzone_fraction, clip_fraction, underflow_fraction, snr_db, amax) and,
    per site, the channel statistics: the share of the error energy in the
    top `ratio` of channels (top_share), the channel ranked first and its
    share (hot_channel, hot_share);
  - the log-prob mismatch of the step when log_probs() was given (any step,
    monitored or not): verl's metrics (rollout_corr/k3_kl, ...);
  - scalar() values of the step;
go to TensorBoard (logdir: torch.utils.tensorboard where it imports, else
fp4scope.tensorboard's writer of the event-file format; tags fp4/<site>/
<field>, fp4/all/<field>, mismatch/<verl name>, and the scalar names), to
W&B (wandb=None: when the wandb package is imported and a run is active;
True: required), and to the capture's per-step scalar log (capture: a path
or a fp4scope.Capture; names fp4_<field> for the whole model, the mismatch
metrics under fp4scope's names) with the log-probs: fp4-mismatch reads the
capture (its metrics from the log-probs; --metric fp4_relative_error, loss,
... any scalar by name); fp4-report --metric reads the scalars too, but
needs rollout activations in the capture (side="rollout", stats_only=False).
Monitor.records holds every row (step, site, field values): pandas-ready.

Captures: stats_only=True (the default) keeps the accumulators and per-channel
tables, not the activations: the capture gets the per-step scalars, and
`stats` (default: the capture's path with .stats.h5, or logdir/fp4scope-
stats.h5) an fp4-decompose report (schema fp4scope-decompose/1) of each
site's whole-run accumulator grouped by channel (its per-channel tables) and
the model's roll-up, rewritten at close() and save_stats(). stats_only=False
also puts every monitored call's input into the capture (copied to the host:
that is what a capture of activations is), for the offline tools."""
import fnmatch
import math
import os

from . import _lib
from ._lib import FP4SError, check, lib
from .analysis import Decomposer, MismatchAccumulator, channels_report, decomposer_for
from .quant import Spec, spec_of

FIELDS = ("relative_error", "ratio_scale", "ratio_deadzone", "ratio_grid", "deadzone_fraction",
          "clip_fraction", "underflow_fraction", "snr_db", "amax")


class _GemmSink:
    """What fp4scope.functional's GEMM capture puts rows into, standing in
    for a Capture: the rows of a site go to the Monitor's accumulators."""
    path = "fp4scope.Monitor"
    _tokens = None

    def __init__(self, mon):
        self.mon = mon

    @property
    def current_step(self):
        return self.mon.step_no if self.mon.monitored else None

    def _put_rows(self, step, site, side, rows):
        self.mon._observe(self.mon._site(site), rows)

    def put(self, *args, **kwargs):       # weights: the capture's business, not the Monitor's
        pass

    def _watch(self, x):
        pass


class _Site:
    __slots__ = ("name", "module", "step_acc", "run_acc", "skipped", "calls")

    def __init__(self, name, module):
        self.name, self.module = name, module
        self.step_acc = self.run_acc = None
        self.skipped = None
        self.calls = 0


class Monitor:
    """See the module's description. fmt/profile: the quantizer (a Spec, or
    a format and profile); every: monitor steps that are multiples of it;
    sites: glob of module names; side: the capture side ("trainer" or
    "rollout"); channels: group by channel (False: tensor summaries only);
    ratio: the compensation set of top_share; prefix: the TensorBoard tag
    prefix; gemms: see the functional GEMMs of real model code instead of
    hooking nn.Linear modules."""

    def __init__(self, model, fmt="nvfp4", profile=None, *, every=10, sites="*", logdir=None, capture=None,
                 stats_only=True, stats=None, side="trainer", channels=True, ratio=0.125, wandb=None,
                 prefix="fp4", names="verl", gemms=False):
        import torch
        self.spec = spec_of(fmt, profile)
        if self.spec.format == "fp8":
            raise FP4SError(-10, "Monitor: the decomposition is of MXFP4 and NVFP4 (not FP8)")
        self.every = int(every)
        if self.every < 1:
            raise FP4SError(-11, "Monitor: every = %d, expected >= 1" % self.every)
        if side not in ("trainer", "rollout"):
            raise FP4SError(-1, "Monitor: side must be 'trainer' or 'rollout', not %r" % (side,))
        self.side, self.channels, self.ratio, self.prefix, self.names = side, bool(channels), ratio, prefix, names
        self.by = "channel" if self.channels else "tensor"
        self.sites = {}
        self._model, self._glob, self.gemms = model, sites, bool(gemms)
        self._gemm = None
        if self.gemms:
            from .functional import capture_gemms
            self._sink = _GemmSink(self)
            capture_gemms(self._sink, model, side, names=sites)     # refuses a glob that matches nothing
        else:
            for name, mod in model.named_modules():
                if isinstance(mod, torch.nn.Linear) and name and fnmatch.fnmatchcase(name, sites):
                    self.sites[name] = _Site(name, mod)
            if not self.sites:
                raise FP4SError(-12, "Monitor: no nn.Linear matches '%s'" % sites)
        self._hooks = []
        self.step_no = None
        self.monitored = False
        self._model_acc = None           # the step's whole-model roll-up
        self._run_model_acc = Decomposer.rollup(self.spec, dz_tie="spec")
        self._mm = None
        self._scalars = {}
        self._cap_pending = {}
        self._cap_dirty = False          # log-probs or activations put since the last flush
        self.records = []
        self.closed = False
        # sinks
        self.tb = None
        if logdir is not None:
            from .tensorboard import summary_writer
            os.makedirs(logdir, exist_ok=True)   # the stats report may go there too
            self.tb = summary_writer(logdir)
        self.wandb = _wandb(wandb)
        self.cap = None
        self._own_cap = False
        if capture is not None:
            from .capture import Capture
            if isinstance(capture, Capture):
                self.cap = capture
            else:
                self.cap = Capture(capture, producer="fp4scope.Monitor")
                self._own_cap = True
        self.stats_only = bool(stats_only)
        if stats is None and self.channels:
            if self.cap is not None:
                base = self.cap.path[:-3] if self.cap.path.endswith(".h5") else self.cap.path
                stats = base + ".stats.h5"
            elif logdir is not None:
                stats = os.path.join(logdir, "fp4scope-stats.h5")
        self.stats_path = stats

    # -- steps ---------------------------------------------------------------------
    def step(self, n):
        """Begin training step n (ending the one before). A context manager
        too: `with mon.step(n): ...` ends it at exit."""
        self._end()
        self.step_no = int(n)
        self.monitored = self.step_no % self.every == 0
        if self.monitored:
            self._begin()
        mon = self

        class _Ctx:
            def __enter__(self_inner):
                return mon

            def __exit__(self_inner, *exc):
                mon._end_hooks()
                return False
        return _Ctx()

    def end_step(self):
        """End the current step now (its scalars are written)."""
        self._end()

    def _begin(self):
        self._model_acc = Decomposer.rollup(self.spec)
        if self.gemms:
            from .functional import capture_gemms
            self._gemm = capture_gemms(self._sink, self._model, self.side, names=self._glob)
            self._gemm.__enter__()
            return
        for s in self.sites.values():
            self._hooks.append(s.module.register_forward_pre_hook(self._hook_for(s)))

    def _site(self, name):
        s = self.sites.get(name)
        if s is None:
            s = self.sites[name] = _Site(name, None)
        return s

    def _hook_for(self, site):
        def pre_hook(module, inputs):
            if not inputs:
                return None
            x = inputs[0]
            self._observe(site, x)
            return None
        return pre_hook

    def _observe(self, site, x):
        if x.numel() == 0:
            return
        k = x.shape[-1]
        if k % self.spec.block:
            if site.skipped is None:
                site.skipped = "K = %d is not a multiple of the %s block (%d)" % (k, self.spec.format.upper(),
                                                                                 self.spec.block)
                import warnings
                warnings.warn("fp4scope.Monitor: site %s left out: %s" % (site.name, site.skipped), stacklevel=2)
            return
        try:
            d, v = decomposer_for(x.detach(), self.spec, by=self.by, name=site.name)
        except FP4SError as e:
            # an input the library cannot take as it is (a strided view, a device or
            # dtype it refuses): the site is left out, named, and training goes on
            if site.skipped is None:
                site.skipped = str(e)
                import warnings
                warnings.warn("fp4scope.Monitor: site %s left out: %s" % (site.name, e), stacklevel=2)
            return
        try:
            d.add(v)
            if site.step_acc is None:
                site.step_acc = Decomposer.rollup(self.spec, by=self.by, cols=v.cols)
            site.step_acc.merge(d)
            self._model_acc.merge(d)
        finally:
            d.close()
        site.calls += 1
        if self.cap is not None and not self.stats_only:
            self.cap.put(self.step_no, site.name, self.side, x.detach())
            self._cap_dirty = True

    def _end_hooks(self):
        if self._gemm is not None:
            self._gemm.__exit__(None, None, None)
            self._gemm = None
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def _end(self):
        self._end_hooks()
        if self.step_no is None:
            return
        step = self.step_no
        values = {}
        if self.monitored:
            values.update(self._finish_sites(step))
        if self._mm is not None:
            try:
                m = self._mm.finish(self.names)
                own = {name: own for _, own, name in _metric_names(self.names)}
                for name, v in m.items():
                    if name in own:
                        values["mismatch/" + name] = v
                        self._cap_pending[own[name]] = v
            except FP4SError as e:
                if e.code != -12:   # a step with no counted token: nothing to log
                    raise
            self._mm.close()
            self._mm = None
        for name, v in self._scalars.items():
            values[name] = v
        self._emit(step, values)
        self._scalars = {}
        self.step_no = None
        self.monitored = False

    def _finish_sites(self, step):
        values = {}
        for s in self.sites.values():
            if s.step_acc is None:
                continue
            summ = s.step_acc.summary()
            row = {"step": step, "site": s.name, "calls": s.calls, "tokens": s.step_acc.rows}
            for f in FIELDS:
                row[f] = summ[f]
                values["%s/%s/%s" % (self.prefix, s.name, f)] = summ[f]
            if self.channels:
                rep = channels_report(s.step_acc, None, self.spec, ratio=self.ratio)
                tot = rep["energy_total"]
                ch = rep["channels"]
                top = float(ch["energy_total"][ch["selected"]].sum() / tot) if tot > 0 else float("nan")
                row["top_share"] = top
                row["hot_channel"] = int(ch["channel"][0]) if len(ch["channel"]) else -1
                row["hot_share"] = float(ch["energy_total"][0] / tot) if tot > 0 and len(ch["channel"]) else \
                    float("nan")
                for f in ("top_share", "hot_channel", "hot_share"):
                    values["%s/%s/%s" % (self.prefix, s.name, f)] = row[f]
            self.records.append(row)
            if s.run_acc is None:
                s.run_acc = Decomposer.rollup(self.spec, by=self.by, cols=s.step_acc.cols)
            s.run_acc.merge(s.step_acc)
            s.step_acc.close()
            s.step_acc = None
            s.calls = 0
        if self._model_acc is not None:
            summ = self._model_acc.summary()
            if summ["n"]:
                row = {"step": step, "site": "all"}
                for f in FIELDS:
                    row[f] = summ[f]
                    values["%s/all/%s" % (self.prefix, f)] = summ[f]
                    self._cap_pending["fp4_" + f] = summ[f]
                self.records.append(row)
                self._run_model_acc.merge(self._model_acc)
            self._model_acc.close()
            self._model_acc = None
        return values

    def _emit(self, step, values):
        if self.tb is not None and values:
            for tag, v in values.items():
                self.tb.add_scalar(tag, float(v), step)
            self.tb.flush()
        if self.wandb is not None and values:
            self.wandb.log({t: float(v) for t, v in values.items()}, step=step)
        if self.cap is not None:
            cs = dict(self._cap_pending)
            for name, v in self._scalars.items():
                if _capture_name_ok(name):
                    cs[name] = v
            for name, v in cs.items():
                self.cap.put_scalar(step, name, float(v))
            if cs or self._cap_dirty:
                self.cap.flush()      # the step's crash-safety point
        self._cap_pending = {}
        self._cap_dirty = False

    # -- what the training loop gives ---------------------------------------------------
    def log_probs(self, trainer, rollout, seq, mask=None):
        """Per-token log-probs of the current step (1-D, any device; copied
        to the host, where the mismatch accumulator is): the mismatch metrics
        of the step are logged at its end. May be called several times a step."""
        if self.step_no is None:
            raise FP4SError(-1, "Monitor.log_probs: no step begun (call step(n) first)")
        if self._mm is None:
            self._mm = MismatchAccumulator()
        self._mm.add(trainer, rollout, seq, mask)
        if self.cap is not None:   # log-probs are not activations: kept in both modes
            import numpy as np
            from .analysis import _lp
            self.cap.put_logprobs(self.step_no, _lp(trainer, "trainer", np.float32),
                                  _lp(rollout, "rollout", np.float32), _lp(seq, "seq", np.int64),
                                  mask=None if mask is None else _lp(mask, "mask", np.uint8))
            self._cap_dirty = True

    def scalar(self, name, value):
        """A per-step scalar of the current step (reward, loss, ...): to
        TensorBoard and W&B under its name, and to the capture where the name
        is one a capture takes (1-63 bytes, no '/')."""
        if self.step_no is None:
            raise FP4SError(-1, "Monitor.scalar: no step begun (call step(n) first)")
        self._scalars[str(name)] = float(value)

    # -- results ------------------------------------------------------------------------
    def channels_of(self, site, ratio=None, score="residual", top=0):
        """The whole run's channel report of a site (what fp4-channels
        gives): ranking, coverage, cost. Needs channels=True."""
        s = self.sites.get(site)
        if s is None:
            raise FP4SError(-7, "Monitor: no site %r (sites: %s)" % (site, ", ".join(self.sites)))
        if not self.channels or s.run_acc is None:
            raise FP4SError(-12, "Monitor: site %s has no channel statistics yet" % site)
        return channels_report(s.run_acc, None, self.spec, score=score, top=top,
                               ratio=self.ratio if ratio is None else ratio)

    def summary(self, site=None):
        """The whole run's decomposition summary of a site (None: the model)."""
        if site is None:
            return self._run_model_acc.summary()
        s = self.sites.get(site)
        if s is None or s.run_acc is None:
            raise FP4SError(-7, "Monitor: no statistics of site %r" % (site,))
        return s.run_acc.summary()

    def save_stats(self, path=None):
        """Write the per-site whole-run accumulators (by channel) and the
        model roll-up as an fp4-decompose report (atomically)."""
        path = path or self.stats_path
        if path is None:
            raise FP4SError(-1, "Monitor.save_stats: no path (give stats=, capture= or logdir=)")
        done = [s for s in self.sites.values() if s.run_acc is not None]
        Item = _lib.DecompItem
        _lib.check_size(Item, "fp4s_decomp_item_size")
        items = (Item * len(done))()
        keep = []
        for i, s in enumerate(done):
            b = (s.name.encode(), b"fp4scope.Monitor", self.side.encode())
            keep.append(b)
            items[i].source = b[1]
            items[i].step = -1
            items[i].site = b[0]
            items[i].side = b[2]
            items[i].synthetic = False
            items[i].acc = s.run_acc._d
        check(lib().fp4s_decomp_write_h5(os.fsencode(path), self.spec.ref(), items, len(done),
                                         self._run_model_acc._d))
        return path

    def close(self):
        """End the step, write the stats report, close the writers (and the
        capture the monitor opened)."""
        if self.closed:
            return
        self._end()
        if self.stats_path is not None and any(s.run_acc is not None for s in self.sites.values()):
            self.save_stats()
        if self.tb is not None:
            self.tb.close()
        if self.cap is not None and self._own_cap:
            self.cap.close()
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _capture_name_ok(name):
    b = name.encode("utf-8", "replace")
    return 0 < len(b) <= 63 and "/" not in name and name != "step" and all(ord(ch) >= 32 for ch in name)


def _metric_names(names):
    from .analysis import metric_names
    return metric_names(names)


def _wandb(want):
    if want is False:
        return None
    try:
        import wandb
    except ImportError:
        if want:
            raise FP4SError(-3, "Monitor: wandb=True but the wandb package is not installed")
        return None
    if getattr(wandb, "run", None) is None:
        if want:
            raise FP4SError(-1, "Monitor: wandb=True but no W&B run is active (wandb.init() first)")
        return None
    return wandb
