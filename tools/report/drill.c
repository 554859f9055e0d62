/* fp4-report: the drill-down pages of the worst sites, site -> channel ->
 * block. A site's page (sites/S/index.html) has its steps, remedies and every
 * channel; a channel's page (channel-J.html) its statistics per step and the
 * blocks holding it with the largest error; a block's page (block-R-B.html)
 * its elements: x, Q(x), the error and which part of the decomposition each
 * element's error is. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS_PER_CHANNEL 5

static size_t ndrill(const report *r) { return r->o->drill < r->nsites ? r->o->drill : r->nsites; }

const char *drill_href(const report *r, size_t site)
{
    static char buf[64];
    for (size_t i = 0; i < ndrill(r); i++)
        if (r->order[i] == site) {
            snprintf(buf, sizeof buf, "sites/%zu/index.html", site);
            return buf;
        }
    return "";
}

static void site_title(const report *r, size_t s, text *t)
{
    if (r->o->ncaptures > 1) {
        html_esc(t, r->o->names[r->sites[s].cap]);
        tx_add(t, ": ");
    }
    html_esc(t, r->sites[s].site);
}

/* per-channel and per-block decompositions of one unit */
static fp4s_decomp *decomp_by(const report *r, const unit *u, fp4s_group by)
{
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    if (by == FP4S_GROUP_BLOCK) {
        size_t nb = u->m * (u->k / r->o->spec.block);
        if (nb > o.max_groups) o.max_groups = nb;
    }
    fp4s_decomp *d = NULL;
    int rc = fp4s_decomp_source(&r->o->spec, &o, u->xr, &d);
    if (rc) cli_failf(rc, "%s", u->xr);
    return d;
}

typedef struct site_ctx {
    report *r;
    size_t s;
    char dir[64];
    const unit *u0;          /* the first step */
    float *x, *q;            /* its activations and Q(x) */
    uint8_t *scales;
    fp4s_tscale ts;
    size_t bpr;              /* blocks per row */
    fp4s_decomp *blocks;     /* by block, first step */
    unsigned char *block_done; /* pages written */
} site_ctx;

/* ---- the block page -------------------------------------------------------------------------- */
static void block_page(site_ctx *c, size_t row, size_t b, size_t from_channel)
{
    report *r = c->r;
    const fp4s_spec *sp = &r->o->spec;
    size_t bs = sp->block, k = c->u0->k, j0 = b * bs;
    size_t gi = row * c->bpr + b;
    if (c->block_done[gi]) return;
    c->block_done[gi] = 1;
    fp4s_decomp_result br;
    int rc = fp4s_decomp_group(c->blocks, gi, &br);
    if (rc) cli_fail(rc);
    /* the block alone, with the tensor's tensor scale: one group per element */
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = FP4S_GROUP_CHANNEL;
    fp4s_decomp *d = NULL;
    rc = fp4s_decomp_open(sp, sp->format == FP4S_NVFP4 ? &c->ts : NULL, &o, 1, bs, &d);
    if (rc) cli_fail(rc);
    if ((rc = fp4s_decomp_add(d, c->x + row * k + j0, 1, bs, 0))) cli_fail(rc);
    double sdec = fp4s_scale_decode(sp, c->scales[row * c->bpr + b]);
    if (sp->format == FP4S_NVFP4) sdec *= c->ts.s_dec;
    double amax = 0;
    for (size_t j = 0; j < bs; j++) amax = fmax(amax, fabs(c->x[row * k + j0 + j]));
    double sstar = amax / 6;

    text pg = {0};
    char title[700], back[64], rel[128];
    snprintf(back, sizeof back, "channel-%zu.html", from_channel);
    snprintf(title, sizeof title, "%s: block %zu of token %zu", r->sites[c->s].site, b, row);
    html_begin(&pg, title, back);
    tx_add(&pg, "<h1>Block %zu of token %zu</h1>\n<p class=\"meta\">Site <a href=\"index.html\">", b, row);
    site_title(r, c->s, &pg);
    tx_add(&pg, "</a>, step %lld: channels %zu to %zu. Block amax m<sub>b</sub> = %.6g, ideal scale s* = m<sub>b</sub>/6 "
                "= %.6g, real scale s = %.6g (gamma = s / s* = %.4g). Its error ||e||<sup>2</sup> = %.4g: %.0f%% scale "
                "bias, %.0f%% dead zone, %.0f%% grid noise (cross terms %+.0f%%).</p>\n",
           (long long)c->u0->step, j0, j0 + bs - 1, amax, sstar, sdec, br.gamma_mean, br.energy_total,
           100 * br.ratio_scale, 100 * br.ratio_deadzone, 100 * br.ratio_grid, 100 * br.ratio_cross);
    tx_add(&pg, "<p class=\"note\">Per element: e = Q(x) - x; |e_scale| = |Q(x) - Q*(x)| is what the real scale "
                "changes against the ideal one; the rest, |Q*(x) - x|, is dead zone where Q* sends x to 0 and grid "
                "noise elsewhere (fp4-decompose(1)). Channel %zu, the one this page was reached from, is "
                "highlighted.</p>\n", from_channel);
    static const rt_col ec[] = {
        {"channel", "channel", "int", NULL}, {"x", "x", "%.6g", NULL}, {"q", "Q(x)", "%.6g", NULL},
        {"e", "e = Q(x) - x", "%.4g", NULL}, {"x_over_sstar", "x / s*", "%.4g", "in units of the ideal scale"},
        {"abs_e_scale", "|e_scale|", "%.4g", NULL}, {"zone", "zone", NULL, "dead zone or grid (clipped: Q(x) saturates)"},
        {"abs_e_zone", "|e_dz| or |e_grid|", "%.4g", NULL}, {"share", "share of block ||e||^2", "pct", NULL}};
    rtable t;
    snprintf(rel, sizeof rel, "block-%zu-%zu", row, b);
    rt_init(&t, rel, "Elements", ec, 9);
    for (size_t j = 0; j < bs; j++) {
        fp4s_decomp_result er;
        if ((rc = fp4s_decomp_group(d, j, &er))) cli_fail(rc);
        double x = c->x[row * k + j0 + j], q = c->q[row * k + j0 + j];
        rt_n(&t, (double)(j0 + j));
        if (j0 + j == from_channel) rt_mark(&t);
        rt_n(&t, x);
        rt_n(&t, q);
        rt_n(&t, q - x);
        rt_n(&t, sstar > 0 ? x / sstar : NAN);
        rt_n(&t, sqrt(er.energy_scale));
        bool dz = er.deadzone > 0;
        rt_s(&t, dz ? "dead zone" : er.clipped ? "grid, clipped" : "grid");
        rt_n(&t, sqrt(dz ? er.energy_deadzone : er.energy_grid));
        double sh = share(er.energy_total, br.energy_total);
        rt_n(&t, sh);
        rt_shade(&t, sh > 0 ? sh : NAN);
    }
    rt_emit(&t, r->od, c->dir, &pg);
    rt_free(&t);
    fp4s_decomp_close(&d);
    html_end(&pg);
    snprintf(rel, sizeof rel, "%s/block-%zu-%zu.html", c->dir, row, b);
    od_write(r->od, rel, pg.p, pg.n);
    tx_free(&pg);
}

/* ---- the channel page ----------------------------------------------------------------------- */
typedef struct blk {
    size_t row;
    double e;
} blk;

static int cmp_blk(const void *a, const void *b)
{
    const blk *x = a, *y = b;
    if (x->e != y->e) return x->e > y->e ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static void channel_page(site_ctx *c, size_t j, fp4s_decomp **bych, const size_t *su, size_t nsu)
{
    report *r = c->r;
    size_t bs = r->o->spec.block, b = j / bs, k = c->u0->k, m = c->u0->m;
    text pg = {0};
    char title[700], rel[160];
    snprintf(title, sizeof title, "%s: channel %zu", r->sites[c->s].site, j);
    html_begin(&pg, title, "index.html");
    tx_add(&pg, "<h1>Channel %zu</h1>\n<p class=\"meta\">Site <a href=\"index.html\">", j);
    site_title(r, c->s, &pg);
    tx_add(&pg, "</a>; the channel lies in block %zu of every token (channels %zu to %zu).</p>\n", b, b * bs,
           b * bs + bs - 1);
    static const rt_col sc[] = {
        {"step", "step", "int", NULL}, {"share_of_site", "share of site error", "pct", "of the tensor's ||e||^2"},
        {"relative_error", "rel. error", "%.4g", NULL}, {"amax", "amax", "%.4g", NULL},
        {"ratio_scale", "scale", "pct", NULL}, {"ratio_deadzone", "dead zone", "pct", NULL},
        {"ratio_grid", "grid", "pct", NULL}, {"deadzone_fraction", "in dead zone", "pct", NULL},
        {"clip_fraction", "clipped", "pct", NULL}};
    rtable t;
    snprintf(rel, sizeof rel, "channel-%zu-steps", j);
    rt_init(&t, rel, "The channel per step", sc, 9);
    for (size_t i = 0; i < nsu; i++) {
        const unit *u = &r->units[su[i]];
        fp4s_decomp_result g;
        int rc = fp4s_decomp_group(bych[i], j, &g);
        if (rc) cli_fail(rc);
        rt_n(&t, (double)u->step);
        rt_n(&t, share(g.energy_total, u->dec.energy_total));
        rt_n(&t, g.relative_error);
        rt_n(&t, g.amax);
        rt_n(&t, g.ratio_scale);
        rt_n(&t, g.ratio_deadzone);
        rt_n(&t, g.ratio_grid);
        rt_n(&t, g.deadzone_fraction);
        rt_n(&t, g.clip_fraction);
    }
    rt_emit(&t, r->od, c->dir, &pg);
    rt_free(&t);
    /* the blocks of this channel, largest error first */
    blk *bl = xmalloc(m * sizeof *bl);
    for (size_t row = 0; row < m; row++) {
        fp4s_decomp_result g;
        int rc = fp4s_decomp_group(c->blocks, row * c->bpr + b, &g);
        if (rc) cli_fail(rc);
        bl[row] = (blk){row, g.energy_total};
    }
    qsort(bl, m, sizeof *bl, cmp_blk);
    static const rt_col bc[] = {
        {"token", "token (row)", "int", NULL}, {"block", "block", "int", NULL},
        {"energy_total", "block ||e||^2", "%.4g", NULL}, {"x", "x in this channel", "%.5g", NULL},
        {"q", "Q(x)", "%.5g", NULL}, {"ratio_scale", "scale", "pct", NULL},
        {"ratio_deadzone", "dead zone", "pct", NULL}, {"ratio_grid", "grid", "pct", NULL},
        {"gamma", "gamma = s/s*", "%.4g", NULL}};
    snprintf(rel, sizeof rel, "channel-%zu-blocks", j);
    char bt[200];
    snprintf(bt, sizeof bt, "The blocks holding channel %zu with the largest error (step %lld)", j,
             (long long)c->u0->step);
    rt_init(&t, rel, bt, bc, 9);
    t.html_rows = 20;
    for (size_t i = 0; i < m; i++) {
        fp4s_decomp_result g;
        int rc = fp4s_decomp_group(c->blocks, bl[i].row * c->bpr + b, &g);
        if (rc) cli_fail(rc);
        char tok[32], href[96];
        snprintf(tok, sizeof tok, "%zu", bl[i].row);
        snprintf(href, sizeof href, "block-%zu-%zu.html", bl[i].row, b);
        if (i < BLOCKS_PER_CHANNEL) rt_link(&t, tok, href);
        else rt_n(&t, (double)bl[i].row);
        rt_n(&t, (double)b);
        rt_n(&t, g.energy_total);
        rt_n(&t, c->x[bl[i].row * k + j]);
        rt_n(&t, c->q[bl[i].row * k + j]);
        rt_n(&t, g.ratio_scale);
        rt_n(&t, g.ratio_deadzone);
        rt_n(&t, g.ratio_grid);
        rt_n(&t, g.gamma_mean);
    }
    rt_emit(&t, r->od, c->dir, &pg);
    rt_free(&t);
    /* figure: the channel over the tokens, x and Q(x) */
    fig f;
    char stem[64];
    snprintf(stem, sizeof stem, "channel-%zu", j);
    fig_init(&f, c->dir, stem, 900, 380);
    text d = {0};
    tx_add(&d, "# token x q\n");
    for (size_t row = 0; row < m; row++) {
        tx_add(&d, "%zu", row);
        tx_num(&d, c->x[row * k + j]);
        tx_num(&d, c->q[row * k + j]);
        tx_add(&d, "\n");
    }
    const char *df = fig_data(&f, r->od, "values", &d);
    tx_free(&d);
    text *s = &f.script;
    tx_add(s, "set title 'Channel %zu over the tokens (step %lld)'\nset xlabel 'token'\nset ylabel 'value'\n"
              "set key top right box opaque\nplot ",
           j, (long long)c->u0->step);
    tx_str(s, df);
    tx_add(s, " using 1:2 with impulses lw 1.5 lc rgb '#1f77b4' title 'x', '' using 1:3 with points pt 7 ps 0.6 "
              "lc rgb '#d62728' title 'Q(x)'\n");
    fig_emit(&f, r->od, &pg, "The channel's values over the tokens of the first step and what the quantizer makes "
                             "of them.");
    html_end(&pg);
    snprintf(rel, sizeof rel, "%s/channel-%zu.html", c->dir, j);
    od_write(r->od, rel, pg.p, pg.n);
    tx_free(&pg);
    for (size_t i = 0; i < BLOCKS_PER_CHANNEL && i < m; i++) block_page(c, bl[i].row, b, j);
    free(bl);
}

/* ---- the site page ------------------------------------------------------------------------------ */
static void site_page(report *r, size_t s)
{
    const report_opts *o = r->o;
    site_sum *ss = &r->sites[s];
    site_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.s = s;
    snprintf(c.dir, sizeof c.dir, "sites/%zu", s);
    od_mkdir(r->od, c.dir);
    c.u0 = &r->units[ss->first_unit];
    size_t m = c.u0->m, k = c.u0->k;
    c.bpr = fp4s_spec_blocks_per_row(&o->spec, k);
    size_t mk;
    int rc = fp4s_source_read_all(c.u0->xr, &c.x, &mk, &k);
    if (rc) cli_fail(rc);
    c.q = xmalloc(m * k * sizeof *c.q);
    c.scales = xmalloc(m * c.bpr);
    float amax = fp4s_spec_amax(&o->spec, c.x, m, k, k, NULL);
    if ((rc = fp4s_tscale_init(&o->spec, amax, &c.ts))) cli_fail(rc);
    fp4s_qout qo;
    memset(&qo, 0, sizeof qo);
    qo.dequant = c.q;
    qo.ld_dequant = k;
    qo.scales = c.scales;
    qo.ld_scales = c.bpr;
    if ((rc = fp4s_quantize(&o->spec, &c.ts, c.x, m, k, k, 0, &qo, NULL))) cli_fail(rc);
    c.blocks = decomp_by(r, c.u0, FP4S_GROUP_BLOCK);
    c.block_done = xcalloc(m * c.bpr, 1);
    /* the site's units in step order, each decomposed per channel */
    size_t *su = xmalloc(r->nunits * sizeof *su), nsu = 0;
    for (size_t i = 0; i < r->nunits; i++)
        if (r->units[i].cap == ss->cap && !strcmp(r->units[i].site, ss->site)) su[nsu++] = i;
    fp4s_decomp **bych = xcalloc(nsu, sizeof *bych);
    for (size_t i = 0; i < nsu; i++) bych[i] = decomp_by(r, &r->units[su[i]], FP4S_GROUP_CHANNEL);

    text pg = {0};
    char title[700], rel[160];
    snprintf(title, sizeof title, "%s", ss->site);
    html_begin(&pg, title, "../../index.html");
    tx_add(&pg, "<h1>");
    site_title(r, s, &pg);
    tx_add(&pg, "</h1>\n<p class=\"meta\">Activations [%zu tokens, K = %zu]%s; %zu step%s. Relative error %.4g "
                "pooled over the steps: %.0f%% scale bias, %.0f%% dead zone, %.0f%% grid noise.</p>\n",
           m, k, c.u0->w ? ", with a weight" : "", nsu, nsu == 1 ? "" : "s",
           ss->x2 > 0 ? sqrt(ss->err2 / ss->x2) : NAN, 100 * share(ss->e_scale, ss->err2),
           100 * share(ss->e_dz, ss->err2), 100 * share(ss->e_grid, ss->err2));
    static const rt_col uc[] = {
        {"step", "step", "int", NULL}, {"relative_error", "rel. error", "%.4g", NULL},
        {"snr_db", "SNR dB", "%.1f", NULL}, {"ratio_scale", "scale", "pct", NULL},
        {"ratio_deadzone", "dead zone", "pct", NULL}, {"ratio_grid", "grid", "pct", NULL},
        {"ratio_cross", "cross", "pct", NULL}, {"gamma_mean", "mean gamma", "%.4g", "s / s* over the blocks"},
        {"deadzone_fraction", "in dead zone", "pct", NULL}, {"mismatch_rel", "rollout vs trainer ||D||/||ref||", "%.4g",
                                                            NULL}};
    rtable t;
    rt_init(&t, "steps", "Per step", uc, 10);
    for (size_t i = 0; i < nsu; i++) {
        const unit *u = &r->units[su[i]];
        rt_n(&t, (double)u->step);
        rt_n(&t, u->dec.relative_error);
        rt_n(&t, u->dec.snr_db);
        rt_n(&t, u->dec.ratio_scale);
        rt_n(&t, u->dec.ratio_deadzone);
        rt_n(&t, u->dec.ratio_grid);
        rt_n(&t, u->dec.ratio_cross);
        rt_n(&t, u->dec.gamma_mean);
        rt_n(&t, u->dec.deadzone_fraction);
        rt_n(&t, u->have_cmp ? u->cmp.mismatch_rel : NAN);
    }
    rt_emit(&t, r->od, c.dir, &pg);
    rt_free(&t);
    /* the remedies at this site */
    size_t nrs = 0;
    for (size_t i = 0; i < nsu; i++) nrs += r->units[su[i]].have_rem;
    if (nrs) {
        static const rt_col rc2[] = {
            {"remedy", "remedy", NULL, NULL}, {"out_rel_error", "error vs BF16", "%.4g", NULL},
            {"out_rel_error_vs_wfq", "vs wfq", "%.4g", NULL}, {"flops_fp4_equiv_extra", "+FLOPs", "pct", NULL},
            {"time_vs_fp8", "time / FP8", "%.3g", NULL}};
        rt_init(&t, "remedies", "Remedies at this site, pooled over its steps", rc2, 5);
        for (size_t q = 0; q < r->nrem; q++) {
            double e2 = 0, r2 = 0, w2 = 0, rw2 = 0, fe = 0, fb = 0, ts = 0, t8 = 0;
            for (size_t i = 0; i < nsu; i++) {
                const unit *u = &r->units[su[i]];
                if (!u->have_rem) continue;
                e2 += u->rres[q].err2_bf16;
                r2 += u->rsite.ref2_bf16;
                w2 += u->rres[q].err2_wfq;
                rw2 += u->rres[q].ref2_wfq;
                fe += u->rres[q].time.flops_fp4_equiv_extra;
                fb += u->rres[q].cost.flops_base;
                ts += u->rres[q].time.seconds;
                t8 += u->rres[q].time.fp8_seconds;
            }
            rt_s(&t, fp4s_remedy_label(&r->rem[q]));
            rt_n(&t, r2 > 0 ? sqrt(e2 / r2) : NAN);
            rt_n(&t, rw2 > 0 ? sqrt(w2 / rw2) : NAN);
            rt_n(&t, fb > 0 ? fe / fb : NAN);
            rt_n(&t, t8 > 0 ? ts / t8 : NAN);
        }
        rt_emit(&t, r->od, c.dir, &pg);
        rt_free(&t);
    }
    /* every channel, ranked */
    const fp4s_channels_report *ch = ss->ch;
    tx_add(&pg, "<h2>Channels</h2>\n<p class=\"note\">Ranked by residual at step %lld; the first %zu link to their "
                "pages.</p>\n",
           (long long)c.u0->step, o->top);
    static const rt_col cc[] = {
        {"rank", "rank", "int", NULL}, {"channel", "channel", "int", NULL},
        {"residual_norm", "residual", "%.4g", NULL}, {"share", "share of error", "pct", NULL},
        {"relative_error", "rel. error", "%.3g", NULL}, {"amax", "amax", "%.4g", NULL},
        {"ratio_scale", "scale", "pct", NULL}, {"ratio_deadzone", "dead zone", "pct", NULL},
        {"ratio_grid", "grid", "pct", NULL}, {"hcp", "HCP score", "%.3g", NULL}};
    rt_init(&t, "channels", "", cc, 10);
    t.html_rows = 2 * o->top;
    for (size_t i = 0; i < ch->k; i++) {
        const fp4s_channel_stat *x = &ch->ch[i];
        rt_n(&t, (double)x->rank);
        char cs[32], href[64];
        snprintf(cs, sizeof cs, "%zu", x->channel);
        snprintf(href, sizeof href, "channel-%zu.html", x->channel);
        if (i < o->top) rt_link(&t, cs, href);
        else rt_n(&t, (double)x->channel);
        rt_n(&t, x->residual_norm);
        rt_n(&t, share(x->energy_total, ch->energy_total));
        rt_n(&t, x->relative_error);
        rt_n(&t, x->amax);
        rt_n(&t, share(x->energy_scale, x->energy_total));
        rt_n(&t, share(x->energy_deadzone, x->energy_total));
        rt_n(&t, share(x->energy_grid, x->energy_total));
        rt_n(&t, x->hcp);
    }
    rt_emit(&t, r->od, c.dir, &pg);
    rt_free(&t);
    /* figure: the residual of every channel by index */
    fig f;
    fig_init(&f, c.dir, "channels", 1000, 400);
    text d = {0}, dt = {0};
    tx_add(&d, "# channel residual_norm rank\n");
    tx_add(&dt, "# channel residual_norm (the top %zu)\n", o->top);
    double *res = xcalloc(k, sizeof *res);
    size_t *rk = xcalloc(k, sizeof *rk);
    for (size_t i = 0; i < ch->k; i++) {
        res[ch->ch[i].channel] = ch->ch[i].residual_norm;
        rk[ch->ch[i].channel] = ch->ch[i].rank;
    }
    double rmin = INFINITY, rmax = 0;
    for (size_t j = 0; j < k; j++) {
        tx_add(&d, "%zu", j);
        tx_num(&d, res[j]);
        tx_add(&d, " %zu\n", rk[j]);
        if (rk[j] <= o->top) {
            tx_add(&dt, "%zu", j);
            tx_num(&dt, res[j]);
            tx_add(&dt, "\n");
        }
        if (res[j] > 0 && res[j] < rmin) rmin = res[j];
        if (res[j] > rmax) rmax = res[j];
    }
    char fa[256], fb[256];
    snprintf(fa, sizeof fa, "%s", fig_data(&f, r->od, "all", &d));
    snprintf(fb, sizeof fb, "%s", fig_data(&f, r->od, "top", &dt));
    tx_free(&d);
    tx_free(&dt);
    free(res);
    free(rk);
    text *sc = &f.script;
    tx_add(sc, "set title 'Residual ||x_j - Q(x_j)|| of every channel (step %lld)'\nset xlabel 'channel'\n"
              "set ylabel 'residual'\nset key top right box opaque\nset xrange [-1:%zu]\n",
           (long long)c.u0->step, k);
    if (rmin > 0 && rmax > 30 * rmin) tx_add(sc, "set logscale y\nset format y '10^{%%L}'\n");
    tx_add(sc, "plot ");
    tx_str(sc, fa);
    tx_add(sc, " using 1:2 with impulses lw 1.2 lc rgb '#1f77b4' title 'every channel', ");
    tx_str(sc, fb);
    tx_add(sc, " using 1:2 with points pt 7 ps 1 lc rgb '#d62728' title 'the top %zu'\n", o->top);
    fig_emit(&f, r->od, &pg, "Each channel's residual at the first step: hot channels stand out.");
    html_end(&pg);
    snprintf(rel, sizeof rel, "%s/index.html", c.dir);
    od_write(r->od, rel, pg.p, pg.n);
    tx_free(&pg);
    for (size_t i = 0; i < o->top && i < ch->k; i++) channel_page(&c, ch->ch[i].channel, bych, su, nsu);
    for (size_t i = 0; i < nsu; i++) fp4s_decomp_close(&bych[i]);
    free(bych);
    free(su);
    fp4s_decomp_close(&c.blocks);
    free(c.block_done);
    free(c.x);
    free(c.q);
    free(c.scales);
}

void write_drill(report *r)
{
    size_t nd = ndrill(r);
    if (!nd) return;
    rep_progress("drill-down pages of the %zu worst site%s", nd, nd == 1 ? "" : "s");
    od_mkdir(r->od, "sites");
    cli_progress_begin("drill-down pages");
    for (size_t i = 0; i < nd; i++) {
        cli_progress(i, nd);
        site_page(r, r->order[i]);
    }
    cli_progress_end();
}
