/* Quantizer specs and the named engine profiles.
 *
 * A profile fills every field of a fp4s_spec for one format; explicit command
 * line options then override single fields. Each entry of the table says which
 * engine, source file and behaviour it reproduces (man/fp4scope-formats.7 has
 * the long form). */
#include <fp4scope/spec.h>

#include <stdio.h>
#include <string.h>

#define F(fmt) (1u << (fmt))
#define MX F(FP4S_MXFP4)
#define NV F(FP4S_NVFP4)
#define F8 F(FP4S_FP8)

static const fp4s_profile_info profiles[] = {
    {"ocp", MX,
     "OCP MX v1.0 spec text: MXFP4 X = 2^(floor(log2 amax) - 2) from the exponent bits (FLOOR), "
     "E2M1 round-to-nearest-even satfinite, -0 kept, pairs packing, NaN in a block -> scale 0xFF, "
     "all-zero block -> E8M0 code 0"},
    {"ceil", MX,
     "decomposition paper (arXiv 2605.20402) convention = cuBLAS/TRT-LLM/FlashInfer cvt.rp.ue8m0 of amax/6: "
     "smallest k with amax <= 6*2^k (CEIL, never clips), E2M1 RNE, -0 kept, pairs, NaN -> 0xFF, zero block code 0"},
    {"torchao", MX | NV,
     "pytorch/ao torchao/prototype/mx_formats: MXFP4 mx_tensor.py to_mx ScaleCalculationMode.FLOOR "
     "(exponent bits - 2, clamp, NaN amax -> 0xFF, zero block code 0), f32_to_f4_unpacked RNE with the "
     "sign kept (-0 -> 8), pairs (not modelled: torchao divides code-0 blocks by 2^-126); NVFP4 nvfp4_tensor.py _nvfp4_quantize two-level: pts = amax/2688, "
     "s_b = e4m3(clamp((amax_b/6)/pts, 2^-6, 448)), v = x/(pts*s_b), clamp +-6, RNE"},
    {"torchao-rceil", MX,
     "pytorch/ao mx_tensor.py ScaleCalculationMode.RCEIL as its CUDA kernels compute it (cvt.rp.satfinite.ue8m0 "
     "of amax/6 = exact CEIL), otherwise as torchao; its PyTorch emulation _to_mx_rceil uses ceil(log2(amax/6)) "
     "(--scale-rule ceil-log2f) and scales code-0 blocks by 1"},
    {"even", MX,
     "pytorch/ao mx_tensor.py ScaleCalculationMode.EVEN: exponent of (bits(amax) + 2^21) - 2, "
     "otherwise as torchao"},
    {"vllm", MX | NV,
     "vLLM: MXFP4 kernel rounds amax at the 2nd mantissa bit (as 'even'); NVFP4 kernels follow TE's order "
     "but use rcp.approx on the GPU (not bit-reproducible on a CPU): 'te' is the exact CPU model"},
    {"te", MX | NV,
     "NVIDIA TransformerEngine pytorch/custom_recipes/reference_nvfp4.py: NVFP4 S_enc = min(2688/amax, FLT_MAX) "
     "(1 if 0), s_b = e4m3(min(amax_b*(S_enc*(1/6)), FLT_MAX)) satfinite, enc = min(1/(s_b*S_dec), FLT_MAX), "
     "q = E2M1 RNE satfinite of x*enc (exact -0 -> 0, negative -> 8), dequant q*s_b*S_dec, 1-D 1x16 "
     "(activations/gradients); MXFP4: the same file's pow_2_scales path, cast_to_e8 = 2^ceil(log2(amax/6)) in "
     "fp32 (ceil-log2f), clamp +-127, RNE thresholds"},
    {"te-2d", NV,
     "TransformerEngine NVFP4 weights: as te with 16x16 2-D tiles (one scale per tile, repeated on its 16 rows)"},
    {"modelopt", MX | NV,
     "NVIDIA Model-Optimizer modelopt/torch/quantization/qtensor: MXFP4 mxfp4_tensor.py e = ceil(max(log2(amax/6), "
     "-127)) in fp32 (ceil-log2f), elements by E2M1_bounds with ties toward zero, every exact zero -> code 8; "
     "NVFP4 nvfp4_tensor.py scale_2 = amax/2688, s_b = e4m3(max(amax_b/(6*scale_2) or 1 if 0, 2^-9)), "
     "v = x/(s_b*scale_2) by true division, RNE via searchsorted bounds (exact -0 -> 0)"},
    {"ggml", MX | NV,
     "ggml ggml/src/ggml-quants.c: quantize_row_mxfp4_ref e = floorf(log2f(amax)) - 2 + 127 (LOG2F, 0 for amax 0; "
     "below 2^-125 ggml is undefined, fp4scope clamps to code 0), nearest kvalue with ties toward zero and never -0, "
     "NaN skipped by the amax loop and coded 0, split packing per block; quantize_row_nvfp4_ref: no tensor scale, "
     "s_b = ggml_fp32_to_ue4m3(amax_b/6), fp32 nearest-level search"},
    {"microxcaling", MX,
     "microsoft/microxcaling mx/mx_ops.py _quantize_mx: shared_exp = floor(log2(amax)) in fp32 torch.log2 "
     "(log2f: the OCP text says floor, this source takes the logarithm) - 2, clamped at -127 (zero block: "
     "log2(FP32_MIN_NORMAL) - 2 -> code 0); elements _round_mantissa 'nearest' = floor(|x|+0.5) on the grid "
     "(ties away), saturate_normals, -0 kept; NaN or Inf in a block makes the whole block NaN "
     "(the default Python path, custom_cuda=False; its C++/CUDA extension reads the exponent bits: --scale-rule floor); "
     "not modelled: its fp32 floor(|v|*2^s+0.5) codes |x/X| = 0x1.fffffep-3 as 0.5 (exact rha: 0)"},
    {"fp8-tensor", F8,
     "FP8 E4M3 baseline, one FP32 scale amax/448 for the tensor (1 if amax is 0), e4m3 RNE satfinite of x/scale"},
    {"fp8-1x128", F8,
     "FP8 E4M3 DeepSeek-V3 style activations: one FP32 scale amax/448 per 1x128 tile (1 for a zero tile), "
     "e4m3 RNE satfinite of x/scale"},
    {"fp8-128x128", F8,
     "FP8 E4M3 DeepSeek-V3 style weights: one FP32 scale amax/448 per 128x128 tile (1 for a zero tile)"},
    {"deepseek", F8, "alias of fp8-1x128 (DeepSeek-V3 activations: 1x128 tiles, FP32 scale amax/448)"},
    {NULL, 0, NULL},
};

const fp4s_profile_info *fp4s_profile_list(void) { return profiles; }

const char *fp4s_default_profile(fp4s_format fmt)
{
    switch (fmt) {
    case FP4S_MXFP4: return "ocp";
    case FP4S_NVFP4: return "te";
    case FP4S_FP8: return "fp8-1x128";
    }
    return "";
}

static void base(fp4s_spec *s, fp4s_format fmt)
{
    memset(s, 0, sizeof *s);
    s->format = fmt;
    s->block = fmt == FP4S_MXFP4 ? 32 : fmt == FP4S_NVFP4 ? 16 : 128;
    s->tie = FP4S_TIE_EVEN;
    s->keep_neg_zero = true;
    s->zero_in = FP4S_ZIN_SIGN;
    s->packing = FP4S_PACK_PAIRS;
    s->nonfinite = FP4S_NF_SCALE_NAN;
    s->mx_rule = FP4S_MX_FLOOR;
    s->mx_zero_block_code = 0;
    s->mx_scale_is_ggml = false;
    s->nv_recipe = FP4S_NV_TE;
    s->global_scale = FP4S_GS_ENCODE;
    s->tile2d = false;
    s->fp8_gran = FP4S_FP8_1x128;
}

int fp4s_spec_profile(fp4s_spec *s, fp4s_format fmt, const char *profile)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "profile: missing spec");
    if (fmt != FP4S_MXFP4 && fmt != FP4S_NVFP4 && fmt != FP4S_FP8)
        return fp4s_error_set(FP4S_EINVAL, "profile: unknown format %d", (int)fmt);
    if (!profile || !*profile) profile = fp4s_default_profile(fmt);
    const fp4s_profile_info *pi = NULL;
    for (const fp4s_profile_info *p = profiles; p->name; p++)
        if (!strcmp(p->name, profile)) { pi = p; break; }
    if (!pi) {
        char names[512];
        size_t n = 0;
        names[0] = '\0';
        for (const fp4s_profile_info *p = profiles; p->name && n < sizeof names - 32; p++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", p->name);
        return fp4s_error_set(FP4S_EINVAL, "profile '%s': unknown (known: %s)", profile, names);
    }
    if (!(pi->formats & F(fmt)))
        return fp4s_error_set(FP4S_ENOTSUP, "profile '%s' does not define %s", profile,
                              fp4s_format_name(fmt));
    base(s, fmt);
    const char *p = pi->name;
    if (fmt == FP4S_MXFP4) {
        if (!strcmp(p, "ocp") || !strcmp(p, "torchao")) {
            s->mx_rule = FP4S_MX_FLOOR;
        } else if (!strcmp(p, "ceil") || !strcmp(p, "torchao-rceil")) {
            s->mx_rule = FP4S_MX_CEIL;
        } else if (!strcmp(p, "te")) {
            s->mx_rule = FP4S_MX_CEIL_LOG2F;
            s->zero_in = FP4S_ZIN_POS;
        } else if (!strcmp(p, "even") || !strcmp(p, "vllm")) {
            s->mx_rule = FP4S_MX_EVEN;
        } else if (!strcmp(p, "modelopt")) {
            s->mx_rule = FP4S_MX_CEIL_LOG2F;
            s->tie = FP4S_TIE_ZERO;
            s->zero_in = FP4S_ZIN_NEG;
        } else if (!strcmp(p, "ggml")) {
            s->mx_rule = FP4S_MX_LOG2F;
            s->tie = FP4S_TIE_ZERO;
            s->keep_neg_zero = false;
            s->zero_in = FP4S_ZIN_POS;
            s->packing = FP4S_PACK_SPLIT;
            s->nonfinite = FP4S_NF_IGNORE;
            s->mx_scale_is_ggml = true;
        } else if (!strcmp(p, "microxcaling")) {
            s->mx_rule = FP4S_MX_LOG2F;
            s->tie = FP4S_TIE_AWAY;
            s->nonfinite = FP4S_NF_BLOCK_NAN;
        }
    } else if (fmt == FP4S_NVFP4) {
        if (!strcmp(p, "te") || !strcmp(p, "vllm") || !strcmp(p, "te-2d")) {
            s->nv_recipe = FP4S_NV_TE;
            s->global_scale = FP4S_GS_ENCODE;
            s->zero_in = FP4S_ZIN_POS;
            s->tile2d = !strcmp(p, "te-2d");
        } else if (!strcmp(p, "torchao")) {
            s->nv_recipe = FP4S_NV_TORCHAO;
            s->global_scale = FP4S_GS_DECODE;
        } else if (!strcmp(p, "modelopt")) {
            s->nv_recipe = FP4S_NV_MODELOPT;
            s->global_scale = FP4S_GS_DECODE;
            s->zero_in = FP4S_ZIN_POS;
        } else if (!strcmp(p, "ggml")) {
            s->nv_recipe = FP4S_NV_GGML;
            s->global_scale = FP4S_GS_NONE;
            s->tie = FP4S_TIE_ZERO;
            s->keep_neg_zero = false;
            s->zero_in = FP4S_ZIN_POS;
            s->packing = FP4S_PACK_SPLIT;
            s->nonfinite = FP4S_NF_IGNORE;
        }
    } else {
        if (!strcmp(p, "fp8-tensor")) { s->fp8_gran = FP4S_FP8_TENSOR; s->block = 1; }
        else if (!strcmp(p, "fp8-128x128")) s->fp8_gran = FP4S_FP8_128x128;
        else s->fp8_gran = FP4S_FP8_1x128;
    }
    snprintf(s->profile, sizeof s->profile, "%s", p);
    return 0;
}

int fp4s_spec_check(const fp4s_spec *s)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "spec: missing");
    switch (s->format) {
    case FP4S_MXFP4:
        if (s->block != 32) return fp4s_error_set(FP4S_ENOTSUP, "spec: MXFP4 block must be 32, not %u", s->block);
        if ((unsigned)s->mx_rule > FP4S_MX_CEIL_LOG2F)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown MX scale rule %d", (int)s->mx_rule);
        if (s->mx_zero_block_code == 0xFF)
            return fp4s_error_set(FP4S_EINVAL, "spec: the zero-block code cannot be the NaN code 0xFF");
        if (s->tile2d) return fp4s_error_set(FP4S_ENOTSUP, "spec: 2-D tiles are an NVFP4 option");
        break;
    case FP4S_NVFP4:
        if (s->block != 16) return fp4s_error_set(FP4S_ENOTSUP, "spec: NVFP4 block must be 16, not %u", s->block);
        if ((unsigned)s->nv_recipe > FP4S_NV_GGML)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown NVFP4 recipe %d", (int)s->nv_recipe);
        if (s->nv_recipe == FP4S_NV_GGML && s->tie != FP4S_TIE_ZERO)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the ggml NVFP4 recipe chooses elements by ggml's own "
                                  "nearest-level search (ties toward zero); tie rule %s is not available",
                                  fp4s_tie_name(s->tie));
        if (s->nv_recipe == FP4S_NV_GGML && s->tile2d)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: the ggml NVFP4 recipe has no 2-D tiles");
        if ((unsigned)s->global_scale > FP4S_GS_NONE)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown global-scale convention %d", (int)s->global_scale);
        break;
    case FP4S_FP8:
        if ((unsigned)s->fp8_gran > FP4S_FP8_128x128)
            return fp4s_error_set(FP4S_EINVAL, "spec: unknown FP8 granularity %d", (int)s->fp8_gran);
        if (s->fp8_gran == FP4S_FP8_TENSOR ? s->block != 1 : s->block != 128)
            return fp4s_error_set(FP4S_ENOTSUP, "spec: FP8 %s needs block %d, not %u",
                                  fp4s_fp8_gran_name(s->fp8_gran), s->fp8_gran == FP4S_FP8_TENSOR ? 1 : 128,
                                  s->block);
        return 0;
    default:
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown format %d", (int)s->format);
    }
    if ((unsigned)s->tie > FP4S_TIE_AWAY) return fp4s_error_set(FP4S_EINVAL, "spec: unknown tie rule %d", (int)s->tie);
    if ((unsigned)s->zero_in > FP4S_ZIN_NEG)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown zero-sign rule %d", (int)s->zero_in);
    if ((unsigned)s->packing > FP4S_PACK_SPLIT)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown packing %d", (int)s->packing);
    if ((unsigned)s->nonfinite > FP4S_NF_IGNORE)
        return fp4s_error_set(FP4S_EINVAL, "spec: unknown non-finite policy %d", (int)s->nonfinite);
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

int fp4s_format_parse(const char *s, fp4s_format *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "format: missing value");
    if (!strcmp(s, "mxfp4")) { *out = FP4S_MXFP4; return 0; }
    if (!strcmp(s, "nvfp4")) { *out = FP4S_NVFP4; return 0; }
    if (!strcmp(s, "fp8")) { *out = FP4S_FP8; return 0; }
    return fp4s_error_set(FP4S_EINVAL, "format '%s': expected mxfp4, nvfp4 or fp8", s);
}

const char *fp4s_format_name(fp4s_format f)
{
    switch (f) {
    case FP4S_MXFP4: return "mxfp4";
    case FP4S_NVFP4: return "nvfp4";
    case FP4S_FP8: return "fp8";
    }
    return "?";
}

static const char *const rule_names[] = {"floor", "ceil", "even", "log2f", "rtn", "ceil-log2f"};

int fp4s_mx_rule_parse(const char *s, fp4s_mx_rule *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "scale rule: missing value");
    for (int i = 0; i <= FP4S_MX_CEIL_LOG2F; i++)
        if (!strcmp(s, rule_names[i])) { *out = (fp4s_mx_rule)i; return 0; }
    if (!strcmp(s, "rceil")) { *out = FP4S_MX_CEIL; return 0; }
    return fp4s_error_set(FP4S_EINVAL, "scale rule '%s': expected floor, ceil (rceil), even, log2f, rtn "
                          "or ceil-log2f", s);
}

const char *fp4s_mx_rule_name(fp4s_mx_rule r)
{
    return (unsigned)r <= FP4S_MX_CEIL_LOG2F ? rule_names[r] : "?";
}

const char *fp4s_nv_recipe_name(fp4s_nv_recipe r)
{
    switch (r) {
    case FP4S_NV_TE: return "te";
    case FP4S_NV_TORCHAO: return "torchao";
    case FP4S_NV_MODELOPT: return "modelopt";
    case FP4S_NV_GGML: return "ggml";
    }
    return "?";
}

const char *fp4s_global_scale_name(fp4s_global_scale g)
{
    switch (g) {
    case FP4S_GS_ENCODE: return "encode";
    case FP4S_GS_DECODE: return "decode";
    case FP4S_GS_NONE: return "none";
    }
    return "?";
}

const char *fp4s_nonfinite_name(fp4s_nonfinite n)
{
    switch (n) {
    case FP4S_NF_SCALE_NAN: return "scale-nan";
    case FP4S_NF_BLOCK_NAN: return "block-nan";
    case FP4S_NF_IGNORE: return "ignore";
    }
    return "?";
}

const char *fp4s_packing_name(fp4s_packing p)
{
    switch (p) {
    case FP4S_PACK_PAIRS: return "pairs";
    case FP4S_PACK_SPLIT: return "split";
    }
    return "?";
}

const char *fp4s_fp8_gran_name(fp4s_fp8_gran g)
{
    switch (g) {
    case FP4S_FP8_TENSOR: return "tensor";
    case FP4S_FP8_1x128: return "1x128";
    case FP4S_FP8_128x128: return "128x128";
    }
    return "?";
}

const char *fp4s_zero_in_name(fp4s_zero_in z)
{
    switch (z) {
    case FP4S_ZIN_SIGN: return "sign";
    case FP4S_ZIN_POS: return "pos";
    case FP4S_ZIN_NEG: return "neg";
    }
    return "?";
}

size_t fp4s_spec_describe(const fp4s_spec *s, char *buf, size_t n)
{
    char tmp[512];
    int len;
    if (!s) return 0;
    const char *prof = s->profile[0] ? s->profile : "(none)";
    switch (s->format) {
    case FP4S_MXFP4:
        len = snprintf(tmp, sizeof tmp,
                       "format=mxfp4 profile=%s block=%u scale=e8m0 scale_rule=%s zero_block_code=%u "
                       "scale_byte=%s round=%s neg_zero=%s zero_input=%s packing=%s nonfinite=%s",
                       prof, s->block, fp4s_mx_rule_name(s->mx_rule), s->mx_zero_block_code,
                       s->mx_scale_is_ggml ? "ggml" : "ocp", fp4s_tie_name(s->tie),
                       s->keep_neg_zero ? "keep" : "drop", fp4s_zero_in_name(s->zero_in),
                       fp4s_packing_name(s->packing), fp4s_nonfinite_name(s->nonfinite));
        break;
    case FP4S_NVFP4:
        len = snprintf(tmp, sizeof tmp,
                       "format=nvfp4 profile=%s block=%u scale=%s recipe=%s global_scale=%s tiles=%s "
                       "round=%s neg_zero=%s zero_input=%s packing=%s nonfinite=%s",
                       prof, s->block, s->nv_recipe == FP4S_NV_GGML ? "ue4m3-ggml" : "e4m3",
                       fp4s_nv_recipe_name(s->nv_recipe), fp4s_global_scale_name(s->global_scale),
                       s->tile2d ? "16x16" : "1x16", fp4s_tie_name(s->tie),
                       s->keep_neg_zero ? "keep" : "drop", fp4s_zero_in_name(s->zero_in),
                       fp4s_packing_name(s->packing), fp4s_nonfinite_name(s->nonfinite));
        break;
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
    if (buf && n) snprintf(buf, n, "%s", tmp);
    return (size_t)len;
}
