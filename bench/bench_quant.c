/* Quantizer benchmark: ns/element and GB/s of fp4s_quantize and
 * fp4s_dequantize per format and kernel level, on one thread and on all
 * threads, next to the memory read bandwidth of this machine measured in the
 * same run (summing a large array on 1 and on all threads).
 *
 *   bench_quant [--mib N] [--reps N] [--levels ref,avx2,avx512] [--markdown]
 *
 * Quantize runs two paths, timed alternately rep by rep: "with stats" (a
 * fp4s_qstats struct: counters and the double err2/x2 sums, what fp4-quant
 * needs) and "codes only" (st = NULL, what an inference engine computes).
 * "spread" is (slowest - fastest) / fastest over the reps of that row.
 * The read bandwidth is measured at the start and again before each format
 * and thread count; the table is printed at the end and "% of read BW" uses
 * the highest figure seen in the whole run for that thread count (a load
 * spike during one measurement cannot inflate the percentage). Progress goes
 * to stderr.
 * --levels restricts the kernel levels (without ref the "x ref" columns
 * are left empty).
 *
 * The input is N MiB of float32 (default 256, far above the caches: the
 * point is the streaming rate), Gaussian with a per-row magnitude. Quantize
 * writes unpacked codes (1 byte/element) and scale bytes (or FP8 float
 * scales); dequantize reads those and writes float32. GB/s counts the float32
 * side only (4 bytes per element read by quantize, written by dequantize).
 * Each figure is the best of --reps runs. The tensor amax (two-pass formats)
 * is computed once, outside the timed region. Targets (issue 2, reported,
 * not asserted): SIMD >= 8x the reference on one core; float32 -> MXFP4 at
 * >= 50% of the measured read bandwidth. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fp4scope/quant.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

/* ---- read bandwidth -------------------------------------------------------------- */
struct sum_job { const float *p; size_t n; double s; };

typedef float v4f __attribute__((vector_size(16)));

static void *sum_run(void *a)
{
    struct sum_job *j = a;
    /* four independent SSE accumulators: bound by the loads, not the adds */
    v4f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t i = 0;
    for (; i + 16 <= j->n; i += 16) {
        v4f t0, t1, t2, t3;
        memcpy(&t0, j->p + i, 16);
        memcpy(&t1, j->p + i + 4, 16);
        memcpy(&t2, j->p + i + 8, 16);
        memcpy(&t3, j->p + i + 12, 16);
        a0 += t0; a1 += t1; a2 += t2; a3 += t3;
    }
    v4f t = (a0 + a1) + (a2 + a3);
    double s = (double)t[0] + t[1] + t[2] + t[3];
    for (; i < j->n; i++) s += j->p[i];
    j->s = s;
    return NULL;
}

static double read_bw(const float *p, size_t n, int threads, int reps, double *sink)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        struct sum_job jobs[64];
        pthread_t tid[64];
        size_t per = n / (size_t)threads;
        double t0 = bench_now();
        for (int t = 0; t < threads; t++) {
            jobs[t] = (struct sum_job){p + (size_t)t * per, t == threads - 1 ? n - (size_t)t * per : per, 0};
            if (t) pthread_create(&tid[t], NULL, sum_run, &jobs[t]);
        }
        sum_run(&jobs[0]);
        for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
        double dt = bench_now() - t0;
        for (int t = 0; t < threads; t++) *sink += jobs[t].s;
        if (dt < best) best = dt;
    }
    return (double)n * 4.0 / best / 1e9;
}

/* ---- one format ------------------------------------------------------------------ */
typedef struct bcase {
    const char *label;
    fp4s_format fmt;
    const char *profile;
} bcase;

/* Timings of one format, level and thread count (ns per element). */
typedef struct btime {
    double q_best, q_worst;   /* quantize with stats */
    double c_best, c_worst;   /* quantize codes only (st = NULL) */
    double d_best, d_worst;   /* dequantize */
} btime;

static int bench_case(const bcase *bc, const char *level, int threads, const float *x,
                      size_t rows, size_t cols, uint8_t *codes, uint8_t *scales,
                      float *sf32, float *deq, int reps, btime *bt)
{
    fp4s_spec s;
    int rc = fp4s_spec_profile(&s, bc->fmt, bc->profile);
    if (rc) return rc;
    if ((rc = fp4s_kernels_select(level))) return rc;
    fp4s_set_threads(threads);
    size_t nb = cols / s.block;
    fp4s_tscale ts;
    float amax = fp4s_amax(x, rows, cols, cols, NULL);
    if ((rc = fp4s_tscale_init(&s, amax, &ts))) return rc;
    size_t sf_cols = s.format == FP4S_FP8 ? (s.fp8_gran == FP4S_FP8_TENSOR ? 1 : cols / 128) : 1;
    fp4s_qout o = {.codes = codes, .ld_codes = cols, .scales = s.format == FP4S_FP8 ? NULL : scales,
                   .ld_scales = nb, .scale_f32 = s.format == FP4S_FP8 ? sf32 : NULL, .ld_scale_f32 = sf_cols};
    double bq = 1e30, wq = 0, bc_ = 1e30, wc = 0, bd = 1e30, wd = 0;
    for (int r = 0; r < reps; r++) {
        /* alternate the two paths so that a change of load hits both */
        for (int path = 0; path < 2; path++) {
            fp4s_qstats st = {0};
            double t0 = bench_now();
            rc = fp4s_quantize(&s, &ts, x, rows, cols, cols, 0, &o, path == 0 ? &st : NULL);
            double dt = bench_now() - t0;
            if (rc) return rc;
            if (path == 0) {
                if (dt < bq) bq = dt;
                if (dt > wq) wq = dt;
            } else {
                if (dt < bc_) bc_ = dt;
                if (dt > wc) wc = dt;
            }
        }
    }
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        rc = fp4s_dequantize(&s, &ts, codes, cols, scales, nb, sf32, sf_cols, rows, cols, 0,
                             deq, cols);
        double dt = bench_now() - t0;
        if (rc) return rc;
        if (dt < bd) bd = dt;
        if (dt > wd) wd = dt;
    }
    double k = 1e9 / ((double)rows * (double)cols);
    *bt = (btime){bq * k, wq * k, bc_ * k, wc * k, bd * k, wd * k};
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int reps = 3;
    const char *level_list = "ref,avx2,avx512";
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            mib = strtoul(argv[++i], &end, 10);
            if (*end || mib < 1) { fprintf(stderr, "bench_quant: --mib: expected a positive integer\n"); return 2; }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = (int)strtol(argv[++i], &end, 10);
            if (*end || reps < 1) { fprintf(stderr, "bench_quant: --reps: expected a positive integer\n"); return 2; }
        } else if (!strcmp(argv[i], "--levels") && i + 1 < argc) {
            level_list = argv[++i];
        } else if (!strcmp(argv[i], "--markdown")) {
            /* the default output is already a markdown table */
        } else {
            fprintf(stderr, "usage: bench_quant [--mib N] [--reps N] [--levels ref,avx2,avx512]\n");
            return 2;
        }
    }
    const char *levels[] = {"ref", "avx2", "avx512"};
    bool use[3];
    for (int l = 0; l < 3; l++) {
        const char *p = strstr(level_list, levels[l]);
        size_t n = strlen(levels[l]);
        use[l] = p && (p == level_list || p[-1] == ',') && (p[n] == ',' || p[n] == 0);
    }
    if (!use[0] && !use[1] && !use[2]) {
        fprintf(stderr, "bench_quant: --levels: expected a comma-separated list of ref, avx2, avx512, got '%s'\n",
                level_list);
        return 2;
    }
    const size_t cols = 4096;
    size_t rows = mib * 1024 * 1024 / 4 / cols;
    if (rows < 1) rows = 1;
    size_t n = rows * cols;
    float *x = malloc(n * sizeof(float));
    uint8_t *codes = malloc(n);
    uint8_t *scales = malloc(n / 16);
    float *sf32 = malloc((n / 128 + 1) * sizeof(float));
    float *deq = malloc(n * sizeof(float));
    if (!x || !codes || !scales || !sf32 || !deq) {
        fprintf(stderr, "bench_quant: out of memory for %zu MiB\n", mib);
        return 5;
    }
    uint64_t z = 12345;
    for (size_t r = 0; r < rows; r++) {
        float m = ldexpf(1.0f, (int)(r % 17) - 8);
        for (size_t c = 0; c < cols; c += 2) {
            /* Box-Muller from a splitmix64 stream */
            z += 0x9E3779B97F4A7C15ull;
            uint64_t v = z;
            v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
            v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
            v ^= v >> 31;
            double u1 = ((double)(v >> 40) + 0.5) * 0x1p-24, u2 = (double)(v & 0xFFFFFF) * 0x1p-24;
            double rr = sqrt(-2.0 * log(u1));
            x[r * cols + c] = (float)(rr * cos(6.283185307179586 * u2)) * m;
            x[r * cols + c + 1] = (float)(rr * sin(6.283185307179586 * u2)) * m;
        }
    }
    memset(codes, 0, n);
    memset(deq, 0, n * sizeof(float));
    memset(scales, 0, n / 16);

    int all = fp4s_get_threads();
    double sink = 0;
    double bw1 = read_bw(x, n, 1, reps + 2, &sink);
    double bwa = all > 1 ? read_bw(x, n, all, reps + 2, &sink) : bw1;
    double la[3] = {0, 0, 0};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = -1;
        fclose(lf);
    }
    printf("# bench_quant: %zu x %zu float32 (%zu MiB), best of %d; CPU level %s; %d threads;"
           " load average %.2f %.2f %.2f\n",
           rows, cols, n * 4 >> 20, reps, fp4s_kernels_cpu_level(), all, la[0], la[1], la[2]);
    printf("# memory read bandwidth at the start (sum of the input array): 1 thread %.2f GB/s, %d threads %.2f GB/s (checksum %g)\n\n",
           bw1, all, bwa, sink);

    const bcase cases[] = {
        {"mxfp4 ocp (floor)", FP4S_MXFP4, "ocp"},
        {"mxfp4 ceil", FP4S_MXFP4, "ceil"},
        {"nvfp4 te", FP4S_NVFP4, "te"},
        {"fp8 1x128", FP4S_FP8, "fp8-1x128"},
    };
    /* results are printed at the end, against the highest bandwidth seen */
    struct row { size_t c; int l, threads, rc; btime bt; double rq, rc_, rd; char err[160]; } res[64];
    int nres = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int tl[2] = {1, all};
        for (int ti = 0; ti < (all > 1 ? 2 : 1); ti++) {
            double rq = 0, rc_ = 0, rd = 0; /* the reference's figures */
            double *bwp = tl[ti] > 1 ? &bwa : &bw1;
            double bwn = read_bw(x, n, tl[ti], reps + 2, &sink);
            if (bwn > *bwp) *bwp = bwn;
            for (int l = 0; l < 3 && nres < 64; l++) {
                if (!use[l]) continue;
                struct row *w = &res[nres];
                memset(w, 0, sizeof *w);
                w->c = c; w->l = l; w->threads = tl[ti];
                w->rc = bench_case(&cases[c], levels[l], tl[ti], x, rows, cols, codes, scales,
                                   sf32, deq, reps, &w->bt);
                if (w->rc == FP4S_ENOTSUP && l > 0) continue; /* level not on this CPU/build */
                if (w->rc) {
                    snprintf(w->err, sizeof w->err, "%s (%s)", fp4s_strerror(w->rc), fp4s_last_error());
                } else if (l == 0) {
                    rq = w->bt.q_best; rc_ = w->bt.c_best; rd = w->bt.d_best;
                }
                w->rq = rq; w->rc_ = rc_; w->rd = rd;
                nres++;
                fprintf(stderr, "bench_quant: %s %s %d thread(s) done\n", cases[c].label, levels[l], tl[ti]);
            }
        }
    }
    printf("| format | level | threads | quantize path | ns/el | GB/s | %% of read BW | x ref | spread |"
           " dequant ns/el | dequant GB/s | x ref |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nres; i++) {
        const struct row *w = &res[i];
        const char *lab = cases[w->c].label, *lv = levels[w->l];
        if (w->rc) {
            printf("| %s | %s | %d | error: %s |||||||||\n", lab, lv, w->threads, w->err);
            continue;
        }
        const btime *bt = &w->bt;
        double bw = w->threads > 1 ? bwa : bw1;
        char xq[32] = "", xc[32] = "", xd[32] = "";
        if (w->rq > 0) {
            snprintf(xq, sizeof xq, "%.1f", w->rq / bt->q_best);
            snprintf(xc, sizeof xc, "%.1f", w->rc_ / bt->c_best);
            snprintf(xd, sizeof xd, "%.1f", w->rd / bt->d_best);
        }
        printf("| %s | %s | %d | with stats | %.3f | %.2f | %.0f%% | %s | %.0f%% | %.3f | %.2f | %s |\n",
               lab, lv, w->threads, bt->q_best, 4.0 / bt->q_best, 100.0 * (4.0 / bt->q_best) / bw, xq,
               100.0 * (bt->q_worst / bt->q_best - 1.0), bt->d_best, 4.0 / bt->d_best, xd);
        printf("| %s | %s | %d | codes only | %.3f | %.2f | %.0f%% | %s | %.0f%% | | | |\n",
               lab, lv, w->threads, bt->c_best, 4.0 / bt->c_best, 100.0 * (4.0 / bt->c_best) / bw, xc,
               100.0 * (bt->c_worst / bt->c_best - 1.0));
    }
    if (lf = fopen("/proc/loadavg", "r"), lf) {
        if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = -1;
        fclose(lf);
    }
    printf("\n# highest read bandwidth seen: 1 thread %.2f GB/s, %d threads %.2f GB/s;"
           " load average at the end %.2f %.2f %.2f (checksum %g)\n", bw1, all, bwa,
           la[0], la[1], la[2], sink);
    fp4s_set_threads(0);
    free(x); free(codes); free(scales); free(sf32); free(deq);
    return 0;
}
