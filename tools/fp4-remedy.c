/* fp4-remedy: apply each remedy of a list to a linear site Y = f(X) W^T (or
 * to every site of a capture) and report the error it leaves against the
 * trainer's references, its cost, and a plan within an extra-FLOP budget
 * (man/fp4-remedy.1). */
#include "cli.h"
#include "suggest.h"
#include "par.h"
#include "remedy/table.h"

#include <fp4scope/advise.h>
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

#define DEFAULT_LIST "bf16,wfq,w4a4qat,none,rac:0.125,rac:0.25,rac:0.5,rac:1,rac:0.25:bf16,rac:0.25:aug," \
                     "rac-rand:0.25,mbs:128,of:0.5,of:1,keep:1,mbs:128+of:0.5"
#define PLAN_LIST "none,bf16-rollout,rac:0.125,rac:0.25,rac:0.5,rac:1,rac:0.125:bf16,rac:0.25:bf16,mbs:128," \
                  "of:0.5,keep:1,mbs:128+of:0.5"

static void usage_text(void)
{
    printf(
        "Usage: fp4-remedy [OPTION]... --act X --weight W [--trainer-act XT]\n"
        "       fp4-remedy [OPTION]... CAPTURE.h5 [--sites GLOB] [--steps LIST] [--plan BUDGET]\n"
        "Apply each remedy of a list to the linear site Y = f(X) W^T and report the\n"
        "output error it leaves against the trainer (X_t W^T, X_t Qw(W)^T, Qa(X_t) Qw(W)^T),\n"
        "the activation error before and after, extra bits, FLOPs and bytes, and the\n"
        "predicted GEMM time against FP8 and BF16 on an accelerator.\n"
        "\n"
        "X, XT and W are file.npy, file.safetensors:NAME or file.h5:/dataset.\n"
        "\n"
        "Quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        CLI_HELP_WEIGHT_2D
        "      --act X           rollout activations [M, K]\n"
        "      --trainer-act XT  trainer activations [M, K] (default: X)\n"
        "      --weight W        weight [N, K]\n"
        "  -r, --remedy LIST     remedies (default: " DEFAULT_LIST ";\n"
        "                        with --plan: " PLAN_LIST ")\n"
        "      --list-remedies   the remedy grammar\n"
        "      --select S        rac channel selection: tensor (default) or tile:ROWS\n"
        "      --rac-order O     order of the compacted residual: index (default) or rank\n"
        "      --operands O      what mbs, of, keep, 4over6 and sr modify: both (default), act, weight\n"
        "      --sr-seeds N      seeds the bias of sr is averaged over (default 8)\n"
        CLI_HELP_STRICT
        "      --accel NAME      cost model: b200 (default), b300, gb300, h100, h200, mi355x\n"
        "      --list-accels     the accelerator profiles and their sources\n"
        CLI_HELP_DZ_TIE
        "      --no-decompose    skip the activation decompositions (faster)\n"
        CLI_HELP_SELECT
        "      --plan BUDGET     choose a remedy per site within BUDGET extra FLOPs, a fraction\n"
        "                        of the W4A4 FLOPs priced at the FP4 rate (e.g. 0.1)\n"
        "      --trainer T       the plan's trainer: bf16 (default; a trainer in BF16), wfq\n"
        "                        (asymmetric QAT) or w4a4 (symmetric QAT); --plan-ref R is\n"
        "                        the same (bf16, wfq, w4a4qat)\n"
        "      --logits          (CAPTURE) the LM head under each rollout remedy: per-token\n"
        "                        log-probs against the trainer's and fp4-mismatch's metrics\n"
        "      --logits-trainer T  the trainer of --logits: wfq (default), bf16 or w4a4qat\n"
        "      --lm-head SITE    the site of the final hidden states (default: the capture's\n"
        "                        lm_head_site attribute, else lm_head)\n"
        "      --json            JSON on stdout\n"
        "      --csv             CSV on stdout\n"
        "  -o, --output FILE     also write the results: FILE.json as JSON, else HDF5\n"
        "      --force           replace an existing HDF5 output (the man page, FILES)\n"
        "      --quiet           no progress line on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        CLI_HELP_GEMM
        "      --device DEV      where the GEMMs and rac's kernels run: cpu (default),\n"
        "                        cuda (cuBLAS, FP32 accumulation) or auto; list: what\n"
        "                        this build and machine can do\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 2 usage, 3 input missing, unreadable or malformed (shape\n"
        "mismatch, no site), 4 output not written, 5 internal error.\n");
}

/* --list-remedies: the grammar's summary, from the library's rows */
static void grammar_text(void)
{
    size_t n = fp4s_remedy_help(NULL, 0) + 1;
    char *t = xmalloc(n);
    fp4s_remedy_help(t, n);
    fputs(t, stdout);
    free(t);
}

enum {
    OPT_FIRST_ = 256, OPT_LISTREM, OPT_SELECT, OPT_ORDER,
    OPT_OPERANDS, OPT_ACCEL, OPT_LISTACC, OPT_NODEC, OPT_PLAN, OPT_PLANREF,
    OPT_LOGITS, OPT_LTRAINER, OPT_LMHEAD, OPT_SRSEEDS
};


static fp4s_remedy_result *eval_unit(const fp4s_remedy *rem, size_t nr, const fp4s_spec *as, const fp4s_spec *ws,
                                     const fp4s_remedy_eval_opts *eo, const fp4s_unit *u, fp4s_remedy_site *info)
{
    fp4s_unit_data d;
    int rc = fp4s_unit_read(u, &d);
    if (rc) cli_fail(rc);
    fp4s_remedy_result *res = xcalloc(nr, sizeof *res);
    rc = fp4s_remedy_eval(rem, nr, as, ws, d.x, d.xt, d.m, d.w, d.n, d.k, eo, info, res);
    if (rc) cli_failf(rc, "%s", u->x);
    fp4s_unit_data_free(&d);
    return res;
}

/* ---- output ------------------------------------------------------------------------- */
static void fmtv(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v)) snprintf(b, n, f, v);
    else snprintf(b, n, "%s", isnan(v) ? "-" : (v > 0 ? "inf" : "-inf"));
}

static json_t *row_json(const site_run *s, const fp4s_remedy_result *r, const fp4s_accel *acc)
{
    json_t *o = json_object();
    char canon[256];
    fp4s_remedy_describe(&r->remedy, canon, sizeof canon);
    json_object_set_new(o, "remedy", json_string(fp4s_remedy_label(&r->remedy)));
    json_object_set_new(o, "canonical", json_string(canon));
    json_object_set_new(o, "side", json_string(fp4s_remedy_is_trainer(r->remedy.kind) ? "trainer" : "rollout"));
    json_object_set_new(o, "source", json_string(s->label));
    json_object_set_new(o, "site", s->site ? json_string(s->site) : json_null());
    json_object_set_new(o, "step", s->step >= 0 ? json_integer(s->step) : json_null());
    json_object_set_new(o, "synthetic", json_boolean(s->synthetic));
    json_object_set_new(o, "trainer_activations", json_boolean(s->info.have_trainer));
    size_t nf;
    const fp4s_remedy_field *f = fp4s_remedy_fields(&nf);
    for (size_t i = 0; i < nf; i++) json_object_set_new(o, f[i].name, cli_json_real(f[i].get(&s->info, r)));
    json_object_set_new(o, "accelerator", json_string(acc->name));
    json_object_set_new(o, "fp4_emulated", json_boolean(r->time.fp4_emulated));
    json_t *ch = json_array();
    for (size_t i = 0; i < r->nchannels; i++) json_array_append_new(ch, json_integer((json_int_t)r->channels[i]));
    json_object_set_new(o, "rac_set", r->channels ? ch : (json_decref(ch), json_null()));
    json_object_set_new(o, "act_before", cli_decomp_json(&r->act_before, NULL));
    json_object_set_new(o, "act_after", cli_decomp_json(&r->act_after, NULL));
    return o;
}

/* ---- plan ---------------------------------------------------------------------------- */
typedef struct plan_site {
    const char *site;
    double base;                  /* pooled over steps */
    double *err2, *ref2, *cost;   /* per candidate */
    size_t **counts;              /* rac: how often each channel was chosen, per candidate */
    size_t k;
} plan_site;

static int cmp_count_desc(const void *a, const void *b, void *arg)
{
    const size_t *cnt = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (cnt[x] != cnt[y]) return cnt[x] > cnt[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static int run_plan(site_run *runs, size_t nruns, const fp4s_remedy *rem, size_t nr, double budget,
                    const char *ref, bool json, const fp4s_accel *acc, json_t **plan_out)
{
    /* candidates: the rollout items */
    size_t *cand = malloc(nr * sizeof *cand), nc = 0;
    for (size_t i = 0; i < nr; i++)
        if (!fp4s_remedy_is_trainer(rem[i].kind)) cand[nc++] = i;
    if (nc == 0) cli_usage("--plan: the remedy list has no rollout item");
    /* pool per site over steps */
    size_t ns = 0;
    plan_site *ps = calloc(nruns, sizeof *ps);
    for (size_t r = 0; r < nruns; r++) {
        const char *name = runs[r].site ? runs[r].site : runs[r].label;
        size_t s;
        for (s = 0; s < ns; s++)
            if (!strcmp(ps[s].site, name)) break;
        if (s == ns) {
            ps[ns].site = name;
            ps[ns].err2 = calloc(nc, sizeof(double));
            ps[ns].ref2 = calloc(nc, sizeof(double));
            ps[ns].cost = calloc(nc, sizeof(double));
            ps[ns].counts = calloc(nc, sizeof(size_t *));
            ps[ns].k = runs[r].info.k;
            ns++;
        }
        plan_site *p = &ps[s];
        const fp4s_remedy_site *si = &runs[r].info;
        p->base += (double)si->m * si->n * si->k * 2.0;
        for (size_t c = 0; c < nc; c++) {
            const fp4s_remedy_result *res = &runs[r].res[cand[c]];
            p->err2[c] += !strcmp(ref, "bf16") ? res->err2_bf16 : !strcmp(ref, "w4a4qat") ? res->err2_w4a4qat
                                                                                            : res->err2_wfq;
            p->ref2[c] += !strcmp(ref, "bf16") ? si->ref2_bf16 : !strcmp(ref, "w4a4qat") ? res->ref2_w4a4qat
                                                                                           : res->ref2_wfq;
            p->cost[c] += res->time.flops_fp4_equiv_extra;
            if (res->channels) {
                if (!p->counts[c]) p->counts[c] = calloc(p->k, sizeof(size_t));
                for (size_t j = 0; j < res->nchannels; j++)
                    if (res->channels[j] < p->k) p->counts[c][res->channels[j]]++;
            }
        }
    }
    /* the objective: the output mismatch left, each site's error energy over the whole naive W4A4 mismatch
     * (the shares of fp4-report: a site holding half of it weighs half; a sum of relative errors let a
     * tiny layer with a large relative error take the budget from the layer that holds the mismatch) */
    size_t none_c0 = (size_t)-1;
    for (size_t c = 0; c < nc; c++)
        if (fp4s_remedy_is_plain(&rem[cand[c]])) none_c0 = c;
    if (none_c0 == (size_t)-1) cli_usage("--plan: the remedy list needs none (naive W4A4), the mismatch the plan shares out");
    double naive_tot = 0;
    for (size_t s = 0; s < ns; s++) naive_tot += ps[s].err2[none_c0];
    fp4s_plan_item *items = calloc(ns * nc, sizeof *items);
    double total_base = 0;
    for (size_t s = 0; s < ns; s++) {
        total_base += ps[s].base;
        for (size_t c = 0; c < nc; c++)
            items[s * nc + c] = (fp4s_plan_item){.err = naive_tot > 0 ? ps[s].err2[c] / naive_tot : 0,
                                                 .cost = ps[s].cost[c], .ok = true};
    }
    size_t *choice = calloc(ns, sizeof *choice);
    double et = 0, ct = 0;
    int rc = fp4s_remedy_plan(items, ns, nc, budget * total_base, choice, &et, &ct);
    if (rc) return cli_report(rc);
    /* none's total, for the comparison */
    double e_none = 0;
    size_t none_c = none_c0;
    for (size_t s = 0; s < ns; s++) e_none += items[s * nc + none_c].err;

    json_t *root = json_object(), *sites = json_array(), *bf16 = json_array(), *chs = json_object(),
           *map = json_object();
    for (size_t s = 0; s < ns; s++) {
        size_t c = choice[s];
        const fp4s_remedy *rm = &rem[cand[c]];
        json_t *o = json_object();
        json_object_set_new(o, "site", json_string(ps[s].site));
        json_object_set_new(o, "remedy", json_string(fp4s_remedy_label(rm)));
        json_object_set_new(o, "share_before", cli_json_real(items[s * nc + none_c0].err));
        json_object_set_new(o, "share_after", cli_json_real(items[s * nc + c].err));
        json_object_set_new(o, "rel_error", cli_json_real(ps[s].ref2[c] > 0 ? sqrt(ps[s].err2[c] / ps[s].ref2[c]) : NAN));
        json_object_set_new(o, "extra_flops_fp4_equiv", cli_json_real(items[s * nc + c].cost));
        json_object_set_new(o, "flops_base", cli_json_real(ps[s].base));
        json_object_set_new(map, ps[s].site, json_string(fp4s_remedy_label(rm)));
        if (rm->kind == FP4S_RK_BF16_ROLLOUT) json_array_append_new(bf16, json_string(ps[s].site));
        if (rm->rac_ratio > 0 && ps[s].counts[c]) {
            size_t kk = ps[s].k, sel = 0;
            for (size_t r = 0; r < nruns; r++)
                if (!strcmp(runs[r].site ? runs[r].site : runs[r].label, ps[s].site))
                    sel = runs[r].res[cand[c]].nchannels;
            size_t *idx = malloc(kk * sizeof *idx);
            for (size_t j = 0; j < kk; j++) idx[j] = j;
            qsort_r(idx, kk, sizeof *idx, cmp_count_desc, ps[s].counts[c]);
            qsort(idx, sel, sizeof *idx, cmp_size);
            json_t *a = json_array();
            for (size_t j = 0; j < sel; j++) json_array_append_new(a, json_integer((json_int_t)idx[j]));
            json_object_set(o, "channels", a);
            json_object_set_new(chs, ps[s].site, a);
            free(idx);
        }
        json_array_append_new(sites, o);
    }
    json_object_set_new(root, "budget", json_real(budget));
    json_object_set_new(root, "budget_flops", cli_json_real(budget * total_base));
    json_object_set_new(root, "flops_base", cli_json_real(total_base));
    json_object_set_new(root, "extra_flops", cli_json_real(ct));
    json_object_set_new(root, "extra_fraction", cli_json_real(total_base > 0 ? ct / total_base : NAN));
    json_object_set_new(root, "reference", json_string(ref));
    json_object_set_new(root, "trainer", json_string(ref));
    json_object_set_new(root, "objective", json_string("the output mismatch left, as a share of naive W4A4's"));
    json_object_set_new(root, "accelerator", json_string(acc->name));
    json_object_set_new(root, "mismatch_left", cli_json_real(et));
    json_object_set_new(root, "naive_mismatch2", cli_json_real(naive_tot)); /* what the shares are of */
    json_object_set_new(root, "sites", sites);
    json_object_set_new(root, "remedy_per_site", map);
    json_object_set_new(root, "keep_bf16", bf16);
    json_object_set_new(root, "channels", chs);
    if (!json) {
        printf("\nplan: budget %.4g of the W4A4 FLOPs (%.4g FP4-equivalent FLOPs on %s); the output mismatch against "
               "the %s trainer, as a share of naive W4A4's, minimised\n", budget, budget * total_base, acc->name, ref);
        printf("  %-40s %-24s %10s %10s %10s %12s\n", "site", "remedy", "share", "after", "rel_err", "+FLOPs");
        for (size_t s = 0; s < ns; s++) {
            size_t c = choice[s];
            char e[32], f[32], b[32], a[32];
            fmtv(b, 32, "%.2f%%", 100 * items[s * nc + none_c0].err);
            fmtv(a, 32, "%.2f%%", 100 * items[s * nc + c].err);
            fmtv(e, 32, "%.4g", ps[s].ref2[c] > 0 ? sqrt(ps[s].err2[c] / ps[s].ref2[c]) : NAN);
            fmtv(f, 32, "%.2f%%", ps[s].base > 0 ? 100 * items[s * nc + c].cost / ps[s].base : NAN);
            printf("  %-40s %-24s %10s %10s %10s %12s\n", cli_safe(ps[s].site), fp4s_remedy_label(&rem[cand[c]]), b, a, e, f);
        }
        printf("  total: extra %.2f%% of the W4A4 FLOPs; mismatch left %.2f%% of naive W4A4's", 100 * ct / total_base,
               100 * et);
        if (none_c != (size_t)-1) printf(" (none everywhere: %.0f%%)", 100 * e_none);
        printf("\n\n# sites to keep in BF16 (one per line)\n");
        size_t nb = json_array_size(bf16);
        for (size_t i = 0; i < nb; i++) printf("%s\n", json_string_value(json_array_get(bf16, i)));
        if (nb == 0) printf("# (none)\n");
        printf("\n# residual channels per site (site: comma-separated channel indices)\n");
        const char *key;
        json_t *val;
        size_t nch = 0;
        json_object_foreach(chs, key, val) {
            printf("%s:", key);
            for (size_t i = 0; i < json_array_size(val); i++)
                printf("%s%lld", i ? "," : " ", (long long)json_integer_value(json_array_get(val, i)));
            putchar('\n');
            nch++;
        }
        if (nch == 0) printf("# (none)\n");
    }
    *plan_out = root;
    for (size_t s = 0; s < ns; s++) {
        free(ps[s].err2);
        free(ps[s].ref2);
        free(ps[s].cost);
        for (size_t c = 0; c < nc; c++) free(ps[s].counts[c]);
        free(ps[s].counts);
    }
    free(ps);
    free(items);
    free(choice);
    free(cand);
    return 0;
}

/* ---- --logits ----------------------------------------------------------------------------- */
typedef struct lpool {
    fp4s_mm_acc *acc;
    double ent_r, ent_t, flips, tokens, e_rel2;
    size_t steps;
} lpool;

static void logits_row_json(json_t *arr, int64_t step, const fp4s_remedy *r, const fp4s_mm_metrics *mm, double ent_r,
                            double ent_t, double flips, double lre)
{
    json_t *o = json_object();
    json_object_set_new(o, "step", step >= 0 ? json_integer(step) : json_null());
    json_object_set_new(o, "remedy", json_string(fp4s_remedy_label(r)));
    json_object_set_new(o, "tokens", json_integer((json_int_t)mm->tokens));
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++)
        json_object_set_new(o, fp4s_mm_metric_name(i), cli_json_real(fp4s_mm_metric_value(mm, i)));
    json_object_set_new(o, "entropy_rollout", cli_json_real(ent_r));
    json_object_set_new(o, "entropy_trainer", cli_json_real(ent_t));
    json_object_set_new(o, "entropy_change", cli_json_real(ent_r - ent_t));
    json_object_set_new(o, "argmax_flips", cli_json_real(flips));
    json_object_set_new(o, "logit_rel_error", cli_json_real(lre));
    json_array_append_new(arr, o);
}

static int run_logits(const char *file, const char *lm_head, const fp4s_remedy *rem_all, size_t nr_all,
                      const fp4s_spec *as, const fp4s_spec *ws, const long long *steps, size_t nsteps,
                      fp4s_remedy_kind trainer, bool json, bool csv, const char *outpath, bool strict)
{
    /* the rollout items of the list (the trainer is the reference) */
    fp4s_remedy *rem = calloc(nr_all ? nr_all : 1, sizeof *rem);
    size_t nr = 0;
    for (size_t i = 0; i < nr_all; i++)
        if (!fp4s_remedy_is_trainer(rem_all[i].kind)) rem[nr++] = rem_all[i];
    if (nr == 0) cli_usage("--logits: the remedy list has no rollout item");
    char site[256];
    int rc;
    if (lm_head) snprintf(site, sizeof site, "%s", lm_head);
    else if ((rc = fp4s_remedy_lm_head_site(file, site, sizeof site))) exit(cli_report(rc));
    fp4s_capture_entry *ents = NULL;
    size_t ne = 0;
    if ((rc = fp4s_capture_list(file, &ents, &ne))) exit(cli_report(rc));
    fp4s_logits_opts lo;
    fp4s_logits_opts_defaults(&lo);
    lo.trainer = trainer;
    lpool *pool = calloc(nr, sizeof *pool);
    fp4s_mm_acc **accs = calloc(nr, sizeof *accs);
    for (size_t i = 0; i < nr; i++) {
        if ((rc = fp4s_mm_acc_open(&lo.mm, &pool[i].acc))) exit(cli_report(rc));
        accs[i] = pool[i].acc;
    }
    fp4s_logits_result *res = calloc(nr, sizeof *res);
    json_t *arr = json_array();
    size_t used = 0;
    bool syn = cli_source_synthetic(file);
    if (!json && !csv) {
        char desc[512];
        fp4s_spec_describe(as, desc, sizeof desc);
        printf("activation quantizer: %s\nLM head: site %s of %s%s; trainer %s; metrics as fp4-mismatch(1), "
               "rho = lp_trainer - lp_rollout\n", desc, cli_safe(site), cli_safe(file), syn ? " (synthetic capture)" : "",
               trainer == FP4S_RK_WFQ ? "wfq (X_t Qw(W)^T)" : trainer == FP4S_RK_BF16 ? "bf16 (X_t W^T)"
                                                                                    : "w4a4qat (Qa(X_t) Qw(W)^T)");
    }
    if (csv) printf("step,remedy,tokens,max_abs,k3,mean_abs,k1,entropy_rollout,entropy_trainer,entropy_change,"
                    "argmax_flips,logit_rel_error\n");
    /* the units of the LM head's site (the walker pairs its trainer side and weight) */
    char pat[2 * sizeof site];
    size_t pn = 0;
    for (const char *p = site; *p; p++) { /* the site's name as a pattern that matches only it */
        if (strchr("*?[\\", *p)) pat[pn++] = '\\';
        pat[pn++] = *p;
    }
    pat[pn] = '\0';
    fp4s_unit_select sel;
    fp4s_unit_select_defaults(&sel);
    sel.sites = pat;
    sel.steps = steps;
    sel.nsteps = nsteps;
    fp4s_units ul = {0};
    sel.strict = strict;
    if ((rc = fp4s_units_add_capture(&ul, file, &sel))) exit(cli_report(rc));
    cli_units_skipped(&ul);
    for (size_t i = 0; i < ul.n; i++) {
        const fp4s_unit *u = &ul.u[i];
        bool tok = false;
        for (size_t j = 0; j < ne && !tok; j++)
            tok = !strcmp(ents[j].site, "logprobs") && ents[j].step == u->step && !strcmp(ents[j].side, "token");
        const char *missing = !u->xt ? "trainer hidden states" : !u->w ? "LM-head weight" : !tok ? "logprobs/token"
                                                                                                  : NULL;
        if (missing)
            cli_die(FP4S_EXIT_INPUT, "%s: step %lld: the logits path needs the %s (fp4scope-capture(5): the logits "
                    "path)", file, (long long)u->step, missing);
        fp4s_unit_data ud;
        if ((rc = fp4s_unit_read(u, &ud))) cli_fail(rc);
        float *hr = ud.x, *ht = ud.xt, *w = ud.w;
        size_t T = ud.m, d = ud.k, V = ud.n, nt;
        int64_t *token = NULL, *seq = NULL;
        uint8_t *mask = NULL;
        if ((rc = fp4s_remedy_read_tokens(file, u->step, &token, &seq, &mask, &nt))) exit(cli_report(rc));
        if (nt != T)
            cli_die(FP4S_EXIT_INPUT, "%s: step %lld: %zu hidden-state rows but %zu tokens", file, (long long)u->step, T,
                    nt);
        rc = fp4s_remedy_logits(rem, nr, as, ws, hr, ht, T, w, V, d, token, seq, mask, &lo, res, accs);
        if (rc) cli_failf(rc, "%s: step %lld", file, (long long)u->step);
        used++;
        if (!json && !csv) {
            printf("\nstep %lld  [%zu tokens, d %zu, V %zu]\n", (long long)u->step, T, d, V);
            printf("  %-26s %10s %11s %10s %11s %10s %9s %9s\n", "remedy", "max_gap", "k3", "mean_abs", "entropy_r",
                   "dH", "argmax", "logit_err");
        }
        for (size_t q = 0; q < nr; q++) {
            const fp4s_logits_result *lr = &res[q];
            double tk = (double)lr->mm.tokens;
            pool[q].ent_r += lr->entropy_rollout * tk;
            pool[q].ent_t += lr->entropy_trainer * tk;
            pool[q].flips += lr->argmax_flips * tk;
            pool[q].tokens += tk;
            pool[q].e_rel2 += lr->logit_rel_error * lr->logit_rel_error;
            pool[q].steps++;
            logits_row_json(arr, u->step, &lr->remedy, &lr->mm, lr->entropy_rollout, lr->entropy_trainer,
                            lr->argmax_flips, lr->logit_rel_error);
            if (csv) {
                printf("%lld,%s,%llu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", (long long)u->step,
                       fp4s_remedy_label(&lr->remedy), (unsigned long long)lr->mm.tokens, lr->mm.max_abs, lr->mm.k3,
                       lr->mm.mean_abs, lr->mm.k1, lr->entropy_rollout, lr->entropy_trainer, lr->entropy_change,
                       lr->argmax_flips, lr->logit_rel_error);
            } else if (!json) {
                printf("  %-26s %10.4g %11.4g %10.4g %11.5g %+10.3g %8.2f%% %9.4g\n", fp4s_remedy_label(&lr->remedy),
                       lr->mm.max_abs, lr->mm.k3, lr->mm.mean_abs, lr->entropy_rollout, lr->entropy_change,
                       100 * lr->argmax_flips, lr->logit_rel_error);
            }
        }
        fp4s_unit_data_free(&ud);
        free(token);
        free(seq);
        free(mask);
    }
    free(ents);
    fp4s_units_free(&ul);
    if (used == 0)
        cli_die(FP4S_EXIT_INPUT, "%s: no step holds the site %s (the final hidden states; see fp4scope-capture(5): the "
                "logits path)", file, site);
    /* pooled over the steps */
    if (!json && !csv)
        printf("\nall %zu steps\n  %-26s %10s %11s %10s %11s %10s %9s\n", used, "remedy", "max_gap", "k3", "mean_abs",
               "entropy_r", "dH", "argmax");
    for (size_t q = 0; q < nr; q++) {
        fp4s_mm_metrics mm;
        if ((rc = fp4s_mm_acc_finish(pool[q].acc, &mm))) exit(cli_report(rc));
        double er = pool[q].ent_r / pool[q].tokens, et = pool[q].ent_t / pool[q].tokens;
        double fl = pool[q].flips / pool[q].tokens, le = sqrt(pool[q].e_rel2 / (double)pool[q].steps);
        logits_row_json(arr, -1, &rem[q], &mm, er, et, fl, le);
        if (csv)
            printf(",%s,%llu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", fp4s_remedy_label(&rem[q]),
                   (unsigned long long)mm.tokens, mm.max_abs, mm.k3, mm.mean_abs, mm.k1, er, et, er - et, fl, le);
        else if (!json)
            printf("  %-26s %10.4g %11.4g %10.4g %11.5g %+10.3g %8.2f%%\n", fp4s_remedy_label(&rem[q]), mm.max_abs,
                   mm.k3, mm.mean_abs, er, er - et, 100 * fl);
        fp4s_mm_acc_close(&pool[q].acc);
    }
    int status = 0;
    if (outpath) {
        if ((rc = cli_json_write(outpath, arr))) exit(cli_report(rc));
    }
    if (json) status = cli_json_print(json_incref(arr));
    else if (fflush(stdout) != 0) status = FP4S_EXIT_OUTPUT;
    json_decref(arr);
    free(res);
    free(pool);
    free(accs);
    free(rem);
    return status;
}

/* ---- the command line ----------------------------------------------------------------- */
typedef struct args {
    cli_common common;
    cli_quant qo;
    cli_analysis an;
    const char *list, *select, *order, *operands, *accel, *outpath, *plan_ref, *lm_head;
    const char *capture;       /* NULL: one site given as tensors */
    bool nodec, have_plan, logits;
    fp4s_remedy_kind ltrainer;
    long long sr_seeds;
    double budget;
} args;

/* --list-accels */
static void accels_text(void)
{
    size_t na;
    const fp4s_accel *a = fp4s_accel_list(&na);
    printf("%-8s %-40s %9s %9s %9s %9s %7s\n", "name", "accelerator", "FP4", "FP8", "BF16", "FP32", "TB/s");
    for (size_t i = 0; i < na; i++) {
        char f4[32];
        if (a[i].fp4_tflops > 0) snprintf(f4, sizeof f4, "%.0f", a[i].fp4_tflops);
        else snprintf(f4, sizeof f4, "%s", "none");
        printf("%-8s %-40s %9s %9.0f %9.1f %9.1f %7.2f\n", a[i].name, a[i].title, f4, a[i].fp8_tflops,
               a[i].bf16_tflops, a[i].fp32_tflops, a[i].bandwidth_tbps);
    }
    printf("(dense TFLOPS per GPU; sources and caveats in fp4-remedy(1))\n");
}

static void parse_args(int argc, char **argv, args *a)
{
    cli_quant_init(&a->qo);
    cli_common_init(&a->common, usage_text, true);
    a->accel = "b200";
    a->plan_ref = "bf16";
    a->ltrainer = FP4S_RK_WFQ;
    a->sr_seeds = 8;
    static const struct option lo[] = {
        CLI_QUANT_LONGOPTS
        {"remedy", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'},
        CLI_WEIGHT_2D_LONGOPTS
        CLI_SITE_LONGOPTS
        {"list-remedies", no_argument, NULL, OPT_LISTREM},
        {"select", required_argument, NULL, OPT_SELECT},
        {"rac-order", required_argument, NULL, OPT_ORDER},
        {"operands", required_argument, NULL, OPT_OPERANDS},
        {"accel", required_argument, NULL, OPT_ACCEL},
        {"list-accels", no_argument, NULL, OPT_LISTACC},
        CLI_DZ_TIE_LONGOPTS
        {"no-decompose", no_argument, NULL, OPT_NODEC},
        CLI_SELECT_LONGOPTS
        {"plan", required_argument, NULL, OPT_PLAN},
        {"plan-ref", required_argument, NULL, OPT_PLANREF},
        {"trainer", required_argument, NULL, OPT_PLANREF},
        {"logits", no_argument, NULL, OPT_LOGITS},
        {"sr-seeds", required_argument, NULL, OPT_SRSEEDS},
        CLI_STRICT_LONGOPTS
        {"logits-trainer", required_argument, NULL, OPT_LTRAINER},
        {"lm-head", required_argument, NULL, OPT_LMHEAD},
        CLI_REPORT_LONGOPTS
        CLI_THREADS_LONGOPTS
        CLI_GEMM_LONGOPTS
        CLI_COMMON_LONGOPTS
        CLI_OUTPUT_LONGOPTS
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:r:o:", lo)) != -1) {
        switch (c) {
        case 'r': a->list = optarg; break;
        case 'o': a->outpath = optarg; break;
        case OPT_LISTREM: grammar_text(); exit(0);
        case OPT_SELECT: a->select = optarg; break;
        case OPT_ORDER: a->order = optarg; break;
        case OPT_OPERANDS: a->operands = optarg; break;
        case OPT_ACCEL: a->accel = optarg; break;
        case OPT_LISTACC: accels_text(); exit(0);
        case OPT_NODEC: a->nodec = true; break;
        case OPT_PLAN:
            a->budget = cli_parse_double("--plan", optarg, 0.0, 1e6);
            a->have_plan = true;
            break;
        case OPT_PLANREF: {
            fp4s_trainer tr;
            if (fp4s_trainer_parse(optarg, &tr)) cli_usage("--trainer: %s", fp4s_last_error());
            a->plan_ref = tr == FP4S_TRAINER_W4A4 ? "w4a4qat" : fp4s_trainer_name(tr);
            break;
        }
        case OPT_LOGITS: a->logits = true; break;
        case OPT_LTRAINER:
            if (!strcmp(optarg, "wfq")) a->ltrainer = FP4S_RK_WFQ;
            else if (!strcmp(optarg, "bf16")) a->ltrainer = FP4S_RK_BF16;
            else if (!strcmp(optarg, "w4a4qat")) a->ltrainer = FP4S_RK_W4A4QAT;
            else cli_usage("--logits-trainer: expected wfq, bf16 or w4a4qat, got '%s'", optarg);
            break;
        case OPT_LMHEAD: a->lm_head = optarg; break;
        case OPT_SRSEEDS: a->sr_seeds = cli_parse_int("--sr-seeds", optarg, 1, 100000); break;
        default: cli_option_rest(c, optarg, argv, &a->common, &a->qo, &a->an);
        }
    }
    cli_common_check(&a->common);
    const cli_analysis *an = &a->an;
    bool capture_mode = optind < argc;
    if (a->logits && !capture_mode) cli_usage("--logits reads a CAPTURE");
    if (a->logits && (a->have_plan || an->sites))
        cli_usage("--logits evaluates the LM head (--lm-head), not --sites or --plan");
    if (a->logits && a->outpath && !cli_ends_with(a->outpath, ".json"))
        cli_usage("--logits writes -o as JSON: give FILE.json");
    if (capture_mode && optind + 1 < argc) cli_usage("one CAPTURE expected, got %d", argc - optind);
    if (capture_mode && (an->act || an->trainer_act || an->weight))
        cli_usage("give either a CAPTURE or --act/--weight, not both");
    if (!capture_mode) {
        if (!an->act) cli_usage("no input: give --act X --weight W, or a CAPTURE");
        if (!an->weight) cli_usage("--weight W is needed with --act");
        if (an->sites || an->steps) cli_usage("--sites and --steps select from a CAPTURE");
    }
    if (a->have_plan && a->common.csv) cli_usage("--plan prints text or --json, not --csv");
    a->capture = capture_mode ? argv[optind] : NULL;
}

/* The remedy list with --select, --rac-order, --operands and --sr-seeds, each
 * item checked against the quantizers (K is checked per site). */
static fp4s_remedy *remedy_list(const args *a, const fp4s_spec *as, const fp4s_spec *ws, size_t *nr)
{
    fp4s_remedy *rem = NULL;
    int rc = fp4s_remedy_list_parse(a->list ? a->list : a->have_plan ? PLAN_LIST : DEFAULT_LIST, &rem, nr);
    if (rc) cli_usage("--remedy: %s", fp4s_last_error());
    size_t tile = 0;
    if (a->select) {
        if (!strcmp(a->select, "tensor")) tile = 0;
        else if (!strncmp(a->select, "tile:", 5))
            tile = (size_t)cli_parse_int("--select tile:ROWS", a->select + 5, 1, 1LL << 40);
        else cli_usage("--select: expected tensor or tile:ROWS, got '%s'", a->select);
    }
    for (size_t i = 0; i < *nr; i++) {
        rem[i].rac_tile_rows = tile;
        rem[i].sr_seeds = (uint32_t)a->sr_seeds;
        if (a->order) {
            if (!strcmp(a->order, "index")) rem[i].rac_order = FP4S_RAC_ORDER_INDEX;
            else if (!strcmp(a->order, "rank")) rem[i].rac_order = FP4S_RAC_ORDER_RANK;
            else cli_usage("--rac-order: expected index or rank, got '%s'", a->order);
        }
        if (a->operands) {
            if (!strcmp(a->operands, "both")) rem[i].operands = FP4S_OPERANDS_BOTH;
            else if (!strcmp(a->operands, "act")) rem[i].operands = FP4S_OPERANDS_ACT;
            else if (!strcmp(a->operands, "weight")) rem[i].operands = FP4S_OPERANDS_WEIGHT;
            else cli_usage("--operands: expected both, act or weight, got '%s'", a->operands);
        }
        rc = fp4s_remedy_check(&rem[i], as, ws, 0 + (as->block > ws->block ? as->block : ws->block));
        if (rc) cli_usage("--remedy: %s", fp4s_last_error());
    }
    return rem;
}

/* --csv: a line per (site, remedy), the fields of fp4s_remedy_fields. */
static int print_csv(const fp4s_remedy_row *rows, size_t nrow)
{
    size_t nf;
    const fp4s_remedy_field *f = fp4s_remedy_fields(&nf);
    printf("source,site,step,remedy,side");
    for (size_t i = 0; i < nf; i++) printf(",%s", f[i].name);
    putchar('\n');
    for (size_t r = 0; r < nrow; r++) {
        cli_csv_str(rows[r].source);
        putchar(',');
        cli_csv_str(rows[r].site);
        putchar(',');
        if (rows[r].step >= 0) printf("%lld", (long long)rows[r].step);
        putchar(',');
        cli_csv_str(fp4s_remedy_label(&rows[r].res->remedy));
        printf(",%s", fp4s_remedy_is_trainer(rows[r].res->remedy.kind) ? "trainer" : "rollout");
        for (size_t i = 0; i < nf; i++) {
            double v = f[i].get(rows[r].info, rows[r].res);
            putchar(',');
            if (isfinite(v)) printf("%.17g", v);
            else if (!isnan(v)) printf("%s", v > 0 ? "inf" : "-inf");
        }
        putchar('\n');
    }
    return fflush(stdout) != 0 ? FP4S_EXIT_OUTPUT : 0;
}

/* The tables: one per site and, over several sites, every remedy pooled. */
static int print_tables(const fp4s_spec *as, const fp4s_spec *ws, const fp4s_accel *acc, const site_run *runs,
                        size_t nruns, size_t nr)
{
    char desc[512];
    fp4s_spec_describe(as, desc, sizeof desc);
    printf("activation quantizer: %s\n", desc);
    fp4s_spec_describe(ws, desc, sizeof desc);
    printf("weight quantizer:     %s\n", desc);
    printf("cost model: %s; +FLOPs over the W4A4 GEMM, t/FP8 and t/BF16: predicted time over the same GEMM "
           "in FP8 and BF16\n", acc->title);
    for (size_t s = 0; s < nruns; s++) remedy_table_site(&runs[s], nr);
    if (nruns > 1) remedy_table_pooled(runs, nruns, nr);
    return fflush(stdout) != 0 ? FP4S_EXIT_OUTPUT : 0;
}

/* -o, then stdout: the plan (when made) and the results. */
static int write_outputs(const args *a, const fp4s_spec *as, const fp4s_spec *ws, const fp4s_accel *acc,
                         const site_run *runs, size_t nruns, size_t nr, json_t *plan)
{
    size_t nrow = nruns * nr;
    fp4s_remedy_row *rows = xcalloc(nrow, sizeof *rows);
    json_t *arr = json_array();
    for (size_t s = 0; s < nruns; s++)
        for (size_t i = 0; i < nr; i++) {
            rows[s * nr + i] = (fp4s_remedy_row){.source = runs[s].label, .site = runs[s].site, .step = runs[s].step,
                                                 .info = &runs[s].info, .res = &runs[s].res[i]};
            json_array_append_new(arr, row_json(&runs[s], &runs[s].res[i], acc));
        }
    int rc, status = 0;
    if (a->outpath) {
        if (cli_ends_with(a->outpath, ".json")) {
            json_t *doc = plan ? json_pack("{sOsO}", "plan", plan, "results", arr) : json_incref(arr);
            rc = cli_json_write(a->outpath, doc);
            json_decref(doc);
        } else {
            rc = fp4s_remedy_write_h5(a->outpath, as, ws, acc, rows, nrow);
        }
        if (rc) exit(cli_report(rc));
        if ((rc = cli_commit())) exit(rc);
    }
    if (a->common.json) {
        if (plan) status = cli_json_print(json_pack("{sOsO}", "plan", plan, "results", arr));
        else status = cli_json_print(json_incref(arr));
    } else if (a->common.csv) {
        status = print_csv(rows, nrow);
    } else if (!a->have_plan) {
        status = print_tables(as, ws, acc, runs, nruns, nr);
    }
    json_decref(arr);
    free(rows);
    return status;
}

/* ---- main ------------------------------------------------------------------------------- */
int main(int argc, char **argv)
{
    cli_init("fp4-remedy");
    par_init();
    args a = {0};
    parse_args(argc, argv, &a);
    const cli_analysis *an = &a.an;
    fp4s_spec as, ws;
    cli_quant_spec(&a.qo, CLI_FORMATS_FP4, "remedies are", &as);
    fp4s_remedy_weight_spec(&as, cli_weight_2d(an->weight_2d), &ws);
    size_t nr = 0;
    fp4s_remedy *rem = remedy_list(&a, &as, &ws, &nr);
    fp4s_remedy_eval_opts eo;
    fp4s_remedy_eval_opts_defaults(&eo);
    if (fp4s_accel_get(a.accel, &eo.accel)) cli_usage("--accel: %s", fp4s_last_error());
    cli_dz_tie(an->dz_tie, &eo.dz_tie);
    eo.decompose = !a.nodec;
    eo.device = cli_device_for(a.common.device_arg, CLI_GPU_REMEDY, NULL);
    /* the output is checked against the inputs before any work (cli.h) */
    const char *inputs[] = {an->act, an->trainer_act, an->weight, a.capture};
    for (int i = 0; i < 4; i++)
        if (inputs[i]) cli_input(inputs[i]);
    if (a.outpath) cli_output(a.outpath);

    if (a.logits) {
        if (!par_root_only()) return 0; /* --logits is not split over MPI ranks (fp4-remedy(1)) */
        long long *steps = NULL;
        size_t nsteps = 0;
        if (an->steps) steps = cli_parse_int_list("--steps", an->steps, &nsteps);
        int st = run_logits(a.capture, a.lm_head, rem, nr, &as, &ws, steps, nsteps, a.ltrainer, a.common.json,
                            a.common.csv, a.outpath, an->strict);
        free(steps);
        free(rem);
        return st;
    }

    /* the units: one site given as tensors, or the capture's (step, site) pairs */
    fp4s_units ul = {0};
    bool syn;
    cli_units(a.capture, an, FP4S_UNIT_OPTIONAL, FP4S_UNIT_REQUIRED, "", " (rollout activations are needed)",
              " (rollout activations are needed)", &ul, &syn);
    size_t nruns = ul.n;
    site_run *runs = xcalloc(nruns, sizeof *runs);
    cli_progress_begin(a.capture ? a.capture : an->act);
    for (size_t i = 0; i < nruns; i++) {
        const fp4s_unit *u = &ul.u[i];
        cli_progress(i, nruns);
        runs[i].label = xstrdup(u->x);
        runs[i].site = u->site ? xstrdup(u->site) : NULL;
        runs[i].step = u->step;
        runs[i].synthetic = syn;
        if (par_mine(i)) runs[i].res = eval_unit(rem, nr, &as, &ws, &eo, u, &runs[i].info); /* this rank's units */
    }
    cli_progress_end();
    fp4s_units_free(&ul);
    if (!par_gather_remedy(&runs[0].info, &runs[0].res, sizeof *runs, nruns, nr)) return 0; /* rank 0 goes on */

    json_t *plan = NULL;
    int status = 0;
    if (a.have_plan) status = run_plan(runs, nruns, rem, nr, a.budget, a.plan_ref, a.common.json, eo.accel, &plan);
    if (!status) status = write_outputs(&a, &as, &ws, eo.accel, runs, nruns, nr, plan);
    json_decref(plan);
    for (size_t s = 0; s < nruns; s++) {
        fp4s_remedy_results_free(runs[s].res, nr);
        free(runs[s].res);
        free(runs[s].label);
        free(runs[s].site);
    }
    free(runs);
    free(rem);
    return status;
}
