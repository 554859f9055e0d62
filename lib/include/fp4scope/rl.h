/* Experimental API (not in <fp4scope/fp4scope.h>; may change between
 * releases: libfp4scope(3)).
 *
 * The RL testbed (fp4-rl(1)): a small decoder-only MoE policy trained with
 * GRPO in C, whose trainer and rollout engine differ only in the numerics
 * chosen, so that the rollout/trainer mismatch of an FP4 rollout can be
 * watched over training steps, and a remedy tested against it.
 *
 * Flow: fp4s_rl_open() builds the policy from a seed; fp4s_rl_warmstart()
 * trains it supervised until it sometimes succeeds; each fp4s_rl_step() syncs
 * the weights to the rollout engine, samples G responses per prompt with the
 * rollout's numerics, scores them, and makes the GRPO updates with the
 * trainer's numerics, writing the step to a capture (fp4scope-capture(5)):
 * per-token trainer and rollout log-probs, the activations of selected sites
 * on both sides every few steps, and the step's scalars.
 *
 * Determinism: a seed fixes everything. Work is split into fixed pieces
 * (rollout shards, trainer micro-batches) whose results are combined in a
 * fixed order, and each GEMM runs on its caller's thread in the fixed order
 * of fp4s_get_gemm()'s default path (<fp4scope/common.h>), so results are
 * bit-identical for any FP4S_THREADS and on any x86-64 CPU. With
 * FP4S_GEMM_BLAS the BLAS runs each call single-threaded
 * (openblas_set_num_threads(1), for the whole process): the same for any
 * thread count, but another CPU's BLAS kernels give other bits.
 *
 * Thread-safety: a handle belongs to one thread at a time; it uses
 * fp4s_get_threads() workers inside its calls.
 *
 * Built when the library is built with a BLAS (-Dblas; fp4s_features() lists
 * "blas"); without one fp4s_rl_open() returns FP4S_ENOTSUP, as it does on
 * the BLAS path when the BLAS cannot be loaded. */
#ifndef FP4SCOPE_RL_H
#define FP4SCOPE_RL_H

#include <fp4scope/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Classes of linear sites (bit masks). */
#define FP4S_RL_SITE_QKV     1u  /* layers.<l>.self_attn.qkv_proj */
#define FP4S_RL_SITE_O       2u  /* layers.<l>.self_attn.o_proj */
#define FP4S_RL_SITE_ROUTER  4u  /* layers.<l>.mlp.gate */
#define FP4S_RL_SITE_EXPERTS 8u  /* layers.<l>.mlp.experts.<e>.gate_up_proj and .down_proj */
#define FP4S_RL_SITE_HEAD   16u  /* lm_head */
#define FP4S_RL_SITE_ALL    31u

/* Ceiling of the samples of a step (prompts x group), of the supervised batch
 * and of the held-out prompts. */
#define FP4S_RL_MAX_SAMPLES 65536

typedef enum fp4s_rl_task {
    FP4S_RL_TASK_SORT = 0,   /* sort 6-10 digits */
    FP4S_RL_TASK_ADD  = 1    /* add two numbers of 1-5 digits */
} fp4s_rl_task;

typedef enum fp4s_rl_trainer {
    FP4S_RL_TRAINER_BF16 = 0,    /* bf16(X) bf16(W)^T, FP32 master weights */
    FP4S_RL_TRAINER_WFQ,         /* asymmetric QAT: bf16(X) Qw(W)^T, Qw the rollout's weight quantizer */
    FP4S_RL_TRAINER_W4A4QAT,     /* symmetric QAT: Qa(X) Qw(W)^T */
    FP4S_RL_TRAINER_FP32         /* exact float32 (a reference) */
} fp4s_rl_trainer;

typedef enum fp4s_rl_rollout {
    FP4S_RL_ROLLOUT_BF16 = 0,    /* bf16 operands with the engine's drift */
    FP4S_RL_ROLLOUT_FP8,         /* FP8 E4M3 W8A8 */
    FP4S_RL_ROLLOUT_MXFP4,       /* W4A4 MXFP4 */
    FP4S_RL_ROLLOUT_NVFP4,       /* W4A4 NVFP4 */
    FP4S_RL_ROLLOUT_FP32         /* exact float32, no drift (a reference) */
} fp4s_rl_rollout;

typedef enum fp4s_rl_drift {     /* how the rollout engine's arithmetic differs from the trainer's */
    FP4S_RL_DRIFT_NONE = 0,      /* the same order of additions */
    FP4S_RL_DRIFT_SPLITK,        /* every GEMM sums K in two halves added afterwards (a split-K kernel) */
    FP4S_RL_DRIFT_SPLITK_BF16    /* and rounds every GEMM output to BF16 (activations kept in BF16) */
} fp4s_rl_drift;

typedef enum fp4s_rl_iscorr {
    FP4S_RL_IS_NONE = 0,
    FP4S_RL_IS_TIS,          /* token-level truncated IS: loss times min(exp(old - rollout), C) */
    FP4S_RL_IS_MIS           /* token-level masked IS: tokens with exp(old - rollout) outside [1/C, C] dropped */
} fp4s_rl_iscorr;

typedef struct fp4s_rl_opts {
    uint64_t seed;           /* 1 */
    fp4s_rl_task task;       /* sort */
    /* the policy */
    int width;               /* 128: model width d */
    int layers;              /* 2 */
    int heads;               /* 4 */
    int experts;             /* 4 */
    int top_k;               /* 2 */
    int expert_hidden;       /* 0 = 2 * width */
    double aux_coef;         /* 0: coefficient of the load-balancing term */
    /* numerics */
    fp4s_rl_trainer trainer; /* bf16 */
    fp4s_rl_rollout rollout; /* bf16 */
    char profile[32];        /* rollout quantizer profile of the activations; "" = the format's default */
    char weight_profile[32]; /* of the weights; "" = the same profile's weight form (te -> te-2d) */
    char remedy[128];        /* one rollout remedy item of <fp4scope/remedy.h> ("rac:0.25", "mbs:32+of:0.5"),
                              * "" = none (naive W4A4) */
    double aqn_end;          /* aqn schedule: sigma of the last stage (0 = the item's sigma / 100) */
    int aqn_stages;          /* 10 stages over `steps`, the first without noise */
    unsigned quant_sites;    /* FP4S_RL_SITE_ALL: site classes that go through the quantizer */
    fp4s_rl_drift drift;     /* splitk */
    /* GRPO */
    int steps;               /* 200: steps planned (the aqn schedule spans them) */
    int prompts;             /* 64 prompts per step */
    int group;               /* 8 samples per prompt (G) */
    double temperature;      /* 1 */
    double lr;               /* 1e-4 */
    double beta1, beta2;     /* 0.9, 0.99 */
    double adam_eps;         /* 1e-8 */
    double weight_decay;     /* 0.01, decoupled (AdamW), not on the norm gains */
    double grad_clip;        /* 1: global L2 norm; 0 = none */
    double clip_eps;         /* 0.2: PPO ratio clip */
    int minibatches;         /* 2 updates per step (one epoch) */
    fp4s_rl_iscorr is_corr;  /* none */
    double is_cap;           /* 2: C of TIS and MIS */
    /* supervised warm start */
    double sft_lr;           /* 1e-3 (betas 0.9, 0.98) */
    int sft_batch;           /* 256 */
    int sft_max_steps;       /* 1000 */
    double sft_target;       /* 0.4: stop when the sampled success reaches it */
    int sft_check_every;     /* 10 steps */
    /* evaluation and capture */
    int eval_every;          /* 10: held-out greedy accuracy every N steps (0 = never) */
    int eval_prompts;        /* 256 */
    int act_every;           /* 50: activations every N steps (0 = never) */
    char act_sites[256];     /* comma-separated globs of the sites to capture */
    int act_seqs;            /* 16: sequences whose activations are captured */
    /* pieces of work (results do not depend on the thread count; they do on these) */
    int micro_batch;         /* 64 sequences per trainer piece */
    int shard;               /* 64 sequences per rollout engine batch */
    /* outlier structure (fp4-rl(1), OUTLIERS): the RMSNorm gains of every norm start
     * log-normal, exp(gain_sigma z), and a fixed set of round(outlier_frac * width)
     * channels (at least 1 when outlier_frac > 0), the same in every norm, starts
     * outlier_gain times larger: persistent outlier channels in the inputs of every
     * linear layer. outlier_gain 1, outlier_frac 0 and gain_sigma 0 is the control
     * (every gain 1). */
    double outlier_gain;     /* 20 */
    double outlier_frac;     /* 0.01 */
    double gain_sigma;       /* 0.5 */
    uint32_t reserved[2]; /* zero; room for fields added later */
} fp4s_rl_opts;
FP4S_API size_t fp4s_rl_opts_size(void);

FP4S_API void fp4s_rl_opts_defaults(fp4s_rl_opts *o);
/* Check every field; FP4S_EINVAL naming the option, FP4S_ENOTSUP for a
 * profile that does not define the rollout's format. */
FP4S_API int fp4s_rl_opts_check(const fp4s_rl_opts *o);

/* Per-step scalars. Time fields are seconds of wall time in each phase. */
typedef struct fp4s_rl_stats {
    int64_t step;
    double reward;           /* mean reward of the step's samples */
    double acc_rollout;      /* held-out greedy accuracy, rollout numerics (NaN when not evaluated) */
    double acc_trainer;      /* the same with the trainer's numerics */
    double entropy;          /* mean entropy (nats) of the trainer's distribution at response tokens */
    double grad_norm;        /* mean over the step's updates of the gradient norm before clipping */
    double flip_frac;        /* fraction of response tokens whose argmax differs between the sides */
    double mismatch;         /* mean |lp_t - lp_r| over response tokens */
    double max_mismatch;     /* max |lp_t - lp_r| */
    double k3;               /* mean(exp(rho) - rho - 1), rho = lp_t - lp_r */
    double is_frac_high;     /* fraction of tokens with exp(rho) > C */
    double clip_frac;        /* fraction of token updates whose PPO ratio was clipped */
    double resp_len;         /* mean response length (tokens, EOS included) */
    double aux;              /* load-balancing term (mean over layers) */
    double aqn_sigma;        /* the rollout's aqn noise at this step (0 without aqn) */
    double t_rollout, t_train, t_eval, t_total;
    double t_gemm, t_quant;  /* thread-seconds inside BLAS calls and quantizers (weights, activations, remedies) */
    double t_gemm_rollout;   /* the part of t_gemm spent in the rollout phase */
    double t_fwd, t_bwd;     /* thread-seconds in the trainer's forward and backward passes */
    uint64_t rollout_tokens; /* tokens the engine processed (prompts and responses) */
    uint64_t train_tokens;   /* tokens the trainer processed, counting each forward */
    /* the outlier structure of the trainer's activations at evaluation steps (NaN
     * otherwise): the inputs of qkv_proj and of the experts (the ln1 and ln2
     * outputs) of every layer, for the step's first micro-batch, each tensor's
     * value averaged over the 2 L tensors */
    double act_kurtosis;     /* kurtosis of the tensor's values, E[(x - m)^4] / var^2 (3 for a Gaussian) */
    double act_outlier_ratio;/* largest channel RMS over the median channel RMS */
    double err_top1;         /* share of the NVFP4 (default profile) quantization error energy
                              * sum (Q(x) - x)^2 in the top 1% of channels (at least 1) by that energy */
    uint32_t reserved[10]; /* zero; room for fields added later */
} fp4s_rl_stats;
FP4S_API size_t fp4s_rl_stats_size(void);

/* The scalars by name (columns of fp4-rl's tables): index i in [0, count). */
FP4S_API size_t fp4s_rl_stat_count(void);
FP4S_API const char *fp4s_rl_stat_name(size_t i);
FP4S_API const char *fp4s_rl_stat_label(size_t i);
FP4S_API double fp4s_rl_stat_value(const fp4s_rl_stats *s, size_t i);

typedef struct fp4s_rl_sft {
    int steps;               /* supervised steps run */
    double success;          /* sampled success (temperature 1) at the end */
    bool reached;            /* success >= sft_target */
    double seconds;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_rl_sft;
FP4S_API size_t fp4s_rl_sft_size(void);

typedef struct fp4s_rl fp4s_rl;

/* Build the policy (weights from the seed) and both sides' numerics. */
FP4S_API int fp4s_rl_open(const fp4s_rl_opts *o, fp4s_rl **out);
FP4S_API void fp4s_rl_close(fp4s_rl **r);
FP4S_API size_t fp4s_rl_param_count(const fp4s_rl *r);
/* The options the handle was opened with. */
FP4S_API const fp4s_rl_opts *fp4s_rl_options(const fp4s_rl *r);

/* Supervised warm start (BF16) until the sampled success reaches sft_target
 * or sft_max_steps; rep may be NULL. */
FP4S_API int fp4s_rl_warmstart(fp4s_rl *r, fp4s_rl_sft *rep);
/* Copy the policy weights of src (same model shape) into dst, so several runs
 * can start from one warm start; dst's optimizer state is reset. */
FP4S_API int fp4s_rl_copy_policy(fp4s_rl *dst, const fp4s_rl *src);

/* The policy's master weights (fp4s_rl_param_count() floats, owned by the
 * handle), and their replacement from such an array of n floats: the
 * optimizer restarts, as with fp4s_rl_copy_policy (for a warm start made in
 * another process). FP4S_EINVAL when n is not the handle's count. */
FP4S_API const float *fp4s_rl_policy(const fp4s_rl *r);
FP4S_API int fp4s_rl_set_policy(fp4s_rl *r, const float *P, size_t n);

/* ---- statistics over seeds ------------------------------------------------------------------
 * One quantity x (a run's final reward, say) measured on n seeds, and the same
 * quantity of a baseline arm on the same seeds (base, paired seed by seed, or
 * NULL). Mean and sample standard deviation (n - 1), and the two-sided
 * Student t-interval at `level` (0.95: mean +- t_{(1+level)/2, n-1} sd /
 * sqrt(n)); with a baseline, the same for the differences d = x - base, the
 * paired t-test of mean d = 0 (t = mean_d / (sd_d / sqrt(n)), two-sided p
 * from Student's t with n - 1 degrees of freedom; NaN when every d is equal)
 * and the exact two-sided sign test (binomial(wins + losses, 1/2), ties left
 * out). Quantiles and tails from GSL (gsl_cdf_tdist_*, gsl_cdf_binomial_*):
 * FP4S_ENOTSUP in a build without GSL. n >= 2, else FP4S_EINVAL. */
typedef struct fp4s_rl_seedstat {
    size_t n;
    double mean, sd, lo, hi;           /* x: mean, sd, t-interval */
    bool paired;                       /* base was given: the fields below are set */
    double d_mean, d_sd, d_lo, d_hi;   /* x - base */
    double t, p_t;                     /* paired t-test */
    int wins, losses, ties;            /* x > base, x < base, x == base */
    double p_sign;                     /* exact sign test */
    uint32_t reserved[8];              /* zero; room for fields added later */
} fp4s_rl_seedstat;
FP4S_API size_t fp4s_rl_seedstat_size(void);
FP4S_API int fp4s_rl_seedstat_compute(const double *x, const double *base, size_t n, double level,
                                      fp4s_rl_seedstat *out);

/* Write the run's configuration as root attributes (rl_*) of a capture. */
FP4S_API int fp4s_rl_capture_header(const fp4s_rl *r, fp4s_capture *cap);
/* One GRPO step (the step number counts from 0); writes it to cap when not
 * NULL (and flushes it), fills st when not NULL. */
FP4S_API int fp4s_rl_step(fp4s_rl *r, fp4s_capture *cap, fp4s_rl_stats *st);

/* Names of the enums, and their parsers (FP4S_EINVAL for an unknown name). */
FP4S_API const char *fp4s_rl_task_name(fp4s_rl_task t);
FP4S_API int fp4s_rl_task_parse(const char *s, fp4s_rl_task *out);
FP4S_API const char *fp4s_rl_trainer_name(fp4s_rl_trainer t);
FP4S_API int fp4s_rl_trainer_parse(const char *s, fp4s_rl_trainer *out);
FP4S_API const char *fp4s_rl_rollout_name(fp4s_rl_rollout r);
FP4S_API int fp4s_rl_rollout_parse(const char *s, fp4s_rl_rollout *out);
FP4S_API const char *fp4s_rl_drift_name(fp4s_rl_drift d);
FP4S_API int fp4s_rl_drift_parse(const char *s, fp4s_rl_drift *out);
FP4S_API const char *fp4s_rl_iscorr_name(fp4s_rl_iscorr c);
FP4S_API int fp4s_rl_iscorr_parse(const char *s, fp4s_rl_iscorr *out);
/* Site classes: a comma-separated list of qkv, o, router, experts, head, all
 * or none into a mask; and the mask's list (writes at most n bytes, returns
 * the length needed). */
FP4S_API int fp4s_rl_sites_parse(const char *s, unsigned *mask);
FP4S_API size_t fp4s_rl_sites_name(unsigned mask, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
