/* The remedy items and components as rows (fp4-remedy(1), "The remedy
 * list", is the grammar; remedy.h the arithmetic). A kind row is an item
 * alone (none, the trainers, bf16-rollout); a component row says everything
 * the library decides about one component: its name and parameters, its
 * defaults, whether a remedy has it (fp4s_remedy_is_plain asks every row),
 * its checks against the quantizers and K, its canonical text, the options
 * it sets on an operand's quantizer and what it adds to the cost.
 *
 * The files a new remedy component touches (read off the code):
 *   lib/include/fp4scope/remedy.h  its parameters in fp4s_remedy (taken from
 *                                  reserved[]) and its arithmetic in the
 *                                  header's comment;
 *   analysis/remedy/component.c    its row;
 *   analysis/remedy/operand.c or linear.c  its arithmetic, at the stage of the
 *                                  order of application (none for a component
 *                                  that only sets quantizer options: sr, 4over6);
 *   man/fp4-remedy.1               its paragraph in "The remedy list".
 * The rest reads the rows: the parser and its messages, --list-remedies,
 * the canonical text, is-plain (and so --plan's and the report's "none"),
 * fp4s_remedy_check, the quantizer options and the cost. */
#include "remedy_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters -------------------------------------------------------------------- */
static bool parse_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(d)) return false;
    *v = d;
    return true;
}

static bool parse_u64(const char *s, uint64_t *v)
{
    if (!*s || *s == '-' || *s == '+') return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return false;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return false;
    *v = (uint64_t)u;
    return true;
}

static bool is_uint(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

int rm_bad(const char *item, const char *fmt, const char *a, int code)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    return fp4s_error_set(code, "remedy '%s': %s", item, msg);
}

/* ---- rac, rac-rand ------------------------------------------------------------------ */
static int rac_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    const char *name = f[0];
    bool rnd = !strcmp(name, "rac-rand");
    if (nf < 2) return rm_bad(item, "'%s' needs the channel ratio R in (0, 1] (e.g. rac:0.25)", name, FP4S_EINVAL);
    double v;
    if (!parse_double(f[1], &v)) return rm_bad(item, "R: expected a number in (0, 1], got '%s'", f[1], FP4S_EINVAL);
    if (!(v > 0.0 && v <= 1.0)) return rm_bad(item, "R must be in (0, 1], got %s", f[1], FP4S_ERANGE);
    r->rac_ratio = v;
    r->rac_random = rnd;
    bool have_resid = false, have_seed = false;
    for (size_t i = 2; i < nf; i++) {
        if (!strcmp(f[i], "bf16") || !strcmp(f[i], "fp4") || !strcmp(f[i], "aug")) {
            if (have_resid) return rm_bad(item, "RESID given twice ('%s')", f[i], FP4S_EINVAL);
            have_resid = true;
            r->rac_resid = !strcmp(f[i], "bf16") ? FP4S_RAC_BF16 : !strcmp(f[i], "aug") ? FP4S_RAC_AUG : FP4S_RAC_FP4;
        } else if (rnd && is_uint(f[i])) {
            if (have_seed) return rm_bad(item, "SEED given twice ('%s')", f[i], FP4S_EINVAL);
            if (!parse_u64(f[i], &r->rac_seed))
                return rm_bad(item, "SEED must be an integer in [0, 2^64 - 1], got '%s'", f[i], FP4S_ERANGE);
            have_seed = true;
        } else {
            return rm_bad(item, rnd ? "expected RESID (bf16, fp4 or aug) or SEED (an integer), got '%s'"
                                    : "expected RESID bf16, fp4 or aug, got '%s'", f[i], FP4S_EINVAL);
        }
    }
    return 0;
}
static void rac_defaults(fp4s_remedy *r)
{
    r->rac_resid = FP4S_RAC_FP4;
    r->rac_seed = 1;
}
static bool rac_present(const fp4s_remedy *r) { return r->rac_ratio != 0 && !r->rac_random; }
static bool racr_present(const fp4s_remedy *r) { return r->rac_ratio != 0 && r->rac_random; }
static const char *resid_name(fp4s_rac_resid r)
{
    return r == FP4S_RAC_BF16 ? "bf16" : r == FP4S_RAC_AUG ? "aug" : "fp4";
}
static int rac_describe(const fp4s_remedy *r, char *b, size_t n)
{
    if (!r->rac_random) return snprintf(b, n, "rac:%.17g:%s", r->rac_ratio, resid_name(r->rac_resid));
    return snprintf(b, n, "rac-rand:%.17g:%s:%llu", r->rac_ratio, resid_name(r->rac_resid),
                    (unsigned long long)r->rac_seed);
}
static int rac_check(const rm_check_in *c)
{
    const fp4s_remedy *r = c->r;
    if (!(r->rac_ratio > 0 && r->rac_ratio <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': R must be in (0, 1], got %g", c->lab, r->rac_ratio);
    return 0;
}
static void rac_cost(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c)
{
    if (!in->sel) return;
    double M = in->M, N = in->N, K = in->K, S = (double)in->sel, P = (double)in->pad, T = (double)in->tiles;
    if (r->rac_resid == FP4S_RAC_BF16) {
        c->flops_bf16 += 2.0 * M * N * S;
        c->bytes += 2.0 * M * S + T * 2.0 * N * S + 4.0 * S * T;
        c->act_bits += 16.0 * S / K;
    } else {
        double wt = r->rac_resid == FP4S_RAC_FP4 ? in->tw : 1.0;
        c->flops_fp4 += 2.0 * M * N * P * wt;
        c->bytes += M * P * in->ab / 8.0 + T * N * P * in->wb / 8.0 * wt + 4.0 * S * T;
        c->act_bits += in->ab * P / K;
    }
}

/* ---- mbs ---------------------------------------------------------------------------- */
static int mbs_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    if (nf < 2) return rm_bad(item, "'%s' needs the macro-block size G (e.g. mbs:128)", f[0], FP4S_EINVAL);
    uint64_t g;
    if (!parse_u64(f[1], &g)) return rm_bad(item, "G: expected a positive integer, got '%s'", f[1], FP4S_EINVAL);
    if (g < 1 || g > (1u << 20)) return rm_bad(item, "G must be in [1, 1048576], got %s", f[1], FP4S_ERANGE);
    r->mbs_group = (uint32_t)g;
    if (nf > 3) return rm_bad(item, "mbs takes G and RULE only, got '%s' too", f[3], FP4S_EINVAL);
    if (nf == 3) {
        if (!strcmp(f[2], "max")) r->mbs_rule = FP4S_MBS_MAX;
        else if (!strcmp(f[2], "mse")) r->mbs_rule = FP4S_MBS_MSE;
        else return rm_bad(item, "RULE: expected max or mse, got '%s'", f[2], FP4S_EINVAL);
    }
    return 0;
}
static void mbs_defaults(fp4s_remedy *r) { r->mbs_rule = FP4S_MBS_AUTO; }
static bool mbs_present(const fp4s_remedy *r) { return r->mbs_group != 0; }
static int mbs_describe(const fp4s_remedy *r, char *b, size_t n)
{
    if (r->mbs_rule == FP4S_MBS_AUTO) return snprintf(b, n, "mbs:%u", r->mbs_group);
    return snprintf(b, n, "mbs:%u:%s", r->mbs_group, r->mbs_rule == FP4S_MBS_MAX ? "max" : "mse");
}
static int mbs_check(const rm_check_in *c)
{
    const fp4s_remedy *r = c->r;
    const fp4s_spec *ss[2] = {c->act, c->wt};
    bool on[2] = {c->on_act, c->on_w};
    for (int i = 0; i < 2; i++) {
        if (!on[i]) continue;
        if (r->mbs_group % ss[i]->block)
            return fp4s_error_set(FP4S_ERANGE, "remedy '%s': G = %u must be a multiple of the %s block size %u",
                                  c->lab, r->mbs_group, i ? "weight" : "activation", ss[i]->block);
        fp4s_mbs_rule rule = r->mbs_rule;
        if (rule == FP4S_MBS_AUTO) rule = ss[i]->format == FP4S_MXFP4 ? FP4S_MBS_MAX : FP4S_MBS_MSE;
        if (rule == FP4S_MBS_MAX) {
            if (ss[i]->format != FP4S_MXFP4)
                return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': mbs max needs power-of-two block scales "
                                      "(MXFP4); use mbs:%u:mse for %s", c->lab, r->mbs_group,
                                      fp4s_format_name(ss[i]->format));
            /* the rule must put a block of amax 6 * 2^k (and just below) at scale 2^k */
            if (fp4s_mx_scale_code(ss[i], 6.0f) != 127 || fp4s_mx_scale_code(ss[i], 6.0f * (255.0f / 256)) != 127)
                return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': mbs max needs a scale rule that gives a block "
                                      "with amax 6*2^k the scale 2^k; %s does not (use mbs:%u:mse)", c->lab,
                                      fp4s_mx_rule_name(ss[i]->mx_rule), r->mbs_group);
        }
    }
    return 0;
}
/* bits of the per-unit factor: 8 (max) or 4 (mse) */
static double mbs_bits(const fp4s_remedy *r, const fp4s_spec *s)
{
    fp4s_mbs_rule rule = r->mbs_rule;
    if (rule == FP4S_MBS_AUTO) rule = s->format == FP4S_MXFP4 ? FP4S_MBS_MAX : FP4S_MBS_MSE;
    return rule == FP4S_MBS_MAX ? 8.0 : 4.0;
}
static void mbs_cost(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c)
{
    double M = in->M, N = in->N, K = in->K, g = r->mbs_group, units = ceil(K / g), tx = in->tx, tw = in->tw;
    if (rm_on_act(r)) {
        double b = mbs_bits(r, in->as) / g * tx;
        c->act_bits += b;
        c->bytes += M * K * b / 8.0;
        c->flops_fp32 += 2.0 * M * N * units * tx * tw;
    }
    if (rm_on_weight(r)) {
        double b = mbs_bits(r, in->ws) / (g * (in->ws->tile2d ? 16.0 : 1.0)) * tw;
        c->weight_bits += b;
        c->bytes += N * K * b / 8.0;
        c->flops_fp32 += 2.0 * M * N * units * tx * tw;
    }
}

/* ---- of ------------------------------------------------------------------------------ */
static int of_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    r->of = true;
    if (nf > 2) return rm_bad(item, "of takes ALPHA only, got '%s' too", f[2], FP4S_EINVAL);
    if (nf == 2) {
        double v;
        if (!parse_double(f[1], &v))
            return rm_bad(item, "ALPHA: expected a number in [0, 1], got '%s'", f[1], FP4S_EINVAL);
        if (!(v >= 0.0 && v <= 1.0)) return rm_bad(item, "ALPHA must be in [0, 1], got %s", f[1], FP4S_ERANGE);
        r->of_alpha = v;
    }
    return 0;
}
static void of_defaults(fp4s_remedy *r) { r->of_alpha = 0.5; }
static bool of_present(const fp4s_remedy *r) { return r->of; }
static int of_describe(const fp4s_remedy *r, char *b, size_t n) { return snprintf(b, n, "of:%.17g", r->of_alpha); }
static int of_check(const rm_check_in *c)
{
    if (!(c->r->of_alpha >= 0 && c->r->of_alpha <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': ALPHA must be in [0, 1], got %g", c->lab, c->r->of_alpha);
    return 0;
}

/* ---- keep ---------------------------------------------------------------------------- */
static int keep_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    if (nf != 2) return rm_bad(item, "'%s' needs K, the entries kept per block (e.g. keep:1)", f[0], FP4S_EINVAL);
    uint64_t k;
    if (!parse_u64(f[1], &k)) return rm_bad(item, "K: expected a positive integer, got '%s'", f[1], FP4S_EINVAL);
    if (k < 1 || k > 255) return rm_bad(item, "K must be in [1, block size - 1], got %s", f[1], FP4S_ERANGE);
    r->keep = (uint32_t)k;
    return 0;
}
static bool keep_present(const fp4s_remedy *r) { return r->keep != 0; }
static int keep_describe(const fp4s_remedy *r, char *b, size_t n) { return snprintf(b, n, "keep:%u", r->keep); }
static int keep_check(const rm_check_in *c)
{
    const fp4s_remedy *r = c->r;
    if (c->on_act && r->keep >= c->act->block)
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': K must be in [1, %u] for the activation block of %u",
                              c->lab, c->act->block - 1, c->act->block);
    if (c->on_w && r->keep >= c->wt->block)
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': K must be in [1, %u] for the weight block of %u", c->lab,
                              c->wt->block - 1, c->wt->block);
    return 0;
}
static unsigned log2_ceil(unsigned v)
{
    unsigned b = 0;
    while ((1u << b) < v) b++;
    return b;
}
static void keep_cost(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c)
{
    if (rm_on_act(r)) c->act_bits += r->keep * (16.0 + log2_ceil(in->as->block)) / in->as->block;
    if (rm_on_weight(r)) c->weight_bits += r->keep * (16.0 + log2_ceil(in->ws->block)) / in->ws->block;
    c->bytes += (in->kept_a + in->kept_w) * 3.0;
    c->flops_bf16 += 2.0 * in->N * in->kept_a + 2.0 * in->M * in->kept_w;
}

/* ---- aqn ----------------------------------------------------------------------------- */
static int aqn_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    if (nf < 2) return rm_bad(item, "'%s' needs SIGMA in [0, 1] (e.g. aqn:0.01)", f[0], FP4S_EINVAL);
    double v;
    if (!parse_double(f[1], &v)) return rm_bad(item, "SIGMA: expected a number in [0, 1], got '%s'", f[1], FP4S_EINVAL);
    if (!(v >= 0.0 && v <= 1.0)) return rm_bad(item, "SIGMA must be in [0, 1], got %s", f[1], FP4S_ERANGE);
    r->aqn = true;
    r->aqn_sigma = v;
    bool have_seed = false, have_target = false;
    for (size_t i = 2; i < nf; i++) {
        if (is_uint(f[i])) {
            if (have_seed) return rm_bad(item, "SEED given twice ('%s')", f[i], FP4S_EINVAL);
            if (!parse_u64(f[i], &r->aqn_seed))
                return rm_bad(item, "SEED must be an integer in [0, 2^64 - 1], got '%s'", f[i], FP4S_ERANGE);
            have_seed = true;
        } else if (!strcmp(f[i], "gain") || !strcmp(f[i], "weight") || !strcmp(f[i], "elem")) {
            if (have_target) return rm_bad(item, "TARGET given twice ('%s')", f[i], FP4S_EINVAL);
            have_target = true;
            r->aqn_target = !strcmp(f[i], "gain") ? FP4S_AQN_GAIN : !strcmp(f[i], "weight") ? FP4S_AQN_WEIGHT
                          : FP4S_AQN_ELEM;
        } else {
            return rm_bad(item, "expected SEED (an integer) or TARGET (gain, weight or elem), got '%s'", f[i],
                          FP4S_EINVAL);
        }
    }
    return 0;
}
static void aqn_defaults(fp4s_remedy *r)
{
    r->aqn_seed = 1;
    r->aqn_target = FP4S_AQN_GAIN;
}
static bool aqn_present(const fp4s_remedy *r) { return r->aqn; }
static int aqn_describe(const fp4s_remedy *r, char *b, size_t n)
{
    return snprintf(b, n, "aqn:%.17g:%llu:%s", r->aqn_sigma, (unsigned long long)r->aqn_seed,
                    r->aqn_target == FP4S_AQN_WEIGHT ? "weight" : r->aqn_target == FP4S_AQN_ELEM ? "elem" : "gain");
}
static int aqn_check(const rm_check_in *c)
{
    if (!(c->r->aqn_sigma >= 0 && c->r->aqn_sigma <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': SIGMA must be in [0, 1], got %g", c->lab, c->r->aqn_sigma);
    return 0;
}

/* ---- 4over6 -------------------------------------------------------------------------- */
static int e46_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    r->e4over6 = true;
    bool have_err = false, have_bound = false;
    for (size_t i = 1; i < nf; i++) {
        if (!strcmp(f[i], "mae") || !strcmp(f[i], "mse")) {
            if (have_err) return rm_bad(item, "the error mode given twice ('%s')", f[i], FP4S_EINVAL);
            have_err = true;
            r->e4over6_err = !strcmp(f[i], "mse") ? FP4S_4OVER6_MSE : FP4S_4OVER6_MAE;
        } else if (!strcmp(f[i], "256") || !strcmp(f[i], "448")) {
            if (have_bound) return rm_bad(item, "the bound given twice ('%s')", f[i], FP4S_EINVAL);
            have_bound = true;
            r->e4over6_bound = !strcmp(f[i], "448") ? 448 : 0;
        } else {
            return rm_bad(item, "4over6: expected mae, mse, 256 or 448, got '%s'", f[i], FP4S_EINVAL);
        }
    }
    return 0;
}
static void e46_defaults(fp4s_remedy *r) { r->e4over6_err = FP4S_4OVER6_MAE; }
static bool e46_present(const fp4s_remedy *r) { return r->e4over6; }
static int e46_describe(const fp4s_remedy *r, char *b, size_t n)
{
    return snprintf(b, n, "4over6:%s:%u", r->e4over6_err == FP4S_4OVER6_MSE ? "mse" : "mae",
                    r->e4over6_bound == 448 ? 448u : 256u);
}
static int e46_check(const rm_check_in *c)
{
    const fp4s_spec *ss[2] = {c->act, c->wt};
    bool on[2] = {c->on_act, c->on_w};
    for (int i = 0; i < 2; i++)
        if (on[i] && !(ss[i]->format == FP4S_NVFP4 &&
                       (ss[i]->nv_recipe == FP4S_NV_TE || ss[i]->nv_recipe == FP4S_NV_TE_4OVER6)))
            return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': 4over6 is TransformerEngine's NVFP4 block "
                                  "scaling: the %s quantizer must be NVFP4 with the te recipe", c->lab,
                                  i ? "weight" : "activation");
    if (c->r->sr) return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': sr with 4over6 is not defined", c->lab);
    if (c->r->e4over6_bound && c->r->e4over6_bound != 448)
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': the 4over6 bound must be 256 or 448", c->lab);
    return 0;
}
static void e46_spec(const fp4s_remedy *r, fp4s_spec *s, int operand)
{
    (void)operand;
    s->nv_recipe = FP4S_NV_TE_4OVER6;
    s->nv_4over6_err = r->e4over6_err;
    s->nv_scale_bound = r->e4over6_bound;
    s->tie = FP4S_TIE_EVEN;
}

/* ---- rht ----------------------------------------------------------------------------- */
static int rht_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    r->rht = true;
    if (nf > 2) return rm_bad(item, "rht takes SIGNS only, got '%s' too", f[2], FP4S_EINVAL);
    if (nf == 2) {
        if (!strcmp(f[1], "te")) r->rht_signs = FP4S_RHT_TE_SIGNS;
        else if (!strcmp(f[1], "none")) r->rht_signs = 0;
        else {
            char *end;
            errno = 0;
            unsigned long v = strtoul(f[1], &end, 16);
            if (strncmp(f[1], "0x", 2) || end == f[1] + 2 || *end || errno)
                return rm_bad(item, "SIGNS: expected te, none or a 16-bit mask 0xHHHH, got '%s'", f[1], FP4S_EINVAL);
            if (v > 0xFFFF) return rm_bad(item, "SIGNS must fit 16 bits, got %s", f[1], FP4S_ERANGE);
            r->rht_signs = (uint16_t)v;
        }
    }
    return 0;
}
static void rht_defaults(fp4s_remedy *r) { r->rht_signs = FP4S_RHT_TE_SIGNS; }
static bool rht_present(const fp4s_remedy *r) { return r->rht; }
static int rht_describe(const fp4s_remedy *r, char *b, size_t n) { return snprintf(b, n, "rht:0x%04x", r->rht_signs); }
static int rht_check(const rm_check_in *c)
{
    if (c->k % 16)
        return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': the RHT needs K a multiple of 16, got %zu", c->lab, c->k);
    return 0;
}
static void rht_cost(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c)
{
    (void)r;
    c->flops_bf16 += 32.0 * in->M * in->K; /* the activation's 16 x 16 transform (the weight's once per sync) */
}

/* ---- sr ------------------------------------------------------------------------------ */
static int sr_parse(const char *item, char **f, size_t nf, fp4s_remedy *r)
{
    r->sr = true;
    if (nf > 2) return rm_bad(item, "sr takes SEED only, got '%s' too", f[2], FP4S_EINVAL);
    if (nf == 2) {
        uint64_t v;
        if (!parse_u64(f[1], &v)) return rm_bad(item, "SEED: expected an integer, got '%s'", f[1], FP4S_EINVAL);
        if (v > 0xFFFFFFFFull) return rm_bad(item, "SEED must be in [0, 2^32 - 1], got %s", f[1], FP4S_ERANGE);
        r->sr_seed = (uint32_t)v;
    }
    return 0;
}
static void sr_defaults(fp4s_remedy *r)
{
    r->sr_seed = 1;
    r->sr_seeds = 8;
}
static bool sr_present(const fp4s_remedy *r) { return r->sr; }
static int sr_describe(const fp4s_remedy *r, char *b, size_t n) { return snprintf(b, n, "sr:%u", r->sr_seed); }
static int sr_check(const rm_check_in *c)
{
    const fp4s_remedy *r = c->r;
    if ((c->on_act && c->act->format == FP4S_NVFP4 && c->act->nv_recipe == FP4S_NV_GGML) ||
        (c->on_w && c->wt->format == FP4S_NVFP4 && c->wt->nv_recipe == FP4S_NV_GGML))
        return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': stochastic rounding needs a recipe that scales the "
                              "elements (ggml searches its levels)", c->lab);
    if (r->sr_seeds == 0) return fp4s_error_set(FP4S_ERANGE, "remedy '%s': sr_seeds must be at least 1", c->lab);
    return 0;
}
static void sr_spec(const fp4s_remedy *r, fp4s_spec *s, int operand)
{
    s->sr = true;
    s->sr_seed = r->sr_seed + (uint32_t)operand * 0x9E3779B9u; /* another stream for the weight */
}

/* ---- the tables ---------------------------------------------------------------------- */
/* The items alone, in the order messages list them. */
static const rm_kind_row kinds[] = {
    {"none", FP4S_RK_ROLLOUT, RM_GROUP_ROLLOUT, "Qa(X) Qw(W)^T     naive W4A4"},
    {"bf16", FP4S_RK_BF16, RM_GROUP_TRAINER, "X W^T"},
    {"wfq", FP4S_RK_WFQ, RM_GROUP_TRAINER, "X Qw(W)^T         asymmetric QAT (QUADS)"},
    {"w4a4qat", FP4S_RK_W4A4QAT, RM_GROUP_TRAINER, "Qa(X) Qw(W)^T     symmetric QAT"},
    {"bf16-rollout", FP4S_RK_BF16_ROLLOUT, RM_GROUP_ROLLOUT, "X W^T             the site kept in BF16"},
};

/* The components, in the order messages and --list-remedies list them;
 * .canon orders the canonical text (and the cost's sums), .stage is the
 * order of application (fp4-remedy(1), "The remedy list"). */
static const rm_comp comps[] = {
    {.name = "rac", .defaults = rac_defaults, .usage = "rac:R[:RESID]", .group = RM_GROUP_ROLLOUT, .excl = 1u << 0, .canon = 7, .stage = 6,
     .help = "residual compensation of ceil(R K) channels, R in (0, 1],\n"
             "                       RESID fp4 (default), bf16 or aug",
     .parse = rac_parse, .present = rac_present, .describe = rac_describe, .check = rac_check, .cost = rac_cost},
    {.name = "rac-rand", .defaults = rac_defaults, .usage = "rac-rand:R[:RESID][:SEED]", .group = RM_GROUP_ROLLOUT, .excl = 1u << 0,
     .canon = 7, .stage = 6, .help = "the same with random channels (SEED default 1)",
     .parse = rac_parse, .present = racr_present, .describe = rac_describe, .check = rac_check, .cost = rac_cost},
    {.name = "mbs", .defaults = mbs_defaults, .usage = "mbs:G[:max|mse]", .group = RM_GROUP_ROLLOUT, .excl = 1u << 1, .canon = 1, .stage = 3,
     .help = "macro-block scaling, one extra scale per G elements (G a\n"
             "                       multiple of the block; max for MXFP4, mse for NVFP4 by default)",
     .parse = mbs_parse, .present = mbs_present, .describe = mbs_describe, .check = mbs_check, .cost = mbs_cost},
    {.name = "of", .defaults = of_defaults, .usage = "of[:ALPHA]", .group = RM_GROUP_ROLLOUT, .excl = 1u << 2, .canon = 3, .stage = 5,
     .help = "outlier fallback Q(x) + ALPHA Q(x - Q(x)), ALPHA in [0, 1] (0.5)",
     .parse = of_parse, .present = of_present, .describe = of_describe, .check = of_check},
    {.name = "keep", .usage = "keep:K", .group = RM_GROUP_ROLLOUT, .excl = 1u << 3, .canon = 2, .stage = 2,
     .help = "the K largest |x| per block kept in BF16, K in [1, block - 1]",
     .parse = keep_parse, .present = keep_present, .describe = keep_describe, .check = keep_check,
     .cost = keep_cost},
    {.name = "aqn", .defaults = aqn_defaults, .usage = "aqn:SIGMA[:SEED][:TARGET]", .group = RM_GROUP_ROLLOUT, .excl = 1u << 4, .canon = 0,
     .stage = 0, .help = "channel-wise Gaussian noise before quantizing, SIGMA in\n"
                         "                       [0, 1], TARGET gain (default), weight or elem",
     .parse = aqn_parse, .present = aqn_present, .describe = aqn_describe, .check = aqn_check},
    {.name = "4over6", .defaults = e46_defaults, .usage = "4over6[:mae|mse][:256|448]", .group = RM_GROUP_ENGINE, .excl = 1u << 5, .canon = 5,
     .stage = 4, .help = "NVFP4 te 4over6 block scaling",
     .parse = e46_parse, .present = e46_present, .describe = e46_describe, .check = e46_check, .spec = e46_spec},
    {.name = "rht", .defaults = rht_defaults, .usage = "rht[:te|none|0xHHHH]", .group = RM_GROUP_ENGINE, .excl = 1u << 6, .canon = 4,
     .stage = 1, .help = "the 16-point random Hadamard transform of both operands along K",
     .parse = rht_parse, .present = rht_present, .describe = rht_describe, .check = rht_check, .cost = rht_cost},
    {.name = "sr", .defaults = sr_defaults, .usage = "sr[:SEED]", .group = RM_GROUP_ENGINE, .excl = 1u << 7, .canon = 6, .stage = 4,
     .help = "stochastic rounding of the elements (the bias over --sr-seeds seeds)",
     .parse = sr_parse, .present = sr_present, .describe = sr_describe, .check = sr_check, .spec = sr_spec},
};
#define NCOMP (sizeof comps / sizeof comps[0])

const rm_kind_row *rm_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}

const rm_comp *rm_comps(size_t *n)
{
    *n = NCOMP;
    return comps;
}

/* The components in canonical order (indexes into comps). */
static void canon_order(size_t *idx)
{
    size_t k = 0;
    for (int c = 0; k < NCOMP; c++)
        for (size_t i = 0; i < NCOMP; i++)
            if (comps[i].canon == c) idx[k++] = i;
}

void fp4s_remedy_defaults(fp4s_remedy *r)
{
    memset(r, 0, sizeof *r);
    r->kind = FP4S_RK_ROLLOUT;
    r->rac_order = FP4S_RAC_ORDER_INDEX;
    r->operands = FP4S_OPERANDS_BOTH;
    for (size_t i = 0; i < NCOMP; i++)
        if (comps[i].defaults) comps[i].defaults(r);
}

bool rm_has_component(const fp4s_remedy *r)
{
    for (size_t i = 0; i < NCOMP; i++)
        if (comps[i].present(r)) return true;
    return false;
}

bool fp4s_remedy_is_plain(const fp4s_remedy *r)
{
    return r && r->kind == FP4S_RK_ROLLOUT && !rm_has_component(r);
}

size_t rm_known(char *buf, size_t n)
{
    size_t len = 0;
#define PUT(...) len += (size_t)snprintf(buf + len, n > len ? n - len : 0, __VA_ARGS__)
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) PUT("%s%s", i ? ", " : "", kinds[i].name);
    for (size_t i = 0; i < NCOMP; i++) PUT(", %s", comps[i].usage);
#undef PUT
    return len;
}

size_t rm_describe_components(const fp4s_remedy *r, char *buf, size_t n)
{
    size_t idx[NCOMP], len = 0;
    canon_order(idx);
    bool any = false;
    for (size_t k = 0; k < NCOMP; k++) {
        const rm_comp *c = &comps[idx[k]];
        if (!c->present(r)) continue;
        /* rac and rac-rand describe the same fields: the present one speaks */
        if (any) len += (size_t)snprintf(buf + len, n > len ? n - len : 0, "+");
        int w = c->describe(r, buf + len, n > len ? n - len : 0);
        len += w > 0 ? (size_t)w : 0;
        any = true;
    }
    if (!any) len += (size_t)snprintf(buf, n, "none");
    return len;
}

int rm_check_components(const rm_check_in *in)
{
    for (size_t i = 0; i < NCOMP; i++) {
        if (!comps[i].present(in->r) || !comps[i].check) continue;
        int rc = comps[i].check(in);
        if (rc) return rc;
    }
    return 0;
}

void rm_apply_specs(const fp4s_remedy *r, fp4s_spec *s, int operand)
{
    for (size_t i = 0; i < NCOMP; i++)
        if (comps[i].spec && comps[i].present(r)) comps[i].spec(r, s, operand);
}

void rm_cost_components(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c)
{
    size_t idx[NCOMP];
    canon_order(idx);
    for (size_t k = 0; k < NCOMP; k++) {
        const rm_comp *cp = &comps[idx[k]];
        if (cp->cost && cp->present(r)) cp->cost(r, in, c);
    }
}

size_t fp4s_remedy_help(char *buf, size_t n)
{
    static const char *heads[] = {"trainer items (on the trainer activations X_t):",
                                  "rollout items (on the rollout activations X):",
                                  "engine remedies (TransformerEngine):"};
    size_t len = 0;
#define PUT(...) len += (size_t)snprintf(buf + len, n > len ? n - len : 0, __VA_ARGS__)
    PUT("A list is items separated by ','; an item is components joined by '+'.\n");
    for (int g = RM_GROUP_TRAINER; g <= RM_GROUP_ENGINE; g++) {
        PUT("%s\n", heads[g]);
        /* a name shorter than 20 columns is padded to 21, a longer one gets two spaces */
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if ((int)kinds[i].group == g) PUT("  %-20s %s\n", kinds[i].name, kinds[i].help);
        for (size_t i = 0; i < NCOMP; i++)
            if ((int)comps[i].group == g)
                PUT("  %-*s %s\n", strlen(comps[i].usage) < 20 ? 20 : (int)strlen(comps[i].usage) + 1, comps[i].usage,
                    comps[i].help);
    }
    PUT("Example: none,rac:0.125,rac:1:bf16,rac-rand:0.25,mbs:128,of:0.5,keep:1,mbs:128+of:0.5\n");
#undef PUT
    return len;
}
