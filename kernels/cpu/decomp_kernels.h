/* The element kernels of the error decomposition (not installed): the types
 * they share with analysis/decompose (decomp_internal.h includes this header)
 * and the kernel table, filled with the portable C first and overridden entry
 * by entry by the levels fp4s_cpu_flags() allows (dispatch.c).
 *
 * Every kernel puts element i of a row (or block) in lane i mod 8 and does the
 * same IEEE operations in double, so every level gives the same bits
 * (tests/decompose checks it on every spec):
 *   block  one block's element loop (decomp_block.c, compiled for the
 *          baseline and for AVX2; decomp_avx512.c in GCC vector extensions,
 *          which keeps its 17 accumulators in the 32 AVX-512 registers);
 *   row    the fused row path of decomp_avx512.c (tensor and row groupings):
 *          a prepass writes every block's constants to a table, then one
 *          element loop runs over the whole row; NULL below AVX-512. */
#ifndef FP4S_DECOMP_KERNELS_H
#define FP4S_DECOMP_KERNELS_H

#include <fp4scope/decompose.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Sums: the first S_CH are kept per element (channel groups too). */
enum {
    S_X2, S_E2, S_ES2, S_EDZ2, S_EG2, S_CSG, S_CSD, S_CDG, S_ER2, S_EC2, S_EU2, S_EABS,
    S_CH,
    S_GAM = S_CH, S_GAM2, S_DEL, S_DEL2,
    S_N
};
/* Counts: the first C_CH are per element; C_NUM is the number of counts. */
enum {
    C_ELEM, C_DZ, C_DZTIE, C_ZEROS, C_CLIP, C_NAN, C_INF, C_EXCL,
    C_CH,
    C_BLOCKS = C_CH, C_ZB, C_UFB, C_GB, C_NFB, C_NFOUT,
    C_NUM
};

/* Extremes of a block, row or group: gamma and delta min/max, amax, the worst
 * residual of one element. */
typedef struct dextr {
    double gmin, gmax, dmin, dmax, amax, res;
} dextr;

static inline void fp4s_dextr_init(dextr *e)
{
    e->gmin = e->dmin = INFINITY;
    e->gmax = e->dmax = -INFINITY;
    e->amax = e->res = 0.0;
}

static inline void fp4s_dextr_merge(dextr *a, const dextr *b)
{
    if (b->gmin < a->gmin) a->gmin = b->gmin;
    if (b->dmin < a->dmin) a->dmin = b->dmin;
    if (b->gmax > a->gmax) a->gmax = b->gmax;
    if (b->dmax > a->dmax) a->dmax = b->dmax;
    if (b->amax > a->amax) a->amax = b->amax;
    if (b->res > a->res) a->res = b->res;
}

typedef struct part {  /* one block (or row), plain double */
    double s[S_N];
    uint64_t c[C_NUM];
    dextr x;
} part;

/* Histogram ranges: delta = log2 gamma per block, e * 6/m per element. */
#define HD_LO (-2.0)
#define HD_HI 2.0
#define HE_LO (-4.0)
#define HE_HI 4.0

static inline int fp4s_hist_bin(double v, double lo, double hi)
{
    double f = (v - lo) / (hi - lo) * FP4S_HIST_BINS;
    if (!(f >= 0)) return 0; /* also NaN, never expected */
    if (f >= FP4S_HIST_BINS) return FP4S_HIST_BINS - 1;
    return (int)f;
}

#define LW 8 /* lanes: block sizes are multiples of 8 */

/* Per-block constants of the element kernel. */
typedef struct kconst {
    double th[7];   /* 4 mu m for the 7 E2M1 midpoints mu */
    double tu[7];   /* what 24|x| is compared with (>): th[k], or for a tie that
                       goes up the double just below th[k] (-1 when th[k] is 0) */
    double qtab[8]; /* Q* magnitudes g m / 6 */
    double inv_s;   /* 6 / m (histogram only) */
    int uf, mpos;
} kconst;

/* 4 mu for the 7 E2M1 midpoints mu (0.25, 0.75, ..., 5). */
static const double fp4s_decomp_mid4[7] = {1, 3, 5, 7, 10, 14, 20};

/* The constants of a block with amax m (finite, >= 0) as the element kernels
 * use them: Q* without division, t = 6|x|/m compared with the midpoints mu as
 * 24|x| against 4 mu m. Both sides are exact in double (24|x| and 4 mu m <=
 * 20 m are floats times small integers), so every tie is exact; a tie that
 * goes up compares A > (the double just below th), or A > -1 when th is 0.
 * Q* values g m / 6 are correctly rounded once per block and grid point:
 * powers of two scale m/6 exactly, 1.5 m/6 and 3 m/6 = 2 (1.5 m/6) need one
 * more division, 6 m/6 = m. */
static inline void fp4s_decomp_kconst(float m, bool uf, const bool *tie_up, kconst *kc)
{
    const double md = m;
    for (int k = 0; k < 7; k++) {
        double t = kc->th[k] = fp4s_decomp_mid4[k] * md;
        if (tie_up[k]) {
            if (t > 0.0) {
                uint64_t b;
                memcpy(&b, &t, sizeof b);
                b -= 1;
                memcpy(&t, &b, sizeof t);
            } else {
                t = -1.0;
            }
        }
        kc->tu[k] = t;
    }
    const double d6 = md / 6.0, d15 = (1.5 * md) / 6.0;
    kc->qtab[0] = 0.0;
    kc->qtab[1] = 0.5 * d6;
    kc->qtab[2] = d6;
    kc->qtab[3] = d15;
    kc->qtab[4] = 2.0 * d6;
    kc->qtab[5] = 2.0 * d15;
    kc->qtab[6] = 4.0 * d6;
    kc->qtab[7] = md;
    kc->inv_s = m != 0.0f ? 6.0 / md : 0.0;
    kc->uf = uf;
    kc->mpos = m != 0.0f;
}

/* Lane accumulators of the element kernel for one row (or block): the S_CH
 * sums and 4 counts (dead zone, dead-zone ties, zeros, clipped), and the
 * running max residual. */
typedef struct lanes {
    double l[S_CH + 4][LW];
    double r[LW];
} lanes;

/* One block of bs elements (a multiple of 8, at most 256): adds into ln, writes
 * the error histogram bin of every element to bins. */
typedef void (*fp4s_dk_block_fn)(const float *restrict x, const float *restrict q,
                                 const uint8_t *restrict codes, size_t bs, const kconst *restrict kc,
                                 lanes *restrict ln, int32_t *restrict bins);

/* What the fused row path reads of a decomposer. */
typedef struct fp4s_dk_spec {
    size_t bs, nb;            /* block size, blocks per row */
    const double *seff;       /* [256] real block scale of every scale byte */
    const uint8_t *uf;        /* [256] whether it underflows */
    const bool *tie_up;       /* [7] a tie at midpoint k goes up */
} fp4s_dk_spec;

/* Slots of the per-block constant table kb [nb][KB_N] of the fused row path
 * (KB_UF, KB_MPOS: masks 0 or 0xFF stored as int64 bits). kb holds
 * (KB_N + 2) * nb doubles (the last 2 nb are scratch). */
enum { KB_TU = 0, KB_Q = 7, KB_TH0 = 14, KB_INVS = 15, KB_UF = 16, KB_MPOS = 17, KB_N = 18 };

/* One row of nb blocks: the block statistics into *p (in block order, as the
 * per-block path), the delta histogram into hd, the element sums into ln and
 * bins [bs * nb]. Returns false, having touched nothing, when the row holds a
 * non-finite input or output (the caller then takes the per-block path). */
typedef bool (*fp4s_dk_row_fn)(const fp4s_dk_spec *d, const float *restrict x, const float *restrict q,
                               const uint8_t *restrict codes, const uint8_t *restrict sc, double *restrict kb,
                               part *p, uint64_t *hd, lanes *ln, int32_t *restrict bins);

typedef struct fp4s_decomp_kernels {
    fp4s_dk_block_fn block;
    fp4s_dk_row_fn row;       /* NULL: no fused row path at this level */
} fp4s_decomp_kernels;

/* The table for the level fp4s_cpu_flags() allows now (dispatch.c). */
void fp4s_decomp_kernels_init(fp4s_decomp_kernels *k);

/* The entries (decomp_block.c for the baseline and AVX2, decomp_avx512.c). */
void fp4s_dk_block_c(const float *restrict x, const float *restrict q, const uint8_t *restrict codes, size_t bs,
                     const kconst *restrict kc, lanes *restrict ln, int32_t *restrict bins);
void fp4s_dk_block_avx2(const float *restrict x, const float *restrict q, const uint8_t *restrict codes, size_t bs,
                        const kconst *restrict kc, lanes *restrict ln, int32_t *restrict bins);
void fp4s_dk_block_avx512(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                          size_t bs, const kconst *restrict kc, lanes *restrict ln, int32_t *restrict bins);
bool fp4s_dk_row_avx512(const fp4s_dk_spec *d, const float *restrict x, const float *restrict q,
                        const uint8_t *restrict codes, const uint8_t *restrict sc, double *restrict kb, part *p,
                        uint64_t *hd, lanes *ln, int32_t *restrict bins);

#endif
