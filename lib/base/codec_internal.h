/* Internal helpers shared by the codecs, the reference kernels and the tests
 * (not installed, not exported from the shared library). The encoders and
 * decoders themselves are in numcodec.h, which the CUDA kernels include too. */
#ifndef FP4S_CODEC_INTERNAL_H
#define FP4S_CODEC_INTERNAL_H

#include <fp4scope/spec.h>

#include <math.h>
#include <string.h>

#include "base/numcodec.h"

static inline uint32_t fp4s_f32_bits(float f) { return fp4s_nc_bits(f); }

static inline float fp4s_bits_f32(uint32_t u) { return fp4s_nc_float(u); }

/* Exact rounding of a float32 magnitude to a format with M mantissa bits
 * (numcodec.h, fp4s_nc_round_mag: the same code the CUDA kernels run). */
uint32_t fp4s_round_mag(uint32_t u, int M, int emin, fp4s_tie tie);
static inline uint32_t fp4s_round_mag_inline(uint32_t u, int M, int emin, fp4s_tie tie)
{
    return fp4s_nc_round_mag(u, M, emin, (int)tie);
}

/* fp4s_e2m1_encode, inlined for the reference kernels (numcodec.h). */
static inline uint8_t fp4s_e2m1_encode_inline(float v, fp4s_tie tie, bool keep_neg_zero)
{
    return fp4s_nc_e2m1_encode(v, (int)tie, keep_neg_zero);
}

/* ggml's UE4M3 decoder without its 0.5 factor (fp4s_nc_ue4m3_ggml_value):
 * 0x00 and 0x7F decode to 0, otherwise bits 0..6 as E4M3 without NaN. */
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
