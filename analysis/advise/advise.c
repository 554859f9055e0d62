/* What to do about a site (fp4scope/advise.h). */
#include <fp4scope/advise.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const trainer_names[] = {"bf16", "wfq", "w4a4"};

int fp4s_trainer_parse(const char *s, fp4s_trainer *t)
{
    for (int i = 0; i < 3; i++)
        if (s && strcasecmp(s, trainer_names[i]) == 0) {
            *t = (fp4s_trainer)i;
            return 0;
        }
    if (s && strcasecmp(s, "w4a4qat") == 0) {
        *t = FP4S_TRAINER_W4A4;
        return 0;
    }
    return fp4s_error_set(FP4S_EINVAL, "unknown trainer '%s' (bf16, wfq or w4a4)", s ? s : "");
}

const char *fp4s_trainer_name(fp4s_trainer t) { return (unsigned)t < 3 ? trainer_names[t] : NULL; }

/* ---- ranking ---------------------------------------------------------------------------- */
static const double *g_e2;
static int cmp_share(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    double ex = isnan(g_e2[x]) ? -1 : g_e2[x], ey = isnan(g_e2[y]) ? -1 : g_e2[y];
    if (ex != ey) return ex > ey ? -1 : 1;
    return (x > y) - (x < y);
}

int fp4s_rank_by_share(const double *err2, size_t n, size_t *order, double *share)
{
    if (n && (!err2 || !order)) return fp4s_error_set(FP4S_EINVAL, "rank by share: NULL argument");
    double tot = 0;
    for (size_t i = 0; i < n; i++) {
        order[i] = i;
        if (err2[i] > 0) tot += err2[i];
    }
    /* qsort with a file-scope key: a stable comparison on (err2, index) */
    g_e2 = err2;
    qsort(order, n, sizeof *order, cmp_share);
    g_e2 = NULL;
    if (share)
        for (size_t i = 0; i < n; i++) share[i] = tot > 0 ? (err2[i] > 0 ? err2[i] / tot : 0) : NAN;
    return 0;
}

/* ---- the dominant error ------------------------------------------------------------------- */
fp4s_error_source fp4s_error_dominant(fp4s_trainer t, double act_only, double weight_only, double input)
{
    double a = isfinite(act_only) ? act_only : 0, w = isfinite(weight_only) ? weight_only : 0,
           d = isfinite(input) ? input : 0;
    if (t == FP4S_TRAINER_W4A4) return FP4S_SRC_INPUT;
    if (t == FP4S_TRAINER_WFQ) w = 0; /* the trainer's weight is the rollout's */
    if (w >= a && w >= d) return FP4S_SRC_WEIGHT;
    return a >= d ? FP4S_SRC_ACTIVATION : FP4S_SRC_INPUT;
}

const char *fp4s_error_source_name(fp4s_error_source s)
{
    static const char *const n[] = {"weight", "activation", "input"};
    return (unsigned)s < 3 ? n[s] : NULL;
}

const char *fp4s_error_source_advice(fp4s_error_source s)
{
    switch (s) {
    case FP4S_SRC_WEIGHT:
        return "weight-dominated: align the trainer with the rollout's weight quantizer (asymmetric QAT, "
               "--trainer wfq) or keep this layer in higher precision; activation remedies (rac, mbs, of, keep) "
               "will not help much";
    case FP4S_SRC_ACTIVATION:
        return "activation-dominated: activation remedies (rac on the hot channels, mbs, of, keep) remove it";
    case FP4S_SRC_INPUT:
        return "input-dominated: the two engines' activations differ before quantizing and the quantizer "
               "amplifies it; no quantizer remedy removes it (align the engines' kernels, or keep the layer in "
               "higher precision)";
    }
    return NULL;
}

/* ---- the advice --------------------------------------------------------------------------- */
const char *fp4s_advice_kind_name(fp4s_advice_kind k)
{
    static const char *const n[] = {"keep", "remedy", "fp8", "bf16"};
    return (unsigned)k < 4 ? n[k] : NULL;
}

int fp4s_advise(const fp4s_advice_cand *c, size_t n, double target, double fp8_err, fp4s_advice *out)
{
    if (!out || (n && !c)) return fp4s_error_set(FP4S_EINVAL, "advise: NULL argument");
    if (isnan(target)) return fp4s_error_set(FP4S_EINVAL, "advise: the target is NaN");
    memset(out, 0, sizeof *out);
    out->cand = SIZE_MAX;
    size_t best = SIZE_MAX, low = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const fp4s_advice_cand *x = &c[i];
        if (!isfinite(x->err)) continue;
        if (x->plain && x->err <= target) { /* nothing to fix */
            out->kind = FP4S_ADVICE_KEEP;
            out->cand = i;
            out->err = x->err;
            out->vs_w4a4 = x->vs_w4a4;
            out->vs_fp8 = x->vs_fp8;
            out->vs_bf16 = x->vs_bf16;
            return 0;
        }
        if (!(x->vs_fp8 < 1)) {
            if (x->err <= target) out->slower_than_fp8++;
            continue;
        }
        if (low == SIZE_MAX || x->err < c[low].err) low = i;
        if (x->err > target) continue;
        if (best == SIZE_MAX || x->vs_w4a4 < c[best].vs_w4a4 ||
            (x->vs_w4a4 == c[best].vs_w4a4 && x->err < c[best].err))
            best = i;
    }
    if (best != SIZE_MAX) {
        out->kind = FP4S_ADVICE_REMEDY;
        out->cand = best;
        out->err = c[best].err;
        out->vs_w4a4 = c[best].vs_w4a4;
        out->vs_fp8 = c[best].vs_fp8;
        out->vs_bf16 = c[best].vs_bf16;
        return 0;
    }
    out->cand = low;
    if (isnan(fp8_err) || fp8_err <= target) {
        out->kind = FP4S_ADVICE_FP8;
        out->err = fp8_err;
        out->vs_fp8 = 1;
        out->vs_w4a4 = NAN;
        out->vs_bf16 = NAN;
    } else {
        out->kind = FP4S_ADVICE_BF16;
        out->err = NAN; /* the caller knows: 0 against a BF16 trainer */
        out->vs_bf16 = 1;
        out->vs_w4a4 = out->vs_fp8 = NAN;
    }
    return 0;
}
