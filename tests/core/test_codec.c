/* Codec unit tests: exhaustive over BF16/FP16 (2^16) and E4M3/E8M0 (2^8),
 * E4M3/BF16/FP16 encoders against an independent double-precision nearest
 * search on a strided fp32 sweep plus every midpoint, the E2M1 tie tables,
 * ggml's UE4M3 encoder and the MXFP4 shared-exponent rules on hand-picked
 * amax values. */
#include "../check_main.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <fp4scope/codec.h>
#include "base/codec_internal.h"

static float bf(uint32_t u) { return fp4s_bits_f32(u); }
static uint32_t fb(float f) { return fp4s_f32_bits(f); }

/* Independent decoders from the field definitions, in double. */
static double ref_decode(uint32_t code, int E, int M, int bias)
{
    uint32_t s = code >> (E + M), e = (code >> M) & ((1u << E) - 1), m = code & ((1u << M) - 1);
    double v = e == 0 ? ldexp((double)m, 1 - bias - M) : ldexp((double)((1u << M) + m), (int)e - bias - M);
    return s ? -v : v;
}

/* Round |x| (double, finite) to the sorted grid g[0..n-1] (g[0] = 0) with a tie
 * rule; values beyond g[n-1] return n-1 (satfinite) unless top_virtual > 0, in
 * which case g[n-1] is followed by a virtual point top_virtual with index n. */
static int ref_round(double a, const double *g, int n, fp4s_tie tie, double top_virtual)
{
    if (a >= g[n - 1]) {
        if (top_virtual <= 0) return n - 1;
        double mid = (g[n - 1] + top_virtual) / 2;
        if (a < mid) return n - 1;
        if (a > mid) return n;
        /* tie between n-1 and the virtual top: the top has even mantissa 0 */
        if (tie == FP4S_TIE_ZERO) return n - 1;
        if (tie == FP4S_TIE_AWAY) return n;
        return ((n - 1) & 1) ? n : n - 1;
    }
    int lo = 0, hi = n - 1; /* g[lo] <= a < g[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (g[mid] <= a) lo = mid; else hi = mid;
    }
    double dl = a - g[lo], dh = g[hi] - a;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    if (tie == FP4S_TIE_ZERO) return lo;
    if (tie == FP4S_TIE_AWAY) return hi;
    return (lo & 1) ? hi : lo;
}

static const fp4s_tie ties[3] = {FP4S_TIE_EVEN, FP4S_TIE_ZERO, FP4S_TIE_AWAY};

/* BF16 and FP16: every code decodes to the value of its fields (NaN for the
 * NaN codes, the code's sign otherwise), and every code but NaN encodes back
 * to itself under every tie rule (a NaN to a NaN). */
typedef struct half16 {
    const char *name;
    int E, M, bias;
    float (*decode)(uint16_t);
    uint16_t (*encode)(float, fp4s_tie);
} half16;
static const half16 BF16 = {"bf16", 8, 7, 127, fp4s_bf16_decode, fp4s_bf16_encode};
static const half16 FP16 = {"fp16", 5, 10, 15, fp4s_fp16_decode, fp4s_fp16_encode};

static void decode_every_code(const half16 *h)
{
    const uint32_t emax = (1u << h->E) - 1, mmask = (1u << h->M) - 1;
    for (uint32_t c = 0; c < 65536; c++) {
        float f = h->decode((uint16_t)c);
        uint32_t e = (c >> h->M) & emax, m = c & mmask;
        if (e == emax && m) { ck_assert_msg(isnan(f), "%s %04x", h->name, c); continue; }
        double want = e == emax ? ((c >> 15) ? -INFINITY : INFINITY) : ref_decode(c, h->E, h->M, h->bias);
        ck_assert_msg((double)f == want && !!signbit(f) == !!(c >> 15), "%s %04x -> %a want %a", h->name, c, f,
                      want);
    }
}

static void roundtrip_every_code(const half16 *h)
{
    const uint32_t emax = (1u << h->E) - 1, mmask = (1u << h->M) - 1, inf = emax << h->M;
    for (int t = 0; t < 3; t++)
        for (uint32_t c = 0; c < 65536; c++) {
            uint32_t e = (c >> h->M) & emax, m = c & mmask;
            uint16_t r = h->encode(h->decode((uint16_t)c), ties[t]);
            if (e == emax && m) ck_assert_msg((r & inf) == inf && (r & mmask), "nan %04x", c);
            else ck_assert_msg(r == c, "%s %04x -> %04x", h->name, c, r);
        }
}

/* ---- BF16 ------------------------------------------------------------------ */
START_TEST(bf16_decode_every_code) { decode_every_code(&BF16); }
END_TEST

START_TEST(bf16_roundtrip_every_code) { roundtrip_every_code(&BF16); }
END_TEST

/* The bulk converter (a bit trick) gives the scalar encoder's bits for every
 * 97th float32 bit pattern and every pattern next to a BF16 halfway point. */
START_TEST(bf16_bulk_matches_scalar)
{
    enum { N = 4096 };
    float in[N];
    uint16_t out[N];
    size_t k = 0;
    uint64_t checked = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 97) {
        in[k++] = fp4s_bits_f32((uint32_t)u);
        if (k == N || u + 97 > 0xFFFFFFFFull) {
            fp4s_f32_to_bf16(in, out, k);
            for (size_t i = 0; i < k; i++) /* (ck_assert per value would dominate the time) */
                if (out[i] != fp4s_bf16_encode(in[i], FP4S_TIE_EVEN))
                    ck_abort_msg("%a: %04x vs %04x", in[i], out[i], fp4s_bf16_encode(in[i], FP4S_TIE_EVEN));
            checked += k;
            k = 0;
        }
    }
    for (uint32_t hi = 0; hi < 0x10000; hi++)
        for (int d = -2; d <= 2; d++) {
            uint32_t u = (hi << 16) + 0x8000u + (uint32_t)d;
            float x = fp4s_bits_f32(u);
            uint16_t b;
            fp4s_f32_to_bf16(&x, &b, 1);
            if (b != fp4s_bf16_encode(x, FP4S_TIE_EVEN)) ck_abort_msg("%08x: %04x", u, b);
            float back;
            fp4s_bf16_to_f32(&b, &back, 1);
            if (fp4s_f32_bits(back) != (uint32_t)b << 16) ck_abort_msg("%04x widens to %a", b, back);
        }
    ck_assert(checked > 44000000);
}
END_TEST

static double *bf16_grid, *fp16_grid, e4m3_grid[127];

START_TEST(bf16_encode_matches_double_reference)
{
    /* strided sweep over all fp32 bit patterns plus every midpoint */
    for (int t = 0; t < 3; t++) {
        for (uint64_t u = 0; u < 0x100000000ull; u += 65537ull * 3) {
            float x = bf((uint32_t)u);
            if (isnan(x)) continue;
            uint16_t got = fp4s_bf16_encode(x, ties[t]);
            double a = fabs((double)x);
            int idx = isinf(x) ? 0x7F80 : ref_round(a, bf16_grid, 0x7F80, ties[t], 0x1p128);
            uint16_t want = (uint16_t)(idx | (signbit(x) ? 0x8000 : 0));
            ck_assert_msg(got == want, "bf16(%a,%d) = %04x want %04x", x, t, got, want);
        }
        for (uint32_t c = 0; c < 0x7F7F; c++) {
            float mid = (float)((bf16_grid[c] + bf16_grid[c + 1]) / 2); /* exact in fp32 */
            for (int d = -1; d <= 1; d++) {
                float x = bf(fb(mid) + (uint32_t)d);
                if (c == 0 && d < 0) continue;
                uint16_t got = fp4s_bf16_encode(-x, ties[t]);
                int idx = ref_round((double)x, bf16_grid, 0x7F80, ties[t], 0x1p128);
                ck_assert_msg(got == (uint16_t)(idx | 0x8000), "bf16 mid %a t%d: %04x want %04x",
                              -x, t, got, idx | 0x8000);
            }
        }
    }
    ck_assert_uint_eq(fp4s_bf16_encode(NAN, FP4S_TIE_EVEN) & 0x7FC0, 0x7FC0);
}
END_TEST

/* ---- FP16 ------------------------------------------------------------------ */
START_TEST(fp16_decode_every_code) { decode_every_code(&FP16); }
END_TEST

START_TEST(fp16_roundtrip_every_code) { roundtrip_every_code(&FP16); }
END_TEST

START_TEST(fp16_encode_matches_double_reference)
{
    for (int t = 0; t < 3; t++) {
        for (uint64_t u = 0; u < 0x100000000ull; u += 65537ull * 3) {
            float x = bf((uint32_t)u);
            if (isnan(x)) continue;
            uint16_t got = fp4s_fp16_encode(x, ties[t]);
            int idx = isinf(x) ? 0x7C00 : ref_round(fabs((double)x), fp16_grid, 0x7C00, ties[t], 65536.0);
            uint16_t want = (uint16_t)(idx | (signbit(x) ? 0x8000 : 0));
            ck_assert_msg(got == want, "fp16(%a,%d) = %04x want %04x", x, t, got, want);
        }
        for (uint32_t c = 0; c < 0x7C00; c++) {
            double hi = c + 1 < 0x7C00 ? fp16_grid[c + 1] : 65536.0;
            float mid = (float)((fp16_grid[c] + hi) / 2);
            for (int d = -1; d <= 1; d++) {
                if (c == 0 && d < 0) continue;
                float x = bf(fb(mid) + (uint32_t)d);
                uint16_t got = fp4s_fp16_encode(x, ties[t]);
                int idx = ref_round((double)x, fp16_grid, 0x7C00, ties[t], 65536.0);
                ck_assert_msg(got == idx, "fp16 mid %a t%d: %04x want %04x", x, t, got, idx);
            }
        }
    }
    ck_assert_uint_eq(fp4s_fp16_encode(1e6f, FP4S_TIE_EVEN), 0x7C00);
    ck_assert_uint_eq(fp4s_fp16_encode(-INFINITY, FP4S_TIE_EVEN), 0xFC00);
    ck_assert_uint_eq(fp4s_fp16_encode(65520.0f, FP4S_TIE_EVEN), 0x7C00);
    ck_assert_uint_eq(fp4s_fp16_encode(65520.0f, FP4S_TIE_ZERO), 0x7BFF);
}
END_TEST

/* ---- E4M3 ------------------------------------------------------------------ */
START_TEST(e4m3_decode_every_code)
{
    for (uint32_t c = 0; c < 256; c++) {
        float f = fp4s_e4m3_decode((uint8_t)c);
        if ((c & 0x7F) == 0x7F) { ck_assert_msg(isnan(f), "e4m3 %02x", c); continue; }
        double want = ref_decode(c, 4, 3, 7);
        ck_assert_msg((double)f == want && !!signbit(f) == !!(c & 0x80), "e4m3 %02x -> %a", c, f);
    }
    ck_assert(fp4s_e4m3_decode(0x7E) == 448.0f);
    ck_assert(fp4s_e4m3_decode(0x01) == 0x1p-9f);
    ck_assert(fp4s_e4m3_decode(0x08) == 0x1p-6f);
}
END_TEST

static unsigned long e4m3_bad;
static float e4m3_first_bad;

static void e4m3_check(float x, int t)
{
    uint8_t got = fp4s_e4m3_encode(x, ties[t]), want;
    if (isnan(x)) {
        want = 0x7F;
    } else {
        int idx = ref_round(fabs((double)x), e4m3_grid, 127, ties[t], 0); /* > 448 saturates */
        want = (uint8_t)(idx | (signbit(x) ? 0x80 : 0));
    }
    if (got != want && !e4m3_bad++) e4m3_first_bad = x;
}

START_TEST(e4m3_encode_matches_double_reference)
{
    for (int t = 0; t < 3; t++) {
        for (uint64_t u = 0; u < 0x100000000ull; u += 4099)
            e4m3_check(bf((uint32_t)u), t);
        for (int c = 0; c < 126; c++) {
            float mid = (float)((e4m3_grid[c] + e4m3_grid[c + 1]) / 2);
            for (int d = -2; d <= 2; d++) {
                if (c == 0 && d < 0) continue;
                float x = bf(fb(mid) + (uint32_t)d);
                e4m3_check(x, t);
                e4m3_check(-x, t);
            }
        }
        e4m3_check(464.0f, t);
        e4m3_check(1e30f, t);
        e4m3_check(INFINITY, t);
        e4m3_check(-INFINITY, t);
    }
    ck_assert_msg(e4m3_bad == 0, "%lu mismatches, first at %a", e4m3_bad, e4m3_first_bad);
    ck_assert_uint_eq(fp4s_e4m3_encode(464.0f, FP4S_TIE_AWAY), 0x7E); /* satfinite */
    ck_assert_uint_eq(fp4s_e4m3_encode(0x1p-10f, FP4S_TIE_EVEN), 0x00); /* tie to even 0 */
    ck_assert_uint_eq(fp4s_e4m3_encode(0x1p-10f, FP4S_TIE_AWAY), 0x01);
    ck_assert_uint_eq(fp4s_e4m3_encode(0x3p-10f, FP4S_TIE_EVEN), 0x02);
    ck_assert_uint_eq(fp4s_e4m3_encode(-0.0f, FP4S_TIE_EVEN), 0x80);
}
END_TEST

START_TEST(ue4m3_ggml_encoder_cases)
{
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(448.0f), 0x7E);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(1e9f), 0x7E);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(256.0f), 0x7E);  /* exponent 15 -> 448 */
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(300.0f), 0x7E);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(240.0f), 0x77);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(250.0f), 0x7E);  /* rounds into exponent 15 */
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(1.0625f), 0x39); /* half up (RNE gives 0x38) */
    ck_assert_uint_eq(fp4s_e4m3_encode(1.0625f, FP4S_TIE_EVEN), 0x38);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(1.0624999f), 0x38);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x1p-6f), 0x08);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x1p-9f), 0x01);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x1p-10f), 0x01);  /* 0.5 + 0.5 = 1 */
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x1.fffffep-11f), 0x01); /* float sum rounds to 1 */
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x1.fffffcp-11f), 0x00);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0x7.8p-9f), 0x07); /* 7.5 -> 8 -> clamp 7 */
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(0.0f), 0);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(-1.0f), 0);
    ck_assert_uint_eq(fp4s_ue4m3_encode_ggml(NAN), 0);
    ck_assert(fp4s_ue4m3_decode_ggml(0x7F) == 0.0f);
    ck_assert(fp4s_ue4m3_decode_ggml(0x7E) == 448.0f);
}
END_TEST

/* ---- E8M0 ------------------------------------------------------------------ */
START_TEST(e8m0_decode_every_code)
{
    for (int c = 0; c < 255; c++)
        ck_assert_msg((double)fp4s_e8m0_decode((uint8_t)c) == ldexp(1.0, c - 127), "e8m0 %d", c);
    ck_assert(isnan(fp4s_e8m0_decode(0xFF)));
}
END_TEST

/* ---- E2M1 ------------------------------------------------------------------ */
START_TEST(e2m1_decode_every_code)
{
    static const float v[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) {
        float f = fp4s_e2m1_decode((uint8_t)c);
        ck_assert(fabsf(f) == v[c & 7]);
        ck_assert(!!signbit(f) == !!(c & 8));
        ck_assert((double)f == ref_decode((uint32_t)c, 2, 1, 1));
    }
}
END_TEST

struct tie_case { float x; uint8_t rne, rtz, rha; };

START_TEST(e2m1_rne_ties)
{
    /* E2M1 RNE ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4, >5->6, >6 -> 6 */
    static const struct tie_case c[] = {
        {0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
        {2.5f, 4, 4, 5}, {3.5f, 6, 5, 6}, {5.0f, 6, 6, 7}, {5.0000005f, 7, 7, 7},
        {6.0f, 7, 7, 7}, {6.5f, 7, 7, 7}, {1e30f, 7, 7, 7}, {INFINITY, 7, 7, 7},
        {0.2499999f, 0, 0, 0}, {0.2500001f, 1, 1, 1}, {0.5f, 1, 1, 1}, {2.4999998f, 4, 4, 4},
        {2.5000002f, 5, 5, 5}, {4.9999995f, 6, 6, 6}, {0.0f, 0, 0, 0}, {1e-40f, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(fp4s_e2m1_encode(c[i].x, FP4S_TIE_EVEN, true) == c[i].rne, "rne %a", c[i].x);
        ck_assert_msg(fp4s_e2m1_encode(-c[i].x, FP4S_TIE_EVEN, true) == (c[i].rne | 8), "rne -%a", c[i].x);
    }
}
END_TEST

START_TEST(e2m1_rtz_and_rha_tables)
{
    static const struct tie_case c[] = {
        {0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
        {2.5f, 4, 4, 5}, {3.5f, 6, 5, 6}, {5.0f, 6, 6, 7}, {7.0f, 7, 7, 7},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(fp4s_e2m1_encode(c[i].x, FP4S_TIE_ZERO, true) == c[i].rtz, "rtz %a", c[i].x);
        ck_assert_msg(fp4s_e2m1_encode(c[i].x, FP4S_TIE_AWAY, true) == c[i].rha, "rha %a", c[i].x);
        ck_assert(fp4s_e2m1_encode(-c[i].x, FP4S_TIE_ZERO, false) == (c[i].rtz ? (c[i].rtz | 8) : 0));
        ck_assert(fp4s_e2m1_encode(-c[i].x, FP4S_TIE_AWAY, true) == (c[i].rha | 8));
    }
}
END_TEST

START_TEST(e2m1_sign_and_negative_zero_policy)
{
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.1f, FP4S_TIE_EVEN, true), 8);
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.1f, FP4S_TIE_EVEN, false), 0);
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.0f, FP4S_TIE_EVEN, true), 8);
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.0f, FP4S_TIE_EVEN, false), 0);
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.25f, FP4S_TIE_ZERO, false), 0);
    ck_assert_uint_eq(fp4s_e2m1_encode(-0.3f, FP4S_TIE_ZERO, false), 9);
    ck_assert_uint_eq(fp4s_e2m1_encode(NAN, FP4S_TIE_EVEN, true), 0);
    ck_assert_uint_eq(fp4s_e2m1_encode(-INFINITY, FP4S_TIE_EVEN, true), 15);
}
END_TEST

START_TEST(e2m1_every_value_against_grid)
{
    /* all fp32 in [0, 8] on a fine stride against the double reference grid */
    static const double g[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    unsigned long bad = 0;
    float first = 0;
    for (int t = 0; t < 3; t++)
        for (uint32_t u = 0; u <= fb(8.0f); u += 331) {
            float x = bf(u);
            int want = ref_round((double)x, g, 8, ties[t], 0);
            if (fp4s_e2m1_encode(x, ties[t], true) != want && !bad++) first = x;
        }
    ck_assert_msg(bad == 0, "%lu mismatches, first at %a", bad, first);
}
END_TEST

/* ---- MX scale rules ----------------------------------------------------------- */
static int k_of(fp4s_mx_rule r, float a) { return fp4s_mx_k(r, a, NULL); }

START_TEST(mx_floor_hand_cases)
{
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 1.0f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 0x1.fffffep0f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 4.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 6.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 7.0f), 0);   /* 7/1 = 7 clips to 6 */
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 8.0f), 1);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 6.0f * 0x1p20f), 20);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 7.0f * 0x1p-30f), -30);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 0x1p-125f), -127);
    bool low = false;
    ck_assert_int_eq(fp4s_mx_k(FP4S_MX_FLOOR, 0x1p-126f, &low), -127);
    ck_assert(low);
    ck_assert_int_eq(fp4s_mx_k(FP4S_MX_FLOOR, 0x1p-149f, &low), -127); /* subnormal */
    ck_assert(low);
    ck_assert_int_eq(fp4s_mx_k(FP4S_MX_FLOOR, 0x1p-125f, &low), -127);
    ck_assert(!low);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, FLT_MAX), 125);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, INFINITY), 126);
}
END_TEST

START_TEST(mx_ceil_hand_cases)
{
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 6.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, nextafterf(6.0f, 7.0f)), 1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 3.0f), -1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, nextafterf(3.0f, 4.0f)), 0);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 1.0f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 1.5f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, nextafterf(1.5f, 2.0f)), -1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 7.0f), 1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 8.0f), 1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 12.0f), 1);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, nextafterf(12.0f, 13.0f)), 2);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 6.0f * 0x1p-100f), -100);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, FLT_MAX), 126);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, INFINITY), 127);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 0x1p-125f), -127);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 0x1.8p-125f), -127);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 0x1.800002p-125f), -126);
    ck_assert_int_eq(k_of(FP4S_MX_CEIL, 0x1.8p-140f), -127); /* subnormal: clamped */
    bool low;
    fp4s_mx_k(FP4S_MX_CEIL, 0x1p-126f, &low);
    ck_assert(low);
}
END_TEST

START_TEST(mx_ceil_never_clips)
{
    /* property: amax / 2^k lies in (3, 6] on a strided sweep of normal amax */
    for (uint32_t u = 0x01000000u; u < 0x7F000000u; u += 9973) {
        float a = bf(u);
        int k = k_of(FP4S_MX_CEIL, a);
        if (k <= -127 || k >= 127) continue;
        double r = ldexp((double)a, -k);
        ck_assert_msg(r <= 6.0 && r > 3.0, "ceil %a: k %d ratio %g", a, k, r);
    }
}
END_TEST

START_TEST(mx_even_hand_cases)
{
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, 7.0f), 1);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, nextafterf(7.0f, 0.0f)), 0);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, 3.5f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, nextafterf(3.5f, 0.0f)), -1);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, 6.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, 4.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, 7.0f * 0x1p50f), 51);
    ck_assert_int_eq(k_of(FP4S_MX_EVEN, FLT_MAX), 126);
}
END_TEST

START_TEST(mx_log2f_differs_from_floor_only_below_powers_of_two)
{
    /* just below 2^n (n away from 0) log2f rounds up to n: k one higher */
    ck_assert_int_eq(k_of(FP4S_MX_LOG2F, 0x1.fffffep9f), 8);
    ck_assert_int_eq(k_of(FP4S_MX_FLOOR, 0x1.fffffep9f), 7);
    ck_assert_int_eq(k_of(FP4S_MX_LOG2F, 1024.0f), 8);
    ck_assert_int_eq(k_of(FP4S_MX_LOG2F, 6.0f), 0);
    ck_assert_int_eq(k_of(FP4S_MX_LOG2F, 0x1p-125f), -127);
    ck_assert_int_eq(k_of(FP4S_MX_LOG2F, INFINITY), 127);
    int diff = 0;
    for (uint32_t u = 0x00800000u; u < 0x7F800000u; u += 4093) {
        float a = bf(u);
        int kl = k_of(FP4S_MX_LOG2F, a), kf = k_of(FP4S_MX_FLOOR, a);
        if (kl != kf) {
            diff++;
            /* only one up, and only for amax just below a power of two */
            ck_assert_int_eq(kl, kf + 1);
            ck_assert_msg((u & 0x7FFFFFu) > 0x7FF000u, "log2f differs at %a", a);
        }
    }
    for (int n = -120; n <= 127; n++) {
        float p = ldexpf(1.0f, n);
        float below = nextafterf(p, 0.0f);
        int kl = k_of(FP4S_MX_LOG2F, below), kf = k_of(FP4S_MX_FLOOR, below);
        if (n >= 8 || n <= -8) ck_assert_msg(kl == kf + 1, "n=%d", n);
        ck_assert_int_eq(k_of(FP4S_MX_LOG2F, p), k_of(FP4S_MX_FLOOR, p));
    }
}
END_TEST

START_TEST(mx_rtn_hand_cases)
{
    ck_assert_int_eq(k_of(FP4S_MX_RTN, 1.0f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_RTN, 1.4f), -2);
    ck_assert_int_eq(k_of(FP4S_MX_RTN, 1.5f), -1);  /* log2 1.5 = 0.585 */
    ck_assert_int_eq(k_of(FP4S_MX_RTN, 6.0f), 1);   /* log2 6 = 2.585 -> 3 */
    ck_assert_int_eq(k_of(FP4S_MX_RTN, 0x1p-140f), -127);
}
END_TEST

START_TEST(tie_names_parse)
{
    fp4s_tie t;
    ck_assert_int_eq(fp4s_tie_parse("rne", &t), 0); ck_assert_int_eq(t, FP4S_TIE_EVEN);
    ck_assert_int_eq(fp4s_tie_parse("away", &t), 0); ck_assert_int_eq(t, FP4S_TIE_AWAY);
    ck_assert_int_eq(fp4s_tie_parse("rtz", &t), 0); ck_assert_int_eq(t, FP4S_TIE_ZERO);
    ck_assert_int_eq(fp4s_tie_parse("nearest", &t), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_tie_name(FP4S_TIE_AWAY), "rha");
}
END_TEST

static void grids(void)
{
    bf16_grid = malloc(sizeof(double) * 0x7F80);
    fp16_grid = malloc(sizeof(double) * 0x7C00);
    for (uint32_t c = 0; c < 0x7F80; c++) bf16_grid[c] = ref_decode(c, 8, 7, 127);
    for (uint32_t c = 0; c < 0x7C00; c++) fp16_grid[c] = ref_decode(c, 5, 10, 15);
    for (uint32_t c = 0; c < 127; c++) e4m3_grid[c] = ref_decode(c, 4, 3, 7);
}

int main(void)
{
    grids();
    Suite *s = suite_create("codec");
    const check_case cases[] = {
        CHECK_CASE(bf16_decode_every_code),
        CHECK_CASE(bf16_bulk_matches_scalar),
        CHECK_CASE(bf16_roundtrip_every_code),
        CHECK_CASE(bf16_encode_matches_double_reference),
        CHECK_CASE(fp16_decode_every_code),
        CHECK_CASE(fp16_roundtrip_every_code),
        CHECK_CASE(fp16_encode_matches_double_reference),
        CHECK_CASE(e4m3_decode_every_code),
        CHECK_CASE(e4m3_encode_matches_double_reference),
        CHECK_CASE(ue4m3_ggml_encoder_cases),
        CHECK_CASE(e8m0_decode_every_code),
        CHECK_CASE(e2m1_decode_every_code),
        CHECK_CASE(e2m1_rne_ties),
        CHECK_CASE(e2m1_rtz_and_rha_tables),
        CHECK_CASE(e2m1_sign_and_negative_zero_policy),
        CHECK_CASE(e2m1_every_value_against_grid),
        CHECK_CASE(mx_floor_hand_cases),
        CHECK_CASE(mx_ceil_hand_cases),
        CHECK_CASE(mx_ceil_never_clips),
        CHECK_CASE(mx_even_hand_cases),
        CHECK_CASE(mx_log2f_differs_from_floor_only_below_powers_of_two),
        CHECK_CASE(mx_rtn_hand_cases),
        CHECK_CASE(tie_names_parse),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    int status = check_run(s, CK_ENV);
    free(bf16_grid);
    free(fp16_grid);
    return status;
}
