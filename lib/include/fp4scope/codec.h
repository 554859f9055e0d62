/* Scalar codecs: E2M1 (FP4), E4M3 (FP8 element and unsigned scale), E8M0,
 * BF16 and FP16. Every encoder takes the tie rule explicitly; all of them
 * saturate to the largest finite value of the target ("satfinite") unless the
 * function name says otherwise. See man/fp4scope-formats.7 for the tables. */
#ifndef FP4SCOPE_CODEC_H
#define FP4SCOPE_CODEC_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a value exactly halfway between two representable values rounds. */
typedef enum fp4s_tie {
    FP4S_TIE_EVEN = 0, /* round half to even ("rne"): OCP, TE, torchao, cuBLAS */
    FP4S_TIE_ZERO = 1, /* round half toward zero ("rtz"): ggml CPU, ModelOpt MXFP4 */
    FP4S_TIE_AWAY = 2, /* round half away from zero ("rha"): microxcaling nearest */
    FP4S_TIE_COUNT
} fp4s_tie;

/* Parse "rne"/"rtz"/"rha" (also "even", "zero", "away"); returns FP4S_EINVAL. */
FP4S_API int fp4s_tie_parse(const char *s, fp4s_tie *out);
FP4S_API const char *fp4s_tie_name(fp4s_tie t);

/* ---- E2M1: 4 bits S EE M, bias 1; magnitudes 0 .5 1 1.5 2 3 4 6 ---------- */
/* Encode v (already divided by the block scale). |v| > 6 saturates to 6.
 * NaN encodes as +0 (code 0) and is the caller's to count. keep_neg_zero:
 * a negative value that rounds to zero gets code 8 (-0) when true, 0 when false. */
FP4S_API uint8_t fp4s_e2m1_encode(float v, fp4s_tie tie, bool keep_neg_zero);
FP4S_API float fp4s_e2m1_decode(uint8_t code); /* low 4 bits used */
/* Stochastic rounding of v (already scaled) onto the E2M1 grid with the 8
 * random bits rbits, TransformerEngine's stochastic_round_fp4_e2m1
 * (transformer_engine/common/util/ptx.cuh, commit d0067d0: the software form
 * of cvt.rs.satfinite.e2m1x4.f32), in fp32: u = rbits / 256, a = |v|, step
 * 0.5 below 2, 1 below 4, else 2; t = a + u step; q = min(floor(t / step(t))
 * step(t), 6) with the step of t; sign of v (NaN -> +6). Returns the signed
 * grid value (-0 for a negative v that rounds to 0). */
FP4S_API float fp4s_e2m1_sr(float v, uint8_t rbits);
/* The 8 random bits of element i (its index in the whole tensor, row * cols +
 * col) for stochastic rounding with a seed: the top byte of
 * mix(seed * 2^32 + 0x632BE59BD9B4E019 + (i + 1) * 0x9E3779B97F4A7C15), mix
 * the finalizer of splitmix64. */
FP4S_API uint8_t fp4s_sr_bits(uint32_t seed, uint64_t i);

/* ---- E4M3 ("FN"): S EEEE MMM, bias 7, max 448, S.1111.111 = NaN --------- */
/* Round to nearest with the tie rule; |v| > 448 (after rounding) saturates to
 * 448; NaN -> 0x7F; +-Inf saturates to +-448 (satfinite). */
FP4S_API uint8_t fp4s_e4m3_encode(float v, fp4s_tie tie);
FP4S_API float fp4s_e4m3_decode(uint8_t code);
/* ggml's UE4M3 scale encoder: round half up on the 4th mantissa bit, anything
 * reaching exponent 15 becomes 0x7E (448). v must be >= 0. */
FP4S_API uint8_t fp4s_ue4m3_encode_ggml(float v);

/* ---- E8M0: unsigned exponent, bias 127; 0xFF = NaN ---------------------- */
FP4S_API float fp4s_e8m0_decode(uint8_t code);   /* 2^(code-127); NaN for 0xFF */

/* ---- BF16 and FP16 (storage types) --------------------------------------- */
FP4S_API uint16_t fp4s_bf16_encode(float v, fp4s_tie tie); /* NaN stays NaN (quiet) */
FP4S_API float fp4s_bf16_decode(uint16_t bits);
FP4S_API uint16_t fp4s_fp16_encode(float v, fp4s_tie tie); /* overflow -> Inf (IEEE) */
FP4S_API float fp4s_fp16_decode(uint16_t bits);

/* Bulk conversions used by the readers (RNE). */
FP4S_API void fp4s_bf16_to_f32(const uint16_t *in, float *out, size_t n);
FP4S_API void fp4s_fp16_to_f32(const uint16_t *in, float *out, size_t n);
FP4S_API void fp4s_f32_to_bf16(const float *in, uint16_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
