/* The GPU half of test_approx: a random sample of inputs through the
 * instructions fp4scope emulates, regenerated on the GPU, for comparison with
 * the emulation (tests/engines/test_approx SAMPLES) and thereby with the
 * shipped table.
 *
 *   approx_sample OUT.bin [SEED]
 *
 * Writes records of four little-endian uint32 (op, a, b, result): op 0
 * rcp.approx.ftz.f32(a) for 2^24 random inputs (random bits, so every class
 * appears: a 2^-9 share NaN or Inf, a 2^-8 share zero or subnormal) plus
 * 2^20 around powers of two and the ends of the range; op 1
 * ex2.approx.ftz.f32 of every integer a - 1000 in [-200, 200]; op 2
 * mul.rn.ftz.f32(a, b) for 2^22 pairs whose product lies near 2^-126 and
 * 2^20 random pairs; op 3 div.rn.ftz.f32(a, b) for 2^22 pairs whose quotient
 * lies near 2^-126 (1/b, b about 2^126, and 2^-126/b, b about 1) and 2^20
 * random pairs.
 *
 * Build: nvcc -O3 -arch=sm_90 -o approx_sample approx_sample.cu */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "approx_sample: %s: %s\n", #x, cudaGetErrorString(e_));             \
            exit(5);                                                                            \
        }                                                                                       \
    } while (0)

__global__ void k_run(uint32_t *r, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t *q = r + 4 * i;
    float a = __uint_as_float(q[1]), b = __uint_as_float(q[2]), y;
    switch (q[0]) {
    case 0: asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(a)); break;
    case 1: {
        float x = (float)((int)q[1] - 1000);
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
        break;
    }
    case 2: asm volatile("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); break;
    default: asm volatile("div.rn.ftz.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); break;
    }
    q[3] = __float_as_uint(y);
}

static uint64_t st;
static uint32_t rnd(void)
{
    uint64_t z = (st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 16);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: approx_sample OUT.bin [SEED]\n"); return 2; }
    st = argc > 2 ? strtoull(argv[2], NULL, 0) : 20261201;
    std::vector<uint32_t> r;
    auto add = [&](uint32_t op, uint32_t a, uint32_t b) { r.push_back(op); r.push_back(a); r.push_back(b); r.push_back(0); };
    for (int i = 0; i < (1 << 24); i++) add(0, rnd() << 16 ^ rnd(), 0);
    for (int i = 0; i < (1 << 20); i++) {
        uint32_t e = (uint32_t)(rnd() % 256), m = rnd() % 64;
        uint32_t lo = (rnd() & 1) ? m : 0x7FFFFFu - m;      /* near 2^e and just below 2^(e+1) */
        add(0, (rnd() & 1) << 31 | e << 23 | lo, 0);
    }
    for (int n = -200; n <= 200; n++) add(1, (uint32_t)(n + 1000), 0);
    for (int i = 0; i < (1 << 22); i++) {
        uint32_t a = 0x3F7FF000u + rnd() % 0x2000u;              /* about 1 */
        uint32_t b = (0x00800000u - 0x1000u + rnd() % 0x2000u) | (rnd() & 1) << 31; /* about 2^-126 */
        add(2, a, b);
    }
    for (int i = 0; i < (1 << 20); i++) add(2, rnd() << 16 ^ rnd(), rnd() << 16 ^ rnd());
    for (int i = 0; i < (1 << 21); i++)
        add(3, 0x3F800000u | (rnd() & 1) << 31, 0x7E800000u - 0x1000u + rnd() % 0x2000u); /* 1 / ~2^126 */
    for (int i = 0; i < (1 << 21); i++)
        add(3, 0x00800000u - 0x1000u + rnd() % 0x2000u, 0x3F7FF000u + rnd() % 0x2000u);  /* ~2^-126 / ~1 */
    for (int i = 0; i < (1 << 20); i++) add(3, rnd() << 16 ^ rnd(), rnd() << 16 ^ rnd());
    size_t n = r.size() / 4;
    uint32_t *d;
    CK(cudaMalloc(&d, r.size() * 4));
    CK(cudaMemcpy(d, r.data(), r.size() * 4, cudaMemcpyHostToDevice));
    k_run<<<(unsigned)((n + 255) / 256), 256>>>(d, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(r.data(), d, r.size() * 4, cudaMemcpyDeviceToHost));
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(r.data(), 4, r.size(), f) != r.size() || fclose(f)) { fprintf(stderr, "approx_sample: %s: cannot write\n", argv[1]); return 4; }
    printf("approx_sample: %zu samples in %s\n", n, argv[1]);
    return 0;
}
