/* Quantizer tests: published peer tie cases as fixed vectors, MX scale rules
 * and policies through fp4s_quantize, NVFP4 recipes (TE / torchao / ModelOpt /
 * ggml), 2-D tiles, FP8 baselines, packing, dequantize round trip, threads,
 * and the front end's argument checks. */
#include "../check_main.h"
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "qhelp.h"
#include "base/codec_internal.h"

/* ---- published peer cases ------------------------------------------------------ */

/* torchao test/prototype/mx_formats/test_kernels.py test_fp4_* cases (value,
 * expected E2M1 value), quantized through an MXFP4 block whose amax 6 makes
 * the scale 1 under FLOOR. */
START_TEST(torchao_published_fp4_tie_cases)
{
    static const float c[][2] = {
        {0.25f, 0.0f}, {0.1f, 0.0f}, {0.0f, 0.0f},
        {0.6f, 0.5f}, {0.5f, 0.5f}, {0.4f, 0.5f},
        {1.25f, 1.0f}, {1.1f, 1.0f}, {1.0f, 1.0f}, {0.9f, 1.0f}, {0.75f, 1.0f},
        {1.6f, 1.5f}, {1.5f, 1.5f}, {1.4f, 1.5f},
        {2.5f, 2.0f}, {2.1f, 2.0f}, {2.0f, 2.0f}, {1.9f, 2.0f}, {1.75f, 2.0f},
        {3.1f, 3.0f}, {3.0f, 3.0f}, {2.9f, 3.0f},
        {5.0f, 4.0f}, {4.1f, 4.0f}, {4.0f, 4.0f}, {3.9f, 4.0f}, {3.5f, 4.0f},
        {6.1f, 6.0f}, {6.0f, 6.0f}, {5.9f, 6.0f}, {5.1f, 6.0f},
    };
    fp4s_spec s = prof(FP4S_MXFP4, "torchao");
    size_t n = sizeof c / sizeof c[0];
    for (size_t i = 0; i < n; i++)
        for (int sg = 0; sg < 2; sg++) {
            float x[32] = {6.0f};
            x[1] = sg ? -c[i][0] : c[i][0];
            qres q = run_q(&s, x, 1, 32);
            ck_assert_int_eq(q.rc, 0);
            ck_assert_uint_eq(q.scales[0], 127);
            float want = sg ? -c[i][1] : c[i][1];
            ck_assert_msg(q.deq[1] == want, "%g -> %g want %g", x[1], q.deq[1], want);
            /* torchao keeps the sign: -0.1 and -0 give code 8 (its negative zero test) */
            if (sg && c[i][1] == 0.0f) ck_assert_uint_eq(q.codes[1], 8);
            qres_free(&q);
        }
}
END_TEST

/* TransformerEngine tests/pytorch/nvfp4/test_nvfp4_quantize_exact.py
 * test_nvfp4_quantization_boundary_values: rows of paired values base -+ eps,
 * base = linspace(-12, 12, N/2), eps = 1e-3. Checked against an independent
 * re-implementation of TE's reference in this test (cast_to_fp4x2 thresholds). */
static uint8_t te_fp4x2_threshold(float x)
{
    /* reference_nvfp4.py cast_to_fp4x2 (x already clamped to [-6, 6]) */
    if (x >= 0.0f && x <= 0.25f) return 0;
    if (x > 0.25f && x < 0.75f) return 1;
    if (x >= 0.75f && x <= 1.25f) return 2;
    if (x > 1.25f && x < 1.75f) return 3;
    if (x >= 1.75f && x <= 2.5f) return 4;
    if (x > 2.5f && x < 3.5f) return 5;
    if (x >= 3.5f && x <= 5.0f) return 6;
    if (x > 5.0f) return 7;
    if (x >= -0.25f && x < -0.0f) return 8;
    if (x < -0.25f && x > -0.75f) return 9;
    if (x <= -0.75f && x >= -1.25f) return 10;
    if (x < -1.25f && x > -1.75f) return 11;
    if (x <= -1.75f && x >= -2.5f) return 12;
    if (x < -2.5f && x > -3.5f) return 13;
    if (x <= -3.5f && x >= -5.0f) return 14;
    if (x < -5.0f) return 15;
    return 0;
}

START_TEST(te_published_boundary_values)
{
    const size_t M = 32, N = 128;
    float *x = malloc(M * N * sizeof *x);
    for (size_t r = 0; r < M; r++)
        for (size_t i = 0; i < N / 2; i++) {
            float base = -12.0f + 24.0f * (float)i / (float)(N / 2 - 1);
            float eps = 1e-3f;
            x[r * N + 2 * i] = base - eps;
            x[r * N + 2 * i + 1] = base + eps;
        }
    fp4s_spec s = prof(FP4S_NVFP4, "te");
    qres q = run_q(&s, x, M, N);
    ck_assert_int_eq(q.rc, 0);
    /* independent TE reference */
    float amax = 0;
    for (size_t i = 0; i < M * N; i++) amax = fmaxf(amax, fabsf(x[i]));
    float genc = 448.0f * 6.0f / amax;
    float gdec = 1.0f / genc;
    unsigned bad = 0;
    for (size_t r = 0; r < M; r++)
        for (size_t b = 0; b < N / 16; b++) {
            float vm = 0;
            for (int j = 0; j < 16; j++) vm = fmaxf(vm, fabsf(x[r * N + b * 16 + j]));
            float ds = vm * (genc * (1.0f / 6.0f));
            ds = fminf(ds, 448.0f);
            uint8_t sb = fp4s_e4m3_encode(ds, FP4S_TIE_EVEN);
            if (q.scales[r * (N / 16) + b] != sb) bad++;
            float es = 1.0f / (fp4s_e4m3_decode(sb) * gdec);
            for (int j = 0; j < 16; j++) {
                float v = x[r * N + b * 16 + j] * es;
                v = fminf(fmaxf(v, -6.0f), 6.0f);
                if (q.codes[r * N + b * 16 + j] != te_fp4x2_threshold(v)) bad++;
            }
        }
    ck_assert_uint_eq(bad, 0);
    qres_free(&q);
    free(x);
}
END_TEST

/* ---- MX scale rules and policies through the quantizer ---------------------------- */

static uint8_t mx_code_of(const char *profile, float amax)
{
    fp4s_spec s = prof(FP4S_MXFP4, profile);
    float x[32] = {0};
    x[5] = amax;
    qres q = run_q(&s, x, 1, 32);
    ck_assert_int_eq(q.rc, 0);
    uint8_t c = q.scales[0];
    ck_assert_uint_eq(c, fp4s_mx_scale_code(&s, amax));
    qres_free(&q);
    return c;
}

START_TEST(mx_profiles_scale_codes_on_hand_picked_amax)
{
    /* amax 7: FLOOR k=0 (clips), CEIL k=1, EVEN k=1, LOG2F k=0 */
    ck_assert_uint_eq(mx_code_of("ocp", 7.0f), 127);
    ck_assert_uint_eq(mx_code_of("torchao", 7.0f), 127);
    ck_assert_uint_eq(mx_code_of("ceil", 7.0f), 128);
    ck_assert_uint_eq(mx_code_of("torchao-rceil", 7.0f), 128);
    ck_assert_uint_eq(mx_code_of("torchao-rceil@0.18", 7.0f), 128);
    ck_assert_uint_eq(mx_code_of("even", 7.0f), 128);
    ck_assert_uint_eq(mx_code_of("even@0.18", 7.0f), 128);
    /* torchao's EVEN rounds 1.75 * 2^127 up to Inf: 0xFF since 5d73a0c10, 253 before */
    ck_assert_uint_eq(mx_code_of("even", 0x1.cp127f), 0xFF);
    ck_assert_uint_eq(mx_code_of("even", FLT_MAX), 0xFF);
    ck_assert_uint_eq(mx_code_of("even@0.18", 0x1.cp127f), 253);
    ck_assert_uint_eq(mx_code_of("even", 0x1.bffffep127f), 252); /* no carry: k = 125 */
    /* torchao's RCEIL since 5d73a0c10 rounds amax * fl(1/6) up from its bits:
     * exact CEIL but for the one float 0x01400001 (1.5000001 * 2^-125), whose
     * product rounds down onto 2^-127 (code 0; CEIL: code 1) */
    ck_assert_uint_eq(mx_code_of("torchao-rceil", 0x1.800002p-125f), 0);
    ck_assert_uint_eq(mx_code_of("torchao-rceil@0.18", 0x1.800002p-125f), 1);
    ck_assert_uint_eq(mx_code_of("torchao-rceil", 0x1.800004p-125f), 1);
    ck_assert_uint_eq(mx_code_of("ggml", 7.0f), 127);
    ck_assert_uint_eq(mx_code_of("microxcaling", 7.0f), 127);
    ck_assert_uint_eq(mx_code_of("modelopt", 7.0f), 128);
    /* 6 * 2^k: every rule but EVEN/CEIL-variants agree */
    ck_assert_uint_eq(mx_code_of("ceil", 6.0f * 0x1p10f), 137);
    ck_assert_uint_eq(mx_code_of("ocp", 6.0f * 0x1p10f), 137);
    ck_assert_uint_eq(mx_code_of("even", 6.0f * 0x1p10f), 137);
    /* 4 * 2^k: FLOOR k, CEIL k (4 <= 6) */
    ck_assert_uint_eq(mx_code_of("ceil", 4.0f), 127);
    ck_assert_uint_eq(mx_code_of("ocp", 4.0f), 127);
    /* 3 * 2^k: CEIL k-1 */
    ck_assert_uint_eq(mx_code_of("ceil", 3.0f), 126);
    ck_assert_uint_eq(mx_code_of("ocp", 3.0f), 126);
    /* just below a power of two far from 1: ggml's log2f rounds up */
    ck_assert_uint_eq(mx_code_of("ggml", 0x1.fffffep20f), 146);
    ck_assert_uint_eq(mx_code_of("ocp", 0x1.fffffep20f), 145);
    /* tiny / subnormal / huge */
    ck_assert_uint_eq(mx_code_of("ocp", 0x1p-130f), 0);
    ck_assert_uint_eq(mx_code_of("ggml", 0x1p-130f), 0);
    ck_assert_uint_eq(mx_code_of("ocp", FLT_MAX), 252);
    ck_assert_uint_eq(mx_code_of("ceil", FLT_MAX), 253);
}
END_TEST

START_TEST(mx_zero_block_code_and_saturation_counted)
{
    fp4s_spec s = prof(FP4S_MXFP4, "ocp");
    float x[64] = {0};
    x[32] = 7.0f;  /* second block: FLOOR scale 1, 7 clips to 6 */
    x[33] = -0.1f;
    qres q = run_q(&s, x, 1, 64);
    ck_assert_uint_eq(q.scales[0], 0);
    ck_assert_uint_eq(q.st.zero_blocks, 1);
    ck_assert_uint_eq(q.st.saturated, 1);
    ck_assert_uint_eq(q.st.neg_zero, 1);
    ck_assert(q.deq[32] == 6.0f);
    ck_assert_uint_eq(q.codes[33], 8);
    qres_free(&q);
    s.mx_zero_block_code = 127;
    q = run_q(&s, x, 1, 64);
    ck_assert_uint_eq(q.scales[0], 127);
    for (int i = 0; i < 32; i++) ck_assert(q.deq[i] == 0.0f);
    qres_free(&q);
    s = prof(FP4S_MXFP4, "ceil");
    q = run_q(&s, x, 1, 64);
    ck_assert_uint_eq(q.st.saturated, 0);
    qres_free(&q);
}
END_TEST

START_TEST(mx_nonfinite_policies_counted)
{
    float x[96] = {0};
    for (int i = 0; i < 96; i++) x[i] = 0.25f * (float)(i % 7) - 0.7f;
    x[3] = NAN;      /* block 0 */
    x[40] = INFINITY; /* block 1 */
    /* torchao up to 0.18 / ocp: NaN -> scale 0xFF; Inf is a value (amax Inf) */
    fp4s_spec s = prof(FP4S_MXFP4, "torchao@0.18");
    qres q = run_q(&s, x, 1, 96);
    ck_assert_uint_eq(q.scales[0], 0xFF);
    ck_assert(isnan(q.deq[0]) && isnan(q.deq[31]));
    ck_assert_uint_eq(q.scales[1], 126 + 127);
    ck_assert_uint_eq(q.codes[40], 7);
    ck_assert_uint_eq(q.st.nan, 1);
    ck_assert_uint_eq(q.st.inf, 1);
    ck_assert_uint_eq(q.st.nonfinite, 2);
    ck_assert_uint_eq(q.st.nonfinite_blocks, 2);
    ck_assert(q.scales[2] != 0xFF);
    qres_free(&q);
    /* torchao main: a block whose amax is not finite gets 0xFF (to_mx's
     * isfinite test), the Inf block too */
    s = prof(FP4S_MXFP4, "torchao");
    q = run_q(&s, x, 1, 96);
    ck_assert_uint_eq(q.scales[0], 0xFF);
    ck_assert_uint_eq(q.scales[1], 0xFF);
    ck_assert(isnan(q.deq[32]) && q.codes[40] == 0);
    ck_assert(q.scales[2] != 0xFF);
    qres_free(&q);
    /* microxcaling: NaN or Inf makes the whole block NaN */
    s = prof(FP4S_MXFP4, "microxcaling");
    q = run_q(&s, x, 1, 96);
    ck_assert_uint_eq(q.scales[0], 0xFF);
    ck_assert_uint_eq(q.scales[1], 0xFF);
    ck_assert(isnan(q.deq[33]));
    ck_assert_uint_eq(q.st.nonfinite_blocks, 2);
    qres_free(&q);
    /* ggml: NaN skipped by the amax, coded 0; the scale comes from the rest */
    s = prof(FP4S_MXFP4, "ggml");
    q = run_q(&s, x, 1, 96);
    float am = 0;
    for (int i = 0; i < 32; i++) if (i != 3) am = fmaxf(am, fabsf(x[i]));
    ck_assert_uint_eq(q.scales[0], (uint8_t)(floorf(log2f(am)) - 2 + 127));
    ck_assert_uint_eq(q.codes[3], 0);
    ck_assert_uint_eq(q.codes[40], 0);
    ck_assert_uint_eq(q.st.nonfinite, 2);
    qres_free(&q);
}
END_TEST

START_TEST(mx_ggml_never_writes_negative_zero_and_splits)
{
    fp4s_spec s = prof(FP4S_MXFP4, "ggml");
    float x[32] = {0};
    x[0] = 6.0f;
    x[1] = -0.1f;
    x[2] = -0.0f;
    x[3] = 0.75f;  /* tie 0.5 / 1 -> toward zero: 0.5 */
    x[4] = -2.5f;  /* tie 2 / 3 -> 2 */
    x[17] = 5.0f;  /* tie 4 / 6 -> 4 */
    qres q = run_q(&s, x, 1, 32);
    ck_assert_uint_eq(q.codes[1], 0);
    ck_assert_uint_eq(q.codes[2], 0);
    ck_assert_uint_eq(q.codes[3], 1);
    ck_assert_uint_eq(q.codes[4], 12);
    ck_assert_uint_eq(q.codes[17], 6);
    ck_assert_uint_eq(q.st.neg_zero, 0);
    uint8_t packed[16], back[32];
    ck_assert_int_eq(fp4s_pack_e2m1(s.packing, q.codes, 32, packed), 0);
    ck_assert_uint_eq(packed[1], (uint8_t)(q.codes[1] | q.codes[17] << 4));
    ck_assert_uint_eq(packed[0], (uint8_t)(q.codes[0] | q.codes[16] << 4));
    ck_assert_int_eq(fp4s_unpack_e2m1(s.packing, packed, 32, back), 0);
    ck_assert_int_eq(memcmp(back, q.codes, 32), 0);
    qres_free(&q);
}
END_TEST

START_TEST(pack_pairs_and_split_layouts)
{
    uint8_t c[64], p[32], b[64];
    for (int i = 0; i < 64; i++) c[i] = (uint8_t)((i * 7 + 3) & 15);
    ck_assert_int_eq(fp4s_pack_e2m1(FP4S_PACK_PAIRS, c, 64, p), 0);
    for (int i = 0; i < 32; i++) ck_assert_uint_eq(p[i], (uint8_t)(c[2 * i] | c[2 * i + 1] << 4));
    ck_assert_int_eq(fp4s_unpack_e2m1(FP4S_PACK_PAIRS, p, 64, b), 0);
    ck_assert_int_eq(memcmp(b, c, 64), 0);
    ck_assert_int_eq(fp4s_pack_e2m1_block(FP4S_PACK_SPLIT, 16, c, 64, p), 0);
    for (int blk = 0; blk < 4; blk++)
        for (int j = 0; j < 8; j++)
            ck_assert_uint_eq(p[blk * 8 + j], (uint8_t)(c[blk * 16 + j] | c[blk * 16 + j + 8] << 4));
    ck_assert_int_eq(fp4s_unpack_e2m1_block(FP4S_PACK_SPLIT, 16, p, 64, b), 0);
    ck_assert_int_eq(memcmp(b, c, 64), 0);
    ck_assert_int_eq(fp4s_pack_e2m1(FP4S_PACK_SPLIT, c, 48, p), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_pack_e2m1(FP4S_PACK_PAIRS, c, 3, p), FP4S_ESHAPE);
}
END_TEST

/* ---- NVFP4 ---------------------------------------------------------------------- */

START_TEST(nv_te_tensor_scale_and_hand_block)
{
    fp4s_spec s = prof(FP4S_NVFP4, "te");
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&s, 0.0f, &ts), 0);
    ck_assert(ts.s_enc == 1.0f && ts.s_dec == 1.0f);
    ck_assert_int_eq(fp4s_tscale_init(&s, 1e-45f, &ts), 0);
    ck_assert(ts.s_enc == FLT_MAX);
    /* 2688/amax overflows for amax <= 0x1.5p-117 (2688 * 2^-128: the quotient
     * is 2^128) and S_enc is then FLT_MAX; one float up it is the float32
     * quotient. gcc 13.3 -O2 once gave 1 here (see fp4s_tscale_init). */
    ck_assert_int_eq(fp4s_tscale_init(&s, 0x1.5p-117f, &ts), 0);
    ck_assert(ts.s_enc == FLT_MAX);
    ck_assert_int_eq(fp4s_tscale_init(&s, 0x1p-126f, &ts), 0);
    ck_assert(ts.s_enc == FLT_MAX);
    volatile float just_above = 0x1.500002p-117f, quot = 2688.0f / just_above;
    ck_assert_int_eq(fp4s_tscale_init(&s, just_above, &ts), 0);
    ck_assert(ts.s_enc == quot && quot == 0x1.fffffcp127f); /* the float below FLT_MAX */
    /* te takes its global amax over every value (torch.max): Inf gives
     * 2688/Inf = 0, so S_enc 1; NaN gives NaN scales. A spec whose amax is
     * over the finite values refuses both. */
    ck_assert_int_eq(fp4s_tscale_init(&s, INFINITY, &ts), 0);
    ck_assert(ts.s_enc == 1.0f && ts.s_dec == 1.0f);
    ck_assert_int_eq(fp4s_tscale_init(&s, NAN, &ts), 0);
    ck_assert(isnan(ts.s_enc) && isnan(ts.s_dec));
    ck_assert_int_eq(fp4s_tscale_init(&s, -1.0f, &ts), FP4S_EINVAL);
    fp4s_spec fin = prof(FP4S_NVFP4, "vllm");
    ck_assert_int_eq(fp4s_tscale_init(&fin, NAN, &ts), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_tscale_init(&fin, INFINITY, &ts), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_tscale_init(&s, 2688.0f, &ts), 0);
    ck_assert(ts.s_enc == 1.0f && ts.stored == 1.0f);
    /* tensor amax 2688 -> S_enc 1; block amax 6 -> s_b = e4m3(6*(1/6f)) = 1.0 */
    float x[32] = {0};
    x[0] = 2688.0f;
    x[16] = 6.0f; x[17] = 2.5f; x[18] = -0.2f; x[19] = -0.0f; x[20] = 5.0f;
    qres q = run_q(&s, x, 1, 32);
    ck_assert_int_eq(q.rc, 0);
    ck_assert_uint_eq(q.scales[0], 0x7E);  /* 2688/6 = 448 */
    ck_assert_uint_eq(q.scales[1], 0x38);
    ck_assert_uint_eq(q.codes[16], 7);
    ck_assert_uint_eq(q.codes[17], 4);
    ck_assert_uint_eq(q.codes[18], 8);   /* negative -> -0 */
    ck_assert_uint_eq(q.codes[19], 0);   /* exact -0 -> 0 as TE's reference */
    ck_assert_uint_eq(q.codes[20], 6);
    ck_assert(q.deq[0] == 2688.0f);
    qres_free(&q);
}
END_TEST

START_TEST(nv_scale_underflow_counted)
{
    fp4s_spec s = prof(FP4S_NVFP4, "te");
    float x[48] = {0};
    x[0] = 1000.0f;
    x[16] = 1e-3f;   /* s_b = e4m3(1e-3 * 2.688 / 6 ...) -> subnormal */
    x[32] = 1e-9f;   /* s_b = 0 */
    qres q = run_q(&s, x, 1, 48);
    ck_assert_uint_eq(q.st.scale_underflow, 2);
    ck_assert_uint_eq(q.scales[2], 0);
    /* TE: a zero scale gives enc = FLT_MAX: the element saturates, decodes to 0 */
    ck_assert_uint_eq(q.codes[32], 7);
    ck_assert(q.deq[32] == 0.0f);
    qres_free(&q);
    /* torchao clamps the scale at 2^-6: no underflow; ModelOpt at 2^-9 */
    s = prof(FP4S_NVFP4, "torchao");
    q = run_q(&s, x, 1, 48);
    ck_assert_uint_eq(q.scales[2], 0x08);
    ck_assert_uint_eq(q.st.scale_underflow, 0);
    qres_free(&q);
    s = prof(FP4S_NVFP4, "modelopt");
    q = run_q(&s, x, 1, 48);
    ck_assert_uint_eq(q.scales[2], 0x01);
    qres_free(&q);
}
END_TEST

START_TEST(nv_zero_blocks_per_recipe)
{
    float x[32] = {0};
    x[0] = 3.0f;
    fp4s_spec s = prof(FP4S_NVFP4, "te");
    qres q = run_q(&s, x, 1, 32);
    ck_assert_uint_eq(q.scales[1], 0);
    ck_assert_uint_eq(q.st.zero_blocks, 1);
    qres_free(&q);
    s = prof(FP4S_NVFP4, "modelopt");
    q = run_q(&s, x, 1, 32);
    ck_assert_uint_eq(q.scales[1], 0x38);  /* zero block scale -> 1.0 */
    qres_free(&q);
    s = prof(FP4S_NVFP4, "torchao");
    q = run_q(&s, x, 1, 32);
    ck_assert_uint_eq(q.scales[1], 0x08);  /* clamp to 2^-6 */
    qres_free(&q);
    s = prof(FP4S_NVFP4, "ggml");
    q = run_q(&s, x, 1, 32);
    ck_assert_uint_eq(q.scales[1], 0);
    ck_assert_uint_eq(q.scales[0], fp4s_ue4m3_encode_ggml(0.5f));
    ck_assert(q.deq[0] == 3.0f);
    qres_free(&q);
}
END_TEST

START_TEST(nv_ggml_large_blocks_use_fp32_search)
{
    /* amax/6 above 448 clamps the ggml scale to 448; the fp32 level search
     * then saturates to 6*448 for large values */
    fp4s_spec s = prof(FP4S_NVFP4, "ggml");
    float x[16] = {1e6f, 2688.0f, -3000.0f, 1.0f};
    qres q = run_q(&s, x, 1, 16);
    ck_assert_uint_eq(q.scales[0], 0x7E);
    ck_assert_uint_eq(q.codes[0], 7);
    ck_assert_uint_eq(q.codes[1], 7);
    ck_assert_uint_eq(q.codes[2], 15);
    ck_assert_uint_eq(q.codes[3], 0);
    ck_assert_uint_eq(q.st.saturated, 2);
    qres_free(&q);
    fp4s_spec bad = s;
    bad.tie = FP4S_TIE_EVEN;
    ck_assert_int_eq(fp4s_spec_check(&bad), FP4S_ENOTSUP);
}
END_TEST

static void gen_normal(float *x, size_t n, uint64_t seed)
{
    uint64_t st = seed;
    rng_normals(x, n, &st);
}

START_TEST(nv_te_torchao_modelopt_differ_in_few_blocks)
{
    const size_t rows = 1024, cols = 1024; /* 65536 blocks */
    float *x = malloc(rows * cols * sizeof *x);
    gen_normal(x, rows * cols, 42);
    fp4s_spec a = prof(FP4S_NVFP4, "te"), b = prof(FP4S_NVFP4, "torchao"), c = prof(FP4S_NVFP4, "modelopt");
    qres qa = run_q(&a, x, rows, cols), qb = run_q(&b, x, rows, cols), qc = run_q(&c, x, rows, cols);
    size_t nb = rows * cols / 16, dab = 0, dac = 0, dbc = 0, eab = 0, eac = 0;
    for (size_t i = 0; i < nb; i++) {
        dab += qa.scales[i] != qb.scales[i];
        dac += qa.scales[i] != qc.scales[i];
        dbc += qb.scales[i] != qc.scales[i];
    }
    for (size_t i = 0; i < rows * cols; i++) {
        eab += qa.codes[i] != qb.codes[i];
        eac += qa.codes[i] != qc.codes[i];
    }
    fprintf(stderr, "nvfp4 random N(0,1) %zu blocks: scale codes differ te/torchao %zu, "
            "te/modelopt %zu, torchao/modelopt %zu; element codes te/torchao %zu, te/modelopt %zu\n",
            nb, dab, dac, dbc, eab, eac);
    /* a handful, never a systematic difference */
    ck_assert_uint_lt(dab, nb / 1000 + 1);
    ck_assert_uint_lt(dac, nb / 1000 + 1);
    ck_assert_uint_lt(eab, rows * cols / 1000);
    qres_free(&qa); qres_free(&qb); qres_free(&qc);
    free(x);
}
END_TEST

START_TEST(nv_2d_tiles_share_scales_across_16_rows)
{
    const size_t rows = 40, cols = 64;
    float *x = malloc(rows * cols * sizeof *x);
    gen_normal(x, rows * cols, 7);
    x[5 * cols + 17] = 9.0f;  /* tile (0, 1) gets amax 9 */
    fp4s_spec s = prof(FP4S_NVFP4, "te-2d");
    qres q = run_q(&s, x, rows, cols);
    ck_assert_int_eq(q.rc, 0);
    size_t bpr = cols / 16;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < bpr; b++)
            ck_assert_uint_eq(q.scales[r * bpr + b], q.scales[(r / 16 * 16) * bpr + b]);
    /* the tile's scale follows the tile amax (te recipe, 1-D on that amax) */
    float mult = q.ts.s_enc * (1.0f / 6.0f);
    ck_assert_uint_eq(q.scales[0 * bpr + 1], fp4s_e4m3_encode(9.0f * mult, FP4S_TIE_EVEN));
    /* last partial tile (rows 32..39) */
    float am = 0;
    for (size_t r = 32; r < rows; r++)
        for (size_t j = 0; j < 16; j++) am = fmaxf(am, fabsf(x[r * cols + j]));
    ck_assert_uint_eq(q.scales[39 * bpr], fp4s_e4m3_encode(am * mult, FP4S_TIE_EVEN));
    qres_free(&q);
    /* chunks must start on tile rows */
    fp4s_tscale ts;
    fp4s_tscale_init(&s, 9.0f, &ts);
    uint8_t codes[64 * 16];
    fp4s_qout o = {.codes = codes, .ld_codes = 64};
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, 8, cols, cols, 8, &o, NULL), FP4S_EINVAL);
    free(x);
}
END_TEST

/* ---- FP8 ------------------------------------------------------------------------ */

START_TEST(fp8_tile_scales_and_elements)
{
    const size_t rows = 130, cols = 256;
    float *x = malloc(rows * cols * sizeof *x);
    gen_normal(x, rows * cols, 3);
    x[0] = 448.0f;  /* tile 0 of row 0: scale 1 */
    fp4s_spec s = prof(FP4S_FP8, "fp8-1x128");
    qres q = run_q(&s, x, rows, cols);
    ck_assert_int_eq(q.rc, 0);
    ck_assert(q.sf[0] == 1.0f);
    ck_assert_uint_eq(q.codes[5], fp4s_e4m3_encode(x[5], FP4S_TIE_EVEN));
    float am = 0;
    for (size_t j = 128; j < 256; j++) am = fmaxf(am, fabsf(x[3 * cols + j]));
    ck_assert(q.sf[3 * 2 + 1] == am / 448.0f);
    ck_assert_uint_eq(q.codes[3 * cols + 200], fp4s_e4m3_encode(x[3 * cols + 200] / (am / 448.0f), FP4S_TIE_EVEN));
    ck_assert(q.deq[3 * cols + 200] == fp4s_e4m3_decode(q.codes[3 * cols + 200]) * (am / 448.0f));
    qres_free(&q);
    s = prof(FP4S_FP8, "fp8-128x128");
    q = run_q(&s, x, rows, cols);
    ck_assert_int_eq(q.rc, 0);
    am = 0;
    for (size_t r = 128; r < rows; r++)
        for (size_t j = 0; j < 128; j++) am = fmaxf(am, fabsf(x[r * cols + j]));
    ck_assert(q.sf[1 * 2 + 0] == am / 448.0f);
    ck_assert(q.sf[0] == 1.0f);
    qres_free(&q);
    s = prof(FP4S_FP8, "fp8-tensor");
    q = run_q(&s, x, rows, 200);
    ck_assert_int_eq(q.rc, 0);
    qres_free(&q);
    s = prof(FP4S_FP8, "fp8-tensor");
    q = run_q(&s, x, rows, cols);
    ck_assert(q.sf[0] == 1.0f && q.ts.fp8_scale == 1.0f);
    ck_assert_uint_eq(q.codes[0], 0x7E);
    qres_free(&q);
    /* a tile with Inf and NaN: the scale comes from its finite values */
    x[1] = INFINITY;
    x[2] = NAN;
    x[3] = -INFINITY;
    s = prof(FP4S_FP8, "fp8-1x128");
    q = run_q(&s, x, rows, cols);
    ck_assert(q.sf[0] == 1.0f);
    ck_assert_uint_eq(q.codes[1], 0x7E);
    ck_assert_uint_eq(q.codes[2], 0x7F);
    ck_assert_uint_eq(q.codes[3], 0xFE);
    ck_assert_uint_eq(q.codes[5], fp4s_e4m3_encode(x[5], FP4S_TIE_EVEN));
    ck_assert_uint_eq(q.st.inf, 2);
    ck_assert_uint_eq(q.st.nan, 1);
    ck_assert_uint_eq(q.st.nonfinite_blocks, 1);
    qres_free(&q);
    free(x);
}
END_TEST


/* ---- literal re-implementations of the peers' published algorithms -------------------- */

static const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

/* rows of MX blocks: element 0 = 6*2^j sets the scale exponent, then the seven
 * midpoints (ties) of both signs times 2^j, -0, +0, then random values */
static float *mx_tie_data(size_t rows, size_t cols, uint64_t seed)
{
    float *x = malloc(rows * cols * sizeof *x);
    uint64_t st = seed;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / 32; b++) {
            float *xb = x + r * cols + b * 32;
            int j = (int)(rng_next(&st) % 60) - 30;
            float p = ldexpf(1.0f, j);
            xb[0] = 6.0f * p;
            for (int i = 0; i < 7; i++) { xb[1 + i] = mids[i] * p; xb[8 + i] = -mids[i] * p; }
            xb[15] = -0.0f;
            xb[16] = 0.0f;
            for (int i = 17; i < 32; i++) xb[i] = (float)((rng_unif(&st) * 2.0 - 1.0) * 6.5) * p;
            if (rng_next(&st) % 3 == 0) xb[0] = (float)(rng_unif(&st) * 7.9 + 0.1) * p; /* other amax */
        }
    return x;
}

static const float kvalues2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static int ggml_best_index(float x, float e)
{
    int best = 0;
    float be = fabsf(kvalues2[0] * e - x);
    for (int i = 1; i < 16; i++) {
        float er = fabsf(kvalues2[i] * e - x);
        if (er < be) { best = i; be = er; }
    }
    return best;
}

/* ggml's scale of the block xb[n] (MXFP4: E8M0 of floor(log2 amax) - 2; NVFP4:
 * its UE4M3 of amax / 6) and d, the half scale the kvalue search uses. */
static uint8_t ggml_mx_scale(const float *xb, int n, float *d)
{
    float amax = 0;
    for (int j = 0; j < n; j++) if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
    uint8_t e = amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
    *d = ldexpf(1.0f, (int)e - 128); /* GGML_E8M0_TO_FP32_HALF */
    return e;
}

static uint8_t ggml_nv_scale(const float *xb, int n, float *d)
{
    float amax = 0;
    for (int j = 0; j < n; j++) if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
    uint8_t ue = fp4s_ue4m3_encode_ggml(amax / 6.0f);
    *d = fp4s_ue4m3_decode_ggml(ue) * 0.5f;
    return ue;
}

/* Scale bytes and packed nibbles of ggml spec s on x [rows, cols] that differ
 * from ggml's literal search: the scale, then for each byte j of a block
 * the nearest kvalue of x[j] and x[j + block/2] (first of equals). */
static unsigned ggml_literal_mismatches(const fp4s_spec *s, const float *x, size_t rows, size_t cols,
                                        uint8_t (*scale)(const float *, int, float *))
{
    const int n = (int)s->block;
    qres q = run_q(s, x, rows, cols);
    unsigned bad = 0;
    uint8_t packed[128];
    for (size_t r = 0; r < rows; r++) {
        int rc = n == 32 ? fp4s_pack_e2m1(s->packing, q.codes + r * cols, cols, packed)
                         : fp4s_pack_e2m1_block(s->packing, s->block, q.codes + r * cols, cols, packed);
        ck_assert_int_eq(rc, 0);
        for (size_t b = 0; b < cols / n; b++) {
            const float *xb = x + r * cols + b * n;
            float d;
            if (q.scales[r * (cols / n) + b] != scale(xb, n, &d)) bad++;
            for (int j = 0; j < n / 2; j++) {
                uint8_t want = (uint8_t)(ggml_best_index(xb[j], d) | ggml_best_index(xb[j + n / 2], d) << 4);
                if (packed[b * (n / 2) + j] != want) bad++;
            }
        }
    }
    qres_free(&q);
    return bad;
}

START_TEST(ggml_mxfp4_matches_literal_kvalue_search)
{
    const size_t rows = 64, cols = 256;
    float *x = mx_tie_data(rows, cols, 21);
    fp4s_spec s = prof(FP4S_MXFP4, "ggml");
    ck_assert_uint_eq(ggml_literal_mismatches(&s, x, rows, cols, ggml_mx_scale), 0);
    free(x);
}
END_TEST

START_TEST(ggml_nvfp4_matches_literal_kvalue_search)
{
    const size_t rows = 64, cols = 256;
    float *x = mx_tie_data(rows, cols, 22);
    for (size_t i = 0; i < rows * cols; i += 97) x[i] *= 3000.0f; /* some scales clamp at 448 */
    fp4s_spec s = prof(FP4S_NVFP4, "ggml");
    ck_assert_uint_eq(ggml_literal_mismatches(&s, x, rows, cols, ggml_nv_scale), 0);
    free(x);
}
END_TEST

static int count_below(float a) /* number of E2M1 bounds strictly below a */
{
    int n = 0;
    for (int i = 0; i < 7; i++) n += mids[i] < a;
    return n;
}

/* max |x| over the block xb[n] */
static float block_amax(const float *xb, int n)
{
    float amax = 0;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(xb[j]));
    return amax;
}

/* An engine's literal formula for one block xb[n]: the scale byte and codes
 * it gives, compared with the library's (scale, codes[n]); the number that
 * differ. ctx: what the formula needs of the whole tensor. */
typedef unsigned (*literal_block)(const float *xb, int n, uint8_t scale, const uint8_t *codes, const void *ctx);

/* The mismatches of spec s against the formula over every block of x [rows, cols]. */
static unsigned literal_mismatches(const fp4s_spec *s, const float *x, size_t rows, size_t cols, literal_block f,
                                   const void *ctx)
{
    const int n = (int)s->block;
    qres q = run_q(s, x, rows, cols);
    ck_assert_int_eq(q.rc, 0);
    unsigned bad = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / n; b++)
            bad += f(x + r * cols + b * n, n, q.scales[r * (cols / n) + b], q.codes + r * cols + b * n, ctx);
    qres_free(&q);
    return bad;
}

/* ModelOpt MXFP4: e = ceil(log2(amax / 6)) (at least -127), codes by counting the bounds below |x| / 2^e */
static unsigned modelopt_mx_block(const float *xb, int n, uint8_t scale, const uint8_t *codes, const void *ctx)
{
    (void)ctx;
    unsigned bad = 0;
    float e = ceilf(fmaxf(log2f(block_amax(xb, n) / 6.0f), -127.0f));
    if (scale != (uint8_t)(e + 127)) bad++;
    for (int j = 0; j < n; j++) {
        float v = xb[j] / exp2f(e);
        float sg = v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f;  /* torch.sign */
        int sign_bit = (int)floorf((2.0f - sg) / 2.0f);  /* (2 - sign) // 2 */
        uint8_t want = (uint8_t)(sign_bit * 8 + count_below(fabsf(v)));
        if (codes[j] != want) bad++;
    }
    return bad;
}

START_TEST(modelopt_mxfp4_matches_literal_bounds)
{
    const size_t rows = 64, cols = 256;
    float *x = mx_tie_data(rows, cols, 23);
    fp4s_spec s = prof(FP4S_MXFP4, "modelopt");
    ck_assert_uint_eq(literal_mismatches(&s, x, rows, cols, modelopt_mx_block, NULL), 0);
    free(x);
}
END_TEST

/* ModelOpt NVFP4 with the tensor scale *(const float *)ctx: the E4M3 block
 * scale of amax / (6 scale_2), codes by searchsorted on the bounds */
static unsigned modelopt_nv_block(const float *xb, int n, uint8_t scale, const uint8_t *codes, const void *ctx)
{
    const float sc2 = *(const float *)ctx;
    unsigned bad = 0;
    float p = block_amax(xb, n) / (6.0f * sc2);
    if (p == 0.0f) p = 1.0f;
    if (p < 0x1p-9f) p = 0x1p-9f;
    uint8_t sb = fp4s_e4m3_encode(p, FP4S_TIE_EVEN);
    if (scale != sb) bad++;
    float t = fp4s_e4m3_decode(sb) * sc2;
    for (int j = 0; j < n; j++) {
        float v = xb[j] / t;
        float a = fabsf(v);
        int ord = count_below(a) + (a == 0.75f || a == 1.75f || a == 3.5f);
        uint8_t want = (uint8_t)(((v < 0) << 3) + ord);
        if (codes[j] != want) bad++;
    }
    return bad;
}

START_TEST(modelopt_nvfp4_matches_literal_searchsorted)
{
    const size_t rows = 16, cols = 256;
    float *x = mx_tie_data(rows, cols, 24);
    x[0] = 2688.0f;  /* scale_2 = 1 */
    for (size_t r = 0; r < rows; r++)  /* blocks with amax 6: s_b = 1, exact ties */
        for (size_t b = 1; b < cols / 16; b += 2) {
            float *xb = x + r * cols + b * 16;
            xb[0] = 6.0f;
            for (int i = 0; i < 7; i++) { xb[1 + i] = mids[i]; xb[8 + i] = -mids[i]; }
            xb[15] = -0.0f;
        }
    fp4s_spec s = prof(FP4S_NVFP4, "modelopt");
    float amax = 0;
    for (size_t i = 0; i < rows * cols; i++) amax = fmaxf(amax, fabsf(x[i]));
    float sc2 = amax / (6.0f * 448.0f);
    ck_assert_uint_eq(literal_mismatches(&s, x, rows, cols, modelopt_nv_block, &sc2), 0);
    free(x);
}
END_TEST

/* torchao MXFP4 (floor): the unbiased exponent of amax's bits minus 2,
 * clamped to [-127, 128]; half to even on the E2M1 grid, thresholds written out */
static unsigned torchao_mx_block(const float *xb, int n, uint8_t scale, const uint8_t *codes, const void *ctx)
{
    (void)ctx;
    unsigned bad = 0;
    uint32_t bits = fp4s_f32_bits(block_amax(xb, n));
    int unb = (int)((bits >> 23) & 0xFF) - 127 - 2;
    if (unb < -127) unb = -127;
    if (unb > 128) unb = 128;
    if (scale != (uint8_t)(unb + 127)) bad++;
    float sc = ldexpf(1.0f, unb);
    for (int j = 0; j < n; j++) {
        float v = fminf(fmaxf(xb[j] / sc, -6.0f), 6.0f);
        float a = fabsf(v);
        int m = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
              : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
        uint8_t want = (uint8_t)(m | (signbit(v) ? 8 : 0));
        if (codes[j] != want) bad++;
    }
    return bad;
}

START_TEST(torchao_mxfp4_floor_matches_literal_bits)
{
    const size_t rows = 64, cols = 256;
    float *x = mx_tie_data(rows, cols, 25);
    fp4s_spec s = prof(FP4S_MXFP4, "torchao");
    ck_assert_uint_eq(literal_mismatches(&s, x, rows, cols, torchao_mx_block, NULL), 0);
    free(x);
}
END_TEST

/* ---- round trip, threads, front end ---------------------------------------------------- */

static const struct { fp4s_format f; const char *p; } all_profiles[] = {
    {FP4S_MXFP4, "ocp"}, {FP4S_MXFP4, "ceil"}, {FP4S_MXFP4, "torchao"}, {FP4S_MXFP4, "torchao-rceil"},
    {FP4S_MXFP4, "even"}, {FP4S_MXFP4, "te"}, {FP4S_MXFP4, "modelopt"}, {FP4S_MXFP4, "ggml"},
    {FP4S_MXFP4, "microxcaling"}, {FP4S_NVFP4, "te"}, {FP4S_NVFP4, "te-2d"}, {FP4S_NVFP4, "torchao"},
    {FP4S_NVFP4, "modelopt"}, {FP4S_NVFP4, "ggml"}, {FP4S_FP8, "fp8-tensor"}, {FP4S_FP8, "fp8-1x128"},
    {FP4S_FP8, "fp8-128x128"},
};

static void planted(float *x, size_t n, uint64_t seed)
{
    gen_normal(x, n, seed);
    uint64_t st = seed ^ 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&st) % 1000;
        if (r == 0) x[i] = NAN;
        else if (r == 1) x[i] = -INFINITY;
        else if (r < 20) x[i] *= 1e-30f;
        else if (r < 30) x[i] *= 1e4f;
    }
    for (size_t i = 0; i < 64 && i < n; i++) x[i] = 0.0f; /* zero blocks */
}

START_TEST(dequantize_inverts_quantize_for_every_profile)
{
    const size_t rows = 256, cols = 256;
    float *x = malloc(rows * cols * sizeof *x), *d = malloc(rows * cols * sizeof *d);
    planted(x, rows * cols, 11);
    for (size_t p = 0; p < sizeof all_profiles / sizeof all_profiles[0]; p++) {
        fp4s_spec s = prof(all_profiles[p].f, all_profiles[p].p);
        qres q = run_q(&s, x, rows, cols);
        ck_assert_int_eq(q.rc, 0);
        size_t ldsf = s.format == FP4S_FP8 ? (s.fp8_gran == FP4S_FP8_TENSOR ? 1 : cols / 128) : 1;
        int rc = fp4s_dequantize(&s, &q.ts, q.codes, cols, q.scales, q.bpr, q.sf, ldsf, rows, cols, 0, d, cols);
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(memcmp(d, q.deq, rows * cols * sizeof *d) == 0, "profile %s", all_profiles[p].p);
        ck_assert_uint_eq(q.st.elements, rows * cols);
        ck_assert_uint_eq(q.st.nonfinite, q.st.nan + q.st.inf);
        ck_assert(q.st.nan > 0 && q.st.inf > 0);
        qres_free(&q);
    }
    free(x); free(d);
}
END_TEST

START_TEST(threads_one_and_two_give_identical_bytes)
{
    const size_t rows = 512, cols = 512;
    float *x = malloc(rows * cols * sizeof *x);
    planted(x, rows * cols, 5);
    for (size_t p = 0; p < sizeof all_profiles / sizeof all_profiles[0]; p++) {
        fp4s_spec s = prof(all_profiles[p].f, all_profiles[p].p);
        fp4s_set_threads(1);
        qres a = run_q(&s, x, rows, cols);
        fp4s_set_threads(2);
        qres b = run_q(&s, x, rows, cols);
        fp4s_set_threads(3);
        qres c = run_q(&s, x, rows, cols);
        fp4s_set_threads(0);
        ck_assert_int_eq(a.rc, 0);
        ck_assert_int_eq(memcmp(a.codes, b.codes, rows * cols), 0);
        ck_assert_int_eq(memcmp(a.codes, c.codes, rows * cols), 0);
        ck_assert_int_eq(memcmp(a.scales, b.scales, rows * a.bpr), 0);
        ck_assert_int_eq(memcmp(a.sf, c.sf, a.sfn * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(a.deq, c.deq, rows * cols * sizeof(float)), 0);
        ck_assert_uint_eq(a.st.saturated, c.st.saturated);
        ck_assert_uint_eq(a.st.zero_blocks, c.st.zero_blocks);
        ck_assert_uint_eq(a.st.nonfinite_blocks, c.st.nonfinite_blocks);
        ck_assert_uint_eq(a.st.blocks, c.st.blocks);
        /* the pieces of the dynamic schedule go to any worker: the exact
         * sums give the same bits (and so does a pool of seven) */
        fp4s_set_threads(7);
        qres e = run_q(&s, x, rows, cols);
        fp4s_set_threads(0);
        ck_assert_int_eq(memcmp(a.codes, e.codes, rows * cols), 0);
        ck_assert_int_eq(memcmp(a.deq, e.deq, rows * cols * sizeof(float)), 0);
        const qres *o[3] = {&b, &c, &e};
        for (int k = 0; k < 3; k++) {
            ck_assert_msg(memcmp(&a.st.err2, &o[k]->st.err2, sizeof(double)) == 0, "err2, profile %s",
                          all_profiles[p].p);
            ck_assert_msg(memcmp(&a.st.x2, &o[k]->st.x2, sizeof(double)) == 0, "x2, profile %s", all_profiles[p].p);
            ck_assert_uint_eq(a.st.nonfinite, o[k]->st.nonfinite);
            ck_assert_uint_eq(a.st.neg_zero, o[k]->st.neg_zero);
            ck_assert_uint_eq(a.st.scale_underflow, o[k]->st.scale_underflow);
        }
        qres_free(&a); qres_free(&b); qres_free(&c); qres_free(&e);
    }
    /* the tensor amax and its count of NaN/Inf */
    uint64_t nf1 = 0, nf7 = 0;
    fp4s_set_threads(1);
    float m1 = fp4s_amax(x, rows, cols, cols, &nf1);
    fp4s_set_threads(7);
    float m7 = fp4s_amax(x, rows, cols, cols, &nf7);
    fp4s_set_threads(0);
    ck_assert(m1 > 0.0f && memcmp(&m1, &m7, sizeof m1) == 0);
    ck_assert_uint_eq(nf1, nf7);
    free(x);
}
END_TEST

START_TEST(front_end_rejects_bad_arguments)
{
    fp4s_spec s = prof(FP4S_MXFP4, "ocp");
    float x[64] = {0};
    uint8_t c[64];
    fp4s_qout o = {.codes = c, .ld_codes = 64};
    ck_assert_int_eq(fp4s_quantize(&s, NULL, x, 1, 48, 48, 0, &o, NULL), FP4S_ESHAPE);
    ck_assert(strstr(fp4s_last_error(), "multiple of the block size 32") != NULL);
    fp4s_qout none = {0};
    ck_assert_int_eq(fp4s_quantize(&s, NULL, x, 1, 32, 32, 0, &none, NULL), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_quantize(&s, NULL, x, 1, 32, 16, 0, &o, NULL), FP4S_EINVAL);
    fp4s_spec n = prof(FP4S_NVFP4, "te");
    ck_assert_int_eq(fp4s_quantize(&n, NULL, x, 1, 32, 32, 0, &o, NULL), FP4S_EINVAL);
    ck_assert(strstr(fp4s_last_error(), "tensor scale") != NULL);
    fp4s_spec bad = s;
    bad.block = 16;
    ck_assert_int_eq(fp4s_quantize(&bad, NULL, x, 1, 32, 32, 0, &o, NULL), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_dequantize(&s, NULL, c, 32, NULL, 0, NULL, 0, 1, 32, 0, x, 32), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_quantize(&s, NULL, x, 0, 32, 32, 0, &o, NULL), 0);
}
END_TEST

START_TEST(forced_reference_matches_active_kernels)
{
    const size_t rows = 64, cols = 512;
    float *x = malloc(rows * cols * sizeof *x);
    planted(x, rows * cols, 9);
    for (size_t p = 0; p < sizeof all_profiles / sizeof all_profiles[0]; p++) {
        fp4s_spec s = prof(all_profiles[p].f, all_profiles[p].p);
        fp4s_kernels_force_ref(true);
        ck_assert_str_eq(fp4s_kernels_level(), "ref");
        qres a = run_q(&s, x, rows, cols);
        fp4s_kernels_force_ref(false);
        qres b = run_q(&s, x, rows, cols);
        ck_assert_msg(memcmp(a.codes, b.codes, rows * cols) == 0, "codes %s %s vs ref",
                      all_profiles[p].p, fp4s_kernels_level());
        ck_assert_msg(memcmp(a.scales, b.scales, rows * a.bpr) == 0, "scales %s", all_profiles[p].p);
        qres_free(&a); qres_free(&b);
    }
    free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quant");
    const check_case cases[] = {
        CHECK_CASE(torchao_published_fp4_tie_cases),
        CHECK_CASE(te_published_boundary_values),
        CHECK_CASE(mx_profiles_scale_codes_on_hand_picked_amax),
        CHECK_CASE(mx_zero_block_code_and_saturation_counted),
        CHECK_CASE(mx_nonfinite_policies_counted),
        CHECK_CASE(mx_ggml_never_writes_negative_zero_and_splits),
        CHECK_CASE(pack_pairs_and_split_layouts),
        CHECK_CASE(nv_te_tensor_scale_and_hand_block),
        CHECK_CASE(nv_scale_underflow_counted),
        CHECK_CASE(nv_zero_blocks_per_recipe),
        CHECK_CASE(nv_ggml_large_blocks_use_fp32_search),
        CHECK_CASE(nv_te_torchao_modelopt_differ_in_few_blocks),
        CHECK_CASE(nv_2d_tiles_share_scales_across_16_rows),
        CHECK_CASE(fp8_tile_scales_and_elements),
        CHECK_CASE(ggml_mxfp4_matches_literal_kvalue_search),
        CHECK_CASE(ggml_nvfp4_matches_literal_kvalue_search),
        CHECK_CASE(modelopt_mxfp4_matches_literal_bounds),
        CHECK_CASE(modelopt_nvfp4_matches_literal_searchsorted),
        CHECK_CASE(torchao_mxfp4_floor_matches_literal_bits),
        CHECK_CASE(dequantize_inverts_quantize_for_every_profile),
        CHECK_CASE(threads_one_and_two_give_identical_bytes),
        CHECK_CASE(front_end_rejects_bad_arguments),
        CHECK_CASE(forced_reference_matches_active_kernels),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    return check_run(s, CK_ENV);
}
