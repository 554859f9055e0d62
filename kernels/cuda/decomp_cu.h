/* The GPU decomposition's interface (internal, not installed) between the
 * decomposer (analysis/decompose/decomp_device.c: the accumulators, their
 * merge and the checks) and the CUDA side (kernels/cuda/decompose.cu: the
 * kernels; emulate.cu: the same arithmetic on the host, for the tests).
 *
 * The CUDA side hands back the decomposer's own accumulator types (xacc,
 * part, chacc of kernels/cpu/decomp_kernels.h) in host memory: the tensor totals as one
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
/* The same arithmetic on the host (decomp_emulate.cu; FP4S_ENOTSUP without CUDA), x in host
 * memory; the order of every floating-point sum is the kernels'. */
int fp4s_cu_decomp_emulate(const fp4s_cu_dk *k, fp4s_dtype dt, const void *x, bool x_host, size_t nrows,
                           size_t ld, fp4s_cu_dk_out *out, void *stream);

/* ---- the streaming session: a source's chunks through pinned memory ----
 *
 * The decomposition of a source on the GPU (analysis/decompose/reader.c):
 * the caller fills a slot (pinned host memory, rows of chunk_rows x cols of
 * type dt) and submits it; the rows are copied to the device on one stream
 * and decomposed on another, while the caller fills the next slot. wait(i)
 * blocks until slot i's last chunk is done and hands back its row or block
 * parts (valid until the slot is submitted again). Every chunk goes into the
 * same totals; finish hands them back (tot, histograms, channels: out->ch
 * zeroed by the caller) once every slot has been waited for.
 *
 * Keeping (keep_rows > 0; k->spec and k->ts are not used): NVFP4's first
 * pass. Each submitted chunk is copied into device memory that holds rows
 * [keep_row0, keep_row0 + keep_rows), and only its amax is taken; amax
 * hands back the largest finite |x| of the rows submitted (fp4s_amax's) and
 * where the kept rows are (device memory, or host memory in the emulation),
 * for the decomposition proper through fp4s_cu_decomp (or its emulation).
 *
 * fp4s_cu_ds_gpu is the GPU; fp4s_cu_ds_emulate (declining without CUDA) the same calls
 * in host memory through the kernels' host emulation, for the tests. */
#define FP4S_CU_DS_SLOTS 2
typedef struct fp4s_cu_ds fp4s_cu_ds;
typedef struct fp4s_cu_ds_ops {
    bool host; /* the kept rows are in host memory (the emulation) */
    int (*open)(const fp4s_cu_dk *k, fp4s_dtype dt, size_t chunk_rows, size_t keep_row0, size_t keep_rows,
                fp4s_cu_ds **out);
    void *(*slot)(fp4s_cu_ds *s, int i);
    int (*submit)(fp4s_cu_ds *s, int i, size_t nrows, size_t row0);
    int (*wait)(fp4s_cu_ds *s, int i, const part **units, size_t *nrows, size_t *row0);
    int (*finish)(fp4s_cu_ds *s, fp4s_cu_dk_out *out);
    int (*amax)(fp4s_cu_ds *s, float *amax, const void **kept);
    void (*close)(fp4s_cu_ds **s);
} fp4s_cu_ds_ops;
extern const fp4s_cu_ds_ops fp4s_cu_ds_gpu;
extern const fp4s_cu_ds_ops fp4s_cu_ds_emulate;
/* The emulation's device memory for kept rows (0: unlimited): a keeping
 * open beyond it fails with FP4S_ENOMEM, as the GPU's does where the rows do
 * not fit (CUDA builds; for the tests). */
void fp4s_cu_ds_emulate_keep_limit(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
