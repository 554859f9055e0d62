/* CUDA op: dequantize E2M1 codes (one per byte, or packed in the spec's pairs
 * or split layout) and scale bytes back to float32.
 *
 * Each thread turns 4 codes at a time (4 bytes, 2 packed bytes, or 4 bytes
 * of a split block's low or high nibbles) into 4 floats (one 16-byte store)
 * with the scale byte of their block; grid-stride loop, 4 such slots in
 * flight per thread. 2-D NVFP4 needs nothing special: its scales are stored per row. The
 * arithmetic (cu_deq_block, cu_deq_elem) is quant_block.cuh's. */
#include "cuda_internal.cuh"

namespace {

constexpr int THREADS = 256;

/* OUT (code layout): 0 one per byte, 1 pairs, 2 split; BS the block. Each
 * slot is 4 consecutive elements: their codes (4 bytes; 2 packed bytes; for
 * split, 4 bytes of the block's low or high nibbles) and one 16-byte store;
 * a thread takes UNROLL slots nth apart, so every load and store instruction
 * of a warp is contiguous. */
template <int OUT, int BS>
__global__ void __launch_bounds__(THREADS)
dequant4_kernel(fp4s_cu_params p, const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
                size_t nvec, bool vec, float *__restrict__ out)
{
    constexpr int UNROLL = 4;
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nth = (size_t)gridDim.x * blockDim.x;
    for (size_t base = tid; base < nvec; base += nth * UNROLL) {
        uint32_t q[UNROLL];
        uint8_t sc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t v = base + (size_t)u * nth;
            q[u] = 0;
            sc[u] = 0;
            if (v >= nvec) continue;
            const size_t e0 = v * 4;
            if (OUT == 0) {
                q[u] = vec ? __ldcs(reinterpret_cast<const unsigned int *>(codes + e0))
                           : (uint32_t)codes[e0] | (uint32_t)codes[e0 + 1] << 8 |
                                 (uint32_t)codes[e0 + 2] << 16 | (uint32_t)codes[e0 + 3] << 24;
            } else if (OUT == 1) {
                const uint32_t h = vec ? __ldcs(reinterpret_cast<const unsigned short *>(codes + e0 / 2))
                                       : (uint32_t)codes[e0 / 2] | (uint32_t)codes[e0 / 2 + 1] << 8;
                /* nibbles n0..n3 to bytes */
                q[u] = (h & 0xFu) | ((h & 0xF0u) << 4) | ((h & 0xF00u) << 8) | ((h & 0xF000u) << 12);
            } else {
                const size_t j = e0 % BS, off = (e0 / BS) * (BS / 2) + j % (BS / 2);
                const uint32_t w = vec ? __ldcs(reinterpret_cast<const unsigned int *>(codes + off))
                                       : (uint32_t)codes[off] | (uint32_t)codes[off + 1] << 8 |
                                             (uint32_t)codes[off + 2] << 16 | (uint32_t)codes[off + 3] << 24;
                q[u] = (j < BS / 2 ? w : w >> 4) & 0x0F0F0F0Fu;
            }
            sc[u] = __ldg(scales + e0 / BS);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t v = base + (size_t)u * nth;
            if (v >= nvec) continue;
            const fp4s_cu_dq d = cu_deq_block(p, sc[u]);
            float4 f;
            f.x = cu_deq_elem(d, (uint8_t)q[u]);
            f.y = cu_deq_elem(d, (uint8_t)(q[u] >> 8));
            f.z = cu_deq_elem(d, (uint8_t)(q[u] >> 16));
            f.w = cu_deq_elem(d, (uint8_t)(q[u] >> 24));
            if (vec) {
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

template <int BS>
void launch(int out, unsigned grid, cudaStream_t st, const fp4s_cu_params &p, const uint8_t *c,
            const uint8_t *s, size_t nv, bool vec, float *o)
{
    if (out == 0) dequant4_kernel<0, BS><<<grid, THREADS, 0, st>>>(p, c, s, nv, vec, o);
    else if (out == 1) dequant4_kernel<1, BS><<<grid, THREADS, 0, st>>>(p, c, s, nv, vec, o);
    else dequant4_kernel<2, BS><<<grid, THREADS, 0, st>>>(p, c, s, nv, vec, o);
}

} // namespace

int fp4s_cu_dequantize_args(const fp4s_spec *s, const fp4s_tscale *ts, const void *codes, const void *scales,
                            const void *out, size_t rows, size_t cols, fp4s_cu_params *p)
{
    int rc = fp4s_cu_prepare(s, ts, rows, cols, p);
    if (rc) return rc;
    if (!codes || !scales || !out)
        return fp4s_error_set(FP4S_EINVAL, "cuda: dequantize: codes, scales and output are required");
    if (rows == 0 || cols == 0) return 1;
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: dequantize: no usable GPU");
    return 0;
}

extern "C" FP4S_API int fp4s_cuda_dequantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                                const uint8_t *d_codes, const uint8_t *d_scales,
                                                size_t rows, size_t cols, float *d_out, void *stream)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_dequantize_args(s, ts, d_codes, d_scales, d_out, rows, cols, &p);
    if (rc) return rc < 0 ? rc : 0;
    const int out = !packed ? 0 : (s->packing == FP4S_PACK_SPLIT ? 2 : 1);
    const size_t nvec = rows * (cols / 4);
    const size_t need = out == 1 ? 2 : 4; /* the code load's width */
    const bool vec = ((uintptr_t)d_codes % need == 0) && ((uintptr_t)d_out % 16 == 0);
    const unsigned grid = fp4s_cu_grid((nvec + 3) / 4, THREADS);
    cudaStream_t st = (cudaStream_t)stream;
    cudaGetLastError();
    if (p.block == 32) launch<32>(out, grid, st, p, d_codes, d_scales, nvec, vec, d_out);
    else launch<16>(out, grid, st, p, d_codes, d_scales, nvec, vec, d_out);
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
