/* fp4-plot channels: sorted per-channel scores with the selected set, and the
 * coverage curve of an fp4-channels report. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_channels(plot *p, const char *path)
{
    json_t *j = load_report(path, "fp4-channels");
    json_t *ch = arr_field(j, "channels", "report");
    size_t n = json_array_size(ch);
    if (n == 0) bad_report("channels: empty list");
    text d = {0};
    tx_add(&d, "# rank channel score selected(1/0)\n");
    double smin = INFINITY, smax = -INFINITY;
    size_t nsel = 0;
    /* the error energy of each channel by rank, for the whole coverage curve */
    double *en = xcalloc(n, sizeof *en), etot = 0;
    int have_energy = 1;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(ch, i);
        char where[64];
        snprintf(where, sizeof where, "channels[%zu]", i);
        if (!json_is_object(c)) bad_report("%s: not an object", where);
        double sc = num_field(c, "score", where, 1);
        double chn = num_field(c, "channel", where, 1);
        double rk = num_field(c, "rank", where, 0);
        double ec = num_field(c, "energy_total", where, 0);
        size_t ri = isfinite(rk) && rk >= 1 && rk <= (double)n ? (size_t)rk - 1 : i;
        if (isfinite(ec) && ec >= 0) {
            en[ri] = ec;
            etot += ec;
        } else {
            have_energy = 0;
        }
        json_t *sel = json_object_get(c, "selected");
        if (sel && !json_is_boolean(sel)) bad_report("%s: 'selected' is not a boolean", where);
        int is = sel && json_is_true(sel);
        nsel += (size_t)is;
        if (sc > 0 && sc < smin) smin = sc;
        if (sc > smax) smax = sc;
        tx_add(&d, "%.0f", isfinite(rk) ? rk : (double)(i + 1));
        tx_num(&d, chn);
        tx_num(&d, sc);
        tx_add(&d, " %d\n", is);
    }
    json_t *cov = json_object_get(j, "coverage");
    const char *cf = NULL;
    text c = {0};
    int has_cov = cov && json_is_array(cov) && json_array_size(cov) > 0;
    if (cov && !json_is_array(cov)) bad_report("'coverage' is not an array");
    if (have_energy && etot > 0) {
        /* the curve at every rank up to 16, then 40 points a decade: the top
         * few channels (where it bends) are as visible as the tail */
        has_cov = 1;
        tx_add(&c, "# ratio channels share (cumulative energy_total of the channels by rank)\n");
        double cum = 0, next = 1;
        for (size_t k = 1; k <= n; k++) {
            cum += en[k - 1];
            if ((double)k < next && k != n && k != nsel) continue;
            tx_num(&c, (double)k / (double)n);
            tx_add(&c, " %zu", k);
            tx_num(&c, cum / etot);
            tx_add(&c, "\n");
            next = k < 16 ? (double)k + 1 : next * pow(10.0, 1.0 / 40.0);
            while (next <= (double)k) next += 1;
        }
    } else if (has_cov) {
        tx_add(&c, "# ratio channels share\n");
        for (size_t i = 0; i < json_array_size(cov); i++) {
            json_t *e = json_array_get(cov, i);
            char where[64];
            snprintf(where, sizeof where, "coverage[%zu]", i);
            if (!json_is_object(e)) bad_report("%s: not an object", where);
            tx_num(&c, num_field(e, "ratio", where, 1));
            tx_num(&c, num_field(e, "channels", where, 0));
            tx_num(&c, num_field(e, "share", where, 1));
            tx_add(&c, "\n");
        }
    }
    const char *df = write_data(p, "channels", &d);
    tx_free(&d);
    if (has_cov) cf = write_data(p, "coverage", &c);
    tx_free(&c);
    int logy = isfinite(smin) && smin > 0 && smax >= 10 * smin;
    json_t *score = json_object_get(j, "score");
    const char *sname = json_is_string(score) ? json_string_value(score) : "score";
    text *s = &p->script;
    script_header(p, "fp4-plot channels");
    char title[1024];
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else {
        char qd[300];
        report_quantizer(j, qd, sizeof qd);
        snprintf(title, sizeof title, "Per-channel quantization error%s%s (%s score), %zu channels, %zu selected%s",
                 *qd ? ", " : "", qd, sname, n, nsel, report_synthetic(j));
    }
    tx_add(s, "set multiplot layout 1,%d title ", cf ? 2 : 1);
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set xlabel \"channel rank (best first)\"\nset ylabel ");
    char yl[256];
    snprintf(yl, sizeof yl, "%s score", sname);
    tx_label(s, yl);
    tx_add(s, "\n");
    if (logy) tx_add(s, "set logscale y\nset format y '%s'\n", logfmt());
    /* ranks on a log axis: the top channels are not squeezed against x = 0 */
    tx_add(s, "set logscale x\nset format x '%%g'\nset key top right box opaque\nset xrange [0.8:%zu]\n",
           n + n / 4 + 1);
    tx_add(s, "plot ");
    tx_str(s, df);
    tx_add(s, " using 1:3 with lines lw 1.5 lc rgb '#1f77b4' title \"all channels\", \\\n     ");
    tx_str(s, df);
    tx_add(s, " using 1:($4 > 0 ? $3 : NaN) with points pt 7 ps 0.8 lc rgb '#d62728' title \"selected (top-k)\"\n");
    if (cf) {
        tx_add(s, "unset logscale y\nset format y '%%g'\n");
        tx_add(s, "set title \"coverage\"\nset xlabel \"fraction of channels compensated (log scale)\"\n"
                  "set ylabel \"share of the error energy covered\"\n");
        tx_add(s, "set xrange [%.6g:1]\nset yrange [0:1.05]\nset key top left box opaque\n", 0.8 / (double)n);
        if (nsel > 0)
            tx_add(s, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead dt 2 lc rgb '#d62728'\n",
                   (double)nsel / (double)n, (double)nsel / (double)n);
        tx_add(s, "plot ");
        tx_str(s, cf);
        tx_add(s, " using 1:3 with linespoints lw 2 pt 7 ps 0.5 lc rgb '#2ca02c' title \"coverage\", \\\n"
                  "     x with lines dt 3 lc rgb '#7f7f7f' title \"uniform\"");
        if (nsel > 0) tx_add(s, ", \\\n     NaN with lines dt 2 lc rgb '#d62728' title \"selection (%zu)\"", nsel);
        tx_add(s, "\n");
    }
    tx_add(s, "unset multiplot\n");
    free(en);
    json_decref(j);
    return plot_finish(p);
}

