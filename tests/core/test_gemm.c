/* The fixed-order GEMM (lib/core/gemm.h): every element equals the plain
 * loop of its definition (s = 0; s = s + a*b in k order; + beta C) bit for
 * bit, for both transposes, odd sizes, beta 0, 1 and 0.5, float and double;
 * and the bits do not change with the thread count, the tiles or the CPU
 * level (ref against the best this CPU has). The BLAS path's tiles make it
 * thread-count independent too. */
#include "../check_main.h"

#include <fp4scope/common.h>
#include <fp4scope/quant.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm.h"
#include "fp4s_config.h"

static uint64_t rs = 88172645463325252ull;
static double rnd(void) /* xorshift64, values with every exponent of [-8, 8] */
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    double u = (double)(rs >> 11) * 0x1p-53;
    return (u - 0.5) * ldexp(1.0, (int)(rs % 17) - 8);
}

#define REF(T, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)                                              \
    for (size_t i = 0; i < (M); i++)                                                                       \
        for (size_t j = 0; j < (N); j++) {                                                                 \
            T sum = 0;                                                                                    \
            for (size_t k = 0; k < (K); k++) {                                                             \
                T a = (ta) ? A[k * (lda) + i] : A[i * (lda) + k];                                          \
                T b = (tb) ? B[j * (ldb) + k] : B[k * (ldb) + j];                                          \
                T p = a * b;                                                                               \
                sum = sum + p;                                                                             \
            }                                                                                              \
            T *c = &C[i * (ldc) + j];                                                                      \
            if ((beta) == 0) *c = sum;                                                                     \
            else {                                                                                         \
                T bc = (beta) * *c;                                                                        \
                *c = sum + bc;                                                                             \
            }                                                                                              \
        }

static const size_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {9, 17, 33}, {130, 20, 64}, {37, 300, 19},
                                   {257, 261, 70}, {8, 16, 0}, {2, 33, 513}};

START_TEST(fixed_matches_its_definition)
{
    ck_assert_int_eq(fp4s_set_gemm(FP4S_GEMM_FIXED), 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int bi = 0; bi < 3; bi++) {
                bool ta = t & 1, tb = t & 2;
                size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                size_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                size_t na = (ta ? K : M) * lda + 1, nb = (tb ? N : K) * ldb + 1, nc = M * ldc;
                double beta = bi == 0 ? 0 : bi == 1 ? 1 : 0.5;
                float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *R = malloc(nc * 4);
                double *Ad = malloc(na * 8), *Bd = malloc(nb * 8), *Cd = malloc(nc * 8), *Rd = malloc(nc * 8);
                for (size_t i = 0; i < na; i++) Ad[i] = rnd(), A[i] = (float)Ad[i];
                for (size_t i = 0; i < nb; i++) Bd[i] = rnd(), B[i] = (float)Bd[i];
                for (size_t i = 0; i < nc; i++) Cd[i] = Rd[i] = rnd(), C[i] = R[i] = (float)Cd[i];
                REF(float, ta, tb, M, N, K, A, lda, B, ldb, (float)beta, R, ldc)
                REF(double, ta, tb, M, N, K, Ad, lda, Bd, ldb, beta, Rd, ldc)
                ck_assert_int_eq(fp4s_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, (float)beta, C, ldc, 1), 0);
                ck_assert_int_eq(fp4s_gemm_f64(ta, tb, M, N, K, Ad, lda, Bd, ldb, beta, Cd, ldc, 1), 0);
                ck_assert_msg(!memcmp(C, R, nc * 4), "float %zux%zux%zu ta %d tb %d beta %g differs", M, N, K,
                              ta, tb, beta);
                ck_assert_msg(!memcmp(Cd, Rd, nc * 8), "double %zux%zux%zu ta %d tb %d beta %g differs", M, N,
                              K, ta, tb, beta);
                free(A), free(B), free(C), free(R), free(Ad), free(Bd), free(Cd), free(Rd);
            }
}
END_TEST

/* One product on 1 and 3 threads, on the reference kernels and the best
 * level of this CPU: the same bits (the path FP4S_GEMM selects, so that the
 * BLAS path's fixed tiles are checked too when the test runs with
 * FP4S_GEMM=blas). */
static void same_bits_everywhere(fp4s_gemm_path path)
{
    int rc = fp4s_set_gemm(path);
#if FP4S_HAVE_BLAS
    ck_assert_msg(rc == 0, "%s: %s", fp4s_gemm_name(path), fp4s_last_error());
#endif
    if (rc) return; /* no BLAS in this build */
    size_t M = 700, N = 530, K = 300;
    float *A = malloc(M * K * 4), *B = malloc(N * K * 4), *C0 = malloc(M * N * 4), *C1 = malloc(M * N * 4);
    for (size_t i = 0; i < M * K; i++) A[i] = (float)rnd();
    for (size_t i = 0; i < N * K; i++) B[i] = (float)rnd();
    fp4s_set_threads(1);
    ck_assert_int_eq(fp4s_gemm_f32(false, true, M, N, K, A, K, B, K, 0.0f, C0, N, 0), 0);
    int levels = path == FP4S_GEMM_FIXED ? 2 : 1;
    for (int lv = 0; lv < levels; lv++) {
        if (lv) fp4s_kernels_force_ref(true);
        for (int t = 1; t <= 3; t++) {
            fp4s_set_threads(t);
            memset(C1, 0xff, M * N * 4);
            ck_assert_int_eq(fp4s_gemm_f32(false, true, M, N, K, A, K, B, K, 0.0f, C1, N, 0), 0);
            ck_assert_msg(!memcmp(C0, C1, M * N * 4), "%s: %d threads%s differ from 1", fp4s_gemm_name(path), t,
                          lv ? " on the reference kernels" : "");
        }
    }
    fp4s_kernels_force_ref(false);
    fp4s_set_threads(0);
    fp4s_set_gemm(FP4S_GEMM_FIXED);
    free(A), free(B), free(C0), free(C1);
}

START_TEST(fixed_same_bits_for_threads_and_levels) { same_bits_everywhere(FP4S_GEMM_FIXED); }
END_TEST
START_TEST(blas_same_bits_for_threads) { same_bits_everywhere(FP4S_GEMM_BLAS); }
END_TEST

START_TEST(path_names)
{
    fp4s_gemm_path p;
    ck_assert_int_eq(fp4s_gemm_parse("blas", &p), 0);
    ck_assert_int_eq(p, FP4S_GEMM_BLAS);
    ck_assert_int_eq(fp4s_gemm_parse("fixed", &p), 0);
    ck_assert_int_eq(p, FP4S_GEMM_FIXED);
    ck_assert_int_eq(fp4s_gemm_parse("mkl", &p), FP4S_EINVAL);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "mkl"));
    ck_assert_int_eq(fp4s_set_gemm((fp4s_gemm_path)7), FP4S_EINVAL);
    ck_assert_str_eq(fp4s_gemm_name(FP4S_GEMM_BLAS), "blas");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm");
    const check_case cases[] = {CHECK_CASE(fixed_matches_its_definition),
                                       CHECK_CASE(fixed_same_bits_for_threads_and_levels),
                                       CHECK_CASE(blas_same_bits_for_threads), CHECK_CASE(path_names)};
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return check_run(s, CK_NORMAL);
}
