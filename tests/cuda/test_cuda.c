/* CUDA kernels against the C reference, bit for bit.
 *
 *   test_cuda [--seed N] [--iterations N] [--emulate] [--big] [--exhaustive] [--profiles]
 *             [--hold-default-stream] [--quiet]
 *
 * For every spec the kernels support (each profile of fp4s_profile_at() for
 * MXFP4 and NVFP4, plus every MXFP4 scale rule x tie rule x zero sign x
 * non-finite policy x zero-block code and every NVFP4 recipe x tie x non-finite
 * policy x 1-D/2-D), several tensors are quantized by fp4s_quantize (the
 * reference) and by the GPU; the E2M1 codes and scale bytes must be equal byte
 * for byte, and fp4s_dequantize vs the GPU dequantizer must give the same
 * float32 bits (any NaN equals any NaN). Tensors mix random blocks with planted
 * worst cases: E2M1 ties at exactly known scales (for NVFP4 inside a tensor
 * whose amax makes the tensor scale a power of two), amax on every scale-rule
 * boundary, saturating values, float32 subnormals, huge values up to FLT_MAX,
 * NaN/Inf, all-zero (and -0) blocks, and raw random bit patterns. Shapes use a
 * row count that is not a multiple of 16 (partial 2-D tiles), a padded row
 * stride and a misaligned base (the scalar-load paths). The GPU amax is checked
 * against fp4s_amax.
 *
 * --emulate runs the kernels' arithmetic on the CPU (emulate.h) instead of the
 * GPU: that check runs everywhere nvcc is found; it also checks which path
 * each block took (BF16 kept in words and, for MXFP4, BF16 arithmetic:
 * quant_block.cuh, cu_encode16_w). Both runs first put every BF16 pattern
 * through the packed BF16 element path for every MXFP4 scale and tie rule
 * (on the CPU, or on the device: its BF16 arithmetic). Without --emulate and without
 * a usable GPU the program prints why and exits 77 (meson: skipped).
 * --profiles keeps only the profiles' specs (fewer launches, for the
 * compute-sanitizer runs). --hold-default-stream holds the legacy default
 * stream during each GPU check (see gpu_quantize): a check that depends on
 * it fails; a first pass without the hold runs every check's path once. --exhaustive runs only the CPU check of the kernels' E2M1 encoders on every
 * float32 magnitude up to 8, for each tie rule (slow suite).
 * The seed is printed first; rerun with --seed to reproduce. */
#include <fp4scope/cuda.h>
#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>
#include <fp4scope/codec.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/emulate.h"

#include <cuda_runtime_api.h>

/* ---- random numbers (xorshift64*) ------------------------------------------ */
static uint64_t rng;
static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}
static uint32_t rndu(uint32_t n) { return (uint32_t)(rnd() % n); }
static double rndf(void) { return (double)(rnd() >> 11) * 0x1p-53; }
static float gauss(void)
{
    double u = rndf() + 1e-300, v = rndf();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static float b2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2b(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float sgn(float v) { return (rnd() & 1) ? -v : v; }
static float nudge(float v, int d) { return b2f((uint32_t)((int64_t)f2b(v) + d)); }

/* ---- specs ------------------------------------------------------------------- */
typedef struct tspec { fp4s_spec s; char name[96]; } tspec;
static tspec specs[1024];
static int nspecs;

static int profiles_only; /* --profiles: the profile specs alone (sanitizer runs) */

static void add_spec(const fp4s_spec *s, const char *name)
{
    if (nspecs >= (int)(sizeof specs / sizeof specs[0])) return;
    if (profiles_only && !s->profile[0]) return;
    if (fp4s_spec_check(s) != 0 || !fp4s_cuda_supports(s)) return;
    specs[nspecs].s = *s;
    snprintf(specs[nspecs].name, sizeof specs[nspecs].name, "%s", name);
    nspecs++;
}

static void build_specs(void)
{
    const fp4s_profile_info *p;
    for (size_t pi = 0; (p = fp4s_profile_at(pi)); pi++) {
        for (int f = FP4S_MXFP4; f <= FP4S_NVFP4; f++) {
            if (!(p->formats & (1u << f))) continue;
            fp4s_spec s;
            if (fp4s_spec_profile(&s, (fp4s_format)f, p->name) != 0) continue;
            char nm[96];
            snprintf(nm, sizeof nm, "%s/%s", p->name, fp4s_format_name((fp4s_format)f));
            add_spec(&s, nm);
            if (f == FP4S_NVFP4 && !s.tile2d) {
                s.tile2d = true;
                snprintf(nm, sizeof nm, "%s/%s/2d", p->name, fp4s_format_name((fp4s_format)f));
                add_spec(&s, nm);
            }
        }
    }
    fp4s_spec base;
    if (fp4s_spec_profile(&base, FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4)) == 0) {
        for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int z = 0; z <= 1; z++)
                    for (int nf = 0; nf < FP4S_NF_COUNT; nf++)
                        for (int zc = 0; zc <= 1; zc++) {
                            fp4s_spec s = base;
                            s.mx_rule = (fp4s_mx_rule)r;
                            s.tie = (fp4s_tie)t;
                            s.keep_neg_zero = z;
                            s.nonfinite = (fp4s_nonfinite)nf;
                            s.mx_zero_block_code = zc ? 127 : 0;
                            s.profile[0] = '\0';
                            char nm[96];
                            snprintf(nm, sizeof nm, "mxfp4 %s %s negz=%d %s zero=%d",
                                     fp4s_mx_rule_name(s.mx_rule), fp4s_tie_name(s.tie), z,
                                     fp4s_nonfinite_name(s.nonfinite), s.mx_zero_block_code);
                            add_spec(&s, nm);
                        }
        for (int zi = 1; zi < FP4S_ZIN_COUNT; zi++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int z = 0; z <= 1; z++) {
                    fp4s_spec s = base;
                    s.mx_rule = FP4S_MX_CEIL;
                    s.tie = (fp4s_tie)t;
                    s.keep_neg_zero = z;
                    s.zero_in = (fp4s_zero_in)zi;
                    s.profile[0] = '\0';
                    char nm[96];
                    snprintf(nm, sizeof nm, "mxfp4 ceil %s negz=%d zero_in=%d", fp4s_tie_name(s.tie), z, zi);
                    add_spec(&s, nm);
                }
    }
    if (fp4s_spec_profile(&base, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4)) == 0) {
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int nf = 0; nf < FP4S_NF_COUNT; nf++)
                    for (int d2 = 0; d2 <= 1; d2++) {
                        fp4s_spec s = base;
                        s.nv_recipe = (fp4s_nv_recipe)rc;
                        s.tie = (fp4s_tie)t;
                        s.nonfinite = (fp4s_nonfinite)nf;
                        s.tile2d = d2;
                        s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                        s.profile[0] = '\0';
                        char nm[96];
                        snprintf(nm, sizeof nm, "nvfp4 %s %s %s%s", fp4s_nv_recipe_name(s.nv_recipe),
                                 fp4s_tie_name(s.tie), fp4s_nonfinite_name(s.nonfinite),
                                 d2 ? " 2d" : "");
                        add_spec(&s, nm);
                    }
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int zi = 1; zi < FP4S_ZIN_COUNT; zi++) {
                fp4s_spec s = base;
                s.nv_recipe = (fp4s_nv_recipe)rc;
                s.zero_in = (fp4s_zero_in)zi;
                s.keep_neg_zero = true;
                s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                s.profile[0] = '\0';
                char nm[96];
                snprintf(nm, sizeof nm, "nvfp4 %s zero_in=%d", fp4s_nv_recipe_name(s.nv_recipe), zi);
                add_spec(&s, nm);
            }
    }
}

/* ---- inputs ------------------------------------------------------------------ */
static const float e2m1_mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
static const float e2m1_val[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* n values of one block at exponent e (values around 2^e). */
static void fill_block(float *p, int n, int e)
{
    int kind = (int)rndu(14);
    float s = ldexpf(1.0f, e);
    switch (kind) {
    case 0: case 1: /* gaussian */
        for (int i = 0; i < n; i++) p[i] = gauss() * s;
        break;
    case 2: /* ties and grid points at scale 2^e, amax 6*2^e (every MX rule gives k = e) */
        for (int i = 0; i < n; i++)
            p[i] = sgn((rnd() & 1 ? e2m1_mid[rndu(7)] : e2m1_val[rndu(8)]) * s);
        p[rndu((uint32_t)n)] = sgn(6.0f * s);
        break;
    case 3: { /* amax on a scale-rule boundary, ties below it */
        static const float m[] = {1.0f, 1.5f, 1.75f, 2.0f, 3.0f, 3.5f, 6.0f, 7.0f, 1.4142135f, 2.828427f};
        float a = m[rndu(10)] * s;
        a = nudge(a, (int)rndu(5) - 2);
        for (int i = 0; i < n; i++) p[i] = sgn(a * (float)rndf());
        for (int i = 0; i < n / 4; i++) p[rndu((uint32_t)n)] = sgn(e2m1_mid[rndu(7)] * s * 0.5f);
        p[rndu((uint32_t)n)] = sgn(a);
        break;
    }
    case 4: /* saturating under FLOOR: amax in (6, 8) * 2^(e) */
        for (int i = 0; i < n; i++) p[i] = sgn((6.0f + 2.0f * (float)rndf()) * s);
        break;
    case 5: /* float32 subnormals */
        for (int i = 0; i < n; i++) p[i] = sgn(b2f(rndu(0x800000u)));
        break;
    case 6: /* huge, up to FLT_MAX */
        for (int i = 0; i < n; i++) p[i] = sgn(b2f(0x7E000000u + rndu(0x17FFFFFu)));
        break;
    case 7: { /* NaN / Inf planted in a random block */
        for (int i = 0; i < n; i++) p[i] = gauss() * s;
        int k = 1 + (int)rndu(2);
        for (int i = 0; i < k; i++) {
            uint32_t w = rndu(3);
            p[rndu((uint32_t)n)] = w == 0 ? b2f(0x7FC00000u | rndu(0x400000u)) : sgn(INFINITY);
        }
        break;
    }
    case 8: /* all zero, some -0 */
        for (int i = 0; i < n; i++) p[i] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case 9: /* raw bit patterns (any float, NaN payloads included) */
        for (int i = 0; i < n; i++) p[i] = b2f((uint32_t)rnd());
        break;
    case 10: /* tiny next to the rest of the tensor: NVFP4 scale underflow */
        for (int i = 0; i < n; i++) p[i] = gauss() * ldexpf(1.0f, -30 - (int)rndu(100));
        break;
    case 11: /* uniform with a few exact midpoints of a random power-of-two scale */
        for (int i = 0; i < n; i++) p[i] = (float)(2.0 * rndf() - 1.0) * 6.0f * s;
        for (int i = 0; i < 3; i++) p[rndu((uint32_t)n)] = sgn(e2m1_mid[rndu(7)] * s);
        break;
    case 12: /* small negative values that round to zero (-0 policy) */
        for (int i = 0; i < n; i++) p[i] = -(float)rndf() * 0.2f * s;
        p[0] = 6.0f * s;
        break;
    default: /* one large value, the rest tiny (dead zone) */
        for (int i = 0; i < n; i++) p[i] = gauss() * s * 0.01f;
        p[rndu((uint32_t)n)] = sgn(6.0f * s);
        break;
    }
}

/* Tensor kinds: 0 mixed random, 1 ties (tensor amax 2688*2^j planted so that
 * NVFP4 tensor scales are powers of two and block scales exact), 2 all zero,
 * 3 subnormal only, 4 random gaussian (plain data). */
static void fill_tensor(int kind, float *x, size_t rows, size_t cols, size_t ld)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = cols; c < ld; c++) x[r * ld + c] = b2f(0x7FC0DEADu); /* padding: poison */
    if (kind == 2) {
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) x[r * ld + c] = (rnd() & 1) ? -0.0f : 0.0f;
        return;
    }
    if (kind == 3) {
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) x[r * ld + c] = sgn(b2f(rndu(0x800000u)));
        return;
    }
    if (kind == 4) {
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) x[r * ld + c] = gauss();
        return;
    }
    if (kind == 1) {
        int j = (int)rndu(20) - 10;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c += 16) {
                /* NV block scale v = 2^i (exact E4M3), elements mid * 2^i * 2^j; the
                 * same values are exact MX ties at scale 2^(i+j) */
                int i = (int)rndu(12) - 6;
                float sc = ldexpf(1.0f, i + j);
                for (size_t k = 0; k < 16; k++)
                    x[r * ld + c + k] = sgn((rnd() & 1 ? e2m1_mid[rndu(7)] : e2m1_val[rndu(8)]) * sc);
                x[r * ld + c + rndu(16)] = sgn(6.0f * sc);
            }
        x[rndu((uint32_t)rows) * ld + rndu((uint32_t)cols)] = 2688.0f * ldexpf(1.0f, j + 8);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c += 32) {
            int e = (int)rndu(60) - 30;
            fill_block(x + r * ld + c, cols - c < 32 ? (int)(cols - c) : 32, e); /* 208 columns end in a half */
        }
}

static size_t dt_size(fp4s_dtype dt) { return dt == FP4S_DT_F32 ? 4 : 2; }
static const char *dt_name(fp4s_dtype dt)
{
    return dt == FP4S_DT_F32 ? "float32" : (dt == FP4S_DT_BF16 ? "bfloat16" : "float16");
}

/* ---- the GPU side through the device-pointer API on a stream ------------------ *
 *
 * Everything a check does on the GPU is ordered on the test's own stream (a
 * non-blocking one, as a framework's streams are: it does not wait for the
 * legacy default stream, nor that stream for it): stream-ordered allocation,
 * copies, the poison, the kernel, the copies back, the frees, then one
 * synchronisation. A copy or memset left on the default stream is not ordered
 * with the kernel: the poison can land after the kernel's stores, or the
 * kernel read its input before the copy-in arrived. That happened inside
 * meson, with other GPU tests running at the same time.
 *
 * --hold-default-stream makes any such dependence fail every time: during each
 * check a host function holds the legacy default stream until the check's
 * stream has finished; work of the check put there runs after its kernel
 * (poison or stale input: a mismatch), and a call that waits for that stream
 * (a synchronous copy, cudaFree) stalls until the hold gives up after 2 s,
 * which fails the check with its name. Loading a kernel may synchronise the
 * whole context (CUDA documents it for its lazy loading, the default since
 * CUDA 12.2: a kernel is loaded at its first launch), and so would wait for
 * the hold although the check's own sequence is right: with the option the
 * program asks for eager loading (CUDA_MODULE_LOADING=EAGER unless the
 * environment sets it) and first runs one pass without the hold over every
 * spec, input type, layout, shape and tensor on the device API, so that every
 * kernel and every path of a check has run once; only the passes after it
 * are held. */
static cudaStream_t stream;
static int use_host_api; /* alternate with the host-memory conveniences */
static int hold_default;  /* --hold-default-stream */
static int hold_now;      /* hold the default stream in this pass */

static int cu_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    return fp4s_error_set(FP4S_EINTERNAL, "test: %s: %s", what, cudaGetErrorString(e));
}

static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int hold_open = 1, hold_expired;

static void CUDART_CB hold_fn(void *arg)
{
    (void)arg;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 2;
    pthread_mutex_lock(&hold_mu);
    while (!hold_open)
        if (pthread_cond_timedwait(&hold_cv, &hold_mu, &dl) == ETIMEDOUT) {
            hold_expired = 1;
            break;
        }
    pthread_mutex_unlock(&hold_mu);
}

/* Start holding the default stream (no-op without --hold-default-stream). */
static int hold_begin(void)
{
    if (!hold_now) return 0;
    pthread_mutex_lock(&hold_mu);
    hold_open = 0;
    hold_expired = 0;
    pthread_mutex_unlock(&hold_mu);
    return cu_check(cudaLaunchHostFunc(cudaStreamLegacy, hold_fn, NULL), "hold the default stream");
}

/* Release the hold (after the check's stream is synchronised), let the
 * default stream drain, and fail if the check waited for it. */
static int hold_end(int rc, const char *what)
{
    if (!hold_now) return rc;
    pthread_mutex_lock(&hold_mu);
    hold_open = 1;
    pthread_cond_broadcast(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
    int rc2 = cu_check(cudaStreamSynchronize(cudaStreamLegacy), "default stream");
    if (!rc && rc2) rc = rc2;
    pthread_mutex_lock(&hold_mu);
    const int expired = hold_expired;
    pthread_mutex_unlock(&hold_mu);
    if (!rc && expired)
        rc = fp4s_error_set(FP4S_EINTERNAL, "test: %s waited for the default stream (held 2 s)", what);
    return rc;
}

/* Allocation, free and copies on the test's stream, each checked. */
static int d_alloc(void *pp, size_t n)
{
    return cu_check(cudaMallocAsync((void **)pp, n ? n : 1, stream), "cudaMallocAsync");
}
static int d_free(int rc, void *p)
{
    int rc2 = p ? cu_check(cudaFreeAsync(p, stream), "cudaFreeAsync") : 0;
    return rc ? rc : rc2;
}
static int d_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k, const char *what)
{
    return cu_check(cudaMemcpyAsync(dst, src, n, k, stream), what);
}
static int d_sync(int rc, const char *what)
{
    int rc2 = cu_check(cudaStreamSynchronize(stream), what);
    return rc ? rc : rc2;
}

/* x: host [rows, ld] elements of type dt at element offset off of its
 * allocation (misaligned when off is odd): copied to device memory with the
 * same offset and stride. codes: rows*cols bytes, or half that packed. */
static int gpu_quantize(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dt, const void *x, size_t rows,
                        size_t cols, size_t ld, size_t off, bool packed, uint8_t *codes, uint8_t *scales)
{
    if (use_host_api) return fp4s_cuda_quantize_host_ex(s, ts, dt, x, rows, cols, ld, packed, codes, scales);
    const size_t esz = dt_size(dt);
    size_t nx = rows * ld + off, nc = rows * cols / (packed ? 2 : 1), ns = rows * (cols / s->block);
    char *dx = NULL;
    uint8_t *dc = NULL, *ds = NULL;
    int rc = hold_begin();
    if (!rc) rc = d_alloc(&dx, nx * esz);
    if (!rc) rc = d_alloc(&dc, nc);
    if (!rc) rc = d_alloc(&ds, ns);
    if (!rc) rc = d_copy(dx, (const char *)x - off * esz, nx * esz, cudaMemcpyHostToDevice, "copy in");
    if (!rc) rc = cu_check(cudaMemsetAsync(dc, 0xEE, nc, stream), "poison");
    if (!rc) rc = cu_check(cudaMemsetAsync(ds, 0xEE, ns, stream), "poison");
    if (!rc) rc = fp4s_cuda_quantize_ex(s, ts, dt, dx + off * esz, rows, cols, ld, packed, dc, ds, stream);
    if (!rc) rc = d_copy(codes, dc, nc, cudaMemcpyDeviceToHost, "copy out");
    if (!rc) rc = d_copy(scales, ds, ns, cudaMemcpyDeviceToHost, "copy out");
    rc = d_free(rc, dx);
    rc = d_free(rc, dc);
    rc = d_free(rc, ds);
    rc = d_sync(rc, "quantize kernel");
    return hold_end(rc, "quantize");
}

static int gpu_dequantize(const fp4s_spec *s, const fp4s_tscale *ts, bool packed, const uint8_t *codes,
                          const uint8_t *scales, size_t rows, size_t cols, float *out)
{
    if (use_host_api) return fp4s_cuda_dequantize_host_ex(s, ts, packed, codes, scales, rows, cols, out);
    size_t nc = rows * cols / (packed ? 2 : 1), ns = rows * (cols / s->block), no = rows * cols * sizeof(float);
    float *dout = NULL;
    uint8_t *dc = NULL, *ds = NULL;
    int rc = hold_begin();
    if (!rc) rc = d_alloc(&dout, no);
    if (!rc) rc = d_alloc(&dc, nc);
    if (!rc) rc = d_alloc(&ds, ns);
    if (!rc) rc = d_copy(dc, codes, nc, cudaMemcpyHostToDevice, "copy in");
    if (!rc) rc = d_copy(ds, scales, ns, cudaMemcpyHostToDevice, "copy in");
    if (!rc) rc = cu_check(cudaMemsetAsync(dout, 0xEE, no, stream), "poison");
    if (!rc) rc = fp4s_cuda_dequantize_ex(s, ts, packed, dc, ds, rows, cols, dout, stream);
    if (!rc) rc = d_copy(out, dout, no, cudaMemcpyDeviceToHost, "copy out");
    rc = d_free(rc, dout);
    rc = d_free(rc, dc);
    rc = d_free(rc, ds);
    rc = d_sync(rc, "dequantize kernel");
    return hold_end(rc, "dequantize");
}

static int gpu_amax(fp4s_dtype dt, const void *x, size_t rows, size_t cols, size_t ld, size_t off,
                    float *amax, uint64_t *nf)
{
    const size_t esz = dt_size(dt);
    size_t nx = rows * ld + off;
    char *dx = NULL;
    int rc = hold_begin();
    if (!rc) rc = d_alloc(&dx, nx * esz);
    if (!rc) rc = d_copy(dx, (const char *)x - off * esz, nx * esz, cudaMemcpyHostToDevice, "copy in");
    if (!rc) rc = fp4s_cuda_amax_ex(dt, dx + off * esz, rows, cols, ld, amax, nf, stream);
    rc = d_free(rc, dx);
    rc = d_sync(rc, "amax");
    return hold_end(rc, "amax");
}

/* ---- comparison -------------------------------------------------------------- */
static int quiet;
static long n_checks;
static uint64_t n_pk_groups; /* --emulate: groups encoded by the packed BF16 paths */

static void print_block(const float *x, size_t ld, size_t row, size_t col, size_t bs)
{
    size_t c0 = col - col % bs;
    fprintf(stderr, "  block row %zu cols %zu..%zu:", row, c0, c0 + bs - 1);
    for (size_t k = 0; k < bs; k++) fprintf(stderr, " %a", (double)x[row * ld + c0 + k]);
    fprintf(stderr, "\n");
}

static int same_float(float a, float b)
{
    if (isnan(a) && isnan(b)) return 1;
    return f2b(a) == f2b(b);
}

typedef struct shape { size_t rows, cols, ld, off; } shape;

static const char *tensor_name[] = {"mixed", "ties", "zero", "subnormal", "gaussian", "tiny-quotients"};

/* Returns the number of mismatching bytes/floats (first few printed). x: the
 * input as float32 (the reference's input); xin: the same values stored as
 * type dt (what the kernels read: x itself for float32, else BF16/FP16 whose
 * exact float32 values are x), both [rows, ld] at element offset sh->off of
 * their allocations. packed: the kernels write (and the dequantizer reads)
 * codes in the spec's packing, compared with fp4s_pack_e2m1_block of the
 * reference's codes. */
static long check_one(const tspec *t, int kind, const float *x, fp4s_dtype dt, const void *xin,
                      const shape *sh, bool packed, int emulate)
{
    const fp4s_spec *s = &t->s;
    size_t rows = sh->rows, cols = sh->cols, ld = sh->ld;
    size_t nb = cols / s->block, pc = packed ? cols / 2 : cols; /* code bytes per row */
    uint8_t *rc_ = malloc(rows * cols), *rs = malloc(rows * nb), *rp = malloc(rows * cols);
    uint8_t *gc = malloc(rows * cols), *gs = malloc(rows * nb);
    float *rd = malloc(rows * cols * sizeof(float)), *gd = malloc(rows * cols * sizeof(float));
    long bad = 0;
    char what[160];
    snprintf(what, sizeof what, "%s [%s%s]", t->name, dt_name(dt), packed ? ", packed" : "");
    if (!rc_ || !rs || !rp || !gc || !gs || !rd || !gd) {
        fprintf(stderr, "out of memory\n");
        exit(5);
    }
    memset(gc, 0xEE, rows * cols); /* poison: every byte must be written */
    memset(gs, 0xEE, rows * nb);
    memset(gd, 0xEE, rows * cols * sizeof(float));

    uint64_t nf = 0;
    float amax = fp4s_spec_amax(s, x, rows, cols, ld, &nf); /* NaN/Inf for tensor_amax "all" */
    fp4s_tscale ts;
    int rc = fp4s_tscale_init(s, amax, &ts);
    if (rc) {
        fprintf(stderr, "FAIL %s: tscale_init: %s\n", what, fp4s_last_error());
        bad++;
        goto out;
    }
    fp4s_qout o;
    memset(&o, 0, sizeof o);
    o.codes = rc_; o.ld_codes = cols;
    o.scales = rs; o.ld_scales = nb;
    fp4s_qstats st;
    memset(&st, 0, sizeof st);
    rc = fp4s_quantize(s, &ts, x, rows, cols, ld, 0, &o, &st);
    if (rc) {
        fprintf(stderr, "FAIL %s: reference quantize: %s\n", what, fp4s_last_error());
        bad++;
        goto out;
    }
    /* the reference's codes in the layout the kernels were asked for */
    for (size_t r = 0; r < rows; r++) {
        if (packed) rc = fp4s_pack_e2m1_block(s->packing, s->block, rc_ + r * cols, cols, rp + r * pc);
        else memcpy(rp + r * cols, rc_ + r * cols, cols);
        if (rc) {
            fprintf(stderr, "FAIL %s: reference packing: %s\n", what, fp4s_last_error());
            bad++;
            goto out;
        }
    }
    if (emulate) fp4s_cuda_emulate_paths(NULL, NULL, true);
    rc = emulate ? fp4s_cuda_emulate_quantize_ex(s, &ts, dt, xin, rows, cols, ld, packed, gc, gs)
                 : gpu_quantize(s, &ts, dt, xin, rows, cols, ld, sh->off, packed, gc, gs);
    if (rc) {
        fprintf(stderr, "FAIL %s: cuda quantize: %s\n", what, fp4s_last_error());
        bad++;
        goto out;
    }
    n_checks++;
    if (emulate) {
        /* the path the emulation took, the kernels' own choice (cu_block_pk):
         * BF16 with zero_in SIGN, or POS with -0 dropped, any tie rule (not
         * ggml's NVFP4 level search) kept in words on every block of a
         * gaussian tensor (no NaN/Inf), never otherwise */
        uint64_t npk = 0, ng = 0;
        fp4s_cuda_emulate_paths(&npk, &ng, false);
        const bool pk = dt == FP4S_DT_BF16 &&
                        (s->zero_in == FP4S_ZIN_SIGN || (s->zero_in == FP4S_ZIN_POS && !s->keep_neg_zero)) &&
                        !(s->format == FP4S_NVFP4 &&
                          fp4s_get_nv_recipe_traits(s->nv_recipe)->elem == FP4S_NV_ELEM_SEARCH);
        n_checks++;
        if (pk ? kind == 4 && npk != ng : npk != 0) {
            fprintf(stderr, "FAIL %s, tensor %s: %" PRIu64 " of %" PRIu64 " groups took the packed BF16 paths\n",
                    what, tensor_name[kind], npk, ng);
            bad++;
        }
        n_pk_groups += npk;
    }
    int shown = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++)
            if (rs[r * nb + b] != gs[r * nb + b]) {
                bad++;
                if (shown++ < 3) {
                    fprintf(stderr, "MISMATCH scale: %s, tensor %s %zux%zu ld %zu: row %zu block %zu: "
                            "ref 0x%02x, cuda 0x%02x (tensor amax %a)\n", what, tensor_name[kind],
                            rows, cols, ld, r, b, rs[r * nb + b], gs[r * nb + b], (double)amax);
                    print_block(x, ld, r, b * s->block, s->block);
                }
            }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < pc; c++)
            if (rp[r * pc + c] != gc[r * pc + c]) {
                bad++;
                if (shown++ < 6) {
                    size_t ce = packed ? (s->packing == FP4S_PACK_SPLIT ? c - c % (s->block / 2) + (c % (s->block / 2)) : 2 * c) : c;
                    if (packed && s->packing == FP4S_PACK_SPLIT) ce = (c / (s->block / 2)) * s->block + c % (s->block / 2);
                    fprintf(stderr, "MISMATCH code byte: %s, tensor %s %zux%zu ld %zu: row %zu byte %zu "
                            "(element %zu): x %a, ref 0x%02x, cuda 0x%02x (scale ref 0x%02x cuda 0x%02x)\n",
                            what, tensor_name[kind], rows, cols, ld, r, c, ce, (double)x[r * ld + ce],
                            rp[r * pc + c], gc[r * pc + c], rs[r * nb + ce / s->block], gs[r * nb + ce / s->block]);
                    print_block(x, ld, r, ce, s->block);
                }
            }
    /* dequantize the reference's codes both ways */
    rc = fp4s_dequantize(s, &ts, rc_, cols, rs, nb, NULL, 0, rows, cols, 0, rd, cols);
    if (rc) {
        fprintf(stderr, "FAIL %s: reference dequantize: %s\n", what, fp4s_last_error());
        bad++;
        goto out;
    }
    rc = emulate ? fp4s_cuda_emulate_dequantize(s, &ts, rc_, rs, rows, cols, gd)
                 : gpu_dequantize(s, &ts, packed, rp, rs, rows, cols, gd);
    if (rc) {
        fprintf(stderr, "FAIL %s: cuda dequantize: %s\n", what, fp4s_last_error());
        bad++;
        goto out;
    }
    for (size_t i = 0; i < rows * cols; i++)
        if (!same_float(rd[i], gd[i])) {
            bad++;
            if (shown++ < 9)
                fprintf(stderr, "MISMATCH dequant: %s, tensor %s: element %zu (code %u scale 0x%02x): "
                        "ref %a, cuda %a\n", what, tensor_name[kind], i, rc_[i],
                        rs[(i / cols) * nb + (i % cols) / s->block], (double)rd[i], (double)gd[i]);
        }
out:
    free(rc_); free(rs); free(rp); free(gc); free(gs); free(rd); free(gd);
    return bad;
}

/* GPU amax (device API, strided input of type dt) against fp4s_amax of its
 * float32 values x. */
static long check_amax(const float *x, fp4s_dtype dt, const void *xin, const shape *sh)
{
    uint64_t nf_ref = 0, nf_gpu = 0;
    float ref = fp4s_amax(x, sh->rows, sh->cols, sh->ld, &nf_ref);
    float gpu = -1.0f;
    int rc = gpu_amax(dt, xin, sh->rows, sh->cols, sh->ld, sh->off, &gpu, &nf_gpu);
    n_checks++;
    if (rc) {
        fprintf(stderr, "FAIL cuda amax (%s): %s\n", dt_name(dt), fp4s_last_error());
        return 1;
    }
    if (f2b(ref) != f2b(gpu) || nf_ref != nf_gpu) {
        fprintf(stderr, "MISMATCH amax %s %zux%zu ld %zu: ref %a (%" PRIu64 " non-finite), cuda %a (%" PRIu64 ")\n",
                dt_name(dt), sh->rows, sh->cols, sh->ld, (double)ref, nf_ref, (double)gpu, nf_gpu);
        return 1;
    }
    return 0;
}

/* The float32 tensor x narrowed to BF16 / FP16 (round to nearest even) into
 * h, and x replaced by the exact float32 values of h: the reference then
 * quantizes exactly what the kernels read. Padding is converted too. */
static void narrow(fp4s_dtype dt, float *x, uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == FP4S_DT_BF16) {
            h[i] = fp4s_bf16_encode(x[i], FP4S_TIE_EVEN);
            x[i] = fp4s_bf16_decode(h[i]);
        } else {
            h[i] = fp4s_fp16_encode(x[i], FP4S_TIE_EVEN);
            x[i] = fp4s_fp16_decode(h[i]);
        }
    }
}

/* Every scale byte with every code through the dequantizer, against
 * fp4s_dequantize, with the bits of NaN results compared too: MXFP4 and each
 * NVFP4 recipe the kernels take. The decoders of the scale codecs are the
 * codec header's on both sides (core/numcodec.h); when the kernels had their
 * own copies, E4M3 0xFF decoded to a negative NaN on the GPU and a positive
 * one on the CPU, and ggml's UE4M3 0xFF to NaN on the GPU and 480 on the CPU.
 * Returns the number of differing values (first few printed). */
static long check_dequant_bytes(int emulate)
{
    long bad = 0;
    fp4s_spec base[2];
    if (fp4s_spec_profile(&base[0], FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4)) ||
        fp4s_spec_profile(&base[1], FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4))) {
        fprintf(stderr, "FAIL dequantize bytes: the default profiles\n");
        return 1;
    }
    for (int r = -1; r < FP4S_NV_RECIPE_COUNT; r++) {
        fp4s_spec s = base[r >= 0];
        if (r >= 0) {
            s.nv_recipe = (fp4s_nv_recipe)r;
            s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
            s.tie = FP4S_TIE_EVEN;
            if (!(fp4s_get_nv_recipe_traits(s.nv_recipe)->ties & (1u << s.tie))) s.tie = FP4S_TIE_ZERO;
            s.profile[0] = '\0';
        }
        if (fp4s_spec_check(&s) || !fp4s_cuda_supports(&s)) continue;
        const size_t rows = 256, cols = s.block;
        uint8_t codes[256 * 32], scales[256];
        float rd[256 * 32], gd[256 * 32];
        for (size_t i = 0; i < rows; i++) {
            scales[i] = (uint8_t)i;
            for (size_t j = 0; j < cols; j++) codes[i * cols + j] = (uint8_t)(j % 16);
        }
        fp4s_tscale ts;
        int rc = fp4s_tscale_init(&s, 1000.0f, &ts);
        if (!rc) rc = fp4s_dequantize(&s, &ts, codes, cols, scales, 1, NULL, 0, rows, cols, 0, rd, cols);
        if (!rc)
            rc = emulate ? fp4s_cuda_emulate_dequantize(&s, &ts, codes, scales, rows, cols, gd)
                         : gpu_dequantize(&s, &ts, false, codes, scales, rows, cols, gd);
        n_checks++;
        const char *name = r < 0 ? "mxfp4" : fp4s_nv_recipe_name(s.nv_recipe);
        if (rc) {
            fprintf(stderr, "FAIL dequantize bytes %s: %s\n", name, fp4s_last_error());
            bad++;
            continue;
        }
        for (size_t i = 0; i < rows * cols; i++)
            if (f2b(rd[i]) != f2b(gd[i])) {
                if (bad < 6)
                    fprintf(stderr, "MISMATCH dequantize bytes %s: scale 0x%02zx code %u: ref %a (0x%08x), cuda %a "
                            "(0x%08x)\n", name, i / cols, codes[i], (double)rd[i], f2b(rd[i]), (double)gd[i],
                            f2b(gd[i]));
                bad++;
            }
    }
    return bad;
}

static void usage(void)
{
    fprintf(stderr, "usage: test_cuda [--seed N] [--iterations N] [--emulate] [--big] [--exhaustive] [--profiles]"
                    " [--hold-default-stream] [--quiet]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    int have_seed = 0, iters = 1, emulate = 0, big = 0, exhaustive = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], &end, 0);
            if (*end) usage();
            have_seed = 1;
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            iters = (int)strtol(argv[++i], &end, 10);
            if (*end || iters < 1) usage();
        } else if (!strcmp(argv[i], "--emulate")) {
            emulate = 1;
        } else if (!strcmp(argv[i], "--big")) {
            big = 1;
        } else if (!strcmp(argv[i], "--exhaustive")) {
            exhaustive = 1;
        } else if (!strcmp(argv[i], "--profiles")) {
            profiles_only = 1;
        } else if (!strcmp(argv[i], "--hold-default-stream")) {
            hold_default = 1;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else {
            usage();
        }
    }
    if (exhaustive) {
        /* the kernels' E2M1 encoders on the CPU, every magnitude up to 8 */
        uint32_t first = 0;
        uint64_t nbad = fp4s_cuda_emulate_check_e2m1(&first);
        printf("test_cuda: exhaustive E2M1 encoder check: %" PRIu64 " disagreements", nbad);
        if (nbad) printf(" (first at bits 0x%08x)", first);
        printf("\n");
        return nbad ? 1 : 0;
    }
    if (!have_seed) {
        const char *e = getenv("FP4S_SEED");
        seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    }
    if (seed == 0) seed = 1;
    rng = seed;
    printf("test_cuda: seed %" PRIu64 " (%s)\n", seed, emulate ? "host emulation" : "GPU");
    if (hold_default) setenv("CUDA_MODULE_LOADING", "EAGER", 0); /* before the first CUDA call */
    char desc[200];
    fp4s_cuda_describe(desc, sizeof desc);
    if (!emulate) {
        printf("test_cuda: device: %s\n", desc);
        if (!fp4s_cuda_available()) {
            printf("test_cuda: SKIP: no usable GPU\n");
            return 77;
        }
    }
    if (!emulate) {
        cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            fprintf(stderr, "test_cuda: cannot create a stream: %s\n", cudaGetErrorString(e));
            return 1;
        }
    }
    /* the scalar C reference is the definition (not a SIMD path) */
    fp4s_kernels_force_ref(true);
    build_specs();
    if (nspecs == 0) {
        fprintf(stderr, "test_cuda: no spec is supported by the kernels\n");
        return 1;
    }
    shape shapes[] = {
        {100, 256, 256, 0},  /* rows not a multiple of 16 */
        {48, 160, 176, 0},   /* padded row stride */
        {33, 96, 97, 1},     /* odd stride and misaligned base: scalar paths */
        {20, 64, 64, 1},     /* contiguous but misaligned base */
        {37, 208, 216, 0},   /* aligned, 13 tile columns, partial tiles: 2-D slabs cut at both edges */
    };
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    long bad = 0;
    if (emulate) {
        /* the kernels' division by the block factor (dividing NVFP4 recipes) */
        float fx = 0, ft = 0;
        uint64_t nd = fp4s_cuda_emulate_check_div(seed, 2000000, &fx, &ft);
        n_checks++;
        if (nd) {
            fprintf(stderr, "MISMATCH fast division: %" PRIu64 " of 2000000 pairs (first %a / %a)\n", nd,
                    (double)fx, (double)ft);
            bad += (long)nd;
        }
    }
    {
        /* the packed BF16 element path on every BF16 pattern, scale and tie rule:
         * on the CPU (the emulation's arithmetic) or on the device */
        uint32_t fb = 0;
        uint64_t nb = emulate ? fp4s_cuda_emulate_check_bf16(&fb) : fp4s_cuda_device_check_bf16(&fb);
        n_checks++;
        printf("test_cuda: packed BF16 element path vs the reference, every BF16 pattern x 255 scales x RNE/RTZ/RHA (%s): "
               "%" PRIu64 " disagreements\n", emulate ? "host" : "device", nb);
        if (nb) {
            fprintf(stderr, "MISMATCH packed BF16 path: %" PRIu64 " (first: pattern 0x%04x, scale code %u, tie %u)\n",
                    nb, fb & 0xFFFFu, (fb >> 16) & 0xFFu, fb >> 24);
            bad += nb == UINT64_MAX ? 1 : (long)nb;
        }
    }
    if (!emulate) {
        /* the float32 fast element path as the device runs it, every magnitude up to 8 */
        uint32_t fe = 0;
        uint64_t ne = fp4s_cuda_device_check_e2m1(&fe);
        n_checks++;
        printf("test_cuda: float32 fast element path vs the threshold count, every float32 up to 8 x sign x "
               "RNE/RTZ/RHA (device): %" PRIu64 " disagreements\n", ne);
        if (ne) {
            fprintf(stderr, "MISMATCH float32 fast element path: %" PRIu64 " (first bits 0x%08x)\n", ne, fe);
            bad += ne == UINT64_MAX ? 1 : (long)ne;
        }
    }
    if (!emulate) {
        /* the conversion instruction behind the device's E4M3 block scales */
        uint32_t fe = 0;
        uint64_t ne = fp4s_cuda_device_check_e4m3(&fe);
        n_checks++;
        printf("test_cuda: device E4M3 conversion vs the software encoder, all 2^32 floats: %" PRIu64
               " disagreements\n", ne);
        if (ne) {
            fprintf(stderr, "MISMATCH device E4M3 conversion: %" PRIu64 " inputs (first bits 0x%08x)\n", ne, fe);
            bad += ne == UINT64_MAX ? 1 : (long)ne;
        }
    }
    {
        const long nb = check_dequant_bytes(emulate);
        printf("test_cuda: every scale byte x code through the dequantizer, NaN bits compared (%s): %ld "
               "disagreements\n", emulate ? "host" : "device", nb);
        bad += nb;
    }
    static const fp4s_dtype dts[3] = {FP4S_DT_F32, FP4S_DT_BF16, FP4S_DT_F16};
    /* it -1: the pass without the hold of --hold-default-stream (every spec,
     * type and layout, the device API) */
    for (int it = hold_default ? -1 : 0; it < iters; it++) {
        hold_now = hold_default && it >= 0;
        for (int sh = 0; sh < nshapes; sh++) {
            for (int kind = 0; kind < 5; kind++) {
                const shape *S = &shapes[sh];
                size_t n = S->rows * S->ld + S->off + 4;
                /* zeroed: the element before a misaligned base and the tail
                 * are copied to the device too (never read by a kernel) */
                float *buf = calloc(n, sizeof(float));
                float *xn = calloc(n, sizeof(float));
                uint16_t *hb = calloc(n, sizeof(uint16_t));
                if (!buf || !xn || !hb) return 5;
                float *x = buf + S->off;
                fill_tensor(kind, x, S->rows, S->cols, S->ld);
                for (int d = 0; d < 3; d++) {
                    /* the input as the kernels read it (xin) and its float32 values (xr) */
                    const float *xr = x;
                    const void *xin = x;
                    if (dts[d] != FP4S_DT_F32) {
                        memcpy(xn, buf, n * sizeof(float));
                        narrow(dts[d], xn, hb, n);
                        xr = xn + S->off;
                        xin = hb + S->off;
                    }
                    for (int t = 0; t < nspecs; t++) {
                        const bool prof = specs[t].s.profile[0] != 0;
                        if (S->cols % (size_t)specs[t].s.block) continue; /* 208 columns: NVFP4 only */
                        const int pick = t + kind + sh + it;
                        for (int pk = 0; pk < 2; pk++) {
                            /* profiles: every type and layout; the other specs one each, in turn */
                            if (it >= 0 && !prof && (pick % 3 != d || (pick / 3) % 2 != pk)) continue;
                            use_host_api = it >= 0 && (t + kind + pk) % 4 == 3;
                            bad += check_one(&specs[t], kind, xr, dts[d], xin, S, pk == 1, emulate);
                        }
                    }
                    if (!emulate) bad += check_amax(xr, dts[d], xin, S);
                }
                free(buf);
                free(xn);
                free(hb);
            }
        }
    }
    {
        /* tiny quotients under the dividing NVFP4 recipes (x / t): whether
         * RN(x / t) is zero decides the sign of a code 0 under zero_in POS
         * or NEG with -0 kept, and the kernels' division (a reciprocal and
         * two FMAs) may round a subnormal quotient the other way
         * (2^-149 / (2 - 2^-23): 0 instead of 2^-149). One row: the tensor
         * amax A chosen so that the tensor scale s_dec is just below a
         * power of two times 1, 1.25, 1.5 or 1.75, blocks of amax 6 s_dec v
         * (v: E4M3 block scales 1 .. 256, so t = v s_dec) holding +-k 2^-149,
         * k = 1..15, and A's own block. */
        static const float vs[18] = {1, 1.25f, 1.5f, 1.75f, 2, 2.5f, 3, 3.5f, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256};
        static const float ms[4] = {2.0f, 1.25f, 1.5f, 1.75f};
        shape S = {1, 16 * 37, 16 * 37, 0};
        float x[16 * 37];
        long tensors = 0;
        for (int t = 0; t < nspecs; t++) {
            const fp4s_spec *s = &specs[t].s;
            if (s->format != FP4S_NVFP4 || fp4s_get_nv_recipe_traits(s->nv_recipe)->elem != FP4S_NV_ELEM_DIV)
                continue;
            for (int mi = 0; mi < 4; mi++)
                for (int j = 1; j <= 3; j++) {
                    const float target = ms[mi] - (float)j * 0x1p-23f;
                    /* a tensor amax whose s_dec is the target, searched near 2688 target */
                    float a = 2688.0f * target, found = 0.0f;
                    for (int d = 0; d < 4096 && found == 0.0f; d++) {
                        const float c = nudge(a, d % 2 ? -(d + 1) / 2 : d / 2);
                        fp4s_tscale ts;
                        if (fp4s_tscale_init(s, c, &ts) == 0 && ts.s_dec == target) found = c;
                    }
                    if (found == 0.0f) continue;
                    for (int b = 0; b < 36; b++) {
                        float *p = x + 16 * b;
                        p[0] = 6.0f * target * vs[b % 18];
                        for (int k = 1; k < 16; k++) p[k] = ldexpf((float)(b < 18 ? k : -k), -149);
                    }
                    x[16 * 36] = found;
                    for (int k = 1; k < 16; k++) x[16 * 36 + k] = ldexpf((float)k, -149);
                    bad += check_one(&specs[t], 5, x, FP4S_DT_F32, x, &S, false, emulate);
                    tensors++;
                }
        }
        n_checks++;
        if (!quiet) printf("test_cuda: %ld tiny-quotient tensors under the dividing NVFP4 specs\n", tensors);
        if (tensors < 4) {
            fprintf(stderr, "FAIL: only %ld tiny-quotient tensors (no tensor amax gave the planned s_dec)\n", tensors);
            bad++;
        }
    }
    if (big && !emulate) {
        /* one large tensor through a few profiles: many blocks, grid-stride loops */
        shape S = {4099, 4096, 4096, 0};
        float *x = malloc(S.rows * S.ld * sizeof(float));
        uint16_t *h = malloc(S.rows * S.ld * sizeof(uint16_t));
        if (!x || !h) return 5;
        fill_tensor(0, x, S.rows, S.cols, S.ld);
        for (int t = 0; t < nspecs; t++)
            if (specs[t].s.profile[0]) {
                bad += check_one(&specs[t], 0, x, FP4S_DT_F32, x, &S, false, 0);
                bad += check_one(&specs[t], 0, x, FP4S_DT_F32, x, &S, true, 0);
            }
        bad += check_amax(x, FP4S_DT_F32, x, &S);
        narrow(FP4S_DT_BF16, x, h, S.rows * S.ld);
        for (int t = 0; t < nspecs; t++)
            if (specs[t].s.profile[0]) bad += check_one(&specs[t], 0, x, FP4S_DT_BF16, h, &S, true, 0);
        bad += check_amax(x, FP4S_DT_BF16, h, &S);
        free(x);
        free(h);
    }
    if (emulate) {
        printf("test_cuda: %" PRIu64 " groups took the packed BF16 paths\n", n_pk_groups);
        if (n_pk_groups == 0) {
            fprintf(stderr, "FAIL: no group took the packed BF16 path\n");
            bad++;
        }
    }
    printf("test_cuda: %d specs, %ld comparisons, %ld mismatches\n", nspecs, n_checks, bad);
    if (!quiet) {
        for (int t = 0; t < nspecs; t++)
            if (specs[t].s.profile[0]) printf("  profile %s\n", specs[t].name);
    }
    return bad ? 1 : 0;
}
