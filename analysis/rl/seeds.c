/* Statistics over seeds (fp4s_rl_seedstat_compute, <fp4scope/rl.h>): the
 * t-interval of a mean and the paired tests of an arm against a baseline
 * arm on the same seeds, for fp4-rl --seeds. */
#include <fp4scope/rl.h>
#include "fp4s_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if FP4S_HAVE_GSL
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#endif

#if FP4S_HAVE_GSL
/* Mean and sample standard deviation (n - 1) of n values, two passes. */
static void mean_sd(const double *x, size_t n, double *mean, double *sd)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    double m = s / (double)n, v = 0;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = sqrt(v / (double)(n - 1));
}
#endif

int fp4s_rl_seedstat_compute(const double *x, const double *base, size_t n, double level, fp4s_rl_seedstat *out)
{
    if (!x || !out) return fp4s_error_set(FP4S_EINVAL, "rl seeds: NULL argument");
    if (n < 2) return fp4s_error_set(FP4S_EINVAL, "rl seeds: a confidence interval needs at least 2 seeds, got %zu", n);
    if (!(level > 0 && level < 1)) return fp4s_error_set(FP4S_EINVAL, "rl seeds: level %g is not in (0, 1)", level);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (base && !isfinite(base[i])))
            return fp4s_error_set(FP4S_EINVAL, "rl seeds: seed %zu has a value that is not finite", i);
#if !FP4S_HAVE_GSL
    (void)base;
    return fp4s_error_set(FP4S_ENOTSUP, "rl seeds: confidence intervals and tests need GSL (this libfp4scope was "
                          "built without it: -Dgsl=disabled or libgsl-dev missing)");
#else
    memset(out, 0, sizeof *out);
    out->n = n;
    double df = (double)(n - 1), q = gsl_cdf_tdist_Pinv(0.5 + level / 2, df), rn = sqrt((double)n);
    mean_sd(x, n, &out->mean, &out->sd);
    out->lo = out->mean - q * out->sd / rn;
    out->hi = out->mean + q * out->sd / rn;
    if (!base) return 0;
    double *d = malloc(n * sizeof *d);
    if (!d) return fp4s_error_set(FP4S_ENOMEM, "rl seeds: out of memory");
    for (size_t i = 0; i < n; i++) {
        d[i] = x[i] - base[i];
        if (d[i] > 0) out->wins++;
        else if (d[i] < 0) out->losses++;
        else out->ties++;
    }
    out->paired = true;
    mean_sd(d, n, &out->d_mean, &out->d_sd);
    free(d);
    out->d_lo = out->d_mean - q * out->d_sd / rn;
    out->d_hi = out->d_mean + q * out->d_sd / rn;
    if (out->d_sd > 0) {
        out->t = out->d_mean / (out->d_sd / rn);
        out->p_t = 2 * gsl_cdf_tdist_Q(fabs(out->t), df);
    } else {
        out->t = out->p_t = NAN; /* every difference equal: no variance to test against */
    }
    unsigned m = (unsigned)(out->wins + out->losses), k = (unsigned)(out->wins < out->losses ? out->wins : out->losses);
    if (m == 0) out->p_sign = 1;
    else {
        double p = 2 * gsl_cdf_binomial_P(k, 0.5, m);
        out->p_sign = p > 1 ? 1 : p;
    }
    return 0;
#endif
}
