/* fp4-report: what the numbers say (the summary at the top of the page), and
 * the helpers the page's sections share: site labels, shares, the channels
 * that hold a share of the error, the remedies pooled over sites and steps. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void site_label(const report *r, size_t s, char *buf, size_t n)
{
    if (r->o->ncaptures > 1) snprintf(buf, n, "%s: %s", r->o->names[r->sites[s].cap], r->sites[s].site);
    else snprintf(buf, n, "%s", r->sites[s].site);
}

double share(double a, double tot) { return tot > 0 ? a / tot : NAN; }

/* the first rank k whose top-k channels hold `frac` of the error energy */
size_t channels_for(const fp4s_channels_report *c, double frac)
{
    if (!c || !(c->energy_total > 0)) return 0;
    double cum = 0;
    for (size_t i = 0; i < c->k; i++) {
        if (isfinite(c->ch[i].energy_total)) cum += c->ch[i].energy_total;
        if (cum >= frac * c->energy_total) return i + 1;
    }
    return c->k;
}

double top_share(const fp4s_channels_report *c, size_t kk)
{
    if (!c || !(c->energy_total > 0)) return NAN;
    double cum = 0;
    for (size_t i = 0; i < kk && i < c->k; i++)
        if (isfinite(c->ch[i].energy_total)) cum += c->ch[i].energy_total;
    return cum / c->energy_total;
}

void site_cell(report *r, rtable *t, size_t s)
{
    char lab[600];
    site_label(r, s, lab, sizeof lab);
    rt_link(t, lab, drill_href(r, s));
}

/* ---- pooled remedy results ----------------------------------------------------------------- */

rem_pool *pool_remedies(const report *r)
{
    rem_pool *p = xcalloc(r->nrem ? r->nrem : 1, sizeof *p);
    for (size_t i = 0; i < r->nunits; i++) {
        const unit *u = &r->units[i];
        if (!u->have_rem) continue;
        for (size_t q = 0; q < r->nrem; q++) {
            const fp4s_remedy_result *x = &u->rres[q];
            rem_pool *o = &p[q];
            o->err2_bf16 += x->err2_bf16;
            o->ref2_bf16 += u->rsite.ref2_bf16;
            o->err2_wfq += x->err2_wfq;
            o->ref2_wfq += x->ref2_wfq;
            o->err2_own += x->err2_own;
            o->ref2_own += fp4s_remedy_is_trainer(x->remedy.kind) ? u->rsite.ref2_bf16 : u->rsite.ref2_own;
            o->flops_base += x->cost.flops_base;
            o->flops_extra += x->cost.flops_extra;
            o->flops_eq += x->time.flops_fp4_equiv_extra;
            o->bytes_base += x->cost.bytes_base;
            o->bytes_extra += x->cost.bytes_extra;
            o->secs += x->time.seconds;
            o->base_secs += x->time.base_seconds;
            o->fp8_secs += x->time.fp8_seconds;
            o->bf16_secs += x->time.bf16_seconds;
            o->act_err += x->act_rel_error;
            o->act_bits += x->cost.act_extra_bits;
            o->n++;
        }
    }
    return p;
}

double pool_err(const rem_pool *p) { return p->ref2_bf16 > 0 ? sqrt(p->err2_bf16 / p->ref2_bf16) : NAN; }
double pool_err_wfq(const rem_pool *p) { return p->ref2_wfq > 0 ? sqrt(p->err2_wfq / p->ref2_wfq) : NAN; }
double pool_flops(const rem_pool *p) { return p->flops_base > 0 ? p->flops_eq / p->flops_base : NAN; }

void agreement_of(const report *r, agreement *a)
{
    const report_opts *o = r->o;
    memset(a, 0, sizeof *a);
    a->worst = (size_t)-1;
    if (o->trainer == FP4S_TRAINER_BF16) {
        a->status = AGREE_BF16;
        return;
    }
    if (!o->trainer_profile) {
        a->status = AGREE_UNKNOWN;
        return;
    }
    fp4s_spec tp;
    if (fp4s_spec_profile(&tp, o->spec.format, o->trainer_profile)) cli_fail(FP4S_EINVAL);
    const fp4s_profile_info *ti = fp4s_profile_find(o->trainer_profile), *ri = fp4s_profile_find(o->spec.profile);
    const char *tn = ti && ti->alias_of ? ti->alias_of : o->trainer_profile;
    const char *rn = ri && ri->alias_of ? ri->alias_of : o->spec.profile;
    if (!strcmp(tn, rn)) {
        a->status = AGREE_SAME;
        return;
    }
    if (tp.rht != o->spec.rht) {
        a->status = AGREE_TRANSFORM;
        a->rotated = tp.rht ? o->trainer_profile : o->spec.profile;
        a->plain = tp.rht ? o->spec.profile : o->trainer_profile;
        return;
    }
    a->status = AGREE_COMPARED;
    uint64_t n[2] = {0}, d[2] = {0}, b[2] = {0}, bd[2] = {0};
    double wf = -1;
    for (size_t i = 0; i < r->ndis; i++) {
        const disagree *x = &r->dis[i];
        if (strcmp(x->profile, o->trainer_profile)) continue;
        int t = !strcmp(x->tensor, "weight");
        n[t] += x->n;
        d[t] += x->differ;
        b[t] += x->blocks;
        bd[t] += x->blocks_differ;
        double f = x->n ? (double)x->differ / (double)x->n : 0;
        if (x->differ && f > wf) {
            wf = f;
            a->worst = x->site;
        }
    }
    for (int t = 0; t < 2; t++) {
        a->differ[t] = d[t];
        a->frac[t] = n[t] ? (double)d[t] / (double)n[t] : NAN;
        a->bfrac[t] = b[t] ? (double)bd[t] / (double)b[t] : NAN;
    }
}

/* ---- the summary ----------------------------------------------------------------------------- */
/* What to do, site by site: the sites that hold 80% of the mismatch (at most 5). */
static void write_advice(report *r, text *pg)
{
    const report_opts *o = r->o;
    tx_add(pg, "<li>What to do (target: %s; times on %s from the GEMM time model):<ul>\n", r->target_src,
           r->acc ? r->acc->title : o->accel);
    double cum = 0;
    for (size_t i = 0; i < r->nsites && i < 5 && cum < 0.8; i++) {
        size_t s = r->order[i];
        const site_advice *x = &r->adv[s];
        if (!x->have) continue;
        cum += x->share;
        char lab[600], what[300];
        site_label(r, s, lab, sizeof lab);
        advice_label(r, s, what, sizeof what);
        tx_add(pg, "<li><b>");
        html_esc(pg, lab);
        tx_add(pg, "</b> (%.1f%% of the mismatch, error %.3g, target %.3g): <b>", 100 * x->share, x->rel, x->target);
        html_esc(pg, what);
        tx_add(pg, "</b>");
        switch (x->adv.kind) {
        case FP4S_ADVICE_KEEP: break;
        case FP4S_ADVICE_REMEDY:
            tx_add(pg, ": error %.3g, %.2fx the time of W4A4, %.2fx FP8's", x->adv.err, x->adv.vs_w4a4, x->adv.vs_fp8);
            break;
        case FP4S_ADVICE_FP8:
            tx_add(pg, ": no FP4 fix of the list reaches the target faster than FP8%s; FP8 gives %.3g",
                   x->adv.slower_than_fp8 ? " (some reach it, but slower than FP8)" : "", x->fp8_err);
            break;
        case FP4S_ADVICE_BF16: tx_add(pg, ": FP8 (%.3g) is not under the target either", x->fp8_err); break;
        }
        tx_add(pg, ". %s: ", fp4s_error_source_name(x->dominant));
        html_esc(pg, fp4s_error_source_advice(x->dominant));
        tx_add(pg, " (each cause alone: activation %.3g, weight %.3g, input %.3g).</li>\n", x->act_only,
               x->weight_only, x->input);
    }
    tx_add(pg, "</ul></li>\n");
    /* the advice as an engine's configuration (fp4-report.json: summary.deploy) */
    json_t *sj = json_object();
    write_summary_json(r, sj);
    json_t *dep = json_object_get(json_object_get(sj, "summary"), "deploy");
    json_t *cfg = json_object_get(dep, "modelopt_hf_quant_config");
    if (json_is_object(cfg)) {
        char *t = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        tx_add(pg, "<li>As a ModelOpt NVFP4 checkpoint's <code>hf_quant_config.json</code> (what vLLM reads; the "
                   "layers in FP8 or kept in BF16 must be stored so; merge it with the layers not captured):<pre>");
        html_esc(pg, t ? t : "");
        tx_add(pg, "</pre></li>\n");
        free(t);
    }
    json_decref(sj);
}

/* Trainer vs rollout quantizer agreement, for the pair the run has (issue: a
 * headline "engines disagree" over every profile was noise; the engines
 * against each other are section 1's). */
static void write_agreement(report *r, text *pg)
{
    const report_opts *o = r->o;
    agreement a;
    agreement_of(r, &a);
    tx_add(pg, "<li>Trainer vs rollout quantizer agreement: ");
    switch (a.status) {
    case AGREE_BF16:
        tx_add(pg, "the trainer is <b>bf16</b>, which quantizes nothing: no quantizer pair to compare (the weight "
                   "and activation errors of the rollout are the shares above).");
        break;
    case AGREE_UNKNOWN:
        tx_add(pg, "not checked: the capture does not name the trainer's quantizer; <code>--trainer-profile P</code> "
                   "compares it with the rollout's <b>");
        html_esc(pg, o->spec.profile);
        tx_add(pg, "</b>.");
        break;
    case AGREE_SAME:
        tx_add(pg, "the trainer's and the rollout's quantizers are the same profile, <b>");
        html_esc(pg, o->spec.profile);
        tx_add(pg, "</b>: they agree on every value.");
        break;
    case AGREE_TRANSFORM:
        tx_add(pg, "<b>");
        html_esc(pg, a.rotated);
        tx_add(pg, "</b> applies a random Hadamard transform before quantizing and <b>");
        html_esc(pg, a.plain);
        tx_add(pg, "</b> does not: their codes are of different values, so they are not compared value by value; "
                   "compare them on the output (fp4-remedy with and without rht).");
        break;
    case AGREE_COMPARED:
        tx_add(pg, "the trainer's <b>");
        html_esc(pg, o->trainer_profile);
        tx_add(pg, "</b> and the rollout's <b>");
        html_esc(pg, o->spec.profile);
        if (a.differ[0] + a.differ[1] == 0) {
            tx_add(pg, "</b> quantize every value alike (activations and weights, first step of each site).");
            break;
        }
        tx_add(pg, "</b> quantize %.3g%% of the activation values and %.3g%% of the weight values differently (first "
                   "step of each site; %.3g%% and %.3g%% of the blocks)", 100 * a.frac[0], 100 * a.frac[1],
               100 * a.bfrac[0], 100 * a.bfrac[1]);
        if (a.worst != (size_t)-1) {
            char sl[600];
            site_label(r, a.worst, sl, sizeof sl);
            tx_add(pg, ", most at ");
            html_esc(pg, sl);
        }
        tx_add(pg, ".");
        break;
    }
    tx_add(pg, "</li>\n");
}

void write_summary(report *r, text *pg, const rem_pool *rp)
{
    const report_opts *o = r->o;
    tx_add(pg, "<div class=\"summary\" id=\"summary\"><h2 style=\"border:0;margin-top:8px\">What the numbers say</h2>\n<ul>\n");
    size_t w = r->order[0];
    const site_sum *ws = &r->sites[w];
    char lab[600];
    site_label(r, w, lab, sizeof lab);
    double tot = ws->err2;
    if (r->by_share) {
        const site_advice *x = &r->adv[w];
        tx_add(pg, "<li>The largest share of the output mismatch against the <b>%s trainer</b> (%s) is at <b>",
               fp4s_trainer_name(o->trainer), o->trainer_src);
        html_esc(pg, lab);
        tx_add(pg, "</b>: %.1f%% of it, relative output error %.3g with naive W4A4", 100 * x->share, x->rel);
        size_t big = w; /* the largest relative error, beside the share */
        for (size_t s = 0; s < r->nsites; s++)
            if (r->adv[s].have && r->adv[s].rel > r->adv[big].rel) big = s;
        if (big != w) {
            char bl[600];
            site_label(r, big, bl, sizeof bl);
            tx_add(pg, " (the largest relative error, %.3g, is at ", r->adv[big].rel);
            html_esc(pg, bl);
            tx_add(pg, ", with %.1f%% of the mismatch)", 100 * r->adv[big].share);
        }
        tx_add(pg, ". Its %s error (activations) is %.0f%% scale bias, %.0f%% dead zone and %.0f%% grid noise, "
                   "cross terms %+.0f%%.</li>\n", fp4s_format_name(o->spec.format), 100 * share(ws->e_scale, tot),
               100 * share(ws->e_dz, tot), 100 * share(ws->e_grid, tot), 100 * share(ws->e_cross, tot));
        write_advice(r, pg);
    } else {
        tx_add(pg, "<li>The largest %s error is at <b>", fp4s_format_name(o->spec.format));
        html_esc(pg, lab);
        tx_add(pg, "</b>: relative error %.3g (SNR %.1f dB) over %zu step%s. Its error energy is %.0f%% scale bias, "
                   "%.0f%% dead zone and %.0f%% grid noise, and the cross terms %+.0f%%%s.</li>\n",
               ws->x2 > 0 ? sqrt(ws->err2 / ws->x2) : NAN, ws->err2 > 0 ? 10 * log10(ws->x2 / ws->err2) : NAN,
               ws->nunits, ws->nunits == 1 ? "" : "s", 100 * share(ws->e_scale, tot), 100 * share(ws->e_dz, tot),
               100 * share(ws->e_grid, tot), 100 * share(ws->e_cross, tot),
               share(ws->e_cross, tot) < -0.05 ? " (negative: the scale bias partly cancels the dead-zone and grid "
                                                 "errors, so the three parts add up to more than 100%)"
                                               : "");
    }
    write_agreement(r, pg);
    const fp4s_channels_report *c = ws->ch;
    if (c && c->k) {
        size_t k1 = (c->k + 99) / 100, k8 = (c->k + 7) / 8;
        tx_add(pg, "<li>On that site, the top %zu of %zu channels (1%%) hold %.0f%% of the activation error energy, "
                   "the top %zu (12.5%%) hold %.0f%%; half of it sits in %zu channels.</li>\n",
               k1, c->k, 100 * top_share(c, k1), k8, 100 * top_share(c, k8), channels_for(c, 0.5));
    }
    double m2 = 0, ct[FP4S_CMP_COUNT] = {0};
    for (size_t s = 0; s < r->nsites; s++) {
        m2 += r->sites[s].mismatch2;
        for (int q = 0; q < FP4S_CMP_COUNT; q++) ct[q] += r->sites[s].cmp_contrib[q];
    }
    if (m2 > 0) {
        int best = 0;
        for (int q = 1; q < FP4S_CMP_COUNT; q++)
            if (ct[q] > ct[best]) best = q;
        tx_add(pg, "<li>Rollout vs trainer: of the output mismatch against the asymmetric-QAT trainer, %.0f%% comes "
                   "from the input difference, %.0f%% from scale bias, %.0f%% from the dead zone and %.0f%% from grid "
                   "noise; the largest part is <b>%s</b>.</li>\n",
               100 * ct[0] / m2, 100 * ct[1] / m2, 100 * ct[2] / m2, 100 * ct[3] / m2, fp4s_cmp_component_name(best));
    }
    if (rp && r->nrem) {
        size_t none = (size_t)-1, best = (size_t)-1, cheap = (size_t)-1;
        for (size_t q = 0; q < r->nrem; q++)
            if (rp[q].n && fp4s_remedy_is_plain(&r->rem[q])) none = q;
        for (size_t q = 0; q < r->nrem; q++) {
            if (!rp[q].n || fp4s_remedy_is_trainer(r->rem[q].kind) || r->rem[q].kind == FP4S_RK_BF16_ROLLOUT ||
                q == none)
                continue;
            if (best == (size_t)-1 || pool_err(&rp[q]) < pool_err(&rp[best])) best = q;
            if (none != (size_t)-1 && pool_err(&rp[q]) <= 0.5 * pool_err(&rp[none]) &&
                (cheap == (size_t)-1 || rp[q].secs < rp[cheap].secs))
                cheap = q;
        }
        if (best != (size_t)-1) {
            tx_add(pg, "<li>Remedies: ");
            if (none != (size_t)-1) tx_add(pg, "naive W4A4 leaves an output error of %.3g against the BF16 trainer. ",
                                           pool_err(&rp[none]));
            tx_add(pg, "The lowest is <b>");
            html_esc(pg, fp4s_remedy_label(&r->rem[best]));
            tx_add(pg, "</b> (%.3g, %.2fx the time of W4A4, %.2fx FP8's)", pool_err(&rp[best]),
                   rp[best].base_secs > 0 ? rp[best].secs / rp[best].base_secs : NAN,
                   rp[best].fp8_secs > 0 ? rp[best].secs / rp[best].fp8_secs : NAN);
            if (cheap == best) {
                tx_add(pg, ", also the cheapest that halves naive's error");
            } else if (cheap != (size_t)-1) {
                tx_add(pg, "; the cheapest that halves naive's error is <b>");
                html_esc(pg, fp4s_remedy_label(&r->rem[cheap]));
                tx_add(pg, "</b> (%.3g, %.2fx W4A4, %.2fx FP8)", pool_err(&rp[cheap]),
                       rp[cheap].base_secs > 0 ? rp[cheap].secs / rp[cheap].base_secs : NAN,
                       rp[cheap].fp8_secs > 0 ? rp[cheap].secs / rp[cheap].fp8_secs : NAN);
            } else if (none != (size_t)-1) {
                tx_add(pg, "; none of them halves naive's error");
            }
            tx_add(pg, ".</li>\n");
        }
    }
    for (size_t i = 0; i < r->nmm; i++) {
        const mm_row *m = &r->mmr[i];
        tx_add(pg, "<li>Log-prob mismatch of run <b>");
        html_esc(pg, m->run->name);
        tx_add(pg, "</b> (");
        html_esc(pg, o->metric);
        tx_add(pg, ", %zu steps): ", m->run->nsteps);
        if (m->nvalid == 0) {
            tx_add(pg, "it has no value of this metric");
            if (m->other >= 0) {
                tx_add(pg, " (a per-step log of other metrics: give --metric, e.g. <code>");
                html_esc(pg, fp4s_mm_metric_name((size_t)m->other));
                tx_add(pg, "</code>)");
            }
            tx_add(pg, ".</li>\n");
            continue;
        }
        if (m->have_onset && m->onset.found)
            tx_add(pg, "onset of divergence at step <b>%lld</b> (threshold %.3g)", (long long)m->onset.step,
                   m->onset.threshold);
        else if (m->have_onset)
            tx_add(pg, "no onset (it stays under its threshold %.3g)", m->onset.threshold);
        else
            tx_add(pg, "%zu steps are too few for the onset test (it needs --baseline-steps %zu + --consecutive %zu)",
                   m->run->nsteps, o->oo.baseline_steps, o->oo.consecutive);
        if (m->have_cp && m->cp.found)
            tx_add(pg, "; change point at step <b>%lld</b>, growing %.3gx per step after it", (long long)m->cp.step,
                   exp(m->cp.rate));
        tx_add(pg, ".</li>\n");
    }
    if (r->synthetic)
        tx_add(pg, "<li><b>Synthetic data</b>: the input was made by a generator (fp4-capture synth); the numbers "
                   "show how the analysis reads, not what a real model does.</li>\n");
    tx_add(pg, "</ul></div>\n");
}
