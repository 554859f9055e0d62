"""Write captures (schema fp4scope-capture/1) from Python through the C writer.

    cap = Capture("run.h5")                      # create ("a" to append)
    cap.hook_linears(model, "rollout", names="layers.*.mlp.experts.*")
    for step in range(n):
        with cap.step(step):                     # flushes at the end of the step
            logits = model(batch)
            cap.put_logprobs(step, lp_trainer, lp_rollout, seq, pos)
    cap.close()

Arrays may be numpy arrays (float32, float16) or torch tensors (float32,
float16, bfloat16; any device: they are copied to the CPU). Values are stored
bit for bit. A Capture belongs to one thread, like the C handle.

Under torch.distributed every rank writes its own file (one writer per file):
    cap = Capture(rank_path("run.h5"))           # run.rank0.h5, run.rank1.h5, ...
then `fp4-capture merge run.rank*.h5 -o run.h5` when the ranks hold different
sites (expert, tensor or pipeline parallel), or give the analysis tools all
the files (data parallel: the same sites, other tokens). fp4scope-mpi(7):
Captures written by several ranks."""
import contextlib
import ctypes
import fnmatch

import numpy as np

from ._lib import CaptureOpts as _Opts  # the binding is _lib's: fp4s_capture_opts
from ._lib import FP4SError, capture_list, check, lib
from .tokens import TokenIds, as_ids

DT_F32, DT_F64, DT_F16, DT_BF16 = 0, 1, 2, 3
CONST_STEP = -1
MAX_STEP = 2 ** 53  # FP4S_CAPTURE_MAX_STEP: the largest step a capture stores


def _cstr(path, what, value):
    """value as a C string: str only, and no NUL (C would cut the name there)."""
    if not isinstance(value, str):
        raise FP4SError(-1, "%s: %s must be a str, not %s" % (path, what, type(value).__name__))
    if "\0" in value:
        raise FP4SError(-1, "%s: %s %r contains a NUL byte (C would cut it there)" % (path, what, value))
    return value.encode()


def _step_arg(path, step, const_ok=False):
    """A step as the C writer takes it: an integer in 0..2^53 (CONST_STEP
    where const_ok). Checked here: int64 would turn 2^63 into a negative
    number and the C message would name a step the caller never gave."""
    import numbers
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise FP4SError(-1, "%s: step %r is not an integer" % (path, step))
    step = int(step)
    if const_ok and step == CONST_STEP:
        return step
    if step < 0 or step > MAX_STEP:
        raise FP4SError(-11, "%s: step %d is outside 0..2^53 (the steps a capture stores%s)"
                        % (path, step, "; CONST_STEP for constant weights" if const_ok else ""))
    return step


def rank_path(path, rank=None):
    """The file of one rank: "run.h5" -> "run.rank3.h5" (before the last
    extension, else at the end). rank: torch.distributed's rank when it is
    initialized, else 0."""
    if rank is None:
        rank = 0
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank()
        except ImportError:
            pass
    import os
    base, ext = os.path.splitext(path)
    return "%s.rank%d%s" % (base, int(rank), ext)


def _as_rows(x):
    """(numpy array [rows, cols] C-contiguous, dtype code) without changing any bit."""
    try:
        import torch
    except ImportError:  # numpy only
        torch = None
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dim() == 0:
            t = t.reshape(1)
        t = t.reshape(-1, t.shape[-1])
        if t.dtype == torch.bfloat16:
            a = t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
            return np.ascontiguousarray(a), DT_BF16
        if t.dtype == torch.float16:
            return np.ascontiguousarray(t.contiguous().cpu().numpy()), DT_F16
        if t.dtype == torch.float32:
            return np.ascontiguousarray(t.contiguous().cpu().numpy()), DT_F32
        raise FP4SError(-5, "capture: torch dtype %s not supported (float32, float16, bfloat16)" % t.dtype)
    a = np.asarray(x)
    if a.ndim == 0:
        a = a.reshape(1)
    a = a.reshape(-1, a.shape[-1])
    if a.dtype == np.float32:
        return np.ascontiguousarray(a), DT_F32
    if a.dtype == np.float16:
        return np.ascontiguousarray(a), DT_F16
    raise FP4SError(-5, "capture: numpy dtype %s not supported (float32, float16; bfloat16 via "
                    "put_bf16_bits)" % a.dtype)


class Capture:
    """A capture file open for writing. mode "w" creates (replacing an existing
    file only if overwrite=True), "a" appends (creating if missing).
    checksum=True gives every chunk of new datasets a Fletcher-32 checksum that
    every read verifies (raw data carries none otherwise)."""

    def __init__(self, path, mode="w", gzip=0, overwrite=False, producer="fp4scope.torch", checksum=False):
        L = lib()
        self.path = path
        self._h = ctypes.c_void_p()
        self._lp_rows, self._tok_rows = {}, {}  # per step: log-prob rows and token ids in the file
        import os
        path_b = os.fsencode(path)
        if b"\0" in path_b:
            raise FP4SError(-1, "capture: path %r contains a NUL byte" % (path,))
        if ctypes.sizeof(_Opts) != L.fp4s_capture_opts_size():
            raise FP4SError(-15, "capture: fp4s_capture_opts is %d bytes in libfp4scope, %d in this adapter: "
                            "use the adapter of the same build" % (L.fp4s_capture_opts_size(),
                                                                  ctypes.sizeof(_Opts)))
        o = _Opts()
        L.fp4s_capture_opts_defaults(ctypes.byref(o))
        o.gzip = gzip
        o.overwrite = overwrite
        o.checksum = 1 if checksum else 0
        self._producer = _cstr(path, "producer", producer)
        o.producer = self._producer
        if mode == "a" and os.path.exists(path):
            # the lengths of the steps already there, for put_tokens' check
            for e in capture_list(path):
                if e.site == "logprobs" and e.side in ("trainer", "token"):
                    d = self._lp_rows if e.side == "trainer" else self._tok_rows
                    d[e.step] = e.cols
            check(L.fp4s_capture_open_append(path_b, ctypes.byref(o), ctypes.byref(self._h)))
        elif mode in ("w", "a"):
            check(L.fp4s_capture_create(path_b, ctypes.byref(o), ctypes.byref(self._h)))
        else:
            raise ValueError("mode must be 'w' or 'a'")
        self.current_step = None
        self._hooks = []
        self._tokens = None

    # -- low level -------------------------------------------------------------
    def _handle(self):
        if not self._h:
            raise FP4SError(-1, "%s: capture is closed" % self.path)
        return self._h

    def put(self, step, site, side, x, ids=None):
        """Append rows of x ([..., K] is flattened to [rows, K]) to
        /steps/<step>/<site>/<side> (side trainer, rollout or weight; step
        CONST_STEP with side weight for /weights/<site>). ids: the token id
        (sequence, position) of each row, [rows, 2] or a pair (seq, pos) of
        arrays (see put_ids)."""
        step = _step_arg(self.path, step, const_ok=True)
        site_b, side_b = _cstr(self.path, "site", site), _cstr(self.path, "side", side)
        a, dt = _as_rows(x)
        if a.shape[0] == 0:
            return
        if ids is not None:
            ids = as_ids(ids)
            if ids.shape[0] != a.shape[0]:
                raise FP4SError(-6, "%s: %s/%s: %d ids for %d rows" % (self.path, site, side, ids.shape[0],
                                                                      a.shape[0]))
        check(lib().fp4s_capture_put(self._handle(), step, site_b, side_b, dt,
                                     a.ctypes.data, a.shape[0], a.shape[1], a.shape[1], None))
        if ids is not None:
            self.put_ids(step, site, side, ids)

    def put_ids(self, step, site, side, ids):
        """Append the token ids of the rows put last to a trainer or rollout
        side: /steps/<step>/<site>/<side>_ids [rows, 2] int64 (sequence,
        position, numbered as the log-probs' seq and pos). With ids on both
        sides rows are paired by id, and the tokens one side routed
        elsewhere count as routing flips (fp4scope-capture(5))."""
        step = _step_arg(self.path, step)
        site_b, side_b = _cstr(self.path, "site", site), _cstr(self.path, "side", side)
        a = as_ids(ids)
        check(lib().fp4s_capture_put_ids(self._handle(), step, site_b, side_b, a.ctypes.data, a.shape[0]))

    def put_bf16_bits(self, step, site, side, bits):
        """Append BF16 values given as their uint16 bit patterns (numpy)."""
        step = _step_arg(self.path, step, const_ok=True)
        site_b, side_b = _cstr(self.path, "site", site), _cstr(self.path, "side", side)
        a = np.ascontiguousarray(np.asarray(bits, dtype=np.uint16))
        a = a.reshape(-1, a.shape[-1])
        check(lib().fp4s_capture_put(self._handle(), step, site_b, side_b, DT_BF16,
                                     a.ctypes.data, a.shape[0], a.shape[1], a.shape[1], None))

    def put_logprobs(self, step, trainer, rollout, seq, pos=None, mask=None):
        """Append per-token log-probs of one step (1-D, same length)."""
        step = _step_arg(self.path, step)

        def arr(v, dt):
            if v is None:
                return None
            try:
                import torch
                if isinstance(v, torch.Tensor):
                    v = v.detach().float().cpu().numpy() if dt == np.float32 else v.detach().cpu().numpy()
            except ImportError:
                pass
            return np.ascontiguousarray(np.asarray(v).reshape(-1), dtype=dt)
        t, r, s = arr(trainer, np.float32), arr(rollout, np.float32), arr(seq, np.int64)
        p, m = arr(pos, np.int64), arr(mask, np.uint8)
        n = t.shape[0]
        for name, v in (("rollout", r), ("seq", s), ("pos", p), ("mask", m)):
            if v is not None and v.shape[0] != n:
                raise FP4SError(-6, "%s: step %d: logprobs %s has %d entries, trainer %d"
                                % (self.path, step, name, v.shape[0], n))
        ptr = lambda v: None if v is None else v.ctypes.data
        check(lib().fp4s_capture_put_logprobs(self._handle(), step, ptr(t), ptr(r), ptr(s),
                                              ptr(p), ptr(m), n))
        self._lp_rows[step] = self._lp_rows.get(step, 0) + n

    def put_tokens(self, step, tokens):
        """Append the sampled token ids of one step (1-D, one per log-prob row):
        /steps/<step>/logprobs/token, for fp4-remedy --logits. Put the
        step's log-probs first: the ids may not outnumber the step's log-prob
        rows, and flush() refuses a step with fewer ids than rows."""
        step = _step_arg(self.path, step)
        try:
            import torch
            if isinstance(tokens, torch.Tensor):
                tokens = tokens.detach().cpu().numpy()
        except ImportError:
            pass
        t = np.ascontiguousarray(np.asarray(tokens).reshape(-1), dtype=np.int64)
        have, rows = self._tok_rows.get(step, 0), self._lp_rows.get(step, 0)
        if have + t.shape[0] > rows:
            raise FP4SError(-6, "%s: step %d: %d token ids for %d log-prob rows (one id per row of the "
                            "step's log-probs: put them first)" % (self.path, step, have + t.shape[0], rows))
        check(lib().fp4s_capture_put_tokens(self._handle(), step, t.ctypes.data, t.shape[0]))
        self._tok_rows[step] = have + t.shape[0]

    def put_scalar(self, step, name, value):
        """A per-step scalar (reward, loss, a metric) of `step`: the float64
        attribute `name` of /steps/<step>, which fp4-mismatch --metric NAME
        (and fp4-report --metric NAME) read. Put a step's scalars before the flush that commits it. Names:
        1 to 63 bytes, no '/'."""
        step = _step_arg(self.path, step)
        check(lib().fp4s_capture_put_scalar(self._handle(), step, _cstr(self.path, "scalar name", name),
                                            float(value)))

    def attr(self, name, value, obj="/"):
        """Set an attribute on the root (or another object path)."""
        L = lib()
        obj_b, name_b = _cstr(self.path, "object path", obj), _cstr(self.path, "attribute name", name)
        if isinstance(value, str):
            check(L.fp4s_capture_attr_str(self._handle(), obj_b, name_b,
                                          _cstr(self.path, "attribute " + name, value)))
        elif isinstance(value, (bool, int, np.integer)):
            if not -2 ** 63 <= int(value) < 2 ** 63:
                raise FP4SError(-11, "%s: attribute %s: %d does not fit in int64" % (self.path, name, value))
            check(L.fp4s_capture_attr_i64(self._handle(), obj_b, name_b, int(value)))
        else:
            check(L.fp4s_capture_attr_f64(self._handle(), obj_b, name_b, float(value)))

    def flush(self):
        """Make everything put so far durable (the crash-safety point).
        Refused (nothing flushed) while a step has fewer token ids than
        log-prob rows: put the rest of its ids, then flush again."""
        self._check_tokens()
        check(lib().fp4s_capture_flush(self._handle()))

    def _check_tokens(self):
        for step, have in sorted(self._tok_rows.items()):
            rows = self._lp_rows.get(step, 0)
            if have != rows:
                raise FP4SError(-6, "%s: step %d: %d token ids for %d log-prob rows (one id per row)"
                                % (self.path, step, have, rows))

    def close(self):
        """Flush and close. Refused, the file left open, while a step has
        fewer token ids than log-prob rows (as flush)."""
        self.remove_hooks()
        if self._h:
            self._check_tokens()
            h = self._h
            self._h = ctypes.c_void_p()
            check(lib().fp4s_capture_close(ctypes.byref(h)))

    def abort(self):
        """Undo everything put since the last flush and close the file
        (fp4s_capture_abort): it then holds what the last flush committed."""
        self.remove_hooks()
        if self._h:
            h = self._h
            self._h = ctypes.c_void_p()
            check(lib().fp4s_capture_abort(ctypes.byref(h)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # never closed: keep what was put (the token check is close()'s)
        try:
            self.remove_hooks()
            if self._h:
                h = self._h
                self._h = ctypes.c_void_p()
                lib().fp4s_capture_close(ctypes.byref(h))
        except Exception:
            pass

    # -- steps -------------------------------------------------------------------
    def step(self, n):
        """Set the current step (hooks write there). Moving to another step
        flushes the previous one. Also a context manager that flushes at exit:
        `with cap.step(3): model(x)`."""
        n = _step_arg(self.path, n)
        if self.current_step is not None and self.current_step != n:
            self.flush()
        self.current_step = n
        cap = self

        class _StepCtx:
            def __enter__(self_inner):
                return cap

            def __exit__(self_inner, *exc):
                if cap._h:
                    cap.flush()
                return False
        return _StepCtx()

    def tokens(self, ids):
        """Give the token ids (sequence, position) of the next forward's token
        stream ([batch, seq, 2], [T, 2], or a pair of [batch, seq] arrays):
        hooked layers then write the ids of their rows beside them, routed
        experts included (their rows are found among the rows that entered
        the block; fp4scope.tokens says how). Also a context manager that
        forgets them at exit: `with cap.tokens(ids): model(x)`. None: rows
        without ids, as before."""
        self._tokens = None if ids is None else TokenIds(ids)
        cap = self

        class _TokCtx:
            def __enter__(self_inner):
                return cap

            def __exit__(self_inner, *exc):
                cap._tokens = None
                return False
        return _TokCtx()

    def _put_rows(self, step, site, side, x):
        """A hook's put: with Capture.tokens() given, the rows' ids too."""
        if self._tokens is None:
            self.put(step, site, side, x)
        else:
            self.put(step, site, side, x, ids=self._tokens.identify(site, x))

    def _watch(self, x):
        if self._tokens is not None:
            self._tokens.watch(x)

    # -- PyTorch hooks --------------------------------------------------------------
    def hook_linears(self, model, side, names="*", weights=False):
        """Register forward pre-hooks on every torch.nn.Linear of model whose
        qualified name (model.named_modules()) matches the glob `names`
        (fnmatch; '*' matches dots), MoE experts included. Each call of a
        hooked module appends its input, flattened to [tokens, in_features],
        to /steps/<current step>/<name>/<side>; modules called with zero
        tokens (an expert nobody was routed to) write nothing. weights=True
        also stores each hooked module's weight once under /weights/<name>.
        Returns the list of hooked names."""
        import torch
        if side not in ("trainer", "rollout"):
            raise ValueError("side must be 'trainer' or 'rollout'")
        hooked = []
        for name, mod in model.named_modules():
            if not isinstance(mod, torch.nn.Linear) or not fnmatch.fnmatchcase(name, names):
                continue

            def pre_hook(module, inputs, _name=name):
                if self.current_step is None:
                    raise FP4SError(-1, "%s: hooked %s called before capture.step(n)" % (self.path, _name))
                x = inputs[0]
                if x.numel() == 0:
                    return None
                self._put_rows(self.current_step, _name, side, x)
                return None
            self._hooks.append(mod.register_forward_pre_hook(pre_hook))
            hooked.append(name)
            if weights:
                self.put(CONST_STEP, name, "weight", mod.weight)
        if not hooked:
            raise FP4SError(-12, "%s: no nn.Linear module matches '%s'" % (self.path, names))
        self._watch_ancestors(model, hooked)
        return hooked

    def _watch_ancestors(self, model, hooked):
        """Watch the inputs of the modules above the hooked ones (an MoE
        block's input is what its experts' rows are copies of)."""
        mods = dict(model.named_modules())
        seen = getattr(self, "_watched", set())
        for name in hooked:
            parts = name.split(".")
            for i in range(len(parts)):
                anc = ".".join(parts[:i])
                if anc in seen or anc not in mods:
                    continue
                seen.add(anc)

                def watch_hook(module, inputs):
                    if inputs and self._tokens is not None:
                        self._watch(inputs[0])
                    return None
                self._hooks.append(mods[anc].register_forward_pre_hook(watch_hook))
        self._watched = seen

    def remove_hooks(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._watched = set()
