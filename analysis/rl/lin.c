/* The linear layers of one side (trainer or rollout engine): Y = f(X) W^T
 * with the side's numerics, through cblas sgemm.
 *
 *   fp32     X W^T in float32 (the exact reference).
 *   bf16     bf16(X) bf16(W)^T, float32 accumulation.
 *   quant    Qa(X) Qw(W)^T: both operands quantized and dequantized exactly
 *            (fp4s_quantize with the side's specs), float32 accumulation of the
 *            exact dequantized values, which is what an FP4/FP8 tensor core
 *            computes up to the order of the additions. Activations: the tensor
 *            scale (NVFP4, FP8 per tensor) is the amax of this call's rows, the
 *            rows a real engine would quantize together; columns are
 *            zero-padded to the block (FP8 1x128 tiles of a 64-wide layer).
 * Sites whose class is not in quant_sites use bf16. The rollout engine adds
 * drift (fp4s_rl_drift): K summed in two halves added afterwards (a split-K
 * kernel), and optionally outputs rounded to BF16 (engines that keep
 * activations in BF16).
 *
 * With a remedy (<fp4scope/remedy.h>), the rollout's quantized sites are one
 * fp4s_rlinear handle each, opened at every sync on the new weights: the
 * remedy's GEMMs replace the ones above (and the split-K drift). A trainer
 * aligned with it (wfq) takes the handle's weight operand, without aqn noise.
 *
 * Backward (trainer): straight-through estimator. dX = dY Weff, dW += dY^T f(X):
 * the gradient of the quantized product is passed to the master weights and
 * to X unchanged. */
#include "rl_internal.h"
#include "core/blas.h"
#include "core/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- GEMM ------------------------------------------------------------------------ */
int rl_blas_open(void)
{
    /* the BLAS only where the process asked for it (core/gemm.h) */
    if (fp4s_get_gemm() != FP4S_GEMM_BLAS) return 0;
    if (!fp4s_blas()) {
        fp4s_error_prefix("rl (FP4S_GEMM=blas)");
        return FP4S_ENOTSUP;
    }
    return 0;
}

/* On the calling thread (a worker's): core/gemm.h. */
static int gemm_timed(bool ta, bool tb, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                      size_t ldb, float beta, float *C, size_t ldc, rl_prof *p)
{
    double t0 = p ? rl_now() : 0;
    int rc = fp4s_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, 1);
    if (p) {
        p->t[RL_T_GEMM] += rl_now() - t0;
        p->gemm_flop += 2ull * M * N * K;
    }
    return rc;
}

int rl_sgemm_nt(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p)
{
    return gemm_timed(false, true, M, N, K, A, lda, B, ldb, beta, C, ldc, p);
}

int rl_sgemm_nn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p)
{
    return gemm_timed(false, false, M, N, K, A, lda, B, ldb, beta, C, ldc, p);
}

int rl_sgemm_tn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
                 float beta, float *C, size_t ldc, rl_prof *p)
{
    return gemm_timed(true, false, M, N, K, A, lda, B, ldb, beta, C, ldc, p);
}

void rl_bf16_round(const float *src, float *dst, size_t n)
{
    uint16_t t[1024];
    for (size_t i = 0; i < n; i += 1024) {
        size_t k = n - i < 1024 ? n - i : 1024;
        fp4s_f32_to_bf16(src + i, t, k);
        fp4s_bf16_to_f32(t, dst + i, k);
    }
}

/* ---- scratch ----------------------------------------------------------------------- */
static int grow(float **buf, size_t *cap, size_t n)
{
    if (*cap >= n) return 0;
    float *nb = realloc(*buf, n * sizeof *nb);
    if (!nb) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory (%zu floats of scratch)", n);
    *buf = nb;
    *cap = n;
    return 0;
}

void rl_scratch_free(rl_scratch *s)
{
    if (!s) return;
    free(s->a);
    free(s->b);
    *s = (rl_scratch){0};
}

/* ---- quantize-dequantize -------------------------------------------------------------- */
static size_t col_block(const fp4s_spec *s)
{
    if (s->format == FP4S_FP8) return s->fp8_gran == FP4S_FP8_TENSOR ? 1 : 128;
    return s->block;
}

/* Rows per fp4s_quantize call: below the library's threading grain, so that a
 * call made on one of our workers stays on it. */
static size_t chunk_rows(const fp4s_spec *s, size_t cols, size_t rows)
{
    size_t align = fp4s_spec_row_align(s);
    if (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR) return rows;
    size_t r = 60000 / (cols ? cols : 1);
    r = r / align * align;
    return r < align ? align : r;
}

int rl_fakequant(const fp4s_spec *s, const float *x, size_t M, size_t K, size_t ld, float *out, size_t ldo,
                 rl_scratch *ws)
{
    if (!M) return 0;
    double t0 = rl_now();
    size_t blk = col_block(s), Kp = (K + blk - 1) / blk * blk;
    const float *src = x;
    size_t lds = ld;
    float *dst = out;
    size_t ldd = ldo;
    int rc;
    if (Kp != K) {
        if ((rc = grow(&ws->b, &ws->cap_b, 2 * M * Kp))) return rc;
        float *pad = ws->b;
        for (size_t m = 0; m < M; m++) {
            memcpy(pad + m * Kp, x + m * ld, K * sizeof *pad);
            memset(pad + m * Kp + K, 0, (Kp - K) * sizeof *pad);
        }
        src = pad;
        lds = Kp;
        dst = ws->b + M * Kp;
        ldd = Kp;
    }
    size_t ch = chunk_rows(s, Kp, M);
    float amax = 0.0f;
    for (size_t r = 0; r < M; r += ch) {
        size_t n = M - r < ch ? M - r : ch;
        float a = fp4s_amax(src + r * lds, n, Kp, lds, NULL);
        amax = a > amax ? a : amax;
    }
    fp4s_tscale ts;
    if ((rc = fp4s_tscale_init(s, amax, &ts))) return rc;
    for (size_t r = 0; r < M; r += ch) {
        size_t n = M - r < ch ? M - r : ch;
        fp4s_qout q = {.dequant = dst + r * ldd, .ld_dequant = ldd};
        if ((rc = fp4s_quantize(s, &ts, src + r * lds, n, Kp, lds, r, &q, NULL))) return rc;
    }
    if (Kp != K)
        for (size_t m = 0; m < M; m++) memcpy(out + m * ldo, dst + m * ldd, K * sizeof *out);
    ws->prof.t[RL_T_QUANT] += rl_now() - t0;
    return 0;
}

/* ---- the linear layers of a side -------------------------------------------------------- */
static void site_ops(const rl_lin *L, int site, rl_op *act, rl_op *w)
{
    if (L->num.fp32) {
        *act = *w = RL_OP_FP32;
        return;
    }
    bool q = (L->num.quant_sites & L->lay->sites[site].cls) != 0;
    *act = q ? L->num.act : RL_OP_BF16;
    *w = q ? L->num.weight : RL_OP_BF16;
}

bool rl_lin_site_quant(const rl_lin *L, int site)
{
    rl_op a, w;
    site_ops(L, site, &a, &w);
    return a == RL_OP_QUANT || w == RL_OP_QUANT;
}

int rl_lin_init(rl_lin *L, const rl_cfg *c, const rl_layout *lay, const rl_num *num)
{
    *L = (rl_lin){.cfg = c, .lay = lay, .num = *num, .cur = num->remedy};
    if (num->has_remedy && !num->remedy_weight_only &&
        !(L->rh = calloc((size_t)lay->nsites, sizeof *L->rh)))
        return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
    if (num->act == RL_OP_QUANT && fp4s_spec_check(&num->spec_a)) return FP4S_EINVAL;
    if (num->weight == RL_OP_QUANT && fp4s_spec_check(&num->spec_w)) return FP4S_EINVAL;
    if (!num->fp32 && !(L->weff = calloc(lay->total, sizeof *L->weff)))
        return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory for %zu weights", lay->total);
    return 0;
}

void rl_lin_free(rl_lin *L)
{
    if (!L) return;
    if (L->rh)
        for (int i = 0; i < L->lay->nsites; i++) fp4s_rlinear_close(&L->rh[i]);
    free(L->rh);
    free(L->weff);
    L->weff = NULL;
    L->rh = NULL;
}

/* The remedy of one site for this sync: per-site noise seeds for aqn. */
static fp4s_remedy site_remedy(const rl_lin *L, int site)
{
    fp4s_remedy r = L->cur;
    if (r.aqn) r.aqn_seed = rl_hash(L->cur.aqn_seed, 0x51u, (uint64_t)site, 0) >> 1;
    return r;
}

int rl_lin_sync(rl_lin *L, const float *P, rl_prof *prof)
{
    L->P = P;
    if (L->num.fp32) return 0;
    rl_scratch ws = {0};
    int rc = 0;
    for (int i = 0; i < L->lay->nsites && !rc; i++) {
        const rl_site *s = &L->lay->sites[i];
        rl_op a, w;
        site_ops(L, i, &a, &w);
        const float *src = P + s->off;
        float *dst = L->weff + s->off;
        if (w == RL_OP_QUANT && L->num.has_remedy) {
            /* the remedy's weight operand: the rollout keeps the handle for its forward;
             * the trainer (weight_only) copies the operand without the rollout's noise */
            double t0 = rl_now();
            fp4s_remedy rem = site_remedy(L, i);
            if (L->num.remedy_weight_only) rem.aqn = false;
            fp4s_rlinear *h = NULL;
            rc = fp4s_rlinear_open(&rem, &L->num.spec_a, &L->num.spec_w, src, s->N, s->K, s->K, &h);
            if (!rc) memcpy(dst, fp4s_rlinear_weight(h), s->N * s->K * sizeof *dst);
            if (!rc && L->rh) {
                fp4s_rlinear_close(&L->rh[i]);
                L->rh[i] = h;
            } else {
                fp4s_rlinear_close(&h);
            }
            ws.prof.t[RL_T_QUANT] += rl_now() - t0;
            if (rc) fp4s_error_prefix("rl: %s", s->name);
        } else if (w == RL_OP_QUANT)
            rc = rl_fakequant(&L->num.spec_w, src, s->N, s->K, s->K, dst, s->K, &ws);
        else if (w == RL_OP_BF16)
            rl_bf16_round(src, dst, s->N * s->K);
        else
            memcpy(dst, src, s->N * s->K * sizeof *dst);
    }
    if (prof) prof->t[RL_T_QUANT] += ws.prof.t[RL_T_QUANT];
    rl_scratch_free(&ws);
    return rc;
}

/* f(X) for a site into ws->a (or X itself for fp32). */
static int act_op(const rl_lin *L, int site, const float *X, size_t ldx, size_t M, const float **Xop,
                  size_t *ldop, rl_scratch *ws)
{
    rl_op a, w;
    site_ops(L, site, &a, &w);
    size_t K = L->lay->sites[site].K;
    if (a == RL_OP_FP32) {
        *Xop = X;
        *ldop = ldx;
        return 0;
    }
    int rc = grow(&ws->a, &ws->cap_a, M * K);
    if (rc) return rc;
    if (a == RL_OP_QUANT) {
        if ((rc = rl_fakequant(&L->num.spec_a, X, M, K, ldx, ws->a, K, ws))) return rc;
    } else {
        for (size_t m = 0; m < M; m++) rl_bf16_round(X + m * ldx, ws->a + m * K, K);
    }
    *Xop = ws->a;
    *ldop = K;
    return 0;
}

static const float *site_weight(const rl_lin *L, int site)
{
    const rl_site *s = &L->lay->sites[site];
    return L->num.fp32 ? L->P + s->off : L->weff + s->off;
}

int rl_lin_fwd(const rl_lin *L, int site, const float *X, size_t ldx, size_t M, float *Y, size_t ldy,
               rl_scratch *ws)
{
    if (!M) return 0;
    const rl_site *s = &L->lay->sites[site];
    if (L->rh && L->rh[site]) {
        /* the remedy's own GEMMs replace the engine's; its BLAS time is GEMM time */
        fp4s_remedy_cost cost;
        double t0 = rl_now();
        int rc = fp4s_rlinear_forward(L->rh[site], X, M, ldx, Y, ldy, &cost);
        if (rc) {
            fp4s_error_prefix("rl: %s", s->name);
            return rc;
        }
        ws->prof.t[RL_T_GEMM] += cost.gemm_seconds;
        ws->prof.t[RL_T_QUANT] += rl_now() - t0 - cost.gemm_seconds;
        ws->prof.gemm_flop += (uint64_t)(cost.flops_fp4 + cost.flops_fp8 + cost.flops_bf16);
        if (L->num.drift == FP4S_RL_DRIFT_SPLITK_BF16)
            for (size_t m = 0; m < M; m++) rl_bf16_round(Y + m * ldy, Y + m * ldy, s->N);
        return 0;
    }
    const float *Xop;
    size_t ldop;
    int rc = act_op(L, site, X, ldx, M, &Xop, &ldop, ws);
    if (rc) return rc;
    const float *W = site_weight(L, site);
    if (L->num.drift != FP4S_RL_DRIFT_NONE && !L->num.fp32 && s->K >= 2) {
        size_t K1 = s->K / 2;
        if ((rc = rl_sgemm_nt(M, s->N, K1, Xop, ldop, W, s->K, 0.0f, Y, ldy, &ws->prof)) ||
            (rc = rl_sgemm_nt(M, s->N, s->K - K1, Xop + K1, ldop, W + K1, s->K, 1.0f, Y, ldy, &ws->prof)))
            return rc;
        if (L->num.drift == FP4S_RL_DRIFT_SPLITK_BF16)
            for (size_t m = 0; m < M; m++) rl_bf16_round(Y + m * ldy, Y + m * ldy, s->N);
    } else {
        rc = rl_sgemm_nt(M, s->N, s->K, Xop, ldop, W, s->K, 0.0f, Y, ldy, &ws->prof);
    }
    return rc;
}

int rl_lin_bwd(const rl_lin *L, int site, const float *X, size_t ldx, size_t M, const float *dY, size_t ldy,
               float *dX, size_t lddx, bool accumulate, float *dW, rl_scratch *ws)
{
    if (!M) return 0;
    const rl_site *s = &L->lay->sites[site];
    const float *W = site_weight(L, site);
    int rc = 0;
    if (dX && (rc = rl_sgemm_nn(M, s->K, s->N, dY, ldy, W, s->K, accumulate ? 1.0f : 0.0f, dX, lddx, &ws->prof)))
        return rc;
    if (dW) {
        const float *Xop;
        size_t ldop;
        if ((rc = act_op(L, site, X, ldx, M, &Xop, &ldop, ws))) return rc;
        rc = rl_sgemm_tn(s->N, s->K, M, dY, ldy, Xop, ldop, 1.0f, dW, s->K, &ws->prof);
    }
    return rc;
}
