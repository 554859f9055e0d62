/* The CPU GEMM of the remedies (analysis/remedy) and the RL testbed
 * (analysis/rl), on the path fp4s_get_gemm() names (<fp4scope/common.h>):
 *
 *   FP4S_GEMM_FIXED (default)  every element of C in one order of operations,
 *       s = 0; for k = 0 .. K-1: s = s + a_ik * b_kj (each product and sum
 *       rounded, no fused multiply-add); C = s, or s + beta C when beta != 0.
 *       Its value depends on the operands alone: not on the CPU's model or
 *       SIMD level, the thread count, the tiles, or the build's compiler
 *       flags (kernels/cpu/gemm_kern.c).
 *   FP4S_GEMM_BLAS  the BLAS (core/blas.h), one single-threaded call per
 *       fixed tile of C (GEMM_TILE_M x GEMM_TILE_N): results do not depend on
 *       the thread count, but do on the BLAS and the CPU it picks kernels for.
 *
 * C [M, N] = op(A) op(B) (+ beta C), row-major: op(A) is A [M, K], or with ta
 * A [K, M] transposed; op(B) is B [K, N], or with tb B [N, K] transposed.
 * nthreads: 1 runs on the calling thread; 0 splits C's tiles over
 * fp4s_get_threads() workers, or runs on the calling thread when it is itself
 * a worker of fp4s_parallel_* (no nested pools). Returns 0, FP4S_ENOMEM,
 * FP4S_ENOTSUP (BLAS path without a BLAS) or FP4S_ERANGE (a size above the
 * BLAS's int), with the detail set. */
#ifndef FP4S_CORE_GEMM_H
#define FP4S_CORE_GEMM_H

#include <stdbool.h>
#include <stddef.h>

int fp4s_gemm_f32(bool ta, bool tb, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                  size_t ldb, float beta, float *C, size_t ldc, int nthreads);
int fp4s_gemm_f64(bool ta, bool tb, size_t M, size_t N, size_t K, const double *A, size_t lda, const double *B,
                  size_t ldb, double beta, double *C, size_t ldc, int nthreads);

#endif
