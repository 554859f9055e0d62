/* Reading a damaged HDF5 file without dying with it (h5_internal.h,
 * fp4s_h5_validate).
 *
 * libhdf5 1.10 trusts much of what a file says: a one-byte corruption near the
 * metadata can make it copy past a buffer (a variable-length string in the
 * global heap, a B-tree node, a chunk larger than its dataset), kill the
 * process or allocate gigabytes. The library's own checks (attribute classes
 * and sizes, claimed sizes bounded by the stored ones) catch what they can;
 * for the rest, the first time a process opens an HDF5 file the library walks
 * it in a child process (fork) the way its readers will: every object by
 * iteration and by path, every attribute read as the readers read it, every
 * dataset's type, space, creation list and chunk index, and, for a reader of
 * data (not for a listing), the data itself when the file holds at most 64 MiB
 * of it, and a copy of each dataset into an in-memory file (as merge copies
 * them). The file is refused (FP4S_EFORMAT) before the process touches it
 * when the child crashes (a signal its own work raised), does not finish in 5
 * s of CPU time plus 1 s per 16 MiB it reads, or has an allocation fail past
 * its memory limit (1 GiB beyond what it inherited, FP4S_H5_VALIDATE_MEM);
 * a child killed from outside (the OOM killer, a signal meant for a rank) is
 * run once more, and killed twice it fails the open with FP4S_ENOMEM without
 * a verdict on the file. A file that merely fails with HDF5 errors passes,
 * since the readers report those themselves. Nothing the child's libraries
 * print reaches stderr. The verdict is kept per file (device, inode, size,
 * modification time). FP4S_H5_VALIDATE=0 turns the check off; where fork is
 * not possible the file is read unchecked. */
#include "h5_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#define DATA_BUDGET ((uint64_t)64 << 20)   /* read all data only up to this much */
#define PIECE ((uint64_t)8 << 20)          /* bytes per H5Dread in the child */
#define MAX_CHUNKS 200000                  /* chunk records walked per dataset */

/* ---- the walk (in the child) ------------------------------------------------ */
static bool alloc_failed; /* an allocation failed in this child (see alloc_watch) */
typedef struct walk {
    hid_t f;
    int out;         /* pipe to the parent: the first damage found, as text */
    bool damaged;
    uint64_t budget; /* data bytes the walk may still read (0: metadata only) */
    hid_t copy;      /* an in-memory file each dataset is copied into (merge copies them), or -1 */
} walk;

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *ai, void *op)
{
    (void)ai;
    (void)op;
    char buf[256];
    int64_t v;
    /* as the readers do: the string reader, the integer reader */
    (void)fp4s_h5_attr_get_str(loc, name, buf, sizeof buf);
    (void)fp4s_h5_attr_get_i64(loc, name, &v);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    H5T_class_t cl = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if ((cl == H5T_INTEGER || cl == H5T_FLOAT) && np > 0 && np <= 4096) {
        double *d = malloc((size_t)np * sizeof *d);
        if (d) (void)H5Aread(a, H5T_NATIVE_DOUBLE, d);
        free(d);
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return 0;
}

/* Rows [r0, r0 + n) of d as memory type mt into buf. */
static void read_rows(hid_t d, hid_t sp, int nd, const hsize_t *dims, hid_t mt, hsize_t r0, hsize_t n, void *buf)
{
    hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
    for (int i = 0; i < nd; i++) count[i] = dims[i];
    start[0] = r0;
    count[0] = n;
    hid_t ms = H5Screate_simple(nd, count, NULL);
    if (ms >= 0 && H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
        (void)H5Dread(d, mt, ms, sp, H5P_DEFAULT, buf);
    if (ms >= 0) H5Sclose(ms);
}

/* Read the data as the readers do: all of it in its native type (every chunk
 * decoded), and the first rows, and one row, in each memory type a reader
 * converts it to (float32, float64, int64, uint8, uint16, binary16). */
static void read_data(walk *w, hid_t d)
{
    hid_t t = H5Dget_type(d);
    if (t < 0) return;
    H5T_class_t cl = H5Tget_class(t);
    hid_t nat = (cl == H5T_INTEGER || cl == H5T_FLOAT) ? H5Tget_native_type(t, H5T_DIR_DEFAULT) : -1;
    hid_t half = -1;
    if (cl == H5T_FLOAT && H5Tget_size(t) == 2 && (half = H5Tcopy(t)) >= 0) H5Tset_order(half, H5T_ORDER_LE);
    H5Tclose(t);
    hid_t sp = H5Dget_space(d);
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[H5S_MAX_RANK];
    void *buf = NULL;
    if (nat < 0 || nd < 1 || nd > H5S_MAX_RANK || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 || !dims[0])
        goto out;
    uint64_t elems = 1, total;
    for (int i = 1; i < nd; i++)
        if (__builtin_mul_overflow(elems, dims[i], &elems)) goto out;
    if (!elems) goto out; /* a zero-size dimension: no data to read */
    uint64_t row = elems * 8; /* the widest memory type */
    if (__builtin_mul_overflow(row, dims[0], &total) || row > PIECE || total / 4 > w->budget) goto out;
    w->budget -= total / 4 < w->budget ? total / 4 : w->budget;
    uint64_t per = PIECE / row;
    buf = malloc((size_t)(per * row));
    if (!buf) {
        alloc_failed = true; /* at most 8 MiB: the memory limit is reached */
        goto out;
    }
    for (hsize_t r0 = 0; r0 < dims[0]; r0 += per)
        read_rows(d, sp, nd, dims, nat, r0, dims[0] - r0 < per ? dims[0] - r0 : per, buf);
    hid_t conv[6] = {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT64, H5T_NATIVE_UINT8,
                     H5T_NATIVE_UINT16, half};
    for (int k = 0; k < 6; k++) {
        if (conv[k] < 0) continue;
        if ((cl == H5T_FLOAT) != (k < 2 || k == 5)) continue; /* conversions the readers make */
        read_rows(d, sp, nd, dims, conv[k], 0, dims[0] < per ? dims[0] : per, buf);
        if (dims[0] > 1) read_rows(d, sp, nd, dims, conv[k], dims[0] / 2, 1, buf);
    }
out:
    free(buf);
    if (half >= 0) H5Tclose(half);
    if (nat >= 0) H5Tclose(nat);
    if (sp >= 0) H5Sclose(sp);
    H5Eclear2(H5E_DEFAULT);
}

static void dataset(walk *w, hid_t d, const char *name)
{
    /* a damaged layout: say so and stop (opening it in the parent leaves
     * libhdf5's internals unable to shut down) */
    char what[600];
    snprintf(what, sizeof what, "/%s", name);
    if (fp4s_h5_check_layout(d, what)) {
        const char *m = fp4s_last_error();
        if (write(w->out, m, strlen(m)) < 0) { /* the verdict is the exit status anyway */
        }
        w->damaged = true;
        return;
    }
    fp4s_dtype dt;
    (void)fp4s_h5_dset_dtype(d, &dt);
    hid_t pl = H5Dget_create_plist(d);
    if (pl >= 0) {
        hsize_t ch[H5S_MAX_RANK];
        if (H5Pget_layout(pl) == H5D_CHUNKED) (void)H5Pget_chunk(pl, H5S_MAX_RANK, ch);
        int nf = H5Pget_nfilters(pl);
        for (int i = 0; i < nf && i < 32; i++) {
            unsigned flags, cd[8];
            size_t ncd = 8;
            char fname[64];
            unsigned cfg;
            (void)H5Pget_filter2(pl, (unsigned)i, &flags, &ncd, cd, sizeof fname, fname, &cfg);
        }
        H5Pclose(pl);
    }
    (void)H5Dget_storage_size(d);
    hid_t sp = H5Dget_space(d);
    hsize_t n = 0;
    if (sp >= 0 && H5Dget_num_chunks(d, sp, &n) >= 0) {
        for (hsize_t i = 0; i < n && i < MAX_CHUNKS; i++) {
            hsize_t off[H5S_MAX_RANK];
            unsigned mask;
            haddr_t addr;
            hsize_t size;
            (void)H5Dget_chunk_info(d, sp, i, off, &mask, &addr, &size);
        }
    }
    if (sp >= 0) H5Sclose(sp);
    H5Eclear2(H5E_DEFAULT);
    read_data(w, d);
}

static herr_t obj_cb(hid_t loc, const char *name, const H5O_info_t *info, void *op)
{
    walk *w = op;
    (void)loc;
    (void)info;
    /* by path too: lookups walk the groups differently from iteration */
    (void)H5Lexists(w->f, name, H5P_DEFAULT);
    hid_t o = H5Oopen(w->f, name, H5P_DEFAULT);
    if (o < 0) return 0;
    hsize_t idx = 0;
    (void)H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, attr_cb, w);
    H5I_type_t ty = H5Iget_type(o);
    if (ty == H5I_DATASET) dataset(w, o, name);
    else if (ty == H5I_GROUP) {
        H5G_info_t gi;
        if (H5Gget_info(o, &gi) >= 0)
            for (hsize_t i = 0; i < gi.nlinks && i < 1000000; i++) {
                char nb[512];
                (void)H5Lget_name_by_idx(o, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, nb, sizeof nb, H5P_DEFAULT);
            }
    }
    H5Oclose(o);
    /* Copied only once closed, as merge copies: libhdf5 1.10's H5Ocopy of a
     * dataset that is open with chunks in its cache writes past a buffer when
     * a filter shrinks the chunks (the scale-offset filter: a valid file
     * crashed the walk and was refused). */
    if (ty == H5I_DATASET && w->copy >= 0 && !w->damaged) {
        char dst[32];
        static unsigned k;
        snprintf(dst, sizeof dst, "d%u", k++);
        (void)H5Ocopy(w->f, name, w->copy, dst, H5P_DEFAULT, H5P_DEFAULT);
    }
    H5Eclear2(H5E_DEFAULT);
    return w->damaged ? 1 : 0; /* 1 stops the visit */
}

static bool walk_file(const char *path, bool data, int out)
{
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    if (H5Fis_hdf5(path) == 0) return false; /* as the readers: not opened at all */
    hid_t fapl = fp4s_h5_fapl();
    walk w = {-1, out, false, data ? DATA_BUDGET : 0, -1};
    w.f = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (w.f < 0) {
        /* the readers report it; the parent quotes it if the child fails after */
        char m[300];
        snprintf(m, sizeof m, "cannot open it: %s", fp4s_h5_msg());
        if (write(out, m, strlen(m)) < 0) {
        }
    }
    if (fapl >= 0) H5Pclose(fapl);
    if (w.f < 0) return false;
    struct stat st;
    if (data && stat(path, &st) == 0 && (uint64_t)st.st_size <= DATA_BUDGET) {
        hid_t core = H5Pcreate(H5P_FILE_ACCESS);
        if (core >= 0 && H5Pset_fapl_core(core, 1 << 20, 0) >= 0)
            w.copy = H5Fcreate("fp4s-validate-copy", H5F_ACC_TRUNC, H5P_DEFAULT, core);
        if (core >= 0) H5Pclose(core);
    }
    hsize_t idx = 0;
    (void)H5Aiterate2(w.f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, attr_cb, &w);
    (void)H5Ovisit2(w.f, H5_INDEX_NAME, H5_ITER_NATIVE, obj_cb, &w, H5O_INFO_BASIC);
    if (w.copy >= 0) H5Fclose(w.copy);
    H5Fclose(w.f);
    return w.damaged;
}

/* ---- the children ------------------------------------------------------------------ */
static bool in_child; /* in a validation or isolation child: no nested forks */

/* In a child just forked from `parent`: die with it. The child holds copies
 * of the parent's descriptors, a capture's writer lock among them (flock
 * belongs to the open file, not the process): a child orphaned by a SIGKILL
 * of its parent would keep the capture locked until its walk ends. */
static void die_with_parent(pid_t parent)
{
#ifdef __linux__
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(3); /* it died before prctl */
}

/* The memory a child may take beyond the address space it inherits, in MiB:
 * FP4S_H5_VALIDATE_MEM, else 1024. The walk itself needs little (8 MiB
 * pieces, a 1 MiB chunk cache, an in-memory copy of a file of at most 64
 * MiB); a damaged length (a variable-length string whose global-heap record
 * claims 12 GB) asks for gigabytes, which several MPI ranks validating at
 * once, or a laptop, would meet the out-of-memory killer with. */
#define MEM_DEFAULT_MIB 1024u
static unsigned mem_mib(void)
{
    const char *e = getenv("FP4S_H5_VALIDATE_MEM");
    if (e && *e) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(e, &end, 10);
        if (!errno && !*end && v >= 16 && v <= (1ul << 24)) return (unsigned)v;
    }
    return MEM_DEFAULT_MIB;
}

/* The address space of this process now, in bytes (0: unknown). */
static uint64_t vm_size(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char b[64];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) return 0;
    b[n] = '\0';
    long ps = sysconf(_SC_PAGESIZE);
    return (uint64_t)strtoull(b, NULL, 10) * (uint64_t)(ps > 0 ? ps : 4096);
}

/* The child's limits. Time: secs of CPU time (SIGXCPU), which a loaded
 * machine, many ranks on few cores or a slow file system do not use up while
 * a looping library does; and 20 times that in wall-clock time (SIGALRM) for
 * a child that stops making progress without using the CPU. Memory: the
 * address space it inherited (a parent with CUDA or BLAS threads reserves
 * much) plus mib MiB (RLIMIT_AS): an allocation past it fails, and the watch
 * below says so. A child killed so, or by a crash in the library, leaves no
 * core file in the user's directory. */
#define WALL_FACTOR 20u
static void child_limit(unsigned secs, unsigned mib)
{
    signal(SIGXCPU, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    struct rlimit rl = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &rl);
    /* a forked child's CPU time starts at 0 */
    if (getrlimit(RLIMIT_CPU, &rl) == 0 && (rl.rlim_max == RLIM_INFINITY || secs < rl.rlim_max)) {
        rl.rlim_cur = secs;
        (void)setrlimit(RLIMIT_CPU, &rl);
    }
    uint64_t vm = vm_size(), want = vm + ((uint64_t)mib << 20);
    if (vm && getrlimit(RLIMIT_AS, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || want < rl.rlim_cur) &&
        (rl.rlim_max == RLIM_INFINITY || want <= rl.rlim_max)) {
        rl.rlim_cur = (rlim_t)want;
        (void)setrlimit(RLIMIT_AS, &rl);
    }
    alarm(secs * WALL_FACTOR);
}

/* An allocation that failed in the child: HDF5 reports it as "can't
 * allocate" / "no space available" (H5E_RESOURCE); the walk's own buffers
 * set it too. HDF5 calls the watch (its automatic error function, never
 * printing) whenever an API call fails. */

static herr_t alloc_frame(unsigned n, const H5E_error2_t *e, void *d)
{
    (void)n;
    (void)d;
    if (e->min_num == H5E_CANTALLOC || e->min_num == H5E_NOSPACE) alloc_failed = true;
    return 0;
}

static herr_t alloc_watch(hid_t estack, void *d)
{
    (void)d;
    (void)H5Ewalk2(estack, H5E_WALK_DOWNWARD, alloc_frame, NULL);
    return 0;
}

/* The exit statuses of a child. */
enum { CHILD_OK = 0, CHILD_DAMAGED = 2, CHILD_MEMORY = 4 };

typedef int (*child_fn)(void *arg, int fd); /* the child's work: its exit status */

static void child_main(pid_t parent, int pfd[2], unsigned secs, unsigned mib, child_fn fn, void *arg)
{
    die_with_parent(parent);
    close(pfd[0]);
    in_child = true;
    /* default signal handling, no exit handlers */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    signal(SIGFPE, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    /* The tool's handlers for the asynchronous signals were inherited: run
     * here they would remove the parent's unfinished outputs and scratch
     * files, and a handler that defers the signal (a commit under way in
     * another thread of the parent) would leave the child alive until its
     * wall-clock limit, its file then called damaged. A signal sent to the
     * child ends it (the parent walks again); one the user set to be ignored
     * (nohup) stays ignored. The mask is the forking thread's: cleared. */
    static const int async_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof async_sigs / sizeof *async_sigs; i++) {
        struct sigaction old;
        if (sigaction(async_sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) signal(async_sigs[i], SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* nothing a dying library prints (glibc's "munmap_chunk(): invalid
     * pointer", an HDF5 error stack) reaches the user: the verdict says it */
    int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (dn >= 0 && dn != STDERR_FILENO) {
        (void)dup2(dn, STDERR_FILENO);
        close(dn);
    }
    child_limit(secs, mib);
    fp4s_h5_quiet_watch(alloc_watch, NULL);
    int code = fn(arg, pfd[1]);
    if (alloc_failed) code = CHILD_MEMORY;
    /* _exit: neither HDF5's nor the program's exit handlers run here (they
     * would flush files the parent has open) */
    _exit(code);
}

/* How a child ended. */
typedef enum { END_OK, END_DAMAGED, END_FAILED, END_MEMORY, END_TIMEOUT, END_CRASH, END_KILLED } child_end;

static child_end classify(int status)
{
    if (WIFEXITED(status)) {
        switch (WEXITSTATUS(status)) {
        case CHILD_OK: return END_OK;
        case CHILD_DAMAGED: return END_DAMAGED;
        case CHILD_MEMORY: return END_MEMORY;
        default: return END_FAILED;
        }
    }
    if (!WIFSIGNALED(status)) return END_FAILED;
    switch (WTERMSIG(status)) {
    case SIGXCPU:
    case SIGALRM: return END_TIMEOUT; /* our own limits */
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGABRT:
    case SIGSYS:
    case SIGTRAP: return END_CRASH; /* raised by what the child did */
    default: return END_KILLED;     /* sent from outside: the OOM killer, a kill meant for a rank */
    }
}

typedef struct child_run {
    int status;         /* as waitpid gives it */
    child_end end;
    unsigned char *out; /* what the child wrote (malloc'ed, NUL-terminated), or NULL */
    size_t len;
    bool oom;           /* the parent could not keep it all */
} child_run;

/* Run fn in a child with the limits and collect its output (at most keep
 * bytes are kept). A child killed from outside is run once more: that says
 * nothing about the file. -1: no child could be made; 1: no status (the
 * program ignores SIGCHLD); 0: done, *r filled. */
static int run_child(unsigned secs, child_fn fn, void *arg, size_t keep, child_run *r)
{
    unsigned mib = mem_mib();
    for (int attempt = 0;; attempt++) {
        memset(r, 0, sizeof *r);
        int pfd[2];
        if (pipe(pfd) != 0) return -1;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
            close(pfd[0]);
            close(pfd[1]);
            return -1;
        }
        if (pid == 0) child_main(parent, pfd, secs, mib, fn, arg);
        close(pfd[1]);
        size_t cap = 0;
        for (;;) {
            bool want = !r->oom && r->len < keep;
            if (want && r->len + 1 >= cap) {
                size_t nc = cap ? 2 * cap : 4096;
                if (nc - 1 > keep) nc = keep + 1;
                unsigned char *nb = realloc(r->out, nc);
                if (!nb) r->oom = true, want = false;
                else {
                    r->out = nb;
                    cap = nc;
                }
            }
            unsigned char sink[4096];
            ssize_t n = want ? read(pfd[0], r->out + r->len, cap - 1 - r->len) : read(pfd[0], sink, sizeof sink);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            if (want) r->len += (size_t)n;
        }
        close(pfd[0]);
        if (r->out) r->out[r->len] = '\0';
        pid_t w;
        do w = waitpid(pid, &r->status, 0);
        while (w < 0 && errno == EINTR);
        if (w < 0) return 1;
        r->end = classify(r->status);
        if (r->end != END_KILLED || attempt > 0) return 0;
        free(r->out);
    }
}

/* The reason a child's end gives, for "damaged HDF5 file: <reason>; refused". */
static void end_reason(const child_run *r, unsigned secs, char *why, size_t n)
{
    switch (r->end) {
    case END_TIMEOUT:
        snprintf(why, n, "the HDF5 library did not finish reading it within %u s of CPU time", secs);
        break;
    case END_CRASH:
        snprintf(why, n, "the HDF5 library crashed (%s) reading it", strsignal(WTERMSIG(r->status)));
        break;
    case END_MEMORY:
        snprintf(why, n, "the HDF5 library asked for more than %u MiB of memory reading it (the limit is "
                 "FP4S_H5_VALIDATE_MEM, in MiB)", mem_mib());
        break;
    case END_DAMAGED:
        if (r->out && r->len) {
            snprintf(why, n, "%s", (const char *)r->out);
            break;
        }
        /* fall through */
    default:
        snprintf(why, n, "the HDF5 library failed reading it (status %d)",
                 WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1);
    }
}

/* A child killed from outside twice: the file is not judged (exit status 5). */
static int interrupted(const char *path, const child_run *r)
{
    return fp4s_error_set(FP4S_ENOMEM, "%s: the check of this HDF5 file was interrupted: the process "
                          "checking it was killed from outside twice (%s; the out-of-memory killer, or a "
                          "signal meant for another process); the file was not read and is not known to be "
                          "damaged", path, strsignal(WTERMSIG(r->status)));
}

/* ---- the verdicts (in the parent) ------------------------------------------------ */
typedef struct verdict {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int ok;    /* 1 passed (level says how far), 0 refused */
    int level; /* 1 metadata walked, 2 data read too */
    char why[400];
} verdict;

#define NVERDICTS 64
static verdict verdicts[NVERDICTS];
static unsigned nverdicts;
static pthread_mutex_t vlock = PTHREAD_MUTEX_INITIALIZER;

static bool same(const verdict *v, const struct stat *st)
{
    return v->dev == st->st_dev && v->ino == st->st_ino && v->size == st->st_size &&
           v->mtime.tv_sec == st->st_mtim.tv_sec && v->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static unsigned budget_seconds(off_t size, bool data)
{
    uint64_t d = (uint64_t)size < DATA_BUDGET ? (uint64_t)size : DATA_BUDGET;
    return 5u + (data ? (unsigned)(d >> 24) : 0u);
}

typedef struct walk_arg {
    const char *path;
    bool data;
} walk_arg;

static int walk_child(void *arg, int fd)
{
    const walk_arg *a = arg;
    return walk_file(a->path, a->data, fd) ? CHILD_DAMAGED : CHILD_OK;
}

int fp4s_h5_validate(const char *path, bool data)
{
    const char *e = getenv("FP4S_H5_VALIDATE");
    if (in_child || (e && strcmp(e, "0") == 0)) return 0;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* the open will say why */
    pthread_mutex_lock(&vlock);
    int need = data ? 2 : 1;
    for (unsigned i = 0; i < nverdicts && i < NVERDICTS; i++)
        if (same(&verdicts[i], &st) && (!verdicts[i].ok || verdicts[i].level >= need)) {
            int ok = verdicts[i].ok;
            char why[400];
            snprintf(why, sizeof why, "%s", verdicts[i].why);
            pthread_mutex_unlock(&vlock);
            return ok ? 0 : fp4s_error_set(FP4S_EFORMAT, "%s: damaged HDF5 file: %s; refused", path, why);
        }
    pthread_mutex_unlock(&vlock);
    unsigned secs = budget_seconds(st.st_size, data);
    walk_arg wa = {path, data};
    child_run r;
    int ran = run_child(secs, walk_child, &wa, 299, &r);
    if (ran) return 0; /* no child, or no status: read it as it is */
    if (r.end == END_KILLED) {
        int rc = interrupted(path, &r);
        free(r.out);
        return rc;
    }
    verdict v;
    memset(&v, 0, sizeof v);
    v.dev = st.st_dev;
    v.ino = st.st_ino;
    v.size = st.st_size;
    v.mtime = st.st_mtim;
    v.ok = r.end == END_OK;
    v.level = need;
    if (!v.ok) end_reason(&r, secs, v.why, sizeof v.why);
    free(r.out);
    pthread_mutex_lock(&vlock);
    verdicts[nverdicts++ % NVERDICTS] = v;
    pthread_mutex_unlock(&vlock);
    if (v.ok) return 0;
    return fp4s_error_set(FP4S_EFORMAT, "%s: damaged HDF5 file: %s; refused", path, v.why);
}

/* ---- work done in a child, its result passed back ------------------------------- */

bool fp4s_h5_isolation_on(void)
{
    const char *e = getenv("FP4S_H5_VALIDATE");
    return !in_child && !(e && strcmp(e, "0") == 0);
}

typedef struct iso_arg {
    fp4s_h5_iso_fn fn;
    void *arg;
} iso_arg;

static int iso_child(void *arg, int fd)
{
    const iso_arg *a = arg;
    a->fn(a->arg, fd);
    return CHILD_OK;
}

int fp4s_h5_isolate(const char *path, fp4s_h5_iso_fn fn, void *arg, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    struct stat st;
    off_t size = stat(path, &st) == 0 ? st.st_size : 0;
    uint64_t lim = 8 + (uint64_t)size / (4 << 20);
    unsigned secs = lim > 600 ? 600 : (unsigned)lim;
    iso_arg ia = {fn, arg};
    child_run r;
    int ran = run_child(secs, iso_child, &ia, SIZE_MAX - 1, &r);
    if (ran < 0) return 1; /* the caller does the work itself */
    if (r.oom) {
        free(r.out);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    }
    if (ran == 0 && r.end == END_KILLED) {
        int rc = interrupted(path, &r);
        free(r.out);
        return rc;
    }
    if (ran == 0 && r.end != END_OK) {
        char why[400];
        end_reason(&r, secs, why, sizeof why);
        free(r.out);
        return fp4s_error_set(FP4S_EFORMAT, "%s: damaged HDF5 file: %s; refused", path, why);
    }
    if (!r.out) r.out = malloc(1); /* an empty result is still a result */
    if (!r.out) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    *out = r.out;
    *len = r.len;
    return 0;
}

int fp4s_h5_iso_write(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}
