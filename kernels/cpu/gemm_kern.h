/* The fixed-order GEMM's inner loops (gemm_kern.c, one copy per CPU level;
 * lib/core/gemm.c drives them). A call computes the rows [0, m) of one panel
 * of C: nc <= NR columns, from A's rows (a(i, k) = a[i * rs + k * ks]) and the
 * panel of B packed as bp[k * NR + j] (columns nc..NR-1 zero), into c (row
 * stride ldc): C = s, or s + beta * C when beta != 0, s the sum over k in
 * order of the rounded products (gemm_kern.c says why every level gives the
 * same bits). */
#ifndef FP4S_GEMM_KERN_H
#define FP4S_GEMM_KERN_H

#include <stddef.h>

#define FP4S_GK_NR_S 16 /* floats of a panel row: one 64-byte vector */
#define FP4S_GK_NR_D 8

#define FP4S_GK_DECL(sfx)                                                                                   \
    void fp4s_gk_panel_s##sfx(size_t m, size_t K, const float *a, size_t rs, size_t ks, const float *bp,    \
                              size_t nc, float beta, float *c, size_t ldc);                                 \
    void fp4s_gk_panel_d##sfx(size_t m, size_t K, const double *a, size_t rs, size_t ks, const double *bp,  \
                              size_t nc, double beta, double *c, size_t ldc);
FP4S_GK_DECL(_c)
FP4S_GK_DECL(_avx2)
FP4S_GK_DECL(_avx512)
#undef FP4S_GK_DECL

#endif
