"""Straight-through fake quantization: the forward is fake_quant bit for bit;
the gradient is checked numerically against the straight-through estimator's
definition (the derivative of the loss with Q(x) + (x - x0) in place of Q(x),
by central differences in float64); QuantLinear and quantize_linears keep
the model's parameters, names and optimizer state, and train."""
import numpy as np

import fp4scope
from harness import Skip, devices, expect_error, hostile, run

try:
    import torch
except ImportError:
    torch = None


def need_torch():
    if torch is None:
        raise Skip("no torch")


def h(y):
    """A smooth loss whose gradient depends on where it is taken."""
    return (y ** 3 / 3 + torch.sin(3 * y)).sum()


def numeric_ste_grad_check(x, fmt, prof, dev, tol=1e-6):
    x = x.to(dev).requires_grad_(True)
    y = fp4scope.fake_quant_ste(x, fmt, prof)
    assert torch.equal(y.detach(), fp4scope.fake_quant(x.detach(), fmt, prof)), "forward is not fake_quant"
    h(y.float()).backward()
    g = x.grad.double().cpu()
    y0 = y.detach().double().cpu()
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        d = torch.randn(y0.shape, generator=gen, dtype=torch.float64)
        eps = 1e-6
        num = (h(y0 + eps * d) - h(y0 - eps * d)) / (2 * eps)
        ana = (g * d).sum()
        assert abs(num - ana) <= tol * (abs(num) + 1), "%s %s: numeric %r, autograd %r" % (fmt, prof, num, ana)
    # not the derivative of the staircase itself (zero almost everywhere)
    assert g.abs().sum() > 0


def test_ste_gradient_numeric():
    need_torch()
    x = torch.from_numpy(hostile(32, 64, seed=11, nonfinite=False)).clamp(-50, 50)
    for dev in devices():
        for fmt, prof in (("nvfp4", "te"), ("mxfp4", "ocp"), ("nvfp4", "te-2d"), ("mxfp4", "ggml")):
            numeric_ste_grad_check(x.clone(), fmt, prof, dev)
        # bfloat16: the gradient arrives rounded to bfloat16 (8 bits): a tolerance of that size
        numeric_ste_grad_check(x.clone().bfloat16(), "nvfp4", "te", dev, tol=1e-2)


def test_quant_linear_forward_backward():
    need_torch()
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    q = fp4scope.QuantLinear.from_linear(lin, fp4scope.Spec("nvfp4", "te-2d"))
    assert q.weight is lin.weight and q.bias is lin.bias
    x = torch.randn(8, 64, requires_grad=True)
    out = q(x)
    wq = fp4scope.fake_quant(lin.weight.detach(), "nvfp4", "te-2d")
    assert torch.equal(out, torch.nn.functional.linear(x, wq, lin.bias))
    out.pow(2).sum().backward()
    # the straight-through gradient: dL/dW = dL/dQ(W), computed on a leaf Q(W)
    wl = wq.clone().requires_grad_(True)
    x2 = x.detach().clone().requires_grad_(True)
    torch.nn.functional.linear(x2, wl, lin.bias.detach()).pow(2).sum().backward()
    assert torch.equal(lin.weight.grad, wl.grad) and torch.equal(x.grad, x2.grad)
    # with the input quantized too (symmetric QAT)
    qa = fp4scope.QuantLinear.from_linear(lin, fp4scope.Spec("nvfp4", "te-2d"), fp4scope.Spec("nvfp4", "te"))
    out = qa(x.detach())
    xq = fp4scope.fake_quant(x.detach(), "nvfp4", "te")
    assert torch.equal(out, torch.nn.functional.linear(xq, wq, lin.bias))


class TinyMoE(torch.nn.Module if torch is not None else object):
    def __init__(self, d=64, e=4):
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
            out[idx] = ex(h[idx])
        return self.head(h + out)


def test_quantize_linears_trains():
    need_torch()
    torch.manual_seed(1)
    m = TinyMoE()
    keys = list(m.state_dict())
    params = [id(p) for p in m.parameters()]
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    names = fp4scope.quantize_linears(m, "nvfp4", "te", names="experts.*")
    assert names == ["experts.%d.%d" % (i, j) for i in range(4) for j in (0, 2)], names
    assert isinstance(m.experts[0][0], fp4scope.QuantLinear) and type(m.attn) is torch.nn.Linear
    assert list(m.state_dict()) == keys and [id(p) for p in m.parameters()] == params
    x = torch.randn(256, 64)
    y = torch.randint(0, 10, (256,))
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses
    # the expert weights the forward used are the rollout engine's: fake_quant of the trained weights
    w = m.experts[1][2].weight.detach()
    assert torch.equal(fp4scope.fake_quant(w, "nvfp4", "te"), fp4scope.quantize(w, "nvfp4", "te").dequantize())
    expect_error(lambda: fp4scope.quantize_linears(m, "nvfp4", "te", names="nothing*"), "no nn.Linear")


if __name__ == "__main__":
    run(globals())
