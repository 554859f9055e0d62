/* .safetensors: an 8-byte little-endian header length N, N bytes of JSON
 * ({"NAME": {"dtype": "F32", "shape": [r, c], "data_offsets": [b, e]}, ...,
 * "__metadata__": {...}}), then the byte buffer the offsets index. Every number
 * is checked against the others and the file size, overflow-safe. */
#include "internal.h"
#include "fp4s_config.h"

#include <fp4scope/suggest.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20)

#if FP4S_HAVE_JANSSON

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a, b, c" (sorted, at most 20 names) of the tensors in the header. */
/* The tensors for a message into buf, and with want " did you mean 'x'?"
 * (fp4s_suggest) into dym. */
static void list_names(json_t *root, char *buf, size_t n, const char *want, char *dym, size_t dn)
{
    size_t cnt = 0, k = 0;
    if (dym && dn) dym[0] = '\0';
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) if (strcmp(key, "__metadata__") != 0) cnt++;
    buf[0] = '\0';
    if (cnt == 0) {
        snprintf(buf, n, "(none)");
        return;
    }
    const char **names = malloc(cnt * sizeof *names);
    if (!names) return;
    size_t i = 0;
    json_object_foreach(root, key, v) if (strcmp(key, "__metadata__") != 0) names[i++] = key;
    qsort(names, cnt, sizeof *names, cmp_str);
    for (i = 0; i < cnt && i < 20 && k + 1 < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", names[i]);
    if (cnt > 20 && k + 1 < n) snprintf(buf + k, n - k, ", ... (%zu in all)", cnt);
    if (want && dym && dn) {
        size_t idx[3], ns = fp4s_suggest(want, names, cnt, idx, 3), u = 0;
        for (size_t j = 0; j < ns && u + 1 < dn; j++) {
            int wr = snprintf(dym + u, dn - u, "%s'%s'", j == 0 ? " did you mean " : (j + 1 == ns ? " or " : ", "),
                              names[idx[j]]);
            u = wr > 0 && (size_t)wr < dn - u ? u + (size_t)wr : dn - 1;
        }
        if (ns && u + 2 < dn) snprintf(dym + u, dn - u, "?");
    }
    free(names);
}

static int get_u64(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0) return -1;
    *out = (uint64_t)x;
    return 0;
}

/* Read and parse the JSON header: *root is an object, *hlen its length. */
int fp4s_st_read_header(const char *P, int fd, uint64_t fsize, json_t **root, uint64_t *hlen_out)
{
    *root = NULL;
    if (fsize < 8)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %" PRIu64 " bytes is too short for a safetensors file "
                              "(and not .npy or HDF5)", P, fsize);
    unsigned char lb[8];
    if (fp4s_pread_full(fd, lb, 8, 0) != 8)
        return fp4s_error_set(FP4S_EOPEN, "%s: cannot read: %s", P, strerror(errno));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lb[i];
    if (hlen > ST_MAX_HEADER && hlen <= fsize - 8)
        return fp4s_error_set(FP4S_EFORMAT, "%s: safetensors header length %" PRIu64 " exceeds the "
                              "limit of %" PRIu64 " bytes (100 MiB)", P, hlen, ST_MAX_HEADER);
    if (hlen == 0 || hlen > fsize - 8)
        return fp4s_error_set(FP4S_EFORMAT, "%s: safetensors header length %" PRIu64 " does not fit the "
                              "%" PRIu64 "-byte file (not a safetensors, .npy or HDF5 file?)", P, hlen, fsize);
    char *hb = malloc((size_t)hlen);
    if (!hb) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory for the header", P);
    if (fp4s_pread_full(fd, hb, (size_t)hlen, 8) != (ssize_t)hlen) {
        free(hb);
        return fp4s_error_set(FP4S_EOPEN, "%s: cannot read the header: %s", P, strerror(errno));
    }
    if (hb[0] != '{') {
        free(hb);
        return fp4s_error_set(FP4S_EFORMAT, "%s: safetensors header does not start with '{' "
                              "(not a safetensors, .npy or HDF5 file?)", P);
    }
    json_error_t jerr;
    *root = json_loadb(hb, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    free(hb);
    if (!*root)
        return fp4s_error_set(FP4S_EFORMAT, "%s: safetensors header is not valid JSON: %s (at byte %d)",
                              P, jerr.text, jerr.position);
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return fp4s_error_set(FP4S_EFORMAT, "%s: safetensors header is not a JSON object", P);
    }
    *hlen_out = hlen;
    return 0;
}

int fp4s_st_src_open(struct fp4s_source *s, uint64_t fsize)
{
    const char *P = s->path, *N = s->name;
    json_t *root;
    uint64_t hlen;
    int hrc = fp4s_st_read_header(P, s->fd, fsize, &root, &hlen);
    if (hrc) return hrc;
    int rc = 0;
    char names[1024];
    json_t *e = NULL;
    if (!*N) {
        list_names(root, names, sizeof names, NULL, NULL, 0);
        rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: name a tensor as %s:NAME; tensors: %s", P, P, names);
        goto out;
    }
    e = strcmp(N, "__metadata__") == 0 ? NULL : json_object_get(root, N);
    if (!e) {
        char dym[1200];
        list_names(root, names, sizeof names, N, dym, sizeof dym);
        rc = fp4s_error_set(FP4S_ENOTFOUND, "%s: %s: tensor not found;%s tensors: %s", P, N, dym, names);
        goto out;
    }
    if (!json_is_object(e)) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: header entry is not an object", P, N);
        goto out;
    }
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo)) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: header entry needs string 'dtype', array 'shape' and array 'data_offsets'", P, N);
        goto out;
    }
    const char *dts = json_string_value(jd);
    if (strcmp(dts, "F32") == 0) s->dt = FP4S_DT_F32;
    else if (strcmp(dts, "F16") == 0) s->dt = FP4S_DT_F16;
    else if (strcmp(dts, "BF16") == 0) s->dt = FP4S_DT_BF16;
    else if (strcmp(dts, "F64") == 0) s->dt = FP4S_DT_F64;
    else if (strcmp(dts, "U8") == 0) s->dt = FP4S_DT_U8;
    else {
        rc = fp4s_error_set(FP4S_EDTYPE, "%s: %s: dtype %s is not supported; expected F32, F16, BF16, F64 or U8", P, N, dts);
        goto out;
    }
    size_t nd = json_array_size(js);
    if (nd == 0 || nd > FP4S_MAX_RANK) {
        rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: shape has rank %zu, expected 1 to %d", P, N, nd, FP4S_MAX_RANK);
        goto out;
    }
    for (size_t i = 0; i < nd; i++)
        if (get_u64(json_array_get(js, i), &s->dims[i])) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: shape[%zu] is not a non-negative integer", P, N, i);
            goto out;
        }
    s->rank = (int)nd;
    char what[512], sb[512];
    snprintf(what, sizeof what, "%s: %s", P, N);
    fp4s_dims_str(s->rank, s->dims, sb, sizeof sb);
    uint64_t r, c, cnt, bytes;
    rc = fp4s_flatten_dims(what, s->rank, s->dims, &r, &c);
    if (rc) goto out;
    if (__builtin_mul_overflow(r, c, &cnt) ||
        __builtin_mul_overflow(cnt, (uint64_t)fp4s_dtype_size(s->dt), &bytes) ||
        cnt > (uint64_t)SIZE_MAX / sizeof(float)) {
        rc = fp4s_error_set(FP4S_ERANGE, "%s: %s: shape %s overflows", P, N, sb);
        goto out;
    }
    uint64_t b, en;
    if (json_array_size(jo) != 2 || get_u64(json_array_get(jo, 0), &b) || get_u64(json_array_get(jo, 1), &en)) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets is not a pair of non-negative integers", P, N);
        goto out;
    }
    uint64_t buflen = fsize - 8 - hlen;
    if (b > en) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin", P, N, b, en);
        goto out;
    }
    if (en > buflen) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the %" PRIu64
                            "-byte data buffer (file truncated?)", P, N, b, en, buflen);
        goto out;
    }
    if (en - b != bytes) {
        rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets span %" PRIu64 " bytes but shape %s of %s needs %"
                            PRIu64, P, N, en - b, sb, dts, bytes);
        goto out;
    }
    if (cnt == 0) {
        rc = fp4s_error_set(FP4S_EEMPTY, "%s: %s: tensor is empty (shape %s)", P, N, sb);
        goto out;
    }
    s->rows = (size_t)r;
    s->cols = (size_t)c;
    s->data_off = 8 + hlen + b;
out:
    json_decref(root);
    return rc;
}

int fp4s_safetensors_names(const char *path, char ***names, size_t *n)
{
    if (!names || !n) return fp4s_error_set(FP4S_EINVAL, "fp4s_safetensors_names: NULL output");
    *names = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fp4s_error_set(FP4S_EOPEN, "%s: not a regular file", path);
    }
    json_t *root;
    uint64_t hlen;
    int rc = fp4s_st_read_header(path, fd, (uint64_t)st.st_size, &root, &hlen);
    close(fd);
    if (rc) return rc;
    size_t cnt = json_object_size(root), k = 0;
    char **v = calloc(cnt + 1, sizeof *v);
    if (!v) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (rc || strcmp(key, "__metadata__") == 0) continue;
        if (!(v[k] = strdup(key))) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", path);
        else k++;
    }
    json_decref(root);
    if (rc) {
        fp4s_names_free(v, k);
        return rc;
    }
    qsort(v, k, sizeof *v, cmp_str);
    *names = v;
    *n = k;
    return 0;
}

#else
int fp4s_safetensors_names(const char *path, char ***names, size_t *n)
{
    if (names) *names = NULL;
    if (n) *n = 0;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading .safetensors needs jansson (fp4scope was built with -Djson=disabled or without libjansson-dev)",
                          path);
}

int fp4s_st_src_open(struct fp4s_source *s, uint64_t fsize)
{
    (void)fsize;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading .safetensors needs jansson (fp4scope was built with -Djson=disabled or without libjansson-dev)",
                          s->path);
}
#endif

void fp4s_names_free(char **names, size_t n)
{
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}
