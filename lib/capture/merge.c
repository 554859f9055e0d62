/* fp4-capture merge: join captures (one per rank) into one file, refusing
 * conflicting duplicates. Datasets are copied with H5Ocopy (attributes,
 * chunking and filters kept). */
#include "h5util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* path -> index of the input it came from */
typedef struct origin_map {
    char **key;
    int *val;
    size_t cap, used;
} origin_map;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int *map_get(origin_map *m, const char *k)
{
    if (!m->cap) return NULL;
    for (size_t i = fnv(k) & (m->cap - 1); m->key[i]; i = (i + 1) & (m->cap - 1))
        if (strcmp(m->key[i], k) == 0) return &m->val[i];
    return NULL;
}

static int map_put(origin_map *m, const char *k, int v)
{
    if ((m->used + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        char **nk = calloc(nc, sizeof *nk);
        int *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = fnv(m->key[i]) & (nc - 1);
                while (nk[j]) j = (j + 1) & (nc - 1);
                nk[j] = m->key[i];
                nv[j] = m->val[i];
            }
        free(m->key);
        free(m->val);
        m->key = nk;
        m->val = nv;
        m->cap = nc;
    }
    size_t i = fnv(k) & (m->cap - 1);
    while (m->key[i]) i = (i + 1) & (m->cap - 1);
    m->key[i] = strdup(k);
    if (!m->key[i]) return -1;
    m->val[i] = v;
    m->used++;
    return 0;
}

static void map_free(origin_map *m)
{
    for (size_t i = 0; i < m->cap; i++) free(m->key[i]);
    free(m->key);
    free(m->val);
}

/* 1 identical, 0 different, <0 read error. Compared as stored bytes. */
static int same_contents(hid_t fa, hid_t fb, const char *path, char *why, size_t nwhy)
{
    hid_t a = H5Dopen2(fa, path, H5P_DEFAULT), b = H5Dopen2(fb, path, H5P_DEFAULT);
    int res = -1;
    hid_t ta = -1, tb = -1, sa = -1, sb = -1;
    void *ba = NULL, *bb = NULL;
    if (a < 0 || b < 0) goto out;
    ta = H5Dget_type(a);
    tb = H5Dget_type(b);
    fp4s_dtype da, db;
    if (fp4s_h5_dset_dtype(a, &da) || fp4s_h5_dset_dtype(b, &db) || da != db || H5Tequal(ta, tb) <= 0) {
        snprintf(why, nwhy, "different element types");
        res = 0;
        goto out;
    }
    sa = H5Dget_space(a);
    sb = H5Dget_space(b);
    int ra = H5Sget_simple_extent_ndims(sa), rb = H5Sget_simple_extent_ndims(sb);
    hsize_t dA[2] = {0, 1}, dB[2] = {0, 1};
    if (ra < 1 || ra > 2 || rb < 1 || rb > 2) goto out;
    H5Sget_simple_extent_dims(sa, dA, NULL);
    H5Sget_simple_extent_dims(sb, dB, NULL);
    if (ra != rb || dA[0] != dB[0] || (ra == 2 && dA[1] != dB[1])) {
        snprintf(why, nwhy, "shapes [%llu, %llu] and [%llu, %llu]", (unsigned long long)dA[0],
                 (unsigned long long)(ra == 2 ? dA[1] : 1), (unsigned long long)dB[0],
                 (unsigned long long)(rb == 2 ? dB[1] : 1));
        res = 0;
        goto out;
    }
    size_t esz = H5Tget_size(ta), cols = ra == 2 ? (size_t)dA[1] : 1;
    size_t rowb = esz * cols, blk = (4u << 20) / (rowb ? rowb : 1);
    if (blk < 1) blk = 1;
    ba = malloc(blk * rowb);
    bb = malloc(blk * rowb);
    hid_t mt = H5Tget_native_type(ta, H5T_DIR_DEFAULT);
    if (!ba || !bb || mt < 0) {
        if (mt >= 0) H5Tclose(mt);
        goto out;
    }
    res = 1;
    for (hsize_t r0 = 0; r0 < dA[0] && res == 1; r0 += blk) {
        hsize_t nr = dA[0] - r0 < blk ? dA[0] - r0 : blk;
        hsize_t st[2] = {r0, 0}, ct[2] = {nr, cols};
        hid_t ms = H5Screate_simple(ra, ct, NULL);
        H5Sselect_hyperslab(sa, H5S_SELECT_SET, st, NULL, ct, NULL);
        H5Sselect_hyperslab(sb, H5S_SELECT_SET, st, NULL, ct, NULL);
        if (H5Dread(a, mt, ms, sa, H5P_DEFAULT, ba) < 0 || H5Dread(b, mt, ms, sb, H5P_DEFAULT, bb) < 0)
            res = -1;
        else if (memcmp(ba, bb, (size_t)nr * rowb) != 0) {
            snprintf(why, nwhy, "different values in rows %llu..%llu", (unsigned long long)r0,
                     (unsigned long long)(r0 + nr - 1));
            res = 0;
        }
        H5Sclose(ms);
    }
    H5Tclose(mt);
out:
    free(ba);
    free(bb);
    if (sa >= 0) H5Sclose(sa);
    if (sb >= 0) H5Sclose(sb);
    if (ta >= 0) H5Tclose(ta);
    if (tb >= 0) H5Tclose(tb);
    if (a >= 0) H5Dclose(a);
    if (b >= 0) H5Dclose(b);
    return res;
}

typedef struct attr_copy {
    hid_t dst;
} attr_copy;

static herr_t copy_attr(hid_t loc, const char *name, const H5A_info_t *ai, void *op)
{
    attr_copy *ac = op;
    (void)ai;
    static const char *skip[] = {"fp4scope_schema", "writer_state", "producer", "created",
                                 "merged_from", "synthetic"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strcmp(name, skip[i]) == 0) return 0;
    if (H5Aexists(ac->dst, name) > 0) return 0; /* the first input wins */
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    hid_t sp = H5Aget_space(a);
    H5T_class_t cl = H5Tget_class(t);
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    char sbuf[4096];
    int64_t iv;
    double dv;
    if (np == 1 && cl == H5T_STRING && fp4s_h5_attr_get_str(loc, name, sbuf, sizeof sbuf) == 1)
        fp4s_h5_attr_str(ac->dst, name, sbuf);
    else if (np == 1 && cl == H5T_INTEGER && fp4s_h5_attr_get_i64(loc, name, &iv) == 1)
        fp4s_h5_attr_i64(ac->dst, name, iv);
    else if (np == 1 && cl == H5T_FLOAT && H5Aread(a, H5T_NATIVE_DOUBLE, &dv) >= 0)
        fp4s_h5_attr_f64(ac->dst, name, dv);
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return 0;
}

/* The groups above a dataset path: /steps and /weights as the writer makes
 * them (old-style, large heap), step/site/logprobs groups compact. */
static int ensure_parents(hid_t fo, const char *path)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%s", path);
    int depth = 0;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (H5Lexists(fo, buf, H5P_DEFAULT) <= 0) {
            hid_t gcpl = depth == 0 ? H5Pcreate(H5P_GROUP_CREATE) : cap_small_gcpl();
            if (depth == 0) H5Pset_local_heap_size_hint(gcpl, 32768);
            hid_t g = H5Gcreate2(fo, buf, H5P_DEFAULT, gcpl, H5P_DEFAULT);
            H5Pclose(gcpl);
            if (g < 0) return -1;
            H5Gclose(g);
        }
        *p = '/';
        depth++;
    }
    return 0;
}

int fp4s_capture_merge(const char *const *inputs, size_t n, const char *out, const fp4s_capture_opts *o)
{
    if (!n) return fp4s_error_set(FP4S_EINVAL, "merge: no input files");
    fp4s_capture_opts co;
    if (o)
        co = *o;
    else
        fp4s_capture_opts_defaults(&co);
    if (!co.producer) co.producer = "fp4-capture merge";
    /* Validate every input first (schema, version, listing). */
    fp4s_capture_entry **lists = calloc(n, sizeof *lists);
    size_t *counts = calloc(n, sizeof *counts);
    if (!lists || !counts) {
        free(lists);
        free(counts);
        return fp4s_error_set(FP4S_ENOMEM, "merge: out of memory");
    }
    int rc = 0;
    bool synthetic = false;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = fp4s_capture_list(inputs[i], &lists[i], &counts[i]);
        if (!rc) {
            fp4s_capture_info inf;
            rc = fp4s_capture_info_read(inputs[i], &inf);
            synthetic |= inf.synthetic;
        }
    }
    fp4s_capture *w = NULL;
    if (!rc) rc = fp4s_capture_create(out, &co, &w);
    if (!rc) rc = fp4s_capture_close(&w);
    if (rc) goto done;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t fo = fp4s_h5_open(out, H5F_ACC_RDWR, false);
    if (fo < 0) {
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot reopen the merge output: %s", out, fp4s_h5_msg());
        fp4s_h5_quiet_end(&q);
        goto done;
    }
    origin_map m = {0};
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    size_t flen = 0;
    for (size_t i = 0; i < n; i++) flen += strlen(inputs[i]) + 1;
    char *from = calloc(1, flen + 1);
    uint64_t pdone = 0, ptotal = 0; /* datasets, for the progress hook */
    for (size_t i = 0; i < n; i++) ptotal += counts[i];
    for (size_t i = 0; i < n && !rc; i++) {
        if (from) {
            if (i) strcat(from, ";");
            strcat(from, inputs[i]);
        }
        hid_t fi = fp4s_h5_open_read(inputs[i], &rc);
        if (fi < 0) break;
        attr_copy ac = {fo};
        hsize_t idx = 0;
        H5Aiterate2(fi, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, copy_attr, &ac);
        for (size_t k = 0; k < counts[i] && !rc; k++) {
            fp4s_progress_report(pdone++, ptotal);
            const fp4s_capture_entry *e = &lists[i][k];
            int *org = map_get(&m, e->path);
            if (org) {
                char why[160] = "";
                int same = same_contents(fo, fi, e->path, why, sizeof why);
                if (same < 0)
                    rc = fp4s_error_set(FP4S_EOPEN, "merge: %s: cannot read %s: %s", inputs[i], e->path,
                                        fp4s_h5_msg());
                else if (!same)
                    rc = fp4s_error_set(FP4S_EDUP, "merge: %s and %s both hold %s with different "
                                        "contents (%s)", inputs[*org], inputs[i], e->path, why);
                continue;
            }
            hid_t sd = H5Dopen2(fi, e->path, H5P_DEFAULT);
            if (sd >= 0) {
                char what[1200];
                snprintf(what, sizeof what, "%s: %s", inputs[i], e->path);
                rc = fp4s_h5_check_layout(sd, what);
                H5Dclose(sd);
                if (rc) break;
            }
            if (ensure_parents(fo, e->path) < 0) {
                rc = fp4s_error_set(FP4S_EWRITE, "merge: %s: cannot create the groups of %s: %s", out,
                                    e->path, fp4s_h5_msg());
                break;
            }
            if (H5Ocopy(fi, e->path, fo, e->path, H5P_DEFAULT, lcpl) < 0) {
                /* a failed write is the output's fault; anything else, the input's */
                int we = fp4s_h5_write_errno(fo);
                rc = we ? fp4s_error_set(FP4S_EWRITE, "merge: %s: cannot copy %s from %s: %s", out, e->path,
                                         inputs[i], strerror(we))
                        : fp4s_error_set(FP4S_EFORMAT, "merge: %s: %s cannot be copied (damaged?): %s",
                                         inputs[i], e->path, fp4s_h5_msg());
                break;
            }
            if (map_put(&m, e->path, (int)i)) rc = fp4s_error_set(FP4S_ENOMEM, "merge: out of memory");
            if (e->step >= 0) {
                char gp[64];
                snprintf(gp, sizeof gp, "/steps/%" PRId64, e->step);
                hid_t g = H5Gopen2(fo, gp, H5P_DEFAULT);
                if (g >= 0) {
                    if (H5Aexists(g, "step") <= 0) fp4s_h5_attr_i64(g, "step", e->step);
                    /* the step's scalars (its other attributes): the first input wins */
                    hid_t gi = H5Gopen2(fi, gp, H5P_DEFAULT);
                    if (gi >= 0) {
                        attr_copy sc = {g};
                        hsize_t si = 0;
                        H5Aiterate2(gi, H5_INDEX_NAME, H5_ITER_NATIVE, &si, copy_attr, &sc);
                        H5Gclose(gi);
                    }
                    H5Gclose(g);
                }
            }
        }
        H5Fclose(fi);
    }
    if (!rc) {
        if ((from && fp4s_h5_attr_str(fo, "merged_from", from) < 0) ||
            (synthetic && fp4s_h5_attr_i64(fo, "synthetic", 1) < 0))
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write root attributes", out);
    }
    free(from);
    H5Pclose(lcpl);
    map_free(&m);
    int crc = fp4s_h5_close(fo, out);
    if (crc) rc = crc; /* a failed write explains whatever failed after it */
    fp4s_h5_quiet_end(&q);
done:
    for (size_t i = 0; i < n; i++) free(lists[i]);
    free(lists);
    free(counts);
    return rc;
}
