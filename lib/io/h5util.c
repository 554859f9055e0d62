/* The internal HDF5 layer (h5_internal.h): error printing and messages,
 * attributes, element types, paths, and the atomic HDF5 output files of the
 * report writers. lib/io, lib/capture and analysis/ all go through it. */
#include "h5_internal.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------ */
/* After reading a damaged file libhdf5 may hold internal structures it cannot
 * release, and its exit handler then prints "HDF5: infinite loop closing
 * library" when automatic error printing is on (the caller's default). The
 * library never prints: its own exit handler, registered after HDF5's and so
 * run before it, switches that printing off for the shutdown. */
static void quiet_at_exit(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }
static void register_quiet_at_exit(void)
{
    H5open(); /* HDF5 registers its exit handler first: ours runs before it */
    atexit(quiet_at_exit);
}
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* A quiet section installs record_fail as HDF5's automatic error function:
 * it prints nothing, keeps the message of the call that failed (the error
 * stack is cleared by the next API call, a close in the cleanup, before the
 * caller asks fp4s_h5_msg() why), and in a guard child passes the stack on
 * to the watch that notices failed allocations (fp4s_h5_quiet_watch). */
static H5E_auto2_t quiet_fn;
static void *quiet_data;
static _Thread_local unsigned quiet_depth;
static _Thread_local char last_fail[320];

static void stack_msg(hid_t estack, char *buf, size_t n);

static herr_t record_fail(hid_t estack, void *data)
{
    (void)data;
    stack_msg(estack, last_fail, sizeof last_fail);
    if (quiet_fn) quiet_fn(estack, quiet_data);
    return 0;
}

void fp4s_h5_quiet_watch(H5E_auto2_t fn, void *data)
{
    quiet_fn = fn;
    quiet_data = data;
    H5Eset_auto2(H5E_DEFAULT, record_fail, NULL);
}

void fp4s_h5_quiet_begin(fp4s_h5_quiet *q)
{
    pthread_once(&exit_once, register_quiet_at_exit);
    if (H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data) < 0) {
        q->func = NULL;
        q->data = NULL;
    }
    if (quiet_depth++ == 0) last_fail[0] = '\0'; /* a failure of an earlier call is not this one's */
    H5Eset_auto2(H5E_DEFAULT, record_fail, NULL);
}

void fp4s_h5_quiet_end(const fp4s_h5_quiet *q)
{
    if (quiet_depth) quiet_depth--;
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

static _Thread_local char h5msg[320];

typedef struct msg_walk {
    char first[192];   /* the innermost description, up to its first ',' (not a plugin search's) */
    char plugin[192];  /* the innermost description of a plugin search, if that is all there is */
    char reason[128];  /* "error message = '...'" of a system call, if any frame has one */
} msg_walk;

static void cut(char *dst, size_t n, const char *desc)
{
    size_t k = strcspn(desc, ",");
    if (k >= n) k = n - 1;
    memcpy(dst, desc, k);
    dst[k] = '\0';
}

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    msg_walk *w = data;
    if (!e->desc) return 0;
    /* a filter that is not there says "required filter 'lzf' is not
     * registered" above the search of the plugin directory that failed */
    bool plugin = e->maj_num == H5E_PLUGIN;
    if (plugin && !w->plugin[0]) cut(w->plugin, sizeof w->plugin, e->desc);
    if (!plugin && !w->first[0]) cut(w->first, sizeof w->first, e->desc);
    const char *r = w->reason[0] || plugin ? NULL : strstr(e->desc, "error message = '");
    if (r) {
        r += strlen("error message = '");
        size_t k = strcspn(r, "'");
        if (k >= sizeof w->reason) k = sizeof w->reason - 1;
        memcpy(w->reason, r, k);
        w->reason[k] = '\0';
    }
    return 0;
}

static void stack_msg(hid_t estack, char *buf, size_t n)
{
    msg_walk w;
    w.first[0] = w.plugin[0] = w.reason[0] = '\0';
    H5Ewalk2(estack, H5E_WALK_UPWARD, walk_cb, &w);
    const char *first = w.first[0] ? w.first : w.plugin;
    /* HDF5's "data error detected by Fletcher32 checksum": said plainly */
    if (strstr(first, "Fletcher32 checksum")) first = "the data does not match its Fletcher-32 checksum: it is damaged";
    if (first[0] && w.reason[0])
        snprintf(buf, n, "%s: %s", first, w.reason);
    else
        snprintf(buf, n, "%s", first[0] ? first : w.reason);
}

const char *fp4s_h5_msg(void)
{
    stack_msg(H5E_DEFAULT, h5msg, sizeof h5msg);
    if (!h5msg[0]) snprintf(h5msg, sizeof h5msg, "%s", last_fail[0] ? last_fail : "no detail from HDF5");
    return h5msg;
}

/* ---- attributes -------------------------------------------------------------- */
int fp4s_h5_attr_get_str(hid_t obj, const char *name, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT); /* fails when absent: one lookup, not two */
    if (a < 0) return H5Aexists(obj, name) == 0 ? 0 : -1;
    hid_t t = H5Aget_type(a);
    int rc = -1;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
        hid_t sp = H5Aget_space(a);
        hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
        if (sp >= 0) H5Sclose(sp);
        if (np == 1) {
            if (H5Tis_variable_str(t) > 0) {
                hid_t mt = H5Tcopy(H5T_C_S1);
                H5Tset_size(mt, H5T_VARIABLE);
                H5Tset_cset(mt, H5Tget_cset(t));
                char *s = NULL;
                if (H5Aread(a, mt, &s) >= 0) {
                    snprintf(buf, n, "%s", s ? s : "");
                    rc = 1;
                    if (s) H5free_memory(s);
                }
                H5Tclose(mt);
            } else {
                size_t sz = H5Tget_size(t);
                if (sz == 0 || sz > ((size_t)1 << 20)) goto out; /* a damaged size */
                char *tmp = calloc(1, sz + 1);
                hid_t mt = H5Tcopy(H5T_C_S1);
                H5Tset_size(mt, sz + 1);
                H5Tset_strpad(mt, H5T_STR_NULLTERM);
                H5Tset_cset(mt, H5Tget_cset(t)); /* HDF5 does not convert ASCII <-> UTF-8 */
                if (tmp && H5Aread(a, mt, tmp) >= 0) {
                    snprintf(buf, n, "%s", tmp);
                    rc = 1;
                }
                H5Tclose(mt);
                free(tmp);
            }
        }
    }
out:
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int fp4s_h5_attr_get_i64(hid_t obj, const char *name, int64_t *v)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return H5Aexists(obj, name) == 0 ? 0 : -1;
    hid_t t = H5Aget_type(a);
    hid_t sp = H5Aget_space(a);
    int rc = -1;
    H5T_class_t cl = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if ((cl == H5T_INTEGER || cl == H5T_FLOAT) && sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1) {
        long long x = 0;
        if (H5Aread(a, H5T_NATIVE_LLONG, &x) >= 0) {
            *v = x;
            rc = 1;
        }
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* Create or replace an attribute: a scalar (n = 0) or n elements. */
static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v, size_t n)
{
    if (!name || !*name) return fp4s_error_set(FP4S_EINVAL, "empty attribute name");
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "attribute %s: cannot replace it (HDF5: %s)", name, fp4s_h5_msg());
    hid_t sp = -1, a = -1;
    if (!rc) {
        hsize_t dim = n;
        sp = n ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_SCALAR);
        a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (a < 0 || H5Awrite(a, mtype, v) < 0)
            rc = fp4s_error_set(FP4S_EWRITE, "attribute %s: cannot write (HDF5: %s)", name, fp4s_h5_msg());
    }
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    fp4s_h5_quiet_end(&q);
    return rc;
}

/* Variable-length UTF-8, as h5py writes str attributes and reads them back as
 * str. (A fixed-length string would keep the text out of the global heap,
 * which libhdf5 1.10 reads past its buffer when the heap is damaged, but
 * h5py reads fixed-length strings as bytes: every reader's
 * f.attrs['fp4scope_schema'].split('/') would break. The damaged heap is
 * handled by fp4s_h5_validate instead.) */
int fp4s_h5_attr_str(hid_t obj, const char *name, const char *value)
{
    if (!value) value = "";
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = attr_write(obj, name, t, t, &value, 0);
    H5Tclose(t);
    return rc;
}

int fp4s_h5_attr_f64(hid_t obj, const char *name, double value)
{
    return attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, 0);
}

int fp4s_h5_attr_f32(hid_t obj, const char *name, float value)
{
    return attr_write(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &value, 0);
}

int fp4s_h5_attr_i64(hid_t obj, const char *name, int64_t value)
{
    return attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, 0);
}

int fp4s_h5_attr_array(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v, size_t n)
{
    if (!n) return fp4s_error_set(FP4S_EINVAL, "attribute %s: no elements", name ? name : "");
    return attr_write(obj, name, ftype, mtype, v, n);
}

/* ---- element types and paths -------------------------------------------------- */
hid_t fp4s_h5_type(fp4s_dtype dt)
{
    switch (dt) {
    case FP4S_DT_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case FP4S_DT_F64: return H5Tcopy(H5T_IEEE_F64LE);
    case FP4S_DT_F16: {
        /* IEEE binary16 as h5py and numpy's float16 write it. */
        hid_t t = H5Tcopy(H5T_IEEE_F32LE);
        if (t < 0) return t;
        if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
            H5Tset_ebias(t, 15) < 0) {
            H5Tclose(t);
            return -1;
        }
        return t;
    }
    case FP4S_DT_BF16:
    case FP4S_DT_U16: return H5Tcopy(H5T_STD_U16LE);
    case FP4S_DT_U8: return H5Tcopy(H5T_STD_U8LE);
    case FP4S_DT_I32: return H5Tcopy(H5T_STD_I32LE);
    case FP4S_DT_I64: return H5Tcopy(H5T_STD_I64LE);
    }
    return -1;
}

int fp4s_h5_dset_dtype(hid_t d, fp4s_dtype *dt)
{
    hid_t t = H5Dget_type(d);
    if (t < 0) return FP4S_EFORMAT;
    H5T_class_t cl = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    H5T_sign_t sg = cl == H5T_INTEGER ? H5Tget_sign(t) : H5T_SGN_NONE;
    H5Tclose(t);
    if (cl == H5T_FLOAT) {
        if (sz == 4) { *dt = FP4S_DT_F32; return 0; }
        if (sz == 8) { *dt = FP4S_DT_F64; return 0; }
        if (sz == 2) { *dt = FP4S_DT_F16; return 0; }
    } else if (cl == H5T_INTEGER) {
        if (sz == 2 && sg == H5T_SGN_NONE) {
            char buf[32];
            *dt = (fp4s_h5_attr_get_str(d, "dtype", buf, sizeof buf) == 1 &&
                   strcmp(buf, "bfloat16") == 0) ? FP4S_DT_BF16 : FP4S_DT_U16;
            return 0;
        }
        if (sz == 1 && sg == H5T_SGN_NONE) { *dt = FP4S_DT_U8; return 0; }
        if (sz == 4 && sg == H5T_SGN_2) { *dt = FP4S_DT_I32; return 0; }
        if (sz == 8 && sg == H5T_SGN_2) { *dt = FP4S_DT_I64; return 0; }
    }
    return FP4S_EDTYPE;
}

int fp4s_h5_check_layout(hid_t d, const char *what)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    hid_t sp = H5Dget_space(d), t = H5Dget_type(d), pl = H5Dget_create_plist(d), fapl = -1;
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    size_t esz = t >= 0 ? H5Tget_size(t) : 0;
    hsize_t dims[H5S_MAX_RANK], maxd[H5S_MAX_RANK];
    if (nd < 0 || nd > H5S_MAX_RANK || t < 0 || esz == 0 || pl < 0 ||
        H5Sget_simple_extent_dims(sp, dims, maxd) < 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: unreadable dataspace, datatype or layout (HDF5: %s)", what,
                            fp4s_h5_msg());
        goto out;
    }
    uint64_t logical = esz;
    bool over = false;
    for (int i = 0; i < nd; i++) over |= __builtin_mul_overflow(logical, (uint64_t)dims[i], &logical);
    H5D_layout_t lay = H5Pget_layout(pl);
    if (lay == H5D_CHUNKED) {
        hsize_t ch[H5S_MAX_RANK];
        int cr = H5Pget_chunk(pl, H5S_MAX_RANK, ch);
        uint64_t cb = esz;
        bool cover = cr != nd;
        for (int i = 0; i < nd && !cover; i++) {
            cover |= ch[i] == 0 || (maxd[i] != H5S_UNLIMITED && ch[i] > maxd[i] && ch[i] > 1);
            cover |= __builtin_mul_overflow(cb, (uint64_t)ch[i], &cb);
        }
        if (cover || cb > ((uint64_t)1 << 32)) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: damaged layout: chunks of rank %d do not fit the %d-D "
                                "dataset (a chunk larger than a fixed dimension, or over 4 GiB)", what, cr, nd);
            goto out;
        }
    }
    /* a claimed size the file cannot hold: deflate packs at most ~1030:1 */
    hsize_t stored = H5Dget_storage_size(d);
    uint64_t fsize = 0;
    hid_t f = H5Iget_file_id(d);
    if (f >= 0) {
        hsize_t fs = 0;
        if (H5Fget_filesize(f, &fs) >= 0) fsize = fs;
        H5Fclose(f);
    }
    uint64_t bound = lay == H5D_CHUNKED ? (uint64_t)stored * 1100 + ((uint64_t)1 << 20) : fsize;
    int next = lay == H5D_CONTIGUOUS ? H5Pget_external_count(pl) : 0;
    if (lay == H5D_VIRTUAL) bound = 0; /* the data lives in the source files */
    if (next > 0) {
        /* external storage: the data lives in the files the list names, at
         * most the sizes it declares (HDF5 requires them to cover the data) */
        bound = 0;
        for (int i = 0; i < next && bound != UINT64_MAX; i++) {
            char name[8];
            off_t off;
            hsize_t size;
            if (H5Pget_external(pl, (unsigned)i, sizeof name, name, &off, &size) < 0 || size == H5F_UNLIMITED ||
                __builtin_add_overflow(bound, (uint64_t)size, &bound))
                bound = UINT64_MAX;
        }
        stored = 0; /* H5Dget_storage_size counts the external bytes, not this file's */
    }
    /* storage never allocated (created and never written, as h5py's
     * create_dataset(shape=..., dtype=...) leaves it): every element is the
     * fill value and nothing of the file is claimed. A damaged dimension of a
     * written dataset keeps its allocated storage, so it is still caught. */
    H5D_space_status_t sst = H5D_SPACE_STATUS_ERROR;
    bool unwritten = (lay == H5D_CHUNKED || (lay == H5D_CONTIGUOUS && next == 0)) &&
                     H5Dget_space_status(d, &sst) >= 0 && sst == H5D_SPACE_STATUS_NOT_ALLOCATED && stored == 0;
    if (unwritten) bound = 0;
    if (over || (fsize && (uint64_t)stored > fsize) || (bound && logical > bound)) {
        char sb[256] = "";
        size_t k = 0;
        for (int i = 0; i < nd && k + 24 < sizeof sb; i++)
            k += (size_t)snprintf(sb + k, sizeof sb - k, "%s%llu", i ? " x " : "", (unsigned long long)dims[i]);
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: damaged: its shape %s claims more data than the file "
                            "stores (%llu bytes stored, the file has %llu)", what, sb,
                            (unsigned long long)stored, (unsigned long long)fsize);
    }
out:
    if (fapl >= 0) H5Pclose(fapl);
    if (pl >= 0) H5Pclose(pl);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    fp4s_h5_quiet_end(&q);
    return rc;
}

bool fp4s_h5_path_exists(hid_t f, const char *path)
{
    char buf[1024];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            htri_t e = H5Lexists(f, buf, H5P_DEFAULT);
            buf[i] = c;
            if (e <= 0) return false;
        }
    }
    return true;
}

/* ---- atomic HDF5 outputs ----------------------------------------------------- */
int fp4s_h5_create(const char *path, fp4s_outfile **of, hid_t *file)
{
    if (!of || !file) return fp4s_error_set(FP4S_EINVAL, "fp4s_h5_create: NULL output");
    *file = -1;
    int rc = fp4s_outfile_begin(path, of);
    if (rc) return rc;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t fapl = fp4s_h5_fapl();
    hid_t f = fapl < 0 ? -1 : H5Fcreate(fp4s_outfile_tmppath(*of), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) {
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot create HDF5 file (HDF5: %s)", path, fp4s_h5_msg());
        fp4s_outfile_abort(of);
    } else {
        *file = f;
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_h5_finish(const char *path, fp4s_outfile **of, hid_t *file, bool commit)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    if (file && *file >= 0) {
        int crc = fp4s_h5_close(*file, path);
        if (commit) rc = crc;
        *file = -1;
    }
    fp4s_h5_quiet_end(&q);
    if (commit && !rc) return fp4s_outfile_commit(of);
    fp4s_outfile_abort(of);
    return rc;
}

hid_t fp4s_h5_matrix_dcpl(size_t rows, size_t cols, size_t esz, int gzip)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0) return dcpl;
    hsize_t cc = cols < 65536 ? cols : 65536;
    hsize_t cr = (hsize_t)((1u << 20) / (cc * esz)); /* about 1 MiB per chunk */
    if (cr < 1) cr = 1;
    if (cr > rows) cr = rows;
    hsize_t ch[2] = {cr, cc};
    H5Pset_chunk(dcpl, 2, ch);
    if (gzip > 0) {
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, (unsigned)gzip);
    }
    return dcpl;
}

int fp4s_h5_write_f32(hid_t f, const char *dset, const float *data, size_t rows, size_t cols, int gzip)
{
    if (!dset || !*dset) return fp4s_error_set(FP4S_EINVAL, "fp4s_h5_write_f32: empty dataset name");
    if (!data && rows && cols) return fp4s_error_set(FP4S_EINVAL, "%s: NULL data", dset);
    if (gzip < 0 || gzip > 9) return fp4s_error_set(FP4S_EINVAL, "%s: gzip level %d outside 0..9", dset, gzip);
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hsize_t dims[2] = {rows, cols};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = rows && cols ? fp4s_h5_matrix_dcpl(rows, cols, 4, gzip) : H5Pcreate(H5P_DATASET_CREATE);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (H5Oexists_by_name(f, dset, H5P_DEFAULT) > 0) H5Ldelete(f, dset, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT);
    hid_t d = H5Dcreate2(f, dset, H5T_IEEE_F32LE, sp, lcpl, dcpl, H5P_DEFAULT);
    int rc = 0;
    if (d < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot create dataset (HDF5: %s)", dset, fp4s_h5_msg());
    else if (rows && cols && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: write failed (HDF5: %s)", dset, fp4s_h5_msg());
    if (d >= 0) H5Dclose(d);
    H5Pclose(lcpl);
    H5Pclose(dcpl);
    H5Sclose(sp);
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_h5_write_1d(hid_t loc, const char *name, hid_t mem_type, hid_t file_type, const void *data,
                     size_t n)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t ds = sp < 0 ? -1 : H5Dcreate2(loc, name, file_type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int rc = 0;
    if (ds < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot create dataset (HDF5: %s)", name, fp4s_h5_msg());
    else if (n && H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: write failed (HDF5: %s)", name, fp4s_h5_msg());
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(lcpl);
    if (sp >= 0) H5Sclose(sp);
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_h5_report_begin(fp4s_h5_report *w, const char *path)
{
    w->path = path;
    w->of = NULL;
    w->file = -1;
    int rc = fp4s_h5_create(path, &w->of, &w->file);
    if (rc) return rc;
    fp4s_h5_quiet_begin(&w->q);
    fp4s_error_clear();
    return 0;
}

int fp4s_h5_report_end(fp4s_h5_report *w, bool ok, const char *what)
{
    int rc = 0;
    if (!ok) {
        const char *d = fp4s_last_error();
        char why[512];
        snprintf(why, sizeof why, "%s", d[0] ? d : fp4s_h5_msg());
        rc = fp4s_error_set(FP4S_EWRITE, "%s: %s%s%s", w->path, what, why[0] ? ": " : "", why);
    }
    int frc = fp4s_h5_finish(w->path, &w->of, &w->file, ok);
    if (!rc) rc = frc;
    fp4s_h5_quiet_end(&w->q);
    return rc;
}
