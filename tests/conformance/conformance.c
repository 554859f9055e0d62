/* Conformance runner: every vector of the corpus (vectors.txt, written by
 * gen_vectors.py from the documented arithmetic, not by fp4scope) through
 * fp4scope, profile by profile, with the scalar reference and every SIMD
 * level the CPU has, and with the CUDA kernels when a GPU is there.
 *
 *   conformance [--quiet] VECTORS
 *
 * For each "expect" record it checks the tensor amax the profile takes
 * (fp4s_spec_amax), the stored tensor scale (fp4s_tscale_init), every scale
 * byte (FP8: every float32 tile scale) and every element code; NaN equals
 * NaN for the two floats. It prints the first differences with the input,
 * profile, level, position and both values, then "N vectors, M checks, K
 * differ", and exits 1 if anything differs or a profile has no vector for a
 * format it defines, 2 if the corpus is malformed.
 * Plain C (no Check), so that it also runs where Check is not installed. */
#include <fp4scope/cuda.h>
#include <fp4scope/quant.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct input {
    char name[64];
    fp4s_format fmt;
    size_t rows, cols, n;
    float *x;
} input;

static int quiet;
static long nvec, nchecks, ndiff;
static bool *covered; /* [profile index * 4 + format]: the corpus has a vector */

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static bool same_float(float a, float b) { return (isnan(a) && isnan(b)) || to_bits(a) == to_bits(b); }

static void differ(const input *in, const char *prof, const char *level, const char *what, size_t i,
                   unsigned have, unsigned want)
{
    ndiff++;
    if (quiet || ndiff > 40) return;
    printf("DIFF %s %s/%s [%s]: %s", in->name, prof, fp4s_format_name(in->fmt), level, what);
    if (i != (size_t)-1) {
        size_t c = i % in->cols, r = i / in->cols;
        printf(" %zu (row %zu col %zu, x = %a)", i, r, c, (double)in->x[i < in->n ? i : 0]);
    }
    printf(": fp4scope %#x, corpus %#x\n", have, want);
}

/* Parse "key=HEX" from a record; NULL if absent. */
static const char *field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? p + strlen(key) : NULL;
}

static size_t hex_bytes(const char *s, uint8_t *out, size_t max)
{
    size_t n = 0;
    while (s && n < max && s[0] && s[1] && s[0] != ' ' && s[0] != '\n') {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

/* Quantize with the level in use and compare with the record. */
static void check_level(const input *in, const char *prof, const fp4s_spec *s, const fp4s_tscale *ts,
                        const char *level, const uint8_t *want_sc, size_t nsc, const uint8_t *want_codes)
{
    const size_t rows = in->rows, cols = in->cols;
    uint8_t *codes = calloc(rows * cols, 1), *scales = calloc(rows * cols, 1);
    float *sf = calloc(rows * cols + 1, sizeof(float));
    if (!codes || !scales || !sf) {
        fprintf(stderr, "conformance: out of memory\n");
        exit(2);
    }
    size_t nb = s->format == FP4S_FP8 ? (s->fp8_gran == FP4S_FP8_TENSOR ? 1 : cols / 128)
                                      : fp4s_spec_blocks_per_row(s, cols);
    fp4s_qout o = {.codes = codes, .ld_codes = cols, .scales = s->format == FP4S_FP8 ? NULL : scales,
                   .ld_scales = nb, .scale_f32 = s->format == FP4S_FP8 ? sf : NULL, .ld_scale_f32 = nb};
    int rc = fp4s_quantize(s, ts, in->x, rows, cols, cols, 0, &o, NULL);
    if (rc) {
        printf("FAIL %s %s [%s]: quantize: %s\n", in->name, prof, level, fp4s_last_error());
        ndiff++;
        goto out;
    }
    if (s->format == FP4S_FP8) {
        for (size_t i = 0; i < nsc / 4; i++, nchecks++) {
            uint32_t w = (uint32_t)want_sc[4 * i] << 24 | (uint32_t)want_sc[4 * i + 1] << 16 |
                         (uint32_t)want_sc[4 * i + 2] << 8 | want_sc[4 * i + 3];
            if (!same_float(sf[i], from_bits(w))) differ(in, prof, level, "FP8 scale of tile", i, to_bits(sf[i]), w);
        }
    } else {
        for (size_t i = 0; i < nsc; i++, nchecks++)
            if (scales[i] != want_sc[i]) differ(in, prof, level, "scale byte of block", i, scales[i], want_sc[i]);
    }
    for (size_t i = 0; i < rows * cols; i++, nchecks++)
        if (codes[i] != want_codes[i]) differ(in, prof, level, "code of element", i, codes[i], want_codes[i]);
out:
    free(codes);
    free(scales);
    free(sf);
}

/* The CUDA kernels on the record (FP4 formats the GPU implements). */
static void check_cuda(const input *in, const char *prof, const fp4s_spec *s, const fp4s_tscale *ts,
                       const uint8_t *want_sc, size_t nsc, const uint8_t *want_codes)
{
    if (s->format == FP4S_FP8 || !fp4s_cuda_available() || !fp4s_cuda_supports(s)) return;
    uint8_t *codes = calloc(in->rows * in->cols, 1), *scales = calloc(in->rows * in->cols, 1);
    if (!codes || !scales) exit(2);
    int rc = fp4s_cuda_quantize_host(s, ts, in->x, in->rows, in->cols, in->cols, codes, scales);
    if (rc) {
        printf("FAIL %s %s [cuda]: %s\n", in->name, prof, fp4s_last_error());
        ndiff++;
    } else {
        for (size_t i = 0; i < nsc; i++, nchecks++)
            if (scales[i] != want_sc[i]) differ(in, prof, "cuda", "scale byte of block", i, scales[i], want_sc[i]);
        for (size_t i = 0; i < in->rows * in->cols; i++, nchecks++)
            if (codes[i] != want_codes[i]) differ(in, prof, "cuda", "code of element", i, codes[i], want_codes[i]);
    }
    free(codes);
    free(scales);
}

static int expect(const input *in, const char *line)
{
    char name[64], prof[64], fmt[16];
    if (sscanf(line, "expect %63s %63s %15s", name, prof, fmt) != 3 || strcmp(name, in->name)) return -1;
    const char *a = field(line, "amax="), *t = field(line, "tscale="), *sc = field(line, "scales="),
               *co = field(line, "codes=");
    if (!a || !t || !sc || !co) return -1;
    uint32_t want_amax = (uint32_t)strtoul(a, NULL, 16), want_ts = (uint32_t)strtoul(t, NULL, 16);
    size_t n = in->rows * in->cols;
    uint8_t *want_sc = malloc(n * 4 + 4), *want_codes = malloc(n + 1);
    if (!want_sc || !want_codes) exit(2);
    size_t nsc = hex_bytes(sc, want_sc, n * 4);
    if (hex_bytes(co, want_codes, n) != n) return -1;
    nvec++;

    /* PROFILE or PROFILE,KEY=VALUE,...: knob settings over the profile (bound, err, math, input_scale) */
    char base[64];
    snprintf(base, sizeof base, "%s", prof);
    char *opts = strchr(base, ',');
    if (opts) *opts++ = '\0';
    const fp4s_profile_info *pi;
    for (size_t i = 0; (pi = fp4s_profile_at(i)); i++)
        if (!strcmp(pi->name, base) && !opts) covered[i * 4 + in->fmt] = true;
    fp4s_spec s;
    if (fp4s_spec_profile(&s, in->fmt, base)) {
        printf("FAIL %s %s: %s\n", in->name, prof, fp4s_last_error());
        ndiff++;
        goto out;
    }
    for (char *o = opts; o && *o;) {
        char *next = strchr(o, ',');
        if (next) *next++ = '\0';
        char *v = strchr(o, '=');
        if (!v) return -1;
        *v++ = '\0';
        int k;
        if (!strcmp(o, "bound")) s.nv_scale_bound = (uint16_t)atoi(v);
        else if (!strcmp(o, "err")) s.nv_4over6_err = !strcmp(v, "mse") ? FP4S_4OVER6_MSE : FP4S_4OVER6_MAE;
        else if (!strcmp(o, "math") && (k = fp4s_name_index(FP4S_NAMES_4OVER6_MATH, v)) >= 0)
            s.nv_4over6_math = (fp4s_4over6_math)k;
        else if (!strcmp(o, "input_scale")) s.nv_input_scale = from_bits((uint32_t)strtoul(v, NULL, 16));
        else return -1;
        o = next;
    }
    if (fp4s_spec_check(&s)) {
        printf("FAIL %s %s: %s\n", in->name, prof, fp4s_last_error());
        ndiff++;
        goto out;
    }
    fp4s_tscale ts;
    if (s.format == FP4S_NVFP4 && s.nv_scope == FP4S_SCOPE_ROW) {
        /* row-scaled: amax= and tscale= list one value per row (comma-separated) */
        float *ra = calloc(in->rows, sizeof *ra);
        fp4s_tscale *rts = calloc(in->rows, sizeof *rts);
        if (!ra || !rts) exit(2);
        int rc = fp4s_spec_row_amax(&s, in->x, in->rows, in->cols, in->cols, ra);
        const char *pa = a, *pt = t;
        for (size_t r = 0; !rc && r < in->rows; r++) {
            char *e1, *e2;
            uint32_t wa = (uint32_t)strtoul(pa, &e1, 16), wt = (uint32_t)strtoul(pt, &e2, 16);
            if (e1 == pa || e2 == pt) {
                free(ra);
                free(rts);
                return -1;
            }
            pa = *e1 == ',' ? e1 + 1 : e1;
            pt = *e2 == ',' ? e2 + 1 : e2;
            nchecks += 2;
            if (!same_float(ra[r], from_bits(wa))) differ(in, prof, "-", "row amax of row", r, to_bits(ra[r]), wa);
            if (fp4s_tscale_init(&s, from_bits(wa), &rts[r])) rc = -1;
            else if (!same_float(rts[r].stored, from_bits(wt)))
                differ(in, prof, "-", "stored tensor scale of row", r, to_bits(rts[r].stored), wt);
        }
        free(ra);
        free(rts);
        if (rc) {
            printf("FAIL %s %s: row scales: %s\n", in->name, prof, fp4s_last_error());
            ndiff++;
            goto out;
        }
        memset(&ts, 0, sizeof ts); /* fp4s_quantize takes each row's own */
    } else {
        float amax = fp4s_spec_amax(&s, in->x, in->rows, in->cols, in->cols, NULL);
        nchecks++;
        if (!same_float(amax, from_bits(want_amax)))
            differ(in, prof, "-", "tensor amax", (size_t)-1, to_bits(amax), want_amax);
        if (fp4s_tscale_init(&s, from_bits(want_amax), &ts)) {
            printf("FAIL %s %s: tensor scale: %s\n", in->name, prof, fp4s_last_error());
            ndiff++;
            goto out;
        }
        nchecks++;
        if (!same_float(ts.stored, from_bits(want_ts)))
            differ(in, prof, "-", "stored tensor scale", (size_t)-1, to_bits(ts.stored), want_ts);
    }
    static const char *levels[] = {"ref", "avx2", "avx512"};
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
        if (fp4s_kernels_select(levels[l])) continue; /* not on this CPU or build */
        check_level(in, prof, &s, &ts, levels[l], want_sc, nsc, want_codes);
    }
    fp4s_kernels_force_ref(false);
    check_cuda(in, prof, &s, &ts, want_sc, nsc, want_codes);
out:
    free(want_sc);
    free(want_codes);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: conformance [--quiet] VECTORS\n");
        return 2;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 2;
    }
    covered = calloc(fp4s_profile_count() * 4, sizeof *covered);
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    input in = {0};
    size_t lineno = 0, filled = 0;
    while (line && fgets(line, (int)cap, f)) {
        lineno++;
        while (!strchr(line, '\n') && !feof(f)) { /* a long line: grow */
            size_t have = strlen(line);
            char *nl = realloc(line, cap * 2);
            if (!nl) return 2;
            line = nl;
            if (!fgets(line + have, (int)(cap * 2 - have), f)) break;
            cap *= 2;
        }
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "input ", 6)) {
            char fmt[16];
            free(in.x);
            memset(&in, 0, sizeof in);
            if (sscanf(line, "input %63s %15s %zu %zu", in.name, fmt, &in.rows, &in.cols) != 4 ||
                fp4s_format_parse(fmt, &in.fmt) || in.rows * in.cols == 0)
                goto bad;
            in.n = in.rows * in.cols;
            in.x = calloc(in.n, sizeof(float));
            filled = 0;
        } else if (!strncmp(line, "x ", 2) && in.x) {
            char *p = line + 2, *e;
            for (unsigned long u; filled < in.n && (u = strtoul(p, &e, 16), e != p); p = e)
                in.x[filled++] = from_bits((uint32_t)u);
        } else if (!strncmp(line, "expect ", 7)) {
            if (!in.x || filled != in.n || expect(&in, line)) goto bad;
        } else {
            goto bad;
        }
    }
    free(in.x);
    free(line);
    fclose(f);
    /* every profile, for every format it defines */
    const fp4s_profile_info *pi;
    for (size_t i = 0; (pi = fp4s_profile_at(i)); i++)
        for (int fm = FP4S_MXFP4; fm <= FP4S_FP8; fm++)
            if ((pi->formats & (1u << fm)) && !covered[i * 4 + fm]) {
                printf("MISSING %s/%s: the corpus has no vector for it\n", pi->name,
                       fp4s_format_name((fp4s_format)fm));
                ndiff++;
            }
    free(covered);
    printf("conformance: %ld vectors, %ld checks, %ld differ\n", nvec, nchecks, ndiff);
    if (nvec == 0) return 2;
    return ndiff ? 1 : 0;
bad:
    fprintf(stderr, "%s:%zu: malformed corpus line\n", path, lineno);
    return 2;
}
