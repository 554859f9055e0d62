/* The token loops of the mismatch accumulator (mm_internal.h's mm_kernels),
 * compiled once per CPU level by analysis/mismatch/meson.build: the baseline
 * (MM_SUFFIX _c, the level "ref"), -mavx2 (_avx2) and -mavx512f (_avx512);
 * acc.c picks one through fp4s_cpu_flags().
 *
 * The sums are the rows of MM_TOKEN_SUMS (mm_metrics.h), in GCC vector
 * extensions of 8 doubles on every level, so the order is fixed: token i
 * goes to lane i mod 8 for i < 8 floor(n/8), the last n mod 8 tokens to lane
 * 0 in order, and the lanes are summed from lane 0 up. Every level does the
 * same IEEE operations (no FMA contraction: -ffp-contract=off) and gives the
 * same bits; this order is also the one GCC's OpenMP-simd reduction on
 * AVX-512 used before the table, so outputs did not change. */
#include <math.h>
#include <string.h>

#include "mm_internal.h"

#ifndef MM_SUFFIX
#define MM_SUFFIX _c
#endif
#define MM_CAT2(a, b) a##b
#define MM_CAT(a, b) MM_CAT2(a, b)
#define MM_FN(f) MM_CAT(f, MM_SUFFIX)

typedef double v8d __attribute__((vector_size(64)));
typedef long long v8l __attribute__((vector_size(64)));
typedef unsigned long long v8u __attribute__((vector_size(64)));

MM_VEXP_DEFINE(vexp8, v8d, v8u)

#define vsel(m, a, b) ((v8d)(((v8l)(a) & (m)) | ((v8l)(b) & ~(m))))

/* A row of MM_TOKEN_SUMS on the lanes in m (all of them, or lane 0 for a
 * tail token): a sum adds +0 on the other lanes (a lane is never -0, so that
 * is exact), a max or min keeps them. */
#define GT(a, b) ((v8d)((v8l)one & ((a) > (b))))
#define LT(a, b) ((v8d)((v8l)one & ((a) < (b))))
#define LANE_SUM(L, x, m) ((L) + (v8d)((v8l)(x) & (m)))
#define LANE_MAX(L, x, m) vsel((m) & ((x) > (L)), (x), (L))
#define LANE_MIN(L, x, m) vsel((m) & ((x) < (L)), (x), (L))
#define LANE(id, op, term) acc[id] = LANE_##op(acc[id], (term), m);

static inline __attribute__((always_inline)) void token_step(v8d *restrict acc, v8d lt, v8d lr, v8l m,
                                                              const mm_tok_opts *o, v8d *ab_out)
{
    const v8d zero = {0}, one = zero + 1.0;
    const v8d C = zero + o->C, Cl = zero + o->Cl, B = zero + o->B;
    const v8l absm = (v8l){0} + 0x7fffffffffffffffLL;
    const v8d rho = lt - lr, ab = (v8d)((v8l)rho & absm);
    const v8d e = vexp8(rho), ie = one / e;
    const v8d w = vsel(rho > B, zero + o->wB, vsel(rho < -B, zero + o->wmB, e));
    const v8d wc = vsel(w < Cl, Cl, vsel(w > C, C, w));
    const v8d pt = vexp8(lt), pr = vexp8(lr), d = (v8d)((v8l)(pt - pr) & absm);
    MM_TOKEN_SUMS(LANE)
    *ab_out = ab;
}

static const double init_of[MM_NT] = {
#define INIT(id, op, term) [id] = MM_INIT_##op,
    MM_TOKEN_SUMS(INIT)
#undef INIT
};

void MM_FN(mm_tokens)(const double *restrict lt, const double *restrict lr, size_t n, const mm_tok_opts *o,
                      double *restrict absv, double *restrict out)
{
    v8d acc[MM_NT];
    for (int k = 0; k < MM_NT; k++) acc[k] = (v8d){0} + init_of[k];
    const v8l all = (v8l){0} - 1, lane0 = {-1};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8d a, b, ab;
        memcpy(&a, lt + i, sizeof a);
        memcpy(&b, lr + i, sizeof b);
        token_step(acc, a, b, all, o, &ab);
        memcpy(absv + i, &ab, sizeof ab);
    }
    for (; i < n; i++) {
        v8d a = {lt[i]}, b = {lr[i]}, ab;
        token_step(acc, a, b, lane0, o, &ab);
        absv[i] = ab[0];
    }
    double l[8];
#define REDUCE(id, op, term)                                  \
    memcpy(l, &acc[id], sizeof l);                            \
    out[id] = init_of[id];                                    \
    for (int j = 0; j < 8; j++) out[id] = MM_OP_##op(out[id], l[j]);
    MM_TOKEN_SUMS(REDUCE)
#undef REDUCE
}

/* The token checks of a block, 8 tokens a vector: whether any token is
 * (counted and) with a finite positive log-prob (POSITIVE), or not (counted,
 * finite and inside +-700: |x| < 700 also rejects NaN) (IRREGULAR). A tail
 * shorter than 8 is padded with a counted regular token (-1, -1). */
typedef unsigned char v8u8 __attribute__((vector_size(8)));
enum { POSITIVE, IRREGULAR };

static inline __attribute__((always_inline)) v8l token_flags(v8d a, v8d b, v8u8 m8, const int check)
{
    const v8d zero = {0}, inf = zero + INFINITY, lim = zero + 700.0;
    const v8l absm = (v8l){0} + 0x7fffffffffffffffLL;
    const v8l counted = __builtin_convertvector(m8, v8l) != 0;
    if (check == POSITIVE) return counted & (((a > zero) & (a < inf)) | ((b > zero) & (b < inf)));
    return ~(counted & ((v8d)((v8l)a & absm) < lim) & ((v8d)((v8l)b & absm) < lim));
}

static inline __attribute__((always_inline)) int any_token(const double *restrict t, const double *restrict r,
                                                           const uint8_t *restrict mask, size_t n, const int check)
{
    const v8u8 all = {1, 1, 1, 1, 1, 1, 1, 1};
    v8l any = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8d a, b;
        v8u8 m8 = all;
        memcpy(&a, t + i, sizeof a);
        memcpy(&b, r + i, sizeof b);
        if (mask) memcpy(&m8, mask + i, sizeof m8);
        any |= token_flags(a, b, m8, check);
    }
    if (i < n) {
        v8d a = (v8d){0} - 1.0, b = a;
        v8u8 m8 = all;
        memcpy(&a, t + i, (n - i) * sizeof(double));
        memcpy(&b, r + i, (n - i) * sizeof(double));
        if (mask) memcpy(&m8, mask + i, n - i);
        any |= token_flags(a, b, m8, check);
    }
    for (int j = 0; j < 8; j++)
        if (any[j]) return 1;
    return 0;
}

int MM_FN(mm_any_positive)(const double *restrict t, const double *restrict r, const uint8_t *restrict mask,
                           size_t n)
{
    return any_token(t, r, mask, n, POSITIVE);
}

int MM_FN(mm_irregular)(const double *restrict t, const double *restrict r, const uint8_t *restrict mask,
                        size_t n)
{
    return any_token(t, r, mask, n, IRREGULAR);
}
