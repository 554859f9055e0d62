#include "cli.h"

#include <fp4scope/capture.h>
#include <fp4scope/tensor.h>
#include <fp4scope/version.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *prog_name = "fp4scope";

void cli_init(const char *prog) { prog_name = prog; }
const char *cli_prog(void) { return prog_name; }

void cli_die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

void cli_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog_name);
    exit(FP4S_EXIT_USAGE);
}

int cli_report(int code)
{
    const char *d = fp4s_last_error();
    fprintf(stderr, "%s: %s\n", prog_name, (d && *d) ? d : fp4s_strerror(code));
    return fp4s_exit_status(code);
}

void cli_fail(int code) { exit(cli_report(code)); }

void cli_failf(int code, const char *fmt, ...)
{
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    const char *d = fp4s_last_error();
    fprintf(stderr, "%s: %s: %s\n", prog_name, ctx, (d && *d) ? d : fp4s_strerror(code));
    exit(fp4s_exit_status(code));
}

long long cli_parse_int(const char *opt, const char *arg, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end == arg || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        cli_usage("%s: expected an integer in [%lld, %lld], got '%s'", opt, lo, hi, arg);
    return v;
}

double cli_parse_double(const char *opt, const char *arg, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        cli_usage("%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, arg);
    return v;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

long long *cli_parse_int_list(const char *opt, const char *arg, size_t *n)
{
    size_t cap = 16, len = 0;
    long long *v = malloc(cap * sizeof *v);
    char *dup = strdup(arg);
    if (!v || !dup) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (char *save = NULL, *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long a, b, step = 1;
        char *end;
        errno = 0;
        a = strtoll(tok, &end, 10);
        if (end == tok || errno) goto bad;
        b = a;
        if (*end == '-' || *end == ':') {
            char sep = *end;
            char *s2 = end + 1;
            b = strtoll(s2, &end, 10);
            if (end == s2 || errno) goto bad;
            if (sep == ':' && *end == ':') {
                char *s3 = end + 1;
                step = strtoll(s3, &end, 10);
                if (end == s3 || errno || step <= 0) goto bad;
            }
        }
        if (*end != '\0' || b < a || (b - a) / step > 10000000) goto bad;
        for (long long x = a; x <= b; x += step) {
            if (len == cap) {
                cap *= 2;
                long long *nv = realloc(v, cap * sizeof *v);
                if (!nv) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
                v = nv;
            }
            v[len++] = x;
        }
    }
    free(dup);
    if (len == 0) cli_usage("%s: empty list", opt);
    qsort(v, len, sizeof *v, cmp_ll);
    size_t u = 0;
    for (size_t i = 0; i < len; i++)
        if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
    *n = u;
    return v;
bad:
    cli_usage("%s: expected a list like '0,5,10-20' or '0:100:10', got '%s'", opt, arg);
}

void cli_version(void)
{
    printf("%s (fp4scope) %s\nfeatures: %s\n", prog_name, fp4s_version(), fp4s_features());
}

json_t *cli_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int cli_json_print(json_t *j)
{
    int rc = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(j);
    if (rc != 0 || fflush(stdout) != 0) {
        fprintf(stderr, "%s: stdout: write failed\n", prog_name);
        return FP4S_EXIT_OUTPUT;
    }
    return FP4S_EXIT_OK;
}

int cli_write_text(const char *path, const char *text, size_t len)
{
    if (strcmp(path, "-") == 0)
        return fwrite(text, 1, len, stdout) == len ? 0 : FP4S_EWRITE;
    fp4s_outfile *o;
    int rc = fp4s_outfile_begin(path, &o);
    if (rc) return rc;
    FILE *f = fopen(fp4s_outfile_tmppath(o), "wb");
    if (!f) {
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot write: %s", path, strerror(errno));
    }
    size_t w = fwrite(text, 1, len, f);
    if (fclose(f) != 0 || w != len) {
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_EWRITE, "%s: write failed", path);
    }
    return fp4s_outfile_commit(&o);
}

bool cli_source_synthetic(const char *spec)
{
    fp4s_capture_info info;
    if (!spec || !*spec) return false;
    if (fp4s_capture_info_read(spec, &info) == 0) return info.synthetic;
    /* file.h5:/dataset or file:NAME: try the file part */
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec) return false;
    size_t n = (size_t)(colon - spec);
    char *file = strndup(spec, n);
    bool syn = file && fp4s_capture_info_read(file, &info) == 0 && info.synthetic;
    free(file);
    return syn;
}

void cli_spec_fp4(const char *fmt_s, const char *profile, const char *rule_s, const char *what,
                  fp4s_spec *spec)
{
    fp4s_format fmt = FP4S_MXFP4;
    if (fmt_s && fp4s_format_parse(fmt_s, &fmt)) cli_usage("-f: %s", fp4s_last_error());
    if (fmt != FP4S_MXFP4 && fmt != FP4S_NVFP4) cli_usage("-f: %s defined for mxfp4 and nvfp4", what);
    if (!profile) profile = fp4s_default_profile(fmt);
    int rc = fp4s_spec_profile(spec, fmt, profile);
    if (rc) cli_usage("-p: %s", *fp4s_last_error() ? fp4s_last_error() : fp4s_strerror(rc));
    if (rule_s) {
        if (fmt != FP4S_MXFP4) cli_usage("--scale-rule applies to mxfp4 only");
        if (fp4s_mx_rule_parse(rule_s, &spec->mx_rule)) cli_usage("--scale-rule: %s", fp4s_last_error());
    }
    if (fp4s_spec_check(spec)) cli_usage("%s", fp4s_last_error());
}

bool cli_trace_option(int id, const char *arg, fp4s_mm_opts *mo, fp4s_trace_opts *to,
                      fp4s_mm_onset_opts *oo)
{
    switch (id) {
    case CLI_OPT_IS_CAP: mo->is_cap = cli_parse_double("--is-cap", arg, 1.000001, 1e12); break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "auto") == 0) to->format = FP4S_TRACE_AUTO;
        else if (strcmp(arg, "csv") == 0 || strcmp(arg, "tsv") == 0) to->format = FP4S_TRACE_CSV;
        else if (strcmp(arg, "jsonl") == 0) to->format = FP4S_TRACE_JSONL;
        else if (strcmp(arg, "capture") == 0 || strcmp(arg, "h5") == 0) to->format = FP4S_TRACE_CAPTURE;
        else cli_usage("--format: expected auto, csv, jsonl or capture, got '%s'", arg);
        break;
    case CLI_OPT_DELIM:
        if (strcmp(arg, "tab") == 0 || strcmp(arg, "\\t") == 0) to->delim = '\t';
        else if (strlen(arg) == 1 && arg[0] != '"' && arg[0] != '\n') to->delim = arg[0];
        else cli_usage("--delim: expected one character or 'tab', got '%s'", arg);
        break;
    case CLI_OPT_COL_STEP: to->col_step = arg; break;
    case CLI_OPT_COL_SEQ: to->col_seq = arg; break;
    case CLI_OPT_COL_TRAINER: to->col_trainer = arg; break;
    case CLI_OPT_COL_ROLLOUT: to->col_rollout = arg; break;
    case CLI_OPT_COL_POS: to->col_pos = arg; break;
    case CLI_OPT_COL_MASK: to->col_mask = arg; break;
    case CLI_OPT_COL_RUN: to->col_run = arg; break;
    case CLI_OPT_ALLOW_POS: mo->allow_positive = true; break;
    case CLI_OPT_SKIP_EMPTY: mo->skip_empty = true; break;
    case CLI_OPT_DEDUPE: to->dedupe = true; break;
    case CLI_OPT_BASELINE: oo->baseline_steps = (size_t)cli_parse_int("--baseline-steps", arg, 1, 100000000); break;
    case CLI_OPT_MARGIN: oo->margin = cli_parse_double("--margin", arg, 0, 1e12); break;
    case CLI_OPT_SIGMA: oo->sigma = cli_parse_double("--sigma", arg, 0, 1e12); break;
    case CLI_OPT_CONSEC: oo->consecutive = (size_t)cli_parse_int("--consecutive", arg, 1, 100000000); break;
    default: return false;
    }
    return true;
}
