/* The streaming driver of the decomposition (fp4s_decomp_source): one pass
 * (two for NVFP4: the tensor amax first) over a source in chunks of rows,
 * double-buffered, the next chunk read on a thread while this one is
 * decomposed. */
#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"

struct reader {
    fp4s_source *src;
    size_t rows, cols, chunk;
    size_t row0, row_end; /* the rows read: [row0, row_end) */
    float *buf[2];
    size_t next_row;  /* first row of the chunk being read */
    int rc;
    char err[1024];
};

static int read_chunk(struct reader *rd, int slot, size_t row0)
{
    size_t n = rd->row_end - row0 < rd->chunk ? rd->row_end - row0 : rd->chunk;
    int rc = fp4s_source_read(rd->src, row0, n, rd->buf[slot], rd->cols);
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
 * the next chunk read on a thread meanwhile (in this thread when none can be
 * started). Returns fn's error with the detail prefixed by spec_str, or the
 * reader's error with its detail. */
static int each_chunk(struct reader *rd, const char *spec_str,
                      int (*fn)(void *ctx, const float *x, size_t n, size_t row0), void *ctx, int pass,
                      int npasses)
{
    if (rd->row0 >= rd->row_end) return 0;
    if (read_chunk(rd, 0, rd->row0)) return fp4s_error_set(rd->rc, "%s", rd->err);
    int slot = 0;
    for (size_t r0 = rd->row0; r0 < rd->row_end; r0 += rd->chunk) {
        size_t n = rd->row_end - r0 < rd->chunk ? rd->row_end - r0 : rd->chunk;
        size_t nx = r0 + n;
        pthread_t th;
        struct read_arg ra = {rd, 1 - slot, nx};
        bool threaded = false;
        if (nx < rd->row_end) {
            threaded = pthread_create(&th, NULL, read_thread, &ra) == 0;
            if (!threaded) read_chunk(rd, 1 - slot, nx);
        }
        int rc = fn(ctx, rd->buf[slot], n, r0);
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
    float a = s->rht ? fp4s_spec_amax(s, x, n, rd->cols, rd->cols, NULL) : fp4s_amax(x, n, rd->cols, rd->cols, NULL);
    if (a > *amax) *amax = a;
    return 0;
}

static int chunk_add(void *ctx, const float *x, size_t n, size_t row0)
{
    fp4s_decomp *d = ctx;
    return fp4s_decomp_add(d, x, n, d->cols, row0);
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
        rc = each_chunk(&rd, spec_str, chunk_amax, ctx, 0, 2);
        if (rc) goto done;
    }
    if (amax_out) {
        *amax_out = amax;
        goto done;
    }
    rc = fp4s_tscale_init(s, amax, &ts);
    if (rc) goto done;
    rc = fp4s_decomp_open(s, &ts, o, rd.rows, rd.cols, &d);
    if (rc) goto done;
    rc = each_chunk(&rd, spec_str, chunk_add, d, s->format == FP4S_NVFP4, 1 + (s->format == FP4S_NVFP4));
done:
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
