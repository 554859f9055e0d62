/* The scalar set-up shared by the SIMD quantizers (quant_avx2.c,
 * quant_avx512.c; not installed): bit casts and masks, the rounding constants
 * of a tie rule, the NVFP4 recipe parameters, the E8M0 scale values, the hand
 * off of one block or FP8 piece to the reference, the codes-only / with-stats
 * instances of a quantizer body and which body serves a spec. Each file
 * broadcasts these scalars to its own vector width; only the per-width SIMD
 * bodies stay in the two files. */
#ifndef FP4S_QUANT_SIMD_H
#define FP4S_QUANT_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/codec_internal.h"
#include "cpu/kernels.h"

#define ABS_MASK 0x7fffffffu
#define INF_BITS 0x7f800000u
#define SIX_BITS 0x40c00000u /* 6.0f */

static inline uint32_t f2u(float f) { return fp4s_f32_bits(f); }
static inline float u2f(uint32_t u) { return fp4s_bits_f32(u); }

/* ---- E2M1 and E4M3 rounding on the bits -------------------------------------- */

/* |v| < 1 (the E2M1 subnormal binade): index = [a > t0] + [a > t1] with the
 * midpoints 0.25 (between codes 0 and 1) and 0.75 (1 and 2), minus one bit
 * where a tie rounds up. Ties: even -> 0.25 stays down, 0.75 goes up; zero ->
 * both down; away -> both up. */
static inline void e2m1_small_thresholds(fp4s_tie tie, uint32_t *t0, uint32_t *t1)
{
    *t0 = f2u(0.25f) - (tie == FP4S_TIE_AWAY ? 1u : 0u);
    *t1 = f2u(0.75f) - (tie == FP4S_TIE_ZERO ? 0u : 1u);
}

/* |v| >= 1: the magnitude bits are rounded at fp32 mantissa bit 22 (E2M1's one
 * mantissa bit) by adding this, plus bit 22 itself for ties to even. */
static inline uint32_t e2m1_round_add(fp4s_tie tie) { return tie == FP4S_TIE_AWAY ? 0x200000u : 0x1FFFFFu; }

/* E4M3 normal range: rounding at fp32 mantissa bit 20, plus bit 20 for ties
 * to even. */
static inline uint32_t e4m3_round_add(fp4s_tie tie) { return tie == FP4S_TIE_AWAY ? 0x80000u : 0x7FFFFu; }

/* 1 when the tie rule adds the kept lowest bit (ties to even), else 0. */
static inline uint32_t round_lsb_mask(fp4s_tie tie) { return tie == FP4S_TIE_EVEN ? 1u : 0u; }

/* ---- scales ----------------------------------------------------------------------- */

/* The E8M0 scale of a code 0..254, 2^(code-127) exactly (code 0 is the fp32
 * subnormal 2^-127); 0xFF is NaN, as fp4s_e8m0_decode. */
static inline float e8m0_value(unsigned code)
{
    return code == 0xFF ? NAN : code == 0 ? u2f(0x00400000u) : u2f((uint32_t)code << 23);
}

/* The libm MXFP4 scale rules (log2f, rtn, ceil-log2f): the reference's own
 * helper, one block at a time. */
static inline int mx_code_libm(fp4s_mx_rule rule, float amax, bool *under)
{
    return fp4s_mx_k(rule, amax, under) + 127;
}

/* The NVFP4 recipe parameters from the tensor scale. Elements are x * fac (te)
 * or x / fac (torchao, modelopt: div); ggml has no tensor scale (ts may be
 * NULL). FP4S_ENOTSUP for a recipe whose traits lack the level's kernel bit
 * (FP4S_KERNEL_AVX2 or FP4S_KERNEL_AVX512). */
typedef struct nv_params {
    fp4s_nv_recipe recipe;
    float mult;   /* te: S_enc * (1/6) */
    float pts;    /* torchao pts / modelopt scale_2 (= ts->s_dec) */
    float d6;     /* modelopt: 6 * scale_2 */
    float sdec;   /* te: S_dec */
    bool div;
} nv_params;

static inline int nv_params_init(nv_params *p, const fp4s_spec *s, const fp4s_tscale *ts, unsigned level_bit)
{
    memset(p, 0, sizeof *p);
    p->recipe = s->nv_recipe;
    const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
    if (!rt || !(rt->kernels & level_bit)) return FP4S_ENOTSUP;
    if (rt->tscale == FP4S_NV_TS_NONE) return 0;
    if (!ts) return FP4S_EINVAL;
    /* a tensor scale that is not a finite nonzero pair (a row or tensor amax
     * of Inf or NaN through an engine's tensor-scale rule): the reference */
    if (!(isfinite(ts->s_enc) && isfinite(ts->s_dec)) || ts->s_enc == 0.0f || ts->s_dec == 0.0f)
        return FP4S_ENOTSUP;
    p->sdec = ts->s_dec;
    p->pts = ts->s_dec;
    p->div = rt->elem == FP4S_NV_ELEM_DIV;
    if (s->nv_recipe == FP4S_NV_TE) p->mult = ts->s_enc * (1.0f / 6.0f);
    if (s->nv_recipe == FP4S_NV_MODELOPT) p->d6 = 6.0f * ts->s_dec;
    return 0;
}

/* ---- the reference for what the vector bodies do not take ------------------------- */

/* The block counters of a fast FP4 body (its blocks with finite inputs; the
 * reference counts the others itself). */
static inline void blocks_done(fp4s_qstats *st, uint64_t nblk, size_t block, uint64_t zero_blocks,
                               uint64_t underflow)
{
    st->elements += nblk * block;
    st->blocks += nblk;
    st->zero_blocks += zero_blocks;
    st->scale_underflow += underflow;
}

/* One block (h rows x s->block columns at row r, column c, scale column
 * nb_col: h is 1 except for NVFP4 2-D tiles): blocks holding NaN or Inf, or
 * getting a NaN E4M3 scale. */
static inline int ref_block(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t ld, size_t row0,
                            size_t r, size_t c, size_t nb_col, size_t h, const fp4s_qout *out, fp4s_qstats *st)
{
    fp4s_qout o = {0};
    if (out->codes) { o.codes = out->codes + r * out->ld_codes + c; o.ld_codes = out->ld_codes; }
    if (out->scales) { o.scales = out->scales + r * out->ld_scales + nb_col; o.ld_scales = out->ld_scales; }
    if (out->dequant) { o.dequant = out->dequant + r * out->ld_dequant + c; o.ld_dequant = out->ld_dequant; }
    return fp4s_kernels_ref.quantize(s, ts, x + r * ld + c, h, s->block, ld, row0 + r, &o, st);
}

/* One FP8 piece (h rows x w columns at row r, column c; t: the FP8 tile
 * index of the piece's first row band): non-finite inputs and short tails. */
static inline int ref_fp8_piece(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t ld,
                                size_t row0, size_t r, size_t c, size_t h, size_t w, size_t t,
                                const fp4s_qout *out, fp4s_qstats *st)
{
    fp4s_qout o = {0};
    if (out->codes) { o.codes = out->codes + r * out->ld_codes + c; o.ld_codes = out->ld_codes; }
    if (out->dequant) { o.dequant = out->dequant + r * out->ld_dequant + c; o.ld_dequant = out->ld_dequant; }
    if (out->scale_f32) {
        o.ld_scale_f32 = out->ld_scale_f32;
        o.scale_f32 = s->fp8_gran == FP4S_FP8_TENSOR ? out->scale_f32
                    : out->scale_f32 + (s->fp8_gran == FP4S_FP8_1x128 ? r : r / 128) * out->ld_scale_f32 + t;
    }
    return fp4s_kernels_ref.quantize(s, ts, x + r * ld + c, h, w, ld, row0 + r, &o, st);
}

/* Software prefetch of the bytes [p + PF_DIST, p + PF_DIST + n): the hardware
 * prefetcher alone leaves a single streaming core well below its read
 * bandwidth (measured on a quiet 16-core Xeon host: MXFP4 1.16 -> 0.82 ns/element,
 * NVFP4 1.27 -> 0.88 on one core, distance 2 KiB; 1-16 KiB all help). Integer
 * address arithmetic: the lines may lie past the end of the input, which a
 * prefetch never faults on. */
#ifndef PF_DIST
#define PF_DIST 2048
#endif
static inline __attribute__((always_inline)) void prefetch_ahead(const float *p, size_t n)
{
    uintptr_t a = (uintptr_t)p + PF_DIST;
    for (size_t k = 0; k < n; k += 64) _mm_prefetch((const char *)(a + k), _MM_HINT_T0);
}

/* ---- entry points ------------------------------------------------------------------ */

/* Which vector body serves a spec and row width (both widths have the same
 * three; anything else is FP4S_ENOTSUP and the caller runs the reference). */
typedef enum quant_body { QB_NONE, QB_MX, QB_NV, QB_FP8 } quant_body;

static inline quant_body quant_body_of(const fp4s_spec *s, size_t cols)
{
    if (s->sr || s->rht) return QB_NONE; /* stochastic rounding: the reference only */
    if (s->format == FP4S_MXFP4 && s->block == 32 && cols % 32 == 0) return QB_MX;
    if (s->format == FP4S_NVFP4 && s->block == 16 && cols % 16 == 0) return QB_NV;
    if (s->format == FP4S_FP8 && (s->fp8_gran == FP4S_FP8_TENSOR || cols % 128 == 0)) return QB_FP8;
    return QB_NONE;
}

/* The two instances of a quantizer body name(..., st, S): with stats
 * (name_st) and codes only (name_co, st == NULL, S false). */
#define QUANT_PAIR(name)                                                                   \
    static int name##_st(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,       \
                         size_t rows, size_t cols, size_t ld, size_t row0,                 \
                         const fp4s_qout *out, fp4s_qstats *st)                            \
    {                                                                                      \
        return name(s, ts, x, rows, cols, ld, row0, out, st, true);                        \
    }                                                                                      \
    static int name##_co(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,       \
                         size_t rows, size_t cols, size_t ld, size_t row0,                 \
                         const fp4s_qout *out)                                             \
    {                                                                                      \
        return name(s, ts, x, rows, cols, ld, row0, out, NULL, false);                     \
    }

/* k_quantize of a file that defines mx_quant, nv_quant and fp8_quant bodies;
 * level is its FP4S_KERNEL_* bit (a scale rule without it, or an element
 * factor other than the exact 2^-k, goes to the reference; recipes are
 * checked by nv_params_init). */
#define QUANT_ENTRY(level)                                                                 \
    QUANT_PAIR(mx_quant)                                                                   \
    QUANT_PAIR(nv_quant)                                                                   \
    QUANT_PAIR(fp8_quant)                                                                  \
    static int k_quantize(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,      \
                          size_t rows, size_t cols, size_t ld, size_t row0,                \
                          const fp4s_qout *out, fp4s_qstats *st)                           \
    {                                                                                      \
        switch (quant_body_of(s, cols)) {                                                  \
        case QB_MX:                                                                        \
            if (!(fp4s_get_mx_rule_traits(s->mx_rule)->kernels & (level))) break;          \
            if (s->mx_elem != FP4S_MX_ELEM_EXACT) break; /* the engines' factors: ref */  \
            return st ? mx_quant_st(s, ts, x, rows, cols, ld, row0, out, st)               \
                      : mx_quant_co(s, ts, x, rows, cols, ld, row0, out);                  \
        case QB_NV:                                                                        \
            return st ? nv_quant_st(s, ts, x, rows, cols, ld, row0, out, st)               \
                      : nv_quant_co(s, ts, x, rows, cols, ld, row0, out);                  \
        case QB_FP8:                                                                       \
            return st ? fp8_quant_st(s, ts, x, rows, cols, ld, row0, out, st)              \
                      : fp8_quant_co(s, ts, x, rows, cols, ld, row0, out);                 \
        case QB_NONE: break;                                                               \
        }                                                                                  \
        return FP4S_ENOTSUP;                                                               \
    }

#endif
