/* The log-prob reader of captures (h5util.h): the steps that hold
 * /steps/<step>/logprobs, then each step's fields in pieces. The trace reader
 * of analysis/mismatch reads captures through it, so a capture is opened,
 * schema-checked and validated in one place. */
#include "h5util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_TRAINER, F_ROLLOUT, F_SEQ, F_POS, F_MASK, NF };
static const char *const fname[NF] = {"trainer", "rollout", "seq", "pos", "mask"};

struct cap_lp {
    char *file;
    hid_t f;
    int64_t *steps;
    size_t nsteps;
    size_t cur;      /* open step, or (size_t)-1 */
    hid_t d[NF];
    char grp[64];
};

static void close_step(cap_lp *r)
{
    for (int k = 0; k < NF; k++) {
        if (r->d[k] >= 0) H5Dclose(r->d[k]);
        r->d[k] = -1;
    }
    r->cur = (size_t)-1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int lp_open(const char *file, cap_lp *r)
{
    fp4s_capture_info info;
    int rc = fp4s_h5_validate(file, true); /* the log-probs are read, not only listed */
    if (!rc) rc = cap_open_read(file, &r->f, &info);
    if (rc) return rc;
    fp4s_capture_entry *e = NULL;
    size_t n = 0;
    rc = fp4s_capture_list_raw(file, &e, &n); /* the log-probs only: a damaged site does not matter here */
    if (rc) return rc;
    /* the listing is sorted by step: one entry per step with logprobs/trainer */
    r->steps = malloc((n ? n : 1) * sizeof *r->steps);
    if (!r->steps) {
        free(e);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", file);
    }
    bool any_steps = false;
    for (size_t i = 0; i < n; i++) {
        any_steps |= e[i].step >= 0;
        if (e[i].step >= 0 && strcmp(e[i].site, "logprobs") == 0 &&
            (r->nsteps == 0 || r->steps[r->nsteps - 1] != e[i].step))
            r->steps[r->nsteps++] = e[i].step;
    }
    free(e);
    qsort(r->steps, r->nsteps, sizeof *r->steps, cmp_i64);
    if (!any_steps && !fp4s_h5_path_exists(r->f, "/steps"))
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: no /steps group", file);
    if (r->nsteps == 0)
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: no /steps/<step>/logprobs group (the capture holds "
                              "no log-probs)", file);
    return 0;
}

void cap_lp_close(cap_lp **rp)
{
    if (!rp || !*rp) return;
    cap_lp *r = *rp;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    close_step(r);
    if (r->f >= 0) H5Fclose(r->f);
    fp4s_h5_quiet_end(&q);
    free(r->steps);
    free(r->file);
    free(r);
    *rp = NULL;
}

int cap_lp_open(const char *file, cap_lp **out)
{
    *out = NULL;
    cap_lp *r = calloc(1, sizeof *r);
    if (!r || !(r->file = strdup(file))) {
        free(r);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", file);
    }
    r->f = -1;
    for (int k = 0; k < NF; k++) r->d[k] = -1;
    r->cur = (size_t)-1;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = lp_open(file, r);
    fp4s_h5_quiet_end(&q);
    if (rc) {
        cap_lp_close(&r);
        return rc;
    }
    *out = r;
    return 0;
}

size_t cap_lp_nsteps(const cap_lp *r) { return r->nsteps; }
int64_t cap_lp_step(const cap_lp *r, size_t i) { return i < r->nsteps ? r->steps[i] : -1; }

static int open_field(cap_lp *r, int k, hsize_t *len, bool *f32)
{
    char p[96];
    snprintf(p, sizeof p, "%s/%s", r->grp, fname[k]);
    if (!fp4s_h5_path_exists(r->f, p)) {
        if (k <= F_SEQ) return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: dataset missing", r->file, p);
        return 0;
    }
    hid_t d = H5Dopen2(r->f, p, H5P_DEFAULT);
    if (d < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open dataset: %s", r->file, p, fp4s_h5_msg());
    r->d[k] = d;
    char what[200];
    snprintf(what, sizeof what, "%s: %s", r->file, p);
    int lrc = fp4s_h5_check_layout(d, what);
    if (lrc) return lrc;
    hid_t sp = H5Dget_space(d);
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[1] = {0};
    if (rank == 1) H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0) H5Sclose(sp);
    if (rank != 1)
        return fp4s_error_set(FP4S_ESHAPE, "%s: %s: expected a 1-D dataset, found rank %d", r->file, p, rank);
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    size_t sz = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    if (k <= F_ROLLOUT && cls != H5T_FLOAT)
        return fp4s_error_set(FP4S_EDTYPE, "%s: %s: expected float32 or float64 log-probs", r->file, p);
    if (k > F_ROLLOUT && cls != H5T_INTEGER)
        return fp4s_error_set(FP4S_EDTYPE, "%s: %s: expected an integer dataset", r->file, p);
    if (k <= F_ROLLOUT) *f32 = *f32 && sz == 4;
    *len = dims[0];
    return 0;
}

static int open_step(cap_lp *r, size_t i, cap_lp_step_info *info)
{
    close_step(r);
    if (i >= r->nsteps)
        return fp4s_error_set(FP4S_EINVAL, "%s: step index %zu out of range", r->file, i);
    snprintf(r->grp, sizeof r->grp, "/steps/%" PRId64 "/logprobs", r->steps[i]);
    hsize_t len[NF] = {0};
    bool f32 = true;
    for (int k = 0; k < NF; k++) {
        int rc = open_field(r, k, &len[k], &f32);
        if (rc) {
            close_step(r);
            return rc;
        }
    }
    for (int k = 1; k < NF; k++)
        if (r->d[k] >= 0 && len[k] != len[0]) {
            close_step(r);
            return fp4s_error_set(FP4S_ESHAPE, "%s: %s: %s has %llu tokens but trainer has %llu", r->file,
                                  r->grp, fname[k], (unsigned long long)len[k], (unsigned long long)len[0]);
        }
    r->cur = i;
    info->tokens = (size_t)len[0];
    info->has_pos = r->d[F_POS] >= 0;
    info->has_mask = r->d[F_MASK] >= 0;
    info->f32 = f32;
    return 0;
}

int cap_lp_open_step(cap_lp *r, size_t i, cap_lp_step_info *info)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = open_step(r, i, info);
    fp4s_h5_quiet_end(&q);
    return rc;
}

static int read1(cap_lp *r, int k, hid_t mt, size_t off, size_t n, void *buf)
{
    hsize_t o = off, c = n;
    hid_t fs = H5Dget_space(r->d[k]);
    hid_t ms = H5Screate_simple(1, &c, NULL);
    herr_t e = fs < 0 || ms < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &o, NULL, &c, NULL);
    if (e >= 0) e = H5Dread(r->d[k], mt, ms, fs, H5P_DEFAULT, buf);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (e < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s/%s: read failed: %s", r->file, r->grp, fname[k],
                              fp4s_h5_msg());
    return 0;
}

int cap_lp_read(cap_lp *r, size_t off, size_t n, bool f32, void *trainer, void *rollout, int64_t *seq,
                int64_t *pos, uint8_t *mask)
{
    if (r->cur == (size_t)-1) return fp4s_error_set(FP4S_EINTERNAL, "%s: no step open", r->file);
    if (n == 0) return 0;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t lt = f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
    int rc = read1(r, F_TRAINER, lt, off, n, trainer);
    if (!rc) rc = read1(r, F_ROLLOUT, lt, off, n, rollout);
    if (!rc) rc = read1(r, F_SEQ, H5T_NATIVE_INT64, off, n, seq);
    if (!rc && pos && r->d[F_POS] >= 0) rc = read1(r, F_POS, H5T_NATIVE_INT64, off, n, pos);
    if (!rc && mask && r->d[F_MASK] >= 0) rc = read1(r, F_MASK, H5T_NATIVE_UINT8, off, n, mask);
    fp4s_h5_quiet_end(&q);
    return rc;
}
