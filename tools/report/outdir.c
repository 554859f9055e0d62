/* fp4-report: the report directory, written into a staging directory beside
 * it and renamed into place all or none (see report.h). */
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The files and directories of the staging directory, newest first, for the
 * signal handler: each node is complete before it is linked. */
typedef struct node {
    struct node *next;
    char path[];
} node;

struct outdir {
    char target[PATH_MAX];   /* as given */
    char staging[PATH_MAX];
    bool replace;            /* an earlier report (or an empty directory) is there ... */
    dev_t had_dev;           /* ... this one: the only directory the commit replaces */
    ino_t had_ino;
    bool committed;
};

static _Atomic(node *) tracked;
static outdir *the_od;
static char **inputs;
static size_t ninputs;

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
#define NSIGS (sizeof sigs / sizeof *sigs)
static struct sigaction old_sa[NSIGS];

static void track_abs(const char *path)
{
    size_t l = strlen(path);
    node *nd = xmalloc(sizeof *nd + l + 1);
    memcpy(nd->path, path, l + 1);
    nd->next = atomic_load(&tracked);
    atomic_store(&tracked, nd);
}

/* async-signal-safe: unlink / rmdir only */
static void remove_tracked(void)
{
    for (node *nd = atomic_exchange(&tracked, NULL); nd; nd = nd->next)
        if (unlink(nd->path) != 0) (void)rmdir(nd->path);
}

static void free_tracked(void)
{
    node *nd = atomic_exchange(&tracked, NULL);
    while (nd) {
        node *nx = nd->next;
        free(nd);
        nd = nx;
    }
}

static void on_signal(int sig)
{
    remove_tracked();
    for (size_t i = 0; i < NSIGS; i++)
        if (sigs[i] == sig) {
            /* then what the tools do on a signal (cli.c: remove the run's temporaries, die by it) */
            if (old_sa[i].sa_handler != SIG_DFL && old_sa[i].sa_handler != SIG_IGN) old_sa[i].sa_handler(sig);
            signal(sig, SIG_DFL);
            raise(sig);
        }
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(p) != 0 && errno != ENOENT) return -1;
    return 0;
}

static int rm_tree(const char *dir) { return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* At exit: a report not committed is removed with its staging directory. */
static void at_exit_status(int status, void *arg)
{
    (void)status;
    (void)arg;
    if (the_od && !the_od->committed) {
        free_tracked();
        rm_tree(the_od->staging);
    } else {
        free_tracked();
    }
    free(the_od);
    the_od = NULL;
    for (size_t i = 0; i < ninputs; i++) free(inputs[i]);
    free(inputs);
    inputs = NULL;
    ninputs = 0;
}

void od_input(const char *path)
{
    char *rp = realpath(path, NULL);
    if (!rp) return; /* a missing input is reported by its reader */
    inputs = xrealloc(inputs, (ninputs + 1) * sizeof *inputs);
    inputs[ninputs++] = rp;
}

/* Does the directory hold anything? */
static int dir_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Is DIR/MARKER a report's manifest (its "tool" is fp4-report)? */
static bool is_report(const char *dir)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, OD_MARKER);
    json_error_t err;
    json_t *j = json_load_file(p, 0, &err);
    if (!j) return false;
    json_t *t = json_object_get(j, "tool");
    bool ok = json_is_string(t) && strcmp(json_string_value(t), "fp4-report") == 0;
    json_decref(j);
    return ok;
}

/* Staging directories: ".NAME.fp4-report.XXXXXX" beside the report, locked
 * (flock LOCK_EX on the directory) by the run that writes it for as long as
 * it lives, so that a later run can tell one a killed run left (SIGKILL, a
 * power loss: no handler ran) from one being written. */
#define STAGING_TAG ".fp4-report."
#define STALE_AGE 60 /* seconds: a directory younger than this may be one mkdtemp made an instant before its lock */

static int staging_lock = -1;

/* Is `name` a staging directory's name: ".X.fp4-report." and 6 characters? */
static bool staging_name(const char *name)
{
    size_t n = strlen(name), tl = strlen(STAGING_TAG);
    if (name[0] != '.' || n < 1 + 1 + tl + 6) return false;
    if (strncmp(name + n - 6 - tl, STAGING_TAG, tl) != 0) return false;
    for (size_t i = n - 6; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
              (name[i] >= '0' && name[i] <= '9')))
            return false;
    return true;
}

/* Remove the staging directories of fp4-report runs that died in `parent`:
 * only directories of that name, of this user, not locked (no live run holds
 * them) and older than STALE_AGE. */
static void remove_stale_staging(const char *parent)
{
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d))) {
        if (!staging_name(e->d_name)) continue;
        char p[PATH_MAX];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", parent, e->d_name) >= sizeof p) continue;
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || now - st.st_mtime < STALE_AGE)
            continue;
        int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat fs;
        /* still that directory, and no live run holds it */
        if (fstat(fd, &fs) == 0 && fs.st_dev == st.st_dev && fs.st_ino == st.st_ino && flock(fd, LOCK_EX | LOCK_NB) == 0)
            (void)rm_tree(p);
        close(fd);
    }
    closedir(d);
}

outdir *od_open(const char *target, bool force)
{
    if (!*target) cli_usage("-o: empty directory name");
    size_t tl = strlen(target);
    if (tl >= PATH_MAX - 64) cli_usage("-o: path too long");
    outdir *od = xcalloc(1, sizeof *od);
    snprintf(od->target, sizeof od->target, "%s", target);
    while (tl > 1 && od->target[tl - 1] == '/') od->target[--tl] = '\0';
    /* parent directory and base name */
    char parent[PATH_MAX], base[NAME_MAX + 1];
    const char *sl = strrchr(od->target, '/');
    if (sl) {
        size_t pl = (size_t)(sl - od->target);
        snprintf(parent, sizeof parent, "%.*s", (int)(pl ? pl : 1), od->target);
        if ((size_t)snprintf(base, sizeof base, "%s", sl + 1) >= sizeof base) cli_usage("-o: name too long");
    } else {
        snprintf(parent, sizeof parent, ".");
        if ((size_t)snprintf(base, sizeof base, "%s", od->target) >= sizeof base) cli_usage("-o: name too long");
    }
    if (!strcmp(base, ".") || !strcmp(base, "..") || !*base)
        cli_usage("-o %s: name the report directory itself, not '.' or '..'", target);
    struct stat st;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        cli_die(FP4S_EXIT_OUTPUT, "%s: the directory that would hold the report does not exist", parent);
    char *rparent = realpath(parent, NULL);
    if (!rparent) cli_die(FP4S_EXIT_OUTPUT, "%s: %s", parent, strerror(errno));
    char full[PATH_MAX + NAME_MAX + 2];
    snprintf(full, sizeof full, "%s/%s", strcmp(rparent, "/") ? rparent : "", base);
    free(rparent);
    /* no input may be the report directory or lie inside it */
    size_t fl = strlen(full);
    for (size_t i = 0; i < ninputs; i++)
        if (!strcmp(inputs[i], full) || (!strncmp(inputs[i], full, fl) && inputs[i][fl] == '/'))
            cli_usage("-o %s: the report directory holds the input %s; refusing to replace it", target, inputs[i]);
    if (lstat(od->target, &st) == 0) {
        if (S_ISLNK(st.st_mode)) cli_usage("-o %s: is a symbolic link; name the directory itself", target);
        if (!S_ISDIR(st.st_mode)) cli_usage("-o %s: exists and is not a directory; refusing to replace it", target);
        int ne = dir_entries(od->target);
        if (ne < 0) cli_die(FP4S_EXIT_OUTPUT, "%s: cannot read the directory: %s", target, strerror(errno));
        if (ne > 0 && !is_report(od->target))
            cli_usage("-o %s: exists and is not a report of fp4-report (no %s); refusing to replace it, also "
                      "with --force", target, OD_MARKER);
        if (ne > 0 && !force)
            cli_usage("-o %s: a report is there already; give --force to replace it", target);
        od->replace = true;
        od->had_dev = st.st_dev;
        od->had_ino = st.st_ino;
    } else if (errno != ENOENT) {
        cli_die(FP4S_EXIT_OUTPUT, "%s: %s", target, strerror(errno));
    }
    if ((size_t)snprintf(od->staging, sizeof od->staging, "%s/.%.200s" STAGING_TAG "XXXXXX", parent, base) >=
        sizeof od->staging)
        cli_usage("-o: path too long");
    remove_stale_staging(parent);
    /* the handlers before the directory exists: no moment leaves it behind */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIGS; i++) {
        sigaction(sigs[i], NULL, &old_sa[i]);
        if (old_sa[i].sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
    on_exit(at_exit_status, NULL);
    sigset_t all, prev;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &prev);
    if (!mkdtemp(od->staging)) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &prev, NULL);
        cli_die(FP4S_EXIT_OUTPUT, "%s: cannot create the staging directory: %s", parent, strerror(e));
    }
    track_abs(od->staging);
    the_od = od;
    /* held until the process ends, whatever ends it */
    staging_lock = open(od->staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (staging_lock >= 0) (void)flock(staging_lock, LOCK_EX | LOCK_NB);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    return od;
}

const char *od_staging(const outdir *od) { return od->staging; }
const char *od_target(const outdir *od) { return od->target; }

void od_path(const outdir *od, const char *rel, char *buf, size_t n)
{
    if ((size_t)snprintf(buf, n, "%s/%s", od->staging, rel) >= n) cli_die(FP4S_EXIT_OUTPUT, "%s/%s: path too long", od->target, rel);
}

void od_track(outdir *od, const char *rel)
{
    char p[PATH_MAX];
    od_path(od, rel, p, sizeof p);
    track_abs(p);
}

void od_mkdir(outdir *od, const char *rel)
{
    char p[PATH_MAX];
    od_path(od, rel, p, sizeof p);
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        cli_die(FP4S_EXIT_OUTPUT, "%s/%s: cannot create the directory: %s", od->target, rel, strerror(errno));
    track_abs(p);
}

void od_write(outdir *od, const char *rel, const char *data, size_t len)
{
    char p[PATH_MAX];
    od_path(od, rel, p, sizeof p);
    track_abs(p);
    FILE *f = fopen(p, "wb");
    if (!f) cli_die(FP4S_EXIT_OUTPUT, "%s/%s: cannot write: %s", od->target, rel, strerror(errno));
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    int bad = w != len || ferror(f), e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) cli_die(FP4S_EXIT_OUTPUT, "%s/%s: write failed: %s", od->target, rel, strerror(e ? e : EIO));
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int od_commit(outdir *od)
{
    /* readable as the user's umask allows (mkdtemp made it 0700) */
    mode_t um = umask(0);
    umask(um);
    if (chmod(od->staging, 0777 & ~um) != 0) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog(), od->staging, strerror(errno));
        return FP4S_EXIT_OUTPUT;
    }
    sigset_t all, prev;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &prev);
    int rc = 0, e = 0;
    char old[PATH_MAX + 8];
    old[0] = '\0';
    struct stat now;
    bool theirs = false; /* another process put its directory there while this run worked */
    if (od->replace) {
        /* an earlier report (or an empty directory): exchanged in one step,
         * and only if it is still the one checked at the start */
        if (lstat(od->target, &now) == 0 && (now.st_dev != od->had_dev || now.st_ino != od->had_ino)) {
            theirs = true;
            rc = -1;
        } else if (renameat2(AT_FDCWD, od->staging, AT_FDCWD, od->target, RENAME_EXCHANGE) == 0) {
            snprintf(old, sizeof old, "%s", od->staging);
            if (lstat(old, &now) != 0 || now.st_dev != od->had_dev || now.st_ino != od->had_ino) {
                /* replaced at the last moment: theirs goes back, ours to staging */
                if (renameat2(AT_FDCWD, od->staging, AT_FDCWD, od->target, RENAME_EXCHANGE) == 0) {
                    theirs = true;
                    rc = -1;
                    old[0] = '\0';
                }
            }
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
            /* no exchange on this file system: move the old one aside first */
            if ((size_t)snprintf(old, sizeof old, "%s.old", od->staging) >= sizeof old) old[0] = '\0';
            if (rename(od->target, old) != 0) {
                e = errno;
                rc = -1;
                old[0] = '\0';
            } else if (rename(od->staging, od->target) != 0) {
                e = errno;
                rc = -1;
                (void)rename(old, od->target); /* put it back */
                old[0] = '\0';
            }
        } else {
            e = errno;
            rc = -1;
        }
    } else if (renameat2(AT_FDCWD, od->staging, AT_FDCWD, od->target, RENAME_NOREPLACE) != 0) {
        e = errno;
        rc = -1;
        if (e == EEXIST || e == ENOTEMPTY) theirs = true; /* created meanwhile */
        else if (e == EINVAL || e == ENOSYS || e == ENOTSUP) {
            /* no RENAME_NOREPLACE here: a plain rename (it refuses a directory
             * that is not empty, and replaces only an empty one) */
            rc = rename(od->staging, od->target) == 0 ? 0 : -1;
            e = errno;
            if (rc && (e == EEXIST || e == ENOTEMPTY)) theirs = true;
        }
    }
    if (rc == 0) {
        od->committed = true;
        free_tracked();
    }
    sigprocmask(SIG_SETMASK, &prev, NULL);
    if (rc && theirs) {
        fprintf(stderr, "%s: %s: %s; not replaced; nothing was written\n", cli_prog(), od->target,
                od->replace ? "replaced by another process while this run was working"
                            : "appeared while this run was working (another process wrote it meanwhile)");
        return FP4S_EXIT_OUTPUT;
    }
    if (rc) {
        fprintf(stderr, "%s: %s: the report could not be put in place: %s\n", cli_prog(), od->target, strerror(e));
        return FP4S_EXIT_OUTPUT;
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", od->target);
    char *sl = strrchr(parent, '/');
    if (sl) *(sl == parent ? sl + 1 : sl) = '\0';
    else snprintf(parent, sizeof parent, ".");
    (void)fsync_dir(parent);
    if (*old && rm_tree(old) != 0)
        fprintf(stderr, "%s: note: the replaced report %s could not be removed completely: %s\n", cli_prog(), old,
                strerror(errno));
    return 0;
}
