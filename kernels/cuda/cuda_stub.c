/* The CUDA entry points of a build without CUDA support: nothing is
 * available, every op declines with FP4S_ENOTSUP so callers use the CPU.
 * fp4s_cuda_supports() (supports.c) still answers what the kernels would
 * implement; fp4s_cuda_available() is what says whether they can run. */
#include <fp4scope/cuda.h>

#include "cuda/decomp_cu.h"
#include "cuda/remedy_cu.h"

#include <stdio.h>

static const char no_cuda[] = "built without CUDA support";

static int declined(const char *op)
{
    return fp4s_error_set(FP4S_ENOTSUP, "cuda: %s: %s", op, no_cuda);
}

FP4S_API bool fp4s_cuda_available(void) { return false; }

FP4S_API size_t fp4s_cuda_describe(char *buf, size_t n)
{
    if (buf && n) snprintf(buf, n, "%s", no_cuda);
    return sizeof no_cuda - 1;
}

FP4S_API int fp4s_cuda_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                const float *d_x, size_t rows, size_t cols, size_t ld,
                                uint8_t *d_codes, uint8_t *d_scales, void *stream)
{
    return declined("quantize");
}

FP4S_API int fp4s_cuda_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                  const uint8_t *d_codes, const uint8_t *d_scales,
                                  size_t rows, size_t cols, float *d_out, void *stream)
{
    return declined("dequantize");
}

FP4S_API int fp4s_cuda_amax(const float *d_x, size_t rows, size_t cols, size_t ld,
                            float *amax, uint64_t *nonfinite, void *stream)
{
    return declined("amax");
}

FP4S_API int fp4s_cuda_quantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                     const float *x, size_t rows, size_t cols, size_t ld,
                                     uint8_t *codes, uint8_t *scales)
{
    return declined("quantize");
}

FP4S_API int fp4s_cuda_dequantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                       const uint8_t *codes, const uint8_t *scales,
                                       size_t rows, size_t cols, float *out)
{
    return declined("dequantize");
}

FP4S_API unsigned fp4s_cuda_caps(void) { return 0; }

FP4S_API int fp4s_cuda_quantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                   const void *d_x, size_t rows, size_t cols, size_t ld, bool packed,
                                   uint8_t *d_codes, uint8_t *d_scales, void *stream)
{
    return declined("quantize");
}

FP4S_API int fp4s_cuda_dequantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                     const uint8_t *d_codes, const uint8_t *d_scales,
                                     size_t rows, size_t cols, float *d_out, void *stream)
{
    return declined("dequantize");
}

FP4S_API int fp4s_cuda_amax_ex(fp4s_dtype dtype, const void *d_x, size_t rows, size_t cols, size_t ld,
                               float *amax, uint64_t *nonfinite, void *stream)
{
    return declined("amax");
}

FP4S_API int fp4s_cuda_quantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                        const void *x, size_t rows, size_t cols, size_t ld, bool packed,
                                        uint8_t *codes, uint8_t *scales)
{
    return declined("quantize");
}

FP4S_API int fp4s_cuda_dequantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                          const uint8_t *codes, const uint8_t *scales,
                                          size_t rows, size_t cols, float *out)
{
    return declined("dequantize");
}

int fp4s_cu_decomp(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows, size_t ld,
                   fp4s_cu_dk_out *out, void *stream)
{
    (void)k; (void)dt; (void)x; (void)x_host; (void)nrows; (void)ld; (void)out; (void)stream;
    return declined("decompose");
}

int fp4s_cu_decomp_emulate(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows, size_t ld,
                           fp4s_cu_dk_out *out, void *stream)
{
    (void)k; (void)dt; (void)x; (void)x_host; (void)nrows; (void)ld; (void)out; (void)stream;
    return declined("decompose");
}

/* the streaming decomposition: no GPU, no emulation */
static int ds_declined(const fp4s_cu_dk *k, fp4s_dtype dt, size_t chunk_rows, size_t keep_row0, size_t keep_rows,
                       fp4s_cu_ds **out)
{
    (void)k; (void)dt; (void)chunk_rows; (void)keep_row0; (void)keep_rows;
    *out = NULL;
    return declined("decompose");
}

const fp4s_cu_ds_ops fp4s_cu_ds_gpu = {false, ds_declined, NULL, NULL, NULL, NULL, NULL, NULL};
const fp4s_cu_ds_ops fp4s_cu_ds_emulate = {true, ds_declined, NULL, NULL, NULL, NULL, NULL, NULL};

/* the remedies: no GPU, no emulation (the CPU's own path is the reference) */
static int rm_declined(void **ctx)
{
    *ctx = NULL;
    return declined("remedies");
}

const fp4s_cu_rm_ops fp4s_cu_rm_gpu = {"cuda", NULL, NULL, NULL, rm_declined, NULL};
const fp4s_cu_rm_ops fp4s_cu_rm_emulate = {"emulate", NULL, NULL, NULL, rm_declined, NULL};

bool fp4s_cu_rm_available(char *why, size_t n)
{
    if (why && n) snprintf(why, n, "%s", no_cuda);
    return false;
}

FP4S_API int fp4s_cuda_qstats(const fp4s_spec *s, const fp4s_tscale *ts, const float *d_x, size_t rows,
                              size_t cols, size_t ld, fp4s_qstats *st, void *stream)
{
    (void)s; (void)ts; (void)d_x; (void)rows; (void)cols; (void)ld; (void)st; (void)stream;
    return declined("statistics");
}

FP4S_API int fp4s_cuda_quantize_host_all(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows,
                                         size_t cols, size_t ld, bool packed, uint8_t *codes, uint8_t *scales,
                                         float *dequant, fp4s_qstats *st)
{
    (void)s; (void)ts; (void)x; (void)rows; (void)cols; (void)ld; (void)packed; (void)codes; (void)scales;
    (void)dequant; (void)st;
    return declined("quantize");
}
