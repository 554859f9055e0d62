/* The model's types and functions over RL_REAL, named through RL_T() (no
 * include guard: included once per instantiation, by rl_internal.h for float
 * and by tests/rl for double). See rl_internal.h for the model. */

/* Activations of one batch, kept for the backward pass. Sizes for capM rows. */
typedef struct RL_T(rl_acts) {
    size_t capM;               /* rows allocated */
    bool has_bwd;              /* gradient buffers allocated */
    int32_t *pos;              /* [M] position of each row */
    RL_REAL *x;                /* [L+1][M][C] residual stream: x[0] embeddings, x[l+1] after layer l */
    RL_REAL *xmid;             /* [L][M][C] after the attention residual */
    RL_REAL *ln1, *rs1;        /* [L][M][C] normed, [L][M] 1/rms */
    RL_REAL *qkv;              /* [L][M][3C] */
    RL_REAL *att;              /* [L][M][H][T] attention probabilities (keys 0..pos) */
    RL_REAL *atty;             /* [L][M][C] */
    RL_REAL *ln2, *rs2;        /* [L][M][C], [L][M] */
    RL_REAL *rprob;            /* [L][M][E] router probabilities */
    int32_t *topi;             /* [L][M][K] chosen experts, best first */
    RL_REAL *gate;             /* [L][M][K] renormalised gates */
    int32_t *eoff;             /* [L][E+1] slot offsets per expert */
    int32_t *erow;             /* [L][M*K] row of each slot (expert order) */
    int32_t *eslot;            /* [L][M][K] slot of (m, j) */
    RL_REAL *xe;               /* [L][M*K][C] expert inputs (gathered ln2) */
    RL_REAL *h13;              /* [L][M*K][2F] gate and up projections */
    RL_REAL *hg;               /* [L][M*K][F] silu(gate) * up */
    RL_REAL *ey;               /* [L][M*K][C] expert outputs */
    RL_REAL *lnf, *rsf;        /* [M][C], [M] */
    RL_REAL *logits;           /* [M][V] */
    double *lse;               /* [M] log-sum-exp of the logits */
    double aux;                /* load-balancing term, summed over layers */
    double *f_e;               /* [L][E] routed fraction per expert (for the aux gradient) */
    /* backward buffers */
    RL_REAL *dx, *dxm, *dln, *dqkv, *datty, *dlogits, *dprob; /* [M][C], [M][C], [M][C], [M][3C], [M][C], [M][V], [M][E] */
    RL_REAL *dgate;            /* [M][K] */
    RL_REAL *dxe, *dh13, *dhg, *dey; /* [M*K][C], [M*K][2F], [M*K][F], [M*K][C] */
    RL_REAL *tmp;              /* [M][max(C, 3C)] */
} RL_T(rl_acts);

/* What one forward/backward works with. */
typedef struct RL_T(rl_ctx) {
    const rl_cfg *cfg;
    const rl_layout *lay;
    const RL_REAL *P;          /* master parameters */
    const rl_lin *lin;         /* float: the side's linear layers, NULL = fp32 on P; double: unused */
    rl_scratch *ws;            /* float: scratch of this worker */
} RL_T(rl_ctx);

int RL_T(rl_acts_alloc)(RL_T(rl_acts) *a, const rl_cfg *c, size_t M, bool backward);
void RL_T(rl_acts_free)(RL_T(rl_acts) *a);

/* Forward over a batch: logp[m] = log softmax(logits[m])[tgt[m]] for rows with
 * tgt >= 0 (0 elsewhere); ent[m] the entropy of row m's distribution and
 * amax[m] its argmax (either may be NULL). a->aux holds the load-balancing term. */
int RL_T(rl_forward)(const RL_T(rl_ctx) *x, const rl_batch *b, RL_T(rl_acts) *a, RL_REAL *logp,
                     RL_REAL *ent, int32_t *amax);

/* Backward of L = sum_m c[m] logp[m] + aux_scale * aux after rl_forward on the
 * same batch: adds dL/dP into G (same layout as P). */
int RL_T(rl_backward)(const RL_T(rl_ctx) *x, const rl_batch *b, RL_T(rl_acts) *a, const RL_REAL *c,
                      double aux_scale, RL_REAL *G);

/* Pieces shared with the rollout engine. */
void RL_T(rl_rmsnorm_fwd)(const RL_REAL *x, const RL_REAL *w, size_t M, size_t C, RL_REAL *out,
                          RL_REAL *rstd);
/* Router: softmax of logits [M][E] into prob, top-k (largest first, ties to the
 * lower index) into topi, renormalised gates into gate. */
void RL_T(rl_route)(const RL_REAL *logits, size_t M, int E, int K, RL_REAL *prob, int32_t *topi,
                    RL_REAL *gate);
/* out[i] = silu(h[i]) * h[F + i] per row of h [n][2F]. */
void RL_T(rl_swiglu_fwd)(const RL_REAL *h, size_t n, size_t F, RL_REAL *out);
/* One query row against keys/values 0..npos-1 (rows of stride ld): y = softmax(q k^T / sqrt(hd)) v
 * per head; p [H][T] receives the probabilities (may be NULL). */
void RL_T(rl_attend)(const RL_REAL *q, const RL_REAL *k, const RL_REAL *v, size_t ld, size_t npos,
                     int H, size_t hd, size_t T, RL_REAL *p, RL_REAL *y);
/* Slots of the chosen experts in expert order (rows ascending within an
 * expert): eoff [E+1], erow [M*K] row of each slot, eslot [M*K] slot of (m, j). */
void RL_T(rl_group_experts)(const int32_t *topi, size_t M, int E, int K, int32_t *eoff, int32_t *erow,
                            int32_t *eslot);
