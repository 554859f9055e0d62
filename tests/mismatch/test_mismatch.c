/* Unit tests of analysis/mismatch: hand-computed cases, clamp, bad input,
 * merge, percentiles, onset, trend and the trace readers. */
#include <fp4scope/mismatch.h>
#include <fp4scope/quant.h>

#include "../check_main.h"
#include <hdf5.h>
#include "../capture_test.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4s_config.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void) { check_dir_make("fp4s_mm_"); }
static void teardown(void) { check_dir_remove(); }

#define CLOSE(a, b) ck_assert_msg(fabs((double)(a) - (double)(b)) <= 1e-12 * (1 + fabs((double)(b))), "%s = %.17g, expected %.17g", #a, \
                                  (double)(a), (double)(b))

static fp4s_mm_metrics run_acc(const double *lt, const double *lr, const int64_t *seq, const uint8_t *mask, size_t n,
                               const fp4s_mm_opts *o, int expect)
{
    fp4s_mm_acc *a;
    ck_assert_int_eq(fp4s_mm_acc_open(o, &a), 0);
    ck_assert_int_eq(fp4s_mm_acc_add(a, n, lt, lr, seq, mask, NULL), 0);
    fp4s_mm_metrics m;
    m.step = 7;
    ck_assert_int_eq(fp4s_mm_acc_finish(a, &m), expect);
    ck_assert_int_eq(m.step, 7);
    fp4s_mm_acc_close(&a);
    ck_assert_ptr_null(a);
    return m;
}

/* ---- accumulator ------------------------------------------------------------------ */
START_TEST(acc_hand_three_tokens)
{
    /* rho = 0.5, 0, -0.25 ; sequences {0: 0.5, 0}, {1: -0.25} */
    const double lt[] = {-1.0, -2.0, -0.5}, lr[] = {-1.5, -2.0, -0.25};
    const int64_t seq[] = {0, 0, 1};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, NULL, 3, NULL, 0);
    ck_assert_uint_eq(m.tokens, 3);
    ck_assert_uint_eq(m.sequences, 2);
    CLOSE(m.mean_abs, 0.25);
    CLOSE(m.max_abs, 0.5);
    CLOSE(m.k1, -0.25 / 3);
    CLOSE(m.k2, (0.25 + 0.0625) / 6);
    CLOSE(m.k3, ((exp(0.5) - 1.5) + 0 + (exp(-0.25) - 0.75)) / 3);
    CLOSE(m.chi2_token, (exp(1.0) + 1 + exp(-0.5)) / 3 - 1);
    CLOSE(m.mean_abs_per_seq, (0.25 + 0.25) / 2);
    CLOSE(m.chi2_seq, (exp(1.0) + exp(-0.5)) / 2 - 1);
    CLOSE(m.ppl_trainer, (exp(1.5) + exp(0.5)) / 2);
    CLOSE(m.ppl_rollout, (exp(1.75) + exp(0.25)) / 2);
    CLOSE(m.log_ppl_diff_mean, ((-1.75 + 1.5) + (-0.25 + 0.5)) / 2);
    CLOSE(m.log_ppl_abs_diff, 0.25);
    CLOSE(m.log_ppl_diff_max, 0.25);
    CLOSE(m.log_ppl_diff_min, -0.25);
    CLOSE(m.ppl_ratio, (exp(-0.25) + exp(0.25)) / 2);
    CLOSE(m.is_mean, (exp(0.5) + 1 + exp(-0.25)) / 3);
    CLOSE(m.is_max, exp(0.5));
    CLOSE(m.is_min, exp(-0.25));
    CLOSE(m.is_frac_high, 0);
    CLOSE(m.is_frac_low, 0);
    /* percentiles of {0, 0.25, 0.5}, llama.cpp rule */
    CLOSE(m.abs_pct[4], 0.25);                        /* 50 */
    CLOSE(m.abs_pct[3], 0.2 * 0.25 + 0.8 * 0.5);      /* 90: p = 1.8 */
    CLOSE(m.abs_pct[5], 0.8 * 0.0 + 0.2 * 0.25);      /* 10: p = 0.2 */
    double d0 = fabs(exp(-1.0) - exp(-1.5)), d2 = fabs(exp(-0.5) - exp(-0.25));
    CLOSE(m.probs_diff_mean, (d0 + d2) / 3);
    CLOSE(m.probs_diff_max, d0 > d2 ? d0 : d2);
    double mu = (d0 + d2) / 3;
    CLOSE(m.probs_diff_std, sqrt(((d0 - mu) * (d0 - mu) + mu * mu + (d2 - mu) * (d2 - mu)) / 2));
}
END_TEST

START_TEST(acc_is_cap_fractions_and_ess)
{
    /* w = e^1 (> 2), 1, e^-1 (< 1/2) with C = 2 */
    const double lt[] = {0.0, -1.0, -2.0}, lr[] = {-1.0, -1.0, -1.0};
    const int64_t seq[] = {0, 1, 2};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, NULL, 3, NULL, 0);
    CLOSE(m.is_frac_high, 1.0 / 3);
    CLOSE(m.is_frac_low, 1.0 / 3);
    /* clamped to [0.5, 2]: 2, 1, 0.5 */
    double mc = 3.5 / 3, m2 = (4 + 1 + 0.25) / 3;
    CLOSE(m.is_std, sqrt(m2 - mc * mc));
    CLOSE(m.is_ess, 1.0 / (m2 / ((mc + 1e-8) * (mc + 1e-8))));
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.is_cap = 3.0;
    m = run_acc(lt, lr, seq, NULL, 3, &o, 0);
    CLOSE(m.is_frac_high, 0);
    CLOSE(m.is_frac_low, 0);
}
END_TEST

START_TEST(acc_clamp_at_20)
{
    const double lt[] = {0.0, -30.0}, lr[] = {-25.0, 0.0};
    const int64_t seq[] = {0, 1};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, NULL, 2, NULL, 0);
    CLOSE(m.is_max, exp(20.0));
    CLOSE(m.is_min, exp(-20.0));
    CLOSE(m.chi2_token, (exp(40.0) + exp(-40.0)) / 2 - 1);
    CLOSE(m.k3, ((exp(25.0) - 26) + (exp(-30.0) + 29)) / 2); /* k3 is not clamped (verl) */
    CLOSE(m.chi2_seq, (exp(40.0) + exp(-40.0)) / 2 - 1);
    CLOSE(m.max_abs, 30.0);
}
END_TEST

START_TEST(acc_positive_rejected)
{
    const double lt[] = {-1.0, 0.25}, lr[] = {-1.0, -1.0};
    const int64_t seq[] = {0, 0};
    fp4s_mm_acc *a;
    ck_assert_int_eq(fp4s_mm_acc_open(NULL, &a), 0);
    ck_assert_int_eq(fp4s_mm_acc_add(a, 2, lt, lr, seq, NULL, NULL), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "positive"));
    fp4s_mm_metrics m;
    ck_assert_int_eq(fp4s_mm_acc_finish(a, &m), FP4S_EEMPTY); /* nothing was added */
    fp4s_mm_acc_close(&a);
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.allow_positive = true;
    m = run_acc(lt, lr, seq, NULL, 2, &o, 0);
    ck_assert_uint_eq(m.tokens, 2);
    /* a masked positive value is not an error */
    const uint8_t mask[] = {1, 0};
    m = run_acc(lt, lr, seq, mask, 2, NULL, 0);
    ck_assert_uint_eq(m.tokens, 1);
    ck_assert_uint_eq(m.masked, 1);
}
END_TEST

START_TEST(acc_nan_excluded_and_counted)
{
    const double lt[] = {-1.0, NAN, -0.5, -INFINITY}, lr[] = {-1.5, -1.0, NAN, -1.0};
    const int64_t seq[] = {0, 0, 1, 1};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, NULL, 4, NULL, 0);
    ck_assert_uint_eq(m.tokens, 1);
    ck_assert_uint_eq(m.nonfinite, 3);
    ck_assert_uint_eq(m.sequences, 1);
    CLOSE(m.mean_abs, 0.5);
    ck_assert(isnan(m.probs_diff_std)); /* one token: std undefined (torch.std gives nan) */
}
END_TEST

START_TEST(acc_empty_is_eempty)
{
    const double lt[] = {-1.0}, lr[] = {-1.0};
    const int64_t seq[] = {0};
    const uint8_t mask[] = {0};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, mask, 1, NULL, FP4S_EEMPTY);
    ck_assert_uint_eq(m.masked, 1);
    ck_assert(isnan(m.mean_abs));
}
END_TEST

static double urand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffffff) / 16777216.0;
}

START_TEST(acc_merge_equals_one_pass)
{
    enum { N = 5000 };
    static double lt[N], lr[N];
    static int64_t seq[N];
    unsigned s = 42;
    for (int i = 0; i < N; i++) {
        lr[i] = -3 * urand(&s);
        lt[i] = fmin(0, lr[i] + 0.2 * (urand(&s) - 0.5));
        seq[i] = (int64_t)(urand(&s) * 50); /* sequences spread over both halves */
    }
    fp4s_mm_metrics one = run_acc(lt, lr, seq, NULL, N, NULL, 0);
    fp4s_mm_acc *a, *b;
    ck_assert_int_eq(fp4s_mm_acc_open(NULL, &a), 0);
    ck_assert_int_eq(fp4s_mm_acc_open(NULL, &b), 0);
    ck_assert_int_eq(fp4s_mm_acc_add(a, 1234, lt, lr, seq, NULL, NULL), 0);
    ck_assert_int_eq(fp4s_mm_acc_add(b, N - 1234, lt + 1234, lr + 1234, seq + 1234, NULL, NULL), 0);
    ck_assert_int_eq(fp4s_mm_acc_merge(a, b), 0);
    fp4s_mm_metrics two;
    ck_assert_int_eq(fp4s_mm_acc_finish(a, &two), 0);
    ck_assert_uint_eq(two.tokens, one.tokens);
    ck_assert_uint_eq(two.sequences, one.sequences);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        double x = fp4s_mm_metric_value(&one, i), y = fp4s_mm_metric_value(&two, i);
        ck_assert_msg(fabs(x - y) <= 1e-10 * (1 + fabs(x)), "%s: %.17g vs %.17g", fp4s_mm_metric_name(i), x, y);
    }
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.is_cap = 3;
    fp4s_mm_acc *c;
    ck_assert_int_eq(fp4s_mm_acc_open(&o, &c), 0);
    ck_assert_int_eq(fp4s_mm_acc_merge(a, c), FP4S_EINVAL);
    fp4s_mm_acc_close(&a);
    fp4s_mm_acc_close(&b);
    fp4s_mm_acc_close(&c);
    fp4s_mm_acc_close(NULL);
}
END_TEST

START_TEST(acc_first_out_marks_first_token)
{
    const double lt[] = {-1, -1, -1, -1, -1}, lr[] = {-1, -1, -1, -1, -1};
    const int64_t seq[] = {4, 4, 9, 4, 9};
    const uint8_t mask[] = {0, 1, 1, 1, 1};
    uint8_t first[5];
    fp4s_mm_acc *a;
    ck_assert_int_eq(fp4s_mm_acc_open(NULL, &a), 0);
    ck_assert_int_eq(fp4s_mm_acc_add(a, 5, lt, lr, seq, mask, first), 0);
    ck_assert_int_eq(first[0], 0); /* masked */
    ck_assert_int_eq(first[1], 1);
    ck_assert_int_eq(first[2], 1);
    ck_assert_int_eq(first[3], 0);
    ck_assert_int_eq(first[4], 0);
    fp4s_mm_acc_close(&a);
}
END_TEST

START_TEST(acc_bad_options)
{
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.is_cap = 1.0;
    fp4s_mm_acc *a;
    ck_assert_int_eq(fp4s_mm_acc_open(&o, &a), FP4S_EINVAL);
    ck_assert_ptr_null(a);
    o.is_cap = 2;
    o.clamp = NAN;
    ck_assert_int_eq(fp4s_mm_acc_open(&o, &a), FP4S_EINVAL);
}
END_TEST

/* ---- metric table ------------------------------------------------------------------- */
START_TEST(metric_names_roundtrip)
{
    ck_assert_int_ge(fp4s_mm_metric_count(), 33);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        ck_assert_int_eq(fp4s_mm_metric_index(fp4s_mm_metric_name(i)), (int)i);
        ck_assert_ptr_nonnull(fp4s_mm_metric_label(i));
    }
    ck_assert_int_eq(fp4s_mm_metric_index("no_such"), -1);
    ck_assert_int_ge(fp4s_mm_metric_index("k3"), 0);
    ck_assert_int_ge(fp4s_mm_metric_index("abs_p99_9"), 0);
    ck_assert_ptr_null(fp4s_mm_metric_name(fp4s_mm_metric_count()));
}
END_TEST

/* The ABI of fp4s_mm_metrics: the named fields are the ids of version 1, in
 * order, inside the reserved slots v[]; nmetrics says how many ids are filled
 * and fp4s_mm_metric_value answers NaN above it. */
START_TEST(metrics_struct_layout)
{
    static const struct {
        const char *name;
        size_t off;
    } v1[] = {
#define F(x) {#x, offsetof(fp4s_mm_metrics, x)}
        F(mean_abs), F(mean_abs_per_seq), F(max_abs), F(k1), F(k2), F(k3), F(chi2_token), F(chi2_seq),
        F(probs_diff_mean), F(probs_diff_max), F(probs_diff_std), F(probs_pearson), F(ppl_trainer),
        F(ppl_rollout), F(log_ppl_diff_mean), F(log_ppl_abs_diff), F(log_ppl_diff_max), F(log_ppl_diff_min),
        F(ppl_ratio), F(is_mean), F(is_max), F(is_min), F(is_std), F(is_ess), F(is_frac_high), F(is_frac_low),
#undef F
        {"abs_p99_9", offsetof(fp4s_mm_metrics, abs_pct[0])}, {"abs_p99", offsetof(fp4s_mm_metrics, abs_pct[1])},
        {"abs_p95", offsetof(fp4s_mm_metrics, abs_pct[2])}, {"abs_p90", offsetof(fp4s_mm_metrics, abs_pct[3])},
        {"abs_p50", offsetof(fp4s_mm_metrics, abs_pct[4])}, {"abs_p10", offsetof(fp4s_mm_metrics, abs_pct[5])},
        {"abs_p1", offsetof(fp4s_mm_metrics, abs_pct[6])},
    };
    ck_assert_uint_le(fp4s_mm_metric_count(), FP4S_MM_METRIC_SLOTS);
    for (size_t i = 0; i < sizeof v1 / sizeof v1[0]; i++) {
        ck_assert_msg(fp4s_mm_metric_index(v1[i].name) == (int)i, "%s: id %d, expected %zu", v1[i].name,
                      fp4s_mm_metric_index(v1[i].name), i);
        ck_assert_uint_eq(v1[i].off, offsetof(fp4s_mm_metrics, v) + i * sizeof(double));
    }
    const double lt[] = {-1.0, -2.0}, lr[] = {-1.5, -2.0};
    const int64_t seq[] = {0, 1};
    fp4s_mm_metrics m = run_acc(lt, lr, seq, NULL, 2, NULL, 0);
    ck_assert_uint_eq(m.nmetrics, fp4s_mm_metric_count());
    ck_assert(fp4s_mm_metric_value(&m, 0) == m.mean_abs && m.v[0] == m.mean_abs);
    ck_assert(isnan(fp4s_mm_metric_value(&m, m.nmetrics)));
    m.nmetrics = 3; /* as filled by a library that knew 3 metrics */
    ck_assert(isnan(fp4s_mm_metric_value(&m, 3)) && fp4s_mm_metric_value(&m, 2) == m.max_abs);
}
END_TEST

/* Every CPU level's token loop gives the bits of the portable C (and the tail
 * of fewer than 8 tokens, the slow libm path, masks and the percentiles
 * along with it). */
START_TEST(acc_levels_bitwise)
{
    enum { N = 3 * 1024 + 389 };
    static double lt[N], lr[N];
    static int64_t seq[N];
    static uint8_t mask[N];
    unsigned s = 99;
    for (int i = 0; i < N; i++) {
        lr[i] = -12 * urand(&s) * urand(&s);
        lt[i] = fmin(0, lr[i] + 0.3 * (urand(&s) - 0.5));
        seq[i] = i / 37;
        mask[i] = urand(&s) > 0.05;
    }
    lt[1500] = -800; /* a block through the slow path */
    lr[2100] = NAN;
    static const char *levels[] = {"ref", "avx2", "avx512"};
    fp4s_mm_metrics ref[2];
    int compared = 0;
    for (int l = 0; l < 3; l++) {
        if (fp4s_kernels_select(levels[l]) != 0) continue;
        for (int k = 0; k < 2; k++) {
            fp4s_mm_metrics m = run_acc(lt, lr, seq, k ? mask : NULL, N - k * 5, NULL, 0);
            if (l == 0) {
                ref[k] = m;
                continue;
            }
            compared++;
            ck_assert_uint_eq(m.tokens, ref[k].tokens);
            for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
                double x = fp4s_mm_metric_value(&ref[k], i), y = fp4s_mm_metric_value(&m, i);
                ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "%s, %s: %.17g vs ref %.17g", levels[l],
                              fp4s_mm_metric_name(i), y, x);
            }
        }
    }
    fp4s_kernels_force_ref(false);
    if (!compared) fprintf(stderr, "acc_levels_bitwise: no SIMD level in this build or CPU\n");
}
END_TEST

/* ---- percentiles --------------------------------------------------------------------- */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The expected percentile: llama.cpp's rule on the sorted values w[n]. */
static double sorted_percentile(const double *w, size_t n, double fr)
{
    double p = fr * (double)(n - 1);
    size_t ip = (size_t)p;
    double f = p - (double)ip;
    return (1 - f) * w[ip] + f * w[ip + 1 < n ? ip + 1 : n - 1];
}

START_TEST(percentiles_equal_sorted_rule)
{
    unsigned s = 7;
    for (size_t n = 1; n < 3000; n = n * 3 + 1) {
        double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
        for (size_t i = 0; i < n; i++) v[i] = w[i] = floor(urand(&s) * 50) / 7; /* many ties */
        qsort(w, n, sizeof *w, cmp_d);
        const double fr[] = {0.999, 0.99, 0.95, 0.9, 0.5, 0.1, 0.01, 0.0, 1.0};
        double out[9];
        fp4s_percentiles(v, n, fr, 9, out);
        for (int k = 0; k < 9; k++) {
            double e = sorted_percentile(w, n, fr[k]);
            ck_assert_msg(fabs(out[k] - e) <= 1e-12, "n=%zu f=%g: %g vs %g", n, fr[k], out[k], e);
        }
        free(v);
        free(w);
    }
    double out;
    const double f = 0.5;
    fp4s_percentiles(NULL, 0, &f, 1, &out);
    ck_assert(isnan(out));
}
END_TEST

/* large inputs take the two-pass radix selection; negatives, ties, wide range */
START_TEST(percentiles_radix_path_large)
{
    unsigned s = 99;
    const size_t sizes[] = {8192, 50001, 300000, 200000, 100000};
    for (size_t z = 0; z < 5; z++) {
        size_t n = sizes[z];
        double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w), *keep = malloc(n * sizeof *keep);
        for (size_t i = 0; i < n; i++) {
            double u = urand(&s);
            /* z = 3: every value in one top-16-bit bin (the second radix level); z = 4: ties there */
            double x = z == 0 ? floor(u * 20)
                       : z == 1 ? (u - 0.3) * 1e-3
                       : z == 2 ? exp(40 * (u - 0.5))
                       : z == 3 ? 1.0 + u / 16.5
                                : 1.0 + floor(u * 300) / 5000.0;
            v[i] = w[i] = keep[i] = x;
        }
        qsort(w, n, sizeof *w, cmp_d);
        double fr[100];
        for (int k = 0; k < 10; k++) fr[k] = (const double[]){0.999, 0.99, 0.95, 0.9, 0.5, 0.1, 0.01, 0.0, 1.0, 0.123456}[k];
        for (int k = 10; k < 100; k++) fr[k] = 0.5 + (k - 10) * 1e-6; /* many ranks in one bin */
        double out[100];
        fp4s_percentiles(v, n, fr, 100, out);
        for (int k = 0; k < 100; k++) {
            double e = sorted_percentile(w, n, fr[k]);
            ck_assert_msg(out[k] == e, "n=%zu f=%g: %.17g vs %.17g", n, fr[k], out[k], e);
        }
        /* data is only reordered: the same multiset */
        qsort(v, n, sizeof *v, cmp_d);
        for (size_t i = 0; i < n; i++) ck_assert(v[i] == w[i]);
        free(v);
        free(w);
        free(keep);
    }
}
END_TEST

double fp4s_mm_vexp_internal(double x);

/* the vectorized exp of the token loop stays within 2 ulp of libm */
START_TEST(vexp_matches_libm)
{
    unsigned s = 3;
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        double x = (urand(&s) - 0.5) * 1399.0; /* (-699.5, 699.5) */
        if (i % 4 == 0) x = (urand(&s) - 0.5) * 1e-3;
        double a = fp4s_mm_vexp_internal(x), b = exp(x);
        double ulp = nextafter(b, INFINITY) - b;
        double err = fabs(a - b) / ulp;
        if (err > worst) worst = err;
    }
    ck_assert_msg(worst <= 2.0, "worst error %.2f ulp", worst);
    ck_assert(fp4s_mm_vexp_internal(0.0) == 1.0);
}
END_TEST

/* ---- onset and trend ------------------------------------------------------------------- */
START_TEST(onset_planted_step_found)
{
    int64_t st[60];
    double v[60];
    for (int i = 0; i < 60; i++) {
        st[i] = 100 + 2 * i;
        v[i] = 0.02 * (1 + 0.03 * ((i * 7) % 5 - 2)); /* +-6% wiggle */
        if (i >= 37) v[i] = 0.02 * 2.5 * pow(1.05, i - 37);
    }
    v[20] = 0.2; /* a single spike is not an onset */
    fp4s_mm_onset o;
    ck_assert_int_eq(fp4s_mm_onset_find(st, v, 60, NULL, &o), 0);
    ck_assert(o.found);
    ck_assert_int_eq(o.step, 100 + 2 * 37);
    ck_assert_uint_eq(o.index, 37);
    ck_assert(fabs(o.baseline - 0.02) < 0.002);
    ck_assert(o.threshold >= 1.5 * o.baseline - 1e-15);
    /* more consecutive steps than there are after the onset: none */
    fp4s_mm_onset_opts oo;
    fp4s_mm_onset_opts_defaults(&oo);
    oo.consecutive = 30;
    ck_assert_int_eq(fp4s_mm_onset_find(st, v, 60, &oo, &o), 0);
    ck_assert(!o.found);
}
END_TEST

START_TEST(onset_flat_none_and_short_series)
{
    int64_t st[30];
    double v[30];
    for (int i = 0; i < 30; i++) {
        st[i] = i;
        v[i] = 1.0 + 0.01 * (i % 3);
    }
    fp4s_mm_onset o;
    ck_assert_int_eq(fp4s_mm_onset_find(st, v, 30, NULL, &o), 0);
    ck_assert(!o.found);
    ck_assert_int_eq(fp4s_mm_onset_find(st, v, 12, NULL, &o), FP4S_EEMPTY);
    ck_assert(!o.found);
    ck_assert(isfinite(o.baseline));
    fp4s_mm_onset_opts oo;
    fp4s_mm_onset_opts_defaults(&oo);
    oo.consecutive = 0;
    ck_assert_int_eq(fp4s_mm_onset_find(st, v, 30, &oo, &o), FP4S_EINVAL);
}
END_TEST

START_TEST(trend_exponential_slope)
{
    int64_t st[40];
    double v[40];
    for (int i = 0; i < 40; i++) {
        st[i] = 10 * i;
        v[i] = 0.003 * exp(0.004 * (double)st[i]) * (1 + 0.01 * ((i * 3) % 5 - 2));
    }
    v[5] = 5.0; /* an outlier the robust fit ignores */
    fp4s_mm_trend t;
    int rc = fp4s_mm_trend_fit(st, v, 40, 0.95, &t);
#if FP4S_HAVE_GSL
    ck_assert_int_eq(rc, 0);
    ck_assert(t.valid);
    ck_assert_msg(fabs(t.slope - 0.004) < 2e-4, "slope %g", t.slope);
    ck_assert(t.lo < t.slope && t.slope < t.hi);
    ck_assert_uint_eq(t.n, 40);
    ck_assert_int_eq(fp4s_mm_trend_fit(st, v, 2, 0.95, &t), FP4S_EEMPTY);
#else
    ck_assert_int_eq(rc, FP4S_ENOTSUP);
#endif
}
END_TEST

/* ---- traces ------------------------------------------------------------------------- */
static int analyze(const char *path, fp4s_mm_result *res, const fp4s_mm_opts *o)
{
    memset(res, 0, sizeof *res);
    return fp4s_mm_analyze(path, NULL, o, NULL, res);
}

START_TEST(trace_csv_two_steps_and_runs)
{
    write_file(check_path("a.csv"), "# comment\nrun,step,seq,trainer_logprob,rollout_logprob\n"
                            "x,0,1,-1,-1.5\nx,0,1,-2,-2\ny,0,1,-1,-1\nx,1,2,-0.5,-0.25\n\ny,1,1,-1,-1\n");
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("a.csv"), &r, NULL), 0);
    ck_assert_uint_eq(r.nruns, 2);
    ck_assert_str_eq(r.runs[0].name, "x");
    ck_assert_str_eq(r.runs[1].name, "y");
    ck_assert_uint_eq(r.runs[0].nsteps, 2);
    CLOSE(r.runs[0].steps[0].mean_abs, 0.25);
    CLOSE(r.runs[0].steps[1].mean_abs, 0.25);
    CLOSE(r.runs[1].steps[0].mean_abs, 0.0);
    fp4s_mm_result_free(&r);
    ck_assert_uint_eq(r.nruns, 0);
}
END_TEST

START_TEST(trace_tsv_mapped_columns_and_name)
{
    write_file(check_path("b.txt"), "it\tsample\tlp_train\tlp_roll\tm\n3\t0\t-1\t-1.5\t1\n3\t0\t-9\t0.5\t0\n");
    fp4s_trace_opts t;
    fp4s_trace_opts_defaults(&t);
    t.col_step = "it";
    t.col_seq = "sample";
    t.col_trainer = "lp_train";
    t.col_rollout = "lp_roll";
    t.col_mask = "m";
    fp4s_mm_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_mm_analyze(check_path("b.txt"), "base", NULL, &t, &r), 0);
    ck_assert_str_eq(r.runs[0].name, "base");
    ck_assert_int_eq(r.runs[0].steps[0].step, 3);
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 1);
    ck_assert_uint_eq(r.runs[0].steps[0].masked, 1);
    fp4s_mm_result_free(&r);
}
END_TEST

START_TEST(trace_jsonl_null_is_nan)
{
#if !FP4S_HAVE_JANSSON
    /* built without jansson: JSONL is refused, by name, and nothing is read */
    write_file(check_path("c.jsonl"), "{\"step\":0,\"seq\":1,\"trainer_logprob\":-1,\"rollout_logprob\":-1.5}\n");
    fp4s_mm_result r0;
    ck_assert_int_eq(analyze(check_path("c.jsonl"), &r0, NULL), FP4S_ENOTSUP);
    ck_assert(strstr(fp4s_last_error(), "c.jsonl") && strstr(fp4s_last_error(), "jansson"));
    ck_assert_uint_eq(r0.nruns, 0);
    return;
#endif
    write_file(check_path("c.jsonl"), "{\"step\":0,\"seq\":1,\"trainer_logprob\":-1,\"rollout_logprob\":-1.5}\n"
                              "{\"step\":0,\"seq\":1,\"trainer_logprob\":null,\"rollout_logprob\":-1}\n"
                              "{\"step\":0,\"seq\":2,\"trainer_logprob\":\"NaN\",\"rollout_logprob\":-1,\"mask\":true}\n");
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("c.jsonl"), &r, NULL), 0);
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 1);
    ck_assert_uint_eq(r.runs[0].steps[0].nonfinite, 2);
    ck_assert_str_eq(r.runs[0].name, "c");
    fp4s_mm_result_free(&r);
}
END_TEST

static void expect_error(const char *name, const char *text, int code, const char *pattern)
{
    write_file(check_path(name), text);
    fp4s_mm_result r;
    int rc = analyze(check_path(name), &r, NULL);
    ck_assert_msg(rc == code, "%s: rc %d, expected %d (%s)", name, rc, code, fp4s_last_error());
    ck_assert_msg(strstr(fp4s_last_error(), pattern) != NULL, "%s: message '%s' lacks '%s'", name, fp4s_last_error(),
                  pattern);
    ck_assert_msg(strstr(fp4s_last_error(), name) != NULL, "%s: message '%s' lacks the file", name,
                  fp4s_last_error());
    ck_assert_uint_eq(r.nruns, 0);
}

START_TEST(trace_bad_input_messages)
{
    expect_error("nonnum.csv", "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,abc\n", FP4S_EFORMAT,
                 "line 2: column 'rollout_logprob': expected a number, got 'abc'");
    expect_error("nocol.csv", "step,seq,trainer_logprob\n0,0,-1\n", FP4S_EFORMAT, "missing rollout log-prob column");
    expect_error("pos.csv", "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1\n0,0,0.5,-1\n", FP4S_EFORMAT,
                 "line 3: trainer log-prob 0.5 is positive");
    expect_error("fields.csv", "step,seq,trainer_logprob,rollout_logprob\n0,0,-1\n", FP4S_EFORMAT,
                 "line 2: 3 fields, the header has 4");
    expect_error("group.csv", "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1\n1,0,-1,-1\n0,1,-1,-1\n",
                 FP4S_EFORMAT, "grouped by step");
    expect_error("empty.csv", "step,seq,trainer_logprob,rollout_logprob,mask\n0,0,-1,-1,0\n", FP4S_EEMPTY,
                 "step 0: no counted token");
    expect_error("nanstep.csv", "step,seq,trainer_logprob,rollout_logprob\n0,0,nan,-1\n", FP4S_EEMPTY,
                 "1 with NaN/Inf");
    expect_error("noheader.csv", "", FP4S_EEMPTY, "empty trace");
    expect_error("norows.csv", "step,seq,trainer_logprob,rollout_logprob\n", FP4S_EEMPTY, "no tokens");
    expect_error("badstep.csv", "step,seq,trainer_logprob,rollout_logprob\n1.5,0,-1,-1\n", FP4S_EFORMAT,
                 "column 'step': expected an integer");
#if FP4S_HAVE_JANSSON
    expect_error("bad.jsonl", "{\"step\":0,\"seq\":0,\"trainer_logprob\":-1,\"rollout_logprob\":[1]}\n",
                 FP4S_EFORMAT, "field 'rollout_logprob': expected a number, null or a numeric string, got an array");
    expect_error("miss.jsonl", "{\"step\":0,\"seq\":0,\"trainer_logprob\":-1}\n", FP4S_EFORMAT,
                 "line 1: missing field 'rollout_logprob'");
    expect_error("broken.jsonl", "{\"step\":0,\n", FP4S_EFORMAT, "line 1: invalid JSON");
    expect_error("runmix.jsonl",
                 "{\"step\":0,\"seq\":0,\"trainer_logprob\":-1,\"rollout_logprob\":-1,\"run\":\"a\"}\n"
                 "{\"step\":0,\"seq\":0,\"trainer_logprob\":-1,\"rollout_logprob\":-1}\n",
                 FP4S_EFORMAT, "line 2: field 'run' missing, unlike the lines before");
#endif
    fp4s_mm_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_mm_analyze(check_path("does-not-exist.csv"), NULL, NULL, NULL, &r), FP4S_EOPEN);
}
END_TEST

/* Issue 8.16: a duplicate (step, seq, pos) is refused naming both lines, or
 * dropped with dedupe; a JSONL BOM is read as the CSV one is; RFC 4180
 * quoted CSV fields may hold line breaks. */
START_TEST(trace_duplicates_bom_multiline)
{
    const char *dup = "step,seq,pos,trainer_logprob,rollout_logprob\n0,0,0,-1,-2\n0,0,1,-1,-1\n"
                      "0,0,0,-1,-2\n1,0,0,-1,-1.5\n1,0,0,-1,-1.5\n";
    expect_error("dup.csv", dup, FP4S_EFORMAT, "line 4: step 0, seq 0, pos 0 already at line 2");
    fp4s_trace_opts t;
    fp4s_trace_opts_defaults(&t);
    t.dedupe = true;
    fp4s_mm_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_mm_analyze(check_path("dup.csv"), NULL, NULL, &t, &r), 0);
    ck_assert_uint_eq(r.runs[0].nsteps, 2);
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 2);
    ck_assert_uint_eq(r.runs[0].steps[1].tokens, 1);
    fp4s_mm_result_free(&r);
    /* the same (seq, pos) in another step or another run is no duplicate */
    write_file(check_path("nodup.csv"), "run,step,seq,pos,trainer_logprob,rollout_logprob\na,0,0,0,-1,-2\n"
                                "b,0,0,0,-1,-2\na,1,0,0,-1,-2\n");
    ck_assert_int_eq(analyze(check_path("nodup.csv"), &r, NULL), 0);
    ck_assert_uint_eq(r.nruns, 2);
    fp4s_mm_result_free(&r);
    /* without a pos column tokens repeat (step, seq) by nature */
    write_file(check_path("nopos.csv"), "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-2\n0,0,-1,-2\n");
    ck_assert_int_eq(analyze(check_path("nopos.csv"), &r, NULL), 0);
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 2);
    fp4s_mm_result_free(&r);
#if FP4S_HAVE_JANSSON
    write_file(check_path("bom.jsonl"), "\xEF\xBB\xBF{\"step\":0,\"seq\":1,\"trainer_logprob\":-1,\"rollout_logprob\":-1.5}\n");
    ck_assert_msg(analyze(check_path("bom.jsonl"), &r, NULL) == 0, "%s", fp4s_last_error());
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 1);
    fp4s_mm_result_free(&r);
    /* by content, not by extension: a BOM before the '{' is still JSONL */
    write_file(check_path("bom.trace"), "\xEF\xBB\xBF{\"step\":0,\"seq\":1,\"trainer_logprob\":-1,\"rollout_logprob\":-1.5}\n");
    ck_assert_msg(analyze(check_path("bom.trace"), &r, NULL) == 0, "%s", fp4s_last_error());
    fp4s_mm_result_free(&r);
    expect_error("dup.jsonl", "{\"step\":0,\"seq\":1,\"pos\":3,\"trainer_logprob\":-1,\"rollout_logprob\":-1}\n"
                              "{\"step\":0,\"seq\":1,\"pos\":3,\"trainer_logprob\":-1,\"rollout_logprob\":-1}\n",
                 FP4S_EFORMAT, "line 2: step 0, seq 1, pos 3 already at line 1");
#endif
    write_file(check_path("ml.csv"), "step,seq,note,trainer_logprob,rollout_logprob\n0,0,\"two\nlines, \"\"quoted\"\"\",-1,-2\n"
                             "0,1,plain,-1,-1\n0,2,\"\n\n\",-1,-1.5\n");
    ck_assert_msg(analyze(check_path("ml.csv"), &r, NULL) == 0, "%s", fp4s_last_error());
    ck_assert_uint_eq(r.runs[0].steps[0].tokens, 3);
    fp4s_mm_result_free(&r);
    expect_error("mlerr.csv", "step,seq,note,trainer_logprob,rollout_logprob\n0,0,a,-1,-2\n0,1,\"open\n0,2,x,-1,-1\n",
                 FP4S_EFORMAT, "line 3: quoted field not closed before the end of the file");
    expect_error("mlline.csv", "step,seq,note,trainer_logprob,rollout_logprob\n0,0,\"a\nb\",-1,x\n", FP4S_EFORMAT,
                 "line 2: column 'rollout_logprob'");
}
END_TEST

START_TEST(trace_skip_empty_option)
{
    write_file(check_path("se.csv"), "step,seq,trainer_logprob,rollout_logprob,mask\n0,0,-1,-1,0\n1,0,-1,-1.5,1\n");
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.skip_empty = true;
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("se.csv"), &r, &o), 0);
    ck_assert_uint_eq(r.runs[0].nsteps, 1);
    ck_assert_uint_eq(r.runs[0].skipped_steps, 1);
    ck_assert_int_eq(r.runs[0].steps[0].step, 1);
    fp4s_mm_result_free(&r);
}
END_TEST

START_TEST(trace_by_position_split)
{
    /* no pos column: first counted token of each sequence */
    write_file(check_path("bp.csv"), "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-2\n0,0,-1,-1.1\n0,1,-1,-1.5\n"
                             "0,1,-1,-1.1\n");
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.by_position = true;
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("bp.csv"), &r, &o), 0);
    ck_assert_ptr_nonnull(r.runs[0].first);
    ck_assert_uint_eq(r.runs[0].first[0].tokens, 2);
    CLOSE(r.runs[0].first[0].mean_abs, 0.75);
    CLOSE(r.runs[0].rest[0].mean_abs, 0.1);
    fp4s_mm_result_free(&r);
    /* with pos: pos == 0 is the first token */
    write_file(check_path("bq.csv"), "step,seq,pos,trainer_logprob,rollout_logprob\n0,0,1,-1,-2\n0,0,0,-1,-1.1\n");
    ck_assert_int_eq(analyze(check_path("bq.csv"), &r, &o), 0);
    CLOSE(r.runs[0].first[0].mean_abs, 0.1);
    CLOSE(r.runs[0].rest[0].mean_abs, 1.0);
    fp4s_mm_result_free(&r);
}
END_TEST

/* ---- capture files ---------------------------------------------------------------------- */
static void h5_vec(hid_t f, const char *path, hid_t type, const void *data, hsize_t n)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, path, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (n) H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

static void make_capture(const char *path, const char *schema, int rollout_len, int empty_step)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (schema) capture_put_schema(f, schema, false);
    const float lt[] = {-1.0f, -2.0f, -0.5f}, lr[] = {-1.5f, -2.0f, -0.25f};
    const int64_t seq[] = {0, 0, 1};
    const uint8_t mask[] = {1, 1, 1};
    for (int s = 0; s < 3; s++) {
        char p[128];
        int step = s * 10;
        snprintf(p, sizeof p, "/steps/%d/logprobs/trainer", step);
        h5_vec(f, p, H5T_NATIVE_FLOAT, lt, (empty_step && s == 1) ? 0 : 3);
        snprintf(p, sizeof p, "/steps/%d/logprobs/rollout", step);
        h5_vec(f, p, H5T_NATIVE_FLOAT, lr, (empty_step && s == 1) ? 0 : (hsize_t)rollout_len);
        snprintf(p, sizeof p, "/steps/%d/logprobs/seq", step);
        h5_vec(f, p, H5T_NATIVE_INT64, seq, (empty_step && s == 1) ? 0 : 3);
        snprintf(p, sizeof p, "/steps/%d/logprobs/mask", step);
        h5_vec(f, p, H5T_NATIVE_UINT8, mask, (empty_step && s == 1) ? 0 : 3);
    }
    H5Fclose(f);
}

START_TEST(capture_reads_logprobs)
{
    make_capture(check_path("cap.h5"), "fp4scope-capture/1", 3, 0);
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("cap.h5"), &r, NULL), 0);
    ck_assert_uint_eq(r.runs[0].nsteps, 3);
    ck_assert_int_eq(r.runs[0].steps[2].step, 20);
    CLOSE(r.runs[0].steps[1].mean_abs, 0.25);
    CLOSE(r.runs[0].steps[1].k1, -0.25 / 3);
    fp4s_mm_result_free(&r);
}
END_TEST

START_TEST(capture_bad_files)
{
    make_capture(check_path("unequal.h5"), "fp4scope-capture/1", 2, 0);
    fp4s_mm_result r;
    ck_assert_int_eq(analyze(check_path("unequal.h5"), &r, NULL), FP4S_ESHAPE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "/steps/0/logprobs: rollout has 2 tokens but trainer has 3"));
    make_capture(check_path("empty.h5"), "fp4scope-capture/1", 3, 1);
    ck_assert_int_eq(analyze(check_path("empty.h5"), &r, NULL), FP4S_EEMPTY);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "/steps/10/logprobs: empty step"));
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.skip_empty = true;
    ck_assert_int_eq(analyze(check_path("empty.h5"), &r, &o), 0);
    ck_assert_uint_eq(r.runs[0].nsteps, 2);
    ck_assert_uint_eq(r.runs[0].skipped_steps, 1);
    fp4s_mm_result_free(&r);
    make_capture(check_path("newer.h5"), "fp4scope-capture/2", 3, 0);
    ck_assert_int_eq(analyze(check_path("newer.h5"), &r, NULL), FP4S_EVERSION);
    /* the schema is checked by the capture layer, as for every reader (the
     * trace reader's own check took "fp4scope-capture/x" for major 0) */
    make_capture(check_path("badver.h5"), "fp4scope-capture/x", 3, 0);
    ck_assert_int_eq(analyze(check_path("badver.h5"), &r, NULL), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "malformed"));
    make_capture(check_path("noschema.h5"), NULL, 3, 0);
    ck_assert_int_eq(analyze(check_path("noschema.h5"), &r, NULL), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "not an fp4scope capture"));
    write_file(check_path("fake.h5"), "not hdf5");
    ck_assert_int_eq(analyze(check_path("fake.h5"), &r, NULL), FP4S_EFORMAT);
}
END_TEST

/* A step large enough for the parallel token pass gives the serial numbers. */
START_TEST(analyze_parallel_equals_serial)
{
    enum { N = 300000 };
    float *lt = malloc(N * sizeof *lt), *lr = malloc(N * sizeof *lr);
    int64_t *seq = malloc(N * sizeof *seq);
    unsigned s = 11;
    for (int i = 0; i < N; i++) {
        lr[i] = (float)(-4 * urand(&s));
        lt[i] = fminf(0.0f, lr[i] + (float)(0.05 * (urand(&s) - 0.5)));
        seq[i] = i / 777; /* sequences straddle the worker boundaries */
    }
    hid_t f = H5Fcreate(check_path("big.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    capture_put_schema(f, "fp4scope-capture/1", false);
    h5_vec(f, "/steps/3/logprobs/trainer", H5T_NATIVE_FLOAT, lt, N);
    h5_vec(f, "/steps/3/logprobs/rollout", H5T_NATIVE_FLOAT, lr, N);
    h5_vec(f, "/steps/3/logprobs/seq", H5T_NATIVE_INT64, seq, N);
    H5Fclose(f);
    fp4s_mm_result r1, r2;
    fp4s_set_threads(1);
    ck_assert_int_eq(analyze(check_path("big.h5"), &r1, NULL), 0);
    fp4s_set_threads(2);
    ck_assert_int_eq(analyze(check_path("big.h5"), &r2, NULL), 0);
    fp4s_set_threads(0);
    const fp4s_mm_metrics *a = &r1.runs[0].steps[0], *b = &r2.runs[0].steps[0];
    ck_assert_uint_eq(a->tokens, N);
    ck_assert_uint_eq(a->sequences, b->sequences);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        double x = fp4s_mm_metric_value(a, i), y = fp4s_mm_metric_value(b, i);
        ck_assert_msg(fabs(x - y) <= 1e-11 * (1 + fabs(x)), "%s: %.17g vs %.17g", fp4s_mm_metric_name(i), x, y);
    }
    /* and the same as one accumulator fed directly */
    double *dt = malloc(N * sizeof *dt), *dr = malloc(N * sizeof *dr);
    for (int i = 0; i < N; i++) {
        dt[i] = lt[i];
        dr[i] = lr[i];
    }
    fp4s_mm_metrics m = run_acc(dt, dr, seq, NULL, N, NULL, 0);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        double x = fp4s_mm_metric_value(&m, i), y = fp4s_mm_metric_value(b, i);
        ck_assert_msg(fabs(x - y) <= 1e-11 * (1 + fabs(x)), "%s: %.17g vs %.17g", fp4s_mm_metric_name(i), x, y);
    }
    /* the percentiles (radix path, histogram built while adding) equal the sorted rule */
    double *ab = malloc(N * sizeof *ab);
    for (int i = 0; i < N; i++) ab[i] = fabs(dt[i] - dr[i]);
    qsort(ab, N, sizeof *ab, cmp_d);
    const double *lv = fp4s_mm_percentile_levels();
    for (int k = 0; k < FP4S_MM_NPCT; k++) {
        double p = lv[k] / 100.0 * (double)(N - 1);
        size_t ip = (size_t)p;
        double fr = p - (double)ip, e = (1 - fr) * ab[ip] + fr * ab[ip + 1 < N ? ip + 1 : N - 1];
        ck_assert_msg(b->abs_pct[k] == e && m.abs_pct[k] == e, "p%g: %.17g %.17g vs %.17g", lv[k], b->abs_pct[k],
                      m.abs_pct[k], e);
    }
    free(ab);
    fp4s_mm_result_free(&r1);
    fp4s_mm_result_free(&r2);
    free(lt);
    free(lr);
    free(seq);
    free(dt);
    free(dr);
}
END_TEST


/* ---- reading is linear: the work of the readers' lookups per step, run and column ----------- */
uint64_t fp4s_mm_work_internal(void);

/* A trace or log of n steps (rows) written by `gen` into path, then
 * analyzed; the key comparisons of the lookups it took. */
typedef void (*gen_fn)(FILE *f, size_t n);
static uint64_t work_of(gen_fn gen, size_t n, const char *name)
{
    const char *path = check_path(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    gen(f, n);
    fclose(f);
    fp4s_mm_result r;
    uint64_t w0 = fp4s_mm_work_internal();
    int rc = analyze(path, &r, NULL);
    ck_assert_msg(rc == 0, "%s: %s", name, fp4s_last_error());
    uint64_t w = fp4s_mm_work_internal() - w0;
    fp4s_mm_result_free(&r);
    return w;
}

/* one token per step, steps ascending (the old reader scanned every earlier step) */
static void gen_steps(FILE *f, size_t n)
{
    fputs("step,seq,trainer_logprob,rollout_logprob\n", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%zu,0,-1,-1.%zu\n", i, i % 7);
}
/* n runs interleaved, two steps each */
static void gen_runs(FILE *f, size_t n)
{
    fputs("run,step,seq,trainer_logprob,rollout_logprob\n", f);
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < n; i++) fprintf(f, "r%zu,%d,0,-1,-1.5\n", i, s);
}
/* a W&B history export of n rows */
static void gen_wandb(FILE *f, size_t n)
{
    fputs("_step,_runtime,rollout_corr/k3_kl,actor/grad_norm,critic/score/mean\n", f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%zu,%zu.5,0.00%zu,1.%zu,0.5\n", i, i, i % 9 + 1, i % 5);
}
/* verl JSONL of n steps of 60 metrics each (the columns are looked up per key) */
static void gen_jsonl(FILE *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "{\"step\": %zu, \"data\": {", i);
        for (int k = 0; k < 60; k++) fprintf(f, "%s\"m/%d\": %d.5", k ? ", " : "", k, k);
        fputs("}}\n", f);
    }
}
/* a scalar log of n runs (a run column), three steps each */
static void gen_scalar_runs(FILE *f, size_t n)
{
    fputs("run,step,rollout_corr/k3_kl\n", f);
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < n; i++) fprintf(f, "r%zu,%d,0.01\n", i, s);
}

START_TEST(reading_linear_in_steps_runs_columns)
{
    /* four times the input must cost about four times the work, never the
     * sixteen of a scan over everything seen before; and a few comparisons
     * per row (or per key of a JSONL row) at most */
    static const struct {
        gen_fn gen;
        const char *name;
        size_t n, per_row;
    } cases[] = {
        {gen_steps, "steps.csv", 1500, 1},      {gen_runs, "runs.csv", 1500, 2},
        {gen_wandb, "wandb.csv", 1500, 3},      {gen_jsonl, "log.jsonl", 500, 60},
        {gen_scalar_runs, "sruns.csv", 1500, 3},
    };
    char msg[2048] = "";
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
#if !FP4S_HAVE_JANSSON
        if (cases[c].gen == gen_jsonl) continue; /* reading JSONL needs jansson (a minimal build has none) */
#endif
        uint64_t w1 = work_of(cases[c].gen, cases[c].n, cases[c].name);
        uint64_t w4 = work_of(cases[c].gen, 4 * cases[c].n, cases[c].name);
        if (w4 > 5 * w1 + 64 || w4 > 8 * cases[c].per_row * 4 * cases[c].n)
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " %s: %llu comparisons for %zu rows, %llu for 4x;",
                     cases[c].name, (unsigned long long)w1, cases[c].n, (unsigned long long)w4);
    }
    ck_assert_msg(!*msg, "not linear:%s", msg);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("mismatch");
    const check_case cases[] = {
        CHECK_CASE(acc_hand_three_tokens),
        CHECK_CASE(acc_is_cap_fractions_and_ess),
        CHECK_CASE(acc_clamp_at_20),
        CHECK_CASE(acc_positive_rejected),
        CHECK_CASE(acc_nan_excluded_and_counted),
        CHECK_CASE(acc_empty_is_eempty),
        CHECK_CASE(acc_merge_equals_one_pass),
        CHECK_CASE(acc_first_out_marks_first_token),
        CHECK_CASE(acc_bad_options),
        CHECK_CASE(metric_names_roundtrip),
        CHECK_CASE(metrics_struct_layout),
        CHECK_CASE(acc_levels_bitwise),
        CHECK_CASE(percentiles_equal_sorted_rule),
        CHECK_CASE(percentiles_radix_path_large),
        CHECK_CASE(vexp_matches_libm),
        CHECK_CASE(onset_planted_step_found),
        CHECK_CASE(onset_flat_none_and_short_series),
        CHECK_CASE(trend_exponential_slope),
        CHECK_CASE(trace_csv_two_steps_and_runs),
        CHECK_CASE(trace_tsv_mapped_columns_and_name),
        CHECK_CASE(trace_jsonl_null_is_nan),
        CHECK_CASE(trace_bad_input_messages),
        CHECK_CASE(trace_skip_empty_option),
        CHECK_CASE(trace_duplicates_bom_multiline),
        CHECK_CASE(trace_by_position_split),
        CHECK_CASE(capture_reads_logprobs),
        CHECK_CASE(capture_bad_files),
        CHECK_CASE(analyze_parallel_equals_serial),
        CHECK_CASE(reading_linear_in_steps_runs_columns),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), setup, teardown, 0);
    return s;
}

int main(void)
{
    return check_run(suite(), CK_NORMAL);
}
