/* Per-step scalars of a capture: float64 attributes of /steps/<step> (the
 * writer is fp4s_capture_put_scalar in write.c). */
#include "h5util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cap_scalar_name_check(const char *file, const char *name)
{
    if (!name || !name[0] || strlen(name) > 63)
        return fp4s_error_set(FP4S_EINVAL, "%s: a scalar name must have 1 to 63 bytes", file);
    if (!strcmp(name, "step"))
        return fp4s_error_set(FP4S_EINVAL, "%s: scalar name 'step' is the step group's own attribute", file);
    for (const char *p = name; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
            return fp4s_error_set(FP4S_EINVAL, "%s: scalar '%s': slashes and control characters are not "
                                  "allowed", file, name);
    return 0;
}

typedef struct sc_ctx {
    const char *file;
    int64_t step;
    fp4s_capture_scalar *v;
    size_t n, cap;
    int rc;
} sc_ctx;

static herr_t attr_cb(hid_t g, const char *name, const H5A_info_t *ai, void *op)
{
    sc_ctx *c = op;
    (void)ai;
    if (!strcmp(name, "step") || strlen(name) > 63) return 0;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    double v;
    bool ok = t >= 0 && sp >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Sget_simple_extent_npoints(sp) == 1 &&
              H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    if (!ok) return 0; /* not a scalar: some other producer's attribute */
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 64;
        fp4s_capture_scalar *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv) {
            c->rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->file);
            return -1;
        }
        c->v = nv;
        c->cap = nc;
    }
    fp4s_capture_scalar *s = &c->v[c->n++];
    memset(s, 0, sizeof *s); /* reserved[] and the name's tail are zero: callers may compare whole entries */
    s->step = c->step;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->value = v;
    return 0;
}

static int sc_cmp(const void *pa, const void *pb)
{
    const fp4s_capture_scalar *a = pa, *b = pb;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return strcmp(a->name, b->name);
}

int fp4s_capture_scalars(const char *file, fp4s_capture_scalar **out, size_t *n)
{
    if (!out || !n) return fp4s_error_set(FP4S_EINVAL, "capture: NULL argument");
    *out = NULL;
    *n = 0;
    fp4s_capture_info info;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t f;
    int rc = cap_open_read(file, &f, &info);
    if (rc) {
        fp4s_h5_quiet_end(&q);
        return rc;
    }
    sc_ctx c = {.file = file};
    if (fp4s_h5_path_exists(f, "/steps")) {
        hid_t g = H5Gopen2(f, "/steps", H5P_DEFAULT);
        H5G_info_t gi;
        if (g < 0 || H5Gget_info(g, &gi) < 0) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: /steps: expected a group", file);
        } else {
            char name[64];
            for (hsize_t i = 0; i < gi.nlinks && !rc; i++) {
                ssize_t l = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, name, sizeof name,
                                               H5P_DEFAULT);
                if (l < 0 || (size_t)l >= sizeof name) continue;
                char *end;
                errno = 0;
                long long st = strtoll(name, &end, 10);
                if (*end || errno || name[0] == '-') continue; /* the listing reports such names */
                hid_t sg = H5Gopen2(g, name, H5P_DEFAULT);
                if (sg < 0) continue;               /* interrupted file: a dangling link */
                c.step = (int64_t)st;
                hsize_t idx = 0;
                if (H5Aiterate2(sg, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &c) < 0 && c.rc)
                    rc = c.rc;
                H5Gclose(sg);
            }
        }
        if (g >= 0) H5Gclose(g);
    }
    H5Fclose(f);
    fp4s_h5_quiet_end(&q);
    if (rc) {
        free(c.v);
        return rc;
    }
    if (c.n > 1) qsort(c.v, c.n, sizeof *c.v, sc_cmp); /* c.v is NULL when there are none */
    *out = c.v;
    *n = c.n;
    return 0;
}
