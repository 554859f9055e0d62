/* fp4-quant --diff: scale and element codes and dequantized values of two
 * quantizers compared chunk by chunk, with the first differing positions. */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void diff_init(diffacc *a, size_t show)
{
    a->show = show;
    a->pos = xcalloc(show + 1, sizeof *a->pos);
    a->cpos = xcalloc(show + 1, sizeof *a->cpos);
    a->rpos = xcalloc(show + 1, sizeof *a->rpos);
}

void diff_free(diffacc *a)
{
    free(a->pos);
    free(a->cpos);
    free(a->rpos);
    a->pos = a->cpos = a->rpos = NULL;
}

void diff_chunk(diffacc *a, const run_t *r1, const run_t *r2, const float *x, size_t n, size_t pcols,
                size_t cols, size_t row0)
{
    if (is_fp4(&r1->spec)) {
        /* scale bytes of real (non-padding) blocks */
        size_t blk = r1->spec.block, nb = (cols + blk - 1) / blk;
        for (size_t i = 0; i < n; i++)
            for (size_t b = 0; b < nb; b++) {
                a->scales_total++;
                if (r1->scales[i * r1->scale_cols + b] != r2->scales[i * r2->scale_cols + b]) {
                    if (!a->have_scale_first) {
                        a->scale_first_row = row0 + i;
                        a->scale_first_blk = b;
                        a->have_scale_first = true;
                    }
                    a->scales_diff++;
                }
            }
    } else if (r1->spec.fp8_gran != r2->spec.fp8_gran) {
        a->scale_layouts_differ = true; /* tiles of different shapes: not comparable */
    } else {
        size_t tr = fp8_tile_rows(&r1->spec, SIZE_MAX);
        size_t srows = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? (row0 == 0) : (n + tr - 1) / tr;
        for (size_t i = 0; i < srows * r1->scale_cols; i++) {
            a->scales_total++;
            uint32_t u, v;
            memcpy(&u, &r1->sf32[i], 4);
            memcpy(&v, &r2->sf32[i], 4);
            if (u != v) a->scales_diff++;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t k = i * pcols + j;
            a->elems_total++;
            uint8_t c1 = r1->codes[k], c2 = r2->codes[k];
            float d1 = r1->deq[k], d2 = r2->deq[k];
            bool cd = c1 != c2;
            /* values differ numerically (-0 equals +0; NaN equals NaN) */
            bool dd = isnan(d1) ? !isnan(d2) : (isnan(d2) || d1 != d2);
            /* does the element's block (or tile) scale differ? */
            bool sd;
            if (is_fp4(&r1->spec)) {
                size_t b = j / r1->spec.block;
                sd = r1->scales[i * r1->scale_cols + b] != r2->scales[i * r2->scale_cols + b];
            } else if (a->scale_layouts_differ) {
                sd = true;
            } else {
                size_t tr = fp8_tile_rows(&r1->spec, SIZE_MAX);
                size_t si = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? 0 : (i / tr) * r1->scale_cols + j / 128;
                uint32_t u, v;
                memcpy(&u, &r1->sf32[si], 4);
                memcpy(&v, &r2->sf32[si], 4);
                sd = u != v;
            }
            if (cd) a->elems_diff++;
            if (dd) a->deq_diff++;
            if (dd && !cd && !sd) a->deq_rounding++;
            if (isnan(d1) != isnan(d2)) a->nan_mismatch++;
            diffpos p = {row0 + i, j, x[k], d1, d2, c1, c2};
            if (dd && (cd || sd)) {
                if (a->npos < a->show) a->pos[a->npos++] = p;
            } else if (dd) {
                if (a->nrpos < a->show) a->rpos[a->nrpos++] = p;
            } else if (cd) {
                if (a->ncpos < a->show) a->cpos[a->ncpos++] = p;
            }
            if (isfinite(d1) && isfinite(d2)) {
                double e = fabs((double)d1 - (double)d2);
                if (e > 0 && (!a->have_max || e > a->max_abs)) {
                    a->max_abs = e;
                    a->max_row = row0 + i;
                    a->max_col = j;
                    a->max_x = x[k];
                    a->max_d1 = d1;
                    a->max_d2 = d2;
                    a->have_max = true;
                }
            }
        }
}

