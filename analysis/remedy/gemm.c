/* The GEMMs of the remedies, timed: the CPU's (core/gemm.h: the fixed-order
 * path, or the BLAS where the process chose it), or the GPU's cuBLAS
 * (cuda/remedy_cu.h) when the caller passes one. */
#include "remedy_internal.h"

#include "core/gemm.h"

#include <stdbool.h>

int rm_gpu_open(rm_gpu *g)
{
    g->ctx = NULL;
    if (!g->ops || !g->ops->open) return 0;
    return g->ops->open(&g->ctx);
}

void rm_gpu_close(rm_gpu *g)
{
    if (g && g->ops && g->ops->close && g->ctx) g->ops->close(g->ctx);
    if (g) g->ctx = NULL;
}

/* Y (+)= A [m, k] op(B) with op(B) = B [n, k]^T (nt) or B [k, n], in float
 * or double (dbl; a, b, y of that type), on g's GPU where it has the GEMM,
 * else the CPU (core/gemm.h); the wall time added to *secs. */
static int gemm(const rm_gpu *g, bool dbl, bool nt, size_t m, size_t n, size_t k, const void *a, size_t lda,
                const void *b, size_t ldb, double beta, void *y, size_t ldy, double *secs)
{
    if (g && g->on_gemm) g->on_gemm(g->u, dbl, m, n, k, a, lda, b, ldb, beta);
    if (g && g->ops && nt && (dbl ? g->ops->dgemm != NULL : g->ops->sgemm != NULL)) {
        double t0 = rm_now();
        int rc = dbl ? g->ops->dgemm(g->ctx, m, n, k, a, lda, b, ldb, beta, y, ldy)
                     : g->ops->sgemm(g->ctx, m, n, k, a, lda, b, ldb, (float)beta, y, ldy);
        if (!rc && secs) *secs += rm_now() - t0;
        return rc;
    }
    /* the CPU: core/gemm.h, the process's path (fixed order by default), over
     * fixed tiles of Y on the library's threads: the same bits whatever their
     * number (and on the fixed path, whatever the CPU) */
    double t0 = rm_now();
    int rc = dbl ? fp4s_gemm_f64(false, nt, m, n, k, a, lda, b, ldb, beta, y, ldy, 0)
                 : fp4s_gemm_f32(false, nt, m, n, k, a, lda, b, ldb, (float)beta, y, ldy, 0);
    if (rc) {
        fp4s_error_prefix("remedies");
        return rc;
    }
    if (secs) *secs += rm_now() - t0;
    return 0;
}

int rm_sgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
             size_t ldb, float beta, float *y, size_t ldy, double *secs)
{
    return gemm(g, false, true, m, n, k, a, lda, b, ldb, beta, y, ldy, secs);
}

int rm_dgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b,
             size_t ldb, double beta, double *y, size_t ldy, double *secs)
{
    return gemm(g, true, true, m, n, k, a, lda, b, ldb, beta, y, ldy, secs);
}

int rm_dgemm_nn(size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b, size_t ldb,
                double *y, size_t ldy, double *secs)
{
    return gemm(NULL, true, false, m, n, k, a, lda, b, ldb, 0.0, y, ldy, secs);
}
