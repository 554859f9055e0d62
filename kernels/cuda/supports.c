/* fp4s_cuda_supports(): the spec fields the kernels implement. Plain C (no
 * CUDA needed to answer), so this is also the C object that keeps libfp4s_cuda
 * a C-linked library (see meson.build). */
#include <fp4scope/cuda.h>

#include "cuda/supports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        /* until the kernels take one tensor scale per row (and a static input scale) */
        if (s->nv_scope != FP4S_SCOPE_TENSOR) { *why = "row-scaled NVFP4 runs on the CPU"; return false; }
        if (s->nv_input_scale > 0.0f) { *why = "a static input scale runs on the CPU"; return false; }
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

/* ---- which GPU (fp4s_cuda_bind) --------------------------------------------------- */

static const char bind_grammar[] = "expected local, current, a device number or a comma-separated list of them";

FP4S_API int fp4s_cuda_bind_ordinal(const char *how, int local_rank, int ndev, int *ordinal)
{
    if (!ordinal) return fp4s_error_set(FP4S_EINVAL, "GPU policy: NULL output");
    if (!how || !*how || !strcmp(how, "local")) {
        if (ndev < 1) return fp4s_error_set(FP4S_ERANGE, "GPU policy 'local': no visible device");
        *ordinal = (local_rank > 0 ? local_rank : 0) % ndev;
        return 0;
    }
    if (!strcmp(how, "current")) {
        *ordinal = -1;
        return 0;
    }
    /* "N" or "N,M,...": local rank i takes entry i mod count */
    int list[64], count = 0;
    for (const char *p = how;;) {
        if (*p < '0' || *p > '9') return fp4s_error_set(FP4S_EINVAL, "GPU policy '%s': %s", how, bind_grammar);
        long v = 0;
        while (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            if (v > 1 << 20) return fp4s_error_set(FP4S_EINVAL, "GPU policy '%s': device number too large", how);
            p++;
        }
        if (*p != ',' && *p != '\0') return fp4s_error_set(FP4S_EINVAL, "GPU policy '%s': %s", how, bind_grammar);
        if (count == (int)(sizeof list / sizeof list[0]))
            return fp4s_error_set(FP4S_EINVAL, "GPU policy '%s': more than 64 devices listed", how);
        list[count++] = (int)v;
        if (*p == '\0') break;
        p++;
    }
    const int want = local_rank > 0 ? local_rank : 0, dev = list[want % count];
    if (dev >= ndev)
        return fp4s_error_set(FP4S_ERANGE, "GPU policy '%s': device %d for local rank %d, but %d visible", how,
                              dev, want, ndev);
    *ordinal = dev;
    return 0;
}

FP4S_API int fp4s_cuda_local_rank_env(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        char *end = NULL;
        long r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0 && r < (1L << 30)) return (int)r;
    }
    return -1;
}

/* What fp4s_cuda_bind recorded (how: a copy, "" for none). */
static char g_how[256];
static bool g_how_set;
static int g_local = -1;

FP4S_API int fp4s_cuda_bind(const char *how, int local_rank)
{
    if (how) {
        int ord;
        /* the grammar only: the devices are counted at the first CUDA call */
        int rc = fp4s_cuda_bind_ordinal(how, 0, 1 << 21, &ord);
        if (rc == FP4S_EINVAL) return rc;
        if (strlen(how) >= sizeof g_how) return fp4s_error_set(FP4S_EINVAL, "GPU policy: too long");
        snprintf(g_how, sizeof g_how, "%s", how);
        g_how_set = true;
    }
    if (local_rank >= 0) g_local = local_rank;
    return 0;
}

int fp4s_cu_bind_resolve(int ndev, int *ordinal, char *why, size_t n)
{
    const char *how = g_how_set ? g_how : getenv("FP4S_GPU");
    const int local = g_local >= 0 ? g_local : fp4s_cuda_local_rank_env();
    if ((!how || !*how) && local < 0) { /* one process: the caller's device */
        *ordinal = -1;
        return 0;
    }
    int rc = fp4s_cuda_bind_ordinal(how, local, ndev, ordinal);
    if (rc) snprintf(why, n, "%s%s", g_how_set ? "" : "FP4S_GPU: ", fp4s_last_error());
    return rc;
}
