/* The packed quantized HDF5 file: see <fp4scope/qfile.h> for the schema. */
#include "h5_internal.h"
#include "internal.h"

#include <fp4scope/qfile.h>
#include <fp4scope/version.h>

#include <hdf5.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fp4s_qfile {
    char *path;
    fp4s_spec spec;
    size_t rows, cols, written;
    size_t tile_rows;          /* FP8: rows per scale row */
    size_t scale_rows, scale_cols;
    fp4s_outfile *of;
    hid_t file;
    hid_t d_codes, d_scales;
    hid_t d_rscale, d_rdec;    /* row-scaled NVFP4: /row_scale, /row_decode_scale ([rows, 1]) */
    size_t rs_written;         /* rows whose row scales are written */
    uint8_t *pack;             /* packing buffer for one chunk */
    size_t pack_cap;
    float *sbuf;               /* FP8 scale copy when strided */
    size_t sbuf_cap;
};

void fp4s_qfile_opts_defaults(fp4s_qfile_opts *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->source = "";
    o->source_rank = 2;
    o->tool = "";
}

static bool is_fp4(const fp4s_spec *s) { return s->format == FP4S_MXFP4 || s->format == FP4S_NVFP4; }
static bool row_scaled(const fp4s_spec *s) { return s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW; }

static int h5fail(const char *path, const char *what)
{
    return fp4s_error_set(FP4S_EWRITE, "%s: %s (HDF5: %s)", path, what, fp4s_h5_msg());
}

static hid_t dset_create(hid_t f, const char *name, hid_t type, size_t rows, size_t cols, size_t esz, int gzip)
{
    hsize_t dims[2] = {rows, cols};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = fp4s_h5_matrix_dcpl(rows, cols, esz, gzip);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return d;
}

static int dset_rows(hid_t d, hid_t mtype, size_t row0, size_t nrows, size_t cols, const void *buf)
{
    hid_t fsp = H5Dget_space(d);
    hsize_t start[2] = {row0, 0}, count[2] = {nrows, cols};
    H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t msp = H5Screate_simple(2, count, NULL);
    herr_t e = H5Dwrite(d, mtype, msp, fsp, H5P_DEFAULT, buf);
    H5Sclose(msp);
    H5Sclose(fsp);
    return e < 0 ? -1 : 0;
}

static int attr_f32_array(hid_t obj, const char *name, const float *v, size_t n)
{
    return fp4s_h5_attr_array(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, v, n);
}

static float tensor_decode_scale(const fp4s_spec *s, const fp4s_tscale *ts)
{
    if (row_scaled(s)) return 1.0f;
    if (s->format == FP4S_NVFP4 && s->global_scale != FP4S_GS_NONE) return ts->s_dec;
    return 1.0f;
}

static float tensor_scale_value(const fp4s_spec *s, const fp4s_tscale *ts)
{
    if (row_scaled(s)) return 1.0f;
    if (s->format == FP4S_NVFP4) return s->global_scale == FP4S_GS_NONE ? 1.0f : ts->stored;
    if (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR) return ts->fp8_scale;
    return 1.0f;
}

static const char *tensor_scale_meaning(const fp4s_spec *s)
{
    if (row_scaled(s))
        return "row-scaled: one tensor scale per row, /row_scale (the recorded value, global_scale's convention) "
               "and /row_decode_scale (the factor decode multiplies by); /tensor_scale is 1";
    if (s->format == FP4S_NVFP4) {
        switch (s->global_scale) {
        case FP4S_GS_ENCODE: return "encode scale S_enc = 2688/amax; decode multiplies by tensor_decode_scale = 1/S_enc";
        case FP4S_GS_DECODE: return "decode scale amax/2688; decode multiplies by tensor_decode_scale";
        case FP4S_GS_NONE:
        case FP4S_GS_COUNT: return "none: block scales alone (tensor scale 1)";
        }
    }
    if (s->format == FP4S_FP8)
        return s->fp8_gran == FP4S_FP8_TENSOR ? "FP8 per-tensor scale amax/448 (also in /scales)" : "unused (1): FP8 tile scales in /scales";
    return "unused (1): MXFP4 has no tensor scale";
}

static void decode_recipe(const fp4s_spec *s, size_t tile_rows, char *buf, size_t n)
{
    const char *head = "import h5py, numpy as np; f = h5py.File(PATH, 'r'); a = f.attrs; R, C = a['shape']; c = f['codes'][:]; ";
    if (is_fp4(s)) {
        const char *unpack = s->packing == FP4S_PACK_PAIRS
            ? "e = np.empty((R, C), np.uint8); e[:, 0::2] = c & 15; e[:, 1::2] = c >> 4; "
            : "c3 = c.reshape(R, C // 32, 16); e = np.concatenate([c3 & 15, c3 >> 4], axis=2).reshape(R, C); ";
        /* the float32 association of the engine's dequantization */
        const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
        bool scale_first = s->format == FP4S_NVFP4 && rt && rt->dequant == FP4S_NV_DQ_TOTAL &&
                           rt->tscale != FP4S_NV_TS_NONE;
        snprintf(buf, n, "%s%s"
                 "s = np.repeat(a['scale_lut'][f['scales'][:]], a['block'], axis=1); %s; "
                 "%s  # float32 throughout; element codes 0..15 carry the sign in bit 3",
                 head, unpack,
                 row_scaled(s) ? "t = f['row_decode_scale'][:]" : "t = np.float32(a['tensor_decode_scale'])",
                 scale_first ? "x = a['element_lut'][e] * (s * t)" : "x = (a['element_lut'][e] * s) * t");
    } else if (s->fp8_gran == FP4S_FP8_TENSOR) {
        snprintf(buf, n, "%sx = a['element_lut'][c] * f['scales'][0, 0]  # E4M3 bytes times the per-tensor scale", head);
    } else {
        snprintf(buf, n, "%ssc = np.repeat(np.repeat(f['scales'][:], %zu, axis=0)[:R], 128, axis=1); "
                 "x = a['element_lut'][c] * sc  # E4M3 bytes times the %s tile scale", head, tile_rows,
                 tile_rows == 1 ? "1x128" : "128x128");
    }
}

static int write_attrs(fp4s_qfile *q, const fp4s_tscale *ts, const fp4s_qfile_opts *o)
{
    hid_t f = (hid_t)q->file;
    const fp4s_spec *s = &q->spec;
    char desc[1024], recipe[1024];
    fp4s_spec_describe(s, desc, sizeof desc);
    decode_recipe(s, q->tile_rows, recipe, sizeof recipe);
    int64_t shape[2] = {(int64_t)q->rows, (int64_t)q->cols};
    int rc = 0;
    rc |= fp4s_h5_attr_str(f, "schema", "fp4scope-quant");
    rc |= fp4s_h5_attr_i64(f, "schema_version", FP4S_QFILE_SCHEMA_VERSION);
    rc |= fp4s_h5_attr_str(f, "fp4scope_version", fp4s_version());
    rc |= fp4s_h5_attr_str(f, "created_by", o->tool ? o->tool : "");
    rc |= fp4s_h5_attr_str(f, "source", o->source ? o->source : "");
    rc |= fp4s_h5_attr_array(f, "shape", H5T_STD_I64LE, H5T_NATIVE_INT64, shape, 2);
    rc |= fp4s_h5_attr_i64(f, "source_rank", o->source_rank ? o->source_rank : 2);
    rc |= fp4s_h5_attr_i64(f, "source_cols", (int64_t)(o->source_cols ? o->source_cols : q->cols));
    rc |= fp4s_h5_attr_i64(f, "padded_cols", (int64_t)(q->cols - (o->source_cols ? o->source_cols : q->cols)));
    rc |= fp4s_h5_attr_str(f, "format", fp4s_format_name(s->format));
    rc |= fp4s_h5_attr_str(f, "profile", s->profile);
    rc |= fp4s_h5_attr_i64(f, "block", s->block);
    rc |= fp4s_h5_attr_str(f, "spec", desc);
    rc |= fp4s_h5_attr_str(f, "tie", fp4s_tie_name(s->tie));
    rc |= fp4s_h5_attr_i64(f, "keep_neg_zero", s->keep_neg_zero);
    rc |= fp4s_h5_attr_str(f, "packing", fp4s_packing_name(s->packing));
    rc |= fp4s_h5_attr_str(f, "nonfinite", fp4s_nonfinite_name(s->nonfinite));
    if (s->format == FP4S_MXFP4) {
        rc |= fp4s_h5_attr_str(f, "scale_rule", fp4s_mx_rule_name(s->mx_rule));
        rc |= fp4s_h5_attr_i64(f, "zero_block_scale_code", s->mx_zero_block_code);
        rc |= fp4s_h5_attr_i64(f, "scale_is_ggml", s->mx_scale_is_ggml);
        rc |= fp4s_h5_attr_str(f, "scale_codec", "E8M0");
    } else if (s->format == FP4S_NVFP4) {
        rc |= fp4s_h5_attr_str(f, "recipe", fp4s_nv_recipe_name(s->nv_recipe));
        rc |= fp4s_h5_attr_str(f, "global_scale", fp4s_global_scale_name(s->global_scale));
        rc |= fp4s_h5_attr_i64(f, "tile2d", s->tile2d);
        rc |= fp4s_h5_attr_str(f, "scale_codec", "E4M3");
        rc |= fp4s_h5_attr_str(f, "scale_scope", fp4s_nv_scope_name(s->nv_scope));
        if (s->nv_input_scale > 0.0f) rc |= fp4s_h5_attr_f32(f, "input_scale", s->nv_input_scale);
    } else {
        rc |= fp4s_h5_attr_str(f, "fp8_granularity", fp4s_fp8_gran_name(s->fp8_gran));
        rc |= fp4s_h5_attr_str(f, "scale_codec", "float32");
    }
    rc |= fp4s_h5_attr_str(f, "element_codec", is_fp4(s) ? "E2M1" : "E4M3");
    rc |= fp4s_h5_attr_f32(f, "tensor_amax", ts->amax);
    rc |= fp4s_h5_attr_f32(f, "tensor_decode_scale", tensor_decode_scale(s, ts));
    rc |= fp4s_h5_attr_str(f, "tensor_scale_meaning", tensor_scale_meaning(s));
    float lut[256];
    if (is_fp4(s)) {
        for (int i = 0; i < 16; i++) lut[i] = fp4s_e2m1_decode((uint8_t)i);
        rc |= attr_f32_array(f, "element_lut", lut, 16);
        for (int i = 0; i < 256; i++) lut[i] = fp4s_scale_decode(s, (uint8_t)i);
        rc |= attr_f32_array(f, "scale_lut", lut, 256);
    } else {
        for (int i = 0; i < 256; i++) lut[i] = fp4s_e4m3_decode((uint8_t)i);
        rc |= attr_f32_array(f, "element_lut", lut, 256);
    }
    rc |= fp4s_h5_attr_str(f, "decode", recipe);
    if (rc) return h5fail(q->path, "cannot write attributes");
    return 0;
}

static void qfile_abort(fp4s_qfile **qp)
{
    if (!qp || !*qp) return;
    fp4s_qfile *q = *qp;
    if (q->d_codes >= 0) H5Dclose(q->d_codes);
    if (q->d_scales >= 0) H5Dclose(q->d_scales);
    if (q->d_rscale >= 0) H5Dclose(q->d_rscale);
    if (q->d_rdec >= 0) H5Dclose(q->d_rdec);
    fp4s_h5_finish(q->path, &q->of, &q->file, false);
    free(q->pack);
    free(q->sbuf);
    free(q->path);
    free(q);
    *qp = NULL;
}

static int qfile_create(const char *path, const fp4s_spec *s, const fp4s_tscale *ts,
                      size_t rows, size_t cols, const fp4s_qfile_opts *opts, fp4s_qfile **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_create: out is NULL");
    *out = NULL;
    if (!path || !s || !ts) return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_create: NULL argument");
    fp4s_qfile_opts dflt;
    if (!opts) {
        fp4s_qfile_opts_defaults(&dflt);
        opts = &dflt;
    }
    if (opts->gzip < 0 || opts->gzip > 9)
        return fp4s_error_set(FP4S_EINVAL, "%s: gzip level %d outside 0..9", path, opts->gzip);
    if (rows == 0 || cols == 0) return fp4s_error_set(FP4S_EEMPTY, "%s: nothing to write (%zu x %zu)", path, rows, cols);
    if (s->block == 0 || cols % s->block != 0)
        return fp4s_error_set(FP4S_ESHAPE, "%s: %zu columns are not a multiple of the block size %u", path, cols, s->block);
    fp4s_qfile *q = calloc(1, sizeof *q);
    if (!q || !(q->path = strdup(path))) {
        free(q);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    }
    q->spec = *s;
    q->rows = rows;
    q->cols = cols;
    q->file = -1;
    q->d_codes = q->d_scales = q->d_rscale = q->d_rdec = -1;
    if (is_fp4(s)) {
        q->scale_rows = rows;
        q->scale_cols = fp4s_spec_blocks_per_row(s, cols);
    } else if (s->fp8_gran == FP4S_FP8_TENSOR) {
        q->tile_rows = rows;
        q->scale_rows = q->scale_cols = 1;
    } else {
        q->tile_rows = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
        q->scale_rows = (rows + q->tile_rows - 1) / q->tile_rows;
        q->scale_cols = fp4s_spec_blocks_per_row(s, cols);
    }
    int rc = fp4s_h5_create(path, &q->of, &q->file);
    if (rc) {
        free(q->path);
        free(q);
        return rc;
    }
    hid_t f = (hid_t)q->file;
    size_t ccols = is_fp4(s) ? cols / 2 : cols;
    q->d_codes = dset_create(f, "codes", H5T_STD_U8LE, rows, ccols, 1, opts->gzip);
    if (q->d_codes < 0) {
        rc = h5fail(path, "cannot create /codes");
        goto fail;
    }
    q->d_scales = is_fp4(s) ? dset_create(f, "scales", H5T_STD_U8LE, q->scale_rows, q->scale_cols, 1, opts->gzip)
                            : dset_create(f, "scales", H5T_IEEE_F32LE, q->scale_rows, q->scale_cols, 4, opts->gzip);
    if (q->d_scales < 0) {
        rc = h5fail(path, "cannot create /scales");
        goto fail;
    }
    if (row_scaled(s)) {
        q->d_rscale = dset_create(f, "row_scale", H5T_IEEE_F32LE, rows, 1, 4, opts->gzip);
        q->d_rdec = dset_create(f, "row_decode_scale", H5T_IEEE_F32LE, rows, 1, 4, opts->gzip);
        if (q->d_rscale < 0 || q->d_rdec < 0) {
            rc = h5fail(path, "cannot create /row_scale");
            goto fail;
        }
    }
    {
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t d = H5Dcreate2(f, "tensor_scale", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        float v = tensor_scale_value(s, ts);
        herr_t e = d < 0 ? -1 : H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
        if (d >= 0) H5Dclose(d);
        H5Sclose(sp);
        if (e < 0) {
            rc = h5fail(path, "cannot write /tensor_scale");
            goto fail;
        }
    }
    rc = write_attrs(q, ts, opts);
    if (rc) goto fail;
    *out = q;
    return 0;
fail:
    qfile_abort(&q);
    return rc;
}

static int qfile_write(fp4s_qfile *q, size_t nrows, const uint8_t *codes, size_t ld_codes,
                     const uint8_t *scales, size_t ld_scales, const float *scale_f32, size_t ld_scale_f32)
{
    if (!q) return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_write: NULL file");
    const fp4s_spec *s = &q->spec;
    if (nrows == 0) return 0;
    if (nrows > q->rows - q->written)
        return fp4s_error_set(FP4S_EINVAL, "%s: %zu rows beyond the %zu declared", q->path,
                              nrows - (q->rows - q->written), q->rows);
    size_t align = fp4s_spec_row_align(s);
    if (align > 1 && q->written % align != 0)
        return fp4s_error_set(FP4S_EINVAL, "%s: chunk starts at row %zu, not a multiple of %zu", q->path, q->written, align);
    if (!codes || ld_codes < q->cols) return fp4s_error_set(FP4S_EINVAL, "%s: codes missing or stride too small", q->path);
    size_t row0 = q->written;
    if (is_fp4(s)) {
        if (!scales || ld_scales < q->scale_cols)
            return fp4s_error_set(FP4S_EINVAL, "%s: scales missing or stride too small", q->path);
        size_t pc = q->cols / 2, need = nrows * pc;
        if (need > q->pack_cap) {
            uint8_t *p = realloc(q->pack, need);
            if (!p) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", q->path);
            q->pack = p;
            q->pack_cap = need;
        }
        for (size_t r = 0; r < nrows; r++) {
            int rc = fp4s_pack_e2m1(s->packing, codes + r * ld_codes, q->cols, q->pack + r * pc);
            if (rc) return rc;
        }
        if (dset_rows(q->d_codes, H5T_NATIVE_UINT8, row0, nrows, pc, q->pack) < 0)
            return h5fail(q->path, "cannot write /codes");
        if (ld_scales == q->scale_cols) {
            if (dset_rows(q->d_scales, H5T_NATIVE_UINT8, row0, nrows, q->scale_cols, scales) < 0)
                return h5fail(q->path, "cannot write /scales");
        } else {
            for (size_t r = 0; r < nrows; r++)
                if (dset_rows(q->d_scales, H5T_NATIVE_UINT8, row0 + r, 1, q->scale_cols, scales + r * ld_scales) < 0)
                    return h5fail(q->path, "cannot write /scales");
        }
    } else {
        if (!scale_f32) return fp4s_error_set(FP4S_EINVAL, "%s: FP8 scales missing", q->path);
        for (size_t r = 0; r < nrows; r++)
            if (ld_codes != q->cols &&
                dset_rows(q->d_codes, H5T_NATIVE_UINT8, row0 + r, 1, q->cols, codes + r * ld_codes) < 0)
                return h5fail(q->path, "cannot write /codes");
        if (ld_codes == q->cols && dset_rows(q->d_codes, H5T_NATIVE_UINT8, row0, nrows, q->cols, codes) < 0)
            return h5fail(q->path, "cannot write /codes");
        size_t sr0, nsr;
        if (s->fp8_gran == FP4S_FP8_TENSOR) {
            sr0 = 0;
            nsr = row0 == 0 ? 1 : 0;
        } else {
            sr0 = row0 / q->tile_rows;
            nsr = (nrows + q->tile_rows - 1) / q->tile_rows;
        }
        if (ld_scale_f32 < q->scale_cols) ld_scale_f32 = q->scale_cols;
        for (size_t r = 0; r < nsr; r++)
            if (dset_rows(q->d_scales, H5T_NATIVE_FLOAT, sr0 + r, 1, q->scale_cols, scale_f32 + r * ld_scale_f32) < 0)
                return h5fail(q->path, "cannot write /scales");
    }
    q->written += nrows;
    return 0;
}

static int qfile_write_rows(fp4s_qfile *q, size_t nrows, const float *row_scale, const float *row_decode)
{
    if (!q || (nrows && (!row_scale || !row_decode)))
        return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_write_row_scales: NULL argument");
    if (!row_scaled(&q->spec))
        return fp4s_error_set(FP4S_EINVAL, "%s: the spec has one tensor scale, not one per row", q->path);
    if (nrows > q->rows - q->rs_written)
        return fp4s_error_set(FP4S_EINVAL, "%s: row scales of %zu rows beyond the %zu declared", q->path,
                              nrows - (q->rows - q->rs_written), q->rows);
    if (nrows == 0) return 0;
    if (dset_rows(q->d_rscale, H5T_NATIVE_FLOAT, q->rs_written, nrows, 1, row_scale) < 0 ||
        dset_rows(q->d_rdec, H5T_NATIVE_FLOAT, q->rs_written, nrows, 1, row_decode) < 0)
        return h5fail(q->path, "cannot write /row_scale");
    q->rs_written += nrows;
    return 0;
}

static int qfile_set_stats(fp4s_qfile *q, const fp4s_qstats *st)
{
    if (!q || !st) return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_set_stats: NULL argument");
    hid_t f = q->file;
    int rc = 0;
    rc |= fp4s_h5_attr_i64(f, "stats_elements", (int64_t)st->elements);
    rc |= fp4s_h5_attr_i64(f, "stats_blocks", (int64_t)st->blocks);
    rc |= fp4s_h5_attr_i64(f, "stats_saturated", (int64_t)st->saturated);
    rc |= fp4s_h5_attr_i64(f, "stats_zero_blocks", (int64_t)st->zero_blocks);
    rc |= fp4s_h5_attr_i64(f, "stats_nonfinite", (int64_t)st->nonfinite);
    rc |= fp4s_h5_attr_i64(f, "stats_nan", (int64_t)st->nan);
    rc |= fp4s_h5_attr_i64(f, "stats_inf", (int64_t)st->inf);
    rc |= fp4s_h5_attr_i64(f, "stats_nonfinite_blocks", (int64_t)st->nonfinite_blocks);
    rc |= fp4s_h5_attr_i64(f, "stats_neg_zero", (int64_t)st->neg_zero);
    rc |= fp4s_h5_attr_i64(f, "stats_scale_underflow", (int64_t)st->scale_underflow);
    rc |= fp4s_h5_attr_i64(f, "stats_scale_clamped", (int64_t)st->scale_clamped);
    double rel = st->x2 > 0 ? sqrt(st->err2 / st->x2) : 0.0;
    rc |= fp4s_h5_attr_f64(f, "stats_rel_error", rel);
    return rc ? fp4s_error_set(FP4S_EWRITE, "%s: cannot write stats attributes", q->path) : 0;
}

static int qfile_close(fp4s_qfile **qp)
{
    if (!qp || !*qp) return 0;
    fp4s_qfile *q = *qp;
    if (q->written != q->rows || (row_scaled(&q->spec) && q->rs_written != q->rows)) {
        int rc = fp4s_error_set(FP4S_EINTERNAL, "%s: only %zu of %zu rows written%s; output discarded",
                                q->path, q->written < q->rs_written || !row_scaled(&q->spec) ? q->written : q->rs_written,
                                q->rows, q->written == q->rows ? " with their row scales" : "");
        qfile_abort(qp);
        return rc;
    }
    herr_t e = 0;
    e |= H5Dclose(q->d_codes);
    e |= H5Dclose(q->d_scales);
    if (q->d_rscale >= 0) e |= H5Dclose(q->d_rscale);
    if (q->d_rdec >= 0) e |= H5Dclose(q->d_rdec);
    q->d_codes = q->d_scales = q->d_rscale = q->d_rdec = -1;
    if (e < 0) {
        int rc = h5fail(q->path, "cannot close datasets");
        qfile_abort(qp);
        return rc;
    }
    int rc = fp4s_h5_finish(q->path, &q->of, &q->file, true);
    free(q->pack);
    free(q->sbuf);
    free(q->path);
    free(q);
    *qp = NULL;
    return rc;
}

/* ---- reader ------------------------------------------------------------------- */
void fp4s_qfile_data_free(fp4s_qfile_data *d)
{
    if (!d) return;
    free(d->codes);
    free(d->scales);
    free(d->scale_f32);
    free(d->row_scale);
    free(d->row_decode_scale);
    memset(d, 0, sizeof *d);
}

static int read_i64_attr(hid_t o, const char *name, int64_t *v, size_t n)
{
    if (H5Aexists(o, name) <= 0) return -1;
    hid_t a = H5Aopen(o, name, H5P_DEFAULT);
    hid_t sp = H5Aget_space(a);
    int rc = (H5Sget_simple_extent_npoints(sp) == (hssize_t)n && H5Aread(a, H5T_NATIVE_INT64, v) >= 0) ? 0 : -1;
    H5Sclose(sp);
    H5Aclose(a);
    return rc;
}

static int read_f32_attr(hid_t o, const char *name, float *v)
{
    if (H5Aexists(o, name) <= 0) return -1;
    hid_t a = H5Aopen(o, name, H5P_DEFAULT);
    int rc = H5Aread(a, H5T_NATIVE_FLOAT, v) >= 0 ? 0 : -1;
    H5Aclose(a);
    return rc;
}

static int read_2d(hid_t f, const char *P, const char *name, hid_t mt, size_t esz, size_t rows, size_t cols, void **out)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: /%s missing", P, name);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    int rc = 0;
    if (nd != 2 || dims[0] != rows || dims[1] != cols) {
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: /%s has shape [%llu, %llu], expected [%zu, %zu]", P, name,
                            (unsigned long long)dims[0], (unsigned long long)dims[1], rows, cols);
    } else if (!(*out = malloc(rows * cols * esz + 1))) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", P);
    } else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: /%s: read failed (HDF5: %s)", P, name, fp4s_h5_msg());
    }
    H5Dclose(d);
    return rc;
}

static int qfile_read(const char *P, fp4s_qfile_data *d)
{
    if (!P || !d) return fp4s_error_set(FP4S_EINVAL, "fp4s_qfile_read: NULL argument");
    memset(d, 0, sizeof *d);
    char str[128];
    hid_t f = fp4s_h5_open(P, H5F_ACC_RDONLY, true);
    if (f < 0 && fp4s_h5_refused()) return fp4s_h5_refused();
    if (f < 0) return fp4s_error_set(FP4S_EOPEN, "%s: cannot open as HDF5 (HDF5: %s)", P, fp4s_h5_msg());
    int rc = 0;
    int64_t ver = 0, block = 0, shape[2] = {0, 0};
    uint8_t *packed = NULL;
    if (fp4s_h5_attr_get_str(f, "schema", str, sizeof str) != 1 || strcmp(str, "fp4scope-quant") != 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: not an fp4scope quantized file (attribute schema)", P);
        goto out;
    }
    if (read_i64_attr(f, "schema_version", &ver, 1) || ver < 1) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: schema_version missing", P);
        goto out;
    }
    if (ver > FP4S_QFILE_SCHEMA_VERSION) {
        rc = fp4s_error_set(FP4S_EVERSION, "%s: schema_version %lld is newer than %d", P, (long long)ver, FP4S_QFILE_SCHEMA_VERSION);
        goto out;
    }
    if (fp4s_h5_attr_get_str(f, "format", str, sizeof str) != 1 || fp4s_format_parse(str, &d->format)) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: attribute format missing or unknown", P);
        goto out;
    }
    if (fp4s_h5_attr_get_str(f, "packing", str, sizeof str) != 1) str[0] = '\0';
    if (strcmp(str, fp4s_packing_name(FP4S_PACK_PAIRS)) == 0) d->packing = FP4S_PACK_PAIRS;
    else if (strcmp(str, fp4s_packing_name(FP4S_PACK_SPLIT)) == 0) d->packing = FP4S_PACK_SPLIT;
    else {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: attribute packing missing or unknown ('%s')", P, str);
        goto out;
    }
    if (read_i64_attr(f, "block", &block, 1) || read_i64_attr(f, "shape", shape, 2) || block <= 0 ||
        shape[0] <= 0 || shape[1] <= 0 || shape[1] % block != 0) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: attributes block/shape missing or inconsistent", P);
        goto out;
    }
    d->block = (uint32_t)block;
    d->rows = (size_t)shape[0];
    d->cols = (size_t)shape[1];
    if (fp4s_h5_attr_get_str(f, "profile", d->profile, sizeof d->profile) != 1) d->profile[0] = '\0';
    if (read_f32_attr(f, "tensor_decode_scale", &d->tensor_decode_scale)) d->tensor_decode_scale = 1.0f;
    {
        hid_t ds = H5Dopen2(f, "tensor_scale", H5P_DEFAULT);
        if (ds < 0 || H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &d->tensor_scale) < 0) {
            if (ds >= 0) H5Dclose(ds);
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: /tensor_scale missing", P);
            goto out;
        }
        H5Dclose(ds);
    }
    bool fp4 = d->format != FP4S_FP8;
    if (fp4) {
        if (d->cols % 2 || (d->packing == FP4S_PACK_SPLIT && d->cols % 32)) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %zu columns cannot be packed as %s", P, d->cols, str);
            goto out;
        }
        rc = read_2d(f, P, "codes", H5T_NATIVE_UINT8, 1, d->rows, d->cols / 2, (void **)&packed);
        if (rc) goto out;
        d->codes = malloc(d->rows * d->cols);
        if (!d->codes) {
            rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", P);
            goto out;
        }
        for (size_t r = 0; r < d->rows && !rc; r++)
            rc = fp4s_unpack_e2m1(d->packing, packed + r * (d->cols / 2), d->cols, d->codes + r * d->cols);
        if (rc) goto out;
        d->scale_rows = d->rows;
        d->scale_cols = d->cols / d->block;
        rc = read_2d(f, P, "scales", H5T_NATIVE_UINT8, 1, d->scale_rows, d->scale_cols, (void **)&d->scales);
        /* row-scaled NVFP4: each row's tensor scales */
        if (!rc && H5Lexists(f, "row_decode_scale", H5P_DEFAULT) > 0) {
            rc = read_2d(f, P, "row_scale", H5T_NATIVE_FLOAT, 4, d->rows, 1, (void **)&d->row_scale);
            if (!rc) rc = read_2d(f, P, "row_decode_scale", H5T_NATIVE_FLOAT, 4, d->rows, 1,
                                  (void **)&d->row_decode_scale);
        }
    } else {
        rc = read_2d(f, P, "codes", H5T_NATIVE_UINT8, 1, d->rows, d->cols, (void **)&d->codes);
        if (rc) goto out;
        hid_t ds = H5Dopen2(f, "scales", H5P_DEFAULT);
        hsize_t dims[2] = {0, 0};
        if (ds >= 0) {
            hid_t sp = H5Dget_space(ds);
            if (H5Sget_simple_extent_ndims(sp) == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
            H5Sclose(sp);
            H5Dclose(ds);
        }
        if (dims[0] == 0 || dims[1] == 0 || dims[0] > d->rows) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: /scales missing or malformed", P);
            goto out;
        }
        d->scale_rows = (size_t)dims[0];
        d->scale_cols = (size_t)dims[1];
        rc = read_2d(f, P, "scales", H5T_NATIVE_FLOAT, 4, d->scale_rows, d->scale_cols, (void **)&d->scale_f32);
    }
out:
    free(packed);
    H5Fclose(f);
    if (rc) fp4s_qfile_data_free(d);
    return rc;
}

/* ---- the public entry points: HDF5's error printing off while they run ---- */
#define QUIET(call)                 \
    fp4s_h5_quiet q_;               \
    fp4s_h5_quiet_begin(&q_);       \
    call;                           \
    fp4s_h5_quiet_end(&q_)

void fp4s_qfile_abort(fp4s_qfile **qp) { QUIET(qfile_abort(qp)); }

int fp4s_qfile_create(const char *path, const fp4s_spec *s, const fp4s_tscale *ts, size_t rows,
                      size_t cols, const fp4s_qfile_opts *opts, fp4s_qfile **out)
{
    int rc;
    QUIET(rc = qfile_create(path, s, ts, rows, cols, opts, out));
    return rc;
}

int fp4s_qfile_write(fp4s_qfile *q, size_t nrows, const uint8_t *codes, size_t ld_codes,
                     const uint8_t *scales, size_t ld_scales, const float *scale_f32, size_t ld_scale_f32)
{
    int rc;
    QUIET(rc = qfile_write(q, nrows, codes, ld_codes, scales, ld_scales, scale_f32, ld_scale_f32));
    return rc;
}

int fp4s_qfile_write_row_scales(fp4s_qfile *q, size_t nrows, const float *row_scale, const float *row_decode)
{
    int rc;
    QUIET(rc = qfile_write_rows(q, nrows, row_scale, row_decode));
    return rc;
}

int fp4s_qfile_set_stats(fp4s_qfile *q, const fp4s_qstats *st)
{
    int rc;
    QUIET(rc = qfile_set_stats(q, st));
    return rc;
}

int fp4s_qfile_close(fp4s_qfile **qp)
{
    int rc;
    QUIET(rc = qfile_close(qp));
    return rc;
}

int fp4s_qfile_read(const char *P, fp4s_qfile_data *d)
{
    int rc;
    QUIET(rc = qfile_read(P, d));
    return rc;
}
