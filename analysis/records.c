/* The record types of the analyses' results (fp4scope/record.h): one row
 * per member of fp4s_compare_site, fp4s_remedy and its cost, time, site and
 * result, fp4s_channel_stat, fp4s_mm_metrics and fp4s_mm_run, in the order
 * their outputs show them, and fp4s_batch_result (fp4s_decomp_result's table is decomp_result.c's
 * field list). A member added to one of these structs is a row here:
 * tests/core/test_record.c fails until it has one. */
#include <fp4scope/batch.h>
#include <fp4scope/channels.h>
#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/record.h>
#include <fp4scope/remedy.h>

#include <stddef.h>

#define O FP4S_FF_OUTPUT

/* ---- fp4s_channel_stat (output order of fp4-channels --json) ------------------------- */
#define T fp4s_channel_stat
static const fp4s_rfield channel_rows[] = {
    FP4S_RF(T, channel, FP4S_FT_SIZE, O, "", "channel index"),
    FP4S_RF(T, rank, FP4S_FT_SIZE, O, "", "1 = best"),
    FP4S_RF(T, score, FP4S_FT_F64, O, "", "the ranking score"),
    FP4S_RF(T, selected, FP4S_FT_BOOL, O, "", "in the compensation set"),
    FP4S_RF(T, energy_total, FP4S_FT_F64, O, "x^2", "||e_j||^2"),
    FP4S_RF(T, energy_scale, FP4S_FT_F64, O, "x^2", "its scale part"),
    FP4S_RF(T, energy_deadzone, FP4S_FT_F64, O, "x^2", "its dead-zone part"),
    FP4S_RF(T, energy_grid, FP4S_FT_F64, O, "x^2", "its grid part"),
    FP4S_RF(T, relative_error, FP4S_FT_F64, O, "1", "||e_j|| / ||x_j||"),
    FP4S_RF(T, residual_norm, FP4S_FT_F64, O, "x", "||e_j||"),
    FP4S_RF(T, amax, FP4S_FT_F64, O, "x", "max |x_j|"),
    FP4S_RF(T, deadzone_fraction, FP4S_FT_F64, O, "1", "share of the channel in the dead zone"),
    FP4S_RF(T, mean_abs_dx, FP4S_FT_F64, O, "x", "mean |Qa(x_j) - x_j| (NaN without a weight)"),
    FP4S_RF(T, mean_abs_dw, FP4S_FT_F64, O, "w", "mean |Qw(w_j) - w_j| (NaN without a weight)"),
    FP4S_RF(T, hcp, FP4S_FT_F64, O, "", "the HCP score (NaN without a weight)"),
    FP4S_RF(T, n, FP4S_FT_U64, O, "elements", "finite elements of the channel"),
    FP4S_RF(T, nonfinite, FP4S_FT_U64, O, "elements", "non-finite ones"),
    FP4S_RF_RESERVED(T, 8),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_channel_stat, T, "channel_stat", channel_rows)
#undef T

/* the metrics by name are fp4s_mm_metric_name(i): v[] is one row here */
#define T fp4s_mm_metrics
static const fp4s_rfield metrics_rows[] = {
    FP4S_RF(T, step, FP4S_FT_I64, O, "", "the step"),
    FP4S_RF(T, tokens, FP4S_FT_U64, O, "tokens", "counted tokens"),
    FP4S_RF(T, sequences, FP4S_FT_U64, O, "", "sequences with a counted token"),
    FP4S_RF(T, masked, FP4S_FT_U64, O, "tokens", "tokens with mask = 0"),
    FP4S_RF(T, nonfinite, FP4S_FT_U64, O, "tokens", "tokens excluded for a non-finite log-prob"),
    FP4S_RF(T, nmetrics, FP4S_FT_U32, 0, "", "v[0 .. nmetrics-1] filled"),
    FP4S_RF(T, reserved, FP4S_FT_U32, 0, "", "zero"),
    FP4S_RF_ARR(T, v, FP4S_FT_F64, FP4S_MM_METRIC_SLOTS, O, "", "the metrics by id (fp4s_mm_metric_name)"),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_mm_metrics, T, "mm_metrics", metrics_rows)
#undef T

#define T fp4s_mm_run
static const fp4s_rfield run_rows[] = {
    FP4S_RF(T, name, FP4S_FT_STR, O, "", "run name"),
    FP4S_RF(T, source, FP4S_FT_STR, O, "", "the input path"),
    FP4S_RF(T, nsteps, FP4S_FT_SIZE, O, "", "steps"),
    FP4S_RF_PTR_SUB(T, steps, nsteps, fp4s_rtype_mm_metrics, O, "the metrics per step"),
    FP4S_RF_PTR_SUB(T, first, nsteps, fp4s_rtype_mm_metrics, O, "by position: first-token metrics per step"),
    FP4S_RF_PTR_SUB(T, rest, nsteps, fp4s_rtype_mm_metrics, O, "by position: the other tokens"),
    FP4S_RF(T, tokens, FP4S_FT_U64, O, "tokens", "total over the run"),
    FP4S_RF(T, masked, FP4S_FT_U64, O, "tokens", "masked, total"),
    FP4S_RF(T, nonfinite, FP4S_FT_U64, O, "tokens", "non-finite, total"),
    FP4S_RF(T, skipped_steps, FP4S_FT_SIZE, O, "", "empty steps skipped"),
    FP4S_RF(T, nscalars, FP4S_FT_SIZE, O, "", "per-step scalars"),
    FP4S_RF_PTR(T, scalar_names, FP4S_FT_PTR_STR, nscalars, 1, O, "", "their names"),
    {"scalars", FP4S_FT_PTR_F64, offsetof(T, scalars), 1, offsetof(T, nsteps), 1, NULL, O, "",
     "scalars[i * nscalars + k]: scalar k at steps[i] (NaN where absent)", offsetof(T, nscalars)},
    FP4S_RF_RESERVED(T, 8),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_mm_run, T, "mm_run", run_rows)
#undef T

/* ---- fp4s_compare_site (output order of fp4-compare --json) ------------------------ */
#define C fp4s_compare_site
static const fp4s_rfield compare_rows[] = {
    FP4S_RF(C, m, FP4S_FT_SIZE, O, "tokens", "rows of X_r and X_t"),
    FP4S_RF(C, n, FP4S_FT_SIZE, O, "", "rows of W (outputs)"),
    FP4S_RF(C, k, FP4S_FT_SIZE, O, "channels", "K, the reduction size"),
    FP4S_RF(C, input_rel_diff, FP4S_FT_F64, O, "1", "||X_r - X_t|| / ||X_t||"),
    FP4S_RF(C, code_flips, FP4S_FT_F64, O, "1", "fraction of E2M1 codes of Qa(X_r) and Qa(X_t) that differ"),
    FP4S_RF(C, scale_flips, FP4S_FT_F64, O, "1", "fraction of blocks whose stored scale byte differs"),
    FP4S_RF(C, tscale_rel_diff, FP4S_FT_F64, O, "1", "NVFP4: |S_dec(X_r) / S_dec(X_t) - 1| (0 for MXFP4)"),
    FP4S_RF(C, amplification, FP4S_FT_F64, O, "1", "||Qa(X_r) - Qa(X_t)|| / ||X_r - X_t||"),
    FP4S_RF(C, mismatch_rel, FP4S_FT_F64, O, "1", "||D|| / ||X_t Qw(W)^T||"),
    FP4S_RF(C, mismatch2, FP4S_FT_F64, O, "x^2", "||D||^2, D = Qa(X_r) Qw(W)^T - X_t Qw(W)^T"),
    FP4S_RF(C, ref2, FP4S_FT_F64, O, "x^2", "||X_t Qw(W)^T||^2"),
    FP4S_RF_ARR(C, contrib, FP4S_FT_F64, FP4S_CMP_COUNT, 0, "x^2", "||D||^2 by component (input, scale, deadzone, grid, routing)"),
    FP4S_RF_PTR(C, ch_input_rel_diff, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: ||X_r[:, j] - X_t[:, j]|| / ||X_t[:, j]||"),
    FP4S_RF_PTR(C, ch_code_flips, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: fraction of tokens whose code differs"),
    FP4S_RF_PTR(C, ch_scale_flips, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: fraction of tokens whose block scale differs"),
    FP4S_RF_PTR(C, ch_amplification, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: the amplification"),
    FP4S_RF_PTR(C, ch_contrib, FP4S_FT_PTR_F64, k, FP4S_CMP_COUNT, 0, "x^2", "per channel and component: share of ||D||^2"),
    FP4S_RF_PTR(C, ch_energy, FP4S_FT_PTR_F64, k, FP4S_CMP_COUNT, 0, "x^2", "per channel and component: sum_m c[m, j]^2"),
    FP4S_RF(C, rollout_only, FP4S_FT_SIZE, 0, "tokens", "rows the rollout alone routed here (ids on both sides)"),
    FP4S_RF(C, trainer_only, FP4S_FT_SIZE, 0, "tokens", "rows the trainer alone routed here (ids on both sides)"),
    FP4S_RF_RESERVED(C, 2),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_compare_site, C, "compare_site", compare_rows)
#undef C

/* ---- fp4s_remedy ---------------------------------------------------------------------- */
#define R fp4s_remedy
static const fp4s_rfield remedy_rows[] = {
    FP4S_RF(R, kind, FP4S_FT_ENUM, 0, "", "fp4s_remedy_kind"),
    FP4S_RF_ARR(R, text, FP4S_FT_CHARS, FP4S_REMEDY_TEXT, 0, "", "the item as written"),
    FP4S_RF(R, rac_ratio, FP4S_FT_F64, 0, "1", "rac: R"),
    FP4S_RF(R, rac_resid, FP4S_FT_ENUM, 0, "", "rac: RESID"),
    FP4S_RF(R, rac_random, FP4S_FT_BOOL, 0, "", "rac-rand"),
    FP4S_RF(R, rac_seed, FP4S_FT_U64, 0, "", "rac-rand: SEED"),
    FP4S_RF(R, rac_tile_rows, FP4S_FT_SIZE, 0, "tokens", "rac: tile of the selection (0: the tensor)"),
    FP4S_RF(R, rac_order, FP4S_FT_ENUM, 0, "", "rac: order of the compacted residual"),
    FP4S_RF(R, mbs_group, FP4S_FT_U32, 0, "elements", "mbs: G"),
    FP4S_RF(R, mbs_rule, FP4S_FT_ENUM, 0, "", "mbs: RULE"),
    FP4S_RF(R, of, FP4S_FT_BOOL, 0, "", "of"),
    FP4S_RF(R, of_alpha, FP4S_FT_F64, 0, "1", "of: ALPHA"),
    FP4S_RF(R, keep, FP4S_FT_U32, 0, "elements", "keep: K per block"),
    FP4S_RF(R, aqn, FP4S_FT_BOOL, 0, "", "aqn"),
    FP4S_RF(R, aqn_sigma, FP4S_FT_F64, 0, "1", "aqn: SIGMA"),
    FP4S_RF(R, aqn_seed, FP4S_FT_U64, 0, "", "aqn: SEED"),
    FP4S_RF(R, aqn_target, FP4S_FT_ENUM, 0, "", "aqn: TARGET"),
    FP4S_RF(R, operands, FP4S_FT_ENUM, 0, "", "what mbs, of, keep, 4over6 and sr modify"),
    FP4S_RF(R, e4over6, FP4S_FT_BOOL, 0, "", "4over6"),
    FP4S_RF(R, e4over6_err, FP4S_FT_ENUM, 0, "", "4over6: error mode"),
    FP4S_RF(R, e4over6_bound, FP4S_FT_U16, 0, "", "4over6: tensor-scale bound (0: 256)"),
    FP4S_RF(R, rht, FP4S_FT_BOOL, 0, "", "rht"),
    FP4S_RF(R, rht_signs, FP4S_FT_U16, 0, "", "rht: SIGNS"),
    FP4S_RF(R, sr, FP4S_FT_BOOL, 0, "", "sr"),
    FP4S_RF(R, sr_seed, FP4S_FT_U32, 0, "", "sr: SEED"),
    FP4S_RF(R, sr_seeds, FP4S_FT_U32, 0, "", "sr: seeds of the bias"),
    FP4S_RF_RESERVED(R, 8),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_remedy, R, "remedy", remedy_rows)
#undef R

/* ---- fp4s_remedy_cost ----------------------------------------------------------------- */
#define T fp4s_remedy_cost
static const fp4s_rfield cost_rows[] = {
    FP4S_RF(T, m, FP4S_FT_SIZE, 0, "", "M"),
    FP4S_RF(T, n, FP4S_FT_SIZE, 0, "", "N"),
    FP4S_RF(T, k, FP4S_FT_SIZE, 0, "", "K"),
    FP4S_RF(T, flops_fp4, FP4S_FT_F64, O, "FLOPs", "FP4 x FP4 tensor-core FLOPs"),
    FP4S_RF(T, flops_fp8, FP4S_FT_F64, O, "FLOPs", "FP8 FLOPs"),
    FP4S_RF(T, flops_bf16, FP4S_FT_F64, O, "FLOPs", "BF16 FLOPs"),
    FP4S_RF(T, flops_fp32, FP4S_FT_F64, O, "FLOPs", "FP32 vector FLOPs"),
    FP4S_RF(T, flops_base, FP4S_FT_F64, O, "FLOPs", "2 M N K of the W4A4 GEMM"),
    FP4S_RF(T, flops_extra, FP4S_FT_F64, O, "FLOPs", "all FLOPs minus flops_base"),
    FP4S_RF(T, bytes_base, FP4S_FT_F64, O, "bytes", "bytes of the W4A4 GEMM"),
    FP4S_RF(T, bytes, FP4S_FT_F64, O, "bytes", "bytes read and written"),
    FP4S_RF(T, bytes_extra, FP4S_FT_F64, O, "bytes", "bytes minus bytes_base"),
    FP4S_RF(T, act_bits, FP4S_FT_F64, O, "bits", "bits per activation element"),
    FP4S_RF(T, weight_bits, FP4S_FT_F64, O, "bits", "bits per weight element"),
    FP4S_RF(T, act_extra_bits, FP4S_FT_F64, O, "bits", "over the base quantizer's"),
    FP4S_RF(T, weight_extra_bits, FP4S_FT_F64, O, "bits", "over the base quantizer's"),
    FP4S_RF(T, rac_channels, FP4S_FT_SIZE, O, "channels", "rac: |I|"),
    FP4S_RF(T, rac_padded, FP4S_FT_SIZE, O, "channels", "rac: |I|_p"),
    FP4S_RF(T, rac_tiles, FP4S_FT_SIZE, O, "", "rac: selections made"),
    FP4S_RF(T, kept, FP4S_FT_F64, O, "elements", "entries kept in BF16"),
    FP4S_RF(T, gemm_seconds, FP4S_FT_F64, 0, "s", "wall time in BLAS calls (measured)"),
    FP4S_RF_RESERVED(T, 8),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_remedy_cost, T, "remedy_cost", cost_rows)
#undef T

/* ---- fp4s_remedy_time ----------------------------------------------------------------- */
#define T fp4s_remedy_time
static const fp4s_rfield time_rows[] = {
    FP4S_RF(T, seconds, FP4S_FT_F64, O, "s", "predicted GEMM time"),
    FP4S_RF(T, compute_seconds, FP4S_FT_F64, O, "s", "its compute part"),
    FP4S_RF(T, memory_seconds, FP4S_FT_F64, O, "s", "its memory part"),
    FP4S_RF(T, base_seconds, FP4S_FT_F64, O, "s", "plain W4A4"),
    FP4S_RF(T, fp8_seconds, FP4S_FT_F64, O, "s", "the same GEMM in FP8"),
    FP4S_RF(T, bf16_seconds, FP4S_FT_F64, O, "s", "the same GEMM in BF16"),
    FP4S_RF(T, vs_base, FP4S_FT_F64, O, "1", "seconds / base_seconds"),
    FP4S_RF(T, vs_fp8, FP4S_FT_F64, O, "1", "seconds / fp8_seconds"),
    FP4S_RF(T, vs_bf16, FP4S_FT_F64, O, "1", "seconds / bf16_seconds"),
    FP4S_RF(T, flops_fp4_equiv_extra, FP4S_FT_F64, O, "FLOPs", "extra FLOPs priced at the FP4 rate"),
    FP4S_RF(T, fp4_emulated, FP4S_FT_BOOL, O, "", "no FP4 units on this accelerator"),
    FP4S_RF_RESERVED(T, 8),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_remedy_time, T, "remedy_time", time_rows)
#undef T

/* ---- fp4s_remedy_site ------------------------------------------------------------------ */
#define T fp4s_remedy_site
static const fp4s_rfield site_rows[] = {
    FP4S_RF(T, m, FP4S_FT_SIZE, O, "tokens", "M"),
    FP4S_RF(T, n, FP4S_FT_SIZE, O, "", "N"),
    FP4S_RF(T, k, FP4S_FT_SIZE, O, "channels", "K"),
    FP4S_RF(T, have_trainer, FP4S_FT_BOOL, O, "", "X_t was given"),
    FP4S_RF(T, ref2_bf16, FP4S_FT_F64, O, "x^2", "||X_t W^T||^2"),
    FP4S_RF(T, ref2_wfq, FP4S_FT_F64, O, "x^2", "||X_t Qw(W)^T||^2"),
    FP4S_RF(T, ref2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Qa(X_t) Qw(W)^T||^2"),
    FP4S_RF(T, ref2_own, FP4S_FT_F64, O, "x^2", "||X W^T||^2"),
    FP4S_RF(T, input_rel_diff, FP4S_FT_F64, O, "1", "||X - X_t|| / ||X_t||"),
    FP4S_RF(T, act_only_rel_error, FP4S_FT_F64, O, "1", "||Qa(X) W^T - X W^T|| / ||X W^T||"),
    FP4S_RF(T, weight_only_rel_error, FP4S_FT_F64, O, "1", "||X Qw(W)^T - X W^T|| / ||X W^T||"),
    FP4S_RF_SUB(T, act, fp4s_rtype_decomp_result, O, "decomposition of X under Qa"),
    FP4S_RF_SUB(T, weight, fp4s_rtype_decomp_result, O, "decomposition of W under Qw"),
    FP4S_RF(T, gemm_seconds, FP4S_FT_F64, 0, "s", "BLAS time (measured)"),
    FP4S_RF(T, seconds, FP4S_FT_F64, 0, "s", "wall time of the evaluation (measured)"),
    FP4S_RF_RESERVED(T, 16),
};
#undef T

/* ---- fp4s_remedy_result ---------------------------------------------------------------- */
#define T fp4s_remedy_result
static const fp4s_rfield result_rows[] = {
    FP4S_RF_SUB(T, remedy, fp4s_rtype_remedy, O, "the remedy"),
    FP4S_RF(T, out_rel_error, FP4S_FT_F64, O, "1", "vs Y_bf16"),
    FP4S_RF(T, out_rel_error_vs_wfq, FP4S_FT_F64, O, "1", "vs the asymmetric-QAT trainer aligned with this remedy"),
    FP4S_RF(T, out_rel_error_vs_w4a4qat, FP4S_FT_F64, O, "1", "vs the symmetric-QAT trainer"),
    FP4S_RF(T, out_rel_error_vs_own, FP4S_FT_F64, O, "1", "vs Y_own"),
    FP4S_RF(T, err2_bf16, FP4S_FT_F64, O, "x^2", "||Y^ - Y_bf16||^2"),
    FP4S_RF(T, err2_wfq, FP4S_FT_F64, O, "x^2", "||Y^ - Y_wfq||^2"),
    FP4S_RF(T, err2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Y^ - Y_w4a4qat||^2"),
    FP4S_RF(T, err2_own, FP4S_FT_F64, O, "x^2", "||Y^ - Y_own||^2"),
    FP4S_RF(T, ref2_wfq, FP4S_FT_F64, O, "x^2", "||Y_wfq||^2 (this remedy's)"),
    FP4S_RF(T, ref2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Y_w4a4qat||^2 (this remedy's)"),
    FP4S_RF(T, act_rel_error, FP4S_FT_F64, O, "1", "||X^ - X|| / ||X||"),
    FP4S_RF(T, weight_rel_error, FP4S_FT_F64, O, "1", "||W^ - W|| / ||W||"),
    FP4S_RF(T, noise_rel, FP4S_FT_F64, O, "1", "aqn: relative size of its noise"),
    FP4S_RF(T, sr_bias, FP4S_FT_F64, O, "1", "sr: relative error of the mean output over the seeds"),
    FP4S_RF(T, sr_error_spread, FP4S_FT_F64, O, "1", "sr: standard deviation of out_rel_error over the seeds"),
    FP4S_RF_SUB(T, act_before, fp4s_rtype_decomp_result, O, "X under Qa"),
    FP4S_RF_SUB(T, act_after, fp4s_rtype_decomp_result, O, "the same identities with X^"),
    FP4S_RF(T, removable_before, FP4S_FT_F64, O, "1", "1 - ratio_deadzone - ratio_grid of act_before"),
    FP4S_RF(T, dz_err2_before, FP4S_FT_F64, O, "x^2", "dead-zone error energy before"),
    FP4S_RF(T, dz_err2_after, FP4S_FT_F64, O, "x^2", "after"),
    FP4S_RF(T, rest_err2_before, FP4S_FT_F64, O, "x^2", "the rest's error energy before"),
    FP4S_RF(T, rest_err2_after, FP4S_FT_F64, O, "x^2", "after"),
    FP4S_RF(T, dz_left, FP4S_FT_F64, O, "1", "dz after / before"),
    FP4S_RF(T, rest_left, FP4S_FT_F64, O, "1", "rest after / before"),
    FP4S_RF_SUB(T, cost, fp4s_rtype_remedy_cost, O, "the cost"),
    FP4S_RF_SUB(T, time, fp4s_rtype_remedy_time, O, "the time model"),
    FP4S_RF(T, nchannels, FP4S_FT_SIZE, O, "channels", "rac: |I| of the first tile"),
    FP4S_RF_PTR(T, channels, FP4S_FT_PTR_SIZE, nchannels, 1, O, "", "rac: those channels, ascending"),
    FP4S_RF(T, seconds, FP4S_FT_F64, 0, "s", "wall time of this remedy (measured)"),
    FP4S_RF_RESERVED(T, 16),
};
#undef T

FP4S_RTYPE_DEFINE(fp4s_rtype_remedy_site, fp4s_remedy_site, "remedy_site", site_rows)
FP4S_RTYPE_DEFINE(fp4s_rtype_remedy_result, fp4s_remedy_result, "remedy_result", result_rows)

/* ---- fp4s_batch_result (output order of fp4-batch --json) ----------------------------- */
#define B fp4s_batch_result
static const fp4s_rfield batch_rows[] = {
    FP4S_RF(B, rows, FP4S_FT_U64, O, "rows", "activation rows re-quantized"),
    FP4S_RF(B, elements, FP4S_FT_U64, O, "elements", "elements of those rows"),
    FP4S_RF(B, blocks, FP4S_FT_U64, O, "blocks", "scale blocks of those rows"),
    FP4S_RF(B, groups_a, FP4S_FT_U64, O, "", "groups of the trainer's composition"),
    FP4S_RF(B, groups_b, FP4S_FT_U64, O, "", "groups of the rollout's composition"),
    FP4S_RF(B, code_flips, FP4S_FT_U64, O, "elements", "E2M1 codes that differ (+0 and -0 equal)"),
    FP4S_RF(B, scale_flips, FP4S_FT_U64, O, "blocks", "block scale bytes that differ"),
    FP4S_RF(B, rows_changed, FP4S_FT_U64, O, "rows", "rows with a differing code or scale byte"),
    FP4S_RF(B, tscale_rows, FP4S_FT_U64, O, "rows", "rows whose tensor scale differs"),
    FP4S_RF(B, deq_diff2, FP4S_FT_F64, O, "x^2", "||QA(x) - QB(x)||^2"),
    FP4S_RF(B, x2, FP4S_FT_F64, O, "x^2", "||x||^2 over finite values"),
    FP4S_RF(B, out_diff2, FP4S_FT_F64, O, "y^2", "||(QA - QB) W^T||^2 (0 without a weight)"),
    FP4S_RF(B, out_ref2, FP4S_FT_F64, O, "y^2", "||QA W^T||^2 (0 without a weight)"),
    FP4S_RF(B, lp_rows, FP4S_FT_U64, O, "rows", "rows whose log-prob change was taken (LM head)"),
    FP4S_RF(B, lp_sum_abs, FP4S_FT_F64, O, "nats", "sum of |logp_A - logp_B|"),
    FP4S_RF(B, lp_max_abs, FP4S_FT_F64, O, "nats", "largest |logp_A - logp_B|"),
    FP4S_RF(B, kl_sum, FP4S_FT_F64, O, "nats", "sum of KL(p_A || p_B)"),
    FP4S_RF(B, argmax_flips, FP4S_FT_U64, O, "rows", "rows whose argmax differs"),
    FP4S_RF_RESERVED(B, 16),
};
FP4S_RTYPE_DEFINE(fp4s_rtype_batch_result, B, "batch_result", batch_rows)
#undef B
