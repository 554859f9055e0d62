/* fp4-report: HTML pages (every string from a file escaped), tables written
 * as HTML and as CSV, and figures drawn by gnuplot with their script and data
 * beside the image. */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

void html_esc(text *t, const char *s)
{
    if (!s) return;
    for (; *s; s++) {
        switch (*s) {
        case '&': tx_add(t, "&amp;"); break;
        case '<': tx_add(t, "&lt;"); break;
        case '>': tx_add(t, "&gt;"); break;
        case '"': tx_add(t, "&quot;"); break;
        case '\'': tx_add(t, "&#39;"); break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') tx_add(t, "&#xFFFD;");
            else tx_add(t, "%c", *s);
        }
    }
}

void html_escf(text *t, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    html_esc(t, buf);
}

static const char css[] =
    "body{font:15px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#222;margin:0;"
    "background:#fafafa}\n"
    "main{max-width:1180px;margin:0 auto;padding:18px 28px 60px;background:#fff;"
    "box-shadow:0 0 6px rgba(0,0,0,.08)}\n"
    "h1{font-size:26px;margin:8px 0 4px}h2{font-size:21px;margin:34px 0 8px;padding-top:10px;"
    "border-top:1px solid #e3e3e3}h3{font-size:17px;margin:22px 0 6px}\n"
    "p.meta{color:#555;font-size:13px;margin:2px 0}\n"
    "nav.toc{background:#f3f6fa;border:1px solid #dde4ee;padding:8px 14px;margin:14px 0;font-size:14px}\n"
    "nav.toc a{margin-right:14px;white-space:nowrap}\n"
    "div.summary{background:#fffbe8;border:1px solid #eadfa8;padding:6px 16px;margin:14px 0}\n"
    "div.summary li{margin:4px 0}\n"
    "table{border-collapse:collapse;margin:8px 0 4px;font-size:13px}\n"
    "th,td{border:1px solid #d6d6d6;padding:3px 7px;text-align:right;vertical-align:top}\n"
    "th{background:#eef1f5;font-weight:600;text-align:center}\n"
    "td.s{text-align:left;font-family:SFMono-Regular,Consolas,'Liberation Mono',monospace;font-size:12px}\n"
    "td.t{text-align:left}\n"
    "tr:nth-child(even) td{background-color:#fbfbfb}\n"
    "p.tnote{font-size:12px;color:#555;margin:0 0 12px}\n"
    "figure{margin:12px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #e3e3e3}\n"
    "figcaption{font-size:13px;color:#444;max-width:1000px}\n"
    "div.missing{border:1px dashed #c66;padding:10px;color:#933;font-size:13px;max-width:900px}\n"
    "code{font-family:SFMono-Regular,Consolas,'Liberation Mono',monospace;font-size:90%}\n"
    "p.note{color:#555;font-size:13.5px;max-width:1000px}\n"
    "a{color:#1a5fb4}\n";

void html_begin(text *t, const char *title, const char *up)
{
    tx_add(t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
              "<meta name=\"generator\" content=\"fp4-report (fp4scope %s)\">\n<title>",
           fp4s_version());
    html_esc(t, title);
    tx_add(t, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", css);
    if (up && *up) {
        tx_add(t, "<p class=\"meta\"><a href=\"");
        html_esc(t, up);
        tx_add(t, "\">&larr; back</a></p>\n");
    }
}

void html_end(text *t)
{
    tx_add(t, "<p class=\"meta\" style=\"margin-top:40px\">Written by fp4-report (fp4scope %s). "
              "Every table is also a CSV file and every figure has its gnuplot script and data beside it "
              "in this directory.</p>\n</main>\n</body>\n</html>\n",
           fp4s_version());
}

const char *fmtnum(char *buf, size_t n, const char *fmt, double v)
{
    if (isnan(v)) snprintf(buf, n, "-");
    else if (isinf(v)) snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    else if (!fmt || !strcmp(fmt, "int")) snprintf(buf, n, "%.0f", v);
    else if (!strcmp(fmt, "pct")) {
        double p = 100 * v;
        if (p != 0 && fabs(p) < 0.1) snprintf(buf, n, "%.2g%%", p);
        else snprintf(buf, n, "%.1f%%", p);
    } else snprintf(buf, n, fmt, v);
    return buf;
}

/* ---- tables ----------------------------------------------------------------------------- */
void rt_init(rtable *t, const char *id, const char *title, const rt_col *cols, size_t ncol)
{
    memset(t, 0, sizeof *t);
    snprintf(t->id, sizeof t->id, "%s", id);
    snprintf(t->title, sizeof t->title, "%s", title ? title : "");
    t->cols = cols;
    t->ncol = ncol;
}

static rt_cell *add_cell(rtable *t)
{
    size_t n = t->ncell;
    if (n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->cells = xrealloc(t->cells, t->cap * sizeof *t->cells);
    }
    rt_cell *c = &t->cells[n];
    memset(c, 0, sizeof *c);
    c->shade = NAN;
    t->ncell++;
    return c;
}

void rt_s(rtable *t, const char *s)
{
    rt_cell *c = add_cell(t);
    c->s = xstrdup(s ? s : "");
}

void rt_n(rtable *t, double v)
{
    rt_cell *c = add_cell(t);
    c->num = true;
    c->v = v;
}

void rt_link(rtable *t, const char *s, const char *href)
{
    rt_cell *c = add_cell(t);
    c->s = xstrdup(s ? s : "");
    if (href && *href) c->href = xstrdup(href);
}

void rt_shade(rtable *t, double shade)
{
    if (t->ncell) t->cells[t->ncell - 1].shade = shade;
}

void rt_mark(rtable *t)
{
    if (t->ncell) t->cells[t->ncell - 1].mark = true;
}

static void csv_field(text *o, const char *s)
{
    char *q = cli_csv_cell(s);
    tx_add(o, "%s", q);
    free(q);
}

void rt_emit(rtable *t, outdir *od, const char *dir, text *page)
{
    size_t nc = t->ncell, rows = t->ncol ? nc / t->ncol : 0;
    if (t->ncol && nc % t->ncol) cli_die(FP4S_EXIT_INTERNAL, "table %s: %zu cells for %zu columns", t->id, nc, t->ncol);
    text csv = {0};
    for (size_t c = 0; c < t->ncol; c++) {
        if (c) tx_add(&csv, ",");
        csv_field(&csv, t->cols[c].name);
    }
    tx_add(&csv, "\n");
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < t->ncol; c++) {
            const rt_cell *x = &t->cells[r * t->ncol + c];
            if (c) tx_add(&csv, ",");
            if (!x->num) csv_field(&csv, x->s);
            else if (isnan(x->v)) {
            } else if (isinf(x->v)) tx_add(&csv, "%s", x->v > 0 ? "inf" : "-inf");
            else tx_add(&csv, "%.17g", x->v);
        }
        tx_add(&csv, "\n");
    }
    char rel[512];
    snprintf(rel, sizeof rel, "%s%s%s.csv", dir, *dir ? "/" : "", t->id);
    od_write(od, rel, csv.p ? csv.p : "", csv.n);
    tx_free(&csv);

    if (*t->title) {
        tx_add(page, "<h3 id=\"table-%s\">", t->id); /* not the id of a section */
        html_esc(page, t->title);
        tx_add(page, "</h3>\n");
    }
    tx_add(page, "<table>\n<tr>");
    for (size_t c = 0; c < t->ncol; c++) {
        tx_add(page, "<th");
        if (t->cols[c].title) {
            tx_add(page, " title=\"");
            html_esc(page, t->cols[c].title);
            tx_add(page, "\"");
        }
        tx_add(page, ">");
        html_esc(page, t->cols[c].head);
        tx_add(page, "</th>");
    }
    tx_add(page, "</tr>\n");
    size_t shown = t->html_rows && t->html_rows < rows ? t->html_rows : rows;
    for (size_t r = 0; r < shown; r++) {
        tx_add(page, "<tr>");
        for (size_t c = 0; c < t->ncol; c++) {
            const rt_cell *x = &t->cells[r * t->ncol + c];
            tx_add(page, "<td");
            if (!x->num) tx_add(page, t->cols[c].fmt && !strcmp(t->cols[c].fmt, "text") ? " class=\"t\"" : " class=\"s\"");
            if (x->mark) {
                tx_add(page, " style=\"background-color:#cfe3ff;font-weight:700\"");
            } else if (isfinite(x->shade) && x->shade > 0) {
                double a = x->shade > 1 ? 1 : x->shade;
                tx_add(page, " style=\"background-color:rgba(214,39,40,%.2f)\"", 0.08 + 0.5 * a);
            }
            tx_add(page, ">");
            if (x->href) {
                tx_add(page, "<a href=\"");
                html_esc(page, x->href);
                tx_add(page, "\">");
            }
            if (x->num) {
                char b[64];
                html_esc(page, fmtnum(b, sizeof b, t->cols[c].fmt, x->v));
            } else {
                /* names break after their dots (a site path is long) */
                for (const char *p = x->s; *p; p++) {
                    char one[2] = {*p, 0};
                    html_esc(page, one);
                    if ((*p == '.' || *p == '/' || *p == '_') && p[1]) tx_add(page, "<wbr>");
                }
            }
            if (x->href) tx_add(page, "</a>");
            tx_add(page, "</td>");
        }
        tx_add(page, "</tr>\n");
    }
    tx_add(page, "</table>\n<p class=\"tnote\">");
    if (shown < rows) tx_add(page, "%zu of %zu rows shown; all of them in ", shown, rows);
    else tx_add(page, "%zu row%s; also as ", rows, rows == 1 ? "" : "s");
    tx_add(page, "<a href=\"");
    html_esc(page, t->id);
    tx_add(page, ".csv\">");
    html_esc(page, t->id);
    tx_add(page, ".csv</a></p>\n");
}

void rt_free(rtable *t)
{
    for (size_t i = 0; i < t->ncell; i++) {
        free(t->cells[i].s);
        free(t->cells[i].href);
    }
    free(t->cells);
    memset(t, 0, sizeof *t);
}

/* ---- figures ------------------------------------------------------------------------------ */
static int nmissing;
static int gnuplot_state; /* 0 unknown, 1 found, -1 missing */
static char gnuplot_exe[4096];

int figs_missing(void) { return nmissing; }

void fig_init(fig *f, const char *dir, const char *stem, int width, int height)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    snprintf(f->stem, sizeof f->stem, "%s", stem);
    f->width = width;
    f->height = height;
    g_enhanced = 1;
    text *s = &f->script;
    tx_add(s, "# %s -- written by fp4-report (fp4scope %s).\n", stem, fp4s_version());
    tx_add(s, "# Redraw (after editing) with:  cd <this directory> && gnuplot %s.gp\n", stem);
    tx_add(s, "if (!exists(\"outfile\")) outfile = '%s.png'\n", stem);
    tx_add(s, "set terminal pngcairo size %d,%d enhanced font 'Sans,11' linewidth 1.3\n", width, height);
    tx_add(s, "set output outfile\nset datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset border lw 1\n");
}

const char *fig_data(fig *f, outdir *od, const char *series, const text *data)
{
    static char base[512];
    char s[128];
    size_t k = 0;
    for (const char *c = series; *c && k + 1 < sizeof s; c++)
        s[k++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-')
                     ? *c
                     : '_';
    s[k] = '\0';
    snprintf(base, sizeof base, "%s.%s.dat", f->stem, k ? s : "data");
    char rel[1024];
    snprintf(rel, sizeof rel, "%s%s%s", f->dir, *f->dir ? "/" : "", base);
    od_write(od, rel, data->p ? data->p : "", data->n);
    return base;
}

/* The figures to draw: one gnuplot run draws them all at the end (figs_draw). */
typedef struct pending {
    char dir[256], stem[128];
} pending;
static pending *todo;
static size_t ntodo;

void fig_emit(fig *f, outdir *od, text *page, const char *caption)
{
    char rel[1024], gp[256];
    snprintf(gp, sizeof gp, "%s.gp", f->stem);
    snprintf(rel, sizeof rel, "%s%s%s", f->dir, *f->dir ? "/" : "", gp);
    od_write(od, rel, f->script.p, f->script.n);
    if (gnuplot_state == 0) {
        const char *prog;
        gnuplot_state = plot_gnuplot(gnuplot_exe, sizeof gnuplot_exe, &prog) ? 1 : -1;
        if (gnuplot_state < 0)
            fprintf(stderr, "%s: note: gnuplot not found (%s): the figures' scripts and data are written, "
                            "not their images (run 'gnuplot FIGURE.gp' in the report directory)\n",
                    cli_prog(), prog);
    }
    bool drawn = gnuplot_state > 0;
    if (drawn) {
        todo = xrealloc(todo, (ntodo + 1) * sizeof *todo);
        snprintf(todo[ntodo].dir, sizeof todo[ntodo].dir, "%s", f->dir);
        snprintf(todo[ntodo].stem, sizeof todo[ntodo].stem, "%s", f->stem);
        ntodo++;
    } else {
        nmissing++;
    }
    tx_add(page, "<figure>\n");
    if (drawn) {
        tx_add(page, "<img src=\"%s.png\" width=\"%d\" height=\"%d\" alt=\"", f->stem, f->width, f->height);
        html_esc(page, caption);
        tx_add(page, "\">\n");
    } else {
        tx_add(page, "<div class=\"missing\">Figure not drawn: gnuplot was not found when this report was "
                     "written. Run <code>gnuplot %s</code> in this directory to draw <code>%s.png</code>.</div>\n",
               gp, f->stem);
    }
    tx_add(page, "<figcaption>");
    html_esc(page, caption);
    tx_add(page, " <a href=\"%s\">[gnuplot script]</a></figcaption>\n</figure>\n", gp);
    tx_free(&f->script);
}

/* Draw every figure in one gnuplot run: a script in the staging directory
 * that goes into each figure's directory, sets its image and loads its script
 * (the same script 'gnuplot FIGURE.gp' runs there). Exit 4 when it fails. */
void figs_draw(outdir *od)
{
    if (!ntodo) return;
    rep_progress("drawing %zu figures with gnuplot", ntodo);
    text m = {0};
    for (size_t i = 0; i < ntodo; i++) {
        const pending *p = &todo[i];
        char png[512];
        snprintf(png, sizeof png, "%s%s%s.png", p->dir, *p->dir ? "/" : "", p->stem);
        od_track(od, png);
        if (*p->dir) tx_add(&m, "cd '%s'\n", p->dir);
        tx_add(&m, "outfile = '%s.png'\nload '%s.gp'\nunset output\nreset\n", p->stem, p->stem);
        if (*p->dir) {
            tx_add(&m, "cd '");
            for (const char *c = p->dir; *c; c++)
                if (*c == '/') tx_add(&m, "../");
            tx_add(&m, "..'\n");
        }
    }
    const char *master = ".draw-figures.gp";
    od_write(od, master, m.p, m.n);
    tx_free(&m);
    int st = plot_exec(gnuplot_exe, od_staging(od), "fp4s_report = 1", master);
    char mp[4096];
    od_path(od, master, mp, sizeof mp);
    (void)unlink(mp);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        cli_die(FP4S_EXIT_OUTPUT, "%s failed (%s %d) drawing the figures (its message above names the script); "
                "no report written", gnuplot_exe, WIFEXITED(st) ? "exit status" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    for (size_t i = 0; i < ntodo; i++) {
        char rel[512], abs[4096];
        snprintf(rel, sizeof rel, "%s%s%s.png", todo[i].dir, *todo[i].dir ? "/" : "", todo[i].stem);
        od_path(od, rel, abs, sizeof abs);
        struct stat sb;
        if (stat(abs, &sb) != 0 || sb.st_size == 0)
            cli_die(FP4S_EXIT_OUTPUT, "%s drew no image %s; no report written", gnuplot_exe, rel);
    }
    free(todo);
    todo = NULL;
    ntodo = 0;
}
