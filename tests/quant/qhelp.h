/* Test helpers: quantize a whole array with a spec (amax, tensor scale, one
 * chunk) into freshly allocated outputs. */
#ifndef QHELP_H
#define QHELP_H
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fp4scope/quant.h>

typedef struct qres {
    uint8_t *codes, *scales;
    float *sf, *deq;
    fp4s_tscale ts;
    fp4s_qstats st;
    size_t rows, cols, bpr, sfn;
    int rc;
} qres;

static inline void qres_free(qres *q)
{
    free(q->codes); free(q->scales); free(q->sf); free(q->deq);
    memset(q, 0, sizeof *q);
}

static inline qres run_q(const fp4s_spec *s, const float *x, size_t rows, size_t cols)
{
    qres q;
    memset(&q, 0, sizeof q);
    q.rows = rows;
    q.cols = cols;
    q.bpr = fp4s_spec_blocks_per_row(s, cols);
    q.sfn = (rows + 127) / 128 * 128 * (cols / 128 + 1) + 1;
    q.codes = calloc(rows * cols + 1, 1);
    q.scales = calloc(rows * q.bpr + 1, 1);
    q.sf = calloc(q.sfn, sizeof(float));
    q.deq = calloc(rows * cols + 1, sizeof(float));
    float amax = fp4s_amax(x, rows, cols, cols, NULL);
    q.rc = fp4s_tscale_init(s, amax, &q.ts);
    if (q.rc) return q;
    size_t ldsf = s->format == FP4S_FP8 ? (s->fp8_gran == FP4S_FP8_TENSOR ? 1 : cols / 128) : 1;
    fp4s_qout o = {.codes = q.codes, .ld_codes = cols, .scales = q.scales, .ld_scales = q.bpr,
                   .scale_f32 = q.sf, .ld_scale_f32 = ldsf, .dequant = q.deq, .ld_dequant = cols};
    q.rc = fp4s_quantize(s, &q.ts, x, rows, cols, cols, 0, &o, &q.st);
    return q;
}

static inline fp4s_spec prof(fp4s_format f, const char *name)
{
    fp4s_spec s;
    int rc = fp4s_spec_profile(&s, f, name);
    if (rc) abort();
    return s;
}

/* xorshift64* and a Box-Muller normal */
static inline uint64_t rng_next(uint64_t *st)
{
    uint64_t x = *st;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *st = x;
    return x * 0x2545F4914F6CDD1Dull;
}
static inline double rng_unif(uint64_t *st) { return ((rng_next(st) >> 11) + 0.5) * 0x1p-53; }
/* x[0 .. n) (n even; an odd last one is left as it is) standard normals, two
 * from each pair of uniforms */
static inline void rng_normals(float *x, size_t n, uint64_t *st)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        double u1 = rng_unif(st), u2 = rng_unif(st);
        double r = sqrt(-2.0 * log(u1));
        x[i] = (float)(r * cos(6.283185307179586 * u2));
        x[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
}
#endif
