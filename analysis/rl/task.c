/* The testbed's tasks with a verifiable reward. Vocabulary (16): digits 0-9,
 * BOS 10, SEP 11, EOS 12, PAD 13, PLUS 14 (15 unused).
 *
 *   sort  prompt BOS + 6 to 10 random digits padded with PAD to 10 + SEP (12
 *         tokens); response the digits in ascending order + EOS (at most 11).
 *   add   prompt BOS + a (1-5 digits, least significant first, PAD to 5) +
 *         PLUS + b (likewise) + SEP (13 tokens); response the digits of a + b,
 *         least significant first, + EOS (at most 7).
 * The reward is 1 for a response equal to the correct one up to and including
 * EOS, else 0. */
#include "rl_internal.h"

#include <string.h>

void rl_task_init(rl_task *t, fp4s_rl_task kind)
{
    t->kind = kind;
    if (kind == FP4S_RL_TASK_ADD) {
        t->prompt_len = 13;
        t->max_resp = 7;
    } else {
        t->prompt_len = 12;
        t->max_resp = 11;
    }
}

static uint64_t draw(uint64_t seed, uint64_t stream, uint64_t index, uint64_t k, uint64_t n)
{
    return rl_hash(seed, stream, index, k) % n;
}

void rl_task_prompt(const rl_task *t, uint64_t seed, uint64_t stream, uint64_t index, int32_t *p)
{
    p[0] = RL_TOK_BOS;
    if (t->kind == FP4S_RL_TASK_ADD) {
        for (int op = 0; op < 2; op++) {
            int nd = 1 + (int)draw(seed, stream, index, 100 + (uint64_t)op, 5);
            int32_t *d = p + 1 + op * 6;
            for (int i = 0; i < 5; i++) {
                /* the most significant digit is not 0 (except for a one-digit number) */
                int32_t v = (int32_t)draw(seed, stream, index, (uint64_t)(op * 8 + i), 10);
                if (i == nd - 1 && nd > 1 && v == 0) v = 1 + (int32_t)draw(seed, stream, index, 200, 9);
                d[i] = i < nd ? v : RL_TOK_PAD;
            }
        }
        p[6] = RL_TOK_PLUS;
        p[12] = RL_TOK_SEP;
        return;
    }
    int n = 6 + (int)draw(seed, stream, index, 99, 5);
    for (int i = 0; i < 10; i++) p[1 + i] = i < n ? (int32_t)draw(seed, stream, index, (uint64_t)i, 10) : RL_TOK_PAD;
    p[11] = RL_TOK_SEP;
}

int rl_task_answer(const rl_task *t, const int32_t *p, int32_t *ans)
{
    int n = 0;
    if (t->kind == FP4S_RL_TASK_ADD) {
        int carry = 0;
        for (int i = 0; i < 6; i++) {
            int a = i < 5 && p[1 + i] < 10 ? p[1 + i] : 0, b = i < 5 && p[7 + i] < 10 ? p[7 + i] : 0;
            int s = a + b + carry;
            ans[i] = s % 10;
            carry = s / 10;
        }
        n = 6;
        while (n > 1 && ans[n - 1] == 0) n--;
        ans[n++] = RL_TOK_EOS;
        return n;
    }
    int cnt[10] = {0};
    for (int i = 0; i < 10; i++)
        if (p[1 + i] < 10) cnt[p[1 + i]]++;
    for (int d = 0; d < 10; d++)
        while (cnt[d]--) ans[n++] = d;
    ans[n++] = RL_TOK_EOS;
    return n;
}

double rl_task_reward(const rl_task *t, const int32_t *prompt, const int32_t *resp, int len)
{
    int32_t ans[RL_MAX_T];
    int n = rl_task_answer(t, prompt, ans);
    return n == len && memcmp(ans, resp, (size_t)n * sizeof *ans) == 0 ? 1.0 : 0.0;
}
