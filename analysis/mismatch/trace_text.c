/* Trace readers, the text formats: CSV/TSV (a header names the columns) and
 * JSONL (one object per token), read through a line buffer into column
 * batches (trace_internal.h). */
#include "trace_internal.h"
#include "fp4s_config.h"

#include <errno.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- fields ----------------------------------------------------------------------- */
static int run_index(mm_reader *r, const char *name, size_t len, uint32_t *out)
{
    if (r->nruns && r->last_run < r->nruns && strlen(r->runs[r->last_run]) == len &&
        memcmp(r->runs[r->last_run], name, len) == 0) {
        *out = (uint32_t)r->last_run;
        return 0;
    }
    long k = mm_strmap_get(&r->run_map, name, len);
    if (k >= 0) {
        r->last_run = (size_t)k;
        *out = (uint32_t)k;
        return 0;
    }
    if (r->nruns >= 100000)
        return fp4s_error_set(FP4S_ERANGE, "%s: more than 100000 distinct runs", r->path);
    if ((r->nruns & (r->nruns - 1)) == 0) { /* 0 or a power of two: full, double */
        char **nr = realloc(r->runs, (r->nruns ? 2 * r->nruns : 8) * sizeof *nr);
        if (!nr) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
        r->runs = nr;
    }
    char *s = malloc(len + 1);
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    memcpy(s, name, len);
    s[len] = '\0';
    if (mm_strmap_put(&r->run_map, s, len, r->nruns)) {
        free(s);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", r->path);
    }
    r->runs[r->nruns] = s;
    r->last_run = r->nruns;
    *out = (uint32_t)r->nruns++;
    return 0;
}

static const char *role_label(const mm_reader *r, int role) { return r->names[role]; }

/* Strict numbers: the whole field (spaces around allowed). */
int mm_parse_f64(const char *s, double *v)
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

/* A double-quoted field from its opening quote at p: the end of the field
 * after the closing quote, or NULL if the line ends inside it. With w, the
 * field's text ("" read as one quote) is written at *w (which may be p:
 * it never passes the reading position) and *w advanced. */
static const char *quoted_field(const char *p, char **w)
{
    for (p++;;) {
        if (*p == '\0') return NULL;
        if (*p == '"') {
            if (p[1] != '"') return p + 1;
            if (w) *(*w)++ = '"';
            p += 2;
            continue;
        }
        if (w) *(*w)++ = *p;
        p++;
    }
}

/* Split a CSV line in place into fields; simple double quotes ("a,b", "" for a
 * quote) are honoured. Returns the field count (up to max) or -1 on a bad quote. */
long mm_split_fields(char *line, char delim, char **fields, size_t max)
{
    size_t nf = 0;
    char *p = line;
    for (;;) {
        char *start = p;
        if (*p == '"') {
            char *w = p;
            const char *e = quoted_field(p, &w);
            if (!e) return -1;
            p = line + (e - line);
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
 * may hold line breaks)? Quotes count only where mm_split_fields honours them:
 * at the start of a field. */
static bool quote_open(const char *p, char delim)
{
    for (;;) {
        if (*p == '"' && !(p = quoted_field(p, NULL))) return true;
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
size_t mm_bom_len(const char *line, size_t len)
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

int mm_csv_header(mm_reader *r, const fp4s_trace_opts *t)
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
    line += mm_bom_len(line, len);
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
    long nf = mm_split_fields(line, r->delim, fields, maxf);
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

int mm_csv_next(mm_reader *r, mm_batch *b)
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
        long nf = mm_split_fields(line, r->delim, fields, 4096);
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
            case ROLE_LT: bad = mm_parse_f64(f, &b->lt[i]); break;
            case ROLE_LR: bad = mm_parse_f64(f, &b->lr[i]); break;
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
/* Python's json module writes NaN, Infinity and -Infinity as bare words (its
 * allow_nan default), which JSON has not: outside strings they are written
 * here as strings of a mark (U+001F) and the word, which the readers take as
 * those numbers (mm_json_special). Returns a malloc'ed line (*out, *outlen) when it
 * changed anything, 0 when there was nothing to change, -1 out of memory. */
int mm_json_py_specials(const char *line, size_t len, char **out, size_t *outlen)
{
    static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
    *out = NULL;
    char *w = NULL; /* each word of 3 or more bytes gains 8: room for len * 11 / 3 */
    size_t n = 0;
    int instr = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = line[i];
        const char *hit = NULL;
        if (instr) {
            if (ch == '\\' && i + 1 < len) {
                if (w) {
                    w[n++] = ch;
                    w[n++] = line[i + 1];
                }
                i++;
                continue;
            }
            if (ch == '"') instr = 0;
        } else if (ch == '"') {
            instr = 1;
        } else if (ch == 'N' || ch == 'I' || ch == '-') {
            int before = i == 0 || strchr(" \t:,[{", line[i - 1]) != NULL;
            for (size_t k = 0; k < 3 && before && !hit; k++) {
                size_t wl = strlen(words[k]);
                if (i + wl <= len && memcmp(line + i, words[k], wl) == 0 &&
                    (i + wl == len || strchr(" \t,]}\r", line[i + wl]) != NULL))
                    hit = words[k];
            }
        }
        if (hit && !w) { /* the first one: copy what came before */
            w = malloc(len + 8 * (len / 3 + 1) + 1);
            if (!w) return -1;
            memcpy(w, line, i);
            n = i;
        }
        if (hit) {
            size_t wl = strlen(hit);
            memcpy(w + n, "\"\\u001f", 7); /* a mark no log holds: only these strings are taken as numbers */
            n += 7;
            memcpy(w + n, hit, wl);
            n += wl;
            w[n++] = '"';
            i += wl - 1;
            continue;
        }
        if (w) w[n++] = ch;
    }
    if (!w) return 0;
    w[n] = '\0';
    *out = w;
    *outlen = n;
    return 1;
}

int mm_json_special(const void *value, double *x)
{
    const json_t *v = value;
    const char *t = json_is_string(v) ? json_string_value(v) : NULL;
    if (!t || t[0] != '\x1f') return -1;
    if (!strcmp(t + 1, "NaN")) *x = NAN;
    else if (!strcmp(t + 1, "Infinity")) *x = INFINITY;
    else if (!strcmp(t + 1, "-Infinity")) *x = -INFINITY;
    else return -1;
    return 0;
}

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
    if (json_is_string(v) && !mm_json_special(v, out)) return 0;
    if (json_is_string(v)) return mm_parse_f64(json_string_value(v), out);
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

int mm_jsonl_next(mm_reader *r, mm_batch *b)
{
    batch_reset(b);
    while (b->n < b->cap) {
        size_t len;
        char *line;
        int lrc = data_line(r, &line, &len);
        if (lrc) return lrc;
        if (!line) break;
        if (r->line == 1) { /* a byte-order mark, as the CSV reader accepts it */
            size_t bl = mm_bom_len(line, len);
            line += bl;
            len -= bl;
        }
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k == len) continue;
        unsigned long long ln = (unsigned long long)r->line;
        json_error_t err;
        json_t *o = json_loadb(line, len, 0, &err);
        if (!o) { /* NaN, Infinity, -Infinity as Python writes them? */
            char *fixed;
            size_t fl;
            int pr = mm_json_py_specials(line, len, &fixed, &fl);
            if (pr < 0) return fp4s_error_set(FP4S_ENOMEM, "%s: line %llu: out of memory", r->path, ln);
            if (pr > 0) {
                o = json_loadb(fixed, fl, 0, &err);
                free(fixed);
            }
        }
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
int mm_jsonl_next(mm_reader *r, mm_batch *b)
{
    (void)b;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading JSONL traces needs jansson (fp4scope was built with -Djson=disabled or without libjansson-dev)",
                          r->path);
}
#endif
