/* splitmix64 (Steele, Lea and Flood's finalizer on a Weyl sequence), the
 * generator of the tests' and benchmarks' random data: the same seed gives
 * the same values in every one of them. */
#ifndef FP4S_TESTS_SPLITMIX_H
#define FP4S_TESTS_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): the top 53 bits and a half, times 2^-53. */
static inline double splitmix_unit(uint64_t *state)
{
    return ((double)(splitmix_next(state) >> 11) + 0.5) * 0x1.0p-53;
}

#endif
