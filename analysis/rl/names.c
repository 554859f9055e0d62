/* Options, names and the per-step scalar table of the RL testbed: built in
 * every configuration (with or without BLAS), so that tools can parse and
 * describe a run everywhere. */
#include <fp4scope/remedy.h>
#include <fp4scope/rl.h>
#include <fp4scope/spec.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void fp4s_rl_opts_defaults(fp4s_rl_opts *o)
{
    *o = (fp4s_rl_opts){
        .seed = 1, .task = FP4S_RL_TASK_SORT,
        .width = 128, .layers = 2, .heads = 4, .experts = 4, .top_k = 2, .expert_hidden = 0, .aux_coef = 0,
        .trainer = FP4S_RL_TRAINER_BF16, .rollout = FP4S_RL_ROLLOUT_BF16,
        .quant_sites = FP4S_RL_SITE_ALL, .drift = FP4S_RL_DRIFT_SPLITK,
        .aqn_end = 0, .aqn_stages = 10, .steps = 200, .prompts = 64, .group = 8, .temperature = 1, .lr = 1e-4, .beta1 = 0.9, .beta2 = 0.99,
        .adam_eps = 1e-8, .weight_decay = 0.01, .grad_clip = 1, .clip_eps = 0.2, .minibatches = 2,
        .is_corr = FP4S_RL_IS_NONE, .is_cap = 2,
        .sft_lr = 1e-3, .sft_batch = 256, .sft_max_steps = 1000, .sft_target = 0.4, .sft_check_every = 10,
        .eval_every = 10, .eval_prompts = 256, .act_every = 50, .act_seqs = 16,
        .micro_batch = 64, .shard = 64,
        .outlier_gain = 20, .outlier_frac = 0.01, .gain_sigma = 0.5,
    };
    snprintf(o->act_sites, sizeof o->act_sites, "%s",
             "layers.0.self_attn.qkv_proj,layers.*.mlp.experts.0.*,lm_head");
}

/* ---- enum names ---------------------------------------------------------------------------- */
static const char *const task_names[] = {"sort", "add"};
static const char *const trainer_names[] = {"bf16", "wfq", "w4a4qat", "fp32"};
static const char *const rollout_names[] = {"bf16", "fp8", "mxfp4", "nvfp4", "fp32"};
static const char *const iscorr_names[] = {"none", "tis", "mis"};
static const char *const drift_names[] = {"none", "splitk", "splitk-bf16"};

static int parse_name(const char *s, const char *const *names, int n, const char *what, int *out)
{
    for (int i = 0; s && i < n; i++)
        if (!strcasecmp(s, names[i])) {
            *out = i;
            return 0;
        }
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return fp4s_error_set(FP4S_EINVAL, "unknown %s '%s' (expected %s)", what, s ? s : "", list);
}

#define NAME_FNS(T, fn, names, what)                                                      \
    const char *fp4s_rl_##fn##_name(T v)                                                  \
    {                                                                                      \
        return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";              \
    }                                                                                      \
    int fp4s_rl_##fn##_parse(const char *s, T *out)                                       \
    {                                                                                      \
        int i = 0, rc = parse_name(s, names, (int)(sizeof names / sizeof names[0]), what, &i); \
        if (!rc) *out = (T)i;                                                              \
        return rc;                                                                         \
    }
NAME_FNS(fp4s_rl_task, task, task_names, "task")
NAME_FNS(fp4s_rl_trainer, trainer, trainer_names, "trainer")
NAME_FNS(fp4s_rl_rollout, rollout, rollout_names, "rollout")
NAME_FNS(fp4s_rl_iscorr, iscorr, iscorr_names, "IS correction")
NAME_FNS(fp4s_rl_drift, drift, drift_names, "engine drift")

static const struct { const char *name; unsigned mask; } site_classes[] = {
    {"qkv", FP4S_RL_SITE_QKV}, {"o", FP4S_RL_SITE_O}, {"router", FP4S_RL_SITE_ROUTER},
    {"experts", FP4S_RL_SITE_EXPERTS}, {"head", FP4S_RL_SITE_HEAD},
};

int fp4s_rl_sites_parse(const char *s, unsigned *mask)
{
    unsigned m = 0;
    char buf[256];
    if (!s || strlen(s) >= sizeof buf) return fp4s_error_set(FP4S_EINVAL, "site classes: list too long");
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(t, "all")) { m |= FP4S_RL_SITE_ALL; continue; }
        if (!strcasecmp(t, "none")) continue;
        size_t i = 0, n = sizeof site_classes / sizeof site_classes[0];
        while (i < n && strcasecmp(t, site_classes[i].name)) i++;
        if (i == n)
            return fp4s_error_set(FP4S_EINVAL, "unknown site class '%s' (expected qkv, o, router, experts, "
                                  "head, all or none)", t);
        m |= site_classes[i].mask;
    }
    *mask = m;
    return 0;
}

size_t fp4s_rl_sites_name(unsigned mask, char *buf, size_t n)
{
    char t[64] = "";
    if ((mask & FP4S_RL_SITE_ALL) == FP4S_RL_SITE_ALL)
        snprintf(t, sizeof t, "all");
    else if (!(mask & FP4S_RL_SITE_ALL))
        snprintf(t, sizeof t, "none");
    else
        for (size_t i = 0; i < sizeof site_classes / sizeof site_classes[0]; i++)
            if (mask & site_classes[i].mask) {
                if (t[0]) strncat(t, ",", sizeof t - strlen(t) - 1);
                strncat(t, site_classes[i].name, sizeof t - strlen(t) - 1);
            }
    return (size_t)snprintf(buf, n, "%s", t);
}

/* ---- option checks -------------------------------------------------------------------------- */
#define RANGE_I(f, lo, hi)                                                                          \
    if (o->f < (lo) || o->f > (hi))                                                                 \
        return fp4s_error_set(FP4S_EINVAL, "rl: " #f " = %d: expected %d to %d", o->f, (int)(lo), (int)(hi));
#define RANGE_D(f, lo, hi)                                                                          \
    if (!(o->f >= (lo) && o->f <= (hi)))                                                            \
        return fp4s_error_set(FP4S_EINVAL, "rl: " #f " = %g: expected %g to %g", o->f, (double)(lo), (double)(hi));

int fp4s_rl_opts_check(const fp4s_rl_opts *o)
{
    if (!o) return fp4s_error_set(FP4S_EINVAL, "rl: no options");
    if ((unsigned)o->task > FP4S_RL_TASK_ADD) return fp4s_error_set(FP4S_EINVAL, "rl: bad task");
    RANGE_I(width, 16, 4096)
    RANGE_I(layers, 1, 16)
    RANGE_I(heads, 1, 64)
    RANGE_I(experts, 1, 64)
    RANGE_I(top_k, 1, 8)
    RANGE_I(expert_hidden, 0, 16384)
    if (o->width % o->heads)
        return fp4s_error_set(FP4S_EINVAL, "rl: width %d is not a multiple of heads %d", o->width, o->heads);
    if (o->top_k > o->experts)
        return fp4s_error_set(FP4S_EINVAL, "rl: top_k %d exceeds experts %d", o->top_k, o->experts);
    if (o->width % 32 || (o->expert_hidden && o->expert_hidden % 32))
        return fp4s_error_set(FP4S_EINVAL, "rl: width and expert_hidden must be multiples of 32 "
                              "(the MXFP4 block)");
    RANGE_D(aux_coef, 0, 10)
    RANGE_D(outlier_gain, 1, 1000)
    RANGE_D(outlier_frac, 0, 0.5)
    RANGE_D(gain_sigma, 0, 3)
    if ((unsigned)o->trainer > FP4S_RL_TRAINER_FP32) return fp4s_error_set(FP4S_EINVAL, "rl: bad trainer");
    if ((unsigned)o->rollout > FP4S_RL_ROLLOUT_FP32) return fp4s_error_set(FP4S_EINVAL, "rl: bad rollout");
    bool quant = o->rollout == FP4S_RL_ROLLOUT_FP8 || o->rollout == FP4S_RL_ROLLOUT_MXFP4 ||
                 o->rollout == FP4S_RL_ROLLOUT_NVFP4;
    if ((o->trainer == FP4S_RL_TRAINER_WFQ || o->trainer == FP4S_RL_TRAINER_W4A4QAT) && !quant)
        return fp4s_error_set(FP4S_EINVAL, "rl: trainer %s fake-quantizes with the rollout's quantizer: "
                              "needs a rollout of fp8, mxfp4 or nvfp4, not %s",
                              fp4s_rl_trainer_name(o->trainer), fp4s_rl_rollout_name(o->rollout));
    if ((o->profile[0] || o->weight_profile[0]) && !quant)
        return fp4s_error_set(FP4S_EINVAL, "rl: a profile needs a quantized rollout (fp8, mxfp4, nvfp4)");
    if (o->remedy[0] && !quant)
        return fp4s_error_set(FP4S_EINVAL, "rl: remedies apply to a quantized rollout (fp8, mxfp4, nvfp4)");
    if ((unsigned)o->drift > FP4S_RL_DRIFT_SPLITK_BF16) return fp4s_error_set(FP4S_EINVAL, "rl: bad drift");
    if (o->quant_sites & ~FP4S_RL_SITE_ALL) return fp4s_error_set(FP4S_EINVAL, "rl: bad site classes");
    RANGE_I(steps, 1, 10000000)
    RANGE_D(aqn_end, 0, 1)
    RANGE_I(aqn_stages, 2, 1000000)
    RANGE_I(prompts, 1, FP4S_RL_MAX_SAMPLES / 2)
    RANGE_I(group, 2, 1024)
    if ((long)o->prompts * o->group > FP4S_RL_MAX_SAMPLES)
        return fp4s_error_set(FP4S_EINVAL, "rl: %d prompts x %d samples = %ld: at most %d samples a step",
                              o->prompts, o->group, (long)o->prompts * o->group, FP4S_RL_MAX_SAMPLES);
    RANGE_D(temperature, 0.05, 20)
    RANGE_D(lr, 0, 1)
    RANGE_D(beta1, 0, 0.999999)
    RANGE_D(beta2, 0, 0.999999999)
    RANGE_D(adam_eps, 1e-30, 1)
    RANGE_D(weight_decay, 0, 10)
    RANGE_D(grad_clip, 0, 1e9)
    RANGE_D(clip_eps, 0, 10)
    RANGE_I(minibatches, 1, 1024)
    if (o->minibatches > o->prompts * o->group)
        return fp4s_error_set(FP4S_EINVAL, "rl: %d minibatches of %d samples", o->minibatches,
                              o->prompts * o->group);
    if ((unsigned)o->is_corr > FP4S_RL_IS_MIS) return fp4s_error_set(FP4S_EINVAL, "rl: bad IS correction");
    if (!(o->is_cap > 1) || !isfinite(o->is_cap))
        return fp4s_error_set(FP4S_EINVAL, "rl: is_cap = %g: expected a number above 1", o->is_cap);
    RANGE_D(sft_lr, 0, 1)
    RANGE_I(sft_batch, 1, FP4S_RL_MAX_SAMPLES)
    RANGE_I(sft_max_steps, 0, 10000000)
    RANGE_D(sft_target, 0, 1)
    RANGE_I(sft_check_every, 1, 10000000)
    RANGE_I(eval_every, 0, 10000000)
    RANGE_I(eval_prompts, 1, FP4S_RL_MAX_SAMPLES)
    RANGE_I(act_every, 0, 10000000)
    RANGE_I(act_seqs, 1, FP4S_RL_MAX_SAMPLES)
    RANGE_I(micro_batch, 1, 65536)
    RANGE_I(shard, 1, 4096)
    if (quant) {
        fp4s_format f = o->rollout == FP4S_RL_ROLLOUT_FP8 ? FP4S_FP8
                      : o->rollout == FP4S_RL_ROLLOUT_MXFP4 ? FP4S_MXFP4 : FP4S_NVFP4;
        fp4s_spec s;
        int rc;
        if (o->profile[0] && (rc = fp4s_spec_profile(&s, f, o->profile))) return rc;
        if (o->weight_profile[0] && (rc = fp4s_spec_profile(&s, f, o->weight_profile))) return rc;
    }
    if (o->remedy[0]) {
        fp4s_remedy r;
        int rc = fp4s_remedy_parse(o->remedy, &r);
        if (rc) return rc;
        if (r.kind != FP4S_RK_ROLLOUT)
            return fp4s_error_set(FP4S_EINVAL, "rl: remedy '%s' is not a rollout remedy (the trainer is "
                                  "--trainer; a site kept in BF16 is --quant-sites)", o->remedy);
    }
    return 0;
}

/* ---- the per-step scalars -------------------------------------------------------------------- */
static const struct {
    const char *name, *label;
    size_t off;
} stat_table[] = {
#define S(f, l) {#f, l, offsetof(fp4s_rl_stats, f)}
    S(reward, "mean reward"),
    S(acc_rollout, "held-out greedy accuracy, rollout numerics"),
    S(acc_trainer, "held-out greedy accuracy, trainer numerics"),
    S(entropy, "policy entropy at response tokens (nats)"),
    S(grad_norm, "gradient norm before clipping"),
    S(flip_frac, "fraction of tokens whose argmax differs between the sides"),
    S(mismatch, "mean |lp_t - lp_r| (nats)"),
    S(max_mismatch, "max |lp_t - lp_r| (nats)"),
    S(k3, "k3 = mean(exp(rho) - rho - 1)"),
    S(is_frac_high, "fraction of tokens with exp(rho) > C"),
    S(clip_frac, "fraction of token updates clipped by PPO"),
    S(resp_len, "mean response length (tokens)"),
    S(aux, "load-balancing term per layer"),
    S(aqn_sigma, "aqn noise of the rollout"),
    S(act_kurtosis, "kurtosis of the linear layers' inputs (trainer, eval steps)"),
    S(act_outlier_ratio, "largest over median channel RMS of those inputs"),
    S(err_top1, "share of their NVFP4 error energy in the top 1% of channels"),
    S(t_rollout, "rollout wall time (s)"),
    S(t_train, "trainer wall time (s)"),
    S(t_eval, "evaluation wall time (s)"),
    S(t_total, "step wall time (s)"),
    S(t_gemm, "thread-seconds in BLAS"),
    S(t_quant, "thread-seconds in quantizers"),
    S(t_gemm_rollout, "thread-seconds in BLAS during the rollout"),
    S(t_fwd, "thread-seconds in the trainer's forward passes"),
    S(t_bwd, "thread-seconds in the trainer's backward passes"),
#undef S
};

size_t fp4s_rl_stat_count(void) { return sizeof stat_table / sizeof stat_table[0]; }
const char *fp4s_rl_stat_name(size_t i) { return i < fp4s_rl_stat_count() ? stat_table[i].name : NULL; }
const char *fp4s_rl_stat_label(size_t i) { return i < fp4s_rl_stat_count() ? stat_table[i].label : NULL; }
double fp4s_rl_stat_value(const fp4s_rl_stats *s, size_t i)
{
    if (!s || i >= fp4s_rl_stat_count()) return NAN;
    double v;
    memcpy(&v, (const char *)s + stat_table[i].off, sizeof v);
    return v;
}
