/* The remedy list grammar (remedy.h): one parser for every tool, with the
 * range of every parameter checked and named in the message. */
#include <fp4scope/quant.h>
#include <fp4scope/remedy.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KNOWN "none, bf16, wfq, w4a4qat, bf16-rollout, rac:R[:RESID], rac-rand:R[:RESID][:SEED], mbs:G[:max|mse], " \
              "of[:ALPHA], keep:K, aqn:SIGMA[:SEED][:TARGET], 4over6[:mae|mse][:256|448], rht[:te|none|0xHHHH], " \
              "sr[:SEED]"

void fp4s_remedy_defaults(fp4s_remedy *r)
{
    memset(r, 0, sizeof *r);
    r->kind = FP4S_RK_ROLLOUT;
    r->rac_resid = FP4S_RAC_FP4;
    r->rac_seed = 1;
    r->rac_order = FP4S_RAC_ORDER_INDEX;
    r->mbs_rule = FP4S_MBS_AUTO;
    r->of_alpha = 0.5;
    r->aqn_seed = 1;
    r->aqn_target = FP4S_AQN_GAIN;
    r->operands = FP4S_OPERANDS_BOTH;
    r->e4over6_err = FP4S_4OVER6_MAE;
    r->rht_signs = FP4S_RHT_TE_SIGNS;
    r->sr_seed = 1;
    r->sr_seeds = 8;
}

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

/* Split comp at ':' into at most 8 fields (in place). */
static size_t fields(char *comp, char **f, size_t max)
{
    size_t n = 0;
    char *p = comp;
    for (;;) {
        if (n == max) return max + 1;
        f[n++] = p;
        char *c = strchr(p, ':');
        if (!c) break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

static int bad(const char *item, const char *fmt, const char *a, int code)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a);
    return fp4s_error_set(code, "remedy '%s': %s", item, msg);
}

static int parse_comp(const char *item, char *comp, fp4s_remedy *r, unsigned *seen, size_t ncomp)
{
    char *f[9];
    size_t nf = fields(comp, f, 8);
    const char *name = f[0];
    if (nf > 8) return bad(item, "too many parameters in '%s'", name, FP4S_EINVAL);
    enum { S_TRAINER = 1, S_NONE = 2, S_RAC = 4, S_MBS = 8, S_OF = 16, S_KEEP = 32, S_AQN = 64, S_4O6 = 128,
           S_RHT = 256, S_SR = 512 };
    unsigned bit;
    if (!strcmp(name, "bf16") || !strcmp(name, "wfq") || !strcmp(name, "w4a4qat") || !strcmp(name, "bf16-rollout"))
        bit = S_TRAINER;
    else if (!strcmp(name, "none")) bit = S_NONE;
    else if (!strcmp(name, "rac") || !strcmp(name, "rac-rand")) bit = S_RAC;
    else if (!strcmp(name, "mbs")) bit = S_MBS;
    else if (!strcmp(name, "of")) bit = S_OF;
    else if (!strcmp(name, "keep")) bit = S_KEEP;
    else if (!strcmp(name, "aqn")) bit = S_AQN;
    else if (!strcmp(name, "4over6")) bit = S_4O6;
    else if (!strcmp(name, "rht")) bit = S_RHT;
    else if (!strcmp(name, "sr")) bit = S_SR;
    else if (!*name) return bad(item, "%sempty component", "", FP4S_EINVAL);
    else return bad(item, "unknown remedy '%s' (known: " KNOWN ")", name, FP4S_EINVAL);
    if ((bit & (S_TRAINER | S_NONE)) && ncomp > 1)
        return bad(item, "'%s' cannot be combined with other remedies", name, FP4S_EINVAL);
    if (*seen & bit)
        return bad(item, bit == S_RAC ? "rac and rac-rand given twice or together%s" : "'%s' given twice",
                   bit == S_RAC ? "" : name, FP4S_EINVAL);
    *seen |= bit;

    if (bit == S_TRAINER || bit == S_NONE) {
        if (nf > 1) return bad(item, "'%s' takes no parameters", name, FP4S_EINVAL);
        r->kind = !strcmp(name, "bf16") ? FP4S_RK_BF16 : !strcmp(name, "wfq") ? FP4S_RK_WFQ
                : !strcmp(name, "w4a4qat") ? FP4S_RK_W4A4QAT
                : !strcmp(name, "bf16-rollout") ? FP4S_RK_BF16_ROLLOUT : FP4S_RK_ROLLOUT;
        return 0;
    }
    if (bit == S_RAC) {
        bool rnd = !strcmp(name, "rac-rand");
        if (nf < 2) return bad(item, "'%s' needs the channel ratio R in (0, 1] (e.g. rac:0.25)", name, FP4S_EINVAL);
        double v;
        if (!parse_double(f[1], &v)) return bad(item, "R: expected a number in (0, 1], got '%s'", f[1], FP4S_EINVAL);
        if (!(v > 0.0 && v <= 1.0)) return bad(item, "R must be in (0, 1], got %s", f[1], FP4S_ERANGE);
        r->rac_ratio = v;
        r->rac_random = rnd;
        bool have_resid = false, have_seed = false;
        for (size_t i = 2; i < nf; i++) {
            if (!strcmp(f[i], "bf16") || !strcmp(f[i], "fp4") || !strcmp(f[i], "aug")) {
                if (have_resid) return bad(item, "RESID given twice ('%s')", f[i], FP4S_EINVAL);
                have_resid = true;
                r->rac_resid = !strcmp(f[i], "bf16") ? FP4S_RAC_BF16 : !strcmp(f[i], "aug") ? FP4S_RAC_AUG
                             : FP4S_RAC_FP4;
            } else if (rnd && is_uint(f[i])) {
                if (have_seed) return bad(item, "SEED given twice ('%s')", f[i], FP4S_EINVAL);
                if (!parse_u64(f[i], &r->rac_seed))
                    return bad(item, "SEED must be an integer in [0, 2^64 - 1], got '%s'", f[i], FP4S_ERANGE);
                have_seed = true;
            } else {
                return bad(item, rnd ? "expected RESID (bf16, fp4 or aug) or SEED (an integer), got '%s'"
                                     : "expected RESID bf16, fp4 or aug, got '%s'", f[i], FP4S_EINVAL);
            }
        }
        return 0;
    }
    if (bit == S_MBS) {
        if (nf < 2) return bad(item, "'%s' needs the macro-block size G (e.g. mbs:128)", name, FP4S_EINVAL);
        uint64_t g;
        if (!parse_u64(f[1], &g)) return bad(item, "G: expected a positive integer, got '%s'", f[1], FP4S_EINVAL);
        if (g < 1 || g > (1u << 20)) return bad(item, "G must be in [1, 1048576], got %s", f[1], FP4S_ERANGE);
        r->mbs_group = (uint32_t)g;
        if (nf > 3) return bad(item, "mbs takes G and RULE only, got '%s' too", f[3], FP4S_EINVAL);
        if (nf == 3) {
            if (!strcmp(f[2], "max")) r->mbs_rule = FP4S_MBS_MAX;
            else if (!strcmp(f[2], "mse")) r->mbs_rule = FP4S_MBS_MSE;
            else return bad(item, "RULE: expected max or mse, got '%s'", f[2], FP4S_EINVAL);
        }
        return 0;
    }
    if (bit == S_OF) {
        r->of = true;
        if (nf > 2) return bad(item, "of takes ALPHA only, got '%s' too", f[2], FP4S_EINVAL);
        if (nf == 2) {
            double v;
            if (!parse_double(f[1], &v))
                return bad(item, "ALPHA: expected a number in [0, 1], got '%s'", f[1], FP4S_EINVAL);
            if (!(v >= 0.0 && v <= 1.0)) return bad(item, "ALPHA must be in [0, 1], got %s", f[1], FP4S_ERANGE);
            r->of_alpha = v;
        }
        return 0;
    }
    if (bit == S_KEEP) {
        if (nf != 2) return bad(item, "'%s' needs K, the entries kept per block (e.g. keep:1)", name, FP4S_EINVAL);
        uint64_t k;
        if (!parse_u64(f[1], &k)) return bad(item, "K: expected a positive integer, got '%s'", f[1], FP4S_EINVAL);
        if (k < 1 || k > 255) return bad(item, "K must be in [1, block size - 1], got %s", f[1], FP4S_ERANGE);
        r->keep = (uint32_t)k;
        return 0;
    }
    if (bit == S_4O6) {
        r->e4over6 = true;
        bool have_err = false, have_bound = false;
        for (size_t i = 1; i < nf; i++) {
            if (!strcmp(f[i], "mae") || !strcmp(f[i], "mse")) {
                if (have_err) return bad(item, "the error mode given twice ('%s')", f[i], FP4S_EINVAL);
                have_err = true;
                r->e4over6_err = !strcmp(f[i], "mse") ? FP4S_4OVER6_MSE : FP4S_4OVER6_MAE;
            } else if (!strcmp(f[i], "256") || !strcmp(f[i], "448")) {
                if (have_bound) return bad(item, "the bound given twice ('%s')", f[i], FP4S_EINVAL);
                have_bound = true;
                r->e4over6_bound = !strcmp(f[i], "448") ? 448 : 0;
            } else {
                return bad(item, "4over6: expected mae, mse, 256 or 448, got '%s'", f[i], FP4S_EINVAL);
            }
        }
        return 0;
    }
    if (bit == S_RHT) {
        r->rht = true;
        if (nf > 2) return bad(item, "rht takes SIGNS only, got '%s' too", f[2], FP4S_EINVAL);
        if (nf == 2) {
            if (!strcmp(f[1], "te")) r->rht_signs = FP4S_RHT_TE_SIGNS;
            else if (!strcmp(f[1], "none")) r->rht_signs = 0;
            else {
                char *end;
                errno = 0;
                unsigned long v = strtoul(f[1], &end, 16);
                if (strncmp(f[1], "0x", 2) || end == f[1] + 2 || *end || errno)
                    return bad(item, "SIGNS: expected te, none or a 16-bit mask 0xHHHH, got '%s'", f[1], FP4S_EINVAL);
                if (v > 0xFFFF) return bad(item, "SIGNS must fit 16 bits, got %s", f[1], FP4S_ERANGE);
                r->rht_signs = (uint16_t)v;
            }
        }
        return 0;
    }
    if (bit == S_SR) {
        r->sr = true;
        if (nf > 2) return bad(item, "sr takes SEED only, got '%s' too", f[2], FP4S_EINVAL);
        if (nf == 2) {
            uint64_t v;
            if (!parse_u64(f[1], &v)) return bad(item, "SEED: expected an integer, got '%s'", f[1], FP4S_EINVAL);
            if (v > 0xFFFFFFFFull) return bad(item, "SEED must be in [0, 2^32 - 1], got %s", f[1], FP4S_ERANGE);
            r->sr_seed = (uint32_t)v;
        }
        return 0;
    }
    /* aqn */
    if (nf < 2) return bad(item, "'%s' needs SIGMA in [0, 1] (e.g. aqn:0.01)", name, FP4S_EINVAL);
    double v;
    if (!parse_double(f[1], &v)) return bad(item, "SIGMA: expected a number in [0, 1], got '%s'", f[1], FP4S_EINVAL);
    if (!(v >= 0.0 && v <= 1.0)) return bad(item, "SIGMA must be in [0, 1], got %s", f[1], FP4S_ERANGE);
    r->aqn = true;
    r->aqn_sigma = v;
    bool have_seed = false, have_target = false;
    for (size_t i = 2; i < nf; i++) {
        if (is_uint(f[i])) {
            if (have_seed) return bad(item, "SEED given twice ('%s')", f[i], FP4S_EINVAL);
            if (!parse_u64(f[i], &r->aqn_seed))
                return bad(item, "SEED must be an integer in [0, 2^64 - 1], got '%s'", f[i], FP4S_ERANGE);
            have_seed = true;
        } else if (!strcmp(f[i], "gain") || !strcmp(f[i], "weight") || !strcmp(f[i], "elem")) {
            if (have_target) return bad(item, "TARGET given twice ('%s')", f[i], FP4S_EINVAL);
            have_target = true;
            r->aqn_target = !strcmp(f[i], "gain") ? FP4S_AQN_GAIN : !strcmp(f[i], "weight") ? FP4S_AQN_WEIGHT
                          : FP4S_AQN_ELEM;
        } else {
            return bad(item, "expected SEED (an integer) or TARGET (gain, weight or elem), got '%s'", f[i],
                       FP4S_EINVAL);
        }
    }
    return 0;
}

int fp4s_remedy_parse(const char *item, fp4s_remedy *r)
{
    if (!item || !r) return fp4s_error_set(FP4S_EINVAL, "remedy: NULL argument");
    fp4s_remedy t;
    fp4s_remedy_defaults(&t);
    size_t len = strlen(item);
    if (len == 0) return fp4s_error_set(FP4S_EEMPTY, "remedy list: empty item");
    if (len >= FP4S_REMEDY_TEXT)
        return fp4s_error_set(FP4S_EINVAL, "remedy '%.40s...': longer than %d characters", item, FP4S_REMEDY_TEXT - 1);
    for (const char *p = item; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == ',')
            return fp4s_error_set(FP4S_EINVAL, "remedy '%s': unexpected '%c'", item, *p == '\t' ? 't' : *p);
    char buf[FP4S_REMEDY_TEXT];
    memcpy(buf, item, len + 1);
    size_t ncomp = 1;
    for (const char *p = item; *p; p++) ncomp += *p == '+';
    unsigned seen = 0;
    char *save = NULL;
    for (char *c = buf, *next; c; c = next) {
        char *plus = strchr(c, '+');
        next = plus ? plus + 1 : NULL;
        if (plus) *plus = '\0';
        int rc = parse_comp(item, c, &t, &seen, ncomp);
        if (rc) return rc;
    }
    (void)save;
    memcpy(t.text, item, len + 1);
    *r = t;
    return 0;
}

int fp4s_remedy_list_parse(const char *list, fp4s_remedy **out, size_t *n)
{
    if (!list || !out || !n) return fp4s_error_set(FP4S_EINVAL, "remedy list: NULL argument");
    *out = NULL;
    *n = 0;
    if (!*list) return fp4s_error_set(FP4S_EEMPTY, "remedy list: empty");
    size_t cap = 1;
    for (const char *p = list; *p; p++) cap += *p == ',';
    fp4s_remedy *v = calloc(cap, sizeof *v);
    char *dup = strdup(list);
    if (!v || !dup) {
        free(v);
        free(dup);
        return fp4s_error_set(FP4S_ENOMEM, "remedy list: out of memory");
    }
    size_t k = 0;
    for (char *c = dup, *next; c; c = next) {
        char *comma = strchr(c, ',');
        next = comma ? comma + 1 : NULL;
        if (comma) *comma = '\0';
        if (!*c) {
            free(v);
            free(dup);
            return fp4s_error_set(FP4S_EEMPTY, "remedy list '%s': empty item (item %zu)", list, k + 1);
        }
        int rc = fp4s_remedy_parse(c, &v[k]);
        if (rc) {
            free(v);
            free(dup);
            return rc;
        }
        k++;
    }
    free(dup);
    *out = v;
    *n = k;
    return 0;
}

static const char *resid_name(fp4s_rac_resid r)
{
    return r == FP4S_RAC_BF16 ? "bf16" : r == FP4S_RAC_AUG ? "aug" : "fp4";
}

size_t fp4s_remedy_describe(const fp4s_remedy *r, char *buf, size_t n)
{
    char tmp[256];
    size_t len = 0;
#define PUT(...) len += (size_t)snprintf(tmp + len, sizeof tmp > len ? sizeof tmp - len : 0, __VA_ARGS__)
    switch (r->kind) {
    case FP4S_RK_BF16: PUT("bf16"); break;
    case FP4S_RK_WFQ: PUT("wfq"); break;
    case FP4S_RK_W4A4QAT: PUT("w4a4qat"); break;
    case FP4S_RK_BF16_ROLLOUT: PUT("bf16-rollout"); break;
    default: {
        bool any = false;
        if (r->aqn) {
            PUT("aqn:%.17g:%llu:%s", r->aqn_sigma, (unsigned long long)r->aqn_seed,
                r->aqn_target == FP4S_AQN_WEIGHT ? "weight" : r->aqn_target == FP4S_AQN_ELEM ? "elem" : "gain");
            any = true;
        }
        if (r->mbs_group) {
            PUT("%smbs:%u", any ? "+" : "", r->mbs_group);
            if (r->mbs_rule != FP4S_MBS_AUTO) PUT(":%s", r->mbs_rule == FP4S_MBS_MAX ? "max" : "mse");
            any = true;
        }
        if (r->keep) {
            PUT("%skeep:%u", any ? "+" : "", r->keep);
            any = true;
        }
        if (r->of) {
            PUT("%sof:%.17g", any ? "+" : "", r->of_alpha);
            any = true;
        }
        if (r->rht) {
            PUT("%srht:0x%04x", any ? "+" : "", r->rht_signs);
            any = true;
        }
        if (r->e4over6) {
            PUT("%s4over6:%s:%u", any ? "+" : "", r->e4over6_err == FP4S_4OVER6_MSE ? "mse" : "mae",
                r->e4over6_bound == 448 ? 448u : 256u);
            any = true;
        }
        if (r->sr) {
            PUT("%ssr:%u", any ? "+" : "", r->sr_seed);
            any = true;
        }
        if (r->rac_ratio > 0) {
            PUT("%s%s:%.17g:%s", any ? "+" : "", r->rac_random ? "rac-rand" : "rac", r->rac_ratio,
                resid_name(r->rac_resid));
            if (r->rac_random) PUT(":%llu", (unsigned long long)r->rac_seed);
            any = true;
        }
        if (!any) PUT("none");
    }
    }
#undef PUT
    if (n) snprintf(buf, n, "%s", tmp);
    return len;
}

const char *fp4s_remedy_label(const fp4s_remedy *r)
{
    static _Thread_local char buf[256];
    if (r->text[0]) return r->text;
    fp4s_remedy_describe(r, buf, sizeof buf);
    return buf;
}

void fp4s_remedy_weight_spec(const fp4s_spec *act, int tile2d, fp4s_spec *w)
{
    *w = *act;
    if (act->format != FP4S_NVFP4) {
        w->tile2d = false;
        return;
    }
    if (tile2d == 0) w->tile2d = false;
    else if (tile2d == 1) w->tile2d = true;
    else w->tile2d = act->tile2d || act->nv_recipe == FP4S_NV_TE;
}

static bool is_fp4(const fp4s_spec *s) { return s->format == FP4S_MXFP4 || s->format == FP4S_NVFP4; }

static bool has_component(const fp4s_remedy *r)
{
    return r->rac_ratio > 0 || r->mbs_group || r->of || r->keep || r->aqn || r->e4over6 || r->rht || r->sr;
}

bool fp4s_remedy_is_plain(const fp4s_remedy *r)
{
    return r && r->kind == FP4S_RK_ROLLOUT && !has_component(r);
}

int fp4s_remedy_check(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt, size_t k)
{
    if (!r || !act || !wt) return fp4s_error_set(FP4S_EINVAL, "remedy: NULL argument");
    const char *lab = fp4s_remedy_label(r);
    int rc = fp4s_spec_check(act);
    if (rc) {
        fp4s_error_prefix("remedy '%s': activation quantizer", lab);
        return rc;
    }
    if ((rc = fp4s_spec_check(wt))) {
        fp4s_error_prefix("remedy '%s': weight quantizer", lab);
        return rc;
    }
    if (act->tile2d)
        return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': activations are quantized in 1-D blocks along K; "
                              "the activation spec has 2-D tiles", lab);
    if (act->rht || wt->rht)
        return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': the %s quantizer has the RHT (rht = 1); a remedy rotates "
                              "both operands along K itself: give the item rht[:SIGNS] with specs without it", lab,
                              act->rht ? "activation" : "weight");
    if ((unsigned)r->kind > FP4S_RK_BF16_ROLLOUT) return fp4s_error_set(FP4S_EINVAL, "remedy '%s': unknown kind", lab);
    if (r->kind != FP4S_RK_ROLLOUT && has_component(r))
        return fp4s_error_set(FP4S_EINVAL, "remedy '%s': %s takes no other components", lab,
                              r->kind == FP4S_RK_BF16_ROLLOUT ? "bf16-rollout" : "a trainer kind");
    bool need_fp4 = has_component(r);
    if (need_fp4 && (!is_fp4(act) || !is_fp4(wt)))
        return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': defined for MXFP4 and NVFP4 quantizers (got %s / %s); "
                              "FP8 takes only none and the trainer kinds", lab, fp4s_format_name(act->format),
                              fp4s_format_name(wt->format));
    if (k == 0) return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': K = 0", lab);
    if (is_fp4(act) && k % act->block)
        return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': K = %zu is not a multiple of the activation block size %u",
                              lab, k, act->block);
    if (is_fp4(wt) && k % wt->block)
        return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': K = %zu is not a multiple of the weight block size %u",
                              lab, k, wt->block);
    if (r->kind != FP4S_RK_ROLLOUT) return 0;
    if (r->rac_ratio != 0 && !(r->rac_ratio > 0 && r->rac_ratio <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': R must be in (0, 1], got %g", lab, r->rac_ratio);
    if ((unsigned)r->rac_resid > FP4S_RAC_AUG || (unsigned)r->rac_order > FP4S_RAC_ORDER_RANK ||
        (unsigned)r->mbs_rule > FP4S_MBS_MSE || (unsigned)r->aqn_target > FP4S_AQN_ELEM ||
        (unsigned)r->operands > FP4S_OPERANDS_WEIGHT)
        return fp4s_error_set(FP4S_EINVAL, "remedy '%s': an enumeration field is out of range", lab);
    bool on_act = r->operands != FP4S_OPERANDS_WEIGHT, on_w = r->operands != FP4S_OPERANDS_ACT;
    if (r->of && !(r->of_alpha >= 0 && r->of_alpha <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': ALPHA must be in [0, 1], got %g", lab, r->of_alpha);
    if (r->aqn && !(r->aqn_sigma >= 0 && r->aqn_sigma <= 1))
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': SIGMA must be in [0, 1], got %g", lab, r->aqn_sigma);
    if (r->mbs_group) {
        const fp4s_spec *ss[2] = {act, wt};
        bool on[2] = {on_act, on_w};
        for (int i = 0; i < 2; i++) {
            if (!on[i]) continue;
            if (r->mbs_group % ss[i]->block)
                return fp4s_error_set(FP4S_ERANGE, "remedy '%s': G = %u must be a multiple of the %s block size %u",
                                      lab, r->mbs_group, i ? "weight" : "activation", ss[i]->block);
            fp4s_mbs_rule rule = r->mbs_rule;
            if (rule == FP4S_MBS_AUTO) rule = ss[i]->format == FP4S_MXFP4 ? FP4S_MBS_MAX : FP4S_MBS_MSE;
            if (rule == FP4S_MBS_MAX) {
                if (ss[i]->format != FP4S_MXFP4)
                    return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': mbs max needs power-of-two block scales "
                                          "(MXFP4); use mbs:%u:mse for %s", lab, r->mbs_group,
                                          fp4s_format_name(ss[i]->format));
                /* the rule must put a block of amax 6 * 2^k (and just below) at scale 2^k */
                if (fp4s_mx_scale_code(ss[i], 6.0f) != 127 || fp4s_mx_scale_code(ss[i], 6.0f * (255.0f / 256)) != 127)
                    return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': mbs max needs a scale rule that gives a block "
                                          "with amax 6*2^k the scale 2^k; %s does not (use mbs:%u:mse)", lab,
                                          fp4s_mx_rule_name(ss[i]->mx_rule), r->mbs_group);
            }
        }
    }
    if (r->e4over6) {
        const fp4s_spec *ss[2] = {act, wt};
        bool on[2] = {on_act, on_w};
        for (int i = 0; i < 2; i++)
            if (on[i] && !(ss[i]->format == FP4S_NVFP4 &&
                           (ss[i]->nv_recipe == FP4S_NV_TE || ss[i]->nv_recipe == FP4S_NV_TE_4OVER6)))
                return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': 4over6 is TransformerEngine's NVFP4 block "
                                      "scaling: the %s quantizer must be NVFP4 with the te recipe", lab,
                                      i ? "weight" : "activation");
        if (r->sr) return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': sr with 4over6 is not defined", lab);
        if (r->e4over6_bound && r->e4over6_bound != 448)
            return fp4s_error_set(FP4S_ERANGE, "remedy '%s': the 4over6 bound must be 256 or 448", lab);
    }
    if (r->sr && ((on_act && act->format == FP4S_NVFP4 && act->nv_recipe == FP4S_NV_GGML) ||
                  (on_w && wt->format == FP4S_NVFP4 && wt->nv_recipe == FP4S_NV_GGML)))
        return fp4s_error_set(FP4S_ENOTSUP, "remedy '%s': stochastic rounding needs a recipe that scales the "
                              "elements (ggml searches its levels)", lab);
    if (r->sr && r->sr_seeds == 0)
        return fp4s_error_set(FP4S_ERANGE, "remedy '%s': sr_seeds must be at least 1", lab);
    if (r->rht && k % 16)
        return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': the RHT needs K a multiple of 16, got %zu", lab, k);
    if (r->keep) {
        if (on_act && r->keep >= act->block)
            return fp4s_error_set(FP4S_ERANGE, "remedy '%s': K must be in [1, %u] for the activation block of %u",
                                  lab, act->block - 1, act->block);
        if (on_w && r->keep >= wt->block)
            return fp4s_error_set(FP4S_ERANGE, "remedy '%s': K must be in [1, %u] for the weight block of %u",
                                  lab, wt->block - 1, wt->block);
    }
    return 0;
}
