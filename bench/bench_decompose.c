/* Benchmark of the decomposition (bench/RESULTS.md, section Decomposition).
 *
 * 1. Throughput in GB/s of float32 input, in memory, best of --reps (default 5)
 *    with the spread, and CPU ns per element: fp4s_quantize (codes + scales +
 *    dequantized values) beside fp4s_decomp_add (quantize + decompose) and the
 *    decomposition alone (fp4s_decomp_add_quantized), for 1 and 2 threads,
 *    MXFP4 ocp and NVFP4 te.
 * 2. End to end on an HDF5 dataset of --gib GiB (default 1): the time to just
 *    read it through fp4s_source_read in the same chunks, fp4s_decomp_source in
 *    this process, and the fp4-decompose tool as a child process with its peak
 *    RSS (wait4), best of min(reps, 3). The file is written first (page cache
 *    warm) and removed.
 *
 * usage: bench_decompose [--gib G] [--dir DIR] [--mib-mem M] [--reps N] [--skip-e2e] [--skip-mem] */
#include <fp4scope/decompose.h>
#include <fp4scope/quant.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include <hdf5.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

static uint64_t st = 88172645463325252ull;
static inline uint64_t xs64(void)
{
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return st;
}
/* cheap near-Gaussian: sum of 4 uniforms, centred and scaled */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = xs64();
        double s = (double)(r & 0xFFFF) + (double)((r >> 16) & 0xFFFF) + (double)((r >> 32) & 0xFFFF) +
                   (double)(r >> 48);
        x[i] = (float)((s / 65536.0 - 2.0) * 1.7320508);
    }
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_decompose: %s: %s (%s)\n", what, fp4s_last_error(), fp4s_strerror(rc));
    exit(1);
}

static int reps = 5;

/* best and spread ((worst - best) / best) of a set of times */
typedef struct tstat {
    double best, worst;
} tstat;

static void ts_add(tstat *t, double v)
{
    if (v < t->best) t->best = v;
    if (v > t->worst) t->worst = v;
}

static void throughput(const char *label, const fp4s_spec *s, const float *x, size_t rows, size_t cols)
{
    size_t n = rows * cols, nb = cols / s->block;
    float *q = malloc(n * sizeof *q);
    uint8_t *codes = malloc(n), *scales = malloc(rows * nb);
    if (!q || !codes || !scales) die("out of memory", FP4S_ENOMEM);
    fp4s_tscale ts;
    fp4s_tscale_init(s, fp4s_amax(x, rows, cols, cols, NULL), &ts);
    fp4s_qout o;
    memset(&o, 0, sizeof o);
    o.codes = codes;
    o.ld_codes = cols;
    o.scales = scales;
    o.ld_scales = nb;
    o.dequant = q;
    o.ld_dequant = cols;
    double gb = 4.0 * (double)n / 1e9;
    for (int th = 1; th <= 2; th++) {
        fp4s_set_threads(th);
        tstat wq = {1e30, 0}, wd = {1e30, 0}, wo = {1e30, 0}, cq = {1e30, 0}, cd = {1e30, 0}, co = {1e30, 0};
        for (int rep = 0; rep < reps; rep++) {
            double t0 = bench_now(), c0 = bench_cpu_now();
            int rc = fp4s_quantize(s, &ts, x, rows, cols, cols, 0, &o, NULL);
            if (rc) die("quantize", rc);
            ts_add(&wq, bench_now() - t0);
            ts_add(&cq, bench_cpu_now() - c0);
            fp4s_decomp *d;
            if ((rc = fp4s_decomp_open(s, &ts, NULL, rows, cols, &d))) die("open", rc);
            t0 = bench_now();
            c0 = bench_cpu_now();
            if ((rc = fp4s_decomp_add_quantized(d, x, cols, q, cols, codes, cols, scales, nb, rows, 0)))
                die("decompose", rc);
            ts_add(&wo, bench_now() - t0);
            ts_add(&co, bench_cpu_now() - c0);
            fp4s_decomp_close(&d);
            if ((rc = fp4s_decomp_open(s, &ts, NULL, rows, cols, &d))) die("open", rc);
            t0 = bench_now();
            c0 = bench_cpu_now();
            if ((rc = fp4s_decomp_add(d, x, rows, cols, 0))) die("decompose", rc);
            ts_add(&wd, bench_now() - t0);
            ts_add(&cd, bench_cpu_now() - c0);
            fp4s_decomp_close(&d);
        }
        /* GB/s from the best wall time; ns per element from the best CPU time */
        printf("| %-9s | %d | %6.2f (%3.0f%%) | %6.2f (%3.0f%%) | %6.2f (%3.0f%%) | %5.2f | %5.2f | %5.2f | %5.2fx |\n",
               label, th, gb / wq.best, 100 * (wq.worst - wq.best) / wq.best, gb / wd.best,
               100 * (wd.worst - wd.best) / wd.best, gb / wo.best, 100 * (wo.worst - wo.best) / wo.best,
               1e9 * cq.best / n, 1e9 * cd.best / n, 1e9 * co.best / n, wd.best / wq.best);
    }
    fp4s_set_threads(0);
    free(q);
    free(codes);
    free(scales);
}

static void write_h5(const char *path, size_t rows, size_t cols)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "bench_decompose: %s: cannot create\n", path);
        exit(1);
    }
    hsize_t dims[2] = {rows, cols}, chunk[2] = {64, cols};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 2, chunk);
    hid_t ds = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    size_t slab = 4096;
    float *buf = malloc(slab * cols * sizeof *buf);
    for (size_t r0 = 0; r0 < rows; r0 += slab) {
        size_t nr = rows - r0 < slab ? rows - r0 : slab;
        fill(buf, nr * cols);
        hsize_t off[2] = {r0, 0}, cnt[2] = {nr, cols};
        hid_t fs = H5Dget_space(ds);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
        hid_t ms = H5Screate_simple(2, cnt, NULL);
        if (H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf) < 0) {
            fprintf(stderr, "bench_decompose: %s: write failed\n", path);
            exit(1);
        }
        H5Sclose(ms);
        H5Sclose(fs);
    }
    free(buf);
    H5Dclose(ds);
    H5Pclose(pl);
    H5Sclose(sp);
    H5Fclose(f);
}

static double plain_read(const char *spec, size_t chunk_elems, double *cpu)
{
    double c0 = bench_cpu_now();
    fp4s_source *src;
    int rc = fp4s_source_open(spec, &src);
    if (rc) die("open source", rc);
    size_t rows = fp4s_source_rows(src), cols = fp4s_source_cols(src);
    size_t ch = chunk_elems / cols;
    float *buf = malloc(ch * cols * sizeof *buf);
    double sum = 0;
    double t0 = bench_now();
    for (size_t r0 = 0; r0 < rows; r0 += ch) {
        size_t n = rows - r0 < ch ? rows - r0 : ch;
        if ((rc = fp4s_source_read(src, r0, n, buf, cols))) die("read", rc);
        sum += buf[0];
    }
    double t = bench_now() - t0;
    *cpu = bench_cpu_now() - c0;
    if (sum == 12345.678) printf(" ");
    free(buf);
    fp4s_source_close(&src);
    return t;
}

static int run_tool(const char *tool, char *const argv[], double *secs, double *cpu, long *rss_kib)
{
    fflush(stdout);
    double t0 = bench_now();
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execv(tool, argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(p, &status, 0, &ru) < 0) return -1;
    *secs = bench_now() - t0;
    *cpu = ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec;
    *rss_kib = ru.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv)
{
    double gib = 1.0;
    const char *dir = "/tmp";
    double mem_mib = 128;
    int e2e = 1, mem = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--mib-mem") && i + 1 < argc) mem_mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--skip-e2e")) e2e = 0;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--skip-mem")) mem = 0;
        else {
            fprintf(stderr, "usage: bench_decompose [--gib G] [--dir DIR] [--mib-mem M] [--reps N] [--skip-e2e] [--skip-mem]\n");
            return 2;
        }
    }
    printf("# bench_decompose (fp4scope %s, kernels %s, %d CPUs)\n\n", fp4s_version(), fp4s_kernels_level(),
           fp4s_get_threads());
    size_t cols = 1024, rows = (size_t)(mem_mib * 1048576.0 / 4.0) / cols;
    float *x = malloc(rows * cols * sizeof *x);
    if (!x) die("out of memory", FP4S_ENOMEM);
    fill(x, rows * cols);
    fp4s_spec s;
    if (mem) {
        printf("In memory, [%zu x %zu] float32 (%.0f MiB), best of %d (spread = (worst - best) / best):\n"
               "GB/s of float32 input from the best wall time; ns/element from the best CPU time (all threads)\n\n",
               rows, cols, rows * cols * 4.0 / 1048576.0, reps);
        printf("| spec | threads | quantize GB/s | quantize+decompose GB/s | decompose only GB/s "
               "| quantize CPU ns/el | q+d CPU ns/el | decompose only CPU ns/el | q+d / quantize wall |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
        fp4s_spec_profile(&s, FP4S_MXFP4, "ocp");
        throughput("mxfp4 ocp", &s, x, rows, cols);
        fp4s_spec_profile(&s, FP4S_NVFP4, "te");
        throughput("nvfp4 te", &s, x, rows, cols);
    }
    free(x);
    if (!e2e) return 0;

    char path[PATH_MAX], spec[PATH_MAX + 8], tool[PATH_MAX + 32], self[PATH_MAX];
    snprintf(path, sizeof path, "%s/bench_decompose_%d.h5", dir, (int)getpid());
    snprintf(spec, sizeof spec, "%s:/x", path);
    ssize_t ln = readlink("/proc/self/exe", self, sizeof self - 1);
    if (ln < 0) ln = 0;
    self[ln] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(tool, sizeof tool, "%s/../tools/fp4-decompose", self);
    size_t erows = (size_t)(gib * 1073741824.0 / 4.0) / cols;
    printf("\nEnd to end, HDF5 dataset [%zu x %zu] float32 (%.2f GiB, chunked 64 rows, page cache warm):\n\n",
           erows, cols, erows * cols * 4.0 / 1073741824.0);
    double t0 = bench_now();
    write_h5(path, erows, cols);
    printf("(written in %.1f s)\n\n", bench_now() - t0);
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.chunk_elems = (size_t)1 << 21; /* the CPU's automatic chunk, stated for the plain read */
    int er = reps < 3 ? reps : 3;
    tstat wr = {1e30, 0}, crs = {1e30, 0};
    for (int rep = 0; rep < er; rep++) {
        double c;
        ts_add(&wr, plain_read(spec, o.chunk_elems, &c));
        ts_add(&crs, c);
    }
    const double tr = wr.best;
    printf("Best of %d (spread = (worst - best) / best); CPU s = user + system of all threads.\n\n", er);
    printf("| what | wall s | spread | vs plain read | CPU s | peak RSS MiB |\n|---|---|---|---|---|---|\n");
    printf("| plain read (fp4s_source_read, %zu-element chunks) | %.3f | %.0f%% | 1.00x | %.3f | - |\n",
           o.chunk_elems, tr, 100 * (wr.worst - wr.best) / wr.best, crs.best);
    printf("| two plain reads (NVFP4's amax pass + the pass) | %.3f | - | 2.00x | %.3f | - |\n", 2 * tr,
           2 * crs.best);
    const char *fmts[2] = {"mxfp4", "nvfp4"};
    for (int k = 0; k < 2; k++) {
        fp4s_spec_profile(&s, k == 0 ? FP4S_MXFP4 : FP4S_NVFP4, k == 0 ? "ocp" : "te");
        tstat wd = {1e30, 0}, cd = {1e30, 0}, wt = {1e30, 0}, ct = {1e30, 0};
        long rss = 0;
        int trc = 0;
        for (int rep = 0; rep < er; rep++) {
            fp4s_decomp *d;
            t0 = bench_now();
            double c0 = bench_cpu_now();
            int rc = fp4s_decomp_source(&s, &o, spec, &d);
            if (rc) die("fp4s_decomp_source", rc);
            ts_add(&wd, bench_now() - t0);
            ts_add(&cd, bench_cpu_now() - c0);
            fp4s_decomp_close(&d);
            double tt, ctt;
            long r1;
            char *av[] = {tool, "-f", (char *)fmts[k], spec, NULL};
            trc = run_tool(tool, av, &tt, &ctt, &r1);
            if (trc != 0) break;
            ts_add(&wt, tt);
            ts_add(&ct, ctt);
            if (r1 > rss) rss = r1;
        }
        printf("| fp4s_decomp_source %s (in process) | %.3f | %.0f%% | %.2fx | %.3f | - |\n", fmts[k], wd.best,
               100 * (wd.worst - wd.best) / wd.best, wd.best / tr, cd.best);
        if (trc != 0)
            printf("| fp4-decompose -f %s: exit %d (tool at %s) | - | - | - | - | - |\n", fmts[k], trc, tool);
        else
            printf("| `fp4-decompose -f %s` (whole process) | %.3f | %.0f%% | %.2fx | %.3f | %.1f |\n", fmts[k],
                   wt.best, 100 * (wt.worst - wt.best) / wt.best, wt.best / tr, ct.best, rss / 1024.0);
    }
    unlink(path);
    return 0;
}
