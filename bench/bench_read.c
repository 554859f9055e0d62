/* The plain read that the CPU scaling of fp4-quant and fp4-decompose is
 * measured against (scripts/device/cpu_scaling.sh): every row of a source
 * read through fp4s_source_read into one float32 chunk buffer of about 2^20
 * elements (fp4-quant's default chunk), nothing else done; best of N runs.
 *
 *   bench_read SOURCE [N]      prints "read SECONDS GB/s" (float32 bytes) */
#include <fp4scope/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_read SOURCE [N]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (reps < 1) reps = 1;
    fp4s_source *src = NULL;
    if (fp4s_source_open(argv[1], &src)) {
        fprintf(stderr, "bench_read: %s\n", fp4s_last_error());
        return 3;
    }
    size_t rows = fp4s_source_rows(src), cols = fp4s_source_cols(src);
    size_t chunk = cols ? ((size_t)1 << 20) / cols : 1;
    if (chunk < 1) chunk = 1;
    float *buf = malloc(chunk * (cols ? cols : 1) * sizeof(float));
    if (!buf) return 5;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (size_t r0 = 0; r0 < rows; r0 += chunk) {
            size_t n = rows - r0 < chunk ? rows - r0 : chunk;
            if (fp4s_source_read(src, r0, n, buf, cols)) {
                fprintf(stderr, "bench_read: %s\n", fp4s_last_error());
                return 3;
            }
        }
        double t = bench_now() - t0;
        if (t < best) best = t;
    }
    printf("read %.4f %.2f\n", best, rows * cols * 4.0 / best / 1e9);
    free(buf);
    fp4s_source_close(&src);
    return 0;
}
