/* The quantizer's statistics on the GPU (fp4s_cuda_qstats and
 * fp4s_cuda_quantize_host_all: what fp4-quant --device cuda runs) against
 * fp4s_quantize, bit for bit: every counter of fp4s_qstats, the exact sums
 * behind err2 and x2 and their values, and (GPU) the codes, scale bytes and
 * dequantized values of the same call.
 *
 *   test_cuda_qstats [--emulate] [--sanitize] [--seed N] [--quiet]
 *
 * Specs: every profile the kernels implement (NVFP4 also with 2-D tiles),
 * every MXFP4 scale rule and NVFP4 recipe under each tie rule and non-finite
 * policy, the zero-input policies, -0 kept or not. Data: Gaussian blocks at
 * random scales, exact E2M1 ties, all-zero and -0 blocks, float32
 * subnormals, values near FLT_MAX, NaN and Inf planted, tiny blocks beside
 * large ones (scale underflow), saturating blocks; shapes with a short last
 * 2-D tile and a row stride above the row; the rows as one call and as two
 * (their statistics merged). --emulate runs the statistics kernel's
 * arithmetic on the host (qstats.cu), so the check runs wherever nvcc is
 * found; without it the GPU is used and the program exits 77 without one.
 * --sanitize: a few specs (for compute-sanitizer). Exit 0 equal, 1 not. */
#include <fp4scope/fp4scope.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/emulate.h"
#include "rng.h"

static int quiet, emulate, sanitize;
static long n_checks, n_bad;

typedef struct tspec {
    fp4s_spec s;
    char name[96];
} tspec;
static tspec specs[1024];
static int nspecs;

static void add(const fp4s_spec *s, const char *name)
{
    if (nspecs >= (int)(sizeof specs / sizeof specs[0]) || fp4s_spec_check(s) || !fp4s_cuda_supports(s)) return;
    specs[nspecs].s = *s;
    snprintf(specs[nspecs].name, sizeof specs[nspecs].name, "%s", name);
    nspecs++;
}

static void build_specs(void)
{
    const fp4s_profile_info *p;
    char nm[96];
    for (size_t pi = 0; (p = fp4s_profile_at(pi)); pi++)
        for (int f = FP4S_MXFP4; f <= FP4S_NVFP4; f++) {
            fp4s_spec s;
            if (!(p->formats & (1u << f)) || fp4s_spec_profile(&s, (fp4s_format)f, p->name)) continue;
            snprintf(nm, sizeof nm, "%s/%s", p->name, fp4s_format_name((fp4s_format)f));
            add(&s, nm);
            if (f == FP4S_NVFP4 && !s.tile2d) {
                s.tile2d = true;
                snprintf(nm, sizeof nm, "%s/nvfp4/2d", p->name);
                add(&s, nm);
            }
        }
    if (sanitize) return;
    fp4s_spec base;
    if (!fp4s_spec_profile(&base, FP4S_MXFP4, NULL))
        for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int nf = 0; nf < FP4S_NF_COUNT; nf++)
                    for (int v = 0; v < 4; v++) {
                        fp4s_spec s = base;
                        s.profile[0] = '\0';
                        s.mx_rule = (fp4s_mx_rule)r;
                        s.tie = (fp4s_tie)t;
                        s.nonfinite = (fp4s_nonfinite)nf;
                        s.keep_neg_zero = v & 1;
                        s.mx_zero_block_code = (v & 2) ? 127 : 0;
                        s.zero_in = (fp4s_zero_in)(v % FP4S_ZIN_COUNT);
                        snprintf(nm, sizeof nm, "mxfp4 %s %s %s v%d", fp4s_mx_rule_name(s.mx_rule),
                                 fp4s_tie_name(s.tie), fp4s_nonfinite_name(s.nonfinite), v);
                        add(&s, nm);
                    }
    if (!fp4s_spec_profile(&base, FP4S_NVFP4, NULL))
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++)
                for (int nf = 0; nf < FP4S_NF_COUNT; nf++)
                    for (int v = 0; v < 4; v++) {
                        fp4s_spec s = base;
                        s.profile[0] = '\0';
                        s.nv_recipe = (fp4s_nv_recipe)rc;
                        s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                        s.tie = (fp4s_tie)t;
                        s.nonfinite = (fp4s_nonfinite)nf;
                        s.tile2d = v & 1;
                        s.keep_neg_zero = (v & 2) != 0;
                        s.zero_in = (fp4s_zero_in)((v >> 1) % FP4S_ZIN_COUNT);
                        snprintf(nm, sizeof nm, "nvfp4 %s %s %s v%d", fp4s_nv_recipe_name(s.nv_recipe),
                                 fp4s_tie_name(s.tie), fp4s_nonfinite_name(s.nonfinite), v);
                        add(&s, nm);
                    }
}

/* One 16-element piece at exponent e. */
static void fill16(float *p, int e)
{
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float s = ldexpf(1.0f, e);
    switch (rndu(12)) {
    case 0: case 1: case 2:
        for (int i = 0; i < 16; i++) p[i] = gauss() * s;
        break;
    case 3: /* ties */
        for (int i = 0; i < 16; i++) p[i] = sgn(mid[rndu(7)] * s);
        p[rndu(16)] = sgn(6.0f * s);
        break;
    case 4: /* zeros, -0 */
        for (int i = 0; i < 16; i++) p[i] = (rnd() & 1) ? -0.0f : 0.0f;
        break;
    case 5: /* subnormals */
        for (int i = 0; i < 16; i++) p[i] = sgn(b2f(rndu(0x800000u)));
        break;
    case 6: /* near FLT_MAX */
        for (int i = 0; i < 16; i++) p[i] = sgn(b2f(0x7F000000u + rndu(0x7FFFFFu)));
        break;
    case 7: /* NaN / Inf */
        for (int i = 0; i < 16; i++) p[i] = gauss() * s;
        p[rndu(16)] = rnd() & 1 ? b2f(0x7FC00000u | rndu(0x400000u)) : sgn(INFINITY);
        break;
    case 8: /* tiny: scale underflow */
        for (int i = 0; i < 16; i++) p[i] = gauss() * ldexpf(1.0f, -40 - (int)rndu(90));
        break;
    case 9: /* saturating */
        for (int i = 0; i < 16; i++) p[i] = sgn((6.0f + 2.0f * (float)rndf()) * s);
        break;
    case 10: /* small negatives rounding to 0 */
        for (int i = 0; i < 16; i++) p[i] = -(float)rndf() * 0.2f * s;
        p[0] = 6.0f * s;
        break;
    default: /* raw bits */
        for (int i = 0; i < 16; i++) p[i] = b2f((uint32_t)rnd());
        break;
    }
}

static void fill(float *x, size_t rows, size_t cols, size_t ld, bool plain)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < ld; c += 16) {
            if (c >= cols) {
                for (size_t k = c; k < ld; k++) x[r * ld + k] = b2f(0x7FC0DEADu); /* padding: never read */
                continue;
            }
            if (plain) {
                for (int k = 0; k < 16; k++) x[r * ld + c + k] = gauss();
            } else {
                fill16(x + r * ld + c, (int)rndu(40) - 20);
            }
        }
}

static bool same_f(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) && !(isnan(a[i]) && isnan(b[i]))) {
            uint32_t ua, ub;
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            printf("  first difference at element %zu: 0x%08" PRIx32 " (%.9g) against 0x%08" PRIx32 " (%.9g)\n", i, ua,
                   (double)a[i], ub, (double)b[i]);
            return false;
        }
    return true;
}

static void stats_diff(const char *what, const fp4s_qstats *a, const fp4s_qstats *b)
{
    n_checks++;
    if (!memcmp(a, b, sizeof *a)) return;
    n_bad++;
    if (n_bad > 40) return;
    printf("MISMATCH %s: statistics (device vs CPU): elements %" PRIu64 "/%" PRIu64 " blocks %" PRIu64 "/%" PRIu64
           " saturated %" PRIu64 "/%" PRIu64 " zero_blocks %" PRIu64 "/%" PRIu64 " nan %" PRIu64 "/%" PRIu64
           " inf %" PRIu64 "/%" PRIu64 " nf_blocks %" PRIu64 "/%" PRIu64 " neg_zero %" PRIu64 "/%" PRIu64
           " underflow %" PRIu64 "/%" PRIu64 " err2 %a/%a x2 %a/%a sums %s\n",
           what, b->elements, a->elements, b->blocks, a->blocks, b->saturated, a->saturated, b->zero_blocks,
           a->zero_blocks, b->nan, a->nan, b->inf, a->inf, b->nonfinite_blocks, a->nonfinite_blocks, b->neg_zero,
           a->neg_zero, b->scale_underflow, a->scale_underflow, b->err2, a->err2, b->x2, a->x2,
           memcmp(a->sums, b->sums, sizeof a->sums) ? "differ" : "equal");
}

static void one(const tspec *t, size_t rows, size_t cols, size_t ld, bool plain)
{
    const fp4s_spec *s = &t->s;
    float *x = malloc(rows * ld * sizeof *x);
    uint8_t *c1 = malloc(rows * cols), *c2 = malloc(rows * cols);
    size_t ns = rows * (cols / s->block);
    uint8_t *s1 = malloc(ns), *s2 = malloc(ns);
    float *d1 = malloc(rows * cols * sizeof *d1), *d2 = malloc(rows * cols * sizeof *d2);
    if (!x || !c1 || !c2 || !s1 || !s2 || !d1 || !d2) {
        fprintf(stderr, "test_cuda_qstats: out of memory\n");
        exit(2);
    }
    fill(x, rows, cols, ld, plain);
    fp4s_tscale ts;
    if (fp4s_tscale_init(s, fp4s_spec_amax(s, x, rows, cols, ld, NULL), &ts)) {
        printf("MISMATCH %s: tscale: %s\n", t->name, fp4s_last_error());
        n_bad++;
        goto out;
    }
    fp4s_qstats ref, dev, dev2;
    memset(&ref, 0, sizeof ref);
    memset(&dev, 0, sizeof dev);
    memset(&dev2, 0, sizeof dev2);
    fp4s_qout o = {0};
    o.codes = c1;
    o.ld_codes = cols;
    o.scales = s1;
    o.ld_scales = cols / s->block;
    o.dequant = d1;
    o.ld_dequant = cols;
    char what[200];
    snprintf(what, sizeof what, "%s [%zu x %zu] ld %zu%s", t->name, rows, cols, ld, plain ? " plain" : "");
    if (fp4s_quantize(s, &ts, x, rows, cols, ld, 0, &o, &ref)) {
        printf("MISMATCH %s: fp4s_quantize: %s\n", what, fp4s_last_error());
        n_bad++;
        goto out;
    }
    /* the rows in one call, and in two at a tile boundary (merged) */
    size_t split = s->tile2d ? (rows / 2) / 16 * 16 : rows / 2;
    int rc;
    if (emulate) {
        rc = fp4s_cuda_emulate_qstats(s, &ts, x, rows, cols, ld, &dev);
        if (!rc) rc = fp4s_cuda_emulate_qstats(s, &ts, x, split, cols, ld, &dev2);
        if (!rc) rc = fp4s_cuda_emulate_qstats(s, &ts, x + split * ld, rows - split, cols, ld, &dev2);
    } else {
        memset(c2, 0xEE, rows * cols); /* poison */
        memset(s2, 0xEE, ns);
        memset(d2, 0xEE, rows * cols * sizeof *d2);
        rc = fp4s_cuda_quantize_host_all(s, &ts, x, rows, cols, ld, false, c2, s2, d2, &dev);
        if (!rc) rc = fp4s_cuda_quantize_host_all(s, &ts, x, split, cols, ld, false, NULL, NULL, NULL, &dev2);
        if (!rc)
            rc = fp4s_cuda_quantize_host_all(s, &ts, x + split * ld, rows - split, cols, ld, false, NULL, NULL, NULL,
                                             &dev2);
    }
    n_checks++;
    if (rc) {
        printf("MISMATCH %s: %s\n", what, fp4s_last_error());
        n_bad++;
        goto out;
    }
    stats_diff(what, &ref, &dev);
    char w2[260];
    snprintf(w2, sizeof w2, "%s, split at row %zu", what, split);
    stats_diff(w2, &ref, &dev2);
    if (!emulate) {
        n_checks += 3;
        if (memcmp(c1, c2, rows * cols)) { printf("MISMATCH %s: codes\n", what); n_bad++; }
        if (memcmp(s1, s2, ns)) { printf("MISMATCH %s: scales\n", what); n_bad++; }
        if (!same_f(d1, d2, rows * cols)) { printf("MISMATCH %s: dequantized values\n", what); n_bad++; }
    }
out:
    free(x);
    free(c1);
    free(c2);
    free(s1);
    free(s2);
    free(d1);
    free(d2);
}

/* The kernels refuse what fp4s_spec_check refuses: the ggml recipe's scale
 * has no NaN code, so no policy that makes NaN blocks (scale-nan, block-nan)
 * is quantized with it on the GPU either. */
static void refusals(void)
{
    fp4s_spec s;
    fp4s_tscale ts;
    float x[16];
    uint8_t c[16], sc[1];
    float d[16];
    fp4s_qstats st;
    for (int i = 0; i < 16; i++) x[i] = i == 3 ? NAN : (float)i;
    if (fp4s_spec_profile(&s, FP4S_NVFP4, "ggml") || fp4s_tscale_init(&s, 15.0f, &ts)) {
        printf("MISMATCH refusals: the ggml profile: %s\n", fp4s_last_error());
        n_bad++;
        return;
    }
    const fp4s_nonfinite nfs[2] = {FP4S_NF_SCALE_NAN, FP4S_NF_BLOCK_NAN};
    for (int k = 0; k < 2; k++) {
        s.nonfinite = nfs[k];
        memset(&st, 0, sizeof st);
        int rc = emulate ? fp4s_cuda_emulate_qstats(&s, &ts, x, 1, 16, 16, &st)
                         : fp4s_cuda_quantize_host_all(&s, &ts, x, 1, 16, 16, false, c, sc, d, &st);
        n_checks++;
        if (rc != FP4S_ENOTSUP || !strstr(fp4s_last_error(), "NaN code")) {
            printf("MISMATCH refusals: ggml nvfp4 with nonfinite=%s: return %d (%s), expected the spec's refusal\n",
                   fp4s_nonfinite_name(s.nonfinite), rc, rc ? fp4s_last_error() : "accepted");
            n_bad++;
        }
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--emulate")) emulate = 1;
        else if (!strcmp(argv[i], "--sanitize")) sanitize = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: test_cuda_qstats [--emulate] [--sanitize] [--seed N] [--quiet]\n");
            return 2;
        }
    }
    rng = seed ? seed : 1;
    printf("test_cuda_qstats: seed %" PRIu64 " (%s)\n", seed, emulate ? "host emulation" : "GPU");
    if (!emulate && !fp4s_cuda_available()) {
        char d[320];
        fp4s_cuda_describe(d, sizeof d);
        printf("SKIP: %s\n", d);
        return 77;
    }
    refusals();
    build_specs();
    if (!nspecs) {
        fprintf(stderr, "test_cuda_qstats: no spec is implemented by the kernels\n");
        return 1;
    }
    const size_t shapes[][3] = {{37, 256, 256}, {16, 64, 80}, {1, 32, 32}, {50, 512, 544}};
    for (int t = 0; t < nspecs; t++) {
        for (size_t k = 0; k < (sanitize ? 1u : 4u); k++)
            one(&specs[t], shapes[k][0], shapes[k][1], shapes[k][2], false);
        if (!sanitize) one(&specs[t], 64, 1024, 1024, true);
        if (!quiet) printf("  %s: checked\n", specs[t].name);
    }
    if (!emulate && !sanitize) /* many blocks: the grid-stride loop and the block sums */
        for (int t = 0; t < nspecs; t++)
            if (specs[t].s.profile[0]) one(&specs[t], 4099, 4096, 4096, false);
    printf("%d specs, %ld checks, %ld mismatches\n", nspecs, n_checks, n_bad);
    return n_bad ? 1 : 0;
}
