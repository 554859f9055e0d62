/* Internal types of the mismatch module (not installed). */
#ifndef FP4S_MM_INTERNAL_H
#define FP4S_MM_INTERNAL_H

#include <fp4scope/mismatch.h>

#include <stdint.h>
#include <stdio.h>

typedef struct mm_sums {
    uint64_t n, masked, nonfinite, n_hi, n_lo;
    double s_abs, max_abs, s_rho, s_rho2, s_k3;
    double s_w, s_w2, max_w, min_w, s_wc, s_wc2;
    double s_d, s_d2, max_d, s_pt, s_pr, s_pt2, s_pr2, s_ptpr;
} mm_sums;

typedef struct mm_seq {
    int64_t id;
    uint64_t n;
    double s_abs, s_rho, s_lt, s_lr;
    int used;
} mm_seq;

struct fp4s_mm_acc {
    fp4s_mm_opts o;
    mm_sums s;
    mm_seq *seqs;
    size_t seq_cap, seq_used, last_slot;
    int64_t last_id;
    double *absv;
    size_t nabs, abs_cap;
    uint32_t *hist;      /* 2 x 65536 counts of the top 16 key bits of |rho| (even, odd tokens), summed
                          * for the radix pass of the percentiles */
};

/* ---- trace readers: batches of tokens in columns ---------------------------------- */
typedef struct mm_batch {
    size_t n, cap;
    int64_t *step, *seq, *pos;   /* pos[i] = -1 when the trace has none */
    double *lt, *lr;
    uint8_t *mask;
    uint32_t *run;               /* index into the reader's run names */
    uint64_t *row;               /* line number (text) or token index (capture) */
    /* capture batches: one step of one run, rows urow0 + i; step/run/row not filled */
    int uniform;
    int64_t ustep;
    uint64_t urow0;
    int no_mask;                 /* mask[] not filled: every token counted */
    int is_f32;                  /* log-probs are in flt/flr (float32 captures), not lt/lr */
    float *flt, *flr;
} mm_batch;

/* fp4s_mm_acc_add for float32 log-probs (converted per block of 1024 in L1). */
int mm_acc_add_f32(fp4s_mm_acc *a, size_t n, const float *trainer, const float *rollout, const int64_t *seq,
                   const uint8_t *mask, uint8_t *first_out);

typedef struct mm_reader mm_reader;

/* skip_empty: a capture step with 0 tokens is skipped (counted) instead of an error. */
int mm_reader_open(const char *path, const fp4s_trace_opts *t, bool skip_empty, mm_reader **out);
size_t mm_reader_skipped(const mm_reader *r);
/* Fill b with up to b->cap tokens; b->n == 0 at the end of the input. */
int mm_reader_next(mm_reader *r, mm_batch *b);
void mm_reader_close(mm_reader **r);
size_t mm_reader_nruns(const mm_reader *r);
const char *mm_reader_run_name(const mm_reader *r, size_t i); /* NULL when the trace has no run column */
bool mm_reader_has_pos(const mm_reader *r);
/* "file: line 12" or "file: /steps/3/logprobs: token 17" for token i of b. */
void mm_reader_where(const mm_reader *r, const mm_batch *b, size_t i, char *buf, size_t n);
const char *mm_reader_path(const mm_reader *r);

int mm_batch_init(mm_batch *b, size_t cap);
void mm_batch_free(mm_batch *b);

#endif
