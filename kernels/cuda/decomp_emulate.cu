/* Host emulation of the decomposition kernels (decompose.cu): the codes and
 * scales from the quantize kernels' emulation, then every row's 8 lanes
 * through decomp_lane.cuh's functions in the kernels' order, the lanes summed
 * in the kernels' (and the CPU's) tree, the rows into exact sums; channel
 * groups through fp4s_chacc_add_elem as the channel kernel does. tests/cuda
 * compares the result with the CPU decomposer bit for bit. */
#include "cuda_internal.cuh"
#include "decomp_lane.cuh"

#include <stdlib.h>

namespace {

/* The 8 lanes into p (the kernels' reduce_lanes), lanes and counts cleared. */
void reduce8(cu_dk_lane *ln, uint64_t (*nfc)[3], part *p)
{
    double s[S_CH];
    for (int k = 0; k < S_CH; k++) {
        double v[8];
        for (int j = 0; j < 8; j++) v[j] = ln[j].l[k];
        s[k] = cu_dk_sum8(v);
    }
    uint64_t c[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j++) c[k] += ln[j].c[k];
    double r = 0.0;
    for (int j = 0; j < 8; j++) r = fmax(r, ln[j].r);
    cu_dk_lanes_into(p, s, c, r);
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 3; k++) {
            p->c[C_NAN + k] += nfc[j][k];
            nfc[j][k] = 0;
        }
        cu_dk_lane_init(&ln[j]);
    }
}

} // namespace

int fp4s_cu_decomp_emulate(const fp4s_cu_dk *k, fp4s_dtype dtype, const void *x, bool x_host, size_t nrows,
                           size_t ld, fp4s_cu_dk_out *out, void *stream)
{
    (void)stream;
    fp4s_cu_params qp;
    int rc = fp4s_cu_prepare(&k->spec, &k->ts, nrows, k->cols, &qp);
    if (rc) return rc;
    const int dt = fp4s_cu_dtype(dtype, "decompose");
    if (dt < 0) return dt;
    if (!x_host) return fp4s_error_set(FP4S_EINVAL, "cuda emulation: decompose: the input must be in host memory");
    const size_t cols = k->cols, nblk = k->nblk, bs = k->bs;
    memset(&out->tot, 0, sizeof out->tot);
    fp4s_dextr_init(&out->tot.x);
    memset(out->hd, 0, sizeof out->hd);
    memset(out->he, 0, sizeof out->he);
    if (nrows == 0 || cols == 0) return 0;
    uint8_t *codes = static_cast<uint8_t *>(malloc(nrows * cols));
    uint8_t *scales = static_cast<uint8_t *>(malloc(nrows * nblk));
    if (!codes || !scales) {
        free(codes);
        free(scales);
        return fp4s_error_set(FP4S_ENOMEM, "cuda emulation: decompose: out of memory");
    }
    rc = fp4s_cuda_emulate_quantize_ex(&k->spec, &k->ts, dtype, x, nrows, cols, ld, false, codes, scales);
    const int by = k->by;
    for (size_t row = 0; row < nrows && rc == 0; row++) {
        const uint8_t *cr = codes + row * cols, *sr = scales + row * nblk;
        part rowp, bp;
        fp4s_dk_part_init(&rowp);
        cu_dk_lane ln[8];
        uint64_t nfc[8][3];
        for (int j = 0; j < 8; j++) {
            cu_dk_lane_init(&ln[j]);
            nfc[j][0] = nfc[j][1] = nfc[j][2] = 0;
        }
        for (size_t b = 0; b < nblk; b++) {
            part *tp = &rowp;
            if (by == FP4S_GROUP_BLOCK) {
                fp4s_dk_part_init(&bp);
                tp = &bp;
            }
            const uint8_t sc = sr[b];
            const fp4s_cu_dq dq = cu_deq_block(qp, sc);
            float xf[256], qf[256];
            uint32_t mx = 0, mq = 0;
            for (size_t i = 0; i < bs; i++) {
                xf[i] = cu_dk_load(x, dt, row * ld + b * bs + i);
                qf[i] = cu_deq_elem(dq, cr[b * bs + i]);
                mx = cu_dk_abits(xf[i]) > mx ? cu_dk_abits(xf[i]) : mx;
                mq = cu_dk_abits(qf[i]) > mq ? cu_dk_abits(qf[i]) : mq;
            }
            if (mx >= 0x7f800000u || mq >= 0x7f800000u) {
                if (mx >= 0x7f800000u) tp->c[C_NFB]++;
                else tp->c[C_NFOUT]++;
                for (size_t i = 0; i < bs; i++) {
                    const int kind = cu_dk_nf_kind(xf[i]);
                    nfc[i % 8][kind - C_NAN]++;
                    if (out->ch) out->ch[b * bs + i].c[kind]++;
                }
            } else {
                kconst kc;
                const int hb = fp4s_dk_block_stats(k->seff, k->uf, k->tie_up, cu_float(mx), sc, tp, &kc);
                if (hb >= 0) out->hd[hb]++;
                tp->c[C_ELEM] += bs;
                /* lane j takes elements j, j + 8, ... (its own order) */
                for (int j = 0; j < 8; j++)
                    for (size_t i = (size_t)j; i < bs; i += 8) {
                        const int bin = cu_dk_elem(&kc, xf[i], qf[i], cr[b * bs + i], &ln[j]);
                        if (kc.mpos) out->he[bin]++;
                    }
                if (out->ch) {
                    kconst kch; /* the channel kernel's own constants (the same) */
                    const float m = cu_float(mx);
                    fp4s_decomp_kconst(m, k->uf[sc] && m != 0.0f, k->tie_up, &kch);
                    for (size_t i = 0; i < bs; i++)
                        fp4s_chacc_add_elem(&out->ch[b * bs + i], &kch, k->tie_up, xf[i], qf[i], cr[b * bs + i]);
                }
            }
            if (by == FP4S_GROUP_BLOCK) {
                reduce8(ln, nfc, &bp);
                out->units[row * nblk + b] = bp;
                fp4s_dk_part_add(&rowp, &bp);
            }
        }
        if (by != FP4S_GROUP_BLOCK) reduce8(ln, nfc, &rowp);
        if (by == FP4S_GROUP_ROW) out->units[row] = rowp;
        for (int i = 0; i < S_N; i++) xs_add(&out->tot.s[i], rowp.s[i]);
        for (int i = 0; i < C_NUM; i++) out->tot.c[i] += rowp.c[i];
        fp4s_dextr_merge(&out->tot.x, &rowp.x);
    }
    free(codes);
    free(scales);
    return rc;
}

/* ---- the streaming session in host memory (fp4s_cu_ds_emulate) ---- */

struct eds_state { /* behind fp4s_cu_ds */
    fp4s_cu_dk k;
    fp4s_dtype dtype;
    bool keep;
    size_t esz, cols, chunk_rows, keep_row0, keep_rows, nunit;
    void *pin[FP4S_CU_DS_SLOTS];
    part *units[FP4S_CU_DS_SLOTS];
    bool busy[FP4S_CU_DS_SLOTS];
    size_t n[FP4S_CU_DS_SLOTS], r0[FP4S_CU_DS_SLOTS];
    fp4s_cu_dk_out run; /* everything so far (run.ch: the channels) */
    char *kept;
    uint32_t amax_bits;
};

namespace {

size_t g_keep_limit; /* 0: no limit (fp4s_cu_ds_emulate_keep_limit) */

void eds_close(fp4s_cu_ds **ps)
{
    eds_state *s = ps ? reinterpret_cast<eds_state *>(*ps) : nullptr;
    if (!s) return;
    for (int i = 0; i < FP4S_CU_DS_SLOTS; i++) {
        free(s->pin[i]);
        free(s->units[i]);
    }
    free(s->run.ch);
    free(s->kept);
    free(s);
    *ps = nullptr;
}

int eds_open(const fp4s_cu_dk *k, fp4s_dtype dtype, size_t chunk_rows, size_t keep_row0, size_t keep_rows,
             fp4s_cu_ds **out)
{
    *out = nullptr;
    const int dt = fp4s_cu_dtype(dtype, "decompose");
    if (dt < 0) return dt;
    const size_t esz = dt == CU_DT_F32 ? 4 : 2;
    if (keep_rows && g_keep_limit && keep_rows * k->cols * esz > g_keep_limit)
        return fp4s_error_set(FP4S_ENOMEM, "cuda emulation: decompose: %zu rows do not fit the device", keep_rows);
    eds_state *s = static_cast<eds_state *>(calloc(1, sizeof *s));
    if (!s) return fp4s_error_set(FP4S_ENOMEM, "cuda emulation: decompose: out of memory");
    s->k = *k;
    s->dtype = dtype;
    s->keep = keep_rows > 0;
    s->esz = dt == CU_DT_F32 ? 4 : 2;
    s->cols = k->cols;
    s->chunk_rows = chunk_rows;
    s->keep_row0 = keep_row0;
    s->keep_rows = keep_rows;
    s->nunit = s->keep ? 0 : (k->by == FP4S_GROUP_ROW ? 1 : (k->by == FP4S_GROUP_BLOCK ? k->nblk : 0));
    fp4s_dextr_init(&s->run.tot.x);
    bool ok = true;
    for (int i = 0; i < FP4S_CU_DS_SLOTS; i++) {
        s->pin[i] = malloc(chunk_rows * s->cols * s->esz);
        ok = ok && s->pin[i];
        if (s->nunit) {
            s->units[i] = static_cast<part *>(malloc(chunk_rows * s->nunit * sizeof(part)));
            ok = ok && s->units[i];
        }
    }
    if (!s->keep && k->by == FP4S_GROUP_CHANNEL) {
        s->run.ch = static_cast<chacc *>(calloc(s->cols, sizeof(chacc)));
        ok = ok && s->run.ch;
    }
    if (s->keep) {
        s->kept = static_cast<char *>(malloc(keep_rows * s->cols * s->esz));
        ok = ok && s->kept;
    }
    if (!ok) {
        fp4s_cu_ds *p = reinterpret_cast<fp4s_cu_ds *>(s);
        eds_close(&p);
        return fp4s_error_set(FP4S_ENOMEM, "cuda emulation: decompose: out of memory");
    }
    *out = reinterpret_cast<fp4s_cu_ds *>(s);
    return 0;
}

void *eds_slot(fp4s_cu_ds *h, int i) { eds_state *s = reinterpret_cast<eds_state *>(h); return s->pin[i]; }

int eds_submit(fp4s_cu_ds *h, int i, size_t n, size_t row0)
{
    eds_state *s = reinterpret_cast<eds_state *>(h);
    if (s->busy[i] || n > s->chunk_rows || (s->keep && (row0 < s->keep_row0 || row0 - s->keep_row0 + n > s->keep_rows)))
        return fp4s_error_set(FP4S_EINTERNAL, "cuda emulation: decompose: slot %d misused", i);
    const int dt = fp4s_cu_dtype(s->dtype, "decompose");
    if (s->keep) {
        char *dst = s->kept + (row0 - s->keep_row0) * s->cols * s->esz;
        memcpy(dst, s->pin[i], n * s->cols * s->esz);
        for (size_t j = 0; j < n * s->cols; j++) {
            const uint32_t a = cu_dk_abits(cu_dk_load(dst, dt, j));
            if (a < 0x7f800000u && a > s->amax_bits) s->amax_bits = a;
        }
    } else {
        fp4s_cu_dk_out o;
        memset(&o, 0, sizeof o);
        o.units = s->units[i];
        o.ch = s->run.ch; /* exact sums: adding into them in any order is the same */
        int rc = fp4s_cu_decomp_emulate(&s->k, s->dtype, s->pin[i], true, n, s->cols, &o, nullptr);
        if (rc) return rc;
        for (int k = 0; k < S_N; k++) xs_merge(&s->run.tot.s[k], &o.tot.s[k]);
        for (int k = 0; k < C_NUM; k++) s->run.tot.c[k] += o.tot.c[k];
        fp4s_dextr_merge(&s->run.tot.x, &o.tot.x);
        for (int b = 0; b < FP4S_HIST_BINS; b++) {
            s->run.hd[b] += o.hd[b];
            s->run.he[b] += o.he[b];
        }
    }
    s->busy[i] = true;
    s->n[i] = n;
    s->r0[i] = row0;
    return 0;
}

int eds_wait(fp4s_cu_ds *h, int i, const part **units, size_t *n, size_t *row0)
{
    eds_state *s = reinterpret_cast<eds_state *>(h);
    *units = nullptr;
    *n = 0;
    *row0 = 0;
    if (!s->busy[i]) return 0;
    s->busy[i] = false;
    if (s->nunit) {
        *units = s->units[i];
        *n = s->n[i];
        *row0 = s->r0[i];
    }
    return 0;
}

int eds_finish(fp4s_cu_ds *h, fp4s_cu_dk_out *out)
{
    eds_state *s = reinterpret_cast<eds_state *>(h);
    for (int i = 0; i < FP4S_CU_DS_SLOTS; i++)
        if (s->busy[i]) return fp4s_error_set(FP4S_EINTERNAL, "cuda emulation: decompose: slot %d not waited for", i);
    out->tot = s->run.tot;
    memcpy(out->hd, s->run.hd, sizeof out->hd);
    memcpy(out->he, s->run.he, sizeof out->he);
    if (out->ch && s->run.ch) memcpy(out->ch, s->run.ch, s->cols * sizeof(chacc));
    return 0;
}

int eds_amax(fp4s_cu_ds *h, float *amax, const void **kept)
{
    eds_state *s = reinterpret_cast<eds_state *>(h);
    memcpy(amax, &s->amax_bits, sizeof *amax);
    *kept = s->kept;
    return 0;
}

} // namespace

void fp4s_cu_ds_emulate_keep_limit(size_t bytes) { g_keep_limit = bytes; }

extern "C" const fp4s_cu_ds_ops fp4s_cu_ds_emulate = {true, eds_open, eds_slot, eds_submit, eds_wait, eds_finish,
                                                       eds_amax, eds_close};
