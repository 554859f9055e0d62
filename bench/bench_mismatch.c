/* bench_mismatch: tokens/s of fp4s_mm_analyze from a capture file (HDF5) and
 * from a CSV trace, and the peak RSS of the HDF5 run.
 *
 *   bench_mismatch [--tokens N] [--steps S] [--csv-tokens M] [--dir DIR] [--keep] [--reuse] [--repeat R]
 *
 * Writes DIR/bench_mm.h5 (N tokens in S steps: trainer, rollout float32, seq
 * int64, like fp4-capture) and DIR/bench_mm.csv (M tokens), analyses each
 * R times (default 3, after one warm-up read of the file into the page cache)
 * and prints the best wall-clock rate and its CPU time (the machine is shared:
 * CPU time shows what the code costs when other jobs take cores). --reuse
 * analyses existing files of a previous --keep run. Peak RSS (ru_maxrss) is measured after the HDF5 analysis: the writer
 * holds one step only, so the peak is the analysis' own. */
#include <fp4scope/capture.h>
#include <fp4scope/mismatch.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../tests/capture_test.h"
#include "bench_util.h"

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static inline double urand(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return ((double)(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static void fill_step(size_t n, size_t step, float *lt, float *lr, int64_t *seq)
{
    double sigma = 0.01 * (step < 50 ? 1.0 : pow(1.05, (double)step - 50));
    for (size_t i = 0; i < n; i++) {
        double r = log(urand());                       /* -Exp(1) */
        double z = (urand() + urand() + urand() - 1.5) * 2.0; /* ~N(0,1) */
        double t = r + sigma * z;
        lr[i] = (float)r;
        lt[i] = (float)(t > 0 ? 0 : t);
        seq[i] = (int64_t)(i / 512);
    }
}

static void put(hid_t f, const char *path, hid_t type, const void *d, hsize_t n)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(f, path, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (ds < 0 || H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, d) < 0) {
        fprintf(stderr, "bench_mismatch: cannot write %s\n", path);
        exit(1);
    }
    H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

static double warm(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    double s = 0;
    size_t k;
    while (f && (k = fread(buf, 1, sizeof buf, f)) > 0) s += (double)k;
    if (f) fclose(f);
    return s;
}

/* fp4s_mm_analyze of path `repeat` times: the best wall time and the CPU
 * time of that pass, the last pass's result in *res; 1 after the message
 * when the analysis fails. */
static int analyze_best(const char *path, int repeat, fp4s_mm_result *res, double *wall, double *cpu)
{
    *wall = 1e30;
    *cpu = 0;
    for (int rep = 0; rep < repeat; rep++) {
        memset(res, 0, sizeof *res);
        double t0 = bench_now(), c0 = bench_cpu_now();
        int rc = fp4s_mm_analyze(path, "bench", NULL, NULL, res);
        double t = bench_now() - t0, c = bench_cpu_now() - c0;
        if (rc) {
            fprintf(stderr, "bench_mismatch: %s\n", fp4s_last_error());
            return 1;
        }
        if (t < *wall) {
            *wall = t;
            *cpu = c;
        }
        if (rep + 1 < repeat) fp4s_mm_result_free(res);
    }
    return 0;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    size_t tokens = 100000000, steps = 100, csv_tokens = 2000000;
    const char *dir = "/tmp";
    int keep = 0, reuse = 0, repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--csv-tokens") && i + 1 < argc) csv_tokens = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--keep")) keep = 1;
        else if (!strcmp(argv[i], "--reuse")) reuse = keep = 1;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_mismatch [--tokens N] [--steps S] [--csv-tokens M] [--dir DIR] [--keep]\n");
            return 2;
        }
    }
    if (steps == 0 || tokens < steps) {
        fprintf(stderr, "bench_mismatch: need tokens >= steps >= 1\n");
        return 2;
    }
    char h5[4096], csv[4096];
    snprintf(h5, sizeof h5, "%s/bench_mm.h5", dir);
    snprintf(csv, sizeof csv, "%s/bench_mm.csv", dir);
    size_t per = tokens / steps;
    float *lt = malloc(per * sizeof *lt), *lr = malloc(per * sizeof *lr);
    int64_t *seq = malloc(per * sizeof *seq);
    if (!lt || !lr || !seq) return 1;

    if (repeat < 1) repeat = 1;
    double twrite = 0, t0;
    /* ---- HDF5 ---- */
    if (!(reuse && access(h5, R_OK) == 0)) {
    hid_t f = H5Fcreate(h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "bench_mismatch: cannot create %s\n", h5);
        return 1;
    }
    capture_put_schema(f, FP4S_CAPTURE_SCHEMA, false);
    t0 = bench_now();
    for (size_t s = 0; s < steps; s++) {
        char p[128];
        fill_step(per, s, lt, lr, seq);
        snprintf(p, sizeof p, "/steps/%zu/logprobs/trainer", s);
        put(f, p, H5T_NATIVE_FLOAT, lt, per);
        snprintf(p, sizeof p, "/steps/%zu/logprobs/rollout", s);
        put(f, p, H5T_NATIVE_FLOAT, lr, per);
        snprintf(p, sizeof p, "/steps/%zu/logprobs/seq", s);
        put(f, p, H5T_NATIVE_INT64, seq, per);
    }
    H5Fclose(f);
    twrite = bench_now() - t0;
    }
    free(lt);
    free(lr);
    free(seq);
    long rss_before = peak_rss_kib();
    double bytes = warm(h5);
    fp4s_mm_result res;
    double th5, ch5;
    if (analyze_best(h5, repeat, &res, &th5, &ch5)) return 1;
    long rss = peak_rss_kib();
    size_t ntok = (size_t)res.runs[0].tokens;
    if (twrite > 0)
        printf("hdf5: %zu tokens in %zu steps (%.0f MB file, written in %.1f s)\n", ntok, res.runs[0].nsteps,
               bytes / 1e6, twrite);
    else
        printf("hdf5: %zu tokens in %zu steps (%.0f MB file, reused)\n", ntok, res.runs[0].nsteps, bytes / 1e6);
    printf("hdf5: best of %d: %.3f s wall, %.1f M tokens/s; %.3f s CPU, %.1f M tokens per CPU-second; "
           "peak RSS %.1f MiB (%.1f MiB before the analysis)\n", repeat, th5, (double)ntok / th5 / 1e6, ch5,
           (double)ntok / ch5 / 1e6, (double)rss / 1024.0, (double)rss_before / 1024.0);
    printf("hdf5: check: step 0 mean_abs %.6g, last step mean_abs %.6g\n", res.runs[0].steps[0].mean_abs,
           res.runs[0].steps[res.runs[0].nsteps - 1].mean_abs);
    fp4s_mm_result_free(&res);
    if (!keep) unlink(h5);

    /* ---- CSV ---- */
    if (csv_tokens > 0) {
        if (!(reuse && access(csv, R_OK) == 0)) {
        FILE *c = fopen(csv, "w");
        if (!c) return 1;
        size_t cs = csv_tokens / 20 ? 20 : 1, cper = csv_tokens / cs;
        float *a1 = malloc(cper * sizeof *a1), *a2 = malloc(cper * sizeof *a2);
        int64_t *sq = malloc(cper * sizeof *sq);
        if (!a1 || !a2 || !sq) return 1;
        fprintf(c, "step,seq,trainer_logprob,rollout_logprob\n");
        for (size_t s = 0; s < cs; s++) {
            fill_step(cper, s, a1, a2, sq);
            for (size_t i = 0; i < cper; i++)
                fprintf(c, "%zu,%lld,%.9g,%.9g\n", s, (long long)sq[i], (double)a1[i], (double)a2[i]);
        }
        fclose(c);
        free(a1);
        free(a2);
        free(sq);
        }
        double cb = warm(csv);
        double tc, cc;
        if (analyze_best(csv, repeat, &res, &tc, &cc)) return 1;
        size_t nc = (size_t)res.runs[0].tokens;
        printf("csv: %zu tokens (%.0f MB), best of %d: %.3f s wall, %.2f M tokens/s (%.0f MB/s); %.2f M tokens per "
               "CPU-second\n", nc, cb / 1e6, repeat, tc, (double)nc / tc / 1e6, cb / tc / 1e6, (double)nc / cc / 1e6);
        fp4s_mm_result_free(&res);
        if (!keep) unlink(csv);
    }
    return 0;
}
