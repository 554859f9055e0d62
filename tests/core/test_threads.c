/* fp4s_parallel_for / fp4s_parallel_dynamic: every item once, the static
 * split's determinism, and errors (code and detail) carried back from a worker
 * thread to the caller. */
#include "../check_main.h"
#include <unistd.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <fp4scope/common.h>
#include <fp4scope/quant.h>

struct cover {
    unsigned char *seen; /* times each item was visited */
    size_t fail_at;      /* item whose piece fails, or SIZE_MAX */
    int workers_seen[64];
};

static int visit(void *arg, size_t b, size_t e, int w)
{
    struct cover *c = arg;
    if (w >= 0 && w < 64) __atomic_store_n(&c->workers_seen[w], 1, __ATOMIC_RELAXED);
    for (size_t i = b; i < e; i++) {
        if (i == c->fail_at)
            return fp4s_error_set(FP4S_EFORMAT, "item %zu failed on worker %d", i, w);
        __atomic_fetch_add(&c->seen[i], 1, __ATOMIC_RELAXED);
    }
    return 0;
}

static void check_once(const struct cover *c, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_msg(c->seen[i] == 1, "item %zu visited %d times", i, c->seen[i]);
}

START_TEST(parallel_for_visits_every_item_once)
{
    for (int t = 1; t <= 5; t++) {
        fp4s_set_threads(t);
        for (size_t n = 0; n < 300; n += 37) {
            struct cover c = {calloc(n + 1, 1), (size_t)-1, {0}};
            ck_assert_int_eq(fp4s_parallel_for(n, 3, visit, &c), 0);
            check_once(&c, n);
            free(c.seen);
        }
    }
    fp4s_set_threads(0);
}
END_TEST

START_TEST(parallel_dynamic_visits_every_item_once)
{
    for (int t = 1; t <= 5; t++)
        for (size_t piece = 1; piece < 40; piece += 13)
            for (size_t n = 0; n < 500; n += 71) {
                struct cover c = {calloc(n + 1, 1), (size_t)-1, {0}};
                ck_assert_int_eq(fp4s_parallel_dynamic(n, piece, t, visit, &c), 0);
                check_once(&c, n);
                for (int w = t; w < 64; w++) ck_assert_int_eq(c.workers_seen[w], 0);
                free(c.seen);
            }
}
END_TEST

static int record_range(void *arg, size_t b, size_t e, int w)
{
    size_t *r = arg;
    r[2 * w] = b;
    r[2 * w + 1] = e;
    return 0;
}

START_TEST(parallel_for_static_split_is_deterministic)
{
    fp4s_set_threads(3);
    size_t a[6] = {0}, b[6] = {0};
    ck_assert_int_eq(fp4s_parallel_for(100, 1, record_range, a), 0);
    ck_assert_int_eq(fp4s_parallel_for(100, 1, record_range, b), 0);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert_uint_eq(a[0], 0);
    ck_assert_uint_eq(a[1], a[2]);
    ck_assert_uint_eq(a[3], a[4]);
    ck_assert_uint_eq(a[5], 100);
    fp4s_set_threads(0);
}
END_TEST

START_TEST(worker_error_detail_reaches_the_caller)
{
    fp4s_set_threads(4);
    size_t n = 1000;
    struct cover c = {calloc(n, 1), 990, {0}}; /* in the last worker's range */
    int rc = fp4s_parallel_for(n, 1, visit, &c);
    ck_assert_int_eq(rc, FP4S_EFORMAT);
    ck_assert_msg(strstr(fp4s_last_error(), "item 990 failed on worker 3") != NULL, "detail: %s",
                  fp4s_last_error());
    free(c.seen);

    struct cover d = {calloc(n, 1), 500, {0}};
    rc = fp4s_parallel_dynamic(n, 7, 4, visit, &d);
    ck_assert_int_eq(rc, FP4S_EFORMAT);
    ck_assert_msg(strstr(fp4s_last_error(), "item 500 failed") != NULL, "detail: %s", fp4s_last_error());
    free(d.seen);
    fp4s_set_threads(0);
}
END_TEST

static int max_worker(void *arg, size_t b, size_t e, int w)
{
    int *m = arg;
    (void)b;
    (void)e;
    int cur = __atomic_load_n(m, __ATOMIC_RELAXED);
    while (w > cur && !__atomic_compare_exchange_n(m, &cur, w, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return 0;
}

/* Counts above FP4S_MAX_THREADS (from fp4s_set_threads, FP4S_THREADS or a
 * caller's nworkers) are clamped where they are set: no more workers run, and
 * the per-worker arrays of the library hold them all (--threads 300 crashed). */
START_TEST(thread_counts_are_clamped)
{
    fp4s_set_threads(300);
    ck_assert_int_eq(fp4s_get_threads(), FP4S_MAX_THREADS);
    size_t n = 5000;
    struct cover c = {calloc(n, 1), (size_t)-1, {0}};
    ck_assert_int_eq(fp4s_parallel_for(n, 1, visit, &c), 0);
    check_once(&c, n);
    free(c.seen);
    int m = -1;
    ck_assert_int_eq(fp4s_parallel_for(n, 1, max_worker, &m), 0);
    ck_assert_int_lt(m, FP4S_MAX_THREADS);
    ck_assert_int_eq(m, FP4S_MAX_THREADS - 1);
    /* one row per work item (a row of 65537 columns is a whole grain): 300 items */
    size_t rows = 300, cols = 65537;
    float *x = calloc(rows * cols, sizeof *x);
    ck_assert_ptr_nonnull(x);
    x[299 * cols + 7] = -3.5f;
    uint64_t nf = 0;
    ck_assert_float_eq(fp4s_amax(x, rows, cols, cols, &nf), 3.5f);
    ck_assert_uint_eq(nf, 0);
    free(x);
    fp4s_set_threads(0);
    setenv("FP4S_THREADS", "1000", 1);
    ck_assert_int_le(fp4s_get_threads(), FP4S_MAX_THREADS);
    unsetenv("FP4S_THREADS");
    m = -1;
    ck_assert_int_eq(fp4s_parallel_dynamic(n, 1, 1000, max_worker, &m), 0);
    ck_assert_int_lt(m, FP4S_MAX_THREADS);
}
END_TEST

/* Worker w records its thread id. */
static int record_tid(void *arg, size_t b, size_t e, int w)
{
    long *t = arg;
    (void)b;
    (void)e;
    t[w] = (long)syscall(SYS_gettid);
    return 0;
}

START_TEST(workers_are_kept_between_calls)
{
    /* the pool: a second call runs on the threads of the first (a chunked tool
     * no longer starts its workers once per chunk) */
    fp4s_set_threads(4);
    long a[4] = {0}, b[4] = {0};
    ck_assert_int_eq(fp4s_parallel_for(4, 1, record_tid, a), 0);
    ck_assert_int_eq(fp4s_parallel_for(4, 1, record_tid, b), 0);
    for (int w = 0; w < 4; w++) ck_assert_msg(a[w] == b[w], "worker %d: thread %ld, then %ld", w, a[w], b[w]);
    for (int w = 1; w < 4; w++) ck_assert_msg(a[w] != a[0], "worker %d ran on the caller's thread", w);
    fp4s_set_threads(0);
}
END_TEST

/* A worker that runs a parallel loop of its own (the pool is busy then). */
static int nested(void *arg, size_t b, size_t e, int w)
{
    struct cover *c = arg;
    (void)w;
    for (size_t i = b; i < e; i++) {
        struct cover in = {c[i + 1].seen, (size_t)-1, {0}};
        int rc = fp4s_parallel_for(50, 1, visit, &in);
        if (rc) return rc;
    }
    return 0;
}

static void *call_from_thread(void *arg)
{
    struct cover *c = arg;
    return (void *)(intptr_t)fp4s_parallel_dynamic(300, 5, 3, visit, c);
}

START_TEST(nested_and_concurrent_calls)
{
    fp4s_set_threads(3);
    struct cover c[7];
    for (int i = 0; i < 7; i++) c[i] = (struct cover){calloc(300, 1), (size_t)-1, {0}};
    ck_assert_int_eq(fp4s_parallel_for(6, 1, nested, c), 0);
    for (int i = 1; i < 7; i++) check_once(&c[i], 50);
    /* two callers at once: one gets the pool, the other its own threads */
    struct cover x = {calloc(300, 1), (size_t)-1, {0}}, y = {calloc(300, 1), (size_t)-1, {0}};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, call_from_thread, &x), 0);
    ck_assert_int_eq(fp4s_parallel_dynamic(300, 5, 3, visit, &y), 0);
    void *r;
    pthread_join(t, &r);
    ck_assert_int_eq((int)(intptr_t)r, 0);
    check_once(&x, 300);
    check_once(&y, 300);
    for (int i = 0; i < 7; i++) free(c[i].seen);
    free(x.seen);
    free(y.seen);
    fp4s_set_threads(0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    const check_case cases[] = {
        CHECK_CASE(parallel_for_visits_every_item_once),
        CHECK_CASE(parallel_dynamic_visits_every_item_once),
        CHECK_CASE(parallel_for_static_split_is_deterministic),
        CHECK_CASE(worker_error_detail_reaches_the_caller),
        CHECK_CASE(thread_counts_are_clamped),
        CHECK_CASE(workers_are_kept_between_calls),
        CHECK_CASE(nested_and_concurrent_calls),
    };
    check_add_cases(s, cases, CHECK_NCASES(cases), NULL, NULL, 0);
    return check_run(s, CK_NORMAL);
}
