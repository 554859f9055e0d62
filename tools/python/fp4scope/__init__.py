"""fp4scope from Python: what 4-bit quantization (MXFP4, NVFP4) does to a
model's numbers, inside the training loop. A thin layer over libfp4scope
(ctypes): every number is the C library's, bit for bit what the fp4-* tools
give.

    pip install .            (from the source tree: see README, "Python")

    fp4scope.quantize / dequantize / fake_quant    tensors in, tensors out
        (torch CPU and CUDA: float32, bfloat16, float16; numpy)
    fp4scope.Spec, profiles()                      the engines' quantizers
    fp4scope.fake_quant_ste, QuantLinear, quantize_linears   QAT
    fp4scope.decompose, channels, compare, remedy, mismatch  the analyses
    fp4scope.Monitor                               live statistics to
        TensorBoard, W&B and a capture
    fp4scope.Capture                               write captures
    fp4scope.capture_gemms, hook_modules, expert_site  capture real model
        code's GEMM inputs (functional calls, packed experts)

The library: the one installed with the package, else FP4SCOPE_LIB, else the
source tree's build directory (tools/python on sys.path), else the system's."""
from ._lib import E, FP4SError, lib, lib_path
from .capture import CONST_STEP, Capture, rank_path
from .quant import QTensor, Spec, cuda_available, cuda_describe, dequantize, fake_quant, profiles, quantize
from .analysis import channels, compare, decompose, mismatch, remedy
from .functional import capture_gemms, expert_site, hook_modules


def __getattr__(name):
    if name == "__version__":   # the library's: one version, lib/include/fp4scope/version.h
        return lib().fp4s_version().decode()
    # torch-dependent parts load on first use: the package imports without torch
    if name in ("fake_quant_ste", "QuantLinear", "quantize_linears"):
        from . import qat
        return getattr(qat, name)
    if name == "Monitor":
        from .monitor import Monitor
        return Monitor
    raise AttributeError("module 'fp4scope' has no attribute %r" % name)


__all__ = ["CONST_STEP", "Capture", "E", "FP4SError", "Monitor", "QTensor", "QuantLinear", "Spec", "capture_gemms",
           "channels", "compare", "cuda_available", "cuda_describe", "decompose", "dequantize", "expert_site",
           "fake_quant", "fake_quant_ste", "hook_modules", "lib", "lib_path", "mismatch", "profiles", "quantize",
           "quantize_linears", "rank_path", "remedy"]
