/* Per-step mismatch accumulator: token sums, per-sequence sums, |rho| values. */
#include "mm_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const double pct_levels[FP4S_MM_NPCT] = {99.9, 99.0, 95.0, 90.0, 50.0, 10.0, 1.0};

const double *fp4s_mm_percentile_levels(void) { return pct_levels; }

void fp4s_mm_opts_defaults(fp4s_mm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->is_cap = 2.0;
    o->clamp = 20.0;
}

static inline uint64_t dkey(double v);
static void percentiles_hist(double *data, size_t n, const uint32_t *hist, const double *fractions, size_t k,
                             double *out);

/* ---- metric table ------------------------------------------------------------- */
typedef struct metric_def {
    const char *name;
    size_t off;
    const char *label;
} metric_def;

#define M(field, label) {#field, offsetof(fp4s_mm_metrics, field), label}
#define P(i, name, label) {name, offsetof(fp4s_mm_metrics, abs_pct) + (i) * sizeof(double), label}
static const metric_def metrics[] = {
    M(mean_abs, "mean |rho| (nats)"),
    M(mean_abs_per_seq, "mean of per-sequence mean |rho| (nats)"),
    M(max_abs, "max |rho| (nats)"),
    M(k1, "k1 = mean(lp_rollout - lp_trainer) (nats)"),
    M(k2, "k2 = mean(rho^2/2) (nats)"),
    M(k3, "k3 = mean(exp(rho) - rho - 1) (nats)"),
    M(chi2_token, "chi^2 token = mean(w^2) - 1"),
    M(chi2_seq, "chi^2 sequence = mean((prod w)^2) - 1"),
    M(probs_diff_mean, "mean |p_trainer - p_rollout| (probability)"),
    M(probs_diff_max, "max |p_trainer - p_rollout| (probability)"),
    M(probs_diff_std, "std |p_trainer - p_rollout| (probability)"),
    M(probs_pearson, "Pearson r of p_trainer, p_rollout"),
    M(ppl_trainer, "trainer perplexity (per-sequence mean)"),
    M(ppl_rollout, "rollout perplexity (per-sequence mean)"),
    M(log_ppl_diff_mean, "mean log-PPL difference (nats)"),
    M(log_ppl_abs_diff, "mean |log-PPL difference| (nats)"),
    M(log_ppl_diff_max, "max log-PPL difference (nats)"),
    M(log_ppl_diff_min, "min log-PPL difference (nats)"),
    M(ppl_ratio, "mean PPL ratio trainer/rollout"),
    M(is_mean, "mean IS weight w"),
    M(is_max, "max IS weight w"),
    M(is_min, "min IS weight w"),
    M(is_std, "std of IS weight (clamped to [1/C, C])"),
    M(is_ess, "IS effective sample size (fraction)"),
    M(is_frac_high, "fraction of tokens with w > C"),
    M(is_frac_low, "fraction of tokens with w < 1/C"),
    P(0, "abs_p99_9", "99.9th percentile of |rho| (nats)"),
    P(1, "abs_p99", "99th percentile of |rho| (nats)"),
    P(2, "abs_p95", "95th percentile of |rho| (nats)"),
    P(3, "abs_p90", "90th percentile of |rho| (nats)"),
    P(4, "abs_p50", "median |rho| (nats)"),
    P(5, "abs_p10", "10th percentile of |rho| (nats)"),
    P(6, "abs_p1", "1st percentile of |rho| (nats)"),
};
#undef M
#undef P

size_t fp4s_mm_metric_count(void) { return sizeof metrics / sizeof metrics[0]; }
const char *fp4s_mm_metric_name(size_t i) { return i < fp4s_mm_metric_count() ? metrics[i].name : NULL; }
const char *fp4s_mm_metric_label(size_t i) { return i < fp4s_mm_metric_count() ? metrics[i].label : NULL; }

int fp4s_mm_metric_index(const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++)
        if (strcmp(metrics[i].name, name) == 0) return (int)i;
    return -1;
}

double fp4s_mm_metric_value(const fp4s_mm_metrics *m, size_t i)
{
    if (!m || i >= fp4s_mm_metric_count()) return NAN;
    double v;
    memcpy(&v, (const char *)m + metrics[i].off, sizeof v);
    return v;
}

/* ---- sequence table (open addressing, int64 keys) ----------------------------- */
static uint64_t hash64(int64_t k)
{
    uint64_t x = (uint64_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int seq_grow(fp4s_mm_acc *a)
{
    size_t ncap = a->seq_cap ? a->seq_cap * 2 : 1024;
    mm_seq *nt = calloc(ncap, sizeof *nt);
    if (!nt) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for %zu sequences", ncap / 2);
    for (size_t i = 0; i < a->seq_cap; i++) {
        if (!a->seqs[i].used) continue;
        size_t h = hash64(a->seqs[i].id) & (ncap - 1);
        while (nt[h].used) h = (h + 1) & (ncap - 1);
        nt[h] = a->seqs[i];
    }
    free(a->seqs);
    a->seqs = nt;
    a->seq_cap = ncap;
    a->last_slot = SIZE_MAX;
    return 0;
}

/* Slot of sequence id, inserting it if needed; SIZE_MAX on out of memory. */
static size_t seq_slot(fp4s_mm_acc *a, int64_t id)
{
    if (a->last_slot != SIZE_MAX && a->last_id == id) return a->last_slot;
    if ((a->seq_used + 1) * 2 > a->seq_cap && seq_grow(a) != 0) return SIZE_MAX;
    size_t mask = a->seq_cap - 1, h = hash64(id) & mask;
    while (a->seqs[h].used && a->seqs[h].id != id) h = (h + 1) & mask;
    if (!a->seqs[h].used) {
        memset(&a->seqs[h], 0, sizeof a->seqs[h]);
        a->seqs[h].used = 1;
        a->seqs[h].id = id;
        a->seq_used++;
    }
    a->last_id = id;
    a->last_slot = h;
    return h;
}

static int abs_reserve(fp4s_mm_acc *a, size_t extra)
{
    if (a->nabs + extra <= a->abs_cap) return 0;
    size_t ncap = a->abs_cap ? a->abs_cap : 4096;
    while (ncap < a->nabs + extra) ncap *= 2;
    double *nv = realloc(a->absv, ncap * sizeof *nv);
    if (!nv) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for %zu tokens of one step", ncap);
    a->absv = nv;
    a->abs_cap = ncap;
    return 0;
}

/* ---- accumulator ----------------------------------------------------------------- */
int fp4s_mm_acc_open(const fp4s_mm_opts *o, fp4s_mm_acc **out)
{
    *out = NULL;
    fp4s_mm_opts d;
    if (!o) {
        fp4s_mm_opts_defaults(&d);
        o = &d;
    }
    if (!(o->is_cap > 1.0) || !isfinite(o->is_cap))
        return fp4s_error_set(FP4S_EINVAL, "mismatch: IS cap must be a finite number > 1, got %g", o->is_cap);
    if (!(o->clamp > 0.0) || !isfinite(o->clamp))
        return fp4s_error_set(FP4S_EINVAL, "mismatch: clamp must be a finite number > 0, got %g", o->clamp);
    fp4s_mm_acc *a = calloc(1, sizeof *a);
    if (!a) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory");
    a->hist = calloc(2 * 65536, sizeof *a->hist);
    if (!a->hist) {
        free(a);
        return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory");
    }
    a->o = *o;
    fp4s_mm_acc_reset(a);
    *out = a;
    return 0;
}

void fp4s_mm_acc_close(fp4s_mm_acc **a)
{
    if (!a || !*a) return;
    free((*a)->seqs);
    free((*a)->absv);
    free((*a)->hist);
    free(*a);
    *a = NULL;
}

void fp4s_mm_acc_reset(fp4s_mm_acc *a)
{
    memset(&a->s, 0, sizeof a->s);
    a->s.max_abs = -INFINITY;
    a->s.max_w = -INFINITY;
    a->s.min_w = INFINITY;
    a->s.max_d = -INFINITY;
    if (a->seqs && a->seq_used) memset(a->seqs, 0, a->seq_cap * sizeof *a->seqs);
    a->seq_used = 0;
    a->last_slot = SIZE_MAX;
    if (a->nabs) memset(a->hist, 0, 2 * 65536 * sizeof *a->hist);
    a->nabs = 0;
}

static inline int counted(const uint8_t *mask, size_t i) { return !mask || mask[i] != 0; }

/* One token with libm exp (the rare path: log-probs below -700 or |rho| > 700). */
static void add_slow(mm_sums *s, double lt, double lr, double C, double Cl, double B)
{
    const double rho = lt - lr, ab = fabs(rho);
    const double e = exp(rho);
    const double w = rho > B ? exp(B) : (rho < -B ? exp(-B) : e);
    s->n++;
    s->s_abs += ab;
    if (ab > s->max_abs) s->max_abs = ab;
    s->s_rho += rho;
    s->s_rho2 += rho * rho;
    s->s_k3 += e - rho - 1.0;
    s->s_w += w;
    s->s_w2 += w * w;
    if (w > s->max_w) s->max_w = w;
    if (w < s->min_w) s->min_w = w;
    const double wc = w < Cl ? Cl : (w > C ? C : w);
    s->s_wc += wc;
    s->s_wc2 += wc * wc;
    s->n_hi += w > C;
    s->n_lo += w < Cl;
    const double pt = exp(lt), pr = exp(lr), d = fabs(pt - pr);
    s->s_d += d;
    s->s_d2 += d * d;
    if (d > s->max_d) s->max_d = d;
    s->s_pt += pt;
    s->s_pr += pr;
    s->s_pt2 += pt * pt;
    s->s_pr2 += pr * pr;
    s->s_ptpr += pt * pr;
}

/* exp for |x| < 700, branch-free so that the token loop vectorizes:
 * x = k ln2 + r, |r| <= ln2/2, Taylor polynomial to r^13 (truncation < 1e-17
 * relative), 2^k built in the exponent bits. About 1 ulp (checked against libm
 * by the unit test through fp4s_mm_vexp_internal). */
static inline double vexp(double x)
{
    const double log2e = 1.4426950408889634074, shift = 6755399441055744.0; /* 1.5 * 2^52 */
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double t = x * log2e + shift;
    double kd = t - shift;
    double r = (x - kd * ln2_hi) - kd * ln2_lo;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t tb, sb = 0x4338000000000000ULL; /* bits of shift */
    memcpy(&tb, &t, sizeof tb);
    uint64_t eb = (tb - sb + 1023) << 52;
    double sc;
    memcpy(&sc, &eb, sizeof sc);
    return p * sc;
}

/* For the unit test (not exported from the shared library). */
double fp4s_mm_vexp_internal(double x);
double fp4s_mm_vexp_internal(double x) { return vexp(x); }

typedef struct blk_sums {
    double n_hi, n_lo, s_abs, max_abs, s_rho, s_rho2, s_k3, s_w, s_w2, max_w, min_w, s_wc, s_wc2;
    double s_d, s_d2, max_d, s_pt, s_pr, s_pt2, s_pr2, s_ptpr;
} blk_sums;

/* Token sums of n counted tokens, all with log-probs and rho in (-700, 700).
 * Writes |rho| to absv. Compiled for AVX2+FMA and the baseline; the
 * loader picks one (the FMA clone contracts nothing: -ffp-contract=off). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void token_pass(const double *restrict lt, const double *restrict lr, size_t n, double C, double Cl,
                       double B, double wB, double wmB, double *restrict absv, blk_sums *out)
{
    /* two loops over the block (it is in L1): fewer live accumulators each, no spills */
    double n_hi = 0, n_lo = 0, s_abs = 0, max_abs = -INFINITY, s_rho = 0, s_rho2 = 0, s_k3 = 0, s_w = 0, s_w2 = 0;
    double max_w = -INFINITY, min_w = INFINITY, s_wc = 0, s_wc2 = 0;
#pragma omp simd reduction(+ : n_hi, n_lo, s_abs, s_rho, s_rho2, s_k3, s_w, s_w2, s_wc, s_wc2) \
    reduction(max : max_abs, max_w) reduction(min : min_w)
    for (size_t i = 0; i < n; i++) {
        const double rho = lt[i] - lr[i], ab = fabs(rho);
        const double e = vexp(rho);
        const double w = rho > B ? wB : (rho < -B ? wmB : e);
        absv[i] = ab;
        s_abs += ab;
        max_abs = ab > max_abs ? ab : max_abs;
        s_rho += rho;
        s_rho2 += rho * rho;
        s_k3 += e - rho - 1.0;
        s_w += w;
        s_w2 += w * w;
        max_w = w > max_w ? w : max_w;
        min_w = w < min_w ? w : min_w;
        const double wc = w < Cl ? Cl : (w > C ? C : w);
        s_wc += wc;
        s_wc2 += wc * wc;
        n_hi += w > C ? 1.0 : 0.0;
        n_lo += w < Cl ? 1.0 : 0.0;
    }
    double s_d = 0, s_d2 = 0, max_d = -INFINITY, s_pt = 0, s_pr = 0, s_pt2 = 0, s_pr2 = 0, s_ptpr = 0;
#pragma omp simd reduction(+ : s_d, s_d2, s_pt, s_pr, s_pt2, s_pr2, s_ptpr) reduction(max : max_d)
    for (size_t i = 0; i < n; i++) {
        const double pt = vexp(lt[i]), pr = vexp(lr[i]), d = fabs(pt - pr);
        s_d += d;
        s_d2 += d * d;
        max_d = d > max_d ? d : max_d;
        s_pt += pt;
        s_pr += pr;
        s_pt2 += pt * pt;
        s_pr2 += pr * pr;
        s_ptpr += pt * pr;
    }
    out->n_hi = n_hi;
    out->n_lo = n_lo;
    out->s_abs = s_abs;
    out->max_abs = max_abs;
    out->s_rho = s_rho;
    out->s_rho2 = s_rho2;
    out->s_k3 = s_k3;
    out->s_w = s_w;
    out->s_w2 = s_w2;
    out->max_w = max_w;
    out->min_w = min_w;
    out->s_wc = s_wc;
    out->s_wc2 = s_wc2;
    out->s_d = s_d;
    out->s_d2 = s_d2;
    out->max_d = max_d;
    out->s_pt = s_pt;
    out->s_pr = s_pr;
    out->s_pt2 = s_pt2;
    out->s_pr2 = s_pr2;
    out->s_ptpr = s_ptpr;
}

#define MM_BLK 1024

/* Any counted token with a finite positive log-prob (a vectorizable max). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int any_positive(const double *restrict t, const double *restrict r, const uint8_t *restrict mask, size_t n)
{
    double mx = -INFINITY;
    if (mask) {
#pragma omp simd reduction(max : mx)
        for (size_t i = 0; i < n; i++) {
            double vt = t[i] < INFINITY ? t[i] : -INFINITY; /* NaN and +Inf do not count */
            double vr = r[i] < INFINITY ? r[i] : -INFINITY;
            double v = vt > vr ? vt : vr;
            v = mask[i] == 0 ? -INFINITY : v;
            mx = v > mx ? v : mx;
        }
    } else {
#pragma omp simd reduction(max : mx)
        for (size_t i = 0; i < n; i++) {
            double vt = t[i] < INFINITY ? t[i] : -INFINITY;
            double vr = r[i] < INFINITY ? r[i] : -INFINITY;
            double v = vt > vr ? vt : vr;
            mx = v > mx ? v : mx;
        }
    }
    return mx > 0;
}

/* Tokens of a block that are not (counted, finite and inside +-700): 0 means
 * the block can go to token_pass as it is (a vectorizable sum). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int block_irregular(const double *restrict t, const double *restrict r, const uint8_t *restrict mask,
                           size_t n)
{
    double odd = 0;
    if (mask) {
        for (size_t i = 0; i < n; i++)
            if (mask[i] == 0) return 1;
    }
    /* |x| < 700 also rejects NaN */
#pragma omp simd reduction(+ : odd)
    for (size_t i = 0; i < n; i++) odd += (fabs(t[i]) < 700 ? 0.0 : 1.0) + (fabs(r[i]) < 700 ? 0.0 : 1.0);
    return odd != 0;
}

int fp4s_mm_acc_add(fp4s_mm_acc *a, size_t n, const double *trainer, const double *rollout,
                    const int64_t *seq, const uint8_t *mask, uint8_t *first_out)
{
    if (!a || (n && (!trainer || !rollout || !seq)))
        return fp4s_error_set(FP4S_EINVAL, "mismatch: add: NULL argument");
    if (!a->o.allow_positive && any_positive(trainer, rollout, mask, n)) {
        for (size_t i = 0; i < n; i++) {
            if (!counted(mask, i)) continue;
            if (trainer[i] > 0 && isfinite(trainer[i]))
                return fp4s_error_set(FP4S_EFORMAT, "token %zu: trainer log-prob %.9g is positive "
                                      "(log-probs are <= 0; --allow-positive accepts it)", i, trainer[i]);
            if (rollout[i] > 0 && isfinite(rollout[i]))
                return fp4s_error_set(FP4S_EFORMAT, "token %zu: rollout log-prob %.9g is positive "
                                      "(log-probs are <= 0; --allow-positive accepts it)", i, rollout[i]);
        }
    }
    int rc = abs_reserve(a, n);
    if (rc) return rc;
    const double C = a->o.is_cap, Cl = 1.0 / C, B = a->o.clamp;
    const double wB = exp(B), wmB = exp(-B);
    double ct[MM_BLK], cr[MM_BLK];
    int64_t cs[MM_BLK];
    uint32_t ci[MM_BLK];
    mm_sums s = a->s;
    for (size_t b0 = 0; b0 < n; b0 += MM_BLK) {
        size_t bn = n - b0 < MM_BLK ? n - b0 : MM_BLK;
        size_t k = 0, kslow = 0;
        const double *pt = ct, *pr = cr;
        const int64_t *ps = cs;
        int direct = !block_irregular(trainer + b0, rollout + b0, mask ? mask + b0 : NULL, bn);
        if (direct) {
            /* every token counted and regular: no copy */
            pt = trainer + b0;
            pr = rollout + b0;
            ps = seq + b0;
            k = bn;
            if (first_out) memset(first_out + b0, 0, bn);
        }
        /* classify: counted tokens in order (for the sequences), fast ones packed */
        for (size_t j = 0; !direct && j < bn; j++) {
            size_t i = b0 + j;
            if (first_out) first_out[i] = 0;
            if (!counted(mask, i)) {
                s.masked++;
                continue;
            }
            const double lt = trainer[i], lr = rollout[i];
            if (!isfinite(lt) || !isfinite(lr)) {
                s.nonfinite++;
                continue;
            }
            ci[k] = (uint32_t)j;
            cs[k] = seq[i];
            if (lt > -700 && lr > -700 && lt < 700 && lr < 700) {
                ct[k] = lt;
                cr[k] = lr;
            } else {
                ct[k] = NAN; /* marks the slow path */
                cr[k] = NAN;
                kslow++;
            }
            k++;
        }
        if (k == 0) continue;
        double *absv = a->absv + a->nabs;
        if (kslow == 0) {
            blk_sums bs;
            token_pass(pt, pr, k, C, Cl, B, wB, wmB, absv, &bs);
            s.n += k;
            s.n_hi += (uint64_t)bs.n_hi;
            s.n_lo += (uint64_t)bs.n_lo;
            s.s_abs += bs.s_abs;
            s.s_rho += bs.s_rho;
            s.s_rho2 += bs.s_rho2;
            s.s_k3 += bs.s_k3;
            s.s_w += bs.s_w;
            s.s_w2 += bs.s_w2;
            s.s_wc += bs.s_wc;
            s.s_wc2 += bs.s_wc2;
            s.s_d += bs.s_d;
            s.s_d2 += bs.s_d2;
            s.s_pt += bs.s_pt;
            s.s_pr += bs.s_pr;
            s.s_pt2 += bs.s_pt2;
            s.s_pr2 += bs.s_pr2;
            s.s_ptpr += bs.s_ptpr;
            if (bs.max_abs > s.max_abs) s.max_abs = bs.max_abs;
            if (bs.max_w > s.max_w) s.max_w = bs.max_w;
            if (bs.min_w < s.min_w) s.min_w = bs.min_w;
            if (bs.max_d > s.max_d) s.max_d = bs.max_d;
        } else {
            for (size_t q = 0; q < k; q++) {
                size_t i = b0 + ci[q];
                add_slow(&s, trainer[i], rollout[i], C, Cl, B);
                absv[q] = fabs(trainer[i] - rollout[i]);
            }
        }
        /* |rho| histogram for the percentiles: two tables (even / odd tokens)
         * so that repeated bins do not serialize on one counter */
        {
            uint32_t *h0 = a->hist, *h1 = a->hist + 65536;
            size_t q = 0;
            for (; q + 1 < k; q += 2) {
                h0[dkey(absv[q]) >> 48]++;
                h1[dkey(absv[q + 1]) >> 48]++;
            }
            if (q < k) h0[dkey(absv[q]) >> 48]++;
        }
        a->nabs += k;
        /* sequences, in token order; a run of tokens of one sequence is summed
         * first and added once */
        for (size_t q = 0; q < k;) {
            const int64_t id = ps[q];
            size_t q1 = q;
            double sa = 0, sr = 0, sl = 0, sm = 0;
            do {
                size_t i = b0 + (direct ? q1 : ci[q1]);
                const double lt = trainer[i], lr = rollout[i], rho = lt - lr;
                sa += fabs(rho);
                sr += rho;
                sl += lt;
                sm += lr;
                q1++;
            } while (q1 < k && ps[q1] == id);
            size_t slot = (a->last_slot != SIZE_MAX && a->last_id == id) ? a->last_slot : seq_slot(a, id);
            if (slot == SIZE_MAX) {
                a->s = s;
                return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for the sequence table");
            }
            mm_seq *sq = &a->seqs[slot];
            if (sq->n == 0 && first_out) first_out[b0 + (direct ? q : ci[q])] = 1;
            sq->n += q1 - q;
            sq->s_abs += sa;
            sq->s_rho += sr;
            sq->s_lt += sl;
            sq->s_lr += sm;
            q = q1;
        }
    }
    a->s = s;
    return 0;
}

int mm_acc_add_f32(fp4s_mm_acc *a, size_t n, const float *trainer, const float *rollout, const int64_t *seq,
                   const uint8_t *mask, uint8_t *first_out)
{
    double t[MM_BLK], r[MM_BLK];
    for (size_t b0 = 0; b0 < n; b0 += MM_BLK) {
        size_t bn = n - b0 < MM_BLK ? n - b0 : MM_BLK;
        for (size_t i = 0; i < bn; i++) {
            t[i] = trainer[b0 + i];
            r[i] = rollout[b0 + i];
        }
        int rc = fp4s_mm_acc_add(a, bn, t, r, seq + b0, mask ? mask + b0 : NULL, first_out ? first_out + b0 : NULL);
        if (rc) return rc;
    }
    return 0;
}

int fp4s_mm_acc_merge(fp4s_mm_acc *dst, const fp4s_mm_acc *src)
{
    if (!dst || !src) return fp4s_error_set(FP4S_EINVAL, "mismatch: merge: NULL argument");
    if (dst->o.is_cap != src->o.is_cap || dst->o.clamp != src->o.clamp)
        return fp4s_error_set(FP4S_EINVAL, "mismatch: merge: accumulators have different options");
    int rc = abs_reserve(dst, src->nabs);
    if (rc) return rc;
    if (src->nabs) {
        memcpy(dst->absv + dst->nabs, src->absv, src->nabs * sizeof *src->absv);
        for (size_t q = 0; q < 2 * 65536; q++) dst->hist[q] += src->hist[q];
    }
    dst->nabs += src->nabs;
    for (size_t i = 0; i < src->seq_cap; i++) {
        const mm_seq *q = &src->seqs[i];
        if (!q->used) continue;
        size_t slot = seq_slot(dst, q->id);
        if (slot == SIZE_MAX) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for the sequence table");
        mm_seq *d = &dst->seqs[slot];
        d->n += q->n;
        d->s_abs += q->s_abs;
        d->s_rho += q->s_rho;
        d->s_lt += q->s_lt;
        d->s_lr += q->s_lr;
    }
    mm_sums *a = &dst->s;
    const mm_sums *b = &src->s;
    a->n += b->n;
    a->masked += b->masked;
    a->nonfinite += b->nonfinite;
    a->n_hi += b->n_hi;
    a->n_lo += b->n_lo;
    a->s_abs += b->s_abs;
    a->s_rho += b->s_rho;
    a->s_rho2 += b->s_rho2;
    a->s_k3 += b->s_k3;
    a->s_w += b->s_w;
    a->s_w2 += b->s_w2;
    a->s_wc += b->s_wc;
    a->s_wc2 += b->s_wc2;
    a->s_d += b->s_d;
    a->s_d2 += b->s_d2;
    a->s_pt += b->s_pt;
    a->s_pr += b->s_pr;
    a->s_pt2 += b->s_pt2;
    a->s_pr2 += b->s_pr2;
    a->s_ptpr += b->s_ptpr;
    if (b->max_abs > a->max_abs) a->max_abs = b->max_abs;
    if (b->max_w > a->max_w) a->max_w = b->max_w;
    if (b->min_w < a->min_w) a->min_w = b->min_w;
    if (b->max_d > a->max_d) a->max_d = b->max_d;
    return 0;
}

int fp4s_mm_acc_finish(fp4s_mm_acc *a, fp4s_mm_metrics *out)
{
    if (!a || !out) return fp4s_error_set(FP4S_EINVAL, "mismatch: finish: NULL argument");
    int64_t step = out->step;
    memset(out, 0, sizeof *out);
    out->step = step;
    const mm_sums *s = &a->s;
    out->masked = s->masked;
    out->nonfinite = s->nonfinite;
    out->tokens = s->n;
    if (s->n == 0) {
        double *f = &out->mean_abs;
        for (size_t i = 0; i < fp4s_mm_metric_count(); i++) f[i] = NAN;
        return fp4s_error_set(FP4S_EEMPTY, "no counted token (all masked or non-finite)");
    }
    const double n = (double)s->n, C = a->o.is_cap, B = a->o.clamp;
    out->mean_abs = s->s_abs / n;
    out->max_abs = s->max_abs;
    out->k1 = -s->s_rho / n;
    out->k2 = s->s_rho2 / (2.0 * n);
    out->k3 = s->s_k3 / n;
    out->chi2_token = s->s_w2 / n - 1.0;
    out->probs_diff_mean = s->s_d / n;
    out->probs_diff_max = s->max_d;
    if (s->n > 1) {
        double var = (s->s_d2 - s->s_d * s->s_d / n) / (n - 1.0);
        out->probs_diff_std = sqrt(var > 0 ? var : 0);
        double cxy = s->s_ptpr - s->s_pt * s->s_pr / n;
        double cxx = s->s_pt2 - s->s_pt * s->s_pt / n;
        double cyy = s->s_pr2 - s->s_pr * s->s_pr / n;
        out->probs_pearson = (cxx > 0 && cyy > 0) ? cxy / sqrt(cxx * cyy) : NAN;
    } else {
        out->probs_diff_std = NAN;
        out->probs_pearson = NAN;
    }
    out->is_mean = s->s_w / n;
    out->is_max = s->max_w;
    out->is_min = s->min_w;
    out->is_frac_high = (double)s->n_hi / n;
    out->is_frac_low = (double)s->n_lo / n;
    const double mc = s->s_wc / n, m2c = s->s_wc2 / n;
    if (s->n > 1) {
        double var = m2c - mc * mc;
        out->is_std = sqrt(var > 0 ? var : 0);
    } else {
        out->is_std = 0.0;
    }
    out->is_ess = 1.0 / (m2c / ((mc + 1e-8) * (mc + 1e-8)));
    (void)C;

    /* sequences */
    double ns = 0, sabs = 0, schi = 0, spt = 0, spr = 0, sd = 0, sad = 0, sed = 0;
    double dmax = -INFINITY, dmin = INFINITY;
    for (size_t i = 0; i < a->seq_cap; i++) {
        const mm_seq *q = &a->seqs[i];
        if (!q->used || q->n == 0) continue;
        const double qn = (double)q->n;
        ns += 1;
        sabs += q->s_abs / qn;
        double r = q->s_rho;
        r = r > B ? B : (r < -B ? -B : r);
        schi += exp(2.0 * r);
        const double mt = q->s_lt / qn, mr = q->s_lr / qn, d = mr - mt;
        spt += exp(-mt);
        spr += exp(-mr);
        sd += d;
        sad += fabs(d);
        sed += exp(d);
        if (d > dmax) dmax = d;
        if (d < dmin) dmin = d;
    }
    out->sequences = (uint64_t)ns;
    out->mean_abs_per_seq = sabs / ns;
    out->chi2_seq = schi / ns - 1.0;
    out->ppl_trainer = spt / ns;
    out->ppl_rollout = spr / ns;
    out->log_ppl_diff_mean = sd / ns;
    out->log_ppl_abs_diff = sad / ns;
    out->log_ppl_diff_max = dmax;
    out->log_ppl_diff_min = dmin;
    out->ppl_ratio = sed / ns;

    double fr[FP4S_MM_NPCT];
    for (int k = 0; k < FP4S_MM_NPCT; k++) fr[k] = pct_levels[k] / 100.0;
    percentiles_hist(a->absv, a->nabs, a->nabs <= 0xffffffffu ? a->hist : NULL, fr, FP4S_MM_NPCT, out->abs_pct);
    return 0;
}

/* ---- percentiles (multi-quickselect) ------------------------------------------------ */
static uint64_t xs_next(uint64_t *st)
{
    uint64_t x = *st;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *st = x;
}

static void insertion_sort(double *a, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++) {
        double v = a[i];
        size_t j = i;
        while (j > lo && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* Put the elements of the given (sorted, unique) ranks of a[lo, hi) in place. */
static void mselect(double *a, size_t lo, size_t hi, const size_t *r, size_t nr, uint64_t *st)
{
    while (nr > 0) {
        if (hi - lo <= 24) {
            insertion_sort(a, lo, hi);
            return;
        }
        size_t span = hi - lo;
        double x = a[lo + xs_next(st) % span], y = a[lo + xs_next(st) % span], z = a[lo + xs_next(st) % span];
        double p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            double v = a[i];
            if (v < p) {
                a[i] = a[lt];
                a[lt] = v;
                lt++;
                i++;
            } else if (v > p) {
                gt--;
                a[i] = a[gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        size_t nl = 0;
        while (nl < nr && r[nl] < lt) nl++;
        size_t nm = nl;
        while (nm < nr && r[nm] < gt) nm++;
        if (nl) mselect(a, lo, lt, r, nl, st);
        r += nm;
        nr -= nm;
        lo = gt;
    }
}

/* Order-preserving 64-bit key of a double (NaN excluded by the callers). */
static inline uint64_t dkey(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b & 0x8000000000000000ULL) ? ~b : b | 0x8000000000000000ULL;
}

/* Values of the (ascending) ranks rk[0..k) of seg[0..m), all elements sharing
 * their top 16 key bits: a histogram of the next 16 bits narrows each rank to
 * a sub-bin (1/2^20 of a binade) and only those sub-bins are gathered and
 * multi-selected. seg may be reordered. Small segments (or no memory): plain
 * multi-select of the segment. k <= 64. */
static void select_segment(double *seg, size_t m, const size_t *rk, size_t k, uint64_t *st, double *out)
{
    size_t ranks[64];
    if (k > 64) k = 64;
    memcpy(ranks, rk, k * sizeof *ranks);
    uint32_t *h = m > 16384 ? calloc(65536, sizeof *h) : NULL;
    if (!h) {
        mselect(seg, 0, m, ranks, k, st);
        for (size_t q = 0; q < k; q++) out[q] = seg[rk[q]];
        return;
    }
    for (size_t i = 0; i < m; i++) h[(dkey(seg[i]) >> 32) & 0xffff]++;
    /* sub-bin and rank inside it, per rank */
    size_t sub[64], rin[64], below = 0, bb = 0;
    for (size_t q = 0; q < k; q++) {
        while (below + h[bb] <= rk[q]) below += h[bb++];
        sub[q] = bb;
        rin[q] = rk[q] - below;
    }
    /* distinct wanted sub-bins (ascending) and their offsets in c */
    size_t ub[64], uoff[64], nb = 0, total = 0;
    for (size_t q = 0; q < k; q++) {
        if (nb && ub[nb - 1] == sub[q]) continue;
        ub[nb] = sub[q];
        uoff[nb] = total;
        total += h[sub[q]];
        nb++;
    }
    double *c = malloc((total ? total : 1) * sizeof *c);
    int32_t *slot = malloc(65536 * sizeof *slot);
    if (!c || !slot) {
        free(c);
        free(slot);
        free(h);
        mselect(seg, 0, m, ranks, k, st);
        for (size_t q = 0; q < k; q++) out[q] = seg[rk[q]];
        return;
    }
    for (size_t i = 0; i < 65536; i++) slot[i] = -1;
    size_t fill[64];
    for (size_t t = 0; t < nb; t++) {
        slot[ub[t]] = (int32_t)t;
        fill[t] = uoff[t];
    }
    for (size_t i = 0; i < m; i++) {
        int32_t t = slot[(dkey(seg[i]) >> 32) & 0xffff];
        if (t >= 0) c[fill[t]++] = seg[i];
    }
    /* rank of each wanted value inside c (ascending, possibly repeated) */
    size_t cr[64], u = 0, t = 0;
    for (size_t q = 0; q < k; q++) {
        while (ub[t] != sub[q]) t++;
        cr[q] = uoff[t] + rin[q];
    }
    size_t uk[64] = {0};
    for (size_t q = 0; q < k; q++)
        if (u == 0 || uk[u - 1] != cr[q]) uk[u++] = cr[q];
    mselect(c, 0, total, uk, u, st);
    for (size_t q = 0; q < k; q++) out[q] = c[cr[q]];
    free(c);
    free(slot);
    free(h);
}

/* Exact selection in two passes: a histogram of the top 16 key bits finds the
 * bin of every wanted rank; the elements of those bins are gathered and
 * multi-selected; rv[j] receives the value of rank r[j]; data is not changed.
 * About 3 ns per element against ~30 for partitioning with unpredictable
 * branches. Returns -1 (nothing changed) when out of memory. */
static int radix_select(const double *data, size_t n, const uint32_t *hin, const size_t *r, size_t nr, uint64_t *st,
                        double *rv)
{
    uint32_t *hist = calloc(65536, sizeof *hist);
    uint8_t *want = calloc(65536, 1);
    size_t *below = malloc(65537 * sizeof *below);
    if (!hist || !want || !below) {
        free(hist);
        free(want);
        free(below);
        return -1;
    }
    if (hin)
        for (size_t q = 0; q < 65536; q++) hist[q] = hin[q] + hin[65536 + q];
    else
        for (size_t i = 0; i < n; i++) hist[dkey(data[i]) >> 48]++;
    below[0] = 0;
    for (size_t b = 0; b < 65536; b++) below[b + 1] = below[b] + hist[b];
    /* bin of each rank: below[bin] <= r < below[bin + 1] */
    size_t *bin = malloc(nr * sizeof *bin);
    if (!bin) {
        free(hist);
        free(want);
        free(below);
        return -1;
    }
    size_t b = 0, ncand = 0;
    for (size_t j = 0; j < nr; j++) {
        while (below[b + 1] <= r[j]) b++;
        bin[j] = b;
        if (!want[b]) {
            want[b] = 1;
            ncand += hist[b];
        }
    }
    /* candidates grouped by bin: offsets of the wanted bins in cand */
    size_t *coff = malloc(65537 * sizeof *coff);
    double *cand = malloc((ncand ? ncand : 1) * sizeof *cand);
    size_t *cr = calloc(nr, sizeof *cr);
    if (!coff || !cand || !cr) {
        free(hist);
        free(want);
        free(below);
        free(bin);
        free(coff);
        free(cand);
        free(cr);
        return -1;
    }
    size_t acc = 0;
    for (size_t q = 0; q < 65536; q++) {
        coff[q] = acc;
        if (want[q]) acc += hist[q];
    }
    coff[65536] = acc;
    /* bucket the candidates by bin so that cand is ordered across bins */
    size_t *fill = below; /* reused: below[] is not needed once rb is known */
    size_t *rb = malloc(nr * sizeof *rb);
    if (!rb) {
        free(hist);
        free(want);
        free(below);
        free(bin);
        free(coff);
        free(cand);
        free(cr);
        return -1;
    }
    for (size_t j = 0; j < nr; j++) rb[j] = r[j] - below[bin[j]]; /* rank inside its bin */
    for (size_t q = 0; q < 65536; q++) fill[q] = coff[q];
    for (size_t i = 0; i < n; i++) {
        uint64_t bk = dkey(data[i]) >> 48;
        if (want[bk]) cand[fill[bk]++] = data[i];
    }
    /* the ranks of each wanted bin, selected within the bin's segment of cand */
    for (size_t j = 0; j < nr;) {
        size_t j1 = j;
        while (j1 < nr && j1 < j + 64 && bin[j1] == bin[j]) j1++;
        select_segment(cand + coff[bin[j]], hist[bin[j]], rb + j, j1 - j, st, rv + j);
        j = j1;
    }
    (void)cr;
    free(hist);
    free(want);
    free(below);
    free(bin);
    free(coff);
    free(cand);
    free(cr);
    free(rb);
    return 0;
}

static int cmp_size(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return (a > b) - (a < b);
}

void fp4s_percentiles(double *data, size_t n, const double *fractions, size_t k, double *out)
{
    percentiles_hist(data, n, NULL, fractions, k, out);
}

/* hist: NULL, or the 16-bit key histogram of data (saves the first pass). */
static void percentiles_hist(double *data, size_t n, const uint32_t *hist, const double *fractions, size_t k,
                             double *out)
{
    if (n == 0) {
        for (size_t j = 0; j < k; j++) out[j] = NAN;
        return;
    }
    size_t *ranks = malloc((2 * k + 2) * sizeof *ranks);
    size_t nr = 0;
    if (!ranks) { /* fall back to a full sort */
        for (size_t j = 0; j < k; j++) out[j] = NAN;
        return;
    }
    for (size_t j = 0; j < k; j++) {
        double f = fractions[j];
        if (f <= 0) f = 0;
        if (f >= 1) f = 1;
        double p = f * (double)(n - 1);
        size_t ip = (size_t)p;
        if (ip > n - 1) ip = n - 1;
        ranks[nr++] = ip;
        if (ip + 1 < n) ranks[nr++] = ip + 1;
    }
    qsort(ranks, nr, sizeof *ranks, cmp_size);
    size_t u = 0;
    for (size_t i = 0; i < nr; i++)
        if (u == 0 || ranks[u - 1] != ranks[i]) ranks[u++] = ranks[i];
    uint64_t st = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    double *rv = malloc(u * sizeof *rv);
    int done = rv && n >= 8192 && n <= 0xffffffffu && radix_select(data, n, hist, ranks, u, &st, rv) == 0;
    if (!done) mselect(data, 0, n, ranks, u, &st);
    for (size_t j = 0; j < k; j++) {
        double f = fractions[j];
        if (f <= 0) f = 0;
        if (f >= 1) f = 1;
        double p = f * (double)(n - 1);
        size_t ip = (size_t)p;
        if (ip > n - 1) ip = n - 1;
        double fr = p - (double)ip;
        size_t i2 = ip + 1 < n ? ip + 1 : n - 1;
        double v1 = data[ip], v2 = data[i2];
        if (done) {
            for (size_t q = 0; q < u; q++) {
                if (ranks[q] == ip) v1 = rv[q];
                if (ranks[q] == i2) v2 = rv[q];
            }
        }
        out[j] = (1.0 - fr) * v1 + fr * v2;
    }
    free(rv);
    free(ranks);
}
