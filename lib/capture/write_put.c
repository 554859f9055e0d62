/* The capture writer, what goes in: site and step names, step groups (new
 * ones anonymous until the commit links them), the cache of open datasets,
 * the puts of tensors, scalars, log-probs and tokens, and attributes
 * (write_internal.h; write.c commits them). */
#include "write_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dataset cache ------------------------------------------------------------ */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

dslot *capw_slot_find(fp4s_capture *c, const char *path)
{
    if (!c->nslots) return NULL;
    size_t i = hash_str(path) & (c->nslots - 1);
    while (c->slots[i].path) {
        if (strcmp(c->slots[i].path, path) == 0) return &c->slots[i];
        i = (i + 1) & (c->nslots - 1);
    }
    return NULL;
}

static int slots_grow(fp4s_capture *c)
{
    size_t nn = c->nslots ? c->nslots * 2 : 64;
    dslot *old = c->slots;
    size_t on = c->nslots;
    c->slots = calloc(nn, sizeof *c->slots);
    if (!c->slots) {
        c->slots = old;
        return FP4S_ENOMEM;
    }
    c->nslots = nn;
    c->used = 0;
    for (size_t i = 0; i < on; i++)
        if (old[i].path) {
            size_t j = hash_str(old[i].path) & (nn - 1);
            while (c->slots[j].path) j = (j + 1) & (nn - 1);
            c->slots[j] = old[i];
            c->used++;
        }
    free(old);
    return 0;
}

int capw_slot_add(fp4s_capture *c, const char *path, hid_t d, size_t rows, size_t cols, fp4s_dtype dt,
                  dslot **out)
{
    if ((c->used + 1) * 2 > c->nslots && slots_grow(c))
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->path);
    size_t i = hash_str(path) & (c->nslots - 1);
    while (c->slots[i].path) i = (i + 1) & (c->nslots - 1);
    c->slots[i].path = strdup(path);
    if (!c->slots[i].path) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->path);
    c->slots[i].d = d;
    c->slots[i].rows = rows;
    c->slots[i].rows0 = rows;
    c->slots[i].cols = cols;
    c->slots[i].dt = dt;
    c->used++;
    *out = &c->slots[i];
    return 0;
}

int capw_slots_close(fp4s_capture *c)
{
    int bad = 0;
    for (size_t i = 0; i < c->nslots; i++)
        if (c->slots[i].path) {
            if (H5Dclose(c->slots[i].d) < 0) bad = 1;
            free(c->slots[i].path);
            c->slots[i].path = NULL;
        }
    c->used = 0;
    return bad;
}

/* ---- names ------------------------------------------------------------------------ */
int fp4s_site_check(const char *site)
{
    if (!site || !site[0]) return fp4s_error_set(FP4S_EINVAL, "empty site name");
    size_t n = strlen(site);
    if (n >= sizeof(((fp4s_capture_entry *)0)->site))
        return fp4s_error_set(FP4S_EINVAL, "site name '%.40s...' longer than 255 bytes", site);
    if (strcmp(site, "logprobs") == 0)
        return fp4s_error_set(FP4S_EINVAL, "'logprobs' is reserved for log-probs, not a site");
    if (site[0] == '.') return fp4s_error_set(FP4S_EINVAL, "site '%s' must not start with '.'", site);
    for (const char *p = site; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
            return fp4s_error_set(FP4S_EINVAL, "site '%s': slashes and control characters are not "
                                  "allowed (use dots: layers.3.mlp)", site);
    return 0;
}

static int check_site(const fp4s_capture *c, const char *site)
{
    int rc = fp4s_site_check(site);
    if (rc) fp4s_error_prefix("%s", c->path);
    return rc;
}

static int64_t parse_index(const char *site, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = site; (p = strstr(p, key)) != NULL; p++) {
        if (p != site && p[-1] != '.') continue;
        const char *q = p + kl;
        if (*q != '.' || !isdigit((unsigned char)q[1])) continue;
        q++;
        int64_t v = 0;
        while (isdigit((unsigned char)*q) && v < INT64_MAX / 10) v = v * 10 + (*q++ - '0');
        if (*q == '.' || *q == '\0') return v;
    }
    return -1;
}

/* The group of a step: pending (anonymous) if created since the last flush,
 * the linked /steps/<step> if it exists, else a new anonymous group. */
static int step_group(fp4s_capture *c, int64_t step, hid_t *g, bool *is_new)
{
    for (size_t i = 0; i < c->npend; i++)
        if (c->pend[i].step == step && step >= 0) {
            *g = c->pend[i].obj;
            *is_new = c->pend[i].anon;
            return 0;
        }
    char name[32], path[64];
    snprintf(name, sizeof name, "%" PRId64, step);
    snprintf(path, sizeof path, "/steps/%s", name);
    hid_t h;
    bool anon = false;
    if (fp4s_h5_path_exists(c->file, path)) {
        h = H5Gopen2(c->file, path, H5P_DEFAULT);
    } else {
        hid_t gcpl = cap_small_gcpl();
        h = H5Gcreate_anon(c->file, gcpl, H5P_DEFAULT);
        H5Pclose(gcpl);
        anon = true;
        if (h >= 0 && fp4s_h5_attr_i64(h, "step", step) < 0) {
            H5Gclose(h);
            h = -1;
        }
    }
    if (h < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot create group: %s", c->path, path,
                              fp4s_h5_msg());
    int rc = capw_pend_add(c, step, name, h, anon);
    if (rc) {
        H5Gclose(h);
        return rc;
    }
    *g = h;
    *is_new = anon;
    return 0;
}

/* The group `name` inside step group g; `made` (NULL for a new step) is its
 * path, recorded when the group is created inside an already linked step. */
static int ensure_sub(fp4s_capture *c, hid_t g, const char *name, const char *what, const char *made)
{
    if (H5Lexists(g, name, H5P_DEFAULT) > 0) return 0;
    hid_t gcpl = cap_small_gcpl();
    hid_t s = H5Gcreate2(g, name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    H5Pclose(gcpl);
    if (s < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot create group: %s", c->path, what,
                              fp4s_h5_msg());
    H5Gclose(s);
    return made ? capw_made_add(c, made) : 0;
}

/* Shape of an existing dataset (cached or in the file): 1 found, 0 not. */
static int peek_cols(fp4s_capture *c, const char *path, size_t *cols)
{
    dslot *s = capw_slot_find(c, path);
    if (s) {
        *cols = s->cols;
        return 1;
    }
    if (!fp4s_h5_path_exists(c->file, path)) return 0;
    hid_t d = H5Dopen2(c->file, path, H5P_DEFAULT);
    if (d < 0) return 0;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int r = H5Sget_simple_extent_ndims(sp);
    if (r == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    if (r != 2) return 0;
    *cols = (size_t)dims[1];
    return 1;
}

static int sibling_check(fp4s_capture *c, int64_t step, const char *site, const char *side,
                         size_t cols)
{
    static const char *sides[] = {"trainer", "rollout", "weight"};
    char p[600];
    for (int i = 0; i < 4; i++) {
        if (i < 3) {
            if (strcmp(sides[i], side) == 0 || step < 0) continue;
            snprintf(p, sizeof p, "/steps/%" PRId64 "/%s/%s", step, site, sides[i]);
        } else {
            if (step < 0) continue;
            snprintf(p, sizeof p, "/weights/%s", site);
        }
        size_t oc;
        if (peek_cols(c, p, &oc) == 1 && oc != cols)
            return fp4s_error_set(FP4S_ESHAPE, "%s: step %" PRId64 ": %s/%s has %zu columns but %s "
                                  "has %zu; trainer, rollout and weight of a site share K",
                                  c->path, step, site, side, cols, p, oc);
    }
    return 0;
}

static size_t auto_chunk_rows(const fp4s_capture *c, size_t first_rows, size_t row_bytes)
{
    if (c->opts.chunk_rows) return c->opts.chunk_rows;
    size_t cap = (1u << 20) / (row_bytes ? row_bytes : 1);
    if (cap < 1) cap = 1;
    size_t r = first_rows ? first_rows : 1;
    return r < cap ? r : cap;
}

static const char *dtype_attr(fp4s_dtype dt)
{
    return dt == FP4S_DT_BF16 ? "bfloat16" : dt == FP4S_DT_F16 ? "float16" :
           dt == FP4S_DT_F32 ? "float32" : NULL;
}

/* Open or create an extendible dataset of rank 1 or 2. */
static int get_dataset(fp4s_capture *c, const char *path, int64_t step, const char *group,
                       const char *leaf, fp4s_dtype dt, int rank, size_t cols, size_t first_rows,
                       const fp4s_capture_meta *meta, const char *site, dslot **out)
{
    dslot *s = capw_slot_find(c, path);
    if (s) {
        *out = s;
        return 0;
    }
    hid_t d = -1;
    size_t rows = 0;
    if (fp4s_h5_path_exists(c->file, path)) {
        d = H5Dopen2(c->file, path, H5P_DEFAULT);
        if (d < 0)
            return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open: %s", c->path, path, fp4s_h5_msg());
        fp4s_dtype have;
        hid_t sp = H5Dget_space(d);
        int r = H5Sget_simple_extent_ndims(sp);
        hsize_t dims[2] = {0, 0}, maxd[2] = {0, 0};
        if (r == 1 || r == 2) H5Sget_simple_extent_dims(sp, dims, maxd);
        H5Sclose(sp);
        int rc = 0;
        if (fp4s_h5_dset_dtype(d, &have) || have != dt)
            rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: stored as %s, cannot append %s rows", c->path,
                                path, fp4s_h5_dset_dtype(d, &have) ? "an unsupported type" :
                                fp4s_dtype_name(have), fp4s_dtype_name(dt));
        else if (r != rank || (rank == 2 && dims[1] != cols))
            rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: has shape [%llu, %llu], cannot append rows of "
                                "%zu columns", c->path, path, (unsigned long long)dims[0],
                                (unsigned long long)(r == 2 ? dims[1] : 0), cols);
        else if (maxd[0] != H5S_UNLIMITED)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: %s: dataset is not extendible (not written by "
                                "the capture writer)", c->path, path);
        if (rc) {
            H5Dclose(d);
            return rc;
        }
        rows = (size_t)dims[0];
    } else {
        hid_t parent = -1;
        bool new_step = true;
        char gpath[600];
        if (step >= 0) {
            int rc = step_group(c, step, &parent, &new_step);
            snprintf(gpath, sizeof gpath, "/steps/%" PRId64 "/%s", step, group);
            if (!rc) rc = ensure_sub(c, parent, group, path, new_step ? NULL : gpath);
            if (rc) return rc;
        }
        hsize_t dims[2] = {0, (hsize_t)cols}, maxd[2] = {H5S_UNLIMITED, (hsize_t)cols};
        size_t esz = fp4s_dtype_size(dt);
        size_t crow = auto_chunk_rows(c, first_rows, (rank == 2 ? cols : 1) * esz);
        if (rank == 1 && crow < 4096 && !c->opts.chunk_rows) crow = first_rows > 4096 ? first_rows : 4096;
        if (crow > (1u << 20) / esz && rank == 1) crow = (1u << 20) / esz;
        hsize_t chunk[2] = {(hsize_t)crow, (hsize_t)cols};
        hid_t sp = H5Screate_simple(rank, dims, maxd);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
        if (c->opts.gzip > 0) {
            if (c->opts.shuffle) H5Pset_shuffle(dcpl);
            H5Pset_deflate(dcpl, (unsigned)c->opts.gzip);
        }
        /* last in the pipeline: the checksum covers the bytes stored */
        if (c->opts.checksum) H5Pset_fletcher32(dcpl);
        hid_t ft = fp4s_h5_type(dt);
        char rel[600];
        snprintf(rel, sizeof rel, "%s/%s", group, leaf);
        if (step >= 0)
            d = H5Dcreate2(parent, rel, ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        else
            d = H5Dcreate_anon(c->file, ft, sp, dcpl, H5P_DEFAULT);
        H5Tclose(ft);
        H5Pclose(dcpl);
        H5Sclose(sp);
        if (d < 0)
            return fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot create dataset: %s", c->path, path,
                                  fp4s_h5_msg());
        if (step >= 0 && !new_step) {
            int mrc = capw_made_add(c, path);
            if (mrc) {
                H5Dclose(d);
                return mrc;
            }
        }
        const char *da = dtype_attr(dt);
        int bad = da && fp4s_h5_attr_str(d, "dtype", da) < 0;
        if (site && rank == 2) {
            fp4s_capture_meta m;
            fp4s_capture_meta_defaults(&m);
            if (meta) m = *meta;
            int64_t layer = m.layer == -2 ? parse_index(site, "layers") : m.layer;
            if (layer == -1 && m.layer == -2) layer = parse_index(site, "layer");
            int64_t expert = m.expert == -2 ? parse_index(site, "experts") : m.expert;
            if (layer >= 0) bad |= fp4s_h5_attr_i64(d, "layer", layer) < 0;
            if (expert >= 0) bad |= fp4s_h5_attr_i64(d, "expert", expert) < 0;
            if (m.token_offset >= 0) bad |= fp4s_h5_attr_i64(d, "token_offset", m.token_offset) < 0;
            if (m.source_shape) bad |= fp4s_h5_attr_str(d, "source_shape", m.source_shape) < 0;
        }
        if (bad) {
            H5Dclose(d);
            return fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot write attributes", c->path, path);
        }
        if (step < 0) {
            /* a new constant weight: linked into /weights at the next flush */
            H5Iinc_ref(d);
            int prc = capw_pend_add(c, step, site, d, true);
            if (prc) {
                H5Idec_ref(d);
                H5Dclose(d);
                return prc;
            }
        }
    }
    int rc = capw_slot_add(c, path, d, rows, cols, dt, out);
    if (rc) H5Dclose(d);
    return rc;
}

/* Append rows (rank 2: [rows, cols] with stride ld; rank 1: rows elements). */
static int append(fp4s_capture *c, dslot *s, int rank, const void *data, size_t rows, size_t ld)
{
    if (rows == 0) return 0;
    hsize_t nd[2] = {(hsize_t)(s->rows + rows), (hsize_t)s->cols};
    if (H5Dset_extent(s->d, nd) < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot extend: %s", c->path, s->path, fp4s_h5_msg());
    hid_t fs = H5Dget_space(s->d);
    hsize_t start[2] = {(hsize_t)s->rows, 0}, count[2] = {(hsize_t)rows, (hsize_t)s->cols};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hsize_t md[2] = {(hsize_t)rows, (hsize_t)(rank == 2 ? ld : 1)};
    hid_t ms = H5Screate_simple(rank, md, NULL);
    if (rank == 2 && ld != s->cols) {
        hsize_t z[2] = {0, 0};
        H5Sselect_hyperslab(ms, H5S_SELECT_SET, z, NULL, count, NULL);
    }
    hid_t mt = fp4s_h5_type(s->dt);
    herr_t w = H5Dwrite(s->d, mt, ms, fs, H5P_DEFAULT, data);
    H5Tclose(mt);
    H5Sclose(ms);
    H5Sclose(fs);
    if (w < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: %s: write failed: %s", c->path, s->path, fp4s_h5_msg());
    int e = fp4s_h5_write_errno(c->file);
    if (e)
        return fp4s_error_set(FP4S_EWRITE, "%s: %s: write failed: %s (nothing more is written to the "
                              "file; it keeps the steps flushed before)", c->path, s->path, strerror(e));
    s->rows += rows;
    return 0;
}

int fp4s_capture_put(fp4s_capture *c, int64_t step, const char *site, const char *side,
                     fp4s_dtype dt, const void *data, size_t rows, size_t cols, size_t ld,
                     const fp4s_capture_meta *meta)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: put on a NULL handle");
    int rc = check_site(c, site);
    if (rc) return rc;
    if (!side || (strcmp(side, "trainer") && strcmp(side, "rollout") && strcmp(side, "weight")))
        return fp4s_error_set(FP4S_EINVAL, "%s: side '%s' is not trainer, rollout or weight",
                              c->path, side ? side : "(null)");
    if (step < 0 && !(step == FP4S_CAPTURE_CONST_STEP && strcmp(side, "weight") == 0))
        return fp4s_error_set(FP4S_EINVAL, "%s: step %" PRId64 " is negative (only constant "
                              "weights use FP4S_CAPTURE_CONST_STEP)", c->path, step);
    if (step > FP4S_CAPTURE_MAX_STEP)
        return fp4s_error_set(FP4S_ERANGE, "%s: step %" PRId64 " is beyond the largest step a capture "
                              "stores (2^53 = %" PRId64 ")", c->path, step, FP4S_CAPTURE_MAX_STEP);
    if (dt != FP4S_DT_F32 && dt != FP4S_DT_F16 && dt != FP4S_DT_BF16)
        return fp4s_error_set(FP4S_EDTYPE, "%s: %s/%s: put takes float32, float16 or bfloat16, "
                              "not %s", c->path, site, side, fp4s_dtype_name(dt));
    if (cols == 0 || ld < cols)
        return fp4s_error_set(FP4S_ESHAPE, "%s: %s/%s: need cols > 0 and ld >= cols (cols %zu, "
                              "ld %zu)", c->path, site, side, cols, ld);
    if (rows && !data) return fp4s_error_set(FP4S_EINVAL, "%s: %s/%s: NULL data", c->path, site, side);
    rc = capw_write_failed(c, "an earlier write failed");
    if (rc) return rc;
    char path[600];
    if (step < 0)
        snprintf(path, sizeof path, "/weights/%s", site);
    else
        snprintf(path, sizeof path, "/steps/%" PRId64 "/%s/%s", step, site, side);
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    dslot *s = capw_slot_find(c, path);
    if (!s) rc = sibling_check(c, step, site, side, cols);
    if (!rc) rc = get_dataset(c, path, step, site, side, dt, 2, cols, rows, meta, site, &s);
    if (!rc && s->cols != cols)
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: has %zu columns, cannot append %zu", c->path, path,
                            s->cols, cols);
    if (!rc && s->dt != dt)
        rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: stored as %s, cannot append %s", c->path, path,
                            fp4s_dtype_name(s->dt), fp4s_dtype_name(dt));
    if (!rc) rc = append(c, s, 2, data, rows, ld);
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_put_scalar(fp4s_capture *c, int64_t step, const char *name, double value)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: put on a NULL handle");
    if (step < 0 || step > FP4S_CAPTURE_MAX_STEP)
        return fp4s_error_set(FP4S_ERANGE, "%s: scalar: step %" PRId64 " is outside 0..2^53", c->path, step);
    int rc = cap_scalar_name_check(c->path, name);
    if (rc) return rc;
    if ((rc = capw_write_failed(c, "an earlier write failed"))) return rc;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t g;
    bool is_new;
    rc = step_group(c, step, &g, &is_new);
    if (!rc && !is_new)
        rc = fp4s_error_set(FP4S_EINVAL, "%s: step %" PRId64 ": its scalars go with the step, before the "
                            "flush that commits it (the step is in the file already)", c->path, step);
    if (!rc && fp4s_h5_attr_f64(g, name, value) < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: /steps/%" PRId64 ": scalar %s: %s", c->path, step, name,
                            fp4s_h5_msg());
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_put_logprobs(fp4s_capture *c, int64_t step, const float *trainer,
                              const float *rollout, const int64_t *seq, const int64_t *pos,
                              const uint8_t *mask, size_t n)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: put on a NULL handle");
    if (step < 0)
        return fp4s_error_set(FP4S_EINVAL, "%s: logprobs: step %" PRId64 " is negative", c->path, step);
    if (step > FP4S_CAPTURE_MAX_STEP)
        return fp4s_error_set(FP4S_ERANGE, "%s: logprobs: step %" PRId64 " is beyond the largest step a "
                              "capture stores (2^53 = %" PRId64 ")", c->path, step, FP4S_CAPTURE_MAX_STEP);
    if (n && (!trainer || !rollout || !seq))
        return fp4s_error_set(FP4S_EINVAL, "%s: step %" PRId64 ": logprobs need trainer, rollout "
                              "and seq", c->path, step);
    int wrc = capw_write_failed(c, "an earlier write failed");
    if (wrc) return wrc;
    const char *names[5] = {"trainer", "rollout", "seq", "pos", "mask"};
    const void *ptrs[5] = {trainer, rollout, seq, pos, mask};
    fp4s_dtype dts[5] = {FP4S_DT_F32, FP4S_DT_F32, FP4S_DT_I64, FP4S_DT_I64, FP4S_DT_U8};
    char path[5][128];
    int rc = 0;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    /* Consistency first: optional fields present in the file iff given now. */
    size_t len = (size_t)-1;
    bool exists_any = false;
    for (int i = 0; i < 5; i++) {
        snprintf(path[i], sizeof path[i], "/steps/%" PRId64 "/logprobs/%s", step, names[i]);
        dslot *s = capw_slot_find(c, path[i]);
        bool ex = s || fp4s_h5_path_exists(c->file, path[i]);
        if (i == 0) exists_any = ex;
        if (i >= 3 && exists_any && ex != (ptrs[i] != NULL)) {
            rc = fp4s_error_set(FP4S_EINVAL, "%s: %s: %s in earlier blocks of this step; every "
                                "block must give the same fields", c->path, path[i],
                                ex ? "present" : "absent");
            goto out;
        }
    }
    for (int i = 0; i < 5 && !rc; i++) {
        if (!ptrs[i]) continue;
        dslot *s;
        rc = get_dataset(c, path[i], step, "logprobs", names[i], dts[i], 1, 1, n, NULL, NULL, &s);
        if (rc) break;
        if (len == (size_t)-1) len = s->rows;
        else if (s->rows != len) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: length %zu differs from logprobs/trainer "
                                "(%zu)", c->path, path[i], s->rows, len);
            break;
        }
        rc = append(c, s, 1, ptrs[i], n, 1);
    }
out:
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_put_tokens(fp4s_capture *c, int64_t step, const int64_t *token, size_t n)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: put on a NULL handle");
    if (step < 0)
        return fp4s_error_set(FP4S_EINVAL, "%s: tokens: step %" PRId64 " is negative", c->path, step);
    if (n && !token) return fp4s_error_set(FP4S_EINVAL, "%s: step %" PRId64 ": tokens: NULL data", c->path, step);
    int rc = capw_write_failed(c, "an earlier write failed");
    if (rc) return rc;
    char path[128];
    snprintf(path, sizeof path, "/steps/%" PRId64 "/logprobs/token", step);
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    dslot *s;
    rc = get_dataset(c, path, step, "logprobs", "token", FP4S_DT_I64, 1, 1, n, NULL, NULL, &s);
    if (!rc) rc = append(c, s, 1, token, n, 1);
    fp4s_h5_quiet_end(&q);
    return rc;
}

/* Rows of an existing rank-2 dataset (cached or in the file): 1 found, 0 not. */
static int peek_rows(fp4s_capture *c, const char *path, size_t *rows)
{
    dslot *s = capw_slot_find(c, path);
    if (s) {
        *rows = s->rows;
        return 1;
    }
    if (!fp4s_h5_path_exists(c->file, path)) return 0;
    hid_t d = H5Dopen2(c->file, path, H5P_DEFAULT);
    if (d < 0) return 0;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int r = H5Sget_simple_extent_ndims(sp);
    if (r == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    H5Dclose(d);
    if (r != 2) return 0;
    *rows = (size_t)dims[0];
    return 1;
}

int fp4s_capture_put_ids(fp4s_capture *c, int64_t step, const char *site, const char *side,
                         const int64_t *ids, size_t n)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: put on a NULL handle");
    int rc = check_site(c, site);
    if (rc) return rc;
    if (!side || (strcmp(side, "trainer") && strcmp(side, "rollout")))
        return fp4s_error_set(FP4S_EINVAL, "%s: ids: side '%s' is not trainer or rollout (weights have no "
                              "tokens)", c->path, side ? side : "(null)");
    if (step < 0 || step > FP4S_CAPTURE_MAX_STEP)
        return fp4s_error_set(FP4S_ERANGE, "%s: ids: step %" PRId64 " is outside 0..2^53", c->path, step);
    if (n && !ids) return fp4s_error_set(FP4S_EINVAL, "%s: %s/%s: NULL ids", c->path, site, side);
    if ((rc = capw_write_failed(c, "an earlier write failed"))) return rc;
    char apath[600], ipath[640], leaf[32];
    snprintf(apath, sizeof apath, "/steps/%" PRId64 "/%s/%s", step, site, side);
    snprintf(ipath, sizeof ipath, "%s%s", apath, FP4S_CAPTURE_IDS_SUFFIX);
    snprintf(leaf, sizeof leaf, "%s%s", side, FP4S_CAPTURE_IDS_SUFFIX);
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    size_t arows = 0, have = 0;
    if (peek_rows(c, apath, &arows) != 1) {
        rc = fp4s_error_set(FP4S_EINVAL, "%s: %s: ids before rows: put the rows of the side first, then "
                            "their ids", c->path, ipath);
        goto out;
    }
    if (peek_rows(c, ipath, &have) != 1) have = 0;
    if (have + n > arows) {
        rc = fp4s_error_set(FP4S_EINVAL, "%s: %s: %zu ids would follow %zu, but %s holds %zu rows: one id per "
                            "row", c->path, ipath, n, have, apath, arows);
        goto out;
    }
    dslot *s;
    rc = get_dataset(c, ipath, step, site, leaf, FP4S_DT_I64, 2, 2, n, NULL, NULL, &s);
    if (!rc && s->cols != 2)
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: has %zu columns, ids have 2 (sequence, position)", c->path,
                            ipath, s->cols);
    if (!rc && s->dt != FP4S_DT_I64)
        rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: stored as %s, ids are int64", c->path, ipath,
                            fp4s_dtype_name(s->dt));
    if (!rc && s->rows == 0 && fp4s_h5_attr_str(s->d, "columns", "seq,pos") < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot write attributes", c->path, ipath);
    if (!rc) rc = append(c, s, 2, ids, n, 2);
out:
    fp4s_h5_quiet_end(&q);
    return rc;
}

static int attr_obj(fp4s_capture *c, const char *obj, hid_t *o)
{
    const char *p = obj && obj[0] ? obj : "/";
    if (strcmp(p, "/") && !fp4s_h5_path_exists(c->file, p))
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: no such object for the attribute", c->path, p);
    *o = H5Oopen(c->file, p, H5P_DEFAULT);
    if (*o < 0) return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: cannot open: %s", c->path, p, fp4s_h5_msg());
    return 0;
}

static int reserved(fp4s_capture *c, const char *obj, const char *name)
{
    if ((!obj || !obj[0] || strcmp(obj, "/") == 0) &&
        (!strcmp(name, "fp4scope_schema") || !strcmp(name, "writer_state")))
        return fp4s_error_set(FP4S_EINVAL, "%s: root attribute %s belongs to the writer", c->path, name);
    return 0;
}

#define ATTR_FN(fname, T, setter)                                                            \
    int fname(fp4s_capture *c, const char *obj, const char *name, T value)                 \
    {                                                                                        \
        if (!c || !name || !name[0]) return fp4s_error_set(FP4S_EINVAL, "capture: bad attribute call"); \
        int rc = reserved(c, obj, name);                                                     \
        if (rc) return rc;                                                                   \
        fp4s_h5_quiet q;                                                                         \
        fp4s_h5_quiet_begin(&q);                                                                 \
        hid_t o;                                                                             \
        rc = attr_obj(c, obj, &o);                                                           \
        if (!rc) {                                                                           \
            if (setter(o, name, value) < 0)                                                  \
                rc = fp4s_error_set(FP4S_EWRITE, "%s: attribute %s: write failed: %s", c->path, \
                                    name, fp4s_h5_msg());                                     \
            H5Oclose(o);                                                                     \
        }                                                                                    \
        fp4s_h5_quiet_end(&q);                                                                   \
        return rc;                                                                           \
    }

ATTR_FN(fp4s_capture_attr_str, const char *, fp4s_h5_attr_str)
ATTR_FN(fp4s_capture_attr_f64, double, fp4s_h5_attr_f64)
ATTR_FN(fp4s_capture_attr_i64, int64_t, fp4s_h5_attr_i64)
