/* Quantizer specs and the named engine profiles.
 *
 * A fp4s_spec is a small value struct that fully describes one quantizer:
 * format, block size, scale rule, tie rule, zero sign, nibble packing,
 * non-finite policy, global-scale convention, 1-D or 2-D scaling. Everything
 * below the command line takes a spec, never a profile name: a profile is only
 * a function that fills a spec, and explicit options override its fields.
 * fp4s_profile_list() documents what each profile reproduces. */
#ifndef FP4SCOPE_SPEC_H
#define FP4SCOPE_SPEC_H

#include <fp4scope/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_format {
    FP4S_MXFP4 = 1, /* OCP MX: 32-element blocks, E8M0 scale, E2M1 elements */
    FP4S_NVFP4 = 2, /* 16-element blocks, E4M3 block scale, FP32 tensor scale */
    FP4S_FP8   = 3  /* FP8 E4M3 baseline: per tensor, 1x128 or 128x128 */
} fp4s_format;

/* MXFP4: how the shared exponent k of a block (scale 2^k) is chosen from amax. */
typedef enum fp4s_mx_rule {
    FP4S_MX_FLOOR = 0, /* floor(log2 amax) - 2 from the exponent bits (OCP, torchao) */
    FP4S_MX_CEIL  = 1, /* smallest k with amax <= 6*2^k ("rceil"; never clips) */
    FP4S_MX_EVEN  = 2, /* exponent of amax rounded at the 2nd mantissa bit, - 2 */
    FP4S_MX_LOG2F = 3, /* floorf(log2f(amax)) - 2 through libm (ggml CPU) */
    FP4S_MX_RTN   = 4, /* rint(log2f(amax)) - 2, code clamped to [0,254] (ggml CUDA) */
    FP4S_MX_CEIL_LOG2F = 5 /* ceilf(max(log2f(amax/6), -127)) in fp32 (ModelOpt MXFP4):
                            * CEIL except where log2f rounds amax/6 just above a power of
                            * two down to the integer, so such blocks clip slightly */
} fp4s_mx_rule;

/* What code an element gets whose scaled value (x times the recipe's encode
 * factor) is exactly +0 or -0. Values that are not zero but round to zero follow
 * keep_neg_zero. */
typedef enum fp4s_zero_in {
    FP4S_ZIN_SIGN = 0, /* the sign bit decides: -0 -> 8 if keep_neg_zero (torchao, cuBLAS cvt) */
    FP4S_ZIN_POS  = 1, /* always code 0 (TE's PyTorch reference, ModelOpt NVFP4: x < 0 tests) */
    FP4S_ZIN_NEG  = 2  /* always code 8 (ModelOpt MXFP4: sign_bit = (2 - sign(x)) // 2) */
} fp4s_zero_in;

/* NVFP4: whose order of fp32 operations computes block scales and elements. */
typedef enum fp4s_nv_recipe {
    FP4S_NV_TE       = 0, /* TransformerEngine: S_enc = 2688/amax, s_b = e4m3(amax_b*(S_enc*(1/6))) */
    FP4S_NV_TORCHAO  = 1, /* torchao: pts = amax/2688, s_b = e4m3(clamp((amax_b/6)/pts, 2^-6, 448)) */
    FP4S_NV_MODELOPT = 2, /* ModelOpt: scale_2 = amax/2688, true division, zero blocks -> 1.0 */
    FP4S_NV_GGML     = 3  /* ggml: no tensor scale, s_b = ggml UE4M3(amax_b/6) */
} fp4s_nv_recipe;

/* Which value is recorded as "the tensor scale" in outputs (the arithmetic
 * is the recipe's). */
typedef enum fp4s_global_scale {
    FP4S_GS_ENCODE = 0, /* S_enc = 2688/amax (TE's stored encode scale) */
    FP4S_GS_DECODE = 1, /* amax/2688 (torchao per_tensor_scale, ModelOpt scale_2) */
    FP4S_GS_NONE   = 2  /* no tensor scale: block scales alone, tensor scale 1 */
} fp4s_global_scale;

/* FP8 baseline granularity. */
typedef enum fp4s_fp8_gran {
    FP4S_FP8_TENSOR = 0,  /* one FP32 scale amax/448 for the whole tensor */
    FP4S_FP8_1x128  = 1,  /* one scale per 1x128 tile (activations, DeepSeek-style) */
    FP4S_FP8_128x128 = 2  /* one scale per 128x128 tile (weights) */
} fp4s_fp8_gran;

/* What a block containing NaN or Inf does. Whatever the policy, non-finite
 * inputs are always counted in fp4s_qstats. */
typedef enum fp4s_nonfinite {
    FP4S_NF_SCALE_NAN = 0, /* a NaN makes the scale code NaN (E8M0 0xFF / E4M3 0x7F), element
                            * codes 0; Inf is a value (enters amax, saturates): torchao, TE */
    FP4S_NF_BLOCK_NAN = 1, /* the same for NaN or Inf: the whole block decodes to NaN
                            * (microxcaling) */
    FP4S_NF_IGNORE    = 2  /* NaN ignored when taking amax (Inf is taken); NaN and Inf
                            * elements get code 0 (ggml) */
} fp4s_nonfinite;

typedef enum fp4s_packing {
    FP4S_PACK_PAIRS = 0, /* byte i = q[2i] | q[2i+1] << 4 (torchao, TE, cuBLAS, vLLM) */
    FP4S_PACK_SPLIT = 1  /* per block of 32: byte j = q[j] | q[j+16] << 4 (ggml) */
} fp4s_packing;

typedef struct fp4s_spec {
    fp4s_format format;
    uint32_t block;            /* elements per block along the last dim: 32, 16, 128 */
    fp4s_tie tie;              /* element rounding */
    bool keep_neg_zero;        /* negative values rounding to 0 keep code 8 (-0) */
    fp4s_zero_in zero_in;      /* code of a scaled value that is exactly +-0 (default SIGN) */
    fp4s_packing packing;
    fp4s_nonfinite nonfinite;
    /* MXFP4 */
    fp4s_mx_rule mx_rule;
    uint8_t mx_zero_block_code; /* E8M0 code written for an all-zero block (0 or 127; not 0xFF) */
    bool mx_scale_is_ggml;      /* ggml's scale convention: ggml decodes the byte as 2^(e-128) and
                                 * doubles its kvalues; the stored byte and every value are the
                                 * same as OCP E8M0, so this only labels the output */
    /* NVFP4 */
    fp4s_nv_recipe nv_recipe;
    fp4s_global_scale global_scale;
    bool tile2d;                /* NVFP4: 16x16 2-D scaling (weights) */
    /* FP8 */
    fp4s_fp8_gran fp8_gran;
    /* bookkeeping */
    char profile[32];           /* profile the spec started from ("" if none) */
} fp4s_spec;

/* Fill a spec from a profile name for a format. Profiles: ocp, ceil, torchao,
 * torchao-rceil, te, modelopt, ggml, microxcaling (and per-format aliases
 * listed by fp4s_profile_list). Returns FP4S_EINVAL for an unknown name,
 * FP4S_ENOTSUP when the profile does not define that format. */
FP4S_API int fp4s_spec_profile(fp4s_spec *s, fp4s_format fmt, const char *profile);

/* Default profile of a format ("ocp" for MXFP4, "te" for NVFP4, "fp8-1x128"
 * style for FP8) */
FP4S_API const char *fp4s_default_profile(fp4s_format fmt);

/* Validate the combination of fields; FP4S_ENOTSUP/EINVAL with a detail. */
FP4S_API int fp4s_spec_check(const fp4s_spec *s);

/* Rows that a chunk must be a multiple of (except the last chunk): 1, 16 for
 * 2-D NVFP4, 128 for FP8 128x128. */
FP4S_API size_t fp4s_spec_row_align(const fp4s_spec *s);

/* Number of blocks per row for `cols` columns (cols must be a multiple of block). */
FP4S_API size_t fp4s_spec_blocks_per_row(const fp4s_spec *s, size_t cols);

/* Parse helpers for the command line ("mxfp4", "floor", "te", ...). */
FP4S_API int fp4s_format_parse(const char *s, fp4s_format *out);
FP4S_API const char *fp4s_format_name(fp4s_format f);
FP4S_API int fp4s_mx_rule_parse(const char *s, fp4s_mx_rule *out);
FP4S_API const char *fp4s_mx_rule_name(fp4s_mx_rule r);
FP4S_API const char *fp4s_nv_recipe_name(fp4s_nv_recipe r);
FP4S_API const char *fp4s_global_scale_name(fp4s_global_scale g);
FP4S_API const char *fp4s_nonfinite_name(fp4s_nonfinite n);
FP4S_API const char *fp4s_packing_name(fp4s_packing p);
FP4S_API const char *fp4s_fp8_gran_name(fp4s_fp8_gran g);
FP4S_API const char *fp4s_zero_in_name(fp4s_zero_in z);

/* One line of the profile table. */
typedef struct fp4s_profile_info {
    const char *name;
    unsigned formats;          /* bit (1 << fp4s_format) for each format defined */
    const char *reproduces;    /* engine, version/file and behaviour it follows */
} fp4s_profile_info;

/* NULL-terminated table of every profile. */
FP4S_API const fp4s_profile_info *fp4s_profile_list(void);

/* Human-readable one-line description of a spec's every rule (for --json and
 * HDF5 attributes): writes at most n bytes, returns the length needed. */
FP4S_API size_t fp4s_spec_describe(const fp4s_spec *s, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
