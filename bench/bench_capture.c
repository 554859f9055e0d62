/* Capture throughput and listing speed.
 *
 *   bench_capture [--mib N] [--dir D] [--rows-per-put R]
 *
 * 1. plain HDF5: H5Dwrite of the same bytes into one contiguous dataset per
 *    (step, site, side), then H5Fflush + fsync (the baseline);
 * 2. the capture writer: fp4s_capture_put of the same bytes in blocks of R
 *    rows (appends to chunked, extendible datasets), fp4s_capture_flush (two
 *    phases + fsync) at every step, close;
 * 3. import: what `fp4-capture import` does for a .npy of the same bytes
 *    (fp4s_source_read_raw + put);
 * 4. listing a capture of 10,000 datasets (fp4s_capture_info_read +
 *    fp4s_capture_list, what `fp4-capture ls` does), wall and CPU time.
 * Throughputs are GB/s (1e9 bytes) of tensor data, wall clock. */
#include <fp4scope/capture.h>
#include <fp4scope/tensor.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

enum { STEPS = 4, SITES = 8, ROWS = 2048, COLS = 1024 };

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "bench_capture: %s: %s\n", what, fp4s_last_error());
    exit(1);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    size_t rows_per_put = 256;
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--rows-per-put") && i + 1 < argc) rows_per_put = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_capture [--dir D] [--rows-per-put R] [--reps N]\n");
            return 2;
        }
    }
    if (!rows_per_put || rows_per_put > ROWS) rows_per_put = ROWS;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    size_t n = (size_t)ROWS * COLS;
    uint16_t *buf = malloc(n * 2);
    for (size_t i = 0; i < n; i++) buf[i] = (uint16_t)(0x3c00 + (i * 2654435761u >> 20) % 0x800);
    double bytes = (double)STEPS * SITES * 2 * (double)n * 2;
    char p1[512], p2[512], p3[512], pn[512];
    snprintf(p1, sizeof p1, "%s/bench_capture_plain.h5", dir);
    snprintf(p2, sizeof p2, "%s/bench_capture_cap.h5", dir);
    snprintf(p3, sizeof p3, "%s/bench_capture_imp.h5", dir);
    snprintf(pn, sizeof pn, "%s/bench_capture_src.npy", dir);
    printf("data: %d steps x %d sites x 2 sides x [%d, %d] bfloat16 = %.0f MB per run, best of %d\n",
           STEPS, SITES, ROWS, COLS, bytes / 1e6, reps);
    double best_plain = 1e30, best_cap = 1e30, best_imp = 1e30;
    for (int r = 0; r < reps; r++) {
        /* 1. plain HDF5 */
        double t0 = bench_now();
        hid_t f = H5Fcreate(p1, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        for (int s = 0; s < STEPS; s++)
            for (int j = 0; j < SITES; j++)
                for (int side = 0; side < 2; side++) {
                    char name[64];
                    snprintf(name, sizeof name, "d_%d_%d_%d", s, j, side);
                    hsize_t dims[2] = {ROWS, COLS};
                    hid_t sp = H5Screate_simple(2, dims, NULL);
                    hid_t d = H5Dcreate2(f, name, H5T_STD_U16LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                    H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
                    H5Dclose(d);
                    H5Sclose(sp);
                }
        H5Fflush(f, H5F_SCOPE_GLOBAL);
        void *h;
        if (H5Fget_vfd_handle(f, H5P_DEFAULT, &h) >= 0) fsync(*(int *)h);
        H5Fclose(f);
        double tp = bench_now() - t0;
        if (tp < best_plain) best_plain = tp;
        unlink(p1);

        /* 2. capture writer */
        t0 = bench_now();
        fp4s_capture_opts o;
        fp4s_capture_opts_defaults(&o);
        o.overwrite = true;
        fp4s_capture *c;
        if (fp4s_capture_create(p2, &o, &c)) die("create");
        for (int s = 0; s < STEPS; s++) {
            for (int j = 0; j < SITES; j++) {
                char site[64];
                snprintf(site, sizeof site, "layers.%d.mlp.experts.%d.up_proj", j / 4, j % 4);
                for (int side = 0; side < 2; side++)
                    for (size_t r0 = 0; r0 < ROWS; r0 += rows_per_put)
                        if (fp4s_capture_put(c, s, site, side ? "rollout" : "trainer", FP4S_DT_BF16,
                                             buf + r0 * COLS, rows_per_put, COLS, COLS, NULL))
                            die("put");
            }
            if (fp4s_capture_flush(c)) die("flush");
        }
        if (fp4s_capture_close(&c)) die("close");
        double tc = bench_now() - t0;
        if (tc < best_cap) best_cap = tc;
        unlink(p2);

        /* 3. import from .npy */
        if (r == 0 && fp4s_npy_write(pn, FP4S_DT_F16, 2, ROWS, COLS, buf)) die("npy");
        t0 = bench_now();
        if (fp4s_capture_create(p3, &o, &c)) die("create");
        uint16_t *rb = malloc(n * 2);
        for (int s = 0; s < STEPS; s++) {
            for (int j = 0; j < SITES; j++)
                for (int side = 0; side < 2; side++) {
                    char site[64];
                    snprintf(site, sizeof site, "site.%d", j);
                    fp4s_source *src;
                    if (fp4s_source_open(pn, &src)) die("source");
                    for (size_t r0 = 0; r0 < ROWS; r0 += 1024) {
                        if (fp4s_source_read_raw(src, r0, 1024, rb)) die("read");
                        if (fp4s_capture_put(c, s, site, side ? "rollout" : "trainer", FP4S_DT_F16, rb,
                                             1024, COLS, COLS, NULL))
                            die("put");
                    }
                    fp4s_source_close(&src);
                }
            if (fp4s_capture_flush(c)) die("flush");
        }
        if (fp4s_capture_close(&c)) die("close");
        free(rb);
        double ti = bench_now() - t0;
        if (ti < best_imp) best_imp = ti;
        unlink(p3);
    }
    unlink(pn);
    printf("plain HDF5 H5Dwrite (contiguous) + fsync : %6.3f s  %6.2f GB/s\n", best_plain, bytes / best_plain / 1e9);
    printf("capture writer, %4zu-row puts, flush/step: %6.3f s  %6.2f GB/s  (%.2f x plain)\n", rows_per_put,
           best_cap, bytes / best_cap / 1e9, best_plain / best_cap);
    printf("import from .npy (read_raw + put)         : %6.3f s  %6.2f GB/s  (%.2f x plain)\n", best_imp,
           bytes / best_imp / 1e9, best_plain / best_imp);

    /* 4. listing 10,000 datasets */
    char pl[512];
    snprintf(pl, sizeof pl, "%s/bench_capture_10k.h5", dir);
    fp4s_synth_opts so;
    fp4s_synth_opts_defaults(&so);
    so.steps = 50;
    so.act_every = 1;
    so.layers = 50;
    so.experts = 0;
    so.tokens = 1;
    so.hidden = 16;
    so.out_features = 0;
    so.hot_channels = 0;
    so.seqs = 0;
    so.gzip = 0;
    if (fp4s_capture_synth(pl, &so)) die("synth");
    double bw = 1e30, bc = 1e30;
    size_t cnt = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now(), c0 = bench_cpu_now();
        fp4s_capture_info in;
        fp4s_capture_entry *e;
        if (fp4s_capture_info_read(pl, &in) || fp4s_capture_list(pl, &e, &cnt)) die("list");
        free(e);
        double tw = bench_now() - t0, tc = bench_cpu_now() - c0;
        if (tw < bw) bw = tw;
        if (tc < bc) bc = tc;
    }
    printf("list %zu datasets (info + list, as fp4-capture ls): %.3f s wall, %.3f s CPU (best of 5)\n", cnt,
           bw, bc);
    unlink(pl);
    free(buf);
    return 0;
}
