/* Quantizer specs and the named engine profiles.
 *
 * A fp4s_spec is a small value struct that fully describes one quantizer:
 * format, block size, scale rule, tie rule, zero sign, nibble packing,
 * non-finite policy, global-scale convention, 1-D or 2-D scaling. Everything
 * below the command line takes a spec, never a profile name: a profile is only
 * a row of a table that fills a spec, and explicit options override its
 * fields. fp4s_profile_at() documents what each profile reproduces; the scale
 * rules and recipes are trait tables too (fp4s_get_mx_rule_traits,
 * fp4s_get_nv_recipe_traits). */
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

/* Bits of the `kernels` trait of a scale rule or recipe: the paths that
 * implement it. A SIMD or CUDA path whose bit is missing declines the spec and
 * the scalar reference runs instead (CUDA: fp4s_cuda_supports() says false). */
enum fp4s_kernel_bit {
    FP4S_KERNEL_REF    = 1u << 0,
    FP4S_KERNEL_AVX2   = 1u << 1,
    FP4S_KERNEL_AVX512 = 1u << 2,
    FP4S_KERNEL_CUDA   = 1u << 3
};
#define FP4S_KERNEL_ALL (FP4S_KERNEL_REF | FP4S_KERNEL_AVX2 | FP4S_KERNEL_AVX512 | FP4S_KERNEL_CUDA)

/* MXFP4: how the shared exponent k of a block (scale 2^k) is chosen from amax.
 * Each rule is one row of the table fp4s_get_mx_rule_traits() returns. */
typedef enum fp4s_mx_rule {
    FP4S_MX_FLOOR = 0, /* floor(log2 amax) - 2 from the exponent bits (OCP, torchao) */
    FP4S_MX_CEIL  = 1, /* smallest k with amax <= 6*2^k ("rceil"; never clips) */
    FP4S_MX_EVEN  = 2, /* exponent of amax rounded at the 2nd mantissa bit, - 2 */
    FP4S_MX_LOG2F = 3, /* floorf(log2f(amax)) - 2 through libm (ggml CPU) */
    FP4S_MX_RTN   = 4, /* rint(log2f(amax)) - 2, code clamped to [0,254] (ggml CUDA) */
    FP4S_MX_CEIL_LOG2F = 5, /* ceilf(max(log2f(amax/6), -127)) in fp32 (ModelOpt MXFP4):
                             * CEIL except where log2f rounds amax/6 just above a power of
                             * two down to the integer, so such blocks clip slightly */
    FP4S_MX_RCEIL_MUL = 6,  /* fl(amax * fl(1/6)) rounded up to a power of two from its bits
                             * (torchao RCEIL since 5d73a0c10): CEIL except for amax
                             * 0x01400001, whose product rounds down onto 2^-127 */
    FP4S_MX_EVEN_NAN = 7,   /* EVEN, but an amax that rounds up to 2^128 (amax >= 1.75*2^127)
                             * gets the NaN scale 0xFF (torchao EVEN since 5d73a0c10) */
    /* The rollout engines' GPU kernels (rcp: rcp.approx.ftz.f32 as measured on sm_90) */
    FP4S_MX_RCEIL_RCP_FTZ = 8, /* d = amax * rcp(6) with subnormal products flushed, rounded up to
                                * a power of two (cvt.rp.satfinite.ue8m0): FlashInfer, TRT-LLM */
    FP4S_MX_FLOOR_RCP   = 9,  /* the exponent field of amax * rcp(6): k = floor(log2(amax/6)),
                               * amax/2^k in [6, 12) (vLLM's MXFP4 MoE kernel before PR #43557) */
    FP4S_MX_RCEIL_MIN   = 10, /* d = max(amax, 1e-10) * fl(1/6), exponent field + 1 when the
                               * mantissa is not zero (AMD aiter since PR #3212) */
    FP4S_MX_ROUND_MIN   = 11, /* max(amax, 1e-10) rounded to the nearest power of two at
                               * mantissa 1.5, times 1/4 (aiter before PR #3212) */
    FP4S_MX_EVEN_SAT    = 12, /* EVEN, but amax >= 1.75*2^127 gives k = 127 (AMD Quark even_round) */
    FP4S_MX_CEIL_LOG2F_MIN = 13, /* ceilf(log2f(max(amax, 1e-10))) - 2 (Brevitas MX, ceil scale
                                  * rounding): amax/2^k in (2, 4] */
    FP4S_MX_RULE_COUNT      /* number of rules (not a rule) */
} fp4s_mx_rule;

/* What code an element gets whose scaled value (x times the recipe's encode
 * factor) is exactly +0 or -0. Values that are not zero but round to zero follow
 * keep_neg_zero. */
typedef enum fp4s_zero_in {
    FP4S_ZIN_SIGN = 0, /* the sign bit decides: -0 -> 8 if keep_neg_zero (torchao, cuBLAS cvt) */
    FP4S_ZIN_POS  = 1, /* always code 0 (TE's PyTorch reference, ModelOpt NVFP4: x < 0 tests) */
    FP4S_ZIN_NEG  = 2, /* always code 8 (ModelOpt MXFP4: sign_bit = (2 - sign(x)) // 2) */
    FP4S_ZIN_COUNT
} fp4s_zero_in;

/* NVFP4: whose order of fp32 operations computes block scales and elements.
 * Each recipe is one row of the table fp4s_get_nv_recipe_traits() returns. */
typedef enum fp4s_nv_recipe {
    FP4S_NV_TE       = 0, /* TransformerEngine: S_enc = 2688/amax, s_b = e4m3(amax_b*(S_enc*(1/6))) */
    FP4S_NV_TORCHAO_DIV = 1, /* torchao up to 0.16: pts = amax/2688, s_b = e4m3(clamp((amax_b/6)/pts,
                              * 2^-6, 448)), q = E2M1(x / (pts*s_b)) */
    FP4S_NV_MODELOPT = 2, /* ModelOpt: scale_2 = amax/2688, true division, zero blocks -> 1.0 */
    FP4S_NV_GGML     = 3, /* ggml: no tensor scale, s_b = ggml UE4M3(amax_b/6) */
    FP4S_NV_TORCHAO_RCP = 4, /* torchao since 0.17 (5c0c81487): as TORCHAO_DIV but
                              * q = E2M1(x * ((1/pts)/s_b)) */
    FP4S_NV_TORCHAO_CUDA = 5,     /* TORCHAO_RCP as PyTorch computes it on CUDA: a tensor divided
                                   * by a Python scalar is a multiply by its float reciprocal, so
                                   * pts = amax*fl(1/2688) and amax_b*fl(1/6) */
    FP4S_NV_TORCHAO_DIV_CUDA = 6, /* TORCHAO_DIV on CUDA, the same way */
    /* The rollout engines' GPU kernels (rcp: rcp.approx.ftz.f32 as measured on sm_90) */
    FP4S_NV_FLASHINFER = 7,       /* FlashInfer / TRT-LLM with fast math: s_b = e4m3(S*(amax_b*rcp(6))),
                                   * q = E2M1(x * rcp(s_b*rcp(S))), multiplies flush subnormals */
    FP4S_NV_FLASHINFER_EXACT = 8, /* the same with fast math disabled: s_b = e4m3(amax_b*(S*fl(1/6))),
                                   * q = E2M1(x * min(1/(s_b*(1/S)), FLT_MAX)), divisions flush */
    FP4S_NV_VLLM = 9,             /* vLLM / SGLang scaled_fp4_quant: as FLASHINFER with IEEE multiplies,
                                   * and a block whose scale rounds to 0 quantizes to zeros */
    FP4S_NV_TE_4OVER6 = 10, /* TransformerEngine 4over6: per block the better of map-to-6 and map-to-4 */
    /* TransformerEngine's other element factors (the block scale as FP4S_NV_TE) */
    FP4S_NV_TE_SDIV  = 11,  /* f = min(S_enc / s_b, FLT_MAX): TE's tuned 1-D kernel before TE PR #2639 */
    FP4S_NV_TE_SDIV0 = 12,  /* f = s_b != 0 ? min(S_enc / s_b, FLT_MAX) : 0: TE PR #3045's per-token kernel */
    FP4S_NV_TE_BF16  = 13,  /* f = bf16(min(S_enc / s_b, BF16_MAX)): TE's tuned kernel with NVTE_USE_FAST_MATH */
    /* FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4 with FLASHINFER_NVFP4_4OVER6 (sm_100) */
    FP4S_NV_FLASHINFER_4OVER6 = 14,       /* fast math (rcp.approx.ftz, mul.ftz) */
    FP4S_NV_FLASHINFER_4OVER6_EXACT = 15, /* FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH (div.rn.ftz) */
    FP4S_NV_RECIPE_COUNT  /* number of recipes (not a recipe) */
} fp4s_nv_recipe;

/* 4over6 (recipes te-4over6, flashinfer-4over6, flashinfer-4over6-exact):
 * the error that chooses between a block's map-to-4 and map-to-6 candidates
 * (TE reference_nvfp4.py nvfp4_4over6_err_mode, FlashInfer
 * FLASHINFER_NVFP4_4OVER6_ERR_MODE). */
typedef enum fp4s_4over6_err {
    FP4S_4OVER6_MAE = 0,  /* sum of |x^ - x| (TE's and FlashInfer's default) */
    FP4S_4OVER6_MSE = 1,  /* sum of (x^ - x)^2 */
    FP4S_4OVER6_COUNT
} fp4s_4over6_err;

/* 4over6: the float32 arithmetic of each element's term of the candidate
 * error (q the E2M1 value, s_b the candidate's decoded E4M3 scale, B the
 * spec's E4M3 bound, amax the tensor's or, row-scaled, the row's amax). */
typedef enum fp4s_4over6_math {
    FP4S_4OVER6_AMAX   = 0, /* ((q s_b) amax) / (6 B) - x: TE's reference and kernel; FlashInfer's when a
                             * row amax is given (per-token) */
    FP4S_4OVER6_DECODE = 1, /* (q s_b) S_dec - x: FlashInfer's per-tensor kernel (no row amax), S_dec its
                             * global decode scale: algebraically the same, rounded differently */
    FP4S_4OVER6_FP16   = 2, /* q s_b (an FP16 product, exact) - x S_enc, in the scaled domain: the error
                             * fast math of TE (NVTE_NVFP4_4OVER6_ERR_USE_FAST_MATH) and FlashInfer
                             * (FLASHINFER_NVFP4_4OVER6_ERR_USE_FAST_MATH) */
    FP4S_4OVER6_MATH_COUNT
} fp4s_4over6_math;

/* NVFP4: what one FP32 tensor scale covers. */
typedef enum fp4s_nv_scope {
    FP4S_SCOPE_TENSOR = 0, /* one for the tensor (its amax, or the spec's static input_scale) */
    FP4S_SCOPE_ROW    = 1, /* row-scaled ("per-token"): each row its own amax and tensor scale */
    FP4S_SCOPE_COUNT
} fp4s_nv_scope;

/* NVFP4: how a tensor scale (the tensor's, or a row's) is made from its
 * amax, where an engine does it otherwise than the recipe's own rule (the
 * recipe's `tscale` trait). B is the E4M3 bound (fp4s_spec_scale_bound). */
typedef enum fp4s_nv_tsrule {
    FP4S_TSR_RECIPE   = 0, /* the recipe's own (fp4s_nv_tscale) */
    FP4S_TSR_FLOOR    = 1, /* S_enc = min(6B / max(amax, 1e-12), FLT_MAX), 1 if 0; S_dec = 1/S_enc
                            * (TE PR #3045's per-token kernel) */
    FP4S_TSR_RCP      = 2, /* S_dec = amax * fl(1/(6B)), S_enc = rcp.approx.ftz(S_dec) (FlashInfer's
                            * per-token kernel, fast math; it stores S_dec) */
    FP4S_TSR_DIV      = 3, /* G = 1 /ftz fl(1/(6B)); S_enc = amax != 0 ? min(G /ftz amax, FLT_MAX) :
                            * FLT_MAX, 1 if 0; S_dec = 1 /ftz S_enc (FlashInfer per-token, exact) */
    FP4S_TSR_DIV_ZERO = 4, /* as DIV, but amax 0 gives S_enc = S_dec = 0 (FlashInfer per-token 4over6,
                            * exact) */
    FP4S_TSR_COUNT
} fp4s_nv_tsrule;

/* TransformerEngine's random Hadamard transform sign vector as a mask (bit i
 * set: sign -1 at position i): get_wgrad_sign_vector() of
 * transformer_engine/pytorch/tensor/nvfp4_tensor.py. */
#define FP4S_RHT_TE_SIGNS 0xD7E8u

/* Which value is recorded as "the tensor scale" in outputs (the arithmetic
 * is the recipe's). */
typedef enum fp4s_global_scale {
    FP4S_GS_ENCODE = 0, /* S_enc = 2688/amax (TE's stored encode scale) */
    FP4S_GS_DECODE = 1, /* amax/2688 (torchao per_tensor_scale, ModelOpt scale_2) */
    FP4S_GS_NONE   = 2, /* no tensor scale: block scales alone, tensor scale 1 */
    FP4S_GS_COUNT
} fp4s_global_scale;

/* FP8 baseline granularity. */
typedef enum fp4s_fp8_gran {
    FP4S_FP8_TENSOR = 0,  /* one FP32 scale amax/448 for the whole tensor */
    FP4S_FP8_1x128  = 1,  /* one scale per 1x128 tile (activations, DeepSeek-style) */
    FP4S_FP8_128x128 = 2, /* one scale per 128x128 tile (weights) */
    FP4S_FP8_GRAN_COUNT
} fp4s_fp8_gran;

/* What a block containing NaN or Inf does. Whatever the policy, non-finite
 * inputs are always counted in fp4s_qstats. */
typedef enum fp4s_nonfinite {
    FP4S_NF_SCALE_NAN = 0, /* a NaN makes the scale code NaN (E8M0 0xFF / E4M3 0x7F), element
                            * codes 0; Inf is a value (enters amax, saturates): torchao, TE */
    FP4S_NF_BLOCK_NAN = 1, /* the same for NaN or Inf: the whole block decodes to NaN
                            * (microxcaling). Neither with the ggml NVFP4 recipe: its
                            * scale has no NaN code (fp4s_spec_check refuses them) */
    FP4S_NF_IGNORE    = 2, /* NaN ignored when taking amax (Inf is taken); NaN and Inf
                            * elements get code 0 (ggml) */
    FP4S_NF_CVT       = 3, /* as the GPU kernels: NaN ignored when taking amax unless every value
                            * is NaN (bf16 max; the amax is then the NaN 0x7FFF0000), Inf is taken,
                            * every element goes through the arithmetic and a NaN product gets
                            * code 7 (+6: cvt.rn.satfinite.e2m1x2, as CUDA's cuda_fp4.hpp models it) */
    FP4S_NF_COUNT
} fp4s_nonfinite;

typedef enum fp4s_packing {
    FP4S_PACK_PAIRS = 0, /* byte i = q[2i] | q[2i+1] << 4 (torchao, TE, cuBLAS, vLLM) */
    FP4S_PACK_SPLIT = 1, /* per block of 32: byte j = q[j] | q[j+16] << 4 (ggml) */
    FP4S_PACK_COUNT
} fp4s_packing;

/* MXFP4: the factor a block's elements are multiplied by before the E2M1
 * conversion, given the block's scale code c (k = c - 127). */
typedef enum fp4s_mx_elem {
    FP4S_MX_ELEM_EXACT  = 0, /* 2^-k exactly (code 0: 2^127) */
    FP4S_MX_ELEM_ZERO0  = 1, /* 2^-k exactly, but 0 for code 0 (vLLM since PR #43557) */
    FP4S_MX_ELEM_EX2_FTZ = 2, /* ex2.approx.ftz.f32(127 - c): 2^-k, 0 for codes 0 and 254; the
                               * multiply flushes subnormals (FlashInfer / TRT-LLM, fast math) */
    FP4S_MX_ELEM_RCP_FTZ = 3, /* rcp.approx.ftz.f32(2^k * rcp(1)): 2^-k, 0 for codes 0, 254, 255
                               * (vLLM before PR #43557) */
    FP4S_MX_ELEM_COUNT
} fp4s_mx_elem;

/* Which values the tensor amax of an NVFP4 tensor scale is taken over (see
 * fp4s_spec_amax). */
typedef enum fp4s_tensor_amax {
    FP4S_TAMAX_FINITE = 0, /* max |x| over the finite values */
    FP4S_TAMAX_ALL    = 1, /* max |x| over every value: +Inf enters, any NaN makes it NaN
                            * (torch.max(torch.abs(x)): TransformerEngine's reference, torchao) */
    FP4S_TAMAX_NONAN  = 2, /* max |x| over the values that are not NaN: +Inf enters, NaN never (0 for
                            * an all-NaN set): a GPU max seeded with 0 (FlashInfer's per-token row amax,
                            * __hmax2 and fmaxf skip NaN) */
    FP4S_TAMAX_COUNT
} fp4s_tensor_amax;

/* A quantizer. Callers allocate it (usually on the stack) and fill it with
 * fp4s_spec_profile(); `reserved` keeps the size fixed while fields are added
 * (new fields take its place, so binaries built against an older header keep
 * working): leave it zero. fp4s_spec_size() gives the size for callers that
 * cannot include this header (the Python adapter). */
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
    uint8_t mx_zero_block_code; /* E8M0 code written for an all-zero block (not 0xFF; profiles: 0, 92, 127) */
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
    fp4s_tensor_amax tensor_amax; /* NVFP4: what the tensor amax is taken over */
    fp4s_mx_elem mx_elem;       /* MXFP4: the elements' factor from the scale code (default EXACT) */
    /* engine options (zero in every profile but the 4over6 ones, te-rht, te-sr; the arithmetic
     * is in quant.h) */
    fp4s_4over6_err nv_4over6_err; /* 4over6: the candidate error (default MAE) */
    uint16_t nv_scale_bound;    /* 4over6: the E4M3 bound B of the tensor scale S_enc = 6 B / amax:
                                 * 256 or 448; 0: the recipe's default, 256 for te-4over6 (TE's
                                 * nvfp4_4over6_e4m3_use_256 default), 448 for the FlashInfer ones
                                 * (FLASHINFER_NVFP4_4OVER6_E4M3_USE_256 unset) */
    uint16_t rht_signs;         /* rht: the sign mask (FP4S_RHT_TE_SIGNS; 0: no signs) */
    bool rht;                   /* TE's 16-point random Hadamard transform of each row before quantizing */
    bool sr;                    /* stochastic rounding of the E2M1 elements (TE's arithmetic) */
    uint32_t sr_seed;           /* sr: the seed of the random bits */
    /* NVFP4 scale scope and static scales (zero in the per-tensor dynamic profiles) */
    fp4s_nv_scope nv_scope;     /* FP4S_SCOPE_ROW: one FP32 amax and tensor scale per row */
    fp4s_nv_tsrule nv_tsrule;   /* how a tensor (or row) scale is made from its amax (default: the recipe's) */
    float nv_input_scale;       /* > 0: a static global scale in the decode convention (a ModelOpt
                                 * checkpoint's input_scale, amax/2688): S_dec = it, S_enc = fl(1/it),
                                 * whatever the tensor's amax; 0: from the tensor amax */
    fp4s_4over6_math nv_4over6_math; /* 4over6: the error's arithmetic (default AMAX) */
    uint32_t reserved[6];       /* zero; room for fields added later */
} fp4s_spec;

/* sizeof(fp4s_spec) of the library (for callers that allocate it blindly). */
FP4S_API size_t fp4s_spec_size(void);

/* Fill a spec from a profile name for a format (see fp4s_profile_at and
 * fp4scope-formats(7) for the profiles). Returns FP4S_EINVAL for an unknown
 * name (the detail lists the known ones), FP4S_ENOTSUP when the profile does
 * not define that format. NULL or "" is the format's default profile. */
FP4S_API int fp4s_spec_profile(fp4s_spec *s, fp4s_format fmt, const char *profile);

/* Default profile of a format ("ocp" for MXFP4, "te" for NVFP4, "fp8-1x128"
 * for FP8) */
FP4S_API const char *fp4s_default_profile(fp4s_format fmt);

/* Give an NVFP4 spec a static input scale (the decode convention: a ModelOpt
 * checkpoint's input_scale; 0 removes it), for callers that treat the spec
 * as opaque (the Python adapter). FP4S_EINVAL for a value that is not finite
 * and >= 0, or for a spec that does not take one (fp4s_spec_check's detail;
 * the spec is then unchanged). */
FP4S_API int fp4s_spec_set_input_scale(fp4s_spec *s, float input_scale);

/* Validate the combination of fields; FP4S_ENOTSUP/EINVAL with a detail. */
FP4S_API int fp4s_spec_check(const fp4s_spec *s);

/* Rows that a chunk must be a multiple of (except the last chunk): 1, 16 for
 * 2-D NVFP4, 128 for FP8 128x128. */
FP4S_API size_t fp4s_spec_row_align(const fp4s_spec *s);

/* Number of blocks per row for `cols` columns (cols must be a multiple of block). */
FP4S_API size_t fp4s_spec_blocks_per_row(const fp4s_spec *s, size_t cols);

/* ---- trait tables ------------------------------------------------------------
 * One row per MXFP4 scale rule and per NVFP4 recipe. Adding a rule or recipe
 * is one row in lib/core/spec.c plus its arithmetic (fp4s_mx_k in
 * lib/base/codec.c for a rule; nv_scale in kernels/cpu/quant_ref.c for a
 * recipe, and the SIMD and CUDA kernels only if its `kernels` bits say so),
 * and its name in fp4-quant(1) and fp4scope-formats(7): the opening comment
 * of lib/core/spec.c lists the files. The structs are only ever handed out by pointer and may gain fields at the
 * end: never allocate or copy them. */

typedef struct fp4s_mx_rule_traits {
    const char *name;          /* canonical name ("floor", "ceil", ...) */
    const char *aliases;       /* other names fp4s_mx_rule_parse accepts, space-separated ("" if none) */
    const char *rule;          /* how k is computed from the block amax */
    const char *used_by;       /* the engines that compute it this way */
    unsigned kernels;          /* FP4S_KERNEL_* bits: the paths that implement it */
} fp4s_mx_rule_traits;

/* How an NVFP4 recipe derives its float32 tensor scale from the tensor amax. */
typedef enum fp4s_nv_tscale {
    FP4S_NV_TS_ENCODE = 0, /* S_enc = min(2688/amax, FLT_MAX), 1 if amax is 0; S_dec = 1/S_enc (TE) */
    FP4S_NV_TS_DECODE = 1, /* s_dec = amax/2688, s_enc = 1/s_dec (torchao, ModelOpt) */
    FP4S_NV_TS_NONE   = 2, /* no tensor scale: fp4s_quantize accepts ts == NULL (ggml) */
    FP4S_NV_TS_DECODE_RCP = 3, /* s_dec = amax*fl(1/2688), s_enc = 1/s_dec (PyTorch on CUDA) */
    FP4S_NV_TS_COUNT
} fp4s_nv_tscale;

/* How an NVFP4 recipe encodes the elements of a block. */
typedef enum fp4s_nv_elem {
    FP4S_NV_ELEM_MUL    = 0, /* q = E2M1(x * f), f the block's encode factor (TE, torchao >= 0.17) */
    FP4S_NV_ELEM_DIV    = 1, /* q = E2M1(x / t), t the block's total scale (torchao <= 0.16, ModelOpt) */
    FP4S_NV_ELEM_SEARCH = 2, /* the nearest of the eight levels times s_b in fp32 (ggml) */
    FP4S_NV_ELEM_COUNT
} fp4s_nv_elem;

/* The float32 association of an NVFP4 recipe's dequantization. */
typedef enum fp4s_nv_dequant {
    FP4S_NV_DQ_SPLIT = 0, /* (q * s_b) * S_dec (TE) */
    FP4S_NV_DQ_TOTAL = 1, /* q * (S_dec * s_b) (torchao, ModelOpt; ggml: q * s_b) */
    FP4S_NV_DQ_COUNT
} fp4s_nv_dequant;

/* The codec of an NVFP4 recipe's block scale byte. */
typedef enum fp4s_nv_scale_codec {
    FP4S_NV_SC_E4M3      = 0, /* E4M3 (UE4M3), round to nearest even, satfinite */
    FP4S_NV_SC_UE4M3_GGML = 1, /* ggml's UE4M3 encoder and decoder (fp4s_ue4m3_encode_ggml) */
    FP4S_NV_SC_COUNT
} fp4s_nv_scale_codec;

typedef struct fp4s_nv_recipe_traits {
    const char *name;          /* canonical name ("te", "torchao", ...) */
    const char *aliases;       /* other names fp4s_nv_recipe_parse accepts, space-separated ("" if none) */
    const char *recipe;        /* the order of fp32 operations, one line */
    const char *used_by;       /* the engine (and file) that computes it this way */
    fp4s_nv_tscale tscale;     /* tensor scale; FP4S_NV_TS_NONE: the recipe has none */
    fp4s_nv_elem elem;         /* element encoding */
    fp4s_nv_dequant dequant;   /* dequantization association */
    fp4s_nv_scale_codec scale_codec;
    fp4s_global_scale global_scale; /* the convention its engine records */
    unsigned ties;             /* (1 << fp4s_tie) for each tie rule the recipe accepts */
    bool tile2d;               /* 16x16 2-D tiles are accepted */
    unsigned kernels;          /* FP4S_KERNEL_* bits: the paths that implement it */
} fp4s_nv_recipe_traits;

/* The row of a rule / recipe, NULL for a value out of range. */
FP4S_API const fp4s_mx_rule_traits *fp4s_get_mx_rule_traits(fp4s_mx_rule r);
FP4S_API const fp4s_nv_recipe_traits *fp4s_get_nv_recipe_traits(fp4s_nv_recipe r);

/* Parse helpers for the command line ("mxfp4", "floor", "te", ...). Each
 * returns FP4S_EINVAL with a detail that lists every accepted name. */
FP4S_API int fp4s_format_parse(const char *s, fp4s_format *out);
FP4S_API const char *fp4s_format_name(fp4s_format f);
FP4S_API int fp4s_mx_rule_parse(const char *s, fp4s_mx_rule *out);
FP4S_API const char *fp4s_mx_rule_name(fp4s_mx_rule r);
FP4S_API int fp4s_nv_recipe_parse(const char *s, fp4s_nv_recipe *out);
FP4S_API const char *fp4s_nv_recipe_name(fp4s_nv_recipe r);
FP4S_API const char *fp4s_global_scale_name(fp4s_global_scale g);
FP4S_API const char *fp4s_nonfinite_name(fp4s_nonfinite n);
FP4S_API const char *fp4s_packing_name(fp4s_packing p);
FP4S_API const char *fp4s_fp8_gran_name(fp4s_fp8_gran g);
FP4S_API const char *fp4s_zero_in_name(fp4s_zero_in z);
FP4S_API const char *fp4s_tensor_amax_name(fp4s_tensor_amax t);
FP4S_API const char *fp4s_mx_elem_name(fp4s_mx_elem e);
FP4S_API const char *fp4s_4over6_math_name(fp4s_4over6_math m);
FP4S_API const char *fp4s_nv_scope_name(fp4s_nv_scope s);
FP4S_API const char *fp4s_nv_tsrule_name(fp4s_nv_tsrule r);
/* Whether the recipe is one of the 4over6 recipes (two candidates per block). */
FP4S_API bool fp4s_nv_recipe_is_4over6(fp4s_nv_recipe r);
/* The E4M3 bound B a spec's tensor scale maps its amax to (S_enc = 6 B / amax):
 * 448, or for a 4over6 recipe nv_scale_bound (0: the recipe's default). */
FP4S_API unsigned fp4s_spec_scale_bound(const fp4s_spec *s);
/* Name of a scale codec ("e4m3", "ue4m3-ggml"). */
FP4S_API const char *fp4s_nv_scale_codec_name(fp4s_nv_scale_codec c);

/* The names of one kind, from the tables: for help texts and error messages.
 * fp4s_names joins them with sep (and the last two with last; NULL: sep) into
 * buf (at most n bytes, always terminated) and returns the length needed;
 * aliases follow their name in parentheses ("ceil (rceil)").
 * fp4s_name_index gives the index of s among them (aliases included) or
 * FP4S_EINVAL with a detail that lists them: for the profile kinds the index
 * of fp4s_profile_at, for the others the enum value (FP4S_NAMES_FORMAT: the
 * fp4s_format minus FP4S_MXFP4). */
typedef enum fp4s_name_kind {
    FP4S_NAMES_FORMAT = 0,
    FP4S_NAMES_MX_RULE,
    FP4S_NAMES_NV_RECIPE,
    FP4S_NAMES_TIE,
    FP4S_NAMES_ZERO_IN,
    FP4S_NAMES_GLOBAL_SCALE,
    FP4S_NAMES_NONFINITE,
    FP4S_NAMES_PACKING,
    FP4S_NAMES_FP8_GRAN,
    FP4S_NAMES_PROFILE,        /* every profile */
    FP4S_NAMES_PROFILE_MXFP4,  /* the profiles that define MXFP4 (NVFP4, FP8 below) */
    FP4S_NAMES_PROFILE_NVFP4,
    FP4S_NAMES_PROFILE_FP8,
    FP4S_NAMES_TENSOR_AMAX,
    FP4S_NAMES_MX_ELEM,
    FP4S_NAMES_4OVER6_MATH,
    FP4S_NAMES_SCOPE,
    FP4S_NAMES_TSRULE,
    FP4S_NAMES_COUNT
} fp4s_name_kind;
FP4S_API size_t fp4s_names(fp4s_name_kind kind, const char *sep, const char *last, char *buf, size_t n);
FP4S_API int fp4s_name_index(fp4s_name_kind kind, const char *s);

/* ---- profiles ------------------------------------------------------------------ */

/* One row of the profile table (handed out by pointer only; fields may be
 * added at the end). */
typedef struct fp4s_profile_info {
    const char *name;
    unsigned formats;          /* bit (1 << fp4s_format) for each format defined */
    const char *reproduces;    /* the behaviour it follows, in one paragraph */
    const char *engine;        /* the engine or document ("pytorch/ao (torchao)") */
    const char *version;       /* the engine version or commit it follows ("" if not versioned) */
    const char *device;        /* "any", or the device whose arithmetic it follows ("cuda") */
    const char *source;        /* the source file(s) in the engine's repository */
    const char *alias_of;      /* the profile this name is an alias of, or NULL */
} fp4s_profile_info;

/* Number of profiles, the i-th (NULL past the end), the one named (NULL if
 * unknown). */
FP4S_API size_t fp4s_profile_count(void);
FP4S_API const fp4s_profile_info *fp4s_profile_at(size_t i);
FP4S_API const fp4s_profile_info *fp4s_profile_find(const char *name);

/* Human-readable one-line description of a spec's every rule (for --json and
 * HDF5 attributes): writes at most n bytes, returns the length needed. */
FP4S_API size_t fp4s_spec_describe(const fp4s_spec *s, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
