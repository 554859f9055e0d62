/* Exhaustive measurement of the GPU's approximate float32 instructions that
 * the rollout engines' FP4 quantize kernels use (rcp.approx.ftz.f32 in
 * FlashInfer, TensorRT-LLM, vLLM and SGLang; ex2.approx.ftz.f32, which nvcc
 * emits for exp2f under -use_fast_math, in FlashInfer's MXFP4 path), and of
 * their neighbours (rcp.approx.f32, ex2.approx.f32, lg2.approx[.ftz].f32),
 * over every one of the 2^32 float32 inputs.
 *
 *   approx_scan OUTDIR
 *
 * For rcp it tests the hypothesis that the result depends only on the input's
 * mantissa (the exponent scales it exactly, apart from the ftz flush and the
 * special values): it reads rcp(1.m) for every mantissa m, predicts every
 * input from that, and counts the inputs where the prediction fails, by
 * class. It writes the deviation of rcp(1.m) from the correctly rounded
 * 1/(1.m), in units in the last place, per mantissa (OUTDIR/rcp_approx_ftz.dev
 * and rcp_approx.dev: 2^23 int8 each), which is the table fp4scope ships.
 * For ex2 and lg2 (whose result does not depend on the mantissa alone) it
 * measures the error against the correctly rounded value, tests whether
 * ex2(x) = 2^floor(x) * ex2(x - floor(x)) and lg2(m*2^e) = e + lg2(m), writes
 * ex2 of every integer in [-160, 160] (OUTDIR/ex2_int.txt: what an exp2f of
 * an integer gives) and the inputs where floor or ceil of lg2 differs from
 * the exact floor or ceil of log2 (OUTDIR/lg2_*_floor.u32, *_ceil.u32).
 * It also checks the instructions fp4scope's engine profiles take as exact:
 * cvt.rn.satfinite.e4m3x2.f32 (every input against round-to-nearest-even
 * satfinite), CUDA's __nv_cvt_float_to_e8m0 round-up (against the exact
 * smallest power of two), mul.rn.ftz.f32 near the subnormal boundary (is a
 * product flushed after rounding?) and __hmax2 / __habs2 on bf16 NaN.
 * Everything it finds goes to stdout and OUTDIR/summary.txt.
 *
 * Build (sm_90, the H200): nvcc -O3 -arch=sm_90 -o approx_scan approx_scan.cu
 * scripts/gpu/engines/run.sh builds and runs it on the GPU machine. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "approx_scan: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(5);                                                                              \
        }                                                                                         \
    } while (0)

/* ---- the instructions ------------------------------------------------------------ */

enum { OP_RCP_FTZ, OP_RCP, OP_EX2_FTZ, OP_EX2, OP_LG2_FTZ, OP_LG2, NOPS };
static const char *const op_name[NOPS] = {"rcp.approx.ftz.f32", "rcp.approx.f32", "ex2.approx.ftz.f32",
                                          "ex2.approx.f32", "lg2.approx.ftz.f32", "lg2.approx.f32"};

__device__ __forceinline__ float hw(int op, float a)
{
    float b;
    switch (op) {
    case OP_RCP_FTZ: asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    case OP_RCP: asm volatile("rcp.approx.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    case OP_EX2_FTZ: asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    case OP_EX2: asm volatile("ex2.approx.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    case OP_LG2_FTZ: asm volatile("lg2.approx.ftz.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    default: asm volatile("lg2.approx.f32 %0, %1;" : "=f"(b) : "f"(a)); break;
    }
    return b;
}

__device__ __forceinline__ float u2f(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ uint32_t f2u(float f) { return __float_as_uint(f); }

/* Counters live in one device array of unsigned long long. */
enum {
    C_CLASSES = 8,     /* per-class mismatch counters of a hypothesis test */
    C_FIRST = 16,      /* first mismatches recorded (input, got, predicted) */
    NCNT = 64
};
struct scan_out {
    unsigned long long n[C_CLASSES];     /* inputs per class */
    unsigned long long bad[C_CLASSES];   /* mismatches per class */
    unsigned long long nfirst;
    uint32_t first[C_FIRST][3];
    unsigned long long hist[2][17];      /* error histogram in ulps, -8..8 (ends: beyond) */
    unsigned long long amb;              /* ambiguous reference roundings */
    unsigned long long nan_bits_seen;    /* NaN results seen */
    unsigned int nan_bits;               /* the first NaN result's bits */
    unsigned long long nan_other;        /* NaN results with other bits */
    double max_abs_err;                  /* lg2: max |result - log2 x| over normal inputs */
};

/* Per-thread counts, added to the global ones once at the end of a thread's
 * grid-stride loop (an atomic per input would serialise 2^32 updates). */
struct acc {
    unsigned long long n[C_CLASSES], bad[C_CLASSES], hist[2][17], amb, nan_cnt, nan_other;
    unsigned int nan_first;
    double maxerr;
    __device__ acc() { memset(this, 0, sizeof *this); }
    __device__ void note_nan(uint32_t r)
    {
        if ((r & 0x7fffffffu) <= 0x7f800000u) return;
        nan_cnt++;
        if (!nan_first) nan_first = r;
        else if (r != nan_first) nan_other++;
    }
    __device__ void flush(scan_out *o)
    {
        for (int c = 0; c < C_CLASSES; c++) {
            if (n[c]) atomicAdd(&o->n[c], n[c]);
            if (bad[c]) atomicAdd(&o->bad[c], bad[c]);
        }
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 17; i++)
                if (hist[s][i]) atomicAdd(&o->hist[s][i], hist[s][i]);
        if (amb) atomicAdd(&o->amb, amb);
        /* the max of non-negative doubles by their bits */
        if (maxerr > 0) atomicMax((unsigned long long *)&o->max_abs_err, (unsigned long long)__double_as_longlong(maxerr));
        if (nan_cnt) {
            atomicAdd(&o->nan_bits_seen, nan_cnt);
            unsigned int old = atomicCAS(&o->nan_bits, 0u, nan_first);
            if (old != 0u && old != nan_first) nan_other += nan_cnt;
            if (nan_other) atomicAdd(&o->nan_other, nan_other);
        }
    }
};

/* A mismatch: counted locally, the first few inputs recorded globally. */
__device__ void record(scan_out *o, acc &a, int cls, uint32_t u, uint32_t got, uint32_t want)
{
    a.bad[cls]++;
    if (o->nfirst >= C_FIRST) return;
    unsigned long long k = atomicAdd(&o->nfirst, 1ull);
    if (k < C_FIRST) {
        o->first[k][0] = u;
        o->first[k][1] = got;
        o->first[k][2] = want;
    }
}

#define GRID_STRIDE(i, n) for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (uint64_t)gridDim.x * blockDim.x)

/* ---- rcp: the per-mantissa table and the hypothesis -------------------------------- */

/* tab[m] = bits of rcp(1.m); dev[m] = tab[m] - bits(correctly rounded 1/(1.m)). */
__global__ void k_rcp_table(int op, uint32_t *tab, int8_t *dev, scan_out *o)
{
    acc A;
    GRID_STRIDE(m, 1u << 23) {
        float x = u2f(0x3f800000u | (uint32_t)m);
        uint32_t h = f2u(hw(op, x));
        uint32_t cr = f2u(__double2float_rn(1.0 / (double)x));
        int d = (int)h - (int)cr;
        tab[m] = h;
        dev[m] = (int8_t)(d < -127 ? -127 : d > 127 ? 127 : d);
        A.hist[0][d < -8 ? 0 : d > 8 ? 16 : d + 8]++;
    }
    A.flush(o);
}

/* Input classes of the rcp hypothesis test. */
enum { R_NORMAL = 0, R_SUBRES = 1, R_SUBIN = 2, R_ZERO = 3, R_INF = 4, R_NAN = 5 };

/* The prediction from the table: rcp(s * 1.m * 2^E) = s * rcp(1.m) * 2^-E,
 * flushed to zero (ftz) when that is below 2^-126; 0 -> Inf, Inf -> 0, a
 * subnormal input -> Inf (ftz) or not predicted (class R_SUBIN), NaN -> any
 * NaN. */
__global__ void k_rcp_check(int op, const uint32_t *tab, scan_out *o)
{
    acc A;
    const bool ftz = op == OP_RCP_FTZ;
    GRID_STRIDE(i, 1ull << 32) {
        uint32_t u = (uint32_t)i, s = u & 0x80000000u, a = u & 0x7fffffffu;
        uint32_t got = f2u(hw(op, u2f(u)));
        int cls;
        uint32_t want;
        bool ok;
        if (a > 0x7f800000u) {
            cls = R_NAN;
            A.note_nan(got);
            ok = (got & 0x7fffffffu) > 0x7f800000u;
            want = 0x7fffffffu;
        } else if (a == 0x7f800000u) {
            cls = R_INF; want = s; ok = got == want;
        } else if (a == 0) {
            cls = R_ZERO; want = s | 0x7f800000u; ok = got == want;
        } else if (a < 0x00800000u) {
            cls = R_SUBIN;
            want = s | 0x7f800000u;
            ok = ftz ? got == want : true; /* non-ftz: counted, not predicted */
            if (!ftz) {
                /* non-ftz: compare with the correctly rounded reciprocal (may overflow to Inf) */
                float cr = __double2float_rn(1.0 / (double)u2f(u));
                want = f2u(cr);
                ok = got == want;
            }
        } else {
            int e = (int)(a >> 23);
            uint32_t t = tab[a & 0x7fffffu];
            int re = (int)(t >> 23) - (e - 127);
            if (re >= 1) {
                cls = R_NORMAL;
                want = s | ((uint32_t)re << 23) | (t & 0x7fffffu);
                ok = got == want;
            } else {
                cls = R_SUBRES;
                if (ftz) {
                    want = s;
                } else {
                    float cr = __double2float_rn(1.0 / (double)u2f(u));
                    want = f2u(cr); /* compared with the correctly rounded value */
                }
                ok = got == want;
            }
        }
        A.n[cls]++;
        if (!ok) record(o, A, cls, u, got, want);
    }
    A.flush(o);
}

/* ---- ex2 ------------------------------------------------------------------------- */

/* Classes of the ex2 scan: by the correctly rounded result. */
enum { X_NORMAL = 0, X_SUBRES = 1, X_ZERO = 2, X_INF = 3, X_NAN = 4, X_FRAC = 5, X_SUBIN = 6 };

/* The correctly rounded float of a double d that approximates f(x) within a
 * few double ulps: ambiguous (returns false) when d lies that close to a
 * float rounding boundary. */
__device__ bool cr_float(double d, float *out)
{
    float dn = __double2float_rd(d), up = __double2float_ru(d);
    *out = __double2float_rn(d);
    if (dn == up) return true;
    double mid = ((double)dn + (double)up) * 0.5;
    double tol = fabs(d) * 0x1p-50 + 0x1p-1074 * 4;
    return fabs(d - mid) > tol;
}

__global__ void k_ex2_scan(int op, scan_out *o)
{
    acc A;
    const bool ftz = op == OP_EX2_FTZ;
    GRID_STRIDE(i, 1ull << 32) {
        uint32_t u = (uint32_t)i, a = u & 0x7fffffffu;
        float x = u2f(u);
        uint32_t got = f2u(hw(op, x));
        if (a > 0x7f800000u) {
            A.n[X_NAN]++;
            A.note_nan(got);
            if ((got & 0x7fffffffu) <= 0x7f800000u) record(o, A, X_NAN, u, got, 0x7fffffffu);
            continue;
        }
        float xin = (ftz && a < 0x00800000u) ? 0.0f : x;  /* ftz: a subnormal input reads as 0 */
        if (a != 0 && a < 0x00800000u) A.n[X_SUBIN]++;
        double d = exp2((double)xin);
        float cr;
        bool sure = cr_float(d, &cr);
        uint32_t want = f2u(cr);
        int cls = want == 0 ? X_ZERO : want == 0x7f800000u ? X_INF : want < 0x00800000u ? X_SUBRES : X_NORMAL;
        if (ftz && cls == X_SUBRES) want = 0;  /* the expected flush */
        A.n[cls]++;
        if (!sure) { A.amb++; continue; }
        long long diff = (long long)got - (long long)want;
        int side = cls == X_NORMAL ? 0 : 1;
        A.hist[side][diff < -8 ? 0 : diff > 8 ? 16 : (int)diff + 8]++;
        if (cls != X_NORMAL && got != want) record(o, A, cls, u, got, want);
        /* the fraction hypothesis, where x has an integer part and the result is normal */
        if (cls == X_NORMAL && fabsf(x) >= 1.0f && fabsf(x) < 126.0f) {
            float n = floorf(x), f = x - n; /* exact */
            uint32_t hf = f2u(hw(op, f));
            int e = (int)(hf >> 23) + (int)n;
            uint32_t pred = (e >= 1 && e <= 254) ? ((uint32_t)e << 23) | (hf & 0x7fffffu) : 0xffffffffu;
            A.n[X_FRAC]++;
            if (pred != got) record(o, A, X_FRAC, u, got, pred);
        }
    }
    A.flush(o);
}

__global__ void k_ex2_int(int op, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= 320) out[i] = hw(op, (float)(i - 160));
}

/* ---- lg2 ------------------------------------------------------------------------- */

enum { L_NORMAL = 0, L_SUBIN = 1, L_ZERO = 2, L_INF = 3, L_NAN = 4, L_NEG = 5, L_MANT = 6 };

/* Exact floor / ceil of log2 of a positive finite float from its bits. */
__device__ void exact_floor_ceil(uint32_t a, int *fl, int *ce)
{
    if (a >= 0x00800000u) {
        int e = (int)(a >> 23) - 127;
        *fl = e;
        *ce = (a & 0x7fffffu) ? e + 1 : e;
    } else {
        int p = 31 - __clz(a);           /* a = m * 2^-149, top bit p */
        *fl = p - 149;
        *ce = (a & (a - 1)) ? *fl + 1 : *fl;
    }
}

__global__ void k_lg2_scan(int op, scan_out *o, uint32_t *fl_list, uint32_t *ce_list, unsigned long long *nl,
                           uint32_t cap)
{
    acc A;
    const bool ftz = op == OP_LG2_FTZ;
    GRID_STRIDE(i, 1ull << 32) {
        uint32_t u = (uint32_t)i, a = u & 0x7fffffffu;
        uint32_t got = f2u(hw(op, u2f(u)));
        float g = u2f(got);
        if (a > 0x7f800000u) { A.n[L_NAN]++; A.note_nan(got); continue; }
        if (u & 0x80000000u) {
            A.n[L_NEG]++;
            /* log2 of a negative number: NaN, of -0: -Inf (of a negative subnormal under ftz: -Inf) */
            bool ok = a == 0 || (ftz && a < 0x00800000u) ? got == 0xff800000u : (got & 0x7fffffffu) > 0x7f800000u;
            if (!ok) record(o, A, L_NEG, u, got, 0);
            continue;
        }
        if (a == 0x7f800000u) { A.n[L_INF]++; if (got != 0x7f800000u) record(o, A, L_INF, u, got, 0x7f800000u); continue; }
        if (a == 0 || (ftz && a < 0x00800000u)) {
            A.n[L_ZERO]++;
            if (got != 0xff800000u) record(o, A, L_ZERO, u, got, 0xff800000u);
            continue;
        }
        int cls = a < 0x00800000u ? L_SUBIN : L_NORMAL;
        A.n[cls]++;
        double d = log2((double)u2f(u));
        float cr;
        if (cr_float(d, &cr)) {
            long long diff = (long long)f2u(g) - (long long)f2u(cr);
            if ((f2u(g) ^ f2u(cr)) & 0x80000000u) diff = 99; /* opposite signs: beyond */
            A.hist[cls == L_NORMAL ? 0 : 1][diff < -8 ? 0 : diff > 8 ? 16 : (int)diff + 8]++;
        } else {
            A.amb++;
        }
        if (cls == L_NORMAL) {
            double err = fabs((double)g - d);
            if (err > A.maxerr) A.maxerr = err;
            /* the mantissa hypothesis: lg2(1.m * 2^e) = fl(e + lg2(1.m)) */
            int e = (int)(a >> 23) - 127;
            float lm = hw(op, u2f(0x3f800000u | (a & 0x7fffffu)));
            float pred = __fadd_rn((float)e, lm);
            A.n[L_MANT]++;
            if (f2u(pred) != got) record(o, A, L_MANT, u, got, f2u(pred));
        }
        int fe, ce;
        exact_floor_ceil(a, &fe, &ce);
        if ((int)floorf(g) != fe) {
            unsigned long long k = atomicAdd(&nl[0], 1ull);
            if (k < cap) fl_list[k] = u;
        }
        if ((int)ceilf(g) != ce) {
            unsigned long long k = atomicAdd(&nl[1], 1ull);
            if (k < cap) ce_list[k] = u;
        }
    }
    A.flush(o);
}

/* ---- conversions fp4scope's profiles take as exact --------------------------------- */

/* Round-to-nearest-even E4M3 satfinite of a float, from the bits (NaN ->
 * 0x7F with the sign, +-Inf -> +-448). */
__device__ uint8_t e4m3_ref(uint32_t u)
{
    uint32_t s = u >> 31, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(0x7f | (s << 7));
    uint32_t code;
    if (a == 0) {
        code = 0;
    } else {
        int e = (int)(a >> 23) - 127;
        uint32_t sig = a >= 0x00800000u ? (a & 0x7fffffu) | 0x800000u : (a & 0x7fffffu);
        if (a < 0x00800000u) e = -126;
        if (a == 0x7f800000u) { sig = 0x800000u; }
        int te = e > -6 ? e : -6;           /* target binade */
        int shift = 20 + (te - e);          /* quantum 2^(te-3) over the input's 2^(e-23) */
        uint32_t n;
        if (shift > 31) {
            n = 0;
        } else {
            n = sig >> shift;
            uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
            if (rem > half || (rem == half && (n & 1u))) n++;
        }
        code = ((uint32_t)(te + 6) << 3) + n;
        if (te == -6) code = n;             /* subnormal binade: biased exponent 0 (n carries) */
    }
    if (code > 0x7e) code = 0x7e;
    return (uint8_t)(code | (s << 7));
}

/* The exact E8M0 round-up of |x|: the smallest power of two >= |x|, as a code
 * clamped to [0, 254] (2^-127 .. 2^127); NaN -> 0xFF. */
__device__ uint8_t e8m0_up_ref(uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xff;
    if (a == 0x7f800000u) return 0xfe;
    if (a <= 0x00400000u) return 0;           /* <= 2^-127 */
    int k;
    if (a >= 0x00800000u) {
        k = (int)(a >> 23) - 127 + ((a & 0x7fffffu) != 0);
    } else {
        int p = 31 - __clz(a);
        k = p - 149 + ((a & (a - 1)) != 0);
    }
    int code = k + 127;
    return (uint8_t)(code > 254 ? 254 : code < 0 ? 0 : code);
}

enum { V_E4M3 = 0, V_E8M0 = 1 };

__global__ void k_cvt_check(scan_out *o4, scan_out *o8)
{
    acc A4, A8;
    GRID_STRIDE(i, 1ull << 32) {
        uint32_t u = (uint32_t)i;
        float x = u2f(u);
        uint8_t h4 = (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
        uint8_t r4 = e4m3_ref(u);
        uint32_t a = u & 0x7fffffffu;
        int c4 = a > 0x7f800000u ? 1 : 0;
        A4.n[c4]++;
        if (h4 != r4) record(o4, A4, c4, u, h4, r4);
        uint8_t h8 = (uint8_t)__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
        uint8_t r8 = e8m0_up_ref(u);
        int c8 = a > 0x7f800000u ? 1 : 0;
        A8.n[c8]++;
        if (h8 != r8) record(o8, A8, c8, u, h8, r8);
    }
    A4.flush(o4);
    A8.flush(o8);
}

/* mul.rn.ftz.f32 near the subnormal boundary against three models: operands
 * read as 0 when subnormal, and the product flushed to zero when the float
 * product (rounded with subnormals) is below 2^-126 (bad[0]), when the exact
 * product is (bad[1]), or when the product rounded to 24 bits with an
 * unbounded exponent is (IEEE's tininess after rounding, bad[2]). */
__global__ void k_mul_ftz(scan_out *o)
{
    acc A;
    GRID_STRIDE(i, 1ull << 24) {
        uint32_t ia = (uint32_t)(i >> 12), ib = (uint32_t)(i & 4095u);
        uint32_t ua = 0x3f7ff800u + ia;                       /* around 1.0 */
        uint32_t ub = (0x00800000u - 2048u + ib) | ((ia & 1u) << 31); /* around 2^-126, both signs */
        float a = u2f(ua), b = u2f(ub), r;
        asm volatile("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
        float da = (ua & 0x7fffffffu) < 0x00800000u ? copysignf(0.0f, a) : a;
        float db = (ub & 0x7fffffffu) < 0x00800000u ? copysignf(0.0f, b) : b;
        float p;
        asm volatile("mul.rn.f32 %0, %1, %2;" : "=f"(p) : "f"(da), "f"(db));
        float after = fabsf(p) < 0x1p-126f ? copysignf(0.0f, p) : p;
        double exact = (double)da * (double)db;
        float before = fabs(exact) < 0x1p-126 ? copysignf(0.0f, p) : p;
        double r24 = (double)__double2float_rn(exact * 0x1p64) * 0x1p-64; /* 24 bits, unbounded exponent */
        float ieee = fabs(r24) < 0x1p-126 ? copysignf(0.0f, p) : p;
        A.n[0]++;
        if (f2u(r) != f2u(after)) record(o, A, 0, ua, f2u(r), f2u(after));
        if (f2u(r) != f2u(before)) A.bad[1]++;
        if (f2u(r) != f2u(ieee)) A.bad[2]++;
    }
    A.flush(o);
}

__global__ void k_bf16_nan(uint16_t *out)
{
    const uint16_t qnan = 0x7fc0, nnan = 0xffc0, one = 0x3f80, inf = 0x7f80, pz = 0x0000, nz = 0x8000;
    const uint16_t pa[6][2] = {{qnan, one}, {one, qnan}, {qnan, qnan}, {nz, pz}, {inf, qnan}, {nnan, one}};
    for (int i = 0; i < 6; i++) {
        __nv_bfloat162 x, y;
        x.x = __ushort_as_bfloat16(pa[i][0]);
        x.y = __ushort_as_bfloat16(pa[i][1]);
        y.x = __ushort_as_bfloat16(pa[i][1]);
        y.y = __ushort_as_bfloat16(pa[i][0]);
        __nv_bfloat162 m = __hmax2(x, y);
        out[4 * i] = __bfloat16_as_ushort(m.x);
        out[4 * i + 1] = __bfloat16_as_ushort(m.y);
        __nv_bfloat162 ab = __habs2(x);
        out[4 * i + 2] = __bfloat16_as_ushort(ab.x);
        out[4 * i + 3] = __bfloat16_as_ushort(__hmax(x.x, x.y));
    }
}

__global__ void k_constants(float *out)
{
    out[0] = hw(OP_RCP_FTZ, 6.0f);
    out[1] = hw(OP_RCP_FTZ, 1.0f);
    out[2] = hw(OP_RCP, 6.0f);
    out[3] = hw(OP_RCP_FTZ, 448.0f);
    out[4] = hw(OP_RCP_FTZ, 2688.0f);
}

/* ---- host ------------------------------------------------------------------------ */

static FILE *g_sum;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    vfprintf(g_sum, fmt, ap);
    va_end(ap);
}

static scan_out *new_out(void)
{
    scan_out *o;
    CK(cudaMalloc(&o, sizeof *o));
    CK(cudaMemset(o, 0, sizeof *o));
    return o;
}

static scan_out get_out(scan_out *d)
{
    scan_out h;
    CK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    return h;
}

static void print_out(const char *what, const scan_out &h, const char *const *cls, int ncls)
{
    for (int c = 0; c < ncls; c++)
        if (h.n[c] || h.bad[c])
            say("  %-16s %-14s inputs %12llu  mismatches %llu\n", what, cls[c], h.n[c], h.bad[c]);
    for (unsigned long long k = 0; k < h.nfirst && k < C_FIRST; k++)
        say("  %-16s first mismatch: input 0x%08x got 0x%08x expected 0x%08x\n", what, h.first[k][0],
            h.first[k][1], h.first[k][2]);
    if (h.nan_bits_seen)
        say("  %-16s NaN results %llu, bits 0x%08x (%llu with other bits)\n", what, h.nan_bits_seen, h.nan_bits,
            h.nan_other);
}

static void print_hist(const char *what, const unsigned long long *hist)
{
    unsigned long long tot = 0;
    for (int i = 0; i < 17; i++) tot += hist[i];
    if (!tot) return;
    say("  %-16s error in ulps vs correctly rounded:", what);
    for (int i = 0; i < 17; i++)
        if (hist[i]) say(" %s%d:%llu", i == 0 ? "<=" : i == 16 ? ">=" : "", i - 8, hist[i]);
    say("\n");
}

static void write_file(const std::string &path, const void *p, size_t n)
{
    FILE *f = fopen(path.c_str(), "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "approx_scan: %s: cannot write\n", path.c_str());
        exit(4);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: approx_scan OUTDIR\n");
        return 2;
    }
    std::string dir = argv[1];
    g_sum = fopen((dir + "/summary.txt").c_str(), "w");
    if (!g_sum) { fprintf(stderr, "approx_scan: %s/summary.txt: cannot write\n", dir.c_str()); return 4; }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, drv = 0;
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDriverGetVersion(&drv));
    say("device: %s, sm_%d%d, %d SMs; CUDA runtime %d, driver %d\n", prop.name, prop.major, prop.minor,
        prop.multiProcessorCount, rt, drv);
    const int TB = 256, GB = prop.multiProcessorCount * 16;
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    float ms;

    /* constants the kernels use */
    {
        float *d, h[5];
        CK(cudaMalloc(&d, sizeof h));
        k_constants<<<1, 1>>>(d);
        CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        CK(cudaFree(d));
        float cr6 = 1.0f / 6.0f;
        uint32_t b[5], c6;
        memcpy(b, h, sizeof b);
        memcpy(&c6, &cr6, 4);
        say("constants: rcp.approx.ftz(6) = 0x%08x (fl(1/6) = 0x%08x), rcp.approx.ftz(1) = 0x%08x, "
            "rcp.approx(6) = 0x%08x, rcp.approx.ftz(448) = 0x%08x, rcp.approx.ftz(2688) = 0x%08x\n",
            b[0], c6, b[1], b[2], b[3], b[4]);
    }

    /* rcp: table, then every input */
    static const char *const rcls[] = {"normal", "subnormal-out", "subnormal-in", "zero", "inf", "nan"};
    for (int op = OP_RCP_FTZ; op <= OP_RCP; op++) {
        uint32_t *tab;
        int8_t *dev;
        CK(cudaMalloc(&tab, (1u << 23) * sizeof(uint32_t)));
        CK(cudaMalloc(&dev, 1u << 23));
        scan_out *o = new_out();
        CK(cudaEventRecord(t0));
        k_rcp_table<<<GB, TB>>>(op, tab, dev, o);
        k_rcp_check<<<GB, TB>>>(op, tab, o);
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms, t0, t1));
        scan_out h = get_out(o);
        std::vector<int8_t> hd(1u << 23);
        CK(cudaMemcpy(hd.data(), dev, hd.size(), cudaMemcpyDeviceToHost));
        CK(cudaFree(tab));
        CK(cudaFree(dev));
        say("%s (%.0f ms for 2^23 + 2^32 inputs): mantissa hypothesis\n", op_name[op], ms);
        print_out(op_name[op], h, rcls, 6);
        say("  %-16s table rcp(1.m) - correctly rounded:", op_name[op]);
        for (int i = 0; i < 17; i++)
            if (h.hist[0][i]) say(" %s%d:%llu", i == 0 ? "<=" : i == 16 ? ">=" : "", i - 8, h.hist[0][i]);
        say("\n");
        write_file(dir + (op == OP_RCP_FTZ ? "/rcp_approx_ftz.dev" : "/rcp_approx.dev"), hd.data(), hd.size());
    }

    /* ex2 */
    static const char *const xcls[] = {"normal", "subnormal-out", "zero-out", "inf-out", "nan", "frac-hyp",
                                       "subnormal-in"};
    FILE *fi = fopen((dir + "/ex2_int.txt").c_str(), "w");
    if (!fi) { fprintf(stderr, "approx_scan: ex2_int.txt: cannot write\n"); return 4; }
    fprintf(fi, "# n ex2.approx.ftz.f32(n) ex2.approx.f32(n) (float32 bits, hex), n = -160..160\n");
    std::vector<float> ix[2];
    for (int op = OP_EX2_FTZ; op <= OP_EX2; op++) {
        float *d;
        CK(cudaMalloc(&d, 321 * sizeof(float)));
        k_ex2_int<<<2, 256>>>(op, d);
        ix[op - OP_EX2_FTZ].resize(321);
        CK(cudaMemcpy(ix[op - OP_EX2_FTZ].data(), d, 321 * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaFree(d));
        scan_out *o = new_out();
        CK(cudaEventRecord(t0));
        k_ex2_scan<<<GB, TB>>>(op, o);
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms, t0, t1));
        scan_out h = get_out(o);
        say("%s (%.0f ms, 2^32 inputs; reference: exp2 in double, rounded; %llu ambiguous)\n", op_name[op], ms,
            h.amb);
        print_out(op_name[op], h, xcls, 7);
        print_hist("  normal results", h.hist[0]);
        print_hist("  other results", h.hist[1]);
    }
    /* against 2^n correctly rounded to float (0 below 2^-149 and at 2^-150;
     * ftz: 0 below 2^-126) */
    int bad_ftz = 0, bad_noftz = 0, first_noftz = 0;
    for (int i = 0; i <= 320; i++) {
        uint32_t a, b;
        memcpy(&a, &ix[0][i], 4);
        memcpy(&b, &ix[1][i], 4);
        fprintf(fi, "%d 0x%08x 0x%08x\n", i - 160, a, b);
        int n = i - 160;
        float want = n > 127 ? INFINITY : n < -149 ? 0.0f : ldexpf(1.0f, n);
        if (ix[0][i] != (n < -126 ? 0.0f : want)) bad_ftz++;
        if (ix[1][i] != want && !bad_noftz++) first_noftz = n;
    }
    fclose(fi);
    say("ex2 of integers -160..160: ex2.approx.ftz.f32 %s; ex2.approx.f32 %d differ from 2^n (the first at n = %d)\n",
        bad_ftz ? "NOT 2^n (see ex2_int.txt)" : "exactly 2^n, 0 below -126, Inf above 127", bad_noftz, first_noftz);

    /* lg2 */
    static const char *const lcls[] = {"normal", "subnormal-in", "zero", "inf", "nan", "negative", "mant-hyp"};
    const uint32_t cap = 1u << 20;
    for (int op = OP_LG2_FTZ; op <= OP_LG2; op++) {
        uint32_t *fl, *ce;
        unsigned long long *nl, hn[2];
        CK(cudaMalloc(&fl, cap * 4));
        CK(cudaMalloc(&ce, cap * 4));
        CK(cudaMalloc(&nl, sizeof hn));
        CK(cudaMemset(nl, 0, sizeof hn));
        scan_out *o = new_out();
        CK(cudaEventRecord(t0));
        k_lg2_scan<<<GB, TB>>>(op, o, fl, ce, nl, cap);
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms, t0, t1));
        scan_out h = get_out(o);
        CK(cudaMemcpy(hn, nl, sizeof hn, cudaMemcpyDeviceToHost));
        say("%s (%.0f ms, 2^32 inputs; reference: log2 in double; %llu ambiguous), max |error| over normal "
            "inputs %.3g\n", op_name[op], ms, h.amb, h.max_abs_err);
        print_out(op_name[op], h, lcls, 7);
        print_hist("  normal inputs", h.hist[0]);
        print_hist("  subnormal in", h.hist[1]);
        say("  %-16s floor(lg2) != exact floor(log2) for %llu inputs, ceil for %llu inputs\n", op_name[op],
            hn[0], hn[1]);
        for (int w = 0; w < 2; w++) {
            size_t k = hn[w] < cap ? (size_t)hn[w] : cap;
            std::vector<uint32_t> v(k);
            if (k) CK(cudaMemcpy(v.data(), w ? ce : fl, k * 4, cudaMemcpyDeviceToHost));
            std::sort(v.begin(), v.end());
            std::string nm = dir + "/" + (op == OP_LG2_FTZ ? "lg2_approx_ftz" : "lg2_approx") +
                             (w ? "_ceil.u32" : "_floor.u32");
            write_file(nm, v.data(), k * 4);
            for (size_t j = 0; j < k && j < 4; j++) say("    e.g. %s 0x%08x\n", w ? "ceil" : "floor", v[j]);
        }
        CK(cudaFree(fl));
        CK(cudaFree(ce));
        CK(cudaFree(nl));
    }

    /* conversions */
    {
        scan_out *o4 = new_out(), *o8 = new_out();
        CK(cudaEventRecord(t0));
        k_cvt_check<<<GB, TB>>>(o4, o8);
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms, t0, t1));
        static const char *const ccls[] = {"non-NaN", "NaN"};
        scan_out h4 = get_out(o4), h8 = get_out(o8);
        say("cvt.rn.satfinite.e4m3x2.f32 vs round-to-nearest-even satfinite (%.0f ms, 2^32 inputs):\n", ms);
        print_out("e4m3", h4, ccls, 2);
        say("__nv_cvt_float_to_e8m0(satfinite, round up) on sm_%d%d vs the exact power-of-two ceiling:\n",
            prop.major, prop.minor);
        print_out("e8m0-up", h8, ccls, 2);
    }
    {
        scan_out *o = new_out();
        k_mul_ftz<<<GB, TB>>>(o);
        CK(cudaDeviceSynchronize());
        scan_out h = get_out(o);
        say("mul.rn.ftz.f32 near 2^-126 (%llu products): %llu differ from 'flush the rounded float below "
            "2^-126', %llu from 'flush the exact product below 2^-126', %llu from IEEE tininess after rounding\n",
            h.n[0], h.bad[0], h.bad[1], h.bad[2]);
        for (unsigned long long k = 0; k < h.nfirst && k < 4; k++)
            say("  first: a 0x%08x got 0x%08x after-model 0x%08x\n", h.first[k][0], h.first[k][1], h.first[k][2]);
    }
    {
        uint16_t *d, h[24];
        CK(cudaMalloc(&d, sizeof h));
        k_bf16_nan<<<1, 1>>>(d);
        CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        CK(cudaFree(d));
        static const char *const nm[6] = {"(NaN,1)", "(1,NaN)", "(NaN,NaN)", "(-0,+0)", "(Inf,NaN)", "(-NaN,1)"};
        say("bf16 __hmax2(x, swap(x)) / __habs2(x).x / __hmax(x.x, x.y):");
        for (int i = 0; i < 6; i++)
            say(" %s -> %04x %04x / %04x / %04x;", nm[i], h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]);
        say("\n");
    }
    fclose(g_sum);
    return 0;
}
