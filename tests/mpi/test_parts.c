/* The library pieces of work split over processes: a tensor decomposed in
 * row ranges (fp4s_decomp_source_rows, fp4s_decomp_source_amax), sent as bytes
 * (fp4s_decomp_serialize / _deserialize) and merged gives the whole tensor's
 * decomposition bit for bit; a capture's steps analyzed in ranges
 * (fp4s_mm_analyze_part) and joined give fp4s_mm_analyze's runs bit for bit.
 * No MPI here: identical.sh and failures.sh run the tools under mpirun. */
#include <fp4scope/fp4scope.h>

#include "../check_main.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parts_data.h"

static char dir[256], cap[300];
static const size_t ROWS = PARTS_ROWS, COLS = PARTS_COLS;

/* A capture: one activation [ROWS, COLS] with outliers, zeros, a NaN and an
 * Inf, and log-probs over 7 steps (positions in steps 0 and 1 only). */
static void make_capture(void)
{
    snprintf(dir, sizeof dir, "/tmp/fp4s_parts_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cap, sizeof cap, "%s/c.h5", dir);
    fp4s_capture *c = NULL;
    ck_assert_int_eq(fp4s_capture_create(cap, NULL, &c), 0);
    float *x = malloc(ROWS * COLS * sizeof *x);
    parts_fill(x);
    ck_assert_int_eq(fp4s_capture_put(c, 0, "layers.0.fc", "rollout", FP4S_DT_F32, x, ROWS, COLS, COLS, NULL), 0);
    free(x);
    for (int64_t step = 0; step < 7; step++) {
        size_t n = 500 + 37 * (size_t)step;
        float *lt = malloc(n * sizeof *lt), *lr = malloc(n * sizeof *lr);
        int64_t *seq = malloc(n * sizeof *seq), *pos = malloc(n * sizeof *pos);
        for (size_t i = 0; i < n; i++) {
            lt[i] = (float)(-3.0 * urand());
            lr[i] = lt[i] + (float)(0.01 * (urand() - 0.5) * (double)(step + 1));
            if (lr[i] > 0) lr[i] = 0;
            seq[i] = (int64_t)(i / 50);
            pos[i] = (int64_t)(i % 50);
        }
        ck_assert_int_eq(fp4s_capture_put_logprobs(c, step, lt, lr, seq, step < 2 ? pos : NULL, NULL, n), 0);
        ck_assert_int_eq(fp4s_capture_flush(c), 0);
        free(lt);
        free(lr);
        free(seq);
        free(pos);
    }
    ck_assert_int_eq(fp4s_capture_close(&c), 0);
}

static void clean(void)
{
    unlink(cap);
    rmdir(dir);
}

static void same_decomp(const fp4s_decomp *a, const fp4s_decomp *b)
{
    fp4s_decomp_result ra, rb;
    ck_assert_int_eq(fp4s_decomp_summary(a, &ra), 0);
    ck_assert_int_eq(fp4s_decomp_summary(b, &rb), 0);
    ck_assert_int_eq(memcmp(&ra, &rb, sizeof ra), 0);
    ck_assert_uint_eq(fp4s_decomp_ngroups(a), fp4s_decomp_ngroups(b));
    for (size_t g = 0; g < fp4s_decomp_ngroups(a); g++) {
        ck_assert_int_eq(fp4s_decomp_group(a, g, &ra), 0);
        ck_assert_int_eq(fp4s_decomp_group(b, g, &rb), 0);
        ck_assert_msg(memcmp(&ra, &rb, sizeof ra) == 0, "group %zu differs", g);
    }
    for (int k = 0; k < 2; k++) {
        fp4s_decomp_hist ha, hb;
        ck_assert_int_eq(fp4s_decomp_hist_get(a, (fp4s_decomp_hist_kind)k, &ha), 0);
        ck_assert_int_eq(fp4s_decomp_hist_get(b, (fp4s_decomp_hist_kind)k, &hb), 0);
        ck_assert_int_eq(memcmp(&ha, &hb, sizeof ha), 0);
    }
}

/* Decompose in row ranges cut at `cuts`, each part through bytes, merged in
 * the order given, against the whole. */
static void check_parts(const fp4s_spec *s, fp4s_group by, const size_t *cuts, size_t ncut, bool reverse)
{
    char src[400];
    snprintf(src, sizeof src, "%s:/steps/0/layers.0.fc/rollout", cap);
    fp4s_decomp_opts o;
    fp4s_decomp_opts_defaults(&o);
    o.by = by;
    o.chunk_elems = 1000; /* several chunks per part */
    fp4s_decomp *whole = NULL;
    ck_assert_int_eq(fp4s_decomp_source(s, &o, src, &whole), 0);
    float amax = 0.0f;
    for (size_t k = 0; k + 1 < ncut; k++) {
        float a = -1.0f;
        ck_assert_int_eq(fp4s_decomp_source_amax(s, &o, src, cuts[k], cuts[k + 1] - cuts[k], &a), 0);
        ck_assert(a >= 0.0f);
        if (a > amax) amax = a;
    }
    fp4s_decomp *acc = NULL;
    for (size_t j = 0; j + 1 < ncut; j++) {
        size_t k = reverse ? ncut - 2 - j : j;
        fp4s_decomp *d = NULL, *back = NULL;
        ck_assert_int_eq(fp4s_decomp_source_rows(s, &o, src, cuts[k], cuts[k + 1] - cuts[k], &amax, &d), 0);
        void *blob = NULL;
        size_t len = 0;
        ck_assert_int_eq(fp4s_decomp_serialize(d, &blob, &len), 0);
        ck_assert_int_eq(fp4s_decomp_deserialize(blob, len, &back), 0);
        same_decomp(d, back);
        free(blob);
        fp4s_decomp_close(&d);
        if (!acc) acc = back;
        else {
            ck_assert_int_eq(fp4s_decomp_merge(acc, back), 0);
            fp4s_decomp_close(&back);
        }
    }
    same_decomp(whole, acc);
    fp4s_decomp_close(&whole);
    fp4s_decomp_close(&acc);
}

START_TEST(decomp_parts)
{
    make_capture();
    const size_t c3[] = {0, 64, 65, ROWS}, c2[] = {0, 128, ROWS}, c16[] = {0, 48, 112, ROWS};
    for (int by = 0; by < 4; by++) {
        fp4s_spec s;
        ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_MXFP4, "ocp"), 0);
        check_parts(&s, (fp4s_group)by, c3, 4, false);
        check_parts(&s, (fp4s_group)by, c2, 3, true);
        ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_NVFP4, "te"), 0);
        check_parts(&s, (fp4s_group)by, c3, 4, true);
        s.tile2d = true; /* 16-row tiles: ranges on multiples of 16 */
        check_parts(&s, (fp4s_group)by, c16, 4, false);
    }
    clean();
}
END_TEST

START_TEST(decomp_parts_refused)
{
    make_capture();
    char src[400];
    snprintf(src, sizeof src, "%s:/steps/0/layers.0.fc/rollout", cap);
    fp4s_spec s;
    ck_assert_int_eq(fp4s_spec_profile(&s, FP4S_NVFP4, "te"), 0);
    s.tile2d = true;
    fp4s_decomp *d = NULL;
    /* a range that does not start on a tile */
    ck_assert_int_eq(fp4s_decomp_source_rows(&s, NULL, src, 8, 16, NULL, &d), FP4S_EINVAL);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(fp4s_last_error(), "multiples of 16"));
    /* bytes that are not an accumulator, and a truncated one */
    ck_assert_int_eq(fp4s_decomp_deserialize("not a blob at all, not at all", 30, &d), FP4S_EFORMAT);
    ck_assert_int_eq(fp4s_decomp_source_rows(&s, NULL, src, 0, 64, NULL, &d), 0);
    void *blob = NULL;
    size_t len = 0;
    ck_assert_int_eq(fp4s_decomp_serialize(d, &blob, &len), 0);
    fp4s_decomp *back = NULL;
    ck_assert_int_eq(fp4s_decomp_deserialize(blob, len - 1, &back), FP4S_EFORMAT);
    ck_assert_ptr_null(back);
    free(blob);
    fp4s_decomp_close(&d);
    clean();
}
END_TEST

static void same_metrics(const fp4s_mm_metrics *a, const fp4s_mm_metrics *b, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_msg(memcmp(&a[i], &b[i], sizeof *a) == 0, "step %zu differs", i);
}

static void check_mm_parts(size_t nparts, bool bypos)
{
    fp4s_mm_opts o;
    fp4s_mm_opts_defaults(&o);
    o.by_position = bypos;
    fp4s_mm_result whole = {0};
    ck_assert_int_eq(fp4s_mm_analyze(cap, NULL, &o, NULL, &whole), 0);
    ck_assert_uint_eq(whole.nruns, 1);
    fp4s_mm_run *w = &whole.runs[0];
    size_t at = 0;
    uint64_t tokens = 0;
    for (size_t p = 0; p < nparts; p++) {
        fp4s_mm_result part = {0};
        int rc = fp4s_mm_analyze_part(cap, NULL, &o, NULL, p, nparts, &part);
        if (nparts > 7 && p * 7 / nparts == (p + 1) * 7 / nparts) {
            ck_assert_int_eq(rc, FP4S_EEMPTY); /* a range without steps */
            continue;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(part.nruns, 1);
        fp4s_mm_run *r = &part.runs[0];
        ck_assert_str_eq(r->name, w->name);
        ck_assert_uint_le(at + r->nsteps, w->nsteps);
        same_metrics(w->steps + at, r->steps, r->nsteps);
        if (bypos) {
            same_metrics(w->first + at, r->first, r->nsteps);
            same_metrics(w->rest + at, r->rest, r->nsteps);
        }
        at += r->nsteps;
        tokens += r->tokens;
        fp4s_mm_result_free(&part);
    }
    ck_assert_uint_eq(at, w->nsteps);
    ck_assert_uint_eq(tokens, w->tokens);
    fp4s_mm_result_free(&whole);
}

START_TEST(mm_parts)
{
    make_capture();
    for (size_t np = 1; np <= 9; np++) {
        check_mm_parts(np, false);
        check_mm_parts(np, true); /* steps 2.. have no positions: what steps 0 and 1 told the reader holds */
    }
    /* a text trace is read whole */
    char csv[300];
    snprintf(csv, sizeof csv, "%s/t.csv", dir);
    FILE *f = fopen(csv, "w");
    fprintf(f, "step,seq,trainer_logprob,rollout_logprob\n0,0,-1,-1.1\n");
    fclose(f);
    fp4s_mm_result r = {0};
    ck_assert_int_eq(fp4s_mm_analyze_part(csv, NULL, NULL, NULL, 0, 2, &r), FP4S_ENOTSUP);
    ck_assert_int_eq(fp4s_mm_analyze_part(cap, NULL, NULL, NULL, 2, 2, &r), FP4S_EINVAL);
    ck_assert_uint_eq(r.nruns, 0);
    unlink(csv);
    clean();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parts");
    const check_case cases[] = {
        CHECK_CASE(decomp_parts),
        CHECK_CASE(decomp_parts_refused),
        CHECK_CASE(mm_parts),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 120);
    return check_run(s, CK_NORMAL);
}
