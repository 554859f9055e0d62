/* fp4-compare (remedy.h): the output mismatch of a site against the
 * asymmetric-QAT trainer split exactly by error component and channel, and
 * the code and scale flips the rollout's activation difference causes. */
#include "remedy_internal.h"

#include <fp4scope/decompose.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const cmp_names[FP4S_CMP_COUNT] = {"input", "scale", "deadzone", "grid", "routing"};

const char *fp4s_cmp_component_name(fp4s_cmp_component c)
{
    return (unsigned)c < FP4S_CMP_COUNT ? cmp_names[c] : "?";
}

void fp4s_compare_opts_defaults(fp4s_compare_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dz_tie = FP4S_DZ_TIE_SPEC;
}

void fp4s_compare_site_free(fp4s_compare_site *s)
{
    if (!s) return;
    free(s->ch_input_rel_diff);
    free(s->ch_code_flips);
    free(s->ch_scale_flips);
    free(s->ch_amplification);
    free(s->ch_contrib);
    free(s->ch_energy);
    s->ch_input_rel_diff = s->ch_code_flips = s->ch_scale_flips = s->ch_amplification = NULL;
    s->ch_contrib = s->ch_energy = NULL;
}

/* Q*(x) of decompose.h for each entry of a row-major [m, k] array, blocks of
 * `block` along k: the ideal scale m_b/6, ties as the spec and dz_tie say.
 * Writes q* and whether the entry is in the dead zone. The arithmetic is the
 * decomposition's (24|x| against the midpoints times m_b, exact in double;
 * g m_b / 6 rounded once). */
static void qstar(const fp4s_spec *s, fp4s_dz_tie dz, const float *x, size_t m, size_t k, double *qs, uint8_t *dzm)
{
    bool up[7];
    for (int t = 0; t < 7; t++) {
        switch (s->tie) {
        case FP4S_TIE_ZERO: up[t] = false; break;
        case FP4S_TIE_AWAY: up[t] = true; break;
        default: up[t] = (t & 1) != 0; break;
        }
    }
    if (dz == FP4S_DZ_TIE_IN) up[0] = false;
    else if (dz == FP4S_DZ_TIE_OUT) up[0] = true;
    static const double mid4[7] = {1, 3, 5, 7, 10, 14, 20};
    const size_t B = s->block;
    for (size_t i = 0; i < m; i++)
        for (size_t c0 = 0; c0 < k; c0 += B) {
            const float *xb = x + i * k + c0;
            float mf = 0.0f;
            for (size_t j = 0; j < B; j++) mf = fmaxf(mf, fabsf(xb[j]));
            const double md = mf;
            const double d6 = md / 6.0, d15 = (1.5 * md) / 6.0;
            const double qtab[8] = {0.0, 0.5 * d6, d6, d15, 2.0 * d6, 2.0 * d15, 4.0 * d6, md};
            for (size_t j = 0; j < B; j++) {
                const double xv = xb[j], A = 24.0 * fabs(xv);
                int idx = 0;
                while (idx < 7 && A > mid4[idx] * md) idx++;
                bool tie = idx < 7 && A == mid4[idx] * md && mf != 0.0f;
                int code = idx + (tie && up[idx]);
                if (mf == 0.0f) code = 0;
                qs[i * k + c0 + j] = code == 0 ? 0.0 : copysign(qtab[code], xv);
                dzm[i * k + c0 + j] = code == 0;
            }
        }
}

static bool same_code(uint8_t a, uint8_t b) { return a == b || ((a & 7) == 0 && (b & 7) == 0); }

int fp4s_compare_eval(const fp4s_spec *act, const fp4s_spec *wt, const float *Xr, const float *Xt, size_t m,
                      const float *W, size_t n, size_t k, const fp4s_compare_opts *o, fp4s_compare_site *out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "compare: NULL argument");
    if (m == 0) {
        memset(out, 0, sizeof *out);
        return fp4s_error_set(FP4S_EEMPTY, "compare: empty site");
    }
    return fp4s_compare_eval_routed(act, wt, Xr, 0, Xt, 0, m, W, n, k, o, out);
}

int fp4s_compare_eval_routed(const fp4s_spec *act, const fp4s_spec *wt, const float *Xr, size_t r, const float *Xt,
                             size_t t, size_t m, const float *W, size_t n, size_t k, const fp4s_compare_opts *o,
                             fp4s_compare_site *out)
{
    if (!act || !wt || !Xr || !Xt || !W || !out) return fp4s_error_set(FP4S_EINVAL, "compare: NULL argument");
    memset(out, 0, sizeof *out);
    fp4s_compare_opts dflt;
    if (!o) {
        fp4s_compare_opts_defaults(&dflt);
        o = &dflt;
    }
    if (act->format != FP4S_MXFP4 && act->format != FP4S_NVFP4)
        return fp4s_error_set(FP4S_ENOTSUP, "compare: defined for MXFP4 and NVFP4 (got %s)",
                              fp4s_format_name(act->format));
    fp4s_remedy none;
    fp4s_remedy_defaults(&none);
    int rc = fp4s_remedy_check(&none, act, wt, k);
    if (rc) return rc;
    const size_t mr = m + r, mt = m + t, M = m + r + t;
    if (M == 0 || n == 0) return fp4s_error_set(FP4S_EEMPTY, "compare: empty site");
    if (mr && (rc = rm_check_finite("rollout activation", Xr, mr, k, k))) return rc;
    if (mt && (rc = rm_check_finite("trainer activation", Xt, mt, k, k))) return rc;
    if ((rc = rm_check_finite("weight", W, n, k, k))) return rc;
    out->m = m;
    out->n = n;
    out->k = k;
    out->rollout_only = r;
    out->trainer_only = t;
    const size_t nb = k / act->block, C = FP4S_CMP_COUNT;
    const size_t mrk = (mr ? mr : 1) * k, mtk = (mt ? mt : 1) * k, Mk = M * k;
    float *qr = malloc(mrk * sizeof *qr), *qt = malloc(mtk * sizeof *qt), *qw = malloc(n * k * sizeof *qw);
    uint8_t *cr = malloc(mrk), *ct = malloc(mtk), *sr = malloc((mr ? mr : 1) * nb), *st = malloc((mt ? mt : 1) * nb);
    uint8_t *dzm = malloc(mrk);
    double *qs = malloc(mrk * sizeof *qs), *d = malloc(Mk * sizeof *d), *qwd = malloc(n * k * sizeof *qwd);
    double *D = malloc(M * n * sizeof *D), *G = malloc(Mk * sizeof *G);
    out->ch_input_rel_diff = calloc(k, sizeof(double));
    out->ch_code_flips = calloc(k, sizeof(double));
    out->ch_scale_flips = calloc(k, sizeof(double));
    out->ch_amplification = calloc(k, sizeof(double));
    out->ch_contrib = calloc(k * C, sizeof(double));
    out->ch_energy = calloc(k * C, sizeof(double));
    double *dx2 = calloc(k, sizeof(double)), *xt2 = calloc(k, sizeof(double)), *dq2 = calloc(k, sizeof(double));
    if (!qr || !qt || !qw || !cr || !ct || !sr || !st || !dzm || !qs || !d || !qwd || !D || !G ||
        !out->ch_input_rel_diff || !out->ch_code_flips || !out->ch_scale_flips || !out->ch_amplification ||
        !out->ch_contrib || !out->ch_energy || !dx2 || !xt2 || !dq2) {
        rc = fp4s_error_set(FP4S_ENOMEM, "compare: out of memory for a [%zu x %zu] site", M, k);
        goto done;
    }
    /* each side quantized over all of its rows: one tensor scale, as its engine had them */
    fp4s_tscale tsr, tst;
    memset(&tsr, 0, sizeof tsr);
    memset(&tst, 0, sizeof tst);
    if (mr && (rc = rm_qdq(act, Xr, mr, k, k, NULL, qr, cr, sr, &tsr))) goto done;
    if (mt && (rc = rm_qdq(act, Xt, mt, k, k, NULL, qt, ct, st, &tst))) goto done;
    if ((rc = rm_qdq(wt, W, n, k, k, NULL, qw, NULL, NULL, NULL))) goto done;
    out->tscale_rel_diff = act->format == FP4S_NVFP4 && mr && mt && tst.s_dec != 0
                               ? fabs((double)tsr.s_dec / tst.s_dec - 1.0) : 0.0;
    if (m) qstar(act, o->dz_tie, Xr, m, k, qs, dzm);
    /* flips and norms over the pairs */
    double cf = 0, sf = 0, dxs = 0, xts = 0, dqs = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < k; j++) {
            size_t p = i * k + j;
            bool fc = !same_code(cr[p], ct[p]);
            bool fs = sr[i * nb + j / act->block] != st[i * nb + j / act->block];
            double dx = (double)Xr[p] - (double)Xt[p], dq = (double)qr[p] - (double)qt[p];
            out->ch_code_flips[j] += fc;
            out->ch_scale_flips[j] += fs;
            dx2[j] += dx * dx;
            xt2[j] += (double)Xt[p] * (double)Xt[p];
            dq2[j] += dq * dq;
        }
    for (size_t i = 0; i < m * nb; i++) sf += sr[i] != st[i];
    for (size_t j = 0; j < k; j++) {
        cf += out->ch_code_flips[j];
        dxs += dx2[j];
        xts += xt2[j];
        dqs += dq2[j];
        out->ch_code_flips[j] = m ? out->ch_code_flips[j] / (double)m : NAN;
        out->ch_scale_flips[j] = m ? out->ch_scale_flips[j] / (double)m : NAN;
        out->ch_input_rel_diff[j] = xt2[j] > 0 ? sqrt(dx2[j] / xt2[j]) : (dx2[j] > 0 ? INFINITY : m ? 0.0 : NAN);
        out->ch_amplification[j] = dx2[j] > 0 ? sqrt(dq2[j] / dx2[j]) : NAN;
    }
    out->code_flips = m ? cf / (double)(m * k) : NAN;
    out->scale_flips = m ? sf / (double)(m * nb) : NAN;
    out->input_rel_diff = xts > 0 ? sqrt(dxs / xts) : (dxs > 0 ? INFINITY : m ? 0.0 : NAN);
    out->amplification = dxs > 0 ? sqrt(dqs / dxs) : NAN;
    /* d: the pairs' Qa(X_r) - X_t, then Qa(x_r) of the rollout's own tokens, then -x_t of the trainer's */
    for (size_t i = 0; i < m * k; i++) d[i] = (double)qr[i] - (double)Xt[i];
    for (size_t i = 0; i < r * k; i++) d[m * k + i] = (double)qr[m * k + i];
    for (size_t i = 0; i < t * k; i++) d[(m + r) * k + i] = -(double)Xt[m * k + i];
    /* D = d Qw^T, G = D Qw, contributions */
    for (size_t i = 0; i < n * k; i++) qwd[i] = qw[i];
    double secs = 0;
    if ((rc = rm_dgemm(NULL, M, n, k, d, k, qwd, k, 0.0, D, n, &secs))) goto done;
    if ((rc = rm_dgemm_nn(M, k, n, D, n, qwd, k, G, k, &secs))) goto done;
    double m2 = 0;
    for (size_t i = 0; i < M * n; i++) m2 += D[i] * D[i];
    out->mismatch2 = m2;
    if (mt) {
        /* ||X_t Qw^T||^2 over every trainer row: the reference the mismatch is relative to */
        double *xtd = d; /* reuse d's storage once its products are done (M >= mt rows) */
        for (size_t i = 0; i < mt * k; i++) xtd[i] = Xt[i];
        if ((rc = rm_dgemm(NULL, mt, n, k, xtd, k, qwd, k, 0.0, D, n, &secs))) goto done;
        double r2 = 0;
        for (size_t i = 0; i < mt * n; i++) r2 += D[i] * D[i];
        out->ref2 = r2;
    }
    out->mismatch_rel = out->ref2 > 0 ? sqrt(m2 / out->ref2) : (m2 > 0 ? INFINITY : 0.0);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < k; j++) {
            size_t p = i * k + j;
            double comp[FP4S_CMP_COUNT] = {0};
            if (i < m) {
                comp[FP4S_CMP_INPUT] = (double)Xr[p] - (double)Xt[p];
                comp[FP4S_CMP_SCALE] = (double)qr[p] - qs[p];
                double rest = qs[p] - (double)Xr[p];
                comp[FP4S_CMP_DEADZONE] = dzm[p] ? rest : 0.0;
                comp[FP4S_CMP_GRID] = dzm[p] ? 0.0 : rest;
            } else {
                comp[FP4S_CMP_ROUTING] = i < m + r ? (double)qr[p] : -(double)Xt[(i - r) * k + j];
            }
            for (size_t c = 0; c < C; c++) {
                out->ch_contrib[j * C + c] += comp[c] * G[p];
                out->ch_energy[j * C + c] += comp[c] * comp[c];
            }
        }
    for (size_t j = 0; j < k; j++)
        for (size_t c = 0; c < C; c++) out->contrib[c] += out->ch_contrib[j * C + c];
done:
    free(qr);
    free(qt);
    free(qw);
    free(cr);
    free(ct);
    free(sr);
    free(st);
    free(dzm);
    free(qs);
    free(d);
    free(qwd);
    free(D);
    free(G);
    free(dx2);
    free(xt2);
    free(dq2);
    if (rc) fp4s_compare_site_free(out);
    return rc;
}
