/* fp4-report: what to do about each site. The sites ranked by their share of
 * the output mismatch against the trainer the user has (--trainer), which
 * error dominates each, and the cheapest fix that brings it under the target
 * with its time against W4A4, FP8 and BF16: fp4scope/advise.h on the numbers
 * of the remedies (naive W4A4 is the remedy "none"), pooled over steps. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A remedy result's error energy against the trainer t, and its reference. */
static void err_vs(fp4s_trainer t, const unit *u, const fp4s_remedy_result *x, double *e2, double *r2)
{
    switch (t) {
    case FP4S_TRAINER_WFQ:
        *e2 = x->err2_wfq;
        *r2 = x->ref2_wfq;
        return;
    case FP4S_TRAINER_W4A4:
        *e2 = x->err2_w4a4qat;
        *r2 = x->ref2_w4a4qat;
        return;
    case FP4S_TRAINER_BF16: break;
    }
    *e2 = x->err2_bf16;
    *r2 = u->rsite.ref2_bf16;
}

void analyze_advice(report *r)
{
    const report_opts *o = r->o;
    size_t none = (size_t)-1;
    for (size_t q = 0; q < r->nrem; q++)
        if (fp4s_remedy_is_plain(&r->rem[q])) none = q;
    size_t ns = r->nsites, nq = r->nrem;
    bool any = false;
    for (size_t i = 0; i < r->nunits; i++) any |= r->units[i].have_rem;
    if (!any || none == (size_t)-1) return; /* no weights, or no BLAS: the order stays by relative error */
    site_advice *a = xcalloc(ns, sizeof *a);
    r->adv = a;
    double *e2q = xcalloc(ns * nq, sizeof *e2q), *r2q = xcalloc(ns * nq, sizeof *r2q);
    double *sec = xcalloc(ns * nq * 4, sizeof *sec); /* seconds, base, fp8, bf16 */
    double *f8e = xcalloc(ns, sizeof *f8e), *f8r = xcalloc(ns, sizeof *f8r);
    double *ao = xcalloc(ns, sizeof *ao), *wo = xcalloc(ns, sizeof *wo), *in = xcalloc(ns, sizeof *in);
    double *rw = xcalloc(ns, sizeof *rw), *rin = xcalloc(ns, sizeof *rin);
    for (size_t i = 0; i < r->nunits; i++) {
        const unit *u = &r->units[i];
        if (!u->have_rem) continue;
        size_t s;
        for (s = 0; s < ns; s++)
            if (r->sites[s].cap == u->cap && !strcmp(r->sites[s].site, u->site)) break;
        if (s == ns) continue;
        a[s].have = true;
        for (size_t q = 0; q < nq; q++) {
            double e2, r2;
            err_vs(o->trainer, u, &u->rres[q], &e2, &r2);
            e2q[s * nq + q] += e2;
            r2q[s * nq + q] += r2;
            const fp4s_remedy_time *t = &u->rres[q].time;
            sec[(s * nq + q) * 4 + 0] += t->seconds;
            sec[(s * nq + q) * 4 + 1] += t->base_seconds;
            sec[(s * nq + q) * 4 + 2] += t->fp8_seconds;
            sec[(s * nq + q) * 4 + 3] += t->bf16_seconds;
        }
        if (u->have_fp8) {
            double e2, r2;
            err_vs(o->trainer, u, &u->fp8, &e2, &r2);
            f8e[s] += e2;
            f8r[s] += r2;
        }
        /* each cause alone, weighted by the output's energy */
        double w = u->rsite.ref2_bf16;
        ao[s] += w * u->rsite.act_only_rel_error * u->rsite.act_only_rel_error;
        wo[s] += w * u->rsite.weight_only_rel_error * u->rsite.weight_only_rel_error;
        rw[s] += w;
        if (isfinite(u->rsite.input_rel_diff)) {
            in[s] += w * u->rsite.input_rel_diff * u->rsite.input_rel_diff;
            rin[s] += w;
        }
    }
    double *naive2 = xcalloc(ns, sizeof *naive2);
    for (size_t s = 0; s < ns; s++) {
        site_advice *x = &a[s];
        x->err = xcalloc(nq, sizeof *x->err);
        x->vs_w4a4 = xcalloc(nq, sizeof *x->vs_w4a4);
        x->vs_fp8 = xcalloc(nq, sizeof *x->vs_fp8);
        x->vs_bf16 = xcalloc(nq, sizeof *x->vs_bf16);
        naive2[s] = x->have ? e2q[s * nq + none] : NAN;
        if (!x->have) continue;
        x->err2 = e2q[s * nq + none];
        x->ref2 = r2q[s * nq + none];
        x->rel = x->ref2 > 0 ? sqrt(x->err2 / x->ref2) : NAN;
        for (size_t q = 0; q < nq; q++) {
            const double *t = &sec[(s * nq + q) * 4];
            x->err[q] = r2q[s * nq + q] > 0 ? sqrt(e2q[s * nq + q] / r2q[s * nq + q]) : NAN;
            x->vs_w4a4[q] = t[1] > 0 ? t[0] / t[1] : NAN;
            x->vs_fp8[q] = t[2] > 0 ? t[0] / t[2] : NAN;
            x->vs_bf16[q] = t[3] > 0 ? t[0] / t[3] : NAN;
        }
        x->fp8_err = f8r[s] > 0 ? sqrt(f8e[s] / f8r[s]) : NAN;
        x->act_only = rw[s] > 0 ? sqrt(ao[s] / rw[s]) : NAN;
        x->weight_only = rw[s] > 0 ? sqrt(wo[s] / rw[s]) : NAN;
        x->input = rin[s] > 0 ? sqrt(in[s] / rin[s]) : NAN;
        x->dominant = fp4s_error_dominant(o->trainer, x->act_only, x->weight_only, x->input);
    }
    /* the ranking: share of the output mismatch (sites without remedies last) */
    double *share = xcalloc(ns, sizeof *share);
    size_t *order = xmalloc(ns * sizeof *order);
    if (fp4s_rank_by_share(naive2, ns, order, share)) cli_fail(FP4S_EINTERNAL);
    for (size_t s = 0; s < ns; s++) a[s].share = share[s];
    memcpy(r->order, order, ns * sizeof *order);
    r->by_share = true;
    /* the target: --target (one relative output error for every site), else half of each site's own
     * naive W4A4 error: a fix must at least halve what the site adds to the mismatch */
    r->target = o->target;
    if (!isnan(o->target)) snprintf(r->target_src, sizeof r->target_src, "--target %g", o->target);
    else
        snprintf(r->target_src, sizeof r->target_src, "half of each site's naive W4A4 error (a fix must at least "
                 "halve what the site adds to the mismatch; --target REL sets one for every site)");
    for (size_t s = 0; s < ns; s++) a[s].target = isnan(o->target) ? 0.5 * a[s].rel : o->target;
    fp4s_advice_cand *c = xcalloc(nq, sizeof *c);
    for (size_t s = 0; s < ns; s++) {
        site_advice *x = &a[s];
        if (!x->have || isnan(x->target)) continue;
        size_t n = 0;
        size_t *map = xmalloc(nq * sizeof *map);
        for (size_t q = 0; q < nq; q++) {
            /* the rollout's fixes: not the trainer items, not the layer in BF16 (that is the BF16 advice) */
            if (fp4s_remedy_is_trainer(r->rem[q].kind) || r->rem[q].kind == FP4S_RK_BF16_ROLLOUT) continue;
            memset(&c[n], 0, sizeof c[n]);
            c[n].label = fp4s_remedy_label(&r->rem[q]);
            c[n].err = x->err[q];
            c[n].vs_w4a4 = x->vs_w4a4[q];
            c[n].vs_fp8 = x->vs_fp8[q];
            c[n].vs_bf16 = x->vs_bf16[q];
            c[n].plain = q == none;
            map[n++] = q;
        }
        if (fp4s_advise(c, n, x->target, x->fp8_err, &x->adv)) cli_fail(FP4S_EINTERNAL);
        if (x->adv.cand != (size_t)-1) x->adv.cand = map[x->adv.cand]; /* an index into r->rem from here on */
        free(map);
    }
    free(c);
    free(share);
    free(order);
    free(naive2);
    free(e2q);
    free(r2q);
    free(sec);
    free(f8e);
    free(f8r);
    free(ao);
    free(wo);
    free(in);
    free(rw);
    free(rin);
}

const char *advice_label(const report *r, size_t s, char *buf, size_t n)
{
    const site_advice *x = r->adv ? &r->adv[s] : NULL;
    if (!x || !x->have || isnan(x->target)) {
        snprintf(buf, n, "-");
        return buf;
    }
    switch (x->adv.kind) {
    case FP4S_ADVICE_KEEP: snprintf(buf, n, "keep W4A4 (under the target)"); break;
    case FP4S_ADVICE_REMEDY: snprintf(buf, n, "%s", fp4s_remedy_label(&r->rem[x->adv.cand])); break;
    case FP4S_ADVICE_FP8: snprintf(buf, n, "run this layer in FP8 instead"); break;
    case FP4S_ADVICE_BF16: snprintf(buf, n, "run this layer in BF16 instead"); break;
    }
    return buf;
}

/* The advice as the engines' configurations (checked in vllm-project/vllm,
 * vllm/model_executor/layers/quantization/modelopt.py at 00155cde): a
 * ModelOpt NVFP4 checkpoint's hf_quant_config.json lists the layers left
 * unquantized in "quantization"."exclude_modules" (fnmatch wildcards or
 * module prefixes), config.json's quantization_config in "ignore"; quant_algo
 * MIXED_PRECISION takes "quantized_layers" {layer: {"quant_algo": "FP8" |
 * "NVFP4", ...}}, where a layer missing from the map stays unquantized. */
#define DEPLOY_SOURCE                                                                                           \
    "vllm-project/vllm vllm/model_executor/layers/quantization/modelopt.py at commit 00155cde: hf_quant_config.json " \
    "\"quantization\": {\"quant_algo\", \"exclude_modules\"} and config.json quantization_config {\"quant_method\": " \
    "\"modelopt\", \"quant_algo\", \"ignore\"}; quant_algo MIXED_PRECISION with \"quantized_layers\" (a layer missing " \
    "from it stays unquantized: merge these captured sites into the checkpoint's own map). The site names are used " \
    "as the capture names them: they must be the model's module names."
static json_t *deploy_json(const report *r)
{
    const report_opts *o = r->o;
    json_t *d = json_object(), *bf = json_array(), *f8 = json_array(), *rem = json_object(), *eng = json_object();
    json_t *ql = json_object();
    char lab[600];
    bool nv = o->spec.format == FP4S_NVFP4;
    for (size_t i = 0; r->adv && i < r->nsites; i++) {
        size_t s = r->order[i];
        const site_advice *y = &r->adv[s];
        if (!y->have) continue;
        snprintf(lab, sizeof lab, "%s", r->sites[s].site);
        switch (y->adv.kind) {
        case FP4S_ADVICE_BF16: json_array_append_new(bf, json_string(lab)); break;
        case FP4S_ADVICE_FP8:
            json_array_append_new(f8, json_string(lab));
            json_object_set_new(ql, lab, json_pack("{ss}", "quant_algo", "FP8"));
            break;
        case FP4S_ADVICE_REMEDY:
        case FP4S_ADVICE_KEEP: {
            const fp4s_remedy *m = &r->rem[y->adv.cand];
            if (y->adv.kind == FP4S_ADVICE_REMEDY) json_object_set_new(rem, lab, json_string(fp4s_remedy_label(m)));
            if (nv) json_object_set_new(ql, lab, json_pack("{sssi}", "quant_algo", "NVFP4", "group_size", 16));
            if (y->adv.kind == FP4S_ADVICE_REMEDY && !json_object_get(eng, fp4s_remedy_label(m)))
                json_object_set_new(eng, fp4s_remedy_label(m),
                                    json_string(m->e4over6 || m->rht || m->sr
                                                    ? "an engine recipe option (fp4scope-formats(7) names the engines "
                                                      "whose profiles carry it); not in vLLM's ModelOpt config"
                                                    : "no engine's configuration runs it (a research remedy: QUADS's "
                                                      "rac, the decomposition paper's mbs and of); vLLM's ModelOpt "
                                                      "config has no such option"));
            break;
        }
        }
    }
    json_object_set_new(d, "keep_bf16", bf);
    json_object_set_new(d, "run_fp8", f8);
    json_object_set_new(d, "remedies", rem);
    json_object_set_new(d, "remedy_engines", eng);
    bool mixed = json_array_size(f8) > 0;
    if (nv) {
        json_t *q = json_object();
        json_object_set_new(q, "quant_algo", json_string(mixed ? "MIXED_PRECISION" : "NVFP4"));
        json_object_set(q, "exclude_modules", bf);
        if (mixed) json_object_set(q, "quantized_layers", ql);
        json_object_set_new(d, "modelopt_hf_quant_config", json_pack("{so}", "quantization", q));
        json_t *c = json_object();
        json_object_set_new(c, "quant_method", json_string("modelopt"));
        json_object_set_new(c, "quant_algo", json_string(mixed ? "MIXED_PRECISION" : "NVFP4"));
        json_object_set(c, "ignore", bf);
        if (mixed) json_object_set(c, "quantized_layers", ql);
        json_object_set_new(d, "vllm_quantization_config", c);
    } else {
        json_object_set_new(d, "modelopt_hf_quant_config", json_null());
        json_object_set_new(d, "vllm_quantization_config", json_null());
        json_object_set_new(d, "note", json_string("the ModelOpt configurations are for NVFP4 (vLLM's ModelOpt loader "
                                                   "takes FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, "
                                                   "W4A16_NVFP4, MXFP8 and MIXED_PRECISION, no MXFP4)"));
    }
    json_decref(ql);
    json_object_set_new(d, "source", json_string(DEPLOY_SOURCE));
    return d;
}

void write_summary_json(const report *r, json_t *j)
{
    const report_opts *o = r->o;
    json_t *sm = json_object();
    json_object_set_new(sm, "trainer", json_string(fp4s_trainer_name(o->trainer)));
    json_object_set_new(sm, "trainer_source", json_string(o->trainer_src));
    json_object_set_new(sm, "rollout_profile", json_string(o->spec.profile));
    json_object_set_new(sm, "rollout_quantizer_source", json_string(o->quant_src));
    json_object_set_new(sm, "ranking", json_string(r->by_share ? "share of the output mismatch against the trainer"
                                                               : "relative error (no remedies ran: no shares)"));
    size_t w = r->nsites ? r->order[0] : 0;
    const site_advice *x = r->adv && r->nsites ? &r->adv[w] : NULL;
    char lab[600];
    if (r->nsites) site_label(r, w, lab, sizeof lab);
    json_object_set_new(sm, "mismatch_site", r->nsites ? json_string(lab) : json_null());
    json_object_set_new(sm, "mismatch_share", x ? cli_json_real(x->share) : json_null());
    json_object_set_new(sm, "mismatch_rel_error", x ? cli_json_real(x->rel) : json_null());
    json_object_set_new(sm, "target", cli_json_real(r->target)); /* NaN (null): per site, below */
    json_object_set_new(sm, "target_source", r->adv ? json_string(r->target_src) : json_null());
    json_object_set_new(sm, "accelerator", json_string(r->acc ? r->acc->name : o->accel));
    json_t *recs = json_array();
    for (size_t i = 0; r->adv && i < r->nsites; i++) {
        size_t s = r->order[i];
        const site_advice *y = &r->adv[s];
        if (!y->have) continue;
        json_t *e = json_object();
        site_label(r, s, lab, sizeof lab);
        char what[300];
        advice_label(r, s, what, sizeof what);
        json_object_set_new(e, "site", json_string(lab));
        json_object_set_new(e, "remedy", json_string(y->adv.kind == FP4S_ADVICE_REMEDY || y->adv.kind == FP4S_ADVICE_KEEP
                                                         ? fp4s_remedy_label(&r->rem[y->adv.cand])
                                                         : fp4s_advice_kind_name(y->adv.kind)));
        json_object_set_new(e, "advice", json_string(fp4s_advice_kind_name(y->adv.kind)));
        json_object_set_new(e, "advice_text", json_string(what));
        json_object_set_new(e, "share", cli_json_real(y->share));
        json_object_set_new(e, "target", cli_json_real(y->target));
        json_object_set_new(e, "rel_error", cli_json_real(y->rel));
        json_object_set_new(e, "mismatch_after", cli_json_real(y->adv.kind == FP4S_ADVICE_BF16 &&
                                                               o->trainer == FP4S_TRAINER_BF16 ? 0 : y->adv.err));
        json_object_set_new(e, "time_vs_fp8", cli_json_real(y->adv.vs_fp8));
        json_object_set_new(e, "time_vs_w4a4", cli_json_real(y->adv.vs_w4a4));
        json_object_set_new(e, "time_vs_bf16", cli_json_real(y->adv.vs_bf16));
        json_object_set_new(e, "fp8_error", cli_json_real(y->fp8_err));
        json_object_set_new(e, "dominant", json_string(fp4s_error_source_name(y->dominant)));
        json_object_set_new(e, "dominant_means", json_string(fp4s_error_source_advice(y->dominant)));
        json_object_set_new(e, "act_only_rel_error", cli_json_real(y->act_only));
        json_object_set_new(e, "weight_only_rel_error", cli_json_real(y->weight_only));
        json_object_set_new(e, "input_rel_diff", cli_json_real(y->input));
        json_object_set_new(e, "slower_than_fp8_set_aside", json_integer((json_int_t)y->adv.slower_than_fp8));
        json_array_append_new(recs, e);
    }
    json_object_set_new(sm, "recommendations", recs);
    json_object_set_new(sm, "deploy", deploy_json(r));
    agreement ag;
    agreement_of(r, &ag);
    json_t *qa = json_object();
    json_object_set_new(qa, "rollout_profile", json_string(o->spec.profile));
    json_object_set_new(qa, "trainer_profile", o->trainer_profile ? json_string(o->trainer_profile) : json_null());
    json_object_set_new(qa, "status", json_string(agree_status_name(ag.status)));
    bool cmpd = ag.status == AGREE_COMPARED;
    json_object_set_new(qa, "activation_values_differ", cmpd ? cli_json_real(ag.frac[0]) : json_null());
    json_object_set_new(qa, "weight_values_differ", cmpd ? cli_json_real(ag.frac[1]) : json_null());
    if (cmpd && ag.worst != (size_t)-1) site_label(r, ag.worst, lab, sizeof lab);
    json_object_set_new(qa, "worst_site", cmpd && ag.worst != (size_t)-1 ? json_string(lab) : json_null());
    json_object_set_new(sm, "quantizer_agreement", qa);
    json_object_set_new(j, "summary", sm);
}

const char *agree_status_name(agree_status s)
{
    switch (s) {
    case AGREE_BF16: return "bf16 trainer";
    case AGREE_UNKNOWN: return "unknown";
    case AGREE_SAME: return "same profile";
    case AGREE_TRANSFORM: return "not comparable (one applies a transform)";
    case AGREE_COMPARED: return "compared";
    }
    return "?";
}

void advice_free(report *r)
{
    for (size_t s = 0; r->adv && s < r->nsites; s++) {
        free(r->adv[s].err);
        free(r->adv[s].vs_w4a4);
        free(r->adv[s].vs_fp8);
        free(r->adv[s].vs_bf16);
    }
    free(r->adv);
    r->adv = NULL;
}
