/* The remedies on the GPU against the CPU (cuda/remedy_cu.h, remedy.h "on
 * the GPU").
 *
 *   test_cuda_remedy [--emulate] [--sanitize] [--seed N] [--quiet]
 *   test_cuda_remedy --bench M N K [--reps R] [--list LIST]
 *
 * 1. rac's kernels alone (every job shape: one tile or several with a short
 *    last one, rank or index order, given random sets, padding, a row stride
 *    above K, channels with equal norms): the norms must be the exact sums
 *    of the test's own xsum accumulators rounded once, the channels the
 *    order "larger norm first, ties to the lower index" (or the given set so
 *    ordered), E_I the float32 differences and zero padding: byte for byte.
 * 2. The GEMMs alone (GPU only): on operands whose products and partial sums
 *    are exact in FP32 (14-bit integers times 0 or +-1, K <= 512: any order
 *    of the sums gives the exact value, while TF32 or a lost bit would not),
 *    Y must equal the float64 product exactly; on Gaussian operands each
 *    element must be within gamma_K sum_k |a_ik| |b_jk| of it (gamma_K = K u
 *    / (1 - K u), u = 2^-24; FP64: 2^-53), for beta 0 and 1, row strides
 *    above the row.
 * 3. fp4s_remedy_eval on a site, remedy by remedy, CPU against the device:
 *    what does not come from a GEMM (the channels chosen, act_rel_error,
 *    weight_rel_error, noise_rel, the decompositions, the dead-zone split,
 *    the cost) must be equal bit for bit; the errors from the GEMMs must be
 *    within the bound that the GEMMs' own rounding bounds give (every GEMM's
 *    operands are seen through rm_gpu.on_gemm: ||dY||_F <= 2 gamma_K || |A|
 *    |B|^T ||_F, summed over the remedy's GEMMs, and the same for the float64
 *    references); under --emulate (the rac kernels on the host, the CPU's
 *    BLAS) everything must be equal bit for bit.
 * Without --emulate the GPU is used and the program exits 77 (meson: skip)
 * when none is usable or the build has no cuBLAS. --sanitize: a few small
 * cases (for compute-sanitizer). --bench: the same site through the CPU and
 * the GPU, timed (best of R), with the agreement. Exit 0 all checks pass,
 * 1 a difference, 2 usage. */
#include <fp4scope/fp4scope.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/remedy/remedy_internal.h"
#include "base/xsum.h"
#include "rng.h"

static int quiet, emulate, sanitize;
static long n_checks, n_bad;
static const fp4s_cu_rm_ops *ops;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (n_bad < 40) {
        fputs("MISMATCH: ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
    }
    va_end(ap);
    n_bad++;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_cuda_remedy: out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- 1. rac's kernels ------------------------------------------------------------------- */

/* The channels rac is expected to choose from the norms e2 (the pool: every
 * channel, or rac-rand's candidates cand[0..sel)), found another way than
 * the library's sort (analysis/remedy/linear.c, rac_select): sel times the
 * largest norm not yet taken, the smaller channel on equal norms; for index
 * order, the taken channels then listed by a scan in increasing order. */
static void expect_choice(const double *e2, size_t k, const size_t *cand, size_t sel, bool rank_order, bool *taken,
                          size_t *I)
{
    const size_t pool = cand ? sel : k;
    memset(taken, 0, k * sizeof *taken);
    for (size_t p = 0; p < sel; p++) {
        size_t best = k;
        for (size_t q = 0; q < pool; q++) {
            size_t j = cand ? cand[q] : q;
            if (!taken[j] && (best == k || e2[j] > e2[best] || (e2[j] == e2[best] && j < best))) best = j;
        }
        taken[best] = true;
        I[p] = best;
    }
    if (!rank_order)
        for (size_t j = 0, p = 0; j < k; j++)
            if (taken[j]) I[p++] = j;
}

static void rac_case(const fp4s_cu_rm_ops *o, void *ctx, size_t m, size_t k, size_t ldx, size_t trows, size_t sel,
                     size_t pad, bool rank_order, bool random, int dups)
{
    const size_t tiles = (m + trows - 1) / trows;
    float *xa = xmalloc(m * ldx * sizeof *xa), *xq = xmalloc(m * k * sizeof *xq);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ldx; j++) {
            double s = (j % 13 == 5) ? 20.0 : 1.0;
            xa[i * ldx + j] = (float)(s * gaussd());
            if (j < k) xq[i * k + j] = (float)ldexp(nearbyint(ldexp(xa[i * ldx + j], 2)), -2); /* a coarse grid */
        }
    /* channels with equal residuals: copies of channel 0 (ties in the norms) */
    for (int d = 1; d <= dups && (size_t)(3 * d) < k; d++)
        for (size_t i = 0; i < m; i++) {
            xa[i * ldx + 3 * d] = xa[i * ldx + 0];
            xq[i * k + 3 * d] = xq[i * k + 0];
        }
    size_t *cand = NULL;
    if (random) {
        cand = xmalloc(tiles * sel * sizeof *cand);
        for (size_t t = 0; t < tiles; t++) {
            size_t *perm = xmalloc(k * sizeof *perm);
            for (size_t j = 0; j < k; j++) perm[j] = j;
            for (size_t i = 0; i < sel; i++) {
                size_t j = i + (size_t)(rndf() * (double)(k - i));
                size_t tmp = perm[i];
                perm[i] = perm[j];
                perm[j] = tmp;
                cand[t * sel + i] = perm[i];
            }
            free(perm);
        }
    }
    /* the expected: exact norms, the order, E_I */
    double *e2 = xmalloc(tiles * k * sizeof *e2);
    size_t *idx = xmalloc(tiles * sel * sizeof *idx);
    float *ec = xmalloc(m * pad * sizeof *ec);
    bool *taken = xmalloc(k * sizeof *taken);
    memset(ec, 0, m * pad * sizeof *ec);
    for (size_t t = 0; t < tiles; t++) {
        size_t r0 = t * trows, r1 = r0 + trows < m ? r0 + trows : m;
        for (size_t j = 0; j < k; j++) {
            xsum s;
            memset(&s, 0, sizeof s);
            for (size_t i = r0; i < r1; i++) {
                double d = (double)xa[i * ldx + j] - (double)xq[i * k + j];
                xs_add(&s, d * d);
            }
            e2[t * k + j] = xs_value(&s);
        }
        size_t *I = idx + t * sel;
        expect_choice(e2 + t * k, k, random ? cand + t * sel : NULL, sel, rank_order, taken, I);
        for (size_t i = r0; i < r1; i++)
            for (size_t p = 0; p < sel; p++) ec[i * pad + p] = xa[i * ldx + I[p]] - xq[i * k + I[p]];
    }
    double *ge2 = xmalloc(tiles * k * sizeof *ge2);
    size_t *gidx = xmalloc(tiles * sel * sizeof *gidx);
    float *gec = xmalloc(m * pad * sizeof *gec);
    memset(ge2, 0xEE, tiles * k * sizeof *ge2); /* poison */
    memset(gidx, 0xEE, tiles * sel * sizeof *gidx);
    memset(gec, 0xEE, m * pad * sizeof *gec);
    fp4s_cu_rac_job jb = {xa, ldx, xq, m, k, trows, tiles, sel, pad, cand, rank_order};
    fp4s_cu_rac_out out = {gidx, gec, ge2};
    char what[160];
    snprintf(what, sizeof what, "rac m %zu k %zu ld %zu tile %zu sel %zu pad %zu %s%s%s", m, k, ldx, trows, sel, pad,
             rank_order ? "rank" : "index", random ? " random" : "", dups ? " ties" : "");
    int rc = o->rac(ctx, &jb, &out);
    n_checks++;
    if (rc) {
        bad("%s: %s", what, fp4s_last_error());
    } else {
        if (memcmp(e2, ge2, tiles * k * sizeof *e2)) {
            size_t f = 0;
            while (f < tiles * k && !memcmp(&e2[f], &ge2[f], sizeof *e2)) f++;
            bad("%s: norm %zu: %a, expected %a", what, f, ge2[f], e2[f]);
        }
        n_checks++;
        if (memcmp(idx, gidx, tiles * sel * sizeof *idx)) {
            size_t f = 0;
            while (idx[f] == gidx[f]) f++;
            bad("%s: channel %zu: %zu, expected %zu", what, f, gidx[f], idx[f]);
        }
        n_checks++;
        if (memcmp(ec, gec, m * pad * sizeof *ec)) bad("%s: E_I differs", what);
        n_checks++;
    }
    if (!quiet) printf("  %s: %s\n", what, rc ? "error" : "checked");
    free(xa);
    free(xq);
    free(cand);
    free(e2);
    free(idx);
    free(ec);
    free(taken);
    free(ge2);
    free(gidx);
    free(gec);
}

static void rac_tests(void *ctx)
{
    struct { size_t m, k, ld, trows, sel, pad; bool rank, random; int dups; } cs[] = {
        {64, 64, 64, 64, 16, 32, false, false, 0},
        {64, 64, 64, 64, 16, 16, true, false, 3},
        {100, 96, 100, 7, 9, 32, false, false, 2},     /* 15 tiles, the last of 2 rows */
        {100, 96, 100, 7, 9, 16, true, false, 2},
        {33, 40, 41, 33, 40, 64, true, false, 5},      /* every channel */
        {50, 128, 128, 50, 32, 32, false, true, 0},    /* rac-rand */
        {50, 128, 130, 16, 32, 32, true, true, 4},
        {1, 32, 32, 1, 1, 16, false, false, 0},
        {300, 1100, 1100, 300, 275, 288, false, false, 6}, /* K above the compaction's 1024 threads */
        {260, 2048, 2048, 129, 512, 512, true, false, 9},
    };
    size_t n = sizeof cs / sizeof cs[0];
    if (sanitize) n = 4;
    for (size_t i = 0; i < n; i++)
        rac_case(ops, ctx, cs[i].m, cs[i].k, cs[i].ld, cs[i].trows, cs[i].sel, cs[i].pad, cs[i].rank, cs[i].random,
                 cs[i].dups);
}

/* ---- 2. the GEMMs ------------------------------------------------------------------------- */

static double gam(size_t k, double u) { return (double)k * u / (1.0 - (double)k * u); }

static void gemm_case(void *ctx, size_t m, size_t n, size_t k, size_t pad, bool exact, float beta, bool dbl)
{
    const size_t lda = k + pad, ldb = k + 2 * pad, ldy = n + pad;
    double *a = xmalloc(m * lda * sizeof *a), *b = xmalloc(n * ldb * sizeof *b), *y0 = xmalloc(m * ldy * sizeof *y0);
    for (size_t i = 0; i < m * lda; i++) a[i] = exact ? (double)((int64_t)(rnd() % 16384) - 8192) : gaussd();
    for (size_t i = 0; i < n * ldb; i++) b[i] = exact ? (double)((int)(rnd() % 3) - 1) : gaussd();
    for (size_t i = 0; i < m * ldy; i++) y0[i] = exact ? (double)((int)(rnd() % 64) - 32) : gaussd();
    float *af = xmalloc(m * lda * sizeof *af), *bf = xmalloc(n * ldb * sizeof *bf), *yf = xmalloc(m * ldy * sizeof *yf);
    for (size_t i = 0; i < m * lda; i++) af[i] = (float)a[i];
    for (size_t i = 0; i < n * ldb; i++) bf[i] = (float)b[i];
    for (size_t i = 0; i < m * lda; i++) a[i] = af[i];
    for (size_t i = 0; i < n * ldb; i++) b[i] = bf[i];
    double *yd = xmalloc(m * ldy * sizeof *yd);
    for (size_t i = 0; i < m * ldy; i++) {
        yf[i] = (float)y0[i];
        y0[i] = yf[i];
        yd[i] = y0[i];
    }
    int rc = dbl ? ops->dgemm(ctx, m, n, k, a, lda, b, ldb, beta, yd, ldy)
                 : ops->sgemm(ctx, m, n, k, af, lda, bf, ldb, beta, yf, ldy);
    char what[128];
    snprintf(what, sizeof what, "%s [%zu x %zu] x [%zu x %zu]^T, %s, beta %g, stride +%zu", dbl ? "dgemm" : "sgemm", m,
             k, n, k, exact ? "exact operands" : "Gaussian", beta, pad);
    n_checks++;
    if (rc) {
        bad("%s: %s", what, fp4s_last_error());
        goto out;
    }
    const double u = dbl ? 0x1p-53 : 0x1p-24, g = gam(k + 1, u), gref = gam(k + 1, 0x1p-53);
    double worst = 0;
    size_t nbad = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ldy; j++) {
            const double got = dbl ? yd[i * ldy + j] : (double)yf[i * ldy + j];
            if (j >= n) { /* the gaps between rows are not written */
                if (memcmp(&got, &y0[i * ldy + j], sizeof got) && got != y0[i * ldy + j]) nbad++;
                continue;
            }
            double ref = beta ? y0[i * ldy + j] : 0.0, s = beta ? fabs(y0[i * ldy + j]) : 0.0;
            for (size_t p = 0; p < k; p++) {
                ref += a[i * lda + p] * b[j * ldb + p];
                s += fabs(a[i * lda + p] * b[j * ldb + p]);
            }
            /* the reference's own rounding (float64) added to the bound */
            const double bound = exact ? 0.0 : (g + gref) * s;
            const double d = fabs(got - ref);
            if (d > bound) nbad++;
            if (bound > 0 && d / bound > worst) worst = d / bound;
        }
    n_checks++;
    if (nbad) bad("%s: %zu elements outside the bound", what, nbad);
    if (!quiet) printf("  %s: worst error %.3g of the bound\n", what, worst);
out:
    free(a);
    free(b);
    free(y0);
    free(af);
    free(bf);
    free(yf);
    free(yd);
}

static void gemm_tests(void *ctx)
{
    for (int dbl = 0; dbl < 2; dbl++) {
        gemm_case(ctx, 64, 48, 512, 0, true, 0.0f, dbl);
        gemm_case(ctx, 33, 65, 509, 3, true, 1.0f, dbl);
        if (sanitize) continue;
        gemm_case(ctx, 256, 192, 4096, 0, false, 0.0f, dbl);
        gemm_case(ctx, 100, 37, 1000, 5, false, 1.0f, dbl);
        gemm_case(ctx, 1, 1, 1, 0, false, 0.0f, dbl);
        gemm_case(ctx, 7, 9, 0, 1, false, 1.0f, dbl);
    }
}

/* ---- 3. the evaluation ------------------------------------------------------------------------ */

/* What on_gemm saw: each GEMM's rounding bound 2 gamma_K ||S||_F, S = |A|
 * |B|^T (both sides are within gamma_K S of the exact product, element by
 * element), and ||S||_F. */
typedef struct gseen {
    int n;
    bool dbl[64];
    double bound[64], ab[64];
    float beta[64];
} gseen;

static double fro(bool dbl, const void *p, size_t rows, size_t cols, size_t ld)
{
    double s = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double v = dbl ? ((const double *)p)[i * ld + j] : (double)((const float *)p)[i * ld + j];
            s += v * v;
        }
    return sqrt(s) * (1 + 1e-12);
}

static double elem(bool dbl, const void *p, size_t i) { return dbl ? ((const double *)p)[i] : ((const float *)p)[i]; }

/* ||S||_F for S = |A| |B|^T (the per-element bound's sum), computed when the
 * product is small, else its bound ||A||_F ||B||_F. */
static double abs_fro(bool dbl, size_t m, size_t n, size_t k, const void *a, size_t lda, const void *b, size_t ldb)
{
    if ((double)m * (double)n * (double)k > 3e7) return fro(dbl, a, m, k, lda) * fro(dbl, b, n, k, ldb);
    double s2 = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t p = 0; p < k; p++) s += fabs(elem(dbl, a, i * lda + p)) * fabs(elem(dbl, b, j * ldb + p));
            s2 += s * s;
        }
    return sqrt(s2) * (1 + 1e-12);
}

static void on_gemm(void *u, bool dbl, size_t m, size_t n, size_t k, const void *a, size_t lda, const void *b,
                    size_t ldb, double beta)
{
    gseen *g = u;
    if (g->n >= 64) return;
    double ab = abs_fro(dbl, m, n, k, a, lda, b, ldb);
    g->dbl[g->n] = dbl;
    g->ab[g->n] = ab;
    g->beta[g->n] = (float)beta;
    g->bound[g->n] = 2.0 * gam(k + 1, dbl ? 0x1p-53 : 0x1p-24) * ab;
    g->n++;
}

/* From the GEMMs seen in one evaluation of one remedy: dref, a bound of
 * ||dR||_F for every float64 reference; dshare, of the two shares' outputs
 * (the first two float32 GEMMs); dy, of the remedy's output: the sum of its
 * GEMMs' bounds and, where one adds into Y (beta 1: rac's compensation), the
 * rounding of that sum on either side, 2 u (1 + gamma) sum ||A|| ||B||. */
static void gemm_bounds(const gseen *g, double *dref, double *dy, double dshare[2])
{
    int share = 0;
    double ab = 0;
    bool acc = false;
    *dref = *dy = dshare[0] = dshare[1] = 0;
    for (int i = 0; i < g->n; i++) {
        if (g->dbl[i]) {
            *dref = fmax(*dref, g->bound[i]);
        } else if (share < 2) {
            dshare[share++] = g->bound[i];
        } else {
            *dy += g->bound[i];
            ab += g->ab[i];
            acc |= g->beta[i] != 0;
        }
    }
    if (acc) *dy += 2.0 * 0x1p-24 * 1.01 * ab * 2.0;
}

/* |r' - r| for r = ||Y - R|| / ||R|| when ||dY|| <= dy, ||dR|| <= dr. */
static double ratio_bound(double r, double ref2, double dy, double dr, size_t mn)
{
    double R = sqrt(ref2);
    if (!(R > dr)) return INFINITY;
    return (dy + dr) / (R - dr) + r * dr / (R - dr) + 4.0 * (double)(mn + 4) * 0x1p-53 * (r + 1e-300);
}

static int eq_d(double a, double b) { return !memcmp(&a, &b, sizeof a) || (isnan(a) && isnan(b)); }

static void near(const char *what, const char *field, double cpu, double dev, double bound)
{
    n_checks++;
    if (emulate) {
        if (!eq_d(cpu, dev)) bad("%s: %s: %a on the device, %a on the CPU (must be equal)", what, field, dev, cpu);
        return;
    }
    if (isnan(cpu) && isnan(dev)) return;
    if (!(fabs(cpu - dev) <= bound))
        bad("%s: %s: %.17g on the GPU, %.17g on the CPU, bound %.3g", what, field, dev, cpu, bound);
}

static void same(const char *what, const char *field, const void *a, const void *b, size_t n)
{
    n_checks++;
    if (memcmp(a, b, n)) bad("%s: %s differs", what, field);
}

typedef struct site {
    size_t m, n, k;
    float *X, *Xt, *W;
    fp4s_spec as, ws;
} site;

static void site_make(site *s, const char *fmt, size_t m, size_t n, size_t k)
{
    s->m = m;
    s->n = n;
    s->k = k;
    fp4s_format f;
    if (fp4s_format_parse(fmt, &f) || fp4s_spec_profile(&s->as, f, NULL)) {
        fprintf(stderr, "test_cuda_remedy: %s\n", fp4s_last_error());
        exit(2);
    }
    fp4s_remedy_weight_spec(&s->as, -1, &s->ws);
    s->X = xmalloc(m * k * sizeof *s->X);
    s->Xt = xmalloc(m * k * sizeof *s->Xt);
    s->W = xmalloc(n * k * sizeof *s->W);
    double *cs = xmalloc(k * sizeof *cs);
    for (size_t j = 0; j < k; j++) cs[j] = exp(0.7 * gaussd()) * (j % 97 == 13 ? 30.0 : 1.0);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < k; j++) {
            s->X[i * k + j] = (float)(gaussd() * cs[j] * (rndf() < 0.02 ? 4.0 : 1.0));
            s->Xt[i * k + j] = (float)(s->X[i * k + j] * (1 + 0x1p-12 * gaussd()));
        }
    for (size_t i = 0; i < n * k; i++) s->W[i] = (float)(0.02 * gaussd());
    free(cs);
}

static void site_free(site *s)
{
    free(s->X);
    free(s->Xt);
    free(s->W);
}

static int eval(const rm_gpu *g, const site *s, const fp4s_remedy *r, size_t nr, fp4s_remedy_site *st,
                fp4s_remedy_result *res)
{
    fp4s_remedy_eval_opts o;
    fp4s_remedy_eval_opts_defaults(&o);
    return rm_eval_on(g, r, nr, &s->as, &s->ws, s->X, s->Xt, s->m, s->W, s->n, s->k, &o, st, res);
}

static void eval_one(void *ctx, const site *s, const char *fmt, const fp4s_remedy *r)
{
    char what[200], lab[128];
    fp4s_remedy_describe(r, lab, sizeof lab);
    snprintf(what, sizeof what, "eval %s [%zu x %zu] x [%zu x %zu]^T %s", fmt, s->m, s->k, s->n, s->k, lab);
    gseen seen = {0};
    rm_gpu cpu = {NULL, NULL, on_gemm, &seen}, dev = {ops, ctx, NULL, NULL};
    fp4s_remedy_site sc, sd;
    fp4s_remedy_result rc_, rd;
    int e1 = eval(&cpu, s, r, 1, &sc, &rc_);
    int e2 = e1 ? 0 : eval(&dev, s, r, 1, &sd, &rd);
    n_checks++;
    if (e1 || e2) {
        bad("%s: %s", what, fp4s_last_error());
        if (!e1) fp4s_remedy_results_free(&rc_, 1);
        return;
    }
    /* the bounds: GEMMs 0..nref-1 are the site's references (float64), then
     * the two shares (float32), then the remedy's references and GEMMs */
    double dref = 0, dy = 0, dshare[2] = {0, 0};
    gemm_bounds(&seen, &dref, &dy, dshare);
    const size_t mn = s->m * s->n;
    /* equal bit for bit */
    same(what, "channel count", &rc_.nchannels, &rd.nchannels, sizeof rc_.nchannels);
    if (rc_.nchannels == rd.nchannels && rc_.nchannels)
        same(what, "channels", rc_.channels, rd.channels, rc_.nchannels * sizeof *rc_.channels);
    same(what, "act_rel_error", &rc_.act_rel_error, &rd.act_rel_error, sizeof(double));
    same(what, "weight_rel_error", &rc_.weight_rel_error, &rd.weight_rel_error, sizeof(double));
    if (!(isnan(rc_.noise_rel) && isnan(rd.noise_rel))) same(what, "noise_rel", &rc_.noise_rel, &rd.noise_rel, 8);
    same(what, "act_before", &rc_.act_before, &rd.act_before, sizeof rc_.act_before);
    same(what, "act_after", &rc_.act_after, &rd.act_after, sizeof rc_.act_after);
    same(what, "site act decomposition", &sc.act, &sd.act, sizeof sc.act);
    same(what, "site weight decomposition", &sc.weight, &sd.weight, sizeof sc.weight);
    double dz[4] = {rc_.dz_err2_before, rc_.dz_err2_after, rc_.rest_err2_before, rc_.rest_err2_after};
    double dzd[4] = {rd.dz_err2_before, rd.dz_err2_after, rd.rest_err2_before, rd.rest_err2_after};
    for (int i = 0; i < 4; i++)
        if (!(isnan(dz[i]) && isnan(dzd[i]))) same(what, "dead-zone split", &dz[i], &dzd[i], 8);
    fp4s_remedy_cost cc = rc_.cost, cd = rd.cost;
    cc.gemm_seconds = cd.gemm_seconds = 0;
    same(what, "cost", &cc, &cd, sizeof cc);
    /* within the GEMMs' bounds */
    near(what, "out_rel_error", rc_.out_rel_error, rd.out_rel_error,
         ratio_bound(rc_.out_rel_error, sc.ref2_bf16, dy, dref, mn));
    near(what, "out_rel_error_vs_wfq", rc_.out_rel_error_vs_wfq, rd.out_rel_error_vs_wfq,
         ratio_bound(rc_.out_rel_error_vs_wfq, rc_.ref2_wfq, dy, dref, mn));
    near(what, "out_rel_error_vs_w4a4qat", rc_.out_rel_error_vs_w4a4qat, rd.out_rel_error_vs_w4a4qat,
         ratio_bound(rc_.out_rel_error_vs_w4a4qat, rc_.ref2_w4a4qat, dy, dref, mn));
    near(what, "out_rel_error_vs_own", rc_.out_rel_error_vs_own, rd.out_rel_error_vs_own,
         ratio_bound(rc_.out_rel_error_vs_own, fp4s_remedy_is_trainer(r->kind) ? sc.ref2_bf16 : sc.ref2_own, dy, dref,
                     mn));
    near(what, "act_only_rel_error", sc.act_only_rel_error, sd.act_only_rel_error,
         ratio_bound(sc.act_only_rel_error, sc.ref2_own, dshare[0], dref, mn));
    near(what, "weight_only_rel_error", sc.weight_only_rel_error, sd.weight_only_rel_error,
         ratio_bound(sc.weight_only_rel_error, sc.ref2_own, dshare[1], dref, mn));
    double R = sqrt(sc.ref2_bf16);
    near(what, "ref2_bf16", sc.ref2_bf16, sd.ref2_bf16, (2 * R + dref) * dref + 4.0 * (double)(mn + 4) * 0x1p-53 * sc.ref2_bf16);
    if (!quiet)
        printf("  %s: out_rel_error %.9g (CPU) %.9g (device), bound %.3g\n", what, rc_.out_rel_error,
               rd.out_rel_error, ratio_bound(rc_.out_rel_error, sc.ref2_bf16, dy, dref, mn));
    fp4s_remedy_results_free(&rc_, 1);
    fp4s_remedy_results_free(&rd, 1);
}

static const char *eval_list_mx =
    "bf16,wfq,w4a4qat,none,bf16-rollout,rac:0.25,rac:0.1:bf16,rac:0.25:aug,rac-rand:0.25,rac-rand:0.2:7,"
    "mbs:128,of:0.5,keep:2,aqn:0.05,aqn:0.02:3:weight,rht,rac:0.25+mbs:128,rac:0.2+keep:1+of:0.5";
static const char *eval_list_nv = "none,rac:0.25,rac:0.25:aug,4over6,rac:0.2+4over6,rht,sr,mbs:64";

static void eval_tests(void *ctx)
{
    struct { const char *fmt, *list; size_t m, n, k; } cs[] = {
        {"mxfp4", eval_list_mx, 96, 80, 256},
        {"nvfp4", eval_list_nv, 64, 48, 192},
    };
    for (size_t c = 0; c < 2; c++) {
        site s;
        site_make(&s, cs[c].fmt, cs[c].m, cs[c].n, cs[c].k);
        fp4s_remedy *r;
        size_t nr;
        if (fp4s_remedy_list_parse(sanitize ? "none,rac:0.25" : cs[c].list, &r, &nr)) {
            fprintf(stderr, "test_cuda_remedy: %s\n", fp4s_last_error());
            exit(2);
        }
        for (size_t i = 0; i < nr; i++) {
            if (r[i].sr) r[i].sr_seeds = 2;
            eval_one(ctx, &s, cs[c].fmt, &r[i]);
            if (r[i].rac_ratio > 0 && !sanitize) { /* per tile of 16 tokens, rank order */
                fp4s_remedy t = r[i];
                t.rac_tile_rows = 16;
                t.rac_order = FP4S_RAC_ORDER_RANK;
                eval_one(ctx, &s, cs[c].fmt, &t);
            }
        }
        free(r);
        site_free(&s);
    }
}

/* ---- --bench ----------------------------------------------------------------------------------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench(void *ctx, size_t m, size_t n, size_t k, int reps, const char *list)
{
    site s;
    site_make(&s, "mxfp4", m, n, k);
    fp4s_remedy *r;
    size_t nr;
    if (fp4s_remedy_list_parse(list, &r, &nr)) {
        fprintf(stderr, "test_cuda_remedy: %s\n", fp4s_last_error());
        return 2;
    }
    printf("bench: site [%zu x %zu] x [%zu x %zu]^T mxfp4, remedies %s, best of %d\n", m, k, n, k, list, reps);
    printf("| remedy | CPU s | GPU s | speedup | CPU GEMM s | GPU GEMM s | out_rel_error CPU | GPU | diff | bound | channels equal |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    rm_gpu dev = {ops, ctx, NULL, NULL};
    for (size_t i = 0; i < nr; i++) {
        fp4s_remedy_site sc, sd;
        fp4s_remedy_result rc_, rd;
        double tc = INFINITY, td = INFINITY, gc = 0, gd = 0;
        gseen seen = {0};
        rm_gpu cpu = {NULL, NULL, on_gemm, &seen};
        for (int t = 0; t < reps; t++) {
            seen.n = 0;
            double t0 = now();
            int e = eval(t ? NULL : &cpu, &s, &r[i], 1, &sc, &rc_);
            double t1 = now();
            if (e) {
                fprintf(stderr, "test_cuda_remedy: %s\n", fp4s_last_error());
                return 1;
            }
            if (t1 - t0 < tc) { tc = t1 - t0; gc = sc.gemm_seconds; }
            if (t + 1 < reps) fp4s_remedy_results_free(&rc_, 1);
        }
        for (int t = 0; t < reps; t++) {
            double t0 = now();
            int e = eval(&dev, &s, &r[i], 1, &sd, &rd);
            double t1 = now();
            if (e) {
                fprintf(stderr, "test_cuda_remedy: %s\n", fp4s_last_error());
                return 1;
            }
            if (t1 - t0 < td) { td = t1 - t0; gd = sd.gemm_seconds; }
            if (t + 1 < reps) fp4s_remedy_results_free(&rd, 1);
        }
        double dref = 0, dy = 0, dshare[2];
        gemm_bounds(&seen, &dref, &dy, dshare);
        bool ch = rc_.nchannels == rd.nchannels &&
                  (!rc_.nchannels || !memcmp(rc_.channels, rd.channels, rc_.nchannels * sizeof *rc_.channels));
        char lab[128];
        fp4s_remedy_describe(&r[i], lab, sizeof lab);
        double b = ratio_bound(rc_.out_rel_error, sc.ref2_bf16, dy, dref, m * n);
        printf("| %s | %.3f | %.3f | %.1fx | %.3f | %.3f | %.9f | %.9f | %.2g | %.2g | %s |\n", lab, tc, td, tc / td, gc,
               gd, rc_.out_rel_error, rd.out_rel_error, fabs(rc_.out_rel_error - rd.out_rel_error), b,
               ch ? "yes" : "NO");
        if (!ch || !(fabs(rc_.out_rel_error - rd.out_rel_error) <= b)) n_bad++;
        fp4s_remedy_results_free(&rc_, 1);
        fp4s_remedy_results_free(&rd, 1);
    }
    free(r);
    site_free(&s);
    return n_bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u;
    size_t bm = 0, bn = 0, bk = 0;
    int reps = 3;
    const char *blist = "none,rac:0.25,rac:0.25:aug,mbs:128";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--emulate")) emulate = 1;
        else if (!strcmp(argv[i], "--sanitize")) sanitize = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--list") && i + 1 < argc) blist = argv[++i];
        else if (!strcmp(argv[i], "--bench") && i + 3 < argc) {
            bm = strtoull(argv[++i], NULL, 0);
            bn = strtoull(argv[++i], NULL, 0);
            bk = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr, "usage: test_cuda_remedy [--emulate] [--sanitize] [--seed N] [--quiet]\n"
                            "       test_cuda_remedy --bench M N K [--reps R] [--list LIST]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    rng = seed ? seed : 1;
    ops = emulate ? &fp4s_cu_rm_emulate : &fp4s_cu_rm_gpu;
    printf("test_cuda_remedy: seed %" PRIu64 " (%s)\n", seed, emulate ? "host emulation" : "GPU");
    char why[400];
    if (!emulate && !fp4s_cu_rm_available(why, sizeof why)) {
        printf("SKIP: the GPU remedies cannot run here (%s)\n", why);
        return 77;
    }
    rm_gpu g = {ops, NULL, NULL, NULL};
    if (rm_gpu_open(&g)) {
        printf("cannot open the device: %s\n", fp4s_last_error());
        return 1;
    }
    if (bm) {
        int rc = bench(g.ctx, bm, bn, bk, reps, blist);
        rm_gpu_close(&g);
        return rc;
    }
    if (!quiet) printf("rac kernels:\n");
    rac_tests(g.ctx);
    if (!emulate) {
        if (!quiet) printf("GEMMs:\n");
        gemm_tests(g.ctx);
    }
    if (!quiet) printf("evaluation:\n");
    eval_tests(g.ctx);
    rm_gpu_close(&g);
    printf("%ld checks, %ld mismatches\n", n_checks, n_bad);
    return n_bad ? 1 : 0;
}
