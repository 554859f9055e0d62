/* CUDA support: device detection, the supports() query, argument checks
 * shared by the ops, and the host-memory conveniences. */
#include "cuda_internal.cuh"
#include "supports.h"

#include "fp4s_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FP4S_CUDA_ARCH_MAJOR
#define FP4S_CUDA_ARCH_MAJOR 9
#endif
#ifndef FP4S_CUDA_ARCH_MINOR
#define FP4S_CUDA_ARCH_MINOR 0
#endif

namespace {

/* Probed once: -1 unknown, 0 no usable device, 1 usable. */
int g_state = -1;
int g_dev = -1; /* the device fp4s_cuda_bind's policy chose, -1: none chosen */
int g_sms = 0;
char g_desc[320];

void probe()
{
    if (g_state >= 0) return;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(g_desc, sizeof g_desc, "no usable GPU (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        cudaGetLastError();
        g_state = 0;
        return;
    }
    /* which device (fp4s_cuda_bind): the policy's, or the caller's current one */
    int bound = -1;
    char why[200] = "";
    if (fp4s_cu_bind_resolve(n, &bound, why, sizeof why)) {
        snprintf(g_desc, sizeof g_desc, "no usable GPU (%s)", why);
        g_state = 0;
        return;
    }
    if (bound >= 0) {
        e = cudaSetDevice(bound);
        if (e != cudaSuccess) {
            snprintf(g_desc, sizeof g_desc, "no usable GPU (device %d: %s)", bound, cudaGetErrorString(e));
            cudaGetLastError();
            g_state = 0;
            return;
        }
        g_dev = bound;
    }
    int dev = 0;
    cudaDeviceProp prop;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess) {
        snprintf(g_desc, sizeof g_desc, "no usable GPU (%s)", cudaGetErrorString(e));
        cudaGetLastError();
        g_state = 0;
        return;
    }
    int cc = prop.major * 10 + prop.minor;
    int need = FP4S_CUDA_ARCH_MAJOR * 10 + FP4S_CUDA_ARCH_MINOR;
    if (cc < need) {
        snprintf(g_desc, sizeof g_desc, "%.200s, sm_%d: kernels built for sm_%d", prop.name, cc, need);
        g_state = 0;
        return;
    }
    g_sms = prop.multiProcessorCount;
    snprintf(g_desc, sizeof g_desc, "%.180s (device %d), sm_%d, %d SMs, %.1f GiB", prop.name, dev, cc,
             prop.multiProcessorCount, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    g_state = 1;
}

} // namespace

int fp4s_cu_fail(cudaError_t e, const char *what)
{
    int code = e == cudaErrorMemoryAllocation ? FP4S_ENOMEM : FP4S_EINTERNAL;
    const char *txt = cudaGetErrorString(e);
    cudaGetLastError();
    return fp4s_error_set(code, "cuda: %s: %s", what, txt);
}

unsigned fp4s_cu_extra_caps(void) { return FP4S_CUDA_CAP_DECOMPOSE | (FP4S_HAVE_CUBLAS ? FP4S_CUDA_CAP_REMEDY : 0u); }

unsigned fp4s_cu_grid(size_t work, unsigned threads)
{
    probe();
    size_t blocks = (work + threads - 1) / threads;
    size_t cap = (size_t)(g_sms > 0 ? g_sms : 132) * 16;
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    return (unsigned)blocks;
}

extern "C" FP4S_API bool fp4s_cuda_available(void)
{
    probe();
    /* CUDA's current device is per thread: the chosen one in this thread too */
    if (g_state == 1 && g_dev >= 0) cudaSetDevice(g_dev);
    return g_state == 1;
}

extern "C" FP4S_API size_t fp4s_cuda_describe(char *buf, size_t n)
{
    probe();
    size_t len = strlen(g_desc);
    if (buf && n) snprintf(buf, n, "%s", g_desc);
    return len;
}

int fp4s_cu_prepare(const fp4s_spec *s, const fp4s_tscale *ts, size_t rows, size_t cols,
                    fp4s_cu_params *p)
{
    (void)fp4s_cuda_available(); /* the chosen device, in the calling thread */
    const char *why;
    if (!s) return fp4s_error_set(FP4S_EINVAL, "cuda: no quantizer spec");
    int rc = fp4s_spec_check(s);
    if (rc) return rc;
    if (!fp4s_cu_supports_why(s, &why))
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: %s: not implemented on the GPU (%s)",
                              s->profile[0] ? s->profile : fp4s_format_name(s->format), why);
    if (cols % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "cuda: %zu columns is not a multiple of the block size %u",
                              cols, (unsigned)s->block);
    if (rows && cols && rows > (size_t)-1 / cols / 4)
        return fp4s_error_set(FP4S_ERANGE, "cuda: %zu x %zu elements overflow", rows, cols);
    if (s->format == FP4S_NVFP4 && !ts)
        return fp4s_error_set(FP4S_EINVAL, "cuda: NVFP4 needs the tensor scale (fp4s_tscale_init)");
    memset(p, 0, sizeof *p);
    p->format = (int)s->format;
    p->block = (int)s->block;
    p->tie = (int)s->tie;
    p->keep_neg_zero = s->keep_neg_zero ? 1 : 0;
    p->zero_in = (int)s->zero_in;
    cu_e2m1_thresholds(p->tie, p->thr);
    p->negz = s->keep_neg_zero ? 8u : 0u;
    p->zc[0] = s->zero_in == FP4S_ZIN_NEG ? 8u : 0u;
    p->zc[1] = s->zero_in == FP4S_ZIN_NEG ? 8u : s->zero_in == FP4S_ZIN_POS ? 0u : p->negz;
    p->ignore = s->nonfinite == FP4S_NF_IGNORE;
    p->nonfinite = (int)s->nonfinite;
    p->mx_rule = (int)s->mx_rule;
    p->mx_zero_code = s->mx_zero_block_code;
    p->recipe = (int)s->nv_recipe;
    if (s->format == FP4S_NVFP4) {
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        p->elem = (int)rt->elem;
        p->dq_split = rt->dequant == FP4S_NV_DQ_SPLIT;
        p->scale_ggml = rt->scale_codec == FP4S_NV_SC_UE4M3_GGML;
        p->no_tscale = rt->tscale == FP4S_NV_TS_NONE;
    }
    p->tile2d = s->format == FP4S_NVFP4 && s->tile2d;
    p->s_enc = ts ? ts->s_enc : 1.0f;
    p->s_dec = ts ? ts->s_dec : 1.0f;
    /* the fast element path: not ggml's level search; zero_in NEG gives
     * exact zeros code 8, which the word-level -0 clearing of a spec that
     * drops -0 would undo, so that combination takes the generic path */
    p->fast_ok = !(p->format == FP4S_NVFP4 && p->elem == FP4S_NV_ELEM_SEARCH) &&
                 !(s->zero_in == FP4S_ZIN_NEG && !s->keep_neg_zero);
    p->clear_negz = !s->keep_neg_zero;
    p->kmag = s->tie == FP4S_TIE_ZERO ? 0x1.fffffep-1f /* 1 - 2^-24 */ : 1.0f;
    p->fsel = 3 * (s->tie == FP4S_TIE_AWAY ? 2 : (s->tie == FP4S_TIE_ZERO ? 1 : 0)) + (int)s->zero_in;
    /* BF16 kept in words (quant_block.cuh: cu_encode16_pk for MXFP4, whose power-of-two
     * factor allows BF16 arithmetic, cu_encode16_nvw for NVFP4): the magic-add
     * rounding (ties away: with the lowest bit of |x| set), the code's sign
     * that of x: zero_in SIGN, or any zero_in where -0 codes are cleared
     * (every code 0 then positive; ggml's MXFP4) */
    p->pk16 = p->fast_ok && (s->zero_in == FP4S_ZIN_SIGN || p->clear_negz);
    p->kmag2 = s->tie == FP4S_TIE_ZERO ? 0x3F7F3F7Fu /* 1 - 2^-8 */ : 0x3F803F80u;
    p->lsb2 = s->tie == FP4S_TIE_AWAY ? 0x00010001u : 0u;
    return 0;
}

extern "C" FP4S_API unsigned fp4s_cuda_caps(void)
{
    unsigned c = FP4S_CUDA_CAP_BUILT | FP4S_CUDA_CAP_QUANTIZE | FP4S_CUDA_CAP_BF16 | FP4S_CUDA_CAP_F16 |
                 FP4S_CUDA_CAP_PACKED | fp4s_cu_extra_caps();
    if (fp4s_cuda_available()) c |= FP4S_CUDA_CAP_DEVICE;
    return c;
}

/* ---- host-memory conveniences ------------------------------------------------ */

extern "C" FP4S_API int fp4s_cuda_quantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                                   const void *x, size_t rows, size_t cols, size_t ld,
                                                   bool packed, uint8_t *codes, uint8_t *scales)
{
    fp4s_cu_params p;
    int dt;
    int rc = fp4s_cu_quantize_args(s, ts, dtype, x, rows, cols, ld, codes, scales, &p, &dt);
    if (rc) return rc < 0 ? rc : 0;
    const size_t esz = dt == CU_DT_F32 ? 4 : 2;
    size_t nx = (rows - 1) * ld + cols, nc = rows * cols / (packed ? 2 : 1), ns = rows * (cols / s->block);
    void *dx = nullptr;
    uint8_t *dc = nullptr, *ds = nullptr;
    cudaError_t e = cudaMalloc(&dx, nx * esz);
    if (e == cudaSuccess) e = cudaMalloc((void **)&dc, nc);
    if (e == cudaSuccess) e = cudaMalloc((void **)&ds, ns);
    if (e == cudaSuccess) e = cudaMemcpy(dx, x, nx * esz, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        rc = fp4s_cuda_quantize_ex(s, ts, dtype, dx, rows, cols, ld, packed, dc, ds, nullptr);
        if (rc == 0) e = cudaDeviceSynchronize();
        if (rc == 0 && e == cudaSuccess) e = cudaMemcpy(codes, dc, nc, cudaMemcpyDeviceToHost);
        if (rc == 0 && e == cudaSuccess) e = cudaMemcpy(scales, ds, ns, cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess && rc == 0) rc = fp4s_cu_fail(e, "quantize (host buffers)");
    cudaFree(dx);
    cudaFree(dc);
    cudaFree(ds);
    return rc;
}

extern "C" FP4S_API int fp4s_cuda_quantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                                const float *x, size_t rows, size_t cols, size_t ld,
                                                uint8_t *codes, uint8_t *scales)
{
    return fp4s_cuda_quantize_host_ex(s, ts, FP4S_DT_F32, x, rows, cols, ld, false, codes, scales);
}

extern "C" FP4S_API int fp4s_cuda_dequantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                                     const uint8_t *codes, const uint8_t *scales,
                                                     size_t rows, size_t cols, float *out)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_dequantize_args(s, ts, codes, scales, out, rows, cols, &p);
    if (rc) return rc < 0 ? rc : 0;
    size_t n = rows * cols, nc = n / (packed ? 2 : 1), ns = rows * (cols / s->block);
    float *dout = nullptr;
    uint8_t *dc = nullptr, *ds = nullptr;
    cudaError_t e = cudaMalloc((void **)&dout, n * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&dc, nc);
    if (e == cudaSuccess) e = cudaMalloc((void **)&ds, ns);
    if (e == cudaSuccess) e = cudaMemcpy(dc, codes, nc, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(ds, scales, ns, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        rc = fp4s_cuda_dequantize_ex(s, ts, packed, dc, ds, rows, cols, dout, nullptr);
        if (rc == 0) e = cudaDeviceSynchronize();
        if (rc == 0 && e == cudaSuccess) e = cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess && rc == 0) rc = fp4s_cu_fail(e, "dequantize (host buffers)");
    cudaFree(dout);
    cudaFree(dc);
    cudaFree(ds);
    return rc;
}

extern "C" FP4S_API int fp4s_cuda_dequantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                                  const uint8_t *codes, const uint8_t *scales,
                                                  size_t rows, size_t cols, float *out)
{
    return fp4s_cuda_dequantize_host_ex(s, ts, false, codes, scales, rows, cols, out);
}
