/* fp4-plot components: the shares of ||e||^2 (scale, dead zone, grid, cross
 * terms) of each input of an fp4-decompose report. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_components(plot *p, const char *path)
{
    json_t *j = load_report(path, "fp4-decompose");
    json_t *inputs = arr_field(j, "inputs", "report");
    size_t n = json_array_size(inputs);
    if (n == 0) bad_report("inputs: empty list");
    text d = {0};
    tx_add(&d, "# shares of ||e||^2 per input: index label scale deadzone grid cross(=1-sum)\n");
    size_t k = 0, maxlab = 0;
    double lo = 0, hi = 1;
    json_t *rollup = json_object_get(j, "rollup");
    size_t rows = n + (json_is_object(rollup) && n > 1 ? 1 : 0);
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
        double tot = num_field(sm, "energy_total", where, 1);
        double rs = num_field(sm, "ratio_scale", where, 0), rd = num_field(sm, "ratio_deadzone", where, 0),
               rg = num_field(sm, "ratio_grid", where, 0);
        if (!isfinite(rs) || !isfinite(rd) || !isfinite(rg)) {
            double es = num_field(sm, "energy_scale", where, 1), ed = num_field(sm, "energy_deadzone", where, 1),
                   eg = num_field(sm, "energy_grid", where, 1);
            if (!(tot > 0)) bad_report("%s: energy_total %g is not positive", where, tot);
            rs = es / tot;
            rd = ed / tot;
            rg = eg / tot;
        }
        double cross = 1.0 - (rs + rd + rg);
        if (strlen(label) > maxlab) maxlab = strlen(label);
        if (rs + rd + rg > hi) hi = rs + rd + rg;
        if (cross < lo) lo = cross;
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
        tx_add(&d, "\n");
        k++;
    }
    const char *df = write_data(p, NULL, &d);
    tx_free(&d);
    text *s = &p->script;
    script_header(p, "fp4-plot components");
    char title[1024];
    json_t *fmt = json_object_get(j, "format"), *prof = json_object_get(j, "profile");
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else
        snprintf(title, sizeof title, "Quantization error decomposition%s%s%s%s%s", json_is_string(fmt) ? ": " : "",
                 json_is_string(fmt) ? json_string_value(fmt) : "", json_is_string(prof) ? ", " : "",
                 json_is_string(prof) ? json_string_value(prof) : "", report_synthetic(j));
    tx_add(s, "set title ");
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set ylabel \"share of ||e||^2 (energy / total)\"\n");
    tx_add(s, "set style fill solid 0.85 border rgb '#333333'\nset boxwidth 0.7\n");
    tx_add(s, "set xrange [-0.6:%zu.6]\nset yrange [%.3f:%.3f]\n", k - 1, lo < 0 ? lo * 1.15 : 0, hi * 1.12);
    tx_add(s, "set xtics rotate by 30 right font ',%d' nomirror noenhanced\n", k > 24 ? 8 : 10);
    tx_add(s, "set key outside right top box\nset grid ytics\nset xzeroaxis lt -1\n");
    size_t bm = (size_t)((double)maxlab * 0.2) + 3, lm = (size_t)((double)maxlab * 0.55);
    tx_add(s, "set bmargin %zu\nset lmargin %zu\n", bm > 20 ? (size_t)20 : bm, lm < 10 ? (size_t)10 : (lm > 30 ? (size_t)30 : lm));
    tx_add(s, "plot ");
    tx_str(s, df);
    tx_add(s, " using 1:($3+$4+$5):xtic(2) with boxes lc rgb '#2ca02c' title \"grid noise\", \\\n"
              "     '' using 1:($3+$4) with boxes lc rgb '#ff7f0e' title \"dead zone\", \\\n"
              "     '' using 1:3 with boxes lc rgb '#1f77b4' title \"scale bias\", \\\n"
              "     '' using 1:6 with boxes lc rgb '#7f7f7f' title \"cross terms (1 - sum)\", \\\n"
              "     1 with lines dt 2 lw 1.5 lc rgb 'black' title \"||e||^2 = 1\"\n");
    json_decref(j);
    return plot_finish(p);
}

