/* One linear layer Y = f(X) W^T with a remedy (remedy.h): the prepared
 * weight, the forward pass with the rollout's residual compensation, and
 * the cost of each remedy. */
#include "remedy_internal.h"

#include <fp4scope/codec.h>

#include "base/xsum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fp4s_rlinear {
    fp4s_remedy r;
    fp4s_spec as, ws;
    size_t n, k;
    float *wmain;     /* [n, k] the weight operand of the main GEMM */
    float *wraw;      /* [n, k] W after weight-side noise (rac aug re-quantizes its columns), or NULL */
    fp4s_tscale wts;  /* tensor scale of wraw under ws */
    float *gain;      /* [k] aqn gain multipliers, or NULL */
    double w_kept;    /* weight entries kept in BF16 */
    double w_noise2, w_clean2; /* aqn weight/elem: ||W' - W||^2, ||W||^2 */
    bool rht;         /* the item rotates both operands first (rspec: the transform) */
    fp4s_spec rspec;
    const rm_gpu *gpu; /* where the GEMMs and rac's kernels run (NULL: the CPU) */
};

void rm_rlinear_set_gpu(fp4s_rlinear *L, const rm_gpu *g)
{
    if (L) L->gpu = g;
}

const fp4s_spec *rm_rlinear_rht(const fp4s_rlinear *L) { return L && L->rht ? &L->rspec : NULL; }

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

void fp4s_rlinear_close(fp4s_rlinear **L)
{
    if (!L || !*L) return;
    if ((*L)->wraw != (*L)->wmain) free((*L)->wraw);
    free((*L)->wmain);
    free((*L)->gain);
    free(*L);
    *L = NULL;
}

const float *fp4s_rlinear_weight(const fp4s_rlinear *L) { return L ? L->wmain : NULL; }

/* ---- cost ---------------------------------------------------------------------------- */
static void rm_cost(const fp4s_remedy *r, const fp4s_spec *as, const fp4s_spec *ws, size_t m, size_t n, size_t k,
                    size_t sel, size_t pad, size_t tiles, double kept_a, double kept_w, fp4s_remedy_cost *c)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->n = n;
    c->k = k;
    double M = (double)m, N = (double)n, K = (double)k, fb = 2.0 * M * N * K;
    double ab = rm_base_bits(as), wb = rm_base_bits(ws);
    c->flops_base = fb;
    c->bytes_base = (M * K * ab + N * K * wb) / 8.0 + 2.0 * M * N;
    if (r->kind != FP4S_RK_ROLLOUT) {
        /* trainers and bf16-rollout: a BF16 GEMM (fake quantization included) */
        c->flops_bf16 = fb;
        c->act_bits = c->weight_bits = 16.0;
        c->bytes = 2.0 * M * K + 2.0 * N * K + 2.0 * M * N;
    } else {
        bool fp8 = as->format == FP4S_FP8 || ws->format == FP4S_FP8;
        bool oa = r->of && rm_on_act(r), ow = r->of && rm_on_weight(r);
        double tx = oa ? 2.0 : 1.0, tw = ow ? 2.0 : 1.0;
        if (fp8) c->flops_fp8 = fb;
        else c->flops_fp4 = fb * tx * tw;
        c->act_bits = ab * tx;
        c->weight_bits = wb * tw;
        c->bytes = c->bytes_base + (oa ? M * K * ab / 8.0 : 0) + (ow ? N * K * wb / 8.0 : 0);
        /* what each component adds: its row (component.c) */
        rm_cost_in in = {.as = as, .ws = ws, .M = M, .N = N, .K = K, .ab = ab, .wb = wb, .tx = tx, .tw = tw,
                         .sel = sel, .pad = pad, .tiles = tiles, .kept_a = kept_a, .kept_w = kept_w};
        rm_cost_components(r, &in, c);
    }
    c->act_extra_bits = c->act_bits - ab;
    c->weight_extra_bits = c->weight_bits - wb;
    c->flops_extra = c->flops_fp4 + c->flops_fp8 + c->flops_bf16 + c->flops_fp32 - fb;
    c->bytes_extra = c->bytes - c->bytes_base;
    c->rac_channels = sel;
    c->rac_padded = pad;
    c->rac_tiles = sel ? tiles : 0;
    c->kept = kept_a + kept_w;
}

static size_t round_up(size_t v, size_t b) { return (v + b - 1) / b * b; }

static void rac_shape(const fp4s_remedy *r, const fp4s_spec *as, size_t m, size_t k, size_t *sel, size_t *pad,
                      size_t *tiles, size_t *trows)
{
    *sel = *pad = 0;
    *tiles = 1;
    *trows = m;
    if (!(r->kind == FP4S_RK_ROLLOUT && r->rac_ratio > 0)) return;
    *sel = rm_ceil_share(r->rac_ratio, k);
    *pad = r->rac_resid == FP4S_RAC_BF16 ? *sel : round_up(*sel, as->block);
    if (r->rac_tile_rows && r->rac_tile_rows < m) {
        *trows = r->rac_tile_rows;
        *tiles = (m + *trows - 1) / *trows;
    }
}

int fp4s_remedy_cost_predict(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt, size_t m,
                             size_t n, size_t k, fp4s_remedy_cost *cost)
{
    if (!cost) return fp4s_error_set(FP4S_EINVAL, "remedy cost: NULL argument");
    int rc = fp4s_remedy_check(r, act, wt, k);
    if (rc) return rc;
    fp4s_spec ws = *wt;
    size_t sel, pad, tiles, trows;
    rac_shape(r, act, m, k, &sel, &pad, &tiles, &trows);
    bool rollout = r->kind == FP4S_RK_ROLLOUT;
    double ka = rollout && r->keep && rm_on_act(r) ? (double)m * (double)(k / act->block) * r->keep : 0;
    double kw = rollout && r->keep && rm_on_weight(r) ? (double)n * (double)(k / ws.block) * r->keep : 0;
    rm_cost(r, act, &ws, m, n, k, sel, pad, tiles, ka, kw, cost);
    return 0;
}

/* ---- open ---------------------------------------------------------------------------- */
int fp4s_rlinear_open(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt, const float *W, size_t n,
                      size_t k, size_t ldw, fp4s_rlinear **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "remedy: NULL argument");
    *out = NULL;
    if (!r || !act || !wt || (n && !W)) return fp4s_error_set(FP4S_EINVAL, "remedy: NULL argument");
    int rc = fp4s_remedy_check(r, act, wt, k);
    if (rc) return rc;
    if (n == 0) return fp4s_error_set(FP4S_ESHAPE, "remedy '%s': the weight has no rows", fp4s_remedy_label(r));
    if (ldw < k)
        return fp4s_error_set(FP4S_EINVAL, "remedy: weight row stride %zu < K = %zu", ldw, k);
    if ((rc = rm_check_finite("weight", W, n, k, ldw))) return rc;
    fp4s_rlinear *L = calloc(1, sizeof *L);
    float *wa = xmalloc(n * k * sizeof *wa);
    if (!L || !wa) {
        free(L);
        free(wa);
        return fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
    }
    L->r = *r;
    L->as = *act;
    L->ws = *wt;
    L->n = n;
    L->k = k;
    for (size_t i = 0; i < n; i++) memcpy(wa + i * k, W + i * ldw, k * sizeof *wa);
    bool rollout = r->kind == FP4S_RK_ROLLOUT;
    /* the engine remedies are the engine's spec options on the operands they modify */
    if (rollout) {
        fp4s_spec *sp[2] = {&L->as, &L->ws};
        bool on[2] = {rm_on_act(r), rm_on_weight(r)};
        for (int i = 0; i < 2; i++)
            if (on[i]) rm_apply_specs(r, sp[i], i);
        if (r->rht) {
            L->rht = true;
            L->rspec = *act;
            L->rspec.rht = true;
            L->rspec.rht_signs = r->rht_signs;
        }
        if (!rc) rc = fp4s_spec_check(&L->as);
        if (!rc) rc = fp4s_spec_check(&L->ws);
    }
    if (rollout && r->aqn && r->aqn_target != FP4S_AQN_GAIN) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < k; j++) {
                double z = r->aqn_target == FP4S_AQN_WEIGHT ? fp4s_remedy_normal(r->aqn_seed, RM_STREAM_AQN_CHANNEL, j)
                                                            : fp4s_remedy_normal(r->aqn_seed, RM_STREAM_AQN_ELEM,
                                                                                 (uint64_t)i * k + j);
                float w0 = wa[i * k + j];
                wa[i * k + j] = w0 * (float)(1.0 + r->aqn_sigma * z);
                double d = (double)wa[i * k + j] - (double)w0;
                L->w_noise2 += d * d;
                L->w_clean2 += (double)w0 * (double)w0;
            }
    }
    if (!rc && L->rht) { /* rotate the weight along K (after its noise, before everything else) */
        float *wr = xmalloc(n * k * sizeof *wr);
        if (!wr) rc = fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
        else rc = fp4s_rht_apply(&L->rspec, wa, n, k, k, wr, k);
        if (rc) free(wr);
        else {
            free(wa);
            wa = wr;
        }
    }
    if (rc) {
        free(wa);
        fp4s_error_prefix("remedy '%s'", fp4s_remedy_label(r));
        fp4s_rlinear_close(&L);
        return rc;
    }
    if (r->kind == FP4S_RK_BF16 || r->kind == FP4S_RK_BF16_ROLLOUT) {
        L->wmain = wa;
        *out = L;
        return 0;
    }
    L->wmain = xmalloc(n * k * sizeof *L->wmain);
    if (!L->wmain) {
        free(wa);
        fp4s_rlinear_close(&L);
        return fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
    }
    if (rollout) {
        rm_opinfo info;
        rc = rm_operand(r, &L->ws, r->mbs_group && rm_on_weight(r), r->keep && rm_on_weight(r),
                        r->of && rm_on_weight(r), wa, n, k, k, L->wmain, &info);
        L->w_kept = info.kept;
    } else {
        rc = rm_qdq(&L->ws, wa, n, k, k, NULL, L->wmain, NULL, NULL, NULL);
    }
    if (!rc && rollout && r->rac_ratio > 0 && r->rac_resid == FP4S_RAC_AUG) {
        L->wraw = wa;
        wa = NULL;
        rc = fp4s_tscale_init(&L->ws, fp4s_spec_amax(&L->ws, L->wraw, n, k, k, NULL), &L->wts);
    }
    free(wa);
    if (!rc && rollout && r->aqn && r->aqn_target == FP4S_AQN_GAIN) {
        L->gain = xmalloc(k * sizeof *L->gain);
        if (!L->gain) rc = fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
        else
            for (size_t j = 0; j < k; j++)
                L->gain[j] = (float)(1.0 + r->aqn_sigma * fp4s_remedy_normal(r->aqn_seed, RM_STREAM_AQN_CHANNEL, j));
    }
    if (rc) {
        fp4s_error_prefix("remedy '%s': weight", fp4s_remedy_label(r));
        fp4s_rlinear_close(&L);
        return rc;
    }
    *out = L;
    return 0;
}

/* ---- residual activation compensation -------------------------------------------------- */
typedef struct chan {
    double e2;
    size_t j;
} chan;

static int cmp_chan(const void *pa, const void *pb)
{
    const chan *a = pa, *b = pb;
    if (a->e2 != b->e2) return a->e2 > b->e2 ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

static int cmp_size(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

/* rac-rand's channel set of tile t: the first sel entries of a partial
 * Fisher-Yates shuffle of 0..k-1 (remedy.h), into perm [sel]. */
static int rac_draw(const fp4s_remedy *r, size_t k, size_t sel, size_t t, size_t *perm)
{
    size_t *all = malloc(k * sizeof *all);
    if (!all) return fp4s_error_set(FP4S_ENOMEM, "remedy rac: out of memory");
    for (size_t j = 0; j < k; j++) all[j] = j;
    for (size_t i = 0; i < sel; i++) {
        double u = fp4s_remedy_uniform(r->rac_seed, RM_STREAM_RAC_RAND + t, i);
        size_t j = i + (size_t)(u * (double)(k - i));
        if (j >= k) j = k - 1;
        size_t tmp = all[i];
        all[i] = all[j];
        all[j] = tmp;
        perm[i] = all[i];
    }
    free(all);
    return 0;
}

/* Choose I for rows [r0, r1) of the tile t: idx[0..sel). The norms ||E_k||^2
 * are exact sums (acc [k], base/xsum.h) rounded once, so they do not depend on
 * the order of the terms: the GPU's kernels give the same doubles. */
static int rac_select(const fp4s_remedy *r, const float *xa, size_t ldx, const float *xq, size_t k, size_t r0,
                      size_t r1, size_t t, size_t sel, chan *ch, xsum *acc, size_t *idx)
{
    memset(acc, 0, k * sizeof *acc);
    for (size_t i = r0; i < r1; i++) {
        const float *a = xa + i * ldx, *q = xq + i * k;
        for (size_t j = 0; j < k; j++) {
            double d = (double)a[j] - (double)q[j];
            xs_add(&acc[j], d * d);
        }
    }
    for (size_t j = 0; j < k; j++) {
        ch[j].e2 = xs_value(&acc[j]);
        ch[j].j = j;
    }
    if (r->rac_random) {
        int rc = rac_draw(r, k, sel, t, idx);
        if (rc) return rc;
        if (r->rac_order == FP4S_RAC_ORDER_RANK) {
            chan *c2 = malloc(sel * sizeof *c2);
            if (!c2) return fp4s_error_set(FP4S_ENOMEM, "remedy rac: out of memory");
            for (size_t i = 0; i < sel; i++) c2[i] = ch[idx[i]];
            qsort(c2, sel, sizeof *c2, cmp_chan);
            for (size_t i = 0; i < sel; i++) idx[i] = c2[i].j;
            free(c2);
        } else {
            qsort(idx, sel, sizeof *idx, cmp_size);
        }
        return 0;
    }
    qsort(ch, k, sizeof *ch, cmp_chan);
    for (size_t i = 0; i < sel; i++) idx[i] = ch[i].j;
    if (r->rac_order == FP4S_RAC_ORDER_INDEX) qsort(idx, sel, sizeof *idx, cmp_size);
    return 0;
}

/* Y += the compensation of X^ = xq (residual E = xa - xq). tsx: the tensor
 * scale of the activation's quantization (aug). idx_out: when not NULL,
 * receives the channels of each tile [tiles * sel] (malloc'ed). */
static int rac_apply(const fp4s_rlinear *L, const float *xa, size_t ldx, const float *xq, const fp4s_tscale *tsx,
                     size_t m, float *Y, size_t ldy, double *secs, size_t **idx_out, float *xhat)
{
    const fp4s_remedy *r = &L->r;
    size_t k = L->k, n = L->n, sel, pad, tiles, trows;
    rac_shape(r, &L->as, m, k, &sel, &pad, &tiles, &trows);
    const bool dev = L->gpu && L->gpu->ops && L->gpu->ops->rac;
    chan *ch = dev ? NULL : malloc(k * sizeof *ch);
    xsum *acc = dev ? NULL : malloc(k * sizeof *acc);
    size_t *idx = malloc(tiles * sel * sizeof *idx);
    size_t mp = m * pad > 0 ? m * pad : 1, np = n * pad > 0 ? n * pad : 1;
    float *ec = calloc(mp, sizeof *ec);
    float *eq = malloc(mp * sizeof *eq);
    float *wc = calloc(np, sizeof *wc);
    float *wq = L->r.rac_resid == FP4S_RAC_AUG ? malloc(np * sizeof *wq) : NULL;
    int rc = 0;
    if ((!dev && (!ch || !acc)) || !idx || !ec || !eq || !wc || (r->rac_resid == FP4S_RAC_AUG && !wq)) {
        rc = fp4s_error_set(FP4S_ENOMEM, "remedy rac: out of memory");
        goto done;
    }
    if (dev) {
        /* the norms, the choice of I and E_I on the device (bit for bit the
         * loop below); rac-rand's sets are drawn here and ordered there */
        size_t *cand = NULL;
        if (r->rac_random) {
            cand = malloc(tiles * sel * sizeof *cand);
            if (!cand) rc = fp4s_error_set(FP4S_ENOMEM, "remedy rac: out of memory");
            for (size_t t = 0; !rc && t < tiles; t++) rc = rac_draw(r, k, sel, t, cand + t * sel);
        }
        fp4s_cu_rac_job jb = {xa, ldx, xq, m, k, trows, tiles, sel, pad, cand,
                              r->rac_order == FP4S_RAC_ORDER_RANK};
        fp4s_cu_rac_out o = {idx, ec, NULL};
        if (!rc) rc = L->gpu->ops->rac(L->gpu->ctx, &jb, &o);
        free(cand);
        if (rc) goto done;
    } else
        for (size_t t = 0; t < tiles; t++) {
            size_t r0 = t * trows, r1 = r0 + trows < m ? r0 + trows : m;
            size_t *I = idx + t * sel;
            if ((rc = rac_select(r, xa, ldx, xq, k, r0, r1, t, sel, ch, acc, I))) goto done;
            for (size_t i = r0; i < r1; i++)
                for (size_t p = 0; p < sel; p++) ec[i * pad + p] = xa[i * ldx + I[p]] - xq[i * k + I[p]];
        }
    if (r->rac_resid == FP4S_RAC_BF16) {
        for (size_t i = 0; i < m * pad; i++) eq[i] = fp4s_bf16_decode(fp4s_bf16_encode(ec[i], FP4S_TIE_EVEN));
    } else {
        rc = rm_qdq(&L->as, ec, m, pad, pad, r->rac_resid == FP4S_RAC_AUG ? tsx : NULL, eq, NULL, NULL, NULL);
        if (rc) goto done;
    }
    if (xhat) /* X^ on I: X^ + the residual as the compensation GEMM sees it (fp32 sum) */
        for (size_t t = 0; t < tiles; t++) {
            size_t r0 = t * trows, r1 = r0 + trows < m ? r0 + trows : m;
            const size_t *I = idx + t * sel;
            for (size_t i = r0; i < r1; i++)
                for (size_t p = 0; p < sel; p++) xhat[i * k + I[p]] += eq[i * pad + p];
        }
    for (size_t t = 0; t < tiles; t++) {
        size_t r0 = t * trows, r1 = r0 + trows < m ? r0 + trows : m;
        const size_t *I = idx + t * sel;
        const float *src = r->rac_resid == FP4S_RAC_AUG ? L->wraw : L->wmain;
        for (size_t i = 0; i < n; i++)
            for (size_t p = 0; p < sel; p++) wc[i * pad + p] = src[i * k + I[p]];
        const float *wuse = wc;
        if (r->rac_resid == FP4S_RAC_AUG) {
            rc = rm_qdq(&L->ws, wc, n, pad, pad, &L->wts, wq, NULL, NULL, NULL);
            if (rc) goto done;
            wuse = wq;
        }
        rc = rm_sgemm(L->gpu, r1 - r0, n, pad, eq + r0 * pad, pad, wuse, pad, 1.0f, Y + r0 * ldy, ldy, secs);
        if (rc) goto done;
    }
    if (idx_out) {
        *idx_out = idx;
        idx = NULL;
    }
done:
    free(ch);
    free(acc);
    free(idx);
    free(ec);
    free(eq);
    free(wc);
    free(wq);
    return rc;
}

/* ---- forward ----------------------------------------------------------------------------- */
int rm_forward_ex(const fp4s_rlinear *L, const float *X, size_t m, size_t ldx, float *Y, size_t ldy,
                  fp4s_remedy_cost *cost, rm_fwd_info *info)
{
    float *xhat_out = info ? info->xhat : NULL;
    size_t **rac_idx = info ? &info->rac_idx : NULL;
    if (info) {
        info->rac_idx = NULL;
        info->noise2 = L ? L->w_noise2 : 0;
        info->clean2 = L ? L->w_clean2 : 0;
    }
    if (!L || (m && (!X || !Y))) return fp4s_error_set(FP4S_EINVAL, "remedy forward: NULL argument");
    const fp4s_remedy *r = &L->r;
    size_t k = L->k, n = L->n;
    if (ldx < k) return fp4s_error_set(FP4S_EINVAL, "remedy forward: activation row stride %zu < K = %zu", ldx, k);
    if (ldy < n) return fp4s_error_set(FP4S_EINVAL, "remedy forward: output row stride %zu < N = %zu", ldy, n);
    int rc = rm_check_finite("activation", X, m, k, ldx);
    if (rc) return rc;
    double secs = 0;
    double kept_a = 0;
    size_t sel = 0, pad = 0, tiles = 1, trows = m;
    float *xa = NULL, *xq = NULL;
    const float *xin = X;
    size_t ldin = ldx;
    if (r->kind == FP4S_RK_BF16 || r->kind == FP4S_RK_BF16_ROLLOUT || r->kind == FP4S_RK_WFQ) {
        rc = rm_sgemm(L->gpu, m, n, k, X, ldx, L->wmain, k, 0.0f, Y, ldy, &secs);
        if (!rc && xhat_out)
            for (size_t i = 0; i < m; i++) memcpy(xhat_out + i * k, X + i * ldx, k * sizeof *X);
        goto finish;
    }
    xq = xmalloc(m * k * sizeof *xq);
    if (!xq) {
        rc = fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
        goto finish;
    }
    if (r->kind == FP4S_RK_W4A4QAT) {
        rc = rm_qdq(&L->as, X, m, k, ldx, NULL, xq, NULL, NULL, NULL);
        if (!rc) rc = rm_sgemm(L->gpu, m, n, k, xq, k, L->wmain, k, 0.0f, Y, ldy, &secs);
        if (!rc && xhat_out) memcpy(xhat_out, xq, m * k * sizeof *xq);
        goto finish;
    }
    if (L->gain) {
        xa = xmalloc(m * k * sizeof *xa);
        if (!xa) {
            rc = fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
            goto finish;
        }
        double n2 = 0, c2 = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < k; j++) {
                float x0 = X[i * ldx + j];
                xa[i * k + j] = x0 * L->gain[j];
                double d = (double)xa[i * k + j] - (double)x0;
                n2 += d * d;
                c2 += (double)x0 * (double)x0;
            }
        if (info) {
            info->noise2 = n2;
            info->clean2 = c2;
        }
        xin = xa;
        ldin = k;
    }
    if (L->rht) { /* rotate the activation along K before everything else */
        float *xr = xmalloc(m * k * sizeof *xr);
        if (!xr) {
            rc = fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
            goto finish;
        }
        rc = fp4s_rht_apply(&L->rspec, xin, m, k, ldin, xr, k);
        free(xa);
        xa = xr;
        xin = xa;
        ldin = k;
        if (rc) goto finish;
    }
    rm_opinfo oi;
    rc = rm_operand(r, &L->as, r->mbs_group && rm_on_act(r), r->keep && rm_on_act(r), r->of && rm_on_act(r), xin,
                    m, k, ldin, xq, &oi);
    if (rc) goto finish;
    kept_a = oi.kept;
    rc = rm_sgemm(L->gpu, m, n, k, xq, k, L->wmain, k, 0.0f, Y, ldy, &secs);
    if (rc) goto finish;
    if (xhat_out) memcpy(xhat_out, xq, m * k * sizeof *xq);
    if (r->rac_ratio > 0) {
        rac_shape(r, &L->as, m, k, &sel, &pad, &tiles, &trows);
        rc = rac_apply(L, xin, ldin, xq, &oi.ts, m, Y, ldy, &secs, rac_idx, xhat_out);
        if (rc) goto finish;
    }
finish:
    free(xa);
    free(xq);
    if (rc) {
        fp4s_error_prefix("remedy '%s'", fp4s_remedy_label(r));
        return rc;
    }
    if (cost) {
        rm_cost(r, &L->as, &L->ws, m, n, k, sel, pad, tiles, kept_a, L->w_kept, cost);
        cost->gemm_seconds = secs;
    }
    return 0;
}

int fp4s_rlinear_forward(const fp4s_rlinear *L, const float *X, size_t m, size_t ldx, float *Y, size_t ldy,
                         fp4s_remedy_cost *cost)
{
    return rm_forward_ex(L, X, m, ldx, Y, ldy, cost, NULL);
}

int fp4s_remedy_linear(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt, const float *X, size_t m,
                       size_t ldx, const float *W, size_t n, size_t k, size_t ldw, float *Y, size_t ldy,
                       fp4s_remedy_cost *cost)
{
    fp4s_rlinear *L = NULL;
    int rc = fp4s_rlinear_open(r, act, wt, W, n, k, ldw, &L);
    if (rc) return rc;
    rc = fp4s_rlinear_forward(L, X, m, ldx, Y, ldy, cost);
    fp4s_rlinear_close(&L);
    return rc;
}
