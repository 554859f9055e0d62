/* fp4-remedy's tables (table.h). */
#include "remedy/table.h"

#include "cli.h"

#include <math.h>
#include <stdio.h>

static void fmtv(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v)) snprintf(b, n, f, v);
    else snprintf(b, n, "%s", isnan(v) ? "-" : (v > 0 ? "inf" : "-inf"));
}

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

static void energy_line(double scale, double dz, double grid, double total)
{
    if (!(total > 0)) return;
    char a[32], b[32], c[32], r[32];
    fmtv(a, sizeof a, "%.1f%%", 100 * scale / total);
    fmtv(b, sizeof b, "%.1f%%", 100 * dz / total);
    fmtv(c, sizeof c, "%.1f%%", 100 * grid / total);
    fmtv(r, sizeof r, "%.1f%%", 100 * (1 - (dz + grid) / total));
    printf("  activation error energy: scale %s, dead zone %s, grid %s; a perfect scale removes at most %s\n", a, b,
           c, r);
}

static void header(void)
{
    printf("  %-26s %9s %9s %9s %9s %8s %8s %11s %9s %8s %8s\n", "remedy", "out_err", "vs_wfq", "vs_w4a4", "act_err",
           "dz_left", "rest_lft", "+bits a/w", "+FLOPs", "t/FP8", "t/BF16");
}

/* One row: the numbers as given (a site, or sums over sites turned into ratios by the caller). */
static void row(const fp4s_remedy *rem, double e1v, double e2v, double e3v, double e4v, double dzv, double rsv,
                double abits, double wbits, double flops, double t8v, double t16v)
{
    char e1[32], e2[32], e3[32], e4[32], dz[32], rs[32], bits[32], fl[32], t8[32], t16[32];
    fmtv(e1, 32, "%.4g", e1v);
    fmtv(e2, 32, "%.4g", e2v);
    fmtv(e3, 32, "%.4g", e3v);
    fmtv(e4, 32, "%.4g", e4v);
    fmtv(dz, 32, "%.3f", dzv);
    fmtv(rs, 32, "%.3f", rsv);
    if (fp4s_remedy_is_trainer(rem->kind) || rem->kind == FP4S_RK_BF16_ROLLOUT) snprintf(bits, 32, "%s", "bf16");
    else snprintf(bits, 32, "%.2f/%.2f", abits, wbits);
    fmtv(fl, 32, "%.1f%%", 100 * flops);
    fmtv(t8, 32, "%.3f", t8v);
    fmtv(t16, 32, "%.3f", t16v);
    printf("  %-26s %9s %9s %9s %9s %8s %8s %11s %9s %8s %8s\n", fp4s_remedy_label(rem), e1, e2, e3, e4, dz, rs, bits,
           fl, t8, t16);
}

void remedy_table_site(const site_run *s, size_t nr)
{
    const fp4s_remedy_site *si = &s->info;
    printf("\n%s%s", s->site ? "site " : "", cli_safe(s->site ? s->site : s->label));
    if (s->step >= 0) printf(" step %lld", (long long)s->step);
    printf("  [%zu x %zu] x [%zu x %zu]^T%s\n", si->m, si->k, si->n, si->k, s->synthetic ? "  (synthetic capture)" : "");
    char a[32], b[32], c[32];
    fmtv(a, sizeof a, "%.4g", si->act_only_rel_error);
    fmtv(b, sizeof b, "%.4g", si->weight_only_rel_error);
    printf("  error alone: activation %s (Qa(X) W^T), weight %s (X Qw(W)^T)", a, b);
    if (si->have_trainer) {
        fmtv(c, sizeof c, "%.4g", si->input_rel_diff);
        printf("; ||X - X_t||/||X_t|| %s", c);
    } else {
        printf("; no trainer activations (X_t = X)");
    }
    putchar('\n');
    const fp4s_decomp_result *d = &si->act;
    if (isfinite(d->ratio_scale)) energy_line(d->energy_scale, d->energy_deadzone, d->energy_grid, d->energy_total);
    header();
    for (size_t i = 0; i < nr; i++) {
        const fp4s_remedy_result *r = &s->res[i];
        row(&r->remedy, r->out_rel_error, r->out_rel_error_vs_wfq, r->out_rel_error_vs_w4a4qat, r->act_rel_error,
            r->dz_left, r->rest_left, r->cost.act_extra_bits, r->cost.weight_extra_bits,
            r->cost.flops_extra / r->cost.flops_base, r->time.vs_fp8, r->time.vs_bf16);
    }
}

void remedy_table_pooled(const site_run *runs, size_t nruns, size_t nr)
{
    size_t synth = 0;
    double own = 0, aonly = 0, wonly = 0, es = 0, ed = 0, eg = 0, et = 0;
    for (size_t s = 0; s < nruns; s++) {
        const fp4s_remedy_site *si = &runs[s].info;
        synth += runs[s].synthetic;
        own += si->ref2_own;
        aonly += si->act_only_rel_error * si->act_only_rel_error * si->ref2_own;
        wonly += si->weight_only_rel_error * si->weight_only_rel_error * si->ref2_own;
        const fp4s_decomp_result *d = &si->act;
        es += d->energy_scale;
        ed += d->energy_deadzone;
        eg += d->energy_grid;
        et += d->energy_total;
    }
    printf("\nall %zu (step, site) pairs pooled%s: errors are sqrt(sum of error energies / sum of reference "
           "energies),\n  dz_left and rest_left sums of energies, +bits per element, +FLOPs and times sums over the "
           "sites\n", nruns, synth == nruns ? "  (synthetic capture)" : synth ? "  (some synthetic)" : "");
    char a[32], b[32];
    fmtv(a, sizeof a, "%.4g", sqrt(ratio(aonly, own)));
    fmtv(b, sizeof b, "%.4g", sqrt(ratio(wonly, own)));
    printf("  error alone: activation %s (Qa(X) W^T), weight %s (X Qw(W)^T)\n", a, b);
    energy_line(es, ed, eg, et);
    header();
    for (size_t i = 0; i < nr; i++) {
        double e2b = 0, rb = 0, e2w = 0, rw = 0, e24 = 0, r4 = 0, a2 = 0, x2 = 0, dza = 0, dzb = 0, rsa = 0, rsb = 0;
        double ab = 0, wb = 0, ne_a = 0, ne_w = 0, fx = 0, fb = 0, t = 0, t8 = 0, t16 = 0;
        for (size_t s = 0; s < nruns; s++) {
            const fp4s_remedy_site *si = &runs[s].info;
            const fp4s_remedy_result *r = &runs[s].res[i];
            e2b += r->err2_bf16;
            rb += si->ref2_bf16;
            e2w += r->err2_wfq;
            rw += r->ref2_wfq;
            e24 += r->err2_w4a4qat;
            r4 += r->ref2_w4a4qat;
            a2 += r->act_rel_error * r->act_rel_error * r->act_before.energy_x;
            x2 += r->act_before.energy_x;
            dza += r->dz_err2_after;
            dzb += r->dz_err2_before;
            rsa += r->rest_err2_after;
            rsb += r->rest_err2_before;
            ab += r->cost.act_extra_bits * (double)si->m * si->k;
            ne_a += (double)si->m * si->k;
            wb += r->cost.weight_extra_bits * (double)si->n * si->k;
            ne_w += (double)si->n * si->k;
            fx += r->cost.flops_extra;
            fb += r->cost.flops_base;
            t += r->time.seconds;
            t8 += r->time.fp8_seconds;
            t16 += r->time.bf16_seconds;
        }
        row(&runs[0].res[i].remedy, sqrt(ratio(e2b, rb)), sqrt(ratio(e2w, rw)), sqrt(ratio(e24, r4)),
            sqrt(ratio(a2, x2)), ratio(dza, dzb), ratio(rsa, rsb), ratio(ab, ne_a), ratio(wb, ne_w), ratio(fx, fb),
            ratio(t, t8), ratio(t, t16));
    }
}
