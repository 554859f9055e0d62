/* Internal pieces of the decomposition shared by decompose.c (the decomposer:
 * blocks, rows, groups, merge), decomp_result.c (names, the field table, the
 * exact accumulators and how they become a result), reader.c (the streaming
 * driver), channels.c and the unit tests (not installed). The element kernels
 * and the types they share are in kernels/cpu/decomp_kernels.h. */
#ifndef FP4S_DECOMP_INTERNAL_H
#define FP4S_DECOMP_INTERNAL_H

#include <fp4scope/decompose.h>
#include <fp4scope/quant.h>

#include "cpu/decomp_kernels.h"
#include "base/xsum.h"
#include "cuda/decomp_cu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One worker thread's partials and scratch. */
typedef struct worker {
    xacc tot;
    uint64_t hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
    uint64_t he4[4][FP4S_HIST_BINS]; /* fused row path: four copies (fewer store-to-load chains) */
    chacc *ch; /* [cols] in channel mode */
    int used;
    /* fused row path scratch: per-block constants [KB_N + 2][nblk], bins [cols] */
    double *kb;
    int32_t *bins;
    /* fp4s_decomp_add: quantizer outputs of one cache-sized piece of rows */
    float *q;
    uint8_t *codes, *scales;
    size_t piece_rows;
} worker;

#define MAX_WORKERS 64

struct fp4s_decomp {
    fp4s_spec spec;
    fp4s_tscale ts;
    fp4s_decomp_opts opts;
    size_t rows, cols, nblk;
    xacc tot;
    uint64_t hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
    /* groups */
    size_t ngroups;
    fp4s_decomp_result *unit; /* row or block groups, filled once */
    uint8_t *filled;
    chacc *ch;                /* channel groups */
    worker *wk[MAX_WORKERS];
    /* the real block scale of every scale byte (NVFP4: times the tensor
     * decode scale) and whether it underflows, as block_scale() gives them */
    double seff[256];
    uint8_t uf[256];
    /* a tie at E2M1 midpoint k (between codes k and k+1) goes up to k+1: from
     * the spec's tie rule, and --dz-tie for the dead-zone boundary k = 0 */
    bool tie_up[7];
    /* the element kernels of the CPU level at open, and what the fused row
     * path reads of this decomposer */
    fp4s_decomp_kernels k;
    fp4s_dk_spec dks;
    bool cuda; /* fp4s_decomp_add runs on the GPU (opts.device resolved at open) */
    bool rollup; /* a channel roll-up (opened with rows 0): takes merges of any rows, counts them */
};

/* Reference E2M1 rounding of t >= 0 in double with the tie rules (the kernels
 * decide by exact comparisons instead; the tests check both agree). */
double fp4s_decomp_e2m1_round(double t, fp4s_tie tie, fp4s_dz_tie dzt);
/* Rows decomposed so far by the fused row path (for the tests: they check
 * that the path they compare was taken). */
uint64_t fp4s_decomp_fused_rows(void);
/* Whether the current CPU level (fp4s_cpu_flags) has the fused row path. */
bool fp4s_decomp_fused_available(void);
/* FP4S_ENOTSUP / FP4S_EINVAL with a message when the decomposition does not
 * take this spec. */
int fp4s_decomp_spec_check(const fp4s_spec *s);
/* FP4S_ERANGE / FP4S_EDUP when rows [row0, row0 + nrows) cannot be added. */
int fp4s_decomp_check_rows(const fp4s_decomp *d, size_t row0, size_t nrows);
/* decomp_device.c: add rows [row0, row0 + nrows) of x through fn (the
 * decomposer's checks, then fn, the kernels of kernels/cuda/decomp_cu.h or
 * their host emulation, then the merge). */
int fp4s_decomp_add_via(fp4s_decomp *d, fp4s_cu_dk_fn fn, fp4s_dtype dt, const void *x, bool x_host,
                        size_t nrows, size_t ld, size_t row0, void *stream);
/* What the CUDA side needs of d (decomp_cu.h). */
void fp4s_decomp_cu_dk(const fp4s_decomp *d, fp4s_cu_dk *k);
/* The row or block parts of rows [row0, row0 + nrows) into d's groups, as
 * the CUDA side hands them back (rows checked by the caller). */
void fp4s_decomp_merge_units(fp4s_decomp *d, const part *units, size_t row0, size_t nrows);
/* Its totals, histograms and channel groups (out->ch when not NULL) into d. */
void fp4s_decomp_merge_totals(fp4s_decomp *d, const fp4s_cu_dk_out *out);
/* reader.c: the decomposition of rows [row0, row0 + nrows) of a source as
 * fp4s_decomp_source_rows (amax: the tensor amax to use, NULL to take it),
 * through the streaming session ops (the GPU, or its emulation in the
 * tests), whatever o->device says. */
int fp4s_decomp_source_via(const fp4s_cu_ds_ops *ops, const fp4s_spec *s, const fp4s_decomp_opts *o,
                           const char *spec_str, size_t row0, size_t nrows, const float *amax, fp4s_decomp **out);

/* The names of an enum's values for the option parsers and reports; entries
 * from nlisted on are aliases (accepted, not listed in the error). */
typedef struct fp4s_dname {
    const char *name;
    int value;
} fp4s_dname;
/* FP4S_EINVAL "WHAT 's': expected a, b or c" for an unknown name. */
int fp4s_dname_parse(const fp4s_dname *t, size_t n, size_t nlisted, const char *what, const char *s, int *out);
/* The name of value, or "?". */
const char *fp4s_dname_of(const fp4s_dname *t, size_t n, int value);

/* o, or the defaults written to *def when o is NULL. */
static inline const fp4s_decomp_opts *fp4s_decomp_opts_or_default(const fp4s_decomp_opts *o,
                                                                   fp4s_decomp_opts *def)
{
    if (o) return o;
    fp4s_decomp_opts_defaults(def);
    return def;
}

/* ---- accumulators (decomp_result.c) ---- */
void fp4s_xacc_init(xacc *a);
void fp4s_part_init(part *p);
void fp4s_part_add(part *a, const part *p);
void fp4s_xacc_add_part(xacc *a, const part *p);
void fp4s_xacc_merge(xacc *a, const xacc *b);
void fp4s_chacc_merge(chacc *a, const chacc *b);
void fp4s_xacc_finish(const xacc *a, fp4s_decomp_result *r);
void fp4s_part_finish(const part *p, fp4s_decomp_result *r);
void fp4s_chacc_finish(const chacc *a, fp4s_decomp_result *r);
/* Sum the element kernel's lanes in a fixed order into p and clear them. */
void fp4s_lanes_reduce(lanes *ln, part *p);

#ifdef __cplusplus
}
#endif
#endif
