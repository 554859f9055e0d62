/* Internals shared by the files of analysis/remedy (not installed). */
#ifndef FP4S_REMEDY_INTERNAL_H
#define FP4S_REMEDY_INTERNAL_H

#include <fp4scope/quant.h>
#include <fp4scope/remedy.h>

#include <stddef.h>

#include "cuda/remedy_cu.h"

/* Streams of fp4s_remedy_uniform / _normal. */
#define RM_STREAM_AQN_CHANNEL 1u
#define RM_STREAM_AQN_ELEM    2u
#define RM_STREAM_RAC_RAND    256u /* + tile index */

/* ceil(r k) without being pushed up by the rounding of r k; at least 1 for r > 0. */
size_t rm_ceil_share(double r, size_t k);

/* Monotonic wall clock in seconds. */
double rm_now(void);

/* A NaN or Inf in x [rows, cols] (stride ld): FP4S_EFORMAT naming `what`
 * and the first such element. */
int rm_check_finite(const char *what, const float *x, size_t rows, size_t cols, size_t ld);

/* Quantize-dequantize x [rows, cols] (stride ld) with s into dq [rows, cols]
 * (stride cols). ts_in: the tensor scale to use, or NULL to take it from
 * amax(x). codes/scales (unpacked, [rows, cols] / [rows, cols/block]) and
 * ts_out may be NULL. */
int rm_qdq(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
           const fp4s_tscale *ts_in, float *dq, uint8_t *codes, uint8_t *scales, fp4s_tscale *ts_out);

/* What an operand pipeline did. */
typedef struct rm_opinfo {
    double kept;       /* entries kept in BF16 */
    size_t units;      /* mbs units */
    fp4s_tscale ts;    /* tensor scale of the first quantizer pass */
} rm_opinfo;

/* The operand pipeline of remedy.h (keep -> mbs -> quantizer -> of) on
 * x [rows, cols] (stride ld) with spec s, each step only when its flag is
 * set: out [rows, cols] (stride cols). */
int rm_operand(const fp4s_remedy *r, const fp4s_spec *s, bool mbs, bool keep, bool of,
               const float *x, size_t rows, size_t cols, size_t ld, float *out, rm_opinfo *info);

/* Where the GEMMs and rac's kernels run: NULL, or ops NULL, is the CPU
 * (core/gemm.h); else the ops of cuda/remedy_cu.h with their context. on_gemm,
 * when set, sees every GEMM's operands before it runs (tests derive their
 * rounding bounds from them): dbl says double operands. */
typedef struct rm_gpu {
    const fp4s_cu_rm_ops *ops;
    void *ctx;
    void (*on_gemm)(void *u, bool dbl, size_t m, size_t n, size_t k, const void *a, size_t lda, const void *b,
                    size_t ldb, double beta);
    void *u;
} rm_gpu;

/* g->ctx from g->ops->open (nothing for the CPU); close releases it. */
int rm_gpu_open(rm_gpu *g);
void rm_gpu_close(rm_gpu *g);

/* Y (+)= A [m, k] B [n, k]^T on the CPU (core/gemm.h), or on g (beta 0 or 1),
 * adding the wall time to *secs. FP4S_ERANGE when a size does not fit the
 * BLAS int (BLAS path), FP4S_ENOMEM. */
int rm_sgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
             size_t ldb, float beta, float *y, size_t ldy, double *secs);
/* The same in double (references). */
int rm_dgemm(const rm_gpu *g, size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b,
             size_t ldb, double beta, double *y, size_t ldy, double *secs);

/* Run L's GEMMs and rac on g (not owned; NULL: the CPU). */
void rm_rlinear_set_gpu(fp4s_rlinear *L, const rm_gpu *g);

/* fp4s_remedy_eval with its GEMMs and rac on g (NULL: the CPU), whatever
 * o->device says. */
int rm_eval_on(const rm_gpu *g, const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt,
               const float *X, const float *Xt, size_t m, const float *W, size_t n, size_t k,
               const fp4s_remedy_eval_opts *o, fp4s_remedy_site *site, fp4s_remedy_result *res);

/* What the evaluation wants from a forward pass besides Y. */
typedef struct rm_fwd_info {
    float *xhat;       /* in: NULL, or [m, k] to receive the effective activation X^: f(X) with
                        * rac's compensation added on its channels */
    size_t *rac_idx;   /* out: the channels chosen, tiles x |I| (malloc'ed), NULL without rac */
    double noise2;     /* out: aqn gain: ||X g - X||^2; weight targets: ||W' - W||^2 */
    double clean2;     /* out: ||X||^2 or ||W||^2 of the operand aqn perturbs (0 without aqn) */
} rm_fwd_info;

/* The forward pass of fp4s_rlinear_forward with the extras above (info may be NULL). */
int rm_forward_ex(const fp4s_rlinear *L, const float *X, size_t m, size_t ldx, float *Y, size_t ldy,
                  fp4s_remedy_cost *cost, rm_fwd_info *info);

/* Y = A [m, k] B [k, n] (both not transposed) in double. */
int rm_dgemm_nn(size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b, size_t ldb,
                double *y, size_t ldy, double *secs);

/* The transform of an item that rotates its operands (rht), or NULL. */
const fp4s_spec *rm_rlinear_rht(const fp4s_rlinear *L);

/* Bits per element of a base quantizer (codes and block scales). */
double rm_base_bits(const fp4s_spec *s);

/* Which operands the quantizer-side components apply to. */
static inline bool rm_on_act(const fp4s_remedy *r) { return r->operands != FP4S_OPERANDS_WEIGHT; }
static inline bool rm_on_weight(const fp4s_remedy *r) { return r->operands != FP4S_OPERANDS_ACT; }

/* ---- the items and components as rows (component.c) -------------------------------- */
typedef enum rm_group { RM_GROUP_TRAINER, RM_GROUP_ROLLOUT, RM_GROUP_ENGINE } rm_group;

/* An item alone (none, the trainers, bf16-rollout): its name and kind. */
typedef struct rm_kind_row {
    const char *name;
    fp4s_remedy_kind kind;
    rm_group group;
    const char *help;        /* --list-remedies */
} rm_kind_row;

/* What a component's check sees. */
typedef struct rm_check_in {
    const fp4s_remedy *r;
    const char *lab;          /* the item's label, for messages */
    const fp4s_spec *act, *wt;
    size_t k;
    bool on_act, on_w;        /* the operands it modifies (fp4s_remedy.operands) */
} rm_check_in;

/* What a component's cost sees: the GEMM's shape, the base bits per
 * element, the operand copies of (tx, tw: 2 when of applies to it, else 1),
 * rac's selection and keep's kept entries. */
typedef struct rm_cost_in {
    const fp4s_spec *as, *ws;
    double M, N, K, ab, wb, tx, tw;
    size_t sel, pad, tiles;
    double kept_a, kept_w;
} rm_cost_in;

/* A component: one row says all the library decides about it. */
typedef struct rm_comp {
    const char *name;         /* as written in an item */
    const char *usage;        /* with its parameters: messages and --list-remedies */
    const char *help;         /* --list-remedies (continuation lines indented) */
    rm_group group;
    unsigned excl;            /* rows sharing a bit exclude each other within an item */
    int canon;                /* position in the canonical text and in the cost's sums */
    int stage;                /* position in the order of application (fp4-remedy(1)) */
    /* the parameters f[1..nf) after the name f[0], into r */
    int (*parse)(const char *item, char **f, size_t nf, fp4s_remedy *r);
    void (*defaults)(fp4s_remedy *r);                       /* its parameters' defaults (NULL: all 0) */
    bool (*present)(const fp4s_remedy *r);                  /* r has it (is-plain asks every row) */
    int (*describe)(const fp4s_remedy *r, char *b, size_t n); /* canonical text (snprintf's return) */
    int (*check)(const rm_check_in *in);                    /* against the quantizers and K (NULL: none) */
    void (*spec)(const fp4s_remedy *r, fp4s_spec *s, int operand); /* its options on an operand's quantizer
                                                                    * (0 activation, 1 weight; NULL: none) */
    void (*cost)(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c); /* added (NULL: none) */
} rm_comp;

const rm_kind_row *rm_kinds(size_t *n);
const rm_comp *rm_comps(size_t *n);
/* "remedy 'ITEM': " and fmt with a, as fp4s_error_set(code). */
int rm_bad(const char *item, const char *fmt, const char *a, int code);
bool rm_has_component(const fp4s_remedy *r);
/* The list of names for messages ("none, bf16, ..., sr[:SEED]"): snprintf's return. */
size_t rm_known(char *buf, size_t n);
/* The canonical text of a rollout item ("none" without components). */
size_t rm_describe_components(const fp4s_remedy *r, char *buf, size_t n);
int rm_check_components(const rm_check_in *in);
/* The quantizer options of r's components on one operand's spec. */
void rm_apply_specs(const fp4s_remedy *r, fp4s_spec *s, int operand);
/* Every component's cost, added to c in canonical order. */
void rm_cost_components(const fp4s_remedy *r, const rm_cost_in *in, fp4s_remedy_cost *c);

#endif
