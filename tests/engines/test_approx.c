/* The GPU-instruction emulation (lib/base/approx.c) against the table
 * measured on the H200 and against the definitions measured there.
 *
 *   test_approx [SAMPLES]
 *
 * Without an argument (the default suite): the table compiled into the
 * library equals lib/base/approx/rcp_approx_ftz_sm90.h5 for every mantissa;
 * rcp.approx.ftz(1.m) is the correctly rounded 1/(1.m) (by exact integer
 * division here) plus that deviation; every exponent scales it as the
 * hypothesis measured on the GPU says (0 mismatches there), with the ftz
 * flush, zeros, subnormals, Inf and NaN; ex2.approx.ftz of every integer in
 * [-160, 160] equals the measured values in the same file; mul.rn.ftz and
 * setp.ftz cases worked by hand.
 *
 * With SAMPLES (written on the GPU by scripts/gpu/engines/approx_sample.cu:
 * records of four little-endian uint32, op, a, b, result): every sample's
 * result must equal the emulation's (op 0: rcp.approx.ftz.f32(a); 1:
 * ex2.approx.ftz.f32 of the integer a - 1000; 2: mul.rn.ftz.f32(a, b); 3:
 * div.rn.ftz.f32(a, b)). NaN results are compared as NaN (their payload is
 * not modelled) except for rcp, whose NaN is 0x7FFFFFFF. */
#include "../check_main.h"
#include <hdf5.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/approx.h"
#include "base/codec_internal.h"

static const char *samples_path;

static char *table_path(void)
{
    static char p[4096];
    const char *src = getenv("FP4S_SRCDIR");
    snprintf(p, sizeof p, "%s/lib/base/approx/rcp_approx_ftz_sm90.h5", src ? src : ".");
    return p;
}

static void *read_ds(const char *name, hid_t type, size_t size, size_t *n)
{
    hid_t f = H5Fopen(table_path(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_msg(f >= 0, "%s: cannot open (FP4S_SRCDIR)", table_path());
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    ck_assert_msg(d >= 0, "%s: no %s", table_path(), name);
    hid_t sp = H5Dget_space(d);
    *n = (size_t)H5Sget_simple_extent_npoints(sp);
    void *buf = malloc(*n * size);
    ck_assert(buf && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    return buf;
}

/* bits of the correctly rounded 1/(1 + m 2^-23), by integer division */
static uint32_t rcp_rn_bits(uint32_t m)
{
    if (m == 0) return 0x3F800000u;
    uint64_t d = (1u << 23) + m, num = 1ull << 47; /* 2^24 / (1.m) = 2^47 / d in (2^23, 2^24) */
    uint64_t q = num / d, r = num % d;
    if (2 * r > d || (2 * r == d && (q & 1))) q++;
    return (126u << 23) | (uint32_t)(q - (1u << 23));
}

START_TEST(table_is_the_shipped_file)
{
    size_t n;
    int8_t *dev = read_ds("/rcp_approx_ftz/deviation", H5T_NATIVE_INT8, 1, &n);
    ck_assert_uint_eq(n, 1u << 23);
    size_t cnt[3] = {0, 0, 0}, bad = 0;
    for (uint32_t m = 0; m < n; m++) {
        bad += fp4s_rcp_approx_dev(m) != dev[m];
        cnt[dev[m] + 1]++;
    }
    ck_assert_uint_eq(bad, 0);
    /* the measured counts (make_table.py records them in the file too) */
    ck_assert_uint_eq(cnt[0], 374723);
    ck_assert_uint_eq(cnt[1], 7280086);
    ck_assert_uint_eq(cnt[2], 733799);
    free(dev);
    ck_assert(strstr(fp4s_approx_arch, "sm_90") != NULL);
    ck_assert(strstr(fp4s_approx_arch, "H200") != NULL);
}
END_TEST

START_TEST(rcp_every_mantissa_and_exponent)
{
    size_t bad = 0;
    uint32_t first = 0;
    for (uint32_t m = 0; m < (1u << 23); m++) {
        uint32_t t = rcp_rn_bits(m) + (uint32_t)fp4s_rcp_approx_dev(m);
        if (fp4s_f32_bits(fp4s_rcp_approx_ftz(fp4s_bits_f32(0x3F800000u | m))) != t && !bad++) first = m;
        /* every exponent of a sample of mantissas, both signs */
        if (m % 4093 == 0)
            for (uint32_t e = 1; e < 255; e++)
                for (uint32_t s = 0; s < 2; s++) {
                    uint32_t u = s << 31 | e << 23 | m;
                    int re = (int)(t >> 23) - ((int)e - 127);
                    uint32_t want = re < 1 ? s << 31 : (s << 31) | (uint32_t)re << 23 | (t & 0x7FFFFFu);
                    if (fp4s_f32_bits(fp4s_rcp_approx_ftz(fp4s_bits_f32(u))) != want && !bad++) first = u;
                }
    }
    ck_assert_msg(bad == 0, "%zu inputs differ, the first 0x%08x", bad, first);
}
END_TEST

START_TEST(rcp_specials)
{
    static const struct { uint32_t in, out; } c[] = {
        {0x00000000u, 0x7F800000u}, {0x80000000u, 0xFF800000u},      /* +-0 -> +-Inf */
        {0x00000001u, 0x7F800000u}, {0x807FFFFFu, 0xFF800000u},      /* subnormal (ftz) -> +-Inf */
        {0x7F800000u, 0x00000000u}, {0xFF800000u, 0x80000000u},      /* +-Inf -> +-0 */
        {0x7FC00000u, 0x7FFFFFFFu}, {0xFFC00001u, 0x7FFFFFFFu}, {0x7F800001u, 0x7FFFFFFFu},
        {0x7F000000u, 0x00000000u},                                  /* 1/2^127 flushed */
        {0x7E800000u, 0x00800000u},                                  /* 1/2^126 = 2^-126 */
        {0x40C00000u, 0x3E2AAAABu},                                  /* rcp(6) = fl(1/6) on sm_90 */
        {0x3F800000u, 0x3F800000u},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        ck_assert_msg(fp4s_f32_bits(fp4s_rcp_approx_ftz(fp4s_bits_f32(c[i].in))) == c[i].out, "rcp(0x%08x)",
                      c[i].in);
}
END_TEST

START_TEST(ex2_integers_as_measured)
{
    size_t n;
    float *v = read_ds("/ex2_approx_ftz/integers", H5T_NATIVE_FLOAT, 4, &n);
    ck_assert_uint_eq(n, 321);
    for (int i = 0; i < 321; i++)
        ck_assert_msg(fp4s_f32_bits(fp4s_ex2_approx_ftz_int(i - 160)) == fp4s_f32_bits(v[i]), "ex2(%d)", i - 160);
    free(v);
    ck_assert_float_eq(fp4s_ex2_approx_ftz_int(-127), 0.0f);
    ck_assert_float_eq(fp4s_ex2_approx_ftz_int(-126), 0x1p-126f);
}
END_TEST

START_TEST(mul_div_ftz_by_hand)
{
    /* (1 - 2^-24) * 2^-126: exactly 24 bits below 2^-126 -> tiny after rounding: flushed (the one
     * product of the H200's 16.8 M near 2^-126 where flushing the float product would disagree) */
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_mul_ftz(fp4s_bits_f32(0x3F7FFFFFu), 0x1p-126f)), 0u);
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_mul_ftz(fp4s_bits_f32(0x3F7FFFFFu), -0x1p-126f)), 0x80000000u);
    ck_assert_float_eq(fp4s_mul_ftz(1.0f, 0x1p-126f), 0x1p-126f);
    ck_assert_float_eq(fp4s_mul_ftz(0x1p-63f, 0x1p-63f), 0x1p-126f);
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_mul_ftz(0x1p-64f, 0x1p-63f)), 0u);        /* 2^-127: flushed */
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_mul_ftz(0x1p-130f, 0x1p100f)), 0u);       /* subnormal operand: 0 */
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_mul_ftz(-0x1p-130f, 0x1p100f)), 0x80000000u);
    ck_assert(isnan(fp4s_mul_ftz(0x1p-130f, INFINITY)));                          /* 0 * Inf */
    ck_assert_float_eq(fp4s_mul_ftz(3.0f, 5.0f), 15.0f);
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_div_ftz(1.0f, FLT_MAX)), 0u);              /* 2^-128-ish: flushed */
    ck_assert_float_eq(fp4s_div_ftz(1.0f, 0x1p126f), 0x1p-126f);
    ck_assert_float_eq(fp4s_div_ftz(1.0f, 0.0f), INFINITY);
    ck_assert_float_eq(fp4s_div_ftz(1.0f, 0x1p-130f), INFINITY);                  /* subnormal divisor: 0 */
    ck_assert_uint_eq(fp4s_f32_bits(fp4s_daz(-0x1p-127f)), 0x80000000u);
    ck_assert_float_eq(fp4s_daz(0x1p-126f), 0x1p-126f);
}
END_TEST

/* The GPU's samples (scripts/gpu/engines/approx_sample.cu) */
START_TEST(gpu_samples)
{
    FILE *f = fopen(samples_path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot read", samples_path);
    uint32_t rec[4];
    size_t n = 0, bad = 0;
    while (fread(rec, 4, 4, f) == 4) {
        float a = fp4s_bits_f32(rec[1]), b = fp4s_bits_f32(rec[2]), got;
        switch (rec[0]) {
        case 0: got = fp4s_rcp_approx_ftz(a); break;
        case 1: got = fp4s_ex2_approx_ftz_int((int)rec[1] - 1000); break;
        case 2: got = fp4s_mul_ftz(a, b); break;
        case 3: got = fp4s_div_ftz(a, b); break;
        default: ck_abort_msg("%s: record %zu: unknown op %u", samples_path, n, rec[0]);
        }
        uint32_t g = fp4s_f32_bits(got);
        bool same = g == rec[3] || (isnan(got) && isnan(fp4s_bits_f32(rec[3])) && rec[0] != 0);
        if (!same && bad++ < 8)
            fprintf(stderr, "op %u in 0x%08x 0x%08x: GPU 0x%08x, emulation 0x%08x\n", rec[0], rec[1], rec[2],
                    rec[3], g);
        n++;
    }
    fclose(f);
    printf("test_approx: %zu GPU samples, %zu differ\n", n, bad);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_eq(bad, 0);
}
END_TEST

int main(int argc, char **argv)
{
    samples_path = argc > 1 ? argv[1] : NULL;
    Suite *s = suite_create("approx");
    const check_case gpu[] = {CHECK_CASE(gpu_samples)};
    const check_case cases[] = {
        CHECK_CASE(table_is_the_shipped_file),
        CHECK_CASE(rcp_every_mantissa_and_exponent),
        CHECK_CASE(rcp_specials),
        CHECK_CASE(ex2_integers_as_measured),
        CHECK_CASE(mul_div_ftz_by_hand),
    };
    if (samples_path)
        check_add_cases(s, gpu, CHECK_NCASES(gpu), NULL, NULL, 120);
    else
        check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    return check_run(s, CK_NORMAL);
}
