/* Host emulation of the kernels: quant_block.cuh's per-block arithmetic run
 * on the CPU over a whole tensor, block by block, through the same functions
 * and in the same order as the kernels (see emulate.h). */
#include "cuda_internal.cuh"

#include <stdlib.h>

namespace {

float load_elem(int dt, const void *x, size_t i)
{
    if (dt == CU_DT_F32) return static_cast<const float *>(x)[i];
    const uint32_t h = static_cast<const uint16_t *>(x)[i];
    return dt == CU_DT_BF16 ? cu_bf16_f32(h) : cu_f16_f32(h);
}

template <int MODE, int NB>
void encode(const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b, const float *f, uint32_t *w)
{
    cu_encode16<MODE, NB>(p, am, b, f, w);
}

void encode_mode(int mode, int nb, const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b,
                 const float *f, uint32_t *w)
{
    if (nb == 4) {
        if (mode == 0) encode<0, 4>(p, am, b, f, w);
        else if (mode == 1) encode<1, 4>(p, am, b, f, w);
        else encode<2, 4>(p, am, b, f, w);
    } else {
        if (mode == 0) encode<0, 8>(p, am, b, f, w);
        else if (mode == 1) encode<1, 8>(p, am, b, f, w);
        else encode<2, 8>(p, am, b, f, w);
    }
}

void put_words(uint8_t *dst, const uint32_t *w, int n)
{
    for (int k = 0; k < 4 * n; k++) dst[k] = (uint8_t)(w[k >> 2] >> (8 * (k & 3)));
}

} // namespace

extern "C" int fp4s_cuda_emulate_quantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                             const void *x, size_t rows, size_t cols, size_t ld, bool packed,
                                             uint8_t *codes, uint8_t *scales)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    const int dt = fp4s_cu_dtype(dtype, "quantize");
    if (dt < 0) return dt;
    const int out = !packed ? 0 : (s->packing == FP4S_PACK_SPLIT ? 2 : 1);
    const int mode = p.format == FP4S_MXFP4 ? 0 : p.elem;
    const size_t bs = (size_t)p.block, nbpr = cols / bs, gpb = bs / 16;
    const size_t trows = p.tile2d ? 16 : 1;
    for (size_t r0 = 0; r0 < rows; r0 += trows) {
        const size_t r1 = r0 + trows < rows ? r0 + trows : rows;
        for (size_t b = 0; b < nbpr; b++) {
            /* the groups of this block: rows r0..r1-1, gpb groups of 16 each */
            const size_t ng = (r1 - r0) * gpb;
            float f[32][16];
            float a = 0.0f;
            for (size_t g = 0; g < ng; g++) {
                const size_t r = r0 + g / gpb, c0 = b * bs + (g % gpb) * 16;
                for (int k = 0; k < 16; k++) {
                    f[g][k] = load_elem(dt, x, r * ld + c0 + (size_t)k);
                    a = cu_absmax_nan(a, f[g][k]);
                }
            }
            fp4s_cu_amax am = cu_amax_from(a);
            if (p.nonfinite == 2 && am.nan) {
                fp4s_cu_amax e = {0u, 0, 0};
                for (size_t g = 0; g < ng; g++)
                    for (int k = 0; k < 16; k++) cu_amax_add(&e, f[g][k]);
                am = e;
            }
            const fp4s_cu_blk blk = cu_block(p, am);
            uint32_t w[2][4];
            for (size_t g = 0; g < ng; g++) {
                const size_t r = r0 + g / gpb, h = g % gpb, e0 = r * cols + b * bs + h * 16;
                uint32_t *wg = w[gpb == 2 ? h : 0];
                encode_mode(mode, out == 1 ? 4 : 8, p, am, blk, f[g], wg);
                if (out == 0) put_words(codes + e0, wg, 4);
                else if (out == 1) put_words(codes + e0 / 2, wg, 2);
                else if (gpb == 1) {
                    uint32_t sp[2];
                    cu_split16(wg, sp);
                    put_words(codes + e0 / 2, sp, 2);
                } else if (h == 1) { /* both halves of the 32-block are encoded */
                    uint32_t sp[4] = {w[0][0] | (w[1][0] << 4), w[0][1] | (w[1][1] << 4),
                                      w[0][2] | (w[1][2] << 4), w[0][3] | (w[1][3] << 4)};
                    put_words(codes + (e0 - 16) / 2, sp, 4);
                }
                if (h == 0) scales[r * nbpr + b] = blk.scale;
            }
        }
    }
    return 0;
}

extern "C" int fp4s_cuda_emulate_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                          const float *x, size_t rows, size_t cols, size_t ld,
                                          uint8_t *codes, uint8_t *scales)
{
    return fp4s_cuda_emulate_quantize_ex(s, ts, FP4S_DT_F32, x, rows, cols, ld, false, codes, scales);
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
 * saturates; +Inf and FLT_MAX are checked too), for each tie rule, through the
 * thresholds, through the fast path (cu_nib_fast, as the kernels run it on
 * blocks without special values) and for round-half-even also through the
 * float path of the generic elements (cu_e2m1_rne_mag). Returns the number of
 * disagreements; the first one's bits are written to *first. */
extern "C" uint64_t fp4s_cuda_emulate_check_e2m1(uint32_t *first)
{
    uint64_t bad = 0;
    uint32_t thr[3][7];
    fp4s_cu_params fp[3];
    for (int t = 0; t < 3; t++) {
        cu_e2m1_thresholds(t, thr[t]);
        fp4s_spec s;
        fp4s_spec_profile(&s, FP4S_MXFP4, NULL);
        s.tie = (fp4s_tie)t;
        s.keep_neg_zero = true;
        s.zero_in = FP4S_ZIN_SIGN;
        fp4s_cu_prepare(&s, NULL, 1, 32, &fp[t]);
    }
    const uint32_t top = 0x41000000u; /* 8.0f */
    for (uint64_t a = 0; a <= (uint64_t)top + 2; a++) {
        uint32_t u = a <= top ? (uint32_t)a : (a == (uint64_t)top + 1 ? 0x7F800000u : 0x7F7FFFFFu);
        float v = cu_float(u);
        for (int t = 0; t < 3; t++) {
            uint32_t ref = fp4s_e2m1_encode(v, (fp4s_tie)t, false) & 7u;
            uint32_t got = cu_e2m1_thr_mag(thr[t], u);
            if (t == 0 && cu_e2m1_rne_mag(v) != ref) got = 99u;
            if ((cu_nib_fast(fp[t], v) & 15u) != ref) got = 98u;
            if ((cu_nib_fast(fp[t], -v) & 7u) != ref || !(cu_nib_fast(fp[t], -v) & 8u)) got = 97u;
            if (got != ref) {
                if (first && bad == 0) *first = u;
                bad++;
            }
        }
    }
    return bad;
}

/* cu_div_fast against the IEEE division on n pseudo-random pairs drawn from
 * seed (divisors: the block factors of NVFP4's dividing recipes, E4M3 values
 * times a tensor scale; dividends the divisor times a quotient in the range a
 * block's scaled values take, planted on the E2M1 midpoints and next to
 * them). Returns the number of disagreements (bit patterns; the first pair in
 * *first_x, *first_t). */
extern "C" uint64_t fp4s_cuda_emulate_check_div(uint64_t seed, uint64_t n, float *first_x, float *first_t)
{
    uint64_t st = seed ? seed : 1, bad = 0;
    auto rnd = [&st]() {
        st ^= st >> 12;
        st ^= st << 25;
        st ^= st >> 27;
        return st * 0x2545F4914F6CDD1DULL;
    };
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t r = rnd();
        /* t: an E4M3 value times a tensor scale 2^e * (1 + m) */
        const uint8_t code = (uint8_t)(1 + (r % 0x7E));
        const float ts = cu_float((uint32_t)((r >> 8) % 0x7F7FFFFFu) & 0x3FFFFFFFu | 0x20000000u);
        float t = cu_mul(cu_e4m3_value(code), ts);
        const uint32_t tb = cu_bits(t) >> 23;
        if (tb < 37 || tb >= 0xFF) continue; /* the fast path's range of t (cu_block_fast) */
        const float y = cu_rcp(t);
        const uint32_t yb = (cu_bits(y) >> 23) & 0xFF;
        if (yb == 0 || yb == 0xFF) continue;
        /* x = t * m: m spread over [2^-40, 16) (the scaled values of a block
         * whose factor is t lie below about 8), or an E2M1 midpoint times t and
         * its neighbours; a few tiny quotients, where only the sign and being
         * far below the grid matter */
        float x;
        const int kind = (int)((r >> 40) % 8);
        if (kind < 3) {
            x = cu_mul(t, cu_float(0x2B800000u + (uint32_t)(rnd() % 0x16000000u)));
        } else if (kind < 7) {
            x = cu_mul(mid[rnd() % 7], t);
            x = cu_float(cu_bits(x) + (uint32_t)((int)(rnd() % 9) - 4));
        } else {
            x = cu_mul(t, cu_float(0x01000000u + (uint32_t)(rnd() % 0x1E000000u))); /* 2^-125 .. 2^-65 */
        }
        if (rnd() & 1) x = -x;
        if (x != x || (cu_bits(x) & 0x7F800000u) == 0x7F800000u) continue;
        const float ref = cu_div(x, t), got = cu_div_fast(x, t, y);
        bool ok = cu_bits(ref) == cu_bits(got);
        if (!ok && fabsf(ref) < 0x1p-60f) /* tiny: the same sign, both far below the grid */
            ok = (cu_bits(ref) >> 31) == (cu_bits(got) >> 31) && fabsf(got) < 0x1p-59f;
        if (!ok) {
            if (bad == 0 && first_x) {
                *first_x = x;
                *first_t = t;
            }
            bad++;
        }
    }
    return bad;
}

/* ---- device-side checks ----------------------------------------------------- */
namespace {
__global__ void e4m3_check_kernel(unsigned long long *bad, unsigned int *first)
{
    const uint64_t n = 1ull << 32;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float v = __uint_as_float((uint32_t)i);
        if (cu_e4m3(v) != cu_e4m3_soft(v)) {
            if (atomicAdd(bad, 1ull) == 0) *first = (uint32_t)i;
        }
    }
}
} // namespace

/* The device's E4M3 conversion (the instruction cu_e4m3 uses there) against
 * the software encoder cu_e4m3_soft on every float32 bit pattern: the number
 * of disagreements (the first one's bits in *first), or UINT64_MAX when the
 * check could not run. */
extern "C" uint64_t fp4s_cuda_device_check_e4m3(uint32_t *first)
{
    unsigned long long *d = nullptr;
    unsigned int *df = nullptr;
    unsigned long long h = 0;
    unsigned int hf = 0;
    if (cudaMalloc((void **)&d, sizeof *d) != cudaSuccess) return UINT64_MAX;
    if (cudaMalloc((void **)&df, sizeof *df) != cudaSuccess) {
        cudaFree(d);
        return UINT64_MAX;
    }
    cudaError_t e = cudaMemset(d, 0, sizeof *d);
    if (e == cudaSuccess) e = cudaMemset(df, 0, sizeof *df);
    if (e == cudaSuccess) {
        e4m3_check_kernel<<<fp4s_cu_grid((size_t)1 << 32, 256), 256>>>(d, df);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(&hf, df, sizeof hf, cudaMemcpyDeviceToHost);
    cudaFree(d);
    cudaFree(df);
    if (e != cudaSuccess) return UINT64_MAX;
    if (first) *first = hf;
    return h;
}
