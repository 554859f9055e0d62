/* AVX2 (+FMA, F16C) fast paths of the quantizer kernels: the same algorithm as
 * quant_avx512.c on 8 lanes (see that file for how exactness is kept):
 * - E2M1 by comparing magnitude bits with the seven midpoints (signed 32-bit
 *   compares are exact here: magnitudes are below 2^31);
 * - fp32 operations in the reference's order, one IEEE op each, compiled with
 *   -ffp-contract=off;
 * - block scales per block (MXFP4, scalar integer or the same libm call as the
 *   reference) or 8 blocks at a time (NVFP4, vector E4M3 encode/decode);
 * - blocks holding NaN or Inf go to the reference kernel, one block at a time.
 * Unimplemented specs return FP4S_ENOTSUP: FP8, NVFP4 2-D and the ggml NVFP4
 * recipe, ggml's MXFP4 scale storage. */
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

static inline int popc8(__m256i m) { return __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m))); }

/* Thresholds: index = #(bits(|v|) > T_j); see quant_avx512.c. */
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
    __m256i thr[7];
    __m256i absm, six, eight, zero;
    __m256 lut;            /* E2M1 magnitude index -> value */
    bool keep_neg_zero;
} enc_ctx;

static void enc_init(enc_ctx *c, const fp4s_spec *s)
{
    uint32_t t[7];
    e2m1_thresholds(s->tie, t);
    for (int j = 0; j < 7; j++) c->thr[j] = _mm256_set1_epi32((int)t[j]);
    c->absm = _mm256_set1_epi32((int)ABS_MASK);
    c->six = _mm256_set1_epi32((int)SIX_BITS);
    c->eight = _mm256_set1_epi32(8);
    c->zero = _mm256_setzero_si256();
    c->lut = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    c->keep_neg_zero = s->keep_neg_zero;
}

/* Codes of 8 finite scaled values; counts saturated (|v| > 6) and -0 codes. */
static inline __m256i e2m1_encode8(const enc_ctx *c, __m256 v, uint64_t *sat, uint64_t *negz)
{
    __m256i b = _mm256_castps_si256(v);
    __m256i a = _mm256_and_si256(b, c->absm);
    __m256i idx = c->zero;
    for (int j = 0; j < 7; j++)
        idx = _mm256_sub_epi32(idx, _mm256_cmpgt_epi32(a, c->thr[j]));
    __m256i neg = _mm256_cmpgt_epi32(c->zero, b);
    if (!c->keep_neg_zero)
        neg = _mm256_andnot_si256(_mm256_cmpeq_epi32(idx, c->zero), neg);
    idx = _mm256_or_si256(idx, _mm256_and_si256(neg, c->eight));
    *sat += (uint64_t)popc8(_mm256_cmpgt_epi32(a, c->six));
    *negz += (uint64_t)popc8(_mm256_cmpeq_epi32(idx, c->eight));
    return idx;
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

typedef struct err_acc { __m256d e, x; } err_acc;

static inline void err_add(err_acc *e, __m256 x, __m256 q)
{
    __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    __m256d dl = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(q)), xl);
    __m256d dh = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(q, 1)), xh);
    e->e = _mm256_add_pd(e->e, _mm256_add_pd(_mm256_mul_pd(dl, dl), _mm256_mul_pd(dh, dh)));
    e->x = _mm256_add_pd(e->x, _mm256_add_pd(_mm256_mul_pd(xl, xl), _mm256_mul_pd(xh, xh)));
}

static void err_init(err_acc *e) { e->e = e->x = _mm256_setzero_pd(); }

static double hsum4d(__m256d v)
{
    double t[4];
    _mm256_storeu_pd(t, v);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

static void err_finish(const err_acc *e, fp4s_qstats *st)
{
    st->err2 += hsum4d(e->e);
    st->x2 += hsum4d(e->x);
}

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
    const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    uint64_t sat = 0, negz = 0, zb = 0, under = 0, nblk = 0;
    int rc;

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        for (size_t b = 0; b < nb; b++) {
            const float *xb = xr + b * 32;
            __m256 xv[4];
            __m256i a[4];
            for (int i = 0; i < 4; i++) {
                xv[i] = _mm256_loadu_ps(xb + 8 * i);
                a[i] = _mm256_and_si256(_mm256_castps_si256(xv[i]), c.absm);
            }
            __m256i mx = _mm256_max_epi32(_mm256_max_epi32(a[0], a[1]), _mm256_max_epi32(a[2], a[3]));
            if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mx, infm1)))) {
                rc = ref_block(s, ts, x, ld, row0, r, b * 32, b, out, st);
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
                code = libm_rule ? mx_code_libm(s->mx_rule, u2f(am), &u)
                                 : mx_code_bits(s->mx_rule, am, &u);
            }
            under += u;
            nblk++;
            float inv = code == 254 ? u2f(0x00400000u) : u2f((uint32_t)(254 - code) << 23);
            float sc = code == 0 ? u2f(0x00400000u) : u2f((uint32_t)code << 23);
            __m256 vi = _mm256_set1_ps(inv), vs = _mm256_set1_ps(sc);
            __m256i q[4];
            __m256 d[4];
            for (int i = 0; i < 4; i++) {
                q[i] = e2m1_encode8(&c, _mm256_mul_ps(xv[i], vi), &sat, &negz);
                d[i] = _mm256_mul_ps(e2m1_decode8(&c, q[i]), vs);
                err_add(&ea, xv[i], d[i]);
            }
            if (out->codes) {
                uint8_t *cp = out->codes + r * out->ld_codes + b * 32;
                _mm_storeu_si128((__m128i *)cp, pack16(q[0], q[1]));
                _mm_storeu_si128((__m128i *)(cp + 16), pack16(q[2], q[3]));
            }
            if (out->scales) out->scales[r * out->ld_scales + b] = (uint8_t)code;
            if (out->dequant) {
                float *dp = out->dequant + r * out->ld_dequant + b * 32;
                for (int i = 0; i < 4; i++) _mm256_storeu_ps(dp + 8 * i, d[i]);
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

/* E4M3 round-to-nearest-even, satfinite, of 8 non-negative floats. */
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
    __m256i nan = _mm256_cmpgt_epi32(u, _mm256_set1_epi32((int)INF_BITS));
    return _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
}

static inline __m256 e4m3_decode8(__m256i code)
{
    __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(code, 20)),
                             _mm256_set1_ps(0x1p120f));
    __m256i nan = _mm256_cmpeq_epi32(code, _mm256_set1_epi32(0x7f));
    return _mm256_blendv_ps(f, _mm256_set1_ps(NAN), _mm256_castsi256_ps(nan));
}

typedef struct nv_ctx {
    fp4s_nv_recipe recipe;
    __m256 c, pts, inv_pts, sdec;
    bool div;
} nv_ctx;

static int nv_init(nv_ctx *n, const fp4s_spec *s, const fp4s_tscale *ts)
{
    n->recipe = s->nv_recipe;
    n->sdec = _mm256_set1_ps(ts->s_dec);
    n->div = false;
    switch (s->nv_recipe) {
    case FP4S_NV_TE:
        n->c = _mm256_set1_ps(ts->s_enc * (1.0f / 6.0f));
        return 0;
    case FP4S_NV_TORCHAO:
        n->pts = _mm256_set1_ps(ts->s_dec);
        n->inv_pts = _mm256_set1_ps(1.0f / ts->s_dec);
        return 0;
    case FP4S_NV_MODELOPT:
        n->pts = _mm256_set1_ps(ts->s_dec);
        n->div = true;
        return 0;
    default:
        return FP4S_ENOTSUP;
    }
}

static inline void nv_scales8(const nv_ctx *n, __m256 am, __m256i *code, __m256 *sbd, __m256 *fac)
{
    switch (n->recipe) {
    case FP4S_NV_TE:
        *code = e4m3_encode8(_mm256_mul_ps(am, n->c));
        *sbd = e4m3_decode8(*code);
        *fac = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(*sbd, n->sdec));
        break;
    case FP4S_NV_TORCHAO: {
        __m256 v = _mm256_div_ps(_mm256_div_ps(am, _mm256_set1_ps(6.0f)), n->pts);
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(0x1p-6f)), _mm256_set1_ps(448.0f));
        *code = e4m3_encode8(v);
        *sbd = e4m3_decode8(*code);
        *fac = _mm256_div_ps(n->inv_pts, *sbd);
        break;
    }
    default: {
        __m256 v = _mm256_div_ps(am, _mm256_mul_ps(_mm256_set1_ps(6.0f), n->pts));
        __m256 z = _mm256_cmp_ps(am, _mm256_setzero_ps(), _CMP_EQ_OQ);
        v = _mm256_blendv_ps(v, _mm256_set1_ps(1.0f), z);
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(0x1p-9f)), _mm256_set1_ps(448.0f));
        *code = e4m3_encode8(v);
        *sbd = e4m3_decode8(*code);
        *fac = _mm256_mul_ps(*sbd, n->pts);
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
    const __m256i infm1 = _mm256_set1_epi32((int)INF_BITS - 1);
    uint64_t sat = 0, negz = 0, zb = 0, under = 0, nblk = 0;
    uint32_t amv[8] __attribute__((aligned(32)));
    float facv[8] __attribute__((aligned(32)));
    float sbdv[8] __attribute__((aligned(32)));
    uint32_t codev[8] __attribute__((aligned(32)));

    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        for (size_t g = 0; g < nb; g += 8) {
            size_t ng = nb - g < 8 ? nb - g : 8;
            unsigned nfm = 0;
            for (size_t i = 0; i < ng; i++) {
                const float *xb = xr + (g + i) * 16;
                __m256i a0 = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xb)), c.absm);
                __m256i a1 = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(xb + 8)), c.absm);
                __m256i mx = _mm256_max_epi32(a0, a1);
                if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mx, infm1))))
                    nfm |= 1u << i;
                amv[i] = hmax8(mx);
            }
            for (size_t i = ng; i < 8; i++) amv[i] = 0;
            __m256 am = _mm256_castsi256_ps(_mm256_load_si256((const __m256i *)amv));
            __m256i code;
            __m256 sbd, fac;
            nv_scales8(&n, am, &code, &sbd, &fac);
            _mm256_store_ps(facv, fac);
            _mm256_store_ps(sbdv, sbd);
            _mm256_store_si256((__m256i *)codev, code);
            for (size_t i = 0; i < ng; i++) {
                size_t b = g + i;
                if (nfm >> i & 1u) {
                    rc = ref_block(s, ts, x, ld, row0, r, b * 16, b, out, st);
                    if (rc) return rc;
                    continue;
                }
                nblk++;
                zb += amv[i] == 0;
                under += codev[i] < 8;
                const float *xb = xr + b * 16;
                __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
                __m256 vf = _mm256_set1_ps(facv[i]), vsb = _mm256_set1_ps(sbdv[i]);
                __m256 v0 = n.div ? _mm256_div_ps(x0, vf) : _mm256_mul_ps(x0, vf);
                __m256 v1 = n.div ? _mm256_div_ps(x1, vf) : _mm256_mul_ps(x1, vf);
                __m256i q0 = e2m1_encode8(&c, v0, &sat, &negz);
                __m256i q1 = e2m1_encode8(&c, v1, &sat, &negz);
                __m256 d0 = _mm256_mul_ps(_mm256_mul_ps(e2m1_decode8(&c, q0), vsb), n.sdec);
                __m256 d1 = _mm256_mul_ps(_mm256_mul_ps(e2m1_decode8(&c, q1), vsb), n.sdec);
                err_add(&ea, x0, d0);
                err_add(&ea, x1, d1);
                if (out->codes)
                    _mm_storeu_si128((__m128i *)(out->codes + r * out->ld_codes + b * 16), pack16(q0, q1));
                if (out->scales) out->scales[r * out->ld_scales + b] = (uint8_t)codev[i];
                if (out->dequant) {
                    float *dp = out->dequant + r * out->ld_dequant + b * 16;
                    _mm256_storeu_ps(dp, d0);
                    _mm256_storeu_ps(dp + 8, d1);
                }
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
    enc_ctx c;
    enc_init(&c, s);
    const __m256i m15 = _mm256_set1_epi32(15);
    if (s->format == FP4S_MXFP4 && s->block == 32 && !s->mx_scale_is_ggml && cols % 32 == 0) {
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            for (size_t b = 0; b < cols / 32; b++) {
                uint8_t e = sr[b];
                float sc = e == 0xff ? NAN : e == 0 ? u2f(0x00400000u) : u2f((uint32_t)e << 23);
                __m256 vs = _mm256_set1_ps(sc);
                for (int i = 0; i < 4; i++) {
                    __m256i q = _mm256_and_si256(load8_u8(cr + b * 32 + 8 * i), m15);
                    _mm256_storeu_ps(orow + b * 32 + 8 * i, _mm256_mul_ps(e2m1_decode8(&c, q), vs));
                }
            }
        }
        return 0;
    }
    if (s->format == FP4S_NVFP4 && s->block == 16 && !s->tile2d && cols % 16 == 0 &&
        s->nv_recipe != FP4S_NV_GGML) {
        const __m256 sdec = _mm256_set1_ps(ts->s_dec);
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *cr = codes + r * ld_codes;
            const uint8_t *sr = scales + r * ld_scales;
            float *orow = out + r * ld_out;
            size_t nb = cols / 16;
            for (size_t g = 0; g < nb; g += 8) {
                size_t ng = nb - g < 8 ? nb - g : 8;
                uint8_t sb8[8] = {0};
                memcpy(sb8, sr + g, ng);
                float sbv[8] __attribute__((aligned(32)));
                _mm256_store_ps(sbv, e4m3_decode8(_mm256_and_si256(load8_u8(sb8), _mm256_set1_epi32(0x7f))));
                for (size_t i = 0; i < ng; i++) {
                    size_t b = g + i;
                    __m256 vsb = _mm256_set1_ps(sbv[i]);
                    for (int h = 0; h < 2; h++) {
                        __m256i q = _mm256_and_si256(load8_u8(cr + b * 16 + 8 * h), m15);
                        __m256 d = _mm256_mul_ps(_mm256_mul_ps(e2m1_decode8(&c, q), vsb), sdec);
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
