/* The remedies on the GPU (internal, not installed): the interface between
 * analysis/remedy (linear.c, eval.c, gemm.c) and kernels/cuda/remedy.cu.
 *
 * Two parts:
 *   - the GEMMs, Y (+)= A [m, k] B [n, k]^T with row-major operands in host
 *     memory, through cuBLAS in FP32 (FP64 for the references) with the
 *     pedantic math mode: no TF32, no reduced-precision reduction, FP32
 *     accumulation of the exact float32 operands. cuBLAS chooses the order of
 *     the sums (tiles, split K), so the outputs agree with the CPU's BLAS to
 *     the rounding bound of a K-term sum (gamma_K sum_k |a_ik| |b_jk|, either
 *     side), not bit for bit;
 *   - rac's compensation kernels: the squared residual norms of the channels
 *     of each tile, ||E_k||^2 = sum over the tile's tokens of ((double)x -
 *     (double)x^)^2, added into the exact fixed-point accumulators of
 *     base/xsum.h and rounded once (the CPU's rac adds them the same way, so
 *     the norms are the same doubles); the choice of I (the first sel
 *     channels in the order "larger norm first, ties to the lower index", or
 *     the given random set) and its order (index or rank); and E_I, gathered
 *     and zero-padded to pad columns. All bit-identical to the CPU.
 *
 * The ops come as a table so that tests can put the host emulation of the
 * rac kernels (the same functions run on the CPU) beside the CPU's BLAS. */
#ifndef FP4S_CUDA_REMEDY_CU_H
#define FP4S_CUDA_REMEDY_CU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One rac job: rows [0, m) of the operand before quantization xa (row
 * stride ldx) and the quantized one xq ([m, k], stride k), tiles of trows
 * rows (the last may be shorter), sel channels a tile, E_I padded to pad >=
 * sel columns. cand: NULL (choose the first sel by norm) or [tiles * sel]
 * channel sets given by the caller (rac-rand), which are then ordered.
 * rank_order: I in rank order, else ascending channel order. */
typedef struct fp4s_cu_rac_job {
    const float *xa;
    size_t ldx;
    const float *xq;
    size_t m, k, trows, tiles, sel, pad;
    const size_t *cand;
    bool rank_order;
} fp4s_cu_rac_job;

/* The outputs, host memory: idx [tiles * sel] the channels of each tile, ec
 * [m, pad] E_I (zero beyond sel), e2 (may be NULL) [tiles * k] the norms. */
typedef struct fp4s_cu_rac_out {
    size_t *idx;
    float *ec;
    double *e2;
} fp4s_cu_rac_out;

typedef struct fp4s_cu_rm_ops {
    const char *name; /* "cuda" or "emulate" */
    /* NULL sgemm/dgemm: the CPU's BLAS */
    int (*sgemm)(void *ctx, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb,
                 float beta, float *y, size_t ldy);
    int (*dgemm)(void *ctx, size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b,
                 size_t ldb, double beta, double *y, size_t ldy);
    int (*rac)(void *ctx, const fp4s_cu_rac_job *j, fp4s_cu_rac_out *o);
    /* the context: open (NULL open: none needed) and close */
    int (*open)(void **ctx);
    void (*close)(void *ctx);
} fp4s_cu_rm_ops;

/* The GPU (sgemm/dgemm through cuBLAS, rac through the kernels); in a build
 * without CUDA or cuBLAS, open fails with FP4S_ENOTSUP. */
extern const fp4s_cu_rm_ops fp4s_cu_rm_gpu;
/* The rac kernels' arithmetic on the host with the CPU's BLAS (CUDA builds;
 * without CUDA, open fails with FP4S_ENOTSUP). */
extern const fp4s_cu_rm_ops fp4s_cu_rm_emulate;

/* True when the GEMMs can run on the GPU: cuBLAS built in and loadable and a
 * usable GPU; else false with the reason in why (n bytes; may be NULL). */
bool fp4s_cu_rm_available(char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
