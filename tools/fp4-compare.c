/* fp4-compare: why the rollout and the trainer disagree. Per site, step and
 * channel: how far the two sides' activations are apart, how many E2M1 codes
 * and block scales that flips, how much the quantizer amplifies it, and a
 * ranking of sites x channels x error component by their share of the output
 * mismatch against the asymmetric-QAT trainer (man/fp4-compare.1). */
#include "cli.h"
#include "suggest.h"
#include "par.h"
#include "out/out.h"

#include <fp4scope/capture.h>
#include <fp4scope/remedy.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>
#include <fp4scope/units.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-compare [OPTION]... CAPTURE.h5 [--sites GLOB] [--steps LIST]\n"
        "       fp4-compare [OPTION]... --act XR --trainer-act XT --weight W\n"
        "Why the rollout and the trainer disagree: per site, step and channel the\n"
        "relative difference of the two sides' activations, the fraction of E2M1 codes\n"
        "and block scales it flips, the amplification ||Qa(X_r) - Qa(X_t)|| / ||X_r - X_t||,\n"
        "and a ranking of sites x channels x error component (input, scale, deadzone,\n"
        "grid) by their share of the output mismatch ||Qa(X_r) Qw(W)^T - X_t Qw(W)^T||.\n"
        "Where both sides carry token ids, rows are paired by token, the tokens one side\n"
        "routed to a site alone are routing flips (component routing), and a table per\n"
        "expert and the log-prob mismatch carried by flipped tokens follow.\n"
        "\n"
        "Quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        CLI_HELP_WEIGHT_2D
        CLI_HELP_SELECT
        "      --act XR, --trainer-act XT, --weight W   one site given as tensors\n"
        CLI_HELP_DZ_TIE
        "      --top N           ranking rows shown (default 20; 0 = all)\n"
        CLI_HELP_STRICT
        "      --json            JSON on stdout\n"
        "      --csv             CSV on stdout: one line per site, step and channel\n"
        "  -o, --output FILE     also write the --json document to FILE\n"
        "      --force           replace an existing HDF5 output (the man page, FILES)\n"
        "      --quiet           no progress line on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        CLI_HELP_GEMM
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 2 usage, 3 input missing, unreadable or malformed (shape\n"
        "mismatch, no site with both sides and a weight), 4 output not written,\n"
        "5 internal error.\n");
}

enum {
    OPT_FIRST_ = 256, OPT_TOP
};

typedef struct run {
    char *label, *site;
    int64_t step;
    bool synthetic;
    bool ids;              /* rows paired by token id */
    int64_t layer, expert; /* from the site's name ("layers.<n>", "experts.<e>"; -1: none) */
    fp4s_compare_site r;
} run;

typedef struct rank_row {
    const char *site;
    size_t channel;
    int comp;
    double contrib;
} rank_row;

/* The components shown: routing only where some site is paired by token id
 * (elsewhere it is 0, and the outputs stay as they were). */
static int ncomp = FP4S_CMP_ROUTING;


static int cmp_rank(const void *a, const void *b)
{
    const rank_row *x = a, *y = b;
    if (x->contrib != y->contrib) return x->contrib > y->contrib ? -1 : 1;
    int c = strcmp(x->site, y->site);
    if (c) return c;
    if (x->channel != y->channel) return x->channel < y->channel ? -1 : 1;
    return x->comp - y->comp;
}

static void fmtv(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v)) snprintf(b, n, f, v);
    else snprintf(b, n, "%s", isnan(v) ? "-" : (v > 0 ? "inf" : "-inf"));
}

/* Over all (step, site) pairs: the split of sum ||D||^2 by component, and the
 * sites (pooled over steps) by their share of it, largest first (at most show). */
static void pooled_table(const run *runs, size_t nr, size_t show)
{
    double c[FP4S_CMP_COUNT] = {0}, m2 = 0, r2 = 0;
    const char **names = calloc(nr, sizeof *names);
    double *site_m2 = calloc(nr, sizeof *site_m2);
    size_t ns = 0;
    for (size_t i = 0; i < nr; i++) {
        const fp4s_compare_site *s = &runs[i].r;
        m2 += s->mismatch2;
        r2 += s->ref2;
        for (int q = 0; q < FP4S_CMP_COUNT; q++) c[q] += s->contrib[q];
        if (!names || !site_m2) continue;
        const char *nm = runs[i].site ? runs[i].site : runs[i].label;
        size_t j = 0;
        while (j < ns && strcmp(names[j], nm)) j++;
        if (j == ns) names[ns++] = nm;
        site_m2[j] += s->mismatch2;
    }
    char e[32];
    fmtv(e, 32, "%.4g", r2 > 0 ? sqrt(m2 / r2) : NAN);
    printf("\nall %zu (step, site) pairs: sum ||D||^2 / sum ||X_t Qw^T||^2 = %s^2:", nr, e);
    for (int q = 0; q < ncomp; q++) {
        char v[32];
        fmtv(v, 32, "%.1f%%", m2 > 0 ? 100 * c[q] / m2 : NAN);
        printf(" %s %s%s", fp4s_cmp_component_name(q), v, q + 1 < ncomp ? "," : "\n");
    }
    if (names && site_m2 && ns > 1) {
        /* selection by share, largest first, ties to the first seen */
        bool *done = calloc(ns, sizeof *done);
        size_t lim = show < ns ? show : ns;
        printf("  sites by share of sum ||D||^2 (pooled over steps):\n");
        for (size_t t = 0; done && t < lim; t++) {
            size_t b = ns;
            for (size_t j = 0; j < ns; j++)
                if (!done[j] && (b == ns || site_m2[j] > site_m2[b])) b = j;
            done[b] = true;
            char v[32];
            fmtv(v, 32, "%.2f%%", m2 > 0 ? 100 * site_m2[b] / m2 : NAN);
            printf("  %5zu  %-40s %9s\n", t + 1, cli_safe(names[b]), v);
        }
        if (lim < ns) printf("  (%zu more sites)\n", ns - lim);
        free(done);
    }
    free(names);
    free(site_m2);
}

static void eval_unit(const fp4s_spec *as, const fp4s_spec *ws, const fp4s_compare_opts *co, const fp4s_unit *u,
                      fp4s_compare_site *out)
{
    fp4s_unit_data d;
    int rc = fp4s_unit_read(u, &d);
    if (rc) cli_fail(rc);
    rc = fp4s_compare_eval_routed(as, ws, d.x, d.rollout_only, d.xt, d.trainer_only, d.m, d.w, d.n, d.k, co, out);
    if (rc) cli_failf(rc, "%s", u->x);
    fp4s_unit_data_free(&d);
}

static json_t *site_json(const run *r)
{
    const fp4s_compare_site *s = &r->r;
    json_t *o = json_object();
    json_object_set_new(o, "source", json_string(r->label));
    json_object_set_new(o, "site", r->site ? json_string(r->site) : json_null());
    json_object_set_new(o, "step", r->step >= 0 ? json_integer(r->step) : json_null());
    json_object_set_new(o, "synthetic", json_boolean(r->synthetic));
    out_json_record(fp4s_rtype_compare_site(), s, o);
    if (r->ids) {
        json_object_set_new(o, "rollout_only", json_integer((json_int_t)s->rollout_only));
        json_object_set_new(o, "trainer_only", json_integer((json_int_t)s->trainer_only));
    }
    if (r->layer >= 0) json_object_set_new(o, "layer", json_integer((json_int_t)r->layer));
    if (r->expert >= 0) json_object_set_new(o, "expert", json_integer((json_int_t)r->expert));
    json_t *sh = json_object();
    for (int c = 0; c < ncomp; c++)
        json_object_set_new(sh, fp4s_cmp_component_name(c),
                            cli_json_real(s->mismatch2 > 0 ? s->contrib[c] / s->mismatch2 : NAN));
    json_object_set_new(o, "shares", sh);
    json_t *chs = json_array();
    for (size_t j = 0; j < s->k; j++) {
        json_t *c = json_object();
        json_object_set_new(c, "channel", json_integer((json_int_t)j));
        json_object_set_new(c, "input_rel_diff", cli_json_real(s->ch_input_rel_diff[j]));
        json_object_set_new(c, "code_flips", cli_json_real(s->ch_code_flips[j]));
        json_object_set_new(c, "scale_flips", cli_json_real(s->ch_scale_flips[j]));
        json_object_set_new(c, "amplification", cli_json_real(s->ch_amplification[j]));
        json_t *ct = json_object(), *en = json_object();
        for (int q = 0; q < ncomp; q++) {
            json_object_set_new(ct, fp4s_cmp_component_name(q), cli_json_real(s->ch_contrib[j * FP4S_CMP_COUNT + q]));
            json_object_set_new(en, fp4s_cmp_component_name(q), cli_json_real(s->ch_energy[j * FP4S_CMP_COUNT + q]));
        }
        json_object_set_new(c, "contribution", ct);
        json_object_set_new(c, "energy", en);
        json_array_append_new(chs, c);
    }
    json_object_set_new(o, "channels", chs);
    return o;
}

/* ---- routing flips: per step, the tokens whose route flipped at a selected site ---- */
typedef struct flips_step {
    int64_t step;
    int64_t *ids;          /* [n][2] */
    size_t n;
    size_t rollout_only, trainer_only; /* summed over the step's sites */
    int rc;                /* of the share: 0, or why there is none */
    char why[300];
    fp4s_flip_share share;
} flips_step;
typedef struct flips {
    flips_step *s;
    size_t nsteps;
} flips;

static void flips_collect(flips *f, const fp4s_units *ul, const char *file)
{
    for (size_t i = 0; i < ul->n; i++) {
        const fp4s_unit *u = &ul->u[i];
        if (!u->ids) continue;
        size_t j = 0;
        while (j < f->nsteps && f->s[j].step != u->step) j++;
        if (j == f->nsteps) {
            f->s = xrealloc(f->s, (f->nsteps + 1) * sizeof *f->s);
            memset(&f->s[j], 0, sizeof f->s[j]);
            f->s[j].step = u->step;
            f->nsteps++;
        }
        flips_step *st = &f->s[j];
        size_t nf = u->rollout_only + u->trainer_only;
        st->ids = xrealloc(st->ids, (st->n + nf + 1) * 2 * sizeof *st->ids);
        memcpy(st->ids + 2 * st->n, u->flips, nf * 2 * sizeof *st->ids);
        st->n += nf;
        st->rollout_only += u->rollout_only;
        st->trainer_only += u->trainer_only;
    }
    for (size_t j = 0; j < f->nsteps; j++) {
        flips_step *st = &f->s[j];
        st->rc = fp4s_capture_flip_share(file, st->step, st->ids, st->n, &st->share);
        if (st->rc) snprintf(st->why, sizeof st->why, "%s", fp4s_last_error());
    }
}

static void flips_free(flips *f)
{
    for (size_t j = 0; j < f->nsteps; j++) free(f->s[j].ids);
    free(f->s);
    memset(f, 0, sizeof *f);
}

static json_t *flips_json(const flips *f)
{
    json_t *a = json_array();
    for (size_t j = 0; j < f->nsteps; j++) {
        const flips_step *st = &f->s[j];
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer((json_int_t)st->step));
        json_object_set_new(o, "rollout_only", json_integer((json_int_t)st->rollout_only));
        json_object_set_new(o, "trainer_only", json_integer((json_int_t)st->trainer_only));
        if (st->rc) {
            json_object_set_new(o, "logprob_share", json_null());
            json_object_set_new(o, "why", json_string(st->why));
        } else {
            const fp4s_flip_share *x = &st->share;
            json_object_set_new(o, "tokens", json_integer((json_int_t)x->tokens));
            json_object_set_new(o, "flipped_tokens", json_integer((json_int_t)x->in_set));
            json_object_set_new(o, "flipped_without_logprob", json_integer((json_int_t)x->set_unmatched));
            json_object_set_new(o, "abs_share", cli_json_real(x->abs_all > 0 ? x->abs_set / x->abs_all : NAN));
            json_object_set_new(o, "sq_share", cli_json_real(x->sq_all > 0 ? x->sq_set / x->sq_all : NAN));
        }
        json_array_append_new(a, o);
    }
    return a;
}

static void flips_table(const flips *f)
{
    if (!f->nsteps) return;
    printf("\nrouting flips (tokens one side routed to a selected site, the other elsewhere) and the share of the\n"
           "step's log-prob mismatch those tokens carry (sum |lp_t - lp_r| and sum (lp_t - lp_r)^2 over them):\n");
    printf("  %6s %13s %13s %9s %9s %11s %10s\n", "step", "rollout only", "trainer only", "tokens", "flipped",
           "|dlp| share", "dlp^2 share");
    for (size_t j = 0; j < f->nsteps; j++) {
        const flips_step *st = &f->s[j];
        printf("  %6lld %13zu %13zu", (long long)st->step, st->rollout_only, st->trainer_only);
        if (st->rc) {
            printf("  (no log-prob share: %s)\n", st->why);
            continue;
        }
        const fp4s_flip_share *x = &st->share;
        char a[32], b[32];
        fmtv(a, 32, "%.2f%%", x->abs_all > 0 ? 100 * x->abs_set / x->abs_all : NAN);
        fmtv(b, 32, "%.2f%%", x->sq_all > 0 ? 100 * x->sq_set / x->sq_all : NAN);
        printf(" %9zu %9zu %11s %10s\n", x->tokens, x->in_set, a, b);
    }
}

/* ---- per expert and per layer: the sites of each (layer, expert), or of each
 * layer, pooled over steps ---- */
typedef struct pool_row {
    int64_t layer, expert; /* expert -1 in the per-layer view; layer -1: the site names none */
    size_t sites, both, rollout_only, trainer_only; /* sites: (site, step) pairs */
    double m2, r2, routing; /* sum ||D||^2, sum ||X_t Qw^T||^2, the routing component's part of m2 */
} pool_row;

static int cmp_pool(const void *a, const void *b)
{
    const pool_row *x = a, *y = b;
    if (x->layer != y->layer) { /* sites that name no layer last */
        if (x->layer < 0 || y->layer < 0) return x->layer < 0 ? 1 : -1;
        return x->layer < y->layer ? -1 : 1;
    }
    return (x->expert > y->expert) - (x->expert < y->expert);
}

/* by_expert: the sites that name an expert, per (layer, expert); else every
 * site per layer (none when no site names a layer). Sorted by layer. */
static pool_row *pool_of(const run *runs, size_t nr, bool by_expert, size_t *n)
{
    pool_row *v = NULL;
    *n = 0;
    bool any_layer = false;
    for (size_t i = 0; i < nr; i++) any_layer |= runs[i].layer >= 0;
    if (!by_expert && !any_layer) return NULL;
    for (size_t i = 0; i < nr; i++) {
        if (by_expert && runs[i].expert < 0) continue;
        int64_t e = by_expert ? runs[i].expert : -1;
        size_t j = 0;
        while (j < *n && (v[j].layer != runs[i].layer || v[j].expert != e)) j++;
        if (j == *n) {
            v = xrealloc(v, (*n + 1) * sizeof *v);
            memset(&v[j], 0, sizeof v[j]);
            v[j].layer = runs[i].layer;
            v[j].expert = e;
            (*n)++;
        }
        const fp4s_compare_site *s = &runs[i].r;
        v[j].sites++;
        v[j].both += s->m;
        v[j].rollout_only += s->rollout_only;
        v[j].trainer_only += s->trainer_only;
        v[j].m2 += s->mismatch2;
        v[j].r2 += s->ref2;
        v[j].routing += s->contrib[FP4S_CMP_ROUTING];
    }
    if (*n) qsort(v, *n, sizeof *v, cmp_pool);
    return v;
}

/* The pooled relative output error sqrt(sum ||D||^2 / sum ||X_t Qw^T||^2). */
static double pool_rel(const pool_row *p) { return p->r2 > 0 ? sqrt(p->m2 / p->r2) : NAN; }

static json_t *pool_json(const run *runs, size_t nr, bool by_expert, double total)
{
    size_t n;
    pool_row *v = pool_of(runs, nr, by_expert, &n);
    if (!n) return NULL;
    json_t *a = json_array();
    for (size_t j = 0; j < n; j++) {
        json_t *o = json_object();
        json_object_set_new(o, "layer", v[j].layer >= 0 ? json_integer((json_int_t)v[j].layer) : json_null());
        if (by_expert) json_object_set_new(o, "expert", json_integer((json_int_t)v[j].expert));
        json_object_set_new(o, "sites", json_integer((json_int_t)v[j].sites));
        json_object_set_new(o, "tokens", json_integer((json_int_t)v[j].both));
        if (ncomp > FP4S_CMP_ROUTING) {
            json_object_set_new(o, "rollout_only", json_integer((json_int_t)v[j].rollout_only));
            json_object_set_new(o, "trainer_only", json_integer((json_int_t)v[j].trainer_only));
        }
        json_object_set_new(o, "mismatch2", cli_json_real(v[j].m2));
        json_object_set_new(o, "ref2", cli_json_real(v[j].r2));
        json_object_set_new(o, "mismatch_rel", cli_json_real(pool_rel(&v[j])));
        json_object_set_new(o, "share", cli_json_real(total > 0 ? v[j].m2 / total : NAN));
        if (ncomp > FP4S_CMP_ROUTING)
            json_object_set_new(o, "routing_share", cli_json_real(v[j].m2 > 0 ? v[j].routing / v[j].m2 : NAN));
        json_array_append_new(a, o);
    }
    free(v);
    return a;
}

static void pool_table(const run *runs, size_t nr, bool by_expert, double total)
{
    size_t n;
    pool_row *v = pool_of(runs, nr, by_expert, &n);
    if (!n) return;
    bool ids = ncomp > FP4S_CMP_ROUTING;
    if (by_expert) printf("\nper expert (its sites pooled over steps; tokens summed over its sites and steps):\n");
    else printf("\nper layer (every site of the layer pooled over steps; tokens summed over its sites and steps):\n");
    printf("  %5s", "layer");
    if (by_expert) printf(" %6s", "expert");
    if (ids)
        printf(" %5s %10s %12s %12s %10s %11s %9s\n", "sites", "both", "rollout only", "trainer only", "rel.error",
               "share", "routing");
    else
        printf(" %5s %10s %10s %11s\n", "sites", "tokens", "rel.error", "share");
    for (size_t j = 0; j < n; j++) {
        char sh[32], ro[32], ly[24], re[32];
        fmtv(sh, 32, "%.2f%%", total > 0 ? 100 * v[j].m2 / total : NAN);
        fmtv(ro, 32, "%.1f%%", v[j].m2 > 0 ? 100 * v[j].routing / v[j].m2 : NAN);
        fmtv(re, 32, "%.4g", pool_rel(&v[j]));
        if (v[j].layer >= 0) snprintf(ly, sizeof ly, "%lld", (long long)v[j].layer);
        else snprintf(ly, sizeof ly, "-");
        printf("  %5s", ly);
        if (by_expert) printf(" %6lld", (long long)v[j].expert);
        if (ids)
            printf(" %5zu %10zu %12zu %12zu %10s %11s %9s\n", v[j].sites, v[j].both, v[j].rollout_only,
                   v[j].trainer_only, re, sh, ro);
        else
            printf(" %5zu %10zu %10s %11s\n", v[j].sites, v[j].both, re, sh);
    }
    printf("  rel.error: sqrt(sum ||D||^2 / sum ||X_t Qw^T||^2) over the pooled sites; share: of the total output\n"
           "  mismatch energy%s\n",
           ids ? (by_expert ? "; routing: of the expert's own, carried by tokens routed to it on one side only"
                            : "; routing: of the layer's own, carried by tokens routed on one side only")
               : "");
    free(v);
}

/* The command line: every check before any work. */
typedef struct args {
    cli_common common;
    cli_quant qo;
    cli_analysis an;
    const char *outpath, *capture; /* capture NULL: one site given as tensors */
    long long top;
} args;

static void parse_args(int argc, char **argv, args *a)
{
    cli_quant_init(&a->qo);
    cli_common_init(&a->common, usage_text, false);
    a->top = 20;
    static const struct option lo[] = {
        CLI_QUANT_LONGOPTS
        {"output", required_argument, NULL, 'o'},
        CLI_WEIGHT_2D_LONGOPTS
        CLI_SELECT_LONGOPTS
        CLI_SITE_LONGOPTS
        CLI_DZ_TIE_LONGOPTS
        {"top", required_argument, NULL, OPT_TOP},
        CLI_STRICT_LONGOPTS
        CLI_REPORT_LONGOPTS
        CLI_THREADS_LONGOPTS
        CLI_GEMM_LONGOPTS
        CLI_COMMON_LONGOPTS
        CLI_OUTPUT_LONGOPTS
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:o:", lo)) != -1) {
        switch (c) {
        case 'o': a->outpath = optarg; break;
        case OPT_TOP: a->top = cli_parse_int("--top", optarg, 0, 1LL << 40); break;
        default: cli_option_rest(c, optarg, argv, &a->common, &a->qo, &a->an);
        }
    }
    cli_common_check(&a->common);
    const cli_analysis *an = &a->an;
    bool capture_mode = optind < argc;
    if (capture_mode && optind + 1 < argc) cli_usage("one CAPTURE expected, got %d", argc - optind);
    if (capture_mode && (an->act || an->trainer_act || an->weight))
        cli_usage("give either a CAPTURE or --act/--trainer-act/--weight");
    if (!capture_mode && !(an->act && an->trainer_act && an->weight))
        cli_usage("no input: give a CAPTURE, or --act XR --trainer-act XT --weight W");
    if (!capture_mode && (an->sites || an->steps)) cli_usage("--sites and --steps select from a CAPTURE");
    a->capture = capture_mode ? argv[optind] : NULL;
}

/* The ranking, pooled over steps per (site, channel, component): *nrank
 * rows, largest first; the sum of every unit's ||D||^2 in *total. */
static rank_row *rank_channels(const run *runs, size_t nr, double *total, size_t *nrank)
{
    const char **names = xcalloc(nr, sizeof *names);
    size_t *nk = xcalloc(nr, sizeof *nk), nsite = 0, n = 0;
    double **acc = xcalloc(nr, sizeof *acc);
    *total = 0;
    for (size_t i = 0; i < nr; i++) {
        *total += runs[i].r.mismatch2;
        const char *name = runs[i].site ? runs[i].site : runs[i].label;
        size_t t;
        for (t = 0; t < nsite; t++)
            if (!strcmp(names[t], name)) break;
        if (t == nsite) {
            names[nsite] = name;
            nk[nsite] = runs[i].r.k;
            acc[nsite] = xcalloc(runs[i].r.k * FP4S_CMP_COUNT, sizeof(double));
            n += runs[i].r.k * (size_t)ncomp;
            nsite++;
        }
        if (nk[t] != runs[i].r.k)
            cli_die(FP4S_EXIT_INPUT, "site %s: K differs between steps (%zu and %zu)", name, nk[t], runs[i].r.k);
        for (size_t q = 0; q < runs[i].r.k * FP4S_CMP_COUNT; q++) acc[t][q] += runs[i].r.ch_contrib[q];
    }
    rank_row *rk = xmalloc((n ? n : 1) * sizeof *rk);
    n = 0;
    for (size_t t = 0; t < nsite; t++)
        for (size_t j = 0; j < nk[t]; j++)
            for (int q = 0; q < ncomp; q++)
                rk[n++] = (rank_row){names[t], j, q, acc[t][j * FP4S_CMP_COUNT + q]};
    qsort(rk, n, sizeof *rk, cmp_rank);
    for (size_t t = 0; t < nsite; t++) free(acc[t]);
    free(acc);
    free(nk);
    free(names);
    *nrank = n;
    return rk;
}

/* The --json document (and -o's). */
static json_t *doc_json(const fp4s_spec *as, const fp4s_spec *ws, const run *runs, size_t nr, const rank_row *rk,
                        size_t show, double total, const flips *fl)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "tool", json_string("fp4-compare"));
    char desc[512];
    fp4s_spec_describe(as, desc, sizeof desc);
    json_object_set_new(doc, "activation_quantizer", json_string(desc));
    fp4s_spec_describe(ws, desc, sizeof desc);
    json_object_set_new(doc, "weight_quantizer", json_string(desc));
    json_object_set_new(doc, "total_mismatch2", cli_json_real(total));
    json_t *arr = json_array();
    for (size_t i = 0; i < nr; i++) json_array_append_new(arr, site_json(&runs[i]));
    json_object_set_new(doc, "sites", arr);
    json_t *ra = json_array();
    double cum = 0;
    for (size_t i = 0; i < show; i++) {
        json_t *o = json_object();
        cum += rk[i].contrib;
        json_object_set_new(o, "site", json_string(rk[i].site));
        json_object_set_new(o, "channel", json_integer((json_int_t)rk[i].channel));
        json_object_set_new(o, "component", json_string(fp4s_cmp_component_name(rk[i].comp)));
        json_object_set_new(o, "contribution", cli_json_real(rk[i].contrib));
        json_object_set_new(o, "share", cli_json_real(total > 0 ? rk[i].contrib / total : NAN));
        json_object_set_new(o, "cumulative", cli_json_real(total > 0 ? cum / total : NAN));
        json_array_append_new(ra, o);
    }
    json_object_set_new(doc, "ranking", ra);
    json_t *ly = pool_json(runs, nr, false, total);
    if (ly) json_object_set_new(doc, "layers", ly);
    json_t *ex = pool_json(runs, nr, true, total);
    if (ex) json_object_set_new(doc, "experts", ex);
    if (fl->nsteps) json_object_set_new(doc, "routing_flips", flips_json(fl));
    return doc;
}

/* --csv: one line per site, step and channel. */
static int print_csv(const run *runs, size_t nr)
{
    printf("source,site,step,channel,input_rel_diff,code_flips,scale_flips,amplification");
    for (int q = 0; q < ncomp; q++) printf(",contribution_%s", fp4s_cmp_component_name(q));
    for (int q = 0; q < ncomp; q++) printf(",energy_%s", fp4s_cmp_component_name(q));
    putchar('\n');
    for (size_t i = 0; i < nr; i++) {
        const fp4s_compare_site *s = &runs[i].r;
        for (size_t j = 0; j < s->k; j++) {
            cli_csv_str(runs[i].label);
            putchar(',');
            cli_csv_str(runs[i].site ? runs[i].site : "");
            putchar(',');
            if (runs[i].step >= 0) printf("%lld", (long long)runs[i].step);
            double v[4] = {s->ch_input_rel_diff[j], s->ch_code_flips[j], s->ch_scale_flips[j],
                           s->ch_amplification[j]};
            printf(",%zu", j);
            for (int q = 0; q < 4; q++) {
                if (isfinite(v[q])) printf(",%.17g", v[q]);
                else printf(",");
            }
            for (int q = 0; q < ncomp; q++) printf(",%.17g", s->ch_contrib[j * FP4S_CMP_COUNT + q]);
            for (int q = 0; q < ncomp; q++) printf(",%.17g", s->ch_energy[j * FP4S_CMP_COUNT + q]);
            putchar('\n');
        }
    }
    return fflush(stdout) != 0 ? FP4S_EXIT_OUTPUT : 0;
}

/* The table: each unit, the pooled split, the ranking's first `show` rows. */
static int print_table(const fp4s_spec *as, const run *runs, size_t nr, const rank_row *rk, size_t nrank,
                       size_t show, double total, const flips *fl)
{
    char desc[512];
    fp4s_spec_describe(as, desc, sizeof desc);
    printf("activation quantizer: %s\n", desc);
    printf("output mismatch D = Qa(X_r) Qw(W)^T - X_t Qw(W)^T, split by component: input = X_r - X_t, and the\n"
           "rollout's quantization error as scale bias, dead zone and grid noise\n");
    for (size_t i = 0; i < nr; i++) {
        const fp4s_compare_site *s = &runs[i].r;
        char a[32], b[32], cc[32], d[32], e[32];
        printf("\n%s%s", runs[i].site ? "site " : "", cli_safe(runs[i].site ? runs[i].site : runs[i].label));
        if (runs[i].step >= 0) printf(" step %lld", (long long)runs[i].step);
        printf("  [%zu x %zu] x [%zu x %zu]^T%s\n", s->m, s->k, s->n, s->k,
               runs[i].synthetic ? "  (synthetic capture)" : "");
        fmtv(a, 32, "%.4g", s->input_rel_diff);
        fmtv(b, 32, "%.2f%%", 100 * s->code_flips);
        fmtv(cc, 32, "%.2f%%", 100 * s->scale_flips);
        fmtv(d, 32, "%.3g", s->amplification);
        printf("  ||X_r - X_t||/||X_t|| %s   codes differ %s   block scales differ %s   amplification %s\n", a, b,
               cc, d);
        if (runs[i].ids)
            printf("  tokens: %zu on both sides, %zu routed here by the rollout only, %zu by the trainer only\n",
                   s->m, s->rollout_only, s->trainer_only);
        fmtv(e, 32, "%.4g", s->mismatch_rel);
        printf("  ||D|| / ||X_t Qw^T|| %s:", e);
        for (int q = 0; q < ncomp; q++) {
            char v[32];
            fmtv(v, 32, "%.1f%%", s->mismatch2 > 0 ? 100 * s->contrib[q] / s->mismatch2 : NAN);
            printf(" %s %s%s", fp4s_cmp_component_name(q), v, q + 1 < ncomp ? "," : "\n");
        }
    }
    if (nr > 1) pooled_table(runs, nr, show);
    pool_table(runs, nr, false, total);
    pool_table(runs, nr, true, total);
    flips_table(fl);
    printf("\nranking (pooled over steps): share of the total output mismatch energy %.6g\n", total);
    printf("  %5s  %-40s %8s  %-9s %12s %9s %9s\n", "rank", "site", "channel", "component", "contribution",
           "share", "cumul.");
    double cum = 0;
    for (size_t i = 0; i < show; i++) {
        char sh[32], cu[32];
        cum += rk[i].contrib;
        fmtv(sh, 32, "%.2f%%", total > 0 ? 100 * rk[i].contrib / total : NAN);
        fmtv(cu, 32, "%.2f%%", total > 0 ? 100 * cum / total : NAN);
        printf("  %5zu  %-40s %8zu  %-9s %12.5g %9s %9s\n", i + 1, cli_safe(rk[i].site), rk[i].channel,
               fp4s_cmp_component_name(rk[i].comp), rk[i].contrib, sh, cu);
    }
    if (show < nrank) printf("  (%zu more; --top 0 lists all)\n", nrank - show);
    return fflush(stdout) != 0 ? FP4S_EXIT_OUTPUT : 0;
}

int main(int argc, char **argv)
{
    cli_init("fp4-compare");
    par_init();
    args a = {0};
    parse_args(argc, argv, &a);
    const cli_analysis *an = &a.an;
    fp4s_spec as, ws;
    cli_quant_spec(&a.qo, CLI_FORMATS_FP4, "the comparison is", &as);
    fp4s_remedy_weight_spec(&as, cli_weight_2d(an->weight_2d), &ws);
    fp4s_compare_opts co;
    fp4s_compare_opts_defaults(&co);
    cli_dz_tie(an->dz_tie, &co.dz_tie);
    int rc;
    /* the output is checked against the inputs before any work (cli.h) */
    const char *inputs[] = {a.capture, an->act, an->trainer_act, an->weight};
    for (int i = 0; i < 4; i++)
        if (inputs[i]) cli_input(inputs[i]);
    if (a.outpath) cli_output(a.outpath);

    /* the units: one site given as tensors, or the capture's (step, site) pairs with both sides */
    fp4s_units ul = {0};
    bool syn;
    cli_units(a.capture, an, FP4S_UNIT_SKIP, FP4S_UNIT_REQUIRED, "with both trainer and rollout activations ", "",
              " (only rollout sides there)", &ul, &syn);
    size_t nr = ul.n;
    run *runs = xcalloc(nr, sizeof *runs);
    cli_progress_begin(a.capture ? a.capture : an->act);
    for (size_t i = 0; i < nr; i++) {
        const fp4s_unit *u = &ul.u[i];
        runs[i].label = xstrdup(u->x);
        runs[i].site = u->site ? xstrdup(u->site) : NULL;
        runs[i].step = u->step;
        runs[i].synthetic = syn;
        runs[i].ids = u->ids;
        runs[i].layer = u->site ? cli_site_index(u->site, "layers") : -1;
        if (u->site && runs[i].layer < 0) runs[i].layer = cli_site_index(u->site, "layer");
        runs[i].expert = u->site ? cli_site_index(u->site, "experts") : -1;
        if (u->ids) ncomp = FP4S_CMP_COUNT;
        if (par_mine(i)) eval_unit(&as, &ws, &co, u, &runs[i].r); /* over MPI ranks: this rank's units */
        cli_progress(i + 1, nr);
    }
    cli_progress_end();
    flips fl = {0};
    if (a.capture) flips_collect(&fl, &ul, a.capture);
    fp4s_units_free(&ul);
    if (!par_gather_compare(&runs[0].r, sizeof *runs, nr)) return 0; /* rank 0 goes on with every unit */

    double total;
    size_t nrank;
    rank_row *rk = rank_channels(runs, nr, &total, &nrank);
    size_t show = a.top == 0 || (size_t)a.top > nrank ? nrank : (size_t)a.top;
    json_t *doc = a.common.json || a.outpath ? doc_json(&as, &ws, runs, nr, rk, show, total, &fl) : NULL;
    if (a.outpath) {
        if ((rc = cli_json_write(a.outpath, doc))) exit(cli_report(rc));
        if ((rc = cli_commit())) exit(rc);
    }
    int status;
    if (a.common.json) status = cli_json_print(json_incref(doc));
    else if (a.common.csv) status = print_csv(runs, nr);
    else status = print_table(&as, runs, nr, rk, nrank, show, total, &fl);
    json_decref(doc);
    flips_free(&fl);
    for (size_t i = 0; i < nr; i++) {
        fp4s_compare_site_free(&runs[i].r);
        free(runs[i].label);
        free(runs[i].site);
    }
    free(runs);
    free(rk);
    return status;
}
