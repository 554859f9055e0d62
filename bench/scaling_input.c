/* The input of the CPU scaling table (scripts/device/cpu_scaling.sh): a
 * float32 .npy [ROWS, COLS] of gaussian values times a random power of two
 * 2^-8..2^7 per 32-element block (so that the block scales vary), from a
 * fixed seed, written row chunk by row chunk (no numpy needed, a few seconds
 * for 1 GiB).
 *
 *   scaling_input OUT.npy ROWS [COLS]      (COLS default 1024, a multiple of 32) */
#include <fp4scope/tensor.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t next(void) /* xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Du;
}

static double unit(void) { return ((next() >> 11) + 0.5) * 0x1p-53; } /* (0, 1) */

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: scaling_input OUT.npy ROWS [COLS]\n");
        return 2;
    }
    long long rows = atoll(argv[2]), cols = argc > 3 ? atoll(argv[3]) : 1024;
    if (rows < 1 || cols < 32 || cols % 32) {
        fprintf(stderr, "scaling_input: ROWS >= 1 and COLS a multiple of 32 expected\n");
        return 2;
    }
    fp4s_npy_writer *w = NULL;
    int rc = fp4s_npy_writer_open(argv[1], FP4S_DT_F32, 2, (size_t)rows, (size_t)cols, &w);
    const size_t step = 256;
    float *buf = rc ? NULL : malloc(step * (size_t)cols * sizeof *buf);
    if (!rc && !buf) rc = -1;
    for (long long r0 = 0; !rc && r0 < rows; r0 += (long long)step) {
        size_t n = rows - r0 < (long long)step ? (size_t)(rows - r0) : step;
        for (size_t i = 0; i < n * (size_t)cols; i += 2) { /* Box-Muller pairs */
            double rad = sqrt(-2.0 * log(unit())), t = 2.0 * M_PI * unit();
            buf[i] = (float)(rad * cos(t));
            buf[i + 1] = (float)(rad * sin(t));
        }
        for (size_t b = 0; b < n * (size_t)cols; b += 32) {
            float s = ldexpf(1.0f, (int)(next() >> 60) - 8);
            for (size_t k = 0; k < 32; k++) buf[b + k] *= s;
        }
        rc = fp4s_npy_writer_rows(w, buf, n);
    }
    free(buf);
    if (!rc) rc = fp4s_npy_writer_close(&w);
    if (rc) {
        fprintf(stderr, "scaling_input: %s: %s\n", argv[1], rc == -1 ? "out of memory" : fp4s_last_error());
        fp4s_npy_writer_abort(&w);
        return rc == -1 ? 5 : 4;
    }
    return 0;
}
