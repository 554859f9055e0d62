/* The BLAS calls of the remedies, timed: cblas on the CPU (core/blas.h opens
 * it on the first GEMM), or the GPU's cuBLAS (cuda/remedy_cu.h) when the
 * caller passes one. Without a BLAS (in the build, or loadable) the CPU calls
 * return FP4S_ENOTSUP. */
#include "remedy_internal.h"

#include "core/blas.h"

#include <limits.h>
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
 * else the CPU's BLAS; the wall time added to *secs. */
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
    const fp4s_blas_fns *bl = fp4s_blas();
    if (!bl) {
        fp4s_error_prefix("remedies");
        return FP4S_ENOTSUP;
    }
#if FP4S_HAVE_BLAS
    const size_t v[] = {m, n, k, lda, ldb, ldy};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] > (size_t)INT_MAX)
            return fp4s_error_set(FP4S_ERANGE, "remedy GEMM: size %zu does not fit the BLAS integer", v[i]);
    if (m == 0 || n == 0) return 0;
    const enum CBLAS_TRANSPOSE tb = nt ? CblasTrans : CblasNoTrans;
    double t0 = rm_now();
    if (dbl)
        bl->dgemm(CblasRowMajor, CblasNoTrans, tb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, y,
                  (int)ldy);
    else
        bl->sgemm(CblasRowMajor, CblasNoTrans, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb,
                  (float)beta, y, (int)ldy);
    if (secs) *secs += rm_now() - t0;
#endif
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
