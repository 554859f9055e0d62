/* A decomposer as bytes and back (fp4s_decomp_serialize / _deserialize):
 * what one process sends another so that the receiver merges it exactly
 * (fp4-decompose and fp4-channels under MPI, tools/par.c). The blob is the
 * accumulator's state as this build lays it out in memory, behind a header
 * that refuses a blob of another layout. */
#include <fp4scope/decompose.h>

#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"

#define BLOB_MAGIC "fp4sdec1"

/* What must agree between the writer and the reader of a blob. */
typedef struct blob_head {
    char magic[8];
    uint32_t sz_spec, sz_ts, sz_opts, sz_xacc, sz_chacc, sz_result, hist_bins, reserved;
    uint64_t rows, cols, nfilled, nch;
} blob_head;

static void put(unsigned char **p, const void *src, size_t n)
{
    memcpy(*p, src, n);
    *p += n;
}

int fp4s_decomp_serialize(const fp4s_decomp *d, void **buf, size_t *len)
{
    if (!d || !buf || !len) return fp4s_error_set(FP4S_EINVAL, "decomposition: serialize: NULL argument");
    *buf = NULL;
    *len = 0;
    uint64_t nfilled = 0, nch = d->ch ? d->cols : 0;
    if (d->unit)
        for (size_t g = 0; g < d->ngroups; g++) nfilled += d->filled[g] != 0;
    size_t n = sizeof(blob_head) + sizeof d->spec + sizeof d->ts + sizeof d->opts + sizeof d->tot +
               sizeof d->hd + sizeof d->he + nfilled * (sizeof(uint64_t) + sizeof(fp4s_decomp_result)) +
               nch * sizeof(chacc);
    unsigned char *b = malloc(n), *p = b;
    if (!b) return fp4s_error_set(FP4S_ENOMEM, "decomposition: serialize: out of memory (%zu bytes)", n);
    blob_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, BLOB_MAGIC, sizeof h.magic);
    h.sz_spec = sizeof d->spec;
    h.sz_ts = sizeof d->ts;
    h.sz_opts = sizeof d->opts;
    h.sz_xacc = sizeof(xacc);
    h.sz_chacc = sizeof(chacc);
    h.sz_result = sizeof(fp4s_decomp_result);
    h.hist_bins = FP4S_HIST_BINS;
    h.rows = d->rows;
    h.cols = d->cols;
    h.nfilled = nfilled;
    h.nch = nch;
    put(&p, &h, sizeof h);
    put(&p, &d->spec, sizeof d->spec);
    put(&p, &d->ts, sizeof d->ts);
    put(&p, &d->opts, sizeof d->opts);
    put(&p, &d->tot, sizeof d->tot);
    put(&p, d->hd, sizeof d->hd);
    put(&p, d->he, sizeof d->he);
    for (size_t g = 0; d->unit && g < d->ngroups; g++) {
        if (!d->filled[g]) continue;
        uint64_t gi = g;
        put(&p, &gi, sizeof gi);
        put(&p, &d->unit[g], sizeof d->unit[g]);
    }
    if (nch) put(&p, d->ch, nch * sizeof(chacc));
    *buf = b;
    *len = n;
    return 0;
}

static int bad(const char *why) { return fp4s_error_set(FP4S_EFORMAT, "decomposition: deserialize: %s", why); }

int fp4s_decomp_deserialize(const void *buf, size_t len, fp4s_decomp **out)
{
    if (!out) return fp4s_error_set(FP4S_EINVAL, "decomposition: deserialize: NULL output");
    *out = NULL;
    if (!buf) return fp4s_error_set(FP4S_EINVAL, "decomposition: deserialize: NULL buffer");
    const unsigned char *p = buf, *end = p + len;
    blob_head h;
    if (len < sizeof h) return bad("truncated header");
    memcpy(&h, p, sizeof h);
    p += sizeof h;
    if (memcmp(h.magic, BLOB_MAGIC, sizeof h.magic)) return bad("not a decomposition blob");
    fp4s_decomp_opts o;
    if (h.sz_spec != sizeof(fp4s_spec) || h.sz_ts != sizeof(fp4s_tscale) || h.sz_opts != sizeof o ||
        h.sz_xacc != sizeof(xacc) || h.sz_chacc != sizeof(chacc) || h.sz_result != sizeof(fp4s_decomp_result) ||
        h.hist_bins != FP4S_HIST_BINS)
        return bad("written by a build with another layout");
    size_t fixed = sizeof(fp4s_spec) + sizeof(fp4s_tscale) + sizeof o + sizeof(xacc) +
                   2 * FP4S_HIST_BINS * sizeof(uint64_t);
    if ((size_t)(end - p) < fixed) return bad("truncated");
    size_t rest = (size_t)(end - p) - fixed, per = sizeof(uint64_t) + sizeof(fp4s_decomp_result);
    if (h.nfilled > rest / per || h.nch > rest / sizeof(chacc) ||
        rest != h.nfilled * per + h.nch * sizeof(chacc))
        return bad("length does not match its header");
    fp4s_spec s;
    fp4s_tscale ts;
    memcpy(&s, p, sizeof s);
    p += sizeof s;
    memcpy(&ts, p, sizeof ts);
    p += sizeof ts;
    memcpy(&o, p, sizeof o);
    p += sizeof o;
    fp4s_decomp *d = NULL;
    int rc = fp4s_decomp_open(&s, &ts, &o, (size_t)h.rows, (size_t)h.cols, &d);
    if (rc) return rc;
    if ((d->ch ? d->cols : 0) != h.nch || (!d->unit && h.nfilled)) {
        fp4s_decomp_close(&d);
        return bad("groups do not match its grouping");
    }
    memcpy(&d->tot, p, sizeof d->tot);
    p += sizeof d->tot;
    memcpy(d->hd, p, sizeof d->hd);
    p += sizeof d->hd;
    memcpy(d->he, p, sizeof d->he);
    p += sizeof d->he;
    for (uint64_t i = 0; i < h.nfilled; i++) {
        uint64_t g;
        memcpy(&g, p, sizeof g);
        p += sizeof g;
        if (g >= d->ngroups || d->filled[g]) {
            fp4s_decomp_close(&d);
            return bad("group index out of range or repeated");
        }
        memcpy(&d->unit[g], p, sizeof d->unit[g]);
        p += sizeof d->unit[g];
        d->filled[g] = 1;
    }
    if (h.nch) memcpy(d->ch, p, h.nch * sizeof(chacc));
    *out = d;
    return 0;
}
