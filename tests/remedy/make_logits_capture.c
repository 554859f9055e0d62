/* A small synthetic capture for the logits path of fp4-remedy, made in C
 * through the library's capture writer (so that the tests of the logits path
 * run in every build, sanitizers included, where the Python adapter cannot
 * load the library): the same layout as make_logits_capture.py. Per step, the
 * final hidden states of a BF16 trainer and of a rollout engine whose states
 * drift from them (with a few hot channels), the LM head, sampled tokens, and
 * the two sides' per-token log-probs as a run would log them (the rollout's
 * through NVFP4 te fake quantization of its LM-head input).
 *
 * usage: make_logits_capture OUT.h5 [SEED] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp4scope/fp4scope.h"
#include "../splitmix.h"

enum { STEPS = 3, SEQS = 4, SEQ_LEN = 24, D = 128, V = 256, T = SEQS * SEQ_LEN };

static uint64_t rng_state;

static double uniform(void) { return splitmix_unit(&rng_state); }

static double normal(void) { return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()); }

static float bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* lp[t, v] = log softmax over v of h[t, :] . w[v, :] (double) */
static void log_softmax(const float *h, const float *w, double *lp)
{
    for (int t = 0; t < T; t++) {
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) {
            double y = 0;
            for (int j = 0; j < D; j++) y += (double)h[t * D + j] * (double)w[v * D + j];
            lp[t * V + v] = y;
            if (y > m) m = y;
        }
        for (int v = 0; v < V; v++) s += exp(lp[t * V + v] - m);
        for (int v = 0; v < V; v++) lp[t * V + v] -= m + log(s);
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "make_logits_capture: %s: %s\n", what, fp4s_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: make_logits_capture OUT.h5 [SEED]\n");
        return 2;
    }
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 4;
    static float chan[D], w[V * D], ht[T * D], hr[T * D], q[T * D], lt_t[T], lr_t[T];
    static double lt[T * V], lr[T * V];
    static int64_t token[T], seq[T], pos[T];
    for (int j = 0; j < D; j++) chan[j] = (float)exp(0.5 * normal());
    for (int i = 0; i < 3; i++) chan[(int)(splitmix_next(&rng_state) % D)] *= 12; /* hot channels of the final norm */
    for (int i = 0; i < V * D; i++) w[i] = bf16((float)(normal() * 2.0 / sqrt((double)D)));
    fp4s_spec s;
    if (fp4s_spec_profile(&s, FP4S_NVFP4, "te")) return fail("spec");
    fp4s_capture_opts o;
    fp4s_capture_opts_defaults(&o);
    o.overwrite = true;
    o.producer = "tests/remedy/make_logits_capture.c";
    fp4s_capture *c = NULL;
    if (fp4s_capture_create(argv[1], &o, &c)) return fail(argv[1]);
    int rc = fp4s_capture_attr_i64(c, "/", "synthetic", 1);
    if (!rc) rc = fp4s_capture_attr_str(c, "/", "lm_head_site", "lm_head");
    for (int step = 0; step < STEPS && !rc; step++) {
        for (int i = 0; i < T * D; i++) {
            ht[i] = bf16((float)(normal() * chan[i % D]));
            hr[i] = bf16((float)(ht[i] * (1.0 + 0.01 * normal()))); /* the rollout engine's drift */
        }
        log_softmax(ht, w, lt);
        for (int t = 0; t < T; t++) { /* sample the trainer's distribution */
            double u = uniform(), acc = 0;
            int v = 0;
            for (; v < V - 1; v++) {
                acc += exp(lt[t * V + v]);
                if (u < acc) break;
            }
            token[t] = v;
            seq[t] = t / SEQ_LEN;
            pos[t] = t % SEQ_LEN;
        }
        fp4s_tscale ts;
        rc = fp4s_tscale_init(&s, fp4s_amax(hr, T, D, D, NULL), &ts);
        if (!rc) rc = fp4s_quantize(&s, &ts, hr, T, D, D, 0, &(fp4s_qout){.dequant = q, .ld_dequant = D}, NULL);
        if (rc) break;
        log_softmax(q, w, lr);
        for (int t = 0; t < T; t++) {
            lt_t[t] = (float)lt[t * V + token[t]];
            lr_t[t] = (float)lr[t * V + token[t]];
        }
        rc = fp4s_capture_put(c, step, "lm_head", "trainer", FP4S_DT_F32, ht, T, D, D, NULL);
        if (!rc) rc = fp4s_capture_put(c, step, "lm_head", "rollout", FP4S_DT_F32, hr, T, D, D, NULL);
        if (!rc) rc = fp4s_capture_put(c, step, "lm_head", "weight", FP4S_DT_F32, w, V, D, D, NULL);
        if (!rc) rc = fp4s_capture_put_logprobs(c, step, lt_t, lr_t, seq, pos, NULL, T);
        if (!rc) rc = fp4s_capture_put_tokens(c, step, token, T);
        if (!rc) rc = fp4s_capture_flush(c);
    }
    if (rc) {
        fail("write");
        fp4s_capture_abort(&c);
        return 1;
    }
    if (fp4s_capture_close(&c)) return fail("close");
    return 0;
}
