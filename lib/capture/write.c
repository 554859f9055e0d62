/* The capture writer: create / open for append, put blocks, flush, close.
 *
 * Crash safety on HDF5 1.10 (see capture.h): the file access list turns off
 * metadata cache evictions and automatic resizing, so metadata is written only
 * by H5Fflush/H5Fclose; the creation list sets the file-space strategy to
 * "none", so space freed while writing is never handed out again and raw data
 * written between flushes can only land beyond what the last flush
 * references; each flush is a two-phase commit (commit() below).
 *
 * This file holds the writer's life (create, open for append, commit, flush,
 * close, abort); write_put.c what goes into it. */
#include "write_internal.h"

#include <fp4scope/version.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void fp4s_capture_opts_defaults(fp4s_capture_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gzip = 0;
    o->shuffle = true;
    o->chunk_rows = 0;
    o->producer = NULL;
    o->overwrite = false;
}

void fp4s_capture_meta_defaults(fp4s_capture_meta *m)
{
    memset(m, 0, sizeof *m);
    m->token_offset = -1;
    m->layer = -2;
    m->expert = -2;
    m->source_shape = NULL;
}

/* ---- open / create ----------------------------------------------------------------- */
static hid_t writer_fapl(void)
{
    hid_t fapl = fp4s_h5_fapl();
    if (fapl < 0) return fapl;
    H5AC_cache_config_t mdc;
    memset(&mdc, 0, sizeof mdc);
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (H5Pget_mdc_config(fapl, &mdc) >= 0) {
        /* No evictions and no automatic resizing: dirty metadata stays in memory
         * until H5Fflush, so an unflushed step never reaches the disk half-done. */
        mdc.evictions_enabled = 0;
        mdc.incr_mode = H5C_incr__off;
        mdc.flash_incr_mode = H5C_flash_incr__off;
        mdc.decr_mode = H5C_decr__off;
        mdc.set_initial_size = 1;
        mdc.initial_size = 4 * 1024 * 1024;
        mdc.min_size = 1024 * 1024;
        mdc.max_size = 64 * 1024 * 1024;
        H5Pset_mdc_config(fapl, &mdc);
    }
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    /* The writer holds its own lock (the same flock HDF5 would take, but taken
     * before the file is created or truncated); HDF5's second flock on its own
     * descriptor would conflict with it. */
    H5Pset_file_locking(fapl, 0, 1);
    return fapl;
}

static void iso_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int set_state(fp4s_capture *c, const char *state)
{
    if (fp4s_h5_attr_str(c->file, "writer_state", state) < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: cannot write root attribute writer_state: %s",
                              c->path, fp4s_h5_msg());
    return 0;
}

/* A write to the file failed (a full disk): the library's file driver keeps
 * the file as it was at that moment and writes nothing more (h5vfd.c), so
 * the capture holds the steps flushed before; say why. */
int capw_write_failed(fp4s_capture *c, const char *what)
{
    int e = fp4s_h5_write_errno(c->file);
    if (!e) return 0;
    return fp4s_error_set(FP4S_EWRITE, "%s: %s: %s (nothing more is written to the file; it keeps the "
                          "steps flushed before)", c->path, what, strerror(e));
}

static int sync_file(fp4s_capture *c)
{
    if (H5Fflush(c->file, H5F_SCOPE_GLOBAL) < 0)
        return fp4s_error_set(FP4S_EWRITE, "%s: flush failed: %s", c->path, fp4s_h5_msg());
    int rc = capw_write_failed(c, "flush failed");
    if (rc) return rc;
    void *handle = NULL;
    if (H5Fget_vfd_handle(c->file, H5P_DEFAULT, &handle) >= 0 && handle) {
        int fd = *(int *)handle;
        if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
            return fp4s_error_set(FP4S_EWRITE, "%s: fsync failed: %s", c->path, strerror(errno));
    }
    return 0;
}

/* HDF5 opened the path itself: make sure it is the file the lock holds (only a
 * rename by hand, outside the protocol, can slip in between). */
static int check_locked(fp4s_capture *c)
{
    void *handle = NULL;
    if (H5Fget_vfd_handle(c->file, H5P_DEFAULT, &handle) < 0 || !handle)
        return fp4s_error_set(FP4S_EINTERNAL, "%s: cannot get the file descriptor: %s", c->path,
                              fp4s_h5_msg());
    if (!fp4s_wlock_is(&c->lock, *(int *)handle))
        return fp4s_error_set(FP4S_EBUSY, "%s: replaced by another process while it was being "
                              "opened", c->path);
    return 0;
}

static fp4s_capture *cap_alloc(const char *path, const fp4s_capture_opts *o)
{
    fp4s_capture *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->path = strdup(path);
    if (!c->path) {
        free(c);
        return NULL;
    }
    if (o)
        c->opts = *o;
    else
        fp4s_capture_opts_defaults(&c->opts);
    c->opts.producer = NULL; /* not kept: only used at create */
    c->file = -1;
    c->lock.fd = -1;
    return c;
}

static void made_clear(fp4s_capture *c)
{
    for (size_t i = 0; i < c->nmade; i++) free(c->made[i]);
    c->nmade = 0;
}

int capw_made_add(fp4s_capture *c, const char *path)
{
    if (c->nmade == c->capmade) {
        size_t nc = c->capmade ? c->capmade * 2 : 16;
        char **n = realloc(c->made, nc * sizeof *n);
        if (!n) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->path);
        c->made = n;
        c->capmade = nc;
    }
    if (!(c->made[c->nmade] = strdup(path))) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->path);
    c->nmade++;
    return 0;
}

static void cap_free(fp4s_capture *c)
{
    if (!c) return;
    fp4s_wlock_release(&c->lock);
    made_clear(c);
    free(c->made);
    free(c->slots);
    free(c->pend);
    free(c->path);
    free(c);
}

static int check_opts(const char *path, const fp4s_capture_opts *o)
{
    if (!o) return 0;
    if (o->gzip < 0 || o->gzip > 9)
        return fp4s_error_set(FP4S_EINVAL, "%s: gzip level %d out of range 0..9", path, o->gzip);
    if (o->gzip > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
        return fp4s_error_set(FP4S_ENOTSUP, "%s: this HDF5 has no deflate filter", path);
    if (o->checksum > 1)
        return fp4s_error_set(FP4S_EINVAL, "%s: checksum %u: expected 0 (none) or 1 (Fletcher-32)", path,
                              (unsigned)o->checksum);
    if (o->checksum && H5Zfilter_avail(H5Z_FILTER_FLETCHER32) <= 0)
        return fp4s_error_set(FP4S_ENOTSUP, "%s: this HDF5 has no Fletcher-32 filter", path);
    return 0;
}

int fp4s_capture_create(const char *path, const fp4s_capture_opts *o, fp4s_capture **out)
{
    *out = NULL;
    if (!path || !path[0]) return fp4s_error_set(FP4S_EINVAL, "capture: empty output path");
    int rc = check_opts(path, o);
    if (rc) return rc;
    bool overwrite = o ? o->overwrite : false;
    fp4s_capture *c = cap_alloc(path, o);
    if (!c) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    /* Lock first, then create: a refused writer changes nothing. */
    rc = fp4s_wlock_take(path, overwrite ? FP4S_WLOCK_CREATE : FP4S_WLOCK_NEW, &c->lock);
    if (rc) {
        if (rc == FP4S_EWRITE && !overwrite && strstr(fp4s_last_error(), "already exists"))
            rc = fp4s_error_set(FP4S_EWRITE, "%s: already exists; nothing was changed (open it for appending, "
                                "or create it with overwrite set to replace it)", path);
        cap_free(c);
        return rc;
    }
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    hid_t fapl = writer_fapl();
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    /* Never reuse freed space (see the top of this file). */
    H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_NONE, 0, (hsize_t)1);
    /* Symbol-table leaf nodes of 2 x 1024 entries: linking up to 2048 steps
     * (or constant weights) into /steps (/weights) never splits a node, so the
     * second phase of a flush rewrites one node and one heap in place. Only
     * the old-style groups /, /steps and /weights use them; step, site and
     * log-prob groups are compact new-style groups (cap_small_gcpl). */
    H5Pset_sym_k(fcpl, 16, 1024);
    c->file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    char m[256];
    snprintf(m, sizeof m, "%s", c->file < 0 ? fp4s_h5_msg() : "");
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (c->file < 0) {
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot create: %s", path, m[0] ? m : strerror(errno));
        goto fail;
    }
    rc = check_locked(c);
    if (rc) goto fail;
    char when[32];
    iso_now(when, sizeof when);
    char prod[128];
    snprintf(prod, sizeof prod, "libfp4scope %s", fp4s_version());
    if (fp4s_h5_attr_str(c->file, "fp4scope_schema", FP4S_CAPTURE_SCHEMA) < 0 ||
        fp4s_h5_attr_str(c->file, "producer", o && o->producer ? o->producer : prod) < 0 ||
        fp4s_h5_attr_str(c->file, "created", when) < 0 || set_state(c, "open") < 0) {
        rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write root attributes: %s", path, fp4s_h5_msg());
        goto fail;
    }
    rc = sync_file(c);
    if (rc) goto fail;
    fp4s_h5_quiet_end(&q);
    *out = c;
    return 0;
fail:
    if (c->file >= 0) H5Fclose(c->file);
    fp4s_wlock_drop_created(&c->lock, path);
    fp4s_h5_quiet_end(&q);
    cap_free(c);
    return rc;
}

int fp4s_capture_open_append(const char *path, const fp4s_capture_opts *o, fp4s_capture **out)
{
    *out = NULL;
    int rc = check_opts(path, o);
    if (rc) return rc;
    struct stat stb;
    if (stat(path, &stb) != 0)
        return fp4s_error_set(FP4S_EOPEN, "%s: cannot open for append: %s", path, strerror(errno));
    fp4s_capture *c = cap_alloc(path, o);
    if (!c) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    /* Lock first: a file another writer is creating is not judged half-made. */
    rc = fp4s_wlock_take(path, FP4S_WLOCK_EXISTING, &c->lock);
    if (rc) {
        cap_free(c);
        return rc;
    }
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    if (H5Fis_hdf5(path) <= 0) {
        fp4s_h5_quiet_end(&q);
        cap_free(c);
        return fp4s_error_set(FP4S_EFORMAT, "%s: not an HDF5 file (no superblock)", path);
    }
    rc = fp4s_h5_validate(path, false); /* a damaged capture is refused before it is opened */
    if (rc) {
        fp4s_h5_quiet_end(&q);
        cap_free(c);
        return rc;
    }
    hid_t fapl = writer_fapl();
    c->file = H5Fopen(path, H5F_ACC_RDWR, fapl);
    char m[256];
    snprintf(m, sizeof m, "%s", c->file < 0 ? fp4s_h5_msg() : "");
    H5Pclose(fapl);
    if (c->file < 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: cannot open for append (damaged, truncated or "
                            "read-only): %s", path, m);
        goto fail;
    }
    rc = check_locked(c);
    if (!rc) rc = cap_check_schema(c->file, path, NULL);
    if (rc) goto fail;
    /* Files not made by this writer may reuse space; appending to them keeps
     * their strategy, and the crash guarantee is only as good as theirs. */
    rc = set_state(c, "open");
    if (!rc) rc = sync_file(c);
    if (rc) goto fail;
    fp4s_h5_quiet_end(&q);
    *out = c;
    return 0;
fail:
    if (c->file >= 0) H5Fclose(c->file);
    fp4s_h5_quiet_end(&q);
    cap_free(c);
    return rc;
}

int capw_pend_add(fp4s_capture *c, int64_t step, const char *name, hid_t obj, bool anon)
{
    if (c->npend == c->cappend) {
        size_t nc = c->cappend ? c->cappend * 2 : 16;
        pend *np = realloc(c->pend, nc * sizeof *np);
        if (!np) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", c->path);
        c->pend = np;
        c->cappend = nc;
    }
    pend *p = &c->pend[c->npend++];
    p->step = step;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->obj = obj;
    p->anon = anon;
    return 0;
}

/* The parent groups /steps and /weights; a large local heap so that adding
 * step names rewrites the heap in place instead of moving it. */
static hid_t parent_group(fp4s_capture *c, const char *path)
{
    if (H5Lexists(c->file, path, H5P_DEFAULT) > 0) return H5Gopen2(c->file, path, H5P_DEFAULT);
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_local_heap_size_hint(gcpl, 32768);
    hid_t g = H5Gcreate2(c->file, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    H5Pclose(gcpl);
    return g;
}

/* Two-phase commit. Phase 1 writes every new object while nothing that the
 * file already references points to it (new steps are anonymous groups), so
 * a kill there leaves the last committed state untouched. Phase 2 links the
 * new steps into /steps (a few small in-place metadata writes) and flushes
 * again. */
static int commit(fp4s_capture *c)
{
    int rc = 0;
    if (capw_slots_close(c))
        rc = fp4s_error_set(FP4S_EWRITE, "%s: closing datasets failed: %s", c->path, fp4s_h5_msg());
    if (!rc) rc = capw_write_failed(c, "write failed");
    if (!rc && H5Fflush(c->file, H5F_SCOPE_GLOBAL) < 0)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: flush failed: %s", c->path, fp4s_h5_msg());
    if (!rc) rc = capw_write_failed(c, "flush failed");
    hid_t steps = -1, weights = -1;
    for (size_t i = 0; i < c->npend; i++) {
        pend *p = &c->pend[i];
        if (!rc && p->anon) {
            hid_t *par = p->step >= 0 ? &steps : &weights;
            if (*par < 0) *par = parent_group(c, p->step >= 0 ? "/steps" : "/weights");
            if (*par < 0 || H5Olink(p->obj, *par, p->name, H5P_DEFAULT, H5P_DEFAULT) < 0)
                rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot link %s/%s: %s", c->path,
                                    p->step >= 0 ? "/steps" : "/weights", p->name, fp4s_h5_msg());
        }
        H5Oclose(p->obj);
    }
    c->npend = 0;
    made_clear(c);
    if (steps >= 0) H5Gclose(steps);
    if (weights >= 0) H5Gclose(weights);
    if (!rc) rc = sync_file(c);
    return rc;
}

int fp4s_capture_flush(fp4s_capture *c)
{
    if (!c) return fp4s_error_set(FP4S_EINVAL, "capture: flush of a NULL handle");
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = commit(c);
    fp4s_h5_quiet_end(&q);
    return rc;
}

int fp4s_capture_close(fp4s_capture **pc)
{
    if (!pc || !*pc) return 0;
    fp4s_capture *c = *pc;
    *pc = NULL;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = commit(c);
    if (!rc) rc = set_state(c, "closed");
    if (!rc) rc = sync_file(c);
    int crc = fp4s_h5_close(c->file, c->path);
    if (!rc) rc = crc;
    fp4s_h5_quiet_end(&q);
    cap_free(c); /* releases the lock, after HDF5 has closed the file */
    return rc;
}

int fp4s_capture_abort(fp4s_capture **pc)
{
    if (!pc || !*pc) return 0;
    fp4s_capture *c = *pc;
    *pc = NULL;
    fp4s_h5_quiet q;
    fp4s_h5_quiet_begin(&q);
    int rc = 0;
    /* rows appended to datasets that were there: cut back */
    for (size_t i = 0; i < c->nslots; i++) {
        dslot *s = &c->slots[i];
        if (!s->path || s->rows == s->rows0) continue;
        hsize_t nd[2] = {(hsize_t)s->rows0, (hsize_t)s->cols};
        if (H5Dset_extent(s->d, nd) < 0 && !rc)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot cut back to %zu rows: %s", c->path, s->path,
                                s->rows0, fp4s_h5_msg());
    }
    if (capw_slots_close(c) && !rc)
        rc = fp4s_error_set(FP4S_EWRITE, "%s: closing datasets failed: %s", c->path, fp4s_h5_msg());
    /* sites and datasets made inside old steps: unlinked, newest first */
    for (size_t i = c->nmade; i-- > 0;)
        if (H5Ldelete(c->file, c->made[i], H5P_DEFAULT) < 0 && !rc)
            rc = fp4s_error_set(FP4S_EWRITE, "%s: %s: cannot remove it: %s", c->path, c->made[i],
                                fp4s_h5_msg());
    made_clear(c);
    /* new steps and constant weights were never linked: they are dropped */
    for (size_t i = 0; i < c->npend; i++) H5Oclose(c->pend[i].obj);
    c->npend = 0;
    if (!rc) rc = set_state(c, "closed");
    if (!rc) rc = sync_file(c);
    int crc = fp4s_h5_close(c->file, c->path);
    if (!rc) rc = crc;
    fp4s_h5_quiet_end(&q);
    cap_free(c);
    return rc;
}
