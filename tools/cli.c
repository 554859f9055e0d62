#include "cli.h"
#include "out/out.h"
#include "suggest.h"

#include <fp4scope/units.h>

#include <fp4scope/capture.h>
#include <fp4scope/cuda.h>
#include <fp4scope/outfile.h>
#include <fp4scope/remedy.h>
#include <fp4scope/tensor.h>
#include <fp4scope/version.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "fp4scope";
static bool failure_reported; /* a message with a non-zero status was printed */
static bool stdout_reported;  /* ... about standard output */
static fp4s_outgroup *group;  /* this run's outputs */
static bool force;

/* ---- scratch files: lock-free slots, removed from signal handlers -------------- */
/* Blocks of slots, linked as they are needed (a plot of many inputs has a
 * data file per input): a handler walks them without allocating. Blocks are
 * never freed while the program runs. */
#define SCRATCH_BLOCK 64
typedef struct scratch_block {
    _Atomic(char *) slot[SCRATCH_BLOCK];
    _Atomic(struct scratch_block *) next;
} scratch_block;
static scratch_block scratch;

/* Remove every scratch file; `release` frees the names too (not from a
 * signal handler). */
static void scratch_unlink_all(bool release)
{
    /* newest first, as added (a directory after the files in it) */
    scratch_block *blocks[4096];
    size_t nb = 0;
    for (scratch_block *b = &scratch; b && nb < sizeof blocks / sizeof *blocks; b = atomic_load(&b->next))
        blocks[nb++] = b;
    while (nb-- > 0)
        for (int i = SCRATCH_BLOCK; i-- > 0;) {
            char *p = atomic_exchange(&blocks[nb]->slot[i], NULL);
            if (p && unlink(p) != 0) (void)rmdir(p);
            if (release) free(p);
        }
}

void cli_scratch_add(const char *path)
{
    char *p = xstrdup(path);
    for (scratch_block *b = &scratch;;) {
        for (int i = 0; i < SCRATCH_BLOCK; i++) {
            char *expect = NULL;
            if (atomic_compare_exchange_strong(&b->slot[i], &expect, p)) return;
        }
        scratch_block *next = atomic_load(&b->next);
        if (!next) {
            scratch_block *nb = xcalloc(1, sizeof *nb);
            if (!atomic_compare_exchange_strong(&b->next, &next, nb)) free(nb); /* another thread linked one */
            else next = nb;
        }
        b = next;
    }
}

void cli_scratch_remove(const char *path)
{
    for (scratch_block *b = &scratch; b; b = atomic_load(&b->next))
        for (int i = SCRATCH_BLOCK; i-- > 0;) {
            char *p = atomic_load(&b->slot[i]);
            if (p && strcmp(p, path) == 0 && atomic_compare_exchange_strong(&b->slot[i], &p, NULL)) {
                if (unlink(p) != 0) (void)rmdir(p);
                free(p);
                return;
            }
        }
}

/* ---- the progress line ------------------------------------------------------------- */
static struct {
    bool quiet, drawn;
    int mode;         /* -1 not decided, 0 off, 1 a terminal line, 2 plain lines (FP4S_PROGRESS=1) */
    char what[160];
    double t0, last;
} pg = {.mode = -1};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int progress_mode(void)
{
    if (pg.quiet) return 0;
    if (pg.mode < 0) {
        const char *e = getenv("FP4S_PROGRESS");
        bool tty = isatty(STDERR_FILENO);
        if (e && *e) pg.mode = strcmp(e, "0") == 0 ? 0 : tty ? 1 : 2;
        else pg.mode = tty ? 1 : 0;
    }
    return pg.mode;
}

static void duration(double s, char *buf, size_t n)
{
    if (s < 10) snprintf(buf, n, "%.1f s", s);
    else if (s < 60) snprintf(buf, n, "%.0f s", s);
    else if (s < 3600) snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
}

void cli_quiet(void)
{
    cli_progress_end();
    pg.quiet = true;
}

void cli_progress_end(void)
{
    if (pg.drawn) fputs("\r\033[K", stderr);
    pg.drawn = false;
}

void cli_progress_begin(const char *what)
{
    cli_progress_end();
    snprintf(pg.what, sizeof pg.what, "%s", what ? what : "");
    pg.t0 = now_s();
    pg.last = 0;
}

void cli_progress(uint64_t done, uint64_t total)
{
    int mode = progress_mode();
    if (!mode || total == 0) return;
    double t = now_s();
    if (t - pg.t0 < 0.5 || t - pg.last < (mode == 1 ? 0.2 : 2.0)) return;
    pg.last = t;
    double f = done >= total ? 1.0 : (double)done / (double)total, el = t - pg.t0;
    char a[32], b[48] = "";
    duration(el, a, sizeof a);
    if (f >= 0.01 && f < 1.0) {
        char l[32];
        duration(el * (1.0 - f) / f, l, sizeof l);
        snprintf(b, sizeof b, ", about %s left", l);
    }
    if (mode == 1) {
        fprintf(stderr, "\r%s: %s %3.0f%% (%s%s)\033[K", prog_name, pg.what, 100.0 * f, a, b);
        pg.drawn = true;
    } else {
        fprintf(stderr, "%s: %s %3.0f%% (%s%s)\n", prog_name, pg.what, 100.0 * f, a, b);
    }
    fflush(stderr);
}

static void library_progress(void *arg, uint64_t done, uint64_t total)
{
    (void)arg;
    cli_progress(done, total);
}

/* ---- signals and exit ------------------------------------------------------------- */
static void die_by(int sig)
{
    scratch_unlink_all(false);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the process ends by the signal */
}

static void on_signal(int sig)
{
    /* during a commit on another thread the signal waits for its end */
    if (fp4s_outfile_on_signal(sig)) return;
    die_by(sig);
}

int cli_stdout_flush(void)
{
    cli_progress_end();
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    int e = errno;
    if (!stdout_reported) {
        fprintf(stderr, "%s: stdout: write failed: %s\n", prog_name, strerror(e ? e : EIO));
        stdout_reported = true;
    }
    return FP4S_EXIT_OUTPUT;
}

/* At exit (status known where the C library gives it): outputs not committed
 * yet are committed when the run succeeded and standard output is fine, and
 * removed otherwise; scratch files are removed; standard output is checked. */
static void at_exit_status(int status, void *arg)
{
    (void)arg;
    cli_progress_end();
    scratch_unlink_all(true);
    if (failure_reported) stdout_reported = true; /* that failure is the message */
    bool bad = cli_stdout_flush() != 0;
    if (!bad && fclose(stdout) != 0 && errno != EBADF) {
        if (!stdout_reported)
            fprintf(stderr, "%s: stdout: write failed: %s\n", prog_name, strerror(errno));
        bad = true;
    }
    if (status == 0 && !bad && !failure_reported && group) {
        int rc = fp4s_outgroup_commit(&group);
        int sig = fp4s_outgroup_deferred_signal();
        if (sig) {
            fp4s_outfile_on_signal(sig);
            die_by(sig);
        }
        if (rc) {
            const char *d = fp4s_last_error();
            fprintf(stderr, "%s: %s\n", prog_name, (d && *d) ? d : fp4s_strerror(rc));
            _exit(fp4s_exit_status(rc));
        }
    }
    fp4s_outgroup_abort(&group);
    if (bad && !failure_reported) _exit(FP4S_EXIT_OUTPUT);
}

#ifndef __GLIBC__
/* without on_exit the status is unknown: outputs appear only by cli_commit */
static void at_exit(void) { at_exit_status(1, NULL); }
#endif

void cli_init(const char *prog)
{
    prog_name = prog;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* a signal ignored when the tool starts (nohup, a background job of a
     * shell without job control) stays ignored */
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
#ifdef __GLIBC__
    on_exit(at_exit_status, NULL);
#else
    atexit(at_exit);
#endif
    fp4s_set_progress(library_progress, NULL);
    /* FP4S_GEMM (fp4s_get_gemm) names a path, or the tool stops here */
    const char *gemm = getenv("FP4S_GEMM");
    fp4s_gemm_path gp;
    if (gemm && *gemm && fp4s_gemm_parse(gemm, &gp))
        cli_die(FP4S_EXIT_USAGE, "FP4S_GEMM: %s", fp4s_last_error());
    pg.t0 = now_s();
    if (fp4s_outgroup_open(0, &group)) cli_die(FP4S_EXIT_INTERNAL, "%s", fp4s_last_error());
}

const char *cli_prog(void) { return prog_name; }

/* ---- memory ---------------------------------------------------------------------------- */
void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) cli_die(FP4S_EXIT_INTERNAL, "out of memory (%zu bytes)", n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) cli_die(FP4S_EXIT_INTERNAL, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) cli_die(FP4S_EXIT_INTERNAL, "out of memory (%zu bytes)", n);
    return q;
}

char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    return d;
}

/* ---- outputs -------------------------------------------------------------------------------- */
static fp4s_outgroup *the_group(void)
{
    if (!group && fp4s_outgroup_open(force ? FP4S_OUT_FORCE : 0, &group))
        cli_die(FP4S_EXIT_INTERNAL, "%s", fp4s_last_error());
    return group;
}

void cli_force(void)
{
    force = true;
    fp4s_outgroup_flags(the_group(), FP4S_OUT_FORCE);
}

void cli_input(const char *spec)
{
    int rc = fp4s_outgroup_input(the_group(), spec);
    if (rc) cli_fail(rc);
}

void cli_output(const char *path)
{
    int rc = fp4s_outgroup_output(the_group(), path, 0);
    if (rc) cli_fail(rc);
}

void cli_output_append(const char *path)
{
    int rc = fp4s_outgroup_output(the_group(), path, FP4S_OUT_APPEND);
    if (rc) cli_fail(rc);
}

int cli_commit(void)
{
    cli_progress_end();
    if (!group) return 0;
    int rc = fp4s_outgroup_commit(&group);
    int sig = fp4s_outgroup_deferred_signal();
    if (sig) {
        fp4s_outfile_on_signal(sig);
        die_by(sig); /* every output is in place (or none, with rc) */
    }
    return rc ? cli_report(rc) : 0;
}

/* ---- text a terminal would act on ------------------------------------------------------------ */
/* The length of the valid UTF-8 sequence at p that is printable (not a C1
 * control, U+0080..U+009F), or 0. */
static size_t utf8_printable(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) return 0;
    return n;
}

void cli_fputs_safe(const char *s, FILE *f)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n;
        if (*p >= 0x20 && *p < 0x7f) fputc(*p++, f);
        else if (*p == '\t') fputc(*p++, f);
        else if (*p >= 0x80 && (n = utf8_printable(p)) > 0) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            fprintf(f, "\\x%02x", *p++);
        }
    }
}

const char *cli_safe(const char *s)
{
    static _Thread_local char ring[8][1100];
    static _Thread_local unsigned next;
    char *b = ring[next++ % 8];
    size_t k = 0;
    if (!s) s = "(null)";
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 8 < sizeof ring[0];) {
        size_t n;
        if ((*p >= 0x20 && *p < 0x7f) || *p == '\t') b[k++] = (char)*p++;
        else if (*p >= 0x80 && (n = utf8_printable(p)) > 0) {
            memcpy(b + k, p, n);
            k += n;
            p += n;
        } else {
            k += (size_t)snprintf(b + k, sizeof ring[0] - k, "\\x%02x", *p++);
        }
    }
    b[k] = '\0';
    return b;
}

/* "prog: " and the message, escaped: names from files (site names, dataset
 * paths) may hold terminal escapes */
static void vmessage(const char *fmt, va_list ap)
{
    char *buf = NULL;
    fprintf(stderr, "%s: ", prog_name);
    if (vasprintf(&buf, fmt, ap) >= 0) {
        cli_fputs_safe(buf, stderr);
        free(buf);
    } else {
        fputs("out of memory writing a message", stderr);
    }
}

/* ---- messages -------------------------------------------------------------------------------- */
void cli_die(int status, const char *fmt, ...)
{
    va_list ap;
    cli_progress_end();
    if (status) failure_reported = true;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

void cli_usage(const char *fmt, ...)
{
    va_list ap;
    cli_progress_end();
    failure_reported = true;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog_name);
    exit(FP4S_EXIT_USAGE);
}

int cli_report(int code)
{
    cli_progress_end();
    failure_reported = true;
    const char *d = fp4s_last_error();
    fprintf(stderr, "%s: ", prog_name);
    cli_fputs_safe((d && *d) ? d : fp4s_strerror(code), stderr);
    fputc('\n', stderr);
    return fp4s_exit_status(code);
}

void cli_fail(int code) { exit(cli_report(code)); }

/* The detail of a failure often names the file already ("c.h5: /steps/0/x:
 * cannot read ..."): with a context "c.h5:/steps/0/x" it was printed twice.
 * What the detail says of the context's file is not repeated. */
static void print_failf(const char *ctx, const char *d)
{
    size_t fl = strcspn(ctx, ":");
    const char *rest = ctx + fl; /* ":/steps/0/x", ": step 3" or "" */
    if (fl && strncmp(d, ctx, fl) == 0 && d[fl] == ':') {
        const char *d2 = d + fl + 1;
        while (*d2 == ' ') d2++;
        const char *r2 = *rest ? rest + 1 : rest;
        while (*r2 == ' ') r2++;
        /* the detail names the file, and the rest of the context if any */
        if (!*r2 || strncmp(d2, r2, strlen(r2)) == 0) {
            cli_fputs_safe(d, stderr);
            return;
        }
        cli_fputs_safe(ctx, stderr);
        fputs(": ", stderr);
        cli_fputs_safe(d2, stderr);
        return;
    }
    cli_fputs_safe(ctx, stderr);
    fputs(": ", stderr);
    cli_fputs_safe(d, stderr);
}

void cli_failf(int code, const char *fmt, ...)
{
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    const char *d = fp4s_last_error();
    failure_reported = true;
    cli_progress_end();
    fprintf(stderr, "%s: ", prog_name);
    print_failf(ctx, (d && *d) ? d : fp4s_strerror(code));
    fputc('\n', stderr);
    exit(fp4s_exit_status(code));
}

long long cli_parse_int(const char *opt, const char *arg, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end == arg || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        cli_usage("%s: expected an integer in [%lld, %lld], got '%s'", opt, lo, hi, arg);
    return v;
}

double cli_parse_double(const char *opt, const char *arg, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        cli_usage("%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, arg);
    return v;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

#define LIST_MAX 10000000 /* values in one list (--steps): 80 MB */

long long *cli_parse_int_list(const char *opt, const char *arg, size_t *n)
{
    size_t cap = 16, len = 0;
    long long *v = malloc(cap * sizeof *v);
    char *dup = strdup(arg);
    if (!v || !dup) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    for (char *save = NULL, *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long long a, b, step = 1;
        char *end;
        errno = 0;
        a = strtoll(tok, &end, 10);
        if (end == tok || errno) goto bad;
        b = a;
        if (*end == '-' || *end == ':') {
            char sep = *end;
            char *s2 = end + 1;
            b = strtoll(s2, &end, 10);
            if (end == s2 || errno) goto bad;
            if (sep == ':' && *end == ':') {
                char *s3 = end + 1;
                step = strtoll(s3, &end, 10);
                if (end == s3 || errno || step <= 0) goto bad;
            }
        }
        /* the span in int64 (a - b of values near both ends overflows), and
         * at most LIST_MAX values in all: a + k * step never passes b */
        long long span;
        if (*end != '\0' || b < a) goto bad;
        bool huge = __builtin_sub_overflow(b, a, &span);
        unsigned long long count = huge ? ULLONG_MAX : (unsigned long long)(span / step) + 1;
        if (count > LIST_MAX - len) {
            free(v);
            free(dup);
            cli_usage("%s: '%s' names more than %d values", opt, arg, LIST_MAX);
        }
        for (unsigned long long k = 0; k < count; k++) {
            if (len == cap) {
                cap *= 2;
                long long *nv = realloc(v, cap * sizeof *v);
                if (!nv) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
                v = nv;
            }
            v[len++] = a + (long long)k * step;
        }
    }
    free(dup);
    if (len == 0) cli_usage("%s: empty list", opt);
    qsort(v, len, sizeof *v, cmp_ll);
    size_t u = 0;
    for (size_t i = 0; i < len; i++)
        if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
    *n = u;
    return v;
bad:
    cli_usage("%s: expected a list like '0,5,10-20' or '0:100:10', got '%s'", opt, arg);
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
    char so[64];
    snprintf(so, sizeof so, ":%s", shortopts); /* ':' reports a missing argument apart */
    opterr = 0;
    int c = getopt_long(argc, argv, so, longopts, NULL);
    if (c != '?' && c != ':') return c;
    char name[256];
    const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (strncmp(a, "--", 2) == 0) {
        /* a long option: as typed, without its "=value" */
        snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
    } else {
        snprintf(name, sizeof name, "-%c", optopt ? optopt : '?');
    }
    if (c == ':') cli_usage("option '%s' needs an argument", name);
    if (name[0] == '-' && name[1] == '-' && longopts) { /* "did you mean" among the long options */
        size_t n = 0;
        while (longopts[n].name) n++;
        char **opts = xmalloc((n ? n : 1) * sizeof *opts);
        for (size_t i = 0; i < n; i++) {
            opts[i] = xmalloc(strlen(longopts[i].name) + 3);
            sprintf(opts[i], "--%s", longopts[i].name);
        }
        char dym[512];
        cli_did_you_mean(name, (const char *const *)opts, n, dym, sizeof dym);
        for (size_t i = 0; i < n; i++) free(opts[i]);
        free(opts);
        if (*dym) cli_usage("unknown option '%s';%s", name, dym);
    }
    cli_usage("unknown option '%s'", name);
}

/* The library's feature list, with or without its "cuda" word. */
static void print_features(bool cuda)
{
    char f[256];
    snprintf(f, sizeof f, "%s", fp4s_features());
    char *w = strstr(f, " cuda");
    if (!cuda && w && (w[5] == ' ' || w[5] == '\0')) memmove(w, w + 5, strlen(w + 5) + 1);
    printf("%s (fp4scope) %s\nfeatures: %s\n", prog_name, fp4s_version(), f);
}

void cli_version(void) { print_features(false); }

void cli_version_device(void)
{
    print_features(true);
    if (fp4s_cuda_caps() & FP4S_CUDA_CAP_BUILT) {
        char d[320];
        fp4s_cuda_describe(d, sizeof d);
        printf("gpu: %s\n", d);
    }
}

/* What each tool does on the GPU (--device list). */
static const struct {
    const char *tool, *work;
    unsigned caps; /* what it needs (FP4S_CUDA_CAP_*) */
} gpu_tools[] = {
    {"fp4-channels", "the per-channel statistics (decomposition by channel)", FP4S_CUDA_CAP_DECOMPOSE},
    {"fp4-decompose", "the quantization and the error decomposition", FP4S_CUDA_CAP_DECOMPOSE},
    {"fp4-quant", "the codes, scales, dequantized values and statistics (quantize kernels)",
     FP4S_CUDA_CAP_QUANTIZE},
    {"fp4-remedy", "the GEMMs (cuBLAS, FP32 accumulation) and rac's kernels", FP4S_CUDA_CAP_REMEDY},
};

void cli_device_list(void)
{
    const unsigned caps = fp4s_cuda_caps();
    char d[320];
    fp4s_cuda_describe(d, sizeof d);
    printf("cuda: %s\n", caps & FP4S_CUDA_CAP_BUILT ? "built in" : "not built in");
    if (caps & FP4S_CUDA_CAP_BUILT)
        printf("cublas: %s\n", caps & FP4S_CUDA_CAP_REMEDY ? "built in (opened when a remedy runs on the GPU)"
                                                           : "not built in");
    printf("gpu: %s\n", caps & FP4S_CUDA_CAP_BUILT ? d : "none (no CUDA support)");
    for (size_t i = 0; i < sizeof gpu_tools / sizeof gpu_tools[0]; i++) {
        bool on = (caps & FP4S_CUDA_CAP_DEVICE) && (caps & gpu_tools[i].caps);
        fp4s_device got = FP4S_DEVICE_CPU;
        if (on && gpu_tools[i].caps == FP4S_CUDA_CAP_REMEDY) /* cuBLAS loads */
            on = !fp4s_remedy_device_resolve(FP4S_DEVICE_AUTO, &got) && got == FP4S_DEVICE_CUDA;
        printf("%-14s %s: %s\n", gpu_tools[i].tool, on ? "gpu" : "cpu", gpu_tools[i].work);
    }
    printf("other tools    cpu: no GPU path (--device cuda is refused)\n");
}

const char *cli_device_arg(const char *arg)
{
    fp4s_device d;
    if (arg && !strcmp(arg, "list")) {
        cli_device_list();
        exit(0);
    }
    if (!arg || fp4s_device_parse(arg, &d)) cli_usage("--device: %s (or list)", fp4s_last_error());
    return arg;
}

fp4s_device cli_device_for(const char *arg, cli_gpu_work w, const fp4s_spec *s)
{
    fp4s_device want = FP4S_DEVICE_CPU, got = FP4S_DEVICE_CPU;
    if (arg && fp4s_device_parse(arg, &want)) cli_usage("--device: %s", fp4s_last_error());
    int rc = 0;
    switch (w) {
    case CLI_GPU_NONE:
        if (want == FP4S_DEVICE_CUDA)
            cli_die(FP4S_EXIT_USAGE, "--device cuda: %s has no GPU path (its work runs on the CPU; "
                    "--device list names the tools that use the GPU)", prog_name);
        return FP4S_DEVICE_CPU;
    case CLI_GPU_DECOMPOSE: rc = fp4s_device_resolve(s, want, &got); break;
    case CLI_GPU_REMEDY: rc = fp4s_remedy_device_resolve(want, &got); break;
    case CLI_GPU_QUANTIZE: rc = fp4s_cuda_device_resolve(s, want, &got); break;
    }
    if (rc) cli_die(FP4S_EXIT_USAGE, "--%s", fp4s_last_error());
    return got;
}

fp4s_device cli_device(const char *arg, const fp4s_spec *s) { return cli_device_for(arg, CLI_GPU_DECOMPOSE, s); }

void cli_common_init(cli_common *c, void (*usage)(void), bool device)
{
    memset(c, 0, sizeof *c);
    c->usage = usage;
    c->device = device;
}

bool cli_common_option(int id, const char *arg, cli_common *c)
{
    switch (id) {
    case CLI_OPT_HELP: c->usage(); exit(0);
    case CLI_OPT_VERSION:
        if (c->device) cli_version_device();
        else cli_version();
        exit(0);
    case CLI_OPT_JSON: c->json = true; return true;
    case CLI_OPT_CSV: c->csv = true; return true;
    case CLI_OPT_THREADS: fp4s_set_threads((int)cli_parse_int("--threads", arg, 1, 4096)); return true;
    case CLI_OPT_GEMM: {
        fp4s_gemm_path p;
        if (fp4s_gemm_parse(arg, &p)) cli_usage("--gemm: %s", fp4s_last_error());
        int rc = fp4s_set_gemm(p);
        if (rc) cli_die(fp4s_exit_status(rc), "--gemm %s: %s", arg, fp4s_last_error());
        return true;
    }
    case CLI_OPT_CHUNK: c->chunk = (size_t)cli_parse_int("--chunk", arg, 1, (long long)1 << 40); return true;
    case CLI_OPT_FORCE: cli_force(); return true;
    case CLI_OPT_QUIET: cli_quiet(); return true;
    case CLI_OPT_DEVICE:
        c->device_arg = cli_device_arg(arg);
        if (!c->device) cli_device_for(arg, CLI_GPU_NONE, NULL); /* cuda: exit 2 now */
        return true;
    default: return false;
    }
}

void cli_common_check(const cli_common *c)
{
    if (c->json && c->csv) cli_usage("--json and --csv exclude each other");
}

json_t *cli_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int cli_json_write(const char *path, const json_t *j)
{
    char *txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!txt) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    size_t len = strlen(txt);
    char *t = realloc(txt, len + 2);
    if (!t) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    t[len] = '\n';
    t[len + 1] = '\0';
    int rc = cli_write_text(path, t, len + 1);
    free(t);
    return rc;
}

json_t *cli_decomp_json(const fp4s_decomp_result *r, json_t *o)
{
    return out_json_record(fp4s_rtype_decomp_result(), r, o);
}

static bool is_number(const char *s)
{
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    return end != s && *end == '\0';
}

char *cli_csv_cell(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s);
    /* a text a spreadsheet would evaluate (=1+2, +cmd|..., -2+3, @SUM(...),
     * or a leading tab or carriage return) is made text: "'=1+2"; a number
     * such as -1.5 and a lone "-" stay as they are */
    bool formula = s[0] && strchr("=+-@\t\r", s[0]) && !is_number(s) && strcmp(s, "-") != 0;
    bool quote = formula || strpbrk(s, ",\"\n\r") || (n && (s[0] == ' ' || s[n - 1] == ' '));
    char *q = xmalloc(2 * n + 4), *o = q;
    if (quote) *o++ = '"';
    if (formula) *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '"' && quote) *o++ = '"';
        *o++ = *p;
    }
    if (quote) *o++ = '"';
    *o = '\0';
    return q;
}

void cli_csv_fputs(const char *s, FILE *f)
{
    char *q = cli_csv_cell(s);
    fputs(q, f);
    free(q);
}

void cli_csv_str(const char *s)
{
    if (s) cli_csv_fputs(s, stdout);
}

int cli_json_print(json_t *j)
{
    cli_progress_end();
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(j);
    return cli_stdout_flush();
}

int cli_write_text(const char *path, const char *text, size_t len)
{
    if (strcmp(path, "-") == 0) {
        cli_progress_end();
        if (fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0) return 0;
        stdout_reported = true; /* the caller reports this detail */
        return fp4s_error_set(FP4S_EWRITE, "stdout: write failed: %s", strerror(errno ? errno : EIO));
    }
    fp4s_outfile *o;
    int rc = fp4s_outfile_begin(path, &o);
    if (rc) return rc;
    FILE *f = fopen(fp4s_outfile_tmppath(o), "wb");
    if (!f) {
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot write: %s", path, strerror(errno));
    }
    size_t w = fwrite(text, 1, len, f);
    int bad = w != len || ferror(f), e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_EWRITE, "%s: write failed: %s", path, strerror(e ? e : EIO));
    }
    return fp4s_outfile_commit(&o);
}

bool cli_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

bool cli_source_synthetic(const char *spec)
{
    fp4s_capture_info info;
    if (!spec || !*spec) return false;
    if (fp4s_capture_info_read(spec, &info) == 0) return info.synthetic;
    /* file.h5:/dataset or file:NAME: try the file part */
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec) return false;
    size_t n = (size_t)(colon - spec);
    char *file = strndup(spec, n);
    bool syn = file && fp4s_capture_info_read(file, &info) == 0 && info.synthetic;
    free(file);
    return syn;
}

bool cli_trace_option(int id, const char *arg, fp4s_mm_opts *mo, fp4s_trace_opts *to,
                      fp4s_mm_onset_opts *oo)
{
    switch (id) {
    case CLI_OPT_IS_CAP: mo->is_cap = cli_parse_double("--is-cap", arg, 1.000001, 1e12); break;
    case CLI_OPT_FORMAT:
        if (strcmp(arg, "auto") == 0) to->format = FP4S_TRACE_AUTO;
        else if (strcmp(arg, "csv") == 0 || strcmp(arg, "tsv") == 0) to->format = FP4S_TRACE_CSV;
        else if (strcmp(arg, "jsonl") == 0) to->format = FP4S_TRACE_JSONL;
        else if (strcmp(arg, "capture") == 0 || strcmp(arg, "h5") == 0) to->format = FP4S_TRACE_CAPTURE;
        else if (strcmp(arg, "scalars") == 0) to->format = FP4S_TRACE_SCALARS;
        else cli_usage("--format: expected auto, csv, jsonl, capture or scalars, got '%s'", arg);
        break;
    case CLI_OPT_DELIM:
        if (strcmp(arg, "tab") == 0 || strcmp(arg, "\\t") == 0) to->delim = '\t';
        else if (strlen(arg) == 1 && arg[0] != '"' && arg[0] != '\n') to->delim = arg[0];
        else cli_usage("--delim: expected one character or 'tab', got '%s'", arg);
        break;
    case CLI_OPT_COL_STEP: to->col_step = arg; break;
    case CLI_OPT_COL_SEQ: to->col_seq = arg; break;
    case CLI_OPT_COL_TRAINER: to->col_trainer = arg; break;
    case CLI_OPT_COL_ROLLOUT: to->col_rollout = arg; break;
    case CLI_OPT_COL_POS: to->col_pos = arg; break;
    case CLI_OPT_COL_MASK: to->col_mask = arg; break;
    case CLI_OPT_COL_RUN: to->col_run = arg; break;
    case CLI_OPT_ALLOW_POS: mo->allow_positive = true; break;
    case CLI_OPT_SKIP_EMPTY: mo->skip_empty = true; break;
    case CLI_OPT_DEDUPE: to->dedupe = true; break;
    case CLI_OPT_BASELINE: oo->baseline_steps = (size_t)cli_parse_int("--baseline-steps", arg, 1, 100000000); break;
    case CLI_OPT_MARGIN: oo->margin = cli_parse_double("--margin", arg, 0, 1e12); break;
    case CLI_OPT_SIGMA: oo->sigma = cli_parse_double("--sigma", arg, 0, 1e12); break;
    case CLI_OPT_CONSEC: oo->consecutive = (size_t)cli_parse_int("--consecutive", arg, 1, 100000000); break;
    default: return false;
    }
    return true;
}

/* item is one of the comma-separated words of list (a NULL list holds every item). */
bool cli_list_has(const char *list, const char *item)
{
    if (!list) return true;
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, item, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

void cli_option_rest(int c, const char *arg, char *const *argv, cli_common *cm, struct cli_quant *q,
                     struct cli_analysis *an)
{
    if (cm && cli_common_option(c, arg, cm)) return;
    if (q && cli_quant_option(c, arg, q)) return;
    if (an && cli_analysis_option(c, arg, an)) return;
    cli_usage("unknown option '%s'", argv[optind - 1]);
}

void cli_units(const char *capture, const cli_analysis *an, fp4s_unit_need trainer, fp4s_unit_need weight,
               const char *what, const char *tail, const char *tail_nt, fp4s_units *ul, bool *synthetic)
{
    int rc;
    if (!capture) {
        if ((rc = fp4s_units_add_tensors(ul, an->act, an->trainer_act, an->weight))) cli_fail(rc);
        *synthetic = cli_source_synthetic(an->act);
        return;
    }
    fp4s_unit_select sel;
    fp4s_unit_select_defaults(&sel);
    sel.sites = an->sites;
    size_t nsteps = 0;
    long long *steps = an->steps ? cli_parse_int_list("--steps", an->steps, &nsteps) : NULL;
    sel.steps = steps;
    sel.nsteps = nsteps;
    sel.trainer = trainer;
    sel.weight = weight;
    sel.strict = an->strict;
    if ((rc = fp4s_units_add_capture(ul, capture, &sel))) exit(cli_report(rc));
    cli_units_skipped(ul);
    free(steps);
    if (ul->n == 0 && ul->nskipped)
        cli_die(FP4S_EXIT_INPUT, "%s: no site left to analyse: the %zu selected (step, site) pair%s left out above",
                capture, ul->nskipped, ul->nskipped == 1 ? " was" : "s were");
    if (ul->n == 0) {
        char hint[4096];
        cli_sites_hint(capture, an->sites, hint, sizeof hint);
        cli_die(FP4S_EXIT_INPUT, "%s: no site %smatches%s%s%s%s%s%s", capture, what, an->sites ? " --sites " : "",
                an->sites ? an->sites : "", an->steps ? " --steps " : "", an->steps ? an->steps : "",
                ul->no_trainer ? tail_nt : tail, hint);
    }
    *synthetic = cli_source_synthetic(capture);
}

int cli_weight_2d(const char *arg)
{
    if (!arg || !strcmp(arg, "auto")) return -1;
    if (!strcmp(arg, "on")) return 1;
    if (!strcmp(arg, "off")) return 0;
    cli_usage("--weight-2d: expected auto, on or off, got '%s'", arg);
}

void cli_dz_tie(const char *arg, fp4s_dz_tie *t)
{
    if (arg && fp4s_dz_tie_parse(arg, t)) cli_usage("--dz-tie: %s", fp4s_last_error());
}

bool cli_analysis_option(int id, const char *arg, cli_analysis *a)
{
    switch (id) {
    case CLI_OPT_ACT: a->act = arg; return true;
    case CLI_OPT_TRAINER_ACT: a->trainer_act = arg; return true;
    case CLI_OPT_WEIGHT: a->weight = arg; return true;
    case CLI_OPT_WEIGHT_2D: a->weight_2d = arg; return true;
    case CLI_OPT_DZ_TIE: a->dz_tie = arg; return true;
    case CLI_OPT_SITES: a->sites = arg; return true;
    case CLI_OPT_STEPS: a->steps = arg; return true;
    case CLI_OPT_STRICT: a->strict = true; return true;
    default: return false;
    }
}

void cli_units_skipped(const fp4s_units *l)
{
    if (!l || !l->nskipped) return;
    cli_progress_end();
    for (size_t i = 0; i < l->nskipped; i++) fprintf(stderr, "%s: left out: %s\n", cli_prog(), l->skipped[i].why);
    fprintf(stderr, "%s: %zu (step, site) pair%s left out: %s (--strict fails instead)\n", cli_prog(), l->nskipped,
            l->nskipped == 1 ? "" : "s", l->nskipped == 1 ? "its sides cannot be paired" : "their sides cannot be paired");
}

int64_t cli_site_index(const char *site, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = site; p && (p = strstr(p, key)) != NULL; p++) {
        if (p != site && p[-1] != '.') continue;
        const char *q = p + kl;
        if (*q != '.' || q[1] < '0' || q[1] > '9') continue;
        char *end;
        long long v = strtoll(q + 1, &end, 10);
        if (*end == '.' || *end == '\0') return v;
    }
    return -1;
}

int64_t cli_site_layer(const char *site)
{
    int64_t l = cli_site_index(site, "layers");
    return l >= 0 ? l : cli_site_index(site, "layer");
}
