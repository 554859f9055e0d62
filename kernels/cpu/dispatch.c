/* Run-time kernel selection (dav1d style): the scalar reference always, the
 * AVX2 / AVX-512 tables when they are built (FP4S_HAVE_K_AVX2/AVX512 come from
 * kernels/cpu/meson.build) and the CPU has the instructions.
 *
 * Order of precedence: fp4s_kernels_select(level) > fp4s_kernels_force_ref(true)
 * > environment FP4S_FORCE_REF=1 (read once, at the first call) > the best level
 * the CPU supports. */
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"

static const fp4s_kernel_table *best_table(void)
{
#if defined(FP4S_HAVE_K_AVX512) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &fp4s_kernels_avx512;
#endif
#if defined(FP4S_HAVE_K_AVX2) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &fp4s_kernels_avx2;
#endif
    return &fp4s_kernels_ref;
}

/* 0: not decided yet; the pointers below are written with relaxed atomics so
 * concurrent first calls are harmless (they compute the same value). */
static const fp4s_kernel_table *selected;   /* set by fp4s_kernels_select */
static int forced = -1;                     /* -1: env decides, 0/1 by force_ref */
static int env_force = -1;

static bool env_forces_ref(void)
{
    int e = __atomic_load_n(&env_force, __ATOMIC_RELAXED);
    if (e < 0) {
        const char *v = getenv("FP4S_FORCE_REF");
        e = (v && *v && strcmp(v, "0") != 0) ? 1 : 0;
        __atomic_store_n(&env_force, e, __ATOMIC_RELAXED);
    }
    return e == 1;
}

const fp4s_kernel_table *fp4s_kernels_active(void)
{
    const fp4s_kernel_table *t = __atomic_load_n(&selected, __ATOMIC_RELAXED);
    if (t) return t;
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    if (f == 1 || (f < 0 && env_forces_ref())) return &fp4s_kernels_ref;
    return best_table();
}

void fp4s_kernels_force_ref(bool force)
{
    __atomic_store_n(&selected, (const fp4s_kernel_table *)NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&forced, force ? 1 : 0, __ATOMIC_RELAXED);
}

const char *fp4s_kernels_level(void) { return fp4s_kernels_active()->name; }

const char *fp4s_kernels_cpu_level(void) { return best_table()->name; }

int fp4s_kernels_select(const char *level)
{
    if (!level) return fp4s_error_set(FP4S_EINVAL, "kernel level: missing name");
    if (!strcmp(level, "ref")) {
        __atomic_store_n(&selected, &fp4s_kernels_ref, __ATOMIC_RELAXED);
        return 0;
    }
    if (strcmp(level, "avx2") && strcmp(level, "avx512"))
        return fp4s_error_set(FP4S_EINVAL, "kernel level '%s': expected ref, avx2 or avx512", level);
#if defined(__x86_64__) || defined(__i386__)
#ifdef FP4S_HAVE_K_AVX2
    if (!strcmp(level, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        __atomic_store_n(&selected, &fp4s_kernels_avx2, __ATOMIC_RELAXED);
        return 0;
    }
#endif
#ifdef FP4S_HAVE_K_AVX512
    if (!strcmp(level, "avx512") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma")) {
        __atomic_store_n(&selected, &fp4s_kernels_avx512, __ATOMIC_RELAXED);
        return 0;
    }
#endif
#endif
    return fp4s_error_set(FP4S_ENOTSUP, "kernel level '%s': not built or not supported by this CPU",
                          level);
}
