/* The read side of captures: listing, info, (step, site) pairs, verification. */
#include "h5util.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool fp4s_site_match(const char *pattern, const char *site)
{
    if (!pattern || !site) return false;
    return fnmatch(pattern, site, 0) == 0;
}

size_t fp4s_capture_entry_spec(const char *file, const fp4s_capture_entry *e, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s:%s", file, e->path);
    return len < 0 ? 0 : (size_t)len;
}

/* ---- listing ---------------------------------------------------------------- */
typedef struct list_ctx {
    const char *file;
    hid_t f;
    fp4s_capture_entry *v;
    size_t n, cap;
    int rc;
    /* current position while iterating */
    int64_t step;
    const char *site;
    char prefix[512];
    fp4s_capture_info *info;
    hid_t cur;             /* the group being iterated (children open relative to it) */
    bool tolerant;         /* interrupted file: skip unreadable objects */
    size_t skipped;
} list_ctx;

static int side_rank(const char *site, const char *side)
{
    static const char *act[] = {"trainer", "rollout", "weight", "trainer_ids", "rollout_ids"};
    static const char *lp[] = {"trainer", "rollout", "seq", "pos", "mask", "token"};
    const char **t = strcmp(site, "logprobs") == 0 ? lp : act;
    int m = strcmp(site, "logprobs") == 0 ? 6 : 5;
    for (int i = 0; i < m; i++)
        if (strcmp(t[i], side) == 0) return i;
    return m;
}

static int entry_cmp(const void *pa, const void *pb)
{
    const fp4s_capture_entry *a = pa, *b = pb;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    int la = strcmp(a->site, "logprobs") == 0, lb = strcmp(b->site, "logprobs") == 0;
    if (la != lb) return la - lb; /* log-probs after the sites of a step */
    int c = cap_natcmp(a->site, b->site);
    if (c) return c;
    int ra = side_rank(a->site, a->side), rb = side_rank(b->site, b->side);
    if (ra != rb) return ra - rb;
    return strcmp(a->side, b->side);
}

static int add_dataset_at(list_ctx *c, const char *site, const char *side, const char *path,
                          hid_t loc, const char *rel)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 256;
        fp4s_capture_entry *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory listing datasets", c->file);
        c->v = nv;
        c->cap = nc;
    }
    fp4s_capture_entry *e = &c->v[c->n];
    memset(e, 0, sizeof *e);
    e->step = c->step;
    if (strlen(site) >= sizeof e->site || strlen(side) >= sizeof e->side ||
        strlen(path) >= sizeof e->path)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: name too long", c->file, path);
    strcpy(e->site, site);
    strcpy(e->side, side);
    strcpy(e->path, path);
    hid_t d = H5Dopen2(loc, rel, H5P_DEFAULT);
    if (d < 0) {
        hid_t g = H5Gopen2(loc, rel, H5P_DEFAULT);
        if (g >= 0) { /* unknown groups inside a site are ignored */
            H5Gclose(g);
            return 0;
        }
    }
    if (d < 0 && c->tolerant) {
        c->skipped++;
        return 0;
    }
    if (d < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot open the dataset (damaged?): %s", c->file, e->path,
                              fp4s_h5_msg());
    /* (the layout is checked where data is read: fp4s_h5_check_layout) */
    int rc = fp4s_h5_dset_dtype(d, &e->dtype);
    if (rc) {
        H5Dclose(d);
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: unsupported element type (expected float32, "
                              "float16, bfloat16 as uint16, uint8 or int64)", c->file, e->path);
    }
    hid_t sp = H5Dget_space(d);
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[2] = {0, 0};
    if (rank == 1 || rank == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    if (rank == 1) {
        e->rows = 1;
        e->cols = (size_t)dims[0];
    } else if (rank == 2) {
        e->rows = (size_t)dims[0];
        e->cols = (size_t)dims[1];
    } else {
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: expected a 1-D or 2-D dataset, found rank %d",
                              c->file, e->path, rank);
    }
    c->n++;
    return 0;
}

static int add_dataset(list_ctx *c, const char *side)
{
    char path[600];
    int pl = snprintf(path, sizeof path, "%s/%s", c->prefix, side);
    if (pl < 0 || (size_t)pl >= sizeof path)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s/%s: path too long", c->file, c->prefix, side);
    return add_dataset_at(c, c->site, side, path, c->cur, side);
}

/* Iterate the children of the group at c->prefix; for each dataset call
 * add_dataset, for each group call `sub` (may be NULL: groups are an error). */
typedef int (*child_fn)(list_ctx *c, const char *name, H5O_type_t type);

typedef struct iter_arg {
    list_ctx *c;
    child_fn fn;
} iter_arg;

static herr_t iter_cb(hid_t g, const char *name, const H5L_info_t *li, void *op)
{
    iter_arg *ia = op;
    (void)li;
    /* No object-info call here (it reads the whole object header): each child
     * handler opens the object as what it expects and reports otherwise. */
    hid_t saved = ia->c->cur;
    ia->c->cur = g;
    int rc = ia->fn(ia->c, name, H5O_TYPE_UNKNOWN);
    ia->c->cur = saved;
    if (rc) {
        ia->c->rc = rc;
        return -1;
    }
    return 0;
}

static int iterate(list_ctx *c, child_fn fn, const char *rel)
{
    hid_t g = rel && c->cur >= 0 ? H5Gopen2(c->cur, rel, H5P_DEFAULT) : H5Gopen2(c->f, c->prefix, H5P_DEFAULT);
    if (g < 0 && c->tolerant) {
        c->skipped++;
        return 0;
    }
    if (g < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: expected a group (step or site): %s", c->file,
                              c->prefix, fp4s_h5_msg());
    iter_arg ia = {c, fn};
    hsize_t idx = 0;
    c->rc = 0;
    herr_t r = H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, iter_cb, &ia);
    H5Gclose(g);
    if (c->rc) return c->rc;
    if (r < 0 && c->tolerant) {
        c->skipped++;
        return 0;
    }
    if (r < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: cannot list group: %s", c->file, c->prefix,
                              fp4s_h5_msg());
    return 0;
}

static int side_child(list_ctx *c, const char *name, H5O_type_t type)
{
    (void)type;
    return add_dataset(c, name);
}

static int site_child(list_ctx *c, const char *name, H5O_type_t type)
{
    (void)type;
    size_t pl = strlen(c->prefix);
    int w = snprintf(c->prefix + pl, sizeof c->prefix - pl, "/%s", name);
    if (w < 0 || (size_t)w >= sizeof c->prefix - pl)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s/%s: path too long", c->file, c->prefix, name);
    const char *old = c->site;
    c->site = name;
    int rc = iterate(c, side_child, name);
    c->site = old;
    c->prefix[pl] = '\0';
    return rc;
}

/* A step group's name: a decimal int64 without leading zeros. (The writer
 * stores at most FP4S_CAPTURE_MAX_STEP; larger ones in files made otherwise
 * are still read.) */
static int parse_step(const char *name, int64_t *out)
{
    if (!name[0] || strlen(name) > 19) return -1;
    for (const char *p = name; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    if (name[0] == '0' && name[1]) return -1;
    errno = 0;
    long long v = strtoll(name, NULL, 10);
    if (errno) return -1;
    *out = (int64_t)v;
    return 0;
}

static int step_child(list_ctx *c, const char *name, H5O_type_t type)
{
    int64_t st;
    (void)type;
    if (parse_step(name, &st) && c->tolerant) {
        c->skipped++;
        return 0;
    }
    if (parse_step(name, &st))
        return fp4s_error_set(FP4S_EFORMAT, "%s: /steps/%s: step groups must be named by a "
                              "decimal integer", c->file, name);
    if (c->info) {
        if (c->info->nsteps == 0 || st < c->info->first_step) c->info->first_step = st;
        if (c->info->nsteps == 0 || st > c->info->last_step) c->info->last_step = st;
        c->info->nsteps++;
    }
    c->step = st;
    snprintf(c->prefix, sizeof c->prefix, "/steps/%s", name);
    return iterate(c, site_child, name);
}

static int list_open(const char *file, hid_t f, fp4s_capture_info *info, fp4s_capture_entry **entries,
                     size_t *n)
{
    list_ctx c;
    memset(&c, 0, sizeof c);
    c.file = file;
    c.f = f;
    c.info = info;
    c.tolerant = info->interrupted;
    c.cur = -1;
    int rc = 0;
    if (fp4s_h5_path_exists(f, "/weights")) {
        c.step = FP4S_CAPTURE_CONST_STEP;
        strcpy(c.prefix, "/weights");
        /* /weights/<site> is a dataset directly */
        hid_t g = H5Gopen2(f, "/weights", H5P_DEFAULT);
        if (g < 0) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: /weights: expected a group", file);
            goto out;
        }
        H5G_info_t gi;
        if (H5Gget_info(g, &gi) < 0) {
            H5Gclose(g);
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: /weights: cannot list", file);
            goto out;
        }
        char name[256];
        for (hsize_t i = 0; i < gi.nlinks && !rc; i++) {
            ssize_t l = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, name,
                                           sizeof name, H5P_DEFAULT);
            if (l < 0 || (size_t)l >= sizeof name) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: /weights: bad link name", file);
                break;
            }
            char path[600];
            snprintf(path, sizeof path, "/weights/%s", name);
            rc = add_dataset_at(&c, name, "weight", path, g, name);
        }
        H5Gclose(g);
        if (rc) goto out;
    }
    if (fp4s_h5_path_exists(f, "/steps")) {
        strcpy(c.prefix, "/steps");
        rc = iterate(&c, step_child, NULL);
        if (rc) goto out;
    }
    /* logprob groups were listed as site "logprobs": nothing more to do */
    qsort(c.v, c.n, sizeof *c.v, entry_cmp);
    info->skipped = c.skipped;
    *entries = c.v;
    *n = c.n;
    return 0;
out:
    free(c.v);
    return rc;
}

/* Does (step, site) list the ids dataset of `side` ("trainer" -> trainer_ids)?
 * The listing is sorted: the entries of one (step, site) are adjacent. */
static bool has_ids(const fp4s_capture_entry *v, size_t n, size_t at, const char *side)
{
    char want[32];
    snprintf(want, sizeof want, "%s%s", side, FP4S_CAPTURE_IDS_SUFFIX);
    size_t lo = at;
    while (lo > 0 && v[lo - 1].step == v[at].step && strcmp(v[lo - 1].site, v[at].site) == 0) lo--;
    for (size_t j = lo; j < n && v[j].step == v[at].step && strcmp(v[j].site, v[at].site) == 0; j++)
        if (strcmp(v[j].side, want) == 0) return true;
    return false;
}

/* The shape rule of one (step, site): K equal; the rows too unless both sides
 * carry token ids (rows are then paired by id). */
static int pair_shape(const char *file, const fp4s_capture_entry *v, size_t n, size_t ti,
                      const fp4s_capture_entry *t, const fp4s_capture_entry *r)
{
    if (t->cols == r->cols && (t->rows == r->rows || (has_ids(v, n, ti, "trainer") && has_ids(v, n, ti, "rollout"))))
        return 0;
    return fp4s_error_set(FP4S_ESHAPE, "%s: /steps/%" PRId64 "/%s: trainer is [%zu, %zu] but "
                          "rollout is [%zu, %zu]; %s (fp4-capture ls --check lists the capture)", file, t->step,
                          t->site, t->rows, t->cols, r->rows, r->cols,
                          t->cols != r->cols ? "both sides must have the same K"
                                             : "both sides must hold the same tokens, or carry token ids on "
                                               "both sides (trainer_ids, rollout_ids) to be paired by id");
}

/* Trainer and rollout of one (step, site) must have one shape. The listing
 * is sorted with trainer right before rollout. */
static int check_pairs(const char *file, const fp4s_capture_entry *v, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        const fp4s_capture_entry *t = &v[i], *r = &v[i + 1];
        if (t->step != r->step || strcmp(t->site, r->site) || strcmp(t->site, "logprobs") == 0 ||
            strcmp(t->side, "trainer") || strcmp(r->side, "rollout"))
            continue;
        int rc = pair_shape(file, v, n, i, t, r);
        if (rc) return rc;
    }
    return 0;
}

int fp4s_capture_list(const char *file, fp4s_capture_entry **entries, size_t *n)
{
    int rc = fp4s_capture_list_raw(file, entries, n);
    if (!rc) rc = check_pairs(file, *entries, *n);
    if (rc) {
        free(*entries);
        *entries = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- the listing and the info, read in a child process ----------------------------
 * A damaged file can make libhdf5 crash; everything these two readers do with
 * the file happens in a child (fp4s_h5_isolate), which sends back the result:
 * [int rc][detail, NUL-terminated][fp4s_capture_info][size_t n][n entries]. */
typedef struct iso_arg {
    const char *file;
    bool list;
} iso_arg;

static int list_inproc(const char *file, fp4s_capture_entry **entries, size_t *n);
static int info_inproc(const char *file, fp4s_capture_info *info);

static void iso_child(void *arg, int fd)
{
    const iso_arg *a = arg;
    fp4s_capture_info info;
    memset(&info, 0, sizeof info);
    fp4s_capture_entry *v = NULL;
    size_t n = 0;
    int rc = a->list ? list_inproc(a->file, &v, &n) : info_inproc(a->file, &info);
    const char *d = rc ? fp4s_last_error() : "";
    if (fp4s_h5_iso_write(fd, &rc, sizeof rc) || fp4s_h5_iso_write(fd, d, strlen(d) + 1) ||
        fp4s_h5_iso_write(fd, &info, sizeof info) || fp4s_h5_iso_write(fd, &n, sizeof n) ||
        (n && fp4s_h5_iso_write(fd, v, n * sizeof *v)))
        _exit(3);
    free(v);
}

/* 0 done (rc = the child's result), 1 do it in-process */
static int isolated(const char *file, bool list, int *rc, fp4s_capture_info *info,
                    fp4s_capture_entry **entries, size_t *n)
{
    if (!fp4s_h5_isolation_on()) return 1;
    iso_arg a = {file, list};
    unsigned char *b;
    size_t len;
    int r = fp4s_h5_isolate(file, iso_child, &a, &b, &len);
    if (r == 1) return 1;
    if (r) {
        *rc = r;
        return 0;
    }
    size_t off = 0, dl;
    const unsigned char *p = b;
    if (len < sizeof(int) || (dl = strnlen((const char *)p + sizeof(int), len - sizeof(int))) ==
                                 len - sizeof(int))
        goto bad;
    memcpy(rc, p, sizeof(int));
    off = sizeof(int) + dl + 1;
    if (*rc) fp4s_error_set(*rc, "%s", (const char *)p + sizeof(int));
    if (len - off < sizeof *info + sizeof(size_t)) goto bad;
    if (info) memcpy(info, p + off, sizeof *info);
    off += sizeof *info;
    size_t k;
    memcpy(&k, p + off, sizeof k);
    off += sizeof k;
    if (k > (len - off) / sizeof(fp4s_capture_entry) || (len - off) != k * sizeof(fp4s_capture_entry)) goto bad;
    /* a failed listing returns no entries: callers free them only on success */
    if (entries && *rc == 0) {
        *entries = malloc((k ? k : 1) * sizeof **entries);
        if (!*entries) {
            free(b);
            *rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", file);
            return 0;
        }
        if (k) memcpy(*entries, p + off, k * sizeof **entries);
        *n = k;
    }
    free(b);
    return 0;
bad:
    free(b);
    *rc = fp4s_error_set(FP4S_EINTERNAL, "%s: the listing process sent a malformed result", file);
    return 0;
}

int fp4s_capture_list_raw(const char *file, fp4s_capture_entry **entries, size_t *n)
{
    *entries = NULL;
    *n = 0;
    int rc;
    if (isolated(file, true, &rc, NULL, entries, n) == 0) return rc;
    return list_inproc(file, entries, n);
}

static int list_inproc(const char *file, fp4s_capture_entry **entries, size_t *n)
{
    *entries = NULL;
    *n = 0;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t f;
    fp4s_capture_info info;
    int rc = cap_open_read(file, &f, &info);
    if (!rc) {
        info.nsteps = 0;
        rc = list_open(file, f, &info, entries, n);
        H5Fclose(f);
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_info_read(const char *file, fp4s_capture_info *info)
{
    int rc;
    if (isolated(file, false, &rc, info, NULL, NULL) == 0) return rc;
    return info_inproc(file, info);
}

static int info_inproc(const char *file, fp4s_capture_info *info)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t f;
    int rc = cap_open_read(file, &f, info);
    if (!rc) {
        fp4s_capture_entry *v = NULL;
        size_t n = 0;
        info->nsteps = 0;
        info->first_step = info->last_step = -1;
        if (info->interrupted) {
            rc = list_open(file, f, info, &v, &n); /* counts what must be skipped */
            free(v);
        } else if (fp4s_h5_path_exists(f, "/steps")) {
            hid_t g = H5Gopen2(f, "/steps", H5P_DEFAULT);
            H5G_info_t gi;
            if (g >= 0 && H5Gget_info(g, &gi) >= 0) {
                char name[64];
                for (hsize_t i = 0; i < gi.nlinks && !rc; i++) {
                    int64_t st;
                    ssize_t l = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, name,
                                                   sizeof name, H5P_DEFAULT);
                    if (l < 0 || (size_t)l >= sizeof name || parse_step(name, &st)) {
                        rc = fp4s_error_set(FP4S_EFORMAT, "%s: /steps/%s: step groups must be "
                                            "named by a decimal integer", file, l > 0 ? name : "?");
                        break;
                    }
                    if (info->nsteps == 0 || st < info->first_step) info->first_step = st;
                    if (info->nsteps == 0 || st > info->last_step) info->last_step = st;
                    info->nsteps++;
                }
            } else {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: /steps: expected a group", file);
            }
            if (g >= 0) H5Gclose(g);
        }
        H5Fclose(f);
    }
    fp4s_h5_quiet_end(&q);
    return rc;
}

/* ---- pairs and verification --------------------------------------------------------- */
static const fp4s_capture_entry *find(const fp4s_capture_entry *v, size_t n, int64_t step,
                                      const char *site, const char *side)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].step == step && strcmp(v[i].site, site) == 0 && strcmp(v[i].side, side) == 0)
            return &v[i];
    return NULL;
}

static int pair_in(const char *file, const fp4s_capture_entry *v, size_t n, int64_t step,
                   const char *site, fp4s_capture_entry *tr, fp4s_capture_entry *ro)
{
    bool have_step = false, have_site = false;
    for (size_t i = 0; i < n; i++) {
        if (v[i].step != step) continue;
        have_step = true;
        if (strcmp(v[i].site, site) == 0) have_site = true;
    }
    if (!have_step) {
        int64_t lo = -1, hi = -1;
        size_t ns = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i].step < 0) continue;
            if (!ns || v[i].step < lo) lo = v[i].step;
            if (!ns || v[i].step > hi) hi = v[i].step;
            ns++;
        }
        if (!ns)
            return fp4s_error_set(FP4S_ENOTFOUND, "%s: step %" PRId64 " not found (the capture has "
                                  "no steps)", file, step);
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: step %" PRId64 " not found (steps %" PRId64
                              "..%" PRId64 ")", file, step, lo, hi);
    }
    if (!have_site)
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: step %" PRId64 ": site '%s' not found "
                              "(fp4-capture ls %s lists the sites)", file, step, site, file);
    const fp4s_capture_entry *t = find(v, n, step, site, "trainer");
    const fp4s_capture_entry *r = find(v, n, step, site, "rollout");
    if (!t || !r)
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: /steps/%" PRId64 "/%s: no %s side", file, step,
                              site, !t ? "trainer" : "rollout");
    int rc = pair_shape(file, v, n, (size_t)(t - v), t, r);
    if (rc) return rc;
    if (tr) *tr = *t;
    if (ro) *ro = *r;
    return 0;
}

int fp4s_capture_pair(const char *file, int64_t step, const char *site, fp4s_capture_entry *tr,
                      fp4s_capture_entry *ro)
{
    fp4s_capture_entry *v;
    size_t n;
    int rc = fp4s_capture_list_raw(file, &v, &n);
    if (rc) return rc;
    rc = pair_in(file, v, n, step, site, tr, ro);
    free(v);
    return rc;
}

int fp4s_capture_verify(const char *file)
{
    fp4s_capture_entry *v;
    size_t n;
    int rc = fp4s_capture_list_raw(file, &v, &n);
    if (rc) return rc;
    hid_t f = -1; /* opened for the first token ids */
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    const size_t xl = strlen(FP4S_CAPTURE_IDS_SUFFIX);
    for (size_t i = 0; i < n && !rc; i++) {
        const fp4s_capture_entry *e = &v[i];
        size_t sl = strlen(e->side);
        if (strcmp(e->site, "logprobs") && sl > xl && strcmp(e->side + sl - xl, FP4S_CAPTURE_IDS_SUFFIX) == 0) {
            char base[sizeof e->side];
            memcpy(base, e->side, sl - xl);
            base[sl - xl] = '\0';
            const fp4s_capture_entry *a = e->step >= 0 ? find(v, n, e->step, e->site, base) : NULL;
            if (e->step < 0 || (strcmp(base, "trainer") && strcmp(base, "rollout")))
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: token ids belong to a trainer or rollout side only",
                                    file, e->path);
            else if (!a)
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: token ids without the rows of /steps/%" PRId64 "/%s/%s",
                                    file, e->path, e->step, e->site, base);
            else {
                if (f < 0) f = fp4s_h5_open_read(file, &rc);
                int64_t *ids = NULL;
                size_t ni = 0;
                if (f >= 0) rc = cap_read_ids_open(f, file, a, &ids, &ni);
                free(ids);
            }
            continue;
        }
        if (strcmp(e->site, "logprobs") == 0) {
            const fp4s_capture_entry *t = find(v, n, e->step, "logprobs", "trainer");
            if (!t || !find(v, n, e->step, "logprobs", "rollout") ||
                !find(v, n, e->step, "logprobs", "seq"))
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: /steps/%" PRId64 "/logprobs: trainer, "
                                    "rollout and seq are all required", file, e->step);
            else if (e->cols != t->cols || e->rows != 1)
                rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: length %zu differs from logprobs/trainer "
                                    "(%zu)", file, e->path, e->cols, t->cols);
            continue;
        }
        if (strchr(e->site, '/') || e->site[0] == '.' || !e->site[0])
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: malformed site name", file, e->path);
        else if (e->dtype != FP4S_DT_F32 && e->dtype != FP4S_DT_F16 && e->dtype != FP4S_DT_BF16 &&
                 e->dtype != FP4S_DT_F64)
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: activations and weights must be float32, "
                                "float16 or bfloat16, found %s", file, e->path,
                                fp4s_dtype_name(e->dtype));
        else if (strcmp(e->side, "trainer") == 0 || strcmp(e->side, "rollout") == 0) {
            const char *other = strcmp(e->side, "trainer") == 0 ? "rollout" : "trainer";
            const fp4s_capture_entry *o = find(v, n, e->step, e->site, other);
            if (o && (o->rows != e->rows || o->cols != e->cols))
                rc = pair_in(file, v, n, e->step, e->site, NULL, NULL);
            const fp4s_capture_entry *w = find(v, n, e->step, e->site, "weight");
            if (!w) w = find(v, n, FP4S_CAPTURE_CONST_STEP, e->site, "weight");
            if (!rc && w && w->cols != e->cols)
                rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s has K = %zu but the weight %s has K = %zu",
                                    file, e->path, e->cols, w->path, w->cols);
        }
    }
    if (f >= 0) H5Fclose(f);
    fp4s_h5_quiet_end(&q);
    free(v);
    return rc;
}
