/* Which GPU a rank takes (fp4scope-mpi(7), GPUs), without a GPU: the policy
 * of FP4S_GPU and fp4s_cuda_bind as fp4s_cuda_bind_ordinal applies it (one
 * GPU per local rank by default, a fixed device, a list), its errors, and the
 * launchers' local-rank variables as fp4s_cuda_local_rank_env reads them. */
#include <fp4scope/fp4scope.h>

#include "../check_main.h"
#include <stdlib.h>
#include <string.h>

static int ord(const char *how, int rank, int ndev)
{
    int o = -99;
    ck_assert_msg(fp4s_cuda_bind_ordinal(how, rank, ndev, &o) == 0, "%s rank %d ndev %d: %s", how ? how : "NULL",
                  rank, ndev, fp4s_last_error());
    return o;
}

START_TEST(bind_local)
{
    /* the default: local rank r on device r mod ndev */
    for (int ndev = 1; ndev <= 8; ndev++)
        for (int r = 0; r < 20; r++) {
            ck_assert_int_eq(ord(NULL, r, ndev), r % ndev);
            ck_assert_int_eq(ord("", r, ndev), r % ndev);
            ck_assert_int_eq(ord("local", r, ndev), r % ndev);
        }
    /* a negative (unknown) local rank counts as 0 */
    ck_assert_int_eq(ord("local", -1, 4), 0);
    int o = 5;
    ck_assert_int_eq(fp4s_cuda_bind_ordinal("local", 3, 0, &o), FP4S_ERANGE);
    ck_assert_int_eq(o, 5);
    ck_assert_int_eq(fp4s_cuda_bind_ordinal(NULL, 0, 4, NULL), FP4S_EINVAL);
}
END_TEST

START_TEST(bind_fixed_and_list)
{
    ck_assert_int_eq(ord("current", 7, 8), -1);
    for (int r = 0; r < 9; r++) ck_assert_int_eq(ord("3", r, 4), 3);
    /* a list: local rank i takes entry i mod length */
    const int want[] = {0, 2, 0, 2, 0};
    for (int r = 0; r < 5; r++) ck_assert_int_eq(ord("0,2", r, 4), want[r]);
    ck_assert_int_eq(ord("7,6,5", 4, 8), 6);
    ck_assert_int_eq(ord("10", 0, 11), 10);
    /* a device beyond those visible */
    int o = -5;
    ck_assert_int_eq(fp4s_cuda_bind_ordinal("3", 0, 2, &o), FP4S_ERANGE);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "device 3"));
    ck_assert_int_eq(fp4s_cuda_bind_ordinal("0,5", 1, 4, &o), FP4S_ERANGE);
    ck_assert_int_eq(fp4s_cuda_bind_ordinal("0,5", 2, 4, &o), 0); /* rank 2 takes entry 0 */
    ck_assert_int_eq(o, 0);
}
END_TEST

START_TEST(bind_malformed)
{
    const char *bad[] = {"a", "1,", ",1", "1;2", "-1", "1,,2", " 1", "1 ", "gpu0", "locale", "0x1",
                         "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int o = -7;
        ck_assert_msg(fp4s_cuda_bind_ordinal(bad[i], 0, 8, &o) == FP4S_EINVAL, "'%s' accepted", bad[i]);
        ck_assert_int_eq(o, -7);
        ck_assert_msg(strstr(fp4s_last_error(), bad[i]) != NULL, "'%s': message '%s' does not name it", bad[i],
                      fp4s_last_error());
        /* fp4s_cuda_bind refuses it at once, touching no GPU */
        ck_assert_int_eq(fp4s_cuda_bind(bad[i], 0), FP4S_EINVAL);
    }
    ck_assert_int_eq(fp4s_cuda_bind("0,1", 1), 0);
    ck_assert_int_eq(fp4s_cuda_bind(NULL, -1), 0);
}
END_TEST

static void clear_env(void)
{
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("MPI_LOCALRANKID");
}

START_TEST(local_rank_env)
{
    clear_env();
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), -1);
    setenv("SLURM_LOCALID", "2", 1);
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), 2);
    /* Open MPI's mpirun first: under srun --mpi=pmix both can be set */
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), 5);
    clear_env();
    setenv("MPI_LOCALRANKID", "3", 1);
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), 3);
    /* unreadable values are passed over */
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
    setenv("SLURM_LOCALID", "-4", 1);
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), 3);
    setenv("MPI_LOCALRANKID", "", 1);
    ck_assert_int_eq(fp4s_cuda_local_rank_env(), -1);
    clear_env();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_bind");
    const check_case cases[] = {
        CHECK_CASE(bind_local),
        CHECK_CASE(bind_fixed_and_list),
        CHECK_CASE(bind_malformed),
        CHECK_CASE(local_rank_env),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 30);
    return check_run(s, CK_NORMAL);
}
