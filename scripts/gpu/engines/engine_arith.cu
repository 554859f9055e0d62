/* The rollout engines' FP4 quantize arithmetic, written out in each engine's
 * order of float32 operations with the instructions the engine's kernel uses,
 * run on the GPU: the bytes fp4scope's engine profiles must reproduce.
 *
 *   engine_arith INDIR OUTDIR
 *
 * The engines' own kernels do not run on an H200 (sm_90): they convert to
 * E2M1 with cvt.rn.satfinite.e2m1x2.f32, which ptxas accepts only for
 * sm_100a and later, and FlashInfer / TensorRT-LLM / SGLang compile their
 * bodies only for __CUDA_ARCH__ >= 1000. This program is not their code: it
 * performs the same float32 operations in the same order with the same
 * instructions wherever sm_90 has them -- bf16 __habs2 / __hmax2 for the
 * block amax, rcp.approx.ftz.f32 through inline PTX, cvt.rn.satfinite.e4m3x2
 * through __nv_fp8_e4m3, CUDA's __nv_cvt_float_to_e8m0 (its software path on
 * sm_90), exp2f, __fdiv_rn, and ordinary multiplies compiled with the
 * engine's flags (FlashInfer's JIT passes -use_fast_math: mul.ftz, ex2.approx.ftz;
 * vLLM's build does not) -- and converts to E2M1 with CUDA's cuda_fp4.h
 * __nv_cvt_float_to_fp4, whose sm_90 path is NVIDIA's software model of the
 * cvt instruction (round to nearest even, satfinite, NaN -> +6, sign kept).
 * The recipes (one per engine path; see man/fp4scope-formats(7)):
 *
 *   fi-nv        FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4, NVFP4, fast math
 *   fi-nv-exact  the same with FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1
 *   fi-mx        FlashInfer / TRT-LLM cvt_warp_fp16_to_fp4, UE8M0 (MXFP4)
 *   vllm-nv      vLLM scaled_fp4_quant (cvt_warp_fp16_to_fp4, E4M3), also SGLang's
 *   vllm-mx      vLLM mxfp4_experts_quant after vLLM PR #43557
 *   vllm-mx-old  vLLM mxfp4_experts_quant before vLLM PR #43557
 *
 * This file is compiled twice: with -DFAST -use_fast_math (the fi-* recipes)
 * and without (the vllm-* recipes).
 *
 * INDIR/tensors.txt lists one tensor a line, "name rows cols offset" (offset in
 * bf16 elements into INDIR/tensors.bf16, little-endian uint16). OUTDIR gets,
 * per recipe R, R.codes (one E2M1 code per element, 0..15), R.scales (one
 * scale byte per block) in the order of tensors.txt, and R.txt with each
 * tensor's name and its global scale S as float32 bits (NVFP4: S = 2688/amax
 * over the finite values, FLT_MAX if that overflows, 1 for amax 0, the scale
 * a caller hands these kernels; MXFP4: 1). */
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "engine_arith: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(5);                                                                               \
        }                                                                                          \
    } while (0)

/* The engines' "fast reciprocal". */
__device__ __forceinline__ float rcp_approx_ftz(float a)
{
    float b;
    asm volatile("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(b) : "f"(a));
    return b;
}

/* Eight bf16 values a thread holds, as the engines' PackedVec (4 x bf162). */
struct vec8 { __nv_bfloat162 e[4]; };

/* Block amax as the engines take it: __habs2 / __hmax2 over the thread's
 * pairs, __hmax2 with the partner threads (xor 1, 2: 2 threads for 16
 * elements, 4 for 32), then __hmax of the two halves, widened to float. */
template <int THREADS>
__device__ float block_amax(const vec8 &v)
{
    __nv_bfloat162 m = __habs2(v.e[0]);
    for (int i = 1; i < 4; i++) m = __hmax2(m, __habs2(v.e[i]));
    m = __hmax2(__shfl_xor_sync(0xffffffffu, m, 1), m);
    if (THREADS == 4) m = __hmax2(__shfl_xor_sync(0xffffffffu, m, 2), m);
    return __bfloat162float(__hmax(m.x, m.y));
}

/* E2M1 codes of v[i] * f (the multiply in the engine's float mode). */
__device__ void elements(const vec8 &v, float f, uint8_t *q)
{
    for (int i = 0; i < 4; i++) {
        float2 p = __bfloat1622float2(v.e[i]);
        p.x *= f;
        p.y *= f;
        q[2 * i] = (uint8_t)__nv_cvt_float_to_fp4(p.x, __NV_E2M1, cudaRoundNearest);
        q[2 * i + 1] = (uint8_t)__nv_cvt_float_to_fp4(p.y, __NV_E2M1, cudaRoundNearest);
    }
}

#ifdef FAST
enum { R_FI_NV, R_FI_NV_EXACT, R_FI_MX, NREC };
static const char *const rec_name[NREC] = {"fi-nv", "fi-nv-exact", "fi-mx"};
static const int rec_block[NREC] = {16, 16, 32};
#else
enum { R_VLLM_NV, R_VLLM_MX, R_VLLM_MX_OLD, NREC };
static const char *const rec_name[NREC] = {"vllm-nv", "vllm-mx", "vllm-mx-old"};
static const int rec_block[NREC] = {16, 32, 32};
#endif

/* One recipe over n elements: each thread 8 consecutive elements, B/8
 * threads a block (the first of them writes the scale byte). */
__global__ void k_quant(int rec, int block, const uint16_t *x, size_t n, float S, uint8_t *codes, uint8_t *scales)
{
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    bool live = t * 8 < n;
    vec8 v;
    const uint16_t *p = x + (live ? t * 8 : 0);
    for (int i = 0; i < 4; i++) {
        v.e[i].x = __ushort_as_bfloat16(live ? p[2 * i] : 0);
        v.e[i].y = __ushort_as_bfloat16(live ? p[2 * i + 1] : 0);
    }
    uint8_t q[8], sf = 0;
    float outputScale;
    switch (rec) {
#ifdef FAST
    case R_FI_NV: {
        /* FlashInfer csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh
         * cvt_warp_fp16_to_fp4, E4M3 scales, fast math */
        float vecMax = block_amax<2>(v);
        float SFValue = S * (vecMax * rcp_approx_ftz(6.0f));
        __nv_fp8_e4m3 tmp = __nv_fp8_e4m3(SFValue);
        sf = tmp.__x;
        SFValue = static_cast<float>(tmp);
        outputScale = vecMax != 0 ? rcp_approx_ftz(SFValue * rcp_approx_ftz(S)) : 0.0f;
        break;
    }
    case R_FI_NV_EXACT: {
        /* the same function with DISABLE_FP4_QUANT_FAST_MATH */
        float vecMax = block_amax<2>(v);
        constexpr float fp4_max_inv = 1.0f / 6.0f;
        float SFValue = vecMax != 0.0f ? vecMax * (S * fp4_max_inv) : 0.0f;
        __nv_fp8_e4m3 tmp = __nv_fp8_e4m3(SFValue);
        sf = tmp.__x;
        SFValue = static_cast<float>(tmp);
        outputScale = vecMax != 0 ? fminf(__fdiv_rn(1.0f, SFValue * __fdiv_rn(1.0f, S)), FLT_MAX) : 0.0f;
        break;
    }
    case R_FI_MX: {
        /* the same function, UE8M0 scales (MXFP4: mxfp4_quantize, fp4_quantize sf_use_ue8m0) */
        float vecMax = block_amax<4>(v);
        vecMax *= rcp_approx_ftz(6.0f);
        __nv_fp8_storage_t c = __nv_cvt_float_to_e8m0(vecMax, __NV_SATFINITE, cudaRoundPosInf);
        sf = (uint8_t)c;
        /* exp2f_rcp: exp == 0 ? 1 : exp2f(127 - float(exp)) */
        float e = (sf == 0) ? 1.0f : exp2f(127u - static_cast<float>(sf));
        outputScale = vecMax != 0 ? e : 0.0f;
        break;
    }
#else
    case R_VLLM_NV: {
        /* vLLM csrc/libtorch_stable/quantization/fp4/nvfp4_utils.cuh
         * cvt_warp_fp16_to_fp4, UE8M0_SF = false (scaled_fp4_quant) */
        float vecMax = block_amax<2>(v);
        float SFValue = S * (vecMax * rcp_approx_ftz(6.0f));
        __nv_fp8_e4m3 tmp = __nv_fp8_e4m3(SFValue);
        sf = tmp.__x;
        SFValue = float(tmp);
        outputScale = SFValue != 0.0f ? rcp_approx_ftz(SFValue * rcp_approx_ftz(S)) : 0.0f;
        break;
    }
    case R_VLLM_MX: {
        /* the same function, UE8M0_SF = true, after PR #43557 (SFScaleVal = 1) */
        float vecMax = block_amax<4>(v);
        uint32_t max_bits = __float_as_uint(vecMax);
        uint32_t rounded_bits = (max_bits + (1u << 21)) & 0xFF800000u;
        uint32_t biased_exp = (rounded_bits >> 23) & 0xFFu;
        uint32_t scale_exp = (biased_exp > 2u) ? (biased_exp - 2u) : 0u;
        scale_exp = min(scale_exp, 254u);
        sf = (uint8_t)scale_exp;
        float SFValue = __uint_as_float(scale_exp << 23);
        outputScale = SFValue != 0.0f ? (1.0f / SFValue) : 0.0f;
        break;
    }
    case R_VLLM_MX_OLD: {
        /* before PR #43557: the exponent bits of SFScaleVal * (vecMax * rcp(6)) */
        const float SFScaleVal = 1.0f;
        float vecMax = block_amax<4>(v);
        float SFValue = SFScaleVal * (vecMax * rcp_approx_ftz(6.0f));
        uint32_t tmp = __float_as_uint(SFValue) >> 23;
        sf = (uint8_t)(tmp & 0xff);
        SFValue = __uint_as_float(tmp << 23);
        outputScale = SFValue != 0 ? rcp_approx_ftz(SFValue * rcp_approx_ftz(SFScaleVal)) : 0.0f;
        break;
    }
#endif
    default:
        outputScale = 0.0f;
    }
    elements(v, outputScale, q);
    if (!live) return;
    for (int i = 0; i < 8; i++) codes[t * 8 + i] = q[i];
    const int tpb = block / 8;
    if (t % tpb == 0) scales[t / tpb] = sf;
}

/* ---- host --------------------------------------------------------------------------- */

static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The global scale a caller computes: 2688 / amax over the finite values. */
static float global_scale(const uint16_t *x, size_t n)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(bf2f(x[i]));
        if (a <= FLT_MAX && a > amax) amax = a;
    }
    if (amax == 0.0f) return 1.0f;
    float s = 2688.0f / amax;
    if (s > FLT_MAX) s = FLT_MAX;
    if (s == 0.0f) s = 1.0f;
    return s;
}

struct tensor { std::string name; size_t rows, cols, off; };

static std::vector<tensor> read_manifest(const std::string &path)
{
    std::vector<tensor> v;
    FILE *f = fopen(path.c_str(), "r");
    if (!f) { fprintf(stderr, "engine_arith: %s: cannot read\n", path.c_str()); exit(3); }
    char name[512];
    size_t r, c, o;
    while (fscanf(f, "%511s %zu %zu %zu", name, &r, &c, &o) == 4) {
        if (c % 32) { fprintf(stderr, "engine_arith: %s: %zu columns, not a multiple of 32\n", name, c); exit(3); }
        v.push_back({name, r, c, o});
    }
    fclose(f);
    return v;
}

/* ---- the conformance corpus (--corpus DIR) ---------------------------------------------
 * Deterministic (splitmix64), bf16, 64 columns. Each tensor aims at one kind of
 * input: exact E2M1 ties at the block scale and their bf16 neighbours, scale
 * boundaries of every MXFP4 rule, E4M3 block-scale ties, bf16 subnormals,
 * values up to the bf16 maximum, zeros and -0, NaN and Inf, a tensor whose
 * outlier makes the other blocks' E4M3 scales underflow, and a tensor so
 * small that 2688/amax overflows. */
static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rndu(uint32_t n) { return (uint32_t)(rnd() % n); }

static uint16_t f2bf_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* bf16 of sign * mant * 2^e with mant a bf16 significand pattern 0..127 */
static uint16_t bfv(int sign, int e, int mant)
{
    int be = e + 127;
    if (be >= 255) return (uint16_t)((sign << 15) | 0x7f7f);
    if (be <= 0) { /* subnormal: shift the significand */
        int sh = 1 - be;
        uint32_t sig = (uint32_t)(128 + mant) >> (sh > 8 ? 8 : sh);
        return (uint16_t)((sign << 15) | (sig & 0x7f));
    }
    return (uint16_t)((sign << 15) | (be << 7) | (mant & 0x7f));
}

struct corpus {
    std::vector<uint16_t> data;
    FILE *man;
    void add(const char *name, const std::vector<uint16_t> &t, size_t cols)
    {
        fprintf(man, "%s %zu %zu %zu\n", name, t.size() / cols, cols, data.size());
        data.insert(data.end(), t.begin(), t.end());
    }
};

static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static uint16_t nudge(uint16_t h, int d) { return (uint16_t)(h + d); } /* +-1 bf16 ulp (same sign, finite) */

/* A block of B values: amax first (at a random position), ties * scale and
 * their neighbours. */
static void tie_block(uint16_t *b, int B, uint16_t amax, float scale)
{
    for (int j = 0; j < B; j++) {
        float t = ties[rndu(14)] * scale * (rndu(2) ? -1.0f : 1.0f);
        uint16_t h = f2bf_rne(t);
        int r = (int)rndu(4);
        if (r == 1 && (h & 0x7fff) > 1 && (h & 0x7fff) < 0x7f7f) h = nudge(h, 1);
        if (r == 2 && (h & 0x7fff) > 1) h = nudge(h, -1);
        b[j] = h;
    }
    b[rndu(B)] = amax;
}

static void make_corpus(const std::string &dir)
{
    corpus c;
    c.man = fopen((dir + "/tensors.txt").c_str(), "w");
    if (!c.man) { fprintf(stderr, "engine_arith: %s/tensors.txt: cannot write\n", dir.c_str()); exit(4); }
    const size_t W = 64;
    std::vector<uint16_t> t;

    /* 1. NVFP4 ties with S = 1 (tensor amax 2688): block amax 6*s_b for E4M3 s_b */
    t.assign(256 * W, 0);
    for (size_t r = 0; r < 256; r++)
        for (size_t b = 0; b < W / 16; b++) {
            int e = (int)rndu(22) - 9, m = (int)rndu(8);     /* s_b = (1 + m/8) 2^e in E4M3's range */
            float sb = ldexpf(1.0f + m / 8.0f, e);
            if (sb > 448.0f) sb = 448.0f;
            tie_block(&t[r * W + b * 16], 16, f2bf_rne(6.0f * sb), sb);
        }
    t[0] = 0x4528; /* 2688 */
    c.add("corpus.nv-ties-s1", t, W);

    /* 2. the same with a tensor amax that is not a power of two times 2688 */
    for (size_t r = 0; r < 256; r++)
        for (size_t b = 0; b < W / 16; b++) {
            int e = (int)rndu(22) - 9, m = (int)rndu(8);
            float sb = ldexpf(1.0f + m / 8.0f, e) * 0.7421875f;
            tie_block(&t[r * W + b * 16], 16, f2bf_rne(6.0f * sb), sb);
        }
    t[5] = f2bf_rne(2688.0f * 1.3671875f);
    c.add("corpus.nv-ties-s", t, W);

    /* 3. E4M3 block-scale ties: amax_b * S / 6 at the midpoint of two E4M3 codes (S = 1) */
    for (size_t r = 0; r < 256; r++)
        for (size_t b = 0; b < W / 16; b++) {
            int e = (int)rndu(24) - 10, m = (int)rndu(8);
            float mid = ldexpf(1.0f + m / 8.0f + 1.0f / 16.0f, e);   /* halfway between two 3-bit mantissas */
            uint16_t am = f2bf_rne(6.0f * mid);
            am = nudge(am, (int)rndu(3) - 1);
            tie_block(&t[r * W + b * 16], 16, am, mid);
        }
    t[7] = 0x4528;
    c.add("corpus.nv-scale-ties", t, W);

    /* 4. MXFP4 scale boundaries: amax = m * 2^k for the mantissas where the rules
     *    part (1, 1+u, 1.5-u, 1.5, 1.5+u, 1.75-u, 1.75, 1.75+u, 2-u), k over the
     *    whole bf16 range */
    static const int mants[] = {0, 1, 63, 64, 65, 95, 96, 97, 127};
    std::vector<uint16_t> mx;
    for (int k = -134; k <= 127; k++)
        for (int mi = 0; mi < 9; mi++) {
            uint16_t blk[32];
            uint16_t am = bfv(0, k, mants[mi]);
            float a = bf2f(am);
            tie_block(blk, 32, am, ldexpf(1.0f, (int)floorf(log2f(a > 0 ? a : 1e-45f))) / 4.0f);
            for (int j = 0; j < 32; j++)
                if (fabsf(bf2f(blk[j])) > a) blk[j] = (uint16_t)(am | (blk[j] & 0x8000));
            mx.insert(mx.end(), blk, blk + 32);
        }
    while (mx.size() % W) mx.push_back(0);
    c.add("corpus.mx-bounds", mx, W);

    /* 5. bf16 subnormals (and the smallest normals) */
    for (size_t i = 0; i < 128 * W; i++) {
        uint16_t h = (uint16_t)(rndu(128) | (rndu(2) << 15));
        if (rndu(16) == 0) h = (uint16_t)(h | 0x0080); /* 2^-126 binade */
        t[i] = h;
    }
    t.resize(128 * W);
    c.add("corpus.subnormal", t, W);

    /* 6. huge values: exponents 110..127, the bf16 maximum, powers of two */
    for (size_t i = 0; i < 128 * W; i++) {
        int e = 110 + (int)rndu(18);
        uint16_t h = bfv((int)rndu(2), e, (int)rndu(128));
        if (rndu(8) == 0) h = (uint16_t)(0x7f7f | (rndu(2) << 15));
        if (rndu(8) == 0) h = bfv((int)rndu(2), e, 0);
        t[i] = h;
    }
    c.add("corpus.huge", t, W);

    /* 7. zeros: +0 blocks, -0 blocks, mixed signs, a single tiny or unit value */
    for (size_t r = 0; r < 64; r++)
        for (size_t j = 0; j < W; j++) {
            size_t blk = j / 16;
            uint16_t h = 0;
            switch ((r + blk) % 6) {
            case 0: h = 0; break;
            case 1: h = 0x8000; break;
            case 2: h = (uint16_t)(rndu(2) << 15); break;
            case 3: h = (uint16_t)(rndu(2) << 15); if (j % 16 == 5) h = 0x0001; break;
            case 4: h = (uint16_t)(rndu(2) << 15); if (j % 16 == 9) h = 0x3f80; break;
            default: h = (uint16_t)(rndu(2) << 15); if (j % 16 == 0) h = 0xbf80; break;
            }
            t[r * W + j] = h;
        }
    t.resize(64 * W);
    c.add("corpus.zeros", t, W);

    /* 8. NaN and Inf: at random positions, an all-NaN block, Inf-only, NaN with Inf */
    t.assign(128 * W, 0);
    for (size_t i = 0; i < t.size(); i++) t[i] = f2bf_rne((float)((int)rndu(2001) - 1000) / 97.0f);
    for (size_t r = 0; r < 128; r++) {
        size_t b = r % 4, base = r * W + b * 16;
        switch (r % 8) {
        case 0: t[base + rndu(16)] = 0x7fc0; break;
        case 1: t[base + rndu(16)] = 0xffc0; break;
        case 2: t[base + rndu(16)] = 0x7f80; break;
        case 3: t[base + rndu(16)] = 0xff80; break;
        case 4: for (int j = 0; j < 32 && base + j < (r + 1) * W; j++) t[(base & ~31u) + j] = 0x7fc1; break;
        case 5: for (int j = 0; j < 16; j++) t[base + j] = (uint16_t)(0x7f80 | (rndu(2) << 15)); break;
        case 6: t[base + 1] = 0x7fc0; t[base + 2] = 0x7f80; break;
        default: t[base + 3] = 0x7f80; t[base + 4] = 0x0001; break;
        }
    }
    c.add("corpus.nonfinite", t, W);

    /* 9. one outlier near the bf16 maximum: every other block's E4M3 scale underflows */
    for (size_t i = 0; i < 64 * W; i++) t[i] = f2bf_rne(((float)((int)rndu(2001) - 1000)) * ldexpf(1.0f, (int)rndu(40) - 30));
    t.resize(64 * W);
    t[3] = 0x7f7f;
    c.add("corpus.outlier", t, W);

    /* 10. a tensor so small that 2688/amax overflows float32 */
    for (size_t i = 0; i < 64 * W; i++) t[i] = (uint16_t)(bfv((int)rndu(2), -128 - (int)rndu(6), (int)rndu(128)));
    c.add("corpus.tiny-tensor", t, W);

    /* 11. random blocks of every magnitude */
    t.assign(256 * W, 0);
    for (size_t r = 0; r < 256; r++)
        for (size_t b = 0; b < W / 16; b++) {
            int e = (int)rndu(60) - 30;
            for (int j = 0; j < 16; j++) {
                double u1 = ((rnd() >> 11) + 1) * 0x1p-53, u2 = (rnd() >> 11) * 0x1p-53;
                float g = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
                t[r * W + b * 16 + j] = f2bf_rne(ldexpf(g, e));
            }
        }
    c.add("corpus.random", t, W);

    fclose(c.man);
    FILE *f = fopen((dir + "/tensors.bf16").c_str(), "wb");
    if (!f || fwrite(c.data.data(), 2, c.data.size(), f) != c.data.size() || fclose(f)) {
        fprintf(stderr, "engine_arith: %s/tensors.bf16: cannot write\n", dir.c_str());
        exit(4);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--corpus")) {
        make_corpus(argv[2]);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: engine_arith INDIR OUTDIR | engine_arith --corpus DIR\n");
        return 2;
    }
    std::string in = argv[1], out = argv[2];
    std::vector<tensor> ts = read_manifest(in + "/tensors.txt");
    size_t total = 0;
    for (auto &t : ts) total = std::max(total, t.off + t.rows * t.cols);
    std::vector<uint16_t> x(total);
    FILE *f = fopen((in + "/tensors.bf16").c_str(), "rb");
    if (!f || fread(x.data(), 2, total, f) != total) { fprintf(stderr, "engine_arith: tensors.bf16: short\n"); return 3; }
    fclose(f);
    uint16_t *dx;
    uint8_t *dc, *ds;
    CK(cudaMalloc(&dx, total * 2));
    CK(cudaMemcpy(dx, x.data(), total * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dc, total));
    CK(cudaMalloc(&ds, total / 16 + 1));
    for (int rec = 0; rec < NREC; rec++) {
        const int B = rec_block[rec];
        std::string base = out + "/" + rec_name[rec];
        FILE *fc = fopen((base + ".codes").c_str(), "wb"), *fs = fopen((base + ".scales").c_str(), "wb"),
             *ft = fopen((base + ".txt").c_str(), "w");
        if (!fc || !fs || !ft) { fprintf(stderr, "engine_arith: %s.*: cannot write\n", base.c_str()); return 4; }
        size_t ncodes = 0, nscales = 0;
        for (auto &t : ts) {
            size_t n = t.rows * t.cols;
            float S = B == 16 ? global_scale(&x[t.off], n) : 1.0f;
            CK(cudaMemset(dc, 0xee, n));         /* poison */
            CK(cudaMemset(ds, 0xee, n / B));
            size_t threads = n / 8;
            k_quant<<<(unsigned)((threads + 255) / 256), 256>>>(rec, B, dx + t.off, n, S, dc, ds);
            CK(cudaGetLastError());
            std::vector<uint8_t> hc(n), hs(n / B);
            CK(cudaMemcpy(hc.data(), dc, n, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(hs.data(), ds, n / B, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++)
                if (hc[i] > 15) { fprintf(stderr, "engine_arith: %s %s: code %zu not written\n", rec_name[rec], t.name.c_str(), i); return 5; }
            fwrite(hc.data(), 1, n, fc);
            fwrite(hs.data(), 1, n / B, fs);
            uint32_t sb;
            memcpy(&sb, &S, 4);
            fprintf(ft, "%s 0x%08x\n", t.name.c_str(), sb);
            ncodes += n;
            nscales += n / B;
        }
        if (fclose(fc) || fclose(fs) || fclose(ft)) { fprintf(stderr, "engine_arith: %s: write failed\n", base.c_str()); return 4; }
        printf("engine_arith: %-12s %zu tensors, %zu codes, %zu scales\n", rec_name[rec], ts.size(), ncodes, nscales);
    }
    return 0;
}
