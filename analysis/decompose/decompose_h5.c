/* HDF5 side of the decomposition: the synthetic-capture label and the report
 * writer (layout documented in man/fp4-decompose.1). */
#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#include <hdf5.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decomp_h5.h"
#include "io/h5_internal.h"

bool fp4s_decomp_file_synthetic(const char *path)
{
    if (!path) return false;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
    }
    bool syn = false;
    if (H5Aexists(f, "synthetic") > 0) {
        hid_t a = H5Aopen(f, "synthetic", H5P_DEFAULT);
        if (a >= 0) {
            hid_t t = H5Aget_type(a);
            H5T_class_t cl = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
            if (cl == H5T_INTEGER) {
                long long v = 0;
                if (H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0) syn = v == 1;
            } else if (cl == H5T_FLOAT) {
                double v = 0;
                if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) syn = v == 1.0;
            }
            if (t >= 0) H5Tclose(t);
            H5Aclose(a);
        }
    }
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return syn;
}

int fp4s_decomp_h5_dset(hid_t loc, const char *name, hid_t mem_type, hid_t file_type,
                        const void *data, size_t n)
{
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    if (sp < 0) return -1;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = H5Dcreate2(loc, name, file_type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    int rc = -1;
    if (ds >= 0) {
        rc = (n == 0 || H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0) ? 0 : -1;
        H5Dclose(ds);
    }
    H5Sclose(sp);
    return rc;
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
            rc = fp4s_h5_attr_i64((int64_t)obj, f[i].name, (int64_t)v);
        } else {
            rc = fp4s_h5_attr_f64((int64_t)obj, f[i].name, fp4s_decomp_field_value(r, &f[i]));
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
    if (fp4s_decomp_h5_dset(g, p, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, edges, FP4S_HIST_BINS + 1)) return -1;
    snprintf(p, sizeof p, "histograms/%s/counts", name);
    if (fp4s_decomp_h5_dset(g, p, H5T_NATIVE_UINT64, H5T_STD_U64LE, h->counts, FP4S_HIST_BINS)) return -1;
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
        if (fp4s_decomp_h5_dset(g, p, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, col, ng)) goto out;
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
    fp4s_outfile *of = NULL;
    int rc = fp4s_outfile_begin(path, &of);
    if (rc) return rc;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(fp4s_outfile_tmppath(of), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        fp4s_outfile_abort(&of);
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot create HDF5 file", path);
    }
    char desc[512];
    fp4s_spec_describe(s, desc, sizeof desc);
    int bad = 0;
    bad |= fp4s_h5_attr_str((int64_t)f, "fp4scope_schema", "fp4scope-decompose/1") != 0;
    bad |= fp4s_h5_attr_str((int64_t)f, "format", fp4s_format_name(s->format)) != 0;
    bad |= fp4s_h5_attr_str((int64_t)f, "profile", s->profile) != 0;
    bad |= fp4s_h5_attr_str((int64_t)f, "spec", desc) != 0;
    bad |= fp4s_h5_attr_i64((int64_t)f, "inputs", (int64_t)n) != 0;
    if (n) bad |= fp4s_h5_attr_str((int64_t)f, "by", fp4s_group_name(fp4s_decomp_by(items[0].acc))) != 0;
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
        bad |= fp4s_h5_attr_str((int64_t)g, "source", it->source ? it->source : "") != 0;
        bad |= fp4s_h5_attr_i64((int64_t)g, "step", it->step) != 0;
        bad |= fp4s_h5_attr_str((int64_t)g, "site", it->site ? it->site : "") != 0;
        bad |= fp4s_h5_attr_str((int64_t)g, "side", it->side ? it->side : "") != 0;
        bad |= fp4s_h5_attr_i64((int64_t)g, "synthetic", it->synthetic) != 0;
        bad |= fp4s_h5_attr_i64((int64_t)g, "rows", (int64_t)fp4s_decomp_rows(it->acc)) != 0;
        bad |= fp4s_h5_attr_i64((int64_t)g, "cols", (int64_t)fp4s_decomp_cols(it->acc)) != 0;
        bad |= write_result_attrs(g, &r) != 0;
        fp4s_decomp_hist h;
        fp4s_decomp_hist_get(it->acc, FP4S_HIST_DELTA, &h);
        bad |= write_hist(g, "delta", &h) != 0;
        fp4s_decomp_hist_get(it->acc, FP4S_HIST_ERROR, &h);
        bad |= write_hist(g, "error", &h) != 0;
        bad |= write_groups(g, it->acc) != 0;
        H5Gclose(g);
    }
    if (rollup && !bad) {
        hid_t g = H5Gcreate2(f, "/rollup", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) bad = 1;
        else {
            fp4s_decomp_result r;
            fp4s_decomp_summary(rollup, &r);
            bad |= write_result_attrs(g, &r) != 0;
            fp4s_decomp_hist h;
            fp4s_decomp_hist_get(rollup, FP4S_HIST_DELTA, &h);
            bad |= write_hist(g, "delta", &h) != 0;
            fp4s_decomp_hist_get(rollup, FP4S_HIST_ERROR, &h);
            bad |= write_hist(g, "error", &h) != 0;
            H5Gclose(g);
        }
    }
    if (H5Fclose(f) < 0) bad = 1;
    H5Eclear2(H5E_DEFAULT);
    if (bad) {
        fp4s_outfile_abort(&of);
        return fp4s_error_set(FP4S_EWRITE, "%s: writing the HDF5 report failed", path);
    }
    return fp4s_outfile_commit(&of);
}
