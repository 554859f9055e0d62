/* The quantize kernel templates (internal): included by quantize_f32.cu,
 * quantize_bf16.cu and quantize_f16.cu, each of which instantiates the
 * kernels of one input type (three objects that nvcc compiles in parallel);
 * quantize.cu holds the entry points. See quantize.cu for the design. */
#ifndef FP4S_CUDA_QUANTIZE_KERNELS_CUH
#define FP4S_CUDA_QUANTIZE_KERNELS_CUH

#include "cuda_internal.cuh"

#include <cuda_fp16.h>

/* Launch the kernel for input type DT (CU_DT_*): mode the element mode, out
 * the code layout (0 bytes, 1 pairs, 2 split), d2 the 2-D tiles. */
template <int DT>
void fp4s_cu_quant_launch(int bs, int mode, int out, bool d2, unsigned grid, cudaStream_t st,
                          const fp4s_cu_params &p, const void *x, size_t ngroups, size_t gpr, size_t rows,
                          size_t ld, bool contig, bool vec_in, bool vec_out, uint8_t *codes, uint8_t *scales);

#ifdef FP4S_CUDA_QUANT_INSTANTIATE
namespace {

constexpr int THREADS = 256;
constexpr unsigned FULL = 0xffffffffu;

/* The 16 elements at element offset off of x as 32-bit words: 16 float32
 * (NW = 16), or 8 words of two BF16/FP16 elements, element 2j in the low
 * half of word j (NW = 8): quant_block.cuh works on those words. */
template <int DT>
__device__ __forceinline__ void load16(const void *__restrict__ xv, size_t off, bool vec, uint32_t *u)
{
    constexpr int NW = DT == CU_DT_F32 ? 16 : 8;
    const char *x = static_cast<const char *>(xv) + off * (DT == CU_DT_F32 ? 4 : 2);
    if (vec) {
#pragma unroll
        for (int k = 0; k < NW / 4; k++) {
            const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(x) + k);
            u[4 * k] = v.x;
            u[4 * k + 1] = v.y;
            u[4 * k + 2] = v.z;
            u[4 * k + 3] = v.w;
        }
    } else if (DT == CU_DT_F32) {
#pragma unroll
        for (int k = 0; k < 16; k++) u[k] = __ldcs(reinterpret_cast<const unsigned *>(x) + k);
    } else {
        const unsigned short *h = reinterpret_cast<const unsigned short *>(x);
#pragma unroll
        for (int k = 0; k < 8; k++) u[k] = (uint32_t)__ldcs(h + 2 * k) | ((uint32_t)__ldcs(h + 2 * k + 1) << 16);
    }
}

__device__ __forceinline__ void store_words(uint8_t *dst, const uint32_t *w, int n, bool vec)
{
    if (vec) {
        if (n == 4) __stcs(reinterpret_cast<uint4 *>(dst), make_uint4(w[0], w[1], w[2], w[3]));
        else __stcs(reinterpret_cast<uint2 *>(dst), make_uint2(w[0], w[1]));
        return;
    }
    for (int k = 0; k < 4 * n; k++) dst[k] = (uint8_t)(w[k >> 2] >> (8 * (k & 3)));
}

/* n / d for n < 2^32 from mg = floor((2^32 - 1) / d): the estimate is low by
 * at most one, one correction makes it exact. */
__device__ __forceinline__ uint32_t udiv(uint32_t n, uint32_t d, uint32_t mg)
{
    uint32_t q = __umulhi(n, mg);
    return q + (n - q * d >= d ? 1u : 0u);
}

/* Where group g lies: its row, its 16-column group in the row, whether it
 * is inside the tensor. */
template <bool D2>
__device__ __forceinline__ bool group_pos(size_t g, size_t ngroups, size_t gpr, size_t rows, bool contig,
                                          bool idx32, uint32_t mg, size_t &row, size_t &cg)
{
    if (D2) {
        const size_t tile = g >> 4;
        size_t tr;
        if (idx32) tr = udiv((uint32_t)tile, (uint32_t)gpr, mg);
        else tr = tile / gpr;
        cg = tile - tr * gpr;
        row = tr * 16 + (g & 15);
        return g < ngroups && row < rows;
    }
    if (contig) {
        row = 0;
        cg = g;
    } else {
        if (idx32) row = udiv((uint32_t)g, (uint32_t)gpr, mg);
        else row = g / gpr;
        cg = g - row * gpr;
    }
    return g < ngroups;
}

/* One group of 16 loaded elements f: block amax (shuffles), scale, codes,
 * stores. Every lane of the warp calls it for the same iteration. */
template <int BS, int MODE, int OUT, bool D2, int DT>
__device__ __forceinline__ void quant_group(const fp4s_cu_params &p, size_t g, bool act, size_t row, size_t cg,
                                            size_t cols, bool vec_out, uint8_t *__restrict__ codes,
                                            uint8_t *__restrict__ scales, const float *f, const uint32_t *u)
{
    fp4s_cu_amax am;
    if (DT == CU_DT_F32) {
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < 16; k++) a = cu_absmax_nan(a, f[k]);
        if (BS == 32) a = cu_absmax_nan(a, __shfl_xor_sync(FULL, a, 1));
        if (D2) {
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) a = cu_absmax_nan(a, __shfl_xor_sync(FULL, a, o));
        }
        am = cu_amax_from(a);
    } else {
        /* on the 16-bit patterns, two elements an instruction (quant_block.cuh) */
        uint32_t m = cu_amax_w8(u);
        if (BS == 32) m = cu_vmaxu2(m, __shfl_xor_sync(FULL, m, 1));
        if (D2) {
            /* the halves folded once, then 16 lanes by max.u32 */
            m = cu_amax_fold_w(m);
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) m = max(m, __shfl_xor_sync(FULL, m, o));
            am = cu_amax_from_h<DT>(m);
        } else {
            am = cu_amax_from_w<DT>(m);
        }
    }
    if (p.nonfinite == 2 && __any_sync(FULL, am.nan)) {
        /* IGNORE: NaN stays out of the amax, Inf enters it */
        fp4s_cu_amax e = {0u, 0, 0};
        if (DT == CU_DT_F32) {
#pragma unroll
            for (int k = 0; k < 16; k++) cu_amax_add(&e, f[k]);
        } else {
            cu_amax_add_w<DT>(&e, u);
        }
        unsigned flags = (unsigned)e.nan | ((unsigned)e.inf << 1);
        const int span = D2 ? 16 : BS / 16;
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) {
            if (o >= span) break;
            e.abits = max(e.abits, __shfl_xor_sync(FULL, e.abits, o));
            flags |= __shfl_xor_sync(FULL, flags, o);
        }
        e.nan = flags & 1u;
        e.inf = (flags >> 1) & 1u;
        am = e;
    }
    const fp4s_cu_blk b = cu_block(p, am);
    uint32_t w[4];
    if (DT == CU_DT_F32) {
        if (OUT == 1) cu_encode16<MODE, 4>(p, am, b, f, w);
        else cu_encode16<MODE, 8>(p, am, b, f, w);
    } else {
        if (OUT == 1) cu_encode16_w<DT, MODE, 4>(p, am, b, u, w);
        else cu_encode16_w<DT, MODE, 8>(p, am, b, u, w);
    }
    const size_t e0 = D2 ? row * cols + cg * 16 : g * 16; /* first element, output order */
    if (OUT == 2) {
        uint32_t s[2];
        if (BS == 16) {
            cu_split16(w, s);
        } else {
            /* element j + 16 of the block sits in the other lane */
            const unsigned h = (unsigned)(g & 1);
            const uint32_t r0 = __shfl_xor_sync(FULL, h ? w[0] : w[2], 1);
            const uint32_t r1 = __shfl_xor_sync(FULL, h ? w[1] : w[3], 1);
            s[0] = h ? (r0 | (w[2] << 4)) : (w[0] | (r0 << 4));
            s[1] = h ? (r1 | (w[3] << 4)) : (w[1] | (r1 << 4));
        }
        if (act) store_words(codes + e0 / 2, s, 2, vec_out);
    } else if (act) {
        if (OUT == 1) store_words(codes + e0 / 2, w, 2, vec_out);
        else store_words(codes + e0, w, 4, vec_out);
    }
    if (act && (BS == 16 || (g & 1) == 0)) scales[e0 / BS] = b.scale;
}

/* OUT: 0 one code per byte, 1 pairs, 2 split. D2: 16x16 tiles (BS 16).
 * G groups per iteration, all loaded before the first is encoded: 2 for
 * 16-bit inputs, so that a thread keeps 64 bytes of loads in flight as it
 * does with float32 (one group of 16 floats). */
template <int BS, int MODE, int DT, int OUT, bool D2>
__global__ void __launch_bounds__(THREADS)
quant16_kernel(fp4s_cu_params p, const void *__restrict__ x, size_t ngroups, size_t gpr, size_t rows,
               size_t ld, bool contig, bool vec_in, bool vec_out, uint8_t *__restrict__ codes,
               uint8_t *__restrict__ scales, uint32_t mg)
{
    constexpr int G = DT == CU_DT_F32 ? 1 : 2;
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nth = (size_t)gridDim.x * blockDim.x;
    const size_t total = (ngroups + 31) & ~(size_t)31; /* every lane runs every shuffle */
    const size_t cols = gpr * 16;
    const bool idx32 = total + (size_t)G * nth <= 0xFFFFFFFFu && gpr <= 0xFFFFFFFFu;
    for (size_t g0 = tid; g0 < total; g0 += (size_t)G * nth) {
        /* the groups' words: 16 float32 or 8 words of BF16/FP16 each */
        uint32_t w[G][DT == CU_DT_F32 ? 16 : 8];
        size_t row[G], cg[G];
        bool act[G];
#pragma unroll
        for (int u = 0; u < G; u++) {
            const size_t g = g0 + (size_t)u * nth;
            act[u] = group_pos<D2>(g, ngroups, gpr, rows, contig, idx32, mg, row[u], cg[u]);
            if (act[u]) {
                load16<DT>(x, row[u] * ld + cg[u] * 16, vec_in, w[u]);
            } else {
#pragma unroll
                for (int k = 0; k < (DT == CU_DT_F32 ? 16 : 8); k++) w[u][k] = 0u;
            }
        }
#pragma unroll
        for (int u = 0; u < G; u++) {
            const size_t g = g0 + (size_t)u * nth;
            if (g >= total) break; /* the same for the whole warp */
            float f[16]; /* float32: the words as floats; read only for float32 */
            if constexpr (DT == CU_DT_F32) {
#pragma unroll
                for (int k = 0; k < 16; k++) f[k] = __uint_as_float(w[u][k]);
            }
            quant_group<BS, MODE, OUT, D2, DT>(p, g, act[u], row[u], cg[u], cols, vec_out, codes, scales, f, w[u]);
        }
    }
}

/* ---- 2-D tiles, coalesced ------------------------------------------------------
 * A warp takes a slab of 16 rows (one band of tiles) by 256 bytes of input:
 * 4 tiles across in float32, 8 in BF16/FP16. Lane l reads the 16-byte piece
 * l & 15 of rows (l >> 4) + 2i, i = 0..7, so each load instruction of the
 * warp reads two whole 256-byte row segments (the row-per-lane layout of
 * quant16_kernel reads a 16-byte piece of each of 16 rows an instruction, and
 * its L1 traffic was the limit of the 2-D tiles). A lane's elements lie in one
 * tile: 8 rows of 4 float32 or of 8 BF16/FP16 elements. The tile's lanes are
 * those of the same piece column of the tile, lane bits 0-1 (float32) or 0
 * (16-bit), and of both row halves, bit 4: the tile amax is the lane's own,
 * then one shuffle per such bit. The encoding is quant_block.cuh's, per lane,
 * as in the row-per-lane kernel (the same functions on the same values with
 * the same block factor), so the codes and scales are the same bits.
 * Stores: BF16/FP16 lanes hold 8 codes of a row (4 bytes packed, 8 bytes one
 * per byte), 16 lanes of a row 64 or 128 bytes in a row; float32 lanes one per
 * byte store 4 bytes a row (64 bytes per row and instruction); packed, the 4
 * lanes of a tile row group swap their 2-byte pieces (a 4 x 4 transpose, two
 * shuffles) so that each lane stores a tile row's 8 bytes, 32 bytes a row and
 * instruction: whole 32-byte sectors. Each lane writes the scale bytes of the
 * tile rows it stores packed (float32) or of a quarter of the tile's rows
 * (16-bit). Slabs run along the band, neighbouring warps on neighbouring
 * slabs. 256 bytes because 128-byte slabs (a template argument, W = 8) left
 * packed float32 warps writing half sectors: on an H100 they reached 70-71%
 * of the device copy (53% packed float32) against 74-84% for 256 bytes. Taken
 * when the rows are 16-byte
 * aligned and the code stores can be wide (vec_in, vec_out) and the layout is
 * one per byte or pairs. */
/* W: 16-byte pieces a warp reads of each row (8: 128 bytes, 16: 256
 * bytes), R = 32 / W rows an instruction, 16 / R rows a lane. */
template <int DT, int W>
struct slab2d {
    static constexpr int EPP = DT == CU_DT_F32 ? 4 : 8; /* elements per 16-byte piece */
    static constexpr int PPT = 16 / EPP;                /* pieces per tile row: 4 or 2 */
    static constexpr int TPS = W / PPT;                 /* tiles across a slab */
    static constexpr int R = 32 / W;                    /* rows an instruction */
    static constexpr int NR = 16 / R;                   /* rows a lane */
};

/* The 4 x 4 transpose of 16-bit pieces among the 4 lanes pq = lane & 3 of a
 * float32 tile row group: in, w0 = rows 0 | 1 << 16 and w1 = rows 2 | 3 << 16
 * of column piece pq; out, row pq's pieces 0 | 1 << 16 and 2 | 3 << 16. */
__device__ __forceinline__ void tile_rows_transpose(unsigned pq, uint32_t w0, uint32_t w1, uint32_t *o)
{
    const unsigned b0 = pq & 1u, b1 = pq >> 1;
    /* lanes pq and pq ^ 2 swap: each keeps rows 2 b1, 2 b1 + 1 of both pieces */
    const uint32_t k = b1 ? w1 : w0;
    const uint32_t r1 = __shfl_xor_sync(FULL, b1 ? w0 : w1, 2);
    /* lanes pq and pq ^ 1 swap the halves of the row the other keeps */
    const uint32_t give = b0 ? __byte_perm(k, r1, 0x5410u) : __byte_perm(k, r1, 0x7632u);
    const uint32_t r2 = __shfl_xor_sync(FULL, give, 1);
    const uint32_t a_own = b0 ? k >> 16 : k & 0xFFFFu;   /* piece pq */
    const uint32_t a_x2 = b0 ? r1 >> 16 : r1 & 0xFFFFu;  /* piece pq ^ 2 */
    const uint32_t b_x1 = r2 & 0xFFFFu, b_x3 = r2 >> 16; /* pieces pq ^ 1, pq ^ 3 */
    const uint32_t x0 = b1 ? a_x2 : a_own, y0 = b1 ? b_x3 : b_x1; /* pieces b0, 1 - b0 */
    const uint32_t x1 = b1 ? a_own : a_x2, y1 = b1 ? b_x1 : b_x3; /* pieces 2 + b0, 3 - b0 */
    o[0] = b0 ? (y0 | (x0 << 16)) : (x0 | (y0 << 16));
    o[1] = b0 ? (y1 | (x1 << 16)) : (x1 | (y1 << 16));
}

template <int MODE, int DT, int OUT, int W>
__global__ void __launch_bounds__(THREADS)
quant2d_kernel(fp4s_cu_params p, const void *__restrict__ x, size_t nslabs, size_t spb, size_t gpr, size_t rows,
               size_t ld, uint8_t *__restrict__ codes, uint8_t *__restrict__ scales, uint32_t mg)
{
    using G = slab2d<DT, W>;
    constexpr size_t ESZ = DT == CU_DT_F32 ? 4 : 2;
    constexpr int NR = G::NR;
    const unsigned lane = threadIdx.x & 31u, rl = lane / W, q = lane % W, t = q / G::PPT, pq = q % G::PPT;
    const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    const size_t cols = gpr * 16;
    const bool idx32 = nslabs + nwarps <= 0xFFFFFFFFu && spb <= 0xFFFFFFFFu;
    const char *xb = static_cast<const char *>(x);
    for (size_t s = warp; s < nslabs; s += nwarps) { /* the same for the whole warp */
        const size_t band = idx32 ? udiv((uint32_t)s, (uint32_t)spb, mg) : s / spb;
        const size_t tc = (s - band * spb) * G::TPS + t; /* the lane's tile column */
        const bool tile_ok = tc < gpr;
        const size_t r0 = band * 16 + rl, col = tc * 16 + pq * G::EPP; /* lane row i: r0 + R i */
        uint32_t u[4 * NR]; /* row i: words 4i..4i+3 */
#pragma unroll
        for (int i = 0; i < NR; i++) {
            const size_t r = r0 + G::R * (size_t)i;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (tile_ok && r < rows) v = __ldcs(reinterpret_cast<const uint4 *>(xb + (r * ld + col) * ESZ));
            u[4 * i] = v.x;
            u[4 * i + 1] = v.y;
            u[4 * i + 2] = v.z;
            u[4 * i + 3] = v.w;
        }
        /* the tile's lanes: every pq (lane bits below PPT) and every rl (bits from W up) */
        fp4s_cu_amax am;
        if (DT == CU_DT_F32) {
            float a = 0.0f;
#pragma unroll
            for (int k = 0; k < 4 * NR; k++) a = cu_absmax_nan(a, __uint_as_float(u[k]));
#pragma unroll
            for (int o = 1; o < 32; o <<= 1)
                if (o < G::PPT || o >= W) a = cu_absmax_nan(a, __shfl_xor_sync(FULL, a, o));
            am = cu_amax_from(a);
        } else {
            uint32_t m = cu_amax_w8(u);
#pragma unroll
            for (int k = 8; k < 4 * NR; k += 8) m = cu_vmaxu2(m, cu_amax_w8(u + k));
            m = cu_amax_fold_w(m);
#pragma unroll
            for (int o = 1; o < 32; o <<= 1)
                if (o < G::PPT || o >= W) m = max(m, __shfl_xor_sync(FULL, m, o));
            am = cu_amax_from_h<DT>(m);
        }
        if (p.nonfinite == 2 && __any_sync(FULL, am.nan)) {
            /* IGNORE: NaN stays out of the amax, Inf enters it */
            fp4s_cu_amax e = {0u, 0, 0};
            if (DT == CU_DT_F32) {
#pragma unroll
                for (int k = 0; k < 4 * NR; k++) cu_amax_add(&e, __uint_as_float(u[k]));
            } else {
#pragma unroll
                for (int k = 0; k < 4 * NR; k += 8) cu_amax_add_w<DT>(&e, u + k);
            }
            unsigned flags = (unsigned)e.nan | ((unsigned)e.inf << 1);
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                if (o >= G::PPT && o < W) continue;
                e.abits = max(e.abits, __shfl_xor_sync(FULL, e.abits, o));
                flags |= __shfl_xor_sync(FULL, flags, o);
            }
            e.nan = flags & 1u;
            e.inf = (flags >> 1) & 1u;
            am = e;
        }
        const fp4s_cu_blk b = cu_block(p, am);
        if (DT == CU_DT_F32) {
#pragma unroll
            for (int j = 0; j < NR / 4; j++) { /* lane rows 4j..4j+3 */
                float f[16];
#pragma unroll
                for (int k = 0; k < 16; k++) f[k] = __uint_as_float(u[16 * j + k]);
                uint32_t w[4];
                const size_t rt = r0 + G::R * (size_t)(4 * j + pq); /* the row this lane stores packed */
                if (OUT == 1) {
                    cu_encode16<MODE, 4>(p, am, b, f, w);
                    uint32_t o[2];
                    tile_rows_transpose(pq, w[0], w[1], o);
                    if (tile_ok && rt < rows)
                        __stcs(reinterpret_cast<uint2 *>(codes + (rt * cols + tc * 16) / 2), make_uint2(o[0], o[1]));
                } else {
                    cu_encode16<MODE, 8>(p, am, b, f, w);
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const size_t r = r0 + G::R * (size_t)(4 * j + i);
                        if (tile_ok && r < rows) __stcs(reinterpret_cast<uint32_t *>(codes + r * cols + col), w[i]);
                    }
                }
                if (tile_ok && rt < rows) scales[rt * gpr + tc] = b.scale;
            }
        } else {
#pragma unroll
            for (int h = 0; h < NR / 2; h++) { /* lane rows 2h, 2h + 1 */
                uint32_t w[4];
                if (OUT == 1) cu_encode16_w<DT, MODE, 4>(p, am, b, u + 8 * h, w);
                else cu_encode16_w<DT, MODE, 8>(p, am, b, u + 8 * h, w);
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const size_t r = r0 + G::R * (size_t)(2 * h + j);
                    if (!tile_ok || r >= rows) continue;
                    if (OUT == 1) __stcs(reinterpret_cast<uint32_t *>(codes + (r * cols + col) / 2), w[j]);
                    else __stcs(reinterpret_cast<uint2 *>(codes + r * cols + col), make_uint2(w[2 * j], w[2 * j + 1]));
                }
            }
            /* the tile's 2 R lanes write NR / 2 rows' scale bytes each */
#pragma unroll
            for (int j = 0; j < NR / 2; j++) {
                const size_t r = r0 + G::R * (size_t)(pq * (NR / 2) + j);
                if (tile_ok && r < rows) scales[r * gpr + tc] = b.scale;
            }
        }
    }
}

template <int MODE, int DT, int W>
void launch_2d_w(int out, cudaStream_t st, const fp4s_cu_params &p, const void *x, size_t gpr, size_t rows,
                 size_t ld, uint8_t *codes, uint8_t *scales)
{
    constexpr size_t TPS = slab2d<DT, W>::TPS;
    const size_t spb = (gpr + TPS - 1) / TPS; /* slabs per band of 16 rows */
    const size_t nslabs = (rows + 15) / 16 * spb;
    const uint32_t mg = spb <= 0xFFFFFFFFu ? (uint32_t)(0xFFFFFFFFu / (uint32_t)spb) : 0u;
    const unsigned grid = fp4s_cu_grid(nslabs * 32, THREADS);
    if (out == 0)
        quant2d_kernel<MODE, DT, 0, W><<<grid, THREADS, 0, st>>>(p, x, nslabs, spb, gpr, rows, ld, codes, scales, mg);
    else
        quant2d_kernel<MODE, DT, 1, W><<<grid, THREADS, 0, st>>>(p, x, nslabs, spb, gpr, rows, ld, codes, scales, mg);
}

template <int MODE, int DT>
void launch_2d(int out, cudaStream_t st, const fp4s_cu_params &p, const void *x, size_t gpr, size_t rows, size_t ld,
               uint8_t *codes, uint8_t *scales)
{
    launch_2d_w<MODE, DT, 16>(out, st, p, x, gpr, rows, ld, codes, scales); /* 256-byte slabs (see above) */
}

template <int BS, int MODE, int DT, bool D2>
void launch_out(int out, unsigned grid, cudaStream_t st, const fp4s_cu_params &p, const void *x,
                size_t ngroups, size_t gpr, size_t rows, size_t ld, bool contig, bool vec_in, bool vec_out,
                uint8_t *codes, uint8_t *scales)
{
    const uint32_t mg = gpr <= 0xFFFFFFFFu ? (uint32_t)(0xFFFFFFFFu / (uint32_t)gpr) : 0u;
    if (out == 0)
        quant16_kernel<BS, MODE, DT, 0, D2><<<grid, THREADS, 0, st>>>(p, x, ngroups, gpr, rows, ld, contig, vec_in,
                                                                      vec_out, codes, scales, mg);
    else if (out == 1)
        quant16_kernel<BS, MODE, DT, 1, D2><<<grid, THREADS, 0, st>>>(p, x, ngroups, gpr, rows, ld, contig, vec_in,
                                                                      vec_out, codes, scales, mg);
    else
        quant16_kernel<BS, MODE, DT, 2, D2><<<grid, THREADS, 0, st>>>(p, x, ngroups, gpr, rows, ld, contig, vec_in,
                                                                      vec_out, codes, scales, mg);
}


} // namespace

template <int DT>
void fp4s_cu_quant_launch(int bs, int mode, int out, bool d2, unsigned grid, cudaStream_t st,
                          const fp4s_cu_params &p, const void *x, size_t ngroups, size_t gpr, size_t rows,
                          size_t ld, bool contig, bool vec_in, bool vec_out, uint8_t *codes, uint8_t *scales)
{
#define FP4S_QL(BS, MODE, D2) \
    launch_out<BS, MODE, DT, D2>(out, grid, st, p, x, ngroups, gpr, rows, ld, contig, vec_in, vec_out, codes, scales)
    if (d2 && vec_in && vec_out && out != 2) {
        if (mode == 0) launch_2d<0, DT>(out, st, p, x, gpr, rows, ld, codes, scales);
        else if (mode == 1) launch_2d<1, DT>(out, st, p, x, gpr, rows, ld, codes, scales);
        else launch_2d<2, DT>(out, st, p, x, gpr, rows, ld, codes, scales);
    } else if (d2) {
        if (mode == 0) FP4S_QL(16, 0, true);
        else if (mode == 1) FP4S_QL(16, 1, true);
        else FP4S_QL(16, 2, true);
    } else if (bs == 32) {
        FP4S_QL(32, 0, false);
    } else if (mode == 0) {
        FP4S_QL(16, 0, false);
    } else if (mode == 1) {
        FP4S_QL(16, 1, false);
    } else {
        FP4S_QL(16, 2, false);
    }
#undef FP4S_QL
}
#endif /* FP4S_CUDA_QUANT_INSTANTIATE */
#endif
