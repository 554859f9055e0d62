/* Result records (fp4scope/record.h): serialization, deserialization and
 * freeing walk a record type's field table. The format is the machine's
 * (the ranks of one MPI job share it): each row's values in table order, a
 * heap array or string preceded by its length (UINT64_MAX for NULL). */
#include <fp4scope/record.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t scalar_size(fp4s_ftype t)
{
    switch (t) {
    case FP4S_FT_F64: return sizeof(double);
    case FP4S_FT_SIZE: return sizeof(size_t);
    case FP4S_FT_U64: return sizeof(uint64_t);
    case FP4S_FT_I64: return sizeof(int64_t);
    case FP4S_FT_U32: return sizeof(uint32_t);
    case FP4S_FT_U16: return sizeof(uint16_t);
    case FP4S_FT_ENUM: return sizeof(int);
    case FP4S_FT_BOOL: return sizeof(bool);
    case FP4S_FT_CHARS: return 1;
    default: return 0;
    }
}

int fp4s_buf_put(fp4s_buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        unsigned char *q = realloc(b->p, c);
        if (!q) return fp4s_error_set(FP4S_ENOMEM, "record: out of memory");
        b->p = q;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

#define put fp4s_buf_put
static int put_u64(fp4s_buf *b, uint64_t v) { return put(b, &v, sizeof v); }

static bool is_ptr(fp4s_ftype t)
{
    return t == FP4S_FT_PTR_F64 || t == FP4S_FT_PTR_SIZE || t == FP4S_FT_PTR_STR || t == FP4S_FT_PTR_STRUCT;
}

size_t fp4s_record_count(const fp4s_rfield *f, const void *rec)
{
    if (is_ptr(f->type)) {
        if (f->count_of < 0) return 0;
        size_t c, c2 = 1;
        memcpy(&c, (const unsigned char *)rec + f->count_of, sizeof c);
        if (f->count_of2 >= 0) memcpy(&c2, (const unsigned char *)rec + f->count_of2, sizeof c2);
        return c * c2 * (f->count_mul ? f->count_mul : 1);
    }
    return f->count;
}

int fp4s_record_put(fp4s_buf *b, const fp4s_rtype *t, const void *rec)
{
    const unsigned char *base = rec;
    for (size_t i = 0; i < t->nfields; i++) {
        const fp4s_rfield *f = &t->fields[i];
        const unsigned char *at = base + f->offset;
        int rc = 0;
        switch (f->type) {
        case FP4S_FT_STRUCT:
            for (size_t j = 0; j < f->count && !rc; j++) rc = fp4s_record_put(b, f->sub(), at + j * f->sub()->size);
            break;
        case FP4S_FT_STR: {
            const char *s;
            memcpy(&s, at, sizeof s);
            size_t n = s ? strlen(s) : 0;
            rc = put_u64(b, s ? (uint64_t)n : UINT64_MAX);
            if (!rc && s) rc = put(b, s, n);
            break;
        }
        case FP4S_FT_PTR_F64:
        case FP4S_FT_PTR_SIZE: {
            const void *a;
            memcpy(&a, at, sizeof a);
            size_t n = fp4s_record_count(f, rec), es = f->type == FP4S_FT_PTR_F64 ? sizeof(double) : sizeof(size_t);
            rc = put_u64(b, a ? (uint64_t)n : UINT64_MAX);
            if (!rc && a) rc = put(b, a, n * es);
            break;
        }
        case FP4S_FT_PTR_STR: {
            char *const *a;
            memcpy(&a, at, sizeof a);
            size_t n = fp4s_record_count(f, rec);
            rc = put_u64(b, a ? (uint64_t)n : UINT64_MAX);
            for (size_t j = 0; a && j < n && !rc; j++) {
                size_t l = a[j] ? strlen(a[j]) : 0;
                rc = put_u64(b, a[j] ? (uint64_t)l : UINT64_MAX);
                if (!rc && a[j]) rc = put(b, a[j], l);
            }
            break;
        }
        case FP4S_FT_PTR_STRUCT: {
            const unsigned char *a;
            memcpy(&a, at, sizeof a);
            size_t n = fp4s_record_count(f, rec);
            rc = put_u64(b, a ? (uint64_t)n : UINT64_MAX);
            for (size_t j = 0; a && j < n && !rc; j++) rc = fp4s_record_put(b, f->sub(), a + j * f->sub()->size);
            break;
        }
        case FP4S_FT_CPTR: break;
        default: rc = put(b, at, scalar_size(f->type) * f->count);
        }
        if (rc) return rc;
    }
    return 0;
}

static int take(const unsigned char **p, const unsigned char *end, void *dst, size_t n)
{
    if ((size_t)(end - *p) < n) return fp4s_error_set(FP4S_EFORMAT, "record: truncated");
    if (n) memcpy(dst, *p, n);
    *p += n;
    return 0;
}

/* A string written as its length (UINT64_MAX: NULL) and bytes. */
static int take_str(const unsigned char **p, const unsigned char *end, char **out)
{
    uint64_t n = 0;
    int rc = take(p, end, &n, sizeof n);
    *out = NULL;
    if (rc || n == UINT64_MAX) return rc;
    if ((uint64_t)(end - *p) < n) return fp4s_error_set(FP4S_EFORMAT, "record: truncated");
    char *s = malloc((size_t)n + 1);
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "record: out of memory");
    memcpy(s, *p, (size_t)n);
    s[n] = '\0';
    *p += n;
    *out = s;
    return 0;
}

/* A heap array's header: its length n (UINT64_MAX: NULL, *a stays NULL),
 * which must be its count's and fit what is left at `min` bytes an entry;
 * then *a = calloc(n, size) (set in the record at `at`). */
static int take_array(const unsigned char **p, const unsigned char *end, const fp4s_rtype *t, const fp4s_rfield *f,
                      const void *rec, size_t min, size_t size, unsigned char *at, void **a, uint64_t *n)
{
    *a = NULL;
    int rc = take(p, end, n, sizeof *n);
    if (rc || *n == UINT64_MAX) return rc;
    if (*n != fp4s_record_count(f, rec)) /* its count's row came before it */
        return fp4s_error_set(FP4S_EFORMAT, "record %s: %s holds %llu entries, its count says %zu", t->name, f->name,
                              (unsigned long long)*n, fp4s_record_count(f, rec));
    if (*n > (uint64_t)(end - *p) / min) return fp4s_error_set(FP4S_EFORMAT, "record: truncated");
    *a = calloc(*n ? (size_t)*n : 1, size);
    if (!*a) return fp4s_error_set(FP4S_ENOMEM, "record: out of memory");
    memcpy(at, a, sizeof *a);
    return 0;
}

int fp4s_record_get(const unsigned char **p, const unsigned char *end, const fp4s_rtype *t, void *rec)
{
    unsigned char *base = rec;
    memset(rec, 0, t->size);
    int rc = 0;
    for (size_t i = 0; i < t->nfields && !rc; i++) {
        const fp4s_rfield *f = &t->fields[i];
        unsigned char *at = base + f->offset;
        void *a;
        uint64_t n;
        switch (f->type) {
        case FP4S_FT_STRUCT:
            for (size_t j = 0; j < f->count && !rc; j++) rc = fp4s_record_get(p, end, f->sub(), at + j * f->sub()->size);
            break;
        case FP4S_FT_STR: {
            char *s = NULL;
            rc = take_str(p, end, &s);
            memcpy(at, &s, sizeof s);
            break;
        }
        case FP4S_FT_PTR_STR: /* each string is its length and bytes: 8 bytes at least */
            rc = take_array(p, end, t, f, rec, sizeof(uint64_t), sizeof(char *), at, &a, &n);
            for (size_t j = 0; a && j < n && !rc; j++) rc = take_str(p, end, &((char **)a)[j]);
            break;
        case FP4S_FT_PTR_STRUCT: /* every record takes a byte at least */
            rc = take_array(p, end, t, f, rec, 1, f->sub()->size, at, &a, &n);
            for (size_t j = 0; a && j < n && !rc; j++)
                rc = fp4s_record_get(p, end, f->sub(), (unsigned char *)a + j * f->sub()->size);
            break;
        case FP4S_FT_PTR_F64:
        case FP4S_FT_PTR_SIZE: {
            size_t es = f->type == FP4S_FT_PTR_F64 ? sizeof(double) : sizeof(size_t);
            rc = take_array(p, end, t, f, rec, es, es, at, &a, &n);
            if (!rc && a) rc = take(p, end, a, (size_t)n * es);
            break;
        }
        case FP4S_FT_CPTR: break;
        default: rc = take(p, end, at, scalar_size(f->type) * f->count);
        }
    }
    if (rc) fp4s_record_free(t, rec);
    return rc;
}

void fp4s_record_free(const fp4s_rtype *t, void *rec)
{
    if (!rec) return;
    unsigned char *base = rec;
    for (size_t i = 0; i < t->nfields; i++) {
        const fp4s_rfield *f = &t->fields[i];
        unsigned char *at = base + f->offset;
        if (f->type == FP4S_FT_STRUCT) {
            for (size_t j = 0; j < f->count; j++) fp4s_record_free(f->sub(), at + j * f->sub()->size);
        } else if (f->type == FP4S_FT_PTR_STR || f->type == FP4S_FT_PTR_STRUCT) {
            void *q;
            memcpy(&q, at, sizeof q);
            /* a partly read record: the count may not be set yet, the array is zeroed */
            size_t n = q ? fp4s_record_count(f, rec) : 0;
            for (size_t j = 0; j < n; j++) {
                if (f->type == FP4S_FT_PTR_STR) free(((char **)q)[j]);
                else fp4s_record_free(f->sub(), (unsigned char *)q + j * f->sub()->size);
            }
            free(q);
            q = NULL;
            memcpy(at, &q, sizeof q);
        } else if (f->type == FP4S_FT_STR || f->type == FP4S_FT_PTR_F64 || f->type == FP4S_FT_PTR_SIZE) {
            void *q;
            memcpy(&q, at, sizeof q);
            free(q);
            q = NULL;
            memcpy(at, &q, sizeof q);
        }
    }
}

double fp4s_record_value(const fp4s_rfield *f, const void *rec, size_t i)
{
    const unsigned char *at = (const unsigned char *)rec + f->offset;
    if (f->type == FP4S_FT_PTR_F64 || f->type == FP4S_FT_PTR_SIZE) {
        const void *a;
        memcpy(&a, at, sizeof a);
        if (!a || i >= fp4s_record_count(f, rec)) return NAN;
        if (f->type == FP4S_FT_PTR_F64) return ((const double *)a)[i];
        return (double)((const size_t *)a)[i];
    }
    if (i >= f->count) return NAN;
    at += i * scalar_size(f->type);
    switch (f->type) {
    case FP4S_FT_F64: { double v; memcpy(&v, at, sizeof v); return v; }
    case FP4S_FT_SIZE: { size_t v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_U64: { uint64_t v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_I64: { int64_t v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_U32: { uint32_t v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_U16: { uint16_t v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_ENUM: { int v; memcpy(&v, at, sizeof v); return (double)v; }
    case FP4S_FT_BOOL: { bool v; memcpy(&v, at, sizeof v); return v ? 1.0 : 0.0; }
    default: return NAN;
    }
}

const fp4s_rfield *fp4s_record_field(const fp4s_rtype *t, const char *name)
{
    for (size_t i = 0; i < t->nfields; i++)
        if (!strcmp(t->fields[i].name, name)) return &t->fields[i];
    return NULL;
}
