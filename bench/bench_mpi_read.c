/* The plain parallel read that fp4-decompose under MPI is measured against
 * (bench/RESULTS.md, section MPI; scripts/device/mpi_scaling.sh): every
 * activation and weight dataset of the given captures, the rows of all of
 * them cut into P equal ranges as fp4-decompose cuts them (tools/par.c), each
 * rank reading its range through fp4s_source_read in chunks of 2^21 elements
 * (fp4-decompose's default chunk), nothing else done.
 *
 *   mpirun -n P bench_mpi_read CAPTURE.h5...
 *
 * prints, from rank 0, "read P SECONDS GiB GiB/s" (the slowest rank's wall
 * time from a barrier to its last read; float32 bytes). */
#include <fp4scope/capture.h>
#include <fp4scope/tensor.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

typedef struct unit {
    char spec[1200];
    size_t rows, cols;
} unit;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: mpirun -n P bench_mpi_read CAPTURE.h5...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t n = 0, cap = 256;
    unit *u = malloc(cap * sizeof *u);
    for (int a = 1; a < argc; a++) {
        fp4s_capture_entry *e = NULL;
        size_t ne = 0;
        if (fp4s_capture_list(argv[a], &e, &ne)) {
            fprintf(stderr, "bench_mpi_read: %s\n", fp4s_last_error());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        for (size_t i = 0; i < ne; i++) {
            if (!strcmp(e[i].site, "logprobs")) continue;
            if (n == cap) u = realloc(u, (cap *= 2) * sizeof *u);
            fp4s_capture_entry_spec(argv[a], &e[i], u[n].spec, sizeof u[n].spec);
            u[n].rows = e[i].rows;
            u[n].cols = e[i].cols;
            n++;
        }
        free(e);
    }
    unsigned __int128 total = 0;
    for (size_t i = 0; i < n; i++) total += (unsigned __int128)u[i].rows * u[i].cols;
    /* this rank's elements [b0, b1), cut on rows rounded up */
    unsigned __int128 b0 = total * (unsigned)rank / (unsigned)size, b1 = total * (unsigned)(rank + 1) / (unsigned)size;
    float *buf = malloc(((size_t)1 << 21) * sizeof *buf);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    unsigned __int128 off = 0;
    size_t mine = 0;
    for (size_t i = 0; i < n; i++) {
        size_t rows = u[i].rows, cols = u[i].cols;
        unsigned __int128 w = (unsigned __int128)rows * cols;
        size_t r0 = off >= b0 ? 0 : (size_t)((b0 - off + cols - 1) / cols);
        size_t r1 = off + w <= b1 ? rows : off >= b1 ? 0 : (size_t)((b1 - off + cols - 1) / cols);
        off += w;
        if (r0 >= rows || r1 <= r0) continue;
        fp4s_source *src = NULL;
        if (fp4s_source_open(u[i].spec, &src)) {
            fprintf(stderr, "bench_mpi_read: %s\n", fp4s_last_error());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        size_t chunk = ((size_t)1 << 21) / cols;
        if (!chunk) chunk = 1;
        for (size_t r = r0; r < r1; r += chunk) {
            size_t k = r1 - r < chunk ? r1 - r : chunk;
            if (fp4s_source_read(src, r, k, buf, cols)) {
                fprintf(stderr, "bench_mpi_read: %s\n", fp4s_last_error());
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            mine += k * cols;
        }
        fp4s_source_close(&src);
    }
    double t = bench_now() - t0, tmax = 0;
    unsigned long long got = mine, all = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&got, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank) {
        double gib = all * 4.0 / (1024.0 * 1024 * 1024);
        printf("read %d %.3f %.2f %.2f\n", size, tmax, gib, gib / tmax);
    }
    free(buf);
    free(u);
    MPI_Finalize();
    return 0;
}
