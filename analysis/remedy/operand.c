/* The operand side of the remedies: the generator, quantize-dequantize, and
 * the keep -> mbs -> quantizer -> of pipeline of remedy.h. */
#include "remedy_internal.h"

#include <fp4scope/codec.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- generator ------------------------------------------------------------------ */
static uint64_t mix(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double fp4s_remedy_uniform(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint64_t key = mix(seed ^ mix(stream + 0x632BE59BD9B4E019ull));
    uint64_t b = mix(key + (i + 1) * 0x9E3779B97F4A7C15ull);
    return ((double)(b >> 11) + 0.5) * 0x1.0p-53;
}

double fp4s_remedy_normal(uint64_t seed, uint64_t stream, uint64_t i)
{
    double u = fp4s_remedy_uniform(seed, stream, 2 * i), v = fp4s_remedy_uniform(seed, stream, 2 * i + 1);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- small helpers ------------------------------------------------------------------ */
size_t rm_ceil_share(double r, size_t k)
{
    double v = r * (double)k;
    double c = ceil(v - 1e-9 * (v > 1 ? v : 1));
    if (c < 1) c = 1;
    if (c > (double)k) c = (double)k;
    return (size_t)c;
}

double rm_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int rm_check_finite(const char *what, const float *x, size_t rows, size_t cols, size_t ld)
{
    for (size_t i = 0; i < rows; i++) {
        const float *p = x + i * ld;
        for (size_t j = 0; j < cols; j++)
            if (!isfinite(p[j]))
                return fp4s_error_set(FP4S_EFORMAT, "%s: element (%zu, %zu) is %s: the remedies need finite inputs",
                                      what, i, j, isnan(p[j]) ? "NaN" : "infinite");
    }
    return 0;
}

double rm_base_bits(const fp4s_spec *s)
{
    switch (s->format) {
    case FP4S_MXFP4: return 4.0 + 8.0 / s->block;
    case FP4S_NVFP4: return 4.0 + 8.0 / s->block;
    default:
        if (s->fp8_gran == FP4S_FP8_1x128) return 8.0 + 32.0 / 128;
        if (s->fp8_gran == FP4S_FP8_128x128) return 8.0 + 32.0 / (128.0 * 128);
        return 8.0;
    }
}

int rm_qdq(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
           const fp4s_tscale *ts_in, float *dq, uint8_t *codes, uint8_t *scales, fp4s_tscale *ts_out)
{
    fp4s_tscale ts;
    int rc;
    if (ts_in) {
        ts = *ts_in;
    } else {
        float a = fp4s_spec_amax(s, x, rows, cols, ld, NULL);
        if ((rc = fp4s_tscale_init(s, a, &ts))) return rc;
    }
    size_t blk = s->format == FP4S_FP8 ? 1 : s->block;
    fp4s_qout o = {.codes = codes, .ld_codes = cols, .scales = scales, .ld_scales = cols / blk, .dequant = dq,
                   .ld_dequant = cols};
    float *f8 = NULL;
    if (s->format == FP4S_FP8 && s->fp8_gran != FP4S_FP8_TENSOR) {
        /* the FP8 tile scales are an output the quantizer wants somewhere */
        size_t tr = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
        size_t n = ((rows + tr - 1) / tr) * ((cols + 127) / 128);
        f8 = malloc((n ? n : 1) * sizeof *f8);
        if (!f8) return fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
        o.scale_f32 = f8;
        o.ld_scale_f32 = (cols + 127) / 128;
        o.scales = NULL;
    }
    rc = fp4s_quantize(s, &ts, x, rows, cols, ld, 0, &o, NULL);
    free(f8);
    if (rc) return rc;
    if (ts_out) *ts_out = ts;
    return 0;
}

/* ---- keep -------------------------------------------------------------------------- */
/* In each block of each row, mark the `keep` entries of largest |x| (ties to
 * the lower index) and zero them in b. */
static void keep_select(const float *x, size_t rows, size_t cols, size_t ld, uint32_t block, uint32_t keep,
                        float *b, uint8_t *mask)
{
    for (size_t i = 0; i < rows; i++) {
        const float *xr = x + i * ld;
        float *br = b + i * cols;
        uint8_t *mr = mask + i * cols;
        for (size_t c0 = 0; c0 < cols; c0 += block) {
            for (uint32_t t = 0; t < keep; t++) {
                size_t best = (size_t)-1;
                float bv = -1.0f;
                for (size_t j = c0; j < c0 + block; j++) {
                    if (mr[j]) continue;
                    float a = fabsf(xr[j]);
                    if (a > bv) {
                        bv = a;
                        best = j;
                    }
                }
                mr[best] = 1;
                br[best] = 0.0f;
            }
        }
    }
}

/* ---- mbs --------------------------------------------------------------------------- */
typedef struct mbs_geom {
    size_t rows, cols, g, rt;   /* unit: rt rows x g columns */
    size_t ucols, urows;        /* units per row group, row groups */
} mbs_geom;

static mbs_geom mbs_geometry(const fp4s_spec *s, size_t rows, size_t cols, uint32_t g)
{
    mbs_geom m;
    m.rows = rows;
    m.cols = cols;
    m.g = g;
    m.rt = s->tile2d ? 16 : 1;
    m.ucols = (cols + g - 1) / g;
    m.urows = (rows + m.rt - 1) / m.rt;
    return m;
}

/* The rows [*r0, *r1) and columns [*c0, *c1) of unit (ur, uc). */
static void mbs_unit(const mbs_geom *m, size_t ur, size_t uc, size_t *r0, size_t *r1, size_t *c0, size_t *c1)
{
    *r0 = ur * m->rt;
    *r1 = *r0 + m->rt < m->rows ? *r0 + m->rt : m->rows;
    *c0 = uc * m->g;
    *c1 = *c0 + m->g < m->cols ? *c0 + m->g : m->cols;
}

/* The max rule's divisor for a unit with maximum a (remedy.h). */
static float mbs_max_divisor(float a)
{
    if (!(a > 0.0f)) return 1.0f;
    int e;
    frexp((double)a / 6.0, &e);          /* a/6 = f 2^e, f in [0.5, 1): k' = e - 1 */
    double t = ldexp(6.0, e - 1);         /* 6 * 2^k' */
    while (t > (double)a) t *= 0.5;       /* guard the rounding of a/6 either way */
    while (t * 2.0 <= (double)a) t *= 2.0;
    long m = (long)ceil(((double)a / t - 1.0) * 256.0);
    if (m < 0) m = 0;
    while (m > 0 && t * (256.0 + (double)(m - 1)) / 256.0 >= (double)a) m--;
    while (m < 256 && t * (256.0 + (double)m) / 256.0 < (double)a) m++;
    if (m >= 256) return 1.0f;            /* 2^(k'+1) * 1: the block rule moves up one binade */
    return (float)(1.0 + (double)m / 256.0);
}

/* One pass of the quantizer with optional mbs on b [rows, cols] (already with
 * keep's zeros): out = Q(b') * d per unit. ts from amax(b) (NVFP4). */
static int mbs_or_plain(const fp4s_remedy *r, const fp4s_spec *s, bool mbs, const float *b, size_t rows,
                        size_t cols, float *out, fp4s_tscale *ts_out, size_t *units)
{
    size_t n = rows * cols;
    fp4s_tscale ts;
    int rc;
    float a = fp4s_spec_amax(s, b, rows, cols, cols, NULL);
    if ((rc = fp4s_tscale_init(s, a, &ts))) return rc;
    if (ts_out) *ts_out = ts;
    if (!mbs) return rm_qdq(s, b, rows, cols, cols, &ts, out, NULL, NULL, NULL);
    mbs_geom gm = mbs_geometry(s, rows, cols, r->mbs_group);
    size_t nu = gm.ucols * gm.urows;
    if (units) *units = nu;
    fp4s_mbs_rule rule = r->mbs_rule;
    if (rule == FP4S_MBS_AUTO) rule = s->format == FP4S_MXFP4 ? FP4S_MBS_MAX : FP4S_MBS_MSE;
    float *xs = malloc(n * sizeof *xs);
    if (!xs) return fp4s_error_set(FP4S_ENOMEM, "remedy mbs: out of memory");
    if (rule == FP4S_MBS_MAX) {
        float *d = malloc(nu * sizeof *d);
        if (!d) {
            free(xs);
            return fp4s_error_set(FP4S_ENOMEM, "remedy mbs: out of memory");
        }
        for (size_t ur = 0; ur < gm.urows; ur++)
            for (size_t uc = 0; uc < gm.ucols; uc++) {
                size_t r0, r1, c0, c1;
                mbs_unit(&gm, ur, uc, &r0, &r1, &c0, &c1);
                float am = 0.0f;
                for (size_t i = r0; i < r1; i++)
                    for (size_t j = c0; j < c1; j++) am = fmaxf(am, fabsf(b[i * cols + j]));
                float dv = mbs_max_divisor(am);
                d[ur * gm.ucols + uc] = dv;
                for (size_t i = r0; i < r1; i++)
                    for (size_t j = c0; j < c1; j++) xs[i * cols + j] = b[i * cols + j] / dv;
            }
        rc = rm_qdq(s, xs, rows, cols, cols, &ts, out, NULL, NULL, NULL);
        if (!rc)
            for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < cols; j++) out[i * cols + j] *= d[(i / gm.rt) * gm.ucols + j / gm.g];
        free(d);
        free(xs);
        return rc;
    }
    /* mse: try j = 0..15, keep each unit's best */
    float *tmp = malloc(n * sizeof *tmp);
    double *best = malloc(nu * sizeof *best);
    if (!tmp || !best) {
        free(xs);
        free(tmp);
        free(best);
        return fp4s_error_set(FP4S_ENOMEM, "remedy mbs: out of memory");
    }
    for (size_t u = 0; u < nu; u++) best[u] = INFINITY;
    for (int jj = 0; jj < 16 && !rc; jj++) {
        float c = (float)exp2(-jj / 16.0), dv = (float)exp2(jj / 16.0);
        for (size_t i = 0; i < n; i++) xs[i] = b[i] * c;
        rc = rm_qdq(s, xs, rows, cols, cols, &ts, tmp, NULL, NULL, NULL);
        if (rc) break;
        for (size_t i = 0; i < n; i++) tmp[i] *= dv;
        for (size_t ur = 0; ur < gm.urows; ur++)
            for (size_t uc = 0; uc < gm.ucols; uc++) {
                size_t r0, r1, c0, c1;
                mbs_unit(&gm, ur, uc, &r0, &r1, &c0, &c1);
                double e = 0.0;
                for (size_t i = r0; i < r1; i++)
                    for (size_t j = c0; j < c1; j++) {
                        double dd = (double)tmp[i * cols + j] - (double)b[i * cols + j];
                        e += dd * dd;
                    }
                size_t u = ur * gm.ucols + uc;
                if (e < best[u]) {
                    best[u] = e;
                    for (size_t i = r0; i < r1; i++)
                        memcpy(out + i * cols + c0, tmp + i * cols + c0, (c1 - c0) * sizeof *out);
                }
            }
    }
    free(xs);
    free(tmp);
    free(best);
    return rc;
}

/* keep -> mbs -> quantizer on x: out, with the kept entries restored as bf16. */
static int one_pass(const fp4s_remedy *r, const fp4s_spec *s, bool mbs, bool keep, const float *x, size_t rows,
                    size_t cols, size_t ld, float *out, rm_opinfo *info)
{
    size_t n = rows * cols;
    float *b = malloc((n ? n : 1) * sizeof *b);
    uint8_t *mask = keep ? calloc(n ? n : 1, 1) : NULL;
    if (!b || (keep && !mask)) {
        free(b);
        free(mask);
        return fp4s_error_set(FP4S_ENOMEM, "remedy: out of memory");
    }
    for (size_t i = 0; i < rows; i++) memcpy(b + i * cols, x + i * ld, cols * sizeof *b);
    if (keep) keep_select(x, rows, cols, ld, s->block, r->keep, b, mask);
    int rc = mbs_or_plain(r, s, mbs, b, rows, cols, out, info ? &info->ts : NULL, info ? &info->units : NULL);
    if (!rc && keep) {
        double kept = 0;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                if (mask[i * cols + j]) {
                    out[i * cols + j] = fp4s_bf16_decode(fp4s_bf16_encode(x[i * ld + j], FP4S_TIE_EVEN));
                    kept++;
                }
        if (info) info->kept += kept;
    }
    free(b);
    free(mask);
    return rc;
}

int rm_operand(const fp4s_remedy *r, const fp4s_spec *s, bool mbs, bool keep, bool of, const float *x,
               size_t rows, size_t cols, size_t ld, float *out, rm_opinfo *info)
{
    if (info) memset(info, 0, sizeof *info);
    int rc = one_pass(r, s, mbs, keep, x, rows, cols, ld, out, info);
    if (rc || !of) return rc;
    size_t n = rows * cols;
    float *res = malloc((n ? n : 1) * sizeof *res), *q2 = malloc((n ? n : 1) * sizeof *q2);
    if (!res || !q2) {
        free(res);
        free(q2);
        return fp4s_error_set(FP4S_ENOMEM, "remedy of: out of memory");
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) res[i * cols + j] = x[i * ld + j] - out[i * cols + j];
    rc = one_pass(r, s, mbs, false, res, rows, cols, cols, q2, NULL);
    if (!rc) {
        float al = (float)r->of_alpha;
        for (size_t i = 0; i < n; i++) out[i] = out[i] + al * q2[i];
    }
    free(res);
    free(q2);
    return rc;
}
