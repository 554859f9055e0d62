"""Tests of tools/python/fp4scope (ctypes over libfp4scope.so): numpy part
always; the PyTorch part (hooks on a tiny MoE, bit-exact BF16, routing, zero-
token experts) with --torch."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

import fp4scope
from fp4scope import CONST_STEP, Capture, FP4SError

T = tempfile.mkdtemp()
CAP = os.environ.get("FP4S_CAPTURE_TOOL", "fp4-capture")


def ls_json(path):
    return json.loads(subprocess.run([CAP, "ls", "--json", path], check=True, capture_output=True, text=True).stdout)


def test_numpy():
    p = os.path.join(T, "np.h5")
    rng = np.random.default_rng(0)
    a32 = rng.integers(0, 2**32, size=(6, 8), dtype=np.uint64).astype(np.uint32).view(np.float32)
    a16 = rng.integers(0, 2**16, size=(6, 8), dtype=np.uint64).astype(np.uint16).view(np.float16)
    b16 = rng.integers(0, 2**16, size=(6, 8), dtype=np.uint64).astype(np.uint16)
    with Capture(p) as c:
        c.step(0)
        c.put(0, "layers.0.a", "trainer", a32)
        c.put(0, "layers.0.a", "rollout", a32[:, :])
        c.put(0, "layers.0.h", "trainer", a16)
        c.put_bf16_bits(0, "layers.0.b", "trainer", b16)
        c.put(CONST_STEP, "layers.0.a", "weight", a32[:2])
        c.put_logprobs(0, [-1.0, -2.0], [-1.5, -2.5], [0, 0], pos=[0, 1])
        c.attr("run", "unit-test")
        c.attr("lr", 1e-5)
        try:
            c.put(0, "layers.0.a", "rollout", a32[:, :4])
            raise AssertionError("shape mismatch accepted")
        except FP4SError as e:
            assert e.code == -6 and "columns" in str(e), str(e)
        try:
            c.put(0, "bad/site", "trainer", a32)
            raise AssertionError("bad site accepted")
        except FP4SError as e:
            assert e.code == -1 and "slashes" in str(e), str(e)
        try:
            c.put_logprobs(0, [-1.0], [-1.0, -2.0], [0])
            raise AssertionError("length mismatch accepted")
        except FP4SError as e:
            assert "entries" in str(e)
    f = h5py.File(p, "r")
    assert f["/steps/0/layers.0.a/trainer"][()].tobytes() == a32.tobytes()
    assert f["/steps/0/layers.0.h/trainer"][()].tobytes() == a16.tobytes()
    assert f["/steps/0/layers.0.h/trainer"].dtype == np.float16
    assert f["/steps/0/layers.0.b/trainer"].attrs["dtype"] == "bfloat16"
    assert (f["/steps/0/layers.0.b/trainer"][()] == b16).all()
    assert f["/weights/layers.0.a"].shape == (2, 8)
    assert f.attrs["run"] == "unit-test" and f.attrs["producer"] == "fp4scope.torch"
    assert list(f["/steps/0/logprobs/pos"][()]) == [0, 1]
    f.close()
    # append mode adds a step, keeps the old one
    with Capture(p, mode="a") as c:
        c.put(1, "layers.0.a", "trainer", a32)
    j = ls_json(p)
    assert j["steps"] == [0, 1] and not j["interrupted"], j
    # creating over an existing file needs overwrite=True
    try:
        Capture(p)
        raise AssertionError("existing file replaced")
    except FP4SError as e:
        assert "already exists" in str(e)


def test_interrupted():
    p = os.path.join(T, "killed.h5")
    code = ("import os, numpy as np, fp4scope\n"
            "c = fp4scope.Capture(%r)\n"
            "c.put(0, 's', 'trainer', np.ones((2, 4), np.float32)); c.flush()\n"
            "c.put(1, 's', 'trainer', np.ones((2, 4), np.float32))\n"
            "os._exit(0)\n" % p)
    subprocess.run([sys.executable, "-c", code], check=True)
    j = ls_json(p)
    assert j["interrupted"] and j["steps"] == [0], j


def test_refused_overwrite_keeps_the_file():
    """Capture(path, overwrite=True) on a file another process is writing is
    refused and leaves it byte for byte (it used to truncate it first)."""
    p = os.path.join(T, "held.h5")
    c = Capture(p)
    c.put(0, "s", "trainer", np.ones((2, 4), np.float32))
    c.flush()
    before = open(p, "rb").read()
    code = ("import fp4scope\n"
            "try:\n"
            "    fp4scope.Capture(%r, overwrite=True)\n"
            "except fp4scope.FP4SError as e:\n"
            "    assert e.code == -16 and 'another writer' in str(e), str(e)\n"
            "else:\n"
            "    raise SystemExit('a second writer was not refused')\n" % p)
    subprocess.run([sys.executable, "-c", code], check=True)
    assert open(p, "rb").read() == before, "the refused writer changed the file"
    c.put(1, "s", "trainer", np.ones((2, 4), np.float32))
    c.close()
    assert ls_json(p)["steps"] == [0, 1]


def expect_error(fn, *words, code=None):
    try:
        fn()
    except FP4SError as e:
        for w in words:
            assert w in str(e), (w, str(e))
        assert code is None or e.code == code, (e.code, str(e))
        return str(e)
    raise AssertionError("accepted: expected an error with %s" % (words,))


def test_tokens_row_for_row():
    """put_tokens must give one id per log-prob row of the step (issue 24
    item 8: more ids were accepted, and a flush committed fewer)."""
    p = os.path.join(T, "tokens.h5")
    with Capture(p) as c:
        c.put_logprobs(0, [-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0], [0, 0, 1])
        expect_error(lambda: c.put_tokens(0, [5, 6, 7, 8]), "4 token ids for 3 log-prob rows", code=-6)
        expect_error(lambda: c.put_tokens(1, [5]), "step 1: 1 token ids for 0 log-prob rows", code=-6)
        c.put_tokens(0, [5, 6])
        # a step with fewer ids than rows is not committed...
        expect_error(c.flush, "step 0: 2 token ids for 3 log-prob rows", code=-6)
        expect_error(c.close, "step 0: 2 token ids for 3 log-prob rows", code=-6)
        # ...until the rest come
        c.put_tokens(0, [7])
        c.flush()
        c.put_logprobs(1, [-1.0], [-1.0], [0])
        c.put_tokens(1, np.array([9]))
    f = h5py.File(p, "r")
    assert list(f["/steps/0/logprobs/token"][()]) == [5, 6, 7]
    assert list(f["/steps/1/logprobs/token"][()]) == [9]
    f.close()
    # appending knows the lengths of the steps already in the file
    with Capture(p, mode="a") as c:
        expect_error(lambda: c.put_tokens(1, [1]), "step 1: 2 token ids for 1 log-prob rows")
        c.put_logprobs(2, [-1.0, -1.0], [-1.0, -1.0], [0, 0])
        c.put_tokens(2, [3, 4])
    subprocess.run([CAP, "ls", p], check=True, capture_output=True)


def test_names_with_nul_refused():
    """A NUL in a name was cut there by C: "a\0b" became site "a" (issue 24 item 8)."""
    p = os.path.join(T, "nul.h5")
    x = np.ones((2, 16), np.float32)
    with Capture(p) as c:
        expect_error(lambda: c.put(0, "layers.0\0.mlp", "trainer", x), "NUL", "site", code=-1)
        expect_error(lambda: c.put(0, "layers.0", "trainer\0x", x), "NUL", "side", code=-1)
        expect_error(lambda: c.put_bf16_bits(0, "a\0b", "trainer", np.zeros((1, 16), np.uint16)), "NUL")
        expect_error(lambda: c.attr("na\0me", 1), "NUL", "attribute name")
        expect_error(lambda: c.attr("name", "va\0lue"), "NUL", "attribute name")
        c.put(0, "layers.0", "trainer", x)
    f = h5py.File(p, "r")
    assert list(f["/steps/0"]) == ["layers.0"], list(f["/steps/0"])
    assert "na" not in f.attrs and f.attrs.get("name") is None
    f.close()
    expect_error(lambda: Capture(os.path.join(T, "x\0y.h5")), "NUL")
    assert not os.path.exists(os.path.join(T, "x"))


def test_steps_beyond_int64_named_as_given():
    """Step 2^63 became -2^63 in int64 and the message said "negative" (issue 24 item 8)."""
    p = os.path.join(T, "bigstep.h5")
    x = np.ones((2, 16), np.float32)
    with Capture(p) as c:
        for step in (2 ** 63, 2 ** 64 + 3, 2 ** 53 + 1):
            for fn in (lambda: c.put(step, "s", "trainer", x),
                       lambda: c.put_logprobs(step, [-1.0], [-1.0], [0]),
                       lambda: c.put_tokens(step, [1]),
                       lambda: c.step(step)):
                msg = expect_error(fn, str(step), "0..2^53", code=-11)
                assert "-" + str(step)[:5] not in msg and "negative" not in msg, msg
        expect_error(lambda: c.put(-2, "s", "trainer", x), "step -2 is outside", code=-11)
        expect_error(lambda: c.put_logprobs(CONST_STEP, [-1.0], [-1.0], [0]), "step -1 is outside")
        expect_error(lambda: c.put(1.5, "s", "trainer", x), "not an integer")
        c.put(np.int64(2 ** 53), "s", "trainer", x)
        c.put(CONST_STEP, "s", "weight", x)
    assert ls_json(p)["steps"] == [2 ** 53]


def check_mirror(module, cls, struct, call):
    """The adapter's copy module.cls of C struct `struct` has the library's
    size (fp4s_<struct>_size), and a copy one field short is refused by
    call() before the library writes into or reads through it."""
    import ctypes
    from fp4scope._lib import lib
    size = getattr(lib(), "fp4s_%s_size" % struct[len("fp4s_"):])()
    good = getattr(module, cls)
    assert ctypes.sizeof(good) == size, (struct, ctypes.sizeof(good), size)

    class Short(ctypes.Structure):
        _fields_ = good._fields_[:-1]
    setattr(module, cls, Short)
    try:
        call()
        raise AssertionError("a mirror of %s of the wrong size was accepted" % struct)
    except FP4SError as e:
        assert "%s is" % struct in str(e) and e.code == -15, str(e)
    finally:
        setattr(module, cls, good)


def test_opts_struct_matches_the_library():
    from fp4scope import capture
    check_mirror(capture, "_Opts", "fp4s_capture_opts", lambda: Capture(os.path.join(T, "short.h5")))
    assert not os.path.exists(os.path.join(T, "short.h5"))


def test_fake_quant():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 64)) * np.exp(rng.standard_normal(64))).astype(np.float32)
    y = fp4scope.fake_quant(x, "nvfp4", "te")
    assert y.shape == x.shape and np.isfinite(y).all()
    assert np.abs(y - x).max() < np.abs(x).max() / 2
    # the same numbers as fp4-quant's dequantized output, bit for bit
    src, dq = os.path.join(T, "x.npy"), os.path.join(T, "dq.npy")
    np.save(src, x)
    subprocess.run(["fp4-quant", "-f", "nvfp4", "-p", "te", "--dequant", dq, src], check=True,
                   capture_output=True)
    ref = np.load(dq).astype(np.float32).reshape(x.shape)
    assert ref.tobytes() == y.tobytes(), "fake_quant differs from fp4-quant --dequant"
    try:
        fp4scope.fake_quant(np.zeros((2, 10), np.float32))
        raise AssertionError("K=10 accepted")
    except FP4SError as e:
        assert "multiple" in str(e)


def test_fake_quant_input_scale_and_rows():
    # a static input scale: fp4-quant --input-scale's numbers; a row-scaled profile: --scope row's
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 32)) * 4).astype(np.float32)
    src, dq = os.path.join(T, "xs.npy"), os.path.join(T, "dqs.npy")
    np.save(src, x)
    for args, kw in ((["-p", "vllm", "--input-scale", "0.0005"], dict(profile="vllm", input_scale=0.0005)),
                     (["-p", "te-row"], dict(profile="te-row"))):
        y = fp4scope.fake_quant(x, "nvfp4", **kw)
        subprocess.run(["fp4-quant", "-f", "nvfp4"] + args + ["--dequant", dq, src], check=True, capture_output=True)
        assert np.load(dq).astype(np.float32).tobytes() == y.tobytes(), "fake_quant(%s) differs" % kw
    # a small static scale clips: the block maxima land on +-6 times 448 times the scale
    y = fp4scope.fake_quant(x, "nvfp4", "vllm", input_scale=1e-4)
    assert np.abs(y).max() <= 6 * 448 * 1e-4 * (1 + 1e-6)
    for bad in (-1.0, float("nan"), float("inf")):
        try:
            fp4scope.fake_quant(x, "nvfp4", "vllm", input_scale=bad)
            raise AssertionError("input_scale %r accepted" % bad)
        except FP4SError as e:
            assert "input scale" in str(e), e
    try:
        fp4scope.fake_quant(np.zeros((2, 32), np.float32), "mxfp4", "ocp", input_scale=0.1)
        raise AssertionError("an MXFP4 input scale accepted")
    except FP4SError as e:
        assert "NVFP4 option" in str(e), e


def test_torch():
    import torch

    class Experts(torch.nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.router = torch.nn.Linear(d, n, bias=False)
            self.experts = torch.nn.ModuleList(torch.nn.Linear(d, d, bias=False) for _ in range(n))

        def forward(self, x):
            choice = self.router(x).argmax(-1)
            y = torch.zeros_like(x)
            for e, ex in enumerate(self.experts):
                idx = (choice == e).nonzero().flatten()
                y[idx] = ex(x[idx])   # called with zero rows when nobody was routed
            return y, choice

    torch.manual_seed(0)
    m = Experts(32, 4).to(torch.bfloat16)
    with torch.no_grad():
        m.router.weight.zero_()
        m.router.weight[0, 0] = 1.0   # route on the sign of channel 0: experts 0 and 1 only
        m.router.weight[1, 0] = -1.0
    p = os.path.join(T, "moe.h5")
    cap = Capture(p)
    names = cap.hook_linears(m, "trainer", names="experts.*", weights=True)
    assert names == ["experts.0", "experts.1", "experts.2", "experts.3"], names
    xs = []
    try:
        m(torch.randn(4, 32, dtype=torch.bfloat16))
        raise AssertionError("hook before step accepted")
    except FP4SError as e:
        assert "before capture.step" in str(e)
    for s in range(2):
        with cap.step(s):
            x = torch.randn(3, 7, 32, dtype=torch.bfloat16)
            _, choice = m(x.reshape(-1, 32))
            xs.append((x.reshape(-1, 32), choice))
    cap.close()
    f = h5py.File(p, "r")
    for s, (x, choice) in enumerate(xs):
        for e in range(4):
            path = "/steps/%d/experts.%d/trainer" % (s, e)
            idx = (choice == e).nonzero().flatten()
            if len(idx) == 0:
                assert path not in f, path
                continue
            want = x[idx].view(torch.int16).numpy().view(np.uint16)
            got = f[path][()]
            assert got.shape == want.shape and (got == want).all(), path
            assert f[path].attrs["dtype"] == "bfloat16"
    assert "/steps/0/experts.2/trainer" not in f  # never routed
    assert (f["/weights/experts.3"][()] == m.experts[3].weight.view(torch.int16).numpy().view(np.uint16)).all()
    try:
        Capture(os.path.join(T, "x.h5")).hook_linears(m, "trainer", names="nothing*")
        raise AssertionError("empty hook selection accepted")
    except FP4SError as e:
        assert "no nn.Linear" in str(e)


def test_numpy_ids():
    """put(..., ids=) writes <side>_ids; sides with ids may hold other tokens;
    a wrong count is refused before anything is written."""
    p = os.path.join(T, "ids.h5")
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    with Capture(p) as c:
        c.put(0, "layers.0.mlp.experts.1.up_proj", "trainer", x[:4], ids=np.array([[0, 0], [0, 1], [1, 0], [1, 1]]))
        c.put(0, "layers.0.mlp.experts.1.up_proj", "rollout", x[:3], ids=([0, 1, 2], [1, 1, 0]))
        try:
            c.put(0, "layers.0.mlp.experts.2.up_proj", "trainer", x[:2], ids=[[0, 0]])
            raise AssertionError("ids of the wrong count accepted")
        except FP4SError as e:
            assert "1 ids for 2 rows" in str(e), str(e)
    f = h5py.File(p, "r")
    assert f["/steps/0/layers.0.mlp.experts.1.up_proj/rollout_ids"][()].tolist() == [[0, 1], [1, 1], [2, 0]]
    assert f["/steps/0/layers.0.mlp.experts.1.up_proj/trainer_ids"].dtype == np.int64
    assert "layers.0.mlp.experts.2.up_proj" not in f["/steps/0"]
    f.close()
    subprocess.run([CAP, "ls", "--check", p], check=True, capture_output=True)


def moe_model(torch, d=32, n=4):
    """A routed MoE block as current model code writes it: a router, top-1
    routing, each expert called on the rows gathered for it (zero rows when
    nobody was routed) and a shared expert on every token."""
    class Expert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up_proj = torch.nn.Linear(d, 2 * d, bias=False)
            self.down_proj = torch.nn.Linear(2 * d, d, bias=False)

        def forward(self, x):
            return self.down_proj(torch.relu(self.up_proj(x)))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = torch.nn.Linear(d, n, bias=False)
            self.experts = torch.nn.ModuleList(Expert() for _ in range(n))
            self.shared_expert = Expert()

        def forward(self, h):
            x = h.reshape(-1, d)
            choice = self.gate(x).argmax(-1)
            y = self.shared_expert(x)
            order = torch.randperm(x.shape[0])   # experts see their rows in no particular order
            for e, ex in enumerate(self.experts):
                idx = order[(choice[order] == e)]
                y[idx] = y[idx] + ex(x[idx])
            return y.reshape(h.shape), choice.reshape(h.shape[:-1])
    return Block()


def test_torch_ids():
    """Hooked experts write the ids of the tokens routed to them; a rollout
    whose router is perturbed routes some tokens elsewhere; the ids in the
    file equal the routing each side computed."""
    import torch
    torch.manual_seed(1)
    m = moe_model(torch).to(torch.bfloat16)
    p = os.path.join(T, "moe_ids.h5")
    cap = Capture(p)
    B, S = 3, 11
    seq = torch.arange(B).unsqueeze(1).expand(B, S)
    pos = torch.arange(S).unsqueeze(0).expand(B, S) + 5
    h = torch.randn(B, S, 32, dtype=torch.bfloat16)
    choices = {}
    for side in ("trainer", "rollout"):
        cap.hook_linears(m, side, names="*expert*")
        if side == "rollout":
            with torch.no_grad():
                m.gate.weight.add_(0.3 * torch.randn_like(m.gate.weight))
        with cap.step(0), cap.tokens((seq, pos)):
            _, choices[side] = m(h)
        cap.remove_hooks()
    cap.close()
    f = h5py.File(p, "r")
    flips = 0
    for e in range(4):
        got = {}
        for side in ("trainer", "rollout"):
            want = set((int(b), int(t) + 5) for b, t in (choices[side] == e).nonzero().tolist())
            for proj in ("up_proj", "down_proj"):
                path = "/steps/0/experts.%d.%s/%s" % (e, proj, side)
                if not want:
                    assert path not in f, path
                    continue
                ids = f[path + "_ids"][()]
                assert ids.shape == (len(want), 2), (path, ids.shape)
                assert set(map(tuple, ids.tolist())) == want, path
                if proj == "up_proj":  # each row is the hidden state of its id
                    rows = f[path][()]
                    hx = h.view(torch.int16).numpy().view(np.uint16)
                    for r, (b, t) in zip(rows, ids.tolist()):
                        assert (r == hx[b, t - 5]).all(), (path, b, t)
            got[side] = want
        flips += len(got["trainer"] ^ got["rollout"])
    assert flips > 0, "the perturbed router flipped no route; pick another seed"
    shared = f["/steps/0/shared_expert.up_proj/trainer_ids"][()]
    assert shared.tolist() == torch.stack([seq, pos], -1).reshape(-1, 2).tolist()
    f.close()
    subprocess.run([CAP, "ls", "--check", p], check=True, capture_output=True)


if __name__ == "__main__":
    test_numpy()
    test_interrupted()
    test_refused_overwrite_keeps_the_file()
    test_tokens_row_for_row()
    test_names_with_nul_refused()
    test_steps_beyond_int64_named_as_given()
    test_opts_struct_matches_the_library()
    test_fake_quant()
    test_numpy_ids()
    test_fake_quant_input_scale_and_rows()
    if "--torch" in sys.argv:
        test_torch()
        test_torch_ids()
    print("ok")
