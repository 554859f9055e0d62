/* fp4-plot hist: the delta and error histograms of an fp4-decompose report. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hist_series(json_t *h, const char *where, text *d, double *cmin, double *cmax)
{
    json_t *e = arr_field(h, "edges", where), *c = arr_field(h, "counts", where);
    size_t ne = json_array_size(e), nc = json_array_size(c);
    if (nc == 0 || ne != nc + 1) bad_report("%s: %zu edges for %zu counts (need counts + 1)", where, ne, nc);
    tx_add(d, "# center count width\n");
    for (size_t i = 0; i < nc; i++) {
        json_t *a = json_array_get(e, i), *b = json_array_get(e, i + 1), *v = json_array_get(c, i);
        if (!json_is_number(a) || !json_is_number(b) || !json_is_number(v))
            bad_report("%s: non-numeric edge or count at %zu", where, i);
        double x0 = json_number_value(a), x1 = json_number_value(b), y = json_number_value(v);
        if (!(x1 >= x0)) bad_report("%s: edges not increasing at %zu", where, i);
        if (y > 0 && y < *cmin) *cmin = y;
        if (y > *cmax) *cmax = y;
        tx_num(d, 0.5 * (x0 + x1));
        tx_num(d, y);
        tx_num(d, x1 - x0);
        tx_add(d, "\n");
    }
    return 0;
}

int cmd_hist(plot *p, const char *path)
{
    json_t *j = load_report(path, "fp4-decompose");
    json_t *inputs = arr_field(j, "inputs", "report");
    size_t n = json_array_size(inputs);
    if (n == 0) bad_report("inputs: empty list");
    const char *kinds[2] = {"delta", "error"};
    const char **files = calloc(2 * n, sizeof *files);
    char (*labels)[600] = calloc(n, sizeof *labels);
    text *texts = calloc(2 * n, sizeof *texts);
    if (!files || !labels || !texts) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    double cmin[2] = {INFINITY, INFINITY}, cmax[2] = {-INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        json_t *in = json_array_get(inputs, i);
        char where[96];
        snprintf(where, sizeof where, "inputs[%zu]", i);
        if (!json_is_object(in)) bad_report("%s: not an object", where);
        json_t *hs = obj_field(in, "histograms", where);
        input_label(in, i, labels[i], sizeof labels[i]);
        for (int k = 0; k < 2; k++) {
            char w2[128], series[700];
            snprintf(w2, sizeof w2, "inputs[%zu].histograms", i);
            json_t *h = obj_field(hs, kinds[k], w2);
            snprintf(w2, sizeof w2, "inputs[%zu].histograms.%s", i, kinds[k]);
            hist_series(h, w2, &texts[2 * i + (size_t)k], &cmin[k], &cmax[k]);
            (void)series;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            char series[64];
            snprintf(series, sizeof series, "%s.%zu", kinds[k], i);
            files[2 * i + (size_t)k] = write_data(p, series, &texts[2 * i + (size_t)k]);
            tx_free(&texts[2 * i + (size_t)k]);
        }
    free(texts);
    text *s = &p->script;
    script_header(p, "fp4-plot hist");
    char title[1024];
    char qd[300];
    report_quantizer(j, qd, sizeof qd);
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else snprintf(title, sizeof title, "Scale exponent offsets and quantization errors%s%s%s", *qd ? ": " : "", qd,
                  report_synthetic(j));
    /* two panels, and the key in a panel of its own below them with a row per
     * two inputs: every input is named (a key inside a panel drops the
     * entries that do not fit) */
    size_t kcols = n > 1 && g_enhanced ? 2 : 1, krows = (n + kcols - 1) / kcols; /* dumb: 100 columns */
    double kh = 0.035 + 0.034 * (double)krows;
    if (kh > 0.6) kh = 0.6;
    tx_add(s, "set multiplot title ");
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set style fill transparent solid 0.5 border\nunset key\n");
    const char *xl[2] = {"delta = log_2(s / s*) per block (scale rounding, 1 = one binade)",
                         "quantization error e / s*_b (units of the ideal block scale)"};
    const char *tl[2] = {"delta histogram", "error histogram"};
    for (int k = 0; k < 2; k++) {
        tx_add(s, "set origin %.3f, %.4f\nset size 0.5, %.4f\n", 0.5 * k, kh, 0.93 - kh);
        tx_add(s, "set title \"%s\"\nset xlabel ", tl[k]);
        tx_label(s, xl[k]);
        tx_add(s, "\nset ylabel \"count\"\n");
        int logy = isfinite(cmin[k]) && cmax[k] >= 100 * cmin[k];
        if (logy) tx_add(s, "set logscale y\nset format y '%s'\nset yrange [0.8:*]\n", logfmt());
        else tx_add(s, "unset logscale y\nset format y '%%g'\nset yrange [0:*]\n");
        tx_add(s, "plot ");
        for (size_t i = 0; i < n; i++) {
            tx_add(s, "%s", i ? ", \\\n     " : "");
            tx_str(s, files[2 * i + (size_t)k]);
            if (n == 1)
                tx_add(s, " using 1:($2 > 0 ? $2 : %s):3 with boxes lc rgb '%s' title ", logy ? "NaN" : "0",
                       colors[i % NCOLORS]);
            else
                tx_add(s, " using 1:($2 > 0 ? $2 : %s) with histeps lw 2 lc rgb '%s' title ", logy ? "NaN" : "0",
                       colors[i % NCOLORS]);
            tx_plain(s, labels[i]);
        }
        tx_add(s, "\n");
    }
    /* the key panel */
    tx_add(s, "set origin 0, 0\nset size 1, %.4f\nunset title\nunset xlabel\nunset ylabel\nunset logscale y\n"
              "unset border\nunset tics\nunset grid\nset xrange [0:1]\nset yrange [0:1]\n"
              "set key center center horizontal maxcols %zu maxrows %zu noenhanced font ',10' samplen 3\nplot ",
           kh, kcols, krows);
    for (size_t i = 0; i < n; i++) {
        tx_add(s, "%sNaN with lines lw 2 lc rgb '%s' title ", i ? ", \\\n     " : "", colors[i % NCOLORS]);
        tx_plain(s, labels[i]);
    }
    tx_add(s, "\nunset multiplot\n");
    free(files);
    free(labels);
    json_decref(j);
    return plot_finish(p);
}

