/* The capture module's own HDF5 helpers: the schema check, opening for
 * reading, group creation lists, natural order. The shared HDF5 layer
 * (errors, attributes, types) is lib/io/h5util.c. */
#include "h5util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    int r = fp4s_h5_attr_get_str(f, "fp4scope_schema", in->schema, sizeof in->schema);
    if (r == 0)
        return fp4s_error_set(FP4S_EFORMAT,
                              "%s: not an fp4scope capture: root attribute fp4scope_schema is missing "
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
    fp4s_h5_attr_get_str(f, "producer", in->producer, sizeof in->producer);
    fp4s_h5_attr_get_str(f, "created", in->created, sizeof in->created);
    int64_t syn = 0;
    in->synthetic = fp4s_h5_attr_get_i64(f, "synthetic", &syn) == 1 && syn != 0;
    char st[16];
    in->interrupted = fp4s_h5_attr_get_str(f, "writer_state", st, sizeof st) == 1 && strcmp(st, "closed") != 0;
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
    hid_t f = fp4s_h5_open(file, H5F_ACC_RDONLY, false);
    if (f < 0 && fp4s_h5_refused()) return fp4s_h5_refused();
    if (f < 0) {
        const char *m = fp4s_h5_msg();
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
