/* Evaluation of a remedy list on one linear site (remedy.h): the trainer's
 * references in float64, every remedy's output error against them, the
 * activation decompositions before and after, the cost and the time model. */
#include "remedy_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fp4s_remedy_eval_opts_defaults(fp4s_remedy_eval_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dz_tie = FP4S_DZ_TIE_SPEC;
    o->decompose = true;
    o->accel = NULL;
    o->device = FP4S_DEVICE_CPU;
}

void fp4s_remedy_results_free(fp4s_remedy_result *res, size_t nr)
{
    if (!res) return;
    for (size_t i = 0; i < nr; i++) {
        free(res[i].channels);
        res[i].channels = NULL;
    }
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (d)
        for (size_t i = 0; i < n; i++) d[i] = (double)x[i];
    return d;
}

static double sq(const double *y, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += y[i] * y[i];
    return s;
}

static double sqf(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

static double diff2(const float *y, const double *ref, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - ref[i];
        s += d * d;
    }
    return s;
}

static double diff2f(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return s;
}

static double ratio(double e2, double r2) { return r2 > 0 ? sqrt(e2 / r2) : (e2 > 0 ? INFINITY : 0.0); }

/* Qa(x) with its codes and scales, for the decompositions. */
typedef struct qbase {
    float *q;
    uint8_t *codes, *scales;
    fp4s_tscale ts;
} qbase;

static void qbase_free(qbase *b)
{
    free(b->q);
    free(b->codes);
    free(b->scales);
    memset(b, 0, sizeof *b);
}

static int qbase_make(const fp4s_spec *s, const float *x, size_t rows, size_t cols, qbase *b)
{
    memset(b, 0, sizeof *b);
    size_t n = rows * cols > 0 ? rows * cols : 1, blk = s->format == FP4S_FP8 ? 1 : s->block;
    size_t ns = rows * (cols / blk) > 0 ? rows * (cols / blk) : 1;
    b->q = malloc(n * sizeof *b->q);
    b->codes = malloc(n);
    b->scales = malloc(ns);
    if (!b->q || !b->codes || !b->scales) {
        qbase_free(b);
        return fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
    }
    int rc = rm_qdq(s, x, rows, cols, cols, NULL, b->q, b->codes, s->format == FP4S_FP8 ? NULL : b->scales, &b->ts);
    if (rc) qbase_free(b);
    return rc;
}

/* The decomposition of x with q in place of Q(x) (q NULL: the quantizer's own). */
static int decomp(const fp4s_spec *s, const fp4s_remedy_eval_opts *o, const float *x, const qbase *b,
                  const float *q, size_t rows, size_t cols, fp4s_decomp_result *out)
{
    fp4s_decomp_opts d;
    fp4s_decomp_opts_defaults(&d);
    d.dz_tie = o->dz_tie;
    fp4s_decomp *acc = NULL;
    int rc = fp4s_decomp_open(s, &b->ts, &d, rows, cols, &acc);
    if (rc) return rc;
    rc = fp4s_decomp_add_quantized(acc, x, cols, q ? q : b->q, cols, b->codes, cols, b->scales, cols / s->block,
                                   rows, 0);
    if (!rc) rc = fp4s_decomp_summary(acc, out);
    fp4s_decomp_close(&acc);
    return rc;
}

static void nan_result(fp4s_decomp_result *r)
{
    memset(r, 0, sizeof *r);
    double *p = &r->energy_x;
    double *end = &r->identity_residual;
    for (; p <= end; p++) *p = NAN;
}

/* Energies of q - x and xh - x over D (Q* sends the entry to 0) and over the
 * rest, in blocks of s->block along each row (remedy.h). */
static void dz_split(const fp4s_spec *s, const fp4s_remedy_eval_opts *o, const float *x, const float *q,
                     const float *xh, size_t m, size_t k, double e[4])
{
    bool tie_in = o->dz_tie == FP4S_DZ_TIE_IN ||
                  (o->dz_tie == FP4S_DZ_TIE_SPEC && s->tie != FP4S_TIE_AWAY); /* rne, rtz send 0.25 to 0 */
    e[0] = e[1] = e[2] = e[3] = 0;
    size_t b = s->block;
    for (size_t i = 0; i < m; i++)
        for (size_t c0 = 0; c0 < k; c0 += b) {
            const float *xr = x + i * k + c0;
            double mb = 0;
            for (size_t j = 0; j < b; j++) mb = fmax(mb, fabs((double)xr[j]));
            for (size_t j = 0; j < b; j++) {
                double a = fabs((double)xr[j]) * 24.0;
                bool in = mb == 0 || a < mb || (a == mb && tie_in);
                double d1 = (double)q[i * k + c0 + j] - (double)xr[j], d2 = (double)xh[i * k + c0 + j] - (double)xr[j];
                e[in ? 0 : 2] += d1 * d1;
                e[in ? 1 : 3] += d2 * d2;
            }
        }
}

static int cmp_sz(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

int rm_eval_on(const rm_gpu *g, const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt,
               const float *X, const float *Xt, size_t m, const float *W, size_t n, size_t k,
               const fp4s_remedy_eval_opts *o, fp4s_remedy_site *site, fp4s_remedy_result *res)
{
    if (!r || !act || !wt || !X || !W || !site || (nr && !res))
        return fp4s_error_set(FP4S_EINVAL, "remedy evaluation: NULL argument");
    fp4s_remedy_eval_opts dflt;
    if (!o) {
        fp4s_remedy_eval_opts_defaults(&dflt);
        o = &dflt;
    }
    const fp4s_accel *acc = o->accel;
    int rc = 0;
    if (!acc && (rc = fp4s_accel_get("b200", &acc))) return rc;
    double t0 = rm_now(), secs = 0;
    memset(site, 0, sizeof *site);
    memset(res, 0, nr * sizeof *res);
    site->m = m;
    site->n = n;
    site->k = k;
    site->have_trainer = Xt != NULL;
    if (m == 0 || n == 0 || k == 0) return fp4s_error_set(FP4S_EEMPTY, "remedy evaluation: empty site [%zu x %zu] x [%zu x %zu]^T", m, k, n, k);
    for (size_t i = 0; i < nr; i++)
        if ((rc = fp4s_remedy_check(&r[i], act, wt, k))) return rc;
    if ((rc = rm_check_finite("activation", X, m, k, k))) return rc;
    if (Xt && (rc = rm_check_finite("trainer activation", Xt, m, k, k))) return rc;
    if ((rc = rm_check_finite("weight", W, n, k, k))) return rc;
    const float *XT = Xt ? Xt : X;
    size_t mk = m * k, nk = n * k, mn = m * n;

    double *Xd = NULL, *XTd = NULL, *Wd = NULL, *Qwd = NULL, *QXtd = NULL;
    double *Yb = NULL, *Yw = NULL, *Y4 = NULL, *Yo = NULL, *Ywr = NULL, *Y4r = NULL, *Wrd = NULL;
    float *Y = NULL, *xhat = NULL;
    qbase qx = {0}, qxt = {0}, qw = {0};
    rc = qbase_make(act, X, m, k, &qx);
    if (!rc && Xt) rc = qbase_make(act, Xt, m, k, &qxt);
    if (!rc) rc = qbase_make(wt, W, n, k, &qw);
    if (rc) goto done;
    const qbase *qxT = Xt ? &qxt : &qx;
    XTd = to_double(XT, mk);
    Wd = to_double(W, nk);
    Qwd = to_double(qw.q, nk);
    QXtd = to_double(qxT->q, mk);
    Yb = malloc(mn * sizeof *Yb);
    Yw = malloc(mn * sizeof *Yw);
    Y4 = malloc(mn * sizeof *Y4);
    Y = malloc(mn * sizeof *Y);
    xhat = malloc(mk * sizeof *xhat);
    if (!XTd || !Wd || !Qwd || !QXtd || !Yb || !Yw || !Y4 || !Y || !xhat) {
        rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory for a [%zu x %zu] x [%zu x %zu]^T site", m,
                            k, n, k);
        goto done;
    }
    /* references */
    if ((rc = rm_dgemm(g, m, n, k, XTd, k, Wd, k, 0.0, Yb, n, &secs))) goto done;
    if ((rc = rm_dgemm(g, m, n, k, XTd, k, Qwd, k, 0.0, Yw, n, &secs))) goto done;
    if ((rc = rm_dgemm(g, m, n, k, QXtd, k, Qwd, k, 0.0, Y4, n, &secs))) goto done;
    if (Xt) {
        Xd = to_double(X, mk);
        Yo = malloc(mn * sizeof *Yo);
        if (!Xd || !Yo) {
            rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
            goto done;
        }
        if ((rc = rm_dgemm(g, m, n, k, Xd, k, Wd, k, 0.0, Yo, n, &secs))) goto done;
        free(Xd);
        Xd = NULL;
    } else {
        Yo = Yb;
    }
    free(Wd);
    Wd = NULL;
    free(Qwd);
    Qwd = NULL;
    site->ref2_bf16 = sq(Yb, mn);
    site->ref2_wfq = sq(Yw, mn);
    site->ref2_w4a4qat = sq(Y4, mn);
    site->ref2_own = sq(Yo, mn);
    site->input_rel_diff = Xt ? ratio(diff2f(X, Xt, mk), sqf(Xt, mk)) : NAN;
    /* the shares of activation and weight error: Qa(X) W^T and X Qw(W)^T against X W^T */
    if ((rc = rm_sgemm(g, m, n, k, qx.q, k, W, k, 0.0f, Y, n, &secs))) goto done;
    site->act_only_rel_error = ratio(diff2(Y, Yo, mn), site->ref2_own);
    if ((rc = rm_sgemm(g, m, n, k, X, k, qw.q, k, 0.0f, Y, n, &secs))) goto done;
    site->weight_only_rel_error = ratio(diff2(Y, Yo, mn), site->ref2_own);
    if (o->decompose && act->format != FP4S_FP8) {
        if ((rc = decomp(act, o, X, &qx, NULL, m, k, &site->act))) goto done;
        if ((rc = decomp(wt, o, W, &qw, NULL, n, k, &site->weight))) goto done;
    } else {
        nan_result(&site->act);
        nan_result(&site->weight);
    }

    double x2 = sqf(X, mk), xt2 = sqf(XT, mk), w2 = sqf(W, nk);
    for (size_t i = 0; i < nr; i++) {
        double ti = rm_now();
        fp4s_remedy_result *rr = &res[i];
        rr->remedy = r[i];
        bool trainer = fp4s_remedy_is_trainer(r[i].kind);
        const float *xin = trainer ? XT : X;
        const qbase *qin = trainer ? qxT : &qx;
        fp4s_rlinear *L = NULL;
        if ((rc = fp4s_rlinear_open(&r[i], act, wt, W, n, k, k, &L))) goto done;
        rm_rlinear_set_gpu(L, g);
        /* the aligned trainers use this remedy's own weight operand (and, for an item that
         * rotates its operands, the trainer's activations rotated the same way) */
        const double *yw = Yw, *y4 = Y4;
        rr->ref2_wfq = site->ref2_wfq;
        rr->ref2_w4a4qat = site->ref2_w4a4qat;
        const float *wr = fp4s_rlinear_weight(L);
        const fp4s_spec *rot = rm_rlinear_rht(L);
        float *xin_r = NULL, *w_r = NULL;  /* the rotated activation and weight (rht) */
        qbase qrot = {0};
        if (rot) {
            xin_r = malloc(mk * sizeof *xin_r);
            w_r = malloc(nk * sizeof *w_r);
            if (!xin_r || !w_r) rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
            if (!rc) rc = fp4s_rht_apply(rot, xin, m, k, k, xin_r, k);
            if (!rc) rc = fp4s_rht_apply(rot, W, n, k, k, w_r, k);
            if (!rc) rc = qbase_make(act, xin_r, m, k, &qrot);
        }
        if (!rc && !trainer && r[i].kind != FP4S_RK_BF16_ROLLOUT &&
            (rot || memcmp(wr, qw.q, nk * sizeof *wr))) {
            if (!Ywr) {
                Ywr = malloc(mn * sizeof *Ywr);
                Y4r = malloc(mn * sizeof *Y4r);
                Wrd = malloc(nk * sizeof *Wrd);
            }
            if (!Ywr || !Y4r || !Wrd) rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
            for (size_t j = 0; !rc && j < nk; j++) Wrd[j] = (double)wr[j];
            const double *xtd = XTd, *qxtd = QXtd;
            double *xtr = NULL, *qxtr = NULL;
            if (!rc && rot) {
                /* X_t R and Qa(X_t R) */
                float *t1 = malloc(mk * sizeof *t1);
                qbase qt = {0};
                xtr = malloc(mk * sizeof *xtr);
                qxtr = malloc(mk * sizeof *qxtr);
                if (!t1 || !xtr || !qxtr) rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
                if (!rc) rc = fp4s_rht_apply(rot, XT, m, k, k, t1, k);
                if (!rc) rc = qbase_make(act, t1, m, k, &qt);
                for (size_t j = 0; !rc && j < mk; j++) {
                    xtr[j] = t1[j];
                    qxtr[j] = qt.q[j];
                }
                qbase_free(&qt);
                free(t1);
                xtd = xtr;
                qxtd = qxtr;
            }
            if (!rc) rc = rm_dgemm(g, m, n, k, xtd, k, Wrd, k, 0.0, Ywr, n, &secs);
            if (!rc) rc = rm_dgemm(g, m, n, k, qxtd, k, Wrd, k, 0.0, Y4r, n, &secs);
            free(xtr);
            free(qxtr);
            if (!rc) {
                yw = Ywr;
                y4 = Y4r;
                rr->ref2_wfq = sq(Ywr, mn);
                rr->ref2_w4a4qat = sq(Y4r, mn);
            }
        }
        rm_fwd_info fi = {0};
        fi.xhat = xhat;
        if (!rc) rc = rm_forward_ex(L, xin, m, k, Y, n, &rr->cost, &fi);
        const float *xref = rot ? xin_r : xin, *wref = rot ? w_r : W;
        const qbase *qref = rot ? &qrot : qin;
        if (!rc) {
            secs += rr->cost.gemm_seconds;
            rr->err2_bf16 = diff2(Y, Yb, mn);
            rr->err2_wfq = diff2(Y, yw, mn);
            rr->err2_w4a4qat = diff2(Y, y4, mn);
            rr->err2_own = diff2(Y, trainer ? Yb : Yo, mn);
            rr->out_rel_error = ratio(rr->err2_bf16, site->ref2_bf16);
            rr->out_rel_error_vs_wfq = ratio(rr->err2_wfq, rr->ref2_wfq);
            rr->out_rel_error_vs_w4a4qat = ratio(rr->err2_w4a4qat, rr->ref2_w4a4qat);
            rr->out_rel_error_vs_own = ratio(rr->err2_own, trainer ? site->ref2_bf16 : site->ref2_own);
            rr->act_rel_error = ratio(diff2f(xhat, xref, mk), rot ? sqf(xin_r, mk) : trainer ? xt2 : x2);
            rr->weight_rel_error = ratio(diff2f(wr, wref, nk), rot ? sqf(w_r, nk) : w2);
            rr->noise_rel = r[i].aqn && fi.clean2 > 0 ? sqrt(fi.noise2 / fi.clean2) : (r[i].aqn ? 0.0 : NAN);
            if (fi.rac_idx) {
                rr->nchannels = rr->cost.rac_channels;
                rr->channels = malloc((rr->nchannels ? rr->nchannels : 1) * sizeof *rr->channels);
                if (!rr->channels) rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
                else {
                    memcpy(rr->channels, fi.rac_idx, rr->nchannels * sizeof *rr->channels);
                    qsort(rr->channels, rr->nchannels, sizeof *rr->channels, cmp_sz);
                }
            }
            free(fi.rac_idx);
        }
        fp4s_rlinear_close(&L);
        /* stochastic rounding: the bias of the output over sr_seeds seeds */
        rr->sr_bias = rr->sr_error_spread = NAN;
        if (!rc && r[i].sr) {
            double *ysum = calloc(mn, sizeof *ysum);
            float *ys = malloc(mn * sizeof *ys);
            double e1 = 0, e2 = 0;
            if (!ysum || !ys) rc = fp4s_error_set(FP4S_ENOMEM, "remedy evaluation: out of memory");
            for (uint32_t t = 0; !rc && t < r[i].sr_seeds; t++) {
                fp4s_remedy rs = r[i];
                rs.sr_seed = r[i].sr_seed + t;
                const float *yy = Y;
                if (t) {
                    fp4s_remedy_cost cs;
                    fp4s_rlinear *Ls = NULL;
                    rc = fp4s_rlinear_open(&rs, act, wt, W, n, k, k, &Ls);
                    rm_rlinear_set_gpu(Ls, g);
                    if (!rc) rc = fp4s_rlinear_forward(Ls, xin, m, k, ys, n, &cs);
                    fp4s_rlinear_close(&Ls);
                    if (!rc) secs += cs.gemm_seconds;
                    yy = ys;
                }
                if (rc) break;
                for (size_t j = 0; j < mn; j++) ysum[j] += yy[j];
                double e = ratio(diff2(yy, Yb, mn), site->ref2_bf16);
                e1 += e;
                e2 += e * e;
            }
            if (!rc) {
                double N = r[i].sr_seeds, b2 = 0;
                for (size_t j = 0; j < mn; j++) {
                    double dd = ysum[j] / N - Yb[j];
                    b2 += dd * dd;
                }
                rr->sr_bias = ratio(b2, site->ref2_bf16);
                rr->sr_error_spread = N > 1 ? sqrt(fmax(0.0, (e2 - e1 * e1 / N) / (N - 1))) : 0.0;
            }
            free(ysum);
            free(ys);
        }
        if (!rc && o->decompose && act->format != FP4S_FP8) {
            rc = decomp(act, o, xin, qin, NULL, m, k, &rr->act_before);
            if (!rc) rc = decomp(act, o, xref, qref, xhat, m, k, &rr->act_after);
        } else if (!rc) {
            nan_result(&rr->act_before);
            nan_result(&rr->act_after);
        }
        if (!rc) {
            rr->removable_before = rr->act_before.ratio_removable;
            if (act->format != FP4S_FP8 && !rot) {
                double e[4];
                dz_split(act, o, xin, qin->q, xhat, m, k, e);
                rr->dz_err2_before = e[0];
                rr->dz_err2_after = e[1];
                rr->rest_err2_before = e[2];
                rr->rest_err2_after = e[3];
                rr->dz_left = e[0] > 0 ? e[1] / e[0] : NAN;
                rr->rest_left = e[2] > 0 ? e[3] / e[2] : NAN;
            } else {
                /* FP8, or rotated coordinates (rht): the dead zone of X is not that of X R */
                rr->dz_err2_before = rr->dz_err2_after = rr->rest_err2_before = rr->rest_err2_after = NAN;
                rr->dz_left = rr->rest_left = NAN;
            }
        }
        free(xin_r);
        free(w_r);
        qbase_free(&qrot);
        if (rc) goto done;
        if ((rc = fp4s_remedy_time_predict(&rr->cost, acc, &rr->time))) goto done;
        rr->seconds = rm_now() - ti;
    }
    site->gemm_seconds = secs;
    site->seconds = rm_now() - t0;
done:
    if (Yo != Yb) free(Yo);
    free(Xd);
    free(XTd);
    free(Wd);
    free(Qwd);
    free(QXtd);
    free(Ywr);
    free(Y4r);
    free(Wrd);
    free(Yb);
    free(Yw);
    free(Y4);
    free(Y);
    free(xhat);
    qbase_free(&qx);
    qbase_free(&qxt);
    qbase_free(&qw);
    if (rc) fp4s_remedy_results_free(res, nr);
    return rc;
}

int fp4s_remedy_device_resolve(fp4s_device want, fp4s_device *got)
{
    if (!got) return fp4s_error_set(FP4S_EINVAL, "remedy device: NULL output");
    *got = FP4S_DEVICE_CPU;
    if (want == FP4S_DEVICE_CPU) return 0;
    if (want != FP4S_DEVICE_CUDA && want != FP4S_DEVICE_AUTO)
        return fp4s_error_set(FP4S_EINVAL, "remedy device: unknown device %d", (int)want);
    char why[400];
    if (fp4s_cu_rm_available(why, sizeof why)) {
        *got = FP4S_DEVICE_CUDA;
        return 0;
    }
    if (want == FP4S_DEVICE_AUTO) return 0;
    return fp4s_error_set(FP4S_ENOTSUP, "device cuda: %s", why);
}

int fp4s_remedy_eval(const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt, const float *X,
                     const float *Xt, size_t m, const float *W, size_t n, size_t k, const fp4s_remedy_eval_opts *o,
                     fp4s_remedy_site *site, fp4s_remedy_result *res)
{
    fp4s_device dev = FP4S_DEVICE_CPU;
    int rc = fp4s_remedy_device_resolve(o ? o->device : FP4S_DEVICE_CPU, &dev);
    if (rc) return rc;
    if (dev == FP4S_DEVICE_CPU) return rm_eval_on(NULL, r, nr, act, wt, X, Xt, m, W, n, k, o, site, res);
    rm_gpu g = {&fp4s_cu_rm_gpu, NULL, NULL, NULL};
    if ((rc = rm_gpu_open(&g))) return rc;
    rc = rm_eval_on(&g, r, nr, act, wt, X, Xt, m, W, n, k, o, site, res);
    rm_gpu_close(&g);
    return rc;
}
