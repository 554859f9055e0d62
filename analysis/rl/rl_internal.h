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
enum { RL_T_GEMM = 0, RL_T_QUANT, RL_T_NT };
typedef struct rl_prof { double t[RL_T_NT]; uint64_t gemm_flop; } rl_prof;
double rl_now(void);

/* ---- numerics of one side: how a linear layer computes Y = f(X) W^T ----------------- */
typedef enum rl_op { RL_OP_FP32 = 0, RL_OP_BF16, RL_OP_QUANT } rl_op;

typedef struct rl_num {
    rl_op act, weight;       /* per quantized site; unquantized sites use bf16 (or fp32 if both fp32) */
    fp4s_spec spec_a, spec_w;/* when RL_OP_QUANT */
    unsigned quant_sites;    /* FP4S_RL_SITE_* classes that get spec_a/spec_w */
    bool drift;              /* engine: split-K accumulation in two halves, outputs rounded to BF16 */
    bool fp32;               /* the exact reference: every site fp32, no drift */
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

/* ---- GEMM (cblas, single-threaded calls; time and flops go to prof) ------------------ */
/* C[M,N] = A[M,K] B[N,K]^T + beta C */
void rl_sgemm_nt(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* C[M,N] = A[M,K] B[K,N] + beta C */
void rl_sgemm_nn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* C[M,N] = A[K,M]^T B[K,N] + beta C */
void rl_sgemm_tn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p);
/* Make the BLAS run each call on the calling thread (fp4scope parallelises
 * over fixed pieces of work itself, so results do not depend on the thread count). */
void rl_blas_single_thread(void);

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

#endif
