/* Trace readers: tokens that come twice. A (run, step, seq, pos) seen before
 * in the same step of the same run is an error, or with dedupe dropped
 * (trace_internal.h). */
#include "trace_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- duplicate tokens ------------------------------------------------------------- */
/* The positions seen in the current step of one run (rows are grouped by step,
 * the analysis enforces it, so a step's record is dropped when the next step
 * of the run begins), with the line or token of each for the message. Per
 * sequence, positions that arrive in order lo, lo+1, ..., hi (the usual case)
 * are an interval with an array of rows: a test and an append per token.
 * A sequence whose positions skip or go back moves into a hash of
 * (seq, pos). About 8-16 bytes per token of the step. */
typedef struct dd_entry {
    int64_t seq, pos;
    uint64_t row1; /* row + 1; 0 = empty */
} dd_entry;

typedef struct dd_seq {
    int64_t seq, lo, hi;
    uint64_t *rows;    /* rows[k]: the row of position lo + k (interval mode) */
    size_t cap;
    bool used, hashed; /* hashed: its positions are in the hash, not an interval */
} dd_seq;

struct dd_set {
    bool has_step;
    int64_t step;
    dd_seq *q;         /* open addressing by seq */
    size_t qcap, qn, last;
    dd_entry *e;       /* (seq, pos) of the hashed sequences */
    size_t cap, n;
};

static uint64_t dd_hash(int64_t seq, int64_t pos)
{
    uint64_t h = (uint64_t)seq * 0x9E3779B97F4A7C15ull ^ ((uint64_t)pos + 0x632BE59BD9B4E019ull);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

/* 1 inserted, 0 already there (*prev its row), <0 out of memory */
static int dd_hash_insert(struct dd_set *d, int64_t seq, int64_t pos, uint64_t row, uint64_t *prev)
{
    if ((d->n + 1) * 4 > d->cap * 3) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        dd_entry *ne = calloc(nc, sizeof *ne);
        if (!ne) return -1;
        for (size_t i = 0; i < d->cap; i++)
            if (d->e[i].row1) {
                size_t j = dd_hash(d->e[i].seq, d->e[i].pos) & (nc - 1);
                while (ne[j].row1) j = (j + 1) & (nc - 1);
                ne[j] = d->e[i];
            }
        free(d->e);
        d->e = ne;
        d->cap = nc;
    }
    size_t j = dd_hash(seq, pos) & (d->cap - 1);
    while (d->e[j].row1) {
        if (d->e[j].seq == seq && d->e[j].pos == pos) {
            *prev = d->e[j].row1 - 1;
            return 0;
        }
        j = (j + 1) & (d->cap - 1);
    }
    d->e[j] = (dd_entry){seq, pos, row + 1};
    d->n++;
    return 1;
}

static dd_seq *dd_seq_get(struct dd_set *d, int64_t seq)
{
    if (d->qcap && d->q[d->last].used && d->q[d->last].seq == seq) return &d->q[d->last];
    if ((d->qn + 1) * 2 > d->qcap) {
        size_t nc = d->qcap ? d->qcap * 2 : 256;
        dd_seq *nq = calloc(nc, sizeof *nq);
        if (!nq) return NULL;
        for (size_t i = 0; i < d->qcap; i++)
            if (d->q[i].used) {
                size_t j = dd_hash(d->q[i].seq, 0) & (nc - 1);
                while (nq[j].used) j = (j + 1) & (nc - 1);
                nq[j] = d->q[i];
            }
        free(d->q);
        d->q = nq;
        d->qcap = nc;
    }
    size_t j = dd_hash(seq, 0) & (d->qcap - 1);
    while (d->q[j].used && d->q[j].seq != seq) j = (j + 1) & (d->qcap - 1);
    if (!d->q[j].used) {
        d->q[j] = (dd_seq){.seq = seq, .lo = 1, .hi = 0, .used = true};
        d->qn++;
    }
    d->last = j;
    return &d->q[j];
}

/* 1 new, 0 seen before (*prev its row), <0 out of memory */
static int dd_check(struct dd_set *d, int64_t seq, int64_t pos, uint64_t row, uint64_t *prev)
{
    dd_seq *q = dd_seq_get(d, seq);
    if (!q) return -1;
    if (!q->hashed) {
        size_t n = q->hi >= q->lo ? (size_t)(q->hi - q->lo + 1) : 0;
        if (n == 0 || pos == q->hi + 1) {
            if (n == q->cap) {
                size_t nc = q->cap ? q->cap * 2 : 16;
                uint64_t *nr = realloc(q->rows, nc * sizeof *nr);
                if (!nr) return -1;
                q->rows = nr;
                q->cap = nc;
            }
            if (n == 0) q->lo = pos;
            q->rows[n] = row;
            q->hi = pos;
            return 1;
        }
        if (pos >= q->lo && pos <= q->hi) {
            *prev = q->rows[pos - q->lo];
            return 0;
        }
        /* out of order: the interval moves into the hash */
        for (size_t k = 0; k < n; k++) {
            uint64_t dummy;
            if (dd_hash_insert(d, seq, q->lo + (int64_t)k, q->rows[k], &dummy) < 0) return -1;
        }
        free(q->rows);
        q->rows = NULL;
        q->cap = 0;
        q->hashed = true;
    }
    return dd_hash_insert(d, seq, pos, row, prev);
}

static void dd_reset(struct dd_set *d, int64_t step)
{
    for (size_t i = 0; i < d->qcap; i++) free(d->q[i].rows);
    if (d->qn) memset(d->q, 0, d->qcap * sizeof *d->q);
    if (d->n) memset(d->e, 0, d->cap * sizeof *d->e);
    d->qn = d->n = d->last = 0;
    d->has_step = true;
    d->step = step;
}

static void dd_free(struct dd_set *d)
{
    for (size_t i = 0; i < d->qcap; i++) free(d->q[i].rows);
    free(d->q);
    free(d->e);
}

static void copy_token(mm_batch *b, size_t to, size_t from)
{
    b->step[to] = b->step[from];
    b->seq[to] = b->seq[from];
    b->pos[to] = b->pos[from];
    b->run[to] = b->run[from];
    b->row[to] = b->row[from];
    if (b->is_f32) {
        b->flt[to] = b->flt[from];
        b->flr[to] = b->flr[from];
    } else {
        b->lt[to] = b->lt[from];
        b->lr[to] = b->lr[from];
    }
    if (!b->no_mask) b->mask[to] = b->mask[from];
}

/* Refuse (or with dedupe drop) the tokens of b whose (run, step, seq, pos)
 * came before. Tokens without a position (pos -1) are not checked. */
int mm_dedupe_batch(mm_reader *r, mm_batch *b)
{
    size_t w = 0;
    bool dropped = false;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t run = b->uniform ? 0 : b->run[i];
        int64_t step = b->uniform ? b->ustep : b->step[i];
        uint64_t row = b->uniform ? b->urow0 + i : b->row[i];
        bool keep = true;
        if (b->pos[i] >= 0) {
            if (run >= r->ndd) {
                size_t nn = (size_t)run + 1;
                struct dd_set *nd = realloc(r->dd, nn * sizeof *nd);
                if (!nd) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
                memset(nd + r->ndd, 0, (nn - r->ndd) * sizeof *nd);
                r->dd = nd;
                r->ndd = nn;
            }
            struct dd_set *d = &r->dd[run];
            if (!d->has_step || d->step != step) dd_reset(d, step);
            uint64_t prev = 0;
            int f = dd_check(d, b->seq[i], b->pos[i], row, &prev);
            if (f < 0) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
            if (f == 0 && !r->dedupe) {
                char where[1200];
                mm_reader_where(r, b, i, where, sizeof where);
                return fp4s_error_set(FP4S_EFORMAT, "%s: step %lld, seq %lld, pos %lld already at %s %llu: the "
                                      "token would be counted twice (--dedupe keeps the first)", where,
                                      (long long)step, (long long)b->seq[i], (long long)b->pos[i],
                                      r->fmt == FP4S_TRACE_CAPTURE ? "token" : "line",
                                      (unsigned long long)prev);
            }
            keep = f == 1;
        }
        if (!keep) {
            if (!dropped && b->uniform) { /* tokens shift: give each its own step, run and row */
                for (size_t k = 0; k < b->n; k++) {
                    b->step[k] = b->ustep;
                    b->run[k] = 0;
                    b->row[k] = b->urow0 + k;
                }
                b->uniform = 0;
            }
            dropped = true;
            r->dropped++;
            continue;
        }
        if (w != i) copy_token(b, w, i);
        w++;
    }
    b->n = w;
    return 0;
}

void mm_dedupe_free(mm_reader *r)
{
    for (size_t i = 0; i < r->ndd; i++) dd_free(&r->dd[i]);
    free(r->dd);
    r->dd = NULL;
    r->ndd = 0;
}
