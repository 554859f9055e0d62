"""Capture what real model code runs: the inputs of its GEMMs, at the
functional level, and of modules that are not torch.nn.Linear.

    with cap.step(s), cap.tokens(ids), fp4scope.capture_gemms(cap, model, "rollout", names="*experts*"):
        model(x)

capture_gemms patches, for the duration of the block, the functions model
code multiplies by its weights with: torch.nn.functional.linear, torch.matmul
(and the @ operator), torch.mm, torch.bmm and, where PyTorch has it,
torch._grouped_mm. A call whose weight operand is one of the model's
parameters (or a view of one: a slice W[e] of a fused 3-D expert stack, a
transpose) is captured: its activation rows go to the site named after the
parameter, its weight (as [N, K]: out features by the reduction dimension K)
to /weights/<site> when weights=True. Calls on other tensors (attention's
q @ k^T, a LoRA's small matrices if they are not selected) are left alone.

Sites. A 2-D parameter P.weight is the site P (the module path, as
hook_linears names it). A fused expert stack P.experts.gate_up_proj of shape
[E, a, b] is split by expert: its expert e is the site
P.experts.<e>.gate_up_proj (the expert index is inserted after the last
"experts" component of the path, or ".experts.<e>" is appended when there is
none), so captures of fused and per-expert model code name the same
experts alike and fp4scope-capture(5)'s expert attribute is set.

Experts. F.linear(x, W[e]) and x @ W[e] (a loop over experts, transformers'
eager experts) give expert e the rows of x. A batched call over the whole
stack, torch.bmm(X, W) or X @ W with X [E, T, K], gives expert e the rows of
X[e]: when every token is run through every expert (gpt-oss's inference
path: the stream repeated E times) only the rows of the tokens routed to e
are kept, from the routing the experts module was called with (its
router_indices / top_k_index / selected_experts / topk_ids argument, seen by
a wrapper of its forward); rows of capacity padding (copies of no token of
the stream) are dropped when token ids are given (the expert's second GEMM
keeps the rows its first kept). Without token ids a padded pack is captured
whole. torch._grouped_mm(X, W,
offs=...) gives expert e the rows offs[e-1]:offs[e].

Token ids: with Capture.tokens() given, each captured row gets the id of its
token (fp4scope.tokens explains how rows are identified), so the trainer's
and the rollout's experts can be paired by token and routing flips counted.

Only eager code is seen: a model compiled with torch.compile or replayed from
a CUDA graph runs none of the patched functions (capture with compilation
off: vLLM's enforce_eager=True). The patches are process-wide while the block
runs; one capture_gemms at a time."""
import fnmatch
import inspect

from ._lib import FP4SError
from .capture import CONST_STEP

_ROUTING_ARGS = ("router_indices", "top_k_index", "selected_experts", "topk_ids", "topk_idx", "expert_indices")
_active = None


def _storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:   # PyTorch < 2.0
        return t.storage().data_ptr()


def expert_site(path, e, leaf=None):
    """The site of expert e of a fused parameter or grouped module at `path`
    (leaf: the parameter's name when path is its module)."""
    parts = path.split(".")
    if leaf is None:
        parts, leaf = parts[:-1], parts[-1]
    if "experts" in parts:
        i = len(parts) - 1 - parts[::-1].index("experts")
        parts = parts[:i + 1] + [str(e)] + parts[i + 1:]
    else:
        parts = parts + ["experts", str(e)]
    return ".".join(parts + [leaf])


class _Param:
    def __init__(self, name, p):
        self.name, self.p = name, p
        self.site = name[:-len(".weight")] if name.endswith(".weight") and p.dim() == 2 else name


class _GemmCapture:
    def __init__(self, cap, model, side, names, weights):
        import torch
        if side not in ("trainer", "rollout"):
            raise ValueError("side must be 'trainer' or 'rollout'")
        self.cap, self.model, self.side, self.names, self.weights = cap, model, side, names, weights
        self.params = {}
        for name, p in model.named_parameters():
            if p.dim() not in (2, 3):
                continue
            rec = _Param(name, p)
            base = rec.site
            if not (fnmatch.fnmatchcase(base, names) or fnmatch.fnmatchcase(name, names)):
                continue
            self.params.setdefault(_storage_ptr(p), []).append(rec)
        if not self.params:
            raise FP4SError(-12, "%s: no 2-D or 3-D parameter of the model matches '%s'" % (cap.path, names))
        self.torch = torch
        self.weights_put = set()
        self.last_keep = {}
        self.saved = []
        self.routing = None
        self.busy = False

    # -- which parameter a weight operand is ------------------------------------------------
    def lookup(self, w):
        """(record, expert index or None for a whole 2-D weight, or "stack") for a
        tensor w that views one of the selected parameters, else None."""
        torch = self.torch
        if not isinstance(w, torch.Tensor) or w.dim() not in (2, 3):
            return None
        recs = self.params.get(_storage_ptr(w))
        if not recs:
            return None
        for r in recs:
            p = r.p
            off = w.storage_offset() - p.storage_offset()
            if p.dim() == 2:
                if w.dim() == 2 and off == 0 and sorted(w.shape) == sorted(p.shape):
                    return r, None
            else:
                if w.dim() == 3 and off == 0 and w.shape[0] == p.shape[0]:
                    return r, "stack"
                if w.dim() == 2 and off >= 0 and off % p.stride(0) == 0 and off // p.stride(0) < p.shape[0]:
                    return r, off // p.stride(0)
        return None

    # -- putting rows ----------------------------------------------------------------------
    def put(self, site, x, w_nk):
        """Rows x [..., K] of a site with its weight [N, K] (a view; copied only once)."""
        cap = self.cap
        if cap.current_step is None:
            raise FP4SError(-1, "%s: captured GEMM %s called before capture.step(n)" % (cap.path, site))
        rows = x.detach().reshape(-1, x.shape[-1])
        if rows.shape[0] == 0:
            return
        cap._put_rows(cap.current_step, site, self.side, rows)
        if self.weights and site not in self.weights_put:
            self.weights_put.add(site)
            cap.put(CONST_STEP, site, "weight", w_nk.detach())

    def site_of(self, rec, e):
        if e is None:
            return rec.site
        path = rec.name
        mod, leaf = path.rsplit(".", 1) if "." in path else ("", path)
        return expert_site(mod, e, leaf) if mod else expert_site(leaf, e)

    def linear(self, x, w):
        """x @ w^T with w [N, K] (or a slice of a stack): F.linear's operands."""
        hit = self.lookup(w)
        if hit is None or w.dim() != 2:
            return
        rec, e = hit
        self.put(self.site_of(rec, e), x, w)

    def matmul(self, x, w):
        """x @ w with w [K, N] (2-D), or a stack [E, K, N] against x [E, T, K]."""
        hit = self.lookup(w)
        if hit is None:
            return
        rec, e = hit
        if e == "stack":
            if x.dim() != 3 or x.shape[0] != w.shape[0]:
                return
            for i in range(w.shape[0]):
                self.put_expert_rows(rec, i, x[i], w[i].transpose(0, 1))
        elif w.dim() == 2:
            self.put(self.site_of(rec, e), x, w.transpose(0, 1))

    def put_expert_rows(self, rec, e, rows, w_nk):
        """Rows of one expert in a batched call: the routed tokens only."""
        cap = self.cap
        site = self.site_of(rec, e)
        parent = site.rsplit(".", 1)[0]
        routing = self.routing
        keep = None
        if routing is not None and rows.shape[0] == routing.shape[0]:
            # every token through every expert: keep those routed to e
            keep = (routing == e).any(dim=-1)
        elif cap._tokens is not None:
            # capacity packs: keep the rows that are copies of a token; an
            # expert's second GEMM (no copies of the stream) keeps what its
            # first batched call of the same shape kept
            flat = rows.detach().reshape(-1, rows.shape[-1])
            if cap._tokens._by_value(flat) is None:
                if rows.shape[-1] in cap._tokens.anchors:
                    keep = self._copies(rows)
                else:
                    keep = self.last_keep.get((parent, e, rows.shape[0]))
        if keep is not None:
            self.last_keep[(parent, e, rows.shape[0])] = keep
            rows = rows[keep]
        self.put(site, rows, w_nk)

    def _copies(self, rows):
        """Mask of the rows that are copies of rows of the token stream."""
        import numpy as np
        from .tokens import fingerprints
        torch = self.torch
        a = self.cap._tokens.anchors.get(rows.shape[-1])
        if a is None:
            return torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
        s1 = a[0]
        f1, _ = fingerprints(rows.detach().reshape(-1, rows.shape[-1]))
        pos = np.searchsorted(s1, f1)
        ok = (pos < len(s1)) & (s1[np.minimum(pos, len(s1) - 1)] == f1)
        return torch.from_numpy(ok).to(rows.device)

    def grouped(self, x, w, offs):
        hit = self.lookup(w)
        if hit is None or hit[1] != "stack" or offs is None:
            return
        rec = hit[0]
        ends = [int(v) for v in offs.tolist()]
        start = 0
        for e, end in enumerate(ends):
            if end > start:
                self.put(self.site_of(rec, e), x[start:end], w[e].transpose(0, 1))
            start = end

    # -- the patches --------------------------------------------------------------------------
    def _wrap(self, owner, attr, make):
        orig = getattr(owner, attr)
        self.saved.append((owner, attr, orig))
        setattr(owner, attr, make(orig))

    def __enter__(self):
        global _active
        if _active is not None:
            raise FP4SError(-1, "capture_gemms: another capture_gemms is active")
        torch = self.torch
        F = torch.nn.functional
        me = self

        def guard(fn):
            def run(*a, **k):
                if me.busy:
                    return None
                me.busy = True
                try:
                    fn(*a, **k)
                finally:
                    me.busy = False
            return run
        on_linear = guard(lambda x, w: me.linear(x, w))
        on_matmul = guard(lambda x, w: me.matmul(x, w))
        on_grouped = guard(lambda x, w, offs: me.grouped(x, w, offs))

        def linear(orig):
            def f(input, weight, bias=None):
                on_linear(input, weight)
                return orig(input, weight, bias)
            return f

        def mm2(orig):
            def f(a, b, *rest, **kw):
                on_matmul(a, b)
                return orig(a, b, *rest, **kw)
            return f

        def grouped_mm(orig):
            def f(a, b, *rest, **kw):
                offs = kw.get("offs", rest[0] if rest else None)
                on_grouped(a, b, offs)
                return orig(a, b, *rest, **kw)
            return f
        self._wrap(F, "linear", linear)
        for name in ("matmul", "mm", "bmm"):
            self._wrap(torch, name, mm2)
        self._wrap(torch.Tensor, "__matmul__", mm2)
        self._wrap(torch.Tensor, "matmul", mm2)
        if hasattr(torch, "_grouped_mm"):
            self._wrap(torch, "_grouped_mm", grouped_mm)
        self._wrap_routing()
        self._watch_ancestors()
        _active = self
        return self

    def _watch_ancestors(self):
        """Forward pre-hooks that record the inputs of the modules above the
        selected parameters (an MoE block's input is what its experts' rows
        are copies of: fp4scope.tokens)."""
        cap = self.cap
        mods = dict(self.model.named_modules())
        seen = set()
        self.hooks = []
        for recs in self.params.values():
            for r in recs:
                parts = r.name.split(".")[:-1]
                for i in range(len(parts) + 1):
                    anc = ".".join(parts[:i])
                    if anc in seen or anc not in mods:
                        continue
                    seen.add(anc)

                    def watch(module, inputs):
                        if inputs and cap._tokens is not None:
                            cap._watch(inputs[0])
                        return None
                    self.hooks.append(mods[anc].register_forward_pre_hook(watch))

    def _wrap_routing(self):
        """Wrap the forward of every module whose forward takes the routing
        (router_indices, top_k_index, ...): the batched expert calls inside
        keep the rows routed to each expert."""
        me = self
        for _, mod in self.model.named_modules():
            try:
                sig = inspect.signature(mod.forward)
            except (TypeError, ValueError):
                continue
            params = list(sig.parameters)
            hits = [a for a in _ROUTING_ARGS if a in params]
            if not hits:
                continue
            pos = params.index(hits[0])
            orig = mod.forward

            def fwd(*a, _orig=orig, _pos=pos, _name=hits[0], **k):
                r = k.get(_name, a[_pos] if len(a) > _pos else None)
                saved = me.routing
                me.routing = r.reshape(r.shape[0], -1) if r is not None and r.dim() >= 1 else None
                try:
                    return _orig(*a, **k)
                finally:
                    me.routing = saved
            self.saved.append((mod, "forward", None))
            mod.forward = fwd

    def __exit__(self, *exc):
        global _active
        for h in getattr(self, "hooks", []):
            h.remove()
        self.hooks = []
        for owner, attr, orig in reversed(self.saved):
            if orig is None:
                del owner.__dict__[attr]        # the instance's wrapper: back to the class's forward
            else:
                setattr(owner, attr, orig)
        self.saved = []
        _active = None
        return False


def capture_gemms(cap, model, side, names="*", weights=False):
    """A context manager that captures the GEMM inputs of `model` whose
    weight is a parameter matching the glob `names` (matched against the site
    and the parameter's full name) into `cap` at cap.current_step, side
    "trainer" or "rollout". weights=True also stores each site's weight once
    under /weights/<site>. See the module's help for what is seen."""
    return _GemmCapture(cap, model, side, names, weights)


# ---- duck-typed module hooks ----------------------------------------------------------------
def hook_modules(cap, model, side, names="*", weights=False):
    """Forward pre-hooks on every module matching `names` that holds its
    weights itself, whatever its class: a module with a 2-D parameter
    `weight` whose forward takes the activation first (torch.nn.Linear,
    TransformerEngine's Linear and LayerNormLinear style) is captured like
    hook_linears does; a module with parameters weight0 .. weight{n-1} whose
    forward takes (input, m_splits) (TransformerEngine's GroupedLinear: the
    rows of expert i are the i-th split) gives expert i its rows, at the site
    expert_site(name, i). Returns the hooked names."""
    import torch
    if side not in ("trainer", "rollout"):
        raise ValueError("side must be 'trainer' or 'rollout'")
    hooked = []
    for name, mod in model.named_modules():
        if not name or not fnmatch.fnmatchcase(name, names):
            continue
        own = dict(mod.named_parameters(recurse=False))
        grouped = [own["weight%d" % i] for i in range(len(own)) if "weight%d" % i in own]
        w = own.get("weight")
        if isinstance(w, torch.Tensor) and w.dim() == 2:
            def pre(module, inputs, _name=name, _w=w):
                if not inputs or not isinstance(inputs[0], torch.Tensor) or inputs[0].numel() == 0:
                    return None
                _check_step(cap, _name)
                cap._put_rows(cap.current_step, _name, side, inputs[0])
                return None
            cap._hooks.append(mod.register_forward_pre_hook(pre))
            if weights:
                cap.put(CONST_STEP, name, "weight", w.detach())
        elif grouped and all(g.dim() == 2 for g in grouped):
            def pre(module, inputs, _name=name, _ws=grouped):
                if len(inputs) < 2:
                    return None
                x, splits = inputs[0], inputs[1]
                splits = [int(v) for v in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
                if len(splits) != len(_ws) or sum(splits) != x.reshape(-1, x.shape[-1]).shape[0]:
                    raise FP4SError(-6, "%s: m_splits %s do not split the %d rows over its %d weights"
                                    % (_name, splits, x.reshape(-1, x.shape[-1]).shape[0], len(_ws)))
                _check_step(cap, _name)
                rows = x.reshape(-1, x.shape[-1])
                start = 0
                for i, n in enumerate(splits):
                    if n:
                        cap._put_rows(cap.current_step, expert_site(_name, i), side, rows[start:start + n])
                    start += n
                return None
            cap._hooks.append(mod.register_forward_pre_hook(pre))
            if weights:
                for i, g in enumerate(grouped):
                    cap.put(CONST_STEP, expert_site(name, i), "weight", g.detach())
        else:
            continue
        hooked.append(name)
    if not hooked:
        raise FP4SError(-12, "%s: no module with its own weight matches '%s'" % (cap.path, names))
    cap._watch_ancestors(model, hooked)
    return hooked


def _check_step(cap, name):
    if cap.current_step is None:
        raise FP4SError(-1, "%s: hooked %s called before capture.step(n)" % (cap.path, name))
