/* HDF5 helpers of the capture module: quiet error handling, schema check,
 * attributes, dtypes. */
#include "h5util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cap_quiet_begin(cap_quiet *q)
{
    H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void cap_quiet_end(const cap_quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->func, q->data); }

static _Thread_local char h5msg[256];

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)data;
    if (n == 0 && e->desc)
        snprintf(h5msg, sizeof h5msg, "%s", e->desc);
    return 0;
}

const char *cap_h5_msg(void)
{
    h5msg[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, NULL);
    return h5msg;
}

/* ---- attributes -------------------------------------------------------------- */
int cap_attr_get_str(hid_t obj, const char *name, char *buf, size_t n)
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
                char *tmp = calloc(1, sz + 1);
                hid_t mt = H5Tcopy(H5T_C_S1);
                H5Tset_size(mt, sz + 1);
                H5Tset_strpad(mt, H5T_STR_NULLTERM);
                if (tmp && H5Aread(a, mt, tmp) >= 0) {
                    snprintf(buf, n, "%s", tmp);
                    rc = 1;
                }
                H5Tclose(mt);
                free(tmp);
            }
        }
    }
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int cap_attr_get_i64(hid_t obj, const char *name, int64_t *v)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex <= 0) return ex < 0 ? -1 : 0;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a);
    int rc = -1;
    H5T_class_t cl = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (cl == H5T_INTEGER || cl == H5T_FLOAT) {
        long long x = 0;
        if (H5Aread(a, H5T_NATIVE_LLONG, &x) >= 0) {
            *v = x;
            rc = 1;
        }
    }
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int attr_put(hid_t obj, const char *name, hid_t type, const void *val)
{
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0) return -1;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = (a >= 0 && H5Awrite(a, type, val) >= 0) ? 0 : -1;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

int cap_attr_put_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = attr_put(obj, name, t, &value);
    H5Tclose(t);
    return rc;
}

int cap_attr_put_f64(hid_t obj, const char *name, double value)
{
    return attr_put(obj, name, H5T_NATIVE_DOUBLE, &value);
}

int cap_attr_put_i64(hid_t obj, const char *name, int64_t value)
{
    long long v = value;
    return attr_put(obj, name, H5T_NATIVE_LLONG, &v);
}

/* ---- dtypes -------------------------------------------------------------------- */
hid_t cap_h5_type(fp4s_dtype dt)
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

int cap_dset_dtype(hid_t d, fp4s_dtype *dt)
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
            *dt = (cap_attr_get_str(d, "dtype", buf, sizeof buf) == 1 &&
                   strcmp(buf, "bfloat16") == 0) ? FP4S_DT_BF16 : FP4S_DT_U16;
            return 0;
        }
        if (sz == 1 && sg == H5T_SGN_NONE) { *dt = FP4S_DT_U8; return 0; }
        if (sz == 4 && sg == H5T_SGN_2) { *dt = FP4S_DT_I32; return 0; }
        if (sz == 8 && sg == H5T_SGN_2) { *dt = FP4S_DT_I64; return 0; }
    }
    return FP4S_EDTYPE;
}

bool cap_path_exists(hid_t f, const char *path)
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

hid_t cap_small_gcpl(void)
{
    hid_t g = H5Pcreate(H5P_GROUP_CREATE);
    if (g >= 0) H5Pset_link_creation_order(g, H5P_CRT_ORDER_TRACKED);
    return g;
}

int cap_natcmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            const char *a0 = a, *b0 = b;
            while (*a0 == '0' && isdigit((unsigned char)a0[1])) a0++;
            while (*b0 == '0' && isdigit((unsigned char)b0[1])) b0++;
            const char *a1 = a0, *b1 = b0;
            while (isdigit((unsigned char)*a1)) a1++;
            while (isdigit((unsigned char)*b1)) b1++;
            size_t la = (size_t)(a1 - a0), lb = (size_t)(b1 - b0);
            if (la != lb) return la < lb ? -1 : 1;
            int c = memcmp(a0, b0, la);
            if (c) return c;
            a = a1;
            b = b1;
        } else {
            if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++;
            b++;
        }
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* ---- opening for read and the schema -------------------------------------------- */
int cap_check_schema(hid_t f, const char *file, fp4s_capture_info *info)
{
    fp4s_capture_info tmp;
    fp4s_capture_info *in = info ? info : &tmp;
    memset(in, 0, sizeof *in);
    in->first_step = in->last_step = -1;
    int r = cap_attr_get_str(f, "fp4scope_schema", in->schema, sizeof in->schema);
    if (r == 0)
        return fp4s_error_set(FP4S_EFORMAT,
                              "%s: not a fp4scope capture: root attribute fp4scope_schema is missing "
                              "(expected \"%s\")", file, FP4S_CAPTURE_SCHEMA);
    if (r < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: root attribute fp4scope_schema is not a string", file);
    const char *pre = "fp4scope-capture/";
    size_t pl = strlen(pre);
    if (strncmp(in->schema, pre, pl) != 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: fp4scope_schema is \"%s\", expected \"%s\"", file,
                              in->schema, FP4S_CAPTURE_SCHEMA);
    const char *p = in->schema + pl;
    char *end;
    errno = 0;
    long maj = strtol(p, &end, 10);
    long min = 0;
    if (end == p || errno || maj < 1)
        goto bad;
    if (*end == '.') {
        const char *q = end + 1;
        min = strtol(q, &end, 10);
        if (end == q || min < 0) goto bad;
    }
    if (*end != '\0') goto bad;
    in->major = (int)maj;
    in->minor = (int)min;
    if (maj > FP4S_CAPTURE_MAJOR)
        return fp4s_error_set(FP4S_EVERSION,
                              "%s: schema \"%s\" is newer than this reader (%s, major version %d); "
                              "upgrade fp4scope to read it", file, in->schema, FP4S_CAPTURE_SCHEMA,
                              FP4S_CAPTURE_MAJOR);
    cap_attr_get_str(f, "producer", in->producer, sizeof in->producer);
    cap_attr_get_str(f, "created", in->created, sizeof in->created);
    int64_t syn = 0;
    in->synthetic = cap_attr_get_i64(f, "synthetic", &syn) == 1 && syn != 0;
    char st[16];
    in->interrupted = cap_attr_get_str(f, "writer_state", st, sizeof st) == 1 && strcmp(st, "closed") != 0;
    return 0;
bad:
    return fp4s_error_set(FP4S_EFORMAT, "%s: fp4scope_schema \"%s\" is malformed (expected \"%s\")",
                          file, in->schema, FP4S_CAPTURE_SCHEMA);
}

int cap_open_read(const char *file, hid_t *out, fp4s_capture_info *info)
{
    *out = -1;
    struct stat stb;
    if (stat(file, &stb) != 0)
        return fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", file, strerror(errno));
    if (!S_ISREG(stb.st_mode))
        return fp4s_error_set(FP4S_EOPEN, "%s: not a regular file", file);
    htri_t is = H5Fis_hdf5(file);
    if (is == 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: not an HDF5 file (no superblock; empty or "
                              "truncated at the start?)", file);
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        const char *m = cap_h5_msg();
        if (strstr(m, "unable to lock"))
            return fp4s_error_set(FP4S_EOPEN, "%s: locked by a running writer (one writer per "
                                  "file; HDF5: %s)", file, m);
        return fp4s_error_set(FP4S_EFORMAT, "%s: damaged or truncated HDF5 file (interrupted "
                              "copy?): %s", file, m[0] ? m : "cannot open");
    }
    int rc = cap_check_schema(f, file, info);
    if (rc) {
        H5Fclose(f);
        return rc;
    }
    *out = f;
    return 0;
}
