/* Quantize and dequantize row-major float32 tensors with a fp4s_spec.
 *
 * The flow is two passes for formats with a tensor scale (NVFP4, FP8 per
 * tensor): fp4s_amax() over the whole tensor (chunk by chunk, merged with
 * fmaxf), fp4s_tscale_init(), then fp4s_quantize() chunk by chunk. Chunks are
 * whole rows; all but the last must hold a multiple of fp4s_spec_row_align()
 * rows. Blocks run along the last dimension; cols must be a multiple of the
 * block size (callers pad with zeros first, see fp4-quant --pad).
 *
 * Outputs are unpacked: one code byte per element (E2M1 code 0..15 with the
 * sign in bit 3, or the E4M3 byte for FP8), one scale byte per block (E8M0 or
 * E4M3, as the engine stores it) or, for FP8, one float32 scale per tile.
 * fp4s_pack_e2m1() makes the packed nibble layout of the spec.
 *
 * Kernels: a scalar C reference and, picked at run time, AVX2 and AVX-512
 * paths; codes, scales, dequantized values, counters and the err2/x2 sums of
 * fp4s_qstats are bit-identical (tests/kernels/tester.c checks), also between
 * thread counts. FP4S_FORCE_REF=1
 * in the environment or fp4s_kernels_force_ref(true) forces the reference
 * (kernel selection, below).
 * Large chunks are split over fp4s_get_threads() threads.
 *
 * The arithmetic (kernels/cpu/quant_ref.c is the definition; all fp32, one
 * IEEE operation per step, no FMA; "e4m3()" is fp4s_e4m3_encode RNE satfinite,
 * "enc()" the E2M1 encoder with the spec's tie, keep_neg_zero and zero_in):
 *
 * amax of a block: max |x| over its values; NaN never enters it. Policies:
 *   SCALE_NAN: a block holding a NaN gets the NaN scale code (E8M0 0xFF, E4M3
 *     0x7F), every element code 0, dequantized NaN; Inf enters amax as a value.
 *   BLOCK_NAN: the same for a block holding NaN or Inf.
 *   (Both need a scale codec with a NaN code: fp4s_spec_check refuses them
 *   with the ggml NVFP4 recipe, whose UE4M3 decodes 0x7F to 0.)
 *   IGNORE: Inf enters amax (ggml's loop), NaN and Inf elements get code 0.
 *   Elements of NaN-scale blocks are left out of err2/x2.
 * MXFP4: k = rule(amax) clamped to [-127, 127] (fp4s_mx_k; a clamp from below
 *   counts as scale_underflow), code k+127, amax 0 -> mx_zero_block_code; a
 *   rule may give the NaN code 0xFF (even-nan), which makes a NaN block;
 *   q = enc(x * 2^-k) (exact), dequant q * 2^k. Rule of amax = Inf: FLOOR and
 *   EVEN 126, others 127. ggml (LOG2F) is undefined below 2^-125 and for Inf:
 *   fp4scope clamps the code to [0, 254]. mx_scale_is_ggml changes no byte: ggml
 *   stores the same E8M0 byte and decodes it as 2^(e-128) times doubled
 *   kvalues, which is the same value.
 * NVFP4 TE: S_enc = min(2688/amax, FLT_MAX), 1 if amax == 0 or S_enc == 0;
 *   S_dec = 1/S_enc; sb = e4m3(min(amax_b * (S_enc * (1/6f)), FLT_MAX));
 *   enc = min(1/(float(sb) * S_dec), FLT_MAX); q = enc(x * enc);
 *   dequant (q * float(sb)) * S_dec. A zero scale gives enc = FLT_MAX.
 * NVFP4 torchao-div (nvfp4_tensor.py nvfp4_quantize up to torchao 0.16,
 *   two-level): pts = amax/2688 (s_dec); sc = (amax_b / 6) / pts; sc < 2^-6 ->
 *   2^-6; sc > 448 -> 448 (NaN stays NaN); sb = e4m3(sc); t = pts * float(sb);
 *   q = enc(x / t); dequant q*t. An all-zero tensor has pts = 0 and gives 0/0:
 *   scale 0x7F, dequant NaN, as torchao does.
 * NVFP4 torchao (since 0.17): as torchao-div but q = enc(x * r), r = s_enc /
 *   float(sb) where s_enc = 1/pts (torchao's (1/pts)/s_b); dequant q * (pts *
 *   float(sb)). An amax below 2688 * 2^-128 makes 1/pts +Inf: the elements
 *   saturate (and 0 * Inf is NaN: code 0).
 * NVFP4 torchao-cuda, torchao-div-cuda: the same with PyTorch's CUDA division
 *   by a Python scalar, a multiply by the float reciprocal: pts = amax *
 *   fl(1/2688) (tensor scale FP4S_NV_TS_DECODE_RCP), amax_b * fl(1/6).
 * NVFP4 ModelOpt (nvfp4_tensor.py): scale_2 = amax/2688 (s_dec);
 *   p = amax_b / (6 * scale_2); p == 0 -> 1; p < 2^-9 -> 2^-9; p > 464 or NaN
 *   -> 0x7F (torch's unsaturated cast), else sb = e4m3(p); t = float(sb) * scale_2;
 *   q = enc(x / t); dequant q * t.
 * NVFP4 ggml (quantize_row_nvfp4_ref): no tensor scale; sb =
 *   fp4s_ue4m3_encode_ggml(amax_b / 6); s = its value (0x00/0x7F -> 0); q = the
 *   first magnitude m of 0,.5,1,1.5,2,3,4,6 with the strictly smallest
 *   fabsf(m*s - |x|) in fp32, sign from x, never -0 unless keep_neg_zero;
 *   NaN/Inf -> 0; dequant q * s. Only tie rtz is accepted for this recipe.
 * 2-D (tile2d): amax over the 16x16 tile (a last partial tile has fewer rows);
 *   the scale is repeated on each of its rows in `scales`; counters count
 *   1x16 row segments.
 * saturated: |scaled x| > 6 (FP8: > 448); for ggml NVFP4 |x| > 6*s.
 * scale_underflow (NVFP4): blocks with amax > 0 whose scale has exponent field 0.
 * NVFP4 te-4over6 (TransformerEngine reference_nvfp4.py
 *   _quantize_blockwise_4over6_reference, commit d0067d0): S_enc = min(6B /
 *   amax, FLT_MAX) with B = spec->nv_scale_bound (256 unless 448: 1536/amax or
 *   2688/amax), S_dec = 1/S_enc; per tile (1x16, or 16x16 for tile2d) base =
 *   (amax_b / 6) * S_enc; two candidates s6 = e4m3(min(base, 448)) and
 *   s4 = e4m3(min(base * 1.5, 448)); for each, enc = min(1/(float(s)*S_dec),
 *   FLT_MAX), q = enc(clamp(x * enc, -6, 6)) and per row err = sum over the 16
 *   elements, in order, of |((float(q) * float(s)) * amax) / (6B) - x| (MAE,
 *   the default) or its square (nv_4over6_err MSE), all fp32; 16x16 tiles add
 *   the row errors in TE's tree (rows i + (i+8), then +4, +2, +1; missing rows
 *   of a last tile 0). The map-to-4 candidate wins when its error is strictly
 *   smaller. Dequant (q * s_b) * S_dec. Reference kernel only.
 * NVFP4 te-sdiv, te-sdiv0, te-bf16 (TransformerEngine's kernels): s_b as
 *   te; enc = min(S_enc / float(s_b), FLT_MAX) (te-sdiv0: 0 for a zero
 *   scale; te-bf16: min(..., 0x1.fep127) rounded to BF16, nearest even).
 * NVFP4 flashinfer-4over6[-exact] (FlashInfer cvt_warp_fp16_to_fp4 with
 *   NVFP4_4OVER6_CONFIG): a block amax that is 0 after flushing gives scale
 *   0 and codes 0; s6 = S_enc *f (amax_b *f rcp(6)) (exact: (amax_b /f 6)
 *   *f S_enc), s4 = s6 *f 1.5, D = rcp(S_enc) (exact: 1 /f S_enc), factors
 *   rcp(s *f D) (exact: min(1 /f (s *f D), FLT_MAX)), x *f factor; the error
 *   terms and their sum with .ftz operations (fp4s_4over6_math in spec.h
 *   for the three arithmetics, which te-4over6 takes too with IEEE ones).
 * Row-scaled NVFP4 (nv_scope FP4S_SCOPE_ROW): the front end takes each row's
 *   amax (the spec's tensor_amax over the row, after the RHT) and tensor
 *   scale (fp4s_tscale_init) and hands the kernels one row at a time; a
 *   static input scale (nv_input_scale) replaces the tensor scale's amax;
 *   the tensor-scale rules (nv_tsrule) are in spec.h.
 * scale_clamped: blocks whose unrounded scale (the value each recipe casts
 *   to E4M3 above: amax_b*(S_enc*(1/6)), (amax_b/6)/pts, amax_b/(6*scale_2),
 *   S*(amax_b*rcp(6)), ...) exceeds 464.
 * Stochastic rounding (spec->sr): the element code is that of
 *   fp4s_e2m1_sr(v, fp4s_sr_bits(sr_seed, i)) (codec.h) instead of the tie
 *   rule, v the scaled element (x * 2^-k, x * enc or x / t), i = row * cols +
 *   col its index in the whole tensor (row counted from row0 of the chunk, so
 *   chunking and threads do not change it); an exact zero follows zero_in, a
 *   negative value rounded to 0 gets code 8 under keep_neg_zero. Reference
 *   kernel only (ggml's search recipe and te-4over6 refuse it).
 * RHT (spec->rht, TransformerEngine nvfp4_tensor.py get_rht_matrix and
 *   reference_nvfp4.py _apply_rht): before anything else each 16-element
 *   block of a row becomes y = x R, R = diag(s) H16 / 4 with H16 Sylvester's
 *   Hadamard matrix and s_i = -1 where bit i of rht_signs is set
 *   (FP4S_RHT_TE_SIGNS: TE's sign vector); each y_j is computed exactly (in
 *   double), rounded to float32 and then to BF16 (RNE), as TE's BF16 matmul
 *   with FP32 accumulation rounds it for BF16 inputs. fp4s_quantize rotates
 *   the chunk itself, and the codes, scales and dequantized values are those
 *   of the rotated rows (R is orthogonal: (X R)(W R)^T = X W^T). The tensor
 *   amax must be the rotated tensor's: fp4s_spec_amax.
 * FP8: scale = amax/448 over the tile's finite values (1 for an all-zero tile;
 *   per tensor: fp4s_tscale.fp8_scale); code = fp4s_e4m3_encode(x / scale, tie)
 *   (NaN -> 0x7F, Inf -> +-448); dequant e4m3_decode(code) * scale. FP8 per
 *   tensor has block 1 and counts no blocks. */
#ifndef FP4SCOPE_QUANT_H
#define FP4SCOPE_QUANT_H

#include <fp4scope/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The tensor-level scale of a quantization, derived from the tensor amax.
 * Filled by fp4s_tscale_init (which zeroes `reserved`, the room for fields
 * added later); fp4s_tscale_size() is its size for callers that allocate it
 * blindly. */
typedef struct fp4s_tscale {
    float amax;     /* max |x| over the finite entries of the tensor */
    float s_enc;    /* NVFP4: encode scale (TE: 2688/amax, 1 if amax is 0 or not finite) */
    float s_dec;    /* NVFP4: decode scale (TE: 1/s_enc; torchao/ModelOpt: amax/2688) */
    float stored;   /* the value recorded as the tensor scale (spec->global_scale) */
    float fp8_scale;/* FP8 per tensor: amax/448 (1 if amax is 0) */
    float reserved[3];
} fp4s_tscale;

FP4S_API size_t fp4s_tscale_size(void);

/* Counters and sums filled by fp4s_quantize (added to, never reset: zero the
 * struct first, `reserved` and `sums` included: `reserved` keeps the size
 * fixed while counters are added). Sums are over finite inputs only. err2 and
 * x2 are exact sums (fixed-point accumulators kept in `sums`) rounded to
 * double after every call and merge: the same bits for any kernel level,
 * thread count, chunking and merge order (each block's terms are added in one
 * fixed order first: kernels/cpu/quant_sums.h). Merge structs with
 * fp4s_qstats_merge, not by adding err2 and x2. */
typedef struct fp4s_qstats {
    uint64_t elements;      /* elements quantized */
    uint64_t blocks;        /* blocks (or FP8 tiles) */
    uint64_t saturated;     /* elements whose |x/scale| exceeded the top of the grid (clipped) */
    uint64_t zero_blocks;   /* blocks whose amax is 0 */
    uint64_t nonfinite;     /* NaN or Inf inputs */
    uint64_t nan;
    uint64_t inf;
    uint64_t nonfinite_blocks; /* blocks holding any NaN/Inf */
    uint64_t neg_zero;      /* elements encoded as -0 (code 8) */
    uint64_t scale_underflow;  /* NVFP4: blocks with a zero or subnormal E4M3 scale; MX: k clamped at code 0 */
    double err2;            /* sum over finite elements of (Q(x)-x)^2 */
    double x2;              /* sum of x^2 over finite elements */
    uint64_t sums[50];      /* the exact accumulators behind err2 and x2 (internal; zero) */
    uint64_t scale_clamped; /* NVFP4: blocks whose unrounded block scale (the recipe's value before the E4M3
                             * cast) exceeds 464, where it would round past 448, E4M3's largest value: the
                             * scale clamps at 448 (ModelOpt: NaN) and the block's largest values clip. A
                             * tensor scale from the tensor's own amax never gets there; a static input
                             * scale does once the activations drift past the calibrated amax. 4over6: the
                             * candidate kept. Counted by the CPU kernels */
    uint64_t reserved[5];   /* zero; room for counters added later */
} fp4s_qstats;
FP4S_API size_t fp4s_qstats_size(void);

FP4S_API void fp4s_qstats_merge(fp4s_qstats *into, const fp4s_qstats *from);

/* Max |x| over finite values of a row-major [rows, cols] array with row
 * stride ld (elements); non-finite values are counted in *nonfinite if not NULL. */
FP4S_API float fp4s_amax(const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite);

/* The tensor amax the spec's engine takes (spec->tensor_amax), of the rows
 * after the RHT when the spec has one (spec->rht: block by block, no
 * allocation): fp4s_amax for FP4S_TAMAX_FINITE; for FP4S_TAMAX_ALL +Inf if a value is infinite and NaN if
 * one is NaN, as torch.max(torch.abs(x)) gives them. Chunked callers merge
 * the chunks' values with fp4s_amax_merge (NaN if either is NaN, else the
 * larger), which for finite values is fmaxf. */
FP4S_API float fp4s_spec_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                              uint64_t *nonfinite);
FP4S_API float fp4s_amax_merge(float a, float b);

/* TransformerEngine's random Hadamard transform (spec->rht) of x [rows, cols]
 * into y: see the RHT at the top. cols must be a multiple of 16. */
FP4S_API int fp4s_rht_apply(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld, float *y,
                            size_t ldy);

/* Tensor scale for a spec from the tensor amax (>= 0; NaN and +Inf only for
 * an NVFP4 spec with tensor_amax FP4S_TAMAX_ALL, where they give what the
 * engine's arithmetic gives: TE S_enc 1 for +Inf, NaN scales for NaN). The
 * spec's tensor-scale rule (nv_tsrule) makes it, or its recipe's own; with a
 * static input scale (nv_input_scale > 0) S_dec is that scale and S_enc =
 * fl(1/S_dec) (vLLM's and SGLang's input_scale_inv = (1 / input_scale) in
 * float32), whatever the amax (recorded in ts->amax). */
FP4S_API int fp4s_tscale_init(const fp4s_spec *s, float amax, fp4s_tscale *ts);

/* Output buffers of one chunk. Any pointer may be NULL to skip that output
 * (except that quantize needs codes or dequant). Leading dimensions are in
 * elements of the buffer. */
typedef struct fp4s_qout {
    uint8_t *codes;   size_t ld_codes;    /* [rows, cols] */
    uint8_t *scales;  size_t ld_scales;   /* [rows, cols/block] (FP4 formats; 2-D: repeated per row) */
    float   *scale_f32; size_t ld_scale_f32; /* FP8: [ceil(rows/tile_rows), cols/128] or [1,1] per tensor */
    float   *dequant; size_t ld_dequant;  /* [rows, cols] dequantized values */
    float   *row_amax;  /* row-scaled NVFP4: [rows] the amax each row's tensor scale came from */
    float   *row_scale; /* row-scaled NVFP4: [rows] each row's recorded tensor scale (spec->global_scale) */
    uint32_t reserved[4]; /* zero; room for fields added later */
} fp4s_qout;
FP4S_API size_t fp4s_qout_size(void);

/* Row-scaled NVFP4 (spec->nv_scope FP4S_SCOPE_ROW): the amax of each of the
 * rows of x by the spec's tensor_amax rule (after the RHT for a spec that has
 * one), into amax[rows]; and the tensor scale of each row from those amaxes,
 * fp4s_tscale_init of each, into ts[rows]. These are what fp4s_quantize takes
 * itself when it is given no tensor scale for a row-scaled spec. */
FP4S_API int fp4s_spec_row_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                                float *amax);
FP4S_API int fp4s_tscale_init_rows(const fp4s_spec *s, const float *amax, size_t rows, fp4s_tscale *ts);

/* Quantize rows [0, rows) of x (row stride ld) into out. row0 is the index of
 * the chunk's first row in the whole tensor (used for 2-D tiles).
 * Row-scaled NVFP4 (nv_scope FP4S_SCOPE_ROW): ts is ignored (NULL is fine):
 * each row takes its own amax and tensor scale, as the engines do, recorded
 * in out->row_amax and out->row_scale when those are given.
 * st may be NULL: codes only, what an inference engine computes. The kernels
 * then skip the double-precision err2/x2 sums and the counters (the faster
 * path: see bench/RESULTS.md), and write the same codes, scale bytes, FP8
 * scales and dequantized values, bit for bit, as with a stats struct. */
FP4S_API int fp4s_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                           const float *x, size_t rows, size_t cols, size_t ld,
                           size_t row0, const fp4s_qout *out, fp4s_qstats *st);

/* Row-scaled NVFP4 with given row scales: row_ts holds one tensor scale per
 * row of the chunk (fp4s_tscale_init_rows of a given amax per row);
 * FP4S_EINVAL for a spec that is not row-scaled. */
FP4S_API int fp4s_quantize_rows(const fp4s_spec *s, const fp4s_tscale *row_ts,
                                const float *x, size_t rows, size_t cols, size_t ld,
                                size_t row0, const fp4s_qout *out, fp4s_qstats *st);

/* Dequantize codes + scales back to float32 (the inverse of the above).
 * Row-scaled NVFP4 specs need fp4s_dequantize_rows (FP4S_EINVAL here). */
FP4S_API int fp4s_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                             const uint8_t *codes, size_t ld_codes,
                             const uint8_t *scales, size_t ld_scales,
                             const float *scale_f32, size_t ld_scale_f32,
                             size_t rows, size_t cols, size_t row0,
                             float *out, size_t ld_out);

/* Row-scaled NVFP4: dequantize with one tensor scale per row of the chunk
 * (row_ts[rows], fp4s_tscale_init_rows of the recorded row amaxes). */
FP4S_API int fp4s_dequantize_rows(const fp4s_spec *s, const fp4s_tscale *row_ts,
                                  const uint8_t *codes, size_t ld_codes,
                                  const uint8_t *scales, size_t ld_scales,
                                  size_t rows, size_t cols, size_t row0,
                                  float *out, size_t ld_out);

/* Decoded value of one block scale byte (E8M0 or E4M3 as the spec stores it),
 * not including the NVFP4 tensor decode scale. */
FP4S_API float fp4s_scale_decode(const fp4s_spec *s, uint8_t code);

/* MXFP4: the E8M0 code the spec's scale rule gives a block with this amax
 * (mx_zero_block_code for 0, 0xFF for NaN), as fp4s_quantize computes it. */
FP4S_API uint8_t fp4s_mx_scale_code(const fp4s_spec *s, float amax);

/* Pack one row of E2M1 codes (cols even; split packing needs cols % 32 == 0)
 * into cols/2 bytes in the spec's nibble layout, and back. */
FP4S_API int fp4s_pack_e2m1(fp4s_packing p, const uint8_t *codes, size_t cols, uint8_t *packed);
FP4S_API int fp4s_unpack_e2m1(fp4s_packing p, const uint8_t *packed, size_t cols, uint8_t *codes);
/* The same with the split block size given: split halves are per block of
 * `block` codes (32 for ggml MXFP4, 16 for ggml NVFP4: qs[j] = q[j] | q[j+block/2] << 4).
 * fp4s_pack_e2m1 uses block 32. Pass spec->block. */
FP4S_API int fp4s_pack_e2m1_block(fp4s_packing p, uint32_t block, const uint8_t *codes,
                                  size_t cols, uint8_t *packed);
FP4S_API int fp4s_unpack_e2m1_block(fp4s_packing p, uint32_t block, const uint8_t *packed,
                                    size_t cols, uint8_t *codes);

/* ---- kernel selection ------------------------------------------------------ */
/* One switch for every SIMD path of the library: the quantizer, the
 * decomposition's element kernels and the mismatch accumulator's token loop
 * all run at the level chosen here (a path without a kernel at that level
 * runs the one below it; "ref" is the portable C everywhere). The level is
 * read when an operation starts: a decomposer or mismatch accumulator keeps
 * the level it was opened with. Precedence: the last of
 * fp4s_kernels_force_ref() and fp4s_kernels_select(), then FP4S_FORCE_REF in
 * the environment (read once, at the first use), then the best level this
 * build (-Dsimd=false builds none) and CPU have. Every level gives the same
 * bits except the quantizer's err2/x2 sums (above). */
/* Force the reference level (true) or allow the fastest (false). */
FP4S_API void fp4s_kernels_force_ref(bool force);
/* Name of the kernel level in use: "ref", "avx2" or "avx512". */
FP4S_API const char *fp4s_kernels_level(void);
/* Highest level the build and CPU support, ignoring the switch. */
FP4S_API const char *fp4s_kernels_cpu_level(void);
/* Select a level by name ("ref", "avx2", "avx512"); FP4S_ENOTSUP if the CPU
 * or build lacks it. */
FP4S_API int fp4s_kernels_select(const char *level);

#ifdef __cplusplus
}
#endif
#endif
