/* AVX2 (+FMA, F16C) fast paths of the quantizer kernels: the same algorithm as
 * quant_avx512.c on 8 lanes (see that file for how exactness is kept):
 * - E2M1 by integer rounding of the magnitude bits at mantissa bit 22 for
 *   |v| >= 1 and two exact comparisons below 1 (signed 32-bit compares are
 *   exact here: magnitudes are below 2^31);
 * - fp32 operations in the reference's order, one IEEE op each, compiled with
 *   -ffp-contract=off;
 * - block scales per block (MXFP4, scalar integer or the same libm call as the
 *   reference) or 8 blocks at a time (NVFP4, vector E4M3 encode/decode);
 * - blocks holding NaN or Inf (or getting a NaN E4M3 scale) go to the
 *   reference kernel, one block or tile at a time; so do per-tensor FP8
 *   pieces of 16 (the units of the error sums) holding one, and row tails
 *   shorter than 16;
 * - FP8 E4M3 baselines with every tie rule, x / scale by IEEE division;
 * - err2/x2 unit by unit in the one order of cpu/quant_sums.h, added exactly;
 * - codes only (st == NULL, kernels.h): each quantizer body is inlined twice,
 *   with its constant `S` (stats) true or false; without stats the double
 *   err2/x2 sums and the per-lane counters are not computed, and every output
 *   comes from the same instructions.
 * Every spec of the reference has a fast path here (FP4S_ENOTSUP only for
 * shapes the front end never passes). */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/quant_simd.h"

static inline int popc8(__m256i m) { return __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m))); }

typedef struct enc_ctx {
    __m256i t0, t1, rnd, lsbm;
    __m256i absm, c252, seven, six, one, eight, zero;
    __m256 lut;            /* E2M1 magnitude index -> value */
    bool keep_neg_zero;
    fp4s_zero_in zero_in;
} enc_ctx;

static void enc_init(enc_ctx *c, const fp4s_spec *s)
{
    uint32_t t0, t1;
    e2m1_small_thresholds(s->tie, &t0, &t1);
    c->t0 = _mm256_set1_epi32((int)t0);
    c->t1 = _mm256_set1_epi32((int)t1);
    c->rnd = _mm256_set1_epi32((int)e2m1_round_add(s->tie));
    c->lsbm = _mm256_set1_epi32((int)round_lsb_mask(s->tie));
    c->absm = _mm256_set1_epi32((int)ABS_MASK);
    c->c252 = _mm256_set1_epi32(252);
    c->seven = _mm256_set1_epi32(7);
    c->six = _mm256_set1_epi32((int)SIX_BITS);
    c->one = _mm256_set1_epi32(1);
    c->eight = _mm256_set1_epi32(8);
    c->zero = _mm256_setzero_si256();
    c->lut = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    c->keep_neg_zero = s->keep_neg_zero;
    c->zero_in = s->zero_in;
}

/* Codes of 8 scaled values (finite or +-Inf, not NaN) as
 * fp4s_e2m1_encode_spec; counts saturated (|v| > 6) and -0 codes per lane when
 * cnt (a constant after inlining). */
static inline __attribute__((always_inline)) __m256i
e2m1_encode8(const enc_ctx *c, __m256 v, __m256i *satc, __m256i *negzc, const bool cnt)
{
    __m256i b = _mm256_castps_si256(v);
    __m256i a = _mm256_and_si256(b, c->absm);
    __m256i add = _mm256_add_epi32(c->rnd, _mm256_and_si256(_mm256_srli_epi32(a, 22), c->lsbm));
    __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_add_epi32(a, add), 22), c->c252);
    /* hi is the index for |v| >= 1 and at most the true index below 1
     * (negative under 0.5); lo = [a > t0] + [a > t1] is the index below 1 and
     * 2 above: the index is max(lo, min(hi, 7)) */
    hi = _mm256_min_epi32(hi, c->seven);
    __m256i lo = _mm256_sub_epi32(_mm256_sub_epi32(c->zero, _mm256_cmpgt_epi32(a, c->t0)),
                                  _mm256_cmpgt_epi32(a, c->t1));
    __m256i idx = _mm256_max_epi32(lo, hi);
    __m256i s8 = _mm256_and_si256(_mm256_srli_epi32(b, 28), c->eight);
    if (!c->keep_neg_zero) s8 = _mm256_min_epu32(s8, _mm256_slli_epi32(idx, 3));
    if (c->zero_in != FP4S_ZIN_SIGN)
        s8 = _mm256_blendv_epi8(s8, c->zero_in == FP4S_ZIN_NEG ? c->eight : c->zero,
                                _mm256_cmpeq_epi32(a, c->zero));
    __m256i q = _mm256_or_si256(idx, s8);
    if (cnt) {
        *satc = _mm256_sub_epi32(*satc, _mm256_srai_epi32(_mm256_sub_epi32(c->six, a), 31));
        *negzc = _mm256_sub_epi32(*negzc, _mm256_cmpeq_epi32(q, c->eight));
    }
    return q;
}

static inline uint64_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return (uint64_t)(uint32_t)_mm_cvtsi128_si32(s);
}

/* E2M1 code (low 4 bits of each lane) -> value. */
static inline __m256 e2m1_decode8(const enc_ctx *c, __m256i q)
{
    __m256 m = _mm256_permutevar8x32_ps(c->lut, q); /* uses the low 3 bits */
    __m256i sgn = _mm256_slli_epi32(_mm256_and_si256(q, c->eight), 28);
    return _mm256_or_ps(m, _mm256_castsi256_ps(sgn));
}

/* 16 codes (two vectors of 8 lanes, values 0..15) -> 16 bytes. */
static inline __m128i pack16(__m256i q0, __m256i q1)
{
    __m256i p = _mm256_packs_epi32(q0, q1);           /* q0lo q1lo | q0hi q1hi */
    p = _mm256_permute4x64_epi64(p, 0xD8);            /* q0lo q0hi | q1lo q1hi */
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

static inline __m256i load8_u8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

static inline uint32_t hmax8(__m256i a)
{
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

/* Error sums: one unit (cpu/quant_sums.h) at a time, its 8 lanes in two
 * vectors (lanes 0-3, 4-7); 8 consecutive elements of the unit add to lanes
 * 0..7 in element order, each product rounded on its own (as the reference). */
typedef struct err_acc { __m256d e0, e1, x0, x1; qsums q; } err_acc;

/* e = (double)d - (double)x */
static inline __attribute__((always_inline)) void err_add(err_acc *e, __m256 x, __m256 d)
{
    __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    __m256d dl = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(d)), xl);
    __m256d dh = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(d, 1)), xh);
    e->e0 = _mm256_add_pd(e->e0, _mm256_mul_pd(dl, dl));
    e->e1 = _mm256_add_pd(e->e1, _mm256_mul_pd(dh, dh));
    e->x0 = _mm256_add_pd(e->x0, _mm256_mul_pd(xl, xl));
    e->x1 = _mm256_add_pd(e->x1, _mm256_mul_pd(xh, xh));
}

static inline __attribute__((always_inline)) void err_clear(err_acc *e)
{
    e->e0 = e->e1 = e->x0 = e->x1 = _mm256_setzero_pd();
}

/* The unit is complete: its partial into the exact sums, lanes cleared. */
static inline __attribute__((always_inline)) void err_unit(err_acc *e)
{
    double le[8], lx[8];
    _mm256_storeu_pd(le, e->e0);
    _mm256_storeu_pd(le + 4, e->e1);
    _mm256_storeu_pd(lx, e->x0);
    _mm256_storeu_pd(lx + 4, e->x1);
    qs_unit(&e->q, le, lx);
    err_clear(e);
}

static inline __attribute__((always_inline)) void err_init(err_acc *e)
{
    memset(&e->q, 0, sizeof e->q);
    err_clear(e);
}

static inline __attribute__((always_inline)) void err_finish(const err_acc *e, fp4s_qstats *st)
{
    qs_merge_into(st, &e->q);
}

/* ---- MXFP4 ------------------------------------------------------------------ */

/* E8M0 code of a finite non-zero amax for FLOOR / CEIL / EVEN, as fp4s_mx_k. */
static inline int mx_code_bits(fp4s_mx_rule rule, uint32_t a, bool *under)
{
    int e = (int)(a >> 23), code;
    switch (rule) {
    case FP4S_MX_FLOOR: code = e - 2; break;
    case FP4S_MX_CEIL: code = e - 2 + ((a & 0x7fffff) > 0x400000); break;
    default: /* FP4S_MX_EVEN */ code = (int)((a + 0x200000u) >> 23) - 2; break;
    }
    *under = code < 0;
    if (code < 0) code = 0;
    if (code > 254) code = 254;
    return code;
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
    const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    uint64_t sat = 0, negz = 0, zb = 0, under = 0, nblk = 0;
    int rc;

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        uint8_t *cr = out->codes ? out->codes + r * out->ld_codes : NULL;
        uint8_t *sr = out->scales ? out->scales + r * out->ld_scales : NULL;
        float *dr = out->dequant ? out->dequant + r * out->ld_dequant : NULL;
        __m256i satc = c.zero, negzc = c.zero;
        for (size_t b = 0; b < nb; b++) {
            const float *xb = xr + b * 32;
            prefetch_ahead(xb, 128);
            __m256 xv[4];
            __m256i a[4];
            for (int i = 0; i < 4; i++) {
                xv[i] = _mm256_loadu_ps(xb + 8 * i);
                a[i] = _mm256_and_si256(_mm256_castps_si256(xv[i]), c.absm);
            }
            __m256i mx = _mm256_max_epi32(_mm256_max_epi32(a[0], a[1]), _mm256_max_epi32(a[2], a[3]));
            if (__builtin_expect(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mx, infm1))) != 0, 0)) {
                rc = ref_block(s, ts, x, ld, row0, r, b * 32, b, 1, out, st);
                if (rc) return rc;
                continue;
            }
            uint32_t am = hmax8(mx);
            int code;
            bool u = false;
            if (am == 0) {
                code = s->mx_zero_block_code;
                zb++;
            } else {
                code = bit_rule ? mx_code_bits(s->mx_rule, am, &u)
                                : mx_code_libm(s->mx_rule, u2f(am), &u);
            }
            under += u;
            nblk++;
            __m256 vi = _mm256_set1_ps(e8m0_value((unsigned)(254 - code)));
            __m256 vs = _mm256_set1_ps(e8m0_value((unsigned)code));
            __m256i q[4];
            __m256 d[4];
            for (int i = 0; i < 4; i++) {
                q[i] = e2m1_encode8(&c, _mm256_mul_ps(xv[i], vi), &satc, &negzc, S);
                d[i] = _mm256_mul_ps(e2m1_decode8(&c, q[i]), vs);
                if (S) err_add(&ea, xv[i], d[i]);
            }
            if (S) err_unit(&ea);
            if (cr) {
                _mm_storeu_si128((__m128i *)(cr + b * 32), pack16(q[0], q[1]));
                _mm_storeu_si128((__m128i *)(cr + b * 32 + 16), pack16(q[2], q[3]));
            }
            if (sr) sr[b] = (uint8_t)code;
            if (dr)
                for (int i = 0; i < 4; i++) _mm256_storeu_ps(dr + b * 32 + 8 * i, d[i]);
        }
        if (S) {
            sat += hsum_epi32(satc);
            negz += hsum_epi32(negzc);
        }
    }
    if (!S) return 0;
    blocks_done(st, nblk, 32, zb, under);
    st->saturated += sat;
    st->neg_zero += negz;
    err_finish(&ea, st);
    return 0;
}

/* ---- NVFP4 ------------------------------------------------------------------- */

/* E4M3 round-to-nearest-even, satfinite, of 8 non-negative floats (see
 * quant_avx512.c). */
static inline __m256i e4m3_encode8(__m256 v)
{
    const __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 20), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), lsb));
    __m256i cn = _mm256_sub_epi32(_mm256_srli_epi32(r, 20), _mm256_set1_epi32(960));
    cn = _mm256_min_epi32(cn, _mm256_set1_epi32(0x7e));
    __m256i cs = _mm256_cvtps_epi32(_mm256_mul_ps(v, _mm256_set1_ps(512.0f)));
    __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), u);
    __m256i code = _mm256_blendv_epi8(cn, cs, small);
    /* NaN of either sign (0/0 gives the negative default NaN) */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32((int)INF_BITS));
    return _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
}

/* E4M3 bytes (sign in bit 7; 0x7F, 0xFF: NaN) -> values, as fp4s_e4m3_decode. */
static inline __m256 e4m3_decode8(__m256i code)
{
    __m256i m = _mm256_and_si256(code, _mm256_set1_epi32(0x7f));
    __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 20)),
                             _mm256_set1_ps(0x1p120f));
    f = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(f),
            _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(0x80)), 24)));
    __m256i nan = _mm256_cmpeq_epi32(m, _mm256_set1_epi32(0x7f));
    return _mm256_blendv_ps(f, _mm256_set1_ps(NAN), _mm256_castsi256_ps(nan));
}

/* clamps that keep a NaN v, as the C `if (v > hi) v = hi` */
#define CLAMP_HI(v, hi) _mm256_min_ps(hi, v)
#define CLAMP_LO(v, lo) _mm256_max_ps(lo, v)

/* *clampm: bit i set where block i's unrounded scale exceeds 464 (fp4s_qstats.scale_clamped) */
static inline void nv_scales8(const nv_params *n, __m256 am, __m256i *code, __m256 *sbv, __m256 *fac, unsigned *clampm)
{
    const __m256 fmax = _mm256_set1_ps(FLT_MAX);
    switch (n->recipe) {
    case FP4S_NV_TE: {
        __m256 sbf = CLAMP_HI(_mm256_mul_ps(am, _mm256_set1_ps(n->mult)), fmax);
        *clampm = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(sbf, _mm256_set1_ps(464.0f), _CMP_GT_OQ));
        *code = e4m3_encode8(sbf);
        *sbv = e4m3_decode8(*code);
        __m256 enc = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(*sbv, _mm256_set1_ps(n->sdec)));
        *fac = CLAMP_HI(enc, fmax);
        break;
    }
    case FP4S_NV_TORCHAO_DIV: {
        __m256 sc = _mm256_div_ps(_mm256_div_ps(am, _mm256_set1_ps(6.0f)), _mm256_set1_ps(n->pts));
        *clampm = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(sc, _mm256_set1_ps(464.0f), _CMP_GT_OQ));
        sc = CLAMP_HI(CLAMP_LO(sc, _mm256_set1_ps(0x1p-6f)), _mm256_set1_ps(448.0f));
        *code = e4m3_encode8(sc);
        *sbv = e4m3_decode8(*code);
        *fac = _mm256_mul_ps(_mm256_set1_ps(n->pts), *sbv);
        break;
    }
    case FP4S_NV_GGML: {
        /* ggml: ue = ggml_fp32_to_ue4m3(amax_b / 6), the reference's scalar codec */
        float a[8] __attribute__((aligned(32)));
        uint32_t cv[8] __attribute__((aligned(32)));
        float sv[8] __attribute__((aligned(32)));
        _mm256_store_ps(a, am);
        *clampm = 0;
        for (int i = 0; i < 8; i++) {
            if (a[i] / 6.0f > 464.0f) *clampm |= 1u << i;
            uint8_t cd = fp4s_ue4m3_encode_ggml(a[i] / 6.0f);
            cv[i] = cd;
            sv[i] = fp4s_ue4m3_decode_ggml(cd);
        }
        *code = _mm256_load_si256((const __m256i *)cv);
        *sbv = _mm256_load_ps(sv);
        *fac = *sbv;
        break;
    }
    default: { /* modelopt */
        __m256 pbs = _mm256_div_ps(am, _mm256_set1_ps(n->d6));
        pbs = _mm256_blendv_ps(pbs, _mm256_set1_ps(1.0f), _mm256_cmp_ps(pbs, _mm256_setzero_ps(), _CMP_EQ_OQ));
        pbs = CLAMP_LO(pbs, _mm256_set1_ps(0x1p-9f));
        *clampm = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(pbs, _mm256_set1_ps(464.0f), _CMP_GT_OQ));
        /* torch's float8_e4m3fn cast does not saturate: above 464 it rounds
         * to 480, which is NaN (0x7F) */
        __m256 ok = _mm256_cmp_ps(pbs, _mm256_set1_ps(464.0f), _CMP_LE_OQ);
        *code = _mm256_blendv_epi8(_mm256_set1_epi32(0x7f), e4m3_encode8(pbs), _mm256_castps_si256(ok));
        *sbv = e4m3_decode8(*code);
        *fac = _mm256_mul_ps(*sbv, _mm256_set1_ps(n->pts));
        break;
    }
    }
}

/* ggml's element choice (see quant_avx512.c, ggml_best in quant_ref.c). */
static inline __attribute__((always_inline)) __m256i
ggml_encode8(const enc_ctx *c, __m256 xv, float sb, __m256i *satc, __m256i *negzc, const bool cnt)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const __m256 absm = _mm256_castsi256_ps(c->absm);
    __m256 ax = _mm256_and_ps(xv, absm);
    __m256 be = _mm256_and_ps(_mm256_sub_ps(_mm256_set1_ps(mag[0] * sb), ax), absm);
    __m256i best = c->zero;
    for (int k = 1; k < 8; k++) {
        __m256 e = _mm256_and_ps(_mm256_sub_ps(_mm256_set1_ps(mag[k] * sb), ax), absm);
        __m256 lt = _mm256_cmp_ps(e, be, _CMP_LT_OQ);
        be = _mm256_blendv_ps(be, e, lt);
        best = _mm256_blendv_epi8(best, _mm256_set1_epi32(k), _mm256_castps_si256(lt));
    }
    if (cnt)
        *satc = _mm256_sub_epi32(*satc, _mm256_castps_si256(_mm256_cmp_ps(ax, _mm256_set1_ps(6.0f * sb), _CMP_GT_OQ)));
    __m256i q = _mm256_or_si256(best, _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(xv), 28), c->eight));
    __m256i q0 = c->keep_neg_zero
        ? _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(xv, _mm256_setzero_ps(), _CMP_LT_OQ)), c->eight)
        : c->zero;
    q = _mm256_blendv_epi8(q, q0, _mm256_cmpeq_epi32(best, c->zero));
    if (cnt) *negzc = _mm256_sub_epi32(*negzc, _mm256_cmpeq_epi32(q, c->eight));
    return q;
}

static inline __attribute__((always_inline)) int
nv_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
   size_t ld, size_t row0, const fp4s_qout *out, fp4s_qstats *st, const bool S)
{
    nv_params n;
    int rc = nv_params_init(&n, s, ts, FP4S_KERNEL_AVX2);
    if (rc) return rc;
    enc_ctx c;
    enc_init(&c, s);
    err_acc ea;
    err_init(&ea);
    const size_t nb = cols / 16;
    const size_t H = s->tile2d ? 16 : 1; /* 2-D: one scale per 16x16 tile */
    const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    uint64_t zb = 0, under = 0, nblk = 0, ncl = 0;
    uint32_t amv[8] __attribute__((aligned(32)));
    float facv[8] __attribute__((aligned(32)));
    float sbvv[8] __attribute__((aligned(32)));
    uint32_t codev[8] __attribute__((aligned(32)));
    __m256i satc = c.zero, negzc = c.zero;

    for (size_t r0 = 0; r0 < rows; r0 += H) {
        const size_t h = rows - r0 < H ? rows - r0 : H;
        for (size_t g = 0; g < nb; g += 8) {
            size_t ng = nb - g < 8 ? nb - g : 8;
            unsigned nfm = 0;
            for (size_t j = 0; j < h; j++) prefetch_ahead(x + (r0 + j) * ld + g * 16, ng * 64);
            for (size_t i = 0; i < ng; i++) {
                __m256i mx = c.zero;
                for (size_t j = 0; j < h; j++) {
                    const float *xb = x + (r0 + j) * ld + (g + i) * 16;
                    mx = _mm256_max_epi32(mx, _mm256_max_epi32(
                             _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xb)), c.absm),
                             _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xb + 8)), c.absm)));
                }
                if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mx, infm1))))
                    nfm |= 1u << i;
                amv[i] = hmax8(mx);
            }
            for (size_t i = ng; i < 8; i++) amv[i] = 0;
            __m256 am = _mm256_castsi256_ps(_mm256_load_si256((const __m256i *)amv));
            __m256i code;
            __m256 sbv, fac;
            unsigned clampm = 0;
            nv_scales8(&n, am, &code, &sbv, &fac, &clampm);
            /* NaN block scale: the reference's path for that tile */
            nfm |= (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
                       _mm256_cmpeq_epi32(code, _mm256_set1_epi32(0x7f))));
            _mm256_store_ps(facv, fac);
            _mm256_store_ps(sbvv, sbv);
            _mm256_store_si256((__m256i *)codev, code);
            for (size_t i = 0; i < ng; i++)
                if (__builtin_expect(nfm >> i & 1u, 0)) {
                    rc = ref_block(s, ts, x, ld, row0, r0, (g + i) * 16, g + i, h, out, st);
                    if (rc) return rc;
                }
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
                    const float *xb = xr + b * 16;
                    __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
                    bool zero;
                    if (H == 1) {
                        zero = amv[i] == 0;
                    } else {
                        __m256i o = _mm256_and_si256(_mm256_or_si256(_mm256_castps_si256(x0),
                                                                     _mm256_castps_si256(x1)), c.absm);
                        zero = _mm256_testz_si256(o, o);
                    }
                    if (zero) zb++;
                    else if ((codev[i] & 0x78) == 0) under++;
                    if (clampm >> i & 1u) ncl++;
                    __m256 vf = _mm256_set1_ps(facv[i]);
                    __m256i q0, q1;
                    __m256 d0, d1;
                    if (n.recipe == FP4S_NV_GGML) {
                        q0 = ggml_encode8(&c, x0, sbvv[i], &satc, &negzc, S);
                        q1 = ggml_encode8(&c, x1, sbvv[i], &satc, &negzc, S);
                    } else {
                        __m256 v0 = n.div ? _mm256_div_ps(x0, vf) : _mm256_mul_ps(x0, vf);
                        __m256 v1 = n.div ? _mm256_div_ps(x1, vf) : _mm256_mul_ps(x1, vf);
                        q0 = e2m1_encode8(&c, v0, &satc, &negzc, S);
                        q1 = e2m1_encode8(&c, v1, &satc, &negzc, S);
                    }
                    if (n.recipe == FP4S_NV_GGML) {
                        d0 = _mm256_mul_ps(e2m1_decode8(&c, q0), vf);
                        d1 = _mm256_mul_ps(e2m1_decode8(&c, q1), vf);
                    } else if (n.div) {
                        d0 = _mm256_mul_ps(e2m1_decode8(&c, q0), vf);
                        d1 = _mm256_mul_ps(e2m1_decode8(&c, q1), vf);
                    } else {
                        __m256 vsb = _mm256_set1_ps(sbvv[i]);
                        d0 = _mm256_mul_ps(_mm256_mul_ps(e2m1_decode8(&c, q0), vsb), _mm256_set1_ps(n.sdec));
                        d1 = _mm256_mul_ps(_mm256_mul_ps(e2m1_decode8(&c, q1), vsb), _mm256_set1_ps(n.sdec));
                    }
                    if (S) {
                        err_add(&ea, x0, d0);
                        err_add(&ea, x1, d1);
                        err_unit(&ea);
                    }
                    if (cr) _mm_storeu_si128((__m128i *)(cr + b * 16), pack16(q0, q1));
                    if (sr) sr[b] = (uint8_t)codev[i];
                    if (dr) {
                        _mm256_storeu_ps(dr + b * 16, d0);
                        _mm256_storeu_ps(dr + b * 16 + 8, d1);
                    }
                }
            }
        }
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

/* E4M3 bytes of 8 signed values with a tie rule (see quant_avx512.c). */
typedef struct e4_ctx { __m256i add, lsbm; fp4s_tie tie; } e4_ctx;

static void e4_init(e4_ctx *e, fp4s_tie tie)
{
    e->tie = tie;
    e->add = _mm256_set1_epi32((int)e4m3_round_add(tie));
    e->lsbm = _mm256_set1_epi32((int)round_lsb_mask(tie));
}

static inline __attribute__((always_inline)) __m256i
e4m3_encode_signed8(const e4_ctx *e, __m256 v, __m256i *satc, const bool cnt)
{
    const __m256i absm = _mm256_set1_epi32((int)ABS_MASK);
    const __m256i b = _mm256_castps_si256(v);
    const __m256i a = _mm256_and_si256(b, absm);
    __m256i add = _mm256_add_epi32(e->add, _mm256_and_si256(_mm256_srli_epi32(a, 20), e->lsbm));
    __m256i cn = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_add_epi32(a, add), 20), _mm256_set1_epi32(960));
    cn = _mm256_min_epi32(cn, _mm256_set1_epi32(0x7e));
    __m256 m = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(512.0f));
    __m256i cs;
    if (e->tie == FP4S_TIE_EVEN) {
        cs = _mm256_cvtps_epi32(m);
    } else {
        __m256 t = _mm256_round_ps(m, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 fr = _mm256_sub_ps(m, t);
        __m256 up = e->tie == FP4S_TIE_AWAY ? _mm256_cmp_ps(fr, _mm256_set1_ps(0.5f), _CMP_GE_OQ)
                                            : _mm256_cmp_ps(fr, _mm256_set1_ps(0.5f), _CMP_GT_OQ);
        cs = _mm256_sub_epi32(_mm256_cvttps_epi32(t), _mm256_castps_si256(up));
    }
    __m256i code = _mm256_blendv_epi8(cn, cs, _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3c800000), a));
    code = _mm256_or_si256(code, _mm256_srli_epi32(_mm256_andnot_si256(absm, b), 24));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), _mm256_cmpgt_epi32(a, _mm256_set1_epi32((int)INF_BITS)));
    if (cnt) /* |v| > 448 */
        *satc = _mm256_sub_epi32(*satc, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x43e00000)));
    return code;
}

/* 8 elements of one row with scale sc (x / sc). */
static inline __attribute__((always_inline)) void
fp8_elems8(const e4_ctx *e, const float *xp, uint8_t *cp, float *dp, __m256 vsc,
           __m256i *satc, err_acc *ea, const bool S)
{
    __m256 xv = _mm256_loadu_ps(xp);
    __m256i q = e4m3_encode_signed8(e, _mm256_div_ps(xv, vsc), satc, S);
    __m256 d = _mm256_mul_ps(e4m3_decode8(q), vsc);
    if (S) err_add(ea, xv, d);
    if (cp) {
        __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)cp, _mm_packus_epi16(p, p));
    }
    if (dp) _mm256_storeu_ps(dp, d);
}

static inline __attribute__((always_inline)) int
fp8_quant(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
   size_t ld, size_t row0, const fp4s_qout *out, fp4s_qstats *st, const bool S)
{
    e4_ctx e;
    e4_init(&e, s->tie);
    err_acc ea;
    err_init(&ea);
    const __m256i absm = _mm256_set1_epi32((int)ABS_MASK), infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    __m256i satc = _mm256_setzero_si256();
    uint64_t elems = 0, blocks = 0, zb = 0;
    int rc;

    if (s->fp8_gran == FP4S_FP8_TENSOR) {
        const __m256 vsc = _mm256_set1_ps(ts->fp8_scale);
        if (out->scale_f32) out->scale_f32[0] = ts->fp8_scale;
        /* pieces of 16, the units of the error sums (cpu/quant_sums.h) */
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c += 16) {
                size_t n = cols - c < 16 ? cols - c : 16;
                const float *xp = x + r * ld + c;
                /* a tail of fewer than 16, or non-finite values: the reference */
                if (n < 16 || _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                  _mm256_max_epi32(
                                      _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xp)), absm),
                                      _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xp + 8)), absm)),
                                  infm1)))) {
                    if ((rc = ref_fp8_piece(s, ts, x, ld, row0, r, c, 1, n, 0, out, st))) return rc;
                    continue;
                }
                elems += 16;
                for (size_t k = 0; k < 16; k += 8)
                    fp8_elems8(&e, xp + k, out->codes ? out->codes + r * out->ld_codes + c + k : NULL,
                               out->dequant ? out->dequant + r * out->ld_dequant + c + k : NULL, vsc, &satc, &ea, S);
                if (S) err_unit(&ea);
            }
    } else {
        const size_t H = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1, nt = cols / 128;
        for (size_t r0 = 0; r0 < rows; r0 += H) {
            const size_t h = rows - r0 < H ? rows - r0 : H;
            for (size_t t = 0; t < nt; t++) {
                __m256i mx = _mm256_setzero_si256();
                for (size_t i = 0; i < h; i++) {
                    const float *xp = x + (r0 + i) * ld + t * 128;
                    prefetch_ahead(xp, 512);
                    for (int k = 0; k < 16; k++)
                        mx = _mm256_max_epi32(mx, _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xp + 8 * k)), absm));
                }
                uint32_t am = hmax8(mx);
                if (am >= INF_BITS) {
                    if ((rc = ref_fp8_piece(s, ts, x, ld, row0, r0, t * 128, h, 128, t, out, st))) return rc;
                    continue;
                }
                blocks++;
                if (am == 0) zb++;
                float sc = am ? u2f(am) / 448.0f : 1.0f;
                if (out->scale_f32) out->scale_f32[(r0 / H) * out->ld_scale_f32 + t] = sc;
                const __m256 vsc = _mm256_set1_ps(sc);
                for (size_t i = 0; i < h; i++) {
                    const size_t r = r0 + i;
                    elems += 128;
                    for (int k = 0; k < 16; k++) {
                        fp8_elems8(&e, x + r * ld + t * 128 + 8 * k,
                                   out->codes ? out->codes + r * out->ld_codes + t * 128 + 8 * k : NULL,
                                   out->dequant ? out->dequant + r * out->ld_dequant + t * 128 + 8 * k : NULL,
                                   vsc, &satc, &ea, S);
                        if (S && (k & 1)) err_unit(&ea); /* units of 16 */
                    }
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
    for (size_t r = 0; r < rows; r++) {
        size_t c = 0;
        for (; c + 8 <= cols; c += 8) {
            float sc = s->fp8_gran == FP4S_FP8_TENSOR ? (scale_f32 ? scale_f32[0] : ts->fp8_scale)
                                                      : scale_f32[(r / H) * ld_sf + c / 128];
            __m256i q = load8_u8(codes + r * ld_codes + c);
            _mm256_storeu_ps(out + r * ld_out + c, _mm256_mul_ps(e4m3_decode8(q), _mm256_set1_ps(sc)));
        }
        for (; c < cols; c++) { /* per-tensor tail */
            float sc = scale_f32 ? scale_f32[0] : ts->fp8_scale;
            out[r * ld_out + c] = fp4s_e4m3_decode(codes[r * ld_codes + c]) * sc;
        }
    }
    return 0;
}

/* ---- kernel entry points -------------------------------------------------------- */

QUANT_ENTRY(FP4S_KERNEL_AVX2)

static int k_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                        const uint8_t *codes, size_t ld_codes,
                        const uint8_t *scales, size_t ld_scales,
                        const float *scale_f32, size_t ld_scale_f32,
                        size_t rows, size_t cols, size_t row0,
                        float *out, size_t ld_out)
{
    enc_ctx c;
    enc_init(&c, s);
    const __m256i m15 = _mm256_set1_epi32(15);
    const quant_body qb = quant_body_of(s, cols);
    if (qb == QB_MX) {
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            for (size_t b = 0; b < cols / 32; b++) {
                __m256 vs = _mm256_set1_ps(e8m0_value(sr[b]));
                for (int i = 0; i < 4; i++) {
                    __m256i q = _mm256_and_si256(load8_u8(cr + b * 32 + 8 * i), m15);
                    _mm256_storeu_ps(orow + b * 32 + 8 * i, _mm256_mul_ps(e2m1_decode8(&c, q), vs));
                }
            }
        }
        return 0;
    }
    if (qb == QB_FP8)
        return fp8_dequant(s, ts, codes, ld_codes, scale_f32, ld_scale_f32, rows, cols, out, ld_out);
    /* NVFP4: the two dequantizations the recipe traits can ask for (others: the reference) */
    const fp4s_nv_recipe_traits *rt = qb == QB_NV ? fp4s_get_nv_recipe_traits(s->nv_recipe) : NULL;
    if (rt && rt->scale_codec == FP4S_NV_SC_UE4M3_GGML && rt->tscale == FP4S_NV_TS_NONE) {
        /* fp4s_ue4m3_decode_ggml: bit 7 ignored, 0x00 and 0x7F decode to 0 */
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            for (size_t b = 0; b < cols / 16; b++) {
                __m256 vf = _mm256_set1_ps(fp4s_ue4m3_decode_ggml(sr[b]));
                for (int h = 0; h < 2; h++) {
                    __m256i q = _mm256_and_si256(load8_u8(cr + b * 16 + 8 * h), m15);
                    _mm256_storeu_ps(orow + b * 16 + 8 * h, _mm256_mul_ps(e2m1_decode8(&c, q), vf));
                }
            }
        }
        return 0;
    }
    if (rt && rt->scale_codec == FP4S_NV_SC_E4M3 && rt->tscale != FP4S_NV_TS_NONE) {
        const __m256 sdec = _mm256_set1_ps(ts->s_dec);
        const bool te = rt->dequant == FP4S_NV_DQ_SPLIT;
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            size_t nb = cols / 16;
            for (size_t g = 0; g < nb; g += 8) {
                size_t ng = nb - g < 8 ? nb - g : 8;
                uint8_t sb8[8] = {0};
                memcpy(sb8, sr + g, ng);
                __m256 sbv = e4m3_decode8(load8_u8(sb8));
                /* te: q * s_b * S_dec; torchao: q * (S_dec * s_b); modelopt: q * (s_b * S_dec) */
                float f[8] __attribute__((aligned(32)));
                _mm256_store_ps(f, te ? sbv : _mm256_mul_ps(sdec, sbv));
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    __m256 vf = _mm256_set1_ps(f[i]);
                    for (int h = 0; h < 2; h++) {
                        __m256i q = _mm256_and_si256(load8_u8(cr + b * 16 + 8 * h), m15);
                        __m256 d = _mm256_mul_ps(e2m1_decode8(&c, q), vf);
                        if (te) d = _mm256_mul_ps(d, sdec);
                        _mm256_storeu_ps(orow + b * 16 + 8 * h, d);
                    }
                }
            }
        }
        return 0;
    }
    return FP4S_ENOTSUP;
}

static float k_amax(const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite)
{
    const __m256i absm = _mm256_set1_epi32((int)ABS_MASK);
    const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    __m256i m = _mm256_setzero_si256();
    uint64_t nf = 0;
    uint32_t ms = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        size_t j = 0;
        for (; j + 8 <= cols; j += 8) {
            __m256i a = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xr + j)), absm);
            __m256i bad = _mm256_cmpgt_epi32(a, infm1);
            m = _mm256_max_epi32(m, _mm256_andnot_si256(bad, a));
            nf += (uint64_t)popc8(bad);
        }
        for (; j < cols; j++) {
            uint32_t a = f2u(xr[j]) & ABS_MASK;
            if (a >= INF_BITS) nf++;
            else if (a > ms) ms = a;
        }
    }
    uint32_t mv = hmax8(m);
    if (ms > mv) mv = ms;
    if (nonfinite) *nonfinite += nf;
    return u2f(mv);
}

const fp4s_kernel_table fp4s_kernels_avx2 = {
    .name = "avx2",
    .quantize = k_quantize,
    .dequantize = k_dequantize,
    .amax = k_amax,
};
