/* The internal HDF5 and file layer of the library, shared by lib/io,
 * lib/capture, analysis/ and their tests (not installed, not exported).
 *
 * Writer locks (lock.c): every writer that modifies a file in place holds
 * flock(2) LOCK_EX on it while it has it open, taken before anything is
 * created or truncated; see lock.c for the whole protocol. */
#ifndef FP4S_IO_H5_INTERNAL_H
#define FP4S_IO_H5_INTERNAL_H

#include <fp4scope/tensor.h>

#include <stdbool.h>
#include <stdint.h>

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
