/* Unit tests of the RL testbed (analysis/rl).
 *
 * Gradients: every backward pass of the model (embeddings, RMSNorm, the
 * attention, every linear layer, the router with its top-k renormalised gates
 * and load-balancing term, the SwiGLU experts, the LM head and log-softmax) is
 * checked against central finite differences of the double instantiation of
 * the same source (model_f64.c), for every parameter of a small model, with a
 * tolerance (2e-6 relative, 2e-9 absolute) that a wrong term cannot meet: each tensor's
 * gradient must also be far from zero so that a missing gradient fails. */
#include "../check_main.h"

#include "rl_f64.h"
#include "rl_internal.h"

#include <fp4scope/capture.h>

#include <hdf5.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small model ------------------------------------------------------------------- */
typedef struct tmodel {
    rl_cfg cfg;
    rl_layout lay;
    double *P;
    rl_batch b;
    size_t off[8];
    int32_t tok[64], tgt[64];
    double c[64];
} tmodel;

static void tmodel_init(tmodel *t, int L, int E, int K, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->cfg = (rl_cfg){.V = 16, .T = 8, .C = 16, .L = L, .H = 2, .E = E, .K = K, .F = 8};
    ck_assert_int_eq(rl_layout_init(&t->lay, &t->cfg), 0);
    t->P = malloc(t->lay.total * sizeof *t->P);
    for (size_t i = 0; i < t->lay.total; i++) {
        double g = rl_gauss(seed, 1, 0, i);
        t->P[i] = rl_param_is_gain(&t->lay, &t->cfg, i) ? 1.0 + 0.2 * g : 0.4 * g;
    }
    /* three sequences of lengths 5, 8, 3: the middle one is the longest allowed */
    size_t lens[3] = {5, 8, 3}, m = 0;
    t->off[0] = 0;
    for (int s = 0; s < 3; s++) {
        for (size_t p = 0; p < lens[s]; p++, m++) {
            t->tok[m] = (int32_t)(rl_hash(seed, 2, (uint64_t)s, p) % 16);
            t->tgt[m] = p + 1 < lens[s] && p >= 1 ? (int32_t)(rl_hash(seed, 3, (uint64_t)s, p) % 16) : -1;
            t->c[m] = t->tgt[m] >= 0 ? 2.0 * rl_u01(rl_hash(seed, 4, (uint64_t)s, p)) - 1.0 : 0.0;
        }
        t->off[s + 1] = m;
    }
    t->b = (rl_batch){.nseq = 3, .M = m, .off = t->off, .tok = t->tok, .tgt = t->tgt};
}

static void tmodel_free(tmodel *t)
{
    free(t->P);
    rl_layout_free(&t->lay);
}

/* L = sum c logp + aux_scale * aux; the routing of every layer in *route */
static double loss64(tmodel *t, rl_acts_f64 *a, double aux_scale, int32_t *route)
{
    rl_ctx_f64 x = {.cfg = &t->cfg, .lay = &t->lay, .P = t->P};
    double logp[64];
    ck_assert_int_eq(rl_forward_f64(&x, &t->b, a, logp, NULL, NULL), 0);
    double L = aux_scale * a->aux;
    for (size_t m = 0; m < t->b.M; m++) L += t->c[m] * logp[m];
    if (route) memcpy(route, a->topi, (size_t)t->cfg.L * t->b.M * (size_t)t->cfg.K * sizeof *route);
    return L;
}

/* Which tensor of the layout a parameter index belongs to (for the messages). */
static const char *tensor_of(const tmodel *t, size_t i, int *layer)
{
    const rl_layout *y = &t->lay;
    *layer = -1;
    if (i >= y->head) return "lm_head";
    if (i >= y->lnf) return "lnf";
    if (i < y->wpe) return "wte";
    for (int l = t->cfg.L - 1; l >= 0; l--) {
        if (i < y->l[l].ln1) continue;
        *layer = l;
        if (i >= y->l[l].w2) return "w2";
        if (i >= y->l[l].w13) return "w13";
        if (i >= y->l[l].router) return "router";
        if (i >= y->l[l].ln2) return "ln2";
        if (i >= y->l[l].o) return "o";
        if (i >= y->l[l].qkv) return "qkv";
        return "ln1";
    }
    return "wpe";
}

static void check_gradients(int L, int E, int K, double aux_scale, uint64_t seed)
{
    tmodel t;
    tmodel_init(&t, L, E, K, seed);
    rl_acts_f64 a = {0};
    rl_ctx_f64 x = {.cfg = &t.cfg, .lay = &t.lay, .P = t.P};
    int32_t route0[8 * 64 * 8], route1[8 * 64 * 8];
    size_t nroute = (size_t)L * t.b.M * (size_t)K;
    double L0 = loss64(&t, &a, aux_scale, route0);
    ck_assert(isfinite(L0));
    double *G = calloc(t.lay.total, sizeof *G);
    ck_assert_int_eq(rl_backward_f64(&x, &t.b, &a, t.c, aux_scale, G), 0);

    /* per tensor: the largest |g| and the worst error */
    const char *names[] = {"wte", "wpe", "ln1", "qkv", "o", "ln2", "router", "w13", "w2", "lnf", "lm_head"};
    enum { NT = 11 };
    double gmax[RL_MAX_LAYERS + 1][NT], emax[RL_MAX_LAYERS + 1][NT];
    memset(gmax, 0, sizeof gmax);
    memset(emax, 0, sizeof emax);
    size_t skipped = 0, checked = 0;
    const double h = 1e-5; /* worst error seen 4e-7: truncation and rounding balance here */
    for (size_t i = 0; i < t.lay.total; i++) {
        double p = t.P[i];
        t.P[i] = p + h;
        double Lp = loss64(&t, &a, aux_scale, route1);
        bool same = memcmp(route0, route1, nroute * sizeof *route0) == 0;
        t.P[i] = p - h;
        double Lm = loss64(&t, &a, aux_scale, route1);
        same = same && memcmp(route0, route1, nroute * sizeof *route0) == 0;
        t.P[i] = p;
        if (!same) { /* the top-k choice changed inside the step: not differentiable there */
            skipped++;
            continue;
        }
        double fd = (Lp - Lm) / (2 * h), err = fabs(fd - G[i]) / fmax(1e-3, fabs(fd));
        int layer;
        const char *tn = tensor_of(&t, i, &layer);
        int ti = 0;
        while (strcmp(names[ti], tn)) ti++;
        int li = layer + 1;
        gmax[li][ti] = fmax(gmax[li][ti], fabs(G[i]));
        emax[li][ti] = fmax(emax[li][ti], err);
        ck_assert_msg(err < 2e-6, "L=%d E=%d K=%d: %s (layer %d) parameter %zu: backward %.12g, "
                      "finite difference %.12g (relative error %.3g)", L, E, K, tn, layer, i, G[i], fd, err);
        checked++;
    }
    ck_assert_msg(skipped * 100 < checked, "%zu of %zu parameters changed the routing", skipped, checked);
    /* every tensor of every layer carries a gradient (a missing term would be 0) */
    for (int ti = 0; ti < NT; ti++)
        for (int li = 0; li <= L; li++) {
            bool global = ti < 2 || ti >= 9;
            if ((li == 0) != global || (ti == 6 && E == 1)) continue; /* one expert: gate = 1 */
            ck_assert_msg(gmax[li][ti] > 1e-4, "%s (layer %d): gradient is %g everywhere", names[ti], li - 1,
                          gmax[li][ti]);
        }
    free(G);
    rl_acts_free_f64(&a);
    tmodel_free(&t);
}

START_TEST(grad_fd_dense_like)
{
    check_gradients(1, 1, 1, 0.0, 11); /* one expert, top-1: a dense SwiGLU layer */
}
END_TEST

START_TEST(grad_fd_moe_top2)
{
    check_gradients(2, 4, 2, 0.0, 12);
}
END_TEST

START_TEST(grad_fd_moe_aux)
{
    check_gradients(2, 4, 2, 0.7, 13); /* with the load-balancing term */
}
END_TEST

START_TEST(grad_fd_moe_top3_of_5)
{
    check_gradients(1, 5, 3, 0.3, 14);
}
END_TEST

/* The float instantiation computes what the double one does (same source):
 * log-probs within float rounding, gradients within 1e-3 of their norm. */
START_TEST(float_matches_double)
{
    tmodel t;
    tmodel_init(&t, 2, 4, 2, 21);
    float *Pf = malloc(t.lay.total * sizeof *Pf);
    for (size_t i = 0; i < t.lay.total; i++) Pf[i] = (float)t.P[i];
    for (size_t i = 0; i < t.lay.total; i++) t.P[i] = (double)Pf[i];
    rl_acts_f64 ad = {0};
    rl_acts af = {0};
    double lpd[64];
    float lpf[64], cf[64];
    for (size_t m = 0; m < t.b.M; m++) cf[m] = (float)t.c[m];
    rl_ctx_f64 xd = {.cfg = &t.cfg, .lay = &t.lay, .P = t.P};
    rl_scratch ws = {0};
    rl_ctx xf = {.cfg = &t.cfg, .lay = &t.lay, .P = Pf, .ws = &ws};
    ck_assert_int_eq(rl_forward_f64(&xd, &t.b, &ad, lpd, NULL, NULL), 0);
    ck_assert_int_eq(rl_forward(&xf, &t.b, &af, lpf, NULL, NULL), 0);
    for (size_t m = 0; m < t.b.M; m++)
        ck_assert_msg(fabs(lpd[m] - lpf[m]) < 1e-4 * (1 + fabs(lpd[m])), "row %zu: %g vs %g", m, lpd[m], lpf[m]);
    double *Gd = calloc(t.lay.total, sizeof *Gd);
    float *Gf = calloc(t.lay.total, sizeof *Gf);
    ck_assert_int_eq(rl_backward_f64(&xd, &t.b, &ad, t.c, 0.5, Gd), 0);
    ck_assert_int_eq(rl_backward(&xf, &t.b, &af, cf, 0.5, Gf), 0);
    double n2 = 0, e2 = 0;
    for (size_t i = 0; i < t.lay.total; i++) {
        n2 += Gd[i] * Gd[i];
        e2 += (Gd[i] - Gf[i]) * (Gd[i] - Gf[i]);
    }
    ck_assert_msg(sqrt(e2) < 1e-4 * sqrt(n2), "float gradient differs by %g of its norm", sqrt(e2 / n2));
    /* the fp32 numerics of rl_lin give the same bits as the plain path */
    rl_num num = {.fp32 = true};
    rl_lin lin;
    ck_assert_int_eq(rl_lin_init(&lin, &t.cfg, &t.lay, &num), 0);
    ck_assert_int_eq(rl_lin_sync(&lin, Pf, NULL), 0);
    rl_ctx xl = xf;
    xl.lin = &lin;
    float lpl[64];
    float *Gl = calloc(t.lay.total, sizeof *Gl);
    ck_assert_int_eq(rl_forward(&xl, &t.b, &af, lpl, NULL, NULL), 0);
    ck_assert_int_eq(rl_backward(&xl, &t.b, &af, cf, 0.5, Gl), 0);
    ck_assert(memcmp(lpl, lpf, t.b.M * sizeof *lpf) == 0);
    ck_assert(memcmp(Gl, Gf, t.lay.total * sizeof *Gf) == 0);
    rl_lin_free(&lin);
    free(Gd);
    free(Gf);
    free(Gl);
    free(Pf);
    rl_scratch_free(&ws);
    rl_acts_free(&af);
    rl_acts_free_f64(&ad);
    tmodel_free(&t);
}
END_TEST

/* Straight-through estimator of the asymmetric QAT trainer (wfq): its forward
 * and its gradient at W are, bit for bit, those of a trainer whose weights are
 * Qw(W) itself: the gradient with respect to the quantized weight is passed to
 * the master weight unchanged. */
START_TEST(wfq_is_straight_through)
{
    tmodel t;
    tmodel_init(&t, 2, 4, 2, 31);
    t.cfg.C = 32; /* a block multiple for MXFP4 and NVFP4 */
    rl_layout_free(&t.lay);
    ck_assert_int_eq(rl_layout_init(&t.lay, &t.cfg), 0);
    float *P = malloc(t.lay.total * sizeof *P), cf[64];
    for (size_t i = 0; i < t.lay.total; i++)
        P[i] = (float)(rl_param_is_gain(&t.lay, &t.cfg, i) ? 1.0 : 0.3 * rl_gauss(31, 9, 0, i));
    for (size_t m = 0; m < t.b.M; m++) cf[m] = (float)t.c[m];
    const char *fmts[2] = {"nvfp4", "mxfp4"};
    for (int f = 0; f < 2; f++) {
        rl_num wfq = {.act = RL_OP_BF16, .weight = RL_OP_QUANT, .quant_sites = FP4S_RL_SITE_ALL};
        fp4s_format fmt;
        ck_assert_int_eq(fp4s_format_parse(fmts[f], &fmt), 0);
        ck_assert_int_eq(fp4s_spec_profile(&wfq.spec_w, fmt, f == 0 ? "te-2d" : "ocp"), 0);
        rl_num ref = {.act = RL_OP_BF16, .weight = RL_OP_FP32, .quant_sites = FP4S_RL_SITE_ALL};
        rl_lin lq, lr;
        ck_assert_int_eq(rl_lin_init(&lq, &t.cfg, &t.lay, &wfq), 0);
        ck_assert_int_eq(rl_lin_init(&lr, &t.cfg, &t.lay, &ref), 0);
        ck_assert_int_eq(rl_lin_sync(&lq, P, NULL), 0);
        float *Pq = malloc(t.lay.total * sizeof *Pq);
        memcpy(Pq, P, t.lay.total * sizeof *Pq);
        size_t changed = 0;
        for (int s = 0; s < t.lay.nsites; s++) {
            const rl_site *st = &t.lay.sites[s];
            for (size_t j = 0; j < st->N * st->K; j++) changed += Pq[st->off + j] != lq.weff[st->off + j];
            memcpy(Pq + st->off, lq.weff + st->off, st->N * st->K * sizeof *Pq);
        }
        ck_assert_msg(changed > t.lay.total / 4, "%s: quantization changed only %zu weights", fmts[f], changed);
        ck_assert_int_eq(rl_lin_sync(&lr, Pq, NULL), 0);
        rl_scratch ws = {0};
        rl_acts a1 = {0}, a2 = {0};
        rl_ctx x1 = {.cfg = &t.cfg, .lay = &t.lay, .P = P, .lin = &lq, .ws = &ws};
        rl_ctx x2 = {.cfg = &t.cfg, .lay = &t.lay, .P = Pq, .lin = &lr, .ws = &ws};
        float lp1[64], lp2[64];
        float *G1 = calloc(t.lay.total, sizeof *G1), *G2 = calloc(t.lay.total, sizeof *G2);
        ck_assert_int_eq(rl_forward(&x1, &t.b, &a1, lp1, NULL, NULL), 0);
        ck_assert_int_eq(rl_forward(&x2, &t.b, &a2, lp2, NULL, NULL), 0);
        ck_assert(memcmp(lp1, lp2, t.b.M * sizeof *lp1) == 0);
        ck_assert_int_eq(rl_backward(&x1, &t.b, &a1, cf, 0.5, G1), 0);
        ck_assert_int_eq(rl_backward(&x2, &t.b, &a2, cf, 0.5, G2), 0);
        ck_assert_msg(memcmp(G1, G2, t.lay.total * sizeof *G1) == 0, "%s: STE gradient differs", fmts[f]);
        free(G1);
        free(G2);
        free(Pq);
        rl_acts_free(&a1);
        rl_acts_free(&a2);
        rl_scratch_free(&ws);
        rl_lin_free(&lq);
        rl_lin_free(&lr);
    }
    free(P);
    tmodel_free(&t);
}
END_TEST

/* The backward of a linear layer for every trainer's numerics (bf16, wfq,
 * w4a4qat in NVFP4 and MXFP4, fp32): a quantizer has no useful derivative,
 * so the backward is the straight-through estimator, defined as the exact
 * derivative of the product of the operands the forward multiplied, Y =
 * f(X) Weff^T: dX = dY Weff (passed through f unchanged), dW = dY^T f(X)
 * (passed through Qw unchanged). The operands are rebuilt here independently
 * (rl_fakequant, rl_bf16_round of X and of the master W) and the forward and
 * both gradients compared with the double-precision product, and the
 * gradients with central differences of S = sum(dY * Y) with respect to the
 * operands (exact for a bilinear form up to rounding: a transposed, scaled
 * or wrongly-operated gradient fails). accumulate adds to dX; dW always adds. */
/* The terms of S = sum dY * (Xop Wop^T) (dY [M, N], Xop [M, K], Wop [N, K])
 * that hold Xop[row, k] (w false: over the N columns) or Wop[row, k] (w true:
 * over the M rows), with that entry moved by d, in double: the central
 * difference of two of them is dS/dXop[row, k] or dS/dWop[row, k]. */
static double s_moved(const float *Xop, const float *Wop, const float *dY, size_t M, size_t N, size_t K, bool w,
                      size_t row, size_t k, double d)
{
    double S = 0;
    for (size_t o = 0; o < (w ? M : N); o++) {
        size_t m = w ? o : row, n = w ? row : o;
        double rest = 0;
        for (size_t kk = 0; kk < K; kk++)
            if (kk != k) rest += (double)Xop[m * K + kk] * Wop[n * K + kk];
        double x = Xop[m * K + k], v = Wop[n * K + k];
        if (w) v += d; else x += d;
        S += dY[m * N + n] * (rest + x * v);
    }
    return S;
}

START_TEST(lin_backward_is_straight_through)
{
    rl_cfg c = {.V = 16, .T = 8, .C = 32, .L = 1, .H = 2, .E = 2, .K = 1, .F = 32};
    rl_layout lay;
    ck_assert_int_eq(rl_layout_init(&lay, &c), 0);
    float *P = malloc(lay.total * sizeof *P);
    for (size_t i = 0; i < lay.total; i++) P[i] = (float)(0.3 * rl_gauss(41, 1, 0, i));
    const int site = rl_site_w13(&c, 0, 1); /* N = 2F = 64, K = C = 32 */
    const rl_site *st = &lay.sites[site];
    const size_t M = 7, N = st->N, K = st->K;
    float X[7 * 32], dY[7 * 64];
    for (size_t i = 0; i < M * K; i++) X[i] = (float)(1.5 * rl_gauss(41, 2, 0, i));
    for (size_t i = 0; i < M * N; i++) dY[i] = (float)rl_gauss(41, 3, 0, i);
    struct { const char *name; rl_op act, w; fp4s_format f; const char *pa, *pw; bool fp32; } cases[] = {
        {"bf16", RL_OP_BF16, RL_OP_BF16, FP4S_NVFP4, "te", "te-2d", false},
        {"wfq nvfp4", RL_OP_BF16, RL_OP_QUANT, FP4S_NVFP4, "te", "te-2d", false},
        {"w4a4qat nvfp4", RL_OP_QUANT, RL_OP_QUANT, FP4S_NVFP4, "te", "te-2d", false},
        {"w4a4qat mxfp4", RL_OP_QUANT, RL_OP_QUANT, FP4S_MXFP4, "ocp", "ocp", false},
        {"fp32", RL_OP_FP32, RL_OP_FP32, FP4S_NVFP4, "te", "te-2d", true},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        rl_num num = {.act = cases[ci].act, .weight = cases[ci].w, .quant_sites = FP4S_RL_SITE_ALL,
                      .fp32 = cases[ci].fp32};
        ck_assert_int_eq(fp4s_spec_profile(&num.spec_a, cases[ci].f, cases[ci].pa), 0);
        ck_assert_int_eq(fp4s_spec_profile(&num.spec_w, cases[ci].f, cases[ci].pw), 0);
        rl_lin L;
        ck_assert_int_eq(rl_lin_init(&L, &c, &lay, &num), 0);
        ck_assert_int_eq(rl_lin_sync(&L, P, NULL), 0);
        /* the operands, rebuilt */
        float Xop[7 * 32], Wop[64 * 32];
        rl_scratch ws = {0};
        const float *W = P + st->off;
        if (cases[ci].act == RL_OP_QUANT)
            ck_assert_int_eq(rl_fakequant(&num.spec_a, X, M, K, K, Xop, K, &ws), 0);
        else if (cases[ci].act == RL_OP_BF16) rl_bf16_round(X, Xop, M * K);
        else memcpy(Xop, X, sizeof Xop);
        if (cases[ci].w == RL_OP_QUANT)
            ck_assert_int_eq(rl_fakequant(&num.spec_w, W, N, K, K, Wop, K, &ws), 0);
        else if (cases[ci].w == RL_OP_BF16) rl_bf16_round(W, Wop, N * K);
        else memcpy(Wop, W, sizeof Wop);
        size_t xq = 0, wq = 0;
        for (size_t i = 0; i < M * K; i++) xq += Xop[i] != X[i];
        for (size_t i = 0; i < N * K; i++) wq += Wop[i] != W[i];
        ck_assert_msg(cases[ci].fp32 ? xq + wq == 0 : xq > M * K / 2 && wq > N * K / 2,
                      "%s: %zu inputs and %zu weights changed by the operand rounding", cases[ci].name, xq, wq);
        float Y[7 * 64], dX[7 * 32], dW[64 * 32];
        ck_assert_int_eq(rl_lin_fwd(&L, site, X, K, M, Y, N, &ws), 0);
        for (size_t i = 0; i < M * K; i++) dX[i] = 0.25f; /* accumulate = false overwrites */
        memset(dW, 0, sizeof dW);
        ck_assert_int_eq(rl_lin_bwd(&L, site, X, K, M, dY, N, dX, K, false, dW, &ws), 0);
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) {
                double y = 0, a = 0;
                for (size_t k = 0; k < K; k++) y += (double)Xop[m * K + k] * Wop[n * K + k], a += fabs(Xop[m * K + k] * Wop[n * K + k]);
                ck_assert_msg(fabs(Y[m * N + n] - y) <= 1e-5 * a + 1e-30, "%s: Y[%zu,%zu] %g vs %g", cases[ci].name, m,
                              n, Y[m * N + n], y);
            }
        /* central differences of S(Xop, Wop) = sum dY * (Xop Wop^T), in double */
        const double h = 1e-3;
        for (size_t i = 0; i < M * K; i++) { /* dS/dXop[m,k] = sum_n dY[m,n] Wop[n,k] */
            double fd = (s_moved(Xop, Wop, dY, M, N, K, false, i / K, i % K, h) -
                         s_moved(Xop, Wop, dY, M, N, K, false, i / K, i % K, -h)) / (2 * h);
            ck_assert_msg(fabs(dX[i] - fd) <= 1e-5 * (1 + fabs(fd)), "%s: dX[%zu] %g, finite difference %g",
                          cases[ci].name, i, dX[i], fd);
        }
        for (size_t j = 0; j < N * K; j++) { /* dS/dWop[n,k] = sum_m dY[m,n] Xop[m,k] */
            double fd = (s_moved(Xop, Wop, dY, M, N, K, true, j / K, j % K, h) -
                         s_moved(Xop, Wop, dY, M, N, K, true, j / K, j % K, -h)) / (2 * h);
            ck_assert_msg(fabs(dW[j] - fd) <= 1e-5 * (1 + fabs(fd)), "%s: dW[%zu] %g, finite difference %g",
                          cases[ci].name, j, dW[j], fd);
        }
        /* accumulate: dX += , and dW adds to what it holds */
        float dX2[7 * 32], dW2[64 * 32];
        for (size_t i = 0; i < M * K; i++) dX2[i] = 0.25f;
        memcpy(dW2, dW, sizeof dW2);
        ck_assert_int_eq(rl_lin_bwd(&L, site, X, K, M, dY, N, dX2, K, true, dW2, &ws), 0);
        for (size_t i = 0; i < M * K; i++) ck_assert(fabsf(dX2[i] - (dX[i] + 0.25f)) <= 1e-6f * (1 + fabsf(dX[i])));
        for (size_t j = 0; j < N * K; j++) ck_assert(fabsf(dW2[j] - 2 * dW[j]) <= 1e-6f * (1 + fabsf(dW[j])));
        rl_scratch_free(&ws);
        rl_lin_free(&L);
    }
    free(P);
    rl_layout_free(&lay);
}
END_TEST

/* rl_fakequant pads columns to the block and equals fp4s_quantize's dequant on
 * the padded rows; a width that is a block multiple needs no padding. */
START_TEST(fakequant_pads_columns)
{
    fp4s_spec s;
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_FP8, "fp8-1x128"), 0);
    size_t M = 5, K = 64, Kp = 128;
    float x[5 * 64], y[5 * 64], pad[5 * 128], ref[5 * 128];
    for (size_t i = 0; i < M * K; i++) x[i] = (float)rl_gauss(5, 5, 5, i);
    memset(pad, 0, sizeof pad);
    for (size_t m = 0; m < M; m++) memcpy(pad + m * Kp, x + m * K, K * sizeof *x);
    rl_scratch ws = {0};
    ck_assert_int_eq(rl_fakequant(&s, x, M, K, K, y, K, &ws), 0);
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&s, fp4s_amax(pad, M, Kp, Kp, NULL), &ts), 0);
    fp4s_qout q = {.dequant = ref, .ld_dequant = Kp};
    ck_assert_int_eq(fp4s_quantize(&s, &ts, pad, M, Kp, Kp, 0, &q, NULL), 0);
    for (size_t m = 0; m < M; m++)
        ck_assert(memcmp(y + m * K, ref + m * Kp, K * sizeof *y) == 0);
    size_t diff = 0;
    for (size_t i = 0; i < M * K; i++) diff += x[i] != y[i];
    ck_assert(diff > M * K / 2);
    rl_scratch_free(&ws);
}
END_TEST

/* ---- tasks ---------------------------------------------------------------------------------- */
START_TEST(task_sort_and_add)
{
    rl_task t;
    rl_task_init(&t, FP4S_RL_TASK_SORT);
    int32_t p[16] = {RL_TOK_BOS, 3, 1, 4, 1, 5, 9, 2, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_SEP}, a[16];
    ck_assert_int_eq(rl_task_answer(&t, p, a), 8);
    int32_t want[8] = {1, 1, 2, 3, 4, 5, 9, RL_TOK_EOS};
    ck_assert(memcmp(a, want, sizeof want) == 0);
    ck_assert(rl_task_reward(&t, p, want, 8) == 1.0);
    ck_assert(rl_task_reward(&t, p, want, 7) == 0.0); /* no EOS */
    int32_t wrong[8] = {1, 2, 1, 3, 4, 5, 9, RL_TOK_EOS};
    ck_assert(rl_task_reward(&t, p, wrong, 8) == 0.0);
    for (uint64_t i = 0; i < 200; i++) { /* 6 to 10 digits, padded, within the vocabulary */
        rl_task_prompt(&t, 7, 1, i, p);
        int nd = 0;
        for (int k = 1; k <= 10; k++) nd += p[k] < 10;
        ck_assert(nd >= 6 && nd <= 10 && p[0] == RL_TOK_BOS && p[11] == RL_TOK_SEP);
        ck_assert_int_le(rl_task_answer(&t, p, a), t.max_resp);
    }
    rl_task_init(&t, FP4S_RL_TASK_ADD);
    /* 987 + 45 = 1032, digits least significant first */
    int32_t q[13] = {RL_TOK_BOS, 7, 8, 9, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PLUS, 5, 4, RL_TOK_PAD, RL_TOK_PAD,
                     RL_TOK_PAD, RL_TOK_SEP};
    ck_assert_int_eq(rl_task_answer(&t, q, a), 5);
    int32_t sum[5] = {2, 3, 0, 1, RL_TOK_EOS};
    ck_assert(memcmp(a, sum, sizeof sum) == 0);
    int32_t z[13] = {RL_TOK_BOS, 0, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PLUS, 0, RL_TOK_PAD,
                     RL_TOK_PAD, RL_TOK_PAD, RL_TOK_PAD, RL_TOK_SEP};
    ck_assert_int_eq(rl_task_answer(&t, z, a), 2); /* 0 + 0 = 0 */
    ck_assert(a[0] == 0 && a[1] == RL_TOK_EOS);
    for (uint64_t i = 0; i < 200; i++) {
        rl_task_prompt(&t, 7, 2, i, q);
        long va = 0, vb = 0, pw = 1;
        for (int k = 0; k < 5; k++, pw *= 10) {
            if (q[1 + k] < 10) va += q[1 + k] * pw;
            if (q[7 + k] < 10) vb += q[7 + k] * pw;
        }
        int n = rl_task_answer(&t, q, a);
        long vs = 0;
        pw = 1;
        for (int k = 0; k < n - 1; k++, pw *= 10) vs += a[k] * pw;
        ck_assert_int_eq(vs, va + vb);
        ck_assert(n - 1 == 1 || a[n - 2] != 0); /* no leading zero */
    }
}
END_TEST

/* ---- GRPO loss and AdamW --------------------------------------------------------------------------- */
/* The per-token gradient is the derivative of the per-token loss, for every
 * correction, both signs of the advantage, inside and outside the clip range. */
START_TEST(grpo_gradient_is_the_loss_derivative)
{
    fp4s_rl_opts o;
    fp4s_rl_opts_defaults(&o);
    fp4s_rl_iscorr corr[3] = {FP4S_RL_IS_NONE, FP4S_RL_IS_TIS, FP4S_RL_IS_MIS};
    int nclip = 0, nzero = 0, n = 0;
    for (int ci = 0; ci < 3; ci++) {
        o.is_corr = corr[ci];
        for (uint64_t i = 0; i < 4000; i++) {
            double old = -3 * rl_u01(rl_hash(5, 1, i, 0)), ro = old + 1.5 * (rl_u01(rl_hash(5, 2, i, 0)) - 0.5);
            double lp = old + 0.6 * (rl_u01(rl_hash(5, 3, i, 0)) - 0.5), A = 2 * rl_u01(rl_hash(5, 4, i, 0)) - 1;
            double ratio = exp(lp - old);
            if (fabs(ratio - 0.8) < 1e-4 || fabs(ratio - 1.2) < 1e-4) continue; /* the kinks */
            bool clip;
            double g = rl_grpo_dlogp(&o, lp, old, ro, A, 0.01, &clip), h = 1e-7;
            double fd = (rl_grpo_loss(&o, lp + h, old, ro, A, 0.01) - rl_grpo_loss(&o, lp - h, old, ro, A, 0.01)) / (2 * h);
            ck_assert_msg(fabs(fd - g) < 1e-7, "corr %d: lp %g old %g ro %g A %g: %g vs %g", ci, lp, old, ro, A, g, fd);
            nclip += clip;
            nzero += g == 0;
            n++;
            if (ci == 1) /* TIS weight min(exp(old - ro), 2) */
                ck_assert(fabs(g) <= 2 * fabs(A) * ratio * 0.01 + 1e-15);
        }
    }
    ck_assert(nclip > n / 20 && nzero < n / 2);
    /* verl's definitions at hand-picked points */
    o.is_corr = FP4S_RL_IS_TIS;
    ck_assert(fabs(rl_grpo_loss(&o, -1, -1, -2, 1, 1) - -2.0) < 1e-12);   /* w = e^1 capped at 2, ratio 1 */
    ck_assert(fabs(rl_grpo_loss(&o, -1, -1, -1.5, 1, 1) - -exp(0.5)) < 1e-12);
    o.is_corr = FP4S_RL_IS_MIS;
    ck_assert(rl_grpo_loss(&o, -1, -1, -2, 1, 1) == 0);                   /* w = e > 2: rejected */
    ck_assert(fabs(rl_grpo_loss(&o, -1, -1, -1.5, 1, 1) - -1.0) < 1e-12); /* kept, no weight */
    o.is_corr = FP4S_RL_IS_NONE;
    ck_assert(fabs(rl_grpo_loss(&o, log(1.5), 0, 0, 1, 1) - -1.2) < 1e-12);  /* clipped at 1 + 0.2 */
    ck_assert(fabs(rl_grpo_loss(&o, log(0.5), 0, 0, -1, 1) - 0.8) < 1e-12);  /* clipped at 1 - 0.2 */
    ck_assert(fabs(rl_grpo_loss(&o, log(0.5), 0, 0, 1, 1) - -0.5) < 1e-12);  /* min keeps the lower */
}
END_TEST

START_TEST(adamw_matches_pytorch_formula)
{
    rl_cfg c = {.V = 16, .T = 4, .C = 16, .L = 1, .H = 1, .E = 1, .K = 1, .F = 16};
    rl_layout lay;
    ck_assert_int_eq(rl_layout_init(&lay, &c), 0);
    size_t n = lay.total;
    float *P = malloc(n * sizeof *P), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v), *G = malloc(n * sizeof *G);
    double *Pd = malloc(n * sizeof *Pd), *md = calloc(n, sizeof *md), *vd = calloc(n, sizeof *vd);
    for (size_t i = 0; i < n; i++) Pd[i] = P[i] = (float)rl_gauss(9, 1, 0, i);
    double lr = 1e-2, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
    for (int t = 1; t <= 5; t++) {
        for (size_t i = 0; i < n; i++) G[i] = (float)rl_gauss(9, 2, (uint64_t)t, i);
        rl_adamw(P, m, v, G, 0.5f, n, t, lr, b1, b2, eps, wd, &lay, &c);
        for (size_t i = 0; i < n; i++) {
            double g = 0.5 * G[i];
            md[i] = b1 * md[i] + (1 - b1) * g;
            vd[i] = b2 * vd[i] + (1 - b2) * g * g;
            if (!rl_param_is_gain(&lay, &c, i)) Pd[i] *= 1 - lr * wd;
            Pd[i] -= lr * (md[i] / (1 - pow(b1, t))) / (sqrt(vd[i] / (1 - pow(b2, t))) + eps);
        }
    }
    for (size_t i = 0; i < n; i++) ck_assert_msg(fabs(P[i] - Pd[i]) < 1e-5, "%zu: %g vs %g", i, P[i], Pd[i]);
    ck_assert(rl_param_is_gain(&lay, &c, lay.lnf) && !rl_param_is_gain(&lay, &c, lay.head));
    free(P); free(m); free(v); free(G); free(Pd); free(md); free(vd);
    rl_layout_free(&lay);
}
END_TEST

/* ---- the loop ---------------------------------------------------------------------------------------- */
static void tiny_opts(fp4s_rl_opts *o)
{
    fp4s_rl_opts_defaults(o);
    o->width = 32;
    o->layers = 2;
    o->heads = 2;
    o->experts = 4;
    o->prompts = 5;
    o->group = 4;
    o->sft_batch = 30;       /* 10 micro-batches: more than a round of 8 */
    o->sft_max_steps = 3;
    o->sft_check_every = 2;
    o->eval_every = 2;
    o->eval_prompts = 9;
    o->act_every = 2;
    o->act_seqs = 5;
    o->micro_batch = 3;      /* uneven pieces */
    o->shard = 7;
    o->act_sites[0] = '*';
    o->act_sites[1] = 0;
}

static void run_capture(const fp4s_rl_opts *o, int threads, const char *path, fp4s_rl_stats *st, int steps)
{
    fp4s_set_threads(threads);
    fp4s_rl *r;
    ck_assert_msg(fp4s_rl_open(o, &r) == 0, "%s", fp4s_last_error());
    ck_assert_msg(fp4s_rl_warmstart(r, NULL) == 0, "%s", fp4s_last_error());
    fp4s_capture_opts co;
    fp4s_capture_opts_defaults(&co);
    co.overwrite = true;
    fp4s_capture *cap;
    ck_assert_int_eq(fp4s_capture_create(path, &co, &cap), 0);
    ck_assert_int_eq(fp4s_rl_capture_header(r, cap), 0);
    for (int k = 0; k < steps; k++) ck_assert_msg(fp4s_rl_step(r, cap, &st[k]) == 0, "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_capture_close(&cap), 0);
    fp4s_rl_close(&r);
    fp4s_set_threads(0);
}

/* The bytes of a dataset, in its native type (malloc'ed). */
static char *read_dataset(const char *file, const char *path, size_t *bytes)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    ck_assert_msg(d >= 0, "%s: %s", file, path);
    hid_t ft = H5Dget_type(d), nt = H5Tget_native_type(ft, H5T_DIR_ASCEND), sp = H5Dget_space(d);
    *bytes = (size_t)H5Sget_simple_extent_npoints(sp) * H5Tget_size(nt);
    char *buf = malloc(*bytes + 1);
    ck_assert(H5Dread(d, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Sclose(sp);
    H5Tclose(nt);
    H5Tclose(ft);
    H5Dclose(d);
    H5Fclose(f);
    return buf;
}

/* Every dataset of two captures, byte for byte. */
static void same_captures(const char *a, const char *b)
{
    fp4s_capture_entry *ea, *eb;
    size_t na, nb;
    ck_assert_int_eq(fp4s_capture_list(a, &ea, &na), 0);
    ck_assert_int_eq(fp4s_capture_list(b, &eb, &nb), 0);
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        ck_assert_str_eq(ea[i].path, eb[i].path);
        ck_assert(ea[i].rows == eb[i].rows && ea[i].cols == eb[i].cols && ea[i].dtype == eb[i].dtype);
        size_t ba, bb;
        char *da = read_dataset(a, ea[i].path, &ba), *db = read_dataset(b, eb[i].path, &bb);
        ck_assert_msg(ba == bb && memcmp(da, db, ba) == 0, "%s differs", ea[i].path);
        free(da);
        free(db);
    }
    free(ea);
    free(eb);
    fp4s_capture_scalar *sa, *sb;
    ck_assert_int_eq(fp4s_capture_scalars(a, &sa, &na), 0);
    ck_assert_int_eq(fp4s_capture_scalars(b, &sb, &nb), 0);
    ck_assert_uint_eq(na, nb);
    ck_assert_uint_gt(na, 10);
    ck_assert_msg(memcmp(sa, sb, na * sizeof *sa) == 0, "per-step scalars differ");
    free(sa);
    free(sb);
}

/* A fixed seed gives the same captures on 1 and 3 threads, for the BF16 and
 * the NVFP4/wfq configurations (uneven micro-batches and shards). */
START_TEST(same_capture_on_any_thread_count)
{
    fp4s_rl_opts o;
    tiny_opts(&o);
    for (int cfg = 0; cfg < 2; cfg++) {
        if (cfg == 1) {
            o.rollout = FP4S_RL_ROLLOUT_NVFP4;
            o.trainer = FP4S_RL_TRAINER_WFQ;
            o.is_corr = FP4S_RL_IS_TIS;
        }
        fp4s_rl_stats s1[3], s3[3];
        run_capture(&o, 1, "rl_det1.h5", s1, 3);
        run_capture(&o, 3, "rl_det3.h5", s3, 3);
        same_captures("rl_det1.h5", "rl_det3.h5");
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < fp4s_rl_stat_count(); i++) {
                const char *nm = fp4s_rl_stat_name(i);
                if (!strncmp(nm, "t_", 2)) continue; /* times */
                double a = fp4s_rl_stat_value(&s1[k], i), b = fp4s_rl_stat_value(&s3[k], i);
                ck_assert_msg(memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)), "step %d %s: %g vs %g",
                              k, nm, a, b);
            }
        ck_assert_int_eq(fp4s_capture_verify("rl_det1.h5"), 0);
        if (cfg == 1) ck_assert(s1[0].mismatch > 1e-3); /* the FP4 rollout does differ */
        else ck_assert(s1[0].mismatch < 1e-3);
    }
    remove("rl_det1.h5");
    remove("rl_det3.h5");
}
END_TEST

/* What a step writes: one log-prob per response token with its sequence and
 * position, trainer and rollout activations of equal shape, the weights. */
START_TEST(step_writes_the_schema)
{
    fp4s_rl_opts o;
    tiny_opts(&o);
    o.rollout = FP4S_RL_ROLLOUT_MXFP4;
    fp4s_rl_stats st[2];
    run_capture(&o, 2, "rl_schema.h5", st, 2);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list("rl_schema.h5", &e, &n), 0);
    size_t sites0 = 0, lp0 = 0, lp1 = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].step == 0 && strcmp(e[i].site, "logprobs") && !strcmp(e[i].side, "trainer")) sites0++;
        if (!strcmp(e[i].site, "logprobs") && !strcmp(e[i].side, "pos")) *(e[i].step ? &lp1 : &lp0) = e[i].cols;
        ck_assert_msg(e[i].step == 0 || !strcmp(e[i].site, "logprobs"), "activations at step %lld",
                      (long long)e[i].step); /* act_every 2: step 0 only */
    }
    /* qkv, o, gate per layer, lm_head, and the experts that got tokens */
    ck_assert_uint_ge(sites0, 2 * 3 + 1 + 2);
    ck_assert_uint_eq(lp0, (size_t)llround(st[0].resp_len * 20));
    ck_assert_uint_eq(lp1, (size_t)llround(st[1].resp_len * 20));
    ck_assert_int_eq(fp4s_capture_verify("rl_schema.h5"), 0);
    free(e);
    /* the scalars of each step, as the stats reported them; no times */
    fp4s_capture_scalar *sc;
    ck_assert_int_eq(fp4s_capture_scalars("rl_schema.h5", &sc, &n), 0);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(strncmp(sc[i].name, "t_", 2) != 0);
        if (!strcmp(sc[i].name, "reward")) {
            ck_assert(sc[i].value == st[sc[i].step].reward);
            seen++;
        }
        if (!strcmp(sc[i].name, "acc_trainer")) ck_assert(sc[i].step == 0); /* eval_every 2: step 0 */
    }
    ck_assert_int_eq(seen, 2);
    free(sc);
    remove("rl_schema.h5");
}
END_TEST

/* BF16 of a float, round to nearest even (written here, not the library's). */
static float test_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp4scope-capture(5): a step's weight is the one its activations and
 * log-probs came from. The trainer's log-prob of every response token,
 * recomputed from the step's stored lm_head inputs and lm_head weight (the
 * BF16 trainer: bf16(h) bf16(W)^T summed over k in order in float, then the
 * log-softmax in double), equals the stored one bit for bit, at every step. */
START_TEST(capture_weights_are_the_steps_own)
{
    fp4s_rl_opts o;
    tiny_opts(&o);
    o.act_every = 1;
    snprintf(o.act_sites, sizeof o.act_sites, "lm_head");
    o.lr = 3e-4;
    fp4s_rl_stats st[3];
    run_capture(&o, 2, "rl_sync.h5", st, 3);
    for (int step = 0; step < 3; step++) {
        char ph[64], pw[64], pl[64], pt[64];
        snprintf(ph, sizeof ph, "/steps/%d/lm_head/trainer", step);
        snprintf(pw, sizeof pw, "/steps/%d/lm_head/weight", step);
        snprintf(pl, sizeof pl, "/steps/%d/logprobs/trainer", step);
        snprintf(pt, sizeof pt, "/steps/%d/logprobs/token", step);
        size_t bh, bw, bl, bt;
        float *h = (float *)read_dataset("rl_sync.h5", ph, &bh), *w = (float *)read_dataset("rl_sync.h5", pw, &bw);
        float *lp = (float *)read_dataset("rl_sync.h5", pl, &bl);
        int64_t *tok = (int64_t *)read_dataset("rl_sync.h5", pt, &bt);
        size_t C = (size_t)o.width, V = RL_VOCAB, n = bl / sizeof *lp;
        ck_assert_uint_eq(bw, V * C * sizeof *w);
        ck_assert_uint_eq(bh, n * C * sizeof *h);
        ck_assert_uint_eq(bt, n * sizeof *tok);
        ck_assert_uint_gt(n, 20);
        size_t same = 0;
        double dmax = 0;
        for (size_t i = 0; i < n; i++) {
            float lg[RL_VOCAB];
            for (size_t v = 0; v < V; v++) {
                float acc = 0;
                for (size_t k = 0; k < C; k++) {
                    float p = test_bf16(h[i * C + k]) * test_bf16(w[v * C + k]);
                    acc = acc + p;
                }
                lg[v] = acc;
            }
            size_t am = 0;
            for (size_t v = 1; v < V; v++) if (lg[v] > lg[am]) am = v;
            double mx = lg[am], s = 0;
            for (size_t v = 0; v < V; v++) s += exp((double)lg[v] - mx);
            float want = (float)((double)lg[tok[i]] - (mx + log(s)));
            same += memcmp(&want, &lp[i], sizeof want) == 0;
            dmax = fmax(dmax, fabs((double)want - (double)lp[i]));
        }
        ck_assert_msg(same == n, "step %d: %zu of %zu recomputed trainer log-probs differ from the capture's "
                      "(largest difference %.3g nats)", step, n - same, n, dmax);
        free(h);
        free(w);
        free(lp);
        free(tok);
    }
    remove("rl_sync.h5");
}
END_TEST

/* ---- statistics over seeds, against an independent computation ---------------------------- */
/* Student's t density, and its two-sided tail P(|T| > t) by Simpson's rule
 * on [0, |t|]; the quantile by bisection on that tail. */
static double t_pdf(double x, double df)
{
    return exp(lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * M_PI) - (df + 1) / 2 * log1p(x * x / df));
}
static double t_tail2(double t, double df)
{
    int n = 40000;
    double a = fabs(t), h = a / n, sum = t_pdf(0, df) + t_pdf(a, df);
    for (int i = 1; i < n; i++) sum += (i % 2 ? 4 : 2) * t_pdf(i * h, df);
    return 1 - 2 * sum * h / 3;
}
static double t_quantile2(double tail, double df)
{
    double lo = 0, hi = 200;
    for (int it = 0; it < 80; it++) {
        double mid = (lo + hi) / 2;
        if (t_tail2(mid, df) > tail) lo = mid;
        else hi = mid;
    }
    return (lo + hi) / 2;
}
/* The exact two-sided sign test: 2 P(Bin(m, 1/2) <= min(w, l)), at most 1. */
static double sign_p(int w, int l)
{
    int m = w + l, k = w < l ? w : l;
    double s = 0, c = 1;
    for (int i = 0; i <= k; i++) {
        s += c;
        c = c * (m - i) / (i + 1);
    }
    double p = 2 * s / pow(2, m);
    return m == 0 ? 1 : p > 1 ? 1 : p;
}

START_TEST(seed_statistics)
{
    const double x[8] = {0.81, 0.62, 0.84, 0.70, 0.80, 0.86, 0.55, 0.83};
    const double b[8] = {0.80, 0.75, 0.86, 0.79, 0.78, 0.90, 0.71, 0.83};
    const size_t ns[] = {2, 3, 5, 8};
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        size_t n = ns[c];
        fp4s_rl_seedstat st;
        int rc = fp4s_rl_seedstat_compute(x, b, n, 0.95, &st);
        if (rc == FP4S_ENOTSUP) return; /* a build without GSL: refused, and said so */
        ck_assert_int_eq(rc, 0);
        double m = 0, dm = 0, v = 0, dv = 0;
        int w = 0, l = 0, ties = 0;
        for (size_t i = 0; i < n; i++) m += x[i] / n, dm += (x[i] - b[i]) / n;
        for (size_t i = 0; i < n; i++) {
            v += (x[i] - m) * (x[i] - m) / (n - 1);
            double d = x[i] - b[i];
            dv += (d - dm) * (d - dm) / (n - 1);
            w += d > 0, l += d < 0, ties += d == 0;
        }
        double q = t_quantile2(0.05, (double)(n - 1)), se = sqrt(v / n), dse = sqrt(dv / n), t = dm / dse;
        ck_assert_msg(fabs(st.mean - m) < 1e-12 && fabs(st.sd - sqrt(v)) < 1e-12, "n %zu: mean/sd", n);
        ck_assert_msg(fabs(st.lo - (m - q * se)) < 1e-7 && fabs(st.hi - (m + q * se)) < 1e-7,
                      "n %zu: interval [%.9f, %.9f], expected [%.9f, %.9f]", n, st.lo, st.hi, m - q * se, m + q * se);
        ck_assert(st.paired);
        ck_assert_msg(fabs(st.d_mean - dm) < 1e-12 && fabs(st.d_lo - (dm - q * dse)) < 1e-7 &&
                      fabs(st.d_hi - (dm + q * dse)) < 1e-7, "n %zu: paired interval", n);
        ck_assert_msg(fabs(st.t - t) < 1e-9, "n %zu: t %.9g, expected %.9g", n, st.t, t);
        ck_assert_msg(fabs(st.p_t - t_tail2(t, (double)(n - 1))) < 1e-7, "n %zu: paired-t p %.9g, expected %.9g", n,
                      st.p_t, t_tail2(t, (double)(n - 1)));
        if (n == 2) /* one degree of freedom: the Cauchy distribution */
            ck_assert(fabs(st.p_t - (1 - 2 / M_PI * atan(fabs(t)))) < 1e-9);
        if (n == 3) /* two: P(|T| > t) = 1 - t / sqrt(2 + t^2) */
            ck_assert(fabs(st.p_t - (1 - fabs(t) / sqrt(2 + t * t))) < 1e-9);
        ck_assert_int_eq(st.wins, w);
        ck_assert_int_eq(st.losses, l);
        ck_assert_int_eq(st.ties, ties);
        ck_assert_msg(fabs(st.p_sign - sign_p(w, l)) < 1e-12, "n %zu: sign p %.9g, expected %.9g", n, st.p_sign,
                      sign_p(w, l));
    }
    /* the 8 seeds: the arm is below its baseline on average, not significantly at 1% */
    fp4s_rl_seedstat st;
    ck_assert_int_eq(fp4s_rl_seedstat_compute(x, b, 8, 0.95, &st), 0);
    ck_assert(st.d_mean < 0 && st.p_t > 0.01 && st.p_t < 0.2);
    /* equal differences: no t-test; no baseline: no pairing; bad input refused */
    const double y[3] = {0.5, 0.6, 0.7}, yb[3] = {0.4, 0.5, 0.6};
    ck_assert_int_eq(fp4s_rl_seedstat_compute(y, yb, 3, 0.95, &st), 0);
    ck_assert(isnan(st.p_t) && st.wins == 3 && fabs(st.p_sign - 0.25) < 1e-15);
    ck_assert_int_eq(fp4s_rl_seedstat_compute(y, NULL, 3, 0.9, &st), 0);
    ck_assert(!st.paired);
    ck_assert(fabs(st.hi - st.mean - t_quantile2(0.1, 2) * 0.1 / sqrt(3)) < 1e-7);
    ck_assert_int_eq(fp4s_rl_seedstat_compute(y, NULL, 1, 0.95, &st), FP4S_EINVAL);
    const double bad[2] = {0.5, NAN};
    ck_assert_int_eq(fp4s_rl_seedstat_compute(bad, NULL, 2, 0.95, &st), FP4S_EINVAL);
}
END_TEST

/* The outlier structure (fp4-rl(1), OUTLIERS): the same outlier channel(s)
 * in every norm's gains, outlier_gain times the others at the start, every
 * gain exactly 1 in the control; the step's measures of it equal an
 * independent recomputation from the captured inputs of qkv_proj and the
 * router (the same sequences: act_seqs = micro_batch), and tell the two apart. */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

START_TEST(outlier_structure)
{
    double kurt[2], ratio[2];
    for (int on = 0; on < 2; on++) {
        fp4s_rl_opts o;
        tiny_opts(&o);
        if (!on) o.outlier_gain = 1, o.outlier_frac = 0, o.gain_sigma = 0;
        o.act_every = 1;
        o.eval_every = 1;
        o.act_seqs = o.micro_batch;
        o.sft_max_steps = 0;
        snprintf(o.act_sites, sizeof o.act_sites, "*.qkv_proj,*.mlp.gate");
        /* the gains at the start */
        fp4s_rl *r;
        ck_assert_int_eq(fp4s_rl_open(&o, &r), 0);
        rl_task tk;
        rl_task_init(&tk, o.task);
        rl_cfg c = {.V = RL_VOCAB, .T = tk.prompt_len + tk.max_resp - 1, .C = o.width, .L = o.layers, .H = o.heads,
                    .E = o.experts, .K = o.top_k, .F = 2 * o.width};
        rl_layout lay;
        ck_assert_int_eq(rl_layout_init(&lay, &c), 0);
        ck_assert_uint_eq(lay.total, fp4s_rl_param_count(r));
        const float *P = fp4s_rl_policy(r);
        size_t norms[] = {lay.l[0].ln1, lay.l[0].ln2, lay.l[1].ln1, lay.l[1].ln2, lay.lnf}, top = 0;
        for (size_t n = 0; n < 5; n++) {
            const float *g = P + norms[n];
            size_t am = 0;
            for (size_t i = 1; i < (size_t)o.width; i++) if (g[i] > g[am]) am = i;
            if (!on) {
                for (size_t i = 0; i < (size_t)o.width; i++) ck_assert(g[i] == 1.0f);
                continue;
            }
            if (n == 0) top = am;
            ck_assert_msg(am == top, "norm %zu: the largest gain is channel %zu, not %zu", n, am, top);
            double rest = 0;
            for (size_t i = 0; i < (size_t)o.width; i++) if (i != am) rest = fmax(rest, g[i]);
            ck_assert_msg(g[am] > 3 * rest, "norm %zu: outlier gain %g, next %g", n, g[am], rest);
        }
        fp4s_rl_close(&r);
        rl_layout_free(&lay);
        fp4s_rl_stats st[2];
        run_capture(&o, 2, "rl_out.h5", st, 2);
        /* kurtosis and channel RMS ratio of the 2 L tensors, recomputed */
        double k = 0, q = 0;
        for (int t = 0; t < 4; t++) {
            char path[96];
            snprintf(path, sizeof path, "/steps/1/layers.%d.%s/trainer", t % 2, t < 2 ? "self_attn.qkv_proj" : "mlp.gate");
            size_t bytes;
            float *X = (float *)read_dataset("rl_out.h5", path, &bytes);
            size_t C = (size_t)o.width, M = bytes / sizeof *X / C;
            double mean = 0, m2 = 0, m4 = 0, ms[64] = {0};
            for (size_t i = 0; i < M * C; i++) mean += X[i] / (double)(M * C);
            for (size_t i = 0; i < M * C; i++) {
                double d = X[i] - mean;
                m2 += d * d / (double)(M * C);
                m4 += d * d * d * d / (double)(M * C);
                ms[i % C] += (double)X[i] * X[i];
            }
            k += m4 / (m2 * m2) / 4;
            qsort(ms, C, sizeof ms[0], cmp_dbl);
            q += sqrt(ms[C - 1] / ((ms[C / 2 - 1] + ms[C / 2]) / 2)) / 4;
            free(X);
        }
        ck_assert_msg(fabs(st[1].act_kurtosis - k) < 1e-9 * k, "kurtosis %.12g, recomputed %.12g", st[1].act_kurtosis, k);
        ck_assert_msg(fabs(st[1].act_outlier_ratio - q) < 1e-9 * q, "ratio %.12g, recomputed %.12g",
                      st[1].act_outlier_ratio, q);
        ck_assert(st[1].err_top1 > 0 && st[1].err_top1 <= 1);
        kurt[on] = k;
        ratio[on] = q;
        remove("rl_out.h5");
    }
    ck_assert_msg(kurt[0] < 6 && ratio[0] < 3, "control: kurtosis %g, ratio %g", kurt[0], ratio[0]);
    ck_assert_msg(kurt[1] > 10 && ratio[1] > 8, "outliers: kurtosis %g, ratio %g", kurt[1], ratio[1]);
}
END_TEST

/* Bad options are refused with a message naming them. */
START_TEST(bad_options)
{
    fp4s_rl_opts o;
    fp4s_rl *r = NULL;
    fp4s_rl_opts_defaults(&o);
    o.trainer = FP4S_RL_TRAINER_WFQ; /* with a BF16 rollout there is no quantizer to follow */
    ck_assert_int_eq(fp4s_rl_open(&o, &r), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "wfq") != NULL);
    fp4s_rl_opts_defaults(&o);
    o.width = 100;
    ck_assert_int_eq(fp4s_rl_opts_check(&o), FP4S_EINVAL);
    fp4s_rl_opts_defaults(&o);
    o.rollout = FP4S_RL_ROLLOUT_NVFP4;
    snprintf(o.profile, sizeof o.profile, "ocp"); /* an MXFP4-only profile */
    ck_assert_int_eq(fp4s_rl_opts_check(&o), FP4S_ENOTSUP);
    fp4s_rl_opts_defaults(&o);
    o.top_k = 5;
    ck_assert_int_eq(fp4s_rl_opts_check(&o), FP4S_EINVAL);
    fp4s_rl_opts_defaults(&o);
    o.prompts = 1000;
    o.group = 100; /* 100,000 samples a step */
    ck_assert_int_eq(fp4s_rl_opts_check(&o), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "at most 65536") != NULL);
    unsigned m;
    ck_assert_int_eq(fp4s_rl_sites_parse("qkv,experts", &m), 0);
    ck_assert_uint_eq(m, FP4S_RL_SITE_QKV | FP4S_RL_SITE_EXPERTS);
    ck_assert_int_eq(fp4s_rl_sites_parse("qkv,mlp", &m), FP4S_EINVAL);
    ck_assert(r == NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rl");
    const check_case cases[] = {
        /* gradients */
        CHECK_CASE(grad_fd_dense_like),
        CHECK_CASE(grad_fd_moe_top2),
        CHECK_CASE(grad_fd_moe_aux),
        CHECK_CASE(grad_fd_moe_top3_of_5),
        CHECK_CASE(float_matches_double),
        CHECK_CASE(wfq_is_straight_through),
        CHECK_CASE(lin_backward_is_straight_through),
        CHECK_CASE(fakequant_pads_columns),
        /* the loop */
        CHECK_CASE(task_sort_and_add),
        CHECK_CASE(grpo_gradient_is_the_loss_derivative),
        CHECK_CASE(adamw_matches_pytorch_formula),
        CHECK_CASE(same_capture_on_any_thread_count),
        CHECK_CASE(step_writes_the_schema),
        CHECK_CASE(capture_weights_are_the_steps_own),
        CHECK_CASE(seed_statistics),
        CHECK_CASE(outlier_structure),
        CHECK_CASE(bad_options),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 300);
    return s;
}

int main(void)
{
    if (rl_blas_open()) {
        fprintf(stderr, "test_rl: %s\n", fp4s_last_error());
        return 1;
    }
    return check_run(suite(), CK_NORMAL);
}
