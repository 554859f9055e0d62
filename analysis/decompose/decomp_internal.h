/* Internal pieces of the decomposition shared by decompose.c, channels.c and
 * the unit tests (not installed). */
#ifndef FP4S_DECOMP_INTERNAL_H
#define FP4S_DECOMP_INTERNAL_H

#include <fp4scope/decompose.h>
#include "xsum.h"

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

typedef struct part {  /* one block, plain double */
    double s[S_N];
    uint64_t c[C_NUM];
    double gmin, gmax, dmin, dmax, amax, res;
} part;

typedef struct xacc {  /* a group, exact */
    xsum s[S_N];
    uint64_t c[C_NUM];
    double gmin, gmax, dmin, dmax, amax, res;
} xacc;

typedef struct chacc { /* a channel, exact, per element */
    xsum s[S_CH];
    uint64_t c[C_CH];
    double amax, res;
} chacc;

/* Reference E2M1 rounding of t >= 0 in double with the tie rules (the kernels
 * decide by exact comparisons instead; the tests check both agree). */
double fp4s_decomp_e2m1_round(double t, fp4s_tie tie, fp4s_dz_tie dzt);
/* Force the portable element kernel (true) or pick by CPU (false). */
void fp4s_decomp_kernel_force_portable(bool force);
/* Rows decomposed so far by the fused AVX-512 row path (for the tests: they
 * check that the path they compare was taken). */
uint64_t fp4s_decomp_fused_rows(void);
/* Whether this build and CPU have the fused row path. */
bool fp4s_decomp_fused_available(void);
void fp4s_xacc_init(xacc *a);
void fp4s_part_init(part *p);
void fp4s_xacc_add_part(xacc *a, const part *p);
void fp4s_xacc_merge(xacc *a, const xacc *b);
void fp4s_xacc_finish(const xacc *a, fp4s_decomp_result *r);

#endif
