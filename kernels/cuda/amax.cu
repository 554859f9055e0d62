/* CUDA op: tensor amax (max |x| over finite entries) and the count of NaN/Inf
 * entries, the first pass of NVFP4's two-pass flow. Magnitudes are compared
 * as float32 bit patterns (numeric order for non-negative floats), so the
 * result is exact and independent of the reduction order. */
#include "cuda_internal.cuh"

namespace {

constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS)
amax_kernel(const float *__restrict__ x, size_t rows, size_t cols, size_t ld,
            unsigned int *amax_bits, unsigned long long *nonfinite)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    const size_t n = rows * cols;
    uint32_t m = 0;
    unsigned long long nf = 0;
    for (size_t i = tid; i < n; i += nthreads) {
        size_t r = i / cols, c = i - r * cols;
        uint32_t u = __float_as_uint(__ldcs(x + r * ld + c)) & 0x7FFFFFFFu;
        if (u >= 0x7F800000u) nf++;
        else m = max(m, u);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
        nf += __shfl_xor_sync(0xffffffffu, nf, o);
    }
    if ((threadIdx.x & 31u) == 0) {
        if (m) atomicMax(amax_bits, m);
        if (nf) atomicAdd(nonfinite, nf);
    }
}

/* Contiguous, 16-byte aligned fast path. */
__global__ void __launch_bounds__(THREADS)
amax4_kernel(const float4 *__restrict__ x, size_t n4, unsigned int *amax_bits,
             unsigned long long *nonfinite)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    uint32_t m = 0;
    unsigned long long nf = 0;
    for (size_t i = tid; i < n4; i += nthreads) {
        float4 f = __ldcs(x + i);
        uint32_t u[4] = {__float_as_uint(f.x) & 0x7FFFFFFFu, __float_as_uint(f.y) & 0x7FFFFFFFu,
                         __float_as_uint(f.z) & 0x7FFFFFFFu, __float_as_uint(f.w) & 0x7FFFFFFFu};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (u[k] >= 0x7F800000u) nf++;
            else m = max(m, u[k]);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
        nf += __shfl_xor_sync(0xffffffffu, nf, o);
    }
    if ((threadIdx.x & 31u) == 0) {
        if (m) atomicMax(amax_bits, m);
        if (nf) atomicAdd(nonfinite, nf);
    }
}

} // namespace

extern "C" FP4S_API int fp4s_cuda_amax(const float *d_x, size_t rows, size_t cols, size_t ld,
                                       float *amax, uint64_t *nonfinite, void *stream)
{
    if (!d_x || !amax)
        return fp4s_error_set(FP4S_EINVAL, "cuda: amax: input and result are required");
    if (ld < cols)
        return fp4s_error_set(FP4S_EINVAL, "cuda: amax: row stride %zu is smaller than %zu columns",
                              ld, cols);
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: amax: no usable GPU");
    *amax = 0.0f;
    if (rows == 0 || cols == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    struct res { unsigned int bits; unsigned int pad; unsigned long long nf; };
    res *d_res = nullptr;
    res h = {0u, 0u, 0ull};
    cudaGetLastError();
    cudaError_t e = cudaMallocAsync((void **)&d_res, sizeof(res), st);
    if (e != cudaSuccess) return fp4s_cu_fail(e, "amax: scratch allocation");
    e = cudaMemsetAsync(d_res, 0, sizeof(res), st);
    if (e == cudaSuccess) {
        size_t n = rows * cols;
        if (ld == cols && (uintptr_t)d_x % 16 == 0 && n % 4 == 0) {
            unsigned grid = fp4s_cu_grid(n / 4, THREADS);
            amax4_kernel<<<grid, THREADS, 0, st>>>(reinterpret_cast<const float4 *>(d_x), n / 4,
                                                   &d_res->bits, &d_res->nf);
        } else {
            unsigned grid = fp4s_cu_grid(n, THREADS);
            amax_kernel<<<grid, THREADS, 0, st>>>(d_x, rows, cols, ld, &d_res->bits, &d_res->nf);
        }
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h, d_res, sizeof h, cudaMemcpyDeviceToHost, st);
    cudaError_t e2 = cudaFreeAsync(d_res, st);
    if (e == cudaSuccess) e = e2;
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e != cudaSuccess) return fp4s_cu_fail(e, "amax");
    uint32_t b = h.bits;
    memcpy(amax, &b, sizeof b);
    if (nonfinite) *nonfinite += h.nf;
    return 0;
}
