/* The MoE transformer's forward and backward passes, written once over
 * RL_REAL (see rl_internal.h for the model). The library compiles this file
 * in float; tests/rl/model_f64.c compiles it again with RL_DOUBLE defined, in
 * double, for the finite-difference checks of every backward. */
#ifndef RL_DOUBLE
#include "rl_internal.h"
#define RL_REAL float
#define RL_T(n) n
#define RL_EXP expf
#define RL_SQRT sqrtf
#else
#define RL_EXP exp
#define RL_SQRT sqrt
#endif

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef RL_REAL real;
typedef RL_T(rl_acts) acts_t;
typedef RL_T(rl_ctx) ctx_t;

/* ---- linear layers ---------------------------------------------------------------- */
#ifdef RL_DOUBLE
static int lin_f(const ctx_t *x, int site, const real *X, size_t ldx, size_t M, real *Y, size_t ldy)
{
    const rl_site *s = &x->lay->sites[site];
    if (M)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)s->N, (int)s->K, 1.0, X,
                    (int)ldx, x->P + s->off, (int)s->K, 0.0, Y, (int)ldy);
    return 0;
}

static int lin_b(const ctx_t *x, int site, const real *X, size_t ldx, size_t M, const real *dY,
                 size_t ldy, real *dX, size_t lddx, bool acc, real *G)
{
    const rl_site *s = &x->lay->sites[site];
    if (!M) return 0;
    if (dX)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)s->K, (int)s->N, 1.0, dY,
                    (int)ldy, x->P + s->off, (int)s->K, acc ? 1.0 : 0.0, dX, (int)lddx);
    if (G)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s->N, (int)s->K, (int)M, 1.0, dY,
                    (int)ldy, X, (int)ldx, 1.0, G + s->off, (int)s->K);
    return 0;
}
#else
static int lin_f(const ctx_t *x, int site, const real *X, size_t ldx, size_t M, real *Y, size_t ldy)
{
    if (!M) return 0;
    if (x->lin) return rl_lin_fwd(x->lin, site, X, ldx, M, Y, ldy, x->ws);
    const rl_site *s = &x->lay->sites[site];
    return rl_sgemm_nt(M, s->N, s->K, X, ldx, x->P + s->off, s->K, 0.0f, Y, ldy, x->ws ? &x->ws->prof : NULL);
}

static int lin_b(const ctx_t *x, int site, const real *X, size_t ldx, size_t M, const real *dY,
                 size_t ldy, real *dX, size_t lddx, bool acc, real *G)
{
    if (!M) return 0;
    const rl_site *s = &x->lay->sites[site];
    if (x->lin)
        return rl_lin_bwd(x->lin, site, X, ldx, M, dY, ldy, dX, lddx, acc, G ? G + s->off : NULL, x->ws);
    rl_prof *p = x->ws ? &x->ws->prof : NULL;
    int rc = 0;
    if (dX) rc = rl_sgemm_nn(M, s->K, s->N, dY, ldy, x->P + s->off, s->K, acc ? 1.0f : 0.0f, dX, lddx, p);
    if (G && !rc) rc = rl_sgemm_tn(s->N, s->K, M, dY, ldy, X, ldx, 1.0f, G + s->off, s->K, p);
    return rc;
}
#endif

/* ---- activations ------------------------------------------------------------------ */
static void *zalloc(size_t n, size_t size) { return calloc(n > 0 ? n : 1, size); }
#define ALLOC(ptr, n) do { if (!((ptr) = zalloc((n), sizeof *(ptr)))) goto oom; } while (0)

void RL_T(rl_acts_free)(acts_t *a)
{
    if (!a) return;
    void **f[] = {(void **)&a->pos, (void **)&a->x, (void **)&a->xmid, (void **)&a->ln1,
                  (void **)&a->rs1, (void **)&a->qkv, (void **)&a->att, (void **)&a->atty,
                  (void **)&a->ln2, (void **)&a->rs2, (void **)&a->rprob, (void **)&a->topi,
                  (void **)&a->gate, (void **)&a->eoff, (void **)&a->erow, (void **)&a->eslot,
                  (void **)&a->xe, (void **)&a->h13, (void **)&a->hg, (void **)&a->ey,
                  (void **)&a->lnf, (void **)&a->rsf, (void **)&a->logits, (void **)&a->lse,
                  (void **)&a->f_e, (void **)&a->dx, (void **)&a->dxm, (void **)&a->dln,
                  (void **)&a->dqkv, (void **)&a->datty, (void **)&a->dlogits, (void **)&a->dprob,
                  (void **)&a->dgate, (void **)&a->dxe, (void **)&a->dh13, (void **)&a->dhg,
                  (void **)&a->dey, (void **)&a->tmp};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        free(*f[i]);
        *f[i] = NULL;
    }
    a->capM = 0;
    a->has_bwd = false;
}

static int alloc_bwd(acts_t *a, const rl_cfg *c, size_t M)
{
    size_t C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K, F = (size_t)c->F, V = (size_t)c->V;
    size_t MK = M * K;
    ALLOC(a->dx, M * C);
    ALLOC(a->dxm, M * C);
    ALLOC(a->dln, M * C);
    ALLOC(a->dqkv, M * 3 * C);
    ALLOC(a->datty, M * C);
    ALLOC(a->dlogits, M * V);
    ALLOC(a->dprob, M * E);
    ALLOC(a->dgate, M * K);
    ALLOC(a->dxe, MK * C);
    ALLOC(a->dh13, MK * 2 * F);
    ALLOC(a->dhg, MK * F);
    ALLOC(a->dey, MK * C);
    a->has_bwd = true;
    return 0;
oom:
    return FP4S_ENOMEM;
}

int RL_T(rl_acts_alloc)(acts_t *a, const rl_cfg *c, size_t M, bool backward)
{
    if (a->capM >= M && (a->has_bwd || !backward)) return 0;
    RL_T(rl_acts_free)(a);
    size_t L = (size_t)c->L, C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K, F = (size_t)c->F;
    size_t H = (size_t)c->H, T = (size_t)c->T, V = (size_t)c->V, MK = M * K;
    ALLOC(a->pos, M);
    ALLOC(a->x, (L + 1) * M * C);
    ALLOC(a->xmid, L * M * C);
    ALLOC(a->ln1, L * M * C);
    ALLOC(a->rs1, L * M);
    ALLOC(a->qkv, L * M * 3 * C);
    ALLOC(a->att, L * M * H * T);
    ALLOC(a->atty, L * M * C);
    ALLOC(a->ln2, L * M * C);
    ALLOC(a->rs2, L * M);
    ALLOC(a->rprob, L * M * E);
    ALLOC(a->topi, L * M * K);
    ALLOC(a->gate, L * M * K);
    ALLOC(a->eoff, L * (E + 1));
    ALLOC(a->erow, L * MK);
    ALLOC(a->eslot, L * MK);
    ALLOC(a->xe, L * MK * C);
    ALLOC(a->h13, L * MK * 2 * F);
    ALLOC(a->hg, L * MK * F);
    ALLOC(a->ey, L * MK * C);
    ALLOC(a->lnf, M * C);
    ALLOC(a->rsf, M);
    ALLOC(a->logits, M * V);
    ALLOC(a->lse, M);
    ALLOC(a->f_e, L * E);
    if (backward && alloc_bwd(a, c, M)) goto oom;
    ALLOC(a->tmp, M * 3 * C);
    a->capM = M;
    return 0;
oom:
    RL_T(rl_acts_free)(a);
    return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the activations of %zu tokens", M);
}

/* ---- elementwise pieces ---------------------------------------------------------------- */
void RL_T(rl_rmsnorm_fwd)(const real *x, const real *w, size_t M, size_t C, real *out, real *rstd)
{
    for (size_t m = 0; m < M; m++) {
        const real *xm = x + m * C;
        real ss = 0;
        for (size_t c = 0; c < C; c++) ss += xm[c] * xm[c];
        real r = (real)1 / RL_SQRT(ss / (real)C + (real)RL_RMS_EPS);
        if (rstd) rstd[m] = r;
        for (size_t c = 0; c < C; c++) out[m * C + c] = xm[c] * r * w[c];
    }
}

/* dx (+)= d rmsnorm(x) w; dw += sum_m dy x rstd */
static void rmsnorm_bwd(const real *x, const real *w, const real *rstd, const real *dy, size_t M,
                        size_t C, real *dx, bool acc, real *dw)
{
    for (size_t m = 0; m < M; m++) {
        const real *xm = x + m * C, *dym = dy + m * C;
        real r = rstd[m], dot = 0;
        for (size_t c = 0; c < C; c++) dot += dym[c] * w[c] * xm[c];
        real k = r * r * r * dot / (real)C;
        for (size_t c = 0; c < C; c++) {
            real g = r * dym[c] * w[c] - k * xm[c];
            dx[m * C + c] = acc ? dx[m * C + c] + g : g;
            dw[c] += dym[c] * xm[c] * r;
        }
    }
}

void RL_T(rl_route)(const real *logits, size_t M, int E, int K, real *prob, int32_t *topi, real *gate)
{
    for (size_t m = 0; m < M; m++) {
        const real *l = logits + m * (size_t)E;
        real *p = prob + m * (size_t)E;
        real mx = l[0];
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        real s = 0;
        for (int e = 0; e < E; e++) s += (p[e] = RL_EXP(l[e] - mx));
        for (int e = 0; e < E; e++) p[e] /= s;
        int32_t *ti = topi + m * (size_t)K;
        real S = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool used = false;
                for (int i = 0; i < j; i++) used |= ti[i] == e;
                if (!used && (best < 0 || p[e] > p[best])) best = e;
            }
            ti[j] = best;
            S += p[best];
        }
        for (int j = 0; j < K; j++) gate[m * (size_t)K + j] = p[ti[j]] / S;
    }
}

void RL_T(rl_swiglu_fwd)(const real *h, size_t n, size_t F, real *out)
{
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; f < F; f++) {
            real a = h[i * 2 * F + f], b = h[i * 2 * F + F + f];
            out[i * F + f] = a / ((real)1 + RL_EXP(-a)) * b;
        }
}

void RL_T(rl_attend)(const real *q, const real *k, const real *v, size_t ld, size_t npos, int H,
                     size_t hd, size_t T, real *p, real *y)
{
    real scale = (real)1 / RL_SQRT((real)hd);
    real sc[RL_MAX_T];
    for (int h = 0; h < H; h++) {
        const real *qh = q + (size_t)h * hd;
        real mx = 0;
        for (size_t j = 0; j < npos; j++) {
            const real *kj = k + j * ld + (size_t)h * hd;
            real d = 0;
            for (size_t i = 0; i < hd; i++) d += qh[i] * kj[i];
            sc[j] = d * scale;
            if (j == 0 || sc[j] > mx) mx = sc[j];
        }
        real s = 0;
        for (size_t j = 0; j < npos; j++) s += (sc[j] = RL_EXP(sc[j] - mx));
        for (size_t j = 0; j < npos; j++) sc[j] /= s;
        real *yh = y + (size_t)h * hd;
        for (size_t i = 0; i < hd; i++) yh[i] = 0;
        for (size_t j = 0; j < npos; j++) {
            const real *vj = v + j * ld + (size_t)h * hd;
            for (size_t i = 0; i < hd; i++) yh[i] += sc[j] * vj[i];
        }
        if (p) {
            for (size_t j = 0; j < npos; j++) p[(size_t)h * T + j] = sc[j];
            for (size_t j = npos; j < T; j++) p[(size_t)h * T + j] = 0;
        }
    }
}

void RL_T(rl_group_experts)(const int32_t *topi, size_t M, int E, int K, int32_t *eoff, int32_t *erow,
                            int32_t *eslot)
{
    size_t MK = M * (size_t)K;
    for (int e = 0; e <= E; e++) eoff[e] = 0;
    for (size_t i = 0; i < MK; i++) eoff[topi[i] + 1]++;
    for (int e = 0; e < E; e++) eoff[e + 1] += eoff[e];
    int32_t fill[RL_MAX_EXPERTS];
    for (int e = 0; e < E; e++) fill[e] = eoff[e];
    for (size_t i = 0; i < MK; i++) {
        int32_t sl = fill[topi[i]]++;
        erow[sl] = (int32_t)(i / (size_t)K);
        eslot[i] = sl;
    }
}

/* The arrays of layer l inside the activations of M rows. */
typedef struct lview {
    real *xin, *xout, *ln1, *qkv, *att, *atty, *xmid, *ln2, *prob, *gate, *xe, *h13, *hg, *ey;
    int32_t *topi, *eoff, *erow, *eslot;
} lview;

static lview layer_view(const acts_t *a, const rl_cfg *c, int l, size_t M)
{
    size_t L = (size_t)l, C = (size_t)c->C, E = (size_t)c->E, F = (size_t)c->F, MK = M * (size_t)c->K;
    return (lview){
        .xin = a->x + L * M * C, .xout = a->x + (L + 1) * M * C, .ln1 = a->ln1 + L * M * C,
        .qkv = a->qkv + L * M * 3 * C, .att = a->att + L * M * (size_t)c->H * (size_t)c->T,
        .atty = a->atty + L * M * C, .xmid = a->xmid + L * M * C, .ln2 = a->ln2 + L * M * C,
        .prob = a->rprob + L * M * E, .gate = a->gate + L * MK, .xe = a->xe + L * MK * C,
        .h13 = a->h13 + L * MK * 2 * F, .hg = a->hg + L * MK * F, .ey = a->ey + L * MK * C,
        .topi = a->topi + L * MK, .eoff = a->eoff + L * (E + 1), .erow = a->erow + L * MK,
        .eslot = a->eslot + L * MK,
    };
}

/* ---- forward ----------------------------------------------------------------------------- */
int RL_T(rl_forward)(const ctx_t *x, const rl_batch *b, acts_t *a, real *logp, real *ent, int32_t *amax)
{
    const rl_cfg *c = x->cfg;
    const rl_layout *lay = x->lay;
    const real *P = x->P;
    size_t M = b->M, C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K, F = (size_t)c->F;
    size_t H = (size_t)c->H, T = (size_t)c->T, V = (size_t)c->V, hd = C / H, MK = M * K;
    for (size_t s = 0; s < b->nseq; s++)
        if (b->off[s + 1] - b->off[s] > T)
            return fp4s_error_set(FP4S_EINVAL, "rl: sequence %zu has %zu tokens, more than the model's %zu",
                                  s, b->off[s + 1] - b->off[s], T);
    int rc = RL_T(rl_acts_alloc)(a, c, M, false);
    if (rc) return rc;
    for (size_t s = 0; s < b->nseq; s++)
        for (size_t m = b->off[s]; m < b->off[s + 1]; m++) a->pos[m] = (int32_t)(m - b->off[s]);
    for (size_t m = 0; m < M; m++) {
        const real *te = P + lay->wte + (size_t)b->tok[m] * C, *pe = P + lay->wpe + (size_t)a->pos[m] * C;
        for (size_t i = 0; i < C; i++) a->x[m * C + i] = te[i] + pe[i];
    }
    a->aux = 0;
    for (int l = 0; l < c->L; l++) {
        const lview lv = layer_view(a, c, l, M);
        RL_T(rl_rmsnorm_fwd)(lv.xin, P + lay->l[l].ln1, M, C, lv.ln1, a->rs1 + (size_t)l * M);
        if ((rc = lin_f(x, rl_site_qkv(c, l), lv.ln1, C, M, lv.qkv, 3 * C))) return rc;
        for (size_t s = 0; s < b->nseq; s++) {
            const real *base = lv.qkv + b->off[s] * 3 * C;
            for (size_t m = b->off[s]; m < b->off[s + 1]; m++)
                RL_T(rl_attend)(lv.qkv + m * 3 * C, base + C, base + 2 * C, 3 * C, (size_t)a->pos[m] + 1,
                                (int)H, hd, T, lv.att + m * H * T, lv.atty + m * C);
        }
        if ((rc = lin_f(x, rl_site_o(c, l), lv.atty, C, M, a->tmp, C))) return rc;
        for (size_t i = 0; i < M * C; i++) lv.xmid[i] = lv.xin[i] + a->tmp[i];
        RL_T(rl_rmsnorm_fwd)(lv.xmid, P + lay->l[l].ln2, M, C, lv.ln2, a->rs2 + (size_t)l * M);
        if ((rc = lin_f(x, rl_site_router(c, l), lv.ln2, C, M, a->tmp, E))) return rc;
        RL_T(rl_route)(a->tmp, M, (int)E, (int)K, lv.prob, lv.topi, lv.gate);
        RL_T(rl_group_experts)(lv.topi, M, (int)E, (int)K, lv.eoff, lv.erow, lv.eslot);
        double aux = 0;
        for (size_t e = 0; e < E; e++) {
            double pe = 0;
            for (size_t m = 0; m < M; m++) pe += lv.prob[m * E + e];
            double fe = M ? (double)(lv.eoff[e + 1] - lv.eoff[e]) / (double)MK : 0.0;
            a->f_e[(size_t)l * E + e] = fe;
            aux += fe * (M ? pe / (double)M : 0.0);
        }
        a->aux += (double)E * aux;
        for (size_t sl = 0; sl < MK; sl++) memcpy(lv.xe + sl * C, lv.ln2 + (size_t)lv.erow[sl] * C, C * sizeof *lv.xe);
        for (size_t e = 0; e < E; e++) {
            size_t s0 = (size_t)lv.eoff[e], n = (size_t)(lv.eoff[e + 1] - lv.eoff[e]);
            if ((rc = lin_f(x, rl_site_w13(c, l, (int)e), lv.xe + s0 * C, C, n, lv.h13 + s0 * 2 * F, 2 * F))) return rc;
            RL_T(rl_swiglu_fwd)(lv.h13 + s0 * 2 * F, n, F, lv.hg + s0 * F);
            if ((rc = lin_f(x, rl_site_w2(c, l, (int)e), lv.hg + s0 * F, F, n, lv.ey + s0 * C, C))) return rc;
        }
        for (size_t m = 0; m < M; m++) {
            for (size_t i = 0; i < C; i++) lv.xout[m * C + i] = lv.xmid[m * C + i];
            for (size_t j = 0; j < K; j++) {
                real g = lv.gate[m * K + j];
                const real *y = lv.ey + (size_t)lv.eslot[m * K + j] * C;
                for (size_t i = 0; i < C; i++) lv.xout[m * C + i] += g * y[i];
            }
        }
    }
    RL_T(rl_rmsnorm_fwd)(a->x + (size_t)c->L * M * C, P + lay->lnf, M, C, a->lnf, a->rsf);
    if ((rc = lin_f(x, rl_site_head(c), a->lnf, C, M, a->logits, V))) return rc;
    for (size_t m = 0; m < M; m++) {
        const real *lg = a->logits + m * V;
        size_t am = 0;
        for (size_t v = 1; v < V; v++) if (lg[v] > lg[am]) am = v;
        double mx = lg[am], s = 0, sl = 0;
        for (size_t v = 0; v < V; v++) {
            double e = exp((double)lg[v] - mx);
            s += e;
            sl += e * ((double)lg[v] - mx);
        }
        a->lse[m] = mx + log(s);
        if (ent) ent[m] = (real)(log(s) - sl / s);
        if (amax) amax[m] = (int32_t)am;
        if (logp) logp[m] = b->tgt[m] >= 0 ? (real)((double)lg[b->tgt[m]] - a->lse[m]) : (real)0;
    }
    return 0;
}

/* ---- backward ---------------------------------------------------------------------------- */
int RL_T(rl_backward)(const ctx_t *x, const rl_batch *b, acts_t *a, const real *cw, double aux_scale, real *G)
{
    const rl_cfg *c = x->cfg;
    const rl_layout *lay = x->lay;
    const real *P = x->P;
    size_t M = b->M, C = (size_t)c->C, E = (size_t)c->E, K = (size_t)c->K, F = (size_t)c->F;
    size_t H = (size_t)c->H, T = (size_t)c->T, V = (size_t)c->V, hd = C / H, MK = M * K;
    if (a->capM < M) return fp4s_error_set(FP4S_EINTERNAL, "rl: backward before forward");
    int rc;
    if (!a->has_bwd && alloc_bwd(a, c, a->capM))
        return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for the gradients of %zu tokens", M);
    /* logits */
    for (size_t m = 0; m < M; m++) {
        real *dl = a->dlogits + m * V;
        int32_t t = b->tgt[m];
        if (t < 0 || cw[m] == 0) {
            for (size_t v = 0; v < V; v++) dl[v] = 0;
            continue;
        }
        const real *lg = a->logits + m * V;
        for (size_t v = 0; v < V; v++) {
            real p = (real)exp((double)lg[v] - a->lse[m]);
            dl[v] = cw[m] * (((int32_t)v == t ? (real)1 : (real)0) - p);
        }
    }
    if ((rc = lin_b(x, rl_site_head(c), a->lnf, C, M, a->dlogits, V, a->dln, C, false, G))) return rc;
    rmsnorm_bwd(a->x + (size_t)c->L * M * C, P + lay->lnf, a->rsf, a->dln, M, C, a->dx, false, G + lay->lnf);

    for (int l = c->L - 1; l >= 0; l--) {
        const lview lv = layer_view(a, c, l, M);

        /* x_out = lv.xmid + sum_j gate_j ey_j: dxmid = dx */
        memcpy(a->dxm, a->dx, M * C * sizeof *a->dxm);
        for (size_t m = 0; m < M; m++)
            for (size_t j = 0; j < K; j++) {
                size_t sl = (size_t)lv.eslot[m * K + j];
                real g = lv.gate[m * K + j], d = 0;
                for (size_t i = 0; i < C; i++) {
                    a->dey[sl * C + i] = g * a->dx[m * C + i];
                    d += a->dx[m * C + i] * lv.ey[sl * C + i];
                }
                a->dgate[m * K + j] = d;
            }
        for (size_t e = 0; e < E; e++) {
            size_t s0 = (size_t)lv.eoff[e], n = (size_t)(lv.eoff[e + 1] - lv.eoff[e]);
            if (!n) continue;
            if ((rc = lin_b(x, rl_site_w2(c, l, (int)e), lv.hg + s0 * F, F, n, a->dey + s0 * C, C,
                            a->dhg + s0 * F, F, false, G))) return rc;
            for (size_t r = s0; r < s0 + n; r++)
                for (size_t f = 0; f < F; f++) {
                    real av = lv.h13[r * 2 * F + f], bv = lv.h13[r * 2 * F + F + f];
                    real sg = (real)1 / ((real)1 + RL_EXP(-av)), dh = a->dhg[r * F + f];
                    a->dh13[r * 2 * F + f] = dh * bv * sg * ((real)1 + av * ((real)1 - sg));
                    a->dh13[r * 2 * F + F + f] = dh * av * sg;
                }
            if ((rc = lin_b(x, rl_site_w13(c, l, (int)e), lv.xe + s0 * C, C, n, a->dh13 + s0 * 2 * F, 2 * F,
                            a->dxe + s0 * C, C, false, G))) return rc;
        }
        /* gather the expert input gradients back to rows (slot order) */
        for (size_t i = 0; i < M * C; i++) a->dln[i] = 0;
        for (size_t sl = 0; sl < MK; sl++) {
            real *d = a->dln + (size_t)lv.erow[sl] * C;
            const real *s = a->dxe + sl * C;
            for (size_t i = 0; i < C; i++) d[i] += s[i];
        }
        /* router: gates g_j = p_{i_j} / S, S = sum of the chosen p; aux = E sum_e f_e mean_m p_me */
        for (size_t m = 0; m < M; m++) {
            real *dp = a->dprob + m * E;
            const real *p = lv.prob + m * E;
            real S = 0, t = 0;
            for (size_t j = 0; j < K; j++) {
                S += p[lv.topi[m * K + j]];
                t += a->dgate[m * K + j] * p[lv.topi[m * K + j]];
            }
            for (size_t e = 0; e < E; e++)
                dp[e] = (real)(aux_scale * (double)E * a->f_e[(size_t)l * E + e] / (double)M);
            for (size_t j = 0; j < K; j++) dp[lv.topi[m * K + j]] += a->dgate[m * K + j] / S - t / (S * S);
            real dot = 0;
            for (size_t e = 0; e < E; e++) dot += p[e] * dp[e];
            for (size_t e = 0; e < E; e++) dp[e] = p[e] * (dp[e] - dot); /* now d router logits */
        }
        if ((rc = lin_b(x, rl_site_router(c, l), lv.ln2, C, M, a->dprob, E, a->dln, C, true, G))) return rc;
        /* lv.xmid = lv.xin + o; lv.ln2 = rmsnorm(lv.xmid) */
        rmsnorm_bwd(lv.xmid, P + lay->l[l].ln2, a->rs2 + (size_t)l * M, a->dln, M, C, a->dxm, true,
                    G + lay->l[l].ln2);
        if ((rc = lin_b(x, rl_site_o(c, l), lv.atty, C, M, a->dxm, C, a->datty, C, false, G))) return rc;
        /* attention */
        for (size_t i = 0; i < M * 3 * C; i++) a->dqkv[i] = 0;
        real scale = (real)1 / RL_SQRT((real)hd);
        for (size_t s = 0; s < b->nseq; s++) {
            size_t o = b->off[s];
            for (size_t m = o; m < b->off[s + 1]; m++) {
                size_t np = (size_t)a->pos[m] + 1;
                for (size_t h = 0; h < H; h++) {
                    const real *p = lv.att + m * H * T + h * T, *dy = a->datty + m * C + h * hd;
                    real dpr[RL_MAX_T], dot = 0;
                    for (size_t j = 0; j < np; j++) {
                        const real *v = lv.qkv + (o + j) * 3 * C + 2 * C + h * hd;
                        real *dv = a->dqkv + (o + j) * 3 * C + 2 * C + h * hd;
                        real d = 0;
                        for (size_t i = 0; i < hd; i++) {
                            d += dy[i] * v[i];
                            dv[i] += p[j] * dy[i];
                        }
                        dpr[j] = d;
                        dot += p[j] * d;
                    }
                    const real *q = lv.qkv + m * 3 * C + h * hd;
                    real *dq = a->dqkv + m * 3 * C + h * hd;
                    for (size_t j = 0; j < np; j++) {
                        real ds = p[j] * (dpr[j] - dot) * scale;
                        const real *k = lv.qkv + (o + j) * 3 * C + C + h * hd;
                        real *dk = a->dqkv + (o + j) * 3 * C + C + h * hd;
                        for (size_t i = 0; i < hd; i++) {
                            dq[i] += ds * k[i];
                            dk[i] += ds * q[i];
                        }
                    }
                }
            }
        }
        if ((rc = lin_b(x, rl_site_qkv(c, l), lv.ln1, C, M, a->dqkv, 3 * C, a->dln, C, false, G))) return rc;
        /* dx(layer input) = dxmid + d rmsnorm1 */
        rmsnorm_bwd(lv.xin, P + lay->l[l].ln1, a->rs1 + (size_t)l * M, a->dln, M, C, a->dxm, true,
                    G + lay->l[l].ln1);
        memcpy(a->dx, a->dxm, M * C * sizeof *a->dx);
    }
    for (size_t m = 0; m < M; m++) {
        real *gt = G + lay->wte + (size_t)b->tok[m] * C, *gp = G + lay->wpe + (size_t)a->pos[m] * C;
        for (size_t i = 0; i < C; i++) {
            gt[i] += a->dx[m * C + i];
            gp[i] += a->dx[m * C + i];
        }
    }
    return 0;
}
