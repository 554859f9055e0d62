"""fp4scope.decompose / channels / compare / remedy / mismatch against
fp4-decompose, fp4-channels, fp4-compare, fp4-remedy and fp4-mismatch on the
same inputs (their JSON prints 17 significant digits: every double exactly);
the CUDA decomposition against the CPU's where there is a GPU."""
import math

import numpy as np

import fp4scope
from harness import Skip, cli_json, devices, expect_error, hostile, run, tmp

try:
    import torch
except ImportError:
    torch = None


def data(seed=0, rows=96, cols=128, n=48):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * np.exp(rng.standard_normal(cols))).astype(np.float32)
    x[:, 5] *= 40                     # a hot channel
    xt = (x * (1 + 0.01 * rng.standard_normal(x.shape))).astype(np.float32)
    w = (rng.standard_normal((n, cols)) * 0.05).astype(np.float32)
    paths = []
    for name, a in (("x", x), ("xt", xt), ("w", w)):
        p = tmp("an_%s_%d.npy" % (name, seed))
        np.save(p, a)
        paths.append(p)
    return x, xt, w, paths


def eq(a, b, what):
    if a is None or b is None:
        # JSON has no NaN or Inf: the tools print null for them
        assert (a is None or not math.isfinite(a)) and (b is None or not math.isfinite(b)), (what, a, b)
        return
    if isinstance(b, bool) or isinstance(a, bool):
        assert bool(a) == bool(b), (what, a, b)
        return
    a, b = float(a), float(b)
    assert a == b or (math.isnan(a) and math.isnan(b)), "%s: %r, the tool %r" % (what, a, b)


def test_decompose_matches_fp4_decompose():
    x, _, _, (px, _, _) = data(0)
    for fmt, prof in (("nvfp4", "te"), ("mxfp4", "ocp"), ("nvfp4", "torchao"), ("mxfp4", "ceil")):
        for by in ("tensor", "channel", "row"):
            j = cli_json("fp4-decompose", "-f", fmt, "-p", prof, "--by", by, "--json", px)
            ref = j["inputs"][0]
            d = fp4scope.decompose(x, fmt, prof, by=by)
            for k, v in ref["summary"].items():
                eq(d[k], v, "%s %s %s %s" % (fmt, prof, by, k))
            if by != "tensor":
                groups = ref["groups"]
                for k in groups[0]:
                    if k in d["groups"]:
                        for i, g in enumerate(groups):
                            eq(d["groups"][k][i], g[k], "%s %s %s group %d %s" % (fmt, prof, by, i, k))
            if torch is not None:
                t = fp4scope.decompose(torch.from_numpy(x).bfloat16(), fmt, prof)
                assert t["n"] == x.size


def test_decompose_on_hostile_values_and_gpu():
    x = hostile(64, 128, seed=5)
    p = tmp("an_host.npy")
    np.save(p, x)
    ref = cli_json("fp4-decompose", "-f", "nvfp4", "-p", "te", "--json", p)["inputs"][0]["summary"]
    d = fp4scope.decompose(x, "nvfp4", "te")
    for k, v in ref.items():
        eq(d[k], v, "hostile " + k)
    if "cuda" not in devices():
        return
    for fmt, prof in (("nvfp4", "te"), ("mxfp4", "ocp"), ("nvfp4", "modelopt")):
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for by in ("tensor", "channel", "block"):
                xc = torch.from_numpy(x).to(dt)
                c = fp4scope.decompose(xc, fmt, prof, by=by)
                g = fp4scope.decompose(xc.cuda(), fmt, prof, by=by)
                for k in c:
                    if k.startswith("hist_"):
                        assert (c[k]["counts"] == g[k]["counts"]).all(), (fmt, prof, dt, by, k)
                    elif k == "groups":
                        for f in c[k]:
                            assert np.array_equal(c[k][f], g[k][f], equal_nan=True), (fmt, prof, dt, by, f)
                    else:
                        eq(g[k], c[k], "cuda %s %s %s %s %s" % (fmt, prof, dt, by, k))


def test_channels_matches_fp4_channels():
    x, _, w, (px, _, pw) = data(1)
    for fmt, prof in (("nvfp4", "te"), ("mxfp4", "ocp")):
        for score, weight in (("residual", False), ("hcp", True), ("relative", True)):
            args = ["fp4-channels", "-f", fmt, "-p", prof, "--score", score, "--json", px]
            if weight:
                args += ["--weight", pw]
            j = cli_json(*args)
            c = fp4scope.channels(x, w if weight else None, fmt, prof, score=score)
            assert c["count"] == j["selection"]["count"] and c["tokens"] == j["tokens"] and c["k"] == j["k"]
            for i, ch in enumerate(j["channels"]):
                for k, v in ch.items():
                    eq(c["channels"][k][i], v, "%s %s %s channel row %d %s" % (fmt, prof, score, i, k))
            sel = [ch["channel"] for ch in j["channels"] if ch["selected"]]
            assert list(c["selected_channels"]) == sel
            for i, pt in enumerate(j.get("coverage", [])):
                eq(c["coverage"]["share"][i], pt["share"], "coverage %d" % i)
    expect_error(lambda: fp4scope.channels(x, w[:, :64], "nvfp4", "te"), "K = 64")
    expect_error(lambda: fp4scope.channels(x, None, "nvfp4", "te", score="hcp"), "hcp")
    expect_error(lambda: fp4scope.channels(x, None, "nvfp4", "te", score="best"), "score 'best'")


def test_compare_matches_fp4_compare():
    x, xt, w, (px, pxt, pw) = data(2)
    j = cli_json("fp4-compare", "-f", "nvfp4", "-p", "te", "--json", "--act", px, "--trainer-act", pxt,
                 "--weight", pw)["sites"][0]
    c = fp4scope.compare(x, xt, w, "nvfp4", "te")
    for k in ("m", "n", "k", "input_rel_diff", "code_flips", "scale_flips", "tscale_rel_diff", "amplification",
              "mismatch_rel", "mismatch2", "ref2"):
        eq(c[k], j[k], "compare " + k)
    for comp, share in j["shares"].items():
        eq(c["contrib"][comp] / c["mismatch2"], share, "share " + comp)
    if torch is not None:
        expect_error(lambda: fp4scope.compare(torch.from_numpy(x), torch.from_numpy(xt[:10]), w), "same tokens")


def test_remedy_matches_fp4_remedy():
    x, xt, w, (px, pxt, pw) = data(3)
    lst = "none,rac:0.125,mbs:64,wfq,of:0.5"
    j = cli_json("fp4-remedy", "-f", "nvfp4", "-p", "te", "--json", "--act", px, "--weight", pw,
                 "--trainer-act", pxt, "-r", lst)
    rows = fp4scope.remedy(x, w, lst, "nvfp4", "te", trainer=xt)
    assert [r["remedy"] for r in rows] == [r["remedy"] for r in j]
    for r, ref in zip(rows, j):
        for k, v in ref.items():
            if k in r and k != "remedy":
                eq(r[k], v, "remedy %s %s" % (ref["remedy"], k))
    expect_error(lambda: fp4scope.remedy(x, w, "rac:7", "nvfp4", "te"), "rac")


def test_mismatch_matches_fp4_mismatch():
    rng = np.random.default_rng(7)
    n = 400
    seq = np.repeat(np.arange(20), 20)
    lt = -np.abs(rng.standard_normal(n)).astype(np.float32) * 2
    lr = (lt + 0.05 * rng.standard_normal(n)).astype(np.float32)
    lr = np.minimum(lr, 0)
    mask = (rng.random(n) > 0.1).astype(np.uint8)
    csv = tmp("mm.csv")
    with open(csv, "w") as f:
        f.write("step,seq,trainer_logprob,rollout_logprob,mask\n")
        for i in range(n):
            f.write("3,%d,%r,%r,%d\n" % (seq[i], float(lt[i]), float(lr[i]), mask[i]))
    j = cli_json("fp4-mismatch", "--json", csv)
    ref = j["runs"][0]["steps"][0]
    own = fp4scope.mismatch(lt, lr, seq, mask, names="fp4scope")
    for k, v in ref.items():
        if k in own and k != "step":
            eq(own[k], v, "mismatch " + k)
    verl = fp4scope.mismatch(lt, lr, seq, mask)
    assert "rollout_corr/k3_kl" in verl and verl["rollout_corr/k3_kl"] == own["k3"]
    if torch is not None:
        t = fp4scope.mismatch(torch.from_numpy(lt), torch.from_numpy(lr), torch.from_numpy(seq),
                              torch.from_numpy(mask))
        assert t == verl
    expect_error(lambda: fp4scope.mismatch(lt, lr[:5], seq), "rollout has 5 entries")
    expect_error(lambda: fp4scope.mismatch(lt, lr, seq + 0.5), "not integers")


if __name__ == "__main__":
    run(globals())
