/* Exact fixed-point superaccumulator for sums of doubles (internal; the
 * decomposition's sums and the quantizer's err2/x2, kernels/cpu/quant_sums.h).
 *
 * The value is sum_i l[i] * 2^(32 i + XS_LSB). Each added double is split into
 * 32-bit digits at its bit position and added to three limbs; limbs are int64,
 * so carries are propagated only every 2^30 additions. Terms below 2^XS_LSB are
 * truncated toward zero (deterministically, term by term), terms whose top bit
 * reaches 2^XS_TOP set the overflow flag. Addition of the limbs is exact and
 * associative, so the result does not depend on the order of terms or merges.
 *
 * The CUDA decomposition (kernels/cuda/decomp_lane.cuh) adds into the same
 * limbs: xs_split is shared by host and device, which sum digits with integer
 * atomics and hand back xsum values that xs_merge takes like any other. */
#ifndef FP4S_XSUM_H
#define FP4S_XSUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define XS_LIMBS 24
#define XS_LSB (-416)
#define XS_TOP (XS_LSB + 32 * XS_LIMBS - 32) /* room kept in the top limb for carries and sign */

enum { XS_POSINF = 1, XS_NEGINF = 2, XS_NAN = 4, XS_OVERFLOW = 8 };

#if defined(__CUDACC__)
#define XS_FN static inline __host__ __device__
#else
#define XS_FN static inline
#endif

typedef struct xsum {
    int64_t l[XS_LIMBS];
    uint32_t adds;
    uint32_t special;
} xsum;

XS_FN void xs_norm(xsum *s)
{
    for (int i = 0; i < XS_LIMBS - 1; i++) {
        int64_t c = s->l[i] >> 32; /* floor division by 2^32 */
        s->l[i] -= c * ((int64_t)1 << 32);
        s->l[i + 1] += c;
    }
    s->adds = 0;
}

/* The digits of v: v = neg ? -(d[0] + d[1] 2^32 + d[2] 2^64) 2^(32 li + XS_LSB)
 * : (...), each d[k] in [0, 2^32). Returns 1 with the digits, or 0 when v adds
 * nothing to the limbs (zero, below 2^XS_LSB, or special: then *special gets
 * its XS_* bits). */
XS_FN int xs_split(double v, int *li, int64_t d[3], int *neg, uint32_t *special)
{
    if (v == 0.0) return 0;
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    int ex = (int)((b >> 52) & 0x7ff);
    uint64_t mant = b & ((UINT64_C(1) << 52) - 1);
    *neg = (int)(b >> 63);
    if (ex == 0x7ff) {
        *special |= mant ? XS_NAN : (*neg ? XS_NEGINF : XS_POSINF);
        return 0;
    }
    if (ex == 0) ex = 1;
    else mant |= UINT64_C(1) << 52;
    int pos = ex - 1075 - XS_LSB; /* bit index of the mantissa's lsb */
    if (pos < 0) {
        if (pos <= -53) return 0;
        mant >>= -pos;
        pos = 0;
        if (!mant) return 0;
    }
    int sh = pos & 31;
    *li = pos >> 5;
    if (pos + 53 > XS_TOP - XS_LSB) {
        *special |= XS_OVERFLOW | (*neg ? XS_NEGINF : XS_POSINF);
        return 0;
    }
    /* mant << sh has at most 85 bits: the low 64 and the rest */
    const uint64_t lo = mant << sh, hi = sh ? mant >> (64 - sh) : 0;
    d[0] = (int64_t)(lo & 0xffffffffu);
    d[1] = (int64_t)(lo >> 32);
    d[2] = (int64_t)hi;
    return 1;
}

XS_FN void xs_add(xsum *s, double v)
{
    int li = 0, neg = 0;
    int64_t d[3];
    if (!xs_split(v, &li, d, &neg, &s->special)) return;
    if (neg) {
        s->l[li] -= d[0]; s->l[li + 1] -= d[1]; s->l[li + 2] -= d[2];
    } else {
        s->l[li] += d[0]; s->l[li + 1] += d[1]; s->l[li + 2] += d[2];
    }
    if (++s->adds >= (1u << 30)) xs_norm(s);
}

XS_FN void xs_merge(xsum *into, const xsum *from)
{
    xsum f = *from;
    xs_norm(&f);
    xs_norm(into);
    for (int i = 0; i < XS_LIMBS; i++) into->l[i] += f.l[i];
    into->special |= f.special;
    xs_norm(into);
}

/* The value rounded to double (deterministic function of the exact sum). */
XS_FN double xs_value(const xsum *s)
{
    if (s->special & XS_NAN) return NAN;
    if ((s->special & XS_POSINF) && (s->special & XS_NEGINF)) return NAN;
    if (s->special & XS_POSINF) return INFINITY;
    if (s->special & XS_NEGINF) return -INFINITY;
    xsum t = *s;
    xs_norm(&t);
    /* limbs 0..n-2 are in [0, 2^32), the top one carries the sign: take the
     * magnitude in two's complement so that summing from the top is accurate */
    int neg = t.l[XS_LIMBS - 1] < 0;
    if (neg) {
        /* negate: -(sum) ; complement every limb and add one, renormalise */
        for (int i = 0; i < XS_LIMBS; i++) t.l[i] = -t.l[i];
        xs_norm(&t);
    }
    double v = 0.0;
    int top = XS_LIMBS - 1;
    while (top >= 0 && t.l[top] == 0) top--;
    for (int i = top; i >= 0 && i >= top - 3; i--)
        v += ldexp((double)t.l[i], 32 * i + XS_LSB);
    return neg ? -v : v;
}

#endif
