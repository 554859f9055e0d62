/* Batch coupling (<fp4scope/batch.h>): the compositions and what changes
 * between two of them, against independent counts made here by quantizing
 * each group with fp4s_quantize; a row-scaled (per-token) spec shows none. */
#include <fp4scope/batch.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../check_main.h"

#define R 48
#define K 64

static uint64_t rs = 12345;
static double rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}
static float gauss(void) { return (float)(sqrt(-2 * log(rnd() + 1e-300)) * cos(6.283185307179586 * rnd())); }

/* LLM-like rows: per-channel scales, two hot channels, a few token spikes */
static void fill(float *x)
{
    float ch[K];
    for (int j = 0; j < K; j++) ch[j] = expf(gauss() * 0.7f) * (j == 5 || j == 40 ? 30.0f : 1.0f);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < K; j++) x[i * K + j] = gauss() * ch[j] * (i % 11 == 3 ? 8.0f : 1.0f);
}

static void spec(fp4s_spec *s, fp4s_format f, const char *p)
{
    ck_assert_int_eq(fp4s_spec_profile(s, f, p), 0);
}

/* Independent count: quantize each group with its own tensor scale. */
static void quant_groups(const fp4s_spec *s, const float *x, const int64_t *g, uint8_t *codes, uint8_t *sc)
{
    float xb[R * K];
    uint8_t cb[R * K], sb[R * K / 16];
    int64_t done[R];
    size_t nd = 0;
    for (int i = 0; i < R; i++) {
        bool seen = false;
        for (size_t d = 0; d < nd; d++) seen |= done[d] == g[i];
        if (seen) continue;
        done[nd++] = g[i];
        size_t idx[R], m = 0;
        for (int r = 0; r < R; r++)
            if (g[r] == g[i]) idx[m++] = (size_t)r;
        for (size_t r = 0; r < m; r++) memcpy(xb + r * K, x + idx[r] * K, K * sizeof(float));
        fp4s_tscale ts;
        ck_assert_int_eq(fp4s_tscale_init(s, fp4s_spec_amax(s, xb, m, K, K, NULL), &ts), 0);
        size_t nb = K / s->block;
        fp4s_qout o = {.codes = cb, .ld_codes = K, .scales = sb, .ld_scales = nb};
        ck_assert_int_eq(fp4s_quantize(s, &ts, xb, m, K, K, 0, &o, NULL), 0);
        for (size_t r = 0; r < m; r++) {
            memcpy(codes + idx[r] * K, cb + r * K, K);
            memcpy(sc + idx[r] * nb, sb + r * nb, nb);
        }
    }
}

START_TEST(per_tensor_flips_match_an_independent_count)
{
    float x[R * K];
    fill(x);
    fp4s_spec s;
    spec(&s, FP4S_NVFP4, "te");
    int64_t ga[R], gb[R];
    for (int i = 0; i < R; i++) {
        ga[i] = i / 16; /* micro-batches of 16 */
        gb[i] = i % 4;  /* another grouping */
    }
    fp4s_batch_result r;
    memset(&r, 0, sizeof r);
    uint64_t rf[R];
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, NULL, &r, rf), 0);
    uint8_t ca[R * K], cb[R * K], sa[R * K / 16], sb[R * K / 16];
    quant_groups(&s, x, ga, ca, sa);
    quant_groups(&s, x, gb, cb, sb);
    uint64_t flips = 0, sflips = 0, rows = 0;
    for (int i = 0; i < R; i++) {
        uint64_t f = 0, sf = 0;
        for (int j = 0; j < K; j++) f += ca[i * K + j] != cb[i * K + j] && ((ca[i * K + j] | cb[i * K + j]) & 7);
        for (int b = 0; b < K / 16; b++) sf += sa[i * 4 + b] != sb[i * 4 + b];
        ck_assert_uint_eq(rf[i], f);
        flips += f;
        sflips += sf;
        rows += f || sf;
    }
    ck_assert_uint_gt(flips, 0); /* the grouping matters under one tensor scale */
    ck_assert_uint_eq(r.code_flips, flips);
    ck_assert_uint_eq(r.scale_flips, sflips);
    ck_assert_uint_le(r.rows_changed, R);
    ck_assert_uint_ge(r.rows_changed, rows);
    ck_assert_uint_eq(r.groups_a, 3);
    ck_assert_uint_eq(r.groups_b, 4);
    ck_assert(r.deq_diff2 > 0 && r.x2 > 0);
}
END_TEST

START_TEST(per_token_and_mxfp4_show_no_coupling)
{
    float x[R * K];
    fill(x);
    int64_t ga[R], gb[R];
    for (int i = 0; i < R; i++) {
        ga[i] = 0;
        gb[i] = i;
    }
    static const char *nv[] = {"te-row", "flashinfer-per-token", "te-per-token@pr3045", "miles-nvfp4-rollout"};
    for (size_t p = 0; p < sizeof nv / sizeof nv[0] + 1; p++) {
        fp4s_spec s;
        if (p < sizeof nv / sizeof nv[0]) spec(&s, FP4S_NVFP4, nv[p]);
        else spec(&s, FP4S_MXFP4, "ocp");
        fp4s_batch_result r;
        memset(&r, 0, sizeof r);
        float w[8 * K];
        for (int i = 0; i < 8 * K; i++) w[i] = gauss();
        fp4s_batch_opts o;
        fp4s_batch_opts_defaults(&o);
        o.w = w;
        o.n = 8;
        o.lm_head = true;
        ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, &o, &r, NULL), 0);
        ck_assert_msg(r.code_flips == 0 && r.scale_flips == 0 && r.rows_changed == 0 && r.tscale_rows == 0,
                      "%s: %llu codes, %llu scales", p < 4 ? nv[p] : "ocp", (unsigned long long)r.code_flips,
                      (unsigned long long)r.scale_flips);
        ck_assert(r.deq_diff2 == 0 && r.out_diff2 == 0 && r.lp_sum_abs == 0 && r.kl_sum == 0);
        ck_assert_uint_eq(r.lp_rows, R);
    }
    /* the same spec per tensor couples */
    fp4s_spec s;
    spec(&s, FP4S_NVFP4, "te");
    fp4s_batch_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, NULL, &r, NULL), 0);
    ck_assert_uint_gt(r.code_flips, 0);
    ck_assert_uint_gt(r.tscale_rows, 0);
}
END_TEST

START_TEST(same_composition_changes_nothing)
{
    float x[R * K];
    fill(x);
    int64_t g[R];
    for (int i = 0; i < R; i++) g[i] = i / 7;
    fp4s_spec s;
    spec(&s, FP4S_NVFP4, "vllm");
    fp4s_batch_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, g, g, NULL, &r, NULL), 0);
    ck_assert(r.code_flips == 0 && r.scale_flips == 0 && r.rows_changed == 0 && r.deq_diff2 == 0);
}
END_TEST

START_TEST(output_and_logprob_change_by_hand)
{
    float x[R * K];
    fill(x);
    fp4s_spec s;
    spec(&s, FP4S_NVFP4, "te");
    int64_t ga[R], gb[R];
    for (int i = 0; i < R; i++) {
        ga[i] = 0;
        gb[i] = i;
    }
    /* W = identity: the output difference is the dequantized difference */
    static float eye[K * K];
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    fp4s_batch_opts o;
    fp4s_batch_opts_defaults(&o);
    o.w = eye;
    o.n = K;
    fp4s_batch_result r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, &o, &r, NULL), 0);
    ck_assert(r.deq_diff2 > 0);
    ck_assert_msg(fabs(r.out_diff2 - r.deq_diff2) <= 1e-12 * r.deq_diff2, "%g vs %g", r.out_diff2, r.deq_diff2);
    /* the LM head: the log-prob change of token 3 of each row, by hand */
    enum { V = 5 };
    float w[V * K];
    for (int i = 0; i < V * K; i++) w[i] = gauss() * 0.3f;
    int64_t tok[R];
    for (int i = 0; i < R; i++) tok[i] = i % V;
    o.w = w;
    o.n = V;
    o.lm_head = true;
    o.token = tok;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, &o, &r, NULL), 0);
    /* both compositions' dequantized rows, then log-softmax in double */
    float xa[R * K], xb[R * K];
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&s, fp4s_spec_amax(&s, x, R, K, K, NULL), &ts), 0);
    fp4s_qout q = {.dequant = xa, .ld_dequant = K};
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, R, K, K, 0, &q, NULL), 0);
    for (int i = 0; i < R; i++) {
        fp4s_tscale t1;
        ck_assert_int_eq(fp4s_tscale_init(&s, fp4s_spec_amax(&s, x + i * K, 1, K, K, NULL), &t1), 0);
        fp4s_qout q1 = {.dequant = xb + i * K, .ld_dequant = K};
        ck_assert_int_eq(fp4s_quantize(&s, &t1, x + i * K, 1, K, K, 0, &q1, NULL), 0);
    }
    double sum = 0, mx = 0;
    for (int i = 0; i < R; i++) {
        double la[V], lb[V], ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0;
        for (int v = 0; v < V; v++) {
            la[v] = lb[v] = 0;
            for (int c = 0; c < K; c++) {
                la[v] += (double)xa[i * K + c] * w[v * K + c];
                lb[v] += (double)xb[i * K + c] * w[v * K + c];
            }
            ma = fmax(ma, la[v]);
            mb = fmax(mb, lb[v]);
        }
        for (int v = 0; v < V; v++) {
            za += exp(la[v] - ma);
            zb += exp(lb[v] - mb);
        }
        double d = fabs((la[tok[i]] - ma - log(za)) - (lb[tok[i]] - mb - log(zb)));
        sum += d;
        mx = fmax(mx, d);
    }
    ck_assert_msg(fabs(r.lp_sum_abs - sum) <= 1e-9 * (sum + 1e-30), "%.17g vs %.17g", r.lp_sum_abs, sum);
    ck_assert_msg(fabs(r.lp_max_abs - mx) <= 1e-9 * (mx + 1e-30), "%.17g vs %.17g", r.lp_max_abs, mx);
    ck_assert_uint_eq(r.lp_rows, R);
    ck_assert(sum > 0);
}
END_TEST

START_TEST(compositions_from_ids)
{
    /* 5 sequences of lengths 3, 1, 4, 2, 3 (ids out of order in the rows) */
    int64_t seq[13] = {7, 7, 7, 2, 9, 9, 9, 9, 4, 4, 11, 11, 11};
    int64_t pos[13] = {0, 1, 2, 0, 0, 1, 2, 3, 0, 1, 0, 1, 2};
    int64_t g[13];
    fp4s_batch_plan p;
    /* packed:4 in id order 2 (1), 4 (2), 7 (3), 9 (4), 11 (3): {2,4} {7} {9} {11} */
    ck_assert_int_eq(fp4s_batch_plan_parse("packed:4", &p), 0);
    ck_assert_int_eq(fp4s_batch_groups(&p, seq, pos, 13, g), 0);
    int64_t want_p[13] = {1, 1, 1, 0, 2, 2, 2, 2, 0, 0, 3, 3, 3};
    for (int i = 0; i < 13; i++) ck_assert_int_eq(g[i], want_p[i]);
    /* decode:2: sequences {2,4} and {7,9} and {11} by position */
    ck_assert_int_eq(fp4s_batch_plan_parse("decode:2", &p), 0);
    ck_assert_int_eq(fp4s_batch_groups(&p, seq, pos, 13, g), 0);
    for (int i = 0; i < 13; i++)
        for (int j = 0; j < 13; j++) {
            int bi = seq[i] == 2 || seq[i] == 4 ? 0 : seq[i] == 7 || seq[i] == 9 ? 1 : 2;
            int bj = seq[j] == 2 || seq[j] == 4 ? 0 : seq[j] == 7 || seq[j] == 9 ? 1 : 2;
            ck_assert_int_eq(g[i] == g[j], bi == bj && pos[i] == pos[j]);
        }
    ck_assert_int_eq(fp4s_batch_plan_parse("tensor", &p), 0);
    ck_assert_int_eq(fp4s_batch_groups(&p, seq, NULL, 13, g), 0);
    for (int i = 0; i < 13; i++) ck_assert_int_eq(g[i], 0);
    ck_assert_int_eq(fp4s_batch_plan_parse("row", &p), 0);
    ck_assert_int_eq(fp4s_batch_groups(&p, NULL, NULL, 13, g), 0);
    for (int i = 0; i < 13; i++) ck_assert_int_eq(g[i], i);
    char buf[32];
    ck_assert_int_eq(fp4s_batch_plan_parse("decode:64", &p), 0);
    fp4s_batch_plan_str(&p, buf, sizeof buf);
    ck_assert_str_eq(buf, "decode:64");
}
END_TEST

START_TEST(bad_input_refused)
{
    fp4s_batch_plan p;
    ck_assert_int_eq(fp4s_batch_plan_parse("packed", &p), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_batch_plan_parse("packed:0", &p), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_batch_plan_parse("packed:-3", &p), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_batch_plan_parse("row:4", &p), FP4S_EINVAL);
    ck_assert_int_eq(fp4s_batch_plan_parse("waves:2", &p), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "expected packed:TOKENS, decode:SEQS, tensor or row"));
    ck_assert_int_eq(fp4s_batch_plan_parse("decode", &p), FP4S_EINVAL);
    int64_t seq[4] = {0, 0, 1, 1}, g[4];
    ck_assert_int_eq(fp4s_batch_plan_parse("decode:2", &p), 0);
    ck_assert_int_eq(fp4s_batch_groups(&p, seq, NULL, 4, g), FP4S_EINVAL);
    float x[R * K];
    fill(x);
    int64_t ga[R] = {0}, gb[R] = {0};
    fp4s_spec s;
    fp4s_batch_result r;
    memset(&r, 0, sizeof r);
    spec(&s, FP4S_NVFP4, "te-2d");
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, NULL, &r, NULL), FP4S_ENOTSUP);
    spec(&s, FP4S_NVFP4, "te-sr");
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, NULL, &r, NULL), FP4S_ENOTSUP);
    spec(&s, FP4S_FP8, "fp8-1x128");
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, NULL, &r, NULL), FP4S_ENOTSUP);
    spec(&s, FP4S_NVFP4, "te");
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, 40, K, ga, gb, NULL, &r, NULL), FP4S_ESHAPE);
    fp4s_batch_opts o;
    fp4s_batch_opts_defaults(&o);
    o.lm_head = true;
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, &o, &r, NULL), FP4S_EINVAL);
    float w[3 * K] = {0};
    int64_t tok[R];
    for (int i = 0; i < R; i++) tok[i] = i == 7 ? 3 : 0;
    for (int i = 0; i < R; i++) gb[i] = i;
    o.w = w;
    o.n = 3;
    o.token = tok;
    ck_assert_int_eq(fp4s_batch_eval(&s, x, R, K, K, ga, gb, &o, &r, NULL), FP4S_ERANGE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "row 7"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch");
    const check_case cases[] = {
        CHECK_CASE(per_tensor_flips_match_an_independent_count),
        CHECK_CASE(per_token_and_mxfp4_show_no_coupling),
        CHECK_CASE(same_composition_changes_nothing),
        CHECK_CASE(output_and_logprob_change_by_hand),
        CHECK_CASE(compositions_from_ids),
        CHECK_CASE(bad_input_refused),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return check_run(s, CK_ENV);
}
