/* The unit walker (fp4scope/units.h): a capture's selection becomes units
 * (step, site, rollout rows, trainer rows, weight) with the pairing and the
 * shape checks done once, for every site analysis and the report. */
#include <fp4scope/units.h>

#include <fp4scope/common.h>
#include <fp4scope/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fp4s_unit_select_defaults(fp4s_unit_select *s)
{
    memset(s, 0, sizeof *s);
    s->trainer = FP4S_UNIT_OPTIONAL;
    s->weight = FP4S_UNIT_OPTIONAL;
}

bool fp4s_unit_select_match(const fp4s_unit_select *s, const fp4s_capture_entry *e)
{
    if (!strcmp(e->site, "logprobs")) return false;
    if (s && s->sites && !fp4s_site_match(s->sites, e->site)) return false;
    if (!s || !s->steps) return true;
    for (size_t i = 0; i < s->nsteps; i++)
        if (s->steps[i] == e->step) return true;
    return false;
}

static char *dup_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *entry_spec(const char *file, const fp4s_capture_entry *e)
{
    size_t need = fp4s_capture_entry_spec(file, e, NULL, 0) + 1;
    char *b = malloc(need);
    if (b) fp4s_capture_entry_spec(file, e, b, need);
    return b;
}

static void unit_clear(fp4s_unit *u)
{
    free(u->site);
    free(u->x);
    free(u->xt);
    free(u->w);
    free(u->file);
    free(u->flips);
    memset(u, 0, sizeof *u);
}

/* Record a (step, site) left out: the detail of the last error. */
static int skip(fp4s_units *l, int64_t step, const char *site)
{
    fp4s_unit_skip *a = realloc(l->skipped, (l->nskipped + 1) * sizeof *a);
    if (!a) return fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
    l->skipped = a;
    a[l->nskipped].step = step;
    a[l->nskipped].site = dup_str(site);
    a[l->nskipped].why = dup_str(fp4s_last_error());
    if (!a[l->nskipped].site || !a[l->nskipped].why) {
        free(a[l->nskipped].site);
        free(a[l->nskipped].why);
        return fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
    }
    l->nskipped++;
    return 0;
}

/* Does the listing hold `side`_ids beside entry e? */
static bool listed_ids(const fp4s_capture_entry *v, size_t n, const fp4s_capture_entry *e)
{
    char want[32];
    snprintf(want, sizeof want, "%s%s", e->side, FP4S_CAPTURE_IDS_SUFFIX);
    for (size_t i = 0; i < n; i++)
        if (v[i].step == e->step && !strcmp(v[i].site, e->site) && !strcmp(v[i].side, want)) return true;
    return false;
}

/* The pairing of a unit's two sides (the listing's part): the shapes agree,
 * or both sides carry ids, which are read, checked and matched here: the
 * counts and the flipped tokens go into u. 0, or a code with the detail set. */
static int pair_listing(const char *file, const fp4s_capture_entry *v, size_t n, const fp4s_capture_entry *e,
                        const fp4s_capture_entry *tr, fp4s_unit *u)
{
    if (tr->cols != e->cols)
        return fp4s_error_set(FP4S_ESHAPE, "%s: /steps/%lld/%s: trainer is [%zu, %zu] but rollout is [%zu, %zu]: "
                              "both sides must have the same K", file, (long long)e->step, e->site, tr->rows,
                              tr->cols, e->rows, e->cols);
    bool ri = listed_ids(v, n, e), ti = listed_ids(v, n, tr);
    if (!ri || !ti) {
        if (tr->rows != e->rows)
            return fp4s_error_set(FP4S_ESHAPE, "%s: /steps/%lld/%s: trainer is [%zu, %zu] but rollout is [%zu, %zu]; "
                                  "both sides must hold the same tokens, or carry token ids on both sides "
                                  "(trainer_ids, rollout_ids) to be paired by id", file, (long long)e->step,
                                  e->site, tr->rows, tr->cols, e->rows, e->cols);
        u->mt = tr->rows;
        return 0;
    }
    int64_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = fp4s_capture_read_ids(file, e, &a, &na);
    if (!rc) rc = fp4s_capture_read_ids(file, tr, &b, &nb);
    fp4s_id_match m;
    memset(&m, 0, sizeof m);
    if (!rc) rc = fp4s_ids_match(a, na, b, nb, &m);
    if (!rc) {
        u->ids = true;
        u->mt = tr->rows;
        u->both = m.npairs;
        u->rollout_only = m.nonly_a;
        u->trainer_only = m.nonly_b;
        size_t nf = m.nonly_a + m.nonly_b;
        u->flips = malloc((nf ? nf : 1) * 2 * sizeof *u->flips);
        if (!u->flips) rc = fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
        for (size_t i = 0; !rc && i < m.nonly_a; i++) memcpy(&u->flips[2 * i], &a[2 * m.only_a[i]], 2 * sizeof *a);
        for (size_t i = 0; !rc && i < m.nonly_b; i++)
            memcpy(&u->flips[2 * (m.nonly_a + i)], &b[2 * m.only_b[i]], 2 * sizeof *b);
    }
    fp4s_id_match_free(&m);
    free(a);
    free(b);
    return rc;
}

/* Append u to *arr (taking its strings). */
static int push(fp4s_unit **arr, size_t *n, fp4s_unit *u)
{
    fp4s_unit *a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a) {
        unit_clear(u);
        return fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
    }
    a[(*n)++] = *u;
    *arr = a;
    return 0;
}

static int weight_k_check(const char *w, size_t n, size_t kw, const char *x, size_t k)
{
    if (kw == k) return 0;
    return fp4s_error_set(FP4S_ESHAPE, "shape mismatch: weight %s is [%zu, %zu], its K = %zu differs from the "
                          "activations' K = %zu (%s)", w, n, kw, kw, k, x);
}

int fp4s_units_add_capture(fp4s_units *l, const char *file, const fp4s_unit_select *s)
{
    fp4s_unit_select def;
    if (!s) {
        fp4s_unit_select_defaults(&def);
        s = &def;
    }
    fp4s_capture_entry *ents = NULL;
    size_t ne = 0;
    /* the raw listing: a (step, site) whose sides cannot be paired is this
     * loop's to judge, not the whole capture's */
    int rc = fp4s_capture_list_raw(file, &ents, &ne);
    if (rc) return rc;
    size_t input = l->inputs++;
    for (size_t i = 0; i < ne && !rc; i++) {
        const fp4s_capture_entry *e = &ents[i];
        if (strcmp(e->side, "rollout") || e->step < 0 || !fp4s_unit_select_match(s, e)) continue;
        l->selected++;
        /* its partners: the trainer side of the same (step, site), the
         * step's weight, else the step-independent one */
        const fp4s_capture_entry *tr = NULL, *wt = NULL, *wc = NULL;
        for (size_t j = 0; j < ne; j++) {
            const fp4s_capture_entry *f = &ents[j];
            if (strcmp(f->site, e->site)) continue;
            if (f->step == e->step && !strcmp(f->side, "trainer")) tr = f;
            if (f->step == e->step && !strcmp(f->side, "weight")) wt = f;
            if (f->step < 0 && !strcmp(f->side, "weight")) wc = f;
        }
        if (!wt) wt = wc;
        if (!tr && s->trainer == FP4S_UNIT_SKIP) {
            l->no_trainer++;
            continue;
        }
        if (!tr && s->trainer == FP4S_UNIT_REQUIRED) {
            rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: site %s step %lld has no trainer side (/steps/%lld/%s/trainer)",
                                file, e->site, (long long)e->step, (long long)e->step, e->site);
            break;
        }
        if (!wt && s->weight == FP4S_UNIT_SKIP) {
            l->no_weight++;
            continue;
        }
        if (!wt && s->weight == FP4S_UNIT_REQUIRED) {
            rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: site %s step %lld has no weight (neither /steps/%lld/%s/weight "
                                "nor /weights/%s)", file, e->site, (long long)e->step, (long long)e->step, e->site,
                                e->site);
            break;
        }
        fp4s_unit u = {.input = input, .step = e->step, .m = e->rows, .k = e->cols, .n = wt ? wt->rows : 0,
                       .mt = e->rows};
        if (tr && (rc = pair_listing(file, ents, ne, e, tr, &u))) {
            unit_clear(&u);
            if (rc == FP4S_ENOMEM || s->strict) break;
            if ((rc = skip(l, e->step, e->site))) break;
            continue;
        }
        u.site = dup_str(e->site);
        u.file = dup_str(file);
        u.x = entry_spec(file, e);
        u.xt = tr ? entry_spec(file, tr) : NULL;
        u.w = wt ? entry_spec(file, wt) : NULL;
        if (!u.site || !u.file || !u.x || (tr && !u.xt) || (wt && !u.w)) {
            unit_clear(&u);
            rc = fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
            break;
        }
        if (wt && (rc = weight_k_check(u.w, wt->rows, wt->cols, u.x, u.k))) {
            unit_clear(&u);
            break;
        }
        if (s->k_multiple && u.k % s->k_multiple) rc = push(&l->left, &l->nleft, &u);
        else rc = push(&l->u, &l->n, &u);
    }
    free(ents);
    return rc;
}

/* The shape of a source, its failure prefixed with `what`. */
static int shape_of(const char *spec, const char *what, size_t *rows, size_t *cols)
{
    fp4s_source *src = NULL;
    int rc = fp4s_source_open(spec, &src);
    if (rc) {
        fp4s_error_prefix("%s", what);
        return rc;
    }
    *rows = fp4s_source_rows(src);
    *cols = fp4s_source_cols(src);
    fp4s_source_close(&src);
    return 0;
}

int fp4s_units_add_tensors(fp4s_units *l, const char *x, const char *xt, const char *w)
{
    if (!x) return fp4s_error_set(FP4S_EINVAL, "units: no rollout activations");
    size_t m, k, mt = 0, kt = 0, n = 0, kw = 0;
    int rc = shape_of(x, "rollout activations", &m, &k);
    if (!rc && xt) rc = shape_of(xt, "trainer activations", &mt, &kt);
    if (!rc && w) rc = shape_of(w, "weight", &n, &kw);
    if (rc) return rc;
    size_t input = l->inputs++;
    if (xt && (mt != m || kt != k))
        return fp4s_error_set(FP4S_ESHAPE, "shape mismatch: trainer activations %s are [%zu, %zu], rollout "
                              "activations %s are [%zu, %zu]", xt, mt, kt, x, m, k);
    if (w && (rc = weight_k_check(w, n, kw, x, k))) return rc;
    l->selected++;
    fp4s_unit u = {.input = input, .step = -1, .m = m, .k = k, .n = w ? n : 0, .mt = xt ? m : 0};
    u.x = dup_str(x);
    u.xt = dup_str(xt);
    u.w = dup_str(w);
    if (!u.x || (xt && !u.xt) || (w && !u.w)) {
        unit_clear(&u);
        return fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
    }
    return push(&l->u, &l->n, &u);
}

void fp4s_units_free(fp4s_units *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) unit_clear(&l->u[i]);
    for (size_t i = 0; i < l->nleft; i++) unit_clear(&l->left[i]);
    for (size_t i = 0; i < l->nskipped; i++) {
        free(l->skipped[i].site);
        free(l->skipped[i].why);
    }
    free(l->skipped);
    free(l->u);
    free(l->left);
    memset(l, 0, sizeof *l);
}

/* One tensor of a unit, with the shape the list says it has. */
static int read_one(const char *spec, const char *what, size_t rows, size_t cols, float **out)
{
    size_t r, c;
    int rc = fp4s_source_read_all(spec, out, &r, &c);
    if (rc) {
        fp4s_error_prefix("%s", what);
        return rc;
    }
    if (r != rows || c != cols) {
        free(*out);
        *out = NULL;
        return fp4s_error_set(FP4S_ESHAPE, "%s: %s is [%zu, %zu], expected [%zu, %zu]", spec, what, r, c, rows,
                              cols);
    }
    return 0;
}

/* An entry of the unit's capture for reading its ids: the dataset path of a
 * spec "FILE:PATH" and the rows. */
static void entry_of(const fp4s_unit *u, const char *spec, const char *side, size_t rows, fp4s_capture_entry *e)
{
    memset(e, 0, sizeof *e);
    e->step = u->step;
    snprintf(e->site, sizeof e->site, "%s", u->site);
    snprintf(e->side, sizeof e->side, "%s", side);
    snprintf(e->path, sizeof e->path, "%s", spec + strlen(u->file) + 1);
    e->rows = rows;
}

/* Pair the trainer rows with the rollout rows: on return, row i < d->m of
 * d->xt is the trainer's activation of the token of row i of d->x. This is
 * the one place that decides it, for every analysis: without ids row i goes
 * with row i (the capture schema's rule without ids); with ids on both sides
 * the rows are matched by (sequence, position), the pairs first in the
 * rollout's row order, then the rows each side holds alone. */
static int pair_rows(const fp4s_unit *u, fp4s_unit_data *d)
{
    if (!u->ids) return 0;
    fp4s_capture_entry er, et;
    entry_of(u, u->x, "rollout", u->m, &er);
    entry_of(u, u->xt, "trainer", u->mt, &et);
    int64_t *a = NULL, *b = NULL;
    size_t na, nb;
    int rc = fp4s_capture_read_ids(u->file, &er, &a, &na);
    if (!rc) rc = fp4s_capture_read_ids(u->file, &et, &b, &nb);
    fp4s_id_match m;
    memset(&m, 0, sizeof m);
    if (!rc) rc = fp4s_ids_match(a, na, b, nb, &m);
    float *x = NULL, *xt = NULL;
    const size_t k = u->k, nr = m.npairs + m.nonly_a, nt = m.npairs + m.nonly_b;
    if (!rc) {
        x = malloc((nr ? nr : 1) * k * sizeof *x);
        xt = malloc((nt ? nt : 1) * k * sizeof *xt);
        d->ids = malloc((nr + m.nonly_b ? nr + m.nonly_b : 1) * 2 * sizeof *d->ids);
        if (!x || !xt || !d->ids) rc = fp4s_error_set(FP4S_ENOMEM, "units: out of memory");
    }
    if (!rc) {
        for (size_t i = 0; i < m.npairs; i++) {
            memcpy(x + i * k, d->x + m.a[i] * k, k * sizeof *x);
            memcpy(xt + i * k, d->xt + m.b[i] * k, k * sizeof *xt);
            memcpy(&d->ids[2 * i], &a[2 * m.a[i]], 2 * sizeof *a);
        }
        for (size_t i = 0; i < m.nonly_a; i++) {
            memcpy(x + (m.npairs + i) * k, d->x + m.only_a[i] * k, k * sizeof *x);
            memcpy(&d->ids[2 * (m.npairs + i)], &a[2 * m.only_a[i]], 2 * sizeof *a);
        }
        for (size_t i = 0; i < m.nonly_b; i++) {
            memcpy(xt + (m.npairs + i) * k, d->xt + m.only_b[i] * k, k * sizeof *xt);
            memcpy(&d->ids[2 * (nr + i)], &b[2 * m.only_b[i]], 2 * sizeof *b);
        }
        free(d->x);
        free(d->xt);
        d->x = x;
        d->xt = xt;
        d->m = m.npairs;
        d->rollout_only = m.nonly_a;
        d->trainer_only = m.nonly_b;
        x = xt = NULL;
    }
    free(x);
    free(xt);
    fp4s_id_match_free(&m);
    free(a);
    free(b);
    return rc;
}

int fp4s_unit_read(const fp4s_unit *u, fp4s_unit_data *d)
{
    memset(d, 0, sizeof *d);
    d->m = u->m;
    d->k = u->k;
    d->n = u->n;
    int rc = read_one(u->x, "rollout activations", u->m, u->k, &d->x);
    if (!rc && u->xt) rc = read_one(u->xt, "trainer activations", u->mt, u->k, &d->xt);
    if (!rc && u->w) rc = read_one(u->w, "weight", u->n, u->k, &d->w);
    if (!rc && d->xt) rc = pair_rows(u, d);
    if (rc) fp4s_unit_data_free(d);
    return rc;
}

void fp4s_unit_data_free(fp4s_unit_data *d)
{
    if (!d) return;
    free(d->x);
    free(d->xt);
    free(d->w);
    free(d->ids);
    memset(d, 0, sizeof *d);
}
