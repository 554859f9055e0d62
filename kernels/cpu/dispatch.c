/* The one CPU dispatch of the library (dav1d style): the CPU's features are
 * read once, masked by what this build has and by the user's switch, and
 * every SIMD path takes its level from fp4s_cpu_flags(): the quantizer
 * tables (quant_ref.c, quant_avx2.c, quant_avx512.c), the decomposition
 * kernels (decomp_kernels.h) and the mismatch accumulator's token loop
 * (analysis/mismatch/mm_token.c). A path that has no kernel at a level keeps
 * the one below it; the portable C of every path is the level "ref".
 *
 * FP4S_HAVE_K_AVX2 / FP4S_HAVE_K_AVX512 come from kernels/cpu/meson.build
 * (-Dsimd=false builds neither, and the flags are then always 0).
 *
 * Order of precedence: fp4s_kernels_select(level) and
 * fp4s_kernels_force_ref(), whichever came last > environment
 * FP4S_FORCE_REF=1 (read once, at the first call) > the best level the CPU
 * supports. */
#include <stdlib.h>
#include <string.h>

#include "cpu/decomp_kernels.h"
#include "cpu/kernels.h"

#define ALL_FLAGS (FP4S_CPU_AVX2 | FP4S_CPU_AVX512)

/* What this build and CPU have. */
static unsigned cpu_flags_uncached(void)
{
    unsigned f = 0;
#if (defined(__x86_64__) || defined(__i386__)) && defined(FP4S_HAVE_K_AVX2)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= FP4S_CPU_AVX2;
#endif
#if (defined(__x86_64__) || defined(__i386__)) && defined(FP4S_HAVE_K_AVX512)
    if ((f & FP4S_CPU_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        f |= FP4S_CPU_AVX512;
#endif
    return f;
}

/* Set once, read with relaxed atomics: concurrent first calls compute the
 * same values, so a race is harmless. */
static int cpu_cached = -1;  /* -1: not read yet, else the flags */
static int cap = -1;         /* -1: the environment decides, else the mask set by select / force_ref */
static int env_force = -1;   /* -1: FP4S_FORCE_REF not read yet */

static unsigned cpu_flags(void)
{
    int f = __atomic_load_n(&cpu_cached, __ATOMIC_RELAXED);
    if (f < 0) {
        f = (int)cpu_flags_uncached();
        __atomic_store_n(&cpu_cached, f, __ATOMIC_RELAXED);
    }
    return (unsigned)f;
}

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

unsigned fp4s_cpu_flags(void)
{
    int c = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    if (c >= 0) return cpu_flags() & (unsigned)c;
    return env_forces_ref() ? 0u : cpu_flags();
}

static const fp4s_kernel_table *table_for(unsigned flags)
{
#ifdef FP4S_HAVE_K_AVX512
    if (flags & FP4S_CPU_AVX512) return &fp4s_kernels_avx512;
#endif
#ifdef FP4S_HAVE_K_AVX2
    if (flags & FP4S_CPU_AVX2) return &fp4s_kernels_avx2;
#endif
    (void)flags;
    return &fp4s_kernels_ref;
}

const fp4s_kernel_table *fp4s_kernels_active(void) { return table_for(fp4s_cpu_flags()); }

void fp4s_kernels_force_ref(bool force) { __atomic_store_n(&cap, force ? 0 : ALL_FLAGS, __ATOMIC_RELAXED); }

const char *fp4s_kernels_level(void) { return fp4s_kernels_active()->name; }

const char *fp4s_kernels_cpu_level(void) { return table_for(cpu_flags())->name; }

int fp4s_kernels_select(const char *level)
{
    if (!level) return fp4s_error_set(FP4S_EINVAL, "kernel level: missing name");
    unsigned want;
    if (!strcmp(level, "ref")) want = 0;
    else if (!strcmp(level, "avx2")) want = FP4S_CPU_AVX2;
    else if (!strcmp(level, "avx512")) want = FP4S_CPU_AVX2 | FP4S_CPU_AVX512;
    else return fp4s_error_set(FP4S_EINVAL, "kernel level '%s': expected ref, avx2 or avx512", level);
    if ((cpu_flags() & want) != want)
        return fp4s_error_set(FP4S_ENOTSUP, "kernel level '%s': not built or not supported by this CPU", level);
    __atomic_store_n(&cap, (int)want, __ATOMIC_RELAXED);
    return 0;
}

/* The decomposition kernels: the portable loop first, then what each level
 * the flags allow overrides. */
void fp4s_decomp_kernels_init(fp4s_decomp_kernels *k)
{
    const unsigned f = fp4s_cpu_flags();
    (void)f;
    k->block = fp4s_dk_block_c;
    k->row = NULL;
#ifdef FP4S_HAVE_K_AVX2
    if (!(f & FP4S_CPU_AVX2)) return;
    k->block = fp4s_dk_block_avx2;
#endif
#ifdef FP4S_HAVE_K_AVX512
    if (!(f & FP4S_CPU_AVX512)) return;
    k->block = fp4s_dk_block_avx512;
    k->row = fp4s_dk_row_avx512;
#endif
}
