/* The CPU GEMM (gemm.h): the fixed-order path over kernels/cpu/gemm_kern.c,
 * or the BLAS in fixed tiles; and the process's choice between them. */
#include "core/gemm.h"
#include "base/threads.h"
#include "core/blas.h"
#include "cpu/gemm_kern.h"
#include "cpu/kernels.h"

#include <fp4scope/common.h>

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Tiles of C: the pieces the workers take, and on the BLAS path the calls
 * (so its results depend on these constants, never on the thread count). */
#define GEMM_TILE_M 128
#define GEMM_TILE_N 256
/* below this many multiply-adds one thread does it all */
#define GEMM_PAR_MIN (1u << 21)

/* ---- the process's path ------------------------------------------------------------ */
static int path = -1; /* -1: not decided, FP4S_GEMM read at the first use */

const char *fp4s_gemm_name(fp4s_gemm_path p)
{
    return p == FP4S_GEMM_BLAS ? "blas" : p == FP4S_GEMM_FIXED ? "fixed" : "?";
}

int fp4s_gemm_parse(const char *s, fp4s_gemm_path *out)
{
    if (s && !strcmp(s, "fixed")) *out = FP4S_GEMM_FIXED;
    else if (s && !strcmp(s, "blas")) *out = FP4S_GEMM_BLAS;
    else return fp4s_error_set(FP4S_EINVAL, "GEMM path '%s': expected fixed or blas", s ? s : "(null)");
    return 0;
}

int fp4s_set_gemm(fp4s_gemm_path p)
{
    if (p != FP4S_GEMM_FIXED && p != FP4S_GEMM_BLAS)
        return fp4s_error_set(FP4S_EINVAL, "GEMM path %d: expected FP4S_GEMM_FIXED or FP4S_GEMM_BLAS", (int)p);
    if (p == FP4S_GEMM_BLAS && !fp4s_blas()) return FP4S_ENOTSUP;
    __atomic_store_n(&path, (int)p, __ATOMIC_RELAXED);
    return 0;
}

fp4s_gemm_path fp4s_get_gemm(void)
{
    int p = __atomic_load_n(&path, __ATOMIC_RELAXED);
    if (p < 0) {
        /* an unknown value keeps the default: tools check FP4S_GEMM themselves */
        const char *e = getenv("FP4S_GEMM");
        p = e && !strcmp(e, "blas") ? FP4S_GEMM_BLAS : FP4S_GEMM_FIXED;
        __atomic_store_n(&path, p, __ATOMIC_RELAXED);
    }
    return (fp4s_gemm_path)p;
}

/* ---- kernels by CPU level -------------------------------------------------------------- */
typedef void (*panel_s_fn)(size_t, size_t, const float *, size_t, size_t, const float *, size_t, float, float *,
                           size_t);
typedef void (*panel_d_fn)(size_t, size_t, const double *, size_t, size_t, const double *, size_t, double,
                           double *, size_t);

static void kernels(panel_s_fn *s, panel_d_fn *d)
{
    *s = fp4s_gk_panel_s_c;
    *d = fp4s_gk_panel_d_c;
#if defined(FP4S_HAVE_K_AVX2)
    unsigned f = fp4s_cpu_flags();
    if (f & FP4S_CPU_AVX2) *s = fp4s_gk_panel_s_avx2, *d = fp4s_gk_panel_d_avx2;
#if defined(FP4S_HAVE_K_AVX512)
    if (f & FP4S_CPU_AVX512) *s = fp4s_gk_panel_s_avx512, *d = fp4s_gk_panel_d_avx512;
#endif
#endif
}

/* ---- one call ------------------------------------------------------------------------------ */
typedef struct gjob {
    bool dbl, ta, tb, blas;
    size_t M, N, K, lda, ldb, ldc;
    const void *A, *B;
    void *C;
    double beta;
    size_t tn;           /* tiles across N */
    panel_s_fn ks;
    panel_d_fn kd;
} gjob;

static int blas_tile(const gjob *j, size_t i0, size_t m, size_t j0, size_t n)
{
#if FP4S_HAVE_BLAS
    const fp4s_blas_fns *bl = fp4s_blas();
    if (!bl) return FP4S_ENOTSUP;
    size_t es = j->dbl ? sizeof(double) : sizeof(float);
    const char *a = (const char *)j->A + (j->ta ? i0 : i0 * j->lda) * es;
    const char *b = (const char *)j->B + (j->tb ? j0 * j->ldb : j0) * es;
    char *c = (char *)j->C + (i0 * j->ldc + j0) * es;
    enum CBLAS_TRANSPOSE ta = j->ta ? CblasTrans : CblasNoTrans, tb = j->tb ? CblasTrans : CblasNoTrans;
    if (j->dbl)
        bl->dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->K, 1.0, (const double *)a, (int)j->lda,
                  (const double *)b, (int)j->ldb, j->beta, (double *)c, (int)j->ldc);
    else
        bl->sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->K, 1.0f, (const float *)a, (int)j->lda,
                  (const float *)b, (int)j->ldb, (float)j->beta, (float *)c, (int)j->ldc);
    return 0;
#else
    (void)j, (void)i0, (void)m, (void)j0, (void)n;
    return fp4s_error_set(FP4S_ENOTSUP, "libfp4scope was built without a BLAS (-Dblas)");
#endif
}

/* Pack columns [j0, j0 + nc) of op(B) as bp[k * nr + j], zero beyond nc. */
#define PACK(T)                                                                                          \
    do {                                                                                                 \
        const T *B = j->B;                                                                               \
        T *p = bp;                                                                                       \
        for (size_t k = 0; k < j->K; k++, p += nr) {                                                     \
            if (j->tb)                                                                                   \
                for (size_t c = 0; c < nc; c++) p[c] = B[(j0 + c) * j->ldb + k];                         \
            else                                                                                         \
                memcpy(p, B + k * j->ldb + j0, nc * sizeof(T));                                          \
            for (size_t c = nc; c < nr; c++) p[c] = 0;                                                   \
        }                                                                                                \
    } while (0)

static int fixed_tile(const gjob *j, size_t i0, size_t m, size_t j0t, size_t n, void **buf)
{
    size_t nr = j->dbl ? FP4S_GK_NR_D : FP4S_GK_NR_S, es = j->dbl ? sizeof(double) : sizeof(float);
    if (!*buf && !(*buf = malloc((j->K ? j->K : 1) * nr * es)))
        return fp4s_error_set(FP4S_ENOMEM, "GEMM: out of memory for a panel of %zu x %zu", j->K, nr);
    size_t rs = j->ta ? 1 : j->lda, ks = j->ta ? j->lda : 1;
    for (size_t j0 = j0t; j0 < j0t + n; j0 += nr) {
        size_t nc = j0t + n - j0 < nr ? j0t + n - j0 : nr;
        if (j->dbl) {
            double *bp = *buf;
            PACK(double);
            const double *a = (const double *)j->A + (j->ta ? i0 : i0 * j->lda);
            j->kd(m, j->K, a, rs, ks, bp, nc, j->beta, (double *)j->C + i0 * j->ldc + j0, j->ldc);
        } else {
            float *bp = *buf;
            PACK(float);
            const float *a = (const float *)j->A + (j->ta ? i0 : i0 * j->lda);
            j->ks(m, j->K, a, rs, ks, bp, nc, (float)j->beta, (float *)j->C + i0 * j->ldc + j0, j->ldc);
        }
    }
    return 0;
}

static int tiles(void *arg, size_t begin, size_t end, int worker)
{
    (void)worker;
    const gjob *j = arg;
    void *buf = NULL;
    int rc = 0;
    for (size_t t = begin; t < end && !rc; t++) {
        size_t i0 = t / j->tn * GEMM_TILE_M, j0 = t % j->tn * GEMM_TILE_N;
        size_t m = j->M - i0 < GEMM_TILE_M ? j->M - i0 : GEMM_TILE_M;
        size_t n = j->N - j0 < GEMM_TILE_N ? j->N - j0 : GEMM_TILE_N;
        rc = j->blas ? blas_tile(j, i0, m, j0, n) : fixed_tile(j, i0, m, j0, n, &buf);
    }
    free(buf);
    return rc;
}

/* openblas_set_num_threads(1), for the whole process */
static void blas_single(void)
{
#if FP4S_HAVE_BLAS
    const fp4s_blas_fns *bl = fp4s_blas();
    if (bl && bl->set_num_threads) bl->set_num_threads(1);
#endif
}

static int gemm(gjob *j, int nthreads)
{
    if (!j->M || !j->N) return 0;
    j->blas = fp4s_get_gemm() == FP4S_GEMM_BLAS;
    if (j->blas) {
        const fp4s_blas_fns *bl = fp4s_blas();
        if (!bl) {
            fp4s_error_prefix("GEMM (FP4S_GEMM=blas)");
            return FP4S_ENOTSUP;
        }
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, blas_single); /* each tile is one call on its worker's thread */
        const size_t v[] = {j->M, j->N, j->K, j->lda, j->ldb, j->ldc};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            if (v[i] > (size_t)INT_MAX)
                return fp4s_error_set(FP4S_ERANGE, "GEMM: size %zu does not fit the BLAS integer", v[i]);
    }
    if (!j->K) { /* C = beta C: no products */
        for (size_t i = 0; i < j->M; i++)
            for (size_t c = 0; c < j->N; c++) {
                if (j->dbl) {
                    double *y = (double *)j->C + i * j->ldc + c;
                    *y = j->beta == 0 ? 0.0 : j->beta * *y;
                } else {
                    float *y = (float *)j->C + i * j->ldc + c;
                    *y = j->beta == 0 ? 0.0f : (float)j->beta * *y;
                }
            }
        return 0;
    }
    kernels(&j->ks, &j->kd);
    j->tn = (j->N + GEMM_TILE_N - 1) / GEMM_TILE_N;
    size_t nt = (j->M + GEMM_TILE_M - 1) / GEMM_TILE_M * j->tn;
    int w = nthreads;
    if (w <= 0) w = fp4s_in_parallel_worker() ? 1 : fp4s_get_threads();
    if ((double)j->M * (double)j->N * (double)j->K < GEMM_PAR_MIN) w = 1;
    if (w == 1) return tiles(j, 0, nt, 0);
    return fp4s_parallel_dynamic(nt, 1, w, tiles, j);
}

int fp4s_gemm_f32(bool ta, bool tb, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                  size_t ldb, float beta, float *C, size_t ldc, int nthreads)
{
    gjob j = {.dbl = false, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
              .A = A, .B = B, .C = C, .beta = beta};
    return gemm(&j, nthreads);
}

int fp4s_gemm_f64(bool ta, bool tb, size_t M, size_t N, size_t K, const double *A, size_t lda, const double *B,
                  size_t ldb, double beta, double *C, size_t ldc, int nthreads)
{
    gjob j = {.dbl = true, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
              .A = A, .B = B, .C = C, .beta = beta};
    return gemm(&j, nthreads);
}
