/* The remedy list grammar (fp4-remedy(1), "The remedy list"): one parser for every
 * tool over the rows of component.c, with the range of every parameter
 * checked and named in the message. */
#include "remedy_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Split comp at ':' into at most max fields (in place); max + 1 when there are more. */
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

/* One component of an item: its row (component.c), the exclusions, its parameters. */
static int parse_comp(const char *item, char *comp, fp4s_remedy *r, unsigned *seen, size_t ncomp)
{
    char *f[9];
    size_t nf = fields(comp, f, 8);
    const char *name = f[0];
    if (nf > 8) return rm_bad(item, "too many parameters in '%s'", name, FP4S_EINVAL);
    size_t nk, nc;
    const rm_kind_row *kinds = rm_kinds(&nk);
    const rm_comp *comps = rm_comps(&nc);
    const rm_kind_row *kind = NULL;
    const rm_comp *c = NULL;
    for (size_t i = 0; i < nk && !kind; i++)
        if (!strcmp(name, kinds[i].name)) kind = &kinds[i];
    for (size_t i = 0; i < nc && !kind && !c; i++)
        if (!strcmp(name, comps[i].name)) c = &comps[i];
    if (!kind && !c) {
        if (!*name) return rm_bad(item, "%sempty component", "", FP4S_EINVAL);
        char known[512];
        rm_known(known, sizeof known);
        return fp4s_error_set(FP4S_EINVAL, "remedy '%s': unknown remedy '%s' (known: %s)", item, name, known);
    }
    if (kind && ncomp > 1) return rm_bad(item, "'%s' cannot be combined with other remedies", name, FP4S_EINVAL);
    if (kind) {
        if (nf > 1) return rm_bad(item, "'%s' takes no parameters", name, FP4S_EINVAL);
        r->kind = kind->kind;
        return 0;
    }
    if (*seen & c->excl) {
        /* a group of several rows (rac, rac-rand) is named as a whole */
        size_t same = 0;
        for (size_t i = 0; i < nc; i++) same += comps[i].excl == c->excl;
        if (same > 1) return rm_bad(item, "rac and rac-rand given twice or together%s", "", FP4S_EINVAL);
        return rm_bad(item, "'%s' given twice", name, FP4S_EINVAL);
    }
    *seen |= c->excl;
    return c->parse(item, f, nf, r);
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

size_t fp4s_remedy_describe(const fp4s_remedy *r, char *buf, size_t n)
{
    char tmp[256];
    size_t len = 0, nk;
    const rm_kind_row *kinds = rm_kinds(&nk);
    if (r->kind != FP4S_RK_ROLLOUT) /* an item alone: its name */
        for (size_t i = 0; i < nk; i++)
            if (kinds[i].kind == r->kind) len = (size_t)snprintf(tmp, sizeof tmp, "%s", kinds[i].name);
    if (r->kind == FP4S_RK_ROLLOUT || !len) len = rm_describe_components(r, tmp, sizeof tmp);
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
    /* row scales and a static input scale are the activations': the engines that run them (TE's
     * row_scaled_activation, FlashInfer's per-token kernel, a checkpoint's input_scale) quantize the
     * weight with one tensor scale from its own amax */
    w->nv_scope = FP4S_SCOPE_TENSOR;
    w->nv_input_scale = 0.0f;
    if (tile2d == 0) w->tile2d = false;
    else if (tile2d == 1) w->tile2d = true;
    else w->tile2d = act->tile2d || act->nv_recipe == FP4S_NV_TE;
}

static bool is_fp4(const fp4s_spec *s) { return s->format == FP4S_MXFP4 || s->format == FP4S_NVFP4; }

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
    if (r->kind != FP4S_RK_ROLLOUT && rm_has_component(r))
        return fp4s_error_set(FP4S_EINVAL, "remedy '%s': %s takes no other components", lab,
                              r->kind == FP4S_RK_BF16_ROLLOUT ? "bf16-rollout" : "a trainer kind");
    bool need_fp4 = rm_has_component(r);
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
    if ((unsigned)r->rac_resid > FP4S_RAC_AUG || (unsigned)r->rac_order > FP4S_RAC_ORDER_RANK ||
        (unsigned)r->mbs_rule > FP4S_MBS_MSE || (unsigned)r->aqn_target > FP4S_AQN_ELEM ||
        (unsigned)r->operands > FP4S_OPERANDS_WEIGHT)
        return fp4s_error_set(FP4S_EINVAL, "remedy '%s': an enumeration field is out of range", lab);
    bool on_act = r->operands != FP4S_OPERANDS_WEIGHT, on_w = r->operands != FP4S_OPERANDS_ACT;
    /* each component's own checks: its row (component.c) */
    rm_check_in in = {.r = r, .lab = lab, .act = act, .wt = wt, .k = k, .on_act = on_act, .on_w = on_w};
    return rm_check_components(&in);
}
