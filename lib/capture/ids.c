/* Token ids of captures (capture.h): reading a side's <side>_ids dataset,
 * matching the ids of two sides, and the checks fp4s_capture_verify runs on
 * them. */
#include "h5util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct idrow {
    int64_t seq, pos;
    size_t row;
} idrow;

static int idrow_cmp(const void *pa, const void *pb)
{
    const idrow *a = pa, *b = pb;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
    return a->row < b->row ? -1 : a->row > b->row;
}

/* ids [n][2] as rows sorted by id (then row); FP4S_EFORMAT for an id on two rows. */
static int sorted_ids(const int64_t *ids, size_t n, const char *label, idrow **out)
{
    *out = malloc((n ? n : 1) * sizeof **out);
    if (!*out) return fp4s_error_set(FP4S_ENOMEM, "out of memory for %zu token ids", n);
    for (size_t i = 0; i < n; i++) (*out)[i] = (idrow){ids[2 * i], ids[2 * i + 1], i};
    qsort(*out, n, sizeof **out, idrow_cmp);
    for (size_t i = 1; i < n; i++)
        if ((*out)[i].seq == (*out)[i - 1].seq && (*out)[i].pos == (*out)[i - 1].pos) {
            int rc = fp4s_error_set(FP4S_EFORMAT, "%s: token id (sequence %" PRId64 ", position %" PRId64
                                    ") on rows %zu and %zu: an id names one token, once per site and step",
                                    label, (*out)[i].seq, (*out)[i].pos, (*out)[i - 1].row, (*out)[i].row);
            free(*out);
            *out = NULL;
            return rc;
        }
    return 0;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

void fp4s_id_match_free(fp4s_id_match *m)
{
    if (!m) return;
    free(m->a);
    free(m->b);
    free(m->only_a);
    free(m->only_b);
    memset(m, 0, sizeof *m);
}

int fp4s_ids_match(const int64_t *ids_a, size_t na, const int64_t *ids_b, size_t nb, fp4s_id_match *m)
{
    if (!m) return fp4s_error_set(FP4S_EINVAL, "fp4s_ids_match: NULL output");
    memset(m, 0, sizeof *m);
    if ((na && !ids_a) || (nb && !ids_b)) return fp4s_error_set(FP4S_EINVAL, "fp4s_ids_match: NULL ids");
    idrow *a = NULL, *b = NULL;
    int rc = sorted_ids(ids_a, na, "side A", &a);
    if (!rc) rc = sorted_ids(ids_b, nb, "side B", &b);
    size_t cap = na < nb ? na : nb;
    if (!rc) {
        m->a = malloc((cap ? cap : 1) * sizeof *m->a);
        m->b = malloc((cap ? cap : 1) * sizeof *m->b);
        m->only_a = malloc((na ? na : 1) * sizeof *m->only_a);
        m->only_b = malloc((nb ? nb : 1) * sizeof *m->only_b);
        if (!m->a || !m->b || !m->only_a || !m->only_b)
            rc = fp4s_error_set(FP4S_ENOMEM, "out of memory matching %zu and %zu token ids", na, nb);
    }
    if (rc) {
        free(a);
        free(b);
        fp4s_id_match_free(m);
        return rc;
    }
    /* merge the two sorted lists; pairs come out in id order */
    idrow *pairs = malloc((cap ? cap : 1) * sizeof *pairs);
    if (!pairs) {
        free(a);
        free(b);
        fp4s_id_match_free(m);
        return fp4s_error_set(FP4S_ENOMEM, "out of memory matching token ids");
    }
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : (a[i].seq != b[j].seq ? (a[i].seq < b[j].seq ? -1 : 1)
                                               : a[i].pos != b[j].pos ? (a[i].pos < b[j].pos ? -1 : 1) : 0);
        if (c == 0) {
            /* seq/pos reused to carry (row a, row b) while sorting by row a */
            pairs[m->npairs++] = (idrow){(int64_t)a[i].row, (int64_t)b[j].row, a[i].row};
            i++;
            j++;
        } else if (c < 0) {
            m->only_a[m->nonly_a++] = a[i++].row;
        } else {
            m->only_b[m->nonly_b++] = b[j++].row;
        }
    }
    free(a);
    free(b);
    /* pairs by increasing row of side A: seq holds it, and rows of a side are distinct */
    qsort(pairs, m->npairs, sizeof *pairs, idrow_cmp);
    for (size_t k = 0; k < m->npairs; k++) {
        m->a[k] = (size_t)pairs[k].seq;
        m->b[k] = (size_t)pairs[k].pos;
    }
    free(pairs);
    qsort(m->only_a, m->nonly_a, sizeof *m->only_a, cmp_size);
    qsort(m->only_b, m->nonly_b, sizeof *m->only_b, cmp_size);
    return 0;
}

/* Read /steps/<step>/<site>/<side>_ids of an open file (the side's entry e):
 * checked as fp4s_capture_read_ids says. */
int cap_read_ids_open(hid_t f, const char *file, const fp4s_capture_entry *e, int64_t **ids, size_t *n)
{
    char path[sizeof e->path + 8];
    snprintf(path, sizeof path, "%s%s", e->path, FP4S_CAPTURE_IDS_SUFFIX);
    if (!fp4s_h5_path_exists(f, path))
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: the side carries no token ids", file, e->path);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open: %s", file, path, fp4s_h5_msg());
    char what[sizeof path + 600];
    snprintf(what, sizeof what, "%s: %s", file, path);
    int rc = fp4s_h5_check_layout(d, what);
    fp4s_dtype dt;
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (rank == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0) H5Sclose(sp);
    if (!rc && (fp4s_h5_dset_dtype(d, &dt) || dt != FP4S_DT_I64))
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: token ids must be int64 (sequence, position)", what);
    else if (!rc && (rank != 2 || dims[1] != 2))
        rc = rank == 2 ? fp4s_error_set(FP4S_EFORMAT, "%s: token ids must be [rows, 2] (sequence, position), found "
                                        "%llu columns", what, (unsigned long long)dims[1])
                       : fp4s_error_set(FP4S_EFORMAT, "%s: token ids must be [rows, 2] (sequence, position), found "
                                        "rank %d", what, rank);
    else if (!rc && dims[0] != e->rows)
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %llu token ids for the %zu rows of %s: one id per row", what,
                            (unsigned long long)dims[0], e->rows, e->path);
    int64_t *v = NULL;
    if (!rc) {
        v = malloc(dims[0] ? (size_t)dims[0] * 2 * sizeof *v : 1);
        if (!v) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", what);
        else if (dims[0] && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: cannot read: %s", what, fp4s_h5_msg());
    }
    H5Dclose(d);
    if (!rc) {
        idrow *s = NULL;
        rc = sorted_ids(v, (size_t)dims[0], what, &s);
        free(s);
    }
    if (rc) {
        free(v);
        return rc;
    }
    *ids = v;
    *n = (size_t)dims[0];
    return 0;
}

int fp4s_capture_read_ids(const char *file, const fp4s_capture_entry *e, int64_t **ids, size_t *n)
{
    if (!file || !e || !ids || !n) return fp4s_error_set(FP4S_EINVAL, "fp4s_capture_read_ids: NULL argument");
    *ids = NULL;
    *n = 0;
    if (e->step < 0 || (strcmp(e->side, "trainer") && strcmp(e->side, "rollout")))
        return fp4s_error_set(FP4S_EINVAL, "%s: %s: only the trainer and rollout sides of a step carry token ids",
                              file, e->path);
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    hid_t f = fp4s_h5_open_read(file, &rc);
    if (f >= 0) {
        rc = cap_read_ids_open(f, file, e, ids, n);
        H5Fclose(f);
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_flip_share(const char *file, int64_t step, const int64_t *ids, size_t n, fp4s_flip_share *out)
{
    if (!file || !out || (n && !ids)) return fp4s_error_set(FP4S_EINVAL, "fp4s_capture_flip_share: NULL argument");
    memset(out, 0, sizeof *out);
    cap_lp *r = NULL;
    int rc = cap_lp_open(file, &r);
    if (rc) return rc;
    size_t si = cap_lp_nsteps(r);
    for (size_t i = 0; i < cap_lp_nsteps(r); i++)
        if (cap_lp_step(r, i) == step) si = i;
    cap_lp_step_info info;
    float *t = NULL, *ro = NULL;
    int64_t *seq = NULL, *pos = NULL;
    uint8_t *mask = NULL;
    idrow *set = NULL, *lp = NULL;
    if (si == cap_lp_nsteps(r)) {
        rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: step %lld has no log-probs", file, (long long)step);
        goto out;
    }
    if ((rc = cap_lp_open_step(r, si, &info))) goto out;
    if (!info.has_pos) {
        rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: /steps/%lld/logprobs has no pos: its rows cannot be joined to "
                            "token ids", file, (long long)step);
        goto out;
    }
    size_t T = info.tokens;
    t = malloc((T ? T : 1) * sizeof *t);
    ro = malloc((T ? T : 1) * sizeof *ro);
    seq = malloc((T ? T : 1) * sizeof *seq);
    pos = malloc((T ? T : 1) * sizeof *pos);
    mask = malloc(T ? T : 1);
    set = malloc((n ? n : 1) * sizeof *set);
    lp = malloc((T ? T : 1) * sizeof *lp);
    if (!t || !ro || !seq || !pos || !mask || !set || !lp) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", file);
        goto out;
    }
    if (T && (rc = cap_lp_read(r, 0, T, true, t, ro, seq, pos, info.has_mask ? mask : NULL))) goto out;
    if (!info.has_mask) memset(mask, 1, T);
    /* the set, sorted and without repeats */
    for (size_t i = 0; i < n; i++) set[i] = (idrow){ids[2 * i], ids[2 * i + 1], i};
    qsort(set, n, sizeof *set, idrow_cmp);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (!ns || set[i].seq != set[ns - 1].seq || set[i].pos != set[ns - 1].pos) set[ns++] = set[i];
    size_t nl = 0;
    for (size_t i = 0; i < T; i++) {
        if (!mask[i]) continue;
        double d = (double)t[i] - (double)ro[i];
        out->tokens++;
        out->abs_all += fabs(d);
        out->sq_all += d * d;
        lp[nl++] = (idrow){seq[i], pos[i], i};
    }
    qsort(lp, nl, sizeof *lp, idrow_cmp);
    size_t j = 0;
    for (size_t i = 0; i < ns; i++) {
        while (j < nl && (lp[j].seq < set[i].seq || (lp[j].seq == set[i].seq && lp[j].pos < set[i].pos))) j++;
        if (j < nl && lp[j].seq == set[i].seq && lp[j].pos == set[i].pos) {
            /* every log-prob row of that id (a repeated (seq, pos) counts each time) */
            for (size_t q = j; q < nl && lp[q].seq == set[i].seq && lp[q].pos == set[i].pos; q++) {
                double d = (double)t[lp[q].row] - (double)ro[lp[q].row];
                out->in_set++;
                out->abs_set += fabs(d);
                out->sq_set += d * d;
            }
        } else {
            out->set_unmatched++;
        }
    }
out:
    free(t);
    free(ro);
    free(seq);
    free(pos);
    free(mask);
    free(set);
    free(lp);
    cap_lp_close(&r);
    return rc;
}
