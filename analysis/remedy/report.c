/* The fields of an evaluation in report order (one table for the table, CSV,
 * JSON and HDF5 writers) and the HDF5 report of fp4-remedy -o. */
#include "remedy_internal.h"

#include <fp4scope/tensor.h>

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5_internal.h"

#define S(f) static double g_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)r; return (double)s->f; }
#define R(f) static double g_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return (double)r->f; }
#define C(f) static double g_c_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return (double)r->cost.f; }
#define T(f) static double g_t_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return (double)r->time.f; }
#define B(f) static double g_b_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return r->act_before.f; }
#define A(f) static double g_a_##f(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return r->act_after.f; }
R(out_rel_error)
R(out_rel_error_vs_wfq)
R(out_rel_error_vs_w4a4qat)
R(out_rel_error_vs_own)
R(act_rel_error)
R(weight_rel_error)
R(noise_rel)
R(sr_bias)
R(sr_error_spread)
R(dz_left)
R(rest_left)
R(removable_before)
C(act_bits)
C(weight_bits)
C(act_extra_bits)
C(weight_extra_bits)
C(flops_base)
C(flops_extra)
C(flops_fp4)
C(flops_fp8)
C(flops_bf16)
C(flops_fp32)
C(bytes_base)
C(bytes_extra)
C(rac_channels)
C(rac_padded)
C(rac_tiles)
C(kept)
T(seconds)
T(base_seconds)
T(fp8_seconds)
T(bf16_seconds)
T(vs_base)
T(vs_fp8)
T(vs_bf16)
T(flops_fp4_equiv_extra)
B(relative_error)
B(ratio_scale)
B(ratio_deadzone)
B(ratio_grid)
B(ratio_cross)
A(relative_error)
A(ratio_scale)
A(ratio_deadzone)
A(ratio_grid)
A(ratio_cross)
R(err2_bf16)
static double g_r_ref2_wfq(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return r->ref2_wfq; }
static double g_r_ref2_w4a4qat(const fp4s_remedy_site *s, const fp4s_remedy_result *r) { (void)s; return r->ref2_w4a4qat; }
R(err2_wfq)
R(err2_w4a4qat)
R(dz_err2_before)
R(dz_err2_after)
R(rest_err2_before)
R(rest_err2_after)
S(m)
S(n)
S(k)
S(ref2_bf16)
S(ref2_wfq)
S(ref2_w4a4qat)
S(input_rel_diff)
S(act_only_rel_error)
S(weight_only_rel_error)
#undef S
#undef R
#undef C
#undef T
#undef B
#undef A

static const fp4s_remedy_field fields[] = {
    {"out_rel_error", "||Y^ - X_t W^T|| / ||X_t W^T|| (vs the BF16 trainer)", g_out_rel_error},
    {"out_rel_error_vs_wfq", "||Y^ - X_t W^T|| / ||X_t W^T||, W^ this remedy's weight operand (vs the aligned asymmetric-QAT trainer)", g_out_rel_error_vs_wfq},
    {"out_rel_error_vs_w4a4qat", "||Y^ - Qa(X_t) W^T|| / ||Qa(X_t) W^T|| (vs the aligned symmetric-QAT trainer)", g_out_rel_error_vs_w4a4qat},
    {"out_rel_error_vs_own", "||Y^ - X W^T|| / ||X W^T|| (vs the same side unquantized)", g_out_rel_error_vs_own},
    {"act_rel_error", "||X^ - X|| / ||X||, X^ what multiplies W (rac included)", g_act_rel_error},
    {"weight_rel_error", "||W^ - W|| / ||W||", g_weight_rel_error},
    {"noise_rel", "aqn: relative size of the noise it adds (NaN without aqn)", g_noise_rel},
    {"sr_bias", "sr: ||mean over the seeds of Y^ - X_t W^T|| / ||X_t W^T|| (NaN without sr)", g_sr_bias},
    {"sr_error_spread", "sr: standard deviation of out_rel_error over the seeds", g_sr_error_spread},
    {"dz_left", "activation error left on the dead-zone entries, after / before", g_dz_left},
    {"rest_left", "activation error left on the other entries, after / before", g_rest_left},
    {"removable_before", "1 - ratio_deadzone - ratio_grid: the share a perfect scale removes", g_removable_before},
    {"act_bits", "bits per activation element", g_c_act_bits},
    {"weight_bits", "bits per weight element", g_c_weight_bits},
    {"act_extra_bits", "activation bits per element over the base quantizer", g_c_act_extra_bits},
    {"weight_extra_bits", "weight bits per element over the base quantizer", g_c_weight_extra_bits},
    {"flops_base", "2 M N K of the W4A4 GEMM", g_c_flops_base},
    {"flops_extra", "FLOPs over the W4A4 GEMM (all units)", g_c_flops_extra},
    {"flops_fp4", "FP4 tensor-core FLOPs", g_c_flops_fp4},
    {"flops_fp8", "FP8 FLOPs", g_c_flops_fp8},
    {"flops_bf16", "BF16 FLOPs", g_c_flops_bf16},
    {"flops_fp32", "FP32 vector FLOPs", g_c_flops_fp32},
    {"bytes_base", "bytes of the W4A4 GEMM (operands, scales, BF16 output)", g_c_bytes_base},
    {"bytes_extra", "bytes over the W4A4 GEMM", g_c_bytes_extra},
    {"rac_channels", "rac: channels compensated per tile |I|", g_c_rac_channels},
    {"rac_padded", "rac: |I| rounded up to the block size", g_c_rac_padded},
    {"rac_tiles", "rac: selections (tiles)", g_c_rac_tiles},
    {"kept", "keep: entries kept in BF16", g_c_kept},
    {"predicted_seconds", "predicted GEMM time on the accelerator", g_t_seconds},
    {"w4a4_seconds", "predicted time of the plain W4A4 GEMM", g_t_base_seconds},
    {"fp8_seconds", "predicted time of the same GEMM in FP8 (W8A8)", g_t_fp8_seconds},
    {"bf16_seconds", "predicted time of the same GEMM in BF16", g_t_bf16_seconds},
    {"time_vs_w4a4", "predicted time / W4A4's", g_t_vs_base},
    {"time_vs_fp8", "predicted time / FP8's (below 1: faster than FP8)", g_t_vs_fp8},
    {"time_vs_bf16", "predicted time / BF16's", g_t_vs_bf16},
    {"flops_fp4_equiv_extra", "extra FLOPs priced at the FP4 rate (what --plan budgets)", g_t_flops_fp4_equiv_extra},
    {"act_before_relative_error", "decomposition of Qa(X) - X: relative error", g_b_relative_error},
    {"act_before_ratio_scale", "... scale-bias energy / ||e||^2", g_b_ratio_scale},
    {"act_before_ratio_deadzone", "... dead-zone energy / ||e||^2", g_b_ratio_deadzone},
    {"act_before_ratio_grid", "... grid-noise energy / ||e||^2", g_b_ratio_grid},
    {"act_before_ratio_cross", "... cross terms / ||e||^2", g_b_ratio_cross},
    {"act_after_relative_error", "the same identities with X^: relative error", g_a_relative_error},
    {"act_after_ratio_scale", "... ||X^ - Q*(X)||^2 / ||X^ - X||^2", g_a_ratio_scale},
    {"act_after_ratio_deadzone", "... dead-zone energy / ||X^ - X||^2", g_a_ratio_deadzone},
    {"act_after_ratio_grid", "... grid-noise energy / ||X^ - X||^2", g_a_ratio_grid},
    {"act_after_ratio_cross", "... cross terms / ||X^ - X||^2", g_a_ratio_cross},
    {"err2_bf16", "||Y^ - X_t W^T||^2", g_err2_bf16},
    {"err2_wfq", "||Y^ - X_t W^T||^2 (W^ as for out_rel_error_vs_wfq)", g_err2_wfq},
    {"err2_w4a4qat", "||Y^ - Qa(X_t) W^T||^2 (W^ as for out_rel_error_vs_w4a4qat)", g_err2_w4a4qat},
    {"ref2_wfq_aligned", "||X_t W^T||^2, W^ this remedy's weight operand", g_r_ref2_wfq},
    {"ref2_w4a4qat_aligned", "||Qa(X_t) W^T||^2, the same W^", g_r_ref2_w4a4qat},
    {"dz_err2_before", "activation error energy on the dead-zone entries, before", g_dz_err2_before},
    {"dz_err2_after", "... after", g_dz_err2_after},
    {"rest_err2_before", "activation error energy on the other entries, before", g_rest_err2_before},
    {"rest_err2_after", "... after", g_rest_err2_after},
    {"m", "tokens M", g_m},
    {"n", "outputs N", g_n},
    {"k", "reduction K", g_k},
    {"ref2_bf16", "||X_t W^T||^2", g_ref2_bf16},
    {"ref2_wfq", "||X_t Qw(W)^T||^2", g_ref2_wfq},
    {"ref2_w4a4qat", "||Qa(X_t) Qw(W)^T||^2", g_ref2_w4a4qat},
    {"input_rel_diff", "||X - X_t|| / ||X_t|| (NaN without X_t)", g_input_rel_diff},
    {"act_only_rel_error", "||Qa(X) W^T - X W^T|| / ||X W^T||", g_act_only_rel_error},
    {"weight_only_rel_error", "||X Qw(W)^T - X W^T|| / ||X W^T||", g_weight_only_rel_error},
};

const fp4s_remedy_field *fp4s_remedy_fields(size_t *n)
{
    if (n) *n = sizeof fields / sizeof fields[0];
    return fields;
}

/* ---- HDF5 report ------------------------------------------------------------------ */
static int put_strings(hid_t f, const char *name, const char **v, size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    hsize_t d = n;
    hid_t sp = H5Screate_simple(1, &d, NULL);
    hid_t ds = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = ds < 0 ? -1 : H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(sp);
    H5Tclose(t);
    return e < 0 ? -1 : 0;
}

static int put_doubles(hid_t f, const char *name, const double *v, size_t n, const char *desc)
{
    if (fp4s_h5_write_1d(f, name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, v, n)) return -1;
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    int e = ds < 0 ? -1 : fp4s_h5_attr_str(ds, "description", desc);
    if (ds >= 0) H5Dclose(ds);
    return e ? -1 : 0;
}

int fp4s_remedy_write_h5(const char *path, const fp4s_spec *act, const fp4s_spec *wt, const fp4s_accel *a,
                         const fp4s_remedy_row *rows, size_t n)
{
    if (!path || !act || !wt || (n && !rows)) return fp4s_error_set(FP4S_EINVAL, "remedy report: NULL argument");
    fp4s_h5_report w;
    int rc = fp4s_h5_report_begin(&w, path);
    if (rc) return rc;
    hid_t f = w.file;
    size_t nf;
    const fp4s_remedy_field *fl = fp4s_remedy_fields(&nf);
    const char **sv = calloc(n ? n : 1, sizeof *sv);
    double *dv = malloc((n ? n : 1) * sizeof *dv);
    char **canon = calloc(n ? n : 1, sizeof *canon);
    bool bad = !sv || !dv || !canon;
    char desc[512];
    if (!bad) {
        fp4s_spec_describe(act, desc, sizeof desc);
        bad |= fp4s_h5_attr_str(f, "activation_quantizer", desc) != 0;
        fp4s_spec_describe(wt, desc, sizeof desc);
        bad |= fp4s_h5_attr_str(f, "weight_quantizer", desc) != 0;
        bad |= fp4s_h5_attr_str(f, "tool", "fp4-remedy") != 0;
        if (a) {
            bad |= fp4s_h5_attr_str(f, "accelerator", a->name) != 0;
            bad |= fp4s_h5_attr_str(f, "accelerator_source", a->source) != 0;
        }
        bad |= fp4s_h5_attr_i64(f, "rows", (int64_t)n) != 0;
    }
    for (size_t i = 0; !bad && i < n; i++) {
        sv[i] = fp4s_remedy_label(&rows[i].res->remedy);
        sv[i] = strdup(sv[i]);
        size_t need = fp4s_remedy_describe(&rows[i].res->remedy, NULL, 0);
        canon[i] = malloc(need + 1);
        if (!sv[i] || !canon[i]) bad = true;
        else fp4s_remedy_describe(&rows[i].res->remedy, canon[i], need + 1);
    }
    if (!bad) bad |= put_strings(f, "remedy", sv, n) != 0;
    if (!bad) bad |= put_strings(f, "canonical", (const char **)canon, n) != 0;
    for (size_t i = 0; sv && i < n; i++) free((void *)sv[i]);
    if (!bad) {
        for (size_t i = 0; i < n; i++) sv[i] = rows[i].site ? rows[i].site : "";
        bad |= put_strings(f, "site", sv, n) != 0;
        for (size_t i = 0; i < n; i++) sv[i] = rows[i].source ? rows[i].source : "";
        bad |= put_strings(f, "source", sv, n) != 0;
        for (size_t i = 0; i < n; i++) dv[i] = (double)rows[i].step;
        bad |= put_doubles(f, "step", dv, n, "capture step (-1: not from a capture)") != 0;
    }
    for (size_t k = 0; !bad && k < nf; k++) {
        for (size_t i = 0; i < n; i++) dv[i] = fl[k].get(rows[i].info, rows[i].res);
        bad |= put_doubles(f, fl[k].name, dv, n, fl[k].desc) != 0;
    }
    for (size_t i = 0; canon && i < n; i++) free(canon[i]);
    free(canon);
    free(sv);
    free(dv);
    return fp4s_h5_report_end(&w, !bad, "writing the remedy report failed");
}
