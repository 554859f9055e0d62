/* fp4-plot components: the shares of ||e||^2 (scale, dead zone, grid, cross
 * terms) of each input of an fp4-decompose report. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_components(plot *p, int nrep, char **paths)
{
    if (nrep < 1) cli_usage("components: no REPORT given");
    text d = {0};
    tx_add(&d, "# per input of each report: index label scale deadzone grid cross(=1-sum) shares, then the energies "
              "scale deadzone grid cross total (||e||^2 units)\n");
    size_t k = 0, maxlab = 0;
    double lo = 0, hi = 1, elo = 0, ehi = 0;
    char qd0[300] = "", syn[32] = "", legend[900] = "";
    int same_q = 1;
    size_t *first = xcalloc((size_t)nrep + 1, sizeof *first);
    for (int ri = 0; ri < nrep; ri++) {
        json_t *j = load_report(paths[ri], "fp4-decompose");
        json_t *inputs = arr_field(j, "inputs", "report");
        size_t n = json_array_size(inputs);
        if (n == 0) bad_report("inputs: empty list");
        char qd[300];
        report_quantizer(j, qd, sizeof qd);
        if (ri == 0) snprintf(qd0, sizeof qd0, "%s", qd);
        else if (strcmp(qd, qd0) != 0) same_q = 0;
        size_t ll = strlen(legend);
        if (nrep > 1 && ll < sizeof legend)
            snprintf(legend + ll, sizeof legend - ll, "%sR%d = %s", ri ? "; " : "", ri + 1, qd);
        if (*report_synthetic(j)) snprintf(syn, sizeof syn, "%s", report_synthetic(j));
        json_t *rollup = json_object_get(j, "rollup");
        size_t rows = n + (json_is_object(rollup) && n > 1 ? 1 : 0);
        first[ri] = k;
        for (size_t i = 0; i < rows; i++) {
            json_t *sm;
            char where[64], label[600];
            if (i < n) {
                json_t *in = json_array_get(inputs, i);
                snprintf(where, sizeof where, "inputs[%zu]", i);
                if (!json_is_object(in)) bad_report("%s: not an object", where);
                sm = obj_field(in, "summary", where);
                input_label(in, i, label, sizeof label);
                snprintf(where, sizeof where, "inputs[%zu].summary", i);
            } else {
                sm = rollup;
                snprintf(where, sizeof where, "rollup");
                snprintf(label, sizeof label, "all inputs");
            }
            if (nrep > 1) {
                size_t l = strlen(label);
                snprintf(label + l, sizeof label - l, " [R%d]", ri + 1);
            }
            double tot = num_field(sm, "energy_total", where, 1);
            double es = num_field(sm, "energy_scale", where, 1), ed = num_field(sm, "energy_deadzone", where, 1),
                   eg = num_field(sm, "energy_grid", where, 1);
            if (!(tot > 0)) bad_report("%s: energy_total %g is not positive", where, tot);
            double rs = es / tot, rd = ed / tot, rg = eg / tot;
            double cross = 1.0 - (rs + rd + rg);
            if (strlen(label) > maxlab) maxlab = strlen(label);
            if (rs + rd + rg > hi) hi = rs + rd + rg;
            if (cross < lo) lo = cross;
            int is_rollup = i >= n;
            if (!is_rollup) { /* the roll-up's energies (the sum) would flatten the others */
                if (es + ed + eg > ehi) ehi = es + ed + eg;
                if (tot > ehi) ehi = tot;
                if (tot - (es + ed + eg) < elo) elo = tot - (es + ed + eg);
            }
            tx_add(&d, "%zu ", k);
            char q[700];
            size_t qi = 0;
            for (const char *c = label; *c && qi + 2 < sizeof q; c++) q[qi++] = *c == '"' ? '\'' : *c;
            q[qi] = '\0';
            tx_add(&d, "\"%s\"", q);
            tx_num(&d, rs);
            tx_num(&d, rd);
            tx_num(&d, rg);
            tx_num(&d, cross);
            tx_num(&d, es);
            tx_num(&d, ed);
            tx_num(&d, eg);
            tx_num(&d, tot - (es + ed + eg));
            tx_num(&d, tot);
            tx_add(&d, " %d\n", is_rollup);
            k++;
        }
        json_decref(j);
    }
    first[nrep] = k;
    const char *df = write_data(p, NULL, &d);
    tx_free(&d);
    text *s = &p->script;
    script_header(p, "fp4-plot components");
    char title[1024];
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else if (nrep > 1 && !same_q)
        snprintf(title, sizeof title, "Quantization error decomposition%s\n%s", syn, legend);
    else
        snprintf(title, sizeof title, "Quantization error decomposition%s%s%s", same_q && *qd0 ? ": " : "",
                 same_q ? qd0 : "", syn);
    tx_add(s, "set multiplot title ");
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.7\n");
    tx_add(s, "set xrange [-0.6:%zu.6]\n", k - 1);
    tx_add(s, "set key at screen 0.99, screen %.3f right top box\nset grid ytics\nset xzeroaxis lt -1\n", 0.88);
    /* two panels on one x axis, the tick labels (rotated site names) below */
    double lab = 0.05 + 0.5 * 6.0 * (double)maxlab / (double)p->height; /* rotated by 30 degrees */
    double lm = 0.02 + 0.87 * 6.0 * (double)maxlab / (double)p->width;
    if (lab > 0.45) lab = 0.45;
    if (lm < 0.09) lm = 0.09;
    if (lm > 0.35) lm = 0.35;
    double top = 0.88, mid = lab + 0.5 * (top - lab);
    tx_add(s, "set lmargin at screen %.4f\nset rmargin at screen 0.80\n", lm);
    /* report boundaries */
    for (int ri = 1; ri < nrep; ri++)
        tx_add(s, "set arrow from %.1f, graph 0 to %.1f, graph 1 nohead lc rgb '#555555' dt 2\n",
               (double)first[ri] - 0.5, (double)first[ri] - 0.5);
    /* shares (top): FLOOR and CEIL can look alike here... */
    tx_add(s, "unset xtics\nset tmargin at screen %.4f\nset bmargin at screen %.4f\nset ylabel \"share of ||e||^2 (energy / total)\"\n",
           top, mid + 0.02);
    tx_add(s, "set yrange [%.3f:%.3f]\n", lo < 0 ? lo * 1.15 : 0, hi * 1.12);
    tx_add(s, "plot ");
    tx_str(s, df);
    tx_add(s, " using 1:($3+$4+$5) with boxes lc rgb '#2ca02c' title \"grid noise\", \\\n"
              "     '' using 1:($3+$4) with boxes lc rgb '#ff7f0e' title \"dead zone\", \\\n"
              "     '' using 1:3 with boxes lc rgb '#1f77b4' title \"scale bias\", \\\n"
              "     '' using 1:6 with boxes lc rgb '#7f7f7f' title \"cross terms (1 - sum)\", \\\n"
              "     1 with lines dt 2 lw 1.5 lc rgb 'black' title \"||e||^2 = 1\"\n");
    /* ... the energies (bottom) tell them apart */
    tx_add(s, "set xtics rotate by 30 right font ',%d' nomirror noenhanced\n", k > 24 ? 8 : 10);
    tx_add(s, "set tmargin at screen %.4f\nset bmargin at screen %.4f\nset ylabel \"energy (units of x^2)\"\n"
              "set key at screen 0.99, screen %.4f right top box\n", mid - 0.01, lab, mid - 0.01);
    tx_add(s, "set yrange [%.6g:%.6g]\n", elo < 0 ? elo * 1.15 : 0, ehi * 1.12);
    tx_add(s, "plot ");
    tx_str(s, df);
    /* the roll-up (column 12) has no bars here: its energies are the sums */
    tx_add(s, " using 1:($12 > 0 ? NaN : $7+$8+$9):xtic(2) with boxes lc rgb '#2ca02c' notitle, \\\n"
              "     '' using 1:($12 > 0 ? NaN : $7+$8) with boxes lc rgb '#ff7f0e' notitle, \\\n"
              "     '' using 1:($12 > 0 ? NaN : $7) with boxes lc rgb '#1f77b4' notitle, \\\n"
              "     '' using 1:($12 > 0 ? NaN : $10) with boxes lc rgb '#7f7f7f' notitle, \\\n"
              "     '' using 1:($12 > 0 ? NaN : $11) with points pt 2 ps 1.5 lw 2 lc rgb 'black' title \"||e||^2\"\n");
    tx_add(s, "unset multiplot\n");
    free(first);
    return plot_finish(p);
}
