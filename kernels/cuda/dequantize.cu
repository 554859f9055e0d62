/* CUDA op: dequantize E2M1 codes and scale bytes back to float32.
 *
 * Each thread turns 4 codes (one 32-bit load) into 4 floats (one 16-byte
 * store) with the scale byte of their block; grid-stride loop, UNROLL vectors
 * in flight per thread. 2-D NVFP4 needs nothing special: its scales are
 * stored per row. The arithmetic (cu_deq) is quant_block.cuh's. */
#include "cuda_internal.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int UNROLL = 4;

template <bool VEC>
__global__ void __launch_bounds__(THREADS)
dequant_kernel(fp4s_cu_params p, const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
               size_t nvec, unsigned g_shift, float *__restrict__ out)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    for (size_t base = tid; base < nvec; base += nthreads * UNROLL) {
        uint32_t q[UNROLL];
        uint8_t sc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            size_t v = base + (size_t)u * nthreads;
            if (v < nvec) {
                if (VEC) {
                    q[u] = __ldcs(reinterpret_cast<const unsigned int *>(codes + v * 4));
                } else {
                    q[u] = (uint32_t)codes[v * 4] | (uint32_t)codes[v * 4 + 1] << 8
                         | (uint32_t)codes[v * 4 + 2] << 16 | (uint32_t)codes[v * 4 + 3] << 24;
                }
                sc[u] = __ldg(scales + (v >> g_shift));
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            size_t v = base + (size_t)u * nthreads;
            if (v >= nvec) continue;
            const fp4s_cu_dq d = cu_deq_block(p, sc[u]);
            float4 f;
            f.x = cu_deq_elem(d, (uint8_t)q[u]);
            f.y = cu_deq_elem(d, (uint8_t)(q[u] >> 8));
            f.z = cu_deq_elem(d, (uint8_t)(q[u] >> 16));
            f.w = cu_deq_elem(d, (uint8_t)(q[u] >> 24));
            if (VEC) {
                __stcs(reinterpret_cast<float4 *>(out + v * 4), f);
            } else {
                out[v * 4] = f.x;
                out[v * 4 + 1] = f.y;
                out[v * 4 + 2] = f.z;
                out[v * 4 + 3] = f.w;
            }
        }
    }
}

} // namespace

extern "C" FP4S_API int fp4s_cuda_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                             const uint8_t *d_codes, const uint8_t *d_scales,
                                             size_t rows, size_t cols, float *d_out, void *stream)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    if (!d_codes || !d_scales || !d_out)
        return fp4s_error_set(FP4S_EINVAL, "cuda: dequantize: codes, scales and output are required");
    if (rows == 0) return 0;
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: dequantize: no usable GPU");
    size_t nvec = rows * (cols / 4);
    unsigned g_shift = p.block == 32 ? 3 : 2; /* vectors per block: 8 or 4 */
    bool vec = ((uintptr_t)d_codes % 4 == 0) && ((uintptr_t)d_out % 16 == 0);
    unsigned grid = fp4s_cu_grid((nvec + UNROLL - 1) / UNROLL, THREADS);
    cudaStream_t st = (cudaStream_t)stream;
    cudaGetLastError();
    if (vec)
        dequant_kernel<true><<<grid, THREADS, 0, st>>>(p, d_codes, d_scales, nvec, g_shift, d_out);
    else
        dequant_kernel<false><<<grid, THREADS, 0, st>>>(p, d_codes, d_scales, nvec, g_shift, d_out);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fp4s_cu_fail(e, "dequantize: launch");
    return 0;
}
