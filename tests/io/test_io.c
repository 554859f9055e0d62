/* Unit tests of lib/io: every reader and writer, and every kind of bad input.
 * Fixtures are written by the tests themselves into a fresh temporary
 * directory (raw bytes for .npy and safetensors, the HDF5 C API for .h5). */
#include <fp4scope/tensor.h>
#include <fp4scope/codec.h>
#include "fp4s_config.h"
#include "io/h5_internal.h"

#include "../check_main.h"
#include <hdf5.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* internal entry points, tested directly */
#include "io/internal.h"

static void setup(void) { check_dir_make("fp4s_test_io."); }
static void teardown(void) { check_dir_remove(); }

static void write_bytes(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (na) ck_assert_uint_eq(fwrite(a, 1, na, f), na);
    if (nb) ck_assert_uint_eq(fwrite(b, 1, nb, f), nb);
    fclose(f);
}

/* A .npy v1.0 file with the given dict text (padded, newline added). */
static void make_npy(const char *path, const char *dict, const void *data, size_t nbytes)
{
    unsigned char hdr[512];
    size_t dl = strlen(dict);
    size_t total = (10 + dl + 1 + 63) / 64 * 64;
    size_t hl = total - 10;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (unsigned char)(hl & 0xff);
    hdr[9] = (unsigned char)(hl >> 8);
    memcpy(hdr + 10, dict, dl);
    memset(hdr + 10 + dl, ' ', hl - dl - 1);
    hdr[total - 1] = '\n';
    write_bytes(path, hdr, total, data, nbytes);
}

/* Parse a dict text through fp4s_npy_parse_header. */
static int parse_dict(const char *dict, fp4s_dtype *dt, int *rank, uint64_t sh[2])
{
    unsigned char hdr[512];
    size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64, hl = total - 10;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (unsigned char)hl;
    hdr[9] = 0;
    memcpy(hdr + 10, dict, dl);
    memset(hdr + 10 + dl, ' ', hl - dl - 1);
    hdr[total - 1] = '\n';
    uint64_t off;
    return fp4s_npy_parse_header("t.npy", hdr, total, dt, rank, sh, &off, NULL);
}

static bool detail_has(const char *s) { return strstr(fp4s_last_error(), s) != NULL; }

#define ASSERT_DETAIL(s) ck_assert_msg(detail_has(s), "detail '%s' lacks '%s'", fp4s_last_error(), (s))

/* ---- dtype ------------------------------------------------------------------ */
START_TEST(dtype_names_and_sizes)
{
    ck_assert_str_eq(fp4s_dtype_name(FP4S_DT_F32), "float32");
    ck_assert_str_eq(fp4s_dtype_name(FP4S_DT_BF16), "bfloat16");
    ck_assert_str_eq(fp4s_dtype_name(FP4S_DT_U8), "uint8");
    ck_assert_uint_eq(fp4s_dtype_size(FP4S_DT_F64), 8);
    ck_assert_uint_eq(fp4s_dtype_size(FP4S_DT_F16), 2);
    ck_assert_uint_eq(fp4s_dtype_size(FP4S_DT_U8), 1);
    ck_assert_uint_eq(fp4s_dtype_size(FP4S_DT_I64), 8);
}
END_TEST

/* ---- npy header --------------------------------------------------------------- */
START_TEST(npy_header_accepts_numpy_forms)
{
    fp4s_dtype dt;
    int rank;
    uint64_t sh[2];
    ck_assert_int_eq(parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", &dt, &rank, sh), 0);
    ck_assert_int_eq(dt, FP4S_DT_F32);
    ck_assert_int_eq(rank, 2);
    ck_assert_uint_eq(sh[0], 3);
    ck_assert_uint_eq(sh[1], 4);
    ck_assert_int_eq(parse_dict("{\"shape\":(7,),\"fortran_order\":False,\"descr\":\"<f8\"}", &dt, &rank, sh), 0);
    ck_assert_int_eq(dt, FP4S_DT_F64);
    ck_assert_int_eq(rank, 1);
    ck_assert_uint_eq(sh[0], 1);
    ck_assert_uint_eq(sh[1], 7);
    ck_assert_int_eq(parse_dict("{'descr': '<f2', 'fortran_order': False, 'shape': (2,3,)}", &dt, &rank, sh), 0);
    ck_assert_int_eq(dt, FP4S_DT_F16);
}
END_TEST

START_TEST(npy_header_rejects_malformed)
{
    fp4s_dtype dt;
    int rank;
    uint64_t sh[2];
    struct { const char *dict; int code; const char *msg; } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", FP4S_EFORMAT, "fortran_order is True"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }", FP4S_EDTYPE, "big-endian"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", FP4S_EDTYPE, "'<i4' is not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", FP4S_EDTYPE, "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", FP4S_ERANGE,
         "shape (4294967296, 4294967296, 2) overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", FP4S_ESHAPE, "scalar"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", FP4S_EFORMAT, "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, }", FP4S_EFORMAT, "missing key 'shape'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", FP4S_EFORMAT, "duplicate key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", FP4S_EFORMAT, "unexpected key 'x'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", FP4S_EFORMAT, "not True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", FP4S_ERANGE, "overflows"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", FP4S_EFORMAT, "non-negative integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", FP4S_EFORMAT, "after the dictionary"},
        {"'descr': '<f4'", FP4S_EFORMAT, "does not start with '{'"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (3,)}", FP4S_EFORMAT, "header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse_dict(cases[i].dict, &dt, &rank, sh);
        ck_assert_msg(rc == cases[i].code, "case %zu: rc %d, expected %d (%s)", i, rc, cases[i].code, fp4s_last_error());
        ASSERT_DETAIL(cases[i].msg);
        ASSERT_DETAIL("t.npy");
    }
}
END_TEST

START_TEST(npy_header_rejects_bad_prefix)
{
    fp4s_dtype dt;
    int rank;
    uint64_t sh[2], off;
    unsigned char b[16] = "\x93NUMPY\x04\x00\x10\x00";
    ck_assert_int_eq(fp4s_npy_parse_header("v.npy", b, 16, &dt, &rank, sh, &off, NULL), FP4S_EVERSION);
    ASSERT_DETAIL("version 4.0");
    memcpy(b, "\x93NUMPY\x01\x00\x76\x00", 10);
    ck_assert_int_eq(fp4s_npy_parse_header("v.npy", b, 16, &dt, &rank, sh, &off, NULL), FP4S_EFORMAT);
    ASSERT_DETAIL("truncated");
    ck_assert_int_eq(fp4s_npy_parse_header("v.npy", b, 5, &dt, &rank, sh, &off, NULL), FP4S_EFORMAT);
    memcpy(b, "PK\x03\x04zzzzzzzz", 12);
    ck_assert_int_eq(fp4s_npy_parse_header("v.npy", b, 16, &dt, &rank, sh, &off, NULL), FP4S_EFORMAT);
    ASSERT_DETAIL("magic");
    /* header text not ending in '\n' */
    memcpy(b, "\x93NUMPY\x01\x00\x06\x00{}    ", 16);
    ck_assert_int_eq(fp4s_npy_parse_header("v.npy", b, 16, &dt, &rank, sh, &off, NULL), FP4S_EFORMAT);
    ASSERT_DETAIL("newline");
}
END_TEST

/* ---- npy source --------------------------------------------------------------- */
START_TEST(npy_reads_float32_float64_float16)
{
    float f[6] = {1, -2, 3.5f, 0, -0.0f, 1e-30f};
    make_npy(check_path("a.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(check_path("a.npy"), &d, &r, &c), 0);
    ck_assert_uint_eq(r, 2);
    ck_assert_uint_eq(c, 3);
    ck_assert_mem_eq(d, f, sizeof f);
    free(d);

    double g[4] = {1.0, 0.1, -1e300, 3};
    make_npy(check_path("b.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", g, sizeof g);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(check_path("b.npy"), &s), 0);
    ck_assert_int_eq(fp4s_source_rank(s), 1);
    ck_assert_uint_eq(fp4s_source_rows(s), 1);
    ck_assert_uint_eq(fp4s_source_cols(s), 4);
    ck_assert_int_eq(fp4s_source_dtype(s), FP4S_DT_F64);
    ck_assert_str_eq(fp4s_source_name(s), "");
    float out[4];
    ck_assert_int_eq(fp4s_source_read(s, 0, 1, out, 4), 0);
    ck_assert(out[0] == 1.0f && out[1] == (float)0.1 && isinf(out[2]) && out[2] < 0 && out[3] == 3.0f);
    double raw[4];
    ck_assert_int_eq(fp4s_source_read_raw(s, 0, 1, raw), 0);
    ck_assert_mem_eq(raw, g, sizeof g);
    fp4s_source_close(&s);
    ck_assert_ptr_null(s);
    fp4s_source_close(&s); /* NULL is fine */

    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7c00}; /* 1, -2, 2^-24, inf */
    make_npy(check_path("c.npy"), "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }", h, sizeof h);
    ck_assert_int_eq(fp4s_source_read_all(check_path("c.npy"), &d, &r, &c), 0);
    ck_assert(d[0] == 1.0f && d[1] == -2.0f && d[2] == ldexpf(1, -24) && isinf(d[3]));
    free(d);
}
END_TEST

START_TEST(npy_rejects_bad_files)
{
    fp4s_source *s = (fp4s_source *)1;
    ck_assert_int_eq(fp4s_source_open(check_path("missing.npy"), &s), FP4S_EOPEN);
    ck_assert_ptr_null(s);
    ASSERT_DETAIL("missing.npy");
    ASSERT_DETAIL("No such file");

    write_bytes(check_path("empty.npy"), NULL, 0, NULL, 0);
    ck_assert_int_eq(fp4s_source_open(check_path("empty.npy"), &s), FP4S_EEMPTY);
    ASSERT_DETAIL("empty.npy: file is empty");

    /* headers whose data does not fit: (file, header, data bytes, code, detail) */
    static const struct {
        const char *file, *header;
        size_t bytes;
        int rc;
        const char *detail;
    } bad[] = {
        {"trunc.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, FP4S_EFORMAT,
         "trunc.npy: truncated: shape (2, 3) float32 needs 24 data bytes, the file has 20"},
        {"long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }", 16, FP4S_EFORMAT,
         "4 unexpected bytes"},
        {"ovf.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 24,
         FP4S_ERANGE, "overflows"},
        {"big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }", 24, FP4S_EFORMAT,
         "truncated"},
        {"zero.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0, FP4S_EEMPTY,
         "zero.npy: shape (0, 3) is empty"},
        {"r3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4), }", 24, FP4S_EFORMAT,
         "r3.npy: truncated: shape (1, 2, 4) float32 needs 32 data bytes, the file has 24"},
        {"i8.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 24, FP4S_EDTYPE,
         "i8.npy: dtype '<i8' is not supported"},
    };
    float f[6] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        make_npy(check_path(bad[i].file), bad[i].header, bad[i].bytes ? f : NULL, bad[i].bytes);
        int rc = fp4s_source_open(check_path(bad[i].file), &s);
        ck_assert_msg(rc == bad[i].rc, "%s: %d, expected %d", bad[i].file, rc, bad[i].rc);
        ASSERT_DETAIL(bad[i].detail);
    }

    write_bytes(check_path("short.npy"), "\x93NUMPY\x01", 7, NULL, 0);
    ck_assert_int_eq(fp4s_source_open(check_path("short.npy"), &s), FP4S_EFORMAT);
    ASSERT_DETAIL("short.npy: truncated .npy header");

    write_bytes(check_path("hdr.npy"), "\x93NUMPY\x01\x00\xff\x00{'descr'", 17, NULL, 0);
    ck_assert_int_eq(fp4s_source_open(check_path("hdr.npy"), &s), FP4S_EFORMAT);
    ASSERT_DETAIL("hdr.npy: truncated .npy header (17 of 265 bytes)");

    /* a tensor name on a .npy */
    make_npy(check_path("a.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24);
    char spec[600];
    snprintf(spec, sizeof spec, "%s:w", check_path("a.npy"));
    ck_assert_int_eq(fp4s_source_open(spec, &s), FP4S_ENOTFOUND);
    ASSERT_DETAIL("no tensor name expected");

    ck_assert_int_eq(fp4s_source_open(check_dir(), &s), FP4S_EOPEN);
    ASSERT_DETAIL("is a directory");
    ck_assert_int_eq(mkfifo(check_path("fifo.npy"), 0600), 0);
    ck_assert_int_eq(fp4s_source_open(check_path("fifo.npy"), &s), FP4S_EOPEN); /* and does not block */
    ASSERT_DETAIL("fifo.npy: not a regular file");
    ck_assert_int_eq(fp4s_source_open("/dev/zero", &s), FP4S_EOPEN);
    ck_assert_int_eq(fp4s_source_open("", &s), FP4S_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

START_TEST(source_read_rows_stride_and_range)
{
    float f[12];
    for (int i = 0; i < 12; i++) f[i] = (float)i;
    make_npy(check_path("m.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }", f, sizeof f);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(check_path("m.npy"), &s), 0);
    float out[2 * 5];
    for (int i = 0; i < 10; i++) out[i] = -1;
    ck_assert_int_eq(fp4s_source_read(s, 1, 2, out, 5), 0);
    ck_assert(out[0] == 3 && out[1] == 4 && out[2] == 5 && out[3] == -1 && out[4] == -1);
    ck_assert(out[5] == 6 && out[6] == 7 && out[7] == 8 && out[8] == -1);
    ck_assert_int_eq(fp4s_source_read(s, 3, 2, out, 3), FP4S_ERANGE);
    ASSERT_DETAIL("outside the 4 rows");
    ck_assert_int_eq(fp4s_source_read(s, SIZE_MAX, 2, out, 3), FP4S_ERANGE);
    ck_assert_int_eq(fp4s_source_read(s, 0, 1, out, 2), FP4S_EINVAL);
    ASSERT_DETAIL("row stride 2");
    ck_assert_int_eq(fp4s_source_read(s, 0, 1, NULL, 3), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_source_read(s, 4, 0, out, 3), 0);
    fp4s_source_close(&s);
}
END_TEST

/* ---- safetensors ----------------------------------------------------------------- */
static void make_st(const char *path, const char *json, const void *data, size_t nbytes, int64_t hlen_override)
{
    size_t jl = strlen(json);
    uint64_t hl = hlen_override >= 0 ? (uint64_t)hlen_override : jl;
    unsigned char *buf = malloc(8 + jl);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, json, jl);
    write_bytes(path, buf, 8 + jl, data, nbytes);
    free(buf);
}

static char *st_spec(const char *file, const char *name)
{
    static char b[600];
    snprintf(b, sizeof b, "%s:%s", check_path(file), name);
    return b;
}

#if FP4S_HAVE_JANSSON
START_TEST(safetensors_reads_f32_f16_bf16)
{
    unsigned char data[24 + 8 + 8];
    float f[6] = {1, 2, 3, 4, 5, -6};
    uint16_t h[4] = {0x3c00, 0x3800, 0xbc00, 0x0000};  /* 1 .5 -1 0 */
    uint16_t b[4] = {0x3f80, 0x4040, 0xc0c0, 0x7f80};  /* 1 3 -6 inf */
    memcpy(data, f, 24);
    memcpy(data + 24, h, 8);
    memcpy(data + 32, b, 8);
    make_st(check_path("m.safetensors"),
            "{\"__metadata__\":{\"format\":\"pt\"},"
            "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[32,40]}}   ",
            data, sizeof data, -1);
    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(st_spec("m.safetensors", "w"), &d, &r, &c), 0);
    ck_assert_uint_eq(r, 2);
    ck_assert_uint_eq(c, 3);
    ck_assert_mem_eq(d, f, 24);
    free(d);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(st_spec("m.safetensors", "h"), &s), 0);
    ck_assert_int_eq(fp4s_source_rank(s), 1);
    ck_assert_int_eq(fp4s_source_dtype(s), FP4S_DT_F16);
    ck_assert_str_eq(fp4s_source_name(s), "h");
    ck_assert_str_eq(fp4s_source_path(s), check_path("m.safetensors"));
    float o[4];
    ck_assert_int_eq(fp4s_source_read(s, 0, 1, o, 4), 0);
    ck_assert(o[0] == 1 && o[1] == 0.5f && o[2] == -1 && o[3] == 0);
    fp4s_source_close(&s);
    ck_assert_int_eq(fp4s_source_read_all(st_spec("m.safetensors", "b"), &d, &r, &c), 0);
    ck_assert(d[0] == 1 && d[1] == 3 && d[2] == -6 && isinf(d[3]));
    free(d);
    uint16_t raw[4];
    ck_assert_int_eq(fp4s_source_open(st_spec("m.safetensors", "b"), &s), 0);
    ck_assert_int_eq(fp4s_source_read_raw(s, 1, 1, raw), 0);
    ck_assert_uint_eq(raw[0], 0xc0c0);
    ck_assert_uint_eq(raw[1], 0x7f80);
    fp4s_source_close(&s);
}
END_TEST
#endif

#if FP4S_HAVE_JANSSON
START_TEST(safetensors_rejects_lies)
{
    unsigned char data[64] = {0};
    fp4s_source *s;
    struct { const char *json; int64_t hlen; size_t nbytes; const char *name; int code; const char *msg; } cases[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", -1, 24, "x", FP4S_ENOTFOUND, "x: tensor not found; did you mean 'w'? tensors: w"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}", -1, 28, "", FP4S_ENOTFOUND, "tensors: a, w"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 100000, 24, "w", FP4S_EFORMAT, "header length 100000 does not fit"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 0, 24, "w", FP4S_EFORMAT, "header length 0"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 20, 24, "w", FP4S_EFORMAT, "not valid JSON"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", -1, 20, "w", FP4S_EFORMAT, "run past the 20-byte data buffer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,4]}}", -1, 24, "w", FP4S_EFORMAT, "end before they begin"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,24]}}", -1, 24, "w", FP4S_EFORMAT, "span 24 bytes but shape (2, 4) of F32 needs 32"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,24]}}", -1, 24, "w", FP4S_ERANGE, "overflows"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", -1, 24, "w", FP4S_EFORMAT, "shape[1] is not a non-negative integer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,99999999999999999999]}}", -1, 24, "w", FP4S_EFORMAT, "not valid JSON"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0]}}", -1, 24, "w", FP4S_EFORMAT, "not a pair"},
        {"{\"w\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}}", -1, 24, "w", FP4S_EDTYPE, "dtype I64 is not supported"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,2,4],\"data_offsets\":[0,24]}}", -1, 24, "w", FP4S_EFORMAT,
         "shape (1, 2, 4) of F32 needs 32"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", -1, 24, "w", FP4S_ESHAPE, "rank 0"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", -1, 24, "w", FP4S_EEMPTY, "empty"},
        {"{\"w\":{\"dtype\":\"F32\"}}", -1, 24, "w", FP4S_EFORMAT, "needs string 'dtype'"},
        {"{\"w\":7}", -1, 24, "w", FP4S_EFORMAT, "not an object"},
        {"[1,2]", -1, 24, "w", FP4S_EFORMAT, "does not start with '{'"},
        {"{\"w\":{},\"w\":{}}", -1, 24, "w", FP4S_EFORMAT, "not valid JSON"},
        {"{\"__metadata__\":{}}", -1, 0, "__metadata__", FP4S_ENOTFOUND, "tensors: (none)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_st(check_path("bad.safetensors"), cases[i].json, data, cases[i].nbytes, cases[i].hlen);
        s = (fp4s_source *)1;
        int rc = fp4s_source_open(st_spec("bad.safetensors", cases[i].name), &s);
        ck_assert_msg(rc == cases[i].code, "case %zu: rc %d, expected %d (%s)", i, rc, cases[i].code, fp4s_last_error());
        ck_assert_ptr_null(s);
        ASSERT_DETAIL(cases[i].msg);
        ASSERT_DETAIL("bad.safetensors");
    }
    write_bytes(check_path("tiny.safetensors"), "abc", 3, NULL, 0);
    ck_assert_int_eq(fp4s_source_open(st_spec("tiny.safetensors", "w"), &s), FP4S_EFORMAT);
    ASSERT_DETAIL("too short");
}
END_TEST
#endif

/* ---- HDF5 ------------------------------------------------------------------------- */
static void h5_dset(hid_t f, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
                    const void *data, const char *dtype_attr)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(f, name, ftype, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(d >= 0);
    ck_assert(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (dtype_attr) ck_assert_int_eq(fp4s_h5_attr_str(d, "dtype", dtype_attr), 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

static hid_t half_type(void)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
}

static void make_h5(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(f >= 0);
    float a[6] = {1, 2, 3, 4, 5, 6};
    double b[3] = {0.5, -0.25, 1e40};
    uint16_t bf[4] = {0x3f80, 0xbf80, 0x4000, 0x0001};
    uint16_t hf[2] = {0x3c00, 0x8001};
    int32_t ii[2] = {1, 2};
    hsize_t d23[2] = {2, 3}, d3[1] = {3}, d22[2] = {2, 2}, d2[1] = {2}, d111[3] = {1, 1, 2};
    h5_dset(f, "/act/x", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, 2, d23, a, NULL);
    h5_dset(f, "/d", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, d3, b, NULL);
    h5_dset(f, "/bf", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, d22, bf, "bfloat16");
    hid_t ht = half_type();
    hid_t mt = H5Tcopy(ht);
    h5_dset(f, "/half", ht, mt, 1, d2, hf, NULL);
    H5Tclose(mt);
    H5Tclose(ht);
    h5_dset(f, "/u16", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, d22, bf, NULL);
    h5_dset(f, "/i32", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d2, ii, NULL);
    h5_dset(f, "/r3", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, d111, a, NULL);
    h5_dset(f, "/scalar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, a, NULL);
    H5Fclose(f);
}

static char *h5_spec(const char *file, const char *name)
{
    static char b[600];
    snprintf(b, sizeof b, "%s:%s", check_path(file), name);
    return b;
}

START_TEST(h5_reads_float_and_bfloat16)
{
    make_h5(check_path("t.h5"));
    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(h5_spec("t.h5", "/act/x"), &d, &r, &c), 0);
    ck_assert_uint_eq(r, 2);
    ck_assert_uint_eq(c, 3);
    for (int i = 0; i < 6; i++) ck_assert(d[i] == (float)(i + 1));
    free(d);
    ck_assert_int_eq(fp4s_source_read_all(h5_spec("t.h5", "act/x"), &d, &r, &c), 0);
    free(d);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(h5_spec("t.h5", "/d"), &s), 0);
    ck_assert_int_eq(fp4s_source_dtype(s), FP4S_DT_F64);
    ck_assert_int_eq(fp4s_source_rank(s), 1);
    float o[3];
    ck_assert_int_eq(fp4s_source_read(s, 0, 1, o, 3), 0);
    ck_assert(o[0] == 0.5f && o[1] == -0.25f && isinf(o[2]));
    fp4s_source_close(&s);

    ck_assert_int_eq(fp4s_source_open(h5_spec("t.h5", "/bf"), &s), 0);
    ck_assert_int_eq(fp4s_source_dtype(s), FP4S_DT_BF16);
    float ob[2 * 4];
    ck_assert_int_eq(fp4s_source_read(s, 0, 2, ob, 4), 0);
    ck_assert(ob[0] == 1 && ob[1] == -1 && ob[4] == 2 && ob[5] == fp4s_bf16_decode(1));
    ck_assert_int_eq(fp4s_source_read(s, 1, 1, ob, 2), 0);
    ck_assert(ob[0] == 2);
    uint16_t raw[2];
    ck_assert_int_eq(fp4s_source_read_raw(s, 1, 1, raw), 0);
    ck_assert_uint_eq(raw[0], 0x4000);
    ck_assert_uint_eq(raw[1], 0x0001);
    fp4s_source_close(&s);

    ck_assert_int_eq(fp4s_source_read_all(h5_spec("t.h5", "/half"), &d, &r, &c), 0);
    ck_assert(d[0] == 1.0f && d[1] == -ldexpf(1, -24));
    free(d);
}
END_TEST

/* Issue 9.6: tensors of rank 3 or more (a PyTorch dump [batch, seq, hidden])
 * read as [prod(leading), last] in C order from .npy, safetensors and HDF5,
 * the stored shape kept; HDF5 row ranges that cross the leading dimensions
 * are read box by box. */
static void check_rows(const char *spec, const float *ref, size_t rows, size_t cols, int rank,
                       const uint64_t *dims)
{
    fp4s_source *s;
    ck_assert_msg(fp4s_source_open(spec, &s) == 0, "%s: %s", spec, fp4s_last_error());
    ck_assert_uint_eq(fp4s_source_rows(s), rows);
    ck_assert_uint_eq(fp4s_source_cols(s), cols);
    ck_assert_int_eq(fp4s_source_rank(s), rank);
    uint64_t got[FP4S_MAX_RANK];
    ck_assert_int_eq(fp4s_source_shape(s, got, FP4S_MAX_RANK), rank);
    for (int i = 0; i < rank; i++) ck_assert_uint_eq(got[i], dims[i]);
    float *o = malloc((rows * (cols + 3) + 1) * sizeof *o);
    for (size_t r0 = 0; r0 < rows; r0++)
        for (size_t n = 1; r0 + n <= rows; n += 1 + n / 2) {
            ck_assert_int_eq(fp4s_source_read(s, r0, n, o, cols + 3), 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(memcmp(o + i * (cols + 3), ref + (r0 + i) * cols, cols * sizeof *o) == 0,
                              "%s: rows %zu+%zu, row %zu differs", spec, r0, n, i);
        }
    free(o);
    fp4s_source_close(&s);
}

START_TEST(rank3_and_more_read_as_rows_of_the_last_dimension)
{
    enum { N = 2 * 3 * 5 * 4 };
    float a[N];
    for (int i = 0; i < N; i++) a[i] = (float)i * 0.25f - 7;
    uint64_t d3[3] = {6, 5, 4}, d4[4] = {2, 3, 5, 4};
    make_npy(check_path("r3.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 5, 4), }", a, sizeof a);
    check_rows(check_path("r3.npy"), a, 30, 4, 3, d3);
    make_npy(check_path("r4.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5, 4), }", a, sizeof a);
    check_rows(check_path("r4.npy"), a, 30, 4, 4, d4);
#if FP4S_HAVE_JANSSON
    const char *js = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3,5,4],\"data_offsets\":[0,480]}}";
    uint64_t hl = strlen(js);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(hl >> (8 * i));
    FILE *f = fopen(check_path("r4.safetensors"), "wb");
    fwrite(lb, 1, 8, f);
    fwrite(js, 1, hl, f);
    fwrite(a, 1, sizeof a, f);
    fclose(f);
    char spec[600];
    snprintf(spec, sizeof spec, "%s:w", check_path("r4.safetensors"));
    check_rows(spec, a, 30, 4, 4, d4);
#endif
    hid_t h = H5Fcreate(check_path("r.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t h3[3] = {6, 5, 4}, h4[4] = {2, 3, 5, 4}, h5d[5] = {2, 1, 3, 5, 4};
    h5_dset(h, "/r3", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, h3, a, NULL);
    h5_dset(h, "/r4", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, h4, a, NULL);
    h5_dset(h, "/r5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, h5d, a, NULL);
    uint16_t bf[N];
    for (int i = 0; i < N; i++) bf[i] = (uint16_t)(0x3f80 + i);
    h5_dset(h, "/b4", H5T_STD_U16LE, H5T_NATIVE_UINT16, 4, h4, bf, "bfloat16");
    H5Fclose(h);
    uint64_t d5[5] = {2, 1, 3, 5, 4};
    check_rows(h5_spec("r.h5", "/r3"), a, 30, 4, 3, d3);
    check_rows(h5_spec("r.h5", "/r4"), a, 30, 4, 4, d4);
    check_rows(h5_spec("r.h5", "/r5"), a, 30, 4, 5, d5);
    float bref[N];
    for (int i = 0; i < N; i++) bref[i] = fp4s_bf16_decode(bf[i]);
    check_rows(h5_spec("r.h5", "/b4"), bref, 30, 4, 4, d4);
    /* raw bytes too (what import copies bit for bit) */
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(h5_spec("r.h5", "/b4"), &s), 0);
    uint16_t raw[N];
    ck_assert_int_eq(fp4s_source_read_raw(s, 4, 21, raw), 0);
    ck_assert_mem_eq(raw, bf + 16, 21 * 4 * sizeof *raw);
    fp4s_source_close(&s);
}
END_TEST

/* The bytes a source's rows occupy in its file (fp4s_source_data_range, what
 * the page-cache probe looks at): .npy and safetensors after their headers,
 * a contiguous HDF5 dataset where HDF5 stored it (the bytes read there are
 * the rows), a chunked one the whole file. */
static void check_range(const char *spec, const char *file, size_t row0, size_t nrows, const void *want,
                        size_t rowb)
{
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(spec, &s), 0);
    uint64_t off, len;
    fp4s_source_data_range(s, row0, nrows, &off, &len);
    fp4s_source_close(&s);
    ck_assert_uint_eq(len, nrows * rowb);
    unsigned char got[512];
    ck_assert_uint_le(len, sizeof got);
    FILE *f = fopen(file, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseeko(f, (off_t)off, SEEK_SET), 0);
    ck_assert_uint_eq(fread(got, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    ck_assert_mem_eq(got, (const unsigned char *)want + row0 * rowb, (size_t)len);
}

START_TEST(source_data_range_of_each_kind)
{
    float a[6 * 8];
    for (int i = 0; i < 6 * 8; i++) a[i] = (float)i + 0.5f;
    make_npy(check_path("rg.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 8), }", a, sizeof a);
    check_range(check_path("rg.npy"), check_path("rg.npy"), 0, 6, a, 8 * sizeof *a);
    check_range(check_path("rg.npy"), check_path("rg.npy"), 2, 3, a, 8 * sizeof *a);
    hid_t h = H5Fcreate(check_path("rg.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {6, 8};
    h5_dset(h, "/c", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, a, NULL);
    hid_t sp = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t ch[2] = {2, 8};
    H5Pset_chunk(pl, 2, ch);
    hid_t d = H5Dcreate2(h, "/k", H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, a) >= 0);
    H5Dclose(d);
    H5Pclose(pl);
    H5Sclose(sp);
    H5Fclose(h);
    check_range(h5_spec("rg.h5", "/c"), check_path("rg.h5"), 0, 6, a, 8 * sizeof *a);
    check_range(h5_spec("rg.h5", "/c"), check_path("rg.h5"), 1, 4, a, 8 * sizeof *a);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(h5_spec("rg.h5", "/k"), &s), 0);
    uint64_t off, len;
    fp4s_source_data_range(s, 1, 4, &off, &len);
    fp4s_source_close(&s);
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(len, UINT64_MAX);
}
END_TEST

/* ---- the page-cache probe (resident.c) --------------------------------------- */
static bool maps_name(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, path) != NULL;
    fclose(f);
    return found;
}

/* A file just written is resident, as is any range of it; after its pages
 * are dropped (fsync, POSIX_FADV_DONTNEED) it is not; with 5% of its pages
 * dropped it still is (FP4S_RESIDENT_MIN 0.9), with 20% not, and a range of
 * the dropped pages is not while the rest is. Where the kernel keeps the
 * pages (a file system that ignores the advice, such as tmpfs) the test says
 * so and checks the not-resident answer through fp4s_file_resident_force,
 * as the decomposition's tests check what the reader does with it. The
 * probe leaves no mapping behind, and cannot tell (-1) for anything but a
 * regular file's non-empty range. */
START_TEST(file_resident_probe)
{
    const char *p = check_path("r.bin");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), np = 200;
    unsigned char *buf = malloc(np * page);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < np * page; i++) buf[i] = (unsigned char)(i * 7 + 1);
    write_bytes(p, buf, np * page, NULL, 0);
    double f = 0;
    ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 1);
    ck_assert(f == 1.0);
    ck_assert_int_eq(fp4s_file_resident(p, page + 7, 10, &f), 1);
    ck_assert(!maps_name(p));

    check_evict(p, 0, 0);
    int rc = fp4s_file_resident(p, 0, UINT64_MAX, &f);
    if (f >= FP4S_RESIDENT_MIN) {
        fprintf(stderr, "file_resident_probe: %s: the kernel kept %.0f%% of the pages after POSIX_FADV_DONTNEED; "
                "the not-resident answer is checked as forced\n", p, 100 * f);
        ck_assert_int_eq(rc, 1);
        fp4s_file_resident_force(0);
        ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 0);
        ck_assert(f == -1.0);
        fp4s_file_resident_force(FP4S_RESIDENT_PROBE);
        ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 1);
    } else {
        ck_assert_int_eq(rc, 0);
        ck_assert(f < 0.1);
        FILE *in = fopen(p, "rb"); /* read back: resident again */
        ck_assert_ptr_nonnull(in);
        ck_assert_uint_eq(fread(buf, 1, np * page, in), np * page);
        fclose(in);
        ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 1);
        check_evict(p, 0, (off_t)(10 * page)); /* 5% dropped */
        ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 1);
        ck_assert(f > 0.94 && f < 0.96);
        check_evict(p, 0, (off_t)(40 * page)); /* 20% */
        ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 0);
        ck_assert(f > 0.79 && f < 0.81);
        ck_assert_int_eq(fp4s_file_resident(p, 5 * page, 30 * page, &f), 0);
        ck_assert(f == 0.0);
        ck_assert_int_eq(fp4s_file_resident(p, 40 * page, UINT64_MAX, &f), 1);
        ck_assert(f == 1.0);
    }
    ck_assert(!maps_name(p));
    free(buf);

    /* the probe cannot tell: -1, *fraction -1 */
    ck_assert_int_eq(mkfifo(check_path("fifo"), 0600), 0);
    const char *cannot[] = {check_path("fifo"), check_dir(), check_path("missing"), NULL};
    for (size_t i = 0; i < sizeof cannot / sizeof cannot[0]; i++) {
        f = 0;
        ck_assert_int_eq(fp4s_file_resident(cannot[i], 0, UINT64_MAX, &f), -1);
        ck_assert(f == -1.0);
    }
    ck_assert_int_eq(fp4s_file_resident(p, 0, 0, &f), -1);          /* an empty range */
    ck_assert_int_eq(fp4s_file_resident(p, np * page, 1, &f), -1);  /* past the end */
    fp4s_file_resident_force(-1);
    ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), -1);
    fp4s_file_resident_force(FP4S_RESIDENT_PROBE);
}
END_TEST

/* A range of more than FP4S_RESIDENT_WINDOWS windows is sampled in that many
 * windows spread over it: 128 MiB (of 4 KiB pages) with its first 1/16 and
 * 1/8 dropped reads as 15/16 (resident) and 7/8 (not), its resident half
 * alone as resident, all of it dropped as none. Where the kernel keeps the
 * pages, the test says so after the first check (file_resident_probe checks
 * the other answer forced). */
START_TEST(file_resident_samples_long_ranges)
{
    const char *p = check_path("long.bin");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), np = 2 * FP4S_RESIDENT_WINDOW * FP4S_RESIDENT_WINDOWS;
    const size_t mib = (size_t)1 << 20;
    unsigned char *buf = malloc(mib);
    ck_assert_ptr_nonnull(buf);
    memset(buf, 0x5a, mib);
    FILE *out = fopen(p, "wb");
    ck_assert_ptr_nonnull(out);
    for (size_t b = 0; b < np * page; b += mib) ck_assert_uint_eq(fwrite(buf, 1, mib, out), mib);
    ck_assert_int_eq(fclose(out), 0);
    free(buf);
    double f = 0;
    ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 1);
    ck_assert(f == 1.0);
    check_evict(p, 0, (off_t)(np / 16 * page));
    int rc = fp4s_file_resident(p, 0, UINT64_MAX, &f);
    if (f == 1.0) {
        fprintf(stderr, "file_resident_samples_long_ranges: %s: the kernel kept the pages after "
                "POSIX_FADV_DONTNEED; only the resident answer is checked\n", p);
        ck_assert_int_eq(rc, 1);
        return;
    }
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(f > 0.92 && f < 0.95, "1/16 dropped: %g resident", f);
    check_evict(p, 0, (off_t)(np / 8 * page));
    ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 0);
    ck_assert_msg(f > 0.86 && f < 0.89, "1/8 dropped: %g resident", f);
    ck_assert_int_eq(fp4s_file_resident(p, np / 2 * page, UINT64_MAX, &f), 1);
    ck_assert(f == 1.0);
    check_evict(p, 0, 0);
    ck_assert_int_eq(fp4s_file_resident(p, 0, UINT64_MAX, &f), 0);
    ck_assert(f == 0.0);
}
END_TEST

START_TEST(h5_rejects_bad_datasets)
{
    make_h5(check_path("t.h5"));
    fp4s_source *s = (fp4s_source *)1;
    struct { const char *name; int code; const char *msg; } cases[] = {
        {"/nope", FP4S_ENOTFOUND, "/nope: dataset not found; datasets: /act/x, /bf, /d"},
        {"/act/y/z", FP4S_ENOTFOUND, "dataset not found"},
        {"/act", FP4S_ENOTFOUND, "/act: is a group, not a dataset"},
        {"/u16", FP4S_EDTYPE, "uint16 dataset without attribute dtype = \"bfloat16\""},
        {"/i32", FP4S_EDTYPE, "int32 dataset is not supported"},
        {"/scalar", FP4S_ESHAPE, "found a scalar"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = fp4s_source_open(h5_spec("t.h5", cases[i].name), &s);
        ck_assert_msg(rc == cases[i].code, "case %zu: rc %d, expected %d (%s)", i, rc, cases[i].code, fp4s_last_error());
        ck_assert_ptr_null(s);
        ASSERT_DETAIL(cases[i].msg);
        ASSERT_DETAIL("t.h5");
    }
    ck_assert_int_eq(fp4s_source_open(check_path("t.h5"), &s), FP4S_ENOTFOUND);
    ASSERT_DETAIL("name a dataset as");
    write_bytes(check_path("fake.h5"), "not an hdf5 file at all", 23, NULL, 0);
    ck_assert_int_eq(fp4s_source_open(h5_spec("fake.h5", "/x"), &s), FP4S_EFORMAT);
    ASSERT_DETAIL("fake.h5: not a readable HDF5 file");
    char sp[600];
    snprintf(sp, sizeof sp, "%s/missing.h5:/x", check_dir());
    ck_assert_int_eq(fp4s_source_open(sp, &s), FP4S_EOPEN);
    ASSERT_DETAIL("missing.h5:/x: cannot open");
}
END_TEST

#if FP4S_HAVE_JANSSON
START_TEST(spec_path_with_colon)
{
    /* a tensor name with ':' in it */
    unsigned char data[8] = {0};
    make_st(check_path("c.safetensors"), "{\"a:b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, -1);
    fp4s_source *s;
    ck_assert_int_eq(fp4s_source_open(st_spec("c.safetensors", "a:b"), &s), 0);
    ck_assert_str_eq(fp4s_source_name(s), "a:b");
    fp4s_source_close(&s);
    ck_assert_int_eq(fp4s_source_open(st_spec("c.safetensors", "a:c"), &s), FP4S_ENOTFOUND);
    ASSERT_DETAIL("a:c: tensor not found; did you mean 'a:b'? tensors: a:b");
    float f[2] = {7, 8};
    make_npy(check_path("odd:name.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f, sizeof f);
    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(check_path("odd:name.npy"), &d, &r, &c), 0);
    ck_assert(c == 2 && d[1] == 8);
    free(d);
    make_h5(check_path("h:5.h5"));
    ck_assert_int_eq(fp4s_source_read_all(h5_spec("h:5.h5", "/d"), &d, &r, &c), 0);
    ck_assert_uint_eq(c, 3);
    free(d);
}
END_TEST
#endif

/* ---- outfile ------------------------------------------------------------------------- */
START_TEST(outfile_commit_and_abort)
{
    fp4s_outfile *o;
    ck_assert_int_eq(fp4s_outfile_begin(check_path("o.txt"), &o), 0);
    const char *t = fp4s_outfile_tmppath(o);
    ck_assert(strstr(t, "o.txt.tmp.") != NULL);
    ck_assert_int_eq(access(t, F_OK), 0);
    FILE *f = fopen(t, "w");
    fputs("hello", f);
    fclose(f);
    ck_assert_int_eq(access(check_path("o.txt"), F_OK), -1);
    ck_assert_int_eq(fp4s_outfile_commit(&o), 0);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(access(check_path("o.txt"), F_OK), 0);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
    struct stat st;
    stat(check_path("o.txt"), &st);
    mode_t um = umask(022);
    umask(um);
    ck_assert_uint_eq(st.st_mode & 0777, 0666 & ~um); /* as open(2) would create it, not mkstemp's 0600 */

    ck_assert_int_eq(fp4s_outfile_begin(check_path("p.txt"), &o), 0);
    ck_assert_int_eq(check_entries(NULL, NULL), 2);
    fp4s_outfile_abort(&o);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
    fp4s_outfile_abort(&o);

    /* the signal-handler cleanup removes live temporaries, never committed files */
    fp4s_outfile *o2;
    ck_assert_int_eq(fp4s_outfile_begin(check_path("q.txt"), &o), 0);
    ck_assert_int_eq(fp4s_outfile_begin(check_path("r.txt"), &o2), 0);
    ck_assert_int_eq(check_entries(NULL, NULL), 3);
    fp4s_outfile_unlink_all();
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
    ck_assert_int_eq(access(check_path("o.txt"), F_OK), 0);
    fp4s_outfile_abort(&o);
    ck_assert_int_eq(fp4s_outfile_commit(&o2), FP4S_EWRITE); /* its temporary is gone */
    ck_assert_ptr_null(o2);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);

    /* a symlink to a file: the file is replaced, the link stays a link */
    ck_assert_int_eq(symlink("o.txt", check_path("link.txt")), 0);
    ck_assert_int_eq(fp4s_outfile_begin(check_path("link.txt"), &o), 0);
    ck_assert(strstr(fp4s_outfile_tmppath(o), "/o.txt.tmp.") != NULL);
    f = fopen(fp4s_outfile_tmppath(o), "w");
    fputs("via link", f);
    fclose(f);
    ck_assert_int_eq(fp4s_outfile_commit(&o), 0);
    struct stat lst;
    ck_assert_int_eq(lstat(check_path("link.txt"), &lst), 0);
    ck_assert(S_ISLNK(lst.st_mode));
    char got[32] = "";
    f = fopen(check_path("o.txt"), "r");
    ck_assert_ptr_nonnull(fgets(got, sizeof got, f));
    fclose(f);
    ck_assert_str_eq(got, "via link");
    unlink(check_path("link.txt"));
    /* devices are written in place and never renamed over or removed */
    ck_assert_int_eq(fp4s_npy_write("/dev/null", FP4S_DT_F32, 1, 1, 0, (float[]){1.0f}), 0);
    ck_assert_int_eq(fp4s_outfile_begin("/dev/null", &o), 0);
    ck_assert_str_eq(fp4s_outfile_tmppath(o), "/dev/null");
    fp4s_outfile_abort(&o);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    ck_assert_int_eq(check_entries(NULL, NULL), 1);

    ck_assert_int_eq(fp4s_outfile_begin("/nonexistent-dir-fp4s/x.npy", &o), FP4S_EWRITE);
    ck_assert_ptr_null(o);
    ASSERT_DETAIL("/nonexistent-dir-fp4s/x.npy: cannot create output");
    ck_assert_int_eq(fp4s_outfile_begin(check_dir(), &o), FP4S_EWRITE);
    ASSERT_DETAIL("is a directory");
}
END_TEST

/* ---- the writer lock: asking and replacing ------------------------------------------------ */
static void write_text(const char *path, const char *s) { write_bytes(path, s, strlen(s), NULL, 0); }

static bool file_is(const char *path, const char *want)
{
    char got[64] = "";
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    return strcmp(got, want) == 0;
}

START_TEST(file_lock_held_and_commit)
{
    /* absent, or nobody holding it: free */
    ck_assert_int_eq(fp4s_file_held(check_path("none.h5")), 0);
    write_text(check_path("cap.h5"), "writer's data");
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), 0);
    /* a writer holds the lock (flock LOCK_EX, as the capture writer and HDF5
     * writers do; another open file description conflicts even in one process) */
    int w = open(check_path("cap.h5"), O_RDWR);
    ck_assert_int_ge(w, 0);
    ck_assert_int_eq(flock(w, LOCK_EX | LOCK_NB), 0);
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), FP4S_EBUSY);
    ASSERT_DETAIL("held by a live writer");
    write_text(check_path("new.tmp"), "replacement");
    ck_assert_int_eq(fp4s_file_commit(check_path("new.tmp"), check_path("cap.h5"), true), FP4S_EBUSY);
    ASSERT_DETAIL("not replaced");
    ck_assert(file_is(check_path("cap.h5"), "writer's data"));
    ck_assert(file_is(check_path("new.tmp"), "replacement")); /* left for the caller to remove */
    ck_assert_int_eq(fp4s_exit_status(FP4S_EBUSY), FP4S_EXIT_OUTPUT);
    /* readers (LOCK_SH) block neither the question nor the replacement */
    ck_assert_int_eq(flock(w, LOCK_SH | LOCK_NB), 0);
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), 0);
    ck_assert_int_eq(fp4s_file_commit(check_path("new.tmp"), check_path("cap.h5"), true), 0);
    ck_assert(file_is(check_path("cap.h5"), "replacement"));
    ck_assert_int_eq(access(check_path("new.tmp"), F_OK), -1);
    close(w);
    /* !replace: refuses an existing file, takes a free name */
    write_text(check_path("b.tmp"), "second");
    ck_assert_int_eq(fp4s_file_commit(check_path("b.tmp"), check_path("cap.h5"), false), FP4S_EWRITE);
    ASSERT_DETAIL("already exists");
    ck_assert(file_is(check_path("cap.h5"), "replacement"));
    ck_assert_int_eq(fp4s_file_commit(check_path("b.tmp"), check_path("fresh.h5"), false), 0);
    ck_assert(file_is(check_path("fresh.h5"), "second"));
    ck_assert_int_eq(access(check_path("b.tmp"), F_OK), -1);
    /* HDF5_USE_FILE_LOCKING=FALSE turns the protocol off, as it does HDF5's */
    w = open(check_path("cap.h5"), O_RDWR);
    ck_assert_int_eq(flock(w, LOCK_EX | LOCK_NB), 0);
    setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), 0);
    unsetenv("HDF5_USE_FILE_LOCKING");
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), FP4S_EBUSY);
    close(w);
    ck_assert_int_eq(fp4s_file_commit(check_path("missing.tmp"), check_path("x.h5"), true), FP4S_EWRITE);
}
END_TEST

/* ---- npy writer -------------------------------------------------------------------------- */
START_TEST(npy_writer_round_trip)
{
    float f[6] = {1, 2, 3, 4, 5, 6};
    fp4s_npy_writer *w;
    ck_assert_int_eq(fp4s_npy_writer_open(check_path("w.npy"), FP4S_DT_F32, 2, 2, 3, &w), 0);
    ck_assert_int_eq(fp4s_npy_writer_rows(w, f, 1), 0);
    ck_assert_int_eq(access(check_path("w.npy"), F_OK), -1);
    ck_assert_int_eq(fp4s_npy_writer_rows(w, f + 3, 1), 0);
    ck_assert_int_eq(fp4s_npy_writer_close(&w), 0);
    ck_assert_ptr_null(w);
    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(check_path("w.npy"), &d, &r, &c), 0);
    ck_assert(r == 2 && c == 3);
    ck_assert_mem_eq(d, f, sizeof f);
    free(d);
    /* header of a uint8 array parses as numpy would write it; 64-byte aligned */
    uint8_t u[5] = {0, 1, 2, 15, 255};
    ck_assert_int_eq(fp4s_npy_write(check_path("u.npy"), FP4S_DT_U8, 1, 5, 0, u), 0);
    FILE *fp = fopen(check_path("u.npy"), "rb");
    unsigned char hb[512];
    size_t n = fread(hb, 1, sizeof hb, fp);
    fclose(fp);
    size_t hl = 10 + (size_t)(hb[8] | hb[9] << 8);
    ck_assert_uint_eq(hl % 64, 0);
    ck_assert_uint_eq(n, hl + 5);
    ck_assert(memmem(hb, hl, "'descr': '|u1'", 14) != NULL);
    ck_assert(memmem(hb, hl, "'shape': (5,)", 13) != NULL);
    ck_assert_uint_eq(hb[hl - 1], '\n');
    ck_assert_mem_eq(hb + hl, u, 5);
    ck_assert_int_eq(check_entries(NULL, NULL), 2);
}
END_TEST

START_TEST(npy_writer_incomplete_is_discarded)
{
    float f[6] = {0};
    fp4s_npy_writer *w;
    ck_assert_int_eq(fp4s_npy_writer_open(check_path("w.npy"), FP4S_DT_F32, 2, 2, 3, &w), 0);
    ck_assert_int_eq(fp4s_npy_writer_rows(w, f, 3), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_npy_writer_rows(w, f, 1), 0);
    ck_assert_int_eq(fp4s_npy_writer_close(&w), FP4S_EINTERNAL);
    ASSERT_DETAIL("only 1 of 2 rows written");
    ck_assert_ptr_null(w);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);
    ck_assert_int_eq(fp4s_npy_writer_open(check_path("w.npy"), FP4S_DT_F32, 2, 2, 3, &w), 0);
    fp4s_npy_writer_abort(&w);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);
    ck_assert_int_eq(fp4s_npy_writer_open(check_path("w.npy"), FP4S_DT_BF16, 2, 2, 3, &w), FP4S_EDTYPE);
    ck_assert_int_eq(fp4s_npy_writer_open(check_path("w.npy"), FP4S_DT_F32, 3, 2, 3, &w), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_npy_write("/nonexistent-dir-fp4s/w.npy", FP4S_DT_F32, 2, 2, 3, f), FP4S_EWRITE);
    ck_assert_int_eq(check_entries(NULL, NULL), 0);
}
END_TEST

/* ---- HDF5 writer helpers ------------------------------------------------------------------ */
START_TEST(h5_write_f32_and_attrs)
{
    fp4s_outfile *o;
    int64_t f;
    float a[3 * 1000];
    for (int i = 0; i < 3000; i++) a[i] = (float)i * 0.5f;
    ck_assert_int_eq(fp4s_h5_create(check_path("w.h5"), &o, &f), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "/g/h/x", a, 3, 1000, 4), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "plain", a, 1000, 3, 0), 0);
    ck_assert_int_eq(fp4s_h5_attr_str(f, "who", "fp4scope"), 0);
    ck_assert_int_eq(fp4s_h5_attr_str(f, "who", "fp4scope again"), 0);
    ck_assert_int_eq(fp4s_h5_attr_f64(f, "pi", 3.25), 0);
    ck_assert_int_eq(fp4s_h5_attr_i64(f, "n", -7), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "bad", a, 3, 1000, 12), FP4S_EINVAL);
    ck_assert_int_eq(access(check_path("w.h5"), F_OK), -1);
    ck_assert_int_eq(fp4s_h5_finish("test", &o, &f, true), 0);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);

    float *d;
    size_t r, c;
    ck_assert_int_eq(fp4s_source_read_all(h5_spec("w.h5", "/g/h/x"), &d, &r, &c), 0);
    ck_assert(r == 3 && c == 1000);
    ck_assert_mem_eq(d, a, sizeof a);
    free(d);
    hid_t h = H5Fopen(check_path("w.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t at = H5Aopen(h, "n", H5P_DEFAULT);
    int64_t v;
    H5Aread(at, H5T_NATIVE_INT64, &v);
    ck_assert_int_eq(v, -7);
    H5Aclose(at);
    at = H5Aopen(h, "who", H5P_DEFAULT);
    hid_t st = H5Aget_type(at);
    char *sv = NULL;
    H5Aread(at, st, &sv);
    ck_assert_str_eq(sv, "fp4scope again");
    H5free_memory(sv);
    H5Tclose(st);
    H5Aclose(at);
    hid_t ds = H5Dopen2(h, "/g/h/x", H5P_DEFAULT);
    hid_t pl = H5Dget_create_plist(ds);
    ck_assert_int_eq(H5Pget_layout(pl), H5D_CHUNKED);
    ck_assert_int_ge(H5Pget_nfilters(pl), 2);
    H5Pclose(pl);
    H5Dclose(ds);
    H5Fclose(h);

    /* abort: nothing left behind */
    ck_assert_int_eq(fp4s_h5_create(check_path("x.h5"), &o, &f), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "x", a, 3, 1000, 0), 0);
    ck_assert_int_eq(fp4s_h5_finish("test", &o, &f, false), 0);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
    ck_assert_int_eq(fp4s_h5_create("/nonexistent-dir-fp4s/x.h5", &o, &f), FP4S_EWRITE);
    ck_assert_int_eq(check_entries(NULL, NULL), 1);
}
END_TEST

/* The child process that walks a file before it is read (h5guard.c) leaves
 * the caller's stdio streams alone: a stream with bytes pending on a pipe
 * nobody reads (a pager not reading yet, a closed reader with SIGPIPE) is not
 * flushed by the library, which would block there (or die by SIGPIPE); the
 * bytes are written once, when the caller flushes. Failed before: the
 * library's fflush(NULL) blocked until the alarm. */
static void iso_ok(void *arg, int fd)
{
    (void)arg;
    fp4s_h5_iso_write(fd, "ok", 2);
}

START_TEST(h5_guard_leaves_the_callers_streams_alone)
{
    make_h5(check_path("g.h5"));
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    int fl = fcntl(p[1], F_GETFL);
    fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
    char fill[4096];
    memset(fill, 'f', sizeof fill);
    size_t filled = 0;
    for (ssize_t w; (w = write(p[1], fill, sizeof fill)) > 0;) filled += (size_t)w;
    fcntl(p[1], F_SETFL, fl); /* a full pipe: a flush would block */
    FILE *out = fdopen(p[1], "w");
    ck_assert_ptr_nonnull(out);
    setvbuf(out, NULL, _IOFBF, 1024);
    fputs("pending", out);
    alarm(20);
    ck_assert_int_eq(fp4s_h5_validate(check_path("g.h5"), true), 0);
    unsigned char *b = NULL;
    size_t n = 0;
    ck_assert_int_eq(fp4s_h5_isolate(check_path("g.h5"), iso_ok, NULL, &b, &n), 0);
    ck_assert(n == 2 && memcmp(b, "ok", 2) == 0);
    free(b);
    alarm(0);
    /* drain the pipe, then the pending bytes arrive exactly once */
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    size_t drained = 0;
    for (ssize_t r; (r = read(p[0], fill, sizeof fill)) > 0;) drained += (size_t)r;
    ck_assert_uint_eq(drained, filled);
    ck_assert_int_eq(fclose(out), 0);
    char got[32];
    ssize_t r = read(p[0], got, sizeof got);
    ck_assert_int_eq(r, 7);
    ck_assert(memcmp(got, "pending", 7) == 0);
    ck_assert_int_le(read(p[0], got, sizeof got), 0);
    close(p[0]);
}
END_TEST

/* A process that holds a writer lock and is SIGKILLed while the HDF5 guard
 * walks a file in a child leaves no process behind holding the lock: the
 * child (it inherits the locked descriptor) dies with its parent. Before,
 * the orphaned child went on walking and the capture stayed locked ("held by
 * another writer") until it finished: fp4-capture import -a killed at
 * random moments (tests/capture/kill_import.sh under ASan). This process is
 * the subreaper of the orphan, so how it ended is seen, whatever the timing. */
START_TEST(h5_guard_child_dies_with_its_parent)
{
#ifdef __linux__
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    /* a file whose walk takes a while: 60 MiB of data, read in the child */
    const size_t rows = 3840, cols = 4096;
    float *a = malloc(rows * cols * sizeof *a);
    ck_assert_ptr_nonnull(a);
    for (size_t i = 0; i < rows * cols; i++) a[i] = (float)(i % 1013) * 0.25f;
    fp4s_outfile *o;
    int64_t f;
    ck_assert_int_eq(fp4s_h5_create(check_path("big.h5"), &o, &f), 0);
    ck_assert_int_eq(fp4s_h5_write_f32(f, "x", a, rows, cols, 1), 0);
    ck_assert_int_eq(fp4s_h5_finish("test", &o, &f, true), 0);
    free(a);
    write_text(check_path("cap.h5"), "locked");
    int seen = 0, survived = 0;
    /* the delay before the kill doubles each round (5 ms .. 1.3 s): on a
     * loaded machine the child may start later than a fixed delay allows,
     * on an idle one the walk may be over before a long delay ends */
    for (int round = 0; round < 9 && !seen; round++) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t w = fork();
        ck_assert_int_ge(w, 0);
        if (w == 0) { /* a writer: the lock, then a read that validates */
            close(p[0]);
            fp4s_wlock l;
            if (fp4s_wlock_take(check_path("cap.h5"), FP4S_WLOCK_EXISTING, &l)) _exit(3);
            char c = 1;
            if (write(p[1], &c, 1) != 1) _exit(4);
            fp4s_h5_validate(check_path("big.h5"), true);
            _exit(0);
        }
        close(p[1]);
        char c;
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        long ns = 5000000L << round; /* the walk is under way */
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        nanosleep(&ts, NULL);
        kill(w, SIGKILL);
        int st;
        ck_assert_int_eq(waitpid(w, &st, 0), w);
        /* the orphan, if the walk had started: reparented to this process */
        pid_t g;
        while ((g = waitpid(-1, &st, 0)) > 0) {
            seen++;
            if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) survived++;
        }
    }
    ck_assert_msg(seen > 0, "the guard's child was never caught alive");
    ck_assert_msg(survived == 0, "%d of %d guard children outlived their SIGKILLed parent", survived, seen);
    ck_assert_int_eq(fp4s_file_held(check_path("cap.h5")), 0);
#endif
}
END_TEST

/* ---- mutation: no input crashes the parsers (run under the sanitizers) ---- */
static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

START_TEST(npy_header_survives_mutation)
{
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    unsigned char base[128], b[128];
    size_t dl = strlen(dict), total = 128;
    memcpy(base, "\x93NUMPY\x01\x00", 8);
    base[8] = (unsigned char)(total - 10);
    base[9] = 0;
    memcpy(base + 10, dict, dl);
    memset(base + 10 + dl, ' ', total - 10 - dl - 1);
    base[total - 1] = '\n';
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(b, base, total);
        int nm = 1 + (int)(rnd() % 4);
        for (int k = 0; k < nm; k++) b[rnd() % total] = (unsigned char)rnd();
        size_t len = rnd() % 8 == 0 ? rnd() % total : total;
        fp4s_dtype dt;
        int rank;
        uint64_t sh[2], off;
        int rc = fp4s_npy_parse_header("m.npy", b, len, &dt, &rank, sh, &off, NULL);
        if (rc == 0) {
            accepted++;
            ck_assert(rank == 1 || rank == 2);
            ck_assert_uint_le(off, len);
        } else {
            ck_assert(rc < 0);
            ck_assert(strncmp(fp4s_last_error(), "m.npy", 5) == 0);
        }
    }
    ck_assert_int_gt(accepted, 0); /* mutations in the padding are harmless */
}
END_TEST

#if FP4S_HAVE_JANSSON
START_TEST(safetensors_survives_mutation)
{
    const char *json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
    size_t jl = strlen(json);
    unsigned char data[24] = {0};
    unsigned char *buf = malloc(8 + jl);
    for (int it = 0; it < 400; it++) {
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)jl >> (8 * i));
        memcpy(buf + 8, json, jl);
        int nm = 1 + (int)(rnd() % 3);
        for (int k = 0; k < nm; k++) buf[rnd() % (8 + jl)] = (unsigned char)rnd();
        write_bytes(check_path("m.safetensors"), buf, 8 + jl, data, rnd() % 2 ? 24 : rnd() % 24);
        fp4s_source *s = NULL;
        int rc = fp4s_source_open(st_spec("m.safetensors", "w"), &s);
        if (rc == 0) {
            float out[64];
            size_t c = fp4s_source_cols(s);
            if (c <= 64 && fp4s_source_rows(s) * c <= 64) {
                for (size_t r = 0; r < fp4s_source_rows(s); r++)
                    ck_assert_int_eq(fp4s_source_read(s, r, 1, out, c), 0);
            }
            fp4s_source_close(&s);
        } else {
            ck_assert_ptr_null(s);
            ck_assert(strstr(fp4s_last_error(), "m.safetensors") != NULL);
        }
    }
    free(buf);
}
END_TEST
#endif

#if !FP4S_HAVE_JANSSON
/* built without jansson: a .safetensors input is refused, naming the file and why */
START_TEST(safetensors_needs_jansson)
{
    static const float data[2] = {1, 2};
    make_st(check_path("m.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, -1);
    fp4s_source *s = NULL;
    ck_assert_int_eq(fp4s_source_open(st_spec("m.safetensors", "w"), &s), FP4S_ENOTSUP);
    ck_assert_ptr_null(s);
    ck_assert(strstr(fp4s_last_error(), "m.safetensors") && strstr(fp4s_last_error(), "jansson"));
}
END_TEST
#endif

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    const check_case tests[] = {
        CHECK_CASE(dtype_names_and_sizes),
        CHECK_CASE(npy_header_accepts_numpy_forms),
        CHECK_CASE(npy_header_rejects_malformed),
        CHECK_CASE(npy_header_rejects_bad_prefix),
        CHECK_CASE(npy_reads_float32_float64_float16),
        CHECK_CASE(npy_rejects_bad_files),
        CHECK_CASE(source_read_rows_stride_and_range),
#if FP4S_HAVE_JANSSON
        CHECK_CASE(safetensors_reads_f32_f16_bf16),
        CHECK_CASE(safetensors_rejects_lies),
#else
        CHECK_CASE(safetensors_needs_jansson),
#endif
        CHECK_CASE(h5_reads_float_and_bfloat16),
        CHECK_CASE(h5_rejects_bad_datasets),
        CHECK_CASE(source_data_range_of_each_kind),
        CHECK_CASE(file_resident_probe),
        CHECK_CASE(file_resident_samples_long_ranges),
        CHECK_CASE(rank3_and_more_read_as_rows_of_the_last_dimension),
#if FP4S_HAVE_JANSSON
        CHECK_CASE(spec_path_with_colon),
#endif
        CHECK_CASE(outfile_commit_and_abort),
        CHECK_CASE(file_lock_held_and_commit),
        CHECK_CASE(npy_writer_round_trip),
        CHECK_CASE(npy_writer_incomplete_is_discarded),
        CHECK_CASE(h5_write_f32_and_attrs),
        CHECK_CASE(h5_guard_leaves_the_callers_streams_alone),
        CHECK_CASE(h5_guard_child_dies_with_its_parent),
        CHECK_CASE(npy_header_survives_mutation),
#if FP4S_HAVE_JANSSON
        CHECK_CASE(safetensors_survives_mutation),
#endif
    };
    check_add_cases(s, tests, CHECK_NCASES(tests), setup, teardown, 0);
    return s;
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return check_run(io_suite(), CK_NORMAL);
}
