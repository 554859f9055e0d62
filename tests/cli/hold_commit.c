/* LD_PRELOAD shim for tests/cli/concurrent_outputs.sh: holds a process at the
 * moment it renames (or links) a finished output into place, so that the test
 * can run a second writer of the same output in between, deterministically.
 *
 * In a process with FP4S_TEST_HOLD_FIFO=FIFO and FP4S_TEST_HOLD_NAME=NAME, the
 * first rename(2), renameat2(2) or link(2) whose destination's last component
 * is NAME (any rename or link, for NAME '*'), or open(2) with O_CREAT | O_EXCL of a file so
 * named (NAME '*SUFFIX': any name ending in SUFFIX, as a commit journal
 * "OUT.fp4s-commit"), writes that component to FIFO.name, then opens
 * FIFO for reading (blocking until the test opens it for writing: the test
 * then knows the process is there) and reads it to its end (the test closes
 * it to let the process go on). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int held;

static void hold(const char *to, bool is_open)
{
    const char *fifo = getenv("FP4S_TEST_HOLD_FIFO"), *name = getenv("FP4S_TEST_HOLD_NAME");
    if (held || !fifo || !name || !to || (is_open && strcmp(name, "*") == 0)) return;
    const char *base = strrchr(to, '/');
    base = base ? base + 1 : to;
    size_t bl = strlen(base), nl = strlen(name);
    bool match = name[0] == '*' ? bl >= nl - 1 && strcmp(base + bl - (nl - 1), name + 1) == 0 : strcmp(base, name) == 0;
    if (!match) return;
    held = 1;
    char said[4096];
    snprintf(said, sizeof said, "%s.name", fifo);
    FILE *f = fopen(said, "w");
    if (f) {
        fprintf(f, "%s\n", base);
        fclose(f);
    }
    int fd = open(fifo, O_RDONLY);
    if (fd < 0) return;
    char b[64];
    while (read(fd, b, sizeof b) > 0) {
    }
    close(fd);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    int (*real)(int, const char *, int, const char *, unsigned int) =
        (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
    hold(newpath, false);
    return real(olddirfd, oldpath, newdirfd, newpath, flags);
}

int rename(const char *oldpath, const char *newpath)
{
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    hold(newpath, false);
    return real(oldpath, newpath);
}

int link(const char *oldpath, const char *newpath)
{
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "link");
    hold(newpath, false);
    return real(oldpath, newpath);
}

int open(const char *path, int flags, ...)
{
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if ((flags & O_CREAT) && (flags & O_EXCL)) hold(path, true);
    return real(path, flags, mode);
}
