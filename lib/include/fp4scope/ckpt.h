/* Quantized checkpoints: the FP4 weights a rollout engine loads, read from
 * safetensors exactly as their producers wrote them (fp4-ckpt(1) names the
 * producer source and commit each layout detail was checked in).
 *
 * Layouts (per weight, found by the names of its tensors):
 *   ModelOpt NVFP4 (hf_quant_config.json quant_algo NVFP4 / W4A16_NVFP4):
 *     P.weight          U8 [..., N, K/2]   two E2M1 codes a byte, element 2i in
 *                                          the low nibble, 2i+1 in the high one
 *     P.weight_scale    F8_E4M3 [..., N, K/16]  block scales, row-major, not swizzled
 *     P.weight_scale_2  F32 scalar         decode scale amax/2688 (not its reciprocal)
 *     P.input_scale     F32 scalar         static activation decode scale (W4A4 only)
 *     value = e2m1(q) * (float(scale) * weight_scale_2), in float32
 *   compressed-tensors NVFP4 (format nvfp4-pack-quantized):
 *     P.weight_packed   U8 [N, K/2]        the same nibble order
 *     P.weight_scale    F8_E4M3 [N, K/16]
 *     P.weight_global_scale F32 [1]        ENCODE scale 2688/amax: the reciprocal
 *                                          of ModelOpt's weight_scale_2
 *     P.input_global_scale  F32 [1]        static activation encode scale (optional)
 *     value = e2m1(q) * (float(scale) / weight_global_scale), in float32
 *   MXFP4, gpt-oss (transformers' layout; OpenAI's own with ".blocks"/".scales"):
 *     P_blocks          U8 [E, N, K/32, 16] 32 codes per block, low nibble first
 *     P_scales          U8 [E, N, K/32]    E8M0 exponents (bias 127)
 *     value = e2m1(q) * 2^(scale - 127), exact (0xFF is NaN)
 * Leading dimensions of a ModelOpt or compressed-tensors weight (3-D expert
 * stacks) are read as experts; a weight is a matrix [N, K] per expert with
 * blocks along K, the reduction dimension.
 *
 * A checkpoint is one .safetensors file or a directory: the files its
 * model.safetensors.index.json maps (every name checked against the file it
 * names), else every *.safetensors in it. */
#ifndef FP4SCOPE_CKPT_H
#define FP4SCOPE_CKPT_H

#include <fp4scope/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_ckpt_layout {
    FP4S_CKPT_MODELOPT_NVFP4 = 1,
    FP4S_CKPT_CT_NVFP4 = 2,
    FP4S_CKPT_GPTOSS_MXFP4 = 3,
    FP4S_CKPT_CT_MXFP4 = 4      /* compressed-tensors mxfp4-pack-quantized: weight_packed and
                                   U8 E8M0 weight_scale [N, K/32], no global scale */
} fp4s_ckpt_layout;

/* "modelopt-nvfp4", "compressed-tensors-nvfp4", "gpt-oss-mxfp4", "compressed-tensors-mxfp4" */
FP4S_API const char *fp4s_ckpt_layout_name(fp4s_ckpt_layout l);

/* One quantized weight of a checkpoint (handed out by pointer; fields may be
 * added at the end). */
typedef struct fp4s_ckpt_weight {
    char name[256];          /* the module path: P without the suffixes */
    fp4s_ckpt_layout layout;
    fp4s_format format;      /* FP4S_NVFP4 or FP4S_MXFP4 */
    size_t experts;          /* product of the leading dimensions (1 for a matrix) */
    size_t rows, cols;       /* N and K of each expert's matrix (K unpacked) */
    double global_scale;     /* NVFP4: the decode scale s_dec (ModelOpt weight_scale_2,
                                1 / compressed-tensors weight_global_scale, in float32); 0 for MXFP4 */
    double global_stored;    /* NVFP4: the value as stored */
    double input_scale;      /* NVFP4: static activation decode scale (ModelOpt input_scale,
                                1 / input_global_scale); 0 when the checkpoint has none */
    char codes[272], scales[272], gscale[272], iscale[272]; /* the tensor names ("" if absent) */
} fp4s_ckpt_weight;

/* One tensor of the checkpoint as stored (every name, quantized or not). */
typedef struct fp4s_ckpt_tensor {
    char name[272];
    char dtype[16];          /* safetensors dtype string ("BF16", "U8", "F8_E4M3", ...) */
    int rank;
    uint64_t dims[8];        /* the first 8 dimensions */
    const char *file;        /* the .safetensors file holding it */
} fp4s_ckpt_tensor;

typedef struct fp4s_ckpt fp4s_ckpt;

/* Open a checkpoint (see above) and find its quantized weights. Malformed
 * scale tensors are refused here with FP4S_EFORMAT naming the file, the
 * tensor and the problem: a weight without its block scales or global scale,
 * a scale of the wrong dtype or shape, a global scale that is not a finite
 * positive number, codes whose shape does not match the scales'. */
FP4S_API int fp4s_ckpt_open(const char *path, fp4s_ckpt **out);
FP4S_API void fp4s_ckpt_close(fp4s_ckpt **c);

FP4S_API size_t fp4s_ckpt_nweights(const fp4s_ckpt *c);
FP4S_API const fp4s_ckpt_weight *fp4s_ckpt_weight_at(const fp4s_ckpt *c, size_t i);
/* The weight named `name` (module path), NULL if none. */
FP4S_API const fp4s_ckpt_weight *fp4s_ckpt_weight_find(const fp4s_ckpt *c, const char *name);
/* The decode scale of expert e of w (a checkpoint may store one per expert);
 * 0 for MXFP4. */
FP4S_API double fp4s_ckpt_global_scale(const fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e);
FP4S_API size_t fp4s_ckpt_ntensors(const fp4s_ckpt *c);
FP4S_API const fp4s_ckpt_tensor *fp4s_ckpt_tensor_at(const fp4s_ckpt *c, size_t i);
FP4S_API const fp4s_ckpt_tensor *fp4s_ckpt_tensor_find(const fp4s_ckpt *c, const char *name);

/* Read expert e of weight w: codes [rows][cols] (one E2M1 code per byte,
 * unpacked), scales [rows][cols/block] (E4M3 or E8M0 bytes); either may be
 * NULL. */
FP4S_API int fp4s_ckpt_read_codes(fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e, uint8_t *codes,
                                  uint8_t *scales);
/* Dequantize expert e of w into out [rows][cols] float32 with the producer's
 * arithmetic (above). */
FP4S_API int fp4s_ckpt_dequant(fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e, float *out);
/* Read a plain tensor (F32, F16, BF16, F64) as float32, all of it, into a new
 * array the caller frees; its shape in dims/rank as stored. */
FP4S_API int fp4s_ckpt_read_tensor(fp4s_ckpt *c, const char *name, float **data, size_t *count);

/* The tensor scale a spec's recipe uses when the checkpoint's global scale is
 * given (instead of one derived from the weights' amax): decode recipes take
 * s_dec = global_scale and s_enc = 1/s_dec, encode recipes (TE) s_enc =
 * 1/global_scale and s_dec = 1/s_enc, in float32. */
FP4S_API int fp4s_ckpt_tscale(const fp4s_spec *s, double global_scale, fp4s_tscale *ts);

/* What profile P makes of the trainer weights, against the checkpoint:
 * per expert of a weight. */
typedef struct fp4s_ckpt_check {
    size_t blocks, elements;       /* compared */
    size_t scale_diff;             /* block scale bytes that differ */
    size_t code_diff;              /* element codes that differ */
    size_t first_expert, first_row, first_block; /* the first block (in expert, row, block
                                                    order) whose scale or a code differs */
    bool any;                      /* a difference was found (first_* valid) */
    bool global_equal;             /* NVFP4: the checkpoint's global scale equals the
                                      profile's from the trainer amax (bits of float32) */
    double global_profile;         /* NVFP4: that value (decode convention) */
    double max_abs_err;            /* max |dequant(checkpoint) - trainer| */
    double rel_err;                /* ||dequant(checkpoint) - trainer|| / ||trainer|| */
    uint32_t reserved[8];          /* zero; room for fields added later */
} fp4s_ckpt_check;
FP4S_API size_t fp4s_ckpt_check_size(void);

/* How the trainer weights are quantized for the comparison. */
typedef enum fp4s_ckpt_gs {
    FP4S_CKPT_GS_CHECKPOINT = 0, /* with the checkpoint's global scale (default): block scales
                                    and codes are compared whatever the global scale's origin */
    FP4S_CKPT_GS_WEIGHTS = 1     /* with the profile's tensor scale from the trainer weights'
                                    amax (each expert its own) */
} fp4s_ckpt_gs;

/* Compare weight w of the checkpoint with trainer weights t [experts][rows][cols]
 * (float32) quantized by spec s (format of w), expert by expert. */
FP4S_API int fp4s_ckpt_compare(fp4s_ckpt *c, const fp4s_ckpt_weight *w, const float *t, const fp4s_spec *s,
                               fp4s_ckpt_gs gs, fp4s_ckpt_check *out);

/* ---- quantization configs ------------------------------------------------------------
 * What a rollout engine quantizes, from a checkpoint's quantization config:
 * hf_quant_config.json (ModelOpt: {"quantization": {"quant_algo", "group_size",
 * "exclude_modules"}}) or config.json's "quantization_config" (quant_method
 * "modelopt" with "quant_algo" and "ignore"; "compressed-tensors" with
 * "config_groups" and "ignore"; "mxfp4" (gpt-oss) with "modules_to_not_convert").
 * fp4s_qconfig_excludes applies vLLM's rule for the method (fp4-ckpt(1) names
 * the files and commit): ModelOpt: an entry equal to the layer's vLLM prefix
 * (q/k/v as qkv_proj and gate/up as gate_up_proj, whose shards must agree; the
 * experts of an MoE as one FusedMoE layer "...experts", excluded when an
 * entry naming experts contains that prefix), an entry that is a substring of
 * the prefix (vLLM keeps this rule for checkpoints of ModelOpt before 0.39),
 * or an fnmatch pattern matching it; compressed-tensors: an entry equal to the
 * name, or "re:REGEX" matching its start (Python's re.match, run through POSIX
 * extended regular expressions with \d \w \s translated); mxfp4: vLLM
 * quantizes the experts of MoE layers only. */
typedef enum fp4s_qconfig_method {
    FP4S_QCFG_MODELOPT = 1,
    FP4S_QCFG_COMPRESSED_TENSORS = 2,
    FP4S_QCFG_MXFP4 = 3
} fp4s_qconfig_method;

typedef struct fp4s_qconfig fp4s_qconfig;

/* Read a config (a directory: its hf_quant_config.json, else its config.json).
 * FP4S_EFORMAT naming the file and key for a config that is not one of the
 * above, a list that is not a list of strings, or a "re:" entry that does not
 * compile. */
FP4S_API int fp4s_qconfig_open(const char *path, fp4s_qconfig **out);
FP4S_API void fp4s_qconfig_close(fp4s_qconfig **q);
FP4S_API fp4s_qconfig_method fp4s_qconfig_method_of(const fp4s_qconfig *q);
FP4S_API const char *fp4s_qconfig_method_name(fp4s_qconfig_method m); /* "modelopt", ... */
FP4S_API const char *fp4s_qconfig_path(const fp4s_qconfig *q);        /* the file read */
FP4S_API const char *fp4s_qconfig_algo(const fp4s_qconfig *q);        /* quant_algo or format ("" if none) */
FP4S_API const char *fp4s_qconfig_key(const fp4s_qconfig *q);         /* the exclude list's key */
/* Activations quantized with a static (calibrated) global scale, per the
 * config (ModelOpt NVFP4 W4A4, compressed-tensors input_activations dynamic
 * false); weight-only methods (W4A16) have no activation quantization. */
FP4S_API bool fp4s_qconfig_static_input(const fp4s_qconfig *q);
FP4S_API bool fp4s_qconfig_weight_only(const fp4s_qconfig *q);
FP4S_API size_t fp4s_qconfig_nexclude(const fp4s_qconfig *q);
FP4S_API const char *fp4s_qconfig_exclude_at(const fp4s_qconfig *q, size_t i);
/* Is the entry a pattern (fnmatch characters, or "re:")? */
FP4S_API bool fp4s_qconfig_exclude_is_pattern(const fp4s_qconfig *q, size_t i);

/* The layer as vLLM names it: q_proj/k_proj/v_proj -> qkv_proj, gate_proj/
 * up_proj -> gate_up_proj, w1/w3 -> w13 ... "experts.<e>.<proj>" -> "experts"
 * (one FusedMoE layer). Writes at most n bytes; returns the length needed. */
FP4S_API size_t fp4s_qconfig_engine_name(const char *module, char *buf, size_t n);

/* Does the config keep `module` (an HF module path: "model.layers.0.self_attn.q_proj")
 * unquantized? 0 no, 1 yes with *entry the index of the matching entry (or
 * SIZE_MAX for a rule of the method itself: mxfp4's non-expert layers), and
 * FP4S_EINVAL when vLLM would refuse the model: the shards of a fused layer
 * disagree (the detail names them). `modules` is every linear module of the
 * model (for the shards). */
FP4S_API int fp4s_qconfig_excludes(const fp4s_qconfig *q, const char *module, const char *const *modules,
                                   size_t nmodules, size_t *entry);
/* Does entry i match module (by the method's rule, as above, without the
 * fused grouping)? */
FP4S_API bool fp4s_qconfig_entry_matches(const fp4s_qconfig *q, size_t i, const char *module);

#ifdef __cplusplus
}
#endif
#endif
