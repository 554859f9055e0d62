/* The random numbers of the CUDA tests (test_cuda_decomp.c, test_cuda_qstats.c,
 * test_cuda_remedy.c): one xorshift64 state (shifts 13, 7, 17) per program,
 * seeded by its main from --seed (never 0), and what the tests draw from it. */
#ifndef FP4S_TESTS_CUDA_RNG_H
#define FP4S_TESTS_CUDA_RNG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t rng;

static inline uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* uniform in [0, 1) with 53 bits */
static inline double rndf(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* in [0, n) */
static inline uint32_t rndu(uint32_t n) { return (uint32_t)(rnd() % n); }

/* a standard normal by Box-Muller, in double and rounded to float */
static inline double gaussd(void)
{
    double u = rndf() + 1e-300, v = rndf();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static inline float gauss(void) { return (float)gaussd(); }

/* v with a random sign */
static inline float sgn(float v) { return (rnd() & 1) ? -v : v; }

/* the float of bits u */
static inline float b2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
