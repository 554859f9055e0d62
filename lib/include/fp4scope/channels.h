/* Per-channel error report for activations [tokens, K] quantized along K, the
 * channel score of Hot-Channel Patch, selection of a compensation set, its
 * coverage curve and its price in a GEMM (fp4-channels(1)).
 *
 * Per channel j (column of the activation X): the decomposition energies of
 * fp4s_decomp with by = CHANNEL, relative error ||e_j||/||x_j||, residual norm
 * ||x_j - Q(x_j)||, amax, dead-zone fraction, mean |dX_j| (mean over tokens of
 * |Q(x) - x|) and, when a weight W [N, K] is given, mean |dW_j| (mean over the
 * N rows of |Q(W) - W| in column j, W quantized along K by the same spec; for
 * NVFP4 with 2-D weight scaling, in 16x16 tiles) and the HCP score
 * mean|dX_j| + mean|dW_j|.
 *
 * Ranking: by the chosen score, largest first; ties and NaN scores (channels
 * with no finite data, or relative error of an all-zero channel) are ordered
 * by channel index, NaN last.
 * Coverage: for ratios r on a fixed grid, k = ceil(r K) channels and the share
 * of the activation error energy sum ||e_j||^2 held by the top k channels.
 * Cost of compensating the selected set I by appending it along K (one GEMM of
 * width K + |I|_p, |I|_p = |I| rounded up to the block size): extra FLOPs
 * 2 M N |I|_p over 2 M N K, extra bytes (M + N) |I|_p (1/2 + 1/block) for the
 * E2M1 codes and block scales of the residual and weight columns, plus 4 |I|
 * bytes of channel indices. */
#ifndef FP4SCOPE_CHANNELS_H
#define FP4SCOPE_CHANNELS_H

#include <fp4scope/decompose.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp4s_chscore {
    FP4S_SCORE_RESIDUAL = 0, /* ||x_j - Q(x_j)|| */
    FP4S_SCORE_RELATIVE = 1, /* ||e_j|| / ||x_j|| */
    FP4S_SCORE_HCP      = 2, /* mean|dX_j| + mean|dW_j| (needs a weight) */
    FP4S_SCORE_DEADZONE = 3  /* dead-zone fraction of the channel */
} fp4s_chscore;

FP4S_API int fp4s_chscore_parse(const char *s, fp4s_chscore *out);
FP4S_API const char *fp4s_chscore_name(fp4s_chscore s);

typedef struct fp4s_channels_opts {
    fp4s_chscore score;     /* default FP4S_SCORE_RESIDUAL */
    size_t top;             /* select the top `top` channels; 0: use ratio */
    double ratio;           /* else select ceil(ratio K); default 0.125 */
    int weight_tile2d;      /* -1 (default): 2-D for NVFP4 with the TE recipe, else
                             * the spec's tile2d; 0: 1-D; 1: 2-D */
    size_t n_out;           /* N of the GEMM for the cost without a weight (0: K) */
    fp4s_decomp_opts decomp; /* dz_tie, chunk size */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_channels_opts;
FP4S_API size_t fp4s_channels_opts_size(void);

FP4S_API void fp4s_channels_opts_defaults(fp4s_channels_opts *o);

typedef struct fp4s_channel_stat {
    size_t channel;
    size_t rank;            /* 1 = best */
    double score;
    bool selected;
    uint64_t n, nonfinite;
    double energy_total, energy_scale, energy_deadzone, energy_grid;
    double relative_error, residual_norm, amax, deadzone_fraction;
    double mean_abs_dx, mean_abs_dw, hcp; /* NaN without a weight */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_channel_stat;
FP4S_API size_t fp4s_channel_stat_size(void);

#define FP4S_COVERAGE_POINTS 16

typedef struct fp4s_coverage_point {
    double ratio;
    size_t channels;
    double share;
} fp4s_coverage_point;

typedef struct fp4s_channels_cost {
    size_t tokens, n_out, k, selected, padded;
    bool n_out_assumed;     /* no weight and no n_out: N = K assumed */
    double flops_base, flops_extra, flops_ratio;
    double bytes_base, bytes_extra, bytes_ratio;
} fp4s_channels_cost;

typedef struct fp4s_channels_report {
    size_t k, tokens;
    fp4s_chscore score;
    size_t top;             /* as asked (0 = none) */
    double ratio;           /* as asked (NaN = none) */
    size_t count;           /* channels selected */
    fp4s_channel_stat *ch;  /* k entries, best first */
    fp4s_coverage_point coverage[FP4S_COVERAGE_POINTS];
    size_t ncoverage;
    double energy_total;    /* activation error energy over all channels */
    fp4s_decomp_result summary;        /* activation tensor */
    bool have_weight;
    size_t weight_rows;
    bool weight_tile2d;
    fp4s_decomp_result weight_summary; /* weight tensor (if given) */
    fp4s_channels_cost cost;
} fp4s_channels_report;

/* Build a report from decompositions already taken with by = CHANNEL: act of
 * the activation [tokens, K], w of the weight [N, K] or NULL. The report is
 * malloc'ed; free it with fp4s_channels_free. FP4S_EINVAL for hcp without a
 * weight, FP4S_ESHAPE when K differs. */
FP4S_API int fp4s_channels_rank(const fp4s_decomp *act, const fp4s_decomp *w,
                                const fp4s_channels_opts *o, fp4s_channels_report **out);

/* Stream the activation source (and the weight source, or NULL), decompose per
 * channel with spec s and rank. */
FP4S_API int fp4s_channels_run(const fp4s_spec *s, const fp4s_channels_opts *o,
                               const char *act_src, const char *weight_src,
                               fp4s_channels_report **out);

/* The pieces of fp4s_channels_run, for callers that decompose the sources
 * themselves (fp4-channels under MPI): the weight's spec (o->weight_tile2d
 * applied to s), and the report from the two decompositions (by = CHANNEL;
 * w NULL without a weight) with fp4s_channels_run's checks and messages
 * (act_src and weight_src name the sources in them). */
FP4S_API void fp4s_channels_weight_spec(const fp4s_spec *s, const fp4s_channels_opts *o, fp4s_spec *ws);
FP4S_API int fp4s_channels_finish(const fp4s_decomp *act, const fp4s_decomp *w, const fp4s_channels_opts *o,
                                  const char *act_src, const char *weight_src, fp4s_channels_report **out);

FP4S_API void fp4s_channels_free(fp4s_channels_report **r);

/* Write the selected set and the per-channel table to an HDF5 file
 * atomically (layout in fp4-channels(1)). source/weight are recorded. */
FP4S_API int fp4s_channels_write_h5(const char *path, const fp4s_spec *s,
                                    const fp4s_channels_report *r,
                                    const char *source, const char *weight);

#ifdef __cplusplus
}
#endif
#endif
