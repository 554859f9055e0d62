/* --device cuda under mpirun: each rank's row range through the GPU path, in
 * the kernels' host emulation (no GPU needed), merged as rank 0 merges them,
 * equals the whole tensor on the CPU bit for bit.
 *
 * What tools/par.c does for one tensor over P ranks with --device cuda: rank r
 * takes rows [cut r, cut r+1) (r * rows / P rounded up to the spec's row
 * alignment), the NVFP4 tensor amax is the largest of the ranges' amaxes, and
 * fp4s_decomp_source_rows feeds the range's rows in chunks to
 * fp4s_decomp_add, which hands them to the GPU with their row offset
 * (fp4s_decomp_add_via); the accumulator goes to rank 0 as bytes
 * (fp4s_decomp_serialize) and is merged there in rank order. Here the chunks
 * go to fp4s_cu_decomp_emulate, the same arithmetic on the host, for P = 1..4,
 * every grouping, MXFP4, NVFP4 and NVFP4 with 16-row tiles, chunks that do
 * and do not divide the ranges. Exit 0 all equal, 1 a difference. */
#include <fp4scope/fp4scope.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/decompose/decomp_internal.h"
#include "cuda/supports.h"
#include "parts_data.h"

static const size_t ROWS = PARTS_ROWS, COLS = PARTS_COLS;
static long n_checks, n_bad;

#define CHECK(cond, ...)                                                                                            \
    do {                                                                                                           \
        n_checks++;                                                                                                \
        if (!(cond)) {                                                                                             \
            n_bad++;                                                                                               \
            fprintf(stderr, "FAIL %s: ", what);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                                          \
            fprintf(stderr, "\n");                                                                                 \
            return;                                                                                                \
        }                                                                                                          \
    } while (0)

static void same_decomp(const char *what, const fp4s_decomp *a, const fp4s_decomp *b)
{
    fp4s_decomp_result ra, rb;
    CHECK(fp4s_decomp_summary(a, &ra) == 0 && fp4s_decomp_summary(b, &rb) == 0, "summary: %s", fp4s_last_error());
    CHECK(memcmp(&ra, &rb, sizeof ra) == 0, "the summary differs");
    CHECK(fp4s_decomp_ngroups(a) == fp4s_decomp_ngroups(b), "groups %zu vs %zu", fp4s_decomp_ngroups(a),
          fp4s_decomp_ngroups(b));
    for (size_t g = 0; g < fp4s_decomp_ngroups(a); g++) {
        CHECK(fp4s_decomp_group(a, g, &ra) == 0 && fp4s_decomp_group(b, g, &rb) == 0, "group %zu: %s", g,
              fp4s_last_error());
        CHECK(memcmp(&ra, &rb, sizeof ra) == 0, "group %zu differs", g);
    }
    for (int k = 0; k < 2; k++) {
        fp4s_decomp_hist ha, hb;
        CHECK(fp4s_decomp_hist_get(a, (fp4s_decomp_hist_kind)k, &ha) == 0 &&
                  fp4s_decomp_hist_get(b, (fp4s_decomp_hist_kind)k, &hb) == 0,
              "histogram: %s", fp4s_last_error());
        CHECK(memcmp(&ha, &hb, sizeof ha) == 0, "histogram %d differs", k);
    }
}

/* The amax the reader takes over rows [r0, r1) (reader.c: chunk_amax). */
static float range_amax(const fp4s_spec *s, const float *x, size_t r0, size_t r1)
{
    if (r1 <= r0) return 0.0f;
    const float *p = x + r0 * COLS;
    return s->rht ? fp4s_spec_amax(s, p, r1 - r0, COLS, COLS, NULL) : fp4s_amax(p, r1 - r0, COLS, COLS, NULL);
}

static void check(const char *name, const fp4s_spec *s, fp4s_group by, const float *x, unsigned P, size_t chunk)
{
    char what[160];
    snprintf(what, sizeof what, "%s by %s, P = %u, chunks of %zu rows", name, fp4s_group_name(by), P, chunk);
    size_t align = fp4s_spec_row_align(s);
    if (!align) align = 1;
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    /* the whole tensor on the CPU, as one process */
    fp4s_tscale ts;
    CHECK(fp4s_tscale_init(s, range_amax(s, x, 0, ROWS), &ts) == 0, "tscale: %s", fp4s_last_error());
    fp4s_decomp *whole = NULL;
    CHECK(fp4s_decomp_open(s, &ts, &o, ROWS, COLS, &whole) == 0, "open: %s", fp4s_last_error());
    CHECK(fp4s_decomp_add(whole, x, ROWS, COLS, 0) == 0, "CPU: %s", fp4s_last_error());
    /* the cuts, and the tensor amax as the largest of the ranges' */
    size_t cut[8];
    for (unsigned r = 0; r <= P; r++) {
        size_t c = (ROWS * r + P - 1) / P;
        c = (c + align - 1) / align * align;
        cut[r] = c < ROWS ? c : ROWS;
    }
    float amax = 0.0f;
    for (unsigned r = 0; r < P; r++) {
        float a = range_amax(s, x, cut[r], cut[r + 1]);
        if (a > amax) amax = a;
    }
    CHECK(fp4s_tscale_init(s, amax, &ts) == 0, "tscale: %s", fp4s_last_error());
    fp4s_decomp *acc = NULL;
    const long bad0 = n_bad;
    for (unsigned r = 0; r < P && n_bad == bad0; r++) {
        fp4s_decomp *d = NULL, *back = NULL;
        CHECK(fp4s_decomp_open(s, &ts, &o, ROWS, COLS, &d) == 0, "open: %s", fp4s_last_error());
        for (size_t r0 = cut[r]; r0 < cut[r + 1]; r0 += chunk) {
            size_t n = cut[r + 1] - r0 < chunk ? cut[r + 1] - r0 : chunk;
            int rc = fp4s_decomp_add_via(d, fp4s_cu_decomp_emulate, FP4S_DT_F32, x + r0 * COLS, true, n, COLS, r0,
                                         NULL);
            CHECK(rc == 0, "rank %u, rows %zu+%zu: %s", r, r0, n, fp4s_last_error());
        }
        void *blob = NULL;
        size_t len = 0;
        CHECK(fp4s_decomp_serialize(d, &blob, &len) == 0, "serialize: %s", fp4s_last_error());
        CHECK(fp4s_decomp_deserialize(blob, len, &back) == 0, "deserialize: %s", fp4s_last_error());
        free(blob);
        fp4s_decomp_close(&d);
        if (!acc) acc = back;
        else {
            CHECK(fp4s_decomp_merge(acc, back) == 0, "merge: %s", fp4s_last_error());
            fp4s_decomp_close(&back);
        }
    }
    if (n_bad == bad0) same_decomp(what, whole, acc);
    fp4s_decomp_close(&whole);
    fp4s_decomp_close(&acc);
}

int main(void)
{
    float *x = malloc(ROWS * COLS * sizeof *x);
    if (!x) return 1;
    parts_fill(x);
    struct {
        const char *name;
        fp4s_format f;
        const char *profile;
        bool tile2d;
    } specs[] = {{"mxfp4 ocp", FP4S_MXFP4, "ocp", false},
                 {"nvfp4 te", FP4S_NVFP4, "te", false},
                 {"nvfp4 te, 16-row tiles", FP4S_NVFP4, "te", true}};
    int tried = 0;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fp4s_spec s;
        if (fp4s_spec_profile(&s, specs[k].f, specs[k].profile)) {
            fprintf(stderr, "FAIL %s: %s\n", specs[k].name, fp4s_last_error());
            return 1;
        }
        s.tile2d = specs[k].tile2d;
        const char *why = NULL;
        if (!fp4s_cu_supports_why(&s, &why)) {
            fprintf(stderr, "FAIL %s: the GPU path does not take it: %s\n", specs[k].name, why);
            return 1;
        }
        tried++;
        for (int by = 0; by < 4; by++)
            for (unsigned P = 1; P <= 4; P++) {
                check(specs[k].name, &s, (fp4s_group)by, x, P, 32);
                check(specs[k].name, &s, (fp4s_group)by, x, P, 48);
            }
    }
    free(x);
    printf("test_cuda_rows: %d specs, %ld checks, %ld failed\n", tried, n_checks, n_bad);
    return n_bad ? 1 : 0;
}
