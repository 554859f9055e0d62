/* Unit tests of the packed quantized HDF5 file (lib/io/qfile.c): round trips
 * for every format and packing against fp4s_quantize's own outputs, streaming
 * by chunks, and the failures that must leave no file behind. */
#include <fp4scope/qfile.h>
#include <fp4scope/tensor.h>
#include "io/h5_internal.h"

#include "../check_main.h"
#include <hdf5.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void setup(void) { check_dir_make("fp4s_test_qfile."); }
static void teardown(void) { check_dir_remove(); }

/* deterministic data with a zero block and a wide dynamic range */
static float *make_data(size_t rows, size_t cols, unsigned seed)
{
    float *x = malloc(rows * cols * sizeof *x);
    uint32_t st = seed * 2654435761u + 1;
    for (size_t i = 0; i < rows * cols; i++) {
        st = st * 1664525u + 1013904223u;
        float u = (float)((st >> 8) & 0xffff) / 65536.0f - 0.5f;
        x[i] = u * ldexpf(1.0f, (int)((st >> 24) % 9) - 4);
    }
    for (size_t j = 0; j < 32 && j < cols; j++) x[j] = 0.0f;
    return x;
}

/* Quantize x in chunks through the qfile writer, keep the unpacked outputs. */
typedef struct {
    fp4s_spec s;
    fp4s_tscale ts;
    uint8_t *codes, *scales;
    float *sf;
    size_t scale_rows, scale_cols;
} qrun;

static void quantize_to_file(const char *profile, fp4s_format fmt, size_t rows, size_t cols,
                             size_t chunk, const char *path, qrun *q)
{
    ck_assert_int_eq(fp4s_spec_profile(&q->s, fmt, profile), 0);
    float *x = make_data(rows, cols, 5);
    float amax = fp4s_amax(x, rows, cols, cols, NULL);
    ck_assert_int_eq(fp4s_tscale_init(&q->s, amax, &q->ts), 0);
    size_t nb = fp4s_spec_blocks_per_row(&q->s, cols);
    q->codes = calloc(rows, cols);
    bool fp4 = fmt != FP4S_FP8;
    size_t tr = 1;
    if (fp4) {
        q->scale_rows = rows;
        q->scale_cols = nb;
        q->scales = calloc(rows, nb);
    } else if (q->s.fp8_gran == FP4S_FP8_TENSOR) {
        q->scale_rows = q->scale_cols = 1;
        q->sf = calloc(1, sizeof(float));
        tr = rows;
    } else {
        tr = q->s.fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
        q->scale_rows = (rows + tr - 1) / tr;
        q->scale_cols = nb;
        q->sf = calloc(q->scale_rows * nb, sizeof(float));
    }
    fp4s_qfile_opts o;
    fp4s_qfile_opts_defaults(&o);
    o.source = "unit-test";
    o.tool = "test_qfile";
    fp4s_qfile *qf;
    ck_assert_int_eq(fp4s_qfile_create(path, &q->s, &q->ts, rows, cols, &o, &qf), 0);
    fp4s_qstats st = {0};
    for (size_t r0 = 0; r0 < rows; r0 += chunk) {
        size_t n = rows - r0 < chunk ? rows - r0 : chunk;
        fp4s_qout out = {0};
        out.codes = q->codes + r0 * cols;
        out.ld_codes = cols;
        float *sfc = NULL;
        if (fp4) {
            out.scales = q->scales + r0 * nb;
            out.ld_scales = nb;
        } else {
            sfc = q->s.fp8_gran == FP4S_FP8_TENSOR ? q->sf : q->sf + (r0 / tr) * nb;
            out.scale_f32 = sfc;
            out.ld_scale_f32 = q->scale_cols;
        }
        ck_assert_int_eq(fp4s_quantize(&q->s, &q->ts, x + r0 * cols, n, cols, cols, r0, &out, &st), 0);
        ck_assert_int_eq(fp4s_qfile_write(qf, n, out.codes, cols, out.scales, nb, sfc, q->scale_cols), 0);
    }
    ck_assert_int_eq(fp4s_qfile_set_stats(qf, &st), 0);
    ck_assert_int_eq(access(path, F_OK), -1); /* not there before close */
    ck_assert_int_eq(fp4s_qfile_close(&qf), 0);
    ck_assert_ptr_null(qf);
    free(x);
}

static void qrun_free(qrun *q)
{
    free(q->codes);
    free(q->scales);
    free(q->sf);
}

static void check_round_trip(const char *profile, fp4s_format fmt, size_t rows, size_t cols, size_t chunk)
{
    qrun q = {0};
    quantize_to_file(profile, fmt, rows, cols, chunk, check_path("q.h5"), &q);
    fp4s_qfile_data d;
    ck_assert_int_eq(fp4s_qfile_read(check_path("q.h5"), &d), 0);
    ck_assert_int_eq(d.format, fmt);
    ck_assert_uint_eq(d.rows, rows);
    ck_assert_uint_eq(d.cols, cols);
    ck_assert_uint_eq(d.block, q.s.block);
    ck_assert_int_eq(d.packing, q.s.packing);
    ck_assert_str_eq(d.profile, q.s.profile);
    ck_assert_mem_eq(d.codes, q.codes, rows * cols);
    ck_assert_uint_eq(d.scale_rows, q.scale_rows);
    ck_assert_uint_eq(d.scale_cols, q.scale_cols);
    if (fmt != FP4S_FP8) {
        ck_assert_mem_eq(d.scales, q.scales, q.scale_rows * q.scale_cols);
        /* dequantizing what was read equals dequantizing what was written */
        float *a = malloc(rows * cols * sizeof(float)), *b = malloc(rows * cols * sizeof(float));
        ck_assert_int_eq(fp4s_dequantize(&q.s, &q.ts, q.codes, cols, q.scales, q.scale_cols, NULL, 0,
                                         rows, cols, 0, a, cols), 0);
        ck_assert_int_eq(fp4s_dequantize(&q.s, &q.ts, d.codes, cols, d.scales, d.scale_cols, NULL, 0,
                                         rows, cols, 0, b, cols), 0);
        ck_assert_mem_eq(a, b, rows * cols * sizeof(float));
        free(a);
        free(b);
    } else {
        ck_assert_mem_eq(d.scale_f32, q.sf, q.scale_rows * q.scale_cols * sizeof(float));
    }
    if (fmt == FP4S_NVFP4 && q.s.global_scale != FP4S_GS_NONE) {
        ck_assert(d.tensor_scale == q.ts.stored);
        ck_assert(d.tensor_decode_scale == q.ts.s_dec);
    } else if (fmt == FP4S_MXFP4) {
        ck_assert(d.tensor_scale == 1.0f);
    }
    /* the attributes name the rules */
    hid_t f = H5Fopen(check_path("q.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    const char *must[] = {"format", "profile", "block", "spec", "tie", "packing", "nonfinite", "source",
                          "fp4scope_version", "decode", "element_lut", "stats_elements", "stats_rel_error", "shape"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        ck_assert_msg(H5Aexists(f, must[i]) > 0, "attribute %s missing", must[i]);
    if (fmt == FP4S_MXFP4) ck_assert(H5Aexists(f, "scale_rule") > 0);
    if (fmt == FP4S_NVFP4) ck_assert(H5Aexists(f, "recipe") > 0 && H5Aexists(f, "global_scale") > 0);
    if (fmt == FP4S_FP8) ck_assert(H5Aexists(f, "fp8_granularity") > 0);
    H5Fclose(f);
    fp4s_qfile_data_free(&d);
    ck_assert_ptr_null(d.codes);
    qrun_free(&q);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
    unlink(check_path("q.h5"));
}

START_TEST(qfile_round_trip_mxfp4_pairs) { check_round_trip("ocp", FP4S_MXFP4, 37, 96, 8); }
END_TEST
START_TEST(qfile_round_trip_mxfp4_split) { check_round_trip("ggml", FP4S_MXFP4, 19, 128, 5); }
END_TEST
START_TEST(qfile_round_trip_nvfp4_te) { check_round_trip("te", FP4S_NVFP4, 33, 64, 7); }
END_TEST
START_TEST(qfile_round_trip_nvfp4_2d) { check_round_trip("te-2d", FP4S_NVFP4, 40, 48, 16); }
END_TEST
START_TEST(qfile_round_trip_nvfp4_torchao) { check_round_trip("torchao", FP4S_NVFP4, 9, 32, 4); }
END_TEST
START_TEST(qfile_round_trip_fp8_tiles)
{
    check_round_trip("fp8-128x128", FP4S_FP8, 200, 256, 128);
    check_round_trip("fp8-1x128", FP4S_FP8, 7, 256, 3);
}
END_TEST

START_TEST(qfile_incomplete_or_bad_is_discarded)
{
    fp4s_spec s;
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_MXFP4, "ocp"), 0);
    ck_assert_int_eq(fp4s_tscale_init(&s, 1.0f, &ts), 0);
    fp4s_qfile *q = (fp4s_qfile *)1;
    ck_assert_int_eq(fp4s_qfile_create(check_path("a.h5"), &s, &ts, 4, 40, NULL, &q), FP4S_ESHAPE);
    ck_assert_ptr_null(q);
    ck_assert(strstr(fp4s_last_error(), "40 columns are not a multiple of the block size 32") != NULL);
    ck_assert_int_eq(fp4s_qfile_create("/nonexistent-fp4s-dir/a.h5", &s, &ts, 4, 64, NULL, &q), FP4S_EWRITE);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);

    uint8_t codes[4 * 64] = {0}, scales[4 * 2] = {127, 127, 127, 127, 127, 127, 127, 127};
    ck_assert_int_eq(fp4s_qfile_create(check_path("a.h5"), &s, &ts, 4, 64, NULL, &q), 0);
    ck_assert_int_eq(check_entries(NULL, NULL), 1); /* the temporary */
    ck_assert_int_eq(fp4s_qfile_write(q, 2, codes, 64, scales, 2, NULL, 0), 0);
    ck_assert_int_eq(fp4s_qfile_write(q, 3, codes, 64, scales, 2, NULL, 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_qfile_write(q, 1, codes, 64, NULL, 2, NULL, 0), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_qfile_close(&q), FP4S_EINTERNAL);
    ck_assert(strstr(fp4s_last_error(), "only 2 of 4 rows written") != NULL);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);

    ck_assert_int_eq(fp4s_qfile_create(check_path("a.h5"), &s, &ts, 4, 64, NULL, &q), 0);
    fp4s_qfile_abort(&q);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);

    /* 2-D NVFP4 chunks must start on a 16-row boundary */
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_NVFP4, "te-2d"), 0);
    ck_assert_int_eq(fp4s_tscale_init(&s, 1.0f, &ts), 0);
    ck_assert_int_eq(fp4s_qfile_create(check_path("b.h5"), &s, &ts, 32, 64, NULL, &q), 0);
    uint8_t c2[5 * 64] = {0}, s2[5 * 4] = {0};
    ck_assert_int_eq(fp4s_qfile_write(q, 5, c2, 64, s2, 4, NULL, 0), 0);
    ck_assert_int_eq(fp4s_qfile_write(q, 5, c2, 64, s2, 4, NULL, 0), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "not a multiple of 16") != NULL);
    fp4s_qfile_abort(&q);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);
}
END_TEST

START_TEST(qfile_read_rejects_foreign_files)
{
    fp4s_qfile_data d;
    ck_assert_int_eq(fp4s_qfile_read(check_path("none.h5"), &d), FP4S_EOPEN);
    fp4s_outfile *o;
    int64_t f;
    float v[64] = {0};
    ck_assert_int_eq(fp4s_h5_create(check_path("plain.h5"), &o, &f), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "codes", v, 2, 32, 0), 0);
    ck_assert_int_eq(fp4s_h5_finish("test", &o, &f, true), 0);
    ck_assert_int_eq(fp4s_qfile_read(check_path("plain.h5"), &d), FP4S_EFORMAT);
    ck_assert(strstr(fp4s_last_error(), "not an fp4scope quantized file") != NULL);
    ck_assert_ptr_null(d.codes);

    qrun q = {0};
    quantize_to_file("ocp", FP4S_MXFP4, 4, 64, 4, check_path("v.h5"), &q);
    qrun_free(&q);
    hid_t h = H5Fopen(check_path("v.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_eq(fp4s_h5_attr_i64(h, "schema_version", 99), 0);
    H5Fclose(h);
    ck_assert_int_eq(fp4s_qfile_read(check_path("v.h5"), &d), FP4S_EVERSION);
    h = H5Fopen(check_path("v.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_eq(fp4s_h5_attr_i64(h, "schema_version", 1), 0);
    H5Ldelete(h, "scales", H5P_DEFAULT);
    H5Fclose(h);
    ck_assert_int_eq(fp4s_qfile_read(check_path("v.h5"), &d), FP4S_EFORMAT);
    ck_assert(strstr(fp4s_last_error(), "/scales missing") != NULL);
}
END_TEST

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    Suite *s = suite_create("qfile");
    const check_case tests[] = {
        CHECK_CASE(qfile_round_trip_mxfp4_pairs),
        CHECK_CASE(qfile_round_trip_mxfp4_split),
        CHECK_CASE(qfile_round_trip_nvfp4_te),
        CHECK_CASE(qfile_round_trip_nvfp4_2d),
        CHECK_CASE(qfile_round_trip_nvfp4_torchao),
        CHECK_CASE(qfile_round_trip_fp8_tiles),
        CHECK_CASE(qfile_incomplete_or_bad_is_discarded),
        CHECK_CASE(qfile_read_rejects_foreign_files),
    };
    check_add_cases(s, tests, CHECK_NCASES(tests), setup, teardown, 0);
    return check_run(s, CK_NORMAL);
}
