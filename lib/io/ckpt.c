/* Quantized checkpoints (ckpt.h): the safetensors files of a checkpoint, the
 * quantized weights found by their tensors' names, their codes and scales,
 * their dequantization with each producer's arithmetic, and the comparison
 * with what a profile makes of the trainer's weights. */
#include "internal.h"
#include "fp4s_config.h"

#include <fp4scope/ckpt.h>
#include <fp4scope/codec.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#if FP4S_HAVE_JANSSON
#include <jansson.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fp4s_ckpt_layout_name(fp4s_ckpt_layout l)
{
    switch (l) {
    case FP4S_CKPT_MODELOPT_NVFP4: return "modelopt-nvfp4";
    case FP4S_CKPT_CT_NVFP4: return "compressed-tensors-nvfp4";
    case FP4S_CKPT_GPTOSS_MXFP4: return "gpt-oss-mxfp4";
    case FP4S_CKPT_CT_MXFP4: return "compressed-tensors-mxfp4";
    }
    return "?";
}

#if FP4S_HAVE_JANSSON

/* a tensor as stored, with where its bytes are */
typedef struct stensor {
    fp4s_ckpt_tensor pub;
    int rank;
    uint64_t dims[FP4S_MAX_RANK];
    int file;           /* index into c->files */
    uint64_t off, len;  /* absolute byte offset in the file, byte length */
} stensor;

/* a weight and its per-expert global scales */
typedef struct sweight {
    fp4s_ckpt_weight pub;
    const stensor *codes, *scales;
    double *gs;         /* decode scale per expert (NVFP4), NULL for MXFP4 */
    size_t ngs;
    bool gate_packed;   /* MXFP4 gpt-oss: codes [.., N, G, 16] */
} sweight;

struct fp4s_ckpt {
    char *path;
    char **files;
    int *fds;
    size_t nfiles;
    stensor *t;
    size_t nt;
    sweight *w;
    size_t nw;
};

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const stensor *)a)->pub.name, ((const stensor *)b)->pub.name);
}

static int cmp_weight(const void *a, const void *b)
{
    return strcmp(((const sweight *)a)->pub.name, ((const sweight *)b)->pub.name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Bytes per element of a safetensors dtype; 0 when unknown; F4 packs two
 * elements a byte (*half set). */
static size_t dtype_bytes(const char *d, bool *half)
{
    *half = false;
    static const struct {
        const char *n;
        size_t b;
    } tab[] = {{"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
               {"F8_E4M3FNUZ", 1}, {"F8_E5M2FNUZ", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
               {"I32", 4}, {"U32", 4}, {"F32", 4}, {"I64", 8}, {"U64", 8}, {"F64", 8}, {"C64", 8}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(tab[i].n, d) == 0) return tab[i].b;
    if (strcmp(d, "F4") == 0) {
        *half = true;
        return 1;
    }
    return 0;
}

static const stensor *find_t(const fp4s_ckpt *c, const char *name)
{
    size_t lo = 0, hi = c->nt;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->t[mid].pub.name, name);
        if (r == 0) return &c->t[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static uint64_t numel(const stensor *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

static void shape_str(const stensor *t, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < t->rank && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%" PRIu64, i ? ", " : "", t->dims[i]);
    if (k < n) snprintf(b + k, n - k, "]");
}

/* Add the tensors of one file's header. */
static int add_file(fp4s_ckpt *c, int fi)
{
    const char *P = c->files[fi];
    int fd = c->fds[fi];
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return fp4s_error_set(FP4S_EOPEN, "%s: not a regular file", P);
    json_t *root;
    uint64_t hlen;
    int rc = fp4s_st_read_header(P, fd, (uint64_t)st.st_size, &root, &hlen);
    if (rc) return rc;
    uint64_t buflen = (uint64_t)st.st_size - 8 - hlen;
    size_t cnt = json_object_size(root);
    stensor *nt = realloc(c->t, (c->nt + cnt + 1) * sizeof *nt);
    if (!nt) {
        json_decref(root);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", P);
    }
    c->t = nt;
    const char *key;
    json_t *e;
    json_object_foreach(root, key, e) {
        if (strcmp(key, "__metadata__") == 0) continue;
        stensor *t = &c->t[c->nt];
        memset(t, 0, sizeof *t);
        if (strlen(key) >= sizeof t->pub.name) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: tensor name '%.60s...' longer than %zu bytes", P, key,
                                sizeof t->pub.name - 1);
            break;
        }
        strcpy(t->pub.name, key);
        json_t *jd = json_is_object(e) ? json_object_get(e, "dtype") : NULL;
        json_t *js = json_is_object(e) ? json_object_get(e, "shape") : NULL;
        json_t *jo = json_is_object(e) ? json_object_get(e, "data_offsets") : NULL;
        if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: header entry needs string 'dtype', array 'shape' and a "
                                "pair 'data_offsets'", P, key);
            break;
        }
        snprintf(t->pub.dtype, sizeof t->pub.dtype, "%s", json_string_value(jd));
        size_t nd = json_array_size(js);
        if (nd > FP4S_MAX_RANK) {
            rc = fp4s_error_set(FP4S_ESHAPE, "%s: %s: rank %zu, at most %d", P, key, nd, FP4S_MAX_RANK);
            break;
        }
        t->rank = (int)nd;
        uint64_t n = 1;
        bool over = false;
        for (size_t i = 0; i < nd; i++) {
            json_t *v = json_array_get(js, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: shape[%zu] is not a non-negative integer", P, key, i);
                break;
            }
            t->dims[i] = (uint64_t)json_integer_value(v);
            over |= __builtin_mul_overflow(n, t->dims[i], &n);
        }
        if (rc) break;
        json_t *j0 = json_array_get(jo, 0), *j1 = json_array_get(jo, 1);
        if (!json_is_integer(j0) || !json_is_integer(j1) || json_integer_value(j0) < 0 ||
            json_integer_value(j1) < json_integer_value(j0)) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets is not an increasing pair of non-negative "
                                "integers", P, key);
            break;
        }
        uint64_t b = (uint64_t)json_integer_value(j0), en = (uint64_t)json_integer_value(j1);
        if (en > buflen) {
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] run past the %"
                                PRIu64 "-byte data buffer (file truncated?)", P, key, b, en, buflen);
            break;
        }
        bool half;
        size_t eb = dtype_bytes(t->pub.dtype, &half);
        uint64_t need = 0;
        if (eb && !over) {
            need = half ? (n + 1) / 2 : n;
            over = __builtin_mul_overflow(need, (uint64_t)eb, &need);
        }
        if (over) {
            rc = fp4s_error_set(FP4S_ERANGE, "%s: %s: shape overflows", P, key);
            break;
        }
        if (eb && en - b != need) {
            char sb[160];
            shape_str(t, sb, sizeof sb);
            rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: data_offsets span %" PRIu64 " bytes but shape %s of %s "
                                "needs %" PRIu64, P, key, en - b, sb, t->pub.dtype, need);
            break;
        }
        t->pub.rank = t->rank;
        for (int i = 0; i < t->rank && i < 8; i++) t->pub.dims[i] = t->dims[i];
        t->file = fi;
        t->off = 8 + hlen + b;
        t->len = en - b;
        c->nt++;
    }
    json_decref(root);
    return rc;
}

/* The files of a directory checkpoint: model.safetensors.index.json's, or every *.safetensors. */
static int dir_files(fp4s_ckpt *c, const char *dir, json_t **index)
{
    *index = NULL;
    char ip[4096];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    if (access(ip, F_OK) == 0) {
        json_error_t je;
        json_t *j = json_load_file(ip, JSON_REJECT_DUPLICATES, &je);
        if (!j) return fp4s_error_set(FP4S_EFORMAT, "%s: not valid JSON: %s (line %d)", ip, je.text, je.line);
        json_t *wm = json_object_get(j, "weight_map");
        if (!json_is_object(wm)) {
            json_decref(j);
            return fp4s_error_set(FP4S_EFORMAT, "%s: no object 'weight_map'", ip);
        }
        const char *k;
        json_t *v;
        json_object_foreach(wm, k, v) {
            if (!json_is_string(v) || strchr(json_string_value(v), '/')) {
                json_decref(j);
                return fp4s_error_set(FP4S_EFORMAT, "%s: weight_map: %s: the file must be a plain file name", ip, k);
            }
            bool have = false;
            for (size_t i = 0; i < c->nfiles && !have; i++)
                have = strcmp(strrchr(c->files[i], '/') + 1, json_string_value(v)) == 0;
            if (have) continue;
            char **nf = realloc(c->files, (c->nfiles + 1) * sizeof *nf);
            if (!nf) {
                json_decref(j);
                return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", ip);
            }
            c->files = nf;
            size_t l = strlen(dir) + strlen(json_string_value(v)) + 2;
            if (!(c->files[c->nfiles] = malloc(l))) {
                json_decref(j);
                return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", ip);
            }
            snprintf(c->files[c->nfiles++], l, "%s/%s", dir, json_string_value(v));
        }
        *index = j;
    } else {
        DIR *d = opendir(dir);
        if (!d) return fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", dir, strerror(errno));
        struct dirent *de;
        int rc = 0;
        while ((de = readdir(d)) && !rc) {
            size_t l = strlen(de->d_name);
            if (l < 12 || strcmp(de->d_name + l - 12, ".safetensors")) continue;
            char **nf = realloc(c->files, (c->nfiles + 1) * sizeof *nf);
            if (!nf || !(nf[c->nfiles] = malloc(strlen(dir) + l + 2))) {
                if (nf) c->files = nf;
                rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", dir);
                break;
            }
            c->files = nf;
            snprintf(c->files[c->nfiles++], strlen(dir) + l + 2, "%s/%s", dir, de->d_name);
        }
        closedir(d);
        if (rc) return rc;
    }
    if (c->nfiles == 0)
        return fp4s_error_set(FP4S_ENOTFOUND, "%s: no .safetensors file in the directory", dir);
    qsort(c->files, c->nfiles, sizeof *c->files, cmp_str);
    return 0;
}

/* ---- finding the quantized weights ------------------------------------------------------- */
static bool ends_with(const char *s, const char *suf, size_t *plen)
{
    size_t l = strlen(s), k = strlen(suf);
    if (l <= k || strcmp(s + l - k, suf)) return false;
    *plen = l - k;
    return true;
}

static bool dt_is(const stensor *t, const char *a, const char *b)
{
    return strcmp(t->pub.dtype, a) == 0 || (b && strcmp(t->pub.dtype, b) == 0);
}

/* A scalar-like float tensor (1 element, or one per expert) read as doubles. */
static int read_scalars(fp4s_ckpt *c, const stensor *t, size_t experts, bool recip, const char *what,
                        double **out, size_t *n)
{
    const char *P = c->files[t->file];
    uint64_t cnt = numel(t);
    if (!dt_is(t, "F32", "BF16") && !dt_is(t, "F16", "F64"))
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: %s must be F32 (BF16, F16 or F64 accepted), found %s", P,
                              t->pub.name, what, t->pub.dtype);
    if (cnt != 1 && cnt != experts) {
        char sb[160];
        shape_str(t, sb, sizeof sb);
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s: %s must hold one value%s, found shape %s", P, t->pub.name,
                              what, experts > 1 ? " or one per expert" : "", sb);
    }
    unsigned char buf[8];
    double *v = malloc((size_t)cnt * sizeof *v);
    if (!v) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", P);
    size_t eb = (size_t)(t->len / cnt);
    for (uint64_t i = 0; i < cnt; i++) {
        if (fp4s_pread_full(c->fds[t->file], buf, eb, t->off + i * eb) != (ssize_t)eb) {
            free(v);
            return fp4s_error_set(FP4S_EOPEN, "%s: %s: cannot read: %s", P, t->pub.name, strerror(errno));
        }
        float f;
        if (eb == 4) memcpy(&f, buf, 4);
        else if (eb == 8) {
            double d;
            memcpy(&d, buf, 8);
            f = (float)d;
        } else {
            uint16_t h = (uint16_t)(buf[0] | buf[1] << 8);
            if (dt_is(t, "BF16", NULL)) f = fp4s_bf16_decode(h);
            else fp4s_fp16_to_f32(&h, &f, 1);
        }
        if (!isfinite(f) || !(f > 0)) {
            free(v);
            return fp4s_error_set(FP4S_EFORMAT, "%s: %s: %s is %g, not a finite positive number", P, t->pub.name,
                                  what, (double)f);
        }
        /* the decode scale as the producers compute it: a float32 reciprocal for the encode convention */
        v[i] = recip ? (double)(1.0f / f) : (double)f;
    }
    *out = v;
    *n = (size_t)cnt;
    return 0;
}

/* Check the shapes of codes [..., N, K/2] and scales [..., N, K/block] (or
 * gpt-oss blocks [..., N, G, 16] and scales [..., N, G]) and fill w's sizes. */
static int weight_shapes(fp4s_ckpt *c, sweight *w, uint32_t block)
{
    const stensor *q = w->codes, *s = w->scales;
    const char *P = c->files[q->file];
    char qs[160], ss[160];
    shape_str(q, qs, sizeof qs);
    shape_str(s, ss, sizeof ss);
    int lead = w->gate_packed ? q->rank - 3 : q->rank - 2;
    bool ok = lead >= 0 && s->rank == lead + 2;
    uint64_t n = 0, k = 0;
    if (ok) {
        for (int i = 0; i < lead; i++) ok &= q->dims[i] == s->dims[i];
        n = q->dims[lead];
        ok &= s->dims[lead] == n;
        if (w->gate_packed) {
            ok &= q->dims[lead + 2] == 16 && q->dims[lead + 1] == s->dims[lead + 1];
            k = q->dims[lead + 1] * 32;
        } else {
            k = q->dims[lead + 1] * 2;
            ok &= s->dims[lead + 1] * block == k;
        }
    }
    if (!ok)
        return fp4s_error_set(FP4S_EFORMAT, "%s: %s %s and %s %s do not fit: %s", P, q->pub.name, qs, s->pub.name, ss,
                              w->gate_packed ? "blocks [..., N, K/32, 16] need scales [..., N, K/32]"
                                             : block == 16 ? "codes [..., N, K/2] need block scales [..., N, K/16]"
                                                           : "codes [..., N, K/2] need block scales [..., N, K/32]");
    if (n == 0 || k == 0)
        return fp4s_error_set(FP4S_EEMPTY, "%s: %s: empty weight %s", P, q->pub.name, qs);
    size_t e = 1;
    for (int i = 0; i < lead; i++) e *= (size_t)q->dims[i];
    w->pub.experts = e;
    w->pub.rows = (size_t)n;
    w->pub.cols = (size_t)k;
    return 0;
}

static const stensor *need(fp4s_ckpt *c, const stensor *from, const char *base, size_t blen, const char *suffix,
                           const char *why, int *rc)
{
    char nm[600];
    snprintf(nm, sizeof nm, "%.*s%s", (int)blen, base, suffix);
    const stensor *t = find_t(c, nm);
    if (!t && !*rc)
        *rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s is missing (%s)", c->files[from->file], nm, why);
    return t;
}

static int add_weight(fp4s_ckpt *c, sweight *w)
{
    sweight *nw = realloc(c->w, (c->nw + 1) * sizeof *nw);
    if (!nw) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    c->w = nw;
    c->w[c->nw++] = *w;
    return 0;
}

static void set_names(sweight *w, const char *base, size_t blen)
{
    snprintf(w->pub.name, sizeof w->pub.name, "%.*s", (int)blen, base);
    snprintf(w->pub.codes, sizeof w->pub.codes, "%s", w->codes->pub.name);
    snprintf(w->pub.scales, sizeof w->pub.scales, "%s", w->scales->pub.name);
}

static int find_weights(fp4s_ckpt *c)
{
    int rc = 0;
    for (size_t i = 0; i < c->nt && !rc; i++) {
        const stensor *t = &c->t[i];
        const char *nm = t->pub.name;
        const char *P = c->files[t->file];
        size_t bl;
        sweight w;
        memset(&w, 0, sizeof w);
        if (ends_with(nm, ".weight_packed", &bl)) {
            /* compressed-tensors: NVFP4 with E4M3 scales and a global scale, MXFP4 with E8M0 scales */
            w.codes = t;
            w.scales = need(c, t, nm, bl, ".weight_scale", "compressed-tensors packs the block scales there", &rc);
            if (rc) break;
            if (!dt_is(t, "U8", "I8")) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: packed codes must be U8, found %s", P, nm, t->pub.dtype);
                break;
            }
            bool nv = dt_is(w.scales, "F8_E4M3", NULL);
            if (!nv && !dt_is(w.scales, "U8", "F8_E8M0")) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: block scales must be F8_E4M3 (NVFP4) or U8/F8_E8M0 (MXFP4), "
                                    "found %s", P, w.scales->pub.name, w.scales->pub.dtype);
                break;
            }
            w.pub.layout = nv ? FP4S_CKPT_CT_NVFP4 : FP4S_CKPT_CT_MXFP4;
            w.pub.format = nv ? FP4S_NVFP4 : FP4S_MXFP4;
            set_names(&w, nm, bl);
            if ((rc = weight_shapes(c, &w, nv ? 16 : 32))) break;
            if (nv) {
                const stensor *g = need(c, t, nm, bl, ".weight_global_scale",
                                        "NVFP4 needs the per-tensor global scale", &rc);
                if (rc) break;
                snprintf(w.pub.gscale, sizeof w.pub.gscale, "%s", g->pub.name);
                if ((rc = read_scalars(c, g, w.pub.experts, true, "the global scale", &w.gs, &w.ngs))) break;
            }
            char inm[600];
            snprintf(inm, sizeof inm, "%.*s.input_global_scale", (int)bl, nm);
            const stensor *is = find_t(c, inm);
            if (is) {
                double *iv;
                size_t ni;
                if ((rc = read_scalars(c, is, w.pub.experts, true, "the input global scale", &iv, &ni))) {
                    free(w.gs);
                    break;
                }
                w.pub.input_scale = iv[0];
                free(iv);
                snprintf(w.pub.iscale, sizeof w.pub.iscale, "%s", is->pub.name);
            }
        } else if (ends_with(nm, "_blocks", &bl) || ends_with(nm, ".blocks", &bl)) {
            bool dot = nm[bl] == '.';
            w.codes = t;
            w.gate_packed = true;
            w.scales = need(c, t, nm, bl, dot ? ".scales" : "_scales", "MXFP4 blocks need their E8M0 scales", &rc);
            if (rc) break;
            if (!dt_is(t, "U8", "I8") || !dt_is(w.scales, "U8", "F8_E8M0")) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s (%s) and %s (%s): MXFP4 blocks must be U8 and scales U8 or "
                                    "F8_E8M0", P, nm, t->pub.dtype, w.scales->pub.name, w.scales->pub.dtype);
                break;
            }
            w.pub.layout = FP4S_CKPT_GPTOSS_MXFP4;
            w.pub.format = FP4S_MXFP4;
            set_names(&w, nm, bl);
            if ((rc = weight_shapes(c, &w, 32))) break;
        } else if (ends_with(nm, ".weight_scale", &bl)) {
            /* ModelOpt: P.weight U8 codes with F8_E4M3 block scales and a weight_scale_2 */
            char wn[600];
            snprintf(wn, sizeof wn, "%.*s.weight", (int)bl, nm);
            const stensor *q = find_t(c, wn);
            snprintf(wn, sizeof wn, "%.*s.weight_packed", (int)bl, nm);
            if (find_t(c, wn)) continue; /* compressed-tensors, above */
            snprintf(wn, sizeof wn, "%.*s.weight_scale_2", (int)bl, nm);
            const stensor *g = find_t(c, wn);
            bool fp4 = q && dt_is(q, "U8", NULL) && dt_is(t, "F8_E4M3", "U8");
            if (!fp4 && !g) continue; /* FP8 and other schemes: not FP4 */
            if (!q) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %.*s.weight is missing (its block scales %s are there)", P,
                                    (int)bl, nm, nm);
                break;
            }
            if (!dt_is(q, "U8", NULL)) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: NVFP4 codes must be U8 (two a byte), found %s", c->files[q->file],
                                    q->pub.name, q->pub.dtype);
                break;
            }
            if (!dt_is(t, "F8_E4M3", "U8")) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s: NVFP4 block scales must be F8_E4M3, found %s", P, nm,
                                    t->pub.dtype);
                break;
            }
            if (!g) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s is missing (NVFP4 needs the per-tensor scale beside %s)", P,
                                    wn, nm);
                break;
            }
            w.codes = q;
            w.scales = t;
            w.pub.layout = FP4S_CKPT_MODELOPT_NVFP4;
            w.pub.format = FP4S_NVFP4;
            set_names(&w, nm, bl);
            if ((rc = weight_shapes(c, &w, 16))) break;
            snprintf(w.pub.gscale, sizeof w.pub.gscale, "%s", g->pub.name);
            if ((rc = read_scalars(c, g, w.pub.experts, false, "weight_scale_2", &w.gs, &w.ngs))) break;
            snprintf(wn, sizeof wn, "%.*s.input_scale", (int)bl, nm);
            const stensor *is = find_t(c, wn);
            if (is) {
                double *iv;
                size_t ni;
                if ((rc = read_scalars(c, is, w.pub.experts, false, "input_scale", &iv, &ni))) {
                    free(w.gs);
                    break;
                }
                w.pub.input_scale = iv[0];
                free(iv);
                snprintf(w.pub.iscale, sizeof w.pub.iscale, "%s", is->pub.name);
            }
        } else if (ends_with(nm, ".weight_scale_2", &bl)) {
            char wn[600];
            snprintf(wn, sizeof wn, "%.*s.weight_scale", (int)bl, nm);
            if (!find_t(c, wn))
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s is missing (the per-tensor scale %s is there: NVFP4 block "
                                    "scales expected)", P, wn, nm);
            continue;
        } else if (ends_with(nm, "_scales", &bl) || ends_with(nm, ".scales", &bl)) {
            char wn[600];
            snprintf(wn, sizeof wn, "%.*s%s", (int)bl, nm, nm[bl] == '.' ? ".blocks" : "_blocks");
            if (!find_t(c, wn) && dt_is(t, "U8", "F8_E8M0"))
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: %s is missing (its E8M0 scales %s are there)", P, wn, nm);
            continue;
        } else {
            continue;
        }
        if (w.gs) {
            w.pub.global_scale = w.gs[0];
            const stensor *g = find_t(c, w.pub.gscale);
            double *raw;
            size_t nr;
            if (g && read_scalars(c, g, w.pub.experts, false, "the global scale", &raw, &nr) == 0) {
                w.pub.global_stored = raw[0];
                free(raw);
            }
        }
        if (!rc) rc = add_weight(c, &w);
        if (rc) free(w.gs);
    }
    if (!rc && c->nw) qsort(c->w, c->nw, sizeof *c->w, cmp_weight); /* c->w is NULL when nw is 0 */
    return rc;
}

int fp4s_ckpt_open(const char *path, fp4s_ckpt **out)
{
    if (!path || !out) return fp4s_error_set(FP4S_EINVAL, "fp4s_ckpt_open: NULL argument");
    *out = NULL;
    fp4s_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    }
    struct stat st;
    int rc = 0;
    json_t *index = NULL;
    if (stat(path, &st) != 0) {
        rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rc = dir_files(c, path, &index);
    } else {
        c->files = malloc(sizeof *c->files);
        if (!c->files || !(c->files[0] = strdup(path))) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
        else c->nfiles = 1;
    }
    if (!rc) {
        c->fds = malloc((c->nfiles ? c->nfiles : 1) * sizeof *c->fds);
        if (!c->fds) rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < c->nfiles; i++) c->fds[i] = -1;
        for (size_t i = 0; !rc && i < c->nfiles; i++) {
            c->fds[i] = open(c->files[i], O_RDONLY | O_CLOEXEC);
            if (c->fds[i] < 0) rc = fp4s_error_set(FP4S_EOPEN, "%s: cannot open: %s", c->files[i], strerror(errno));
            else rc = add_file(c, (int)i);
        }
    }
    if (!rc) {
        qsort(c->t, c->nt, sizeof *c->t, cmp_tensor);
        for (size_t i = 1; i < c->nt && !rc; i++)
            if (strcmp(c->t[i].pub.name, c->t[i - 1].pub.name) == 0)
                rc = fp4s_error_set(FP4S_EFORMAT, "%s: tensor %s is in both %s and %s", path, c->t[i].pub.name,
                                    c->files[c->t[i - 1].file], c->files[c->t[i].file]);
        for (size_t i = 0; i < c->nt; i++) c->t[i].pub.file = c->files[c->t[i].file];
    }
    if (!rc && index) {
        /* every name the index maps is in the file it names */
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(index, "weight_map"), k, v) {
            const stensor *t = find_t(c, k);
            const char *f = t ? strrchr(c->files[t->file], '/') + 1 : NULL;
            if (!t || strcmp(f, json_string_value(v))) {
                rc = fp4s_error_set(FP4S_EFORMAT, "%s/model.safetensors.index.json: maps %s to %s, but %s", path, k,
                                    json_string_value(v), t ? "another file holds it" : "that file lacks it");
                break;
            }
        }
    }
    json_decref(index);
    if (!rc) rc = find_weights(c);
    if (rc) {
        fp4s_ckpt_close(&c);
        return rc;
    }
    *out = c;
    return 0;
}

void fp4s_ckpt_close(fp4s_ckpt **cp)
{
    if (!cp || !*cp) return;
    fp4s_ckpt *c = *cp;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->fds && c->fds[i] >= 0) close(c->fds[i]);
        free(c->files[i]);
    }
    for (size_t i = 0; i < c->nw; i++) free(c->w[i].gs);
    free(c->files);
    free(c->fds);
    free(c->t);
    free(c->w);
    free(c->path);
    free(c);
    *cp = NULL;
}

size_t fp4s_ckpt_nweights(const fp4s_ckpt *c) { return c ? c->nw : 0; }
const fp4s_ckpt_weight *fp4s_ckpt_weight_at(const fp4s_ckpt *c, size_t i)
{
    return c && i < c->nw ? &c->w[i].pub : NULL;
}
const fp4s_ckpt_weight *fp4s_ckpt_weight_find(const fp4s_ckpt *c, const char *name)
{
    if (!c || !name) return NULL;
    for (size_t i = 0; i < c->nw; i++)
        if (strcmp(c->w[i].pub.name, name) == 0) return &c->w[i].pub;
    return NULL;
}
size_t fp4s_ckpt_ntensors(const fp4s_ckpt *c) { return c ? c->nt : 0; }
const fp4s_ckpt_tensor *fp4s_ckpt_tensor_at(const fp4s_ckpt *c, size_t i)
{
    return c && i < c->nt ? &c->t[i].pub : NULL;
}
const fp4s_ckpt_tensor *fp4s_ckpt_tensor_find(const fp4s_ckpt *c, const char *name)
{
    const stensor *t = c && name ? find_t(c, name) : NULL;
    return t ? &t->pub : NULL;
}

static const sweight *priv(const fp4s_ckpt *c, const fp4s_ckpt_weight *w)
{
    for (size_t i = 0; c && i < c->nw; i++)
        if (&c->w[i].pub == w) return &c->w[i];
    return NULL;
}

double fp4s_ckpt_global_scale(const fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e)
{
    const sweight *s = priv(c, w);
    if (!s || !s->gs) return 0;
    return s->ngs == 1 ? s->gs[0] : s->gs[e < s->ngs ? e : 0];
}

int fp4s_ckpt_read_codes(fp4s_ckpt *c, const fp4s_ckpt_weight *wp, size_t e, uint8_t *codes, uint8_t *scales)
{
    const sweight *w = priv(c, wp);
    if (!w) return fp4s_error_set(FP4S_EINVAL, "fp4s_ckpt_read_codes: not a weight of this checkpoint");
    if (e >= wp->experts)
        return fp4s_error_set(FP4S_ERANGE, "%s: expert %zu of %zu", wp->name, e, wp->experts);
    size_t n = wp->rows, k = wp->cols, block = wp->format == FP4S_NVFP4 ? 16 : 32;
    size_t nb = n * (k / 2), ns = n * (k / block);
    if (codes) {
        uint8_t *p = malloc(nb ? nb : 1);
        if (!p) return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", wp->name);
        const stensor *q = w->codes;
        if (fp4s_pread_full(c->fds[q->file], p, nb, q->off + (uint64_t)e * nb) != (ssize_t)nb) {
            free(p);
            return fp4s_error_set(FP4S_EOPEN, "%s: %s: cannot read: %s", c->files[q->file], q->pub.name,
                                  strerror(errno));
        }
        /* element 2i in the low nibble, 2i+1 in the high one (every layout) */
        for (size_t i = 0; i < nb; i++) {
            codes[2 * i] = p[i] & 0x0F;
            codes[2 * i + 1] = p[i] >> 4;
        }
        free(p);
    }
    if (scales) {
        const stensor *s = w->scales;
        if (fp4s_pread_full(c->fds[s->file], scales, ns, s->off + (uint64_t)e * ns) != (ssize_t)ns)
            return fp4s_error_set(FP4S_EOPEN, "%s: %s: cannot read: %s", c->files[s->file], s->pub.name,
                                  strerror(errno));
    }
    return 0;
}

static const float e2m1_val[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

int fp4s_ckpt_dequant(fp4s_ckpt *c, const fp4s_ckpt_weight *wp, size_t e, float *out)
{
    const sweight *w = priv(c, wp);
    if (!w || !out) return fp4s_error_set(FP4S_EINVAL, "fp4s_ckpt_dequant: bad argument");
    size_t n = wp->rows, k = wp->cols, block = wp->format == FP4S_NVFP4 ? 16 : 32, kb = k / block;
    uint8_t *q = malloc(n * k), *s = malloc(n * kb);
    if (!q || !s) {
        free(q);
        free(s);
        return fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", wp->name);
    }
    int rc = fp4s_ckpt_read_codes(c, wp, e, q, s);
    if (!rc) {
        float g = (float)fp4s_ckpt_global_scale(c, wp, e);
        const stensor *gt = wp->gscale[0] ? find_t(c, wp->gscale) : NULL;
        /* compressed-tensors divides by its stored encode scale */
        float genc = 0;
        if (wp->layout == FP4S_CKPT_CT_NVFP4 && gt) {
            double *raw;
            size_t nr;
            rc = read_scalars(c, gt, wp->experts, false, "the global scale", &raw, &nr);
            if (!rc) {
                genc = (float)raw[nr == 1 ? 0 : e];
                free(raw);
            }
        }
        for (size_t r = 0; !rc && r < n; r++)
            for (size_t b = 0; b < kb; b++) {
                uint8_t sc = s[r * kb + b];
                float t;
                switch (wp->layout) {
                case FP4S_CKPT_MODELOPT_NVFP4: t = fp4s_e4m3_decode(sc) * g; break;
                case FP4S_CKPT_CT_NVFP4: t = fp4s_e4m3_decode(sc) / genc; break;
                default: t = sc == 0xFF ? NAN : ldexpf(1.0f, (int)sc - 127); break;
                }
                for (size_t j = 0; j < block; j++) {
                    size_t i = r * k + b * block + j;
                    out[i] = e2m1_val[q[i]] * t;
                }
            }
    }
    free(q);
    free(s);
    return rc;
}

int fp4s_ckpt_read_tensor(fp4s_ckpt *c, const char *name, float **data, size_t *count)
{
    const stensor *t = c && name ? find_t(c, name) : NULL;
    if (!t) return fp4s_error_set(FP4S_ENOTFOUND, "%s: tensor %s not found", c ? c->path : "?", name ? name : "?");
    const char *P = c->files[t->file];
    size_t eb = dt_is(t, "F32", NULL) ? 4 : dt_is(t, "F64", NULL) ? 8 : dt_is(t, "F16", "BF16") ? 2 : 0;
    if (!eb)
        return fp4s_error_set(FP4S_EDTYPE, "%s: %s: dtype %s is not a float weight (F32, F16, BF16, F64)", P,
                              t->pub.name, t->pub.dtype);
    uint64_t n = numel(t);
    if (n > SIZE_MAX / 8) return fp4s_error_set(FP4S_ERANGE, "%s: %s: too large", P, t->pub.name);
    unsigned char *raw = malloc((size_t)t->len ? (size_t)t->len : 1);
    float *v = malloc((size_t)n * sizeof *v + 1);
    if (!raw || !v) {
        free(raw);
        free(v);
        return fp4s_error_set(FP4S_ENOMEM, "%s: %s: out of memory", P, t->pub.name);
    }
    if (fp4s_pread_full(c->fds[t->file], raw, (size_t)t->len, t->off) != (ssize_t)t->len) {
        free(raw);
        free(v);
        return fp4s_error_set(FP4S_EOPEN, "%s: %s: cannot read: %s", P, t->pub.name, strerror(errno));
    }
    for (uint64_t i = 0; i < n; i++) {
        if (eb == 4) memcpy(&v[i], raw + 4 * i, 4);
        else if (eb == 8) {
            double d;
            memcpy(&d, raw + 8 * i, 8);
            v[i] = (float)d;
        } else {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            if (dt_is(t, "BF16", NULL)) v[i] = fp4s_bf16_decode(h);
            else fp4s_fp16_to_f32(&h, &v[i], 1);
        }
    }
    free(raw);
    *data = v;
    *count = (size_t)n;
    return 0;
}

int fp4s_ckpt_tscale(const fp4s_spec *s, double global_scale, fp4s_tscale *ts)
{
    if (!s || !ts) return fp4s_error_set(FP4S_EINVAL, "fp4s_ckpt_tscale: NULL argument");
    if (s->format != FP4S_NVFP4)
        return fp4s_error_set(FP4S_EINVAL, "a global scale is an NVFP4 tensor scale, not %s", fp4s_format_name(s->format));
    const fp4s_nv_recipe_traits *rt = fp4s_get_nv_recipe_traits(s->nv_recipe);
    float g = (float)global_scale;
    if (!rt || !isfinite(g) || !(g > 0))
        return fp4s_error_set(FP4S_EINVAL, "global scale %g is not a finite positive number", global_scale);
    int rc = fp4s_tscale_init(s, 0.0f, ts);
    if (rc) return rc;
    switch (rt->tscale) {
    case FP4S_NV_TS_ENCODE:
        ts->s_enc = 1.0f / g;
        ts->s_dec = 1.0f / ts->s_enc;
        break;
    case FP4S_NV_TS_DECODE:
    case FP4S_NV_TS_DECODE_RCP:
        ts->s_dec = g;
        ts->s_enc = 1.0f / g;
        break;
    default:
        return fp4s_error_set(FP4S_ENOTSUP, "profile %s: recipe %s has no tensor scale to take a global scale",
                              s->profile, fp4s_nv_recipe_name(s->nv_recipe));
    }
    ts->amax = ts->s_dec * 2688.0f;
    ts->stored = s->global_scale == FP4S_GS_ENCODE ? ts->s_enc : ts->s_dec;
    return 0;
}

int fp4s_ckpt_compare(fp4s_ckpt *c, const fp4s_ckpt_weight *w, const float *t, const fp4s_spec *s, fp4s_ckpt_gs gs,
                      fp4s_ckpt_check *out)
{
    if (!c || !w || !t || !s || !out) return fp4s_error_set(FP4S_EINVAL, "fp4s_ckpt_compare: NULL argument");
    memset(out, 0, sizeof *out);
    if (s->format != w->format)
        return fp4s_error_set(FP4S_EINVAL, "%s: the checkpoint holds %s, the profile quantizes %s", w->name,
                              fp4s_format_name(w->format), fp4s_format_name(s->format));
    size_t n = w->rows, k = w->cols, kb = k / s->block;
    if (k % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "%s: K = %zu is not a multiple of the profile's block %u", w->name, k,
                              s->block);
    if (kb * s->block != k || (w->format == FP4S_NVFP4 && s->block != 16) || (w->format == FP4S_MXFP4 && s->block != 32))
        return fp4s_error_set(FP4S_EINVAL, "%s: profile %s uses blocks of %u, the checkpoint of %d", w->name, s->profile,
                              s->block, w->format == FP4S_NVFP4 ? 16 : 32);
    uint8_t *cq = malloc(n * k), *cs = malloc(n * kb), *pq = malloc(n * k), *ps = malloc(n * kb);
    float *dq = malloc(n * k * sizeof *dq);
    int rc = 0;
    if (!cq || !cs || !pq || !ps || !dq) rc = fp4s_error_set(FP4S_ENOMEM, "%s: out of memory", w->name);
    double err2 = 0, ref2 = 0;
    for (size_t e = 0; e < w->experts && !rc; e++) {
        const float *x = t + e * n * k;
        rc = fp4s_ckpt_read_codes(c, w, e, cq, cs);
        if (!rc) rc = fp4s_ckpt_dequant(c, w, e, dq);
        fp4s_tscale ts;
        memset(&ts, 0, sizeof ts);
        if (!rc && w->format == FP4S_NVFP4) {
            float amax = fp4s_spec_amax(s, x, n, k, k, NULL);
            fp4s_tscale mine;
            rc = fp4s_tscale_init(s, amax, &mine);
            if (!rc) {
                double g = fp4s_ckpt_global_scale(c, w, e);
                if (e == 0) {
                    out->global_profile = mine.s_dec;
                    out->global_equal = (float)g == mine.s_dec;
                } else {
                    out->global_equal &= (float)g == mine.s_dec;
                }
                if (gs == FP4S_CKPT_GS_WEIGHTS) ts = mine;
                else rc = fp4s_ckpt_tscale(s, g, &ts);
            }
        } else if (!rc) {
            rc = fp4s_tscale_init(s, 0.0f, &ts);
        }
        fp4s_qout qo;
        memset(&qo, 0, sizeof qo);
        qo.codes = pq;
        qo.ld_codes = k;
        qo.scales = ps;
        qo.ld_scales = kb;
        if (!rc) rc = fp4s_quantize(s, &ts, x, n, k, k, 0, &qo, NULL);
        for (size_t r = 0; !rc && r < n; r++)
            for (size_t b = 0; b < kb; b++) {
                bool sd = cs[r * kb + b] != ps[r * kb + b], qd = false;
                out->scale_diff += sd;
                for (size_t j = 0; j < s->block; j++) {
                    size_t i = r * k + b * s->block + j;
                    bool d = cq[i] != pq[i];
                    qd |= d;
                    out->code_diff += d;
                }
                if ((sd || qd) && !out->any) {
                    out->any = true;
                    out->first_expert = e;
                    out->first_row = r;
                    out->first_block = b;
                }
            }
        for (size_t i = 0; !rc && i < n * k; i++) {
            double d = (double)dq[i] - (double)x[i];
            if (fabs(d) > out->max_abs_err || isnan(d)) out->max_abs_err = isnan(d) ? NAN : fabs(d);
            err2 += d * d;
            ref2 += (double)x[i] * (double)x[i];
        }
        out->blocks += n * kb;
        out->elements += n * k;
    }
    out->rel_err = ref2 > 0 ? sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0);
    free(cq);
    free(cs);
    free(pq);
    free(ps);
    free(dq);
    return rc;
}

#else /* no jansson */

struct fp4s_ckpt {
    int unused;
};

int fp4s_ckpt_open(const char *path, fp4s_ckpt **out)
{
    if (out) *out = NULL;
    return fp4s_error_set(FP4S_ENOTSUP, "%s: reading checkpoints needs jansson (fp4scope was built without it)",
                          path ? path : "?");
}
void fp4s_ckpt_close(fp4s_ckpt **c)
{
    if (c) *c = NULL;
}
size_t fp4s_ckpt_nweights(const fp4s_ckpt *c) { (void)c; return 0; }
const fp4s_ckpt_weight *fp4s_ckpt_weight_at(const fp4s_ckpt *c, size_t i) { (void)c; (void)i; return NULL; }
const fp4s_ckpt_weight *fp4s_ckpt_weight_find(const fp4s_ckpt *c, const char *n) { (void)c; (void)n; return NULL; }
size_t fp4s_ckpt_ntensors(const fp4s_ckpt *c) { (void)c; return 0; }
const fp4s_ckpt_tensor *fp4s_ckpt_tensor_at(const fp4s_ckpt *c, size_t i) { (void)c; (void)i; return NULL; }
const fp4s_ckpt_tensor *fp4s_ckpt_tensor_find(const fp4s_ckpt *c, const char *n) { (void)c; (void)n; return NULL; }
double fp4s_ckpt_global_scale(const fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e)
{
    (void)c; (void)w; (void)e;
    return 0;
}
int fp4s_ckpt_read_codes(fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e, uint8_t *q, uint8_t *s)
{
    (void)c; (void)w; (void)e; (void)q; (void)s;
    return fp4s_error_set(FP4S_ENOTSUP, "checkpoints need jansson");
}
int fp4s_ckpt_dequant(fp4s_ckpt *c, const fp4s_ckpt_weight *w, size_t e, float *out)
{
    (void)c; (void)w; (void)e; (void)out;
    return fp4s_error_set(FP4S_ENOTSUP, "checkpoints need jansson");
}
int fp4s_ckpt_read_tensor(fp4s_ckpt *c, const char *name, float **data, size_t *count)
{
    (void)c; (void)name; (void)data; (void)count;
    return fp4s_error_set(FP4S_ENOTSUP, "checkpoints need jansson");
}
int fp4s_ckpt_tscale(const fp4s_spec *s, double g, fp4s_tscale *ts)
{
    (void)s; (void)g; (void)ts;
    return fp4s_error_set(FP4S_ENOTSUP, "checkpoints need jansson");
}
int fp4s_ckpt_compare(fp4s_ckpt *c, const fp4s_ckpt_weight *w, const float *t, const fp4s_spec *s, fp4s_ckpt_gs gs,
                      fp4s_ckpt_check *out)
{
    (void)c; (void)w; (void)t; (void)s; (void)gs; (void)out;
    return fp4s_error_set(FP4S_ENOTSUP, "checkpoints need jansson");
}
#endif
