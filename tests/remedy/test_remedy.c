/* Unit tests of analysis/remedy: the list grammar and its messages, the
 * checks against the quantizers, the linear-forward call against a direct
 * quantize + double GEMM, hand-computed cases (mbs max, keep, cost),
 * identities (of:0 and aqn:0 are none, rac:1:bf16 is nearly wfq), the error
 * falling with R, determinism over thread counts, and bad input. */
#include "../check_main.h"
#include "../splitmix.h"

#include <fp4scope/capture.h>
#include <fp4scope/decompose.h>
#include <fp4scope/quant.h>
#include <fp4scope/remedy.h>
#include <fp4scope/spec.h>

#include "fp4s_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------- */
static uint64_t rs = 1;
static double urand(void) { return splitmix_unit(&rs); }
static double grand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

/* activations with per-channel scales and a few hot channels */
static float *act(size_t m, size_t k, uint64_t seed)
{
    rs = seed;
    float *x = malloc(m * k * sizeof *x);
    double *cs = malloc(k * sizeof *cs);
    for (size_t j = 0; j < k; j++) cs[j] = exp(0.7 * grand()) * (j % 37 == 5 ? 30.0 : 1.0);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < k; j++) x[i * k + j] = (float)(grand() * cs[j]);
    free(cs);
    return x;
}

static float *wgt(size_t n, size_t k, uint64_t seed)
{
    rs = seed;
    float *w = malloc(n * k * sizeof *w);
    for (size_t i = 0; i < n * k; i++) w[i] = (float)(0.05 * grand());
    return w;
}

static fp4s_spec spec(fp4s_format f, const char *p)
{
    fp4s_spec s;
    ck_assert_msg(fp4s_spec_profile(&s, f, p) == 0, "%s", fp4s_last_error());
    return s;
}

static fp4s_remedy R(const char *item)
{
    fp4s_remedy r;
    int rc = fp4s_remedy_parse(item, &r);
    ck_assert_msg(rc == 0, "%s: %s", item, fp4s_last_error());
    return r;
}

static float *qdq(const fp4s_spec *s, const float *x, size_t rows, size_t cols)
{
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(s, fp4s_amax(x, rows, cols, cols, NULL), &ts), 0);
    float *q = malloc(rows * cols * sizeof *q);
    fp4s_qout o = {0};
    o.dequant = q;
    o.ld_dequant = cols;
    ck_assert_int_eq(fp4s_quantize(s, &ts, x, rows, cols, cols, 0, &o, NULL), 0);
    return q;
}

static double *gemm_d(const float *a, const float *b, size_t m, size_t n, size_t k)
{
    double *y = malloc(m * n * sizeof *y);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t t = 0; t < k; t++) s += (double)a[i * k + t] * (double)b[j * k + t];
            y[i * n + j] = s;
        }
    return y;
}

static double rel(const float *y, const double *ref, size_t n)
{
    double e = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)y[i] - ref[i]) * ((double)y[i] - ref[i]);
        d += ref[i] * ref[i];
    }
    return sqrt(e / d);
}

static float *run(const char *item, const fp4s_spec *as, const fp4s_spec *ws, const float *x, size_t m,
                  const float *w, size_t n, size_t k, fp4s_remedy_cost *c)
{
    fp4s_remedy r = R(item);
    float *y = malloc(m * n * sizeof *y);
    int rc = fp4s_remedy_linear(&r, as, ws, x, m, k, w, n, k, k, y, n, c);
    ck_assert_msg(rc == 0, "%s: %s", item, fp4s_last_error());
    return y;
}

static void expect_err(const char *item, int code, const char *needle)
{
    fp4s_remedy r;
    int rc = fp4s_remedy_parse(item, &r);
    ck_assert_msg(rc == code, "'%s': expected %d, got %d (%s)", item, code, rc, fp4s_last_error());
    ck_assert_msg(strstr(fp4s_last_error(), needle), "'%s': message '%s' lacks '%s'", item, fp4s_last_error(),
                  needle);
}

/* ---- grammar ------------------------------------------------------------------ */
START_TEST(grammar_accepts_the_issue_list)
{
    fp4s_remedy *v;
    size_t n;
    ck_assert_int_eq(fp4s_remedy_list_parse("none,rac:0.125,rac:1:bf16,rac-rand:0.25,mbs:128,of:0.5,keep:1,"
                                            "mbs:128+of:0.5,bf16,wfq,w4a4qat,aqn:0.01:3:weight,rac:0.5:aug,of",
                                            &v, &n), 0);
    ck_assert_uint_eq(n, 14);
    ck_assert_int_eq(v[0].kind, FP4S_RK_ROLLOUT);
    ck_assert(v[0].rac_ratio == 0 && !v[0].of && !v[0].mbs_group && !v[0].keep && !v[0].aqn);
    ck_assert(v[1].rac_ratio == 0.125 && v[1].rac_resid == FP4S_RAC_FP4 && !v[1].rac_random);
    ck_assert(v[2].rac_ratio == 1 && v[2].rac_resid == FP4S_RAC_BF16);
    ck_assert(v[3].rac_random && v[3].rac_seed == 1 && v[3].rac_ratio == 0.25);
    ck_assert(v[4].mbs_group == 128 && v[4].mbs_rule == FP4S_MBS_AUTO);
    ck_assert(v[5].of && v[5].of_alpha == 0.5);
    ck_assert(v[6].keep == 1);
    ck_assert(v[7].mbs_group == 128 && v[7].of);
    ck_assert_int_eq(v[8].kind, FP4S_RK_BF16);
    ck_assert_int_eq(v[9].kind, FP4S_RK_WFQ);
    ck_assert_int_eq(v[10].kind, FP4S_RK_W4A4QAT);
    ck_assert(v[11].aqn && v[11].aqn_sigma == 0.01 && v[11].aqn_seed == 3 && v[11].aqn_target == FP4S_AQN_WEIGHT);
    ck_assert(v[12].rac_resid == FP4S_RAC_AUG);
    ck_assert(v[13].of && v[13].of_alpha == 0.5);
    ck_assert_str_eq(v[7].text, "mbs:128+of:0.5");
    ck_assert_str_eq(fp4s_remedy_label(&v[7]), "mbs:128+of:0.5");
    /* the canonical text parses back to the same remedy */
    for (size_t i = 0; i < n; i++) {
        char buf[256];
        fp4s_remedy_describe(&v[i], buf, sizeof buf);
        fp4s_remedy b = R(buf);
        memset(b.text, 0, sizeof b.text);
        fp4s_remedy a = v[i];
        memset(a.text, 0, sizeof a.text);
        ck_assert_msg(!memcmp(&a, &b, sizeof a), "describe round trip of '%s' -> '%s'", v[i].text, buf);
    }
    free(v);
    /* optional parameters in either order */
    fp4s_remedy a = R("rac-rand:0.5:9:aug"), b = R("rac-rand:0.5:aug:9");
    ck_assert(a.rac_seed == 9 && b.rac_seed == 9 && a.rac_resid == FP4S_RAC_AUG && b.rac_resid == FP4S_RAC_AUG);
    a = R("aqn:0.1:elem:5");
    ck_assert(a.aqn_seed == 5 && a.aqn_target == FP4S_AQN_ELEM);
    a = R("mbs:64:mse");
    ck_assert(a.mbs_rule == FP4S_MBS_MSE);
}
END_TEST

/* "none" is the one plain item: every component, engine remedies included,
 * makes a remedy, and the trainer kinds and bf16-rollout are not "none". */
START_TEST(is_plain_only_for_none)
{
    ck_assert(fp4s_remedy_is_plain(&(fp4s_remedy){0}) == true);
    fp4s_remedy d;
    fp4s_remedy_defaults(&d);
    ck_assert(fp4s_remedy_is_plain(&d));
    ck_assert(!fp4s_remedy_is_plain(NULL));
    const char *plain[] = {"none"};
    const char *not_plain[] = {"bf16", "wfq", "w4a4qat", "bf16-rollout", "rac:0.5", "rac-rand:0.5", "mbs:64",
                               "of", "of:0", "keep:1", "aqn:0", "aqn:0.1", "4over6", "rht", "rht:none", "sr",
                               "sr:0", "mbs:128+of:0.5"};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
        fp4s_remedy r = R(plain[i]);
        ck_assert_msg(fp4s_remedy_is_plain(&r), "%s is plain", plain[i]);
    }
    for (size_t i = 0; i < sizeof not_plain / sizeof *not_plain; i++) {
        fp4s_remedy r = R(not_plain[i]);
        ck_assert_msg(!fp4s_remedy_is_plain(&r), "%s is not plain", not_plain[i]);
    }
}
END_TEST

START_TEST(grammar_refuses_with_a_message)
{
    expect_err("foo", FP4S_EINVAL, "unknown remedy 'foo' (known: none, bf16");
    expect_err("rac:0", FP4S_ERANGE, "R must be in (0, 1], got 0");
    expect_err("rac:1.5", FP4S_ERANGE, "R must be in (0, 1], got 1.5");
    expect_err("rac:-0.1", FP4S_ERANGE, "R must be in (0, 1]");
    expect_err("rac:abc", FP4S_EINVAL, "R: expected a number in (0, 1], got 'abc'");
    expect_err("rac", FP4S_EINVAL, "needs the channel ratio R");
    expect_err("rac:0.5:int8", FP4S_EINVAL, "expected RESID bf16, fp4 or aug, got 'int8'");
    expect_err("rac:0.5:7", FP4S_EINVAL, "expected RESID bf16, fp4 or aug, got '7'");
    expect_err("rac-rand:0.5:x", FP4S_EINVAL, "RESID (bf16, fp4 or aug) or SEED");
    expect_err("rac-rand:0.5:1:2", FP4S_EINVAL, "SEED given twice");
    expect_err("rac-rand:0.5:99999999999999999999999", FP4S_ERANGE, "SEED must be an integer in [0, 2^64 - 1]");
    expect_err("of:1.5", FP4S_ERANGE, "ALPHA must be in [0, 1], got 1.5");
    expect_err("of:-1", FP4S_ERANGE, "ALPHA must be in [0, 1]");
    expect_err("of:nan", FP4S_EINVAL, "ALPHA: expected a number");
    expect_err("mbs", FP4S_EINVAL, "needs the macro-block size G");
    expect_err("mbs:0", FP4S_ERANGE, "G must be in [1, 1048576], got 0");
    expect_err("mbs:128:median", FP4S_EINVAL, "RULE: expected max or mse, got 'median'");
    expect_err("keep:0", FP4S_ERANGE, "K must be in [1, block size - 1], got 0");
    expect_err("keep", FP4S_EINVAL, "needs K");
    expect_err("aqn:2", FP4S_ERANGE, "SIGMA must be in [0, 1], got 2");
    expect_err("aqn:0.1:norm", FP4S_EINVAL, "TARGET (gain, weight or elem)");
    expect_err("of+of:1", FP4S_EINVAL, "'of' given twice");
    expect_err("rac:0.5+rac-rand:0.5", FP4S_EINVAL, "rac and rac-rand given twice or together");
    expect_err("none+of:0.5", FP4S_EINVAL, "'none' cannot be combined");
    expect_err("of:0.5+bf16", FP4S_EINVAL, "'bf16' cannot be combined");
    expect_err("wfq:1", FP4S_EINVAL, "'wfq' takes no parameters");
    expect_err("of:0.5+", FP4S_EINVAL, "empty component");
    expect_err("", FP4S_EEMPTY, "empty item");
    fp4s_remedy *v;
    size_t n;
    ck_assert_int_eq(fp4s_remedy_list_parse("none,,of", &v, &n), FP4S_EEMPTY);
    ck_assert_msg(strstr(fp4s_last_error(), "empty item (item 2)"), "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_remedy_list_parse("none,rac:2", &v, &n), FP4S_ERANGE);
    ck_assert_msg(strstr(fp4s_last_error(), "remedy 'rac:2'"), "%s", fp4s_last_error());
}
END_TEST

START_TEST(check_against_the_quantizers)
{
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp"), nv = spec(FP4S_NVFP4, "te"), f8 = spec(FP4S_FP8, "fp8-1x128");
    fp4s_spec nvw;
    fp4s_remedy_weight_spec(&nv, -1, &nvw);
    ck_assert(nvw.tile2d);
    /* a row-scaled activation profile: the weight per tensor, 2-D, a valid spec; a static input scale stays
     * with the activations */
    fp4s_spec row = spec(FP4S_NVFP4, "te-row"), roww, st = spec(FP4S_NVFP4, "vllm"), stw;
    fp4s_remedy_weight_spec(&row, -1, &roww);
    ck_assert(roww.tile2d && roww.nv_scope == FP4S_SCOPE_TENSOR);
    ck_assert_int_eq(fp4s_spec_check(&roww), 0);
    ck_assert(row.nv_scope == FP4S_SCOPE_ROW);
    ck_assert_int_eq(fp4s_spec_set_input_scale(&st, 0.001f), 0);
    fp4s_remedy_weight_spec(&st, -1, &stw);
    ck_assert(stw.nv_input_scale == 0.0f && st.nv_input_scale == 0.001f);
    fp4s_remedy r = R("mbs:48");
    ck_assert_int_eq(fp4s_remedy_check(&r, &mx, &mx, 256), FP4S_ERANGE);
    ck_assert_msg(strstr(fp4s_last_error(), "G = 48 must be a multiple of the activation block size 32"), "%s",
                  fp4s_last_error());
    r = R("mbs:128:max");
    ck_assert_int_eq(fp4s_remedy_check(&r, &nv, &nvw, 256), FP4S_ENOTSUP);
    ck_assert_msg(strstr(fp4s_last_error(), "use mbs:128:mse"), "%s", fp4s_last_error());
    r = R("mbs:128");
    ck_assert_int_eq(fp4s_remedy_check(&r, &nv, &nvw, 256), 0); /* auto: mse for NVFP4 */
    fp4s_spec rtn = mx;
    rtn.mx_rule = FP4S_MX_RTN;
    ck_assert_int_eq(fp4s_remedy_check(&r, &rtn, &rtn, 256), FP4S_ENOTSUP);
    ck_assert_msg(strstr(fp4s_last_error(), "rtn does not"), "%s", fp4s_last_error());
    r = R("keep:32");
    ck_assert_int_eq(fp4s_remedy_check(&r, &mx, &mx, 256), FP4S_ERANGE);
    ck_assert_msg(strstr(fp4s_last_error(), "K must be in [1, 31]"), "%s", fp4s_last_error());
    r = R("keep:16");
    ck_assert_int_eq(fp4s_remedy_check(&r, &nv, &nv, 256), FP4S_ERANGE);
    r.operands = FP4S_OPERANDS_ACT;
    ck_assert_int_eq(fp4s_remedy_check(&r, &mx, &nv, 256), 0);
    r = R("rac:0.25");
    ck_assert_int_eq(fp4s_remedy_check(&r, &f8, &f8, 256), FP4S_ENOTSUP);
    ck_assert_msg(strstr(fp4s_last_error(), "FP8 takes only none"), "%s", fp4s_last_error());
    r = R("none");
    ck_assert_int_eq(fp4s_remedy_check(&r, &f8, &f8, 256), 0);
    ck_assert_int_eq(fp4s_remedy_check(&r, &mx, &mx, 100), FP4S_ESHAPE);
    ck_assert_msg(strstr(fp4s_last_error(), "K = 100 is not a multiple of the activation block size 32"), "%s",
                  fp4s_last_error());
    r = R("of:0.5");
    r.of_alpha = 3; /* filled by hand */
    ck_assert_int_eq(fp4s_remedy_check(&r, &mx, &mx, 256), FP4S_ERANGE);
    /* a spec with the RHT (te-rht): the rotation is the item rht, on both operands together */
    fp4s_spec rot = nv;
    rot.rht = true;
    rot.rht_signs = FP4S_RHT_TE_SIGNS;
    r = R("none");
    ck_assert_int_eq(fp4s_remedy_check(&r, &nv, &rot, 256), FP4S_ENOTSUP);
    ck_assert_msg(strstr(fp4s_last_error(), "weight quantizer has the RHT") &&
                      strstr(fp4s_last_error(), "give the item rht[:SIGNS]"),
                  "%s", fp4s_last_error());
    r = R("rht");
    ck_assert_int_eq(fp4s_remedy_check(&r, &nv, &nv, 256), 0);
}
END_TEST

/* ---- forward ------------------------------------------------------------------- */
START_TEST(none_is_the_quantized_gemm)
{
    const size_t m = 40, n = 24, k = 128;
    float *x = act(m, k, 3), *w = wgt(n, k, 4);
    const char *profs[][2] = {{"mxfp4", "ocp"}, {"mxfp4", "ceil"}, {"nvfp4", "te"}, {"nvfp4", "torchao"}};
    for (size_t p = 0; p < 4; p++) {
        fp4s_format f;
        fp4s_format_parse(profs[p][0], &f);
        fp4s_spec as = spec(f, profs[p][1]), ws;
        fp4s_remedy_weight_spec(&as, -1, &ws);
        float *xq = qdq(&as, x, m, k), *wq = qdq(&ws, w, n, k);
        double *ref = gemm_d(xq, wq, m, n, k), *refw = gemm_d(x, wq, m, n, k), *refb = gemm_d(x, w, m, n, k);
        float *y = run("none", &as, &ws, x, m, w, n, k, NULL);
        ck_assert_msg(rel(y, ref, m * n) < 1e-6, "%s none: %g", profs[p][1], rel(y, ref, m * n));
        free(y);
        y = run("w4a4qat", &as, &ws, x, m, w, n, k, NULL);
        ck_assert(rel(y, ref, m * n) < 1e-6);
        free(y);
        y = run("wfq", &as, &ws, x, m, w, n, k, NULL);
        ck_assert(rel(y, refw, m * n) < 1e-6);
        free(y);
        y = run("bf16", &as, &ws, x, m, w, n, k, NULL);
        ck_assert(rel(y, refb, m * n) < 1e-6);
        free(y);
        /* the weight operand is Qw(W) bit for bit */
        fp4s_remedy r = R("wfq");
        fp4s_rlinear *L;
        ck_assert_int_eq(fp4s_rlinear_open(&r, &as, &ws, w, n, k, k, &L), 0);
        ck_assert(!memcmp(fp4s_rlinear_weight(L), wq, n * k * sizeof *wq));
        fp4s_rlinear_close(&L);
        ck_assert(L == NULL);
        free(xq);
        free(wq);
        free(ref);
        free(refw);
        free(refb);
    }
    free(x);
    free(w);
}
END_TEST

START_TEST(identities_and_monotone_r)
{
    const size_t m = 64, n = 32, k = 256;
    float *x = act(m, k, 5), *w = wgt(n, k, 6);
    fp4s_spec as = spec(FP4S_NVFP4, "te"), ws;
    fp4s_remedy_weight_spec(&as, -1, &ws);
    float *y0 = run("none", &as, &ws, x, m, w, n, k, NULL);
    const char *same[] = {"of:0", "aqn:0", "aqn:0:weight", "aqn:0:elem"};
    for (size_t i = 0; i < 4; i++) {
        float *y = run(same[i], &as, &ws, x, m, w, n, k, NULL);
        ck_assert_msg(!memcmp(y, y0, m * n * sizeof *y), "%s differs from none", same[i]);
        free(y);
    }
    float *wq = qdq(&ws, w, n, k);
    double *refw = gemm_d(x, wq, m, n, k);
    double e_none = rel(y0, refw, m * n);
    const char *rs_[] = {"rac:0.125", "rac:0.25", "rac:0.5", "rac:1"};
    double prev = e_none;
    for (size_t i = 0; i < 4; i++) {
        float *y = run(rs_[i], &as, &ws, x, m, w, n, k, NULL);
        double e = rel(y, refw, m * n);
        ck_assert_msg(e < prev, "%s: %g not below %g", rs_[i], e, prev);
        prev = e;
        free(y);
    }
    float *y = run("rac:1:bf16", &as, &ws, x, m, w, n, k, NULL);
    double e1 = rel(y, refw, m * n);
    ck_assert_msg(e1 < 0.02 * e_none, "rac:1:bf16 %g vs none %g", e1, e_none);
    free(y);
    /* aqn adds noise: a different output */
    y = run("aqn:0.05", &as, &ws, x, m, w, n, k, NULL);
    ck_assert(memcmp(y, y0, m * n * sizeof *y));
    free(y);
    free(y0);
    free(wq);
    free(refw);
    free(x);
    free(w);
}
END_TEST

START_TEST(mbs_max_hand_computed)
{
    /* one MXFP4 row of 32: amax 5.3; FLOOR alone gives scale 1 and 5.3 -> 6.
     * mbs:32:max: k' = floor(log2(5.3/6)) = -1, 3 (1 + m/256) >= 5.3 first at
     * m = 197: d = 1.76953125; 5.3/d = 2.9951... gets scale 2^-1, code 6, value
     * 6 * 0.5 * 1.76953125 = 5.30859375. */
    float x[32] = {0}, w[32] = {0};
    x[7] = 5.3f;
    x[0] = 1.0f;
    w[7] = 1.0f;
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp");
    float y;
    fp4s_remedy r = R("mbs:32:max");
    r.operands = FP4S_OPERANDS_ACT; /* the weight, one-hot, stays exact */
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, 1, 32, w, 1, 32, 32, &y, 1, NULL), 0);
    ck_assert_msg(y == 5.30859375f, "mbs max: %.9g", y);
    r = R("none");
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, 1, 32, w, 1, 32, 32, &y, 1, NULL), 0);
    ck_assert_msg(y == 6.0f, "none: %.9g", y);
    /* x[0] = 1: with mbs its block value is 1/d = 0.5651 -> 0.5 at scale 2^-1, times d: 0.884765625 */
    w[7] = 0;
    w[0] = 1;
    r = R("mbs:32:max");
    r.operands = FP4S_OPERANDS_ACT;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, 1, 32, w, 1, 32, 32, &y, 1, NULL), 0);
    ck_assert_msg(y == 0.884765625f, "mbs max, small entry: %.9g", y);
    /* the weight side too: the one-hot weight 1.0 gets d = 1 + 86/256 (0.75 d >= 1 first at
     * m = 86), 1/d -> code 6 at 2^-3, value 0.75 * 1.3359375 = 1.001953125 */
    w[0] = 0;
    w[7] = 1;
    r = R("mbs:32:max");
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, 1, 32, w, 1, 32, 32, &y, 1, NULL), 0);
    ck_assert_msg(y == (float)(5.30859375 * 1.001953125), "mbs max on both: %.9g", y);
    /* mse: c = 2^(-j/16); 5.3 c lands nearest a grid point times 2^k for j = 2 (5.3 * 2^-1/8
     * = 4.86 -> 4 ... ) and so on: the unit error must not exceed that of j = 0 (plain) */
    r = R("mbs:32:mse");
    r.operands = FP4S_OPERANDS_ACT;
    float y2[2], w2[64] = {0};
    w2[7] = 1;
    w2[32] = 1;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, 1, 32, w2, 2, 32, 32, y2, 2, NULL), 0);
    double e_mse = (y2[0] - 5.3) * (y2[0] - 5.3) + (y2[1] - 1.0) * (y2[1] - 1.0);
    ck_assert_msg(e_mse < (6.0 - 5.3) * (6.0 - 5.3), "mse %g", e_mse);
}
END_TEST

START_TEST(keep_hand_computed)
{
    /* NVFP4 te block of 16 with one outlier: keep:1 stores bf16(100.3) = 100.5 and
     * scales the block by the rest (amax 1.5 -> the 1.5 entry exact). */
    float x[16], w[16];
    for (int i = 0; i < 16; i++) {
        x[i] = 0.25f * (i % 7);
        w[i] = 0;
    }
    x[3] = 100.3f;
    x[9] = 1.5f;
    fp4s_spec nv = spec(FP4S_NVFP4, "te"), ws;
    fp4s_remedy_weight_spec(&nv, 0, &ws);
    fp4s_remedy r = R("keep:1");
    r.operands = FP4S_OPERANDS_ACT;
    float y;
    w[3] = 1;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &nv, &ws, x, 1, 16, w, 1, 16, 16, &y, 1, NULL), 0);
    ck_assert_msg(y == 100.5f, "kept entry: %.9g", y);
    w[3] = 0;
    w[9] = 1;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &nv, &ws, x, 1, 16, w, 1, 16, 16, &y, 1, NULL), 0);
    ck_assert_msg(fabsf(y - 1.5f) < 1e-6f, "block max without the outlier: %.9g", y);
    r = R("none");
    ck_assert_int_eq(fp4s_remedy_linear(&r, &nv, &ws, x, 1, 16, w, 1, 16, 16, &y, 1, NULL), 0);
    ck_assert_msg(fabsf(y - 1.5f) > 0.1f, "without keep the 1.5 entry is coarse: %.9g", y);
}
END_TEST

START_TEST(cost_hand_computed)
{
    const size_t m = 64, n = 32, k = 256;
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp");
    fp4s_remedy_cost c;
    double fb = 2.0 * m * n * k;
    fp4s_remedy r = R("none");
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.flops_fp4 == fb && c.flops_extra == 0 && c.bytes_extra == 0 && c.act_bits == 4.25);
    ck_assert(c.bytes_base == (m * k * 4.25 + n * k * 4.25) / 8 + 2.0 * m * n);
    r = R("rac:0.1"); /* ceil(25.6) = 26 channels, padded to 32 */
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert_uint_eq(c.rac_channels, 26);
    ck_assert_uint_eq(c.rac_padded, 32);
    ck_assert(c.flops_extra == 2.0 * m * n * 32);
    ck_assert(c.bytes_extra == m * 32 * 4.25 / 8 + n * 32 * 4.25 / 8 + 4.0 * 26);
    r = R("rac:0.1:bf16");
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.flops_bf16 == 2.0 * m * n * 26 && c.flops_fp4 == fb);
    r = R("of:0.5");
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.flops_fp4 == 4 * fb && c.act_bits == 8.5 && c.weight_bits == 8.5);
    r.operands = FP4S_OPERANDS_ACT;
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.flops_fp4 == 2 * fb && c.weight_bits == 4.25);
    r = R("keep:1");
    r.operands = FP4S_OPERANDS_ACT;
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.kept == m * (k / 32) && c.flops_bf16 == 2.0 * n * m * (k / 32));
    ck_assert(c.act_bits == 4.25 + 21.0 / 32);
    r = R("mbs:128");
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert(c.act_bits == 4.25 + 8.0 / 128 && c.flops_fp32 == 2 * (2.0 * m * n * 2));
    r = R("rac:0.25");
    r.rac_tile_rows = 16;
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, m, n, k, &c), 0);
    ck_assert_uint_eq(c.rac_tiles, 4);
#if FP4S_HAVE_BLAS
    /* the measured cost of a forward is the predicted one */
    float *x = act(m, k, 9), *w = wgt(n, k, 10), *y = malloc(m * n * sizeof *y);
    fp4s_remedy_cost c2;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, m, k, w, n, k, k, y, n, &c2), 0);
    ck_assert(c2.flops_fp4 == c.flops_fp4 && c2.bytes == c.bytes && c2.rac_tiles == 4 && c2.gemm_seconds >= 0);
    free(x);
    free(w);
    free(y);
#endif
}
END_TEST

START_TEST(same_output_on_any_thread_count)
{
    const size_t m = 96, n = 48, k = 256;
    float *x = act(m, k, 11), *w = wgt(n, k, 12);
    fp4s_spec as = spec(FP4S_NVFP4, "te"), ws;
    fp4s_remedy_weight_spec(&as, -1, &ws);
    const char *items[] = {"none", "rac:0.25", "rac:0.25:aug", "rac-rand:0.25", "mbs:64:mse+of:0.5", "keep:2",
                           "aqn:0.02:elem+rac:0.125:bf16"};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        fp4s_set_threads(1);
        float *a = run(items[i], &as, &ws, x, m, w, n, k, NULL);
        fp4s_set_threads(3);
        float *b = run(items[i], &as, &ws, x, m, w, n, k, NULL);
        fp4s_set_threads(0);
        ck_assert_msg(!memcmp(a, b, m * n * sizeof *a), "%s: thread count changes Y", items[i]);
        free(a);
        free(b);
    }
    free(x);
    free(w);
}
END_TEST

START_TEST(bad_input_refused)
{
    const size_t m = 8, n = 4, k = 64;
    float *x = act(m, k, 13), *w = wgt(n, k, 14), y[32];
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp");
    fp4s_remedy r = R("rac:0.25");
    x[3 * k + 5] = NAN;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, m, k, w, n, k, k, y, n, NULL), FP4S_EFORMAT);
    ck_assert_msg(strstr(fp4s_last_error(), "activation: element (3, 5) is NaN"), "%s", fp4s_last_error());
    x[3 * k + 5] = 0;
    w[k + 2] = INFINITY;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, m, k, w, n, k, k, y, n, NULL), FP4S_EFORMAT);
    ck_assert_msg(strstr(fp4s_last_error(), "weight: element (1, 2) is infinite"), "%s", fp4s_last_error());
    w[k + 2] = 0;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, m, 32, w, n, k, k, y, n, NULL), FP4S_EINVAL);
    ck_assert_msg(strstr(fp4s_last_error(), "activation row stride 32 < K = 64"), "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_remedy_linear(&r, &mx, &mx, x, m, k, w, n, 48, 48, y, n, NULL), FP4S_ESHAPE);
    fp4s_rlinear *L = (fp4s_rlinear *)1;
    ck_assert_int_eq(fp4s_rlinear_open(&r, &mx, &mx, w, 0, k, k, &L), FP4S_ESHAPE);
    ck_assert(L == NULL);
    fp4s_rlinear_close(&L);
    fp4s_rlinear_close(NULL);
    free(x);
    free(w);
}
END_TEST

/* Routing flips (fp4s_compare_eval_routed): without them the same result as
 * fp4s_compare_eval; with them every flipped token's row of D is the routing
 * component, the rollout's Qa(x_r) Qw^T (quantized with the tensor scale of
 * all the rollout's rows) and the trainer's -x_t Qw^T, computed here apart. */
START_TEST(compare_routed_flips_are_the_routing_component)
{
    const size_t m = 24, r = 5, t = 3, n = 12, k = 64;
    float *xt = act(m + t, k, 31), *w = wgt(n, k, 32), *xr = malloc((m + r) * k * sizeof *xr);
    float *extra = act(r, k, 33);
    rs = 34;
    for (size_t i = 0; i < m * k; i++) xr[i] = xt[i] * (float)(1 + 1e-3 * grand());
    memcpy(xr + m * k, extra, r * k * sizeof *xr);
    fp4s_spec as = spec(FP4S_NVFP4, "te"), ws;
    fp4s_remedy_weight_spec(&as, -1, &ws);
    fp4s_compare_site a, b;
    ck_assert_int_eq(fp4s_compare_eval(&as, &ws, xr, xt, m, w, n, k, NULL, &a), 0);
    ck_assert_int_eq(fp4s_compare_eval_routed(&as, &ws, xr, 0, xt, 0, m, w, n, k, NULL, &b), 0);
    ck_assert(a.mismatch2 == b.mismatch2 && a.contrib[FP4S_CMP_ROUTING] == 0 && b.rollout_only == 0);
    fp4s_compare_site_free(&a);
    fp4s_compare_site_free(&b);
    fp4s_compare_site c;
    ck_assert_int_eq(fp4s_compare_eval_routed(&as, &ws, xr, r, xt, t, m, w, n, k, NULL, &c), 0);
    ck_assert_uint_eq(c.m, m);
    ck_assert_uint_eq(c.rollout_only, r);
    ck_assert_uint_eq(c.trainer_only, t);
    double sum = 0;
    for (int q = 0; q < FP4S_CMP_COUNT; q++) sum += c.contrib[q];
    ck_assert_msg(fabs(sum - c.mismatch2) < 1e-9 * c.mismatch2, "%g vs %g", sum, c.mismatch2);
    /* apart: Qa over all m + r rollout rows, Qw, the flipped rows' D */
    float *qr = malloc((m + r) * k * sizeof *qr), *qw = malloc(n * k * sizeof *qw);
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&as, fp4s_spec_amax(&as, xr, m + r, k, k, NULL), &ts), 0);
    fp4s_qout qo;
    memset(&qo, 0, sizeof qo);
    qo.dequant = qr;
    qo.ld_dequant = k;
    ck_assert_int_eq(fp4s_quantize(&as, &ts, xr, m + r, k, k, 0, &qo, NULL), 0);
    ck_assert_int_eq(fp4s_tscale_init(&ws, fp4s_spec_amax(&ws, w, n, k, k, NULL), &ts), 0);
    qo.dequant = qw;
    ck_assert_int_eq(fp4s_quantize(&ws, &ts, w, n, k, k, 0, &qo, NULL), 0);
    double routing = 0;
    for (size_t i = 0; i < r + t; i++)
        for (size_t o = 0; o < n; o++) {
            double dot = 0;
            for (size_t j = 0; j < k; j++)
                dot += (i < r ? (double)qr[(m + i) * k + j] : -(double)xt[(m + i - r) * k + j]) * (double)qw[o * k + j];
            routing += dot * dot;
        }
    ck_assert_msg(fabs(c.contrib[FP4S_CMP_ROUTING] - routing) < 1e-9 * routing, "%g vs %g",
                  c.contrib[FP4S_CMP_ROUTING], routing);
    ck_assert(c.contrib[FP4S_CMP_ROUTING] > 0.1 * c.mismatch2);
    ck_assert_str_eq(fp4s_cmp_component_name(FP4S_CMP_ROUTING), "routing");
    fp4s_compare_site_free(&c);
    /* every token flipped: no pairs */
    ck_assert_int_eq(fp4s_compare_eval_routed(&as, &ws, xr, r, xt, 0, 0, w, n, k, NULL, &c), 0);
    ck_assert(c.m == 0 && c.contrib[FP4S_CMP_ROUTING] > 0 && isnan(c.code_flips));
    fp4s_compare_site_free(&c);
    free(qr);
    free(qw);
    free(xr);
    free(xt);
    free(w);
    free(extra);
}
END_TEST

START_TEST(compare_splits_the_mismatch_exactly)
{
    const size_t m = 48, n = 20, k = 128;
    float *xt = act(m, k, 21), *w = wgt(n, k, 22), *xr = malloc(m * k * sizeof *xr);
    rs = 23;
    for (size_t i = 0; i < m * k; i++) xr[i] = xt[i] * (float)(1 + 1e-3 * grand());
    const char *profs[][2] = {{"mxfp4", "ocp"}, {"mxfp4", "ceil"}, {"nvfp4", "te"}};
    for (size_t p = 0; p < 3; p++) {
        fp4s_format f;
        fp4s_format_parse(profs[p][0], &f);
        fp4s_spec as = spec(f, profs[p][1]), ws;
        fp4s_remedy_weight_spec(&as, -1, &ws);
        fp4s_compare_site c;
        ck_assert_int_eq(fp4s_compare_eval(&as, &ws, xr, xt, m, w, n, k, NULL, &c), 0);
        double sum = 0;
        for (int q = 0; q < FP4S_CMP_COUNT; q++) sum += c.contrib[q];
        ck_assert_msg(fabs(sum - c.mismatch2) < 1e-9 * c.mismatch2, "%s: %g vs %g", profs[p][1], sum, c.mismatch2);
        ck_assert(c.code_flips > 0 && c.code_flips < 0.5 && c.amplification > 1);
        /* the per-channel energies of the quantization error are the decomposition's */
        fp4s_decomp_opts o;
        fp4s_decomp_opts_defaults(&o);
        o.by = FP4S_GROUP_CHANNEL;
        fp4s_tscale ts;
        ck_assert_int_eq(fp4s_tscale_init(&as, fp4s_amax(xr, m, k, k, NULL), &ts), 0);
        fp4s_decomp *d;
        ck_assert_int_eq(fp4s_decomp_open(&as, &ts, &o, m, k, &d), 0);
        ck_assert_int_eq(fp4s_decomp_add(d, xr, m, k, 0), 0);
        for (size_t j = 0; j < k; j++) {
            fp4s_decomp_result g;
            ck_assert_int_eq(fp4s_decomp_group(d, j, &g), 0);
            const double *e = c.ch_energy + j * FP4S_CMP_COUNT;
            ck_assert_msg(fabs(e[FP4S_CMP_SCALE] - g.energy_scale) <= 1e-12 * (g.energy_total + 1e-300) &&
                          fabs(e[FP4S_CMP_DEADZONE] - g.energy_deadzone) <= 1e-12 * (g.energy_total + 1e-300) &&
                          fabs(e[FP4S_CMP_GRID] - g.energy_grid) <= 1e-12 * (g.energy_total + 1e-300),
                          "%s channel %zu: %g %g %g vs %g %g %g", profs[p][1], j, e[1], e[2], e[3], g.energy_scale,
                          g.energy_deadzone, g.energy_grid);
        }
        fp4s_decomp_close(&d);
        fp4s_compare_site_free(&c);
    }
    /* the same activations on both sides: no input part, nothing flips */
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp");
    fp4s_compare_site c;
    ck_assert_int_eq(fp4s_compare_eval(&mx, &mx, xt, xt, m, w, n, k, NULL, &c), 0);
    ck_assert(c.contrib[FP4S_CMP_INPUT] == 0 && c.code_flips == 0 && c.scale_flips == 0 && isnan(c.amplification));
    ck_assert(c.mismatch2 > 0 && c.input_rel_diff == 0);
    fp4s_compare_site_free(&c);
    xr[5] = NAN;
    ck_assert_int_eq(fp4s_compare_eval(&mx, &mx, xr, xt, m, w, n, k, NULL, &c), FP4S_EFORMAT);
    ck_assert_msg(strstr(fp4s_last_error(), "rollout activation: element (0, 5) is NaN"), "%s", fp4s_last_error());
    free(xt);
    free(xr);
    free(w);
}
END_TEST

START_TEST(capture_tokens_written_and_checked)
{
    char dir[] = "/tmp/fp4s-remedy-XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/t.h5", dir);
    snprintf(bad, sizeof bad, "%s/bad.h5", dir);
    float lt[4] = {-1, -2, -0.5f, -3}, lr[4] = {-1.1f, -2, -0.4f, -3};
    int64_t seq[4] = {0, 0, 1, 1}, tok[4] = {5, 7, 1, 0};
    const char *files[2] = {path, bad};
    for (int f = 0; f < 2; f++) {
        fp4s_capture *c;
        ck_assert_int_eq(fp4s_capture_create(files[f], NULL, &c), 0);
        ck_assert_int_eq(fp4s_capture_put_logprobs(c, 2, lt, lr, seq, NULL, NULL, 4), 0);
        ck_assert_int_eq(fp4s_capture_put_tokens(c, 2, tok, f ? 3 : 4), 0);
        ck_assert_int_eq(fp4s_capture_put_tokens(c, -1, tok, 4), FP4S_EINVAL);
        ck_assert_int_eq(fp4s_capture_close(&c), 0);
    }
    ck_assert_int_eq(fp4s_capture_verify(path), 0);
    fp4s_capture_entry *e;
    size_t n;
    ck_assert_int_eq(fp4s_capture_list(path, &e, &n), 0);
    bool found = false;
    for (size_t i = 0; i < n; i++) found |= !strcmp(e[i].site, "logprobs") && !strcmp(e[i].side, "token");
    free(e);
    ck_assert(found);
    int64_t *t2, *s2;
    uint8_t *m2;
    ck_assert_int_eq(fp4s_remedy_read_tokens(path, 2, &t2, &s2, &m2, &n), 0);
    ck_assert(n == 4 && !memcmp(t2, tok, sizeof tok) && !memcmp(s2, seq, sizeof seq) && m2 == NULL);
    free(t2);
    free(s2);
    ck_assert_int_eq(fp4s_capture_verify(bad), FP4S_ESHAPE);
    ck_assert_msg(strstr(fp4s_last_error(), "/steps/2/logprobs/token: length 3 differs from logprobs/trainer (4)"),
                  "%s", fp4s_last_error());
    ck_assert_int_eq(fp4s_remedy_read_tokens(bad, 2, &t2, &s2, &m2, &n), FP4S_ESHAPE);
    ck_assert_int_eq(fp4s_remedy_read_tokens(path, 3, &t2, &s2, &m2, &n), FP4S_ENOTFOUND);
    char site[64];
    ck_assert_int_eq(fp4s_remedy_lm_head_site(path, site, sizeof site), 0);
    ck_assert_str_eq(site, "lm_head");
    unlink(path);
    unlink(bad);
    rmdir(dir);
}
END_TEST

/* ---- engine remedies (TransformerEngine) by hand -------------------------------------- */
START_TEST(stochastic_rounding_hand_computed)
{
    /* TE's stochastic_round_fp4_e2m1: up when u = rbits/256 >= 1 - frac */
    struct { float v; uint8_t rb; float want; } c[] = {
        {0.3f, 0, 0.0f},     {0.3f, 102, 0.0f},  {0.3f, 103, 0.5f},  /* up iff u >= 0.4 */
        {2.7f, 76, 2.0f},    {2.7f, 77, 3.0f},                        /* step 1: up iff u >= 0.3 */
        {5.9f, 12, 4.0f},    {5.9f, 13, 6.0f},                        /* step 2: up iff u >= 0.05 */
        {1.9f, 51, 1.5f},    {1.9f, 52, 2.0f},                        /* the jitter crosses into step 1 */
        {-1.2f, 153, -1.0f}, {-1.2f, 154, -1.5f}, {7.0f, 0, 6.0f},   {-100.0f, 255, -6.0f}, /* up iff u >= 0.6 */
        {0.5f, 255, 0.5f},   {4.0f, 0, 4.0f},    {4.0f, 255, 4.0f},  /* grid points stay */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        float q = fp4s_e2m1_sr(c[i].v, c[i].rb);
        ck_assert_msg(q == c[i].want, "sr(%g, %u) = %g, want %g", c[i].v, c[i].rb, q, c[i].want);
    }
    ck_assert(fp4s_e2m1_sr(NAN, 0) == 6.0f && signbit(fp4s_e2m1_sr(-0.1f, 0)));
    /* unbiased over the 256 bit patterns inside the grid */
    float vs[] = {0.3f, 0.77f, 1.31f, 2.45f, 3.3f, 4.9f};
    for (size_t i = 0; i < 6; i++) {
        double m = 0;
        for (int rb = 0; rb < 256; rb++) m += fp4s_e2m1_sr(vs[i], (uint8_t)rb);
        double step = vs[i] >= 4 ? 2 : vs[i] >= 2 ? 1 : 0.5;
        ck_assert_msg(fabs(m / 256 - vs[i]) <= step / 256 + 1e-7, "mean of sr(%g) = %g", vs[i], m / 256);
    }
    /* the quantizer: same bits for the same seed whatever the chunking, others for another seed */
    const size_t rows = 32, cols = 64;
    float *x = act(rows, cols, 31), *a = malloc(rows * cols * sizeof *a), *b = malloc(rows * cols * sizeof *b);
    fp4s_spec s = spec(FP4S_NVFP4, "te-sr");
    ck_assert(s.sr && s.sr_seed == 1);
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&s, fp4s_amax(x, rows, cols, cols, NULL), &ts), 0);
    fp4s_qout o = {0};
    o.dequant = a;
    o.ld_dequant = cols;
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, rows, cols, cols, 0, &o, NULL), 0);
    o.dequant = b;
    for (size_t r0 = 0; r0 < rows; r0 += 5)
        ck_assert_int_eq(fp4s_quantize(&s, &ts, x + r0 * cols, rows - r0 < 5 ? rows - r0 : 5, cols, cols, r0,
                                       &(fp4s_qout){.dequant = b + r0 * cols, .ld_dequant = cols}, NULL), 0);
    ck_assert(!memcmp(a, b, rows * cols * sizeof *a));
    s.sr_seed = 2;
    o.dequant = b;
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, rows, cols, cols, 0, &o, NULL), 0);
    ck_assert(memcmp(a, b, rows * cols * sizeof *a));
    /* ggml's level search and 4over6 refuse it */
    fp4s_spec g = spec(FP4S_NVFP4, "ggml");
    g.sr = true;
    ck_assert_int_eq(fp4s_spec_check(&g), FP4S_ENOTSUP);
    free(x);
    free(a);
    free(b);
}
END_TEST

START_TEST(four_over_six_hand_computed)
{
    /* tensor amax 6 with the 256 bound: S_enc = 1536/6 = 256, S_dec = 2^-8, both exact; base = 256 for a
     * block of max 6: map-to-6 scale 256 (byte 0x78), map-to-4 scale 384 (byte 0x7C), dequant q * 1.5.
     * Block 0 [6, 4.5, 2.25, 0.75]: exact on the map-to-4 grid {0, .75, 1.5, 2.25, 3, 4.5, 6}, while
     * map-to-6 errs by 0.5 + 0.25 + 0.25: map-to-4 (codes 6 5 3 1). Block 1 [6, 4, 3, 1]: exact on the
     * map-to-6 grid, map-to-4 gives 4.5 for 4: map-to-6 (codes 7 6 5 2). */
    float x[32] = {0};
    x[0] = 6;
    x[1] = 4.5f;
    x[2] = 2.25f;
    x[3] = 0.75f;
    x[16] = 6;
    x[17] = 4;
    x[18] = 3;
    x[19] = 1;
    fp4s_spec s = spec(FP4S_NVFP4, "te-4over6");
    fp4s_tscale ts;
    ck_assert_int_eq(fp4s_tscale_init(&s, 6.0f, &ts), 0);
    ck_assert(ts.s_enc == 256.0f && ts.s_dec == 0x1p-8f);
    uint8_t codes[32], scales[2];
    float dq[32];
    fp4s_qout o = {.codes = codes, .ld_codes = 32, .scales = scales, .ld_scales = 2, .dequant = dq, .ld_dequant = 32};
    fp4s_qstats st = {0};
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, 1, 32, 32, 0, &o, &st), 0);
    ck_assert_msg(scales[0] == 0x7C && scales[1] == 0x78, "scales %02x %02x", scales[0], scales[1]);
    const uint8_t want[8] = {6, 5, 3, 1, 7, 6, 5, 2};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(codes[i] == want[i], "block 0 code %d = %u", i, codes[i]);
        ck_assert_msg(codes[16 + i] == want[4 + i], "block 1 code %d = %u", i, codes[16 + i]);
        ck_assert_msg(dq[i] == x[i] && dq[16 + i] == x[16 + i], "dequant %d: %g %g", i, dq[i], dq[16 + i]);
    }
    ck_assert(st.err2 == 0.0);
    /* the plain te recipe (448 bound) cannot represent 4.5, 2.25, 0.75 on one scale: errors */
    fp4s_spec te = spec(FP4S_NVFP4, "te");
    ck_assert_int_eq(fp4s_tscale_init(&te, 6.0f, &ts), 0);
    fp4s_qstats st2 = {0};
    ck_assert_int_eq(fp4s_quantize(&te, &ts, x, 1, 32, 32, 0, &o, &st2), 0);
    ck_assert(st2.err2 > 0.3);
    /* 2-D: the tile's rows vote by their summed error: row 0 as block 0, the others zero -> map-to-4 */
    float t[16 * 16] = {0};
    memcpy(t, x, 16 * sizeof *t);
    fp4s_spec s2 = spec(FP4S_NVFP4, "te-4over6-2d");
    ck_assert_int_eq(fp4s_tscale_init(&s2, 6.0f, &ts), 0);
    uint8_t c2[256], sc2[16];
    fp4s_qout o2 = {.codes = c2, .ld_codes = 16, .scales = sc2, .ld_scales = 1};
    ck_assert_int_eq(fp4s_quantize(&s2, &ts, t, 16, 16, 16, 0, &o2, NULL), 0);
    for (int r = 0; r < 16; r++) ck_assert_msg(sc2[r] == 0x7C, "row %d scale %02x", r, sc2[r]);
    /* MAE and MSE disagree on [6, 2.25, 2.25, 3.625, 0...] (tensor amax 6, bound 256): map-to-6 (scale
     * 256) gives 6 2 2 4, |errors| .25 .25 .375 (sum .875, squares .265625); map-to-4 (scale 384, grid
     * 1.5 x E2M1) gives 6 2.25 2.25 3, errors 0 0 .625 (sum .625, squares .390625): MAE keeps map-to-4
     * (codes 6 3 3 4), MSE map-to-6 (codes 7 4 4 6) */
    float y[16] = {6, 2.25f, 2.25f, 3.625f};
    const uint8_t want_mae[4] = {6, 3, 3, 4}, want_mse[4] = {7, 4, 4, 6};
    for (int e = 0; e < 2; e++) {
        s.nv_4over6_err = e ? FP4S_4OVER6_MSE : FP4S_4OVER6_MAE;
        ck_assert_int_eq(fp4s_spec_check(&s), 0);
        ck_assert_int_eq(fp4s_tscale_init(&s, 6.0f, &ts), 0);
        ck_assert_int_eq(fp4s_quantize(&s, &ts, y, 1, 16, 16, 0, &o, NULL), 0);
        ck_assert_msg(scales[0] == (e ? 0x78 : 0x7C), "%s: scale %02x", e ? "mse" : "mae", scales[0]);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(codes[i] == (e ? want_mse : want_mae)[i], "%s: code %d = %u", e ? "mse" : "mae", i,
                          codes[i]);
    }
    /* the 448 bound: S_enc = 6 * 448 / 6 = 448, the map-to-4 scale 672 clamps to 448, both candidates are
     * map-to-6 (scale byte 0x7E): block 0 becomes 6 4 2 1 (codes 7 6 4 2; 0.75 ties to the even 1),
     * error energy .25 + .0625 + .0625; block 1 stays exact */
    s.nv_4over6_err = FP4S_4OVER6_MAE;
    s.nv_scale_bound = 448;
    ck_assert_int_eq(fp4s_spec_check(&s), 0);
    ck_assert_int_eq(fp4s_tscale_init(&s, 6.0f, &ts), 0);
    ck_assert(ts.s_enc == 448.0f);
    fp4s_qstats st3 = {0};
    ck_assert_int_eq(fp4s_quantize(&s, &ts, x, 1, 32, 32, 0, &o, &st3), 0);
    ck_assert_msg(scales[0] == 0x7E && scales[1] == 0x7E, "448: scales %02x %02x", scales[0], scales[1]);
    const uint8_t want448[4] = {7, 6, 4, 2};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(codes[i] == want448[i], "448: code %d = %u", i, codes[i]);
        ck_assert_msg(codes[16 + i] == want[4 + i], "448: block 1 code %d = %u", i, codes[16 + i]);
    }
    ck_assert_msg(fabs(st3.err2 - 0.375) < 1e-12, "448: err2 %g", st3.err2);
    s.nv_4over6_err = FP4S_4OVER6_MSE;
    s.nv_scale_bound = 300;
    ck_assert_int_eq(fp4s_spec_check(&s), FP4S_EINVAL);
    te.nv_scale_bound = 448;
    ck_assert_int_eq(fp4s_spec_check(&te), FP4S_EINVAL); /* the bound belongs to te-4over6 */
}
END_TEST

START_TEST(rht_hand_computed)
{
    /* R = diag(s) H16 / 4: a one-hot row e_k becomes s_k H[k][:] / 4; sixteen ones become
     * sum_i s_i H[i][j] / 4, which for j = 0 is (6 - 10) / 4 = -1 with TE's signs */
    fp4s_spec s = spec(FP4S_NVFP4, "te-rht");
    ck_assert(s.rht && s.rht_signs == 0xD7E8);
    float x[16], y[16];
    for (int k = 0; k < 16; k++) {
        memset(x, 0, sizeof x);
        x[k] = 1;
        ck_assert_int_eq(fp4s_rht_apply(&s, x, 1, 16, 16, y, 16), 0);
        for (int j = 0; j < 16; j++) {
            float sk = (0xD7E8 >> k) & 1 ? -1.0f : 1.0f;
            float h = (__builtin_popcount((unsigned)(k & j)) & 1) ? -1.0f : 1.0f;
            ck_assert_msg(y[j] == 0.25f * sk * h, "e_%d -> y[%d] = %g", k, j, y[j]);
        }
    }
    for (int k = 0; k < 16; k++) x[k] = 1;
    ck_assert_int_eq(fp4s_rht_apply(&s, x, 1, 16, 16, y, 16), 0);
    ck_assert_msg(y[0] == -1.0f, "y0 = %g", y[0]);
    /* the output is rounded to BF16: 1 + 2^-10 in one place gives a value off the BF16 grid */
    x[0] = 1.0f + 0x1p-10f;
    for (int k = 1; k < 16; k++) x[k] = 0;
    ck_assert_int_eq(fp4s_rht_apply(&s, x, 1, 16, 16, y, 16), 0);
    ck_assert(y[0] == 0.25f); /* 0.25 + 2^-12 rounds to 0.25 in BF16 */
    /* the quantizer with the RHT is the plain quantizer of the rotated rows, with their amax */
    const size_t rows = 24, cols = 64;
    float *xa = act(rows, cols, 41), *xr = malloc(rows * cols * sizeof *xr);
    float *a = malloc(rows * cols * sizeof *a), *b = malloc(rows * cols * sizeof *b);
    ck_assert_int_eq(fp4s_rht_apply(&s, xa, rows, cols, cols, xr, cols), 0);
    fp4s_spec te = spec(FP4S_NVFP4, "te");
    fp4s_tscale t1, t2;
    float am = fp4s_spec_amax(&s, xa, rows, cols, cols, NULL);
    ck_assert(am == fp4s_amax(xr, rows, cols, cols, NULL));
    ck_assert_int_eq(fp4s_tscale_init(&s, am, &t1), 0);
    ck_assert_int_eq(fp4s_tscale_init(&te, am, &t2), 0);
    ck_assert_int_eq(fp4s_quantize(&s, &t1, xa, rows, cols, cols, 0, &(fp4s_qout){.dequant = a, .ld_dequant = cols},
                                   NULL), 0);
    ck_assert_int_eq(fp4s_quantize(&te, &t2, xr, rows, cols, cols, 0, &(fp4s_qout){.dequant = b, .ld_dequant = cols},
                                   NULL), 0);
    ck_assert(!memcmp(a, b, rows * cols * sizeof *a));
    /* The item rht on both operands: (X R)(W R)^T = X W^T since R is orthogonal. By hand, X = G R^T and
     * W = V R^T with G = c [6 4 3 2 1.5 1 .5 0 -.5 -1 -1.5 -2 -3 -4 -6 0] and V = c [6 0 0 1 0 ... -2 (at 10) ...
     * .5 (at 15)], c = 7/8: both rotated operands lie on the NVFP4 grid of tensor amax 5.25 (S_enc = 2688 /
     * 5.25 = 512, block scale 448, dequantized values c x E2M1, all exact), so they quantize exactly and
     * Y = G . V = c^2 (36 + 2 + 3 + 0) = 31.390625 exactly; the plain W4A4 product of the same X and W is
     * not exact (X and W are off the grid). xg, wg below are G R^T, V R^T / c, scaled by c in the loop. */
    float xg[16] = {0, 0, 2, -2, 5, -2, -1.5f, 1.5f, -9, -2, -1.5f, -1.5f, -1, -1, 0, -2};
    float wg[16] = {1.375f, 0.625f, 1.625f, -2.375f, 1.125f, -0.875f, -1.875f, -2.125f,
                    -2.125f, -1.875f, -0.875f, 1.125f, -2.375f, 1.625f, -0.625f, -1.375f};
    for (int j = 0; j < 16; j++) {
        xg[j] *= 0.875f;
        wg[j] *= 0.875f;
    }
    fp4s_spec nv = spec(FP4S_NVFP4, "te"), nvw;
    fp4s_remedy_weight_spec(&nv, -1, &nvw);
    fp4s_remedy r = R("rht");
    /* the default GEMM is the fixed-order one, in every build (with or
     * without a BLAS) */
    float yr = 0, yn = 0;
    ck_assert_int_eq(fp4s_remedy_linear(&r, &nv, &nvw, xg, 1, 16, wg, 1, 16, 16, &yr, 1, NULL), 0);
    ck_assert_msg(yr == 31.390625f, "rht: y = %.9g, want 31.390625", yr);
    fp4s_remedy none = R("none");
    ck_assert_int_eq(fp4s_remedy_linear(&none, &nv, &nvw, xg, 1, 16, wg, 1, 16, 16, &yn, 1, NULL), 0);
    ck_assert_msg(fabsf(yn - 31.390625f) > 0.01f, "none: y = %.9g, also exact", yn);
    /* another sign vector is another rotation: G is not on the grid there */
    r = R("rht:0x0001");
    ck_assert_int_eq(fp4s_remedy_linear(&r, &nv, &nvw, xg, 1, 16, wg, 1, 16, 16, &yr, 1, NULL), 0);
    ck_assert_msg(yr != 31.390625f, "rht:0x0001: y = %.9g", yr);
    r = R("rht:none");
    ck_assert(r.rht && r.rht_signs == 0);
    r = R("rht:0x00ff");
    ck_assert(r.rht_signs == 0xff);
    expect_err("rht:0x1ffff", FP4S_ERANGE, "SIGNS must fit 16 bits");
    expect_err("rht:maybe", FP4S_EINVAL, "expected te, none or a 16-bit mask");
    free(xa);
    free(xr);
    free(a);
    free(b);
}
END_TEST

START_TEST(plan_hand_computed)
{
    /* site 0: (0, 10) (1, 4) (3, 3) and (2, 3.9) above its hull; site 1: (0, 8) (2, 2) (4, 1.5) */
#define P(e, c, k) {.err = (e), .cost = (c), .ok = (k)}
    fp4s_plan_item it[8] = {P(10, 0, true), P(4, 1, true), P(3, 3, true), P(3.9, 2, true),
                            P(8, 0, true),  P(2, 2, true), P(1.5, 4, true), P(0, 0, false)};
    size_t ch[2];
    double e, c;
    ck_assert_int_eq(fp4s_remedy_plan(it, 2, 4, 3, ch, &e, &c), 0);
    ck_assert(ch[0] == 1 && ch[1] == 1 && e == 6 && c == 3);
    ck_assert_int_eq(fp4s_remedy_plan(it, 2, 4, 2, ch, &e, &c), 0);
    ck_assert(ch[0] == 1 && ch[1] == 0 && e == 12 && c == 1); /* site 1's upgrade does not fit */
    ck_assert_int_eq(fp4s_remedy_plan(it, 2, 4, 100, ch, &e, &c), 0);
    ck_assert(ch[0] == 2 && ch[1] == 2 && e == 4.5 && c == 7);
    ck_assert_int_eq(fp4s_remedy_plan(it, 2, 4, 0, ch, &e, &c), 0);
    ck_assert(ch[0] == 0 && ch[1] == 0 && c == 0);
    /* a site whose cheapest candidate costs more than the budget */
    fp4s_plan_item dear[2] = {P(1, 5, true), P(0.5, 6, true)};
    ck_assert_int_eq(fp4s_remedy_plan(dear, 1, 2, 4, ch, &e, &c), FP4S_ERANGE);
    ck_assert_msg(strstr(fp4s_last_error(), "above the budget"), "%s", fp4s_last_error());
    fp4s_plan_item none[1] = {P(1, 0, false)};
#undef P
    ck_assert_int_eq(fp4s_remedy_plan(none, 1, 1, 4, ch, &e, &c), FP4S_EINVAL);
}
END_TEST

START_TEST(accelerators_and_time)
{
    const fp4s_accel *a;
    ck_assert_int_eq(fp4s_accel_get("b200", &a), 0);
    ck_assert(a->fp4_tflops == 9000 && a->fp8_tflops == 4500 && a->bf16_tflops == 2250 && a->bandwidth_tbps == 8);
    ck_assert_int_eq(fp4s_accel_get("tpu", &a), FP4S_EINVAL);
    ck_assert_msg(strstr(fp4s_last_error(), "known: b200, b300, gb300, h100, h200, mi355x"), "%s", fp4s_last_error());
    size_t n;
    const fp4s_accel *l = fp4s_accel_list(&n);
    ck_assert_uint_eq(n, 6);
    for (size_t i = 0; i < n; i++) ck_assert(l[i].source && *l[i].source && l[i].fp8_tflops > 0);
    /* a large square GEMM is compute bound: none runs at the FP4 rate, twice FP8's speed on B200 */
    fp4s_spec mx = spec(FP4S_MXFP4, "ocp");
    fp4s_remedy r = R("none");
    fp4s_remedy_cost c;
    fp4s_remedy_time t;
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, 8192, 8192, 8192, &c), 0);
    ck_assert_int_eq(fp4s_accel_get("b200", &a), 0);
    ck_assert_int_eq(fp4s_remedy_time_predict(&c, a, &t), 0);
    ck_assert(t.compute_seconds > t.memory_seconds);
    ck_assert_msg(fabs(t.seconds - 2.0 * 8192 * 8192 * 8192 / 9e15) < 1e-15, "%g", t.seconds);
    ck_assert(fabs(t.vs_fp8 - 0.5) < 1e-12 && fabs(t.vs_bf16 - 0.25) < 1e-12 && t.vs_base == 1);
    /* on H100 FP4 runs at the FP8 rate */
    ck_assert_int_eq(fp4s_accel_get("h100", &a), 0);
    ck_assert_int_eq(fp4s_remedy_time_predict(&c, a, &t), 0);
    ck_assert(t.fp4_emulated && fabs(t.vs_fp8 - 1) < 1e-12);
    /* a BF16 residual's FLOPs cost 4 FP4 FLOPs each on B200 */
    r = R("rac:0.125:bf16");
    ck_assert_int_eq(fp4s_remedy_cost_predict(&r, &mx, &mx, 8192, 8192, 8192, &c), 0);
    ck_assert_int_eq(fp4s_accel_get("b200", &a), 0);
    ck_assert_int_eq(fp4s_remedy_time_predict(&c, a, &t), 0);
    ck_assert(fabs(t.flops_fp4_equiv_extra - 4 * 2.0 * 8192 * 8192 * 1024) < 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remedy");
    const check_case cases[] = {
        CHECK_CASE(grammar_accepts_the_issue_list),
        CHECK_CASE(grammar_refuses_with_a_message),
        CHECK_CASE(is_plain_only_for_none),
        CHECK_CASE(check_against_the_quantizers),
        CHECK_CASE(cost_hand_computed),
        CHECK_CASE(plan_hand_computed),
        CHECK_CASE(capture_tokens_written_and_checked),
        CHECK_CASE(stochastic_rounding_hand_computed),
        CHECK_CASE(four_over_six_hand_computed),
        CHECK_CASE(rht_hand_computed),
        CHECK_CASE(accelerators_and_time),
#if FP4S_HAVE_BLAS
        CHECK_CASE(none_is_the_quantized_gemm),
        CHECK_CASE(identities_and_monotone_r),
        CHECK_CASE(mbs_max_hand_computed),
        CHECK_CASE(keep_hand_computed),
        CHECK_CASE(same_output_on_any_thread_count),
        CHECK_CASE(bad_input_refused),
        CHECK_CASE(compare_splits_the_mismatch_exactly),
        CHECK_CASE(compare_routed_flips_are_the_routing_component),
#endif
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    return check_run(s, CK_NORMAL);
}
