/* CUDA benchmark: quantize / dequantize / amax throughput on the GPU, next to
 * a device-to-device copy measured in the same run.
 *
 *   bench_cuda [--rows R] [--cols C] [--reps N] [--warmup N] [--only TEXT]
 *
 * Default tensor: 262144 x 4096 elements (2^30), generated on the device in
 * float32 (4 GiB; a hash of the index: gaussian-like values with a random
 * exponent per 32-block, plus some exact E2M1 ties, never zeros) and rounded
 * to BF16 (2 GiB) for the BF16 runs. Every MXFP4 scale rule (on the ocp
 * profile), the ggml and microxcaling profiles (their tie rules), and every
 * NVFP4 recipe 1-D and 2-D, each for float32 and BF16 input and for one code
 * per byte and packed codes. Each op is timed with CUDA events around each
 * launch: warm-up launches first, then the median (and min/max) of --reps
 * timed launches. Bytes counted are the fewest an op must move: quantize
 * reads 4 (2) bytes per element and writes 1 (packed 1/2) byte of codes plus
 * one scale byte per block; dequantize the reverse with float32 output; the
 * copy counts bytes read plus bytes written (the copy of the float32 tensor
 * is the ceiling every "of copy" figure is against). Before timing, the first
 * 2^20 elements of every quantize output are compared with the CPU reference
 * (fp4s_quantize of the same float32 values, packed with fp4s_pack_e2m1_block),
 * so the numbers are of a correct kernel. Lines starting "RESULT" are for
 * scripts: RESULT op dtype layout label median_ms GB/s of_copy. --only runs
 * the configurations whose label contains TEXT. */
#include <fp4scope/codec.h>
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

__global__ void gen_kernel(float *x, uint16_t *xb, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t hb = hash32((i >> 5) ^ ((uint64_t)seed << 40));
        int e = (int)(hb % 40u) - 20; /* exponent per 32-block */
        uint32_t h = hash32(i + ((uint64_t)seed << 32));
        /* sum of 4 uniforms: roughly gaussian, in [-2, 2) */
        float u = ((h & 0xFF) + ((h >> 8) & 0xFF) + ((h >> 16) & 0xFF) + (h >> 24)) / 256.0f - 2.0f;
        if ((h & 0x3F) == 0) u = (h & 0x40) ? 1.25f : -2.5f; /* exact ties at scale 2^e */
        if (u == 0.0f) u = 0.0078125f;
        x[i] = ldexpf(u, e);
        /* BF16, round to nearest even (no NaN here) */
        uint32_t b = __float_as_uint(x[i]);
        b += 0x7FFFu + ((b >> 16) & 1u);
        xb[i] = (uint16_t)(b >> 16);
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

static double g_copy = 0;

static void row(const char *op, const char *dt, const char *layout, const char *label, timing t, double bytes,
                double n)
{
    double gbs = bytes / (t.med * 1e-3) / 1e9;
    printf("%-11s %-8s %-7s %-26s %8.3f %8.3f %8.3f %8.1f %8.5f %6.1f%%\n", op, dt, layout, label, t.med, t.lo,
           t.hi, gbs, t.med * 1e6 / n, g_copy > 0 ? 100.0 * gbs / g_copy : 0.0);
    printf("RESULT %s %s %s %s %.4f %.1f %.4f\n", op, dt, layout, label, t.med, gbs,
           g_copy > 0 ? gbs / g_copy : 0.0);
    fflush(stdout);
}

static void ok_or_die(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "bench_cuda: %s: %s\n", what, fp4s_last_error());
        exit(1);
    }
}

struct config {
    fp4s_format f;
    const char *profile;
    int rule; /* MXFP4 scale rule override, -1: the profile's */
    bool d2;
    const char *label;
};

int main(int argc, char **argv)
{
    size_t rows = 262144, cols = 4096;
    int reps = 30, warm = 3;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = strtoull(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = strtoull(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warm = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cuda [--rows R] [--cols C] [--reps N] [--warmup N] [--only TEXT]\n");
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
    printf("bench_cuda: device: %s\n", desc);
    if (!fp4s_cuda_available()) {
        printf("bench_cuda: no usable GPU, nothing to measure\n");
        return 77;
    }
    const size_t n = rows * cols;
    printf("bench_cuda: tensor %zu x %zu (%.2f GiB float32, %.2f GiB bfloat16), %d warm-up + %d timed launches per op\n",
           rows, cols, n * 4.0 / (1 << 30), n * 2.0 / (1 << 30), warm, reps);

    float *dx, *dy, *dout;
    uint16_t *dxb;
    uint8_t *dc, *ds;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dy, n * sizeof(float)));
    CK(cudaMalloc(&dxb, n * sizeof(uint16_t)));
    CK(cudaMalloc(&dout, n * sizeof(float)));
    CK(cudaMalloc(&dc, n));
    CK(cudaMalloc(&ds, n / 16));
    gen_kernel<<<132 * 16, 256>>>(dx, dxb, n, 12345u);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    printf("%-11s %-8s %-7s %-26s %8s %8s %8s %8s %8s %7s\n", "op", "input", "codes", "config", "med ms", "min ms",
           "max ms", "GB/s", "ns/el", "of copy");
    timing tc = time_op([&] { CK(cudaMemcpyAsync(dy, dx, n * sizeof(float), cudaMemcpyDeviceToDevice)); },
                        warm, reps);
    g_copy = 2.0 * n * sizeof(float) / (tc.med * 1e-3) / 1e9;
    row("copy", "float32", "-", "d2d memcpy (read+write)", tc, 2.0 * n * sizeof(float), (double)n);
    timing tcb = time_op([&] { CK(cudaMemcpyAsync(dy, dxb, n * sizeof(uint16_t), cudaMemcpyDeviceToDevice)); },
                         warm, reps);
    row("copy", "bfloat16", "-", "d2d memcpy (read+write)", tcb, 2.0 * n * sizeof(uint16_t), (double)n);

    float amax = 0, amax_b = 0;
    uint64_t nf = 0;
    timing ta = time_op([&] { ok_or_die(fp4s_cuda_amax(dx, rows, cols, cols, &amax, &nf, NULL), "amax"); },
                        warm, reps);
    row("amax", "float32", "-", "tensor amax (incl. sync)", ta, 4.0 * n, (double)n);
    timing tab = time_op([&] { ok_or_die(fp4s_cuda_amax_ex(FP4S_DT_BF16, dxb, rows, cols, cols, &amax_b, &nf, NULL),
                                         "amax"); }, warm, reps);
    row("amax", "bfloat16", "-", "tensor amax (incl. sync)", tab, 2.0 * n, (double)n);

    const config cfgs[] = {
        {FP4S_MXFP4, "ocp", FP4S_MX_FLOOR, false, "mxfp4-floor(ocp)"},
        {FP4S_MXFP4, "ocp", FP4S_MX_CEIL, false, "mxfp4-ceil"},
        {FP4S_MXFP4, "ocp", FP4S_MX_EVEN, false, "mxfp4-even"},
        {FP4S_MXFP4, "ocp", FP4S_MX_LOG2F, false, "mxfp4-log2f"},
        {FP4S_MXFP4, "ocp", FP4S_MX_RTN, false, "mxfp4-rtn"},
        {FP4S_MXFP4, "ocp", FP4S_MX_CEIL_LOG2F, false, "mxfp4-ceil-log2f"},
        {FP4S_MXFP4, "ggml", -1, false, "mxfp4-ggml(rtz,split)"},
        {FP4S_MXFP4, "microxcaling", -1, false, "mxfp4-microxcaling(rha)"},
        {FP4S_NVFP4, "te", -1, false, "nvfp4-te"},
        {FP4S_NVFP4, "te", -1, true, "nvfp4-te-2d"},
        {FP4S_NVFP4, "torchao", -1, false, "nvfp4-torchao"},
        {FP4S_NVFP4, "torchao", -1, true, "nvfp4-torchao-2d"},
        {FP4S_NVFP4, "modelopt", -1, false, "nvfp4-modelopt"},
        {FP4S_NVFP4, "modelopt", -1, true, "nvfp4-modelopt-2d"},
        {FP4S_NVFP4, "ggml", -1, false, "nvfp4-ggml(search)"},
    };
    /* host copies of the first rows for the reference check */
    const size_t ns_rows = std::min(rows, ((size_t)(1u << 20) / cols + 16) & ~(size_t)15);
    const size_t ns = ns_rows * cols;
    std::vector<float> hx(ns), hxb32(ns);
    std::vector<uint16_t> hxb(ns);
    CK(cudaMemcpy(hx.data(), dx, ns * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hxb.data(), dxb, ns * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < ns; i++) hxb32[i] = fp4s_bf16_decode(hxb[i]);
    std::vector<uint8_t> rc_(ns), rs(ns / 16), rp(ns), gc(ns), gs(ns / 16);
    for (int di = 0; di < 2; di++) {
        const fp4s_dtype dt = di ? FP4S_DT_BF16 : FP4S_DT_F32;
        const void *xin = di ? (const void *)dxb : (const void *)dx;
        const float am = di ? amax_b : amax;
        const double esz = di ? 2.0 : 4.0;
        const char *dtn = di ? "bfloat16" : "float32";
        for (int pk = 0; pk < 2; pk++) {
            for (const config &c : cfgs) {
                if (only && !strstr(c.label, only)) continue;
                fp4s_spec s;
                if (fp4s_spec_profile(&s, c.f, c.profile) != 0) {
                    printf("%-26s (profile not defined: skipped)\n", c.label);
                    continue;
                }
                if (c.rule >= 0) {
                    s.mx_rule = (fp4s_mx_rule)c.rule;
                    s.profile[0] = '\0';
                }
                s.tile2d = c.d2;
                if (fp4s_spec_check(&s) != 0 || !fp4s_cuda_supports(&s)) {
                    printf("%-26s (not supported: skipped)\n", c.label);
                    continue;
                }
                fp4s_tscale ts;
                ok_or_die(fp4s_tscale_init(&s, am, &ts), "tscale");
                const size_t nb = cols / s.block, pc = pk ? cols / 2 : cols;
                ok_or_die(fp4s_cuda_quantize_ex(&s, &ts, dt, xin, rows, cols, cols, pk, dc, ds, NULL), "quantize");
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(gc.data(), dc, ns_rows * pc, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(gs.data(), ds, ns_rows * nb, cudaMemcpyDeviceToHost));
                fp4s_qout o;
                memset(&o, 0, sizeof o);
                o.codes = rc_.data(); o.ld_codes = cols;
                o.scales = rs.data(); o.ld_scales = nb;
                ok_or_die(fp4s_quantize(&s, &ts, di ? hxb32.data() : hx.data(), ns_rows, cols, cols, 0, &o, NULL),
                          "reference");
                for (size_t r = 0; r < ns_rows; r++) {
                    if (pk) ok_or_die(fp4s_pack_e2m1_block(s.packing, s.block, rc_.data() + r * cols, cols,
                                                           rp.data() + r * pc), "pack");
                    else memcpy(rp.data() + r * cols, rc_.data() + r * cols, cols);
                }
                size_t bad = 0;
                for (size_t i = 0; i < ns_rows * pc; i++) bad += rp[i] != gc[i];
                for (size_t i = 0; i < ns_rows * nb; i++) bad += rs[i] != gs[i];
                const char *lay = pk ? (s.packing == FP4S_PACK_SPLIT ? "split" : "pairs") : "bytes";
                if (bad) {
                    printf("quantize    %-8s %-7s %-26s MISMATCH with the reference on %zu bytes of the first %zu rows: "
                           "not timed\n", dtn, lay, c.label, bad, ns_rows);
                    printf("RESULT quantize %s %s %s MISMATCH 0 0\n", dtn, lay, c.label);
                    continue;
                }
                timing tq = time_op([&] {
                    ok_or_die(fp4s_cuda_quantize_ex(&s, &ts, dt, xin, rows, cols, cols, pk, dc, ds, NULL), "quantize");
                }, warm, reps);
                row("quantize", dtn, lay, c.label, tq, esz * n + (pk ? 0.5 : 1.0) * n + (double)n / s.block, (double)n);
                if (di == 0 && (c.rule == FP4S_MX_FLOOR || (c.f == FP4S_NVFP4 && !strcmp(c.profile, "te") && !c.d2))) {
                    timing td = time_op([&] {
                        ok_or_die(fp4s_cuda_dequantize_ex(&s, &ts, pk, dc, ds, rows, cols, dout, NULL), "dequantize");
                    }, warm, reps);
                    row("dequantize", "float32", lay, c.label, td, 4.0 * n + (pk ? 0.5 : 1.0) * n + (double)n / s.block,
                        (double)n);
                }
            }
        }
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dxb);
    cudaFree(dout);
    cudaFree(dc);
    cudaFree(ds);
    return 0;
}
