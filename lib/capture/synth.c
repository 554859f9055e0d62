/* Synthetic captures with LLM-like statistics (fp4-capture synth).
 *
 * Per layer: per-channel log-normal scales with a slow random walk over
 * steps, a few persistent hot channels, Student-t elements; an attention
 * input site over all tokens and, for MoE, one up_proj site per expert that
 * holds the hidden states of the tokens routed to it (top-k over a Zipf
 * popularity, so tokens per expert are uneven). The trainer side is the fp32
 * value rounded to BF16; the rollout side is the same value after a tiny
 * relative perturbation (a different kernel's order of operations) rounded to
 * BF16. Log-probs: per step and token, trainer log-probs from a Gamma law and
 * rollout = trainer + Gaussian mismatch whose std grows from the onset step. */
#include "h5util.h"

#include <fp4scope/codec.h>

#include "fp4s_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if FP4S_HAVE_GSL
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#endif

void fp4s_synth_opts_defaults(fp4s_synth_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->steps = 8;
    o->act_every = 4;
    o->layers = 2;
    o->experts = 4;
    o->top_k = 2;
    o->route_skew = 1.0;
    o->tokens = 128;
    o->hidden = 256;
    o->out_features = 128;
    o->scale_sigma = 1.0;
    o->hot_channels = 4;
    o->hot_factor = 40.0;
    o->tail_df = 4.0;
    o->drift = 0.02;
    o->kernel_noise = 1.0 / 4096.0;
    o->bf16 = true;
    o->weights_per_step = false;
    o->seqs = 8;
    o->seq_len = 32;
    o->lp_mismatch = 0.002;
    o->onset_step = 5;
    o->lp_growth = 2.0;
    o->gzip = 4;
}

/* ---- random numbers ------------------------------------------------------------ */
typedef struct rng {
#if FP4S_HAVE_GSL
    gsl_rng *g;
#else
    uint64_t s[4];
#endif
} rng;

const char *fp4s_synth_rng_name(void)
{
#if FP4S_HAVE_GSL
    return "gsl_rng_mt19937";
#else
    return "fp4s-xoshiro256ss";
#endif
}

#if !FP4S_HAVE_GSL
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xnext(rng *r)
{
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}
#endif

static int rng_init(rng *r, uint64_t seed)
{
#if FP4S_HAVE_GSL
    r->g = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r->g) return -1;
    gsl_rng_set(r->g, (unsigned long)seed);
#else
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
#endif
    return 0;
}

static void rng_free(rng *r)
{
#if FP4S_HAVE_GSL
    gsl_rng_free(r->g);
#else
    (void)r;
#endif
}

static double uniform(rng *r) /* (0, 1) */
{
#if FP4S_HAVE_GSL
    return gsl_rng_uniform_pos(r->g);
#else
    return ((double)(xnext(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
#endif
}

static double gauss(rng *r)
{
#if FP4S_HAVE_GSL
    return gsl_ran_gaussian(r->g, 1.0);
#else
    double u = uniform(r), v = uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
#endif
}

#if !FP4S_HAVE_GSL
static double gamma_mt(rng *r, double a) /* Marsaglia-Tsang, scale 1 */
{
    if (a < 1.0) return gamma_mt(r, a + 1.0) * pow(uniform(r), 1.0 / a);
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = gauss(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = uniform(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}
#endif

static double gamma_draw(rng *r, double shape)
{
#if FP4S_HAVE_GSL
    return gsl_ran_gamma(r->g, shape, 1.0);
#else
    return gamma_mt(r, shape);
#endif
}

static double student_t(rng *r, double df)
{
    if (df <= 0) return gauss(r);
#if FP4S_HAVE_GSL
    return gsl_ran_tdist(r->g, df);
#else
    return gauss(r) / sqrt(2.0 * gamma_draw(r, df / 2.0) / df);
#endif
}

static size_t below(rng *r, size_t n) { return (size_t)(uniform(r) * (double)n) % n; }

/* ---- the generator --------------------------------------------------------------- */
typedef struct layer_state {
    double *ls_attn, *ls_mlp; /* log-scales per channel (with drift applied) */
    int *hot;                 /* hot channel indices */
    int *pop;                 /* expert popularity rank -> expert id */
} layer_state;

static int check_opts(const fp4s_synth_opts *o)
{
#define REQ(cond, ...) \
    if (!(cond)) return fp4s_error_set(FP4S_EINVAL, "synth: " __VA_ARGS__)
    REQ(o->steps >= 1 && o->steps <= 100000, "steps %d out of range 1..100000", o->steps);
    REQ(o->act_every >= 1, "act_every %d must be >= 1", o->act_every);
    REQ(o->layers >= 1 && o->layers <= 1024, "layers %d out of range 1..1024", o->layers);
    REQ(o->experts >= 0 && o->experts <= 1024, "experts %d out of range 0..1024", o->experts);
    REQ(o->experts == 0 || (o->top_k >= 1 && o->top_k <= o->experts),
        "top_k %d must be in 1..experts (%d)", o->top_k, o->experts);
    REQ(o->tokens >= 1 && o->tokens <= (1 << 20), "tokens %d out of range 1..1048576", o->tokens);
    REQ(o->hidden >= 1 && o->hidden <= (1 << 16), "hidden %d out of range 1..65536", o->hidden);
    REQ(o->out_features >= 0 && o->out_features <= (1 << 16), "out_features %d out of range 0..65536",
        o->out_features);
    REQ(o->hot_channels >= 0 && o->hot_channels <= o->hidden, "hot_channels %d must be in 0..hidden",
        o->hot_channels);
    REQ(o->scale_sigma >= 0 && o->scale_sigma <= 10, "scale_sigma %g out of range 0..10", o->scale_sigma);
    REQ(o->hot_factor > 0 && o->hot_factor <= 1e6, "hot_factor %g out of range (0, 1e6]", o->hot_factor);
    REQ(o->tail_df == 0 || (o->tail_df > 0.5 && o->tail_df <= 1e6), "tail_df %g: 0 (Gaussian) or > 0.5",
        o->tail_df);
    REQ(o->drift >= 0 && o->drift <= 1, "drift %g out of range 0..1", o->drift);
    REQ(o->kernel_noise >= 0 && o->kernel_noise <= 0.1, "kernel_noise %g out of range 0..0.1",
        o->kernel_noise);
    REQ(o->route_skew >= 0 && o->route_skew <= 10, "route_skew %g out of range 0..10", o->route_skew);
    REQ(o->seqs >= 0 && o->seq_len >= 1 && (int64_t)o->seqs * o->seq_len <= (1 << 24),
        "seqs %d x seq_len %d out of range", o->seqs, o->seq_len);
    REQ(o->lp_mismatch >= 0 && o->lp_mismatch <= 10, "lp_mismatch %g out of range 0..10", o->lp_mismatch);
    REQ(o->lp_growth >= 1 && o->lp_growth <= 100, "lp_growth %g out of range 1..100", o->lp_growth);
    REQ(o->onset_step >= -1, "onset_step %d must be >= -1", o->onset_step);
    REQ(o->gzip >= 0 && o->gzip <= 9, "gzip %d out of range 0..9", o->gzip);
    REQ(o->seed <= (uint64_t)INT64_MAX, "seed must be below 2^63");
#undef REQ
    return 0;
}

/* Write rows of fp32 values as the trainer (rounded) and rollout (perturbed,
 * rounded) sides of one site. */
static int put_pair(fp4s_capture *c, rng *r, const fp4s_synth_opts *o, int64_t step,
                    const char *site, const float *x, size_t rows, size_t cols, void *tb,
                    void *rb, int64_t token_offset)
{
    size_t n = rows * cols;
    fp4s_capture_meta m;
    fp4s_capture_meta_defaults(&m);
    m.token_offset = token_offset;
    if (o->bf16) {
        uint16_t *t = tb, *ro = rb;
        for (size_t i = 0; i < n; i++) {
            t[i] = fp4s_bf16_encode(x[i], FP4S_TIE_EVEN);
            ro[i] = fp4s_bf16_encode((float)((double)x[i] * (1.0 + o->kernel_noise * gauss(r))), FP4S_TIE_EVEN);
        }
    } else {
        float *t = tb, *ro = rb;
        for (size_t i = 0; i < n; i++) {
            t[i] = x[i];
            ro[i] = (float)((double)x[i] * (1.0 + o->kernel_noise * gauss(r)));
        }
    }
    fp4s_dtype dt = o->bf16 ? FP4S_DT_BF16 : FP4S_DT_F32;
    int rc = fp4s_capture_put(c, step, site, "trainer", dt, tb, rows, cols, cols, &m);
    if (!rc) rc = fp4s_capture_put(c, step, site, "rollout", dt, rb, rows, cols, cols, &m);
    return rc;
}

static int put_weight(fp4s_capture *c, rng *r, const fp4s_synth_opts *o, int64_t step,
                      const char *site, void *buf)
{
    size_t nrow = (size_t)o->out_features, k = (size_t)o->hidden;
    if (!nrow) return 0;
    double inv = 1.0 / sqrt((double)k);
    for (size_t i = 0; i < nrow; i++) {
        double rs = exp(0.3 * gauss(r)) * inv;
        for (size_t j = 0; j < k; j++) {
            float w = (float)(rs * student_t(r, 8.0));
            if (o->bf16)
                ((uint16_t *)buf)[i * k + j] = fp4s_bf16_encode(w, FP4S_TIE_EVEN);
            else
                ((float *)buf)[i * k + j] = w;
        }
    }
    return fp4s_capture_put(c, step, site, "weight", o->bf16 ? FP4S_DT_BF16 : FP4S_DT_F32, buf, nrow,
                            k, k, NULL);
}

static int write_params(fp4s_capture *c, const fp4s_synth_opts *o, const layer_state *L)
{
    int rc = 0;
#define I(name, v) if (!rc) rc = fp4s_capture_attr_i64(c, "/", "synth_" name, (int64_t)(v))
#define F(name, v) if (!rc) rc = fp4s_capture_attr_f64(c, "/", "synth_" name, (double)(v))
    I("seed", o->seed);
    I("steps", o->steps);
    I("act_every", o->act_every);
    I("layers", o->layers);
    I("experts", o->experts);
    I("top_k", o->top_k);
    F("route_skew", o->route_skew);
    I("tokens", o->tokens);
    I("hidden", o->hidden);
    I("out_features", o->out_features);
    F("scale_sigma", o->scale_sigma);
    I("hot_channels", o->hot_channels);
    F("hot_factor", o->hot_factor);
    F("tail_df", o->tail_df);
    F("drift", o->drift);
    F("kernel_noise", o->kernel_noise);
    I("bf16", o->bf16);
    I("weights_per_step", o->weights_per_step);
    I("seqs", o->seqs);
    I("seq_len", o->seq_len);
    F("lp_mismatch", o->lp_mismatch);
    I("onset_step", o->onset_step);
    F("lp_growth", o->lp_growth);
    I("gzip", o->gzip);
#undef I
#undef F
    if (!rc) rc = fp4s_capture_attr_str(c, "/", "synth_rng", fp4s_synth_rng_name());
    if (!rc) rc = fp4s_capture_attr_i64(c, "/", "synthetic", 1);
    /* hot channels per layer: "0:3,17,80,201;1:..." */
    size_t cap = (size_t)o->layers * ((size_t)o->hot_channels * 7 + 8) + 1;
    char *s = malloc(cap);
    if (!s) return FP4S_ENOMEM;
    size_t len = 0;
    s[0] = '\0';
    for (int l = 0; l < o->layers; l++) {
        len += (size_t)snprintf(s + len, cap - len, "%s%d:", l ? ";" : "", l);
        for (int h = 0; h < o->hot_channels; h++)
            len += (size_t)snprintf(s + len, cap - len, "%s%d", h ? "," : "", L[l].hot[h]);
    }
    if (!rc) rc = fp4s_capture_attr_str(c, "/", "synth_hot_channels", s);
    free(s);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int fp4s_capture_synth(const char *path, const fp4s_synth_opts *opts)
{
    fp4s_synth_opts o;
    if (opts)
        o = *opts;
    else
        fp4s_synth_opts_defaults(&o);
    int rc = check_opts(&o);
    if (rc) return rc;
    rng r;
    if (rng_init(&r, o.seed)) return fp4s_error_set(FP4S_ENOMEM, "synth: cannot allocate the RNG");
    size_t T = (size_t)o.tokens, K = (size_t)o.hidden, E = (size_t)o.experts;
    size_t maxrows = T > (size_t)o.out_features ? T : (size_t)o.out_features;
    layer_state *L = calloc((size_t)o.layers, sizeof *L);
    float *x = malloc(sizeof(float) * T * K), *hm = malloc(sizeof(float) * T * K);
    float *xe = malloc(sizeof(float) * T * K);
    void *tb = malloc(4 * maxrows * K), *rb = malloc(4 * maxrows * K);
    int *assign = malloc(sizeof(int) * T * (E ? (size_t)o.top_k : 1));
    double *pw = malloc(sizeof(double) * (E ? E : 1));
    size_t nlp = (size_t)o.seqs * (size_t)o.seq_len;
    float *lpt = malloc(sizeof(float) * (nlp ? nlp : 1)), *lpr = malloc(sizeof(float) * (nlp ? nlp : 1));
    int64_t *seq = malloc(sizeof(int64_t) * (nlp ? nlp : 1)), *pos = malloc(sizeof(int64_t) * (nlp ? nlp : 1));
    uint8_t *mask = malloc(nlp ? nlp : 1);
    fp4s_capture *c = NULL;
    if (!L || !x || !hm || !xe || !tb || !rb || !assign || !pw || !lpt || !lpr || !seq || !pos || !mask) {
        rc = fp4s_error_set(FP4S_ENOMEM, "synth: out of memory (tokens %d, hidden %d)", o.tokens, o.hidden);
        goto out;
    }
    for (int l = 0; l < o.layers; l++) {
        L[l].ls_attn = malloc(sizeof(double) * K);
        L[l].ls_mlp = malloc(sizeof(double) * K);
        L[l].hot = malloc(sizeof(int) * (size_t)(o.hot_channels ? o.hot_channels : 1));
        L[l].pop = malloc(sizeof(int) * (E ? E : 1));
        if (!L[l].ls_attn || !L[l].ls_mlp || !L[l].hot || !L[l].pop) {
            rc = fp4s_error_set(FP4S_ENOMEM, "synth: out of memory");
            goto out;
        }
        for (size_t k = 0; k < K; k++) {
            L[l].ls_attn[k] = o.scale_sigma * gauss(&r);
            L[l].ls_mlp[k] = o.scale_sigma * gauss(&r);
        }
        /* distinct hot channels, persistent over steps, in both sites of the layer */
        for (int h = 0; h < o.hot_channels; h++) {
            int k;
            bool dup;
            do {
                k = (int)below(&r, K);
                dup = false;
                for (int j = 0; j < h; j++) dup |= L[l].hot[j] == k;
            } while (dup);
            L[l].hot[h] = k;
            L[l].ls_attn[k] += log(o.hot_factor);
            L[l].ls_mlp[k] += log(o.hot_factor);
        }
        qsort(L[l].hot, (size_t)o.hot_channels, sizeof(int), cmp_int);
        for (size_t e = 0; e < E; e++) L[l].pop[e] = (int)e;
        for (size_t e = E; e > 1; e--) { /* random popularity order */
            size_t j = below(&r, e);
            int t = L[l].pop[e - 1];
            L[l].pop[e - 1] = L[l].pop[j];
            L[l].pop[j] = t;
        }
    }
    fp4s_capture_opts co;
    fp4s_capture_opts_defaults(&co);
    co.overwrite = true;
    co.gzip = o.gzip;
    co.producer = "fp4-capture synth";
    rc = fp4s_capture_create(path, &co, &c);
    if (rc) goto out;
    rc = write_params(c, &o, L);
    if (rc) goto out;
    char site[256];
    if (!o.weights_per_step)
        for (int l = 0; l < o.layers && !rc; l++) {
            snprintf(site, sizeof site, "layers.%d.self_attn.qkv_proj", l);
            rc = put_weight(c, &r, &o, FP4S_CAPTURE_CONST_STEP, site, tb);
            for (size_t e = 0; e < (E ? E : 1) && !rc; e++) {
                if (E)
                    snprintf(site, sizeof site, "layers.%d.mlp.experts.%zu.up_proj", l, e);
                else
                    snprintf(site, sizeof site, "layers.%d.mlp.up_proj", l);
                rc = put_weight(c, &r, &o, FP4S_CAPTURE_CONST_STEP, site, tb);
            }
        }
    for (int64_t s = 0; s < o.steps && !rc; s++) {
        fp4s_progress_report((uint64_t)s, (uint64_t)o.steps);
        if (s % o.act_every == 0) {
            for (int l = 0; l < o.layers && !rc; l++) {
                layer_state *ly = &L[l];
                if (s > 0)
                    for (size_t k = 0; k < K; k++) {
                        ly->ls_attn[k] += o.drift * gauss(&r);
                        ly->ls_mlp[k] += o.drift * gauss(&r);
                    }
                for (size_t t = 0; t < T; t++)
                    for (size_t k = 0; k < K; k++) {
                        x[t * K + k] = (float)(exp(ly->ls_attn[k]) * student_t(&r, o.tail_df));
                        hm[t * K + k] = (float)(exp(ly->ls_mlp[k]) * student_t(&r, o.tail_df));
                    }
                snprintf(site, sizeof site, "layers.%d.self_attn.qkv_proj", l);
                rc = put_pair(c, &r, &o, s, site, x, T, K, tb, rb, 0);
                if (!rc && o.weights_per_step) rc = put_weight(c, &r, &o, s, site, tb);
                if (rc) break;
                if (!E) {
                    snprintf(site, sizeof site, "layers.%d.mlp.up_proj", l);
                    rc = put_pair(c, &r, &o, s, site, hm, T, K, tb, rb, 0);
                    if (!rc && o.weights_per_step) rc = put_weight(c, &r, &o, s, site, tb);
                    continue;
                }
                /* route: top_k distinct experts per token, Zipf popularity */
                double tot = 0;
                for (size_t e = 0; e < E; e++) tot += pw[e] = pow((double)(e + 1), -o.route_skew);
                for (size_t t = 0; t < T; t++) {
                    double left = tot;
                    bool used[1024] = {false};
                    for (int j = 0; j < o.top_k; j++) {
                        double u = uniform(&r) * left, acc = 0;
                        size_t pick = E - 1;
                        for (size_t e = 0; e < E; e++) {
                            if (used[e]) continue;
                            acc += pw[e];
                            if (u < acc) {
                                pick = e;
                                break;
                            }
                        }
                        while (used[pick]) pick = (pick + E - 1) % E; /* rounding at the end */
                        used[pick] = true;
                        left -= pw[pick];
                        assign[t * (size_t)o.top_k + (size_t)j] = ly->pop[pick];
                    }
                }
                for (size_t e = 0; e < E && !rc; e++) {
                    size_t n = 0;
                    for (size_t t = 0; t < T; t++)
                        for (int j = 0; j < o.top_k; j++)
                            if (assign[t * (size_t)o.top_k + (size_t)j] == (int)e) {
                                memcpy(xe + n * K, hm + t * K, K * sizeof(float));
                                n++;
                            }
                    if (!n) continue; /* an expert without tokens has no dataset this step */
                    snprintf(site, sizeof site, "layers.%d.mlp.experts.%zu.up_proj", l, e);
                    rc = put_pair(c, &r, &o, s, site, xe, n, K, tb, rb, -1);
                    if (!rc && o.weights_per_step) rc = put_weight(c, &r, &o, s, site, tb);
                }
            }
        }
        if (!rc && nlp) {
            double sd = o.lp_mismatch;
            if (o.onset_step >= 0 && s >= o.onset_step) sd *= pow(o.lp_growth, (double)(s - o.onset_step + 1));
            for (int q = 0; q < o.seqs; q++) {
                int len = o.seq_len / 2 + (int)below(&r, (size_t)(o.seq_len - o.seq_len / 2) + 1);
                for (int p = 0; p < o.seq_len; p++) {
                    size_t i = (size_t)q * (size_t)o.seq_len + (size_t)p;
                    double lt = -gamma_draw(&r, 0.5) * 0.8;
                    double lr = lt + sd * gauss(&r);
                    lpt[i] = (float)lt;
                    lpr[i] = (float)(lr > 0 ? 0 : lr);
                    seq[i] = q;
                    pos[i] = p;
                    mask[i] = p < len;
                }
            }
            rc = fp4s_capture_put_logprobs(c, s, lpt, lpr, seq, pos, mask, nlp);
        }
        if (!rc) rc = fp4s_capture_flush(c);
    }
    if (!rc) {
        rc = fp4s_capture_close(&c);
    }
out:
    if (c) fp4s_capture_close(&c);
    if (L)
        for (int l = 0; l < o.layers; l++) {
            free(L[l].ls_attn);
            free(L[l].ls_mlp);
            free(L[l].hot);
            free(L[l].pop);
        }
    free(L);
    free(x);
    free(hm);
    free(xe);
    free(tb);
    free(rb);
    free(assign);
    free(pw);
    free(lpt);
    free(lpr);
    free(seq);
    free(pos);
    free(mask);
    rng_free(&r);
    return rc;
}
