/* Per-step scalar logs: the metrics RL frameworks log once per training step
 * (a W&B or TensorBoard CSV export, JSONL such as verl's file logger, or the
 * per-step scalars of a capture) read into runs whose steps carry the known
 * metrics by id (fp4s_mm_metrics.v) and every column by name; and the
 * frameworks' names of the metrics. */
#include "mm_internal.h"
#include "fp4s_config.h"

#include <fp4scope/capture.h>

#include <errno.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the frameworks' names ----------------------------------------------------------------
 * Only exact equivalents: the same quantity computed the same way (verl
 * rollout_corr_helper.py and utils/debug/metrics.py; slime's
 * backends/megatron_utils loss and the ppl metrics of its mismatch helper;
 * NeMo-RL's ClippedPGLossFn with the default k3 KL type; fp4-rl's scalars). */
static const struct {
    fp4s_mm_names fw;
    const char *name, *metric;
} aliases[] = {
    {FP4S_NAMES_VERL, "rollout_corr/kl", "k1"},
    {FP4S_NAMES_VERL, "rollout_corr/k3_kl", "k3"},
    {FP4S_NAMES_VERL, "rollout_corr/chi2_token", "chi2_token"},
    {FP4S_NAMES_VERL, "rollout_corr/chi2_seq", "chi2_seq"},
    {FP4S_NAMES_VERL, "rollout_corr/training_ppl", "ppl_trainer"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_ppl", "ppl_rollout"},
    {FP4S_NAMES_VERL, "rollout_corr/log_ppl_diff", "log_ppl_diff_mean"},
    {FP4S_NAMES_VERL, "rollout_corr/log_ppl_abs_diff", "log_ppl_abs_diff"},
    {FP4S_NAMES_VERL, "rollout_corr/log_ppl_diff_max", "log_ppl_diff_max"},
    {FP4S_NAMES_VERL, "rollout_corr/log_ppl_diff_min", "log_ppl_diff_min"},
    {FP4S_NAMES_VERL, "rollout_corr/ppl_ratio", "ppl_ratio"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_mean", "is_mean"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_max", "is_max"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_min", "is_min"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_std", "is_std"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_eff_sample_size", "is_ess"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_ratio_fraction_high", "is_frac_high"},
    {FP4S_NAMES_VERL, "rollout_corr/rollout_is_ratio_fraction_low", "is_frac_low"},
    {FP4S_NAMES_VERL, "training/rollout_probs_diff_mean", "probs_diff_mean"},
    {FP4S_NAMES_VERL, "training/rollout_probs_diff_max", "probs_diff_max"},
    {FP4S_NAMES_VERL, "training/rollout_probs_diff_std", "probs_diff_std"},
    {FP4S_NAMES_VERL, "training/rollout_actor_probs_pearson_corr", "probs_pearson"},
    {FP4S_NAMES_SLIME, "train/train_rollout_logprob_abs_diff", "mean_abs_per_seq"},
    {FP4S_NAMES_SLIME, "train/training_ppl", "ppl_trainer"},
    {FP4S_NAMES_SLIME, "train/rollout_ppl", "ppl_rollout"},
    {FP4S_NAMES_SLIME, "train/log_ppl_abs_diff", "log_ppl_abs_diff"},
    {FP4S_NAMES_NEMO_RL, "train/token_mult_prob_error", "mult_prob_error"},
    {FP4S_NAMES_NEMO_RL, "train/gen_kl_error", "k3"},
    {FP4S_NAMES_NEMO_RL, "train/policy_kl_error", "k3_reverse"},
    {FP4S_NAMES_NEMO_RL, "train/sampling_importance_ratio", "is_mean"},
    {FP4S_NAMES_FP4SCOPE, "mismatch", "mean_abs"},     /* fp4-rl's per-step scalars */
    {FP4S_NAMES_FP4SCOPE, "max_mismatch", "max_abs"},
};
#define NALIASES (sizeof aliases / sizeof aliases[0])

static const char *const fw_names[] = {"fp4scope", "verl", "slime", "nemo-rl"};

int fp4s_mm_names_parse(const char *s, fp4s_mm_names *out)
{
    for (int i = 0; i < 4; i++)
        if (s && strcasecmp(s, fw_names[i]) == 0) {
            *out = (fp4s_mm_names)i;
            return 0;
        }
    if (s && strcasecmp(s, "nemo") == 0) {
        *out = FP4S_NAMES_NEMO_RL;
        return 0;
    }
    return fp4s_error_set(FP4S_EINVAL, "unknown name set '%s' (fp4scope, verl, slime, nemo-rl)", s ? s : "");
}

const char *fp4s_mm_names_name(fp4s_mm_names fw) { return (unsigned)fw < 4 ? fw_names[fw] : NULL; }

const char *fp4s_mm_metric_alias(size_t id, fp4s_mm_names fw)
{
    const char *m = fp4s_mm_metric_name(id);
    if (!m) return NULL;
    if (fw == FP4S_NAMES_FP4SCOPE) return m;
    for (size_t i = 0; i < NALIASES; i++)
        if (aliases[i].fw == fw && strcmp(aliases[i].metric, m) == 0) return aliases[i].name;
    return NULL;
}

int fp4s_mm_metric_lookup(const char *name)
{
    if (!name) return -1;
    int id = fp4s_mm_metric_index(name);
    if (id >= 0) return id;
    for (size_t i = 0; i < NALIASES; i++)
        if (strcmp(aliases[i].name, name) == 0) return fp4s_mm_metric_index(aliases[i].metric);
    return -1;
}

/* A TensorBoard file name carries the tag with '/' written as '_': match an
 * alias (or a metric name) that way. */
static int lookup_underscored(const char *tag)
{
    int id = fp4s_mm_metric_lookup(tag);
    if (id >= 0) return id;
    for (size_t i = 0; i < NALIASES; i++) {
        const char *a = aliases[i].name, *b = tag;
        for (; *a && *b; a++, b++)
            if (*a != *b && !(*a == '/' && *b == '_')) break;
        if (!*a && !*b) return fp4s_mm_metric_index(aliases[i].metric);
    }
    return -1;
}

/* ---- the default metric and the documented levels ------------------------------------------
 * The order in which a metric is picked when none is asked for: the mean
 * |rho| (in nats, the quantity every framework logs in some form, with a
 * published bound), then the KL estimators (never negative), then the
 * signed or noisier ones. mult_prob_error (about 1 + mean |rho|) comes
 * late: the onset's margin and the trend work on ln(metric), which is
 * flat near ln 1. */
static const char *const preferred[] = {
    "mean_abs",          /* fp4scope; fp4-rl "mismatch" */
    "mean_abs_per_seq",  /* slime train/train_rollout_logprob_abs_diff */
    "k3",                /* verl rollout_corr/k3_kl, NeMo-RL train/gen_kl_error */
    "log_ppl_abs_diff",  /* verl rollout_corr/log_ppl_abs_diff, slime train/log_ppl_abs_diff */
    "k1",                /* verl rollout_corr/kl */
    "mult_prob_error",   /* NeMo-RL train/token_mult_prob_error */
    "chi2_token",        /* verl rollout_corr/chi2_token */
    "probs_diff_mean",   /* verl training/rollout_probs_diff_mean */
    "k3_reverse",        /* NeMo-RL train/policy_kl_error */
    "max_abs",           /* fp4-rl "max_mismatch" */
};
#define NPREF (sizeof preferred / sizeof *preferred)

const char *fp4s_mm_metric_preferred(size_t i) { return i < NPREF ? preferred[i] : NULL; }

size_t fp4s_mm_run_count(const fp4s_mm_run *r, const char *metric)
{
    if (!r || !metric) return 0;
    int id = fp4s_mm_metric_lookup(metric);
    size_t k = 0;
    if (id >= 0) {
        for (size_t i = 0; i < r->nsteps; i++) k += isfinite(fp4s_mm_metric_value(&r->steps[i], (size_t)id)) != 0;
        return k;
    }
    for (size_t c = 0; c < r->nscalars; c++)
        if (strcmp(r->scalar_names[c], metric) == 0) {
            for (size_t i = 0; i < r->nsteps; i++) k += isfinite(r->scalars[i * r->nscalars + c]) != 0;
            return k;
        }
    return 0;
}

int fp4s_mm_metric_pick(const fp4s_mm_result *res)
{
    if (!res || !res->nruns) return -1;
    for (size_t p = 0; p < NPREF; p++) {
        size_t r = 0;
        while (r < res->nruns && (res->runs[r].nsteps == 0 || fp4s_mm_run_count(&res->runs[r], preferred[p]) > 0))
            r++; /* a run without steps (every one skipped) has every metric as much as any */
        if (r == res->nruns) return fp4s_mm_metric_index(preferred[p]);
    }
    return -1;
}

const char *fp4s_mm_run_logged_as(const fp4s_mm_run *r, size_t id)
{
    if (!r) return NULL;
    for (size_t c = 0; c < r->nscalars; c++)
        if (fp4s_mm_metric_lookup(r->scalar_names[c]) == (int)id) return r->scalar_names[c];
    return NULL;
}

/* Levels a framework documents as the edge of a harmful mismatch (see
 * fp4s_mm_metric_level in mismatch.h for the sources). */
static const struct {
    const char *metric;
    double level;
    const char *source;
} levels[] = {
    {"mean_abs_per_seq", 0.1,
     "slime's CI bound on train/train_rollout_logprob_abs_diff (--ci-train-rollout-logprob-abs-diff-threshold, "
     "default 0.1: slime/utils/arguments.py, asserted in slime/backends/megatron_utils/model.py, THUDM/slime "
     "624b824a)"},
    {"mean_abs", 0.1,
     "slime's CI bound 0.1 on the mean |log-prob difference| (slime/utils/arguments.py, THUDM/slime 624b824a; "
     "slime averages per sample first, mean_abs per token)"},
    {"mult_prob_error", 1.05,
     "NeMo-RL: token_mult_prob_error above 1.05 indicates a framework issue (docs/guides/dtensor-tp-accuracy.md, "
     "NVIDIA-NeMo/RL 7ea279ab)"},
};

int fp4s_mm_metric_level(size_t id, double *level, const char **source)
{
    const char *m = fp4s_mm_metric_name(id);
    for (size_t i = 0; m && i < sizeof levels / sizeof *levels; i++)
        if (strcmp(levels[i].metric, m) == 0) {
            if (level) *level = levels[i].level;
            if (source) *source = levels[i].source;
            return 0;
        }
    return fp4s_error_set(FP4S_ENOTFOUND, "metric '%s': no framework documents a level for it", m ? m : "?");
}

int fp4s_mm_run_series(const fp4s_mm_run *r, const char *metric, double *out)
{
    int id = fp4s_mm_metric_lookup(metric);
    if (id >= 0) {
        for (size_t i = 0; i < r->nsteps; i++) out[i] = fp4s_mm_metric_value(&r->steps[i], (size_t)id);
        return 0;
    }
    for (size_t k = 0; k < r->nscalars; k++)
        if (strcmp(r->scalar_names[k], metric) == 0) {
            for (size_t i = 0; i < r->nsteps; i++) out[i] = r->scalars[i * r->nscalars + k];
            return 0;
        }
    return fp4s_error_set(FP4S_ENOTFOUND, "run '%s' (%s): no metric or per-step scalar named '%s'", r->name,
                          r->source, metric);
}

/* ---- a table of runs x steps x columns being built --------------------------------------- */
typedef struct srun {
    char *name;
    size_t nsteps, cap;
    int64_t *steps;
    double *vals;      /* nsteps x stride of the table, NaN = missing */
    mm_i64map rows;    /* step -> its row */
} srun;

/* Names, runs and rows are found by hash (every lookup O(1), whatever the
 * steps, runs and columns of the log); rows are `stride` wide, a power of
 * two at least ncols, so that a new column widens them only when stride
 * doubles. */
typedef struct stable {
    const char *path;
    char **cols;
    size_t ncols, colcap, stride;
    mm_strmap colmap;
    srun *runs;
    size_t nruns, runcap;
    mm_strmap runmap;
} stable;

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static void st_free(stable *t)
{
    for (size_t i = 0; i < t->ncols; i++) free(t->cols[i]);
    free(t->cols);
    for (size_t r = 0; r < t->nruns; r++) {
        free(t->runs[r].name);
        free(t->runs[r].steps);
        free(t->runs[r].vals);
        mm_i64map_free(&t->runs[r].rows);
    }
    free(t->runs);
    mm_strmap_free(&t->colmap);
    mm_strmap_free(&t->runmap);
    memset(t, 0, sizeof *t);
}

/* Column index of a name (added when new); -1 out of memory. */
static long st_col(stable *t, const char *name, size_t len)
{
    long k = mm_strmap_get(&t->colmap, name, len);
    if (k >= 0) return k;
    if (t->ncols == t->colcap) {
        size_t nc = t->colcap ? 2 * t->colcap : 16;
        char **n = realloc(t->cols, nc * sizeof *n);
        if (!n) return -1;
        t->cols = n;
        t->colcap = nc;
    }
    if (t->ncols == t->stride) { /* widen every run's rows */
        size_t ns = t->stride ? 2 * t->stride : 16;
        for (size_t r = 0; r < t->nruns; r++) {
            srun *s = &t->runs[r];
            if (!s->cap) continue;
            double *nv = malloc(s->cap * ns * sizeof *nv);
            if (!nv) return -1;
            for (size_t i = 0; i < s->nsteps; i++) {
                memcpy(nv + i * ns, s->vals + i * t->stride, t->stride * sizeof *nv);
                for (size_t k2 = t->stride; k2 < ns; k2++) nv[i * ns + k2] = NAN;
            }
            free(s->vals);
            s->vals = nv;
        }
        t->stride = ns;
    }
    char *d = dupn(name, len);
    if (!d || mm_strmap_put(&t->colmap, d, len, t->ncols)) {
        free(d);
        return -1;
    }
    t->cols[t->ncols] = d;
    return (long)t->ncols++;
}

static long st_run(stable *t, const char *name, size_t len)
{
    long k = mm_strmap_get(&t->runmap, name, len);
    if (k >= 0) return k;
    if (t->nruns == t->runcap) {
        size_t nc = t->runcap ? 2 * t->runcap : 4;
        srun *n = realloc(t->runs, nc * sizeof *n);
        if (!n) return -1;
        t->runs = n;
        t->runcap = nc;
    }
    srun *n = &t->runs[t->nruns];
    memset(n, 0, sizeof *n);
    n->name = dupn(name, len);
    if (!n->name || mm_strmap_put(&t->runmap, n->name, len, t->nruns)) {
        free(n->name);
        return -1;
    }
    return (long)t->nruns++;
}

/* The row of (run, step), appended when new (steps are merged: a W&B history
 * has one row per log call, several per step). */
static double *st_row(stable *t, srun *s, int64_t step)
{
    if (!t->stride) t->stride = 16;
    if (s->nsteps && s->steps[s->nsteps - 1] == step) return s->vals + (s->nsteps - 1) * t->stride;
    long k = mm_i64map_get(&s->rows, step);
    if (k >= 0) return s->vals + (size_t)k * t->stride;
    if (s->nsteps == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        int64_t *ns = realloc(s->steps, nc * sizeof *ns);
        if (!ns) return NULL;
        s->steps = ns;
        double *nv = realloc(s->vals, nc * t->stride * sizeof *nv);
        if (!nv) return NULL;
        s->vals = nv;
        s->cap = nc;
    }
    if (mm_i64map_put(&s->rows, step, s->nsteps)) return NULL;
    s->steps[s->nsteps] = step;
    double *row = s->vals + s->nsteps * t->stride;
    for (size_t k2 = 0; k2 < t->stride; k2++) row[k2] = NAN;
    s->nsteps++;
    return row;
}

static int put(stable *t, long run, long col, int64_t step, double v)
{
    if (run < 0 || col < 0) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", t->path);
    double *row = st_row(t, &t->runs[run], step);
    if (!row) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", t->path);
    if (!isnan(v)) row[col] = v;
    return 0;
}

static const char *base_of(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static char *stem_of(const char *path, const char *name)
{
    if (name) return dupn(name, strlen(name));
    const char *b = strcmp(path, "-") == 0 ? "stdin" : base_of(path);
    const char *dot = strrchr(b, '.');
    return dupn(b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
}

/* ---- into fp4s_mm_run ------------------------------------------------------------------------ */
static int cmp_idx(const void *a, const void *b, void *ctx)
{
    const int64_t *s = ctx;
    int64_t x = s[*(const size_t *)a], y = s[*(const size_t *)b];
    return (x > y) - (x < y);
}

static int to_runs(stable *t, const char *source, fp4s_mm_result *res)
{
    size_t nm = fp4s_mm_metric_count();
    int *ids = malloc((t->ncols ? t->ncols : 1) * sizeof *ids);
    if (!ids) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    for (size_t k = 0; k < t->ncols; k++) ids[k] = fp4s_mm_metric_lookup(t->cols[k]);
    size_t keep = 0;
    for (size_t r = 0; r < t->nruns; r++) keep += t->runs[r].nsteps > 0;
    fp4s_mm_run *nr = realloc(res->runs, (res->nruns + keep) * sizeof *nr);
    if (!nr) {
        free(ids);
        return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    res->runs = nr;
    int rc = 0;
    for (size_t r = 0; r < t->nruns && !rc; r++) {
        srun *s = &t->runs[r];
        if (!s->nsteps) continue;
        fp4s_mm_run *o = &res->runs[res->nruns];
        memset(o, 0, sizeof *o);
        size_t n = s->nsteps;
        size_t *idx = malloc(n * sizeof *idx);
        o->steps = calloc(n, sizeof *o->steps);
        o->scalars = malloc(n * (t->ncols ? t->ncols : 1) * sizeof *o->scalars);
        o->scalar_names = calloc(t->ncols ? t->ncols : 1, sizeof *o->scalar_names);
        o->name = s->name;
        s->name = NULL;
        o->source = dupn(source, strlen(source));
        res->nruns++;
        if (!idx || !o->steps || !o->scalars || !o->scalar_names || !o->source) {
            free(idx);
            rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < t->ncols; k++) o->scalar_names[k] = dupn(t->cols[k], strlen(t->cols[k]));
        o->nscalars = t->ncols;
        for (size_t k = 0; k < t->ncols; k++)
            if (!o->scalar_names[k]) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) idx[i] = i;
        qsort_r(idx, n, sizeof *idx, cmp_idx, s->steps);
        o->nsteps = n;
        for (size_t i = 0; i < n; i++) {
            fp4s_mm_metrics *m = &o->steps[i];
            const double *row = s->vals + idx[i] * t->stride;
            m->step = s->steps[idx[i]];
            m->nmetrics = (uint32_t)nm;
            for (size_t j = 0; j < FP4S_MM_METRIC_SLOTS; j++) m->v[j] = NAN;
            for (size_t k = 0; k < t->ncols; k++) {
                o->scalars[i * t->ncols + k] = row[k];
                if (ids[k] >= 0 && !isnan(row[k])) m->v[ids[k]] = row[k];
            }
        }
        free(idx);
        /* the run's rows are in o now: give them back before the next run's are copied */
        free(s->vals);
        free(s->steps);
        s->vals = NULL;
        s->steps = NULL;
        mm_i64map_free(&s->rows);
    }
    free(ids);
    return rc;
}

/* The largest step written as a real that is taken: every integer up to it is exact in a double. */
#define MM_STEP_MAX 9007199254740992.0

/* ---- CSV: W&B and TensorBoard exports, or any step-per-row table ------------------------------ */
static const char *const step_cols[] = {"step", "Step", "_step", "global_step", "train/step",
                                        "trainer/global_step", "training/global_step"};

static int is_step_col(const char *f, const fp4s_trace_opts *t)
{
    if (t && t->col_step && strcmp(f, t->col_step) == 0) return 1;
    for (size_t i = 0; i < sizeof step_cols / sizeof *step_cols; i++)
        if (strcmp(f, step_cols[i]) == 0) return 1;
    return 0;
}

static int ignored_col(const char *f)
{
    static const char *const skip[] = {"Wall time", "wall_time", "_runtime", "_timestamp", "timestamp", "time"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strcmp(f, skip[i]) == 0) return 1;
    size_t n = strlen(f);
    return (n > 5 && (strcmp(f + n - 5, "__MIN") == 0 || strcmp(f + n - 5, "__MAX") == 0 ||
                      strcmp(f + n - 5, "__min") == 0 || strcmp(f + n - 5, "__max") == 0));
}

/* Split a CSV line in place (mm_split_fields), the stored fields without their
 * leading spaces; returns the count or -1. */
static long split_csv(char *line, char delim, char **f, size_t max)
{
    long nf = mm_split_fields(line, delim, f, max);
    for (long i = 0; i < nf && (size_t)i < max; i++)
        while (*f[i] == ' ') f[i]++;
    return nf;
}

static int parse_num(const char *s, double *v)
{
    while (*s == ' ') s++;
    if (!*s || strcasecmp(s, "nan") == 0 || strcasecmp(s, "null") == 0 || strcasecmp(s, "none") == 0) {
        *v = NAN;
        return 0;
    }
    return mm_parse_f64(s, v);
}

/* A step: an integer field (any int64), or a real with an integer value up to
 * MM_STEP_MAX (exact in a double); -1 not a number, -2 out of range. */
static int parse_step(const char *s, int64_t *v)
{
    while (*s == ' ') s++;
    char *end;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (end != s) {
        const char *e = end;
        while (*e == ' ') e++;
        if (!*e) {
            if (errno == ERANGE) return -2;
            *v = i;
            return 0;
        }
    }
    double x;
    if (parse_num(s, &x) || isnan(x) || x != floor(x)) return -1;
    if (fabs(x) > MM_STEP_MAX) return -2;
    *v = (int64_t)x;
    return 0;
}

static char *read_line(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n < 0) return NULL;
    while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r')) (*buf)[--n] = '\0';
    return *buf;
}

#define MAXF 65536

static int csv_scalars(FILE *f, const char *path, const char *name, const fp4s_trace_opts *t, stable *tb)
{
    char *buf = NULL, **fields = malloc(MAXF * sizeof *fields);
    size_t cap = 0;
    long *colof = NULL, *runof = NULL;
    int rc = 0;
    uint64_t line = 0;
    char *stem = stem_of(path, name);
    if (!fields || !stem) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    char *h;
    do {
        h = read_line(f, &buf, &cap);
        line++;
    } while (h && (!*h || *h == '#'));
    if (!h) {
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: empty scalar log (no header line)", path);
        goto done;
    }
    h += mm_bom_len(h, strlen(h));
    char delim = t && t->delim ? t->delim : (strchr(h, '\t') ? '\t' : ',');
    long nf = split_csv(h, delim, fields, MAXF);
    if (nf < 0 || nf > MAXF) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: malformed header", path, (unsigned long long)line);
        goto done;
    }
    size_t ncols = (size_t)nf;
    colof = malloc(ncols * sizeof *colof);
    runof = malloc(ncols * sizeof *runof);
    if (!colof || !runof) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    long stepc = -1, runc = -1;
    for (size_t i = 0; i < ncols; i++)
        if (stepc < 0 && is_step_col(fields[i], t)) stepc = (long)i;
    if (stepc < 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: header: no step column (one of step, Step, _step, global_step, "
                            "train/step; or --col-step NAME)", path);
        goto done;
    }
    /* TensorBoard's "Wall time,Step,Value": one tag per file, named in the file name */
    int tboard = ncols == 3 && strcmp(fields[0], "Wall time") == 0 && strcmp(fields[2], "Value") == 0;
    const char *runcol = t && t->col_run ? t->col_run : "run";
    for (size_t i = 0; i < ncols; i++) {
        colof[i] = runof[i] = -1;
        if ((long)i == stepc || ignored_col(fields[i])) continue;
        if (strcmp(fields[i], runcol) == 0) {
            runc = (long)i;
            continue;
        }
        const char *metric = fields[i];
        char tag[512];
        if (tboard) {
            const char *b = base_of(path), *k = strstr(b, "-tag-");
            size_t n = strlen(b);
            if (n > 4 && strcasecmp(b + n - 4, ".csv") == 0) n -= 4;
            const char *from = k ? k + 5 : b;
            snprintf(tag, sizeof tag, "%.*s", (int)(n - (size_t)(from - b)), from);
            int id = lookup_underscored(tag);
            metric = id >= 0 ? fp4s_mm_metric_name((size_t)id) : tag;
        }
        /* W&B panel export: "<run> - <metric>" */
        const char *sep = tboard ? NULL : strstr(metric, " - ");
        if (sep) {
            runof[i] = st_run(tb, metric, (size_t)(sep - metric));
            metric = sep + 3;
        }
        colof[i] = st_col(tb, metric, strlen(metric));
        if (colof[i] < 0 || (sep && runof[i] < 0)) {
            rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
            goto done;
        }
    }
    long deflt = st_run(tb, stem, strlen(stem));
    if (deflt < 0) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    char *l;
    while ((l = read_line(f, &buf, &cap))) {
        line++;
        if (!*l || *l == '#') continue;
        nf = split_csv(l, delim, fields, MAXF);
        if (nf != (long)ncols) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: %ld fields, the header has %zu", path,
                                (unsigned long long)line, nf, ncols);
            goto done;
        }
        int64_t step;
        int sr = parse_step(fields[stepc], &step);
        if (sr) {
            if (!*fields[stepc]) continue; /* a row without a step (W&B summary rows) */
            rc = sr == -2 ? fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: step '%s' is out of range (a 64-bit "
                                           "integer, or a real of at most %.0f in magnitude)", path,
                                           (unsigned long long)line, fields[stepc], MM_STEP_MAX)
                          : fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: step '%s' is not an integer", path,
                                           (unsigned long long)line, fields[stepc]);
            goto done;
        }
        long run = deflt;
        if (runc >= 0) {
            char nm[1024];
            if (name) snprintf(nm, sizeof nm, "%s/%s", name, fields[runc]);
            else snprintf(nm, sizeof nm, "%s", fields[runc]);
            run = st_run(tb, nm, strlen(nm));
        }
        for (size_t i = 0; i < ncols; i++) {
            if (colof[i] < 0) continue;
            double v;
            if (parse_num(fields[i], &v)) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: column '%s': expected a number, got '%s'", path,
                                    (unsigned long long)line, tb->cols[colof[i]], fields[i]);
                goto done;
            }
            if ((rc = put(tb, runof[i] >= 0 ? runof[i] : run, colof[i], step, v))) goto done;
        }
    }
    if (ferror(f)) rc = fp4s_error_set(FP4S_EOPEN, "%s: read error: %s", path, strerror(errno));
done:
    free(buf);
    free(fields);
    free(colof);
    free(runof);
    free(stem);
    return rc;
}

/* ---- JSONL: {"step": N, "data": {...}} (verl's file logger) or flat objects --------------------- */
#if FP4S_HAVE_JANSSON
static int json_flatten(stable *tb, long run, int64_t step, const char *prefix, json_t *o, int depth)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        char key[512];
        if (!prefix && strcmp(k, "data") == 0 && json_is_object(v)) { /* verl: {"step": N, "data": {...}} */
            int rc = json_flatten(tb, run, step, NULL, v, depth + 1);
            if (rc) return rc;
            continue;
        }
        snprintf(key, sizeof key, "%s%s%s", prefix ? prefix : "", prefix ? "/" : "", k);
        if (json_is_object(v) && depth < 4) {
            int rc = json_flatten(tb, run, step, key, v, depth + 1);
            if (rc) return rc;
            continue;
        }
        double x;
        if (json_is_number(v)) x = json_number_value(v);
        else if (mm_json_special(v, &x)) continue; /* Python's NaN, Infinity, -Infinity, else not a number */
        if (!prefix && is_step_col(key, NULL)) continue;
        int rc = put(tb, run, st_col(tb, key, strlen(key)), step, x);
        if (rc) return rc;
    }
    return 0;
}

static int jsonl_scalars(FILE *f, const char *path, const char *name, const fp4s_trace_opts *t, stable *tb)
{
    char *buf = NULL, *stem = stem_of(path, name);
    size_t cap = 0;
    uint64_t line = 0;
    int rc = 0;
    if (!stem) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    const char *runcol = t && t->col_run ? t->col_run : "run";
    char *l;
    while ((l = read_line(f, &buf, &cap))) {
        line++;
        if (line == 1) l += mm_bom_len(l, strlen(l));
        while (*l == ' ' || *l == '\t') l++;
        if (!*l) continue;
        json_error_t err;
        json_t *o = json_loads(l, 0, &err);
        if (!o) { /* NaN, Infinity, -Infinity as Python writes them? */
            char *fixed;
            size_t fl;
            int pr = mm_json_py_specials(l, strlen(l), &fixed, &fl);
            if (pr < 0) {
                rc = fp4s_error_set(FP4S_ENOMEM, "%s: line %llu: out of memory", path, (unsigned long long)line);
                break;
            }
            if (pr > 0) {
                o = json_loadb(fixed, fl, 0, &err);
                free(fixed);
            }
        }
        if (!o || !json_is_object(o)) {
            json_decref(o);
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: %s%s", path, (unsigned long long)line,
                                o ? "expected a JSON object per line" : "invalid JSON: ", o ? "" : err.text);
            break;
        }
        json_t *sv = NULL;
        const char *sk = NULL;
        for (size_t i = 0; !sv && i < sizeof step_cols / sizeof *step_cols + 1; i++) {
            sk = i == 0 ? (t && t->col_step ? t->col_step : "step") : step_cols[i - 1];
            sv = json_object_get(o, sk);
        }
        int64_t step;
        if (!sv || !json_is_number(sv) || json_number_value(sv) != floor(json_number_value(sv))) {
            json_decref(o);
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: no integer step field (step, _step, global_step, "
                                "train/step)", path, (unsigned long long)line);
            break;
        }
        if (json_is_integer(sv)) {
            step = json_integer_value(sv);
        } else if (fabs(json_real_value(sv)) <= MM_STEP_MAX) {
            step = (int64_t)json_real_value(sv);
        } else {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: field '%s': step %.17g is out of range (a step is "
                                "an integer of at most %.0f in magnitude as a real; an integer field may be any "
                                "64-bit integer)", path, (unsigned long long)line, sk, json_real_value(sv),
                                MM_STEP_MAX);
            json_decref(o);
            break;
        }
        json_t *rv = json_object_get(o, runcol);
        char nm[1024];
        if (json_is_string(rv)) snprintf(nm, sizeof nm, "%s%s%s", name ? name : "", name ? "/" : "", json_string_value(rv));
        else snprintf(nm, sizeof nm, "%s", stem);
        long run = st_run(tb, nm, strlen(nm));
        if (run < 0) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        else rc = json_flatten(tb, run, step, NULL, o, 0);
        json_decref(o);
        if (rc) break;
    }
    if (!rc && ferror(f)) rc = fp4s_error_set(FP4S_EOPEN, "%s: read error: %s", path, strerror(errno));
    free(buf);
    free(stem);
    return rc;
}
#endif

/* ---- sniffing ------------------------------------------------------------------------------------ */
static int has_ext(const char *p, const char *e)
{
    size_t n = strlen(p), m = strlen(e);
    return n > m && strcasecmp(p + n - m, e) == 0;
}

int mm_scalar_log_sniff(const char *path, const fp4s_trace_opts *t)
{
    if (t && t->format == FP4S_TRACE_SCALARS) return 1;
    if ((t && t->format != FP4S_TRACE_AUTO) || strcmp(path, "-") == 0) return 0;
    if (has_ext(path, ".h5") || has_ext(path, ".hdf5") || has_ext(path, ".hdf")) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = NULL, *l;
    size_t cap = 0;
    int out = 0;
    while ((l = read_line(f, &buf, &cap)) && (!*l || *l == '#')) {
    }
    if (l) l += mm_bom_len(l, strlen(l)); /* a UTF-8 byte order mark (Windows tools write one) */
    /* a token trace names a log-prob or the sequence column (a missing one
     * is the trace reader's clear error); a scalar log names none of them */
    const char *lt = t && t->col_trainer ? t->col_trainer : "trainer_logprob";
    const char *lr = t && t->col_rollout ? t->col_rollout : "rollout_logprob";
    const char *sq = t && t->col_seq ? t->col_seq : "seq";
    if (l && memcmp(l, "\211HDF", 4) != 0) {
        if (*l == '{') {
            char k1[300], k2[300], k3[300];
            snprintf(k1, sizeof k1, "\"%s\"", lt);
            snprintf(k2, sizeof k2, "\"%s\"", lr);
            snprintf(k3, sizeof k3, "\"%s\"", sq);
            out = !strstr(l, k1) && !strstr(l, k2) && !strstr(l, k3);
        } else {
            char *fields[256];
            char delim = t && t->delim ? t->delim : (strchr(l, '\t') ? '\t' : ',');
            long nf = split_csv(l, delim, fields, 256);
            int tok = 0, st = 0;
            for (long i = 0; i < nf && i < 256; i++) {
                st |= is_step_col(fields[i], t);
                tok |= !strcmp(fields[i], lt) || !strcmp(fields[i], lr) || !strcmp(fields[i], sq);
            }
            out = st && !tok;
        }
    }
    free(buf);
    fclose(f);
    return out;
}

int fp4s_mm_is_scalar_log(const char *path, const fp4s_trace_opts *t) { return path && mm_scalar_log_sniff(path, t); }

int mm_scalar_log_read(const char *path, const char *name, const fp4s_trace_opts *t, fp4s_mm_result *res)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, strerror(errno));
    int c = fgetc(f);
    if (c == 0xEF) { /* a UTF-8 byte order mark: skipped (the readers skip it again where it starts a line) */
        int c2 = fgetc(f), c3 = c2 == 0xBB ? fgetc(f) : EOF;
        if (c2 == 0xBB && c3 == 0xBF) c = fgetc(f);
        else {
            if (f != stdin) fclose(f);
            return fp4s_error_set(FP4S_EFORMAT, "%s: line 1: starts with a byte 0xEF that is not a UTF-8 byte "
                                  "order mark", path);
        }
    }
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = fgetc(f);
    if (c != EOF) ungetc(c, f);
    stable tb = {.path = path};
    int rc;
    if (c == '{') {
#if FP4S_HAVE_JANSSON
        rc = jsonl_scalars(f, path, name, t, &tb);
#else
        rc = fp4s_error_set(FP4S_ENOTSUP, "%s: reading JSONL needs jansson", path);
#endif
    } else {
        rc = csv_scalars(f, path, name, t, &tb);
    }
    if (f != stdin) fclose(f);
    size_t rows = 0;
    for (size_t r = 0; r < tb.nruns; r++) rows += tb.runs[r].nsteps;
    if (!rc && (rows == 0 || tb.ncols == 0))
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: no per-step values in the scalar log", path);
    if (!rc) rc = to_runs(&tb, path, res);
    st_free(&tb);
    return rc;
}

/* The per-step scalars of a capture: attached to its log-prob run (same
 * steps; NaN where a step has none), or a run of their own when the capture
 * has no log-probs (add_run). */
int mm_capture_scalars(const char *path, const char *name, fp4s_mm_result *res, size_t run_index, int add_run)
{
    fp4s_capture_scalar *sc = NULL;
    size_t n = 0;
    int rc = fp4s_capture_scalars(path, &sc, &n);
    if (rc) return rc;
    if (n == 0) {
        free(sc);
        return add_run ? fp4s_error_set(FP4S_EEMPTY, "%s: no log-probs and no per-step scalars", path) : 0;
    }
    stable tb = {.path = path};
    char *stem = stem_of(path, name);
    long run = stem ? st_run(&tb, stem, strlen(stem)) : -1;
    free(stem);
    if (add_run) {
        for (size_t i = 0; i < n && !rc; i++)
            rc = put(&tb, run, st_col(&tb, sc[i].name, strlen(sc[i].name)), sc[i].step, sc[i].value);
        if (!rc) rc = to_runs(&tb, path, res);
        st_free(&tb);
        free(sc);
        return rc;
    }
    fp4s_mm_run *r = &res->runs[run_index];
    for (size_t i = 0; i < n && !rc; i++) {
        long c = st_col(&tb, sc[i].name, strlen(sc[i].name));
        if (c < 0) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    if (!rc) {
        r->scalar_names = calloc(tb.ncols, sizeof *r->scalar_names);
        r->scalars = malloc((r->nsteps ? r->nsteps : 1) * tb.ncols * sizeof *r->scalars);
        if (!r->scalar_names || !r->scalars) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    if (!rc) {
        r->nscalars = tb.ncols;
        for (size_t k = 0; k < tb.ncols; k++) {
            r->scalar_names[k] = tb.cols[k];
            tb.cols[k] = NULL;
        }
        for (size_t i = 0; i < r->nsteps * tb.ncols; i++) r->scalars[i] = NAN;
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            while (j < r->nsteps && r->steps[j].step < sc[i].step) j++;
            if (j >= r->nsteps) break;
            if (r->steps[j].step != sc[i].step) continue;
            long k = mm_strmap_get(&tb.colmap, sc[i].name, strlen(sc[i].name));
            if (k >= 0) r->scalars[j * r->nscalars + (size_t)k] = sc[i].value;
        }
    }
    st_free(&tb);
    free(sc);
    return rc;
}
