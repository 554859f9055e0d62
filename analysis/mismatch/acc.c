/* Per-step mismatch accumulator: token sums, per-sequence sums and |rho|
 * values, iterating the metric tables of mm_metrics.h; the exact
 * percentiles. */
#include "mm_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

static inline uint64_t dkey(double v);
static void percentiles_hist(double *data, size_t n, const uint32_t *hist, const double *fractions, size_t k,
                             double *out);

void fp4s_mm_opts_defaults(fp4s_mm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->is_cap = 2.0;
    o->clamp = 20.0;
}

/* ---- the metric table ---------------------------------------------------------- */
typedef struct metric_def {
    const char *name, *label;
} metric_def;

#define DEF(key, label, kind, arg) {#key, label},
static const metric_def metrics[] = {MM_METRICS(DEF)};
#undef DEF

/* The percentile rows: their levels and ids, in id order. */
#define LVL(key, label, kind, arg) LVL_##kind(arg)
#define LVL_VAL(a)
#define LVL_PCT(a) a,
static const double pct_levels[] = {MM_METRICS(LVL)};
#define PID(key, label, kind, arg) PID_##kind(M_##key)
#define PID_VAL(id)
#define PID_PCT(id) id,
static const int pct_ids[] = {MM_METRICS(PID)};
#define NPCT (sizeof pct_levels / sizeof pct_levels[0])

_Static_assert(MM_NM <= FP4S_MM_METRIC_SLOTS, "more metrics than fp4s_mm_metrics has slots");
_Static_assert(NPCT >= FP4S_MM_NPCT && NPCT <= 64, "percentile rows");
/* the named view of <fp4scope/mismatch.h> over the first ids (tests/mismatch
 * checks every field against its id) */
_Static_assert(offsetof(fp4s_mm_metrics, mean_abs) == offsetof(fp4s_mm_metrics, v) + M_mean_abs * sizeof(double),
               "named view");
_Static_assert(offsetof(fp4s_mm_metrics, is_frac_low) ==
                   offsetof(fp4s_mm_metrics, v) + M_is_frac_low * sizeof(double), "named view");
_Static_assert(offsetof(fp4s_mm_metrics, abs_pct) == offsetof(fp4s_mm_metrics, v) + M_abs_p99_9 * sizeof(double),
               "named view");

const double *fp4s_mm_percentile_levels(void) { return pct_levels; }

size_t fp4s_mm_metric_count(void) { return MM_NM; }
const char *fp4s_mm_metric_name(size_t i) { return i < MM_NM ? metrics[i].name : NULL; }
const char *fp4s_mm_metric_label(size_t i) { return i < MM_NM ? metrics[i].label : NULL; }

int fp4s_mm_metric_index(const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < MM_NM; i++)
        if (strcmp(metrics[i].name, name) == 0) return (int)i;
    return -1;
}

double fp4s_mm_metric_value(const fp4s_mm_metrics *m, size_t i)
{
    if (!m || i >= m->nmetrics || i >= FP4S_MM_METRIC_SLOTS) return NAN;
    return m->v[i];
}

/* How each token sum and sequence term starts and combines. */
typedef enum { OP_SUM, OP_MAX, OP_MIN } mm_op;
#define OPS(id, op, term) [id] = OP_##op,
static const uint8_t token_op[MM_NT] = {MM_TOKEN_SUMS(OPS)};
static const uint8_t seq_op[MM_NR] = {MM_SEQ_TERMS(OPS)};
#undef OPS

static double op_init(mm_op op) { return op == OP_SUM ? 0.0 : (op == OP_MAX ? -INFINITY : INFINITY); }
static double op_apply(mm_op op, double a, double b)
{
    switch (op) {
    case OP_SUM: return MM_OP_SUM(a, b);
    case OP_MAX: return MM_OP_MAX(a, b);
    case OP_MIN: break;
    }
    return MM_OP_MIN(a, b);
}

/* ---- sequence table (open addressing, int64 keys) ----------------------------- */
static uint64_t hash64(int64_t k) { return mm_mix64((uint64_t)k); }

static int seq_grow(fp4s_mm_acc *a)
{
    size_t ncap = a->seq_cap ? a->seq_cap * 2 : 1024;
    mm_seq *nt = calloc(ncap, sizeof *nt);
    uint32_t *nu = malloc(ncap / 2 * sizeof *nu);
    if (!nt || !nu) {
        free(nt);
        free(nu);
        return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for %zu sequences", ncap / 2);
    }
    size_t k = 0;
    for (size_t i = 0; i < a->seq_cap; i++) {
        if (!a->seqs[i].used) continue;
        size_t h = hash64(a->seqs[i].id) & (ncap - 1);
        while (nt[h].used) h = (h + 1) & (ncap - 1);
        nt[h] = a->seqs[i];
        nu[k++] = (uint32_t)h;
    }
    free(a->seqs);
    free(a->used);
    a->seqs = nt;
    a->used = nu;
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
        a->used[a->seq_used++] = (uint32_t)h;
    }
    a->last_id = id;
    a->last_slot = h;
    return h;
}

/* A table this sparse is walked through its list of used slots (sorted, so
 * that the slots come in the order of a walk over the whole table: the sums
 * over sequences add in the same order either way). */
static int seq_sparse(const fp4s_mm_acc *a) { return a->seq_used * 16 < a->seq_cap; }

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The number of slots to visit in slot order, and the i-th of them. */
static size_t seq_walk_begin(fp4s_mm_acc *a)
{
    if (!seq_sparse(a)) return a->seq_cap;
    qsort(a->used, a->seq_used, sizeof *a->used, cmp_u32);
    return a->seq_used;
}
static size_t seq_walk_slot(const fp4s_mm_acc *a, size_t i) { return seq_sparse(a) ? a->used[i] : i; }

static int abs_reserve(fp4s_mm_acc *a, size_t extra)
{
    if (a->nabs + extra <= a->abs_cap) return 0;
    size_t ncap = a->abs_cap ? a->abs_cap : 512;
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
    a->o = *o;
    mm_kernels_init(&a->k);
    fp4s_mm_acc_reset(a);
    *out = a;
    return 0;
}

void fp4s_mm_acc_close(fp4s_mm_acc **a)
{
    if (!a || !*a) return;
    free((*a)->seqs);
    free((*a)->used);
    free((*a)->absv);
    free((*a)->hist);
    free(*a);
    *a = NULL;
}

void fp4s_mm_acc_reset(fp4s_mm_acc *a)
{
    memset(&a->s, 0, sizeof a->s);
    for (int k = 0; k < MM_NT; k++) a->s.t[k] = op_init((mm_op)token_op[k]);
    if (a->seqs && a->seq_used) {
        if (seq_sparse(a))
            for (size_t i = 0; i < a->seq_used; i++) memset(&a->seqs[a->used[i]], 0, sizeof *a->seqs);
        else
            memset(a->seqs, 0, a->seq_cap * sizeof *a->seqs);
    }
    a->seq_used = 0;
    a->last_slot = SIZE_MAX;
    if (a->hist_on) memset(a->hist, 0, 2 * 65536 * sizeof *a->hist);
    a->hist_on = 0;
    a->nabs = 0;
}

/* Count |rho| values into the histogram (both tables alike: only their sum is read). */
static void hist_count(uint32_t *h, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) h[dkey(v[i]) >> 48]++;
}

/* From the step's MM_HIST_MIN-th token on: the histogram of every |rho| so
 * far, then kept up to date. Without memory the percentiles count it
 * themselves (the same counts). */
static void hist_start(fp4s_mm_acc *a)
{
    if (a->hist_on || a->nabs < MM_HIST_MIN) return;
    if (!a->hist && !(a->hist = calloc(2 * 65536, sizeof *a->hist))) return;
    hist_count(a->hist, a->absv, a->nabs);
    a->hist_on = 1;
}

void mm_kernels_init(mm_kernels *k)
{
    const unsigned f = fp4s_cpu_flags();
    (void)f;
    *k = (mm_kernels){mm_tokens_c, mm_any_positive_c, mm_irregular_c};
#ifdef FP4S_HAVE_MM_SIMD
    if (!(f & FP4S_CPU_AVX2)) return;
    *k = (mm_kernels){mm_tokens_avx2, mm_any_positive_avx2, mm_irregular_avx2};
    if (!(f & FP4S_CPU_AVX512)) return;
    *k = (mm_kernels){mm_tokens_avx512, mm_any_positive_avx512, mm_irregular_avx512};
#endif
}

static inline int counted(const uint8_t *mask, size_t i) { return !mask || mask[i] != 0; }

/* One token with libm exp (the rare path: log-probs below -700 or |rho| >
 * 700): the rows of MM_TOKEN_SUMS in scalar code. */
#define GT(a, b) ((a) > (b) ? 1.0 : 0.0)
#define LT(a, b) ((a) < (b) ? 1.0 : 0.0)
static void add_slow(mm_sums *s, double lt, double lr, const mm_tok_opts *o)
{
    const double C = o->C, Cl = o->Cl, B = o->B;
    const double rho = lt - lr, ab = fabs(rho);
    const double e = exp(rho), ie = 1.0 / e;
    const double w = rho > B ? exp(B) : (rho < -B ? exp(-B) : e);
    const double wc = w < Cl ? Cl : (w > C ? C : w);
    const double pt = exp(lt), pr = exp(lr), d = fabs(pt - pr);
    s->n++;
#define SLOW(id, op, term) s->t[id] = MM_OP_##op(s->t[id], (term));
    MM_TOKEN_SUMS(SLOW)
#undef SLOW
}
#undef GT
#undef LT

/* For the unit test (not exported from the shared library). */
double fp4s_mm_vexp_internal(double x);
double fp4s_mm_vexp_internal(double x) { return mm_vexp(x); }

#define MM_BLK 1024

/* Add the per-sequence sums of the k counted tokens (indices b0 + idx(q),
 * in token order): a run of tokens of one sequence is summed first and added
 * once. */
static int add_sequences(fp4s_mm_acc *a, const double *trainer, const double *rollout, const int64_t *ps, size_t k,
                         size_t b0, const uint32_t *ci, uint8_t *first_out)
{
    for (size_t q = 0; q < k;) {
        const int64_t id = ps[q];
        size_t q1 = q;
        double qs[MM_NQ] = {0};
        do {
            size_t i = b0 + (ci ? ci[q1] : q1);
            const double lt = trainer[i], lr = rollout[i], rho = lt - lr, ab = fabs(rho);
            (void)ab;
#define SEQ(id_, term) qs[id_] += (term);
            MM_SEQ_SUMS(SEQ)
#undef SEQ
            q1++;
        } while (q1 < k && ps[q1] == id);
        size_t slot = (a->last_slot != SIZE_MAX && a->last_id == id) ? a->last_slot : seq_slot(a, id);
        if (slot == SIZE_MAX) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for the sequence table");
        mm_seq *sq = &a->seqs[slot];
        if (sq->n == 0 && first_out) first_out[b0 + (ci ? ci[q] : q)] = 1;
        sq->n += q1 - q;
        for (int j = 0; j < MM_NQ; j++) sq->q[j] += qs[j];
        q = q1;
    }
    return 0;
}

int fp4s_mm_acc_add(fp4s_mm_acc *a, size_t n, const double *trainer, const double *rollout,
                    const int64_t *seq, const uint8_t *mask, uint8_t *first_out)
{
    if (!a || (n && (!trainer || !rollout || !seq)))
        return fp4s_error_set(FP4S_EINVAL, "mismatch: add: NULL argument");
    if (!a->o.allow_positive && a->k.any_positive(trainer, rollout, mask, n)) {
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
    const mm_tok_opts to = {a->o.is_cap, 1.0 / a->o.is_cap, a->o.clamp, exp(a->o.clamp), exp(-a->o.clamp)};
    double ct[MM_BLK], cr[MM_BLK];
    int64_t cs[MM_BLK];
    uint32_t ci[MM_BLK];
    mm_sums s = a->s;
    for (size_t b0 = 0; b0 < n; b0 += MM_BLK) {
        size_t bn = n - b0 < MM_BLK ? n - b0 : MM_BLK;
        size_t k = 0, kslow = 0;
        const double *pt = ct, *pr = cr;
        const int64_t *ps = cs;
        int direct = !a->k.irregular(trainer + b0, rollout + b0, mask ? mask + b0 : NULL, bn);
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
            double bs[MM_NT];
            a->k.tokens(pt, pr, k, &to, absv, bs);
            s.n += k;
            for (int t = 0; t < MM_NT; t++) s.t[t] = op_apply((mm_op)token_op[t], s.t[t], bs[t]);
        } else {
            for (size_t q = 0; q < k; q++) {
                size_t i = b0 + ci[q];
                add_slow(&s, trainer[i], rollout[i], &to);
                absv[q] = fabs(trainer[i] - rollout[i]);
            }
        }
        /* |rho| histogram for the percentiles: two tables (even / odd tokens)
         * so that repeated bins do not serialize on one counter */
        if (a->hist_on) {
            uint32_t *h0 = a->hist, *h1 = a->hist + 65536;
            size_t q = 0;
            for (; q + 1 < k; q += 2) {
                h0[dkey(absv[q]) >> 48]++;
                h1[dkey(absv[q + 1]) >> 48]++;
            }
            if (q < k) h0[dkey(absv[q]) >> 48]++;
        }
        a->nabs += k;
        hist_start(a);
        rc = add_sequences(a, trainer, rollout, ps, k, b0, direct ? NULL : ci, first_out);
        if (rc) {
            a->s = s;
            return rc;
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
        if (dst->hist_on && src->hist_on)
            for (size_t q = 0; q < 2 * 65536; q++) dst->hist[q] += src->hist[q];
        else if (dst->hist_on)
            hist_count(dst->hist, src->absv, src->nabs);
    }
    dst->nabs += src->nabs;
    hist_start(dst);
    fp4s_mm_acc *sw = (fp4s_mm_acc *)src; /* the walk sorts src's list of used slots, nothing else */
    for (size_t w = 0, nw = seq_walk_begin(sw); w < nw; w++) {
        const mm_seq *q = &src->seqs[seq_walk_slot(src, w)];
        if (!q->used) continue;
        size_t slot = seq_slot(dst, q->id);
        if (slot == SIZE_MAX) return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for the sequence table");
        mm_seq *d = &dst->seqs[slot];
        d->n += q->n;
        for (int j = 0; j < MM_NQ; j++) d->q[j] += q->q[j];
    }
    mm_sums *a = &dst->s;
    const mm_sums *b = &src->s;
    a->n += b->n;
    a->masked += b->masked;
    a->nonfinite += b->nonfinite;
    for (int t = 0; t < MM_NT; t++) a->t[t] = op_apply((mm_op)token_op[t], a->t[t], b->t[t]);
    return 0;
}

/* ---- finishing: the helpers of MM_METRICS ------------------------------------------ */
/* Sample standard deviation (n - 1) from the sum and the sum of squares. */
static double sample_std(double s, double s2, double n)
{
    if (n <= 1) return NAN;
    double var = (s2 - s * s / n) / (n - 1.0);
    return sqrt(var > 0 ? var : 0);
}

static double pearson(const double *T, double n)
{
    if (n <= 1) return NAN;
    double cxy = T[T_PTPR] - T[T_PT] * T[T_PR] / n;
    double cxx = T[T_PT2] - T[T_PT] * T[T_PT] / n;
    double cyy = T[T_PR2] - T[T_PR] * T[T_PR] / n;
    return (cxx > 0 && cyy > 0) ? cxy / sqrt(cxx * cyy) : NAN;
}

/* verl compute_is_metrics: std and ESS of the IS weights clamped to [1/C, C] */
static double is_std(const double *T, double n)
{
    if (n <= 1) return 0.0;
    const double mc = T[T_WC] / n, m2c = T[T_WC2] / n, var = m2c - mc * mc;
    return sqrt(var > 0 ? var : 0);
}

static double is_ess(const double *T, double n)
{
    const double mc = T[T_WC] / n, m2c = T[T_WC2] / n;
    return 1.0 / (m2c / ((mc + 1e-8) * (mc + 1e-8)));
}

int fp4s_mm_acc_finish(fp4s_mm_acc *a, fp4s_mm_metrics *out)
{
    if (!a || !out) return fp4s_error_set(FP4S_EINVAL, "mismatch: finish: NULL argument");
    int64_t step = out->step;
    memset(out, 0, sizeof *out);
    out->step = step;
    out->nmetrics = MM_NM;
    const mm_sums *s = &a->s;
    out->masked = s->masked;
    out->nonfinite = s->nonfinite;
    out->tokens = s->n;
    double *v = out->v;
    if (s->n == 0) {
        for (size_t i = 0; i < MM_NM; i++) v[i] = NAN;
        return fp4s_error_set(FP4S_EEMPTY, "no counted token (all masked or non-finite)");
    }
    const double n = (double)s->n, B = a->o.clamp;
    const double *T = s->t;

    /* sequences */
    double ns = 0, R[MM_NR];
    for (int k = 0; k < MM_NR; k++) R[k] = op_init((mm_op)seq_op[k]);
    for (size_t w = 0, nw = seq_walk_begin(a); w < nw; w++) {
        const mm_seq *sq = &a->seqs[seq_walk_slot(a, w)];
        if (!sq->used || sq->n == 0) continue;
        const double *q = sq->q, qn = (double)sq->n;
        const double rc = q[Q_RHO] > B ? B : (q[Q_RHO] < -B ? -B : q[Q_RHO]);
        const double mt = q[Q_LT] / qn, mr = q[Q_LR] / qn, dd = mr - mt;
        (void)rc, (void)mt, (void)mr, (void)dd;
        ns += 1;
#define SEQT(id, op, term) R[id] = MM_OP_##op(R[id], (term));
        MM_SEQ_TERMS(SEQT)
#undef SEQT
    }
    out->sequences = (uint64_t)ns;

#define FIN(key, label, kind, arg) FIN_##kind(M_##key, arg)
#define FIN_VAL(id, e) v[id] = (e);
#define FIN_PCT(id, level)
    MM_METRICS(FIN)
#undef FIN
#undef FIN_VAL
#undef FIN_PCT

    double fr[NPCT], pv[NPCT];
    for (size_t k = 0; k < NPCT; k++) fr[k] = pct_levels[k] / 100.0;
    percentiles_hist(a->absv, a->nabs, a->hist_on && a->nabs <= 0xffffffffu ? a->hist : NULL, fr, NPCT, pv);
    for (size_t k = 0; k < NPCT; k++) v[pct_ids[k]] = pv[k];
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
    int rc = -1;
    uint32_t *hist = calloc(65536, sizeof *hist);
    uint8_t *want = calloc(65536, 1);
    size_t *below = malloc(65537 * sizeof *below), *coff = malloc(65537 * sizeof *coff);
    size_t *bin = malloc(nr * sizeof *bin), *rb = malloc(nr * sizeof *rb);
    double *cand = NULL;
    if (!hist || !want || !below || !coff || !bin || !rb) goto out;
    if (hin)
        for (size_t q = 0; q < 65536; q++) hist[q] = hin[q] + hin[65536 + q];
    else
        for (size_t i = 0; i < n; i++) hist[dkey(data[i]) >> 48]++;
    below[0] = 0;
    for (size_t b = 0; b < 65536; b++) below[b + 1] = below[b] + hist[b];
    /* bin of each rank: below[bin] <= r < below[bin + 1] */
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
    cand = malloc((ncand ? ncand : 1) * sizeof *cand);
    if (!cand) goto out;
    size_t acc = 0;
    for (size_t q = 0; q < 65536; q++) {
        coff[q] = acc;
        if (want[q]) acc += hist[q];
    }
    coff[65536] = acc;
    /* bucket the candidates by bin so that cand is ordered across bins */
    size_t *fill = below; /* reused: below[] is not needed once rb is known */
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
    rc = 0;
out:
    free(hist);
    free(want);
    free(below);
    free(coff);
    free(bin);
    free(rb);
    free(cand);
    return rc;
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

/* llama.cpp's rule for fraction f of n > 0 sorted values: p = f (n - 1), the
 * rank floor(p) and the interpolation weight p - floor(p). */
static size_t pct_rank(double f, size_t n, double *frac)
{
    if (f <= 0) f = 0;
    if (f >= 1) f = 1;
    double p = f * (double)(n - 1);
    size_t ip = (size_t)p;
    if (ip > n - 1) ip = n - 1;
    *frac = p - (double)ip;
    return ip;
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
        double fr;
        size_t ip = pct_rank(fractions[j], n, &fr);
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
        double fr;
        size_t ip = pct_rank(fractions[j], n, &fr);
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
