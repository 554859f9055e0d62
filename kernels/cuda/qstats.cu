/* CUDA op: the quantizer's statistics (fp4s_cuda_qstats, fp4s_qstats) and
 * the host convenience that quantizes, dequantizes and counts in one call
 * (fp4s_cuda_quantize_host_all).
 *
 * One thread per unit of the reference (kernels/cpu/quant_ref.c): a block of
 * one row (1-D) or, for NVFP4 2-D, the column of 16-row tile segments of one
 * block (the tile amax first, then its rows). Each unit follows the
 * reference's bookkeeping: blocks, elements, NaN and Inf counts of the row
 * segment; a NaN block (the non-finite policy; for MXFP4 also the rule's own
 * NaN scale) stops there; then zero_blocks (the segment's amax is 0) or
 * scale_underflow (MXFP4: the rule clamped k at code 0; NVFP4: a zero or
 * subnormal E4M3 scale byte), scale_clamped (NVFP4: the unrounded block
 * scale past 464); per element the code (cu_elem: the kernels'
 * own arithmetic), saturated (|x * f| or |x / f| > 6, ggml: |x| > 6 s),
 * neg_zero (code 8), and the error sums of quant_sums.h: element j in lane
 * j mod 8, each lane in element order, the lanes in the fixed tree, that
 * partial into an exact accumulator (base/xsum.h). The thread's accumulators
 * and counters go to shared memory, each thread block's to global memory
 * with 64-bit integer atomics (exact: the order is free), so the result is
 * the reference's bit for bit. The host emulation runs the same unit
 * function in a loop. */
#include "cuda_internal.cuh"

#include "base/xsum.h"

#include <stdlib.h>
#include <string.h>

namespace {

constexpr int QT = 256;

enum { Q_ELEM, Q_BLK, Q_SAT, Q_ZB, Q_NF, Q_NAN, Q_INF, Q_NFB, Q_NZ, Q_UF, Q_CL, Q_N };

struct qsum2 { /* fp4s_qstats.sums: the exact sums of e^2 and x^2 */
    xsum e2, x2;
};
static_assert(sizeof(qsum2) == sizeof(((fp4s_qstats *)0)->sums), "fp4s_qstats.sums holds two xsum");

/* One unit: tile-row group tr, block b; rows [tr H, tr H + h). Counters into
 * c, each row's lane partials to sink(e2, x2) (rows that the reference sums). */
template <typename Sink>
__host__ __device__ inline void unit(const fp4s_cu_params &p, const float *x, size_t ld, size_t rows, size_t H,
                                     size_t tr, size_t b, uint64_t *c, Sink sink)
{
    const size_t B = (size_t)p.block, r0 = tr * H, h = rows - r0 < H ? rows - r0 : H;
    fp4s_cu_amax am = {0u, 0, 0};
    for (size_t i = 0; i < h; i++)
        for (size_t j = 0; j < B; j++) cu_amax_add(&am, x[(r0 + i) * ld + b * B + j]);
    const fp4s_cu_blk blk = cu_block(p, am);
    const bool mx = p.format == 1;
    /* the block scale's value: NaN keeps the row out of the sums (NVFP4) */
    const float sbv = mx ? 0.0f : (p.scale_ggml ? fp4s_nc_ue4m3_ggml_value(blk.scale) : fp4s_nc_e4m3_value(blk.scale));
    const fp4s_cu_dq dq = cu_deq_block(p, blk.scale);
    for (size_t i = 0; i < h; i++) {
        const float *xr = x + (r0 + i) * ld + b * B;
        fp4s_cu_amax rs = {0u, 0, 0};
        unsigned nn = 0, ni = 0;
        for (size_t j = 0; j < B; j++) {
            const uint32_t u = cu_bits(xr[j]) & 0x7FFFFFFFu;
            nn += u > 0x7F800000u;
            ni += u == 0x7F800000u;
            cu_amax_add(&rs, xr[j]);
        }
        c[Q_BLK]++;
        c[Q_ELEM] += B;
        c[Q_NAN] += nn;
        c[Q_INF] += ni;
        c[Q_NF] += nn + ni;
        c[Q_NFB] += (nn + ni) != 0;
        if (blk.nan) continue;
        const bool zero = !rs.inf && rs.abits == 0u;
        if (mx) {
            if (zero) {
                c[Q_ZB]++;
            } else {
                bool low = false;
                const float a = rs.inf ? cu_float(0x7F800000u) : cu_float(rs.abits);
                (void)fp4s_nc_mx_k(p.mx_rule, a, &low);
                c[Q_UF] += low;
            }
            if (blk.scale == 0xFF) continue; /* the rule's own NaN scale: a NaN block */
        } else {
            c[Q_CL] += blk.clamped;
            if (zero) c[Q_ZB]++;
            else c[Q_UF] += (blk.scale & 0x78) == 0;
        }
        const bool sums = mx || !(sbv != sbv);
        double le[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t j = 0; j < B; j++) {
            const float xv = xr[j];
            const bool fin = (cu_bits(xv) & 0x7F800000u) != 0x7F800000u;
            const uint8_t q = cu_elem(p, am, blk, xv);
            if (!(p.ignore && !fin)) {
                bool sat;
                if (blk.mode == 2) sat = fabsf(xv) > cu_mul(6.0f, blk.f);
                else sat = fabsf(blk.mode ? cu_div(xv, blk.f) : cu_mul(xv, blk.f)) > 6.0f;
                c[Q_SAT] += sat;
            }
            c[Q_NZ] += q == 8;
            if (sums && fin) {
                const float d = cu_deq_elem(dq, q);
                const double e = (double)d - (double)xv;
                le[j & 7] += e * e;
                lx[j & 7] += (double)xv * (double)xv;
            }
        }
        sink(((le[0] + le[1]) + (le[2] + le[3])) + ((le[4] + le[5]) + (le[6] + le[7])),
             ((lx[0] + lx[1]) + (lx[2] + lx[3])) + ((lx[4] + lx[5]) + (lx[6] + lx[7])));
    }
}

/* The unit sums into two exact accumulators (the kernel's thread, or the
 * emulation). */
struct xs_sink {
    xsum *e2, *x2;
    __host__ __device__ void operator()(double a, double b) const
    {
        xs_add(e2, a);
        xs_add(x2, b);
    }
};

__device__ void limbs_add(unsigned long long *dst, unsigned *dsp, const xsum &s)
{
    for (int i = 0; i < XS_LIMBS; i++)
        if (s.l[i]) atomicAdd(&dst[i], (unsigned long long)s.l[i]);
    if (s.special) atomicOr(dsp, s.special);
}

/* g: [Q_N] counters, then 2 x XS_LIMBS limbs; gsp: 2 special words */
__global__ void __launch_bounds__(QT) k_qstats(fp4s_cu_params p, const float *x, size_t ld, size_t rows, size_t nb,
                                               size_t H, unsigned long long *g, unsigned *gsp)
{
    __shared__ unsigned long long s[Q_N + 2 * XS_LIMBS];
    __shared__ unsigned ssp[2];
    for (int i = threadIdx.x; i < Q_N + 2 * XS_LIMBS; i += blockDim.x) s[i] = 0ull;
    if (threadIdx.x < 2) ssp[threadIdx.x] = 0u;
    __syncthreads();
    uint64_t c[Q_N];
    for (int i = 0; i < Q_N; i++) c[i] = 0;
    xsum e2, x2;
    memset(&e2, 0, sizeof e2);
    memset(&x2, 0, sizeof x2);
    const size_t ntr = (rows + H - 1) / H, n = ntr * nb;
    for (size_t it = blockIdx.x * (size_t)blockDim.x + threadIdx.x; it < n; it += (size_t)gridDim.x * blockDim.x)
        unit(p, x, ld, rows, H, it / nb, it % nb, c, xs_sink{&e2, &x2});
    xs_norm(&e2);
    xs_norm(&x2);
    for (int i = 0; i < Q_N; i++)
        if (c[i]) atomicAdd(&s[i], (unsigned long long)c[i]);
    limbs_add(s + Q_N, &ssp[0], e2);
    limbs_add(s + Q_N + XS_LIMBS, &ssp[1], x2);
    __syncthreads();
    for (int i = threadIdx.x; i < Q_N + 2 * XS_LIMBS; i += blockDim.x)
        if (s[i]) atomicAdd(&g[i], s[i]);
    if (threadIdx.x < 2 && ssp[threadIdx.x]) atomicOr(&gsp[threadIdx.x], ssp[threadIdx.x]);
}

/* The counters and limbs (host memory) into *st, as fp4s_qstats_merge adds. */
void merge_into(fp4s_qstats *st, const unsigned long long *g, const unsigned *sp)
{
    st->elements += g[Q_ELEM];
    st->blocks += g[Q_BLK];
    st->saturated += g[Q_SAT];
    st->zero_blocks += g[Q_ZB];
    st->nonfinite += g[Q_NF];
    st->nan += g[Q_NAN];
    st->inf += g[Q_INF];
    st->nonfinite_blocks += g[Q_NFB];
    st->neg_zero += g[Q_NZ];
    st->scale_underflow += g[Q_UF];
    st->scale_clamped += g[Q_CL];
    qsum2 add, acc;
    memset(&add, 0, sizeof add);
    for (int i = 0; i < XS_LIMBS; i++) {
        add.e2.l[i] = (int64_t)g[Q_N + i];
        add.x2.l[i] = (int64_t)g[Q_N + XS_LIMBS + i];
    }
    add.e2.special = sp[0];
    add.x2.special = sp[1];
    memcpy(&acc, st->sums, sizeof acc);
    xs_merge(&acc.e2, &add.e2);
    xs_merge(&acc.x2, &add.x2);
    memcpy(st->sums, &acc, sizeof acc);
    st->err2 = xs_value(&acc.e2);
    st->x2 = xs_value(&acc.x2);
}

int check_args(const fp4s_spec *s, const fp4s_tscale *ts, size_t rows, size_t cols, size_t ld, const void *x,
               fp4s_cu_params *p, const char *op)
{
    int rc = fp4s_cu_prepare(s, ts, rows, cols, p);
    if (rc) return rc;
    if (rows && cols && !x) return fp4s_error_set(FP4S_EINVAL, "cuda: %s: no input", op);
    if (ld < cols)
        return fp4s_error_set(FP4S_EINVAL, "cuda: %s: row stride %zu is smaller than %zu columns", op, ld, cols);
    return 0;
}

} // namespace

extern "C" FP4S_API int fp4s_cuda_qstats(const fp4s_spec *s, const fp4s_tscale *ts, const float *d_x, size_t rows,
                                         size_t cols, size_t ld, fp4s_qstats *st, void *stream)
{
    fp4s_cu_params p;
    int rc = check_args(s, ts, rows, cols, ld, d_x, &p, "statistics");
    if (rc) return rc;
    if (!st) return fp4s_error_set(FP4S_EINVAL, "cuda: statistics: no output");
    if (rows == 0 || cols == 0) return 0;
    if (!fp4s_cuda_available()) return fp4s_error_set(FP4S_ENOTSUP, "cuda: statistics: no usable GPU");
    cudaStream_t sm = (cudaStream_t)stream;
    const size_t nb = cols / (size_t)p.block, H = p.tile2d ? 16 : 1, n = (rows + H - 1) / H * nb;
    const size_t nw = Q_N + 2 * XS_LIMBS;
    unsigned long long *dg = nullptr, hg[Q_N + 2 * XS_LIMBS];
    unsigned *dsp = nullptr, hsp[2];
    cudaError_t e = cudaMalloc((void **)&dg, nw * sizeof *dg);
    if (e == cudaSuccess) e = cudaMalloc((void **)&dsp, 2 * sizeof *dsp);
    if (e == cudaSuccess) e = cudaMemsetAsync(dg, 0, nw * sizeof *dg, sm);
    if (e == cudaSuccess) e = cudaMemsetAsync(dsp, 0, 2 * sizeof *dsp, sm);
    if (e == cudaSuccess) {
        k_qstats<<<fp4s_cu_grid(n, QT), QT, 0, sm>>>(p, d_x, ld, rows, nb, H, dg, dsp);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(hg, dg, nw * sizeof *dg, cudaMemcpyDeviceToHost, sm);
    if (e == cudaSuccess) e = cudaMemcpyAsync(hsp, dsp, 2 * sizeof *dsp, cudaMemcpyDeviceToHost, sm);
    if (e == cudaSuccess) e = cudaStreamSynchronize(sm);
    if (e == cudaSuccess) merge_into(st, hg, hsp);
    else rc = fp4s_cu_fail(e, "statistics");
    cudaFree(dg);
    cudaFree(dsp);
    return rc;
}

extern "C" int fp4s_cuda_emulate_qstats(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows,
                                        size_t cols, size_t ld, fp4s_qstats *st)
{
    fp4s_cu_params p;
    int rc = check_args(s, ts, rows, cols, ld, x, &p, "statistics (emulated)");
    if (rc) return rc;
    if (!st) return fp4s_error_set(FP4S_EINVAL, "cuda: statistics: no output");
    if (rows == 0 || cols == 0) return 0;
    const size_t nb = cols / (size_t)p.block, H = p.tile2d ? 16 : 1, ntr = (rows + H - 1) / H;
    uint64_t c[Q_N] = {0};
    xsum e2, x2;
    memset(&e2, 0, sizeof e2);
    memset(&x2, 0, sizeof x2);
    for (size_t tr = 0; tr < ntr; tr++)
        for (size_t b = 0; b < nb; b++)
            unit(p, x, ld, rows, H, tr, b, c, xs_sink{&e2, &x2});
    xs_norm(&e2);
    xs_norm(&x2);
    unsigned long long g[Q_N + 2 * XS_LIMBS];
    for (int i = 0; i < Q_N; i++) g[i] = c[i];
    for (int i = 0; i < XS_LIMBS; i++) {
        g[Q_N + i] = (unsigned long long)e2.l[i];
        g[Q_N + XS_LIMBS + i] = (unsigned long long)x2.l[i];
    }
    unsigned sp[2] = {e2.special, x2.special};
    merge_into(st, g, sp);
    return 0;
}

extern "C" FP4S_API int fp4s_cuda_quantize_host_all(const fp4s_spec *s, const fp4s_tscale *ts, const float *x,
                                                    size_t rows, size_t cols, size_t ld, bool packed, uint8_t *codes,
                                                    uint8_t *scales, float *dequant, fp4s_qstats *st)
{
    fp4s_cu_params p;
    int rc = check_args(s, ts, rows, cols, ld, x, &p, "quantize");
    if (rc) return rc;
    if (dequant && !packed && !codes)
        return fp4s_error_set(FP4S_EINVAL, "cuda: quantize: dequantized values need the codes");
    if (rows == 0 || cols == 0) return 0;
    if (!fp4s_cuda_available()) return fp4s_error_set(FP4S_ENOTSUP, "cuda: quantize: no usable GPU");
    const size_t nx = (rows - 1) * ld + cols, nc = rows * cols / (packed ? 2 : 1), ns = rows * (cols / s->block);
    float *dx = nullptr, *dd = nullptr;
    uint8_t *dc = nullptr, *ds = nullptr;
    cudaError_t e = cudaMalloc((void **)&dx, nx * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc((void **)&dc, nc);
    if (e == cudaSuccess) e = cudaMalloc((void **)&ds, ns);
    if (e == cudaSuccess && dequant) e = cudaMalloc((void **)&dd, rows * cols * sizeof(float));
    if (e == cudaSuccess) e = cudaMemcpy(dx, x, nx * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        rc = fp4s_cuda_quantize_ex(s, ts, FP4S_DT_F32, dx, rows, cols, ld, packed, dc, ds, nullptr);
        if (!rc && dequant) rc = fp4s_cuda_dequantize_ex(s, ts, packed, dc, ds, rows, cols, dd, nullptr);
        if (!rc && st) rc = fp4s_cuda_qstats(s, ts, dx, rows, cols, ld, st, nullptr);
        if (!rc) e = cudaDeviceSynchronize();
        if (!rc && e == cudaSuccess && codes) e = cudaMemcpy(codes, dc, nc, cudaMemcpyDeviceToHost);
        if (!rc && e == cudaSuccess && scales) e = cudaMemcpy(scales, ds, ns, cudaMemcpyDeviceToHost);
        if (!rc && e == cudaSuccess && dequant)
            e = cudaMemcpy(dequant, dd, rows * cols * sizeof(float), cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess && !rc) rc = fp4s_cu_fail(e, "quantize (host buffers)");
    cudaFree(dx);
    cudaFree(dc);
    cudaFree(ds);
    cudaFree(dd);
    return rc;
}
