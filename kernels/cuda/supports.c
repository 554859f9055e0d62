/* fp4s_cuda_supports(): the spec fields the kernels implement. Plain C (no
 * CUDA needed to answer), so this is also the C object that keeps libfp4s_cuda
 * a C-linked library (see meson.build). */
#include <fp4scope/cuda.h>

#include "cuda/supports.h"

bool fp4s_cu_supports_why(const fp4s_spec *s, const char **why)
{
    *why = NULL;
    if (!s) { *why = "no spec"; return false; }
    if ((unsigned)s->tie >= FP4S_TIE_COUNT) { *why = "unknown tie rule"; return false; }
    if ((unsigned)s->nonfinite >= FP4S_NF_COUNT) { *why = "unknown non-finite policy"; return false; }
    if ((unsigned)s->zero_in >= FP4S_ZIN_COUNT) { *why = "unknown zero-input policy"; return false; }
    if (s->nonfinite == FP4S_NF_CVT) { *why = "the cvt non-finite policy runs on the CPU"; return false; }
    if (s->sr || s->rht) { *why = "stochastic rounding and the RHT run on the CPU"; return false; }
    if (s->format == FP4S_MXFP4) {
        const fp4s_mx_rule_traits *rt = fp4s_get_mx_rule_traits(s->mx_rule);
        if (s->block != 32) { *why = "MXFP4 block other than 32"; return false; }
        if (!rt) { *why = "unknown MXFP4 scale rule"; return false; }
        if (!(rt->kernels & FP4S_KERNEL_CUDA)) { *why = "scale rule without a CUDA kernel"; return false; }
        if (s->mx_elem != FP4S_MX_ELEM_EXACT) { *why = "an engine's MXFP4 element factor runs on the CPU"; return false; }
        return true;
    }
    if (s->format == FP4S_NVFP4) {
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        if (s->block != 16) { *why = "NVFP4 block other than 16"; return false; }
        if (!rt) { *why = "unknown NVFP4 recipe"; return false; }
        if (!(rt->kernels & FP4S_KERNEL_CUDA)) { *why = "recipe without a CUDA kernel"; return false; }
        return true;
    }
    *why = s->format == FP4S_FP8 ? "FP8 baselines run on the CPU" : "unknown format";
    return false;
}

FP4S_API bool fp4s_cuda_supports(const fp4s_spec *s)
{
    const char *why;
    return fp4s_cu_supports_why(s, &why);
}

int fp4s_cu_resolve(unsigned need, const fp4s_spec *s, fp4s_device want, fp4s_device *got)
{
    if (!got) return fp4s_error_set(FP4S_EINVAL, "device: NULL output");
    *got = FP4S_DEVICE_CPU;
    if (want == FP4S_DEVICE_CPU) return 0;
    if (want != FP4S_DEVICE_CUDA && want != FP4S_DEVICE_AUTO)
        return fp4s_error_set(FP4S_EINVAL, "device: unknown device %d", (int)want);
    const char *why = NULL;
    char desc[320];
    if ((fp4s_cuda_caps() & need) != need) {
        why = "this build has no CUDA support";
    } else if (!fp4s_cuda_available()) {
        fp4s_cuda_describe(desc, sizeof desc);
        why = desc;
    } else if (!s || fp4s_cu_supports_why(s, &why)) {
        *got = FP4S_DEVICE_CUDA;
        return 0;
    }
    if (want == FP4S_DEVICE_AUTO) return 0;
    return fp4s_error_set(FP4S_ENOTSUP, "device cuda: %s", why);
}

FP4S_API int fp4s_cuda_device_resolve(const fp4s_spec *s, fp4s_device want, fp4s_device *got)
{
    return fp4s_cu_resolve(FP4S_CUDA_CAP_BUILT | FP4S_CUDA_CAP_QUANTIZE, s, want, got);
}
