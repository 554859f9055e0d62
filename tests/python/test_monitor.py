"""fp4scope.Monitor on a small MoE in a training loop: the per-site numbers
are fp4scope.decompose's of each hooked call's input, bit for bit; the
TensorBoard event files it writes are read back by tfevents_reader (code of
its own) with every value; the capture's per-step scalars and log-probs are
read by fp4-mismatch; the stats report (fp4scope-decompose/1) by h5py and
fp4scope.channels' numbers; on CUDA the same against the CPU."""
import math
import os

import h5py
import numpy as np

import fp4scope
from harness import TMP, Skip, cli_json, devices, expect_error, run
from tfevents_reader import read_scalars

try:
    import torch
except ImportError:
    torch = None


def need_torch():
    if torch is None:
        raise Skip("no torch")


def make_moe(d=64, e=4, dev="cpu"):
    class MoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.Linear(d, d)
            self.router = torch.nn.Linear(d, e, bias=False)
            self.experts = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(),
                                                                   torch.nn.Linear(2 * d, d)) for _ in range(e))
            self.head = torch.nn.Linear(d, 10)

        def forward(self, x):
            h = x + self.attn(x)
            choice = self.router(h).argmax(-1)
            out = torch.zeros_like(h)
            for i, ex in enumerate(self.experts):
                idx = (choice == i).nonzero().flatten()
                if len(idx):
                    out[idx] = ex(h[idx])
            return self.head(h + out)
    torch.manual_seed(0)
    return MoE().to(dev)


def spy(model, names):
    """The test's own copy of every input the hooked modules see."""
    seen = {}
    hooks = []
    for n, m in model.named_modules():
        if n in names:
            hooks.append(m.register_forward_pre_hook(
                lambda mod, inp, n=n: seen.setdefault(n, []).append(inp[0].detach().cpu().clone())))
    return seen, hooks


def train(mon, model, steps, dev, logprobs=True):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    inputs = {}
    for step in range(steps):
        x = torch.randn(96, 64, generator=gen).to(dev)
        y = torch.randint(0, 10, (96,), generator=gen).to(dev)
        names = [n for n in mon.sites]
        seen, hooks = spy(model, names)
        with mon.step(step):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
        for h in hooks:
            h.remove()
        inputs[step] = seen
        opt.zero_grad()
        loss.backward()
        opt.step()
        if logprobs:
            lp = torch.log_softmax(logits.detach().float(), -1).gather(1, y[:, None]).flatten()
            noise = 0.01 * torch.randn(lp.shape, generator=gen).to(dev) * (1 + step)
            mon.log_probs(lp, (lp + noise).clamp(max=0), torch.arange(96, device=dev) // 8)
        mon.scalar("loss", loss.item())
    mon.close()
    return inputs


def test_monitor_cpu_tensorboard_capture_stats():
    need_torch()
    model = make_moe()
    logdir = os.path.join(TMP, "mon_tb")
    cap = os.path.join(TMP, "mon.h5")
    mon = fp4scope.Monitor(model, "nvfp4", "te", every=2, sites="*", logdir=logdir, capture=cap)
    assert set(mon.sites) == {"attn", "router", "head"} | {"experts.%d.%d" % (i, j) for i in range(4)
                                                           for j in (0, 2)}
    inputs = train(mon, model, 6, "cpu")
    # every per-site number is decompose()'s of the inputs the site saw
    rows = [r for r in mon.records if r["site"] != "all"]
    assert {r["step"] for r in mon.records} == {0, 2, 4}
    for r in rows:
        xs = inputs[r["step"]][r["site"]]
        assert len(xs) == r["calls"] == 1, r
        d = fp4scope.decompose(xs[0], "nvfp4", "te")
        for f in fp4scope.monitor.FIELDS:
            assert r[f] == d[f] or (math.isnan(r[f]) and math.isnan(d[f])), (r["site"], f, r[f], d[f])
        c = fp4scope.channels(xs[0], None, "nvfp4", "te")
        tot = c["energy_total"]
        assert r["hot_channel"] == c["channels"]["channel"][0]
        assert abs(r["top_share"] - c["channels"]["energy_total"][c["channels"]["selected"]].sum() / tot) < 1e-12
    # the whole model: every site merged
    for step in (0, 2, 4):
        allr = [r for r in mon.records if r["site"] == "all" and r["step"] == step][0]
        e = sum(fp4scope.decompose(xs[0], "nvfp4", "te")["energy_total"] for xs in inputs[step].values())
        ex = sum(fp4scope.decompose(xs[0], "nvfp4", "te")["energy_x"] for xs in inputs[step].values())
        assert abs(allr["relative_error"] - math.sqrt(e / ex)) < 1e-12 * allr["relative_error"]
    # TensorBoard: the event file read back by a reader of its own
    files = [f for f in os.listdir(logdir) if f.startswith("events.out.tfevents.")]
    assert len(files) == 1, files
    sc = read_scalars(os.path.join(logdir, files[0]))
    tags = {}
    for s, t, v, _ in sc:
        tags.setdefault(t, {})[s] = v
    for r in mon.records:
        site = r["site"]
        for f in ("relative_error", "ratio_scale", "snr_db"):
            want = float(np.float32(r[f]))
            got = tags["fp4/%s/%s" % (site, f)][r["step"]]
            assert got == want or (math.isnan(got) and math.isnan(want)), (site, f, got, want)
    assert sorted(tags["loss"]) == list(range(6))
    assert sorted(tags["mismatch/rollout_corr/k3_kl"]) == list(range(6))
    # the capture: per-step scalars and log-probs, read by fp4-mismatch
    with h5py.File(cap, "r") as f:
        assert f.attrs["producer"] == "fp4scope.Monitor"
        assert float(f["/steps/2"].attrs["fp4_relative_error"]) == [r for r in mon.records
                                                                   if r["site"] == "all" and r["step"] == 2][0][
            "relative_error"]
        assert "steps/0/attn" not in f        # stats only: no activations
        assert f["/steps/5/logprobs/trainer"].shape == (96,)
    j = cli_json("fp4-mismatch", "--json", cap)
    run0 = j["runs"][0]
    k3 = {s["step"]: s["k3"] for s in run0["steps"]}
    assert sorted(k3) == list(range(6))
    assert abs(k3[3] - tags["mismatch/rollout_corr/k3_kl"][3]) <= 1e-6 * abs(k3[3])
    # the per-step scalars by name (--metric): the whole model's relative error and the loss
    j = cli_json("fp4-mismatch", "--metric", "fp4_relative_error", "--json", cap)["runs"][0]
    sc = {s["step"]: s["scalars"] for s in j["steps"]}
    for r in mon.records:
        if r["site"] == "all":
            assert sc[r["step"]]["fp4_relative_error"] == r["relative_error"], (r["step"], sc[r["step"]])
    assert all(float(np.float32(sc[s]["loss"])) == tags["loss"][s] for s in range(6))   # TensorBoard: float32
    # the stats report: each site's whole-run accumulator by channel, as fp4-decompose writes
    with h5py.File(mon.stats_path, "r") as f:
        assert f.attrs["fp4scope_schema"] == "fp4scope-decompose/1" and f.attrs["by"] == "channel"
        sites = {f["inputs"][i].attrs["site"]: f["inputs"][i] for i in f["inputs"]}
        assert set(sites) == set(mon.sites) - {"router"} or set(sites) == set(mon.sites)
        g = sites["attn"]
        assert g["groups/energy_total"].shape == (64,)
        allx = torch.cat([inputs[s]["attn"][0] for s in (0, 2, 4)])
        assert int(g.attrs["rows"]) == allx.shape[0]
        assert float(g.attrs["n"]) == allx.numel()
    rep = mon.channels_of("attn")
    assert rep["tokens"] == allx.shape[0] and rep["k"] == 64


def test_monitor_full_capture_and_refusals():
    need_torch()
    model = make_moe()
    cap = os.path.join(TMP, "mon_full.h5")
    mon = fp4scope.Monitor(model, "mxfp4", "ocp", every=3, sites="experts.*", capture=cap, stats_only=False,
                           channels=False)
    inputs = train(mon, model, 4, "cpu")
    j = cli_json("fp4-capture", "ls", "--json", cap)
    assert j["steps"] == [0, 1, 2, 3] or 3 in j["steps"], j["steps"]
    with h5py.File(cap, "r") as f:
        for site, xs in inputs[3].items():
            if xs:
                assert (f["/steps/3/%s/trainer" % site][()] == xs[0].numpy()).all()
    expect_error(lambda: fp4scope.Monitor(model, "nvfp4", "te", sites="nothing*"), "no nn.Linear")
    expect_error(lambda: fp4scope.Monitor(model, "fp8"), "not FP8")
    expect_error(lambda: fp4scope.Monitor(model, every=0), "every = 0")
    m = fp4scope.Monitor(model, "nvfp4", "te")
    expect_error(lambda: m.log_probs([-1.0], [-1.0], [0]), "no step begun")
    # a site whose K is not a multiple of the block is skipped, named, and the run goes on
    odd = torch.nn.Sequential(torch.nn.Linear(24, 8))
    m = fp4scope.Monitor(odd, "nvfp4", "te", every=1)
    with m.step(0):
        odd(torch.randn(4, 24))
    m.close()
    assert m.sites["0"].skipped and "24" in m.sites["0"].skipped
    # so is a site whose input is a view the library does not take (no copy), with a warning
    import warnings

    class Transposed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(32, 8)

        def forward(self, x):
            return self.lin(x.t())      # x [32, n]: rows of the transposed view are strided
    t = Transposed()
    m = fp4scope.Monitor(t, "nvfp4", "te", every=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with m.step(0):
            t(torch.randn(32, 4))
    m.close()
    assert "not contiguous" in m.sites["lin"].skipped and any("lin left out" in str(x.message) for x in w)


def test_monitor_wandb_and_torch_summary_writer():
    """The W&B and torch.utils.tensorboard paths, through stand-ins of the two
    modules (neither is installed here): the same values the event files get."""
    need_torch()
    import sys
    import types
    logged, written = [], []
    fake_wandb = types.ModuleType("wandb")
    fake_wandb.run = object()
    fake_wandb.log = lambda d, step=None: logged.append((step, dict(d)))
    fake_tb = types.ModuleType("torch.utils.tensorboard")

    class SummaryWriter:
        def __init__(self, logdir):
            self.logdir = logdir

        def add_scalar(self, tag, value, step):
            written.append((step, tag, value))

        def flush(self):
            pass

        def close(self):
            written.append("closed")
    fake_tb.SummaryWriter = SummaryWriter
    saved = {k: sys.modules.get(k) for k in ("wandb", "torch.utils.tensorboard")}
    sys.modules["wandb"] = fake_wandb
    sys.modules["torch.utils.tensorboard"] = fake_tb
    try:
        model = make_moe()
        mon = fp4scope.Monitor(model, "nvfp4", "te", every=2, sites="attn", logdir=os.path.join(TMP, "fake_tb"))
        assert isinstance(mon.tb, SummaryWriter) and mon.wandb is fake_wandb
        train(mon, model, 3, "cpu")
        assert written[-1] == "closed"
        steps = sorted({st for st, _ in logged})
        assert steps == [0, 1, 2], steps
        rec = [r for r in mon.records if r["site"] == "attn" and r["step"] == 2][0]
        w2 = dict(logged)[2]
        assert w2["fp4/attn/relative_error"] == rec["relative_error"]
        assert ("fp4/attn/ratio_scale" in w2) and ("mismatch/rollout_corr/k3_kl" in w2) and ("loss" in w2)
        assert (2, "fp4/attn/snr_db", rec["snr_db"]) in written
        # no active run: W&B left alone; asked for without one: refused
        fake_wandb.run = None
        assert fp4scope.Monitor(model, "nvfp4", "te", sites="attn").wandb is None
        expect_error(lambda: fp4scope.Monitor(model, "nvfp4", "te", sites="attn", wandb=True), "no W&B run")
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_monitor_gemms_fused_experts():
    """gemms=True: real model code (a fused 3-D expert stack multiplied by
    F.linear(x, W[e]), a plain nn.Linear) seen through the functional GEMM
    patches; every site's numbers are decompose()'s of the rows the model
    multiplied, recorded by the model itself."""
    need_torch()
    F = torch.nn.functional

    class Experts(torch.nn.Module):
        def __init__(self, e, d):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(e, d, d) / 8)

    class FusedMoE(torch.nn.Module):
        def __init__(self, d=64, e=4):
            super().__init__()
            self.attn = torch.nn.Linear(d, d)
            self.router = torch.nn.Linear(d, e, bias=False)
            self.experts = Experts(e, d)
            self.seen = None

        def forward(self, x):
            h = x + self.attn(x)
            choice = self.router(h).argmax(-1)
            out = torch.zeros_like(h)
            for i in range(self.experts.w.shape[0]):
                idx = (choice == i).nonzero().flatten()
                if len(idx):
                    rows = h[idx]
                    if self.seen is not None:
                        self.seen.setdefault("experts.%d.w" % i, []).append(rows.detach().clone())
                    out[idx] = F.linear(rows, self.experts.w[i])
            if self.seen is not None:
                self.seen.setdefault("attn", []).append(x.detach().clone())
                self.seen.setdefault("router", []).append(h.detach().clone())
            return out
    torch.manual_seed(0)
    model = FusedMoE()
    expect_error(lambda: fp4scope.Monitor(model, "nvfp4", "te", sites="nothing*", gemms=True), "nothing*")
    linear = F.linear
    mon = fp4scope.Monitor(model, "nvfp4", "te", every=2, gemms=True, logdir=os.path.join(TMP, "mon_gemms"))
    gen = torch.Generator().manual_seed(3)
    seen = {}
    for step in range(4):
        model.seen = {} if step % 2 == 0 else None
        with mon.step(step):
            model(torch.randn(96, 64, generator=gen)).sum().backward()
        if model.seen is not None:
            seen[step] = model.seen
    mon.close()
    rows = [r for r in mon.records if r["site"] != "all"]
    assert {r["step"] for r in rows} == {0, 2}
    sites = {r["site"] for r in rows}
    assert {"attn", "router"} <= sites and any(s.startswith("experts.") for s in sites), sites
    for r in rows:
        xs = seen[r["step"]][r["site"]]
        assert r["calls"] == len(xs) == 1, (r, len(xs))
        d = fp4scope.decompose(xs[0], "nvfp4", "te")
        for f in fp4scope.monitor.FIELDS:
            assert r[f] == d[f] or (math.isnan(r[f]) and math.isnan(d[f])), (r["site"], f, r[f], d[f])
    # every expert that got rows is a site; the patches are gone after the step
    for step, s in seen.items():
        assert {n for n in s} == {r["site"] for r in rows if r["step"] == step}
    assert F.linear is linear


def test_monitor_cuda_matches_cpu():
    need_torch()
    if "cuda" not in devices():
        raise Skip("no GPU for the package")
    model = make_moe(dev="cuda")
    mon = fp4scope.Monitor(model, "nvfp4", "te", every=1, logdir=os.path.join(TMP, "mon_cuda"))
    inputs = train(mon, model, 3, "cuda")
    for r in mon.records:
        if r["site"] == "all":
            continue
        x = inputs[r["step"]][r["site"]][0]
        d = fp4scope.decompose(x, "nvfp4", "te")       # on the CPU
        for f in fp4scope.monitor.FIELDS:
            assert r[f] == d[f] or (math.isnan(r[f]) and math.isnan(d[f])), (r["site"], f, r[f], d[f])


if __name__ == "__main__":
    run(globals())
