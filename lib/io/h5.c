/* HDF5 sources: the row reader (hyperslabs). The shared HDF5 layer (errors,
 * attributes, types, writers) is h5util.c. */
#include "h5_internal.h"
#include "internal.h"

#include <fp4scope/codec.h>
#include <fp4scope/suggest.h>

#include <hdf5.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- listing datasets for "not found" messages ---------------------------- */
typedef struct {
    char *buf;
    size_t n, k, count;
    char **all;        /* every dataset's path (for "did you mean"), up to DLIST_MAX */
    size_t nall, cap;
} dlist;
#define DLIST_MAX 100000

static herr_t visit_cb(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)obj;
    dlist *d = data;
    if (info->type != H5O_TYPE_DATASET) return 0;
    if (d->count < 20 && d->k + 1 < d->n)
        d->k += (size_t)snprintf(d->buf + d->k, d->n - d->k, "%s/%s", d->count ? ", " : "", name);
    if (d->k >= d->n) d->k = d->n - 1;
    d->count++;
    if (d->nall < DLIST_MAX) {
        if (d->nall == d->cap) {
            size_t nc = d->cap ? 2 * d->cap : 64;
            char **na = realloc(d->all, nc * sizeof *na);
            if (!na) return 0; /* the suggestion is a courtesy: without memory there is none */
            d->all = na;
            d->cap = nc;
        }
        size_t l = strlen(name);
        char *p = malloc(l + 2);
        if (!p) return 0;
        p[0] = '/';
        memcpy(p + 1, name, l + 1);
        d->all[d->nall++] = p;
    }
    return 0;
}

/* The datasets of f for a message ("/a, /b, ... (47 in all)") into buf, and
 * with want, " did you mean '/x'?" (the nearest paths: fp4s_suggest) into dym. */
static void list_datasets(hid_t f, char *buf, size_t n, const char *want, char *dym, size_t dn)
{
    dlist d = {buf, n, 0, 0, NULL, 0, 0};
    buf[0] = '\0';
    if (dym && dn) dym[0] = '\0';
    H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &d, H5O_INFO_BASIC);
    H5Eclear2(H5E_DEFAULT);
    if (d.count == 0) snprintf(buf, n, "(none)");
    else if (d.count > 20 && d.k + 1 < n) snprintf(buf + d.k, n - d.k, ", ... (%zu in all)", d.count);
    if (want && dym && dn) {
        char w[1024];
        snprintf(w, sizeof w, "%s%s", want[0] == '/' ? "" : "/", want); /* paths are compared with their '/' */
        size_t idx[3], k = fp4s_suggest(w, (const char *const *)d.all, d.nall, idx, 3), u = 0;
        for (size_t i = 0; i < k && u + 1 < dn; i++) {
            int wr = snprintf(dym + u, dn - u, "%s'%s'", i == 0 ? " did you mean " : (i + 1 == k ? " or " : ", "),
                              d.all[idx[i]]);
            u = wr > 0 && (size_t)wr < dn - u ? u + (size_t)wr : dn - 1;
        }
        if (k && u + 2 < dn) snprintf(dym + u, dn - u, "?");
    }
    for (size_t i = 0; i < d.nall; i++) free(d.all[i]);
    free(d.all);
}

static const char *h5_type_desc(hid_t t, char *buf, size_t n)
{
    H5T_class_t c = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
        break;
    case H5T_FLOAT: snprintf(buf, n, "float%zu", sz * 8); break;
    case H5T_STRING: snprintf(buf, n, "string"); break;
    case H5T_COMPOUND: snprintf(buf, n, "compound"); break;
    case H5T_ENUM: snprintf(buf, n, "enum"); break;
    case H5T_ARRAY: snprintf(buf, n, "array"); break;
    case H5T_REFERENCE: snprintf(buf, n, "object or region reference"); break;
    case H5T_OPAQUE: snprintf(buf, n, "opaque"); break;
    case H5T_VLEN: snprintf(buf, n, "variable-length sequence"); break;
    case H5T_BITFIELD: snprintf(buf, n, "bitfield"); break;
    case H5T_TIME: snprintf(buf, n, "time"); break;
    default: snprintf(buf, n, "HDF5 type class %d", (int)c); break;
    }
    return buf;
}

static int src_open(struct fp4s_source *s)
{
    const char *P = s->path;
    char names[1024];
    hid_t f = fp4s_h5_open(P, H5F_ACC_RDONLY, true);
    if (f < 0 && fp4s_h5_refused()) return fp4s_h5_refused();
    if (f < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: not a readable HDF5 file (damaged or not HDF5; HDF5: %s)", P, fp4s_h5_msg());
    s->h5_file = f;
    if (!*s->name) {
        list_datasets(f, names, sizeof names, NULL, NULL, 0);
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: name a dataset as %s:/PATH; datasets: %s", P, P, names);
    }
    const char *D = s->name;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(f, D, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        H5Eclear2(H5E_DEFAULT);
        char dym[1200];
        list_datasets(f, names, sizeof names, D, dym, sizeof dym);
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: dataset not found;%s datasets: %s", P, D, dym, names);
    }
    if (oi.type != H5O_TYPE_DATASET)
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: is a %s, not a dataset", P, D,
                              oi.type == H5O_TYPE_GROUP ? "group" : "named datatype");
    hid_t d = H5Dopen2(f, D, H5P_DEFAULT);
    if (d < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open dataset (HDF5: %s)", P, D, fp4s_h5_msg());
    s->h5_dset = d;
    {
        char what[1200];
        snprintf(what, sizeof what, "%s: %s", P, D);
        int lrc = fp4s_h5_check_layout(d, what);
        if (lrc) return lrc;
    }

    hid_t t = H5Dget_type(d);
    if (t < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot read the datatype (HDF5: %s)", P, D, fp4s_h5_msg());
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    char tb[64], dtattr[64] = "";
    h5_type_desc(t, tb, sizeof tb);
    int has_dtattr = fp4s_h5_attr_get_str(d, "dtype", dtattr, sizeof dtattr) == 1;
    int rc = 0;
    if (cls == H5T_FLOAT && sz == 4) {
        s->dt = FP4S_DT_F32;
    } else if (cls == H5T_FLOAT && sz == 8) {
        s->dt = FP4S_DT_F64;
    } else if (cls == H5T_FLOAT && sz == 2) {
        size_t spos, epos, esize, mpos, msize;
        if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0 || spos != 15 || epos != 10 ||
            esize != 5 || mpos != 0 || msize != 10 || H5Tget_ebias(t) != 15)
            rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: 16-bit float type is not IEEE binary16", P, D);
        else
            s->dt = FP4S_DT_F16;
    } else if (cls == H5T_INTEGER && sz == 2 && has_dtattr && strcmp(dtattr, "bfloat16") == 0) {
        s->dt = FP4S_DT_BF16;
    } else if (cls == H5T_INTEGER && sz == 2) {
        rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: %s dataset without attribute dtype = \"bfloat16\"%s%s%s; "
                            "expected float32, float64, float16 or bfloat16 stored as uint16", P, D, tb,
                            has_dtattr ? " (dtype = \"" : "", has_dtattr ? dtattr : "", has_dtattr ? "\")" : "");
    } else {
        rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: %s dataset is not supported; expected float32, float64, "
                            "float16 or bfloat16 stored as uint16", P, D, tb);
    }
    H5Tclose(t);
    if (rc) return rc;

    hid_t sp = H5Dget_space(d);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[H5S_MAX_RANK];
    if (nd >= 0 && nd <= H5S_MAX_RANK) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5S_class_t scls = sp >= 0 ? H5Sget_simple_extent_type(sp) : H5S_NO_CLASS;
    if (sp >= 0) H5Sclose(sp);
    if (nd < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot read the dataspace (HDF5: %s)", P, D, fp4s_h5_msg());
    if (scls == H5S_NULL) return fp4s_error_set(FP4S_EEMPTY, "%s: %s: dataset has a null dataspace (no data)", P, D);
    if (nd == 0) return fp4s_error_set(FP4S_ESHAPE, "%s: %s: expected an array, found a scalar", P, D);
    if (nd > FP4S_MAX_RANK) return fp4s_error_set(FP4S_ESHAPE, "%s: %s: rank %d exceeds %d", P, D, nd, FP4S_MAX_RANK);
    s->rank = nd;
    for (int i = 0; i < nd; i++) s->dims[i] = dims[i];
    char what[1200];
    snprintf(what, sizeof what, "%s: %s", P, D);
    uint64_t r, c, n;
    int frc = fp4s_flatten_dims(what, nd, s->dims, &r, &c);
    if (frc) return frc;
    if (r == 0 || c == 0) return fp4s_error_set(FP4S_EEMPTY, "%s: %s: dataset is empty", P, D);
    if (__builtin_mul_overflow(r, c, &n) || n > (uint64_t)SIZE_MAX / 8)
        return fp4s_error_set(FP4S_ERANGE, "%s: %s: %" PRIu64 " x %" PRIu64 " overflows", P, D, r, c);
    s->rows = (size_t)r;
    s->cols = (size_t)c;
    return 0;
}

/* The next box of a row range: rows [a, a + r) of the matrix view
 * [prod(leading), last] of an N-D dataset are the largest hyperslab that
 * starts at row a (whole trailing blocks where a is aligned to them), at most
 * 2 (N - 1) boxes per range. Fills start/count (rank entries) and returns the
 * rows it covers. */
static size_t next_box(const struct fp4s_source *s, uint64_t a, uint64_t r, hsize_t *start, hsize_t *count)
{
    int nd = s->rank, k = nd - 1;
    if (nd == 1) {
        start[0] = 0;
        count[0] = s->cols;
        return 1;
    }
    uint64_t S[FP4S_MAX_RANK];
    S[k - 1] = 1;
    for (int i = k - 2; i >= 0; i--) S[i] = S[i + 1] * s->dims[i + 1];
    int j = 0;
    while (j < k - 1 && !(a % S[j] == 0 && r >= S[j])) j++;
    uint64_t cj = (a / S[j]) % s->dims[j], m = r / S[j];
    if (m > s->dims[j] - cj) m = s->dims[j] - cj;
    for (int i = 0; i < k; i++) {
        start[i] = i <= j ? (a / S[i]) % s->dims[i] : 0;
        count[i] = i < j ? 1 : i == j ? m : s->dims[i];
    }
    start[k] = 0;
    count[k] = s->cols;
    return (size_t)(m * S[j]);
}

/* Memory type for the stored dtype, unconverted. Caller closes if *own. */
static hid_t raw_memtype(const struct fp4s_source *s, int *own)
{
    *own = 0;
    switch (s->dt) {
    case FP4S_DT_F32: return H5T_NATIVE_FLOAT;
    case FP4S_DT_F64: return H5T_NATIVE_DOUBLE;
    case FP4S_DT_BF16: {
        hid_t ft = H5Dget_type((hid_t)s->h5_dset);
        H5T_sign_t sg = H5Tget_sign(ft);
        H5Tclose(ft);
        return sg == H5T_SGN_NONE ? H5T_NATIVE_UINT16 : H5T_NATIVE_INT16;
    }
    case FP4S_DT_F16: {
        hid_t ft = H5Dget_type((hid_t)s->h5_dset);
        hid_t mt = H5Tcopy(ft);
        H5Tclose(ft);
        H5Tset_order(mt, H5T_ORDER_LE);
        *own = 1;
        return mt;
    }
    default: return -1;
    }
}

static int src_read(struct fp4s_source *s, size_t row0, size_t nrows, void *out, size_t ld, int raw)
{
    hid_t d = (hid_t)s->h5_dset;
    int rc = 0, own = 0;
    bool direct = raw || s->dt == FP4S_DT_F32 || s->dt == FP4S_DT_F64;
    hid_t mt = direct && !raw ? H5T_NATIVE_FLOAT : raw_memtype(s, &own);
    unsigned char *base = out; /* raw: stored bytes; converted: uint16 scratch */
    size_t esz = fp4s_dtype_size(s->dt);
    if (!direct) {
        rc = fp4s_src_scratch(s, nrows * s->cols * 2);
        if (rc) goto done;
        base = s->scratch;
        esz = 2;
    }
    for (size_t done = 0; done < nrows;) {
        hsize_t start[FP4S_MAX_RANK], count[FP4S_MAX_RANK];
        size_t nb = next_box(s, row0 + done, nrows - done, start, count);
        hid_t fsp = H5Dget_space(d), msp;
        void *dst;
        if (direct && !raw) {
            /* HDF5 converts float32/float64 to float32 and honours the row stride. */
            hsize_t mdims[2] = {nb, ld}, mstart[2] = {0, 0}, mcount[2] = {nb, s->cols};
            msp = H5Screate_simple(2, mdims, NULL);
            if (msp >= 0) H5Sselect_hyperslab(msp, H5S_SELECT_SET, mstart, NULL, mcount, NULL);
            dst = (float *)out + done * ld;
        } else {
            /* the same shape as the file selection keeps HDF5 on its fast path */
            msp = H5Screate_simple(s->rank, count, NULL);
            dst = base + done * s->cols * esz;
        }
        herr_t e = fsp < 0 || msp < 0 ? -1 : H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL);
        if (e >= 0) e = H5Dread(d, mt, msp, fsp, H5P_DEFAULT, dst);
        if (msp >= 0) H5Sclose(msp);
        if (fsp >= 0) H5Sclose(fsp);
        if (e < 0) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot read rows %zu..%zu (HDF5: %s)", s->path, s->name,
                                row0, row0 + nrows - 1, fp4s_h5_msg());
            goto done;
        }
        done += nb;
    }
    if (!direct) {
        const uint16_t *h = s->scratch;
        float *o = out;
        for (size_t r = 0; r < nrows; r++) {
            if (s->dt == FP4S_DT_F16) fp4s_fp16_to_f32(h + r * s->cols, o + r * ld, s->cols);
            else fp4s_bf16_to_f32(h + r * s->cols, o + r * ld, s->cols);
        }
    }
done:
    if (own) H5Tclose(mt);
    return rc;
}

int fp4s_h5_src_open(struct fp4s_source *s)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = src_open(s);
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_h5_src_read(struct fp4s_source *s, size_t row0, size_t nrows, void *out, size_t ld, int raw)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = src_read(s, row0, nrows, out, ld, raw);
    fp4s_h5_quiet_end(&q);
    return rc;
}

uint64_t fp4s_h5_src_data_offset(const struct fp4s_source *s)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    haddr_t a = s->h5_dset >= 0 ? H5Dget_offset((hid_t)s->h5_dset) : HADDR_UNDEF; /* contiguous only */
    H5Eclear2(H5E_DEFAULT);
    fp4s_h5_quiet_end(&q);
    return a == HADDR_UNDEF ? UINT64_MAX : (uint64_t)a;
}

void fp4s_h5_src_close(struct fp4s_source *s)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    if (s->h5_dset >= 0) H5Dclose((hid_t)s->h5_dset);
    if (s->h5_file >= 0) H5Fclose((hid_t)s->h5_file);
    s->h5_dset = s->h5_file = -1;
    fp4s_h5_quiet_end(&q);
}
