/* LD_PRELOAD shim for tests/io/slow_child.sh: the first alarm() with a
 * non-zero time, in any process that has FP4S_TEST_SLOW_CHILD=FILE, then
 * either sleeps FP4S_TEST_SLOW_SECONDS seconds after arming it (a child of the
 * HDF5 guard that waits without using the CPU, as on a loaded machine: many MPI
 * ranks on few cores, a slow file system), or, with FP4S_TEST_SLOW_SPIN=1,
 * spins on the CPU until a signal ends it (a library that loops on a hostile
 * file). FILE, created exclusively, marks that this happened, so only one
 * process does it. */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned alarm(unsigned s)
{
    unsigned (*real)(unsigned) = (unsigned (*)(unsigned))dlsym(RTLD_NEXT, "alarm");
    unsigned r = real(s);
    const char *mark = getenv("FP4S_TEST_SLOW_CHILD"), *secs = getenv("FP4S_TEST_SLOW_SECONDS");
    const char *spin = getenv("FP4S_TEST_SLOW_SPIN");
    const char *kill_sig = getenv("FP4S_TEST_SLOW_KILL"), *times = getenv("FP4S_TEST_SLOW_KILL_TIMES");
    if (s && mark && kill_sig) {
        int fd = open(mark, O_RDWR | O_CREAT | O_APPEND, 0600);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size < (times ? atoi(times) : 1)) {
            if (write(fd, "k", 1) != 1) _exit(99);
            close(fd);
            kill(getpid(), atoi(kill_sig));
            for (;;) pause();
        }
        if (fd >= 0) close(fd);
        return r;
    }
    if (s && mark && (secs || spin)) {
        int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            close(fd);
            if (spin && spin[0] == '1') {
                volatile unsigned long n = 0;
                for (;;) n++;
            }
            sleep((unsigned)atoi(secs));
        }
    }
    return r;
}
