/* .npy: a strict header parser, the row reader hook and the streaming writer.
 * Format: magic "\x93NUMPY", version major.minor, header length (u16 LE for
 * 1.0, u32 LE for 2.0/3.0), then a Python dict literal with exactly the keys
 * 'descr', 'fortran_order' and 'shape', padded with spaces and ended by '\n'. */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPY_MAX_HEADER ((size_t)1 << 20)

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Size of magic + version + length field + header text, from the prefix. */
static int npy_prefix(const char *what, const unsigned char *b, size_t len, size_t *total, size_t *text_off)
{
    if (len < 10)
        return fp4s_error_set(FP4S_EFORMAT, "%s: truncated .npy header (%zu bytes)", what, len);
    if (memcmp(b, npy_magic, 6) != 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", what);
    unsigned major = b[6], minor = b[7];
    size_t hlen;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        *text_off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return fp4s_error_set(FP4S_EFORMAT, "%s: truncated .npy header (%zu bytes)", what, len);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        *text_off = 12;
    } else {
        return fp4s_error_set(FP4S_EVERSION, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0)",
                              what, major, minor);
    }
    if (minor != 0)
        return fp4s_error_set(FP4S_EVERSION, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0)",
                              what, major, minor);
    if (hlen == 0 || hlen > NPY_MAX_HEADER)
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: implausible header length %zu", what, hlen);
    *total = *text_off + hlen;
    return 0;
}

typedef struct {
    const char *p, *end, *what;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int expect(cursor *c, char ch, const char *problem)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p != ch) return fp4s_error_set(FP4S_EFORMAT, "%s: header: %s", c->what, problem);
    c->p++;
    return 0;
}

/* A quoted Python string without escapes into out (at most n-1 chars). */
static int parse_str(cursor *c, char *out, size_t n)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: expected a quoted string", c->what);
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n')
            return fp4s_error_set(FP4S_EFORMAT, "%s: header: unexpected character in a string", c->what);
        if (k + 1 >= n) return fp4s_error_set(FP4S_EFORMAT, "%s: header: string too long", c->what);
        out[k++] = *c->p++;
    }
    if (c->p >= c->end) return fp4s_error_set(FP4S_EFORMAT, "%s: header: unterminated string", c->what);
    c->p++;
    out[k] = '\0';
    return 0;
}

static int parse_uint(cursor *c, uint64_t *v)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: expected a non-negative integer in 'shape'", c->what);
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, (uint64_t)(*c->p - '0'), &x))
            return fp4s_error_set(FP4S_ERANGE, "%s: header: a dimension in 'shape' overflows 64 bits", c->what);
        c->p++;
    }
    *v = x;
    return 0;
}

#define NPY_MAX_RANK FP4S_MAX_RANK

static int parse_shape(cursor *c, uint64_t *dims, int *rank)
{
    int rc = expect(c, '(', "'shape' is not a tuple");
    if (rc) return rc;
    int n = 0;
    bool comma_after_last = false;
    for (;;) {
        skip_ws(c);
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            break;
        }
        if (n > 0 && !comma_after_last)
            return fp4s_error_set(FP4S_EFORMAT, "%s: header: expected ',' or ')' in 'shape'", c->what);
        if (n == NPY_MAX_RANK)
            return fp4s_error_set(FP4S_ESHAPE, "%s: header: 'shape' has more than %d dimensions", c->what, NPY_MAX_RANK);
        rc = parse_uint(c, &dims[n]);
        if (rc) return rc;
        n++;
        skip_ws(c);
        comma_after_last = false;
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            comma_after_last = true;
        }
    }
    if (n == 1 && !comma_after_last)
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: 'shape' (N) is not a tuple; a 1-D shape is written (N,)", c->what);
    *rank = n;
    return 0;
}

int fp4s_npy_parse_header(const char *what, const unsigned char *buf, size_t len,
                          fp4s_dtype *dt, int *rank, uint64_t shape[2], uint64_t *data_off, uint64_t *dims_out)
{
    size_t total, toff;
    int rc = npy_prefix(what, buf, len, &total, &toff);
    if (rc) return rc;
    if (len < total)
        return fp4s_error_set(FP4S_EFORMAT, "%s: truncated .npy header (%zu of %zu bytes)", what, len, total);
    cursor c = {(const char *)buf + toff, (const char *)buf + total, what};
    if (c.end[-1] != '\n')
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: does not end with a newline", what);
    for (const char *q = c.p; q < c.end; q++)
        if (*q == '\0') return fp4s_error_set(FP4S_EFORMAT, "%s: header: contains a NUL byte", what);

    char descr[64] = "";
    int fortran = -1, nd = -1;
    uint64_t dims[NPY_MAX_RANK];
    bool have_descr = false;

    if ((rc = expect(&c, '{', "does not start with '{'"))) return rc;
    for (;;) {
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        char key[32];
        if ((rc = parse_str(&c, key, sizeof key))) return rc;
        if ((rc = expect(&c, ':', "expected ':' after a key"))) return rc;
        skip_ws(&c);
        if (strcmp(key, "descr") == 0) {
            if (have_descr) return fp4s_error_set(FP4S_EFORMAT, "%s: header: duplicate key 'descr'", what);
            if (c.p < c.end && *c.p == '[')
                return fp4s_error_set(FP4S_EDTYPE, "%s: header: structured dtype is not supported; expected float32, float64 or float16", what);
            if ((rc = parse_str(&c, descr, sizeof descr))) return rc;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (fortran >= 0) return fp4s_error_set(FP4S_EFORMAT, "%s: header: duplicate key 'fortran_order'", what);
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                fortran = 1;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                fortran = 0;
                c.p += 5;
            } else {
                return fp4s_error_set(FP4S_EFORMAT, "%s: header: 'fortran_order' is not True or False", what);
            }
        } else if (strcmp(key, "shape") == 0) {
            if (nd >= 0) return fp4s_error_set(FP4S_EFORMAT, "%s: header: duplicate key 'shape'", what);
            if ((rc = parse_shape(&c, dims, &nd))) return rc;
        } else {
            return fp4s_error_set(FP4S_EFORMAT, "%s: header: unexpected key '%s'", what, key);
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: expected ',' or '}' after the value of '%s'", what, key);
    }
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\t')) c.p++;
    if (c.p != c.end - 1)
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: unexpected text after the dictionary", what);
    if (!have_descr || fortran < 0 || nd < 0)
        return fp4s_error_set(FP4S_EFORMAT, "%s: header: missing key '%s'", what,
                              !have_descr ? "descr" : fortran < 0 ? "fortran_order" : "shape");

    /* dtype */
    static const struct { const char *descr; fp4s_dtype dt; } ok[] = {
        {"<f4", FP4S_DT_F32}, {"<f8", FP4S_DT_F64}, {"<f2", FP4S_DT_F16}, {"|u1", FP4S_DT_U8},
    };
    bool found = false;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(descr, ok[i].descr) == 0) {
            *dt = ok[i].dt;
            found = true;
        }
    if (!found) {
        if (descr[0] == '>' && descr[1] == 'f')
            return fp4s_error_set(FP4S_EDTYPE, "%s: dtype '%s' is big-endian; only little-endian float32/float64/float16 are supported (use arr.astype('<f4'))", what, descr);
        return fp4s_error_set(FP4S_EDTYPE, "%s: dtype '%s' is not supported; expected float32 ('<f4'), float64 ('<f8'), float16 ('<f2') or uint8 ('|u1')", what, descr);
    }
    if (fortran == 1)
        return fp4s_error_set(FP4S_EFORMAT, "%s: fortran_order is True (column-major); only C order is supported (save np.ascontiguousarray(a))", what);
    if (nd == 0)
        return fp4s_error_set(FP4S_ESHAPE, "%s: shape () is a scalar; expected an array", what);
    rc = fp4s_flatten_dims(what, nd, dims, &shape[0], &shape[1]);
    if (rc) return rc;
    *rank = nd;
    if (dims_out) memcpy(dims_out, dims, (size_t)nd * sizeof *dims);
    *data_off = total;
    return 0;
}

int fp4s_npy_src_open(struct fp4s_source *s, uint64_t fsize)
{
    unsigned char pre[12];
    size_t n0 = fsize < sizeof pre ? (size_t)fsize : sizeof pre;
    ssize_t got = fp4s_pread_full(s->fd, pre, n0, 0);
    if (got < 0) return fp4s_error_set(FP4S_EOPEN, "%s: cannot read: %s", s->path, strerror(errno));
    size_t total, toff;
    int rc = npy_prefix(s->path, pre, (size_t)got, &total, &toff);
    if (rc) return rc;
    if (total > fsize)
        return fp4s_error_set(FP4S_EFORMAT, "%s: truncated .npy header (%" PRIu64 " of %zu bytes)", s->path, fsize, total);
    unsigned char *hb = malloc(total);
    if (!hb) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", s->path);
    got = fp4s_pread_full(s->fd, hb, total, 0);
    if (got < 0) {
        free(hb);
        return fp4s_error_set(FP4S_EOPEN, "%s: cannot read: %s", s->path, strerror(errno));
    }
    uint64_t shape[2], off;
    rc = fp4s_npy_parse_header(s->path, hb, (size_t)got, &s->dt, &s->rank, shape, &off, s->dims);
    free(hb);
    if (rc) return rc;
    char sh[512];
    fp4s_dims_str(s->rank, s->dims, sh, sizeof sh);
    if (shape[0] == 0 || shape[1] == 0) return fp4s_error_set(FP4S_EEMPTY, "%s: shape %s is empty", s->path, sh);
    uint64_t n, bytes;
    if (__builtin_mul_overflow(shape[0], shape[1], &n) ||
        __builtin_mul_overflow(n, (uint64_t)fp4s_dtype_size(s->dt), &bytes) ||
        bytes > (uint64_t)SIZE_MAX || n > (uint64_t)SIZE_MAX / sizeof(float))
        return fp4s_error_set(FP4S_ERANGE, "%s: shape %s overflows the addressable size", s->path, sh);
    uint64_t have = fsize - off;
    if (have < bytes) {
        return fp4s_error_set(FP4S_EFORMAT, "%s: truncated: shape %s %s needs %" PRIu64
                              " data bytes, the file has %" PRIu64, s->path, sh,
                              fp4s_dtype_name(s->dt), bytes, have);
    }
    if (have > bytes)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %" PRIu64 " unexpected bytes after the %" PRIu64 " data bytes of the array",
                              s->path, have - bytes, bytes);
    s->rows = (size_t)shape[0];
    s->cols = (size_t)shape[1];
    s->data_off = off;
    return 0;
}

/* ---- writer --------------------------------------------------------------- */
struct fp4s_npy_writer {
    char *path;
    fp4s_outfile *of;      /* NULL for stdout */
    FILE *f;
    size_t rowbytes;
    size_t total, written; /* rows */
};

static const char *npy_descr(fp4s_dtype dt)
{
    switch (dt) {
    case FP4S_DT_F32: return "<f4";
    case FP4S_DT_F64: return "<f8";
    case FP4S_DT_F16: return "<f2";
    case FP4S_DT_U8:  return "|u1";
    case FP4S_DT_U16: return "<u2";
    case FP4S_DT_I32: return "<i4";
    case FP4S_DT_I64: return "<i8";
    default:          return NULL;
    }
}

void fp4s_npy_writer_abort(fp4s_npy_writer **wp)
{
    if (!wp || !*wp) return;
    fp4s_npy_writer *w = *wp;
    if (w->f && w->of) fclose(w->f);
    else if (w->f) fflush(w->f);
    fp4s_outfile_abort(&w->of);
    free(w->path);
    free(w);
    *wp = NULL;
}

int fp4s_npy_writer_open(const char *path, fp4s_dtype dt, int rank, size_t rows, size_t cols,
                         fp4s_npy_writer **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "fp4s_npy_writer_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return fp4s_error_set(FP4S_EINVAL, "empty output file name");
    const char *descr = npy_descr(dt);
    if (!descr)
        return fp4s_error_set(FP4S_EDTYPE, "%s: cannot write %s to .npy", path, fp4s_dtype_name(dt));
    if (rank != 1 && rank != 2)
        return fp4s_error_set(FP4S_EINVAL, "%s: .npy writer supports rank 1 or 2, not %d", path, rank);
    size_t per_row = rank == 2 ? cols : 1, rb;
    if (__builtin_mul_overflow(per_row, fp4s_dtype_size(dt), &rb) || (rows && rb > SIZE_MAX / rows))
        return fp4s_error_set(FP4S_ERANGE, "%s: %zu x %zu overflows", path, rows, cols);

    char hdr[256];
    int hl = rank == 2
        ? snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %zu), }", descr, rows, cols)
        : snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr, rows);
    /* version 1.0: 10-byte prefix; pad with spaces so that data starts at a multiple of 64 */
    size_t body = (size_t)hl + 1;
    size_t total = (10 + body + 63) / 64 * 64;
    size_t pad = total - 10 - body;
    unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                (unsigned char)((total - 10) & 0xff), (unsigned char)((total - 10) >> 8)};

    fp4s_npy_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    }
    w->rowbytes = rb;
    w->total = rows;
    int rc;
    if (strcmp(path, "-") == 0) {
        w->f = stdout;
    } else {
        rc = fp4s_outfile_begin(path, &w->of);
        if (rc) {
            free(w->path);
            free(w);
            return rc;
        }
        w->f = fopen(fp4s_outfile_tmppath(w->of), "wb");
        if (!w->f) {
            rc = fp4s_error_set(FP4S_EWRITE, "%s: cannot write: %s", path, strerror(errno));
            fp4s_npy_writer_abort(&w);
            return rc;
        }
        setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    }
    if (fwrite(prefix, 1, 10, w->f) != 10 || fwrite(hdr, 1, (size_t)hl, w->f) != (size_t)hl ||
        fprintf(w->f, "%*s\n", (int)pad, "") < 0) {
        rc = fp4s_error_set(FP4S_EWRITE, "%s: write failed: %s", path, strerror(errno));
        fp4s_npy_writer_abort(&w);
        return rc;
    }
    *out = w;
    return 0;
}

int fp4s_npy_writer_rows(fp4s_npy_writer *w, const void *data, size_t nrows)
{
    if (!w) return fp4s_error_set(FP4S_EINVAL, "fp4s_npy_writer_rows: NULL writer");
    if (nrows > w->total - w->written)
        return fp4s_error_set(FP4S_EINVAL, "%s: %zu more rows than the %zu declared", w->path,
                              nrows - (w->total - w->written), w->total);
    if (nrows == 0) return 0;
    if (!data) return fp4s_error_set(FP4S_EINVAL, "%s: NULL row data", w->path);
    size_t n = nrows * w->rowbytes;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "the .npy writer assumes a little-endian host"
#endif
    if (fwrite(data, 1, n, w->f) != n)
        return fp4s_error_set(FP4S_EWRITE, "%s: write failed: %s", w->path, strerror(errno));
    w->written += nrows;
    return 0;
}

int fp4s_npy_writer_close(fp4s_npy_writer **wp)
{
    if (!wp || !*wp) return 0;
    fp4s_npy_writer *w = *wp;
    int rc;
    if (w->written != w->total) {
        rc = fp4s_error_set(FP4S_EINTERNAL, "%s: only %zu of %zu rows written; output discarded",
                            w->path, w->written, w->total);
        fp4s_npy_writer_abort(wp);
        return rc;
    }
    if (w->of) {
        int bad = ferror(w->f) != 0;
        bad |= fclose(w->f) != 0;
        w->f = NULL;
        if (bad) {
            rc = fp4s_error_set(FP4S_EWRITE, "%s: write failed: %s", w->path, strerror(errno));
            fp4s_npy_writer_abort(wp);
            return rc;
        }
        rc = fp4s_outfile_commit(&w->of);
    } else {
        rc = fflush(w->f) != 0 ? fp4s_error_set(FP4S_EWRITE, "stdout: write failed: %s", strerror(errno)) : 0;
    }
    free(w->path);
    free(w);
    *wp = NULL;
    return rc;
}

int fp4s_npy_write(const char *path, fp4s_dtype dt, int rank, size_t rows, size_t cols, const void *data)
{
    fp4s_npy_writer *w;
    int rc = fp4s_npy_writer_open(path, dt, rank, rows, cols, &w);
    if (rc) return rc;
    rc = fp4s_npy_writer_rows(w, data, rows);
    if (rc) {
        fp4s_npy_writer_abort(&w);
        return rc;
    }
    return fp4s_npy_writer_close(&w);
}
