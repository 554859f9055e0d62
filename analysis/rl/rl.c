/* The RL loop: supervised warm start, then GRPO steps whose rollout and
 * trainer differ only in numerics (fp4-rl(1) describes what is computed).
 *
 * One step:
 *   1. the rollout engine's weights are synced from the trainer's master
 *      weights (quantized with the rollout's weight quantizer);
 *   2. held-out greedy accuracy with both sides' numerics (every eval_every);
 *   3. prompts x group responses sampled by the engine (its log-probs kept);
 *   4. rewards, group-normalised advantages (r - mean) / (std + 1e-6), std
 *      with the n - 1 denominator (torch.std, as verl's GRPO);
 *   5. the trainer recomputes the old log-probs of every response token with
 *      its numerics (the trainer log-probs of the capture);
 *   6. one epoch of `minibatches` updates: PPO-clipped token loss, token mean
 *      over the minibatch, times the TIS weight or with MIS rejection;
 *      gradient clipping, AdamW; the trainer's weight cache is refreshed.
 * Micro-batches and rollout shards are fixed pieces of work; gradients of the
 * pieces are summed in piece order. */
#include "rl_internal.h"
#include "fp4s_config.h"

#include <fp4scope/capture.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Micro-batches whose gradients are held at once: pieces run RL_ROUND at a
 * time and are added to the update's gradient in piece order, whatever the
 * thread count (memory: RL_ROUND + 1 copies of the parameters). */
#define RL_ROUND 8

enum { STREAM_INIT = 1, STREAM_PROMPT, STREAM_SAMPLE, STREAM_EVAL, STREAM_SFT, STREAM_SFT_CHECK,
       STREAM_SFT_SAMPLE };

/* What one worker keeps for the trainer's micro-batches. */
typedef struct rl_mbuf {
    size_t cap_rows, cap_seq;
    size_t *off;
    int32_t *tok, *tgt, *amax;
    float *logp, *ent, *c;
} rl_mbuf;

struct fp4s_rl {
    fp4s_rl_opts o;
    rl_cfg cfg;
    rl_layout lay;
    rl_task task;
    float *P, *m, *v;            /* master weights, AdamW moments */
    int64_t adam_t;
    rl_lin lin_tr, lin_ro, lin_sft;
    int nworkers;
    rl_worker *workers;
    rl_mbuf *mbuf;               /* [nworkers] */
    float *gbuf;                 /* [RL_ROUND][P] gradients of the micro-batches of a round */
    float *gsum;                 /* [P] their sum over the pieces of an update */
    int64_t step;
    rl_prof sprof;               /* weight quantization of the syncs (main thread) */
    double aqn_sigma;            /* the aqn noise of the current stage */
    /* per-step buffers for B = prompts * group sequences */
    size_t B;
    int32_t *prompts;            /* [prompts][Tp] */
    int32_t *eval_prompts;       /* [eval_prompts][Tp] */
    rl_gen_out gen;              /* [B][R] */
    double *reward, *adv;        /* [B] */
    float *old_lp, *ent;         /* [B][R] trainer log-prob and entropy at each response token */
    int32_t *tr_amax;            /* [B][R] */
    float *hf_tr, *hf_ro;        /* [B][R][C] lm_head inputs at capture steps (act_every) */
    float *Psync;                /* [P] the master weights of the step's sync, at capture steps: the
                                  * weights its activations and log-probs came from (capture(5)) */
    rl_caprec rec_ro, rec_tr;
    char sites[8][64];           /* act_sites split */
    int nsites_glob;
};

/* ---- small helpers ------------------------------------------------------------------------------ */
/* Thread-seconds of every worker (and the main thread's syncs) by kind. */
static void prof_sum(fp4s_rl *r, double t[RL_T_NT])
{
    for (int k = 0; k < RL_T_NT; k++) t[k] = r->sprof.t[k];
    for (int w = 0; w < r->nworkers; w++)
        for (int k = 0; k < RL_T_NT; k++) t[k] += r->workers[w].ws.prof.t[k];
}

static fp4s_format rollout_format(fp4s_rl_rollout ro)
{
    return ro == FP4S_RL_ROLLOUT_FP8 ? FP4S_FP8 : ro == FP4S_RL_ROLLOUT_MXFP4 ? FP4S_MXFP4 : FP4S_NVFP4;
}

static bool rollout_quantized(fp4s_rl_rollout ro)
{
    return ro == FP4S_RL_ROLLOUT_FP8 || ro == FP4S_RL_ROLLOUT_MXFP4 || ro == FP4S_RL_ROLLOUT_NVFP4;
}

/* The rollout's activation and weight specs. */
static int rollout_specs(const fp4s_rl_opts *o, fp4s_spec *sa, fp4s_spec *sw)
{
    fp4s_format f = rollout_format(o->rollout);
    const char *pa = o->profile[0] ? o->profile : f == FP4S_FP8 ? "fp8-1x128" : fp4s_default_profile(f);
    const char *pw = o->weight_profile[0] ? o->weight_profile : pa;
    if (!o->weight_profile[0]) {
        if (f == FP4S_FP8 && !strcmp(pa, "fp8-1x128")) pw = "fp8-128x128";
        if (f == FP4S_NVFP4 && !strcmp(pa, "te")) pw = "te-2d";
    }
    int rc = fp4s_spec_profile(sa, f, pa);
    if (!rc) rc = fp4s_spec_profile(sw, f, pw);
    return rc;
}

/* The aqn schedule (QeRL's): `aqn_stages` equal stages over the planned
 * steps; stage 0 has no noise, stage s >= 1 sigma_start (sigma_end /
 * sigma_start)^((s - 1) / (stages - 2)), each stage with fresh noise. Sets
 * the rollout's remedy for the step's sync. */
static void aqn_stage(fp4s_rl *r, int64_t step)
{
    const fp4s_remedy *base = &r->lin_ro.num.remedy;
    if (!r->lin_ro.num.has_remedy || !base->aqn) return;
    int K = r->o.aqn_stages;
    int64_t st = step * K / r->o.steps;
    if (st >= K) st = K - 1;
    fp4s_remedy cur = *base;
    double s0 = base->aqn_sigma, s1 = r->o.aqn_end > 0 ? r->o.aqn_end : s0 / 100;
    if (st == 0) cur.aqn_sigma = 0;
    else cur.aqn_sigma = K > 2 ? s0 * pow(s1 / s0, (double)(st - 1) / (double)(K - 2)) : s0;
    cur.aqn_seed = base->aqn_seed + (uint64_t)st;
    r->lin_ro.cur = cur;
    r->aqn_sigma = cur.aqn_sigma;
}

/* ---- open / close --------------------------------------------------------------------------------- */
/* The outlier structure (fp4s_rl_opts, fp4-rl(1) OUTLIERS): every RMSNorm
 * gain starts at exp(gain_sigma z), z standard normal drawn per norm and
 * channel, and the k outlier channels (the k smallest rl_hash(seed,
 * STREAM_INIT, 1, c): the same channels in every norm, as the outlier
 * dimensions of a residual stream are) start outlier_gain times larger. The
 * gains are trained like the other weights (without decay), so the
 * structure is the policy's own from then on. With the control values every
 * gain is exactly 1. */
static void init_gains(fp4s_rl *r)
{
    const rl_layout *y = &r->lay;
    size_t C = (size_t)r->cfg.C, k = 0;
    if (r->o.outlier_frac > 0) {
        k = (size_t)lround(r->o.outlier_frac * (double)C);
        if (k < 1) k = 1;
    }
    bool *out = calloc(C, sizeof *out);
    if (!out) return; /* alloc_all's arrays are much larger: not reached after it succeeded */
    for (size_t j = 0; j < k; j++) { /* the next smallest hash */
        size_t best = C;
        for (size_t c = 0; c < C; c++)
            if (!out[c] && (best == C || rl_hash(r->o.seed, STREAM_INIT, 1, c) < rl_hash(r->o.seed, STREAM_INIT, 1, best)))
                best = c;
        out[best] = true;
    }
    size_t norms[2 * RL_MAX_LAYERS + 1], nn = 0;
    for (int l = 0; l < r->cfg.L; l++) norms[nn++] = y->l[l].ln1, norms[nn++] = y->l[l].ln2;
    norms[nn++] = y->lnf;
    for (size_t n = 0; n < nn; n++)
        for (size_t c = 0; c < C; c++) {
            double g = exp(r->o.gain_sigma * rl_gauss(r->o.seed, STREAM_INIT, 2 + n, c));
            r->P[norms[n] + c] = (float)(out[c] ? g * r->o.outlier_gain : g);
        }
    free(out);
}

static void init_weights(fp4s_rl *r)
{
    const rl_layout *y = &r->lay;
    double std = 0.02, res = 0.02 / sqrt(2.0 * r->cfg.L);
    for (size_t i = 0; i < y->total; i++) {
        double sd = std;
        for (int l = 0; l < r->cfg.L; l++)
            if ((i >= y->l[l].o && i < y->l[l].ln2) || (i >= y->l[l].w2 && i < y->l[l].w2 + (size_t)r->cfg.E *
                                                                                   (size_t)r->cfg.C * (size_t)r->cfg.F))
                sd = res;
        r->P[i] = rl_param_is_gain(y, &r->cfg, i) ? 1.0f : (float)(sd * rl_gauss(r->o.seed, STREAM_INIT, 0, i));
    }
    init_gains(r);
}

static int alloc_all(fp4s_rl *r)
{
    size_t B = r->B, R = (size_t)r->task.max_resp, Tp = (size_t)r->task.prompt_len, Pn = r->lay.total;
    bool ok = (r->P = calloc(Pn, sizeof *r->P)) && (r->m = calloc(Pn, sizeof *r->m)) &&
              (r->v = calloc(Pn, sizeof *r->v)) && (r->gbuf = calloc(RL_ROUND * Pn, sizeof *r->gbuf)) && (r->gsum = calloc(Pn, sizeof *r->gsum)) &&
              (r->prompts = calloc((size_t)r->o.prompts * Tp, sizeof(int32_t))) &&
              (r->eval_prompts = calloc((size_t)r->o.eval_prompts * Tp, sizeof(int32_t))) &&
              (r->gen.resp = calloc(B * R, sizeof(int32_t))) && (r->gen.len = calloc(B, sizeof(int32_t))) &&
              (r->gen.logp = calloc(B * R, sizeof(float))) && (r->gen.amax = calloc(B * R, sizeof(int32_t))) &&
              (r->reward = calloc(B, sizeof(double))) && (r->adv = calloc(B, sizeof(double))) &&
              (r->old_lp = calloc(B * R, sizeof(float))) && (r->ent = calloc(B * R, sizeof(float))) &&
              (r->tr_amax = calloc(B * R, sizeof(int32_t))) &&
              (r->workers = calloc((size_t)r->nworkers, sizeof *r->workers)) &&
              (r->mbuf = calloc((size_t)r->nworkers, sizeof *r->mbuf));
    return ok ? 0 : fp4s_error_set(FP4S_ENOMEM, "rl: out of memory (%zu parameters, %zu samples)", Pn, B);
}

int fp4s_rl_open(const fp4s_rl_opts *o, fp4s_rl **out)
{
    *out = NULL;
    int rc = fp4s_rl_opts_check(o);
    if (rc) return rc;
    fp4s_rl *r = calloc(1, sizeof *r);
    if (!r) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
    r->o = *o;
    rl_task_init(&r->task, o->task);
    r->cfg = (rl_cfg){.V = RL_VOCAB, .T = r->task.prompt_len + r->task.max_resp - 1, .C = o->width,
                      .L = o->layers, .H = o->heads, .E = o->experts, .K = o->top_k,
                      .F = o->expert_hidden ? o->expert_hidden : 2 * o->width};
    r->B = (size_t)o->prompts * (size_t)o->group;
    r->nworkers = fp4s_get_threads();
    if ((rc = rl_blas_open()) || (rc = rl_layout_init(&r->lay, &r->cfg)) || (rc = alloc_all(r))) goto fail;
    init_weights(r);
    /* numerics */
    rl_num ntr = {.act = RL_OP_BF16, .weight = RL_OP_BF16, .quant_sites = o->quant_sites};
    rl_num nro = {.act = RL_OP_BF16, .weight = RL_OP_BF16, .quant_sites = o->quant_sites,
                  .drift = (int)o->drift};
    rl_num nsft = {.act = RL_OP_BF16, .weight = RL_OP_BF16, .quant_sites = 0};
    fp4s_spec sa, sw;
    if (rollout_quantized(o->rollout)) {
        if ((rc = rollout_specs(o, &sa, &sw))) goto fail;
        nro.act = nro.weight = RL_OP_QUANT;
        nro.spec_a = sa;
        nro.spec_w = sw;
        ntr.spec_a = sa;
        ntr.spec_w = sw;
        if (o->trainer == FP4S_RL_TRAINER_WFQ) ntr.weight = RL_OP_QUANT;
        if (o->trainer == FP4S_RL_TRAINER_W4A4QAT) ntr.act = ntr.weight = RL_OP_QUANT;
        if (o->remedy[0]) {
            if ((rc = fp4s_remedy_parse(o->remedy, &nro.remedy))) goto fail;
            nro.has_remedy = true;
            ntr.remedy = nro.remedy;
            ntr.has_remedy = ntr.weight == RL_OP_QUANT; /* the trainer follows its weight operand */
            ntr.remedy_weight_only = true;
        }
    }
    if (o->trainer == FP4S_RL_TRAINER_FP32) ntr.fp32 = true;
    if (o->rollout == FP4S_RL_ROLLOUT_FP32) nro.fp32 = true, nro.drift = FP4S_RL_DRIFT_NONE;
    if ((rc = rl_lin_init(&r->lin_tr, &r->cfg, &r->lay, &ntr)) || (rc = rl_lin_init(&r->lin_ro, &r->cfg, &r->lay, &nro)) ||
        (rc = rl_lin_init(&r->lin_sft, &r->cfg, &r->lay, &nsft)))
        goto fail;
    aqn_stage(r, 0);
    if ((rc = rl_lin_sync(&r->lin_tr, r->P, NULL)) || (rc = rl_lin_sync(&r->lin_sft, r->P, NULL)) ||
        (rc = rl_lin_sync(&r->lin_ro, r->P, NULL))) /* the remedy's checks, now */
        goto fail;
    /* fixed held-out prompts */
    size_t Tp = (size_t)r->task.prompt_len;
    for (int i = 0; i < o->eval_prompts; i++)
        rl_task_prompt(&r->task, o->seed, STREAM_EVAL, (uint64_t)i, r->eval_prompts + (size_t)i * Tp);
    /* capture record and site globs */
    if (o->act_every) {
        size_t ns = (size_t)o->act_seqs < r->B ? (size_t)o->act_seqs : r->B;
        if ((rc = rl_caprec_alloc(&r->rec_ro, &r->cfg, ns)) || (rc = rl_caprec_alloc(&r->rec_tr, &r->cfg, ns)))
            goto fail;
        size_t nh = r->B * (size_t)r->task.max_resp * (size_t)r->cfg.C;
        if (!(r->hf_tr = calloc(nh, sizeof *r->hf_tr)) || !(r->hf_ro = calloc(nh, sizeof *r->hf_ro)) ||
            !(r->Psync = calloc(r->lay.total, sizeof *r->Psync))) {
            rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the lm_head capture");
            goto fail;
        }
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->act_sites);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (r->nsites_glob == 8 || strlen(t) >= sizeof r->sites[0]) {
                rc = fp4s_error_set(FP4S_EINVAL, "rl: act_sites: at most 8 globs of 63 bytes");
                goto fail;
            }
            snprintf(r->sites[r->nsites_glob++], sizeof r->sites[0], "%s", t);
        }
    }
    *out = r;
    return 0;
fail:
    fp4s_rl_close(&r);
    return rc;
}

void fp4s_rl_close(fp4s_rl **pr)
{
    if (!pr || !*pr) return;
    fp4s_rl *r = *pr;
    *pr = NULL;
    if (r->workers)
        for (int w = 0; w < r->nworkers; w++) rl_worker_free(&r->workers[w]);
    if (r->mbuf)
        for (int w = 0; w < r->nworkers; w++) {
            rl_mbuf *b = &r->mbuf[w];
            free(b->off); free(b->tok); free(b->tgt); free(b->amax); free(b->logp); free(b->ent); free(b->c);
        }
    rl_lin_free(&r->lin_tr);
    rl_lin_free(&r->lin_ro);
    rl_lin_free(&r->lin_sft);
    rl_caprec_free(&r->rec_ro);
    rl_caprec_free(&r->rec_tr);
    void *f[] = {r->hf_tr, r->hf_ro, r->Psync, r->workers, r->mbuf, r->P, r->m, r->v, r->gbuf, r->gsum, r->prompts, r->eval_prompts, r->gen.resp,
                 r->gen.len, r->gen.logp, r->gen.amax, r->reward, r->adv, r->old_lp, r->ent, r->tr_amax};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    rl_layout_free(&r->lay);
    free(r);
}

size_t fp4s_rl_param_count(const fp4s_rl *r) { return r ? r->lay.total : 0; }
const fp4s_rl_opts *fp4s_rl_options(const fp4s_rl *r) { return r ? &r->o : NULL; }

int fp4s_rl_copy_policy(fp4s_rl *dst, const fp4s_rl *src)
{
    if (!dst || !src) return fp4s_error_set(FP4S_EINVAL, "rl: copy_policy of a NULL handle");
    if (memcmp(&dst->cfg, &src->cfg, sizeof dst->cfg))
        return fp4s_error_set(FP4S_EINVAL, "rl: copy_policy between models of different shapes");
    memcpy(dst->P, src->P, dst->lay.total * sizeof *dst->P);
    memset(dst->m, 0, dst->lay.total * sizeof *dst->m);
    memset(dst->v, 0, dst->lay.total * sizeof *dst->v);
    dst->adam_t = 0;
    int rc = rl_lin_sync(&dst->lin_tr, dst->P, NULL);
    return rc ? rc : rl_lin_sync(&dst->lin_sft, dst->P, NULL);
}

const float *fp4s_rl_policy(const fp4s_rl *r) { return r ? r->P : NULL; }

int fp4s_rl_set_policy(fp4s_rl *r, const float *P, size_t n)
{
    if (!r || !P) return fp4s_error_set(FP4S_EINVAL, "rl: set_policy of a NULL handle or array");
    if (n != r->lay.total)
        return fp4s_error_set(FP4S_EINVAL, "rl: set_policy: %zu weights for a model of %zu", n, r->lay.total);
    memcpy(r->P, P, n * sizeof *r->P);
    memset(r->m, 0, n * sizeof *r->m);
    memset(r->v, 0, n * sizeof *r->v);
    r->adam_t = 0;
    int rc = rl_lin_sync(&r->lin_tr, r->P, NULL);
    return rc ? rc : rl_lin_sync(&r->lin_sft, r->P, NULL);
}

/* ---- trainer pieces ------------------------------------------------------------------------------------ */
/* A trainer micro-batch: sequences [s0, s1) of prompts (seq b's prompt at
 * prompts + (b / group) * Tp) and responses (resp + b * R, length len[b]). */
typedef struct tr_src {
    const int32_t *prompts, *resp, *len;
    int group;
} tr_src;

static int mbuf_build(fp4s_rl *r, rl_mbuf *b, const tr_src *src, size_t s0, size_t s1, rl_batch *out)
{
    size_t Tp = (size_t)r->task.prompt_len, R = (size_t)r->task.max_resp, ns = s1 - s0;
    size_t rows = 0;
    for (size_t s = s0; s < s1; s++) rows += Tp + (size_t)src->len[s] - 1;
    if (b->cap_rows < rows || b->cap_seq < ns + 1) {
        size_t cr = rows > b->cap_rows ? rows : b->cap_rows, cs = ns + 1 > b->cap_seq ? ns + 1 : b->cap_seq;
        free(b->off); free(b->tok); free(b->tgt); free(b->amax); free(b->logp); free(b->ent); free(b->c);
        *b = (rl_mbuf){.cap_rows = cr, .cap_seq = cs};
        if (!(b->off = malloc(cs * sizeof *b->off)) || !(b->tok = malloc(cr * sizeof *b->tok)) ||
            !(b->tgt = malloc(cr * sizeof *b->tgt)) || !(b->amax = malloc(cr * sizeof *b->amax)) ||
            !(b->logp = malloc(cr * sizeof *b->logp)) || !(b->ent = malloc(cr * sizeof *b->ent)) ||
            !(b->c = malloc(cr * sizeof *b->c))) {
            b->cap_rows = b->cap_seq = 0;
            return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for a micro-batch of %zu tokens", rows);
        }
    }
    size_t m = 0;
    for (size_t s = s0; s < s1; s++) {
        b->off[s - s0] = m;
        const int32_t *pr = src->prompts + s / (size_t)src->group * Tp, *rs = src->resp + s * R;
        size_t n = Tp + (size_t)src->len[s] - 1;
        for (size_t p = 0; p < n; p++, m++) {
            b->tok[m] = p < Tp ? pr[p] : rs[p - Tp];
            b->tgt[m] = p + 1 >= Tp ? rs[p + 1 - Tp] : -1;
        }
    }
    b->off[ns] = m;
    *out = (rl_batch){.nseq = ns, .M = m, .off = b->off, .tok = b->tok, .tgt = b->tgt};
    return 0;
}

/* Row of response token j of the i-th sequence of a micro-batch. */
static inline size_t resp_row(const rl_batch *b, size_t i, size_t Tp, size_t j) { return b->off[i] + Tp - 1 + j; }

/* Copy the trainer's activations of the recorded sequences of a micro-batch. */
static void record_trainer(fp4s_rl *r, const rl_acts *a, const rl_batch *b, size_t s0)
{
    rl_caprec *rec = &r->rec_tr;
    const rl_cfg *c = &r->cfg;
    size_t C = (size_t)c->C, K = (size_t)c->K, F = (size_t)c->F, T = (size_t)c->T, M = b->M;
    for (size_t i = 0; i < b->nseq; i++) {
        size_t s = s0 + i;
        if (s >= rec->nseq) break;
        rec->len[s] = (int32_t)(b->off[i + 1] - b->off[i]);
        for (size_t m = b->off[i]; m < b->off[i + 1]; m++) {
            size_t at = s * T + (m - b->off[i]);
            for (int l = 0; l < c->L; l++) {
                size_t lr = (size_t)l * rec->nseq * T;
                memcpy(rec->ln1 + (lr + at) * C, a->ln1 + ((size_t)l * M + m) * C, C * sizeof(float));
                memcpy(rec->atty + (lr + at) * C, a->atty + ((size_t)l * M + m) * C, C * sizeof(float));
                memcpy(rec->ln2 + (lr + at) * C, a->ln2 + ((size_t)l * M + m) * C, C * sizeof(float));
                memcpy(rec->topi + (lr + at) * K, a->topi + ((size_t)l * M + m) * K, K * sizeof(int32_t));
                for (size_t j = 0; j < K; j++) {
                    size_t sl = (size_t)a->eslot[((size_t)l * M + m) * K + j];
                    memcpy(rec->hg + ((lr + at) * K + j) * F, a->hg + ((size_t)l * M * K + sl) * F, F * sizeof(float));
                }
            }
        }
    }
}

/* Pass A: old log-probs, entropies and argmaxes of every response token. */
struct passa_job {
    fp4s_rl *r;
    tr_src src;
    double *aux;     /* [nmicro] */
    bool record;
};

static int passa_piece(void *arg, size_t begin, size_t end, int worker)
{
    struct passa_job *j = arg;
    fp4s_rl *r = j->r;
    rl_worker *w = &r->workers[worker];
    rl_mbuf *mb = &r->mbuf[worker];
    size_t Tp = (size_t)r->task.prompt_len, R = (size_t)r->task.max_resp, mbs = (size_t)r->o.micro_batch;
    rl_ctx x = {.cfg = &r->cfg, .lay = &r->lay, .P = r->P, .lin = &r->lin_tr, .ws = &w->ws};
    for (size_t p = begin; p < end; p++) {
        size_t s0 = p * mbs, s1 = s0 + mbs < r->B ? s0 + mbs : r->B;
        rl_batch b;
        int rc = mbuf_build(r, mb, &j->src, s0, s1, &b);
        double t0 = rl_now();
        if (!rc) rc = rl_forward(&x, &b, &w->acts, mb->logp, mb->ent, mb->amax);
        w->ws.prof.t[RL_T_FWD] += rl_now() - t0;
        if (rc) return rc;
        j->aux[p] = w->acts.aux;
        for (size_t i = 0; i < b.nseq; i++) {
            size_t s = s0 + i;
            for (size_t t = 0; t < (size_t)r->gen.len[s]; t++) {
                size_t row = resp_row(&b, i, Tp, t);
                r->old_lp[s * R + t] = mb->logp[row];
                r->ent[s * R + t] = mb->ent[row];
                r->tr_amax[s * R + t] = mb->amax[row];
                if (j->record)
                    memcpy(r->hf_tr + (s * R + t) * (size_t)r->cfg.C, w->acts.lnf + row * (size_t)r->cfg.C,
                           (size_t)r->cfg.C * sizeof(float));
            }
        }
        if (j->record) record_trainer(r, &w->acts, &b, s0);
    }
    return 0;
}

/* The outlier structure of the trainer's activations (fp4s_rl_stats
 * act_kurtosis, act_outlier_ratio, err_top1): a forward of the step's first
 * micro-batch on worker 0, then the inputs of qkv_proj and of the experts of
 * every layer. */
static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int outlier_stats(fp4s_rl *r, const tr_src *src, fp4s_rl_stats *st)
{
    rl_worker *w = &r->workers[0];
    size_t s1 = r->B < (size_t)r->o.micro_batch ? r->B : (size_t)r->o.micro_batch, C = (size_t)r->cfg.C;
    size_t L = (size_t)r->cfg.L, k = C / 100 > 1 ? C / 100 : 1;
    rl_batch b;
    int rc = mbuf_build(r, &r->mbuf[0], src, 0, s1, &b);
    if (rc) return rc;
    rl_ctx x = {.cfg = &r->cfg, .lay = &r->lay, .P = r->P, .lin = &r->lin_tr, .ws = &w->ws};
    if ((rc = rl_forward(&x, &b, &w->acts, NULL, NULL, NULL))) return rc;
    size_t M = b.M;
    fp4s_spec sp;
    if ((rc = fp4s_spec_profile(&sp, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4)))) return rc;
    float *q = malloc(M * C * sizeof *q);
    double *e = malloc(C * sizeof *e), *ms = malloc(C * sizeof *ms);
    if (!q || !e || !ms) {
        rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
        goto done;
    }
    double kurt = 0, ratio = 0, top = 0;
    for (size_t t = 0; t < 2 * L; t++) {
        const float *X = (t < L ? w->acts.ln1 : w->acts.ln2) + (t % L) * M * C;
        double mean = 0, m2 = 0, m4 = 0, n = (double)(M * C);
        for (size_t i = 0; i < M * C; i++) mean += X[i];
        mean /= n;
        for (size_t i = 0; i < M * C; i++) {
            double d = (X[i] - mean) * (X[i] - mean);
            m2 += d;
            m4 += d * d;
        }
        kurt += m2 > 0 ? (m4 / n) / ((m2 / n) * (m2 / n)) : NAN;
        if ((rc = rl_fakequant(&sp, X, M, C, C, q, C, &w->ws))) goto done;
        double etot = 0;
        for (size_t c = 0; c < C; c++) e[c] = ms[c] = 0;
        for (size_t m = 0; m < M; m++)
            for (size_t c = 0; c < C; c++) {
                double v = X[m * C + c], d = (double)q[m * C + c] - v;
                ms[c] += v * v;
                e[c] += d * d;
            }
        for (size_t c = 0; c < C; c++) etot += e[c];
        qsort(e, C, sizeof *e, cmp_desc);
        double etop = 0;
        for (size_t c = 0; c < k; c++) etop += e[c];
        top += etot > 0 ? etop / etot : NAN;
        qsort(ms, C, sizeof *ms, cmp_desc);
        double med = C % 2 ? ms[C / 2] : (ms[C / 2 - 1] + ms[C / 2]) / 2;
        ratio += med > 0 ? sqrt(ms[0] / med) : NAN;
    }
    st->act_kurtosis = kurt / (double)(2 * L);
    st->act_outlier_ratio = ratio / (double)(2 * L);
    st->err_top1 = top / (double)(2 * L);
done:
    free(q);
    free(e);
    free(ms);
    return rc;
}

double rl_grpo_loss(const fp4s_rl_opts *o, double logp, double old, double ro, double A, double norm)
{
    double lr_is = fmin(fmax(old - ro, -20.0), 20.0), w = exp(lr_is), wis = 1;
    if (o->is_corr == FP4S_RL_IS_MIS && (w > o->is_cap || w < 1 / o->is_cap)) return 0;
    if (o->is_corr == FP4S_RL_IS_TIS) wis = fmin(w, o->is_cap);
    double ratio = exp(logp - old), cr = fmin(fmax(ratio, 1 - o->clip_eps), 1 + o->clip_eps);
    return -wis * fmin(ratio * A, cr * A) * norm;
}

double rl_grpo_dlogp(const fp4s_rl_opts *o, double logp, double old, double ro, double A, double norm, bool *clipped)
{
    *clipped = false;
    double lr_is = fmin(fmax(old - ro, -20.0), 20.0), w = exp(lr_is), wis = 1;
    if (o->is_corr == FP4S_RL_IS_MIS && (w > o->is_cap || w < 1 / o->is_cap)) return 0;
    if (o->is_corr == FP4S_RL_IS_TIS) wis = fmin(w, o->is_cap);
    double ratio = exp(logp - old);
    if ((A > 0 && ratio > 1 + o->clip_eps) || (A < 0 && ratio < 1 - o->clip_eps)) {
        *clipped = true;
        return 0;
    }
    return -wis * A * ratio * norm;
}

/* One minibatch's micro-batches: forward, per-token loss gradient, backward
 * into gbuf[piece - piece0] for the pieces of the current round. */
struct upd_job {
    fp4s_rl *r;
    tr_src src;
    size_t s_begin, s_end;   /* the minibatch */
    double norm;             /* 1 / counted tokens of the minibatch */
    size_t rows_mb;
    size_t piece0;           /* the round's first piece */
    uint64_t clipped[RL_ROUND];
    int sft;                 /* 1: supervised (c = -norm) */
    const rl_lin *lin;
};

static int upd_piece(void *arg, size_t begin, size_t end, int worker)
{
    struct upd_job *j = arg;
    fp4s_rl *r = j->r;
    rl_worker *w = &r->workers[worker];
    rl_mbuf *mb = &r->mbuf[worker];
    const fp4s_rl_opts *o = &r->o;
    size_t Tp = (size_t)r->task.prompt_len, R = (size_t)r->task.max_resp, mbs = (size_t)o->micro_batch;
    size_t Pn = r->lay.total;
    rl_ctx x = {.cfg = &r->cfg, .lay = &r->lay, .P = r->P, .lin = j->lin, .ws = &w->ws};
    for (size_t p = begin; p < end; p++) {
        size_t s0 = j->s_begin + (j->piece0 + p) * mbs, s1 = s0 + mbs < j->s_end ? s0 + mbs : j->s_end;
        rl_batch b;
        int rc = mbuf_build(r, mb, &j->src, s0, s1, &b);
        double t0 = rl_now();
        if (!rc) rc = rl_forward(&x, &b, &w->acts, mb->logp, NULL, NULL);
        w->ws.prof.t[RL_T_FWD] += rl_now() - t0;
        if (rc) return rc;
        for (size_t m = 0; m < b.M; m++) mb->c[m] = 0;
        uint64_t clipped = 0;
        for (size_t i = 0; i < b.nseq; i++) {
            size_t s = s0 + i;
            for (size_t t = 0; t < (size_t)j->src.len[s]; t++) {
                size_t row = resp_row(&b, i, Tp, t);
                if (j->sft) {
                    mb->c[row] = (float)(-j->norm);
                    continue;
                }
                bool clip;
                mb->c[row] = (float)rl_grpo_dlogp(o, mb->logp[row], r->old_lp[s * R + t], r->gen.logp[s * R + t],
                                                  r->adv[s], j->norm, &clip);
                clipped += clip;
            }
        }
        j->clipped[p] = clipped;
        float *G = r->gbuf + p * Pn;
        memset(G, 0, Pn * sizeof *G);
        double aux_scale = o->aux_coef * (double)b.M / (double)j->rows_mb;
        t0 = rl_now();
        rc = rl_backward(&x, &b, &w->acts, mb->c, aux_scale, G);
        w->ws.prof.t[RL_T_BWD] += rl_now() - t0;
        if (rc) return rc;
    }
    return 0;
}

void rl_adamw(float *P, float *m, float *v, const float *G, float gscale, size_t n, int64_t t, double lr,
              double b1, double b2, double eps, double wdecay, const rl_layout *lay, const rl_cfg *cfg)
{
    double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
    float fb1 = (float)b1, fb2 = (float)b2, flr = (float)lr, feps = (float)eps;
    float wd = (float)(lr * wdecay), fbc1 = (float)bc1, fbc2s = (float)sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        float g = G[i] * gscale;
        m[i] = fb1 * m[i] + (1 - fb1) * g;
        v[i] = fb2 * v[i] + (1 - fb2) * g * g;
        if (wd > 0 && !rl_param_is_gain(lay, cfg, i)) P[i] -= wd * P[i];
        P[i] -= flr * (m[i] / fbc1) / (sqrtf(v[i]) / fbc2s + feps);
    }
}

/* Run the np micro-batches of an update, RL_ROUND at a time, and sum their
 * gradients in piece order into r->gsum; *clipped counts the clipped tokens. */
static int run_pieces(fp4s_rl *r, struct upd_job *j, size_t np, uint64_t *clipped)
{
    size_t Pn = r->lay.total;
    *clipped = 0;
    for (size_t p0 = 0; p0 < np; p0 += RL_ROUND) {
        size_t n = np - p0 < RL_ROUND ? np - p0 : RL_ROUND;
        j->piece0 = p0;
        int rc = fp4s_parallel_dynamic(n, 1, r->nworkers, upd_piece, j);
        if (rc) return rc;
        for (size_t p = 0; p < n; p++) {
            const float *g = r->gbuf + p * Pn;
            if (p0 + p == 0) memcpy(r->gsum, g, Pn * sizeof *g);
            else
                for (size_t i = 0; i < Pn; i++) r->gsum[i] += g[i];
            *clipped += j->clipped[p];
        }
    }
    return 0;
}

/* Clip the summed gradient, AdamW, refresh `lin`. */
static int apply_update(fp4s_rl *r, double lr, double b1, double b2, rl_lin *lin, double *gnorm)
{
    size_t Pn = r->lay.total;
    const float *G = r->gsum;
    double n2 = 0;
    for (size_t i = 0; i < Pn; i++) n2 += (double)G[i] * G[i];
    double norm = sqrt(n2), scale = 1;
    if (!isfinite(norm))
        return fp4s_error_set(FP4S_ECHECK, "rl: step %lld: the gradient is not finite (diverged)",
                              (long long)r->step);
    if (r->o.grad_clip > 0 && norm > r->o.grad_clip) scale = r->o.grad_clip / (norm + 1e-6);
    *gnorm = norm;
    r->adam_t++;
    rl_adamw(r->P, r->m, r->v, G, (float)scale, Pn, r->adam_t, lr, b1, b2, r->o.adam_eps, r->o.weight_decay,
             &r->lay, &r->cfg);
    return rl_lin_sync(lin, r->P, &r->sprof);
}

/* ---- evaluation ------------------------------------------------------------------------------------------ */
/* Success rate of the engine with numerics `lin` on n prompts (greedy or sampled). */
static int success_rate(fp4s_rl *r, const rl_lin *lin, const int32_t *prompts, size_t n, bool greedy,
                        uint64_t stream, double *out)
{
    size_t R = (size_t)r->task.max_resp, Tp = (size_t)r->task.prompt_len;
    rl_gen_out g = {0};
    int rc = 0;
    if (!(g.resp = malloc(n * R * sizeof(int32_t))) || !(g.len = malloc(n * sizeof(int32_t))) ||
        !(g.logp = malloc(n * R * sizeof(float))) || !(g.amax = malloc(n * R * sizeof(int32_t)))) {
        rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
        goto done;
    }
    rl_gen_req q = {.cfg = &r->cfg, .lay = &r->lay, .lin = lin, .P = r->P, .task = &r->task, .nseq = n,
                    .prompts = prompts, .group = 1, .greedy = greedy, .temperature = r->o.temperature,
                    .seed = r->o.seed, .stream = stream, .shard = (size_t)r->o.shard};
    if ((rc = rl_generate(&q, &g, r->workers, r->nworkers))) goto done;
    double ok = 0;
    for (size_t i = 0; i < n; i++) ok += rl_task_reward(&r->task, prompts + i * Tp, g.resp + i * R, g.len[i]);
    *out = ok / (double)n;
done:
    free(g.resp);
    free(g.len);
    free(g.logp);
    free(g.amax);
    return rc;
}

/* ---- warm start ---------------------------------------------------------------------------------------- */
int fp4s_rl_warmstart(fp4s_rl *r, fp4s_rl_sft *rep)
{
    if (!r) return fp4s_error_set(FP4S_EINVAL, "rl: warmstart of a NULL handle");
    const fp4s_rl_opts *o = &r->o;
    double t0 = rl_now();
    size_t n = (size_t)o->sft_batch, Tp = (size_t)r->task.prompt_len, R = (size_t)r->task.max_resp;
    size_t nchk = (size_t)o->eval_prompts;
    int32_t *pr = malloc(n * Tp * sizeof *pr), *resp = malloc(n * R * sizeof *resp), *len = malloc(n * sizeof *len);
    int32_t *chk = malloc(nchk * Tp * sizeof *chk);
    int rc = 0;
    if (!pr || !resp || !len || !chk) {
        rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
        goto done;
    }
    r->adam_t = 0;
    memset(r->m, 0, r->lay.total * sizeof *r->m);
    memset(r->v, 0, r->lay.total * sizeof *r->v);
    double succ = 0;
    int k = 0;
    bool reached = false;
    for (;; k++) {
        if (k % o->sft_check_every == 0 || k == o->sft_max_steps) {
            for (size_t i = 0; i < nchk; i++)
                rl_task_prompt(&r->task, o->seed, STREAM_SFT_CHECK, (uint64_t)k * nchk + i, chk + i * Tp);
            if ((rc = success_rate(r, &r->lin_sft, chk, nchk, false, STREAM_SFT_SAMPLE + ((uint64_t)k << 8), &succ)))
                goto done;
            if (succ >= o->sft_target) {
                reached = true;
                break;
            }
        }
        if (k == o->sft_max_steps) break;
        size_t ntok = 0;
        for (size_t i = 0; i < n; i++) {
            rl_task_prompt(&r->task, o->seed, STREAM_SFT, (uint64_t)k * n + i, pr + i * Tp);
            len[i] = rl_task_answer(&r->task, pr + i * Tp, resp + i * R);
            ntok += (size_t)len[i];
        }
        size_t rows = 0;
        for (size_t i = 0; i < n; i++) rows += Tp + (size_t)len[i] - 1;
        struct upd_job j = {.r = r, .src = {pr, resp, len, 1}, .s_begin = 0, .s_end = n,
                            .norm = 1.0 / (double)ntok, .rows_mb = rows, .sft = 1, .lin = &r->lin_sft};
        size_t np = (n + (size_t)o->micro_batch - 1) / (size_t)o->micro_batch;
        uint64_t nc;
        if ((rc = run_pieces(r, &j, np, &nc))) goto done;
        double gn = 0;
        if ((rc = apply_update(r, o->sft_lr, 0.9, 0.98, &r->lin_sft, &gn))) goto done;
    }
    /* the RL optimizer starts fresh */
    r->adam_t = 0;
    memset(r->m, 0, r->lay.total * sizeof *r->m);
    memset(r->v, 0, r->lay.total * sizeof *r->v);
    if ((rc = rl_lin_sync(&r->lin_tr, r->P, NULL))) goto done;
    if (rep) *rep = (fp4s_rl_sft){.steps = k, .success = succ, .reached = reached, .seconds = rl_now() - t0};
done:
    free(pr);
    free(resp);
    free(len);
    free(chk);
    return rc;
}

/* ---- capture ------------------------------------------------------------------------------------------------ */
int fp4s_rl_capture_header(const fp4s_rl *r, fp4s_capture *cap)
{
    const fp4s_rl_opts *o = &r->o;
    char sites[64], desc[512];
    fp4s_rl_sites_name(o->quant_sites, sites, sizeof sites);
    int rc = 0;
#define AS(n, v) if (!rc) rc = fp4s_capture_attr_str(cap, "/", n, v)
#define AI(n, v) if (!rc) rc = fp4s_capture_attr_i64(cap, "/", n, (int64_t)(v))
#define AD(n, v) if (!rc) rc = fp4s_capture_attr_f64(cap, "/", n, v)
    AS("rl_task", fp4s_rl_task_name(o->task));
    AS("rl_trainer", fp4s_rl_trainer_name(o->trainer));
    AS("rl_rollout", fp4s_rl_rollout_name(o->rollout));
    if (rollout_quantized(o->rollout)) {
        fp4s_spec sa, sw;
        if (!rc) rc = rollout_specs(o, &sa, &sw);
        if (!rc) {
            fp4s_spec_describe(&sa, desc, sizeof desc);
            AS("rl_spec_act", desc);
            fp4s_spec_describe(&sw, desc, sizeof desc);
            AS("rl_spec_weight", desc);
        }
    }
    AS("rl_remedy", o->remedy);
    AD("rl_aqn_end", o->aqn_end);
    AI("rl_aqn_stages", o->aqn_stages);
    AI("rl_steps", o->steps);
    AS("rl_quant_sites", sites);
    AS("rl_drift", fp4s_rl_drift_name(o->drift));
    AI("rl_seed", o->seed);
    AI("rl_width", o->width);
    AI("rl_layers", o->layers);
    AI("rl_heads", o->heads);
    AI("rl_experts", o->experts);
    AI("rl_top_k", o->top_k);
    AI("rl_expert_hidden", r->cfg.F);
    AI("rl_params", r->lay.total);
    AD("rl_aux_coef", o->aux_coef);
    AD("rl_outlier_gain", o->outlier_gain);
    AD("rl_outlier_frac", o->outlier_frac);
    AD("rl_gain_sigma", o->gain_sigma);
    AI("rl_prompts", o->prompts);
    AI("rl_group", o->group);
    AD("rl_temperature", o->temperature);
    AD("rl_lr", o->lr);
    AD("rl_clip_eps", o->clip_eps);
    AI("rl_minibatches", o->minibatches);
    AS("rl_is_corr", fp4s_rl_iscorr_name(o->is_corr));
    AD("rl_is_cap", o->is_cap);
    AI("rl_micro_batch", o->micro_batch);
    AI("rl_shard", o->shard);
    AS("rl_gemm", fp4s_gemm_name(fp4s_get_gemm()));
#undef AS
#undef AI
#undef AD
    return rc;
}

static bool site_selected(const fp4s_rl *r, const char *name)
{
    for (int i = 0; i < r->nsites_glob; i++)
        if (fp4s_site_match(r->sites[i], name)) return true;
    return false;
}

/* Rows of one site, both sides, from the two records. */
static int put_site(fp4s_rl *r, fp4s_capture *cap, const rl_site *st, float *bt, float *br)
{
    const rl_caprec *rt = &r->rec_tr, *rr = &r->rec_ro;
    size_t T = rt->T, C = rt->C, F = rt->F, K = (size_t)rt->K;
    size_t Kin = st->K, n = 0;
    for (size_t s = 0; s < rt->nseq; s++) {
        size_t len = (size_t)rt->len[s];
        if ((size_t)rr->len[s] != len)
            return fp4s_error_set(FP4S_EINTERNAL, "rl: sequence %zu has %zu trainer and %d rollout tokens",
                                  s, len, rr->len[s]);
        for (size_t p = 0; p < len; p++) {
            size_t at = s * T + p, la = st->layer >= 0 ? (size_t)st->layer * rt->nseq * T + at : at;
            const float *a = NULL, *b = NULL;
            switch (st->kind) {
            case RL_S_QKV: a = rt->ln1 + la * C; b = rr->ln1 + la * C; break;
            case RL_S_O: a = rt->atty + la * C; b = rr->atty + la * C; break;
            case RL_S_ROUTER: a = rt->ln2 + la * C; b = rr->ln2 + la * C; break;
            case RL_S_HEAD: /* written by put_head, every sequence */
                break;
            case RL_S_W13:
                for (size_t j = 0; j < K; j++)
                    if (rt->topi[la * K + j] == st->expert) a = rt->ln2 + la * C, b = rr->ln2 + la * C;
                break;
            case RL_S_W2: {
                int jt = -1, jr = -1;
                for (size_t j = 0; j < K; j++) {
                    if (rt->topi[la * K + j] == st->expert) jt = (int)j;
                    if (rr->topi[la * K + j] == st->expert) jr = (int)j;
                }
                if (jt >= 0 && jr >= 0) a = rt->hg + (la * K + (size_t)jt) * F, b = rr->hg + (la * K + (size_t)jr) * F;
                break;
            }
            }
            if (!a) continue;
            memcpy(bt + n * Kin, a, Kin * sizeof *bt);
            memcpy(br + n * Kin, b, Kin * sizeof *br);
            n++;
        }
    }
    if (!n) return 0; /* no token reached this expert on both sides: the site is absent at this step */
    int64_t step = r->step;
    int rc = fp4s_capture_put(cap, step, st->name, "trainer", FP4S_DT_F32, bt, n, Kin, Kin, NULL);
    if (!rc) rc = fp4s_capture_put(cap, step, st->name, "rollout", FP4S_DT_F32, br, n, Kin, Kin, NULL);
    if (!rc) rc = fp4s_capture_put(cap, step, st->name, "weight", FP4S_DT_F32, r->Psync + st->off, st->N, st->K, st->K, NULL);
    return rc;
}

/* lm_head: the final hidden states of both sides for every response token,
 * row for row with the step's log-probs and tokens (the logits path of
 * fp4-remedy(1)). */
static int put_head(fp4s_rl *r, fp4s_capture *cap, size_t n)
{
    const rl_site *st = &r->lay.sites[rl_site_head(&r->cfg)];
    size_t R = (size_t)r->task.max_resp, C = (size_t)r->cfg.C, k = 0;
    float *a = malloc(n * C * sizeof *a), *b = malloc(n * C * sizeof *b);
    int rc = 0;
    if (!a || !b) rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
    for (size_t s = 0; s < r->B && !rc; s++)
        for (size_t t = 0; t < (size_t)r->gen.len[s]; t++, k++) {
            memcpy(a + k * C, r->hf_tr + (s * R + t) * C, C * sizeof *a);
            memcpy(b + k * C, r->hf_ro + (s * R + t) * C, C * sizeof *b);
        }
    if (!rc) rc = fp4s_capture_put(cap, r->step, st->name, "trainer", FP4S_DT_F32, a, n, C, C, NULL);
    if (!rc) rc = fp4s_capture_put(cap, r->step, st->name, "rollout", FP4S_DT_F32, b, n, C, C, NULL);
    if (!rc) rc = fp4s_capture_put(cap, r->step, st->name, "weight", FP4S_DT_F32, r->Psync + st->off, st->N, st->K, st->K, NULL);
    free(a);
    free(b);
    return rc;
}

static int write_step(fp4s_rl *r, fp4s_capture *cap, bool acts, const fp4s_rl_stats *st)
{
    size_t R = (size_t)r->task.max_resp, n = 0;
    for (size_t b = 0; b < r->B; b++) n += (size_t)r->gen.len[b];
    float *lt = malloc(n * sizeof *lt), *lr = malloc(n * sizeof *lr);
    int64_t *seq = malloc(n * sizeof *seq), *pos = malloc(n * sizeof *pos), *tok = malloc(n * sizeof *tok);
    float *bt = NULL, *br = NULL;
    int rc = 0;
    if (!lt || !lr || !seq || !pos || !tok) {
        rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
        goto done;
    }
    size_t k = 0;
    for (size_t b = 0; b < r->B; b++)
        for (size_t t = 0; t < (size_t)r->gen.len[b]; t++, k++) {
            lt[k] = r->old_lp[b * R + t];
            lr[k] = r->gen.logp[b * R + t];
            seq[k] = (int64_t)b;
            pos[k] = (int64_t)t;
            tok[k] = r->gen.resp[b * R + t];
        }
    if ((rc = fp4s_capture_put_logprobs(cap, r->step, lt, lr, seq, pos, NULL, n)) ||
        (rc = fp4s_capture_put_tokens(cap, r->step, tok, n)))
        goto done;
    /* the step's scalars, but not its times (a capture does not depend on the machine) */
    for (size_t i = 0; i < fp4s_rl_stat_count() && !rc; i++) {
        double v = fp4s_rl_stat_value(st, i);
        if (!isnan(v) && strncmp(fp4s_rl_stat_name(i), "t_", 2))
            rc = fp4s_capture_put_scalar(cap, r->step, fp4s_rl_stat_name(i), v);
    }
    if (rc) goto done;
    if (acts) {
        size_t rows = r->rec_tr.nseq * r->rec_tr.T, w = r->cfg.F > r->cfg.C ? (size_t)r->cfg.F : (size_t)r->cfg.C;
        if (!(bt = malloc(rows * w * sizeof *bt)) || !(br = malloc(rows * w * sizeof *br))) {
            rc = fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
            goto done;
        }
        for (int i = 0; i < r->lay.nsites && !rc; i++)
            if (site_selected(r, r->lay.sites[i].name))
                rc = r->lay.sites[i].kind == RL_S_HEAD ? put_head(r, cap, n) : put_site(r, cap, &r->lay.sites[i], bt, br);
    }
    if (!rc) rc = fp4s_capture_flush(cap);
done:
    free(lt);
    free(lr);
    free(seq);
    free(pos);
    free(tok);
    free(bt);
    free(br);
    return rc;
}

/* ---- one GRPO step --------------------------------------------------------------------------------------------- */
int fp4s_rl_step(fp4s_rl *r, fp4s_capture *cap, fp4s_rl_stats *st)
{
    if (!r) return fp4s_error_set(FP4S_EINVAL, "rl: step of a NULL handle");
    const fp4s_rl_opts *o = &r->o;
    fp4s_rl_stats s = {.step = r->step, .acc_rollout = NAN, .acc_trainer = NAN, .act_kurtosis = NAN,
                       .act_outlier_ratio = NAN, .err_top1 = NAN};
    size_t Tp = (size_t)r->task.prompt_len, R = (size_t)r->task.max_resp, B = r->B, G = (size_t)o->group;
    double t0 = rl_now(), p0[RL_T_NT], pr[RL_T_NT];
    prof_sum(r, p0);
    int rc;
    bool acts = cap && o->act_every && r->step % o->act_every == 0;
    /* 1. sync */
    aqn_stage(r, r->step);
    if ((rc = rl_lin_sync(&r->lin_ro, r->P, &r->sprof))) return rc;
    /* the weights of this sync are the step's in the capture, not the ones its updates leave */
    if (acts) memcpy(r->Psync, r->P, r->lay.total * sizeof *r->P);
    /* 2. held-out accuracy of both sides on the same weights */
    if (o->eval_every && r->step % o->eval_every == 0) {
        double te = rl_now();
        if ((rc = success_rate(r, &r->lin_ro, r->eval_prompts, (size_t)o->eval_prompts, true, 0, &s.acc_rollout)) ||
            (rc = success_rate(r, &r->lin_tr, r->eval_prompts, (size_t)o->eval_prompts, true, 0, &s.acc_trainer)))
            return rc;
        s.t_eval = rl_now() - te;
    }
    /* 3. rollout */
    double tr0 = rl_now();
    for (int i = 0; i < o->prompts; i++)
        rl_task_prompt(&r->task, o->seed, STREAM_PROMPT, (uint64_t)r->step * (uint64_t)o->prompts + (uint64_t)i,
                       r->prompts + (size_t)i * Tp);
    rl_gen_req q = {.cfg = &r->cfg, .lay = &r->lay, .lin = &r->lin_ro, .P = r->P, .task = &r->task, .nseq = B,
                    .prompts = r->prompts, .group = o->group, .greedy = false, .temperature = o->temperature,
                    .seed = o->seed, .stream = STREAM_SAMPLE + ((uint64_t)r->step << 8),
                    .shard = (size_t)o->shard, .rec = acts ? &r->rec_ro : NULL, .hf = acts ? r->hf_ro : NULL};
    prof_sum(r, pr);
    if ((rc = rl_generate(&q, &r->gen, r->workers, r->nworkers))) return rc;
    s.t_rollout = rl_now() - tr0;
    double pr1[RL_T_NT];
    prof_sum(r, pr1);
    s.t_gemm_rollout = pr1[RL_T_GEMM] - pr[RL_T_GEMM];
    /* 4. rewards and advantages */
    uint64_t ntok = 0;
    double rsum = 0, lsum = 0;
    for (size_t b = 0; b < B; b++) {
        r->reward[b] = rl_task_reward(&r->task, r->prompts + b / G * Tp, r->gen.resp + b * R, r->gen.len[b]);
        rsum += r->reward[b];
        lsum += r->gen.len[b];
        ntok += (uint64_t)r->gen.len[b];
        s.rollout_tokens += Tp + (uint64_t)r->gen.len[b] - 1;
    }
    for (size_t g = 0; g < (size_t)o->prompts; g++) {
        double mean = 0, var = 0;
        for (size_t i = 0; i < G; i++) mean += r->reward[g * G + i];
        mean /= (double)G;
        for (size_t i = 0; i < G; i++) var += (r->reward[g * G + i] - mean) * (r->reward[g * G + i] - mean);
        double sd = sqrt(var / (double)(G - 1));
        for (size_t i = 0; i < G; i++) r->adv[g * G + i] = (r->reward[g * G + i] - mean) / (sd + 1e-6);
    }
    s.reward = rsum / (double)B;
    s.resp_len = lsum / (double)B;
    /* 5. old log-probs (pass A) */
    double tt0 = rl_now();
    tr_src src = {r->prompts, r->gen.resp, r->gen.len, o->group};
    size_t mbs = (size_t)o->micro_batch, npa = (B + mbs - 1) / mbs;
    double *aux = calloc(npa, sizeof *aux);
    if (!aux) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
    struct passa_job pa = {.r = r, .src = src, .aux = aux, .record = acts};
    if ((rc = fp4s_parallel_dynamic(npa, 1, r->nworkers, passa_piece, &pa))) goto done;
    for (size_t p = 0; p < npa; p++) s.aux += aux[p] / (double)npa / (double)o->layers;
    if (o->eval_every && r->step % o->eval_every == 0 && (rc = outlier_stats(r, &src, &s))) goto done;
    s.train_tokens = 0;
    for (size_t b = 0; b < B; b++) s.train_tokens += Tp + (uint64_t)r->gen.len[b] - 1;
    /* mismatch statistics of the step's tokens */
    double ent = 0, flips = 0, mabs = 0, mmax = 0, k3 = 0, high = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < (size_t)r->gen.len[b]; t++) {
            double rho = (double)r->old_lp[b * R + t] - (double)r->gen.logp[b * R + t];
            ent += r->ent[b * R + t];
            flips += r->tr_amax[b * R + t] != r->gen.amax[b * R + t];
            mabs += fabs(rho);
            mmax = fmax(mmax, fabs(rho));
            k3 += exp(rho) - rho - 1;
            high += exp(fmin(rho, 20.0)) > o->is_cap;
        }
    s.entropy = ent / (double)ntok;
    s.flip_frac = flips / (double)ntok;
    s.mismatch = mabs / (double)ntok;
    s.max_mismatch = mmax;
    s.k3 = k3 / (double)ntok;
    s.is_frac_high = high / (double)ntok;
    /* 6. the updates */
    uint64_t nclip = 0, nupd = 0;
    double gsum = 0;
    for (int k = 0; k < o->minibatches; k++) {
        size_t sb = B * (size_t)k / (size_t)o->minibatches, se = B * (size_t)(k + 1) / (size_t)o->minibatches;
        size_t counted = 0, rows = 0;
        for (size_t b = sb; b < se; b++) {
            rows += Tp + (size_t)r->gen.len[b] - 1;
            for (size_t t = 0; t < (size_t)r->gen.len[b]; t++) {
                double w = exp(fmin(fmax((double)r->old_lp[b * R + t] - (double)r->gen.logp[b * R + t], -20.0), 20.0));
                counted += !(o->is_corr == FP4S_RL_IS_MIS && (w > o->is_cap || w < 1 / o->is_cap));
            }
        }
        size_t np = (se - sb + mbs - 1) / mbs;
        struct upd_job j = {.r = r, .src = src, .s_begin = sb, .s_end = se,
                            .norm = counted ? 1.0 / (double)counted : 0.0, .rows_mb = rows, .sft = 0,
                            .lin = &r->lin_tr};
        uint64_t nc;
        if ((rc = run_pieces(r, &j, np, &nc))) goto done;
        nclip += nc;
        nupd += counted;
        s.train_tokens += rows;
        double gn = 0;
        if ((rc = apply_update(r, o->lr, o->beta1, o->beta2, &r->lin_tr, &gn))) goto done;
        gsum += gn;
    }
    s.grad_norm = gsum / o->minibatches;
    s.aqn_sigma = r->aqn_sigma;
    s.clip_frac = nupd ? (double)nclip / (double)nupd : 0.0;
    s.t_train = rl_now() - tt0;
    double p1[RL_T_NT];
    prof_sum(r, p1);
    s.t_gemm = p1[RL_T_GEMM] - p0[RL_T_GEMM];
    s.t_quant = p1[RL_T_QUANT] - p0[RL_T_QUANT];
    s.t_fwd = p1[RL_T_FWD] - p0[RL_T_FWD];
    s.t_bwd = p1[RL_T_BWD] - p0[RL_T_BWD];
    s.t_total = rl_now() - t0; /* the capture's writing comes after */
    if (cap && (rc = write_step(r, cap, acts, &s))) goto done;
    r->step++;
    if (st) *st = s;
done:
    free(aux);
    return rc;
}
