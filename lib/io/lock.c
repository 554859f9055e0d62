/* One writer per file: the lock protocol of every fp4scope writer (tensor.h,
 * "one writer per file"; man/fp4scope-capture.5, WRITING).
 *
 * The lock is flock(2) on the file itself, the same lock HDF5's own file
 * locking takes (LOCK_EX for a writer, LOCK_SH for a reader, held while the
 * file is open), so the protocol also covers h5py and other HDF5 programs.
 *   - A writer in place (the capture writer) opens the path, takes LOCK_EX
 *     without waiting, then checks that the path still names the file it
 *     locked (a replacement may have been renamed over it in between; then it
 *     starts again). Only then does it create, truncate or modify anything,
 *     so a refused writer changes nothing.
 *   - A replacement (a finished temporary renamed over the path) takes
 *     LOCK_SH on the file it replaces and renames while holding it: a live
 *     writer (LOCK_EX) makes it fail, a writer that starts meanwhile is
 *     refused or finds the new file, and readers are not disturbed (they keep
 *     the old file). When the path does not exist the rename refuses to
 *     replace whatever appears in the meantime (renameat2 RENAME_NOREPLACE,
 *     else link + unlink) and the check starts again.
 *   - The outputs of a run (fp4s_file_commit_as, lib/io/outfile.c) replace
 *     only what was there when the run decided to write them: nothing, and a
 *     file that appears meanwhile (another run writing the same output) is
 *     refused, not replaced (RENAME_NOREPLACE); or the very file (device and
 *     inode) seen then, swapped in one step (RENAME_EXCHANGE) and checked, so
 *     that another writer's file put there meanwhile is put back, not lost.
 * HDF5_USE_FILE_LOCKING is honoured as HDF5 does: FALSE (or 0) turns the
 * protocol off, BEST_EFFORT goes on where the file system has no flock. */
#include "h5_internal.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { LOCKS_ON, LOCKS_OFF, LOCKS_BEST_EFFORT };

static int lock_policy(void)
{
    const char *e = getenv("HDF5_USE_FILE_LOCKING");
    if (!e) return LOCKS_ON;
    if (strcmp(e, "FALSE") == 0 || strcmp(e, "0") == 0) return LOCKS_OFF;
    if (strcmp(e, "BEST_EFFORT") == 0) return LOCKS_BEST_EFFORT;
    return LOCKS_ON;
}

static bool lock_unsupported(int e) { return e == ENOSYS || e == ENOLCK || e == EOPNOTSUPP; }

/* flock without waiting: 0 taken (or skipped by the policy), 1 held by
 * someone else, <0 error recorded. */
static int try_flock(int fd, int how, const char *path)
{
    int pol = lock_policy();
    if (pol == LOCKS_OFF) return 0;
    while (flock(fd, how | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return 1;
        if (lock_unsupported(errno) && pol == LOCKS_BEST_EFFORT) return 0;
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot lock: %s (the file system has no flock(2); "
                              "HDF5_USE_FILE_LOCKING=BEST_EFFORT writes without the lock)", path,
                              strerror(errno));
    }
    return 0;
}

/* Who holds a file we could not lock: a writer (exclusive), or only readers. */
static bool only_readers(int fd)
{
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) return false;
    (void)flock(fd, LOCK_UN);
    return true;
}

static int busy(const char *path, int fd, const char *what)
{
    if (only_readers(fd))
        return fp4s_error_set(FP4S_EBUSY, "%s: open for reading in another process (it holds HDF5's "
                              "shared file lock); %s", path, what);
    return fp4s_error_set(FP4S_EBUSY, "%s: held by another writer (one writer per file: it holds "
                          "the file lock; see fp4scope-capture(5)); %s", path, what);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int fp4s_wlock_take(const char *path, fp4s_wlock_mode mode, fp4s_wlock *l)
{
    l->fd = -1;
    l->created = false;
    for (int attempt = 0; attempt < 16; attempt++) {
        int fl = O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
        if (mode != FP4S_WLOCK_EXISTING) fl |= O_CREAT;
        if (mode == FP4S_WLOCK_NEW) fl |= O_EXCL;
        int fd = open(path, fl, 0666);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR) continue;
            if (e == EEXIST)
                return fp4s_error_set(FP4S_EWRITE, "%s: already exists (nothing was changed)", path);
            if (mode == FP4S_WLOCK_EXISTING && e == ENOENT)
                return fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, strerror(e));
            if (mode == FP4S_WLOCK_EXISTING && (e == EACCES || e == EROFS || e == EPERM))
                return fp4s_error_set(FP4S_EWRITE, "%s: cannot open for writing: %s", path, strerror(e));
            return fp4s_error_set(mode == FP4S_WLOCK_EXISTING ? FP4S_EOPEN : FP4S_EWRITE,
                                  "%s: cannot %s: %s", path,
                                  mode == FP4S_WLOCK_EXISTING ? "open" : "create", strerror(e));
        }
        struct stat fs, ps;
        if (fstat(fd, &fs) != 0) {
            int e = errno;
            close(fd);
            return fp4s_error_set(FP4S_EWRITE, "%s: %s", path, strerror(e));
        }
        if (!S_ISREG(fs.st_mode)) {
            close(fd);
            return fp4s_error_set(FP4S_EWRITE, "%s: not a regular file", path);
        }
        bool made = mode == FP4S_WLOCK_NEW;
        /* A refused writer leaves even a file it has just created: whoever
         * locked it first is writing into it. */
        int r = try_flock(fd, LOCK_EX, path);
        if (r != 0) {
            int rc = r < 0 ? r : busy(path, fd, "nothing was changed");
            close(fd);
            if (r < 0 && made) (void)unlink(path); /* no lock here: ours alone, and empty */
            return rc;
        }
        if (stat(path, &ps) != 0 || !same_file(&fs, &ps)) {
            /* replaced (or removed) between open and lock: start again */
            close(fd);
            if (mode == FP4S_WLOCK_NEW)
                return fp4s_error_set(FP4S_EBUSY, "%s: replaced by another process while it was being "
                                      "created; nothing was changed", path);
            continue;
        }
        l->fd = fd;
        l->created = made;
        l->dev = (uint64_t)fs.st_dev;
        l->ino = (uint64_t)fs.st_ino;
        return 0;
    }
    return fp4s_error_set(FP4S_EBUSY, "%s: replaced again and again while opening; nothing was changed",
                          path);
}

bool fp4s_wlock_is(const fp4s_wlock *l, int fd)
{
    struct stat st;
    return l->fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == l->dev &&
           (uint64_t)st.st_ino == l->ino;
}

void fp4s_wlock_drop_created(fp4s_wlock *l, const char *path)
{
    struct stat st;
    if (l->fd >= 0 && l->created && stat(path, &st) == 0 && (uint64_t)st.st_dev == l->dev &&
        (uint64_t)st.st_ino == l->ino)
        (void)unlink(path);
    l->created = false;
}

void fp4s_wlock_release(fp4s_wlock *l)
{
    if (l->fd >= 0) close(l->fd); /* closing the only descriptor of the lock releases it */
    l->fd = -1;
}

/* ---- public: asking before writing, and replacing safely --------------------------- */
int fp4s_file_held(const char *path)
{
    if (!path || !*path) return fp4s_error_set(FP4S_EINVAL, "fp4s_file_held: empty path");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return 0; /* absent or unreadable: no writer of ours can hold it */
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && lock_policy() != LOCKS_OFF) {
        while (flock(fd, LOCK_SH | LOCK_NB) != 0) {
            if (errno == EINTR) continue;
            if (errno == EWOULDBLOCK)
                rc = fp4s_error_set(FP4S_EBUSY, "%s: held by a live writer (it holds the file lock: a "
                                    "capture being written, or a program writing it with HDF5); "
                                    "not replaced", path);
            break;
        }
    }
    close(fd); /* releases the shared lock if it was taken */
    return rc;
}

/* rename(from, to) that fails with EEXIST instead of replacing. */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
#endif
    if (link(from, to) == 0) {
        (void)unlink(from);
        return 0;
    }
    if (errno == EEXIST) return -1;
    /* no hard links here (some FUSE and FAT file systems): a plain rename, with
     * the small window that the check before it cannot close */
    struct stat st;
    if (lstat(to, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

static void fsync_dir_of(const char *path)
{
    char *d = strdup(path);
    if (!d) return;
    char *slash = strrchr(d, '/');
    const char *dir = ".";
    if (slash == d) dir = "/";
    else if (slash) {
        *slash = '\0';
        dir = d;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(d);
}

/* What a commit may replace (commit_rename). */
enum {
    CM_ANY,     /* whatever is there (fp4s_file_commit with replace) */
    CM_NONE,    /* nothing: "already exists" (fp4s_file_commit without replace) */
    CM_ABSENT,  /* nothing, as when the run decided to write it: a file that appeared meanwhile is another writer's */
    CM_SAME     /* the file (dev, ino) that was there then, or nothing */
};

static int appeared(const char *path)
{
    return fp4s_error_set(FP4S_EBUSY, "%s: appeared while this run was working (another process wrote it "
                          "meanwhile); not replaced", path);
}

static int changed(const char *path)
{
    return fp4s_error_set(FP4S_EBUSY, "%s: replaced by another process while this run was working; not "
                          "replaced", path);
}

/* Rename tmp over path, which held the file (dev, ino) a moment ago: in one
 * step where the file system can (RENAME_EXCHANGE), then the file that comes
 * back at tmp must be that one, else it is put back and nothing is replaced;
 * elsewhere a plain rename after the checks (a window of microseconds). */
static int replace_same(const char *tmp, const char *path, dev_t dev, ino_t ino)
{
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
        struct stat os;
        if (lstat(tmp, &os) == 0 && os.st_dev == dev && os.st_ino == ino) {
            (void)unlink(tmp); /* the file replaced */
            return 0;
        }
        /* another writer's file: back in its place, ours at tmp again */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) return changed(path);
        return fp4s_error_set(FP4S_EINTERNAL, "%s: replaced by another process while this run was working, "
                              "and its file could not be put back: it is now %s (move it back by hand); this "
                              "run's output is at %s", path, tmp, path);
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot rename the temporary into place: %s", path, strerror(errno));
#else
    (void)dev;
    (void)ino;
#endif
    if (rename(tmp, path) != 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot rename the temporary into place: %s", path, strerror(errno));
    return 0;
}

/* The rename itself, under the protocol (see the top of this file). */
static int commit_rename(const char *tmp, const char *path, int mode, dev_t dev, ino_t ino)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR) continue;
            struct stat ls;
            if (errno == ENOENT && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
                return fp4s_error_set(FP4S_EWRITE, "%s: a symbolic link to a missing file; not "
                                      "replaced", path);
            if (errno != ENOENT)
                return fp4s_error_set(FP4S_EWRITE, "%s: cannot check the file it replaces: %s", path,
                                      strerror(errno));
            if (rename_noreplace(tmp, path) == 0) return 0;
            if (errno != EEXIST)
                return fp4s_error_set(FP4S_EWRITE, "%s: cannot rename the temporary into place: %s", path,
                                      strerror(errno));
            if (mode == CM_ABSENT || mode == CM_SAME) return appeared(path);
            continue; /* appeared meanwhile: look at it */
        }
        struct stat fs, ps;
        if (fstat(fd, &fs) != 0) {
            int e = errno;
            close(fd);
            return fp4s_error_set(FP4S_EWRITE, "%s: %s", path, strerror(e));
        }
        if (mode == CM_NONE || mode == CM_ABSENT) {
            close(fd);
            return mode == CM_ABSENT ? appeared(path)
                                     : fp4s_error_set(FP4S_EWRITE, "%s: already exists; not replaced", path);
        }
        if (mode == CM_SAME && (fs.st_dev != dev || fs.st_ino != ino)) {
            close(fd);
            return changed(path);
        }
        if (S_ISREG(fs.st_mode)) {
            int r = try_flock(fd, LOCK_SH, path);
            if (r) {
                int rc = r < 0 ? r : fp4s_error_set(FP4S_EBUSY, "%s: held by a live writer (it holds "
                                                    "the file lock; see fp4scope-capture(5)); not "
                                                    "replaced", path);
                close(fd);
                return rc;
            }
            if (stat(path, &ps) != 0 || !same_file(&fs, &ps)) {
                close(fd);
                continue;
            }
        }
        int rc = 0;
        if (mode == CM_SAME) rc = replace_same(tmp, path, dev, ino);
        else if (rename(tmp, path) != 0)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot rename the temporary into place: %s", path,
                                strerror(errno));
        close(fd); /* after the rename: a writer starting meanwhile was refused */
        return rc;
    }
    return fp4s_error_set(FP4S_EBUSY, "%s: replaced again and again by other processes; not replaced",
                          path);
}

static int file_commit(const char *tmp, const char *path, int mode, dev_t dev, ino_t ino)
{
    if (!tmp || !*tmp || !path || !*path)
        return fp4s_error_set(FP4S_EINVAL, "fp4s_file_commit: empty path");
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: temporary %s vanished: %s", path, tmp, strerror(errno));
    int syn = fsync(fd), e = errno;
    close(fd);
    if (syn != 0 && e != EINVAL && e != EROFS)
        return fp4s_error_set(FP4S_EWRITE, "%s: fsync failed: %s", path, strerror(e));
    /* no signal handler may remove tmp while it holds the file replaced */
    sigset_t block, old;
    sigfillset(&block);
    int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++) sigdelset(&block, sync_sigs[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = commit_rename(tmp, path, mode, dev, ino);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc) fsync_dir_of(path);
    return rc;
}

int fp4s_file_commit_as(const char *tmp, const char *path, bool existed, uint64_t dev, uint64_t ino)
{
    return file_commit(tmp, path, existed ? CM_SAME : CM_ABSENT, (dev_t)dev, (ino_t)ino);
}

int fp4s_file_commit(const char *tmp, const char *path, bool replace)
{
    return file_commit(tmp, path, replace ? CM_ANY : CM_NONE, 0, 0);
}
