/* The decomposer of <fp4scope/decompose.h>: open, blocks and rows (the
 * per-block path and the fused row path of the element kernels,
 * kernels/cpu/decomp_kernels.h), groups, worker threads, merge and the
 * results. The result side (names, field table, exact accumulators) is in
 * decomp_result.c, the streaming driver in reader.c. */
#include <fp4scope/decompose.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"
#include "cuda/decomp_cu.h"

int fp4s_decomp_spec_check(const fp4s_spec *s)
{
    if (s->format != FP4S_MXFP4 && s->format != FP4S_NVFP4)
        return fp4s_error_set(FP4S_ENOTSUP, "decomposition: format %s not supported (MXFP4 and NVFP4 only)",
                              fp4s_format_name(s->format));
    if (s->block == 0 || s->block > 256 || s->block % 8)
        return fp4s_error_set(FP4S_EINVAL, "decomposition: block size %u unsupported (a multiple of 8 up to 256)",
                              s->block);
    /* the effective scale of a scale code is one table for the tensor (one tensor scale) */
    if (s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW)
        return fp4s_error_set(FP4S_ENOTSUP, "decomposition: row-scaled NVFP4 (one tensor scale per row) is not "
                              "decomposed yet: take the profile's per-tensor recipe");
    return 0;
}

static double block_scale(const fp4s_decomp *d, uint8_t code, bool *uf);

int fp4s_decomp_open(const fp4s_spec *s, const fp4s_tscale *ts, const fp4s_decomp_opts *o,
                     size_t rows, size_t cols, fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    *out = NULL;
    if (!s) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL spec");
    int rc = fp4s_decomp_spec_check(s);
    if (rc) return rc;
    fp4s_decomp_opts def;
    o = fp4s_decomp_opts_or_default(o, &def);
    if (cols % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "decomposition: %zu columns is not a multiple of the block size %u",
                              cols, s->block);
    /* rows = 0 with channel groups: a channel roll-up (merges only, of any rows) */
    const bool ch_rollup = rows == 0 && cols != 0 && o->by == FP4S_GROUP_CHANNEL;
    if (!ch_rollup && ((rows == 0) != (cols == 0) || (rows == 0 && o->by != FP4S_GROUP_TENSOR)))
        return fp4s_error_set(FP4S_EEMPTY, "decomposition: empty tensor [%zu, %zu]", rows, cols);
    fp4s_device dev = FP4S_DEVICE_CPU;
    rc = fp4s_device_resolve(s, o->device, &dev);
    if (rc) return rc;
    fp4s_decomp *d = calloc(1, sizeof *d);
    if (!d) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory");
    d->cuda = dev == FP4S_DEVICE_CUDA;
    d->rollup = ch_rollup;
    d->spec = *s;
    if (ts) d->ts = *ts;
    else {
        d->ts.s_enc = d->ts.s_dec = d->ts.stored = d->ts.fp8_scale = 1.0f;
    }
    d->opts = *o;
    d->rows = rows;
    d->cols = cols;
    d->nblk = cols / s->block;
    fp4s_xacc_init(&d->tot);
    size_t ng = 0;
    switch (o->by) {
    case FP4S_GROUP_TENSOR: ng = 0; break;
    case FP4S_GROUP_ROW: ng = rows; break;
    case FP4S_GROUP_BLOCK: ng = rows * d->nblk; break;
    case FP4S_GROUP_CHANNEL: ng = cols; break;
    default:
        free(d);
        return fp4s_error_set(FP4S_EINVAL, "decomposition: unknown grouping %d", (int)o->by);
    }
    if ((o->by == FP4S_GROUP_ROW || o->by == FP4S_GROUP_BLOCK) && ng > o->max_groups) {
        free(d);
        return fp4s_error_set(FP4S_ERANGE,
                              "decomposition: %zu %s groups exceed the limit of %zu (use a coarser grouping)",
                              ng, fp4s_group_name(o->by), o->max_groups);
    }
    d->ngroups = ng;
    for (int k = 0; k < 7; k++) {
        switch (d->spec.tie) {
        case FP4S_TIE_ZERO: d->tie_up[k] = false; break;
        case FP4S_TIE_AWAY: d->tie_up[k] = true; break;
        case FP4S_TIE_EVEN:
        default: d->tie_up[k] = (k & 1) != 0; break;
        }
    }
    if (o->dz_tie == FP4S_DZ_TIE_IN) d->tie_up[0] = false;
    else if (o->dz_tie == FP4S_DZ_TIE_OUT) d->tie_up[0] = true;
    for (int c = 0; c < 256; c++) {
        bool u = false;
        d->seff[c] = block_scale(d, (uint8_t)c, &u);
        d->uf[c] = u;
    }
    fp4s_decomp_kernels_init(&d->k);
    d->dks = (fp4s_dk_spec){.bs = s->block, .nb = d->nblk, .seff = d->seff, .uf = d->uf, .tie_up = d->tie_up};
    if (o->by == FP4S_GROUP_ROW || o->by == FP4S_GROUP_BLOCK) {
        d->unit = calloc(ng ? ng : 1, sizeof *d->unit);
        d->filled = calloc(ng ? ng : 1, 1);
        if (!d->unit || !d->filled) goto nomem;
    } else if (o->by == FP4S_GROUP_CHANNEL) {
        d->ch = calloc(ng ? ng : 1, sizeof *d->ch);
        if (!d->ch) goto nomem;
    }
    *out = d;
    return 0;
nomem:
    fp4s_decomp_close(&d);
    return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory for %zu groups", ng);
}

void fp4s_decomp_close(fp4s_decomp **dp)
{
    if (!dp || !*dp) return;
    fp4s_decomp *d = *dp;
    for (int w = 0; w < MAX_WORKERS; w++) {
        if (d->wk[w]) {
            free(d->wk[w]->ch);
            free(d->wk[w]->kb);
            free(d->wk[w]->bins);
            free(d->wk[w]->q);
            free(d->wk[w]->codes);
            free(d->wk[w]->scales);
        }
        free(d->wk[w]);
    }
    free(d->unit);
    free(d->filled);
    free(d->ch);
    free(d);
    *dp = NULL;
}

fp4s_group fp4s_decomp_by(const fp4s_decomp *d) { return d->opts.by; }
size_t fp4s_decomp_rows(const fp4s_decomp *d) { return d->rows; }
size_t fp4s_decomp_cols(const fp4s_decomp *d) { return d->cols; }
const fp4s_spec *fp4s_decomp_spec(const fp4s_decomp *d) { return &d->spec; }
size_t fp4s_decomp_ngroups(const fp4s_decomp *d) { return d ? d->ngroups : 0; }

/* The real block scale (including the NVFP4 tensor decode scale) and whether
 * it underflows. */
static double block_scale(const fp4s_decomp *d, uint8_t code, bool *uf)
{
    double sc = (double)fp4s_scale_decode(&d->spec, code);
    if (d->spec.format == FP4S_NVFP4) {
        *uf = (code & 0x78) == 0;
        sc *= (double)d->ts.s_dec;
    } else {
        *uf = code == 0;
    }
    return sc;
}

/* ---- the per-block path ---------------------------------------------------------------- */
/* Decompose one block of bs elements. ch (channel mode) points at the
 * accumulators of the block's first column. */
static void decomp_block(const fp4s_decomp *d, const float *x, const float *q,
                         const uint8_t *codes, uint8_t scode, part *p, lanes *ln, chacc *ch,
                         uint64_t *hd, uint64_t *he)
{
    const size_t bs = d->spec.block;
    /* block amax and non-finite tests on the bit patterns: for |x| the
     * unsigned order of the bits is the order of the values, and a pattern
     * at or above 0x7f800000 is Inf or NaN (a vectorizable integer max) */
    uint32_t mx = 0, mq = 0;
    for (size_t i = 0; i < bs; i++) {
        uint32_t bx, bq;
        memcpy(&bx, &x[i], sizeof bx);
        memcpy(&bq, &q[i], sizeof bq);
        bx &= 0x7fffffffu;
        bq &= 0x7fffffffu;
        mx = bx > mx ? bx : mx;
        mq = bq > mq ? bq : mq;
    }
    const bool nf = mx >= 0x7f800000u, nfo = mq >= 0x7f800000u;
    float m;
    memcpy(&m, &mx, sizeof m);
    if (nf || nfo) {
        if (nf) p->c[C_NFB]++;
        else p->c[C_NFOUT]++;
        for (size_t i = 0; i < bs; i++) {
            int k = isnan(x[i]) ? C_NAN : (isinf(x[i]) ? C_INF : C_EXCL);
            p->c[k]++;
            if (ch) ch[i].c[k]++;
        }
        return;
    }
    kconst kc;
    const int hb = fp4s_dk_block_stats(d->seff, d->uf, d->tie_up, m, scode, p, &kc);
    if (hb >= 0) hd[hb]++;
    int32_t bins[256];
    d->k.block(x, q, codes, bs, &kc, ln, bins);
    p->c[C_ELEM] += bs;
    if (m != 0.0f)
        for (size_t i = 0; i < bs; i++) he[bins[i]]++;
    if (!ch) return;
    /* channel groups: the same per-element terms, added exactly per column */
    for (size_t i = 0; i < bs; i++) fp4s_chacc_add_elem(&ch[i], &kc, d->tie_up, x[i], q[i], codes[i]);
}

/* ---- fused row path ------------------------------------------------------------------ */
static uint64_t fused_rows;

uint64_t fp4s_decomp_fused_rows(void) { return __atomic_load_n(&fused_rows, __ATOMIC_RELAXED); }

bool fp4s_decomp_fused_available(void)
{
    fp4s_decomp_kernels k;
    fp4s_decomp_kernels_init(&k);
    return k.row != NULL;
}

/* One row through the fused path; false if it must take the per-block path. */
static bool row_fast(const fp4s_decomp *d, worker *wk, const float *x, const float *q, const uint8_t *codes,
                     const uint8_t *sc, part *rowp)
{
    if (!d->k.row) return false;
    lanes ln;
    memset(&ln, 0, sizeof ln);
    if (!d->k.row(&d->dks, x, q, codes, sc, wk->kb, rowp, wk->hd, &ln, wk->bins)) return false;
    const size_t bs = d->spec.block, nb = d->nblk;
    fp4s_lanes_reduce(&ln, rowp);
    __atomic_fetch_add(&fused_rows, 1, __ATOMIC_RELAXED);
    /* error histogram of the blocks with m > 0, two copies alternating */
    uint64_t *h0 = wk->he4[0], *h1 = wk->he4[1], *h2 = wk->he4[2], *h3 = wk->he4[3];
    const int32_t *bi = wk->bins;
    for (size_t b = 0; b < nb; b++) {
        int64_t mpi;
        memcpy(&mpi, &wk->kb[b * KB_N + KB_MPOS], sizeof mpi);
        if (!mpi) continue;
        const int32_t *bb = bi + b * bs;
        for (size_t i = 0; i < bs; i += 8) {
            h0[bb[i]]++;
            h1[bb[i + 1]]++;
            h2[bb[i + 2]]++;
            h3[bb[i + 3]]++;
            h0[bb[i + 4]]++;
            h1[bb[i + 5]]++;
            h2[bb[i + 6]]++;
            h3[bb[i + 7]]++;
        }
    }
    return true;
}

/* ---- adding rows --------------------------------------------------------------------- */
/* Rows [0, nrows) of the given buffers, global rows grow0 + r, into worker wk. */
static int process_rows(fp4s_decomp *d, worker *wk, const float *x, size_t ld, const float *q, size_t ldq,
                        const uint8_t *codes, size_t ldc, const uint8_t *scales, size_t lds, size_t nrows,
                        size_t grow0)
{
    const size_t bs = d->spec.block;
    if (wk->ch) {
        /* channel groups: block columns outside, rows inside, so that the 32
         * (or 16) channels' exact accumulators stay in cache. Each row's
         * partial still receives its blocks in order b = 0, 1, ...: the
         * totals are the same as row by row. */
        part *rp = malloc(nrows * sizeof *rp);
        lanes *ln = malloc(nrows * sizeof *ln);
        if (!rp || !ln) {
            free(rp);
            free(ln);
            return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory for %zu rows", nrows);
        }
        for (size_t r = 0; r < nrows; r++) {
            fp4s_part_init(&rp[r]);
            memset(&ln[r], 0, sizeof ln[r]);
        }
        for (size_t b = 0; b < d->nblk; b++) {
            const size_t c0 = b * bs;
            for (size_t r = 0; r < nrows; r++)
                decomp_block(d, x + r * ld + c0, q + r * ldq + c0, codes + r * ldc + c0, scales[r * lds + b], &rp[r],
                             &ln[r], wk->ch + c0, wk->hd, wk->he);
        }
        for (size_t r = 0; r < nrows; r++) {
            fp4s_lanes_reduce(&ln[r], &rp[r]);
            fp4s_xacc_add_part(&wk->tot, &rp[r]);
        }
        free(rp);
        free(ln);
        wk->used = 1;
        return 0;
    }
    for (size_t r = 0; r < nrows; r++) {
        const size_t grow = grow0 + r;
        /* a row is never split between chunks or workers: its plain partial
         * (blocks summed in order) is the same however the tensor is cut, and
         * it is added exactly to the totals */
        part rowp;
        fp4s_part_init(&rowp);
        const float *xr = x + r * ld, *qr = q + r * ldq;
        const uint8_t *cr = codes + r * ldc, *sr = scales + r * lds;
        if (d->opts.by != FP4S_GROUP_BLOCK && row_fast(d, wk, xr, qr, cr, sr, &rowp)) {
            fp4s_xacc_add_part(&wk->tot, &rowp);
            if (d->opts.by == FP4S_GROUP_ROW) {
                fp4s_part_finish(&rowp, &d->unit[grow]);
                d->filled[grow] = 1;
            }
            continue;
        }
        lanes ln;
        memset(&ln, 0, sizeof ln);
        for (size_t b = 0; b < d->nblk; b++) {
            size_t c0 = b * bs;
            const float *xb = xr + c0, *qb = qr + c0;
            const uint8_t *cb = cr + c0, sc = sr[b];
            if (d->opts.by != FP4S_GROUP_BLOCK) {
                decomp_block(d, xb, qb, cb, sc, &rowp, &ln, NULL, wk->hd, wk->he);
                continue;
            }
            part p;
            fp4s_part_init(&p);
            decomp_block(d, xb, qb, cb, sc, &p, &ln, NULL, wk->hd, wk->he);
            fp4s_lanes_reduce(&ln, &p);
            fp4s_part_add(&rowp, &p);
            {
                size_t gi = grow * d->nblk + b;
                fp4s_part_finish(&p, &d->unit[gi]);
                d->filled[gi] = 1;
            }
        }
        if (d->opts.by != FP4S_GROUP_BLOCK) fp4s_lanes_reduce(&ln, &rowp);
        fp4s_xacc_add_part(&wk->tot, &rowp);
        if (d->opts.by == FP4S_GROUP_ROW) {
            fp4s_part_finish(&rowp, &d->unit[grow]);
            d->filled[grow] = 1;
        }
    }
    wk->used = 1;
    return 0;
}

struct add_job {
    fp4s_decomp *d;
    const float *x;
    size_t ld;
    const float *q; /* NULL: quantize here, piece by piece */
    size_t ldq;
    const uint8_t *codes;
    size_t ldc;
    const uint8_t *scales;
    size_t lds;
    size_t row0;
    size_t align; /* rows per work item */
    size_t nrows;
};

static int add_rows(void *arg, size_t begin, size_t end, int w)
{
    struct add_job *j = arg;
    fp4s_decomp *d = j->d;
    worker *wk = d->wk[w];
    int rc = 0;
    size_t r0 = begin * j->align, r1 = end * j->align;
    if (r1 > j->nrows) r1 = j->nrows;
    if (j->q) {
        rc = process_rows(d, wk, j->x + r0 * j->ld, j->ld, j->q + r0 * j->ldq, j->ldq, j->codes + r0 * j->ldc,
                          j->ldc, j->scales + r0 * j->lds, j->lds, r1 - r0, j->row0 + r0);
    } else {
        /* quantize a piece of rows that stays in cache, then decompose it (the
         * rows are already rotated when the spec has the RHT: fp4s_decomp_add) */
        fp4s_spec qs = d->spec;
        qs.rht = false;
        qs.rht_signs = 0;
        fp4s_qout out;
        memset(&out, 0, sizeof out);
        out.codes = wk->codes;
        out.ld_codes = d->cols;
        out.scales = wk->scales;
        out.ld_scales = d->nblk;
        out.dequant = wk->q;
        out.ld_dequant = d->cols;
        /* NVFP4: the quantizer's count of clamped block scales (decompose.h,
         * "Saturation"); it is counted only with a stats struct, the slower
         * path, so only where a block can clamp: a static input scale (a
         * tensor scale from the tensor's own amax keeps every block scale
         * at or below 448, quant.h) */
        const bool clamps = d->spec.format == FP4S_NVFP4 && d->spec.nv_input_scale > 0;
        for (size_t r = r0; r < r1 && !rc; r += wk->piece_rows) {
            size_t n = r1 - r < wk->piece_rows ? r1 - r : wk->piece_rows;
            const float *xr = j->x + r * j->ld;
            fp4s_qstats st;
            memset(&st, 0, sizeof st);
            rc = fp4s_quantize(&qs, &d->ts, xr, n, d->cols, j->ld, j->row0 + r, &out, clamps ? &st : NULL);
            if (!rc)
                rc = process_rows(d, wk, xr, j->ld, wk->q, d->cols, wk->codes, d->cols, wk->scales, d->nblk, n,
                                  j->row0 + r);
            wk->tot.c[C_CLAMP] += st.scale_clamped;
        }
    }
    return rc; /* fp4s_parallel_dynamic carries this thread's detail back */
}

/* Piece of rows quantized at a time by fp4s_decomp_add: about 2^14 elements
 * (x, dequantized values and codes of a piece stay in L2), whole tiles. */
static size_t piece_rows(const fp4s_decomp *d)
{
    size_t align = fp4s_spec_row_align(&d->spec);
    if (align == 0) align = 1;
    size_t p = d->cols ? ((size_t)1 << 14) / d->cols : 1;
    if (p < 1) p = 1;
    p = (p + align - 1) / align * align;
    return p;
}

static int ensure_workers(fp4s_decomp *d, int nt, bool quantize)
{
    if (nt > MAX_WORKERS) nt = MAX_WORKERS;
    for (int w = 0; w < nt; w++) {
        if (!d->wk[w]) {
            d->wk[w] = calloc(1, sizeof *d->wk[w]);
            if (!d->wk[w]) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory");
            worker *wk = d->wk[w];
            fp4s_xacc_init(&wk->tot);
            if (d->opts.by == FP4S_GROUP_CHANNEL) {
                wk->ch = calloc(d->cols, sizeof(chacc));
                if (!wk->ch) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory");
            }
            wk->kb = malloc((size_t)(KB_N + 2) * (d->nblk ? d->nblk : 1) * sizeof(double));
            wk->bins = malloc((d->cols ? d->cols : 1) * sizeof(int32_t));
            if (!wk->kb || !wk->bins) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory");
        }
        worker *wk = d->wk[w];
        if (quantize && !wk->q) {
            size_t pr = piece_rows(d), n = pr * d->cols;
            wk->q = malloc(n * sizeof(float));
            wk->codes = malloc(n);
            wk->scales = malloc(pr * (d->nblk ? d->nblk : 1));
            if (!wk->q || !wk->codes || !wk->scales)
                return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory for %zu rows", pr);
            wk->piece_rows = pr;
        }
    }
    return nt;
}

/* Fold the workers' partial accumulators into the totals and clear them. */
static void fold_workers(fp4s_decomp *d)
{
    for (int w = 0; w < MAX_WORKERS; w++) {
        worker *wk = d->wk[w];
        if (!wk || !wk->used) continue;
        fp4s_xacc_merge(&d->tot, &wk->tot);
        fp4s_xacc_init(&wk->tot);
        for (int i = 0; i < FP4S_HIST_BINS; i++) {
            d->hd[i] += wk->hd[i];
            d->he[i] += wk->he[i] + wk->he4[0][i] + wk->he4[1][i] + wk->he4[2][i] + wk->he4[3][i];
        }
        memset(wk->hd, 0, sizeof wk->hd);
        memset(wk->he, 0, sizeof wk->he);
        memset(wk->he4, 0, sizeof wk->he4);
        if (wk->ch) {
            for (size_t c = 0; c < d->cols; c++) fp4s_chacc_merge(&d->ch[c], &wk->ch[c]);
            memset(wk->ch, 0, d->cols * sizeof(chacc));
        }
        wk->used = 0;
    }
}

int fp4s_decomp_check_rows(const fp4s_decomp *d, size_t row0, size_t nrows)
{
    if (d->rollup)
        return fp4s_error_set(FP4S_EINVAL, "decomposition: a channel roll-up takes merges, not rows");
    if (row0 > d->rows || nrows > d->rows - row0)
        return fp4s_error_set(FP4S_ERANGE, "decomposition: rows [%zu, %zu) outside the tensor's %zu rows",
                              row0, row0 + nrows, d->rows);
    if (d->unit) {
        size_t g0 = d->opts.by == FP4S_GROUP_ROW ? row0 : row0 * d->nblk;
        size_t g1 = d->opts.by == FP4S_GROUP_ROW ? row0 + nrows : (row0 + nrows) * d->nblk;
        for (size_t g = g0; g < g1; g++)
            if (d->filled[g])
                return fp4s_error_set(FP4S_EDUP, "decomposition: row %zu added twice",
                                      d->opts.by == FP4S_GROUP_ROW ? g : g / d->nblk);
    }
    return 0;
}

static int add_common(fp4s_decomp *d, struct add_job *j)
{
    const size_t nrows = j->nrows, row0 = j->row0;
    int rc0 = fp4s_decomp_check_rows(d, row0, nrows);
    if (rc0) return rc0;
    int nt = fp4s_get_threads();
    size_t align = j->align;
    size_t units = (nrows + align - 1) / align;
    size_t grain = d->cols ? ((size_t)1 << 16) / (d->cols * align) + 1 : 1;
    if (d->opts.by == FP4S_GROUP_CHANNEL && nrows < 64 * (size_t)nt) nt = 1; /* merging costs more */
    nt = ensure_workers(d, nt, j->q == NULL);
    if (nt < 0) return nt;
    int rc = 0;
    if ((size_t)nt > units) nt = (int)units;
    if (nt <= 1 || units < 2 || units < grain) {
        rc = add_rows(j, 0, units, 0);
    } else {
        /* dynamic schedule: each worker takes the next piece of rows until
         * none is left, so that a core taken by the reader thread (or by
         * anything else) does not hold the others up. The results do not
         * depend on which worker adds which row: rows are added exactly to
         * the totals, row and block groups are stored by index, histograms
         * are integer counts. */
        size_t pu = j->q ? 16 : (d->wk[0]->piece_rows + align - 1) / align;
        rc = fp4s_parallel_dynamic(units, pu ? pu : 1, nt, add_rows, j);
    }
    fold_workers(d);
    return rc;
}

int fp4s_decomp_add_quantized(fp4s_decomp *d, const float *x, size_t ld, const float *q, size_t ldq,
                              const uint8_t *codes, size_t ldc, const uint8_t *scales, size_t lds,
                              size_t nrows, size_t row0)
{
    if (!d || (nrows && (!x || !q || !codes || !scales)))
        return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    if (nrows == 0) return 0;
    if (ld < d->cols || ldq < d->cols || ldc < d->cols || lds < d->nblk)
        return fp4s_error_set(FP4S_EINVAL, "decomposition: leading dimension smaller than the row");
    struct add_job j = {d, x, ld, q, ldq, codes, ldc, scales, lds, row0, 1, nrows};
    return add_common(d, &j);
}

int fp4s_decomp_add(fp4s_decomp *d, const float *x, size_t nrows, size_t ld, size_t row0)
{
    if (!d || (nrows && !x)) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    if (nrows == 0) return 0;
    if (ld < d->cols) return fp4s_error_set(FP4S_EINVAL, "decomposition: row stride %zu < %zu columns", ld, d->cols);
    if (d->cuda) return fp4s_decomp_add_via(d, fp4s_cu_decomp, FP4S_DT_F32, x, true, nrows, ld, row0, NULL);
    size_t align = fp4s_spec_row_align(&d->spec);
    if (align == 0) align = 1;
    if (d->spec.rht) {
        /* the decomposition of the rotated rows (what the quantizer sees) */
        float *rot = malloc(nrows * d->cols * sizeof *rot);
        if (!rot) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory for the RHT");
        int rc = fp4s_rht_apply(&d->spec, x, nrows, d->cols, ld, rot, d->cols);
        if (!rc) {
            struct add_job j = {d, rot, d->cols, NULL, 0, NULL, 0, NULL, 0, row0, align, nrows};
            rc = add_common(d, &j);
        }
        free(rot);
        return rc;
    }
    struct add_job j = {d, x, ld, NULL, 0, NULL, 0, NULL, 0, row0, align, nrows};
    return add_common(d, &j);
}

static bool same_spec(const fp4s_spec *a, const fp4s_spec *b)
{
    return a->format == b->format && a->block == b->block && a->tie == b->tie &&
           a->mx_rule == b->mx_rule && a->nv_recipe == b->nv_recipe && a->tile2d == b->tile2d &&
           a->global_scale == b->global_scale && a->nonfinite == b->nonfinite &&
           a->mx_scale_is_ggml == b->mx_scale_is_ggml && a->mx_zero_block_code == b->mx_zero_block_code &&
           a->rht == b->rht && a->rht_signs == b->rht_signs && a->sr == b->sr && a->sr_seed == b->sr_seed &&
           a->nv_4over6_err == b->nv_4over6_err && a->nv_scale_bound == b->nv_scale_bound;
}

int fp4s_decomp_merge(fp4s_decomp *into, const fp4s_decomp *from)
{
    if (!into || !from) return fp4s_error_set(FP4S_EINVAL, "decomposition merge: NULL argument");
    if (!same_spec(&into->spec, &from->spec))
        return fp4s_error_set(FP4S_EINVAL, "decomposition merge: different quantizer specs");
    if (into->opts.dz_tie != from->opts.dz_tie)
        return fp4s_error_set(FP4S_EINVAL, "decomposition merge: different dead-zone tie conventions");
    bool groups = into->opts.by != FP4S_GROUP_TENSOR;
    if (groups && (into->opts.by != from->opts.by || (!into->rollup && into->rows != from->rows) ||
                   into->cols != from->cols))
        return fp4s_error_set(FP4S_ESHAPE, "decomposition merge: groups of different shape or kind");
    if (into->rollup && into->rows > SIZE_MAX - from->rows)
        return fp4s_error_set(FP4S_ERANGE, "decomposition merge: the roll-up's row count overflows");
    if (groups && into->unit) {
        for (size_t g = 0; g < into->ngroups; g++)
            if (into->filled[g] && from->filled[g])
                return fp4s_error_set(FP4S_EDUP, "decomposition merge: %s group %zu present in both",
                                      fp4s_group_name(into->opts.by), g);
        for (size_t g = 0; g < into->ngroups; g++)
            if (from->filled[g]) {
                into->unit[g] = from->unit[g];
                into->filled[g] = 1;
            }
    } else if (groups && into->ch) {
        for (size_t c = 0; c < into->cols; c++) fp4s_chacc_merge(&into->ch[c], &from->ch[c]);
    }
    fp4s_xacc_merge(&into->tot, &from->tot);
    if (into->rollup) into->rows += from->rows; /* the rows (tokens) the roll-up holds */
    for (int i = 0; i < FP4S_HIST_BINS; i++) {
        into->hd[i] += from->hd[i];
        into->he[i] += from->he[i];
    }
    return 0;
}

int fp4s_decomp_summary(const fp4s_decomp *d, fp4s_decomp_result *r)
{
    if (!d || !r) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    fp4s_xacc_finish(&d->tot, r);
    return 0;
}

int fp4s_decomp_group(const fp4s_decomp *d, size_t i, fp4s_decomp_result *r)
{
    if (!d || !r) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    if (i >= d->ngroups)
        return fp4s_error_set(FP4S_ERANGE, "decomposition: group %zu of %zu", i, d->ngroups);
    if (d->unit) {
        if (d->filled[i]) *r = d->unit[i];
        else {
            part p;
            fp4s_part_init(&p);
            fp4s_part_finish(&p, r);
        }
    } else {
        fp4s_chacc_finish(&d->ch[i], r);
    }
    return 0;
}

int fp4s_decomp_hist_get(const fp4s_decomp *d, fp4s_decomp_hist_kind k, fp4s_decomp_hist *h)
{
    if (!d || !h) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    memset(h, 0, sizeof *h);
    if (k == FP4S_HIST_DELTA) {
        h->lo = HD_LO;
        h->hi = HD_HI;
        memcpy(h->counts, d->hd, sizeof h->counts);
    } else if (k == FP4S_HIST_ERROR) {
        h->lo = HE_LO;
        h->hi = HE_HI;
        memcpy(h->counts, d->he, sizeof h->counts);
    } else {
        return fp4s_error_set(FP4S_EINVAL, "decomposition: unknown histogram %d", (int)k);
    }
    return 0;
}
