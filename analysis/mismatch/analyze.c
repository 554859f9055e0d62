/* Stream a trace, one step at a time per run, into per-step metrics. */
#include "mm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *mm_base_name(const char *p);

typedef struct run_state {
    fp4s_mm_run run;
    size_t cap;
    fp4s_mm_acc *acc, *first, *rest;
    int has_cur;
    int64_t cur;
    mm_i64map seen;          /* the steps finished so far */
    /* per-worker partials of the current step (parallel token pass), merged
     * into acc when the step ends */
    fp4s_mm_acc **scratch;   /* FP4S_MAX_THREADS slots, allocated on first use */
    int nscratch, scratch_used;
} run_state;

typedef struct driver {
    const fp4s_mm_opts *o;
    mm_reader *r;
    run_state *rs;
    size_t nrs, rs_cap;
    /* gather buffers for the by-position split */
    double *glt, *glr;
    int64_t *gseq;
    uint8_t *gmask, *first;
    size_t gcap;
} driver;

typedef struct par_ctx {
    run_state *s;
    const mm_batch *b;
    size_t i0;
    const uint8_t *mask;
} par_ctx;

static int par_add(void *arg, size_t begin, size_t end, int w)
{
    par_ctx *c = arg;
    const mm_batch *b = c->b;
    size_t o = c->i0 + begin;
    if (b->is_f32)
        return mm_acc_add_f32(c->s->scratch[w], end - begin, b->flt + o, b->flr + o, b->seq + o,
                              c->mask ? c->mask + begin : NULL, NULL);
    return fp4s_mm_acc_add(c->s->scratch[w], end - begin, b->lt + o, b->lr + o, b->seq + o,
                           c->mask ? c->mask + begin : NULL, NULL);
}

#define MM_PAR_GRAIN ((size_t)1 << 15)

/* Add tokens on several threads into the run's per-worker partials of the
 * step (merged in worker order when the step ends: deterministic for a given
 * thread count). Returns 1 when not used (one thread or a small segment). */
static int add_parallel(driver *d, run_state *s, const mm_batch *b, size_t i0, size_t n, const uint8_t *mask,
                        int *rc_out)
{
    if (n < 2 * MM_PAR_GRAIN) return 1; /* first: fp4s_get_threads may ask the system (a file read) */
    int nt = fp4s_get_threads();
    if (nt > FP4S_MAX_THREADS) nt = FP4S_MAX_THREADS;
    if (nt < 2) return 1;
    if (!s->scratch && !(s->scratch = calloc(FP4S_MAX_THREADS, sizeof *s->scratch))) {
        *rc_out = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", mm_reader_path(d->r));
        return 0;
    }
    while (s->nscratch < nt) {
        int rc = fp4s_mm_acc_open(d->o, &s->scratch[s->nscratch]);
        if (rc) {
            *rc_out = rc;
            return 0;
        }
        s->nscratch++;
    }
    par_ctx c = {s, b, i0, mask};
    int rc = fp4s_parallel_for(n, MM_PAR_GRAIN, par_add, &c);
    if (rc == FP4S_ENOMEM) fp4s_error_set(rc, "%s: out of memory", mm_reader_path(d->r));
    s->scratch_used = 1;
    *rc_out = rc;
    return 0;
}

/* Fold the step's partials into the run's accumulator. */
static int merge_scratch(run_state *s)
{
    if (!s->scratch_used) return 0;
    int rc = 0;
    for (int w = 0; w < s->nscratch && !rc; w++) rc = fp4s_mm_acc_merge(s->acc, s->scratch[w]);
    for (int w = 0; w < s->nscratch; w++) fp4s_mm_acc_reset(s->scratch[w]);
    s->scratch_used = 0;
    return rc;
}

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void fp4s_mm_run_free(fp4s_mm_run *r)
{
    free(r->name);
    free(r->source);
    free(r->steps);
    free(r->first);
    free(r->rest);
    for (size_t k = 0; k < r->nscalars; k++) free(r->scalar_names[k]);
    free(r->scalar_names);
    free(r->scalars);
    memset(r, 0, sizeof *r);
}

static void state_free(run_state *s)
{
    for (int w = 0; w < s->nscratch; w++) fp4s_mm_acc_close(&s->scratch[w]);
    free(s->scratch);
    fp4s_mm_acc_close(&s->acc);
    fp4s_mm_acc_close(&s->first);
    fp4s_mm_acc_close(&s->rest);
    mm_i64map_free(&s->seen);
}

static char *run_name(const char *path, const char *name, const char *col)
{
    char buf[1024];
    if (name && col) snprintf(buf, sizeof buf, "%s/%s", name, col);
    else if (name) snprintf(buf, sizeof buf, "%s", name);
    else if (col) snprintf(buf, sizeof buf, "%s", col);
    else {
        const char *b = strcmp(path, "-") == 0 ? "stdin" : mm_base_name(path);
        snprintf(buf, sizeof buf, "%s", b);
        char *dot = strrchr(buf, '.');
        if (dot && dot != buf) *dot = '\0';
    }
    return dupstr(buf);
}

static int get_state(driver *d, uint32_t idx, const char *path, const char *name, run_state **out)
{
    while (d->nrs <= idx) {
        if (d->nrs == d->rs_cap) {
            size_t nc = d->rs_cap ? 2 * d->rs_cap : 4;
            run_state *n = realloc(d->rs, nc * sizeof *n);
            if (!n) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
            d->rs = n;
            d->rs_cap = nc;
        }
        run_state *s = &d->rs[d->nrs];
        memset(s, 0, sizeof *s);
        d->nrs++;
        const char *col = mm_reader_run_name(d->r, d->nrs - 1);
        s->run.name = run_name(path, name, col);
        s->run.source = dupstr(path);
        if (!s->run.name || !s->run.source) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        int rc = fp4s_mm_acc_open(d->o, &s->acc);
        if (!rc && d->o->by_position) rc = fp4s_mm_acc_open(d->o, &s->first);
        if (!rc && d->o->by_position) rc = fp4s_mm_acc_open(d->o, &s->rest);
        if (rc) return rc;
    }
    *out = &d->rs[idx];
    return 0;
}

static int push_step(run_state *s, const fp4s_mm_metrics *m, const fp4s_mm_metrics *f, const fp4s_mm_metrics *r,
                     int bypos)
{
    if (s->run.nsteps == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        fp4s_mm_metrics *a = realloc(s->run.steps, nc * sizeof *a);
        if (!a) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
        s->run.steps = a;
        if (bypos) {
            a = realloc(s->run.first, nc * sizeof *a);
            if (!a) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
            s->run.first = a;
            a = realloc(s->run.rest, nc * sizeof *a);
            if (!a) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
            s->run.rest = a;
        }
        s->cap = nc;
    }
    if (mm_i64map_put(&s->seen, m->step, s->run.nsteps)) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    s->run.steps[s->run.nsteps] = *m;
    if (bypos) {
        s->run.first[s->run.nsteps] = *f;
        s->run.rest[s->run.nsteps] = *r;
    }
    s->run.nsteps++;
    return 0;
}

static int finish_step(driver *d, run_state *s)
{
    if (!s->has_cur) return 0;
    fp4s_mm_metrics m, f, r;
    memset(&m, 0, sizeof m);
    memset(&f, 0, sizeof f);
    memset(&r, 0, sizeof r);
    m.step = f.step = r.step = s->cur;
    int rc = merge_scratch(s);
    if (rc) return rc;
    rc = fp4s_mm_acc_finish(s->acc, &m);
    s->run.tokens += m.tokens;
    s->run.masked += m.masked;
    s->run.nonfinite += m.nonfinite;
    if (rc == FP4S_EEMPTY) {
        if (!d->o->skip_empty)
            return fp4s_error_set(FP4S_EEMPTY, "%s: run '%s': step %lld: no counted token (%llu masked, %llu with "
                                  "NaN/Inf log-probs; --skip-empty skips such steps)", s->run.source, s->run.name,
                                  (long long)s->cur, (unsigned long long)m.masked, (unsigned long long)m.nonfinite);
        s->run.skipped_steps++;
        s->has_cur = 0;
        fp4s_mm_acc_reset(s->acc);
        if (s->first) fp4s_mm_acc_reset(s->first);
        if (s->rest) fp4s_mm_acc_reset(s->rest);
        return 0;
    }
    if (rc) return rc;
    if (d->o->by_position) {
        rc = fp4s_mm_acc_finish(s->first, &f);
        if (rc && rc != FP4S_EEMPTY) return rc;
        rc = fp4s_mm_acc_finish(s->rest, &r);
        if (rc && rc != FP4S_EEMPTY) return rc;
        fp4s_mm_acc_reset(s->first);
        fp4s_mm_acc_reset(s->rest);
    }
    fp4s_mm_acc_reset(s->acc);
    s->has_cur = 0;
    return push_step(s, &m, &f, &r, d->o->by_position);
}

/* Is the step one of the run's finished steps? */
static int seen_step(const run_state *s, int64_t step) { return mm_i64map_get(&s->seen, step) >= 0; }

/* Tokens [i0, i1) of b belong to one run and one step. */
static int add_segment(driver *d, run_state *s, const mm_batch *b, size_t i0, size_t i1)
{
    size_t n = i1 - i0;
    const uint8_t *mask = b->no_mask ? NULL : b->mask + i0;
    int bypos = d->o->by_position;
    int rc;
    if (bypos || add_parallel(d, s, b, i0, n, mask, &rc)) {
        if (b->is_f32)
            rc = mm_acc_add_f32(s->acc, n, b->flt + i0, b->flr + i0, b->seq + i0, mask, bypos ? d->first : NULL);
        else
            rc = fp4s_mm_acc_add(s->acc, n, b->lt + i0, b->lr + i0, b->seq + i0, mask, bypos ? d->first : NULL);
    }
    if (rc == FP4S_EFORMAT && !d->o->allow_positive) {
        /* a positive log-prob: name the line or token */
        for (size_t i = i0; i < i1; i++) {
            if (mask && !b->mask[i]) continue;
            double lt = b->is_f32 ? b->flt[i] : b->lt[i], lr = b->is_f32 ? b->flr[i] : b->lr[i];
            int pt = lt > 0 && isfinite(lt), pr = lr > 0 && isfinite(lr);
            if (!pt && !pr) continue;
            char where[1200];
            mm_reader_where(d->r, b, i, where, sizeof where);
            return fp4s_error_set(FP4S_EFORMAT, "%s: %s log-prob %.9g is positive (log-probs are <= 0; "
                                  "--allow-positive accepts it)", where, pt ? "trainer" : "rollout", pt ? lt : lr);
        }
    }
    if (rc) return rc;
    if (!bypos) return 0;
    int has_pos = mm_reader_has_pos(d->r);
    for (int part = 0; part < 2; part++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            int is_first = has_pos ? b->pos[i0 + i] == 0 : d->first[i];
            if (is_first != (part == 0)) continue;
            d->glt[k] = b->is_f32 ? b->flt[i0 + i] : b->lt[i0 + i];
            d->glr[k] = b->is_f32 ? b->flr[i0 + i] : b->lr[i0 + i];
            d->gseq[k] = b->seq[i0 + i];
            d->gmask[k] = mask ? b->mask[i0 + i] : 1;
            k++;
        }
        rc = fp4s_mm_acc_add(part == 0 ? s->first : s->rest, k, d->glt, d->glr, d->gseq, d->gmask, NULL);
        if (rc) return rc;
    }
    return 0;
}

static int cmp_metrics_idx(const void *a, const void *b, void *ctx)
{
    const fp4s_mm_metrics *m = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (m[x].step > m[y].step) - (m[x].step < m[y].step);
}

static int sort_run(fp4s_mm_run *r)
{
    size_t n = r->nsteps;
    int sorted = 1;
    for (size_t i = 1; i < n; i++)
        if (r->steps[i].step < r->steps[i - 1].step) sorted = 0;
    if (sorted) return 0;
    size_t *idx = malloc(n * sizeof *idx);
    fp4s_mm_metrics *tmp = malloc(n * sizeof *tmp);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_metrics_idx, r->steps);
    fp4s_mm_metrics *arrs[3] = {r->steps, r->first, r->rest};
    for (int k = 0; k < 3; k++) {
        if (!arrs[k]) continue;
        for (size_t i = 0; i < n; i++) tmp[i] = arrs[k][idx[i]];
        memcpy(arrs[k], tmp, n * sizeof *tmp);
    }
    free(idx);
    free(tmp);
    return 0;
}

static int analyze_tokens(const char *path, const char *name, const fp4s_mm_opts *o, const fp4s_trace_opts *t,
                          size_t part, size_t nparts, fp4s_mm_result *res);

static int is_capture(const char *path, const fp4s_trace_opts *t)
{
    if (t && t->format == FP4S_TRACE_CAPTURE) return 1;
    if (t && t->format != FP4S_TRACE_AUTO) return 0;
    size_t n = strlen(path);
    return (n > 3 && strcmp(path + n - 3, ".h5") == 0) || (n > 5 && strcmp(path + n - 5, ".hdf5") == 0);
}

/* nparts 0: the whole trace; else only range `part` of a capture's steps
 * (a scalar log or a capture without log-probs: FP4S_ENOTSUP / FP4S_EEMPTY,
 * read whole by the caller). */
static int analyze(const char *path, const char *name, const fp4s_mm_opts *o, const fp4s_trace_opts *t,
                   size_t part, size_t nparts, fp4s_mm_result *res)
{
    if (!path || !res) return fp4s_error_set(FP4S_EINVAL, "mismatch: analyze: NULL argument");
    if (mm_scalar_log_sniff(path, t)) {
        if (nparts)
            return fp4s_error_set(FP4S_ENOTSUP, "%s: a per-step scalar log is read whole", path);
        return mm_scalar_log_read(path, name, t, res);
    }
    size_t before = res->nruns;
    int rc = analyze_tokens(path, name, o, t, part, nparts, res);
    if (!is_capture(path, t)) return rc;
    if (rc == FP4S_EEMPTY && res->nruns == before) {
        if (nparts) return rc; /* no token in this range: maybe none in the capture */
        /* a capture without log-probs: its per-step scalars alone */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", fp4s_last_error());
        int r2 = mm_capture_scalars(path, name, res, 0, 1);
        if (r2 == FP4S_EEMPTY) return fp4s_error_set(rc, "%s (and no per-step scalars)", msg);
        return r2;
    }
    if (rc || res->nruns != before + 1) return rc;
    rc = mm_capture_scalars(path, name, res, before, 0);
    if (rc) {
        fp4s_mm_run *r = &res->runs[--res->nruns];
        fp4s_mm_run_free(r);
    }
    return rc;
}

static int analyze_tokens(const char *path, const char *name, const fp4s_mm_opts *o, const fp4s_trace_opts *t,
                          size_t part, size_t nparts, fp4s_mm_result *res)
{
    if (!path || !res) return fp4s_error_set(FP4S_EINVAL, "mismatch: analyze: NULL argument");
    fp4s_mm_opts od;
    if (!o) {
        fp4s_mm_opts_defaults(&od);
        o = &od;
    }
    driver d;
    memset(&d, 0, sizeof d);
    d.o = o;
    mm_batch b;
    memset(&b, 0, sizeof b);
    int rc = mm_reader_open(path, t, o->skip_empty, &d.r);
    if (rc) return rc;
    if (nparts && (rc = mm_reader_step_range(d.r, part, nparts))) goto done;
    size_t cap = (size_t)1 << 18;
    rc = mm_batch_init(&b, cap);
    if (rc) goto done;
    if (o->by_position) {
        d.gcap = cap;
        d.glt = malloc(cap * sizeof *d.glt);
        d.glr = malloc(cap * sizeof *d.glr);
        d.gseq = malloc(cap * sizeof *d.gseq);
        d.gmask = malloc(cap);
        d.first = malloc(cap);
        if (!d.glt || !d.glr || !d.gseq || !d.gmask || !d.first) {
            rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
            goto done;
        }
    }
    for (;;) {
        rc = mm_reader_next(d.r, &b);
        if (rc || b.n == 0) break;
        uint64_t pdone, ptotal;
        mm_reader_progress(d.r, &pdone, &ptotal);
        if (ptotal) fp4s_progress_report(pdone, ptotal);
        size_t i0 = 0;
        while (i0 < b.n) {
            size_t i1 = i0 + 1;
            uint32_t run = b.uniform ? 0 : b.run[i0];
            int64_t step = b.uniform ? b.ustep : b.step[i0];
            if (b.uniform) i1 = b.n;
            else
                while (i1 < b.n && b.run[i1] == run && b.step[i1] == step) i1++;
            run_state *s = NULL;
            rc = get_state(&d, run, path, name, &s);
            if (rc) goto done;
            if (!s->has_cur || s->cur != step) {
                rc = finish_step(&d, s);
                if (rc) goto done;
                if (seen_step(s, step)) {
                    char where[1200];
                    mm_reader_where(d.r, &b, i0, where, sizeof where);
                    rc = fp4s_error_set(FP4S_EFORMAT, "%s: step %lld of run '%s' comes back after other steps: rows "
                                        "must be grouped by step (sort the trace by run, then step)", where,
                                        (long long)step, s->run.name);
                    goto done;
                }
                s->has_cur = 1;
                s->cur = step;
            }
            rc = add_segment(&d, s, &b, i0, i1);
            if (rc) goto done;
            i0 = i1;
        }
    }
    if (rc) goto done;
    for (size_t i = 0; i < d.nrs && !rc; i++) rc = finish_step(&d, &d.rs[i]);
    if (rc) goto done;
    if (d.nrs == 0 || (d.nrs == 1 && d.rs[0].run.nsteps == 0 && d.rs[0].run.skipped_steps == 0 &&
                       mm_reader_skipped(d.r) == 0)) {
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: no tokens in the trace", mm_reader_path(d.r));
        goto done;
    }
    if (d.nrs == 1) d.rs[0].run.skipped_steps += mm_reader_skipped(d.r);
    for (size_t i = 0; i < d.nrs && !rc; i++) rc = sort_run(&d.rs[i].run);
    if (rc) goto done;
    {
        fp4s_mm_run *nr = realloc(res->runs, (res->nruns + d.nrs) * sizeof *nr);
        if (!nr) {
            rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
            goto done;
        }
        res->runs = nr;
        for (size_t i = 0; i < d.nrs; i++) {
            res->runs[res->nruns++] = d.rs[i].run;
            memset(&d.rs[i].run, 0, sizeof d.rs[i].run);
        }
    }
done:
    for (size_t i = 0; i < d.nrs; i++) {
        state_free(&d.rs[i]);
        fp4s_mm_run_free(&d.rs[i].run);
    }
    free(d.rs);
    free(d.glt);
    free(d.glr);
    free(d.gseq);
    free(d.gmask);
    free(d.first);
    mm_batch_free(&b);
    mm_reader_close(&d.r);
    return rc;
}

int fp4s_mm_analyze(const char *path, const char *name, const fp4s_mm_opts *o, const fp4s_trace_opts *t,
                    fp4s_mm_result *res)
{
    return analyze(path, name, o, t, 0, 0, res);
}

int fp4s_mm_analyze_part(const char *path, const char *name, const fp4s_mm_opts *o, const fp4s_trace_opts *t,
                         size_t part, size_t nparts, fp4s_mm_result *res)
{
    if (nparts == 0 || part >= nparts)
        return fp4s_error_set(FP4S_EINVAL, "mismatch: analyze: part %zu of %zu", part, nparts);
    return analyze(path, name, o, t, part, nparts, res);
}

void fp4s_mm_result_free(fp4s_mm_result *res)
{
    if (!res) return;
    for (size_t i = 0; i < res->nruns; i++) fp4s_mm_run_free(&res->runs[i]);
    free(res->runs);
    res->runs = NULL;
    res->nruns = 0;
}
