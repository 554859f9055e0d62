/* The result side of the decomposition: names of the options, the field
 * table, the reference E2M1 rounding, the exact accumulators (xacc, chacc)
 * and plain partials (part) and how sums become a fp4s_decomp_result. */
#include <fp4scope/decompose.h>
#include <fp4scope/record.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "decomp_internal.h"

/* ---- names ------------------------------------------------------------------ */
int fp4s_dname_parse(const fp4s_dname *t, size_t n, size_t nlisted, const char *what, const char *s, int *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "%s: missing value", what);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, t[i].name)) {
            *out = t[i].value;
            return 0;
        }
    char list[256] = "";
    for (size_t i = 0, len = 0; i < nlisted && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i == 0 ? "" : (i + 1 == nlisted ? " or " : ", "),
                                t[i].name);
    return fp4s_error_set(FP4S_EINVAL, "%s '%s': expected %s", what, s, list);
}

const char *fp4s_dname_of(const fp4s_dname *t, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].value == value) return t[i].name;
    return "?";
}

static const fp4s_dname dz_ties[] = {{"spec", FP4S_DZ_TIE_SPEC}, {"in", FP4S_DZ_TIE_IN}, {"out", FP4S_DZ_TIE_OUT}};
static const fp4s_dname groups[] = {
    {"tensor", FP4S_GROUP_TENSOR}, {"block", FP4S_GROUP_BLOCK},  {"row", FP4S_GROUP_ROW},
    {"channel", FP4S_GROUP_CHANNEL}, {"token", FP4S_GROUP_ROW}, {"column", FP4S_GROUP_CHANNEL},
};
#define NAMES(t) t, sizeof t / sizeof t[0]

int fp4s_dz_tie_parse(const char *s, fp4s_dz_tie *out)
{
    int v = 0, rc = fp4s_dname_parse(NAMES(dz_ties), 3, "dead-zone tie", out ? s : NULL, &v);
    if (!rc) *out = (fp4s_dz_tie)v;
    return rc;
}

const char *fp4s_dz_tie_name(fp4s_dz_tie t) { return fp4s_dname_of(NAMES(dz_ties), (int)t); }

int fp4s_group_parse(const char *s, fp4s_group *out)
{
    int v = 0, rc = fp4s_dname_parse(NAMES(groups), 4, "grouping", out ? s : NULL, &v);
    if (!rc) *out = (fp4s_group)v;
    return rc;
}

const char *fp4s_group_name(fp4s_group g) { return fp4s_dname_of(NAMES(groups), (int)g); }

void fp4s_decomp_opts_defaults(fp4s_decomp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dz_tie = FP4S_DZ_TIE_SPEC;
    o->by = FP4S_GROUP_TENSOR;
    o->chunk_elems = 0; /* automatic: 2^21, 2^24 on the GPU */
    o->max_groups = (size_t)1 << 20;
    o->device = FP4S_DEVICE_CPU;
    o->keep_bytes = FP4S_DECOMP_KEEP_AUTO;
}

/* ---- the field table ------------------------------------------------------------
 * One row per member of fp4s_decomp_result, in output order (JSON, CSV,
 * HDF5 and the record type of fp4scope/record.h): X(member, COUNT or REAL,
 * unit, description). */
#define DECOMP_FIELDS(X) \
    X(n, COUNT, "elements", "finite elements decomposed") \
    X(energy_total, REAL, "x^2", "||e||^2, e = Q(x) - x") \
    X(energy_scale, REAL, "x^2", "||e_scale||^2, e_scale = Q(x) - Q*(x)") \
    X(energy_deadzone, REAL, "x^2", "||e_dz||^2 (Q*(x) - x on the dead zone)") \
    X(energy_grid, REAL, "x^2", "||e_grid||^2 (Q*(x) - x elsewhere)") \
    X(cross_scale_grid, REAL, "x^2", "2<e_scale, e_grid>") \
    X(cross_scale_deadzone, REAL, "x^2", "2<e_scale, e_dz> (0 under CEIL)") \
    X(cross_deadzone_grid, REAL, "x^2", "2<e_dz, e_grid> (0: disjoint supports)") \
    X(ratio_scale, REAL, "1", "energy_scale / energy_total") \
    X(ratio_deadzone, REAL, "1", "energy_deadzone / energy_total") \
    X(ratio_grid, REAL, "1", "energy_grid / energy_total") \
    X(cos_scale_grid, REAL, "1", "cos(e_scale, e_grid)") \
    X(deadzone_fraction, REAL, "1", "share of elements in the dead zone") \
    X(relative_error, REAL, "1", "||e|| / ||x||") \
    X(snr_db, REAL, "dB", "10 log10(||x||^2/||e||^2), dB") \
    X(ratio_cross, REAL, "1", "sum of the cross terms / energy_total") \
    X(ratio_removable, REAL, "1", "1 - ratio_deadzone - ratio_grid: what a perfect scale removes") \
    X(energy_x, REAL, "x^2", "||x||^2") \
    X(energy_scale_round, REAL, "x^2", "e_scale energy on rounding elements") \
    X(energy_scale_clip, REAL, "x^2", "e_scale energy on clipped elements") \
    X(energy_scale_underflow, REAL, "x^2", "e_scale energy in underflowing blocks") \
    X(residual_norm, REAL, "x", "||e||") \
    X(mean_abs_error, REAL, "x", "mean |e|") \
    X(clip_fraction, REAL, "1", "share of elements that saturate") \
    X(underflow_fraction, REAL, "1", "share of blocks whose scale underflows") \
    X(gamma_mean, REAL, "1", "mean of gamma = s_b / s*_b over blocks") \
    X(gamma_std, REAL, "1", "std of gamma") \
    X(gamma_min, REAL, "1", "min gamma") \
    X(gamma_max, REAL, "1", "max gamma") \
    X(delta_mean, REAL, "1", "mean of delta = log2 gamma") \
    X(delta_std, REAL, "1", "std of delta") \
    X(delta_min, REAL, "1", "min delta") \
    X(delta_max, REAL, "1", "max delta") \
    X(amax, REAL, "x", "max |x|") \
    X(max_residual, REAL, "x", "worst |e - (e_scale + e_dz + e_grid)| of one element") \
    X(identity_residual, REAL, "1", "relative residual of the energy identity") \
    X(blocks, COUNT, "blocks", "blocks decomposed") \
    X(zero_blocks, COUNT, "blocks", "all-zero blocks") \
    X(underflow_blocks, COUNT, "blocks", "blocks whose real scale underflows") \
    X(gamma_blocks, COUNT, "blocks", "blocks with amax > 0") \
    X(deadzone, COUNT, "elements", "elements in the dead zone") \
    X(deadzone_ties, COUNT, "elements", "elements exactly at |x/s*| = 0.25") \
    X(zeros, COUNT, "elements", "elements exactly 0") \
    X(clipped, COUNT, "elements", "elements that saturate") \
    X(nonfinite, COUNT, "elements", "NaN or Inf inputs") \
    X(nan, COUNT, "elements", "NaN inputs") \
    X(inf, COUNT, "elements", "Inf inputs") \
    X(nonfinite_blocks, COUNT, "blocks", "blocks excluded for non-finite input") \
    X(excluded, COUNT, "elements", "finite elements excluded with those blocks") \
    X(nonfinite_output, COUNT, "blocks", "blocks excluded because Q(x) was not finite") \
    X(scale_clamped, COUNT, "blocks", "NVFP4 blocks whose unrounded E4M3 scale clamps at 448")

#define FIELD_ROW(f, kind, unit, d) {#f, FT_##kind == FP4S_FT_U64, offsetof(fp4s_decomp_result, f), d},
#define FT_COUNT FP4S_FT_U64
#define FT_REAL FP4S_FT_F64
static const fp4s_decomp_field fields[] = {DECOMP_FIELDS(FIELD_ROW)};

#define RECORD_ROW(f, kind, unit, d) \
    {#f, FT_##kind, offsetof(fp4s_decomp_result, f), 1, -1, 0, NULL, FP4S_FF_OUTPUT, unit, d, -1},
static const fp4s_rfield record_rows[] = {
    DECOMP_FIELDS(RECORD_ROW)
    {"reserved", FP4S_FT_U32, offsetof(fp4s_decomp_result, reserved), 14, -1, 0, NULL, 0, "", "zero", -1},
};

const fp4s_rtype *fp4s_rtype_decomp_result(void)
{
    static const fp4s_rtype t = {"decomp_result", sizeof(fp4s_decomp_result), record_rows,
                                 sizeof record_rows / sizeof record_rows[0]};
    return &t;
}

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
    fp4s_dextr_merge(&a->x, &p->x);
}

void fp4s_part_add(part *a, const part *p) { fp4s_dk_part_add(a, p); }

void fp4s_xacc_init(xacc *a)
{
    memset(a, 0, sizeof *a);
    fp4s_dextr_init(&a->x);
}

void fp4s_part_init(part *p) { fp4s_dk_part_init(p); }

void fp4s_xacc_merge(xacc *a, const xacc *b)
{
    for (int i = 0; i < S_N; i++) xs_merge(&a->s[i], &b->s[i]);
    for (int i = 0; i < C_NUM; i++) a->c[i] += b->c[i];
    fp4s_dextr_merge(&a->x, &b->x);
}

void fp4s_chacc_merge(chacc *a, const chacc *b)
{
    for (int i = 0; i < S_CH; i++) xs_merge(&a->s[i], &b->s[i]);
    for (int i = 0; i < C_CH; i++) a->c[i] += b->c[i];
    if (b->amax > a->amax) a->amax = b->amax;
    if (b->res > a->res) a->res = b->res;
}

static double safe_div(double a, double b) { return b != 0.0 ? a / b : NAN; }

/* Mean and standard deviation of n values from their sum and sum of squares. */
static void mean_std(double sum, double sum2, double n, double *mean, double *std)
{
    *mean = sum / n;
    *std = sqrt(fmax(0.0, sum2 / n - *mean * *mean));
}

/* Turn sums, counts and extremes into a result. s has ns sums (S_CH for
 * channels: no block statistics). */
static void finish(const double *s, int ns, const uint64_t *c, int nc, const dextr *x, fp4s_decomp_result *r)
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
        r->scale_clamped = c[C_CLAMP];
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
    r->amax = r->n ? x->amax : NAN;
    r->max_residual = r->n ? x->res : NAN;
    double sum_parts = s[S_ES2] + s[S_EDZ2] + s[S_EG2] + 2.0 * (s[S_CSG] + s[S_CSD] + s[S_CDG]);
    r->identity_residual = e2 > 0.0 ? fabs(e2 - sum_parts) / e2 : (sum_parts == 0.0 ? 0.0 : NAN);
    /* the block statistics: NaN without blocks (channels) or without a block of gamma */
    r->underflow_fraction = NAN;
    r->gamma_mean = r->gamma_std = r->gamma_min = r->gamma_max = NAN;
    r->delta_mean = r->delta_std = r->delta_min = r->delta_max = NAN;
    if (ns > S_CH && nc > C_CH) {
        r->underflow_fraction = safe_div((double)r->underflow_blocks, (double)r->blocks);
        double gb = (double)r->gamma_blocks;
        if (gb > 0) {
            mean_std(s[S_GAM], s[S_GAM2], gb, &r->gamma_mean, &r->gamma_std);
            mean_std(s[S_DEL], s[S_DEL2], gb, &r->delta_mean, &r->delta_std);
            r->gamma_min = x->gmin;
            r->gamma_max = x->gmax;
            r->delta_min = x->dmin;
            r->delta_max = x->dmax;
        }
    }
}

void fp4s_xacc_finish(const xacc *a, fp4s_decomp_result *r)
{
    double s[S_N];
    for (int i = 0; i < S_N; i++) s[i] = xs_value(&a->s[i]);
    finish(s, S_N, a->c, C_NUM, &a->x, r);
}

void fp4s_part_finish(const part *p, fp4s_decomp_result *r)
{
    finish(p->s, S_N, p->c, C_NUM, &p->x, r);
}

void fp4s_chacc_finish(const chacc *a, fp4s_decomp_result *r)
{
    double s[S_CH];
    for (int i = 0; i < S_CH; i++) s[i] = xs_value(&a->s[i]);
    const dextr x = {0, 0, 0, 0, a->amax, a->res};
    finish(s, S_CH, a->c, C_CH, &x, r);
}

/* ---- lanes of the element kernels ---- */
void fp4s_lanes_reduce(lanes *ln, part *p)
{
    for (int k = 0; k < S_CH + 4; k++) {
        const double *l = ln->l[k];
        double s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        if (k < S_CH) p->s[k] += s;
        else p->c[(int[]){C_DZ, C_DZTIE, C_ZEROS, C_CLIP}[k - S_CH]] += (uint64_t)s;
    }
    for (int j = 0; j < LW; j++)
        if (ln->r[j] > p->x.res) p->x.res = ln->r[j];
    memset(ln, 0, sizeof *ln);
}
