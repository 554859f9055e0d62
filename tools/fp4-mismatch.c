/* fp4-mismatch: rollout / trainer log-prob mismatch per training step, the
 * onset of divergence, the trend and a comparison of runs (man/fp4-mismatch.1). */
#include "cli.h"
#include "suggest.h"
#include "par.h"

#include <fp4scope/mismatch.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_METRIC = 256, OPT_CLAMP, OPT_BY_POS, OPT_EVERY, OPT_NAME, OPT_LEVEL,
    OPT_FAIL_ONSET, OPT_OUTPUT, OPT_NAMES, OPT_GATE, OPT_BASELINE, OPT_BASELINE_RUN,
    OPT_GATE_METRICS, OPT_GATE_SIGMA, OPT_GATE_STEPS, OPT_GATE_WINDOW, OPT_MIN_SEGMENT
}; /* the trace and onset options are CLI_OPT_* (cli.h) */

static const struct option longopts[] = {
    {"metric", required_argument, NULL, OPT_METRIC},
    {"clamp", required_argument, NULL, OPT_CLAMP},
    {"by-position", no_argument, NULL, OPT_BY_POS},
    {"every", required_argument, NULL, OPT_EVERY},
    CLI_REPORT_LONGOPTS
    {"name", required_argument, NULL, OPT_NAME},
    {"level", required_argument, NULL, OPT_LEVEL},
    {"fail-on-onset", no_argument, NULL, OPT_FAIL_ONSET},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"names", required_argument, NULL, OPT_NAMES},
    {"gate", optional_argument, NULL, OPT_GATE},
    {"baseline", required_argument, NULL, OPT_BASELINE},
    {"baseline-run", required_argument, NULL, OPT_BASELINE_RUN},
    {"gate-metrics", required_argument, NULL, OPT_GATE_METRICS},
    {"gate-sigma", required_argument, NULL, OPT_GATE_SIGMA},
    {"gate-steps", required_argument, NULL, OPT_GATE_STEPS},
    {"gate-window", required_argument, NULL, OPT_GATE_WINDOW},
    {"min-segment", required_argument, NULL, OPT_MIN_SEGMENT},
    CLI_TRACE_LONGOPTS
    CLI_OUTPUT_LONGOPTS
    CLI_COMMON_LONGOPTS
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf("Usage: fp4-mismatch [OPTIONS] TRACE...\n"
           "Rollout/trainer log-prob mismatch per training step, as RL frameworks log it\n"
           "(verl, slime, OpenRLHF, llama.cpp percentiles), the onset of divergence, the\n"
           "trend, and runs compared at equal steps. TRACE: CSV/TSV or JSONL with one row\n"
           "per token, an fp4scope capture (.h5), or a per-step scalar log (a W&B or\n"
           "TensorBoard CSV export, JSONL such as verl's file logger); '-' reads CSV/JSONL\n"
           "from stdin.\n\n"
           "Metrics:\n"
           "  --metric M          metric for onset, trend and comparison: a metric, a framework's\n"
           "                      name of one (rollout_corr/k3_kl), or a per-step scalar of a\n"
           "                      scalar log or capture (reward); default: the first of\n"
           "                      mean_abs, mean_abs_per_seq, k3, log_ppl_abs_diff, k1,\n"
           "                      mult_prob_error, chi2_token, probs_diff_mean, k3_reverse,\n"
           "                      max_abs with values in every run (named in the report)\n"
           "  --names F           name the metrics in JSON and CSV as F logs them: fp4scope\n"
           "                      (default), verl, slime, nemo-rl\n"
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
           "  --min-segment N     points per segment of the change-point fit (5)\n"
           "  --fail-on-onset     exit 1 when an onset is found in any run\n"
           "Gate:\n"
           "  --gate              exit 1 when a metric crosses the level called harmful: the\n"
           "                      noise floor of --baseline, else the level a framework\n"
           "                      documents (mean_abs 0.1, slime's CI bound); or none is gated\n"
           "  --gate exact        exit 1 unless the log-probs are equal at every token (k3 = 0)\n"
           "  --baseline FILE     the reference run (BF16 vs BF16, or FP8): its noise floor is\n"
           "                      the level called harmful (gate and verdict)\n"
           "  --baseline-run NAME the run of FILE to use (default: its first)\n"
           "  --gate-metrics L    metrics gated (mean_abs,k3,is_frac_high,is_frac_low,is_max)\n"
           "  --gate-sigma K      threshold: floor mean + K spreads (6)\n"
           "  --gate-steps N      steps in a row over the threshold (3)\n"
           "  --gate-window W     steps of the windowed slope of ln(--metric) (20)\n"
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
           "  --force             replace an existing HDF5 file at FILE\n"
           "  --quiet             no progress line on stderr\n"
           "  --help, --version\n\n"
           "Exit status: 0 ok, 1 onset found with --fail-on-onset, a gate crossed or gated nothing,\n"
           "2 usage, 3 bad input, "
           "4 output not written, 5 internal error.\n");
}

typedef struct cfg {
    const char *metric;     /* NULL until picked when --metric is not given */
    int metric_default;     /* picked by the default order (fp4s_mm_metric_pick) */
    int mi;                 /* the metric's id, or -1 for a per-step scalar */
    size_t every;
    int json, csv, fail_onset;
    double level;
    fp4s_mm_names names;
    fp4s_mm_opts mo;
    fp4s_mm_onset_opts oo;
    fp4s_mm_changepoint_opts co;
    /* gate */
    int gate;               /* 1 the level called harmful (floor or documented), 2 exact */
    const char *baseline, *baseline_run, *gate_metrics;
    double gate_sigma;
    size_t gate_steps, gate_window;
} cfg;

/* One gated quantity of a run: a metric, or the windowed slope of ln(--metric).
 * Its level (the threshold it must not cross) comes from the reference run's
 * noise floor (mean +- K spreads), or without a reference from the level a
 * framework documents for the metric (doc, naming its source). */
typedef struct gate_item {
    char name[96];
    int lower_worse;        /* is_ess, is_min, probs_pearson: a drop is the alarm */
    double mean, spread;    /* the floor on the baseline (NaN with doc) */
    size_t nbase;
    double thr;             /* the level called harmful */
    const char *doc;        /* NULL: the floor of --baseline; else the documented level's source */
    int crossed;
    int64_t step;           /* first step of the first run of gate_steps crossings */
    double value, sigmas;   /* there: the value and (value - mean) / spread (NaN with doc) */
} gate_item;

/* --gate exact: the log-probs of trainer and rollout are the same numbers at
 * every counted token (max |rho| = 0 and no NaN/Inf token at every step;
 * from a scalar log: k3, max_abs and mean_abs exactly 0 where logged). */
typedef struct exact_gate {
    bool passed;
    size_t nsteps;          /* steps checked (with a value to check) */
    size_t differ;          /* steps where they differ */
    int64_t first;          /* the first of them */
    double max_abs, k3;     /* there */
    uint64_t nonfinite;     /* there */
    uint64_t tokens;        /* tokens checked in all */
} exact_gate;

typedef struct run_extra {
    fp4s_mm_onset onset;
    int onset_rc;
    fp4s_mm_trend trend;
    int trend_rc;
    char trend_note[256];
    fp4s_mm_changepoint cp;
    int cp_rc;
    double *vals;
    int64_t *steps;
    size_t n;               /* steps of the run (of vals and steps) */
    gate_item *gate;
    size_t ngate;
    size_t gate_listed;     /* of --gate-metrics, the metrics gated (the slope is not one) */
    char *gate_why;         /* why the others were not ("k3: ...; "), NULL when all were */
    fp4s_mm_trend trend_all; /* over every step, when trend is fitted after the change point */
    int trend_all_rc;
    int64_t trend_from;     /* the first step of trend's fit (the change point), or INT64_MIN: all steps */
    size_t nfinite;         /* steps with a value of the metric */
    double lvl;             /* the level of the metric called harmful (NaN: none known) */
    char lvl_src[1024];     /* where it comes from */
    const char *verdict;    /* "high_from_start", "diverges", "steady", "no_data" */
    exact_gate exact;       /* --gate exact */
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
static fp4s_mm_names g_names;

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
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        const char *k = fp4s_mm_metric_alias(i, g_names);
        json_object_set_new(o, k ? k : fp4s_mm_metric_name(i), cli_json_real(fp4s_mm_metric_value(m, i)));
    }
    return o;
}

static json_t *scalars_json(const fp4s_mm_run *r, size_t i)
{
    json_t *o = json_object();
    for (size_t k = 0; k < r->nscalars; k++)
        json_object_set_new(o, r->scalar_names[k], cli_json_real(r->scalars[i * r->nscalars + k]));
    return o;
}

static json_t *changepoint_json(const cfg *c, const run_extra *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_string(c->metric));
    json_object_set_new(o, "method", json_string("two-segment fit of ln(metric)"));
    json_object_set_new(o, "found", json_boolean(x->cp.found));
    json_object_set_new(o, "step", x->cp.found ? json_integer(x->cp.step) : json_null());
    json_object_set_new(o, "rate", cli_json_real(x->cp.rate));
    json_object_set_new(o, "level", cli_json_real(x->cp.level));
    json_object_set_new(o, "bic_gain", cli_json_real(x->cp.bic_gain));
    json_object_set_new(o, "n", json_integer((json_int_t)x->cp.n));
    json_object_set_new(o, "min_segment", json_integer((json_int_t)c->co.min_segment));
    if (x->cp_rc) json_object_set_new(o, "note", json_string("too few positive values"));
    return o;
}

static json_t *gate_json(const cfg *c, const run_extra *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "baseline", c->baseline ? json_string(c->baseline) : json_null());
    json_object_set_new(o, "sigma", json_real(c->gate_sigma));
    json_object_set_new(o, "steps", json_integer((json_int_t)c->gate_steps));
    int any = 0;
    json_t *a = json_array();
    for (size_t g = 0; g < x->ngate; g++) {
        const gate_item *it = &x->gate[g];
        json_t *e = json_object();
        json_object_set_new(e, "metric", json_string(it->name));
        json_object_set_new(e, "floor_mean", cli_json_real(it->mean));
        json_object_set_new(e, "floor_spread", cli_json_real(it->spread));
        json_object_set_new(e, "threshold", cli_json_real(it->thr));
        char src[1024];
        if (it->doc) snprintf(src, sizeof src, "%s", it->doc);
        else
            snprintf(src, sizeof src, "noise floor of the reference run %s: mean %s %g spreads over its %zu steps",
                     c->baseline, it->lower_worse ? "-" : "+", c->gate_sigma, it->nbase);
        json_object_set_new(e, "level_source", json_string(src));
        json_object_set_new(e, "crossed", json_boolean(it->crossed));
        json_object_set_new(e, "step", it->crossed ? json_integer(it->step) : json_null());
        json_object_set_new(e, "value", it->crossed ? cli_json_real(it->value) : json_null());
        json_object_set_new(e, "sigmas", it->crossed ? cli_json_real(it->sigmas) : json_null());
        json_array_append_new(a, e);
        any |= it->crossed;
    }
    json_object_set_new(o, "passed", json_boolean(!any && x->gate_listed > 0));
    json_object_set_new(o, "metrics", a);
    if (!x->gate_listed) {
        char why[4096];
        snprintf(why, sizeof why, "nothing gated: %.*s", x->gate_why ? (int)strlen(x->gate_why) - 2 : 0,
                 x->gate_why ? x->gate_why : "");
        json_object_set_new(o, "failed", json_string(why));
    }
    return o;
}

static json_t *exact_json(const run_extra *x)
{
    const exact_gate *e = &x->exact;
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string("exact"));
    json_object_set_new(o, "passed", json_boolean(e->passed));
    json_object_set_new(o, "steps", json_integer((json_int_t)e->nsteps));
    json_object_set_new(o, "steps_differ", json_integer((json_int_t)e->differ));
    json_object_set_new(o, "first_step", e->differ ? json_integer(e->first) : json_null());
    json_object_set_new(o, "max_abs", e->differ ? cli_json_real(e->max_abs) : json_null());
    json_object_set_new(o, "k3", e->differ ? cli_json_real(e->k3) : json_null());
    json_object_set_new(o, "nonfinite", e->differ ? json_integer((json_int_t)e->nonfinite) : json_null());
    if (!e->nsteps) json_object_set_new(o, "failed", json_string("nothing to check: no max_abs, mean_abs or k3"));
    return o;
}

static json_t *verdict_json(const cfg *c, const run_extra *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(x->verdict));
    json_object_set_new(o, "metric", json_string(c->metric));
    json_object_set_new(o, "step", strcmp(x->verdict, "diverges") != 0 ? json_null()
                                   : json_integer(x->onset.found && (!x->cp.found || x->onset.step <= x->cp.step)
                                                      ? x->onset.step : x->cp.step));
    json_object_set_new(o, "start", cli_json_real(x->onset.baseline));
    json_object_set_new(o, "level", cli_json_real(x->lvl));
    json_object_set_new(o, "level_source", isnan(x->lvl) ? json_null() : json_string(x->lvl_src));
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
    /* fitted from the change point on when there is one; all_steps: over every step */
    json_object_set_new(o, "from_step", x->trend_from != INT64_MIN ? json_integer(x->trend_from) : json_null());
    json_t *all = json_object();
    json_object_set_new(all, "valid", json_boolean(x->trend_all.valid));
    json_object_set_new(all, "n", json_integer((json_int_t)x->trend_all.n));
    json_object_set_new(all, "slope", cli_json_real(x->trend_all.slope));
    json_object_set_new(all, "lo", cli_json_real(x->trend_all.lo));
    json_object_set_new(all, "hi", cli_json_real(x->trend_all.hi));
    json_object_set_new(o, "all_steps", all);
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

/* ---- JSON, streamed -----------------------------------------------------------------------
 * The report is written as it is made, one step at a time, so that memory
 * does not grow with the report (a long run's JSON is gigabytes): each piece
 * is a small jansson value dumped with cli_json_write's flags and indented to
 * its depth, the containers around them written here the way jansson writes
 * them, so that the bytes are those of dumping the whole tree at once. As in
 * jansson, a NULL value (a string that is not UTF-8) or a key that is not
 * UTF-8 leaves the member out. */
#define JW_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY)
#define JW_MAXDEPTH 16

typedef struct jw {
    FILE *f;
    int depth;
    bool first[JW_MAXDEPTH];
} jw;

static void jw_indent(jw *w, int depth)
{
    static const char sp[2 * JW_MAXDEPTH] = "                                ";
    fwrite(sp, 1, 2 * (size_t)depth, w->f);
}

/* The separator and key of a new member of the open container; false when
 * the key is not UTF-8 (the member is left out). */
static bool jw_member(jw *w, const char *key)
{
    char *k = NULL;
    if (key) {
        json_t *ks = json_string(key);
        if (!ks) return false;
        k = json_dumps(ks, JW_FLAGS);
        json_decref(ks);
        if (!k) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    }
    if (w->depth > 0) {
        fputs(w->first[w->depth] ? "\n" : ",\n", w->f);
        jw_indent(w, w->depth);
        w->first[w->depth] = false;
    }
    if (k) {
        fputs(k, w->f);
        fputs(": ", w->f);
        free(k);
    }
    return true;
}

static void jw_open(jw *w, const char *key, char c)
{
    if (!jw_member(w, key)) cli_die(FP4S_EXIT_INTERNAL, "JSON: bad key");
    if (w->depth + 1 >= JW_MAXDEPTH) cli_die(FP4S_EXIT_INTERNAL, "JSON: too deep");
    fputc(c, w->f);
    w->first[++w->depth] = true;
}

static void jw_close(jw *w, char c)
{
    if (!w->first[w->depth]) {
        fputc('\n', w->f);
        jw_indent(w, w->depth - 1);
    }
    w->depth--;
    fputc(c, w->f);
}

/* A member (key NULL in an array) of value v, which is consumed. */
static void jw_put(jw *w, const char *key, json_t *v)
{
    if (!v) return;
    if (!jw_member(w, key)) {
        json_decref(v);
        return;
    }
    char *t = json_dumps(v, JW_FLAGS);
    json_decref(v);
    if (!t) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (const char *p = t;;) { /* a raw newline is never inside a dumped string */
        const char *nl = strchr(p, '\n');
        fwrite(p, 1, nl ? (size_t)(nl + 1 - p) : strlen(p), w->f);
        if (!nl) break;
        jw_indent(w, w->depth);
        p = nl + 1;
    }
    free(t);
}

static void comparison_json(jw *w, const cfg *c, const fp4s_mm_result *res, const run_extra *ex)
{
    size_t *idx;
    size_t k = common_steps(res, &idx);
    jw_open(w, "comparison", '{');
    jw_put(w, "metric", json_string(c->metric));
    jw_put(w, "reference", json_string(res->runs[0].name));
    jw_put(w, "common_steps", json_integer((json_int_t)k));
    json_t *ratios = json_object();
    for (size_t r = 1; r < res->nruns; r++) {
        double sl = 0;
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            double a = ex[0].vals[idx[i * res->nruns]];
            double b = ex[r].vals[idx[i * res->nruns + r]];
            if (a > 0 && b > 0 && isfinite(a) && isfinite(b)) {
                sl += log(b / a);
                m++;
            }
        }
        json_object_set_new(ratios, res->runs[r].name, m ? cli_json_real(exp(sl / (double)m)) : json_null());
    }
    jw_put(w, "geomean_ratio", ratios);
    jw_open(w, "steps", '[');
    for (size_t i = 0; i < k; i += c->every) {
        json_t *e = json_object();
        json_object_set_new(e, "step", json_integer(res->runs[0].steps[idx[i * res->nruns]].step));
        json_t *vals = json_object();
        for (size_t r = 0; r < res->nruns; r++)
            json_object_set_new(vals, res->runs[r].name, cli_json_real(ex[r].vals[idx[i * res->nruns + r]]));
        json_object_set_new(e, "values", vals);
        jw_put(w, NULL, e);
    }
    jw_close(w, ']');
    jw_close(w, '}');
    free(idx);
}

static void result_json(FILE *f, const cfg *c, const fp4s_mm_result *res, run_extra *ex)
{
    jw w = {f, 0, {false}};
    jw_open(&w, NULL, '{');
    jw_put(&w, "tool", json_string("fp4-mismatch"));
    jw_put(&w, "version", json_string(fp4s_version()));
    jw_put(&w, "metric", json_string(c->metric));
    if (c->metric_default) {
        json_t *ord = json_array();
        for (size_t i = 0; fp4s_mm_metric_preferred(i); i++)
            json_array_append_new(ord, json_string(fp4s_mm_metric_preferred(i)));
        jw_put(&w, "metric_default_order", ord);
    }
    jw_put(&w, "names", json_string(fp4s_mm_names_name(c->names)));
    json_t *opt = json_object();
    json_object_set_new(opt, "is_cap", json_real(c->mo.is_cap));
    json_object_set_new(opt, "clamp", json_real(c->mo.clamp));
    json_object_set_new(opt, "by_position", json_boolean(c->mo.by_position));
    json_object_set_new(opt, "allow_positive", json_boolean(c->mo.allow_positive));
    json_object_set_new(opt, "skip_empty", json_boolean(c->mo.skip_empty));
    json_object_set_new(opt, "every", json_integer((json_int_t)c->every));
    jw_put(&w, "options", opt);
    jw_open(&w, "runs", '[');
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        jw_open(&w, NULL, '{');
        jw_put(&w, "name", json_string(run->name));
        jw_put(&w, "source", json_string(run->source));
        jw_put(&w, "synthetic", json_boolean(cli_source_synthetic(run->source)));
        jw_open(&w, "steps", '[');
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            json_t *m = metrics_json(&run->steps[i], NULL, NULL);
            if (run->nscalars) json_object_set_new(m, "scalars", scalars_json(run, i));
            if (run->first) {
                json_object_set_new(m, "first", metrics_json(&run->first[i], NULL, NULL));
                json_object_set_new(m, "rest", metrics_json(&run->rest[i], NULL, NULL));
            }
            jw_put(&w, NULL, m);
        }
        jw_close(&w, ']');
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
        jw_put(&w, "summary", sm);
        jw_put(&w, "onset", onset_json(c, &ex[r]));
        jw_put(&w, "trend", trend_json(c, &ex[r]));
        jw_put(&w, "changepoint", changepoint_json(c, &ex[r]));
        jw_put(&w, "verdict", verdict_json(c, &ex[r]));
        if (c->gate == 2) jw_put(&w, "gate", exact_json(&ex[r]));
        else if (c->gate) jw_put(&w, "gate", gate_json(c, &ex[r]));
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    if (res->nruns > 1) comparison_json(&w, c, res, ex);
    jw_close(&w, '}');
    fputc('\n', f);
}

/* ---- CSV --------------------------------------------------------------------------------------- */
static void csv_quote(FILE *f, const char *s) { cli_csv_fputs(s, f); }

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
}

/* The per-step scalars of every run, as columns after the metrics: their
 * union in order of first appearance; a run without one leaves it empty. */
typedef struct csv_cols {
    const char **names;
    size_t n;
} csv_cols;

static void csv_union(const fp4s_mm_result *res, csv_cols *u)
{
    size_t cap = 0;
    u->names = NULL;
    u->n = 0;
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        for (size_t k = 0; k < run->nscalars; k++) {
            const char *nm = run->scalar_names[k];
            size_t j = k < u->n && strcmp(u->names[k], nm) == 0 ? k : u->n; /* runs of one log share the order */
            if (j == u->n)
                for (j = 0; j < u->n && strcmp(u->names[j], nm) != 0; j++) {
                }
            if (j < u->n) continue;
            if (u->n == cap) u->names = xrealloc(u->names, (cap = cap ? 2 * cap : 16) * sizeof *u->names);
            u->names[u->n++] = nm;
        }
    }
}

static void write_csv(FILE *f, const cfg *c, const fp4s_mm_result *res)
{
    csv_cols u;
    csv_union(res, &u);
    fputs("run,part,step,tokens,sequences,masked,nonfinite", f);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        const char *k = fp4s_mm_metric_alias(i, c->names);
        fputc(',', f);
        csv_quote(f, k ? k : fp4s_mm_metric_name(i));
    }
    for (size_t j = 0; j < u.n; j++) {
        fputc(',', f);
        /* one name per column (pandas would read a repeated one as k3.1): a scalar named as
         * a column before it is "scalar.NAME" */
        bool taken = false;
        static const char *const fixed[] = {"run", "part", "step", "tokens", "sequences", "masked", "nonfinite"};
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !taken; i++) taken = !strcmp(fixed[i], u.names[j]);
        for (size_t i = 0; i < fp4s_mm_metric_count() && !taken; i++) {
            const char *k = fp4s_mm_metric_alias(i, c->names);
            taken = !strcmp(k ? k : fp4s_mm_metric_name(i), u.names[j]);
        }
        if (taken) fputs("scalar.", f);
        csv_quote(f, u.names[j]);
    }
    fputc('\n', f);
    long *col = xmalloc((u.n ? u.n : 1) * sizeof *col);
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        for (size_t j = 0; j < u.n; j++) {
            col[j] = -1;
            if (j < run->nscalars && strcmp(run->scalar_names[j], u.names[j]) == 0) col[j] = (long)j;
            else
                for (size_t k = 0; k < run->nscalars && col[j] < 0; k++)
                    if (strcmp(run->scalar_names[k], u.names[j]) == 0) col[j] = (long)k;
        }
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            csv_row(f, run->name, "all", &run->steps[i]);
            for (size_t j = 0; j < u.n; j++) {
                double v = col[j] >= 0 ? run->scalars[i * run->nscalars + (size_t)col[j]] : NAN;
                if (col[j] < 0) fputc(',', f);
                else if (isnan(v)) fputs(",nan", f);
                else fprintf(f, ",%.17g", v);
            }
            fputc('\n', f);
            if (run->first) {
                csv_row(f, run->name, "first", &run->first[i]);
                for (size_t j = 0; j < u.n; j++) fputc(',', f);
                fputc('\n', f);
                csv_row(f, run->name, "rest", &run->rest[i]);
                for (size_t j = 0; j < u.n; j++) fputc(',', f);
                fputc('\n', f);
            }
        }
    }
    free(col);
    free(u.names);
}


/* ---- the gate ---------------------------------------------------------------------------------- */
static int lower_is_worse(const char *m)
{
    int id = fp4s_mm_metric_lookup(m);
    const char *n = id >= 0 ? fp4s_mm_metric_name((size_t)id) : m;
    return strcmp(n, "is_ess") == 0 || strcmp(n, "is_min") == 0 || strcmp(n, "probs_pearson") == 0;
}

/* out[i]: least-squares slope of ln(v) over the w steps ending at i (NaN
 * until w points, or when fewer than w/2 + 2 of them are positive). */
static void windowed_slopes(const int64_t *st, const double *v, size_t n, size_t w, double *out)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = NAN;
        if (i + 1 < w) continue;
        double sx = 0, sy = 0, sxx = 0, sxy = 0, x0 = (double)st[i + 1 - w];
        size_t m = 0;
        for (size_t j = i + 1 - w; j <= i; j++) {
            if (!(v[j] > 0) || !isfinite(v[j])) continue;
            double x = (double)st[j] - x0, y = log(v[j]);
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
            m++;
        }
        if (m < w / 2 + 2) continue;
        double d = (double)m * sxx - sx * sx;
        if (d > 0) out[i] = ((double)m * sxy - sx * sy) / d;
    }
}

static void floor_of(const double *v, size_t n, double *mean, double *spread, size_t *cnt)
{
    double s = 0, s2 = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            s += v[i];
            k++;
        }
    *cnt = k;
    *mean = k ? s / (double)k : NAN;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) s2 += (v[i] - *mean) * (v[i] - *mean);
    *spread = k > 1 ? sqrt(s2 / (double)(k - 1)) : NAN;
}

/* The median tokens per step of a run (the resolution of a token fraction). */
static double median_tokens(const fp4s_mm_run *r)
{
    double *t = xmalloc((r->nsteps ? r->nsteps : 1) * sizeof *t);
    for (size_t i = 0; i < r->nsteps; i++) t[i] = (double)r->steps[i].tokens;
    double m = series_median(t, r->nsteps);
    free(t);
    return m;
}

static void gate_scan(const cfg *c, gate_item *it, const int64_t *st, const double *v, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        int over = isfinite(v[i]) && (it->lower_worse ? v[i] < it->thr : v[i] > it->thr);
        run = over ? run + 1 : 0;
        if (run == c->gate_steps) {
            size_t s0 = i + 1 - c->gate_steps;
            it->crossed = 1;
            it->step = st[s0];
            it->value = v[s0];
            it->sigmas = it->doc ? NAN : (v[s0] - it->mean) / it->spread;
            return;
        }
    }
}

static size_t finite_count(const double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += isfinite(v[i]) != 0;
    return k;
}

/* Why a listed metric was not gated, appended to x->gate_why ("k3: ...; "). */
static void gate_skip(run_extra *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gate_skip(run_extra *x, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t a = x->gate_why ? strlen(x->gate_why) : 0, b = strlen(line);
    x->gate_why = xrealloc(x->gate_why, a + b + 3);
    memcpy(x->gate_why + a, line, b);
    memcpy(x->gate_why + a + b, "; ", 3);
}

static gate_item *gate_new(run_extra *x, size_t *cap)
{
    if (x->ngate == *cap) x->gate = xrealloc(x->gate, (*cap *= 2) * sizeof *x->gate);
    gate_item *it = &x->gate[x->ngate];
    memset(it, 0, sizeof *it);
    return it;
}

/* Without a reference run: each listed metric with a level a framework
 * documents (fp4s_mm_metric_level) is gated on it. */
static void gate_run_documented(const cfg *c, const fp4s_mm_run *run, run_extra *x)
{
    char *list = xstrdup(c->gate_metrics);
    double *rv = xmalloc((run->nsteps ? run->nsteps : 1) * sizeof *rv);
    size_t cap = 8;
    x->gate = xcalloc(cap, sizeof *x->gate);
    for (char *sv = NULL, *m = strtok_r(list, ",", &sv); m; m = strtok_r(NULL, ",", &sv)) {
        int id = fp4s_mm_metric_lookup(m);
        double lv;
        const char *src;
        if (id < 0 || fp4s_mm_metric_level((size_t)id, &lv, &src)) {
            fprintf(stderr, "fp4-mismatch: gate: %s: no documented level and no --baseline, not gated\n", m);
            gate_skip(x, "%s: no framework documents a level for it (a reference run's floor needs --baseline)", m);
            continue;
        }
        if (fp4s_mm_run_series(run, m, rv) || finite_count(rv, run->nsteps) == 0) {
            fprintf(stderr, "fp4-mismatch: gate: %s: no finite value in run %s, not gated\n", m, run->name);
            gate_skip(x, "%s: no finite value in run %s (%s)", m, run->name, run->source);
            continue;
        }
        gate_item *it = gate_new(x, &cap);
        snprintf(it->name, sizeof it->name, "%s", m);
        it->lower_worse = 0;
        it->mean = it->spread = NAN;
        it->thr = lv;
        it->doc = src;
        gate_scan(c, it, x->steps, rv, run->nsteps);
        x->ngate++;
        x->gate_listed++;
    }
    free(list);
    free(rv);
}

/* Calibrate every gated quantity on the baseline run and scan the run. A
 * listed metric is gated when the baseline has 2 finite values of it (a
 * floor) and the run at least one; x->gate_listed counts them, and one of 0
 * fails the gate (a gate that checks nothing must not pass). */
static void gate_run(const cfg *c, const fp4s_mm_run *base, const fp4s_mm_run *run, run_extra *x)
{
    if (!base) {
        gate_run_documented(c, run, x);
        return;
    }
    char *list = xstrdup(c->gate_metrics);
    double *bv = xmalloc((base->nsteps ? base->nsteps : 1) * sizeof *bv);
    double *rv = xmalloc((run->nsteps ? run->nsteps : 1) * sizeof *rv);
    int64_t *bs = xmalloc((base->nsteps ? base->nsteps : 1) * sizeof *bs);
    for (size_t i = 0; i < base->nsteps; i++) bs[i] = base->steps[i].step;
    size_t cap = 8;
    x->gate = xcalloc(cap, sizeof *x->gate);
    for (char *sv = NULL, *m = strtok_r(list, ",", &sv);; m = strtok_r(NULL, ",", &sv)) {
        int slope = m == NULL;
        const char *name = slope ? c->metric : m;
        if (fp4s_mm_run_series(base, name, bv) || fp4s_mm_run_series(run, name, rv)) {
            if (!slope) {
                fprintf(stderr, "fp4-mismatch: gate: %s: not in both %s and %s, not gated\n", name,
                        base->source, run->source);
                gate_skip(x, "%s: not in both %s and %s", name, base->source, run->source);
            }
            if (slope) break;
            continue;
        }
        gate_item *it = gate_new(x, &cap);
        if (slope) {
            double *t = xmalloc((base->nsteps > run->nsteps ? base->nsteps : run->nsteps) * sizeof *t + 8);
            windowed_slopes(bs, bv, base->nsteps, c->gate_window, t);
            memcpy(bv, t, base->nsteps * sizeof *bv);
            windowed_slopes(x->steps, rv, run->nsteps, c->gate_window, t);
            memcpy(rv, t, run->nsteps * sizeof *rv);
            free(t);
            snprintf(it->name, sizeof it->name, "slope of ln(%s) over %zu steps", c->metric, c->gate_window);
        } else {
            snprintf(it->name, sizeof it->name, "%s", name);
            it->lower_worse = lower_is_worse(name);
        }
        floor_of(bv, base->nsteps, &it->mean, &it->spread, &it->nbase);
        if (it->nbase < 2) {
            fprintf(stderr, "fp4-mismatch: gate: %s: fewer than 2 finite values in the baseline, not gated\n",
                    it->name);
            if (slope) break;
            gate_skip(x, "%s: %zu finite values in the baseline %s (2 needed)", name, it->nbase, base->source);
            continue;
        }
        if (!slope && finite_count(rv, run->nsteps) == 0) {
            fprintf(stderr, "fp4-mismatch: gate: %s: no finite value in run %s, not gated\n", name, run->name);
            gate_skip(x, "%s: no finite value in run %s (%s)", name, run->name, run->source);
            continue;
        }
        if (!(it->spread > 0)) {
            /* a floor that never moved: the resolution of the metric */
            int id = fp4s_mm_metric_lookup(name);
            const char *nm = id >= 0 ? fp4s_mm_metric_name((size_t)id) : "";
            double tk = median_tokens(base);
            it->spread = !slope && strncmp(nm, "is_frac", 7) == 0 && tk > 0 ? 1.0 / tk
                                                                             : 1e-12 + 1e-6 * fabs(it->mean);
        }
        it->thr = it->lower_worse ? it->mean - c->gate_sigma * it->spread : it->mean + c->gate_sigma * it->spread;
        gate_scan(c, it, x->steps, rv, run->nsteps);
        x->ngate++;
        if (slope) break;
        x->gate_listed++;
    }
    free(list);
    free(bv);
    free(rv);
    free(bs);
}

/* The documented level of a metric beside a floor's crossing, when there is
 * one: "; slime's CI bound ... is 0.1: below it" (a run may cross a BF16
 * floor at step 0 and still be within what a framework calls safe). */
static void doc_note(FILE *f, const gate_item *it)
{
    int id = fp4s_mm_metric_lookup(it->name);
    double lv;
    const char *src;
    if (it->doc || id < 0 || fp4s_mm_metric_level((size_t)id, &lv, &src)) return;
    char b[32];
    fprintf(f, "; the documented level is %s (%s): %s it", fmt_g(b, sizeof b, lv), src,
            it->value > lv ? "above" : "at or below");
}

static void gate_lines(FILE *f, const cfg *c, const fp4s_mm_run *run, const run_extra *x)
{
    char b1[32], b2[32], b3[32], b4[32];
    int any = 0;
    for (size_t g = 0; g < x->ngate; g++) {
        const gate_item *it = &x->gate[g];
        if (!it->crossed) continue;
        any = 1;
        if (it->doc)
            fprintf(f, "gate: CROSSED %s at step %lld: %s, over the level %s called harmful (%zu steps in a row; "
                       "the level: %s)\n",
                    it->name, (long long)it->step, fmt_g(b1, sizeof b1, it->value), fmt_g(b4, sizeof b4, it->thr),
                    c->gate_steps, it->doc);
        else {
            fprintf(f, "gate: CROSSED %s at step %lld: %s, %.3g spreads %s the floor %s (spread %s; threshold %s = "
                       "floor %s %g spreads, %zu steps in a row); the level called harmful is %s, the noise floor "
                       "of the reference run %s",
                    it->name, (long long)it->step, fmt_g(b1, sizeof b1, it->value), fabs(it->sigmas),
                    it->lower_worse ? "under" : "over", fmt_g(b2, sizeof b2, it->mean),
                    fmt_g(b3, sizeof b3, it->spread), fmt_g(b4, sizeof b4, it->thr), it->lower_worse ? "-" : "+",
                    c->gate_sigma, c->gate_steps, fmt_g(b4, sizeof b4, it->thr), c->baseline);
            doc_note(f, it);
            fputc('\n', f);
        }
    }
    if (!x->gate_listed) {
        fprintf(f, "gate: FAILED: nothing gated: none of --gate-metrics %s has %s and values in run %s (%.*s)\n",
                c->gate_metrics, c->baseline ? "a floor in the reference run" : "a documented level",
                run->name, x->gate_why ? (int)strlen(x->gate_why) - 2 : 0, x->gate_why ? x->gate_why : "");
        return;
    }
    if (any) return;
    if (c->baseline)
        fprintf(f, "gate: passed: run %s stays within the floor of %s (%zu quantities, floor + %g spreads, "
                   "%zu steps in a row); the levels called harmful:", run->name, c->baseline, x->ngate,
                c->gate_sigma, c->gate_steps);
    else
        fprintf(f, "gate: passed: run %s stays within the documented levels (%zu quantities, %zu steps in a row):",
                run->name, x->ngate, c->gate_steps);
    for (size_t g = 0; g < x->ngate; g++)
        fprintf(f, "%s %s %s %s", g ? "," : "", x->gate[g].name, x->gate[g].lower_worse ? "below" : "above",
                fmt_g(b1, sizeof b1, x->gate[g].thr));
    for (size_t g = 0; g < x->ngate && !c->baseline; g++) fprintf(f, "; %s: %s", x->gate[g].name, x->gate[g].doc);
    fputc('\n', f);
}

/* ---- --gate exact ------------------------------------------------------------------------- */
static void exact_run(const fp4s_mm_run *run, run_extra *x)
{
    exact_gate *e = &x->exact;
    memset(e, 0, sizeof *e);
    e->first = INT64_MIN;
    int ia = fp4s_mm_metric_index("max_abs"), im = fp4s_mm_metric_index("mean_abs"), ik = fp4s_mm_metric_index("k3");
    for (size_t i = 0; i < run->nsteps; i++) {
        const fp4s_mm_metrics *m = &run->steps[i];
        double a = fp4s_mm_metric_value(m, (size_t)ia), b = fp4s_mm_metric_value(m, (size_t)im),
               k = fp4s_mm_metric_value(m, (size_t)ik);
        if (isnan(a) && isnan(b) && isnan(k) && !m->nonfinite) continue; /* nothing logged at this step */
        e->nsteps++;
        e->tokens += m->tokens;
        bool same = m->nonfinite == 0 && (isnan(a) || a == 0) && (isnan(b) || b == 0) && (isnan(k) || k == 0);
        if (same) continue;
        if (!e->differ++) {
            e->first = m->step;
            e->max_abs = a;
            e->k3 = k;
            e->nonfinite = m->nonfinite;
        }
    }
    e->passed = e->nsteps > 0 && e->differ == 0;
}

static void exact_lines(FILE *f, const fp4s_mm_run *run, const run_extra *x)
{
    const exact_gate *e = &x->exact;
    char b1[32], b2[32];
    if (!e->nsteps)
        fprintf(f, "gate exact: FAILED: nothing to check: no step of run %s has max_abs, mean_abs or k3\n", run->name);
    else if (e->passed)
        fprintf(f, "gate exact: passed: run %s has the same log-probs on both sides at all %zu steps (max |rho| = 0, "
                   "k3 = 0 exactly%s)\n", run->name, e->nsteps, e->tokens ? ", no NaN/Inf token" : "");
    else
        fprintf(f, "gate exact: FAILED: run %s differs at %zu of %zu steps, first at step %lld (max |rho| %s, k3 %s%s)\n",
                run->name, e->differ, e->nsteps, (long long)e->first, fmt_g(b1, sizeof b1, e->max_abs),
                fmt_g(b2, sizeof b2, e->k3), e->nonfinite ? ", and NaN/Inf log-probs" : "");
}

/* ---- tables ------------------------------------------------------------------------------------- */
static const char *const table_cols[] = {"mean_abs", "max_abs", "k1", "k3", "chi2_token", "is_ess", "abs_p99"};

/* Column widths: at least w, and the whole header (names are never cut). */
static int colw(const char *name, int w)
{
    size_t l = strlen(name);
    return l > (size_t)w ? (int)l : w;
}

static void table_line(FILE *f, const char *part, const fp4s_mm_metrics *m, int extra, double xv)
{
    char b[32];
    fprintf(f, "%8lld", (long long)m->step);
    if (part) fprintf(f, " %-5s", part);
    fprintf(f, " %10llu %6llu", (unsigned long long)m->tokens, (unsigned long long)m->sequences);
    for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++)
        fprintf(f, " %10s", fmt_g(b, sizeof b, fp4s_mm_metric_value(m, (size_t)fp4s_mm_metric_index(table_cols[k]))));
    if (extra) fprintf(f, " %*s", extra, fmt_g(b, sizeof b, xv));
    fputc('\n', f);
}

/* A run of a per-step scalar log: the step, the chosen metric, then the
 * log's columns (up to 7; every one in --json and --csv). */
static void scalar_table(FILE *f, const cfg *c, const fp4s_mm_run *run, const run_extra *x)
{
    char b[32];
    size_t nc = run->nscalars < 7 ? run->nscalars : 7;
    int w0 = colw(c->metric, 10);
    fprintf(f, "%8s %*s", "step", w0, c->metric);
    for (size_t k = 0; k < nc; k++) fprintf(f, " %*s", colw(run->scalar_names[k], 10), run->scalar_names[k]);
    fputc('\n', f);
    for (size_t i = 0; i < run->nsteps; i += c->every) {
        fprintf(f, "%8lld %*s", (long long)run->steps[i].step, w0, fmt_g(b, sizeof b, x->vals[i]));
        for (size_t k = 0; k < nc; k++)
            fprintf(f, " %*s", colw(run->scalar_names[k], 10), fmt_g(b, sizeof b, run->scalars[i * run->nscalars + k]));
        fputc('\n', f);
    }
    if (run->nscalars > nc) fprintf(f, "(%zu more columns: --json or --csv has them)\n", run->nscalars - nc);
}

/* The verdict on the run, with the level called harmful and its source. */
static void verdict_line(FILE *f, const cfg *c, const run_extra *x)
{
    char b1[32], b2[32];
    const char *v = x->verdict;
    if (strcmp(v, "no_data") == 0) {
        fprintf(f, "verdict: no value of %s in this run\n", c->metric);
        return;
    }
    if (strcmp(v, "high_from_start") == 0)
        fprintf(f, "verdict: high from the first step: the median of %s over the first %zu steps is %s, %s the "
                   "level %s called harmful",
                c->metric, c->oo.baseline_steps, fmt_g(b1, sizeof b1, x->onset.baseline),
                lower_is_worse(c->metric) ? "below" : "above", fmt_g(b2, sizeof b2, x->lvl));
    else if (strcmp(v, "diverges") == 0) {
        if (x->onset.found && (!x->cp.found || x->onset.step <= x->cp.step))
            fprintf(f, "verdict: diverges from step %lld (the onset)", (long long)x->onset.step);
        else
            fprintf(f, "verdict: diverges from step %lld (the change point)", (long long)x->cp.step);
    } else
        fprintf(f, "verdict: steady (no onset, no change point)");
    if (!isnan(x->lvl) && strcmp(v, "high_from_start") != 0) {
        double mn, mx;
        series_minmax(x->vals, x->n, &mn, &mx);
        fprintf(f, "; the level called harmful is %s, %s %s", fmt_g(b1, sizeof b1, x->lvl),
                (lower_is_worse(c->metric) ? mn < x->lvl : mx > x->lvl) ? "crossed: the run reaches"
                                                                         : "not crossed: the run stays within",
                fmt_g(b2, sizeof b2, lower_is_worse(c->metric) ? mn : mx));
    }
    if (!isnan(x->lvl)) fprintf(f, " (the level: %s)\n", x->lvl_src);
    else
        fprintf(f, "; no level of %s is known to call harmful (a reference run, --baseline FILE, gives its noise "
                   "floor; mean_abs, mean_abs_per_seq and mult_prob_error have documented ones)\n", c->metric);
}

static void write_tables(FILE *f, const cfg *c, const fp4s_mm_result *res, const run_extra *ex)
{
    int extra = colw(c->metric, 10); /* the metric's column width, 0 when it is one of table_cols */
    for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++)
        if (strcmp(table_cols[k], c->metric) == 0) extra = 0;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (c->metric_default && strcmp(c->metric, fp4s_mm_metric_preferred(0)) != 0) {
        const char *as = NULL;
        for (size_t r = 0; r < res->nruns && !as; r++) as = fp4s_mm_run_logged_as(&res->runs[r], (size_t)c->mi);
        fprintf(f, "metric: %s%s%s%s, the first of the default order (", c->metric, as ? " (logged as " : "",
                as ? as : "", as ? ")" : "");
        for (size_t i = 0; fp4s_mm_metric_preferred(i); i++)
            fprintf(f, "%s%s", i ? ", " : "", fp4s_mm_metric_preferred(i));
        fprintf(f, ") with values in every run; --metric picks another\n\n");
    }
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        const run_extra *x = &ex[r];
        int scal = run->tokens == 0 && run->nscalars > 0;
        if (scal)
            fprintf(f, "run %s (%s%s): %zu steps, per-step scalar log of %zu columns", run->name, run->source,
                    cli_source_synthetic(run->source) ? ", synthetic capture" : "", run->nsteps, run->nscalars);
        else
            fprintf(f, "run %s (%s%s): %zu steps, %llu tokens", run->name, run->source,
                    cli_source_synthetic(run->source) ? ", synthetic capture" : "", run->nsteps,
                    (unsigned long long)run->tokens);
        if (run->masked || run->nonfinite || run->skipped_steps)
            fprintf(f, ", %llu masked, %llu with NaN/Inf log-probs excluded, %zu empty steps skipped",
                    (unsigned long long)run->masked, (unsigned long long)run->nonfinite, run->skipped_steps);
        fputc('\n', f);
        if (scal) scalar_table(f, c, run, x);
        else {
        fprintf(f, "%8s", "step");
        if (run->first) fprintf(f, " %-5s", "part");
        fprintf(f, " %10s %6s", "tokens", "seqs");
        for (size_t k = 0; k < sizeof table_cols / sizeof *table_cols; k++) fprintf(f, " %10s", table_cols[k]);
        if (extra) fprintf(f, " %*s", extra, c->metric);
        fputc('\n', f);
        for (size_t i = 0; i < run->nsteps; i += c->every) {
            table_line(f, run->first ? "all" : NULL, &run->steps[i], extra, x->vals[i]);
            if (run->first) {
                table_line(f, "first", &run->first[i], extra,
                           c->mi >= 0 ? fp4s_mm_metric_value(&run->first[i], (size_t)c->mi) : NAN);
                table_line(f, "rest", &run->rest[i], extra,
                           c->mi >= 0 ? fp4s_mm_metric_value(&run->rest[i], (size_t)c->mi) : NAN);
            }
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
        else if (x->onset_rc && x->nfinite == 0)
            fprintf(f, "onset: not computed (no value of %s in this run; --metric picks another)\n", c->metric);
        else if (x->onset_rc && x->onset.baseline_n == 0)
            fprintf(f, "onset: not computed (no value of %s among the first %zu steps, the baseline)\n", c->metric,
                    c->oo.baseline_steps);
        else if (x->onset_rc)
            fprintf(f, "onset: not computed (%zu steps; needs %zu baseline + %zu consecutive)\n", run->nsteps,
                    c->oo.baseline_steps, c->oo.consecutive);
        else
            fprintf(f, "onset: none (%s never stays above %s for %zu steps; baseline %s)\n", c->metric,
                    fmt_g(b1, sizeof b1, x->onset.threshold), c->oo.consecutive,
                    fmt_g(b2, sizeof b2, x->onset.baseline));
        if (x->trend.valid) {
            if (x->trend_from != INT64_MIN) fprintf(f, "trend: after the change point (from step %lld): ",
                                                    (long long)x->trend_from);
            else fprintf(f, "trend: ");
            fprintf(f, "ln(%s) slope %s per step, %g%% CI [%s, %s], n = %zu", c->metric,
                    fmt_g(b1, sizeof b1, x->trend.slope), 100 * x->trend.level, fmt_g(b2, sizeof b2, x->trend.lo),
                    fmt_g(b3, sizeof b3, x->trend.hi), x->trend.n);
            if (!(x->trend.lo > 0 || x->trend.hi < 0))
                fprintf(f, " (no significant trend: the interval contains 0)");
            else if (x->trend.slope > 0)
                fprintf(f, " (doubles every %.3g steps)", log(2.0) / x->trend.slope);
            else
                fprintf(f, " (halves every %.3g steps)", -log(2.0) / x->trend.slope);
            if (x->trend_from != INT64_MIN && x->trend_all.valid)
                fprintf(f, "; over all steps %s per step", fmt_g(b1, sizeof b1, x->trend_all.slope));
            fputc('\n', f);
        } else if (x->trend_rc == FP4S_ENOTSUP) {
            fprintf(f, "trend: unavailable (built without GSL)\n");
        } else {
            fprintf(f, "trend: not computed (%s)\n", x->trend_note);
        }
        if (x->cp.found)
            fprintf(f, "change point: step %lld (two-segment fit of ln(%s): flat at %s, then x%.4g per step; "
                       "BIC gain %.3g)\n", (long long)x->cp.step, c->metric, fmt_g(b1, sizeof b1, x->cp.level),
                    exp(x->cp.rate), x->cp.bic_gain);
        else if (x->cp_rc)
            fprintf(f, "change point: not computed (%zu positive values; needs 2 x %zu)\n", x->cp.n,
                    c->co.min_segment);
        else
            fprintf(f, "change point: none (no flat-then-growing bend of ln(%s) beats one line by BIC %g)\n",
                    c->metric, c->co.min_bic_gain);
        verdict_line(f, c, x);
        if (c->gate == 2) exact_lines(f, run, x);
        else if (c->gate) gate_lines(f, c, run, x);
        fputc('\n', f);
    }
    if (res->nruns > 1) {
        size_t *idx;
        size_t k = common_steps(res, &idx);
        fprintf(f, "comparison of %s at equal steps (%zu common steps), ratio to run %s:\n", c->metric, k,
                res->runs[0].name);
        fprintf(f, "%8s", "step");
        for (size_t r = 0; r < res->nruns; r++) fprintf(f, " %*s", colw(res->runs[r].name, 14), res->runs[r].name);
        for (size_t r = 1; r < res->nruns; r++)
            fprintf(f, " %*s%s", colw(res->runs[r].name, 8) + 6 - (int)strlen(res->runs[r].name), "ratio:",
                    res->runs[r].name);
        fputc('\n', f);
        for (size_t i = 0; i < k; i += c->every) {
            double a = ex[0].vals[idx[i * res->nruns]];
            fprintf(f, "%8lld", (long long)res->runs[0].steps[idx[i * res->nruns]].step);
            for (size_t r = 0; r < res->nruns; r++)
                fprintf(f, " %*s", colw(res->runs[r].name, 14), fmt_g(b1, sizeof b1, ex[r].vals[idx[i * res->nruns + r]]));
            for (size_t r = 1; r < res->nruns; r++) {
                double b = ex[r].vals[idx[i * res->nruns + r]];
                fprintf(f, " %*s", colw(res->runs[r].name, 8) + 6, fmt_g(b1, sizeof b1, b / a));
            }
            fputc('\n', f);
        }
        free(idx);
    }
}

/* ---- the metric, the trend, the verdict -------------------------------------------------- */
/* A name that is no metric (by any framework's name) and no per-step scalar
 * of run (or base): a usage error offering the nearest names (cli_unknown). */
_Noreturn static void unknown_metric(const char *opt, const char *name, const fp4s_mm_run *run,
                                     const fp4s_mm_run *base)
{
    size_t cap = 4 * fp4s_mm_metric_count() + (run ? run->nscalars : 0) + (base ? base->nscalars : 0) + 8, n = 0;
    const char **all = xmalloc(cap * sizeof *all);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) all[n++] = fp4s_mm_metric_name(i);
    for (int fw = FP4S_NAMES_VERL; fw <= FP4S_NAMES_NEMO_RL; fw++)
        for (size_t i = 0; i < fp4s_mm_metric_count() && n < cap; i++)
            if (fp4s_mm_metric_alias(i, (fp4s_mm_names)fw)) all[n++] = fp4s_mm_metric_alias(i, (fp4s_mm_names)fw);
    const fp4s_mm_run *rs[2] = {run, base};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; rs[k] && i < rs[k]->nscalars && n < cap; i++) all[n++] = rs[k]->scalar_names[i];
    char what[256];
    snprintf(what, sizeof what, "metrics (and frameworks' names of them%s; fp4-mismatch(1))",
             run ? ", and the run's per-step scalars" : "");
    cli_unknown(opt, "metric", name, what, all, n);
}

/* --metric not given: the first metric of the default order with values in
 * every run (fp4s_mm_metric_pick), or a usage error naming what each run has. */
static void pick_metric(cfg *c, const fp4s_mm_result *res)
{
    int id = fp4s_mm_metric_pick(res);
    if (id >= 0) {
        c->metric = fp4s_mm_metric_name((size_t)id);
        c->mi = id;
        c->metric_default = 1;
        return;
    }
    fprintf(stderr, "fp4-mismatch: no mismatch metric in every run: none of");
    for (size_t i = 0; fp4s_mm_metric_preferred(i); i++)
        fprintf(stderr, "%s %s", i ? "," : "", fp4s_mm_metric_preferred(i));
    fprintf(stderr, " (or a framework's name of one) has a value in every run\n");
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        fprintf(stderr, "fp4-mismatch: run %s (%s) has:", run->name, run->source);
        size_t shown = 0;
        for (size_t i = 0; i < fp4s_mm_metric_count(); i++)
            if (fp4s_mm_run_count(run, fp4s_mm_metric_name(i)) && shown++ < 12)
                fprintf(stderr, " %s", fp4s_mm_metric_name(i));
        for (size_t k = 0; k < run->nscalars; k++)
            if (fp4s_mm_metric_lookup(run->scalar_names[k]) < 0 && shown++ < 12)
                fprintf(stderr, " %s", run->scalar_names[k]);
        if (shown > 12) fprintf(stderr, " (and %zu more)", shown - 12);
        if (!shown) fprintf(stderr, " no values");
        fputc('\n', stderr);
    }
    fprintf(stderr, "fp4-mismatch: --metric NAME follows one of them\nTry 'fp4-mismatch --help'.\n");
    exit(FP4S_EXIT_USAGE);
}

/* The trend of ln(metric): after the change point when there is one (the
 * growth, not the flat floor before it, is what a rate describes), and over
 * all steps. */
static void fit_trend(const cfg *c, const fp4s_mm_run *run, run_extra *x)
{
    x->trend_from = INT64_MIN;
    x->trend_all_rc = fp4s_mm_trend_fit(x->steps, x->vals, run->nsteps, c->level, &x->trend_all);
    char note[256];
    snprintf(note, sizeof note, "%s", x->trend_all_rc ? fp4s_last_error() : "");
    x->trend = x->trend_all;
    x->trend_rc = x->trend_all_rc;
    snprintf(x->trend_note, sizeof x->trend_note, "%s", note);
    if (!x->cp.found || x->trend_all_rc == FP4S_ENOTSUP) return;
    size_t i0 = x->cp.index;
    fp4s_mm_trend t;
    if (fp4s_mm_trend_fit(x->steps + i0, x->vals + i0, run->nsteps - i0, c->level, &t) == 0 && t.valid) {
        x->trend = t;
        x->trend_rc = 0;
        x->trend_from = x->cp.step;
    }
}

/* The level of the metric called harmful, and the verdict: "high from the
 * first step" when the baseline (the median of the first steps) is above it
 * already; "diverges" at an onset or change point; else "steady". */
static void judge(const cfg *c, const fp4s_mm_run *base, const fp4s_mm_run *run, run_extra *x)
{
    x->lvl = NAN;
    x->lvl_src[0] = '\0';
    x->nfinite = finite_count(x->vals, run->nsteps);
    int lower = lower_is_worse(c->metric);
    if (base) {
        double *bv = xmalloc((base->nsteps ? base->nsteps : 1) * sizeof *bv);
        double m = NAN, sp = NAN;
        size_t k = 0;
        if (!fp4s_mm_run_series(base, c->metric, bv)) floor_of(bv, base->nsteps, &m, &sp, &k);
        free(bv);
        if (k >= 2) {
            x->lvl = lower ? m - c->gate_sigma * sp : m + c->gate_sigma * sp;
            snprintf(x->lvl_src, sizeof x->lvl_src, "the noise floor of the reference run %s: mean %.4g %s %g "
                     "spreads of %.4g over its %zu steps", c->baseline, m, lower ? "-" : "+", c->gate_sigma, sp, k);
        }
    }
    double lv;
    const char *src;
    if (isnan(x->lvl) && c->mi >= 0 && !fp4s_mm_metric_level((size_t)c->mi, &lv, &src)) {
        x->lvl = lv;
        snprintf(x->lvl_src, sizeof x->lvl_src, "%s", src);
    }
    double b0 = x->onset.baseline;
    if (x->nfinite == 0) x->verdict = "no_data";
    else if (!isnan(x->lvl) && isfinite(b0) && (lower ? b0 < x->lvl : b0 > x->lvl)) x->verdict = "high_from_start";
    else if (x->onset.found || x->cp.found) x->verdict = "diverges";
    else x->verdict = "steady";
}

/* ---- the output: standard output, or a file written to its temporary as
 * the report is made and put in place at the end (all or nothing) -------------- */
typedef struct ostream {
    FILE *f;
    fp4s_outfile *o;
    const char *path;
} ostream;

/* 0, or the exit status after the message. */
static int os_open(ostream *s, const char *path)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    if (strcmp(path, "-") == 0) {
        cli_progress_end();
        s->f = stdout;
        return 0;
    }
    int rc = fp4s_outfile_begin(path, &s->o);
    if (rc) return cli_report(rc);
    s->f = fopen(fp4s_outfile_tmppath(s->o), "wb");
    if (!s->f) {
        int e = errno;
        fp4s_outfile_abort(&s->o);
        return cli_report(fp4s_error_set(FP4S_EWRITE, "%s: cannot write: %s", path, strerror(e)));
    }
    return 0;
}

/* Finish and commit the output: the exit status (0 ok). */
static int os_close(ostream *s)
{
    if (!s->o) {
        int st = cli_stdout_flush();
        return st ? st : cli_commit();
    }
    int bad = ferror(s->f), e = errno;
    if (fclose(s->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        fp4s_outfile_abort(&s->o);
        return cli_report(fp4s_error_set(FP4S_EWRITE, "%s: write failed: %s", s->path, strerror(e ? e : EIO)));
    }
    int rc = fp4s_outfile_commit(&s->o);
    return rc ? cli_report(rc) : cli_commit();
}

int main(int argc, char **argv)
{
    cli_init("fp4-mismatch");
    par_init();
    cfg c;
    memset(&c, 0, sizeof c);
    c.every = 1;
    c.level = 0.95;
    fp4s_mm_opts_defaults(&c.mo);
    fp4s_mm_onset_opts_defaults(&c.oo);
    fp4s_mm_changepoint_opts_defaults(&c.co);
    c.gate_metrics = "mean_abs,k3,is_frac_high,is_frac_low,is_max";
    c.gate_sigma = 6;
    c.gate_steps = 3;
    c.gate_window = 20;
    fp4s_trace_opts t;
    fp4s_trace_opts_defaults(&t);
    const char *output = "-";
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    size_t nnames = 0;
    if (!names) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    cli_common common;
    cli_common_init(&common, usage, false);
    int ch;
    while ((ch = cli_getopt(argc, argv, "o:", longopts)) != -1) {
        switch (ch) {
        case OPT_METRIC: c.metric = optarg; break;
        case OPT_CLAMP: c.mo.clamp = cli_parse_double("--clamp", optarg, 1e-6, 700); break;
        case OPT_BY_POS: c.mo.by_position = true; break;
        case OPT_EVERY: c.every = (size_t)cli_parse_int("--every", optarg, 1, 1000000000); break;
        case OPT_NAME: names[nnames++] = optarg; break;
        case OPT_LEVEL: c.level = cli_parse_double("--level", optarg, 1e-6, 0.999999); break;
        case OPT_FAIL_ONSET: c.fail_onset = 1; break;
        case OPT_NAMES:
            if (fp4s_mm_names_parse(optarg, &c.names)) cli_usage("--names: %s", fp4s_last_error());
            break;
        case OPT_GATE: {
            /* --gate, --gate=MODE, or --gate MODE (the word exact or floor after it) */
            const char *mode = optarg;
            if (!mode && optind < argc && (!strcmp(argv[optind], "exact") || !strcmp(argv[optind], "floor")))
                mode = argv[optind++];
            if (!mode || !strcmp(mode, "floor")) c.gate = 1;
            else if (!strcmp(mode, "exact")) c.gate = 2;
            else cli_usage("--gate: expected floor (the default) or exact, got '%s'", mode);
            break;
        }
        case OPT_BASELINE: c.baseline = optarg; break;
        case OPT_BASELINE_RUN: c.baseline_run = optarg; break;
        case OPT_GATE_METRICS: c.gate_metrics = optarg; break;
        case OPT_GATE_SIGMA: c.gate_sigma = cli_parse_double("--gate-sigma", optarg, 0, 1e6); break;
        case OPT_GATE_STEPS: c.gate_steps = (size_t)cli_parse_int("--gate-steps", optarg, 1, 1000000); break;
        case OPT_GATE_WINDOW: c.gate_window = (size_t)cli_parse_int("--gate-window", optarg, 3, 1000000); break;
        case OPT_MIN_SEGMENT: c.co.min_segment = (size_t)cli_parse_int("--min-segment", optarg, 2, 1000000); break;
        case 'o':
        case OPT_OUTPUT: output = optarg; break;
        default:
            if (!cli_common_option(ch, optarg, &common) && !cli_trace_option(ch, optarg, &c.mo, &t, &c.oo))
                cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    cli_common_check(&common);
    c.json = common.json;
    c.csv = common.csv;
    g_names = c.names;
    if (!c.gate && c.baseline_run) cli_usage("--baseline-run applies to --baseline with --gate");
    if (c.gate == 2 && (c.baseline || c.baseline_run))
        cli_usage("--gate exact compares each run's log-probs with each other: it takes no --baseline");
    c.mi = c.metric ? fp4s_mm_metric_lookup(c.metric) : 0;
    if (c.mi < 0) {
        /* not a metric: a per-step scalar of a scalar log or a capture, if any */
        int scal = 0;
        for (int i = optind; i < argc; i++) {
            size_t l = strlen(argv[i]);
            scal |= fp4s_mm_is_scalar_log(argv[i], &t) || (l > 3 && strcmp(argv[i] + l - 3, ".h5") == 0) ||
                    t.format == FP4S_TRACE_CAPTURE;
        }
        if (!scal) {
            free(names);
            unknown_metric("--metric", c.metric, NULL, NULL);
        }
    }
    int ntr = argc - optind;
    if (ntr < 1) cli_usage("no TRACE given");
    if (nnames > (size_t)ntr) cli_usage("%zu --name options for %d traces", nnames, ntr);
    int nstdin = 0;
    for (int i = optind; i < argc; i++) nstdin += strcmp(argv[i], "-") == 0;
    if (nstdin > 1) cli_usage("'-' (stdin) given more than once");
    for (int i = optind; i < argc; i++) cli_input(argv[i]);
    if (c.baseline) cli_input(c.baseline);
    if (strcmp(output, "-") != 0) cli_output(output);

    fp4s_mm_result res = {0}, bres = {0};
    const fp4s_mm_run *base = NULL;
    if (c.baseline && par_rank() == 0) { /* read whole, by rank 0 (a failure here is reported as always: par.h) */
        int rc = fp4s_mm_analyze(c.baseline, NULL, &c.mo, &t, &bres);
        if (rc) {
            free(names);
            return cli_report(rc);
        }
        for (size_t r = 0; r < bres.nruns && !base; r++)
            if (!c.baseline_run || strcmp(bres.runs[r].name, c.baseline_run) == 0) base = &bres.runs[r];
        if (!base) cli_die(FP4S_EXIT_USAGE, "--baseline-run: %s has no run '%s'", c.baseline, c.baseline_run);
    }
    {   /* over MPI ranks, rank 0 goes on with every run (par.h) */
        int rc = par_mm_analyze((size_t)ntr, (const char *const *)argv + optind, names, nnames,
                                &c.mo, &t, &res);
        if (rc) {
            fp4s_mm_result_free(&res);
            fp4s_mm_result_free(&bres);
            free(names);
            return rc == PAR_DONE ? 0 : cli_report(rc);
        }
    }
    for (size_t a = 0; a < res.nruns; a++)
        for (size_t b = a + 1; b < res.nruns; b++)
            if (strcmp(res.runs[a].name, res.runs[b].name) == 0) {
                fprintf(stderr, "fp4-mismatch: two runs are named '%s' (%s and %s); name them with --name\n",
                        res.runs[a].name, res.runs[a].source, res.runs[b].source);
                fp4s_mm_result_free(&res);
                fp4s_mm_result_free(&bres);
                free(names);
                return FP4S_EXIT_USAGE;
            }
    cli_progress_end();
    if (!c.metric) pick_metric(&c, &res);
    if (c.gate) { /* a --gate-metrics name that is no metric and no scalar of any run: a typo */
        char *list = xstrdup(c.gate_metrics);
        for (char *sv = NULL, *m = strtok_r(list, ",", &sv); m; m = strtok_r(NULL, ",", &sv)) {
            bool known = fp4s_mm_metric_lookup(m) >= 0;
            for (size_t r = 0; r < res.nruns && !known; r++) known = fp4s_mm_run_count(&res.runs[r], m) > 0;
            known |= base && fp4s_mm_run_count(base, m) > 0;
            if (!known) unknown_metric("--gate-metrics", m, res.nruns ? &res.runs[0] : NULL, base);
        }
        free(list);
    }
    run_extra *ex = calloc(res.nruns, sizeof *ex);
    if (!ex) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int any_onset = 0, any_gate = 0;
    for (size_t r = 0; r < res.nruns; r++) {
        const fp4s_mm_run *run = &res.runs[r];
        ex[r].vals = malloc((run->nsteps ? run->nsteps : 1) * sizeof *ex[r].vals);
        ex[r].steps = malloc((run->nsteps ? run->nsteps : 1) * sizeof *ex[r].steps);
        ex[r].n = run->nsteps;
        if (!ex[r].vals || !ex[r].steps) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        for (size_t i = 0; i < run->nsteps; i++) {
            ex[r].vals[i] = NAN;
            ex[r].steps[i] = run->steps[i].step;
        }
        if (fp4s_mm_run_series(run, c.metric, ex[r].vals)) {
            unknown_metric("--metric", c.metric, run, NULL);
        }
        ex[r].cp_rc = fp4s_mm_changepoint_find(ex[r].steps, ex[r].vals, run->nsteps, &c.co, &ex[r].cp);
        if (ex[r].cp_rc && ex[r].cp_rc != FP4S_EEMPTY) exit(cli_report(ex[r].cp_rc));
        if (c.gate == 2) exact_run(run, &ex[r]);
        else if (c.gate) gate_run(&c, base, run, &ex[r]);
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
        fit_trend(&c, run, &ex[r]);
        judge(&c, base, run, &ex[r]);
        any_onset |= ex[r].onset.found;
        for (size_t g = 0; g < ex[r].ngate; g++) any_gate |= ex[r].gate[g].crossed;
        if (c.gate == 2) {
            any_gate |= !ex[r].exact.passed;
            if (!ex[r].exact.passed && !ex[r].exact.nsteps)
                fprintf(stderr, "fp4-mismatch: --gate exact: run %s: nothing to check: no step has max_abs, "
                                "mean_abs or k3; the gate fails (exit 1)\n", run->name);
        } else if (c.gate && !ex[r].gate_listed) {
            if (c.baseline)
                fprintf(stderr, "fp4-mismatch: --gate: run %s: nothing gated: none of --gate-metrics %s has a floor "
                                "(2 finite values) in %s and a value in the run (%.*s); the gate fails (exit 1)\n",
                        run->name, c.gate_metrics, c.baseline, ex[r].gate_why ? (int)strlen(ex[r].gate_why) - 2 : 0,
                        ex[r].gate_why ? ex[r].gate_why : "");
            else
                fprintf(stderr, "fp4-mismatch: --gate: run %s: nothing gated: none of --gate-metrics %s has a level "
                                "documented by a framework and a value in the run (%.*s); give a reference run "
                                "(--baseline FILE) for a noise floor; the gate fails (exit 1)\n",
                        run->name, c.gate_metrics, ex[r].gate_why ? (int)strlen(ex[r].gate_why) - 2 : 0,
                        ex[r].gate_why ? ex[r].gate_why : "");
            any_gate = 1;
        }
    }
    ostream os;
    int status = os_open(&os, output);
    if (!status) {
        if (c.json) result_json(os.f, &c, &res, ex);
        else if (c.csv) write_csv(os.f, &c, &res);
        else write_tables(os.f, &c, &res, ex);
        status = os_close(&os);
    }
    for (size_t r = 0; r < res.nruns; r++) {
        free(ex[r].vals);
        free(ex[r].steps);
        free(ex[r].gate);
        free(ex[r].gate_why);
    }
    free(ex);
    fp4s_mm_result_free(&res);
    fp4s_mm_result_free(&bres);
    free(names);
    if (!status && c.fail_onset && any_onset) status = FP4S_EXIT_CHECK;
    if (!status && any_gate) status = FP4S_EXIT_CHECK;
    return status;
}
