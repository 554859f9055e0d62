/* Internal helpers shared by the codecs, the reference kernels and the tests
 * (not installed, not exported from the shared library). */
#ifndef FP4S_CODEC_INTERNAL_H
#define FP4S_CODEC_INTERNAL_H

#include <fp4scope/spec.h>

#include <math.h>
#include <string.h>

static inline uint32_t fp4s_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fp4s_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Exact rounding of a float32 magnitude (bits u, sign clear, not NaN; Inf is
 * treated as 2^128) to a format with M mantissa bits and minimum normal
 * exponent emin: returns (biased exponent << M | mantissa) without saturation,
 * where the biased exponent of the subnormal binade is 0. */
uint32_t fp4s_round_mag(uint32_t u, int M, int emin, fp4s_tie tie);
/* Its device twin is cu_round_mag (kernels/cuda/quant_block.cuh: the GPU
 * cannot call this host code; the reason is given there). */
static inline uint32_t fp4s_round_mag_inline(uint32_t u, int M, int emin, fp4s_tie tie)
{
    /* u: float32 magnitude bits (sign clear), not NaN; Inf is treated as 2^128
     * so that it lands above every finite target and saturates. */
    if (u == 0) return 0;
    uint32_t e32 = u >> 23, m32 = u & 0x7FFFFFu;
    uint32_t sig;
    int se, lg;
    if (e32 == 0) {
        sig = m32;
        se = -149;
        lg = -149 + (31 - __builtin_clz(m32));
    } else {
        sig = m32 | 0x800000u;
        se = (int)e32 - 150;
        lg = (int)e32 - 127;
        if (e32 == 255) sig = 0x800000u;
    }
    int te = lg > emin ? lg : emin;       /* exponent of the target binade */
    int shift = (te - M) - se;            /* quantum 2^(te-M) over 2^se */
    uint32_t n;
    if (shift <= 0) {
        n = sig << -shift;                /* exact: finer target grid (not used) */
    } else if (shift > 31) {
        n = 0;                            /* value < 2^-1 quantum: rounds to 0 */
    } else {
        n = sig >> shift;
        uint32_t rem = sig & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half ||
            (rem == half && (tie == FP4S_TIE_AWAY || (tie == FP4S_TIE_EVEN && (n & 1u)))))
            n++;
    }
    /* code = (biased exponent << M) | mantissa, which for te >= emin is
     * (te - emin) << M plus n (n carries into the exponent on overflow). */
    return ((uint32_t)(te - emin) << M) + n;
}

/* fp4s_e2m1_encode, inlined for the reference kernels (same code). */
static inline uint8_t fp4s_e2m1_encode_inline(float v, fp4s_tie tie, bool keep_neg_zero)
{
    uint32_t u = fp4s_f32_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0;         /* NaN: +0, counted by the caller */
    uint32_t m = fp4s_round_mag_inline(a, 1, 0, tie);
    if (m > 7) m = 7;                      /* satfinite (also +-Inf) */
    if (m == 0) return (sign && keep_neg_zero) ? 8 : 0;
    return (uint8_t)(m | (sign << 3));
}

/* ggml's UE4M3 decoder without its 0.5 factor: 0x00 and 0x7F decode to 0,
 * bit 7 is ignored, otherwise the E4M3 value. */
float fp4s_ue4m3_decode_ggml(uint8_t code);

/* MXFP4 shared exponent k of a block (scale 2^k) for a rule, from amax (finite
 * or +Inf, >= 0), clamped to the E8M0 range [-127, 127]; or 128 (code 0xFF,
 * the NaN scale) where the rule itself gives NaN (EVEN_NAN). amax == 0 is the
 * caller's (zero-block code). *clamped_low is set when the unclamped k was
 * below -127 (counted as scale underflow). Inf: FLOOR/EVEN give 126 (the
 * exponent field 255 read as 128), EVEN_NAN 128, the others 127. */
int fp4s_mx_k(fp4s_mx_rule rule, float amax, bool *clamped_low);

/* E2M1 code of a scaled element v under a spec's tie rule and zero-sign
 * policy (keep_neg_zero and zero_in). NaN -> 0, |v| > 6 -> +-6. */
static inline uint8_t fp4s_e2m1_encode_spec(const fp4s_spec *s, float v)
{
    if (v == 0.0f) {
        if (s->zero_in == FP4S_ZIN_NEG) return 8;
        if (s->zero_in == FP4S_ZIN_POS) return 0;
        return (signbit(v) && s->keep_neg_zero) ? 8 : 0;
    }
    return fp4s_e2m1_encode_inline(v, s->tie, s->keep_neg_zero);
}

/* The same with stochastic rounding (spec->sr) with the element's random bits:
 * an exact zero follows the spec's zero rule; a negative v rounded to 0 gets
 * code 8 under keep_neg_zero, like a rounded one. */
static inline uint8_t fp4s_e2m1_encode_sr(const fp4s_spec *s, float v, uint8_t rbits)
{
    if (v == 0.0f || v != v) return fp4s_e2m1_encode_spec(s, v);
    float q = fp4s_e2m1_sr(v, rbits);
    if (q == 0.0f) return (signbit(v) && s->keep_neg_zero) ? 8 : 0;
    return fp4s_e2m1_encode_inline(q, FP4S_TIE_EVEN, s->keep_neg_zero);
}

#endif
