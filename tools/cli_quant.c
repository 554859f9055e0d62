/* The quantizer option group of every tool that quantizes (cli.h): -f, -p and
 * every override of a profile's rules, their help lines, and the spec they
 * make. The names come from the library's tables (fp4s_names), so help,
 * errors and parsing list the same values. */
#include "cli.h"
#include "suggest.h"

#include <fp4scope/codec.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL_FORMATS ((1u << FP4S_MXFP4) | (1u << FP4S_NVFP4) | (1u << FP4S_FP8))

void cli_quant_init(cli_quant *q)
{
    memset(q, 0, sizeof *q);
    q->mx_rule = q->tie = q->keep_neg_zero = q->packing = q->nonfinite = q->global_scale = -1;
    q->recipe = q->tile2d = q->fp8_gran = q->zero_block = q->four6_err = q->four6_bound = q->sr = q->rht = -1;
    q->scope = q->tsrule = q->four6_math = -1;
}

/* The names of a table joined into buf (for help texts and messages). */
static const char *names(fp4s_name_kind kind, const char *sep, const char *last, char *buf, size_t n)
{
    fp4s_names(kind, sep, last, buf, n);
    return buf;
}

void cli_print_wrapped(const char *label, size_t indent, const char *text)
{
    printf("%-*s", (int)indent, label);
    size_t col = strlen(label) > indent ? strlen(label) : indent;
    bool fresh = true; /* nothing written on this line after the label or indent */
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w == 0) break;
        if (!fresh && col + 1 + w > 79) {
            printf("\n%*s", (int)indent, "");
            col = indent;
        } else if (!fresh) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)w, p);
        col += w;
        p += w;
        fresh = false;
    }
    putchar('\n');
}

/* An option's help prefix and the names of a table, continuation lines in
 * the description column. */
static void print_names(const char *prefix, fp4s_name_kind kind)
{
    char all[2048];
    cli_print_wrapped(prefix, 24, names(kind, ", ", NULL, all, sizeof all));
}

/* The formats of a mask: "mxfp4, nvfp4 or fp8" (sep ", ", last " or "). */
static const char *format_list(unsigned formats, const char *sep, const char *last, char *buf, size_t n)
{
    size_t k = 0, total = 0, seen = 0;
    buf[0] = '\0';
    for (int f = FP4S_MXFP4; f <= FP4S_FP8; f++) total += (formats >> f) & 1u;
    for (int f = FP4S_MXFP4; f <= FP4S_FP8 && k < n; f++) {
        if (!((formats >> f) & 1u)) continue;
        const char *s = seen == 0 ? "" : seen + 1 == total && last ? last : sep;
        k += (size_t)snprintf(buf + k, n - k, "%s%s", s, fp4s_format_name((fp4s_format)f));
        seen++;
    }
    return buf;
}

void cli_quant_usage(unsigned formats)
{
    char a[256];
    bool fp8 = (formats >> FP4S_FP8) & 1u;
    printf("  -f, --format F        %s (default: %s)\n", format_list(formats, ", ", " or ", a, sizeof a),
           fp4s_format_name(FP4S_MXFP4));
    printf("  -p, --profile P       engine profile (default: %s for mxfp4, %s for nvfp4);\n"
           "                        see fp4-quant --list-profiles\n",
           fp4s_default_profile(FP4S_MXFP4), fp4s_default_profile(FP4S_NVFP4));
    print_names("      --scale-rule R    MXFP4 shared-exponent rule: ", FP4S_NAMES_MX_RULE);
    print_names("      --round T         element tie rule: ", FP4S_NAMES_TIE);
    printf("      --zero-sign Z     keep (negatives rounding to 0 give -0) or drop\n");
    print_names("      --packing K       nibble packing of packed codes: ", FP4S_NAMES_PACKING);
    print_names("      --nonfinite N     NaN/Inf policy: ", FP4S_NAMES_NONFINITE);
    print_names("      --global-scale G  NVFP4 recorded tensor scale: ", FP4S_NAMES_GLOBAL_SCALE);
    print_names("      --recipe R        NVFP4 order of operations: ", FP4S_NAMES_NV_RECIPE);
    printf("      --2d, --1d        NVFP4 16x16 2-D (weights) or 1-D block scaling\n");
    if (fp8) print_names("      --fp8-gran G      FP8 scale granularity: ", FP4S_NAMES_FP8_GRAN);
    printf("      --zero-block-code C  MXFP4 E8M0 code of an all-zero block (0..254)\n");
    printf("      --4over6-error E  NVFP4 4over6 recipes: the candidates' error, mae (default) or mse\n");
    printf("      --4over6-bound B  NVFP4 4over6 recipes: the tensor scale's E4M3 bound, 256 or 448\n");
    print_names("      --4over6-math M   NVFP4 4over6 recipes: the error's arithmetic: ", FP4S_NAMES_4OVER6_MATH);
    print_names("      --scope S         NVFP4 tensor scale per tensor or per row (token): ", FP4S_NAMES_SCOPE);
    print_names("      --tscale-rule R   NVFP4 how the tensor (row) scale is made from its amax: ", FP4S_NAMES_TSRULE);
    printf("      --input-scale V   NVFP4 static global scale (decode convention, a checkpoint's\n"
           "                        input_scale): a number, FILE:TENSOR, or off\n");
    printf("      --sr SEED|off     stochastic rounding of the elements (TransformerEngine's), seeded\n");
    printf("      --rht S           TransformerEngine's 16-point Hadamard transform first: te (its signs),\n"
           "                        none (no signs), a 16-bit mask 0xHHHH, or off\n");
}

/* The value of an option among the names of a table (its enum value), or a
 * usage error that lists them. */
static int parse_name(const char *opt, const char *arg, fp4s_name_kind kind)
{
    int i = fp4s_name_index(kind, arg);
    if (i < 0) {
        char alts[512], dym[512];
        size_t nn;
        const char **all = cli_kind_names(kind, &nn);
        cli_did_you_mean(arg, all, nn, dym, sizeof dym);
        cli_names_free(all, nn);
        cli_usage("%s: expected one of %s, got '%s';%s", opt, names(kind, ", ", NULL, alts, sizeof alts), arg, dym);
    }
    return i;
}

bool cli_quant_option(int id, const char *arg, cli_quant *q)
{
    switch (id) {
    case 'f': q->format = arg; break;
    case 'p': q->profile = arg; break;
    case CLI_OPT_SCALE_RULE: q->mx_rule = parse_name("--scale-rule", arg, FP4S_NAMES_MX_RULE); break;
    case CLI_OPT_ROUND: q->tie = parse_name("--round", arg, FP4S_NAMES_TIE); break;
    case CLI_OPT_ZERO_SIGN:
        if (strcmp(arg, "keep") == 0) q->keep_neg_zero = 1;
        else if (strcmp(arg, "drop") == 0) q->keep_neg_zero = 0;
        else cli_usage("--zero-sign: expected keep or drop, got '%s'", arg);
        break;
    case CLI_OPT_PACKING: q->packing = parse_name("--packing", arg, FP4S_NAMES_PACKING); break;
    case CLI_OPT_NONFINITE: q->nonfinite = parse_name("--nonfinite", arg, FP4S_NAMES_NONFINITE); break;
    case CLI_OPT_GLOBAL_SCALE: q->global_scale = parse_name("--global-scale", arg, FP4S_NAMES_GLOBAL_SCALE); break;
    case CLI_OPT_RECIPE: q->recipe = parse_name("--recipe", arg, FP4S_NAMES_NV_RECIPE); break;
    case CLI_OPT_FP8_GRAN: q->fp8_gran = parse_name("--fp8-gran", arg, FP4S_NAMES_FP8_GRAN); break;
    case CLI_OPT_2D: q->tile2d = 1; break;
    case CLI_OPT_1D: q->tile2d = 0; break;
    case CLI_OPT_ZERO_BLOCK: q->zero_block = (int)cli_parse_int("--zero-block-code", arg, 0, 254); break;
    case CLI_OPT_4OVER6_ERR:
        if (strcmp(arg, "mae") == 0) q->four6_err = FP4S_4OVER6_MAE;
        else if (strcmp(arg, "mse") == 0) q->four6_err = FP4S_4OVER6_MSE;
        else cli_usage("--4over6-error: expected mae or mse, got '%s'", arg);
        break;
    case CLI_OPT_4OVER6_BOUND:
        if (strcmp(arg, "256") == 0) q->four6_bound = 256;
        else if (strcmp(arg, "448") == 0) q->four6_bound = 448;
        else cli_usage("--4over6-bound: expected 256 or 448, got '%s'", arg);
        break;
    case CLI_OPT_SR:
        if (strcmp(arg, "off") == 0) {
            q->sr = 0;
        } else {
            q->sr = 1;
            q->sr_seed = (uint32_t)cli_parse_int("--sr", arg, 0, 4294967295LL);
        }
        break;
    case CLI_OPT_RHT:
        q->rht = 1;
        if (strcmp(arg, "off") == 0) {
            q->rht = 0;
        } else if (strcmp(arg, "te") == 0) {
            q->rht_signs = FP4S_RHT_TE_SIGNS;
        } else if (strcmp(arg, "none") == 0) {
            q->rht_signs = 0;
        } else {
            char *end = NULL;
            unsigned long v = (arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X')) ? strtoul(arg + 2, &end, 16) : 0;
            if (!end || end == arg + 2 || *end || v > 0xFFFF)
                cli_usage("--rht: expected te, none, off or a 16-bit mask 0xHHHH, got '%s'", arg);
            q->rht_signs = (uint16_t)v;
        }
        break;
    case CLI_OPT_SCOPE: q->scope = parse_name("--scope", arg, FP4S_NAMES_SCOPE); break;
    case CLI_OPT_TSRULE: q->tsrule = parse_name("--tscale-rule", arg, FP4S_NAMES_TSRULE); break;
    case CLI_OPT_4OVER6_MATH: q->four6_math = parse_name("--4over6-math", arg, FP4S_NAMES_4OVER6_MATH); break;
    case CLI_OPT_INPUT_SCALE: q->input_scale = arg; break;
    default: return false;
    }
    return true;
}

fp4s_format cli_quant_format(const cli_quant *q, unsigned formats, const char *what)
{
    fp4s_format fmt = FP4S_MXFP4;
    char a[128];
    if (q->format && fp4s_format_parse(q->format, &fmt)) {
        if (formats == ALL_FORMATS)
            cli_usage("-f: expected %s, got '%s'", names(FP4S_NAMES_FORMAT, ", ", " or ", a, sizeof a), q->format);
        cli_usage("-f: expected %s, got '%s'", format_list(formats, ", ", " or ", a, sizeof a), q->format);
    }
    if (!((formats >> fmt) & 1u))
        cli_usage("-f: %s defined for %s", what, format_list(formats, ", ", " and ", a, sizeof a));
    return fmt;
}

void cli_profile_spec(fp4s_format fmt, const char *profile, const char *opt, fp4s_spec *s)
{
    if (!profile) profile = fp4s_default_profile(fmt);
    int rc = fp4s_spec_profile(s, fmt, profile);
    if (rc == FP4S_EINVAL) {
        fp4s_name_kind kind = fmt == FP4S_MXFP4 ? FP4S_NAMES_PROFILE_MXFP4
                            : fmt == FP4S_NVFP4 ? FP4S_NAMES_PROFILE_NVFP4 : FP4S_NAMES_PROFILE_FP8;
        size_t nn;
        const char **all = cli_kind_names(kind, &nn);
        char what[64];
        snprintf(what, sizeof what, "profiles for %s", fp4s_format_name(fmt));
        char o2[128];
        snprintf(o2, sizeof o2, "%s", opt); /* cli_unknown does not return: nothing to free after it */
        cli_unknown(o2, "profile", profile, what, all, nn);
    }
    if (rc == FP4S_ENOTSUP) cli_usage("%s: profile '%s' does not define %s", opt, profile, fp4s_format_name(fmt));
    if (rc) cli_fail(rc);
    rc = fp4s_spec_check(s);
    if (rc) {
        const char *d = fp4s_last_error();
        cli_usage("%s: %s", opt, (d && *d) ? d : fp4s_strerror(rc));
    }
}

void cli_quant_spec(const cli_quant *q, unsigned formats, const char *what, fp4s_spec *s)
{
    fp4s_format fmt = cli_quant_format(q, formats, what);
    /* rules that the format does not have are a usage error, not silently ignored */
    if (fmt != FP4S_MXFP4 && q->mx_rule >= 0) cli_usage("--scale-rule applies to mxfp4 only");
    if (fmt != FP4S_MXFP4 && q->zero_block >= 0) cli_usage("--zero-block-code applies to mxfp4 only");
    if (fmt != FP4S_NVFP4 && (q->global_scale >= 0 || q->recipe >= 0 || q->tile2d >= 0))
        cli_usage("--global-scale, --recipe, --2d and --1d apply to nvfp4 only");
    if (fmt != FP4S_FP8 && q->fp8_gran >= 0) cli_usage("--fp8-gran applies to fp8 only");
    if (fmt == FP4S_FP8 && q->packing >= 0) cli_usage("--packing applies to the 4-bit formats only");
    cli_profile_spec(fmt, q->profile, "-p", s);
    if (q->mx_rule >= 0) s->mx_rule = (fp4s_mx_rule)q->mx_rule;
    if (q->tie >= 0) s->tie = (fp4s_tie)q->tie;
    if (q->keep_neg_zero >= 0) s->keep_neg_zero = q->keep_neg_zero;
    if (q->packing >= 0) s->packing = (fp4s_packing)q->packing;
    if (q->nonfinite >= 0) s->nonfinite = (fp4s_nonfinite)q->nonfinite;
    if (q->global_scale >= 0) s->global_scale = (fp4s_global_scale)q->global_scale;
    if (q->recipe >= 0) s->nv_recipe = (fp4s_nv_recipe)q->recipe;
    if (q->tile2d >= 0) s->tile2d = q->tile2d;
    if (q->fp8_gran >= 0) {
        /* the block size follows the granularity: 1 per tensor, 128 per tile */
        s->fp8_gran = (fp4s_fp8_gran)q->fp8_gran;
        s->block = s->fp8_gran == FP4S_FP8_TENSOR ? 1 : 128;
    }
    if (q->zero_block >= 0) s->mx_zero_block_code = (uint8_t)q->zero_block;
    if ((q->four6_err >= 0 || q->four6_bound >= 0 || q->four6_math >= 0) &&
        (fmt != FP4S_NVFP4 || !fp4s_nv_recipe_is_4over6(s->nv_recipe)))
        cli_usage("--4over6-error, --4over6-bound and --4over6-math apply to the nvfp4 4over6 recipes only (-p "
                  "te-4over6, flashinfer-4over6, ... or --recipe te-4over6, flashinfer-4over6, "
                  "flashinfer-4over6-exact)");
    if (q->four6_err >= 0) s->nv_4over6_err = (fp4s_4over6_err)q->four6_err;
    if (q->four6_bound >= 0) s->nv_scale_bound = (uint16_t)q->four6_bound;
    if (q->four6_math >= 0) s->nv_4over6_math = (fp4s_4over6_math)q->four6_math;
    if ((q->scope >= 0 || q->tsrule >= 0 || q->input_scale) && fmt != FP4S_NVFP4)
        cli_usage("--scope, --tscale-rule and --input-scale apply to nvfp4 only");
    if (q->scope >= 0) s->nv_scope = (fp4s_nv_scope)q->scope;
    if (q->tsrule >= 0) s->nv_tsrule = (fp4s_nv_tsrule)q->tsrule;
    if (q->input_scale) s->nv_input_scale = strcmp(q->input_scale, "off") ? cli_input_scale(q->input_scale) : 0.0f;
    if (q->sr >= 0) {
        s->sr = q->sr == 1;
        s->sr_seed = q->sr == 1 ? q->sr_seed : 0;
    }
    if (q->rht >= 0) {
        s->rht = q->rht == 1;
        s->rht_signs = q->rht == 1 ? q->rht_signs : 0;
    }
    int rc = fp4s_spec_check(s);
    if (rc) {
        const char *d = fp4s_last_error();
        cli_usage("-p: %s", (d && *d) ? d : fp4s_strerror(rc));
    }
}

/* ---- --input-scale ------------------------------------------------------------------- */

/* The largest value of the float tensor `name` of a .safetensors file (any
 * shape, rank 0 included: ModelOpt writes input_scale as a 0-d tensor). */
static float safetensors_scale(const char *arg, const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    if (!f) cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: cannot open: %s", arg, path, strerror(errno));
    unsigned char len8[8];
    uint64_t hl = 0;
    if (fread(len8, 1, 8, f) != 8) goto bad_header;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    if (hl == 0 || hl > (100u << 20)) goto bad_header;
    char *h = malloc((size_t)hl + 1);
    if (!h) cli_die(FP4S_EXIT_INTERNAL, "--input-scale: out of memory");
    if (fread(h, 1, (size_t)hl, f) != hl) {
        free(h);
        goto bad_header;
    }
    json_error_t je;
    json_t *root = json_loadb(h, (size_t)hl, 0, &je);
    free(h);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        goto bad_header;
    }
    json_t *t = json_object_get(root, name);
    if (!t) {
        json_decref(root);
        fclose(f);
        cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: no tensor '%s'", arg, path, name);
    }
    char dt_buf[16] = "";
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    if (dt) snprintf(dt_buf, sizeof dt_buf, "%s", dt); /* the header is freed before the values are decoded */
    dt = dt ? dt_buf : NULL;
    json_t *shape = json_object_get(t, "shape"), *offs = json_object_get(t, "data_offsets");
    size_t es = !dt ? 0 : !strcmp(dt, "F32") ? 4 : !strcmp(dt, "F64") ? 8 : !strcmp(dt, "BF16") || !strcmp(dt, "F16") ? 2 : 0;
    uint64_t n = 1;
    size_t i;
    json_t *d;
    if (!json_is_array(shape) || !json_is_array(offs) || json_array_size(offs) != 2) es = 0;
    json_array_foreach(shape, i, d) n *= json_is_integer(d) && json_integer_value(d) >= 0 ? (uint64_t)json_integer_value(d) : 0;
    if (es == 0 || n == 0 || n > 4096) {
        json_decref(root);
        fclose(f);
        cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: tensor '%s' is not a float tensor of 1 to 4096 values "
                "(dtype %s)", arg, path, name, dt ? dt : "?");
    }
    json_int_t o0 = json_integer_value(json_array_get(offs, 0)), o1 = json_integer_value(json_array_get(offs, 1));
    json_decref(root);
    if (o0 < 0 || (uint64_t)(o1 - o0) != n * es) {
        fclose(f);
        cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: tensor '%s': data offsets do not match its shape", arg, path,
                name);
    }
    unsigned char buf[4096 * 8];
    if (fseek(f, (long)(8 + hl + (uint64_t)o0), SEEK_SET) || fread(buf, es, n, f) != n) {
        fclose(f);
        cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: tensor '%s': file ends inside its data", arg, path, name);
    }
    fclose(f);
    float m = -1.0f;
    for (uint64_t k = 0; k < n; k++) {
        const unsigned char *p = buf + k * es;
        float v;
        if (es == 4) {
            uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            memcpy(&v, &u, 4);
        } else if (es == 8) {
            uint64_t u = 0;
            for (int b = 7; b >= 0; b--) u = u << 8 | p[b];
            double dv;
            memcpy(&dv, &u, 8);
            v = (float)dv;
        } else {
            uint16_t u = (uint16_t)(p[0] | p[1] << 8);
            v = !strcmp(dt, "BF16") ? fp4s_bf16_decode(u) : fp4s_fp16_decode(u);
        }
        if (v != v) m = v;
        else if (m == m && v > m) m = v;
    }
    return m;
bad_header:
    fclose(f);
    cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s: not a safetensors file (unreadable header)", arg, path);
}

float cli_input_scale(const char *arg)
{
    char *end = NULL;
    errno = 0;
    float v = strtof(arg, &end);
    const char *colon = strrchr(arg, ':');
    if (end != arg && *end == '\0') {
        if (!(v > 0.0f) || isinf(v))
            cli_usage("--input-scale: expected a finite value > 0, FILE:TENSOR or off, got '%s'", arg);
        return v;
    }
    if (!strpbrk(arg, ".:/") || (colon && !colon[1]))
        cli_usage("--input-scale: expected a number, FILE:TENSOR or off, got '%s'", arg);
    const size_t plen = colon ? (size_t)(colon - arg) : 0, sl = strlen(".safetensors");
    if (colon && plen > sl && !strncmp(colon - sl, ".safetensors", sl)) {
        char path[4096];
        snprintf(path, sizeof path, "%.*s", (int)(colon - arg), arg);
        v = safetensors_scale(arg, path, colon + 1);
    } else {
        fp4s_source *src = NULL;
        int rc = fp4s_source_open(arg, &src);
        if (rc) {
            const char *d = fp4s_last_error();
            cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s", arg, d && *d ? d : fp4s_strerror(rc));
        }
        size_t n = fp4s_source_rows(src) * fp4s_source_cols(src);
        if (n == 0 || n > 4096) {
            fp4s_source_close(&src);
            cli_die(FP4S_EXIT_INPUT, "--input-scale %s: expected 1 to 4096 values, found %zu", arg, n);
        }
        float buf[4096];
        rc = fp4s_source_read(src, 0, fp4s_source_rows(src), buf, fp4s_source_cols(src));
        fp4s_source_close(&src);
        if (rc) {
            const char *d = fp4s_last_error();
            cli_die(FP4S_EXIT_INPUT, "--input-scale %s: %s", arg, d && *d ? d : fp4s_strerror(rc));
        }
        v = -1.0f;
        for (size_t k = 0; k < n; k++) {
            if (buf[k] != buf[k]) v = buf[k];
            else if (v == v && buf[k] > v) v = buf[k];
        }
    }
    if (!(v > 0.0f) || isinf(v))
        cli_die(FP4S_EXIT_INPUT, "--input-scale %s: the scale is %g, not a finite value > 0", arg, (double)v);
    return v;
}
