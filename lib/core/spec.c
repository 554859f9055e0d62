/* Quantizer specs and the trait tables: profiles, MXFP4 scale rules, NVFP4
 * recipes.
 *
 * Each table has one designated-initializer row per entry; everything else
 * (parsing, names, help texts and error messages of the tools, the bound
 * checks of fp4s_spec_check, which kernels run a spec) is read from the rows.
 * A profile row holds the complete spec of each format it defines; explicit
 * command line options then override single fields. man/fp4scope-formats.7
 * has the long form of every row.
 *
 * The files a new NVFP4 recipe touches (read off the code):
 *   lib/include/fp4scope/spec.h  its fp4s_nv_recipe value, before FP4S_NV_RECIPE_COUNT;
 *   lib/core/spec.c              its row in nv_recipes[] (name, aliases, tscale, elem,
 *                                dequant, scale_codec, global_scale, kernels bits);
 *   kernels/cpu/quant_ref.c      its block-scale arithmetic, a case of nv_scale() (the
 *                                switch has no default: -Wswitch names a missing case);
 *   man/fp4scope-formats.7       its entry in the recipe list, and
 *   man/fp4-quant.1              its name (and aliases) in the --recipe list: the test
 *                                man-names (tests/man/names_documented.sh) fails
 *                                until both pages name it.
 * The rest reads the row: names, --help and error lists, parsing, the bound of
 * fp4s_spec_check, fp4s_tscale_init (by tscale), the element and dequant paths,
 * qfile's decode text, the kernel tester's loop; the SIMD and CUDA paths
 * decline a recipe whose kernels bits leave them out (the reference runs).
 * Only when a profile row uses it: that row here and the profile's conformance
 * vectors (tests/conformance/gen_vectors.py -> vectors.txt; the runner fails
 * without them). Only when its kernels bits claim a fast path: nv_params_init
 * in kernels/cpu/quant_simd.h, nv_scales8/nv_scales16 in quant_avx2.c and
 * quant_avx512.c, and the switch on p.recipe in kernels/cuda/quant_block.cuh
 * (which compares recipe numbers, not the enum names). A new MXFP4 scale rule
 * is the same with its row in mx_rules[] and a case of fp4s_mx_k() in
 * lib/base/codec.c in place of nv_scale() (its name in --scale-rule of
 * fp4-quant(1)); a new profile, its row in profiles[] and its entry in
 * fp4scope-formats(7). */
#include <fp4scope/spec.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define F(fmt) (1u << (fmt))
#define MX F(FP4S_MXFP4)
#define NV F(FP4S_NVFP4)
#define F8 F(FP4S_FP8)

/* The fields every spec of a format has (rows add the rest). */
#define MXFP4_SPEC .format = FP4S_MXFP4, .block = 32
#define NVFP4_SPEC .format = FP4S_NVFP4, .block = 16
#define FP8_SPEC .format = FP4S_FP8

/* ---- MXFP4 scale rules ---------------------------------------------------------- */

static const fp4s_mx_rule_traits mx_rules[FP4S_MX_RULE_COUNT] = {
    [FP4S_MX_FLOOR] = {
        .name = "floor", .aliases = "",
        .rule = "floor(log2 amax) - 2 from the exponent bits (a subnormal amax reads as 2^-127)",
        .used_by = "OCP MX v1.0 text, torchao FLOOR, microxcaling's C++/CUDA extension",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_CEIL] = {
        .name = "ceil", .aliases = "rceil",
        .rule = "smallest k with amax <= 6*2^k, from the bits without division (never clips); the "
                "float32 amax/6 rounded up to a power of two is the same but for amax 0x01400001",
        .used_by = "cuBLAS/TRT-LLM/FlashInfer cvt.rp.satfinite.ue8m0 of amax/6, torchao RCEIL kernels",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_EVEN] = {
        .name = "even", .aliases = "",
        .rule = "exponent of (bits(amax) + 2^21) - 2: amax rounded at its 2nd mantissa bit",
        .used_by = "torchao EVEN, vLLM's MXFP4 kernel",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_LOG2F] = {
        .name = "log2f", .aliases = "",
        .rule = "floorf(log2f(amax)) - 2 through libm",
        .used_by = "ggml's CPU reference, microxcaling's Python path (torch.log2 in fp32)",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_RTN] = {
        .name = "rtn", .aliases = "",
        .rule = "rintf(log2f(amax)) - 2, the code clamped to [0, 254]",
        .used_by = "ggml's CUDA activations",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_CEIL_LOG2F] = {
        .name = "ceil-log2f", .aliases = "",
        .rule = "ceilf(max(log2f(amax/6), -127)) in fp32",
        .used_by = "ModelOpt MXFP4, TransformerEngine's pow2 reference, torchao's RCEIL emulation up to 0.18",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_RCEIL_MUL] = {
        .name = "rceil-mul", .aliases = "",
        .rule = "d = fl(amax * fl(1/6)) rounded up to a power of two from its bits (a normal d with a "
                "nonzero mantissa: exponent + 1; a subnormal d above 2^-127: code 1); ceil except for "
                "amax = 0x01400001, whose product rounds down onto 2^-127",
        .used_by = "torchao RCEIL since 5d73a0c10 (mx_tensor.py _f32_to_e8m0_rceil of max_abs * (1.0 / 6))",
        .kernels = FP4S_KERNEL_ALL},
    [FP4S_MX_EVEN_NAN] = {
        .name = "even-nan", .aliases = "",
        .rule = "even, but an amax that rounds up to 2^128 (amax >= 1.75*2^127) gives the NaN scale 0xFF",
        .used_by = "torchao EVEN since 5d73a0c10 (the rounded max_abs is Inf and fails the isfinite test)",
        /* a NaN scale from a finite block: the SIMD bodies hand it to the
         * reference; the CUDA kernels make it a NaN block as the reference does */
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    /* The rollout engines' GPU kernels: rcp is rcp.approx.ftz.f32 as measured on
     * sm_90 (lib/base/approx.h). The CPU reference implements them, and the
     * CUDA kernels through the same code (lib/base/numcodec.h: on the device
     * the instructions themselves); the SIMD bodies do not. */
    [FP4S_MX_RCEIL_RCP_FTZ] = {
        .name = "rceil-rcp-ftz", .aliases = "",
        .rule = "d = amax*rcp(6) in float32 with a product below 2^-126 flushed to 0 (rcp(6) = fl(1/6) "
                "on sm_90); code = d rounded up to a power of two (cvt.rp.satfinite.ue8m0: 0 for d = 0, "
                "at most 254, 255 for NaN): ceil except that amax*fl(1/6) below 2^-126 gives code 0",
        .used_by = "FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4 with UE8M0 scales (quantization_utils.cuh)",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_MX_FLOOR_RCP] = {
        .name = "floor-rcp", .aliases = "",
        .rule = "code = the exponent field of fl(amax*rcp(6)): k = floor(log2(amax/6)), amax/2^k in [6, 12) "
                "(clips), 255 for an Inf amax",
        .used_by = "vLLM mxfp4_experts_quant (the MXFP4 W4A4 MoE CUTLASS path) before vLLM PR #43557",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_MX_RCEIL_MIN] = {
        .name = "rceil-min", .aliases = "",
        .rule = "d = fl(max(amax, 1e-10f)*fl(1/6)); code = exponent field of d, + 1 when its mantissa is not "
                "zero (255 stays): ceil for amax >= 1e-10, code 92 below (all-zero blocks too)",
        .used_by = "AMD aiter fp_f32_to_e8m0_scale RoundUp (csrc/include/mx_quant_utils.h) since PR #3212",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_MX_ROUND_MIN] = {
        .name = "round-min", .aliases = "",
        .rule = "a = max(amax, 1e-10f); e = its exponent field, + 1 when the mantissa is >= 0.5 (a >= 1.5*2^k); "
                "code = e - 2 (0 below 3, 255 for e = 255): amax/2^k in [3, 6), never clips",
        .used_by = "AMD aiter f32_to_e8m0_scale(absMax) * 0.25 before PR #3212 (fbd6ce8dc)",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_MX_EVEN_SAT] = {
        .name = "even-sat", .aliases = "",
        .rule = "even, but an amax that rounds up to 2^128 (amax >= 1.75*2^127, Inf) gives k = 127 "
                "(code 254) instead of 126: floor(log2(Inf)) clamped to 127",
        .used_by = "AMD Quark quark/torch/quantization/utils.py even_round",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_MX_CEIL_LOG2F_MIN] = {
        .name = "ceil-log2f-min", .aliases = "",
        .rule = "k = ceilf(log2f(max(amax, 1e-10f))) - 2 (2^ceil(log2 amax) over the threshold 6 floored to "
                "a power of two, 4): amax/2^k in (2, 4], code 92 below 1e-10",
        .used_by = "Brevitas MX quantizers with scale_rounding_func_type='ceil' (CeilSte on the log2 scale)",
        .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
};

/* ---- NVFP4 recipes --------------------------------------------------------------- */

#define TIE_ANY ((1u << FP4S_TIE_EVEN) | (1u << FP4S_TIE_ZERO) | (1u << FP4S_TIE_AWAY))

static const fp4s_nv_recipe_traits nv_recipes[FP4S_NV_RECIPE_COUNT] = {
    [FP4S_NV_TE] = {
        .name = "te", .aliases = "",
        .recipe = "S_enc = min(2688/amax, FLT_MAX) (1 for 0), S_dec = 1/S_enc; "
                  "s_b = e4m3(min(amax_b*(S_enc*(1/6)), FLT_MAX)); enc = min(1/(s_b*S_dec), FLT_MAX); "
                  "q = E2M1(x*enc); dequant (q*s_b)*S_dec",
        .used_by = "TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_ALL},
    [FP4S_NV_TORCHAO_DIV] = {
        .name = "torchao-div", .aliases = "",
        .recipe = "pts = amax/2688; s_b = e4m3(clamp((amax_b/6)/pts, 2^-6, 448)); t = pts*s_b; "
                  "q = E2M1(x/t); dequant q*t",
        .used_by = "torchao torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize, 0.14.1 to 0.16.0",
        .tscale = FP4S_NV_TS_DECODE, .elem = FP4S_NV_ELEM_DIV, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_DECODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_ALL},
    [FP4S_NV_MODELOPT] = {
        .name = "modelopt", .aliases = "",
        .recipe = "scale_2 = amax/2688; p = amax_b/(6*scale_2), 1 for a zero block, >= 2^-9; "
                  "s_b = e4m3(p) unsaturated (0x7F above 464); t = s_b*scale_2; q = E2M1(x/t); dequant q*t",
        .used_by = "ModelOpt modelopt/torch/quantization/qtensor/nvfp4_tensor.py",
        .tscale = FP4S_NV_TS_DECODE, .elem = FP4S_NV_ELEM_DIV, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_DECODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_ALL},
    [FP4S_NV_GGML] = {
        .name = "ggml", .aliases = "",
        .recipe = "no tensor scale; s_b = ggml UE4M3(amax_b/6); q = the first level m with the "
                  "smallest fabsf(m*s_b - |x|) in fp32; dequant q*s_b",
        .used_by = "ggml ggml/src/ggml-quants.c quantize_row_nvfp4_ref",
        .tscale = FP4S_NV_TS_NONE, .elem = FP4S_NV_ELEM_SEARCH, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_UE4M3_GGML, .global_scale = FP4S_GS_NONE,
        .ties = 1u << FP4S_TIE_ZERO, .tile2d = false, .kernels = FP4S_KERNEL_ALL},
    [FP4S_NV_TORCHAO_RCP] = {
        .name = "torchao", .aliases = "torchao-rcp",
        .recipe = "pts = amax/2688; s_b = e4m3(clamp((amax_b/6)/pts, 2^-6, 448)); r = (1/pts)/s_b; "
                  "q = E2M1(x*r); dequant q*(pts*s_b)",
        .used_by = "torchao torchao/prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize since 5c0c81487 (0.17.0)",
        .tscale = FP4S_NV_TS_DECODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_DECODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_NV_TORCHAO_CUDA] = {
        .name = "torchao-cuda", .aliases = "",
        .recipe = "pts = amax*fl(1/2688); s_b = e4m3(clamp((amax_b*fl(1/6))/pts, 2^-6, 448)); "
                  "r = (1/pts)/s_b; q = E2M1(x*r); dequant q*(pts*s_b)",
        .used_by = "torchao nvfp4_quantize since 5c0c81487 on CUDA, where PyTorch computes tensor / Python "
                   "scalar as a multiply by the float reciprocal (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu)",
        .tscale = FP4S_NV_TS_DECODE_RCP, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_DECODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    [FP4S_NV_TORCHAO_DIV_CUDA] = {
        .name = "torchao-div-cuda", .aliases = "",
        .recipe = "pts = amax*fl(1/2688); s_b = e4m3(clamp((amax_b*fl(1/6))/pts, 2^-6, 448)); t = pts*s_b; "
                  "q = E2M1(x/t); dequant q*t",
        .used_by = "torchao nvfp4_quantize 0.14.1 to 0.16.0 on CUDA (BinaryDivTrueKernel.cu: tensor / Python "
                   "scalar is a multiply by the float reciprocal)",
        .tscale = FP4S_NV_TS_DECODE_RCP, .elem = FP4S_NV_ELEM_DIV, .dequant = FP4S_NV_DQ_TOTAL,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_DECODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_REF | FP4S_KERNEL_CUDA},
    /* The rollout engines' GPU kernels (rcp = rcp.approx.ftz.f32 as measured
     * on sm_90, *f = mul.rn.ftz, /f = div.rn.ftz; lib/base/approx.h). Their
     * E2M1 conversion is cvt.rn.satfinite.e2m1x2: round to nearest even only. */
    [FP4S_NV_FLASHINFER] = {
        .name = "flashinfer", .aliases = "trtllm",
        .recipe = "S = the caller's global scale (2688/amax); s_b = e4m3(S *f (amax_b *f rcp(6))); "
                  "f = amax_b != 0 ? rcp(float(s_b) *f rcp(S)) : 0; q = E2M1(x *f f); dequant (q*s_b)*(1/S)",
        .used_by = "FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4 (quantization_utils.cuh), JIT-built with "
                   "-use_fast_math",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_FLASHINFER_EXACT] = {
        .name = "flashinfer-exact", .aliases = "trtllm-exact",
        .recipe = "s_b = amax_b != 0 ? e4m3(amax_b *f (S *f fl(1/6))) : 0; f = amax_b != 0 ? "
                  "min(1 /f (float(s_b) *f (1 /f S)), FLT_MAX) : 0; q = E2M1(x *f f); dequant (q*s_b)*(1/S)",
        .used_by = "the same with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1 (or TRTLLM_DISABLE_FP4_QUANT_FAST_MATH)",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_VLLM] = {
        .name = "vllm", .aliases = "sglang",
        .recipe = "s_b = e4m3(S * (amax_b * rcp(6))); f = float(s_b) != 0 ? rcp(float(s_b) * rcp(S)) : 0; "
                  "q = E2M1(x * f) (IEEE multiplies); dequant (q*s_b)*(1/S)",
        .used_by = "vLLM scaled_fp4_quant (csrc/libtorch_stable/quantization/fp4/nvfp4_utils.cuh "
                   "cvt_warp_fp16_to_fp4), SGLang's copy (sglang/jit_kernel/csrc/gemm/nvfp4)",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_TE_4OVER6] = {
        .name = "te-4over6", .aliases = "4over6",
        .recipe = "S_enc = min(6B/amax, FLT_MAX), B = 256 (or 448); base = (amax_b/6)*S_enc; candidates "
                  "s4 = e4m3(min(base*1.5, 448)), s6 = e4m3(min(base, 448)), each q = E2M1(x*min(1/(s*S_dec), "
                  "FLT_MAX)); err = sum over the block of |((q*s)*amax)/(6B) - x| (or squared) in fp32, in "
                  "order (16x16 tiles: row sums added in a tree); map-to-4 when err4 < err6; dequant (q*s_b)*S_dec",
        .used_by = "TransformerEngine transformer_engine/pytorch/custom_recipes/reference_nvfp4.py "
                   "_quantize_blockwise_4over6_reference (commit d0067d0)",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = true, .kernels = FP4S_KERNEL_REF},
    /* TransformerEngine's kernels where their element factor is not the reference's */
    [FP4S_NV_TE_SDIV] = {
        .name = "te-sdiv", .aliases = "",
        .recipe = "s_b as te; f = min(S_enc / float(s_b), FLT_MAX) (one division); q = E2M1(x*f); "
                  "dequant (q*s_b)*S_dec",
        .used_by = "TransformerEngine quantize_transpose_nvfp4_tuned_1D.cuh compute_nvfp4_scaling_coefficient "
                   "before TE PR #2639 (29b84c168), and its BF16 branch's division",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = TIE_ANY, .tile2d = true, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_TE_SDIV0] = {
        .name = "te-sdiv0", .aliases = "",
        .recipe = "s_b as te; f = float(s_b) != 0 ? min(S_enc / float(s_b), FLT_MAX) : 0; q = E2M1(x*f); "
                  "dequant (q*s_b)*S_dec",
        .used_by = "TransformerEngine PR #3045 (not merged at d0067d0da; head 690ffea4d) "
                   "custom_recipes/quantization_nvfp4_per_token.py NVFP4QuantizerPerTokenRef, "
                   "common/cast/nvfp4/quantize_nvfp4_per_token.cu",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = TIE_ANY, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_TE_BF16] = {
        .name = "te-bf16", .aliases = "",
        .recipe = "s_b as te; c = bf16(min(S_enc / float(s_b), BF16_MAX)) (round to nearest even); "
                  "q = E2M1(x*c) (exact for BF16 x: fma.rn.f32.bf16); dequant (q*s_b)*S_dec",
        .used_by = "TransformerEngine quantize_transpose_nvfp4_tuned_1D.cuh with NVTE_USE_FAST_MATH=1 "
                   "(SCALING_COEFFICIENT_TYPE<true> = bf16, ptx mul_cvt_bf16_to_fp4_8x_round_to_nearest)",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_FLASHINFER_4OVER6] = {
        .name = "flashinfer-4over6", .aliases = "trtllm-4over6",
        .recipe = "vecMax 0 (setp.ftz): scale 0, codes 0; s6 = S *f (vecMax *f rcp(6)), s4 = s6 *f 1.5, each "
                  "e4m3 satfinite; D = rcp(S); f = rcp(float(s) *f D); q = E2M1(x *f f); error per element "
                  "(ftz): AMAX ((q*s)*amax)/(6B), DECODE (q*s)*D, FP16 q*s - x*S; map-to-4 when err4 < err6; "
                  "dequant (q*s_b)*(1/S)",
        .used_by = "FlashInfer csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh "
                   "cvt_warp_fp16_to_fp4 with NVFP4_4OVER6_CONFIG (FLASHINFER_NVFP4_4OVER6=1), fast math",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
    [FP4S_NV_FLASHINFER_4OVER6_EXACT] = {
        .name = "flashinfer-4over6-exact", .aliases = "trtllm-4over6-exact",
        .recipe = "vecMax 0: scale 0, codes 0; s6 = (vecMax /f 6) *f S, s4 = s6 *f 1.5, each e4m3 satfinite; "
                  "D = 1 /f S; f = min(1 /f (float(s) *f D), FLT_MAX); q = E2M1(x *f f); errors as "
                  "flashinfer-4over6; dequant (q*s_b)*(1/S)",
        .used_by = "the same with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1 (or TRTLLM_DISABLE_FP4_QUANT_FAST_MATH=1)",
        .tscale = FP4S_NV_TS_ENCODE, .elem = FP4S_NV_ELEM_MUL, .dequant = FP4S_NV_DQ_SPLIT,
        .scale_codec = FP4S_NV_SC_E4M3, .global_scale = FP4S_GS_ENCODE,
        .ties = 1u << FP4S_TIE_EVEN, .tile2d = false, .kernels = FP4S_KERNEL_REF},
};

const fp4s_mx_rule_traits *fp4s_get_mx_rule_traits(fp4s_mx_rule r)
{
    return (unsigned)r < FP4S_MX_RULE_COUNT ? &mx_rules[r] : NULL;
}

const fp4s_nv_recipe_traits *fp4s_get_nv_recipe_traits(fp4s_nv_recipe r)
{
    return (unsigned)r < FP4S_NV_RECIPE_COUNT ? &nv_recipes[r] : NULL;
}

/* ---- profiles ------------------------------------------------------------------- */

/* A profile: what it reproduces and the complete spec of each format it
 * defines (format 0: not defined). info.formats must name exactly those
 * (tests/core/test_spec.c checks). */
typedef struct profile_row {
    fp4s_profile_info info;
    fp4s_spec mx, nv, f8;
} profile_row;

static const profile_row profiles[] = {
    {.info = {.name = "ocp", .formats = MX,
              .engine = "OCP Microscaling Formats (MX) specification", .version = "v1.0", .device = "any",
              .source = "OCP MX v1.0 spec, section 6.3",
              .reproduces = "OCP MX v1.0 spec text: MXFP4 X = 2^(floor(log2 amax) - 2) from the exponent bits "
                            "(FLOOR), E2M1 round-to-nearest-even satfinite, -0 kept, pairs packing, NaN in a "
                            "block -> scale 0xFF, all-zero block -> E8M0 code 0"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .keep_neg_zero = true}},
    {.info = {.name = "ceil", .formats = MX,
              .engine = "cuBLAS / TRT-LLM / FlashInfer (cvt.rp.satfinite.ue8m0)", .version = "", .device = "any",
              .source = "the decomposition paper (arXiv 2605.20402)",
              .reproduces = "decomposition paper (arXiv 2605.20402) convention = cuBLAS/TRT-LLM/FlashInfer "
                            "cvt.rp.ue8m0 of amax/6: smallest k with amax <= 6*2^k (CEIL, never clips), E2M1 "
                            "RNE, -0 kept, pairs, NaN -> 0xFF, zero block code 0"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_CEIL, .keep_neg_zero = true}},
    /* torchao: main, then the behaviour of earlier releases as name@release
     * (the last release that has it), then the same on CUDA */
    {.info = {.name = "torchao", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)",
              .version = "main at 36027d82d (2026-08-21): MXFP4 as since 5d73a0c10 (2026-08-12), NVFP4 as since "
                         "5c0c81487 (2026-03-13, 0.17.0)",
              .device = "cpu",
              .source = "torchao/prototype/mx_formats/mx_tensor.py (to_mx), nvfp4_tensor.py (nvfp4_quantize, "
                        "per_tensor_amax_to_scale)",
              .reproduces = "MXFP4 to_mx ScaleCalculationMode.FLOOR: exponent bits - 2, a block whose amax is "
                            "not finite (NaN or Inf) gets scale 0xFF (block-nan), elements times the E8M0 "
                            "reciprocal (exact), f32_to_f4_unpacked RNE keeping the sign (-0 -> 8), pairs, zero "
                            "block code 0; NVFP4 two-level: tensor amax torch.max(abs(x)) (NaN and Inf enter), "
                            "pts = amax/2688, s_b = e4m3(clamp((amax_b/6)/pts, 2^-6, 448)), v = x*((1/pts)/s_b), "
                            "clamp +-6, RNE; dequant q*(pts*s_b)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .nonfinite = FP4S_NF_BLOCK_NAN, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_RCP, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao@0.18", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)",
              .version = "0.17.0 to 0.18.0 (5c0c81487 up to 5d73a0c10)", .device = "cpu",
              .source = "torchao/prototype/mx_formats/mx_tensor.py (to_mx), nvfp4_tensor.py (nvfp4_quantize)",
              .reproduces = "MXFP4 as torchao@0.16 (NaN amax -> 0xFF, Inf a value); NVFP4 as torchao (v = "
                            "x*((1/pts)/s_b))"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_RCP, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao@0.16", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)",
              .version = "0.14.1 to 0.16.0 (main up to 03ca8e22a, 2026-03-13)", .device = "cpu",
              .source = "torchao/prototype/mx_formats/mx_tensor.py (to_mx), nvfp4_tensor.py (nvfp4_quantize)",
              .reproduces = "MXFP4 to_mx ScaleCalculationMode.FLOOR: exponent bits - 2, NaN amax -> 0xFF, Inf "
                            "a value (scale-nan), f32_to_f4_unpacked RNE with the sign kept (-0 -> 8), pairs, "
                            "zero block code 0 (not modelled: torchao divides code-0 blocks by 2^-126); NVFP4 "
                            "two-level: tensor amax torch.max(abs(x)), pts = amax/2688, s_b = "
                            "e4m3(clamp((amax_b/6)/pts, 2^-6, 448)), v = x/(pts*s_b), clamp +-6, RNE"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_DIV, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao-cuda", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)", .version = "as torchao", .device = "cuda",
              .source = "nvfp4_tensor.py; PyTorch aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu",
              .reproduces = "torchao's PyTorch code run on CUDA, where a tensor divided by a Python scalar is "
                            "a multiply by the float reciprocal of the scalar: NVFP4 pts = amax*fl(1/2688) and "
                            "amax_b*fl(1/6), otherwise as torchao; MXFP4 as torchao (no such division)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .nonfinite = FP4S_NF_BLOCK_NAN, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_CUDA, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao-cuda@0.18", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)", .version = "as torchao@0.18", .device = "cuda",
              .source = "nvfp4_tensor.py; PyTorch aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu",
              .reproduces = "torchao@0.18 on CUDA: NVFP4 as torchao-cuda, MXFP4 as torchao@0.16"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_CUDA, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao-cuda@0.16", .formats = MX | NV,
              .engine = "pytorch/ao (torchao)", .version = "as torchao@0.16", .device = "cuda",
              .source = "nvfp4_tensor.py; PyTorch aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu",
              .reproduces = "torchao@0.16 on CUDA: NVFP4 pts = amax*fl(1/2688) and amax_b*fl(1/6), v = "
                            "x/(pts*s_b); MXFP4 as torchao@0.16"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TORCHAO_DIV_CUDA, .global_scale = FP4S_GS_DECODE,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "torchao-rceil", .formats = MX,
              .engine = "pytorch/ao (torchao)", .version = "main at 36027d82d (2026-08-21), as since 5d73a0c10",
              .device = "any", .source = "torchao/prototype/mx_formats/mx_tensor.py (_to_mx_rceil, "
                                         "_f32_to_e8m0_rceil)",
              .reproduces = "ScaleCalculationMode.RCEIL: descale = max_abs * (1.0/6), rounded up to a power of "
                            "two from its bits (rceil-mul: exact ceil except amax 0x01400001), NaN or Inf amax -> "
                            "0xFF (block-nan), elements times the E8M0 reciprocal, otherwise as torchao (its "
                            "sm100 compiled path rounds the same descale up with cvt.rp.ue8m0x2)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_MUL, .nonfinite = FP4S_NF_BLOCK_NAN, .keep_neg_zero = true}},
    {.info = {.name = "torchao-rceil@0.18", .formats = MX,
              .engine = "pytorch/ao (torchao)", .version = "0.14.1 to 0.18.0", .device = "cuda",
              .source = "torchao/prototype/mx_formats/mx_tensor.py (_to_mx_rceil)",
              .reproduces = "ScaleCalculationMode.RCEIL as its CUDA path computes it (cvt.rp.satfinite.ue8m0 "
                            "of amax/6 = exact ceil), otherwise as torchao@0.16; its PyTorch emulation uses "
                            "ceil(log2(amax/6)) (--scale-rule ceil-log2f) and scales code-0 blocks by 1"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_CEIL, .keep_neg_zero = true}},
    {.info = {.name = "even", .formats = MX,
              .engine = "pytorch/ao (torchao)", .version = "main at 36027d82d (2026-08-21), as since 5d73a0c10",
              .device = "any", .source = "torchao/prototype/mx_formats/mx_tensor.py (to_mx)",
              .reproduces = "ScaleCalculationMode.EVEN: exponent of (bits(amax) + 2^21) - 2, a rounded amax "
                            "that reaches Inf (amax >= 1.75*2^127) and NaN or Inf amax -> 0xFF (even-nan, "
                            "block-nan), otherwise as torchao"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_EVEN_NAN, .nonfinite = FP4S_NF_BLOCK_NAN, .keep_neg_zero = true}},
    {.info = {.name = "even@0.18", .formats = MX,
              .engine = "pytorch/ao (torchao)", .version = "0.14.1 to 0.18.0", .device = "any",
              .source = "torchao/prototype/mx_formats/mx_tensor.py (to_mx)",
              .reproduces = "ScaleCalculationMode.EVEN: exponent of (bits(amax) + 2^21) - 2 (amax >= "
                            "1.75*2^127 gives code 253), otherwise as torchao@0.16"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_EVEN, .keep_neg_zero = true}},
    /* The rollout engines' GPU kernels. rcp = rcp.approx.ftz.f32: its table
     * was measured on an H200, so these are bit-exact on sm_90 only. */
    {.info = {.name = "vllm", .formats = MX | NV,
              .engine = "vLLM (vllm-project/vllm)",
              .version = "nvfp4_utils.cuh at 20b4ad8eb (after vLLM PR #43557)", .device = "cuda sm_90",
              .source = "csrc/libtorch_stable/quantization/fp4/nvfp4_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "nvfp4_quant_kernels.cu (scaled_fp4_quant), mxfp4_experts_quant.cu",
              .reproduces = "NVFP4 scaled_fp4_quant of a BF16/FP16 tensor: amax_b by bf16 max (skips NaN), "
                            "s_b = e4m3(S*(amax_b*rcp(6))), elements x*rcp(s_b*rcp(S)), factor 0 for a block "
                            "whose scale is 0 (codes +-0), IEEE multiplies (vLLM's cmake/utils.cmake at "
                            "00c1d959 adds no -use_fast_math; per-file flags not checked); S is the caller's "
                            "global scale (a checkpoint's input scale), fp4scope takes 2688/amax. MXFP4 "
                            "mxfp4_experts_quant (W4A4 MoE, CUTLASS): k from (bits(amax) + 2^21) & 0xFF800000 "
                            "(even), elements x*(1/2^k) exactly, factor 0 for code 0. E2M1 "
                            "cvt.rn.satfinite.e2m1x2: NaN -> code 7 as CUDA's cuda_fp4.hpp models it (the sm_100 "
                            "instruction itself not measured). Bit-exact on sm_90 (rcp.approx.ftz.f32 measured "
                            "on an H200); not claimed for other architectures"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_EVEN, .mx_elem = FP4S_MX_ELEM_ZERO0, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_VLLM, .global_scale = FP4S_GS_ENCODE, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true}},
    {.info = {.name = "vllm@pre-43557", .formats = MX | NV,
              .engine = "vLLM (vllm-project/vllm)",
              .version = "before vLLM PR #43557 (UE8M0 branch as at 07c13c7bd csrc/quantization/fp4/nvfp4_utils.cuh)",
              .device = "cuda sm_90",
              .source = "csrc/libtorch_stable/quantization/fp4/nvfp4_utils.cuh (cvt_warp_fp16_to_fp4, UE8M0_SF), "
                        "mxfp4_experts_quant.cu",
              .reproduces = "MXFP4 mxfp4_experts_quant before the PR: code = the exponent field of amax*rcp(6) "
                            "(floor-rcp: amax/2^k in [6, 12), clips), elements x*rcp(2^k*rcp(1)), factor 0 for "
                            "codes 0, 254 (rcp flushes 2^-127) and 255 (an Inf amax); NVFP4 as vllm"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_FLOOR_RCP, .mx_elem = FP4S_MX_ELEM_RCP_FTZ, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_VLLM, .global_scale = FP4S_GS_ENCODE, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true}},
    {.info = {.name = "sglang", .formats = NV,
              .engine = "SGLang (sgl-project/sglang)",
              .version = "jit_kernel nvfp4_quant_kernels.cuh at 0fb8f05e3", .device = "cuda sm_90",
              .source = "python/sglang/jit_kernel/csrc/gemm/nvfp4/nvfp4_quant_kernels.cuh (scaled_fp4_quant), "
                        "sgl-kernel/csrc/gemm/nvfp4_quant.cuh", .alias_of = "vllm",
              .reproduces = "alias of vllm (NVFP4): SGLang's own scaled_fp4_quant (JIT kernel, sm100+) is "
                            "vLLM's cvt_warp_fp16_to_fp4, the same operations in the same order; SGLang's build "
                            "flags not checked. SGLang's FlashInfer TRT-LLM MoE backend calls "
                            "flashinfer.fp4_quantize instead: profile flashinfer. SGLang's MXFP4 activation path "
                            "not read"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_VLLM, .global_scale = FP4S_GS_ENCODE, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true}},
    {.info = {.name = "flashinfer", .formats = MX | NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)", .device = "cuda sm_90",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (quantize_with_block_size), flashinfer/jit/core.py (-use_fast_math)",
              .reproduces = "fp4_quantize / nvfp4_quantize / mxfp4_quantize(backend='cuda') of a BF16/FP16 "
                            "tensor, JIT-built with -use_fast_math (multiplies flush subnormals: mul.ftz; exp2f "
                            "is ex2.approx.ftz). NVFP4: s_b = e4m3(S*(amax_b*rcp(6))), elements "
                            "x*rcp(s_b*rcp(S)) (factor 0 for an all-zero block; a block whose scale rounds to 0 "
                            "gets rcp(0) = Inf: its elements code +-6, its zeros NaN -> 7); S is the caller's "
                            "global scale, fp4scope takes 2688/amax. MXFP4: d = amax*rcp(6) (flushed), code "
                            "cvt.rp.satfinite.ue8m0(d), elements x*ex2.approx.ftz(127 - code): factor 0 for "
                            "codes 0 and 254. amax by bf16 max (skips NaN), E2M1 cvt.rn.satfinite.e2m1x2 with NaN "
                            "-> code 7 as CUDA's cuda_fp4.hpp models it. Measured on an H200: FlashInfer's own "
                            "cvt_warp_fp16_to_fp4, compiled for sm_100a and run on sm_90 with its E2M1 and UE8M0 "
                            "conversions replaced by that model, gives these bytes. Bit-exact on sm_90 only"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_RCP_FTZ, .mx_elem = FP4S_MX_ELEM_EX2_FTZ, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER, .global_scale = FP4S_GS_ENCODE, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true}},
    {.info = {.name = "flashinfer-exact", .formats = MX | NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)", .device = "cuda sm_90",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4, "
                        "DISABLE_FP4_QUANT_FAST_MATH), csrc/nv_internal/cpp/common/envUtils.cpp",
              .reproduces = "flashinfer with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1 (or "
                            "TRTLLM_DISABLE_FP4_QUANT_FAST_MATH=1): NVFP4 s_b = e4m3(amax_b*(S*fl(1/6))), elements "
                            "x*min(1/(s_b*(1/S)), FLT_MAX) with correctly rounded divisions (div.rn.ftz: still "
                            "flushing, the JIT keeps -use_fast_math), factor 0 for an all-zero block: TE's order "
                            "with a flush; MXFP4 as flashinfer (the UE8M0 path has no exact variant)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_RCP_FTZ, .mx_elem = FP4S_MX_ELEM_EX2_FTZ, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_EXACT, .global_scale = FP4S_GS_ENCODE,
            .nonfinite = FP4S_NF_CVT, .keep_neg_zero = true}},
    {.info = {.name = "trtllm", .formats = MX | NV,
              .engine = "TensorRT-LLM (NVIDIA/TensorRT-LLM)", .version = "as vendored by FlashInfer fb28d7242",
              .device = "cuda sm_90", .source = "cpp/tensorrt_llm/kernels/quantization_utils.cuh", .alias_of = "flashinfer",
              .reproduces = "alias of flashinfer: FlashInfer vendors TRT-LLM's FP4 quantize kernels as "
                            "csrc/nv_internal/tensorrt_llm/kernels/ (namespace tensorrt_llm, and honours "
                            "TRTLLM_DISABLE_FP4_QUANT_FAST_MATH). Not established: TRT-LLM's own copy of the file "
                            "(not in the sources read) and whether TRT-LLM builds it with -use_fast_math"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_RCP_FTZ, .mx_elem = FP4S_MX_ELEM_EX2_FTZ, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER, .global_scale = FP4S_GS_ENCODE, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true}},
    {.info = {.name = "trtllm-exact", .formats = MX | NV,
              .engine = "TensorRT-LLM (NVIDIA/TensorRT-LLM)", .version = "as vendored by FlashInfer fb28d7242",
              .device = "cuda sm_90", .source = "cpp/tensorrt_llm/kernels/quantization_utils.cuh",
              .alias_of = "flashinfer-exact",
              .reproduces = "alias of flashinfer-exact (TRTLLM_DISABLE_FP4_QUANT_FAST_MATH=1), with the caveats of "
                            "trtllm"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_RCP_FTZ, .mx_elem = FP4S_MX_ELEM_EX2_FTZ, .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_EXACT, .global_scale = FP4S_GS_ENCODE,
            .nonfinite = FP4S_NF_CVT, .keep_neg_zero = true}},
    /* FlashInfer's per-token and 4over6 kernels (sm_100 only: documented arithmetic) */
    {.info = {.name = "flashinfer-per-token", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "nvfp4_quantize(..., per_token_activation=True), backend cuda, a_global_sf 1/(448*6) (its "
                            "documented value): row amax by bf16 max, per_token_scale = row_amax * fl(1/2688), S = "
                            "rcp(per_token_scale), then flashinfer's fast-math arithmetic with S per row; it returns "
                            "per_token_scale (recorded). Documented arithmetic: the kernel is built for sm_100 only; "
                            "rcp.approx.ftz as measured on sm_90"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER, .global_scale = FP4S_GS_DECODE, .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_RCP}},
    {.info = {.name = "flashinfer-per-token-exact", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "flashinfer-per-token with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1: G = 1 /f fl(1/2688), "
                            "S = row_amax != 0 ? min(G /f row_amax, FLT_MAX) : FLT_MAX (1 if 0), per_token_scale = 1 "
                            "/f S, then flashinfer-exact's arithmetic"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_EXACT, .global_scale = FP4S_GS_DECODE,
            .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_DIV}},
    {.info = {.name = "flashinfer-4over6", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "fp4_quantize / nvfp4_quantize (per tensor) with FLASHINFER_NVFP4_4OVER6=1 and its "
                            "defaults (E4M3 bound 448, MAE, error in fp32): map-to-6 and map-to-4 candidates of each "
                            "16-block, the error of each element through the global decode scale (q*s)*rcp(S) - x (no "
                            "row amax is passed: the decode-scale formula), map-to-4 when strictly smaller; S the "
                            "caller's global scale, fp4scope takes 2688/amax. Documented arithmetic (sm_100 only)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_4OVER6, .global_scale = FP4S_GS_ENCODE,
            .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true, .nv_4over6_math = FP4S_4OVER6_DECODE}},
    {.info = {.name = "flashinfer-4over6-exact", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "flashinfer-4over6 with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1: s6 = (amax_b /f 6) *f "
                            "S, D = 1 /f S, factors min(1 /f (s *f D), FLT_MAX), error (q*s)*D - x"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_4OVER6_EXACT, .global_scale = FP4S_GS_ENCODE,
            .nonfinite = FP4S_NF_CVT,
            .keep_neg_zero = true, .nv_4over6_math = FP4S_4OVER6_DECODE}},
    {.info = {.name = "flashinfer-per-token-4o6", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "the per-token kernel with FLASHINFER_NVFP4_4OVER6=1 (fast math): S per row as "
                            "flashinfer-per-token, the candidates of flashinfer-4over6 and the error through the row "
                            "amax ((q*s)*row_amax)/2688 - x, as TE's"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_4OVER6, .global_scale = FP4S_GS_DECODE,
            .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_RCP,
            .nv_4over6_math = FP4S_4OVER6_AMAX}},
    {.info = {.name = "flashinfer-per-token-4o6-exact", .formats = NV,
              .engine = "FlashInfer (flashinfer-ai/flashinfer), CUDA backend",
              .version = "main at fb28d7242 (2026-08-22)",
              .device = "cuda sm_100",
              .source = "csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh (cvt_warp_fp16_to_fp4), "
                        "quantization.cuh (nvfp4QuantAndPerTokenScaleKernel), cpp/kernels/quantization.cu "
                        "(invokeNvfp4QuantAndPerTokenScale)",
              .reproduces = "the per-token 4over6 kernel with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1 (the setting "
                            "Miles' NVFP4 RL recipe exports): S = min(G /f row_amax, FLT_MAX) (an all-zero row: S = "
                            "0, per_token_scale 0), flashinfer-4over6-exact's candidates, the error through the row "
                            "amax"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_4OVER6_EXACT, .global_scale = FP4S_GS_DECODE,
            .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_DIV_ZERO,
            .nv_4over6_math = FP4S_4OVER6_AMAX}},
    {.info = {.name = "miles-nvfp4-rollout", .formats = NV,
              .engine = "Miles (radixark/miles) NVFP4 RL rollout on FlashInfer",
              .version = "Miles PR #1261 (1fca8f8b6) with FlashInfer fb28d7242",
              .device = "cuda sm_100",
              .source = "miles: scripts/run_qwen3_30b_a3b.py (the NVFP4 environment); FlashInfer: as "
                        "flashinfer-per-token-4o6-exact",
              .reproduces = "the rollout side of Miles' NVFP4 RL recipe (FLASHINFER_NVFP4_4OVER6=1, _E4M3_USE_256=1, "
                            "_ERR_MODE=MSE, _ERR_USE_FAST_MATH=0, FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1, SGLang "
                            "per-token activation): flashinfer-per-token-4over6-exact with bound 256 (S from "
                            "fl(1/1536)) and MSE"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER_4OVER6_EXACT, .global_scale = FP4S_GS_DECODE,
            .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_DIV_ZERO,
            .nv_4over6_math = FP4S_4OVER6_AMAX, .nv_scale_bound = 256, .nv_4over6_err = FP4S_4OVER6_MSE}},
    {.info = {.name = "vllm-per-token", .formats = NV, .alias_of = "flashinfer-per-token",
              .engine = "vLLM (vllm-project/vllm)",
              .version = "nvfp4_per_token MoE (vLLM PR #48538 in its release notes); not read at a commit",
              .device = "cuda sm_100",
              .source = "FlashInfer's per-token kernel through vllm/model_executor/layers/fused_moe (the vLLM "
                        "snapshot exceeds the fetch limit)",
              .reproduces = "alias of flashinfer-per-token: vLLM's per-token NVFP4 MoE activations go through "
                            "FlashInfer's TRT-LLM MoE kernel with per_token_activation=True (as the index's copies of "
                            "vLLM show); vLLM's own source was not read at a commit (its snapshot is over the fetch "
                            "limit), so its FlashInfer build flags are not established"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER, .global_scale = FP4S_GS_DECODE, .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_RCP}},
    {.info = {.name = "sglang-per-token", .formats = NV, .alias_of = "flashinfer-per-token",
              .engine = "SGLang (sgl-project/sglang)",
              .version = "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=1; not read at a commit",
              .device = "cuda sm_100",
              .source = "python/sglang/srt/environ.py, layers/quantization/modelopt_quant.py (FlashInfer TRT-LLM "
                        "MoE, per-token activation)",
              .reproduces = "alias of flashinfer-per-token: SGLang's FlashInfer TRT-LLM MoE with "
                            "SGLANG_FLASHINFER_NVFP4_PER_TOKEN_ACTIVATION=1 calls FlashInfer's per-token kernel (as "
                            "the index's copies of SGLang show); SGLang's own source was not read at a commit (its "
                            "snapshot is over the fetch limit)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_FLASHINFER, .global_scale = FP4S_GS_DECODE, .nonfinite = FP4S_NF_CVT, .tensor_amax = FP4S_TAMAX_NONAN,
            .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW, .nv_tsrule = FP4S_TSR_RCP}},
    /* AMD's and Xilinx's MXFP4: documented arithmetic (no AMD GPU was measured) */
    {.info = {.name = "aiter", .formats = MX,
              .engine = "AMD AITER (ROCm/aiter)", .version = "main at e4048607a (2026-08-22), as since PR #3212",
              .device = "rocm",
              .source = "csrc/include/mx_quant_utils.h (fp_f32_to_e8m0_scale RoundUp), csrc/kernels/quant_kernels.cu "
                        "(dynamic_per_group_scaled_quant_kernel)",
              .reproduces = "dynamic_per_group_scaled_quant (MXFP4, group 32): absMax starts at 1e-10f (so all-zero "
                            "and tiny blocks get code 92) and max() skips NaN; d = absMax*fl(1/6), code = its "
                            "exponent field + (mantissa != 0) (rceil-min); elements E2M1 of x/2^k rounded to "
                            "nearest even (aiter PR #3992 says gfx950's v_cvt_scalef32_pk_fp4 does, and made the "
                            "software fallback do so). Not established: how the instruction treats NaN, Inf and a "
                            "zero scale (fp4scope codes NaN and Inf elements 0); documented arithmetic, not "
                            "measured (no AMD GPU)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_RCEIL_MIN, .mx_zero_block_code = 92, .nonfinite = FP4S_NF_IGNORE,
            .keep_neg_zero = true}},
    {.info = {.name = "aiter@pre-3212", .formats = MX,
              .engine = "AMD AITER (ROCm/aiter)",
              .version = "fbd6ce8dc (2026-06-02), before PR #3212", .device = "rocm",
              .source = "csrc/include/fp4_quant_utils.h (f32_to_e8m0_scale), csrc/kernels/quant_kernels.cu",
              .reproduces = "before PR #3212: scale = f32_to_e8m0_scale(absMax)*0.25 with absMax from 1e-10f: absMax "
                            "rounded to the nearest power of two at mantissa 1.5 (round-min), k = that exponent - 2 "
                            "(amax/2^k in [3, 6)); otherwise as aiter"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_ROUND_MIN, .mx_zero_block_code = 92, .nonfinite = FP4S_NF_IGNORE,
            .keep_neg_zero = true}},
    {.info = {.name = "quark", .formats = MX,
              .engine = "AMD Quark (amd/Quark)", .version = "utils.py at 1d27b5582", .device = "any",
              .source = "quark/torch/quantization/utils.py (even_round)",
              .reproduces = "even_round: (bits(amax) + 2^21) & 0xFF800000, floor(log2) - 2 clamped to [-127, 127] "
                            "(even-sat: amax >= 1.75*2^127 gives k = 127), zero blocks 2^-126 -> code 0, NaN kept "
                            "(scale-nan). Not established: Quark's element rounding (its MX fake-quantizer was not "
                            "read): fp4scope rounds to nearest even, satfinite, keeping -0"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_EVEN_SAT, .keep_neg_zero = true}},
    {.info = {.name = "brevitas-ceil", .formats = MX,
              .engine = "Brevitas (Xilinx/brevitas)", .version = "main at b106358c4 (2025-08-28)", .device = "any",
              .source = "src/brevitas/core/scaling/runtime.py (RuntimeDynamicGroupStatsScaling), "
                        "quant/experimental/mx_quant_ocp.py, brevitas_examples/common/generative/quantize.py",
              .reproduces = "MX (OCP E2M1, group 32) with scale_rounding_func_type='ceil': scale = "
                            "2^ceil(log2(max(amax, 1e-10)))/4 (scaling_min_val 1e-10; the threshold 6 floored to a "
                            "power of two), ceil-log2f-min; elements rounded to nearest even on the E2M1 grid, "
                            "saturating, -0 kept; NaN makes the block NaN. log2 through libm's log2f (Brevitas takes "
                            "torch.log2 in float32)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_CEIL_LOG2F_MIN, .mx_zero_block_code = 92, .keep_neg_zero = true}},
    {.info = {.name = "te", .formats = MX | NV,
              .engine = "NVIDIA TransformerEngine", .version = "main at d0067d0da (2026-08-22)", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py",
              .reproduces = "NVIDIA TransformerEngine pytorch/custom_recipes/reference_nvfp4.py: NVFP4 global "
                            "amax torch.max(abs(x)) (a NaN makes every scale NaN, Inf gives S_enc 1), S_enc = "
                            "min(2688/amax, FLT_MAX) (1 if 0), s_b = e4m3(min(amax_b*(S_enc*(1/6)), FLT_MAX)) "
                            "satfinite, enc = min(1/(s_b*S_dec), FLT_MAX), q = E2M1 RNE satfinite of x*enc "
                            "(exact -0 -> 0, negative -> 8), dequant q*s_b*S_dec, 1-D 1x16 "
                            "(activations/gradients); MXFP4: the same file's pow_2_scales path, cast_to_e8 = "
                            "2^ceil(log2(amax/6)) in fp32 (ceil-log2f), clamp +-127, RNE thresholds"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_CEIL_LOG2F, .zero_in = FP4S_ZIN_POS, .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "te-2d", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "main at d0067d0da (2026-08-22)", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py",
              .reproduces = "TransformerEngine NVFP4 weights: as te with 16x16 2-D tiles (one scale per tile, "
                            "repeated on its 16 rows)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .tile2d = true}},
    {.info = {.name = "te-4over6", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "d0067d0", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py (the CUDA kernel: "
                        "transformer_engine/common/cast/nvfp4/quantize_4over6_nvfp4.cuh)",
              .reproduces = "TransformerEngine NVFP4 with 4over6 (nvfp4_4over6, its default e4m3 bound 256 and "
                            "error mode MAE): each 1x16 block is quantized twice, with its E4M3 scale mapping the "
                            "block maximum to 6 and, scaled by 1.5, to 4, and keeps the candidate with the smaller "
                            "error in the input domain (ties to map-to-6); activations/weights 1-D"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_4OVER6, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "te-4over6-2d", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "d0067d0", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py",
              .reproduces = "te-4over6 with 16x16 2-D tiles (weights): the 16 row errors of a tile are added in "
                            "the tree order of TE's warp reduction before the candidates are compared"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_4OVER6, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .tile2d = true}},
    {.info = {.name = "te-rht", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "d0067d0", .device = "any",
              .source = "transformer_engine/pytorch/tensor/nvfp4_tensor.py (get_rht_matrix), "
                        "custom_recipes/reference_nvfp4.py (_apply_rht)",
              .reproduces = "te after TransformerEngine's random Hadamard transform: each 16-element block of a "
                            "row times diag(signs) H16 / 4 (its wgrad sign vector), the product rounded to BF16 "
                            "as TE's BF16 matmul does, then te with the post-transform amax"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .rht = true, .rht_signs = FP4S_RHT_TE_SIGNS}},
    {.info = {.name = "te-sr", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "d0067d0", .device = "any",
              .source = "transformer_engine/common/util/ptx.cuh (stochastic_round_fp4_e2m1)",
              .reproduces = "te with stochastic rounding of the elements (TE's gradients): TE's software rounding "
                            "of cvt.rs.satfinite.e2m1 with 8 random bits per element, the bits from fp4scope's "
                            "seeded generator (seed 1), not TE's Philox stream"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .sr = true, .sr_seed = 1}},
    /* TransformerEngine's row-scaled (per-token) NVFP4 and its kernels' element factors */
    {.info = {.name = "te-row", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "main at d0067d0da (2026-08-22), since TE PR #2931 "
              "(c74e5aa37, 2026-05-07)", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py (row_scaled_nvfp4), "
                        "common/cast/nvfp4/specialized/quantize_transpose_nvfp4_tuned_1D.cuh (ROW_SCALED_NVFP4)",
              .reproduces = "TransformerEngine's row-scaled NVFP4 (NVFP4BlockScaling row_scaled_activation, "
                            "NVTE_NVFP4_ROW_SCALED_ACTIVATION=1: the forward activation): one FP32 amax per row, "
                            "torch.max(abs(row)) (NaN and Inf enter), S_enc = min(2688/row_amax, FLT_MAX) (the "
                            "kernel's compute_global_encode_scaling_factor_FP4: 1 for 0), then te's arithmetic per "
                            "row, 1x16 blocks; TE stores the row amax vector (fp4scope records each row's S_enc)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW}},
    {.info = {.name = "te-row-4over6", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "main at d0067d0da (2026-08-22)", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py "
                        "(_quantize_blockwise_4over6_reference with row_scaled_nvfp4)",
              .reproduces = "te-row with 4over6 (NVTE_NVFP4_4OVER6=activations or all, its defaults: E4M3 bound "
                            "256, MAE): S_enc = min(1536/row_amax, FLT_MAX) per row, the two candidates of te-4over6 "
                            "and the error ((q*s)*row_amax)/1536 - x"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_4OVER6, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW}},
    {.info = {.name = "miles-nvfp4-train", .formats = NV,
              .engine = "Miles (radixark/miles) NVFP4 RL trainer on TransformerEngine",
              .version = "Miles PR #1261 (1fca8f8b6) with TransformerEngine d0067d0da", .device = "any",
              .source = "miles: scripts/run_qwen3_30b_a3b.py, miles/utils/nvfp4.py; TE: as te-row-4over6",
              .reproduces = "the trainer side of Miles' NVFP4 RL recipe for the routed experts' activations "
                            "(NVTE_NVFP4_ROW_SCALED_ACTIVATION=1, NVTE_NVFP4_4OVER6=all, _E4M3_USE_256 default all, "
                            "_ERR_MODE=MSE, NVTE_USE_FAST_MATH=0; RHT, 2-D and SR off): te-row-4over6 with MSE; its "
                            "rollout counterpart is miles-nvfp4-rollout"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_4OVER6, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW,
            .nv_4over6_err = FP4S_4OVER6_MSE}},
    {.info = {.name = "te-4over6-fast", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "main at d0067d0da (2026-08-22)", .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/reference_nvfp4.py "
                        "(_ref_nvfp4_4over6_fp16_candidate), common/cast/nvfp4/quantize_4over6_nvfp4.cuh "
                        "(accumulate_fp16_scaled_error_pair)",
              .reproduces = "te-4over6 with NVTE_NVFP4_4OVER6_ERR_USE_FAST_MATH=1: each element's error term is "
                            "q*s_b (an FP16 product, exact) - x*S_enc in the scaled domain instead of "
                            "((q*s_b)*amax)/1536 - x; the same candidates"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_4OVER6, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .nv_4over6_math = FP4S_4OVER6_FP16}},
    {.info = {.name = "te@pre-2639", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "before TE PR #2639 (29b84c168, 2026-02-03)",
              .device = "cuda sm_100",
              .source = "transformer_engine/common/cast/nvfp4/specialized/quantize_transpose_nvfp4_tuned_1D.cuh "
                        "(compute_nvfp4_scaling_coefficient)",
              .reproduces = "TransformerEngine's tuned 1-D NVFP4 kernel (BF16 input) before PR #2639: the element "
                            "factor min(S_enc / s_b, FLT_MAX) (one division) where the reference takes "
                            "min(1 / (s_b * S_dec), FLT_MAX); scales as te. Documented arithmetic (sm_100 only; "
                            "no Blackwell GPU measured)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_SDIV, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "te-fast-math", .formats = NV,
              .engine = "NVIDIA TransformerEngine",
              .version = "main at d0067d0da (2026-08-22)", .device = "cuda sm_100",
              .source = "transformer_engine/common/cast/nvfp4/specialized/quantize_transpose_nvfp4_tuned_1D.cuh "
                        "(SCALING_COEFFICIENT_TYPE<true>), common/util/ptx_arch_spec.cuh "
                        "(mul_cvt_bf16_to_fp4_8x_round_to_nearest<bf16>)",
              .reproduces = "TransformerEngine's tuned 1-D NVFP4 kernel with NVTE_USE_FAST_MATH=1 (BF16 input): the "
                            "element factor rounded to BF16, bf16(min(S_enc / s_b, BF16_MAX)), and x times it "
                            "(fma.rn.f32.bf16, exact for BF16 x); scales as te. Documented arithmetic (sm_100 only)"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_BF16, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true}},
    {.info = {.name = "te-per-token@pr3045", .formats = NV,
              .engine = "NVIDIA TransformerEngine", .version = "PR #3045 head 690ffea4d (not merged at d0067d0da)",
              .device = "any",
              .source = "transformer_engine/pytorch/custom_recipes/quantization_nvfp4_per_token.py "
                        "(NVFP4QuantizerPerTokenRef), common/cast/nvfp4/quantize_nvfp4_per_token.cu",
              .reproduces = "the NVFP4PerTokenBlockScaling recipe of TE PR #3045 (NVTE_NVFP4_PER_TOKEN): row amax "
                            "torch.amax(abs(row)), S_enc = min(2688/max(row_amax, 1e-12), FLT_MAX) (1 for 0), s_b = "
                            "e4m3(min(amax_b*(S_enc*fl(1/6)), FLT_MAX)), element factor S_enc / s_b by one division "
                            "(0 for a zero scale), 1x16; it stores the raw row amax"},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_TE_SDIV0, .global_scale = FP4S_GS_ENCODE, .zero_in = FP4S_ZIN_POS,
            .tensor_amax = FP4S_TAMAX_ALL, .keep_neg_zero = true, .nv_scope = FP4S_SCOPE_ROW,
            .nv_tsrule = FP4S_TSR_FLOOR}},
    {.info = {.name = "modelopt", .formats = MX | NV,
              .engine = "NVIDIA Model-Optimizer (ModelOpt)", .version = "", .device = "any",
              .source = "modelopt/torch/quantization/qtensor/mxfp4_tensor.py, nvfp4_tensor.py",
              .reproduces = "NVIDIA Model-Optimizer modelopt/torch/quantization/qtensor: MXFP4 mxfp4_tensor.py "
                            "e = ceil(max(log2(amax/6), -127)) in fp32 (ceil-log2f), elements by E2M1_bounds "
                            "with ties toward zero, every exact zero -> code 8; NVFP4 nvfp4_tensor.py scale_2 = "
                            "amax/2688, s_b = e4m3(max(amax_b/(6*scale_2) or 1 if 0, 2^-9)), v = x/(s_b*scale_2) "
                            "by true division, RNE via searchsorted bounds (exact -0 -> 0)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_CEIL_LOG2F, .tie = FP4S_TIE_ZERO, .zero_in = FP4S_ZIN_NEG,
            .keep_neg_zero = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_MODELOPT, .global_scale = FP4S_GS_DECODE, .zero_in = FP4S_ZIN_POS,
            .keep_neg_zero = true}},
    {.info = {.name = "ggml", .formats = MX | NV,
              .engine = "ggml (llama.cpp)", .version = "", .device = "cpu",
              .source = "ggml/src/ggml-quants.c",
              .reproduces = "ggml ggml/src/ggml-quants.c: quantize_row_mxfp4_ref e = floorf(log2f(amax)) - 2 + "
                            "127 (LOG2F, 0 for amax 0; below 2^-125 ggml is undefined, fp4scope clamps to code "
                            "0), nearest kvalue with ties toward zero and never -0, NaN skipped by the amax loop "
                            "and coded 0, split packing per block; quantize_row_nvfp4_ref: no tensor scale, s_b "
                            "= ggml_fp32_to_ue4m3(amax_b/6), fp32 nearest-level search"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_LOG2F, .tie = FP4S_TIE_ZERO, .keep_neg_zero = false,
            .zero_in = FP4S_ZIN_POS, .packing = FP4S_PACK_SPLIT, .nonfinite = FP4S_NF_IGNORE,
            .mx_scale_is_ggml = true},
     .nv = {NVFP4_SPEC, .nv_recipe = FP4S_NV_GGML, .global_scale = FP4S_GS_NONE, .tie = FP4S_TIE_ZERO,
            .keep_neg_zero = false, .zero_in = FP4S_ZIN_POS, .packing = FP4S_PACK_SPLIT,
            .nonfinite = FP4S_NF_IGNORE}},
    {.info = {.name = "microxcaling", .formats = MX,
              .engine = "microsoft/microxcaling", .version = "", .device = "any",
              .source = "mx/mx_ops.py",
              .reproduces = "microsoft/microxcaling mx/mx_ops.py _quantize_mx: shared_exp = floor(log2(amax)) "
                            "in fp32 torch.log2 (log2f: the OCP text says floor, this source takes the "
                            "logarithm) - 2, clamped at -127 (zero block: log2(FP32_MIN_NORMAL) - 2 -> code 0); "
                            "elements _round_mantissa 'nearest' = floor(|x|+0.5) on the grid (ties away), "
                            "saturate_normals, -0 kept; NaN or Inf in a block makes the whole block NaN (the "
                            "default Python path, custom_cuda=False; its C++/CUDA extension reads the exponent "
                            "bits: --scale-rule floor); not modelled: its fp32 floor(|v|*2^s+0.5) codes |x/X| = "
                            "0x1.fffffep-3 as 0.5 (exact rha: 0)"},
     .mx = {MXFP4_SPEC, .mx_rule = FP4S_MX_LOG2F, .tie = FP4S_TIE_AWAY, .nonfinite = FP4S_NF_BLOCK_NAN,
            .keep_neg_zero = true}},
    {.info = {.name = "fp8-tensor", .formats = F8, .engine = "FP8 E4M3 baseline", .version = "", .device = "any",
              .source = "",
              .reproduces = "FP8 E4M3 baseline, one FP32 scale amax/448 for the tensor (1 if amax is 0), e4m3 "
                            "RNE satfinite of x/scale"},
     .f8 = {FP8_SPEC, .block = 1, .fp8_gran = FP4S_FP8_TENSOR, .keep_neg_zero = true}},
    {.info = {.name = "fp8-1x128", .formats = F8, .engine = "FP8 E4M3 baseline (DeepSeek-V3 style)",
              .version = "", .device = "any", .source = "",
              .reproduces = "FP8 E4M3 DeepSeek-V3 style activations: one FP32 scale amax/448 per 1x128 tile "
                            "(1 for a zero tile), e4m3 RNE satfinite of x/scale"},
     .f8 = {FP8_SPEC, .block = 128, .fp8_gran = FP4S_FP8_1x128, .keep_neg_zero = true}},
    {.info = {.name = "fp8-128x128", .formats = F8, .engine = "FP8 E4M3 baseline (DeepSeek-V3 style)",
              .version = "", .device = "any", .source = "",
              .reproduces = "FP8 E4M3 DeepSeek-V3 style weights: one FP32 scale amax/448 per 128x128 tile (1 "
                            "for a zero tile)"},
     .f8 = {FP8_SPEC, .block = 128, .fp8_gran = FP4S_FP8_128x128, .keep_neg_zero = true}},
    {.info = {.name = "deepseek", .formats = F8, .engine = "FP8 E4M3 baseline (DeepSeek-V3 style)",
              .version = "", .device = "any", .source = "", .alias_of = "fp8-1x128",
              .reproduces = "alias of fp8-1x128 (DeepSeek-V3 activations: 1x128 tiles, FP32 scale amax/448)"},
     .f8 = {FP8_SPEC, .block = 128, .fp8_gran = FP4S_FP8_1x128, .keep_neg_zero = true}},
};

#define NPROFILES (sizeof profiles / sizeof profiles[0])

size_t fp4s_profile_count(void) { return NPROFILES; }

const fp4s_profile_info *fp4s_profile_at(size_t i) { return i < NPROFILES ? &profiles[i].info : NULL; }

static const profile_row *find_row(const char *name)
{
    for (size_t i = 0; name && i < NPROFILES; i++)
        if (!strcmp(profiles[i].info.name, name)) return &profiles[i];
    return NULL;
}

const fp4s_profile_info *fp4s_profile_find(const char *name)
{
    const profile_row *r = find_row(name);
    return r ? &r->info : NULL;
}

/* ---- formats -------------------------------------------------------------------- */

static const struct {
    const char *name, *default_profile;
} formats[] = {
    [FP4S_MXFP4] = {"mxfp4", "ocp"},
    [FP4S_NVFP4] = {"nvfp4", "te"},
    [FP4S_FP8] = {"fp8", "fp8-1x128"},
};

static bool format_valid(fp4s_format f) { return f >= FP4S_MXFP4 && f <= FP4S_FP8; }

const char *fp4s_default_profile(fp4s_format fmt)
{
    return format_valid(fmt) ? formats[fmt].default_profile : "";
}

int fp4s_spec_profile(fp4s_spec *s, fp4s_format fmt, const char *profile)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "profile: missing spec");
    if (!format_valid(fmt)) return fp4s_error_set(FP4S_EINVAL, "profile: unknown format %d", (int)fmt);
    if (!profile || !*profile) profile = fp4s_default_profile(fmt);
    const profile_row *pr = find_row(profile);
    if (!pr) {
        char names[1024];
        fp4s_names(FP4S_NAMES_PROFILE, ", ", NULL, names, sizeof names);
        return fp4s_error_set(FP4S_EINVAL, "profile '%s': unknown (known: %s)", profile, names);
    }
    if (!(pr->info.formats & F(fmt)))
        return fp4s_error_set(FP4S_ENOTSUP, "profile '%s' does not define %s", profile, fp4s_format_name(fmt));
    *s = fmt == FP4S_MXFP4 ? pr->mx : fmt == FP4S_NVFP4 ? pr->nv : pr->f8;
    snprintf(s->profile, sizeof s->profile, "%s", pr->info.name);
    return 0;
}

int fp4s_spec_set_input_scale(fp4s_spec *s, float input_scale)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "input scale: missing spec");
    if (!(input_scale >= 0.0f) || isinf(input_scale))
        return fp4s_error_set(FP4S_EINVAL, "input scale %g: expected a finite value > 0 (0: none)",
                              (double)input_scale);
    if (s->format != FP4S_NVFP4)
        return fp4s_error_set(FP4S_EINVAL, "input scale: a static input scale is an NVFP4 option, not %s",
                              fp4s_format_name(s->format));
    fp4s_spec t = *s;
    t.nv_input_scale = input_scale;
    int rc = fp4s_spec_check(&t);
    if (rc) return rc;
    *s = t;
    return 0;
}

int fp4s_spec_check(const fp4s_spec *s)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "spec: missing");
    switch (s->format) {
    case FP4S_MXFP4:
        if (s->block != 32) return fp4s_error_set(FP4S_ENOTSUP, "spec: MXFP4 block must be 32, not %u", s->block);
        if (!fp4s_get_mx_rule_traits(s->mx_rule))
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown MX scale rule %d", (int)s->mx_rule);
        if (s->mx_zero_block_code == 0xFF)
            return fp4s_error_set(FP4S_EINVAL, "spec: the zero-block code cannot be the NaN code 0xFF");
        if ((unsigned)s->mx_elem >= FP4S_MX_ELEM_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown MXFP4 element factor %d", (int)s->mx_elem);
        if (s->tile2d) return fp4s_error_set(FP4S_ENOTSUP, "spec: 2-D tiles are an NVFP4 option");
        break;
    case FP4S_NVFP4: {
        if (s->block != 16) return fp4s_error_set(FP4S_ENOTSUP, "spec: NVFP4 block must be 16, not %u", s->block);
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        if (!rt) return fp4s_error_set(FP4S_EINVAL, "spec: unknown NVFP4 recipe %d", (int)s->nv_recipe);
        if ((unsigned)s->tie < FP4S_TIE_COUNT && !(rt->ties & (1u << s->tie))) {
            char ok[64];
            size_t k = 0;
            ok[0] = '\0';
            for (int t = 0; t < FP4S_TIE_COUNT && k < sizeof ok; t++)
                if (rt->ties & (1u << t))
                    k += (size_t)snprintf(ok + k, sizeof ok - k, "%s%s", k ? ", " : "", fp4s_tie_name((fp4s_tie)t));
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the %s NVFP4 recipe does not take tie rule %s (it takes %s%s)",
                                  rt->name, fp4s_tie_name(s->tie), ok,
                                  rt->elem == FP4S_NV_ELEM_SEARCH
                                      ? ": its elements are chosen by its own nearest-level search" : "");
        }
        if (s->tile2d && !rt->tile2d)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the %s NVFP4 recipe has no 2-D tiles", rt->name);
        /* a NaN block is stored as the NaN scale code 0x7F: a scale codec
         * without one would store a block that decodes to something else
         * (ggml's UE4M3 decodes 0x7F to 0) */
        if ((s->nonfinite == FP4S_NF_SCALE_NAN || s->nonfinite == FP4S_NF_BLOCK_NAN) &&
            rt->scale_codec != FP4S_NV_SC_E4M3)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: non-finite policy %s needs a block scale with a NaN code; "
                                  "the %s NVFP4 recipe's scale (%s) has none (0x7F decodes to 0): take nonfinite "
                                  "ignore (ggml's own) or cvt", fp4s_nonfinite_name(s->nonfinite), rt->name,
                                  fp4s_nv_scale_codec_name(rt->scale_codec));
        if ((unsigned)s->global_scale >= FP4S_GS_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown global-scale convention %d", (int)s->global_scale);
        if ((unsigned)s->tensor_amax >= FP4S_TAMAX_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown tensor-amax rule %d", (int)s->tensor_amax);
        if (fp4s_nv_recipe_is_4over6(s->nv_recipe)) {
            if ((unsigned)s->nv_4over6_err >= FP4S_4OVER6_COUNT)
                return fp4s_error_set(FP4S_EINVAL, "spec: unknown 4over6 error mode %d", (int)s->nv_4over6_err);
            if ((unsigned)s->nv_4over6_math >= FP4S_4OVER6_MATH_COUNT)
                return fp4s_error_set(FP4S_EINVAL, "spec: unknown 4over6 error arithmetic %d",
                                      (int)s->nv_4over6_math);
            if (s->nv_scale_bound && s->nv_scale_bound != 256 && s->nv_scale_bound != 448)
                return fp4s_error_set(FP4S_EINVAL, "spec: the 4over6 tensor-scale bound must be 256 or 448, not %u",
                                      s->nv_scale_bound);
            if (s->nv_input_scale > 0.0f && s->nv_4over6_math == FP4S_4OVER6_AMAX)
                return fp4s_error_set(FP4S_ENOTSUP, "spec: a static input scale with the 4over6 error through the "
                                      "amax is not defined (no engine runs it: take the decode or fp16 arithmetic)");
        } else if (s->nv_4over6_err || s->nv_scale_bound || s->nv_4over6_math) {
            return fp4s_error_set(FP4S_EINVAL, "spec: the 4over6 error mode, arithmetic and bound belong to the 4over6 "
                                  "recipes, not %s", rt->name);
        }
        if ((unsigned)s->nv_scope >= FP4S_SCOPE_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown scale scope %d", (int)s->nv_scope);
        if ((unsigned)s->nv_tsrule >= FP4S_TSR_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown tensor-scale rule %d", (int)s->nv_tsrule);
        if (!(s->nv_input_scale >= 0.0f) || isinf(s->nv_input_scale))
            return fp4s_error_set(FP4S_EINVAL, "spec: the static input scale must be a finite value > 0 (or 0: "
                                  "none), not %g", (double)s->nv_input_scale);
        if (rt->tscale == FP4S_NV_TS_NONE && (s->nv_scope || s->nv_tsrule || s->nv_input_scale > 0.0f))
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the %s NVFP4 recipe has no tensor scale: no row scales, "
                                  "tensor-scale rule or static input scale", rt->name);
        if (s->nv_scope == FP4S_SCOPE_ROW && s->tile2d)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: row-scaled NVFP4 has 1x16 blocks only (16x16 tiles span rows "
                                  "with different tensor scales)");
        if (s->nv_scope == FP4S_SCOPE_ROW && s->nv_input_scale > 0.0f)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: a static input scale is one scale for the tensor; row-scaled "
                                  "NVFP4 takes each row's amax");
        if (s->nv_tsrule != FP4S_TSR_RECIPE && s->nv_input_scale > 0.0f)
            return fp4s_error_set(FP4S_EINVAL, "spec: a tensor-scale rule makes the scale from an amax; a static "
                                  "input scale has none");
        if (s->sr && rt->elem == FP4S_NV_ELEM_SEARCH)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: stochastic rounding needs a recipe that scales the elements "
                                  "(%s searches its levels)", rt->name);
        if (s->sr && s->nv_recipe == FP4S_NV_TE_4OVER6)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: stochastic rounding with 4over6 is not defined (TE does not "
                                  "combine them)");
        break;
    }
    case FP4S_FP8:
        if ((unsigned)s->fp8_gran >= FP4S_FP8_GRAN_COUNT)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown FP8 granularity %d", (int)s->fp8_gran);
        if (s->fp8_gran == FP4S_FP8_TENSOR ? s->block != 1 : s->block != 128)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: FP8 %s needs block %d, not %u",
                                  fp4s_fp8_gran_name(s->fp8_gran), s->fp8_gran == FP4S_FP8_TENSOR ? 1 : 128,
                                  s->block);
        if (s->rht || s->sr || s->nv_4over6_err || s->nv_scale_bound || s->nv_4over6_math)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the RHT, stochastic rounding and 4over6 are FP4 options");
        if (s->nv_scope || s->nv_tsrule || s->nv_input_scale != 0.0f)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: row scales, tensor-scale rules and static input scales are "
                                  "NVFP4 options");
        return 0;
    default:
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown format %d", (int)s->format);
    }
    if ((unsigned)s->tie >= FP4S_TIE_COUNT)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown tie rule %d", (int)s->tie);
    if ((unsigned)s->zero_in >= FP4S_ZIN_COUNT)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown zero-sign rule %d", (int)s->zero_in);
    if ((unsigned)s->packing >= FP4S_PACK_COUNT)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown packing %d", (int)s->packing);
    if ((unsigned)s->nonfinite >= FP4S_NF_COUNT)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown non-finite policy %d", (int)s->nonfinite);
    if (s->format == FP4S_MXFP4 && (s->nv_4over6_err || s->nv_scale_bound || s->nv_4over6_math))
        return fp4s_error_set(FP4S_EINVAL, "spec: 4over6 is an NVFP4 recipe");
    if (s->format == FP4S_MXFP4 && (s->nv_scope || s->nv_tsrule || s->nv_input_scale != 0.0f))
        return fp4s_error_set(FP4S_ENOTSUP, "spec: row scales, tensor-scale rules and static input scales are "
                              "NVFP4 options (MXFP4 has no tensor scale)");
    if (!s->rht && s->rht_signs)
        return fp4s_error_set(FP4S_EINVAL, "spec: an RHT sign mask without the RHT");
    if (!s->sr && s->sr_seed)
        return fp4s_error_set(FP4S_EINVAL, "spec: a stochastic-rounding seed without stochastic rounding");
    return 0;
}

size_t fp4s_spec_row_align(const fp4s_spec *s)
{
    if (!s) return 1;
    if (s->format == FP4S_NVFP4 && s->tile2d) return 16;
    if (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_128x128) return 128;
    return 1;
}

size_t fp4s_spec_blocks_per_row(const fp4s_spec *s, size_t cols)
{
    if (!s || s->block == 0) return 0;
    return cols / s->block;
}

/* ---- names ---------------------------------------------------------------------- */

typedef struct name_row { const char *name, *aliases; } name_row;

static const name_row tie_names[FP4S_TIE_COUNT] = {{"rne", "even"}, {"rtz", "zero"}, {"rha", "away"}};
static const name_row zin_names[FP4S_ZIN_COUNT] = {{"sign", ""}, {"pos", ""}, {"neg", ""}};
static const name_row gs_names[FP4S_GS_COUNT] = {{"encode", ""}, {"decode", ""}, {"none", ""}};
static const name_row nf_names[FP4S_NF_COUNT] = {{"scale-nan", ""}, {"block-nan", ""}, {"ignore", ""},
                                                 {"cvt", ""}};
static const name_row pk_names[FP4S_PACK_COUNT] = {{"pairs", ""}, {"split", ""}};
static const name_row g8_names[FP4S_FP8_GRAN_COUNT] = {{"tensor", ""}, {"1x128", ""}, {"128x128", ""}};
static const name_row ta_names[FP4S_TAMAX_COUNT] = {{"finite", ""}, {"all", ""}, {"no-nan", ""}};
static const name_row me_names[FP4S_MX_ELEM_COUNT] = {{"exact", ""}, {"zero-at-0", ""}, {"ex2-ftz", ""},
                                                      {"rcp-ftz", ""}};
static const char *const sc_names[FP4S_NV_SC_COUNT] = {"e4m3", "ue4m3-ggml"};
static const name_row fm_names[FP4S_4OVER6_MATH_COUNT] = {{"amax", ""}, {"decode", ""}, {"fp16", "fast"}};
static const name_row scope_names[FP4S_SCOPE_COUNT] = {{"tensor", ""}, {"row", "token per-token"}};
static const name_row tsr_names[FP4S_TSR_COUNT] = {{"recipe", ""}, {"floor", ""}, {"rcp", ""}, {"div", ""},
                                                   {"div-zero", ""}};

/* The small name tables by kind (the others come from the trait tables). */
static const struct { const name_row *rows; size_t n; } name_tables[FP4S_NAMES_COUNT] = {
    [FP4S_NAMES_TIE] = {tie_names, FP4S_TIE_COUNT},
    [FP4S_NAMES_ZERO_IN] = {zin_names, FP4S_ZIN_COUNT},
    [FP4S_NAMES_GLOBAL_SCALE] = {gs_names, FP4S_GS_COUNT},
    [FP4S_NAMES_NONFINITE] = {nf_names, FP4S_NF_COUNT},
    [FP4S_NAMES_PACKING] = {pk_names, FP4S_PACK_COUNT},
    [FP4S_NAMES_FP8_GRAN] = {g8_names, FP4S_FP8_GRAN_COUNT},
    [FP4S_NAMES_TENSOR_AMAX] = {ta_names, FP4S_TAMAX_COUNT},
    [FP4S_NAMES_MX_ELEM] = {me_names, FP4S_MX_ELEM_COUNT},
    [FP4S_NAMES_4OVER6_MATH] = {fm_names, FP4S_4OVER6_MATH_COUNT},
    [FP4S_NAMES_SCOPE] = {scope_names, FP4S_SCOPE_COUNT},
    [FP4S_NAMES_TSRULE] = {tsr_names, FP4S_TSR_COUNT},
};

#define NAME_OF(table, v) ((unsigned)(v) < sizeof table / sizeof table[0] ? table[v].name : "?")

const char *fp4s_format_name(fp4s_format f) { return format_valid(f) ? formats[f].name : "?"; }
const char *fp4s_mx_rule_name(fp4s_mx_rule r) { return (unsigned)r < FP4S_MX_RULE_COUNT ? mx_rules[r].name : "?"; }
const char *fp4s_nv_recipe_name(fp4s_nv_recipe r)
{
    return (unsigned)r < FP4S_NV_RECIPE_COUNT ? nv_recipes[r].name : "?";
}
const char *fp4s_tie_name(fp4s_tie t) { return NAME_OF(tie_names, t); }
const char *fp4s_zero_in_name(fp4s_zero_in z) { return NAME_OF(zin_names, z); }
const char *fp4s_global_scale_name(fp4s_global_scale g) { return NAME_OF(gs_names, g); }
const char *fp4s_nonfinite_name(fp4s_nonfinite n) { return NAME_OF(nf_names, n); }
const char *fp4s_packing_name(fp4s_packing p) { return NAME_OF(pk_names, p); }
const char *fp4s_fp8_gran_name(fp4s_fp8_gran g) { return NAME_OF(g8_names, g); }
const char *fp4s_tensor_amax_name(fp4s_tensor_amax t) { return NAME_OF(ta_names, t); }
const char *fp4s_mx_elem_name(fp4s_mx_elem e) { return NAME_OF(me_names, e); }
const char *fp4s_4over6_math_name(fp4s_4over6_math m) { return NAME_OF(fm_names, m); }
const char *fp4s_nv_scope_name(fp4s_nv_scope sc) { return NAME_OF(scope_names, sc); }
const char *fp4s_nv_tsrule_name(fp4s_nv_tsrule r) { return NAME_OF(tsr_names, r); }

bool fp4s_nv_recipe_is_4over6(fp4s_nv_recipe r)
{
    return r == FP4S_NV_TE_4OVER6 || r == FP4S_NV_FLASHINFER_4OVER6 || r == FP4S_NV_FLASHINFER_4OVER6_EXACT;
}

unsigned fp4s_spec_scale_bound(const fp4s_spec *s)
{
    if (!s || s->format != FP4S_NVFP4 || !fp4s_nv_recipe_is_4over6(s->nv_recipe)) return 448;
    if (s->nv_scale_bound) return s->nv_scale_bound;
    return s->nv_recipe == FP4S_NV_TE_4OVER6 ? 256 : 448;
}
const char *fp4s_nv_scale_codec_name(fp4s_nv_scale_codec c)
{
    return (unsigned)c < FP4S_NV_SC_COUNT ? sc_names[c] : "?";
}

/* The i-th name of a kind and its aliases ("" if none); false past the end;
 * *name NULL for an entry the kind leaves out (a profile of another format). */
static bool kind_name(fp4s_name_kind kind, size_t i, const char **name, const char **aliases)
{
    *aliases = "";
    switch (kind) {
    case FP4S_NAMES_FORMAT:
        if (i >= 3) return false;
        *name = formats[FP4S_MXFP4 + i].name;
        return true;
    case FP4S_NAMES_MX_RULE:
        if (i >= FP4S_MX_RULE_COUNT) return false;
        *name = mx_rules[i].name;
        *aliases = mx_rules[i].aliases;
        return true;
    case FP4S_NAMES_NV_RECIPE:
        if (i >= FP4S_NV_RECIPE_COUNT) return false;
        *name = nv_recipes[i].name;
        *aliases = nv_recipes[i].aliases;
        return true;
    case FP4S_NAMES_PROFILE:
    case FP4S_NAMES_PROFILE_MXFP4:
    case FP4S_NAMES_PROFILE_NVFP4:
    case FP4S_NAMES_PROFILE_FP8:
        if (i >= NPROFILES) return false;
        *name = profiles[i].info.name;
        if (kind != FP4S_NAMES_PROFILE &&
            !(profiles[i].info.formats & F(FP4S_MXFP4 + (int)(kind - FP4S_NAMES_PROFILE_MXFP4))))
            *name = NULL;
        return true;
    default:
        if ((unsigned)kind >= FP4S_NAMES_COUNT || i >= name_tables[kind].n) return false;
        *name = name_tables[kind].rows[i].name;
        *aliases = name_tables[kind].rows[i].aliases;
        return true;
    }
}

size_t fp4s_names(fp4s_name_kind kind, const char *sep, const char *last, char *buf, size_t n)
{
    size_t len = 0, count = 0, k = 0;
    const char *name, *aliases;
    if (!sep) sep = ", ";
    if (!last) last = sep;
    if (buf && n) buf[0] = '\0';
    for (size_t i = 0; kind_name(kind, i, &name, &aliases); i++) count += name != NULL;
    for (size_t i = 0; kind_name(kind, i, &name, &aliases); i++) {
        if (!name) continue;
        const char *before = k == 0 ? "" : k + 1 == count ? last : sep;
        int w = snprintf(buf && len < n ? buf + len : NULL, buf && len < n ? n - len : 0, "%s%s%s%s%s",
                         before, name, *aliases ? " (" : "", aliases, *aliases ? ")" : "");
        if (w > 0) len += (size_t)w;
        k++;
    }
    return len;
}

/* s equals one of the space-separated words of list. */
static bool in_words(const char *s, const char *list)
{
    size_t n = strlen(s);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, s, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

int fp4s_name_index(fp4s_name_kind kind, const char *s)
{
    static const char *const what[FP4S_NAMES_COUNT] = {
        "format", "scale rule", "recipe", "tie rule", "zero-input rule", "global-scale convention",
        "non-finite policy", "packing", "FP8 granularity", "profile", "MXFP4 profile", "NVFP4 profile",
        "FP8 profile", "tensor amax", "MXFP4 element factor", "4over6 error arithmetic", "scale scope",
        "tensor-scale rule"};
    const char *name, *aliases;
    if ((unsigned)kind >= FP4S_NAMES_COUNT) return fp4s_error_set(FP4S_EINVAL, "names: unknown kind %d", (int)kind);
    if (!s) return fp4s_error_set(FP4S_EINVAL, "%s: missing value", what[kind]);
    for (size_t i = 0; kind_name(kind, i, &name, &aliases); i++)
        if (name && (!strcmp(s, name) || in_words(s, aliases))) return (int)i;
    char names[1024];
    fp4s_names(kind, ", ", " or ", names, sizeof names);
    return fp4s_error_set(FP4S_EINVAL, "%s '%s': expected %s", what[kind], s, names);
}

/* The parse helpers: the index as the enum value. */
#define PARSE(fn, type, kind, base) \
    int fn(const char *s, type *out) \
    { \
        if (!out) return fp4s_error_set(FP4S_EINVAL, #fn ": missing output"); \
        int i = fp4s_name_index(kind, s); \
        if (i < 0) return i; \
        *out = (type)(i + (base)); \
        return 0; \
    }

PARSE(fp4s_format_parse, fp4s_format, FP4S_NAMES_FORMAT, FP4S_MXFP4)
PARSE(fp4s_mx_rule_parse, fp4s_mx_rule, FP4S_NAMES_MX_RULE, 0)
PARSE(fp4s_nv_recipe_parse, fp4s_nv_recipe, FP4S_NAMES_NV_RECIPE, 0)
PARSE(fp4s_tie_parse, fp4s_tie, FP4S_NAMES_TIE, 0)

size_t fp4s_spec_describe(const fp4s_spec *s, char *buf, size_t n)
{
    char tmp[768];
    int len;
    if (!s) return 0;
    const char *prof = s->profile[0] ? s->profile : "(none)";
    switch (s->format) {
    case FP4S_MXFP4:
        len = snprintf(tmp, sizeof tmp,
                       "format=mxfp4 profile=%s block=%u scale=e8m0 scale_rule=%s zero_block_code=%u "
                       "scale_byte=%s round=%s neg_zero=%s zero_input=%s packing=%s nonfinite=%s%s%s",
                       prof, s->block, fp4s_mx_rule_name(s->mx_rule), s->mx_zero_block_code,
                       s->mx_scale_is_ggml ? "ggml" : "ocp", fp4s_tie_name(s->tie),
                       s->keep_neg_zero ? "keep" : "drop", fp4s_zero_in_name(s->zero_in),
                       fp4s_packing_name(s->packing), fp4s_nonfinite_name(s->nonfinite),
                       /* the element factor, where it is not the exact 2^-k (older outputs unchanged) */
                       s->mx_elem != FP4S_MX_ELEM_EXACT ? " elements=" : "",
                       s->mx_elem != FP4S_MX_ELEM_EXACT ? fp4s_mx_elem_name(s->mx_elem) : "");
        break;
    case FP4S_NVFP4: {
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        len = snprintf(tmp, sizeof tmp,
                       "format=nvfp4 profile=%s block=%u scale=%s recipe=%s global_scale=%s tiles=%s "
                       "round=%s neg_zero=%s zero_input=%s packing=%s nonfinite=%s tensor_amax=%s",
                       prof, s->block, rt ? fp4s_nv_scale_codec_name(rt->scale_codec) : "?",
                       fp4s_nv_recipe_name(s->nv_recipe), fp4s_global_scale_name(s->global_scale),
                       s->tile2d ? "16x16" : "1x16", fp4s_tie_name(s->tie),
                       s->keep_neg_zero ? "keep" : "drop", fp4s_zero_in_name(s->zero_in),
                       fp4s_packing_name(s->packing), fp4s_nonfinite_name(s->nonfinite),
                       fp4s_tensor_amax_name(s->tensor_amax));
        break;
    }
    case FP4S_FP8:
        len = snprintf(tmp, sizeof tmp,
                       "format=fp8 profile=%s element=e4m3 granularity=%s scale=fp32 amax/448 "
                       "(1 for zero tiles) round=%s nonfinite=nan-code",
                       prof, fp4s_fp8_gran_name(s->fp8_gran), fp4s_tie_name(s->tie));
        break;
    default:
        len = snprintf(tmp, sizeof tmp, "format=? (%d)", (int)s->format);
    }
    if (len < 0) len = 0;
    /* the engine options, when set */
    if (s->format == FP4S_NVFP4 && fp4s_nv_recipe_is_4over6(s->nv_recipe) && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " 4over6_err=%s 4over6_bound=%u%s%s",
                        s->nv_4over6_err == FP4S_4OVER6_MSE ? "mse" : "mae", fp4s_spec_scale_bound(s),
                        s->nv_4over6_math ? " 4over6_math=" : "",
                        s->nv_4over6_math ? fp4s_4over6_math_name(s->nv_4over6_math) : "");
    /* the scale scope, rule and static scale, where they are not the default (older outputs unchanged) */
    if (s->format == FP4S_NVFP4 && s->nv_scope && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " scope=%s", fp4s_nv_scope_name(s->nv_scope));
    if (s->format == FP4S_NVFP4 && s->nv_tsrule && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " tscale_rule=%s", fp4s_nv_tsrule_name(s->nv_tsrule));
    if (s->format == FP4S_NVFP4 && s->nv_input_scale > 0.0f && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " input_scale=%a", (double)s->nv_input_scale);
    if (s->rht && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " rht=16 rht_signs=0x%04x", s->rht_signs);
    if (s->sr && (size_t)len < sizeof tmp)
        len += snprintf(tmp + len, sizeof tmp - (size_t)len, " round=stochastic sr_seed=%u", s->sr_seed);
    if ((size_t)len >= sizeof tmp) len = (int)sizeof tmp - 1;
    if (buf && n) snprintf(buf, n, "%s", tmp);
    return (size_t)len;
}
