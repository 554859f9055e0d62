/* The AVX-512 decomposition kernels (decomp_kernels.h), compiled with
 * -mavx512f -O3 -fno-trapping-math:
 * - fp4s_dk_block_avx512: the element loop of one block in GCC vector
 *   extensions, 8 lanes of double (element i in lane i mod 8). It keeps its 17
 *   accumulators in registers only with the 32 vector registers of AVX-512;
 *   below that the portable loop (decomp_block.c) is faster. It does the
 *   portable loop's IEEE operations lane by lane, so the sums are identical.
 * - fp4s_dk_row_avx512: the fused row path for the tensor and row groupings.
 *   A prepass over the row's blocks (in block order, the same scalar
 *   operations as the per-block path: counts, gamma and delta sums, the delta
 *   histogram) writes each block's kernel constants to a small table, then one
 *   element loop over the whole row keeps the lane accumulators in registers
 *   and reads the constants of the current block from that table. The element
 *   operations and the lane of every element are those of the per-block
 *   kernels, so the sums are the same bits (tests/decompose checks it on every
 *   spec). A row holding a non-finite input or output is declined. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/decomp_kernels.h"

typedef double v8d __attribute__((vector_size(64)));
typedef long long v8l __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef unsigned char v8u8 __attribute__((vector_size(8)));

#define vsel(m, a, b) ((v8d)(((v8l)(a) & (m)) | ((v8l)(b) & ~(m))))

void fp4s_dk_block_avx512(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                          size_t bs, const kconst *restrict kc, lanes *restrict ln, int32_t *restrict bins)
{
    const double *tu = kc->tu;
    const v8l absm = (v8l){0} + 0x7fffffffffffffffLL, sgnm = ~absm;
    const v8d zero = {0}, one = zero + 1.0;
    const v8d t0 = zero + tu[0], t1 = zero + tu[1], t2 = zero + tu[2], t3 = zero + tu[3], t4 = zero + tu[4],
              t5 = zero + tu[5], t6 = zero + tu[6], th0 = zero + kc->th[0];
    const v8d q1 = zero + kc->qtab[1], q2 = zero + kc->qtab[2], q3 = zero + kc->qtab[3], q4 = zero + kc->qtab[4],
              q5 = zero + kc->qtab[5], q6 = zero + kc->qtab[6], q7 = zero + kc->qtab[7];
    const v8d inv_s = zero + kc->inv_s, hlo = zero + HE_LO, hsc = zero + FP4S_HIST_BINS / (HE_HI - HE_LO),
              hmax = zero + (FP4S_HIST_BINS - 1);
    const v8l ufm = (v8l){0} + (kc->uf ? -1LL : 0LL), mposm = (v8l){0} + (kc->mpos ? -1LL : 0LL);
    v8d L[S_CH + 4], R;
    for (int k = 0; k < S_CH + 4; k++) memcpy(&L[k], ln->l[k], sizeof(v8d));
    memcpy(&R, ln->r, sizeof R);
    for (size_t i = 0; i < bs; i += LW) {
        v8f xf, qf;
        memcpy(&xf, x + i, sizeof xf);
        memcpy(&qf, q + i, sizeof qf);
        v8u8 c8;
        memcpy(&c8, codes + i, sizeof c8);
        const v8d xv = __builtin_convertvector(xf, v8d), qv = __builtin_convertvector(qf, v8d);
        const v8l c = __builtin_convertvector(c8, v8l);
        const v8d a = (v8d)((v8l)xv & absm);
        const v8d A = 24.0 * a;
        v8d qm = zero;
        qm = vsel(A > t0, q1, qm);
        qm = vsel(A > t1, q2, qm);
        qm = vsel(A > t2, q3, qm);
        qm = vsel(A > t3, q4, qm);
        qm = vsel(A > t4, q5, qm);
        qm = vsel(A > t5, q6, qm);
        qm = vsel(A > t6, q7, qm);
        const v8d qs = (v8d)((v8l)qm | ((v8l)xv & sgnm));
        const v8d e = qv - xv, es = qv - qs, est = qs - xv;
        const v8l dzm = qm == zero;
        const v8d edz = (v8d)((v8l)est & dzm);
        const v8d eg = est - edz;
        const v8d aq = (v8d)((v8l)qv & absm);
        const v8l clipm = ((c & 7) == 7) & (a > aq) & ~ufm;
        const v8d es2 = es * es;
        L[S_X2] += xv * xv;
        L[S_E2] += e * e;
        L[S_ES2] += es2;
        L[S_EDZ2] += edz * edz;
        L[S_EG2] += eg * eg;
        L[S_CSG] += es * eg;
        L[S_CSD] += es * edz;
        L[S_CDG] += edz * eg;
        L[S_EC2] += (v8d)((v8l)es2 & clipm);
        L[S_EU2] += (v8d)((v8l)es2 & ufm);
        L[S_ER2] += (v8d)((v8l)es2 & ~(clipm | ufm));
        L[S_EABS] += (v8d)((v8l)e & absm);
        L[S_CH + 0] += (v8d)((v8l)one & dzm);
        L[S_CH + 1] += (v8d)((v8l)one & (A == th0) & mposm);
        L[S_CH + 2] += (v8d)((v8l)one & (xv == zero));
        L[S_CH + 3] += (v8d)((v8l)one & clipm);
        const v8d r = (v8d)((v8l)(e - (es + edz + eg)) & absm);
        R = vsel(r > R, r, R);
        v8d f = (e * inv_s - hlo) * hsc;
        f = vsel(f > zero, f, zero);
        f = vsel(f < hmax, f, hmax);
        const v8i bi = __builtin_convertvector(f, v8i);
        memcpy(bins + i, &bi, sizeof bi);
    }
    for (int k = 0; k < S_CH + 4; k++) memcpy(ln->l[k], &L[k], sizeof(v8d));
    memcpy(ln->r, &R, sizeof R);
}

/* Returns false (and touches nothing) when the row needs the per-block path. */
static bool row_prep(const fp4s_dk_spec *d, const float *restrict x, const float *restrict q,
                     const uint8_t *restrict sc, double *restrict kb, part *p, uint64_t *hd)
{
    const size_t bs = d->bs, nb = d->nb;
    double *md = kb + (size_t)KB_N * nb; /* m_b, then gamma_b (room after the table's nb entries) */
    uint32_t nfx = 0;
    __m512d mv[32]; /* m_b, eight blocks a vector, when nb <= 256 */
    bool have_mv = false;
    if (bs % 16 == 0 && nb <= 256) {
        for (size_t v = 0; v < (nb + 7) / 8; v++) mv[v] = _mm512_setzero_pd();
        /* the bits of |x| order like the values; a pattern at or above
         * 0x7f800000 is Inf or NaN. Outputs are only checked for it. */
        const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
        __m512i anyq = _mm512_setzero_si512();
        for (size_t b = 0; b < nb; b++) {
            __m512i vx = _mm512_setzero_si512();
            for (size_t i = b * bs; i < (b + 1) * bs; i += 16) {
                vx = _mm512_max_epu32(vx, _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), absm));
                anyq = _mm512_max_epu32(anyq, _mm512_and_si512(_mm512_loadu_si512((const void *)(q + i)), absm));
            }
            const uint32_t mx = (uint32_t)_mm512_reduce_max_epu32(vx);
            nfx |= (uint32_t)(mx >= 0x7f800000u);
            float m;
            memcpy(&m, &mx, sizeof m);
            md[b] = m;
            /* the same values as vectors of 8 blocks (no wide reload of
             * narrow stores below) */
            mv[b >> 3] = _mm512_mask_broadcastsd_pd(mv[b >> 3], (__mmask8)(1u << (b & 7)), _mm_set_sd((double)m));
        }
        have_mv = true;
        nfx |= (uint32_t)_mm512_cmpge_epu32_mask(anyq, inf);
    } else {
        for (size_t b = 0; b < nb; b++) {
            uint32_t mx = 0, mq = 0;
            for (size_t i = 0; i < bs; i++) {
                uint32_t bx, bq;
                memcpy(&bx, &x[b * bs + i], sizeof bx);
                memcpy(&bq, &q[b * bs + i], sizeof bq);
                bx &= 0x7fffffffu;
                bq &= 0x7fffffffu;
                mx = bx > mx ? bx : mx;
                mq = bq > mq ? bq : mq;
            }
            nfx |= (uint32_t)(mx >= 0x7f800000u) | (uint32_t)(mq >= 0x7f800000u);
            float m;
            memcpy(&m, &mx, sizeof m);
            md[b] = m;
        }
    }
    if (nfx) return false;
    const double *mid4 = fp4s_decomp_mid4;
    const bool *up = d->tie_up;
    /* eight blocks at a time, the same IEEE operations as decomp_block:
     * gamma = 6 seff / m, thresholds 4 mu m (a tie going up compared against
     * the double just below, -1 when m = 0), Q* magnitudes g m / 6, 6 / m */
    double *gm = md + nb;
    const __m512i m1 = _mm512_set1_epi64(INT64_C(-4616189618054758400)); /* bits of -1.0 */
    const __m512i vidx = _mm512_set_epi64(7 * KB_N, 6 * KB_N, 5 * KB_N, 4 * KB_N, 3 * KB_N, 2 * KB_N, KB_N, 0);
    const __m512d zero = _mm512_setzero_pd(), six = _mm512_set1_pd(6.0);
    for (size_t b0 = 0; b0 < nb; b0 += 8) {
        const size_t nl = nb - b0 < 8 ? nb - b0 : 8;
        const __mmask8 km = (__mmask8)(nl == 8 ? 0xFF : (1u << nl) - 1);
        double se[8];
        for (size_t j = 0; j < 8; j++) se[j] = j < nl ? d->seff[sc[b0 + j]] : 1.0;
        const __m512d m = have_mv ? mv[b0 >> 3] : _mm512_maskz_loadu_pd(km, md + b0);
        _mm512_mask_storeu_pd(gm + b0, km, _mm512_div_pd(_mm512_mul_pd(six, _mm512_loadu_pd(se)), m));
        double *kq = kb + b0 * KB_N;
        for (int k = 0; k < 7; k++) {
            const __m512d t = _mm512_mul_pd(_mm512_set1_pd(mid4[k]), m);
            if (k == 0) _mm512_mask_i64scatter_pd(kq + KB_TH0, km, vidx, t, 8);
            __m512d tu = t;
            if (up[k]) {
                const __mmask8 pos = _mm512_cmp_pd_mask(t, zero, _CMP_GT_OQ);
                tu = _mm512_castsi512_pd(_mm512_mask_sub_epi64(m1, pos, _mm512_castpd_si512(t), _mm512_set1_epi64(1)));
            }
            _mm512_mask_i64scatter_pd(kq + KB_TU + k, km, vidx, tu, 8);
        }
        const __m512d d6 = _mm512_div_pd(m, six), d15 = _mm512_div_pd(_mm512_mul_pd(_mm512_set1_pd(1.5), m), six);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 0, km, vidx, _mm512_mul_pd(_mm512_set1_pd(0.5), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 1, km, vidx, d6, 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 2, km, vidx, d15, 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 3, km, vidx, _mm512_mul_pd(_mm512_set1_pd(2.0), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 4, km, vidx, _mm512_mul_pd(_mm512_set1_pd(2.0), d15), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 5, km, vidx, _mm512_mul_pd(_mm512_set1_pd(4.0), d6), 8);
        _mm512_mask_i64scatter_pd(kq + KB_Q + 6, km, vidx, m, 8);
        const __mmask8 nz = _mm512_cmp_pd_mask(m, zero, _CMP_NEQ_UQ);
        _mm512_mask_i64scatter_pd(kq + KB_INVS, km, vidx, _mm512_maskz_div_pd(nz, six, m), 8);
    }
    /* block statistics, in block order as decomp_block does them (in locals:
     * the histogram's counts could alias p's) */
    uint64_t nzb = 0, ngb = 0, nufb = 0;
    double sg = p->s[S_GAM], sg2 = p->s[S_GAM2], sd = p->s[S_DEL], sd2 = p->s[S_DEL2];
    double gmin = p->x.gmin, gmax = p->x.gmax, dmin = p->x.dmin, dmax = p->x.dmax, amax = p->x.amax;
    for (size_t b = 0; b < nb; b++) {
        const double m = md[b];
        bool uf = d->uf[sc[b]];
        if (m == 0.0) {
            nzb++;
            uf = false;
        } else {
            double gam = gm[b];
            double del = fp4s_dk_log2(gam);
            ngb++;
            nufb += uf;
            sg += gam;
            sg2 += gam * gam;
            sd += del;
            sd2 += del * del;
            if (gam < gmin) gmin = gam;
            if (gam > gmax) gmax = gam;
            if (del < dmin) dmin = del;
            if (del > dmax) dmax = del;
            hd[fp4s_hist_bin(del, HD_LO, HD_HI)]++;
        }
        if (m > amax) amax = m;
        /* masks as integers 0 or 0xFF in the table's slots */
        const int64_t ufi = uf ? 0xFF : 0, mpi = m != 0.0 ? 0xFF : 0;
        memcpy(&kb[b * KB_N + KB_UF], &ufi, sizeof ufi);
        memcpy(&kb[b * KB_N + KB_MPOS], &mpi, sizeof mpi);
    }
    p->c[C_BLOCKS] += nb;
    p->c[C_ZB] += nzb;
    p->c[C_GB] += ngb;
    p->c[C_UFB] += nufb;
    p->s[S_GAM] = sg;
    p->s[S_GAM2] = sg2;
    p->s[S_DEL] = sd;
    p->s[S_DEL2] = sd2;
    p->x.gmin = gmin;
    p->x.gmax = gmax;
    p->x.dmin = dmin;
    p->x.dmax = dmax;
    p->x.amax = amax;
    p->c[C_ELEM] += bs * nb;
    return true;
}

static void row_kernel(const float *restrict x, const float *restrict q, const uint8_t *restrict codes,
                       size_t bs, size_t nb, const double *restrict kb, double (*restrict lanes_l)[LW],
                       double *restrict rlanes, int32_t *restrict bins)
{
    /* Fewer operations than the per-block kernels for the same bits: a term
     * that is +0 or -0 there (edz*eg always; edz*edz, es*edz outside D_b;
     * eg*eg, es*eg inside; masked squares) adds nothing to a lane, since a
     * lane is never -0 (it starts at +0 and is a sum), so those lanes take a
     * masked add of the nonzero product instead; e - (es + edz + eg) equals
     * e - (es + est) up to the sign of a zero, which |.| removes; counts are
     * kept as integers (exact either way). */
    const __m512i absm = _mm512_set1_epi64(0x7fffffffffffffffLL), seven = _mm512_set1_epi64(7),
                  ones = _mm512_set1_epi64(1);
    const __m512d zero = _mm512_setzero_pd(), c24 = _mm512_set1_pd(24.0);
    const __m512d hlo = _mm512_set1_pd(HE_LO), hsc = _mm512_set1_pd(FP4S_HIST_BINS / (HE_HI - HE_LO)),
                  hmax = _mm512_set1_pd(FP4S_HIST_BINS - 1);
    __m512d lx2 = _mm512_loadu_pd(lanes_l[S_X2]), le2 = _mm512_loadu_pd(lanes_l[S_E2]),
            les2 = _mm512_loadu_pd(lanes_l[S_ES2]), ledz2 = _mm512_loadu_pd(lanes_l[S_EDZ2]),
            leg2 = _mm512_loadu_pd(lanes_l[S_EG2]), lcsg = _mm512_loadu_pd(lanes_l[S_CSG]),
            lcsd = _mm512_loadu_pd(lanes_l[S_CSD]), ler2 = _mm512_loadu_pd(lanes_l[S_ER2]),
            lec2 = _mm512_loadu_pd(lanes_l[S_EC2]), leu2 = _mm512_loadu_pd(lanes_l[S_EU2]),
            labs = _mm512_loadu_pd(lanes_l[S_EABS]), R = _mm512_loadu_pd(rlanes);
    __m512i ndz = _mm512_setzero_si512(), ntie = ndz, nzero = ndz, nclip = ndz;
    const double *kp = kb;
    const size_t n = bs * nb;
    size_t bend = bs;
    for (size_t i = 0; i < n; i += LW) {
        if (i == bend) {
            kp += KB_N;
            bend += bs;
        }
        const __m512d xv = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        const __m512d qv = _mm512_cvtps_pd(_mm256_loadu_ps(q + i));
        const __m512i c = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(codes + i)));
        const __m512d a = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(xv), absm));
        const __m512d A = _mm512_mul_pd(c24, a);
        __m512d qm = zero;
        for (int k = 0; k < 7; k++)
            qm = _mm512_mask_mov_pd(qm, _mm512_cmp_pd_mask(A, _mm512_set1_pd(kp[KB_TU + k]), _CMP_GT_OQ),
                                    _mm512_set1_pd(kp[KB_Q + k]));
        /* qs = copysign(qm, x) as the bits qm | sign(x) */
        const __m512d qs = _mm512_castsi512_pd(_mm512_ternarylogic_epi64(
            _mm512_castpd_si512(qm), _mm512_castpd_si512(xv), absm, 0xF4)); /* A | (B & ~C) */
        const __m512d e = _mm512_sub_pd(qv, xv), es = _mm512_sub_pd(qv, qs), est = _mm512_sub_pd(qs, xv);
        const __mmask8 dz = _mm512_cmp_pd_mask(qm, zero, _CMP_EQ_OQ);
        const __mmask8 uf = (__mmask8)((const int64_t *)(const void *)kp)[KB_UF]; /* 0 or 0xFF */
        const __m512d aq = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(qv), absm));
        __mmask8 clip = _mm512_cmpeq_epi64_mask(_mm512_and_si512(c, seven), seven);
        clip = _mm512_mask_cmp_pd_mask(clip, a, aq, _CMP_GT_OQ) & (__mmask8)~uf;
        const __m512d es2 = _mm512_mul_pd(es, es), est2 = _mm512_mul_pd(est, est), p = _mm512_mul_pd(es, est);
        lx2 = _mm512_add_pd(lx2, _mm512_mul_pd(xv, xv));
        le2 = _mm512_add_pd(le2, _mm512_mul_pd(e, e));
        les2 = _mm512_add_pd(les2, es2);
        ledz2 = _mm512_mask_add_pd(ledz2, dz, ledz2, est2);
        leg2 = _mm512_mask_add_pd(leg2, (__mmask8)~dz, leg2, est2);
        lcsg = _mm512_mask_add_pd(lcsg, (__mmask8)~dz, lcsg, p);
        lcsd = _mm512_mask_add_pd(lcsd, dz, lcsd, p);
        lec2 = _mm512_mask_add_pd(lec2, clip, lec2, es2);
        leu2 = _mm512_mask_add_pd(leu2, uf, leu2, es2);
        ler2 = _mm512_mask_add_pd(ler2, (__mmask8)~(clip | uf), ler2, es2);
        labs = _mm512_add_pd(labs, _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(e), absm)));
        ndz = _mm512_mask_add_epi64(ndz, dz, ndz, ones);
        const __mmask8 tie = _mm512_cmp_pd_mask(A, _mm512_set1_pd(kp[KB_TH0]), _CMP_EQ_OQ) &
                             (__mmask8)((const int64_t *)(const void *)kp)[KB_MPOS];
        ntie = _mm512_mask_add_epi64(ntie, tie, ntie, ones);
        nzero = _mm512_mask_add_epi64(nzero, _mm512_cmp_pd_mask(xv, zero, _CMP_EQ_OQ), nzero, ones);
        nclip = _mm512_mask_add_epi64(nclip, clip, nclip, ones);
        const __m512d r = _mm512_castsi512_pd(
            _mm512_and_si512(_mm512_castpd_si512(_mm512_sub_pd(e, _mm512_add_pd(es, est))), absm));
        R = _mm512_mask_mov_pd(R, _mm512_cmp_pd_mask(r, R, _CMP_GT_OQ), r);
        __m512d f = _mm512_mul_pd(_mm512_sub_pd(_mm512_mul_pd(e, _mm512_set1_pd(kp[KB_INVS])), hlo), hsc);
        f = _mm512_mask_mov_pd(zero, _mm512_cmp_pd_mask(f, zero, _CMP_GT_OQ), f);
        f = _mm512_mask_mov_pd(hmax, _mm512_cmp_pd_mask(f, hmax, _CMP_LT_OQ), f);
        _mm256_storeu_si256((__m256i *)(void *)(bins + i), _mm512_cvttpd_epi32(f));
    }
    _mm512_storeu_pd(lanes_l[S_X2], lx2);
    _mm512_storeu_pd(lanes_l[S_E2], le2);
    _mm512_storeu_pd(lanes_l[S_ES2], les2);
    _mm512_storeu_pd(lanes_l[S_EDZ2], ledz2);
    _mm512_storeu_pd(lanes_l[S_EG2], leg2);
    _mm512_storeu_pd(lanes_l[S_CSG], lcsg);
    _mm512_storeu_pd(lanes_l[S_CSD], lcsd);
    _mm512_storeu_pd(lanes_l[S_ER2], ler2);
    _mm512_storeu_pd(lanes_l[S_EC2], lec2);
    _mm512_storeu_pd(lanes_l[S_EU2], leu2);
    _mm512_storeu_pd(lanes_l[S_EABS], labs);
    /* lanes_l[S_CDG] stays as it is: every edz*eg is +0 or -0 */
    const __m512i cnt[4] = {ndz, ntie, nzero, nclip};
    for (int k = 0; k < 4; k++) {
        int64_t v[LW];
        _mm512_storeu_si512((void *)v, cnt[k]);
        for (int j = 0; j < LW; j++) lanes_l[S_CH + k][j] += (double)v[j];
    }
    _mm512_storeu_pd(rlanes, R);
}

bool fp4s_dk_row_avx512(const fp4s_dk_spec *d, const float *restrict x, const float *restrict q,
                        const uint8_t *restrict codes, const uint8_t *restrict sc, double *restrict kb, part *p,
                        uint64_t *hd, lanes *ln, int32_t *restrict bins)
{
    if (!row_prep(d, x, q, sc, kb, p, hd)) return false;
    row_kernel(x, q, codes, d->bs, d->nb, kb, ln->l, ln->r, bins);
    return true;
}
