/* The trace reader's state, shared by its three files (internal):
 * trace.c (open, close, the capture reader, the batch), trace_text.c (CSV/TSV
 * and JSONL) and trace_dedupe.c (tokens that come twice). */
#ifndef FP4S_TRACE_INTERNAL_H
#define FP4S_TRACE_INTERNAL_H

#include "mm_internal.h"
#include "capture/h5util.h"

#include <stdio.h>

enum { ROLE_NONE = -1, ROLE_STEP, ROLE_SEQ, ROLE_LT, ROLE_LR, ROLE_POS, ROLE_MASK, ROLE_RUN, NROLES };

struct mm_reader {
    fp4s_trace_format fmt;
    char *path;
    /* text */
    FILE *f;
    int own_f;
    char *buf;
    size_t blen, bpos, bcap;
    int eof;
    int line_err;       /* a line could not be read: too long or out of memory */
    int jrun;           /* JSONL: 0 not seen yet, 1 lines have the run field, 2 they do not */
    uint64_t line;
    char delim;
    int *role;          /* role of each CSV column */
    size_t ncols;
    const char *names[NROLES];
    int have[NROLES];
    char **runs;
    size_t nruns, last_run;
    mm_strmap run_map;  /* runs[i] -> i */
    /* CSV: a record whose quoted field spans lines, joined here */
    char *rec;
    size_t reccap;
    /* duplicate (step, seq, pos) rows, per run (dedup.c part below) */
    struct dd_set *dd;
    size_t ndd;
    bool dedupe;
    uint64_t dropped;
    /* capture: read through the capture layer's log-prob reader */
    cap_lp *lp;
    size_t cur;             /* current step index */
    size_t cur_end;         /* with `ranged`: the step index to stop at (mm_reader_step_range) */
    bool ranged;
    bool step_open;
    cap_lp_step_info si;    /* of the open step */
    size_t toff;            /* next token of the open step */
    size_t skipped;
    int skip_empty;
};

/* trace_text.c */
int mm_csv_header(mm_reader *r, const fp4s_trace_opts *t);
int mm_csv_next(mm_reader *r, mm_batch *b);
int mm_jsonl_next(mm_reader *r, mm_batch *b);

/* trace_dedupe.c: refuse (or with dedupe drop) the tokens of b whose
 * (run, step, seq, pos) came before; free what it keeps. */
int mm_dedupe_batch(mm_reader *r, mm_batch *b);
void mm_dedupe_free(mm_reader *r);

#endif
