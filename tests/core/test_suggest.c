/* fp4s_suggest: "did you mean" over names (the one ranking every tool's
 * messages use). */
#include <fp4scope/suggest.h>

#include "../check_main.h"

#include <string.h>

static size_t sug(const char *word, const char *const *names, size_t n, size_t *out, size_t max)
{
    return fp4s_suggest(word, names, n, out, max);
}

START_TEST(suggest_typos_ranked_by_distance)
{
    const char *names[] = {"ocp", "ceil", "torchao", "vllm", "flashinfer", "te", "modelopt"};
    size_t out[3];
    ck_assert_uint_eq(sug("ocpp", names, 7, out, 3), 1);       /* one insertion */
    ck_assert_str_eq(names[out[0]], "ocp");
    ck_assert_uint_eq(sug("torcaho", names, 7, out, 3), 1);    /* two neighbours swapped: distance 1 */
    ck_assert_str_eq(names[out[0]], "torchao");
    ck_assert_uint_eq(sug("FLASHINFER", names, 7, out, 3), 1); /* case does not count */
    ck_assert_str_eq(names[out[0]], "flashinfer");
    ck_assert_uint_eq(sug("zzzzzz", names, 7, out, 3), 0);     /* nothing close */
    ck_assert_uint_eq(sug("ocp", names, 7, out, 3), 0);        /* the name itself is not offered */
}
END_TEST

START_TEST(suggest_nearest_first_ties_in_order_and_max)
{
    const char *names[] = {"k2", "k1", "k3", "mean_abs", "k3_reverse"};
    size_t out[3];
    size_t k = sug("k4", names, 5, out, 3); /* k2, k1, k3 all at distance 1: in the names' order */
    ck_assert_uint_eq(k, 3);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 2);
    ck_assert_uint_eq(sug("k4", names, 5, out, 2), 2);
    ck_assert_uint_eq(sug("k33", names, 5, out, 1), 1);
    ck_assert_str_eq(names[out[0]], "k3");
    ck_assert_uint_eq(sug("k4", names, 5, out, 0), 0);
}
END_TEST

START_TEST(suggest_part_after_separator)
{
    const char *names[] = {"layers.0.self_attn.qkv_proj", "layers.0.mlp.down_proj", "layers.1.mlp.up_proj",
                           "rollout_corr/k3_kl", NULL};
    size_t out[3];
    ck_assert_uint_eq(sug("down_proj", names, 5, out, 3), 1);
    ck_assert_uint_eq(out[0], 1);
    ck_assert_uint_eq(sug("qkv", names, 5, out, 3), 1);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(sug("k3_kl", names, 5, out, 3), 1);       /* after the '/' */
    ck_assert_uint_eq(out[0], 3);
    ck_assert_uint_eq(sug("elf", names, 5, out, 3), 0);         /* inside a word, not after a separator */
    ck_assert_uint_eq(sug("layers.0.self_attn.qkv_prj", names, 5, out, 3), 1); /* long names: a third */
    ck_assert_uint_eq(out[0], 0);
}
END_TEST

START_TEST(suggest_near_miss_before_part)
{
    /* "mlp" is a part of both, and one edit from "mlpx": the near miss first */
    const char *names[] = {"layers.0.mlp.up_proj", "mlpx"};
    size_t out[3];
    ck_assert_uint_eq(sug("mlp", names, 2, out, 3), 2);
    ck_assert_uint_eq(out[0], 1);
    ck_assert_uint_eq(out[1], 0);
    ck_assert_uint_eq(fp4s_suggest(NULL, names, 2, out, 3), 0);
    ck_assert_uint_eq(fp4s_suggest("x", NULL, 2, out, 3), 0);
}
END_TEST

START_TEST(suggest_long_names_bounded)
{
    /* names longer than the comparison window and many of them: no overflow, still found */
    static char longname[600];
    memset(longname, 'a', sizeof longname - 1);
    const char *names[] = {longname, "abc"};
    size_t out[2];
    ck_assert_uint_eq(sug("abd", names, 2, out, 2), 1);
    ck_assert_str_eq(names[out[0]], "abc");
    ck_assert_uint_le(sug(longname, names, 2, out, 2), 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("suggest");
    const check_case cases[] = {
        CHECK_CASE(suggest_typos_ranked_by_distance),
        CHECK_CASE(suggest_nearest_first_ties_in_order_and_max),
        CHECK_CASE(suggest_part_after_separator),
        CHECK_CASE(suggest_near_miss_before_part),
        CHECK_CASE(suggest_long_names_bounded),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return s;
}

int main(void) { return check_run(suite(), CK_NORMAL); }
