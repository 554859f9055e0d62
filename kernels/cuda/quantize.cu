/* CUDA op: quantize float32, BF16 or FP16 rows to MXFP4 / NVFP4 codes and
 * scale bytes, one code per byte or packed two per byte (the spec's pairs or
 * ggml's split layout).
 *
 * One kernel for every case: each thread owns 16 consecutive elements of a
 * row (four 16-byte loads of float32, two of BF16/FP16). A 1-D MXFP4 block of
 * 32 is two neighbouring lanes (one shuffle for the block amax), a 1-D NVFP4
 * block of 16 is one thread (no shuffle), a 2-D NVFP4 tile of 16x16 is 16
 * lanes taking its 16 rows (four shuffles) where the input is not 16-byte
 * aligned; aligned 2-D input takes quant2d_kernel (quantize_kernels.cuh),
 * whose warps read 16 rows x 256 bytes, 4 or 8 lanes a tile. The block amax is a NaN-propagating
 * maximum (one instruction per element; BF16 and FP16, which stay in their
 * 32-bit words, one per two elements on the bit patterns); every lane of a
 * block then derives the same scale (cu_block) and encodes its elements
 * (cu_encode16: the fast path of quant_block.cuh, or the generic one for blocks
 * with NaN/Inf and for ggml's level search; cu_encode16_w for BF16 and FP16:
 * MXFP4 on BF16 in packed BF16 arithmetic, the rest widened to float32) into
 * words of 4-bit or 8-bit fields, which are stored
 * as 8 or 16 bytes. ggml's split layout of a 32-block pairs element j with
 * j + 16, which the other lane holds: the two lanes swap two words. The lane
 * that holds a block's first element writes its scale byte. Grid-stride loop,
 * warp-uniform (every lane runs the shuffles; inactive lanes store nothing).
 *
 * The per-block arithmetic is quant_block.cuh's, shared with the host
 * emulation (emulate.cu), which runs the same functions in the same order. */
#include "quantize_kernels.cuh"

namespace {
constexpr int THREADS = 256; /* as the kernels' __launch_bounds__ */
}



int fp4s_cu_dtype(fp4s_dtype dt, const char *op)
{
    switch (dt) {
    case FP4S_DT_F32: return CU_DT_F32;
    case FP4S_DT_BF16: return CU_DT_BF16;
    case FP4S_DT_F16: return CU_DT_F16;
    default:
        return fp4s_error_set(FP4S_EDTYPE, "cuda: %s: input type %d is not float32, bfloat16 or float16", op,
                              (int)dt);
    }
}

int fp4s_cu_quantize_args(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype, const void *x,
                          size_t rows, size_t cols, size_t ld, const void *codes, const void *scales,
                          fp4s_cu_params *p, int *dt)
{
    int rc = fp4s_cu_prepare(s, ts, rows, cols, p);
    if (rc) return rc;
    *dt = fp4s_cu_dtype(dtype, "quantize");
    if (*dt < 0) return *dt;
    if (!x || !codes || !scales)
        return fp4s_error_set(FP4S_EINVAL, "cuda: quantize: input, codes and scales are required");
    if (ld < cols)
        return fp4s_error_set(FP4S_EINVAL, "cuda: quantize: row stride %zu is smaller than %zu columns",
                              ld, cols);
    if (rows == 0 || cols == 0) return 1;
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: quantize: no usable GPU");
    return 0;
}

extern "C" FP4S_API int fp4s_cuda_quantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                              const void *d_x, size_t rows, size_t cols, size_t ld, bool packed,
                                              uint8_t *d_codes, uint8_t *d_scales, void *stream)
{
    fp4s_cu_params p;
    int dt;
    int rc = fp4s_cu_quantize_args(s, ts, dtype, d_x, rows, cols, ld, d_codes, d_scales, &p, &dt);
    if (rc) return rc < 0 ? rc : 0;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t esz = dt == CU_DT_F32 ? 4 : 2, per16 = 16 / esz; /* elements per 16-byte load */
    /* 16-byte loads need an aligned base and a row stride that keeps every
     * row aligned; the 16-byte (unpacked) or 8-byte (packed) code stores an
     * aligned code buffer. */
    const bool vec_in = ((uintptr_t)d_x % 16 == 0) && (ld % per16 == 0);
    const bool vec_out = (uintptr_t)d_codes % (packed ? 8 : 16) == 0;
    const bool contig = ld == cols;
    const int out = !packed ? 0 : (s->packing == FP4S_PACK_SPLIT ? 2 : 1);
    const int mode = p.format == FP4S_MXFP4 ? 0 : p.elem;
    const size_t gpr = cols / 16;
    cudaGetLastError(); /* clear a stale error from an earlier call */
    const size_t ngroups = p.tile2d ? ((rows + 15) / 16) * gpr * 16 : rows * gpr;
    const unsigned grid = fp4s_cu_grid(ngroups, THREADS);
    if (dt == CU_DT_F32)
        fp4s_cu_quant_launch<CU_DT_F32>(p.block, mode, out, p.tile2d, grid, st, p, d_x, ngroups, gpr, rows, ld,
                                        contig, vec_in, vec_out, d_codes, d_scales);
    else if (dt == CU_DT_BF16)
        fp4s_cu_quant_launch<CU_DT_BF16>(p.block, mode, out, p.tile2d, grid, st, p, d_x, ngroups, gpr, rows, ld,
                                         contig, vec_in, vec_out, d_codes, d_scales);
    else
        fp4s_cu_quant_launch<CU_DT_F16>(p.block, mode, out, p.tile2d, grid, st, p, d_x, ngroups, gpr, rows, ld,
                                        contig, vec_in, vec_out, d_codes, d_scales);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fp4s_cu_fail(e, "quantize: launch");
    return 0;
}

extern "C" FP4S_API int fp4s_cuda_quantize(const fp4s_spec *s, const fp4s_tscale *ts, const float *d_x,
                                           size_t rows, size_t cols, size_t ld, uint8_t *d_codes,
                                           uint8_t *d_scales, void *stream)
{
    return fp4s_cuda_quantize_ex(s, ts, FP4S_DT_F32, d_x, rows, cols, ld, false, d_codes, d_scales, stream);
}
