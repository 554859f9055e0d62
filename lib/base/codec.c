/* Scalar codecs: E2M1, E4M3, E8M0, BF16, FP16.
 *
 * Every encoder rounds on the integer bit pattern of the float32 input, never
 * through a float multiply-and-round, so there is exactly one rounding and the
 * tie rule sees the exact remainder. The one generic routine, round_mag(),
 * handles a target format with M mantissa bits and minimum normal exponent
 * emin (subnormals below it) and returns the unsaturated magnitude code; each
 * codec then applies its own saturation and specials. */
#include <fp4scope/codec.h>
#include <fp4scope/quant.h>

#include <math.h>
#include <string.h>

#include "base/approx.h"
#include "base/codec_internal.h"

/* fp4s_tie_parse and fp4s_tie_name are in spec.c, with the other name tables. */

/* ---- the generic exact rounding ----------------------------------------------- */

/* fp4s_round_mag_inline lives in codec_internal.h (the kernels inline it). */
uint32_t fp4s_round_mag(uint32_t u, int M, int emin, fp4s_tie tie)
{
    return fp4s_round_mag_inline(u, M, emin, tie);
}

/* ---- E2M1 ---------------------------------------------------------------------- */

static const float e2m1_vals[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

uint8_t fp4s_e2m1_encode(float v, fp4s_tie tie, bool keep_neg_zero)
{
    return fp4s_e2m1_encode_inline(v, tie, keep_neg_zero); /* codec_internal.h */
}

float fp4s_e2m1_decode(uint8_t code) { return e2m1_vals[code & 15]; }

/* ---- E4M3 ---------------------------------------------------------------------- */

uint8_t fp4s_e4m3_encode(float v, fp4s_tie tie)
{
    uint32_t u = fp4s_f32_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7F;
    uint32_t m = fp4s_round_mag_inline(a, 3, -6, tie);
    if (m > 0x7E) m = 0x7E;                /* satfinite: 448 (also +-Inf) */
    return (uint8_t)(m | (sign << 7));
}

float fp4s_e4m3_decode(uint8_t code)
{
    uint32_t e = (code >> 3) & 15u, m = code & 7u;
    float mag;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) mag = ldexpf((float)m, -9);
    else mag = ldexpf((float)(8u + m), (int)e - 10);
    return (code & 0x80) ? -mag : mag;
}

/* ggml's UE4M3 encoder (ggml-impl.h ggml_fp32_to_ue4m3), reproduced from its
 * documented behaviour: not > 0 (or NaN) -> 0; inputs above 448 clamp to 448;
 * a result with E4M3 exponent field >= 15 (any value >= 256, and roundings
 * that carry into it) becomes 0x7E; normal range: the top 3 fp32 mantissa bits
 * plus the 4th (round half up on the magnitude); subnormal range: the integer
 * part of (v*512 + 0.5) computed in float32 (as ggml does, including the
 * float rounding of that sum), clamped to 1..7, 0 below 1. */
/* Its device twin is cu_ue4m3_ggml (kernels/cuda/quant_block.cuh). */
uint8_t fp4s_ue4m3_encode_ggml(float v)
{
    if (!(v > 0.0f)) return 0;
    if (v > 448.0f) v = 448.0f;
    uint32_t u = fp4s_f32_bits(v);
    int e = (int)((u >> 23) & 0xFFu) - 127 + 7;
    if (e <= 0) {
        volatile float t = v * 512.0f;     /* exact (power of two) */
        float r = t + 0.5f;                /* one float32 rounding, as ggml */
        int man = (int)r;
        if (man > 7) man = 7;
        if (man < 1) return 0;
        return (uint8_t)man;
    }
    if (e >= 15) return 0x7E;
    int man = (int)((u >> 20) & 7u) + (int)((u >> 19) & 1u);
    if (man > 7) {
        man = 0;
        e++;
        if (e >= 15) return 0x7E;
    }
    return (uint8_t)((e << 3) | man);
}

float fp4s_ue4m3_decode_ggml(uint8_t code)
{
    if (code == 0 || code == 0x7F) return 0.0f;
    uint32_t e = (code >> 3) & 15u, m = code & 7u;
    if (e == 0) return ldexpf((float)m, -9);
    return ldexpf((float)(8u + m), (int)e - 10);
}

/* ---- E8M0 ---------------------------------------------------------------------- */

float fp4s_e8m0_decode(uint8_t code)
{
    if (code == 0xFF) return NAN;
    if (code == 0) return fp4s_bits_f32(0x00400000u); /* 2^-127, fp32 subnormal */
    return fp4s_bits_f32((uint32_t)code << 23);
}

/* The value of a block scale byte as the spec's format and recipe store it
 * (declared in <fp4scope/quant.h>; here, below the kernels, because the
 * reference kernel decodes scales with it). */
float fp4s_scale_decode(const fp4s_spec *s, uint8_t code)
{
    if (!s) return NAN;
    if (s->format == FP4S_MXFP4) return fp4s_e8m0_decode(code);
    if (s->format == FP4S_NVFP4) {
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        if (!rt) return NAN;
        return rt->scale_codec == FP4S_NV_SC_UE4M3_GGML ? fp4s_ue4m3_decode_ggml(code) : fp4s_e4m3_decode(code);
    }
    return NAN;
}

/* ---- BF16 ---------------------------------------------------------------------- */

uint16_t fp4s_bf16_encode(float v, fp4s_tie tie)
{
    uint32_t u = fp4s_f32_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    uint32_t m = fp4s_round_mag(a, 7, -126, tie);
    if (m > 0x7F80u) m = 0x7F80u;          /* IEEE overflow -> Inf */
    return (uint16_t)(m | (sign << 15));
}

float fp4s_bf16_decode(uint16_t bits) { return fp4s_bits_f32((uint32_t)bits << 16); }

/* ---- FP16 ---------------------------------------------------------------------- */

uint16_t fp4s_fp16_encode(float v, fp4s_tie tie)
{
    uint32_t u = fp4s_f32_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)((sign << 15) | 0x7E00u | ((a >> 13) & 0x1FFu));
    uint32_t m = fp4s_round_mag(a, 10, -14, tie);
    if (m > 0x7C00u) m = 0x7C00u;          /* IEEE overflow -> Inf */
    return (uint16_t)(m | (sign << 15));
}

float fp4s_fp16_decode(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t e = (h >> 10) & 31u, m = h & 0x3FFu;
    uint32_t u;
    if (e == 31) {
        u = sign | 0x7F800000u | (m << 13);
    } else if (e == 0) {
        if (m == 0) {
            u = sign;
        } else {
            /* subnormal m * 2^-24: normalise */
            int lz = __builtin_clz(m) - 21; /* leading zeros within 11 bits */
            int shift = lz;                 /* bring the leading 1 to bit 10 */
            m <<= shift;
            m &= 0x3FFu;
            u = sign | ((uint32_t)(127 - 15 + 1 - shift) << 23) | (m << 13);
        }
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    return fp4s_bits_f32(u);
}

/* ---- bulk ------------------------------------------------------------------------ */

void fp4s_bf16_to_f32(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = fp4s_bits_f32((uint32_t)in[i] << 16);
}

void fp4s_fp16_to_f32(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = fp4s_fp16_decode(in[i]);
}

/* Round to nearest even on the bit pattern (the carry runs into the exponent,
 * and past the largest finite value into Inf): the same bits as
 * fp4s_bf16_encode(v, FP4S_TIE_EVEN) for every input (tests/core checks), in a
 * loop the compiler vectorizes. */
void fp4s_f32_to_bf16(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = fp4s_f32_bits(in[i]);
        uint16_t r = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        out[i] = (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x0040u) : r;
    }
}

/* ---- MXFP4 shared-exponent rules ------------------------------------------------ */

static int clamp_k(int k, bool *low)
{
    if (k < -127) {
        if (low) *low = true;
        return -127;
    }
    return k > 127 ? 127 : k;
}

int fp4s_mx_k(fp4s_mx_rule rule, float amax, bool *clamped_low)
{
    if (clamped_low) *clamped_low = false;
    uint32_t u = fp4s_f32_bits(amax) & 0x7FFFFFFFu;
    uint32_t e32 = u >> 23;
    switch (rule) {
    case FP4S_MX_FLOOR:
        /* exponent field - bias - 2; a subnormal amax reads as 2^-127 */
        return clamp_k((int)e32 - 127 - 2, clamped_low);
    case FP4S_MX_EVEN: {
        /* round amax at the 2nd mantissa bit (add half of it), then FLOOR */
        uint32_t r = u + (1u << 21);
        return clamp_k((int)((r >> 23) & 0xFFu) - 127 - 2, clamped_low);
    }
    case FP4S_MX_CEIL: {
        if (e32 == 255) return 127;
        /* amax = f * 2^lg with f in [1,2): 6*2^k >= amax  <=>  k >= lg - 2
         * when f <= 1.5, else k >= lg - 1 (no division, exact). */
        int lg;
        uint32_t frac; /* fraction bits of f in 23-bit fixed point */
        if (e32 == 0) {
            int p = 31 - __builtin_clz(u); /* u != 0 here */
            lg = -149 + p;
            frac = (u << (23 - p)) & 0x7FFFFFu;
        } else {
            lg = (int)e32 - 127;
            frac = u & 0x7FFFFFu;
        }
        return clamp_k(frac <= 0x400000u ? lg - 2 : lg - 1, clamped_low);
    }
    case FP4S_MX_LOG2F: {
        float l = floorf(log2f(amax));
        if (!(l < 200.0f)) return 127;       /* +Inf */
        return clamp_k((int)l - 2, clamped_low);
    }
    case FP4S_MX_RTN: {
        float l = rintf(log2f(amax));
        if (!(l < 200.0f)) return 127;
        return clamp_k((int)l - 2, clamped_low);
    }
    case FP4S_MX_CEIL_LOG2F: {
        /* ModelOpt: e = ceil(maximum(log2(amax / 6), -127)), all in fp32 */
        float l = log2f(amax / 6.0f);
        if (!(l < 200.0f)) return 127;
        if (l < -127.0f) {
            if (clamped_low) *clamped_low = true;
            l = -127.0f;
        }
        return clamp_k((int)ceilf(l), clamped_low);
    }
    case FP4S_MX_RCEIL_MUL: {
        /* torchao _f32_to_e8m0_rceil of descale = amax * (1.0 / 6): the
         * float product, then up to a power of two from its bits (a normal
         * rounds up when its mantissa is not zero; E8M0 code 0 is the
         * subnormal 2^-127, so a subnormal product above it gives code 1) */
        if (e32 == 255) return 127;
        uint32_t d = fp4s_f32_bits(amax * (1.0f / 6.0f)) & 0x7FFFFFFFu;
        uint32_t de = d >> 23, dm = d & 0x7FFFFFu;
        int code = de ? (int)de + (dm != 0) : (dm > 0x400000u);
        /* as CEIL, a product at or below 2^-128 counts as clamped from below */
        if (clamped_low && d <= 0x00200000u) *clamped_low = true;
        return code - 127;
    }
    case FP4S_MX_EVEN_NAN: {
        /* EVEN, but an amax rounded up into the exponent field 255 (amax >=
         * 1.75 * 2^127, and Inf) is the NaN scale: k = 128, code 0xFF */
        uint32_t r = u + (1u << 21);
        if ((r >> 23) >= 255) return 128;
        return clamp_k((int)(r >> 23) - 127 - 2, clamped_low);
    }
    /* The engines' kernels: each returns its code - 127 (code 0xFF: k = 128).
     * An amax that is NaN (an all-NaN block under the cvt policy) goes
     * through the same bits as the kernel's. */
    case FP4S_MX_RCEIL_RCP_FTZ: {
        /* FlashInfer / TRT-LLM: vecMax *= rcp.approx.ftz(6) (mul.ftz), then
         * __nv_cvt_float_to_e8m0(vecMax, satfinite, round up) */
        uint32_t d = fp4s_f32_bits(fp4s_mul_ftz(amax, fp4s_rcp_approx_ftz(6.0f))) & 0x7FFFFFFFu;
        if (d > 0x7F800000u) return 128;
        if (d == 0x7F800000u) return 127;
        if (d <= 0x00400000u) { /* flushed (or at most 2^-127): code 0 */
            if (clamped_low && amax != 0.0f) *clamped_low = true;
            return -127;
        }
        int code = d >= 0x00800000u ? (int)(d >> 23) + ((d & 0x7FFFFFu) != 0) : 1;
        return (code > 254 ? 254 : code) - 127;
    }
    case FP4S_MX_FLOOR_RCP: {
        /* vLLM before PR #43557: the exponent bits of 1 * (amax * rcp(6)) */
        uint32_t d = fp4s_f32_bits(amax * fp4s_rcp_approx_ftz(6.0f)) & 0x7FFFFFFFu;
        int code = (int)(d >> 23);
        if (code == 0 && clamped_low && amax != 0.0f) *clamped_low = true;
        return code - 127;
    }
    case FP4S_MX_RCEIL_MIN: {
        /* aiter RoundUp: absMax starts at 1e-10f (max() skips NaN);
         * u32 = bits(absMax * fl(1/6)); exponent + 1 if the mantissa is not
         * zero and the exponent is not 255 */
        float a = amax > 1e-10f ? amax : 1e-10f;
        uint32_t d = fp4s_f32_bits(a * (1.0f / 6.0f)) & 0x7FFFFFFFu;
        int code = (int)(d >> 23);
        if (code < 255 && (d & 0x7FFFFFu)) code++;
        return code - 127;
    }
    case FP4S_MX_ROUND_MIN: {
        /* aiter before PR #3212: f32_to_e8m0_scale(absMax) * 0.25, the byte
         * being the product's exponent field */
        float a = amax > 1e-10f ? amax : 1e-10f;
        uint32_t b = fp4s_f32_bits(a) & 0x7FFFFFFFu;
        int e = (int)(b >> 23);
        if (e == 255) return 128;
        if ((b & 0x400000u) && ((b & 0x3FFFFFu) || e)) e++;
        if (e == 255) return 128;      /* rounded up to Inf: Inf * 0.25 */
        return (e >= 3 ? e - 2 : 0) - 127;
    }
    case FP4S_MX_EVEN_SAT: {
        /* Quark even_round: (bits + 2^21) & 0xFF800000, floor(log2) - 2
         * clamped to [-127, 127]; an Inf there gives 127 */
        uint32_t r = (u + (1u << 21)) >> 23;
        if (r >= 255) return 127;
        return clamp_k((int)r - 127 - 2, clamped_low);
    }
    case FP4S_MX_CEIL_LOG2F_MIN: {
        /* Brevitas: 2^ceil(log2(clamp_min(amax, 1e-10))) / 4 */
        float a = amax > 1e-10f ? amax : 1e-10f;
        float l = ceilf(log2f(a));
        if (!(l < 200.0f)) return 127;
        return clamp_k((int)l - 2, clamped_low);
    }
    case FP4S_MX_RULE_COUNT: /* not a rule: rejected by fp4s_spec_check */
        break;
    }
    return 0;
}

/* ---- stochastic rounding (TransformerEngine's arithmetic) ---------------------- */
float fp4s_e2m1_sr(float v, uint8_t rbits)
{
    const float u = (float)rbits * (1.0f / 256.0f);
    const float a = fabsf(v);
    const float step = (a >= 4.0f) ? 2.0f : ((a >= 2.0f) ? 1.0f : 0.5f);
    const float t = a + u * step; /* u * step is exact: TE's fmaf gives the same */
    const float step_t = (t >= 4.0f) ? 2.0f : ((t >= 2.0f) ? 1.0f : 0.5f);
    const float inv_t = (t >= 4.0f) ? 0.5f : ((t >= 2.0f) ? 1.0f : 2.0f);
    const float q = fminf(floorf(t * inv_t) * step_t, 6.0f);
    return copysignf(q, (v != v) ? 1.0f : v);
}

uint8_t fp4s_sr_bits(uint32_t seed, uint64_t i)
{
    uint64_t z = ((uint64_t)seed << 32) + 0x632BE59BD9B4E019ull + (i + 1) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint8_t)(z >> 56);
}
