/* Trace readers: CSV/TSV and JSONL (one row per token) and capture files
 * (/steps/<step>/logprobs/...), all yielding column batches of tokens. This
 * file opens and closes a reader, picks the format and reads captures through
 * the capture layer; trace_text.c parses the text formats, trace_dedupe.c
 * refuses tokens that come twice. */
#include "trace_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void fp4s_trace_opts_defaults(fp4s_trace_opts *o)
{
    memset(o, 0, sizeof *o);
    o->format = FP4S_TRACE_AUTO;
    o->col_step = "step";
    o->col_seq = "seq";
    o->col_trainer = "trainer_logprob";
    o->col_rollout = "rollout_logprob";
    o->col_pos = "pos";
    o->col_mask = "mask";
    o->col_run = "run";
}

int mm_batch_init(mm_batch *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    b->step = malloc(cap * sizeof *b->step);
    b->seq = malloc(cap * sizeof *b->seq);
    b->pos = malloc(cap * sizeof *b->pos);
    b->lt = malloc(cap * sizeof *b->lt);
    b->lr = malloc(cap * sizeof *b->lr);
    b->mask = malloc(cap * sizeof *b->mask);
    b->run = malloc(cap * sizeof *b->run);
    b->row = malloc(cap * sizeof *b->row);
    b->flt = malloc(cap * sizeof *b->flt);
    b->flr = malloc(cap * sizeof *b->flr);
    if (!b->step || !b->seq || !b->pos || !b->lt || !b->lr || !b->mask || !b->run || !b->row || !b->flt || !b->flr) {
        mm_batch_free(b);
        return fp4s_error_set(FP4S_ENOMEM, "mismatch: out of memory for a batch of %zu tokens", cap);
    }
    return 0;
}

void mm_batch_free(mm_batch *b)
{
    free(b->step);
    free(b->seq);
    free(b->pos);
    free(b->lt);
    free(b->lr);
    free(b->mask);
    free(b->run);
    free(b->row);
    free(b->flt);
    free(b->flr);
    memset(b, 0, sizeof *b);
}

/* ---- helpers ------------------------------------------------------------------------ */
static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int has_ext(const char *p, const char *ext)
{
    size_t n = strlen(p), e = strlen(ext);
    return n > e && strcasecmp(p + n - e, ext) == 0;
}

/* ---- capture files (HDF5) ------------------------------------------------------------- */
static int capture_next(mm_reader *r, mm_batch *b)
{
    b->n = 0;
    for (;;) {
        if (!r->step_open) {
            if (r->cur >= cap_lp_nsteps(r->lp) || (r->ranged && r->cur >= r->cur_end)) return 0;
            int rc = cap_lp_open_step(r->lp, r->cur, &r->si);
            if (rc) return rc;
            r->step_open = true;
            r->toff = 0;
            r->have[ROLE_POS] |= r->si.has_pos;
            if (r->si.tokens == 0) {
                r->step_open = false;
                if (!r->skip_empty)
                    return fp4s_error_set(FP4S_EEMPTY, "%s: /steps/%lld/logprobs: empty step (0 tokens; "
                                          "--skip-empty skips it)", r->path, (long long)cap_lp_step(r->lp, r->cur));
                r->skipped++;
                r->cur++;
                continue;
            }
        }
        size_t n = r->si.tokens - r->toff;
        if (n > b->cap) n = b->cap;
        long long step = (long long)cap_lp_step(r->lp, r->cur);
        /* float32 pairs stay float32 (converted in L1 by the accumulator) */
        b->is_f32 = r->si.f32;
        int rc = cap_lp_read(r->lp, r->toff, n, b->is_f32, b->is_f32 ? (void *)b->flt : (void *)b->lt,
                             b->is_f32 ? (void *)b->flr : (void *)b->lr, b->seq, r->si.has_pos ? b->pos : NULL,
                             r->si.has_mask ? b->mask : NULL);
        if (rc) return rc;
        if (r->si.has_pos) {
            for (size_t i = 0; i < n; i++)
                if (b->pos[i] < 0)
                    return fp4s_error_set(FP4S_EFORMAT, "%s: /steps/%lld/logprobs/pos: token %zu: negative "
                                          "position %lld", r->path, step, r->toff + i, (long long)b->pos[i]);
        } else if (r->have[ROLE_POS]) {
            for (size_t i = 0; i < n; i++) b->pos[i] = -1; /* this step has no pos: all "rest" */
        }
        b->no_mask = !r->si.has_mask;
        if (r->si.has_mask) {
            for (size_t i = 0; i < n; i++)
                if (b->mask[i] > 1)
                    return fp4s_error_set(FP4S_EFORMAT, "%s: /steps/%lld/logprobs/mask: token %zu: value %u, "
                                          "expected 0 or 1", r->path, step, r->toff + i, b->mask[i]);
        }
        b->uniform = 1;
        b->ustep = (int64_t)step;
        b->urow0 = r->toff;
        b->n = n;
        r->toff += n;
        if (r->toff >= r->si.tokens) {
            r->step_open = false;
            r->cur++;
        }
        return 0;
    }
}

/* ---- open / close ------------------------------------------------------------------ */
static fp4s_trace_format sniff(mm_reader *r)
{
    if (has_ext(r->path, ".h5") || has_ext(r->path, ".hdf5") || has_ext(r->path, ".hdf")) return FP4S_TRACE_CAPTURE;
    if (has_ext(r->path, ".jsonl") || has_ext(r->path, ".ndjson")) return FP4S_TRACE_JSONL;
    if (has_ext(r->path, ".csv") || has_ext(r->path, ".tsv")) return FP4S_TRACE_CSV;
    /* by content: fill the buffer once */
    size_t got = fread(r->buf, 1, r->bcap, r->f);
    r->blen = got;
    if (got < r->bcap) r->eof = 1;
    if (got >= 8 && memcmp(r->buf, "\211HDF\r\n\032\n", 8) == 0) return FP4S_TRACE_CAPTURE;
    for (size_t i = mm_bom_len(r->buf, got); i < got; i++) {
        char c = r->buf[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        return c == '{' ? FP4S_TRACE_JSONL : FP4S_TRACE_CSV;
    }
    return FP4S_TRACE_CSV;
}

int mm_reader_open(const char *path, const fp4s_trace_opts *t, bool skip_empty, mm_reader **out)
{
    *out = NULL;
    fp4s_trace_opts d;
    if (!t) {
        fp4s_trace_opts_defaults(&d);
        t = &d;
    }
    mm_reader *r = calloc(1, sizeof *r);
    if (!r) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    r->skip_empty = skip_empty;
    r->dedupe = t->dedupe;
    r->path = strdup(strcmp(path, "-") == 0 ? "(stdin)" : path);
    r->names[ROLE_STEP] = t->col_step ? t->col_step : "step";
    r->names[ROLE_SEQ] = t->col_seq ? t->col_seq : "seq";
    r->names[ROLE_LT] = t->col_trainer ? t->col_trainer : "trainer_logprob";
    r->names[ROLE_LR] = t->col_rollout ? t->col_rollout : "rollout_logprob";
    r->names[ROLE_POS] = t->col_pos;
    r->names[ROLE_MASK] = t->col_mask;
    r->names[ROLE_RUN] = t->col_run;
    int rc = 0;
    fp4s_trace_format fmt = t->format;
    if (!r->path) {
        rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    if (fmt != FP4S_TRACE_CAPTURE && !(fmt == FP4S_TRACE_AUTO && (has_ext(path, ".h5") || has_ext(path, ".hdf5") ||
                                                                  has_ext(path, ".hdf")))) {
        if (strcmp(path, "-") == 0) {
            r->f = stdin;
        } else {
            r->f = fopen(path, "rb");
            r->own_f = 1;
            if (!r->f) {
                rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, strerror(errno));
                goto fail;
            }
        }
        r->bcap = (size_t)1 << 20;
        r->buf = malloc(r->bcap);
        if (!r->buf) {
            rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
            goto fail;
        }
        if (fmt == FP4S_TRACE_AUTO) fmt = sniff(r);
    } else {
        fmt = FP4S_TRACE_CAPTURE;
    }
    r->fmt = fmt;
    if (fmt == FP4S_TRACE_CAPTURE) {
        if (r->f && r->own_f) fclose(r->f);
        r->f = NULL;
        if (strcmp(path, "-") == 0) {
            rc = fp4s_error_set(FP4S_EINVAL, "capture files cannot be read from stdin");
            goto fail;
        }
        rc = cap_lp_open(path, &r->lp);
        if (rc) goto fail;
        r->have[ROLE_STEP] = r->have[ROLE_SEQ] = r->have[ROLE_LT] = r->have[ROLE_LR] = 1;
    } else if (fmt == FP4S_TRACE_CSV) {
        rc = mm_csv_header(r, t);
        if (rc) goto fail;
    }
    *out = r;
    return 0;
fail:
    mm_reader_close(&r);
    return rc;
}

static int reader_next(mm_reader *r, mm_batch *b)
{
    switch (r->fmt) {
    case FP4S_TRACE_CSV: return mm_csv_next(r, b);
    case FP4S_TRACE_JSONL: return mm_jsonl_next(r, b);
    case FP4S_TRACE_CAPTURE:
        if (b->cap > ((size_t)1 << 18)) return fp4s_error_set(FP4S_EINTERNAL, "batch too large");
        return capture_next(r, b);
    default: return fp4s_error_set(FP4S_EINTERNAL, "unknown trace format");
    }
}

int mm_reader_next(mm_reader *r, mm_batch *b)
{
    for (;;) {
        int rc = reader_next(r, b);
        if (rc || b->n == 0 || !r->have[ROLE_POS]) return rc;
        rc = mm_dedupe_batch(r, b);
        if (rc || b->n) return rc; /* a batch of duplicates only: read on */
    }
}

int mm_reader_step_range(mm_reader *r, size_t part, size_t nparts)
{
    if (r->fmt != FP4S_TRACE_CAPTURE)
        return fp4s_error_set(FP4S_ENOTSUP, "%s: not a capture: the steps of a text trace are known only once it "
                              "is read whole", r->path);
    size_t n = cap_lp_nsteps(r->lp);
    size_t i0 = (size_t)((unsigned __int128)n * part / nparts), i1 = (size_t)((unsigned __int128)n * (part + 1) / nparts);
    /* what the steps before the range tell the reader (a position column seen) */
    for (size_t i = 0; i < i0; i++) {
        int rc = cap_lp_open_step(r->lp, i, &r->si);
        if (rc) return rc;
        r->have[ROLE_POS] |= r->si.has_pos;
    }
    r->cur = i0;
    r->cur_end = i1;
    r->ranged = true;
    return 0;
}

void mm_reader_close(mm_reader **rp)
{
    if (!rp || !*rp) return;
    mm_reader *r = *rp;
    if (r->f && r->own_f) fclose(r->f);
    cap_lp_close(&r->lp);
    mm_dedupe_free(r);
    free(r->rec);
    for (size_t i = 0; i < r->nruns; i++) free(r->runs[i]);
    free(r->runs);
    mm_strmap_free(&r->run_map);
    free(r->role);
    free(r->buf);
    free(r->path);
    free(r);
    *rp = NULL;
}

size_t mm_reader_nruns(const mm_reader *r) { return r->nruns; }
const char *mm_reader_run_name(const mm_reader *r, size_t i) { return i < r->nruns ? r->runs[i] : NULL; }
bool mm_reader_has_pos(const mm_reader *r) { return r->have[ROLE_POS] != 0; }
const char *mm_reader_path(const mm_reader *r) { return r->path; }
void mm_reader_progress(const mm_reader *r, uint64_t *done, uint64_t *total)
{
    *done = *total = 0;
    if (r->lp) {
        *done = r->cur;
        *total = cap_lp_nsteps(r->lp);
        return;
    }
    struct stat st;
    if (!r->f || fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode)) return; /* a pipe: unknown */
    off_t pos = ftello(r->f);
    if (pos < 0) return;
    *done = (uint64_t)pos - (r->blen - r->bpos);
    *total = (uint64_t)st.st_size;
}

size_t mm_reader_skipped(const mm_reader *r) { return r->skipped; }

void mm_reader_where(const mm_reader *r, const mm_batch *b, size_t i, char *buf, size_t n)
{
    if (r->fmt == FP4S_TRACE_CAPTURE)
        snprintf(buf, n, "%s: /steps/%lld/logprobs: token %llu", r->path,
                 (long long)(b->uniform ? b->ustep : b->step[i]),
                 (unsigned long long)(b->uniform ? b->urow0 + i : b->row[i]));
    else
        snprintf(buf, n, "%s: line %llu", r->path, (unsigned long long)b->row[i]);
}

const char *mm_base_name(const char *p);
const char *mm_base_name(const char *p) { return base_name(p); }
