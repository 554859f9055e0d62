/* Internal types of the mismatch module (not installed). */
#ifndef FP4S_MM_INTERNAL_H
#define FP4S_MM_INTERNAL_H

#include <fp4scope/mismatch.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mm_metrics.h"

/* The sums of the metric tables (mm_metrics.h). */
typedef struct mm_sums {
    uint64_t n, masked, nonfinite;
    double t[MM_NT];              /* MM_TOKEN_SUMS */
} mm_sums;

typedef struct mm_seq {
    int64_t id;
    uint64_t n;
    double q[MM_NQ];              /* MM_SEQ_SUMS */
    int used;
} mm_seq;

/* ---- the token kernel (mm_token.c, one per CPU level) ---------------------------- */
typedef struct mm_tok_opts {
    double C, Cl, B;              /* IS cap, 1/C, clamp */
    double wB, wmB;               /* exp(B), exp(-B) */
} mm_tok_opts;

typedef struct mm_kernels {
    /* MM_TOKEN_SUMS of n tokens, all counted, finite and with both log-probs
     * and rho in (-700, 700), into out[MM_NT]; |rho| of each into absv */
    void (*tokens)(const double *restrict lt, const double *restrict lr, size_t n, const mm_tok_opts *o,
                   double *restrict absv, double *restrict out);
    /* any counted token (mask NULL: all) with a finite positive log-prob */
    int (*any_positive)(const double *restrict t, const double *restrict r, const uint8_t *restrict mask,
                        size_t n);
    /* any token not counted, not finite or outside (-700, 700) */
    int (*irregular)(const double *restrict t, const double *restrict r, const uint8_t *restrict mask, size_t n);
} mm_kernels;

/* The kernels of the level fp4s_cpu_flags() allows now (acc.c). */
void mm_kernels_init(mm_kernels *k);

/* The entries of each level: _c (baseline), _avx2, _avx512 (mm_token.c). */
#define MM_KERNEL_DECL(sfx)                                                                                    \
    void mm_tokens##sfx(const double *restrict lt, const double *restrict lr, size_t n, const mm_tok_opts *o, \
                        double *restrict absv, double *restrict out);                                          \
    int mm_any_positive##sfx(const double *restrict t, const double *restrict r, const uint8_t *restrict mask, \
                             size_t n);                                                                        \
    int mm_irregular##sfx(const double *restrict t, const double *restrict r, const uint8_t *restrict mask,    \
                          size_t n);
MM_KERNEL_DECL(_c)
MM_KERNEL_DECL(_avx2)
MM_KERNEL_DECL(_avx512)

/* exp for |x| < 700, branch-free so that it vectorizes: x = k ln2 + r,
 * |r| <= ln2/2, Taylor polynomial to r^13 (truncation < 1e-17 relative), 2^k
 * built in the exponent bits. About 1 ulp (checked against libm by the unit
 * test through fp4s_mm_vexp_internal). Written once for a type T of doubles
 * (double, or a GCC vector of doubles: the token kernels) with TU the
 * unsigned 64-bit integers of the same shape, so that every lane does the
 * same IEEE operations as the scalar function. */
#define MM_VEXP_DEFINE(name, T, TU)                                                   \
    static inline T name(T x)                                                         \
    {                                                                                 \
        const double log2e = 1.4426950408889634074, shift = 6755399441055744.0;      \
        const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10; \
        const T t = x * log2e + shift; /* shift = 1.5 * 2^52 */                     \
        const T kd = t - shift;                                                       \
        const T r = (x - kd * ln2_hi) - kd * ln2_lo;                                 \
        T p = (T){0} + 1.0 / 6227020800.0;                                           \
        p = p * r + 1.0 / 479001600.0;                                                \
        p = p * r + 1.0 / 39916800.0;                                                 \
        p = p * r + 1.0 / 3628800.0;                                                  \
        p = p * r + 1.0 / 362880.0;                                                   \
        p = p * r + 1.0 / 40320.0;                                                    \
        p = p * r + 1.0 / 5040.0;                                                     \
        p = p * r + 1.0 / 720.0;                                                      \
        p = p * r + 1.0 / 120.0;                                                      \
        p = p * r + 1.0 / 24.0;                                                       \
        p = p * r + 1.0 / 6.0;                                                        \
        p = p * r + 0.5;                                                              \
        p = p * r + 1.0;                                                              \
        p = p * r + 1.0;                                                              \
        TU tb;                                                                        \
        memcpy(&tb, &t, sizeof tb);                                                   \
        const TU eb = (tb - 0x4338000000000000ULL + 1023) << 52; /* minus the bits of shift */ \
        T sc;                                                                         \
        memcpy(&sc, &eb, sizeof sc);                                                  \
        return p * sc;                                                                \
    }
MM_VEXP_DEFINE(mm_vexp, double, uint64_t)

struct fp4s_mm_acc {
    fp4s_mm_opts o;
    mm_kernels k;        /* of the CPU level at open */
    mm_sums s;
    mm_seq *seqs;
    size_t seq_cap, seq_used, last_slot;
    int64_t last_id;
    uint32_t *used;      /* the slots of seqs in use (any order): a step of few sequences is
                          * reset and finished in O(its sequences), not O(seq_cap) */
    double *absv;
    size_t nabs, abs_cap;
    uint32_t *hist;      /* 2 x 65536 counts of the top 16 key bits of |rho| (even, odd tokens), summed
                          * for the radix pass of the percentiles; allocated and kept from the
                          * step's MM_HIST_MIN-th token on (hist_on), the size where the radix pass
                          * starts: a step of few tokens never touches 512 KiB */
    int hist_on;
};
#define MM_HIST_MIN 8192

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
/* How far the reader is: bytes of a file, steps of a capture (0 of 0 when
 * unknown, as for a pipe). */
void mm_reader_progress(const mm_reader *r, uint64_t *done, uint64_t *total);
/* Fill b with up to b->cap tokens; b->n == 0 at the end of the input. */
int mm_reader_next(mm_reader *r, mm_batch *b);
/* A capture reader reads only part `part` of `nparts` contiguous ranges of
 * the capture's steps (fp4s_mm_analyze_part); FP4S_ENOTSUP for text traces. */
int mm_reader_step_range(mm_reader *r, size_t part, size_t nparts);
void mm_reader_close(mm_reader **r);
size_t mm_reader_nruns(const mm_reader *r);
const char *mm_reader_run_name(const mm_reader *r, size_t i); /* NULL when the trace has no run column */
bool mm_reader_has_pos(const mm_reader *r);
/* "file: line 12" or "file: /steps/3/logprobs: token 17" for token i of b. */
void mm_reader_where(const mm_reader *r, const mm_batch *b, size_t i, char *buf, size_t n);
const char *mm_reader_path(const mm_reader *r);

int mm_batch_init(mm_batch *b, size_t cap);
void mm_batch_free(mm_batch *b);

/* trace_text.c's text helpers, which the scalar logs share: a strict number,
 * the whole field with spaces around allowed (0, or -1); a CSV line split in
 * place into fields (simple double quotes, "" for a quote; the field count,
 * up to max stored, or -1 on a bad quote); the length of a UTF-8 byte order
 * mark at the start of a line (3, else 0). */
int mm_parse_f64(const char *s, double *v);
long mm_split_fields(char *line, char delim, char **fields, size_t max);
size_t mm_bom_len(const char *line, size_t len);
/* Python's bare NaN, Infinity, -Infinity outside strings as JSON strings
 * (trace_text.c): 1 with a malloc'ed *out, 0 nothing to change, -1 no memory. */
int mm_json_py_specials(const char *line, size_t len, char **out, size_t *outlen);
/* A json_t string that mm_json_py_specials wrote: 0 with the number in *x, else -1. */
int mm_json_special(const void *value, double *x);

/* mm_map.c: names -> indices (the key bytes are the caller's and must stay
 * in place) and int64 -> indices; get: the value or -1; put: 0, or -1 out of
 * memory (a key put twice: the new value for int64 keys; names are put once). */
typedef struct mm_strmap_entry {
    const char *key;
    size_t len;
    uint64_t hash;
    size_t value;
} mm_strmap_entry;
typedef struct mm_strmap {
    mm_strmap_entry *e;
    size_t cap, n;
} mm_strmap;
long mm_strmap_get(const mm_strmap *m, const char *key, size_t len);
int mm_strmap_put(mm_strmap *m, const char *key, size_t len, size_t value);
void mm_strmap_free(mm_strmap *m);
typedef struct mm_i64map {
    int64_t *key;
    size_t *value;
    uint8_t *used;
    size_t cap, n;
} mm_i64map;
long mm_i64map_get(const mm_i64map *m, int64_t key);
int mm_i64map_put(mm_i64map *m, int64_t key, size_t value);
void mm_i64map_free(mm_i64map *m);
/* Key comparisons of the readers' lookups (steps seen, rows, columns, runs)
 * since the process began: the unit test's measure that reading a trace or a
 * log is linear in its steps, runs and columns (fp4s_mm_work_internal). */
extern _Thread_local uint64_t mm_work;

/* scalars.c: per-step scalar logs and a capture's per-step scalars */
int mm_scalar_log_sniff(const char *path, const fp4s_trace_opts *t);
int mm_scalar_log_read(const char *path, const char *name, const fp4s_trace_opts *t, fp4s_mm_result *res);
int mm_capture_scalars(const char *path, const char *name, fp4s_mm_result *res, size_t run_index, int add_run);

/* A 64-bit finalizer (MurmurHash3's fmix64): the hash of the module's
 * open-addressing tables (the accumulator's sequences, mm_map's keys). */
static inline uint64_t mm_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
