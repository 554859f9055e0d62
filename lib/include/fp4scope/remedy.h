/* Remedies for 4-bit GEMMs: apply a fix to one linear site Y = f(X) W^T and
 * measure what it leaves (fp4-remedy(1)).
 *
 * X [M, K] are activations (tokens x input channels), W [N, K] the weight of
 * the linear layer, Y [M, N]. Qa is the activation quantizer (a fp4s_spec,
 * 1-D blocks along K), Qw the weight quantizer (its own spec, e.g. NVFP4 te
 * with 16x16 2-D scaling: fp4s_remedy_weight_spec). Products are computed
 * with the BLAS (cblas_sgemm): FP32 accumulation of the exact dequantized
 * values, which is what 4-bit tensor cores compute. Inputs must be finite.
 *
 * ---- the remedy list grammar (fp4s_remedy_list_parse) ----
 * The names, parameters, defaults and the order in which the components of
 * an item apply are fp4-remedy(1), "The remedy list" (written once, there);
 * fp4s_remedy_help() prints the summary. Below: the exact arithmetic of
 * each component. mbs, of, keep, 4over6 and sr modify the operands named by
 * fp4s_remedy.operands (both by default); aqn modifies what its TARGET
 * names; rac the activation.
 *
 * aqn (after QeRL): channel-wise Gaussian noise before quantizing. Each
 *   input channel k gets the multiplier g_k = (float)(1 + SIGMA * z_k), z_k
 *   standard normal; TARGET gain multiplies X[:, k] by g_k (noise folded into
 *   the norm gain that feeds X), weight multiplies W[:, k] by g_k (the same
 *   noise folded into the weight), elem multiplies each W[n, k] by its own
 *   (float)(1 + SIGMA * z_{n,k}). The products are fp32 multiplications.
 *   z comes from fp4s_remedy_normal(SEED, stream, i): stream 1, i = k for
 *   gain and weight; stream 2, i = n K + k for elem. No GEMM cost (folded in
 *   once per weight sync).
 * mbs: the operand is cut into macro units of G consecutive elements along K
 *   (times 16 rows when the spec uses 2-D tiles, so that a unit holds whole
 *   tiles; the last unit of a row may be shorter). Each unit u gets a
 *   prescale: x' = x / d_u (max) or x' = x * c_u (mse) in fp32, the
 *   quantizer runs on x', and the dequantized value is Q(x') * d_u.
 *     max (MXFP4): with a = max |x| over the unit, k' = floor(log2(a / 6)),
 *       d_u = 1 + m/256 with m the smallest integer in [0, 255] such that
 *       6 * 2^k' * d_u >= a (if none, k' + 1 and m = 0). Stored: the 8 bits
 *       m per unit (the 8-bit mantissa of an effective scale 2^k (1 + m/256)).
 *       The unit maximum lands at 6 times its block's scale within one part
 *       in 256, so it is reproduced to within that part (RNE sends it to 6).
 *       Needs a scale rule that gives a block with amax 6 * 2^k the scale
 *       2^k (floor, ceil, even, ceil-log2f); FP4S_ENOTSUP otherwise and for
 *       NVFP4, whose E4M3 scales are not powers of two.
 *     mse: c_u = (float)2^(-j/16), d_u = (float)2^(j/16), j in [0, 15] the
 *       one whose unit error sum (Q(x') d_u - x)^2 (double) is smallest,
 *       ties to the smaller j. Stored: the 4 bits j per unit. NVFP4: the
 *       tensor scale is taken from the unscaled operand (c_u <= 1, so no
 *       value exceeds it).
 *   Cost: the per-unit factors multiply partial sums of the GEMM, 2 M N
 *   ceil(K/G) FP32 operations (a GEMM split along K where the hardware has
 *   no such scales).
 * keep:K: in each block (1-D along K, the spec's block size; with 2-D tiles
 *   each 1 x 16 row segment) the K entries of largest |x| (ties to the lower
 *   index) are kept as bf16(x) (RNE) and set to 0 in the input of the
 *   quantizer, which then scales the block (and, NVFP4, the tensor) without
 *   them. Stored: 16 bits and the index within the block per kept entry.
 *   Cost: a sparse BF16 product, 2 N nnz (activation) and 2 M nnz (weight).
 * of:ALPHA (outlier fallback): q1 = the value after mbs/keep and the
 *   quantizer, r = x - q1 (fp32), q2 = the same pipeline without keep on r
 *   (NVFP4: r gets its own tensor scale), value q1 + ALPHA q2 in fp32. Cost:
 *   a second FP4 operand: every pair of FP4 terms of the two operands is one
 *   more FP4 GEMM (2 for one operand, 4 for both).
 * 4over6, rht, sr: the operands' specs become the engine's (fp4s_spec
 *   nv_recipe te-4over6, rht, sr); 4over6 and sr follow `operands`, rht
 *   always rotates both (X R)(W R)^T = X W^T, and everything else of the item
 *   runs in the rotated coordinates. 4over6 needs an NVFP4 TE-recipe spec;
 *   specs with rht set (te-rht) are refused (FP4S_ENOTSUP): the rotation is
 *   the item rht, which turns both operands together.
 * rac:R (residual activation compensation): with X^ the activation after the
 *   steps above (Qa(X) for rac alone) and E = X - X^ (exact; its norms the
 *   squares in double summed exactly, in fixed point, and rounded once, so
 *   their order does not matter), rank the channels by ||E_k||^2 over the tokens of the tensor (or
 *   of each tile of rac_tile_rows tokens), largest first, ties to the lower
 *   index, and keep I = the first ceil(R K). E_I is E restricted to I,
 *   compacted in ascending channel order (or rank order: rac_order), and
 *   W^_I the matching columns of the weight operand. RESID:
 *     bf16: Y += bf16(E_I) W^_I^T                     (a BF16 GEMM of width |I|)
 *     fp4:  Y += Qa(E_I) W^_I^T, E_I zero-padded to a block multiple |I|_p
 *           and quantized with the activation spec and its own tensor scale
 *     aug:  one widened GEMM [Qa(X), Qa(E_I)] x [Qw(W), Qw(W_I)]^T: E_I uses
 *           X's tensor scale, and W_I (the raw weight columns, padded to
 *           |I|_p) is quantized again with the weight spec and W's tensor
 *           scale, so its block scales are those of the compacted columns.
 *   rac-rand draws I with fp4s_remedy_uniform(SEED, 256 + tile, i) in a
 *   partial Fisher-Yates shuffle (step i swaps position i with i + floor(u_i
 *   (K - i))). Cost: 2 M N |I|_p more FP4 FLOPs (bf16: 2 M N |I| BF16).
 *
 * Everything above is deterministic: the same inputs, remedy and specs give
 * the same Y bit for bit on any number of fp4scope threads (the BLAS must
 * not split K across threads either; OpenBLAS's sgemm does not).
 *
 * ---- on the GPU (fp4s_remedy_eval_opts.device) ----
 * With FP4S_DEVICE_CUDA the evaluation's GEMMs run through cuBLAS (FP32
 * products and sums in its pedantic mode, no TF32; the float64 references
 * in FP64) and rac's norms, channel choice and E_I through CUDA kernels.
 * Bit for bit the CPU's: the operands (the quantizers, keep, mbs, of, aqn
 * and rht run on the CPU as above), the residual norms (sums of the double
 * squares in exact fixed-point accumulators, rounded once, on both
 * devices), the channels chosen, E_I, and everything computed from them
 * without a GEMM (act_rel_error, weight_rel_error, noise_rel, the
 * decompositions and the dead-zone split). Only to a rounding bound: Y and
 * the references, because cuBLAS adds the K products in another order than
 * the CPU's BLAS (each side is within gamma_K sum_k |a_ik| |b_jk| of the
 * exact product, gamma_K = K u / (1 - K u), u = 2^-24 for FP32 and 2^-53 for
 * FP64), and so the errors computed from them (out_rel_error*, err2_*,
 * ref2_*, act_only/weight_only_rel_error, sr_bias) and the time fields. The
 * other entry points (fp4s_rlinear_*, fp4s_remedy_linear, compare, logits)
 * run on the CPU. */
#ifndef FP4SCOPE_REMEDY_H
#define FP4SCOPE_REMEDY_H

#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_remedy_kind {
    FP4S_RK_ROLLOUT = 0, /* Qa(X) Qw(W)^T with the components below ("none": none of them) */
    FP4S_RK_BF16    = 1, /* trainer "bf16": X W^T */
    FP4S_RK_WFQ     = 2, /* trainer "wfq": X Qw(W)^T */
    FP4S_RK_W4A4QAT = 3, /* trainer "w4a4qat": Qa(X) Qw(W)^T */
    FP4S_RK_BF16_ROLLOUT = 4 /* "bf16-rollout": the site kept in BF16 in the rollout, X W^T */
} fp4s_remedy_kind;

/* The trainer kinds compute with the trainer's activations X_t. */
static inline bool fp4s_remedy_is_trainer(const fp4s_remedy_kind k)
{
    return k == FP4S_RK_BF16 || k == FP4S_RK_WFQ || k == FP4S_RK_W4A4QAT;
}

typedef enum fp4s_rac_resid {
    FP4S_RAC_FP4  = 0, /* Qa(E_I) with its own tensor scale (default) */
    FP4S_RAC_BF16 = 1, /* bf16(E_I) */
    FP4S_RAC_AUG  = 2  /* one widened FP4 GEMM: E_I with X's tensor scale, W_I re-quantized */
} fp4s_rac_resid;

typedef enum fp4s_rac_order {
    FP4S_RAC_ORDER_INDEX = 0, /* E_I compacted in ascending channel order (default) */
    FP4S_RAC_ORDER_RANK  = 1  /* in rank order (largest residual first): like channels share blocks */
} fp4s_rac_order;

typedef enum fp4s_mbs_rule {
    FP4S_MBS_AUTO = 0, /* max for MXFP4, mse for NVFP4 (what "mbs:G" means) */
    FP4S_MBS_MAX  = 1,
    FP4S_MBS_MSE  = 2
} fp4s_mbs_rule;

typedef enum fp4s_aqn_target {
    FP4S_AQN_GAIN   = 0, /* X[:, k] *= g_k (the norm gain feeding X; default) */
    FP4S_AQN_WEIGHT = 1, /* W[:, k] *= g_k */
    FP4S_AQN_ELEM   = 2  /* W[n, k] *= g_{n,k} */
} fp4s_aqn_target;

typedef enum fp4s_operands {
    FP4S_OPERANDS_BOTH   = 0, /* mbs, of and keep apply to X and W (default) */
    FP4S_OPERANDS_ACT    = 1, /* to X only */
    FP4S_OPERANDS_WEIGHT = 2  /* to W only */
} fp4s_operands;

#define FP4S_REMEDY_TEXT 128

/* One item of a remedy list: a value struct (copy it freely). Fill it with
 * fp4s_remedy_parse, or fp4s_remedy_defaults and the fields. */
typedef struct fp4s_remedy {
    fp4s_remedy_kind kind;
    char text[FP4S_REMEDY_TEXT]; /* the item as written ("" when built by hand) */
    /* rac, rac-rand */
    double rac_ratio;            /* R in (0, 1]; 0 = no rac */
    fp4s_rac_resid rac_resid;
    bool rac_random;             /* rac-rand */
    uint64_t rac_seed;           /* rac-rand seed (default 1) */
    size_t rac_tile_rows;        /* 0: one selection per tensor (default); else per tile of this many tokens */
    fp4s_rac_order rac_order;
    /* mbs */
    uint32_t mbs_group;          /* G; 0 = no mbs */
    fp4s_mbs_rule mbs_rule;
    /* of */
    bool of;
    double of_alpha;             /* default 0.5 */
    /* keep */
    uint32_t keep;               /* 0 = no keep */
    /* aqn */
    bool aqn;
    double aqn_sigma;
    uint64_t aqn_seed;           /* default 1 */
    fp4s_aqn_target aqn_target;
    /* the operands mbs, of, keep, 4over6 and sr modify */
    fp4s_operands operands;
    /* engine remedies */
    bool e4over6;                /* 4over6 */
    fp4s_4over6_err e4over6_err; /* default MAE */
    uint16_t e4over6_bound;      /* 0 (256) or 448 */
    bool rht;
    uint16_t rht_signs;          /* default FP4S_RHT_TE_SIGNS */
    bool sr;
    uint32_t sr_seed;            /* default 1 */
    uint32_t sr_seeds;           /* seeds the evaluation averages over for sr_bias (default 8) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_remedy;
FP4S_API size_t fp4s_remedy_size(void);

/* "none" with every parameter at its default. */
FP4S_API void fp4s_remedy_defaults(fp4s_remedy *r);

/* Parse one item ("rac:0.25:bf16", "mbs:128+of:0.5"). FP4S_EINVAL for an
 * unknown name or a malformed item, FP4S_ERANGE for a parameter out of its
 * range; the detail names the item, the parameter and the range. */
FP4S_API int fp4s_remedy_parse(const char *item, fp4s_remedy *r);

/* Parse a comma-separated list into a malloc'ed array (the caller frees it).
 * Errors as fp4s_remedy_parse, and FP4S_EEMPTY for an empty list or item. */
FP4S_API int fp4s_remedy_list_parse(const char *list, fp4s_remedy **out, size_t *n);

/* Canonical text with every parameter ("rac:0.25:fp4", "aqn:0.01:1:gain");
 * writes at most n bytes, returns the length needed. Parsing it gives the
 * same remedy. */
FP4S_API size_t fp4s_remedy_describe(const fp4s_remedy *r, char *buf, size_t n);

/* Is r the plain rollout item "none" (Qa(X) Qw(W)^T, naive W4A4): the
 * rollout kind with no component? The one definition the tools use. */
FP4S_API bool fp4s_remedy_is_plain(const fp4s_remedy *r);

/* The grammar's summary (what fp4-remedy --list-remedies prints), from the
 * same rows the parser uses: writes at most n bytes, returns the length
 * needed. */
FP4S_API size_t fp4s_remedy_help(char *buf, size_t n);

/* The label of a result: r->text when set, else the canonical text. */
FP4S_API const char *fp4s_remedy_label(const fp4s_remedy *r);

/* Check a remedy against the quantizers and the reduction size K (block
 * multiples, keep below the block size, mbs max only with power-of-two
 * scales, remedies only for MXFP4/NVFP4: "none" and the trainer kinds also
 * take FP8 specs). FP4S_ERANGE / FP4S_ENOTSUP / FP4S_ESHAPE with a detail
 * naming the remedy. */
FP4S_API int fp4s_remedy_check(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt,
                               size_t k);

/* The weight quantizer that goes with an activation spec: a copy of it with
 * 2-D 16x16 scaling when tile2d = 1, 1-D when 0, and for -1 (auto) 2-D for
 * NVFP4 with the TransformerEngine recipe (TE's weight recipe), else 1-D;
 * NVFP4 row scales and a static input scale stay with the activations (the
 * weight takes one tensor scale from its own amax). */
FP4S_API void fp4s_remedy_weight_spec(const fp4s_spec *act, int tile2d, fp4s_spec *w);

/* The counter-based generator of the remedies (splitmix64's finalizer mix):
 * key = mix(seed ^ mix(stream + 0x632BE59BD9B4E019)),
 * u = ((mix(key + (i + 1) * 0x9E3779B97F4A7C15) >> 11) + 0.5) * 2^-53 in (0, 1);
 * normal(i) = sqrt(-2 ln u(2i)) cos(2 pi u(2i + 1)) (Box-Muller, double). */
FP4S_API double fp4s_remedy_uniform(uint64_t seed, uint64_t stream, uint64_t i);
FP4S_API double fp4s_remedy_normal(uint64_t seed, uint64_t stream, uint64_t i);

/* ---- the cost of one remedied GEMM -------------------------------------------- */
/* FLOPs by the units that run them (a multiply-add is 2), bytes that the GEMM
 * reads and writes (operand codes, scales and side data; the output in BF16),
 * and the storage of each operand in bits per element. "base" is the plain
 * W4A4 GEMM of the same shape with the same specs. */
typedef struct fp4s_remedy_cost {
    size_t m, n, k;
    double flops_fp4;       /* FP4 x FP4 tensor-core FLOPs */
    double flops_fp8;       /* FP8 (an FP8 spec) */
    double flops_bf16;      /* BF16 GEMMs (bf16 residuals, kept entries, trainer kinds) */
    double flops_fp32;      /* FP32 vector work in the GEMM (mbs partial-sum scaling) */
    double flops_base;      /* 2 M N K of the W4A4 GEMM */
    double flops_extra;     /* all of the above minus flops_base */
    double bytes_base, bytes, bytes_extra;
    double act_bits, weight_bits;             /* bits per element of each operand */
    double act_extra_bits, weight_extra_bits; /* over the base quantizer's */
    size_t rac_channels;    /* |I| (per tile: the same for every tile) */
    size_t rac_padded;      /* |I|_p */
    size_t rac_tiles;       /* selections made (1 per tensor) */
    double kept;            /* entries kept in BF16 (both operands) */
    double gemm_seconds;    /* wall time spent in BLAS calls (measured) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_remedy_cost;
FP4S_API size_t fp4s_remedy_cost_size(void);

/* ---- one linear layer with a remedy ------------------------------------------ */
typedef struct fp4s_rlinear fp4s_rlinear;

/* Prepare a linear layer: check the remedy and specs (fp4s_remedy_check),
 * copy W [n, k] (row stride ldw) and quantize it with the weight-side
 * remedies once. The handle keeps its own copies of everything; W may be
 * freed after the call. Weight-side noise (aqn weight/elem) is drawn here:
 * open a new handle for a new seed or sigma. */
FP4S_API int fp4s_rlinear_open(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt,
                               const float *W, size_t n, size_t k, size_t ldw, fp4s_rlinear **out);
FP4S_API void fp4s_rlinear_close(fp4s_rlinear **L);

/* Y [m, n] (row stride ldy) = f(X) W^T for X [m, k] (row stride ldx) with
 * the remedy. cost may be NULL. The handle is not modified: one handle may
 * serve several threads at once (each call allocates its own scratch; the
 * BLAS must be thread-safe, as OpenBLAS's pthread build is). */
FP4S_API int fp4s_rlinear_forward(const fp4s_rlinear *L, const float *X, size_t m, size_t ldx,
                                  float *Y, size_t ldy, fp4s_remedy_cost *cost);

/* The weight operand of the main GEMM [n, k] (Qw(W) with the weight-side
 * remedies, W itself for bf16), owned by the handle: for a trainer's
 * straight-through fake quantization. */
FP4S_API const float *fp4s_rlinear_weight(const fp4s_rlinear *L);

/* One call: open, forward, close. */
FP4S_API int fp4s_remedy_linear(const fp4s_remedy *r, const fp4s_spec *act, const fp4s_spec *wt,
                                const float *X, size_t m, size_t ldx,
                                const float *W, size_t n, size_t k, size_t ldw,
                                float *Y, size_t ldy, fp4s_remedy_cost *cost);

/* The cost of a remedy on an [m, k] x [n, k]^T GEMM without running it,
 * assuming every tile selects ceil(R k) channels and keep:K keeps K entries
 * per block. */
FP4S_API int fp4s_remedy_cost_predict(const fp4s_remedy *r, const fp4s_spec *act,
                                      const fp4s_spec *wt, size_t m, size_t n, size_t k,
                                      fp4s_remedy_cost *cost);

/* ---- accelerator profiles and the GEMM time model ---------------------------- */
/* Dense peak rates of one GPU (no 2:4 sparsity) and its memory bandwidth, from
 * the vendor specifications named in `source` (cited in fp4-remedy(1));
 * `note` says what could not be confirmed. */
typedef struct fp4s_accel {
    const char *name;         /* "b200", "b300", "gb300", "h100", "h200", "mi355x" */
    const char *title;
    double fp4_tflops;        /* 0: no FP4 units (FP4 terms are priced at the FP8 rate) */
    double fp8_tflops, bf16_tflops, fp32_tflops;
    double bandwidth_tbps;    /* HBM, TB/s */
    const char *source;
    const char *note;
} fp4s_accel;

/* The static table (*n entries); fp4s_accel_get by name (FP4S_EINVAL names the known ones). */
FP4S_API const fp4s_accel *fp4s_accel_list(size_t *n);
FP4S_API int fp4s_accel_get(const char *name, const fp4s_accel **out);

/* Predicted GEMM time (a roofline): compute = sum over units of FLOPs /
 * rate (the units run one after the other), memory = bytes / bandwidth,
 * seconds = max of the two. The same GEMM in FP8 (W8A8, per-tensor scales,
 * BF16 output) and BF16, and the W4A4 base, for comparison. */
typedef struct fp4s_remedy_time {
    double seconds, compute_seconds, memory_seconds;
    double base_seconds;      /* plain W4A4 */
    double fp8_seconds, bf16_seconds;
    double vs_base, vs_fp8, vs_bf16; /* seconds over each (below 1: faster) */
    double flops_fp4_equiv_extra;    /* extra FLOPs priced at the FP4 rate: what --plan budgets */
    bool fp4_emulated;        /* no FP4 units on this accelerator */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_remedy_time;
FP4S_API size_t fp4s_remedy_time_size(void);

FP4S_API int fp4s_remedy_time_predict(const fp4s_remedy_cost *c, const fp4s_accel *a, fp4s_remedy_time *t);

/* ---- evaluation on one site --------------------------------------------------- */
/* Each remedy of a list on one linear site: the rollout items on X, the
 * trainer items on X_t (X when there is none). References in float64
 * (cblas_dgemm of the float32 values): Y_bf16 = X_t W^T, Y_wfq = X_t
 * Qw(W)^T, Y_w4a4qat = Qa(X_t) Qw(W)^T and Y_own = X W^T. Errors are
 * ||Y^ - Y_ref||_F / ||Y_ref||_F computed in float64. */
typedef struct fp4s_remedy_eval_opts {
    fp4s_dz_tie dz_tie;       /* for the decompositions (default FP4S_DZ_TIE_SPEC) */
    bool decompose;           /* activation decompositions before and after (default true) */
    const fp4s_accel *accel;  /* the cost model's accelerator (NULL: b200) */
    fp4s_device device;       /* where the GEMMs and rac's kernels run (default FP4S_DEVICE_CPU;
                               * fp4s_remedy_device_resolve, "On the GPU" above) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_remedy_eval_opts;
FP4S_API size_t fp4s_remedy_eval_opts_size(void);

FP4S_API void fp4s_remedy_eval_opts_defaults(fp4s_remedy_eval_opts *o);

/* Where an evaluation asking for want runs: CPU stays CPU; CUDA needs CUDA
 * and cuBLAS built in and a usable GPU (FP4S_ENOTSUP saying which is
 * missing); AUTO is CUDA where that holds, else CPU. */
FP4S_API int fp4s_remedy_device_resolve(fp4s_device want, fp4s_device *got);

/* What is common to every remedy of one site. */
typedef struct fp4s_remedy_site {
    size_t m, n, k;
    bool have_trainer;           /* X_t was given */
    double ref2_bf16, ref2_wfq, ref2_w4a4qat, ref2_own; /* ||Y_ref||^2 */
    double input_rel_diff;       /* ||X - X_t|| / ||X_t|| (NaN without X_t) */
    double act_only_rel_error;   /* ||Qa(X) W^T - X W^T|| / ||X W^T||: the activation's share */
    double weight_only_rel_error;/* ||X Qw(W)^T - X W^T|| / ||X W^T||: the weight's share */
    fp4s_decomp_result act;      /* decomposition of X under Qa */
    fp4s_decomp_result weight;   /* decomposition of W under Qw */
    double gemm_seconds;         /* BLAS time of the references and every remedy */
    double seconds;              /* wall time of the whole evaluation */
    uint32_t reserved[16]; /* zero; room for fields added later */
} fp4s_remedy_site;
FP4S_API size_t fp4s_remedy_site_size(void);

typedef struct fp4s_remedy_result {
    fp4s_remedy remedy;
    double out_rel_error;            /* vs Y_bf16 */
    double out_rel_error_vs_wfq;     /* vs the asymmetric-QAT trainer aligned with this remedy:
                                      * X_t W^T with W^ this remedy's weight operand (Qw(W),
                                      * unless the remedy changes the weight side) */
    double out_rel_error_vs_w4a4qat; /* vs the symmetric-QAT trainer Qa(X_t) W^T, the same W^ */
    double out_rel_error_vs_own;     /* vs Y_own (trainer items: vs Y_bf16) */
    double err2_bf16, err2_wfq, err2_w4a4qat, err2_own; /* ||Y^ - Y_ref||^2, for pooling sites */
    double ref2_wfq, ref2_w4a4qat;   /* ||Y_ref||^2 of those two references */
    double act_rel_error;            /* ||X^ - X|| / ||X|| (X^: what multiplies W, rac included) */
    double weight_rel_error;         /* ||W^ - W|| / ||W|| */
    double noise_rel;                /* aqn: ||X g - X|| / ||X|| or ||W' - W|| / ||W||; NaN without aqn */
    double sr_bias;                  /* sr: ||mean over sr_seeds seeds of Y^ - Y_bf16|| / ||Y_bf16||; NaN without sr */
    double sr_error_spread;          /* sr: standard deviation over the seeds of out_rel_error */
    fp4s_decomp_result act_before;   /* X under Qa (trainer items: X_t) */
    fp4s_decomp_result act_after;    /* the same identities with X^ in place of Qa(X) */
    double removable_before;         /* 1 - ratio_deadzone - ratio_grid of act_before */
    /* The activation error split by element class: D, the entries the ideal-scale
     * quantizer Q* sends to 0 (the dead zone of act_before, same tie rule), and
     * the rest; energies before (Qa(X) - X) and after (X^ - X), and what is left. */
    double dz_err2_before, dz_err2_after, rest_err2_before, rest_err2_after;
    double dz_left, rest_left;       /* after / before (NaN where before is 0) */
    fp4s_remedy_cost cost;
    fp4s_remedy_time time;
    size_t nchannels;                /* rac: |I| of the first (or only) tile */
    size_t *channels;                /* rac: those channels in ascending order (malloc'ed), else NULL */
    double seconds;                  /* wall time of this remedy */
    uint32_t reserved[16]; /* zero; room for fields added later */
} fp4s_remedy_result;
FP4S_API size_t fp4s_remedy_result_size(void);

/* Evaluate the nr remedies on X [m, k], X_t [m, k] (NULL: none) and W [n, k]
 * (row-major, packed). site and res[nr] are filled; free res with
 * fp4s_remedy_results_free. Errors name the remedy. */
FP4S_API int fp4s_remedy_eval(const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt,
                              const float *X, const float *Xt, size_t m, const float *W, size_t n, size_t k,
                              const fp4s_remedy_eval_opts *o, fp4s_remedy_site *site,
                              fp4s_remedy_result *res);
FP4S_API void fp4s_remedy_results_free(fp4s_remedy_result *res, size_t nr);

/* The numeric fields of one (site, remedy) in report order: every writer
 * (table, CSV, JSON, HDF5) uses this table. */
typedef struct fp4s_remedy_field {
    const char *name;
    const char *desc;
    double (*get)(const fp4s_remedy_site *s, const fp4s_remedy_result *r);
} fp4s_remedy_field;

FP4S_API const fp4s_remedy_field *fp4s_remedy_fields(size_t *n);

/* One row of a report: a remedy's result on a site. */
typedef struct fp4s_remedy_row {
    const char *source;     /* what the input was (a file, or a capture) */
    const char *site;       /* capture site, or NULL */
    int64_t step;           /* capture step, or -1 */
    const fp4s_remedy_site *info;
    const fp4s_remedy_result *res;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_remedy_row;
FP4S_API size_t fp4s_remedy_row_size(void);

/* Write the rows to an HDF5 file atomically (layout in fp4-remedy(1)): one
 * 1-D dataset per field of fp4s_remedy_fields with its description, and
 * remedy, canonical, site, source (strings) and step; root attributes name
 * the quantizers and the accelerator (a may be NULL). */
FP4S_API int fp4s_remedy_write_h5(const char *path, const fp4s_spec *act, const fp4s_spec *wt,
                                  const fp4s_accel *a, const fp4s_remedy_row *rows, size_t n);

/* ---- the plan ---------------------------------------------------------------- */
/* One candidate remedy of one site: its predicted mismatch and extra cost. */
typedef struct fp4s_plan_item {
    double err;     /* what the plan minimises the sum of (fp4-remedy: relative error energy) */
    double cost;    /* extra cost, in the budget's unit (FP4-equivalent FLOPs) */
    bool ok;        /* a candidate at all */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_plan_item;
FP4S_API size_t fp4s_plan_item_size(void);

/* Choose one candidate per site (items[site * ncand + c]) minimising the sum
 * of err with the sum of cost <= budget: start from each site's cheapest
 * candidate (lowest err among equals), then take upgrades along each site's
 * lower convex hull of (cost, err) in order of error removed per cost,
 * skipping a site's further upgrades once one does not fit. Optimal when the
 * budget ends on a hull point; otherwise within one upgrade of it.
 * choice[nsites] receives the candidate indices; the totals may be NULL.
 * FP4S_ERANGE when even the cheapest plan exceeds the budget. */
FP4S_API int fp4s_remedy_plan(const fp4s_plan_item *items, size_t nsites, size_t ncand, double budget,
                              size_t *choice, double *err_total, double *cost_total);

/* ---- the logits path (fp4-remedy --logits) -------------------------------------- */
/* With the final hidden states of both sides H_r, H_t [T, d], the LM-head
 * weight W [V, d] and the sampled token of each row: the rollout's logits
 * under each remedy f(H_r) W^T (cblas_sgemm) against the trainer's (one of
 * the trainer kinds on H_t, in float64; wfq and w4a4qat aligned with the
 * remedy's own weight operand, as out_rel_error_vs_wfq), per-token log-probs
 * log softmax(logits)[token] in float64, and fp4-mismatch's metrics of the
 * pair (mismatch.h: rho = lp_trainer - lp_rollout). */
typedef struct fp4s_logits_opts {
    fp4s_remedy_kind trainer;   /* FP4S_RK_WFQ (default, QUADS's trainer), FP4S_RK_BF16 or FP4S_RK_W4A4QAT */
    fp4s_mm_opts mm;            /* options of the metrics (fp4s_mm_opts_defaults) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_logits_opts;
FP4S_API size_t fp4s_logits_opts_size(void);

FP4S_API void fp4s_logits_opts_defaults(fp4s_logits_opts *o);

typedef struct fp4s_logits_result {
    fp4s_remedy remedy;
    fp4s_mm_metrics mm;         /* the metrics of this call's tokens */
    double entropy_rollout;     /* mean over counted tokens of the entropy of softmax(rollout logits), nats */
    double entropy_trainer;     /* the same for the trainer */
    double entropy_change;      /* entropy_rollout - entropy_trainer */
    double argmax_flips;        /* fraction of counted tokens whose argmax differs between the sides */
    double logit_rel_error;     /* ||rollout logits - trainer logits|| / ||trainer logits|| */
    uint32_t reserved[16]; /* zero; room for fields added later */
} fp4s_logits_result;
FP4S_API size_t fp4s_logits_result_size(void);

/* Evaluate nr rollout items (trainer items are refused: they are the
 * reference) on one step: Hr, Ht [T, d], W [V, d], token [T] in [0, V), seq
 * [T] (the sequence of each row, for the per-sequence metrics), mask [T] or
 * NULL (1 = counted). acc: NULL, or nr accumulators (fp4s_mm_acc_open) the
 * tokens are also added to, to pool steps. */
FP4S_API int fp4s_remedy_logits(const fp4s_remedy *r, size_t nr, const fp4s_spec *act, const fp4s_spec *wt,
                                const float *Hr, const float *Ht, size_t T, const float *W, size_t V, size_t d,
                                const int64_t *token, const int64_t *seq, const uint8_t *mask,
                                const fp4s_logits_opts *o, fp4s_logits_result *res, fp4s_mm_acc **acc);

/* The site of a capture that holds the final hidden states and the LM head:
 * its root attribute lm_head_site, else "lm_head" (fp4scope-capture(5)).
 * Writes at most n bytes; FP4S_EOPEN/EFORMAT when the file cannot be read. */
FP4S_API int fp4s_remedy_lm_head_site(const char *capture, char *buf, size_t n);

/* Read the tokens, seq and (when present) mask of /steps/<step>/logprobs of a
 * capture: malloc'ed arrays of *n entries (*mask NULL without a mask; the
 * caller frees them). FP4S_ENOTFOUND names the missing dataset, FP4S_ESHAPE
 * a length that differs from logprobs/trainer. */
FP4S_API int fp4s_remedy_read_tokens(const char *capture, int64_t step, int64_t **token, int64_t **seq,
                                     uint8_t **mask, size_t *n);

/* ---- fp4-compare: why the rollout and the trainer disagree (fp4-compare(1)) ---- */
/* For one site with rollout activations X_r, trainer activations X_t [m, k]
 * and weight W [n, k]: the output mismatch against the asymmetric-QAT
 * trainer, D = Qa(X_r) Qw(W)^T - X_t Qw(W)^T = d Qw(W)^T with
 * d = Qa(X_r) - X_t, is split exactly by error component and channel.
 * d = delta + e_scale + e_dz + e_grid, with delta = X_r - X_t (the two
 * engines' activations differ before quantizing) and the decomposition of
 * fp4s_decomp (decompose.h: Q* with the ideal scale m_b/6, the same tie
 * rules) of the rollout's quantization error e = Qa(X_r) - X_r. With
 * G = D Qw(W) [m, k], the contribution of component c on channel j is
 * sum_m c[m, j] G[m, j]; the m x 4 contributions sum to ||D||^2 exactly
 * (up to rounding), and may be negative (a part that cancels others). All in
 * float64 (cblas_dgemm). */
typedef enum fp4s_cmp_component {
    FP4S_CMP_INPUT = 0,    /* delta = X_r - X_t */
    FP4S_CMP_SCALE = 1,    /* e_scale of the rollout's quantization */
    FP4S_CMP_DEADZONE = 2, /* e_dz */
    FP4S_CMP_GRID = 3,     /* e_grid */
    FP4S_CMP_ROUTING = 4,  /* tokens one side routed to the site alone (fp4s_compare_eval_routed):
                              the rollout's Qa(x_r) where the trainer has nothing, minus the
                              trainer's x_t where the rollout has nothing */
    FP4S_CMP_COUNT
} fp4s_cmp_component;

/* "input", "scale", "deadzone", "grid", "routing" */
FP4S_API const char *fp4s_cmp_component_name(fp4s_cmp_component c);

typedef struct fp4s_compare_site {
    size_t m, n, k;
    double input_rel_diff;      /* ||X_r - X_t|| / ||X_t|| */
    double code_flips;          /* fraction of E2M1 codes of Qa(X_r) and Qa(X_t) that differ
                                 * (+0 and -0 count as equal) */
    double scale_flips;         /* fraction of blocks whose stored scale byte differs */
    double tscale_rel_diff;     /* NVFP4: |S_dec(X_r) / S_dec(X_t) - 1| (the tensor scales; 0 for MXFP4) */
    double amplification;       /* ||Qa(X_r) - Qa(X_t)|| / ||X_r - X_t|| (NaN when X_r = X_t) */
    double mismatch2;           /* ||D||^2 */
    double ref2;                /* ||X_t Qw(W)^T||^2 */
    double mismatch_rel;        /* ||D|| / ||X_t Qw(W)^T|| */
    double contrib[FP4S_CMP_COUNT]; /* per component, summed over channels (sum: mismatch2) */
    /* per channel, k entries each (malloc'ed; fp4s_compare_site_free) */
    double *ch_input_rel_diff;  /* ||X_r[:, j] - X_t[:, j]|| / ||X_t[:, j]|| */
    double *ch_code_flips;      /* fraction of tokens whose code in column j differs */
    double *ch_scale_flips;     /* fraction of tokens whose block holding column j has another scale byte */
    double *ch_amplification;   /* ||Qa(X_r)[:, j] - Qa(X_t)[:, j]|| / ||X_r[:, j] - X_t[:, j]|| */
    double *ch_contrib;         /* [k * FP4S_CMP_COUNT]: ch_contrib[j * FP4S_CMP_COUNT + c] */
    double *ch_energy;          /* [k * FP4S_CMP_COUNT]: sum_m c[m, j]^2 (the energies) */
    size_t rollout_only, trainer_only; /* routed rows of one side alone (fp4s_compare_eval_routed) */
    uint32_t reserved[2]; /* zero; room for fields added later */
} fp4s_compare_site;
FP4S_API size_t fp4s_compare_site_size(void);

typedef struct fp4s_compare_opts {
    fp4s_dz_tie dz_tie;         /* as decompose.h (default FP4S_DZ_TIE_SPEC) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_compare_opts;
FP4S_API size_t fp4s_compare_opts_size(void);

FP4S_API void fp4s_compare_opts_defaults(fp4s_compare_opts *o);

/* Xr, Xt [m, k], W [n, k], packed row-major; o may be NULL. */
FP4S_API int fp4s_compare_eval(const fp4s_spec *act, const fp4s_spec *wt, const float *Xr, const float *Xt,
                               size_t m, const float *W, size_t n, size_t k, const fp4s_compare_opts *o,
                               fp4s_compare_site *out);
/* A site whose two sides were routed other tokens (an MoE expert; rows paired
 * by token id, fp4s_unit_data): Xr holds [m + r, k] rows, the m paired ones
 * first, then the r the rollout alone routed here; Xt [m + t, k], the m
 * pairs, then the t of the trainer alone. Each side is quantized over all of
 * its rows (one tensor scale, as the engine had them). D gains one row per
 * flipped token: Qa(x_r) Qw(W)^T for the rollout's (the trainer computed
 * nothing here for it), -x_t Qw(W)^T for the trainer's: their contributions
 * are the component FP4S_CMP_ROUTING (not weighted by the router's gate, which
 * the capture does not hold). Flips, norms and amplification are over the
 * pairs; ref2 is over every trainer row. m may be 0. */
FP4S_API int fp4s_compare_eval_routed(const fp4s_spec *act, const fp4s_spec *wt, const float *Xr, size_t r,
                                      const float *Xt, size_t t, size_t m, const float *W, size_t n, size_t k,
                                      const fp4s_compare_opts *o, fp4s_compare_site *out);
FP4S_API void fp4s_compare_site_free(fp4s_compare_site *s);

#ifdef __cplusplus
}
#endif
#endif
