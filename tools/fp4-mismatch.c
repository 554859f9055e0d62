/* fp4-mismatch: rollout / trainer log-prob mismatch per training step, the
 * onset of divergence, the trend and a comparison of runs (man/fp4-mismatch.1). */
#include "cli.h"

#include <fp4scope/mismatch.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_METRIC = 256, OPT_CLAMP, OPT_BY_POS, OPT_EVERY, OPT_JSON, OPT_CSV, OPT_NAME, OPT_LEVEL,
    OPT_FAIL_ONSET, OPT_OUTPUT, OPT_HELP, OPT_VERSION
}; /* the trace and onset options are CLI_OPT_* (cli.h) */

static const struct option longopts[] = {
    {"metric", required_argument, NULL, OPT_METRIC},
    {"clamp", required_argument, NULL, OPT_CLAMP},
    {"by-position", no_argument, NULL, OPT_BY_POS},
    {"every", required_argument, NULL, OPT_EVERY},
    {"json", no_argument, NULL, OPT_JSON},
    {"csv", no_argument, NULL, OPT_CSV},
    {"name", required_argument, NULL, OPT_NAME},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"fail-on-onset", no_argument, NULL, OPT_FAIL_ONSET},
    {"output", required_argument, NULL, OPT_OUTPUT},
    CLI_TRACE_LONGOPTS
    CLI_OUTPUT_LONGOPTS
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf("Usage: fp4-mismatch [OPTIONS] TRACE...\n"
           "Rollout/trainer log-prob mismatch per training step, as RL frameworks log it\n"
           "(verl, slime, OpenRLHF, llama.cpp percentiles), the onset of divergence, the\n"
           "trend, and runs compared at equal steps. TRACE: CSV/TSV or JSONL with one row\n"
           "per token, or an fp4scope capture (.h5); '-' reads CSV/JSONL from stdin.\n\n"
           "Metrics:\n"
           "  --metric M          metric for onset, trend and comparison (default mean_abs)\n"
           "  --is-cap C          IS cap: fractions above C / below 1/C, clamp of is_std/is_ess (2)\n"
           "  --clamp B           bound of rho before exp where verl clamps (20)\n"
           "  --by-position       also split every step into first token / the rest\n"
           "  --allow-positive    accept positive log-probs (default: an error)\n"
           "  --skip-empty        skip steps without counted tokens (default: an error)\n"
           "  --dedupe            drop repeated (step, seq, pos) tokens (default: an error)\n"
           "Onset and trend:\n"
           "  --baseline-steps N  first N steps form the baseline (10)\n"
           "  --margin R          threshold at least R * |baseline| above it (0.5)\n"
           "  --sigma K           ... and at least K robust sigmas above it (3)\n"
           "  --consecutive N     steps in a row above the threshold (5)\n"
           "  --level L           confidence level of the trend interval (0.95)\n"
           "  --fail-on-onset     exit 1 when an onset is found in any run\n"
           "Input:\n"
           "  --name NAME         run name of the next TRACE (repeat per TRACE; default: file name)\n"
           "  --format F          auto, csv, jsonl or capture (auto)\n"
           "  --delim C           CSV delimiter: ',', ';', 'tab' (auto from the header)\n"
           "  --col-step NAME     column names (step, seq, trainer_logprob, rollout_logprob,\n"
           "  --col-seq NAME        pos, mask, run)\n"
           "  --col-trainer NAME  --col-rollout NAME  --col-pos NAME  --col-mask NAME  --col-run NAME\n"
           "Output:\n"
           "  --every N           list every N-th step only (1)\n"
           "  --json | --csv      machine-readable output (default: tables)\n"
           "  -o, --output FILE   write to FILE (atomically) instead of stdout\n"
           "  --help, --version\n\n"
           "Exit status: 0 ok, 1 onset found with --fail-on-onset, 2 usage, 3 bad input,\n"
           "4 output not written, 5 internal error.\n");
}

typedef struct cfg {
    const char *metric;
    int mi;
    size_t every;
    int json, csv, fail_onset;
    double level;
    fp4s_mm_opts mo;
    fp4s_mm_onset_opts oo;
} cfg;

typedef struct run_extra {
    fp4s_mm_onset onset;
    int onset_rc;
    fp4s_mm_trend trend;
    int trend_rc;
    char trend_note[256];
    double *vals;
    int64_t *steps;
} run_extra;

/* ---- output buffer ------------------------------------------------------------------- */
typedef struct sbuf {
    char *p;
    size_t n;
    FILE *f;
} sbuf;

static const char *fmt_g(char *b, size_t n, double v)
{
    if (isnan(v)) snprintf(b, n, "nan");
    else snprintf(b, n, "%.4g", v);
    return b;
}

/* ---- summary helpers --------------------------------------------------------------------- */
static double series_median(const double *v, size_t n)
{
    double *t = malloc((n ? n : 1) * sizeof *t);
    size_t k = 0;
    if (!t) return NAN;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) t[k++] = v[i];
    double f = 0.5, out = NAN;
    if (k) fp4s_percentiles(t, k, &f, 1, &out);
    free(t);
    return out;
}

static void series_minmax(const double *v, size_t n, double *mn, double *mx)
{
    *mn = INFINITY;
    *mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        if (v[i] < *mn) *mn = v[i];
        if (v[i] > *mx) *mx = v[i];
    }
    if (*mn > *mx) *mn = *mx = NAN;
}

/* ---- JSON ------------------------------------------------------------------------------------ */
static json_t *metrics_json(const fp4s_mm_metrics *m, const char *run, const char *part)
{
    json_t *o = json_object();
    if (run) json_object_set_new(o, "run", json_string(run));
    json_object_set_new(o, "step", json_integer(m->step));
    if (part) json_object_set_new(o, "part", json_string(part));
    json_object_set_new(o, "tokens", json_integer((json_int_t)m->tokens));
    json_object_set_new(o, "sequences", json_integer((json_int_t)m->sequences));
    json_object_set_new(o, "masked", json_integer((json_int_t)m->masked));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)m->nonfinite));
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++)
        json_object_set_new(o, fp4s_mm_metric_name(i), cli_json_real(fp4s_mm_metric_value(m, i)));
    return o;
}

static json_t *onset_json(const cfg *c, const run_extra *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(c->metric));
    json_object_set_new(o, "found", json_boolean(x->onset.found));
    json_object_set_new(o, "step", x->onset.found ? json_integer(x->onset.step) : json_null());
    json_object_set_new(o, "value", x->onset.found ? cli_json_real(x->onset.value) : json_null());
    json_object_set_new(o, "baseline", cli_json_real(x->onset.baseline));
    json_object_set_new(o, "spread", cli_json_real(x->onset.spread));
    json_object_set_new(o, "threshold", cli_json_real(x->onset.threshold));
    json_object_set_new(o, "baseline_steps", json_integer((json_int_t)c->oo.baseline_steps));
    json_object_set_new(o, "margin", json_real(c->oo.margin));
    json_object_set_new(o, "sigma", json_real(c->oo.sigma));
    json_object_set_new(o, "consecutive", json_integer((json_int_t)c->oo.consecutive));
    if (x->onset_rc) json_object_set_new(o, "note", json_string("too few steps for the baseline and the run"));
    return o;
}

static json_t *trend_json(const cfg *c, const run_extra *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(c->metric));
    json_object_set_new(o, "valid", json_boolean(x->trend.valid));
    json_object_set_new(o, "n", json_integer((json_int_t)x->trend.n));
    json_object_set_new(o, "slope", cli_json_real(x->trend.slope));
    json_object_set_new(o, "se", cli_json_real(x->trend.se));
    json_object_set_new(o, "lo", cli_json_real(x->trend.lo));
    json_object_set_new(o, "hi", cli_json_real(x->trend.hi));
    json_object_set_new(o, "level", json_real(x->trend.level));
    json_object_set_new(o, "intercept", cli_json_real(x->trend.intercept));
    if (x->trend_rc == FP4S_ENOTSUP) json_object_set_new(o, "note", json_string("built without GSL"));
    else if (x->trend_rc) json_object_set_new(o, "note", json_string(x->trend_note));
    return o;
}

/* Steps present in every run, as indices per run; returns the count. */
static size_t common_steps(const fp4s_mm_result *res, size_t **idx_out)
{
    const fp4s_mm_run *r0 = &res->runs[0];
    size_t *idx = malloc((r0->nsteps ? r0->nsteps : 1) * res->nruns * sizeof *idx);
    size_t *pos = calloc(res->nruns, sizeof *pos);
    size_t k = 0;
    if (!idx || !pos) {
        free(idx);
        free(pos);
        *idx_out = NULL;
        return 0;
    }
    for (size_t i = 0; i < r0->nsteps; i++) {
        int64_t s = r0->steps[i].step;
        int all = 1;
        for (size_t r = 1; r < res->nruns && all; r++) {
            const fp4s_mm_run *rr = &res->runs[r];
            while (pos[r] < rr->nsteps && rr->steps[pos[r]].step < s) pos[r]++;
            if (pos[r] >= rr->nsteps || rr->steps[pos[r]].step != s) all = 0;
        }
        if (!all) continue;
        idx[k * res->nruns] = i;
        for (size_t r = 1; r < res->nruns; r++) idx[k * res->nruns + r] = pos[r];
        k++;
    }
    free(pos);
    *idx_out = idx;
    return k;
}

static json_t *comparison_json(const cfg *c, const fp4s_mm_result *res)
{
    size_t *idx;
    size_t k = common_steps(res, &idx);
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(c->metric));
    json_object_set_new(o, "reference", json_string(res->runs[0].name));
    json_object_set_new(o, "common_steps", json_integer((json_int_t)k));
    json_t *ratios = json_object();
    for (size_t r = 1; r < res->nruns; r++) {
        double sl = 0;
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            double a = fp4s_mm_metric_value(&res->runs[0].steps[idx[i * res->nruns]], (size_t)c->mi);
            double b = fp4s_mm_metric_value(&res->runs[r].steps[idx[i * res->nruns + r]], (size_t)c->mi);
            if (a > 0 && b > 0 && isfinite(a) && isfinite(b)) {
                sl += log(b / a);
                m++;
            }
        }
        json_object_set_new(ratios, res->runs[r].name, m ? cli_json_real(exp(sl / (double)m)) : json_null());
    }
    json_object_set_new(o, "geomean_ratio", ratios);
    json_t *arr = json_array();
    for (size_t i = 0; i < k; i += c->every) {
        json_t *e = json_object();
        json_object_set_new(e, "step", json_integer(res->runs[0].steps[idx[i * res->nruns]].step));
        json_t *vals = json_object();
        for (size_t r = 0; r < res->nruns; r++)
            json_object_set_new(vals, res->runs[r].name,
                                cli_json_real(fp4s_mm_metric_value(&res->runs[r].steps[idx[i * res->nruns + r]],
                                                                   (size_t)c->mi)));
        json_object_set_new(e, "values", vals);
        json_array_append_new(arr, e);
    }
    json_object_set_new(o, "steps", arr);
    free(idx);
    return o;
}

static json_t *result_json(const cfg *c, const fp4s_mm_result *res, run_extra *ex)
{
    json_t *root = json_object();
    json_object_set_new(root, "tool", json_string("fp4-mismatch"));
    json_object_set_new(root, "version", json_string(fp4s_version()));
    json_object_set_new(root, "metric", json_string(c->metric));
    json_t *opt = json_object();
    json_object_set_new(opt, "is_cap", json_real(c->mo.is_cap));
    json_object_set_new(opt, "clamp", json_real(c->mo.clamp));
    json_object_set_new(opt, "by_position", json_boolean(c->mo.by_position));
    json_object_set_new(opt, "allow_positive", json_boolean(c->mo.allow_positive));
    json_object_set_new(opt, "skip_empty", json_boolean(c->mo.skip_empty));
    json_object_set_new(opt, "every", json_integer((json_int_t)c->every));
    json_object_set_new(root, "options", opt);
    json_t *runs = json_array();
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        json_t *jr = json_object();
        json_object_set_new(jr, "name", json_string(run->name));
        json_object_set_new(jr, "source", json_string(run->source));
        json_object_set_new(jr, "synthetic", json_boolean(cli_source_synthetic(run->source)));
        json_t *steps = json_array();
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            json_t *m = metrics_json(&run->steps[i], NULL, NULL);
            if (run->first) {
                json_object_set_new(m, "first", metrics_json(&run->first[i], NULL, NULL));
                json_object_set_new(m, "rest", metrics_json(&run->rest[i], NULL, NULL));
            }
            json_array_append_new(steps, m);
        }
        json_object_set_new(jr, "steps", steps);
        json_t *sm = json_object();
        double mn, mx;
        series_minmax(ex[r].vals, run->nsteps, &mn, &mx);
        json_object_set_new(sm, "steps", json_integer((json_int_t)run->nsteps));
        json_object_set_new(sm, "first_step", run->nsteps ? json_integer(run->steps[0].step) : json_null());
        json_object_set_new(sm, "last_step", run->nsteps ? json_integer(run->steps[run->nsteps - 1].step) : json_null());
        json_object_set_new(sm, "tokens", json_integer((json_int_t)run->tokens));
        json_object_set_new(sm, "masked", json_integer((json_int_t)run->masked));
        json_object_set_new(sm, "nonfinite", json_integer((json_int_t)run->nonfinite));
        json_object_set_new(sm, "skipped_steps", json_integer((json_int_t)run->skipped_steps));
        json_object_set_new(sm, "metric", json_string(c->metric));
        json_object_set_new(sm, "first", run->nsteps ? cli_json_real(ex[r].vals[0]) : json_null());
        json_object_set_new(sm, "last", run->nsteps ? cli_json_real(ex[r].vals[run->nsteps - 1]) : json_null());
        json_object_set_new(sm, "min", cli_json_real(mn));
        json_object_set_new(sm, "max", cli_json_real(mx));
        json_object_set_new(sm, "median", cli_json_real(series_median(ex[r].vals, run->nsteps)));
        json_object_set_new(jr, "summary", sm);
        json_object_set_new(jr, "onset", onset_json(c, &ex[r]));
        json_object_set_new(jr, "trend", trend_json(c, &ex[r]));
        json_array_append_new(runs, jr);
    }
    json_object_set_new(root, "runs", runs);
    if (res->nruns > 1) json_object_set_new(root, "comparison", comparison_json(c, res));
    return root;
}

/* ---- CSV --------------------------------------------------------------------------------------- */
static void csv_quote(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_row(FILE *f, const char *run, const char *part, const fp4s_mm_metrics *m)
{
    csv_quote(f, run);
    fprintf(f, ",%s,%lld,%llu,%llu,%llu,%llu", part, (long long)m->step, (unsigned long long)m->tokens,
            (unsigned long long)m->sequences, (unsigned long long)m->masked, (unsigned long long)m->nonfinite);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        double v = fp4s_mm_metric_value(m, i);
        if (isnan(v)) fputs(",nan", f);
        else fprintf(f, ",%.17g", v);
    }
    fputc('\n', f);
}

static void write_csv(FILE *f, const cfg *c, const fp4s_mm_result *res)
{
    fputs("run,part,step,tokens,sequences,masked,nonfinite", f);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) fprintf(f, ",%s", fp4s_mm_metric_name(i));
    fputc('\n', f);
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            csv_row(f, run->name, "all", &run->steps[i]);
            if (run->first) {
                csv_row(f, run->name, "first", &run->first[i]);
                csv_row(f, run->name, "rest", &run->rest[i]);
            }
        }
    }
}

/* ---- tables ------------------------------------------------------------------------------------- */
static const char *const table_cols[] = {"mean_abs", "max_abs", "k1", "k3", "chi2_token", "is_ess", "abs_p99"};

static void table_line(FILE *f, const cfg *c, const char *part, const fp4s_mm_metrics *m, int extra)
{
    char b[32];
    fprintf(f, "%8lld", (long long)m->step);
    if (part) fprintf(f, " %-5s", part);
    fprintf(f, " %10llu %6llu", (unsigned long long)m->tokens, (unsigned long long)m->sequences);
    for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++)
        fprintf(f, " %10s", fmt_g(b, sizeof b, fp4s_mm_metric_value(m, (size_t)fp4s_mm_metric_index(table_cols[k]))));
    if (extra) fprintf(f, " %10s", fmt_g(b, sizeof b, fp4s_mm_metric_value(m, (size_t)c->mi)));
    fputc('\n', f);
}

static void write_tables(FILE *f, const cfg *c, const fp4s_mm_result *res, const run_extra *ex)
{
    int extra = 1;
    for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++)
        if (strcmp(table_cols[k], c->metric) == 0) extra = 0;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        const run_extra *x = &ex[r];
        fprintf(f, "run %s (%s%s): %zu steps, %llu tokens", run->name, run->source,
                cli_source_synthetic(run->source) ? ", synthetic capture" : "", run->nsteps,
                (unsigned long long)run->tokens);
        if (run->masked || run->nonfinite || run->skipped_steps)
            fprintf(f, ", %llu masked, %llu with NaN/Inf log-probs excluded, %zu empty steps skipped",
                    (unsigned long long)run->masked, (unsigned long long)run->nonfinite, run->skipped_steps);
        fputc('\n', f);
        fprintf(f, "%8s", "step");
        if (run->first) fprintf(f, " %-5s", "part");
        fprintf(f, " %10s %6s", "tokens", "seqs");
        for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++) fprintf(f, " %10s", table_cols[k]);
        if (extra) fprintf(f, " %10.10s", c->metric);
        fputc('\n', f);
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            table_line(f, c, run->first ? "all" : NULL, &run->steps[i], extra);
            if (run->first) {
                table_line(f, c, "first", &run->first[i], extra);
                table_line(f, c, "rest", &run->rest[i], extra);
            }
        }
        double mn, mx;
        series_minmax(x->vals, run->nsteps, &mn, &mx);
        fprintf(f, "summary: %s first %s, last %s, median %s, min %s, max %s\n", c->metric,
                fmt_g(b1, sizeof b1, x->vals[0]), fmt_g(b2, sizeof b2, x->vals[run->nsteps - 1]),
                fmt_g(b3, sizeof b3, series_median(x->vals, run->nsteps)), fmt_g(b4, sizeof b4, mn),
                fmt_g(b5, sizeof b5, mx));
        if (x->onset.found)
            fprintf(f, "onset: step %lld (%s %s > threshold %s; baseline %s, robust sigma %s over the first %zu steps; "
                       "stays above for %zu steps)\n",
                    (long long)x->onset.step, c->metric, fmt_g(b1, sizeof b1, x->onset.value),
                    fmt_g(b2, sizeof b2, x->onset.threshold), fmt_g(b3, sizeof b3, x->onset.baseline),
                    fmt_g(b4, sizeof b4, x->onset.spread), c->oo.baseline_steps, c->oo.consecutive);
        else if (x->onset_rc)
            fprintf(f, "onset: not computed (%zu steps; needs %zu baseline + %zu consecutive)\n", run->nsteps,
                    c->oo.baseline_steps, c->oo.consecutive);
        else
            fprintf(f, "onset: none (%s never stays above %s for %zu steps; baseline %s)\n", c->metric,
                    fmt_g(b1, sizeof b1, x->onset.threshold), c->oo.consecutive,
                    fmt_g(b2, sizeof b2, x->onset.baseline));
        if (x->trend.valid) {
            fprintf(f, "trend: ln(%s) slope %s per step, %g%% CI [%s, %s], n = %zu", c->metric,
                    fmt_g(b1, sizeof b1, x->trend.slope), 100 * x->trend.level, fmt_g(b2, sizeof b2, x->trend.lo),
                    fmt_g(b3, sizeof b3, x->trend.hi), x->trend.n);
            if (x->trend.slope > 0) fprintf(f, " (doubles every %.3g steps)", log(2.0) / x->trend.slope);
            fputc('\n', f);
        } else if (x->trend_rc == FP4S_ENOTSUP) {
            fprintf(f, "trend: unavailable (built without GSL)\n");
        } else {
            fprintf(f, "trend: not computed (%s)\n", x->trend_note);
        }
        fputc('\n', f);
    }
    if (res->nruns > 1) {
        size_t *idx;
        size_t k = common_steps(res, &idx);
        fprintf(f, "comparison of %s at equal steps (%zu common steps), ratio to run %s:\n", c->metric, k,
                res->runs[0].name);
        fprintf(f, "%8s", "step");
        for (size_t r = 0; r < res->nruns; r++) fprintf(f, " %14.14s", res->runs[r].name);
        for (size_t r = 1; r < res->nruns; r++) fprintf(f, " %8s%-6.6s", "ratio:", res->runs[r].name);
        fputc('\n', f);
        for (size_t i = 0; i < k; i += c->every) {
            double a = fp4s_mm_metric_value(&res->runs[0].steps[idx[i * res->nruns]], (size_t)c->mi);
            fprintf(f, "%8lld", (long long)res->runs[0].steps[idx[i * res->nruns]].step);
            for (size_t r = 0; r < res->nruns; r++)
                fprintf(f, " %14s",
                        fmt_g(b1, sizeof b1,
                              fp4s_mm_metric_value(&res->runs[r].steps[idx[i * res->nruns + r]], (size_t)c->mi)));
            for (size_t r = 1; r < res->nruns; r++) {
                double b = fp4s_mm_metric_value(&res->runs[r].steps[idx[i * res->nruns + r]], (size_t)c->mi);
                fprintf(f, " %14s", fmt_g(b1, sizeof b1, b / a));
            }
            fputc('\n', f);
        }
        free(idx);
    }
}

int main(int argc, char **argv)
{
    cli_init("fp4-mismatch");
    cfg c;
    memset(&c, 0, sizeof c);
    c.metric = "mean_abs";
    c.every = 1;
    c.level = 0.95;
    fp4s_mm_opts_defaults(&c.mo);
    fp4s_mm_onset_opts_defaults(&c.oo);
    fp4s_trace_opts t;
    fp4s_trace_opts_defaults(&t);
    const char *output = "-";
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    size_t nnames = 0;
    if (!names) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int ch;
    while ((ch = cli_getopt(argc, argv, "o:", longopts)) != -1) {
        switch (ch) {
        case OPT_METRIC: c.metric = optarg; break;
        case OPT_CLAMP: c.mo.clamp = cli_parse_double("--clamp", optarg, 1e-6, 700); break;
        case OPT_BY_POS: c.mo.by_position = true; break;
        case OPT_EVERY: c.every = (size_t)cli_parse_int("--every", optarg, 1, 1000000000); break;
        case OPT_JSON: c.json = 1; break;
        case OPT_CSV: c.csv = 1; break;
        case OPT_NAME: names[nnames++] = optarg; break;
        case OPT_LEVEL: c.level = cli_parse_double("--level", optarg, 1e-6, 0.999999); break;
        case OPT_FAIL_ONSET: c.fail_onset = 1; break;
        case 'o':
        case OPT_OUTPUT: output = optarg; break;
        case CLI_OPT_FORCE: cli_force(); break;
        case OPT_HELP: usage(); free(names); return 0;
        case OPT_VERSION: cli_version(); free(names); return 0;
        default:
            if (!cli_trace_option(ch, optarg, &c.mo, &t, &c.oo)) cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (c.json && c.csv) cli_usage("--json and --csv exclude each other");
    c.mi = fp4s_mm_metric_index(c.metric);
    if (c.mi < 0) {
        fprintf(stderr, "fp4-mismatch: --metric: unknown metric '%s'; one of:", c.metric);
        for (size_t i = 0; i < fp4s_mm_metric_count(); i++) fprintf(stderr, " %s", fp4s_mm_metric_name(i));
        fputc('\n', stderr);
        free(names);
        return FP4S_EXIT_USAGE;
    }
    int ntr = argc - optind;
    if (ntr < 1) cli_usage("no TRACE given");
    if (nnames > (size_t)ntr) cli_usage("%zu --name options for %d traces", nnames, ntr);
    int nstdin = 0;
    for (int i = optind; i < argc; i++) nstdin += strcmp(argv[i], "-") == 0;
    if (nstdin > 1) cli_usage("'-' (stdin) given more than once");
    for (int i = optind; i < argc; i++) cli_input(argv[i]);
    if (strcmp(output, "-") != 0) cli_output(output);

    fp4s_mm_result res = {0, NULL};
    for (int i = 0; i < ntr; i++) {
        int rc = fp4s_mm_analyze(argv[optind + i], (size_t)i < nnames ? names[i] : NULL, &c.mo, &t, &res);
        if (rc) {
            fp4s_mm_result_free(&res);
            free(names);
            return cli_report(rc);
        }
    }
    for (size_t a = 0; a < res.nruns; a++)
        for (size_t b = a + 1; b < res.nruns; b++)
            if (strcmp(res.runs[a].name, res.runs[b].name) == 0) {
                fprintf(stderr, "fp4-mismatch: two runs are named '%s' (%s and %s); name them with --name\n",
                        res.runs[a].name, res.runs[a].source, res.runs[b].source);
                fp4s_mm_result_free(&res);
                free(names);
                return FP4S_EXIT_USAGE;
            }
    run_extra *ex = calloc(res.nruns, sizeof *ex);
    if (!ex) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int any_onset = 0;
    for (size_t r = 0; r < res.nruns; r++) {
        const fp4s_mm_run *run = &res.runs[r];
        ex[r].vals = malloc((run->nsteps ? run->nsteps : 1) * sizeof *ex[r].vals);
        ex[r].steps = malloc((run->nsteps ? run->nsteps : 1) * sizeof *ex[r].steps);
        if (!ex[r].vals || !ex[r].steps) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        for (size_t i = 0; i < run->nsteps; i++) {
            ex[r].vals[i] = fp4s_mm_metric_value(&run->steps[i], (size_t)c.mi);
            ex[r].steps[i] = run->steps[i].step;
        }
        ex[r].onset_rc = fp4s_mm_onset_find(ex[r].steps, ex[r].vals, run->nsteps, &c.oo, &ex[r].onset);
        if (ex[r].onset_rc && ex[r].onset_rc != FP4S_EEMPTY) {
            int st = cli_report(ex[r].onset_rc);
            for (size_t q = 0; q <= r; q++) {
                free(ex[q].vals);
                free(ex[q].steps);
            }
            free(ex);
            fp4s_mm_result_free(&res);
            free(names);
            return st;
        }
        ex[r].trend_rc = fp4s_mm_trend_fit(ex[r].steps, ex[r].vals, run->nsteps, c.level, &ex[r].trend);
        if (ex[r].trend_rc) snprintf(ex[r].trend_note, sizeof ex[r].trend_note, "%s", fp4s_last_error());
        any_onset |= ex[r].onset.found;
    }
    int status = 0;
    if (c.json) {
        json_t *j = result_json(&c, &res, ex);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(j);
        if (!s) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        size_t n = strlen(s);
        char *s2 = realloc(s, n + 2);
        if (!s2) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        s2[n] = '\n';
        s2[n + 1] = '\0';
        int rc = cli_write_text(output, s2, n + 1);
        free(s2);
        if (rc) status = cli_report(rc);
        else status = cli_commit();
    } else {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        if (c.csv) write_csv(f, &c, &res);
        else write_tables(f, &c, &res, ex);
        if (fclose(f) != 0) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        int rc = cli_write_text(output, buf, len);
        free(buf);
        if (rc) status = cli_report(rc);
        else status = cli_commit();
    }
    for (size_t r = 0; r < res.nruns; r++) {
        free(ex[r].vals);
        free(ex[r].steps);
    }
    free(ex);
    fp4s_mm_result_free(&res);
    free(names);
    if (!status && c.fail_onset && any_onset) status = FP4S_EXIT_CHECK;
    return status;
}
