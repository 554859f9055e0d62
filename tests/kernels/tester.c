/* Kernel tester: every fast path against the scalar reference, bit for bit.
 *
 *   tester [--seed N] [--iterations N] [--level avx2|avx512] [--quiet]
 *
 * For each SIMD level the CPU and build have (fp4s_kernels_select), for every
 * profile of fp4s_profile_at() and each format it defines, plus MXFP4,
 * NVFP4 and FP8 variants that cover every scale rule, recipe, tie rule,
 * zero-sign, exact-zero and non-finite policy and 1-D/2-D scaling, it
 * quantizes the same input through fp4s_quantize with the reference and with
 * the level, and compares codes, scale bytes, FP8 scales, dequantized floats
 * (bits), the integer counters and the err2/x2 sums of fp4s_qstats
 * exactly (the sums are exact sums rounded to double). It then dequantizes the reference's codes (and random
 * bytes: every code and scale byte) with both and compares, compares
 * fp4s_amax, and checks that 1 and 2 threads give identical bytes. Codes only:
 * every level (the reference included) also quantizes each case with
 * st == NULL (no stats: the kernels skip the error sums and counters), and
 * its codes, scale bytes, FP8 scales and dequantized floats must be the same
 * bits as with stats (through fp4s_quantize, on 1 and 2 threads, and by a
 * direct call of each SIMD table's quantize for every spec). Inputs:
 * random shapes and row strides, random rows of varied magnitude plus planted
 * blocks (exact E2M1 ties at the block scale, +-1 ulp around them, NVFP4
 * exact ties through a power-of-two tensor scale, FP8 exact E4M3 ties,
 * saturating values, fp32 subnormals, values near FLT_MAX, NaN/Inf at random
 * positions, all-zero and -0 blocks and tensors, amax on the boundaries of every scale
 * rule); in a quarter of the cases the tensor amax is off by a random factor
 * (a stale amax: saturating block scales), and specs without a tensor scale
 * also run with ts = NULL. The first mismatch is printed with profile,
 * level, row, column, input bits and both outputs, and the exit status is
 * 1. The seed is printed so that a failure can be replayed with --seed.
 * It also prints which specs each level runs itself (the others fall back
 * to the reference through FP4S_ENOTSUP). */
#include <fp4scope/quant.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/kernels.h"
#include "../splitmix.h"

/* ---- random numbers (splitmix64) ------------------------------------------------ */
static uint64_t rng_state;
static uint64_t rnd(void) { return splitmix_next(&rng_state); }
static uint32_t rndu(uint32_t n) { return (uint32_t)(rnd() % n); }
static double rndf(void) { return (double)(rnd() >> 11) * 0x1p-53; }
static float gauss(void)
{
    double u = rndf() + 1e-300, v = rndf();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static float bits2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- test specs ------------------------------------------------------------------- */
typedef struct tspec {
    char name[96];
    fp4s_spec s;
    bool profile;      /* a named profile (the thread check runs on these) */
} tspec;

static tspec specs[4096];
static int nspecs;

static void add_spec(const fp4s_spec *s, const char *name, bool profile)
{
    if (nspecs >= (int)(sizeof specs / sizeof specs[0])) return;
    if (fp4s_spec_check(s) != 0) return;
    specs[nspecs].s = *s;
    specs[nspecs].profile = profile;
    snprintf(specs[nspecs].name, sizeof specs[nspecs].name, "%s", name);
    nspecs++;
}

static void build_specs(void)
{
    const fp4s_profile_info *p;
    for (size_t pi = 0; (p = fp4s_profile_at(pi)); pi++) {
        for (int f = FP4S_MXFP4; f <= FP4S_FP8; f++) {
            if (!(p->formats & (1u << f))) continue;
            fp4s_spec s;
            if (fp4s_spec_profile(&s, (fp4s_format)f, p->name) != 0) continue;
            char nm[96];
            snprintf(nm, sizeof nm, "%s/%s", p->name, fp4s_format_name((fp4s_format)f));
            add_spec(&s, nm, true);
        }
    }
    /* MXFP4: every rule x tie x zero sign x exact-zero code x non-finite
     * policy, from ocp */
    fp4s_spec base;
    if (fp4s_spec_profile(&base, FP4S_MXFP4, "ocp") == 0) {
        for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int z = 0; z < 2; z++)
                    for (int zi = 0; zi < FP4S_ZIN_COUNT; zi++)
                        for (int nf = 0; nf < FP4S_NF_COUNT; nf++) {
                            fp4s_spec s = base;
                            s.mx_rule = (fp4s_mx_rule)r;
                            s.tie = (fp4s_tie)t;
                            s.keep_neg_zero = z;
                            s.zero_in = (fp4s_zero_in)zi;
                            s.nonfinite = (fp4s_nonfinite)nf;
                            s.mx_zero_block_code = (uint8_t)((r + t + nf + zi) & 1 ? 127 : 0);
                            char nm[96];
                            snprintf(nm, sizeof nm, "mxfp4 rule=%s tie=%s negzero=%d zero_in=%s nf=%s zero=%u",
                                     fp4s_mx_rule_name(s.mx_rule), fp4s_tie_name(s.tie), z,
                                     fp4s_zero_in_name(s.zero_in), fp4s_nonfinite_name(s.nonfinite),
                                     s.mx_zero_block_code);
                            add_spec(&s, nm, false);
                        }
    }
    /* FP8: every granularity x tie rule */
    for (int g = 0; g < FP4S_FP8_GRAN_COUNT; g++)
        for (int t = 0; t < FP4S_TIE_COUNT; t++) {
            static const char *gp[] = {"fp8-tensor", "fp8-1x128", "fp8-128x128"};
            fp4s_spec s;
            if (fp4s_spec_profile(&s, FP4S_FP8, gp[g]) != 0) continue;
            s.tie = (fp4s_tie)t;
            char nm[96];
            snprintf(nm, sizeof nm, "fp8 %s tie=%s", gp[g], fp4s_tie_name(s.tie));
            add_spec(&s, nm, false);
        }
    /* NVFP4: every recipe x tie x zero sign x global-scale convention x 1-D/2-D */
    if (fp4s_spec_profile(&base, FP4S_NVFP4, "te") == 0) {
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int z = 0; z < 2; z++)
                    for (int zi = 0; zi < FP4S_ZIN_COUNT; zi++)
                        for (int d2 = 0; d2 < 2; d2++) {
                            fp4s_spec s = base;
                            s.nv_recipe = (fp4s_nv_recipe)rc;
                            s.tie = (fp4s_tie)t;
                            s.keep_neg_zero = z;
                            s.zero_in = (fp4s_zero_in)zi;
                            s.tile2d = d2;
                            s.nonfinite = (fp4s_nonfinite)((rc + t + zi) % FP4S_NF_COUNT);
                            s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                            char nm[96];
                            snprintf(nm, sizeof nm, "nvfp4 recipe=%s tie=%s negzero=%d zero_in=%s nf=%s %s",
                                     fp4s_nv_recipe_name(s.nv_recipe), fp4s_tie_name(s.tie), z,
                                     fp4s_zero_in_name(s.zero_in), fp4s_nonfinite_name(s.nonfinite),
                                     d2 ? "2d" : "1d");
                            add_spec(&s, nm, false);
                        }
        /* row-scaled (per-token): each recipe with a tensor scale under each tensor-scale rule; and a
         * static input scale small enough that block scales clamp at 448 */
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int tr = 0; tr < FP4S_TSR_COUNT; tr++)
                for (int t = 0; t < 2; t++) {
                    fp4s_spec s = base;
                    s.nv_recipe = (fp4s_nv_recipe)rc;
                    s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                    s.nv_scope = FP4S_SCOPE_ROW;
                    s.nv_tsrule = (fp4s_nv_tsrule)tr;
                    s.nonfinite = (fp4s_nonfinite)((rc + tr + t) % FP4S_NF_COUNT);
                    s.tensor_amax = t ? FP4S_TAMAX_ALL : FP4S_TAMAX_FINITE;
                    char nm[96];
                    snprintf(nm, sizeof nm, "nvfp4 recipe=%s row-scaled tsrule=%s nf=%s amax=%s",
                             fp4s_nv_recipe_name(s.nv_recipe), fp4s_nv_tsrule_name(s.nv_tsrule),
                             fp4s_nonfinite_name(s.nonfinite), fp4s_tensor_amax_name(s.tensor_amax));
                    add_spec(&s, nm, false);
                    s.nv_scope = FP4S_SCOPE_TENSOR;
                    s.nv_tsrule = FP4S_TSR_RECIPE;
                    s.nv_input_scale = t ? 0x1p-12f : 3.0e-3f;
                    if (fp4s_nv_recipe_is_4over6(s.nv_recipe)) s.nv_4over6_math = FP4S_4OVER6_DECODE;
                    snprintf(nm, sizeof nm, "nvfp4 recipe=%s input_scale=%a nf=%s", fp4s_nv_recipe_name(s.nv_recipe),
                             (double)s.nv_input_scale, fp4s_nonfinite_name(s.nonfinite));
                    add_spec(&s, nm, false);
                }
        /* every 4over6 knob: error, arithmetic, bound */
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++) {
            if (!fp4s_nv_recipe_is_4over6((fp4s_nv_recipe)rc)) continue;
            for (int e = 0; e < FP4S_4OVER6_COUNT; e++)
                for (int m = 0; m < FP4S_4OVER6_MATH_COUNT; m++)
                    for (int bd = 0; bd < 2; bd++) {
                        fp4s_spec s = base;
                        s.nv_recipe = (fp4s_nv_recipe)rc;
                        s.nv_4over6_err = (fp4s_4over6_err)e;
                        s.nv_4over6_math = (fp4s_4over6_math)m;
                        s.nv_scale_bound = bd ? 448 : 256;
                        s.nonfinite = FP4S_NF_CVT;
                        char nm[96];
                        snprintf(nm, sizeof nm, "nvfp4 recipe=%s err=%d math=%s bound=%u", fp4s_nv_recipe_name(s.nv_recipe),
                                 e, fp4s_4over6_math_name(s.nv_4over6_math), (unsigned)s.nv_scale_bound);
                        add_spec(&s, nm, false);
                    }
        }
    }
}

/* ---- inputs --------------------------------------------------------------------- */
static const float e2m1_mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
static const float e2m1_val[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static float sgn(float v) { return (rnd() & 1) ? -v : v; }
static float nudge(float v, int d) { return bits2f((uint32_t)((int64_t)f2bits(v) + d)); }

/* Fill one block of n values at p. bscale: a power of two chosen for the row
 * (so that ties scale exactly); nv: the NVFP4 planting scale (or 0). */
static void fill_block(float *p, int n, int e, float nvs)
{
    float X = ldexpf(1.0f, e);
    int kind = (int)rndu(16);
    switch (kind) {
    case 0: case 1: case 2: /* gaussian at a random magnitude */ {
        float m = ldexpf(1.0f, (int)rndu(60) - 30);
        for (int i = 0; i < n; i++) p[i] = gauss() * m;
        break;
    }
    case 3: /* exact E2M1 ties at block scale X (amax 6X: k the same for every rule) */
        for (int i = 0; i < n; i++) p[i] = sgn(e2m1_mid[rndu(7)] * X);
        p[rndu((uint32_t)n)] = sgn(6.0f * X);
        break;
    case 4: /* +-1 ulp around the midpoints and the grid values */
        for (int i = 0; i < n; i++) {
            float v = (rnd() & 1) ? e2m1_mid[rndu(7)] : e2m1_val[rndu(8)];
            p[i] = sgn(nudge(v * X, (int)rndu(3) - 1));
        }
        p[rndu((uint32_t)n)] = sgn(nudge(6.0f * X, (int)rndu(3) - 1));
        break;
    case 5: /* saturating: amax in (6, 8) X under FLOOR */
        for (int i = 0; i < n; i++) p[i] = sgn((float)(rndf() * 8.0) * X);
        p[rndu((uint32_t)n)] = sgn(nudge(8.0f * X, -(int)rndu(4) - 1));
        break;
    case 6: /* fp32 subnormals (and a few tiny normals) */
        for (int i = 0; i < n; i++) p[i] = sgn(bits2f(rndu(0x00800000u + (rnd() & 1 ? 0x100000u : 0))));
        break;
    case 7: /* near FLT_MAX */
        for (int i = 0; i < n; i++) p[i] = sgn(bits2f(0x7f7fffffu - rndu(1u << 24)));
        if (rnd() & 1) p[rndu((uint32_t)n)] = sgn(FLT_MAX);
        break;
    case 8: /* NaN / Inf at random positions among normal values */ {
        for (int i = 0; i < n; i++) p[i] = gauss() * X;
        int k = 1 + (int)rndu(3);
        for (int j = 0; j < k; j++) {
            uint32_t w = rndu(4);
            float v = w == 0 ? INFINITY : w == 1 ? -INFINITY
                    : bits2f((w == 2 ? 0x7fc00000u : 0xffc00000u) | rndu(0x3fffff));
            p[rndu((uint32_t)n)] = v;
        }
        break;
    }
    case 9: /* all zero, with signs */
        for (int i = 0; i < n; i++) p[i] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case 10: /* amax on a scale-rule boundary: 2^e, 1.5*2^e, 1.75*2^e, +-1 ulp */ {
        static const float m[] = {1.0f, 1.5f, 1.75f, 2.0f, 3.0f, 3.5f, 6.0f, 7.0f};
        float a = nudge(m[rndu(8)] * X, (int)rndu(5) - 2);
        for (int i = 0; i < n; i++) p[i] = sgn((float)rndf() * a);
        p[rndu((uint32_t)n)] = sgn(a);
        break;
    }
    case 11: /* LOG2F trouble: amax just below a power of two, tiny amax */ {
        uint32_t ex = rndu(8);
        float a = bits2f((ex << 23) | 0x7fffffu);
        if (rnd() & 1) a = bits2f(0x00ffffffu - rndu(4));
        for (int i = 0; i < n; i++) p[i] = sgn((float)rndf() * a);
        p[rndu((uint32_t)n)] = sgn(a);
        break;
    }
    case 12: /* NVFP4 exact ties: block amax 6*nvs, values mid * nvs */
        if (nvs > 0.0f) {
            for (int i = 0; i < n; i++) p[i] = sgn(e2m1_mid[rndu(7)] * nvs);
            p[rndu((uint32_t)n)] = sgn(6.0f * nvs);
            break;
        }
        /* fall through */
    case 13: /* mixed zeros and tiny values (scale underflow) */
        for (int i = 0; i < n; i++) p[i] = (rnd() & 3) ? 0.0f : gauss() * ldexpf(1.0f, -(int)rndu(30) - 10);
        break;
    case 14: /* a single non-zero value */
        for (int i = 0; i < n; i++) p[i] = 0.0f;
        p[rndu((uint32_t)n)] = sgn(bits2f(rndu(0x7f800000u)));
        break;
    default: /* uniform in [-X*8, X*8] */
        for (int i = 0; i < n; i++) p[i] = (float)(rndf() * 16.0 - 8.0) * X;
        break;
    }
}

/* Fill rows x cols (stride ld). The first element of the tensor plants a
 * tensor amax of 2688 * 2^j, so that the NVFP4 decode scale is a power of two
 * and blocks of case 12 hit exact ties. Blocks of 16 (the smallest block). */
static void fill_tensor(float *x, size_t rows, size_t cols, size_t ld)
{
    if (rndu(16) == 0) {
        /* an all-zero tensor (+0 and -0): tensor amax 0, which torchao and
         * ModelOpt turn into 0/0, NaN block scales (the negative default NaN) */
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < ld; c++) x[r * ld + c] = c < cols ? ((rnd() & 1) ? -0.0f : 0.0f) : NAN;
        return;
    }
    if (rndu(6) == 0) {
        /* FP8 exact ties: tensor (and every tile) amax 448 * X with X a power
         * of two, so that x / (amax / 448) lands exactly on E4M3 midpoints
         * (subnormal ones included) and grid values */
        float X = ldexpf(1.0f, (int)rndu(40) - 20);
        for (size_t r = 0; r < rows; r++) {
            for (size_t c = 0; c < cols; c++) {
                uint8_t k = (uint8_t)rndu(0x7E);
                float v = fp4s_e4m3_decode(k);
                if (rnd() & 1) v = 0.5f * (v + fp4s_e4m3_decode((uint8_t)(k + 1)));
                x[r * ld + c] = sgn(v * X);
            }
            for (size_t c = 0; c < cols; c += 128) x[r * ld + c] = sgn(448.0f * X);
            for (size_t c = cols; c < ld; c++) x[r * ld + c] = NAN;
        }
        return;
    }
    int j = (int)rndu(40) - 20;
    float nvs_base = ldexpf(1.0f, j);
    for (size_t r = 0; r < rows; r++) {
        int e = (int)rndu(250) - 125;
        for (size_t c = 0; c < cols; c += 16) {
            int be = (rnd() & 3) ? e : (int)rndu(250) - 125;
            float nvs = nvs_base * ldexpf(1.0f, -(int)rndu(12));
            fill_block(x + r * ld + c, cols - c < 16 ? (int)(cols - c) : 16, be, nvs);
        }
        for (size_t c = cols; c < ld; c++) x[r * ld + c] = NAN; /* padding: never read */
    }
    if (rnd() & 1) {
        /* keep the planted tensor amax the largest finite value */
        float t = 2688.0f * nvs_base;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                float v = x[r * ld + c];
                if (isfinite(v) && fabsf(v) > t) x[r * ld + c] = sgn(t * (float)rndf());
            }
        x[0] = t;
    }
}

/* ---- one comparison --------------------------------------------------------------- */
typedef struct result {
    uint8_t *codes, *scales;
    float *sf32, *deq;
    fp4s_qstats st;
    fp4s_tscale ts;
    int rc;
} result;

typedef struct shape {
    size_t rows, cols, ld, nb, sf_rows, sf_cols;
} shape;

static int quiet;
static long n_compared, n_fast;
/* The tensor amax given to fp4s_tscale_init is the true one times this
 * factor (1 in most cases): a stale or calibrated amax (TE's amax history)
 * makes block amax exceed the tensor amax, which drives the E4M3 block scale
 * into saturation and the encode factor towards overflow. */
static float amax_factor = 1.0f;
/* Specs without a tensor scale (MXFP4, ggml NVFP4, FP8 tiles) are also run
 * with ts = NULL, as the front end allows. */
static int null_ts;

static int needs_ts(const fp4s_spec *s)
{
    return (s->format == FP4S_NVFP4 && fp4s_get_nv_recipe_traits(s->nv_recipe)->tscale != FP4S_NV_TS_NONE) ||
           (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR);
}

static void res_alloc(result *r, const shape *sh)
{
    r->codes = calloc(sh->rows * sh->cols + 1, 1);
    r->scales = calloc(sh->rows * sh->nb + 1, 1);
    r->sf32 = calloc(sh->sf_rows * sh->sf_cols + 1, sizeof(float));
    r->deq = calloc(sh->rows * sh->cols + 1, sizeof(float));
    if (!r->codes || !r->scales || !r->sf32 || !r->deq) {
        fprintf(stderr, "tester: out of memory\n");
        exit(2);
    }
}

static void res_free(result *r)
{
    free(r->codes); free(r->scales); free(r->sf32); free(r->deq);
}

/* with_stats 0: st == NULL (codes only); r->st stays zero. */
static int run_quant(const fp4s_spec *s, const float *x, const shape *sh, result *r,
                     int with_stats)
{
    memset(&r->st, 0, sizeof r->st);
    memset(r->codes, 0xAB, sh->rows * sh->cols);
    memset(r->scales, 0xAB, sh->rows * sh->nb);
    memset(r->deq, 0xAB, sh->rows * sh->cols * sizeof(float));
    memset(r->sf32, 0xAB, sh->sf_rows * sh->sf_cols * sizeof(float));
    uint64_t nf = 0;
    /* the amax the spec's engine takes (NaN or Inf for tensor_amax "all"
     * when such a value is planted) */
    float amax = fp4s_spec_amax(s, x, sh->rows, sh->cols, sh->ld, &nf);
    if (isfinite(amax)) {
        amax *= amax_factor;
        if (isinf(amax)) amax = FLT_MAX;
    }
    r->rc = fp4s_tscale_init(s, amax, &r->ts);
    if (r->rc) return r->rc;
    fp4s_qout o = {.codes = r->codes, .ld_codes = sh->cols,
                   .scales = s->format == FP4S_FP8 ? NULL : r->scales, .ld_scales = sh->nb,
                   .scale_f32 = s->format == FP4S_FP8 ? r->sf32 : NULL, .ld_scale_f32 = sh->sf_cols,
                   .dequant = r->deq, .ld_dequant = sh->cols};
    r->rc = fp4s_quantize(s, null_ts ? NULL : &r->ts, x, sh->rows, sh->cols, sh->ld, 0, &o,
                          with_stats ? &r->st : NULL);
    return r->rc;
}

static void print_ctx(const char *what, const tspec *t, const char *level, size_t row,
                      size_t col, const float *x, const shape *sh)
{
    fprintf(stderr, "MISMATCH %s: profile '%s', level %s, row %zu, column %zu", what,
            t->name, level, row, col);
    if (x && row < sh->rows && col < sh->cols)
        fprintf(stderr, ", input %a (0x%08" PRIx32 ")", (double)x[row * sh->ld + col],
                f2bits(x[row * sh->ld + col]));
    fprintf(stderr, "\n");
}

static void print_block(const float *x, const shape *sh, size_t row, size_t col, size_t bs)
{
    size_t c0 = col / bs * bs;
    fprintf(stderr, "  block inputs (row %zu, columns %zu..%zu):", row, c0, c0 + bs - 1);
    for (size_t c = c0; c < c0 + bs && c < sh->cols; c++)
        fprintf(stderr, "%s%08" PRIx32, (c - c0) % 8 ? " " : "\n    ", f2bits(x[row * sh->ld + c]));
    fprintf(stderr, "\n");
}

#define CMP_U64(field)                                                                    \
    if (a->st.field != b->st.field) {                                                     \
        fprintf(stderr, "MISMATCH qstats.%s: profile '%s', level %s: ref %" PRIu64          \
                ", %s %" PRIu64 "\n", #field, t->name, level, a->st.field, level,         \
                b->st.field);                                                             \
        return 1;                                                                         \
    }

/* The double sums are exact sums rounded to double (kernels/cpu/quant_sums.h):
 * every level and thread count gives the same bits. */
static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Compare the outputs (return code, tensor scale, codes, scale bytes,
 * dequantized floats, FP8 scales) of result b (level) with a (reference). */
static int compare_outputs(const tspec *t, const char *level, const float *x, const shape *sh,
                           const result *a, const result *b)
{
    const fp4s_spec *s = &t->s;
    if (a->rc != b->rc) {
        fprintf(stderr, "MISMATCH return code: profile '%s', level %s: ref %d, %s %d\n",
                t->name, level, a->rc, level, b->rc);
        return 1;
    }
    if (a->rc) return 0; /* both refused the same way */
    if (memcmp(&a->ts, &b->ts, sizeof a->ts)) {
        fprintf(stderr, "MISMATCH tensor scale: profile '%s', level %s: ref amax %a s_enc %a"
                " s_dec %a, %s amax %a s_enc %a s_dec %a\n", t->name, level,
                (double)a->ts.amax, (double)a->ts.s_enc, (double)a->ts.s_dec, level,
                (double)b->ts.amax, (double)b->ts.s_enc, (double)b->ts.s_dec);
        return 1;
    }
    size_t bs = s->block;
    for (size_t r = 0; r < sh->rows; r++)
        for (size_t c = 0; c < sh->cols; c++) {
            size_t i = r * sh->cols + c;
            if (a->codes[i] != b->codes[i]) {
                print_ctx("element code", t, level, r, c, x, sh);
                fprintf(stderr, "  ref code 0x%02x, %s code 0x%02x\n", a->codes[i], level, b->codes[i]);
                print_block(x, sh, r, c, bs);
                return 1;
            }
            if (s->format != FP4S_FP8 && c % bs == 0 &&
                a->scales[r * sh->nb + c / bs] != b->scales[r * sh->nb + c / bs]) {
                print_ctx("scale byte", t, level, r, c, x, sh);
                fprintf(stderr, "  block %zu: ref scale 0x%02x, %s scale 0x%02x\n", c / bs,
                        a->scales[r * sh->nb + c / bs], level, b->scales[r * sh->nb + c / bs]);
                print_block(x, sh, r, c, bs);
                return 1;
            }
            if (f2bits(a->deq[i]) != f2bits(b->deq[i])) {
                print_ctx("dequantized value", t, level, r, c, x, sh);
                fprintf(stderr, "  ref %a (0x%08" PRIx32 "), %s %a (0x%08" PRIx32 ")\n",
                        (double)a->deq[i], f2bits(a->deq[i]), level, (double)b->deq[i],
                        f2bits(b->deq[i]));
                print_block(x, sh, r, c, bs);
                return 1;
            }
        }
    if (s->format == FP4S_FP8)
        for (size_t i = 0; i < sh->sf_rows * sh->sf_cols; i++)
            if (f2bits(a->sf32[i]) != f2bits(b->sf32[i])) {
                fprintf(stderr, "MISMATCH fp8 scale %zu: profile '%s', level %s: ref %a, %s %a\n",
                        i, t->name, level, (double)a->sf32[i], level, (double)b->sf32[i]);
                return 1;
            }
    return 0;
}

/* Outputs and stats of b (level) against a (reference). */
static int compare(const tspec *t, const char *level, const float *x, const shape *sh,
                   const result *a, const result *b)
{
    if (compare_outputs(t, level, x, sh, a, b)) return 1;
    if (a->rc) return 0;
    CMP_U64(elements) CMP_U64(blocks) CMP_U64(saturated) CMP_U64(zero_blocks)
    CMP_U64(nonfinite) CMP_U64(nan) CMP_U64(inf) CMP_U64(nonfinite_blocks)
    CMP_U64(neg_zero) CMP_U64(scale_underflow)
    if (!same_bits(a->st.err2, b->st.err2) || !same_bits(a->st.x2, b->st.x2)) {
        fprintf(stderr, "MISMATCH qstats sums: profile '%s', level %s: ref err2 %.17g x2 %.17g,"
                " %s err2 %.17g x2 %.17g\n", t->name, level, a->st.err2, a->st.x2, level,
                b->st.err2, b->st.x2);
        return 1;
    }
    return 0;
}

static int compare_dequant(const tspec *t, const char *level, const shape *sh,
                           const fp4s_tscale *ts, const uint8_t *codes, const uint8_t *scales,
                           const float *sf32, const char *what)
{
    const fp4s_spec *s = &t->s;
    size_t n = sh->rows * sh->cols;
    float *da = malloc(n * sizeof(float) + 4), *db = malloc(n * sizeof(float) + 4);
    if (!da || !db) { fprintf(stderr, "tester: out of memory\n"); exit(2); }
    memset(da, 0xCD, n * sizeof(float));
    memset(db, 0xCD, n * sizeof(float));
    int ret = 0;
    if (null_ts) ts = NULL;
    fp4s_kernels_select("ref");
    int ra = fp4s_dequantize(s, ts, codes, sh->cols, scales, sh->nb, sf32, sh->sf_cols,
                             sh->rows, sh->cols, 0, da, sh->cols);
    fp4s_kernels_select(level);
    int rb = fp4s_dequantize(s, ts, codes, sh->cols, scales, sh->nb, sf32, sh->sf_cols,
                             sh->rows, sh->cols, 0, db, sh->cols);
    if (ra != rb) {
        fprintf(stderr, "MISMATCH dequantize (%s) return code: profile '%s', level %s: ref %d, %s %d\n",
                what, t->name, level, ra, level, rb);
        ret = 1;
    }
    for (size_t i = 0; !ret && !ra && i < n; i++)
        if (f2bits(da[i]) != f2bits(db[i])) {
            size_t r = i / sh->cols, c = i % sh->cols;
            fprintf(stderr, "MISMATCH dequantize (%s): profile '%s', level %s, row %zu, column %zu:"
                    " code 0x%02x scale 0x%02x: ref %a (0x%08" PRIx32 "), %s %a (0x%08" PRIx32 ")\n",
                    what, t->name, level, r, c, codes[i],
                    s->format == FP4S_FP8 ? 0 : scales[r * sh->nb + c / s->block],
                    (double)da[i], f2bits(da[i]), level, (double)db[i], f2bits(db[i]));
            ret = 1;
        }
    free(da);
    free(db);
    return ret;
}

static void make_shape(const fp4s_spec *s, size_t rows, size_t cols, size_t pad, shape *sh)
{
    sh->rows = rows;
    sh->cols = cols;
    sh->ld = cols + pad;
    sh->nb = cols / s->block;
    if (s->format == FP4S_FP8) {
        size_t tr = s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
        sh->sf_rows = s->fp8_gran == FP4S_FP8_TENSOR ? 1 : (rows + tr - 1) / tr;
        sh->sf_cols = s->fp8_gran == FP4S_FP8_TENSOR ? 1 : cols / 128;
    } else {
        sh->sf_rows = sh->sf_cols = 1;
    }
}

static int one_case(const tspec *t, const char *const *levels, int nlev)
{
    const fp4s_spec *s = &t->s;
    size_t align = fp4s_spec_row_align(s);
    size_t rows = 1 + rndu(align > 1 ? 2 * (uint32_t)align : 12);
    size_t cols = 128 * (1 + rndu(5));
    if (s->block == 1 && (rnd() & 1)) cols = 1 + rndu(300); /* FP8 per tensor: any width */
    size_t pad = (rnd() & 1) ? rndu(5) : 0;
    shape sh;
    make_shape(s, rows, cols, pad, &sh);
    float *x = malloc(rows * sh.ld * sizeof(float));
    if (!x) { fprintf(stderr, "tester: out of memory\n"); exit(2); }
    fill_tensor(x, rows, cols, sh.ld);
    amax_factor = (rnd() & 3) ? 1.0f : ldexpf(1.0f, (int)rndu(17) - 8) * (float)(0.5 + rndf());
    null_ts = !needs_ts(s) && (rnd() & 1);

    result ref, fast, co;
    res_alloc(&ref, &sh);
    res_alloc(&fast, &sh);
    res_alloc(&co, &sh);
    int ret = 0;
    fp4s_kernels_select("ref");
    run_quant(s, x, &sh, &ref, 1);
    /* codes only (st == NULL): the same bytes as with stats */
    run_quant(s, x, &sh, &co, 0);
    n_compared++;
    ret = compare_outputs(t, "ref codes-only (st = NULL) vs ref with stats", x, &sh, &ref, &co);
    for (int l = 0; l < nlev && !ret; l++) {
        fp4s_kernels_select(levels[l]);
        run_quant(s, x, &sh, &fast, 1);
        n_compared++;
        ret = compare(t, levels[l], x, &sh, &ref, &fast);
        if (ret) continue;
        run_quant(s, x, &sh, &co, 0);
        n_compared++;
        char lv[96];
        snprintf(lv, sizeof lv, "%s codes-only (st = NULL)", levels[l]);
        ret = compare_outputs(t, lv, x, &sh, &ref, &co);
        if (ret || ref.rc) continue;
        ret = compare_dequant(t, levels[l], &sh, &ref.ts, ref.codes, ref.scales, ref.sf32,
                              "reference codes");
        if (ret) continue;
        /* arbitrary bytes: every code, every scale byte (NaN scales included) */
        for (size_t i = 0; i < rows * cols; i++) fast.codes[i] = (uint8_t)rnd();
        for (size_t i = 0; i < rows * sh.nb; i++) fast.scales[i] = (uint8_t)rnd();
        ret = compare_dequant(t, levels[l], &sh, &ref.ts, fast.codes, fast.scales, ref.sf32,
                              "random bytes");
        if (ret) continue;
        uint64_t na = 0, nb = 0;
        fp4s_kernels_select("ref");
        float aa = fp4s_amax(x, rows, cols, sh.ld, &na);
        fp4s_kernels_select(levels[l]);
        float ab = fp4s_amax(x, rows, cols, sh.ld, &nb);
        if (f2bits(aa) != f2bits(ab) || na != nb) {
            fprintf(stderr, "MISMATCH amax: profile '%s', level %s: ref %a (%" PRIu64
                    " non-finite), %s %a (%" PRIu64 " non-finite)\n", t->name, levels[l],
                    (double)aa, na, levels[l], (double)ab, nb);
            ret = 1;
        }
    }
    res_free(&ref);
    res_free(&fast);
    res_free(&co);
    free(x);
    return ret;
}

/* 1 vs 2 threads: identical bytes, counters and sums (on a tensor big enough
 * to be split). Then
 * 2 threads codes only (st == NULL): identical bytes. */
static int thread_case(const tspec *t, const char *level)
{
    const fp4s_spec *s = &t->s;
    size_t align = fp4s_spec_row_align(s);
    /* more than one grain of rows per thread (quant.c splits at 64K elements) */
    size_t rows = align > 1 ? (4 * align > 256 ? 4 * align : 256) : 384, cols = 1024;
    shape sh;
    make_shape(s, rows, cols, 0, &sh);
    float *x = malloc(rows * cols * sizeof(float));
    if (!x) { fprintf(stderr, "tester: out of memory\n"); exit(2); }
    fill_tensor(x, rows, cols, cols);
    amax_factor = 1.0f;
    null_ts = 0;
    result a, b;
    res_alloc(&a, &sh);
    res_alloc(&b, &sh);
    fp4s_kernels_select(level);
    fp4s_set_threads(1);
    run_quant(s, x, &sh, &a, 1);
    fp4s_set_threads(2);
    run_quant(s, x, &sh, &b, 1);
    char lv[96];
    snprintf(lv, sizeof lv, "%s threads=2 vs threads=1", level);
    int ret = compare(t, lv, x, &sh, &a, &b);
    if (!ret) {
        run_quant(s, x, &sh, &b, 0);
        snprintf(lv, sizeof lv, "%s threads=2 codes-only (st = NULL) vs threads=1 with stats", level);
        ret = compare_outputs(t, lv, x, &sh, &a, &b);
    }
    fp4s_set_threads(1);
    res_free(&a);
    res_free(&b);
    free(x);
    return ret;
}

/* Which specs the level runs itself (not through the reference fallback),
 * and, for each, that the table's quantize with st == NULL (codes only)
 * returns the same code and writes the same bytes as with stats. Returns 1
 * on a mismatch. */
static int coverage(const char *level)
{
    const fp4s_kernel_table *k = NULL;
#ifdef FP4S_TESTER_HAVE_AVX2
    if (!strcmp(level, "avx2")) k = &fp4s_kernels_avx2;
#endif
#ifdef FP4S_TESTER_HAVE_AVX512
    if (!strcmp(level, "avx512")) k = &fp4s_kernels_avx512;
#endif
    if (!k) return 0;
    int q = 0, d = 0;
    for (int i = 0; i < nspecs; i++) {
        const fp4s_spec *s = &specs[i].s;
        size_t rows = fp4s_spec_row_align(s), cols = 256;
        static float x[128 * 256], deq[128 * 256], deq2[128 * 256];
        static uint8_t codes[128 * 256], scales[128 * 16], codes2[128 * 256], scales2[128 * 16];
        float sf[256], sf2[256];
        /* a ramp with a planted NaN, Inf and -0 (the fallback blocks too) */
        for (size_t j = 0; j < rows * cols; j++) x[j] = (float)j * 0.01f * (j & 1 ? -1.0f : 1.0f);
        x[37] = NAN;
        x[cols + 70 < rows * cols ? cols + 70 : 70] = -INFINITY;
        x[100] = -0.0f;
        fp4s_tscale ts;
        if (fp4s_tscale_init(s, 4.0f, &ts)) continue;
        memset(codes2, 0xAB, sizeof codes2);
        memset(scales2, 0xAB, sizeof scales2);
        memset(deq2, 0xAB, sizeof deq2);
        memset(sf2, 0xAB, sizeof sf2);
        memset(codes, 0xAB, sizeof codes);
        memset(scales, 0xAB, sizeof scales);
        memset(deq, 0xAB, sizeof deq);
        memset(sf, 0xAB, sizeof sf);
        fp4s_qout o = {.codes = codes, .ld_codes = cols, .scales = scales, .ld_scales = cols / s->block,
                       .scale_f32 = sf, .ld_scale_f32 = 2, .dequant = deq, .ld_dequant = cols};
        fp4s_qout o2 = {.codes = codes2, .ld_codes = cols, .scales = scales2, .ld_scales = cols / s->block,
                        .scale_f32 = sf2, .ld_scale_f32 = 2, .dequant = deq2, .ld_dequant = cols};
        fp4s_qstats st = {0};
        int rq = k->quantize(s, &ts, x, rows, cols, cols, 0, &o, &st);
        int rq2 = k->quantize(s, &ts, x, rows, cols, cols, 0, &o2, NULL);
        if (rq != rq2 || memcmp(codes, codes2, sizeof codes) || memcmp(scales, scales2, sizeof scales) ||
            memcmp(deq, deq2, sizeof deq) || memcmp(sf, sf2, sizeof sf)) {
            fprintf(stderr, "MISMATCH %s table quantize with st = NULL vs with stats: profile '%s':"
                    " return %d vs %d, codes %s, scales %s, dequant %s, fp8 scales %s\n", level,
                    specs[i].name, rq2, rq, memcmp(codes, codes2, sizeof codes) ? "differ" : "same",
                    memcmp(scales, scales2, sizeof scales) ? "differ" : "same",
                    memcmp(deq, deq2, sizeof deq) ? "differ" : "same",
                    memcmp(sf, sf2, sizeof sf) ? "differ" : "same");
            return 1;
        }
        int rd = k->dequantize(s, &ts, codes, cols, scales, cols / s->block, sf, 2, rows, cols,
                               0, deq, cols);
        q += rq == 0;
        d += rd == 0;
        if (!quiet && (rq || rd))
            printf("  %s: '%s' uses the reference for%s%s\n", level, specs[i].name,
                   rq ? " quantize" : "", rd ? " dequantize" : "");
    }
    printf("%s: fast quantize for %d of %d specs (codes only identical), fast dequantize for %d\n",
           level, q, nspecs, d);
    n_fast += q;
    return 0;
}

static int parse_num(const char *opt, const char *v, unsigned long long *out)
{
    char *end;
    if (!v || !*v) goto bad;
    *out = strtoull(v, &end, 0);
    if (*end) goto bad;
    return 0;
bad:
    fprintf(stderr, "tester: %s: expected a non-negative integer, got '%s'\n", opt, v ? v : "");
    return -1;
}

int main(int argc, char **argv)
{
    unsigned long long seed = (unsigned long long)time(NULL) ^ ((unsigned long long)clock() << 32);
    unsigned long long iters = 20;
    const char *only_level = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            if (parse_num("--seed", argv[++i], &seed)) return 2;
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            if (parse_num("--iterations", argv[++i], &iters)) return 2;
        } else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
            only_level = argv[++i];
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--help")) {
            printf("usage: tester [--seed N] [--iterations N] [--level avx2|avx512] [--quiet]\n");
            return 0;
        } else {
            fprintf(stderr, "tester: unknown argument '%s'\nusage: tester [--seed N] [--iterations N] [--level avx2|avx512] [--quiet]\n", argv[i]);
            return 2;
        }
    }
    printf("tester: seed %llu, iterations %llu (replay with --seed %llu)\n", seed, iters, seed);
    fflush(stdout);
    rng_state = seed;
    build_specs();
    if (nspecs == 0) {
        fprintf(stderr, "tester: no profiles: fp4s_profile_at() gave nothing usable\n");
        return 1;
    }
    const char *cand[] = {"avx2", "avx512"};
    const char *levels[2];
    int nlev = 0;
    for (int i = 0; i < 2; i++) {
        if (only_level && strcmp(only_level, cand[i])) continue;
        if (fp4s_kernels_select(cand[i]) == 0) levels[nlev++] = cand[i];
        else printf("tester: level %s not available on this CPU/build\n", cand[i]);
    }
    printf("tester: %d specs, levels:", nspecs);
    for (int i = 0; i < nlev; i++) printf(" %s", levels[i]);
    printf("\n");
    fp4s_set_threads(1);
    for (int l = 0; l < nlev; l++)
        if (coverage(levels[l])) {
            fprintf(stderr, "tester: FAILED codes-only check of the %s table\n", levels[l]);
            return 1;
        }

    for (unsigned long long it = 0; it < iters; it++)
        for (int i = 0; i < nspecs; i++)
            if (one_case(&specs[i], levels, nlev)) {
                fprintf(stderr, "tester: FAILED at iteration %llu (seed %llu)\n", it, seed);
                return 1;
            }
    for (int l = 0; l < nlev; l++)
        for (int i = 0; i < nspecs; i++)
            if (specs[i].profile && thread_case(&specs[i], levels[l])) {
                fprintf(stderr, "tester: FAILED thread check (seed %llu)\n", seed);
                return 1;
            }
    fp4s_kernels_select("ref");
    for (int i = 0; i < nspecs; i++)
        if (specs[i].profile && thread_case(&specs[i], "ref")) {
            fprintf(stderr, "tester: FAILED thread check (seed %llu)\n", seed);
            return 1;
        }
    printf("tester: OK: %ld comparisons over %d specs and %d levels, all bit-identical\n",
           n_compared, nspecs, nlev);
    return 0;
}
