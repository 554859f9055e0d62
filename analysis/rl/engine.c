/* The rollout engine: autoregressive sampling with a KV cache, with the
 * engine's own numerics (its rl_lin). A batch of sequences is split into
 * shards of q->shard sequences; each shard is one engine batch (a prefill of
 * all its prompts, then one decode row per unfinished sequence per position),
 * run on one worker. Shards write only their own sequences' outputs, so the
 * result does not depend on which worker ran which shard.
 *
 * Sampling: p = softmax(logits / temperature) in double; the token is the
 * first whose cumulative probability exceeds u = rl_u01(rl_hash(seed, stream,
 * b, pos)) (greedy: the argmax, ties to the lower token); its log-prob is
 * recorded. A response ends with EOS or at the task's longest response. */
#include "rl_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rl_engine_ws {
    size_t S, rows;              /* sequences and rows the buffers hold */
    int L;
    float *kc, *vc;              /* [L][S][T][C] */
    float *x, *h, *qkv, *atty, *tmp, *prob, *gate, *logits, *hsel;
    int32_t *topi, *eoff, *erow, *eslot, *tok, *seq, *pos, *lrow;
    float *xe, *h13, *hg, *ey;
};

static void eng_free(rl_engine_ws *e)
{
    if (!e) return;
    void *f[] = {e->kc, e->vc, e->x, e->h, e->qkv, e->atty, e->tmp, e->prob, e->gate, e->logits,
                 e->hsel, e->topi, e->eoff, e->erow, e->eslot, e->tok, e->seq, e->pos, e->lrow,
                 e->xe, e->h13, e->hg, e->ey};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(e);
}

void rl_worker_free(rl_worker *w)
{
    if (!w) return;
    rl_scratch_free(&w->ws);
    rl_acts_free(&w->acts);
    eng_free(w->eng);
    w->eng = NULL;
}

static int eng_ensure(rl_worker *w, const rl_cfg *c, size_t S, size_t rows)
{
    rl_engine_ws *e = w->eng;
    if (e && e->S >= S && e->rows >= rows && e->L == c->L) return 0;
    eng_free(e);
    w->eng = e = calloc(1, sizeof *e);
    if (!e) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the engine");
    size_t L = (size_t)c->L, T = (size_t)c->T, C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K;
    size_t F = (size_t)c->F, V = (size_t)c->V, RK = rows * K;
    e->S = S;
    e->rows = rows;
    e->L = c->L;
    bool ok = (e->kc = malloc(L * S * T * C * sizeof *e->kc)) && (e->vc = malloc(L * S * T * C * sizeof *e->vc)) &&
              (e->x = malloc(rows * C * sizeof(float))) && (e->h = malloc(rows * C * sizeof(float))) &&
              (e->qkv = malloc(rows * 3 * C * sizeof(float))) && (e->atty = malloc(rows * C * sizeof(float))) &&
              (e->tmp = malloc(rows * (C > E ? C : E) * sizeof(float))) &&
              (e->prob = malloc(rows * E * sizeof(float))) && (e->gate = malloc(RK * sizeof(float))) &&
              (e->logits = malloc(rows * V * sizeof(float))) && (e->hsel = malloc(rows * C * sizeof(float))) &&
              (e->topi = malloc(RK * sizeof(int32_t))) && (e->eoff = malloc((E + 1) * sizeof(int32_t))) &&
              (e->erow = malloc(RK * sizeof(int32_t))) && (e->eslot = malloc(RK * sizeof(int32_t))) &&
              (e->tok = malloc(rows * sizeof(int32_t))) && (e->seq = malloc(rows * sizeof(int32_t))) &&
              (e->pos = malloc(rows * sizeof(int32_t))) && (e->lrow = malloc(rows * sizeof(int32_t))) &&
              (e->xe = malloc(RK * C * sizeof(float))) && (e->h13 = malloc(RK * 2 * F * sizeof(float))) &&
              (e->hg = malloc(RK * F * sizeof(float))) && (e->ey = malloc(RK * C * sizeof(float)));
    if (!ok) {
        eng_free(e);
        w->eng = NULL;
        return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the engine (%zu rows)", rows);
    }
    return 0;
}

/* Forward of n rows (e->tok, e->seq local to the shard, e->pos): writes K/V to
 * the cache, and the logits of the nl rows e->lrow into e->logits. b0 is the
 * index of the shard's first sequence (for the record). */
static int eng_rows(rl_engine_ws *e, const rl_gen_req *q, rl_scratch *ws, size_t n, size_t b0, size_t nl)
{
    const rl_cfg *c = q->cfg;
    const rl_layout *lay = q->lay;
    const rl_lin *L = q->lin;
    const float *P = q->P;
    size_t C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K, F = (size_t)c->F, T = (size_t)c->T;
    size_t H = (size_t)c->H, hd = C / H, V = (size_t)c->V, S = e->S;
    rl_caprec *rec = q->rec;
    int rc;
    for (size_t r = 0; r < n; r++) {
        const float *te = P + lay->wte + (size_t)e->tok[r] * C, *pe = P + lay->wpe + (size_t)e->pos[r] * C;
        for (size_t i = 0; i < C; i++) e->x[r * C + i] = te[i] + pe[i];
    }
#define REC_ROW(r) (rec && b0 + (size_t)e->seq[r] < rec->nseq)
#define REC_IDX(r) ((b0 + (size_t)e->seq[r]) * T + (size_t)e->pos[r])
    for (int l = 0; l < c->L; l++) {
        size_t lrec = rec ? (size_t)l * rec->nseq * T : 0;
        rl_rmsnorm_fwd(e->x, P + lay->l[l].ln1, n, C, e->h, NULL);
        for (size_t r = 0; r < n; r++)
            if (REC_ROW(r)) memcpy(rec->ln1 + (lrec + REC_IDX(r)) * C, e->h + r * C, C * sizeof(float));
        if ((rc = rl_lin_fwd(L, rl_site_qkv(c, l), e->h, C, n, e->qkv, 3 * C, ws))) return rc;
        float *kc = e->kc + (size_t)l * S * T * C, *vc = e->vc + (size_t)l * S * T * C;
        for (size_t r = 0; r < n; r++) {
            size_t at = ((size_t)e->seq[r] * T + (size_t)e->pos[r]) * C;
            memcpy(kc + at, e->qkv + r * 3 * C + C, C * sizeof(float));
            memcpy(vc + at, e->qkv + r * 3 * C + 2 * C, C * sizeof(float));
        }
        for (size_t r = 0; r < n; r++) {
            size_t base = (size_t)e->seq[r] * T * C;
            rl_attend(e->qkv + r * 3 * C, kc + base, vc + base, C, (size_t)e->pos[r] + 1, (int)H, hd, T,
                      NULL, e->atty + r * C);
        }
        for (size_t r = 0; r < n; r++)
            if (REC_ROW(r)) memcpy(rec->atty + (lrec + REC_IDX(r)) * C, e->atty + r * C, C * sizeof(float));
        if ((rc = rl_lin_fwd(L, rl_site_o(c, l), e->atty, C, n, e->tmp, C, ws))) return rc;
        for (size_t i = 0; i < n * C; i++) e->x[i] += e->tmp[i];
        rl_rmsnorm_fwd(e->x, P + lay->l[l].ln2, n, C, e->h, NULL);
        for (size_t r = 0; r < n; r++)
            if (REC_ROW(r)) memcpy(rec->ln2 + (lrec + REC_IDX(r)) * C, e->h + r * C, C * sizeof(float));
        if ((rc = rl_lin_fwd(L, rl_site_router(c, l), e->h, C, n, e->tmp, E, ws))) return rc;
        rl_route(e->tmp, n, (int)E, (int)K, e->prob, e->topi, e->gate);
        rl_group_experts(e->topi, n, (int)E, (int)K, e->eoff, e->erow, e->eslot);
        for (size_t sl = 0; sl < n * K; sl++)
            memcpy(e->xe + sl * C, e->h + (size_t)e->erow[sl] * C, C * sizeof(float));
        for (size_t x = 0; x < E; x++) {
            size_t s0 = (size_t)e->eoff[x], ne = (size_t)(e->eoff[x + 1] - e->eoff[x]);
            if ((rc = rl_lin_fwd(L, rl_site_w13(c, l, (int)x), e->xe + s0 * C, C, ne, e->h13 + s0 * 2 * F,
                                 2 * F, ws))) return rc;
            rl_swiglu_fwd(e->h13 + s0 * 2 * F, ne, F, e->hg + s0 * F);
            if ((rc = rl_lin_fwd(L, rl_site_w2(c, l, (int)x), e->hg + s0 * F, F, ne, e->ey + s0 * C, C, ws)))
                return rc;
        }
        for (size_t r = 0; r < n; r++) {
            for (size_t j = 0; j < K; j++) {
                float g = e->gate[r * K + j];
                const float *y = e->ey + (size_t)e->eslot[r * K + j] * C;
                for (size_t i = 0; i < C; i++) e->x[r * C + i] += g * y[i];
            }
            if (REC_ROW(r)) {
                size_t at = lrec + REC_IDX(r);
                memcpy(rec->topi + at * K, e->topi + r * K, K * sizeof(int32_t));
                for (size_t j = 0; j < K; j++)
                    memcpy(rec->hg + (at * K + j) * F, e->hg + (size_t)e->eslot[r * K + j] * F, F * sizeof(float));
            }
        }
    }
    for (size_t i = 0; i < nl; i++) memcpy(e->tmp + i * C, e->x + (size_t)e->lrow[i] * C, C * sizeof(float));
    rl_rmsnorm_fwd(e->tmp, P + lay->lnf, nl, C, e->hsel, NULL);
    if (q->hf) /* row i predicts response token pos - (Tp - 1) */
        for (size_t i = 0; i < nl; i++) {
            size_t r = (size_t)e->lrow[i], j = (size_t)e->pos[r] + 1 - (size_t)q->task->prompt_len;
            memcpy(q->hf + ((b0 + (size_t)e->seq[r]) * (size_t)q->task->max_resp + j) * C, e->hsel + i * C,
                   C * sizeof(float));
        }
#undef REC_ROW
#undef REC_IDX
    (void)V;
    return rl_lin_fwd(L, rl_site_head(c), e->hsel, C, nl, e->logits, (size_t)c->V, ws);
}

/* Draw from logits [V]: the token, its log-prob and the argmax. */
static int32_t sample(const float *lg, int V, double temp, bool greedy, double u, float *logp, int32_t *amax)
{
    int32_t am = 0;
    for (int v = 1; v < V; v++)
        if (lg[v] > lg[am]) am = v;
    *amax = am;
    double z[RL_VOCAB] = {0}, mx = (double)lg[am] / temp, s = 0;
    for (int v = 0; v < V; v++) s += exp((z[v] = (double)lg[v] / temp) - mx);
    double lse = mx + log(s);
    int32_t tok = am;
    if (!greedy) {
        double cum = 0; /* u beyond the rounded total keeps the argmax */
        for (int v = 0; v < V; v++) {
            cum += exp(z[v] - lse);
            if (u < cum) {
                tok = v;
                break;
            }
        }
    }
    *logp = (float)(z[tok] - lse);
    return tok;
}

struct gen_job {
    const rl_gen_req *q;
    rl_gen_out *o;
    rl_worker *workers;
};

static int gen_shard(void *arg, size_t begin, size_t end, int worker)
{
    struct gen_job *j = arg;
    const rl_gen_req *q = j->q;
    const rl_cfg *c = q->cfg;
    size_t Tp = (size_t)q->task->prompt_len, R = (size_t)q->task->max_resp, V = (size_t)c->V;
    rl_worker *w = &j->workers[worker];
    for (size_t sh = begin; sh < end; sh++) {
        size_t b0 = sh * q->shard, ns = q->nseq - b0 < q->shard ? q->nseq - b0 : q->shard;
        int rc = eng_ensure(w, c, q->shard, q->shard * Tp);
        if (rc) return rc;
        rl_engine_ws *e = w->eng;
        size_t n = 0;
        for (size_t s = 0; s < ns; s++) {
            const int32_t *pr = q->prompts + (b0 + s) / (size_t)q->group * Tp;
            for (size_t p = 0; p < Tp; p++, n++) {
                e->tok[n] = pr[p];
                e->seq[n] = (int32_t)s;
                e->pos[n] = (int32_t)p;
            }
            e->lrow[s] = (int32_t)(s * Tp + Tp - 1);
        }
        if ((rc = eng_rows(e, q, &w->ws, n, b0, ns))) return rc;
        int32_t active[RL_MAX_T * 64 + 1], *act = NULL;
        int32_t *alist = ns <= sizeof active / sizeof active[0] ? active : (act = malloc(ns * sizeof *act));
        if (!alist) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
        size_t na = ns;
        for (size_t s = 0; s < ns; s++) alist[s] = (int32_t)s;
        for (size_t t = 0; t < R && na; t++) {
            size_t keep = 0;
            for (size_t i = 0; i < na; i++) {
                size_t s = (size_t)alist[i], b = b0 + s;
                double u = rl_u01(rl_hash(q->seed, q->stream, b, t));
                int32_t tok = sample(e->logits + i * V, (int)V, q->temperature, q->greedy, u,
                                     &j->o->logp[b * R + t], &j->o->amax[b * R + t]);
                j->o->resp[b * R + t] = tok;
                if (tok == RL_TOK_EOS || t + 1 == R) {
                    j->o->len[b] = (int32_t)(t + 1);
                    if (q->rec && b < q->rec->nseq) q->rec->len[b] = (int32_t)(Tp + t);
                    continue;
                }
                alist[keep] = (int32_t)s;
                e->tok[keep] = tok;
                e->seq[keep] = (int32_t)s;
                e->pos[keep] = (int32_t)(Tp + t);
                e->lrow[keep] = (int32_t)keep;
                keep++;
            }
            na = keep;
            if (na && (rc = eng_rows(e, q, &w->ws, na, b0, na))) {
                free(act);
                return rc;
            }
        }
        free(act);
    }
    return 0;
}

int rl_generate(const rl_gen_req *q, rl_gen_out *o, rl_worker *workers, int nworkers)
{
    if (!q->nseq) return 0;
    if (q->shard < 1) return fp4s_error_set(FP4S_EINVAL, "rl: shard of 0 sequences");
    struct gen_job j = {q, o, workers};
    size_t nsh = (q->nseq + q->shard - 1) / q->shard;
    return fp4s_parallel_dynamic(nsh, 1, nworkers, gen_shard, &j);
}

int rl_caprec_alloc(rl_caprec *r, const rl_cfg *c, size_t nseq)
{
    rl_caprec_free(r);
    size_t L = (size_t)c->L, T = (size_t)c->T, C = (size_t)c->C, K = (size_t)c->K, F = (size_t)c->F;
    *r = (rl_caprec){.nseq = nseq, .T = T, .L = c->L, .K = c->K, .C = C, .F = F};
    size_t rows = nseq * T;
    r->ln1 = calloc(L * rows * C + 1, sizeof(float));
    r->atty = calloc(L * rows * C + 1, sizeof(float));
    r->ln2 = calloc(L * rows * C + 1, sizeof(float));
    r->topi = calloc(L * rows * K + 1, sizeof(int32_t));
    r->hg = calloc(L * rows * K * F + 1, sizeof(float));
    r->len = calloc(nseq + 1, sizeof(int32_t));
    if (!r->ln1 || !r->atty || !r->ln2 || !r->topi || !r->hg || !r->len) {
        rl_caprec_free(r);
        return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the capture record");
    }
    return 0;
}

void rl_caprec_free(rl_caprec *r)
{
    if (!r) return;
    free(r->ln1);
    free(r->atty);
    free(r->ln2);
    free(r->topi);
    free(r->hg);
    free(r->len);
    *r = (rl_caprec){0};
}
