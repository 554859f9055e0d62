/* The record types of the log-prob mismatch (fp4scope/record.h): one row per
 * member of fp4s_mm_metrics and fp4s_mm_run. */
#include <fp4scope/mismatch.h>
#include <fp4scope/record.h>

#include <stddef.h>

#define ROW(T, m, ty, fl, u, d) {#m, ty, offsetof(T, m), 1, -1, 0, NULL, fl, u, d, -1}
#define O FP4S_FF_OUTPUT
#define TYPE(fn, T, tname, rows) \
    const fp4s_rtype *fn(void) \
    { \
        static const fp4s_rtype t = {tname, sizeof(T), rows, sizeof rows / sizeof rows[0]}; \
        return &t; \
    }

/* the metrics by name are fp4s_mm_metric_name(i): v[] is one row here */
#define T fp4s_mm_metrics
static const fp4s_rfield metrics_rows[] = {
    ROW(T, step, FP4S_FT_I64, O, "", "the step"),
    ROW(T, tokens, FP4S_FT_U64, O, "tokens", "counted tokens"),
    ROW(T, sequences, FP4S_FT_U64, O, "", "sequences with a counted token"),
    ROW(T, masked, FP4S_FT_U64, O, "tokens", "tokens with mask = 0"),
    ROW(T, nonfinite, FP4S_FT_U64, O, "tokens", "tokens excluded for a non-finite log-prob"),
    ROW(T, nmetrics, FP4S_FT_U32, 0, "", "v[0 .. nmetrics-1] filled"),
    ROW(T, reserved, FP4S_FT_U32, 0, "", "zero"),
    {"v", FP4S_FT_F64, offsetof(T, v), FP4S_MM_METRIC_SLOTS, -1, 0, NULL, O, "",
     "the metrics by id (fp4s_mm_metric_name)", -1},
};
TYPE(fp4s_rtype_mm_metrics, T, "mm_metrics", metrics_rows)
#undef T

#define T fp4s_mm_run
static const fp4s_rfield run_rows[] = {
    ROW(T, name, FP4S_FT_STR, O, "", "run name"),
    ROW(T, source, FP4S_FT_STR, O, "", "the input path"),
    ROW(T, nsteps, FP4S_FT_SIZE, O, "", "steps"),
    {"steps", FP4S_FT_PTR_STRUCT, offsetof(T, steps), 1, offsetof(T, nsteps), 1, fp4s_rtype_mm_metrics, O, "",
     "the metrics per step", -1},
    {"first", FP4S_FT_PTR_STRUCT, offsetof(T, first), 1, offsetof(T, nsteps), 1, fp4s_rtype_mm_metrics, O, "",
     "by position: first-token metrics per step", -1},
    {"rest", FP4S_FT_PTR_STRUCT, offsetof(T, rest), 1, offsetof(T, nsteps), 1, fp4s_rtype_mm_metrics, O, "",
     "by position: the other tokens", -1},
    ROW(T, tokens, FP4S_FT_U64, O, "tokens", "total over the run"),
    ROW(T, masked, FP4S_FT_U64, O, "tokens", "masked, total"),
    ROW(T, nonfinite, FP4S_FT_U64, O, "tokens", "non-finite, total"),
    ROW(T, skipped_steps, FP4S_FT_SIZE, O, "", "empty steps skipped"),
    ROW(T, nscalars, FP4S_FT_SIZE, O, "", "per-step scalars"),
    {"scalar_names", FP4S_FT_PTR_STR, offsetof(T, scalar_names), 1, offsetof(T, nscalars), 1, NULL, O, "",
     "their names", -1},
    {"scalars", FP4S_FT_PTR_F64, offsetof(T, scalars), 1, offsetof(T, nsteps), 1, NULL, O, "",
     "scalars[i * nscalars + k]: scalar k at steps[i] (NaN where absent)", offsetof(T, nscalars)},
    {"reserved", FP4S_FT_U32, offsetof(T, reserved), 8, -1, 0, NULL, 0, "", "zero", -1},
};
TYPE(fp4s_rtype_mm_run, T, "mm_run", run_rows)
#undef T
