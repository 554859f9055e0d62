/* Experimental API (not in <fp4scope/fp4scope.h>; may change between
 * releases: libfp4scope(3)).
 *
 * What to do about a site: its share of the output mismatch against the
 * trainer the user has, which error dominates it, and the cheapest fix that
 * brings it under a target, with its time against W4A4, FP8 and BF16
 * (fp4-report(1), fp4-remedy(1)).
 *
 * Every function takes plain numbers (what fp4s_remedy_eval and
 * fp4s_remedy_time_predict give for each site, pooled over steps by the
 * caller), so that any walker over a capture's sites can use them. */
#ifndef FP4SCOPE_ADVISE_H
#define FP4SCOPE_ADVISE_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The trainer the rollout's output is compared with:
 *   bf16  X_t W^T           a trainer in BF16 (what most RL runs have)
 *   wfq   X_t Qw(W)^T       asymmetric QAT: the trainer quantizes the weight as the rollout does
 *   w4a4  Qa(X_t) Qw(W)^T   symmetric QAT (fp4-remedy's w4a4qat) */
typedef enum fp4s_trainer { FP4S_TRAINER_BF16 = 0, FP4S_TRAINER_WFQ = 1, FP4S_TRAINER_W4A4 = 2 } fp4s_trainer;
/* "bf16", "wfq", "w4a4" (also "w4a4qat"); FP4S_EINVAL naming them otherwise. */
FP4S_API int fp4s_trainer_parse(const char *s, fp4s_trainer *t);
FP4S_API const char *fp4s_trainer_name(fp4s_trainer t);

/* Sites by their share of the output mismatch: err2[i] is site i's
 * ||Y_rollout - Y_trainer||^2 (naive W4A4, summed over its steps);
 * order[0..n) receives the sites largest first (ties: lower index first),
 * share[i] (may be NULL) err2[i] / sum (NaN when the sum is not > 0; a
 * NaN err2 counts as 0 and comes last). FP4S_EINVAL for NULL inputs. */
FP4S_API int fp4s_rank_by_share(const double *err2, size_t n, size_t *order, double *share);

/* Which error dominates a site against trainer t, from the relative output
 * errors of each cause alone: act_only ||Qa(X) W^T - X W^T|| / ||X W^T||,
 * weight_only ||X Qw(W)^T - X W^T|| / ||X W^T||, and input ||X - X_t|| /
 * ||X_t|| (the engines' activations differ before quantizing; NaN when
 * unknown). Against wfq the weight error is the trainer's too, so it is not
 * a cause; against w4a4 the activation quantizer is on both sides, so what
 * is left is the input difference it amplifies (FP4S_SRC_INPUT). */
typedef enum fp4s_error_source {
    FP4S_SRC_WEIGHT = 0,
    FP4S_SRC_ACTIVATION = 1,
    FP4S_SRC_INPUT = 2
} fp4s_error_source;
FP4S_API fp4s_error_source fp4s_error_dominant(fp4s_trainer t, double act_only, double weight_only, double input);
FP4S_API const char *fp4s_error_source_name(fp4s_error_source s); /* "weight", "activation", "input" */
/* What it implies, one sentence (weight: align the trainer or keep the layer
 * in higher precision, activation remedies will not help; ...). */
FP4S_API const char *fp4s_error_source_advice(fp4s_error_source s);

/* One candidate fix of a site: its relative output error against the
 * trainer after it, and its predicted GEMM time over W4A4's, FP8's and
 * BF16's on the accelerator (fp4s_remedy_time). */
typedef struct fp4s_advice_cand {
    const char *label;     /* the remedy ("rac:0.05") */
    double err;            /* relative output error after it */
    double vs_w4a4, vs_fp8, vs_bf16;
    bool plain;            /* naive W4A4 (the remedy "none") */
    uint32_t reserved[8];  /* zero; room for fields added later */
} fp4s_advice_cand;

typedef enum fp4s_advice_kind {
    FP4S_ADVICE_KEEP = 0,   /* naive W4A4 is under the target already */
    FP4S_ADVICE_REMEDY = 1, /* the cheapest candidate under the target that is faster than FP8 */
    FP4S_ADVICE_FP8 = 2,    /* no FP4 fix under the target is faster than FP8: run the layer in FP8 */
    FP4S_ADVICE_BF16 = 3    /* FP8 is not under the target either: run the layer in BF16 */
} fp4s_advice_kind;
FP4S_API const char *fp4s_advice_kind_name(fp4s_advice_kind k); /* "keep", "remedy", "fp8", "bf16" */

typedef struct fp4s_advice {
    fp4s_advice_kind kind;
    size_t cand;           /* KEEP, REMEDY: the candidate; else the lowest-error candidate faster than FP8
                            * (SIZE_MAX when there is none) */
    double err;            /* the error after the advice (FP8: fp8_err; BF16: 0 against a BF16 trainer) */
    double vs_w4a4, vs_fp8, vs_bf16; /* its time (FP8: 1 over FP8's) */
    size_t slower_than_fp8; /* candidates under the target that were left out for being slower than FP8 */
    uint32_t reserved[8];   /* zero; room for fields added later */
} fp4s_advice;

/* The advice for a site: the candidate of least predicted time among those
 * whose err is at most target and that are faster than FP8 (vs_fp8 < 1;
 * ties: lower error, then the lower index); naive W4A4 when it is under the
 * target; else FP8 when fp8_err (the site's error with the layer in FP8,
 * against the same kind of trainer; NaN: unknown, taken as under) is at most
 * target; else BF16. A fix slower than FP8 is never advised: FP8 is, and
 * slower_than_fp8 counts what was set aside. FP4S_EINVAL for a NaN target or
 * NULL inputs. */
FP4S_API int fp4s_advise(const fp4s_advice_cand *c, size_t n, double target, double fp8_err, fp4s_advice *out);

#ifdef __cplusplus
}
#endif
#endif
