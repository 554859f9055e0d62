/* The CPU BLAS (cblas) of the remedies' GEMMs and the RL testbed, opened on
 * first use rather than linked: OpenBLAS starts one thread per CPU when it is
 * loaded, and each spins for a while, which every program linking libfp4scope
 * paid at start, GEMM or not. */
#ifndef FP4S_CORE_BLAS_H
#define FP4S_CORE_BLAS_H

#include "fp4s_config.h"

#if FP4S_HAVE_BLAS
#include <cblas.h>

typedef struct fp4s_blas_fns {
    __typeof__(&cblas_sgemm) sgemm;
    __typeof__(&cblas_dgemm) dgemm;
    /* openblas_set_num_threads; NULL for a BLAS other than OpenBLAS */
    void (*set_num_threads)(int);
} fp4s_blas_fns;
#else
typedef struct fp4s_blas_fns fp4s_blas_fns;
#endif

/* The BLAS this build found (or the file FP4S_BLAS names), loaded once,
 * from any thread. NULL with FP4S_ENOTSUP and the reason set when the build
 * has none (-Dblas=disabled) or the library cannot be loaded (its file and
 * the loader's message). */
const fp4s_blas_fns *fp4s_blas(void);

#endif
