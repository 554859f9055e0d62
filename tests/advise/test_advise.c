/* fp4scope/advise.h: the ranking by share, the dominant error, the advice. */
#include <fp4scope/advise.h>

#include "../check_main.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

START_TEST(rank_by_share_orders_and_shares)
{
    double e2[] = {1.0, 6.0, NAN, 3.0, 0.0};
    size_t order[5];
    double share[5];
    ck_assert_int_eq(fp4s_rank_by_share(e2, 5, order, share), 0);
    ck_assert_uint_eq(order[0], 1);
    ck_assert_uint_eq(order[1], 3);
    ck_assert_uint_eq(order[2], 0);
    ck_assert_uint_eq(order[3], 4); /* 0 before NaN */
    ck_assert_uint_eq(order[4], 2);
    ck_assert(fabs(share[1] - 0.6) < 1e-15 && fabs(share[0] - 0.1) < 1e-15 && share[2] == 0);
    double z[] = {0, 0};
    ck_assert_int_eq(fp4s_rank_by_share(z, 2, order, share), 0);
    ck_assert(isnan(share[0]) && order[0] == 0 && order[1] == 1);
    ck_assert_int_eq(fp4s_rank_by_share(NULL, 2, order, share), FP4S_EINVAL);
}
END_TEST

START_TEST(dominant_depends_on_the_trainer)
{
    /* weight 0.12 > activation 0.03 against BF16: weight; against wfq the weight is the trainer's */
    ck_assert_int_eq(fp4s_error_dominant(FP4S_TRAINER_BF16, 0.03, 0.12, 0.001), FP4S_SRC_WEIGHT);
    ck_assert_int_eq(fp4s_error_dominant(FP4S_TRAINER_WFQ, 0.03, 0.12, 0.001), FP4S_SRC_ACTIVATION);
    ck_assert_int_eq(fp4s_error_dominant(FP4S_TRAINER_BF16, 0.03, 0.02, 0.05), FP4S_SRC_INPUT);
    ck_assert_int_eq(fp4s_error_dominant(FP4S_TRAINER_W4A4, 0.5, 0.5, 0.0), FP4S_SRC_INPUT);
    ck_assert_int_eq(fp4s_error_dominant(FP4S_TRAINER_BF16, 0.03, 0.02, NAN), FP4S_SRC_ACTIVATION);
    ck_assert_str_eq(fp4s_error_source_name(FP4S_SRC_WEIGHT), "weight");
    ck_assert_ptr_nonnull(strstr(fp4s_error_source_advice(FP4S_SRC_WEIGHT), "activation remedies"));
    fp4s_trainer t;
    ck_assert_int_eq(fp4s_trainer_parse("w4a4qat", &t), 0);
    ck_assert_int_eq(t, FP4S_TRAINER_W4A4);
    ck_assert_int_eq(fp4s_trainer_parse("fp16", &t), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_trainer_name(FP4S_TRAINER_WFQ), "wfq");
}
END_TEST

static fp4s_advice_cand cand(const char *l, double err, double w4, double f8, int plain)
{
    fp4s_advice_cand c;
    memset(&c, 0, sizeof c);
    c.label = l;
    c.err = err;
    c.vs_w4a4 = w4;
    c.vs_fp8 = f8;
    c.vs_bf16 = f8 / 2;
    c.plain = plain;
    return c;
}

START_TEST(advise_cheapest_under_target_faster_than_fp8)
{
    fp4s_advice_cand c[] = {cand("none", 0.2, 1.0, 0.66, 1), cand("rac:0.25", 0.05, 1.25, 0.85, 0),
                            cand("rac:0.05", 0.06, 1.05, 0.70, 0), cand("mbs:128+of:0.5", 0.01, 4.0, 2.62, 0)};
    fp4s_advice a;
    ck_assert_int_eq(fp4s_advise(c, 4, 0.1, 0.02, &a), 0);
    ck_assert_int_eq(a.kind, FP4S_ADVICE_REMEDY);
    ck_assert_uint_eq(a.cand, 2); /* rac:0.05: under 0.1 and the least time */
    ck_assert_uint_eq(a.slower_than_fp8, 1);
    /* a target only the slow one reaches: FP8 instead, never the remedy slower than FP8 */
    ck_assert_int_eq(fp4s_advise(c, 4, 0.03, 0.02, &a), 0);
    ck_assert_int_eq(a.kind, FP4S_ADVICE_FP8);
    ck_assert(a.err == 0.02 && a.vs_fp8 == 1);
    ck_assert_uint_eq(a.slower_than_fp8, 1);
    ck_assert_uint_eq(a.cand, 1); /* the lowest error faster than FP8, for the record */
    /* FP8 not under the target either: BF16 */
    ck_assert_int_eq(fp4s_advise(c, 4, 0.005, 0.02, &a), 0);
    ck_assert_int_eq(a.kind, FP4S_ADVICE_BF16);
    /* naive already under the target */
    ck_assert_int_eq(fp4s_advise(c, 4, 0.25, 0.02, &a), 0);
    ck_assert_int_eq(a.kind, FP4S_ADVICE_KEEP);
    ck_assert_uint_eq(a.cand, 0);
    ck_assert_int_eq(fp4s_advise(c, 4, NAN, 0.02, &a), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_advice_kind_name(FP4S_ADVICE_FP8), "fp8");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("advise");
    const check_case cases[] = {
        CHECK_CASE(rank_by_share_orders_and_shares),
        CHECK_CASE(dominant_depends_on_the_trainer),
        CHECK_CASE(advise_cheapest_under_target_faster_than_fp8),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return s;
}

int main(void) { return check_run(suite(), CK_NORMAL); }
