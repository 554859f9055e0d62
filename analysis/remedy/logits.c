/* The logits path (remedy.h): the LM head under each remedy, per-token
 * log-probs against the trainer's, and fp4-mismatch's metrics on them. */
#include "remedy_internal.h"

#include <fp4scope/mismatch.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5_internal.h"

void fp4s_logits_opts_defaults(fp4s_logits_opts *o)
{
    memset(o, 0, sizeof *o);
    o->trainer = FP4S_RK_WFQ;
    fp4s_mm_opts_defaults(&o->mm);
}

/* log-prob of token tok and entropy of the softmax of one row of logits (double). */
static void row_stats(const double *y, size_t V, int64_t tok, double *lp, double *ent, size_t *amax)
{
    double m = -INFINITY;
    size_t am = 0;
    for (size_t v = 0; v < V; v++)
        if (y[v] > m) {
            m = y[v];
            am = v;
        }
    double z = 0, ey = 0;
    for (size_t v = 0; v < V; v++) {
        double e = exp(y[v] - m);
        z += e;
        ey += e * (y[v] - m);
    }
    double lz = log(z);
    *lp = y[tok] - m - lz;
    *ent = lz - ey / z;
    *amax = am;
}

int fp4s_remedy_logits(const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt, const float *Hr,
                       const float *Ht, size_t T, const float *W, size_t V, size_t d, const int64_t *token,
                       const int64_t *seq, const uint8_t *mask, const fp4s_logits_opts *o, fp4s_logits_result *res,
                       fp4s_mm_acc **acc)
{
    if (!r || !act || !wt || !Hr || !Ht || !W || !token || !seq || (nr && !res))
        return fp4s_error_set(FP4S_EINVAL, "logits: NULL argument");
    fp4s_logits_opts dflt;
    if (!o) {
        fp4s_logits_opts_defaults(&dflt);
        o = &dflt;
    }
    if (!fp4s_remedy_is_trainer(o->trainer))
        return fp4s_error_set(FP4S_EINVAL, "logits: the trainer must be bf16, wfq or w4a4qat");
    if (T == 0 || V == 0 || d == 0) return fp4s_error_set(FP4S_EEMPTY, "logits: empty input [%zu x %zu], V = %zu", T, d, V);
    for (size_t t = 0; t < T; t++)
        if (token[t] < 0 || (uint64_t)token[t] >= V)
            return fp4s_error_set(FP4S_ERANGE, "logits: token %lld of row %zu is outside the vocabulary [0, %zu)",
                                  (long long)token[t], t, V);
    for (size_t i = 0; i < nr; i++)
        if (fp4s_remedy_is_trainer(r[i].kind))
            return fp4s_error_set(FP4S_EINVAL, "logits: remedy '%s' is a trainer item (the trainer is the reference)",
                                  fp4s_remedy_label(&r[i]));
    fp4s_remedy tr;
    fp4s_remedy_defaults(&tr);
    tr.kind = o->trainer;
    int rc = fp4s_remedy_check(&tr, act, wt, d);
    if (rc) return rc;
    if ((rc = rm_check_finite("rollout hidden states", Hr, T, d, d))) return rc;
    if ((rc = rm_check_finite("trainer hidden states", Ht, T, d, d))) return rc;
    size_t TV = T * V;
    double *yt = malloc(TV * sizeof *yt), *yr = malloc(TV * sizeof *yr);
    double *lpt = malloc(T * sizeof *lpt), *lpr = malloc(T * sizeof *lpr), *et = malloc(T * sizeof *et);
    size_t *amt = malloc(T * sizeof *amt);
    float *y = malloc(TV * sizeof *y), *hq = malloc(T * d * sizeof *hq), *wq = malloc(V * d * sizeof *wq);
    double *hd = malloc(T * d * sizeof *hd), *wd = malloc(V * d * sizeof *wd);
    fp4s_mm_acc *a = NULL;
    if (!yt || !yr || !lpt || !lpr || !et || !amt || !y || !hq || !wq || !hd || !wd) {
        rc = fp4s_error_set(FP4S_ENOMEM, "logits: out of memory for [%zu x %zu] logits", T, V);
        goto done;
    }
    /* the trainer's logits, float64 */
    const float *hs = Ht, *ws = W;
    if (o->trainer == FP4S_RK_W4A4QAT) {
        if ((rc = rm_qdq(act, Ht, T, d, d, NULL, hq, NULL, NULL, NULL))) goto done;
        hs = hq;
    }
    if (o->trainer != FP4S_RK_BF16) {
        if ((rc = rm_qdq(wt, W, V, d, d, NULL, wq, NULL, NULL, NULL))) goto done;
        ws = wq;
    }
    for (size_t i = 0; i < T * d; i++) hd[i] = hs[i];
    for (size_t i = 0; i < V * d; i++) wd[i] = ws[i];
    if ((rc = rm_dgemm(NULL, T, V, d, hd, d, wd, d, 0.0, yt, V, NULL))) goto done;
    double yt2 = 0, yt2_base = 0;
    for (size_t i = 0; i < TV; i++) yt2_base += yt[i] * yt[i];
    for (size_t t = 0; t < T; t++) row_stats(yt + t * V, V, token[t], &lpt[t], &et[t], &amt[t]);
    bool aligned = false; /* yt holds the trainer aligned with a remedy's own weight */
    if ((rc = fp4s_mm_acc_open(&o->mm, &a))) goto done;
    for (size_t i = 0; i < nr; i++) {
        fp4s_logits_result *lr = &res[i];
        memset(lr, 0, sizeof *lr);
        lr->remedy = r[i];
        fp4s_rlinear *L = NULL;
        if ((rc = fp4s_rlinear_open(&r[i], act, wt, W, V, d, d, &L))) goto done;
        rc = fp4s_rlinear_forward(L, Hr, T, d, y, V, NULL);
        /* the aligned trainer: fake-quantizes with this remedy's weight operand; for an item that
         * rotates its operands (rht), on the trainer's hidden states rotated the same way (X_t R, and
         * Qa(X_t R) for w4a4qat), since the weight operand is Qw(W R) */
        const float *wr = fp4s_rlinear_weight(L);
        const fp4s_spec *rot = rc ? NULL : rm_rlinear_rht(L);
        bool own = !rc && o->trainer != FP4S_RK_BF16 && r[i].kind == FP4S_RK_ROLLOUT &&
                   (rot || memcmp(wr, ws, V * d * sizeof *wr) != 0);
        if (!rc && (own || aligned)) {
            const float *wuse = own ? wr : ws;
            for (size_t j = 0; j < V * d; j++) wd[j] = wuse[j];
            double *hrd = NULL;
            if (own && rot) {
                float *t1 = malloc(T * d * sizeof *t1);
                hrd = malloc(T * d * sizeof *hrd);
                if (!t1 || !hrd) rc = fp4s_error_set(FP4S_ENOMEM, "logits: out of memory");
                if (!rc) rc = fp4s_rht_apply(rot, Ht, T, d, d, t1, d);
                if (!rc && o->trainer == FP4S_RK_W4A4QAT) rc = rm_qdq(act, t1, T, d, d, NULL, hq, NULL, NULL, NULL);
                const float *src = o->trainer == FP4S_RK_W4A4QAT ? hq : t1;
                for (size_t j = 0; !rc && j < T * d; j++) hrd[j] = src[j];
                free(t1);
            }
            if (!rc) rc = rm_dgemm(NULL, T, V, d, hrd ? hrd : hd, d, wd, d, 0.0, yt, V, NULL);
            free(hrd);
            if (!rc)
                for (size_t t = 0; t < T; t++) row_stats(yt + t * V, V, token[t], &lpt[t], &et[t], &amt[t]);
            aligned = own;
        }
        fp4s_rlinear_close(&L);
        if (rc) goto done;
        yt2 = yt2_base;
        if (own) {
            yt2 = 0;
            for (size_t j = 0; j < TV; j++) yt2 += yt[j] * yt[j];
        }
        double e2 = 0, er = 0, etr = 0, flips = 0, counted = 0;
        for (size_t t = 0; t < T; t++) {
            double ent;
            size_t am;
            for (size_t v = 0; v < V; v++) {
                yr[t * V + v] = y[t * V + v];
                double dd = yr[t * V + v] - yt[t * V + v];
                e2 += dd * dd;
            }
            row_stats(yr + t * V, V, token[t], &lpr[t], &ent, &am);
            if (mask && !mask[t]) continue;
            counted++;
            er += ent;
            etr += et[t];
            flips += am != amt[t];
        }
        lr->entropy_rollout = counted ? er / counted : NAN;
        lr->entropy_trainer = counted ? etr / counted : NAN;
        lr->entropy_change = lr->entropy_rollout - lr->entropy_trainer;
        lr->argmax_flips = counted ? flips / counted : NAN;
        lr->logit_rel_error = yt2 > 0 ? sqrt(e2 / yt2) : NAN;
        fp4s_mm_acc_reset(a);
        if ((rc = fp4s_mm_acc_add(a, T, lpt, lpr, seq, mask, NULL))) goto done;
        if ((rc = fp4s_mm_acc_finish(a, &lr->mm))) goto done;
        if (acc && acc[i] && (rc = fp4s_mm_acc_add(acc[i], T, lpt, lpr, seq, mask, NULL))) goto done;
    }
done:
    fp4s_mm_acc_close(&a);
    free(yt);
    free(yr);
    free(lpt);
    free(lpr);
    free(et);
    free(amt);
    free(y);
    free(hq);
    free(wq);
    free(hd);
    free(wd);
    if (rc) fp4s_error_prefix("logits");
    return rc;
}

int fp4s_remedy_lm_head_site(const char *capture, char *buf, size_t n)
{
    if (!capture || !buf || n == 0) return fp4s_error_set(FP4S_EINVAL, "lm_head_site: NULL argument");
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    hid_t f = fp4s_h5_open_read(capture, &rc);
    if (f >= 0) {
        int got = fp4s_h5_attr_get_str(f, "lm_head_site", buf, n);
        if (got < 0) rc = fp4s_error_set(FP4S_EFORMAT, "%s: root attribute lm_head_site is not a string", capture);
        else if (got == 0) snprintf(buf, n, "%s", "lm_head");
        H5Fclose(f);
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

/* A 1-D dataset of the logprobs group, converted to mem_type: its length in *n. */
static int read_1d(hid_t f, const char *file, const char *path, hid_t mem_type, size_t esize, void **out, size_t *n,
                   bool optional)
{
    *out = NULL;
    if (!fp4s_h5_path_exists(f, path)) {
        if (optional) return 0;
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: not found", file, path);
    }
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open: %s", file, path, fp4s_h5_msg());
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int rank = H5Sget_simple_extent_ndims(sp);
    int rc = 0;
    if (rank != 1) {
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: rank %d, expected 1", file, path, rank);
    } else {
        H5Sget_simple_extent_dims(sp, dims, NULL);
        *out = malloc(dims[0] ? dims[0] * esize : 1);
        if (!*out) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", file);
        else if (dims[0] && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0)
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot read: %s", file, path, fp4s_h5_msg());
        *n = (size_t)dims[0];
    }
    H5Sclose(sp);
    H5Dclose(d);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int fp4s_remedy_read_tokens(const char *capture, int64_t step, int64_t **token, int64_t **seq, uint8_t **mask,
                            size_t *n)
{
    if (!capture || !token || !seq || !mask || !n) return fp4s_error_set(FP4S_EINVAL, "read tokens: NULL argument");
    *token = NULL;
    *seq = NULL;
    *mask = NULL;
    *n = 0;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    hid_t f = fp4s_h5_open_read(capture, &rc);
    if (f < 0) goto out;
    char p[128];
    size_t nt = 0, ns = 0, nm = 0, nl = 0;
    void *lp = NULL;
    snprintf(p, sizeof p, "/steps/%lld/logprobs/token", (long long)step);
    rc = read_1d(f, capture, p, H5T_NATIVE_INT64, 8, (void **)token, &nt, false);
    snprintf(p, sizeof p, "/steps/%lld/logprobs/seq", (long long)step);
    if (!rc) rc = read_1d(f, capture, p, H5T_NATIVE_INT64, 8, (void **)seq, &ns, false);
    snprintf(p, sizeof p, "/steps/%lld/logprobs/mask", (long long)step);
    if (!rc) rc = read_1d(f, capture, p, H5T_NATIVE_UINT8, 1, (void **)mask, &nm, true);
    snprintf(p, sizeof p, "/steps/%lld/logprobs/trainer", (long long)step);
    if (!rc) rc = read_1d(f, capture, p, H5T_NATIVE_FLOAT, 4, &lp, &nl, false);
    free(lp);
    if (!rc && (nt != nl || ns != nl || (*mask && nm != nl)))
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: /steps/%lld/logprobs: token (%zu), seq (%zu)%s and trainer (%zu) "
                            "differ in length", capture, (long long)step, nt, ns, *mask ? " , mask" : "", nl);
    H5Fclose(f);
    if (!rc) *n = nt;
out:
    fp4s_h5_quiet_end(&q);
    if (rc) {
        free(*token);
        free(*seq);
        free(*mask);
        *token = *seq = NULL;
        *mask = NULL;
    }
    return rc;
}
