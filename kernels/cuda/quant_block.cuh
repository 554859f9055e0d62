/* Per-element and per-block arithmetic of the CUDA quantizers (internal).
 *
 * Every function here is __host__ __device__: the kernels run it on the GPU,
 * and the host emulation (emulate.cu, used by tests/cuda on machines without a
 * GPU) runs the very same source on the CPU, so the arithmetic is checked
 * against the C reference even where no GPU is present.
 *
 * Exactness: all encoders round on the integer bit pattern (one rounding, the
 * tie rule sees the exact remainder). The few fp32 operations the engines
 * define (TE's S_enc * (1/6), torchao's divisions, ...) go through the
 * fmul/fdiv/frcp wrappers below, which are the IEEE round-to-nearest
 * intrinsics on the device (so nvcc can neither contract them into an FMA nor
 * approximate a division) and plain volatile-free C operators on the host,
 * where the host compiler is told not to contract (-ffp-contract=off). */
#ifndef FP4S_CUDA_QUANT_BLOCK_CUH
#define FP4S_CUDA_QUANT_BLOCK_CUH

#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "base/numcodec.h"

#if defined(__CUDACC__)
#define FP4S_HD __host__ __device__ __forceinline__
#else
#define FP4S_HD static inline
#endif

/* Plain-old-data copy of the fields of a fp4s_spec and fp4s_tscale that the
 * kernels need (passed by value to every launch). */
struct fp4s_cu_params {
    int format;        /* 1 MXFP4, 2 NVFP4 */
    int block;         /* 32 or 16 */
    int tie;           /* fp4s_tie */
    int keep_neg_zero;
    int zero_in;       /* fp4s_zero_in: code of a scaled value that is exactly +-0 */
    int nonfinite;     /* fp4s_nonfinite */
    int mx_rule;       /* fp4s_mx_rule */
    int mx_zero_code;  /* E8M0 code of an all-zero block */
    int recipe;        /* fp4s_nv_recipe (the block scale arithmetic of cu_block) */
    int elem;          /* its fp4s_nv_elem: the element mode of the kernels */
    int dq_split;      /* its dequantization is (q * s_b) * S_dec (FP4S_NV_DQ_SPLIT) */
    int scale_ggml;    /* its block scale byte is ggml's UE4M3 */
    int no_tscale;     /* it has no tensor scale (FP4S_NV_TS_NONE): dequant q * s_b */
    int tile2d;
    uint32_t thr[7];   /* E2M1 rounding thresholds for the tie rule (cu_e2m1_thresholds) */
    uint32_t zc[2];    /* code of a scaled value that is exactly +0 / -0 (zero_in, keep_neg_zero) */
    uint32_t negz;     /* 8 when a negative value rounding to 0 keeps code 8, else 0 */
    int ignore;        /* nonfinite == IGNORE: NaN/Inf inputs get code 0 */
    float s_enc;       /* fp4s_tscale.s_enc */
    float s_dec;       /* fp4s_tscale.s_dec */
    /* the fast element path (cu_nib_fast) */
    int fast_ok;       /* the spec may take it (not ggml's search, not zero_in NEG without -0) */
    int clear_negz;    /* !keep_neg_zero: code 8 becomes 0 (done on whole words of codes) */
    float kmag;        /* the magic add's multiplier: 1 (RNE, RHA) or 1 - 2^-24 (RTZ) */
    int fsel;          /* 3 * (0 RNE, 1 RTZ, 2 RHA) + zero_in: the fast path's variant */
    /* the packed BF16 element path (cu_encode16_pk) */
    int pk16;          /* fast_ok, and zero_in SIGN or -0 cleared: BF16 blocks may take it */
    uint32_t kmag2;    /* its multiplier k in both BF16 halves: 1 (RNE, RHA) or 1 - 2^-8 (RTZ) */
    uint32_t lsb2;     /* RHA: 0x00010001, the lowest significand bit of both BF16 halves; else 0 */
};

/* ---- fp32 operations, exactly rounded on both sides ------------------------ */
FP4S_HD float cu_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
/* a * b with the CPU's NaN: x86 (SSE and AVX alike) returns the first NaN
 * operand, quieted, and for an invalid product (0 x Inf) the default NaN
 * 0xFFC00000, where the device's multiply returns its canonical 0x7FFFFFFF.
 * The dequantizer carries NaN scales through to its outputs, whose bits are
 * compared with the CPU's; the quantizer's NaN cases are decided by policy
 * and need no such care. */
FP4S_HD float cu_mul_cpu_nan(float a, float b)
{
#if defined(__CUDA_ARCH__)
    const float r = __fmul_rn(a, b);
    if (r == r) return r;
    if (a != a) return __uint_as_float(__float_as_uint(a) | 0x00400000u);
    if (b != b) return __uint_as_float(__float_as_uint(b) | 0x00400000u);
    return __uint_as_float(0xFFC00000u);
#else
    return a * b;
#endif
}
FP4S_HD float cu_div(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
FP4S_HD float cu_rcp(float a)
{
#if defined(__CUDA_ARCH__)
    return __frcp_rn(a);
#else
    return 1.0f / a;
#endif
}
FP4S_HD float cu_fma(float a, float b, float c)
{
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
FP4S_HD float cu_add(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

FP4S_HD uint32_t cu_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}
FP4S_HD float cu_float(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}
FP4S_HD int cu_clz(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __clz((int)u);
#else
    return __builtin_clz(u);
#endif
}

/* |x| ordered for amax: NaN and Inf are reported through *nf, NaN does not
 * take part in the maximum (fmaxf semantics). */
FP4S_HD float cu_absmax(float m, float x)
{
    float a = fabsf(x);
    return (a > m) ? a : m; /* NaN compares false: ignored */
}

/* ---- the number codec -------------------------------------------------------
 * E2M1, E4M3, ggml's UE4M3, E8M0, BF16 and FP16, and the MXFP4 shared exponent
 * of every scale rule, are base/numcodec.h's (fp4s_nc_*), the very source the
 * C library runs. */

/* E2M1 rounding by thresholds: the magnitude index of |v| is the number of
 * midpoints (0.25 0.75 1.25 1.75 2.5 3.5 5) that |v| lies above, where a tie
 * (|v| equal to a midpoint) counts as above when the rule rounds it up. On the
 * float32 bits a of |v|: index = sum_j (a > T_j) with T_j = bits(mid_j) when a
 * tie stays down, bits(mid_j) - 1 when it goes up. Exact for every finite v
 * (subnormals included); +Inf lands above all (index 7, satfinite). Same
 * results as fp4s_nc_round_mag(a, 1, 0, tie) saturated at 7. */
static inline void cu_e2m1_thresholds(int tie, uint32_t t[7])
{
    static const uint32_t mid[7] = {0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u,
                                    0x40200000u, 0x40600000u, 0x40A00000u};
    for (int j = 0; j < 7; j++) {
        /* tie: RNE goes up when the upper neighbour index j+1 is even */
        int up = tie == 2 || (tie == 0 && ((j + 1) & 1) == 0);
        t[j] = mid[j] - (up ? 1u : 0u);
    }
}

FP4S_HD uint8_t cu_e2m1_thr(const uint32_t t[7], float v, int keep_neg_zero)
{
    uint32_t u = cu_bits(v);
    uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0;
    uint32_t m = (uint32_t)(a > t[0]) + (uint32_t)(a > t[1]) + (uint32_t)(a > t[2])
               + (uint32_t)(a > t[3]) + (uint32_t)(a > t[4]) + (uint32_t)(a > t[5])
               + (uint32_t)(a > t[6]);
    if (m == 0) return (sign && keep_neg_zero) ? 8 : 0;
    return (uint8_t)(m | (sign << 3));
}

/* E4M3 (FN), RNE, satfinite to 448, NaN -> 0x7F (fp4s_nc_e4m3_encode). On
 * the device the conversion instruction (cvt.rn.satfinite.e4m3x2.f32, sm_89
 * and later) computes the same byte for every float32 (test_cuda checks all
 * 2^32 of them against the software encoder). */
FP4S_HD uint8_t cu_e4m3_soft(float v) { return fp4s_nc_e4m3_encode(v, FP4S_TIE_EVEN); }
FP4S_HD uint8_t cu_e4m3(float v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
    const uint32_t b = r & 0xFFu;
    return (uint8_t)((b & 0x7Fu) == 0x7Fu ? 0x7Fu : b); /* NaN of either sign: 0x7F */
#else
    return cu_e4m3_soft(v);
#endif
}

/* ---- one block: scale byte and element factor -------------------------------- */

/* How the elements of one block are encoded (fp4s_nv_elem for NVFP4): mode 0
 * q = e2m1(x * f) (MXFP4, TE), mode 1 q = e2m1(x / f) (torchao, ModelOpt), mode 2 ggml's nearest
 * level search with block scale f. nan: the block is a NaN block (all codes
 * 0, the scale byte is the NaN code). */
struct fp4s_cu_blk {
    uint8_t scale;
    uint8_t mode;
    uint8_t nan;
    uint8_t clamped; /* NVFP4: the unrounded block scale exceeds 464 (fp4s_qstats.scale_clamped) */
    float f;
};

/* Summary of one block's inputs: the largest finite magnitude (as float32
 * bits: for non-negative floats the bit order is the numeric order) and
 * whether NaN or Inf occurred. */
struct fp4s_cu_amax {
    uint32_t abits;
    int nan;
    int inf;
};

FP4S_HD void cu_amax_add(fp4s_cu_amax *a, float x)
{
    uint32_t u = cu_bits(x) & 0x7FFFFFFFu;
    if (u > 0x7F800000u) a->nan = 1;
    else if (u == 0x7F800000u) a->inf = 1;
    else if (u > a->abits) a->abits = u;
}

/* The reference's rule (quant_ref.c nan_block): BLOCK_NAN turns a block with
 * NaN or Inf into a NaN block, SCALE_NAN one with NaN; otherwise the block
 * amax is the max over non-NaN magnitudes (+Inf included). */
FP4S_HD fp4s_cu_blk cu_block(const fp4s_cu_params &p, fp4s_cu_amax am)
{
    fp4s_cu_blk b;
    b.mode = 0;
    b.nan = 0;
    b.clamped = 0;
    b.f = 0.0f;
    const bool nanb = (p.nonfinite == 1 && (am.nan || am.inf)) || (p.nonfinite == 0 && am.nan);
    if (nanb) {
        b.nan = 1;
        b.scale = p.format == 1 ? 0xFF : 0x7F;
        return b;
    }
    const float amax = am.inf ? cu_float(0x7F800000u) : cu_float(am.abits);
    const float flt_max = cu_float(0x7F7FFFFFu);
    if (p.format == 1) {
        int code;
        if (amax == 0.0f) {
            code = p.mx_zero_code;
        } else {
            bool low;
            code = fp4s_nc_mx_k(p.mx_rule, amax, &low) + 127;
        }
        b.scale = (uint8_t)code;
        b.f = fp4s_nc_e8m0_inv((uint8_t)code);
        return b;
    }
    switch (p.recipe) {
    case 0: { /* te */
        float mult = cu_mul(p.s_enc, 1.0f / 6.0f);
        float sbf = cu_mul(amax, mult);
        if (sbf > flt_max) sbf = flt_max;
        b.clamped = sbf > 464.0f;
        b.scale = cu_e4m3(sbf);
        float enc = cu_rcp(cu_mul(fp4s_nc_e4m3_value(b.scale), p.s_dec));
        if (enc > flt_max) enc = flt_max;
        b.f = enc;
        break;
    }
    case 1: case 4: case 5: case 6: {
        /* torchao, clamp keeps NaN: 1 and 6 x / (pts * s_b), 4 and 5
         * x * ((1/pts) / s_b); 5 and 6 (PyTorch on CUDA) amax_b * fl(1/6) */
        const bool cuda = p.recipe == 5 || p.recipe == 6;
        float sc = cu_div(cuda ? cu_mul(amax, 1.0f / 6.0f) : cu_div(amax, 6.0f), p.s_dec);
        b.clamped = sc > 464.0f;
        if (sc < 0.015625f) sc = 0.015625f;
        if (sc > 448.0f) sc = 448.0f;
        b.scale = cu_e4m3(sc);
        const float sb = fp4s_nc_e4m3_value(b.scale);
        b.f = p.elem == 1 ? cu_mul(p.s_dec, sb) : cu_div(p.s_enc, sb);
        break;
    }
    case 2: { /* modelopt: x / (s_b * scale_2); >= 480 or NaN -> 0x7F */
        float pbs = cu_div(amax, cu_mul(6.0f, p.s_dec));
        if (pbs == 0.0f) pbs = 1.0f;
        if (pbs < 0.001953125f) pbs = 0.001953125f;
        b.clamped = pbs > 464.0f;
        b.scale = !(pbs < 480.0f) ? (uint8_t)0x7F : cu_e4m3(pbs);
        b.f = cu_mul(fp4s_nc_e4m3_value(b.scale), p.s_dec);
        break;
    }
    default: /* ggml */
        b.clamped = cu_div(amax, 6.0f) > 464.0f;
        b.scale = fp4s_nc_ue4m3_ggml_encode(cu_div(amax, 6.0f));
        b.f = fp4s_nc_ue4m3_ggml_value(b.scale);
        break;
    }
    b.mode = (uint8_t)p.elem; /* the recipe's element encoding (fp4s_nv_elem) */
    return b;
}

/* ggml's element choice: the first of the 8 magnitudes with the strictly
 * smallest |level * s - |x|| in fp32; zero keeps a sign only for x < 0 with
 * keep_neg_zero. */
FP4S_HD uint8_t cu_ggml_best(float x, float s, int keep_neg_zero)
{
    float ax = fabsf(x);
    int best = 0;
    float be = fabsf(cu_add(cu_mul(0.0f, s), -ax));
    for (int i = 1; i < 8; i++) {
        float e = fabsf(cu_add(cu_mul(fp4s_nc_e2m1_value((uint8_t)i), s), -ax));
        if (e < be) {
            be = e;
            best = i;
        }
    }
    if (best == 0) return (keep_neg_zero && x < 0.0f) ? 8 : 0;
    return (uint8_t)(best | ((cu_bits(x) >> 31) ? 8 : 0));
}

/* E2M1 magnitude index of av = |v| (not NaN) under round-half-to-even, in
 * float32 arithmetic (the FMA pipe) instead of integer compares: saturate at
 * 6, scale by the power of two that makes the grid step 1 in each binade of
 * the grid ([0,2): 0.5, [2,4): 1, [4,6]: 2), round to an integer by adding
 * 2^23 (one IEEE RNE addition, exact for y < 2^22), read the integer off the
 * low mantissa bits and add the binade's code offset. Equal to the threshold
 * count of cu_e2m1_thr for tie = RNE on every non-negative float32 (test_cuda
 * --exhaustive checks all of them). */
FP4S_HD uint32_t cu_e2m1_rne_mag(float av)
{
    float c = fminf(av, 6.0f);
    bool lo = c < 2.0f, mid = c < 4.0f;
    float sc = lo ? 2.0f : (mid ? 1.0f : 0.5f);
    uint32_t off = lo ? 0u : (mid ? 2u : 4u);
    float t = cu_add(cu_mul(c, sc), 8388608.0f);
    return (cu_bits(t) & 7u) + off;
}

/* Magnitude index by the tie rule's thresholds (cu_e2m1_thresholds). */
FP4S_HD uint32_t cu_e2m1_thr_mag(const uint32_t t[7], uint32_t a)
{
    return (uint32_t)(a > t[0]) + (uint32_t)(a > t[1]) + (uint32_t)(a > t[2])
         + (uint32_t)(a > t[3]) + (uint32_t)(a > t[4]) + (uint32_t)(a > t[5])
         + (uint32_t)(a > t[6]);
}

/* Code of element x with the block's factor, the encoding mode fixed at
 * compile time (MODE 0: x * f, 1: x / f, 2: ggml). Branch-free (selects
 * only) for modes 0 and 1; then, in this order of precedence: NaN -> 0, exact
 * +-0 -> zc[sign] (zero_in), a nonzero value rounding to 0 -> negz for
 * negative, and under IGNORE a NaN/Inf input -> 0. PLAIN: the caller knows
 * that the block holds no NaN/Inf and that zero_in is SIGN, so those checks
 * are left out (exact zero then follows the negz rule, which is what SIGN
 * means). The NaN-block case is the caller's (one select per 4 codes). */
template <int MODE, bool PLAIN>
FP4S_HD uint32_t cu_elem_t(const fp4s_cu_params &p, float f, float x)
{
    uint32_t code;
    if (MODE == 2) {
        code = cu_ggml_best(x, f, p.keep_neg_zero);
    } else {
        float v = MODE ? cu_div(x, f) : cu_mul(x, f);
        uint32_t u = cu_bits(v);
        uint32_t sign = u >> 31, a = u & 0x7FFFFFFFu;
        uint32_t m = p.tie == 0 ? cu_e2m1_rne_mag(cu_float(a)) : cu_e2m1_thr_mag(p.thr, a);
        code = m ? (m | (sign << 3)) : (sign ? p.negz : 0u);
        if (!PLAIN) {
            code = a == 0u ? (sign ? p.zc[1] : p.zc[0]) : code;
            code = a > 0x7F800000u ? 0u : code;
        }
    }
    if (!PLAIN) {
        uint32_t ux = cu_bits(x);
        code = (p.ignore && (ux & 0x7F800000u) == 0x7F800000u) ? 0u : code;
    }
    return code;
}

/* May the block's elements take the PLAIN path? No NaN/Inf among its inputs,
 * zero_in SIGN, and a factor that cannot make v NaN (finite; for division
 * also nonzero). */
FP4S_HD bool cu_block_plain(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b)
{
    uint32_t fb = cu_bits(b.f) & 0x7FFFFFFFu;
    return !(am.nan | am.inf) && p.zero_in == 0 && fb < 0x7F800000u && (b.mode != 1 || fb != 0u);
}

/* Generic form (host emulation): mode, PLAIN and NaN block as the kernels
 * choose them. */
FP4S_HD uint8_t cu_elem(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b, float x)
{
    if (b.nan) return 0;
    const bool plain = cu_block_plain(p, am, b);
    switch (b.mode) {
    case 0: return (uint8_t)(plain ? cu_elem_t<0, true>(p, b.f, x) : cu_elem_t<0, false>(p, b.f, x));
    case 1: return (uint8_t)(plain ? cu_elem_t<1, true>(p, b.f, x) : cu_elem_t<1, false>(p, b.f, x));
    default: return (uint8_t)(plain ? cu_elem_t<2, true>(p, b.f, x) : cu_elem_t<2, false>(p, b.f, x));
    }
}

/* Dequantization of one block, in the reference's order: MXFP4 q * X;
 * TE (q * s_b) * S_dec; torchao q * (pts * s_b); ModelOpt q * (s_b * scale_2);
 * ggml q * s_b. The block part is computed once (cu_deq_block), each element
 * is then one or two multiplies (cu_deq_elem). */
struct fp4s_cu_dq {
    float a, b;
    int two; /* (q * a) * b instead of q * a */
};

FP4S_HD fp4s_cu_dq cu_deq_block(const fp4s_cu_params &p, uint8_t scale)
{
    fp4s_cu_dq d;
    d.two = 0;
    d.b = 1.0f;
    if (p.format == 1) {
        d.a = fp4s_nc_e8m0_value(scale);
        return d;
    }
    /* the recipe's traits: scale codec and association (S_dec * s_b = s_b * S_dec) */
    const float sb = p.scale_ggml ? fp4s_nc_ue4m3_ggml_value(scale) : fp4s_nc_e4m3_value(scale);
    if (p.dq_split) {
        d.a = sb;
        d.b = p.s_dec;
        d.two = 1;
    } else {
        d.a = p.no_tscale ? sb : cu_mul_cpu_nan(p.s_dec, sb);
    }
    return d;
}

FP4S_HD float cu_deq_elem(const fp4s_cu_dq &d, uint8_t code)
{
    float v = cu_mul_cpu_nan(fp4s_nc_e2m1_value(code), d.a);
    return d.two ? cu_mul_cpu_nan(v, d.b) : v;
}

FP4S_HD float cu_deq(const fp4s_cu_params &p, uint8_t scale, uint8_t code)
{
    return cu_deq_elem(cu_deq_block(p, scale), code);
}

/* ---- input element types ----------------------------------------------------
 * BF16 and FP16 inputs are widened to float32 exactly (every BF16 and FP16
 * value is a float32 value; fp4s_nc_bf16_value, fp4s_nc_fp16_value), so the
 * arithmetic below sees the same floats as the C reference does after
 * fp4s_bf16_decode / fp4s_fp16_decode. */
enum { CU_DT_F32 = 0, CU_DT_BF16 = 1, CU_DT_F16 = 2 };

/* ---- the fast element path ----------------------------------------------------
 * For blocks without NaN/Inf whose factor is finite (the common case) the
 * elements take cu_nib_fast: the E2M1 magnitude by one rounding in float32
 * instead of threshold compares. With c = min(|v|, 6), the grid step is 0.5
 * below 2, 1 in [2, 4) and 2 in [4, 6]: it is the ulp of M = 2^22 * P where P
 * = 2^floor(log2(max(c, 1))) (1, 2 or 4). t = RN(c * k + M) rounds c to that
 * step in one IEEE operation (an exact product inside an FMA): k = 1 ties to
 * even (RNE); k = 1 - 2^-24 moves every c by less than its own ulp toward 0,
 * which turns the ties (and only them: no other c lies within an ulp of a
 * midpoint) toward zero (RTZ). R = t - M is then the rounded value, exactly
 * on the grid, and R * 2^-126 (exact: R has at most two significant bits) has
 * the bit pattern code << 22: the eight grid values 0, .5, 1, 1.5, 2, 3, 4, 6
 * scaled by 2^-126 are the float32 patterns k * 2^22, k = 0..7 (0.5 lands on
 * the subnormal 2^-127). A shift moves the code to bits 28..30 and one
 * bit-select takes bit 31 from the sign source: the top nibble (bits 28..31),
 * which a funnel shift appends to the word of codes. Ties away from zero
 * (RHA) set the lowest significand bit of |v| first and then round to
 * nearest even: every midpoint of the grid (0.25 0.75 1.25 1.75 2.5 3.5 5)
 * has at most three significant bits, so its lowest bit is 0 and setting it
 * moves a tie one ulp up, past the midpoint (rounded away); a value below a
 * midpoint stays below it (c | 1 is c or c + ulp, and c + ulp = m would
 * give m a lowest bit of 1, or, for m = 0.25 at a binade's start, c = 0.25 -
 * ulp already has it set), a value above stays above, and no other value
 * moves past a grid point or a midpoint. test_cuda --exhaustive checks every
 * float32 up to 8 against the reference encoder for each tie rule (and on
 * the device against the threshold count).
 * The sign of the code is the sign of v; zero_in POS reads it from v + 0
 * (which is +0 for both zeros), NEG from -((-v) + 0) (-0 for both zeros).
 * TM: 0 RNE, 1 RTZ, 2 RHA; ZIN: the zero_in policy.
 * Returns code | sign << 3 in bits 28..31 (the bits below are not cleared:
 * every user takes the top nibble only); a -0 code
 * (8) that keep_neg_zero drops is cleared later on whole words (cu_clear_negz). */
/* The magnitude part: the bits of R * 2^-126, code << 22 (TM 2: |v| with its
 * lowest bit set, then TM 0). */
template <int TM>
FP4S_HD uint32_t cu_mag22(const fp4s_cu_params &p, float v)
{
    const float c = fminf(TM == 2 ? cu_float((cu_bits(v) & 0x7FFFFFFFu) | 1u) : fabsf(v), 6.0f);
    const float P = cu_float(cu_bits(fmaxf(c, 1.0f)) & 0xFF800000u);
    float R;
    if (TM != 1) {
        const float t = cu_fma(P, 4194304.0f, c);
        R = cu_fma(-P, 4194304.0f, t);
    } else {
        const float M = cu_mul(P, 4194304.0f);
        R = cu_add(cu_fma(c, p.kmag, M), -M);
    }
    return cu_bits(cu_mul(R, 1.17549435e-38f)); /* R * 2^-126 = code << 22 */
}

/* sv: bit 31 the code's sign (cu_div_sign after the fast division). */
template <int TM>
FP4S_HD uint32_t cu_nib_top_s(const fp4s_cu_params &p, float v, uint32_t sv)
{
    const uint32_t u = cu_mag22<TM>(p, v);
    return ((u << 6) & 0x70000000u) | (sv & ~0x70000000u); /* one LOP3: code, and sign in bit 31 */
}
template <int TM, int ZIN>
FP4S_HD uint32_t cu_nib_top(const fp4s_cu_params &p, float v)
{
    uint32_t sv;
    if (ZIN == 0) sv = cu_bits(v);
    else if (ZIN == 1) sv = cu_bits(cu_add(v, 0.0f));
    else sv = ~cu_bits(cu_add(-v, 0.0f));
    return cu_nib_top_s<TM>(p, v, sv);
}

/* The same in the low 4 bits (bits above zero), any variant (tests, emulation). */
FP4S_HD uint32_t cu_nib_fast(const fp4s_cu_params &p, float v)
{
    uint32_t t;
    const int tm = p.tie == 2 ? 2 : (p.tie == 1 ? 1 : 0);
    switch (tm * 3 + p.zero_in) {
    case 0: t = cu_nib_top<0, 0>(p, v); break;
    case 1: t = cu_nib_top<0, 1>(p, v); break;
    case 2: t = cu_nib_top<0, 2>(p, v); break;
    case 3: t = cu_nib_top<1, 0>(p, v); break;
    case 4: t = cu_nib_top<1, 1>(p, v); break;
    case 5: t = cu_nib_top<1, 2>(p, v); break;
    case 6: t = cu_nib_top<2, 0>(p, v); break;
    case 7: t = cu_nib_top<2, 1>(p, v); break;
    default: t = cu_nib_top<2, 2>(p, v); break;
    }
    return t >> 28;
}

/* x / t correctly rounded, from y = RN(1/t), one product and two FMAs
 * (Markstein's correction: q = RN(x y) is within an ulp of x/t, r = x - q t is
 * exact, RN(q + r y) is RN(x / t)). Valid when nothing underflows: for t >=
 * 2^-90 and y normal (cu_block_fast) every quotient of at least 2^-60 is
 * exact; below, the result may be off but stays far below the grid, and the
 * sign of x is put back (RN(x/t) keeps the sign of x for t > 0, the
 * correction could round a tiny quotient to a zero of either sign). test_cuda
 * --emulate compares it with the division on random and adversarial pairs. */
/* Its quotient before the sign is put back: right in magnitude (as above). */
FP4S_HD float cu_div_fast_mag(float x, float t, float y)
{
    const float q = cu_mul(x, y);
    const float r = cu_fma(-q, t, x);
    return cu_fma(r, y, q);
}
FP4S_HD float cu_div_fast(float x, float t, float y)
{
    return cu_float((cu_bits(cu_div_fast_mag(x, t, y)) & 0x7FFFFFFFu) | (cu_bits(x) & 0x80000000u));
}

/* |x| maximum that propagates NaN: the result is NaN if any input was NaN,
 * +Inf if any was +-Inf (and none NaN), else the largest magnitude. */
FP4S_HD float cu_absmax_nan(float m, float x)
{
#if defined(__CUDA_ARCH__)
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(fabsf(x)));
    return r;
#else
    float a = fabsf(x);
    if (m != m || a != a) return cu_float(0x7FC00000u);
    return a > m ? a : m;
#endif
}

/* The block summary from a NaN-propagating maximum (exact unless the block
 * holds a NaN: then only the flags are right, and the IGNORE policy, the one
 * that still needs the finite maximum, recomputes it with cu_amax_add). */
FP4S_HD fp4s_cu_amax cu_amax_from(float a)
{
    fp4s_cu_amax am;
    uint32_t u = cu_bits(a) & 0x7FFFFFFFu;
    am.nan = u > 0x7F800000u;
    am.inf = u == 0x7F800000u;
    am.abits = u < 0x7F800000u ? u : 0u;
    return am;
}

/* A shift-in of 4 (nibbles) or 8 (bytes) code bits at the top of w. */
FP4S_HD uint32_t cu_shin(uint32_t w, uint32_t code, int bits)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(w, code, bits);
#else
    return (w >> bits) | (code << (32 - bits));
#endif
}

/* w << bits with the top `bits` bits of top shifted in at the bottom. */
FP4S_HD uint32_t cu_shin_l(uint32_t w, uint32_t top, int bits)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_l(top, w, bits);
#else
    return (w << bits) | (top >> (32 - bits));
#endif
}

/* Clear the sign of -0 codes (8) in a word of 4-bit (NB = 4) or 8-bit codes:
 * a field keeps bit 3 only where its low three bits are not all zero. */
template <int NB>
FP4S_HD uint32_t cu_clear_negz(uint32_t w)
{
    const uint32_t lo = NB == 4 ? 0x77777777u : 0x07070707u;
    const uint32_t t = (w & lo) + lo; /* bit 3 of a field set iff its low bits are nonzero */
    return w & (t | ~(lo + (NB == 4 ? 0x11111111u : 0x01010101u)));
}

/* May the block take the fast path? No NaN/Inf among its inputs, a finite
 * factor, a spec the fast path implements; dividing recipes also need a
 * normal t and 1/t (y). */
FP4S_HD bool cu_block_fast(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b,
                           int mode, float y)
{
    if (!p.fast_ok || mode == 2 || am.nan || am.inf || b.nan) return false;
    const uint32_t fb = cu_bits(b.f) & 0x7FFFFFFFu;
    if (fb >= 0x7F800000u) return false;
    if (mode == 1) {
        /* t >= 2^-90 and 1/t normal: every element whose quotient is within
         * reach of the grid (|v| >= 2^-3) is then a normal x with an exact
         * remainder; smaller quotients only need their sign (code 0) */
        const uint32_t ef = fb >> 23, ey = (cu_bits(y) >> 23) & 0xFFu;
        return ef >= 37 && ey != 0 && ey != 0xFFu;
    }
    return true;
}

/* The sign of a code (bit 31) after the fast division x / t (cu_div_fast),
 * for zero_in POS and NEG, which tell a zero quotient from a tiny one: x's
 * where RN(x / t) is not zero, else + (POS) or - (NEG). The fast division
 * may round a subnormal quotient the other way (its remainder is not exact
 * there: 2^-149 / (2 - 2^-23) gives 0, RN is 2^-149); the code's magnitude
 * is 0 either way, its sign is not. RN(x / t) is zero iff |x| / t <= 2^-150 (at
 * 2^-150 the tie goes to the even 0), i.e. iff |x| <= RD(t 2^-150) (x is a
 * float: above that float it is above t 2^-150 too), one integer compare
 * of the bits with tzb = cu_div_zero_bound(t) per block: t 2^-24 is exact
 * (t >= 2^-90, cu_block_fast), then one product rounded down (the host
 * rounds to nearest and steps back where that went up). The float compare
 * |x| 2^126 > t 2^-24, equally exact, cost the BF16 dividing kernels 21
 * registers (40 to 61). test_cuda's tiny-quotient tensors plant such
 * elements. */
template <int ZIN>
FP4S_HD uint32_t cu_div_sign(float x, uint32_t tzb)
{
    const uint32_t b = cu_bits(x);
    return (b & 0x7FFFFFFFu) > tzb ? b : (ZIN == 1 ? 0u : 0x80000000u); /* zero: POS +, NEG - */
}
/* tzb: the bits of RD(t 2^-150) */
FP4S_HD uint32_t cu_div_zero_bound(float t)
{
    const float tz = cu_mul(t, 0x1p-24f);
#if defined(__CUDA_ARCH__)
    return cu_bits(__fmul_rd(tz, 0x1p-126f));
#else
    const float r = tz * 0x1p-126f;
    return cu_bits(r) - (r * 0x1p126f > tz ? 1u : 0u);
#endif
}

/* The fast path's loop over 16 elements: fields appended from the last
 * element to the first (a left funnel shift), so element 0 ends in the low
 * field. */
template <int MODE, int NB, int TM, int ZIN>
FP4S_HD void cu_encode16_fast(const fp4s_cu_params &p, const fp4s_cu_blk &b, float y, const float *f,
                              uint32_t *w)
{
    constexpr int PER = 32 / NB; /* fields per word */
    const uint32_t tz = MODE == 1 && ZIN != 0 ? cu_div_zero_bound(b.f) : 0u;
#pragma unroll
    for (int k = 0; k < 16 / PER; k++) {
        uint32_t acc = 0;
#pragma unroll
        for (int i = PER - 1; i >= 0; i--) {
            const float x = f[k * PER + i];
            const float v = MODE == 1 ? cu_div_fast(x, b.f, y) : cu_mul(x, b.f);
            const uint32_t t = MODE == 1 && ZIN != 0 ? cu_nib_top_s<TM>(p, v, cu_div_sign<ZIN>(x, tz))
                                                     : cu_nib_top<TM, ZIN>(p, v);
            acc = cu_shin_l(acc, NB == 4 ? t : t >> 4, NB);
        }
        w[k] = p.clear_negz ? cu_clear_negz<NB>(acc) : acc;
    }
}

/* The codes of 16 consecutive elements of one block (one row of a 2-D tile),
 * in NB-bit fields (NB = 4: w[0..1] hold elements 0..7 and 8..15, element i
 * in bits 4(i mod 8); NB = 8: w[0..3], a byte each). Fast path or the
 * generic per-element one, NaN blocks all zero, -0 cleared per keep_neg_zero
 * on the fast path (the generic one applies it itself). */
template <int MODE, int NB>
FP4S_HD void cu_encode16(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b,
                         const float *f, uint32_t *w)
{
    constexpr int PER = 32 / NB; /* fields per word */
    const float y = MODE == 1 ? cu_rcp(b.f) : 0.0f;
    if (cu_block_fast(p, am, b, MODE, y)) {
        switch (p.fsel) { /* the tie rule and zero_in, fixed per launch */
        case 0: cu_encode16_fast<MODE, NB, 0, 0>(p, b, y, f, w); break;
        case 1: cu_encode16_fast<MODE, NB, 0, 1>(p, b, y, f, w); break;
        case 2: cu_encode16_fast<MODE, NB, 0, 2>(p, b, y, f, w); break;
        case 3: cu_encode16_fast<MODE, NB, 1, 0>(p, b, y, f, w); break;
        case 4: cu_encode16_fast<MODE, NB, 1, 1>(p, b, y, f, w); break;
        case 5: cu_encode16_fast<MODE, NB, 1, 2>(p, b, y, f, w); break;
        case 6: cu_encode16_fast<MODE, NB, 2, 0>(p, b, y, f, w); break;
        case 7: cu_encode16_fast<MODE, NB, 2, 1>(p, b, y, f, w); break;
        default: cu_encode16_fast<MODE, NB, 2, 2>(p, b, y, f, w); break;
        }
        return;
    }
    const bool plain = cu_block_plain(p, am, b);
#pragma unroll
    for (int k = 0; k < 16 / PER; k++) {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const float x = f[k * PER + i];
            const uint32_t c = plain ? cu_elem_t<MODE, true>(p, b.f, x) : cu_elem_t<MODE, false>(p, b.f, x);
            acc = cu_shin(acc, c, NB);
        }
        w[k] = b.nan ? 0u : acc;
    }
}

/* ggml's split layout for a 16-element block held by one thread: byte j =
 * q[j] | q[j+8] << 4, from the byte fields of cu_encode16<MODE, 8>. */
FP4S_HD void cu_split16(const uint32_t *bw, uint32_t *out)
{
    out[0] = bw[0] | (bw[2] << 4);
    out[1] = bw[1] | (bw[3] << 4);
}

/* ---- 16-bit inputs kept in their words ----------------------------------------
 * BF16 and FP16 elements are read as 32-bit words, element 2j in the low half
 * of word j (little-endian), and stay packed where the arithmetic allows:
 *
 * The block amax on the bits: BF16 and FP16 bit patterns of the same sign
 * are ordered as their magnitudes, NaN above Inf above every finite value.
 * w << 1 drops the upper element's sign and moves the lower element's sign
 * into the upper half's lowest bit, below its magnitude bits, so an unsigned
 * maximum of 16-bit halves (max.u16x2, one instruction for two elements, and
 * the shift an integer multiply on the FMA pipe) gives each half's largest
 * magnitude in bits 1..15. The result is the one of cu_absmax_nan and
 * cu_amax_from: NaN flagged when any element is NaN (then only the flags
 * count: the IGNORE policy recomputes the amax from the elements), else Inf
 * flagged, else the float32 bits of the largest magnitude. */

/* The larger (mx) or smaller of each unsigned 16-bit half of a and b (host). */
FP4S_HD uint32_t cu_u16x2_pick(uint32_t a, uint32_t b, bool mx)
{
    uint32_t r = 0;
    for (int h = 0; h < 32; h += 16) {
        const uint32_t x = (a >> h) & 0xFFFFu, y = (b >> h) & 0xFFFFu;
        r |= ((x > y) == mx ? x : y) << h;
    }
    return r;
}

FP4S_HD uint32_t cu_vmaxu2(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    return __vmaxu2(a, b);
#else
    return cu_u16x2_pick(a, b, true);
#endif
}

/* The per-half maximum of (u[j] << 1) over 8 words (16 elements). */
FP4S_HD uint32_t cu_amax_w8(const uint32_t *u)
{
    const uint32_t m0 = cu_vmaxu2(u[0] << 1, u[1] << 1), m1 = cu_vmaxu2(u[2] << 1, u[3] << 1);
    const uint32_t m2 = cu_vmaxu2(u[4] << 1, u[5] << 1), m3 = cu_vmaxu2(u[6] << 1, u[7] << 1);
    return cu_vmaxu2(cu_vmaxu2(m0, m1), cu_vmaxu2(m2, m3));
}

/* Such a maximum with its two halves folded into one unsigned value (the
 * high half 0): cu_amax_from_w gives the same summary from it, and values
 * folded so combine by a plain unsigned maximum (one instruction), which
 * the 2-D tiles' chain of dependent shuffles uses. */
FP4S_HD uint32_t cu_amax_fold_w(uint32_t m)
{
    const uint32_t lo = m & 0xFFFFu, hi = m >> 16;
    return lo > hi ? lo : hi;
}

/* The block summary from a folded maximum (cu_amax_fold_w). */
template <int DT>
FP4S_HD fp4s_cu_amax cu_amax_from_h(uint32_t m)
{
    const uint32_t h = m >> 1; /* the largest magnitude's bits */
    const uint32_t inf = DT == CU_DT_BF16 ? 0x7F80u : 0x7C00u;
    fp4s_cu_amax am;
    am.nan = h > inf;
    am.inf = h == inf;
    am.abits = h < inf ? cu_bits(DT == CU_DT_BF16 ? fp4s_nc_bf16_value(h) : fp4s_nc_fp16_value(h)) : 0u;
    return am;
}

/* The block summary from such a maximum (both halves, any number of words
 * and lanes folded in with cu_vmaxu2). */
template <int DT>
FP4S_HD fp4s_cu_amax cu_amax_from_w(uint32_t m)
{
    return cu_amax_from_h<DT>(cu_amax_fold_w(m));
}

/* 8 words of type DT widened to 16 float32 values, exactly. */
template <int DT>
FP4S_HD void cu_widen16(const uint32_t *u, float *f)
{
#pragma unroll
    for (int k = 0; k < 8; k++) {
        if (DT == CU_DT_BF16) {
            f[2 * k] = cu_float(u[k] << 16);
            f[2 * k + 1] = cu_float(u[k] & 0xFFFF0000u);
        } else {
#if defined(__CUDA_ARCH__)
            const float2 h = __half22float2(*reinterpret_cast<const __half2 *>(&u[k]));
            f[2 * k] = h.x;
            f[2 * k + 1] = h.y;
#else
            f[2 * k] = fp4s_nc_fp16_value(u[k] & 0xFFFFu);
            f[2 * k + 1] = fp4s_nc_fp16_value(u[k] >> 16);
#endif
        }
    }
}

/* The IGNORE policy's amax (NaN left out) of 8 words. */
template <int DT>
FP4S_HD void cu_amax_add_w(fp4s_cu_amax *a, const uint32_t *u)
{
    float f[16];
    cu_widen16<DT>(u, f);
#pragma unroll
    for (int k = 0; k < 16; k++) cu_amax_add(a, f[k]);
}

/* ---- BF16 pairs in packed arithmetic (MXFP4) -----------------------------------
 * An MXFP4 block factor is a power of two f = 2^-k (k >= -127, so f <= 2^127,
 * a BF16 value: BF16 has float32's exponent range), and BF16 arithmetic on
 * sm_90 (mul/fma/min/max.bf16x2) works on two elements an instruction. The
 * element path of cu_nib_top carries over to BF16's 8-bit significand:
 *
 *   y = RN(|x| f): exact unless it falls below 2^-126, where it rounds to a
 *     value below 2^-126 or to 0: code 0 either way (the sign is x's, below);
 *   c = min(y, 6); M = 64 P with P = 2^floor(log2(max(c, 1))) (1, 2 or 4),
 *     from the bits of 64 max(c, 1) (exact) with the significand cleared;
 *   t = RN(c k + M) (one fused rounding): BF16's ulp of M is P/2, the grid
 *     step of E2M1 in c's binade ([0,2): 0.5, [2,4): 1, [4,6]: 2), and
 *     c k + M stays below 2M, so t - M is c rounded to the grid. k = 1: ties
 *     to even. k = 1 - 2^-8 (RTZ) moves c down by c 2^-8: a c below an
 *     E2M1 midpoint m stays below it, c = m falls below it (ties toward
 *     zero), and a c above m stays above it: c >= m + 2^(e-7) (the next BF16
 *     value, m in [2^e, 2^(e+1))), so c k - m >= 2^(e-7) (1 - 2^-8) - m 2^-8
 *     > 0, as every midpoint (0.25 0.75 1.25 1.75 2.5 3.5 5) is at most
 *     1.75 2^e; every other c keeps its rounding. Ties away from zero (RHA):
 *     k = 1 with the lowest significand bit of |x| set first (x's last BF16
 *     bit: p.lsb2); f is a power of two, so y has that bit set too wherever
 *     y is exact (below 2^-126 the code is 0 anyway), and as on the float32
 *     path (cu_mag22) a tie moves one ulp up and nothing else changes side;
 *   R = t - M: exact (t and M in the same binade);
 *   R 2^-126: exact, R has at most two significant bits, and its BF16 bits are
 *     code << 6. 0.5 gives the subnormal 2^-127 (BF16 pattern 0x0040): this
 *     needs the device's BF16 multiply to keep subnormals (PTX's BF16
 *     arithmetic has no flush-to-zero form); fp4s_cuda_device_check_bf16 (in
 *     the GPU test) runs this very function on the device on every BF16
 *     pattern and every scale, and fails on a device that flushes;
 *   the code shifted to bits 12..14 of each half and x's sign bit kept at 15:
 *     the 4-bit code in the top nibble of each half.
 * On the host each BF16 operation is the float32 operation (exact here, but
 * for the fused c k + M when c < 2^-2 and M = 64: then both that sum and its
 * float32 rounding lie in [64, 64.25), below the first midpoint 64.25) and
 * one round-to-nearest-even to BF16, so the host computes the device's bits.
 * test_cuda --emulate runs every BF16 pattern through cu_pk_pair for every
 * block scale and every tie rule against the reference encoder. */

/* float32 (not NaN) to BF16 bits, round to nearest even */
FP4S_HD uint32_t cu_bf16_rn(float v)
{
    const uint32_t u = cu_bits(v);
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

/* Half h (0 low, 1 high) of a word of two BF16 values, as float32 (host). */
FP4S_HD float cu_b2_half(uint32_t a, int h)
{
    return fp4s_nc_bf16_value((a >> (16 * h)) & 0xFFFFu);
}

/* a * b + c on both halves (c = -0: the product alone, exact sign of a zero) */
FP4S_HD uint32_t cu_b2_fma(uint32_t a, uint32_t b, uint32_t c)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    uint32_t r = 0;
    for (int h = 0; h < 2; h++)
        r |= cu_bf16_rn(cu_fma(cu_b2_half(a, h), cu_b2_half(b, h), cu_b2_half(c, h))) << (16 * h);
    return r;
#endif
}

/* The minimum (OP 0), maximum (OP 1) or product (OP 2) of the BF16 halves of
 * a and b; min and max of non-negative halves only (never NaN here: their
 * bits are ordered as their values). */
template <int OP>
FP4S_HD uint32_t cu_b2(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    if (OP == 0) asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else if (OP == 1) asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    /* a * b + (-0) is RN(a * b), the same bits */
    return OP == 2 ? cu_b2_fma(a, b, 0x80008000u) : cu_u16x2_pick(a, b, OP == 1);
#endif
}
FP4S_HD uint32_t cu_b2_min(uint32_t a, uint32_t b) { return cu_b2<0>(a, b); }
FP4S_HD uint32_t cu_b2_max(uint32_t a, uint32_t b) { return cu_b2<1>(a, b); }
FP4S_HD uint32_t cu_b2_mul(uint32_t a, uint32_t b) { return cu_b2<2>(a, b); }

/* Byte select (PRMT): byte i of the result is byte (s >> 4i) & 7 of b:a. */
FP4S_HD uint32_t cu_prmt(uint32_t a, uint32_t b, uint32_t s)
{
#if defined(__CUDA_ARCH__)
    return __byte_perm(a, b, s);
#else
    const uint64_t v = (uint64_t)a | ((uint64_t)b << 32);
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return r;
#endif
}

/* (a >> 4) + c as the high word of a 2^28 + c (mad.hi, the FMA pipe). */
FP4S_HD uint32_t cu_shr4_add(uint32_t a, uint32_t c)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0x10000000u), "r"(c));
    return d;
#else
    return (a >> 4) + c;
#endif
}

/* Two BF16 elements (word w) to their codes, code | sign << 3, in the top
 * nibble of each half (bits 12..15 and 28..31; every other bit 0). f2: the
 * block factor in both halves, k2: p.kmag2, l2: p.lsb2. See above for the
 * argument. */
FP4S_HD uint32_t cu_pk_pair(uint32_t w, uint32_t f2, uint32_t k2, uint32_t l2)
{
    const uint32_t c = cu_b2_min(cu_b2_mul((w & 0x7FFF7FFFu) | l2, f2), 0x40C040C0u);     /* min(|x| f, 6) */
    const uint32_t m = cu_b2_mul(cu_b2_max(c, 0x3F803F80u), 0x42804280u) & 0xFF80FF80u;   /* 64 P */
    const uint32_t r = cu_b2_fma(m, 0xBF80BF80u, cu_b2_fma(c, k2, m));                    /* t - M */
    return (cu_b2_mul(r, 0x00800080u) << 6) | (w & 0x80008000u);                          /* R 2^-126 */
}

/* May the block's BF16 elements take the packed words' paths
 * (cu_encode16_pk for MXFP4, cu_encode16_nvw for NVFP4)? The spec allows it
 * (p.pk16) and the block the fast path (no NaN/Inf, a finite factor; y the
 * reciprocal of a dividing recipe's). */
FP4S_HD bool cu_block_pk(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b, int mode, float y)
{
    return p.pk16 && cu_block_fast(p, am, b, mode, y);
}

/* The NB-bit fields of 16 codes, as cu_encode16_fast writes them, from 8
 * words v of two codes each in the top nibbles of their halves (cu_pk_pair):
 * code nibbles gathered by byte selects, then each even element's nibble
 * moved down 4 bits beside its odd neighbour's (one mad.hi for 8 codes).
 * cu_encode16_pk: the codes of 16 BF16 elements (8 words u) by cu_pk_pair. */
template <int NB>
FP4S_HD void cu_pack_pairs(const fp4s_cu_params &p, const uint32_t *v, uint32_t *w)
{
#pragma unroll
    for (int k = 0; k < NB / 2; k++) {
        uint32_t acc;
        if (NB == 4) {
            /* codes of elements 8k..8k+7 (top nibbles of bytes 1 and 3 of v[4k..4k+3]) */
            const uint32_t a = cu_prmt(v[4 * k], v[4 * k + 1], 0x7531u);     /* e0 e1 e2 e3 */
            const uint32_t c = cu_prmt(v[4 * k + 2], v[4 * k + 3], 0x7531u); /* e4 e5 e6 e7 */
            acc = cu_shr4_add(cu_prmt(a, c, 0x6420u), cu_prmt(a, c, 0x7531u));
        } else {
            acc = cu_shr4_add(cu_prmt(v[2 * k], v[2 * k + 1], 0x7531u), 0u); /* elements 4k..4k+3 */
        }
        w[k] = p.clear_negz ? cu_clear_negz<NB>(acc) : acc;
    }
}

/* RHA: ties away (p.lsb2 set). A constant here: with no bit to set, the
 * mask of |x| folds into the multiply's operand (an .abs modifier), where a
 * run-time p.lsb2 kept one LOP3 a word for every tie rule (BF16 MXFP4 one
 * code per byte was 2-3% slower on an H100 with it). */
template <int NB, bool RHA>
FP4S_HD void cu_encode16_pk(const fp4s_cu_params &p, const fp4s_cu_blk &b, const uint32_t *u, uint32_t *w)
{
    const uint32_t f16 = cu_bits(b.f) >> 16, f2 = f16 | (f16 << 16); /* 2^-k: the low bits are 0 */
    uint32_t v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = cu_pk_pair(u[j], f2, p.kmag2, RHA ? 0x00010001u : 0u);
    cu_pack_pairs<NB>(p, v, w);
}

/* NVFP4 on BF16 (the same specs: any tie rule, zero_in sign or -0 cleared):
 * the float32 element arithmetic the engines define (x * f or x / f, then
 * cu_mag22), and the two codes of a word joined as in cu_pk_pair: the upper
 * halves of the two code << 22 patterns side by side (one byte select) are
 * the code << 6 of each half; the sign is x's (f > 0), so the division needs only its
 * magnitude (cu_div_fast_mag) and the fast path's sign handling drops out. */
template <int MODE, int NB, int TM>
FP4S_HD void cu_encode16_nvw(const fp4s_cu_params &p, const fp4s_cu_blk &b, float y, const uint32_t *u,
                             uint32_t *w)
{
    float f[16];
    cu_widen16<CU_DT_BF16>(u, f);
    uint32_t v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint32_t r[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float x = f[2 * j + h];
            r[h] = cu_mag22<TM>(p, MODE == 1 ? cu_div_fast_mag(x, b.f, y) : cu_mul(x, b.f));
        }
        v[j] = (cu_prmt(r[0], r[1], 0x7632u) << 6) | (u[j] & 0x80008000u);
    }
    cu_pack_pairs<NB>(p, v, w);
}

/* The codes of 16 elements given as 8 words of type DT: the packed BF16 path
 * where the spec and the block allow it, else the float32 one (cu_encode16)
 * on the widened values. */
template <int DT, int MODE, int NB>
FP4S_HD void cu_encode16_w(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b,
                           const uint32_t *u, uint32_t *w)
{
    if (DT == CU_DT_BF16 && MODE != 2) {
        const float y = MODE == 1 ? cu_rcp(b.f) : 0.0f;
        if (cu_block_pk(p, am, b, MODE, y)) {
            if (p.format == 1) {
                if (p.lsb2) cu_encode16_pk<NB, true>(p, b, u, w);
                else cu_encode16_pk<NB, false>(p, b, u, w);
            }
            else if (p.tie == 0) cu_encode16_nvw<MODE, NB, 0>(p, b, y, u, w);
            else if (p.tie == 1) cu_encode16_nvw<MODE, NB, 1>(p, b, y, u, w);
            else cu_encode16_nvw<MODE, NB, 2>(p, b, y, u, w);
            return;
        }
    }
    float f[16];
    cu_widen16<DT>(u, f);
    cu_encode16<MODE, NB>(p, am, b, f, w);
}

#endif
