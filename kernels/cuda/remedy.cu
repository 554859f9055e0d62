/* The remedies on the GPU (remedy_cu.h): rac's compensation kernels, their
 * host emulation, and the GEMMs through cuBLAS.
 *
 * rac, one call: x and x^ go to the device; kernel 1 (one thread per channel
 * and slice of RS rows of a tile, neighbouring threads on neighbouring
 * channels, so loads coalesce) adds each ((double)x - (double)x^)^2 into a
 * private exact accumulator (base/xsum.h) and adds its limbs into the
 * channel's with 64-bit integer atomics (exact, so the order is free);
 * kernel 2 rounds each channel's sum once (xs_value: the same double as the
 * CPU's); kernel 3 gives each candidate channel its rank, the number of
 * candidates before it in the order "larger norm first, ties to the lower
 * index" (shared-memory tiles of the norms); kernel 4 writes I per tile (in
 * rank order by rank, in index order by a block-wide prefix count of the
 * selected); kernel 5 gathers E_I (a float32 subtraction, as on the CPU),
 * zero beyond sel. The host emulation runs the same device functions in
 * loops. */
#include "cuda_internal.cuh"
#include "remedy_cu.h"

#include "base/xsum.h"
#include "fp4s_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if FP4S_HAVE_CUBLAS
#include "base/dl.h"

#include <cublas_v2.h>
#include <mutex>
#endif

#define CU_STR2(x) #x
#define CU_STR(x) CU_STR2(x)

namespace {

#if FP4S_HAVE_CUBLAS
/* cuBLAS, opened on first use (libfp4scope does not link it: it is 500 MB
 * with cublasLt, which every tool would load at start). */
struct blas_api {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetMathMode) set_math;
    decltype(&cublasSetAtomicsMode) set_atomics;
    decltype(&cublasSgemm_v2) sgemm;
    decltype(&cublasDgemm_v2) dgemm;
    decltype(&cublasGetStatusString) status;
};
blas_api g_blas;
bool g_blas_ok;
char g_blas_err[400];
std::once_flag g_blas_once;

void blas_load()
{
    const char *names[] = {FP4S_CUBLAS_PATH, "libcublas.so." CU_STR(CUBLAS_VER_MAJOR), "libcublas.so"};
    const char *sym[8] = {"cublasCreate_v2",     "cublasDestroy_v2", "cublasSetStream_v2", "cublasSetMathMode",
                          "cublasSetAtomicsMode", "cublasSgemm_v2",   "cublasDgemm_v2",     "cublasGetStatusString"};
    void *p[8];
    if (fp4s_dl_load("cuBLAS", names, 3, sym, 8, 8, p, g_blas_err, sizeof g_blas_err)) return;
    memcpy(&g_blas.create, &p[0], sizeof p[0]);
    memcpy(&g_blas.destroy, &p[1], sizeof p[1]);
    memcpy(&g_blas.set_stream, &p[2], sizeof p[2]);
    memcpy(&g_blas.set_math, &p[3], sizeof p[3]);
    memcpy(&g_blas.set_atomics, &p[4], sizeof p[4]);
    memcpy(&g_blas.sgemm, &p[5], sizeof p[5]);
    memcpy(&g_blas.dgemm, &p[6], sizeof p[6]);
    memcpy(&g_blas.status, &p[7], sizeof p[7]);
    g_blas_ok = true;
}

/* cuBLAS usable: loaded, else *why (may be NULL) says why not. */
bool blas_ready(const char **why)
{
    std::call_once(g_blas_once, blas_load);
    if (why) *why = g_blas_ok ? nullptr : g_blas_err;
    return g_blas_ok;
}
#endif

constexpr size_t RS = 64;      /* rows per norm slice */
constexpr int NT = 128;        /* threads of the norm, final, gather kernels */
constexpr int KT = 256;        /* rank kernel: candidates per shared tile */
constexpr int CT = 1024;       /* compaction: threads per tile */

/* ---- the arithmetic, host and device -------------------------------------------------- */

struct rjob {
    const float *xa, *xq;
    size_t ldx, m, k, trows, tiles, sel, pad, spt; /* spt: slices per tile */
};

__host__ __device__ inline size_t tile_end(const rjob &j, size_t t)
{
    size_t e = (t + 1) * j.trows;
    return e < j.m ? e : j.m;
}

/* Item it of the norm pass: channel c, tile t, rows [r0, r1) (maybe empty). */
__host__ __device__ inline void norm_item(const rjob &j, size_t it, size_t *c, size_t *t, size_t *r0, size_t *r1)
{
    *c = it % j.k;
    const size_t g = it / j.k;
    *t = g / j.spt;
    const size_t s = g % j.spt, te = tile_end(j, *t);
    *r0 = *t * j.trows + s * RS;
    size_t e = *r0 + RS;
    *r1 = e < te ? e : te;
    if (*r0 > *r1) *r0 = *r1;
}

/* The exact sum of the squared residuals of channel c over rows [r0, r1). */
__host__ __device__ inline void norm_slice(const rjob &j, size_t c, size_t r0, size_t r1, xsum *acc)
{
    memset(acc, 0, sizeof *acc);
    for (size_t i = r0; i < r1; i++) {
        const double d = (double)j.xa[i * j.ldx + c] - (double)j.xq[i * j.k + c];
        xs_add(acc, d * d);
    }
    xs_norm(acc);
}

/* Candidate a comes before candidate b: the CPU's order of rac (cmp_chan). */
__host__ __device__ inline bool before(double ea, size_t a, double eb, size_t b)
{
    return ea > eb || (ea == eb && a < b);
}

/* The norm of channel c from its added limbs. */
__host__ __device__ inline double norm_value(const unsigned long long *limbs, unsigned special)
{
    xsum s;
    for (int i = 0; i < XS_LIMBS; i++) s.l[i] = (int64_t)limbs[i];
    s.adds = 0;
    s.special = special;
    return xs_value(&s);
}

/* ---- kernels ------------------------------------------------------------------------------ */

__global__ void k_norms(rjob j, unsigned long long *limbs, unsigned *special)
{
    const size_t n = j.tiles * j.spt * j.k;
    for (size_t it = blockIdx.x * (size_t)blockDim.x + threadIdx.x; it < n; it += (size_t)gridDim.x * blockDim.x) {
        size_t c, t, r0, r1;
        norm_item(j, it, &c, &t, &r0, &r1);
        if (r0 == r1) continue;
        xsum acc;
        norm_slice(j, c, r0, r1, &acc);
        unsigned long long *l = limbs + (t * j.k + c) * XS_LIMBS;
        for (int i = 0; i < XS_LIMBS; i++)
            if (acc.l[i]) atomicAdd(&l[i], (unsigned long long)acc.l[i]);
        if (acc.special) atomicOr(&special[t * j.k + c], acc.special);
    }
}

__global__ void k_final(size_t n, const unsigned long long *limbs, const unsigned *special, double *e2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        e2[i] = norm_value(limbs + i * XS_LIMBS, special[i]);
}

/* rank[t k + c]: the candidates of tile t before c, or UINT_MAX for a channel
 * that is no candidate. Tile t0 + blockIdx.y. */
__global__ void k_rank(size_t k, size_t t0, const double *e2, const uint8_t *cand, unsigned *rank)
{
    __shared__ double se[KT];
    __shared__ uint8_t sm[KT];
    const size_t t = t0 + blockIdx.y;
    const double *e = e2 + t * k;
    const uint8_t *m = cand + t * k;
    const size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const bool mine = c < k && m[c];
    const double ec = c < k ? e[c] : 0.0;
    unsigned r = 0;
    for (size_t b = 0; b < k; b += KT) {
        __syncthreads();
        for (size_t i = threadIdx.x; i < KT; i += blockDim.x) {
            se[i] = b + i < k ? e[b + i] : 0.0;
            sm[i] = b + i < k ? m[b + i] : 0;
        }
        __syncthreads();
        if (mine) {
            const size_t lim = k - b < (size_t)KT ? k - b : (size_t)KT;
            for (size_t i = 0; i < lim; i++) r += sm[i] && before(se[i], b + i, ec, c);
        }
    }
    if (c < k) rank[t * k + c] = mine ? r : UINT_MAX;
}

/* I of tile blockIdx.x: rank order by rank; index order by the count of
 * selected channels below each (per-thread runs, a prefix over the block). */
__global__ void k_compact(size_t k, size_t sel, bool rank_order, const unsigned *rank, unsigned *idx)
{
    __shared__ unsigned cnt[CT];
    const size_t t = blockIdx.x;
    const unsigned *rk = rank + t * k;
    unsigned *out = idx + t * sel;
    const size_t per = (k + CT - 1) / CT, c0 = threadIdx.x * per, c1 = c0 + per < k ? c0 + per : k;
    if (rank_order) {
        for (size_t c = c0; c < c1; c++)
            if (rk[c] < sel) out[rk[c]] = (unsigned)c;
        return;
    }
    unsigned n = 0;
    for (size_t c = c0; c < c1; c++) n += rk[c] < sel;
    cnt[threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = 0;
        for (int i = 0; i < CT; i++) {
            const unsigned v = cnt[i];
            cnt[i] = s;
            s += v;
        }
    }
    __syncthreads();
    unsigned p = cnt[threadIdx.x];
    for (size_t c = c0; c < c1; c++)
        if (rk[c] < sel) out[p++] = (unsigned)c;
}

__host__ __device__ inline float gather_one(const rjob &j, const unsigned *idx, size_t it)
{
    const size_t i = it / j.pad, p = it % j.pad;
    if (p >= j.sel) return 0.0f;
    const size_t c = idx[(i / j.trows) * j.sel + p];
    return j.xa[i * j.ldx + c] - j.xq[i * j.k + c];
}

__global__ void k_gather(rjob j, const unsigned *idx, float *ec)
{
    const size_t n = j.m * j.pad;
    for (size_t it = blockIdx.x * (size_t)blockDim.x + threadIdx.x; it < n; it += (size_t)gridDim.x * blockDim.x)
        ec[it] = gather_one(j, idx, it);
}

/* ---- the job ---------------------------------------------------------------------------- */

int check_job(const fp4s_cu_rac_job *jb, const fp4s_cu_rac_out *o, rjob *j)
{
    if (!jb || !o || !o->idx || !o->ec || (jb->m && (!jb->xa || !jb->xq)))
        return fp4s_error_set(FP4S_EINVAL, "cuda: rac: NULL argument");
    memset(j, 0, sizeof *j);
    if (jb->m == 0) return 0;
    if (jb->k == 0 || jb->sel == 0 || jb->sel > jb->k || jb->pad < jb->sel || jb->trows == 0 || jb->ldx < jb->k ||
        jb->tiles != (jb->m + jb->trows - 1) / jb->trows)
        return fp4s_error_set(FP4S_EINVAL, "cuda: rac: inconsistent job (m %zu, k %zu, tile rows %zu, %zu tiles, "
                              "sel %zu, pad %zu)", jb->m, jb->k, jb->trows, jb->tiles, jb->sel, jb->pad);
    if (jb->k >= UINT_MAX || jb->m > ((size_t)-1) / 16 / (jb->pad > jb->ldx ? jb->pad : jb->ldx))
        return fp4s_error_set(FP4S_ERANGE, "cuda: rac: [%zu x %zu] is too large", jb->m, jb->k);
    if (jb->cand)
        for (size_t i = 0; i < jb->tiles * jb->sel; i++)
            if (jb->cand[i] >= jb->k)
                return fp4s_error_set(FP4S_EINVAL, "cuda: rac: candidate channel %zu >= K = %zu", jb->cand[i],
                                      jb->k);
    j->xa = jb->xa;
    j->xq = jb->xq;
    j->ldx = jb->ldx;
    j->m = jb->m;
    j->k = jb->k;
    j->trows = jb->trows;
    j->tiles = jb->tiles;
    j->sel = jb->sel;
    j->pad = jb->pad;
    j->spt = (jb->trows + RS - 1) / RS;
    return 0;
}

/* The candidate masks [tiles * k] (all, or the given sets). */
uint8_t *make_mask(const fp4s_cu_rac_job *jb)
{
    const size_t n = jb->tiles * jb->k;
    uint8_t *m = static_cast<uint8_t *>(malloc(n ? n : 1));
    if (!m) return nullptr;
    memset(m, jb->cand ? 0 : 1, n);
    if (jb->cand)
        for (size_t t = 0; t < jb->tiles; t++)
            for (size_t p = 0; p < jb->sel; p++) m[t * jb->k + jb->cand[t * jb->sel + p]] = 1;
    return m;
}

int rac_emulate(void *ctx, const fp4s_cu_rac_job *jb, fp4s_cu_rac_out *o)
{
    (void)ctx;
    rjob j;
    int rc = check_job(jb, o, &j);
    if (rc) return rc;
    if (j.m == 0) return 0;
    const size_t nk = j.tiles * j.k;
    unsigned long long *limbs = static_cast<unsigned long long *>(calloc(nk * XS_LIMBS, sizeof *limbs));
    unsigned *special = static_cast<unsigned *>(calloc(nk, sizeof *special));
    double *e2 = static_cast<double *>(malloc(nk * sizeof *e2));
    unsigned *rank = static_cast<unsigned *>(malloc(nk * sizeof *rank));
    unsigned *idx = static_cast<unsigned *>(malloc(j.tiles * j.sel * sizeof *idx));
    uint8_t *mask = make_mask(jb);
    if (!limbs || !special || !e2 || !rank || !idx || !mask) {
        rc = fp4s_error_set(FP4S_ENOMEM, "cuda emulation: rac: out of memory");
        goto done;
    }
    /* kernel 1: every item, its limbs added as the atomics add them */
    for (size_t it = 0; it < j.tiles * j.spt * j.k; it++) {
        size_t c, t, r0, r1;
        norm_item(j, it, &c, &t, &r0, &r1);
        if (r0 == r1) continue;
        xsum acc;
        norm_slice(j, c, r0, r1, &acc);
        for (int i = 0; i < XS_LIMBS; i++) limbs[(t * j.k + c) * XS_LIMBS + i] += (unsigned long long)acc.l[i];
        special[t * j.k + c] |= acc.special;
    }
    for (size_t i = 0; i < nk; i++) e2[i] = norm_value(limbs + i * XS_LIMBS, special[i]);
    for (size_t t = 0; t < j.tiles; t++) {
        const double *e = e2 + t * j.k;
        const uint8_t *m = mask + t * j.k;
        for (size_t c = 0; c < j.k; c++) {
            unsigned r = 0;
            for (size_t i = 0; i < j.k; i++) r += m[i] && before(e[i], i, e[c], c);
            rank[t * j.k + c] = m[c] ? r : UINT_MAX;
        }
        unsigned p = 0;
        for (size_t c = 0; c < j.k; c++) {
            const unsigned r = rank[t * j.k + c];
            if (r >= j.sel) continue;
            idx[t * j.sel + (jb->rank_order ? r : p)] = (unsigned)c;
            p++;
        }
    }
    for (size_t it = 0; it < j.m * j.pad; it++) o->ec[it] = gather_one(j, idx, it);
    for (size_t i = 0; i < j.tiles * j.sel; i++) o->idx[i] = idx[i];
    if (o->e2) memcpy(o->e2, e2, nk * sizeof *e2);
done:
    free(limbs);
    free(special);
    free(e2);
    free(rank);
    free(idx);
    free(mask);
    return rc;
}

/* ---- the GPU: a stream, a cuBLAS handle and device buffers that grow ---------------------- */

enum { B_A, B_B, B_Y, B_N };

struct rmctx {
    cudaStream_t st;
#if FP4S_HAVE_CUBLAS
    cublasHandle_t h;
#endif
    void *buf[B_N];
    size_t cap[B_N];
};

int grow(rmctx *c, int b, size_t bytes, void **out)
{
    if (bytes == 0) bytes = 1;
    if (c->cap[b] < bytes) {
        cudaFree(c->buf[b]);
        c->buf[b] = nullptr;
        c->cap[b] = 0;
        cudaError_t e = cudaMalloc(&c->buf[b], bytes);
        if (e != cudaSuccess) return fp4s_cu_fail(e, "remedy: device buffer");
        c->cap[b] = bytes;
    }
    *out = c->buf[b];
    return 0;
}

void gpu_close(void *p)
{
    rmctx *c = static_cast<rmctx *>(p);
    if (!c) return;
    for (int i = 0; i < B_N; i++) cudaFree(c->buf[i]);
#if FP4S_HAVE_CUBLAS
    if (c->h) g_blas.destroy(c->h);
#endif
    if (c->st) cudaStreamDestroy(c->st);
    free(c);
}

int gpu_open(void **out)
{
    *out = nullptr;
#if !FP4S_HAVE_CUBLAS
    return fp4s_error_set(FP4S_ENOTSUP, "cuda: remedies: this build has no cuBLAS");
#else
    if (!fp4s_cuda_available()) {
        char d[320];
        fp4s_cuda_describe(d, sizeof d);
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: remedies: %s", d);
    }
    const char *why;
    if (!blas_ready(&why)) return fp4s_error_set(FP4S_ENOTSUP, "cuda: remedies: %s", why);
    rmctx *c = static_cast<rmctx *>(calloc(1, sizeof *c));
    if (!c) return fp4s_error_set(FP4S_ENOMEM, "cuda: remedies: out of memory");
    cudaError_t e = cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        gpu_close(c);
        return fp4s_cu_fail(e, "remedies: stream");
    }
    cublasStatus_t s = g_blas.create(&c->h);
    /* pedantic: FP32 products and sums throughout (no TF32, no reduced-precision
     * reductions); the default pointer mode (alpha, beta on the host) */
    if (s == CUBLAS_STATUS_SUCCESS) s = g_blas.set_stream(c->h, c->st);
    if (s == CUBLAS_STATUS_SUCCESS) s = g_blas.set_math(c->h, CUBLAS_PEDANTIC_MATH);
    if (s == CUBLAS_STATUS_SUCCESS) s = g_blas.set_atomics(c->h, CUBLAS_ATOMICS_NOT_ALLOWED);
    if (s != CUBLAS_STATUS_SUCCESS) {
        gpu_close(c);
        return fp4s_error_set(FP4S_ENOTSUP, "cuda: remedies: cuBLAS: %s", g_blas.status(s));
    }
    *out = c;
    return 0;
#endif
}

int gpu_rac(void *p, const fp4s_cu_rac_job *jb, fp4s_cu_rac_out *o)
{
    rmctx *c = static_cast<rmctx *>(p);
    rjob j;
    int rc = check_job(jb, o, &j);
    if (rc) return rc;
    if (j.m == 0) return 0;
    const size_t nk = j.tiles * j.k, nx = (j.m - 1) * j.ldx + j.k, nsel = j.tiles * j.sel;
    uint8_t *mask = make_mask(jb);
    unsigned *hidx = static_cast<unsigned *>(malloc(nsel * sizeof *hidx));
    float *dxa = nullptr, *dxq = nullptr, *dec = nullptr;
    unsigned long long *dl = nullptr;
    unsigned *dsp = nullptr, *drank = nullptr, *didx = nullptr;
    double *de2 = nullptr;
    uint8_t *dmask = nullptr;
    cudaError_t e = cudaSuccess;
    if (!mask || !hidx) rc = fp4s_error_set(FP4S_ENOMEM, "cuda: rac: out of memory");
    void *v;
    if (!rc && !(rc = grow(c, B_A, nx * sizeof(float), &v))) dxa = static_cast<float *>(v);
    if (!rc && !(rc = grow(c, B_B, j.m * j.k * sizeof(float), &v))) dxq = static_cast<float *>(v);
    if (!rc && !(rc = grow(c, B_Y, j.m * j.pad * sizeof(float), &v))) dec = static_cast<float *>(v);
    if (!rc) {
        e = cudaMalloc((void **)&dl, nk * XS_LIMBS * sizeof *dl);
        if (e == cudaSuccess) e = cudaMalloc((void **)&dsp, nk * sizeof *dsp);
        if (e == cudaSuccess) e = cudaMalloc((void **)&drank, nk * sizeof *drank);
        if (e == cudaSuccess) e = cudaMalloc((void **)&didx, nsel * sizeof *didx);
        if (e == cudaSuccess) e = cudaMalloc((void **)&de2, nk * sizeof *de2);
        if (e == cudaSuccess) e = cudaMalloc((void **)&dmask, nk);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dxa, j.xa, nx * sizeof(float), cudaMemcpyHostToDevice, c->st);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dxq, j.xq, j.m * j.k * sizeof(float), cudaMemcpyHostToDevice, c->st);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dmask, mask, nk, cudaMemcpyHostToDevice, c->st);
        if (e == cudaSuccess) e = cudaMemsetAsync(dl, 0, nk * XS_LIMBS * sizeof *dl, c->st);
        if (e == cudaSuccess) e = cudaMemsetAsync(dsp, 0, nk * sizeof *dsp, c->st);
        if (e == cudaSuccess) {
            rjob dj = j;
            dj.xa = dxa;
            dj.xq = dxq;
            k_norms<<<fp4s_cu_grid(j.tiles * j.spt * j.k, NT), NT, 0, c->st>>>(dj, dl, dsp);
            k_final<<<fp4s_cu_grid(nk, NT), NT, 0, c->st>>>(nk, dl, dsp, de2);
            for (size_t t0 = 0; t0 < j.tiles; t0 += 65535) {
                const size_t nt = j.tiles - t0 < 65535 ? j.tiles - t0 : 65535;
                dim3 rg((unsigned)((j.k + KT - 1) / KT), (unsigned)nt);
                k_rank<<<rg, KT, 0, c->st>>>(j.k, t0, de2, dmask, drank);
            }
            k_compact<<<(unsigned)j.tiles, CT, 0, c->st>>>(j.k, j.sel, jb->rank_order, drank, didx);
            k_gather<<<fp4s_cu_grid(j.m * j.pad, NT), NT, 0, c->st>>>(dj, didx, dec);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(o->ec, dec, j.m * j.pad * sizeof(float), cudaMemcpyDeviceToHost, c->st);
        if (e == cudaSuccess) e = cudaMemcpyAsync(hidx, didx, nsel * sizeof *hidx, cudaMemcpyDeviceToHost, c->st);
        if (e == cudaSuccess && o->e2)
            e = cudaMemcpyAsync(o->e2, de2, nk * sizeof *de2, cudaMemcpyDeviceToHost, c->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
        if (e != cudaSuccess) rc = fp4s_cu_fail(e, "rac");
    }
    if (!rc)
        for (size_t i = 0; i < nsel; i++) o->idx[i] = hidx[i];
    cudaFree(dl);
    cudaFree(dsp);
    cudaFree(drank);
    cudaFree(didx);
    cudaFree(de2);
    cudaFree(dmask);
    free(mask);
    free(hidx);
    return rc;
}

#if FP4S_HAVE_CUBLAS
int blas_fail(cublasStatus_t s, const char *what)
{
    return fp4s_error_set(s == CUBLAS_STATUS_ALLOC_FAILED ? FP4S_ENOMEM : FP4S_EINTERNAL, "cuda: %s: cuBLAS: %s",
                          what, g_blas.status(s));
}
#endif

int fits(size_t m, size_t n, size_t k)
{
    const size_t v[] = {m, n, k};
    for (size_t i = 0; i < 3; i++)
        if (v[i] > (size_t)INT_MAX)
            return fp4s_error_set(FP4S_ERANGE, "cuda: remedy GEMM: size %zu does not fit cuBLAS's int", v[i]);
    return 0;
}

/* Y (+)= A B^T in element type T: operands packed on the device (row
 * strides k, k and n), rows copied with cudaMemcpy2D so that the host's gaps
 * between rows are never written. */
template <typename T>
int gemm(rmctx *c, size_t m, size_t n, size_t k, const T *a, size_t lda, const T *b, size_t ldb, T beta, T *y,
         size_t ldy, const char *what)
{
#if !FP4S_HAVE_CUBLAS
    (void)c; (void)m; (void)n; (void)k; (void)a; (void)lda; (void)b; (void)ldb; (void)beta; (void)y; (void)ldy;
    return fp4s_error_set(FP4S_ENOTSUP, "cuda: %s: this build has no cuBLAS", what);
#else
    int rc = fits(m, n, k);
    if (rc) return rc;
    if (!a || !b || !y) return fp4s_error_set(FP4S_EINVAL, "cuda: %s: NULL operand", what);
    if (lda < k || ldb < k || ldy < n)
        return fp4s_error_set(FP4S_EINVAL, "cuda: %s: a row stride is smaller than its row", what);
    if (m == 0 || n == 0) return 0;
    void *va, *vb, *vy;
    if ((rc = grow(c, B_A, m * k * sizeof(T), &va)) || (rc = grow(c, B_B, n * k * sizeof(T), &vb)) ||
        (rc = grow(c, B_Y, m * n * sizeof(T), &vy)))
        return rc;
    T *da = static_cast<T *>(va), *db = static_cast<T *>(vb), *dy = static_cast<T *>(vy);
    const size_t es = sizeof(T);
    cudaError_t e = cudaSuccess;
    if (k) e = cudaMemcpy2DAsync(da, k * es, a, lda * es, k * es, m, cudaMemcpyHostToDevice, c->st);
    if (e == cudaSuccess && k) e = cudaMemcpy2DAsync(db, k * es, b, ldb * es, k * es, n, cudaMemcpyHostToDevice, c->st);
    if (e == cudaSuccess && beta != T(0))
        e = cudaMemcpy2DAsync(dy, n * es, y, ldy * es, n * es, m, cudaMemcpyHostToDevice, c->st);
    if (e != cudaSuccess) return fp4s_cu_fail(e, what);
    /* row-major Y [m, n] is column-major Y^T [n, m] = B [n, k] A^T [k, m]; the
     * packed row-major B is column-major B^T [k, n]: op T */
    const T one = T(1);
    cublasStatus_t s;
    if constexpr (sizeof(T) == 4)
        s = g_blas.sgemm(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, db, (int)(k ? k : 1), da,
                        (int)(k ? k : 1), &beta, dy, (int)n);
    else
        s = g_blas.dgemm(c->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, db, (int)(k ? k : 1), da,
                        (int)(k ? k : 1), &beta, dy, (int)n);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, what);
    e = cudaMemcpy2DAsync(y, ldy * es, dy, n * es, n * es, m, cudaMemcpyDeviceToHost, c->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
    if (e != cudaSuccess) return fp4s_cu_fail(e, what);
    return 0;
#endif
}

int gpu_sgemm(void *p, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb,
              float beta, float *y, size_t ldy)
{
    return gemm<float>(static_cast<rmctx *>(p), m, n, k, a, lda, b, ldb, beta, y, ldy, "remedy sgemm");
}

int gpu_dgemm(void *p, size_t m, size_t n, size_t k, const double *a, size_t lda, const double *b, size_t ldb,
              double beta, double *y, size_t ldy)
{
    return gemm<double>(static_cast<rmctx *>(p), m, n, k, a, lda, b, ldb, beta, y, ldy, "remedy dgemm");
}

int emu_open(void **ctx)
{
    *ctx = nullptr;
    return 0;
}

} // namespace

extern "C" const fp4s_cu_rm_ops fp4s_cu_rm_gpu = {"cuda", gpu_sgemm, gpu_dgemm, gpu_rac, gpu_open, gpu_close};
extern "C" const fp4s_cu_rm_ops fp4s_cu_rm_emulate = {"emulate", nullptr, nullptr, rac_emulate, emu_open, nullptr};

extern "C" bool fp4s_cu_rm_available(char *why, size_t n)
{
    const char *w = nullptr;
    char d[320];
#if FP4S_HAVE_CUBLAS
    if (!fp4s_cuda_available()) {
        fp4s_cuda_describe(d, sizeof d);
        w = d;
    } else {
        blas_ready(&w);
    }
#else
    (void)d;
    w = "this build has no cuBLAS (the remedies' GEMMs)";
#endif
    if (w && why && n) snprintf(why, n, "%s", w);
    return !w;
}
