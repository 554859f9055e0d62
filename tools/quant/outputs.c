/* fp4-quant: the outputs of -o (packed HDF5), --codes, --scales and --dequant,
 * opened before the work and written chunk by chunk. They are members of the
 * run's output group: closing them finishes them, cli_commit puts them all in
 * place together. */
#include "quant.h"

#include <stdlib.h>
#include <string.h>

void outputs_open(job *j)
{
    const run_t *r1 = &j->r1;
    size_t rows = j->rows, cols = j->cols;
    int rc;
    if (j->out_h5) {
        fp4s_qfile_opts qo;
        fp4s_qfile_opts_defaults(&qo);
        qo.source = j->input;
        qo.source_cols = cols;
        qo.source_rank = j->rank;
        qo.gzip = j->gzip;
        qo.tool = "fp4-quant";
        rc = fp4s_qfile_create(j->out_h5, &r1->spec, &r1->ts, rows, j->pcols, &qo, &j->qf);
        if (rc) job_fail(j, rc);
    }
    if (j->codes) {
        rc = j->rank == 1 ? fp4s_npy_writer_open(j->codes, FP4S_DT_U8, 1, cols, 0, &j->wc)
                          : fp4s_npy_writer_open(j->codes, FP4S_DT_U8, 2, rows, cols, &j->wc);
        if (rc) job_fail(j, rc);
    }
    if (j->scales) {
        if (is_fp4(&r1->spec)) {
            rc = fp4s_npy_writer_open(j->scales, FP4S_DT_U8, 2, rows, r1->scale_cols, &j->ws);
        } else {
            size_t tr = fp8_tile_rows(&r1->spec, rows);
            size_t srows = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? 1 : (rows + tr - 1) / tr;
            rc = fp4s_npy_writer_open(j->scales, FP4S_DT_F32, 2, srows, r1->scale_cols, &j->ws);
        }
        if (rc) job_fail(j, rc);
    }
    if (j->dequant) {
        rc = j->rank == 1 ? fp4s_npy_writer_open(j->dequant, FP4S_DT_F32, 1, cols, 0, &j->wd)
                          : fp4s_npy_writer_open(j->dequant, FP4S_DT_F32, 2, rows, cols, &j->wd);
        if (rc) job_fail(j, rc);
    }
    if (j->row_scales) {
        rc = fp4s_npy_writer_open(j->row_scales, FP4S_DT_F32, 1, rows, 0, &j->wr_rs);
        if (rc) job_fail(j, rc);
    }
    /* --codes and --dequant drop the padding columns again */
    if (j->pcols != cols && j->codes) j->crop8 = xcalloc(j->chunk, cols);
    if (j->pcols != cols && j->dequant) j->cropf = xcalloc(j->chunk, cols * sizeof(float));
}

int outputs_write(job *j, size_t r0, size_t n, const bank *b)
{
    const run_t *r1 = &j->r1;
    size_t cols = j->cols, pcols = j->pcols;
    int rc;
    if (j->qf && b->ram) {
        /* row-scaled: each row's decode factor from its amax, as the quantizer made it */
        float *dec = malloc(n * sizeof *dec);
        if (!dec) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
        rc = 0;
        for (size_t i = 0; i < n && !rc; i++) {
            fp4s_tscale t;
            if (!(rc = fp4s_tscale_init(&r1->spec, b->ram[i], &t))) dec[i] = t.s_dec;
        }
        if (!rc) rc = fp4s_qfile_write_row_scales(j->qf, n, b->rsc, dec);
        free(dec);
        if (rc) return rc;
    }
    if (j->qf) {
        rc = fp4s_qfile_write(j->qf, n, b->codes, pcols, b->scales, r1->scale_cols, b->sf32, r1->scale_cols);
        if (rc) return rc;
    }
    if (j->wc) {
        const uint8_t *src8 = b->codes;
        if (j->crop8) {
            for (size_t i = 0; i < n; i++) memcpy(j->crop8 + i * cols, b->codes + i * pcols, cols);
            src8 = j->crop8;
        }
        if ((rc = fp4s_npy_writer_rows(j->wc, src8, j->rank == 1 ? cols : n))) return rc;
    }
    if (j->wd) {
        const float *srcf = b->deq;
        if (j->cropf) {
            for (size_t i = 0; i < n; i++) memcpy(j->cropf + i * cols, b->deq + i * pcols, cols * sizeof(float));
            srcf = j->cropf;
        }
        if ((rc = fp4s_npy_writer_rows(j->wd, srcf, j->rank == 1 ? cols : n))) return rc;
    }
    if (j->wr_rs && (rc = fp4s_npy_writer_rows(j->wr_rs, b->rsc, n))) return rc;
    if (j->ws) {
        if (is_fp4(&r1->spec)) {
            rc = fp4s_npy_writer_rows(j->ws, b->scales, n);
        } else {
            size_t tr = fp8_tile_rows(&r1->spec, j->rows);
            size_t ns = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? (r0 == 0) : (n + tr - 1) / tr;
            rc = fp4s_npy_writer_rows(j->ws, b->sf32, ns);
        }
        if (rc) return rc;
    }
    return 0;
}

void outputs_finish(job *j)
{
    int rc;
    if (j->qf) {
        rc = fp4s_qfile_set_stats(j->qf, &j->r1.st);
        if (!rc) rc = fp4s_qfile_close(&j->qf);
        if (rc) job_fail(j, rc);
        j->done[j->ndone++] = j->out_h5;
    }
    fp4s_npy_writer **ws[4] = {&j->wc, &j->ws, &j->wd, &j->wr_rs};
    const char *wn[4] = {j->codes, j->scales, j->dequant, j->row_scales};
    for (int i = 0; i < 4; i++) {
        if (!*ws[i]) continue;
        if ((rc = fp4s_npy_writer_close(ws[i]))) job_fail(j, rc);
        j->done[j->ndone++] = wn[i];
    }
}

void outputs_abort(job *j)
{
    fp4s_qfile_abort(&j->qf);
    fp4s_npy_writer_abort(&j->wc);
    fp4s_npy_writer_abort(&j->ws);
    fp4s_npy_writer_abort(&j->wd);
    fp4s_npy_writer_abort(&j->wr_rs);
}
