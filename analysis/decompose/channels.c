/* Per-channel report: ranking, selection, coverage, cost, HDF5 set writer. */
#include <fp4scope/channels.h>
#include <fp4scope/tensor.h>

#include <hdf5.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"
#include "io/h5_internal.h"

static const fp4s_dname scores[] = {{"residual", FP4S_SCORE_RESIDUAL},
                                     {"relative", FP4S_SCORE_RELATIVE},
                                     {"hcp", FP4S_SCORE_HCP},
                                     {"deadzone", FP4S_SCORE_DEADZONE}};

int fp4s_chscore_parse(const char *s, fp4s_chscore *out)
{
    int v = 0, rc = fp4s_dname_parse(scores, 4, 4, "score", out ? s : NULL, &v);
    if (!rc) *out = (fp4s_chscore)v;
    return rc;
}

const char *fp4s_chscore_name(fp4s_chscore s) { return fp4s_dname_of(scores, 4, (int)s); }

void fp4s_channels_opts_defaults(fp4s_channels_opts *o)
{
    memset(o, 0, sizeof *o);
    o->score = FP4S_SCORE_RESIDUAL;
    o->top = 0;
    o->ratio = 0.125;
    o->weight_tile2d = -1;
    o->n_out = 0;
    fp4s_decomp_opts_defaults(&o->decomp);
    o->decomp.by = FP4S_GROUP_CHANNEL;
}

static const double cov_grid[FP4S_COVERAGE_POINTS] = {
    0.01, 0.02, 0.05, 0.1, 0.125, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0};

/* ceil(r k) without being pushed up by the rounding of r k */
static size_t ceil_share(double r, size_t k)
{
    double v = r * (double)k;
    double c = ceil(v - 1e-9 * (v > 1 ? v : 1));
    if (c < 0) c = 0;
    if (c > (double)k) c = (double)k;
    return (size_t)c;
}

static int cmp_stat(const void *pa, const void *pb)
{
    const fp4s_channel_stat *a = pa, *b = pb;
    bool na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->channel > b->channel) - (a->channel < b->channel);
}

void fp4s_channels_free(fp4s_channels_report **r)
{
    if (!r || !*r) return;
    free((*r)->ch);
    free(*r);
    *r = NULL;
}

int fp4s_channels_rank(const fp4s_decomp *act, const fp4s_decomp *w, const fp4s_channels_opts *o,
                       fp4s_channels_report **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "channels: NULL output");
    *out = NULL;
    if (!act) return fp4s_error_set(FP4S_EINVAL, "channels: NULL activation");
    fp4s_channels_opts def;
    if (!o) {
        fp4s_channels_opts_defaults(&def);
        o = &def;
    }
    if (fp4s_decomp_by(act) != FP4S_GROUP_CHANNEL || (w && fp4s_decomp_by(w) != FP4S_GROUP_CHANNEL))
        return fp4s_error_set(FP4S_EINVAL, "channels: decompositions must be grouped by channel");
    size_t k = fp4s_decomp_cols(act);
    if (w && fp4s_decomp_cols(w) != k)
        return fp4s_error_set(FP4S_ESHAPE, "channels: weight has %zu columns, activation has K = %zu",
                              fp4s_decomp_cols(w), k);
    if (o->score == FP4S_SCORE_HCP && !w)
        return fp4s_error_set(FP4S_EINVAL, "channels: score hcp needs a weight (--weight)");
    if (o->top == 0 && !(o->ratio > 0.0 && o->ratio <= 1.0))
        return fp4s_error_set(FP4S_EINVAL, "channels: ratio %g outside (0, 1]", o->ratio);
    if (k == 0) return fp4s_error_set(FP4S_EEMPTY, "channels: no channels");
    fp4s_channels_report *r = calloc(1, sizeof *r);
    if (!r) return fp4s_error_set(FP4S_ENOMEM, "channels: out of memory");
    r->ch = calloc(k, sizeof *r->ch);
    if (!r->ch) {
        free(r);
        return fp4s_error_set(FP4S_ENOMEM, "channels: out of memory for %zu channels", k);
    }
    r->k = k;
    r->tokens = fp4s_decomp_rows(act);
    r->score = o->score;
    r->top = o->top;
    r->ratio = o->top ? NAN : o->ratio;
    fp4s_decomp_summary(act, &r->summary);
    if (w) {
        r->have_weight = true;
        r->weight_rows = fp4s_decomp_rows(w);
        fp4s_decomp_summary(w, &r->weight_summary);
    }
    double etot = 0.0;
    for (size_t j = 0; j < k; j++) {
        fp4s_decomp_result g;
        fp4s_decomp_group(act, j, &g);
        fp4s_channel_stat *c = &r->ch[j];
        c->channel = j;
        c->n = g.n;
        c->nonfinite = g.nonfinite;
        c->energy_total = g.energy_total;
        c->energy_scale = g.energy_scale;
        c->energy_deadzone = g.energy_deadzone;
        c->energy_grid = g.energy_grid;
        c->relative_error = g.relative_error;
        c->residual_norm = g.n ? g.residual_norm : NAN;
        c->amax = g.amax;
        c->deadzone_fraction = g.deadzone_fraction;
        c->mean_abs_dx = g.mean_abs_error;
        c->mean_abs_dw = c->hcp = NAN;
        if (w) {
            fp4s_decomp_result gw;
            fp4s_decomp_group(w, j, &gw);
            c->mean_abs_dw = gw.mean_abs_error;
            c->hcp = c->mean_abs_dx + c->mean_abs_dw;
        }
        switch (o->score) {
        case FP4S_SCORE_RESIDUAL: c->score = c->residual_norm; break;
        case FP4S_SCORE_RELATIVE: c->score = c->relative_error; break;
        case FP4S_SCORE_HCP: c->score = c->hcp; break;
        case FP4S_SCORE_DEADZONE: c->score = c->deadzone_fraction; break;
        }
        etot += c->energy_total; /* summed again below in rank order for the curve */
    }
    qsort(r->ch, k, sizeof *r->ch, cmp_stat);
    r->count = o->top ? (o->top < k ? o->top : k) : ceil_share(o->ratio, k);
    if (r->count == 0) r->count = 1;
    for (size_t i = 0; i < k; i++) {
        r->ch[i].rank = i + 1;
        r->ch[i].selected = i < r->count;
    }
    /* coverage: prefix sums of the energy in rank order (plain double in a
     * fixed order: deterministic) */
    double *pre = malloc((k + 1) * sizeof *pre);
    if (!pre) {
        fp4s_channels_free(&r);
        return fp4s_error_set(FP4S_ENOMEM, "channels: out of memory");
    }
    pre[0] = 0.0;
    for (size_t i = 0; i < k; i++) {
        double e = r->ch[i].energy_total;
        pre[i + 1] = pre[i] + (isfinite(e) ? e : 0.0);
    }
    r->energy_total = pre[k];
    (void)etot;
    for (int i = 0; i < FP4S_COVERAGE_POINTS; i++) {
        fp4s_coverage_point *p = &r->coverage[i];
        p->ratio = cov_grid[i];
        p->channels = ceil_share(cov_grid[i], k);
        p->share = pre[k] > 0 ? pre[p->channels] / pre[k] : NAN;
    }
    r->ncoverage = FP4S_COVERAGE_POINTS;
    free(pre);
    /* cost */
    fp4s_channels_cost *c = &r->cost;
    c->tokens = r->tokens;
    c->k = k;
    c->selected = r->count;
    if (w) c->n_out = r->weight_rows;
    else if (o->n_out) c->n_out = o->n_out;
    else {
        c->n_out = k;
        c->n_out_assumed = true;
    }
    size_t bs = fp4s_decomp_spec(act)->block;
    c->padded = (c->selected + bs - 1) / bs * bs;
    double M = (double)c->tokens, N = (double)c->n_out, K = (double)k, P = (double)c->padded;
    c->flops_base = 2.0 * M * N * K;
    c->flops_extra = 2.0 * M * N * P;
    c->flops_ratio = c->flops_base > 0 ? c->flops_extra / c->flops_base : NAN;
    double per = 0.5 + 1.0 / (double)bs;
    c->bytes_base = (M + N) * K * per;
    c->bytes_extra = (M + N) * P * per + 4.0 * (double)c->selected;
    c->bytes_ratio = c->bytes_base > 0 ? c->bytes_extra / c->bytes_base : NAN;
    *out = r;
    return 0;
}

void fp4s_channels_weight_spec(const fp4s_spec *s, const fp4s_channels_opts *o, fp4s_spec *ws)
{
    *ws = *s;
    int t2 = o ? o->weight_tile2d : -1;
    if (t2 == 0) ws->tile2d = false;
    else if (t2 == 1) ws->tile2d = true;
    else ws->tile2d = s->tile2d || (s->format == FP4S_NVFP4 && s->nv_recipe == FP4S_NV_TE);
    if (ws->format != FP4S_NVFP4) ws->tile2d = false;
}

int fp4s_channels_finish(const fp4s_decomp *a, const fp4s_decomp *w, const fp4s_channels_opts *o,
                         const char *act_src, const char *weight_src, fp4s_channels_report **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "channels: NULL output");
    *out = NULL;
    if (!a) return fp4s_error_set(FP4S_EINVAL, "channels: NULL activation");
    if (w && fp4s_decomp_cols(w) != fp4s_decomp_cols(a))
        return fp4s_error_set(FP4S_ESHAPE, "%s: weight has %zu columns, activation %s has K = %zu",
                              weight_src ? weight_src : "weight", fp4s_decomp_cols(w), act_src ? act_src : "",
                              fp4s_decomp_cols(a));
    int rc = fp4s_channels_rank(a, w, o, out);
    if (!rc) (*out)->weight_tile2d = w && fp4s_decomp_spec(w)->tile2d;
    return rc;
}

int fp4s_channels_run(const fp4s_spec *s, const fp4s_channels_opts *o, const char *act_src,
                      const char *weight_src, fp4s_channels_report **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "channels: NULL output");
    *out = NULL;
    if (!s || !act_src) return fp4s_error_set(FP4S_EINVAL, "channels: NULL argument");
    fp4s_channels_opts def;
    if (!o) {
        fp4s_channels_opts_defaults(&def);
        o = &def;
    }
    if (o->score == FP4S_SCORE_HCP && !weight_src)
        return fp4s_error_set(FP4S_EINVAL, "channels: score hcp needs a weight (--weight)");
    fp4s_decomp_opts dop = o->decomp;
    dop.by = FP4S_GROUP_CHANNEL;
    fp4s_decomp *a = NULL, *w = NULL;
    int rc = fp4s_decomp_source(s, &dop, act_src, &a);
    if (rc) return rc;
    if (weight_src) {
        fp4s_spec ws;
        fp4s_channels_weight_spec(s, o, &ws);
        rc = fp4s_decomp_source(&ws, &dop, weight_src, &w);
    }
    if (!rc) rc = fp4s_channels_finish(a, w, o, act_src, weight_src, out);
    fp4s_decomp_close(&a);
    fp4s_decomp_close(&w);
    return rc;
}

int fp4s_channels_write_h5(const char *path, const fp4s_spec *s, const fp4s_channels_report *r,
                           const char *source, const char *weight)
{
    if (!path || !s || !r) return fp4s_error_set(FP4S_EINVAL, "channels: NULL argument");
    fp4s_h5_report w;
    int rc = fp4s_h5_report_begin(&w, path);
    if (rc) return rc;
    hid_t f = w.file;
    size_t k = r->k;
    int64_t *sel = malloc((r->count ? r->count : 1) * sizeof *sel);
    double *ssc = malloc((r->count ? r->count : 1) * sizeof *ssc);
    int64_t *rank = malloc(k * sizeof *rank);
    uint8_t *flag = malloc(k);
    double *col = malloc(k * sizeof *col);
    int bad = !sel || !ssc || !rank || !flag || !col;
    if (bad) fp4s_error_set(FP4S_ENOMEM, "out of memory");
    char desc[512];
    fp4s_spec_describe(s, desc, sizeof desc);
    hid_t fo = f;
    if (!bad) {
        if (!bad) bad = fp4s_h5_attr_str(fo, "fp4scope_schema", "fp4scope-channels/1") != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "source", source ? source : "") != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "weight", weight ? weight : "") != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "format", fp4s_format_name(s->format)) != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "profile", s->profile) != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "spec", desc) != 0;
        if (!bad) bad = fp4s_h5_attr_str(fo, "score", fp4s_chscore_name(r->score)) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "k", (int64_t)k) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "tokens", (int64_t)r->tokens) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "count", (int64_t)r->count) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "top", r->top ? (int64_t)r->top : -1) != 0;
        if (!bad) bad = fp4s_h5_attr_f64(fo, "ratio", r->ratio) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "n_out", (int64_t)r->cost.n_out) != 0;
        if (!bad) bad = fp4s_h5_attr_i64(fo, "padded", (int64_t)r->cost.padded) != 0;
        if (!bad) bad = fp4s_h5_attr_f64(fo, "flops_extra", r->cost.flops_extra) != 0;
        if (!bad) bad = fp4s_h5_attr_f64(fo, "flops_ratio", r->cost.flops_ratio) != 0;
        if (!bad) bad = fp4s_h5_attr_f64(fo, "bytes_extra", r->cost.bytes_extra) != 0;
        if (!bad) bad = fp4s_h5_attr_f64(fo, "bytes_ratio", r->cost.bytes_ratio) != 0;
    }
    if (!bad) {
        for (size_t i = 0; i < r->count; i++) {
            sel[i] = (int64_t)r->ch[i].channel;
            ssc[i] = r->ch[i].score;
        }
        if (!bad) bad = fp4s_h5_write_1d(f, "selected/channel", H5T_NATIVE_INT64, H5T_STD_I64LE, sel, r->count) != 0;
        if (!bad) bad = fp4s_h5_write_1d(f, "selected/score", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, ssc, r->count) != 0;
        for (size_t i = 0; i < k; i++) {
            rank[r->ch[i].channel] = (int64_t)r->ch[i].rank;
            flag[r->ch[i].channel] = r->ch[i].selected;
        }
        if (!bad) bad = fp4s_h5_write_1d(f, "channels/rank", H5T_NATIVE_INT64, H5T_STD_I64LE, rank, k) != 0;
        if (!bad) bad = fp4s_h5_write_1d(f, "channels/selected", H5T_NATIVE_UINT8, H5T_STD_U8LE, flag, k) != 0;
        static const struct { const char *name; size_t off; } cols[] = {
            {"score", offsetof(fp4s_channel_stat, score)},
            {"energy_total", offsetof(fp4s_channel_stat, energy_total)},
            {"energy_scale", offsetof(fp4s_channel_stat, energy_scale)},
            {"energy_deadzone", offsetof(fp4s_channel_stat, energy_deadzone)},
            {"energy_grid", offsetof(fp4s_channel_stat, energy_grid)},
            {"relative_error", offsetof(fp4s_channel_stat, relative_error)},
            {"residual_norm", offsetof(fp4s_channel_stat, residual_norm)},
            {"amax", offsetof(fp4s_channel_stat, amax)},
            {"deadzone_fraction", offsetof(fp4s_channel_stat, deadzone_fraction)},
            {"mean_abs_dx", offsetof(fp4s_channel_stat, mean_abs_dx)},
            {"mean_abs_dw", offsetof(fp4s_channel_stat, mean_abs_dw)},
            {"hcp", offsetof(fp4s_channel_stat, hcp)},
        };
        for (size_t c = 0; c < sizeof cols / sizeof cols[0] && !bad; c++) {
            for (size_t i = 0; i < k; i++) {
                double v;
                memcpy(&v, (const char *)&r->ch[i] + cols[c].off, sizeof v);
                col[r->ch[i].channel] = v;
            }
            char p[64];
            snprintf(p, sizeof p, "channels/%s", cols[c].name);
            if (!bad) bad = fp4s_h5_write_1d(f, p, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, col, k) != 0;
        }
        double cr[FP4S_COVERAGE_POINTS], cs[FP4S_COVERAGE_POINTS];
        int64_t cc[FP4S_COVERAGE_POINTS];
        for (size_t i = 0; i < r->ncoverage; i++) {
            cr[i] = r->coverage[i].ratio;
            cs[i] = r->coverage[i].share;
            cc[i] = (int64_t)r->coverage[i].channels;
        }
        if (!bad) bad = fp4s_h5_write_1d(f, "coverage/ratio", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, cr, r->ncoverage) != 0;
        if (!bad) bad = fp4s_h5_write_1d(f, "coverage/channels", H5T_NATIVE_INT64, H5T_STD_I64LE, cc, r->ncoverage) != 0;
        if (!bad) bad = fp4s_h5_write_1d(f, "coverage/share", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, cs, r->ncoverage) != 0;
    }
    free(sel);
    free(ssc);
    free(rank);
    free(flag);
    free(col);
    return fp4s_h5_report_end(&w, !bad, "writing the HDF5 channel set failed");
}
