/* Unit tests of the capture API: schema checks, writer round trips, listing,
 * pairs, verification, append, merge and the synthetic generator. */
#include <fp4scope/capture.h>
#include <fp4scope/units.h>

#include "../check_main.h"
#include <hdf5.h>
#include "../capture_test.h"
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void)
{
    check_dir_make("fp4s_capt_");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void teardown(void) { check_dir_remove(); }

static fp4s_capture *new_cap(const char *path)
{
    fp4s_capture *c = NULL;
    int rc = fp4s_capture_create(path, NULL, &c);
    ck_assert_msg(rc == 0, "create: %s", fp4s_last_error());
    return c;
}

/* A plain HDF5 file with a given schema attribute (NULL: none). */
static void plain_file(const char *path, const char *schema)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    if (schema) capture_put_schema(f, schema, false);
    H5Fclose(f);
}

static void read_raw(const char *file, const char *path, hid_t memtype, void *out)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    ck_assert_msg(d >= 0, "no dataset %s", path);
    ck_assert_int_ge(H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), 0);
    H5Dclose(d);
    H5Fclose(f);
}

/* ---- schema ---------------------------------------------------------------- */
START_TEST(schema_missing_attribute_is_eformat)
{
    plain_file(check_path("a.h5"), NULL);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("a.h5"), &e, &n), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "fp4scope_schema is missing"));
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "a.h5"));
}
END_TEST

START_TEST(schema_newer_major_is_eversion)
{
    plain_file(check_path("v2.h5"), "fp4scope-capture/2");
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("v2.h5"), &in), FP4S_EVERSION);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "newer than this reader"));
    fp4s_capture *c;
    ck_assert_int_eq(fp4s_capture_open_append(check_path("v2.h5"), NULL, &c), FP4S_EVERSION);
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(schema_newer_minor_is_accepted)
{
    plain_file(check_path("v13.h5"), "fp4scope-capture/1.3");
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("v13.h5"), &in), 0);
    ck_assert_int_eq(in.major, 1);
    ck_assert_int_eq(in.minor, 3);
    ck_assert(!in.synthetic);
}
END_TEST

/* A fixed-length UTF-8 string attribute (as h5py writes np.bytes_ with an
 * explicit UTF-8 type, and other HDF5 writers do) reads like any other: the
 * reader asked HDF5 for ASCII, which it does not convert from UTF-8. */
START_TEST(schema_fixed_length_utf8_is_read)
{
    const char *v = "fp4scope-capture/1";
    hid_t f = H5Fcreate(check_path("u.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    capture_put_schema(f, v, true);
    H5Fclose(f);
    fp4s_capture_info in;
    ck_assert_msg(fp4s_capture_info_read(check_path("u.h5"), &in) == 0, "%s", fp4s_last_error());
    ck_assert_str_eq(in.schema, v);
}
END_TEST

START_TEST(schema_malformed_is_eformat)
{
    plain_file(check_path("m.h5"), "fp4scope-capture/x");
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("m.h5"), &e, &n), FP4S_EFORMAT);
    plain_file(check_path("o.h5"), "other-schema/1");
    ck_assert_int_eq(fp4s_capture_list(check_path("o.h5"), &e, &n), FP4S_EFORMAT);
}
END_TEST

START_TEST(open_missing_not_hdf5_truncated)
{
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("none.h5"), &e, &n), FP4S_EOPEN);
    FILE *f = fopen(check_path("text.h5"), "w");
    fputs("hello, not hdf5\n", f);
    fclose(f);
    ck_assert_int_eq(fp4s_capture_list(check_path("text.h5"), &e, &n), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "not an HDF5 file"));
    /* an interrupted copy: a real capture cut in half */
    ck_assert_int_eq(fp4s_capture_synth(check_path("full.h5"), NULL), 0);
    FILE *in = fopen(check_path("full.h5"), "rb");
    fseek(in, 0, SEEK_END);
    long sz = ftell(in);
    fseek(in, 0, SEEK_SET);
    char *buf = malloc((size_t)sz);
    ck_assert_int_eq(fread(buf, 1, (size_t)sz, in), (size_t)sz);
    fclose(in);
    FILE *out = fopen(check_path("half.h5"), "wb");
    fwrite(buf, 1, (size_t)sz / 2, out);
    fclose(out);
    free(buf);
    int rc = fp4s_capture_list(check_path("half.h5"), &e, &n);
    ck_assert_int_eq(rc, FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "half.h5"));
}
END_TEST

/* ---- writer round trips -------------------------------------------------------- */
START_TEST(put_f32_bf16_f16_bit_exact_with_stride)
{
    fp4s_capture *c = new_cap(check_path("rt.h5"));
    enum { R = 5, K = 7, LD = 9 };
    float f[R * LD];
    uint16_t b[R * LD], h[R * LD];
    for (int i = 0; i < R * LD; i++) {
        uint32_t u = 0x9e3779b9u * (uint32_t)(i + 1);
        memcpy(&f[i], &u, 4);
        if (isnan(f[i])) f[i] = -0.0f; /* any bit pattern but NaN payloads */
        b[i] = (uint16_t)(u >> 7);
        h[i] = (uint16_t)(u >> 3);
    }
    ck_assert_int_eq(fp4s_capture_put(c, 3, "a.f32", "trainer", FP4S_DT_F32, f, R, K, LD, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 3, "a.bf16", "trainer", FP4S_DT_BF16, b, R, K, LD, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 3, "a.f16", "trainer", FP4S_DT_F16, h, R, K, LD, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_ptr_null(c);
    float rf[R * K];
    uint16_t rb[R * K], rh[R * K];
    read_raw(check_path("rt.h5"), "/steps/3/a.f32/trainer", H5T_NATIVE_FLOAT, rf);
    read_raw(check_path("rt.h5"), "/steps/3/a.bf16/trainer", H5T_NATIVE_UINT16, rb);
    /* float16 read as its own type: bytes unchanged */
    hid_t f16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(f16, 15, 10, 5, 0, 10);
    H5Tset_size(f16, 2);
    H5Tset_ebias(f16, 15);
    read_raw(check_path("rt.h5"), "/steps/3/a.f16/trainer", f16, rh);
    H5Tclose(f16);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            ck_assert_mem_eq(&rf[r * K + k], &f[r * LD + k], 4);
            ck_assert_uint_eq(rb[r * K + k], b[r * LD + k]);
            ck_assert_uint_eq(rh[r * K + k], h[r * LD + k]);
        }
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("rt.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(e[0].site, "a.bf16");
    ck_assert_int_eq(e[0].dtype, FP4S_DT_BF16);
    ck_assert_int_eq(e[1].dtype, FP4S_DT_F16);
    ck_assert_int_eq(e[2].dtype, FP4S_DT_F32);
    ck_assert_uint_eq(e[2].rows, R);
    ck_assert_uint_eq(e[2].cols, K);
    free(e);
}
END_TEST

START_TEST(put_appends_rows)
{
    fp4s_capture *c = new_cap(check_path("ap.h5"));
    float x[4 * 3];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(fp4s_capture_put(c, 0, "s", "rollout", FP4S_DT_F32, x + 4 * k, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_flush(c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "s", "rollout", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    float r[5 * 4];
    read_raw(check_path("ap.h5"), "/steps/0/s/rollout", H5T_NATIVE_FLOAT, r);
    for (int i = 0; i < 12; i++) ck_assert_float_eq(r[i], (float)i);
    for (int i = 0; i < 8; i++) ck_assert_float_eq(r[12 + i], (float)i);
}
END_TEST

START_TEST(put_rejects_bad_shapes_types_names)
{
    fp4s_capture *c = new_cap(check_path("bad.h5"));
    float x[16] = {0};
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, FP4S_CAPTURE_MAX_STEP + 1, "s", "trainer", FP4S_DT_F32, x, 2,
                                      3, 4, NULL), FP4S_ERANGE);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, FP4S_CAPTURE_MAX_STEP + 1, x, x, (int64_t[]){0}, NULL,
                                               NULL, 1), FP4S_ERANGE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 2, 3, 4, NULL), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_BF16, x, 2, 4, 4, NULL), FP4S_EDTYPE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "rollout", FP4S_DT_F32, x, 2, 5, 5, NULL), FP4S_ESHAPE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "share K"));
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "weight", FP4S_DT_F32, x, 2, 2, 2, NULL), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "a/b", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "logprobs", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "student", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, -3, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, -1, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_I32, x, 1, 4, 4, NULL), FP4S_EDTYPE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 1, 4, 3, NULL), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, NULL, 1, 4, 4, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0); /* NULL ok */
    fp4s_capture *c2;
    ck_assert_int_eq(fp4s_capture_create(check_path("bad.h5"), NULL, &c2), FP4S_EWRITE); /* exists */
}
END_TEST

START_TEST(logprobs_round_trip_and_field_consistency)
{
    fp4s_capture *c = new_cap(check_path("lp.h5"));
    float t[6] = {-1, -2, -3, -4, -5, -6}, r[6] = {-1.5f, -2, -3, -4, -5, -6.5f};
    int64_t seq[6] = {0, 0, 0, 1, 1, 1}, pos[6] = {0, 1, 2, 0, 1, 2};
    uint8_t m[6] = {1, 1, 0, 1, 1, 1};
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, t, r, seq, pos, m, 3), 0);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, t + 3, r + 3, seq + 3, pos + 3, m + 3, 3), 0);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, t, r, seq, NULL, m, 3), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, t, NULL, seq, pos, m, 3), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 4, t, r, seq, NULL, NULL, 6), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    float rt[6], rr[6];
    int64_t rs[6], rp[6];
    uint8_t rm[6];
    read_raw(check_path("lp.h5"), "/steps/2/logprobs/trainer", H5T_NATIVE_FLOAT, rt);
    read_raw(check_path("lp.h5"), "/steps/2/logprobs/rollout", H5T_NATIVE_FLOAT, rr);
    read_raw(check_path("lp.h5"), "/steps/2/logprobs/seq", H5T_NATIVE_INT64, rs);
    read_raw(check_path("lp.h5"), "/steps/2/logprobs/pos", H5T_NATIVE_INT64, rp);
    read_raw(check_path("lp.h5"), "/steps/2/logprobs/mask", H5T_NATIVE_UINT8, rm);
    ck_assert_mem_eq(rt, t, sizeof t);
    ck_assert_mem_eq(rr, r, sizeof r);
    ck_assert_mem_eq(rs, seq, sizeof seq);
    ck_assert_mem_eq(rp, pos, sizeof pos);
    ck_assert_mem_eq(rm, m, sizeof m);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("lp.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 8);
    const char *order[] = {"trainer", "rollout", "seq", "pos", "mask", "trainer", "rollout", "seq"};
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(e[i].site, "logprobs");
        ck_assert_str_eq(e[i].side, order[i]);
        ck_assert_uint_eq(e[i].rows, 1);
        ck_assert_uint_eq(e[i].cols, 6);
    }
    free(e);
    ck_assert_int_eq(fp4s_capture_verify(check_path("lp.h5")), 0);
}
END_TEST

START_TEST(scalars_round_trip_sorted_and_merged)
{
    fp4s_capture *c = new_cap(check_path("sc.h5"));
    float t[2] = {-1, -2}, r[2] = {-1.5f, -2};
    int64_t seq[2] = {0, 1};
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 10, t, r, seq, NULL, NULL, 2), 0);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 10, "reward", 0.25), 0);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 10, "acc", 0.5), 0);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 10, "reward", 0.75), 0); /* replaced */
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 2, "reward", -3.5), 0);  /* a step with scalars only */
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, t, r, seq, NULL, NULL, 2), 0);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 2, "step", 1), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 2, "a/b", 1), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 2, "", 1), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, -1, "x", 1), FP4S_ERANGE);
    ck_assert_int_eq(fp4s_capture_flush(c), 0);
    /* a committed step takes no more scalars; a new one does */
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 10, "late", 1), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "before the flush") != NULL);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 11, t, r, seq, NULL, NULL, 2), 0);
    ck_assert_int_eq(fp4s_capture_put_scalar(c, 11, "reward", NAN), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_scalar *v;
    size_t n;
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0x55); /* fresh allocations full of 0xAA: an entry's unset bytes show */
#endif
    ck_assert_int_eq(fp4s_capture_scalars(check_path("sc.h5"), &v, &n), 0);
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0);
#endif
    ck_assert_uint_eq(n, 4);
    /* whole entries compare equal when their fields do: the name's tail and
     * reserved[] are zero (fp4-rl's capture test compares them with memcmp) */
    for (size_t i = 0; i < n; i++) {
        const size_t l = strlen(v[i].name);
        for (size_t j = l; j < sizeof v[i].name; j++) ck_assert_msg(v[i].name[j] == 0, "entry %zu: name tail", i);
        for (size_t j = 0; j < sizeof v[i].reserved / sizeof v[i].reserved[0]; j++)
            ck_assert_msg(v[i].reserved[j] == 0, "entry %zu: reserved[%zu] = %#x", i, j, v[i].reserved[j]);
    }
    ck_assert(v[0].step == 2 && !strcmp(v[0].name, "reward") && v[0].value == -3.5);
    ck_assert(v[1].step == 10 && !strcmp(v[1].name, "acc") && v[1].value == 0.5);
    ck_assert(v[2].step == 10 && !strcmp(v[2].name, "reward") && v[2].value == 0.75);
    ck_assert(v[3].step == 11 && isnan(v[3].value));
    free(v);
    ck_assert_int_eq(fp4s_capture_verify(check_path("sc.h5")), 0); /* the readers take the attributes */
    /* merge keeps them */
    const char *in[1] = {check_path("sc.h5")};
    ck_assert_int_eq(fp4s_capture_merge(in, 1, check_path("scm.h5"), NULL), 0);
    ck_assert_int_eq(fp4s_capture_scalars(check_path("scm.h5"), &v, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert(v[2].step == 10 && v[2].value == 0.75);
    free(v);
    /* none */
    c = new_cap(check_path("sc0.h5"));
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_scalars(check_path("sc0.h5"), &v, &n), 0);
    ck_assert_uint_eq(n, 0);
    free(v);
}
END_TEST

START_TEST(const_weights_and_site_attributes)
{
    fp4s_capture *c = new_cap(check_path("w.h5"));
    float w[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(fp4s_capture_put(c, FP4S_CAPTURE_CONST_STEP, "layers.12.mlp.experts.7.down_proj",
                                      "weight", FP4S_DT_F32, w, 2, 4, 4, NULL), 0);
    fp4s_capture_meta m;
    fp4s_capture_meta_defaults(&m);
    m.token_offset = 256;
    ck_assert_int_eq(fp4s_capture_put(c, 0, "layers.12.mlp.experts.7.down_proj", "trainer",
                                      FP4S_DT_F32, w, 2, 4, 4, &m), 0);
    /* K of the activation must match the constant weight */
    ck_assert_int_eq(fp4s_capture_put(c, 0, "layers.12.mlp.experts.7.down_proj", "rollout",
                                      FP4S_DT_F32, w, 1, 3, 3, NULL), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    hid_t f = H5Fopen(check_path("w.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_gt(H5Lexists(f, "/weights", H5P_DEFAULT), 0);
    hid_t d = H5Dopen2(f, "/steps/0/layers.12.mlp.experts.7.down_proj/trainer", H5P_DEFAULT);
    long long v = -1;
    hid_t a = H5Aopen(d, "layer", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
    ck_assert_int_eq(v, 12);
    a = H5Aopen(d, "expert", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
    ck_assert_int_eq(v, 7);
    a = H5Aopen(d, "token_offset", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
    ck_assert_int_eq(v, 256);
    H5Dclose(d);
    H5Fclose(f);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("w.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(e[0].step, FP4S_CAPTURE_CONST_STEP);
    ck_assert_str_eq(e[0].side, "weight");
    ck_assert_str_eq(e[0].path, "/weights/layers.12.mlp.experts.7.down_proj");
    free(e);
}
END_TEST

START_TEST(list_sorts_steps_sites_naturally)
{
    fp4s_capture *c = new_cap(check_path("s.h5"));
    float x[4] = {0};
    const char *sites[] = {"layers.10.mlp", "layers.2.mlp", "layers.2.attn", "layers.1.mlp"};
    int64_t steps[] = {10, 2, 0};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(fp4s_capture_put(c, steps[s], sites[i], "rollout", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
            ck_assert_int_eq(fp4s_capture_put(c, steps[s], sites[i], "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
        }
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("s.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 24);
    ck_assert_int_eq(e[0].step, 0);
    ck_assert_int_eq(e[8].step, 2);
    ck_assert_int_eq(e[16].step, 10);
    ck_assert_str_eq(e[0].site, "layers.1.mlp");
    ck_assert_str_eq(e[2].site, "layers.2.attn");
    ck_assert_str_eq(e[4].site, "layers.2.mlp");
    ck_assert_str_eq(e[6].site, "layers.10.mlp");
    ck_assert_str_eq(e[0].side, "trainer");
    ck_assert_str_eq(e[1].side, "rollout");
    char spec[600];
    size_t need = fp4s_capture_entry_spec("x.h5", &e[1], NULL, 0);
    ck_assert_uint_eq(fp4s_capture_entry_spec("x.h5", &e[1], spec, sizeof spec), need);
    ck_assert_str_eq(spec, "x.h5:/steps/0/layers.1.mlp/rollout");
    free(e);
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("s.h5"), &in), 0);
    ck_assert_uint_eq(in.nsteps, 3);
    ck_assert_int_eq(in.first_step, 0);
    ck_assert_int_eq(in.last_step, 10);
    ck_assert(!in.interrupted);
    ck_assert_str_eq(in.schema, FP4S_CAPTURE_SCHEMA);
}
END_TEST

START_TEST(site_match_globs_across_dots)
{
    ck_assert(fp4s_site_match("layers.*.mlp.experts.*", "layers.3.mlp.experts.7.up_proj"));
    ck_assert(fp4s_site_match("*down_proj", "layers.3.mlp.experts.7.down_proj"));
    ck_assert(!fp4s_site_match("layers.?.attn", "layers.10.attn"));
    ck_assert(!fp4s_site_match(NULL, "x"));
}
END_TEST

/* ---- pairs and verify ---------------------------------------------------------------- */
START_TEST(pair_missing_step_site_side_and_shape_mismatch)
{
    fp4s_capture *c = new_cap(check_path("p.h5"));
    float x[8] = {0};
    ck_assert_int_eq(fp4s_capture_put(c, 5, "a", "trainer", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 5, "a", "rollout", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 5, "b", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 7, "a", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 7, "a", "rollout", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_entry t, r;
    ck_assert_int_eq(fp4s_capture_pair(check_path("p.h5"), 6, "a", &t, &r), FP4S_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "step 6 not found (steps 5..7)"));
    ck_assert_int_eq(fp4s_capture_pair(check_path("p.h5"), 5, "zz", &t, &r), FP4S_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "site 'zz' not found"));
    ck_assert_int_eq(fp4s_capture_pair(check_path("p.h5"), 5, "b", &t, &r), FP4S_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "no rollout side"));
    ck_assert_int_eq(fp4s_capture_pair(check_path("p.h5"), 5, "a", &t, &r), FP4S_ESHAPE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "trainer is [2, 4] but rollout is [1, 4]"));
    ck_assert_int_eq(fp4s_capture_pair(check_path("p.h5"), 7, "a", &t, &r), 0);
    ck_assert_str_eq(t.path, "/steps/7/a/trainer");
    ck_assert_str_eq(r.path, "/steps/7/a/rollout");
    ck_assert_int_eq(fp4s_capture_verify(check_path("p.h5")), FP4S_ESHAPE);
}
END_TEST

/* ---- token ids ------------------------------------------------------------------------ */
START_TEST(ids_match_pairs_unmatched_and_repeats)
{
    /* A: ids (0,0) (0,1) (1,0) (2,5); B: (2,5) (0,1) (3,3) (0,0) (1,1) */
    const int64_t a[] = {0, 0, 0, 1, 1, 0, 2, 5};
    const int64_t b[] = {2, 5, 0, 1, 3, 3, 0, 0, 1, 1};
    fp4s_id_match m;
    ck_assert_int_eq(fp4s_ids_match(a, 4, b, 5, &m), 0);
    ck_assert_uint_eq(m.npairs, 3);
    const size_t ea[] = {0, 1, 3}, eb[] = {3, 1, 0};
    for (size_t k = 0; k < 3; k++) {
        ck_assert_uint_eq(m.a[k], ea[k]);
        ck_assert_uint_eq(m.b[k], eb[k]);
    }
    ck_assert_uint_eq(m.nonly_a, 1);
    ck_assert_uint_eq(m.only_a[0], 2);
    ck_assert_uint_eq(m.nonly_b, 2);
    ck_assert_uint_eq(m.only_b[0], 2);
    ck_assert_uint_eq(m.only_b[1], 4);
    fp4s_id_match_free(&m);
    ck_assert_ptr_null(m.a);
    /* empty sides */
    ck_assert_int_eq(fp4s_ids_match(NULL, 0, b, 5, &m), 0);
    ck_assert_uint_eq(m.npairs, 0);
    ck_assert_uint_eq(m.nonly_b, 5);
    fp4s_id_match_free(&m);
    /* a repeated id names the side, the id and both rows */
    const int64_t r[] = {4, 7, 1, 1, 4, 7};
    ck_assert_int_eq(fp4s_ids_match(a, 4, r, 3, &m), FP4S_EFORMAT);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "side B: token id (sequence 4, position 7) on rows 0 and 2"));
    ck_assert_ptr_null(m.a);
    fp4s_id_match_free(&m);
}
END_TEST

/* Brute force over random ids: every pair shares its id, every id of a side
 * with a partner is paired, and the rest is listed once. */
START_TEST(ids_match_agrees_with_brute_force)
{
    uint64_t st = 12345;
    for (int round = 0; round < 50; round++) {
        size_t na = 1 + (size_t)(round * 7 % 60), nb = 1 + (size_t)(round * 13 % 70);
        int64_t *a = malloc(na * 2 * sizeof *a), *b = malloc(nb * 2 * sizeof *b);
        /* distinct ids per side: a random permutation of a 12 x 12 grid */
        int64_t grid[144];
        for (int side = 0; side < 2; side++) {
            for (int i = 0; i < 144; i++) grid[i] = i;
            for (int i = 143; i > 0; i--) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                int j = (int)((st >> 33) % (uint64_t)(i + 1));
                int64_t t = grid[i];
                grid[i] = grid[j];
                grid[j] = t;
            }
            int64_t *v = side ? b : a;
            size_t nv = side ? nb : na;
            for (size_t i = 0; i < nv; i++) {
                v[2 * i] = grid[i] / 12;
                v[2 * i + 1] = grid[i] % 12 - 3;
            }
        }
        fp4s_id_match m;
        ck_assert_int_eq(fp4s_ids_match(a, na, b, nb, &m), 0);
        size_t want = 0;
        for (size_t i = 0; i < na; i++)
            for (size_t j = 0; j < nb; j++) want += a[2 * i] == b[2 * j] && a[2 * i + 1] == b[2 * j + 1];
        ck_assert_uint_eq(m.npairs, want);
        ck_assert_uint_eq(m.npairs + m.nonly_a, na);
        ck_assert_uint_eq(m.npairs + m.nonly_b, nb);
        for (size_t k = 0; k < m.npairs; k++) {
            ck_assert(a[2 * m.a[k]] == b[2 * m.b[k]] && a[2 * m.a[k] + 1] == b[2 * m.b[k] + 1]);
            if (k) ck_assert_uint_lt(m.a[k - 1], m.a[k]);
        }
        for (size_t k = 0; k < m.nonly_a; k++)
            for (size_t j = 0; j < nb; j++)
                ck_assert(!(a[2 * m.only_a[k]] == b[2 * j] && a[2 * m.only_a[k] + 1] == b[2 * j + 1]));
        fp4s_id_match_free(&m);
        free(a);
        free(b);
    }
}
END_TEST

START_TEST(ids_let_sides_hold_other_tokens)
{
    fp4s_capture *c = new_cap(check_path("ids.h5"));
    float x[12] = {0};
    const int64_t it[] = {0, 0, 0, 1, 1, 0}, ir[] = {0, 1, 1, 0};
    ck_assert_int_eq(fp4s_capture_put(c, 2, "layers.0.mlp.experts.1.up", "trainer", FP4S_DT_F32, x, 3, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 2, "layers.0.mlp.experts.1.up", "rollout", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    /* ids before rows, more ids than rows, weights: refused */
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "b", "trainer", it, 1), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "ids before rows"));
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "layers.0.mlp.experts.1.up", "rollout", it, 3), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "one id per row"));
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "layers.0.mlp.experts.1.up", "weight", it, 1), FP4S_EINVAL);
    /* in two pieces on the trainer side */
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "layers.0.mlp.experts.1.up", "trainer", it, 2), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "layers.0.mlp.experts.1.up", "trainer", it + 4, 1), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 2, "layers.0.mlp.experts.1.up", "rollout", ir, 2), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    const char *p = check_path("ids.h5");
    fp4s_capture_entry t, r;
    ck_assert_msg(fp4s_capture_pair(p, 2, "layers.0.mlp.experts.1.up", &t, &r) == 0, "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_capture_verify(p), 0);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(p, &e, &n), 0);
    free(e);
    int64_t *ti, *ri;
    size_t nt, nr;
    ck_assert_int_eq(fp4s_capture_read_ids(p, &t, &ti, &nt), 0);
    ck_assert_int_eq(fp4s_capture_read_ids(p, &r, &ri, &nr), 0);
    ck_assert_uint_eq(nt, 3);
    ck_assert_uint_eq(nr, 2);
    ck_assert_mem_eq(ti, it, sizeof it);
    ck_assert_mem_eq(ri, ir, sizeof ir);
    fp4s_id_match m;
    ck_assert_int_eq(fp4s_ids_match(ti, nt, ri, nr, &m), 0);
    ck_assert_uint_eq(m.npairs, 2);
    ck_assert_uint_eq(m.nonly_a, 1);
    ck_assert_uint_eq(m.only_a[0], 0); /* token (0, 0) went elsewhere on the rollout */
    fp4s_id_match_free(&m);
    free(ti);
    free(ri);
    /* ids on one side only: the row counts must agree again */
    c = NULL;
    ck_assert_int_eq(fp4s_capture_open_append(p, NULL, &c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 3, "s", "trainer", FP4S_DT_F32, x, 3, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 3, "s", "rollout", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 3, "s", "trainer", it, 3), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_pair(p, 3, "s", &t, &r), FP4S_ESHAPE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "carry token ids on both sides"));
    ck_assert_int_eq(fp4s_capture_list(p, &e, &n), FP4S_ESHAPE);
}
END_TEST

/* A dataset written with raw HDF5 at `path` of the capture, int64 [rows, cols]. */
static void raw_i64(const char *file, const char *path, const int64_t *v, size_t rows, size_t cols)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hsize_t d[2] = {rows, cols};
    hid_t sp = H5Screate_simple(2, d, NULL);
    hid_t ds = H5Dcreate2(f, path, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(ds, 0);
    ck_assert_int_ge(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
}

START_TEST(ids_malformed_are_named)
{
    const int64_t rep[] = {0, 0, 5, 5, 0, 0}, ok[] = {0, 0, 1, 1, 2, 2};
    const char *cases[][2] = {
        {"rep", "/steps/1/s/trainer_ids: token id (sequence 0, position 0) on rows 0 and 2"},
        {"short", "/steps/1/s/trainer_ids: 2 token ids for the 3 rows"},
        {"cols", "/steps/1/s/trainer_ids: token ids must be [rows, 2] (sequence, position), found 3 columns"},
        {"weight", "/steps/1/s/weight_ids: token ids belong to a trainer or rollout side only"},
        {"orphan", "/steps/1/s/rollout_ids: token ids without the rows of /steps/1/s/rollout"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s.h5", cases[k][0]);
        const char *p = check_path(name);
        fp4s_capture *c = new_cap(p);
        float x[12] = {0};
        ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 3, 4, 4, NULL), 0);
        if (strcmp(cases[k][0], "orphan"))
            ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "rollout", FP4S_DT_F32, x, 3, 4, 4, NULL), 0);
        ck_assert_int_eq(fp4s_capture_close(&c), 0);
        if (!strcmp(cases[k][0], "rep")) raw_i64(p, "/steps/1/s/trainer_ids", rep, 3, 2);
        if (!strcmp(cases[k][0], "short")) raw_i64(p, "/steps/1/s/trainer_ids", ok, 2, 2);
        if (!strcmp(cases[k][0], "cols")) raw_i64(p, "/steps/1/s/trainer_ids", ok, 2, 3);
        if (!strcmp(cases[k][0], "weight")) raw_i64(p, "/steps/1/s/weight_ids", ok, 3, 2);
        if (!strcmp(cases[k][0], "orphan")) raw_i64(p, "/steps/1/s/rollout_ids", ok, 3, 2);
        ck_assert_int_eq(fp4s_capture_verify(p), FP4S_EFORMAT);
        ck_assert_msg(strstr(fp4s_last_error(), cases[k][1]) && strstr(fp4s_last_error(), name),
                      "%s: %s", cases[k][0], fp4s_last_error());
    }
}
END_TEST

/* The unit walker pairs rows by id where both sides carry ids, counts the
 * flips, and leaves out (or, strict, fails on) a (step, site) whose sides
 * cannot be paired instead of refusing the capture. */
START_TEST(units_pair_by_id_and_leave_out_damaged_sites)
{
    const char *p = check_path("u.h5");
    fp4s_capture *c = new_cap(p);
    /* site a: trainer rows 0..2 are tokens (0,0) (0,1) (1,0), rollout rows 0..1 are (1,0) (0,0) */
    float xt[3 * 16], xr[2 * 16], w[2 * 16];
    for (int i = 0; i < 3 * 16; i++) xt[i] = (float)(i / 16) + 0.5f;     /* row i holds i + 0.5 */
    for (int i = 0; i < 2 * 16; i++) xr[i] = (float)(i / 16) + 10.0f;    /* row i holds i + 10 */
    for (int i = 0; i < 2 * 16; i++) w[i] = 1.0f;
    const int64_t it[] = {0, 0, 0, 1, 1, 0}, ir[] = {1, 0, 0, 0}, rep[] = {1, 0, 1, 0};
    ck_assert_int_eq(fp4s_capture_put(c, 0, "a", "trainer", FP4S_DT_F32, xt, 3, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "a", "rollout", FP4S_DT_F32, xr, 2, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 0, "a", "trainer", it, 3), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 0, "a", "rollout", ir, 2), 0);
    /* site b: other row counts and no ids; site c: a repeated id */
    ck_assert_int_eq(fp4s_capture_put(c, 0, "b", "trainer", FP4S_DT_F32, xt, 3, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "b", "rollout", FP4S_DT_F32, xr, 2, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "c", "trainer", FP4S_DT_F32, xt, 2, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "c", "rollout", FP4S_DT_F32, xr, 2, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put_ids(c, 0, "c", "trainer", it, 2), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT); /* the writer refuses a repeat: write it raw */
    hsize_t d2[2] = {2, 2};
    hid_t sp = H5Screate_simple(2, d2, NULL);
    hid_t ds = H5Dcreate2(f, "/steps/0/c/rollout_ids", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rep);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    c = NULL;
    ck_assert_int_eq(fp4s_capture_open_append(p, NULL, &c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, FP4S_CAPTURE_CONST_STEP, "a", "weight", FP4S_DT_F32, w, 2, 16, 16, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);

    fp4s_units l = {0};
    fp4s_unit_select s;
    fp4s_unit_select_defaults(&s);
    ck_assert_msg(fp4s_units_add_capture(&l, p, &s) == 0, "%s", fp4s_last_error());
    ck_assert_uint_eq(l.n, 1);
    ck_assert_uint_eq(l.nskipped, 2);
    ck_assert_str_eq(l.skipped[0].site, "b");
    ck_assert_ptr_nonnull(strstr(l.skipped[0].why, "trainer is [3, 16] but rollout is [2, 16]"));
    ck_assert_ptr_nonnull(strstr(l.skipped[1].why, "token id (sequence 1, position 0) on rows 0 and 1"));
    const fp4s_unit *u = &l.u[0];
    ck_assert(u->ids && u->both == 2 && u->rollout_only == 0 && u->trainer_only == 1);
    ck_assert(u->flips[0] == 0 && u->flips[1] == 1); /* the trainer's (0, 1) went elsewhere on the rollout */
    fp4s_unit_data d;
    ck_assert_msg(fp4s_unit_read(u, &d) == 0, "%s", fp4s_last_error());
    ck_assert_uint_eq(d.m, 2);
    ck_assert_uint_eq(d.trainer_only, 1);
    ck_assert_uint_eq(d.rollout_only, 0);
    /* pairs in the rollout's order: rollout row 0 is (1,0) = trainer row 2; row 1 is (0,0) = trainer row 0 */
    ck_assert(d.x[0] == 10.0f && d.xt[0] == 2.5f && d.x[16] == 11.0f && d.xt[16] == 0.5f);
    ck_assert(d.xt[2 * 16] == 1.5f); /* then the trainer's own token (0, 1) */
    ck_assert(d.ids[0] == 1 && d.ids[1] == 0 && d.ids[2] == 0 && d.ids[3] == 0 && d.ids[4] == 0 && d.ids[5] == 1);
    fp4s_unit_data_free(&d);
    fp4s_units_free(&l);
    /* strict: the first damaged site fails the list, naming it */
    s.strict = true;
    ck_assert_int_eq(fp4s_units_add_capture(&l, p, &s), FP4S_ESHAPE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "/steps/0/b"));
    fp4s_units_free(&l);
}
END_TEST

/* ---- append, locking, interruption ---------------------------------------------------------- */
START_TEST(append_keeps_old_steps_and_locks_second_writer)
{
    fp4s_capture *c = new_cap(check_path("a.h5"));
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(fp4s_capture_put(c, 0, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    /* A second writer (another process, forked before the first opens the
     * file so that it has its own HDF5 state) is refused while the first
     * holds the file. */
    int go[2], done[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        if (read(go[0], &b, 1) != 1) _exit(2);
        fp4s_capture *c2;
        int rc = fp4s_capture_open_append(check_path("a.h5"), NULL, &c2);
        _exit(rc == FP4S_EBUSY && strstr(fp4s_last_error(), "another writer") ? 0 : 1);
    }
    ck_assert_int_eq(fp4s_capture_open_append(check_path("a.h5"), NULL, &c), 0);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second writer was not refused");
    close(go[0]);
    close(go[1]);
    close(done[0]);
    close(done[1]);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "s", "rollout", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("a.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 3);
    free(e);
    ck_assert_int_eq(fp4s_capture_open_append(check_path("missing.h5"), NULL, &c), FP4S_EOPEN);
}
END_TEST

/* Bytes of a whole file (the caller frees), for before/after comparisons. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* A second writer refused while the first holds the file changes nothing:
 * not with overwrite (it used to truncate the file to 0 bytes before HDF5
 * checked the lock), not for append, not without overwrite. */
START_TEST(refused_writer_changes_nothing)
{
    const char *p = check_path("held.h5");
    fp4s_capture *c = new_cap(p);
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(fp4s_capture_put(c, 0, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_flush(c), 0);
    size_t n0;
    unsigned char *b0 = slurp(p, &n0);
    ck_assert_uint_gt(n0, 0);
    pid_t pid = fork();
    if (pid == 0) {
        fp4s_capture *c2 = NULL;
        fp4s_capture_opts o;
        fp4s_capture_opts_defaults(&o);
        o.overwrite = true;
        int r1 = fp4s_capture_create(p, &o, &c2);
        int ok1 = r1 == FP4S_EBUSY && strstr(fp4s_last_error(), "another writer") && !c2;
        int r2 = fp4s_capture_open_append(p, NULL, &c2);
        int ok2 = r2 == FP4S_EBUSY && !c2;
        o.overwrite = false;
        int r3 = fp4s_capture_create(p, &o, &c2);
        /* the library names no tool option (fp4-rl has no -a) */
        int ok3 = r3 == FP4S_EWRITE && strstr(fp4s_last_error(), "already exists; nothing was changed") &&
                  !strstr(fp4s_last_error(), "-a");
        _exit(ok1 && ok2 && ok3 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a second writer was not refused as expected");
    size_t n1;
    unsigned char *b1 = slurp(p, &n1);
    ck_assert_msg(n1 == n0 && memcmp(b0, b1, n0) == 0, "the refused writer changed the file (%zu -> %zu bytes)",
                  n0, n1);
    free(b0);
    free(b1);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(p, &in), 0);
    ck_assert_uint_eq(in.nsteps, 2);
    ck_assert(!in.interrupted);
}
END_TEST

/* fp4s_capture_abort undoes everything since the last flush: a new step, a
 * site added to an old step, rows appended to an old dataset, a new
 * constant weight; the file is byte for byte what the flush left, less the
 * writer_state, and lists as before. */
START_TEST(abort_undoes_everything_since_the_flush)
{
    const char *p = check_path("t.h5");
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    fp4s_capture *c = new_cap(p);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "a", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 0, x, x, (int64_t[]){0, 0}, NULL, NULL, 2), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    fp4s_capture_entry *e0, *e1;
    size_t n0, n1;
    ck_assert_int_eq(fp4s_capture_list(p, &e0, &n0), 0);
    ck_assert_int_eq(fp4s_capture_open_append(p, NULL, &c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "a", "trainer", FP4S_DT_F32, x + 4, 1, 4, 4, NULL), 0); /* rows */
    ck_assert_int_eq(fp4s_capture_put(c, 0, "a", "rollout", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);     /* side */
    ck_assert_int_eq(fp4s_capture_put(c, 0, "b", "trainer", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);     /* site */
    ck_assert_int_eq(fp4s_capture_put(c, 3, "a", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);     /* step */
    ck_assert_int_eq(fp4s_capture_put(c, FP4S_CAPTURE_CONST_STEP, "w", "weight", FP4S_DT_F32, x, 2, 4, 4,
                                      NULL), 0);
    ck_assert_int_eq(fp4s_capture_put_logprobs(c, 0, x, x, (int64_t[]){1, 1}, NULL, NULL, 2), 0);
    ck_assert_int_eq(fp4s_capture_abort(&c), 0);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(fp4s_capture_list(p, &e1, &n1), 0);
    capture_same_listing(e0, n0, e1, n1);
    float got[4];
    read_raw(p, "/steps/0/a/trainer", H5T_NATIVE_FLOAT, got);
    ck_assert_mem_eq(got, x, sizeof got);
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(p, &in), 0);
    ck_assert(!in.interrupted);
    ck_assert_uint_eq(in.nsteps, 1);
    ck_assert_int_eq(fp4s_capture_verify(p), 0);
    /* and the file takes appends again */
    ck_assert_int_eq(fp4s_capture_open_append(p, NULL, &c), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "b", "trainer", FP4S_DT_F32, x, 2, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    ck_assert_int_eq(fp4s_capture_list(p, &e1, &n1), 0);
    ck_assert_uint_eq(n1, n0 + 1);
    free(e1);
    ck_assert_int_eq(fp4s_capture_abort(&c), 0); /* NULL is fine */
}
END_TEST

START_TEST(unclosed_writer_is_reported_interrupted)
{
    pid_t pid = fork();
    if (pid == 0) {
        fp4s_capture *c;
        float x[4] = {0};
        if (fp4s_capture_create(check_path("i.h5"), NULL, &c)) _exit(1);
        if (fp4s_capture_put(c, 0, "s", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL)) _exit(1);
        if (fp4s_capture_flush(c)) _exit(1);
        _exit(0); /* no close */
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("i.h5"), &in), 0);
    ck_assert(in.interrupted);
    ck_assert_uint_eq(in.nsteps, 1);
}
END_TEST

/* ---- merge -------------------------------------------------------------------------- */
static void two_ranks(const char *a, const char *b, float bval)
{
    float x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, bval};
    fp4s_capture *c = new_cap(a);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "rank0.site", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "shared", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_attr_str(c, "/", "run", "A"), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
    c = new_cap(b);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "rank1.site", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "shared", "trainer", FP4S_DT_F32, y, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_put(c, 1, "rank1.site", "trainer", FP4S_DT_F32, x, 1, 4, 4, NULL), 0);
    ck_assert_int_eq(fp4s_capture_attr_str(c, "/", "run", "B"), 0);
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
}

START_TEST(merge_joins_and_accepts_identical_duplicates)
{
    two_ranks(check_path("r0.h5"), check_path("r1.h5"), 4);
    const char *in[] = {check_path("r0.h5"), check_path("r1.h5")};
    ck_assert_msg(fp4s_capture_merge(in, 2, check_path("m.h5"), NULL) == 0, "%s", fp4s_last_error());
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(check_path("m.h5"), &e, &n), 0);
    ck_assert_uint_eq(n, 4);
    free(e);
    fp4s_capture_info inf;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("m.h5"), &inf), 0);
    ck_assert_str_eq(inf.producer, "fp4-capture merge");
    ck_assert(!inf.synthetic);
    hid_t f = H5Fopen(check_path("m.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    char *s = NULL;
    hid_t a = H5Aopen(f, "run", H5P_DEFAULT), t = H5Aget_type(a);
    H5Aread(a, t, &s);
    ck_assert_str_eq(s, "A"); /* first input wins */
    H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
}
END_TEST

START_TEST(merge_refuses_conflicting_duplicates_naming_both)
{
    two_ranks(check_path("r0.h5"), check_path("r1.h5"), 5);
    const char *in[] = {check_path("r0.h5"), check_path("r1.h5")};
    ck_assert_int_eq(fp4s_capture_merge(in, 2, check_path("m.h5"), NULL), FP4S_EDUP);
    const char *m = fp4s_last_error();
    ck_assert_ptr_nonnull(strstr(m, "r0.h5 and "));
    ck_assert_ptr_nonnull(strstr(m, "r1.h5 both hold /steps/0/shared/trainer"));
    ck_assert_ptr_nonnull(strstr(m, "different values"));
    ck_assert_int_eq(fp4s_capture_merge(in, 0, check_path("m2.h5"), NULL), FP4S_EINVAL);
}
END_TEST

/* ---- synth ------------------------------------------------------------------------- */
static void read_all_u16(const char *file, const char *path, uint16_t **out, size_t *n)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    ck_assert_int_ge(d, 0);
    hid_t sp = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    H5Sclose(sp);
    *out = malloc(*n * 2);
    H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out);
    H5Dclose(d);
    H5Fclose(f);
}

START_TEST(synth_is_reproducible_and_labelled)
{
    fp4s_synth_opts o;
    fp4s_synth_opts_defaults(&o);
    o.steps = 3;
    o.act_every = 2;
    o.tokens = 40;
    o.hidden = 64;
    o.out_features = 16;
    o.seqs = 2;
    o.seq_len = 8;
    o.onset_step = 1;
    ck_assert_int_eq(fp4s_capture_synth(check_path("a.h5"), &o), 0);
    ck_assert_int_eq(fp4s_capture_synth(check_path("b.h5"), &o), 0);
    o.seed = 2;
    ck_assert_int_eq(fp4s_capture_synth(check_path("c.h5"), &o), 0);
    fp4s_capture_info in;
    ck_assert_int_eq(fp4s_capture_info_read(check_path("a.h5"), &in), 0);
    ck_assert(in.synthetic);
    ck_assert_str_eq(in.producer, "fp4-capture synth");
    ck_assert_uint_eq(in.nsteps, 3);
    fp4s_capture_entry *ea, *eb;
    size_t na, nb;
    ck_assert_int_eq(fp4s_capture_list(check_path("a.h5"), &ea, &na), 0);
    ck_assert_int_eq(fp4s_capture_list(check_path("b.h5"), &eb, &nb), 0);
    ck_assert_uint_eq(na, nb);
    size_t experts_seen = 0, tokens_routed = 0;
    for (size_t i = 0; i < na; i++) {
        ck_assert_str_eq(ea[i].path, eb[i].path);
        ck_assert_uint_eq(ea[i].rows, eb[i].rows);
        if (ea[i].dtype == FP4S_DT_BF16 && ea[i].step == 0) {
            uint16_t *x, *y;
            size_t n1, n2;
            read_all_u16(check_path("a.h5"), ea[i].path, &x, &n1);
            read_all_u16(check_path("b.h5"), eb[i].path, &y, &n2);
            ck_assert_uint_eq(n1, n2);
            ck_assert_mem_eq(x, y, n1 * 2);
            free(x);
            free(y);
        }
        if (strstr(ea[i].site, "layers.0.mlp.experts.") && strcmp(ea[i].side, "trainer") == 0 &&
            ea[i].step == 0) {
            experts_seen++;
            tokens_routed += ea[i].rows;
        }
    }
    ck_assert_uint_eq(experts_seen, 4);
    ck_assert_uint_eq(tokens_routed, 40 * 2); /* top-2 */
    /* trainer and rollout differ a little, not everywhere */
    uint16_t *t, *r;
    size_t n1, n2, diff = 0;
    read_all_u16(check_path("a.h5"), "/steps/0/layers.0.self_attn.qkv_proj/trainer", &t, &n1);
    read_all_u16(check_path("a.h5"), "/steps/0/layers.0.self_attn.qkv_proj/rollout", &r, &n2);
    for (size_t i = 0; i < n1; i++) diff += t[i] != r[i];
    ck_assert_uint_gt(diff, 0);
    ck_assert_uint_lt(diff, n1 / 4);
    uint16_t *z;
    read_all_u16(check_path("c.h5"), "/steps/0/layers.0.self_attn.qkv_proj/trainer", &z, &n2);
    ck_assert(memcmp(t, z, n1 * 2) != 0); /* another seed, other values */
    free(t);
    free(r);
    free(z);
    free(ea);
    free(eb);
    ck_assert_int_eq(fp4s_capture_verify(check_path("a.h5")), 0);
    o.top_k = 9;
    ck_assert_int_eq(fp4s_capture_synth(check_path("d.h5"), &o), FP4S_EINVAL);
}
END_TEST

START_TEST(synth_mismatch_grows_after_onset)
{
    fp4s_synth_opts o;
    fp4s_synth_opts_defaults(&o);
    o.steps = 6;
    o.act_every = 100;
    o.layers = 1;
    o.tokens = 8;
    o.hidden = 16;
    o.out_features = 0;
    o.hot_channels = 1;
    o.seqs = 16;
    o.seq_len = 64;
    o.onset_step = 3;
    o.lp_growth = 4;
    ck_assert_int_eq(fp4s_capture_synth(check_path("lp.h5"), &o), 0);
    double sd[6];
    for (int s = 0; s < 6; s++) {
        char p1[64], p2[64];
        snprintf(p1, sizeof p1, "/steps/%d/logprobs/trainer", s);
        snprintf(p2, sizeof p2, "/steps/%d/logprobs/rollout", s);
        float t[1024], r[1024];
        read_raw(check_path("lp.h5"), p1, H5T_NATIVE_FLOAT, t);
        read_raw(check_path("lp.h5"), p2, H5T_NATIVE_FLOAT, r);
        double s2 = 0;
        for (int i = 0; i < 1024; i++) {
            ck_assert(r[i] <= 0 && t[i] <= 0);
            s2 += (double)(r[i] - t[i]) * (r[i] - t[i]);
        }
        sd[s] = sqrt(s2 / 1024);
    }
    ck_assert(sd[2] < 2 * sd[0] && sd[0] < 2 * sd[2]);
    ck_assert(sd[3] > 2.5 * sd[2]);
    ck_assert(sd[5] > 10 * sd[3]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("capture");
    const check_case tests[] = {
        CHECK_CASE(schema_missing_attribute_is_eformat),
        CHECK_CASE(schema_newer_major_is_eversion),
        CHECK_CASE(schema_newer_minor_is_accepted),
        CHECK_CASE(schema_fixed_length_utf8_is_read),
        CHECK_CASE(schema_malformed_is_eformat),
        CHECK_CASE(open_missing_not_hdf5_truncated),
        CHECK_CASE(put_f32_bf16_f16_bit_exact_with_stride),
        CHECK_CASE(put_appends_rows),
        CHECK_CASE(put_rejects_bad_shapes_types_names),
        CHECK_CASE(logprobs_round_trip_and_field_consistency),
        CHECK_CASE(scalars_round_trip_sorted_and_merged),
        CHECK_CASE(const_weights_and_site_attributes),
        CHECK_CASE(list_sorts_steps_sites_naturally),
        CHECK_CASE(site_match_globs_across_dots),
        CHECK_CASE(pair_missing_step_site_side_and_shape_mismatch),
        CHECK_CASE(ids_match_pairs_unmatched_and_repeats),
        CHECK_CASE(ids_match_agrees_with_brute_force),
        CHECK_CASE(ids_let_sides_hold_other_tokens),
        CHECK_CASE(ids_malformed_are_named),
        CHECK_CASE(units_pair_by_id_and_leave_out_damaged_sites),
        CHECK_CASE(append_keeps_old_steps_and_locks_second_writer),
        CHECK_CASE(refused_writer_changes_nothing),
        CHECK_CASE(abort_undoes_everything_since_the_flush),
        CHECK_CASE(unclosed_writer_is_reported_interrupted),
        CHECK_CASE(merge_joins_and_accepts_identical_duplicates),
        CHECK_CASE(merge_refuses_conflicting_duplicates_naming_both),
        CHECK_CASE(synth_is_reproducible_and_labelled),
        CHECK_CASE(synth_mismatch_grows_after_onset),
    };
    check_add_cases(s, tests, CHECK_NCASES(tests), setup, teardown, 0);
    return check_run(s, CK_NORMAL);
}
