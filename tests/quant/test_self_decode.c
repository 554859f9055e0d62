/* Every spec decodes what it stores: the dequantized values fp4s_quantize
 * returns are, bit for bit, fp4s_dequantize of the codes, scale bytes and FP8
 * scales it wrote (what a reader of fp4-quant's file, the GPU's dequantizer
 * and the analysis tools compute from the stored bytes).
 *
 *   test_self_decode
 *
 * Specs: every profile and format it defines, with each override fp4-quant's
 * options give on top (tie rule, non-finite policy, -0 kept or not,
 * zero-sign rule, NVFP4 2-D tiles, stochastic rounding and the RHT); every
 * MXFP4 scale rule x element factor, every NVFP4 recipe (with each
 * global-scale convention and 4over6 option) and every FP8 granularity, each
 * under every tie rule, non-finite policy and zero-sign rule. A spec that
 * fp4s_spec_check refuses is counted, not run. Inputs, with the tensor amax
 * the tools take (fp4s_spec_amax): blocks holding one NaN, one Inf, NaN and
 * Inf, only NaN, only Inf, beside ordinary, all-zero, subnormal and huge
 * blocks; the same without NaN; and without NaN or Inf. Each on every CPU
 * kernel level this machine runs. Exit 0 when every value agrees, 1 not. */
#include <fp4scope/quant.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec_internal.h"
#include "cpu/kernels.h"
#include "qhelp.h"

#define ROWS 32
#define COLS 128

static long n_specs, n_refused, n_checks, n_bad;

/* One 16-element piece; kinds 0-5 hold NaN or Inf. nonfinite: 0 none, 1 Inf
 * only, 2 NaN and Inf. */
static void fill16(float *p, uint64_t *rs, int nonfinite)
{
    const float m = ldexpf(1.0f, (int)(rng_next(rs) % 60) - 30);
    for (int i = 0; i < 16; i++) p[i] = (float)(rng_unif(rs) * 12.0 - 6.0) * m;
    int kind = (int)(rng_next(rs) % 12);
    if ((nonfinite < 2 && (kind == 0 || kind == 2 || kind == 3 || kind == 4)) || (nonfinite == 0 && kind < 6))
        kind = 6 + (int)(rng_next(rs) % 6);
    int at = (int)(rng_next(rs) % 16);
    switch (kind) {
    case 0: p[at] = fp4s_bits_f32(0x7FC00000u | (uint32_t)(rng_next(rs) & 0x3FFFFF)); break; /* one NaN */
    case 1: p[at] = (rng_next(rs) & 1) ? INFINITY : -INFINITY; break; /* one Inf */
    case 2: p[at] = -NAN; p[(at + 5) % 16] = INFINITY; break;         /* both */
    case 3: for (int i = 0; i < 16; i++) p[i] = NAN; break;           /* only NaN */
    case 4: p[at] = NAN; p[(at + 1) % 16] = -0.0f; break;             /* NaN beside -0 */
    case 5: for (int i = 0; i < 16; i++) p[i] = (i & 1) ? -INFINITY : INFINITY; break;
    case 6: for (int i = 0; i < 16; i++) p[i] = (i & 1) ? -0.0f : 0.0f; break;
    case 7: /* subnormals */
        for (int i = 0; i < 16; i++) p[i] = fp4s_bits_f32((uint32_t)(rng_next(rs) & 0x807FFFFFu));
        break;
    case 8: /* near FLT_MAX */
        for (int i = 0; i < 16; i++) p[i] = fp4s_bits_f32(0x7F000000u | (uint32_t)(rng_next(rs) & 0x807FFFFFu));
        break;
    case 9: p[at] = FLT_MAX; break;
    default: break; /* ordinary */
    }
}

static void print_block(const float *x, size_t i, size_t B)
{
    size_t c0 = i / B * B;
    fprintf(stderr, "  block inputs:");
    for (size_t c = c0; c < c0 + B; c++)
        fprintf(stderr, "%s%08" PRIx32, (c - c0) % 8 ? " " : "\n    ", fp4s_f32_bits(x[c]));
    fprintf(stderr, "\n");
}

/* Quantize x with s, dequantize the stored bytes, compare. */
static void check(const fp4s_spec *s, const char *name, const float *x, const char *input, const char *level)
{
    static uint8_t codes[ROWS * COLS], scales[ROWS * COLS];
    static float deq[ROWS * COLS], dec[ROWS * COLS], sf[ROWS * COLS];
    const size_t bpr = s->format == FP4S_FP8 ? 0 : COLS / s->block;
    const size_t ldsf = s->format == FP4S_FP8 && s->fp8_gran != FP4S_FP8_TENSOR ? COLS / 128 : 1;
    memset(codes, 0xAB, sizeof codes);
    memset(scales, 0xAB, sizeof scales);
    memset(deq, 0xAB, sizeof deq);
    memset(dec, 0xCD, sizeof dec);
    memset(sf, 0xAB, sizeof sf);
    fp4s_tscale ts;
    n_checks++;
    int rc = fp4s_tscale_init(s, fp4s_spec_amax(s, x, ROWS, COLS, COLS, NULL), &ts);
    fp4s_qout o = {.codes = codes, .ld_codes = COLS, .scales = bpr ? scales : NULL, .ld_scales = bpr,
                   .scale_f32 = s->format == FP4S_FP8 ? sf : NULL, .ld_scale_f32 = ldsf, .dequant = deq,
                   .ld_dequant = COLS};
    /* row-scaled NVFP4: the recorded row amaxes make the rows' tensor scales again */
    const bool rows_scaled = s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW;
    float ramax[ROWS];
    fp4s_tscale rts[ROWS];
    if (rows_scaled) o.row_amax = ramax;
    if (!rc) rc = fp4s_quantize(s, &ts, x, ROWS, COLS, COLS, 0, &o, NULL);
    if (!rc && rows_scaled) {
        rc = fp4s_tscale_init_rows(s, ramax, ROWS, rts);
        if (!rc) rc = fp4s_dequantize_rows(s, rts, codes, COLS, scales, bpr, ROWS, COLS, 0, dec, COLS);
    } else if (!rc) {
        rc = fp4s_dequantize(s, &ts, codes, COLS, bpr ? scales : NULL, bpr, s->format == FP4S_FP8 ? sf : NULL, ldsf,
                             ROWS, COLS, 0, dec, COLS);
    }
    if (rc) {
        if (++n_bad <= 20)
            fprintf(stderr, "FAIL %s (%s, %s): %s\n", name, input, level, fp4s_last_error());
        return;
    }
    for (size_t i = 0; i < ROWS * COLS; i++) {
        if (fp4s_f32_bits(deq[i]) == fp4s_f32_bits(dec[i])) continue;
        if (++n_bad <= 20) {
            char d[512];
            fp4s_spec_describe(s, d, sizeof d);
            fprintf(stderr,
                    "FAIL %s (%s, %s): row %zu column %zu: quantize gave 0x%08" PRIx32 " (%g), the stored code 0x%02x "
                    "and scale 0x%02x decode to 0x%08" PRIx32 " (%g)\n  spec: %s\n",
                    name, input, level, i / COLS, i % COLS, fp4s_f32_bits(deq[i]), (double)deq[i], codes[i],
                    bpr ? scales[i / COLS * bpr + i % COLS / s->block] : 0, fp4s_f32_bits(dec[i]), (double)dec[i], d);
            print_block(x, i, s->format == FP4S_FP8 ? 16 : s->block);
        }
        return; /* one failure per spec and input */
    }
}

static float inputs[3][ROWS * COLS];
static const char *const input_names[3] = {"NaN and Inf blocks", "Inf blocks, no NaN", "finite"};
static const char *levels[3];
static int nlev;

static void run(const fp4s_spec *s0, const char *name)
{
    fp4s_spec s = *s0;
    n_specs++;
    if (fp4s_spec_check(&s)) {
        n_refused++;
        return;
    }
    for (int l = 0; l < nlev; l++) {
        fp4s_kernels_select(levels[l]);
        for (int k = 0; k < 3; k++) check(&s, name, inputs[k], input_names[k], levels[l]);
    }
}

/* The overrides on top of one spec: tie x non-finite x -0 x zero sign. */
static void run_overrides(const fp4s_spec *base, const char *what)
{
    char nm[200];
    for (int t = 0; t < FP4S_TIE_COUNT; t++)
        for (int nf = 0; nf < FP4S_NF_COUNT; nf++)
            for (int kz = 0; kz < 2; kz++)
                for (int zi = 0; zi < FP4S_ZIN_COUNT; zi++) {
                    fp4s_spec s = *base;
                    s.tie = (fp4s_tie)t;
                    s.nonfinite = (fp4s_nonfinite)nf;
                    s.keep_neg_zero = kz;
                    s.zero_in = (fp4s_zero_in)zi;
                    snprintf(nm, sizeof nm, "%s round=%s nonfinite=%s neg_zero=%s zero_input=%s", what,
                             fp4s_tie_name(s.tie), fp4s_nonfinite_name(s.nonfinite), kz ? "keep" : "drop",
                             fp4s_zero_in_name(s.zero_in));
                    run(&s, nm);
                }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    fp4s_set_threads(1); /* many small calls (the threads' agreement is the tester's) */
    static const char *const cand[3] = {"ref", "avx2", "avx512"};
    for (int i = 0; i < 3; i++)
        if (fp4s_kernels_select(cand[i]) == 0) levels[nlev++] = cand[i];
    uint64_t rs = 0x5E1FDEC0DEull;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < ROWS * COLS; i += 16) fill16(&inputs[k][i], &rs, 2 - k);
    /* a row of NaN blocks and one of Inf blocks in the first input, a row of
     * Inf blocks in the second */
    for (size_t c = 0; c < COLS; c++) {
        inputs[0][3 * COLS + c] = NAN;
        inputs[0][7 * COLS + c] = (c & 1) ? INFINITY : -INFINITY;
        inputs[1][5 * COLS + c] = INFINITY;
    }

    char nm[160];
    /* every profile and format, with fp4-quant's overrides */
    const fp4s_profile_info *p;
    for (size_t pi = 0; (p = fp4s_profile_at(pi)); pi++)
        for (int f = FP4S_MXFP4; f <= FP4S_FP8; f++) {
            fp4s_spec s;
            if (!(p->formats & (1u << f)) || fp4s_spec_profile(&s, (fp4s_format)f, p->name)) continue;
            snprintf(nm, sizeof nm, "%s/%s", p->name, fp4s_format_name((fp4s_format)f));
            run_overrides(&s, nm);
            if (f != FP4S_NVFP4) continue;
            fp4s_spec v = s;
            v.tile2d = !s.tile2d;
            snprintf(nm, sizeof nm, "%s/nvfp4 tiles=%s", p->name, v.tile2d ? "16x16" : "1x16");
            run_overrides(&v, nm);
            v = s;
            v.sr = !s.sr;
            v.sr_seed = v.sr ? 7 : 0;
            snprintf(nm, sizeof nm, "%s/nvfp4 sr=%s", p->name, v.sr ? "on" : "off");
            run_overrides(&v, nm);
            v = s;
            v.rht = !s.rht;
            v.rht_signs = v.rht ? FP4S_RHT_TE_SIGNS : 0;
            snprintf(nm, sizeof nm, "%s/nvfp4 rht=%s", p->name, v.rht ? "te" : "off");
            run_overrides(&v, nm);
        }
    /* every MXFP4 scale rule x element factor (zero-block code 0 or 127) */
    fp4s_spec base;
    if (fp4s_spec_profile(&base, FP4S_MXFP4, "ocp")) return 2;
    for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
        for (int e = 0; e < FP4S_MX_ELEM_COUNT; e++) {
            fp4s_spec s = base;
            s.profile[0] = '\0';
            s.mx_rule = (fp4s_mx_rule)r;
            s.mx_elem = (fp4s_mx_elem)e;
            s.mx_zero_block_code = (r + e) & 1 ? 127 : 0;
            snprintf(nm, sizeof nm, "mxfp4 rule=%s elements=%s zero_block_code=%u", fp4s_mx_rule_name(s.mx_rule),
                     fp4s_mx_elem_name(s.mx_elem), s.mx_zero_block_code);
            run_overrides(&s, nm);
        }
    /* every NVFP4 recipe x global-scale convention x 1-D/2-D (and 4over6's options) */
    if (fp4s_spec_profile(&base, FP4S_NVFP4, "te")) return 2;
    for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
        for (int g = 0; g < FP4S_GS_COUNT; g++)
            for (int d2 = 0; d2 < 2; d2++)
                for (int fo = 0; fo < (rc == FP4S_NV_TE_4OVER6 ? 3 : 1); fo++) {
                    fp4s_spec s = base;
                    s.profile[0] = '\0';
                    s.nv_recipe = (fp4s_nv_recipe)rc;
                    s.global_scale = (fp4s_global_scale)g;
                    s.tile2d = d2;
                    s.tensor_amax = (rc + g) & 1 ? FP4S_TAMAX_ALL : FP4S_TAMAX_FINITE;
                    if (fo) {
                        s.nv_4over6_err = fo == 1 ? FP4S_4OVER6_MSE : FP4S_4OVER6_MAE;
                        s.nv_scale_bound = fo == 1 ? 256 : 448;
                    }
                    snprintf(nm, sizeof nm, "nvfp4 recipe=%s global_scale=%s tiles=%s tensor_amax=%s%s",
                             fp4s_nv_recipe_name(s.nv_recipe), fp4s_global_scale_name(s.global_scale),
                             d2 ? "16x16" : "1x16", fp4s_tensor_amax_name(s.tensor_amax),
                             fo == 1 ? " 4over6=mse/256" : fo == 2 ? " 4over6=mae/448" : "");
                    run_overrides(&s, nm);
                }
    /* every FP8 granularity */
    for (int g = 0; g < FP4S_FP8_GRAN_COUNT; g++) {
        static const char *const gp[] = {"fp8-tensor", "fp8-1x128", "fp8-128x128"};
        if (fp4s_spec_profile(&base, FP4S_FP8, gp[g])) return 2;
        run_overrides(&base, gp[g]);
    }
    printf("%ld specs (%ld refused by fp4s_spec_check), %d kernel level%s, %ld checks, %ld failed\n", n_specs,
           n_refused, nlev, nlev == 1 ? "" : "s", n_checks, n_bad);
    return n_bad ? 1 : 0;
}
