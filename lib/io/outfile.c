/* Atomic output files and output groups (fp4scope/outfile.h).
 *
 * An outfile is a temporary "<path>.tmp.XXXXXX" beside the target, fsync'ed
 * and renamed over it on commit, unlinked on abort. A group collects the
 * outfiles of one run (every fp4s_outfile_begin of the thread joins the
 * thread's current group), checks each output against the run's inputs, the
 * other outputs and the files it would replace before anything is created,
 * and renames them all at the end with the asynchronous signals blocked and,
 * for two or more, a journal that finishes an interrupted commit. */
#include "internal.h"

#include <fp4scope/outfile.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporaries not yet committed or aborted, for fp4s_outfile_unlink_all()
 * (called from signal handlers: lock-free slots, no allocation). */
#define LIVE_MAX 1024
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

/* Who owns the temporaries while a signal is handled: a group commit renaming
 * them, or a handler removing them; never both. The committing thread blocks
 * the asynchronous signals, but other threads of the process (a BLAS thread
 * pool) may take one: their handler then defers it to the commit's end. */
enum { ST_IDLE, ST_COMMITTING, ST_DYING };
static _Atomic int commit_state = ST_IDLE;
static _Atomic int deferred_sig;

int fp4s_outfile_on_signal(int sig)
{
    int expect = ST_IDLE;
    if (atomic_compare_exchange_strong(&commit_state, &expect, ST_DYING)) {
        fp4s_outfile_unlink_all();
        return 0;
    }
    if (expect == ST_COMMITTING) {
        atomic_store(&deferred_sig, sig);
        return 1;
    }
    return 0; /* another handler is removing them */
}

int fp4s_outgroup_deferred_signal(void) { return atomic_exchange(&deferred_sig, 0); }

struct fp4s_outfile {
    char *path;
    char *tmp;
    char *target;    /* what the temporary is renamed to (a symlink resolved) */
    bool is_stdout;  /* written in place: "-", a device or a FIFO */
    fp4s_outgroup *group; /* the group it joined, or NULL */
    size_t decl;     /* its declaration in the group */
    bool ready;      /* finished by its writer, waiting for the group's commit */
    bool existed;    /* not in a group: a regular file was at the target when begun ... */
    dev_t seen_dev;  /* ... this one, the only file the commit may replace */
    ino_t seen_ino;
    fp4s_outfile *gnext;
};

/* ---- file identities ------------------------------------------------------------ */
typedef struct {
    dev_t dev;
    ino_t ino;
} fid;

static bool fid_eq(fid a, fid b) { return a.dev == b.dev && a.ino == b.ino; }
static fid fid_of(const struct stat *st) { return (fid){st->st_dev, st->st_ino}; }

/* An output as resolved when declared. */
typedef struct {
    char *path;    /* as given */
    char *canon;   /* absolute target: realpath of the file, or of its directory + name */
    char *dir;     /* absolute directory of canon */
    bool exists;   /* a regular file is there now */
    fid file;      /* ... its identity */
    fid dirid;     /* identity of the directory */
    bool bound;    /* an outfile of the group was begun for it */
} decl;

struct fp4s_outgroup {
    unsigned flags;
    fid *in;
    char **in_name;
    size_t nin, cin;
    decl *out;
    size_t nout, cout;
    fp4s_outfile *members, **tail;
    bool stdout_taken; /* "-" declared */
};

static _Thread_local fp4s_outgroup *current;

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

static char *join_path(const char *dir, const char *base)
{
    size_t a = strlen(dir), b = strlen(base);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (k == 0 || p[k - 1] != '/') p[k++] = '/';
    memcpy(p + k, base, b + 1);
    return p;
}

/* Directory part of path ("." when none) and its last component. */
static char *dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s) return strdup(".");
    if (s == path) return strdup("/");
    return strndup(path, (size_t)(s - path));
}

static const char *base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The HDF5 signature at offset 0 or at a user-block offset 512, 1024, ... */
static bool holds_hdf5(const char *path)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st;
    bool yes = false;
    if (fstat(fd, &st) == 0) {
        for (uint64_t off = 0; off + 8 <= (uint64_t)st.st_size; off = off ? off * 2 : 512) {
            unsigned char b[8];
            if (fp4s_pread_full(fd, b, 8, off) != 8) break;
            if (memcmp(b, sig, 8) == 0) {
                yes = true;
                break;
            }
        }
    }
    close(fd);
    return yes;
}

/* ---- journals ------------------------------------------------------------------------
 * A journal is a shell script; each output is one line
 *     [ ! -e 'TMP' ] || mv -f -- 'TMP' 'TARGET'
 * with absolute paths quoted for sh ('\'' for a quote). */
#define JOURNAL_SUFFIX ".fp4s-commit"

static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* The sh-quoted words of one journal line, in order (at most 3). */
static int line_words(const char *p, const char *end, char *w[3])
{
    int n = 0;
    while (p < end && n < 3) {
        while (p < end && *p != '\'') p++;
        if (p >= end) break;
        size_t cap = (size_t)(end - p) + 1, k = 0;
        char *s = malloc(cap);
        if (!s) break;
        for (;;) {
            if (p < end && *p == '\'') {
                p++;
                while (p < end && *p != '\'') s[k++] = *p++;
                if (p < end) p++;
            } else if (p + 1 < end && p[0] == '\\' && p[1] == '\'') {
                s[k++] = '\'';
                p += 2;
            } else {
                break;
            }
        }
        s[k] = '\0';
        w[n++] = s;
    }
    return n;
}

/* Does the journal at jpath name `canon` as a target? */
static bool journal_names(const char *jpath, const char *canon)
{
    FILE *f = fopen(jpath, "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool found = false;
    while (!found && (len = getline(&line, &cap, f)) > 0) {
        if (strncmp(line, "[ ! -e ", 7) != 0) continue;
        char *w[3] = {NULL, NULL, NULL};
        int n = line_words(line, line + len, w);
        if (n == 3 && strcmp(w[2], canon) == 0) found = true;
        for (int i = 0; i < n; i++) free(w[i]);
    }
    free(line);
    fclose(f);
    return found;
}

/* Refuse an output that a journal in its directory names: an interrupted
 * commit, or one under way in another process (it holds the journal's lock). */
static int check_journals(const decl *d)
{
    DIR *dd = opendir(d->dir);
    if (!dd) return 0;
    int rc = 0;
    struct dirent *e;
    size_t sl = strlen(JOURNAL_SUFFIX);
    while (!rc && (e = readdir(dd)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= sl || strcmp(e->d_name + n - sl, JOURNAL_SUFFIX) != 0) continue;
        char *jp = join_path(d->dir, e->d_name);
        if (!jp) break;
        if (journal_names(jp, d->canon)) {
            int fd = open(jp, O_RDONLY | O_CLOEXEC);
            bool live_commit = fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
            if (fd >= 0) close(fd);
            if (live_commit)
                rc = fp4s_error_set(FP4S_EWRITE, "%s: another process is committing it right now (%s); "
                                    "nothing was written", d->path, jp);
            else
                rc = fp4s_error_set(FP4S_EWRITE, "%s: an earlier run was killed while committing its "
                                    "outputs, and %s lists what it left: run 'sh %s' to finish that "
                                    "commit (or delete it and the temporaries it names), then try "
                                    "again; nothing was written", d->path, jp, jp);
        }
        free(jp);
    }
    closedir(dd);
    return rc;
}

/* ---- groups: declarations and checks -------------------------------------------------- */
static void decl_free(decl *d)
{
    free(d->path);
    free(d->canon);
    free(d->dir);
}

/* Resolve an output. Returns 1 for one written in place ("-", a device or a
 * FIFO: not checked), 0 resolved, <0 error. */
static int resolve(const char *path, decl *d)
{
    memset(d, 0, sizeof *d);
    if (strcmp(path, "-") == 0) return 1;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return fp4s_error_set(FP4S_EWRITE, "%s: is a directory", path);
        if (!S_ISREG(st.st_mode)) return 1;
        d->exists = true;
        d->file = fid_of(&st);
        d->canon = realpath(path, NULL);
        if (!d->canon) return fp4s_error_set(FP4S_EWRITE, "%s: cannot resolve: %s", path, strerror(errno));
        d->dir = dir_of(d->canon);
    } else {
        if (errno != ENOENT)
            return fp4s_error_set(FP4S_EWRITE, "%s: cannot write: %s", path, strerror(errno));
        const char *base = base_of(path);
        if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
            return fp4s_error_set(FP4S_EWRITE, "%s: not a file name", path);
        char *dir = dir_of(path);
        if (!dir) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        d->dir = realpath(dir, NULL);
        int e = errno;
        free(dir);
        if (!d->dir)
            return fp4s_error_set(FP4S_EWRITE, "%s: cannot create output: directory: %s", path, strerror(e));
        d->canon = join_path(d->dir, base);
    }
    struct stat ds;
    if (!d->canon || !d->dir) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    if (stat(d->dir, &ds) != 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot create output: %s: %s", path, d->dir, strerror(errno));
    d->dirid = fid_of(&ds);
    if (!(d->path = strdup(path))) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    return 0;
}

static bool same_output(const decl *a, const decl *b)
{
    if (a->exists && b->exists) return fid_eq(a->file, b->file);
    if (a->exists != b->exists) return false;
    return fid_eq(a->dirid, b->dirid) && strcmp(base_of(a->canon), base_of(b->canon)) == 0;
}

/* All checks of one output; returns 0 with *d filled, 1 in place, <0 refused. */
static int check_output(fp4s_outgroup *g, const char *path, unsigned oflags, decl *d, size_t *dup)
{
    *dup = SIZE_MAX;
    int rc = resolve(path, d);
    if (rc) {
        decl_free(d);
        return rc;
    }
    for (size_t i = 0; i < g->nout; i++)
        if (same_output(&g->out[i], d)) {
            *dup = i;
            break;
        }
    if (d->exists)
        for (size_t i = 0; i < g->nin; i++)
            if (fid_eq(g->in[i], d->file)) {
                rc = fp4s_error_set(FP4S_EINVAL, "%s: this output is also an input (%s): refusing "
                                    "to replace it; nothing was written", path, g->in_name[i]);
                goto fail;
            }
    if (*dup != SIZE_MAX) return 0; /* the caller decides whether a second name is allowed */
    /* (a file changed in place is locked by its own writer, with its message) */
    if (d->exists && !(oflags & FP4S_OUT_APPEND) && (rc = fp4s_file_held(d->canon)) != 0) goto fail;
    if (d->exists && !(oflags & FP4S_OUT_APPEND) && !(g->flags & FP4S_OUT_FORCE) && holds_hdf5(d->canon)) {
        rc = fp4s_error_set(FP4S_EINVAL, "%s: exists and holds HDF5 data (a capture, a report or other "
                            "data): not replaced without --force; nothing was written", path);
        goto fail;
    }
    if ((rc = check_journals(d)) != 0) goto fail;
    return 0;
fail:
    decl_free(d);
    return rc;
}

static int add_decl(fp4s_outgroup *g, decl *d, size_t *idx)
{
    if (g->nout == g->cout) {
        size_t nc = g->cout ? 2 * g->cout : 8;
        decl *nd = realloc(g->out, nc * sizeof *nd);
        if (!nd) {
            decl_free(d);
            return fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
        }
        g->out = nd;
        g->cout = nc;
    }
    *idx = g->nout;
    g->out[g->nout++] = *d;
    return 0;
}

static int twice(const fp4s_outgroup *g, size_t i, const char *path)
{
    if (strcmp(g->out[i].path, path) == 0)
        return fp4s_error_set(FP4S_EINVAL, "%s: named twice as an output; nothing was written", path);
    return fp4s_error_set(FP4S_EINVAL, "%s and %s are the same file: one run writes each output once; "
                          "nothing was written", g->out[i].path, path);
}

int fp4s_outgroup_output(fp4s_outgroup *g, const char *path, unsigned flags)
{
    if (!g || !path || !*path) return fp4s_error_set(FP4S_EINVAL, "fp4s_outgroup_output: empty output name");
    if (strcmp(path, "-") == 0) {
        if (g->stdout_taken) return fp4s_error_set(FP4S_EINVAL, "-: named twice as an output (standard "
                                                   "output); nothing was written");
        g->stdout_taken = true;
        return 0;
    }
    decl d;
    size_t dup, idx;
    int rc = check_output(g, path, flags, &d, &dup);
    if (rc == 1) return 0;
    if (rc) return rc;
    if (dup != SIZE_MAX) {
        decl_free(&d);
        return twice(g, dup, path);
    }
    return add_decl(g, &d, &idx);
}

/* Candidate files of a tensor spec: the whole string, and every prefix that
 * ends before a ':'. */
int fp4s_outgroup_input(fp4s_outgroup *g, const char *spec)
{
    if (!g || !spec || !*spec || strcmp(spec, "-") == 0) return 0;
    char *s = strdup(spec);
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
    int rc = 0;
    size_t n = strlen(s);
    for (size_t cut = n + 1; cut-- > 0 && !rc;) {
        if (cut < n && s[cut] != ':') continue;
        char keep = s[cut];
        s[cut] = '\0';
        struct stat st;
        if (cut > 0 && stat(s, &st) == 0 && S_ISREG(st.st_mode)) {
            fid id = fid_of(&st);
            for (size_t i = 0; i < g->nout && !rc; i++)
                if (g->out[i].exists && fid_eq(g->out[i].file, id))
                    rc = fp4s_error_set(FP4S_EINVAL, "%s: this output is also an input (%s): "
                                        "refusing to replace it; nothing was written", g->out[i].path, spec);
            if (!rc && g->nin == g->cin) {
                size_t nc = g->cin ? 2 * g->cin : 8;
                fid *ni = realloc(g->in, nc * sizeof *ni);
                char **nn = ni ? realloc(g->in_name, nc * sizeof *nn) : NULL;
                if (ni) g->in = ni;
                if (nn) g->in_name = nn;
                if (!ni || !nn) rc = fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
                else g->cin = nc;
            }
            if (!rc) {
                if (!(g->in_name[g->nin] = strdup(spec))) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
                else g->in[g->nin++] = id;
            }
        }
        s[cut] = keep;
    }
    free(s);
    return rc;
}

int fp4s_outgroup_open(unsigned flags, fp4s_outgroup **gp)
{
    if (!gp) return fp4s_error_set(FP4S_EINVAL, "fp4s_outgroup_open: NULL");
    *gp = NULL;
    if (current) return fp4s_error_set(FP4S_EINVAL, "fp4s_outgroup_open: this thread already has an open group");
    fp4s_outgroup *g = calloc(1, sizeof *g);
    if (!g) return fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
    g->flags = flags;
    g->tail = &g->members;
    current = g;
    *gp = g;
    return 0;
}

fp4s_outgroup *fp4s_outgroup_current(void) { return current; }

unsigned fp4s_outgroup_flags(fp4s_outgroup *g, unsigned flags)
{
    if (!g) return 0;
    unsigned old = g->flags;
    g->flags = flags;
    return old;
}

/* Bind an outfile being begun to its declaration (declaring it now if the
 * tool did not). */
static int group_bind(fp4s_outgroup *g, const char *path, size_t *idx)
{
    decl d;
    size_t dup;
    int rc = check_output(g, path, 0, &d, &dup);
    if (rc) return rc; /* 1 (in place) does not reach here: the caller handles those */
    if (dup != SIZE_MAX) {
        decl_free(&d);
        if (g->out[dup].bound) return twice(g, dup, path);
        g->out[dup].bound = true;
        *idx = dup;
        return 0;
    }
    rc = add_decl(g, &d, idx);
    if (!rc) g->out[*idx].bound = true;
    return rc;
}

static void group_unlink_member(fp4s_outfile *o)
{
    fp4s_outgroup *g = o->group;
    if (!g) return;
    for (fp4s_outfile **p = &g->members; *p; p = &(*p)->gnext)
        if (*p == o) {
            *p = o->gnext;
            if (g->tail == &o->gnext) g->tail = p;
            break;
        }
    if (o->decl < g->nout) g->out[o->decl].bound = false;
    o->group = NULL;
    o->gnext = NULL;
}

/* ---- single outfiles ---------------------------------------------------------------------- */
static void outfile_free(fp4s_outfile *o)
{
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
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
        o->existed = true;
        o->seen_dev = st.st_dev;
        o->seen_ino = st.st_ino;
    }
    if (current) {
        int rc = group_bind(current, path, &o->decl);
        if (rc) {
            fp4s_outfile_abort(&o);
            return rc;
        }
        o->group = current;
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
    if (o->group) {
        *o->group->tail = o;
        o->group->tail = &o->gnext;
    }
    *out = o;
    return 0;
}

const char *fp4s_outfile_tmppath(const fp4s_outfile *o) { return o ? o->tmp : NULL; }

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void fsync_dir_of(const char *path)
{
    char *d = dir_of(path);
    if (!d) return;
    fsync_dir(d);
    free(d);
}

static int fsync_tmp(const fp4s_outfile *o)
{
    int fd = open(o->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fp4s_error_set(FP4S_EWRITE, "%s: temporary %s vanished: %s", o->path, o->tmp, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: fsync failed: %s", o->path, strerror(errno));
    close(fd);
    return rc;
}

/* fsync, then rename unless a live writer holds the file it replaces (the
 * lock protocol of lib/io/lock.c), then fsync the directory. Only what was
 * there when the run decided to write the output is replaced (its
 * declaration in the group, or the moment it was begun): nothing, or that
 * very file; another writer's file that appeared meanwhile is refused. */
static int rename_into_place(const fp4s_outfile *o)
{
    if (o->group) {
        const decl *d = &o->group->out[o->decl];
        return fp4s_file_commit_as(o->tmp, o->target, d->exists, (uint64_t)d->file.dev, (uint64_t)d->file.ino);
    }
    return fp4s_file_commit_as(o->tmp, o->target, o->existed, (uint64_t)o->seen_dev, (uint64_t)o->seen_ino);
}

int fp4s_outfile_commit(fp4s_outfile **op)
{
    if (!op || !*op) return fp4s_error_set(FP4S_EINVAL, "fp4s_outfile_commit: NULL outfile");
    fp4s_outfile *o = *op;
    if (o->is_stdout) {
        outfile_free(o);
        *op = NULL;
        return 0;
    }
    int rc;
    if (o->group) {
        /* finished now; the group renames it with the others */
        if ((rc = fsync_tmp(o)) != 0) {
            fp4s_outfile_abort(op);
            return rc;
        }
        o->ready = true;
        *op = NULL;
        return 0;
    }
    if ((rc = rename_into_place(o)) != 0) {
        fp4s_outfile_abort(op);
        return rc;
    }
    live_del(o->tmp);
    outfile_free(o);
    *op = NULL;
    return 0;
}

void fp4s_outfile_abort(fp4s_outfile **op)
{
    if (!op || !*op) return;
    fp4s_outfile *o = *op;
    group_unlink_member(o);
    if (o->tmp && !o->is_stdout) {
        (void)unlink(o->tmp);
        live_del(o->tmp);
    }
    outfile_free(o);
    *op = NULL;
}

/* ---- group commit and abort ------------------------------------------------------------------ */
static void group_free(fp4s_outgroup *g)
{
    for (size_t i = 0; i < g->nin; i++) free(g->in_name[i]);
    free(g->in);
    free(g->in_name);
    for (size_t i = 0; i < g->nout; i++) decl_free(&g->out[i]);
    free(g->out);
    if (current == g) current = NULL;
    free(g);
}

void fp4s_outgroup_abort(fp4s_outgroup **gp)
{
    if (!gp || !*gp) return;
    fp4s_outgroup *g = *gp;
    fp4s_outfile *m = g->members;
    while (m) {
        fp4s_outfile *next = m->gnext;
        m->group = NULL;
        m->gnext = NULL;
        if (m->ready) {
            (void)unlink(m->tmp);
            live_del(m->tmp);
            outfile_free(m);
        } else {
            (void)unlink(m->tmp); /* still its writer's: it aborts the handle */
        }
        m = next;
    }
    group_free(g);
    *gp = NULL;
}

/* The asynchronous signals: all but those a fault raises synchronously. */
static void async_signals(sigset_t *s)
{
    sigfillset(s);
    int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++) sigdelset(s, sync_sigs[i]);
}

typedef struct {
    char *path;  /* absolute */
    int fd;      /* open and locked (LOCK_EX) while the commit runs */
} journal;

/* The absolute path of a member's temporary. */
static char *abs_tmp(const fp4s_outgroup *g, const fp4s_outfile *m)
{
    return join_path(g->out[m->decl].dir, base_of(m->tmp));
}

static void journals_remove(journal *j, size_t nj)
{
    for (size_t i = 0; i < nj; i++) {
        if (j[i].path) {
            (void)unlink(j[i].path);
            fsync_dir_of(j[i].path);
        }
        if (j[i].fd >= 0) close(j[i].fd);
        free(j[i].path);
    }
    free(j);
}

/* One journal in every directory the group writes to, fsync'ed (with the
 * directory) before the first rename. */
static int journals_write(fp4s_outgroup *g, size_t n, journal **out, size_t *nout)
{
    journal *j = calloc(n, sizeof *j);
    if (!j) return fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
    size_t nj = 0;
    for (fp4s_outfile *m = g->members; m; m = m->gnext) {
        const decl *d = &g->out[m->decl];
        bool seen = false;
        for (fp4s_outfile *p = g->members; p != m; p = p->gnext)
            if (fid_eq(g->out[p->decl].dirid, d->dirid)) seen = true;
        if (seen) continue;
        size_t L = strlen(d->canon) + sizeof JOURNAL_SUFFIX;
        j[nj].fd = -1;
        if (!(j[nj].path = malloc(L))) goto nomem;
        snprintf(j[nj].path, L, "%s%s", d->canon, JOURNAL_SUFFIX);
        nj++;
    }
    pthread_once(&mode_once, mode_init);
    int rc = 0;
    for (size_t i = 0; i < nj && !rc; i++) {
        int fd = open(j[i].path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, new_file_mode);
        if (fd < 0) {
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write the commit journal: %s%s", j[i].path,
                                strerror(errno), errno == EEXIST ? " (another commit into these outputs "
                                "is under way, or was killed: see the file)" : "");
            free(j[i].path);
            j[i].path = NULL; /* not ours: never removed */
            break;
        }
        j[i].fd = fd;
        (void)flock(fd, LOCK_EX | LOCK_NB);
        FILE *f = fdopen(dup(fd), "w");
        if (!f) {
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write the commit journal: %s", j[i].path, strerror(errno));
            break;
        }
        fprintf(f, "#!/bin/sh\n"
                   "# fp4scope commit journal (process %ld): the %zu outputs below were being renamed\n"
                   "# into place together when the process died. Every temporary named here is\n"
                   "# complete. Run `sh` on this file to finish the commit (it moves the\n"
                   "# temporaries that are left into place and removes this journal), or delete\n"
                   "# this file and those temporaries to leave the outputs as they are.\n"
                   "set -e\n", (long)getpid(), n);
        for (fp4s_outfile *m = g->members; m; m = m->gnext) {
            char *t = abs_tmp(g, m);
            if (!t) {
                rc = fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
                break;
            }
            fputs("[ ! -e ", f);
            sh_quote(f, t);
            fputs(" ] || mv -f -- ", f);
            sh_quote(f, t);
            fputc(' ', f);
            sh_quote(f, g->out[m->decl].canon);
            fputc('\n', f);
            free(t);
        }
        fputs("rm -f --", f);
        for (size_t k = 0; k < nj; k++) {
            fputc(' ', f);
            sh_quote(f, j[k].path);
        }
        fputc('\n', f);
        bool bad = ferror(f) != 0;
        bad |= fclose(f) != 0;
        if (!rc && bad)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write the commit journal: %s", j[i].path, strerror(errno));
        if (!rc && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: fsync failed: %s", j[i].path, strerror(errno));
        if (!rc) fsync_dir_of(j[i].path);
    }
    if (rc) {
        journals_remove(j, nj);
        return rc;
    }
    *out = j;
    *nout = nj;
    return 0;
nomem:
    journals_remove(j, nj);
    return fp4s_error_set(FP4S_ENOMEM, "output group: out of memory");
}

/* The end of a commit that renamed something: the members and the group
 * freed (their temporaries are gone or listed in a journal), the commit state
 * idle again and the caller's signal mask back. */
static void commit_end(fp4s_outgroup **gp, const sigset_t *old)
{
    fp4s_outgroup *g = *gp;
    for (fp4s_outfile *k = g->members; k;) {
        fp4s_outfile *next = k->gnext;
        outfile_free(k);
        k = next;
    }
    g->members = NULL;
    group_free(g);
    *gp = NULL;
    atomic_store(&commit_state, ST_IDLE);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

int fp4s_outgroup_commit(fp4s_outgroup **gp)
{
    if (!gp || !*gp) return fp4s_error_set(FP4S_EINVAL, "fp4s_outgroup_commit: NULL group");
    fp4s_outgroup *g = *gp;
    size_t n = 0;
    int rc = 0;
    for (fp4s_outfile *m = g->members; m; m = m->gnext) {
        n++;
        if (!m->ready && !rc)
            rc = fp4s_error_set(FP4S_EINTERNAL, "%s: output begun but never finished; nothing was written", m->path);
    }
    /* a live writer that took an output since it was declared, or another
     * run that wrote one meanwhile: refused before anything is renamed (the
     * renames check again, each in one step) */
    for (fp4s_outfile *m = g->members; m && !rc; m = m->gnext) {
        const decl *d = &g->out[m->decl];
        struct stat st;
        if (stat(m->target, &st) == 0 && S_ISREG(st.st_mode)) {
            if (!d->exists)
                rc = fp4s_error_set(FP4S_EBUSY, "%s: appeared while this run was working (another process "
                                    "wrote it meanwhile); not replaced; nothing was written", m->path);
            else if (!fid_eq(fid_of(&st), d->file))
                rc = fp4s_error_set(FP4S_EBUSY, "%s: replaced by another process while this run was working; "
                                    "not replaced; nothing was written", m->path);
        }
        if (!rc && d->exists) rc = fp4s_file_held(m->target);
    }
    if (rc || n == 0) {
        fp4s_outgroup_abort(gp);
        return rc;
    }
    sigset_t block, old;
    async_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int idle = ST_IDLE;
    if (!atomic_compare_exchange_strong(&commit_state, &idle, ST_COMMITTING)) {
        /* a signal handler is removing the temporaries: the process is ending */
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        rc = fp4s_error_set(FP4S_EWRITE, "interrupted by a signal; nothing was written");
        fp4s_outgroup_abort(gp);
        return rc;
    }
    journal *j = NULL;
    size_t nj = 0;
    if (n >= 2) rc = journals_write(g, n, &j, &nj);
    size_t done = 0, kept = 0;
    char theirs[1024] = "";
    fp4s_outfile *m = g->members;
    for (; m && !rc; m = m->gnext) {
        rc = rename_into_place(m);
        if (rc == FP4S_EBUSY && done > 0) {
            /* another process wrote this output meanwhile, after some of ours
             * are in place: its file is kept and this run's version dropped;
             * the journal would put ours over it, so the others go on */
            if (!kept++) snprintf(theirs, sizeof theirs, "%s", fp4s_last_error());
            (void)unlink(m->tmp);
            live_del(m->tmp);
            rc = 0;
            continue;
        }
        if (rc) break;
        live_del(m->tmp);
        done++;
    }
    if (!rc && kept) {
        rc = fp4s_error_set(FP4S_EBUSY, "%s; this run's version of it was dropped, and %zu of its %zu outputs "
                            "are in place", theirs, done, n);
        for (fp4s_outfile *k = g->members; k; k = k->gnext) {
            bool seen = false;
            for (fp4s_outfile *p = g->members; p != k; p = p->gnext)
                if (fid_eq(g->out[p->decl].dirid, g->out[k->decl].dirid)) seen = true;
            if (!seen) fsync_dir(g->out[k->decl].dir);
        }
        if (nj) journals_remove(j, nj);
        commit_end(gp, &old);
        return rc;
    }
    if (rc && done > 0) {
        /* renamed in part: the journal keeps what is left; its temporaries stay */
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", fp4s_last_error());
        for (fp4s_outfile *k = m; k; k = k->gnext) live_del(k->tmp);
        rc = fp4s_error_set(rc, "%s; %zu of the %zu outputs are in place, and %s lists the others (each "
                            "complete as a temporary): run 'sh %s' to finish the commit",
                            keep, done, n, j[0].path, j[0].path);
        for (size_t i = 0; i < nj; i++) {
            close(j[i].fd);
            free(j[i].path);
        }
        free(j);
        commit_end(gp, &old);
        return rc;
    }
    if (rc) {
        if (!strstr(fp4s_last_error(), "nothing was written")) {
            char keep[1024];
            snprintf(keep, sizeof keep, "%s", fp4s_last_error());
            rc = fp4s_error_set(rc, "%s; nothing was written", keep);
        }
        journals_remove(j, nj);
        fp4s_outgroup_abort(gp);
        atomic_store(&commit_state, ST_IDLE);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    /* every rename done: make them durable, then drop the journals */
    for (fp4s_outfile *k = g->members; k; k = k->gnext) {
        bool seen = false;
        for (fp4s_outfile *p = g->members; p != k; p = p->gnext)
            if (fid_eq(g->out[p->decl].dirid, g->out[k->decl].dirid)) seen = true;
        if (!seen) fsync_dir(g->out[k->decl].dir);
    }
    if (nj) journals_remove(j, nj);
    commit_end(gp, &old);
    return 0;
}
