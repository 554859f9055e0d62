/* The analysis tools over MPI ranks: the schedule, the exchanges with their
 * failure protocol, and the exact reductions (par.h). Without FP4S_WITH_MPI
 * every call is the one-process path. */
#include "par.h"

#include "cli.h"

#include <fp4scope/cuda.h>
#include <fp4scope/record.h>
#include <fp4scope/tensor.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- one process ---------------------------------------------------------------------- */
static int serial_mm(size_t n, const char *const *paths, const char *const *names, size_t nnames,
                     const fp4s_mm_opts *o, const fp4s_trace_opts *t, fp4s_mm_result *res)
{
    for (size_t i = 0; i < n; i++) {
        cli_progress_begin(paths[i]);
        int rc = fp4s_mm_analyze(paths[i], i < nnames ? names[i] : NULL, o, t, res);
        if (rc) return rc;
    }
    return 0;
}

static void serial_decomp(size_t n, const char *const *src, const fp4s_spec *const *spec,
                          const fp4s_decomp_opts *const *opts, fp4s_decomp **out)
{
    for (size_t i = 0; i < n; i++) {
        cli_progress_begin(src[i]);
        int rc = fp4s_decomp_source(spec[i], opts[i], src[i], &out[i]);
        if (rc) exit(cli_report(rc));
    }
}

int par_channels_run(const fp4s_spec *s, const fp4s_channels_opts *o, const char *act, const char *weight,
                     fp4s_channels_report **out)
{
    if (!par_active()) return fp4s_channels_run(s, o, act, weight, out);
    if (o->score == FP4S_SCORE_HCP && !weight)
        return fp4s_error_set(FP4S_EINVAL, "channels: score hcp needs a weight (--weight)");
    fp4s_decomp_opts dop = o->decomp;
    dop.by = FP4S_GROUP_CHANNEL;
    fp4s_spec ws;
    fp4s_channels_weight_spec(s, o, &ws);
    const char *src[2] = {act, weight};
    const fp4s_spec *sp[2] = {s, &ws};
    const fp4s_decomp_opts *op[2] = {&dop, &dop};
    fp4s_decomp *d[2] = {NULL, NULL};
    if (!par_decomp(weight ? 2 : 1, src, sp, op, NULL, NULL, d)) return PAR_DONE;
    int rc = fp4s_channels_finish(d[0], d[1], o, act, weight, out);
    fp4s_decomp_close(&d[0]);
    fp4s_decomp_close(&d[1]);
    return rc;
}

#ifndef FP4S_WITH_MPI
void par_init(void) {}
bool par_active(void) { return false; }
int par_rank(void) { return 0; }
int par_size(void) { return 1; }
bool par_mine(size_t i)
{
    (void)i;
    return true;
}
bool par_decomp(size_t n, const char *const *src, const fp4s_spec *const *spec,
                const fp4s_decomp_opts *const *opts, const size_t *rows, const size_t *cols,
                fp4s_decomp **out)
{
    (void)rows;
    (void)cols;
    serial_decomp(n, src, spec, opts, out);
    return true;
}
int par_mm_analyze(size_t n, const char *const *paths, const char *const *names, size_t nnames,
                   const fp4s_mm_opts *o, const fp4s_trace_opts *t, fp4s_mm_result *res)
{
    return serial_mm(n, paths, names, nnames, o, t, res);
}
bool par_gather_units(size_t n, void (*put)(void *ctx, size_t i, fp4s_buf *b),
                      void (*get)(void *ctx, size_t i, const unsigned char **p, const unsigned char *end),
                      void *ctx)
{
    (void)n;
    (void)put;
    (void)get;
    (void)ctx;
    return true;
}
bool par_gather_compare(fp4s_compare_site *base, size_t stride, size_t n)
{
    (void)base;
    (void)stride;
    (void)n;
    return true;
}
bool par_gather_remedy(fp4s_remedy_site *info0, fp4s_remedy_result **res0, size_t stride, size_t n, size_t nr)
{
    (void)info0;
    (void)res0;
    (void)stride;
    (void)n;
    (void)nr;
    return true;
}
bool par_root_only(void) { return true; }
#else

#include <mpi.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <time.h>

static struct {
    bool active, gathered, agreed;
    int rank, size;
    int err_fd;      /* the real standard error while it is kept */
    int keep_fd;     /* where standard error goes meanwhile */
    uint64_t key;    /* the unit a failure belongs to */
    int node_threads;    /* the node's CPUs over its ranks */
    int threads_at_init; /* fp4s_get_threads() at par_init, -1 with FP4S_THREADS set */
} P = {.err_fd = -1, .keep_fd = -1};

bool par_active(void) { return P.active; }
int par_rank(void) { return P.rank; }
int par_size(void) { return P.size; }

static bool launched(void)
{
    const char *f = getenv("FP4S_MPI");
    if (f && *f) return strcmp(f, "0") != 0;
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return true;
    return false;
}

/* ---- waiting without spinning (a rank that waits leaves its core to the others) -------- */
static void wait_all(int n, MPI_Request *r)
{
    long ns = 20000;
    for (;;) {
        int done = 0;
        MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 2000000) ns *= 2;
    }
}

/* ---- standard error: kept until the results are gathered ------------------------------ */
static char *kept_text(size_t *len)
{
    *len = 0;
    fflush(stderr);
    off_t end = lseek(P.keep_fd, 0, SEEK_END);
    if (end <= 0) return NULL;
    char *t = malloc((size_t)end + 1);
    if (!t) return NULL;
    ssize_t got = pread(P.keep_fd, t, (size_t)end, 0);
    if (got < 0) got = 0;
    t[got] = '\0';
    *len = (size_t)got;
    return t;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* FP4S_MPI_VERBOSE=1: each rank says on the real standard error what it reads. */
static void verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void verbose(const char *fmt, ...)
{
    const char *v = getenv("FP4S_MPI_VERBOSE");
    if (!v || !*v || !strcmp(v, "0")) return;
    char line[2048];
    int k = snprintf(line, sizeof line, "%s: rank %d of %d: ", cli_prog(), P.rank, P.size);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    if (n + 1 < sizeof line) line[n++] = '\n';
    write_all(P.err_fd >= 0 ? P.err_fd : STDERR_FILENO, line, n);
}

/* Give standard error back; `show`: print what was kept first. */
static void stderr_restore(bool show)
{
    if (P.err_fd < 0) return;
    size_t n;
    char *t = show ? kept_text(&n) : NULL;
    fflush(stderr);
    dup2(P.err_fd, STDERR_FILENO);
    close(P.err_fd);
    close(P.keep_fd);
    P.err_fd = P.keep_fd = -1;
    if (t) write_all(STDERR_FILENO, t, n);
    free(t);
}

/* ---- the exchange: every rank's status, then (all fine) the data -----------------------
 * Every exchange starts with the same collective (an allgather of one header
 * per rank), so that a rank leaving through exit() anywhere meets the others
 * at whichever exchange they are in. */
typedef struct head {
    int32_t status;   /* 0, or the exit status of a failure */
    int32_t left;     /* exited with status 0 before the end (--help, --version) */
    uint64_t key;     /* the failing unit */
    uint64_t msglen;  /* its message */
    uint64_t len;     /* the payload that follows (a fine rank) */
} head;

static void finalize(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

/* The agreement after a failure: the first failure in schedule order wins;
 * rank 0 prints its message. Returns the status every rank exits with. */
static int agree(const head *h)
{
    int n = P.size, win = -1;
    for (int r = 0; r < n; r++) {
        if (!h[r].status) continue;
        if (win < 0 || h[r].key < h[win].key) win = r;
    }
    int status = win >= 0 ? h[win].status : FP4S_EXIT_INTERNAL;
    size_t mlen = 0;
    char *mine = NULL;
    if (win == P.rank) mine = kept_text(&mlen);
    /* the winner's message to rank 0 */
    uint64_t wl = win >= 0 ? h[win].msglen : 0;
    char *msg = NULL;
    if (win > 0) {
        MPI_Request rq;
        if (P.rank == win) {
            MPI_Isend(mine ? mine : "", (int)wl, MPI_CHAR, 0, 7, MPI_COMM_WORLD, &rq);
            wait_all(1, &rq);
        } else if (P.rank == 0) {
            msg = calloc(wl + 1, 1);
            MPI_Irecv(msg ? msg : (char[1]){0}, msg ? (int)wl : 0, MPI_CHAR, win, 7, MPI_COMM_WORLD, &rq);
            wait_all(1, &rq);
        }
    } else if (win == 0) {
        msg = mine;
        mine = NULL;
    }
    if (P.rank == 0) {
        stderr_restore(false);
        if (msg && *msg) write_all(STDERR_FILENO, msg, strlen(msg));
        else if (win < 0)
            fprintf(stderr, "%s: a rank ended before the others (%d of %d ranks)\n", cli_prog(), n, n);
    } else {
        stderr_restore(false);
    }
    free(msg);
    free(mine);
    return status;
}

/* One exchange. A failure anywhere ends every rank here (in_exit: from the
 * exit handler, which must not call exit()). On success each rank's payload
 * length is in lens[] (may be NULL). */
static void exchange(int status, bool left, uint64_t len, uint64_t *lens, bool in_exit)
{
    head me = {status, left, P.key, 0, len};
    if (status) {
        size_t ml;
        free(kept_text(&ml));
        me.msglen = ml;
    }
    head *all = calloc((size_t)P.size, sizeof *all);
    if (!all) MPI_Abort(MPI_COMM_WORLD, FP4S_EXIT_INTERNAL);
    MPI_Request rq;
    MPI_Iallgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, MPI_COMM_WORLD, &rq);
    wait_all(1, &rq);
    bool bad = false, all_left = true;
    for (int r = 0; r < P.size; r++) {
        bad |= all[r].status != 0 || all[r].left;
        all_left &= all[r].left && !all[r].status;
    }
    if (!bad) {
        for (int r = 0; lens && r < P.size; r++) lens[r] = all[r].len;
        free(all);
        return;
    }
    int st = all_left ? 0 : agree(all);
    free(all);
    P.agreed = true;
    fflush(stdout);
    finalize();
    if (in_exit) _exit(st);
    exit(st);
}

/* At exit: a rank that fails (or leaves) before the results are gathered
 * meets the others at their exchange; after the gathering, rank 0 tells the
 * others its status. */
static void at_exit(int status, void *arg)
{
    (void)arg;
    if (!P.active || P.agreed) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (!P.gathered) exchange(status, status == 0, 0, NULL, true); /* never returns */
    int st = status;
    MPI_Request rq;
    MPI_Ibcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
    wait_all(1, &rq);
    P.agreed = true;
    fflush(stdout);
    finalize();
    if (P.rank != 0) _exit(st);
}

void par_init(void)
{
    if (!launched()) return;
    int ok = 0;
    MPI_Initialized(&ok);
    if (!ok && MPI_Init(NULL, NULL) != MPI_SUCCESS) cli_die(FP4S_EXIT_INTERNAL, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &P.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P.size);
    P.active = true;
    cli_quiet(); /* no progress line: standard error is kept until the gather */
    /* the node's CPUs shared by its ranks, for the work whose result does
     * not depend on the threads (par_decomp), unless threads were asked for */
    MPI_Comm node;
    int local = 1, lrank = -1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_rank(node, &lrank);
        MPI_Comm_free(&node);
    }
    /* one GPU per local rank (fp4scope-mpi(7), GPUs): the launcher's local
     * rank where it sets one, else this rank's place among the node's */
    if (fp4s_cuda_local_rank_env() < 0 && lrank >= 0) (void)fp4s_cuda_bind(NULL, lrank);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), t = cpus > 0 ? cpus / (local > 0 ? local : 1) : 1;
    P.node_threads = t < 1 ? 1 : (int)t;
    const char *ft = getenv("FP4S_THREADS");
    P.threads_at_init = ft && *ft ? -1 : fp4s_get_threads();
    if (P.rank != 0 && !freopen("/dev/null", "w", stdout))
        cli_die(FP4S_EXIT_INTERNAL, "/dev/null: %s", strerror(errno));
    fflush(stderr);
    P.keep_fd = memfd_create("fp4s-stderr", MFD_CLOEXEC);
    if (P.keep_fd >= 0) {
        P.err_fd = dup(STDERR_FILENO);
        if (P.err_fd < 0 || dup2(P.keep_fd, STDERR_FILENO) < 0)
            cli_die(FP4S_EXIT_INTERNAL, "standard error: %s", strerror(errno));
    }
    on_exit(at_exit, NULL);
}

bool par_mine(size_t i)
{
    P.key = i;
    bool mine = !P.active || (int)(i % (size_t)P.size) == P.rank;
    if (mine && P.active) verbose("unit %zu", i);
    return mine;
}

/* ---- the data: byte buffers (what the ranks exchange: records serialized by
 * the library, fp4scope/record.h, and the decompositions' own blobs) ---------- */
typedef fp4s_buf buf;

static void b_put(buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        b->p = xrealloc(b->p, c);
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, sizeof v); }

typedef struct rd {
    const unsigned char *p, *end;
} rd;

static void r_get(rd *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n) cli_die(FP4S_EXIT_INTERNAL, "MPI: a rank's results are truncated");
    memcpy(dst, r->p, n);
    r->p += n;
}
static uint64_t r_u64(rd *r)
{
    uint64_t v;
    r_get(r, &v, sizeof v);
    return v;
}

/* A record of type t into b / out of r (fp4s_record_put, fp4s_record_get). */
static void b_rec(buf *b, const fp4s_rtype *t, const void *rec)
{
    int rc = fp4s_record_put(b, t, rec);
    if (rc) exit(cli_report(rc));
}
static void r_rec(rd *r, const fp4s_rtype *t, void *rec)
{
    int rc = fp4s_record_get(&r->p, r->end, t, rec);
    if (rc) cli_failf(rc, "MPI: a rank's results");
}

/* Rank r's buffer to rank 0, in pieces of at most 1 GiB (MPI counts are int). */
#define PIECE ((size_t)1 << 30)
static void send_root(const buf *b)
{
    size_t np = (b->n + PIECE - 1) / PIECE;
    MPI_Request *rq = xcalloc(np ? np : 1, sizeof *rq);
    for (size_t i = 0; i < np; i++) {
        size_t o = i * PIECE, n = b->n - o < PIECE ? b->n - o : PIECE;
        MPI_Isend(b->p + o, (int)n, MPI_BYTE, 0, 100 + (int)(i % 1000), MPI_COMM_WORLD, &rq[i]);
    }
    wait_all((int)np, rq);
    free(rq);
}

static unsigned char *recv_from(int r, size_t n)
{
    unsigned char *p = xmalloc(n ? n : 1);
    size_t np = (n + PIECE - 1) / PIECE;
    MPI_Request *rq = xcalloc(np ? np : 1, sizeof *rq);
    for (size_t i = 0; i < np; i++) {
        size_t o = i * PIECE, k = n - o < PIECE ? n - o : PIECE;
        MPI_Irecv(p + o, (int)k, MPI_BYTE, r, 100 + (int)(i % 1000), MPI_COMM_WORLD, &rq[i]);
    }
    wait_all((int)np, rq);
    free(rq);
    return p;
}

/* The last exchange: every rank's buffer to rank 0, handed to fn in rank
 * order (rank 0's own first). Returns whether this rank goes on. */
static bool gather_root(const buf *mine, void (*fn)(void *ctx, int rank, rd *r), void *ctx)
{
    uint64_t *lens = xcalloc((size_t)P.size, sizeof *lens);
    exchange(0, false, mine->n, lens, false);
    P.gathered = true;
    if (P.rank != 0) {
        send_root(mine);
        free(lens);
        return false;
    }
    stderr_restore(true);
    for (int r = 0; r < P.size; r++) {
        unsigned char *p = r == 0 ? mine->p : recv_from(r, lens[r]);
        rd rr = {p, p + (r == 0 ? mine->n : lens[r])};
        fn(ctx, r, &rr);
        if (r) free(p);
    }
    free(lens);
    return true;
}

/* Every rank's buffer to every rank (small data: counts must fit an int). */
static unsigned char *gather_all(const buf *mine, uint64_t *lens, size_t *off)
{
    exchange(0, false, mine->n, lens, false);
    int *cnt = xcalloc((size_t)P.size, sizeof *cnt), *dsp = xcalloc((size_t)P.size, sizeof *dsp);
    size_t tot = 0;
    for (int r = 0; r < P.size; r++) {
        if (lens[r] > INT32_MAX || tot > INT32_MAX) cli_die(FP4S_EXIT_INTERNAL, "MPI: exchange too large");
        cnt[r] = (int)lens[r];
        dsp[r] = (int)tot;
        off[r] = tot;
        tot += lens[r];
    }
    unsigned char *all = xmalloc(tot ? tot : 1);
    MPI_Request rq;
    MPI_Iallgatherv(mine->p ? mine->p : (unsigned char *)"", (int)mine->n, MPI_BYTE, all, cnt, dsp, MPI_BYTE,
                    MPI_COMM_WORLD, &rq);
    wait_all(1, &rq);
    free(cnt);
    free(dsp);
    return all;
}

bool par_root_only(void)
{
    if (!P.active) return true;
    uint64_t *lens = xcalloc((size_t)P.size, sizeof *lens);
    exchange(0, false, 0, lens, false);
    free(lens);
    P.gathered = true;
    if (P.rank == 0) stderr_restore(true);
    return P.rank == 0;
}

/* ---- decompositions: rows cut into P equal ranges --------------------------------------- */
typedef struct piece {
    size_t unit, row0, nrows;
    bool whole;
} piece;

/* The first (unit, row) at or after element b: rows rounded up to the unit's
 * alignment; past a unit's end, the next unit's start. */
static void cut_at(size_t n, const size_t *rows, const size_t *cols, const size_t *align, const size_t *w,
                   unsigned __int128 b, size_t *cu, size_t *crow)
{
    unsigned __int128 off = 0;
    for (size_t i = 0; i < n; i++) {
        if (off >= b) {
            *cu = i;
            *crow = 0;
            return;
        }
        if (off + w[i] > b) {
            size_t r = (size_t)((b - off + cols[i] - 1) / cols[i]);
            r = (r + align[i] - 1) / align[i] * align[i];
            if (r < rows[i]) {
                *cu = i;
                *crow = r;
                return;
            }
        }
        off += w[i];
    }
    *cu = n;
    *crow = 0;
}

typedef struct dctx {
    size_t n;
    const fp4s_spec *const *spec;
    fp4s_decomp **out;
} dctx;

static void take_decomps(void *ctx, int rank, rd *r)
{
    dctx *c = ctx;
    (void)rank;
    uint64_t k = r_u64(r);
    for (uint64_t j = 0; j < k; j++) {
        uint64_t u = r_u64(r), len = r_u64(r);
        if (u == UINT64_MAX) continue; /* rank 0's own part, kept */
        if (u >= c->n || (size_t)(r->end - r->p) < len) cli_die(FP4S_EXIT_INTERNAL, "MPI: bad decomposition part");
        fp4s_decomp *d = NULL;
        int rc = fp4s_decomp_deserialize(r->p, len, &d);
        r->p += len;
        if (rc) exit(cli_report(rc));
        if (!c->out[u]) {
            c->out[u] = d;
            continue;
        }
        rc = fp4s_decomp_merge(c->out[u], d);
        fp4s_decomp_close(&d);
        if (rc) exit(cli_report(rc));
    }
}

bool par_decomp(size_t n, const char *const *src, const fp4s_spec *const *spec,
                const fp4s_decomp_opts *const *opts, const size_t *rows_in, const size_t *cols_in,
                fp4s_decomp **out)
{
    if (!P.active) {
        serial_decomp(n, src, spec, opts, out);
        return true;
    }
    /* exact whatever the threads: the node's CPUs are shared by its ranks,
     * unless --threads or FP4S_THREADS said otherwise */
    if (P.threads_at_init > 0 && fp4s_get_threads() == P.threads_at_init) fp4s_set_threads(P.node_threads);
    size_t *rows = xcalloc(n ? n : 1, sizeof *rows), *cols = xcalloc(n ? n : 1, sizeof *cols);
    size_t *align = xcalloc(n ? n : 1, sizeof *align), *w = xcalloc(n ? n : 1, sizeof *w);
    unsigned __int128 total = 0;
    for (size_t i = 0; i < n; i++) {
        P.key = i;
        rows[i] = rows_in ? rows_in[i] : 0;
        cols[i] = cols_in ? cols_in[i] : 0;
        if (!rows[i] || !cols[i]) {
            fp4s_source *s = NULL;
            int rc = fp4s_source_open(src[i], &s);
            if (rc) exit(cli_report(rc));
            rows[i] = fp4s_source_rows(s);
            cols[i] = fp4s_source_cols(s);
            fp4s_source_close(&s);
        }
        align[i] = fp4s_spec_row_align(spec[i]);
        if (!align[i]) align[i] = 1;
        /* a tensor the decomposition refuses weighs nothing (one rank reports it) */
        bool ok = rows[i] && cols[i] && spec[i]->block && cols[i] % spec[i]->block == 0;
        w[i] = ok ? rows[i] * cols[i] : 0;
        if (!ok) rows[i] = cols[i] = 1;
        total += w[i];
    }
    /* the cuts: rank r takes [cut r, cut r+1) */
    size_t *cu = xcalloc((size_t)P.size + 1, sizeof *cu), *cr = xcalloc((size_t)P.size + 1, sizeof *cr);
    for (int r = 0; r <= P.size; r++)
        cut_at(n, rows, cols, align, w, total * (unsigned)r / (unsigned)P.size, &cu[r], &cr[r]);
    cu[P.size] = n;
    cr[P.size] = 0;
    /* this rank's pieces, and which units are split */
    size_t npc = 0;
    piece *pc = xcalloc(n + 2, sizeof *pc);
    bool *split = xcalloc(n ? n : 1, sizeof *split);
    for (int r = 0; r < P.size; r++) {
        for (size_t u = cu[r]; u <= cu[r + 1] && u < n; u++) {
            if (u == cu[r + 1] && cr[r + 1] == 0) break;
            size_t a = u == cu[r] ? cr[r] : 0, b = u == cu[r + 1] ? cr[r + 1] : rows[u];
            if (b <= a) continue;
            if (a > 0 || b < rows[u]) split[u] = true;
            if (r == P.rank) pc[npc++] = (piece){u, a, b - a, a == 0 && b == rows[u]};
        }
    }
    /* the tensor amax of split tensors with a tensor scale: the largest part */
    size_t nsplit = 0;
    for (size_t u = 0; u < n; u++) nsplit += split[u] && spec[u]->format == FP4S_NVFP4;
    float *amax = xcalloc(n ? n : 1, sizeof *amax);
    if (nsplit) {
        buf mine = {0};
        for (size_t k = 0; k < npc; k++) {
            size_t u = pc[k].unit;
            if (!split[u] || spec[u]->format != FP4S_NVFP4 || w[u] == 0) continue;
            P.key = u;
            float a = 0.0f;
            int rc = fp4s_decomp_source_amax(spec[u], opts[u], src[u], pc[k].row0, pc[k].nrows, &a);
            if (rc) exit(cli_report(rc));
            b_u64(&mine, u);
            b_put(&mine, &a, sizeof a);
        }
        uint64_t *lens = xcalloc((size_t)P.size, sizeof *lens);
        size_t *off = xcalloc((size_t)P.size, sizeof *off);
        unsigned char *all = gather_all(&mine, lens, off);
        for (int r = 0; r < P.size; r++) {
            rd rr = {all + off[r], all + off[r] + lens[r]};
            while (rr.p < rr.end) {
                uint64_t u = r_u64(&rr);
                float a;
                r_get(&rr, &a, sizeof a);
                if (u < n && a > amax[u]) amax[u] = a; /* as the one-process pass merges its chunks */
            }
        }
        free(all);
        free(lens);
        free(off);
        free(mine.p);
    }
    /* this rank's share */
    buf mine = {0};
    b_u64(&mine, npc);
    for (size_t k = 0; k < npc; k++) {
        size_t u = pc[k].unit;
        P.key = u;
        verbose("%s rows [%zu, %zu)%s", src[u], pc[k].row0, pc[k].row0 + pc[k].nrows, pc[k].whole ? "" : " (a part)");
        fp4s_decomp *d = NULL;
        int rc = pc[k].whole || w[u] == 0
                     ? fp4s_decomp_source(spec[u], opts[u], src[u], &d)
                     : fp4s_decomp_source_rows(spec[u], opts[u], src[u], pc[k].row0, pc[k].nrows,
                                               spec[u]->format == FP4S_NVFP4 ? &amax[u] : NULL, &d);
        if (rc) exit(cli_report(rc));
        void *blob = NULL;
        size_t len = 0;
        if (P.rank == 0) {
            out[u] = d; /* rank 0 keeps its own parts */
            b_u64(&mine, UINT64_MAX);
            b_u64(&mine, 0);
            continue;
        }
        if ((rc = fp4s_decomp_serialize(d, &blob, &len))) exit(cli_report(rc));
        fp4s_decomp_close(&d);
        b_u64(&mine, u);
        b_u64(&mine, len);
        b_put(&mine, blob, len);
        free(blob);
    }
    free(amax);
    free(pc);
    free(split);
    free(cu);
    free(cr);
    free(rows);
    free(cols);
    free(align);
    free(w);
    dctx c = {n, spec, out};
    bool root = gather_root(&mine, take_decomps, &c);
    free(mine.p);
    return root;
}

/* ---- mismatch: the steps of each capture cut into P ranges ------------------------------ */
static void put_run(buf *b, const fp4s_mm_run *r) { b_rec(b, fp4s_rtype_mm_run(), r); }
static void get_run(rd *r, fp4s_mm_run *o) { r_rec(r, fp4s_rtype_mm_run(), o); }

/* Append the steps of b to a (the next range of the same capture). */
static void join_run(fp4s_mm_run *a, fp4s_mm_run *b)
{
    size_t n = a->nsteps + b->nsteps;
    a->steps = xrealloc(a->steps, (n ? n : 1) * sizeof *a->steps);
    memcpy(a->steps + a->nsteps, b->steps, b->nsteps * sizeof *b->steps);
    if (a->first && b->first) {
        a->first = xrealloc(a->first, (n ? n : 1) * sizeof *a->first);
        a->rest = xrealloc(a->rest, (n ? n : 1) * sizeof *a->rest);
        memcpy(a->first + a->nsteps, b->first, b->nsteps * sizeof *b->first);
        memcpy(a->rest + a->nsteps, b->rest, b->nsteps * sizeof *b->rest);
    }
    if (a->nscalars && a->nscalars == b->nscalars) { /* the same names: every range lists the capture's */
        a->scalars = xrealloc(a->scalars, (n ? n : 1) * a->nscalars * sizeof *a->scalars);
        memcpy(a->scalars + a->nsteps * a->nscalars, b->scalars, b->nsteps * b->nscalars * sizeof *b->scalars);
    }
    a->nsteps = n;
    a->tokens += b->tokens;
    a->masked += b->masked;
    a->nonfinite += b->nonfinite;
    a->skipped_steps += b->skipped_steps;
    fp4s_mm_run_free(b);
}

typedef struct mfile {  /* what the ranks found in one trace */
    size_t nruns;
    fp4s_mm_run *runs;  /* joined in rank order */
    bool text, any;
} mfile;

typedef struct mctx {
    size_t n;
    mfile *f;
} mctx;

static void take_runs(void *ctx, int rank, rd *r)
{
    mctx *c = ctx;
    (void)rank;
    for (size_t i = 0; i < c->n; i++) {
        mfile *f = &c->f[i];
        uint64_t kind = r_u64(r); /* 0 nothing, 1 runs, 2 no token in this range */
        if (kind != 1) continue;
        uint64_t nr = r_u64(r);
        for (uint64_t k = 0; k < nr; k++) {
            fp4s_mm_run run;
            get_run(r, &run);
            if (f->any && f->nruns == 1 && nr == 1 && !f->text) {
                join_run(&f->runs[0], &run);
                continue;
            }
            f->runs = xrealloc(f->runs, (f->nruns + 1) * sizeof *f->runs);
            f->runs[f->nruns++] = run;
        }
        f->any = true;
    }
}

int par_mm_analyze(size_t n, const char *const *paths, const char *const *names, size_t nnames,
                   const fp4s_mm_opts *o, const fp4s_trace_opts *t, fp4s_mm_result *res)
{
    if (!P.active) return serial_mm(n, paths, names, nnames, o, t, res);
    buf mine = {0};
    size_t ntext = 0;
    bool *text = xcalloc(n ? n : 1, sizeof *text);
    for (size_t i = 0; i < n; i++) {
        P.key = i;
        const char *name = i < nnames ? names[i] : NULL;
        fp4s_mm_result part = {0};
        int rc = strcmp(paths[i], "-") == 0 ? FP4S_ENOTSUP
                                             : fp4s_mm_analyze_part(paths[i], name, o, t, (size_t)P.rank,
                                                                    (size_t)P.size, &part);
        if (!rc) verbose("%s: steps %zu of its range %d", paths[i], part.nruns ? part.runs[0].nsteps : 0, P.rank);
        if (rc == FP4S_ENOTSUP) { /* a text trace: one rank reads it all */
            text[i] = true;
            int owner = strcmp(paths[i], "-") == 0 ? 0 : (int)(ntext++ % (size_t)P.size);
            if (owner != P.rank) {
                b_u64(&mine, 0);
                continue;
            }
            verbose("%s: the whole text trace", paths[i]);
            rc = fp4s_mm_analyze(paths[i], name, o, t, &part);
        } else if (rc == FP4S_EEMPTY) { /* this range read no token: an error only if no range did */
            b_u64(&mine, 2);
            continue;
        }
        if (rc) exit(cli_report(rc));
        b_u64(&mine, 1);
        b_u64(&mine, part.nruns);
        for (size_t k = 0; k < part.nruns; k++) put_run(&mine, &part.runs[k]);
        fp4s_mm_result_free(&part);
    }
    mctx c = {n, xcalloc(n ? n : 1, sizeof(mfile))};
    for (size_t i = 0; i < n; i++) c.f[i].text = text[i];
    free(text);
    bool root = gather_root(&mine, take_runs, &c);
    free(mine.p);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        mfile *f = &c.f[i];
        if (root && !rc && !f->any) /* no range read a token: the whole file says what it holds */
            rc = fp4s_mm_analyze(paths[i], i < nnames ? names[i] : NULL, o, t, res);
        else if (root && !rc) {
            res->runs = xrealloc(res->runs, (res->nruns + f->nruns) * sizeof *res->runs);
            memcpy(res->runs + res->nruns, f->runs, f->nruns * sizeof *f->runs);
            res->nruns += f->nruns;
            f->nruns = 0;
        }
        fp4s_mm_result left = {.nruns = f->nruns, .runs = f->runs};
        fp4s_mm_result_free(&left);
    }
    free(c.f);
    if (!root) return PAR_DONE;
    return rc;
}

/* ---- whole units, round robin: their results as records ---------------------------------- */
typedef struct uctx {
    size_t n;
    void (*get)(void *ctx, size_t i, const unsigned char **p, const unsigned char *end);
    void *ctx;
} uctx;

static void take_units(void *ctx, int rank, rd *r)
{
    uctx *c = ctx;
    if (rank == 0) return;
    while (r->p < r->end) {
        uint64_t i = r_u64(r);
        if (i >= c->n) cli_die(FP4S_EXIT_INTERNAL, "MPI: bad unit index");
        c->get(c->ctx, (size_t)i, &r->p, r->end);
    }
}

bool par_gather_units(size_t n, void (*put)(void *ctx, size_t i, fp4s_buf *b),
                      void (*get)(void *ctx, size_t i, const unsigned char **p, const unsigned char *end),
                      void *ctx)
{
    if (!P.active) return true;
    buf mine = {0};
    for (size_t i = 0; i < n && P.rank != 0; i++) {
        if ((int)(i % (size_t)P.size) != P.rank) continue;
        b_u64(&mine, i);
        put(ctx, i, &mine);
    }
    uctx c = {n, get, ctx};
    bool root = gather_root(&mine, take_units, &c);
    free(mine.p);
    return root;
}

/* fp4-compare: a fp4s_compare_site per unit */
typedef struct gctx {
    unsigned char *base;
    fp4s_remedy_result **res0;
    size_t stride, nr;
} gctx;

static void put_compare(void *ctx, size_t i, fp4s_buf *b)
{
    gctx *c = ctx;
    b_rec(b, fp4s_rtype_compare_site(), c->base + i * c->stride);
}

static void get_compare(void *ctx, size_t i, const unsigned char **p, const unsigned char *end)
{
    gctx *c = ctx;
    rd r = {*p, end};
    r_rec(&r, fp4s_rtype_compare_site(), c->base + i * c->stride);
    *p = r.p;
}

bool par_gather_compare(fp4s_compare_site *base, size_t stride, size_t n)
{
    gctx c = {(unsigned char *)base, NULL, stride, 0};
    return par_gather_units(n, put_compare, get_compare, &c);
}

/* fp4-remedy: a fp4s_remedy_site and nr fp4s_remedy_result per unit */
static void put_remedy(void *ctx, size_t i, fp4s_buf *b)
{
    gctx *c = ctx;
    b_rec(b, fp4s_rtype_remedy_site(), c->base + i * c->stride);
    const fp4s_remedy_result *res = *(fp4s_remedy_result **)((unsigned char *)c->res0 + i * c->stride);
    for (size_t q = 0; q < c->nr; q++) b_rec(b, fp4s_rtype_remedy_result(), &res[q]);
}

static void get_remedy(void *ctx, size_t i, const unsigned char **p, const unsigned char *end)
{
    gctx *c = ctx;
    rd r = {*p, end};
    r_rec(&r, fp4s_rtype_remedy_site(), c->base + i * c->stride);
    fp4s_remedy_result **rp = (fp4s_remedy_result **)((unsigned char *)c->res0 + i * c->stride);
    fp4s_remedy_result *res = xcalloc(c->nr ? c->nr : 1, sizeof *res);
    *rp = res;
    for (size_t q = 0; q < c->nr; q++) r_rec(&r, fp4s_rtype_remedy_result(), &res[q]);
    *p = r.p;
}

bool par_gather_remedy(fp4s_remedy_site *info0, fp4s_remedy_result **res0, size_t stride, size_t n, size_t nr)
{
    gctx c = {(unsigned char *)info0, res0, stride, nr};
    return par_gather_units(n, put_remedy, get_remedy, &c);
}
#endif
