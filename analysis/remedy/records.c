/* The record types of the remedies and the comparison (fp4scope/record.h):
 * one row per member of fp4s_compare_site, fp4s_remedy, fp4s_remedy_cost,
 * fp4s_remedy_time, fp4s_remedy_site and fp4s_remedy_result. */
#include <fp4scope/record.h>
#include <fp4scope/remedy.h>

#include <stddef.h>

#define ROW(T, m, ty, fl, u, d) {#m, ty, offsetof(T, m), 1, -1, 0, NULL, fl, u, d, -1}
#define ARR(T, m, ty, n, fl, u, d) {#m, ty, offsetof(T, m), n, -1, 0, NULL, fl, u, d, -1}
#define PTR(T, m, ty, cnt, mul, fl, u, d) {#m, ty, offsetof(T, m), 1, offsetof(T, cnt), mul, NULL, fl, u, d, -1}
#define SUB(T, m, st, fl, d) {#m, FP4S_FT_STRUCT, offsetof(T, m), 1, -1, 0, st, fl, "", d, -1}
#define RES(T, n) {"reserved", FP4S_FT_U32, offsetof(T, reserved), n, -1, 0, NULL, 0, "", "zero; room for later fields", -1}
#define O FP4S_FF_OUTPUT
#define TYPE(fn, T, tname, rows) \
    const fp4s_rtype *fn(void) \
    { \
        static const fp4s_rtype t = {tname, sizeof(T), rows, sizeof rows / sizeof rows[0]}; \
        return &t; \
    }

/* ---- fp4s_compare_site (output order of fp4-compare --json) ------------------------ */
#define C fp4s_compare_site
static const fp4s_rfield compare_rows[] = {
    ROW(C, m, FP4S_FT_SIZE, O, "tokens", "rows of X_r and X_t"),
    ROW(C, n, FP4S_FT_SIZE, O, "", "rows of W (outputs)"),
    ROW(C, k, FP4S_FT_SIZE, O, "channels", "K, the reduction size"),
    ROW(C, input_rel_diff, FP4S_FT_F64, O, "1", "||X_r - X_t|| / ||X_t||"),
    ROW(C, code_flips, FP4S_FT_F64, O, "1", "fraction of E2M1 codes of Qa(X_r) and Qa(X_t) that differ"),
    ROW(C, scale_flips, FP4S_FT_F64, O, "1", "fraction of blocks whose stored scale byte differs"),
    ROW(C, tscale_rel_diff, FP4S_FT_F64, O, "1", "NVFP4: |S_dec(X_r) / S_dec(X_t) - 1| (0 for MXFP4)"),
    ROW(C, amplification, FP4S_FT_F64, O, "1", "||Qa(X_r) - Qa(X_t)|| / ||X_r - X_t||"),
    ROW(C, mismatch_rel, FP4S_FT_F64, O, "1", "||D|| / ||X_t Qw(W)^T||"),
    ROW(C, mismatch2, FP4S_FT_F64, O, "x^2", "||D||^2, D = Qa(X_r) Qw(W)^T - X_t Qw(W)^T"),
    ROW(C, ref2, FP4S_FT_F64, O, "x^2", "||X_t Qw(W)^T||^2"),
    ARR(C, contrib, FP4S_FT_F64, FP4S_CMP_COUNT, 0, "x^2", "||D||^2 by component (input, scale, deadzone, grid)"),
    PTR(C, ch_input_rel_diff, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: ||X_r[:, j] - X_t[:, j]|| / ||X_t[:, j]||"),
    PTR(C, ch_code_flips, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: fraction of tokens whose code differs"),
    PTR(C, ch_scale_flips, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: fraction of tokens whose block scale differs"),
    PTR(C, ch_amplification, FP4S_FT_PTR_F64, k, 1, 0, "1", "per channel: the amplification"),
    PTR(C, ch_contrib, FP4S_FT_PTR_F64, k, FP4S_CMP_COUNT, 0, "x^2", "per channel and component: share of ||D||^2"),
    PTR(C, ch_energy, FP4S_FT_PTR_F64, k, FP4S_CMP_COUNT, 0, "x^2", "per channel and component: sum_m c[m, j]^2"),
    RES(C, 8),
};
TYPE(fp4s_rtype_compare_site, C, "compare_site", compare_rows)
#undef C

/* ---- fp4s_remedy ---------------------------------------------------------------------- */
#define R fp4s_remedy
static const fp4s_rfield remedy_rows[] = {
    ROW(R, kind, FP4S_FT_ENUM, 0, "", "fp4s_remedy_kind"),
    ARR(R, text, FP4S_FT_CHARS, FP4S_REMEDY_TEXT, 0, "", "the item as written"),
    ROW(R, rac_ratio, FP4S_FT_F64, 0, "1", "rac: R"),
    ROW(R, rac_resid, FP4S_FT_ENUM, 0, "", "rac: RESID"),
    ROW(R, rac_random, FP4S_FT_BOOL, 0, "", "rac-rand"),
    ROW(R, rac_seed, FP4S_FT_U64, 0, "", "rac-rand: SEED"),
    ROW(R, rac_tile_rows, FP4S_FT_SIZE, 0, "tokens", "rac: tile of the selection (0: the tensor)"),
    ROW(R, rac_order, FP4S_FT_ENUM, 0, "", "rac: order of the compacted residual"),
    ROW(R, mbs_group, FP4S_FT_U32, 0, "elements", "mbs: G"),
    ROW(R, mbs_rule, FP4S_FT_ENUM, 0, "", "mbs: RULE"),
    ROW(R, of, FP4S_FT_BOOL, 0, "", "of"),
    ROW(R, of_alpha, FP4S_FT_F64, 0, "1", "of: ALPHA"),
    ROW(R, keep, FP4S_FT_U32, 0, "elements", "keep: K per block"),
    ROW(R, aqn, FP4S_FT_BOOL, 0, "", "aqn"),
    ROW(R, aqn_sigma, FP4S_FT_F64, 0, "1", "aqn: SIGMA"),
    ROW(R, aqn_seed, FP4S_FT_U64, 0, "", "aqn: SEED"),
    ROW(R, aqn_target, FP4S_FT_ENUM, 0, "", "aqn: TARGET"),
    ROW(R, operands, FP4S_FT_ENUM, 0, "", "what mbs, of, keep, 4over6 and sr modify"),
    ROW(R, e4over6, FP4S_FT_BOOL, 0, "", "4over6"),
    ROW(R, e4over6_err, FP4S_FT_ENUM, 0, "", "4over6: error mode"),
    ROW(R, e4over6_bound, FP4S_FT_U16, 0, "", "4over6: tensor-scale bound (0: 256)"),
    ROW(R, rht, FP4S_FT_BOOL, 0, "", "rht"),
    ROW(R, rht_signs, FP4S_FT_U16, 0, "", "rht: SIGNS"),
    ROW(R, sr, FP4S_FT_BOOL, 0, "", "sr"),
    ROW(R, sr_seed, FP4S_FT_U32, 0, "", "sr: SEED"),
    ROW(R, sr_seeds, FP4S_FT_U32, 0, "", "sr: seeds of the bias"),
    RES(R, 8),
};
TYPE(fp4s_rtype_remedy, R, "remedy", remedy_rows)
#undef R

/* ---- fp4s_remedy_cost ----------------------------------------------------------------- */
#define T fp4s_remedy_cost
static const fp4s_rfield cost_rows[] = {
    ROW(T, m, FP4S_FT_SIZE, 0, "", "M"),
    ROW(T, n, FP4S_FT_SIZE, 0, "", "N"),
    ROW(T, k, FP4S_FT_SIZE, 0, "", "K"),
    ROW(T, flops_fp4, FP4S_FT_F64, O, "FLOPs", "FP4 x FP4 tensor-core FLOPs"),
    ROW(T, flops_fp8, FP4S_FT_F64, O, "FLOPs", "FP8 FLOPs"),
    ROW(T, flops_bf16, FP4S_FT_F64, O, "FLOPs", "BF16 FLOPs"),
    ROW(T, flops_fp32, FP4S_FT_F64, O, "FLOPs", "FP32 vector FLOPs"),
    ROW(T, flops_base, FP4S_FT_F64, O, "FLOPs", "2 M N K of the W4A4 GEMM"),
    ROW(T, flops_extra, FP4S_FT_F64, O, "FLOPs", "all FLOPs minus flops_base"),
    ROW(T, bytes_base, FP4S_FT_F64, O, "bytes", "bytes of the W4A4 GEMM"),
    ROW(T, bytes, FP4S_FT_F64, O, "bytes", "bytes read and written"),
    ROW(T, bytes_extra, FP4S_FT_F64, O, "bytes", "bytes minus bytes_base"),
    ROW(T, act_bits, FP4S_FT_F64, O, "bits", "bits per activation element"),
    ROW(T, weight_bits, FP4S_FT_F64, O, "bits", "bits per weight element"),
    ROW(T, act_extra_bits, FP4S_FT_F64, O, "bits", "over the base quantizer's"),
    ROW(T, weight_extra_bits, FP4S_FT_F64, O, "bits", "over the base quantizer's"),
    ROW(T, rac_channels, FP4S_FT_SIZE, O, "channels", "rac: |I|"),
    ROW(T, rac_padded, FP4S_FT_SIZE, O, "channels", "rac: |I|_p"),
    ROW(T, rac_tiles, FP4S_FT_SIZE, O, "", "rac: selections made"),
    ROW(T, kept, FP4S_FT_F64, O, "elements", "entries kept in BF16"),
    ROW(T, gemm_seconds, FP4S_FT_F64, 0, "s", "wall time in BLAS calls (measured)"),
    RES(T, 8),
};
TYPE(fp4s_rtype_remedy_cost, T, "remedy_cost", cost_rows)
#undef T

/* ---- fp4s_remedy_time ----------------------------------------------------------------- */
#define T fp4s_remedy_time
static const fp4s_rfield time_rows[] = {
    ROW(T, seconds, FP4S_FT_F64, O, "s", "predicted GEMM time"),
    ROW(T, compute_seconds, FP4S_FT_F64, O, "s", "its compute part"),
    ROW(T, memory_seconds, FP4S_FT_F64, O, "s", "its memory part"),
    ROW(T, base_seconds, FP4S_FT_F64, O, "s", "plain W4A4"),
    ROW(T, fp8_seconds, FP4S_FT_F64, O, "s", "the same GEMM in FP8"),
    ROW(T, bf16_seconds, FP4S_FT_F64, O, "s", "the same GEMM in BF16"),
    ROW(T, vs_base, FP4S_FT_F64, O, "1", "seconds / base_seconds"),
    ROW(T, vs_fp8, FP4S_FT_F64, O, "1", "seconds / fp8_seconds"),
    ROW(T, vs_bf16, FP4S_FT_F64, O, "1", "seconds / bf16_seconds"),
    ROW(T, flops_fp4_equiv_extra, FP4S_FT_F64, O, "FLOPs", "extra FLOPs priced at the FP4 rate"),
    ROW(T, fp4_emulated, FP4S_FT_BOOL, O, "", "no FP4 units on this accelerator"),
    RES(T, 8),
};
TYPE(fp4s_rtype_remedy_time, T, "remedy_time", time_rows)
#undef T

/* ---- fp4s_remedy_site ------------------------------------------------------------------ */
#define T fp4s_remedy_site
static const fp4s_rfield site_rows[] = {
    ROW(T, m, FP4S_FT_SIZE, O, "tokens", "M"),
    ROW(T, n, FP4S_FT_SIZE, O, "", "N"),
    ROW(T, k, FP4S_FT_SIZE, O, "channels", "K"),
    ROW(T, have_trainer, FP4S_FT_BOOL, O, "", "X_t was given"),
    ROW(T, ref2_bf16, FP4S_FT_F64, O, "x^2", "||X_t W^T||^2"),
    ROW(T, ref2_wfq, FP4S_FT_F64, O, "x^2", "||X_t Qw(W)^T||^2"),
    ROW(T, ref2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Qa(X_t) Qw(W)^T||^2"),
    ROW(T, ref2_own, FP4S_FT_F64, O, "x^2", "||X W^T||^2"),
    ROW(T, input_rel_diff, FP4S_FT_F64, O, "1", "||X - X_t|| / ||X_t||"),
    ROW(T, act_only_rel_error, FP4S_FT_F64, O, "1", "||Qa(X) W^T - X W^T|| / ||X W^T||"),
    ROW(T, weight_only_rel_error, FP4S_FT_F64, O, "1", "||X Qw(W)^T - X W^T|| / ||X W^T||"),
    SUB(T, act, fp4s_rtype_decomp_result, O, "decomposition of X under Qa"),
    SUB(T, weight, fp4s_rtype_decomp_result, O, "decomposition of W under Qw"),
    ROW(T, gemm_seconds, FP4S_FT_F64, 0, "s", "BLAS time (measured)"),
    ROW(T, seconds, FP4S_FT_F64, 0, "s", "wall time of the evaluation (measured)"),
    RES(T, 16),
};
#undef T

/* ---- fp4s_remedy_result ---------------------------------------------------------------- */
#define T fp4s_remedy_result
static const fp4s_rfield result_rows[] = {
    SUB(T, remedy, fp4s_rtype_remedy, O, "the remedy"),
    ROW(T, out_rel_error, FP4S_FT_F64, O, "1", "vs Y_bf16"),
    ROW(T, out_rel_error_vs_wfq, FP4S_FT_F64, O, "1", "vs the asymmetric-QAT trainer aligned with this remedy"),
    ROW(T, out_rel_error_vs_w4a4qat, FP4S_FT_F64, O, "1", "vs the symmetric-QAT trainer"),
    ROW(T, out_rel_error_vs_own, FP4S_FT_F64, O, "1", "vs Y_own"),
    ROW(T, err2_bf16, FP4S_FT_F64, O, "x^2", "||Y^ - Y_bf16||^2"),
    ROW(T, err2_wfq, FP4S_FT_F64, O, "x^2", "||Y^ - Y_wfq||^2"),
    ROW(T, err2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Y^ - Y_w4a4qat||^2"),
    ROW(T, err2_own, FP4S_FT_F64, O, "x^2", "||Y^ - Y_own||^2"),
    ROW(T, ref2_wfq, FP4S_FT_F64, O, "x^2", "||Y_wfq||^2 (this remedy's)"),
    ROW(T, ref2_w4a4qat, FP4S_FT_F64, O, "x^2", "||Y_w4a4qat||^2 (this remedy's)"),
    ROW(T, act_rel_error, FP4S_FT_F64, O, "1", "||X^ - X|| / ||X||"),
    ROW(T, weight_rel_error, FP4S_FT_F64, O, "1", "||W^ - W|| / ||W||"),
    ROW(T, noise_rel, FP4S_FT_F64, O, "1", "aqn: relative size of its noise"),
    ROW(T, sr_bias, FP4S_FT_F64, O, "1", "sr: relative error of the mean output over the seeds"),
    ROW(T, sr_error_spread, FP4S_FT_F64, O, "1", "sr: standard deviation of out_rel_error over the seeds"),
    SUB(T, act_before, fp4s_rtype_decomp_result, O, "X under Qa"),
    SUB(T, act_after, fp4s_rtype_decomp_result, O, "the same identities with X^"),
    ROW(T, removable_before, FP4S_FT_F64, O, "1", "1 - ratio_deadzone - ratio_grid of act_before"),
    ROW(T, dz_err2_before, FP4S_FT_F64, O, "x^2", "dead-zone error energy before"),
    ROW(T, dz_err2_after, FP4S_FT_F64, O, "x^2", "after"),
    ROW(T, rest_err2_before, FP4S_FT_F64, O, "x^2", "the rest's error energy before"),
    ROW(T, rest_err2_after, FP4S_FT_F64, O, "x^2", "after"),
    ROW(T, dz_left, FP4S_FT_F64, O, "1", "dz after / before"),
    ROW(T, rest_left, FP4S_FT_F64, O, "1", "rest after / before"),
    SUB(T, cost, fp4s_rtype_remedy_cost, O, "the cost"),
    SUB(T, time, fp4s_rtype_remedy_time, O, "the time model"),
    ROW(T, nchannels, FP4S_FT_SIZE, O, "channels", "rac: |I| of the first tile"),
    PTR(T, channels, FP4S_FT_PTR_SIZE, nchannels, 1, O, "", "rac: those channels, ascending"),
    ROW(T, seconds, FP4S_FT_F64, 0, "s", "wall time of this remedy (measured)"),
    RES(T, 16),
};
#undef T

TYPE(fp4s_rtype_remedy_site, fp4s_remedy_site, "remedy_site", site_rows)
TYPE(fp4s_rtype_remedy_result, fp4s_remedy_result, "remedy_result", result_rows)
