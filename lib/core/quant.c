/* Quantizer front end: argument checks, the tensor scale, threads.
 *
 * fp4s_quantize / fp4s_dequantize / fp4s_amax split the rows of a chunk into
 * pieces of whole tiles (fp4s_spec_row_align()) of about PIECE_ELEMS elements
 * and run them on fp4s_parallel_dynamic: each worker takes the next piece
 * until none is left, so that a core also running the caller's reader or
 * writer thread (or anything else) does not hold the others up, as a static
 * split of the chunk did. Each piece calls the active kernel table and falls
 * back to the scalar reference when the backend declines the spec
 * (FP4S_ENOTSUP). Which worker takes which piece varies, which changes no
 * result: codes, scales and dequantized values are per element, the stats'
 * counters are integers and err2/x2 come from exact sums (fp4s_qstats_add),
 * and the amax is a maximum: identical for any thread count and schedule.
 * A NULL stats pointer is passed down to the kernels: they then compute codes
 * only (no err2/x2 sums, no counters), with the same output bytes. */
#include <fp4scope/quant.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "base/approx.h"
#include "base/codec_internal.h"

/* Elements per piece of the dynamic schedule, and at least this many
 * elements per worker (a smaller call runs on fewer threads, one below it). */
#define PIECE_ELEMS (1u << 14)

/* rht.c: the amax of the rows after the RHT */
float fp4s_rht_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite);
#define GRAIN_ELEMS (1u << 16)

/* Run fn over `units` work items of `unit_elems` elements each on the dynamic
 * schedule: pieces of about PIECE_ELEMS, a worker for every GRAIN_ELEMS. */
static int run_pieces(size_t units, size_t unit_elems, fp4s_range_fn fn, void *arg)
{
    if (unit_elems == 0) unit_elems = 1;
    size_t piece = PIECE_ELEMS / unit_elems;
    if (piece == 0) piece = 1;
    size_t total = units > SIZE_MAX / unit_elems ? SIZE_MAX : units * unit_elems;
    size_t nt = (size_t)fp4s_get_threads(), by_size = total / GRAIN_ELEMS;
    if (nt > by_size) nt = by_size ? by_size : 1;
    return fp4s_parallel_dynamic(units, piece, (int)nt, fn, arg);
}

void fp4s_qstats_merge(fp4s_qstats *into, const fp4s_qstats *from)
{
    if (into && from) fp4s_qstats_add(into, from);
}

/* ---- amax ------------------------------------------------------------------- */

struct amax_job {
    const float *x;
    size_t cols, ld;
    float *part;
    uint64_t *nf;
};

static int amax_range(void *arg, size_t b, size_t e, int w)
{
    struct amax_job *j = arg;
    const fp4s_kernel_table *k = fp4s_kernels_active();
    fp4s_amax_fn fn = k->amax ? k->amax : fp4s_kernels_ref.amax;
    uint64_t nf = 0;
    j->part[w] = fmaxf(j->part[w], fn(j->x + b * j->ld, e - b, j->cols, j->ld, &nf));
    j->nf[w] += nf;
    return 0;
}

float fp4s_amax(const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite)
{
    if (!x || rows == 0 || cols == 0) return 0.0f;
    if (ld < cols) ld = cols;
    float part[FP4S_MAX_THREADS];
    uint64_t nf[FP4S_MAX_THREADS];
    memset(part, 0, sizeof part);
    memset(nf, 0, sizeof nf);
    struct amax_job j = {x, cols, ld, part, nf};
    run_pieces(rows, cols, amax_range, &j);
    float m = 0.0f;
    uint64_t n = 0;
    for (int w = 0; w < FP4S_MAX_THREADS; w++) {
        m = fmaxf(m, part[w]);
        n += nf[w];
    }
    if (nonfinite) *nonfinite += n;
    return m;
}


float fp4s_spec_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                     uint64_t *nonfinite)
{
    uint64_t nf = 0;
    float m = s && s->rht ? fp4s_rht_amax(s, x, rows, cols, ld, &nf) : fp4s_amax(x, rows, cols, ld, &nf);
    if (nonfinite) *nonfinite += nf;
    if (!s || s->format != FP4S_NVFP4 || s->tensor_amax == FP4S_TAMAX_FINITE || nf == 0) return m;
    /* some value is NaN or Inf (rare): the engine's max sees it (NONAN: Inf only) */
    if (ld < cols) ld = cols;
    bool inf = false;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float a = fabsf(x[r * ld + c]);
            if (a != a && s->tensor_amax == FP4S_TAMAX_ALL) return NAN;
            if (a == INFINITY) inf = true;
        }
    return inf ? INFINITY : m;
}

float fp4s_amax_merge(float a, float b)
{
    if (a != a || b != b) return NAN;
    return a > b ? a : b;
}

/* ---- tensor scale ------------------------------------------------------------- */

int fp4s_tscale_init(const fp4s_spec *s, float amax, fp4s_tscale *ts)
{
    if (!s || !ts) return fp4s_error_set(FP4S_EINVAL, "tensor scale: missing spec or output");
    const bool all = s->format == FP4S_NVFP4 && s->tensor_amax != FP4S_TAMAX_FINITE;
    if (!all && (!(amax >= 0.0f) || isinf(amax)))
        return fp4s_error_set(FP4S_EINVAL, "tensor scale: amax %g is not a finite value >= 0",
                              (double)amax);
    if (all && amax < 0.0f)
        return fp4s_error_set(FP4S_EINVAL, "tensor scale: amax %g is negative", (double)amax);
    memset(ts, 0, sizeof *ts);
    ts->amax = amax;
    ts->s_enc = 1.0f;
    ts->s_dec = 1.0f;
    ts->stored = 1.0f;
    ts->fp8_scale = 1.0f;
    if (s->format == FP4S_NVFP4) {
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        if (!rt) return fp4s_error_set(FP4S_EINVAL, "tensor scale: unknown NVFP4 recipe %d", (int)s->nv_recipe);
        const float bound6 = 6.0f * (float)fp4s_spec_scale_bound(s); /* 6 B: 2688, or 1536 for a 4over6 bound 256 */
        if (s->nv_input_scale > 0.0f && rt->tscale != FP4S_NV_TS_NONE) {
            /* a static global scale (a checkpoint's input_scale, decode convention):
             * vLLM and SGLang take input_scale_inv = (1 / input_scale) in float32
             * as the kernel's global scale, and input_scale in the GEMM's alpha */
            ts->s_dec = s->nv_input_scale;
            ts->s_enc = 1.0f / s->nv_input_scale;
        } else if (s->nv_tsrule != FP4S_TSR_RECIPE && rt->tscale != FP4S_NV_TS_NONE) {
            switch (s->nv_tsrule) {
            case FP4S_TSR_FLOOR: {
                /* TE PR #3045: S = min(6B / max(amax, 1e-12), FLT_MAX), 1 if 0 (a NaN amax stays NaN) */
                float a = amax < 1e-12f ? 1e-12f : amax;
                double q = (double)bound6 / (double)a;
                float e = q > (double)FLT_MAX ? FLT_MAX : (float)q;
                if (e == 0.0f) e = 1.0f;
                ts->s_enc = e;
                ts->s_dec = 1.0f / e;
                break;
            }
            case FP4S_TSR_RCP: {
                /* FlashInfer per-token, fast math: perTokenScale = rowAmax * globalScaleInv
                 * (globalScaleInv the caller's float 1/(6B)), S = rcp.approx.ftz(perTokenScale) */
                ts->s_dec = amax * (1.0f / bound6);
                ts->s_enc = fp4s_rcp_approx_ftz(ts->s_dec);
                break;
            }
            case FP4S_TSR_DIV:
            case FP4S_TSR_DIV_ZERO: {
                /* FlashInfer per-token, DISABLE_FP4_QUANT_FAST_MATH (div.rn.ftz, fminf):
                 * G = 1 / globalScaleInv; S = rowAmax != 0 ? fminf(G / rowAmax, FLT_MAX) : FLT_MAX,
                 * 0 -> 1; perTokenScale = 1 / S. With 4over6: rowAmax 0 gives S = 0, scale 0 */
                const float G = fp4s_div_ftz(1.0f, 1.0f / bound6);
                if (fp4s_daz(amax) == 0.0f && s->nv_tsrule == FP4S_TSR_DIV_ZERO) {
                    ts->s_enc = ts->s_dec = 0.0f;
                    break;
                }
                float e = FLT_MAX;
                if (fp4s_daz(amax) != 0.0f) {
                    e = fp4s_div_ftz(G, amax);
                    e = e > FLT_MAX ? FLT_MAX : e; /* fminf keeps the number: NaN stays NaN below */
                }
                if (e == 0.0f) e = 1.0f;
                ts->s_enc = e;
                ts->s_dec = fp4s_div_ftz(1.0f, e);
                break;
            }
            case FP4S_TSR_RECIPE:
            case FP4S_TSR_COUNT:
                break;
            }
        } else switch (rt->tscale) {
        case FP4S_NV_TS_ENCODE: {
            /* S_enc = min(6 B / amax, FLT_MAX); 1 if amax == 0 or S_enc == 0, B = 448
             * (2688 = 6 * 448), for te-4over6 the spec's bound (256 by default: 1536).
             * The quotient is formed in double and rounded once to float:
             * that is the float32 quotient exactly (53 >= 2*24 + 2 bits, so
             * the double rounding is innocuous for a division), and no float
             * division overflows to +Inf. Written as fl32(2688/amax) then
             * clamped, gcc 13.3 -O2 returned 1 instead of FLT_MAX when the
             * quotient overflowed (amax below about 1.6e-35): its value-range
             * pass inverted the division that gave +Inf into amax == 0, a
             * compiler bug (no undefined behaviour, no fast-math flags here).
             * Testing amax before dividing leaves it nothing to invert. */
            double num = (double)bound6;
            float e = 1.0f;
            if (amax != 0.0f) {
                double q = num / (double)amax;
                e = q > (double)FLT_MAX ? FLT_MAX : (float)q;
                if (e == 0.0f) e = 1.0f;
            }
            ts->s_enc = e;
            ts->s_dec = 1.0f / e;
            break;
        }
        case FP4S_NV_TS_DECODE:
            /* per_tensor_scale / scale_2 = amax / 2688 (0 for an all-zero
             * tensor: both engines then divide 0 by 0, see quant.h) */
            ts->s_dec = amax / 2688.0f;
            ts->s_enc = 1.0f / ts->s_dec;
            break;
        case FP4S_NV_TS_DECODE_RCP:
            /* the same as PyTorch computes amax / 2688 on CUDA: times the
             * float reciprocal of the Python scalar */
            ts->s_dec = amax * (1.0f / 2688.0f);
            ts->s_enc = 1.0f / ts->s_dec;
            break;
        case FP4S_NV_TS_NONE:
        case FP4S_NV_TS_COUNT:
            break;
        }
        switch (s->global_scale) {
        case FP4S_GS_ENCODE: ts->stored = ts->s_enc; break;
        case FP4S_GS_DECODE: ts->stored = ts->s_dec; break;
        case FP4S_GS_NONE:
        case FP4S_GS_COUNT: ts->stored = 1.0f; break;
        }
    } else if (s->format == FP4S_FP8) {
        ts->fp8_scale = amax > 0.0f ? amax / 448.0f : 1.0f;
        ts->stored = ts->fp8_scale;
    }
    return 0;
}

static bool row_scaled(const fp4s_spec *s) { return s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW; }

struct ramax_job {
    const fp4s_spec *s;
    const float *x;
    size_t cols, ld;
    float *amax;
};

/* One row's amax by the spec's rule, in this thread (no nested workers). */
static float row_amax_one(const fp4s_spec *s, const float *x, size_t cols)
{
    const fp4s_kernel_table *k = fp4s_kernels_active();
    fp4s_amax_fn fn = k->amax ? k->amax : fp4s_kernels_ref.amax;
    uint64_t nf = 0;
    float m;
    if (s->rht) {
        m = fp4s_rht_amax(s, x, 1, cols, cols, NULL);
        nf = 0;
        for (size_t c = 0; c < cols; c++) nf += !isfinite(x[c]);
    } else {
        m = fn(x, 1, cols, cols, &nf);
    }
    if (s->tensor_amax == FP4S_TAMAX_FINITE || nf == 0) return m;
    bool inf = false;
    for (size_t c = 0; c < cols; c++) {
        float a = fabsf(x[c]);
        if (a != a && s->tensor_amax == FP4S_TAMAX_ALL) return NAN;
        if (a == INFINITY) inf = true;
    }
    return inf ? INFINITY : m;
}

static int ramax_range(void *arg, size_t b, size_t e, int w)
{
    (void)w;
    struct ramax_job *j = arg;
    for (size_t r = b; r < e; r++) j->amax[r] = row_amax_one(j->s, j->x + r * j->ld, j->cols);
    return 0;
}

int fp4s_spec_row_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld, float *amax)
{
    if (!s || (!x && rows && cols) || (!amax && rows))
        return fp4s_error_set(FP4S_EINVAL, "row amax: missing spec, input or output");
    if (ld < cols) ld = cols;
    struct ramax_job j = {s, x, cols, ld, amax};
    return run_pieces(rows, cols, ramax_range, &j);
}

int fp4s_tscale_init_rows(const fp4s_spec *s, const float *amax, size_t rows, fp4s_tscale *ts)
{
    if (!s || (rows && (!amax || !ts))) return fp4s_error_set(FP4S_EINVAL, "row tensor scales: missing argument");
    for (size_t r = 0; r < rows; r++) {
        int rc = fp4s_tscale_init(s, amax[r], &ts[r]);
        if (rc) {
            fp4s_error_prefix("row %zu", r);
            return rc;
        }
    }
    return 0;
}

uint8_t fp4s_mx_scale_code(const fp4s_spec *s, float amax)
{
    if (!s) return 0xFF;
    if (amax != amax) return 0xFF;
    if (amax == 0.0f) return s->mx_zero_block_code;
    return (uint8_t)(fp4s_mx_k(s->mx_rule, fabsf(amax), NULL) + 127);
}

/* ---- quantize / dequantize ------------------------------------------------------ */

static bool needs_tscale(const fp4s_spec *s)
{
    if (row_scaled(s)) return false; /* fp4s_quantize makes them; fp4s_dequantize checks itself */
    const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
    return (s->format == FP4S_NVFP4 && rt && rt->tscale != FP4S_NV_TS_NONE) ||
           (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR);
}

static int check_common(const char *what, const fp4s_spec *s, const fp4s_tscale *ts,
                        size_t rows, size_t cols, size_t row0)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "%s: missing spec", what);
    int rc = fp4s_spec_check(s);
    if (rc) { fp4s_error_prefix("%s", what); return rc; }
    if (needs_tscale(s) && !ts)
        return fp4s_error_set(FP4S_EINVAL, "%s: %s needs the tensor scale (fp4s_tscale_init)",
                              what, fp4s_format_name(s->format));
    if (cols % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "%s: %zu columns is not a multiple of the block size %u"
                              " (pad with zeros first)", what, cols, s->block);
    size_t al = fp4s_spec_row_align(s);
    if (row0 % al)
        return fp4s_error_set(FP4S_EINVAL, "%s: chunk starts at row %zu, not a multiple of %zu",
                              what, row0, al);
    (void)rows;
    return 0;
}

struct q_job {
    const fp4s_spec *s;
    const fp4s_tscale *ts;
    const float *x;
    size_t rows, cols, ld, row0, align;
    const fp4s_qout *out;
    fp4s_qstats *parts; /* per worker; NULL: codes only */
};

static int q_range(void *arg, size_t ub, size_t ue, int w)
{
    struct q_job *j = arg;
    size_t r0 = ub * j->align, r1 = ue * j->align;
    if (r1 > j->rows) r1 = j->rows;
    if (r0 >= r1) return 0;
    const fp4s_spec *s = j->s;
    fp4s_qout o = *j->out;
    if (o.codes) o.codes += r0 * o.ld_codes;
    if (o.scales) o.scales += r0 * o.ld_scales;
    if (o.dequant) o.dequant += r0 * o.ld_dequant;
    if (o.scale_f32 && s->format == FP4S_FP8 && s->fp8_gran != FP4S_FP8_TENSOR)
        o.scale_f32 += (s->fp8_gran == FP4S_FP8_1x128 ? r0 : r0 / 128) * o.ld_scale_f32;
    const float *x = j->x + r0 * j->ld;
    fp4s_qstats st;
    memset(&st, 0, sizeof st);
    fp4s_qstats *sp = j->parts ? &st : NULL;
    const fp4s_kernel_table *k = fp4s_kernels_active();
    int rc = 0;
    if (row_scaled(s)) {
        /* each row with its own tensor scale: the kernels see one row at a time
         * (through the same dispatch: a backend that declines the recipe hands
         * that row to the reference) */
        for (size_t r = r0; r < r1 && !rc; r++) {
            fp4s_qout orow = *j->out;
            if (orow.codes) orow.codes += r * orow.ld_codes;
            if (orow.scales) orow.scales += r * orow.ld_scales;
            if (orow.dequant) orow.dequant += r * orow.ld_dequant;
            fp4s_qstats rst;
            memset(&rst, 0, sizeof rst);
            fp4s_qstats *rsp = sp ? &rst : NULL;
            const float *xr = j->x + r * j->ld;
            rc = k->quantize(s, &j->ts[r], xr, 1, j->cols, j->ld, j->row0 + r, &orow, rsp);
            if (rc == FP4S_ENOTSUP && k != &fp4s_kernels_ref) {
                memset(&rst, 0, sizeof rst);
                rc = fp4s_kernels_ref.quantize(s, &j->ts[r], xr, 1, j->cols, j->ld, j->row0 + r, &orow, rsp);
            }
            if (sp) fp4s_qstats_add(&st, &rst);
        }
    } else {
        rc = k->quantize(s, j->ts, x, r1 - r0, j->cols, j->ld, j->row0 + r0, &o, sp);
        if (rc == FP4S_ENOTSUP && k != &fp4s_kernels_ref) {
            memset(&st, 0, sizeof st);
            rc = fp4s_kernels_ref.quantize(s, j->ts, x, r1 - r0, j->cols, j->ld, j->row0 + r0, &o, sp);
        }
    }
    if (j->parts) fp4s_qstats_add(&j->parts[w], &st);
    return rc;
}

/* row_ts: row-scaled specs only, the given tensor scale of each row (NULL:
 * from the rows' own amaxes) */
static int quantize_impl(const fp4s_spec *s, const fp4s_tscale *ts, const fp4s_tscale *row_ts,
                         const float *x, size_t rows, size_t cols, size_t ld,
                         size_t row0, const fp4s_qout *out, fp4s_qstats *st)
{
    if (s && row_scaled(s)) ts = row_ts; /* a single tensor scale means nothing here */
    int rc = check_common("quantize", s, ts, rows, cols, row0);
    if (rc) return rc;
    if (!out || (!out->codes && !out->dequant))
        return fp4s_error_set(FP4S_EINVAL, "quantize: no output (codes or dequant) given");
    if (rows == 0 || cols == 0) return 0;
    if (!x) return fp4s_error_set(FP4S_EINVAL, "quantize: missing input");
    if (ld < cols) return fp4s_error_set(FP4S_EINVAL, "quantize: row stride %zu < %zu columns", ld, cols);
    size_t bpr = fp4s_spec_blocks_per_row(s, cols);
    if (out->codes && out->ld_codes < cols)
        return fp4s_error_set(FP4S_EINVAL, "quantize: codes stride %zu < %zu", out->ld_codes, cols);
    if (out->dequant && out->ld_dequant < cols)
        return fp4s_error_set(FP4S_EINVAL, "quantize: dequant stride %zu < %zu", out->ld_dequant, cols);
    if (s->format != FP4S_FP8 && out->scales && out->ld_scales < bpr)
        return fp4s_error_set(FP4S_EINVAL, "quantize: scales stride %zu < %zu blocks", out->ld_scales, bpr);
    if (s->format == FP4S_FP8 && out->scale_f32 && s->fp8_gran != FP4S_FP8_TENSOR &&
        out->ld_scale_f32 < cols / 128)
        return fp4s_error_set(FP4S_EINVAL, "quantize: scale_f32 stride %zu < %zu tiles",
                              out->ld_scale_f32, cols / 128);

    /* the random Hadamard transform comes first: the kernels see the rotated rows */
    fp4s_spec srot;
    float *rot = NULL;
    if (s->rht) {
        rot = malloc(rows * cols * sizeof *rot);
        if (!rot) return fp4s_error_set(FP4S_ENOMEM, "quantize: out of memory for the RHT");
        if ((rc = fp4s_rht_apply(s, x, rows, cols, ld, rot, cols))) {
            free(rot);
            fp4s_error_prefix("quantize");
            return rc;
        }
        srot = *s;
        srot.rht = false;
        srot.rht_signs = 0;
        s = &srot;
        x = rot;
        ld = cols;
    }
    /* row-scaled: each row's tensor scale from its own amax (of the rotated row) */
    fp4s_tscale *rts = NULL;
    if (row_scaled(s) && !ts) {
        float *ra = out->row_amax ? out->row_amax : malloc(rows * sizeof *ra);
        rts = malloc(rows * sizeof *rts);
        if (!ra || !rts) {
            if (ra != out->row_amax) free(ra);
            free(rts);
            free(rot);
            return fp4s_error_set(FP4S_ENOMEM, "quantize: out of memory for %zu row scales", rows);
        }
        rc = fp4s_spec_row_amax(s, x, rows, cols, ld, ra);
        if (!rc) rc = fp4s_tscale_init_rows(s, ra, rows, rts);
        if (ra != out->row_amax) free(ra);
        if (rc) {
            free(rts);
            free(rot);
            fp4s_error_prefix("quantize");
            return rc;
        }
        ts = rts;
    } else if (row_scaled(s) && out->row_amax) {
        for (size_t r = 0; r < rows; r++) out->row_amax[r] = ts[r].amax;
    }
    if (row_scaled(s) && out->row_scale)
        for (size_t r = 0; r < rows; r++) out->row_scale[r] = ts[r].stored;
    int nt = fp4s_get_threads();
    if (nt > FP4S_MAX_THREADS) nt = FP4S_MAX_THREADS;
    fp4s_qstats *parts = NULL;
    if (st && !(parts = calloc((size_t)nt, sizeof *parts))) {
        free(rts);
        free(rot);
        return fp4s_error_set(FP4S_ENOMEM, "quantize: out of memory");
    }
    size_t align = fp4s_spec_row_align(s);
    if (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR) align = rows; /* one call */
    size_t units = (rows + align - 1) / align;
    struct q_job j = {s, ts, x, rows, cols, ld, row0, align, out, parts};
    rc = run_pieces(units, cols * align, q_range, &j);
    if (rc == 0 && st)
        for (int w = 0; w < nt; w++) fp4s_qstats_merge(st, &parts[w]);
    free(parts);
    free(rts);
    free(rot);
    if (rc) fp4s_error_prefix("quantize");
    return rc;
}

int fp4s_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                  const float *x, size_t rows, size_t cols, size_t ld,
                  size_t row0, const fp4s_qout *out, fp4s_qstats *st)
{
    return quantize_impl(s, ts, NULL, x, rows, cols, ld, row0, out, st);
}

int fp4s_quantize_rows(const fp4s_spec *s, const fp4s_tscale *row_ts,
                       const float *x, size_t rows, size_t cols, size_t ld,
                       size_t row0, const fp4s_qout *out, fp4s_qstats *st)
{
    if (!s || !row_scaled(s))
        return fp4s_error_set(FP4S_EINVAL, "quantize: given row scales need a row-scaled NVFP4 spec");
    if (!row_ts && rows) return fp4s_error_set(FP4S_EINVAL, "quantize: missing row scales");
    return quantize_impl(s, NULL, row_ts, x, rows, cols, ld, row0, out, st);
}

struct dq_job {
    const fp4s_spec *s;
    const fp4s_tscale *ts;
    const uint8_t *codes; size_t ld_codes;
    const uint8_t *scales; size_t ld_scales;
    const float *sf; size_t ld_sf;
    size_t rows, cols, row0, align;
    float *out; size_t ld_out;
};

static int dq_range(void *arg, size_t ub, size_t ue, int w)
{
    (void)w;
    struct dq_job *j = arg;
    size_t r0 = ub * j->align, r1 = ue * j->align;
    if (r1 > j->rows) r1 = j->rows;
    if (r0 >= r1) return 0;
    const fp4s_spec *s = j->s;
    const uint8_t *sc = j->scales ? j->scales + r0 * j->ld_scales : NULL;
    const float *sf = j->sf;
    if (sf && s->format == FP4S_FP8 && s->fp8_gran != FP4S_FP8_TENSOR)
        sf += (s->fp8_gran == FP4S_FP8_1x128 ? r0 : r0 / 128) * j->ld_sf;
    const fp4s_kernel_table *k = fp4s_kernels_active();
    if (row_scaled(s)) {
        /* the reference, one row with its own tensor scale at a time */
        int rc = 0;
        for (size_t r = r0; r < r1 && !rc; r++)
            rc = fp4s_kernels_ref.dequantize(s, &j->ts[r], j->codes + r * j->ld_codes, j->ld_codes,
                                             j->scales + r * j->ld_scales, j->ld_scales, NULL, 0, 1, j->cols,
                                             j->row0 + r, j->out + r * j->ld_out, j->ld_out);
        return rc;
    }
    int rc = k->dequantize(s, j->ts, j->codes + r0 * j->ld_codes, j->ld_codes, sc, j->ld_scales,
                           sf, j->ld_sf, r1 - r0, j->cols, j->row0 + r0,
                           j->out + r0 * j->ld_out, j->ld_out);
    if (rc == FP4S_ENOTSUP && k != &fp4s_kernels_ref)
        rc = fp4s_kernels_ref.dequantize(s, j->ts, j->codes + r0 * j->ld_codes, j->ld_codes, sc,
                                         j->ld_scales, sf, j->ld_sf, r1 - r0, j->cols,
                                         j->row0 + r0, j->out + r0 * j->ld_out, j->ld_out);
    return rc;
}

static int dequantize_impl(const fp4s_spec *s, const fp4s_tscale *ts,
                           const uint8_t *codes, size_t ld_codes,
                           const uint8_t *scales, size_t ld_scales,
                           const float *scale_f32, size_t ld_scale_f32,
                           size_t rows, size_t cols, size_t row0,
                           float *out, size_t ld_out);

int fp4s_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                    const uint8_t *codes, size_t ld_codes,
                    const uint8_t *scales, size_t ld_scales,
                    const float *scale_f32, size_t ld_scale_f32,
                    size_t rows, size_t cols, size_t row0,
                    float *out, size_t ld_out)
{
    if (s && row_scaled(s))
        return fp4s_error_set(FP4S_EINVAL, "dequantize: row-scaled NVFP4 needs the tensor scale of every row "
                              "(fp4s_dequantize_rows)");
    return dequantize_impl(s, ts, codes, ld_codes, scales, ld_scales, scale_f32, ld_scale_f32, rows, cols, row0,
                           out, ld_out);
}

int fp4s_dequantize_rows(const fp4s_spec *s, const fp4s_tscale *row_ts,
                         const uint8_t *codes, size_t ld_codes,
                         const uint8_t *scales, size_t ld_scales,
                         size_t rows, size_t cols, size_t row0,
                         float *out, size_t ld_out)
{
    if (!s || !row_scaled(s))
        return fp4s_error_set(FP4S_EINVAL, "dequantize: row scales need a row-scaled NVFP4 spec");
    if (!row_ts && rows) return fp4s_error_set(FP4S_EINVAL, "dequantize: missing row scales");
    return dequantize_impl(s, row_ts, codes, ld_codes, scales, ld_scales, NULL, 0, rows, cols, row0, out, ld_out);
}

static int dequantize_impl(const fp4s_spec *s, const fp4s_tscale *ts,
                           const uint8_t *codes, size_t ld_codes,
                           const uint8_t *scales, size_t ld_scales,
                           const float *scale_f32, size_t ld_scale_f32,
                           size_t rows, size_t cols, size_t row0,
                           float *out, size_t ld_out)
{
    int rc = check_common("dequantize", s, ts, rows, cols, row0);
    if (rc) return rc;
    if (rows == 0 || cols == 0) return 0;
    if (row_scaled(s) && !ts)
        return fp4s_error_set(FP4S_EINVAL, "dequantize: row-scaled NVFP4 needs the tensor scale of every row "
                              "(fp4s_dequantize_rows)");
    if (!codes || !out) return fp4s_error_set(FP4S_EINVAL, "dequantize: missing codes or output");
    if (ld_codes < cols || ld_out < cols)
        return fp4s_error_set(FP4S_EINVAL, "dequantize: stride smaller than %zu columns", cols);
    if (s->format == FP4S_FP8) {
        if (s->fp8_gran != FP4S_FP8_TENSOR && !scale_f32)
            return fp4s_error_set(FP4S_EINVAL, "dequantize: FP8 tiles need scale_f32");
        if (s->fp8_gran != FP4S_FP8_TENSOR && ld_scale_f32 < cols / 128)
            return fp4s_error_set(FP4S_EINVAL, "dequantize: scale_f32 stride %zu < %zu tiles",
                                  ld_scale_f32, cols / 128);
        if (s->fp8_gran == FP4S_FP8_TENSOR && !scale_f32 && !ts)
            return fp4s_error_set(FP4S_EINVAL, "dequantize: FP8 per tensor needs the scale");
    } else {
        if (!scales) return fp4s_error_set(FP4S_EINVAL, "dequantize: missing scales");
        if (ld_scales < fp4s_spec_blocks_per_row(s, cols))
            return fp4s_error_set(FP4S_EINVAL, "dequantize: scales stride %zu too small", ld_scales);
    }
    size_t align = fp4s_spec_row_align(s);
    size_t units = (rows + align - 1) / align;
    struct dq_job j = {s, ts, codes, ld_codes, scales, ld_scales, scale_f32, ld_scale_f32,
                       rows, cols, row0, align, out, ld_out};
    rc = run_pieces(units, cols * align, dq_range, &j);
    if (rc) fp4s_error_prefix("dequantize");
    return rc;
}
