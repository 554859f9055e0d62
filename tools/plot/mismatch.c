/* fp4-plot mismatch: a metric per training step of one or more runs (token
 * traces, per-step scalar logs, captures, or fp4-mismatch --json reports),
 * with the onset of each and its threshold. */
#include "plot.h"
#include "../suggest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An fp4-mismatch --json report as runs (its steps, every metric by name);
 * 0 when `path` is not one (a trace, read by fp4s_mm_analyze). */
static int load_mismatch_report(const char *path, const char *name, fp4s_mm_result *res)
{
    if (strcmp(path, "-") == 0) return 0;
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) return 0; /* not one JSON document (JSONL, CSV, HDF5) */
    json_t *tool = json_object_get(j, "tool");
    if (!json_is_object(j) || !json_is_string(tool) || strcmp(json_string_value(tool), "fp4-mismatch") != 0) {
        json_decref(j);
        return 0;
    }
    json_t *runs = arr_field(j, "runs", path);
    size_t nm = fp4s_mm_metric_count();
    res->runs = xrealloc(res->runs, (res->nruns + json_array_size(runs)) * sizeof *res->runs);
    for (size_t r = 0; r < json_array_size(runs); r++) {
        json_t *jr = json_array_get(runs, r), *st = arr_field(jr, "steps", path);
        json_t *nmj = json_object_get(jr, "name");
        fp4s_mm_run *o = &res->runs[res->nruns++];
        memset(o, 0, sizeof *o);
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%s%s", name ? name : "", name && json_is_string(nmj) ? "/" : "",
                 json_is_string(nmj) ? json_string_value(nmj) : (name ? "" : "run"));
        o->name = xstrdup(buf);
        o->source = xstrdup(path);
        o->nsteps = json_array_size(st);
        o->steps = xcalloc(o->nsteps ? o->nsteps : 1, sizeof *o->steps);
        for (size_t i = 0; i < o->nsteps; i++) {
            json_t *e = json_array_get(st, i);
            fp4s_mm_metrics *m = &o->steps[i];
            char where[64];
            snprintf(where, sizeof where, "runs[%zu].steps[%zu]", r, i);
            m->step = (int64_t)num_field(e, "step", where, 1);
            double tk = num_field(e, "tokens", where, 0);
            m->tokens = tk > 0 ? (uint64_t)tk : 0;
            m->nmetrics = (uint32_t)nm;
            for (size_t k = 0; k < FP4S_MM_METRIC_SLOTS; k++) m->v[k] = NAN;
            const char *key;
            json_t *v;
            json_object_foreach(e, key, v)
            {
                int id = fp4s_mm_metric_lookup(key);
                if (id >= 0 && json_is_number(v)) m->v[id] = json_number_value(v);
            }
        }
    }
    json_decref(j);
    return 1;
}

/* cmd_mismatch's way out while it reads run r's values: what it holds freed, st returned. */
static int give_up(int st, double **vals, size_t r, fp4s_mm_onset *on, fp4s_mm_result *res)
{
    for (size_t q = 0; q <= r; q++) free(vals[q]);
    free(vals);
    free(on);
    fp4s_mm_result_free(res);
    return st;
}

/* What a run has, for a message: "k3 (rollout_corr/k3_kl), k1, ..., reward" (metrics with values
 * first, then the other per-step scalars; at most 12). */
static void run_has(FILE *f, const fp4s_mm_run *run)
{
    size_t shown = 0;
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++) {
        if (!fp4s_mm_run_count(run, fp4s_mm_metric_name(i)) || shown++ >= 12) continue;
        const char *as = fp4s_mm_run_logged_as(run, i);
        fprintf(f, "%s%s%s%s%s", shown > 1 ? ", " : "", fp4s_mm_metric_name(i), as ? " (" : "", as ? as : "",
                as ? ")" : "");
    }
    for (size_t k = 0; k < run->nscalars; k++)
        if (fp4s_mm_metric_lookup(run->scalar_names[k]) < 0 && fp4s_mm_run_count(run, run->scalar_names[k]) &&
            shown++ < 12)
            fprintf(f, "%s%s", shown > 1 ? ", " : "", run->scalar_names[k]);
    if (shown > 12) fprintf(f, " (and %zu more)", shown - 12);
    if (!shown) fprintf(f, "no values");
}

/* " did you mean 'x'?" among what the run has values of (its metrics by
 * their names and the names it logs them under, its other scalars). */
static const char *near_names(const fp4s_mm_run *run, const char *name)
{
    static char buf[1024];
    size_t cap = 2 * fp4s_mm_metric_count() + run->nscalars + 1, n = 0;
    const char **all = xmalloc(cap * sizeof *all);
    for (size_t i = 0; i < fp4s_mm_metric_count(); i++)
        if (fp4s_mm_run_count(run, fp4s_mm_metric_name(i))) all[n++] = fp4s_mm_metric_name(i);
    for (size_t k = 0; k < run->nscalars; k++)
        if (fp4s_mm_run_count(run, run->scalar_names[k])) all[n++] = run->scalar_names[k];
    cli_did_you_mean(name, all, n, buf, sizeof buf);
    free(all);
    return buf;
}

/* A series every run must have (--metric) or some run (--y2): a usage error
 * naming the run and what it has instead of gnuplot's "all points y value
 * undefined". */
static void need_series(const fp4s_mm_result *res, const char *opt, const char *name, int every)
{
    size_t with = 0;
    for (size_t r = 0; r < res->nruns; r++) {
        const fp4s_mm_run *run = &res->runs[r];
        if (fp4s_mm_run_count(run, name)) {
            with++;
            continue;
        }
        if (!every) continue;
        fprintf(stderr, "fp4-plot: %s: run '%s' (%s) has no value of '%s';%s it has: ", opt, run->name, run->source,
                name, near_names(run, name));
        run_has(stderr, run);
        fprintf(stderr, "\nTry 'fp4-plot --help'.\n");
        exit(FP4S_EXIT_USAGE);
    }
    if (with || !res->nruns) return;
    fprintf(stderr, "fp4-plot: %s: no run has a value of '%s';%s run '%s' has: ", opt, name,
            near_names(&res->runs[0], name), res->runs[0].name);
    run_has(stderr, &res->runs[0]);
    fprintf(stderr, "\nTry 'fp4-plot --help'.\n");
    exit(FP4S_EXIT_USAGE);
}

int cmd_mismatch(plot *p, int argc, char **argv, const char *metric, const char *y2, int scale, const char **names,
                        size_t nnames, const fp4s_mm_opts *mo, const fp4s_trace_opts *to, const fp4s_mm_onset_opts *oo)
{
    if (argc < 1) cli_usage("mismatch: no TRACE given");
    if (nnames > (size_t)argc) cli_usage("%zu --name options for %d traces", nnames, argc);
    fp4s_mm_result res = {0};
    for (int i = 0; i < argc; i++) {
        if (load_mismatch_report(argv[i], (size_t)i < nnames ? names[i] : NULL, &res)) continue;
        cli_progress_begin(argv[i]);
        int rc = fp4s_mm_analyze(argv[i], (size_t)i < nnames ? names[i] : NULL, mo, to, &res);
        if (rc) {
            fp4s_mm_result_free(&res);
            return cli_report(rc);
        }
    }
    for (size_t a = 0; a < res.nruns; a++)
        for (size_t b = a + 1; b < res.nruns; b++)
            if (strcmp(res.runs[a].name, res.runs[b].name) == 0) {
                fprintf(stderr, "fp4-plot: two runs are named '%s'; name them with --name\n", res.runs[a].name);
                fp4s_mm_result_free(&res);
                return FP4S_EXIT_USAGE;
            }
    if (!metric) { /* the default order, as fp4-mismatch */
        int id = fp4s_mm_metric_pick(&res);
        if (id < 0) {
            fprintf(stderr, "fp4-plot: no mismatch metric in every run: none of");
            for (size_t i = 0; fp4s_mm_metric_preferred(i); i++)
                fprintf(stderr, "%s %s", i ? "," : "", fp4s_mm_metric_preferred(i));
            fprintf(stderr, " has a value in every run; run '%s' has: ", res.runs[0].name);
            run_has(stderr, &res.runs[0]);
            fprintf(stderr, "\n--metric NAME plots one of them. Try 'fp4-plot --help'.\n");
            fp4s_mm_result_free(&res);
            return FP4S_EXIT_USAGE;
        }
        metric = fp4s_mm_metric_name((size_t)id);
    }
    need_series(&res, "--metric", metric, 1);
    if (y2) need_series(&res, "--y2", y2, 0);
    int mi = fp4s_mm_metric_lookup(metric);
    /* values, onset, scale */
    double vmin = INFINITY, vmax = -INFINITY, amin = INFINITY, amax = -INFINITY;
    int nonpos = 0;
    fp4s_mm_onset *on = calloc(res.nruns, sizeof *on);
    double **vals = calloc(res.nruns, sizeof *vals);
    if (!on || !vals) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (size_t r = 0; r < res.nruns; r++) {
        fp4s_mm_run *run = &res.runs[r];
        double *v = malloc((run->nsteps + 1) * sizeof *v);
        int64_t *s = malloc((run->nsteps + 1) * sizeof *s);
        if (!v || !s) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        vals[r] = v;
        if (fp4s_mm_run_series(run, metric, v)) {
            fprintf(stderr, "fp4-plot: --metric: unknown metric '%s' for run '%s' of %s (see fp4-mismatch(1))\n"
                            "Try 'fp4-plot --help'.\n",
                    metric, run->name, run->source);
            free(s);
            return give_up(FP4S_EXIT_USAGE, vals, r, on, &res);
        }
        for (size_t i = 0; i < run->nsteps; i++) {
            s[i] = run->steps[i].step;
            if (!isfinite(v[i])) continue;
            if (v[i] < amin) amin = v[i];
            if (v[i] > amax) amax = v[i];
            if (v[i] <= 0) nonpos = 1;
            else {
                if (v[i] < vmin) vmin = v[i];
                if (v[i] > vmax) vmax = v[i];
            }
        }
        int rc = fp4s_mm_onset_find(s, v, run->nsteps, oo, &on[r]);
        if (rc && rc != FP4S_EEMPTY) {
            int st = cli_report(rc);
            free(s);
            return give_up(st, vals, r, on, &res);
        }
        free(s);
    }
    int logy = scale > 0 ? 1 : scale < 0 ? 0 : (!nonpos && vmax >= 10 * vmin && isfinite(vmin));
    if (logy && nonpos)
        fprintf(stderr, "fp4-plot: note: --log with values <= 0 of %s: those points are left out\n", metric);
    /* data files */
    const char **files = calloc(res.nruns, sizeof *files);
    if (!files) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int *has_y2 = calloc(res.nruns ? res.nruns : 1, sizeof *has_y2);
    if (!has_y2) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (size_t r = 0; r < res.nruns; r++) {
        fp4s_mm_run *run = &res.runs[r];
        double *w = NULL;
        if (y2 && fp4s_mm_run_count(run, y2)) {
            w = malloc((run->nsteps + 1) * sizeof *w);
            if (!w) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
            has_y2[r] = !fp4s_mm_run_series(run, y2, w);
        }
        text d = {0};
        tx_add(&d, "# run %s (%s): %s per training step\n# step %s tokens%s%s\n", run->name, run->source, metric,
               metric, has_y2[r] ? " " : "", has_y2[r] ? y2 : "");
        for (size_t i = 0; i < run->nsteps; i++) {
            double v = vals[r][i];
            if (logy && !(v > 0)) v = NAN;
            tx_add(&d, "%lld", (long long)run->steps[i].step);
            tx_num(&d, v);
            tx_add(&d, " %llu", (unsigned long long)run->steps[i].tokens);
            if (has_y2[r]) tx_num(&d, w[i]);
            tx_add(&d, "\n");
        }
        free(w);
        files[r] = write_data(p, run->name, &d);
        tx_free(&d);
    }
    text *s = &p->script;
    script_header(p, "fp4-plot mismatch");
    char title[1024];
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else {
        const char *syn = "";
        for (size_t r = 0; r < res.nruns; r++)
            if (cli_source_synthetic(res.runs[r].source)) syn = " (synthetic data)";
        snprintf(title, sizeof title, "Rollout vs trainer log-prob mismatch: %s per step%s", metric, syn);
    }
    tx_add(s, "set title ");
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set xlabel \"training step\"\n");
    tx_add(s, "set ylabel ");
    tx_label(s, mi >= 0 ? fp4s_mm_metric_label((size_t)mi) : metric);
    tx_add(s, "\n");
    if (logy) {
        tx_add(s, "set logscale y\nset format y '%s'\nset mytics 10\n", logfmt());
        if (isfinite(vmin) && vmax > 0) tx_add(s, "set yrange [%.6g:%.6g]\n", vmin / 1.6, vmax * 2.5);
    } else {
        tx_add(s, "set format y '%%g'\n");
        if (isfinite(amin) && isfinite(amax)) {
            double span = amax > amin ? amax - amin : (fabs(amax) > 0 ? fabs(amax) : 1);
            double lo = amin - 0.05 * span, hi = amax + 0.2 * span;
            if (amin >= 0 && lo < 0) lo = 0;
            tx_add(s, "set yrange [%.6g:%.6g]\n", lo, hi);
        }
    }
    if (y2) {
        int y2i = fp4s_mm_metric_lookup(y2);
        tx_add(s, "set y2label ");
        tx_label(s, y2i >= 0 ? fp4s_mm_metric_label((size_t)y2i) : y2);
        tx_add(s, "\nset y2tics\nset ytics nomirror\nset format y2 '%%g'\n");
    }
    tx_add(s, "set key top left box opaque samplen 3\n");
    if (g_enhanced) tx_add(s, "set style textbox opaque noborder margins 1,1\n");
    /* the onset: a dashed line behind the data, named in the key (a label in
     * the plot area would hide the data under it) */
    for (size_t r = 0; r < res.nruns; r++) {
        if (!on[r].found) continue;
        const char *c = colors[r % NCOLORS];
        tx_add(s, "set arrow from %lld, graph 0 to %lld, graph 1 nohead dt 2 lw 1.5 lc rgb '%s' back\n",
               (long long)on[r].step, (long long)on[r].step, c);
    }
    tx_add(s, "plot ");
    for (size_t r = 0; r < res.nruns; r++) {
        const char *c = colors[r % NCOLORS];
        tx_add(s, "%s", r ? ", \\\n     " : "");
        tx_str(s, files[r]);
        tx_add(s, " using 1:2 with linespoints lw 2 pt 7 ps 0.45 lc rgb '%s' title ", c);
        tx_label(s, res.runs[r].name);
        if (has_y2[r]) {
            char lab[600];
            snprintf(lab, sizeof lab, "%s: %s (right axis)", res.runs[r].name, y2);
            tx_add(s, ", \\\n     ");
            tx_str(s, files[r]);
            tx_add(s, " using 1:4 axes x1y2 with lines dt 4 lw 1.5 lc rgb '%s' title ", c);
            tx_label(s, lab);
        }
        if (on[r].found) {
            char lab[600];
            snprintf(lab, sizeof lab, "onset %s: step %lld", res.runs[r].name, (long long)on[r].step);
            tx_add(s, ", \\\n     NaN with lines dt 2 lw 1.5 lc rgb '%s' title ", c);
            tx_label(s, lab);
        }
        if (on[r].found && isfinite(on[r].threshold) && (!logy || on[r].threshold > 0)) {
            tx_add(s, ", \\\n     %.9g with lines dt 3 lw 1 lc rgb '%s' title ", on[r].threshold, c);
            char lab[600];
            snprintf(lab, sizeof lab, "%s onset threshold", res.runs[r].name);
            tx_label(s, lab);
        }
    }
    for (size_t r = 0; r < res.nruns; r++) {
        if (!on[r].found) continue;
        double v = on[r].value;
        if (!isfinite(v) || (logy && !(v > 0))) continue;
        tx_add(s, ", \\\n     '+' using (%lld):(%.9g) every ::0::0 with points pt 6 ps 2.2 lw 2 lc rgb '%s' notitle",
               (long long)on[r].step, v, colors[r % NCOLORS]);
    }
    tx_add(s, "\n");
    free(files);
    free(has_y2);
    free(on);
    for (size_t r = 0; r < res.nruns; r++) free(vals[r]);
    free(vals);
    fp4s_mm_result_free(&res);
    return plot_finish(p);
}

