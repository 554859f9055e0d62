/* AVX-512 (F, BW, VL, DQ) fast paths of the quantizer kernels.
 *
 * Bit-identical to the scalar reference (quant_ref.c); tests/kernels/tester
 * checks every profile. How exactness is kept:
 * - E2M1 rounding is done by comparing the magnitude bits of v = x / scale with
 *   the bit patterns of the seven midpoints (0.25 ... 5); for each tie rule a
 *   midpoint counts as "rounds up" with > or >= (see e2m1_thresholds). No
 *   arithmetic rounding is involved, so ties match exactly.
 * - fp32 operations are the reference's, in its order, one IEEE op each
 *   (compiled with -ffp-contract=off; no FMA where the reference multiplies
 *   and then adds). Multiplying by 2^-k equals dividing by 2^k exactly.
 * - The block scale (E8M0 k or E4M3 s_b) is computed per block in scalar code
 *   that follows the reference formula; only the elements are vectorized.
 * - A block that holds NaN or Inf is rare and its policy is engine-specific:
 *   it is handed to the reference kernel for that one block (same outputs and
 *   stats as the reference by construction).
 * Specs not implemented here return FP4S_ENOTSUP (the front end then runs the
 * reference): FP8, NVFP4 2-D tiles and the ggml NVFP4 recipe. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/codec_internal.h"
#include "cpu/kernels.h"

#define ABS_MASK 0x7fffffffu
#define INF_BITS 0x7f800000u
#define SIX_BITS 0x40c00000u /* 6.0f */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* E2M1 magnitude index i (0..7 for 0, .5, 1, 1.5, 2, 3, 4, 6) of |v| is the
 * number of thresholds T_j with bits(|v|) > T_j. T_j is the midpoint between
 * index j and j+1 when a tie stays down, the midpoint's bits minus one when a
 * tie goes up (|v| >= mid). Ties: even -> up iff j+1 is even; zero -> never;
 * away -> always. */
static void e2m1_thresholds(fp4s_tie tie, uint32_t t[7])
{
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (int j = 0; j < 7; j++) {
        bool up;
        switch (tie) {
        case FP4S_TIE_ZERO: up = false; break;
        case FP4S_TIE_AWAY: up = true; break;
        default: up = (j & 1) != 0; break;
        }
        t[j] = f2u(mid[j]) - (up ? 1u : 0u);
    }
}

typedef struct enc_ctx {
    __m512i thr[7];
    __m512i absm, six, one, zero;
    __m512 lut;            /* E2M1 code -> value, codes 0..15 */
    bool keep_neg_zero;
} enc_ctx;

static void enc_init(enc_ctx *c, const fp4s_spec *s)
{
    uint32_t t[7];
    e2m1_thresholds(s->tie, t);
    for (int j = 0; j < 7; j++) c->thr[j] = _mm512_set1_epi32((int)t[j]);
    c->absm = _mm512_set1_epi32((int)ABS_MASK);
    c->six = _mm512_set1_epi32((int)SIX_BITS);
    c->one = _mm512_set1_epi32(1);
    c->zero = _mm512_setzero_si512();
    c->lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    c->keep_neg_zero = s->keep_neg_zero;
}

/* Codes (as 32-bit lanes) of 16 finite scaled values v; counts saturated
 * (|v| > 6) and -0 codes. */
static inline __m512i e2m1_encode16(const enc_ctx *c, __m512 v, uint64_t *sat, uint64_t *negz)
{
    __m512i b = _mm512_castps_si512(v);
    __m512i a = _mm512_and_si512(b, c->absm);
    __m512i idx = c->zero;
    for (int j = 0; j < 7; j++)
        idx = _mm512_mask_add_epi32(idx, _mm512_cmpgt_epu32_mask(a, c->thr[j]), idx, c->one);
    __mmask16 neg = _mm512_cmplt_epi32_mask(b, c->zero);
    if (!c->keep_neg_zero)
        neg &= _mm512_cmpneq_epi32_mask(idx, c->zero);
    idx = _mm512_mask_or_epi32(idx, neg, idx, _mm512_set1_epi32(8));
    *sat += (uint64_t)__builtin_popcount(_mm512_cmpgt_epu32_mask(a, c->six));
    *negz += (uint64_t)__builtin_popcount(_mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(8)));
    return idx;
}

/* Error sums in double, per lane (the reference sums with Kahan; only the
 * integer counters are required to match exactly). */
typedef struct err_acc { __m512d e0, e1, x0, x1; } err_acc;

static inline void err_add(err_acc *e, __m512 x, __m512 q)
{
    __m512d xl = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d xh = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    __m512d ql = _mm512_cvtps_pd(_mm512_castps512_ps256(q));
    __m512d qh = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(q), 1)));
    __m512d dl = _mm512_sub_pd(ql, xl), dh = _mm512_sub_pd(qh, xh);
    e->e0 = _mm512_add_pd(e->e0, _mm512_mul_pd(dl, dl));
    e->e1 = _mm512_add_pd(e->e1, _mm512_mul_pd(dh, dh));
    e->x0 = _mm512_add_pd(e->x0, _mm512_mul_pd(xl, xl));
    e->x1 = _mm512_add_pd(e->x1, _mm512_mul_pd(xh, xh));
}

static void err_init(err_acc *e)
{
    e->e0 = e->e1 = e->x0 = e->x1 = _mm512_setzero_pd();
}

static void err_finish(const err_acc *e, fp4s_qstats *st)
{
    st->err2 += _mm512_reduce_add_pd(_mm512_add_pd(e->e0, e->e1));
    st->x2 += _mm512_reduce_add_pd(_mm512_add_pd(e->x0, e->x1));
}

/* Hand one block (1 row x s->block columns at column c of row r) to the
 * reference kernel. */
static int ref_block(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                     size_t ld, size_t row0, size_t r, size_t c, size_t nb_col,
                     const fp4s_qout *out, fp4s_qstats *st)
{
    fp4s_qout o = {0};
    if (out->codes) { o.codes = out->codes + r * out->ld_codes + c; o.ld_codes = out->ld_codes; }
    if (out->scales) { o.scales = out->scales + r * out->ld_scales + nb_col; o.ld_scales = out->ld_scales; }
    if (out->dequant) { o.dequant = out->dequant + r * out->ld_dequant + c; o.ld_dequant = out->ld_dequant; }
    return fp4s_kernels_ref.quantize(s, ts, x + r * ld + c, 1, s->block, ld, row0 + r, &o, st);
}

/* ---- MXFP4 ------------------------------------------------------------------ */

/* E8M0 code of a finite block amax (bits), for the rules done in integers.
 * *under is set when k was clamped at code 0. */
static inline int mx_code_bits(fp4s_mx_rule rule, uint32_t a, bool *under)
{
    int e = (int)(a >> 23), code;
    switch (rule) {
    case FP4S_MX_FLOOR: code = e - 2; break;
    case FP4S_MX_CEIL: code = e - 2 + ((a & 0x7fffff) > 0x400000); break;
    case FP4S_MX_EVEN: code = (int)((a + 0x200000u) >> 23) - 2; break;
    default: code = 0; break;
    }
    *under = code < 0;
    if (code < 0) code = 0;
    if (code > 254) code = 254;
    return code;
}

/* For the libm rules: the reference's formula, same libm call. */
/* The libm rules (log2f, rtn): the reference's own helper, per block. */
static inline int mx_code_libm(fp4s_mx_rule rule, float amax, bool *under)
{
    return fp4s_mx_k(rule, amax, under) + 127;
}

static int mx_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                    size_t rows, size_t cols, size_t ld, size_t row0,
                    const fp4s_qout *out, fp4s_qstats *st)
{
    enc_ctx c;
    enc_init(&c, s);
    err_acc ea;
    err_init(&ea);
    const size_t nb = cols / 32;
    const bool libm_rule = s->mx_rule == FP4S_MX_LOG2F || s->mx_rule == FP4S_MX_RTN;
    const __m512i infb = _mm512_set1_epi32((int)INF_BITS);
    uint64_t sat = 0, negz = 0, zb = 0, under = 0, nblk = 0;
    int rc = 0;

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        for (size_t b = 0; b < nb; b++) {
            const float *xb = xr + b * 32;
            __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
            __m512i a0 = _mm512_and_si512(_mm512_castps_si512(x0), c.absm);
            __m512i a1 = _mm512_and_si512(_mm512_castps_si512(x1), c.absm);
            if (_mm512_cmpge_epu32_mask(a0, infb) | _mm512_cmpge_epu32_mask(a1, infb)) {
                rc = ref_block(s, ts, x, ld, row0, r, b * 32, b, out, st);
                if (rc) return rc;
                continue;
            }
            uint32_t am = _mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));
            int code;
            bool u = false;
            if (am == 0) {
                code = s->mx_zero_block_code;
                zb++;
            } else {
                code = libm_rule ? mx_code_libm(s->mx_rule, u2f(am), &u)
                                 : mx_code_bits(s->mx_rule, am, &u);
            }
            under += u;
            nblk++;
            /* 2^-k and 2^k as floats (k = code - 127, both exact) */
            float inv = code == 254 ? u2f(0x00400000u) : u2f((uint32_t)(254 - code) << 23);
            float sc = code == 0 ? u2f(0x00400000u) : u2f((uint32_t)code << 23);
            __m512 vi = _mm512_set1_ps(inv), vs = _mm512_set1_ps(sc);
            __m512i q0 = e2m1_encode16(&c, _mm512_mul_ps(x0, vi), &sat, &negz);
            __m512i q1 = e2m1_encode16(&c, _mm512_mul_ps(x1, vi), &sat, &negz);
            __m512 d0 = _mm512_mul_ps(_mm512_permutexvar_ps(q0, c.lut), vs);
            __m512 d1 = _mm512_mul_ps(_mm512_permutexvar_ps(q1, c.lut), vs);
            err_add(&ea, x0, d0);
            err_add(&ea, x1, d1);
            if (out->codes) {
                uint8_t *cp = out->codes + r * out->ld_codes + b * 32;
                _mm_storeu_si128((__m128i *)cp, _mm512_cvtepi32_epi8(q0));
                _mm_storeu_si128((__m128i *)(cp + 16), _mm512_cvtepi32_epi8(q1));
            }
            if (out->scales) out->scales[r * out->ld_scales + b] = (uint8_t)code;
            if (out->dequant) {
                float *dp = out->dequant + r * out->ld_dequant + b * 32;
                _mm512_storeu_ps(dp, d0);
                _mm512_storeu_ps(dp + 16, d1);
            }
        }
    }
    st->elements += nblk * 32;
    st->blocks += nblk;
    st->saturated += sat;
    st->zero_blocks += zb;
    st->neg_zero += negz;
    st->scale_underflow += under;
    err_finish(&ea, st);
    return 0;
}

/* ---- NVFP4 ------------------------------------------------------------------- */

/* E4M3 (bias 7, satfinite at 448, NaN 0x7F) of 16 non-negative floats,
 * round to nearest even: normal range by integer rounding of the bits at
 * mantissa bit 20, subnormal range (v < 2^-6) as rint(v * 2^9) (exact
 * scaling; cvtps2dq rounds to nearest even in the default MXCSR mode). */
static inline __m512i e4m3_encode16(__m512 v)
{
    const __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 20), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff), lsb));
    __m512i cn = _mm512_sub_epi32(_mm512_srli_epi32(r, 20), _mm512_set1_epi32(960));
    cn = _mm512_min_epi32(cn, _mm512_set1_epi32(0x7e));
    __m512i cs = _mm512_cvtps_epi32(_mm512_mul_ps(v, _mm512_set1_ps(512.0f)));
    __mmask16 small = _mm512_cmplt_epu32_mask(u, _mm512_set1_epi32(0x3c800000));
    __m512i code = _mm512_mask_mov_epi32(cn, small, cs);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(u, _mm512_set1_epi32((int)INF_BITS));
    return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7f));
}

/* Value of E4M3 codes 0..0x7F (0x7F: NaN): bits << 20 rebiased by 2^120; the
 * subnormal codes come out right through the fp32 denormal. */
static inline __m512 e4m3_decode16(__m512i code)
{
    __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(code, 20)),
                             _mm512_set1_ps(0x1p120f));
    __mmask16 nan = _mm512_cmpeq_epi32_mask(code, _mm512_set1_epi32(0x7f));
    return _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(NAN));
}

/* Block scales of up to 16 blocks from their amax values: the E4M3 code, its
 * decoded value and the element factor (multiplied, or divided by when
 * *div is set), in the recipe's order of fp32 operations. */
typedef struct nv_ctx {
    fp4s_nv_recipe recipe;
    __m512 c;      /* te: S_enc * (1/6) */
    __m512 pts;    /* torchao / modelopt: amax / 2688 */
    __m512 inv_pts;/* torchao: 1 / pts */
    __m512 sdec;   /* decode scale */
    bool div;
} nv_ctx;

static int nv_init(nv_ctx *n, const fp4s_spec *s, const fp4s_tscale *ts)
{
    n->recipe = s->nv_recipe;
    n->sdec = _mm512_set1_ps(ts->s_dec);
    n->div = false;
    switch (s->nv_recipe) {
    case FP4S_NV_TE:
        n->c = _mm512_set1_ps(ts->s_enc * (1.0f / 6.0f));
        return 0;
    case FP4S_NV_TORCHAO:
        n->pts = _mm512_set1_ps(ts->s_dec);
        n->inv_pts = _mm512_set1_ps(1.0f / ts->s_dec);
        return 0;
    case FP4S_NV_MODELOPT:
        n->pts = _mm512_set1_ps(ts->s_dec);
        n->div = true;
        return 0;
    default:
        return FP4S_ENOTSUP;
    }
}

static inline void nv_scales16(const nv_ctx *n, __m512 am, __m512i *code, __m512 *sbd, __m512 *fac)
{
    switch (n->recipe) {
    case FP4S_NV_TE:
        *code = e4m3_encode16(_mm512_mul_ps(am, n->c));
        *sbd = e4m3_decode16(*code);
        *fac = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(*sbd, n->sdec));
        break;
    case FP4S_NV_TORCHAO: {
        __m512 v = _mm512_div_ps(_mm512_div_ps(am, _mm512_set1_ps(6.0f)), n->pts);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(0x1p-6f)), _mm512_set1_ps(448.0f));
        *code = e4m3_encode16(v);
        *sbd = e4m3_decode16(*code);
        *fac = _mm512_div_ps(n->inv_pts, *sbd);
        break;
    }
    default: { /* modelopt */
        __m512 v = _mm512_div_ps(am, _mm512_mul_ps(_mm512_set1_ps(6.0f), n->pts));
        __mmask16 z = _mm512_cmpeq_ps_mask(am, _mm512_setzero_ps());
        v = _mm512_mask_mov_ps(v, z, _mm512_set1_ps(1.0f));
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(0x1p-9f)), _mm512_set1_ps(448.0f));
        *code = e4m3_encode16(v);
        *sbd = e4m3_decode16(*code);
        *fac = _mm512_mul_ps(*sbd, n->pts);
        break;
    }
    }
}

static int nv_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                    size_t rows, size_t cols, size_t ld, size_t row0,
                    const fp4s_qout *out, fp4s_qstats *st)
{
    nv_ctx n;
    int rc = nv_init(&n, s, ts);
    if (rc) return rc;
    enc_ctx c;
    enc_init(&c, s);
    err_acc ea;
    err_init(&ea);
    const size_t nb = cols / 16;
    const __m512i infb = _mm512_set1_epi32((int)INF_BITS);
    uint64_t sat = 0, negz = 0, zb = 0, under = 0, nblk = 0;
    float amv[16] __attribute__((aligned(64)));
    float facv[16] __attribute__((aligned(64)));
    float sbdv[16] __attribute__((aligned(64)));
    uint32_t codev[16] __attribute__((aligned(64)));

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        for (size_t g = 0; g < nb; g += 16) {
            size_t ng = nb - g < 16 ? nb - g : 16;
            uint32_t nfm = 0;
            for (size_t i = 0; i < ng; i++) {
                __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xr + (g + i) * 16)), c.absm);
                if (_mm512_cmpge_epu32_mask(a, infb)) nfm |= 1u << i;
                amv[i] = u2f(_mm512_reduce_max_epu32(a));
            }
            for (size_t i = ng; i < 16; i++) amv[i] = 0.0f;
            __m512 am = _mm512_load_ps(amv);
            __m512i code;
            __m512 sbd, fac;
            nv_scales16(&n, am, &code, &sbd, &fac);
            _mm512_store_ps(facv, fac);
            _mm512_store_ps(sbdv, sbd);
            _mm512_store_si512(codev, code);
            __mmask16 valid = (__mmask16)((1u << ng) - 1u) & (__mmask16)~nfm;
            zb += (uint64_t)__builtin_popcount(_mm512_mask_cmpeq_ps_mask(valid, am, _mm512_setzero_ps()));
            /* zero or subnormal E4M3 scale: code < 8 */
            under += (uint64_t)__builtin_popcount(_mm512_mask_cmplt_epu32_mask(valid, code, _mm512_set1_epi32(8)));
            for (size_t i = 0; i < ng; i++) {
                size_t b = g + i;
                if (nfm >> i & 1u) {
                    rc = ref_block(s, ts, x, ld, row0, r, b * 16, b, out, st);
                    if (rc) return rc;
                    continue;
                }
                nblk++;
                __m512 xv = _mm512_loadu_ps(xr + b * 16);
                __m512 vf = _mm512_set1_ps(facv[i]);
                __m512 v = n.div ? _mm512_div_ps(xv, vf) : _mm512_mul_ps(xv, vf);
                __m512i q = e2m1_encode16(&c, v, &sat, &negz);
                __m512 d = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(q, c.lut),
                                                       _mm512_set1_ps(sbdv[i])), n.sdec);
                err_add(&ea, xv, d);
                if (out->codes)
                    _mm_storeu_si128((__m128i *)(out->codes + r * out->ld_codes + b * 16),
                                     _mm512_cvtepi32_epi8(q));
                if (out->scales) out->scales[r * out->ld_scales + b] = (uint8_t)codev[i];
                if (out->dequant) _mm512_storeu_ps(out->dequant + r * out->ld_dequant + b * 16, d);
            }
        }
    }
    st->elements += nblk * 16;
    st->blocks += nblk;
    st->saturated += sat;
    st->zero_blocks += zb;
    st->neg_zero += negz;
    st->scale_underflow += under;
    err_finish(&ea, st);
    return 0;
}

/* ---- kernel entry points -------------------------------------------------------- */

static int k_quantize(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                      size_t rows, size_t cols, size_t ld, size_t row0,
                      const fp4s_qout *out, fp4s_qstats *st)
{
    if (s->format == FP4S_MXFP4 && s->block == 32 && cols % 32 == 0)
        return mx_quant(s, ts, x, rows, cols, ld, row0, out, st);
    if (s->format == FP4S_NVFP4 && s->block == 16 && !s->tile2d && cols % 16 == 0)
        return nv_quant(s, ts, x, rows, cols, ld, row0, out, st);
    return FP4S_ENOTSUP;
}

static int k_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                        const uint8_t *codes, size_t ld_codes,
                        const uint8_t *scales, size_t ld_scales,
                        const float *scale_f32, size_t ld_scale_f32,
                        size_t rows, size_t cols, size_t row0,
                        float *out, size_t ld_out)
{
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const size_t bs = s->block;
    if (s->format == FP4S_MXFP4 && bs == 32 && !s->mx_scale_is_ggml && cols % 32 == 0) {
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            for (size_t b = 0; b < cols / 32; b++) {
                uint8_t e = sr[b];
                float sc = e == 0xff ? NAN : e == 0 ? u2f(0x00400000u) : u2f((uint32_t)e << 23);
                __m512 vs = _mm512_set1_ps(sc);
                __m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 32)));
                __m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 32 + 16)));
                _mm512_storeu_ps(orow + b * 32, _mm512_mul_ps(_mm512_permutexvar_ps(q0, lut), vs));
                _mm512_storeu_ps(orow + b * 32 + 16, _mm512_mul_ps(_mm512_permutexvar_ps(q1, lut), vs));
            }
        }
        return 0;
    }
    if (s->format == FP4S_NVFP4 && bs == 16 && !s->tile2d && cols % 16 == 0 &&
        s->nv_recipe != FP4S_NV_GGML) {
        const __m512 sdec = _mm512_set1_ps(ts->s_dec);
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            size_t nb = cols / 16;
            for (size_t g = 0; g < nb; g += 16) {
                size_t ng = nb - g < 16 ? nb - g : 16;
                __mmask16 m = (__mmask16)((1u << ng) - 1u);
                __m512i sc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, sr + g));
                float sbv[16] __attribute__((aligned(64)));
                _mm512_store_ps(sbv, e4m3_decode16(_mm512_and_si512(sc, _mm512_set1_epi32(0x7f))));
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 16)));
                    __m512 d = _mm512_mul_ps(_mm512_mul_ps(_mm512_permutexvar_ps(q, lut),
                                                           _mm512_set1_ps(sbv[i])), sdec);
                    _mm512_storeu_ps(orow + b * 16, d);
                }
            }
        }
        return 0;
    }
    return FP4S_ENOTSUP;
}

static float k_amax(const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite)
{
    const __m512i absm = _mm512_set1_epi32((int)ABS_MASK);
    const __m512i infb = _mm512_set1_epi32((int)INF_BITS);
    __m512i m = _mm512_setzero_si512();
    uint64_t nf = 0;
    uint32_t ms = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        size_t j = 0;
        for (; j + 16 <= cols; j += 16) {
            __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xr + j)), absm);
            __mmask16 fin = _mm512_cmplt_epu32_mask(a, infb);
            m = _mm512_mask_max_epu32(m, fin, m, a);
            nf += (uint64_t)(16 - __builtin_popcount(fin));
        }
        for (; j < cols; j++) {
            uint32_t a = f2u(xr[j]) & ABS_MASK;
            if (a >= INF_BITS) nf++;
            else if (a > ms) ms = a;
        }
    }
    uint32_t mv = _mm512_reduce_max_epu32(m);
    if (ms > mv) mv = ms;
    if (nonfinite) *nonfinite += nf;
    return u2f(mv);
}

const fp4s_kernel_table fp4s_kernels_avx512 = {
    .name = "avx512",
    .quantize = k_quantize,
    .dequantize = k_dequantize,
    .amax = k_amax,
};
