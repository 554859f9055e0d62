/* HDF5 side of the decomposition: the synthetic-capture label and the report
 * writer (layout documented in man/fp4-decompose.1). */
#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#include <hdf5.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5_internal.h"

bool fp4s_decomp_file_synthetic(const char *path)
{
    if (!path) return false;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    bool syn = false;
    hid_t f = H5Fis_hdf5(path) > 0 ? fp4s_h5_open(path, H5F_ACC_RDONLY, false) : -1;
    if (f >= 0) {
        int64_t v = 0;
        syn = fp4s_h5_attr_get_i64(f, "synthetic", &v) == 1 && v == 1;
        H5Fclose(f);
    }
    H5Eclear2(H5E_DEFAULT);
    fp4s_h5_quiet_end(&q);
    return syn;
}

static int write_result_attrs(hid_t obj, const fp4s_decomp_result *r)
{
    size_t nf;
    const fp4s_decomp_field *f = fp4s_decomp_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        int rc;
        if (f[i].is_count) {
            uint64_t v;
            memcpy(&v, (const char *)r + f[i].offset, sizeof v);
            rc = fp4s_h5_attr_i64(obj, f[i].name, (int64_t)v);
        } else {
            rc = fp4s_h5_attr_f64(obj, f[i].name, fp4s_decomp_field_value(r, &f[i]));
        }
        if (rc) return rc;
    }
    return 0;
}

static int write_hist(hid_t g, const char *name, const fp4s_decomp_hist *h)
{
    double edges[FP4S_HIST_BINS + 1];
    for (int i = 0; i <= FP4S_HIST_BINS; i++) edges[i] = h->lo + (h->hi - h->lo) * i / FP4S_HIST_BINS;
    char p[64];
    snprintf(p, sizeof p, "histograms/%s/edges", name);
    if (fp4s_h5_write_1d(g, p, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, edges, FP4S_HIST_BINS + 1)) return -1;
    snprintf(p, sizeof p, "histograms/%s/counts", name);
    if (fp4s_h5_write_1d(g, p, H5T_NATIVE_UINT64, H5T_STD_U64LE, h->counts, FP4S_HIST_BINS)) return -1;
    return 0;
}

static int write_groups(hid_t g, const fp4s_decomp *acc)
{
    size_t ng = fp4s_decomp_ngroups(acc);
    if (ng == 0) return 0;
    size_t nf;
    const fp4s_decomp_field *f = fp4s_decomp_fields(&nf);
    fp4s_decomp_result *all = malloc(ng * sizeof *all);
    double *col = malloc(ng * sizeof *col);
    int rc = -1;
    if (!all || !col) goto out;
    for (size_t i = 0; i < ng; i++)
        if (fp4s_decomp_group(acc, i, &all[i])) goto out;
    for (size_t k = 0; k < nf; k++) {
        char p[96];
        for (size_t i = 0; i < ng; i++) col[i] = fp4s_decomp_field_value(&all[i], &f[k]);
        snprintf(p, sizeof p, "groups/%s", f[k].name);
        if (fp4s_h5_write_1d(g, p, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, col, ng)) goto out;
    }
    rc = 0;
out:
    free(all);
    free(col);
    return rc;
}

int fp4s_decomp_write_h5(const char *path, const fp4s_spec *s, const fp4s_decomp_item *items,
                         size_t n, const fp4s_decomp *rollup)
{
    if (!path || !s || (n && !items)) return fp4s_error_set(FP4S_EINVAL, "report: NULL argument");
    fp4s_h5_report w;
    int rc = fp4s_h5_report_begin(&w, path);
    if (rc) return rc;
    hid_t f = w.file;
    char desc[512];
    fp4s_spec_describe(s, desc, sizeof desc);
    int bad = 0;
    if (!bad) bad = fp4s_h5_attr_str(f, "fp4scope_schema", "fp4scope-decompose/1") != 0;
    if (!bad) bad = fp4s_h5_attr_str(f, "format", fp4s_format_name(s->format)) != 0;
    if (!bad) bad = fp4s_h5_attr_str(f, "profile", s->profile) != 0;
    if (!bad) bad = fp4s_h5_attr_str(f, "spec", desc) != 0;
    if (!bad) bad = fp4s_h5_attr_i64(f, "inputs", (int64_t)n) != 0;
    if (n) if (!bad) bad = fp4s_h5_attr_str(f, "by", fp4s_group_name(fp4s_decomp_by(items[0].acc))) != 0;
    for (size_t i = 0; i < n && !bad; i++) {
        char gname[64];
        snprintf(gname, sizeof gname, "/inputs/%zu", i);
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        hid_t g = H5Gcreate2(f, gname, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Pclose(lcpl);
        if (g < 0) {
            bad = 1;
            break;
        }
        const fp4s_decomp_item *it = &items[i];
        fp4s_decomp_result r;
        fp4s_decomp_summary(it->acc, &r);
        if (!bad) bad = fp4s_h5_attr_str(g, "source", it->source ? it->source : "") != 0;
        if (!bad) bad = fp4s_h5_attr_i64(g, "step", it->step) != 0;
        if (!bad) bad = fp4s_h5_attr_str(g, "site", it->site ? it->site : "") != 0;
        if (!bad) bad = fp4s_h5_attr_str(g, "side", it->side ? it->side : "") != 0;
        if (!bad) bad = fp4s_h5_attr_i64(g, "synthetic", it->synthetic) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(g, "rows", (int64_t)fp4s_decomp_rows(it->acc)) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(g, "cols", (int64_t)fp4s_decomp_cols(it->acc)) != 0;
        if (!bad) bad = write_result_attrs(g, &r) != 0;
        fp4s_decomp_hist h;
        fp4s_decomp_hist_get(it->acc, FP4S_HIST_DELTA, &h);
        if (!bad) bad = write_hist(g, "delta", &h) != 0;
        fp4s_decomp_hist_get(it->acc, FP4S_HIST_ERROR, &h);
        if (!bad) bad = write_hist(g, "error", &h) != 0;
        if (!bad) bad = write_groups(g, it->acc) != 0;
        H5Gclose(g);
    }
    if (rollup && !bad) {
        hid_t g = H5Gcreate2(f, "/rollup", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) bad = 1;
        else {
            fp4s_decomp_result r;
            fp4s_decomp_summary(rollup, &r);
            if (!bad) bad = write_result_attrs(g, &r) != 0;
            fp4s_decomp_hist h;
            fp4s_decomp_hist_get(rollup, FP4S_HIST_DELTA, &h);
            if (!bad) bad = write_hist(g, "delta", &h) != 0;
            fp4s_decomp_hist_get(rollup, FP4S_HIST_ERROR, &h);
            if (!bad) bad = write_hist(g, "error", &h) != 0;
            H5Gclose(g);
        }
    }
    return fp4s_h5_report_end(&w, !bad, "writing the HDF5 report failed");
}
