/* Host emulation of the kernels: quant_block.cuh's per-block arithmetic run
 * on the CPU over a whole tensor, block by block (see emulate.h). */
#include "cuda_internal.cuh"

extern "C" int fp4s_cuda_emulate_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                          const float *x, size_t rows, size_t cols, size_t ld,
                                          uint8_t *codes, uint8_t *scales)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    const size_t bs = (size_t)p.block, nbpr = cols / bs;
    const size_t trows = p.tile2d ? 16 : 1;
    for (size_t r0 = 0; r0 < rows; r0 += trows) {
        size_t r1 = r0 + trows < rows ? r0 + trows : rows;
        for (size_t b = 0; b < nbpr; b++) {
            fp4s_cu_amax am = {0u, 0, 0};
            for (size_t r = r0; r < r1; r++)
                for (size_t j = 0; j < bs; j++) cu_amax_add(&am, x[r * ld + b * bs + j]);
            fp4s_cu_blk blk = cu_block(p, am);
            for (size_t r = r0; r < r1; r++) {
                for (size_t j = 0; j < bs; j++)
                    codes[r * cols + b * bs + j] = cu_elem(p, blk, x[r * ld + b * bs + j]);
                scales[r * nbpr + b] = blk.scale;
            }
        }
    }
    return 0;
}

extern "C" int fp4s_cuda_emulate_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                            const uint8_t *codes, const uint8_t *scales,
                                            size_t rows, size_t cols, float *out)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    const size_t bs = (size_t)p.block, nbpr = cols / bs;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            out[r * cols + c] = cu_deq(p, scales[r * nbpr + c / bs], codes[r * cols + c]);
    return 0;
}
