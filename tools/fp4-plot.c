/* fp4-plot: gnuplot figures of mismatch traces and of fp4-decompose /
 * fp4-channels reports. Writes OUT-stem.gp and its data next to the image so
 * the figure can be restyled, then runs gnuplot (man/fp4-plot.1). */
#include "cli.h"

#include "fp4s_config.h"

#include <fp4scope/mismatch.h>
#include <fp4scope/tensor.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    OPT_METRIC = 256, OPT_LOG, OPT_LINEAR, OPT_NAME, OPT_TERM, OPT_TITLE, OPT_SIZE, OPT_OUTPUT,
    OPT_HELP, OPT_VERSION
}; /* the trace and onset options are CLI_OPT_* (cli.h) */

static const struct option longopts[] = {
    {"metric", required_argument, NULL, OPT_METRIC},
    {"log", no_argument, NULL, OPT_LOG},
    {"linear", no_argument, NULL, OPT_LINEAR},
    {"name", required_argument, NULL, OPT_NAME},
    {"term", required_argument, NULL, OPT_TERM},
    {"title", required_argument, NULL, OPT_TITLE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"output", required_argument, NULL, OPT_OUTPUT},
    CLI_TRACE_LONGOPTS
    CLI_OUTPUT_LONGOPTS
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* The long name of an option id (for messages). */
static const char *option_name(int id)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == id) return o->name;
    return "?";
}

static void usage(void)
{
    printf("Usage: fp4-plot mismatch TRACE... [--metric M] [--log|--linear] -o OUT.png|.svg|.pdf\n"
           "       fp4-plot components REPORT -o OUT   (fp4-decompose --json: energy shares per site)\n"
           "       fp4-plot channels REPORT -o OUT     (fp4-channels --json: sorted scores, top-k, coverage)\n"
           "       fp4-plot hist REPORT -o OUT         (fp4-decompose --json: delta and error histograms)\n"
           "Draws with gnuplot and writes the script OUT.gp and its data (OUT.dat or\n"
           "OUT.<series>.dat, OUT without its extension) next to the image; run\n"
           "'gnuplot OUT.gp' in that directory to redraw after editing.\n\n"
           "  -o, --output OUT    image path; the extension picks the terminal (.png pngcairo,\n"
           "                      .svg svg, .pdf pdfcairo)\n"
           "  --term T            pngcairo, svg, pdfcairo or dumb (text preview; -o - prints it)\n"
           "  --title TEXT        figure title\n"
           "  --size WxH          size in pixels (png, svg) or inches x 100 (pdf); default 1200x700\n"
           "mismatch:\n"
           "  --metric M          metric per step (default mean_abs; see fp4-mismatch(1))\n"
           "  --log | --linear    y scale (default: log when all values are > 0 and span >= 10x)\n"
           "  --name NAME         run name of the next TRACE\n"
           "  --is-cap C, --allow-positive, --skip-empty, --format F, --delim C, --col-* NAME,\n"
           "  --baseline-steps N, --margin R, --sigma K, --consecutive N: as in fp4-mismatch\n\n"
           "Without gnuplot (not installed, -Dgnuplot=disabled, or FP4S_GNUPLOT naming a\n"
           "missing program) the script and data are still written, a note says so, exit 0.\n"
           "Exit status: 0 ok, 2 usage, 3 bad input, 4 output not written (or gnuplot failed),\n"
           "5 internal error.\n");
}

/* ---- text building ------------------------------------------------------------------ */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void tx_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tx_add(text *t, const char *fmt, ...)
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

static void tx_free(text *t)
{
    free(t->p);
    memset(t, 0, sizeof *t);
}

/* A value for a data file: gnuplot reads NaN as missing with `set datafile missing "NaN"`. */
static void tx_num(text *t, double v)
{
    if (isfinite(v)) tx_add(t, " %.9g", v);
    else tx_add(t, " NaN");
}

/* gnuplot string literal in single quotes ('' escapes a quote). */
static void tx_str(text *t, const char *s)
{
    tx_add(t, "'");
    for (; *s; s++) {
        if (*s == '\'') tx_add(t, "''");
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "'");
}

static int g_enhanced = 1; /* 0 for the dumb terminal */
static void tx_plain(text *t, const char *s);

/* format of log-scale tics: 10^{n} with enhanced text, 1e-02 otherwise */
static const char *logfmt(void) { return g_enhanced ? "10^{%L}" : "%.0e"; }

/* enhanced-text safe label: escape _ ^ @ & { } with backslash for gnuplot enhanced mode */
static void tx_label(text *t, const char *s)
{
    if (!g_enhanced) {
        tx_plain(t, s);
        return;
    }
    tx_add(t, "\"");
    for (; *s; s++) {
        if (strchr("_^@&{}~", *s)) tx_add(t, "\\\\%c", *s);
        else if (*s == '"' || *s == '\\') tx_add(t, "\\%c", *s);
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "\"");
}

/* plain (noenhanced) double-quoted string */
static void tx_plain(text *t, const char *s)
{
    tx_add(t, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') tx_add(t, "\\%c", *s);
        else if (*s == '\n') tx_add(t, " ");
        else tx_add(t, "%c", *s);
    }
    tx_add(t, "\"");
}

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NCOLORS (sizeof colors / sizeof colors[0])

/* ---- output naming and the files written -----------------------------------------------
 * Every file of a plot (data, script, image) is an output of the run's group:
 * they appear together when the image is drawn. gnuplot reads the data by
 * the names the script gives, so it runs in a private staging directory
 * beside the image that links those names to the temporaries. With
 * --term dumb -o - everything lives in a scratch directory that is removed. */
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

static void safe_series(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (; *in && k + 1 < n; in++) {
        char c = *in;
        out[k++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.')
                       ? c
                       : '_';
    }
    out[k] = '\0';
    if (k == 0) snprintf(out, n, "series");
}

static void plot_setup(plot *p, const char *out, const char *term)
{
    p->out = out;
    if (!out) cli_usage("-o OUT is required");
    if (strpbrk(out, "'\"\n\\")) cli_usage("-o: quotes, backslashes and newlines are not allowed in '%s'", out);
    const char *ext = strrchr(out, '.');
    const char *slash = strrchr(out, '/');
    if (ext && slash && ext < slash) ext = NULL;
    if (!term) {
        if (ext && strcmp(ext, ".png") == 0) term = "pngcairo";
        else if (ext && strcmp(ext, ".svg") == 0) term = "svg";
        else if (ext && strcmp(ext, ".pdf") == 0) term = "pdfcairo";
        else cli_usage("-o %s: the extension must be .png, .svg or .pdf (or give --term)", out);
    }
    if (strcmp(term, "pngcairo") && strcmp(term, "svg") && strcmp(term, "pdfcairo") && strcmp(term, "dumb"))
        cli_usage("--term: expected pngcairo, svg, pdfcairo or dumb, got '%s'", term);
    p->term = term;
    g_enhanced = strcmp(term, "dumb") != 0;
    if (strcmp(out, "-") == 0) {
        if (strcmp(term, "dumb") != 0) cli_usage("-o -: only the dumb terminal can print to stdout");
        p->to_stdout = 1;
        snprintf(p->dir, sizeof p->dir, "%s/fp4-plot.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(p->dir))
            cli_die(FP4S_EXIT_OUTPUT, "%s: cannot create a temporary directory: %s", p->dir, strerror(errno));
        cli_scratch_add(p->dir);
        snprintf(p->stem, sizeof p->stem, "preview");
        return;
    }
    if (slash) {
        size_t dl = (size_t)(slash - out);
        if (dl == 0) dl = 1;
        if (dl >= sizeof p->dir) cli_usage("-o: path too long");
        memcpy(p->dir, out, dl);
        p->dir[dl] = '\0';
    } else {
        snprintf(p->dir, sizeof p->dir, ".");
    }
    const char *base = slash ? slash + 1 : out;
    size_t bl = ext && ext > base ? (size_t)(ext - base) : strlen(base);
    if (bl == 0 || bl >= sizeof p->stem) cli_usage("-o %s: bad file name", out);
    memcpy(p->stem, base, bl);
    p->stem[bl] = '\0';
    struct stat st;
    if (stat(p->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        cli_die(FP4S_EXIT_OUTPUT, "%s: output directory does not exist", p->dir);
    /* the image and its script are checked now; the data files when written */
    cli_output(out);
    char gp[5500];
    snprintf(gp, sizeof gp, "%s/%s.gp", p->dir, p->stem);
    cli_output(gp);
}

static void path_in_dir(const plot *p, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", p->dir, base);
}

/* Write one file of the plot (an output of the group, or a scratch file). */
static void put_file(plot *p, const char *base, const text *t)
{
    char path[5500];
    path_in_dir(p, base, path, sizeof path);
    p->files = xrealloc(p->files, (p->nfiles + 1) * sizeof *p->files);
    p->tmps = xrealloc(p->tmps, (p->nfiles + 1) * sizeof *p->tmps);
    p->files[p->nfiles] = xstrdup(base);
    p->tmps[p->nfiles] = NULL;
    const char *dst = path;
    fp4s_outfile *of = NULL;
    if (p->to_stdout) {
        cli_scratch_add(path);
    } else {
        int rc = fp4s_outfile_begin(path, &of);
        if (rc) cli_fail(rc);
        dst = fp4s_outfile_tmppath(of);
        p->tmps[p->nfiles] = xstrdup(dst);
    }
    p->nfiles++;
    FILE *f = fopen(dst, "wb");
    size_t n = t->n;
    int bad = !f || (n && fwrite(t->p, 1, n, f) != n), e = errno;
    if (f && fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) cli_die(FP4S_EXIT_OUTPUT, "%s: write failed: %s", path, strerror(e ? e : EIO));
    if (of) {
        int rc = fp4s_outfile_commit(&of); /* finished; the group renames it with the image */
        if (rc) cli_fail(rc);
    }
}

/* Write a data file OUT-stem[.series].dat; returns its base name (owned by p). */
static const char *write_data(plot *p, const char *series, const text *t)
{
    char base[1300];
    if (series) {
        char s[256];
        safe_series(series, s, sizeof s);
        snprintf(base, sizeof base, "%s.%s.dat", p->stem, s);
        /* unique among the files of this plot */
        for (int k = 2; k < 1000; k++) {
            int dup = 0;
            for (size_t i = 0; i < p->nfiles; i++) dup |= strcmp(p->files[i], base) == 0;
            if (!dup) break;
            snprintf(base, sizeof base, "%s.%s-%d.dat", p->stem, s, k);
        }
    } else {
        snprintf(base, sizeof base, "%s.dat", p->stem);
    }
    put_file(p, base, t);
    return p->files[p->nfiles - 1];
}

/* " (synthetic data)" for the default title when a report's inputs came from a
 * synthetic capture (decompose: inputs[].synthetic; channels: its source). */
static const char *report_synthetic(json_t *j)
{
    json_t *in = json_object_get(j, "inputs");
    size_t i;
    json_t *e;
    if (json_is_array(in))
        json_array_foreach(in, i, e) if (json_is_true(json_object_get(e, "synthetic"))) return " (synthetic data)";
    json_t *src = json_object_get(j, "source");
    if (json_is_string(src) && cli_source_synthetic(json_string_value(src))) return " (synthetic data)";
    return "";
}

static void script_header(plot *p, const char *what)
{
    text *s = &p->script;
    const char *ext = strcmp(p->term, "pngcairo") == 0 ? "png"
                      : strcmp(p->term, "svg") == 0    ? "svg"
                      : strcmp(p->term, "pdfcairo") == 0 ? "pdf"
                                                         : "txt";
    tx_add(s, "# %s -- written by fp4-plot (fp4scope %s).\n", what, fp4s_version());
    tx_add(s, "# Edit and redraw with:  cd <this directory> && gnuplot %s.gp\n", p->stem);
    tx_add(s, "# (fp4-plot runs it with -e \"outfile='...'\" to write the image atomically.)\n");
    tx_add(s, "if (!exists(\"outfile\")) outfile = '%s.%s'\n", p->stem, ext);
    if (strcmp(p->term, "pngcairo") == 0)
        tx_add(s, "set terminal pngcairo size %d,%d enhanced font 'Sans,12' linewidth 1.5\n", p->width, p->height);
    else if (strcmp(p->term, "svg") == 0)
        tx_add(s, "set terminal svg size %d,%d enhanced font 'Sans,12' linewidth 1.5 background rgb 'white'\n",
               p->width, p->height);
    else if (strcmp(p->term, "pdfcairo") == 0)
        tx_add(s, "set terminal pdfcairo size %.2fin,%.2fin enhanced font 'Sans,9'\n", p->width / 100.0,
               p->height / 100.0);
    else
        tx_add(s, "set terminal dumb size 100,32 noenhanced\n");
    tx_add(s, "set output outfile\n");
    tx_add(s, "set datafile missing 'NaN'\n");
    tx_add(s, "set grid lc rgb '#dddddd'\n");
    tx_add(s, "set border lw 1\n");
}

/* Find an executable: a path with '/', or a name on PATH. */
static int find_exec(const char *name, char *buf, size_t n)
{
    if (strchr(name, '/')) {
        snprintf(buf, n, "%s", name);
        return access(name, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, n, "%.*s/%s", (int)l, l ? p : ".", name);
        if (access(buf, X_OK) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* Link the plot's files under their final names in a private directory beside
 * the image, so that gnuplot reads the temporaries by the names the script
 * gives. Returns false when the file system has neither symbolic nor hard
 * links (the caller then commits the data first). */
static bool stage(plot *p, char *sdir, size_t n)
{
    snprintf(sdir, n, "%s/.fp4-plot.XXXXXX", p->dir);
    if (!mkdtemp(sdir)) cli_die(FP4S_EXIT_OUTPUT, "%s: cannot create a staging directory: %s", p->dir, strerror(errno));
    cli_scratch_add(sdir);
    for (size_t i = 0; i < p->nfiles; i++) {
        char link_path[5500], target[5500];
        snprintf(link_path, sizeof link_path, "%s/%s", sdir, p->files[i]);
        const char *tb = strrchr(p->tmps[i], '/');
        snprintf(target, sizeof target, "../%s", tb ? tb + 1 : p->tmps[i]);
        cli_scratch_add(link_path);
        if (symlink(target, link_path) != 0 && link(p->tmps[i], link_path) != 0) {
            for (size_t k = i + 1; k-- > 0;) {
                snprintf(link_path, sizeof link_path, "%s/%s", sdir, p->files[k]);
                cli_scratch_remove(link_path);
            }
            cli_scratch_remove(sdir);
            return false;
        }
    }
    return true;
}

static void unstage(const plot *p, const char *sdir)
{
    char link_path[5500];
    for (size_t i = p->nfiles; i-- > 0;) {
        snprintf(link_path, sizeof link_path, "%s/%s", sdir, p->files[i]);
        cli_scratch_remove(link_path);
    }
    cli_scratch_remove(sdir);
}

/* Write the script, run gnuplot, commit the image with the script and the
 * data. Returns the exit status. */
static int plot_finish(plot *p)
{
    char gp[1300], gppath[5500];
    snprintf(gp, sizeof gp, "%s.gp", p->stem);
    path_in_dir(p, gp, gppath, sizeof gppath);
    put_file(p, gp, &p->script);
    const char *prog = getenv("FP4S_GNUPLOT");
    if (!prog || !*prog) prog = FP4S_HAVE_GNUPLOT ? FP4S_GNUPLOT : NULL;
    char exe[4096];
    if (!prog || !find_exec(prog, exe, sizeof exe)) {
        if (p->to_stdout) {
            fprintf(stderr, "fp4-plot: gnuplot not found (%s): no preview\n",
                    prog ? prog : "built with -Dgnuplot=disabled");
            return FP4S_EXIT_OK;
        }
        int rc = cli_commit();
        if (rc) return rc;
        fprintf(stderr, "fp4-plot: gnuplot not found (%s); wrote %s and its data (", prog ? prog
                : "built with -Dgnuplot=disabled", gppath);
        for (size_t i = 0; i + 1 < p->nfiles; i++) fprintf(stderr, "%s%s", i ? ", " : "", p->files[i]);
        fprintf(stderr, ") but no image; run 'gnuplot %s' in %s to draw %s\n", gp, p->dir, p->out);
        return FP4S_EXIT_OK;
    }
    char imgpath[5500], sdir[4200], expr[5600];
    const char *rundir = p->dir;
    fp4s_outfile *of = NULL;
    int rc;
    if (p->to_stdout) {
        snprintf(imgpath, sizeof imgpath, "%s/%s.txt", p->dir, p->stem);
        cli_scratch_add(imgpath);
        snprintf(expr, sizeof expr, "outfile='%s.txt'", p->stem);
    } else {
        if (stage(p, sdir, sizeof sdir)) {
            rundir = sdir;
        } else if ((rc = cli_commit()) != 0) {
            return rc; /* no links here: the script and data go first */
        }
        rc = fp4s_outfile_begin(p->out, &of);
        if (rc) {
            if (rundir != p->dir) unstage(p, sdir);
            return cli_report(rc);
        }
        snprintf(imgpath, sizeof imgpath, "%s", fp4s_outfile_tmppath(of));
        char *abs = realpath(imgpath, NULL);
        if (!abs || strpbrk(abs, "'\n")) {
            free(abs);
            fp4s_outfile_abort(&of);
            if (rundir != p->dir) unstage(p, sdir);
            cli_die(FP4S_EXIT_OUTPUT, "%s: its directory's path has a quote or a newline that gnuplot cannot take", p->out);
        }
        snprintf(expr, sizeof expr, "outfile='%s'", abs);
        free(abs);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) cli_die(FP4S_EXIT_INTERNAL, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(rundir) != 0) _exit(126);
        execl(exe, "gnuplot", "-e", expr, gp, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!p->to_stdout && rundir != p->dir) unstage(p, sdir);
    struct stat sb;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && stat(imgpath, &sb) == 0 && sb.st_size > 0;
    if (!ok) {
        fp4s_outfile_abort(&of);
        if (!p->to_stdout) {
            /* the script and data are kept for inspection */
            rc = cli_commit();
            if (rc) return rc;
        }
        fprintf(stderr, "fp4-plot: %s failed (%s %d) on %s; the script and data are kept for inspection\n", exe,
                WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), gppath);
        return FP4S_EXIT_OUTPUT;
    }
    if (p->to_stdout) {
        FILE *f = fopen(imgpath, "rb");
        char buf[8192];
        size_t k;
        while (f && (k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, stdout);
        if (f) fclose(f);
        return cli_stdout_flush();
    }
    rc = fp4s_outfile_commit(&of);
    if (rc) return cli_report(rc);
    return cli_commit();
}

/* ---- JSON report helpers --------------------------------------------------------------- */
static const char *report_path;

_Noreturn static void bad_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad_report(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fp4-plot: %s: ", report_path);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(FP4S_EXIT_INPUT);
}

static json_t *load_report(const char *path, const char *tool)
{
    report_path = path;
    json_error_t err;
    json_t *j = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &err) : json_load_file(path, 0, &err);
    if (!j) {
        if (strcmp(path, "-") != 0 && access(path, R_OK) != 0)
            cli_die(FP4S_EXIT_INPUT, "%s: cannot open: %s", path, strerror(errno));
        bad_report("invalid JSON at line %d: %s", err.line, err.text);
    }
    if (!json_is_object(j)) bad_report("expected a JSON object (the output of %s --json)", tool);
    json_t *t = json_object_get(j, "tool");
    if (t && (!json_is_string(t) || strcmp(json_string_value(t), tool) != 0))
        bad_report("\"tool\" is %s%s%s, expected \"%s\"", json_is_string(t) ? "\"" : "",
                   json_is_string(t) ? json_string_value(t) : "not a string", json_is_string(t) ? "\"" : "", tool);
    return j;
}

static double num_field(json_t *o, const char *key, const char *where, int required)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required) bad_report("%s: missing number '%s'", where, key);
        return NAN;
    }
    if (!json_is_number(v)) bad_report("%s: '%s' is not a number", where, key);
    return json_number_value(v);
}

static json_t *arr_field(json_t *o, const char *key, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_array(v)) bad_report("%s: missing array '%s'", where, key);
    return v;
}

static json_t *obj_field(json_t *o, const char *key, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_object(v)) bad_report("%s: missing object '%s'", where, key);
    return v;
}

/* Label of an fp4-decompose input: site, else source base name; with step and side. */
static void input_label(json_t *in, size_t i, char *buf, size_t n)
{
    json_t *site = json_object_get(in, "site"), *src = json_object_get(in, "source");
    json_t *step = json_object_get(in, "step"), *side = json_object_get(in, "side");
    const char *name = json_is_string(site) ? json_string_value(site) : NULL;
    char tmp[512];
    if (!name && json_is_string(src)) {
        const char *s = json_string_value(src);
        const char *b = strrchr(s, '/');
        snprintf(tmp, sizeof tmp, "%s", b ? b + 1 : s);
        name = tmp;
    }
    if (!name) {
        snprintf(tmp, sizeof tmp, "input %zu", i);
        name = tmp;
    }
    size_t k = (size_t)snprintf(buf, n, "%s", name);
    int st = json_is_integer(step), sd = json_is_string(side);
    if ((st || sd) && k < n) k += (size_t)snprintf(buf + k, n - k, " [");
    if (st && k < n) k += (size_t)snprintf(buf + k, n - k, "step %lld%s", (long long)json_integer_value(step), sd ? ", " : "");
    if (sd && k < n) k += (size_t)snprintf(buf + k, n - k, "%s", json_string_value(side));
    if ((st || sd) && k < n) snprintf(buf + k, n - k, "]");
}

/* ---- mismatch ------------------------------------------------------------------------- */
static int cmd_mismatch(plot *p, int argc, char **argv, const char *metric, int scale, const char **names,
                        size_t nnames, const fp4s_mm_opts *mo, const fp4s_trace_opts *to, const fp4s_mm_onset_opts *oo)
{
    int mi = fp4s_mm_metric_index(metric);
    if (mi < 0) cli_usage("--metric: unknown metric '%s' (see fp4-mismatch --help)", metric);
    if (argc < 1) cli_usage("mismatch: no TRACE given");
    if (nnames > (size_t)argc) cli_usage("%zu --name options for %d traces", nnames, argc);
    fp4s_mm_result res = {0, NULL};
    for (int i = 0; i < argc; i++) {
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
    /* values, onset, scale */
    double vmin = INFINITY, vmax = -INFINITY, amin = INFINITY, amax = -INFINITY;
    int nonpos = 0;
    fp4s_mm_onset *on = calloc(res.nruns, sizeof *on);
    if (!on) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (size_t r = 0; r < res.nruns; r++) {
        fp4s_mm_run *run = &res.runs[r];
        double *v = malloc((run->nsteps + 1) * sizeof *v);
        int64_t *s = malloc((run->nsteps + 1) * sizeof *s);
        if (!v || !s) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        for (size_t i = 0; i < run->nsteps; i++) {
            v[i] = fp4s_mm_metric_value(&run->steps[i], (size_t)mi);
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
            free(v);
            free(s);
            free(on);
            fp4s_mm_result_free(&res);
            return st;
        }
        free(v);
        free(s);
    }
    int logy = scale > 0 ? 1 : scale < 0 ? 0 : (!nonpos && vmax >= 10 * vmin && isfinite(vmin));
    if (logy && nonpos)
        fprintf(stderr, "fp4-plot: note: --log with values <= 0 of %s: those points are left out\n", metric);
    /* data files */
    const char **files = calloc(res.nruns, sizeof *files);
    if (!files) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (size_t r = 0; r < res.nruns; r++) {
        fp4s_mm_run *run = &res.runs[r];
        text d = {0};
        tx_add(&d, "# run %s (%s): %s per training step\n# step %s tokens\n", run->name, run->source, metric, metric);
        for (size_t i = 0; i < run->nsteps; i++) {
            double v = fp4s_mm_metric_value(&run->steps[i], (size_t)mi);
            if (logy && !(v > 0)) v = NAN;
            tx_add(&d, "%lld", (long long)run->steps[i].step);
            tx_num(&d, v);
            tx_add(&d, " %llu\n", (unsigned long long)run->steps[i].tokens);
        }
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
    tx_label(s, fp4s_mm_metric_label((size_t)mi));
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
    tx_add(s, "set key top left box opaque samplen 3\n");
    if (g_enhanced) tx_add(s, "set style textbox opaque noborder margins 1,1\n");
    for (size_t r = 0; r < res.nruns; r++) {
        if (!on[r].found) continue;
        const char *c = colors[r % NCOLORS];
        tx_add(s, "set arrow from %lld, graph 0 to %lld, graph 1 nohead dt 2 lw 1.5 lc rgb '%s' front\n",
               (long long)on[r].step, (long long)on[r].step, c);
        tx_add(s, "set label ");
        char lab[600];
        snprintf(lab, sizeof lab, "onset %s: step %lld", res.runs[r].name, (long long)on[r].step);
        tx_label(s, lab);
        tx_add(s, " at %lld, graph 0.03 left rotate by 90 offset %s tc rgb '%s' %sfront\n", (long long)on[r].step,
               g_enhanced ? "1.6,0" : "1,0", c, g_enhanced ? "boxed " : "");
    }
    tx_add(s, "plot ");
    for (size_t r = 0; r < res.nruns; r++) {
        const char *c = colors[r % NCOLORS];
        tx_add(s, "%s", r ? ", \\\n     " : "");
        tx_str(s, files[r]);
        tx_add(s, " using 1:2 with linespoints lw 2 pt 7 ps 0.45 lc rgb '%s' title ", c);
        tx_label(s, res.runs[r].name);
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
    free(on);
    fp4s_mm_result_free(&res);
    return plot_finish(p);
}

/* ---- components --------------------------------------------------------------------- */
static int cmd_components(plot *p, const char *path)
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

/* ---- channels ------------------------------------------------------------------------- */
static int cmd_channels(plot *p, const char *path)
{
    json_t *j = load_report(path, "fp4-channels");
    json_t *ch = arr_field(j, "channels", "report");
    size_t n = json_array_size(ch);
    if (n == 0) bad_report("channels: empty list");
    text d = {0};
    tx_add(&d, "# rank channel score selected(1/0)\n");
    double smin = INFINITY, smax = -INFINITY;
    size_t nsel = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(ch, i);
        char where[64];
        snprintf(where, sizeof where, "channels[%zu]", i);
        if (!json_is_object(c)) bad_report("%s: not an object", where);
        double sc = num_field(c, "score", where, 1);
        double chn = num_field(c, "channel", where, 1);
        double rk = num_field(c, "rank", where, 0);
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
    if (has_cov) {
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
    else snprintf(title, sizeof title, "Per-channel quantization error (%s score), %zu channels, %zu selected%s",
                  sname, n, nsel, report_synthetic(j));
    tx_add(s, "set multiplot layout 1,%d title ", cf ? 2 : 1);
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set xlabel \"channel rank (best first)\"\nset ylabel ");
    char yl[256];
    snprintf(yl, sizeof yl, "%s score", sname);
    tx_label(s, yl);
    tx_add(s, "\n");
    if (logy) tx_add(s, "set logscale y\nset format y '%s'\n", logfmt());
    tx_add(s, "set key top right box opaque\nset xrange [0:%zu]\n", n + 1);
    tx_add(s, "plot ");
    tx_str(s, df);
    tx_add(s, " using 1:3 with lines lw 1.5 lc rgb '#1f77b4' title \"all channels\", \\\n     ");
    tx_str(s, df);
    tx_add(s, " using 1:($4 > 0 ? $3 : NaN) with points pt 7 ps 0.8 lc rgb '#d62728' title \"selected (top-k)\"\n");
    if (cf) {
        tx_add(s, "unset logscale y\nset format y '%%g'\n");
        tx_add(s, "set title \"coverage\"\nset xlabel \"fraction of channels compensated\"\n"
                  "set ylabel \"share of the error energy covered\"\n");
        tx_add(s, "set xrange [0:1]\nset yrange [0:1.05]\nset key bottom right box opaque\n");
        if (nsel > 0)
            tx_add(s, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead dt 2 lc rgb '#d62728'\n",
                   (double)nsel / (double)n, (double)nsel / (double)n);
        tx_add(s, "plot ");
        tx_str(s, cf);
        tx_add(s, " using 1:3 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#2ca02c' title \"coverage\", \\\n"
                  "     x with lines dt 3 lc rgb '#7f7f7f' title \"uniform\"");
        if (nsel > 0) tx_add(s, ", \\\n     NaN with lines dt 2 lc rgb '#d62728' title \"selection (%zu)\"", nsel);
        tx_add(s, "\n");
    }
    tx_add(s, "unset multiplot\n");
    json_decref(j);
    return plot_finish(p);
}

/* ---- hist ----------------------------------------------------------------------------- */
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

static int cmd_hist(plot *p, const char *path)
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
    json_t *fmt = json_object_get(j, "format");
    if (p->title) snprintf(title, sizeof title, "%s", p->title);
    else snprintf(title, sizeof title, "Scale exponent offsets and quantization errors%s%s%s",
                  json_is_string(fmt) ? ": " : "", json_is_string(fmt) ? json_string_value(fmt) : "",
                  report_synthetic(j));
    tx_add(s, "set multiplot layout 1,2 title ");
    tx_label(s, title);
    tx_add(s, " font 'Sans,14'\n");
    tx_add(s, "set style fill transparent solid 0.5 border\n");
    size_t krows = n < 4 ? n : 4;
    tx_add(s, "set bmargin at screen %.3f\n", 0.13 + 0.028 * (double)krows);
    const char *xl[2] = {"delta = log_2(s / s*) per block (scale rounding, 1 = one binade)",
                         "quantization error Q(x) - x (units of x)"};
    const char *tl[2] = {"delta histogram", "error histogram"};
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            tx_add(s, "set key at screen 0.5, 0.01 center bottom vertical maxrows %zu box noenhanced font ',10'\n", krows);
        else
            tx_add(s, "unset key\n");
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
    tx_add(s, "unset multiplot\n");
    free(files);
    free(labels);
    json_decref(j);
    return plot_finish(p);
}

int main(int argc, char **argv)
{
    cli_init("fp4-plot");
    if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
        usage();
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        cli_version();
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') cli_usage("expected a subcommand: mismatch, components, channels or hist");
    const char *sub = argv[1];
    if (strcmp(sub, "mismatch") && strcmp(sub, "components") && strcmp(sub, "channels") && strcmp(sub, "hist"))
        cli_usage("unknown subcommand '%s' (mismatch, components, channels, hist)", sub);
    plot p;
    memset(&p, 0, sizeof p);
    p.width = 1200;
    p.height = 700;
    const char *out = NULL, *term = NULL, *metric = "mean_abs";
    int scale = 0;
    fp4s_mm_opts mo;
    fp4s_mm_opts_defaults(&mo);
    fp4s_trace_opts to;
    fp4s_trace_opts_defaults(&to);
    fp4s_mm_onset_opts oo;
    fp4s_mm_onset_opts_defaults(&oo);
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    size_t nnames = 0;
    if (!names) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int ismm = strcmp(sub, "mismatch") == 0;
    optind = 2;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        if (!ismm && ch != 'o' && ch != OPT_OUTPUT && ch != OPT_TERM && ch != OPT_TITLE && ch != OPT_SIZE &&
            ch != CLI_OPT_FORCE && ch != OPT_HELP && ch != OPT_VERSION && ch != '?')
            cli_usage("%s: option '--%s' applies to 'fp4-plot mismatch' only", sub, option_name(ch));
        switch (ch) {
        case 'o':
        case OPT_OUTPUT: out = optarg; break;
        case OPT_TERM: term = optarg; break;
        case CLI_OPT_FORCE: cli_force(); break;
        case OPT_TITLE: p.title = optarg; break;
        case OPT_SIZE: {
            int w, h;
            char extra;
            if (sscanf(optarg, "%dx%d%c", &w, &h, &extra) != 2 || w < 100 || h < 100 || w > 10000 || h > 10000)
                cli_usage("--size: expected WxH between 100x100 and 10000x10000, got '%s'", optarg);
            p.width = w;
            p.height = h;
            break;
        }
        case OPT_METRIC: metric = optarg; break;
        case OPT_LOG: scale = 1; break;
        case OPT_LINEAR: scale = -1; break;
        case OPT_NAME: names[nnames++] = optarg; break;
        case OPT_HELP: usage(); free(names); return 0;
        case OPT_VERSION: cli_version(); free(names); return 0;
        default:
            if (!cli_trace_option(ch, optarg, &mo, &to, &oo)) cli_usage("unknown option");
        }
    }
    int nin = argc - optind;
    for (int i = optind; i < argc; i++) cli_input(argv[i]);
    plot_setup(&p, out, term);
    int status;
    if (ismm) {
        status = cmd_mismatch(&p, nin, argv + optind, metric, scale, names, nnames, &mo, &to, &oo);
    } else {
        if (nin != 1) cli_usage("%s: expected one REPORT (the JSON of fp4-%s --json), got %d", sub,
                                strcmp(sub, "channels") == 0 ? "channels" : "decompose", nin);
        if (strcmp(sub, "components") == 0) status = cmd_components(&p, argv[optind]);
        else if (strcmp(sub, "channels") == 0) status = cmd_channels(&p, argv[optind]);
        else status = cmd_hist(&p, argv[optind]);
    }
    tx_free(&p.script);
    for (size_t i = 0; i < p.nfiles; i++) {
        free(p.files[i]);
        free(p.tmps[i]);
    }
    free(p.files);
    free(p.tmps);
    free(names);
    return status;
}
