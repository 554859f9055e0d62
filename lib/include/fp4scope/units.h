/* The unit walker of the site analyses: what fp4-compare, fp4-remedy,
 * fp4-decompose's capture selection and fp4-report walk.
 *
 * A unit is one linear site Y = X W^T at one step: the rollout activations
 * X [m, k], the trainer activations X_t of the same tokens (when captured)
 * and the weight W [n, k]. A list of units is made once from the captures
 * (or from three tensors) with every check that needs no data: the
 * selection (--sites, --steps), the pairing of each rollout side with its
 * trainer side and its weight (the step's own weight, else /weights/SITE),
 * the trainer's shape and the weight's K. Reading a unit (fp4s_unit_read)
 * is the one place where trainer rows are paired with rollout rows.
 *
 * A new per-site analysis is one unit function and one record table (the
 * files, read off fp4-compare): the function from a unit's data
 * (fp4s_unit_read) to its result struct, in its analysis module, and the
 * struct's record table (<fp4scope/record.h>, in the module's records.c);
 * then the walk (cli_units, par_mine per unit, par_gather_units moving the
 * records), the JSON and CSV (tools/out) and the report's row
 * (tools/report/sections.c) read those two.
 *
 * Experimental API: not included by <fp4scope/fp4scope.h>; these structs
 * may change between releases (no size queries, no reserved fields). See
 * libfp4scope(3).
 *
 * Errors: negative FP4S_E* codes with fp4s_last_error() set (the library
 * never prints). */
#ifndef FP4SCOPE_UNITS_H
#define FP4SCOPE_UNITS_H

#include <fp4scope/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a unit without a trainer side or without a weight gets. */
typedef enum fp4s_unit_need {
    FP4S_UNIT_OPTIONAL = 0, /* kept, with xt or w NULL */
    FP4S_UNIT_SKIP,         /* left out of the list (counted in no_trainer / no_weight) */
    FP4S_UNIT_REQUIRED      /* FP4S_ENOTFOUND naming the datasets looked for */
} fp4s_unit_need;

/* The selection of a capture's units (fp4s_unit_select_defaults: all of them). */
typedef struct fp4s_unit_select {
    const char *sites;          /* fnmatch glob (fp4s_site_match); NULL: every site */
    const long long *steps;     /* the steps wanted, nsteps of them; NULL: every step */
    size_t nsteps;
    fp4s_unit_need trainer;     /* default FP4S_UNIT_OPTIONAL */
    fp4s_unit_need weight;      /* default FP4S_UNIT_OPTIONAL */
    size_t k_multiple;          /* units whose K is not a multiple of it go to `left` (0: none) */
    bool strict;                /* a (step, site) whose sides cannot be paired (shapes that differ
                                   without token ids on both sides, malformed ids) fails the whole
                                   list (true), or is left out and recorded in `skipped` (false,
                                   the default: one damaged site never refuses a capture) */
} fp4s_unit_select;
FP4S_API void fp4s_unit_select_defaults(fp4s_unit_select *s);

/* Does capture entry e pass the site and step selection of s? Log-prob
 * fields never do; with steps given, a step-independent weight (/weights,
 * step -1) does not. Every side passes: fp4-decompose selects datasets with
 * it (and its --sides); the walker takes the rollout sides. */
FP4S_API bool fp4s_unit_select_match(const fp4s_unit_select *s, const fp4s_capture_entry *e);

/* One unit. Strings are owned by the list.
 *
 * Token ids: where both sides of a (step, site) carry ids (fp4scope-capture(5):
 * <side>_ids), rows are paired by id, and the tokens one side holds alone
 * are routing flips: an MoE expert the rollout routed other tokens to than
 * the trainer. The listing reads and checks the ids (a side that holds an id
 * twice, or ids that do not fit its rows, is a damaged site) and counts the
 * flips; fp4s_unit_read pairs the rows. */
typedef struct fp4s_unit {
    size_t input;         /* which fp4s_units_add_* call made it (0, 1, ...) */
    int64_t step;         /* -1: given as tensors */
    char *site;           /* NULL: given as tensors */
    char *x, *xt, *w;     /* source specs (fp4s_source_open); xt, w NULL when absent */
    size_t m, k, n;       /* X is [m, k] and W is [n, k] (n = 0 without W); without ids X_t is [m, k] */
    char *file;           /* the capture (NULL: given as tensors) */
    bool ids;             /* both sides carry token ids: rows are paired by id */
    size_t mt;            /* rows of X_t (m without ids) */
    size_t both, rollout_only, trainer_only; /* ids: tokens on both sides, on one side alone */
    int64_t *flips;       /* ids: the (sequence, position) of the rollout_only then the
                             trainer_only tokens, [rollout_only + trainer_only][2] */
} fp4s_unit;

/* A (step, site) left out of the list because its sides cannot be paired
 * (fp4s_unit_select.strict false). */
typedef struct fp4s_unit_skip {
    int64_t step;
    char *site;
    char *why;            /* the message (file, dataset and problem) */
} fp4s_unit_skip;

/* A list of units, in the order of the inputs and, within a capture, of its
 * listing (step, then site). Zero-initialise it, add inputs, read units,
 * then fp4s_units_free. */
typedef struct fp4s_units {
    fp4s_unit *u;
    size_t n;
    fp4s_unit *left;      /* selected units whose K is not a multiple of k_multiple */
    size_t nleft;
    size_t selected;      /* rollout sides selected, over every input */
    size_t no_trainer;    /* of those, left out for lack of a trainer side (FP4S_UNIT_SKIP) */
    size_t no_weight;     /* ... for lack of a weight (FP4S_UNIT_SKIP) */
    size_t inputs;        /* fp4s_units_add_* calls so far */
    fp4s_unit_skip *skipped; /* the damaged (step, site)s left out (select.strict false) */
    size_t nskipped;
} fp4s_units;

/* Append the selected units of a capture: every rollout side of a step
 * (not the log-probs) that passes fp4s_unit_select_match, with the trainer
 * side of the same (step, site) and its weight. Errors: those of
 * fp4s_capture_list_raw; FP4S_ENOTFOUND for a missing partner the selection
 * requires ("FILE: site S step N has no weight (neither /steps/N/S/weight
 * nor /weights/S)"); FP4S_ESHAPE for a weight whose K differs; with
 * select.strict, a (step, site) whose sides cannot be paired (FP4S_ESHAPE,
 * FP4S_EFORMAT naming the file and dataset), which otherwise is recorded in
 * `skipped`. An empty selection is not an error (the caller's message says
 * what was asked). */
FP4S_API int fp4s_units_add_capture(fp4s_units *l, const char *file, const fp4s_unit_select *s);

/* Append one unit given as tensors: x, and xt and w or NULL. Each source is
 * opened for its shape (a failure is prefixed with "rollout activations",
 * "trainer activations" or "weight"); FP4S_ESHAPE when X_t's shape differs
 * from X's or W's K from X's. */
FP4S_API int fp4s_units_add_tensors(fp4s_units *l, const char *x, const char *xt, const char *w);

FP4S_API void fp4s_units_free(fp4s_units *l);

/* A unit's tensors, row-major float32, owned by the caller
 * (fp4s_unit_data_free). Row i < m of xt is the trainer's row for row i of x.
 * With token ids the rows the two sides do not share follow: x holds
 * m + rollout_only rows (the pairs, then the tokens only the rollout
 * routed here), xt m + trainer_only rows; every side's rows are there, so
 * a per-tensor scale taken over them is the engine's. */
typedef struct fp4s_unit_data {
    float *x, *xt, *w;    /* xt, w NULL when the unit has none */
    size_t m, k, n;       /* m: the paired rows */
    size_t rollout_only, trainer_only; /* rows after the pairs (0 without ids) */
    int64_t *ids;         /* ids: [m + rollout_only + trainer_only][2], the pairs', the
                             rollout-only then the trainer-only tokens' (NULL without ids) */
} fp4s_unit_data;

/* Read a unit and pair its trainer rows with its rollout rows: by token id
 * where both sides carry ids (the pairs in the rollout's row order), else row
 * for row. A failure is prefixed as in fp4s_units_add_tensors; FP4S_ESHAPE
 * when a tensor's shape is not the one listed. */
FP4S_API int fp4s_unit_read(const fp4s_unit *u, fp4s_unit_data *d);
FP4S_API void fp4s_unit_data_free(fp4s_unit_data *d);

#ifdef __cplusplus
}
#endif
#endif
