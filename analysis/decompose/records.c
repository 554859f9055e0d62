/* The record type of the channels (fp4scope/record.h): one row per member
 * of fp4s_channel_stat (fp4s_decomp_result's is decomp_result.c's field
 * table). */
#include <fp4scope/channels.h>
#include <fp4scope/decompose.h>
#include <fp4scope/record.h>

#include <stddef.h>

#define ROW(T, m, ty, fl, u, d) {#m, ty, offsetof(T, m), 1, -1, 0, NULL, fl, u, d, -1}
#define RES(T, n) {"reserved", FP4S_FT_U32, offsetof(T, reserved), n, -1, 0, NULL, 0, "", "zero; room for later fields", -1}
#define O FP4S_FF_OUTPUT
#define TYPE(fn, T, tname, rows) \
    const fp4s_rtype *fn(void) \
    { \
        static const fp4s_rtype t = {tname, sizeof(T), rows, sizeof rows / sizeof rows[0]}; \
        return &t; \
    }

/* ---- fp4s_channel_stat (output order of fp4-channels --json) ------------------------- */
#define T fp4s_channel_stat
static const fp4s_rfield channel_rows[] = {
    ROW(T, channel, FP4S_FT_SIZE, O, "", "channel index"),
    ROW(T, rank, FP4S_FT_SIZE, O, "", "1 = best"),
    ROW(T, score, FP4S_FT_F64, O, "", "the ranking score"),
    ROW(T, selected, FP4S_FT_BOOL, O, "", "in the compensation set"),
    ROW(T, energy_total, FP4S_FT_F64, O, "x^2", "||e_j||^2"),
    ROW(T, energy_scale, FP4S_FT_F64, O, "x^2", "its scale part"),
    ROW(T, energy_deadzone, FP4S_FT_F64, O, "x^2", "its dead-zone part"),
    ROW(T, energy_grid, FP4S_FT_F64, O, "x^2", "its grid part"),
    ROW(T, relative_error, FP4S_FT_F64, O, "1", "||e_j|| / ||x_j||"),
    ROW(T, residual_norm, FP4S_FT_F64, O, "x", "||e_j||"),
    ROW(T, amax, FP4S_FT_F64, O, "x", "max |x_j|"),
    ROW(T, deadzone_fraction, FP4S_FT_F64, O, "1", "share of the channel in the dead zone"),
    ROW(T, mean_abs_dx, FP4S_FT_F64, O, "x", "mean |Qa(x_j) - x_j| (NaN without a weight)"),
    ROW(T, mean_abs_dw, FP4S_FT_F64, O, "w", "mean |Qw(w_j) - w_j| (NaN without a weight)"),
    ROW(T, hcp, FP4S_FT_F64, O, "", "the HCP score (NaN without a weight)"),
    ROW(T, n, FP4S_FT_U64, O, "elements", "finite elements of the channel"),
    ROW(T, nonfinite, FP4S_FT_U64, O, "elements", "non-finite ones"),
    RES(T, 8),
};
TYPE(fp4s_rtype_channel_stat, T, "channel_stat", channel_rows)
#undef T
