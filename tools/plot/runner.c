/* fp4-plot: the files of a plot (one output group: image, script and data appear
 * together) and the gnuplot run that draws the image. */
#include "plot.h"

#include "fp4s_config.h"

#include <fp4scope/tensor.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- output naming and the files written -----------------------------------------------
 * Every file of a plot (data, script, image) is an output of the run's group:
 * they appear together when the image is drawn. gnuplot reads the data by
 * the names the script gives, so it runs in a private staging directory
 * beside the image that links those names to the temporaries. With
 * --term dumb -o - everything lives in a scratch directory that is removed. */

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

void plot_setup(plot *p, const char *out, const char *term)
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
const char *write_data(plot *p, const char *series, const text *t)
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

void script_header(plot *p, const char *what)
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

bool plot_gnuplot(char *exe, size_t n, const char **prog)
{
    const char *g = getenv("FP4S_GNUPLOT");
    if (!g || !*g) g = FP4S_HAVE_GNUPLOT ? FP4S_GNUPLOT : NULL;
    *prog = g ? g : "built with -Dgnuplot=disabled";
    return g && find_exec(g, exe, n);
}

int plot_exec(const char *exe, const char *rundir, const char *expr, const char *gp)
{
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
    return st;
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
int plot_finish(plot *p)
{
    char gp[1300], gppath[5500];
    snprintf(gp, sizeof gp, "%s.gp", p->stem);
    path_in_dir(p, gp, gppath, sizeof gppath);
    put_file(p, gp, &p->script);
    const char *prog;
    char exe[4096];
    if (!plot_gnuplot(exe, sizeof exe, &prog)) {
        if (p->to_stdout) {
            fprintf(stderr, "fp4-plot: gnuplot not found (%s): no preview\n", prog);
            return FP4S_EXIT_OK;
        }
        int rc = cli_commit();
        if (rc) return rc;
        fprintf(stderr, "fp4-plot: gnuplot not found (%s); wrote %s and its data (", prog, gppath);
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
    int st = plot_exec(exe, rundir, expr, gp);
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

