/* Errors, version, features and the thread pool shared by every module. */
#include <fp4scope/common.h>
#include <fp4scope/version.h>
#include <fp4scope/quant.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp4s_config.h"
#include "base/threads.h"

#define DETAIL_MAX 1024
static _Thread_local char err_detail[DETAIL_MAX];

const char *fp4s_strerror(int code)
{
    switch (code) {
    case FP4S_OK:        return "success";
    case FP4S_EINVAL:    return "invalid argument";
    case FP4S_ENOMEM:    return "out of memory";
    case FP4S_EOPEN:     return "cannot open or read input";
    case FP4S_EFORMAT:   return "malformed input";
    case FP4S_EDTYPE:    return "unsupported data type";
    case FP4S_ESHAPE:    return "wrong rank or shape";
    case FP4S_ENOTFOUND: return "not found";
    case FP4S_EWRITE:    return "cannot write output";
    case FP4S_EVERSION:  return "unsupported (newer) file version";
    case FP4S_ENOTSUP:   return "not supported";
    case FP4S_ERANGE:    return "value out of range";
    case FP4S_EEMPTY:    return "empty input or selection";
    case FP4S_ECHECK:    return "check failed";
    case FP4S_EDUP:      return "conflicting duplicate";
    case FP4S_EINTERNAL: return "internal error";
    case FP4S_EBUSY:     return "file held by another writer";
    default:             return "unknown error";
    }
}

const char *fp4s_last_error(void) { return err_detail; }

void fp4s_error_clear(void) { err_detail[0] = '\0'; }

int fp4s_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_detail, sizeof err_detail, fmt, ap);
    va_end(ap);
    return code;
}

void fp4s_error_prefix(const char *fmt, ...)
{
    char pre[DETAIL_MAX], old[DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err_detail, sizeof old);
    /* pre, then ": " and as much of the old detail as fits */
    size_t n = strlen(pre);
    if (n > DETAIL_MAX - 1) n = DETAIL_MAX - 1;
    memcpy(err_detail, pre, n);
    if (old[0] && n + 2 < DETAIL_MAX) {
        memcpy(err_detail + n, ": ", 2);
        n += 2;
        size_t m = strlen(old);
        if (m > DETAIL_MAX - 1 - n) m = DETAIL_MAX - 1 - n;
        memcpy(err_detail + n, old, m);
        n += m;
    }
    err_detail[n] = '\0';
}

int fp4s_exit_status(int code)
{
    switch (code) {
    case FP4S_OK:        return FP4S_EXIT_OK;
    case FP4S_ECHECK:    return FP4S_EXIT_CHECK;
    case FP4S_EINVAL:
    case FP4S_ENOTSUP:   return FP4S_EXIT_USAGE;
    case FP4S_EWRITE:
    case FP4S_EBUSY:     return FP4S_EXIT_OUTPUT;
    case FP4S_ENOMEM:
    case FP4S_EINTERNAL: return FP4S_EXIT_INTERNAL;
    default:             return FP4S_EXIT_INPUT;
    }
}

const char *fp4s_version(void) { return FP4S_VERSION_STRING; }

const char *fp4s_features(void)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "hdf5%s%s%s%s simd=%s threads=%d",
             FP4S_HAVE_GSL ? " gsl" : "", FP4S_HAVE_JANSSON ? " jansson" : "",
             FP4S_HAVE_BLAS ? " blas" : "", FP4S_HAVE_CUDA ? " cuda" : "",
             fp4s_kernels_level(), fp4s_get_threads());
    return buf;
}

/* ---- progress ------------------------------------------------------------------ */
static fp4s_progress_fn progress_fn;
static void *progress_arg;

void fp4s_set_progress(fp4s_progress_fn fn, void *arg)
{
    progress_fn = fn;
    progress_arg = arg;
}

void fp4s_progress_report(uint64_t done, uint64_t total)
{
    if (progress_fn) progress_fn(progress_arg, done, total);
}

/* ---- threads ----------------------------------------------------------------- */
static int n_threads_set;

static int clamp_threads(long n) { return n > FP4S_MAX_THREADS ? FP4S_MAX_THREADS : (int)n; }

void fp4s_set_threads(int n) { n_threads_set = n > 0 ? clamp_threads(n) : 0; }

int fp4s_get_threads(void)
{
    if (n_threads_set > 0) return n_threads_set;
    const char *e = getenv("FP4S_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v > 0) return clamp_threads(v);
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? clamp_threads(c) : 1;
}

struct pf_job {
    fp4s_range_fn fn;
    void *arg;
    size_t begin, end;   /* static split: this worker's range */
    size_t *next, n, piece; /* dynamic split: shared cursor, total, piece size */
    int worker, rc;
    char err[DETAIL_MAX]; /* the failing worker's detail (thread-local there) */
};

/* Set while a thread runs a worker (threads.h). */
static _Thread_local int pf_depth;

bool fp4s_in_parallel_worker(void) { return pf_depth > 0; }

static void *pf_run(void *p)
{
    struct pf_job *j = p;
    pf_depth++;
    if (!j->next) {
        j->rc = j->fn(j->arg, j->begin, j->end, j->worker);
    } else {
        for (;;) {
            size_t u = __atomic_fetch_add(j->next, j->piece, __ATOMIC_RELAXED);
            if (u >= j->n) break;
            size_t e = j->n - u < j->piece ? j->n : u + j->piece;
            j->rc = j->fn(j->arg, u, e, j->worker);
            if (j->rc) { /* the others stop at their next piece */
                __atomic_store_n(j->next, j->n, __ATOMIC_RELAXED);
                break;
            }
        }
    }
    if (j->rc) memcpy(j->err, err_detail, sizeof j->err);
    pf_depth--;
    return NULL;
}

/* Start workers 1..nt-1 on threads, run worker 0 here, join; a worker whose
 * thread could not be started runs here afterwards. */
static void pf_spawn(struct pf_job *jobs, size_t nt)
{
    pthread_t tid[FP4S_MAX_THREADS];
    bool started[FP4S_MAX_THREADS] = {0};
    if (nt > FP4S_MAX_THREADS) nt = FP4S_MAX_THREADS; /* the callers clamp already */
    for (size_t w = 1; w < nt; w++)
        started[w] = pthread_create(&tid[w], NULL, pf_run, &jobs[w]) == 0;
    pf_run(&jobs[0]);
    for (size_t w = 1; w < nt; w++) {
        if (started[w]) pthread_join(tid[w], NULL);
        else pf_run(&jobs[w]);
    }
}

/* A pool of worker threads kept between calls: a tool that quantizes a
 * tensor in thousands of chunks would otherwise create and join every worker
 * thread once per chunk, which on a many-core machine costs about as much as
 * the chunk's arithmetic (bench/RESULTS-H200.md, CPU scaling). Workers are
 * started on first use and as more are needed; one call at a time uses the
 * pool (a call made while it is busy, for example from inside a worker,
 * starts threads of its own as before). */
static struct {
    pthread_mutex_t mu, use;
    pthread_cond_t go, done;
    struct pf_job *jobs; /* the current call's jobs, worker w takes jobs[w] */
    size_t nt;           /* workers 1..nt-1 take part in the current call */
    size_t running;      /* of those, not finished yet */
    unsigned long gen;   /* call number: a worker runs once per call */
    size_t nthreads;     /* threads started: pool workers 1..nthreads */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0};

static void *pool_main(void *p)
{
    const size_t w = (size_t)(uintptr_t)p;
    unsigned long seen = 0;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (pool.gen == seen) pthread_cond_wait(&pool.go, &pool.mu);
        seen = pool.gen;
        if (w >= pool.nt) continue;
        struct pf_job *j = &pool.jobs[w];
        pthread_mutex_unlock(&pool.mu);
        pf_run(j);
        pthread_mutex_lock(&pool.mu);
        if (--pool.running == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

/* Run workers 1..nt-1 of jobs on the pool and worker 0 here; false (nothing
 * run) when the pool is busy or cannot get enough threads. */
static bool pool_launch(struct pf_job *jobs, size_t nt)
{
    if (pthread_mutex_trylock(&pool.use) != 0) return false;
    pthread_mutex_lock(&pool.mu);
    while (pool.nthreads + 1 < nt) {
        pthread_t t;
        pthread_attr_t a;
        bool ok = pthread_attr_init(&a) == 0;
        if (ok) pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        ok = ok && pthread_create(&t, &a, pool_main, (void *)(uintptr_t)(pool.nthreads + 1)) == 0;
        pthread_attr_destroy(&a);
        if (!ok) break;
        pool.nthreads++;
    }
    if (pool.nthreads + 1 < nt) {
        pthread_mutex_unlock(&pool.mu);
        pthread_mutex_unlock(&pool.use);
        return false;
    }
    pool.jobs = jobs;
    pool.nt = nt;
    pool.running = nt - 1;
    pool.gen++;
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    pf_run(&jobs[0]);
    pthread_mutex_lock(&pool.mu);
    while (pool.running) pthread_cond_wait(&pool.done, &pool.mu);
    pool.jobs = NULL;
    pool.nt = 0;
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.use);
    return true;
}

/* The workers of a call run on the pool (or on threads of their own); the
 * first failing worker (in worker order) gives the result and its error
 * detail. */
static int pf_launch(struct pf_job *jobs, size_t nt)
{
    if (!pool_launch(jobs, nt)) pf_spawn(jobs, nt);
    for (size_t w = 0; w < nt; w++)
        if (jobs[w].rc) {
            memcpy(err_detail, jobs[w].err, sizeof err_detail);
            return jobs[w].rc;
        }
    return 0;
}

int fp4s_parallel_for(size_t n, size_t grain, fp4s_range_fn fn, void *arg)
{
    if (n == 0) return 0;
    if (grain == 0) grain = 1;
    size_t nt = (size_t)fp4s_get_threads(); /* <= FP4S_MAX_THREADS */
    size_t max_by_grain = (n + grain - 1) / grain;
    if (nt > max_by_grain) nt = max_by_grain;
    if (nt <= 1) return fn(arg, 0, n, 0);

    struct pf_job *jobs = calloc(nt, sizeof *jobs);
    if (!jobs) return fn(arg, 0, n, 0);
    size_t per = n / nt, rem = n % nt, pos = 0;
    for (size_t w = 0; w < nt; w++) {
        size_t len = per + (w < rem ? 1 : 0);
        jobs[w] = (struct pf_job){.fn = fn, .arg = arg, .begin = pos, .end = pos + len, .worker = (int)w};
        pos += len;
    }
    int rc = pf_launch(jobs, nt);
    free(jobs);
    return rc;
}

int fp4s_parallel_dynamic(size_t n, size_t piece, int nworkers, fp4s_range_fn fn, void *arg)
{
    if (n == 0) return 0;
    if (piece == 0) piece = 1;
    size_t nt = nworkers > 0 ? (size_t)nworkers : (size_t)fp4s_get_threads();
    if (nt > FP4S_MAX_THREADS) nt = FP4S_MAX_THREADS;
    size_t pieces = (n + piece - 1) / piece;
    if (nt > pieces) nt = pieces;
    if (nt <= 1) return fn(arg, 0, n, 0);

    struct pf_job *jobs = calloc(nt, sizeof *jobs);
    if (!jobs) return fn(arg, 0, n, 0);
    size_t next = 0;
    for (size_t w = 0; w < nt; w++)
        jobs[w] = (struct pf_job){.fn = fn, .arg = arg, .next = &next, .n = n, .piece = piece, .worker = (int)w};
    int rc = pf_launch(jobs, nt);
    free(jobs);
    return rc;
}
