/* Tensor sources: spec-string parsing, dispatch by file signature, row reads
 * with conversion to float32. The per-format parsers live in npy.c,
 * safetensors.c and h5.c. */
#include "internal.h"

#include <fp4scope/codec.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fp4s_dtype_name(fp4s_dtype d)
{
    switch (d) {
    case FP4S_DT_F32:  return "float32";
    case FP4S_DT_F64:  return "float64";
    case FP4S_DT_F16:  return "float16";
    case FP4S_DT_BF16: return "bfloat16";
    case FP4S_DT_U8:   return "uint8";
    case FP4S_DT_U16:  return "uint16";
    case FP4S_DT_I32:  return "int32";
    case FP4S_DT_I64:  return "int64";
    }
    return "unknown";
}

size_t fp4s_dtype_size(fp4s_dtype d)
{
    switch (d) {
    case FP4S_DT_U8:   return 1;
    case FP4S_DT_F16:
    case FP4S_DT_BF16:
    case FP4S_DT_U16:  return 2;
    case FP4S_DT_F32:
    case FP4S_DT_I32:  return 4;
    case FP4S_DT_F64:
    case FP4S_DT_I64:  return 8;
    }
    return 0;
}

ssize_t fp4s_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int fp4s_src_scratch(struct fp4s_source *s, size_t n)
{
    if (n <= s->scratch_cap) return 0;
    void *p = realloc(s->scratch, n);
    if (!p) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory for a %zu-byte read buffer", s->path, n);
    s->scratch = p;
    s->scratch_cap = n;
    return 0;
}

static int is_regular(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Split spec into file and name. The whole spec is the file if it names an
 * existing file; otherwise the last ':' splits, unless only an earlier ':'
 * leaves an existing file before it (a tensor name that contains ':'). */
static int split_spec(const char *spec, char **file, char **name)
{
    const char *colon = strrchr(spec, ':');
    if (!is_regular(spec) && colon && colon != spec) {
        const char *use = colon;
        char *pre = strndup(spec, (size_t)(colon - spec));
        if (pre && !is_regular(pre)) {
            for (const char *c = colon - 1; c > spec; c--) {
                if (*c != ':') continue;
                char *p2 = strndup(spec, (size_t)(c - spec));
                bool ok = p2 && is_regular(p2);
                free(p2);
                if (ok) {
                    use = c;
                    break;
                }
            }
        }
        free(pre);
        *file = strndup(spec, (size_t)(use - spec)); /* "file.h5:" = no name */
        *name = strdup(use + 1);
    } else {
        *file = strdup(spec);
        *name = strdup("");
    }
    if (!*file || !*name) {
        free(*file);
        free(*name);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", spec);
    }
    return 0;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

int fp4s_source_open(const char *spec, fp4s_source **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "fp4s_source_open: out is NULL");
    *out = NULL;
    if (!spec || !*spec) return fp4s_error_set(FP4S_EINVAL, "empty input name");

    struct fp4s_source *s = calloc(1, sizeof *s);
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", spec);
    s->fd = -1;
    s->h5_file = s->h5_dset = -1;
    int rc = split_spec(spec, &s->path, &s->name);
    if (rc) {
        free(s);
        return rc;
    }

    struct stat st;
    /* a FIFO or device would block or lie about its size: regular files only */
    if (stat(s->path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        rc = fp4s_error_set(FP4S_EOPEN, "%s: not a regular file", s->path);
        goto fail;
    }
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        int e = errno;
        /* A spec whose split file part is missing too: report the spec as given. */
        const char *shown = (e == ENOENT && *s->name) ? spec : s->path;
        rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", shown, strerror(e));
        goto fail;
    }
    if (fstat(s->fd, &st) != 0) {
        rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot stat: %s", s->path, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = fp4s_error_set(FP4S_EOPEN, "%s: is a directory, expected a tensor file", s->path);
        goto fail;
    }
    if (st.st_size == 0) {
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: file is empty", s->path);
        goto fail;
    }
    uint64_t fsize = (uint64_t)st.st_size;

    unsigned char magic[8] = {0};
    ssize_t got = fp4s_pread_full(s->fd, magic, sizeof magic, 0);
    if (got < 0) {
        rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot read: %s", s->path, strerror(errno));
        goto fail;
    }
    static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    static const unsigned char h5_magic[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

    if ((got >= 6 && memcmp(magic, npy_magic, 6) == 0) ||
        (ends_with(s->path, ".npy") && !(got == 8 && memcmp(magic, h5_magic, 8) == 0))) {
        s->kind = FP4S_SRC_NPY;
        if (*s->name) {
            rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: a .npy file holds one array; no tensor name expected (got '%s')",
                                s->path, s->name);
            goto fail;
        }
        rc = fp4s_npy_src_open(s, fsize);
    } else if ((got == 8 && memcmp(magic, h5_magic, 8) == 0) || ends_with(s->path, ".h5") ||
               ends_with(s->path, ".hdf5") || ends_with(s->path, ".hdf")) {
        s->kind = FP4S_SRC_H5;
        close(s->fd);
        s->fd = -1;
        rc = fp4s_h5_src_open(s);
    } else if (got >= 4 && !ends_with(s->path, ".safetensors") &&
               (memcmp(magic, "PK\x03\x04", 4) == 0 || memcmp(magic, "\x80\x02\x8a\x0a", 4) == 0)) {
        /* torch.save: a zip archive (PyTorch 1.6 on) or, before, a pickle that
         * starts with its magic number (protocol 2, LONG1 of 10 bytes) */
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: a PyTorch torch.save file (%s), which only PyTorch reads: import it "
                            "through the Python adapter, python3 -m fp4scope.pt %s -o CAP.h5 --step N --side SIDE "
                            "(tools/python; fp4-capture(1), PYTORCH DUMPS), or save the tensors as .npy or "
                            "safetensors", s->path, magic[0] == 'P' ? "a zip archive" : "a pickle", s->path);
        goto fail;
    } else {
        /* safetensors has no magic: an 8-byte length and a '{'. */
        s->kind = FP4S_SRC_ST;
        rc = fp4s_st_src_open(s, fsize);
    }
    if (rc) goto fail;
    *out = s;
    return 0;
fail:
    fp4s_source_close(&s);
    return rc;
}

void fp4s_source_close(fp4s_source **src)
{
    if (!src || !*src) return;
    struct fp4s_source *s = *src;
    if (s->kind == FP4S_SRC_H5) fp4s_h5_src_close(s);
    if (s->fd >= 0) close(s->fd);
    free(s->scratch);
    free(s->path);
    free(s->name);
    free(s);
    *src = NULL;
}

size_t fp4s_source_rows(const fp4s_source *s) { return s ? s->rows : 0; }
size_t fp4s_source_cols(const fp4s_source *s) { return s ? s->cols : 0; }
int fp4s_source_rank(const fp4s_source *s) { return s ? s->rank : 0; }

int fp4s_source_shape(const fp4s_source *s, uint64_t *dims, int max)
{
    if (!s) return 0;
    for (int i = 0; i < s->rank && i < max; i++) dims[i] = s->dims[i];
    return s->rank;
}

int fp4s_flatten_dims(const char *what, int rank, const uint64_t *dims, uint64_t *rows, uint64_t *cols)
{
    uint64_t r = 1;
    for (int i = 0; i + 1 < rank; i++)
        if (__builtin_mul_overflow(r, dims[i], &r)) {
            char sb[512];
            fp4s_dims_str(rank, dims, sb, sizeof sb);
            return fp4s_error_set(FP4S_ERANGE, "%s: shape %s overflows", what, sb);
        }
    *rows = r;
    *cols = rank ? dims[rank - 1] : 0;
    return 0;
}

void fp4s_dims_str(int rank, const uint64_t *dims, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && k + 24 < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
}
fp4s_dtype fp4s_source_dtype(const fp4s_source *s) { return s ? s->dt : FP4S_DT_F32; }
const char *fp4s_source_path(const fp4s_source *s) { return s ? s->path : ""; }
const char *fp4s_source_name(const fp4s_source *s) { return s ? s->name : ""; }

void fp4s_source_data_range(const fp4s_source *s, size_t row0, size_t nrows, uint64_t *off, uint64_t *len)
{
    *off = 0;
    *len = UINT64_MAX;
    uint64_t base = s->kind == FP4S_SRC_H5 ? fp4s_h5_src_data_offset(s) : s->data_off;
    if (base == UINT64_MAX) return;
    uint64_t rowb = (uint64_t)s->cols * fp4s_dtype_size(s->dt); /* validated at open not to overflow */
    *off = base + (uint64_t)row0 * rowb;
    *len = (uint64_t)nrows * rowb;
}

static const char *src_label(const struct fp4s_source *s, char *buf, size_t n)
{
    if (*s->name) snprintf(buf, n, "%s: %s", s->path, s->name);
    else snprintf(buf, n, "%s", s->path);
    return buf;
}

static int check_range(const struct fp4s_source *s, size_t row0, size_t nrows, const void *out)
{
    char lb[512];
    if (!out && nrows) return fp4s_error_set(FP4S_EINVAL, "%s: read into a NULL buffer", src_label(s, lb, sizeof lb));
    if (row0 > s->rows || nrows > s->rows - row0)
        return fp4s_error_set(FP4S_ERANGE, "%s: rows [%zu, %zu+%zu) outside the %zu rows of the tensor",
                              src_label(s, lb, sizeof lb), row0, row0, nrows, s->rows);
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static void bswap_elems(void *p, size_t n, size_t esz)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++, b += esz)
        for (size_t j = 0; j < esz / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[esz - 1 - j];
            b[esz - 1 - j] = t;
        }
}
#define FIX_ENDIAN(p, n, esz) bswap_elems((p), (n), (esz))
#else
#define FIX_ENDIAN(p, n, esz) ((void)0)
#endif

/* Read nrows rows of raw little-endian bytes from the file at data_off. */
static int fd_read_rows(struct fp4s_source *s, size_t row0, size_t nrows, void *dst)
{
    size_t esz = fp4s_dtype_size(s->dt);
    size_t rowb = s->cols * esz; /* validated at open not to overflow */
    size_t n = nrows * rowb;
    uint64_t off = s->data_off + (uint64_t)row0 * rowb;
    ssize_t r = fp4s_pread_full(s->fd, dst, n, off);
    char lb[512];
    if (r < 0)
        return fp4s_error_set(FP4S_EOPEN, "%s: read failed: %s", src_label(s, lb, sizeof lb), strerror(errno));
    if ((size_t)r != n)
        return fp4s_error_set(FP4S_EFORMAT, "%s: truncated: rows %zu..%zu lie beyond the end of the file",
                              src_label(s, lb, sizeof lb), row0, row0 + nrows - 1);
    return 0;
}

static void convert_row(fp4s_dtype dt, const void *in, float *out, size_t n)
{
    switch (dt) {
    case FP4S_DT_F32:
        memcpy(out, in, n * sizeof(float));
        FIX_ENDIAN(out, n, 4);
        break;
    case FP4S_DT_F64: {
        const unsigned char *b = in;
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, b + 8 * i, 8);
            FIX_ENDIAN(&d, 1, 8);
            out[i] = (float)d;
        }
        break;
    }
    case FP4S_DT_F16:
    case FP4S_DT_BF16: {
        FIX_ENDIAN((void *)in, n, 2);
        if (dt == FP4S_DT_F16) fp4s_fp16_to_f32(in, out, n);
        else fp4s_bf16_to_f32(in, out, n);
        break;
    }
    case FP4S_DT_U8: {
        const unsigned char *b = in;
        for (size_t i = 0; i < n; i++) out[i] = (float)b[i];
        break;
    }
    default:
        break; /* other dtypes are refused at open */
    }
}

int fp4s_source_read(fp4s_source *s, size_t row0, size_t nrows, float *out, size_t ld)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "fp4s_source_read: NULL source");
    int rc = check_range(s, row0, nrows, out);
    if (rc || nrows == 0) return rc;
    if (ld < s->cols) {
        char lb[512];
        return fp4s_error_set(FP4S_EINVAL, "%s: row stride %zu is less than the %zu columns",
                              src_label(s, lb, sizeof lb), ld, s->cols);
    }
    if (s->kind == FP4S_SRC_H5) return fp4s_h5_src_read(s, row0, nrows, out, ld, 0);

    size_t esz = fp4s_dtype_size(s->dt);
    if (s->dt == FP4S_DT_F32 && ld == s->cols) {
        rc = fd_read_rows(s, row0, nrows, out);
        if (!rc) FIX_ENDIAN(out, nrows * s->cols, 4);
        return rc;
    }
    /* Convert through scratch in pieces of at most ~4 MiB of stored bytes. */
    size_t rowb = s->cols * esz;
    size_t per = rowb >= ((size_t)4 << 20) ? 1 : ((size_t)4 << 20) / rowb;
    if (per > nrows) per = nrows;
    rc = fp4s_src_scratch(s, per * rowb);
    if (rc) return rc;
    for (size_t done = 0; done < nrows;) {
        size_t k = nrows - done < per ? nrows - done : per;
        rc = fd_read_rows(s, row0 + done, k, s->scratch);
        if (rc) return rc;
        for (size_t r = 0; r < k; r++)
            convert_row(s->dt, (const unsigned char *)s->scratch + r * rowb, out + (done + r) * ld, s->cols);
        done += k;
    }
    return 0;
}

int fp4s_source_read_raw(fp4s_source *s, size_t row0, size_t nrows, void *out)
{
    if (!s) return fp4s_error_set(FP4S_EINVAL, "fp4s_source_read_raw: NULL source");
    int rc = check_range(s, row0, nrows, out);
    if (rc || nrows == 0) return rc;
    if (s->kind == FP4S_SRC_H5) return fp4s_h5_src_read(s, row0, nrows, out, s->cols, 1);
    return fd_read_rows(s, row0, nrows, out);
}

int fp4s_source_read_all(const char *spec, float **data, size_t *rows, size_t *cols)
{
    if (!data || !rows || !cols) return fp4s_error_set(FP4S_EINVAL, "fp4s_source_read_all: NULL output");
    *data = NULL;
    *rows = *cols = 0;
    fp4s_source *s;
    int rc = fp4s_source_open(spec, &s);
    if (rc) return rc;
    size_t n;
    if (__builtin_mul_overflow(s->rows, s->cols, &n) || n > SIZE_MAX / sizeof(float)) {
        rc = fp4s_error_set(FP4S_ERANGE, "%s: %zu x %zu values do not fit in memory", spec, s->rows, s->cols);
        fp4s_source_close(&s);
        return rc;
    }
    float *d = malloc(n ? n * sizeof(float) : 1);
    if (!d) {
        fp4s_source_close(&s);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory for %zu values", spec, n);
    }
    rc = fp4s_source_read(s, 0, s->rows, d, s->cols);
    if (rc) {
        free(d);
        fp4s_source_close(&s);
        return rc;
    }
    *data = d;
    *rows = s->rows;
    *cols = s->cols;
    fp4s_source_close(&s);
    return 0;
}
