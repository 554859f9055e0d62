/* Onset of divergence (baseline + margin + consecutive steps) and the robust
 * trend of ln(metric) over steps (GSL bisquare regression). */
#include "mm_internal.h"
#include "fp4s_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if FP4S_HAVE_GSL
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#endif

void fp4s_mm_onset_opts_defaults(fp4s_mm_onset_opts *o)
{
    memset(o, 0, sizeof *o);
    o->baseline_steps = 10;
    o->margin = 0.5;
    o->sigma = 3.0;
    o->consecutive = 5;
}

static double median_of(double *v, size_t n)
{
    double f = 0.5, out;
    fp4s_percentiles(v, n, &f, 1, &out);
    return out;
}

int fp4s_mm_onset_find(const int64_t *steps, const double *values, size_t n, const fp4s_mm_onset_opts *o,
                       fp4s_mm_onset *out)
{
    fp4s_mm_onset_opts d;
    if (!o) {
        fp4s_mm_onset_opts_defaults(&d);
        o = &d;
    }
    memset(out, 0, sizeof *out);
    out->step = -1;
    out->baseline = out->spread = out->threshold = out->value = NAN;
    if (o->baseline_steps == 0 || o->consecutive == 0)
        return fp4s_error_set(FP4S_EINVAL, "onset: baseline steps and consecutive steps must be >= 1");
    if (!(o->margin >= 0) || !(o->sigma >= 0))
        return fp4s_error_set(FP4S_EINVAL, "onset: margin and sigma must be >= 0");
    size_t nb = o->baseline_steps < n ? o->baseline_steps : n;
    double *b = malloc((nb ? nb : 1) * sizeof *b);
    if (!b) return fp4s_error_set(FP4S_ENOMEM, "onset: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < nb; i++)
        if (isfinite(values[i])) b[k++] = values[i];
    out->baseline_n = k;
    if (k > 0) {
        out->baseline = median_of(b, k);
        for (size_t i = 0; i < k; i++) b[i] = fabs(b[i] - out->baseline);
        out->spread = 1.4826 * median_of(b, k);
        double m1 = o->margin * fabs(out->baseline), m2 = o->sigma * out->spread;
        out->threshold = out->baseline + (m1 > m2 ? m1 : m2);
    }
    free(b);
    if (n < o->baseline_steps + o->consecutive || k == 0)
        return fp4s_error_set(FP4S_EEMPTY, "onset: %zu steps, need at least %zu (baseline %zu + consecutive %zu)", n,
                              o->baseline_steps + o->consecutive, o->baseline_steps, o->consecutive);
    size_t run = 0;
    for (size_t i = o->baseline_steps; i < n; i++) {
        if (values[i] > out->threshold) run++;
        else run = 0;
        if (run == o->consecutive) {
            size_t s = i + 1 - o->consecutive;
            out->found = true;
            out->index = s;
            out->step = steps[s];
            out->value = values[s];
            break;
        }
    }
    return 0;
}

int fp4s_mm_trend_fit(const int64_t *steps, const double *values, size_t n, double level, fp4s_mm_trend *out)
{
    memset(out, 0, sizeof *out);
    out->slope = out->se = out->lo = out->hi = out->intercept = NAN;
    out->level = level;
    if (!(level > 0 && level < 1)) return fp4s_error_set(FP4S_EINVAL, "trend: level must be in (0, 1), got %g", level);
#if !FP4S_HAVE_GSL
    (void)steps;
    (void)values;
    (void)n;
    return fp4s_error_set(FP4S_ENOTSUP, "trend: built without GSL (robust regression unavailable)");
#else
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(values[i]) && values[i] > 0) m++;
    out->n = m;
    if (m < 3) return fp4s_error_set(FP4S_EEMPTY, "trend: %zu positive values, need 3", m);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    gsl_matrix *X = gsl_matrix_alloc(m, 2);
    gsl_vector *y = gsl_vector_alloc(m), *c = gsl_vector_alloc(2);
    gsl_matrix *cov = gsl_matrix_alloc(2, 2);
    gsl_multifit_robust_workspace *w = gsl_multifit_robust_alloc(gsl_multifit_robust_bisquare, m, 2);
    int rc = 0;
    if (!X || !y || !c || !cov || !w) {
        rc = fp4s_error_set(FP4S_ENOMEM, "trend: out of memory");
        goto done;
    }
    /* centre the steps for conditioning; the slope is unchanged */
    double s0 = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(values[i]) && values[i] > 0) s0 += (double)steps[i];
    s0 /= (double)m;
    size_t k = 0;
    int distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(isfinite(values[i]) && values[i] > 0)) continue;
        gsl_matrix_set(X, k, 0, 1.0);
        gsl_matrix_set(X, k, 1, (double)steps[i] - s0);
        if ((double)steps[i] != s0) distinct = 1;
        gsl_vector_set(y, k, log(values[i]));
        k++;
    }
    if (!distinct) {
        rc = fp4s_error_set(FP4S_EEMPTY, "trend: all points at the same step");
        goto done;
    }
    int e = gsl_multifit_robust(X, y, c, cov, w);
    if (e && e != GSL_EMAXITER) {
        rc = fp4s_error_set(FP4S_EINTERNAL, "trend: robust fit failed: %s", gsl_strerror(e));
        goto done;
    }
    out->slope = gsl_vector_get(c, 1);
    out->se = sqrt(gsl_matrix_get(cov, 1, 1));
    out->intercept = gsl_vector_get(c, 0) - out->slope * s0;
    double t = gsl_cdf_tdist_Pinv(0.5 + level / 2.0, (double)(m - 2));
    if (m == 3 && !isfinite(t)) t = NAN;
    out->lo = out->slope - t * out->se;
    out->hi = out->slope + t * out->se;
    out->valid = isfinite(out->slope) && isfinite(out->se);
done:
    if (w) gsl_multifit_robust_free(w);
    gsl_matrix_free(X);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
    gsl_set_error_handler(old);
    return rc;
#endif
}

/* ---- change point: a two-segment fit of ln(metric) ------------------------------------------
 * y = ln(value) at the positive finite points; for each candidate break b the
 * points before it are fitted by a constant (the floor) and the points from
 * it on by a straight line in ln (an exponential growth, which may start
 * with a jump), by least squares, with O(1) work per candidate from prefix
 * and suffix sums. The best break is compared by BIC with one straight line
 * over all points and with a constant. */
void fp4s_mm_changepoint_opts_defaults(fp4s_mm_changepoint_opts *o)
{
    memset(o, 0, sizeof *o);
    o->min_segment = 5;
    o->min_bic_gain = 10.0;
}

static double sse_floor(double v) { return v > 1e-300 ? v : 1e-300; }

int fp4s_mm_changepoint_find(const int64_t *steps, const double *values, size_t n,
                             const fp4s_mm_changepoint_opts *o, fp4s_mm_changepoint *out)
{
    fp4s_mm_changepoint_opts d;
    if (!o) {
        fp4s_mm_changepoint_opts_defaults(&d);
        o = &d;
    }
    memset(out, 0, sizeof *out);
    out->step = -1;
    out->level = out->rate = out->bic_gain = NAN;
    if (o->min_segment < 2) return fp4s_error_set(FP4S_EINVAL, "change point: segments need >= 2 points");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += isfinite(values[i]) && values[i] > 0;
    out->n = m;
    if (m < 2 * o->min_segment)
        return fp4s_error_set(FP4S_EEMPTY, "change point: %zu positive values, need %zu (2 segments of %zu)", m,
                              2 * o->min_segment, o->min_segment);
    double *s = malloc(m * sizeof *s), *y = malloc(m * sizeof *y), *sum = malloc(5 * (m + 1) * sizeof *sum);
    size_t *ix = malloc(m * sizeof *ix);
    if (!s || !y || !sum || !ix) {
        free(s);
        free(y);
        free(sum);
        free(ix);
        return fp4s_error_set(FP4S_ENOMEM, "change point: out of memory");
    }
    size_t k = 0;
    double s0 = (double)steps[0];
    for (size_t i = 0; i < n; i++)
        if (isfinite(values[i]) && values[i] > 0) {
            s[k] = (double)steps[i] - s0;
            y[k] = log(values[i]);
            ix[k++] = i;
        }
    /* prefix sums P[i] over [0, i): y, y^2, s, s^2, s y */
    double *Py = sum, *Pyy = sum + (m + 1), *Ps = sum + 2 * (m + 1), *Pss = sum + 3 * (m + 1),
           *Psy = sum + 4 * (m + 1);
    Py[0] = Pyy[0] = Ps[0] = Pss[0] = Psy[0] = 0;
    for (size_t i = 0; i < m; i++) {
        Py[i + 1] = Py[i] + y[i];
        Pyy[i + 1] = Pyy[i] + y[i] * y[i];
        Ps[i + 1] = Ps[i] + s[i];
        Pss[i + 1] = Pss[i] + s[i] * s[i];
        Psy[i + 1] = Psy[i] + s[i] * y[i];
    }
    /* the sums over [a, b) are P[b] - P[a]; a line fit of those points */
#define SEG(a, b, sse_const, sse_line, slope, mean)                                                         \
    do {                                                                                                    \
        double c_ = (double)((b) - (a)), sy_ = Py[b] - Py[a], syy_ = Pyy[b] - Pyy[a];                      \
        double ss_ = Ps[b] - Ps[a], sss_ = Pss[b] - Pss[a], ssy_ = Psy[b] - Psy[a];                        \
        double vy_ = syy_ - sy_ * sy_ / c_, vx_ = sss_ - ss_ * ss_ / c_, cxy_ = ssy_ - ss_ * sy_ / c_;     \
        sse_const = vy_ > 0 ? vy_ : 0;                                                                      \
        slope = vx_ > 0 ? cxy_ / vx_ : 0;                                                                   \
        sse_line = vx_ > 0 ? sse_const - cxy_ * cxy_ / vx_ : sse_const;                                     \
        if (sse_line < 0) sse_line = 0;                                                                     \
        mean = sy_ / c_;                                                                                    \
    } while (0)
    double sse_c, sse_l, g0, mu0;
    SEG(0, m, sse_c, sse_l, g0, mu0);
    double best = INFINITY, bg = NAN, blev = NAN;
    size_t bb = 0;
    for (size_t b = o->min_segment; b + o->min_segment <= m; b++) {
        double c1, l1, g1, m1, c2, l2, g2, m2;
        SEG(0, b, c1, l1, g1, m1);
        SEG(b, m, c2, l2, g2, m2);
        (void)l1;
        (void)g1;
        (void)c2;
        (void)m2;
        double sse = c1 + l2;
        if (sse < best) {
            best = sse;
            bb = b;
            bg = g2;
            blev = m1;
        }
    }
#undef SEG
    double dm = (double)m;
    double bic_h = dm * log(sse_floor(best) / dm) + 4 * log(dm);
    double bic_l = dm * log(sse_floor(sse_l) / dm) + 2 * log(dm);
    double bic_c = dm * log(sse_floor(sse_c) / dm) + 1 * log(dm);
    (void)g0;
    (void)mu0;
    out->bic_gain = (bic_l < bic_c ? bic_l : bic_c) - bic_h;
    if (isfinite(bg)) {
        out->rate = bg;
        out->level = exp(blev);
        out->found = bg > 0 && out->bic_gain >= o->min_bic_gain;
        if (out->found) {
            out->index = ix[bb];
            out->step = steps[ix[bb]];
        }
    }
    free(s);
    free(y);
    free(sum);
    free(ix);
    return 0;
}
