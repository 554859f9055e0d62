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
    if (len >= 3 && (unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        line += 3;
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
        int lrc = data_line(r, &line, &len);
        if (lrc) return lrc;
        if (!line) break;
        if (len == 0 || line[0] == '#') continue;
        long nf = split_fields(line, r->delim, fields, 4096);
        unsigned long long ln = (unsigned long long)r->line;
        if (nf < 0) return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: unterminated quote", r->path, ln);
        if ((size_t)nf != r->ncols)
            return fp4s_error_set(FP4S_EFORMAT, "%s: line %llu: %ld fields, the header has %zu", r->path, ln, nf,
                                  r->ncols);
        size_t i = b->n;
        b->pos[i] = -1;
        b->mask[i] = 1;
        b->run[i] = 0;
        b->row[i] = r->line;
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
    for (size_t i = 0; i < got; i++) {
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

int mm_reader_next(mm_reader *r, mm_batch *b)
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

void mm_reader_close(mm_reader **rp)
{
    if (!rp || !*rp) return;
    mm_reader *r = *rp;
    if (r->f && r->own_f) fclose(r->f);
    cap_lp_close(&r->lp);
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
