/* CUDA benchmark: quantize / dequantize / amax throughput on the GPU, next to
 * a device-to-device copy measured in the same run.
 *
 *   bench_cuda [--rows R] [--cols C] [--reps N] [--warmup N]
 *
 * Default tensor: 262144 x 4096 float32 (4 GiB in, 1 GiB of codes), generated
 * on the device (a hash of the index: gaussian-like values with a random
 * exponent per 32-block, plus some exact E2M1 ties), never zeros. Each op is
 * timed with CUDA events around each launch: warm-up launches first, then the
 * median (and min/max) of --reps timed launches. Bytes counted are the
 * fewest an op must move: quantize reads 4 B/element and writes 1 B/element
 * plus one scale byte per block; dequantize reads 1 B + scales and writes 4 B;
 * the copy counts bytes read plus bytes written. Before timing, the first
 * 1M elements of every quantize output are compared with the CPU reference
 * (fp4s_quantize), so the numbers are of a correct kernel. */
#include <fp4scope/cuda.h>
#include <fp4scope/quant.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK(call)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "bench_cuda: %s: %s\n", #call, cudaGetErrorString(e_));     \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static __device__ uint32_t hash32(uint64_t i)
{
    uint64_t z = i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

__global__ void gen_kernel(float *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t hb = hash32((i >> 5) ^ ((uint64_t)seed << 40));
        int e = (int)(hb % 40u) - 20; /* exponent per 32-block */
        uint32_t h = hash32(i + ((uint64_t)seed << 32));
        /* sum of 4 uniforms: roughly gaussian, in [-2, 2) */
        float u = ((h & 0xFF) + ((h >> 8) & 0xFF) + ((h >> 16) & 0xFF) + (h >> 24)) / 256.0f - 2.0f;
        if ((h & 0x3F) == 0) u = (h & 0x40) ? 1.25f : -2.5f; /* exact ties at scale 2^e */
        x[i] = ldexpf(u, e);
    }
}

struct timing { double med, lo, hi; };

template <class F>
static timing time_op(F op, int warm, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warm; i++) op();
    CK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        op();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    timing r = {ms[ms.size() / 2], ms.front(), ms.back()};
    return r;
}

static void row(const char *name, timing t, double bytes, double n, double copy_gbs)
{
    double gbs = bytes / (t.med * 1e-3) / 1e9;
    printf("%-28s %9.3f %9.3f %9.3f %9.1f %9.4f %7.1f%%\n", name, t.med, t.lo, t.hi, gbs,
           t.med * 1e6 / n, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0);
}

static int ok_or_die(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "bench_cuda: %s: %s\n", what, fp4s_last_error());
        exit(1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t rows = 262144, cols = 4096;
    int reps = 30, warm = 3;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = strtoull(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = strtoull(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warm = (int)strtol(argv[++i], &end, 10);
        else {
            fprintf(stderr, "usage: bench_cuda [--rows R] [--cols C] [--reps N] [--warmup N]\n");
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "bench_cuda: %s: expected an integer\n", argv[i - 1]);
            return 2;
        }
    }
    if (cols % 32 || rows == 0 || reps < 1 || warm < 0) {
        fprintf(stderr, "bench_cuda: cols must be a multiple of 32, rows and reps positive\n");
        return 2;
    }
    fp4s_kernels_force_ref(true); /* the sample check is against the scalar reference */
    char desc[200];
    fp4s_cuda_describe(desc, sizeof desc);
    const char *var = getenv("FP4S_CUDA_VARIANT");
    printf("bench_cuda: device: %s (FP4S_CUDA_VARIANT=%s)\n", desc, var ? var : "default");
    if (!fp4s_cuda_available()) {
        printf("bench_cuda: no usable GPU, nothing to measure\n");
        return 77;
    }
    const size_t n = rows * cols;
    printf("bench_cuda: tensor %zu x %zu float32 (%.2f GiB), %d warm-up + %d timed launches per op\n",
           rows, cols, n * 4.0 / (1 << 30), warm, reps);

    float *dx, *dy, *dout;
    uint8_t *dc, *ds;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dy, n * sizeof(float)));
    CK(cudaMalloc(&dout, n * sizeof(float)));
    CK(cudaMalloc(&dc, n));
    CK(cudaMalloc(&ds, n / 16));
    gen_kernel<<<132 * 16, 256>>>(dx, n, 12345u);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    printf("%-28s %9s %9s %9s %9s %9s %8s\n", "op", "med ms", "min ms", "max ms", "GB/s", "ns/elem",
           "of copy");
    timing tc = time_op([&] { CK(cudaMemcpyAsync(dy, dx, n * sizeof(float), cudaMemcpyDeviceToDevice)); },
                        warm, reps);
    double copy_gbs = 2.0 * n * sizeof(float) / (tc.med * 1e-3) / 1e9;
    row("d2d copy (read+write)", tc, 2.0 * n * sizeof(float), (double)n, copy_gbs);

    float amax = 0;
    uint64_t nf = 0;
    timing ta = time_op([&] { ok_or_die(fp4s_cuda_amax(dx, rows, cols, cols, &amax, &nf, NULL), "amax"); },
                        warm, reps);
    row("amax (sync incl.)", ta, 4.0 * n, (double)n, copy_gbs);

    struct prof { fp4s_format f; const char *p; bool d2; const char *label; };
    const prof profs[] = {
        {FP4S_MXFP4, "ocp", false, "mxfp4 ocp (floor)"},
        {FP4S_MXFP4, "ceil", false, "mxfp4 ceil"},
        {FP4S_MXFP4, "ggml", false, "mxfp4 ggml (log2f)"},
        {FP4S_NVFP4, "te", false, "nvfp4 te 1-D"},
        {FP4S_NVFP4, "te", true, "nvfp4 te 2-D"},
        {FP4S_NVFP4, "torchao", false, "nvfp4 torchao"},
        {FP4S_NVFP4, "modelopt", false, "nvfp4 modelopt"},
    };
    const size_t nsample_rows = std::min(rows, (size_t)((1u << 20) / cols + 16) & ~(size_t)15);
    std::vector<float> hx(nsample_rows * cols);
    std::vector<uint8_t> rc_(nsample_rows * cols), rs(nsample_rows * cols / 16), gc(rc_.size()), gs(rs.size());
    CK(cudaMemcpy(hx.data(), dx, hx.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (const prof &p : profs) {
        fp4s_spec s;
        if (fp4s_spec_profile(&s, p.f, p.p) != 0) {
            printf("%-28s (profile not defined: skipped)\n", p.label);
            continue;
        }
        s.tile2d = p.d2;
        if (!fp4s_cuda_supports(&s) || fp4s_spec_check(&s) != 0) {
            printf("%-28s (not supported: skipped)\n", p.label);
            continue;
        }
        fp4s_tscale ts;
        ok_or_die(fp4s_tscale_init(&s, amax, &ts), "tscale");
        const size_t nb = cols / s.block;
        /* correctness of the timed kernel on the first rows */
        ok_or_die(fp4s_cuda_quantize(&s, &ts, dx, rows, cols, cols, dc, ds, NULL), "quantize");
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(gc.data(), dc, nsample_rows * cols, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gs.data(), ds, nsample_rows * nb, cudaMemcpyDeviceToHost));
        fp4s_qout o;
        memset(&o, 0, sizeof o);
        o.codes = rc_.data(); o.ld_codes = cols;
        o.scales = rs.data(); o.ld_scales = nb;
        ok_or_die(fp4s_quantize(&s, &ts, hx.data(), nsample_rows, cols, cols, 0, &o, NULL), "reference");
        size_t bad = 0;
        for (size_t i = 0; i < nsample_rows * cols; i++) bad += rc_[i] != gc[i];
        for (size_t i = 0; i < nsample_rows * nb; i++) bad += rs[i] != gs[i];
        if (bad) {
            printf("%-28s MISMATCH with the reference on %zu bytes of the first %zu rows: not timed\n",
                   p.label, bad, nsample_rows);
            continue;
        }
        char lab[64];
        snprintf(lab, sizeof lab, "quantize %s", p.label);
        timing tq = time_op([&] { ok_or_die(fp4s_cuda_quantize(&s, &ts, dx, rows, cols, cols, dc, ds, NULL),
                                            "quantize"); }, warm, reps);
        row(lab, tq, 4.0 * n + n + (double)n / s.block, (double)n, copy_gbs);
        if (p.d2 || (p.f == FP4S_MXFP4 && strcmp(p.p, "ocp")) ||
            (p.f == FP4S_NVFP4 && strcmp(p.p, "te")))
            continue; /* dequantize once per format */
        snprintf(lab, sizeof lab, "dequantize %s", p.f == FP4S_MXFP4 ? "mxfp4" : "nvfp4");
        timing td = time_op([&] { ok_or_die(fp4s_cuda_dequantize(&s, &ts, dc, ds, rows, cols, dout, NULL),
                                            "dequantize"); }, warm, reps);
        row(lab, td, 4.0 * n + n + (double)n / s.block, (double)n, copy_gbs);
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dout);
    cudaFree(dc);
    cudaFree(ds);
    return 0;
}
