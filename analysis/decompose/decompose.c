/* The three-way decomposition of FP4 quantization error: per-block kernel,
 * exact mergeable accumulators, groups, and the streaming driver. See
 * <fp4scope/decompose.h> for the definitions. */
#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#include <math.h>
#include <pthread.h>
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"

/* ---- names ------------------------------------------------------------------ */
int fp4s_dz_tie_parse(const char *s, fp4s_dz_tie *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "dead-zone tie: missing value");
    if (!strcmp(s, "spec")) *out = FP4S_DZ_TIE_SPEC;
    else if (!strcmp(s, "in")) *out = FP4S_DZ_TIE_IN;
    else if (!strcmp(s, "out")) *out = FP4S_DZ_TIE_OUT;
    else return fp4s_error_set(FP4S_EINVAL, "dead-zone tie '%s': expected spec, in or out", s);
    return 0;
}

const char *fp4s_dz_tie_name(fp4s_dz_tie t)
{
    switch (t) {
    case FP4S_DZ_TIE_SPEC: return "spec";
    case FP4S_DZ_TIE_IN: return "in";
    case FP4S_DZ_TIE_OUT: return "out";
    }
    return "?";
}

int fp4s_group_parse(const char *s, fp4s_group *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "grouping: missing value");
    if (!strcmp(s, "tensor")) *out = FP4S_GROUP_TENSOR;
    else if (!strcmp(s, "block")) *out = FP4S_GROUP_BLOCK;
    else if (!strcmp(s, "row") || !strcmp(s, "token")) *out = FP4S_GROUP_ROW;
    else if (!strcmp(s, "channel") || !strcmp(s, "column")) *out = FP4S_GROUP_CHANNEL;
    else return fp4s_error_set(FP4S_EINVAL, "grouping '%s': expected tensor, block, row or channel", s);
    return 0;
}

const char *fp4s_group_name(fp4s_group g)
{
    switch (g) {
    case FP4S_GROUP_TENSOR: return "tensor";
    case FP4S_GROUP_BLOCK: return "block";
    case FP4S_GROUP_ROW: return "row";
    case FP4S_GROUP_CHANNEL: return "channel";
    }
    return "?";
}

void fp4s_decomp_opts_defaults(fp4s_decomp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dz_tie = FP4S_DZ_TIE_SPEC;
    o->by = FP4S_GROUP_TENSOR;
    o->chunk_elems = (size_t)1 << 21;
    o->max_groups = (size_t)1 << 20;
}

/* ---- the field table ---------------------------------------------------------- */
#define FC(f, d) {#f, true, offsetof(fp4s_decomp_result, f), d}
#define FD(f, d) {#f, false, offsetof(fp4s_decomp_result, f), d}
static const fp4s_decomp_field fields[] = {
    FC(n, "finite elements decomposed"),
    FD(energy_total, "||e||^2, e = Q(x) - x"),
    FD(energy_scale, "||e_scale||^2, e_scale = Q(x) - Q*(x)"),
    FD(energy_deadzone, "||e_dz||^2 (Q*(x) - x on the dead zone)"),
    FD(energy_grid, "||e_grid||^2 (Q*(x) - x elsewhere)"),
    FD(cross_scale_grid, "2<e_scale, e_grid>"),
    FD(cross_scale_deadzone, "2<e_scale, e_dz> (0 under CEIL)"),
    FD(cross_deadzone_grid, "2<e_dz, e_grid> (0: disjoint supports)"),
    FD(ratio_scale, "energy_scale / energy_total"),
    FD(ratio_deadzone, "energy_deadzone / energy_total"),
    FD(ratio_grid, "energy_grid / energy_total"),
    FD(cos_scale_grid, "cos(e_scale, e_grid)"),
    FD(deadzone_fraction, "share of elements in the dead zone"),
    FD(relative_error, "||e|| / ||x||"),
    FD(snr_db, "10 log10(||x||^2/||e||^2), dB"),
    FD(ratio_cross, "sum of the cross terms / energy_total"),
    FD(ratio_removable, "1 - ratio_deadzone - ratio_grid: what a perfect scale removes"),
    FD(energy_x, "||x||^2"),
    FD(energy_scale_round, "e_scale energy on rounding elements"),
    FD(energy_scale_clip, "e_scale energy on clipped elements"),
    FD(energy_scale_underflow, "e_scale energy in underflowing blocks"),
    FD(residual_norm, "||e||"),
    FD(mean_abs_error, "mean |e|"),
    FD(clip_fraction, "share of elements that saturate"),
    FD(underflow_fraction, "share of blocks whose scale underflows"),
    FD(gamma_mean, "mean of gamma = s_b / s*_b over blocks"),
    FD(gamma_std, "std of gamma"),
    FD(gamma_min, "min gamma"),
    FD(gamma_max, "max gamma"),
    FD(delta_mean, "mean of delta = log2 gamma"),
    FD(delta_std, "std of delta"),
    FD(delta_min, "min delta"),
    FD(delta_max, "max delta"),
    FD(amax, "max |x|"),
    FD(max_residual, "worst |e - (e_scale + e_dz + e_grid)| of one element"),
    FD(identity_residual, "relative residual of the energy identity"),
    FC(blocks, "blocks decomposed"),
    FC(zero_blocks, "all-zero blocks"),
    FC(underflow_blocks, "blocks whose real scale underflows"),
    FC(gamma_blocks, "blocks with amax > 0"),
    FC(deadzone, "elements in the dead zone"),
    FC(deadzone_ties, "elements exactly at |x/s*| = 0.25"),
    FC(zeros, "elements exactly 0"),
    FC(clipped, "elements that saturate"),
    FC(nonfinite, "NaN or Inf inputs"),
    FC(nan, "NaN inputs"),
    FC(inf, "Inf inputs"),
    FC(nonfinite_blocks, "blocks excluded for non-finite input"),
    FC(excluded, "finite elements excluded with those blocks"),
    FC(nonfinite_output, "blocks excluded because Q(x) was not finite"),
};

const fp4s_decomp_field *fp4s_decomp_fields(size_t *n)
{
    if (n) *n = sizeof fields / sizeof fields[0];
    return fields;
}

double fp4s_decomp_field_value(const fp4s_decomp_result *r, const fp4s_decomp_field *f)
{
    const char *p = (const char *)r + f->offset;
    if (f->is_count) {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- E2M1 rounding of the ideal quantizer, in double --------------------------- */
double fp4s_decomp_e2m1_round(double t, fp4s_tie tie, fp4s_dz_tie dzt)
{
    if (!(t < 6.0)) return 6.0;
    double lo;
    int clo;
    if (t < 2.0) {
        double k = floor(t * 2.0);
        lo = k * 0.5;
        clo = (int)k;
    } else if (t < 4.0) {
        lo = floor(t);
        clo = (int)lo + 2;
    } else {
        lo = 4.0;
        clo = 6;
    }
    double hi = clo <= 3 ? lo + 0.5 : (clo <= 5 ? lo + 1.0 : 6.0);
    double mid = 0.5 * (lo + hi);
    if (t < mid) return lo;
    if (t > mid) return hi;
    if (clo == 0 && dzt != FP4S_DZ_TIE_SPEC) return dzt == FP4S_DZ_TIE_IN ? 0.0 : 0.5;
    switch (tie) {
    case FP4S_TIE_ZERO: return lo;
    case FP4S_TIE_AWAY: return hi;
    case FP4S_TIE_EVEN:
    default: return (clo & 1) ? hi : lo;
    }
}

/* ---- accumulators ------------------------------------------------------------------ */
void fp4s_xacc_add_part(xacc *a, const part *p)
{
    for (int i = 0; i < S_N; i++) xs_add(&a->s[i], p->s[i]);
    for (int i = 0; i < C_NUM; i++) a->c[i] += p->c[i];
    if (p->gmin < a->gmin) a->gmin = p->gmin;
    if (p->dmin < a->dmin) a->dmin = p->dmin;
    if (p->gmax > a->gmax) a->gmax = p->gmax;
    if (p->dmax > a->dmax) a->dmax = p->dmax;
    if (p->amax > a->amax) a->amax = p->amax;
    if (p->res > a->res) a->res = p->res;
}

static void part_add(part *a, const part *p)
{
    for (int i = 0; i < S_N; i++) a->s[i] += p->s[i];
    for (int i = 0; i < C_NUM; i++) a->c[i] += p->c[i];
    if (p->gmin < a->gmin) a->gmin = p->gmin;
    if (p->dmin < a->dmin) a->dmin = p->dmin;
    if (p->gmax > a->gmax) a->gmax = p->gmax;
    if (p->dmax > a->dmax) a->dmax = p->dmax;
    if (p->amax > a->amax) a->amax = p->amax;
    if (p->res > a->res) a->res = p->res;
}

void fp4s_xacc_init(xacc *a)
{
    memset(a, 0, sizeof *a);
    a->gmin = a->dmin = INFINITY;
    a->gmax = a->dmax = -INFINITY;
}

void fp4s_part_init(part *p)
{
    memset(p, 0, sizeof *p);
    p->gmin = p->dmin = INFINITY;
    p->gmax = p->dmax = -INFINITY;
}

void fp4s_xacc_merge(xacc *a, const xacc *b)
{
    for (int i = 0; i < S_N; i++) xs_merge(&a->s[i], &b->s[i]);
    for (int i = 0; i < C_NUM; i++) a->c[i] += b->c[i];
    if (b->gmin < a->gmin) a->gmin = b->gmin;
    if (b->dmin < a->dmin) a->dmin = b->dmin;
    if (b->gmax > a->gmax) a->gmax = b->gmax;
    if (b->dmax > a->dmax) a->dmax = b->dmax;
    if (b->amax > a->amax) a->amax = b->amax;
    if (b->res > a->res) a->res = b->res;
}

static void chacc_merge(chacc *a, const chacc *b)
{
    for (int i = 0; i < S_CH; i++) xs_merge(&a->s[i], &b->s[i]);
    for (int i = 0; i < C_CH; i++) a->c[i] += b->c[i];
    if (b->amax > a->amax) a->amax = b->amax;
    if (b->res > a->res) a->res = b->res;
}

static double safe_div(double a, double b) { return b != 0.0 ? a / b : NAN; }

/* Turn sums, counts and extremes into a result. s has ns sums (S_CH for
 * channels: no block statistics). */
static void finish(const double *s, int ns, const uint64_t *c, int nc, double gmin,
                   double gmax, double dmin, double dmax, double amax, double res,
                   fp4s_decomp_result *r)
{
    memset(r, 0, sizeof *r);
    r->n = c[C_ELEM];
    r->deadzone = c[C_DZ];
    r->deadzone_ties = c[C_DZTIE];
    r->zeros = c[C_ZEROS];
    r->clipped = c[C_CLIP];
    r->nan = c[C_NAN];
    r->inf = c[C_INF];
    r->nonfinite = r->nan + r->inf;
    r->excluded = c[C_EXCL];
    if (nc > C_CH) {
        r->blocks = c[C_BLOCKS];
        r->zero_blocks = c[C_ZB];
        r->underflow_blocks = c[C_UFB];
        r->gamma_blocks = c[C_GB];
        r->nonfinite_blocks = c[C_NFB];
        r->nonfinite_output = c[C_NFOUT];
    }
    r->energy_x = s[S_X2];
    r->energy_total = s[S_E2];
    r->energy_scale = s[S_ES2];
    r->energy_deadzone = s[S_EDZ2];
    r->energy_grid = s[S_EG2];
    r->cross_scale_grid = 2.0 * s[S_CSG];
    r->cross_scale_deadzone = 2.0 * s[S_CSD];
    r->cross_deadzone_grid = 2.0 * s[S_CDG];
    r->energy_scale_round = s[S_ER2];
    r->energy_scale_clip = s[S_EC2];
    r->energy_scale_underflow = s[S_EU2];
    double e2 = r->energy_total;
    r->ratio_scale = safe_div(r->energy_scale, e2);
    r->ratio_deadzone = safe_div(r->energy_deadzone, e2);
    r->ratio_grid = safe_div(r->energy_grid, e2);
    r->ratio_cross = safe_div(r->cross_scale_grid + r->cross_scale_deadzone + r->cross_deadzone_grid, e2);
    r->ratio_removable = 1.0 - r->ratio_deadzone - r->ratio_grid;
    r->cos_scale_grid = safe_div(s[S_CSG], sqrt(s[S_ES2]) * sqrt(s[S_EG2]));
    double n = (double)r->n;
    r->deadzone_fraction = safe_div((double)r->deadzone, n);
    r->clip_fraction = safe_div((double)r->clipped, n);
    r->relative_error = e2 == 0.0 && s[S_X2] == 0.0 ? NAN : sqrt(safe_div(e2, s[S_X2]));
    r->snr_db = (e2 > 0.0 && s[S_X2] > 0.0) ? 10.0 * log10(s[S_X2] / e2)
                : (e2 == 0.0 && s[S_X2] > 0.0 ? INFINITY : NAN);
    r->mean_abs_error = safe_div(s[S_EABS], n);
    r->residual_norm = sqrt(e2);
    r->amax = r->n ? amax : NAN;
    r->max_residual = r->n ? res : NAN;
    double sum_parts = s[S_ES2] + s[S_EDZ2] + s[S_EG2] + 2.0 * (s[S_CSG] + s[S_CSD] + s[S_CDG]);
    r->identity_residual = e2 > 0.0 ? fabs(e2 - sum_parts) / e2 : (sum_parts == 0.0 ? 0.0 : NAN);
    if (ns > S_CH && nc > C_CH) {
        r->underflow_fraction = safe_div((double)r->underflow_blocks, (double)r->blocks);
        double gb = (double)r->gamma_blocks;
        if (gb > 0) {
            r->gamma_mean = s[S_GAM] / gb;
            r->gamma_std = sqrt(fmax(0.0, s[S_GAM2] / gb - r->gamma_mean * r->gamma_mean));
            r->delta_mean = s[S_DEL] / gb;
            r->delta_std = sqrt(fmax(0.0, s[S_DEL2] / gb - r->delta_mean * r->delta_mean));
            r->gamma_min = gmin;
            r->gamma_max = gmax;
            r->delta_min = dmin;
            r->delta_max = dmax;
        } else {
            r->gamma_mean = r->gamma_std = r->gamma_min = r->gamma_max = NAN;
            r->delta_mean = r->delta_std = r->delta_min = r->delta_max = NAN;
        }
    } else {
        r->underflow_fraction = NAN;
        r->gamma_mean = r->gamma_std = r->gamma_min = r->gamma_max = NAN;
        r->delta_mean = r->delta_std = r->delta_min = r->delta_max = NAN;
    }
}

void fp4s_xacc_finish(const xacc *a, fp4s_decomp_result *r)
{
    double s[S_N];
    for (int i = 0; i < S_N; i++) s[i] = xs_value(&a->s[i]);
    finish(s, S_N, a->c, C_NUM, a->gmin, a->gmax, a->dmin, a->dmax, a->amax, a->res, r);
}

static void part_finish(const part *p, fp4s_decomp_result *r)
{
    finish(p->s, S_N, p->c, C_NUM, p->gmin, p->gmax, p->dmin, p->dmax, p->amax, p->res, r);
}

static void chacc_finish(const chacc *a, fp4s_decomp_result *r)
{
    double s[S_CH];
    for (int i = 0; i < S_CH; i++) s[i] = xs_value(&a->s[i]);
    finish(s, S_CH, a->c, C_CH, 0, 0, 0, 0, a->amax, a->res, r);
}

/* ---- the accumulator object ------------------------------------------------------------ */
typedef struct worker {
    xacc tot;
    uint64_t hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
    uint64_t he4[4][FP4S_HIST_BINS]; /* fused row path: four copies (fewer store-to-load chains) */
    chacc *ch; /* [cols] in channel mode */
    int used;
    /* fused row path scratch: per-block constants [KB_N][nblk], bins [cols] */
    double *kb;
    int32_t *bins;
    /* fp4s_decomp_add: quantizer outputs of one cache-sized piece of rows */
    float *q;
    uint8_t *codes, *scales;
    size_t piece_rows;
} worker;

#define MAX_WORKERS 64

struct fp4s_decomp {
    fp4s_spec spec;
    fp4s_tscale ts;
    fp4s_decomp_opts opts;
    size_t rows, cols, nblk;
    xacc tot;
    uint64_t hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
    /* groups */
    size_t ngroups;
    fp4s_decomp_result *unit; /* row or block groups, filled once */
    uint8_t *filled;
    chacc *ch;                /* channel groups */
    worker *wk[MAX_WORKERS];
    /* the real block scale of every scale byte (NVFP4: times the tensor
     * decode scale) and whether it underflows, as block_scale() gives them */
    double seff[256];
    uint8_t uf[256];
    /* a tie at E2M1 midpoint k (between codes k and k+1) goes up to k+1: from
     * the spec's tie rule, and --dz-tie for the dead-zone boundary k = 0 */
    bool tie_up[7];
};

static int spec_supported(const fp4s_spec *s)
{
    if (s->format != FP4S_MXFP4 && s->format != FP4S_NVFP4)
        return fp4s_error_set(FP4S_ENOTSUP, "decomposition: format %s not supported (MXFP4 and NVFP4 only)",
                              fp4s_format_name(s->format));
    if (s->block == 0 || s->block > 256 || s->block % 8)
        return fp4s_error_set(FP4S_EINVAL, "decomposition: block size %u unsupported (a multiple of 8 up to 256)",
                              s->block);
    return 0;
}

static double block_scale(const fp4s_decomp *d, uint8_t code, bool *uf);

int fp4s_decomp_open(const fp4s_spec *s, const fp4s_tscale *ts, const fp4s_decomp_opts *o,
                     size_t rows, size_t cols, fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    *out = NULL;
    if (!s) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL spec");
    int rc = spec_supported(s);
    if (rc) return rc;
    fp4s_decomp_opts def;
    if (!o) {
        fp4s_decomp_opts_defaults(&def);
        o = &def;
    }
    if (cols % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "decomposition: %zu columns is not a multiple of the block size %u",
                              cols, s->block);
    if ((rows == 0) != (cols == 0) || (rows == 0 && o->by != FP4S_GROUP_TENSOR))
        return fp4s_error_set(FP4S_EEMPTY, "decomposition: empty tensor [%zu, %zu]", rows, cols);
    fp4s_decomp *d = calloc(1, sizeof *d);
    if (!d) return fp4s_error_set(FP4S_ENOMEM, "decomposition: out of memory");
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

static inline int hist_bin(double v, double lo, double hi)
{
    double f = (v - lo) / (hi - lo) * FP4S_HIST_BINS;
    if (!(f >= 0)) return 0; /* also NaN, never expected */
    if (f >= FP4S_HIST_BINS) return FP4S_HIST_BINS - 1;
    return (int)f;
}

#define HD_LO (-2.0)
#define HD_HI 2.0
#define HE_LO (-4.0)
#define HE_HI 4.0

/* Per-block constants of the element kernel. */
typedef struct kconst {
    double th[7];   /* 4 mu m for the 7 E2M1 midpoints mu */
    double tu[7];   /* what 24|x| is compared with (>): th[k], or for a tie that
                       goes up the double just below th[k] (-1 when th[k] is 0) */
    double qtab[8]; /* Q* magnitudes g m / 6 */
    double inv_s;   /* 6 / m (histogram only) */
    int uf, mpos;
} kconst;

#define LW 8 /* lanes: block sizes are multiples of 8 */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FP4S_DECOMP_AVX512 1
#else
#define FP4S_DECOMP_AVX512 0
#endif

/* The element loop of one block, written for the vectorizer: every lane
 * accumulates its own elements (no reassociation), lanes are summed in a fixed
 * order at the end, so the result is deterministic on every ISA. Outputs: the
 * S_CH sums, counts (dead zone, dead-zone ties, zeros, clipped), the running
 * max residual and e * 6/m per element for the histogram. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default")))
#endif
static void block_kernel_portable(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                         size_t bs, const kconst *restrict kc, double (*restrict lanes)[LW],
                         double *restrict rlanes, int32_t *restrict bins)
{
    /* pass 1, element-wise (no reductions): the terms of every element */
    double T[S_CH + 5][256];
    const double th0 = kc->th[0];
    const double q1 = kc->qtab[1], q2 = kc->qtab[2], q3 = kc->qtab[3], q4 = kc->qtab[4], q5 = kc->qtab[5],
                 q6 = kc->qtab[6], q7 = kc->qtab[7];
    const double *tu = kc->tu;
    const double t0 = tu[0], t1 = tu[1], t2 = tu[2], t3 = tu[3], t4 = tu[4], t5 = tu[5], t6 = tu[6];
    const double inv_s = kc->inv_s, mpos = kc->mpos ? 1.0 : 0.0;
    const double hscale = FP4S_HIST_BINS / (HE_HI - HE_LO);
    const double ufd = kc->uf ? 1.0 : 0.0;
    for (size_t i = 0; i < bs; i++) {
        const double xv = x[i], qv = q[i];
        const double a = fabs(xv);
        const double A = 24.0 * a;
        double qm = 0.0;
        qm = A > t0 ? q1 : qm;
        qm = A > t1 ? q2 : qm;
        qm = A > t2 ? q3 : qm;
        qm = A > t3 ? q4 : qm;
        qm = A > t4 ? q5 : qm;
        qm = A > t5 ? q6 : qm;
        qm = A > t6 ? q7 : qm;
        const double qs = copysign(qm, xv);
        const double e = qv - xv, es = qv - qs, est = qs - xv;
        const double dzm = (double)(qm == 0.0);
        const double edz = est * dzm, eg = est - edz;
        const double topm = (double)((codes[i] & 7) == 7);
        const double clipm = (double)(a > fabs(qv)) * topm * (1.0 - ufd);
        const double es2 = es * es;
        T[S_X2][i] = xv * xv;
        T[S_E2][i] = e * e;
        T[S_ES2][i] = es2;
        T[S_EDZ2][i] = edz * edz;
        T[S_EG2][i] = eg * eg;
        T[S_CSG][i] = es * eg;
        T[S_CSD][i] = es * edz;
        T[S_CDG][i] = edz * eg;
        T[S_EC2][i] = es2 * clipm;
        T[S_EU2][i] = es2 * ufd;
        T[S_ER2][i] = es2 * (1.0 - clipm) * (1.0 - ufd);
        T[S_EABS][i] = fabs(e);
        T[S_CH + 0][i] = dzm;
        T[S_CH + 1][i] = (double)(A == th0) * mpos;
        T[S_CH + 2][i] = (double)(xv == 0.0);
        T[S_CH + 3][i] = clipm;
        T[S_CH + 4][i] = fabs(e - (es + edz + eg));
        double f = (e * inv_s - HE_LO) * hscale;
        f = f > 0.0 ? f : 0.0;
        f = f < FP4S_HIST_BINS - 1 ? f : FP4S_HIST_BINS - 1;
        bins[i] = (int32_t)f;
    }
    /* pass 2: add into the caller's 8 lanes (element i to lane i mod 8); the
     * lanes are summed in a fixed order once per row (or block) */
    for (int k = 0; k < S_CH + 4; k++)
        for (size_t i0 = 0; i0 < bs; i0 += LW)
            for (int j = 0; j < LW; j++) lanes[k][j] += T[k][i0 + (size_t)j];
    for (size_t i0 = 0; i0 < bs; i0 += LW)
        for (int j = 0; j < LW; j++) {
            const double v = T[S_CH + 4][i0 + (size_t)j];
            rlanes[j] = v > rlanes[j] ? v : rlanes[j];
        }
}

/* The element loop of one block in GCC vector extensions, 8 lanes (element i
 * goes to lane i mod 8) on every ISA: AVX-512, AVX2 or SSE2 run the same
 * IEEE operations lane by lane, so the sums are identical everywhere. The
 * caller's lanes are summed in a fixed order once per row (or block).
 * Outputs: the S_CH sums and 4 counts (dead zone, dead-zone ties, zeros,
 * clipped) added into lanes[], the residual max into rlanes[], the error
 * histogram bin of every element. */
typedef double v8d __attribute__((vector_size(64)));
typedef long long v8l __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef unsigned char v8u8 __attribute__((vector_size(8)));

#define vsel(m, a, b) ((v8d)(((v8l)(a) & (m)) | ((v8l)(b) & ~(m))))

#if FP4S_DECOMP_AVX512
__attribute__((target("avx512f")))
static void block_kernel_avx512(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                         size_t bs, const kconst *restrict kc, double (*restrict lanes)[LW],
                         double *restrict rlanes, int32_t *restrict bins)
{
    const double *tu = kc->tu;
    const v8l absm = (v8l){0} + 0x7fffffffffffffffLL, sgnm = ~absm;
    const v8d zero = {0}, one = zero + 1.0;
    const v8d t0 = zero + tu[0], t1 = zero + tu[1], t2 = zero + tu[2], t3 = zero + tu[3], t4 = zero + tu[4],
              t5 = zero + tu[5], t6 = zero + tu[6], th0 = zero + kc->th[0];
    const v8d q1 = zero + kc->qtab[1], q2 = zero + kc->qtab[2], q3 = zero + kc->qtab[3], q4 = zero + kc->qtab[4],
              q5 = zero + kc->qtab[5], q6 = zero + kc->qtab[6], q7 = zero + kc->qtab[7];
    const v8d inv_s = zero + kc->inv_s, hlo = zero + HE_LO, hsc = zero + FP4S_HIST_BINS / (HE_HI - HE_LO),
              hmax = zero + (FP4S_HIST_BINS - 1);
    const v8l ufm = (v8l){0} + (kc->uf ? -1LL : 0LL), mposm = (v8l){0} + (kc->mpos ? -1LL : 0LL);
    v8d L[S_CH + 4], R;
    for (int k = 0; k < S_CH + 4; k++) memcpy(&L[k], lanes[k], sizeof(v8d));
    memcpy(&R, rlanes, sizeof R);
    for (size_t i = 0; i < bs; i += LW) {
        v8f xf, qf;
        memcpy(&xf, x + i, sizeof xf);
        memcpy(&qf, q + i, sizeof qf);
        v8u8 c8;
        memcpy(&c8, codes + i, sizeof c8);
        const v8d xv = __builtin_convertvector(xf, v8d), qv = __builtin_convertvector(qf, v8d);
        const v8l c = __builtin_convertvector(c8, v8l);
        const v8d a = (v8d)((v8l)xv & absm);
        const v8d A = 24.0 * a;
        v8d qm = zero;
        qm = vsel(A > t0, q1, qm);
        qm = vsel(A > t1, q2, qm);
        qm = vsel(A > t2, q3, qm);
        qm = vsel(A > t3, q4, qm);
        qm = vsel(A > t4, q5, qm);
        qm = vsel(A > t5, q6, qm);
        qm = vsel(A > t6, q7, qm);
        const v8d qs = (v8d)((v8l)qm | ((v8l)xv & sgnm));
        const v8d e = qv - xv, es = qv - qs, est = qs - xv;
        const v8l dzm = qm == zero;
        const v8d edz = (v8d)((v8l)est & dzm);
        const v8d eg = est - edz;
        const v8d aq = (v8d)((v8l)qv & absm);
        const v8l clipm = ((c & 7) == 7) & (a > aq) & ~ufm;
        const v8d es2 = es * es;
        L[S_X2] += xv * xv;
        L[S_E2] += e * e;
        L[S_ES2] += es2;
        L[S_EDZ2] += edz * edz;
        L[S_EG2] += eg * eg;
        L[S_CSG] += es * eg;
        L[S_CSD] += es * edz;
        L[S_CDG] += edz * eg;
        L[S_EC2] += (v8d)((v8l)es2 & clipm);
        L[S_EU2] += (v8d)((v8l)es2 & ufm);
        L[S_ER2] += (v8d)((v8l)es2 & ~(clipm | ufm));
        L[S_EABS] += (v8d)((v8l)e & absm);
        L[S_CH + 0] += (v8d)((v8l)one & dzm);
        L[S_CH + 1] += (v8d)((v8l)one & (A == th0) & mposm);
        L[S_CH + 2] += (v8d)((v8l)one & (xv == zero));
        L[S_CH + 3] += (v8d)((v8l)one & clipm);
        const v8d r = (v8d)((v8l)(e - (es + edz + eg)) & absm);
        R = vsel(r > R, r, R);
        v8d f = (e * inv_s - hlo) * hsc;
        f = vsel(f > zero, f, zero);
        f = vsel(f < hmax, f, hmax);
        const v8i bi = __builtin_convertvector(f, v8i);
        memcpy(bins + i, &bi, sizeof bi);
    }
    for (int k = 0; k < S_CH + 4; k++) memcpy(lanes[k], &L[k], sizeof(v8d));
    memcpy(rlanes, &R, sizeof R);
}
#endif

/* The vector-extension kernel keeps its 17 accumulators in registers only
 * with 32 vector registers (AVX-512); elsewhere the portable kernel (the
 * compiler vectorizes its element pass) is faster. Both put element i in lane
 * i mod 8 and do the same IEEE operations, so their results are identical
 * bit for bit (tests/decompose checks it). */
static int kernel_choice = -1; /* -1 unknown, 0 portable, 1 avx512 */

void fp4s_decomp_kernel_force_portable(bool force)
{
    kernel_choice = force ? 0 : -1;
}

static void block_kernel(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                         size_t bs, const kconst *restrict kc, double (*restrict lanes)[LW],
                         double *restrict rlanes, int32_t *restrict bins)
{
#if FP4S_DECOMP_AVX512
    int k = __atomic_load_n(&kernel_choice, __ATOMIC_RELAXED);
    if (k < 0) {
        k = __builtin_cpu_supports("avx512f") ? 1 : 0;
        __atomic_store_n(&kernel_choice, k, __ATOMIC_RELAXED);
    }
    if (k == 1) {
        block_kernel_avx512(x, q, codes, bs, kc, lanes, rlanes, bins);
        return;
    }
#endif
    block_kernel_portable(x, q, codes, bs, kc, lanes, rlanes, bins);
}

/* Lane accumulators of the element kernel for one row (or block). */
typedef struct lanes {
    double l[S_CH + 4][LW];
    double r[LW];
} lanes;

static void lanes_reduce(lanes *ln, part *p)
{
    for (int k = 0; k < S_CH + 4; k++) {
        const double *l = ln->l[k];
        double s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        if (k < S_CH) p->s[k] += s;
        else p->c[(int[]){C_DZ, C_DZTIE, C_ZEROS, C_CLIP}[k - S_CH]] += (uint64_t)s;
    }
    for (int j = 0; j < LW; j++)
        if (ln->r[j] > p->res) p->res = ln->r[j];
    memset(ln, 0, sizeof *ln);
}

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
    const double md = m;
    bool uf = d->uf[scode];
    double seff = d->seff[scode];
    p->c[C_BLOCKS]++;
    if (m == 0.0f) {
        p->c[C_ZB]++;
        uf = false;
    } else {
        double gam = 6.0 * seff / md;
        double del = log2(gam);
        p->c[C_GB]++;
        if (uf) p->c[C_UFB]++;
        p->s[S_GAM] += gam;
        p->s[S_GAM2] += gam * gam;
        p->s[S_DEL] += del;
        p->s[S_DEL2] += del * del;
        if (gam < p->gmin) p->gmin = gam;
        if (gam > p->gmax) p->gmax = gam;
        if (del < p->dmin) p->dmin = del;
        if (del > p->dmax) p->dmax = del;
        hd[hist_bin(del, HD_LO, HD_HI)]++;
    }
    if (md > p->amax) p->amax = md;
    /* Q* without division: t = 6|x|/m is compared with the E2M1 midpoints mu
     * as 24|x| against 4 mu m. Both sides are exact in double (24|x| and
     * 4 mu m <= 20 m are floats times small integers), so every tie is exact.
     * Q* values are g m / 6, correctly rounded once per block and grid point. */
    static const double mid4[7] = {1, 3, 5, 7, 10, 14, 20};
    static const double gridv[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    double th[7], tu[7], qtab[8];
    for (int k = 0; k < 7; k++) {
        th[k] = mid4[k] * md;
        /* a tie that goes up: A >= th is A > (the double just below th) */
        double t = th[k];
        if (d->tie_up[k]) {
            if (t > 0.0) {
                uint64_t b;
                memcpy(&b, &t, sizeof b);
                b -= 1;
                memcpy(&t, &b, sizeof t);
            } else {
                t = -1.0;
            }
        }
        tu[k] = t;
    }
    /* g m / 6 correctly rounded: powers of two scale m/6 exactly, 1.5 m/6
     * and 3 m/6 = 2 (1.5 m/6) need one more division, 6 m/6 = m */
    (void)gridv;
    const double d6 = md / 6.0, d15 = (1.5 * md) / 6.0;
    qtab[0] = 0.0;
    qtab[1] = 0.5 * d6;
    qtab[2] = d6;
    qtab[3] = d15;
    qtab[4] = 2.0 * d6;
    qtab[5] = 2.0 * d15;
    qtab[6] = 4.0 * d6;
    qtab[7] = md;
    const double inv_s = m != 0.0f ? 6.0 / md : 0.0;
    kconst kc;
    memcpy(kc.th, th, sizeof th);
    memcpy(kc.tu, tu, sizeof tu);
    memcpy(kc.qtab, qtab, sizeof qtab);
    kc.inv_s = inv_s;
    kc.uf = uf;
    kc.mpos = m != 0.0f;
    int32_t bins[256];
    block_kernel(x, q, codes, bs, &kc, ln->l, ln->r, bins);
    p->c[C_ELEM] += bs;
    if (m != 0.0f)
        for (size_t i = 0; i < bs; i++) he[bins[i]]++;
    if (!ch) return;
    /* channel groups: the same per-element terms, added exactly per column */
    for (size_t i = 0; i < bs; i++) {
        const double xv = x[i], qv = q[i];
        const double a = fabs(xv);
        const double A = 24.0 * a;
        int idx = (A > th[0]) + (A > th[1]) + (A > th[2]) + (A > th[3]) + (A > th[4]) + (A > th[5]) +
                  (A > th[6]);
        const bool tie = idx < 7 && A == th[idx] && m != 0.0f;
        const int code = idx + (tie && d->tie_up[idx]);
        const double qs = code == 0 ? 0.0 : copysign(qtab[code], xv);
        const double e = qv - xv, es = qv - qs, est = qs - xv;
        const bool dz = code == 0;
        const double edz = dz ? est : 0.0, eg = dz ? 0.0 : est;
        const bool clip = !uf && (codes[i] & 7) == 7 && a > fabs(qv);
        const double r = fabs(e - (es + edz + eg));
        const double v_es2 = es * es;
        const double t2[S_CH] = {xv * xv, e * e, v_es2, edz * edz, eg * eg, es * eg, es * edz, edz * eg,
                                 (!uf && !clip) ? v_es2 : 0.0, clip ? v_es2 : 0.0, uf ? v_es2 : 0.0, fabs(e)};
        chacc *c = &ch[i];
        for (int k = 0; k < S_CH; k++) xs_add(&c->s[k], t2[k]);
        c->c[C_ELEM]++;
        c->c[C_DZ] += dz;
        c->c[C_DZTIE] += tie && idx == 0;
        c->c[C_ZEROS] += (xv == 0.0);
        c->c[C_CLIP] += clip;
        if (a > c->amax) c->amax = a;
        if (r > c->res) c->res = r;
    }
}

/* ---- fused row path ------------------------------------------------------------------ */
/* For the tensor and row groupings on CPUs with AVX-512 the blocks of a row are
 * decomposed by one function: a prepass over the row's blocks (in block order,
 * the same scalar operations as decomp_block: counts, gamma and delta sums, the
 * delta histogram) writes each block's kernel constants to a small table, then
 * one element loop over the whole row keeps the 17 lane accumulators in
 * registers and reads the constants of the current block from that table. The
 * element operations and the lane of every element are those of the per-block
 * kernels, so the sums are the same bits (tests/decompose checks it on every
 * spec). A row holding a non-finite input or output takes the per-block path. */
enum { KB_TU = 0, KB_Q = 7, KB_TH0 = 14, KB_INVS = 15, KB_UF = 16, KB_MPOS = 17, KB_N = 18 };

static uint64_t fused_rows;

uint64_t fp4s_decomp_fused_rows(void) { return __atomic_load_n(&fused_rows, __ATOMIC_RELAXED); }

bool fp4s_decomp_fused_available(void)
{
#if FP4S_DECOMP_AVX512
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

#if FP4S_DECOMP_AVX512
/* Returns false (and touches nothing) when the row needs the per-block path. */
__attribute__((target("avx512f")))
static bool row_prep(const fp4s_decomp *d, const float *restrict x, const float *restrict q,
                     const uint8_t *restrict sc, double *restrict kb, part *p, uint64_t *hd)
{
    const size_t bs = d->spec.block, nb = d->nblk;
    double *md = kb + (size_t)KB_N * nb; /* m_b, then gamma_b (room after the table's nb entries) */
    uint32_t nfx = 0;
    __m512d mv[32]; /* m_b, eight blocks a vector, when nb <= 256 */
    bool have_mv = false;
    if (bs % 16 == 0 && nb <= 256) {
        for (size_t v = 0; v < (nb + 7) / 8; v++) mv[v] = _mm512_setzero_pd();
        /* the bits of |x| order like the values; a pattern at or above
         * 0x7f800000 is Inf or NaN. Outputs are only checked for it. */
        const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
        __m512i anyq = _mm512_setzero_si512();
        for (size_t b = 0; b < nb; b++) {
            __m512i vx = _mm512_setzero_si512();
            for (size_t i = b * bs; i < (b + 1) * bs; i += 16) {
                vx = _mm512_max_epu32(vx, _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absm));
                anyq = _mm512_max_epu32(anyq, _mm512_and_si512(_mm512_loadu_si512((const void *)(q + i)), absm));
            }
            const uint32_t mx = (uint32_t)_mm512_reduce_max_epu32(vx);
            nfx |= (uint32_t)(mx >= 0x7f800000u);
            float m;
            memcpy(&m, &mx, sizeof m);
            md[b] = m;
            /* the same values as vectors of 8 blocks (no wide reload of
             * narrow stores below) */
            mv[b >> 3] = _mm512_mask_broadcastsd_pd(mv[b >> 3], (__mmask8)(1u << (b & 7)), _mm_set_sd((double)m));
        }
        have_mv = true;
        nfx |= (uint32_t)_mm512_cmpge_epu32_mask(anyq, inf);
    } else {
        for (size_t b = 0; b < nb; b++) {
            uint32_t mx = 0, mq = 0;
            for (size_t i = 0; i < bs; i++) {
                uint32_t bx, bq;
                memcpy(&bx, &x[b * bs + i], sizeof bx);
                memcpy(&bq, &q[b * bs + i], sizeof bq);
                bx &= 0x7fffffffu;
                bq &= 0x7fffffffu;
                mx = bx > mx ? bx : mx;
                mq = bq > mq ? bq : mq;
            }
            nfx |= (uint32_t)(mx >= 0x7f800000u) | (uint32_t)(mq >= 0x7f800000u);
            float m;
            memcpy(&m, &mx, sizeof m);
            md[b] = m;
        }
    }
    if (nfx) return false;
    static const double mid4[7] = {1, 3, 5, 7, 10, 14, 20};
    const bool *up = d->tie_up;
    /* eight blocks at a time, the same IEEE operations as decomp_block:
     * gamma = 6 seff / m, thresholds 4 mu m (a tie going up compared against
     * the double just below, -1 when m = 0), Q* magnitudes g m / 6, 6 / m */
    double *gm = md + nb;
    const __m512i m1 = _mm512_set1_epi64(INT64_C(-4616189618054758400)); /* bits of -1.0 */
    const __m512i vidx = _mm512_set_epi64(7 * KB_N, 6 * KB_N, 5 * KB_N, 4 * KB_N, 3 * KB_N, 2 * KB_N, KB_N, 0);
    const __m512d zero = _mm512_setzero_pd(), six = _mm512_set1_pd(6.0);
    for (size_t b0 = 0; b0 < nb; b0 += 8) {
        const size_t nl = nb - b0 < 8 ? nb - b0 : 8;
        const __mmask8 km = (__mmask8)(nl == 8 ? 0xFF : (1u << nl) - 1);
        double se[8];
        for (size_t j = 0; j < 8; j++) se[j] = j < nl ? d->seff[sc[b0 + j]] : 1.0;
        const __m512d m = have_mv ? mv[b0 >> 3] : _mm512_maskz_loadu_pd(km, md + b0);
        _mm512_mask_storeu_pd(gm + b0, km, _mm512_div_pd(_mm512_mul_pd(six, _mm512_loadu_pd(se)), m));
        double *kq = kb + b0 * KB_N;
        for (int k = 0; k < 7; k++) {
            const __m512d t = _mm512_mul_pd(_mm512_set1_pd(mid4[k]), m);
            if (k == 0) _mm512_mask_i64scatter_pd(kq + KB_TH0, km, vidx, t, 8);
            __m512d tu = t;
            if (up[k]) {
                const __mmask8 pos = _mm512_cmp_pd_mask(t, zero, _CMP_GT_OQ);
                tu = _mm512_castsi512_pd(_mm512_mask_sub_epi64(m1, pos, _mm512_castpd_si512(t), _mm512_set1_epi64(1)));
            }
            _mm512_mask_i64scatter_pd(kq + KB_TU + k, km, vidx, tu, 8);
        }
        const __m512d d6 = _mm512_div_pd(m, six), d15 = _mm512_div_pd(_mm512_mul_pd(_mm512_set1_pd(1.5), m), six);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 0, km, vidx, _mm512_mul_pd(_mm512_set1_pd(0.5), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 1, km, vidx, d6, 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 2, km, vidx, d15, 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 3, km, vidx, _mm512_mul_pd(_mm512_set1_pd(2.0), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 4, km, vidx, _mm512_mul_pd(_mm512_set1_pd(2.0), d15), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 5, km, vidx, _mm512_mul_pd(_mm512_set1_pd(4.0), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 6, km, vidx, m, 8);
        const __mmask8 nz = _mm512_cmp_pd_mask(m, zero, _CMP_NEQ_UQ);
        _mm512_mask_i64scatter_pd(kq + KB_INVS, km, vidx, _mm512_maskz_div_pd(nz, six, m), 8);
    }
    /* block statistics, in block order as decomp_block does them (in locals:
     * the histogram's counts could alias p's) */
    uint64_t nzb = 0, ngb = 0, nufb = 0;
    double sg = p->s[S_GAM], sg2 = p->s[S_GAM2], sd = p->s[S_DEL], sd2 = p->s[S_DEL2];
    double gmin = p->gmin, gmax = p->gmax, dmin = p->dmin, dmax = p->dmax, amax = p->amax;
    for (size_t b = 0; b < nb; b++) {
        const double m = md[b];
        bool uf = d->uf[sc[b]];
        if (m == 0.0) {
            nzb++;
            uf = false;
        } else {
            double gam = gm[b];
            double del = log2(gam);
            ngb++;
            nufb += uf;
            sg += gam;
            sg2 += gam * gam;
            sd += del;
            sd2 += del * del;
            if (gam < gmin) gmin = gam;
            if (gam > gmax) gmax = gam;
            if (del < dmin) dmin = del;
            if (del > dmax) dmax = del;
            hd[hist_bin(del, HD_LO, HD_HI)]++;
        }
        if (m > amax) amax = m;
        /* masks as integers 0 or 0xFF in the table's slots */
        const int64_t ufi = uf ? 0xFF : 0, mpi = m != 0.0 ? 0xFF : 0;
        memcpy(&kb[b * KB_N + KB_UF], &ufi, sizeof ufi);
        memcpy(&kb[b * KB_N + KB_MPOS], &mpi, sizeof mpi);
    }
    p->c[C_BLOCKS] += nb;
    p->c[C_ZB] += nzb;
    p->c[C_GB] += ngb;
    p->c[C_UFB] += nufb;
    p->s[S_GAM] = sg;
    p->s[S_GAM2] = sg2;
    p->s[S_DEL] = sd;
    p->s[S_DEL2] = sd2;
    p->gmin = gmin;
    p->gmax = gmax;
    p->dmin = dmin;
    p->dmax = dmax;
    p->amax = amax;
    p->c[C_ELEM] += bs * nb;
    return true;
}

__attribute__((target("avx512f")))
static void row_kernel_avx512(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                              size_t bs, size_t nb, const double *restrict kb, double (*restrict lanes_l)[LW],
                              double *restrict rlanes, int32_t *restrict bins)
{
    /* Fewer operations than the per-block kernels for the same bits: a term
     * that is +0 or -0 there (edz*eg always; edz*edz, es*edz outside D_b;
     * eg*eg, es*eg inside; masked squares) adds nothing to a lane, since a
     * lane is never -0 (it starts at +0 and is a sum), so those lanes take a
     * masked add of the nonzero product instead; e - (es + edz + eg) equals
     * e - (es + est) up to the sign of a zero, which |.| removes; counts are
     * kept as integers (exact either way). */
    const __m512i absm = _mm512_set1_epi64(0x7fffffffffffffffLL), seven = _mm512_set1_epi64(7),
                  ones = _mm512_set1_epi64(1);
    const __m512d zero = _mm512_setzero_pd(), c24 = _mm512_set1_pd(24.0);
    const __m512d hlo = _mm512_set1_pd(HE_LO), hsc = _mm512_set1_pd(FP4S_HIST_BINS / (HE_HI - HE_LO)),
                  hmax = _mm512_set1_pd(FP4S_HIST_BINS - 1);
    __m512d lx2 = _mm512_loadu_pd(lanes_l[S_X2]), le2 = _mm512_loadu_pd(lanes_l[S_E2]),
            les2 = _mm512_loadu_pd(lanes_l[S_ES2]), ledz2 = _mm512_loadu_pd(lanes_l[S_EDZ2]),
            leg2 = _mm512_loadu_pd(lanes_l[S_EG2]), lcsg = _mm512_loadu_pd(lanes_l[S_CSG]),
            lcsd = _mm512_loadu_pd(lanes_l[S_CSD]), ler2 = _mm512_loadu_pd(lanes_l[S_ER2]),
            lec2 = _mm512_loadu_pd(lanes_l[S_EC2]), leu2 = _mm512_loadu_pd(lanes_l[S_EU2]),
            labs = _mm512_loadu_pd(lanes_l[S_EABS]), R = _mm512_loadu_pd(rlanes);
    __m512i ndz = _mm512_setzero_si512(), ntie = ndz, nzero = ndz, nclip = ndz;
    const double *kp = kb;
    const size_t n = bs * nb;
    size_t bend = bs;
    for (size_t i = 0; i < n; i += LW) {
        if (i == bend) {
            kp += KB_N;
            bend += bs;
        }
        const __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        const __m512d qv = _mm512_cvtps_pd(_mm256_loadu_ps(q + i));
        const __m512i c = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(codes + i)));
        const __m512d a = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(xv), absm));
        const __m512d A = _mm512_mul_pd(c24, a);
        __m512d qm = zero;
        for (int k = 0; k < 7; k++)
            qm = _mm512_mask_mov_pd(qm, _mm512_cmp_pd_mask(A, _mm512_set1_pd(kp[KB_TU + k]), _CMP_GT_OQ),
                                    _mm512_set1_pd(kp[KB_Q + k]));
        /* qs = copysign(qm, x) as the bits qm | sign(x) */
        const __m512d qs = _mm512_castsi512_pd(_mm512_ternarylogic_epi64(
            _mm512_castpd_si512(qm), _mm512_castpd_si512(xv), absm, 0xF4)); /* A | (B & ~C) */
        const __m512d e = _mm512_sub_pd(qv, xv), es = _mm512_sub_pd(qv, qs), est = _mm512_sub_pd(qs, xv);
        const __mmask8 dz = _mm512_cmp_pd_mask(qm, zero, _CMP_EQ_OQ);
        const __mmask8 uf = (__mmask8)((const int64_t *)(const void *)kp)[KB_UF]; /* 0 or 0xFF */
        const __m512d aq = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(qv), absm));
        __mmask8 clip = _mm512_cmpeq_epi64_mask(_mm512_and_si512(c, seven), seven);
        clip = _mm512_mask_cmp_pd_mask(clip, a, aq, _CMP_GT_OQ) & (__mmask8)~uf;
        const __m512d es2 = _mm512_mul_pd(es, es), est2 = _mm512_mul_pd(est, est), p = _mm512_mul_pd(es, est);
        lx2 = _mm512_add_pd(lx2, _mm512_mul_pd(xv, xv));
        le2 = _mm512_add_pd(le2, _mm512_mul_pd(e, e));
        les2 = _mm512_add_pd(les2, es2);
        ledz2 = _mm512_mask_add_pd(ledz2, dz, ledz2, est2);
        leg2 = _mm512_mask_add_pd(leg2, (__mmask8)~dz, leg2, est2);
        lcsg = _mm512_mask_add_pd(lcsg, (__mmask8)~dz, lcsg, p);
        lcsd = _mm512_mask_add_pd(lcsd, dz, lcsd, p);
        lec2 = _mm512_mask_add_pd(lec2, clip, lec2, es2);
        leu2 = _mm512_mask_add_pd(leu2, uf, leu2, es2);
        ler2 = _mm512_mask_add_pd(ler2, (__mmask8)~(clip | uf), ler2, es2);
        labs = _mm512_add_pd(labs, _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(e), absm)));
        ndz = _mm512_mask_add_epi64(ndz, dz, ndz, ones);
        const __mmask8 tie = _mm512_cmp_pd_mask(A, _mm512_set1_pd(kp[KB_TH0]), _CMP_EQ_OQ) &
                             (__mmask8)((const int64_t *)(const void *)kp)[KB_MPOS];
        ntie = _mm512_mask_add_epi64(ntie, tie, ntie, ones);
        nzero = _mm512_mask_add_epi64(nzero, _mm512_cmp_pd_mask(xv, zero, _CMP_EQ_OQ), nzero, ones);
        nclip = _mm512_mask_add_epi64(nclip, clip, nclip, ones);
        const __m512d r = _mm512_castsi512_pd(
            _mm512_and_si512(_mm512_castpd_si512(_mm512_sub_pd(e, _mm512_add_pd(es, est))), absm));
        R = _mm512_mask_mov_pd(R, _mm512_cmp_pd_mask(r, R, _CMP_GT_OQ), r);
        __m512d f = _mm512_mul_pd(_mm512_sub_pd(_mm512_mul_pd(e, _mm512_set1_pd(kp[KB_INVS])), hlo), hsc);
        f = _mm512_mask_mov_pd(zero, _mm512_cmp_pd_mask(f, zero, _CMP_GT_OQ), f);
        f = _mm512_mask_mov_pd(hmax, _mm512_cmp_pd_mask(f, hmax, _CMP_LT_OQ), f);
        _mm256_storeu_si256((__m256i *)(void *)(bins + i), _mm512_cvttpd_epi32(f));
    }
    _mm512_storeu_pd(lanes_l[S_X2], lx2);
    _mm512_storeu_pd(lanes_l[S_E2], le2);
    _mm512_storeu_pd(lanes_l[S_ES2], les2);
    _mm512_storeu_pd(lanes_l[S_EDZ2], ledz2);
    _mm512_storeu_pd(lanes_l[S_EG2], leg2);
    _mm512_storeu_pd(lanes_l[S_CSG], lcsg);
    _mm512_storeu_pd(lanes_l[S_CSD], lcsd);
    _mm512_storeu_pd(lanes_l[S_ER2], ler2);
    _mm512_storeu_pd(lanes_l[S_EC2], lec2);
    _mm512_storeu_pd(lanes_l[S_EU2], leu2);
    _mm512_storeu_pd(lanes_l[S_EABS], labs);
    /* lanes_l[S_CDG] stays as it is: every edz*eg is +0 or -0 */
    const __m512i cnt[4] = {ndz, ntie, nzero, nclip};
    for (int k = 0; k < 4; k++) {
        int64_t v[LW];
        _mm512_storeu_si512((void *)v, cnt[k]);
        for (int j = 0; j < LW; j++) lanes_l[S_CH + k][j] += (double)v[j];
    }
    _mm512_storeu_pd(rlanes, R);
}

static void lanes_reduce(lanes *ln, part *p);

/* One row through the fused path; false if it must take the per-block path. */
static bool row_fast(const fp4s_decomp *d, worker *wk, const float *x, const float *q, const uint8_t *codes,
                     const uint8_t *sc, part *rowp)
{
    int kc = __atomic_load_n(&kernel_choice, __ATOMIC_RELAXED);
    if (kc < 0) {
        kc = __builtin_cpu_supports("avx512f") ? 1 : 0;
        __atomic_store_n(&kernel_choice, kc, __ATOMIC_RELAXED);
    }
    if (kc != 1) return false;
    if (!row_prep(d, x, q, sc, wk->kb, rowp, wk->hd)) return false;
    const size_t bs = d->spec.block, nb = d->nblk;
    lanes ln;
    memset(&ln, 0, sizeof ln);
    row_kernel_avx512(x, q, codes, bs, nb, wk->kb, ln.l, ln.r, wk->bins);
    lanes_reduce(&ln, rowp);
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
#endif

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
            lanes_reduce(&ln[r], &rp[r]);
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
#if FP4S_DECOMP_AVX512
        if (d->opts.by != FP4S_GROUP_BLOCK && row_fast(d, wk, xr, qr, cr, sr, &rowp)) {
            fp4s_xacc_add_part(&wk->tot, &rowp);
            if (d->opts.by == FP4S_GROUP_ROW) {
                part_finish(&rowp, &d->unit[grow]);
                d->filled[grow] = 1;
            }
            continue;
        }
#endif
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
            lanes_reduce(&ln, &p);
            part_add(&rowp, &p);
            {
                size_t gi = grow * d->nblk + b;
                part_finish(&p, &d->unit[gi]);
                d->filled[gi] = 1;
            }
        }
        if (d->opts.by != FP4S_GROUP_BLOCK) lanes_reduce(&ln, &rowp);
        fp4s_xacc_add_part(&wk->tot, &rowp);
        if (d->opts.by == FP4S_GROUP_ROW) {
            part_finish(&rowp, &d->unit[grow]);
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
        /* quantize a piece of rows that stays in cache, then decompose it */
        fp4s_qout out;
        memset(&out, 0, sizeof out);
        out.codes = wk->codes;
        out.ld_codes = d->cols;
        out.scales = wk->scales;
        out.ld_scales = d->nblk;
        out.dequant = wk->q;
        out.ld_dequant = d->cols;
        for (size_t r = r0; r < r1 && !rc; r += wk->piece_rows) {
            size_t n = r1 - r < wk->piece_rows ? r1 - r : wk->piece_rows;
            const float *xr = j->x + r * j->ld;
            rc = fp4s_quantize(&d->spec, &d->ts, xr, n, d->cols, j->ld, j->row0 + r, &out, NULL);
            if (!rc)
                rc = process_rows(d, wk, xr, j->ld, wk->q, d->cols, wk->codes, d->cols, wk->scales, d->nblk, n,
                                  j->row0 + r);
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
            for (size_t c = 0; c < d->cols; c++) chacc_merge(&d->ch[c], &wk->ch[c]);
            memset(wk->ch, 0, d->cols * sizeof(chacc));
        }
        wk->used = 0;
    }
}

static int add_common(fp4s_decomp *d, struct add_job *j)
{
    const size_t nrows = j->nrows, row0 = j->row0;
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
    size_t align = fp4s_spec_row_align(&d->spec);
    if (align == 0) align = 1;
    struct add_job j = {d, x, ld, NULL, 0, NULL, 0, NULL, 0, row0, align, nrows};
    return add_common(d, &j);
}

static bool same_spec(const fp4s_spec *a, const fp4s_spec *b)
{
    return a->format == b->format && a->block == b->block && a->tie == b->tie &&
           a->mx_rule == b->mx_rule && a->nv_recipe == b->nv_recipe && a->tile2d == b->tile2d &&
           a->global_scale == b->global_scale && a->nonfinite == b->nonfinite &&
           a->mx_scale_is_ggml == b->mx_scale_is_ggml && a->mx_zero_block_code == b->mx_zero_block_code;
}

int fp4s_decomp_merge(fp4s_decomp *into, const fp4s_decomp *from)
{
    if (!into || !from) return fp4s_error_set(FP4S_EINVAL, "decomposition merge: NULL argument");
    if (!same_spec(&into->spec, &from->spec))
        return fp4s_error_set(FP4S_EINVAL, "decomposition merge: different quantizer specs");
    if (into->opts.dz_tie != from->opts.dz_tie)
        return fp4s_error_set(FP4S_EINVAL, "decomposition merge: different dead-zone tie conventions");
    bool groups = into->opts.by != FP4S_GROUP_TENSOR;
    if (groups && (into->opts.by != from->opts.by || into->rows != from->rows || into->cols != from->cols))
        return fp4s_error_set(FP4S_ESHAPE, "decomposition merge: groups of different shape or kind");
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
        for (size_t c = 0; c < into->cols; c++) chacc_merge(&into->ch[c], &from->ch[c]);
    }
    fp4s_xacc_merge(&into->tot, &from->tot);
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
            part_finish(&p, r);
        }
    } else {
        chacc_finish(&d->ch[i], r);
    }
    return 0;
}

int fp4s_decomp_hist_get(const fp4s_decomp *d, fp4s_decomp_hist_kind k, fp4s_decomp_hist *h)
{
    if (!d || !h) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
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

/* ---- streaming driver ---------------------------------------------------------------- */
struct reader {
    fp4s_source *src;
    size_t rows, cols, chunk;
    float *buf[2];
    size_t next_row;  /* first row of the chunk being read */
    int rc;
    char err[1024];
};

static int read_chunk(struct reader *rd, int slot, size_t row0)
{
    size_t n = rd->rows - row0 < rd->chunk ? rd->rows - row0 : rd->chunk;
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
                      int (*fn)(void *ctx, const float *x, size_t n, size_t row0), void *ctx)
{
    if (read_chunk(rd, 0, 0)) return fp4s_error_set(rd->rc, "%s", rd->err);
    int slot = 0;
    for (size_t r0 = 0; r0 < rd->rows; r0 += rd->chunk) {
        size_t n = rd->rows - r0 < rd->chunk ? rd->rows - r0 : rd->chunk;
        size_t nx = r0 + n;
        pthread_t th;
        struct read_arg ra = {rd, 1 - slot, nx};
        bool threaded = false;
        if (nx < rd->rows) {
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
    }
    return 0;
}

static int chunk_amax(void *ctx, const float *x, size_t n, size_t row0)
{
    (void)row0;
    struct reader *rd = ((void **)ctx)[0];
    float *amax = ((void **)ctx)[1], a = fp4s_amax(x, n, rd->cols, rd->cols, NULL);
    if (a > *amax) *amax = a;
    return 0;
}

static int chunk_add(void *ctx, const float *x, size_t n, size_t row0)
{
    fp4s_decomp *d = ctx;
    return fp4s_decomp_add(d, x, n, d->cols, row0);
}

int fp4s_decomp_source(const fp4s_spec *s, const fp4s_decomp_opts *o, const char *spec_str,
                       fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL output");
    *out = NULL;
    if (!s || !spec_str) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    int rc = spec_supported(s);
    if (rc) return rc;
    fp4s_decomp_opts def;
    if (!o) {
        fp4s_decomp_opts_defaults(&def);
        o = &def;
    }
    fp4s_source *src = NULL;
    rc = fp4s_source_open(spec_str, &src);
    if (rc) return rc;
    struct reader rd;
    memset(&rd, 0, sizeof rd);
    rd.src = src;
    rd.rows = fp4s_source_rows(src);
    rd.cols = fp4s_source_cols(src);
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
    size_t ce = o->chunk_elems ? o->chunk_elems : ((size_t)1 << 21);
    rd.chunk = ce / rd.cols;
    rd.chunk -= rd.chunk % align;
    if (rd.chunk < align) rd.chunk = align;
    if (rd.chunk > rd.rows) rd.chunk = rd.rows;
    rd.buf[0] = malloc(rd.chunk * rd.cols * sizeof(float));
    rd.buf[1] = malloc(rd.chunk * rd.cols * sizeof(float));
    if (!rd.buf[0] || !rd.buf[1]) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory for chunks of %zu rows", spec_str, rd.chunk);
        goto done;
    }
    fp4s_tscale ts;
    memset(&ts, 0, sizeof ts);
    float amax = 0.0f;
    if (s->format == FP4S_NVFP4) {
        /* a first pass for the tensor amax */
        void *ctx[2] = {&rd, &amax};
        rc = each_chunk(&rd, spec_str, chunk_amax, ctx);
        if (rc) goto done;
    }
    rc = fp4s_tscale_init(s, amax, &ts);
    if (rc) goto done;
    rc = fp4s_decomp_open(s, &ts, o, rd.rows, rd.cols, &d);
    if (rc) goto done;
    rc = each_chunk(&rd, spec_str, chunk_add, d);
done:
    free(rd.buf[0]);
    free(rd.buf[1]);
    fp4s_source_close(&src);
    if (rc) {
        fp4s_decomp_close(&d);
        return rc;
    }
    *out = d;
    return 0;
}
