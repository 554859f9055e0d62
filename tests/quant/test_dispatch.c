/* Kernel selection: FP4S_FORCE_REF, fp4s_kernels_force_ref and
 * fp4s_kernels_select. Run as `test_dispatch` (normal environment) and
 * `test_dispatch env` (with FP4S_FORCE_REF=1, set by meson). */
#include "../check_main.h"
#include <stdlib.h>
#include <string.h>

#include <fp4scope/quant.h>

#include "fp4s_config.h"

static int env_mode;

START_TEST(environment_forces_reference)
{
    if (env_mode) {
        ck_assert_str_eq(fp4s_kernels_level(), "ref");
        /* the explicit switch overrides the environment */
        fp4s_kernels_force_ref(false);
        ck_assert_str_eq(fp4s_kernels_level(), fp4s_kernels_cpu_level());
    } else {
        const char *e = getenv("FP4S_FORCE_REF");
        if (!e || !*e || !strcmp(e, "0"))
            ck_assert_str_eq(fp4s_kernels_level(), fp4s_kernels_cpu_level());
    }
}
END_TEST

START_TEST(force_ref_and_select)
{
    fp4s_kernels_force_ref(true);
    ck_assert_str_eq(fp4s_kernels_level(), "ref");
    fp4s_kernels_force_ref(false);
    ck_assert_str_eq(fp4s_kernels_level(), fp4s_kernels_cpu_level());
    ck_assert_int_eq(fp4s_kernels_select("ref"), 0);
    ck_assert_str_eq(fp4s_kernels_level(), "ref");
    ck_assert_int_eq(fp4s_kernels_select("sse9"), FP4S_EINVAL);
    const char *cpu = fp4s_kernels_cpu_level();
    ck_assert(!strcmp(cpu, "ref") || !strcmp(cpu, "avx2") || !strcmp(cpu, "avx512"));
#if !FP4S_HAVE_SIMD
    /* -Dsimd=false builds no SIMD kernel: the reference runs whatever the CPU
     * (the quantizer's, the decomposition's and the mismatch statistics' level
     * all come from this one query, fp4s_cpu_flags) */
    ck_assert_str_eq(cpu, "ref");
#endif
    if (strcmp(cpu, "ref")) {
        ck_assert_int_eq(fp4s_kernels_select(cpu), 0);
        ck_assert_str_eq(fp4s_kernels_level(), cpu);
    } else {
        ck_assert_int_eq(fp4s_kernels_select("avx2"), FP4S_ENOTSUP);
    }
    fp4s_kernels_force_ref(false);
    ck_assert(strstr(fp4s_features(), "simd=") != NULL);
}
END_TEST

int main(int argc, char **argv)
{
    env_mode = argc > 1 && !strcmp(argv[1], "env");
    Suite *s = suite_create("dispatch");
    const check_case cases[] = {
        CHECK_CASE(environment_forces_reference),
        CHECK_CASE(force_ref_and_select),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return check_run(s, CK_ENV);
}
