/* Batch coupling (<fp4scope/batch.h>): the same rows quantized under two
 * batch compositions, and what differs only because of who shares the
 * tensor amax. */
#include <fp4scope/batch.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h"

static const char *const kind_names[FP4S_BATCH_KIND_COUNT] = {"packed", "decode", "tensor", "row"};

const char *fp4s_batch_kind_name(fp4s_batch_kind k)
{
    return (unsigned)k < FP4S_BATCH_KIND_COUNT ? kind_names[k] : "?";
}

int fp4s_batch_kind_parse(const char *s, fp4s_batch_kind *out)
{
    for (int k = 0; s && k < FP4S_BATCH_KIND_COUNT; k++)
        if (!strcmp(s, kind_names[k])) {
            *out = (fp4s_batch_kind)k;
            return 0;
        }
    return fp4s_error_set(FP4S_EINVAL, "batch composition '%s': expected packed, decode, tensor or row",
                          s ? s : "(null)");
}

size_t fp4s_batch_plan_size(void) { return sizeof(fp4s_batch_plan); }
size_t fp4s_batch_opts_size(void) { return sizeof(fp4s_batch_opts); }
size_t fp4s_batch_result_size(void) { return sizeof(fp4s_batch_result); }

void fp4s_batch_opts_defaults(fp4s_batch_opts *o)
{
    if (o) memset(o, 0, sizeof *o);
}

int fp4s_batch_plan_parse(const char *s, fp4s_batch_plan *out)
{
    if (!s || !out) return fp4s_error_set(FP4S_EINVAL, "batch composition: missing argument");
    memset(out, 0, sizeof *out);
    char kind[16];
    const char *colon = strchr(s, ':');
    size_t kl = colon ? (size_t)(colon - s) : strlen(s);
    if (kl >= sizeof kind) kl = sizeof kind - 1;
    memcpy(kind, s, kl);
    kind[kl] = '\0';
    int rc = fp4s_batch_kind_parse(kind, &out->kind);
    if (rc) return fp4s_error_set(rc, "batch composition '%s': expected packed:TOKENS, decode:SEQS, tensor or row", s);
    bool sized = out->kind == FP4S_BATCH_PACKED || out->kind == FP4S_BATCH_DECODE;
    if (sized != (colon != NULL))
        return fp4s_error_set(FP4S_EINVAL, "batch composition '%s': %s %s a size (%s:N)", s, kind,
                              sized ? "needs" : "takes no", kind);
    if (colon) {
        char *end = NULL;
        unsigned long long v = strtoull(colon + 1, &end, 10);
        if (end == colon + 1 || *end || colon[1] == '-' || v < 1 || v > (1ULL << 40))
            return fp4s_error_set(FP4S_EINVAL, "batch composition '%s': size '%s' is not an integer 1 to 2^40", s,
                                  colon + 1);
        out->size = v;
    }
    return 0;
}

void fp4s_batch_plan_str(const fp4s_batch_plan *p, char *buf, size_t n)
{
    if (!buf || !n) return;
    if (!p) {
        snprintf(buf, n, "?");
        return;
    }
    if (p->kind == FP4S_BATCH_PACKED || p->kind == FP4S_BATCH_DECODE)
        snprintf(buf, n, "%s:%llu", fp4s_batch_kind_name(p->kind), (unsigned long long)p->size);
    else
        snprintf(buf, n, "%s", fp4s_batch_kind_name(p->kind));
}

/* ---- group composition --------------------------------------------------------- */

typedef struct ikey { int64_t a, b; size_t i; } ikey;

static int cmp_ikey(const void *p, const void *q)
{
    const ikey *x = p, *y = q;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

int fp4s_batch_groups(const fp4s_batch_plan *p, const int64_t *seq, const int64_t *pos, size_t rows,
                      int64_t *group)
{
    if (!p || (rows && !group)) return fp4s_error_set(FP4S_EINVAL, "batch groups: missing argument");
    if ((unsigned)p->kind >= FP4S_BATCH_KIND_COUNT)
        return fp4s_error_set(FP4S_EINVAL, "batch groups: unknown composition %d", (int)p->kind);
    if (p->kind == FP4S_BATCH_TENSOR) {
        for (size_t i = 0; i < rows; i++) group[i] = 0;
        return 0;
    }
    if (p->kind == FP4S_BATCH_ROW) {
        for (size_t i = 0; i < rows; i++) group[i] = (int64_t)i;
        return 0;
    }
    if (rows && !seq) return fp4s_error_set(FP4S_EINVAL, "batch groups: %s needs each row's sequence id",
                                            fp4s_batch_kind_name(p->kind));
    if (p->kind == FP4S_BATCH_DECODE && rows && !pos)
        return fp4s_error_set(FP4S_EINVAL, "batch groups: decode needs each row's position");
    if (p->size == 0) return fp4s_error_set(FP4S_EINVAL, "batch groups: size 0");
    /* the sequences in increasing id order: each one's rank */
    ikey *k = malloc((rows ? rows : 1) * sizeof *k);
    if (!k) return fp4s_error_set(FP4S_ENOMEM, "batch groups: out of memory");
    for (size_t i = 0; i < rows; i++) k[i] = (ikey){seq[i], 0, i};
    qsort(k, rows, sizeof *k, cmp_ikey);
    if (p->kind == FP4S_BATCH_PACKED) {
        /* whole sequences into micro-batches of at most size tokens */
        int64_t mb = 0;
        uint64_t fill = 0;
        for (size_t a = 0; a < rows;) {
            size_t b = a;
            while (b < rows && k[b].a == k[a].a) b++;
            uint64_t len = b - a;
            if (fill && fill + len > p->size) {
                mb++;
                fill = 0;
            }
            for (size_t j = a; j < b; j++) group[k[j].i] = mb;
            fill += len;
            if (fill >= p->size) {
                mb++;
                fill = 0;
            }
            a = b;
        }
    } else {
        /* decode: sequence rank / size, then the position: one group per (slot batch, position) */
        int64_t rank = -1, prev = 0;
        for (size_t j = 0; j < rows; j++) {
            if (j == 0 || k[j].a != prev) rank++;
            prev = k[j].a;
            k[j].b = rank / (int64_t)(p->size > (uint64_t)INT64_MAX ? INT64_MAX : p->size);
        }
        /* re-key by (slot batch, position) and number the groups */
        for (size_t j = 0; j < rows; j++) {
            int64_t sb = k[j].b;
            k[j].a = sb;
            k[j].b = pos[k[j].i];
        }
        qsort(k, rows, sizeof *k, cmp_ikey);
        int64_t g = -1;
        for (size_t j = 0; j < rows; j++) {
            if (j == 0 || k[j].a != k[j - 1].a || k[j].b != k[j - 1].b) g++;
            group[k[j].i] = g;
        }
    }
    free(k);
    return 0;
}

/* ---- quantize under a composition ---------------------------------------------------- */

typedef struct qbuf {
    uint8_t *codes, *scales;
    float *deq, *sdec; /* sdec: each row's tensor decode scale */
    uint64_t groups;
} qbuf;

static void qbuf_free(qbuf *q)
{
    free(q->codes);
    free(q->scales);
    free(q->deq);
    free(q->sdec);
    memset(q, 0, sizeof *q);
}

static int quant_grouped(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                         const int64_t *grp, qbuf *q)
{
    const size_t nb = cols / s->block;
    q->codes = malloc(rows * cols);
    q->scales = malloc(rows * (nb ? nb : 1));
    q->deq = malloc(rows * cols * sizeof(float));
    q->sdec = malloc(rows * sizeof(float));
    ikey *k = malloc(rows * sizeof *k);
    float *xb = malloc(rows * cols * sizeof(float));
    uint8_t *cb = malloc(rows * cols), *sb = malloc(rows * (nb ? nb : 1));
    float *db = malloc(rows * cols * sizeof(float)), *rs = malloc(rows * sizeof(float));
    int rc = 0;
    if (!q->codes || !q->scales || !q->deq || !q->sdec || !k || !xb || !cb || !sb || !db || !rs) {
        rc = fp4s_error_set(FP4S_ENOMEM, "batch: out of memory for %zu x %zu", rows, cols);
        goto out;
    }
    for (size_t i = 0; i < rows; i++) k[i] = (ikey){grp[i], 0, i};
    qsort(k, rows, sizeof *k, cmp_ikey);
    const bool row_scaled = s->format == FP4S_NVFP4 && s->nv_scope == FP4S_SCOPE_ROW;
    for (size_t a = 0; a < rows && !rc;) {
        size_t b = a;
        while (b < rows && k[b].a == k[a].a) b++;
        size_t m = b - a;
        for (size_t j = 0; j < m; j++) memcpy(xb + j * cols, x + k[a + j].i * ld, cols * sizeof(float));
        fp4s_tscale ts;
        float amax = fp4s_spec_amax(s, xb, m, cols, cols, NULL);
        rc = fp4s_tscale_init(s, amax, &ts);
        fp4s_qout o;
        memset(&o, 0, sizeof o);
        o.codes = cb;
        o.ld_codes = cols;
        o.scales = sb;
        o.ld_scales = nb;
        o.dequant = db;
        o.ld_dequant = cols;
        if (row_scaled) o.row_amax = rs;
        if (!rc) rc = fp4s_quantize(s, &ts, xb, m, cols, cols, 0, &o, NULL);
        fp4s_tscale rts;
        for (size_t j = 0; !rc && j < m; j++) {
            size_t i = k[a + j].i;
            memcpy(q->codes + i * cols, cb + j * cols, cols);
            memcpy(q->scales + i * nb, sb + j * nb, nb);
            memcpy(q->deq + i * cols, db + j * cols, cols * sizeof(float));
            if (row_scaled && !(rc = fp4s_tscale_init(s, rs[j], &rts))) q->sdec[i] = rts.s_dec;
            else q->sdec[i] = ts.s_dec;
        }
        q->groups++;
        a = b;
    }
out:
    free(k);
    free(xb);
    free(cb);
    free(sb);
    free(db);
    free(rs);
    return rc;
}

/* ---- products ---------------------------------------------------------------------------- */

/* Y [m, n] = A [m, k] W^T (W [n, k] float) in double. */
static int gemm_d(const double *A, size_t m, size_t k, const float *W, size_t n, double *Y)
{
    double *Wd = malloc(n * k * sizeof *Wd);
    if (!Wd) return fp4s_error_set(FP4S_ENOMEM, "batch: out of memory for the weight [%zu, %zu]", n, k);
    for (size_t i = 0; i < n * k; i++) Wd[i] = W[i];
#if FP4S_HAVE_BLAS
    const fp4s_blas_fns *bl = fp4s_blas();
    if (bl && m <= (size_t)INT32_MAX && n <= (size_t)INT32_MAX && k <= (size_t)INT32_MAX) {
        bl->dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0, A, (int)k, Wd, (int)k, 0.0,
                  Y, (int)n);
        free(Wd);
        return 0;
    }
    fp4s_error_clear();
#endif
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0;
            for (size_t c = 0; c < k; c++) acc += A[i * k + c] * Wd[j * k + c];
            Y[i * n + j] = acc;
        }
    free(Wd);
    return 0;
}

/* log-softmax of one row of logits: log p[v] = y[v] - lse. */
static double lse(const double *y, size_t n, size_t *am)
{
    double m = -INFINITY;
    *am = 0;
    for (size_t v = 0; v < n; v++)
        if (y[v] > m) {
            m = y[v];
            *am = v;
        }
    double z = 0;
    for (size_t v = 0; v < n; v++) z += exp(y[v] - m);
    return m + log(z);
}

/* ---- the evaluation ------------------------------------------------------------------------ */

void fp4s_batch_result_merge(fp4s_batch_result *a, const fp4s_batch_result *b)
{
    if (!a || !b) return;
    a->rows += b->rows;
    a->elements += b->elements;
    a->blocks += b->blocks;
    a->groups_a += b->groups_a;
    a->groups_b += b->groups_b;
    a->code_flips += b->code_flips;
    a->scale_flips += b->scale_flips;
    a->rows_changed += b->rows_changed;
    a->tscale_rows += b->tscale_rows;
    a->deq_diff2 += b->deq_diff2;
    a->x2 += b->x2;
    a->out_diff2 += b->out_diff2;
    a->out_ref2 += b->out_ref2;
    a->lp_rows += b->lp_rows;
    a->lp_sum_abs += b->lp_sum_abs;
    if (b->lp_max_abs > a->lp_max_abs) a->lp_max_abs = b->lp_max_abs;
    a->kl_sum += b->kl_sum;
    a->argmax_flips += b->argmax_flips;
}

static bool same_code(uint8_t a, uint8_t b) { return a == b || ((a & 7) == 0 && (b & 7) == 0); }

static bool same_float(float a, float b) { return a == b || (a != a && b != b); }

int fp4s_batch_eval(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld,
                    const int64_t *group_a, const int64_t *group_b, const fp4s_batch_opts *o,
                    fp4s_batch_result *r, uint64_t *row_flips)
{
    if (!s || !r || (rows && (!x || !group_a || !group_b)))
        return fp4s_error_set(FP4S_EINVAL, "batch: missing argument");
    int rc = fp4s_spec_check(s);
    if (rc) {
        fp4s_error_prefix("batch");
        return rc;
    }
    if (s->format == FP4S_FP8)
        return fp4s_error_set(FP4S_ENOTSUP, "batch: the FP4 formats only (MXFP4, NVFP4)");
    if (s->tile2d)
        return fp4s_error_set(FP4S_ENOTSUP, "batch: 2-D tiles group rows by position, not by batch (activations "
                              "are 1-D: take --1d)");
    if (s->sr)
        return fp4s_error_set(FP4S_ENOTSUP, "batch: stochastic rounding draws by position in the tensor: the two "
                              "compositions would differ by their draws, not by their scales");
    if (cols % s->block)
        return fp4s_error_set(FP4S_ESHAPE, "batch: %zu columns is not a multiple of the block size %u", cols, s->block);
    fp4s_batch_opts dflt;
    if (!o) {
        fp4s_batch_opts_defaults(&dflt);
        o = &dflt;
    }
    if (o->w && o->n == 0) return fp4s_error_set(FP4S_EINVAL, "batch: a weight of 0 rows");
    if (o->lm_head && !o->w) return fp4s_error_set(FP4S_EINVAL, "batch: the LM head needs its weight");
    if (o->lm_head && o->token)
        for (size_t i = 0; i < rows; i++)
            if (o->token[i] < 0 || (uint64_t)o->token[i] >= o->n)
                return fp4s_error_set(FP4S_ERANGE, "batch: token %lld of row %zu is outside the vocabulary of %zu",
                                      (long long)o->token[i], i, o->n);
    if (ld < cols) ld = cols;
    if (rows == 0) return 0;
    qbuf A = {0}, B = {0};
    double *D = NULL, *Y = NULL, *Y2 = NULL, *QA = NULL;
    size_t *changed = NULL;
    if ((rc = quant_grouped(s, x, rows, cols, ld, group_a, &A)) || (rc = quant_grouped(s, x, rows, cols, ld, group_b, &B)))
        goto out;
    const size_t nb = cols / s->block;
    fp4s_batch_result t;
    memset(&t, 0, sizeof t);
    t.rows = rows;
    t.elements = (uint64_t)rows * cols;
    t.blocks = (uint64_t)rows * nb;
    t.groups_a = A.groups;
    t.groups_b = B.groups;
    changed = malloc(rows * sizeof *changed);
    if (!changed) {
        rc = fp4s_error_set(FP4S_ENOMEM, "batch: out of memory");
        goto out;
    }
    size_t nc = 0;
    for (size_t i = 0; i < rows; i++) {
        uint64_t flips = 0, sflips = 0;
        for (size_t c = 0; c < cols; c++) {
            size_t e = i * cols + c;
            flips += !same_code(A.codes[e], B.codes[e]);
            float xv = x[i * ld + c];
            if (isfinite(xv)) {
                t.x2 += (double)xv * xv;
                if (isfinite(A.deq[e]) && isfinite(B.deq[e])) {
                    double d = (double)A.deq[e] - B.deq[e];
                    t.deq_diff2 += d * d;
                }
            }
        }
        for (size_t b = 0; b < nb; b++) sflips += A.scales[i * nb + b] != B.scales[i * nb + b];
        t.code_flips += flips;
        t.scale_flips += sflips;
        if (!same_float(A.sdec[i], B.sdec[i])) t.tscale_rows++;
        if (row_flips) row_flips[i] = flips;
        /* a row whose dequantized values differ (codes and scales equal but another tensor scale) counts too */
        bool dq = false;
        for (size_t c = 0; c < cols && !dq; c++) dq = !same_float(A.deq[i * cols + c], B.deq[i * cols + c]);
        if (flips || sflips || dq) {
            t.rows_changed++;
            changed[nc++] = i;
        }
    }
    if (o->w) {
        const size_t n = o->n;
        /* the reference ||QA W^T||^2 over every row, in pieces of rows */
        const size_t piece = 256;
        QA = malloc(piece * cols * sizeof *QA);
        Y = malloc(piece * n * sizeof *Y);
        Y2 = malloc(piece * n * sizeof *Y2);
        D = malloc(piece * cols * sizeof *D);
        if (!QA || !Y || !Y2 || !D) {
            rc = fp4s_error_set(FP4S_ENOMEM, "batch: out of memory for %zu x %zu outputs", piece, n);
            goto out;
        }
        for (size_t r0 = 0; r0 < rows && !rc; r0 += piece) {
            size_t m = rows - r0 < piece ? rows - r0 : piece;
            for (size_t i = 0; i < m * cols; i++) {
                float v = A.deq[r0 * cols + i];
                QA[i] = isfinite(v) ? v : 0.0;
            }
            if ((rc = gemm_d(QA, m, cols, o->w, n, Y))) break;
            for (size_t i = 0; i < m * n; i++) t.out_ref2 += Y[i] * Y[i];
        }
        /* the changed rows under both compositions */
        for (size_t c0 = 0; c0 < nc && !rc; c0 += piece) {
            size_t m = nc - c0 < piece ? nc - c0 : piece;
            for (size_t j = 0; j < m; j++)
                for (size_t c = 0; c < cols; c++) {
                    size_t e = changed[c0 + j] * cols + c;
                    float a = A.deq[e], b = B.deq[e];
                    QA[j * cols + c] = isfinite(a) ? a : 0.0;
                    D[j * cols + c] = isfinite(b) ? b : 0.0;
                }
            if ((rc = gemm_d(QA, m, cols, o->w, n, Y)) || (rc = gemm_d(D, m, cols, o->w, n, Y2))) break;
            for (size_t j = 0; j < m; j++) {
                const double *ya = Y + j * n, *yb = Y2 + j * n;
                for (size_t v = 0; v < n; v++) t.out_diff2 += (ya[v] - yb[v]) * (ya[v] - yb[v]);
                if (!o->lm_head) continue;
                size_t ama, amb;
                double la = lse(ya, n, &ama), lb = lse(yb, n, &amb);
                size_t i = changed[c0 + j];
                int64_t tok = o->token ? o->token[i] : (int64_t)ama;
                double dlp = fabs((ya[tok] - la) - (yb[tok] - lb));
                t.lp_sum_abs += dlp;
                if (dlp > t.lp_max_abs) t.lp_max_abs = dlp;
                double kl = 0;
                for (size_t v = 0; v < n; v++) {
                    double pa = exp(ya[v] - la);
                    kl += pa * ((ya[v] - la) - (yb[v] - lb));
                }
                t.kl_sum += kl > 0 ? kl : 0;
                t.argmax_flips += ama != amb;
            }
        }
        if (o->lm_head) t.lp_rows = rows;
    }
    if (!rc) fp4s_batch_result_merge(r, &t);
out:
    qbuf_free(&A);
    qbuf_free(&B);
    free(changed);
    free(D);
    free(Y);
    free(Y2);
    free(QA);
    return rc;
}
