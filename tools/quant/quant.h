/* fp4-quant's parts (not a library): one quantizer run over a chunk and the
 * streamed passes (run.c), the outputs (outputs.c), the element-by-element
 * comparison of --diff (diff.c) and the summary as a table or JSON
 * (report.c). fp4-quant.c parses the command line and runs them in order. */
#ifndef FP4S_TOOLS_QUANT_H
#define FP4S_TOOLS_QUANT_H

#include "cli.h"

#include <fp4scope/cuda.h>
#include <fp4scope/qfile.h>
#include <fp4scope/quant.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- run.c: one quantizer (the -p spec, or the --diff one) --------------------------- */
typedef struct {
    fp4s_spec spec;
    fp4s_tscale ts;
    fp4s_qstats st;
    uint8_t *codes, *scales;
    float *sf32, *deq;
    size_t scale_cols;    /* FP4: blocks per row; FP8: scale columns */
    size_t sf_rows_chunk; /* FP8 scale rows per chunk buffer */
    uint64_t overflow_to_inf; /* finite inputs, in blocks without NaN/Inf, whose dequantized value is not finite */
    float *rsc;           /* row-scaled NVFP4: each row's recorded tensor scale (chunk rows) */
    float *ram;           /* row-scaled NVFP4: each row's amax (chunk rows) */
    float rs_min, rs_max; /* row-scaled: the smallest and largest recorded row scale (NaN: one is NaN) */
    bool rs_nan, rs_any;
    bool cuda;            /* --device: quantize on the GPU (fp4s_cuda_quantize_host_all, the same bits) */
} run_t;


bool is_fp4(const fp4s_spec *s);
size_t fp8_tile_rows(const fp4s_spec *s, size_t rows);
bool needs_amax(const fp4s_spec *s);
bool row_scaled(const fp4s_spec *s);
/* fold the recorded row scales of a chunk into r's min / max */
void row_scales_seen(run_t *r, size_t n);

/* ---- diff.c: where two quantizers disagree ---------------------------------------------- */
typedef struct {
    size_t row, col;
    float x, d1, d2;
    uint8_t c1, c2;
} diffpos;

typedef struct {
    uint64_t scales_total, scales_diff;
    uint64_t elems_total, elems_diff, deq_diff, nan_mismatch;
    double max_abs;
    size_t max_row, max_col;
    float max_x, max_d1, max_d2;
    bool have_max;
    uint64_t scale_first_row, scale_first_blk;
    bool have_scale_first;
    bool scale_layouts_differ;
    diffpos *pos;   /* first positions whose values differ through a code or scale */
    diffpos *rpos;  /* ... differ only by float rounding (same code and scale) */
    diffpos *cpos;  /* ... whose codes differ but values agree */
    size_t npos, nrpos, ncpos, show;
    uint64_t deq_rounding;
} diffacc;

void diff_init(diffacc *a, size_t show);
void diff_free(diffacc *a);
void diff_chunk(diffacc *a, const run_t *r1, const run_t *r2, const float *x, size_t n, size_t pcols,
                size_t cols, size_t row0);

/* ---- the job: one tensor through one or two quantizers ---------------------------------- */
/* One bank of -p's outputs for a chunk; two, so that one is written while the
 * other is filled. */
typedef struct bank {
    uint8_t *codes, *scales;
    float *sf32, *deq, *rsc, *ram;
} bank;

struct job;
/* A pipeline stage on a thread: reading the next chunk, or writing the
 * previous one (run.c). */
typedef struct stage {
    pthread_t th;
    bool live, h5;              /* h5: it calls HDF5 (one such call at a time) */
    int rc;
    char err[1024];
    int (*fn)(struct stage *);
    struct job *j;
    size_t r0, n;
    float *buf;                 /* read: into this chunk buffer */
    const bank *b;              /* write: from this bank */
} stage;

typedef struct job {
    /* the command line */
    const char *input;
    bool pad, json, diff;
    long long chunk_rows;       /* 0: about 1M elements per chunk */
    int gzip;
    const char *out_h5, *codes, *scales, *dequant, *row_scales;
    /* the tensor */
    fp4s_source *src;
    size_t rows, cols, pcols;   /* pcols: cols padded to whole blocks */
    int rank;
    uint64_t dims[FP4S_MAX_RANK]; /* the shape as stored (rank >= 3 is read as [prod(leading), last]) */
    fp4s_dtype in_dt;
    char shape[256];            /* "(rows, cols)", and " from (d0, d1, ...)" for rank >= 3 */
    size_t chunk;               /* rows per chunk */
    int passes;                 /* over the input: 2 when the tensor amax is needed */
    uint64_t amax_nonfinite;    /* NaN/Inf seen by the amax pass */
    float *xb[2];               /* two chunks, padding columns zero: one read while the other is quantized */
    bank banks[2];              /* -p's outputs of a chunk; banks[0] are r1's own buffers */
    stage rd, wr;               /* the reader and the writer */
    struct fused *fused;        /* the workers read the chunks (run.c), or NULL */
    float *deq_scratch;         /* dequantized values for overflow_to_inf without --dequant */
    /* the quantizers and their comparison */
    run_t r1, r2;
    diffacc da;
    /* the outputs */
    fp4s_qfile *qf;
    fp4s_npy_writer *wc, *ws, *wd, *wr_rs;
    uint8_t *crop8;             /* chunk buffers without the padding columns */
    float *cropf;
    const char *done[5];        /* outputs written, in order */
    int ndone;
} job;

/* run.c: open the input, check its shape, plan the chunks, find the tensor
 * amax (pass 1) and the tensor scales; then quantize chunk by chunk (pass 2)
 * into the outputs and the comparison. */
void job_open(job *j);
void job_quantize(job *j);
void job_free(job *j);
/* Report a failure, remove the outputs begun and exit with its status. */
_Noreturn void job_fail(job *j, int rc);

/* outputs.c */
void outputs_open(job *j);                    /* every output now: unwritable paths fail before any work */
int outputs_write(job *j, size_t r0, size_t n, const bank *b); /* one chunk of r1 (on the writer thread) */
void outputs_finish(job *j);                  /* close them all; cli_commit puts them in place */
void outputs_abort(job *j);

/* report.c: the summary (none when an output went to stdout); exit status */
int report_json(const job *j);
int report_text(const job *j);

/* ---- identify.c: fp4-quant --identify -------------------------------------------------- */
/* Which profiles (and profiles with one option of q's kind changed) give the
 * engine's codes (codes_src: [rows, cols] or packed [rows, cols/2]) and scale
 * bytes (scales_src: [rows, cols/block]) from input, bit for bit; else the
 * nearest `show`. q supplies -f (a check) and --input-scale (given to every
 * NVFP4 candidate). Returns the exit status: 0 reproduced, FP4S_EXIT_CHECK
 * not, FP4S_EXIT_OUTPUT for a failed write. */
int identify_run(const char *input, const char *codes_src, const char *scales_src, const cli_quant *q, bool json,
                 size_t show);

#endif
