/* The element kernels of the error decomposition (not installed): the types
 * they share with analysis/decompose (decomp_internal.h includes this header)
 * and the kernel table, filled with the portable C first and overridden entry
 * by entry by the levels fp4s_cpu_flags() allows (dispatch.c).
 *
 * The exact accumulators (xacc, chacc) are here too, below analysis, so that
 * the CUDA side (kernels/cuda/decomp_cu.h) hands back the decomposer's own
 * types without reaching up into analysis/decompose.
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

#include "base/xsum.h"

/* The inline helpers below are shared with the CUDA decomposition
 * (kernels/cuda/decomp_lane.cuh), which runs them on the device. */
#if defined(__CUDACC__)
#define FP4S_DK_FN static inline __host__ __device__
#else
#define FP4S_DK_FN static inline
#endif

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
    C_CLAMP, /* NVFP4 blocks whose scale clamps: the quantizer's count, totals only (decompose.h) */
    C_NUM
};

/* Extremes of a block, row or group: gamma and delta min/max, amax, the worst
 * residual of one element. */
typedef struct dextr {
    double gmin, gmax, dmin, dmax, amax, res;
} dextr;

FP4S_DK_FN void fp4s_dextr_init(dextr *e)
{
    e->gmin = e->dmin = INFINITY;
    e->gmax = e->dmax = -INFINITY;
    e->amax = e->res = 0.0;
}

FP4S_DK_FN void fp4s_dextr_merge(dextr *a, const dextr *b)
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

/* delta = log2 gamma of a block, the same bits on every CPU level and on the
 * GPU: the C library's log2 and CUDA's differ in the last place for some
 * arguments, so the decomposition uses this one everywhere (within 2.2 units in
 * the last place of the exact value; tests/decompose checks it). Plain IEEE
 * double operations, no FMA (every file that uses it is compiled without
 * contraction): g = 2^e m with m in [sqrt(1/2), sqrt(2)), log2 m = (2/ln 2)
 * atanh(s), s = (m - 1)/(m + 1), |s| < 0.1716, by its odd series to s^25.
 * 0 -> -Inf, +Inf -> +Inf, NaN and negative -> NaN. */
FP4S_DK_FN double fp4s_dk_log2(double g)
{
    if (!(g > 0.0)) return g == 0.0 ? -INFINITY : NAN;
    uint64_t b;
    memcpy(&b, &g, sizeof b);
    int e = (int)((b >> 52) & 0x7ff);
    if (e == 0x7ff) return g;
    if (e == 0) { /* subnormal: scale by 2^54 first */
        g *= 0x1p54;
        memcpy(&b, &g, sizeof b);
        e = (int)((b >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    b = (b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1023) << 52); /* m in [1, 2) */
    double m;
    memcpy(&m, &b, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    const double f = m - 1.0; /* exact */
    const double s = f / (2.0 + f), s2 = s * s;
    /* P = 1/3 + s2/5 + s2^2/7 + ... + s2^11/25 */
    double P = 1.0 / 25;
    P = P * s2 + 1.0 / 23;
    P = P * s2 + 1.0 / 21;
    P = P * s2 + 1.0 / 19;
    P = P * s2 + 1.0 / 17;
    P = P * s2 + 1.0 / 15;
    P = P * s2 + 1.0 / 13;
    P = P * s2 + 1.0 / 11;
    P = P * s2 + 1.0 / 9;
    P = P * s2 + 1.0 / 7;
    P = P * s2 + 1.0 / 5;
    P = P * s2 + 1.0 / 3;
    /* 2/ln 2 split in a head with 26 significant bits (exact products with
     * the leading part of s) and a tail */
    const double ch = 0x1.7154760000000p+1, cl = 0x1.4ae0bf85ddf44p-25;
    /* s = sh + sl with sh holding the top 26 bits of s */
    uint64_t sb;
    memcpy(&sb, &s, sizeof sb);
    sb &= ~((UINT64_C(1) << 27) - 1);
    double sh;
    memcpy(&sh, &sb, sizeof sh);
    const double sl = s - sh;
    const double hi = ch * sh; /* exact: 26 x 26 bits */
    const double lo = cl * s + ch * sl + (ch + cl) * (s * s2 * P);
    return ((double)e + hi) + lo;
}

/* Histogram ranges: delta = log2 gamma per block, e * 6/m per element. */
#define HD_LO (-2.0)
#define HD_HI 2.0
#define HE_LO (-4.0)
#define HE_HI 4.0

FP4S_DK_FN int fp4s_hist_bin(double v, double lo, double hi)
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
FP4S_DK_FN void fp4s_decomp_kconst(float m, bool uf, const bool *tie_up, kconst *kc)
{
    const double md = m;
    for (int k = 0; k < 7; k++) {
        const double mid4[7] = {1, 3, 5, 7, 10, 14, 20}; /* fp4s_decomp_mid4 (device code too) */
        double t = kc->th[k] = mid4[k] * md;
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

FP4S_DK_FN void fp4s_dk_part_init(part *p)
{
    memset(p, 0, sizeof *p);
    fp4s_dextr_init(&p->x);
}

/* a += p, in plain double (a block's partial into its row's) */
FP4S_DK_FN void fp4s_dk_part_add(part *a, const part *p)
{
    for (int i = 0; i < S_N; i++) a->s[i] += p->s[i];
    for (int i = 0; i < C_NUM; i++) a->c[i] += p->c[i];
    fp4s_dextr_merge(&a->x, &p->x);
}

/* The statistics of one finite block with amax m and scale byte scode into
 * *p (blocks, zero and underflowing blocks, gamma and delta sums, extremes),
 * and its element constants into *kc. seff/uf/tie_up as fp4s_dk_spec holds
 * them. Returns the delta histogram bin, or -1 for an all-zero block. The
 * caller adds the elements (C_ELEM and the element sums). */
FP4S_DK_FN int fp4s_dk_block_stats(const double *seff, const uint8_t *uf, const bool *tie_up, float m,
                                   uint8_t scode, part *p, kconst *kc)
{
    const double md = m;
    bool u = uf[scode] != 0;
    int bin = -1;
    p->c[C_BLOCKS]++;
    if (m == 0.0f) {
        p->c[C_ZB]++;
        u = false;
    } else {
        double gam = 6.0 * seff[scode] / md;
        double del = fp4s_dk_log2(gam);
        p->c[C_GB]++;
        if (u) p->c[C_UFB]++;
        p->s[S_GAM] += gam;
        p->s[S_GAM2] += gam * gam;
        p->s[S_DEL] += del;
        p->s[S_DEL2] += del * del;
        if (gam < p->x.gmin) p->x.gmin = gam;
        if (gam > p->x.gmax) p->x.gmax = gam;
        if (del < p->x.dmin) p->x.dmin = del;
        if (del > p->x.dmax) p->x.dmax = del;
        bin = fp4s_hist_bin(del, HD_LO, HD_HI);
    }
    if (md > p->x.amax) p->x.amax = md;
    fp4s_decomp_kconst(m, u, tie_up, kc);
    return bin;
}

/* The exact accumulators of a group (xsum.h: any order of adds and merges
 * gives the same bits): what the decomposer keeps per group and what the CPU
 * and GPU kernels hand back. */
typedef struct xacc {  /* a group, exact */
    xsum s[S_N];
    uint64_t c[C_NUM];
    dextr x;
} xacc;

typedef struct chacc { /* a channel, exact, per element */
    xsum s[S_CH];
    uint64_t c[C_CH];
    double amax, res;
} chacc;

/* One element of a finite block (constants kc, tie rule tie_up) into its
 * channel's exact accumulators: the per-element terms of the element kernel
 * in the form the channel groups have always used (shared by the CPU path
 * and the GPU's channel kernel). */
FP4S_DK_FN void fp4s_chacc_add_elem(chacc *c, const kconst *kc, const bool *tie_up, float xf, float qf,
                                    uint8_t qcode)
{
    const double *th = kc->th, *qtab = kc->qtab;
    const bool uf = kc->uf != 0;
    const double xv = xf, qv = qf;
    const double a = fabs(xv);
    const double A = 24.0 * a;
    int idx = (A > th[0]) + (A > th[1]) + (A > th[2]) + (A > th[3]) + (A > th[4]) + (A > th[5]) + (A > th[6]);
    const bool tie = idx < 7 && A == th[idx] && kc->mpos;
    const int code = idx + (tie && tie_up[idx]);
    const double qs = code == 0 ? 0.0 : copysign(qtab[code], xv);
    const double e = qv - xv, es = qv - qs, est = qs - xv;
    const bool dz = code == 0;
    const double edz = dz ? est : 0.0, eg = dz ? 0.0 : est;
    const bool clip = !uf && (qcode & 7) == 7 && a > fabs(qv);
    const double r = fabs(e - (es + edz + eg));
    const double v_es2 = es * es;
    const double t2[S_CH] = {xv * xv, e * e, v_es2, edz * edz, eg * eg, es * eg, es * edz, edz * eg,
                             (!uf && !clip) ? v_es2 : 0.0, clip ? v_es2 : 0.0, uf ? v_es2 : 0.0, fabs(e)};
    for (int k = 0; k < S_CH; k++) xs_add(&c->s[k], t2[k]);
    c->c[C_ELEM]++;
    c->c[C_DZ] += dz;
    c->c[C_DZTIE] += tie && idx == 0;
    c->c[C_ZEROS] += (xv == 0.0);
    c->c[C_CLIP] += clip;
    if (a > c->amax) c->amax = a;
    if (r > c->res) c->res = r;
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
