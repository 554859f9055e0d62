/* The portable element loop of one decomposition block (decomp_kernels.h),
 * written for the vectorizer: every lane accumulates its own elements (no
 * reassociation) and the lanes are summed in a fixed order by the caller, so
 * the result is the same on every ISA. Compiled twice by
 * kernels/cpu/meson.build: for the baseline (fp4s_dk_block_c, the level
 * "ref") and with -mavx2 (fp4s_dk_block_avx2), both -O3 -fno-trapping-math so
 * that the comparisons if-convert. DK_NAME is the function's name. */
#include <math.h>

#include "cpu/decomp_kernels.h"

#ifndef DK_NAME
#define DK_NAME fp4s_dk_block_c
#endif

void DK_NAME(const float *restrict x, const float *restrict q, const uint8_t *restrict codes, size_t bs,
             const kconst *restrict kc, lanes *restrict ln, int32_t *restrict bins)
{
    /* pass 1, element-wise (no reductions): the terms of every element */
    double T[S_CH + 5][256];
    const double th0 = kc->th[0];
    const double q1 = kc->qtab[1], q2 = kc->qtab[2], q3 = kc->qtab[3], q4 = kc->qtab[4], q5 = kc->qtab[5],
                 q6 = kc->qtab[6], q7 = kc->qtab[7];
    const double *tu = kc->tu;
    const double t0 = tu[0], t1 = tu[1], t2 = tu[2], t3 = tu[3], t4 = tu[4], t5 = tu[5], t6 = tu[6];
    const double inv_s = kc->inv_s, mpos = kc->mpos ? 1.0 : 0.0;
    const double hscale = FP4S_HIST_BINS / (HE_HI - HE_LO);
    const double ufd = kc->uf ? 1.0 : 0.0;
    for (size_t i = 0; i < bs; i++) {
        const double xv = x[i], qv = q[i];
        const double a = fabs(xv);
        const double A = 24.0 * a;
        double qm = 0.0;
        qm = A > t0 ? q1 : qm;
        qm = A > t1 ? q2 : qm;
        qm = A > t2 ? q3 : qm;
        qm = A > t3 ? q4 : qm;
        qm = A > t4 ? q5 : qm;
        qm = A > t5 ? q6 : qm;
        qm = A > t6 ? q7 : qm;
        const double qs = copysign(qm, xv);
        const double e = qv - xv, es = qv - qs, est = qs - xv;
        const double dzm = (double)(qm == 0.0);
        const double edz = est * dzm, eg = est - edz;
        const double topm = (double)((codes[i] & 7) == 7);
        const double clipm = (double)(a > fabs(qv)) * topm * (1.0 - ufd);
        const double es2 = es * es;
        T[S_X2][i] = xv * xv;
        T[S_E2][i] = e * e;
        T[S_ES2][i] = es2;
        T[S_EDZ2][i] = edz * edz;
        T[S_EG2][i] = eg * eg;
        T[S_CSG][i] = es * eg;
        T[S_CSD][i] = es * edz;
        T[S_CDG][i] = edz * eg;
        T[S_EC2][i] = es2 * clipm;
        T[S_EU2][i] = es2 * ufd;
        T[S_ER2][i] = es2 * (1.0 - clipm) * (1.0 - ufd);
        T[S_EABS][i] = fabs(e);
        T[S_CH + 0][i] = dzm;
        T[S_CH + 1][i] = (double)(A == th0) * mpos;
        T[S_CH + 2][i] = (double)(xv == 0.0);
        T[S_CH + 3][i] = clipm;
        T[S_CH + 4][i] = fabs(e - (es + edz + eg));
        double f = (e * inv_s - HE_LO) * hscale;
        f = f > 0.0 ? f : 0.0;
        f = f < FP4S_HIST_BINS - 1 ? f : FP4S_HIST_BINS - 1;
        bins[i] = (int32_t)f;
    }
    /* pass 2: add into the caller's 8 lanes (element i to lane i mod 8) */
    for (int k = 0; k < S_CH + 4; k++)
        for (size_t i0 = 0; i0 < bs; i0 += LW)
            for (int j = 0; j < LW; j++) ln->l[k][j] += T[k][i0 + (size_t)j];
    for (size_t i0 = 0; i0 < bs; i0 += LW)
        for (int j = 0; j < LW; j++) {
            const double v = T[S_CH + 4][i0 + (size_t)j];
            ln->r[j] = v > ln->r[j] ? v : ln->r[j];
        }
}
