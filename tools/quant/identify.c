/* fp4-quant --identify: which profile, and which knob setting, reproduces an
 * engine's own output. The input tensor is quantized by every profile of the
 * format and by every profile with one quantizer option changed (the options
 * of cli_quant: --recipe, --scale-rule, --round, --zero-sign, --nonfinite,
 * --zero-block-code, --2d/--1d, --scope, --tscale-rule and the three 4over6
 * knobs), and each result is compared with the engine's element codes and
 * block scale bytes. Every candidate that gives them bit for bit is listed;
 * when none does, the nearest ones (fewest differing scales, then codes) with
 * the first block that differs. The knob in a candidate's name is the one
 * that explains a difference its profile alone leaves. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The engine's output: one code per element (0..15) and one scale byte per block. */
typedef struct engine_out {
    uint8_t *codes, *scales;
    size_t rows, cols, block;
    bool packed;
} engine_out;

/* A source of byte values (uint8, or integers 0..255 in any float dtype) into a new array [rows, cols]. */
static uint8_t *read_bytes(const char *spec, const char *what, size_t *rows, size_t *cols, unsigned maxv)
{
    float *v = NULL;
    int rc = fp4s_source_read_all(spec, &v, rows, cols);
    if (rc) cli_failf(rc, "%s", what);
    size_t n = *rows * *cols;
    uint8_t *b = xmalloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        if (!(v[i] >= 0 && v[i] <= (float)maxv && v[i] == floorf(v[i])))
            cli_die(FP4S_EXIT_INPUT, "%s: %s: value %zu is %g, not a byte 0..%u", spec, what, i, (double)v[i], maxv);
        b[i] = (uint8_t)v[i];
    }
    free(v);
    return b;
}

/* The engine's codes [rows, cols] or packed [rows, cols/2] (low nibble: the
 * even element, as TransformerEngine, torchao, FlashInfer and vLLM store
 * them) and scales [rows, cols/block]; the block (16: NVFP4, 32: MXFP4)
 * follows from the scales' width. */
static void engine_read(const char *codes, const char *scales, size_t rows, size_t cols, engine_out *e)
{
    size_t cr, cc, sr, sc;
    uint8_t *c = read_bytes(codes, "--identify codes", &cr, &cc, 255);
    e->scales = read_bytes(scales, "--identify-scales", &sr, &sc, 255);
    e->rows = rows;
    e->cols = cols;
    if (cr != rows || (cc != cols && cc * 2 != cols))
        cli_die(FP4S_EXIT_INPUT, "%s: the codes are [%zu, %zu]; the input's [%zu, %zu] needs [%zu, %zu] (one code "
                "a byte) or [%zu, %zu] (two a byte)", codes, cr, cc, rows, cols, rows, cols, rows, cols / 2);
    if (sr != rows || sc == 0 || cols % sc || (cols / sc != 16 && cols / sc != 32))
        cli_die(FP4S_EXIT_INPUT, "%s: the scales are [%zu, %zu]; the input's [%zu, %zu] needs [%zu, %zu] (NVFP4, "
                "16-element blocks) or [%zu, %zu] (MXFP4, 32), unswizzled", scales, sr, sc, rows, cols, rows,
                cols / 16, rows, cols / 32);
    e->block = cols / sc;
    e->packed = cc * 2 == cols && cc != cols;
    e->codes = xmalloc(rows * cols);
    for (size_t i = 0; i < rows * cols; i++) {
        uint8_t v = e->packed ? (uint8_t)((c[i / 2] >> ((i & 1) * 4)) & 15) : c[i];
        if (v > 15)
            cli_die(FP4S_EXIT_INPUT, "%s: code %zu is %u, not an E2M1 code 0..15 (packed codes are [%zu, %zu])", codes,
                    i, v, rows, cols / 2);
        e->codes[i] = v;
    }
    free(c);
}

/* ---- the knobs: an option of cli_quant, its values, how a spec holds it ---------------- */
typedef struct knob {
    const char *opt;
    unsigned formats;                              /* 1 << fmt */
    int n;                                         /* values */
    int (*get)(const fp4s_spec *s);
    void (*set)(fp4s_spec *s, int v);
    const char *(*name)(int v, char *buf, size_t n);
} knob;

#define MX (1u << FP4S_MXFP4)
#define NV (1u << FP4S_NVFP4)

static const char *enum_name(const char *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s", s ? s : "?");
    return buf;
}
static int g_rule(const fp4s_spec *s) { return (int)s->mx_rule; }
static void s_rule(fp4s_spec *s, int v) { s->mx_rule = (fp4s_mx_rule)v; }
static const char *n_rule(int v, char *b, size_t n) { return enum_name(fp4s_mx_rule_name((fp4s_mx_rule)v), b, n); }
static int g_recipe(const fp4s_spec *s) { return (int)s->nv_recipe; }
static void s_recipe(fp4s_spec *s, int v) { s->nv_recipe = (fp4s_nv_recipe)v; }
static const char *n_recipe(int v, char *b, size_t n)
{
    return enum_name(fp4s_nv_recipe_name((fp4s_nv_recipe)v), b, n);
}
static int g_tie(const fp4s_spec *s) { return (int)s->tie; }
static void s_tie(fp4s_spec *s, int v) { s->tie = (fp4s_tie)v; }
static const char *n_tie(int v, char *b, size_t n) { return enum_name((const char *[]){"rne", "rtz", "rha"}[v], b, n); }
static int g_knz(const fp4s_spec *s) { return s->keep_neg_zero; }
static void s_knz(fp4s_spec *s, int v) { s->keep_neg_zero = v; }
static const char *n_knz(int v, char *b, size_t n) { return enum_name(v ? "keep" : "drop", b, n); }
static int g_nf(const fp4s_spec *s) { return (int)s->nonfinite; }
static void s_nf(fp4s_spec *s, int v) { s->nonfinite = (fp4s_nonfinite)v; }
static const char *n_nf(int v, char *b, size_t n) { return enum_name(fp4s_nonfinite_name((fp4s_nonfinite)v), b, n); }
static const int zbc[] = {0, 92, 127}; /* the profiles' all-zero block codes */
static int g_zbc(const fp4s_spec *s)
{
    for (int i = 0; i < 3; i++)
        if (s->mx_zero_block_code == zbc[i]) return i;
    return -1;
}
static void s_zbc(fp4s_spec *s, int v) { s->mx_zero_block_code = (uint8_t)zbc[v]; }
static const char *n_zbc(int v, char *b, size_t n)
{
    snprintf(b, n, "%d", zbc[v]);
    return b;
}
static int g_2d(const fp4s_spec *s) { return s->tile2d; }
static void s_2d(fp4s_spec *s, int v) { s->tile2d = v; }
static const char *n_2d(int v, char *b, size_t n) { return enum_name(v ? "(--2d)" : "(--1d)", b, n); }
static int g_scope(const fp4s_spec *s) { return (int)s->nv_scope; }
static void s_scope(fp4s_spec *s, int v) { s->nv_scope = (fp4s_nv_scope)v; }
static const char *n_scope(int v, char *b, size_t n) { return enum_name(fp4s_nv_scope_name((fp4s_nv_scope)v), b, n); }
static int g_tsr(const fp4s_spec *s) { return (int)s->nv_tsrule; }
static void s_tsr(fp4s_spec *s, int v) { s->nv_tsrule = (fp4s_nv_tsrule)v; }
static const char *n_tsr(int v, char *b, size_t n) { return enum_name(fp4s_nv_tsrule_name((fp4s_nv_tsrule)v), b, n); }
static int g_err(const fp4s_spec *s) { return (int)s->nv_4over6_err; }
static void s_err(fp4s_spec *s, int v) { s->nv_4over6_err = (fp4s_4over6_err)v; }
static const char *n_err(int v, char *b, size_t n) { return enum_name(v ? "mse" : "mae", b, n); }
static int g_bound(const fp4s_spec *s) { return fp4s_spec_scale_bound(s) == 448; }
static void s_bound(fp4s_spec *s, int v) { s->nv_scale_bound = v ? 448 : 256; }
static const char *n_bound(int v, char *b, size_t n) { return enum_name(v ? "448" : "256", b, n); }
static int g_math(const fp4s_spec *s) { return (int)s->nv_4over6_math; }
static void s_math(fp4s_spec *s, int v) { s->nv_4over6_math = (fp4s_4over6_math)v; }
static const char *n_math(int v, char *b, size_t n)
{
    return enum_name(fp4s_4over6_math_name((fp4s_4over6_math)v), b, n);
}

static const knob knobs[] = {
    {"--recipe", NV, FP4S_NV_RECIPE_COUNT, g_recipe, s_recipe, n_recipe},
    {"--scale-rule", MX, FP4S_MX_RULE_COUNT, g_rule, s_rule, n_rule},
    {"--round", MX | NV, FP4S_TIE_COUNT, g_tie, s_tie, n_tie},
    {"--zero-sign", MX | NV, 2, g_knz, s_knz, n_knz},
    {"--nonfinite", MX | NV, FP4S_NF_COUNT, g_nf, s_nf, n_nf},
    {"--zero-block-code", MX, 3, g_zbc, s_zbc, n_zbc},
    {"", NV, 2, g_2d, s_2d, n_2d},
    {"--scope", NV, FP4S_SCOPE_COUNT, g_scope, s_scope, n_scope},
    {"--tscale-rule", NV, FP4S_TSR_COUNT, g_tsr, s_tsr, n_tsr},
    {"--4over6-error", NV, 2, g_err, s_err, n_err},
    {"--4over6-bound", NV, 2, g_bound, s_bound, n_bound},
    {"--4over6-math", NV, FP4S_4OVER6_MATH_COUNT, g_math, s_math, n_math},
};
#define NKNOBS (sizeof knobs / sizeof knobs[0])

/* ---- one candidate ------------------------------------------------------------------------ */
typedef struct cand {
    char name[160];           /* "PROFILE" or "PROFILE --knob value" */
    size_t base;              /* a variant: the index of its profile's candidate (SIZE_MAX: none; itself for a profile) */
    uint64_t scale_diff, code_diff;
    size_t first_row, first_blk;
    bool any;                 /* a difference was found (first_* set) */
    uint8_t first_scale;      /* the candidate's scale byte and codes of the first differing block */
    uint8_t first_codes[32];
} cand;

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->scale_diff != y->scale_diff) return x->scale_diff < y->scale_diff ? -1 : 1;
    if (x->code_diff != y->code_diff) return x->code_diff < y->code_diff ? -1 : 1;
    return 0;
}

/* Quantize x [rows, cols] with s into codes and scales: 0, or a library error (the candidate is skipped). */
static int quant_all(const fp4s_spec *s, const float *x, size_t rows, size_t cols, uint8_t *codes, uint8_t *scales)
{
    fp4s_tscale ts;
    memset(&ts, 0, sizeof ts);
    int rc = 0;
    if (!row_scaled(s)) {
        float amax = fp4s_spec_amax(s, x, rows, cols, cols, NULL);
        if ((rc = fp4s_tscale_init(s, amax, &ts))) return rc;
    }
    fp4s_qout o;
    memset(&o, 0, sizeof o);
    o.codes = codes;
    o.ld_codes = cols;
    o.scales = scales;
    o.ld_scales = cols / s->block;
    return fp4s_quantize(s, row_scaled(s) ? NULL : &ts, x, rows, cols, cols, 0, &o, NULL);
}

static void compare(const engine_out *e, const uint8_t *codes, const uint8_t *scales, cand *c)
{
    size_t nb = e->cols / e->block;
    c->scale_diff = c->code_diff = 0;
    c->any = false;
    for (size_t r = 0; r < e->rows; r++)
        for (size_t b = 0; b < nb; b++) {
            size_t k = r * nb + b, o = r * e->cols + b * e->block;
            bool d = scales[k] != e->scales[k];
            c->scale_diff += d;
            for (size_t j = 0; j < e->block; j++)
                if (codes[o + j] != e->codes[o + j]) {
                    c->code_diff++;
                    d = true;
                }
            if (d && !c->any) {
                c->any = true;
                c->first_row = r;
                c->first_blk = b;
                c->first_scale = scales[k];
                memcpy(c->first_codes, codes + o, e->block);
            }
        }
}

/* The spec's rules without its name, for telling candidates that are the same quantizer apart. */
static bool same_rules(const fp4s_spec *a, const fp4s_spec *b)
{
    fp4s_spec x = *a, y = *b;
    memset(x.profile, 0, sizeof x.profile);
    memset(y.profile, 0, sizeof y.profile);
    x.nv_scale_bound = (uint16_t)fp4s_spec_scale_bound(&x);
    y.nv_scale_bound = (uint16_t)fp4s_spec_scale_bound(&y);
    return memcmp(&x, &y, sizeof x) == 0;
}

static void hex_block(const uint8_t *c, size_t n, char *buf)
{
    for (size_t j = 0; j < n; j++) buf[j] = "0123456789abcdef"[c[j] & 15];
    buf[n] = '\0';
}

int identify_run(const char *input, const char *codes_src, const char *scales_src, const cli_quant *q, bool json,
                 size_t show)
{
    float *x = NULL;
    size_t rows, cols;
    int rc = fp4s_source_read_all(input, &x, &rows, &cols);
    if (rc) cli_failf(rc, "%s", input);
    engine_out e;
    engine_read(codes_src, scales_src, rows, cols, &e);
    fp4s_format fmt = e.block == 16 ? FP4S_NVFP4 : FP4S_MXFP4;
    if (q->format) {
        fp4s_format f;
        if (fp4s_format_parse(q->format, &f) || (f != FP4S_MXFP4 && f != FP4S_NVFP4))
            cli_usage("--identify: -f must be mxfp4 or nvfp4, got '%s'", q->format);
        if (f != fmt)
            cli_die(FP4S_EXIT_INPUT, "%s: %zu-element blocks are %s, not %s", scales_src, e.block,
                    fp4s_format_name(fmt), q->format);
    }
    float input_scale = 0.0f;
    if (q->input_scale && strcmp(q->input_scale, "off")) {
        if (fmt != FP4S_NVFP4) cli_usage("--input-scale applies to nvfp4 only");
        input_scale = cli_input_scale(q->input_scale);
    }

    /* the candidates: every profile of the format, then each with one knob changed */
    size_t cap = 256, nc = 0, nbase = 0;
    cand *cs = xcalloc(cap, sizeof *cs);
    fp4s_spec *bases = xcalloc(fp4s_profile_count(), sizeof *bases);
    size_t *base_cand = xmalloc(fp4s_profile_count() * sizeof *base_cand);
    for (size_t i = 0; i < fp4s_profile_count(); i++) base_cand[i] = SIZE_MAX;
    uint8_t *codes = xmalloc(rows * cols), *scales = xmalloc(rows * (cols / e.block) + 1);
    const fp4s_profile_info *p;
    cli_progress_begin("--identify");
    size_t np = fp4s_profile_count();
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; (p = fp4s_profile_at(i)); i++) {
            if (!(p->formats & (1u << fmt))) continue;
            fp4s_spec base;
            if (fp4s_spec_profile(&base, fmt, p->name)) continue;
            if (input_scale > 0 && fp4s_spec_set_input_scale(&base, input_scale)) continue;
            if (pass == 0) bases[nbase++] = base;
            for (size_t k = 0; k < (pass ? NKNOBS : 1); k++) {
                const knob *kn = pass ? &knobs[k] : NULL;
                if (kn && !(kn->formats & (1u << fmt))) continue;
                for (int v = 0; v < (kn ? kn->n : 1); v++) {
                    fp4s_spec s = base;
                    char vb[64];
                    if (kn) {
                        if (kn->get(&base) == v) continue;
                        kn->set(&s, v);
                        if (fp4s_spec_check(&s) || s.block != e.block) continue;
                        bool dup = false; /* the same rules as a profile: that profile is a candidate */
                        for (size_t b = 0; b < nbase && !dup; b++) dup = same_rules(&s, &bases[b]);
                        if (dup) continue;
                    }
                    if (quant_all(&s, x, rows, cols, codes, scales)) continue;
                    if (!kn) base_cand[i] = nc;
                    if (nc == cap) {
                        cs = xrealloc(cs, (cap *= 2) * sizeof *cs);
                        memset(cs + nc, 0, (cap - nc) * sizeof *cs);
                    }
                    cand *c = &cs[nc];
                    c->base = kn ? base_cand[i] : nc;
                    nc++;
                    if (!kn) snprintf(c->name, sizeof c->name, "%s", p->name);
                    else if (!*kn->opt) snprintf(c->name, sizeof c->name, "%s %s", p->name, v ? "--2d" : "--1d");
                    else snprintf(c->name, sizeof c->name, "%s %s %s", p->name, kn->opt, kn->name(v, vb, sizeof vb));
                    compare(&e, codes, scales, c);
                }
            }
            cli_progress((uint64_t)(pass * np + i + 1), (uint64_t)(2 * np));
        }
    cli_progress_end();

    /* exact matches in candidate order: the profiles, then a profile with one option changed where the profile
     * alone does not match (an option that changes no byte of this input says nothing); else the nearest, in
     * candidate order on ties */
    size_t nmatch = 0;
    cand *sorted = xmalloc((nc ? nc : 1) * sizeof *sorted);
    for (size_t i = 0; i < nc; i++) {
        const cand *c = &cs[i];
        bool exact = c->scale_diff == 0 && c->code_diff == 0;
        bool base_exact = c->base != SIZE_MAX && cs[c->base].scale_diff == 0 && cs[c->base].code_diff == 0;
        if (exact && (c->base == i || !base_exact)) sorted[nmatch++] = *c;
    }
    if (!nmatch) memcpy(sorted, cs, nc * sizeof *cs); /* sorted below */
    /* a stable sort: insertion by (scale_diff, code_diff), the candidates' order kept on ties */
    for (size_t i = 1; i < nc && !nmatch; i++) {
        cand t = sorted[i];
        size_t j = i;
        while (j > 0 && cmp_cand(&sorted[j - 1], &t) > 0) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = t;
    }
    size_t nb = cols / e.block, lim = nmatch ? nmatch : (show < nc ? show : nc);
    int status;
    if (json) {
        json_t *root = json_object(), *arr = json_array();
        json_object_set_new(root, "input", json_string(input));
        json_object_set_new(root, "format", json_string(fp4s_format_name(fmt)));
        json_object_set_new(root, "codes_packed", json_boolean(e.packed));
        json_object_set_new(root, "candidates", json_integer((json_int_t)nc));
        json_object_set_new(root, "reproduced", json_boolean(nmatch > 0));
        for (size_t i = 0; i < lim; i++) {
            const cand *c = &sorted[i];
            json_t *o = json_object();
            json_object_set_new(o, "candidate", json_string(c->name));
            json_object_set_new(o, "scales_differ", json_integer((json_int_t)c->scale_diff));
            json_object_set_new(o, "codes_differ", json_integer((json_int_t)c->code_diff));
            if (c->any) {
                char hc[40], he[40];
                hex_block(c->first_codes, e.block, hc);
                hex_block(e.codes + c->first_row * cols + c->first_blk * e.block, e.block, he);
                json_t *f = json_object();
                json_object_set_new(f, "row", json_integer((json_int_t)c->first_row));
                json_object_set_new(f, "block", json_integer((json_int_t)c->first_blk));
                json_object_set_new(f, "engine_scale", json_integer(e.scales[c->first_row * nb + c->first_blk]));
                json_object_set_new(f, "candidate_scale", json_integer(c->first_scale));
                json_object_set_new(f, "engine_codes", json_string(he));
                json_object_set_new(f, "candidate_codes", json_string(hc));
                json_object_set_new(o, "first_difference", f);
            }
            json_array_append_new(arr, o);
        }
        json_object_set_new(root, nmatch ? "matches" : "nearest", arr);
        status = cli_json_print(root);
    } else {
        printf("input: %s [%zu x %zu]; engine codes %s (%s), scales %s: %s, %zu-element blocks\n", input, rows, cols,
               codes_src, e.packed ? "two a byte, low nibble first" : "one a byte", scales_src,
               fp4s_format_name(fmt), e.block);
        printf("candidates: %zu (every %s profile, and each with one option changed)\n", nc, fp4s_format_name(fmt));
        if (nmatch) {
            printf("reproduced bit for bit (every code and scale byte) by (with one option changed: where the "
                   "profile alone does not):\n");
            for (size_t i = 0; i < lim; i++) printf("  %s\n", sorted[i].name);
        } else {
            printf("no profile or single option reproduces it; nearest (scale bytes, codes that differ):\n");
            for (size_t i = 0; i < lim; i++) {
                const cand *c = &sorted[i];
                printf("  %-48s scales %llu of %zu, codes %llu of %zu\n", c->name, (unsigned long long)c->scale_diff,
                       rows * nb, (unsigned long long)c->code_diff, rows * cols);
                if (c->any) {
                    char hc[40], he[40];
                    hex_block(c->first_codes, e.block, hc);
                    hex_block(e.codes + c->first_row * cols + c->first_blk * e.block, e.block, he);
                    printf("    first differing block: row %zu, block %zu (columns %zu-%zu): engine scale 0x%02x "
                           "codes %s, this one 0x%02x %s\n",
                           c->first_row, c->first_blk, c->first_blk * e.block, (c->first_blk + 1) * e.block - 1,
                           e.scales[c->first_row * nb + c->first_blk], he, c->first_scale, hc);
                }
            }
        }
        status = cli_stdout_flush();
    }
    free(sorted);
    free(cs);
    free(bases);
    free(base_cand);
    free(codes);
    free(scales);
    free(e.codes);
    free(e.scales);
    free(x);
    if (status) return status;
    return nmatch ? 0 : FP4S_EXIT_CHECK;
}
