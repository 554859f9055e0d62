/* AVX-512 (F, BW, VL, DQ) fast paths of the quantizer kernels.
 *
 * Bit-identical to the scalar reference (quant_ref.c); tests/kernels/tester
 * checks every profile. How exactness is kept:
 * - E2M1 rounding is integer arithmetic on the magnitude bits a of the scaled
 *   value v: for |v| >= 1 the bits are rounded at fp32 mantissa bit 22 (the one
 *   E2M1 mantissa bit) by adding 0x1FFFFF (+ bit 22 for ties-to-even) or
 *   0x200000 (ties away), which gives the code directly; below 1 (the E2M1
 *   subnormal binade, step 0.5) two exact comparisons with the midpoints 0.25
 *   and 0.75 decide. Ties are exact by construction.
 * - fp32 operations are the reference's, in its order, one IEEE op each
 *   (compiled with -ffp-contract=off; no FMA where the reference multiplies
 *   and then adds). Multiplying by 2^-k equals dividing by 2^k exactly.
 * - Block scales are computed 16 blocks at a time from the block amax values
 *   (a transpose-and-max tree): E8M0 codes of FLOOR/CEIL/EVEN in integers, the
 *   NVFP4 recipes and E4M3 encode/decode with the reference's fp32 operations
 *   in its order; the libm rules (log2f, rtn, ceil-log2f) call the
 *   reference's own fp4s_mx_k per block.
 * - A block that holds NaN or Inf (or gets a NaN E4M3 scale) is rare and its
 *   policy is engine-specific: it is handed to the reference kernel for that
 *   one block or tile (same outputs and stats as the reference by
 *   construction).
 * - FP8 E4M3 baselines (per tensor, 1x128, 128x128): x / scale by IEEE
 *   division as the reference, E4M3 rounding on the bits with every tie rule.
 * - err2/x2: each block (FP8: 16 elements of a row) is one unit of
 *   cpu/quant_sums.h, its 8 lanes one vector of doubles, added exactly; the
 *   bits are the reference's.
 * - Codes only (st == NULL, kernels.h): each quantizer body is inlined twice,
 *   with its constant `S` (stats) true or false; without stats the double
 *   err2/x2 sums and the per-lane counters are not computed. Codes, scales
 *   and dequantized values come from the same instructions either way.
 * Every spec the reference knows has a fast path here (FP4S_ENOTSUP only for
 * shapes the front end never passes, the caller then runs the reference). */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/quant_simd.h"

typedef struct enc_ctx {
    __m512i t0, t1;        /* |v| < 1 thresholds */
    __m512i rnd;           /* |v| >= 1: add rnd (+ 1 if bit 22 is set, ties to even) */
    __m512i absm, bit22, c252, seven, six, one, two, eight, zero;
    __m512 lut;            /* E2M1 code -> value, codes 0..15 */
    bool rne;
    bool plain_sign;       /* keep_neg_zero and zero_in SIGN: code = index | sign */
    bool keep_neg_zero;
    fp4s_zero_in zero_in;
} enc_ctx;

static void enc_init(enc_ctx *c, const fp4s_spec *s)
{
    uint32_t t0, t1;
    e2m1_small_thresholds(s->tie, &t0, &t1);
    c->t0 = _mm512_set1_epi32((int)t0);
    c->t1 = _mm512_set1_epi32((int)t1);
    c->rnd = _mm512_set1_epi32((int)e2m1_round_add(s->tie));
    c->rne = s->tie == FP4S_TIE_EVEN;
    c->absm = _mm512_set1_epi32((int)ABS_MASK);
    c->bit22 = _mm512_set1_epi32(1 << 22);
    c->c252 = _mm512_set1_epi32(252);
    c->seven = _mm512_set1_epi32(7);
    c->six = _mm512_set1_epi32((int)SIX_BITS);
    c->one = _mm512_set1_epi32(1);
    c->two = _mm512_set1_epi32(2);
    c->eight = _mm512_set1_epi32(8);
    c->zero = _mm512_setzero_si512();
    c->lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    c->keep_neg_zero = s->keep_neg_zero;
    c->zero_in = s->zero_in;
    c->plain_sign = s->keep_neg_zero && s->zero_in == FP4S_ZIN_SIGN;
}

/* Codes (as 32-bit lanes) of 16 scaled values v (finite or +-Inf, not NaN),
 * as fp4s_e2m1_encode_spec; counts saturated (|v| > 6) and -0 codes per lane
 * when cnt (a constant after inlining).
 * hi = (rounded bits >> 22) - 252 is the index for |v| >= 1 and at most the
 * true index below 1 (negative under 0.5), lo = [a > t0] + [a > t1] the
 * index below 1 and 2 above: the index is max(lo, min(hi, 7)). */
static inline __attribute__((always_inline)) __m512i
e2m1_encode16(const enc_ctx *c, __m512 v, __m512i *satc, __m512i *negzc, const bool cnt)
{
    __m512i b = _mm512_castps_si512(v);
    __m512i a = _mm512_and_si512(b, c->absm);
    __m512i t = _mm512_add_epi32(a, c->rnd);
    if (c->rne) t = _mm512_mask_add_epi32(t, _mm512_test_epi32_mask(a, c->bit22), t, c->one);
    __m512i hi = _mm512_min_epi32(_mm512_sub_epi32(_mm512_srli_epi32(t, 22), c->c252), c->seven);
    __m512i lo = _mm512_mask_mov_epi32(_mm512_maskz_mov_epi32(_mm512_cmpgt_epu32_mask(a, c->t0), c->one),
                                       _mm512_cmpgt_epu32_mask(a, c->t1), c->two);
    __m512i idx = _mm512_max_epi32(lo, hi);
    __m512i q;
    if (c->plain_sign) {
        /* idx | ((b >> 28) & 8) */
        q = _mm512_ternarylogic_epi32(idx, _mm512_srli_epi32(b, 28), c->eight, 0xF8);
    } else {
        __m512i s8 = _mm512_and_si512(_mm512_srli_epi32(b, 28), c->eight);
        if (!c->keep_neg_zero) s8 = _mm512_min_epu32(s8, _mm512_slli_epi32(idx, 3));
        if (c->zero_in != FP4S_ZIN_SIGN)
            s8 = _mm512_mask_mov_epi32(s8, _mm512_cmpeq_epi32_mask(a, c->zero),
                                       c->zero_in == FP4S_ZIN_NEG ? c->eight : c->zero);
        q = _mm512_or_si512(idx, s8);
    }
    if (cnt) {
        *satc = _mm512_mask_add_epi32(*satc, _mm512_cmpgt_epu32_mask(a, c->six), *satc, c->one);
        *negzc = _mm512_mask_add_epi32(*negzc, _mm512_cmpeq_epi32_mask(q, c->eight), *negzc, c->one);
    }
    return q;
}

static inline uint64_t hsum_epi32(__m512i v) { return (uint64_t)(uint32_t)_mm512_reduce_add_epi32(v); }

/* Error sums: one unit (cpu/quant_sums.h) at a time, its 8 lanes in one
 * vector; element j of the unit in lane j mod 8, the terms added in element
 * order, each product rounded on its own (as the reference). */
typedef struct err_acc { __m512d e, x; qsums q; } err_acc;

static inline __attribute__((always_inline)) __m512d lo8(__m512 v)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
static inline __attribute__((always_inline)) __m512d hi8(__m512 v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* 16 consecutive elements of a unit: x and the dequantized d, e = (double)d - (double)x */
static inline __attribute__((always_inline)) void err_add(err_acc *e, __m512 x, __m512 d)
{
    __m512d xl = lo8(x), xh = hi8(x);
    __m512d dl = _mm512_sub_pd(lo8(d), xl), dh = _mm512_sub_pd(hi8(d), xh);
    e->e = _mm512_add_pd(e->e, _mm512_mul_pd(dl, dl));
    e->e = _mm512_add_pd(e->e, _mm512_mul_pd(dh, dh));
    e->x = _mm512_add_pd(e->x, _mm512_mul_pd(xl, xl));
    e->x = _mm512_add_pd(e->x, _mm512_mul_pd(xh, xh));
}

/* The unit is complete: its partial into the exact sums, lanes cleared. */
static inline __attribute__((always_inline)) void err_unit(err_acc *e)
{
    double le[8], lx[8];
    _mm512_storeu_pd(le, e->e);
    _mm512_storeu_pd(lx, e->x);
    qs_unit(&e->q, le, lx);
    e->e = e->x = _mm512_setzero_pd();
}

static inline __attribute__((always_inline)) void err_init(err_acc *e)
{
    memset(&e->q, 0, sizeof e->q);
    e->e = e->x = _mm512_setzero_pd();
}

static inline __attribute__((always_inline)) void err_finish(const err_acc *e, fp4s_qstats *st)
{
    qs_merge_into(st, &e->q);
}

/* Max of each of 16 vectors (unsigned lanes), as one vector: lane i = max of
 * m[i]. A transpose-and-max tree (45 shuffles/maxes for 16 blocks instead
 * of a horizontal reduction per block); the inputs are taken in the order
 * that makes lane i come out as block i. */
static inline __attribute__((always_inline)) __m512i max16x16(const __m512i *m)
{
    static const int P[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    __m512i t[8], u[4], v[2];
    for (int j = 0; j < 8; j++) {
        __m512i A = m[P[2 * j]], B = m[P[2 * j + 1]];
        t[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(A, B, 0x44), _mm512_shuffle_i32x4(A, B, 0xEE));
    }
    for (int j = 0; j < 4; j++) {
        __m512i A = t[2 * j], B = t[2 * j + 1];
        u[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(A, B, 0x88), _mm512_shuffle_i32x4(A, B, 0xDD));
    }
    for (int j = 0; j < 2; j++) {
        __m512i A = u[2 * j], B = u[2 * j + 1];
        v[j] = _mm512_max_epu32(_mm512_unpacklo_epi64(A, B), _mm512_unpackhi_epi64(A, B));
    }
    __m512 a = _mm512_castsi512_ps(v[0]), b = _mm512_castsi512_ps(v[1]);
    return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}

/* ---- MXFP4 ------------------------------------------------------------------ */

/* E8M0 codes of 16 block amax values (bits; finite non-zero lanes matter)
 * for FLOOR / CEIL / EVEN, exactly as fp4s_mx_k (codec.c) gives k = code - 127
 * for a finite amax: FLOOR exponent field - 2; CEIL one more when the
 * mantissa exceeds 1.5; EVEN the exponent of bits + 2^21, - 2; clamped to
 * [0, 254]. *under: lanes clamped at 0 (k below -127). */
static inline __m512i mx_codes16(fp4s_mx_rule rule, __m512i am, __mmask16 *under)
{
    __m512i code;
    if (rule == FP4S_MX_EVEN) {
        code = _mm512_srli_epi32(_mm512_add_epi32(am, _mm512_set1_epi32(0x200000)), 23);
    } else {
        code = _mm512_srli_epi32(am, 23);
        if (rule == FP4S_MX_CEIL)
            code = _mm512_mask_add_epi32(code, _mm512_cmpgt_epu32_mask(_mm512_and_si512(am,
                       _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x400000)), code,
                       _mm512_set1_epi32(1));
    }
    code = _mm512_sub_epi32(code, _mm512_set1_epi32(2));
    *under = _mm512_cmplt_epi32_mask(code, _mm512_setzero_si512());
    return _mm512_min_epi32(_mm512_max_epi32(code, _mm512_setzero_si512()), _mm512_set1_epi32(254));
}

/* 2^(code - 127) as fp32 bits for codes 0..254 (code 0: the subnormal 2^-127). */
static inline __m512i e8m0_bits16(__m512i code)
{
    return _mm512_mask_mov_epi32(_mm512_slli_epi32(code, 23),
                                 _mm512_cmpeq_epi32_mask(code, _mm512_setzero_si512()),
                                 _mm512_set1_epi32(0x00400000));
}

static inline __attribute__((always_inline)) int
mx_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
   size_t ld, size_t row0, const fp4s_qout *out, fp4s_qstats *st, const bool S)
{
    enc_ctx c;
    enc_init(&c, s);
    err_acc ea;
    err_init(&ea);
    const size_t nb = cols / 32;
    const bool bit_rule = s->mx_rule == FP4S_MX_FLOOR || s->mx_rule == FP4S_MX_CEIL ||
                          s->mx_rule == FP4S_MX_EVEN;
    const __m512i infb = _mm512_set1_epi32((int)INF_BITS);
    const __m512i zbc = _mm512_set1_epi32(s->mx_zero_block_code);
    uint64_t zb = 0, under = 0, nblk = 0;
    int rc = 0;
    uint32_t amv[16] __attribute__((aligned(64)));
    uint32_t codev[16] __attribute__((aligned(64)));
    float invv[16] __attribute__((aligned(64)));
    float scv[16] __attribute__((aligned(64)));
    __m512i satc = c.zero, negzc = c.zero;

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        uint8_t *cr = out->codes ? out->codes + r * out->ld_codes : NULL;
        uint8_t *sr = out->scales ? out->scales + r * out->ld_scales : NULL;
        float *dr = out->dequant ? out->dequant + r * out->ld_dequant : NULL;
        for (size_t g = 0; g < nb; g += 16) {
            const size_t ng = nb - g < 16 ? nb - g : 16;
            const __mmask16 valid = (__mmask16)((1u << ng) - 1u);
            prefetch_ahead(xr + g * 32, ng * 128);
            /* pass 1: block amax (finite lanes), all 16 at once */
            __m512i m[16];
            for (size_t i = 0; i < 16; i++) {
                if (i < ng) {
                    const float *xb = xr + (g + i) * 32;
                    m[i] = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xb)), c.absm),
                                            _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xb + 16)), c.absm));
                } else {
                    m[i] = c.zero;
                }
            }
            __m512i am = max16x16(m);
            __mmask16 nf = _mm512_mask_cmpge_epu32_mask(valid, am, infb);
            __mmask16 zero = _mm512_mask_cmpeq_epi32_mask(valid & (__mmask16)~nf, am, c.zero);
            __mmask16 low = 0;
            __m512i code;
            if (bit_rule) {
                code = mx_codes16(s->mx_rule, am, &low);
            } else {
                _mm512_store_si512(amv, am);
                for (size_t i = 0; i < 16; i++) {
                    bool u = false;
                    codev[i] = (nf >> i & 1u) || amv[i] == 0 || i >= ng
                                   ? 0u : (uint32_t)mx_code_libm(s->mx_rule, u2f(amv[i]), &u);
                    low |= (__mmask16)((unsigned)u << i);
                }
                code = _mm512_load_si512(codev);
            }
            low &= valid & (__mmask16)~nf & (__mmask16)~zero;
            code = _mm512_mask_mov_epi32(code, zero, zbc);
            /* x * 2^-k and q * 2^k, k = code - 127 (exact powers of two) */
            _mm512_store_si512((__m512i *)invv, e8m0_bits16(_mm512_sub_epi32(_mm512_set1_epi32(254), code)));
            _mm512_store_si512((__m512i *)scv, e8m0_bits16(code));
            _mm512_store_si512(codev, code);
            if (sr) _mm512_mask_cvtepi32_storeu_epi8(sr + g, valid, code);
            zb += (uint64_t)__builtin_popcount(zero);
            under += (uint64_t)__builtin_popcount(low);
            nblk += (uint64_t)__builtin_popcount(valid & (__mmask16)~nf);
            /* pass 2: elements */
            for (size_t i = 0; i < ng; i++) {
                const size_t b = g + i;
                if (__builtin_expect(nf >> i & 1u, 0)) {
                    rc = ref_block(s, ts, x, ld, row0, r, b * 32, b, 1, out, st);
                    if (rc) return rc;
                    continue;
                }
                const float *xb = xr + b * 32;
                __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
                __m512 vi = _mm512_set1_ps(invv[i]), vs = _mm512_set1_ps(scv[i]);
                __m512i q0 = e2m1_encode16(&c, _mm512_mul_ps(x0, vi), &satc, &negzc, S);
                __m512i q1 = e2m1_encode16(&c, _mm512_mul_ps(x1, vi), &satc, &negzc, S);
                __m512 d0 = _mm512_mul_ps(_mm512_permutexvar_ps(q0, c.lut), vs);
                __m512 d1 = _mm512_mul_ps(_mm512_permutexvar_ps(q1, c.lut), vs);
                if (S) {
                    err_add(&ea, x0, d0);
                    err_add(&ea, x1, d1);
                    err_unit(&ea);
                }
                if (cr) {
                    _mm_storeu_si128((__m128i *)(cr + b * 32), _mm512_cvtepi32_epi8(q0));
                    _mm_storeu_si128((__m128i *)(cr + b * 32 + 16), _mm512_cvtepi32_epi8(q1));
                }
                if (dr) {
                    _mm512_storeu_ps(dr + b * 32, d0);
                    _mm512_storeu_ps(dr + b * 32 + 16, d1);
                }
            }
        }
        /* per-lane 32-bit counters: flush well before they could wrap */
        if (S && ((r & 1023) == 1023 || r + 1 == rows)) {
            st->saturated += hsum_epi32(satc);
            st->neg_zero += hsum_epi32(negzc);
            satc = negzc = c.zero;
        }
    }
    if (!S) return 0;
    blocks_done(st, nblk, 32, zb, under);
    err_finish(&ea, st);
    return 0;
}

/* ---- NVFP4 ------------------------------------------------------------------- */

/* E4M3 (bias 7, satfinite at 448, NaN 0x7F) of 16 non-negative floats,
 * round to nearest even, as fp4s_e4m3_encode(v, FP4S_TIE_EVEN): normal range
 * by integer rounding of the bits at mantissa bit 20, subnormal range
 * (v < 2^-6) as rint(v * 2^9) (exact scaling; cvtps2dq rounds to nearest even
 * in the default MXCSR mode, which the library never changes). */
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

/* Value of E4M3 bytes (sign in bit 7; 0x7F and 0xFF: NaN), as
 * fp4s_e4m3_decode: magnitude bits << 20 rebiased by 2^120 (the subnormal
 * codes come out right through the fp32 denormal), then the sign. */
static inline __m512 e4m3_decode16(__m512i code)
{
    __m512i m = _mm512_and_si512(code, _mm512_set1_epi32(0x7f));
    __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(m, 20)),
                             _mm512_set1_ps(0x1p120f));
    f = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(f),
            _mm512_slli_epi32(_mm512_and_si512(code, _mm512_set1_epi32(0x80)), 24)));
    __mmask16 nan = _mm512_cmpeq_epi32_mask(m, _mm512_set1_epi32(0x7f));
    return _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(NAN));
}

/* min(hi, v) and max(lo, v) that keep a NaN v, as the C `if (v > hi) v = hi` */
#define CLAMP_HI(v, hi) _mm512_min_ps(hi, v)
#define CLAMP_LO(v, lo) _mm512_max_ps(lo, v)

/* Recipes as nv_scale() in quant_ref.c, 16 blocks at a time, same fp32
 * operations in the same order. code: scale byte; sbv: its value; fac:
 * element factor (te: multiply, others: divide). */
/* *clampm: bit i set where block i's unrounded scale exceeds 464 (fp4s_qstats.scale_clamped) */
static inline void nv_scales16(const nv_params *n, __m512 am, __m512i *code, __m512 *sbv, __m512 *fac, unsigned *clampm)
{
    const __m512 fmax = _mm512_set1_ps(FLT_MAX);
    switch (n->recipe) {
    case FP4S_NV_TE: {
        __m512 sbf = CLAMP_HI(_mm512_mul_ps(am, _mm512_set1_ps(n->mult)), fmax);
        *clampm = (unsigned)_mm512_cmp_ps_mask(sbf, _mm512_set1_ps(464.0f), _CMP_GT_OQ);
        *code = e4m3_encode16(sbf);
        *sbv = e4m3_decode16(*code);
        __m512 enc = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(*sbv, _mm512_set1_ps(n->sdec)));
        *fac = CLAMP_HI(enc, fmax);
        break;
    }
    case FP4S_NV_TORCHAO_DIV: {
        __m512 sc = _mm512_div_ps(_mm512_div_ps(am, _mm512_set1_ps(6.0f)), _mm512_set1_ps(n->pts));
        *clampm = (unsigned)_mm512_cmp_ps_mask(sc, _mm512_set1_ps(464.0f), _CMP_GT_OQ);
        sc = CLAMP_HI(CLAMP_LO(sc, _mm512_set1_ps(0x1p-6f)), _mm512_set1_ps(448.0f));
        *code = e4m3_encode16(sc);
        *sbv = e4m3_decode16(*code);
        *fac = _mm512_mul_ps(_mm512_set1_ps(n->pts), *sbv);
        break;
    }
    case FP4S_NV_GGML: {
        /* ggml quantize_row_nvfp4_ref: ue = ggml_fp32_to_ue4m3(amax_b / 6),
         * the reference's own scalar encoder and decoder per block */
        float a[16] __attribute__((aligned(64)));
        uint32_t cv[16] __attribute__((aligned(64)));
        float sv[16] __attribute__((aligned(64)));
        _mm512_store_ps(a, am);
        *clampm = 0;
        for (int i = 0; i < 16; i++) {
            if (a[i] / 6.0f > 464.0f) *clampm |= 1u << i;
            uint8_t cd = fp4s_ue4m3_encode_ggml(a[i] / 6.0f);
            cv[i] = cd;
            sv[i] = fp4s_ue4m3_decode_ggml(cd);
        }
        *code = _mm512_load_si512(cv);
        *sbv = _mm512_load_ps(sv);
        *fac = *sbv;
        break;
    }
    default: { /* modelopt */
        __m512 pbs = _mm512_div_ps(am, _mm512_set1_ps(n->d6));
        pbs = _mm512_mask_mov_ps(pbs, _mm512_cmpeq_ps_mask(pbs, _mm512_setzero_ps()), _mm512_set1_ps(1.0f));
        pbs = CLAMP_LO(pbs, _mm512_set1_ps(0x1p-9f));
        *clampm = (unsigned)_mm512_cmp_ps_mask(pbs, _mm512_set1_ps(464.0f), _CMP_GT_OQ);
        /* torch's float8_e4m3fn cast does not saturate: above 464 it rounds
         * to 480, which is NaN (0x7F) */
        __mmask16 ok = _mm512_cmp_ps_mask(pbs, _mm512_set1_ps(464.0f), _CMP_LE_OQ);
        *code = _mm512_mask_mov_epi32(_mm512_set1_epi32(0x7f), ok, e4m3_encode16(pbs));
        *sbv = e4m3_decode16(*code);
        *fac = _mm512_mul_ps(*sbv, _mm512_set1_ps(n->pts));
        break;
    }
    }
}

/* ggml's element choice (ggml_best in quant_ref.c): the first of the 8
 * magnitudes with the strictly smallest fabsf(level * s - |x|) in fp32;
 * saturated when |x| > 6 * s; index 0 gives code 8 only for x < 0 (not -0)
 * with keep_neg_zero, other indices take the sign bit. x finite. */
static inline __attribute__((always_inline)) __m512i
ggml_encode16(const enc_ctx *c, __m512 xv, float sb, __m512i *satc, __m512i *negzc, const bool cnt)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const __m512 absm = _mm512_castsi512_ps(c->absm);
    __m512 ax = _mm512_and_ps(xv, absm);
    __m512 be = _mm512_and_ps(_mm512_sub_ps(_mm512_set1_ps(mag[0] * sb), ax), absm);
    __m512i best = c->zero;
    for (int k = 1; k < 8; k++) {
        __m512 e = _mm512_and_ps(_mm512_sub_ps(_mm512_set1_ps(mag[k] * sb), ax), absm);
        __mmask16 lt = _mm512_cmp_ps_mask(e, be, _CMP_LT_OQ);
        be = _mm512_mask_mov_ps(be, lt, e);
        best = _mm512_mask_mov_epi32(best, lt, _mm512_set1_epi32(k));
    }
    if (cnt)
        *satc = _mm512_mask_add_epi32(*satc, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(6.0f * sb), _CMP_GT_OQ),
                                      *satc, c->one);
    __m512i q = _mm512_or_si512(best, _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(xv), 28), c->eight));
    __m512i q0 = c->keep_neg_zero
        ? _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_LT_OQ), c->eight)
        : c->zero;
    q = _mm512_mask_mov_epi32(q, _mm512_cmpeq_epi32_mask(best, c->zero), q0);
    if (cnt) *negzc = _mm512_mask_add_epi32(*negzc, _mm512_cmpeq_epi32_mask(q, c->eight), *negzc, c->one);
    return q;
}

static inline __attribute__((always_inline)) int
nv_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
   size_t ld, size_t row0, const fp4s_qout *out, fp4s_qstats *st, const bool S)
{
    nv_params n;
    int rc = nv_params_init(&n, s, ts, FP4S_KERNEL_AVX512);
    if (rc) return rc;
    enc_ctx c;
    enc_init(&c, s);
    err_acc ea;
    err_init(&ea);
    const size_t nb = cols / 16;
    /* 1-D: one scale per 1x16 block; 2-D: one per 16x16 tile, repeated on
     * its rows (chunks start on tile boundaries: checked by the front end) */
    const size_t H = s->tile2d ? 16 : 1;
    const __m512i infb = _mm512_set1_epi32((int)INF_BITS);
    uint64_t zb = 0, under = 0, nblk = 0, ncl = 0;
    float amv[16] __attribute__((aligned(64)));
    float facv[16] __attribute__((aligned(64)));
    float sbvv[16] __attribute__((aligned(64)));
    uint32_t codev[16] __attribute__((aligned(64)));
    __m512i satc = c.zero, negzc = c.zero;

    for (size_t r0 = 0; r0 < rows; r0 += H) {
        const size_t h = rows - r0 < H ? rows - r0 : H;
        for (size_t g = 0; g < nb; g += 16) {
            size_t ng = nb - g < 16 ? nb - g : 16;
            const __mmask16 valid = (__mmask16)((1u << ng) - 1u);
            for (size_t j = 0; j < h; j++) prefetch_ahead(x + (r0 + j) * ld + g * 16, ng * 64);
            /* pass 1: tile amax (1 or h rows) of 16 tiles at once */
            __m512i m[16];
            for (size_t i = 0; i < 16; i++) {
                m[i] = c.zero;
                if (i < ng)
                    for (size_t j = 0; j < h; j++)
                        m[i] = _mm512_max_epu32(m[i], _mm512_and_si512(_mm512_castps_si512(
                                   _mm512_loadu_ps(x + (r0 + j) * ld + (g + i) * 16)), c.absm));
            }
            __m512i amb = max16x16(m);
            uint32_t nfm = _mm512_mask_cmpge_epu32_mask(valid, amb, infb);
            __m512 am = _mm512_castsi512_ps(amb);
            _mm512_store_ps(amv, am);
            __m512i code;
            __m512 sbv, fac;
            unsigned clampm = 0;
            nv_scales16(&n, am, &code, &sbv, &fac, &clampm);
            /* NaN block scale (an all-zero tensor under torchao, ...): the
             * reference's path for that tile */
            nfm |= _mm512_cmpeq_epi32_mask(code, _mm512_set1_epi32(0x7f));
            _mm512_store_ps(facv, fac);
            _mm512_store_ps(sbvv, sbv);
            _mm512_store_si512(codev, code);
            for (size_t i = 0; i < ng; i++)
                if (__builtin_expect(nfm >> i & 1u, 0)) {
                    rc = ref_block(s, ts, x, ld, row0, r0, (g + i) * 16, g + i, h, out, st);
                    if (rc) return rc;
                }
            /* pass 2: elements, row by row */
            for (size_t j = 0; j < h; j++) {
                const size_t r = r0 + j;
                const float *xr = x + r * ld;
                uint8_t *cr = out->codes ? out->codes + r * out->ld_codes : NULL;
                uint8_t *sr = out->scales ? out->scales + r * out->ld_scales : NULL;
                float *dr = out->dequant ? out->dequant + r * out->ld_dequant : NULL;
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    if (__builtin_expect(nfm >> i & 1u, 0)) continue;
                    nblk++;
                    __m512 xv = _mm512_loadu_ps(xr + b * 16);
                    /* zero block: this row's segment is all +-0 */
                    bool zero = H == 1 ? amv[i] == 0.0f
                                       : _mm512_test_epi32_mask(_mm512_castps_si512(xv), c.absm) == 0;
                    if (zero) zb++;
                    else if ((codev[i] & 0x78) == 0) under++;
                    if (clampm >> i & 1u) ncl++;
                    __m512 vf = _mm512_set1_ps(facv[i]);
                    __m512i q;
                    __m512 d;
                    if (n.recipe == FP4S_NV_GGML) {
                        q = ggml_encode16(&c, xv, sbvv[i], &satc, &negzc, S);
                        d = _mm512_mul_ps(_mm512_permutexvar_ps(q, c.lut), vf);
                    } else {
                        __m512 v = n.div ? _mm512_div_ps(xv, vf) : _mm512_mul_ps(xv, vf);
                        q = e2m1_encode16(&c, v, &satc, &negzc, S);
                        __m512 qv = _mm512_permutexvar_ps(q, c.lut);
                        d = n.div ? _mm512_mul_ps(qv, vf)
                                  : _mm512_mul_ps(_mm512_mul_ps(qv, _mm512_set1_ps(sbvv[i])), _mm512_set1_ps(n.sdec));
                    }
                    if (S) {
                        err_add(&ea, xv, d);
                        err_unit(&ea);
                    }
                    if (cr) _mm_storeu_si128((__m128i *)(cr + b * 16), _mm512_cvtepi32_epi8(q));
                    if (sr) sr[b] = (uint8_t)codev[i];
                    if (dr) _mm512_storeu_ps(dr + b * 16, d);
                }
            }
        }
        /* per-lane 32-bit counters: flush well before they could wrap */
        if (S && (((r0 / H) & 1023) == 1023 || r0 + H >= rows)) {
            st->saturated += hsum_epi32(satc);
            st->neg_zero += hsum_epi32(negzc);
            satc = negzc = c.zero;
        }
    }
    if (!S) return 0;
    blocks_done(st, nblk, 16, zb, under);
    st->scale_clamped += ncl;
    err_finish(&ea, st);
    return 0;
}

/* ---- FP8 E4M3 baselines -------------------------------------------------------- */

/* E4M3 bytes of 16 signed values with a tie rule, satfinite, NaN -> 0x7F, as
 * fp4s_e4m3_encode(v, tie): normal range (|v| >= 2^-6) by integer rounding at
 * fp32 mantissa bit 20; subnormal range on m = |v| * 2^9 (exact): RNE by
 * cvtps2dq, else trunc(m) plus an exact comparison of m - trunc(m) with 0.5. */
typedef struct e4_ctx { __m512i add, lsbm; fp4s_tie tie; } e4_ctx;

static void e4_init(e4_ctx *e, fp4s_tie tie)
{
    e->tie = tie;
    e->add = _mm512_set1_epi32((int)e4m3_round_add(tie));
    e->lsbm = _mm512_set1_epi32((int)round_lsb_mask(tie));
}

static inline __attribute__((always_inline)) __m512i
e4m3_encode_signed16(const e4_ctx *e, __m512 v, __m512i *satc, const bool cnt)
{
    const __m512i b = _mm512_castps_si512(v);
    const __m512i a = _mm512_and_si512(b, _mm512_set1_epi32((int)ABS_MASK));
    __m512i add = _mm512_add_epi32(e->add, _mm512_and_si512(_mm512_srli_epi32(a, 20), e->lsbm));
    __m512i cn = _mm512_sub_epi32(_mm512_srli_epi32(_mm512_add_epi32(a, add), 20), _mm512_set1_epi32(960));
    cn = _mm512_min_epi32(cn, _mm512_set1_epi32(0x7e));
    __m512 m = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(512.0f));
    __m512i cs;
    if (e->tie == FP4S_TIE_EVEN) {
        cs = _mm512_cvtps_epi32(m);
    } else {
        __m512 t = _mm512_roundscale_ps(m, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m512 fr = _mm512_sub_ps(m, t);
        __mmask16 up = e->tie == FP4S_TIE_AWAY ? _mm512_cmp_ps_mask(fr, _mm512_set1_ps(0.5f), _CMP_GE_OQ)
                                               : _mm512_cmp_ps_mask(fr, _mm512_set1_ps(0.5f), _CMP_GT_OQ);
        cs = _mm512_mask_add_epi32(_mm512_cvttps_epi32(t), up, _mm512_cvttps_epi32(t), _mm512_set1_epi32(1));
    }
    __m512i code = _mm512_mask_mov_epi32(cn, _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x3c800000)), cs);
    code = _mm512_or_si512(code, _mm512_srli_epi32(_mm512_andnot_si512(_mm512_set1_epi32((int)ABS_MASK), b), 24));
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32((int)INF_BITS)),
                                 _mm512_set1_epi32(0x7f));
    if (cnt) /* |v| > 448 */
        *satc = _mm512_mask_add_epi32(*satc, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x43e00000)),
                                      *satc, _mm512_set1_epi32(1));
    return code;
}

/* Quantize n (1..16) elements of one row with scale sc (x / sc). */
static inline __attribute__((always_inline)) void
fp8_elems(const e4_ctx *e, const float *xp, uint8_t *cp, float *dp, size_t n, __m512 vsc,
          __m512i *satc, err_acc *ea, const bool S)
{
    __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
    __m512 xv = _mm512_maskz_loadu_ps(m, xp);
    __m512i q = e4m3_encode_signed16(e, _mm512_div_ps(xv, vsc), satc, S);
    __m512 d = _mm512_mul_ps(e4m3_decode16(q), vsc);
    d = _mm512_maskz_mov_ps(m, d);
    if (S) {
        err_add(ea, xv, d);
        err_unit(ea);
    }
    if (cp) _mm_mask_storeu_epi8(cp, m, _mm512_cvtepi32_epi8(q));
    if (dp) _mm512_mask_storeu_ps(dp, m, d);
}

static inline __attribute__((always_inline)) int
fp8_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
   size_t ld, size_t row0, const fp4s_qout *out, fp4s_qstats *st, const bool S)
{
    e4_ctx e;
    e4_init(&e, s->tie);
    err_acc ea;
    err_init(&ea);
    const __m512i absm = _mm512_set1_epi32((int)ABS_MASK), infb = _mm512_set1_epi32((int)INF_BITS);
    __m512i satc = _mm512_setzero_si512();
    uint64_t elems = 0, blocks = 0, zb = 0;
    int rc;

    if (s->fp8_gran == FP4S_FP8_TENSOR) {
        const __m512 vsc = _mm512_set1_ps(ts->fp8_scale);
        if (out->scale_f32) out->scale_f32[0] = ts->fp8_scale;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c += 16) {
                size_t n = cols - c < 16 ? cols - c : 16;
                __mmask16 m = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
                __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + r * ld + c)), absm);
                if (_mm512_mask_cmpge_epu32_mask(m, a, infb)) {
                    if ((rc = ref_fp8_piece(s, ts, x, ld, row0, r, c, 1, n, 0, out, st))) return rc;
                    continue;
                }
                elems += n;
                fp8_elems(&e, x + r * ld + c, out->codes ? out->codes + r * out->ld_codes + c : NULL,
                          out->dequant ? out->dequant + r * out->ld_dequant + c : NULL, n, vsc, &satc, &ea, S);
            }
    } else {
        const size_t H = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1, nt = cols / 128;
        for (size_t r0 = 0; r0 < rows; r0 += H) {
            const size_t h = rows - r0 < H ? rows - r0 : H;
            for (size_t t = 0; t < nt; t++) {
                __m512i mx = _mm512_setzero_si512();
                for (size_t i = 0; i < h; i++) {
                    const float *xp = x + (r0 + i) * ld + t * 128;
                    prefetch_ahead(xp, 512);
                    for (int k = 0; k < 8; k++)
                        mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xp + 16 * k)), absm));
                }
                uint32_t am = _mm512_reduce_max_epu32(mx);
                if (am >= INF_BITS) {
                    if ((rc = ref_fp8_piece(s, ts, x, ld, row0, r0, t * 128, h, 128, t, out, st))) return rc;
                    continue;
                }
                blocks++;
                if (am == 0) zb++;
                float sc = am ? u2f(am) / 448.0f : 1.0f;
                if (out->scale_f32) out->scale_f32[(r0 / H) * out->ld_scale_f32 + t] = sc;
                const __m512 vsc = _mm512_set1_ps(sc);
                for (size_t i = 0; i < h; i++) {
                    const size_t r = r0 + i;
                    elems += 128;
                    for (int k = 0; k < 8; k++)
                        fp8_elems(&e, x + r * ld + t * 128 + 16 * k,
                                  out->codes ? out->codes + r * out->ld_codes + t * 128 + 16 * k : NULL,
                                  out->dequant ? out->dequant + r * out->ld_dequant + t * 128 + 16 * k : NULL,
                                  16, vsc, &satc, &ea, S);
                }
            }
        }
    }
    if (!S) return 0;
    st->elements += elems;
    st->blocks += blocks;
    st->zero_blocks += zb;
    st->saturated += hsum_epi32(satc);
    err_finish(&ea, st);
    return 0;
}

static int fp8_dequant(const fp4s_spec *s, const fp4s_tscale *ts, const uint8_t *codes,
                       size_t ld_codes, const float *scale_f32, size_t ld_sf,
                       size_t rows, size_t cols, float *out, size_t ld_out)
{
    const size_t H = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c += 16) {
            size_t n = cols - c < 16 ? cols - c : 16;
            __mmask16 m = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
            float sc = s->fp8_gran == FP4S_FP8_TENSOR ? (scale_f32 ? scale_f32[0] : ts->fp8_scale)
                                                      : scale_f32[(r / H) * ld_sf + c / 128];
            __m512i q = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, codes + r * ld_codes + c));
            _mm512_mask_storeu_ps(out + r * ld_out + c, m, _mm512_mul_ps(e4m3_decode16(q), _mm512_set1_ps(sc)));
        }
    return 0;
}

/* ---- kernel entry points -------------------------------------------------------- */

QUANT_ENTRY(FP4S_KERNEL_AVX512)

static int k_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                        const uint8_t *codes, size_t ld_codes,
                        const uint8_t *scales, size_t ld_scales,
                        const float *scale_f32, size_t ld_scale_f32,
                        size_t rows, size_t cols, size_t row0,
                        float *out, size_t ld_out)
{
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const quant_body qb = quant_body_of(s, cols);
    if (qb == QB_FP8)
        return fp8_dequant(s, ts, codes, ld_codes, scale_f32, ld_scale_f32, rows, cols, out, ld_out);
    if (qb == QB_MX) {
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            for (size_t b = 0; b < cols / 32; b++) {
                __m512 vs = _mm512_set1_ps(e8m0_value(sr[b]));
                __m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 32)));
                __m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 32 + 16)));
                _mm512_storeu_ps(orow + b * 32, _mm512_mul_ps(_mm512_permutexvar_ps(q0, lut), vs));
                _mm512_storeu_ps(orow + b * 32 + 16, _mm512_mul_ps(_mm512_permutexvar_ps(q1, lut), vs));
            }
        }
        return 0;
    }
    /* NVFP4: the two dequantizations the recipe traits can ask for (others: the reference) */
    const fp4s_nv_recipe_traits *rt = qb == QB_NV ? fp4s_get_nv_recipe_traits(s->nv_recipe) : NULL;
    if (rt && rt->scale_codec == FP4S_NV_SC_UE4M3_GGML && rt->tscale == FP4S_NV_TS_NONE) {
        /* fp4s_ue4m3_decode_ggml: bit 7 ignored, 0x00 and 0x7F decode to 0 */
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            size_t nb = cols / 16;
            for (size_t g = 0; g < nb; g += 16) {
                size_t ng = nb - g < 16 ? nb - g : 16;
                __mmask16 m = (__mmask16)((1u << ng) - 1u);
                __m512i sc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, sr + g));
                __m512i m7 = _mm512_and_si512(sc, _mm512_set1_epi32(0x7f));
                __m512 sbv = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(m7, 20)),
                                           _mm512_set1_ps(0x1p120f));
                sbv = _mm512_mask_mov_ps(sbv, _mm512_cmpeq_epi32_mask(sc, _mm512_set1_epi32(0x7f)),
                                         _mm512_setzero_ps());
                float f[16] __attribute__((aligned(64)));
                _mm512_store_ps(f, sbv);
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 16)));
                    _mm512_storeu_ps(orow + b * 16, _mm512_mul_ps(_mm512_permutexvar_ps(q, lut),
                                                                  _mm512_set1_ps(f[i])));
                }
            }
        }
        return 0;
    }
    if (rt && rt->scale_codec == FP4S_NV_SC_E4M3 && rt->tscale != FP4S_NV_TS_NONE) {
        const __m512 sdec = _mm512_set1_ps(ts->s_dec);
        const bool te = rt->dequant == FP4S_NV_DQ_SPLIT;
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            size_t nb = cols / 16;
            for (size_t g = 0; g < nb; g += 16) {
                size_t ng = nb - g < 16 ? nb - g : 16;
                __mmask16 m = (__mmask16)((1u << ng) - 1u);
                __m512 sbv = e4m3_decode16(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, sr + g)));
                /* te: q * s_b * S_dec; torchao: q * (S_dec * s_b); modelopt: q * (s_b * S_dec) */
                float f[16] __attribute__((aligned(64)));
                _mm512_store_ps(f, te ? sbv : _mm512_mul_ps(sdec, sbv));
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(cr + b * 16)));
                    __m512 d = _mm512_mul_ps(_mm512_permutexvar_ps(q, lut), _mm512_set1_ps(f[i]));
                    if (te) d = _mm512_mul_ps(d, sdec);
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
