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
                    codes[r * cols + b * bs + j] = cu_elem(p, am, blk, x[r * ld + b * bs + j]);
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

/* Exhaustive check of the element encoders against the reference codec
 * (fp4s_e2m1_encode): every float32 magnitude up to 8 (above it everything
 * saturates; +Inf and a NaN are checked too), for each tie rule through the
 * thresholds, and for round-half-even also through the float path
 * (cu_e2m1_rne_mag). Returns the number of disagreements; the first few are
 * written to *first (bit pattern) when not NULL. */
extern "C" uint64_t fp4s_cuda_emulate_check_e2m1(uint32_t *first)
{
    uint64_t bad = 0;
    uint32_t thr[3][7];
    for (int t = 0; t < 3; t++) cu_e2m1_thresholds(t, thr[t]);
    const uint32_t top = 0x41000000u; /* 8.0f */
    for (uint64_t a = 0; a <= (uint64_t)top + 2; a++) {
        uint32_t u = a <= top ? (uint32_t)a : (a == (uint64_t)top + 1 ? 0x7F800000u : 0x7F7FFFFFu);
        float v = cu_float(u);
        for (int t = 0; t < 3; t++) {
            uint32_t ref = fp4s_e2m1_encode(v, (fp4s_tie)t, false) & 7u;
            uint32_t got = cu_e2m1_thr_mag(thr[t], u);
            if (t == 0 && cu_e2m1_rne_mag(v) != ref) got = 99u;
            if (got != ref) {
                if (first && bad == 0) *first = u;
                bad++;
            }
        }
    }
    return bad;
}
