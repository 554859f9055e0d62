/* The GPU decomposition's interface (internal, not installed) between the
 * decomposer (analysis/decompose/decomp_device.c: the accumulators, their
 * merge and the checks) and the CUDA side (kernels/cuda/decompose.cu: the
 * kernels; emulate.cu: the same arithmetic on the host, for the tests).
 *
 * The CUDA side hands back the decomposer's own accumulator types (xacc,
 * part, chacc of decomp_internal.h) in host memory: the tensor totals as one
 * xacc whose exact sums hold un-normalised limbs (xs_merge takes them), the
 * row or block parts that become the groups, and the channel accumulators.
 * decomp_device.c merges them as it merges any two decomposers. */
#ifndef FP4S_CUDA_DECOMP_CU_H
#define FP4S_CUDA_DECOMP_CU_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <fp4scope/decompose.h>
#include <fp4scope/tensor.h>

#if defined(__cplusplus) && !defined(restrict)
#define restrict __restrict__ /* the C headers' qualifier */
#endif
#include "cpu/decomp_kernels.h"
#include "base/xsum.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "analysis/decompose/decomp_internal.h"

/* What the kernels need of a decomposer (a plain copy, passed by value). */
typedef struct fp4s_cu_dk {
    fp4s_spec spec;
    fp4s_tscale ts;
    int by;              /* fp4s_group */
    size_t cols, nblk, bs;
    double seff[256];    /* fp4s_decomp.seff */
    uint8_t uf[256];     /* fp4s_decomp.uf */
    bool tie_up[8];      /* fp4s_decomp.tie_up (7 used) */
} fp4s_cu_dk;

/* The results of one call, in host memory. units: [nrows] row parts (by =
 * ROW) or [nrows * nblk] block parts (BLOCK), else NULL; ch: [cols] channel
 * accumulators (CHANNEL, zeroed by the caller), else NULL. */
typedef struct fp4s_cu_dk_out {
    xacc tot;
    uint64_t hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
    part *units;
    chacc *ch;
} fp4s_cu_dk_out;

/* Decompose rows [0, nrows) of x (type dt, row stride ld; in host memory
 * when x_host, else device memory) with k, filling out (tot and the
 * histograms are overwritten; units and ch filled). Synchronises. */
typedef int (*fp4s_cu_dk_fn)(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows,
                             size_t ld, fp4s_cu_dk_out *out, void *stream);

/* The GPU (FP4S_ENOTSUP in a build without CUDA or without a usable GPU). */
int fp4s_cu_decomp(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows, size_t ld,
                   fp4s_cu_dk_out *out, void *stream);
/* The same arithmetic on the host (CUDA builds only: emulate.cu), x in host
 * memory; the order of every floating-point sum is the kernels'. */
int fp4s_cu_decomp_emulate(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows,
                           size_t ld, fp4s_cu_dk_out *out, void *stream);

/* decomp_device.c: add rows [row0, row0 + nrows) of x through fn (the
 * decomposer's checks, then fn, then the merge). */
int fp4s_decomp_add_via(fp4s_decomp *d, fp4s_cu_dk_fn fn, fp4s_dtype dt, const void *x, bool x_host,
                        size_t nrows, size_t ld, size_t row0, void *stream);

#ifdef __cplusplus
}
#endif
#endif
