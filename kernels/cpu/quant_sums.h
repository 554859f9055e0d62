/* The error sums of the quantizer (internal): the one definition of how
 * fp4s_qstats.err2 and x2 are added, shared by the reference and the SIMD
 * kernels, so that they are the same bits at every kernel level, thread count
 * and chunking.
 *
 * A unit is one scaling block of one row (MXFP4 32 elements, NVFP4 16, also
 * inside a 2-D tile) or, for FP8, 16 elements of a row starting at a column
 * that is a multiple of 16 (the last piece of a row may be shorter). The
 * terms, in double: x*x and e*e with e = (double)q - (double)x, each product
 * rounded on its own (no FMA); an element the sums leave out (a non-finite
 * input, a block with a NaN scale) is the term +0. Element j of a unit goes
 * to lane j mod 8, each lane adds its terms in element order, and the lanes
 * are summed as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), the lane order of the
 * decomposition kernels. That partial is added to an exact fixed-point
 * accumulator (base/xsum.h), whose value depends on neither the order of
 * the units nor that of the merges; err2 and x2 are its value rounded to
 * double. fp4s_qstats keeps the accumulators (its `sums` words). */
#ifndef FP4S_QUANT_SUMS_H
#define FP4S_QUANT_SUMS_H

#include <fp4scope/quant.h>

#include <string.h>

#include "base/xsum.h"

typedef struct qsums {
    xsum e2, x2;
} qsums;

_Static_assert(sizeof(((fp4s_qstats *)0)->sums) == sizeof(qsums),
               "fp4s_qstats.sums holds the two exact accumulators");

/* The lanes of a unit in the fixed order. */
static inline double qs_lanes(const double l[8])
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* One unit's lanes (e*e and x*x), added exactly. */
static inline void qs_unit(qsums *q, const double le[8], const double lx[8])
{
    xs_add(&q->e2, qs_lanes(le));
    xs_add(&q->x2, qs_lanes(lx));
}

/* Add the exact sums of b into a's, and set a's err2 and x2 from them. */
static inline void qs_merge_into(fp4s_qstats *a, const qsums *b)
{
    qsums s;
    memcpy(&s, a->sums, sizeof s);
    xs_merge(&s.e2, &b->e2);
    xs_merge(&s.x2, &b->x2);
    memcpy(a->sums, &s, sizeof s);
    a->err2 = xs_value(&s.e2);
    a->x2 = xs_value(&s.x2);
}

#endif
