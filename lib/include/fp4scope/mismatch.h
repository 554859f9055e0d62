/* Rollout / trainer log-prob mismatch over training steps (man/fp4-mismatch.1).
 *
 * Per token t of a response: lp_t = trainer log-prob, lp_r = rollout log-prob of
 * the same token, rho = lp_t - lp_r, w = exp(rho). Over the counted tokens of
 * one step (mask = 1, both log-probs finite) the accumulator computes the
 * metrics the RL frameworks log, with their formulas:
 *
 *   mean_abs          mean |rho|                                    (slime, token mean)
 *   mean_abs_per_seq  mean over sequences of the sequence mean |rho| (slime
 *                     train_rollout_logprob_abs_diff, sum_of_sample_mean)
 *   max_abs           max |rho|                                     (QUADS "max gap")
 *   k1                mean(lp_r - lp_t)       (verl rollout_corr/kl, OpenRLHF vllm_kl)
 *   k2                mean(rho^2 / 2)
 *   k3                mean(exp(rho) - rho - 1), rho not clamped     (verl k3_kl)
 *   chi2_token        mean(exp(clamp(rho))^2) - 1                   (verl)
 *   chi2_seq          mean over sequences of exp(2 clamp(sum rho)) - 1 (verl)
 *   probs_diff_*      mean / max / std (n-1) of |exp(lp_t) - exp(lp_r)|,
 *   probs_pearson     Pearson correlation of exp(lp_t), exp(lp_r) (verl training/)
 *   ppl_trainer/rollout  mean over sequences of exp(-sequence mean lp)  (verl)
 *   log_ppl_diff_mean/abs_diff/max/min, ppl_ratio: d_s = mean_s(lp_r) - mean_s(lp_t),
 *                     mean d, mean |d|, max d, min d, mean exp(d)   (verl)
 *   is_mean/max/min   of w = exp(clamp(rho))                        (verl token IS)
 *   is_std, is_ess    std and 1/mean((wc/(mean wc + 1e-8))^2) of wc = w clamped
 *                     to [1/C, C]                                   (verl compute_is_metrics)
 *   is_frac_high/low  fraction of tokens with w > C, w < 1/C        (verl)
 *   abs_p99_9 ... abs_p1  percentiles of |rho| with llama.cpp's rule
 *                     (linear interpolation at fraction * (n - 1) of the sorted values)
 *   mult_prob_error   mean exp(|rho|)                               (NeMo-RL token_mult_prob_error)
 *   k3_reverse        mean(exp(-rho) + rho - 1)                     (NeMo-RL policy_kl_error)
 *
 * clamp is verl's SAFETY_BOUND (20). C is the IS cap (default 2, verl's
 * rollout_is_threshold). The accumulator divides by the exact token / sequence
 * counts (verl adds 1e-8 to its masked_mean denominators; the difference is
 * below 1e-8 relative).
 *
 * Thread-safety: an accumulator belongs to one thread at a time; merge
 * partials built on several threads with fp4s_mm_acc_merge. */
#ifndef FP4SCOPE_MISMATCH_H
#define FP4SCOPE_MISMATCH_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4S_MM_NPCT 7
/* The percentile levels of |rho| (percent), in the order of abs_pct[]. */
FP4S_API const double *fp4s_mm_percentile_levels(void);

typedef struct fp4s_mm_opts {
    double is_cap;        /* C: IS fractions and the clamp of is_std / is_ess; default 2 */
    double clamp;         /* |rho| bound before exp where verl clamps; default 20 */
    bool allow_positive;  /* accept log-probs > 0 (default false: an error) */
    bool by_position;     /* also split each step into first token / rest */
    bool skip_empty;      /* skip steps with no counted token (default: error) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_opts;
FP4S_API size_t fp4s_mm_opts_size(void);

FP4S_API void fp4s_mm_opts_defaults(fp4s_mm_opts *o);

/* Room for the double-valued metrics in fp4s_mm_metrics.v: ids
 * 0 .. fp4s_mm_metric_count() - 1 are filled, the rest are reserved for
 * metrics later versions add. */
#define FP4S_MM_METRIC_SLOTS 64

/* Metrics of one step (or one part of it with by_position).
 *
 * Growth without breaking callers: every double-valued metric is v[id], id
 * its position in the metric table (fp4s_mm_metric_name/_index/_value below;
 * ids are never reordered or reused, new metrics take the next free slot), so
 * the struct keeps its size and layout while metrics are added: a program
 * built against an older header reads the new ones by name through
 * fp4s_mm_metric_index() and fp4s_mm_metric_value(). The named fields are a
 * view of the first 33 ids (the metrics of version 1) and stay valid; later
 * metrics have no field name. nmetrics says how many ids the library that
 * filled the struct knows. */
typedef struct fp4s_mm_metrics {
    int64_t step;
    uint64_t tokens;      /* counted tokens */
    uint64_t sequences;   /* sequences with at least one counted token */
    uint64_t masked;      /* tokens with mask = 0 */
    uint64_t nonfinite;   /* unmasked tokens excluded because a log-prob was NaN or +-Inf */
    uint32_t nmetrics;    /* v[0 .. nmetrics-1] filled (fp4s_mm_metric_count() of the filling library) */
    uint32_t reserved;
    union {
        double v[FP4S_MM_METRIC_SLOTS]; /* by metric id */
        struct {
            double mean_abs, mean_abs_per_seq, max_abs;
            double k1, k2, k3, chi2_token, chi2_seq;
            double probs_diff_mean, probs_diff_max, probs_diff_std, probs_pearson;
            double ppl_trainer, ppl_rollout;
            double log_ppl_diff_mean, log_ppl_abs_diff, log_ppl_diff_max, log_ppl_diff_min, ppl_ratio;
            double is_mean, is_max, is_min, is_std, is_ess, is_frac_high, is_frac_low;
            double abs_pct[FP4S_MM_NPCT]; /* abs_p99_9, abs_p99, abs_p95, abs_p90, abs_p50, abs_p10, abs_p1 */
        };
    };
} fp4s_mm_metrics;
FP4S_API size_t fp4s_mm_metrics_size(void);

/* The double-valued metrics by name (the JSON field and CSV column names),
 * for --metric, tables and plots. Index i (the metric's id) in
 * [0, fp4s_mm_metric_count()). */
FP4S_API size_t fp4s_mm_metric_count(void);
FP4S_API const char *fp4s_mm_metric_name(size_t i);
/* Short description with the unit, for axis labels ("mean |rho| (nats)"). */
FP4S_API const char *fp4s_mm_metric_label(size_t i);
/* Index of a metric name, or -1 when unknown. */
FP4S_API int fp4s_mm_metric_index(const char *name);
/* m->v[i]; NaN when i is not below m->nmetrics. */
FP4S_API double fp4s_mm_metric_value(const fp4s_mm_metrics *m, size_t i);

/* ---- accumulator (init / add / merge / finish) --------------------------------- */
typedef struct fp4s_mm_acc fp4s_mm_acc;

/* o may be NULL (defaults). */
FP4S_API int fp4s_mm_acc_open(const fp4s_mm_opts *o, fp4s_mm_acc **out);
FP4S_API void fp4s_mm_acc_close(fp4s_mm_acc **a);
/* Forget all tokens (keeps the options and the buffers). */
FP4S_API void fp4s_mm_acc_reset(fp4s_mm_acc *a);

/* Add n tokens. seq: sequence id of each token (required); mask NULL = all
 * counted. Tokens with a NaN or infinite log-prob are excluded and counted in
 * `nonfinite`. A positive log-prob is FP4S_EFORMAT unless allow_positive
 * (nothing of this call is added then). If first_out is not NULL, first_out[i]
 * is set to 1 when token i is the first counted token of its sequence in this
 * accumulator, else 0. The accumulator keeps |rho| of every counted token
 * (8 bytes each) for the exact percentiles, so feed it one step at a time. */
FP4S_API int fp4s_mm_acc_add(fp4s_mm_acc *a, size_t n, const double *trainer,
                             const double *rollout, const int64_t *seq,
                             const uint8_t *mask, uint8_t *first_out);

/* Fold src into dst (sums add; sequences with the same id are joined; |rho|
 * values are appended). Both must have the same options. */
FP4S_API int fp4s_mm_acc_merge(fp4s_mm_acc *dst, const fp4s_mm_acc *src);

/* Compute the metrics (out->step is left as it was). FP4S_EEMPTY when no token
 * was counted. The accumulator is unchanged and may keep growing. */
FP4S_API int fp4s_mm_acc_finish(fp4s_mm_acc *a, fp4s_mm_metrics *out);

/* ---- traces --------------------------------------------------------------------- */
typedef enum fp4s_trace_format {
    FP4S_TRACE_AUTO = 0, FP4S_TRACE_CSV, FP4S_TRACE_JSONL, FP4S_TRACE_CAPTURE,
    FP4S_TRACE_SCALARS /* a per-step scalar log (see fp4s_mm_analyze) */
} fp4s_trace_format;

typedef struct fp4s_trace_opts {
    fp4s_trace_format format; /* AUTO: by extension (.h5 .hdf5 .csv .tsv .jsonl .ndjson), else by content */
    char delim;               /* CSV delimiter; 0 = auto from the header (tab, comma, semicolon) */
    const char *col_step, *col_seq, *col_trainer, *col_rollout; /* required columns */
    const char *col_pos, *col_mask, *col_run;                   /* optional columns */
    /* With a pos column, a token whose (run, step, seq, pos) came before is
     * FP4S_EFORMAT naming both lines (it would be counted twice); dedupe:
     * keep the first and drop the others. Costs about 8-16 bytes per token
     * of the largest step. Default false. */
    bool dedupe;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_trace_opts;
FP4S_API size_t fp4s_trace_opts_size(void);

/* Default column names: step, seq, trainer_logprob, rollout_logprob, pos, mask, run. */
FP4S_API void fp4s_trace_opts_defaults(fp4s_trace_opts *o);

/* ---- whole-trace analysis -------------------------------------------------------- */
typedef struct fp4s_mm_run {
    char *name;              /* run name: the --name given, else the run column value, else the file name */
    char *source;            /* the input path */
    size_t nsteps;
    fp4s_mm_metrics *steps;  /* sorted by step */
    fp4s_mm_metrics *first;  /* by_position: first-token metrics per step (tokens = 0 if none), else NULL */
    fp4s_mm_metrics *rest;   /* by_position: the other tokens, else NULL */
    uint64_t tokens, masked, nonfinite; /* totals over the run */
    size_t skipped_steps;    /* empty steps skipped with skip_empty */
    /* Per-step scalars by name: every column of a scalar log, or a capture's
     * /steps/<step> attributes; scalars[i * nscalars + k] is column k at
     * steps[i] (NaN where that step has none). 0 / NULL for token traces. */
    size_t nscalars;
    char **scalar_names;
    double *scalars;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_run;
FP4S_API size_t fp4s_mm_run_size(void);

typedef struct fp4s_mm_result {
    size_t nruns;
    fp4s_mm_run *runs;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_result;
FP4S_API size_t fp4s_mm_result_size(void);

/* Stream one trace (CSV/TSV, JSONL or capture file; "-" = stdin for CSV and
 * JSONL) and append its runs to res.
 *
 * Per-step scalar logs (the metrics RL frameworks log once per step) are
 * read too: a CSV whose header has a step column (step, Step, _step,
 * global_step, train/step, or col_step) but not the two log-prob columns (a
 * W&B export, with "RUN - METRIC" columns for several runs and __MIN/__MAX
 * columns ignored; a TensorBoard export "Wall time,Step,Value", the tag taken
 * from the file name after "-tag-"; any one-row-per-step table), or JSONL of
 * one object per step (verl's file logger {"step": N, "data": {...}}, or flat
 * objects; nested objects are joined with '/'), or format
 * FP4S_TRACE_SCALARS. Each column whose name is a metric or a framework's
 * name of one (fp4s_mm_metric_lookup) fills that metric of the step; every
 * column is kept by name in scalars; tokens are 0. A capture's per-step
 * scalars are attached to its run, and a capture without log-probs but with
 * scalars gives a run of them alone. Rows of a scalar log may come in any
 * order; rows of one step are merged.
 *
 * For token traces (zero-initialise res before the first call).
 * Rows of a run must arrive grouped by step: a step that comes back after
 * another step of the same run began is FP4S_EFORMAT (sort the trace by run
 * and step first). Memory is bounded by the largest step (8 bytes per token
 * plus about 48 bytes per sequence, and 512 KiB of histogram per accumulator
 * and per worker thread); steps of 10^6 tokens need about 35-50 MiB in all.
 * Large segments are added on fp4s_get_threads() threads into per-worker
 * partials merged in order at the end of each step. name: NULL, or the run name to use (a
 * file with a run column then gets "name/value"). Errors name the file, the
 * line or dataset and the problem; on error res keeps the runs of earlier
 * calls only. */
FP4S_API int fp4s_mm_analyze(const char *path, const char *name, const fp4s_mm_opts *o,
                             const fp4s_trace_opts *t, fp4s_mm_result *res);
/* fp4s_mm_analyze over a part of a capture, for work split over processes
 * (fp4-mismatch under MPI): the capture's steps, in the file's (sorted)
 * order, are cut into nparts contiguous ranges (range p holds the steps of
 * index floor(n p / nparts) up to floor(n (p + 1) / nparts)), and only the
 * steps of range `part` are read and analyzed; the capture's per-step
 * scalars of those steps are attached (the names of all of them, as in one
 * pass). Joining the run of every part in part order (steps and scalar rows
 * appended, totals added) gives fp4s_mm_analyze's run bit for bit.
 * FP4S_EEMPTY (with fp4s_mm_analyze's message) when the range read no token:
 * when every range does, fp4s_mm_analyze over the whole file says what the
 * capture holds (its per-step scalars alone, or the error). FP4S_ENOTSUP for
 * a text trace or a per-step scalar log, whose steps are known only once it
 * is read whole. */
FP4S_API int fp4s_mm_analyze_part(const char *path, const char *name, const fp4s_mm_opts *o,
                                  const fp4s_trace_opts *t, size_t part, size_t nparts, fp4s_mm_result *res);
FP4S_API void fp4s_mm_result_free(fp4s_mm_result *res);
/* What one run owns, freed, and *run zeroed (fp4s_mm_result_free does this
 * for each run; for a run taken out of a result, as joining parts does). */
FP4S_API void fp4s_mm_run_free(fp4s_mm_run *run);

/* ---- the frameworks' names of the metrics ------------------------------------------ */
typedef enum fp4s_mm_names {
    FP4S_NAMES_FP4SCOPE = 0, FP4S_NAMES_VERL, FP4S_NAMES_SLIME, FP4S_NAMES_NEMO_RL
} fp4s_mm_names;
/* "fp4scope", "verl", "slime", "nemo-rl" (or "nemo"); FP4S_EINVAL otherwise. */
FP4S_API int fp4s_mm_names_parse(const char *s, fp4s_mm_names *out);
FP4S_API const char *fp4s_mm_names_name(fp4s_mm_names fw);
/* The name framework fw logs metric id under ("rollout_corr/k3_kl" for k3 in
 * verl), the metric's own name for FP4S_NAMES_FP4SCOPE, NULL when fw logs no
 * exact equivalent. */
FP4S_API const char *fp4s_mm_metric_alias(size_t id, fp4s_mm_names fw);
/* 1 when fp4s_mm_analyze would read `path` as a per-step scalar log. */
FP4S_API int fp4s_mm_is_scalar_log(const char *path, const fp4s_trace_opts *t);
/* The id of a metric by its name or any framework's name of it, else -1. */
FP4S_API int fp4s_mm_metric_lookup(const char *name);
/* The series of `metric` over the run's steps into out[nsteps]: a metric (by
 * any of its names), else a per-step scalar of that exact name;
 * FP4S_ENOTFOUND when the run has neither. */
FP4S_API int fp4s_mm_run_series(const fp4s_mm_run *r, const char *metric, double *out);

/* The metric fp4-mismatch and fp4-plot follow when none is asked for: the
 * order (i from 0; NULL past its end) is mean_abs, mean_abs_per_seq (slime's
 * train_rollout_logprob_abs_diff), k3 (verl's rollout_corr/k3_kl, NeMo-RL's
 * gen_kl_error), log_ppl_abs_diff, k1 (verl's rollout_corr/kl),
 * mult_prob_error (NeMo-RL's token_mult_prob_error), chi2_token,
 * probs_diff_mean, k3_reverse (NeMo-RL's policy_kl_error), max_abs. */
FP4S_API const char *fp4s_mm_metric_preferred(size_t i);
/* The id of the first metric of that order with a finite value at some step
 * of every run of res that has steps; -1 when none has. */
FP4S_API int fp4s_mm_metric_pick(const fp4s_mm_result *res);
/* The steps of r with a finite value of `metric` (a metric by any of its
 * names, else a per-step scalar by its name); 0 when r has none. */
FP4S_API size_t fp4s_mm_run_count(const fp4s_mm_run *r, const char *metric);
/* The column of a scalar log that filled metric id ("rollout_corr/k3_kl"),
 * NULL when none did (a token trace). */
FP4S_API const char *fp4s_mm_run_logged_as(const fp4s_mm_run *r, size_t id);
/* The level a framework documents as the edge of a harmful mismatch for
 * metric id, and where it comes from (a static string naming the
 * repository, file and commit): mean_abs_per_seq and mean_abs 0.1 (slime's
 * CI bound on train_rollout_logprob_abs_diff), mult_prob_error 1.05
 * (NeMo-RL's guide). FP4S_ENOTFOUND for the others: no framework gives one
 * (verl's thresholds are the user's, with no default); a reference run's
 * noise floor is the level then. */
FP4S_API int fp4s_mm_metric_level(size_t id, double *level, const char **source);

/* ---- onset of divergence and trend ----------------------------------------------- */
typedef struct fp4s_mm_onset_opts {
    size_t baseline_steps; /* first steps used for the baseline; default 10 */
    double margin;         /* relative margin over |baseline|; default 0.5 */
    double sigma;          /* robust sigmas (1.4826 MAD of the baseline) over the baseline; default 3 */
    size_t consecutive;    /* steps in a row above the threshold; default 5 */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_onset_opts;
FP4S_API size_t fp4s_mm_onset_opts_size(void);

FP4S_API void fp4s_mm_onset_opts_defaults(fp4s_mm_onset_opts *o);

typedef struct fp4s_mm_onset {
    bool found;
    int64_t step;          /* first step of the first run of `consecutive` steps above threshold */
    size_t index;          /* its index in the series */
    double value;          /* the metric there */
    double baseline;       /* median of the baseline steps */
    double spread;         /* 1.4826 * MAD of the baseline steps */
    double threshold;      /* baseline + max(margin * |baseline|, sigma * spread) */
    size_t baseline_n;     /* steps in the baseline (finite values) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_onset;
FP4S_API size_t fp4s_mm_onset_size(void);

/* Onset in a series (steps ascending). FP4S_EEMPTY when the series is shorter
 * than baseline_steps + consecutive (out->found is false and the baseline is
 * filled when possible). NaN values are never above the threshold. */
FP4S_API int fp4s_mm_onset_find(const int64_t *steps, const double *values, size_t n,
                                const fp4s_mm_onset_opts *o, fp4s_mm_onset *out);

/* Change point: where ln(metric) bends from flat to growing, by a
 * two-segment fit at every candidate step (a constant before it, a straight
 * line in ln from it on: an exponential growth, possibly after a jump), the
 * best one kept when its slope is positive and it beats both one straight
 * line and a constant by min_bic_gain in BIC (4 parameters against 2 and 1). Finds the bend itself, so its delay does
 * not depend on the growth rate the way the threshold onset's does. */
typedef struct fp4s_mm_changepoint_opts {
    size_t min_segment;   /* points in each segment, >= 2; default 5 */
    double min_bic_gain;  /* default 10 ("very strong" on the usual BIC scale) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_changepoint_opts;
FP4S_API size_t fp4s_mm_changepoint_opts_size(void);

FP4S_API void fp4s_mm_changepoint_opts_defaults(fp4s_mm_changepoint_opts *o);

typedef struct fp4s_mm_changepoint {
    bool found;            /* a bend with growth after it (rate > 0) and the BIC gain */
    int64_t step;          /* the first step of the growing segment (-1 when not found) */
    size_t index;          /* its index in the series */
    double level;          /* the metric's level before it (exp of the mean ln over the flat segment) */
    double rate;           /* d ln(metric) / d step after it */
    double bic_gain;       /* BIC of the better of line / constant minus that of the fit */
    size_t n;              /* points used (finite, positive values) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_changepoint;
FP4S_API size_t fp4s_mm_changepoint_size(void);

/* FP4S_EEMPTY when fewer than 2 min_segment positive values (found false). */
FP4S_API int fp4s_mm_changepoint_find(const int64_t *steps, const double *values, size_t n,
                                      const fp4s_mm_changepoint_opts *o, fp4s_mm_changepoint *out);

typedef struct fp4s_mm_trend {
    bool valid;
    size_t n;              /* points used (finite, positive values) */
    double slope;          /* d ln(metric) / d step, bisquare robust fit */
    double se;             /* its standard error */
    double lo, hi;         /* confidence interval at `level` (Student t, n - 2 dof) */
    double level;
    double intercept;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_mm_trend;
FP4S_API size_t fp4s_mm_trend_size(void);

/* Robust linear fit of ln(value) against step (GSL gsl_multifit_robust,
 * bisquare). Needs 3 or more positive values (FP4S_EEMPTY otherwise).
 * FP4S_ENOTSUP when the library was built without GSL. */
FP4S_API int fp4s_mm_trend_fit(const int64_t *steps, const double *values, size_t n,
                               double level, fp4s_mm_trend *out);

/* Percentile of data (n values, reordered in place) with llama.cpp's rule:
 * fraction f in [0, 1], p = f (n - 1), linear interpolation between the
 * values of rank floor(p) and floor(p) + 1. Returns NaN for n = 0. Several
 * at once: fractions[k] -> out[k] (any order), O(n) expected time. */
FP4S_API void fp4s_percentiles(double *data, size_t n, const double *fractions, size_t k,
                               double *out);

#ifdef __cplusplus
}
#endif
#endif
