"""Quantization-aware training with the rollout engine's exact quantizer:
fake quantization as an autograd function with a straight-through gradient,
and linear layers that apply it to their weight (and, if asked, to their
input). Asymmetric QAT (QUADS' trainer side, "W4A16 QAT"): the trainer's
forward uses Qw(W), the weight the FP4 rollout engine will use, with the
profile of that engine; the gradient passes through the quantizer as if it
were the identity (dL/dW = dL/dQw(W)).

    fp4scope.qat.fake_quant_ste(w, "nvfp4", "te")   # a tensor, differentiable
    fp4scope.quantize_linears(model, "nvfp4", "te", names="layers.*.mlp.*")

The forward runs fp4scope.fake_quant (the CPU quantizer or the CUDA kernels
on the tensor's device and stream), bit for bit fp4-quant --dequant of the
same values; the result has the input's dtype."""
import fnmatch

import torch

from ._lib import FP4SError
from .quant import Spec, fake_quant, spec_of


class _FakeQuantSTE(torch.autograd.Function):
    """y = Q(x) forward; dL/dx = dL/dy backward (straight through)."""

    @staticmethod
    def forward(ctx, x, spec, amax):
        return fake_quant(x.detach(), spec, amax=amax)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def fake_quant_ste(x, fmt="nvfp4", profile=None, *, amax=None):
    """fake_quant(x) whose gradient is the identity (straight-through)."""
    return _FakeQuantSTE.apply(x, spec_of(fmt, profile), amax)


class QuantLinear(torch.nn.Linear):
    """nn.Linear whose forward multiplies by the fake-quantized weight
    Qw(W) (and by Qa(x) when an activation spec is given), gradients straight
    through. weight_spec, act_spec: Spec objects (act_spec None: the input
    stays as it is, asymmetric QAT)."""

    def __init__(self, in_features, out_features, bias=True, weight_spec=None, act_spec=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.weight_spec = weight_spec if weight_spec is not None else Spec("nvfp4")
        self.act_spec = act_spec

    @classmethod
    def from_linear(cls, linear, weight_spec, act_spec=None):
        """A QuantLinear over linear's own parameters (the same Parameter
        objects: optimizer state and state_dict keys are unchanged)."""
        if not isinstance(linear, torch.nn.Linear):
            raise FP4SError(-1, "from_linear: a %s, not an nn.Linear" % type(linear).__name__)
        q = cls.__new__(cls)
        torch.nn.Module.__init__(q)
        q.in_features, q.out_features = linear.in_features, linear.out_features
        q.weight = linear.weight
        q.bias = linear.bias
        q.weight_spec, q.act_spec = weight_spec, act_spec
        q.train(linear.training)
        return q

    def forward(self, x):
        w = _FakeQuantSTE.apply(self.weight, self.weight_spec, None)
        if self.act_spec is not None:
            x = _FakeQuantSTE.apply(x, self.act_spec, None)
        return torch.nn.functional.linear(x, w, self.bias)

    def extra_repr(self):
        return "%s, weight %s, input %s" % (super().extra_repr(), self.weight_spec,
                                            self.act_spec if self.act_spec is not None else "as is")


def quantize_linears(model, fmt="nvfp4", profile=None, names="*", *, activations=None, weight_tile2d=None):
    """Replace every nn.Linear of model whose qualified name matches the glob
    `names` ('*' matches dots too) by a QuantLinear over the same parameters.
    fmt/profile: the weight's quantizer (a Spec, or a format and profile);
    activations: None (asymmetric QAT), or the input's quantizer (a Spec, or
    a profile name of the same format). Returns the replaced names. Hooks
    registered on the old modules stay with them: register hooks after."""
    wspec = spec_of(fmt, profile)
    aspec = None
    if activations is not None:
        aspec = activations if isinstance(activations, Spec) else Spec(wspec.format, activations)
    done = []
    for name, mod in list(model.named_modules()):
        if type(mod) is not torch.nn.Linear or not fnmatch.fnmatchcase(name, names):
            continue
        q = QuantLinear.from_linear(mod, wspec, aspec)
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf, q)
        done.append(name)
    if not done:
        raise FP4SError(-12, "quantize_linears: no nn.Linear matches '%s'" % names)
    return done
