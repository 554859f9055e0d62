/* Unit tests of the decomposition (analysis/decompose): exactness of the
 * accumulator, components summing to the error, merge == one pass, the lemma's
 * exact zeros under CEIL, an independent naive implementation on random and
 * adversarial tensors, the Gaussian anchors, the GSL dead-zone integral, the
 * channel ranking and bad input. "--big" runs only the 10^7 anchor. */
#include "../check_main.h"
#include "../splitmix.h"

#include <fp4scope/channels.h>
#include <fp4scope/cuda.h>
#include <fp4scope/decompose.h>
#include <fp4scope/quant.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include "decomp_internal.h"
#include "cuda/decomp_cu.h"
#include "io/internal.h"
#include "fp4s_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if FP4S_HAVE_GSL
#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_erf.h>
#endif

/* ---- helpers ---------------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void) { return splitmix_next(&rng_state); }
static double rng_u(void) { return splitmix_unit(&rng_state); }
static double rng_gauss(void)
{
    double u = rng_u(), v = rng_u();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static float *gauss(size_t n, uint64_t seed)
{
    rng_state = seed;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_gauss();
    return x;
}

static fp4s_spec mk_spec(fp4s_format f, const char *profile)
{
    fp4s_spec s;
    int rc = fp4s_spec_profile(&s, f, profile);
    ck_assert_msg(rc == 0, "profile %s: %s", profile, fp4s_last_error());
    return s;
}

static fp4s_spec mx_rule(fp4s_mx_rule r)
{
    fp4s_spec s = mk_spec(FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4));
    s.mx_rule = r;
    return s;
}

static fp4s_tscale tscale_of(const fp4s_spec *s, const float *x, size_t rows, size_t cols)
{
    fp4s_tscale ts;
    float a = fp4s_spec_amax(s, x, rows, cols, cols, NULL); /* after the RHT, if any */
    ck_assert_int_eq(fp4s_tscale_init(s, a, &ts), 0);
    return ts;
}

/* decompose x [rows, cols] in chunks of `chunk` rows (0 = one pass) */
static fp4s_decomp *run(const fp4s_spec *s, const float *x, size_t rows, size_t cols, fp4s_group by,
                        size_t chunk, fp4s_dz_tie dzt)
{
    fp4s_tscale ts = tscale_of(s, x, rows, cols);
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    o.dz_tie = dzt;
    fp4s_decomp *d = NULL;
    int rc = fp4s_decomp_open(s, &ts, &o, rows, cols, &d);
    ck_assert_msg(rc == 0, "open: %s", fp4s_last_error());
    if (chunk == 0) chunk = rows;
    for (size_t r0 = 0; r0 < rows; r0 += chunk) {
        size_t n = rows - r0 < chunk ? rows - r0 : chunk;
        rc = fp4s_decomp_add(d, x + r0 * cols, n, cols, r0);
        ck_assert_msg(rc == 0, "add: %s", fp4s_last_error());
    }
    return d;
}

static fp4s_decomp_result summary(const fp4s_decomp *d)
{
    fp4s_decomp_result r;
    ck_assert_int_eq(fp4s_decomp_summary(d, &r), 0);
    return r;
}

/* ---- an independent naive decomposition (long double, grid search) ---------------- */
typedef struct naive {
    long double e2, es2, edz2, eg2, csg, csd, x2;
    uint64_t n, dz, ties, nfblocks;
} naive;

static const long double grid[8] = {0, 0.5L, 1, 1.5L, 2, 3, 4, 6};

/* nearest grid magnitude for t >= 0 by scanning; ties by rule on the code */
static long double grid_nearest(long double t, fp4s_tie tie, bool tie_in_dz_forced, bool dz_in)
{
    int best = 0;
    long double bd = fabsl(t - grid[0]);
    for (int c = 1; c < 8; c++) {
        long double dd = fabsl(t - grid[c]);
        if (dd < bd) {
            bd = dd;
            best = c;
        } else if (dd == bd) {
            /* tie between best (< c) and c */
            bool take_hi;
            if (best == 0 && tie_in_dz_forced) take_hi = !dz_in;
            else if (tie == FP4S_TIE_EVEN) take_hi = (c % 2) == 0;
            else take_hi = tie == FP4S_TIE_AWAY;
            if (take_hi) best = c;
        }
    }
    if (t > 6) best = 7;
    return grid[best];
}

static naive naive_decomp(const fp4s_spec *s, const float *x, size_t rows, size_t cols, fp4s_dz_tie dzt)
{
    naive nv;
    memset(&nv, 0, sizeof nv);
    fp4s_tscale ts = tscale_of(s, x, rows, cols);
    float *q = malloc(rows * cols * sizeof *q);
    uint8_t *codes = malloc(rows * cols);
    fp4s_qout out;
    memset(&out, 0, sizeof out);
    out.dequant = q;
    out.ld_dequant = cols;
    out.codes = codes;
    out.ld_codes = cols;
    ck_assert_int_eq(fp4s_quantize(s, &ts, x, rows, cols, cols, 0, &out, NULL), 0);
    size_t bs = s->block;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / bs; b++) {
            const float *xb = x + r * cols + b * bs;
            const float *qb = q + r * cols + b * bs;
            long double m = 0;
            bool nf = false;
            for (size_t i = 0; i < bs; i++) {
                if (!isfinite(xb[i]) || !isfinite(qb[i])) nf = true;
                else if (fabsl((long double)xb[i]) > m) m = fabsl((long double)xb[i]);
            }
            if (nf) {
                nv.nfblocks++;
                continue;
            }
            for (size_t i = 0; i < bs; i++) {
                long double xv = xb[i], qv = qb[i], a = fabsl(xv);
                long double g = 0;
                if (m > 0) {
                    bool tie = 24.0L * a == m;
                    long double t = 6.0L * a / m;
                    g = grid_nearest(t, s->tie, dzt != FP4S_DZ_TIE_SPEC, dzt == FP4S_DZ_TIE_IN);
                    nv.ties += tie;
                }
                long double qs = copysignl(g * m / 6.0L, xv);
                long double e = qv - xv, es = qv - qs, est = qs - xv;
                bool dz = g == 0;
                nv.n++;
                nv.dz += dz;
                nv.x2 += xv * xv;
                nv.e2 += e * e;
                nv.es2 += es * es;
                if (dz) {
                    nv.edz2 += est * est;
                    nv.csd += 2 * es * est;
                } else {
                    nv.eg2 += est * est;
                    nv.csg += 2 * es * est;
                }
            }
        }
    free(q);
    free(codes);
    return nv;
}

static void close_rel(const char *what, double got, long double want, double tol)
{
    double w = (double)want;
    double scale = fabs(w) > 1e-300 ? fabs(w) : 1.0;
    ck_assert_msg(fabs(got - w) <= tol * scale || (got == 0 && w == 0), "%s: got %.17g, naive %.17g", what, got, w);
}

static void compare_naive(const fp4s_spec *s, const float *x, size_t rows, size_t cols, fp4s_dz_tie dzt,
                          const char *label)
{
    fp4s_decomp *d = run(s, x, rows, cols, FP4S_GROUP_TENSOR, 0, dzt);
    fp4s_decomp_result r = summary(d);
    /* a spec with the RHT decomposes the rotated rows: the naive sum does the same by hand */
    float *xr = NULL;
    fp4s_spec s0 = *s;
    if (s->rht) {
        xr = malloc(rows * cols * sizeof *xr);
        ck_assert_int_eq(fp4s_rht_apply(s, x, rows, cols, cols, xr, cols), 0);
        s0.rht = false;
        s0.rht_signs = 0;
    }
    naive nv = naive_decomp(&s0, xr ? xr : x, rows, cols, dzt);
    free(xr);
    char w[128];
    ck_assert_msg(r.n == nv.n, "%s: n %llu vs naive %llu", label, (unsigned long long)r.n, (unsigned long long)nv.n);
    ck_assert_msg(r.deadzone == nv.dz, "%s: deadzone %llu vs naive %llu", label, (unsigned long long)r.deadzone,
                  (unsigned long long)nv.dz);
    ck_assert_msg(r.deadzone_ties == nv.ties, "%s: ties %llu vs %llu", label, (unsigned long long)r.deadzone_ties,
                  (unsigned long long)nv.ties);
    ck_assert_msg(r.nonfinite_blocks + r.nonfinite_output == nv.nfblocks, "%s: non-finite blocks", label);
    snprintf(w, sizeof w, "%s energy_x", label);
    close_rel(w, r.energy_x, nv.x2, 1e-12);
    snprintf(w, sizeof w, "%s energy_total", label);
    close_rel(w, r.energy_total, nv.e2, 1e-9);
    snprintf(w, sizeof w, "%s energy_scale", label);
    close_rel(w, r.energy_scale, nv.es2, 1e-9);
    snprintf(w, sizeof w, "%s energy_deadzone", label);
    close_rel(w, r.energy_deadzone, nv.edz2, 1e-9);
    snprintf(w, sizeof w, "%s energy_grid", label);
    close_rel(w, r.energy_grid, nv.eg2, 1e-9);
    /* cross terms can cancel: compare against the scale of the energies */
    double sc = r.energy_scale + r.energy_grid + r.energy_deadzone;
    ck_assert_msg(fabs(r.cross_scale_grid - (double)nv.csg) <= 1e-9 * (sc > 0 ? sc : 1), "%s cross_scale_grid %.17g vs %.17Lg",
                  label, r.cross_scale_grid, nv.csg);
    ck_assert_msg(fabs(r.cross_scale_deadzone - (double)nv.csd) <= 1e-9 * (sc > 0 ? sc : 1),
                  "%s cross_scale_deadzone %.17g vs %.17Lg", label, r.cross_scale_deadzone, nv.csd);
    fp4s_decomp_close(&d);
}

/* every spec the decomposition must handle */
static int all_specs(fp4s_spec *out, int max)
{
    int n = 0;
    static const fp4s_mx_rule rules[] = {FP4S_MX_FLOOR, FP4S_MX_CEIL, FP4S_MX_EVEN, FP4S_MX_LOG2F, FP4S_MX_RTN};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0] && n < max; i++) out[n++] = mx_rule(rules[i]);
    const fp4s_profile_info *p;
    for (size_t pi = 0; (p = fp4s_profile_at(pi)) && n < max; pi++) {
        for (int f = FP4S_MXFP4; f <= FP4S_NVFP4 && n < max; f++) {
            if (!(p->formats & (1u << f))) continue;
            fp4s_spec s;
            /* row-scaled NVFP4 is refused by the decomposer (fp4-decompose(1)
             * says so): its profiles' per-tensor recipes are in the list */
            if (fp4s_spec_profile(&s, (fp4s_format)f, p->name) == 0 && s.nv_scope != FP4S_SCOPE_ROW) out[n++] = s;
        }
    }
    return n;
}

static const char *spec_label(const fp4s_spec *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s/%s", fp4s_format_name(s->format), s->profile,
             s->format == FP4S_MXFP4 ? fp4s_mx_rule_name(s->mx_rule) : fp4s_nv_recipe_name(s->nv_recipe));
    return buf;
}

/* ---- tests ------------------------------------------------------------------- */
START_TEST(xsum_order_independent_exact)
{
    xsum a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    /* catastrophic cancellation: exact arithmetic keeps the 1 */
    xs_add(&a, 1e80);
    xs_add(&a, 1.0);
    xs_add(&a, -1e80);
    ck_assert(xs_value(&a) == 1.0);
    memset(&a, 0, sizeof a);
    double v[1000];
    rng_state = 7;
    for (int i = 0; i < 1000; i++) v[i] = ldexp(rng_u() - 0.5, (int)(rng_next() % 400) - 200);
    for (int i = 0; i < 1000; i++) xs_add(&a, v[i]);
    for (int i = 999; i >= 0; i--) xs_add(&b, v[i]);
    xs_norm(&a);
    xs_norm(&b);
    ck_assert(memcmp(a.l, b.l, sizeof a.l) == 0);
    /* merge of halves equals the whole */
    xsum c, d2;
    memset(&c, 0, sizeof c);
    memset(&d2, 0, sizeof d2);
    for (int i = 0; i < 500; i++) xs_add(&c, v[i]);
    for (int i = 500; i < 1000; i++) xs_add(&d2, v[i]);
    xs_merge(&d2, &c);
    ck_assert(memcmp(a.l, d2.l, sizeof a.l) == 0);
    ck_assert(xs_value(&a) == xs_value(&d2));
    /* tiny terms (squares of float subnormals) are kept */
    memset(&a, 0, sizeof a);
    xs_add(&a, 0x1p-298);
    ck_assert(xs_value(&a) == 0x1p-298);
    memset(&a, 0, sizeof a);
    xs_add(&a, INFINITY);
    ck_assert(isinf(xs_value(&a)));
}
END_TEST

START_TEST(e2m1_round_double_ties)
{
    struct { double t, rne, rtz, rha; } c[] = {
        {0.25, 0, 0, 0.5}, {0.75, 1, 0.5, 1}, {1.25, 1, 1, 1.5}, {1.75, 2, 1.5, 2}, {2.5, 2, 2, 3},
        {3.5, 4, 3, 4}, {5, 4, 4, 6}, {0.2499, 0, 0, 0}, {5.01, 6, 6, 6}, {6, 6, 6, 6}, {7.9, 6, 6, 6},
        {0, 0, 0, 0}, {2.9, 3, 3, 3}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(fp4s_decomp_e2m1_round(c[i].t, FP4S_TIE_EVEN, FP4S_DZ_TIE_SPEC) == c[i].rne, "rne %g", c[i].t);
        ck_assert_msg(fp4s_decomp_e2m1_round(c[i].t, FP4S_TIE_ZERO, FP4S_DZ_TIE_SPEC) == c[i].rtz, "rtz %g", c[i].t);
        ck_assert_msg(fp4s_decomp_e2m1_round(c[i].t, FP4S_TIE_AWAY, FP4S_DZ_TIE_SPEC) == c[i].rha, "rha %g", c[i].t);
    }
    ck_assert(fp4s_decomp_e2m1_round(0.25, FP4S_TIE_AWAY, FP4S_DZ_TIE_IN) == 0.0);
    ck_assert(fp4s_decomp_e2m1_round(0.25, FP4S_TIE_EVEN, FP4S_DZ_TIE_OUT) == 0.5);
    ck_assert(fp4s_decomp_e2m1_round(0.75, FP4S_TIE_EVEN, FP4S_DZ_TIE_OUT) == 1.0);
}
END_TEST

START_TEST(components_sum_to_error_every_spec)
{
    size_t rows = 64, cols = 256;
    float *x = gauss(rows * cols, 11);
    for (size_t i = 0; i < rows * cols; i += 97) x[i] *= 40.0f; /* outliers: clipping under FLOOR */
    fp4s_spec specs[64];
    int ns = all_specs(specs, 64);
    ck_assert_int_ge(ns, 5);
    for (int k = 0; k < ns; k++) {
        char lab[96];
        fp4s_decomp *d = run(&specs[k], x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
        fp4s_decomp_result r = summary(d);
        spec_label(&specs[k], lab, sizeof lab);
        ck_assert_msg(r.n == rows * cols, "%s: n", lab);
        /* worst element residual of e = e_scale + e_dz + e_grid, relative to the data */
        ck_assert_msg(r.max_residual <= 1e-14 * r.amax, "%s: worst residual %g (amax %g)", lab, r.max_residual, r.amax);
        ck_assert_msg(r.identity_residual <= 1e-12, "%s: identity residual %g", lab, r.identity_residual);
        double split = r.energy_scale_round + r.energy_scale_clip + r.energy_scale_underflow;
        ck_assert_msg(fabs(split - r.energy_scale) <= 1e-12 * r.energy_scale, "%s: split %g vs %g", lab, split,
                      r.energy_scale);
        ck_assert_msg(r.cross_deadzone_grid == 0.0, "%s: e_dz and e_grid overlap", lab);
        fp4s_decomp_close(&d);
    }
    free(x);
}
END_TEST

static void assert_same_result(const fp4s_decomp_result *a, const fp4s_decomp_result *b, const char *what)
{
    size_t nf;
    const fp4s_decomp_field *f = fp4s_decomp_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        double va = fp4s_decomp_field_value(a, &f[i]), vb = fp4s_decomp_field_value(b, &f[i]);
        ck_assert_msg(memcmp(&va, &vb, sizeof va) == 0 || (isnan(va) && isnan(vb)), "%s: field %s %.17g vs %.17g",
                      what, f[i].name, va, vb);
    }
}

START_TEST(merge_equals_one_pass_bitwise)
{
    size_t rows = 96, cols = 128;
    float *x = gauss(rows * cols, 5);
    fp4s_spec specs[2] = {mx_rule(FP4S_MX_FLOOR), mk_spec(FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4))};
    fp4s_group groups[] = {FP4S_GROUP_TENSOR, FP4S_GROUP_ROW, FP4S_GROUP_CHANNEL, FP4S_GROUP_BLOCK};
    for (int si = 0; si < 2; si++)
        for (size_t gi = 0; gi < 4; gi++) {
            fp4s_set_threads(1);
            fp4s_decomp *one = run(&specs[si], x, rows, cols, groups[gi], 0, FP4S_DZ_TIE_SPEC);
            fp4s_set_threads(2);
            fp4s_decomp *chunked = run(&specs[si], x, rows, cols, groups[gi], 16, FP4S_DZ_TIE_SPEC);
            /* two halves accumulated separately, merged in reverse order */
            fp4s_tscale ts = tscale_of(&specs[si], x, rows, cols);
            fp4s_decomp_opts o;
            fp4s_decomp_opts_defaults(&o);
            o.by = groups[gi];
            fp4s_decomp *h1, *h2;
            ck_assert_int_eq(fp4s_decomp_open(&specs[si], &ts, &o, rows, cols, &h1), 0);
            ck_assert_int_eq(fp4s_decomp_open(&specs[si], &ts, &o, rows, cols, &h2), 0);
            ck_assert_int_eq(fp4s_decomp_add(h1, x, 48, cols, 0), 0);
            ck_assert_int_eq(fp4s_decomp_add(h2, x + 48 * cols, 32, cols, 48), 0);
            ck_assert_int_eq(fp4s_decomp_add(h2, x + 80 * cols, 16, cols, 80), 0);
            ck_assert_int_eq(fp4s_decomp_merge(h2, h1), 0);
            fp4s_decomp_result a = summary(one), b = summary(chunked), c = summary(h2);
            assert_same_result(&a, &b, "one pass vs chunked/2 threads");
            assert_same_result(&a, &c, "one pass vs merged halves");
            size_t ng = fp4s_decomp_ngroups(one);
            ck_assert_uint_eq(ng, fp4s_decomp_ngroups(h2));
            for (size_t g = 0; g < ng; g++) {
                fp4s_decomp_group(one, g, &a);
                fp4s_decomp_group(chunked, g, &b);
                fp4s_decomp_group(h2, g, &c);
                assert_same_result(&a, &b, "group one vs chunked");
                assert_same_result(&a, &c, "group one vs merged");
            }
            fp4s_decomp_hist ha, hb;
            fp4s_decomp_hist_get(one, FP4S_HIST_DELTA, &ha);
            fp4s_decomp_hist_get(h2, FP4S_HIST_DELTA, &hb);
            ck_assert(memcmp(ha.counts, hb.counts, sizeof ha.counts) == 0);
            /* merging a row twice is refused */
            if (groups[gi] == FP4S_GROUP_ROW || groups[gi] == FP4S_GROUP_BLOCK)
                ck_assert_int_eq(fp4s_decomp_merge(h2, h1), FP4S_EDUP);
            fp4s_decomp_close(&one);
            fp4s_decomp_close(&chunked);
            fp4s_decomp_close(&h1);
            fp4s_decomp_close(&h2);
        }
    fp4s_set_threads(0);
    free(x);
}
END_TEST

/* A channel roll-up (rows 0, by = CHANNEL) takes the channel accumulators of
 * tensors of other row counts, each with its own tensor scale (the calls of one
 * linear layer): MXFP4 (no tensor scale) gives exactly the accumulator of the
 * stacked rows; NVFP4 the same summary as the tensor roll-up of the calls. */
START_TEST(channel_rollup_merges_calls_of_any_rows)
{
    size_t cols = 64, r1 = 30, r2 = 50;
    float *x = gauss((r1 + r2) * cols, 17);
    fp4s_spec specs[2] = {mx_rule(FP4S_MX_FLOOR), mk_spec(FP4S_NVFP4, "te")};
    for (int si = 0; si < 2; si++) {
        fp4s_decomp *a = run(&specs[si], x, r1, cols, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
        fp4s_decomp *b = run(&specs[si], x + r1 * cols, r2, cols, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
        fp4s_decomp_opts o;
        fp4s_decomp_opts_defaults(&o);
        o.by = FP4S_GROUP_CHANNEL;
        fp4s_decomp *roll = NULL, *troll = NULL;
        int rc = fp4s_decomp_open(&specs[si], NULL, &o, 0, cols, &roll);
        ck_assert_msg(rc == 0, "channel roll-up refused: %s", fp4s_last_error());
        ck_assert_int_eq(fp4s_decomp_rows(roll), 0);
        ck_assert_int_eq(fp4s_decomp_ngroups(roll), cols);
        ck_assert_int_eq(fp4s_decomp_merge(roll, a), 0);
        ck_assert_int_eq(fp4s_decomp_merge(roll, b), 0);
        ck_assert_uint_eq(fp4s_decomp_rows(roll), r1 + r2);
        /* it takes merges only, of its own columns; plain accumulators keep their shape */
        ck_assert_int_eq(fp4s_decomp_add(roll, x, 1, cols, 0), FP4S_EINVAL);
        ck_assert_int_eq(fp4s_decomp_merge(a, b), FP4S_ESHAPE);
        fp4s_decomp *narrow = run(&specs[si], x, 4, 32, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
        ck_assert_int_eq(fp4s_decomp_merge(roll, narrow), FP4S_ESHAPE);
        fp4s_decomp_opts t;
        fp4s_decomp_opts_defaults(&t);
        ck_assert_int_eq(fp4s_decomp_open(&specs[si], NULL, &t, 0, 0, &troll), 0);
        ck_assert_int_eq(fp4s_decomp_merge(troll, a), 0);
        ck_assert_int_eq(fp4s_decomp_merge(troll, b), 0);
        fp4s_decomp_result ra = summary(roll), rt = summary(troll);
        assert_same_result(&ra, &rt, "channel roll-up vs tensor roll-up");
        if (si == 0) {
            fp4s_decomp *whole = run(&specs[si], x, r1 + r2, cols, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
            fp4s_decomp_result w = summary(whole);
            assert_same_result(&w, &ra, "stacked rows vs channel roll-up");
            for (size_t g = 0; g < cols; g++) {
                fp4s_decomp_group(whole, g, &w);
                fp4s_decomp_group(roll, g, &ra);
                assert_same_result(&w, &ra, "channel group: stacked rows vs roll-up");
            }
            fp4s_decomp_close(&whole);
        }
        fp4s_decomp_close(&narrow);
        fp4s_decomp_close(&a);
        fp4s_decomp_close(&b);
        fp4s_decomp_close(&roll);
        fp4s_decomp_close(&troll);
    }
    free(x);
}
END_TEST

START_TEST(lemma_ceil_cross_terms_exactly_zero)
{
    size_t rows = 128, cols = 256;
    float *x = gauss(rows * cols, 3);
    fp4s_spec ceil_s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *d = run(&ceil_s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
    fp4s_decomp_result r = summary(d);
    ck_assert(r.cross_scale_deadzone == 0.0);
    ck_assert(r.cross_deadzone_grid == 0.0);
    ck_assert(r.gamma_min >= 1.0 && r.gamma_max < 2.0);
    ck_assert(r.delta_min >= 0.0 && r.delta_max < 1.0);
    ck_assert_uint_eq(r.clipped, 0);
    ck_assert(r.energy_scale_clip == 0.0);
    fp4s_decomp_close(&d);
    /* FLOOR: gamma < 1 happens, values clip and the e_dz cross term is measured non-zero */
    fp4s_spec floor_s = mx_rule(FP4S_MX_FLOOR);
    d = run(&floor_s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
    r = summary(d);
    ck_assert(r.gamma_min < 1.0);
    ck_assert_uint_gt(r.clipped, 0);
    ck_assert(r.energy_scale_clip > 0.0);
    ck_assert(r.cross_scale_deadzone != 0.0);
    fp4s_decomp_close(&d);
    free(x);
}
END_TEST

START_TEST(naive_agrees_random_every_spec)
{
    size_t rows = 32, cols = 128;
    float *x = gauss(rows * cols, 21);
    for (size_t i = 0; i < rows * cols; i += 53) x[i] *= 30.0f;
    fp4s_spec specs[64];
    int ns = all_specs(specs, 64);
    for (int k = 0; k < ns; k++) {
        char lab[96];
        compare_naive(&specs[k], x, rows, cols, FP4S_DZ_TIE_SPEC, spec_label(&specs[k], lab, sizeof lab));
    }
    free(x);
}
END_TEST

/* Element i of an adversarial block of the kinds both generators below make:
 * 0 ties at every E2M1 midpoint relative to the block max m, 1 all zero,
 * 2 huge, 3 subnormal. */
static float adversarial_common(size_t kind, float m, size_t i)
{
    static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.2f, 6.0f, 0.0f};
    switch (kind) {
    case 0: return i == 0 ? m : m / 6.0f * mids[i % 10] * ((i & 1) ? -1.0f : 1.0f);
    case 1: return 0.0f;
    case 2: return (float)rng_gauss() * 1e37f;
    default: return (float)rng_gauss() * 1e-39f;
    }
}

/* ties at every E2M1 midpoint relative to the block max, zeros, huge, tiny,
 * subnormal and NaN/Inf blocks */
static float *adversarial(size_t rows, size_t cols)
{
    float *x = calloc(rows * cols, sizeof *x);
    rng_state = 99;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t b = c / 32, kind = (r + b) % 8;
            float m = ldexpf(1.0f, (int)(rng_next() % 20) - 10) * 1.5f;
            float *p = &x[r * cols + c];
            size_t i = c % 32;
            switch (kind) {
            case 0: case 1: case 2: case 3: *p = adversarial_common(kind, m, i); break; /* ties, zero, huge, subnormal */
            case 4: *p = i == 5 ? NAN : (float)rng_gauss(); break;                      /* NaN block */
            case 5: *p = i == 7 ? -INFINITY : (float)rng_gauss(); break;                /* Inf block */
            case 6: *p = (float)rng_gauss() * 3.0e-6f; break;                           /* tiny */
            default: *p = i == 0 ? 448.0f * 6.0f : (float)rng_gauss() * 0.01f; break;  /* one outlier */
            }
        }
    return x;
}

START_TEST(naive_agrees_adversarial)
{
    size_t rows = 16, cols = 256;
    float *x = adversarial(rows, cols);
    fp4s_spec specs[64];
    int ns = all_specs(specs, 64);
    for (int k = 0; k < ns; k++) {
        char lab[96];
        spec_label(&specs[k], lab, sizeof lab);
        compare_naive(&specs[k], x, rows, cols, FP4S_DZ_TIE_SPEC, lab);
        compare_naive(&specs[k], x, rows, cols, FP4S_DZ_TIE_IN, lab);
        compare_naive(&specs[k], x, rows, cols, FP4S_DZ_TIE_OUT, lab);
    }
    /* the tie convention is visible: ties at 0.25 are in D under rne, out under "out" */
    fp4s_spec s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *din = run(&s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
    fp4s_decomp *dout = run(&s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_OUT);
    fp4s_decomp_result a = summary(din), b = summary(dout);
    ck_assert_uint_gt(a.deadzone_ties, 0);
    ck_assert_uint_eq(a.deadzone - b.deadzone, a.deadzone_ties);
    ck_assert_uint_gt(a.nan, 0);
    ck_assert_uint_gt(a.inf, 0);
    ck_assert_uint_gt(a.zero_blocks, 0);
    ck_assert_uint_eq(a.n + a.excluded + a.nonfinite, rows * cols);
    ck_assert(isfinite(a.energy_total) && isfinite(a.energy_x));
    fp4s_decomp_close(&din);
    fp4s_decomp_close(&dout);
    free(x);
}
END_TEST

/* The CPU levels after "ref" that this build and CPU have (fp4s_kernels_select). */
static int simd_levels(const char **out)
{
    static const char *cand[] = {"avx2", "avx512"};
    int n = 0;
    for (int i = 0; i < 2; i++)
        if (fp4s_kernels_select(cand[i]) == 0) out[n++] = cand[i];
    fp4s_kernels_force_ref(false);
    return n;
}

/* *a and *b hold the same bits: the summary, every group and both
 * histograms; both are closed. */
static void assert_same_decomp(fp4s_decomp **a, fp4s_decomp **b, const char *lab)
{
    fp4s_decomp_result ra = summary(*a), rb = summary(*b);
    assert_same_result(&ra, &rb, lab);
    for (size_t i = 0; i < fp4s_decomp_ngroups(*a); i++) {
        fp4s_decomp_group(*a, i, &ra);
        fp4s_decomp_group(*b, i, &rb);
        assert_same_result(&ra, &rb, lab);
    }
    for (int h = 0; h < 2; h++) {
        fp4s_decomp_hist ha, hb;
        fp4s_decomp_hist_get(*a, (fp4s_decomp_hist_kind)h, &ha);
        fp4s_decomp_hist_get(*b, (fp4s_decomp_hist_kind)h, &hb);
        ck_assert_msg(memcmp(ha.counts, hb.counts, sizeof ha.counts) == 0, "%s: histogram %d", lab, h);
    }
    fp4s_decomp_close(a);
    fp4s_decomp_close(b);
}

START_TEST(kernels_agree_bitwise)
{
    /* every level's element kernels (AVX2: the portable loop compiled for it;
     * AVX-512: the vector-extension loop and the fused row path) give the
     * bits of the portable C ("ref") on random and adversarial data */
    size_t rows = 16, cols = 256;
    float *adv = adversarial(rows, cols);
    float *g = gauss(rows * cols, 44);
    fp4s_spec specs[64];
    int ns = all_specs(specs, 64);
    fp4s_group groups[] = {FP4S_GROUP_TENSOR, FP4S_GROUP_BLOCK, FP4S_GROUP_CHANNEL, FP4S_GROUP_ROW};
    const char *lv[2];
    int nl = simd_levels(lv);
    if (nl == 0) fprintf(stderr, "kernels_agree_bitwise: no SIMD level in this build or CPU\n");
    for (int l = 0; l < nl; l++)
        for (int k = 0; k < ns; k++)
            for (int di = 0; di < 2; di++)
                for (size_t gi = 0; gi < 4; gi++) {
                    const float *x = di ? adv : g;
                    ck_assert_int_eq(fp4s_kernels_select("ref"), 0);
                    fp4s_decomp *a = run(&specs[k], x, rows, cols, groups[gi], 0, FP4S_DZ_TIE_SPEC);
                    ck_assert_int_eq(fp4s_kernels_select(lv[l]), 0);
                    fp4s_decomp *b = run(&specs[k], x, rows, cols, groups[gi], 0, FP4S_DZ_TIE_SPEC);
                    char lab[160];
                    spec_label(&specs[k], lab, sizeof lab);
                    snprintf(lab + strlen(lab), sizeof lab - strlen(lab), ": ref vs %s", lv[l]);
                    assert_same_decomp(&a, &b, lab);
                }
    fp4s_kernels_force_ref(false);
    free(adv);
    free(g);
}
END_TEST

/* Finite adversarial rows (ties at every midpoint, zero blocks, huge, subnormal,
 * tiny, clipping outliers) take the fused row path on AVX-512 CPUs; rows with
 * a NaN or Inf block fall back to the per-block path. Both are compared with
 * the portable per-block kernel bit for bit, for every spec, tie convention,
 * tensor and row grouping, chunking and thread count. */
static float *adversarial_finite(size_t rows, size_t cols)
{
    float *x = calloc(rows * cols, sizeof *x);
    rng_state = 123;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t b = c / 16, kind = (r * 3 + b) % 7;
            float m = ldexpf(1.0f, (int)(rng_next() % 30) - 15) * 1.5f;
            float *p = &x[r * cols + c];
            size_t i = c % 16;
            switch (kind) {
            case 0: case 1: case 2: case 3: *p = adversarial_common(kind, m, i); break;
            case 4: *p = i == 3 ? -0.0f : (float)rng_gauss() * 3.0e-6f; break;
            case 5: *p = i == 0 ? 448.0f * 6.0f : (float)rng_gauss() * 0.01f; break;
            default: *p = (float)rng_gauss(); break;
            }
        }
    /* rows 5 and 9: one non-finite block each (per-block path) */
    x[5 * cols + 40] = NAN;
    x[9 * cols + cols - 1] = INFINITY;
    return x;
}

START_TEST(fused_row_path_matches_per_block)
{
    size_t rows = 24, cols = 512;
    float *adv = adversarial_finite(rows, cols);
    float *g = gauss(rows * cols, 77);
    fp4s_spec specs[64];
    int ns = all_specs(specs, 64);
    fp4s_group groups[] = {FP4S_GROUP_TENSOR, FP4S_GROUP_ROW};
    fp4s_dz_tie ties[] = {FP4S_DZ_TIE_SPEC, FP4S_DZ_TIE_IN, FP4S_DZ_TIE_OUT};
    uint64_t fused0 = fp4s_decomp_fused_rows();
    for (int k = 0; k < ns; k++)
        for (int di = 0; di < 2; di++)
            for (size_t gi = 0; gi < 2; gi++)
                for (size_t ti = 0; ti < 3; ti++) {
                    const float *x = di ? adv : g;
                    char lab[128];
                    spec_label(&specs[k], lab, sizeof lab);
                    fp4s_kernels_force_ref(true);
                    fp4s_set_threads(1);
                    fp4s_decomp *a = run(&specs[k], x, rows, cols, groups[gi], 0, ties[ti]);
                    fp4s_kernels_force_ref(false);
                    fp4s_set_threads(2);
                    fp4s_decomp *b = run(&specs[k], x, rows, cols, groups[gi], 16, ties[ti]);
                    fp4s_set_threads(0);
                    assert_same_decomp(&a, &b, lab);
                }
    fp4s_kernels_force_ref(false);
    if (fp4s_decomp_fused_available())
        ck_assert_msg(fp4s_decomp_fused_rows() > fused0, "the fused row path was not taken");
    else
        fprintf(stderr, "fused_row_path_matches_per_block: no fused (AVX-512) path in this build or CPU, "
                        "only the per-block path compared\n");
    free(adv);
    free(g);
}
END_TEST

START_TEST(nvfp4_underflow_counted)
{
    /* a tensor with one large block and many tiny ones: under the TE recipe the
     * tiny blocks get zero or subnormal E4M3 scales */
    size_t rows = 4, cols = 64;
    float *x = gauss(rows * cols, 8);
    for (size_t i = 16; i < rows * cols; i++) x[i] *= 1e-6f;
    x[0] = 1000.0f;
    fp4s_spec s = mk_spec(FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4));
    fp4s_decomp *d = run(&s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
    fp4s_decomp_result r = summary(d);
    ck_assert_uint_gt(r.underflow_blocks, 0);
    ck_assert(r.energy_scale_underflow > 0.0);
    ck_assert(r.underflow_fraction > 0.0);
    fp4s_decomp_close(&d);
    free(x);
}
END_TEST

static void anchor(size_t n, double tol_scale)
{
    size_t cols = 1024, rows = n / cols;
    float *x = gauss(rows * cols, 12345);
    fp4s_spec s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *d = run(&s, x, rows, cols, FP4S_GROUP_TENSOR, 1 << 12, FP4S_DZ_TIE_SPEC);
    fp4s_decomp_result r = summary(d);
    fprintf(stderr, "anchor n=%zu: scale %.4f deadzone %.4f grid %.4f cos %.4f dz fraction %.4f delta mean %.4f\n",
            rows * cols, r.ratio_scale, r.ratio_deadzone, r.ratio_grid, r.cos_scale_grid, r.deadzone_fraction,
            r.delta_mean);
    ck_assert_msg(fabs(r.ratio_scale - 1.77) < 0.02 * tol_scale, "scale ratio %g", r.ratio_scale);
    ck_assert_msg(fabs(r.ratio_deadzone - 0.020) < 0.002 * tol_scale, "dead-zone ratio %g", r.ratio_deadzone);
    ck_assert_msg(fabs(r.ratio_grid - 0.75) < 0.015 * tol_scale, "grid ratio %g", r.ratio_grid);
    ck_assert_msg(fabs(r.cos_scale_grid + 0.667) < 0.01 * tol_scale, "cos %g", r.cos_scale_grid);
    ck_assert_msg(fabs(r.deadzone_fraction - 0.077) < 0.003 * tol_scale, "dead-zone fraction %g", r.deadzone_fraction);
    fp4s_decomp_close(&d);
    free(x);
}

START_TEST(gaussian_anchor_1e6)
{
    anchor(1000 * 1024, 1.5);
}
END_TEST

START_TEST(gaussian_anchor_1e7)
{
    anchor(9766 * 1024, 1.0);
}
END_TEST

#if FP4S_HAVE_GSL
/* P(|x| < M/24) for one element of a block of 32 iid N(0,1), M the block max:
 * the max itself is never in the dead zone; each of the other 31 is, given M = m,
 * with probability F(m/24)/F(m), F(t) = erf(t/sqrt 2) the CDF of |x|. The max has
 * density 32 F(m)^31 f(m), f(m) = 2 phi(m). So the fraction is
 * (31/32) * int 32 F(m)^30 f(m) F(m/24) dm = 31 int F(m)^30 f(m) F(m/24) dm. */
static double dz_integrand(double m, void *p)
{
    (void)p;
    double F = gsl_sf_erf(m / M_SQRT2), f = 2.0 * exp(-0.5 * m * m) / sqrt(2.0 * M_PI);
    return 31.0 * pow(F, 30) * f * gsl_sf_erf(m / 24.0 / M_SQRT2);
}

START_TEST(gaussian_deadzone_fraction_matches_integral)
{
    gsl_integration_workspace *w = gsl_integration_workspace_alloc(1000);
    gsl_function fn = {dz_integrand, NULL};
    double val, err;
    ck_assert_int_eq(gsl_integration_qags(&fn, 0.0, 40.0, 0, 1e-12, 1000, w, &val, &err), 0);
    gsl_integration_workspace_free(w);
    double frac = val;
    size_t rows = 1000, cols = 1024;
    float *x = gauss(rows * cols, 777);
    fp4s_spec s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *d = run(&s, x, rows, cols, FP4S_GROUP_TENSOR, 0, FP4S_DZ_TIE_SPEC);
    fp4s_decomp_result r = summary(d);
    fprintf(stderr, "dead-zone fraction: GSL integral %.6f, measured %.6f (n = %llu)\n", frac, r.deadzone_fraction,
            (unsigned long long)r.n);
    ck_assert(frac > 0.07 && frac < 0.085);
    ck_assert_msg(fabs(r.deadzone_fraction - frac) < 0.0015, "measured %g vs integral %g", r.deadzone_fraction, frac);
    fp4s_decomp_close(&d);
    free(x);
}
END_TEST
#endif /* FP4S_HAVE_GSL: a build without GSL does not register this test */

START_TEST(channels_rank_select_coverage_cost)
{
    size_t rows = 64, cols = 128;
    float *x = gauss(rows * cols, 31);
    /* hot channels 5 and 77 */
    for (size_t r = 0; r < rows; r++) {
        x[r * cols + 5] *= 9.0f;
        x[r * cols + 77] *= 5.0f;
    }
    float *wt = gauss(32 * cols, 32);
    fp4s_spec s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *a = run(&s, x, rows, cols, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
    fp4s_decomp *w = run(&s, wt, 32, cols, FP4S_GROUP_CHANNEL, 0, FP4S_DZ_TIE_SPEC);
    fp4s_channels_opts o;
    fp4s_channels_opts_defaults(&o);
    o.top = 3;
    fp4s_channels_report *r = NULL;
    ck_assert_int_eq(fp4s_channels_rank(a, NULL, &o, &r), 0);
    ck_assert_uint_eq(r->k, cols);
    ck_assert_uint_eq(r->count, 3);
    ck_assert_uint_eq(r->ch[0].channel, 5);
    ck_assert_uint_eq(r->ch[1].channel, 77);
    for (size_t i = 1; i < r->k; i++) ck_assert(r->ch[i - 1].score >= r->ch[i].score);
    for (size_t i = 0; i < r->k; i++) ck_assert(r->ch[i].selected == (i < 3));
    /* residual norm of a channel is the root of its error energy */
    ck_assert(fabs(r->ch[0].residual_norm - sqrt(r->ch[0].energy_total)) <= 1e-12 * r->ch[0].residual_norm);
    /* coverage rises to exactly 1 */
    for (size_t i = 1; i < r->ncoverage; i++) ck_assert(r->coverage[i].share >= r->coverage[i - 1].share);
    ck_assert(r->coverage[r->ncoverage - 1].share == 1.0);
    ck_assert_uint_eq(r->coverage[4].channels, 16); /* 12.5% of 128 */
    /* channel energies add up to the tensor's */
    double sum = 0;
    for (size_t i = 0; i < r->k; i++) sum += r->ch[i].energy_total;
    ck_assert(fabs(sum - r->summary.energy_total) <= 1e-12 * sum);
    /* cost: 3 channels padded to a block of 32, N = K assumed */
    ck_assert_uint_eq(r->cost.padded, 32);
    ck_assert(r->cost.n_out_assumed);
    ck_assert(fabs(r->cost.flops_ratio - 32.0 / 128.0) < 1e-15);
    ck_assert(r->cost.flops_extra == 2.0 * 64 * 128 * 32);
    fp4s_channels_free(&r);
    ck_assert_ptr_null(r);
    /* hcp needs a weight; with it, the score is mean|dX| + mean|dW| */
    o.score = FP4S_SCORE_HCP;
    ck_assert_int_eq(fp4s_channels_rank(a, NULL, &o, &r), FP4S_EINVAL);
    o.top = 0;
    o.ratio = 0.1;
    ck_assert_int_eq(fp4s_channels_rank(a, w, &o, &r), 0);
    ck_assert_uint_eq(r->count, 13);
    ck_assert_uint_eq(r->cost.n_out, 32);
    ck_assert(fabs(r->ch[0].hcp - (r->ch[0].mean_abs_dx + r->ch[0].mean_abs_dw)) < 1e-15);
    ck_assert_uint_eq(r->ch[0].channel, 5);
    fp4s_channels_free(&r);
    o.score = FP4S_SCORE_DEADZONE;
    ck_assert_int_eq(fp4s_channels_rank(a, NULL, &o, &r), 0);
    for (size_t i = 1; i < r->k; i++) ck_assert(r->ch[i - 1].score >= r->ch[i].score);
    fp4s_channels_free(&r);
    fp4s_decomp_close(&a);
    fp4s_decomp_close(&w);
    free(x);
    free(wt);
}
END_TEST

START_TEST(bad_input_refused)
{
    fp4s_spec s = mx_rule(FP4S_MX_CEIL);
    fp4s_decomp *d = NULL;
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    ck_assert_int_eq(fp4s_decomp_open(&s, NULL, &o, 4, 33, &d), FP4S_ESHAPE);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(fp4s_decomp_open(&s, NULL, &o, 0, 32, &d), FP4S_EEMPTY);
    o.by = FP4S_GROUP_BLOCK;
    o.max_groups = 10;
    ck_assert_int_eq(fp4s_decomp_open(&s, NULL, &o, 100, 64, &d), FP4S_ERANGE);
    ck_assert(strstr(fp4s_last_error(), "limit") != NULL);
    fp4s_spec f8;
    if (fp4s_spec_profile(&f8, FP4S_FP8, fp4s_default_profile(FP4S_FP8)) == 0) {
        fp4s_decomp_opts_defaults(&o);
        ck_assert_int_eq(fp4s_decomp_open(&f8, NULL, &o, 4, 128, &d), FP4S_ENOTSUP);
    }
    ck_assert_int_eq(fp4s_decomp_source(&s, NULL, "/nonexistent/x.npy", &d), FP4S_EOPEN);
    ck_assert(strstr(fp4s_last_error(), "/nonexistent/x.npy") != NULL);
    ck_assert_ptr_null(d);
    /* rows out of range, different specs in a merge */
    fp4s_decomp_opts_defaults(&o);
    ck_assert_int_eq(fp4s_decomp_open(&s, NULL, &o, 4, 32, &d), 0);
    float x[32 * 8] = {0};
    ck_assert_int_eq(fp4s_decomp_add(d, x, 8, 32, 0), FP4S_ERANGE);
    fp4s_spec s2 = mx_rule(FP4S_MX_FLOOR);
    fp4s_decomp *d2 = NULL;
    ck_assert_int_eq(fp4s_decomp_open(&s2, NULL, &o, 4, 32, &d2), 0);
    ck_assert_int_eq(fp4s_decomp_merge(d, d2), FP4S_EINVAL);
    fp4s_decomp_close(&d);
    fp4s_decomp_close(&d2);
    fp4s_decomp_close(&d);
    ck_assert_ptr_null(d);
    /* an all-NaN tensor: every block excluded, counted, no number invented */
    float nanx[64];
    for (int i = 0; i < 64; i++) nanx[i] = NAN;
    ck_assert_int_eq(fp4s_decomp_open(&s, NULL, &o, 2, 32, &d), 0);
    ck_assert_int_eq(fp4s_decomp_add(d, nanx, 2, 32, 0), 0);
    fp4s_decomp_result r = summary(d);
    ck_assert_uint_eq(r.n, 0);
    ck_assert_uint_eq(r.nan, 64);
    ck_assert_uint_eq(r.nonfinite_blocks, 2);
    ck_assert(isnan(r.relative_error) && isnan(r.ratio_scale));
    fp4s_decomp_close(&d);
}
END_TEST


/* The GPU hands back exact sums as raw limbs built from xs_split digits,
 * added with integer atomics in any order and never normalised there: the
 * host merge of such partials (split across "thread blocks") must give the
 * limbs of one xs_add pass, for terms of every size and sign. */
START_TEST(xsum_device_digits_merge_exact)
{
    double v[3000];
    rng_state = 11;
    for (int i = 0; i < 3000; i++) v[i] = ldexp(rng_u() - 0.5, (int)(rng_next() % 700) - 400);
    v[17] = 0.0;
    v[18] = -0.0;
    v[19] = 0x1p-430; /* below the accumulator: truncated in both */
    xsum ref;
    memset(&ref, 0, sizeof ref);
    for (int i = 0; i < 3000; i++) xs_add(&ref, v[i]);
    xsum blk[7];
    memset(blk, 0, sizeof blk);
    for (int i = 2999; i >= 0; i--) { /* reverse order, 7 interleaved blocks */
        int li = 0, neg = 0;
        int64_t d[3];
        xsum *p = &blk[i % 7];
        if (!xs_split(v[i], &li, d, &neg, &p->special)) continue;
        for (int k = 0; k < 3; k++)
            p->l[li + k] = (int64_t)((uint64_t)p->l[li + k] + (neg ? (uint64_t)-d[k] : (uint64_t)d[k]));
    }
    xsum got;
    memset(&got, 0, sizeof got);
    for (int b = 0; b < 7; b++) xs_merge(&got, &blk[b]);
    xs_norm(&ref);
    ck_assert(memcmp(ref.l, got.l, sizeof ref.l) == 0);
    ck_assert(xs_value(&ref) == xs_value(&got));
    /* specials travel in the flags */
    uint32_t sp = 0;
    int li = 0, neg = 0;
    int64_t d[3];
    ck_assert_int_eq(xs_split(-INFINITY, &li, d, &neg, &sp), 0);
    ck_assert_uint_eq(sp, XS_NEGINF);
    ck_assert_int_eq(xs_split(NAN, &li, d, &neg, &sp), 0);
    ck_assert(sp & XS_NAN);
}
END_TEST

/* delta = log2 gamma: the library's log2 within 2.2 units in the last place
 * of the exact value over the range gamma takes (and far beyond), exact at
 * powers of two, and the special values. */
START_TEST(dk_log2_accuracy)
{
    rng_state = 5;
    double worst = 0.0;
    for (int i = 0; i < 400000; i++) {
        double g = i < 200000 ? ldexp(1.0 + rng_u(), (int)(rng_next() % 2000) - 1000)
                              : 6.0 * ldexp(1.0, (int)(rng_next() % 60) - 30) / (float)(rng_u() * 448.0);
        long double ex = log2l((long double)g);
        double r = fp4s_dk_log2(g);
        if (ex == 0) {
            ck_assert(r == 0.0);
            continue;
        }
        double e = (double)ex, ulp = nextafter(fabs(e), INFINITY) - fabs(e);
        double err = (double)fabsl((long double)r - ex) / ulp;
        if (err > worst) worst = err;
    }
    ck_assert_msg(worst <= 2.2, "worst error %.3f ulp", worst);
    for (int k = -1074; k <= 1023; k += 7) ck_assert(fp4s_dk_log2(ldexp(1.0, k)) == (double)k);
    ck_assert(fp4s_dk_log2(0.0) == -INFINITY);
    ck_assert(fp4s_dk_log2(INFINITY) == INFINITY);
    ck_assert(isnan(fp4s_dk_log2(-1.0)));
    ck_assert(isnan(fp4s_dk_log2(NAN)));
    ck_assert(fp4s_dk_log2(1.5) == (double)log2l(1.5L)); /* correctly rounded here */
}
END_TEST

/* --device: names, resolution, and what open does with CUDA where it
 * cannot run (every machine without a GPU; on a GPU the resolution must
 * give CUDA). */
START_TEST(device_option_resolves)
{
    fp4s_device dv;
    ck_assert_int_eq(fp4s_device_parse("cpu", &dv), 0);
    ck_assert_int_eq(dv, FP4S_DEVICE_CPU);
    ck_assert_int_eq(fp4s_device_parse("cuda", &dv), 0);
    ck_assert_int_eq(dv, FP4S_DEVICE_CUDA);
    ck_assert_int_eq(fp4s_device_parse("auto", &dv), 0);
    ck_assert_int_eq(dv, FP4S_DEVICE_AUTO);
    ck_assert_int_eq(fp4s_device_parse("gpu", &dv), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "cpu, cuda or auto"));
    ck_assert_str_eq(fp4s_device_name(FP4S_DEVICE_CUDA), "cuda");
    fp4s_spec mx = mk_spec(FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4));
    fp4s_device got = FP4S_DEVICE_AUTO;
    ck_assert_int_eq(fp4s_device_resolve(&mx, FP4S_DEVICE_CPU, &got), 0);
    ck_assert_int_eq(got, FP4S_DEVICE_CPU);
    const bool gpu = fp4s_cuda_available();
    ck_assert_int_eq(fp4s_device_resolve(&mx, FP4S_DEVICE_AUTO, &got), 0);
    ck_assert_int_eq(got, gpu ? FP4S_DEVICE_CUDA : FP4S_DEVICE_CPU);
    int rc = fp4s_device_resolve(&mx, FP4S_DEVICE_CUDA, &got);
    ck_assert_int_eq(rc, gpu ? 0 : FP4S_ENOTSUP);
    if (!gpu) ck_assert(strstr(fp4s_last_error(), "device cuda: "));
    /* a spec the kernels do not take: AUTO stays on the CPU, CUDA is refused */
    fp4s_spec odd = mx;
    odd.block = 64;
    ck_assert_int_eq(fp4s_device_resolve(&odd, FP4S_DEVICE_AUTO, &got), 0);
    ck_assert_int_eq(got, FP4S_DEVICE_CPU);
    ck_assert_int_eq(fp4s_device_resolve(&odd, FP4S_DEVICE_CUDA, &got), FP4S_ENOTSUP);
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    ck_assert_int_eq(o.device, FP4S_DEVICE_CPU);
    o.device = FP4S_DEVICE_CUDA;
    fp4s_decomp *d = NULL;
    rc = fp4s_decomp_open(&mx, NULL, &o, 4, 64, &d);
    ck_assert_int_eq(rc, gpu ? 0 : FP4S_ENOTSUP);
    ck_assert(gpu ? d != NULL : d == NULL);
    if (d) ck_assert_int_eq(fp4s_decomp_device(d), FP4S_DEVICE_CUDA);
    fp4s_decomp_close(&d);
    o.device = FP4S_DEVICE_AUTO;
    ck_assert_int_eq(fp4s_decomp_open(&mx, NULL, &o, 4, 64, &d), 0);
    ck_assert_int_eq(fp4s_decomp_device(d), gpu ? FP4S_DEVICE_CUDA : FP4S_DEVICE_CPU);
    fp4s_decomp_close(&d);
    /* the device-memory entry point declines cleanly without a GPU */
    o.device = FP4S_DEVICE_CPU;
    ck_assert_int_eq(fp4s_decomp_open(&mx, NULL, &o, 4, 64, &d), 0);
    float dummy[256] = {0};
    if (!gpu) ck_assert_int_eq(fp4s_cuda_decomp_add(d, FP4S_DT_F32, dummy, 4, 64, 0, NULL), FP4S_ENOTSUP);
    fp4s_decomp_close(&d);
}
END_TEST

/* fp4s_decomp_add_via with a stand-in for the GPU that decomposes on the
 * CPU and hands back what the GPU hands back (the totals, histograms,
 * channel accumulators; row parts): the merge into the decomposer must equal
 * fp4s_decomp_add, chunk by chunk, and keep the decomposer's checks. */
static int cpu_as_device(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows, size_t ld,
                         fp4s_cu_dk_out *out, void *stream)
{
    (void)stream;
    ck_assert(x_host && dt == FP4S_DT_F32);
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = k->by == FP4S_GROUP_ROW ? FP4S_GROUP_TENSOR : (fp4s_group)k->by;
    fp4s_decomp *d = NULL;
    int rc = fp4s_decomp_open(&k->spec, &k->ts, &o, nrows, k->cols, &d);
    if (rc) return rc;
    rc = fp4s_decomp_add(d, x, nrows, ld, 0);
    if (!rc) {
        out->tot = d->tot;
        memcpy(out->hd, d->hd, sizeof out->hd);
        memcpy(out->he, d->he, sizeof out->he);
        if (out->ch) memcpy(out->ch, d->ch, k->cols * sizeof(chacc));
        if (out->units) /* row parts: empty rows stand in (the merge's indexing is what is tested) */
            for (size_t r = 0; r < nrows; r++) fp4s_dk_part_init(&out->units[r]);
    }
    fp4s_decomp_close(&d);
    return rc;
}

START_TEST(device_partials_merge_like_cpu)
{
    const size_t rows = 48, cols = 256;
    float *x = gauss(rows * cols, 21);
    x[5 * cols + 3] = NAN;
    fp4s_spec specs[2] = {mk_spec(FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4)),
                          mk_spec(FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4))};
    for (int si = 0; si < 2; si++)
        for (int by = FP4S_GROUP_TENSOR; by <= FP4S_GROUP_CHANNEL; by += 3) {
            fp4s_decomp *ref = run(&specs[si], x, rows, cols, (fp4s_group)by, 0, FP4S_DZ_TIE_SPEC);
            fp4s_tscale ts = tscale_of(&specs[si], x, rows, cols);
            fp4s_decomp_opts o;
            fp4s_decomp_opts_defaults(&o);
            o.by = (fp4s_group)by;
            fp4s_decomp *d = NULL;
            ck_assert_int_eq(fp4s_decomp_open(&specs[si], &ts, &o, rows, cols, &d), 0);
            ck_assert_int_eq(fp4s_decomp_add_via(d, cpu_as_device, FP4S_DT_F32, x, true, 16, cols, 0, NULL), 0);
            ck_assert_int_eq(fp4s_decomp_add_via(d, cpu_as_device, FP4S_DT_F32, x + 16 * cols, true, 32, cols, 16,
                                                 NULL), 0);
            fp4s_decomp_result a = summary(ref), b = summary(d);
            ck_assert(memcmp(&a, &b, sizeof a) == 0);
            for (size_t g = 0; g < fp4s_decomp_ngroups(ref); g++) {
                ck_assert_int_eq(fp4s_decomp_group(ref, g, &a), 0);
                ck_assert_int_eq(fp4s_decomp_group(d, g, &b), 0);
                ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "group %zu", g);
            }
            fp4s_decomp_hist ha, hb;
            fp4s_decomp_hist_get(ref, FP4S_HIST_ERROR, &ha);
            fp4s_decomp_hist_get(d, FP4S_HIST_ERROR, &hb);
            ck_assert(memcmp(&ha, &hb, sizeof ha) == 0);
            /* the checks come first: rows outside the tensor */
            ck_assert_int_eq(fp4s_decomp_add_via(d, cpu_as_device, FP4S_DT_F32, x, true, 16, cols, 40, NULL),
                             FP4S_ERANGE);
            fp4s_decomp_close(&ref);
            fp4s_decomp_close(&d);
        }
    /* row groups: filled at the right indices, and a row added twice refused */
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = FP4S_GROUP_ROW;
    fp4s_decomp *d = NULL;
    ck_assert_int_eq(fp4s_decomp_open(&specs[0], NULL, &o, rows, cols, &d), 0);
    ck_assert_int_eq(fp4s_decomp_add_via(d, cpu_as_device, FP4S_DT_F32, x, true, 8, cols, 8, NULL), 0);
    ck_assert(!d->filled[7] && d->filled[8] && d->filled[15] && !d->filled[16]);
    ck_assert_int_eq(fp4s_decomp_add_via(d, cpu_as_device, FP4S_DT_F32, x, true, 8, cols, 12, NULL), FP4S_EDUP);
    /* a spec the GPU does not take */
    fp4s_spec odd = specs[0];
    odd.block = 64;
    fp4s_decomp *e = NULL;
    ck_assert_int_eq(fp4s_decomp_open(&odd, NULL, NULL, rows, cols, &e), 0);
    ck_assert_int_eq(fp4s_decomp_add_via(e, cpu_as_device, FP4S_DT_F32, x, true, 8, cols, 0, NULL), FP4S_ENOTSUP);
    fp4s_decomp_close(&e);
    fp4s_decomp_close(&d);
    free(x);
}
END_TEST

/* ---- the streaming driver keeps NVFP4's first pass (keep_bytes) ---- */
/* At the end of the amax pass (the progress line reaches the last row read)
 * the file is overwritten with other values: rows kept in memory are
 * decomposed as first read, rows read again show the new values. */
static struct {
    const char *path;
    size_t rows, cols;
    size_t end; /* the first pass ends at this row */
} rewrite;

static void rewrite_at_pass_end(void *arg, uint64_t done, uint64_t total)
{
    (void)arg;
    if (done != rewrite.end || total != 2 * rewrite.rows) return;
    float *y = gauss(rewrite.rows * rewrite.cols, 99);
    for (size_t i = 0; i < rewrite.rows * rewrite.cols; i++) y[i] *= 3.0f;
    FILE *f = fopen(rewrite.path, "r+b");
    ck_assert(f != NULL);
    ck_assert_int_eq(fseek(f, -(long)(rewrite.rows * rewrite.cols * sizeof *y), SEEK_END), 0);
    ck_assert_uint_eq(fwrite(y, sizeof *y, rewrite.rows * rewrite.cols, f), rewrite.rows * rewrite.cols);
    ck_assert_int_eq(fclose(f), 0);
    free(y);
}

/* Write x to path (rewrite.rows x rewrite.cols), decompose rows [row0,
 * row0 + nrows) of it with o by row (the reference), drop the bytes
 * [evict_off, evict_off + evict_len) from the page cache (evict_len -1:
 * none), decompose again with the file rewritten at the end of the amax
 * pass: exactly the first `kept` rows of the range were not read again. */
static void check_kept(const char *path, const float *x, const fp4s_spec *s, const fp4s_decomp_opts *o,
                       size_t row0, size_t nrows, off_t evict_off, off_t evict_len, size_t kept, const char *what)
{
    ck_assert_int_eq(fp4s_npy_write(path, FP4S_DT_F32, 2, rewrite.rows, rewrite.cols, x), 0);
    fp4s_decomp *ref = NULL, *d = NULL;
    ck_assert_int_eq(fp4s_decomp_source_rows(s, o, path, row0, nrows, NULL, &ref), 0);
    rewrite.end = row0 + nrows;
    if (evict_len >= 0) check_evict(path, evict_off, evict_len);
    fp4s_set_progress(rewrite_at_pass_end, NULL);
    int rc = fp4s_decomp_source_rows(s, o, path, row0, nrows, NULL, &d);
    fp4s_set_progress(NULL, NULL);
    ck_assert_int_eq(rc, 0);
    fp4s_decomp_result a, b;
    for (size_t g = row0; g < row0 + nrows; g++) {
        ck_assert_int_eq(fp4s_decomp_group(ref, g, &a), 0);
        ck_assert_int_eq(fp4s_decomp_group(d, g, &b), 0);
        bool same = memcmp(&a.energy_total, &b.energy_total, sizeof a.energy_total) == 0 &&
                    memcmp(&a.energy_x, &b.energy_x, sizeof a.energy_x) == 0;
        ck_assert_msg(same == (g < row0 + kept), "%s, %d threads: row %zu %s", what, fp4s_get_threads(), g,
                      same ? "not read again" : "read again");
        if (g < row0 + kept) assert_same_result(&a, &b, "kept row");
    }
    fp4s_decomp_close(&ref);
    fp4s_decomp_close(&d);
    unlink(path);
}

START_TEST(source_keep_reads_nvfp4_once)
{
    const size_t rows = 100, cols = 128; /* chunks of 16 rows: 6 whole and one of 4 */
    char dir[] = "/tmp/fp4s_keep_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/x.npy", dir);
    float *x = gauss(rows * cols, 21);
    fp4s_spec s = mk_spec(FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4));
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.chunk_elems = 16 * cols;
    o.by = FP4S_GROUP_ROW;
    const size_t chunk_bytes = 16 * cols * sizeof(float);
    const size_t keeps[] = {0, 3 * chunk_bytes, 3 * chunk_bytes + 5, 7 * chunk_bytes, FP4S_DECOMP_KEEP_DEFAULT};
    const size_t kept_rows[] = {0, 48, 48, 100, 100};
    rewrite.path = path;
    rewrite.rows = rows;
    rewrite.cols = cols;
    const int ths[] = {1, 3, 4}; /* 4: the workers read the chunks (reader.c) */
    for (size_t ti = 0; ti < sizeof ths / sizeof ths[0]; ti++) {
        fp4s_set_threads(ths[ti]);
        for (size_t k = 0; k < sizeof keeps / sizeof keeps[0]; k++) {
            char what[64];
            snprintf(what, sizeof what, "keep %zu bytes", keeps[k]);
            o.keep_bytes = keeps[k];
            check_kept(path, x, &s, &o, 0, rows, 0, -1, kept_rows[k], what);
        }
    }
    fp4s_set_threads(0);
    rmdir(dir);
    free(x);
}
END_TEST

/* keep_bytes FP4S_DECOMP_KEEP_AUTO, the default: nothing kept where the rows'
 * bytes are in the page cache (the probe answers 1), FP4S_DECOMP_KEEP_DEFAULT
 * kept where they are not (0) or the probe cannot tell (-1), answers forced
 * through fp4s_file_resident_force; an explicit keep_bytes whatever it
 * answers. Then the probe itself, on 4 MiB (so that the kernel's readahead
 * of the header, a few hundred KiB at most, leaves a dropped range
 * dropped), with the memory available forced to 4 KiB: a file just written
 * is resident (read again); after its pages are dropped (fsync,
 * POSIX_FADV_DONTNEED) all is kept; with only the first
 * half's pages dropped, the rows of the second half are resident (the probe
 * looks at their bytes, not the whole file's, half of which is gone) and the
 * first half's are not. Where the kernel keeps the pages (tmpfs) the test
 * says so on stderr and expects them read again: the forced answers have
 * checked the other branch. With the real MemAvailable a dropped 4 MiB file
 * is read again: it fits, and the amax pass leaves it in the page cache. */
START_TEST(source_keep_auto_by_page_cache)
{
    char dir[] = "/tmp/fp4s_keepauto_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/x.npy", dir);
    const size_t cols = 128;
    fp4s_spec s = mk_spec(FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4));
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    ck_assert_uint_eq(o.keep_bytes, FP4S_DECOMP_KEEP_AUTO);
    o.chunk_elems = 16 * cols;
    o.by = FP4S_GROUP_ROW;
    rewrite.path = path;
    rewrite.cols = cols;
    const int ths[] = {1, 4};
    rewrite.rows = 100;
    float *x = gauss(rewrite.rows * cols, 23);
    for (size_t ti = 0; ti < sizeof ths / sizeof ths[0]; ti++) {
        fp4s_set_threads(ths[ti]);
        const int answers[] = {1, 0, -1};
        /* memory available: 4 KiB (the 50 KiB of rows do not fit in half of
         * it: kept where not resident), then 1 GiB (they fit: the amax pass
         * leaves them cached, read again unless the probe cannot tell) */
        const uint64_t mems[] = {4096, (uint64_t)1 << 30};
        for (size_t m = 0; m < 2; m++)
            for (size_t i = 0; i < 3; i++) {
                char what[96];
                snprintf(what, sizeof what, "auto, the probe forced to %d, %llu bytes available", answers[i],
                         (unsigned long long)mems[m]);
                fp4s_file_resident_force(answers[i]);
                fp4s_mem_available_force(mems[m]);
                const bool read_again = answers[i] == 1 || (answers[i] == 0 && m == 1);
                o.keep_bytes = FP4S_DECOMP_KEEP_AUTO;
                check_kept(path, x, &s, &o, 0, rewrite.rows, 0, -1, read_again ? 0 : rewrite.rows, what);
                o.keep_bytes = 3 * 16 * cols * sizeof(float);
                check_kept(path, x, &s, &o, 0, rewrite.rows, 0, -1, 48, "3 chunks, the probe forced");
            }
        fp4s_file_resident_force(FP4S_RESIDENT_PROBE);
        fp4s_mem_available_force(FP4S_MEM_PROBE);
    }
    free(x);

    const size_t rows = 8192, half = rows / 2;
    rewrite.rows = rows;
    x = gauss(rows * cols, 24);
    o.keep_bytes = FP4S_DECOMP_KEEP_AUTO;
    o.chunk_elems = 256 * cols;
    /* the end of the first half's bytes, after the .npy header */
    fp4s_source *src = NULL;
    ck_assert_int_eq(fp4s_npy_write(path, FP4S_DT_F32, 2, rows, cols, x), 0);
    ck_assert_int_eq(fp4s_source_open(path, &src), 0);
    uint64_t off, len;
    fp4s_source_data_range(src, 0, half, &off, &len);
    fp4s_source_close(&src);
    check_evict(path, 0, 0);
    double f;
    bool evicts = fp4s_file_resident(path, 0, UINT64_MAX, &f) == 0;
    if (!evicts)
        fprintf(stderr, "source_keep_auto_by_page_cache: %s: the kernel kept %.0f%% of the pages after "
                "POSIX_FADV_DONTNEED: auto checked with the probe forced only\n", path, 100 * f);
    /* the pages of rows [0, half) dropped but the one they share with row half */
    const off_t page = (off_t)sysconf(_SC_PAGESIZE), drop = (off_t)(off + len) / page * page;
    /* the real probe with 4 KiB available (the rows never fit: kept where
     * not resident), then with the real MemAvailable (4 MiB fit on any
     * machine that runs this: read again even where the pages were dropped) */
    const uint64_t avail = fp4s_mem_available();
    ck_assert_msg(avail > ((uint64_t)64 << 20), "MemAvailable of /proc/meminfo: %llu bytes",
                  (unsigned long long)avail);
    fp4s_mem_available_force(4096);
    for (size_t ti = 0; ti < sizeof ths / sizeof ths[0]; ti++) {
        fp4s_set_threads(ths[ti]);
        check_kept(path, x, &s, &o, 0, rows, 0, -1, 0, "auto, a file just written");
        check_kept(path, x, &s, &o, 0, rows, 0, 0, evicts ? rows : 0, "auto, all pages dropped");
        check_kept(path, x, &s, &o, half, rows - half, 0, drop, 0, "auto, the second half resident");
        check_kept(path, x, &s, &o, 0, half, 0, drop, evicts ? half : 0, "auto, the first half dropped");
    }
    fp4s_mem_available_force(FP4S_MEM_PROBE);
    check_kept(path, x, &s, &o, 0, rows, 0, 0, 0, "auto, all pages dropped, the rows fit in memory");
    fp4s_set_threads(0);
    rmdir(dir);
    free(x);
}
END_TEST

/* ---- non-finite input: the tensor amax whatever the chunking ---- */
/* NaN and Inf in rows of their own chunks, the largest finite value in a
 * row with a NaN: the decomposition of the file over chunks, --keep and
 * threads is the one of the whole tensor with the tensor scale of the
 * largest finite |x| (after the RHT for a spec with it), as fp4-quant takes
 * it. Before, a spec with the RHT folded each chunk's NaN or Inf amax (the
 * NaN chunk's finite values dropped, Inf taken), so the results moved with
 * the chunk size. */
START_TEST(source_nonfinite_amax_chunk_independent)
{
    const size_t rows = 96, cols = 128;
    char dir[] = "/tmp/fp4s_nfamax_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/x.npy", dir);
    float *x = gauss(rows * cols, 33);
    x[5 * cols + 7] = 40.0f; /* the largest finite value, in the NaN's row */
    x[5 * cols + 70] = NAN;
    x[40 * cols + 3] = INFINITY;
    x[77 * cols + 100] = -INFINITY;
    x[90 * cols + 18] = NAN;
    ck_assert_int_eq(fp4s_npy_write(path, FP4S_DT_F32, 2, rows, cols, x), 0);
    fp4s_spec sp[4];
    sp[0] = mk_spec(FP4S_NVFP4, "te");
    sp[0].rht = true;
    sp[0].rht_signs = FP4S_RHT_TE_SIGNS;
    sp[1] = mk_spec(FP4S_NVFP4, "te");
    sp[2] = mk_spec(FP4S_NVFP4, "te-2d");
    sp[3] = mk_spec(FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4));
    const size_t chunks[] = {16, 32, 48, 96};
    const size_t keeps[] = {0, FP4S_DECOMP_KEEP_DEFAULT};
    const int ths[] = {1, 3, 4};
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++) {
        fp4s_spec f = sp[k];
        f.tensor_amax = FP4S_TAMAX_FINITE;
        fp4s_tscale ts;
        ck_assert_int_eq(fp4s_tscale_init(&sp[k], fp4s_spec_amax(&f, x, rows, cols, cols, NULL), &ts), 0);
        fp4s_decomp_opts o;
        fp4s_decomp_opts_defaults(&o);
        fp4s_decomp *ref = NULL;
        ck_assert_int_eq(fp4s_decomp_open(&sp[k], &ts, &o, rows, cols, &ref), 0);
        ck_assert_int_eq(fp4s_decomp_add(ref, x, rows, cols, 0), 0);
        fp4s_decomp_result a = summary(ref);
        ck_assert_msg(a.nan + a.inf > 0, "spec %zu: no non-finite input counted", k);
        ck_assert_msg(a.energy_total > 0.0, "spec %zu: nothing decomposed", k);
        for (size_t ti = 0; ti < sizeof ths / sizeof ths[0]; ti++)
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
                for (size_t q = 0; q < sizeof keeps / sizeof keeps[0]; q++) {
                    fp4s_set_threads(ths[ti]);
                    o.chunk_elems = chunks[c] * cols;
                    o.keep_bytes = keeps[q];
                    fp4s_decomp *d = NULL;
                    ck_assert_int_eq(fp4s_decomp_source(&sp[k], &o, path, &d), 0);
                    fp4s_decomp_result b = summary(d);
                    char lab[96];
                    snprintf(lab, sizeof lab, "spec %zu, %d threads, chunks of %zu rows, keep %zu", k, ths[ti],
                             chunks[c], keeps[q]);
                    assert_same_result(&a, &b, lab);
                    fp4s_decomp_close(&d);
                }
        fp4s_decomp_close(&ref);
    }
    fp4s_set_threads(0);
    unlink(path);
    rmdir(dir);
    free(x);
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("decompose");
    bool big = argc > 1 && !strcmp(argv[1], "--big");
    const check_case cases[] = {
        CHECK_CASE(xsum_order_independent_exact),
        CHECK_CASE(e2m1_round_double_ties),
        CHECK_CASE(components_sum_to_error_every_spec),
        CHECK_CASE(merge_equals_one_pass_bitwise),
        CHECK_CASE(channel_rollup_merges_calls_of_any_rows),
        CHECK_CASE(lemma_ceil_cross_terms_exactly_zero),
        CHECK_CASE(naive_agrees_random_every_spec),
        CHECK_CASE(naive_agrees_adversarial),
        CHECK_CASE(kernels_agree_bitwise),
        CHECK_CASE(fused_row_path_matches_per_block),
        CHECK_CASE(nvfp4_underflow_counted),
        CHECK_CASE(gaussian_anchor_1e6),
#if FP4S_HAVE_GSL
        CHECK_CASE(gaussian_deadzone_fraction_matches_integral),
#endif
        CHECK_CASE(channels_rank_select_coverage_cost),
        CHECK_CASE(bad_input_refused),
        CHECK_CASE(xsum_device_digits_merge_exact),
        CHECK_CASE(dk_log2_accuracy),
        CHECK_CASE(device_option_resolves),
        CHECK_CASE(device_partials_merge_like_cpu),
        CHECK_CASE(source_keep_reads_nvfp4_once),
        CHECK_CASE(source_keep_auto_by_page_cache),
        CHECK_CASE(source_nonfinite_amax_chunk_independent),
    };
    if (big) {
        TCase *tc = tcase_create("gaussian_anchor_1e7");
        tcase_add_test(tc, gaussian_anchor_1e7);
        tcase_set_timeout(tc, 600);
        suite_add_tcase(s, tc);
    } else {
        check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    }
    return check_run(s, CK_NORMAL);
}
