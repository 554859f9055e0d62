/* The BLAS calls of the remedies, timed: cblas on the CPU, or the GPU's
 * cuBLAS (cuda/remedy_cu.h) when the caller passes one. Without a BLAS in the
 * build the CPU calls return FP4S_ENOTSUP. */
#include "remedy_internal.h"

#include "fp4s_config.h"

#include <limits.h>

#if FP4S_HAVE_BLAS
#include <cblas.h>
#endif

static int fits(size_t m, size_t n, size_t k, size_t lda, size_t ldb, size_t ldy)
{
    size_t v[] = {m, n, k, lda, ldb, ldy};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] > (size_t)INT_MAX)
            return fp4s_error_set(FP4S_ERANGE, "remedy GEMM: size %zu does not fit the BLAS integer", v[i]);
    return 0;
}

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

int rm_sgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
             size_t ldb, float beta, float *y, size_t ldy, double *secs)
{
    if (g && g->on_gemm) g->on_gemm(g->u, false, m, n, k, a, lda, b, ldb, beta);
    if (g && g->ops && g->ops->sgemm) {
        double t0 = rm_now();
        int rc = g->ops->sgemm(g->ctx, m, n, k, a, lda, b, ldb, beta, y, ldy);
        if (!rc && secs) *secs += rm_now() - t0;
        return rc;
    }
#if FP4S_HAVE_BLAS
    int rc = fits(m, n, k, lda, ldb, ldy);
    if (rc) return rc;
    if (m == 0 || n == 0) return 0;
    double t0 = rm_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
                (int)ldb, beta, y, (int)ldy);
    if (secs) *secs += rm_now() - t0;
    return 0;
#else
    (void)m; (void)n; (void)k; (void)a; (void)lda; (void)b; (void)ldb; (void)beta; (void)y; (void)ldy; (void)secs;
    (void)fits;
    return fp4s_error_set(FP4S_ENOTSUP, "remedies: libfp4scope was built without a BLAS (-Dblas)");
#endif
}

int rm_dgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b,
             size_t ldb, double beta, double *y, size_t ldy, double *secs)
{
    if (g && g->on_gemm) g->on_gemm(g->u, true, m, n, k, a, lda, b, ldb, beta);
    if (g && g->ops && g->ops->dgemm) {
        double t0 = rm_now();
        int rc = g->ops->dgemm(g->ctx, m, n, k, a, lda, b, ldb, beta, y, ldy);
        if (!rc && secs) *secs += rm_now() - t0;
        return rc;
    }
#if FP4S_HAVE_BLAS
    int rc = fits(m, n, k, lda, ldb, ldy);
    if (rc) return rc;
    if (m == 0 || n == 0) return 0;
    double t0 = rm_now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb,
                beta, y, (int)ldy);
    if (secs) *secs += rm_now() - t0;
    return 0;
#else
    (void)m; (void)n; (void)k; (void)a; (void)lda; (void)b; (void)ldb; (void)beta; (void)y; (void)ldy; (void)secs;
    return fp4s_error_set(FP4S_ENOTSUP, "remedies: libfp4scope was built without a BLAS (-Dblas)");
#endif
}

int rm_dgemm_nn(size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b, size_t ldb,
                double *y, size_t ldy, double *secs)
{
#if FP4S_HAVE_BLAS
    int rc = fits(m, n, k, lda, ldb, ldy);
    if (rc) return rc;
    if (m == 0 || n == 0) return 0;
    double t0 = rm_now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb,
                0.0, y, (int)ldy);
    if (secs) *secs += rm_now() - t0;
    return 0;
#else
    (void)m; (void)n; (void)k; (void)a; (void)lda; (void)b; (void)ldb; (void)y; (void)ldy; (void)secs;
    return fp4s_error_set(FP4S_ENOTSUP, "remedies: libfp4scope was built without a BLAS (-Dblas)");
#endif
}
