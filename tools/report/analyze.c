/* fp4-report: the analyses, all through libfp4scope: the decomposition of
 * every (step, site), the trainer/rollout comparison and the remedies on
 * every site that has what they need, the channels of each site, the
 * profiles' disagreement and the log-prob mismatch over steps. */
#include "report.h"
#include "../suggest.h"

#include "../par.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rep_quiet;

void rep_step(const report *r, const char *fmt, ...)
{
    if (rep_quiet) return;
    cli_progress_end();
    va_list ap;
    fprintf(stderr, "%s: [%d/%d] ", cli_prog(), r->stage, r->nstages);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void rep_progress(const char *fmt, ...)
{
    if (rep_quiet) return;
    cli_progress_end();
    va_list ap;
    fprintf(stderr, "%s: ", cli_prog());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void read_all(const char *spec, const char *what, float **x, size_t rows, size_t cols)
{
    size_t m, k;
    int rc = fp4s_source_read_all(spec, x, &m, &k);
    if (rc) cli_failf(rc, "%s", what);
    if (m != rows || k != cols)
        cli_die(FP4S_EXIT_INPUT, "%s: %s is [%zu, %zu], expected [%zu, %zu]", spec, what, m, k, rows, cols);
}

/* One unit: the decomposition of its rollout activations, and with a weight
 * the comparison (with a trainer side) and the remedies, unless this build
 * cannot run them (r->rem_unavailable, from the first unit that found out;
 * u->unavail then holds why). */
static void unit_compute(report *r, unit *u, const fp4s_decomp_opts *dop, const fp4s_compare_opts *cop,
                         const fp4s_remedy_eval_opts *eo)
{
    const report_opts *o = r->o;
    fp4s_decomp *d = NULL;
    int rc = fp4s_decomp_source(&o->spec, dop, u->xr, &d);
    if (rc) cli_failf(rc, "%s", u->xr);
    rc = fp4s_decomp_summary(d, &u->dec);
    fp4s_decomp_close(&d);
    if (rc) cli_failf(rc, "%s", u->xr);
    u->have_decomp = true;
    if (!u->w || r->rem_unavailable) return;
    /* held in a file-scope struct: an error exit (a malformed trainer side) leaks nothing */
    static fp4s_unit_data ud;
    if ((rc = fp4s_unit_read(u->wu, &ud))) cli_fail(rc);
    float *X = ud.x, *Xt = ud.xt, *W = ud.w;
    if (Xt) {
        rc = fp4s_compare_eval_routed(&o->spec, &o->wspec, X, ud.rollout_only, Xt, ud.trainer_only, ud.m, W, u->n,
                                      u->k, cop, &u->cmp);
        if (rc == FP4S_ENOTSUP) {
            r->rem_unavailable = u->unavail = xstrdup(fp4s_last_error()); /* an alias until the gather */
        } else if (rc) {
            cli_failf(rc, "%s", u->xr);
        } else {
            u->have_cmp = true;
        }
    }
    if (!r->rem_unavailable && r->nrem) {
        u->rres = xcalloc(r->nrem, sizeof *u->rres);
        rc = fp4s_remedy_eval(r->rem, r->nrem, &o->spec, &o->wspec, X, Xt, Xt ? ud.m : u->m, W, u->n, u->k, eo,
                              &u->rsite, u->rres);
        if (rc == FP4S_ENOTSUP) {
            r->rem_unavailable = u->unavail = xstrdup(fp4s_last_error()); /* an alias until the gather */
            free(u->rres);
            u->rres = NULL;
        } else if (rc) {
            cli_failf(rc, "%s", u->xr);
        } else {
            u->have_rem = true;
        }
    }
    if (u->have_rem) { /* the same site in FP8 (W8A8): what "run this layer in FP8" gives */
        fp4s_remedy none;
        fp4s_remedy_defaults(&none);
        fp4s_remedy_eval_opts e8 = *eo;
        e8.decompose = false;
        fp4s_remedy_site s8;
        rc = fp4s_remedy_eval(&none, 1, &o->fp8spec, &o->fp8spec, X, Xt, u->m, W, u->n, u->k, &e8, &s8, &u->fp8);
        if (rc == 0) u->have_fp8 = true;
        else if (rc == FP4S_ENOTSUP || rc == FP4S_ERANGE || rc == FP4S_ESHAPE) fp4s_error_clear();
        else cli_failf(rc, "%s (in FP8)", u->xr);
    }
    fp4s_unit_data_free(&ud);
}

/* Over MPI ranks: a unit's results as records (par_gather_units). */
static void put_unit(void *ctx, size_t i, fp4s_buf *b)
{
    const report *r = ctx;
    const unit *u = &r->units[i];
    uint8_t flags = (uint8_t)(u->have_decomp | u->have_cmp << 1 | u->have_rem << 2 | (u->unavail != NULL) << 3 |
                              u->have_fp8 << 4);
    int rc = fp4s_buf_put(b, &flags, 1);
    if (!rc && u->have_decomp) rc = fp4s_record_put(b, fp4s_rtype_decomp_result(), &u->dec);
    if (!rc && u->have_cmp) rc = fp4s_record_put(b, fp4s_rtype_compare_site(), &u->cmp);
    if (!rc && u->have_rem) rc = fp4s_record_put(b, fp4s_rtype_remedy_site(), &u->rsite);
    for (size_t q = 0; !rc && u->have_rem && q < r->nrem; q++)
        rc = fp4s_record_put(b, fp4s_rtype_remedy_result(), &u->rres[q]);
    if (!rc && u->have_fp8) rc = fp4s_record_put(b, fp4s_rtype_remedy_result(), &u->fp8);
    if (!rc && u->unavail) {
        uint64_t n = strlen(u->unavail);
        rc = fp4s_buf_put(b, &n, sizeof n);
        if (!rc) rc = fp4s_buf_put(b, u->unavail, n);
    }
    if (rc) cli_fail(rc);
}

static void get_unit(void *ctx, size_t i, const unsigned char **p, const unsigned char *end)
{
    report *r = ctx;
    unit *u = &r->units[i];
    uint8_t flags = 0;
    int rc = *p < end ? 0 : fp4s_error_set(FP4S_EFORMAT, "record: truncated");
    if (!rc) flags = *(*p)++;
    u->have_decomp = flags & 1;
    if (!rc && u->have_decomp) rc = fp4s_record_get(p, end, fp4s_rtype_decomp_result(), &u->dec);
    if (!rc && (flags & 2)) rc = fp4s_record_get(p, end, fp4s_rtype_compare_site(), &u->cmp);
    u->have_cmp = !rc && (flags & 2);
    if (!rc && (flags & 4)) {
        rc = fp4s_record_get(p, end, fp4s_rtype_remedy_site(), &u->rsite);
        u->rres = xcalloc(r->nrem, sizeof *u->rres);
        for (size_t q = 0; !rc && q < r->nrem; q++) rc = fp4s_record_get(p, end, fp4s_rtype_remedy_result(), &u->rres[q]);
        u->have_rem = !rc;
    }
    if (!rc && (flags & 16)) {
        rc = fp4s_record_get(p, end, fp4s_rtype_remedy_result(), &u->fp8);
        u->have_fp8 = !rc;
    }
    if (!rc && (flags & 8)) {
        uint64_t n = 0;
        if ((size_t)(end - *p) < sizeof n) rc = fp4s_error_set(FP4S_EFORMAT, "record: truncated");
        else {
            memcpy(&n, *p, sizeof n);
            *p += sizeof n;
            if ((uint64_t)(end - *p) < n) rc = fp4s_error_set(FP4S_EFORMAT, "record: truncated");
            else {
                u->unavail = xmalloc((size_t)n + 1);
                memcpy(u->unavail, *p, (size_t)n);
                u->unavail[n] = '\0';
                *p += n;
            }
        }
    }
    if (rc) cli_failf(rc, "MPI: a rank's results");
}

void analyze_units(report *r)
{
    const report_opts *o = r->o;
    /* the units of every capture: a site whose K is not a multiple of the
     * block size cannot be quantized, so it is left out, and said */
    fp4s_unit_select sel;
    fp4s_unit_select_defaults(&sel);
    sel.sites = o->sites;
    sel.steps = o->steps;
    sel.nsteps = o->nsteps;
    sel.k_multiple = o->spec.block;
    sel.strict = o->strict;
    for (size_t c = 0; c < o->ncaptures; c++) {
        int rc = fp4s_units_add_capture(&r->ul, o->captures[c], &sel);
        if (rc) cli_fail(rc);
    }
    cli_units_skipped(&r->ul);
    r->nskipped = r->ul.nskipped;
    if (r->ul.n + r->ul.nleft == 0) {
        char hint[4096];
        cli_sites_hint(o->captures[0], o->sites, hint, sizeof hint);
        cli_die(FP4S_EXIT_INPUT, "%s: no rollout activations%s%s%s%s (a capture holds "
                "/steps/<step>/<site>/rollout; fp4-capture ls lists it)%s", o->captures[0],
                o->sites ? " match --sites " : "", o->sites ? o->sites : "", o->steps_s ? " --steps " : "",
                o->steps_s ? o->steps_s : "", hint);
    }
    size_t bs = o->spec.block;
    for (size_t i = 0; i < r->ul.nleft; i++) {
        const fp4s_unit *u = &r->ul.left[i];
        bool seen = false;
        for (size_t j = 0; j < r->nleft && !seen; j++) seen = !strcmp(r->left[j], u->site);
        if (!seen) {
            char b[700];
            snprintf(b, sizeof b, "%s (K = %zu)", u->site, u->k);
            r->left = xrealloc(r->left, (r->nleft + 1) * sizeof *r->left);
            r->left[r->nleft++] = xstrdup(b);
            rep_progress("note: %s: site %s left out: K = %zu is not a multiple of the %s block size %zu",
                         o->names[u->input], u->site, u->k, fp4s_format_name(o->spec.format), bs);
        }
    }
    if (r->ul.n == 0)
        cli_die(FP4S_EXIT_INPUT, "%s: no site whose K is a multiple of the %s block size %zu (%s)", o->captures[0],
                fp4s_format_name(o->spec.format), bs, r->left[0]);
    r->nunits = r->ul.n;
    r->units = xcalloc(r->nunits, sizeof *r->units);
    for (size_t i = 0; i < r->nunits; i++) {
        const fp4s_unit *wu = &r->ul.u[i];
        r->units[i] = (unit){.wu = wu, .cap = wu->input, .step = wu->step, .site = wu->site, .xr = wu->x,
                             .xt = wu->xt, .w = wu->w, .m = wu->m, .k = wu->k, .n = wu->n};
    }
    r->ncmp = FP4S_CMP_ROUTING;
    for (size_t i = 0; i < r->nunits; i++)
        if (r->ul.u[i].ids) r->ncmp = FP4S_CMP_COUNT;
    /* the remedies are checked against the quantizers and K before any work */
    for (size_t q = 0; q < r->nrem; q++) {
        int rc = fp4s_remedy_check(&r->rem[q], &o->spec, &o->wspec, r->units[0].k);
        if (rc) cli_usage("--remedy: %s", fp4s_last_error());
    }
    fp4s_decomp_opts dop;
    fp4s_decomp_opts_defaults(&dop);
    fp4s_compare_opts cop;
    fp4s_compare_opts_defaults(&cop);
    fp4s_remedy_eval_opts eo;
    fp4s_remedy_eval_opts_defaults(&eo);
    eo.accel = r->acc;
    size_t nw = 0, nt = 0;
    for (size_t i = 0; i < r->nunits; i++) {
        nw += r->units[i].w != NULL;
        nt += r->units[i].w && r->units[i].xt;
    }
    rep_step(r, "decomposing %zu (step, site) pairs; comparison on %zu, remedies (%zu) on %zu", r->nunits, nt,
                 r->nrem, nw);
    cli_progress_begin("decomposition, comparison and remedies");
    for (size_t i = 0; i < r->nunits; i++) {
        cli_progress(i, r->nunits);
        if (par_mine(i)) unit_compute(r, &r->units[i], &dop, &cop, &eo); /* over MPI ranks: this rank's units */
    }
    cli_progress_end();
    if (!par_gather_units(r->nunits, put_unit, get_unit, r)) exit(0); /* rank 0 goes on with every unit */
    /* why the comparison and remedies are missing: what the first unit to need them was told
     * (r->rem_unavailable pointed at this rank's first such unit's) */
    r->rem_unavailable = NULL;
    for (size_t i = 0; i < r->nunits && !r->rem_unavailable; i++)
        if (r->units[i].unavail) r->rem_unavailable = xstrdup(r->units[i].unavail);
    if (r->rem_unavailable) rep_progress("note: comparison and remedies left out: %s", r->rem_unavailable);
}

/* ---- per site ------------------------------------------------------------------------------ */
static double rel_err(const site_sum *s) { return s->x2 > 0 ? sqrt(s->err2 / s->x2) : NAN; }

static const report *g_sort;
static int cmp_site(const void *a, const void *b)
{
    const site_sum *x = &g_sort->sites[*(const size_t *)a], *y = &g_sort->sites[*(const size_t *)b];
    double ex = rel_err(x), ey = rel_err(y);
    if (isnan(ex) != isnan(ey)) return isnan(ex) ? 1 : -1;
    if (ex != ey) return ex > ey ? -1 : 1;
    if (x->cap != y->cap) return x->cap < y->cap ? -1 : 1;
    return strcmp(x->site, y->site);
}

void analyze_sites(report *r)
{
    const report_opts *o = r->o;
    for (size_t i = 0; i < r->nunits; i++) {
        unit *u = &r->units[i];
        size_t s;
        for (s = 0; s < r->nsites; s++)
            if (r->sites[s].cap == u->cap && !strcmp(r->sites[s].site, u->site)) break;
        if (s == r->nsites) {
            r->sites = xrealloc(r->sites, (r->nsites + 1) * sizeof *r->sites);
            memset(&r->sites[s], 0, sizeof r->sites[s]);
            r->sites[s].site = xstrdup(u->site);
            r->sites[s].cap = u->cap;
            r->sites[s].first_unit = i;
            r->sites[s].ch_unit = (size_t)-1;
            r->nsites++;
        }
        site_sum *ss = &r->sites[s];
        ss->nunits++;
        if (u->step < r->units[ss->first_unit].step) ss->first_unit = i;
        const fp4s_decomp_result *d = &u->dec;
        ss->err2 += d->energy_total;
        ss->x2 += d->energy_x;
        ss->e_scale += d->energy_scale;
        ss->e_dz += d->energy_deadzone;
        ss->e_grid += d->energy_grid;
        ss->e_cross += d->cross_scale_grid + d->cross_scale_deadzone + d->cross_deadzone_grid;
        if (u->have_cmp) {
            ss->mismatch2 += u->cmp.mismatch2;
            ss->cmp_ref2 += u->cmp.ref2;
            for (int c = 0; c < FP4S_CMP_COUNT; c++) ss->cmp_contrib[c] += u->cmp.contrib[c];
        }
    }
    /* the channels of each site at its first step (with the weight there, for the HCP score) */
    rep_step(r, "ranking the channels of %zu sites", r->nsites);
    fp4s_channels_opts cho;
    fp4s_channels_opts_defaults(&cho);
    for (size_t s = 0; s < r->nsites; s++) {
        site_sum *ss = &r->sites[s];
        const unit *u = &r->units[ss->first_unit];
        int rc = fp4s_channels_run(&o->spec, &cho, u->xr, u->w, &ss->ch);
        if (rc) cli_failf(rc, "channels of %s", u->xr);
        ss->ch_unit = ss->first_unit;
    }
    r->order = xmalloc(r->nsites * sizeof *r->order);
    for (size_t s = 0; s < r->nsites; s++) r->order[s] = s;
    g_sort = r;
    qsort(r->order, r->nsites, sizeof *r->order, cmp_site);
    g_sort = NULL;
}

/* ---- profiles ------------------------------------------------------------------------------- */
static float *quantize(const fp4s_spec *s, const float *x, size_t m, size_t k)
{
    fp4s_tscale ts;
    float amax = fp4s_spec_amax(s, x, m, k, k, NULL);
    int rc = fp4s_tscale_init(s, amax, &ts);
    if (rc) cli_fail(rc);
    float *q = xmalloc(m * k * sizeof *q);
    fp4s_qout out;
    memset(&out, 0, sizeof out);
    out.dequant = q;
    out.ld_dequant = k;
    rc = fp4s_quantize(s, &ts, x, m, k, k, 0, &out, NULL);
    if (rc) cli_fail(rc);
    return q;
}

static void compare_q(const float *a, const float *b, size_t m, size_t k, size_t bs, disagree *d)
{
    double num = 0, den = 0;
    d->n = (uint64_t)m * k;
    d->blocks = (uint64_t)m * (k / bs);
    for (size_t i = 0; i < m; i++)
        for (size_t b0 = 0; b0 < k; b0 += bs) {
            bool any = false;
            for (size_t j = b0; j < b0 + bs; j++) {
                double x = a[i * k + j], y = b[i * k + j];
                bool same = x == y || (isnan(x) && isnan(y));
                if (!same) {
                    d->differ++;
                    any = true;
                }
                if (isfinite(x) && isfinite(y)) {
                    num += (y - x) * (y - x);
                    den += x * x;
                }
            }
            d->blocks_differ += any;
        }
    d->rel_diff = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

void analyze_disagreement(report *r)
{
    const report_opts *o = r->o;
    const fp4s_spec *ref = &o->spec;
    /* the profiles: the ones given, else every profile of the format but the reference (aliases once) */
    if (o->profiles) {
        char *dup = xstrdup(o->profiles), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            fp4s_spec sp;
            if (fp4s_spec_profile(&sp, ref->format, t))
                cli_usage("--profiles: %s", fp4s_last_error());
            r->profiles = xrealloc(r->profiles, (r->nprofiles + 1) * sizeof *r->profiles);
            r->profiles[r->nprofiles++] = xstrdup(t);
        }
        free(dup);
    } else {
        for (size_t i = 0; i < fp4s_profile_count(); i++) {
            const fp4s_profile_info *p = fp4s_profile_at(i);
            if (p->alias_of || !(p->formats & (1u << ref->format)) || !strcmp(p->name, ref->profile)) continue;
            r->profiles = xrealloc(r->profiles, (r->nprofiles + 1) * sizeof *r->profiles);
            r->profiles[r->nprofiles++] = xstrdup(p->name);
        }
    }
    /* the trainer's quantizer is compared with the rollout's even when --profiles leaves it out */
    if (o->trainer_profile && strcmp(o->trainer_profile, ref->profile)) {
        bool have = false;
        for (size_t p = 0; p < r->nprofiles && !have; p++) have = !strcmp(r->profiles[p], o->trainer_profile);
        if (!have) {
            r->profiles = xrealloc(r->profiles, (r->nprofiles + 1) * sizeof *r->profiles);
            r->profiles[r->nprofiles++] = xstrdup(o->trainer_profile);
        }
    }
    rep_step(r, "%zu profiles against %s on the first step of each site", r->nprofiles, ref->profile);
    size_t bs = ref->block;
    for (size_t s = 0; s < r->nsites; s++) {
        const unit *u = &r->units[r->sites[s].first_unit];
        for (int t = 0; t < 2; t++) {
            const char *spec = t == 0 ? u->xr : u->w;
            if (!spec) continue;
            size_t m = t == 0 ? u->m : u->n;
            float *x = NULL;
            read_all(spec, t == 0 ? "rollout activations" : "weight", &x, m, u->k);
            const fp4s_spec *rs = t == 0 ? ref : &o->wspec;
            float *q0 = quantize(rs, x, m, u->k);
            for (size_t p = 0; p < r->nprofiles; p++) {
                fp4s_spec ps, pw;
                if (fp4s_spec_profile(&ps, ref->format, r->profiles[p])) cli_fail(FP4S_EINVAL);
                fp4s_remedy_weight_spec(&ps, -1, &pw);
                float *q1 = quantize(t == 0 ? &ps : &pw, x, m, u->k);
                r->dis = xrealloc(r->dis, (r->ndis + 1) * sizeof *r->dis);
                disagree *d = &r->dis[r->ndis++];
                memset(d, 0, sizeof *d);
                d->site = s;
                d->tensor = t == 0 ? "rollout" : "weight";
                d->profile = r->profiles[p];
                compare_q(q0, q1, m, u->k, bs, d);
                free(q1);
            }
            free(q0);
            free(x);
        }
    }
}

/* ---- mismatch ------------------------------------------------------------------------------- */
static bool capture_has_mismatch(const char *file)
{
    fp4s_capture_entry *e = NULL;
    size_t n = 0;
    bool lp = false;
    if (fp4s_capture_list_raw(file, &e, &n) == 0)
        for (size_t i = 0; i < n && !lp; i++) lp = !strcmp(e[i].site, "logprobs");
    free(e);
    fp4s_capture_scalar *sc = NULL;
    size_t ns = 0;
    if (!lp && fp4s_capture_scalars(file, &sc, &ns) == 0 && ns > 0) lp = true;
    free(sc);
    return lp;
}

void analyze_mismatch(report *r)
{
    const report_opts *o = r->o;
    size_t nin = 0;
    for (size_t c = 0; c < o->ncaptures; c++) {
        if (!capture_has_mismatch(o->captures[c])) continue;
        fp4s_trace_opts to = o->to;
        to.format = FP4S_TRACE_CAPTURE;
        int rc = fp4s_mm_analyze(o->captures[c], o->names[c], &o->mo, &to, &r->mm);
        if (rc) cli_fail(rc);
        nin++;
    }
    for (size_t t = 0; t < o->ntraces; t++) {
        int rc = fp4s_mm_analyze(o->traces[t], NULL, &o->mo, &o->to, &r->mm);
        if (rc) cli_fail(rc);
        nin++;
    }
    rep_step(r, "log-prob mismatch: %zu run%s from %zu input%s", r->mm.nruns, r->mm.nruns == 1 ? "" : "s", nin,
                 nin == 1 ? "" : "s");
    r->nmm = r->mm.nruns;
    r->mmr = xcalloc(r->nmm ? r->nmm : 1, sizeof *r->mmr);
    for (size_t i = 0; i < r->nmm; i++) {
        mm_row *m = &r->mmr[i];
        m->run = &r->mm.runs[i];
        size_t n = m->run->nsteps;
        m->v = xmalloc((n ? n : 1) * sizeof *m->v);
        int64_t *st = m->st = xmalloc((n ? n : 1) * sizeof *st); /* reachable from r on an error exit */
        for (size_t j = 0; j < n; j++) st[j] = m->run->steps[j].step;
        if (fp4s_mm_run_series(m->run, o->metric, m->v))
            cli_usage("--metric: run '%s' of %s has no metric or per-step scalar '%s' (see fp4-mismatch(1))",
                      m->run->name, m->run->source, o->metric);
        for (size_t j = 0; j < n; j++) m->nvalid += isfinite(m->v[j]) != 0;
        m->other = -1;
        for (size_t id = 0; m->nvalid == 0 && m->other < 0 && id < fp4s_mm_metric_count(); id++)
            for (size_t j = 0; j < n && m->other < 0; j++)
                if (isfinite(fp4s_mm_metric_value(&m->run->steps[j], id))) m->other = (int)id;
        int rc = fp4s_mm_onset_find(st, m->v, n, &o->oo, &m->onset);
        if (rc && rc != FP4S_EEMPTY) cli_fail(rc);
        m->have_onset = rc == 0;
        fp4s_mm_changepoint_opts co;
        fp4s_mm_changepoint_opts_defaults(&co);
        rc = fp4s_mm_changepoint_find(st, m->v, n, &co, &m->cp);
        if (rc && rc != FP4S_EEMPTY) cli_fail(rc);
        m->have_cp = rc == 0;
        rc = fp4s_mm_trend_fit(st, m->v, n, 0.95, &m->trend);
        if (rc && rc != FP4S_EEMPTY && rc != FP4S_ENOTSUP) cli_fail(rc);
        m->have_trend = rc == 0 && m->trend.valid;
    }
}

void report_free(report *r)
{
    for (size_t i = 0; i < r->nunits; i++) {
        unit *u = &r->units[i];
        if (u->have_cmp) fp4s_compare_site_free(&u->cmp);
        if (u->rres) fp4s_remedy_results_free(u->rres, r->nrem);
        if (u->have_fp8) fp4s_remedy_results_free(&u->fp8, 1);
        free(u->rres);
        free(u->unavail);
    }
    free(r->units);
    fp4s_units_free(&r->ul);
    for (size_t s = 0; s < r->nsites; s++) {
        free(r->sites[s].site);
        fp4s_channels_free(&r->sites[s].ch);
    }
    free(r->sites);
    free(r->dis);
    for (size_t p = 0; p < r->nprofiles; p++) free(r->profiles[p]);
    free(r->profiles);
    free(r->rem);
    for (size_t i = 0; i < r->nmm; i++) {
        free(r->mmr[i].v);
        free(r->mmr[i].st);
    }
    free(r->mmr);
    fp4s_mm_result_free(&r->mm);
    free(r->order);
    advice_free(r);
    free((char *)r->rem_unavailable);
    for (size_t i = 0; i < r->nleft; i++) free(r->left[i]);
    free(r->left);
}
