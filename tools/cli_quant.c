/* The quantizer option group of every tool that quantizes (cli.h): -f, -p and
 * every override of a profile's rules, their help lines, and the spec they
 * make. The names come from the library's tables (fp4s_names), so help,
 * errors and parsing list the same values. */
#include "cli.h"

#include <fp4scope/spec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL_FORMATS ((1u << FP4S_MXFP4) | (1u << FP4S_NVFP4) | (1u << FP4S_FP8))

void cli_quant_init(cli_quant *q)
{
    memset(q, 0, sizeof *q);
    q->mx_rule = q->tie = q->keep_neg_zero = q->packing = q->nonfinite = q->global_scale = -1;
    q->recipe = q->tile2d = q->fp8_gran = q->zero_block = q->four6_err = q->four6_bound = q->sr = q->rht = -1;
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
    printf("      --4over6-error E  NVFP4 te-4over6: the candidates' error, mae (default) or mse\n");
    printf("      --4over6-bound B  NVFP4 te-4over6: the tensor scale's E4M3 bound, 256 (default) or 448\n");
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
        char alts[512];
        cli_usage("%s: expected one of %s, got '%s'", opt, names(kind, ", ", NULL, alts, sizeof alts), arg);
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
        char alts[1024];
        fp4s_name_kind kind = fmt == FP4S_MXFP4 ? FP4S_NAMES_PROFILE_MXFP4
                            : fmt == FP4S_NVFP4 ? FP4S_NAMES_PROFILE_NVFP4 : FP4S_NAMES_PROFILE_FP8;
        cli_usage("%s: unknown profile '%s' for %s; profiles: %s", opt, profile, fp4s_format_name(fmt),
                  names(kind, ", ", NULL, alts, sizeof alts));
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
    if ((q->four6_err >= 0 || q->four6_bound >= 0) && (fmt != FP4S_NVFP4 || s->nv_recipe != FP4S_NV_TE_4OVER6))
        cli_usage("--4over6-error and --4over6-bound apply to the nvfp4 te-4over6 recipe only (-p te-4over6 or "
                  "--recipe te-4over6)");
    if (q->four6_err >= 0) s->nv_4over6_err = (fp4s_4over6_err)q->four6_err;
    if (q->four6_bound >= 0) s->nv_scale_bound = (uint16_t)q->four6_bound;
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
