/* fp4-plot: a growing string and the quoting of gnuplot strings and labels. */
#include "plot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

void tx_add(text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        size_t room = t->cap - t->n;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) cli_die(FP4S_EXIT_INTERNAL, "format error");
        if ((size_t)k < room) {
            t->n += (size_t)k;
            return;
        }
        size_t nc = t->cap ? t->cap * 2 : 4096;
        while (nc - t->n <= (size_t)k) nc *= 2;
        char *np = realloc(t->p, nc);
        if (!np) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        t->p = np;
        t->cap = nc;
    }
}

void tx_free(text *t)
{
    free(t->p);
    memset(t, 0, sizeof *t);
}

/* A value for a data file: gnuplot reads NaN as missing with `set datafile missing "NaN"`. */
void tx_num(text *t, double v)
{
    if (isfinite(v)) tx_add(t, " %.9g", v);
    else tx_add(t, " NaN");
}

/* gnuplot string literal in single quotes ('' escapes a quote). */
void tx_str(text *t, const char *s)
{
    tx_add(t, "'");
    for (; *s; s++) {
        if (*s == '\'') tx_add(t, "''");
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "'");
}

int g_enhanced = 1; /* 0 for the dumb terminal */

/* format of log-scale tics: 10^{n} with enhanced text, 1e-02 otherwise */
const char *logfmt(void) { return g_enhanced ? "10^{%L}" : "%.0e"; }

/* enhanced-text safe label: escape _ ^ @ & { } with backslash for gnuplot enhanced mode,
 * and " \\ ` as in tx_plain */
void tx_label(text *t, const char *s)
{
    if (!g_enhanced) {
        tx_plain(t, s);
        return;
    }
    tx_add(t, "\"");
    for (; *s; s++) {
        if (strchr("_^@&{}~", *s)) tx_add(t, "\\\\%c", *s);
        else if (*s == '"' || *s == '\\' || *s == '`') tx_add(t, "\\%c", *s);
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "\"");
}

/* plain (noenhanced) double-quoted string. A backquote is escaped too: gnuplot
 * runs `...` inside double-quoted strings as a shell command. */
void tx_plain(text *t, const char *s)
{
    tx_add(t, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\' || *s == '`') tx_add(t, "\\%c", *s);
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "\"");
}

const char *const colors[NCOLORS] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

