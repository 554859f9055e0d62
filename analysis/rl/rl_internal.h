/* The RL testbed's internals (analysis/rl): shared by its files and by
 * tests/rl, never installed. The public surface is <fp4scope/rl.h>.
 *
 * Shape (llm.c's): one flat array of parameters addressed through a layout of
 * offsets, one struct of activations per worker, forward and backward written
 * by hand. The model code (model.c) is written once against `real` and the
 * RL_T() name macro: the library builds it in float; tests/rl builds it a
 * second time in double to check every backward against finite differences.
 *
 * Model: a decoder-only MoE transformer. x0 = wte[tok] + wpe[pos]; per layer
 * (pre-norm) h = rmsnorm(x) * ln1; qkv = h Wqkv^T; causal multi-head attention;
 * x += att Wo^T; h2 = rmsnorm(x) * ln2; router logits h2 Wr^T, softmax, top-k,
 * gates renormalised over the k chosen; each chosen expert e computes
 * [a b] = h2 W13_e^T, y = (silu(a) * b) W2_e^T; x += sum_j gate_j y_j. Final
 * rmsnorm * lnf, logits = h Whead^T. The load-balancing term (Switch
 * Transformer's) is aux = E * sum_e f_e P_e, f_e the fraction of the M*k slots
 * routed to e (no gradient), P_e the mean router probability of e.
 *
 * Sequences are packed: a batch is nseq sequences of lengths len_s in rows
 * [off_s, off_s + len_s); row m has position m - off_s. */
#ifndef FP4S_RL_INTERNAL_H
#define FP4S_RL_INTERNAL_H

#include <fp4scope/rl.h>
#include <fp4scope/quant.h>
#include <fp4scope/remedy.h>
#include <fp4scope/spec.h>

#include <stddef.h>
#include <stdint.h>

#define RL_MAX_LAYERS 16
#define RL_MAX_EXPERTS 64
#define RL_MAX_TOPK 8
#define RL_MAX_T 64          /* longest sequence (prompt + response) */
#define RL_MAX_WIDTH 4096
#define RL_RMS_EPS 1e-5

/* ---- configuration and parameter layout (not templated) ------------------------ */
typedef struct rl_cfg {
    int V, T, C, L, H, E, K, F; /* vocabulary, max sequence, width, layers, heads, experts, top-k, expert hidden */
} rl_cfg;

enum rl_site_kind { RL_S_QKV = 0, RL_S_O, RL_S_ROUTER, RL_S_W13, RL_S_W2, RL_S_HEAD };

/* One linear layer Y = X W^T with W [N, K] at params + off. */
typedef struct rl_site {
    int kind, layer, expert;
    size_t N, K, off;
    unsigned cls;        /* FP4S_RL_SITE_* bit of its class */
    char name[64];       /* capture site name, e.g. layers.0.mlp.experts.3.gate_up_proj */
} rl_site;

typedef struct rl_layout {
    size_t wte, wpe, lnf, head;
    struct { size_t ln1, qkv, o, ln2, router, w13, w2; } l[RL_MAX_LAYERS];
    size_t total;        /* parameters */
    int nsites;
    rl_site *sites;      /* [nsites], owned */
} rl_layout;

int rl_layout_init(rl_layout *lay, const rl_cfg *c);
void rl_layout_free(rl_layout *lay);
static inline int rl_site_qkv(const rl_cfg *c, int l) { return l * (3 + 2 * c->E); }
static inline int rl_site_o(const rl_cfg *c, int l) { return l * (3 + 2 * c->E) + 1; }
static inline int rl_site_router(const rl_cfg *c, int l) { return l * (3 + 2 * c->E) + 2; }
static inline int rl_site_w13(const rl_cfg *c, int l, int e) { return l * (3 + 2 * c->E) + 3 + e; }
static inline int rl_site_w2(const rl_cfg *c, int l, int e) { return l * (3 + 2 * c->E) + 3 + c->E + e; }
static inline int rl_site_head(const rl_cfg *c) { return c->L * (3 + 2 * c->E); }

/* Is parameter index i (in a layout) a norm gain (no weight decay)? */
int rl_param_is_gain(const rl_layout *lay, const rl_cfg *c, size_t i);

/* ---- counter-based random numbers (thread-count independent) --------------------- */
uint64_t rl_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
static inline double rl_u01(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1.0p-53; }
double rl_gauss(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* ---- time accounting (per worker, summed by the caller) ------------------------------ */
enum { RL_T_GEMM = 0, RL_T_QUANT, RL_T_FWD, RL_T_BWD, RL_T_NT }; /* BLAS, quantizers, trainer forward, backward */
typedef struct rl_prof { double t[RL_T_NT]; uint64_t gemm_flop; } rl_prof;
double rl_now(void);

/* ---- numerics of one side: how a linear layer computes Y = f(X) W^T ----------------- */
typedef enum rl_op { RL_OP_FP32 = 0, RL_OP_BF16, RL_OP_QUANT } rl_op;

typedef struct rl_num {
    rl_op act, weight;       /* per quantized site; unquantized sites use bf16 (or fp32 if both fp32) */
    fp4s_spec spec_a, spec_w;/* when RL_OP_QUANT */
    unsigned quant_sites;    /* FP4S_RL_SITE_* classes that get spec_a/spec_w */
    int drift;               /* engine: fp4s_rl_drift (split-K accumulation, BF16 outputs) */
    bool fp32;               /* the exact reference: every site fp32, no drift */
    bool has_remedy;         /* quantized sites go through fp4s_rlinear with `remedy` */
    bool remedy_weight_only; /* trainer: take only the remedy's weight operand (Qw(W) with its
                              * weight-side steps), compute with act/weight as above */
    fp4s_remedy remedy;      /* the item; rl_lin_sync uses L->cur (the schedule's version of it) */
} rl_num;

/* Scratch of one worker for the linear layers (grown on demand). */
typedef struct rl_scratch {
    float *a; size_t cap_a;  /* transformed activations */
    float *b; size_t cap_b;  /* padding buffer */
    rl_prof prof;
} rl_scratch;
void rl_scratch_free(rl_scratch *s);

/* The linear layers of one side: numerics and the effective weights of every
 * site (bf16-rounded or quantized-dequantized copies of the master weights),
 * refreshed by rl_lin_sync after each change of the weights. */
typedef struct rl_lin {
    const rl_cfg *cfg;
    const rl_layout *lay;
    rl_num num;
    float *weff;             /* [lay->total] effective weights at each site's offset (only site ranges used) */
    const float *P;          /* the master weights the last sync read */
    fp4s_rlinear **rh;       /* [nsites] remedy handles of the quantized sites (rollout with a remedy) */
    fp4s_remedy cur;         /* the remedy the next sync opens (num.remedy with the schedule applied) */
} rl_lin;

int rl_lin_init(rl_lin *L, const rl_cfg *c, const rl_layout *lay, const rl_num *num);
void rl_lin_free(rl_lin *L);
/* Recompute the effective weights from the master weights P (kept by pointer). */
int rl_lin_sync(rl_lin *L, const float *P, rl_prof *prof);
/* True when the site's inputs and weights go through the quantizer. */
bool rl_lin_site_quant(const rl_lin *L, int site);
/* Y[M, N] = f(X[M, K]) Weff^T (row strides ldx, ldy). */
int rl_lin_fwd(const rl_lin *L, int site, const float *X, size_t ldx, size_t M, float *Y, size_t ldy,
               rl_scratch *ws);
/* Backward of the trainer's linear (straight-through: gradients flow through
 * the quantizers unchanged): dX[M, K] (=, or += when accumulate) dY Weff;
 * dW[N, K] += f(X)^T dY... written as dW += dY^T f(X). dX or dW may be NULL. */
int rl_lin_bwd(const rl_lin *L, int site, const float *X, size_t ldx, size_t M, const float *dY,
               size_t ldy, float *dX, size_t lddx, bool accumulate, float *dW, rl_scratch *ws);
/* Quantize-dequantize rows of x [M, K] (stride ld) with spec into out (stride ldo):
 * columns are zero-padded to the block multiple, the tensor scale is the amax of
 * these rows. */
int rl_fakequant(const fp4s_spec *s, const float *x, size_t M, size_t K, size_t ld, float *out,
                 size_t ldo, rl_scratch *ws);
/* dst[i] = src[i] rounded to BF16 (round to nearest even) and widened back;
 * dst may be src. */
void rl_bf16_round(const float *src, float *dst, size_t n);

/* ---- GEMM (core/gemm.h on the calling thread; time and flops go to prof; 0 or
 * FP4S_ENOMEM) ------------------------------------------------------------------------ */
/* C[M,N] = A[M,K] B[N,K]^T + beta C */
int rl_sgemm_nt(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* C[M,N] = A[M,K] B[K,N] + beta C */
int rl_sgemm_nn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* C[M,N] = A[K,M]^T B[K,N] + beta C */
int rl_sgemm_tn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* Where the process's GEMM path is the BLAS (fp4s_get_gemm), check that it
 * loads: 0, or FP4S_ENOTSUP with the reason set. */
int rl_blas_open(void);

/* ---- tasks ---------------------------------------------------------------------------- */
enum { RL_TOK_BOS = 10, RL_TOK_SEP = 11, RL_TOK_EOS = 12, RL_TOK_PAD = 13, RL_TOK_PLUS = 14, RL_VOCAB = 16 };

typedef struct rl_task {
    fp4s_rl_task kind;
    int prompt_len;          /* Tp: every prompt has this many tokens */
    int max_resp;            /* R: longest response, EOS included */
} rl_task;

void rl_task_init(rl_task *t, fp4s_rl_task kind);
/* Prompt number `index` of a stream: tokens [Tp] drawn from rl_hash(seed, stream, index, .). */
void rl_task_prompt(const rl_task *t, uint64_t seed, uint64_t stream, uint64_t index, int32_t *prompt);
/* The correct response of a prompt (EOS included) into ans [R]; returns its length. */
int rl_task_answer(const rl_task *t, const int32_t *prompt, int32_t *ans);
/* 1 when resp [len] is exactly the correct response, else 0. */
double rl_task_reward(const rl_task *t, const int32_t *prompt, const int32_t *resp, int len);

/* ---- the templated model (float here; double in tests/rl) ----------------------------- */
typedef struct rl_batch {
    size_t nseq, M;          /* sequences, rows (tokens) */
    const size_t *off;       /* [nseq + 1] */
    const int32_t *tok;      /* [M] input tokens */
    const int32_t *tgt;      /* [M] token to score at this row (the next one), or -1 */
} rl_batch;

#define RL_REAL float
#define RL_T(n) n
#include "model_tmpl.h"
#undef RL_REAL
#undef RL_T

/* ---- what a worker keeps between calls ------------------------------------------------------ */
typedef struct rl_engine_ws rl_engine_ws;   /* engine.c */
typedef struct rl_worker {
    rl_scratch ws;
    rl_acts acts;
    rl_engine_ws *eng;
} rl_worker;
void rl_worker_free(rl_worker *w);

/* ---- activations recorded for the capture ----------------------------------------------------- */
/* Inputs of every linear site but lm_head for sequences 0..nseq-1, row
 * s*T + pos (the token at position pos of the sequence as fed: prompt, then
 * response without its last token). One record per side. (lm_head's input
 * is kept for every sequence, row for row with the log-probs.) */
typedef struct rl_caprec {
    size_t nseq, T;
    int L, K;
    size_t C, F;
    float *ln1, *atty, *ln2;   /* [L][nseq*T][C]: inputs of qkv_proj, o_proj, mlp.gate and gate_up_proj */
    int32_t *topi;             /* [L][nseq*T][K]: experts chosen */
    float *hg;                 /* [L][nseq*T][K][F]: down_proj input of each chosen expert */
    int32_t *len;              /* [nseq] tokens recorded per sequence */
} rl_caprec;
int rl_caprec_alloc(rl_caprec *r, const rl_cfg *c, size_t nseq);
void rl_caprec_free(rl_caprec *r);

/* ---- the rollout engine (engine.c) -------------------------------------------------------------- */
typedef struct rl_gen_req {
    const rl_cfg *cfg;
    const rl_layout *lay;
    const rl_lin *lin;         /* the engine's numerics, synced */
    const float *P;            /* weights (norm gains and embeddings are read here) */
    const rl_task *task;
    size_t nseq;
    const int32_t *prompts;    /* prompt of sequence b: prompts + (b / group) * Tp */
    int group;
    bool greedy;               /* argmax instead of sampling */
    double temperature;
    uint64_t seed, stream;     /* sampling draws rl_hash(seed, stream, b, pos) */
    size_t shard;              /* sequences per engine batch */
    rl_caprec *rec;            /* record the inputs of sequences < rec->nseq, or NULL */
    float *hf;                 /* or NULL: [nseq][R][C] lm_head input of every response token */
} rl_gen_req;

typedef struct rl_gen_out {    /* caller-allocated, [nseq][R] and [nseq] */
    int32_t *resp, *len;
    float *logp;               /* log-prob of each sampled token under the engine */
    int32_t *amax;             /* the engine's argmax at each response position */
} rl_gen_out;

int rl_generate(const rl_gen_req *q, rl_gen_out *o, rl_worker *workers, int nworkers);


/* ---- GRPO and AdamW (rl.c) -------------------------------------------------------------------------- */
/* One response token's loss, PPO-clipped with advantage A, ratio exp(logp - old),
 * times the TIS weight or 0 when MIS rejects it (from old - ro), times norm. */
double rl_grpo_loss(const fp4s_rl_opts *o, double logp, double old, double ro, double A, double norm);
/* Its derivative with respect to logp; *clipped when the clipped branch is active. */
double rl_grpo_dlogp(const fp4s_rl_opts *o, double logp, double old, double ro, double A, double norm,
                     bool *clipped);
/* One AdamW step (PyTorch's order: decay, then the bias-corrected update) on n
 * parameters with gradient G * gscale; norm gains are not decayed. */
void rl_adamw(float *P, float *m, float *v, const float *G, float gscale, size_t n, int64_t t, double lr,
              double b1, double b2, double eps, double wdecay, const rl_layout *lay, const rl_cfg *cfg);
#endif
