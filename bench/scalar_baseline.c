/* A plain scalar C program that does what `fp4-quant -f mxfp4 -p ocp -o OUT.h5
 * IN.npy` does, written the obvious way, for the whole-process comparison of
 * issue 2 (target: fp4-quant at least 5x faster). It does not use libfp4scope.
 *
 *   scalar_baseline IN.npy OUT.h5
 *
 * IN.npy: float32, C order, 1-D or 2-D, last dimension a multiple of 32.
 * Quantizes to MXFP4 as the OCP spec text says (k = floor(log2 amax) - 2 from
 * frexpf, E8M0 code k + 127, all-zero blocks code 0, round to nearest even on
 * the E2M1 grid, saturate at 6), one element at a time, and writes /codes
 * (uint8 [rows, cols/2], pairs packing: low nibble first) and /scales (uint8
 * [rows, cols/32]) into OUT.h5. Exit 0 ok, 2 usage, 3 bad input, 4 output. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_npy(const char *path, float **data, size_t *rows, size_t *cols)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "scalar_baseline: %s: cannot open\n", path); return 3; }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fprintf(stderr, "scalar_baseline: %s: not a .npy file\n", path);
        fclose(f);
        return 3;
    }
    size_t hl;
    if (pre[6] == 1) {
        hl = pre[8] | (size_t)pre[9] << 8;
    } else {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) { fclose(f); return 3; }
        hl = pre[8] | (size_t)pre[9] << 8 | (size_t)b[0] << 16 | (size_t)b[1] << 24;
    }
    char *h = malloc(hl + 1);
    if (!h || fread(h, 1, hl, f) != hl) {
        fprintf(stderr, "scalar_baseline: %s: truncated header\n", path);
        free(h);
        fclose(f);
        return 3;
    }
    h[hl] = 0;
    if (!strstr(h, "'<f4'") || strstr(h, "'fortran_order': True")) {
        fprintf(stderr, "scalar_baseline: %s: expected little-endian float32 in C order\n", path);
        free(h);
        fclose(f);
        return 3;
    }
    char *sh = strstr(h, "'shape': (");
    unsigned long long d0 = 0, d1 = 0;
    int nd = sh ? sscanf(sh + 10, "%llu, %llu", &d0, &d1) : 0;
    free(h);
    if (nd < 1) { fprintf(stderr, "scalar_baseline: %s: bad shape\n", path); fclose(f); return 3; }
    if (nd == 1 || d1 == 0) { d1 = d0; d0 = 1; }
    if (d1 % 32) {
        fprintf(stderr, "scalar_baseline: %s: last dimension %llu is not a multiple of 32\n", path, d1);
        fclose(f);
        return 3;
    }
    size_t n = (size_t)d0 * (size_t)d1;
    float *x = malloc(n * sizeof(float));
    if (!x || fread(x, sizeof(float), n, f) != n) {
        fprintf(stderr, "scalar_baseline: %s: truncated data\n", path);
        free(x);
        fclose(f);
        return 3;
    }
    fclose(f);
    *data = x;
    *rows = (size_t)d0;
    *cols = (size_t)d1;
    return 0;
}

/* E2M1 code of v: nearest of 0, .5, 1, 1.5, 2, 3, 4, 6, ties to the even code. */
static unsigned e2m1(float v)
{
    static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    unsigned sign = signbit(v) ? 8u : 0u;
    float a = fabsf(v);
    if (isnan(a)) return 0;
    unsigned best = 0;
    for (unsigned i = 1; i < 8; i++) {
        float mid = 0.5f * (grid[i - 1] + grid[i]);
        if (a > mid || (a == mid && (i & 1) == 0)) best = i;
    }
    return best | sign;
}

static int write_h5(const char *path, const unsigned char *codes, const unsigned char *scales,
                    size_t rows, size_t cols)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return 4;
    int rc = 0;
    const char *names[2] = {"codes", "scales"};
    const unsigned char *bufs[2] = {codes, scales};
    hsize_t dims[2][2] = {{rows, cols / 2}, {rows, cols / 32}};
    for (int i = 0; i < 2 && !rc; i++) {
        hid_t sp = H5Screate_simple(2, dims[i], NULL);
        hid_t d = H5Dcreate2(f, names[i], H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bufs[i]) < 0) rc = 4;
        if (d >= 0) H5Dclose(d);
        H5Sclose(sp);
    }
    if (H5Fclose(f) < 0) rc = 4;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: scalar_baseline IN.npy OUT.h5\n");
        return 2;
    }
    float *x;
    size_t rows, cols;
    int rc = read_npy(argv[1], &x, &rows, &cols);
    if (rc) return rc;
    unsigned char *codes = calloc(rows * cols / 2, 1), *scales = malloc(rows * cols / 32);
    if (!codes || !scales) { fprintf(stderr, "scalar_baseline: out of memory\n"); return 5; }
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / 32; b++) {
            const float *p = x + r * cols + b * 32;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++)
                if (fabsf(p[i]) > amax) amax = fabsf(p[i]);
            int code = 0;
            if (amax > 0.0f) {
                int e;
                frexpf(amax, &e);            /* amax = m * 2^e, m in [0.5, 1) */
                int k = (e - 1) - 2;
                code = k + 127;
                if (code < 0) code = 0;
                if (code > 254) code = 254;
            }
            scales[r * (cols / 32) + b] = (unsigned char)code;
            float scale = ldexpf(1.0f, code - 127);
            for (int i = 0; i < 32; i++) {
                unsigned q = e2m1(p[i] / scale);
                size_t idx = r * cols + b * 32 + (size_t)i;
                codes[idx / 2] |= (unsigned char)(q << (4 * (idx & 1)));
            }
        }
    rc = write_h5(argv[2], codes, scales, rows, cols);
    if (rc) fprintf(stderr, "scalar_baseline: %s: cannot write\n", argv[2]);
    free(x);
    free(codes);
    free(scales);
    return rc;
}
