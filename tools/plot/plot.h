/* fp4-plot's parts (not a library): gnuplot text and quoting (text.c), the
 * files of a plot and the gnuplot runner (runner.c), the JSON report readers
 * (report.c), and one file per plot kind (mismatch.c, components.c,
 * channels.c, hist.c). fp4-plot.c parses the command line and dispatches. */
#ifndef FP4S_TOOLS_PLOT_H
#define FP4S_TOOLS_PLOT_H

#include "cli.h"

#include <fp4scope/mismatch.h>

#include <stddef.h>

/* ---- text.c: a growing string, and gnuplot's quoting ------------------------------- */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

void tx_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tx_free(text *t);
void tx_num(text *t, double v);         /* " %.9g", or " NaN" (gnuplot's missing value) */
void tx_str(text *t, const char *s);    /* a single-quoted gnuplot string */
void tx_label(text *t, const char *s);  /* a label: enhanced-text escapes, or plain */
void tx_plain(text *t, const char *s);  /* a double-quoted string without enhanced text */
const char *logfmt(void);               /* the format of log-scale tics */
extern int g_enhanced;                  /* 0 for the dumb terminal */
#define NCOLORS 10
extern const char *const colors[NCOLORS];

/* ---- runner.c: the files of a plot and gnuplot ---------------------------------------- */
typedef struct plot {
    const char *out;   /* as given */
    char dir[4096];    /* directory of the image ("." when none) */
    char stem[1024];   /* image base name without its extension */
    const char *term;
    int width, height;
    const char *title;
    int to_stdout;     /* --term dumb -o - */
    text script;
    char **files;      /* files written (base names), the data files first */
    char **tmps;       /* ... their temporaries (NULL with to_stdout) */
    size_t nfiles;
} plot;

/* Check -o and --term, set up the directory and stem, declare the outputs. */
void plot_setup(plot *p, const char *out, const char *term);
/* Write a data file OUT-stem[.series].dat; returns its base name (owned by p). */
const char *write_data(plot *p, const char *series, const text *t);
/* The script's first lines: terminal, output, defaults. */
void script_header(plot *p, const char *what);
/* Write the script, run gnuplot, commit the files; returns the exit status. */
int plot_finish(plot *p);
/* The gnuplot to run (FP4S_GNUPLOT, else the one found at build time): true
 * with its path in exe; *prog names what was looked for (for messages). */
bool plot_gnuplot(char *exe, size_t n, const char **prog);
/* Run `gnuplot -e EXPR GP` in rundir; returns its wait status. */
int plot_exec(const char *exe, const char *rundir, const char *expr, const char *gp);

/* ---- report.c: the JSON of fp4-decompose and fp4-channels -------------------------------- */
/* Load REPORT (or stdin for "-"), an object whose "tool" is `tool` if present;
 * every problem below is exit 3 naming the report. */
json_t *load_report(const char *path, const char *tool);
_Noreturn void bad_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double num_field(json_t *o, const char *key, const char *where, int required);
json_t *arr_field(json_t *o, const char *key, const char *where);
json_t *obj_field(json_t *o, const char *key, const char *where);
/* Label of an fp4-decompose input: site, else source base name; with step and side. */
void input_label(json_t *in, size_t i, char *buf, size_t n);
/* The quantizer of a report: format, profile, and the scale rule when it is
 * not the profile's own. */
void report_quantizer(json_t *j, char *buf, size_t n);
/* " (synthetic data)" when the report's inputs came from a synthetic capture. */
const char *report_synthetic(json_t *j);

/* ---- the plot kinds ------------------------------------------------------------------------- */
/* metric NULL: the default order's pick (fp4s_mm_metric_pick); y2 NULL: no second axis. */
int cmd_mismatch(plot *p, int argc, char **argv, const char *metric, const char *y2, int scale, const char **names,
                 size_t nnames, const fp4s_mm_opts *mo, const fp4s_trace_opts *to, const fp4s_mm_onset_opts *oo);
int cmd_components(plot *p, int nrep, char **paths);
int cmd_channels(plot *p, const char *path);
int cmd_hist(plot *p, const char *path);

#endif
