/* Scalar codecs: E2M1, E4M3, E8M0, BF16, FP16, the public entry points.
 *
 * Every encoder rounds on the integer bit pattern of the float32 input, never
 * through a float multiply-and-round, so there is exactly one rounding and the
 * tie rule sees the exact remainder. The one generic routine, round_mag(),
 * handles a target format with M mantissa bits and minimum normal exponent
 * emin (subnormals below it) and returns the unsaturated magnitude code; each
 * codec then applies its own saturation and specials. The arithmetic itself is
 * in base/numcodec.h, which the CUDA kernels include as well: these functions
 * only call it. */
#include <fp4scope/codec.h>
#include <fp4scope/quant.h>

#include <math.h>
#include <string.h>

#include "base/approx.h"
#include "base/codec_internal.h"

/* fp4s_tie_parse and fp4s_tie_name are in spec.c, with the other name tables. */

/* ---- the generic exact rounding ----------------------------------------------- */

uint32_t fp4s_round_mag(uint32_t u, int M, int emin, fp4s_tie tie)
{
    return fp4s_round_mag_inline(u, M, emin, tie);
}

/* ---- E2M1 ---------------------------------------------------------------------- */

uint8_t fp4s_e2m1_encode(float v, fp4s_tie tie, bool keep_neg_zero)
{
    return fp4s_nc_e2m1_encode(v, (int)tie, keep_neg_zero);
}

float fp4s_e2m1_decode(uint8_t code) { return fp4s_nc_e2m1_value(code); }

/* ---- E4M3 ---------------------------------------------------------------------- */

uint8_t fp4s_e4m3_encode(float v, fp4s_tie tie) { return fp4s_nc_e4m3_encode(v, (int)tie); }

float fp4s_e4m3_decode(uint8_t code) { return fp4s_nc_e4m3_value(code); }

uint8_t fp4s_ue4m3_encode_ggml(float v) { return fp4s_nc_ue4m3_ggml_encode(v); }

float fp4s_ue4m3_decode_ggml(uint8_t code) { return fp4s_nc_ue4m3_ggml_value(code); }

/* ---- E8M0 ---------------------------------------------------------------------- */

float fp4s_e8m0_decode(uint8_t code) { return fp4s_nc_e8m0_value(code); }

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

/* ---- BF16 and FP16 -------------------------------------------------------------- */

uint16_t fp4s_bf16_encode(float v, fp4s_tie tie) { return fp4s_nc_bf16_encode(v, (int)tie); }

float fp4s_bf16_decode(uint16_t bits) { return fp4s_nc_bf16_value(bits); }

uint16_t fp4s_fp16_encode(float v, fp4s_tie tie) { return fp4s_nc_fp16_encode(v, (int)tie); }

float fp4s_fp16_decode(uint16_t h) { return fp4s_nc_fp16_value(h); }

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

int fp4s_mx_k(fp4s_mx_rule rule, float amax, bool *clamped_low)
{
    bool low = false;
    const int k = fp4s_nc_mx_k((int)rule, amax, &low);
    if (clamped_low) *clamped_low = low;
    return k;
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
