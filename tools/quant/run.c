/* fp4-quant: one quantizer run over a chunk, and the two streamed passes over
 * the input (the tensor amax, then the quantization). */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool is_fp4(const fp4s_spec *s) { return s->format != FP4S_FP8; }

size_t fp8_tile_rows(const fp4s_spec *s, size_t rows)
{
    if (s->fp8_gran == FP4S_FP8_TENSOR) return rows;
    return s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
}

bool row_scaled(const fp4s_spec *s) { return s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW; }

void row_scales_seen(run_t *r, size_t n)
{
    for (size_t i = 0; r->rsc && i < n; i++) {
        float v = r->rsc[i];
        if (v != v) r->rs_nan = true;
        else if (!r->rs_any) r->rs_min = r->rs_max = v, r->rs_any = true;
        else {
            if (v < r->rs_min) r->rs_min = v;
            if (v > r->rs_max) r->rs_max = v;
        }
    }
}

static void run_alloc(run_t *r, size_t chunk, size_t rows, size_t pcols, bool need_deq)
{
    r->codes = xcalloc(chunk, pcols);
    if (row_scaled(&r->spec)) {
        r->rsc = xcalloc(chunk, sizeof(float));
        r->ram = xcalloc(chunk, sizeof(float));
    }
    if (is_fp4(&r->spec)) {
        r->scale_cols = fp4s_spec_blocks_per_row(&r->spec, pcols);
        r->scales = xcalloc(chunk, r->scale_cols);
    } else if (r->spec.fp8_gran == FP4S_FP8_TENSOR) {
        r->scale_cols = 1;
        r->sf_rows_chunk = 1;
        r->sf32 = xcalloc(1, sizeof(float));
    } else {
        r->scale_cols = fp4s_spec_blocks_per_row(&r->spec, pcols);
        size_t tr = fp8_tile_rows(&r->spec, rows);
        r->sf_rows_chunk = (chunk + tr - 1) / tr;
        r->sf32 = xcalloc(r->sf_rows_chunk * r->scale_cols, sizeof(float));
    }
    if (need_deq) r->deq = xcalloc(chunk * pcols, sizeof(float));
}

static void run_free(run_t *r)
{
    free(r->rsc);
    free(r->ram);
    free(r->codes);
    free(r->scales);
    free(r->sf32);
    free(r->deq);
}

/* the finite amax of a chunk, of its rows after the RHT for a spec that has it;
 * nonfinite (when not NULL) counts the input's NaN and Inf */
static float chunk_amax(const fp4s_spec *s, const float *x, size_t n, size_t cols, uint64_t *nonfinite)
{
    if (!s->rht) return fp4s_amax(x, n, cols, cols, nonfinite);
    fp4s_spec f = *s;
    f.tensor_amax = FP4S_TAMAX_FINITE;
    return fp4s_spec_amax(&f, x, n, cols, cols, nonfinite);
}

static int run_chunk(run_t *r, const float *x, size_t n, size_t pcols, size_t row0)
{
    if (r->cuda) /* codes, scale bytes, dequantized values and statistics, bit for bit */
        return fp4s_cuda_quantize_host_all(&r->spec, &r->ts, x, n, pcols, pcols, false, r->codes, r->scales,
                                           r->deq, &r->st);
    fp4s_qout o = {0};
    o.codes = r->codes;
    o.ld_codes = pcols;
    if (r->scales) {
        o.scales = r->scales;
        o.ld_scales = r->scale_cols;
    }
    if (r->sf32) {
        o.scale_f32 = r->sf32;
        o.ld_scale_f32 = r->scale_cols;
    }
    if (r->deq) {
        o.dequant = r->deq;
        o.ld_dequant = pcols;
    }
    o.row_scale = r->rsc; /* row-scaled: each row's own tensor scale (NULL otherwise) */
    o.row_amax = r->ram;
    int rc = fp4s_quantize(&r->spec, &r->ts, x, n, pcols, pcols, row0, &o, &r->st);
    if (!rc) row_scales_seen(r, n);
    return rc;
}

bool needs_amax(const fp4s_spec *s)
{
    return s->format == FP4S_NVFP4 || (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR);
}


/* The blocks whose scale an element shares (rows x cols of a tile); 0 rows:
 * one scale for the whole tensor. */
static void tile_dims(const fp4s_spec *s, size_t *tr, size_t *tc)
{
    if (s->format == FP4S_FP8) {
        *tr = s->fp8_gran == FP4S_FP8_TENSOR ? 0 : fp8_tile_rows(s, 0);
        *tc = 128;
    } else if (s->format == FP4S_NVFP4 && s->tile2d) {
        *tr = *tc = 16;
    } else {
        *tr = 1;
        *tc = s->block;
    }
}

/* Can a finite input of this chunk dequantize to Inf or NaN? Every quantizer
 * keeps |Q(x)| within a small factor of its block's amax (at most 2x for the
 * rules that round the scale up, 1.2x for an E4M3 scale, far below 2^8), so
 * only a chunk with a scale of 2^120 or more can overflow: an E8M0 code of at
 * least 127 + 120, a tensor amax (NVFP4, FP8 per tensor) or an FP8 tile scale
 * that large. Reading the scales is cheap; the dequantized values are then
 * computed for those chunks only. */
static bool may_overflow(const run_t *r, const job *j, size_t n)
{
    const float big = 0x1p120f;
    if (r->spec.format == FP4S_MXFP4) {
        size_t nb = (j->cols + r->spec.block - 1) / r->spec.block;
        for (size_t i = 0; i < n; i++)
            for (size_t b = 0; b < nb; b++)
                if (r->scales[i * r->scale_cols + b] >= 127 + 120) return true;
        return false;
    }
    if (needs_amax(&r->spec)) return r->ts.amax >= big;
    size_t tr = fp8_tile_rows(&r->spec, n);
    size_t ns = (n + tr - 1) / tr * r->scale_cols;
    for (size_t i = 0; i < ns; i++)
        if (!(r->sf32[i] < big / 448)) return true;
    return false;
}

/* overflow_to_inf of one chunk: finite inputs whose dequantized value is Inf or
 * NaN, in tiles that hold no NaN or Inf input (those follow the NaN/Inf
 * policy instead). Chunks start on tile rows (fp4s_spec_row_align). */
static void count_overflow(run_t *r, job *j, const float *x, size_t n, size_t row0)
{
    if (!may_overflow(r, j, n)) return;
    const float *d = r->deq;
    if (!d) {
        /* the dequantized values of this chunk alone, without its statistics again */
        if (!j->deq_scratch) j->deq_scratch = xcalloc(j->chunk * j->pcols, sizeof(float));
        fp4s_qout o = {0};
        o.dequant = j->deq_scratch;
        o.ld_dequant = j->pcols;
        int rc = fp4s_quantize(&r->spec, &r->ts, x, n, j->pcols, j->pcols, row0, &o, NULL);
        if (rc) job_fail(j, rc);
        d = j->deq_scratch;
    }
    size_t tr, tc;
    tile_dims(&r->spec, &tr, &tc);
    if (tr == 0) {
        if (j->amax_nonfinite) return; /* the tensor's one scale saw NaN/Inf */
        tr = n;
        tc = j->pcols;
    }
    size_t ld = j->pcols;
    for (size_t i0 = 0; i0 < n; i0 += tr) {
        size_t i1 = i0 + tr < n ? i0 + tr : n;
        for (size_t c0 = 0; c0 < j->pcols; c0 += tc) {
            size_t c1 = c0 + tc < j->pcols ? c0 + tc : j->pcols;
            bool clean = true;
            for (size_t i = i0; i < i1 && clean; i++)
                for (size_t c = c0; c < c1; c++)
                    if (!isfinite(x[i * ld + c])) {
                        clean = false;
                        break;
                    }
            if (!clean) continue;
            size_t ce = c1 < j->cols ? c1 : j->cols; /* padding columns are not the input's */
            for (size_t i = i0; i < i1; i++)
                for (size_t c = c0; c < ce; c++) r->overflow_to_inf += !isfinite(d[i * ld + c]);
        }
    }
}

/* ---- the chunk pipeline ----------------------------------------------------------------
 * Reading chunk i+1 (a thread), quantizing chunk i (the library's threads)
 * and writing chunk i-1 (a thread) overlap, so that with enough threads the
 * run takes about as long as its slowest stage instead of the sum of the
 * three (bench/RESULTS-H200.md). The writes keep their order: one write at a
 * time, joined before the next. A stage's error keeps its detail
 * (fp4s_last_error is per thread). HDF5 is called from one thread at a time:
 * a read of an HDF5 source and a write of the HDF5 output (-o) take the same
 * lock (.npy and .safetensors reads, .npy writes and the quantizer run beside
 * anything). */
static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

static void *stage_main(void *arg)
{
    stage *st = arg;
    if (st->h5) pthread_mutex_lock(&h5_lock);
    st->rc = st->fn(st);
    if (st->h5) pthread_mutex_unlock(&h5_lock);
    if (st->rc) snprintf(st->err, sizeof st->err, "%s", fp4s_last_error());
    return NULL;
}

/* Run st->fn on a thread (in this thread if none can be started). */
static void stage_start(stage *st)
{
    st->rc = 0;
    st->live = pthread_create(&st->th, NULL, stage_main, st) == 0;
    if (!st->live) stage_main(st);
}

static int stage_wait(stage *st)
{
    if (st->live) pthread_join(st->th, NULL);
    st->live = false;
    if (st->rc) {
        int rc = st->rc;
        st->rc = 0;
        return fp4s_error_set(rc, "%s", st->err);
    }
    return 0;
}

static int read_fn(stage *st) { return fp4s_source_read(st->j->src, st->r0, st->n, st->buf, st->j->pcols); }

/* ---- the workers read ------------------------------------------------------------------
 * With 2 or more threads, an FP4 quantizer on the CPU and a .npy or
 * .safetensors input, there is no reader thread: each piece of a chunk is
 * read by the worker that quantizes it, through a source of its own (pread at
 * independent offsets), while it is hot in that core's cache. One thread
 * copying from the page cache was the pipeline's limit (bench/RESULTS-H200.md,
 * CPU scaling); the workers together copy faster. The same bytes and
 * statistics: codes, scales and dequantized values are per element, and the
 * statistics' sums are exact (fp4s_qstats_merge) in any split. */
/* elements a worker reads and quantizes at once: 128 KiB of float32, 32 pieces of a default chunk */
#define FUSE_PIECE_ELEMS (1u << 15)

typedef struct fused {
    job *j;
    float *x;
    size_t r0, n, align;
    fp4s_source *src[FP4S_MAX_THREADS];
    fp4s_qstats part[FP4S_MAX_THREADS];
} fused;

static bool workers_read(const job *j)
{
    return !j->r1.cuda && !j->rd.h5 && is_fp4(&j->r1.spec) && fp4s_get_threads() >= 2;
}

static int fused_piece(void *arg, size_t ub, size_t ue, int w)
{
    fused *f = arg;
    job *j = f->j;
    run_t *r = &j->r1;
    size_t a = ub * f->align, b = ue * f->align;
    if (b > f->n) b = f->n;
    if (a >= b) return 0;
    int rc = 0;
    if (!f->src[w]) rc = fp4s_source_open(j->input, &f->src[w]);
    if (!rc) rc = fp4s_source_read(f->src[w], f->r0 + a, b - a, f->x + a * j->pcols, j->pcols);
    if (rc) return rc;
    fp4s_qout o = {0};
    o.codes = r->codes + a * j->pcols;
    o.ld_codes = j->pcols;
    if (r->scales) {
        o.scales = r->scales + a * r->scale_cols;
        o.ld_scales = r->scale_cols;
    }
    if (r->deq) {
        o.dequant = r->deq + a * j->pcols;
        o.ld_dequant = j->pcols;
    }
    if (r->rsc) o.row_scale = r->rsc + a;
    if (r->ram) o.row_amax = r->ram + a;
    return fp4s_quantize(&r->spec, &r->ts, f->x + a * j->pcols, b - a, j->pcols, j->pcols, f->r0 + a, &o, &f->part[w]);
}

/* Read and quantize (r1) the chunk of n rows at r0 into x on the workers. */
static int fused_chunk(fused *f, float *x, size_t r0, size_t n)
{
    job *j = f->j;
    int nt = fp4s_get_threads();
    if (nt > FP4S_MAX_THREADS) nt = FP4S_MAX_THREADS;
    f->x = x;
    f->r0 = r0;
    f->n = n;
    size_t units = (n + f->align - 1) / f->align;
    size_t per = FUSE_PIECE_ELEMS / (j->pcols * f->align);
    memset(f->part, 0, (size_t)nt * sizeof f->part[0]);
    int rc = fp4s_parallel_dynamic(units, per ? per : 1, nt, fused_piece, f);
    if (!rc)
        for (int w = 0; w < nt; w++) fp4s_qstats_merge(&j->r1.st, &f->part[w]);
    if (!rc) row_scales_seen(&j->r1, n);
    return rc;
}
static int write_fn(stage *st) { return outputs_write(st->j, st->r0, st->n, st->b); }

/* Start reading the chunk at r0 into buffer k (nothing past the end). */
static void read_next(job *j, size_t r0, int k)
{
    if (r0 >= j->rows) return;
    j->rd.buf = j->xb[k];
    j->rd.r0 = r0;
    j->rd.n = j->rows - r0 < j->chunk ? j->rows - r0 : j->chunk;
    stage_start(&j->rd);
}

void job_open(job *j)
{
    cli_progress_begin(j->input);
    j->passes = 1;
    int rc = fp4s_source_open(j->input, &j->src);
    if (rc) job_fail(j, rc);
    j->rows = fp4s_source_rows(j->src);
    j->cols = fp4s_source_cols(j->src);
    j->rank = fp4s_source_rank(j->src);
    fp4s_source_shape(j->src, j->dims, FP4S_MAX_RANK);
    j->in_dt = fp4s_source_dtype(j->src);
    const fp4s_spec *s1 = &j->r1.spec;
    size_t blk = s1->block;
    j->pcols = j->cols;
    /* -o with split packing groups 32 elements per 16 bytes: pad to that */
    size_t pad_to = (j->out_h5 && s1->packing == FP4S_PACK_SPLIT && blk < 32) ? 32 : blk;
    if (j->rank == 1) snprintf(j->shape, sizeof j->shape, "(%zu,)", j->cols);
    else snprintf(j->shape, sizeof j->shape, "(%zu, %zu)", j->rows, j->cols);
    for (int d = 0; j->rank >= 3 && d < j->rank; d++) {
        size_t l = strlen(j->shape);
        snprintf(j->shape + l, sizeof j->shape - l, "%s%llu%s", d ? ", " : " from (", (unsigned long long)j->dims[d],
                 d + 1 < j->rank ? "" : ")");
    }
    if (j->cols % blk && !j->pad)
        cli_die(FP4S_EXIT_INPUT, "%s: shape %s: last dimension %zu is not a multiple of the %s block size %zu "
                "(use --pad to zero-pad it to %zu)", j->input, j->shape, j->cols, fp4s_format_name(s1->format),
                blk, (j->cols + blk - 1) / blk * blk);
    if (j->pad) j->pcols = (j->cols + pad_to - 1) / pad_to * pad_to;
    if (j->pcols % pad_to)
        cli_die(FP4S_EXIT_INPUT, "%s: shape %s: -o with split nibble packing needs a last dimension that is a "
                "multiple of 32, not %zu (use --packing pairs, or --pad to zero-pad it to %zu)", j->input, j->shape,
                j->cols, (j->cols + 31) / 32 * 32);

    /* chunking: whole tiles of both quantizers */
    size_t align = fp4s_spec_row_align(s1);
    if (j->diff) {
        size_t a2 = fp4s_spec_row_align(&j->r2.spec);
        if (a2 > align) align = a2;
        if (align % a2) align *= a2;
    }
    /* about 1M elements a chunk; on the GPU 16M (fewer copies and launches) */
    size_t chunk = j->chunk_rows ? (size_t)j->chunk_rows : ((size_t)1 << (j->r1.cuda ? 24 : 20)) / j->pcols;
    if (chunk < 1) chunk = 1;
    chunk = (chunk + align - 1) / align * align;
    if (chunk > j->rows) chunk = j->rows;
    j->chunk = chunk;
    /* two input buffers: one read while the other is quantized */
    j->xb[0] = xcalloc(chunk, j->pcols * sizeof(float));
    j->xb[1] = xcalloc(chunk, j->pcols * sizeof(float));
    j->rd = (stage){.fn = read_fn, .j = j, .h5 = !cli_ends_with(j->input, ".npy") && !strstr(j->input, ".safetensors")};

    /* pass 1: amax (each spec's own: after the RHT for a spec that has it) */
    float amax = 0.0f, amax2 = 0.0f;
    if (needs_amax(s1) || (j->diff && needs_amax(&j->r2.spec))) {
        read_next(j, 0, 0);
        for (size_t r0 = 0, k = 0; r0 < j->rows; r0 += chunk, k ^= 1) {
            size_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;
            if ((rc = stage_wait(&j->rd))) job_fail(j, rc);
            read_next(j, r0 + n, (int)(k ^ 1));
            amax = fmaxf(amax, chunk_amax(s1, j->xb[k], n, j->pcols, &j->amax_nonfinite));
            if (j->diff) amax2 = fmaxf(amax2, chunk_amax(&j->r2.spec, j->xb[k], n, j->pcols, NULL));
            cli_progress(r0 + n, 2 * (uint64_t)j->rows);
        }
        j->passes = 2;
    }
    rc = fp4s_tscale_init(s1, amax, &j->r1.ts);
    if (!rc && j->diff) rc = fp4s_tscale_init(&j->r2.spec, amax2, &j->r2.ts);
    if (rc) job_fail(j, rc);

    run_alloc(&j->r1, chunk, j->rows, j->pcols, j->diff || j->dequant);
    if (j->diff) run_alloc(&j->r2, chunk, j->rows, j->pcols, true);
    if (j->diff) diff_init(&j->da, j->da.show);
    /* the second bank of -p's outputs */
    const run_t *r1 = &j->r1;
    j->banks[0] = (bank){r1->codes, r1->scales, r1->sf32, r1->deq, r1->rsc, r1->ram};
    if (r1->rsc) j->banks[1].rsc = xcalloc(chunk, sizeof(float));
    if (r1->ram) j->banks[1].ram = xcalloc(chunk, sizeof(float));
    j->banks[1].codes = xcalloc(chunk, j->pcols);
    if (r1->scales) j->banks[1].scales = xcalloc(chunk, r1->scale_cols);
    if (r1->sf32) j->banks[1].sf32 = xcalloc(r1->sf_rows_chunk * r1->scale_cols, sizeof(float));
    if (r1->deq) j->banks[1].deq = xcalloc(chunk * j->pcols, sizeof(float));
}

static void fused_free(job *j);

/* r1's buffers are bank k's for the next chunk */
static void use_bank(job *j, int k)
{
    j->r1.codes = j->banks[k].codes;
    j->r1.scales = j->banks[k].scales;
    j->r1.sf32 = j->banks[k].sf32;
    j->r1.deq = j->banks[k].deq;
    j->r1.rsc = j->banks[k].rsc;
    j->r1.ram = j->banks[k].ram;
}

void job_quantize(job *j)
{
    int rc;
    j->wr = (stage){.fn = write_fn, .j = j, .h5 = j->qf != NULL};
    /* no writer thread for a run without outputs (the summary alone) */
    const bool writes = j->qf || j->wc || j->ws || j->wd || j->wr_rs;
    fused *f = NULL;
    if (workers_read(j)) {
        f = xcalloc(1, sizeof *f);
        f->j = j;
        f->align = fp4s_spec_row_align(&j->r1.spec);
        if (f->align == 0) f->align = 1;
        j->fused = f;
    } else {
        read_next(j, 0, 0);
    }
    for (size_t r0 = 0, k = 0; r0 < j->rows; r0 += j->chunk, k ^= 1) {
        size_t n = j->rows - r0 < j->chunk ? j->rows - r0 : j->chunk;
        const float *x = j->xb[k];
        if (f) {
            use_bank(j, (int)k);
            if ((rc = fused_chunk(f, j->xb[k], r0, n))) job_fail(j, rc);
        } else {
            if ((rc = stage_wait(&j->rd))) job_fail(j, rc);
            read_next(j, r0 + n, (int)(k ^ 1));
            use_bank(j, (int)k);
            if ((rc = run_chunk(&j->r1, x, n, j->pcols, r0))) job_fail(j, rc);
        }
        count_overflow(&j->r1, j, x, n, r0);
        if (j->diff) {
            if ((rc = run_chunk(&j->r2, x, n, j->pcols, r0))) job_fail(j, rc);
            count_overflow(&j->r2, j, x, n, r0);
            diff_chunk(&j->da, &j->r1, &j->r2, x, n, j->pcols, j->cols, r0);
        }
        if ((rc = stage_wait(&j->wr))) job_fail(j, rc); /* the previous chunk's write */
        j->wr.b = &j->banks[k];
        j->wr.r0 = r0;
        j->wr.n = n;
        if (writes) stage_start(&j->wr);
        cli_progress((uint64_t)(j->passes - 1) * j->rows + r0 + n, (uint64_t)j->passes * j->rows);
    }
    if ((rc = stage_wait(&j->wr))) job_fail(j, rc);
    use_bank(j, 0);
    cli_progress_end();
    fp4s_source_close(&j->src);
    fused_free(j);
}

static void fused_free(job *j)
{
    fused *f = j->fused;
    if (!f) return;
    for (int w = 0; w < FP4S_MAX_THREADS; w++) fp4s_source_close(&f->src[w]);
    free(f);
    j->fused = NULL;
}

void job_free(job *j)
{
    /* a stage still running ends first; then r1 owns bank 0 again */
    stage_wait(&j->rd);
    stage_wait(&j->wr);
    use_bank(j, 0);
    fp4s_source_close(&j->src);
    fused_free(j);
    for (int k = 0; k < 2; k++) {
        free(j->xb[k]);
        j->xb[k] = NULL;
    }
    free(j->banks[1].codes);
    free(j->banks[1].scales);
    free(j->banks[1].sf32);
    free(j->banks[1].deq);
    free(j->banks[1].rsc);
    free(j->banks[1].ram);
    memset(&j->banks[1], 0, sizeof j->banks[1]);
    free(j->deq_scratch);
    j->deq_scratch = NULL;
    free(j->crop8);
    free(j->cropf);
    j->crop8 = NULL;
    j->cropf = NULL;
    diff_free(&j->da);
    run_free(&j->r1);
    run_free(&j->r2);
    memset(&j->banks[0], 0, sizeof j->banks[0]);
    use_bank(j, 0);
    memset(&j->r2, 0, sizeof j->r2);
}

void job_fail(job *j, int rc)
{
    int st = cli_report(rc);
    stage_wait(&j->rd); /* before the outputs and buffers go */
    stage_wait(&j->wr);
    outputs_abort(j);
    job_free(j);
    exit(st);
}
