/* fp4-report: the main page, index.html: the summary (summary.c), then one
 * section per analysis, each table with its CSV and each figure with its
 * gnuplot script and data. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BARS 24   /* sites in a bar chart */
#define MAX_LINES 8   /* sites in a line chart */

/* A horizontal stacked bar chart, one bar per row (the first row on top): the
 * positive values of each row stack rightwards from 0 and the negative ones
 * leftwards, each component in its colour. vals[row * ncomp + c] in %. */
static void hbars(report *r, text *pg, const char *stem, const char *title, const char *xlabel, size_t nrow,
                  char **labels, const double *vals, size_t ncomp, const char *const *names,
                  const char *const *cols, const char *caption)
{
    fig f;
    fig_init(&f, "", stem, 1000, 150 + 26 * (int)nrow);
    text d = {0};
    tx_add(&d, "# row label, then per component: x_lo x_hi (stacked, %%)\n");
    double xmin = 0, xmax = 0;
    for (size_t i = 0; i < nrow; i++) {
        tx_add(&d, "%zu \"", i);
        for (const char *c = labels[i]; *c; c++) tx_add(&d, "%c", *c == '"' ? '\'' : *c);
        tx_add(&d, "\"");
        double pos = 0, neg = 0;
        for (size_t c = 0; c < ncomp; c++) {
            double v = vals[i * ncomp + c];
            if (!isfinite(v)) v = 0;
            double lo = v >= 0 ? pos : neg + v, hi = v >= 0 ? pos + v : neg;
            if (v >= 0) pos += v;
            else neg += v;
            tx_num(&d, lo);
            tx_num(&d, hi);
        }
        tx_add(&d, "\n");
        if (neg < xmin) xmin = neg;
        if (pos > xmax) xmax = pos;
    }
    const char *df = fig_data(&f, r->od, "bars", &d);
    tx_free(&d);
    text *s = &f.script;
    tx_add(s, "set title ");
    tx_label(s, title);
    tx_add(s, "\nset style fill solid 0.85 border -1\nset key outside right top\nset ytics noenhanced\nset xlabel ");
    tx_label(s, xlabel);
    tx_add(s, "\nset yrange [%g:-0.6]\nset xrange [%g:%g]\nunset grid\nset grid xtics lc rgb '#dddddd'\n",
           (double)nrow - 0.4, xmin < 0 ? xmin * 1.05 - 2 : 0, xmax * 1.04 + 1);
    if (xmin < 0) tx_add(s, "set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb '#444444'\n");
    tx_add(s, "plot ");
    for (size_t c = 0; c < ncomp; c++) {
        if (c) tx_add(s, ", \\\n     ");
        tx_str(s, df);
        int lo = 3 + 2 * (int)c, hi = lo + 1;
        tx_add(s, " using (($%d+$%d)/2):1:%d:%d:($1-0.38):($1+0.38)%s with boxxyerror lc rgb '%s' title ", lo, hi, lo,
               hi, c ? "" : ":ytic(2)", cols[c]);
        tx_plain(s, names[c]);
    }
    tx_add(s, "\n");
    fig_emit(&f, r->od, pg, caption);
}

/* ---- 1. profiles --------------------------------------------------------------------------- */
static void sec_profiles(report *r, text *pg, const rem_pool *rp)
{
    const report_opts *o = r->o;
    tx_add(pg, "<p class=\"note\">Each engine's quantizer as a profile, against <b>");
    html_esc(pg, o->spec.profile);
    tx_add(pg, "</b> on the first step of each site: the share of values whose dequantized value differs "
               "(weights with each profile's own weight scaling). Darker cells disagree more.</p>\n");
    if (!r->nprofiles) {
        tx_add(pg, "<p class=\"note\">No other profile to compare.</p>\n");
        return;
    }
    /* one row per profile: the mean and the worst site, rollout activations and weights */
    typedef struct prow {
        size_t p;
        double mean[2], max[2], blocks[2], rel[2];
        size_t worst[2], n[2];
    } prow;
    prow *pr = xcalloc(r->nprofiles, sizeof *pr);
    for (size_t p = 0; p < r->nprofiles; p++) {
        pr[p].p = p;
        for (int tt = 0; tt < 2; tt++) pr[p].max[tt] = -1;
    }
    for (size_t i = 0; i < r->ndis; i++) {
        const disagree *d = &r->dis[i];
        size_t p = 0;
        while (p < r->nprofiles && r->profiles[p] != d->profile) p++;
        int tt = !strcmp(d->tensor, "weight");
        double f = d->n ? (double)d->differ / (double)d->n : 0;
        pr[p].mean[tt] += f;
        pr[p].blocks[tt] += d->blocks ? (double)d->blocks_differ / (double)d->blocks : 0;
        pr[p].rel[tt] += d->rel_diff;
        pr[p].n[tt]++;
        if (f > pr[p].max[tt]) {
            pr[p].max[tt] = f;
            pr[p].worst[tt] = d->site;
        }
    }
    for (size_t p = 0; p < r->nprofiles; p++)
        for (int tt = 0; tt < 2; tt++)
            if (pr[p].n[tt]) {
                pr[p].mean[tt] /= (double)pr[p].n[tt];
                pr[p].blocks[tt] /= (double)pr[p].n[tt];
                pr[p].rel[tt] /= (double)pr[p].n[tt];
            }
    /* most disagreeing first (insertion sort: a few dozen profiles) */
    for (size_t a = 1; a < r->nprofiles; a++)
        for (size_t b = a; b > 0 && pr[b].mean[0] + pr[b].mean[1] > pr[b - 1].mean[0] + pr[b - 1].mean[1]; b--) {
            prow x = pr[b];
            pr[b] = pr[b - 1];
            pr[b - 1] = x;
        }
    static const rt_col pc[] = {
        {"profile", "profile", NULL, NULL}, {"engine", "engine", "text", NULL},
        {"rollout_values_differ", "activations: values differ", "pct", "mean over sites"},
        {"rollout_blocks_differ", "blocks", "pct", "blocks with a value that differs"},
        {"rollout_rel_diff", "||Qp-Qref||/||Qref||", "%.3g", NULL},
        {"rollout_worst_site", "worst site", NULL, NULL}, {"rollout_worst", "there", "pct", NULL},
        {"weight_values_differ", "weights: values differ", "pct", NULL}, {"weight_blocks_differ", "blocks", "pct", NULL},
        {"weight_worst_site", "worst site", NULL, NULL}, {"weight_worst", "there", "pct", NULL}};
    rtable t;
    rt_init(&t, "profiles", "Values quantized differently from the reference, per profile", pc, 11);
    size_t nsame = 0;
    for (size_t i = 0; i < r->nprofiles; i++) {
        const prow *x = &pr[i];
        const fp4s_profile_info *pi = fp4s_profile_find(r->profiles[x->p]);
        rt_s(&t, r->profiles[x->p]);
        rt_s(&t, pi && pi->engine ? pi->engine : "");
        for (int tt = 0; tt < 2; tt++) {
            bool have = x->n[tt] > 0;
            rt_n(&t, have ? x->mean[tt] : NAN);
            rt_shade(&t, have && x->mean[tt] > 0 ? 0.15 + 0.85 * fmin(1, log10(1 + 1e4 * x->mean[tt]) / 4) : NAN);
            rt_n(&t, have ? x->blocks[tt] : NAN);
            if (tt == 0) rt_n(&t, have ? x->rel[tt] : NAN);
            if (have && x->max[tt] > 0) site_cell(r, &t, x->worst[tt]);
            else rt_s(&t, "");
            rt_n(&t, have && x->max[tt] > 0 ? x->max[tt] : NAN);
        }
        nsame += x->max[0] <= 0 && x->max[1] <= 0;
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    if (nsame) {
        tx_add(pg, "<p class=\"note\">%zu of the %zu profiles quantize every value here as ", nsame, r->nprofiles);
        html_esc(pg, o->spec.profile);
        tx_add(pg, " does:");
        for (size_t i = 0; i < r->nprofiles; i++)
            if (pr[i].max[0] <= 0 && pr[i].max[1] <= 0) {
                tx_add(pg, " <code>");
                html_esc(pg, r->profiles[pr[i].p]);
                tx_add(pg, "</code>");
            }
        tx_add(pg, ".</p>\n");
    }
    free(pr);
    /* every measure, long format */
    static const rt_col lc[] = {
        {"site", "site", NULL, NULL}, {"tensor", "tensor", NULL, NULL}, {"profile", "profile", NULL, NULL},
        {"elements", "elements", "int", NULL}, {"differ", "values differing", "int", NULL},
        {"blocks", "blocks", "int", NULL}, {"blocks_differ", "blocks differing", "int", NULL},
        {"rel_diff", "||Qp - Qref|| / ||Qref||", "%.3g", NULL}};
    rt_init(&t, "profiles-all", "Every profile and tensor: values, blocks and the relative difference", lc, 8);
    t.html_rows = 12;
    for (size_t i = 0; i < r->ndis; i++) {
        const disagree *d = &r->dis[i];
        site_cell(r, &t, d->site);
        rt_s(&t, d->tensor);
        rt_s(&t, d->profile);
        rt_n(&t, (double)d->n);
        rt_n(&t, (double)d->differ);
        rt_n(&t, (double)d->blocks);
        rt_n(&t, (double)d->blocks_differ);
        rt_n(&t, d->rel_diff);
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* the figure: mean share differing per profile, activations and weights */
    text d = {0};
    tx_add(&d, "# profile mean_share_rollout mean_share_weight (over sites)\n");
    double ymax = 0;
    for (size_t p = 0; p < r->nprofiles; p++) {
        double a[2] = {0, 0};
        size_t na[2] = {0, 0};
        for (size_t i = 0; i < r->ndis; i++)
            if (r->dis[i].profile == r->profiles[p]) {
                int tt = !strcmp(r->dis[i].tensor, "weight");
                a[tt] += (double)r->dis[i].differ / (double)r->dis[i].n;
                na[tt]++;
            }
        tx_add(&d, "\"%s\"", r->profiles[p]);
        for (int tt = 0; tt < 2; tt++) {
            double v = na[tt] ? 100 * a[tt] / (double)na[tt] : NAN;
            if (v > ymax) ymax = v;
            tx_num(&d, v);
        }
        tx_add(&d, "\n");
    }
    fig f;
    fig_init(&f, "", "profiles", 1000, 420);
    const char *df = fig_data(&f, r->od, "data", &d);
    tx_free(&d);
    text *s = &f.script;
    tx_add(s, "set title ");
    char ttl[300];
    snprintf(ttl, sizeof ttl, "Values quantized differently from %s (%s), mean over sites", o->spec.profile,
             fp4s_format_name(o->spec.format));
    tx_label(s, ttl);
    tx_add(s, "\nset style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.85 border -1\n"
              "set boxwidth 0.9\nset ylabel '%% of values'\nset yrange [0:%g]\nset xtics rotate by -35 left noenhanced\n"
              "set key top right\nplot ",
           ymax > 0 ? ymax * 1.15 : 1);
    tx_str(s, df);
    tx_add(s, " using 2:xtic(1) title 'rollout activations' lc rgb '#1f77b4', '' using 3 title 'weights' lc rgb '#ff7f0e'\n");
    fig_emit(&f, r->od, pg, "Share of values each profile quantizes differently from the reference, averaged over the "
                            "sites (first step of each).");
}

/* One series of a figure with a line per site: the data dd (freed here) written as
 * series "site<oi + 1>", and its plot clause `style` in the oi-th colour, titled
 * with site si's label (after a separator unless oi is 0). */
static void site_series(report *r, fig *f, size_t oi, size_t si, text *dd, const char *style)
{
    char ser[32];
    snprintf(ser, sizeof ser, "site%zu", oi + 1);
    const char *fn = fig_data(f, r->od, ser, dd);
    tx_free(dd);
    char lab[600];
    site_label(r, si, lab, sizeof lab);
    text *s = &f->script;
    if (oi) tx_add(s, ", \\\n     ");
    tx_str(s, fn);
    tx_add(s, " %s lc rgb '%s' title ", style, colors[oi % NCOLORS]);
    tx_plain(s, lab);
}

/* The note of a section with nothing to show: why the comparison and the
 * remedies were left out when they were, else `why` (HTML). */
static void left_out(const report *r, text *pg, const char *why)
{
    tx_add(pg, "<p class=\"note\">");
    if (r->rem_unavailable) html_esc(pg, r->rem_unavailable);
    else tx_add(pg, "%s", why);
    tx_add(pg, "</p>\n");
}

/* ---- 2. decomposition --------------------------------------------------------------------- */
static void sec_decomp(report *r, text *pg, const rem_pool *rp)
{
    const report_opts *o = r->o;
    tx_add(pg, "<p class=\"note\">e = Q(x) - x of the rollout activations splits exactly into scale bias (the real "
               "block scale against the ideal m<sub>b</sub>/6), dead zone (values the ideal quantizer sends to zero) "
               "and grid noise, plus cross terms (see fp4-decompose(1)). Shares are of ||e||<sup>2</sup>; sites are "
               "ordered worst first.</p>\n");
    static const rt_col sc[] = {
        {"site", "site", NULL, NULL}, {"steps", "steps", "int", NULL},
        {"relative_error", "rel. error", "%.4g", "||e|| / ||x|| pooled over steps"},
        {"snr_db", "SNR dB", "%.1f", NULL},
        {"share_scale", "scale", "pct", "scale-bias share of ||e||^2"},
        {"share_deadzone", "dead zone", "pct", NULL}, {"share_grid", "grid", "pct", NULL},
        {"share_cross", "cross", "pct", "the three cross terms (may be negative)"},
        {"top_channels_half", "channels for 50%", "int", "channels holding half the error energy (first step)"}};
    rtable t;
    rt_init(&t, "sites", "Per site, pooled over its steps", sc, 9);
    for (size_t oi = 0; oi < r->nsites; oi++) {
        size_t s = r->order[oi];
        const site_sum *ss = &r->sites[s];
        site_cell(r, &t, s);
        rt_n(&t, (double)ss->nunits);
        rt_n(&t, ss->x2 > 0 ? sqrt(ss->err2 / ss->x2) : NAN);
        rt_n(&t, ss->err2 > 0 ? 10 * log10(ss->x2 / ss->err2) : NAN);
        rt_n(&t, share(ss->e_scale, ss->err2));
        rt_n(&t, share(ss->e_dz, ss->err2));
        rt_n(&t, share(ss->e_grid, ss->err2));
        rt_n(&t, share(ss->e_cross, ss->err2));
        rt_n(&t, ss->ch ? (double)channels_for(ss->ch, 0.5) : NAN);
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* figure: shares per site, stacked; the cross terms (mostly negative) apart */
    size_t nb = r->nsites < MAX_BARS ? r->nsites : MAX_BARS;
    char **labs = xcalloc(nb, sizeof *labs);
    double *vals = xcalloc(nb * 4, sizeof *vals);
    for (size_t oi = 0; oi < nb; oi++) {
        const site_sum *ss = &r->sites[r->order[oi]];
        char lab[600];
        site_label(r, r->order[oi], lab, sizeof lab);
        labs[oi] = xstrdup(lab);
        vals[oi * 4 + 0] = 100 * share(ss->e_scale, ss->err2);
        vals[oi * 4 + 1] = 100 * share(ss->e_dz, ss->err2);
        vals[oi * 4 + 2] = 100 * share(ss->e_grid, ss->err2);
        vals[oi * 4 + 3] = 100 * share(ss->e_cross, ss->err2);
    }
    char ttl[300], cap[600];
    snprintf(ttl, sizeof ttl, "What the %s error is made of, per site (%s)", fp4s_format_name(o->spec.format),
             o->spec.profile);
    snprintf(cap, sizeof cap, "Scale bias, dead zone and grid noise as shares of the error energy of each site (the "
             "%zu worst of %zu sites). The cross terms 2<a,b> are drawn apart: negative ones (to the left of 0) mean "
             "parts that cancel, so the three parts add up to more than 100%%.", nb, r->nsites);
    static const char *const comp[] = {"scale bias", "dead zone", "grid noise", "cross terms"};
    static const char *const cc[] = {"#d62728", "#1f77b4", "#2ca02c", "#bbbbbb"};
    hbars(r, pg, "components", ttl, "% of the error energy ||e||^2", nb, labs, vals, 4, comp, cc, cap);
    for (size_t i = 0; i < nb; i++) free(labs[i]);
    free(labs);
    free(vals);

    /* per step */
    static const rt_col uc[] = {
        {"site", "site", NULL, NULL}, {"step", "step", "int", NULL}, {"tokens", "tokens", "int", NULL},
        {"k", "K", "int", NULL}, {"relative_error", "rel. error", "%.4g", NULL}, {"snr_db", "SNR dB", "%.1f", NULL},
        {"ratio_scale", "scale", "pct", NULL}, {"ratio_deadzone", "dead zone", "pct", NULL},
        {"ratio_grid", "grid", "pct", NULL}, {"ratio_cross", "cross", "pct", NULL},
        {"deadzone_fraction", "in dead zone", "pct", "share of elements the ideal quantizer sends to 0"},
        {"clip_fraction", "clipped", "pct", NULL}, {"underflow_fraction", "scale underflow", "pct", "share of blocks"}};
    rt_init(&t, "decomposition", "Per site and step", uc, 13);
    t.html_rows = 24;
    for (size_t oi = 0; oi < r->nsites; oi++) {
        size_t s2 = r->order[oi];
        for (size_t i = 0; i < r->nunits; i++) {
            const unit *u = &r->units[i];
            if (u->cap != r->sites[s2].cap || strcmp(u->site, r->sites[s2].site)) continue;
            const fp4s_decomp_result *x = &u->dec;
            site_cell(r, &t, s2);
            rt_n(&t, (double)u->step);
            rt_n(&t, (double)u->m);
            rt_n(&t, (double)u->k);
            rt_n(&t, x->relative_error);
            rt_n(&t, x->snr_db);
            rt_n(&t, x->ratio_scale);
            rt_n(&t, x->ratio_deadzone);
            rt_n(&t, x->ratio_grid);
            rt_n(&t, x->ratio_cross);
            rt_n(&t, x->deadzone_fraction);
            rt_n(&t, x->clip_fraction);
            rt_n(&t, x->underflow_fraction);
        }
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* figure: relative error over steps, the worst sites */
    size_t nl = r->nsites < MAX_LINES ? r->nsites : MAX_LINES;
    size_t maxsteps = 0;
    for (size_t oi = 0; oi < nl; oi++) maxsteps = r->sites[r->order[oi]].nunits > maxsteps ? r->sites[r->order[oi]].nunits : maxsteps;
    if (maxsteps < 2) return;
    fig f;
    fig_init(&f, "", "error-steps", 1000, 440);
    text *s = &f.script;
    snprintf(ttl, sizeof ttl, "Relative error of the rollout activations per step (%s, %s), worst %zu sites",
             fp4s_format_name(o->spec.format), o->spec.profile, nl);
    tx_add(s, "set title ");
    tx_label(s, ttl);
    tx_add(s, "\nset xlabel 'step'\nset ylabel '||Q(x) - x|| / ||x||'\nset key outside right top noenhanced\nplot ");
    for (size_t oi = 0; oi < nl; oi++) {
        size_t s2 = r->order[oi];
        text dd = {0};
        tx_add(&dd, "# step relative_error\n");
        for (size_t i = 0; i < r->nunits; i++) {
            const unit *u = &r->units[i];
            if (u->cap != r->sites[s2].cap || strcmp(u->site, r->sites[s2].site)) continue;
            tx_add(&dd, "%lld", (long long)u->step);
            tx_num(&dd, u->dec.relative_error);
            tx_add(&dd, "\n");
        }
        site_series(r, &f, oi, s2, &dd, "using 1:2 with linespoints lw 1.5 pt 7 ps 0.7");
    }
    tx_add(s, "\n");
    fig_emit(&f, r->od, pg, "Relative error per step of the worst sites: a site whose error grows over training is "
                            "one to watch.");
}

/* ---- 3. channels ----------------------------------------------------------------------------- */
static void sec_channels(report *r, text *pg, const rem_pool *rp)
{
    const report_opts *o = r->o;
    size_t w = r->order[0];
    const site_sum *ws = &r->sites[w];
    const fp4s_channels_report *c = ws->ch;
    if (!c) {
        tx_add(pg, "<p class=\"note\">No channel report.</p>\n");
        return;
    }
    char lab[600];
    site_label(r, w, lab, sizeof lab);
    tx_add(pg, "<p class=\"note\">Channels (columns of the activations, quantized along K) ranked by their residual "
               "||x<sub>j</sub> - Q(x<sub>j</sub>)|| at the first step of each site; the set a QUADS-style rollout "
               "compensates is the top 12.5%% (see fp4-channels(1)). The worst site, <b>");
    html_esc(pg, lab);
    tx_add(pg, "</b>, step %lld:</p>\n", (long long)r->units[ws->ch_unit].step);
    static const rt_col cc[] = {
        {"rank", "rank", "int", NULL}, {"channel", "channel", "int", NULL},
        {"residual_norm", "residual", "%.4g", "||x_j - Q(x_j)||"},
        {"share", "share of error", "pct", "of the error energy over all channels"},
        {"cumulative_share", "cumulative", "pct", NULL},
        {"relative_error", "rel. error", "%.3g", NULL}, {"amax", "amax", "%.4g", NULL},
        {"deadzone_fraction", "in dead zone", "pct", NULL}, {"mean_abs_dx", "mean |dX|", "%.3g", NULL},
        {"mean_abs_dw", "mean |dW|", "%.3g", NULL}, {"hcp", "HCP score", "%.3g", "mean |dX| + mean |dW|"}};
    rtable t;
    rt_init(&t, "channels", "Top channels of the worst site", cc, 11);
    t.html_rows = o->top;
    double cum = 0;
    for (size_t i = 0; i < c->k; i++) {
        const fp4s_channel_stat *x = &c->ch[i];
        if (isfinite(x->energy_total)) cum += x->energy_total;
        rt_n(&t, (double)x->rank);
        char ch[32], href[512];
        snprintf(ch, sizeof ch, "%zu", x->channel);
        const char *dh = drill_href(r, w);
        if (*dh) snprintf(href, sizeof href, "sites/%zu/channel-%zu.html", w, x->channel);
        else href[0] = '\0';
        if (*dh && i < o->top) rt_link(&t, ch, href);
        else rt_n(&t, (double)x->channel);
        rt_n(&t, x->residual_norm);
        rt_n(&t, share(x->energy_total, c->energy_total));
        rt_n(&t, share(cum, c->energy_total));
        rt_n(&t, x->relative_error);
        rt_n(&t, x->amax);
        rt_n(&t, x->deadzone_fraction);
        rt_n(&t, x->mean_abs_dx);
        rt_n(&t, x->mean_abs_dw);
        rt_n(&t, x->hcp);
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    static const rt_col pc[] = {
        {"site", "site", NULL, NULL}, {"k", "K", "int", NULL},
        {"channels_50", "channels for 50%", "int", NULL}, {"channels_90", "for 90%", "int", NULL},
        {"share_top_1pct", "top 1% hold", "pct", NULL}, {"share_top_12_5pct", "top 12.5% hold", "pct", NULL},
        {"cost_flops_ratio", "+FLOPs (12.5% set)", "pct", "extra GEMM FLOPs of compensating the 12.5% set"},
        {"cost_bytes_ratio", "+bytes", "pct", NULL}};
    rt_init(&t, "channels-sites", "Concentration per site", pc, 8);
    for (size_t oi = 0; oi < r->nsites; oi++) {
        size_t s = r->order[oi];
        const fp4s_channels_report *x = r->sites[s].ch;
        if (!x) continue;
        site_cell(r, &t, s);
        rt_n(&t, (double)x->k);
        rt_n(&t, (double)channels_for(x, 0.5));
        rt_n(&t, (double)channels_for(x, 0.9));
        rt_n(&t, top_share(x, (x->k + 99) / 100));
        rt_n(&t, top_share(x, (x->k + 7) / 8));
        rt_n(&t, x->cost.flops_ratio);
        rt_n(&t, x->cost.bytes_ratio);
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* the coverage curves from every channel */
    size_t nl = r->nsites < 6 ? r->nsites : 6;
    fig f;
    fig_init(&f, "", "coverage", 1000, 540);
    text *s = &f.script;
    tx_add(s, "set title 'Coverage: share of the activation error held by the top channels'\n"
              "set xlabel 'fraction of channels, best first (log scale)'\nset ylabel 'share of the error energy'\n"
              "set logscale x\nset format x '%%g'\nset yrange [0:1.02]\nset key below noenhanced maxcols 3\n"
              "set arrow from 0.125, graph 0 to 0.125, graph 1 nohead dt 2 lc rgb '#999999'\n"
              "set label '12.5%% of the channels' at 0.125, graph 0.06 offset -0.5,0 right tc rgb '#777777'\n");
    double xmin = 1;
    for (size_t oi = 0; oi < nl; oi++) {
        const fp4s_channels_report *x = r->sites[r->order[oi]].ch;
        if (x && x->k && 1.0 / (double)x->k < xmin) xmin = 1.0 / (double)x->k;
    }
    tx_add(s, "set xrange [%.6g:1]\nplot ", xmin * 0.8);
    for (size_t oi = 0; oi < nl; oi++) {
        size_t si = r->order[oi];
        const fp4s_channels_report *x = r->sites[si].ch;
        if (!x || !(x->energy_total > 0)) continue;
        text dd = {0};
        tx_add(&dd, "# fraction channels share\n");
        double cu = 0;
        for (size_t k = 1; k <= x->k; k++) {
            if (isfinite(x->ch[k - 1].energy_total)) cu += x->ch[k - 1].energy_total;
            tx_num(&dd, (double)k / (double)x->k);
            tx_add(&dd, " %zu", k);
            tx_num(&dd, cu / x->energy_total);
            tx_add(&dd, "\n");
        }
        site_series(r, &f, oi, si, &dd, "using 1:3 with lines lw 2");
    }
    tx_add(s, ", \\\n     x with lines dt 3 lc rgb '#7f7f7f' title 'uniform'\n");
    fig_emit(&f, r->od, pg, "Coverage curve of the worst sites from every channel: how much of the error the top "
                            "channels hold. A curve far above the diagonal means a few channels carry the error "
                            "(compensating them is cheap).");
}

/* ---- 4. trainer vs rollout -------------------------------------------------------------------- */
/* The sites of each (capture, layer, expert), pooled over steps: tokens on
 * each side, the rollout's quantization error, the share of the total
 * mismatch and (with token ids) routing's part of its own. Nothing for a
 * capture whose sites name no expert. */
typedef struct rep_expert {
    size_t cap;
    int64_t layer, expert;
    size_t sites, both, rollout_only, trainer_only;
    double err2, x2, m2, routing;
} rep_expert;

static void experts_table(report *r, text *pg, double tot)
{
    rep_expert *v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < r->nunits; i++) {
        const unit *u = &r->units[i];
        int64_t e = cli_site_index(u->site, "experts");
        if (e < 0 || !u->have_cmp) continue;
        int64_t l = cli_site_layer(u->site);
        size_t j = 0;
        while (j < n && (v[j].cap != u->cap || v[j].layer != l || v[j].expert != e)) j++;
        if (j == n) {
            v = xrealloc(v, (n + 1) * sizeof *v);
            v[j] = (rep_expert){.cap = u->cap, .layer = l, .expert = e};
            n++;
        }
        v[j].sites++;
        v[j].both += u->cmp.m;
        v[j].rollout_only += u->cmp.rollout_only;
        v[j].trainer_only += u->cmp.trainer_only;
        v[j].err2 += u->dec.energy_total;
        v[j].x2 += u->dec.energy_x;
        v[j].m2 += u->cmp.mismatch2;
        v[j].routing += u->cmp.contrib[FP4S_CMP_ROUTING];
    }
    if (!n) return;
    for (size_t a = 1; a < n; a++) /* by capture, layer, expert */
        for (size_t b = a; b > 0; b--) {
            rep_expert *x = &v[b - 1], *y = &v[b];
            bool swap = x->cap != y->cap ? x->cap > y->cap : x->layer != y->layer ? x->layer > y->layer
                                                                                   : x->expert > y->expert;
            if (!swap) break;
            rep_expert t = *x;
            *x = *y;
            *y = t;
        }
    bool ids = r->ncmp > FP4S_CMP_ROUTING;
    static const rt_col ec[] = {
        {"capture", "capture", NULL, NULL}, {"layer", "layer", "int", NULL}, {"expert", "expert", "int", NULL},
        {"site_steps", "site x steps", "int", NULL}, {"tokens", "tokens", "int", "on both sides, summed"},
        {"rel_error", "rollout ||e|| / ||x||", "%.4g", "its quantization error"},
        {"share_of_total", "share of all D", "pct", NULL},
        {"rollout_only", "rollout only", "int", "tokens the rollout alone routed here"},
        {"trainer_only", "trainer only", "int", "tokens the trainer alone routed here"},
        {"share_routing", "routing", "pct", "of its own ||D||^2"}};
    rtable t;
    rt_init(&t, "compare-experts", "Per expert, its sites pooled over steps", ec, ids ? 10 : 7);
    for (size_t j = 0; j < n; j++) {
        rt_s(&t, r->o->names[v[j].cap]);
        rt_n(&t, v[j].layer >= 0 ? (double)v[j].layer : NAN);
        rt_n(&t, (double)v[j].expert);
        rt_n(&t, (double)v[j].sites);
        rt_n(&t, (double)v[j].both);
        rt_n(&t, v[j].x2 > 0 ? sqrt(v[j].err2 / v[j].x2) : NAN);
        rt_n(&t, share(v[j].m2, tot));
        if (ids) {
            rt_n(&t, (double)v[j].rollout_only);
            rt_n(&t, (double)v[j].trainer_only);
            rt_n(&t, share(v[j].routing, v[j].m2));
        }
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    free(v);
}

static void sec_compare(report *r, text *pg, const rem_pool *rp)
{
    size_t nc = 0;
    for (size_t i = 0; i < r->nunits; i++) nc += r->units[i].have_cmp;
    if (!nc) {
        left_out(r, pg, "No site has trainer and rollout activations and a weight (the comparison needs all three).");
        return;
    }
    tx_add(pg, "<p class=\"note\">As fp4-compare(1): the output mismatch D = Qa(X<sub>r</sub>) Qw(W)<sup>T</sup> - "
               "X<sub>t</sub> Qw(W)<sup>T</sup> against the asymmetric-QAT trainer, split exactly into the input "
               "difference of the two sides and the rollout's scale bias, dead zone and grid noise. Shares may be "
               "negative (a part that cancels others).</p>\n");
    static const rt_col cc[] = {
        {"site", "site", NULL, NULL}, {"steps", "steps", "int", NULL},
        {"mismatch_rel", "||D|| / ||ref||", "%.4g", "pooled over steps"},
        {"share_of_total", "share of all D", "pct", NULL},
        {"share_input", "input", "pct", NULL}, {"share_scale", "scale", "pct", NULL},
        {"share_deadzone", "dead zone", "pct", NULL}, {"share_grid", "grid", "pct", NULL},
        {"share_routing", "routing", "pct", "tokens one side routed to the site alone"}};
    double tot = 0;
    for (size_t s = 0; s < r->nsites; s++) tot += r->sites[s].mismatch2;
    rtable t;
    /* the routing column where some site is paired by token id */
    rt_init(&t, "compare-sites", "Per site, pooled over steps", cc, 4 + (size_t)r->ncmp);
    size_t *ord = xmalloc(r->nsites * sizeof *ord), no = 0;
    for (size_t oi = 0; oi < r->nsites; oi++)
        if (r->sites[r->order[oi]].cmp_ref2 > 0) ord[no++] = r->order[oi];
    /* largest mismatch first */
    for (size_t a = 1; a < no; a++)
        for (size_t b = a; b > 0 && r->sites[ord[b]].mismatch2 > r->sites[ord[b - 1]].mismatch2; b--) {
            size_t x = ord[b];
            ord[b] = ord[b - 1];
            ord[b - 1] = x;
        }
    for (size_t i = 0; i < no; i++) {
        const site_sum *ss = &r->sites[ord[i]];
        size_t steps = 0;
        for (size_t u = 0; u < r->nunits; u++)
            steps += r->units[u].have_cmp && r->units[u].cap == ss->cap && !strcmp(r->units[u].site, ss->site);
        site_cell(r, &t, ord[i]);
        rt_n(&t, (double)steps);
        rt_n(&t, sqrt(ss->mismatch2 / ss->cmp_ref2));
        rt_n(&t, share(ss->mismatch2, tot));
        for (int q = 0; q < r->ncmp; q++) rt_n(&t, share(ss->cmp_contrib[q], ss->mismatch2));
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    static const rt_col uc[] = {
        {"site", "site", NULL, NULL}, {"step", "step", "int", NULL},
        {"input_rel_diff", "||Xr - Xt|| / ||Xt||", "%.3g", NULL}, {"code_flips", "codes flipped", "pct", NULL},
        {"scale_flips", "scales flipped", "pct", NULL},
        {"amplification", "amplification", "%.3g", "||Qa(Xr) - Qa(Xt)|| / ||Xr - Xt||"},
        {"mismatch_rel", "||D|| / ||ref||", "%.4g", NULL}, {"share_input", "input", "pct", NULL},
        {"share_scale", "scale", "pct", NULL}, {"share_deadzone", "dead zone", "pct", NULL},
        {"share_grid", "grid", "pct", NULL}, {"share_routing", "routing", "pct", NULL}};
    rt_init(&t, "compare", "Per site and step", uc, 7 + (size_t)r->ncmp);
    t.html_rows = 20;
    for (size_t i = 0; i < no; i++) {
        const site_sum *ss = &r->sites[ord[i]];
        for (size_t k = 0; k < r->nunits; k++) {
            const unit *u = &r->units[k];
            if (!u->have_cmp || u->cap != ss->cap || strcmp(u->site, ss->site)) continue;
            site_cell(r, &t, ord[i]);
            rt_n(&t, (double)u->step);
            rt_n(&t, u->cmp.input_rel_diff);
            rt_n(&t, u->cmp.code_flips);
            rt_n(&t, u->cmp.scale_flips);
            rt_n(&t, u->cmp.amplification);
            rt_n(&t, u->cmp.mismatch_rel);
            for (int q = 0; q < r->ncmp; q++) rt_n(&t, share(u->cmp.contrib[q], u->cmp.mismatch2));
        }
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    experts_table(r, pg, tot);
    /* figure: the contributions per site (share of the total mismatch) */
    size_t nb = no < MAX_BARS ? no : MAX_BARS;
    char **labs = xcalloc(nb ? nb : 1, sizeof *labs);
    double *vals = xcalloc((nb ? nb : 1) * FP4S_CMP_COUNT, sizeof *vals);
    for (size_t i = 0; i < nb; i++) {
        char sl[600];
        site_label(r, ord[i], sl, sizeof sl);
        labs[i] = xstrdup(sl);
        for (int q = 0; q < r->ncmp; q++)
            vals[i * (size_t)r->ncmp + (size_t)q] = 100 * share(r->sites[ord[i]].cmp_contrib[q], tot);
    }
    static const char *const cl[] = {"#7f7f7f", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e"};
    const char *names[FP4S_CMP_COUNT];
    for (int q = 0; q < FP4S_CMP_COUNT; q++) names[q] = fp4s_cmp_component_name(q);
    hbars(r, pg, "compare", "Where the rollout/trainer output mismatch comes from, per site",
          "% of the total mismatch ||D||^2 over all sites", nb, labs, vals, (size_t)r->ncmp, names, cl,
          "Each site's part of the total output mismatch, split into the input difference and the rollout's "
          "quantization error components.");
    for (size_t i = 0; i < nb; i++) free(labs[i]);
    free(labs);
    free(vals);
    free(ord);
}

/* ---- 5. remedies ------------------------------------------------------------------------------ */
static void sec_remedies(report *r, text *pg, const rem_pool *rp)
{
    size_t nu = 0;
    for (size_t i = 0; i < r->nunits; i++) nu += r->units[i].have_rem;
    if (!nu) {
        left_out(r, pg, "No site has a weight: the remedies act on the GEMM Y = X W<sup>T</sup>.");
        return;
    }
    tx_add(pg, "<p class=\"note\">As fp4-remedy(1), on %zu (step, site) pairs: each remedy's output error against "
               "the BF16 trainer and the asymmetric-QAT (wfq) trainer, pooled over sites and steps "
               "(sqrt of summed squared errors over summed references), and its price: extra FLOPs priced at the "
               "FP4 rate, extra bytes, and the predicted GEMM time on %s against W4A4 and FP8.</p>\n",
           nu, r->acc->title);
    static const rt_col rc[] = {
        {"remedy", "remedy", NULL, NULL},
        {"out_rel_error", "error vs BF16", "%.4g", "||Y^ - X_t W^T|| / ||X_t W^T||"},
        {"out_rel_error_vs_wfq", "vs wfq", "%.4g", "against the aligned asymmetric-QAT trainer"},
        {"act_rel_error", "act. error", "%.4g", "mean ||X^ - X|| / ||X||"},
        {"flops_fp4_equiv_extra", "+FP4-eq. FLOPs", "pct",
         "extra FLOPs priced at the FP4 rate (a BF16 FLOP costs FP4 rate / BF16 rate) over the W4A4 GEMM's; "
         "fp4-remedy's +FLOPs counts them unpriced"},
        {"bytes_extra", "+bytes", "pct", NULL},
        {"act_extra_bits", "+bits/act", "%.3g", NULL},
        {"time_vs_w4a4", "time / W4A4", "%.3g", NULL}, {"time_vs_fp8", "time / FP8", "%.3g", "below 1: faster than FP8"}};
    rtable t;
    rt_init(&t, "remedies", "Remedies pooled over sites and steps", rc, 9);
    for (size_t q = 0; q < r->nrem; q++) {
        const rem_pool *p = &rp[q];
        rt_s(&t, fp4s_remedy_label(&r->rem[q]));
        rt_n(&t, pool_err(p));
        rt_n(&t, pool_err_wfq(p));
        rt_n(&t, p->n ? p->act_err / (double)p->n : NAN);
        rt_n(&t, pool_flops(p));
        rt_n(&t, p->bytes_base > 0 ? p->bytes_extra / p->bytes_base : NAN);
        rt_n(&t, p->n ? p->act_bits / (double)p->n : NAN);
        rt_n(&t, p->base_secs > 0 ? p->secs / p->base_secs : NAN);
        rt_n(&t, p->fp8_secs > 0 ? p->secs / p->fp8_secs : NAN);
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* every field of every (site, step, remedy): CSV, first rows shown */
    size_t nf;
    const fp4s_remedy_field *fl = fp4s_remedy_fields(&nf);
    rt_col *cols = xcalloc(3 + nf, sizeof *cols);
    cols[0] = (rt_col){"site", "site", NULL, NULL};
    cols[1] = (rt_col){"step", "step", "int", NULL};
    cols[2] = (rt_col){"remedy", "remedy", NULL, NULL};
    for (size_t f = 0; f < nf; f++) cols[3 + f] = (rt_col){fl[f].name, fl[f].name, "%.4g", fl[f].desc};
    /* the HTML shows the first columns only: the CSV has them all */
    rt_init(&t, "remedies-all", "Every site, step and remedy (all fields in the CSV)", cols, 3 + nf);
    t.html_rows = 0;
    for (size_t oi = 0; oi < r->nsites; oi++) {
        size_t s = r->order[oi];
        for (size_t i = 0; i < r->nunits; i++) {
            const unit *u = &r->units[i];
            if (!u->have_rem || u->cap != r->sites[s].cap || strcmp(u->site, r->sites[s].site)) continue;
            for (size_t q = 0; q < r->nrem; q++) {
                site_cell(r, &t, s);
                rt_n(&t, (double)u->step);
                rt_s(&t, fp4s_remedy_label(&r->rem[q]));
                for (size_t f = 0; f < nf; f++) rt_n(&t, fl[f].get(&u->rsite, &u->rres[q]));
            }
        }
    }
    /* CSV only: too wide for the page */
    text sink = {0};
    rt_emit(&t, r->od, "", &sink);
    tx_free(&sink);
    rt_free(&t);
    free(cols);
    tx_add(pg, "<p class=\"tnote\">Every site, step and remedy with all %zu fields of fp4-remedy: "
               "<a href=\"remedies-all.csv\">remedies-all.csv</a></p>\n", nf);
    /* figure: each rollout remedy's error (both trainers) with its extra FLOPs written beside it */
    text d = {0};
    tx_add(&d, "# row remedy error_vs_bf16 error_vs_wfq extra_flops_pct\n");
    size_t nb = 0;
    double emax = 0;
    for (size_t q = 0; q < r->nrem; q++) {
        if (fp4s_remedy_is_trainer(r->rem[q].kind) || !rp[q].n) continue;
        double e = pool_err(&rp[q]), ew = pool_err_wfq(&rp[q]);
        tx_add(&d, "%zu \"%s\"", nb++, fp4s_remedy_label(&r->rem[q]));
        tx_num(&d, e);
        tx_num(&d, ew);
        tx_num(&d, 100 * pool_flops(&rp[q]));
        tx_add(&d, "\n");
        if (e > emax) emax = e;
        if (ew > emax) emax = ew;
    }
    fig f;
    fig_init(&f, "", "remedies", 1000, 160 + 34 * (int)nb);
    const char *df = fig_data(&f, r->od, "data", &d);
    tx_free(&d);
    text *s = &f.script;
    tx_add(s, "set title 'Remedies: the output error they leave, and what they cost'\n"
              "set xlabel 'output error ||Y_{remedy} - Y_{trainer}|| / ||Y_{trainer}||, pooled over sites and steps'\n"
              "set style fill solid 0.85 border -1\nset key bottom right box opaque\nset ytics noenhanced\n"
              "set yrange [%g:-0.7]\nset xrange [0:%g]\nunset grid\nset grid xtics lc rgb '#dddddd'\nplot ",
           (double)nb - 0.3, emax * 1.35 > 0 ? emax * 1.35 : 1);
    tx_str(s, df);
    tx_add(s, " using ($3/2):1:(0):3:($1-0.4):($1):ytic(2) with boxxyerror lc rgb '#1f77b4' title 'vs the BF16 trainer', \\\n"
              "     '' using ($4/2):1:(0):4:($1):($1+0.4) with boxxyerror lc rgb '#ff7f0e' title 'vs the QAT (wfq) trainer', \\\n"
              "     '' using (($3>$4?$3:$4)):1:(sprintf(' %%+.1f%%%% FLOPs', $5)) with labels left font 'Sans,10' notitle\n");
    fig_emit(&f, r->od, pg, "Each rollout remedy's output error against the BF16 and the asymmetric-QAT trainers, "
                            "with its extra FLOPs (at the FP4 rate, over the W4A4 GEMM) written beside it: shorter "
                            "bars for fewer FLOPs is better. bf16-rollout keeps the site in BF16.");
}

/* ---- 6. mismatch ------------------------------------------------------------------------------ */
static void sec_mismatch(report *r, text *pg, const rem_pool *rp)
{
    const report_opts *o = r->o;
    if (!r->nmm) {
        tx_add(pg, "<p class=\"note\">No per-token log-probs or per-step scalars in the captures, and no --trace "
                   "given: nothing to track over steps.</p>\n");
        return;
    }
    tx_add(pg, "<p class=\"note\">As fp4-mismatch(1): the metric per step, the onset (the first of %zu steps in a "
               "row above the baseline of the first %zu steps by the margin %g or %g robust sigmas), the change "
               "point where ln(metric) bends from flat to growing, and the robust trend of ln(metric).</p>\n",
           o->oo.consecutive, o->oo.baseline_steps, o->oo.margin, o->oo.sigma);
    static const rt_col mc[] = {
        {"run", "run", NULL, NULL}, {"source", "source", NULL, NULL}, {"steps", "steps", "int", NULL},
        {"tokens", "tokens", "int", NULL}, {"first", "first value", "%.4g", NULL}, {"last", "last value", "%.4g", NULL},
        {"onset_step", "onset step", "int", NULL}, {"threshold", "threshold", "%.4g", NULL},
        {"changepoint_step", "change point", "int", NULL},
        {"growth_per_step", "growth/step", "%.4g", "exp(rate) after the change point"},
        {"trend_slope", "trend slope", "%.4g", "d ln(metric) / d step"},
        {"trend_lo", "95% lo", "%.4g", NULL}, {"trend_hi", "95% hi", "%.4g", NULL},
        {"doubling_steps", "doubling (steps)", "%.3g", "ln 2 / slope; only when the interval excludes 0"}};
    rtable t;
    char ttl[200];
    snprintf(ttl, sizeof ttl, "Runs: %s", o->metric);
    rt_init(&t, "mismatch", ttl, mc, 14);
    double vmin = INFINITY, vmax = -INFINITY;
    bool nonpos = false;
    for (size_t i = 0; i < r->nmm; i++) {
        const mm_row *m = &r->mmr[i];
        size_t n = m->run->nsteps;
        rt_s(&t, m->run->name);
        rt_s(&t, m->run->source);
        rt_n(&t, (double)n);
        rt_n(&t, (double)m->run->tokens);
        rt_n(&t, n ? m->v[0] : NAN);
        rt_n(&t, n ? m->v[n - 1] : NAN);
        rt_n(&t, m->have_onset && m->onset.found ? (double)m->onset.step : NAN);
        rt_n(&t, m->have_onset ? m->onset.threshold : NAN);
        rt_n(&t, m->have_cp && m->cp.found ? (double)m->cp.step : NAN);
        rt_n(&t, m->have_cp && m->cp.found ? exp(m->cp.rate) : NAN);
        rt_n(&t, m->have_trend ? m->trend.slope : NAN);
        rt_n(&t, m->have_trend ? m->trend.lo : NAN);
        rt_n(&t, m->have_trend ? m->trend.hi : NAN);
        bool sig = m->have_trend && (m->trend.lo > 0 || m->trend.hi < 0);
        rt_n(&t, sig && m->trend.slope > 0 ? log(2) / m->trend.slope : NAN);
        for (size_t j = 0; j < n; j++) {
            if (!isfinite(m->v[j])) continue;
            if (m->v[j] <= 0) nonpos = true;
            else {
                if (m->v[j] < vmin) vmin = m->v[j];
                if (m->v[j] > vmax) vmax = m->v[j];
            }
        }
    }
    rt_emit(&t, r->od, "", pg);
    rt_free(&t);
    /* every metric per step: CSV */
    size_t nm = fp4s_mm_metric_count();
    rt_col *cols = xcalloc(3 + nm, sizeof *cols);
    cols[0] = (rt_col){"run", "run", NULL, NULL};
    cols[1] = (rt_col){"step", "step", "int", NULL};
    cols[2] = (rt_col){"tokens", "tokens", "int", NULL};
    for (size_t k = 0; k < nm; k++)
        cols[3 + k] = (rt_col){fp4s_mm_metric_name(k), fp4s_mm_metric_name(k), "%.4g", fp4s_mm_metric_label(k)};
    rt_init(&t, "mismatch-steps", "", cols, 3 + nm);
    for (size_t i = 0; i < r->nmm; i++) {
        const fp4s_mm_run *run = r->mmr[i].run;
        for (size_t j = 0; j < run->nsteps; j++) {
            rt_s(&t, run->name);
            rt_n(&t, (double)run->steps[j].step);
            rt_n(&t, (double)run->steps[j].tokens);
            for (size_t k = 0; k < nm; k++) rt_n(&t, fp4s_mm_metric_value(&run->steps[j], k));
        }
    }
    text sink = {0};
    rt_emit(&t, r->od, "", &sink);
    tx_free(&sink);
    rt_free(&t);
    free(cols);
    tx_add(pg, "<p class=\"tnote\">Every metric of every step: <a href=\"mismatch-steps.csv\">mismatch-steps.csv</a></p>\n");
    /* the figure, of the runs that have the metric */
    size_t nplot = 0;
    for (size_t i = 0; i < r->nmm; i++) nplot += r->mmr[i].nvalid > 0;
    if (!nplot) return;
    bool logy = !nonpos && isfinite(vmin) && vmax >= 10 * vmin;
    fig f;
    fig_init(&f, "", "mismatch", 1000, 480);
    text *s = &f.script;
    int id = fp4s_mm_metric_lookup(o->metric);
    snprintf(ttl, sizeof ttl, "Rollout vs trainer log-prob mismatch per step: %s", o->metric);
    tx_add(s, "set title ");
    tx_label(s, ttl);
    tx_add(s, "\nset xlabel 'training step'\nset ylabel ");
    tx_label(s, id >= 0 ? fp4s_mm_metric_label((size_t)id) : o->metric);
    tx_add(s, "\nset key top left noenhanced box opaque\n");
    if (logy) tx_add(s, "set logscale y\nset format y '10^{%%L}'\n");
    tx_add(s, "plot ");
    size_t np = 0;
    for (size_t i = 0; i < r->nmm; i++) {
        const mm_row *m = &r->mmr[i];
        if (m->nvalid == 0) continue; /* named in the summary */
        text dd = {0};
        tx_add(&dd, "# step %s\n", o->metric);
        for (size_t j = 0; j < m->run->nsteps; j++) {
            tx_add(&dd, "%lld", (long long)m->run->steps[j].step);
            tx_num(&dd, logy && !(m->v[j] > 0) ? NAN : m->v[j]);
            tx_add(&dd, "\n");
        }
        char ser[32];
        snprintf(ser, sizeof ser, "run%zu", i + 1);
        const char *fn = fig_data(&f, r->od, ser, &dd);
        char fnc[512];
        snprintf(fnc, sizeof fnc, "%s", fn);
        tx_free(&dd);
        const char *col = colors[i % NCOLORS];
        if (np++) tx_add(s, ", \\\n     ");
        tx_str(s, fnc);
        tx_add(s, " using 1:2 with lines lw 2 lc rgb '%s' title ", col);
        tx_plain(s, m->run->name);
        if (m->have_onset && m->onset.found) {
            char key[300];
            snprintf(key, sizeof key, "onset at step %lld", (long long)m->onset.step);
            tx_add(s, ", \\\n     '+' using (%lld):(%.9g) every ::0::0 with points pt 9 ps 2 lc rgb '%s' title ",
                   (long long)m->onset.step, m->onset.value, col);
            tx_plain(s, key);
        }
        if (m->have_cp && m->cp.found) {
            char key[300];
            snprintf(key, sizeof key, "change point at step %lld", (long long)m->cp.step);
            tx_add(s, ", \\\n     '+' using (%lld):(%.9g) every ::0::0 with points pt 6 ps 2.2 lw 2 lc rgb '%s' title ",
                   (long long)m->cp.step, m->v[m->cp.index] > 0 || !logy ? m->v[m->cp.index] : m->cp.level, col);
            tx_plain(s, key);
        }
    }
    tx_add(s, "\n");
    fig_emit(&f, r->od, pg, "The metric per step for every run, with the onset (filled triangle) and the change "
                            "point (circle) of each.");
}

/* ---- the page -------------------------------------------------------------------------------- */
static void write_toc(const report *r, text *pg);

static void header(report *r, text *pg)
{
    const report_opts *o = r->o;
    tx_add(pg, "<h1>");
    if (o->title) html_esc(pg, o->title);
    else tx_add(pg, "What %s does to this run", fp4s_format_name(o->spec.format));
    tx_add(pg, "</h1>\n<p class=\"meta\">Input: ");
    for (size_t c = 0; c < o->ncaptures; c++) {
        if (c) tx_add(pg, ", ");
        tx_add(pg, "<code>");
        html_esc(pg, o->demo ? o->names[c] : o->captures[c]);
        tx_add(pg, "</code>");
    }
    for (size_t t = 0; t < o->ntraces; t++) {
        tx_add(pg, ", trace <code>");
        html_esc(pg, o->traces[t]);
        tx_add(pg, "</code>");
    }
    if (o->demo)
        tx_add(pg, " (made by <code>fp4-capture synth --seed 42 --steps 12 --act-every 3 --onset 8</code>, as "
                   "datasets/synth-moe.h5)");
    char desc[1024];
    fp4s_spec_describe(&o->spec, desc, sizeof desc);
    tx_add(pg, "</p>\n<p class=\"meta\">Quantizer: ");
    html_esc(pg, desc);
    fp4s_spec_describe(&o->wspec, desc, sizeof desc);
    tx_add(pg, "<br>Weights: ");
    html_esc(pg, desc);
    /* what the report takes the rollout's quantizer and the trainer to be, and where each came from:
     * the capture's root attributes (fp4scope-capture(5)), the command line or the defaults */
    if (!o->cap_quant[0] && !o->cap_trainer[0]) {
        tx_add(pg, "</p>\n<p class=\"meta\" id=\"assumed\"><b>Assumed, not recorded:</b> the capture%s %s not say "
                   "which quantizer the rollout used or what the trainer computes. This report takes the rollout's "
                   "quantizer to be <b>", o->ncaptures > 1 ? "s" : "", o->ncaptures > 1 ? "do" : "does");
        html_esc(pg, o->spec.profile);
        tx_add(pg, "</b>, from %s, and the trainer to be <b>%s</b>, from %s: give <code>-f</code>/<code>-p</code> and "
                   "<code>--trainer</code> for your run.", o->quant_src, fp4s_trainer_name(o->trainer), o->trainer_src);
    } else {
        tx_add(pg, "</p>\n<p class=\"meta\" id=\"assumed\"><b>Rollout and trainer:</b> the rollout's quantizer is <b>");
        html_esc(pg, o->spec.profile);
        tx_add(pg, "</b>, from %s", o->quant_src);
        if (!o->quant_recorded && o->cap_quant[0]) {
            tx_add(pg, " (over the capture's ");
            html_esc(pg, o->cap_quant);
            tx_add(pg, ")");
        } else if (!o->quant_recorded) {
            tx_add(pg, " (the capture does not record it)");
        }
        tx_add(pg, ", and the trainer <b>%s</b>, from %s", fp4s_trainer_name(o->trainer), o->trainer_src);
        if (!o->trainer_recorded && o->cap_trainer[0]) {
            tx_add(pg, " (over the capture's ");
            html_esc(pg, o->cap_trainer);
            tx_add(pg, ")");
        } else if (!o->trainer_recorded) {
            tx_add(pg, " (the capture does not record it)");
        }
        tx_add(pg, ".");
    }
    time_t now = time(NULL);
    char ts[64];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    size_t nsteps = 0;
    int64_t last = INT64_MIN;
    for (size_t i = 0; i < r->nunits; i++)
        if (r->units[i].step != last) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++) seen = r->units[j].step == r->units[i].step && r->units[j].cap == r->units[i].cap;
            nsteps += !seen;
        }
    tx_add(pg, "</p>\n<p class=\"meta\">%zu sites, %zu (step, site) pairs, %zu activation steps. Written %s by "
               "fp4scope %s: <code>",
           r->nsites, r->nunits, nsteps, ts, fp4s_version());
    html_esc(pg, o->cmdline);
    tx_add(pg, "</code></p>\n");
    if (r->nleft) {
        tx_add(pg, "<p class=\"meta\"><b>Left out</b> (K is not a multiple of the block size %u):", o->spec.block);
        for (size_t i = 0; i < r->nleft; i++) {
            tx_add(pg, "%s <code>", i ? "," : "");
            html_esc(pg, r->left[i]);
            tx_add(pg, "</code>");
        }
        tx_add(pg, ".</p>\n");
    }
    write_toc(r, pg);
}

static void sec_drill(report *r, text *pg, const rem_pool *rp)
{
    size_t nd = r->o->drill < r->nsites ? r->o->drill : r->nsites;
    if (!nd) return;
    tx_add(pg, "<p class=\"note\">Site &rarr; channel &rarr; "
               "block: each site's page has its steps and channels, each channel's page its worst blocks, each "
               "block's page its elements.</p>\n<ul>\n");
    for (size_t i = 0; i < nd; i++) {
        size_t s = r->order[i];
        char lab[600];
        site_label(r, s, lab, sizeof lab);
        tx_add(pg, "<li><a href=\"");
        html_esc(pg, drill_href(r, s));
        tx_add(pg, "\">");
        html_esc(pg, lab);
        tx_add(pg, "</a></li>\n");
    }
    tx_add(pg, "</ul>\n");
}

/* ---- the sections as rows -------------------------------------------------------------
 * The main page is these rows, in order: the table of contents, the numbers
 * of the headings and the progress lines ("[k/N]") come from them. A row's
 * analysis (NULL: it reads another row's) runs at its stage, stages in
 * order, before any page is written: the decomposition, comparison and
 * remedies of every unit first (the channels and the profiles read its
 * sites), the summary's ranking and advice after the sites are pooled. A new section is one row and its write function (and, with an
 * analysis of its own, that function at the next stage). */
typedef struct rsection {
    const char *id;          /* its anchor */
    const char *toc;         /* its entry in the table of contents */
    const char *title;       /* its heading (NULL: the row writes its own) */
    bool numbered;           /* "N. " before the title and the entry */
    int stage;               /* when its analysis runs (1, 2, ...; 0: none) */
    void (*analyze)(report *r);
    bool (*present)(const report *r); /* NULL: always on the page */
    void (*write)(report *r, text *pg, const rem_pool *rp);
} rsection;

static bool has_drill(const report *r) { return r->o->drill && r->nsites; }

static const rsection sections[] = {
    {"summary", "Summary", NULL, false, 3, analyze_advice, NULL, write_summary},
    {"profiles", "Profiles", "Do the engines quantize alike? Profile disagreement per site", true, 3,
     analyze_disagreement, NULL, sec_profiles},
    {"decomposition", "Decomposition", "What the error is made of: the decomposition per site and step", true, 1,
     analyze_units, NULL, sec_decomp},
    {"channels", "Channels", "Which channels carry the error", true, 2, analyze_sites, NULL, sec_channels},
    {"compare", "Rollout vs trainer", "Why the rollout and the trainer disagree", true, 0, NULL, NULL, sec_compare},
    {"remedies", "Remedies", "Which fix works, at what cost", true, 0, NULL, NULL, sec_remedies},
    {"mismatch", "Mismatch over steps", "The symptom: log-prob mismatch over training steps", true, 4,
     analyze_mismatch, NULL, sec_mismatch},
    {"drill", "Drill-down", "Drill-down: the worst sites", false, 0, NULL, has_drill, sec_drill},
};
#define NSECTIONS (sizeof sections / sizeof sections[0])

static void write_toc(const report *r, text *pg)
{
    tx_add(pg, "<nav class=\"toc\">");
    int num = 0;
    for (size_t i = 0; i < NSECTIONS; i++) {
        const rsection *s = &sections[i];
        if (s->present && !s->present(r)) continue;
        tx_add(pg, "<a href=\"#%s\">", s->id);
        if (s->numbered) tx_add(pg, "%d. ", ++num);
        tx_add(pg, "%s</a>", s->toc);
    }
    tx_add(pg, "</nav>\n");
}

void report_analyze(report *r)
{
    int last = 0;
    for (size_t i = 0; i < NSECTIONS; i++)
        if (sections[i].stage > last) last = sections[i].stage;
    r->nstages = last + 1; /* and the writing */
    for (int st = 1; st <= last; st++)
        for (size_t i = 0; i < NSECTIONS; i++)
            if (sections[i].stage == st && sections[i].analyze) {
                r->stage = st;
                sections[i].analyze(r);
            }
}

void write_index(report *r)
{
    r->stage = r->nstages;
    rep_step(r, "writing the report");
    rem_pool *rp = pool_remedies(r);
    text pg = {0};
    char title[512];
    snprintf(title, sizeof title, "fp4-report: %s", r->o->title ? r->o->title : r->o->names[0]);
    html_begin(&pg, title, "");
    header(r, &pg);
    int num = 0;
    for (size_t i = 0; i < NSECTIONS; i++) {
        const rsection *s = &sections[i];
        if (s->present && !s->present(r)) continue;
        if (s->title && s->numbered) tx_add(&pg, "<h2 id=\"%s\">%d. %s</h2>\n", s->id, ++num, s->title);
        else if (s->title) tx_add(&pg, "<h2 id=\"%s\">%s</h2>\n", s->id, s->title);
        s->write(r, &pg, rp);
    }
    html_end(&pg);
    od_write(r->od, "index.html", pg.p, pg.n);
    tx_free(&pg);
    free(rp);
}
