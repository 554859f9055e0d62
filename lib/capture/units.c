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
    memset(u, 0, sizeof *u);
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
    int rc = fp4s_capture_list(file, &ents, &ne);
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
        fp4s_unit u = {.input = input, .step = e->step, .m = e->rows, .k = e->cols, .n = wt ? wt->rows : 0};
        u.site = dup_str(e->site);
        u.x = entry_spec(file, e);
        u.xt = tr ? entry_spec(file, tr) : NULL;
        u.w = wt ? entry_spec(file, wt) : NULL;
        if (!u.site || !u.x || (tr && !u.xt) || (wt && !u.w)) {
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
    fp4s_unit u = {.input = input, .step = -1, .m = m, .k = k, .n = w ? n : 0};
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

/* Pair the trainer rows with the rollout rows: on return, row i of d->xt is
 * the trainer's activation of the token of row i of d->x. This is the one
 * place that decides it, for every analysis: the capture schema stores the
 * same tokens in the same order on both sides (fp4scope-capture(5)), so row
 * i goes with row i. Alignment by token ids (sequence, position), where a
 * capture records them, belongs here too. */
static int pair_rows(const fp4s_unit *u, fp4s_unit_data *d)
{
    (void)u;
    (void)d;
    return 0;
}

int fp4s_unit_read(const fp4s_unit *u, fp4s_unit_data *d)
{
    memset(d, 0, sizeof *d);
    d->m = u->m;
    d->k = u->k;
    d->n = u->n;
    int rc = read_one(u->x, "rollout activations", u->m, u->k, &d->x);
    if (!rc && u->xt) rc = read_one(u->xt, "trainer activations", u->m, u->k, &d->xt);
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
    memset(d, 0, sizeof *d);
}
