/* The number codec, once, for the C library and the CUDA kernels (internal,
 * not installed): E2M1, E4M3, ggml's UE4M3, E8M0, BF16 and FP16 on the bit
 * patterns, the exact magnitude rounding they share, and the MXFP4 shared
 * exponent of every scale rule.
 *
 * lib/base/codec.c (the public fp4s_e2m1_encode, fp4s_mx_k, ...), the CPU
 * kernels (kernels/cpu) and the CUDA kernels (kernels/cuda/quant_block.cuh,
 * on the device and in their host emulation) all include this header, so
 * there is one source for every encoder and decoder. Compiled as C it is a
 * set of static inline functions; compiled by nvcc they are __host__
 * __device__ (FP4S_NC). Where the two sides need different instructions for
 * the same result the header says so at the function:
 *
 * - float32 products that must not be contracted or approximated: the IEEE
 *   round-to-nearest intrinsics on the device, a volatile operand on the host;
 * - log2f (LOG2F, RTN, CEIL_LOG2F, CEIL_LOG2F_MIN): glibc's log2f in C; the
 *   device has no glibc, so CUDA code (host emulation included) rounds a
 *   double log2 once to float: floorf, rintf and ceilf of the two agree for
 *   every positive finite float32 (checked exhaustively against glibc 2.36;
 *   the values themselves differ by an ulp for 313550 inputs, never across
 *   an integer);
 * - the rollout engines' rcp.approx.ftz and mul.ftz (RCEIL_RCP_FTZ,
 *   FLOOR_RCP): the instructions themselves on the device, the table-driven
 *   emulation of lib/base/approx.h on the host; the table was measured on
 *   sm_90, so the device agrees with the host there (tests/cuda checks every
 *   rule on the device). */
#ifndef FP4S_NUMCODEC_H
#define FP4S_NUMCODEC_H

#include <fp4scope/spec.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "base/approx.h"
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define FP4S_NC static __host__ __device__ __forceinline__
#else
#define FP4S_NC static inline
#endif

/* ---- bits ---------------------------------------------------------------------- */

FP4S_NC uint32_t fp4s_nc_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

FP4S_NC float fp4s_nc_float(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* leading zeros of u != 0 */
FP4S_NC int fp4s_nc_clz(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __clz((int)u);
#else
    return __builtin_clz(u);
#endif
}

/* a * b and a + b in float32, rounded once (never contracted into an FMA) */
FP4S_NC float fp4s_nc_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    volatile float r = a * b;
    return r;
#endif
}

FP4S_NC float fp4s_nc_add(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    volatile float r = a + b;
    return r;
#endif
}

FP4S_NC float fp4s_nc_div(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    volatile float r = a / b;
    return r;
#endif
}

/* log2f as the scale rules take it (see the top of this file) */
FP4S_NC float fp4s_nc_log2f(float a)
{
#if defined(__CUDACC__)
    return (float)log2((double)a);
#else
    return log2f(a);
#endif
}

/* the engines' rcp.approx.ftz.f32 and mul.rn.ftz.f32 (lib/base/approx.h) */
FP4S_NC float fp4s_nc_rcp_approx_ftz(float x)
{
#if defined(__CUDA_ARCH__)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return fp4s_rcp_approx_ftz(x);
#endif
}

FP4S_NC float fp4s_nc_mul_ftz(float a, float b)
{
#if defined(__CUDA_ARCH__)
    float r;
    asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return fp4s_mul_ftz(a, b);
#endif
}

/* ---- the exact magnitude rounding ---------------------------------------------- */

/* Exact rounding of a float32 magnitude (bits u, sign clear, not NaN; Inf is
 * treated as 2^128, so that it lands above every finite target and
 * saturates) to a format with M mantissa bits and minimum normal exponent
 * emin: returns (biased exponent << M | mantissa) without saturation, where
 * the biased exponent of the subnormal binade is 0. tie: fp4s_tie. */
FP4S_NC uint32_t fp4s_nc_round_mag(uint32_t u, int M, int emin, int tie)
{
    if (u == 0) return 0;
    uint32_t e32 = u >> 23, m32 = u & 0x7FFFFFu;
    uint32_t sig;
    int se, lg;
    if (e32 == 0) {
        sig = m32;
        se = -149;
        lg = -149 + (31 - fp4s_nc_clz(m32));
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
        if (rem > half || (rem == half && (tie == FP4S_TIE_AWAY || (tie == FP4S_TIE_EVEN && (n & 1u)))))
            n++;
    }
    /* code = (biased exponent << M) | mantissa, which for te >= emin is
     * (te - emin) << M plus n (n carries into the exponent on overflow). */
    return ((uint32_t)(te - emin) << M) + n;
}

/* ---- E2M1 ---------------------------------------------------------------------- */

/* E2M1 code of v: NaN -> 0 (counted by the caller), |v| > 6 -> +-6
 * (satfinite, also +-Inf), sign in bit 3, a value rounding to 0 keeps code 8
 * for negative v only under keep_neg_zero. */
FP4S_NC uint8_t fp4s_nc_e2m1_encode(float v, int tie, bool keep_neg_zero)
{
    uint32_t u = fp4s_nc_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0;
    uint32_t m = fp4s_nc_round_mag(a, 1, 0, tie);
    if (m > 7) m = 7;
    if (m == 0) return (sign && keep_neg_zero) ? 8 : 0;
    return (uint8_t)(m | (sign << 3));
}

/* The value of an E2M1 code: magnitude index c = (exponent e, mantissa m) =
 * (c >> 1, c & 1): c = 0 is 0, c = 1 is 0.5, else 2^(e-1) (1 + m/2), built as
 * the float32 bits ((e + 126) << 23 | m << 22); bit 3 the sign. */
FP4S_NC float fp4s_nc_e2m1_value(uint8_t code)
{
    uint32_t c = code & 7u;
    uint32_t mag = c >= 2u ? (((c >> 1) + 126u) << 23) | ((c & 1u) << 22) : (c ? 0x3F000000u : 0u);
    return fp4s_nc_float(mag | ((uint32_t)(code & 8u) << 28));
}

/* ---- E4M3 (FN) ------------------------------------------------------------------ */

/* E4M3 code of v under tie, satfinite to 448 (also +-Inf), NaN -> 0x7F. */
FP4S_NC uint8_t fp4s_nc_e4m3_encode(float v, int tie)
{
    uint32_t u = fp4s_nc_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7F;
    uint32_t m = fp4s_nc_round_mag(a, 3, -6, tie);
    if (m > 0x7E) m = 0x7E;
    return (uint8_t)(m | (sign << 7));
}

/* The value of an E4M3 code (0x7F and 0xFF are NaN, 0x7FC00000 for both),
 * built on the float32 bits: subnormal m 2^-9, normal 1.m 2^(e-7). */
FP4S_NC float fp4s_nc_e4m3_value(uint8_t code)
{
    uint32_t e = (code >> 3) & 15u, m = code & 7u;
    uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    if (e == 15 && m == 7) return fp4s_nc_float(0x7FC00000u);
    if (e == 0) {
        /* m 2^-9: the product of a small integer and a power of two is exact */
        return fp4s_nc_float(sign | fp4s_nc_bits((float)m * 0.001953125f));
    }
    return fp4s_nc_float(sign | ((e - 7u + 127u) << 23) | (m << 20));
}

/* ggml's UE4M3 encoder (ggml-impl.h ggml_fp32_to_ue4m3), from its documented
 * behaviour: not > 0 (or NaN) -> 0; inputs above 448 clamp to 448; a result
 * with E4M3 exponent field >= 15 (any value >= 256, and roundings that carry
 * into it) becomes 0x7E; normal range: the top 3 fp32 mantissa bits plus the
 * 4th (round half up on the magnitude); subnormal range: the integer part of
 * (v*512 + 0.5) computed in float32 (as ggml does, including the float
 * rounding of that sum), clamped to 1..7, 0 below 1. */
FP4S_NC uint8_t fp4s_nc_ue4m3_ggml_encode(float v)
{
    if (!(v > 0.0f)) return 0;
    if (v > 448.0f) v = 448.0f;
    uint32_t u = fp4s_nc_bits(v);
    int e = (int)((u >> 23) & 0xFFu) - 127 + 7;
    if (e <= 0) {
        float t = fp4s_nc_mul(v, 512.0f); /* exact (power of two) */
        float r = fp4s_nc_add(t, 0.5f);   /* one float32 rounding, as ggml */
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

/* ggml's UE4M3 decoder without its 0.5 factor: 0x00 and 0x7F decode to 0;
 * otherwise exponent bits 3..6 and mantissa bits 0..2 as E4M3 (bit 7 is not
 * read, and no code is NaN: 0xFF reads as 480, as ggml computes it). */
FP4S_NC float fp4s_nc_ue4m3_ggml_value(uint8_t code)
{
    if (code == 0 || code == 0x7F) return 0.0f;
    const uint32_t e = (code >> 3) & 15u, m = code & 7u;
    if (e == 0) return fp4s_nc_e4m3_value((uint8_t)m);
    return fp4s_nc_float(((e - 7u + 127u) << 23) | (m << 20));
}

/* ---- E8M0 ---------------------------------------------------------------------- */

/* 2^(code - 127); 0xFF is NaN; code 0 is the float32 subnormal 2^-127. */
FP4S_NC float fp4s_nc_e8m0_value(uint8_t code)
{
    if (code == 0xFF) return fp4s_nc_float(0x7FC00000u);
    if (code == 0) return fp4s_nc_float(0x00400000u);
    return fp4s_nc_float((uint32_t)code << 23);
}

/* 1 / 2^(code - 127) = 2^(127 - code), exact for every code 0..254; NaN for 0xFF. */
FP4S_NC float fp4s_nc_e8m0_inv(uint8_t code)
{
    if (code == 0xFF) return fp4s_nc_float(0x7FC00000u);
    int e = 127 - ((int)code - 127); /* biased exponent of the inverse */
    if (e <= 0) return fp4s_nc_float(0x00400000u >> (-e)); /* 2^-127 for code 254 */
    return fp4s_nc_float((uint32_t)e << 23);
}

/* ---- BF16 and FP16 -------------------------------------------------------------- */

/* BF16 bits to float32 (exact). */
FP4S_NC float fp4s_nc_bf16_value(uint32_t h) { return fp4s_nc_float(h << 16); }

/* IEEE half bits to float32, exact (subnormals normalised, Inf and NaN
 * payloads kept: the quiet bit is not forced). */
FP4S_NC float fp4s_nc_fp16_value(uint32_t h)
{
    uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return fp4s_nc_float(s | 0x7F800000u | (m << 13));
    if (e == 0) {
        /* m 2^-24: exact in float32 (a small integer times a power of two) */
        return fp4s_nc_float(s | fp4s_nc_bits((float)m * 5.9604644775390625e-8f));
    }
    return fp4s_nc_float(s | ((e + 112u) << 23) | (m << 13));
}

/* BF16 bits of v under tie: a NaN stays a (quiet) NaN, overflow gives Inf. */
FP4S_NC uint16_t fp4s_nc_bf16_encode(float v, int tie)
{
    uint32_t u = fp4s_nc_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t m = fp4s_nc_round_mag(a, 7, -126, tie);
    if (m > 0x7F80u) m = 0x7F80u;
    return (uint16_t)(m | (sign << 15));
}

/* FP16 bits of v under tie: a NaN keeps its top payload bits, quieted;
 * overflow gives Inf. */
FP4S_NC uint16_t fp4s_nc_fp16_encode(float v, int tie)
{
    uint32_t u = fp4s_nc_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)((sign << 15) | 0x7E00u | ((a >> 13) & 0x1FFu));
    uint32_t m = fp4s_nc_round_mag(a, 10, -14, tie);
    if (m > 0x7C00u) m = 0x7C00u;
    return (uint16_t)(m | (sign << 15));
}

/* ---- MXFP4 shared exponent ------------------------------------------------------ */

FP4S_NC int fp4s_nc_clamp_k(int k, bool *low)
{
    if (k < -127) {
        *low = true;
        return -127;
    }
    return k > 127 ? 127 : k;
}

/* The shared exponent k of a block (scale 2^k) under rule (fp4s_mx_rule)
 * from its amax (finite or +Inf, >= 0; NaN only where a rule's engine
 * takes a NaN amax, see the rules), clamped to the E8M0 range [-127, 127], or
 * 128 (code 0xFF, the NaN scale) where the rule itself gives NaN. amax 0 is
 * the caller's (the zero-block code). *low: the unclamped k was below -127
 * (counted as scale underflow). lib/core/spec.c's mx_rules[] says which
 * engine computes which. */
FP4S_NC int fp4s_nc_mx_k(int rule, float amax, bool *low)
{
    *low = false;
    uint32_t u = fp4s_nc_bits(amax) & 0x7FFFFFFFu;
    uint32_t e32 = u >> 23;
    switch (rule) {
    case FP4S_MX_FLOOR:
        /* exponent field - bias - 2; a subnormal amax reads as 2^-127 */
        return fp4s_nc_clamp_k((int)e32 - 127 - 2, low);
    case FP4S_MX_EVEN: {
        /* round amax at the 2nd mantissa bit (add half of it), then FLOOR */
        uint32_t r = u + (1u << 21);
        return fp4s_nc_clamp_k((int)((r >> 23) & 0xFFu) - 127 - 2, low);
    }
    case FP4S_MX_CEIL: {
        if (e32 == 255) return 127;
        /* amax = f 2^lg with f in [1,2): 6 2^k >= amax <=> k >= lg - 2 when
         * f <= 1.5, else k >= lg - 1 (no division, exact) */
        int lg;
        uint32_t frac; /* fraction bits of f in 23-bit fixed point */
        if (e32 == 0) {
            int p = 31 - fp4s_nc_clz(u); /* u != 0 here */
            lg = -149 + p;
            frac = (u << (23 - p)) & 0x7FFFFFu;
        } else {
            lg = (int)e32 - 127;
            frac = u & 0x7FFFFFu;
        }
        return fp4s_nc_clamp_k(frac <= 0x400000u ? lg - 2 : lg - 1, low);
    }
    case FP4S_MX_LOG2F: {
        float l = floorf(fp4s_nc_log2f(amax));
        if (!(l < 200.0f)) return 127; /* +Inf */
        return fp4s_nc_clamp_k((int)l - 2, low);
    }
    case FP4S_MX_RTN: {
        float l = rintf(fp4s_nc_log2f(amax));
        if (!(l < 200.0f)) return 127;
        return fp4s_nc_clamp_k((int)l - 2, low);
    }
    case FP4S_MX_CEIL_LOG2F: {
        /* ModelOpt: e = ceil(maximum(log2(amax / 6), -127)), all in fp32 */
        float l = fp4s_nc_log2f(fp4s_nc_div(amax, 6.0f));
        if (!(l < 200.0f)) return 127;
        if (l < -127.0f) {
            *low = true;
            l = -127.0f;
        }
        return fp4s_nc_clamp_k((int)ceilf(l), low);
    }
    case FP4S_MX_RCEIL_MUL: {
        /* torchao _f32_to_e8m0_rceil of descale = amax * (1.0 / 6): the
         * float product, then up to a power of two from its bits (a normal
         * rounds up when its mantissa is not zero; E8M0 code 0 is the
         * subnormal 2^-127, so a subnormal product above it gives code 1) */
        if (e32 == 255) return 127;
        uint32_t d = fp4s_nc_bits(fp4s_nc_mul(amax, 1.0f / 6.0f)) & 0x7FFFFFFFu;
        uint32_t de = d >> 23, dm = d & 0x7FFFFFu;
        int code = de ? (int)de + (dm != 0u) : (dm > 0x400000u);
        /* as CEIL, a product at or below 2^-128 counts as clamped from below */
        if (d <= 0x00200000u) *low = true;
        return code - 127;
    }
    case FP4S_MX_EVEN_NAN: {
        /* EVEN, but an amax rounded up into the exponent field 255 (amax >=
         * 1.75 2^127, and Inf) is the NaN scale: k = 128, code 0xFF */
        uint32_t r = u + (1u << 21);
        if ((r >> 23) >= 255) return 128;
        return fp4s_nc_clamp_k((int)(r >> 23) - 127 - 2, low);
    }
    /* The engines' kernels: each returns its code - 127 (code 0xFF: k = 128).
     * An amax that is NaN (an all-NaN block under the cvt policy) goes
     * through the same bits as the kernel's. */
    case FP4S_MX_RCEIL_RCP_FTZ: {
        /* FlashInfer / TRT-LLM: vecMax *= rcp.approx.ftz(6) (mul.ftz), then
         * __nv_cvt_float_to_e8m0(vecMax, satfinite, round up) */
        uint32_t d = fp4s_nc_bits(fp4s_nc_mul_ftz(amax, fp4s_nc_rcp_approx_ftz(6.0f))) & 0x7FFFFFFFu;
        if (d > 0x7F800000u) return 128;
        if (d == 0x7F800000u) return 127;
        if (d <= 0x00400000u) { /* flushed (or at most 2^-127): code 0 */
            if (amax != 0.0f) *low = true;
            return -127;
        }
        int code = d >= 0x00800000u ? (int)(d >> 23) + ((d & 0x7FFFFFu) != 0) : 1;
        return (code > 254 ? 254 : code) - 127;
    }
    case FP4S_MX_FLOOR_RCP: {
        /* vLLM before PR #43557: the exponent bits of 1 * (amax * rcp(6)) */
        uint32_t d = fp4s_nc_bits(fp4s_nc_mul(amax, fp4s_nc_rcp_approx_ftz(6.0f))) & 0x7FFFFFFFu;
        int code = (int)(d >> 23);
        if (code == 0 && amax != 0.0f) *low = true;
        return code - 127;
    }
    case FP4S_MX_RCEIL_MIN: {
        /* aiter RoundUp: absMax starts at 1e-10f (max() skips NaN);
         * u32 = bits(absMax * fl(1/6)); exponent + 1 if the mantissa is not
         * zero and the exponent is not 255 */
        float a = amax > 1e-10f ? amax : 1e-10f;
        uint32_t d = fp4s_nc_bits(fp4s_nc_mul(a, 1.0f / 6.0f)) & 0x7FFFFFFFu;
        int code = (int)(d >> 23);
        if (code < 255 && (d & 0x7FFFFFu)) code++;
        return code - 127;
    }
    case FP4S_MX_ROUND_MIN: {
        /* aiter before PR #3212: f32_to_e8m0_scale(absMax) * 0.25, the byte
         * being the product's exponent field */
        float a = amax > 1e-10f ? amax : 1e-10f;
        uint32_t b = fp4s_nc_bits(a) & 0x7FFFFFFFu;
        int e = (int)(b >> 23);
        if (e == 255) return 128;
        if ((b & 0x400000u) && ((b & 0x3FFFFFu) || e)) e++;
        if (e == 255) return 128; /* rounded up to Inf: Inf * 0.25 */
        return (e >= 3 ? e - 2 : 0) - 127;
    }
    case FP4S_MX_EVEN_SAT: {
        /* Quark even_round: (bits + 2^21) & 0xFF800000, floor(log2) - 2
         * clamped to [-127, 127]; an Inf there gives 127 */
        uint32_t r = (u + (1u << 21)) >> 23;
        if (r >= 255) return 127;
        return fp4s_nc_clamp_k((int)r - 127 - 2, low);
    }
    case FP4S_MX_CEIL_LOG2F_MIN: {
        /* Brevitas: 2^ceil(log2(clamp_min(amax, 1e-10))) / 4 */
        float a = amax > 1e-10f ? amax : 1e-10f;
        float l = ceilf(fp4s_nc_log2f(a));
        if (!(l < 200.0f)) return 127;
        return fp4s_nc_clamp_k((int)l - 2, low);
    }
    default: /* FP4S_MX_RULE_COUNT is not a rule: fp4s_spec_check rejects it */
        break;
    }
    return 0;
}

#endif
