/* The tensor that tests/mpi's unit tests cut into row ranges (test_parts.c,
 * test_cuda_rows.c): [PARTS_ROWS, PARTS_COLS] gaussian values with a random
 * scale per element, an outlier channel (7), zeros, a NaN and an Inf. */
#ifndef FP4S_TESTS_MPI_PARTS_DATA_H
#define FP4S_TESTS_MPI_PARTS_DATA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define PARTS_ROWS ((size_t)203)
#define PARTS_COLS ((size_t)96)

static uint64_t parts_rng = 88172645463325252ULL;
static double urand(void)
{
    parts_rng ^= parts_rng << 13;
    parts_rng ^= parts_rng >> 7;
    parts_rng ^= parts_rng << 17;
    return (double)(parts_rng >> 11) / 9007199254740992.0;
}

static void parts_fill(float *x)
{
    for (size_t i = 0; i < PARTS_ROWS * PARTS_COLS; i++) {
        double u = urand(), v = urand();
        double g = sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
        x[i] = (float)(g * ((i % PARTS_COLS) == 7 ? 40.0 : 1.0) * exp(3 * urand() - 1.5));
        if (i % 97 == 0) x[i] = 0.0f;
    }
    x[5 * PARTS_COLS + 3] = NAN;
    x[150 * PARTS_COLS + 40] = INFINITY;
}

#endif
