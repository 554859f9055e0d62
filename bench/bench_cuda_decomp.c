/* The decomposition on the GPU against the CPU one, on one large synthetic
 * tensor held in memory (bench/RESULTS-H200.md, section Decomposition):
 *
 *   bench_cuda_decomp [--gib G] [--cols K] [--chan-gib G] [--reps N] [--cpu-reps N]
 *
 * A [rows, K] float32 tensor of G GiB (default 10) is filled on the host
 * (Gaussian-like values, per-block scales spread over 2^-8..2^8, outliers,
 * some all-zero blocks) and copied to the GPU. For MXFP4 and NVFP4 (the
 * default profiles), by tensor on the whole tensor and by channel on its
 * first --chan-gib GiB (default 1): the GPU decomposition
 * (fp4s_cuda_decomp_add on device memory; NVFP4 with the tensor amax by
 * fp4s_cuda_amax first, inside the timing) --reps times (median), the CPU
 * one (fp4s_decomp_add on host memory, fp4s_amax first for NVFP4, all
 * worker threads) --cpu-reps times (median), and whether the two give the
 * same summary, groups and histograms byte for byte. The device copy ceiling
 * (cudaMemcpy device to device of 1 GiB, read + write bytes / time) is
 * measured in the same run; "of copy" is the GPU's input bytes per second
 * over it. Rows are printed as "RESULT fmt by GiB cpu_s gpu_s speedup
 * gpu_GBps of_copy identical". Exit 0, 1 when a result differs, 77 without
 * a usable GPU. */
#include <fp4scope/fp4scope.h>

#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

struct fill_job {
    float *x;
    size_t r0, r1, cols;
    uint64_t seed;
};

static void *fill_rows(void *p)
{
    struct fill_job *j = p;
    uint64_t s = j->seed | 1;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
    for (size_t r = j->r0; r < j->r1; r++) {
        float *row = j->x + r * j->cols;
        for (size_t b = 0; b < j->cols; b += 16) {
            uint64_t h = NEXT();
            const float sc = ldexpf(1.0f, (int)(h % 17) - 8);
            const bool zero = (h >> 8) % 97 == 0;
            for (size_t i = 0; i < 16; i++) {
                uint64_t u = NEXT();
                /* sum of four uniforms: mean 0, variance 1/3 */
                float v = (float)((int)(u & 0xffff) + (int)((u >> 16) & 0xffff) + (int)((u >> 32) & 0xffff) +
                                  (int)((u >> 48) & 0xffff) - 131070) * (1.0f / 37837.0f);
                if ((u & 0x3f00) == 0) v *= 12.0f;
                row[b + i] = zero ? 0.0f : v * sc;
            }
        }
    }
#undef NEXT
    return NULL;
}

static void fill(float *x, size_t rows, size_t cols)
{
    enum { NT = 32 };
    pthread_t th[NT];
    bool started[NT];
    struct fill_job jb[NT];
    for (int t = 0; t < NT; t++) {
        jb[t] = (struct fill_job){x, rows * t / NT, rows * (t + 1) / NT, cols, 0x9E3779B97F4A7C15ull * (t + 1)};
        started[t] = pthread_create(&th[t], NULL, fill_rows, &jb[t]) == 0;
        if (!started[t]) fill_rows(&jb[t]);
    }
    for (int t = 0; t < NT; t++)
        if (started[t]) pthread_join(th[t], NULL);
}

static int same(const fp4s_decomp *a, const fp4s_decomp *b)
{
    fp4s_decomp_result ra, rb;
    fp4s_decomp_summary(a, &ra);
    fp4s_decomp_summary(b, &rb);
    if (memcmp(&ra, &rb, sizeof ra)) return 0;
    if (fp4s_decomp_ngroups(a) != fp4s_decomp_ngroups(b)) return 0;
    for (size_t g = 0; g < fp4s_decomp_ngroups(a); g++) {
        fp4s_decomp_group(a, g, &ra);
        fp4s_decomp_group(b, g, &rb);
        if (memcmp(&ra, &rb, sizeof ra)) return 0;
    }
    for (int k = 0; k < 2; k++) {
        fp4s_decomp_hist ha, hb;
        fp4s_decomp_hist_get(a, (fp4s_decomp_hist_kind)k, &ha);
        fp4s_decomp_hist_get(b, (fp4s_decomp_hist_kind)k, &hb);
        if (memcmp(&ha, &hb, sizeof ha)) return 0;
    }
    return 1;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_cuda_decomp: %s: %s\n", what, fp4s_last_error());
    exit(1);
}

/* One decomposition of rows [0, rows) on the CPU (host x) or the GPU (d_x). */
static fp4s_decomp *decompose(const fp4s_spec *s, fp4s_group by, const float *x, const float *d_x, size_t rows,
                              size_t cols, double *secs)
{
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    fp4s_tscale ts;
    double t0 = bench_now();
    float amax = 0.0f;
    if (s->format == FP4S_NVFP4) {
        if (d_x) {
            if (fp4s_cuda_amax(d_x, rows, cols, cols, &amax, NULL, NULL)) die("cuda amax");
        } else {
            amax = fp4s_amax(x, rows, cols, cols, NULL);
        }
    }
    if (fp4s_tscale_init(s, amax, &ts)) die("tscale");
    fp4s_decomp *d = NULL;
    if (fp4s_decomp_open(s, &ts, &o, rows, cols, &d)) die("open");
    int rc = d_x ? fp4s_cuda_decomp_add(d, FP4S_DT_F32, d_x, rows, cols, 0, NULL) : fp4s_decomp_add(d, x, rows, cols, 0);
    if (rc) die(d_x ? "gpu decomposition" : "cpu decomposition");
    *secs = bench_now() - t0;
    return d;
}

int main(int argc, char **argv)
{
    double gib = 10.0, chan_gib = 1.0;
    size_t cols = 4096;
    int reps = 5, cpu_reps = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--chan-gib") && i + 1 < argc) chan_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu-reps") && i + 1 < argc) cpu_reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_cuda_decomp [--gib G] [--cols K] [--chan-gib G] [--reps N] [--cpu-reps N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 5;
    if (cpu_reps < 1 || cpu_reps > 64) cpu_reps = 1;
    if (!fp4s_cuda_available()) {
        char why[320];
        fp4s_cuda_describe(why, sizeof why);
        printf("bench_cuda_decomp: %s: skipped\n", why);
        return 77;
    }
    if (cols == 0 || cols % 32) cols = 4096;
    size_t rows = (size_t)(gib * 1073741824.0 / 4.0 / (double)cols) / 16 * 16;
    size_t crows = (size_t)(chan_gib * 1073741824.0 / 4.0 / (double)cols) / 16 * 16;
    if (rows < 16) rows = 16;
    if (crows < 16) crows = 16;
    if (crows > rows) crows = rows;
    const size_t n = rows * cols;
    char dev[320];
    fp4s_cuda_describe(dev, sizeof dev);
    printf("bench_cuda_decomp: %s; CPU: %d worker threads; tensor [%zu, %zu] float32 = %.2f GiB"
           " (channel rows: %zu = %.2f GiB)\n",
           dev, fp4s_get_threads(), rows, cols, n * 4.0 / 1073741824.0, crows, crows * cols * 4.0 / 1073741824.0);
    float *x = malloc(n * sizeof(float));
    float *d_x = NULL;
    void *d_c = NULL;
    if (!x || cudaMalloc((void **)&d_x, n * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "bench_cuda_decomp: out of memory for %zu elements\n", n);
        return 1;
    }
    double t0 = bench_now();
    fill(x, rows, cols);
    double tf = bench_now() - t0;
    t0 = bench_now();
    if (cudaMemcpy(d_x, x, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
        fprintf(stderr, "bench_cuda_decomp: copy to the GPU failed\n");
        return 1;
    }
    printf("fill %.2f s, host to device %.2f s (%.1f GB/s)\n", tf, bench_now() - t0, n * 4.0 / (bench_now() - t0) / 1e9);
    /* the device copy ceiling: 1 GiB (or the tensor) device to device, read + write bytes */
    size_t cb = n * sizeof(float) < ((size_t)1 << 30) ? n * sizeof(float) : ((size_t)1 << 30);
    double copy_bw = 0.0;
    if (cudaMalloc(&d_c, cb) == cudaSuccess) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        double tv[16];
        for (int r = 0; r < 16; r++) {
            cudaEventRecord(e0, NULL);
            cudaMemcpyAsync(d_c, (const char *)d_x + (r % 2) * (n * sizeof(float) - cb), cb, cudaMemcpyDeviceToDevice, NULL);
            cudaEventRecord(e1, NULL);
            cudaEventSynchronize(e1);
            float ms = 0.0f;
            cudaEventElapsedTime(&ms, e0, e1);
            tv[r] = ms * 1e-3;
        }
        copy_bw = 2.0 * (double)cb / bench_median(tv + 2, 14) / 1e9;
        cudaFree(d_c);
        printf("device copy (%zu MiB, median of 14): %.0f GB/s (read + write)\n", cb >> 20, copy_bw);
    }
    int bad = 0;
    printf("\n| format | by | GiB | CPU s | GPU s | speedup | GPU GB/s (input) | of copy | identical |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    const fp4s_format fmts[2] = {FP4S_MXFP4, FP4S_NVFP4};
    const fp4s_group bys[2] = {FP4S_GROUP_TENSOR, FP4S_GROUP_CHANNEL};
    for (int fi = 0; fi < 2; fi++)
        for (int bi = 0; bi < 2; bi++) {
            fp4s_spec s;
            if (fp4s_spec_profile(&s, fmts[fi], fp4s_default_profile(fmts[fi]))) die("profile");
            const size_t r = bys[bi] == FP4S_GROUP_CHANNEL ? crows : rows;
            double tg[64], tc[64];
            fp4s_decomp *g = NULL, *c = NULL;
            for (int k = 0; k < reps; k++) {
                fp4s_decomp *t = decompose(&s, bys[bi], NULL, d_x, r, cols, &tg[k]);
                if (g) fp4s_decomp_close(&t);
                else g = t;
            }
            for (int k = 0; k < cpu_reps; k++) {
                fp4s_decomp *t = decompose(&s, bys[bi], x, NULL, r, cols, &tc[k]);
                if (c) fp4s_decomp_close(&t);
                else c = t;
            }
            const double mg = bench_median(tg, reps), mc = bench_median(tc, cpu_reps);
            const int eq = same(c, g);
            bad += !eq;
            const double gbps = r * cols * 4.0 / mg / 1e9;
            printf("| %s | %s | %.2f | %.3f | %.4f | %.0fx | %.0f | %.0f%% | %s |\n", fp4s_format_name(fmts[fi]),
                   fp4s_group_name(bys[bi]), r * cols * 4.0 / 1073741824.0, mc, mg, mc / mg, gbps,
                   copy_bw > 0 ? 100.0 * gbps / copy_bw : 0.0, eq ? "yes" : "NO");
            printf("RESULT %s %s %.2f %.4f %.5f %.1f %.1f %.3f %s\n", fp4s_format_name(fmts[fi]),
                   fp4s_group_name(bys[bi]), r * cols * 4.0 / 1073741824.0, mc, mg, mc / mg, gbps,
                   copy_bw > 0 ? gbps / copy_bw : 0.0, eq ? "identical" : "DIFFERENT");
            fflush(stdout);
            fp4s_decomp_close(&g);
            fp4s_decomp_close(&c);
        }
    cudaFree(d_x);
    free(x);
    return bad ? 1 : 0;
}
