/* The internal HDF5 and file layer of the library, shared by lib/io,
 * lib/capture, analysis/ and their tests (not installed, not exported).
 *
 * HDF5's own error printing: one policy. Every library function that calls
 * HDF5 switches the automatic printing of the default error stack off for
 * the duration of the call and restores the caller's handler afterwards
 * (fp4s_h5_quiet_begin/end; they nest), so the library never prints and a
 * program that installed its own handler keeps it. Failures become details
 * through fp4s_h5_msg().
 *
 * Writer locks (lock.c): every writer that modifies a file in place holds
 * flock(2) LOCK_EX on it while it has it open, taken before anything is
 * created or truncated; see lock.c for the whole protocol. */
#ifndef FP4S_IO_H5_INTERNAL_H
#define FP4S_IO_H5_INTERNAL_H

#include <fp4scope/tensor.h>

#include <hdf5.h>

#include <stdbool.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------------ */
typedef struct fp4s_h5_quiet {
    H5E_auto2_t func;
    void *data;
} fp4s_h5_quiet;
void fp4s_h5_quiet_begin(fp4s_h5_quiet *q);
void fp4s_h5_quiet_end(const fp4s_h5_quiet *q);
/* In a child of the HDF5 guard only (h5guard.c): install fn as the automatic
 * error function, also inside every quiet section from now on (it must not
 * print). */
void fp4s_h5_quiet_watch(H5E_auto2_t fn, void *data);

/* The innermost message of this thread's HDF5 error stack, up to its first
 * ',' ("unable to open file"), followed by the system's reason when a frame
 * records one ("unable to open file: No such file or directory"); "" if the
 * stack is empty. Valid until the next call on the thread. */
const char *fp4s_h5_msg(void);

/* ---- files: the library's file driver (h5vfd.c) ----------------------------------- */
/* A file access list with the library's driver: POSIX I/O like sec2, but a
 * write that fails (a full disk) is recorded instead of failing inside HDF5,
 * and nothing more reaches the disk; see h5vfd.c. Every HDF5 file the
 * library opens uses it, readers too (so that one process shares one open
 * file between its writer and readers, as HDF5 does for one driver). The
 * caller closes the list. */
hid_t fp4s_h5_fapl(void);
/* Walk `path` with HDF5 in a child process before this process reads it
 * (h5guard.c): 0 when the walk finished (HDF5 errors included: the readers
 * report those), FP4S_EFORMAT naming the file when libhdf5 crashed, hung or
 * went past the child's memory limit on it, FP4S_ENOMEM when the child was
 * killed from outside twice (no verdict). data: read the datasets too (files
 * with up to 64 MiB of data), for readers of data; else the metadata only.
 * Verdicts are kept per file; FP4S_H5_VALIDATE=0 turns it off. */
int fp4s_h5_validate(const char *path, bool data);
/* Run fn(arg, fd) in a child process, as the readers of the whole file
 * (the capture listing) do: fn writes its result to fd (fp4s_h5_iso_write),
 * the parent gets the bytes in *out (malloc'ed). FP4S_EFORMAT naming the file
 * when the child dies (a crash inside libhdf5), runs past 8 s plus 1 s per
 * 4 MiB of file or past its memory limit (as fp4s_h5_validate's); FP4S_ENOMEM
 * when it was killed from outside twice; 1 (nothing done, the caller works
 * in-process) when no child can be made. fp4s_h5_isolation_on() is false inside such a child and with
 * FP4S_H5_VALIDATE=0. */
typedef void (*fp4s_h5_iso_fn)(void *arg, int fd);
bool fp4s_h5_isolation_on(void);
int fp4s_h5_isolate(const char *path, fp4s_h5_iso_fn fn, void *arg, unsigned char **out, size_t *len);
int fp4s_h5_iso_write(int fd, const void *p, size_t n);
/* H5Fopen with fp4s_h5_fapl(), after fp4s_h5_validate(path, data): on a
 * refused file -1 with the detail set (fp4s_h5_refused() gives its code). */
hid_t fp4s_h5_open(const char *path, unsigned flags, bool data);
/* Did the last fp4s_h5_open on this thread fail because the validation
 * refused the file (the detail already says why)? Its code (FP4S_EFORMAT: a
 * damaged file; FP4S_ENOMEM: the check was killed from outside twice), or 0. */
int fp4s_h5_refused(void);
/* fp4s_h5_open(path, H5F_ACC_RDONLY, true), or -1 with *rc set: the
 * validation's code when it refused the file (the detail says why), else FP4S_EOPEN
 * "path: cannot open: <HDF5's message>". */
hid_t fp4s_h5_open_read(const char *path, int *rc);
/* The errno of the first write to `file` that failed (0: none). */
int fp4s_h5_write_errno(hid_t file);
/* H5Fclose, then: FP4S_EWRITE "path: <strerror>" if a write failed (before
 * or while closing), "path: closing the HDF5 file failed: ..." if HDF5 says
 * so, else 0. */
int fp4s_h5_close(hid_t file, const char *path);

/* ---- attributes -------------------------------------------------------------- */
/* Scalar string attribute (fixed or variable length): 1 found (copied,
 * truncated to n-1 bytes), 0 absent, <0 not a readable scalar string. */
int fp4s_h5_attr_get_str(hid_t obj, const char *name, char *buf, size_t n);
/* Scalar integer (or float) attribute: 1 found, 0 absent, <0 otherwise. */
int fp4s_h5_attr_get_i64(hid_t obj, const char *name, int64_t *v);
/* Create or replace a scalar attribute: 0, or FP4S_EWRITE with a detail
 * naming the attribute. Strings are variable-length UTF-8. */
int fp4s_h5_attr_str(hid_t obj, const char *name, const char *value);
int fp4s_h5_attr_f64(hid_t obj, const char *name, double value);
int fp4s_h5_attr_f32(hid_t obj, const char *name, float value);
int fp4s_h5_attr_i64(hid_t obj, const char *name, int64_t value);
/* The same for a 1-D attribute of n > 0 elements: stored as ftype, v in mtype. */
int fp4s_h5_attr_array(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v, size_t n);

/* ---- element types and paths -------------------------------------------------- */
/* Stored dtype of an open dataset: F32, F64, F16, BF16 (uint16 + dtype
 * attribute "bfloat16"), U8, U16, I32, I64; FP4S_EDTYPE otherwise. */
int fp4s_h5_dset_dtype(hid_t d, fp4s_dtype *dt);
/* HDF5 file type of a fp4s dtype, to write or read it without conversion
 * (little-endian; the caller closes it). */
hid_t fp4s_h5_type(fp4s_dtype dt);
/* Can the dataset be read without trusting a damaged layout? Its chunks fit
 * its rank and fixed dimensions (at most 4 GiB each), and its shape claims
 * no more data than the file stores (contiguous: at most the file's size;
 * chunked: at most 1100 times the stored bytes, deflate's limit, + 1 MiB).
 * 0, or FP4S_EFORMAT naming `what`. */
int fp4s_h5_check_layout(hid_t d, const char *what);
/* Does the absolute path exist, component by component (never an error). */
bool fp4s_h5_path_exists(hid_t f, const char *path);

/* ---- atomic HDF5 outputs (the report writers) ------------------------------------- */
/* Create an HDF5 file atomically: *file is open on a temporary beside `path`
 * (see fp4s_outfile_begin). fp4s_h5_finish closes it and, when commit is
 * true, renames it into place; otherwise (or if closing fails) removes it.
 * `path` names the file in messages. */
int fp4s_h5_create(const char *path, fp4s_outfile **of, hid_t *file);
int fp4s_h5_finish(const char *path, fp4s_outfile **of, hid_t *file, bool commit);
/* Creation list of a 2-D dataset [rows, cols] of esz-byte elements: chunks
 * of about 1 MiB (at most 65536 columns), byte shuffle and deflate at level
 * gzip (0: none). rows, cols > 0. The caller closes it. */
hid_t fp4s_h5_matrix_dcpl(size_t rows, size_t cols, size_t esz, int gzip);
/* Write a 2-D float32 dataset [rows, cols] at `dset` (intermediate groups
 * created, an existing dataset replaced), chunked, deflate level gzip. */
int fp4s_h5_write_f32(hid_t file, const char *dset, const float *data, size_t rows, size_t cols,
                      int gzip);
/* Write a 1-D dataset of n elements at name under loc (intermediate groups
 * created): 0, or FP4S_EWRITE with a detail naming it. */
int fp4s_h5_write_1d(hid_t loc, const char *name, hid_t mem_type, hid_t file_type, const void *data,
                     size_t n);
/* ---- report writers: one HDF5 report, all of it or nothing ----------------------- */
/* fp4s_h5_report_begin creates `path` atomically (fp4s_h5_create: w->file is
 * open on a temporary beside it), turns HDF5's error printing off and clears
 * the error detail; 0, or the error (then there is nothing to end). The
 * writer adds its attributes and datasets to w->file, then
 * fp4s_h5_report_end(w, ok, what) closes it: when ok, it is renamed into
 * place (0, or why that failed); otherwise it is removed and the result is
 * FP4S_EWRITE "path: what: <reason>", the reason being the detail a helper
 * recorded since begin, else HDF5's message. HDF5's printing is restored. */
typedef struct fp4s_h5_report {
    const char *path;
    fp4s_outfile *of;
    hid_t file;
    fp4s_h5_quiet q;
} fp4s_h5_report;
int fp4s_h5_report_begin(fp4s_h5_report *w, const char *path);
int fp4s_h5_report_end(fp4s_h5_report *w, bool ok, const char *what);

/* ---- writer locks --------------------------------------------------------------- */
typedef enum fp4s_wlock_mode {
    FP4S_WLOCK_EXISTING, /* open an existing file (append) */
    FP4S_WLOCK_CREATE,   /* create it, or lock the existing one (overwrite) */
    FP4S_WLOCK_NEW       /* create it; FP4S_EWRITE if it exists */
} fp4s_wlock_mode;

typedef struct fp4s_wlock {
    int fd;            /* the descriptor holding the lock; -1 = none */
    bool created;      /* the file did not exist before (FP4S_WLOCK_NEW) */
    uint64_t dev, ino; /* the file locked */
} fp4s_wlock;

/* Open `path` as `mode` says and take the writer lock without waiting.
 * FP4S_EBUSY (detail: held by another writer, or open for reading elsewhere)
 * when someone holds it; nothing is changed then. On success the path names
 * the locked file (checked after locking). */
int fp4s_wlock_take(const char *path, fp4s_wlock_mode mode, fp4s_wlock *l);
/* Is fd (for example HDF5's own descriptor of the file) the locked file? */
bool fp4s_wlock_is(const fp4s_wlock *l, int fd);
/* Remove the file if this lock created it and the path still names it (a
 * create that failed afterwards). */
void fp4s_wlock_drop_created(fp4s_wlock *l, const char *path);
void fp4s_wlock_release(fp4s_wlock *l); /* no-op when none */

#endif
