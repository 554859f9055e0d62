"""Capture inside a rollout engine's worker: the inputs of the engine's own
linear layers, as its quantized kernels receive them.

vLLM runs every linear layer through its layer's quantization method:
LinearBase.forward calls self.quant_method.apply(self, x, bias), where
apply(self, layer, x, bias=None) is the method of LinearMethodBase that every
method (UnquantizedLinearMethod, ModelOptNvFp4LinearMethod, the
compressed-tensors schemes, ...) implements, and each layer knows its module
path as layer.prefix ("model.layers.0.self_attn.qkv_proj"). Checked in
vllm-project/vllm vllm/model_executor/layers/linear.py (commit 0036d38de46c).
wrap_apply() wraps a method class's apply to put x (the activation before the
method quantizes it) under the site layer.prefix; patch_vllm() does it for
LinearMethodBase and every subclass imported so far, and for those defined
later (a subclass hook), once per process.

vLLM loads "general plugins" in every process it starts, workers included:
vllm.plugins.load_general_plugins() calls, once per process, every function
registered under the entry-point group "vllm.general_plugins" (vllm/plugins/
__init__.py, commit 01425553bdbe). vllm_plugin() is such a function: with
FP4SCOPE_CAPTURE=/path/run.h5 in the environment of the engine, each worker
writes its own capture /path/run.<pid>.h5 (one writer per file; join them with
fp4-capture merge or give the tools all of them). The step the rows go to is
read from FP4SCOPE_CAPTURE_STEP, or from the file FP4SCOPE_CAPTURE_STEP_FILE
(an integer, rewritten by the trainer at each step; re-read when it changes),
default 0. FP4SCOPE_CAPTURE_SITES (a glob, default every layer) selects
sites, FP4SCOPE_CAPTURE_SIDE the side (default rollout), and
FP4SCOPE_CAPTURE_MAX_ROWS (default 65536) bounds the rows kept per site and
step. Register it in the package that is installed in the engine's
environment:

    [project.entry-points."vllm.general_plugins"]
    fp4scope_capture = "fp4scope.engine:vllm_plugin"

or, for an engine in the same process (LLM(..., enforce_eager=True) with
VLLM_ENABLE_V1_MULTIPROCESSING=0), call patch_vllm(cap) yourself. CUDA graphs
and torch.compile replay kernels without running Python: capture with
enforce_eager=True."""
import os

from ._lib import FP4SError

_state = {"cap": None, "classes": set(), "opts": None}


class _Opts:
    def __init__(self, side="rollout", names="*", max_rows=65536, step=None, step_file=None):
        self.side, self.names, self.max_rows = side, names, int(max_rows)
        self.step, self.step_file = step, step_file
        self.mtime = None
        self.rows = {}

    def current_step(self, cap):
        if self.step_file:
            try:
                st = os.stat(self.step_file)
                if st.st_mtime_ns != self.mtime:
                    self.mtime = st.st_mtime_ns
                    with open(self.step_file) as f:
                        self.step = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
        s = 0 if self.step is None else int(self.step)
        if cap.current_step != s:
            cap.step(s)
            self.rows = {}
        return s


def _capture(layer, x):
    import fnmatch
    cap, o = _state["cap"], _state["opts"]
    if cap is None or x is None or not hasattr(x, "shape") or x.numel() == 0:
        return
    site = getattr(layer, "prefix", "") or type(layer).__name__
    if not fnmatch.fnmatchcase(site, o.names):
        return
    step = o.current_step(cap)
    rows = x.detach().reshape(-1, x.shape[-1])
    have = o.rows.get(site, 0)
    if have >= o.max_rows:
        return
    rows = rows[:o.max_rows - have]
    o.rows[site] = have + rows.shape[0]
    cap._put_rows(step, site, o.side, rows)


def wrap_apply(cls):
    """Wrap cls.apply(self, layer, x, bias=None) (vLLM's linear method
    signature) so that x is captured first. Idempotent per class."""
    if cls in _state["classes"] or "apply" not in cls.__dict__:
        return
    orig = cls.__dict__["apply"]

    def apply(self, layer, x, *args, **kwargs):
        # only the outermost apply captures (a subclass's apply may call its parent's)
        outer = not _state.get("inside")
        if outer:
            _capture(layer, x)
            _state["inside"] = True
        try:
            return orig(self, layer, x, *args, **kwargs)
        finally:
            if outer:
                _state["inside"] = False
    apply.__wrapped__ = orig
    cls.apply = apply
    _state["classes"].add(cls)


def _all_subclasses(cls):
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        for s in c.__subclasses__():
            if s not in out:
                out.append(s)
                todo.append(s)
    return out


def patch_methods(base, cap, side="rollout", names="*", max_rows=65536, step=None, step_file=None):
    """Capture the input of every apply() of `base` (a linear-method base
    class: apply(self, layer, x, bias=None)) and of its subclasses, now and
    defined later, into cap. Returns the classes wrapped so far."""
    _state["cap"] = cap
    _state["opts"] = _Opts(side, names, max_rows, step, step_file)
    for c in [base] + _all_subclasses(base):
        wrap_apply(c)
    if not getattr(base, "_fp4scope_hooked", False):
        prev = base.__dict__.get("__init_subclass__")

        def init_subclass(sub, **kw):
            if prev is not None:
                prev.__func__(sub, **kw)
            else:
                super(base, sub).__init_subclass__(**kw)
            wrap_apply(sub)
        base.__init_subclass__ = classmethod(init_subclass)
        base._fp4scope_hooked = True
    return sorted(c.__name__ for c in _state["classes"])


def patch_vllm(cap, side="rollout", names="*", max_rows=65536, step=None, step_file=None):
    """patch_methods on vLLM's LinearMethodBase (imports vLLM)."""
    from vllm.model_executor.layers.linear import LinearMethodBase
    return patch_methods(LinearMethodBase, cap, side, names, max_rows, step, step_file)


def vllm_plugin():
    """The vllm.general_plugins entry point: see the module's help. Does
    nothing unless FP4SCOPE_CAPTURE is set; safe to call several times."""
    path = os.environ.get("FP4SCOPE_CAPTURE")
    if not path or _state["cap"] is not None:
        return
    from .capture import Capture
    base, ext = os.path.splitext(path)
    cap = Capture("%s.%d%s" % (base, os.getpid(), ext or ".h5"), mode="a")
    step = os.environ.get("FP4SCOPE_CAPTURE_STEP")
    try:
        patch_vllm(cap, side=os.environ.get("FP4SCOPE_CAPTURE_SIDE", "rollout"),
                   names=os.environ.get("FP4SCOPE_CAPTURE_SITES", "*"),
                   max_rows=int(os.environ.get("FP4SCOPE_CAPTURE_MAX_ROWS", "65536")),
                   step=int(step) if step else None, step_file=os.environ.get("FP4SCOPE_CAPTURE_STEP_FILE"))
    except ImportError as e:
        cap.close()
        raise FP4SError(-3, "FP4SCOPE_CAPTURE is set but vLLM cannot be imported: %s" % e)
    import atexit
    atexit.register(cap.close)
