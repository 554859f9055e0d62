/* The decomposition on the GPU against the CPU decomposer, bit for bit.
 *
 *   test_cuda_decomp [--emulate] [--big] [--sanitize] [--seed N] [--quiet] [CAPTURE.h5 ...]
 *
 * For every spec the CUDA kernels implement (every profile, NVFP4 1-D and
 * 2-D, every MXFP4 scale rule and NVFP4 recipe under each tie rule, the
 * dead-zone tie conventions), every grouping (tensor, row, block, channel),
 * input type (float32, BF16, FP16) and several shapes and kinds of data
 * (Gaussian with outliers, exact E2M1 ties, all-zero and subnormal blocks,
 * NaN/Inf, saturating blocks): the CPU's fp4s_decomp_add on the widened
 * float32 values and the GPU path must give the same summary, the same
 * groups and the same histograms, compared as bytes. The rows go in as one
 * call or as two (row0 split at a tile boundary). The capture files given
 * (the shipped ones in the meson test) are decomposed tensor by tensor the
 * same way, per tensor and per channel.
 *
 * --emulate runs the kernels' arithmetic on the CPU (decomp_emulate.cu), so
 * the check runs wherever nvcc is found. Without it the GPU path is taken:
 * device memory (fp4s_cuda_decomp_add) and host memory (opts.device CUDA,
 * fp4s_decomp_add and fp4s_decomp_source) in turn, and the program exits 77
 * (meson: skipped) without a usable GPU. --big adds large inputs (GPU only):
 * 2^28 elements (the default profiles, by tensor, row and channel). --sanitize
 * runs a few calls only (for compute-sanitizer). Exit 0 all equal, 1 a
 * difference. */
#include <fp4scope/fp4scope.h>

#include <cuda_runtime.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/decompose/decomp_internal.h"
#include "rng.h"

static int quiet, emulate;
static long n_checks, n_bad;

typedef struct tspec {
    fp4s_spec s;
    char name[96];
    fp4s_dz_tie dzt;
} tspec;
static tspec specs[512];
static int nspecs;

static void add_spec(const fp4s_spec *s, const char *name, fp4s_dz_tie dzt)
{
    if (nspecs >= (int)(sizeof specs / sizeof specs[0]) || fp4s_spec_check(s) || !fp4s_cuda_supports(s)) return;
    specs[nspecs].s = *s;
    specs[nspecs].dzt = dzt;
    snprintf(specs[nspecs].name, sizeof specs[nspecs].name, "%s%s", name,
             dzt == FP4S_DZ_TIE_SPEC ? "" : (dzt == FP4S_DZ_TIE_IN ? " dz-in" : " dz-out"));
    nspecs++;
}

static void build_specs(void)
{
    const fp4s_profile_info *p;
    for (size_t pi = 0; (p = fp4s_profile_at(pi)); pi++)
        for (int f = FP4S_MXFP4; f <= FP4S_NVFP4; f++) {
            if (!(p->formats & (1u << f))) continue;
            fp4s_spec s;
            if (fp4s_spec_profile(&s, (fp4s_format)f, p->name) != 0) continue;
            char nm[96];
            snprintf(nm, sizeof nm, "%s/%s", p->name, fp4s_format_name((fp4s_format)f));
            add_spec(&s, nm, FP4S_DZ_TIE_SPEC);
            if (f == FP4S_NVFP4 && !s.tile2d) {
                s.tile2d = true;
                snprintf(nm, sizeof nm, "%s/%s/2d", p->name, fp4s_format_name((fp4s_format)f));
                add_spec(&s, nm, FP4S_DZ_TIE_SPEC);
            }
        }
    fp4s_spec base;
    if (fp4s_spec_profile(&base, FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4)) == 0) {
        for (int r = 0; r < FP4S_MX_RULE_COUNT; r++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++) {
                fp4s_spec s = base;
                s.mx_rule = (fp4s_mx_rule)r;
                s.tie = (fp4s_tie)t;
                s.profile[0] = '\0';
                char nm[96];
                snprintf(nm, sizeof nm, "mxfp4 %s %s", fp4s_mx_rule_name(s.mx_rule), fp4s_tie_name(s.tie));
                add_spec(&s, nm, FP4S_DZ_TIE_SPEC);
            }
        add_spec(&base, "mxfp4 default", FP4S_DZ_TIE_IN);
        add_spec(&base, "mxfp4 default", FP4S_DZ_TIE_OUT);
    }
    if (fp4s_spec_profile(&base, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4)) == 0) {
        for (int rc = 0; rc < FP4S_NV_RECIPE_COUNT; rc++)
            for (int t = 0; t < FP4S_TIE_COUNT; t++) {
                fp4s_spec s = base;
                s.nv_recipe = (fp4s_nv_recipe)rc;
                s.tie = (fp4s_tie)t;
                s.global_scale = fp4s_get_nv_recipe_traits(s.nv_recipe)->global_scale;
                s.profile[0] = '\0';
                char nm[96];
                snprintf(nm, sizeof nm, "nvfp4 %s %s", fp4s_nv_recipe_name(s.nv_recipe), fp4s_tie_name(s.tie));
                add_spec(&s, nm, FP4S_DZ_TIE_SPEC);
            }
        add_spec(&base, "nvfp4 default", FP4S_DZ_TIE_OUT);
    }
}

/* Only the default MXFP4 and NVFP4 profiles, and NVFP4's with 2-D tiles. */
static void default_specs(void)
{
    nspecs = 0;
    fp4s_spec s;
    if (fp4s_spec_profile(&s, FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4)) == 0)
        add_spec(&s, "mxfp4 default", FP4S_DZ_TIE_SPEC);
    if (fp4s_spec_profile(&s, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4)) == 0) {
        add_spec(&s, "nvfp4 default", FP4S_DZ_TIE_SPEC);
        s.tile2d = !s.tile2d;
        add_spec(&s, s.tile2d ? "nvfp4 default 2d" : "nvfp4 default 1d", FP4S_DZ_TIE_SPEC);
    }
}

/* Data kinds: 0 Gaussian with per-block scales and outliers; 1 the same with
 * exact E2M1 ties, zero, subnormal and saturating blocks and NaN/Inf in a few
 * rows. */
static void fill(int kind, float *x, size_t rows, size_t cols, size_t bs)
{
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / bs; b++) {
            float *p = x + r * cols + b * bs;
            const double sc = exp2((double)(rnd() % 24) - 12.0);
            const int k = kind == 0 ? 0 : (int)(rnd() % 8);
            for (size_t i = 0; i < bs; i++) {
                float v = (float)(gauss() * sc);
                if (rnd() % 64 == 0) v *= 20.0f;
                switch (k) {
                case 1: v = (float)(mid[rnd() % 7] * sc) * ((rnd() & 1) ? -1.0f : 1.0f); break; /* ties of 6 = amax */
                case 2: v = 0.0f; break;
                case 3: v = (float)(gauss() * 1e-40); break;
                case 4: v = (rnd() & 1) ? 3.0e38f : v; break;
                default: break;
                }
                p[i] = v;
            }
            if (k == 1) p[rnd() % bs] = (float)(6.0 * sc);
        }
    if (kind == 1 && rows > 3) {
        x[(rows / 2) * cols + rnd() % cols] = NAN;
        x[(rows / 3) * cols + rnd() % cols] = INFINITY;
        x[(rows - 1) * cols + rnd() % cols] = -INFINITY;
    }
}

/* Narrow x to BF16/FP16 in h and widen back into x (what the CPU sees). */
static void narrow(fp4s_dtype dt, float *x, uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h[i] = dt == FP4S_DT_BF16 ? fp4s_bf16_encode(x[i], FP4S_TIE_EVEN) : fp4s_fp16_encode(x[i], FP4S_TIE_EVEN);
        x[i] = dt == FP4S_DT_BF16 ? fp4s_bf16_decode(h[i]) : fp4s_fp16_decode(h[i]);
    }
}

/* The first field at which two results differ, or NULL. */
static const char *result_diff(const fp4s_decomp_result *a, const fp4s_decomp_result *b)
{
    size_t nf;
    const fp4s_decomp_field *f = fp4s_decomp_fields(&nf);
    for (size_t i = 0; i < nf; i++)
        if (memcmp((const char *)a + f[i].offset, (const char *)b + f[i].offset, 8)) return f[i].name;
    return memcmp(a, b, sizeof *a) ? "(padding)" : NULL;
}

/* Compare two decomposers: summary, groups, histograms. */
static int same(const fp4s_decomp *a, const fp4s_decomp *b, const char *what)
{
    n_checks++;
    fp4s_decomp_result ra, rb;
    fp4s_decomp_summary(a, &ra);
    fp4s_decomp_summary(b, &rb);
    const char *d = result_diff(&ra, &rb);
    if (d) {
        fprintf(stderr, "DIFF %s: summary field %s\n", what, d);
        n_bad++;
        return 0;
    }
    size_t ng = fp4s_decomp_ngroups(a);
    if (ng != fp4s_decomp_ngroups(b)) {
        fprintf(stderr, "DIFF %s: %zu vs %zu groups\n", what, ng, fp4s_decomp_ngroups(b));
        n_bad++;
        return 0;
    }
    for (size_t g = 0; g < ng; g++) {
        fp4s_decomp_group(a, g, &ra);
        fp4s_decomp_group(b, g, &rb);
        if ((d = result_diff(&ra, &rb))) {
            fprintf(stderr, "DIFF %s: group %zu field %s\n", what, g, d);
            n_bad++;
            return 0;
        }
    }
    for (int k = 0; k < 2; k++) {
        fp4s_decomp_hist ha, hb;
        fp4s_decomp_hist_get(a, (fp4s_decomp_hist_kind)k, &ha);
        fp4s_decomp_hist_get(b, (fp4s_decomp_hist_kind)k, &hb);
        if (memcmp(&ha, &hb, sizeof ha)) {
            fprintf(stderr, "DIFF %s: %s histogram\n", what, k ? "error" : "delta");
            n_bad++;
            return 0;
        }
    }
    return 1;
}

static int fail_rc(int rc, const char *what)
{
    fprintf(stderr, "FAIL %s: %s (%d)\n", what, fp4s_last_error(), rc);
    n_bad++;
    return 0;
}

static size_t dsize(fp4s_dtype dt) { return dt == FP4S_DT_F32 ? 4 : 2; }

/* Rows [r0, r0 + n) of xin through the GPU path (or its emulation) into d.
 * mode (GPU): 0 device memory, 1 host memory through fp4s_decomp_add. */
static int gpu_add(fp4s_decomp *d, fp4s_dtype dt, const void *xin, size_t cols, size_t r0, size_t n, int mode)
{
    const char *x = (const char *)xin + r0 * cols * dsize(dt);
    if (emulate) return fp4s_decomp_add_via(d, fp4s_cu_decomp_emulate, dt, x, true, n, cols, r0, NULL);
    if (mode == 1) return fp4s_decomp_add_via(d, fp4s_cu_decomp, dt, x, true, n, cols, r0, NULL);
    void *dx = NULL;
    size_t bytes = n * cols * dsize(dt);
    if (cudaMalloc(&dx, bytes) != cudaSuccess || cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(dx);
        return fp4s_error_set(FP4S_ENOMEM, "test: device buffer of %zu bytes", bytes);
    }
    int rc = fp4s_cuda_decomp_add(d, dt, dx, n, cols, r0, NULL);
    cudaFree(dx);
    return rc;
}

/* One spec, grouping, type and shape: CPU vs GPU (emulated). */
static void check(const tspec *t, fp4s_group by, fp4s_dtype dt, const float *xf, const void *xin, size_t rows,
                  size_t cols, int split, int mode)
{
    char what[256];
    snprintf(what, sizeof what, "%s by %s %s [%zu, %zu]%s%s", t->name, fp4s_group_name(by), fp4s_dtype_name(dt),
             rows, cols, split ? " split" : "", emulate ? " (emulated)" : (mode ? " (host memory)" : ""));
    fp4s_tscale ts;
    int rc = fp4s_tscale_init(&t->s, fp4s_amax(xf, rows, cols, cols, NULL), &ts);
    if (rc) {
        fail_rc(rc, what);
        return;
    }
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    o.dz_tie = t->dzt;
    fp4s_decomp *c = NULL, *g = NULL;
    if ((rc = fp4s_decomp_open(&t->s, &ts, &o, rows, cols, &c)) || (rc = fp4s_decomp_open(&t->s, &ts, &o, rows, cols, &g))) {
        fail_rc(rc, what);
        goto out;
    }
    if ((rc = fp4s_decomp_add(c, xf, rows, cols, 0))) {
        fail_rc(rc, what);
        goto out;
    }
    size_t cut = split ? (rows / 2) / 16 * 16 : rows;
    if (cut == 0) cut = rows;
    rc = gpu_add(g, dt, xin, cols, 0, cut, mode);
    if (!rc && cut < rows) rc = gpu_add(g, dt, xin, cols, cut, rows - cut, mode);
    if (rc) {
        fail_rc(rc, what);
        goto out;
    }
    if (same(c, g, what) && !quiet) printf("ok %s\n", what);
out:
    fp4s_decomp_close(&c);
    fp4s_decomp_close(&g);
}

/* groups: a mask of 1 << fp4s_group */
static void run_shape(size_t rows, size_t cols, int kind, int types, unsigned groups, int split)
{
    const size_t n = rows * cols;
    float *x0 = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    if (!x0 || !x || !h) {
        fprintf(stderr, "out of memory for [%zu, %zu]\n", rows, cols);
        exit(1);
    }
    fill(kind, x0, rows, cols, 16);
    static const fp4s_dtype dts[3] = {FP4S_DT_F32, FP4S_DT_BF16, FP4S_DT_F16};
    for (int di = 0; di < types; di++) {
        memcpy(x, x0, n * sizeof(float));
        const void *xin = x;
        if (dts[di] != FP4S_DT_F32) {
            narrow(dts[di], x, h, n);
            xin = h;
        }
        for (int si = 0; si < nspecs; si++) {
            if (cols % specs[si].s.block) continue;
            for (int gi = 0; gi < 4; gi++)
                if (groups & (1u << gi))
                    check(&specs[si], (fp4s_group)gi, dts[di], x, xin, rows, cols, split, (int)((si + gi + di) & 1));
        }
    }
    free(x0);
    free(x);
    free(h);
}

/* Every tensor of a capture, as the tools read it: per tensor and per channel. */
static void run_capture(const char *file)
{
    fp4s_capture_entry *e = NULL;
    size_t n = 0;
    int rc = fp4s_capture_list(file, &e, &n);
    if (rc) {
        fail_rc(rc, file);
        return;
    }
    fp4s_spec mx, nv;
    fp4s_spec_profile(&mx, FP4S_MXFP4, fp4s_default_profile(FP4S_MXFP4));
    fp4s_spec_profile(&nv, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4));
    long done = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(e[i].site, "logprobs")) continue; /* not activations */
        char spec[1024];
        fp4s_capture_entry_spec(file, &e[i], spec, sizeof spec);
        fp4s_source *src = NULL;
        if ((rc = fp4s_source_open(spec, &src))) {
            fail_rc(rc, spec);
            continue;
        }
        size_t rows = fp4s_source_rows(src), cols = fp4s_source_cols(src);
        float *x = malloc((rows && cols ? rows * cols : 1) * sizeof(float));
        if (!x || (rc = fp4s_source_read(src, 0, rows, x, cols))) {
            if (x) fail_rc(rc, spec);
            free(x);
            fp4s_source_close(&src);
            continue;
        }
        fp4s_source_close(&src);
        for (int f = 0; f < 2; f++) {
            tspec t = {.s = f ? nv : mx, .dzt = FP4S_DZ_TIE_SPEC};
            snprintf(t.name, sizeof t.name, "%.60s/%.8s %s", e[i].site, e[i].side, f ? "nvfp4" : "mxfp4");
            if (rows == 0 || cols % t.s.block) continue;
            check(&t, FP4S_GROUP_TENSOR, FP4S_DT_F32, x, x, rows, cols, 0, (int)(i & 1));
            check(&t, FP4S_GROUP_CHANNEL, FP4S_DT_F32, x, x, rows, cols, 0, (int)((i + 1) & 1));
            done += 2;
        }
        free(x);
    }
    free(e);
    if (!quiet) printf("%s: %ld tensor checks\n", file, done);
}

/* The streaming driver on both devices (GPU only): fp4s_decomp_source. */
static void run_source(const char *file)
{
    fp4s_capture_entry *e = NULL;
    size_t n = 0;
    if (fp4s_capture_list(file, &e, &n) || n == 0) {
        free(e);
        return;
    }
    char spec[1024];
    fp4s_capture_entry_spec(file, &e[0], spec, sizeof spec);
    free(e);
    fp4s_spec s;
    fp4s_spec_profile(&s, FP4S_NVFP4, fp4s_default_profile(FP4S_NVFP4));
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = FP4S_GROUP_CHANNEL;
    fp4s_decomp *c = NULL, *g = NULL;
    int rc = fp4s_decomp_source(&s, &o, spec, &c);
    o.device = FP4S_DEVICE_CUDA;
    if (!rc) rc = fp4s_decomp_source(&s, &o, spec, &g);
    char what[1100];
    snprintf(what, sizeof what, "fp4s_decomp_source %s", spec);
    if (rc) fail_rc(rc, what);
    else if (fp4s_decomp_device(g) != FP4S_DEVICE_CUDA) {
        fprintf(stderr, "FAIL %s: device cuda not taken\n", what);
        n_bad++;
    } else if (same(c, g, what) && !quiet)
        printf("ok %s\n", what);
    fp4s_decomp_close(&c);
    fp4s_decomp_close(&g);
}

/* ---- the streaming driver (fp4s_decomp_source through the GPU's pinned slots) ---- */

static char tdir[256];

static int make_tdir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(tdir, sizeof tdir, "%s/fp4s_stream_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(tdir)) return 0;
    fprintf(stderr, "FAIL mkdtemp %s\n", tdir);
    return 1;
}

/* A safetensors file holding one 2-D tensor "x" of dtype name dn. */
static int write_safetensors(const char *path, const char *dn, size_t rows, size_t cols, const void *data,
                             size_t esz)
{
    char hdr[256];
    const size_t bytes = rows * cols * esz;
    int hl = snprintf(hdr, sizeof hdr, "{\"x\":{\"dtype\":\"%s\",\"shape\":[%zu,%zu],\"data_offsets\":[0,%zu]}}", dn,
                      rows, cols, bytes);
    while (hl % 8) hdr[hl++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint64_t n = (uint64_t)hl;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    int ok = fwrite(len, 1, 8, f) == 8 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
             fwrite(data, 1, bytes, f) == bytes;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The source spec_str decomposed on the CPU and through the streaming GPU
 * path (or its emulation), whole and as two row ranges merged (the MPI
 * split, with the tensor amax of the whole), in chunks of chunk_elems. */
static void stream_check(const tspec *t, fp4s_group by, const char *spec_str, size_t rows, size_t chunk_elems,
                         const char *label)
{
    char what[600];
    snprintf(what, sizeof what, "stream %s by %s %s chunk %zu%s", t->name, fp4s_group_name(by), label, chunk_elems,
             emulate ? " (emulated)" : "");
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    o.dz_tie = t->dzt;
    o.chunk_elems = chunk_elems;
    fp4s_decomp *c = NULL, *g = NULL, *g1 = NULL, *g2 = NULL;
    int rc = fp4s_decomp_source(&t->s, &o, spec_str, &c);
    if (rc) {
        fail_rc(rc, what);
        return;
    }
    if (emulate) {
        rc = fp4s_decomp_source_via(&fp4s_cu_ds_emulate, &t->s, &o, spec_str, 0, SIZE_MAX, NULL, &g);
    } else {
        o.device = FP4S_DEVICE_CUDA;
        rc = fp4s_decomp_source(&t->s, &o, spec_str, &g);
    }
    if (rc) {
        fail_rc(rc, what);
        goto out;
    }
    if (!emulate && fp4s_decomp_device(g) != FP4S_DEVICE_CUDA) {
        fprintf(stderr, "FAIL %s: device cuda not taken\n", what);
        n_bad++;
        goto out;
    }
    if (!same(c, g, what)) goto out;
    /* two row ranges with the whole tensor's amax, merged (as par_decomp) */
    size_t align = fp4s_spec_row_align(&t->s);
    size_t cut = rows / 2 / (align ? align : 1) * (align ? align : 1);
    if (cut > 0 && cut < rows) {
        float amax = 0.0f;
        rc = fp4s_decomp_source_amax(&t->s, &o, spec_str, 0, SIZE_MAX, &amax);
        if (!rc) {
            if (emulate) {
                rc = fp4s_decomp_source_via(&fp4s_cu_ds_emulate, &t->s, &o, spec_str, 0, cut, &amax, &g1);
                if (!rc) rc = fp4s_decomp_source_via(&fp4s_cu_ds_emulate, &t->s, &o, spec_str, cut, SIZE_MAX, &amax, &g2);
            } else {
                rc = fp4s_decomp_source_rows(&t->s, &o, spec_str, 0, cut, &amax, &g1);
                if (!rc) rc = fp4s_decomp_source_rows(&t->s, &o, spec_str, cut, SIZE_MAX, &amax, &g2);
            }
        }
        if (!rc) rc = fp4s_decomp_merge(g1, g2);
        if (rc) {
            fail_rc(rc, what);
            goto out;
        }
        char w2[700];
        snprintf(w2, sizeof w2, "%s split at %zu", what, cut);
        if (!same(c, g1, w2)) goto out;
    }
    if (!quiet) printf("ok %s\n", what);
out:
    fp4s_decomp_close(&c);
    fp4s_decomp_close(&g);
    fp4s_decomp_close(&g1);
    fp4s_decomp_close(&g2);
}

/* A tensor written as float32 .npy and as BF16 and FP16 safetensors, each
 * decomposed by every grouping with the default profiles (NVFP4 also 2-D),
 * in one chunk and in chunks of 48 rows (a short last one). */
static void run_stream(size_t rows, size_t cols, int kind, int light)
{
    const size_t n = rows * cols;
    float *x = malloc(n * sizeof(float)), *xw = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    if (!x || !xw || !h) {
        fprintf(stderr, "out of memory for [%zu, %zu]\n", rows, cols);
        exit(1);
    }
    fill(kind, x, rows, cols, 16);
    char path[3][300], spec_s[3][320];
    static const char *labels[3] = {"float32 .npy", "BF16 safetensors", "FP16 safetensors"};
    snprintf(path[0], sizeof path[0], "%s/x.npy", tdir);
    snprintf(path[1], sizeof path[1], "%s/bf16.safetensors", tdir);
    snprintf(path[2], sizeof path[2], "%s/f16.safetensors", tdir);
    int rc = fp4s_npy_write(path[0], FP4S_DT_F32, 2, rows, cols, x);
    memcpy(xw, x, n * sizeof(float));
    narrow(FP4S_DT_BF16, xw, h, n);
    if (!rc) rc = write_safetensors(path[1], "BF16", rows, cols, h, 2);
    memcpy(xw, x, n * sizeof(float));
    narrow(FP4S_DT_F16, xw, h, n);
    if (!rc) rc = write_safetensors(path[2], "F16", rows, cols, h, 2);
    if (rc) {
        fprintf(stderr, "FAIL cannot write the stream test's files in %s\n", tdir);
        exit(1);
    }
    snprintf(spec_s[0], sizeof spec_s[0], "%s", path[0]);
    snprintf(spec_s[1], sizeof spec_s[1], "%s:x", path[1]);
    snprintf(spec_s[2], sizeof spec_s[2], "%s:x", path[2]);
    default_specs();
    for (int f = 0; f < (light ? 2 : 3); f++)
        for (int si = 0; si < nspecs; si++)
            for (int gi = 0; gi < 4; gi++) {
                if (gi == FP4S_GROUP_BLOCK && rows * cols > 65536) continue;
                if (light && (gi == FP4S_GROUP_BLOCK || gi == FP4S_GROUP_ROW)) continue;
                stream_check(&specs[si], (fp4s_group)gi, spec_s[f], rows, 0, labels[f]);
                stream_check(&specs[si], (fp4s_group)gi, spec_s[f], rows, 48 * cols, labels[f]);
            }
    for (int f = 0; f < 3; f++) unlink(path[f]);
    free(x);
    free(xw);
    free(h);
}

int main(int argc, char **argv)
{
    uint64_t seed = 0x5eed;
    int big = 0, sanitize = 0;
    const char *files[16];
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--emulate")) emulate = 1;
        else if (!strcmp(argv[i], "--big")) big = 1;
        else if (!strcmp(argv[i], "--sanitize")) sanitize = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (argv[i][0] != '-' && nfiles < 16) files[nfiles++] = argv[i];
        else {
            fprintf(stderr, "usage: test_cuda_decomp [--emulate] [--big] [--sanitize] [--seed N] [--quiet] [CAPTURE.h5 ...]\n");
            return 2;
        }
    }
    rng = seed | 1;
    printf("test_cuda_decomp: seed %" PRIu64 " (%s)\n", seed, emulate ? "host emulation" : "GPU");
    if (!emulate && !fp4s_cuda_available()) {
        char why[320];
        fp4s_cuda_describe(why, sizeof why);
        printf("test_cuda_decomp: %s: skipped\n", why);
        return 77;
    }
    if (sanitize) {
        /* few launches for compute-sanitizer: the default profiles, every
         * grouping, float32 and BF16, one shape with NaN/Inf and tile edges */
        default_specs();
        run_shape(37, 96, 1, 2, 15, 1);
        if (make_tdir()) return 1;
        run_stream(130, 96, 1, 1); /* the streaming session: float32 and BF16 sources */
        rmdir(tdir);
        printf("test_cuda_decomp: %ld checks, %ld differences\n", n_checks, n_bad);
        return n_bad ? 1 : 0;
    }
    build_specs();
    printf("%d specs\n", nspecs);
    /* shapes: NVFP4 rows of 16 columns mod 32, a single row, 2-D tile edges */
    run_shape(37, 96, 0, 3, 15, 0);
    run_shape(37, 96, 1, 1, 15, 1);
    run_shape(5, 48, 1, 3, 15, 0);
    run_shape(1, 256, 0, 1, 15, 0);
    run_shape(50, 64, 1, 2, 15, 1);
    for (int f = 0; f < nfiles; f++) {
        run_capture(files[f]);
        if (!emulate) run_source(files[f]);
    }
    /* the streaming driver: files in a temporary directory */
    if (make_tdir()) return 1;
    const int nb0 = (int)n_bad;
    run_stream(130, 96, 1, 0);
    run_stream(300, 256, 0, 0);
    /* NVFP4 whose rows do not fit the device: the amax pass on the CPU, a second read */
    if (emulate) {
        fp4s_cu_ds_emulate_keep_limit(1);
        run_stream(130, 96, 1, 0);
        fp4s_cu_ds_emulate_keep_limit(0);
    }
    rmdir(tdir);
    if (!quiet || (int)n_bad > nb0) printf("streaming driver: %ld differences\n", n_bad - nb0);
    if (big && !emulate) {
        /* the default profiles (NVFP4 also 2-D) on 2^28 elements */
        default_specs();
        const unsigned tc = 1u << FP4S_GROUP_TENSOR | 1u << FP4S_GROUP_CHANNEL;
        run_shape(65536, 4096, 0, 1, tc, 1);
        run_shape(8192, 8192, 1, 2, tc | 1u << FP4S_GROUP_ROW, 0);
    }
    printf("test_cuda_decomp: %ld checks, %ld differences\n", n_checks, n_bad);
    return n_bad ? 1 : 0;
}
