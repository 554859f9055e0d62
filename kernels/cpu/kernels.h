/* Internal kernel interface of the quantizer (not installed), and the one CPU
 * feature query. One prototype per hot loop; the table in use is the one of
 * the best level fp4s_cpu_flags() allows (dispatch.c). A backend may decline a
 * spec it does not implement by returning FP4S_ENOTSUP: the caller then runs
 * the reference for that call, so every spec always works.
 *
 * Kernels work on one contiguous range of whole rows; threading, stats merge and
 * argument checks are done by the front end (lib/core/quant.c). row0 is the
 * index of the first row in the whole tensor (2-D tiles and FP8 128x128 tiles
 * need it). Stats are added into *st; st == NULL asks for codes only (what an
 * inference engine computes): the kernel then skips the double-precision
 * err2/x2 sums and the integer counters, and writes exactly the same codes,
 * scale bytes, FP8 scales and dequantized values as with stats (the tester
 * checks this for every level and spec). */
#ifndef FP4S_KERNELS_H
#define FP4S_KERNELS_H

#include <fp4scope/quant.h>

#include <string.h>

#include "cpu/quant_sums.h"

typedef int (*fp4s_quant_fn)(const fp4s_spec *s, const fp4s_tscale *ts,
                             const float *x, size_t rows, size_t cols, size_t ld,
                             size_t row0, const fp4s_qout *out, fp4s_qstats *st);

typedef int (*fp4s_dequant_fn)(const fp4s_spec *s, const fp4s_tscale *ts,
                               const uint8_t *codes, size_t ld_codes,
                               const uint8_t *scales, size_t ld_scales,
                               const float *scale_f32, size_t ld_scale_f32,
                               size_t rows, size_t cols, size_t row0,
                               float *out, size_t ld_out);

typedef float (*fp4s_amax_fn)(const float *x, size_t rows, size_t cols, size_t ld,
                              uint64_t *nonfinite);

typedef struct fp4s_kernel_table {
    const char *name;          /* "ref", "avx2", "avx512" */
    fp4s_quant_fn quantize;
    fp4s_dequant_fn dequantize;
    fp4s_amax_fn amax;
} fp4s_kernel_table;

/* Add the counters and the exact sums of b into a: how a kernel hands its
 * stats to the caller, and the front end's fp4s_qstats_merge (so the kernels
 * call nothing in lib/core/quant.c). */
static inline void fp4s_qstats_add(fp4s_qstats *a, const fp4s_qstats *b)
{
    a->elements += b->elements;
    a->blocks += b->blocks;
    a->saturated += b->saturated;
    a->zero_blocks += b->zero_blocks;
    a->nonfinite += b->nonfinite;
    a->nan += b->nan;
    a->inf += b->inf;
    a->nonfinite_blocks += b->nonfinite_blocks;
    a->neg_zero += b->neg_zero;
    a->scale_underflow += b->scale_underflow;
    a->scale_clamped += b->scale_clamped;
    qsums bs;
    memcpy(&bs, b->sums, sizeof bs);
    qs_merge_into(a, &bs);
}

/* The scalar reference (quant_ref.c). */
extern const fp4s_kernel_table fp4s_kernels_ref;
/* SIMD tables (quant_avx2.c, quant_avx512.c); only linked when built. */
extern const fp4s_kernel_table fp4s_kernels_avx2;
extern const fp4s_kernel_table fp4s_kernels_avx512;

/* The CPU feature levels every SIMD path of the library takes from
 * fp4s_cpu_flags() (dispatch.c): what this build (-Dsimd) and the CPU have,
 * masked by FP4S_FORCE_REF (0: the portable C everywhere),
 * fp4s_kernels_force_ref() and fp4s_kernels_select(). AVX512 (F, BW, VL, DQ)
 * comes with AVX2 (+FMA) set. */
enum { FP4S_CPU_AVX2 = 1u << 0, FP4S_CPU_AVX512 = 1u << 1 };
unsigned fp4s_cpu_flags(void);

/* The quantizer table for the current flags. */
const fp4s_kernel_table *fp4s_kernels_active(void);

#endif
