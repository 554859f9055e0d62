/* The fixed-order GEMM's inner loops (lib/core/gemm.c), compiled once per CPU
 * level by kernels/cpu/meson.build: the baseline (GK_SUFFIX _c, the level
 * "ref"), -mavx2 (_avx2) and -mavx512f (_avx512); gemm.c picks one through
 * fp4s_cpu_flags().
 *
 * Every element of C is computed in one order on every level:
 *     s = 0; for k = 0 .. K-1: s = s + a_ik * b_kj; C = beta == 0 ? s : s + beta * C
 * each product and each sum rounded (no fused multiply-add: -ffp-contract=off).
 * The levels differ only in how many elements they compute at once: the lanes
 * of GCC vectors (a panel row of 16 floats or 8 doubles: one register of
 * AVX-512, two of AVX2, four of SSE2) are columns of C, and a level keeps MR
 * rows of C in registers. Lanes and rows never mix, so every level gives the same bits,
 * and so do the pieces of C a caller cuts the work into (gemm.c's tiles). */
#include <stddef.h>
#include <string.h>

#include "cpu/gemm_kern.h"

#ifndef GK_SUFFIX
#define GK_SUFFIX _c
#endif
#define GK_CAT2(a, b) a##b
#define GK_CAT(a, b) GK_CAT2(a, b)
#define GK_FN(f) GK_CAT(f, GK_SUFFIX)

/* The native vector of the level (16, 32 or 64 bytes), NV of them per panel
 * row, and the rows of C a block keeps in registers: 8 x 1 zmm on AVX-512
 * (8 independent sums per k, enough to hide the add latency), 4 x 2 ymm on
 * AVX2, 2 x 4 xmm on SSE2. */
#if defined(__AVX512F__)
#define GK_VB 64
#define GK_MR 8
#elif defined(__AVX2__)
#define GK_VB 32
#define GK_MR 4
#else
#define GK_VB 16
#define GK_MR 2
#endif
#define GK_NV (64 / GK_VB)

typedef float gk_vs __attribute__((vector_size(GK_VB), aligned(4)));
typedef double gk_vd __attribute__((vector_size(GK_VB), aligned(8)));

/* mr rows of C from row i: acc[r][v] = sum over k of a(i + r, k) * panel row
 * k, in k order; then stored into the first nc columns of C. */
#define GK_BLOCK(T, V, NR, mr)                                                                              \
    do {                                                                                                    \
        V acc[mr][GK_NV];                                                                                   \
        for (size_t r = 0; r < (mr); r++)                                                                   \
            for (size_t v = 0; v < GK_NV; v++) acc[r][v] = (V){0};                                          \
        const T *ai = a + i * rs;                                                                           \
        for (size_t k = 0; k < K; k++) {                                                                    \
            V b[GK_NV];                                                                                     \
            for (size_t v = 0; v < GK_NV; v++) b[v] = ((const V *)(bp + k * (NR)))[v];                      \
            const T *ak = ai + k * ks;                                                                      \
            for (size_t r = 0; r < (mr); r++) {                                                             \
                T x = ak[r * rs];                                                                           \
                for (size_t v = 0; v < GK_NV; v++) acc[r][v] += x * b[v];                                   \
            }                                                                                               \
        }                                                                                                   \
        for (size_t r = 0; r < (mr); r++) {                                                                 \
            T *cr = c + (i + r) * ldc;                                                                      \
            for (size_t j = 0; j < nc; j++) {                                                               \
                T y = acc[r][j / (NR / GK_NV)][j % (NR / GK_NV)];                                           \
                cr[j] = beta == 0 ? y : y + beta * cr[j];                                                   \
            }                                                                                               \
        }                                                                                                   \
    } while (0)

void GK_FN(fp4s_gk_panel_s)(size_t m, size_t K, const float *a, size_t rs, size_t ks, const float *bp, size_t nc,
                            float beta, float *c, size_t ldc)
{
    size_t i = 0;
    for (; i + GK_MR <= m; i += GK_MR) GK_BLOCK(float, gk_vs, FP4S_GK_NR_S, GK_MR);
    for (; i < m; i++) GK_BLOCK(float, gk_vs, FP4S_GK_NR_S, 1);
}

void GK_FN(fp4s_gk_panel_d)(size_t m, size_t K, const double *a, size_t rs, size_t ks, const double *bp,
                            size_t nc, double beta, double *c, size_t ldc)
{
    size_t i = 0;
    for (; i + GK_MR <= m; i += GK_MR) GK_BLOCK(double, gk_vd, FP4S_GK_NR_D, GK_MR);
    for (; i < m; i++) GK_BLOCK(double, gk_vd, FP4S_GK_NR_D, 1);
}
