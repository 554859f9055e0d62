/* CUDA op: dequantize E2M1 codes (one per byte, or packed in the spec's pairs
 * or split layout) and scale bytes back to float32.
 *
 * Each thread turns 16 codes (16 bytes, or 8 packed bytes; for a split
 * 32-block the block's 16 bytes, whose low or high nibbles it takes) into 16
 * floats (four 16-byte stores) with the scale byte of their block; grid-stride
 * loop. 2-D NVFP4 needs nothing special: its scales are stored per row. The
 * arithmetic (cu_deq_block, cu_deq_elem) is quant_block.cuh's. */
#include "cuda_internal.cuh"

namespace {

constexpr int THREADS = 256;

/* OUT (code layout): 0 one per byte, 1 pairs, 2 split; BS the block. */
template <int OUT, int BS>
__global__ void __launch_bounds__(THREADS)
dequant16_kernel(fp4s_cu_params p, const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
                 size_t ngroups, bool vec, float *__restrict__ out)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nth = (size_t)gridDim.x * blockDim.x;
    for (size_t g = tid; g < ngroups; g += nth) {
        const size_t e0 = g * 16;
        uint8_t q[16];
        if (OUT == 0) {
            if (vec) {
                const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(codes + e0));
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int k = 0; k < 16; k++) q[k] = (uint8_t)(w[k >> 2] >> (8 * (k & 3)));
            } else {
#pragma unroll
                for (int k = 0; k < 16; k++) q[k] = codes[e0 + k];
            }
        } else if (OUT == 1 || BS == 16) {
            uint32_t w[2];
            if (vec) {
                const uint2 v = __ldcs(reinterpret_cast<const uint2 *>(codes + e0 / 2));
                w[0] = v.x;
                w[1] = v.y;
            } else {
                w[0] = w[1] = 0;
                for (int k = 0; k < 8; k++) w[k >> 2] |= (uint32_t)codes[e0 / 2 + k] << (8 * (k & 3));
            }
            if (OUT == 1) {
#pragma unroll
                for (int k = 0; k < 16; k++) q[k] = (uint8_t)((w[k >> 3] >> (4 * (k & 7))) & 15u);
            } else { /* split 16-block: byte j = q[j] | q[j+8] << 4 */
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const uint32_t b = (w[k >> 2] >> (8 * (k & 3))) & 0xFFu;
                    q[k] = (uint8_t)(b & 15u);
                    q[k + 8] = (uint8_t)(b >> 4);
                }
            }
        } else { /* split 32-block: its 16 bytes, low nibbles q[0..15], high q[16..31] */
            const size_t b0 = (e0 / 32) * 16;
            const unsigned h = (unsigned)(g & 1);
            uint32_t w[4];
            if (vec) {
                const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(codes + b0));
                w[0] = v.x;
                w[1] = v.y;
                w[2] = v.z;
                w[3] = v.w;
            } else {
                w[0] = w[1] = w[2] = w[3] = 0;
                for (int k = 0; k < 16; k++) w[k >> 2] |= (uint32_t)codes[b0 + k] << (8 * (k & 3));
            }
#pragma unroll
            for (int k = 0; k < 16; k++) q[k] = (uint8_t)((w[k >> 2] >> (8 * (k & 3) + 4 * h)) & 15u);
        }
        const fp4s_cu_dq d = cu_deq_block(p, __ldg(scales + e0 / BS));
        float f[16];
#pragma unroll
        for (int k = 0; k < 16; k++) f[k] = cu_deq_elem(d, q[k]);
        if (vec) {
#pragma unroll
            for (int k = 0; k < 4; k++)
                __stcs(reinterpret_cast<float4 *>(out + e0) + k,
                       make_float4(f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]));
        } else {
#pragma unroll
            for (int k = 0; k < 16; k++) out[e0 + k] = f[k];
        }
    }
}

template <int BS>
void launch(int out, unsigned grid, cudaStream_t st, const fp4s_cu_params &p, const uint8_t *c,
            const uint8_t *s, size_t ng, bool vec, float *o)
{
    if (out == 0) dequant16_kernel<0, BS><<<grid, THREADS, 0, st>>>(p, c, s, ng, vec, o);
    else if (out == 1) dequant16_kernel<1, BS><<<grid, THREADS, 0, st>>>(p, c, s, ng, vec, o);
    else dequant16_kernel<2, BS><<<grid, THREADS, 0, st>>>(p, c, s, ng, vec, o);
}

} // namespace

extern "C" FP4S_API int fp4s_cuda_dequantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                                const uint8_t *d_codes, const uint8_t *d_scales,
                                                size_t rows, size_t cols, float *d_out, void *stream)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    if (!d_codes || !d_scales || !d_out)
        return fp4s_error_set(FP4S_EINVAL, "cuda: dequantize: codes, scales and output are required");
    if (rows == 0 || cols == 0) return 0;
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: dequantize: no usable GPU");
    const int out = !packed ? 0 : (s->packing == FP4S_PACK_SPLIT ? 2 : 1);
    const size_t ngroups = rows * (cols / 16);
    const size_t need = out == 0 ? 16 : (out == 2 && p.block == 32 ? 16 : 8);
    const bool vec = ((uintptr_t)d_codes % need == 0) && ((uintptr_t)d_out % 16 == 0);
    const unsigned grid = fp4s_cu_grid(ngroups, THREADS);
    cudaStream_t st = (cudaStream_t)stream;
    cudaGetLastError();
    if (p.block == 32) launch<32>(out, grid, st, p, d_codes, d_scales, ngroups, vec, d_out);
    else launch<16>(out, grid, st, p, d_codes, d_scales, ngroups, vec, d_out);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fp4s_cu_fail(e, "dequantize: launch");
    return 0;
}

extern "C" FP4S_API int fp4s_cuda_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                             const uint8_t *d_codes, const uint8_t *d_scales,
                                             size_t rows, size_t cols, float *d_out, void *stream)
{
    return fp4s_cuda_dequantize_ex(s, ts, false, d_codes, d_scales, rows, cols, d_out, stream);
}
