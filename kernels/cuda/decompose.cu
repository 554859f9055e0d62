/* CUDA op: the error decomposition (fp4s_cuda_decomp_add, <fp4scope/decompose.h>).
 *
 * One call: the rows are quantized on the device by the quantize kernel
 * (codes one per byte and scale bytes, bit-identical to fp4s_quantize), then
 * one pass of the row kernel reads x, the codes and the scales, dequantizes
 * (cu_deq, the reference's order), and computes every row's partial the way
 * the CPU does (decomp_lane.cuh says why the bits agree): 8 threads per row,
 * lane j taking elements j, j+8, ...; the block amax and the non-finite tests
 * by three XOR shuffles; the block statistics (fp4s_dk_block_stats) the same
 * in all 8 lanes; the lanes summed by XOR shuffles in the CPU's tree. Each
 * row's partial then enters exact fixed-point sums in shared memory (xsum.h
 * digits, 64-bit integer atomics: exact, so their order is free), the
 * histograms shared per warp; each thread block adds its sums into its own
 * slot in global memory, and a last kernel adds the slots. Row and block
 * groups come back as parts (the CPU finishes them as it finishes its own);
 * channel groups come from a second kernel, one thread per column and slice
 * of rows, every element into the column's exact sums (fp4s_chacc_add_elem),
 * the slices then added per column. Host input is taken in pieces of at most
 * 256 MiB, device input in pieces of 2^30 elements (the codes buffer). */
#include "cuda_internal.cuh"
#include "decomp_lane.cuh"

#include <stdlib.h>

namespace {

constexpr int RT = 256;           /* row kernel: 32 rows x 8 lanes */
constexpr int RW = RT / 32;       /* its warps */
constexpr int CT = 128;           /* channel kernel: columns per thread block */

/* A thread block's (or the whole call's) totals. */
struct dtot {
    xacc a;
    unsigned long long hd[FP4S_HIST_BINS], he[FP4S_HIST_BINS];
};
static_assert(sizeof(dtot) % sizeof(unsigned long long) == 0, "dk_tot_init zeroes a slot in 8-byte words");

/* The decomposer's tables, by value. */
struct dtab {
    double seff[256];
    uint8_t uf[256];
    bool tie_up[8];
};

__device__ __forceinline__ void xs_add_shared(unsigned long long *l, unsigned *sp, double v)
{
    int li = 0, neg = 0;
    int64_t d[3];
    uint32_t special = 0;
    if (!xs_split(v, &li, d, &neg, &special)) {
        if (special) atomicOr(sp, special);
        return;
    }
#pragma unroll
    for (int k = 0; k < 3; k++)
        if (d[k]) atomicAdd(&l[li + k], neg ? (unsigned long long)(-d[k]) : (unsigned long long)d[k]);
}

/* Sum the group's 8 lanes into p (the CPU's tree), with the lanes' counts of
 * non-finite inputs; every lane of the group gets the same p. */
__device__ __forceinline__ void reduce_lanes(unsigned gm, cu_dk_lane &ln, uint64_t *nfc, part *p)
{
    double s[S_CH];
#pragma unroll
    for (int k = 0; k < S_CH; k++) {
        double v = ln.l[k];
        v = v + __shfl_xor_sync(gm, v, 1);
        v = v + __shfl_xor_sync(gm, v, 2);
        v = v + __shfl_xor_sync(gm, v, 4);
        s[k] = v;
    }
    uint64_t c[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t v = ln.c[k];
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) v += __shfl_xor_sync(gm, v, o);
        c[k] = v;
    }
    double r = ln.r;
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) r = fmax(r, __shfl_xor_sync(gm, r, o));
    cu_dk_lanes_into(p, s, c, r);
#pragma unroll
    for (int k = 0; k < 3; k++) {
        unsigned long long c = nfc[k];
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) c += __shfl_xor_sync(gm, c, o);
        p->c[C_NAN + k] += c;
        nfc[k] = 0;
    }
    cu_dk_lane_init(&ln);
}

/* BY: 0 totals only (tensor and channel groupings), 1 row parts, 2 block parts. */
template <int BS, int BY>
__global__ void __launch_bounds__(RT)
dk_rows(const dtab tab, const fp4s_cu_params qp, int dt, const void *__restrict__ x, size_t ld,
        const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales, size_t nrows, size_t cols,
        size_t nblk, dtot *__restrict__ slots, part *__restrict__ units)
{
    __shared__ double s_seff[256];
    __shared__ uint8_t s_uf[256];
    __shared__ bool s_tie[8];
    __shared__ unsigned long long s_l[S_N][XS_LIMBS];
    __shared__ unsigned s_sp[S_N];
    /* 32-bit counts: one launch takes at most 2^30 elements (fp4s_cu_decomp's pieces) */
    __shared__ unsigned int s_he[RW][FP4S_HIST_BINS];
    __shared__ unsigned long long s_hd[FP4S_HIST_BINS];
    __shared__ unsigned long long s_c[C_NUM];
    __shared__ dextr s_x[RT / 8];
    for (int i = threadIdx.x; i < 256; i += RT) {
        s_seff[i] = tab.seff[i];
        s_uf[i] = tab.uf[i];
    }
    if (threadIdx.x < 8) s_tie[threadIdx.x] = tab.tie_up[threadIdx.x];
    for (int i = threadIdx.x; i < S_N * XS_LIMBS; i += RT) (&s_l[0][0])[i] = 0ull;
    for (int i = threadIdx.x; i < RW * FP4S_HIST_BINS; i += RT) (&s_he[0][0])[i] = 0u;
    for (int i = threadIdx.x; i < FP4S_HIST_BINS; i += RT) s_hd[i] = 0ull;
    if (threadIdx.x < S_N) s_sp[threadIdx.x] = 0u;
    if (threadIdx.x < C_NUM) s_c[threadIdx.x] = 0ull;
    __syncthreads();

    const int lane = threadIdx.x & 7, grp = threadIdx.x >> 3, warp = threadIdx.x >> 5;
    const unsigned gm = 0xFFu << (threadIdx.x & 24);
    uint64_t tc[C_NUM];
#pragma unroll
    for (int k = 0; k < C_NUM; k++) tc[k] = 0;
    dextr tx;
    fp4s_dextr_init(&tx);
    constexpr int NT = BS / 8;
    for (size_t row = (size_t)blockIdx.x * 32 + grp; row < nrows; row += (size_t)gridDim.x * 32) {
        const uint8_t *cr = codes + row * cols, *sr = scales + row * nblk;
        const size_t xr = row * ld;
        part rowp, bp;
        fp4s_dk_part_init(&rowp);
        cu_dk_lane ln;
        cu_dk_lane_init(&ln);
        uint64_t nfc[3] = {0, 0, 0};
        /* the next block's inputs are loaded before this block is worked on */
        float xn[NT];
        uint8_t cn[NT], scn = sr[0];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            xn[t] = cu_dk_load(x, dt, xr + 8 * t + lane);
            cn[t] = cr[8 * t + lane];
        }
        for (size_t b = 0; b < nblk; b++) {
            part *tp = &rowp;
            if (BY == 2) {
                fp4s_dk_part_init(&bp);
                tp = &bp;
            }
            const uint8_t sc = scn;
            float xf[NT], qf[NT];
            uint8_t cd[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                xf[t] = xn[t];
                cd[t] = cn[t];
            }
            if (b + 1 < nblk) {
                scn = sr[b + 1];
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const size_t i = (b + 1) * BS + 8 * t + lane;
                    xn[t] = cu_dk_load(x, dt, xr + i);
                    cn[t] = cr[i];
                }
            }
            const fp4s_cu_dq dq = cu_deq_block(qp, sc);
            uint32_t mx = 0, mq = 0;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                qf[t] = cu_deq_elem(dq, cd[t]);
                mx = max(mx, cu_dk_abits(xf[t]));
                mq = max(mq, cu_dk_abits(qf[t]));
            }
#pragma unroll
            for (int o = 1; o < 8; o <<= 1) {
                mx = max(mx, __shfl_xor_sync(gm, mx, o));
                mq = max(mq, __shfl_xor_sync(gm, mq, o));
            }
            if (mx >= 0x7f800000u || mq >= 0x7f800000u) {
                if (mx >= 0x7f800000u) tp->c[C_NFB]++;
                else tp->c[C_NFOUT]++;
#pragma unroll
                for (int t = 0; t < NT; t++) nfc[cu_dk_nf_kind(xf[t]) - C_NAN]++;
            } else {
                kconst kc;
                const int hb = fp4s_dk_block_stats(s_seff, s_uf, s_tie, cu_float(mx), sc, tp, &kc);
                if (hb >= 0 && lane == 0) atomicAdd(&s_hd[hb], 1ull);
                tp->c[C_ELEM] += BS;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const int bin = cu_dk_elem(&kc, xf[t], qf[t], cd[t], &ln);
                    if (kc.mpos) atomicAdd(&s_he[warp][bin], 1u);
                }
            }
            if (BY == 2) {
                reduce_lanes(gm, ln, nfc, &bp);
                if (lane == 0) units[row * nblk + b] = bp;
                fp4s_dk_part_add(&rowp, &bp);
            }
        }
        if (BY != 2) reduce_lanes(gm, ln, nfc, &rowp);
        if (BY == 1 && lane == 0) units[row] = rowp;
        /* the row into the exact sums: lane j adds sums 2j and 2j + 1 */
        xs_add_shared(s_l[2 * lane], &s_sp[2 * lane], rowp.s[2 * lane]);
        xs_add_shared(s_l[2 * lane + 1], &s_sp[2 * lane + 1], rowp.s[2 * lane + 1]);
        if (lane == 0) {
#pragma unroll
            for (int k = 0; k < C_NUM; k++) tc[k] += rowp.c[k];
            fp4s_dextr_merge(&tx, &rowp.x);
        }
    }
    if (lane == 0) {
        for (int k = 0; k < C_NUM; k++)
            if (tc[k]) atomicAdd(&s_c[k], (unsigned long long)tc[k]);
        s_x[grp] = tx;
    }
    __syncthreads();
    /* add this block's sums into its slot */
    dtot *sl = &slots[blockIdx.x];
    for (int i = threadIdx.x; i < S_N * XS_LIMBS; i += RT) {
        const int k = i / XS_LIMBS, j = i % XS_LIMBS;
        sl->a.s[k].l[j] = (int64_t)((unsigned long long)sl->a.s[k].l[j] + s_l[k][j]);
    }
    if (threadIdx.x < S_N) sl->a.s[threadIdx.x].special |= s_sp[threadIdx.x];
    if (threadIdx.x < C_NUM) sl->a.c[threadIdx.x] += s_c[threadIdx.x];
    for (int i = threadIdx.x; i < FP4S_HIST_BINS; i += RT) {
        unsigned long long h = 0;
        for (int w = 0; w < RW; w++) h += s_he[w][i];
        sl->he[i] += h;
        sl->hd[i] += s_hd[i];
    }
    if (threadIdx.x == 0)
        for (int g = 0; g < RT / 8; g++) fp4s_dextr_merge(&sl->a.x, &s_x[g]);
}

/* Channel groups: thread = column c, blockIdx.y = slice of rows; the block
 * amax by XOR shuffles over the block's BS columns (whole blocks per warp:
 * BS divides 32 and cols). Adds into cpart[slice][c]. */
template <int BS>
__global__ void __launch_bounds__(CT)
dk_chan(const dtab tab, const fp4s_cu_params qp, int dt, const void *__restrict__ x, size_t ld,
        const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales, size_t nrows, size_t cols,
        size_t nblk, size_t slice_rows, chacc *__restrict__ cpart)
{
    __shared__ uint8_t s_uf[256];
    __shared__ bool s_tie[8];
    for (int i = threadIdx.x; i < 256; i += CT) s_uf[i] = tab.uf[i];
    if (threadIdx.x < 8) s_tie[threadIdx.x] = tab.tie_up[threadIdx.x];
    __syncthreads();
    const size_t c = (size_t)blockIdx.x * CT + threadIdx.x;
    if (c >= cols) return; /* whole groups of BS lanes */
    const unsigned gm = BS == 32 ? 0xFFFFFFFFu : (0xFFFFu << (threadIdx.x & 16));
    chacc *dst = &cpart[(size_t)blockIdx.y * cols + c];
    chacc acc = *dst;
    const size_t r0 = (size_t)blockIdx.y * slice_rows;
    const size_t r1 = r0 + slice_rows < nrows ? r0 + slice_rows : nrows;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t sc = scales[r * nblk + c / BS];
        const uint8_t code = codes[r * cols + c];
        const float xf = cu_dk_load(x, dt, r * ld + c);
        const float qf = cu_deq(qp, sc, code);
        uint32_t mx = cu_dk_abits(xf), mq = cu_dk_abits(qf);
#pragma unroll
        for (int o = 1; o < BS; o <<= 1) {
            mx = max(mx, __shfl_xor_sync(gm, mx, o));
            mq = max(mq, __shfl_xor_sync(gm, mq, o));
        }
        if (mx >= 0x7f800000u || mq >= 0x7f800000u) {
            acc.c[cu_dk_nf_kind(xf)]++;
            continue;
        }
        const float m = cu_float(mx);
        kconst kc;
        fp4s_decomp_kconst(m, s_uf[sc] && m != 0.0f, s_tie, &kc);
        fp4s_chacc_add_elem(&acc, &kc, s_tie, xf, qf, code);
    }
    for (int k = 0; k < S_CH; k++) xs_norm(&acc.s[k]);
    *dst = acc;
}

/* Add the slices of every column: out[c] = sum over s of cpart[s][c]. */
__global__ void dk_chan_sum(const chacc *__restrict__ cpart, size_t slices, size_t cols, chacc *__restrict__ out)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cols * S_CH * XS_LIMBS) return;
    const size_t c = i / (S_CH * XS_LIMBS), k = (i / XS_LIMBS) % S_CH, j = i % XS_LIMBS;
    unsigned long long v = 0;
    uint32_t sp = 0;
    for (size_t s = 0; s < slices; s++) {
        v += (unsigned long long)cpart[s * cols + c].s[k].l[j];
        sp |= cpart[s * cols + c].s[k].special;
    }
    out[c].s[k].l[j] = (int64_t)v;
    if (j == 0) {
        out[c].s[k].special = sp;
        out[c].s[k].adds = 0;
    }
    if (k == 0 && j == 0) {
        uint64_t cc[C_CH];
        for (int q = 0; q < C_CH; q++) cc[q] = 0;
        double am = 0.0, rs = 0.0;
        for (size_t s = 0; s < slices; s++) {
            const chacc *p = &cpart[s * cols + c];
            for (int q = 0; q < C_CH; q++) cc[q] += p->c[q];
            am = p->amax > am ? p->amax : am;
            rs = p->res > rs ? p->res : rs;
        }
        for (int q = 0; q < C_CH; q++) out[c].c[q] = cc[q];
        out[c].amax = am;
        out[c].res = rs;
    }
}

/* Add the slots into slots[0]: every word of slot 0 is its own sum (any
 * number of thread blocks, a grid-stride loop); the extremes, which merge in
 * order, by the first thread. */
__global__ void dk_tot_sum(dtot *slots, unsigned n)
{
    const int t0 = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
    for (int i = t0; i < S_N * XS_LIMBS; i += nt) {
        const int k = i / XS_LIMBS, j = i % XS_LIMBS;
        unsigned long long v = 0;
        for (unsigned s = 1; s < n; s++) v += (unsigned long long)slots[s].a.s[k].l[j];
        slots[0].a.s[k].l[j] = (int64_t)((unsigned long long)slots[0].a.s[k].l[j] + v);
    }
    for (int k = t0; k < S_N; k += nt) {
        uint32_t sp = slots[0].a.s[k].special;
        for (unsigned s = 1; s < n; s++) sp |= slots[s].a.s[k].special;
        slots[0].a.s[k].special = sp;
        slots[0].a.s[k].adds = 0;
    }
    for (int k = t0; k < C_NUM; k += nt) {
        uint64_t v = slots[0].a.c[k];
        for (unsigned s = 1; s < n; s++) v += slots[s].a.c[k];
        slots[0].a.c[k] = v;
    }
    for (int i = t0; i < FP4S_HIST_BINS; i += nt) {
        unsigned long long d = slots[0].hd[i], e = slots[0].he[i];
        for (unsigned s = 1; s < n; s++) {
            d += slots[s].hd[i];
            e += slots[s].he[i];
        }
        slots[0].hd[i] = d;
        slots[0].he[i] = e;
    }
    if (t0 == 0)
        for (unsigned s = 1; s < n; s++) fp4s_dextr_merge(&slots[0].a.x, &slots[s].a.x);
}

/* Initial slot: empty sums, extremes at their identities. */
__global__ void dk_tot_init(dtot *slots)
{
    /* one thread block a slot, its words zeroed by all its threads (a slot is
     * some kilobytes: one thread's memset of it took 0.8 ms for 512 slots) */
    dtot *d = &slots[blockIdx.x];
    unsigned long long *w = reinterpret_cast<unsigned long long *>(d);
    for (size_t i = threadIdx.x; i < sizeof(dtot) / sizeof *w; i += blockDim.x) w[i] = 0;
    __syncthreads();
    if (threadIdx.x == 0) fp4s_dextr_init(&d->a.x);
}

template <int BS>
void launch_rows(int by, unsigned grid, cudaStream_t st, const dtab &tab, const fp4s_cu_params &qp, int dt,
                 const void *x, size_t ld, const uint8_t *codes, const uint8_t *scales, size_t n, size_t cols,
                 size_t nblk, dtot *slots, part *units)
{
    if (by == FP4S_GROUP_ROW)
        dk_rows<BS, 1><<<grid, RT, 0, st>>>(tab, qp, dt, x, ld, codes, scales, n, cols, nblk, slots, units);
    else if (by == FP4S_GROUP_BLOCK)
        dk_rows<BS, 2><<<grid, RT, 0, st>>>(tab, qp, dt, x, ld, codes, scales, n, cols, nblk, slots, units);
    else
        dk_rows<BS, 0><<<grid, RT, 0, st>>>(tab, qp, dt, x, ld, codes, scales, n, cols, nblk, slots, units);
}

} // namespace

/* ---- one decomposition's device state (dctx): its buffers, enqueued pieces ---- */

namespace {

struct dctx {
    fp4s_cu_dk k;
    fp4s_cu_params qp;
    dtab tab;
    fp4s_dtype dtype;
    int dt;
    size_t piece, nunit, slices, slice_rows;
    unsigned grid;
    bool chan;
    cudaStream_t st;
    uint8_t *dc, *ds;
    dtot *slots;
    part *du;
    chacc *cp, *co;
};

void dctx_free(dctx *c)
{
    cudaFree(c->dc);
    cudaFree(c->ds);
    cudaFree(c->slots);
    cudaFree(c->du);
    cudaFree(c->cp);
    cudaFree(c->co);
    c->dc = c->ds = nullptr;
    c->slots = nullptr;
    c->du = nullptr;
    c->cp = c->co = nullptr;
}

/* Buffers for pieces of at most piece rows (whole 16-row tiles), the totals'
 * slots zeroed on st. */
int dctx_open(dctx *c, const fp4s_cu_dk *k, fp4s_dtype dtype, size_t piece, cudaStream_t st)
{
    memset(c, 0, sizeof *c);
    int rc = fp4s_cu_prepare(&k->spec, &k->ts, piece, k->cols, &c->qp);
    if (rc) return rc;
    c->dt = fp4s_cu_dtype(dtype, "decompose");
    if (c->dt < 0) return c->dt;
    if (!fp4s_cuda_available()) return fp4s_error_set(FP4S_ENOTSUP, "cuda: decompose: no usable GPU");
    c->k = *k;
    c->dtype = dtype;
    c->st = st;
    const size_t cols = k->cols, nblk = k->nblk;
    c->piece = piece;
    memcpy(c->tab.seff, k->seff, sizeof c->tab.seff);
    memcpy(c->tab.uf, k->uf, sizeof c->tab.uf);
    memcpy(c->tab.tie_up, k->tie_up, sizeof c->tab.tie_up);
    c->grid = fp4s_cu_grid((piece + 31) / 32 * RT, RT);
    c->chan = k->by == FP4S_GROUP_CHANNEL;
    c->nunit = k->by == FP4S_GROUP_ROW ? 1 : (k->by == FP4S_GROUP_BLOCK ? nblk : 0);
    /* channel slices: about 2^18 threads in all */
    c->slices = c->chan ? ((size_t)1 << 18) / cols : 0;
    if (c->chan && c->slices < 1) c->slices = 1;
    if (c->chan && c->slices > (piece + 15) / 16) c->slices = (piece + 15) / 16;
    c->slice_rows = c->chan ? (piece + c->slices - 1) / c->slices : 0;
    cudaGetLastError(); /* a stale error from an earlier call */
    cudaError_t e = cudaMalloc((void **)&c->dc, piece * cols);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->ds, piece * nblk);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->slots, c->grid * sizeof(dtot));
    if (e == cudaSuccess && c->nunit) e = cudaMalloc((void **)&c->du, piece * c->nunit * sizeof(part));
    if (e == cudaSuccess && c->chan) e = cudaMalloc((void **)&c->cp, c->slices * cols * sizeof(chacc));
    if (e == cudaSuccess && c->chan) e = cudaMalloc((void **)&c->co, cols * sizeof(chacc));
    if (e == cudaSuccess && c->chan) e = cudaMemsetAsync(c->cp, 0, c->slices * cols * sizeof(chacc), st);
    if (e == cudaSuccess) {
        dk_tot_init<<<c->grid, 256, 0, st>>>(c->slots);
        e = cudaGetLastError();
    }
    if (e != cudaSuccess) {
        rc = fp4s_cu_fail(e, "decompose: buffers");
        cudaStreamSynchronize(st);
        dctx_free(c);
    }
    return rc;
}

/* Rows [0, n) (n <= piece) of device x (stride ld) decomposed on the stream,
 * into the totals and channel slices; the row or block parts go to units
 * (host memory, n * nunit parts) by an asynchronous copy. */
int dctx_enqueue(dctx *c, const void *xp, size_t ld, size_t n, part *units)
{
    const size_t cols = c->k.cols, nblk = c->k.nblk;
    int rc = fp4s_cuda_quantize_ex(&c->k.spec, &c->k.ts, c->dtype, xp, n, cols, ld, false, c->dc, c->ds, c->st);
    if (rc) return rc;
    if (c->k.bs == 32)
        launch_rows<32>(c->k.by, c->grid, c->st, c->tab, c->qp, c->dt, xp, ld, c->dc, c->ds, n, cols, nblk, c->slots,
                        c->du);
    else
        launch_rows<16>(c->k.by, c->grid, c->st, c->tab, c->qp, c->dt, xp, ld, c->dc, c->ds, n, cols, nblk, c->slots,
                        c->du);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && c->chan) {
        const size_t sl = (n + c->slice_rows - 1) / c->slice_rows;
        const dim3 cg((unsigned)((cols + CT - 1) / CT), (unsigned)sl);
        if (c->k.bs == 32)
            dk_chan<32><<<cg, CT, 0, c->st>>>(c->tab, c->qp, c->dt, xp, ld, c->dc, c->ds, n, cols, nblk,
                                              c->slice_rows, c->cp);
        else
            dk_chan<16><<<cg, CT, 0, c->st>>>(c->tab, c->qp, c->dt, xp, ld, c->dc, c->ds, n, cols, nblk,
                                              c->slice_rows, c->cp);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess && c->nunit)
        e = cudaMemcpyAsync(units, c->du, n * c->nunit * sizeof(part), cudaMemcpyDeviceToHost, c->st);
    return e == cudaSuccess ? 0 : fp4s_cu_fail(e, "decompose");
}

/* The totals, histograms and channel groups of everything enqueued, into out
 * (tot and histograms overwritten, channels into out->ch). Synchronises. */
int dctx_finish(dctx *c, fp4s_cu_dk_out *out)
{
    dk_tot_sum<<<32, 256, 0, c->st>>>(c->slots, c->grid);
    cudaError_t e = cudaGetLastError();
    dtot *ht = static_cast<dtot *>(malloc(sizeof(dtot)));
    if (!ht) {
        cudaStreamSynchronize(c->st);
        return fp4s_error_set(FP4S_ENOMEM, "cuda: decompose: out of memory");
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(ht, c->slots, sizeof(dtot), cudaMemcpyDeviceToHost, c->st);
    if (e == cudaSuccess && c->chan) {
        const size_t nt = c->k.cols * S_CH * XS_LIMBS;
        dk_chan_sum<<<(unsigned)((nt + 255) / 256), 256, 0, c->st>>>(c->cp, c->slices, c->k.cols, c->co);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(out->ch, c->co, c->k.cols * sizeof(chacc), cudaMemcpyDeviceToHost, c->st);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
    if (e == cudaSuccess) {
        out->tot = ht->a;
        for (int i = 0; i < FP4S_HIST_BINS; i++) {
            out->hd[i] = ht->hd[i];
            out->he[i] = ht->he[i];
        }
    }
    free(ht);
    if (e != cudaSuccess) {
        cudaStreamSynchronize(c->st);
        return fp4s_cu_fail(e, "decompose");
    }
    return 0;
}

} // namespace

int fp4s_cu_decomp(const fp4s_cu_dk *k, fp4s_dtype dtype, const void *x, bool x_host, size_t nrows, size_t ld,
                   fp4s_cu_dk_out *out, void *stream)
{
    if (nrows >= ((size_t)1 << 31))
        return fp4s_error_set(FP4S_ERANGE, "cuda: decompose: %zu rows in one call (at most 2^31 - 1)", nrows);
    const int dt = fp4s_cu_dtype(dtype, "decompose");
    if (dt < 0) return dt;
    const size_t cols = k->cols, esz = dt == CU_DT_F32 ? 4 : 2;
    if (nrows == 0 || cols == 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    /* pieces of whole 16-row tiles: at most 256 MiB of host input at a time
     * (copied in), or 2^30 elements of device input (the codes buffer) */
    size_t piece = x_host ? ((size_t)256 << 20) / (cols * esz) : ((size_t)1 << 30) / cols;
    piece -= piece % 16;
    if (piece < 16) piece = 16;
    if (piece > nrows) piece = nrows;
    dctx c;
    int rc = dctx_open(&c, k, dtype, piece, st);
    if (rc) return rc;
    void *dx = nullptr;
    cudaError_t e = x_host ? cudaMalloc(&dx, piece * cols * esz) : cudaSuccess;
    for (size_t p0 = 0; p0 < nrows && e == cudaSuccess && rc == 0; p0 += piece) {
        const size_t n = nrows - p0 < piece ? nrows - p0 : piece;
        const void *xp;
        size_t ldp;
        if (x_host) {
            e = cudaMemcpy2DAsync(dx, cols * esz, static_cast<const char *>(x) + p0 * ld * esz, ld * esz,
                                  cols * esz, n, cudaMemcpyHostToDevice, st);
            xp = dx;
            ldp = cols;
        } else {
            xp = static_cast<const char *>(x) + p0 * ld * esz;
            ldp = ld;
        }
        if (e != cudaSuccess) break;
        rc = dctx_enqueue(&c, xp, ldp, n, out->units ? out->units + p0 * c.nunit : nullptr);
    }
    if (e != cudaSuccess && rc == 0) rc = fp4s_cu_fail(e, "decompose");
    if (rc == 0) rc = dctx_finish(&c, out);
    else cudaStreamSynchronize(st); /* nothing in flight uses the buffers */
    cudaFree(dx);
    dctx_free(&c);
    return rc;
}

/* ---- the streaming session (decomp_cu.h): pinned slots, two streams ---- */

struct gds_state { /* behind fp4s_cu_ds */
    bool keep;          /* pass 1: rows kept on the device, their amax */
    int dt;
    size_t esz, cols, chunk_rows, keep_row0, keep_rows;
    int nslots;
    cudaStream_t cst, st; /* copies, compute */
    void *pin[FP4S_CU_DS_SLOTS];
    void *dx[FP4S_CU_DS_SLOTS];
    part *upin[FP4S_CU_DS_SLOTS];
    cudaEvent_t used[FP4S_CU_DS_SLOTS], copied[FP4S_CU_DS_SLOTS];
    bool busy[FP4S_CU_DS_SLOTS];
    size_t n[FP4S_CU_DS_SLOTS], r0[FP4S_CU_DS_SLOTS];
    dctx c;
    bool have_c;
    char *kept;             /* keep: the rows [keep_row0, keep_row0 + keep_rows) */
    unsigned int *d_amax;   /* keep: amax bits, then the NaN/Inf count (8-byte aligned) */
};

namespace {

void ds_close(fp4s_cu_ds **ps)
{
    gds_state *s = ps ? reinterpret_cast<gds_state *>(*ps) : nullptr;
    if (!s) return;
    if (s->st) cudaStreamSynchronize(s->st);
    if (s->cst) cudaStreamSynchronize(s->cst);
    for (int i = 0; i < FP4S_CU_DS_SLOTS; i++) {
        cudaFreeHost(s->pin[i]);
        cudaFreeHost(s->upin[i]);
        cudaFree(s->dx[i]);
        if (s->used[i]) cudaEventDestroy(s->used[i]);
        if (s->copied[i]) cudaEventDestroy(s->copied[i]);
    }
    if (s->have_c) dctx_free(&s->c);
    cudaFree(s->kept);
    cudaFree(s->d_amax);
    if (s->st) cudaStreamDestroy(s->st);
    if (s->cst) cudaStreamDestroy(s->cst);
    free(s);
    *ps = nullptr;
    cudaGetLastError();
}

int ds_open(const fp4s_cu_dk *k, fp4s_dtype dtype, size_t chunk_rows, size_t keep_row0, size_t keep_rows,
            fp4s_cu_ds **out)
{
    *out = nullptr;
    const int dt = fp4s_cu_dtype(dtype, "decompose");
    if (dt < 0) return dt;
    if (!fp4s_cuda_available()) return fp4s_error_set(FP4S_ENOTSUP, "cuda: decompose: no usable GPU");
    gds_state *s = static_cast<gds_state *>(calloc(1, sizeof *s));
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "cuda: decompose: out of memory");
    s->keep = keep_rows > 0;
    s->dt = dt;
    s->esz = dt == CU_DT_F32 ? 4 : 2;
    s->cols = k->cols;
    s->chunk_rows = chunk_rows;
    s->keep_row0 = keep_row0;
    s->keep_rows = keep_rows;
    s->nslots = FP4S_CU_DS_SLOTS;
    const size_t bytes = chunk_rows * s->cols * s->esz;
    cudaGetLastError();
    cudaError_t e = cudaStreamCreateWithFlags(&s->cst, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking);
    int rc = 0;
    if (e == cudaSuccess && !s->keep) {
        rc = dctx_open(&s->c, k, dtype, chunk_rows, s->st);
        s->have_c = rc == 0;
    }
    for (int i = 0; i < s->nslots && e == cudaSuccess && rc == 0; i++) {
        e = cudaHostAlloc(&s->pin[i], bytes, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->used[i], cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->copied[i], cudaEventDisableTiming);
        if (e == cudaSuccess && !s->keep) e = cudaMalloc(&s->dx[i], bytes);
        if (e == cudaSuccess && !s->keep && s->c.nunit)
            e = cudaHostAlloc((void **)&s->upin[i], chunk_rows * s->c.nunit * sizeof(part), cudaHostAllocDefault);
    }
    if (e == cudaSuccess && rc == 0 && s->keep) {
        /* the kept rows, and room left for the decomposition of them (its
         * codes of up to 2^30 elements, parts, channel slices) */
        size_t fr = 0, tot = 0;
        const size_t kb = keep_rows * s->cols * s->esz;
        e = cudaMemGetInfo(&fr, &tot);
        if (e == cudaSuccess && kb + ((size_t)3 << 30) > fr)
            rc = fp4s_error_set(FP4S_ENOMEM, "cuda: decompose: %zu MiB of rows do not fit in %zu MiB free",
                                kb >> 20, fr >> 20);
    }
    if (e == cudaSuccess && rc == 0 && s->keep) {
        e = cudaMalloc((void **)&s->kept, keep_rows * s->cols * s->esz);
        if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_amax, 16);
        if (e == cudaSuccess) e = cudaMemsetAsync(s->d_amax, 0, 16, s->st);
    }
    if (e != cudaSuccess && rc == 0) rc = fp4s_cu_fail(e, "decompose: pinned and device buffers");
    if (rc) {
        fp4s_cu_ds *p = reinterpret_cast<fp4s_cu_ds *>(s);
        ds_close(&p);
        return rc;
    }
    *out = reinterpret_cast<fp4s_cu_ds *>(s);
    return 0;
}

void *ds_slot(fp4s_cu_ds *h, int i) { gds_state *s = reinterpret_cast<gds_state *>(h); return s->pin[i]; }

int ds_wait(fp4s_cu_ds *h, int i, const part **units, size_t *n, size_t *row0)
{
    gds_state *s = reinterpret_cast<gds_state *>(h);
    *units = nullptr;
    *n = 0;
    *row0 = 0;
    if (!s->busy[i]) return 0;
    cudaError_t e = cudaEventSynchronize(s->used[i]);
    s->busy[i] = false;
    if (e != cudaSuccess) return fp4s_cu_fail(e, "decompose");
    if (!s->keep && s->c.nunit) {
        *units = s->upin[i];
        *n = s->n[i];
        *row0 = s->r0[i];
    }
    return 0;
}

int ds_submit(fp4s_cu_ds *h, int i, size_t n, size_t row0)
{
    gds_state *s = reinterpret_cast<gds_state *>(h);
    if (s->busy[i] || n > s->chunk_rows || (s->keep && (row0 < s->keep_row0 || row0 - s->keep_row0 + n > s->keep_rows)))
        return fp4s_error_set(FP4S_EINTERNAL, "cuda: decompose: slot %d misused", i);
    const size_t bytes = n * s->cols * s->esz;
    void *dst = s->keep ? s->kept + (row0 - s->keep_row0) * s->cols * s->esz : s->dx[i];
    /* the slot's device rows are free once the compute stream is past its last use */
    cudaError_t e = cudaStreamWaitEvent(s->cst, s->used[i], 0);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, s->pin[i], bytes, cudaMemcpyHostToDevice, s->cst);
    if (e == cudaSuccess) e = cudaEventRecord(s->copied[i], s->cst);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(s->st, s->copied[i], 0);
    int rc = 0;
    if (e == cudaSuccess) {
        if (s->keep) {
            fp4s_cu_amax_async(s->dt, dst, n, s->cols, s->cols, s->d_amax,
                               reinterpret_cast<unsigned long long *>(s->d_amax + 2), s->st);
            e = cudaGetLastError();
        } else {
            rc = dctx_enqueue(&s->c, dst, s->cols, n, s->upin[i]);
        }
    }
    if (e == cudaSuccess && rc == 0) e = cudaEventRecord(s->used[i], s->st);
    if (e != cudaSuccess && rc == 0) rc = fp4s_cu_fail(e, "decompose");
    if (rc) return rc;
    s->busy[i] = true;
    s->n[i] = n;
    s->r0[i] = row0;
    return 0;
}

int ds_finish(fp4s_cu_ds *h, fp4s_cu_dk_out *out)
{
    gds_state *s = reinterpret_cast<gds_state *>(h);
    for (int i = 0; i < s->nslots; i++)
        if (s->busy[i]) return fp4s_error_set(FP4S_EINTERNAL, "cuda: decompose: slot %d not waited for", i);
    if (s->keep) return fp4s_error_set(FP4S_EINTERNAL, "cuda: decompose: finish of a keeping session");
    return dctx_finish(&s->c, out);
}

int ds_amax(fp4s_cu_ds *h, float *amax, const void **kept)
{
    gds_state *s = reinterpret_cast<gds_state *>(h);
    unsigned int r[4] = {0, 0, 0, 0};
    cudaError_t e = cudaMemcpyAsync(r, s->d_amax, 16, cudaMemcpyDeviceToHost, s->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s->st);
    if (e != cudaSuccess) return fp4s_cu_fail(e, "decompose: amax");
    memcpy(amax, &r[0], sizeof *amax);
    *kept = s->kept;
    return 0;
}

} // namespace

extern "C" const fp4s_cu_ds_ops fp4s_cu_ds_gpu = {false, ds_open, ds_slot, ds_submit, ds_wait, ds_finish, ds_amax,
                                                  ds_close};
