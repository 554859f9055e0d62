/* CUDA op: tensor amax (max |x| over finite entries) and the count of NaN/Inf
 * entries, the first pass of NVFP4's two-pass flow, for float32, BF16 and
 * FP16 input. Magnitudes are compared as float32 bit patterns (numeric order
 * for non-negative floats), so the result is exact and independent of the
 * reduction order. */
#include "cuda_internal.cuh"

#include <cuda_fp16.h>

namespace {

constexpr int THREADS = 256;

template <int DT>
__device__ __forceinline__ uint32_t mag_bits(const void *x, size_t i)
{
    if (DT == CU_DT_F32) return __float_as_uint(__ldcs(static_cast<const float *>(x) + i)) & 0x7FFFFFFFu;
    const uint32_t h = __ldcs(static_cast<const unsigned short *>(x) + i);
    if (DT == CU_DT_BF16) return (h << 16) & 0x7FFFFFFFu;
    return __float_as_uint(__half2float(__ushort_as_half((unsigned short)h))) & 0x7FFFFFFFu;
}

__device__ __forceinline__ void fold(uint32_t u, uint32_t &m, unsigned long long &nf)
{
    if (u >= 0x7F800000u) nf++;
    else m = max(m, u);
}

__device__ __forceinline__ void reduce(uint32_t m, unsigned long long nf, unsigned int *amax_bits,
                                       unsigned long long *nonfinite)
{
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

template <int DT>
__global__ void __launch_bounds__(THREADS)
amax_kernel(const void *__restrict__ x, size_t rows, size_t cols, size_t ld, unsigned int *amax_bits,
            unsigned long long *nonfinite)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    const size_t n = rows * cols;
    uint32_t m = 0;
    unsigned long long nf = 0;
    for (size_t i = tid; i < n; i += nthreads) {
        size_t r = i / cols, c = i - r * cols;
        fold(mag_bits<DT>(x, r * ld + c), m, nf);
    }
    reduce(m, nf, amax_bits, nonfinite);
}

/* Contiguous, 16-byte aligned fast path: 16 bytes a load. */
template <int DT>
__global__ void __launch_bounds__(THREADS)
amax16_kernel(const uint4 *__restrict__ x, size_t n16, unsigned int *amax_bits, unsigned long long *nonfinite)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    uint32_t m = 0;
    unsigned long long nf = 0;
    for (size_t i = tid; i < n16; i += nthreads) {
        const uint4 v = __ldcs(x + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (DT == CU_DT_F32) {
                fold(w[k] & 0x7FFFFFFFu, m, nf);
            } else if (DT == CU_DT_BF16) {
                fold((w[k] << 16) & 0x7FFFFFFFu, m, nf);
                fold(w[k] & 0x7FFF0000u, m, nf);
            } else {
                const float2 h = __half22float2(*reinterpret_cast<const __half2 *>(&w[k]));
                fold(__float_as_uint(h.x) & 0x7FFFFFFFu, m, nf);
                fold(__float_as_uint(h.y) & 0x7FFFFFFFu, m, nf);
            }
        }
    }
    reduce(m, nf, amax_bits, nonfinite);
}

template <int DT>
void launch(const void *d_x, size_t rows, size_t cols, size_t ld, unsigned int *bits, unsigned long long *nf,
            cudaStream_t st)
{
    const size_t esz = DT == CU_DT_F32 ? 4 : 2, n = rows * cols;
    if (ld == cols && (uintptr_t)d_x % 16 == 0 && (n * esz) % 16 == 0) {
        const size_t n16 = n * esz / 16;
        amax16_kernel<DT><<<fp4s_cu_grid(n16, THREADS), THREADS, 0, st>>>(static_cast<const uint4 *>(d_x), n16,
                                                                         bits, nf);
    } else {
        amax_kernel<DT><<<fp4s_cu_grid(n, THREADS), THREADS, 0, st>>>(d_x, rows, cols, ld, bits, nf);
    }
}

} // namespace

void fp4s_cu_amax_async(int dt, const void *d_x, size_t rows, size_t cols, size_t ld, unsigned int *d_bits,
                        unsigned long long *d_nf, cudaStream_t st)
{
    if (rows == 0 || cols == 0) return;
    if (dt == CU_DT_F32) launch<CU_DT_F32>(d_x, rows, cols, ld, d_bits, d_nf, st);
    else if (dt == CU_DT_BF16) launch<CU_DT_BF16>(d_x, rows, cols, ld, d_bits, d_nf, st);
    else launch<CU_DT_F16>(d_x, rows, cols, ld, d_bits, d_nf, st);
}

extern "C" FP4S_API int fp4s_cuda_amax_ex(fp4s_dtype dtype, const void *d_x, size_t rows, size_t cols, size_t ld,
                                          float *amax, uint64_t *nonfinite, void *stream)
{
    if (!d_x || !amax)
        return fp4s_error_set(FP4S_EINVAL, "cuda: amax: input and result are required");
    const int dt = fp4s_cu_dtype(dtype, "amax");
    if (dt < 0) return dt;
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
        if (dt == CU_DT_F32) launch<CU_DT_F32>(d_x, rows, cols, ld, &d_res->bits, &d_res->nf, st);
        else if (dt == CU_DT_BF16) launch<CU_DT_BF16>(d_x, rows, cols, ld, &d_res->bits, &d_res->nf, st);
        else launch<CU_DT_F16>(d_x, rows, cols, ld, &d_res->bits, &d_res->nf, st);
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

extern "C" FP4S_API int fp4s_cuda_amax(const float *d_x, size_t rows, size_t cols, size_t ld, float *amax,
                                       uint64_t *nonfinite, void *stream)
{
    return fp4s_cuda_amax_ex(FP4S_DT_F32, d_x, rows, cols, ld, amax, nonfinite, stream);
}
