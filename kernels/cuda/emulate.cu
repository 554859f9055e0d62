/* Host emulation of the kernels: quant_block.cuh's per-block arithmetic run
 * on the CPU over a whole tensor, block by block, through the same functions
 * and in the same order as the kernels (see emulate.h). */
#include "cuda_internal.cuh"

#include <stdlib.h>

namespace {

/* groups encoded by the packed BF16 paths, and all groups (fp4s_cuda_emulate_paths) */
uint64_t n_pk, n_groups;

/* One group's codes as the kernels encode it: float32 input from f, BF16 and
 * FP16 from their words u (cu_encode16_w, which takes the packed BF16 paths
 * exactly when cu_block_pk holds: counted here). */
template <int MODE, int NB>
void encode(int dt, const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b, const float *f,
            const uint32_t *u, uint32_t *w)
{
    n_groups++;
    if (dt == CU_DT_F32) {
        cu_encode16<MODE, NB>(p, am, b, f, w);
    } else if (dt == CU_DT_BF16) {
        if (MODE != 2 && cu_block_pk(p, am, b, MODE, MODE == 1 ? cu_rcp(b.f) : 0.0f)) n_pk++;
        cu_encode16_w<CU_DT_BF16, MODE, NB>(p, am, b, u, w);
    } else {
        cu_encode16_w<CU_DT_F16, MODE, NB>(p, am, b, u, w);
    }
}

void encode_mode(int dt, int mode, int nb, const fp4s_cu_params &p, const fp4s_cu_amax &am, const fp4s_cu_blk &b,
                 const float *f, const uint32_t *u, uint32_t *w)
{
    if (nb == 4) {
        if (mode == 0) encode<0, 4>(dt, p, am, b, f, u, w);
        else if (mode == 1) encode<1, 4>(dt, p, am, b, f, u, w);
        else encode<2, 4>(dt, p, am, b, f, u, w);
    } else {
        if (mode == 0) encode<0, 8>(dt, p, am, b, f, u, w);
        else if (mode == 1) encode<1, 8>(dt, p, am, b, f, u, w);
        else encode<2, 8>(dt, p, am, b, f, u, w);
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
            uint32_t u[32][8];
            float a = 0.0f;
            uint32_t m = 0;
            for (size_t g = 0; g < ng; g++) {
                const size_t r = r0 + g / gpb, c0 = b * bs + (g % gpb) * 16;
                if (dt == CU_DT_F32) {
                    for (int k = 0; k < 16; k++) {
                        f[g][k] = static_cast<const float *>(x)[r * ld + c0 + (size_t)k];
                        a = cu_absmax_nan(a, f[g][k]);
                    }
                } else {
                    const uint16_t *h = static_cast<const uint16_t *>(x) + r * ld + c0;
                    for (int k = 0; k < 8; k++) u[g][k] = (uint32_t)h[2 * k] | ((uint32_t)h[2 * k + 1] << 16);
                    /* as the kernel: a 2-D tile's rows folded, then combined as unsigned */
                    if (p.tile2d) {
                        const uint32_t r = cu_amax_fold_w(cu_amax_w8(u[g]));
                        m = m > r ? m : r;
                    } else {
                        m = cu_vmaxu2(m, cu_amax_w8(u[g]));
                    }
                }
            }
            fp4s_cu_amax am;
            if (dt == CU_DT_F32) am = cu_amax_from(a);
            else if (p.tile2d) am = dt == CU_DT_BF16 ? cu_amax_from_h<CU_DT_BF16>(m) : cu_amax_from_h<CU_DT_F16>(m);
            else am = dt == CU_DT_BF16 ? cu_amax_from_w<CU_DT_BF16>(m) : cu_amax_from_w<CU_DT_F16>(m);
            if (p.nonfinite == 2 && am.nan) {
                fp4s_cu_amax e = {0u, 0, 0};
                for (size_t g = 0; g < ng; g++) {
                    if (dt == CU_DT_F32)
                        for (int k = 0; k < 16; k++) cu_amax_add(&e, f[g][k]);
                    else if (dt == CU_DT_BF16) cu_amax_add_w<CU_DT_BF16>(&e, u[g]);
                    else cu_amax_add_w<CU_DT_F16>(&e, u[g]);
                }
                am = e;
            }
            const fp4s_cu_blk blk = cu_block(p, am);
            uint32_t w[2][4];
            for (size_t g = 0; g < ng; g++) {
                const size_t r = r0 + g / gpb, h = g % gpb, e0 = r * cols + b * bs + h * 16;
                uint32_t *wg = w[gpb == 2 ? h : 0];
                encode_mode(dt, mode, out == 1 ? 4 : 8, p, am, blk, f[g], u[g], wg);
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

extern "C" void fp4s_cuda_emulate_paths(uint64_t *packed, uint64_t *groups, bool reset)
{
    if (packed) *packed = n_pk;
    if (groups) *groups = n_groups;
    if (reset) n_pk = n_groups = 0;
}

namespace {
/* The word of BF16 patterns that the exhaustive checks feed cu_pk_pair: i in
 * the low half and a permutation of i in the high half, so that every
 * pattern passes through both halves. */
FP4S_HD uint32_t pk_word(uint32_t i)
{
    return i | (((i * 40503u) & 0xFFFFu) << 16);
}

/* The parameters of an MXFP4 spec with tie rule t (0 RNE, 1 RTZ, 2 RHA), -0 kept,
 * zero_in sign: one the packed BF16 path takes (false if not). */
bool pk_params(int t, fp4s_cu_params *p)
{
    fp4s_spec s;
    fp4s_spec_profile(&s, FP4S_MXFP4, NULL);
    s.tie = (fp4s_tie)t;
    s.keep_neg_zero = true;
    s.zero_in = FP4S_ZIN_SIGN;
    return fp4s_cu_prepare(&s, NULL, 1, 32, p) == 0 && p->pk16;
}

/* Disagreements of cu_pk_pair(word i) with the 4-bit codes of the float32
 * products for the block factor of scale code sc and the tie rule of p
 * (tie: 0 RNE, 1 RTZ, 2 RHA): on the host the reference encoder
 * fp4s_e2m1_encode (-0 kept), on the device the integer threshold count
 * (cu_e2m1_thr_mag, equal to the reference on every float32: test_cuda
 * --exhaustive) and the sign bit, which is the reference's code with -0
 * kept; NaN and Inf elements (never on this path) skipped. */
FP4S_HD uint32_t pk_check_word(const fp4s_cu_params &p, int tie, uint32_t i, uint32_t sc)
{
    const uint32_t w = pk_word(i);
    const float f = fp4s_nc_e8m0_inv((uint8_t)sc);
    const uint32_t f16 = cu_bits(f) >> 16;
    const uint32_t r = cu_pk_pair(w, f16 | (f16 << 16), p.kmag2, p.lsb2);
    uint32_t bad = (r & 0x0FFF0FFFu) != 0u; /* only the two code nibbles may be set */
    for (int h = 0; h < 2; h++) {
        const uint32_t x = (w >> (16 * h)) & 0xFFFFu;
        if ((x & 0x7F80u) == 0x7F80u) continue;
        const float v = cu_mul(fp4s_nc_bf16_value(x), f);
#if defined(__CUDA_ARCH__)
        (void)tie;
        const uint32_t want = cu_e2m1_thr_mag(p.thr, cu_bits(v) & 0x7FFFFFFFu) | (cu_bits(v) >> 31) << 3;
#else
        const uint32_t want = fp4s_e2m1_encode(v, (fp4s_tie)tie, true);
#endif
        if (((r >> (12 + 16 * h)) & 15u) != want) bad++;
    }
    return bad;
}
} // namespace

/* Every BF16 pattern through the packed BF16 element path (cu_pk_pair), for
 * every MXFP4 block scale (codes 0..254) and every tie rule (RNE, RTZ,
 * RHA), against the reference encoder fp4s_e2m1_encode of the float32 product
 * (-0 kept). Returns the disagreements; the first one's pattern, scale code and
 * tie rule in *first (pattern | code << 16 | tie << 24). */
extern "C" uint64_t fp4s_cuda_emulate_check_bf16(uint32_t *first)
{
    uint64_t bad = 0;
    for (int t = 0; t < 3; t++) {
        fp4s_cu_params p;
        if (!pk_params(t, &p)) return UINT64_MAX;
        for (uint32_t sc = 0; sc < 255; sc++)
            for (uint32_t i = 0; i < 0x10000u; i++) {
                const uint32_t nb = pk_check_word(p, t, i, sc);
                if (nb) {
                    if (first && bad == 0) *first = i | sc << 16 | (uint32_t)t << 24;
                    bad += nb;
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
        float t = cu_mul(fp4s_nc_e4m3_value(code), ts);
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

namespace {
/* A device check: launch(count, first) runs its kernel on a zeroed counter of
 * disagreements and the first one's index; returns the count (the index in
 * *first), or UINT64_MAX when the check could not run. */
template <typename L>
uint64_t device_count(L launch, uint32_t *first)
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
        launch(d, df);
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

/* The parameters of the three tie rules (RNE, RTZ, RHA), by value to a kernel. */
struct tie_params {
    fp4s_cu_params p[3];
};

bool tie_params_init(tie_params *tp)
{
    for (int t = 0; t < 3; t++)
        if (!pk_params(t, &tp->p[t])) return false;
    return true;
}

__global__ void bf16_check_kernel(tie_params tp, unsigned long long *bad, unsigned int *first)
{
    const uint32_t n = 3u * 255u * 0x10000u;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        const uint32_t t = j / (255u * 0x10000u), sc = (j >> 16) % 255u, i = j & 0xFFFFu;
        const uint32_t nb = pk_check_word(tp.p[t], (int)t, i, sc);
        if (nb && atomicAdd(bad, (unsigned long long)nb) == 0) *first = i | sc << 16 | t << 24;
    }
}

/* The float32 fast path (cu_nib_fast, as the kernels run it) on the device
 * against the integer threshold count: every magnitude up to 8, +Inf and
 * FLT_MAX, both signs, each tie rule. */
__global__ void e2m1_check_kernel(tie_params tp, unsigned long long *bad, unsigned int *first)
{
    const uint32_t top = 0x41000000u, nu = top + 3u;
    const uint64_t n = 3ull * nu;
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n; j += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t t = (uint32_t)(j / nu), a = (uint32_t)(j % nu);
        const uint32_t u = a <= top ? a : (a == top + 1u ? 0x7F800000u : 0x7F7FFFFFu);
        const fp4s_cu_params &p = tp.p[t];
        const uint32_t ref = cu_e2m1_thr_mag(p.thr, u);
        const float v = cu_float(u);
        if ((cu_nib_fast(p, v) & 15u) != ref || (cu_nib_fast(p, -v) & 15u) != (ref | 8u)) {
            if (atomicAdd(bad, 1ull) == 0) *first = u;
        }
    }
}
} // namespace

/* On the GPU: cu_pk_pair (the packed BF16 arithmetic of the device) on every
 * BF16 pattern, every MXFP4 scale code and every tie rule, against the
 * integer threshold count of the float32 product (equal to the reference
 * encoder on every float32: test_cuda --exhaustive). Disagreements (first as
 * in fp4s_cuda_emulate_check_bf16), UINT64_MAX when the check could not run. */
extern "C" uint64_t fp4s_cuda_device_check_bf16(uint32_t *first)
{
    tie_params tp;
    if (!tie_params_init(&tp)) return UINT64_MAX;
    return device_count(
        [&](unsigned long long *d, unsigned int *df) {
            bf16_check_kernel<<<fp4s_cu_grid((size_t)3 * 255 * 0x10000, 256), 256>>>(tp, d, df);
        },
        first);
}

/* On the GPU: the float32 fast element path (cu_nib_fast) on every float32
 * magnitude up to 8, +Inf and FLT_MAX, with either sign and each tie rule,
 * against the integer threshold count (the reference encoder's codes: test_cuda
 * --exhaustive). Disagreements (the first one's bits in *first), UINT64_MAX
 * when the check could not run. */
extern "C" uint64_t fp4s_cuda_device_check_e2m1(uint32_t *first)
{
    tie_params tp;
    if (!tie_params_init(&tp)) return UINT64_MAX;
    return device_count(
        [&](unsigned long long *d, unsigned int *df) {
            e2m1_check_kernel<<<fp4s_cu_grid((size_t)3 * (0x41000000u + 3u), 256), 256>>>(tp, d, df);
        },
        first);
}

/* The device's E4M3 conversion (the instruction cu_e4m3 uses there) against
 * the software encoder cu_e4m3_soft on every float32 bit pattern: the number
 * of disagreements (the first one's bits in *first), or UINT64_MAX when the
 * check could not run. */
extern "C" uint64_t fp4s_cuda_device_check_e4m3(uint32_t *first)
{
    return device_count(
        [](unsigned long long *d, unsigned int *df) {
            e4m3_check_kernel<<<fp4s_cu_grid((size_t)1 << 32, 256), 256>>>(d, df);
        },
        first);
}
