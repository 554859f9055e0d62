/* The arithmetic of the GPU decomposition (internal), __host__ __device__:
 * the kernels (decompose.cu) run it on the GPU and the host emulation
 * (emulate.cu) runs the same source on the CPU, so tests/cuda checks it
 * against the CPU decomposer bit for bit on machines without a GPU.
 *
 * Why the bits agree with the CPU: the CPU's element kernels put element i
 * of a row in lane i mod 8, each lane sums its elements in order, and the
 * lanes are summed ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) at the end of the
 * row (of the block, for block groups); the block statistics are summed in
 * block order into the row's partial. The GPU gives each row 8 threads, lane
 * j taking elements j, j+8, ... in order, with the same IEEE double
 * operations (no FMA contraction), and sums the lanes with three XOR
 * shuffles, which form the same tree. Only whole rows then enter the exact
 * fixed-point sums (xsum.h), in any order. Channel groups take every element
 * into exact sums directly (fp4s_chacc_add_elem). */
#ifndef FP4S_CUDA_DECOMP_LANE_CUH
#define FP4S_CUDA_DECOMP_LANE_CUH

#include "decomp_cu.h"
#include "quant_block.cuh"

/* One lane of a row (or block): the element sums in double as the CPU keeps
 * them, 4 counts (dead zone, dead-zone ties, zeros, clipped) and the largest
 * identity residual. The CPU sums the counts as doubles of 0 and 1, which
 * is exact: integers give the same numbers. */
struct cu_dk_lane {
    double l[S_CH];
    uint32_t c[4];
    double r;
};

FP4S_HD void cu_dk_lane_init(cu_dk_lane *ln)
{
    for (int k = 0; k < S_CH; k++) ln->l[k] = 0.0;
    for (int k = 0; k < 4; k++) ln->c[k] = 0;
    ln->r = 0.0;
}

/* Element x (float), its dequantized value q and code into the lane, as
 * pass 1 and 2 of decomp_block.c do. Returns the error histogram bin.
 *
 * The CPU adds every term to every sum, with masks: edz = est * [dead zone],
 * eg = est - edz, and the clipped / underflowing / regular shares of es^2 as
 * es^2 times 0 or 1. Here each term goes only to the sum it lands in, with
 * the same bits: a lane starts at +0 and a sum of nonzero terms rounded to
 * nearest is never -0, so the terms +-0 the masks give the other sums change
 * nothing; est * 1 = est, est - (+-0) = est, es^2 * 1 = es^2 exactly; and
 * edz * eg is +-0 for every element (one factor is a zero), so S_CDG stays +0
 * as on the CPU. The residual e - ((es + edz) + eg) equals e - (es + est) up
 * to the sign of a zero, which fabs drops. */
FP4S_HD int cu_dk_elem(const kconst *kc, float xf, float qf, uint8_t code, cu_dk_lane *ln)
{
    const double *tu = kc->tu;
    const double xv = xf, qv = qf;
    const double a = fabs(xv);
    const double A = 24.0 * a;
    double qm = 0.0;
    qm = A > tu[0] ? kc->qtab[1] : qm;
    qm = A > tu[1] ? kc->qtab[2] : qm;
    qm = A > tu[2] ? kc->qtab[3] : qm;
    qm = A > tu[3] ? kc->qtab[4] : qm;
    qm = A > tu[4] ? kc->qtab[5] : qm;
    qm = A > tu[5] ? kc->qtab[6] : qm;
    qm = A > tu[6] ? kc->qtab[7] : qm;
    const double qs = copysign(qm, xv);
    const double e = qv - xv, es = qv - qs, est = qs - xv;
    const bool dz = qm == 0.0;
    const bool clip = !kc->uf && (code & 7) == 7 && a > fabs(qv);
    const double es2 = es * es, est2 = est * est, eest = es * est;
    ln->l[S_X2] += xv * xv;
    ln->l[S_E2] += e * e;
    ln->l[S_ES2] += es2;
    if (dz) {
        ln->l[S_EDZ2] += est2;
        ln->l[S_CSD] += eest;
    } else {
        ln->l[S_EG2] += est2;
        ln->l[S_CSG] += eest;
    }
    if (kc->uf) ln->l[S_EU2] += es2;
    else if (clip) ln->l[S_EC2] += es2;
    else ln->l[S_ER2] += es2;
    ln->l[S_EABS] += fabs(e);
    ln->c[0] += dz;
    ln->c[1] += A == kc->th[0] && kc->mpos;
    ln->c[2] += xv == 0.0;
    ln->c[3] += clip;
    const double r = fabs(e - (es + est));
    ln->r = r > ln->r ? r : ln->r;
    const double hscale = FP4S_HIST_BINS / (HE_HI - HE_LO);
    double f = (e * kc->inv_s - HE_LO) * hscale;
    f = f > 0.0 ? f : 0.0;
    f = f < FP4S_HIST_BINS - 1 ? f : FP4S_HIST_BINS - 1;
    return (int)f;
}

/* The 8 lanes' sum of one quantity in the CPU's order. */
FP4S_HD double cu_dk_sum8(const double *v)
{
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/* The lanes' sums s[S_CH] (in the CPU's order) and counts c[4] into a row's
 * or block's partial, as fp4s_lanes_reduce adds them. */
FP4S_HD void cu_dk_lanes_into(part *p, const double *s, const uint64_t *c, double rmax)
{
    for (int k = 0; k < S_CH; k++) p->s[k] += s[k];
    p->c[C_DZ] += c[0];
    p->c[C_DZTIE] += c[1];
    p->c[C_ZEROS] += c[2];
    p->c[C_CLIP] += c[3];
    if (rmax > p->x.res) p->x.res = rmax;
}

/* Non-finite block: which count an input element goes to. */
FP4S_HD int cu_dk_nf_kind(float x)
{
    return isnan(x) ? C_NAN : (isinf(x) ? C_INF : C_EXCL);
}

/* |x| as bits (the unsigned order is the order of the magnitudes). */
FP4S_HD uint32_t cu_dk_abits(float x)
{
    return cu_bits(x) & 0x7fffffffu;
}

/* Element i of a row of type dt, widened to float32 exactly. */
FP4S_HD float cu_dk_load(const void *x, int dt, size_t i)
{
    if (dt == CU_DT_F32) return static_cast<const float *>(x)[i];
    const uint32_t h = static_cast<const uint16_t *>(x)[i];
    return dt == CU_DT_BF16 ? fp4s_nc_bf16_value(h) : fp4s_nc_fp16_value(h);
}

#endif
