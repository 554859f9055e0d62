/* The scalar C reference of every quantizer (the table fp4s_kernels_ref).
 *
 * This file is the definition that the SIMD and CUDA paths are checked
 * against bit for bit. Every fp32 operation of a recipe is written out in the
 * engine's order, one IEEE operation per C expression (the build uses
 * -ffp-contract=off semantics: no FMA contraction). The recipes, and the
 * engine source each follows, are documented in quant.h and
 * man/fp4scope-formats.7.
 *
 * Stats: err2 and x2 are added unit by unit (a block, or 16 FP8 elements of
 * a row) in the one order of cpu/quant_sums.h into exact accumulators;
 * elements of blocks that decode to NaN (NaN scale) are left out of both
 * sums. With st == NULL (codes only) the sums are not computed and nothing
 * is recorded; every output byte is the same. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu/kernels.h"
#include "base/approx.h"
#include "base/codec_internal.h"

typedef struct acc {
    fp4s_qstats st;   /* counters (its sums unused here) */
    qsums q;
    bool sums;        /* false: codes only (st == NULL), no err2/x2 */
} acc;

/* The lanes of one unit (quant_sums.h): element j in lane j mod 8. */
typedef struct bsum { double e2[8], x2[8]; } bsum;

static inline void bsum_elem(bsum *b, size_t j, float x, float d)
{
    if (!isfinite(x)) return;
    double e = (double)d - (double)x;
    b->e2[j & 7] += e * e;
    b->x2[j & 7] += (double)x * (double)x;
}

static inline void acc_block(acc *a, const bsum *b)
{
    if (a->sums) qs_unit(&a->q, b->e2, b->x2);
}

static void acc_flush(acc *a, fp4s_qstats *st)
{
    if (!st) return;
    memcpy(a->st.sums, &a->q, sizeof a->q);
    fp4s_qstats_add(st, &a->st);
}

/* Block scan: abs max without NaN (amax, may be Inf), abs max of the finite
 * values (famax), NaN and Inf counts. */
typedef struct bscan { float amax, famax; unsigned nan, inf; } bscan;

/* A block's non-finite counts (scanned into b) added to the statistics. */
static inline void count_nonfinite(fp4s_qstats *st, const bscan *b)
{
    st->nan += b->nan;
    st->inf += b->inf;
    st->nonfinite += b->nan + b->inf;
    if (b->nan || b->inf) st->nonfinite_blocks++;
}

static inline void scan_add(bscan *b, const float *x, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (a != a) { b->nan++; continue; }
        if (a == INFINITY) { b->inf++; b->amax = a; continue; }
        if (a > b->amax) b->amax = a;
        if (a > b->famax) b->famax = a;
    }
}

/* Does this block become a NaN block under the policy? (then: NaN scale code,
 * every element code 0, dequantized NaN) */
static inline bool nan_block(const fp4s_spec *s, const bscan *b)
{
    if (s->nonfinite == FP4S_NF_BLOCK_NAN) return b->nan || b->inf;
    if (s->nonfinite == FP4S_NF_SCALE_NAN) return b->nan != 0;
    return false;
}

/* ======================================================================= MXFP4 */

static float pow2f(int k) /* exact 2^k for k in [-149, 127] */
{
    if (k >= -126) return fp4s_bits_f32((uint32_t)(k + 127) << 23);
    return fp4s_bits_f32(1u << (k + 149));
}

/* The cvt policy's amax of a block of NaNs: bf16 max of NaNs gives the
 * canonical bf16 NaN 0x7FFF, widened to float. */
static inline float cvt_nan_amax(void) { return fp4s_bits_f32(0x7FFF0000u); }

/* The factor an MXFP4 block's elements are multiplied by, from its scale code
 * (fp4s_mx_elem); *ftz: the multiply flushes subnormals. Code 0xFF only
 * reaches the engines' kinds (the exact kind makes a NaN block). */
static float mx_factor(fp4s_mx_elem e, uint8_t code, bool *ftz)
{
    *ftz = false;
    switch (e) {
    case FP4S_MX_ELEM_ZERO0:
        /* vLLM: SFValue = 2^(code-127) as bits, 1/SFValue (IEEE), 0 for code 0 */
        return code == 0 ? 0.0f : pow2f(127 - (int)code);
    case FP4S_MX_ELEM_EX2_FTZ:
        /* FlashInfer: vecMax != 0 ? exp2f(127 - code) : 0 under -use_fast_math
         * (ex2.approx.ftz); its vecMax is 0 exactly when the code is 0 */
        *ftz = true;
        return code == 0 ? 0.0f : fp4s_ex2_approx_ftz_int(127 - (int)code);
    case FP4S_MX_ELEM_RCP_FTZ: {
        /* vLLM before PR #43557: SFValue = bits(code << 23), outputScale =
         * SFValue != 0 ? rcp(SFValue * rcp(1)) : 0 */
        if (code == 0) return 0.0f;
        float sf = fp4s_bits_f32((uint32_t)code << 23);
        return fp4s_rcp_approx_ftz(sf * fp4s_rcp_approx_ftz(1.0f));
    }
    case FP4S_MX_ELEM_EXACT:
    case FP4S_MX_ELEM_COUNT:
        break;
    }
    return pow2f(127 - (int)code);
}

static int mx_quant(const fp4s_spec *s, const float *x, size_t rows, size_t cols,
                    size_t ld, size_t row0, const fp4s_qout *o, acc *a)
{
    const size_t B = s->block, nb = cols / B;
    const bool ignore = s->nonfinite == FP4S_NF_IGNORE;
    const bool cvt = s->nonfinite == FP4S_NF_CVT;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        uint8_t *cr = o->codes ? o->codes + r * o->ld_codes : NULL;
        uint8_t *sr = o->scales ? o->scales + r * o->ld_scales : NULL;
        float *dr = o->dequant ? o->dequant + r * o->ld_dequant : NULL;
        for (size_t b = 0; b < nb; b++) {
            const float *xb = xr + b * B;
            bscan sc = {0};
            scan_add(&sc, xb, B);
            a->st.blocks++;
            a->st.elements += B;
            count_nonfinite(&a->st, &sc);
            uint8_t code = 0xFF;
            if (cvt && sc.nan == B) sc.amax = cvt_nan_amax();
            if (nan_block(s, &sc)) {
                /* code 0xFF */
            } else if (sc.amax == 0.0f) {
                code = s->mx_zero_block_code;
                a->st.zero_blocks++;
            } else {
                bool low = false;
                int k = fp4s_mx_k(s->mx_rule, sc.amax, &low);
                if (low) a->st.scale_underflow++;
                code = (uint8_t)(k + 127); /* 0xFF: the rule's own NaN scale (even-nan) */
            }
            if (code == 0xFF && s->mx_elem == FP4S_MX_ELEM_EXACT) {
                if (sr) sr[b] = 0xFF;
                for (size_t j = 0; j < B; j++) {
                    if (cr) cr[b * B + j] = 0;
                    if (dr) dr[b * B + j] = NAN;
                }
                continue;
            }
            if (sr) sr[b] = code;
            /* the engines' kinds run their arithmetic even on a NaN scale
             * (the block then decodes to NaN and stays out of the sums) */
            bool ftz;
            const float inv = mx_factor(s->mx_elem, code, &ftz);
            const float X = fp4s_e8m0_decode(code);
            const bool sums = a->sums && code != 0xFF;
            bsum bs = {{0}, {0}};
            for (size_t j = 0; j < B; j++) {
                float xv = xb[j];
                uint8_t q;
                if (ignore && !isfinite(xv)) {
                    q = 0;
                } else {
                    /* exact where it matters: a power of two (or 0) */
                    float v = ftz ? fp4s_mul_ftz(xv, inv) : xv * inv;
                    q = cvt && isnan(v) ? 7
                        : s->sr ? fp4s_e2m1_encode_sr(s, v, fp4s_sr_bits(s->sr_seed, (row0 + r) * cols + b * B + j))
                                : fp4s_e2m1_encode_spec(s, v);
                    if (fabsf(v) > 6.0f) a->st.saturated++;
                }
                if (q == 8) a->st.neg_zero++;
                float d = fp4s_e2m1_decode(q) * X;
                if (cr) cr[b * B + j] = q;
                if (dr) dr[b * B + j] = d;
                if (sums) bsum_elem(&bs, j, xv, d);
            }
            acc_block(a, &bs);
        }
    }
    return 0;
}

/* ======================================================================= NVFP4 */

/* Per-block scale computation of one recipe. Returns the stored scale byte and
 * the factors needed for the elements. */
typedef struct nv_blk {
    uint8_t code;     /* stored scale byte */
    float sbv;        /* decoded block scale */
    float enc;        /* FP4S_NV_ELEM_MUL: encode factor (x * enc) */
    float div;        /* FP4S_NV_ELEM_DIV: divisor (x / div) */
    float dq;         /* FP4S_NV_DQ_TOTAL: dequant factor (q * dq) */
    bool ftz;         /* x * enc is mul.rn.ftz (a kernel built with -use_fast_math) */
    bool clamped;     /* the unrounded block scale exceeds 464: past 448, E4M3's top (fp4s_qstats.scale_clamped) */
} nv_blk;

/* float32 -> BF16 (round to nearest even on the bits) -> float32; NaN stays NaN. */
static float bf16_rne(float v)
{
    if (v != v) return v;
    uint32_t u = fp4s_f32_bits(v);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    return fp4s_bits_f32(u);
}

static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static void nv_scale(const fp4s_spec *s, const fp4s_tscale *ts, float amax_b, nv_blk *o)
{
    switch (s->nv_recipe) {
    case FP4S_NV_TE:
    case FP4S_NV_TE_SDIV:
    case FP4S_NV_TE_SDIV0:
    case FP4S_NV_TE_BF16: {
        /* TransformerEngine reference_nvfp4.py / the CUDA kernel:
         * s_b = e4m3(min(amax_b * (S_enc * (1/6)), FLT_MAX)) satfinite,
         * enc = min(1 / (float(s_b) * S_dec), FLT_MAX); the tuned kernel before
         * PR #2639 and PR #3045's per-token kernel divide once, S_enc / s_b
         * (PR #3045: 0 for a zero scale); with NVTE_USE_FAST_MATH that quotient
         * is rounded to BF16 (bf16 max 0x7F7F) */
        float mult = ts->s_enc * (1.0f / 6.0f);
        float sbf = amax_b * mult;
        if (sbf > FLT_MAX) sbf = FLT_MAX;
        o->clamped = sbf > 464.0f;
        o->code = fp4s_e4m3_encode(sbf, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        float enc;
        if (s->nv_recipe == FP4S_NV_TE) {
            float den = o->sbv * ts->s_dec;
            enc = 1.0f / den;
            if (enc > FLT_MAX) enc = FLT_MAX;
        } else if (s->nv_recipe == FP4S_NV_TE_SDIV0 && o->sbv == 0.0f) {
            enc = 0.0f;
        } else {
            enc = ts->s_enc / o->sbv;
            float top = s->nv_recipe == FP4S_NV_TE_BF16 ? fp4s_bits_f32(0x7F7F0000u) : FLT_MAX;
            if (enc > top) enc = top;
            if (s->nv_recipe == FP4S_NV_TE_BF16) enc = bf16_rne(enc);
        }
        o->enc = enc;
        break;
    }
    case FP4S_NV_TORCHAO_DIV:
    case FP4S_NV_TORCHAO_RCP:
    case FP4S_NV_TORCHAO_CUDA:
    case FP4S_NV_TORCHAO_DIV_CUDA: {
        /* torchao nvfp4_tensor.py nvfp4_quantize (two-level):
         * block_scale = amax_b / 6 (on CUDA amax_b * fl(1/6): PyTorch divides
         * a tensor by a Python scalar as a multiply by its reciprocal);
         * scaled = block_scale / pts; s_b = e4m3(clamp(scaled, 2^-6, 448));
         * up to 0.16 v = x / (pts * s_b), since 0.17 v = x * ((1/pts) / s_b)
         * with 1/pts = s_enc. torch.clamp keeps NaN (pts = 0 for an all-zero
         * tensor gives 0/0). Dequantized q * (pts * s_b) either way. */
        const bool cuda = s->nv_recipe == FP4S_NV_TORCHAO_CUDA || s->nv_recipe == FP4S_NV_TORCHAO_DIV_CUDA;
        float pts = ts->s_dec;
        float bs = cuda ? amax_b * (1.0f / 6.0f) : amax_b / 6.0f;
        float sc = bs / pts;
        o->clamped = sc > 464.0f;
        if (sc < 0x1p-6f) sc = 0x1p-6f;
        if (sc > 448.0f) sc = 448.0f;
        o->code = fp4s_e4m3_encode(sc, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        o->div = pts * o->sbv;
        o->enc = ts->s_enc / o->sbv;
        o->dq = o->div;
        break;
    }
    case FP4S_NV_MODELOPT: {
        /* ModelOpt nvfp4_tensor.py get_weights_scaling_factor / quantize:
         * pbs = amax_b / (6 * scale_2); pbs == 0 -> 1; clamp_(min=2^-9);
         * cast to float8_e4m3fn (torch's cast is not saturating: above 464 it
         * rounds to 480 and gives NaN 0x7F);
         * v = x / (float(s_b) * scale_2). */
        float sc2 = ts->s_dec;
        float d6 = 6.0f * sc2;
        float pbs = amax_b / d6;
        if (pbs == 0.0f) pbs = 1.0f;
        if (pbs < 0x1p-9f) pbs = 0x1p-9f;
        o->clamped = pbs > 464.0f;
        if (!(pbs <= 464.0f)) o->code = 0x7F;
        else o->code = fp4s_e4m3_encode(pbs, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        o->div = o->sbv * sc2;
        o->dq = o->div;
        break;
    }
    case FP4S_NV_GGML: {
        /* ggml quantize_row_nvfp4_ref: ue = ggml_fp32_to_ue4m3(amax_b / 6) */
        float t = amax_b / 6.0f;
        o->clamped = t > 464.0f;
        o->code = fp4s_ue4m3_encode_ggml(t);
        o->sbv = fp4s_ue4m3_decode_ggml(o->code);
        o->dq = o->sbv;
        break;
    }
    case FP4S_NV_FLASHINFER: {
        /* FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4 with fast math (mul.ftz,
         * rcp = rcp.approx.ftz.f32):
         * SFValue = S * (vecMax * rcp(6)); s_b = e4m3(SFValue);
         * outputScale = vecMax != 0 ? rcp(float(s_b) * rcp(S)) : 0 */
        const float S = ts->s_enc;
        float sbf = fp4s_mul_ftz(S, fp4s_mul_ftz(amax_b, fp4s_rcp_approx_ftz(6.0f)));
        o->clamped = sbf > 464.0f;
        o->code = fp4s_e4m3_encode(sbf, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        /* "vecMax != 0" is setp.ftz: a subnormal block amax compares as 0 */
        o->enc = fp4s_daz(amax_b) != 0.0f ? fp4s_rcp_approx_ftz(fp4s_mul_ftz(o->sbv, fp4s_rcp_approx_ftz(S)))
                                          : 0.0f;
        o->ftz = true;
        break;
    }
    case FP4S_NV_FLASHINFER_EXACT: {
        /* the same with DISABLE_FP4_QUANT_FAST_MATH, still built with
         * -use_fast_math (mul.ftz, __fdiv_rn = div.rn.ftz, fminf = min.ftz,
         * comparisons setp.ftz):
         * SFValue = vecMax != 0 ? vecMax * (S * fl(1/6)) : 0; s_b = e4m3(SFValue);
         * outputScale = vecMax != 0 ? fminf(1 / (float(s_b) * (1 / S)), FLT_MAX) : 0 */
        const float S = ts->s_enc;
        const bool nz = fp4s_daz(amax_b) != 0.0f; /* setp.ftz */
        float sbf = nz ? fp4s_mul_ftz(amax_b, fp4s_mul_ftz(S, 1.0f / 6.0f)) : 0.0f;
        o->clamped = sbf > 464.0f;
        o->code = fp4s_e4m3_encode(sbf, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        o->enc = nz
                     ? fminf(fp4s_div_ftz(1.0f, fp4s_mul_ftz(o->sbv, fp4s_div_ftz(1.0f, S))), FLT_MAX)
                     : 0.0f;
        o->ftz = true;
        break;
    }
    case FP4S_NV_VLLM: {
        /* vLLM / SGLang cvt_warp_fp16_to_fp4 (IEEE multiplies):
         * SFValue = S * (vecMax * rcp(6)); s_b = e4m3(SFValue); SFValue = float(s_b);
         * outputScale = SFValue != 0 ? rcp(SFValue * rcp(S)) : 0 */
        const float S = ts->s_enc;
        float sbf = S * (amax_b * fp4s_rcp_approx_ftz(6.0f));
        o->clamped = sbf > 464.0f;
        o->code = fp4s_e4m3_encode(sbf, FP4S_TIE_EVEN);
        o->sbv = fp4s_e4m3_decode(o->code);
        o->enc = o->sbv != 0.0f ? fp4s_rcp_approx_ftz(o->sbv * fp4s_rcp_approx_ftz(S)) : 0.0f;
        break;
    }
    case FP4S_NV_TE_4OVER6: /* two candidates per block: nv_tile_4over6 */
    case FP4S_NV_FLASHINFER_4OVER6:
    case FP4S_NV_FLASHINFER_4OVER6_EXACT:
    case FP4S_NV_RECIPE_COUNT: /* rejected by fp4s_spec_check */
        break;
    }
}

/* ftz float32 add and subtract (add.rn.ftz / sub.rn.ftz of a -use_fast_math
 * kernel): subnormal operands read as +-0, a subnormal result flushes */
static inline float add_ftz(float a, float b)
{
    float r = fp4s_daz(a) + fp4s_daz(b);
    return fp4s_daz(r);
}

/* One element's term of a 4over6 candidate error (fp4s_4over6_math): q the
 * E2M1 code, sv the candidate's decoded scale, x the input. TE's kernel is
 * IEEE; FlashInfer's _rn intrinsics compile to .ftz under -use_fast_math. */
static inline float four6_term(const fp4s_spec *s, const fp4s_tscale *ts, bool ftz, float denom, float gdec,
                               uint8_t q, float sv, float xv)
{
    const float qv = fp4s_e2m1_decode(q);
    float d;
    switch (s->nv_4over6_math) {
    case FP4S_4OVER6_FP16:
        /* q * s as an FP16 product: exact (at most 6 significant bits, within
         * FP16's range); a NaN scale gives NaN */
        d = ftz ? add_ftz(qv * sv, -fp4s_mul_ftz(xv, ts->s_enc)) : qv * sv - xv * ts->s_enc;
        break;
    case FP4S_4OVER6_DECODE:
        d = ftz ? add_ftz(fp4s_mul_ftz(fp4s_mul_ftz(qv, sv), gdec), -xv) : (qv * sv) * gdec - xv;
        break;
    case FP4S_4OVER6_AMAX:
    default:
        if (ftz) {
            float v = fp4s_div_ftz(fp4s_mul_ftz(fp4s_mul_ftz(qv, sv), ts->amax), denom);
            d = add_ftz(v, -xv);
        } else {
            float v = fp4s_e2m1_decode(q) * sv;
            v = v * ts->amax;
            v = v / denom;
            d = v - xv;
        }
        break;
    }
    if (s->nv_4over6_err == FP4S_4OVER6_MSE) return ftz ? fp4s_mul_ftz(d, d) : d * d;
    return fabsf(d);
}

/* 4over6 (TransformerEngine reference_nvfp4.py _quantize_blockwise_4over6_reference
 * and quantize_4over6_nvfp4.cuh; FlashInfer quantization_utils.cuh
 * cvt_warp_fp16_to_fp4 with NVFP4_4OVER6_CONFIG): one tile (h rows x 16 at row
 * r0, block b; h = 1 for 1-D) quantized with the map-to-6 and the map-to-4
 * scale, the one with the smaller error kept (ties: map-to-6). */
static void nv_tile_4over6(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t ld, size_t r0,
                           size_t h, size_t b, float amax_b, const fp4s_qout *o, acc *a)
{
    const size_t B = s->block;
    const float denom = 6.0f * (float)fp4s_spec_scale_bound(s); /* 6 * B */
    const bool fi = s->nv_recipe != FP4S_NV_TE_4OVER6;
    const bool fast = s->nv_recipe == FP4S_NV_FLASHINFER_4OVER6;
    const bool cvt = s->nonfinite == FP4S_NF_CVT;
    float base[2]; /* unrounded scales: [0] map-to-6, [1] map-to-4 */
    float gdec = ts->s_dec;
    if (!fi) {
        float c6 = (amax_b / 6.0f) * ts->s_enc;
        base[0] = c6;
        base[1] = c6 * 1.5f;
    } else if (fast) {
        base[0] = fp4s_mul_ftz(ts->s_enc, fp4s_mul_ftz(amax_b, fp4s_rcp_approx_ftz(6.0f)));
        base[1] = fp4s_mul_ftz(base[0], 1.5f);
        gdec = fp4s_rcp_approx_ftz(ts->s_enc);
    } else {
        base[0] = fp4s_mul_ftz(fp4s_div_ftz(amax_b, 6.0f), ts->s_enc);
        base[1] = fp4s_mul_ftz(base[0], 1.5f);
        gdec = fp4s_div_ftz(1.0f, ts->s_enc);
    }
    /* FlashInfer: "vecMax == 0" (setp.ftz: a subnormal block amax too) gives
     * scale 0 and codes 0 */
    const bool fi_zero = fi && fp4s_daz(amax_b) == 0.0f;
    uint8_t code[2];
    float sbv[2], enc[2];
    for (int c = 0; c < 2; c++) {
        float v = base[c];
        if (!fi && v > 448.0f) v = 448.0f; /* TE clamps; FlashInfer's cvt saturates the same way */
        code[c] = fi_zero ? 0 : fp4s_e4m3_encode(v, FP4S_TIE_EVEN);
        sbv[c] = fp4s_e4m3_decode(code[c]);
        float e;
        if (!fi) {
            e = 1.0f / (sbv[c] * ts->s_dec);
            if (e > FLT_MAX) e = FLT_MAX;
        } else if (fast) {
            e = fp4s_rcp_approx_ftz(fp4s_mul_ftz(sbv[c], gdec));
        } else {
            e = fminf(fp4s_div_ftz(1.0f, fp4s_mul_ftz(sbv[c], gdec)), FLT_MAX);
        }
        enc[c] = fi_zero ? 0.0f : e;
    }
    /* row errors of each candidate: fp32, summed in element order */
    float err[2][16] = {{0}};
    uint8_t q[2][16][16];
    for (size_t i = 0; i < h; i++) {
        const float *xb = x + (r0 + i) * ld + b * B;
        for (int c = 0; c < 2; c++) {
            float e = 0.0f;
            for (size_t j = 0; j < B; j++) {
                float v = fi ? fp4s_mul_ftz(xb[j], enc[c]) : xb[j] * enc[c];
                if (!fi) {
                    if (v > 6.0f) v = 6.0f;
                    if (v < -6.0f) v = -6.0f;
                }
                uint8_t qq = fi_zero ? 0 : cvt && isnan(v) ? 7 : fp4s_e2m1_encode_spec(s, v);
                q[c][i][j] = qq;
                if (fi_zero) continue;
                float t = four6_term(s, ts, fi, denom, gdec, qq, sbv[c], xb[j]);
                e = fi ? add_ftz(e, t) : e + t;
            }
            err[c][i] = e;
        }
    }
    int pick;
    if (fi_zero) {
        pick = 0;
    } else if (!s->tile2d) {
        pick = err[1][0] < err[0][0] ? 1 : 0;
    } else {
        /* TE's warp reduction over the 16 rows (missing rows of a last tile add 0) */
        float t[2];
        for (int c = 0; c < 2; c++) {
            float r8[8], r4[4], r2[2];
            for (int k = 0; k < 8; k++) r8[k] = err[c][k] + err[c][k + 8];
            for (int k = 0; k < 4; k++) r4[k] = r8[k] + r8[k + 4];
            for (int k = 0; k < 2; k++) r2[k] = r4[k] + r4[k + 2];
            t[c] = r2[0] + r2[1];
        }
        pick = t[1] < t[0] ? 1 : 0;
    }
    for (size_t i = 0; i < h; i++) {
        const size_t r = r0 + i;
        const float *xb = x + r * ld + b * B;
        uint8_t *cb = o->codes ? o->codes + r * o->ld_codes + b * B : NULL;
        float *db = o->dequant ? o->dequant + r * o->ld_dequant + b * B : NULL;
        if (o->scales) o->scales[r * o->ld_scales + b] = code[pick];
        bscan rs = {0};
        scan_add(&rs, xb, B);
        a->st.blocks++;
        a->st.elements += B;
        if (!fi_zero && base[pick] > 464.0f) a->st.scale_clamped++;
        if (rs.amax == 0.0f) a->st.zero_blocks++;
        else if ((code[pick] & 0x78) == 0) a->st.scale_underflow++;
        bsum bs = {{0}, {0}};
        const bool sums = a->sums && !isnan(sbv[pick]);
        for (size_t j = 0; j < B; j++) {
            uint8_t qq = q[pick][i][j];
            float v = fi ? fp4s_mul_ftz(xb[j], enc[pick]) : xb[j] * enc[pick];
            if (!fi_zero && fabsf(v) > 6.0f) a->st.saturated++;
            if (qq == 8) a->st.neg_zero++;
            float dq = fp4s_e2m1_decode(qq) * sbv[pick] * ts->s_dec;
            if (cb) cb[j] = qq;
            if (db) db[j] = dq;
            if (sums) bsum_elem(&bs, j, xb[j], dq);
        }
        acc_block(a, &bs);
    }
}

/* ggml's element choice: the first of the 8 magnitudes with the strictly
 * smallest fabsf(level * s - |x|) in fp32 (ggml compares all 16 signed levels;
 * the mirror image gives the same index for negative x). NaN/Inf -> 0. */
static uint8_t ggml_best(float x, float s, bool keep_neg_zero, bool *sat)
{
    float ax = fabsf(x);
    int best = 0;
    float be = fabsf(e2m1_mag[0] * s - ax);
    for (int i = 1; i < 8; i++) {
        float e = fabsf(e2m1_mag[i] * s - ax);
        if (e < be) { be = e; best = i; }
    }
    *sat = ax > 6.0f * s;
    if (best == 0) return (keep_neg_zero && x < 0.0f) ? 8 : 0;
    return (uint8_t)(best | (signbit(x) ? 8 : 0));
}

/* Dequantized element: (q * s_b) * S_dec (FP4S_NV_DQ_SPLIT) or q * dq, where
 * dq is the block's total scale (s_b alone without a tensor scale). */
static inline float nv_dequant_one(const fp4s_nv_recipe_traits *rt, const fp4s_tscale *ts,
                                   const nv_blk *b, uint8_t q)
{
    float v = fp4s_e2m1_decode(q);
    if (rt->dequant == FP4S_NV_DQ_SPLIT) return v * b->sbv * ts->s_dec;
    return v * b->dq;
}

static int nv_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                    size_t rows, size_t cols, size_t ld, size_t row0, const fp4s_qout *o, acc *a)
{
    const size_t B = s->block, nb = cols / B;
    const size_t H = s->tile2d ? 16 : 1;
    const bool ignore = s->nonfinite == FP4S_NF_IGNORE;
    const bool cvt = s->nonfinite == FP4S_NF_CVT;
    const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
    for (size_t r0 = 0; r0 < rows; r0 += H) {
        size_t h = rows - r0 < H ? rows - r0 : H;
        for (size_t b = 0; b < nb; b++) {
            /* scale from the tile (1 x 16 or up to 16 x 16) */
            bscan sc = {0};
            for (size_t i = 0; i < h; i++) scan_add(&sc, x + (r0 + i) * ld + b * B, B);
            if (cvt && sc.nan == h * B) sc.amax = cvt_nan_amax();
            bool nanb = nan_block(s, &sc);
            if (!nanb && fp4s_nv_recipe_is_4over6(s->nv_recipe)) {
                /* the nonfinite counters of the tile's rows, then the two candidates */
                for (size_t i = 0; i < h; i++) {
                    bscan rs = {0};
                    scan_add(&rs, x + (r0 + i) * ld + b * B, B);
                    count_nonfinite(&a->st, &rs);
                }
                nv_tile_4over6(s, ts, x, ld, r0, h, b, sc.amax, o, a);
                continue;
            }
            nv_blk nbk = {0};
            if (!nanb) nv_scale(s, ts, sc.amax, &nbk);
            for (size_t i = 0; i < h; i++) {
                const size_t r = r0 + i;
                const float *xb = x + r * ld + b * B;
                uint8_t *cb = o->codes ? o->codes + r * o->ld_codes + b * B : NULL;
                float *db = o->dequant ? o->dequant + r * o->ld_dequant + b * B : NULL;
                bscan rs = {0};
                scan_add(&rs, xb, B); /* per 1x16 segment counters */
                a->st.blocks++;
                a->st.elements += B;
                count_nonfinite(&a->st, &rs);
                if (nanb) {
                    if (o->scales) o->scales[r * o->ld_scales + b] = 0x7F;
                    for (size_t j = 0; j < B; j++) {
                        if (cb) cb[j] = 0;
                        if (db) db[j] = NAN;
                    }
                    continue;
                }
                if (o->scales) o->scales[r * o->ld_scales + b] = nbk.code;
                if (nbk.clamped) a->st.scale_clamped++;
                if (rs.amax == 0.0f) a->st.zero_blocks++;
                else if ((nbk.code & 0x78) == 0) a->st.scale_underflow++;
                bsum bs = {{0}, {0}};
                for (size_t j = 0; j < B; j++) {
                    float xv = xb[j];
                    uint8_t q;
                    bool sat = false;
                    if (ignore && !isfinite(xv)) {
                        q = 0;
                    } else if (rt->elem == FP4S_NV_ELEM_SEARCH) {
                        q = ggml_best(xv, nbk.sbv, s->keep_neg_zero, &sat);
                    } else {
                        float v = rt->elem == FP4S_NV_ELEM_DIV ? xv / nbk.div
                                  : nbk.ftz ? fp4s_mul_ftz(xv, nbk.enc) : xv * nbk.enc;
                        sat = fabsf(v) > 6.0f;
                        q = cvt && isnan(v) ? 7
                            : s->sr ? fp4s_e2m1_encode_sr(s, v, fp4s_sr_bits(s->sr_seed, (row0 + r) * cols + b * B + j))
                                    : fp4s_e2m1_encode_spec(s, v);
                    }
                    if (sat) a->st.saturated++;
                    if (q == 8) a->st.neg_zero++;
                    float d = nv_dequant_one(rt, ts, &nbk, q);
                    if (cb) cb[j] = q;
                    if (db) db[j] = d;
                    if (a->sums && !isnan(nbk.sbv)) bsum_elem(&bs, j, xv, d);
                }
                acc_block(a, &bs);
            }
        }
    }
    return 0;
}

/* ========================================================================= FP8 */

/* FP8 E4M3 baselines. Scale per tile (or tensor) = amax / 448 in fp32 over the
 * finite values, 1 when that amax is 0; element = e4m3(x / scale) with the
 * spec's tie rule, satfinite (NaN -> 0x7F, +-Inf -> +-448); dequant =
 * e4m3_decode(code) * scale. */
static int fp8_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                     size_t rows, size_t cols, size_t ld, const fp4s_qout *o, acc *a)
{
    const size_t T = 128;
    size_t H, W;
    switch (s->fp8_gran) {
    case FP4S_FP8_TENSOR: H = rows ? rows : 1; W = cols; break;
    case FP4S_FP8_1x128: H = 1; W = T; break;
    default: H = T; W = T; break;
    }
    if (W == 0) return 0;
    size_t nt = cols / W;
    for (size_t r0 = 0; r0 < rows; r0 += H) {
        size_t h = rows - r0 < H ? rows - r0 : H;
        for (size_t t = 0; t < nt; t++) {
            float scale;
            bscan sc = {0};
            for (size_t i = 0; i < h; i++) scan_add(&sc, x + (r0 + i) * ld + t * W, W);
            if (s->fp8_gran == FP4S_FP8_TENSOR) {
                scale = ts->fp8_scale;
            } else {
                a->st.blocks++;
                if (sc.amax == 0.0f) a->st.zero_blocks++;
                scale = sc.famax > 0.0f ? sc.famax / 448.0f : 1.0f;
                if (sc.nan || sc.inf) a->st.nonfinite_blocks++;
            }
            if (o->scale_f32) {
                size_t sr = s->fp8_gran == FP4S_FP8_TENSOR ? 0 : r0 / H;
                o->scale_f32[sr * o->ld_scale_f32 + (s->fp8_gran == FP4S_FP8_TENSOR ? 0 : t)] = scale;
            }
            a->st.nan += sc.nan;
            a->st.inf += sc.inf;
            a->st.nonfinite += sc.nan + sc.inf;
            for (size_t i = 0; i < h; i++) {
                const size_t r = r0 + i;
                const float *xb = x + r * ld + t * W;
                uint8_t *cb = o->codes ? o->codes + r * o->ld_codes + t * W : NULL;
                float *db = o->dequant ? o->dequant + r * o->ld_dequant + t * W : NULL;
                a->st.elements += W;
                for (size_t j0 = 0; j0 < W; j0 += 16) { /* the sums' units: 16 of a row */
                    bsum bs = {{0}, {0}};
                    for (size_t j = j0; j < W && j < j0 + 16; j++) {
                        float xv = xb[j];
                        float v = xv / scale;
                        if (fabsf(v) > 448.0f) a->st.saturated++;
                        uint8_t q = fp4s_e4m3_encode(v, s->tie);
                        float d = fp4s_e4m3_decode(q) * scale;
                        if (cb) cb[j] = q;
                        if (db) db[j] = d;
                        if (a->sums) bsum_elem(&bs, j, xv, d);
                    }
                    acc_block(a, &bs);
                }
            }
        }
    }
    return 0;
}

/* ===================================================================== table */

static int ref_quantize(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                        size_t rows, size_t cols, size_t ld, size_t row0,
                        const fp4s_qout *out, fp4s_qstats *st)
{
    /* chunks start on tile boundaries (checked by the front end); row0 numbers
     * the rows for the random bits of stochastic rounding */
    acc a;
    memset(&a, 0, sizeof a);
    a.sums = st != NULL;
    int rc;
    switch (s->format) {
    case FP4S_MXFP4: rc = mx_quant(s, x, rows, cols, ld, row0, out, &a); break;
    case FP4S_NVFP4: rc = nv_quant(s, ts, x, rows, cols, ld, row0, out, &a); break;
    case FP4S_FP8: rc = fp8_quant(s, ts, x, rows, cols, ld, out, &a); break;
    default: return FP4S_EINVAL;
    }
    acc_flush(&a, st);
    return rc;
}

static int ref_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                          const uint8_t *codes, size_t ld_codes,
                          const uint8_t *scales, size_t ld_scales,
                          const float *scale_f32, size_t ld_scale_f32,
                          size_t rows, size_t cols, size_t row0,
                          float *out, size_t ld_out)
{
    (void)row0;
    const size_t B = s->block;
    const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
    if (s->format == FP4S_FP8) {
        size_t H = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                float scale;
                if (s->fp8_gran == FP4S_FP8_TENSOR) scale = scale_f32 ? scale_f32[0] : ts->fp8_scale;
                else scale = scale_f32[(r / H) * ld_scale_f32 + c / 128];
                out[r * ld_out + c] = fp4s_e4m3_decode(codes[r * ld_codes + c]) * scale;
            }
        return 0;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / B; b++) {
            uint8_t sc = scales[r * ld_scales + b];
            nv_blk nbk = {0};
            float X = 0;
            if (s->format == FP4S_MXFP4) {
                X = fp4s_e8m0_decode(sc);
            } else {
                nbk.code = sc;
                nbk.sbv = fp4s_scale_decode(s, sc);
                /* the total scale: S_dec * s_b (S_dec * s_b = s_b * S_dec in fp32) */
                nbk.dq = rt->tscale == FP4S_NV_TS_NONE ? nbk.sbv : ts->s_dec * nbk.sbv;
            }
            for (size_t j = 0; j < B; j++) {
                uint8_t q = codes[r * ld_codes + b * B + j];
                out[r * ld_out + b * B + j] = s->format == FP4S_MXFP4
                    ? fp4s_e2m1_decode(q) * X
                    : nv_dequant_one(rt, ts, &nbk, q);
            }
        }
    return 0;
}

static float ref_amax(const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite)
{
    float m = 0.0f;
    uint64_t nf = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        for (size_t c = 0; c < cols; c++) {
            float a = fabsf(xr[c]);
            if (!(a <= FLT_MAX)) { nf++; continue; }
            if (a > m) m = a;
        }
    }
    if (nonfinite) *nonfinite += nf;
    return m;
}

const fp4s_kernel_table fp4s_kernels_ref = {
    .name = "ref",
    .quantize = ref_quantize,
    .dequantize = ref_dequantize,
    .amax = ref_amax,
};
