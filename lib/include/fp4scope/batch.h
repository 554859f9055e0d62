/* Batch coupling (fp4-batch(1)): with one tensor scale over a batch, a
 * token's codes depend on which other tokens share the batch's amax. The
 * trainer packs sequences into micro-batches, the rollout engine batches
 * tokens by decode step, so the same token, with identical weights and
 * identical quantizers, is quantized differently on the two sides.
 *
 * fp4s_batch_eval re-quantizes every row of x [rows, cols] twice: once with
 * the rows grouped as composition A (the trainer's: group_a[i] is row i's
 * group) and once as composition B (the rollout's). Each group is quantized
 * as one tensor: its amax is the spec's tensor amax over the group's rows
 * (fp4s_spec_amax), its tensor scale fp4s_tscale_init of that amax; a
 * row-scaled spec (nv_scope row) gives every row its own scale whatever the
 * grouping, so it shows no coupling at all, and MXFP4 (no tensor scale)
 * neither. What differs between the two is only who shares the amax:
 *
 *   code_flips    elements whose E2M1 code differs (+0 and -0 are equal)
 *   scale_flips   blocks whose scale byte differs
 *   rows_changed  rows with a differing code or scale byte
 *   deq_diff2     ||QA(x) - QB(x)||^2 over finite values (x2: ||x||^2)
 *   with a weight W [n, cols]: out_diff2 = ||(QA(x) - QB(x)) W^T||^2 and
 *   out_ref2 = ||QA(x) W^T||^2 (W as given: a caller that wants the rollout's
 *   quantized weight passes its dequantized values);
 *   with lm_head (W the LM head [vocab, cols], logits = Q(x) W^T in double):
 *   per row the change of the log-prob of token[i] (or, without tokens, of
 *   the argmax of QA's logits) between A and B, its mean and largest
 *   absolute value, KL(softmax A || softmax B) and the rows whose argmax
 *   differs. Only rows that changed are multiplied (the others give 0).
 *
 * Group ids are any int64 values (rows of one id form a group, in row
 * order); fp4s_batch_groups makes the generated compositions from each row's
 * (sequence, position) ids. Results are exact counts and double sums; the
 * products go through the BLAS when the build has one (else plain loops). */
#ifndef FP4SCOPE_BATCH_H
#define FP4SCOPE_BATCH_H

#include <fp4scope/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How fp4s_batch_groups composes batches from (sequence, position) ids. */
typedef enum fp4s_batch_kind {
    FP4S_BATCH_PACKED = 0, /* the trainer's packed micro-batches: whole sequences, in sequence order,
                            * greedily into micro-batches of at most `size` tokens (a longer sequence
                            * is one micro-batch alone) */
    FP4S_BATCH_DECODE = 1, /* continuous batching: `size` sequences decode together; the tokens at one
                            * position of sequences [j size, (j+1) size) (in sequence order) form a group */
    FP4S_BATCH_TENSOR = 2, /* every row in one group (the whole capture as one batch) */
    FP4S_BATCH_ROW    = 3, /* every row alone (a token its own batch: decode with one sequence) */
    FP4S_BATCH_KIND_COUNT
} fp4s_batch_kind;

/* "packed", "decode", "tensor", "row"; FP4S_EINVAL listing them. */
FP4S_API int fp4s_batch_kind_parse(const char *s, fp4s_batch_kind *out);
FP4S_API const char *fp4s_batch_kind_name(fp4s_batch_kind k);

/* A composition as "KIND[:SIZE]" (packed:4096, decode:64, tensor, row). */
typedef struct fp4s_batch_plan {
    fp4s_batch_kind kind;
    uint64_t size;           /* packed: tokens per micro-batch; decode: sequences per batch */
    uint32_t reserved[4];    /* zero; room for fields added later */
} fp4s_batch_plan;
FP4S_API size_t fp4s_batch_plan_size(void);
/* Parse "KIND[:SIZE]" (SIZE required for packed and decode, 1 to 2^40);
 * FP4S_EINVAL with a detail. */
FP4S_API int fp4s_batch_plan_parse(const char *s, fp4s_batch_plan *out);
/* "packed:4096", "decode:64", "tensor", "row" into buf (n bytes). */
FP4S_API void fp4s_batch_plan_str(const fp4s_batch_plan *p, char *buf, size_t n);

/* Group id of each row (rows values) from its sequence and position ids.
 * seq may not be NULL; pos may be NULL for packed, tensor and row (decode
 * needs it). Deterministic: sequences are taken in increasing id order, a
 * sequence's tokens in row order. */
FP4S_API int fp4s_batch_groups(const fp4s_batch_plan *p, const int64_t *seq, const int64_t *pos, size_t rows,
                               int64_t *group);

typedef struct fp4s_batch_opts {
    const float *w;          /* [n, cols] row-major, or NULL: no output error */
    size_t n;                /* rows of w */
    bool lm_head;            /* w is the LM head: log-prob change per row */
    const int64_t *token;    /* lm_head: the sampled token of each row (NULL: argmax of QA's logits) */
    uint32_t reserved[8];    /* zero; room for fields added later */
} fp4s_batch_opts;
FP4S_API size_t fp4s_batch_opts_size(void);
FP4S_API void fp4s_batch_opts_defaults(fp4s_batch_opts *o);

typedef struct fp4s_batch_result {
    uint64_t rows, elements, blocks;
    uint64_t groups_a, groups_b;  /* groups in each composition */
    uint64_t code_flips;          /* elements whose code differs between A and B */
    uint64_t scale_flips;         /* blocks whose scale byte differs */
    uint64_t rows_changed;        /* rows with a differing code or scale byte */
    uint64_t tscale_rows;         /* rows whose tensor scale (S_dec) differs between A and B */
    double deq_diff2, x2;         /* ||QA(x) - QB(x)||^2, ||x||^2 (finite values) */
    double out_diff2, out_ref2;   /* with w: ||(QA - QB) W^T||^2, ||QA W^T||^2 (else 0) */
    uint64_t lp_rows;             /* lm_head: rows whose log-prob change was taken (all rows) */
    double lp_sum_abs, lp_max_abs;/* sum and largest |logp_A - logp_B| of the token */
    double kl_sum;                /* sum over rows of KL(p_A || p_B) */
    uint64_t argmax_flips;        /* rows whose argmax differs */
    uint32_t reserved[16];        /* zero; room for fields added later */
} fp4s_batch_result;
FP4S_API size_t fp4s_batch_result_size(void);

/* Add result b into a (the counts and sums; the largest |dlp|). */
FP4S_API void fp4s_batch_result_merge(fp4s_batch_result *a, const fp4s_batch_result *b);

/* Re-quantize x [rows, cols] (row stride ld, cols a multiple of the block)
 * under compositions group_a and group_b and add the differences into *r
 * (zero it first). o may be NULL. row_flips, when not NULL, receives each
 * row's number of differing codes (rows values). FP4 formats (FP8: ENOTSUP). */
FP4S_API int fp4s_batch_eval(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                             const int64_t *group_a, const int64_t *group_b, const fp4s_batch_opts *o,
                             fp4s_batch_result *r, uint64_t *row_flips);

#ifdef __cplusplus
}
#endif
#endif
