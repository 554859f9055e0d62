/* The three-way decomposition of 4-bit quantization error (fp4-decompose(1)).
 *
 * For each block b (along the last dimension) with maximum magnitude m_b, the
 * ideal scale is s*_b = m_b / 6 in double, unrounded. Q* rounds x / s*_b to the
 * E2M1 grid (the spec's tie rule) and multiplies back, in double. Q is the
 * library's real quantizer (fp4s_quantize with the spec). Element by element:
 *
 *   e        = Q(x) - x
 *   e_scale  = Q(x) - Q*(x)                      (scale bias)
 *   e_dz     = Q*(x) - x   where Q*(x) == 0      (dead zone D_b)
 *   e_grid   = Q*(x) - x   elsewhere             (grid noise)
 *
 * and e_scale splits by element class into three disjoint parts:
 *   underflow: every element of a block whose real scale underflows (NVFP4:
 *              zero or subnormal E4M3 scale; MXFP4: E8M0 code 0 with m_b > 0);
 *   clip:      elsewhere, elements that saturate (top code 6 with |x| > |Q(x)|);
 *   round:     every other element.
 * The three parts have disjoint supports, so they sum to e_scale element by
 * element and their energies sum to ||e_scale||^2 exactly.
 *
 * Dead-zone tie: an entry with |x / s*| == 0.25 exactly (|x| == m_b/24) is a
 * tie of Q*. FP4S_DZ_TIE_SPEC (default) lets Q* use the spec's element tie rule
 * (rne and rtz send it to 0, so it is in D_b; rha sends it to 0.5). IN and OUT
 * force it into or out of D_b. Ties are detected exactly: the quotient
 * 6|x|/m_b is computed in double, where it is exactly 0.25 iff |x| = m_b/24.
 *
 * Non-finite input: a block holding NaN or Inf is excluded from every sum (its
 * s* is undefined) and counted (nan, inf, nonfinite_blocks, excluded). A block
 * whose Q(x) is non-finite for finite input is excluded and counted too.
 * Exact zeros are sent to zero by Q*, so they belong to D_b (counted also as
 * `zeros`). All-zero blocks have no gamma and are counted in zero_blocks.
 *
 * Accumulation is exact: every term (per-block partial sums in double for the
 * tensor and row/block groups, per-element terms for channel groups) is added
 * to a fixed-point superaccumulator covering 2^-416 .. 2^320 (terms below
 * 2^-416 are truncated toward zero, deterministically). Results therefore do
 * not depend on chunking, thread count or merge order: bit for bit.
 *
 * Saturation: clipped counts the elements that saturate (top code with
 * |x| > |Q(x)|), in every group. NVFP4's scale_clamped counts the blocks
 * whose unrounded block scale clamps at E4M3's 448 (quant.h): where a
 * static input scale (spec nv_input_scale) meets activations that grew
 * past its calibrated amax. It is the quantizer's own count, taken where
 * the decomposition quantizes on the CPU (fp4s_decomp_add, the streaming
 * driver), for tensor summaries, their merges and roll-ups; it is 0 in
 * row, block and channel groups, in rows added with
 * fp4s_decomp_add_quantized (the caller quantized) and in rows decomposed
 * on the GPU (the CUDA decomposition does not count it).
 *
 * Formats: MXFP4 (every scale rule and profile) and NVFP4 (every profile).
 * FP8 is refused (FP4S_ENOTSUP).
 *
 * Devices: fp4s_decomp_add runs on the CPU's worker threads or, with
 * opts.device CUDA (or AUTO where a GPU is usable), on the GPU
 * (fp4s_cuda_decomp_add below), for the specs the CUDA kernels implement
 * (fp4s_cuda_supports: MXFP4 blocks of 32, NVFP4 blocks of 16). The GPU
 * computes each row's partial sums in the CPU's order of operations and adds
 * them to the same exact accumulators, so every result, group and histogram
 * is the same bit for bit on either device (tests/cuda checks it). The block
 * statistic delta = log2 gamma uses the library's own log2 on both (within
 * 2.2 units in the last place), not the C library's. */
#ifndef FP4SCOPE_DECOMPOSE_H
#define FP4SCOPE_DECOMPOSE_H

#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_dz_tie {
    FP4S_DZ_TIE_SPEC = 0, /* Q* uses the spec's tie rule at 0.25 (default) */
    FP4S_DZ_TIE_IN   = 1, /* |x/s*| == 0.25 is in the dead zone (Q* -> 0) */
    FP4S_DZ_TIE_OUT  = 2  /* |x/s*| == 0.25 is outside (Q* -> 0.5 s*) */
} fp4s_dz_tie;

typedef enum fp4s_group {
    FP4S_GROUP_TENSOR  = 0, /* only the tensor summary */
    FP4S_GROUP_BLOCK   = 1, /* one group per block, index row*blocks_per_row + b */
    FP4S_GROUP_ROW     = 2, /* one group per row (token) */
    FP4S_GROUP_CHANNEL = 3  /* one group per column (channel) */
} fp4s_group;

/* "spec"/"in"/"out" and "tensor"/"block"/"row"/"channel"; FP4S_EINVAL. */
FP4S_API int fp4s_dz_tie_parse(const char *s, fp4s_dz_tie *out);
FP4S_API const char *fp4s_dz_tie_name(fp4s_dz_tie t);
FP4S_API int fp4s_group_parse(const char *s, fp4s_group *out);
FP4S_API const char *fp4s_group_name(fp4s_group g);

/* Where the decomposition runs. */
typedef enum fp4s_device {
    FP4S_DEVICE_CPU  = 0, /* the CPU (default) */
    FP4S_DEVICE_CUDA = 1, /* the GPU; FP4S_ENOTSUP without CUDA support, without a usable GPU,
                           * or for a spec the CUDA kernels do not implement */
    FP4S_DEVICE_AUTO = 2  /* the GPU where CUDA would be taken, else the CPU */
} fp4s_device;

/* "cpu"/"cuda"/"auto"; FP4S_EINVAL. */
FP4S_API int fp4s_device_parse(const char *s, fp4s_device *out);
FP4S_API const char *fp4s_device_name(fp4s_device d);
/* Resolve want for spec s (NULL: for no particular spec) to CPU or CUDA in
 * *got; FP4S_ENOTSUP with the reason when CUDA is asked for and cannot run. */
FP4S_API int fp4s_device_resolve(const fp4s_spec *s, fp4s_device want, fp4s_device *got);

typedef struct fp4s_decomp_opts {
    fp4s_dz_tie dz_tie;     /* default FP4S_DZ_TIE_SPEC */
    fp4s_group by;          /* default FP4S_GROUP_TENSOR */
    size_t chunk_elems;     /* streaming driver: elements per chunk (default 0: 2^21, or 2^24
                             * when the decomposition runs on the GPU) */
    size_t max_groups;      /* block/row groups allowed (default 2^20) */
    fp4s_device device;     /* where fp4s_decomp_add runs (default FP4S_DEVICE_CPU) */
    size_t keep_bytes;      /* streaming driver, NVFP4: bytes of the input (as float32) kept in
                             * memory from the tensor amax pass, so that the decomposition pass
                             * does not read them again (default FP4S_DECOMP_KEEP_AUTO; 0:
                             * read twice; whole chunks; nothing kept where the memory cannot be
                             * allocated; the results are the same either way) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_decomp_opts;
FP4S_API size_t fp4s_decomp_opts_size(void);

/* keep_bytes FP4S_DECOMP_KEEP_AUTO (SIZE_MAX, the default) decides per
 * input: nothing is kept where the bytes of the rows read are already in the
 * page cache (at least 90% of their pages: reading them again is then a
 * memory copy, cheaper than keeping them), nor where they are not but fit,
 * as float32, in half of the memory the kernel reports available (the amax
 * pass then leaves them cached for the second read), else
 * FP4S_DECOMP_KEEP_DEFAULT, as where the probe cannot tell (mincore(2)
 * refused, not a regular file). A caller that wants every row kept whatever
 * the page cache holds passes SIZE_MAX - 1. */
#define FP4S_DECOMP_KEEP_AUTO ((size_t)-1)
/* What FP4S_DECOMP_KEEP_AUTO keeps where it keeps: 2 GiB. */
#define FP4S_DECOMP_KEEP_DEFAULT ((size_t)2 << 30)

FP4S_API void fp4s_decomp_opts_defaults(fp4s_decomp_opts *o);

/* One finished report (tensor summary, roll-up, or one group). Ratios and
 * derived values are NaN where undefined (0/0). Block statistics (gamma,
 * delta, blocks, underflow) are NaN/0 for channel groups, whose elements come
 * from many blocks. */
typedef struct fp4s_decomp_result {
    uint64_t n;                /* finite elements decomposed */
    uint64_t blocks;           /* blocks decomposed (finite) */
    uint64_t zero_blocks;      /* of which all-zero (no gamma) */
    uint64_t underflow_blocks; /* of which the real scale underflows (see above) */
    uint64_t gamma_blocks;     /* blocks with m_b > 0 (the gamma statistics) */
    uint64_t deadzone;         /* |D|: elements Q* sends to zero (zeros included) */
    uint64_t deadzone_ties;    /* elements exactly at |x/s*| = 0.25 */
    uint64_t zeros;            /* elements exactly 0 */
    uint64_t clipped;          /* elements that saturate under Q */
    uint64_t nonfinite, nan, inf;  /* non-finite inputs */
    uint64_t nonfinite_blocks; /* blocks excluded for non-finite input */
    uint64_t excluded;         /* finite elements excluded with those blocks */
    uint64_t nonfinite_output; /* blocks excluded because Q(x) was not finite */
    double energy_x;           /* ||x||^2 */
    double energy_total;       /* ||e||^2 */
    double energy_scale, energy_deadzone, energy_grid;
    double cross_scale_grid, cross_scale_deadzone, cross_deadzone_grid; /* 2<a,b> */
    double energy_scale_round, energy_scale_clip, energy_scale_underflow;
    double ratio_scale, ratio_deadzone, ratio_grid;     /* energy / energy_total */
    double ratio_cross;        /* (sum of the three cross terms) / energy_total */
    double cos_scale_grid;     /* <e_scale,e_grid> / (||e_scale|| ||e_grid||) */
    double deadzone_fraction;  /* deadzone / n */
    double clip_fraction;      /* clipped / n */
    double underflow_fraction; /* underflow_blocks / blocks */
    double relative_error;     /* ||e|| / ||x|| */
    double snr_db;             /* 10 log10(||x||^2 / ||e||^2) */
    double mean_abs_error;     /* sum |e| / n */
    double residual_norm;      /* ||e|| */
    double gamma_mean, gamma_std, gamma_min, gamma_max;  /* gamma = s_b / s*_b */
    double delta_mean, delta_std, delta_min, delta_max;  /* delta = log2 gamma */
    double amax;               /* max |x| over decomposed elements */
    double max_residual;       /* worst |e - (e_scale + e_dz + e_grid)| of one element */
    double identity_residual;  /* |energy_total - (3 energies + 3 cross terms)| / energy_total */
    double ratio_removable;    /* 1 - ratio_deadzone - ratio_grid: the share of ||e||^2 a perfect
                                * scale would remove (e_dz and e_grid depend only on x and s*) */
    uint64_t scale_clamped;    /* NVFP4: blocks whose unrounded E4M3 scale exceeds 464 and clamps at
                                * 448 (fp4s_qstats.scale_clamped, counted by the CPU quantizer as
                                * fp4s_decomp_add quantizes: see "Saturation" above); 0 for MXFP4 */
    uint32_t reserved[14]; /* zero; room for fields added later */
} fp4s_decomp_result;
FP4S_API size_t fp4s_decomp_result_size(void);

/* The fields of fp4s_decomp_result in report order, for writers (JSON, CSV,
 * HDF5): the name used in every output, whether it is a count (uint64_t) or a
 * double, its offset in the struct and a short description with its unit. */
typedef struct fp4s_decomp_field {
    const char *name;
    bool is_count;
    size_t offset;
    const char *desc;
} fp4s_decomp_field;

/* Static table; *n receives its length. */
FP4S_API const fp4s_decomp_field *fp4s_decomp_fields(size_t *n);
/* Value of field f of r as a double (counts converted). */
FP4S_API double fp4s_decomp_field_value(const fp4s_decomp_result *r, const fp4s_decomp_field *f);

/* Histograms with fixed edges (so that they merge by adding counts). Values
 * beyond the outer edges are counted in the first or last bin. */
typedef enum fp4s_decomp_hist_kind {
    FP4S_HIST_DELTA = 0,  /* delta = log2 gamma per block: [-2, 2], 160 bins */
    FP4S_HIST_ERROR = 1   /* e / s*_b per element: [-4, 4], 160 bins */
} fp4s_decomp_hist_kind;

#define FP4S_HIST_BINS 160

typedef struct fp4s_decomp_hist {
    double lo, hi;                   /* outer edges; bin width (hi-lo)/FP4S_HIST_BINS */
    uint64_t counts[FP4S_HIST_BINS];
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_decomp_hist;
FP4S_API size_t fp4s_decomp_hist_size(void);

typedef struct fp4s_decomp fp4s_decomp;

/* Open an accumulator for a [rows, cols] tensor quantized with spec s and
 * tensor scale ts (fp4s_tscale_init from the tensor amax; needed for NVFP4,
 * may be NULL for MXFP4). rows = cols = 0 with by = TENSOR gives a roll-up that
 * only receives merges. rows = 0 with by = CHANNEL and cols = K gives a channel
 * roll-up: it only receives merges, of channel accumulators of K columns
 * whatever their rows (tensors of other tokens, each with its own tensor
 * scale: the calls of one linear layer), and fp4s_decomp_rows counts the rows
 * merged into it. The spec and ts are copied. */
FP4S_API int fp4s_decomp_open(const fp4s_spec *s, const fp4s_tscale *ts,
                              const fp4s_decomp_opts *o, size_t rows, size_t cols,
                              fp4s_decomp **out);
FP4S_API void fp4s_decomp_close(fp4s_decomp **d);

/* Quantize rows [row0, row0+nrows) of x (row stride ld, all `cols` columns)
 * with the spec and add their decomposition. Chunks must respect
 * fp4s_spec_row_align (all but the last). Uses fp4s_get_threads() threads,
 * or the GPU when the accumulator was opened for it (opts.device): x is then
 * copied to the GPU in pieces of at most 256 MiB. */
FP4S_API int fp4s_decomp_add(fp4s_decomp *d, const float *x, size_t nrows, size_t ld,
                             size_t row0);

/* Same, with Q(x) already computed by the caller: q = dequantized values,
 * codes and scales as fp4s_quantize writes them (unpacked). With a spec that
 * has the RHT, fp4s_decomp_add decomposes the rotated rows (the quantizer's
 * input); here x must already be rotated (fp4s_rht_apply). */
FP4S_API int fp4s_decomp_add_quantized(fp4s_decomp *d, const float *x, size_t ld,
                                       const float *q, size_t ldq,
                                       const uint8_t *codes, size_t ldc,
                                       const uint8_t *scales, size_t lds,
                                       size_t nrows, size_t row0);

/* Where this accumulator's fp4s_decomp_add runs: FP4S_DEVICE_CPU or _CUDA. */
FP4S_API fp4s_device fp4s_decomp_device(const fp4s_decomp *d);

/* Add rows [row0, row0+nrows) of the [rows, cols] tensor held in GPU memory
 * d_x (type dtype: FP4S_DT_F32, _BF16 or _F16; row stride ld elements) on
 * the GPU, whatever opts.device says: quantize them there with the spec,
 * decompose, and merge the result into d (the same bits as fp4s_decomp_add
 * on the widened float32 values). BF16/FP16 values are widened exactly.
 * row0 must be a multiple of fp4s_spec_row_align (2-D tiles). Runs on
 * stream (a cudaStream_t, NULL the default stream) and synchronises it.
 * FP4S_ENOTSUP without a usable GPU or for a spec the CUDA kernels do not
 * implement; at most 2^31 - 1 rows a call. */
FP4S_API int fp4s_cuda_decomp_add(fp4s_decomp *d, fp4s_dtype dtype, const void *d_x, size_t nrows,
                                  size_t ld, size_t row0, void *stream);

/* Merge `from` into `into` (exact). Both must have the same spec; the tensor
 * summaries always merge. Groups merge when both have the same grouping and
 * shape (a channel roll-up: the same columns); an `into` with by = TENSOR
 * takes only the summary (a roll-up).
 * Row and block groups are filled once: merging two accumulators that both
 * hold the same row or block is refused (FP4S_EDUP). */
FP4S_API int fp4s_decomp_merge(fp4s_decomp *into, const fp4s_decomp *from);

/* Finish: the tensor (or roll-up) summary. */
FP4S_API int fp4s_decomp_summary(const fp4s_decomp *d, fp4s_decomp_result *r);
/* Number of groups (0 for by = TENSOR) and one group's result. */
FP4S_API size_t fp4s_decomp_ngroups(const fp4s_decomp *d);
FP4S_API int fp4s_decomp_group(const fp4s_decomp *d, size_t i, fp4s_decomp_result *r);
FP4S_API int fp4s_decomp_hist_get(const fp4s_decomp *d, fp4s_decomp_hist_kind k,
                                  fp4s_decomp_hist *h);
FP4S_API fp4s_group fp4s_decomp_by(const fp4s_decomp *d);
FP4S_API size_t fp4s_decomp_rows(const fp4s_decomp *d);
FP4S_API size_t fp4s_decomp_cols(const fp4s_decomp *d);
/* The spec the accumulator was opened with (owned by it). */
FP4S_API const fp4s_spec *fp4s_decomp_spec(const fp4s_decomp *d);

/* Streaming driver: open source `spec_str` (see tensor.h), check its shape,
 * take the tensor amax first when the format has a tensor scale (NVFP4: a
 * second read), then read row chunks (reads overlap the computation) and
 * decompose them. cols must be a multiple of the block size. */
FP4S_API int fp4s_decomp_source(const fp4s_spec *s, const fp4s_decomp_opts *o,
                                const char *spec_str, fp4s_decomp **out);

/* A part of a tensor, for work split over processes (fp4-decompose under
 * MPI): rows [row0, row0 + nrows) of the source only (nrows past the end: to
 * the last row), decomposed into an accumulator of the source's whole shape,
 * so that the parts of a tensor merge (fp4s_decomp_merge) into exactly what
 * fp4s_decomp_source gives. row0 and nrows are multiples of
 * fp4s_spec_row_align (FP4S_EINVAL otherwise). amax: the tensor amax of the
 * whole tensor for formats with a tensor scale (NVFP4: the largest of
 * fp4s_decomp_source_amax over the parts, which is the amax
 * fp4s_decomp_source takes); NULL: taken over these rows. The checks and
 * messages are fp4s_decomp_source's. */
FP4S_API int fp4s_decomp_source_rows(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str,
                                     size_t row0, size_t nrows, const float *amax, fp4s_decomp **out);
/* The tensor amax the streaming driver takes over rows [row0, row0 + nrows)
 * of the source (finite values; 0 when there are none), for any format. */
FP4S_API int fp4s_decomp_source_amax(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str,
                                     size_t row0, size_t nrows, float *amax);

/* An accumulator as bytes, to send to another process of the same build
 * (the layout is this build's memory layout; a blob of another build or of
 * another version is refused with FP4S_EFORMAT). *buf is malloc'ed (free()).
 * fp4s_decomp_deserialize gives an accumulator equal to d: merged with
 * fp4s_decomp_merge it gives the same bits as merging d itself. */
FP4S_API int fp4s_decomp_serialize(const fp4s_decomp *d, void **buf, size_t *len);
FP4S_API int fp4s_decomp_deserialize(const void *buf, size_t len, fp4s_decomp **out);

/* One input of a report: its accumulator and where it came from. step < 0
 * and site/side NULL when the input is not from a capture. */
typedef struct fp4s_decomp_item {
    const char *source;
    int64_t step;
    const char *site, *side;
    bool synthetic;
    const fp4s_decomp *acc;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_decomp_item;
FP4S_API size_t fp4s_decomp_item_size(void);

/* Write an HDF5 report (layout in fp4-decompose(1)) atomically to path:
 * every input's summary as attributes, its histograms and its groups as 1-D
 * datasets, and the roll-up (may be NULL). */
FP4S_API int fp4s_decomp_write_h5(const char *path, const fp4s_spec *s,
                                  const fp4s_decomp_item *items, size_t n,
                                  const fp4s_decomp *rollup);

/* Whether the HDF5 file `path` has a root attribute synthetic = 1 (false for
 * other files, for files that are not HDF5 and when the attribute is absent). */
FP4S_API bool fp4s_decomp_file_synthetic(const char *path);

#ifdef __cplusplus
}
#endif
#endif
