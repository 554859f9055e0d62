/* The HDF5 file driver of the library ("fp4s-safe"): POSIX I/O like HDF5's
 * default sec2 driver, files byte-compatible with it, except that a write
 * never fails inside HDF5.
 *
 * Why: HDF5 1.10 and 1.12 leave a dataset or file ID pointing to freed
 * memory when H5Dclose or H5Fclose fails while flushing (a full disk, a
 * quota), and the library's atexit handler then closes it again and dies by
 * SIGSEGV after the tool has printed its error. So the first write that
 * fails (ENOSPC, EDQUOT, EIO, EFBIG) is recorded, with errno, and reported to
 * HDF5 as done; from then on nothing more reaches the disk: later writes are
 * kept in memory, so that HDF5 reads back what it wrote and closes cleanly.
 * The file on disk stays exactly as it was at the first failure (for the
 * capture writer: as if it had been killed then, which its commit protocol
 * covers). Callers ask fp4s_h5_write_errno() after writing and
 * fp4s_h5_close() reports it: the caller's error says why ("No space left on
 * device") and the output is discarded.
 *
 * The driver struct is the one of HDF5 1.10 and 1.12 (H5FDpublic.h); with
 * HDF5 1.13 and later the library falls back to sec2 (fp4s_h5_fapl returns
 * H5P_DEFAULT) and a failed close can crash as before. */
#include "h5_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#if !H5_VERSION_GE(1, 13, 0)
#define HAVE_SAFE_VFD 1

/* At most this much is kept in memory after a failed write (HDF5's caches
 * flushing at close: metadata, and at most one chunk cache per dataset). */
#define OVERLAY_MAX ((size_t)512 << 20)

/* After this many bytes written, the kernel is asked to start writing them
 * to the disk (sync_file_range, not waiting), so that the disk writes while
 * the caller computes the next chunks and the fsync at commit finds little
 * left to do: for fp4-quant -o the fsync of a 136 MB output was most of what
 * -o cost (bench/RESULTS-H200.md, CPU scaling). The data and the commit's
 * fsync are the same as without it. */
#define WRITEBACK_BYTES ((size_t)16 << 20)

typedef struct overlay {
    haddr_t addr;
    size_t size;
    unsigned char *data;
} overlay;

typedef struct safe_file {
    H5FD_t pub;        /* first: HDF5's part */
    int fd;            /* what H5Fget_vfd_handle returns a pointer to */
    haddr_t eoa, eof;
    dev_t dev;
    ino_t ino;
    int err;           /* errno of the first failed write or truncate; 0 = none */
    overlay *ov;       /* writes kept in memory after the failure, in order */
    size_t nov, capov, ovbytes;
    size_t unsynced;   /* bytes written since the last writeback was started */
} safe_file;

static hid_t driver_id = -1;
static _Thread_local int last_close_err = -1;

#define MAXADDR (((haddr_t)1 << (8 * sizeof(off_t) - 1)) - 1)

static void push(const char *func, hid_t min, const char *what, const char *name, int e)
{
    /* "errno = N, error message = '...'" as sec2 says it: fp4s_h5_msg finds the reason */
    H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, H5E_VFL, min,
             "%s, name = '%s', errno = %d, error message = '%s'", what, name ? name : "", e, strerror(e));
}

static H5FD_t *safe_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    (void)fapl;
    if (!name || !*name || maxaddr == 0 || maxaddr == HADDR_UNDEF || maxaddr > MAXADDR) {
        push("safe_open", H5E_BADVALUE, "invalid file name or address space", name, EINVAL);
        return NULL;
    }
    int o = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
    if (flags & H5F_ACC_TRUNC) o |= O_TRUNC;
    if (flags & H5F_ACC_CREAT) o |= O_CREAT;
    if (flags & H5F_ACC_EXCL) o |= O_EXCL;
    int fd;
    do fd = open(name, o | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        push("safe_open", H5E_CANTOPENFILE, "unable to open file", name, errno);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        push("safe_open", H5E_BADFILE, "unable to fstat file", name, errno);
        close(fd);
        return NULL;
    }
    safe_file *f = calloc(1, sizeof *f);
    if (!f) {
        push("safe_open", H5E_CANTALLOC, "out of memory", name, ENOMEM);
        close(fd);
        return NULL;
    }
    f->fd = fd;
    f->eof = (haddr_t)st.st_size;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    return &f->pub;
}

static herr_t safe_close(H5FD_t *file)
{
    safe_file *f = (safe_file *)file;
    last_close_err = f->err;
    herr_t rc = 0;
    if (close(f->fd) != 0 && !f->err) last_close_err = errno; /* NFS reports write errors here */
    for (size_t i = 0; i < f->nov; i++) free(f->ov[i].data);
    free(f->ov);
    free(f);
    return rc;
}

static int safe_cmp(const H5FD_t *a, const H5FD_t *b)
{
    const safe_file *x = (const safe_file *)a, *y = (const safe_file *)b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return 0;
}

static herr_t safe_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE;
    return 0;
}

static haddr_t safe_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const safe_file *)file)->eoa;
}

static herr_t safe_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    ((safe_file *)file)->eoa = addr;
    return 0;
}

static haddr_t safe_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const safe_file *)file)->eof;
}

static herr_t safe_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
    (void)fapl;
    *handle = &((safe_file *)file)->fd;
    return 0;
}

/* Does [addr, addr + size) lie in the addresses the driver serves? If not,
 * the overflow is pushed on HDF5's error stack naming fn. */
static bool range_ok(haddr_t addr, size_t size, const char *fn)
{
    if (addr == HADDR_UNDEF || addr > MAXADDR || size > MAXADDR - addr) {
        push(fn, H5E_OVERFLOW, "address overflow", "", EINVAL);
        return false;
    }
    return true;
}

static herr_t safe_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    (void)type;
    (void)dxpl;
    safe_file *f = (safe_file *)file;
    if (!range_ok(addr, size, "safe_read")) return -1;
    unsigned char *p = buf;
    size_t done = 0;
    while (done < size) {
        ssize_t r = pread(f->fd, p + done, size - done, (off_t)(addr + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            push("safe_read", H5E_READERROR, "file read failed", "", errno);
            return -1;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    if (done < size) memset(p + done, 0, size - done); /* beyond the end of the file: zeros, as sec2 */
    for (size_t i = 0; i < f->nov; i++) {
        const overlay *o = &f->ov[i];
        haddr_t lo = o->addr > addr ? o->addr : addr;
        haddr_t hi = o->addr + o->size < addr + size ? o->addr + o->size : addr + size;
        if (lo < hi) memcpy(p + (lo - addr), o->data + (lo - o->addr), (size_t)(hi - lo));
    }
    return 0;
}

static void keep(safe_file *f, haddr_t addr, size_t size, const unsigned char *buf)
{
    if (f->ovbytes + size > OVERLAY_MAX) return; /* past the cap: dropped (the output is lost anyway) */
    if (f->nov == f->capov) {
        size_t nc = f->capov ? f->capov * 2 : 64;
        overlay *n = realloc(f->ov, nc * sizeof *n);
        if (!n) return;
        f->ov = n;
        f->capov = nc;
    }
    unsigned char *d = malloc(size ? size : 1);
    if (!d) return;
    memcpy(d, buf, size);
    f->ov[f->nov++] = (overlay){addr, size, d};
    f->ovbytes += size;
}

static herr_t safe_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                         const void *buf)
{
    (void)type;
    (void)dxpl;
    safe_file *f = (safe_file *)file;
    if (!range_ok(addr, size, "safe_write")) return -1;
    const unsigned char *p = buf;
    size_t done = 0;
    while (!f->err && done < size) {
        ssize_t w = pwrite(f->fd, p + done, size - done, (off_t)(addr + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            f->err = w < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)w;
    }
    if (done < size) keep(f, addr + done, size - done, p + done);
    if (addr + size > f->eof) f->eof = addr + size;
#ifdef SYNC_FILE_RANGE_WRITE
    f->unsynced += done;
    if (!f->err && f->unsynced >= WRITEBACK_BYTES) {
        (void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* a hint: failures show at the fsync */
        f->unsynced = 0;
    }
#endif
    return 0;
}

static herr_t safe_flush(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)file;
    (void)dxpl;
    (void)closing;
    return 0;
}

static herr_t safe_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl;
    (void)closing;
    safe_file *f = (safe_file *)file;
    if (f->eoa == f->eof) return 0;
    if (!f->err) {
        int r;
        do r = ftruncate(f->fd, (off_t)f->eoa);
        while (r != 0 && errno == EINTR);
        if (r != 0) f->err = errno;
    }
    f->eof = f->eoa;
    return 0;
}

static herr_t safe_lock(H5FD_t *file, hbool_t rw)
{
    safe_file *f = (safe_file *)file;
    if (flock(f->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) return 0;
    if (errno == ENOSYS) { /* as sec2: no flock here is not an error for a reader or writer */
        return 0;
    }
    push("safe_lock", H5E_CANTLOCKFILE, "unable to lock file", "", errno);
    return -1;
}

static herr_t safe_unlock(H5FD_t *file)
{
    safe_file *f = (safe_file *)file;
    if (flock(f->fd, LOCK_UN) == 0 || errno == ENOSYS) return 0;
    push("safe_unlock", H5E_CANTUNLOCKFILE, "unable to unlock file", "", errno);
    return -1;
}

static herr_t safe_term(void)
{
    driver_id = -1;
    return 0;
}

static const H5FD_class_t safe_class = {
    .name = "fp4s-safe",
    .maxaddr = MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .terminate = safe_term,
    .open = safe_open,
    .close = safe_close,
    .cmp = safe_cmp,
    .query = safe_query,
    .get_eoa = safe_get_eoa,
    .set_eoa = safe_set_eoa,
    .get_eof = safe_get_eof,
    .get_handle = safe_get_handle,
    .read = safe_read,
    .write = safe_write,
    .flush = safe_flush,
    .truncate = safe_truncate,
    .lock = safe_lock,
    .unlock = safe_unlock,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

static hid_t safe_driver(void)
{
    if (driver_id < 0 || H5Iis_valid(driver_id) <= 0) driver_id = H5FDregister(&safe_class);
    return driver_id;
}
#endif

hid_t fp4s_h5_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return fapl;
#ifdef HAVE_SAFE_VFD
    hid_t id = safe_driver();
    if (id < 0 || H5Pset_driver(fapl, id, NULL) < 0) {
        H5Pclose(fapl);
        return -1;
    }
#endif
    return fapl;
}

static _Thread_local int refused;

int fp4s_h5_refused(void) { return refused; }

hid_t fp4s_h5_open(const char *path, unsigned flags, bool data)
{
    refused = fp4s_h5_validate(path, data);
    if (refused) return -1;
    hid_t fapl = fp4s_h5_fapl();
    if (fapl < 0) return -1;
    hid_t f = H5Fopen(path, flags, fapl);
    hid_t st = f < 0 ? H5Eget_current_stack() : -1; /* H5Pclose would clear why it failed */
    H5Pclose(fapl);
    if (st >= 0) H5Eset_current_stack(st);
    return f;
}

hid_t fp4s_h5_open_read(const char *path, int *rc)
{
    hid_t f = fp4s_h5_open(path, H5F_ACC_RDONLY, true);
    if (f < 0)
        *rc = fp4s_h5_refused() ? fp4s_h5_refused()
                                : fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, fp4s_h5_msg());
    return f;
}

int fp4s_h5_write_errno(hid_t file)
{
#ifdef HAVE_SAFE_VFD
    hid_t fapl = H5Fget_access_plist(file);
    hid_t drv = fapl >= 0 ? H5Pget_driver(fapl) : -1;
    if (fapl >= 0) H5Pclose(fapl);
    void *h = NULL;
    if (drv < 0 || drv != driver_id || H5Fget_vfd_handle(file, H5P_DEFAULT, &h) < 0 || !h) return 0;
    const safe_file *f = (const safe_file *)((const char *)h - offsetof(safe_file, fd));
    return f->err;
#else
    (void)file;
    return 0;
#endif
}

int fp4s_h5_close(hid_t file, const char *path)
{
    int before = fp4s_h5_write_errno(file);
    last_close_err = -1;
    herr_t r = H5Fclose(file);
    int e = last_close_err >= 0 ? last_close_err : before;
    if (e) return fp4s_error_set(FP4S_EWRITE, "%s: %s", path, strerror(e));
    if (r < 0) return fp4s_error_set(FP4S_EWRITE, "%s: closing the HDF5 file failed: %s", path, fp4s_h5_msg());
    return 0;
}
