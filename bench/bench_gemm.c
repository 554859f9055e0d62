/* The CPU GEMM's two paths (lib/core/gemm.h): the fixed-order default against
 * the BLAS in fixed tiles, on the shapes of the RL testbed (one thread, as
 * its workers call them) and of fp4-remedy (every thread), float32 and
 * float64. GFLOP/s, median of 5 timings of at least 0.2 s each
 * (bench/RESULTS.md, section GEMM).
 *   bench_gemm [THREADS]   (default: FP4S_THREADS or every CPU for the remedy shapes) */
#include "bench_util.h"

#include <fp4scope/common.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm.h"

typedef struct shape {
    const char *what;
    size_t M, N, K;
    bool ta, tb, dbl;
    int threads; /* 1, or 0: the remedy's (every thread) */
} shape;

static const shape shapes[] = {
    {"rl: qkv forward, 2 x 64-seq micro-batch", 1344, 192, 64, false, true, false, 1},
    {"rl: expert gate_up forward", 640, 256, 64, false, true, false, 1},
    {"rl: expert down dX (nn)", 640, 128, 64, false, false, false, 1},
    {"rl: qkv dW (tn)", 192, 64, 1344, true, false, false, 1},
    {"rl: decode row block", 16, 192, 64, false, true, false, 1},
    {"rl: lm_head of a micro-batch (width 128)", 1344, 16, 128, false, true, false, 1},
    {"remedy: synth-moe site float32", 128, 128, 256, false, true, false, 0},
    {"remedy: a 4096-token site float32", 4096, 1024, 1024, false, true, false, 0},
    {"remedy: a 4096-token site float64 (references)", 4096, 1024, 1024, false, true, true, 0},
};

static double gflops(const shape *s, fp4s_gemm_path p, void *A, void *B, void *C)
{
    if (fp4s_set_gemm(p)) return -1;
    double t[5];
    for (int r = 0; r < 5; r++) {
        int it = 0;
        double t0 = bench_now(), el;
        do {
            int rc = s->dbl ? fp4s_gemm_f64(s->ta, s->tb, s->M, s->N, s->K, A, s->ta ? s->M : s->K, B,
                                            s->tb ? s->K : s->N, 0.0, C, s->N, s->threads)
                            : fp4s_gemm_f32(s->ta, s->tb, s->M, s->N, s->K, A, s->ta ? s->M : s->K, B,
                                            s->tb ? s->K : s->N, 0.0f, C, s->N, s->threads);
            if (rc) return -1;
            it++;
            el = bench_now() - t0;
        } while (el < 0.2);
        t[r] = 2.0 * (double)s->M * (double)s->N * (double)s->K * it / el * 1e-9;
    }
    qsort(t, 5, sizeof t[0], bench_cmp_double);
    return t[2];
}

int main(int argc, char **argv)
{
    if (argc > 1) fp4s_set_threads(atoi(argv[1]));
    printf("threads %d for the remedy shapes (the RL shapes: 1)\n", fp4s_get_threads());
    printf("%-48s %6s %6s %6s  %9s %9s %6s\n", "shape", "M", "N", "K", "fixed", "blas", "ratio");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        size_t es = s->dbl ? 8 : 4;
        char *A = malloc(s->M * s->K * es), *B = malloc(s->N * s->K * es), *C = malloc(s->M * s->N * es);
        if (!A || !B || !C) return 5;
        for (size_t k = 0; k < s->M * s->K; k++)
            if (s->dbl) ((double *)A)[k] = (double)(k % 97) / 97 - 0.5;
            else ((float *)A)[k] = (float)(k % 97) / 97 - 0.5f;
        for (size_t k = 0; k < s->N * s->K; k++)
            if (s->dbl) ((double *)B)[k] = (double)(k % 89) / 89 - 0.5;
            else ((float *)B)[k] = (float)(k % 89) / 89 - 0.5f;
        double f = gflops(s, FP4S_GEMM_FIXED, A, B, C), b = gflops(s, FP4S_GEMM_BLAS, A, B, C);
        printf("%-48s %6zu %6zu %6zu  %6.1f GF %6.1f GF %6.2f\n", s->what, s->M, s->N, s->K, f, b,
               b > 0 ? f / b : 0.0);
        free(A), free(B), free(C);
    }
    return 0;
}
