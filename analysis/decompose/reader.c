/* The streaming driver of the decomposition (fp4s_decomp_source): one pass
 * (two for NVFP4: the tensor amax first, the rows read kept in memory up to
 * keep_bytes) over a source in chunks of rows. A .npy or .safetensors source
 * on 4 or more threads: each chunk is read by all the workers, each through
 * a source of its own (pread at independent offsets), then decomposed; one
 * thread reading from the page cache was what the decomposition waited for
 * (bench/RESULTS-H200.md, CPU scaling). Otherwise (HDF5, which wants one
 * thread, or fewer threads) double-buffered: the next chunk read on a thread
 * while this one is decomposed. */
#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/supports.h"
#include "decomp_internal.h"
#include "io/internal.h"

struct reader {
    fp4s_source *src;
    size_t rows, cols, chunk;
    size_t row0, row_end; /* the rows read: [row0, row_end) */
    float *buf[2];
    float *keep;      /* NVFP4: rows [row0, keep_end) kept from the amax pass (opts keep_bytes) */
    size_t keep_end;
    bool kept;        /* they are filled: the next pass finds them in memory */
    size_t next_row;  /* first row of the chunk being read */
    int rc;
    char err[1024];
    const char *spec_str; /* the source, for the workers' own */
    bool par;             /* chunks read by the workers (par_read) */
    fp4s_source *wsrc[MAX_WORKERS]; /* worker w's source, opened on its first piece */
};

/* The tensor amax of rows x [n, cols] that the decomposition's tensor scale
 * takes, as fp4-quant's quantizer takes it: the largest finite |x|, of the
 * rotated rows for a spec with the RHT (whatever the spec's tensor_amax: a
 * NaN or Inf is excluded with its block, the finite blocks keep a finite
 * scale). The finite max of whole rows folds the same over any chunks,
 * threads or row ranges. */
static float rows_amax(const fp4s_spec *s, const float *x, size_t n, size_t cols)
{
    if (!s->rht) return fp4s_amax(x, n, cols, cols, NULL);
    fp4s_spec f = *s;
    f.tensor_amax = FP4S_TAMAX_FINITE;
    return fp4s_spec_amax(&f, x, n, cols, cols, NULL);
}

/* Rows [r0, r0 + n) into dst (stride cols) on the workers, in pieces of about
 * 256 KiB, each through the worker's own source; with amax_spec, each worker
 * also folds its pieces' amax (rows_amax) into amax[w] while they are in its
 * cache, as chunk_amax folds chunks': the larger, NaN never taken, so the
 * same value in any order. */
struct par_job {
    struct reader *rd;
    size_t r0, piece;
    float *dst;
    void *raw_dst;   /* instead of dst: the stored bytes (fp4s_source_read_raw), raw_esz a value */
    size_t raw_esz;
    const fp4s_spec *amax_spec;
    float amax[MAX_WORKERS];
};

static int par_piece(void *arg, size_t b, size_t e, int w)
{
    struct par_job *j = arg;
    struct reader *rd = j->rd;
    int rc = 0;
    if (!rd->wsrc[w]) rc = fp4s_source_open(rd->spec_str, &rd->wsrc[w]);
    if (!rc && j->raw_dst)
        return fp4s_source_read_raw(rd->wsrc[w], j->r0 + b, e - b,
                                    (char *)j->raw_dst + b * rd->cols * j->raw_esz);
    if (!rc) rc = fp4s_source_read(rd->wsrc[w], j->r0 + b, e - b, j->dst + b * rd->cols, rd->cols);
    if (!rc && j->amax_spec) {
        float a = rows_amax(j->amax_spec, j->dst + b * rd->cols, e - b, rd->cols);
        if (a > j->amax[w]) j->amax[w] = a;
    }
    return rc;
}

/* amax_spec NULL: the rows only; else *amax (>= 0) takes their amax too. */
static int par_read_amax(struct reader *rd, size_t r0, size_t n, float *dst, const fp4s_spec *amax_spec,
                         float *amax)
{
    int nt = fp4s_get_threads();
    if (nt > MAX_WORKERS) nt = MAX_WORKERS;
    size_t piece = ((size_t)1 << 16) / rd->cols;
    struct par_job j;
    memset(&j, 0, sizeof j);
    j.rd = rd;
    j.r0 = r0;
    j.piece = piece ? piece : 1;
    j.dst = dst;
    j.amax_spec = amax_spec;
    int rc = fp4s_parallel_dynamic(n, j.piece, nt, par_piece, &j);
    if (!rc && amax_spec)
        for (int w = 0; w < nt; w++)
            if (j.amax[w] > *amax) *amax = j.amax[w];
    return rc;
}

static int par_read(struct reader *rd, size_t r0, size_t n, float *dst)
{
    return par_read_amax(rd, r0, n, dst, NULL, NULL);
}

/* The stored bytes (esz a value) of rows [r0, r0 + n) into dst, on the workers. */
static int par_read_raw(struct reader *rd, size_t r0, size_t n, void *dst, size_t esz)
{
    int nt = fp4s_get_threads();
    if (nt > MAX_WORKERS) nt = MAX_WORKERS;
    size_t piece = ((size_t)1 << 16) / rd->cols;
    struct par_job j;
    memset(&j, 0, sizeof j);
    j.rd = rd;
    j.r0 = r0;
    j.piece = piece ? piece : 1;
    j.raw_dst = dst;
    j.raw_esz = esz;
    return fp4s_parallel_dynamic(n, j.piece, nt, par_piece, &j);
}

/* Where the chunk at row0 is (or is read to): its place among the kept rows,
 * or buffer slot. */
static float *chunk_at(const struct reader *rd, int slot, size_t row0)
{
    return row0 < rd->keep_end ? rd->keep + (row0 - rd->row0) * rd->cols : rd->buf[slot];
}

static int read_chunk(struct reader *rd, int slot, size_t row0)
{
    size_t n = rd->row_end - row0 < rd->chunk ? rd->row_end - row0 : rd->chunk;
    if (rd->kept && row0 < rd->keep_end) return 0; /* in memory since the first pass */
    int rc = rd->par ? par_read(rd, row0, n, chunk_at(rd, slot, row0))
                     : fp4s_source_read(rd->src, row0, n, chunk_at(rd, slot, row0), rd->cols);
    if (rc) {
        rd->rc = rc;
        snprintf(rd->err, sizeof rd->err, "%s", fp4s_last_error());
    }
    return rc;
}

struct read_arg {
    struct reader *rd;
    int slot;
    size_t row0;
};

static void *read_thread(void *p)
{
    struct read_arg *a = p;
    read_chunk(a->rd, a->slot, a->row0);
    return NULL;
}

/* One pass over the source: fn(ctx, rows, n, row0) on every chunk in order,
 * each chunk read by the workers first (rd->par), else the next chunk read on
 * a thread meanwhile (in this thread when none can be started). Returns fn's
 * error with the detail prefixed by spec_str, or the reader's error with its
 * detail. */
static int each_chunk(struct reader *rd, size_t from, const char *spec_str,
                      int (*fn)(void *ctx, const float *x, size_t n, size_t row0), void *ctx, int pass,
                      int npasses)
{
    if (from >= rd->row_end) return 0;
    if (read_chunk(rd, 0, from)) return fp4s_error_set(rd->rc, "%s", rd->err);
    int slot = 0;
    for (size_t r0 = from; r0 < rd->row_end; r0 += rd->chunk) {
        size_t n = rd->row_end - r0 < rd->chunk ? rd->row_end - r0 : rd->chunk;
        size_t nx = r0 + n;
        pthread_t th;
        struct read_arg ra = {rd, 1 - slot, nx};
        bool threaded = false;
        if (rd->par && r0 != from && read_chunk(rd, slot, r0)) return fp4s_error_set(rd->rc, "%s", rd->err);
        if (!rd->par && nx < rd->row_end && !(rd->kept && nx < rd->keep_end)) {
            threaded = pthread_create(&th, NULL, read_thread, &ra) == 0;
            if (!threaded) read_chunk(rd, 1 - slot, nx);
        }
        int rc = fn(ctx, chunk_at(rd, slot, r0), n, r0);
        if (threaded) pthread_join(th, NULL);
        if (rc) {
            fp4s_error_prefix("%s", spec_str);
            return rc;
        }
        if (rd->rc) return fp4s_error_set(rd->rc, "%s", rd->err);
        slot = 1 - slot;
        fp4s_progress_report((uint64_t)pass * rd->rows + nx, (uint64_t)npasses * rd->rows);
    }
    return 0;
}

static int chunk_amax(void *ctx, const float *x, size_t n, size_t row0)
{
    (void)row0;
    struct reader *rd = ((void **)ctx)[0];
    const fp4s_spec *s = ((void **)ctx)[2];
    /* a spec with the RHT takes the amax of the rotated rows */
    float *amax = ((void **)ctx)[1];
    float a = rows_amax(s, x, n, rd->cols);
    if (a > *amax) *amax = a;
    return 0;
}

static int chunk_add(void *ctx, const float *x, size_t n, size_t row0)
{
    fp4s_decomp *d = ctx;
    return fp4s_decomp_add(d, x, n, d->cols, row0);
}

/* NVFP4 reads the source twice: the tensor amax first, then the
 * decomposition. The first keep_bytes of the rows read (as float32, whole
 * chunks; by default only where the input is not in the page cache, see
 * keep_resolve) are kept from the first pass so that the second finds them
 * in memory; where that memory cannot be had, nothing is kept (the same
 * results, read twice). */
/* The kept rows' memory: up to 2 GiB that the workers fill at once. In 4 KiB
 * pages the first touch of each page is a fault, and the faults of one
 * mapping from many threads queue on the process's memory-map lock: on 16
 * threads, keeping 1 GiB took longer than reading the file a second time from
 * the page cache. Huge pages (where the kernel offers them, madvise mode
 * included) make that 512 times fewer faults; on a warm page cache a second
 * read can still be the faster, since copying from the page cache costs less
 * than filling fresh pages (why --keep auto keeps nothing for an input in the
 * page cache). NULL where the memory cannot be had (nothing is kept then). */
static float *keep_buffer(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (bytes < huge) return malloc(bytes);
    if (posix_memalign(&p, huge, (bytes + huge - 1) / huge * huge)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE); /* advice: refused is fine */
#endif
    return p;
}

static void keep_alloc(struct reader *rd, size_t keep_bytes)
{
    size_t chunk_bytes = rd->chunk * rd->cols * sizeof(float);
    size_t nk = chunk_bytes ? keep_bytes / chunk_bytes : 0;
    size_t nchunks = (rd->row_end - rd->row0 + rd->chunk - 1) / rd->chunk;
    if (nk > nchunks) nk = nchunks;
    if (nk == 0) return;
    size_t end = nk == nchunks ? rd->row_end : rd->row0 + nk * rd->chunk;
    rd->keep = keep_buffer((end - rd->row0) * rd->cols * sizeof(float));
    if (rd->keep) rd->keep_end = end;
}

/* keep_bytes as the caller gave it, FP4S_DECOMP_KEEP_AUTO resolved for this
 * input: nothing kept where the bytes of rows [row0, row_end) are in the page
 * cache (fp4s_file_resident: a second read is then a memory copy, and on a
 * warm cache it was the faster, see keep_buffer), nor where they are not but
 * fit in KEEP_FIT_SHARE of the memory available (the amax pass itself then
 * leaves them in the page cache for the second read: keeping would only add
 * its copy); else FP4S_DECOMP_KEEP_DEFAULT, as where the probe cannot tell.
 * The size counted is that of the rows as float32 (at most twice a 16-bit
 * input's bytes: the cautious side). */
#define KEEP_FIT_SHARE 0.5
static size_t keep_resolve(const struct reader *rd, size_t keep_bytes)
{
    if (keep_bytes != FP4S_DECOMP_KEEP_AUTO) return keep_bytes;
    uint64_t off, len;
    fp4s_source_data_range(rd->src, rd->row0, rd->row_end - rd->row0, &off, &len);
    const int res = fp4s_file_resident(fp4s_source_path(rd->src), off, len, NULL);
    if (res == 1) return 0;
    const double need = (double)(rd->row_end - rd->row0) * (double)rd->cols * sizeof(float);
    const uint64_t avail = fp4s_mem_available();
    if (res == 0 && avail > 0 && need <= KEEP_FIT_SHARE * (double)avail) return 0;
    return FP4S_DECOMP_KEEP_DEFAULT;
}

/* The kept rows read on the worker threads (par_read_amax; an HDF5 source is
 * read by one thread, as HDF5 wants, and nothing is done here), so that the
 * first pass takes a fraction of one thread's read. Their amax is folded
 * into *amax on the way (*amax_done), and the amax pass goes on from
 * rd->keep_end. */
static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Can workers read the source through sources of their own (pread)? */
static bool raw_source(const struct reader *rd)
{
    const char *path = fp4s_source_path(rd->src);
    return path && (ends_with(path, ".npy") || ends_with(path, ".safetensors"));
}

static int keep_read(struct reader *rd, const fp4s_spec *s, float *amax, bool *amax_done)
{
    *amax_done = false;
    if (!rd->keep || !raw_source(rd)) return 0;
    int rc = par_read_amax(rd, rd->row0, rd->keep_end - rd->row0, rd->keep, s, amax);
    if (!rc) {
        rd->kept = true;
        *amax_done = true;
    }
    return rc;
}

/* ---- the GPU path: chunks read into pinned slots, overlapped with the GPU ----
 *
 * Each chunk is read (on the workers, from a .npy or .safetensors source:
 * pread at independent offsets; HDF5 by this thread) straight into a pinned
 * slot of the streaming session (kernels/cuda/decomp_cu.h), then submitted:
 * its copy to the device and its decomposition run while the next chunk is
 * read into the other slot. BF16 and FP16 sources are read as stored (half
 * the bytes to read and copy; the kernels widen them exactly). NVFP4 takes
 * the tensor amax first: the rows of that pass are kept in device memory
 * where they fit (with room for the decomposition's own buffers), so the
 * second pass reads nothing; where they do not, the amax pass reads on the
 * CPU and the rows are read again. */

struct gpu_read {
    struct reader *rd;
    const fp4s_cu_ds_ops *ops;
    fp4s_cu_ds *ds;
    fp4s_decomp *d; /* NULL: the keeping pass */
    bool raw, par;
    bool read_failed; /* the error came from reading (its message names the file) */
    size_t esz, chunk;
};

static int gpu_read_rows(const struct gpu_read *g, size_t r0, size_t n, void *dst)
{
    struct reader *rd = g->rd;
    if (g->par && g->raw) return par_read_raw(rd, r0, n, dst, g->esz);
    if (g->par) return par_read(rd, r0, n, dst);
    if (g->raw) return fp4s_source_read_raw(rd->src, r0, n, dst);
    return fp4s_source_read(rd->src, r0, n, dst, rd->cols);
}

/* Slot i's last chunk done: its parts into the decomposer. */
static int gpu_drain(const struct gpu_read *g, int i)
{
    const part *units = NULL;
    size_t n = 0, row0 = 0;
    int rc = g->ops->wait(g->ds, i, &units, &n, &row0);
    if (!rc && g->d && n) fp4s_decomp_merge_units(g->d, units, row0, n);
    return rc;
}

/* One pass over the rows: read, submit, drain. */
static int gpu_pass(struct gpu_read *g, int pass, int npasses)
{
    struct reader *rd = g->rd;
    int rc = 0, j = 0;
    for (size_t r0 = rd->row0; r0 < rd->row_end && !rc; r0 += g->chunk, j++) {
        const size_t n = rd->row_end - r0 < g->chunk ? rd->row_end - r0 : g->chunk;
        const int i = j % FP4S_CU_DS_SLOTS;
        rc = gpu_drain(g, i);
        if (rc) break;
        rc = gpu_read_rows(g, r0, n, g->ops->slot(g->ds, i));
        if (rc) g->read_failed = true;
        if (!rc && g->d) rc = fp4s_decomp_check_rows(g->d, r0, n);
        if (!rc) rc = g->ops->submit(g->ds, i, n, r0);
        fp4s_progress_report((uint64_t)pass * rd->rows + r0 + n, (uint64_t)npasses * rd->rows);
    }
    for (int i = 0; i < FP4S_CU_DS_SLOTS; i++) {
        int rc2 = gpu_drain(g, i);
        if (!rc) rc = rc2;
    }
    return rc;
}

static int gpu_open_decomp(const struct reader *rd, const fp4s_spec *s, const fp4s_decomp_opts *o, float amax,
                           fp4s_decomp **d)
{
    fp4s_tscale ts;
    memset(&ts, 0, sizeof ts);
    int rc = fp4s_tscale_init(s, amax, &ts);
    if (!rc) rc = fp4s_decomp_open(s, &ts, o, rd->rows, rd->cols, d);
    return rc;
}

static int gpu_rows(struct reader *rd, const fp4s_spec *s, const fp4s_decomp_opts *o, const float *amax_in,
                    const fp4s_cu_ds_ops *ops, fp4s_decomp **out, bool *read_failed)
{
    const char *why = NULL;
    if (!fp4s_cu_supports_why(s, &why))
        return fp4s_error_set(FP4S_ENOTSUP, "decomposition on the GPU: %s: %s",
                              s->profile[0] ? s->profile : fp4s_format_name(s->format), why);
    const fp4s_dtype sdt = fp4s_source_dtype(rd->src);
    struct gpu_read g;
    memset(&g, 0, sizeof g);
    g.rd = rd;
    g.ops = ops;
    g.raw = (sdt == FP4S_DT_BF16 || sdt == FP4S_DT_F16) && raw_source(rd);
    g.esz = g.raw ? 2 : sizeof(float);
    g.par = fp4s_get_threads() >= 2 && raw_source(rd);
    const fp4s_dtype dt = g.raw ? sdt : FP4S_DT_F32;
    size_t align = fp4s_spec_row_align(s);
    if (align == 0) align = 1;
    const size_t nrows = rd->row_end - rd->row0;
    /* chunks of 2^24 elements (64 MiB of float32): two pinned slots */
    size_t chunk = (o->chunk_elems ? o->chunk_elems : ((size_t)1 << 24)) / rd->cols;
    chunk -= chunk % align;
    if (chunk < align) chunk = align;
    if (chunk > nrows) chunk = nrows;
    g.chunk = chunk;
    fp4s_cu_dk k;
    memset(&k, 0, sizeof k);
    k.spec = *s;
    k.cols = rd->cols;
    k.bs = s->block;
    k.nblk = rd->cols / s->block;
    fp4s_decomp *d = NULL;
    float amax = amax_in ? *amax_in : 0.0f;
    int rc = 0;
    if (nrows == 0) { /* an empty row range (a rank's share): nothing to read, nothing on the GPU */
        rc = gpu_open_decomp(rd, s, o, amax, &d);
        goto done;
    }
    const bool two = s->format == FP4S_NVFP4 && !amax_in;
    if (two) {
        rc = ops->open(&k, dt, chunk, rd->row0, nrows, &g.ds);
        if (!rc) {
            /* the rows kept on the device: one read */
            const void *kept = NULL;
            rc = gpu_pass(&g, 0, 2);
            if (!rc) rc = ops->amax(g.ds, &amax, &kept);
            if (!rc) rc = gpu_open_decomp(rd, s, o, amax, &d);
            if (!rc)
                rc = fp4s_decomp_add_via(d, ops->host ? fp4s_cu_decomp_emulate : fp4s_cu_decomp, dt, kept,
                                         ops->host, nrows, rd->cols, rd->row0, NULL);
            ops->close(&g.ds);
            if (!rc) fp4s_progress_report((uint64_t)2 * rd->rows, (uint64_t)2 * rd->rows);
            goto done;
        }
        if (rc != FP4S_ENOMEM) goto done;
        /* they do not fit: the amax while reading on the CPU, then a second read */
        float *buf = malloc(chunk * rd->cols * sizeof *buf);
        if (!buf) {
            rc = fp4s_error_set(FP4S_ENOMEM, "out of memory for chunks of %zu rows", chunk);
            goto done;
        }
        rc = 0;
        for (size_t r0 = rd->row0; r0 < rd->row_end && !rc; r0 += chunk) {
            const size_t n = rd->row_end - r0 < chunk ? rd->row_end - r0 : chunk;
            if (g.par) {
                rc = par_read_amax(rd, r0, n, buf, s, &amax);
            } else {
                rc = fp4s_source_read(rd->src, r0, n, buf, rd->cols);
                if (!rc) {
                    const float a = rows_amax(s, buf, n, rd->cols);
                    if (a > amax) amax = a;
                }
            }
            if (rc) g.read_failed = true;
            fp4s_progress_report(r0 + n, (uint64_t)2 * rd->rows);
        }
        free(buf);
        if (rc) goto done;
    }
    rc = gpu_open_decomp(rd, s, o, amax, &d);
    if (rc) goto done;
    fp4s_decomp_cu_dk(d, &k);
    rc = ops->open(&k, dt, chunk, 0, 0, &g.ds);
    if (rc) goto done;
    g.d = d;
    rc = gpu_pass(&g, two, 1 + two);
    if (!rc) {
        fp4s_cu_dk_out *res = calloc(1, sizeof *res);
        if (res && d->opts.by == FP4S_GROUP_CHANNEL) res->ch = calloc(rd->cols, sizeof(chacc));
        if (!res || (d->opts.by == FP4S_GROUP_CHANNEL && !res->ch))
            rc = fp4s_error_set(FP4S_ENOMEM, "decomposition on the GPU: out of memory");
        if (!rc) rc = ops->finish(g.ds, res);
        if (!rc) fp4s_decomp_merge_totals(d, res);
        if (res) free(res->ch);
        free(res);
    }
    ops->close(&g.ds);
done:
    *read_failed = g.read_failed;
    if (rc) {
        fp4s_decomp_close(&d);
        return rc;
    }
    *out = d;
    return 0;
}

/* The driver: rows [row0, row0 + nrows) of the source (nrows SIZE_MAX: to
 * the end). amax_in: the tensor amax to use (NULL: take it over these rows);
 * amax_out: only take the amax over these rows, decompose nothing. */
static int source_rows(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                       size_t nrows, const float *amax_in, float *amax_out, fp4s_decomp **out,
                       const fp4s_cu_ds_ops *force)
{
    if (out) *out = NULL;
    if (!out && !amax_out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    if (!s || !spec_str) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    int rc = fp4s_decomp_spec_check(s);
    if (rc) return rc;
    fp4s_decomp_opts def;
    o = fp4s_decomp_opts_or_default(o, &def);
    fp4s_source *src = NULL;
    rc = fp4s_source_open(spec_str, &src);
    if (rc) return rc;
    struct reader rd;
    memset(&rd, 0, sizeof rd);
    rd.src = src;
    rd.spec_str = spec_str;
    rd.rows = fp4s_source_rows(src);
    rd.cols = fp4s_source_cols(src);
    rd.row0 = row0 < rd.rows ? row0 : rd.rows;
    rd.row_end = nrows > rd.rows - rd.row0 ? rd.rows : rd.row0 + nrows;
    fp4s_decomp *d = NULL;
    if (rd.rows == 0 || rd.cols == 0) {
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: empty tensor [%zu, %zu]", spec_str, rd.rows, rd.cols);
        goto done;
    }
    if (rd.cols % s->block) {
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: %zu columns is not a multiple of the block size %u (pad first)",
                            spec_str, rd.cols, s->block);
        goto done;
    }
    size_t align = fp4s_spec_row_align(s);
    if (align == 0) align = 1;
    if ((rd.row0 % align) || (rd.row_end != rd.rows && rd.row_end % align)) {
        rc = fp4s_error_set(FP4S_EINVAL, "%s: rows [%zu, %zu) do not start and end on multiples of %zu rows",
                            spec_str, rd.row0, rd.row_end, align);
        goto done;
    }
    fp4s_device dev = FP4S_DEVICE_CPU;
    if (!force) rc = fp4s_device_resolve(s, o->device, &dev);
    if (rc) goto done;
    if (!amax_out && (force || dev == FP4S_DEVICE_CUDA)) {
        bool read_failed = false;
        rc = gpu_rows(&rd, s, o, amax_in, force ? force : &fp4s_cu_ds_gpu, &d, &read_failed);
        if (rc && !read_failed) fp4s_error_prefix("%s", spec_str);
        goto done;
    }
    size_t ce = o->chunk_elems ? o->chunk_elems : ((size_t)1 << 21);
    rd.chunk = ce / rd.cols;
    rd.chunk -= rd.chunk % align;
    if (rd.chunk < align) rd.chunk = align;
    if (rd.chunk > rd.row_end - rd.row0) rd.chunk = rd.row_end - rd.row0 ? rd.row_end - rd.row0 : 1;
    rd.par = fp4s_get_threads() >= 4 && raw_source(&rd);
    rd.buf[0] = malloc(rd.chunk * rd.cols * sizeof(float));
    rd.buf[1] = malloc(rd.chunk * rd.cols * sizeof(float));
    if (!rd.buf[0] || !rd.buf[1]) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory for chunks of %zu rows", spec_str, rd.chunk);
        goto done;
    }
    fp4s_tscale ts;
    memset(&ts, 0, sizeof ts);
    float amax = 0.0f;
    if (amax_in) {
        amax = *amax_in;
    } else if (s->format == FP4S_NVFP4 || amax_out) {
        /* a first pass for the tensor amax */
        void *ctx[3] = {&rd, &amax, (void *)s};
        if (!amax_out) keep_alloc(&rd, keep_resolve(&rd, o->keep_bytes)); /* a second pass follows */
        bool done = false;
        rc = keep_read(&rd, s, &amax, &done);
        if (!rc) rc = each_chunk(&rd, done ? rd.keep_end : rd.row0, spec_str, chunk_amax, ctx, 0, 2);
        if (rc) goto done;
        rd.kept = true;
    }
    if (amax_out) {
        *amax_out = amax;
        goto done;
    }
    rc = fp4s_tscale_init(s, amax, &ts);
    if (rc) goto done;
    rc = fp4s_decomp_open(s, &ts, o, rd.rows, rd.cols, &d);
    if (rc) goto done;
    rc = each_chunk(&rd, rd.row0, spec_str, chunk_add, d, s->format == FP4S_NVFP4, 1 + (s->format == FP4S_NVFP4));
done:
    for (int w = 0; w < MAX_WORKERS; w++) fp4s_source_close(&rd.wsrc[w]);
    free(rd.keep);
    free(rd.buf[0]);
    free(rd.buf[1]);
    fp4s_source_close(&src);
    if (rc) {
        fp4s_decomp_close(&d);
        return rc;
    }
    if (out) *out = d;
    return 0;
}

int fp4s_decomp_source(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str,
                       fp4s_decomp **out)
{
    return source_rows(s, o, spec_str, 0, SIZE_MAX, NULL, NULL, out, NULL);
}

int fp4s_decomp_source_rows(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                            size_t nrows, const float *amax, fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    return source_rows(s, o, spec_str, row0, nrows, amax, NULL, out, NULL);
}

int fp4s_decomp_source_via(const fp4s_cu_ds_ops *ops, const fp4s_spec *s, const fp4s_decomp_opts *o,
                           const char *spec_str, size_t row0, size_t nrows, const float *amax, fp4s_decomp **out)
{
    if (!out || !ops) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    return source_rows(s, o, spec_str, row0, nrows, amax, NULL, out, ops);
}

int fp4s_decomp_source_amax(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                            size_t nrows, float *amax)
{
    if (!amax) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    return source_rows(s, o, spec_str, row0, nrows, NULL, amax, NULL, NULL);
}
