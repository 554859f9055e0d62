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
    const fp4s_spec *amax_spec;
    float amax[MAX_WORKERS];
};

static int par_piece(void *arg, size_t b, size_t e, int w)
{
    struct par_job *j = arg;
    struct reader *rd = j->rd;
    int rc = 0;
    if (!rd->wsrc[w]) rc = fp4s_source_open(rd->spec_str, &rd->wsrc[w]);
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

/* The driver: rows [row0, row0 + nrows) of the source (nrows SIZE_MAX: to
 * the end). amax_in: the tensor amax to use (NULL: take it over these rows);
 * amax_out: only take the amax over these rows, decompose nothing. */
static int source_rows(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                       size_t nrows, const float *amax_in, float *amax_out, fp4s_decomp **out)
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
    rc = fp4s_device_resolve(s, o->device, &dev);
    if (rc) goto done;
    /* the GPU takes larger chunks (fewer transfers and launches) */
    size_t ce = o->chunk_elems ? o->chunk_elems : ((size_t)1 << (dev == FP4S_DEVICE_CUDA ? 26 : 21));
    rd.chunk = ce / rd.cols;
    rd.chunk -= rd.chunk % align;
    if (rd.chunk < align) rd.chunk = align;
    if (rd.chunk > rd.row_end - rd.row0) rd.chunk = rd.row_end - rd.row0 ? rd.row_end - rd.row0 : 1;
    rd.par = dev == FP4S_DEVICE_CPU && fp4s_get_threads() >= 4 && raw_source(&rd);
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
    return source_rows(s, o, spec_str, 0, SIZE_MAX, NULL, NULL, out);
}

int fp4s_decomp_source_rows(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                            size_t nrows, const float *amax, fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    return source_rows(s, o, spec_str, row0, nrows, amax, NULL, out);
}

int fp4s_decomp_source_amax(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str, size_t row0,
                            size_t nrows, float *amax)
{
    if (!amax) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    return source_rows(s, o, spec_str, row0, nrows, NULL, amax, NULL);
}
