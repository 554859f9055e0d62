/* Atomic output files: a temporary "<path>.tmp.XXXXXX" beside the target,
 * fsync'ed and renamed over it on commit, unlinked on abort. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporaries not yet committed or aborted, for fp4s_outfile_unlink_all()
 * (called from signal handlers: lock-free slots, no allocation). */
#define LIVE_MAX 64
static _Atomic(char *) live[LIVE_MAX];

static void live_add(char *p)
{
    for (int i = 0; i < LIVE_MAX; i++) {
        char *expect = NULL;
        if (atomic_compare_exchange_strong(&live[i], &expect, p)) return;
    }
}

static void live_del(char *p)
{
    for (int i = 0; i < LIVE_MAX; i++) {
        char *expect = p;
        if (atomic_compare_exchange_strong(&live[i], &expect, NULL)) return;
    }
}

void fp4s_outfile_unlink_all(void)
{
    for (int i = 0; i < LIVE_MAX; i++) {
        char *p = atomic_exchange(&live[i], NULL);
        if (p) (void)unlink(p);
    }
}

struct fp4s_outfile {
    char *path;
    char *tmp;
    char *target;    /* what the temporary is renamed to (a symlink resolved) */
    bool is_stdout;  /* written in place: "-", a device or a FIFO */
};

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static mode_t new_file_mode = 0644;

/* mkstemp creates 0600; give the result the mode open(2) would have. */
static void mode_init(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    if (f) {
        while (fgets(line, sizeof line, f)) {
            unsigned m;
            if (sscanf(line, "Umask: %o", &m) == 1) {
                new_file_mode = (mode_t)(0666 & ~m);
                fclose(f);
                return;
            }
        }
        fclose(f);
    }
    mode_t m = umask(022);
    umask(m);
    new_file_mode = (mode_t)(0666 & ~m);
}

int fp4s_outfile_begin(const char *path, fp4s_outfile **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "fp4s_outfile_begin: out is NULL");
    *out = NULL;
    if (!path || !*path) return fp4s_error_set(FP4S_EINVAL, "empty output file name");
    fp4s_outfile *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    }
    if (strcmp(path, "-") == 0) {
        o->is_stdout = true;
        o->tmp = strdup("/dev/stdout");
        if (!o->tmp) {
            fp4s_outfile_abort(&o);
            return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        }
        *out = o;
        return 0;
    }
    struct stat st, lst;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fp4s_outfile_abort(&o);
            return fp4s_error_set(FP4S_EWRITE, "%s: is a directory", path);
        }
        if (!S_ISREG(st.st_mode)) {
            /* /dev/null, /dev/stdout, a FIFO: written in place, never renamed over */
            o->is_stdout = true;
            if (!(o->tmp = strdup(path))) {
                fp4s_outfile_abort(&o);
                return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
            }
            *out = o;
            return 0;
        }
        /* a symlink to a file: replace the file it points to, keep the link */
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) o->target = realpath(path, NULL);
    }
    if (!o->target) o->target = strdup(path);
    size_t n = o->target ? strlen(o->target) + sizeof ".tmp.XXXXXX" : 0;
    o->tmp = n ? malloc(n) : NULL;
    if (!o->tmp) {
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    }
    snprintf(o->tmp, n, "%s.tmp.XXXXXX", o->target);
    /* registered before it exists: a signal right after creation still removes it */
    live_add(o->tmp);
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        live_del(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
        fp4s_outfile_abort(&o);
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot create output: %s", path, strerror(e));
    }
    pthread_once(&mode_once, mode_init);
    (void)fchmod(fd, new_file_mode);
    close(fd);
    *out = o;
    return 0;
}

const char *fp4s_outfile_tmppath(const fp4s_outfile *o) { return o ? o->tmp : NULL; }

int fp4s_outfile_commit(fp4s_outfile **op)
{
    if (!op || !*op) return fp4s_error_set(FP4S_EINVAL, "fp4s_outfile_commit: NULL outfile");
    fp4s_outfile *o = *op;
    if (o->is_stdout) {
        free(o->tmp);
        free(o->path);
        free(o);
        *op = NULL;
        return 0;
    }
    /* fsync, then rename unless a live writer holds the file it replaces */
    int rc = fp4s_file_commit(o->tmp, o->target, true);
    if (rc) {
        fp4s_outfile_abort(op);
        return rc;
    }
    live_del(o->tmp);
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
    *op = NULL;
    return 0;
}

void fp4s_outfile_abort(fp4s_outfile **op)
{
    if (!op || !*op) return;
    fp4s_outfile *o = *op;
    if (o->tmp && !o->is_stdout) {
        (void)unlink(o->tmp);
        live_del(o->tmp);
    }
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
    *op = NULL;
}
