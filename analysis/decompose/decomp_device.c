/* The decomposition on the GPU, host side: the device names and their
 * resolution, and fp4s_decomp_add_via, which checks a call like
 * fp4s_decomp_add, runs the CUDA side (kernels/cuda/decomp_cu.h: the kernels,
 * or their host emulation in the tests) and merges what it hands back (the
 * decomposer's own accumulator types) into the decomposer exactly, as two
 * decomposers merge. */
#include <fp4scope/cuda.h>
#include <fp4scope/decompose.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/decomp_cu.h"
#include "cuda/supports.h"
#include "decomp_internal.h"

static const fp4s_dname devices[] = {{"cpu", FP4S_DEVICE_CPU}, {"cuda", FP4S_DEVICE_CUDA}, {"auto", FP4S_DEVICE_AUTO}};

int fp4s_device_parse(const char *s, fp4s_device *out)
{
    int v = 0, rc = fp4s_dname_parse(devices, 3, 3, "device", out ? s : NULL, &v);
    if (!rc) *out = (fp4s_device)v;
    return rc;
}

const char *fp4s_device_name(fp4s_device d) { return fp4s_dname_of(devices, 3, (int)d); }

int fp4s_device_resolve(const fp4s_spec *s, fp4s_device want, fp4s_device *got)
{
    return fp4s_cu_resolve(FP4S_CUDA_CAP_BUILT | FP4S_CUDA_CAP_DECOMPOSE, s, want, got);
}

fp4s_device fp4s_decomp_device(const fp4s_decomp *d)
{
    return d && d->cuda ? FP4S_DEVICE_CUDA : FP4S_DEVICE_CPU;
}

void fp4s_decomp_cu_dk(const fp4s_decomp *d, fp4s_cu_dk *k)
{
    memset(k, 0, sizeof *k);
    k->spec = d->spec;
    k->ts = d->ts;
    k->by = (int)d->opts.by;
    k->cols = d->cols;
    k->nblk = d->nblk;
    k->bs = d->spec.block;
    memcpy(k->seff, d->seff, sizeof k->seff);
    memcpy(k->uf, d->uf, sizeof k->uf);
    memcpy(k->tie_up, d->tie_up, sizeof d->tie_up);
}

void fp4s_decomp_merge_units(fp4s_decomp *d, const part *units, size_t row0, size_t nrows)
{
    const fp4s_group by = d->opts.by;
    const size_t nunit = by == FP4S_GROUP_ROW ? nrows : (by == FP4S_GROUP_BLOCK ? nrows * d->nblk : 0);
    const size_t g0 = by == FP4S_GROUP_ROW ? row0 : row0 * d->nblk;
    for (size_t g = 0; g < nunit; g++) {
        fp4s_part_finish(&units[g], &d->unit[g0 + g]);
        d->filled[g0 + g] = 1;
    }
}

void fp4s_decomp_merge_totals(fp4s_decomp *d, const fp4s_cu_dk_out *out)
{
    fp4s_xacc_merge(&d->tot, &out->tot);
    for (int i = 0; i < FP4S_HIST_BINS; i++) {
        d->hd[i] += out->hd[i];
        d->he[i] += out->he[i];
    }
    if (out->ch)
        for (size_t c = 0; c < d->cols; c++) fp4s_chacc_merge(&d->ch[c], &out->ch[c]);
}

int fp4s_decomp_add_via(fp4s_decomp *d, fp4s_cu_dk_fn fn, fp4s_dtype dt, const void *x, bool x_host,
                        size_t nrows, size_t ld, size_t row0, void *stream)
{
    if (!d || (nrows && !x)) return fp4s_error_set(FP4S_EINVAL, "decomposition: NULL argument");
    if (nrows == 0) return 0;
    if (ld < d->cols) return fp4s_error_set(FP4S_EINVAL, "decomposition: row stride %zu < %zu columns", ld, d->cols);
    int rc = fp4s_decomp_check_rows(d, row0, nrows);
    if (rc) return rc;
    const char *why = NULL;
    if (!fp4s_cu_supports_why(&d->spec, &why))
        return fp4s_error_set(FP4S_ENOTSUP, "decomposition on the GPU: %s: %s",
                              d->spec.profile[0] ? d->spec.profile : fp4s_format_name(d->spec.format), why);
    size_t align = fp4s_spec_row_align(&d->spec);
    if (align > 1 && row0 % align)
        return fp4s_error_set(FP4S_EINVAL, "decomposition on the GPU: row %zu does not start a %zu-row tile",
                              row0, align);
    fp4s_cu_dk *k = malloc(sizeof *k);
    fp4s_cu_dk_out *out = calloc(1, sizeof *out);
    const fp4s_group by = d->opts.by;
    const size_t nunit = by == FP4S_GROUP_ROW ? nrows : (by == FP4S_GROUP_BLOCK ? nrows * d->nblk : 0);
    if (k && out && nunit) out->units = malloc(nunit * sizeof(part));
    if (k && out && by == FP4S_GROUP_CHANNEL) out->ch = calloc(d->cols, sizeof(chacc));
    if (!k || !out || (nunit && !out->units) || (by == FP4S_GROUP_CHANNEL && !out->ch)) {
        rc = fp4s_error_set(FP4S_ENOMEM, "decomposition on the GPU: out of memory for %zu rows", nrows);
        goto done;
    }
    fp4s_decomp_cu_dk(d, k);
    rc = fn(k, dt, x, x_host, nrows, ld, out, stream);
    if (rc) goto done;
    /* merge: the exact sums and counts, the histograms, the groups */
    fp4s_decomp_merge_totals(d, out);
    if (nunit) fp4s_decomp_merge_units(d, out->units, row0, nrows);
done:
    if (out) {
        free(out->units);
        free(out->ch);
    }
    free(out);
    free(k);
    return rc;
}

int fp4s_cuda_decomp_add(fp4s_decomp *d, fp4s_dtype dtype, const void *d_x, size_t nrows, size_t ld, size_t row0,
                         void *stream)
{
    return fp4s_decomp_add_via(d, fp4s_cu_decomp, dtype, d_x, false, nrows, ld, row0, stream);
}
