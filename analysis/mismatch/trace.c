/* Trace readers: CSV/TSV and JSONL (one row per token) and capture files
 * (/steps/<step>/logprobs/...), all yielding column batches of tokens. */
#include "mm_internal.h"
#include "fp4s_config.h"
#include "capture/h5util.h"

#include <errno.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <math.h>
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

enum { ROLE_NONE = -1, ROLE_STEP, ROLE_SEQ, ROLE_LT, ROLE_LR, ROLE_POS, ROLE_MASK, ROLE_RUN, NROLES };

struct mm_reader {
    fp4s_trace_format fmt;
    char *path;
    /* text */
    FILE *f;
    int own_f;
    char *buf;
    size_t blen, bpos, bcap;
    int eof;
    int line_err;       /* a line could not be read: too long or out of memory */
    int jrun;           /* JSONL: 0 not seen yet, 1 lines have the run field, 2 they do not */
    uint64_t line;
    char delim;
    int *role;          /* role of each CSV column */
    size_t ncols;
    const char *names[NROLES];
    int have[NROLES];
    char **runs;
    size_t nruns, last_run;
    /* CSV: a record whose quoted field spans lines, joined here */
    char *rec;
    size_t reccap;
    /* duplicate (step, seq, pos) rows, per run (dedup.c part below) */
    struct dd_set *dd;
    size_t ndd;
    bool dedupe;
    uint64_t dropped;
    /* capture: read through the capture layer's log-prob reader */
    cap_lp *lp;
    size_t cur;             /* current step index */
    bool step_open;
    cap_lp_step_info si;    /* of the open step */
    size_t toff;            /* next token of the open step */
    size_t skipped;
    int skip_empty;
};

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

static int run_index(mm_reader *r, const char *name, size_t len, uint32_t *out)
{
    if (r->nruns && r->last_run < r->nruns && strlen(r->runs[r->last_run]) == len &&
        memcmp(r->runs[r->last_run], name, len) == 0) {
        *out = (uint32_t)r->last_run;
        return 0;
    }
    for (size_t i = 0; i < r->nruns; i++)
        if (strlen(r->runs[i]) == len && memcmp(r->runs[i], name, len) == 0) {
            r->last_run = i;
            *out = (uint32_t)i;
            return 0;
        }
    if (r->nruns >= 100000)
        return fp4s_error_set(FP4S_ERANGE, "%s: more than 100000 distinct runs", r->path);
    char **nr = realloc(r->runs, (r->nruns + 1) * sizeof *nr);
    if (!nr) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    r->runs = nr;
    char *s = malloc(len + 1);
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    memcpy(s, name, len);
    s[len] = '\0';
    r->runs[r->nruns] = s;
    r->last_run = r->nruns;
    *out = (uint32_t)r->nruns++;
    return 0;
}

static const char *role_label(const mm_reader *r, int role) { return r->names[role]; }

/* Strict numbers: the whole field (spaces around allowed). */
static int parse_f64(const char *s, double *v)
{
    while (*s == ' ') s++;
    if (!*s) return -1;
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s) return -1;
    while (*end == ' ') end++;
    if (*end) return -1;
    *v = x;
    return 0;
}

static int parse_i64(const char *s, int64_t *v)
{
    while (*s == ' ') s++;
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || errno == ERANGE) return -1;
    while (*end == ' ') end++;
    if (*end) return -1;
    *v = x;
    return 0;
}

static int parse_mask(const char *s, uint8_t *v)
{
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ') n--;
    if ((n == 1 && s[0] == '1') || (n == 4 && strncasecmp(s, "true", 4) == 0)) {
        *v = 1;
        return 0;
    }
    if ((n == 1 && s[0] == '0') || (n == 5 && strncasecmp(s, "false", 5) == 0)) {
        *v = 0;
        return 0;
    }
    return -1;
}

/* ---- buffered lines ------------------------------------------------------------------- */
/* Next line (NUL-terminated, without the newline) or NULL at EOF. */
static char *next_line(mm_reader *r, size_t *len)
{
    for (;;) {
        char *start = r->buf + r->bpos;
        size_t avail = r->blen - r->bpos;
        char *nl = avail ? memchr(start, '\n', avail) : NULL;
        if (nl) {
            size_t l = (size_t)(nl - start);
            r->bpos += l + 1;
            if (l && start[l - 1] == '\r') l--;
            start[l] = '\0';
            r->line++;
            *len = l;
            return start;
        }
        if (r->eof) {
            if (avail == 0) return NULL;
            /* last line without newline: make room for the NUL */
            if (r->blen == r->bcap) {
                char *nb = realloc(r->buf, r->bcap + 1);
                if (!nb) {
                    r->line_err = 1;
                    return NULL;
                }
                r->buf = nb;
                r->bcap++;
                start = r->buf + r->bpos;
            }
            size_t l = avail;
            if (l && start[l - 1] == '\r') l--;
            start[l] = '\0';
            r->bpos = r->blen;
            r->line++;
            *len = l;
            return start;
        }
        /* move the partial line to the front, grow if one line fills the buffer */
        if (r->bpos > 0) {
            memmove(r->buf, start, avail);
            r->blen = avail;
            r->bpos = 0;
        }
        if (r->blen == r->bcap) {
            if (r->bcap >= ((size_t)1 << 30)) {
                r->line_err = 1;
                return NULL;
            }
            char *nb = realloc(r->buf, r->bcap * 2);
            if (!nb) {
                r->line_err = 1;
                return NULL;
            }
            r->buf = nb;
            r->bcap *= 2;
        }
        size_t got = fread(r->buf + r->blen, 1, r->bcap - r->blen, r->f);
        r->blen += got;
        if (got == 0) {
            if (ferror(r->f)) return NULL;
            r->eof = 1;
        }
    }
}

/* A data line of a trace (after the header) into *line, NULL at the end of
 * the file; an error names the file and the line. */
static int data_line(mm_reader *r, char **line, size_t *len)
{
    *line = next_line(r, len);
    if (*line) return 0;
    if (r->line_err)
        return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: longer than 1 GiB or out of memory", r->path,
                              (unsigned long long)r->line + 1);
    if (ferror(r->f)) return fp4s_error_set(FP4S_EOPEN, "%s: read error", r->path);
    return 0;
}

static void batch_reset(mm_batch *b)
{
    b->n = 0;
    b->uniform = 0;
    b->no_mask = 0;
    b->is_f32 = 0;
}

/* Split a CSV line in place into fields; simple double quotes ("a,b", "" for a
 * quote) are honoured. Returns the field count (up to max) or -1 on a bad quote. */
static long split_fields(char *line, char delim, char **fields, size_t max)
{
    size_t nf = 0;
    char *p = line;
    for (;;) {
        char *start = p;
        if (*p == '"') {
            char *w = p;
            start = p;
            p++;
            for (;;) {
                if (*p == '\0') return -1;
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            if (*p != delim && *p != '\0') return -1;
            char endc = *p;
            *w = '\0';
            if (nf < max) fields[nf] = start;
            nf++;
            if (endc == '\0') break;
            p++;
            continue;
        }
        while (*p && *p != delim) p++;
        char endc = *p;
        *p = '\0';
        if (nf < max) fields[nf] = start;
        nf++;
        if (endc == '\0') break;
        p++;
    }
    return (long)nf;
}

/* Does a CSV line end inside a double-quoted field (RFC 4180: a quoted field
 * may hold line breaks)? Quotes count only where split_fields honours them:
 * at the start of a field. */
static bool quote_open(const char *p, char delim)
{
    for (;;) {
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '\0') return true;
                if (*p == '"') {
                    if (p[1] == '"') {
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                p++;
            }
        }
        while (*p && *p != delim) p++;
        if (*p == '\0') return false;
        p++;
    }
}

/* A CSV record: one line, or several when a quoted field holds line breaks
 * (joined with '\n' in r->rec). *first is the line it starts on. */
static int csv_record(mm_reader *r, char **rec, size_t *len, uint64_t *first)
{
    int rc = data_line(r, rec, len);
    if (rc || !*rec) return rc;
    *first = r->line;
    if (!quote_open(*rec, r->delim)) return 0;
    size_t n = *len;
    if (n + 1 > r->reccap) {
        size_t nc = (n + 1) * 2;
        char *nb = realloc(r->rec, nc);
        if (!nb) return fp4s_error_set(FP4S_ENOMEM, "%s: line %llu: out of memory", r->path,
                                       (unsigned long long)*first);
        r->rec = nb;
        r->reccap = nc;
    }
    memcpy(r->rec, *rec, n + 1);
    do {
        char *more;
        size_t ml;
        rc = data_line(r, &more, &ml);
        if (rc) return rc;
        if (!more)
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: quoted field not closed before the end of "
                                  "the file", r->path, (unsigned long long)*first);
        if (n + ml + 2 > ((size_t)1 << 30))
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: quoted field longer than 1 GiB (a missing "
                                  "closing quote?)", r->path, (unsigned long long)*first);
        if (n + ml + 2 > r->reccap) {
            size_t nc = (n + ml + 2) * 2;
            char *nb = realloc(r->rec, nc);
            if (!nb) return fp4s_error_set(FP4S_ENOMEM, "%s: line %llu: out of memory", r->path,
                                           (unsigned long long)*first);
            r->rec = nb;
            r->reccap = nc;
        }
        r->rec[n++] = '\n';
        memcpy(r->rec + n, more, ml + 1);
        n += ml;
    } while (quote_open(r->rec, r->delim));
    *rec = r->rec;
    *len = n;
    return 0;
}

/* Skip a UTF-8 byte-order mark at the start of the first line. */
static size_t bom_len(const char *line, size_t len)
{
    return len >= 3 && (unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB &&
                   (unsigned char)line[2] == 0xBF
               ? 3
               : 0;
}

static void trim(char **s)
{
    while (**s == ' ') (*s)++;
    size_t n = strlen(*s);
    while (n && ((*s)[n - 1] == ' ')) (*s)[--n] = '\0';
}

static int csv_header(mm_reader *r, const fp4s_trace_opts *t)
{
    size_t len;
    char *line;
    do {
        line = next_line(r, &len);
        if (!line) {
            if (r->line_err)
                return fp4s_error_set(FP4S_EFORMAT, "%s: header line longer than 1 GiB or out of memory", r->path);
            if (r->f && ferror(r->f))
                return fp4s_error_set(FP4S_EOPEN, "%s: read error: %s", r->path, strerror(errno));
            return fp4s_error_set(FP4S_EEMPTY, "%s: empty trace (no header line)", r->path);
        }
    } while (len == 0 || line[0] == '#');
    line += bom_len(line, len);
    if (!t->delim) {
        size_t nt = 0, nc = 0, ns = 0;
        for (char *p = line; *p; p++) {
            nt += *p == '\t';
            nc += *p == ',';
            ns += *p == ';';
        }
        r->delim = nt >= nc && nt >= ns && nt ? '\t' : (ns > nc ? ';' : ',');
    } else {
        r->delim = t->delim;
    }
    size_t maxf = 4096;
    char **fields = malloc(maxf * sizeof *fields);
    if (!fields) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    long nf = split_fields(line, r->delim, fields, maxf);
    if (nf < 0 || (size_t)nf > maxf) {
        free(fields);
        return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: malformed header", r->path, (unsigned long long)r->line);
    }
    r->ncols = (size_t)nf;
    r->role = malloc(r->ncols * sizeof *r->role);
    if (!r->role) {
        free(fields);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    }
    for (size_t i = 0; i < r->ncols; i++) {
        char *f = fields[i];
        trim(&f);
        r->role[i] = ROLE_NONE;
        for (int k = 0; k < NROLES; k++) {
            if (r->names[k] && strcmp(f, r->names[k]) == 0) {
                if (r->have[k]) {
                    free(fields);
                    return fp4s_error_set(FP4S_EFORMAT, "%s: header: column '%s' appears twice", r->path, f);
                }
                r->have[k] = 1;
                r->role[i] = k;
            }
        }
    }
    free(fields);
    static const char *const what[] = {"step", "sequence", "trainer log-prob", "rollout log-prob"};
    static const char *const opt[] = {"--col-step", "--col-seq", "--col-trainer", "--col-rollout"};
    for (int k = ROLE_STEP; k <= ROLE_LR; k++)
        if (!r->have[k])
            return fp4s_error_set(FP4S_EFORMAT, "%s: header: missing %s column '%s' (map another name with %s; "
                                  "the delimiter is '%s')", r->path, what[k], r->names[k], opt[k],
                                  r->delim == '\t' ? "\\t" : (char[2]){r->delim, 0});
    return 0;
}

static int csv_next(mm_reader *r, mm_batch *b)
{
    char *fields[4096];
    batch_reset(b);
    while (b->n < b->cap) {
        size_t len;
        char *line;
        uint64_t first;
        int lrc = csv_record(r, &line, &len, &first);
        if (lrc) return lrc;
        if (!line) break;
        if (len == 0 || line[0] == '#') continue;
        long nf = split_fields(line, r->delim, fields, 4096);
        unsigned long long ln = (unsigned long long)first;
        if (nf < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: unterminated quote", r->path, ln);
        if ((size_t)nf != r->ncols)
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: %ld fields, the header has %zu", r->path, ln, nf,
                                  r->ncols);
        size_t i = b->n;
        b->pos[i] = -1;
        b->mask[i] = 1;
        b->run[i] = 0;
        b->row[i] = first;
        for (size_t c = 0; c < r->ncols; c++) {
            int role = r->role[c];
            if (role == ROLE_NONE) continue;
            const char *f = fields[c];
            int bad = 0;
            switch (role) {
            case ROLE_STEP: bad = parse_i64(f, &b->step[i]); break;
            case ROLE_SEQ: bad = parse_i64(f, &b->seq[i]); break;
            case ROLE_POS: bad = parse_i64(f, &b->pos[i]); break;
            case ROLE_LT: bad = parse_f64(f, &b->lt[i]); break;
            case ROLE_LR: bad = parse_f64(f, &b->lr[i]); break;
            case ROLE_MASK: bad = parse_mask(f, &b->mask[i]); break;
            case ROLE_RUN: {
                char *s = fields[c];
                trim(&s);
                int rc = run_index(r, s, strlen(s), &b->run[i]);
                if (rc) return rc;
                break;
            }
            }
            if (bad) {
                const char *want = role == ROLE_LT || role == ROLE_LR ? "a number"
                                   : role == ROLE_MASK                  ? "0, 1, true or false"
                                                                        : "an integer";
                return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: column '%s': expected %s, got '%s'", r->path, ln,
                                      role_label(r, role), want, f);
            }
        }
        if (b->pos[i] < -1 || (r->have[ROLE_POS] && b->pos[i] < 0))
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: column '%s': negative position %lld", r->path, ln,
                                  r->names[ROLE_POS], (long long)b->pos[i]);
        b->n++;
    }
    return 0;
}

#if FP4S_HAVE_JANSSON
/* ---- JSONL -------------------------------------------------------------------------- */
static int json_num(json_t *v, double *out)
{
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return 0;
    }
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (json_is_string(v)) return parse_f64(json_string_value(v), out);
    return -1;
}

static int json_int(json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (x == floor(x) && fabs(x) < 9e15) {
            *out = (int64_t)x;
            return 0;
        }
    }
    return -1;
}

static const char *json_kind(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    default: return "null";
    }
}

static int jsonl_next(mm_reader *r, mm_batch *b)
{
    batch_reset(b);
    while (b->n < b->cap) {
        size_t len;
        char *line;
        int lrc = data_line(r, &line, &len);
        if (lrc) return lrc;
        if (!line) break;
        if (r->line == 1) { /* a byte-order mark, as the CSV reader accepts it */
            size_t bl = bom_len(line, len);
            line += bl;
            len -= bl;
        }
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k == len) continue;
        unsigned long long ln = (unsigned long long)r->line;
        json_error_t err;
        json_t *o = json_loadb(line, len, 0, &err);
        if (!o) return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: invalid JSON: %s", r->path, ln, err.text);
        if (!json_is_object(o)) {
            json_decref(o);
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: expected a JSON object per line", r->path, ln);
        }
        size_t i = b->n;
        b->pos[i] = -1;
        b->mask[i] = 1;
        b->run[i] = 0;
        b->row[i] = r->line;
        for (int role = 0; role < NROLES; role++) {
            if (!r->names[role]) continue;
            json_t *v = json_object_get(o, r->names[role]);
            if (role == ROLE_RUN) {
                int st = v ? 1 : 2;
                if (r->jrun && r->jrun != st) {
                    json_decref(o);
                    return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: field '%s' %s, unlike the lines before", r->path,
                                          ln, r->names[role], v ? "present" : "missing");
                }
                r->jrun = st;
            }
            if (!v) {
                if (role <= ROLE_LR) {
                    json_decref(o);
                    return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: missing field '%s'", r->path, ln,
                                          r->names[role]);
                }
                continue;
            }
            r->have[role] = 1;
            int bad = 0;
            const char *want = "an integer";
            switch (role) {
            case ROLE_STEP: bad = json_int(v, &b->step[i]); break;
            case ROLE_SEQ: bad = json_int(v, &b->seq[i]); break;
            case ROLE_POS:
                bad = json_int(v, &b->pos[i]) || b->pos[i] < 0;
                want = "a non-negative integer";
                break;
            case ROLE_LT:
            case ROLE_LR:
                bad = json_num(v, role == ROLE_LT ? &b->lt[i] : &b->lr[i]);
                want = "a number, null or a numeric string";
                break;
            case ROLE_MASK:
                want = "0, 1, true or false";
                if (json_is_boolean(v)) b->mask[i] = json_is_true(v);
                else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
                    b->mask[i] = (uint8_t)json_integer_value(v);
                else bad = 1;
                break;
            case ROLE_RUN: {
                char tmp[64];
                const char *s = NULL;
                size_t sl = 0;
                if (json_is_string(v)) {
                    s = json_string_value(v);
                    sl = json_string_length(v);
                } else if (json_is_integer(v)) {
                    sl = (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(v));
                    s = tmp;
                } else {
                    bad = 1;
                    want = "a string";
                    break;
                }
                int rc = run_index(r, s, sl, &b->run[i]);
                if (rc) {
                    json_decref(o);
                    return rc;
                }
                break;
            }
            }
            if (bad) {
                char shown[64];
                if (json_is_string(v)) snprintf(shown, sizeof shown, "'%.40s'", json_string_value(v));
                else snprintf(shown, sizeof shown, "%s", json_kind(v));
                json_decref(o);
                return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: field '%s': expected %s, got %s", r->path, ln,
                                      r->names[role], want, shown);
            }
        }
        json_decref(o);
        b->n++;
    }
    return 0;
}

#else
static int jsonl_next(mm_reader *r, mm_batch *b)
{
    (void)b;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading JSONL traces needs jansson (fp4scope was built with -Djson=disabled or without libjansson-dev)",
                          r->path);
}
#endif

/* ---- capture files (HDF5) ------------------------------------------------------------- */
static int capture_next(mm_reader *r, mm_batch *b)
{
    b->n = 0;
    for (;;) {
        if (!r->step_open) {
            if (r->cur >= cap_lp_nsteps(r->lp)) return 0;
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
static int dedupe_batch(mm_reader *r, mm_batch *b)
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
    for (size_t i = bom_len(r->buf, got); i < got; i++) {
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
        rc = csv_header(r, t);
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
    case FP4S_TRACE_CSV: return csv_next(r, b);
    case FP4S_TRACE_JSONL: return jsonl_next(r, b);
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
        rc = dedupe_batch(r, b);
        if (rc || b->n) return rc; /* a batch of duplicates only: read on */
    }
}

void mm_reader_close(mm_reader **rp)
{
    if (!rp || !*rp) return;
    mm_reader *r = *rp;
    if (r->f && r->own_f) fclose(r->f);
    cap_lp_close(&r->lp);
    for (size_t i = 0; i < r->ndd; i++) dd_free(&r->dd[i]);
    free(r->dd);
    free(r->rec);
    for (size_t i = 0; i < r->nruns; i++) free(r->runs[i]);
    free(r->runs);
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
