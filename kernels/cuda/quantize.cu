/* CUDA op: quantize float32 rows to MXFP4 / NVFP4 codes and scale bytes.
 *
 * 1-D blocks (MXFP4 32, NVFP4 16), two kernels (fp4s_cu_variant): by default
 * each thread owns 8 consecutive elements (two 16-byte loads), the other
 * variant 4 (one load). A block of BS elements is BS/8 (BS/4) neighbouring
 * lanes of a warp; the block amax is a butterfly max over those lanes
 * (__shfl_xor_sync), every lane then derives the same scale and encodes its
 * elements into one 8-byte (4-byte) store of code bytes, and the first lane
 * of the block writes the scale byte. Each thread keeps 4 16-byte loads in
 * flight per iteration of a grid-stride loop over the tensor. The kernels are
 * compute-bound on the H200 (bench/RESULTS.md), so the element encoding is
 * branch-free and mostly float32 (cu_elem_t).
 *
 * 2-D (NVFP4 16x16 tiles): 16 lanes of a warp take the 16 rows of one tile,
 * each lane its row's 16 elements; the tile amax is a max over those 16 lanes;
 * each row gets the tile's scale byte.
 *
 * The per-block arithmetic is quant_block.cuh's, shared with the host
 * emulation. */
#include "cuda_internal.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int UNROLL = 4;

/* Load 4 floats of vector v (4 consecutive elements) of the input. */
template <bool VEC, bool CONTIG>
__device__ __forceinline__ float4 load4(const float *__restrict__ x, size_t v, size_t vpr, size_t ld)
{
    size_t off;
    if (CONTIG) {
        off = v * 4;
    } else {
        size_t r = v / vpr;
        off = r * ld + (v - r * vpr) * 4;
    }
    if (VEC) return __ldcs(reinterpret_cast<const float4 *>(x + off));
    float4 f;
    f.x = __ldcs(x + off);
    f.y = __ldcs(x + off + 1);
    f.z = __ldcs(x + off + 2);
    f.w = __ldcs(x + off + 3);
    return f;
}

template <int BS, int MODE, bool VEC, bool CONTIG>
__global__ void __launch_bounds__(THREADS)
quant1d_kernel(fp4s_cu_params p, const float *__restrict__ x, size_t nvec, size_t vpr, size_t ld,
               uint8_t *__restrict__ codes, uint8_t *__restrict__ scales)
{
    constexpr int G = BS / 4; /* lanes per block */
    const unsigned lane = threadIdx.x & 31u;
    const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t base = warp * (32 * UNROLL); base < nvec; base += nwarps * (32 * UNROLL)) {
        float4 f[UNROLL];
        bool act[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            size_t v = base + (size_t)u * 32 + lane;
            act[u] = v < nvec;
            if (act[u]) f[u] = load4<VEC, CONTIG>(x, v, vpr, ld);
            else f[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            fp4s_cu_amax am = {0u, 0, 0};
            cu_amax_add(&am, f[u].x);
            cu_amax_add(&am, f[u].y);
            cu_amax_add(&am, f[u].z);
            cu_amax_add(&am, f[u].w);
            unsigned flags = (unsigned)am.nan | ((unsigned)am.inf << 1);
#pragma unroll
            for (int o = 1; o < G; o <<= 1) {
                am.abits = max(am.abits, __shfl_xor_sync(0xffffffffu, am.abits, o));
                flags |= __shfl_xor_sync(0xffffffffu, flags, o);
            }
            am.nan = flags & 1u;
            am.inf = (flags >> 1) & 1u;
            if (!act[u]) continue; /* whole blocks are inactive together */
            fp4s_cu_blk b = cu_block(p, am);
            uint32_t q;
            if (cu_block_plain(p, am, b)) /* the common case: no special values */
                q = cu_elem_t<MODE, true>(p, b.f, f[u].x)
                  | cu_elem_t<MODE, true>(p, b.f, f[u].y) << 8
                  | cu_elem_t<MODE, true>(p, b.f, f[u].z) << 16
                  | cu_elem_t<MODE, true>(p, b.f, f[u].w) << 24;
            else
                q = cu_elem_t<MODE, false>(p, b.f, f[u].x)
                  | cu_elem_t<MODE, false>(p, b.f, f[u].y) << 8
                  | cu_elem_t<MODE, false>(p, b.f, f[u].z) << 16
                  | cu_elem_t<MODE, false>(p, b.f, f[u].w) << 24;
            q = b.nan ? 0u : q;
            size_t v = base + (size_t)u * 32 + lane;
            if (VEC) {
                __stcs(reinterpret_cast<unsigned int *>(codes + v * 4), q);
            } else {
                codes[v * 4] = (uint8_t)q;
                codes[v * 4 + 1] = (uint8_t)(q >> 8);
                codes[v * 4 + 2] = (uint8_t)(q >> 16);
                codes[v * 4 + 3] = (uint8_t)(q >> 24);
            }
            if ((lane & (G - 1)) == 0) scales[v / G] = b.scale;
        }
    }
}

template <int MODE, bool PLAIN>
__device__ __forceinline__ uint32_t encode4(const fp4s_cu_params &p, float f, float4 v)
{
    return cu_elem_t<MODE, PLAIN>(p, f, v.x) | cu_elem_t<MODE, PLAIN>(p, f, v.y) << 8
         | cu_elem_t<MODE, PLAIN>(p, f, v.z) << 16 | cu_elem_t<MODE, PLAIN>(p, f, v.w) << 24;
}

/* Variant 8 (the default, see fp4s_cu_variant): each thread owns 8 consecutive elements (two 16-byte loads, one
 * 8-byte store of codes), so a block is BS/8 lanes and the per-block work
 * (amax butterfly, scale) is shared by twice as many elements. Pairs of
 * vectors 2w, 2w+1 never straddle a row (cols is a multiple of 16). */
template <int BS, int MODE, bool VEC, bool CONTIG>
__global__ void __launch_bounds__(THREADS)
quant1d8_kernel(fp4s_cu_params p, const float *__restrict__ x, size_t nw, size_t vpr, size_t ld,
                uint8_t *__restrict__ codes, uint8_t *__restrict__ scales)
{
    constexpr int G = BS / 8; /* lanes per block */
    constexpr int U = UNROLL / 2;
    const unsigned lane = threadIdx.x & 31u;
    const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t base = warp * (32 * U); base < nw; base += nwarps * (32 * U)) {
        float4 f[U][2];
        bool act[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            size_t w = base + (size_t)u * 32 + lane;
            act[u] = w < nw;
            if (act[u]) {
                f[u][0] = load4<VEC, CONTIG>(x, 2 * w, vpr, ld);
                f[u][1] = load4<VEC, CONTIG>(x, 2 * w + 1, vpr, ld);
            } else {
                f[u][0] = f[u][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            fp4s_cu_amax am = {0u, 0, 0};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                cu_amax_add(&am, f[u][h].x);
                cu_amax_add(&am, f[u][h].y);
                cu_amax_add(&am, f[u][h].z);
                cu_amax_add(&am, f[u][h].w);
            }
            unsigned flags = (unsigned)am.nan | ((unsigned)am.inf << 1);
#pragma unroll
            for (int o = 1; o < G; o <<= 1) {
                am.abits = max(am.abits, __shfl_xor_sync(0xffffffffu, am.abits, o));
                flags |= __shfl_xor_sync(0xffffffffu, flags, o);
            }
            am.nan = flags & 1u;
            am.inf = (flags >> 1) & 1u;
            if (!act[u]) continue; /* whole blocks are inactive together */
            fp4s_cu_blk b = cu_block(p, am);
            uint32_t q0, q1;
            if (cu_block_plain(p, am, b)) {
                q0 = encode4<MODE, true>(p, b.f, f[u][0]);
                q1 = encode4<MODE, true>(p, b.f, f[u][1]);
            } else {
                q0 = encode4<MODE, false>(p, b.f, f[u][0]);
                q1 = encode4<MODE, false>(p, b.f, f[u][1]);
            }
            if (b.nan) q0 = q1 = 0u;
            size_t w = base + (size_t)u * 32 + lane;
            if (VEC) {
                __stcs(reinterpret_cast<uint2 *>(codes + w * 8), make_uint2(q0, q1));
            } else {
                for (int k = 0; k < 4; k++) {
                    codes[w * 8 + k] = (uint8_t)(q0 >> (8 * k));
                    codes[w * 8 + 4 + k] = (uint8_t)(q1 >> (8 * k));
                }
            }
            if ((lane & (G - 1)) == 0) scales[w / G] = b.scale;
        }
    }
}

/* NVFP4 16x16 tiles. Thread t: row lane l = t % 16 of tile group g = t / 16;
 * g = tile_row * nbpr + col_block. */
template <int MODE, bool VEC>
__global__ void __launch_bounds__(THREADS)
quant2d_kernel(fp4s_cu_params p, const float *__restrict__ x, size_t rows, size_t nbpr, size_t ld,
               size_t ngroups, uint8_t *__restrict__ codes, uint8_t *__restrict__ scales)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    const size_t total = ngroups * 16; /* a multiple of 16; loop warp-uniformly */
    const size_t total_w = (total + 31) & ~(size_t)31;
    const size_t cols = nbpr * 16;
    for (size_t t = tid; t < total_w; t += nthreads) {
        size_t g = t >> 4;
        size_t l = t & 15u;
        size_t tr = g / nbpr, cb = g - tr * nbpr;
        size_t r = tr * 16 + l;
        bool act = t < total && r < rows;
        float v[16];
        fp4s_cu_amax am = {0u, 0, 0};
        if (act) {
            const float *xr = x + r * ld + cb * 16;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float4 f;
                if (VEC) {
                    f = __ldcs(reinterpret_cast<const float4 *>(xr) + k);
                } else {
                    f.x = __ldcs(xr + 4 * k);
                    f.y = __ldcs(xr + 4 * k + 1);
                    f.z = __ldcs(xr + 4 * k + 2);
                    f.w = __ldcs(xr + 4 * k + 3);
                }
                v[4 * k] = f.x;
                v[4 * k + 1] = f.y;
                v[4 * k + 2] = f.z;
                v[4 * k + 3] = f.w;
            }
#pragma unroll
            for (int k = 0; k < 16; k++) cu_amax_add(&am, v[k]);
        }
        unsigned flags = (unsigned)am.nan | ((unsigned)am.inf << 1);
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) {
            am.abits = max(am.abits, __shfl_xor_sync(0xffffffffu, am.abits, o));
            flags |= __shfl_xor_sync(0xffffffffu, flags, o);
        }
        am.nan = flags & 1u;
        am.inf = (flags >> 1) & 1u;
        if (!act) continue;
        fp4s_cu_blk b = cu_block(p, am);
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = b.nan ? 0u
                 : cu_block_plain(p, am, b)
                 ? (cu_elem_t<MODE, true>(p, b.f, v[4 * k])
                    | cu_elem_t<MODE, true>(p, b.f, v[4 * k + 1]) << 8
                    | cu_elem_t<MODE, true>(p, b.f, v[4 * k + 2]) << 16
                    | cu_elem_t<MODE, true>(p, b.f, v[4 * k + 3]) << 24)
                 : (cu_elem_t<MODE, false>(p, b.f, v[4 * k])
                    | cu_elem_t<MODE, false>(p, b.f, v[4 * k + 1]) << 8
                    | cu_elem_t<MODE, false>(p, b.f, v[4 * k + 2]) << 16
                    | cu_elem_t<MODE, false>(p, b.f, v[4 * k + 3]) << 24);
        uint8_t *cr = codes + r * cols + cb * 16;
        if (VEC) {
            __stcs(reinterpret_cast<uint4 *>(cr), make_uint4(w[0], w[1], w[2], w[3]));
        } else {
            for (int k = 0; k < 16; k++) cr[k] = (uint8_t)(w[k >> 2] >> (8 * (k & 3)));
        }
        scales[r * nbpr + cb] = b.scale;
    }
}

template <int BS, int MODE>
void launch1d(const fp4s_cu_params &p, const float *x, size_t rows, size_t cols, size_t ld,
              uint8_t *codes, uint8_t *scales, cudaStream_t st, bool vec)
{
    size_t nvec = rows * (cols / 4), vpr = cols / 4;
    bool contig = ld == cols;
    if (fp4s_cu_variant() == 8) {
        size_t nw = nvec / 2;
        unsigned grid = fp4s_cu_grid((nw + (size_t)UNROLL / 2 - 1) / (UNROLL / 2), THREADS);
        if (vec && contig)
            quant1d8_kernel<BS, MODE, true, true><<<grid, THREADS, 0, st>>>(p, x, nw, vpr, ld, codes, scales);
        else if (vec)
            quant1d8_kernel<BS, MODE, true, false><<<grid, THREADS, 0, st>>>(p, x, nw, vpr, ld, codes, scales);
        else if (contig)
            quant1d8_kernel<BS, MODE, false, true><<<grid, THREADS, 0, st>>>(p, x, nw, vpr, ld, codes, scales);
        else
            quant1d8_kernel<BS, MODE, false, false><<<grid, THREADS, 0, st>>>(p, x, nw, vpr, ld, codes, scales);
        return;
    }
    unsigned grid = fp4s_cu_grid((nvec + (size_t)UNROLL - 1) / UNROLL, THREADS);
    if (vec && contig)
        quant1d_kernel<BS, MODE, true, true><<<grid, THREADS, 0, st>>>(p, x, nvec, vpr, ld, codes, scales);
    else if (vec)
        quant1d_kernel<BS, MODE, true, false><<<grid, THREADS, 0, st>>>(p, x, nvec, vpr, ld, codes, scales);
    else if (contig)
        quant1d_kernel<BS, MODE, false, true><<<grid, THREADS, 0, st>>>(p, x, nvec, vpr, ld, codes, scales);
    else
        quant1d_kernel<BS, MODE, false, false><<<grid, THREADS, 0, st>>>(p, x, nvec, vpr, ld, codes, scales);
}

template <int MODE>
void launch2d(const fp4s_cu_params &p, const float *x, size_t rows, size_t cols, size_t ld,
              uint8_t *codes, uint8_t *scales, cudaStream_t st, bool vec)
{
    size_t nbpr = cols / 16;
    size_t ngroups = ((rows + 15) / 16) * nbpr;
    unsigned grid = fp4s_cu_grid(ngroups * 16, THREADS);
    if (vec)
        quant2d_kernel<MODE, true><<<grid, THREADS, 0, st>>>(p, x, rows, nbpr, ld, ngroups, codes, scales);
    else
        quant2d_kernel<MODE, false><<<grid, THREADS, 0, st>>>(p, x, rows, nbpr, ld, ngroups, codes, scales);
}

} // namespace

extern "C" FP4S_API int fp4s_cuda_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                           const float *d_x, size_t rows, size_t cols, size_t ld,
                                           uint8_t *d_codes, uint8_t *d_scales, void *stream)
{
    fp4s_cu_params p;
    int rc = fp4s_cu_prepare(s, ts, rows, cols, &p);
    if (rc) return rc;
    if (!d_x || !d_codes || !d_scales)
        return fp4s_error_set(FP4S_EINVAL, "cuda: quantize: input, codes and scales are required");
    if (ld < cols)
        return fp4s_error_set(FP4S_EINVAL, "cuda: quantize: row stride %zu is smaller than %zu columns",
                              ld, cols);
    if (rows == 0) return 0;
    if (!fp4s_cuda_available())
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: quantize: no usable GPU");
    cudaStream_t st = (cudaStream_t)stream;
    /* 16-byte loads need an aligned base and a row stride that keeps every
     * row aligned; 4-byte code stores need an aligned code buffer. */
    bool vec = ((uintptr_t)d_x % 16 == 0) && (ld % 4 == 0) && ((uintptr_t)d_codes % 16 == 0);
    cudaGetLastError(); /* clear a stale error from an earlier call */
    /* element mode: MXFP4 multiplies, NVFP4 as its recipe's traits say (fp4s_nv_elem:
     * 0 multiply, 1 divide, 2 ggml's search) */
    const int mode = p.format == FP4S_MXFP4 ? 0 : p.elem;
    if (p.format == FP4S_NVFP4 && p.tile2d) {
        if (mode == 0) launch2d<0>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
        else if (mode == 1) launch2d<1>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
        else launch2d<2>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
    } else if (p.block == 32) {
        launch1d<32, 0>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
    } else if (mode == 0) {
        launch1d<16, 0>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
    } else if (mode == 1) {
        launch1d<16, 1>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
    } else {
        launch1d<16, 2>(p, d_x, rows, cols, ld, d_codes, d_scales, st, vec);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return fp4s_cu_fail(e, "quantize: launch");
    return 0;
}
