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
    double s[S_CH + 4];
    for (int k = 0; k < S_CH + 4; k++) {
        double v[8];
        for (int j = 0; j < 8; j++) v[j] = ln[j].l[k];
        s[k] = cu_dk_sum8(v);
    }
    double r = 0.0;
    for (int j = 0; j < 8; j++) r = fmax(r, ln[j].r);
    cu_dk_lanes_into(p, s, r);
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
