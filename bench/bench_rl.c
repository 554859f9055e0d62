/* Benchmark of the RL testbed (bench/RESULTS.md, section RL testbed): GRPO
 * steps of fp4-rl's policy, with the tokens per second of the rollout engine
 * and of the trainer beside the thread-seconds spent inside the BLAS calls
 * (and quantizers) they contain.
 *
 *   bench_rl [--steps N] [--width D] [--prompts P] [NUMERICS...]
 *
 * NUMERICS: bf16 (default set: bf16 nvfp4 quads mxfp4), nvfp4, quads (wfq +
 * rac:0.25), mxfp4, mxfp4-mbs-of, fp8. Threads: FP4S_THREADS. The policy is
 * the untrained one of the seed (no warm start: the speed does not depend on
 * what it has learned, only on the response lengths, which are printed). */
#include <fp4scope/rl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static int setup(fp4s_rl_opts *o, const char *name)
{
    if (!strcmp(name, "bf16")) return 0;
    if (!strcmp(name, "nvfp4")) { o->rollout = FP4S_RL_ROLLOUT_NVFP4; return 0; }
    if (!strcmp(name, "mxfp4")) { o->rollout = FP4S_RL_ROLLOUT_MXFP4; return 0; }
    if (!strcmp(name, "fp8")) { o->rollout = FP4S_RL_ROLLOUT_FP8; return 0; }
    if (!strcmp(name, "quads")) {
        o->rollout = FP4S_RL_ROLLOUT_NVFP4;
        o->trainer = FP4S_RL_TRAINER_WFQ;
        snprintf(o->remedy, sizeof o->remedy, "rac:0.25");
        return 0;
    }
    if (!strcmp(name, "mxfp4-mbs-of")) {
        o->rollout = FP4S_RL_ROLLOUT_MXFP4;
        snprintf(o->remedy, sizeof o->remedy, "mbs:128+of:0.5");
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    int steps = 5, width = 128, prompts = 64;
    const char *names[16];
    int nn = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--width") && i + 1 < argc) width = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompts") && i + 1 < argc) prompts = atoi(argv[++i]);
        else if (nn < 16) names[nn++] = argv[i];
    }
    if (!nn) {
        names[nn++] = "bf16";
        names[nn++] = "nvfp4";
        names[nn++] = "quads";
        names[nn++] = "mxfp4";
    }
    if (steps < 1) steps = 1;
    if (steps > 63) steps = 63;
    printf("bench_rl: width %d, %d prompts x 8, %d timed steps after one warm-up step, threads %d (%s)\n",
           width, prompts, steps, fp4s_get_threads(), fp4s_features());
    printf("%-13s %8s %7s %8s | %10s %7s | %10s %7s %6s %6s | %6s\n", "numerics", "params", "s/step",
           "resp_len", "rollout/s", "gemm%", "train/s", "gemm%", "fwd%", "bwd%", "quant%");
    for (int k = 0; k < nn; k++) {
        fp4s_rl_opts o;
        fp4s_rl_opts_defaults(&o);
        o.width = width;
        o.prompts = prompts;
        o.sft_max_steps = 0;
        o.eval_every = 0;
        o.act_every = 0;
        o.steps = steps + 1;
        if (setup(&o, names[k])) {
            fprintf(stderr, "bench_rl: unknown numerics '%s'\n", names[k]);
            return 2;
        }
        fp4s_rl *r;
        int rc = fp4s_rl_open(&o, &r);
        if (rc) {
            fprintf(stderr, "bench_rl: %s: %s\n", names[k], fp4s_last_error());
            return 1;
        }
        int nt = fp4s_get_threads();
        double st[64], ro[64], rg[64], tr[64], tg[64], tf[64], tb[64], tq[64], len = 0;
        for (int s = 0; s <= steps; s++) {
            fp4s_rl_stats x;
            if ((rc = fp4s_rl_step(r, NULL, &x))) {
                fprintf(stderr, "bench_rl: %s: %s\n", names[k], fp4s_last_error());
                return 1;
            }
            if (s == 0) continue;
            int i = s - 1;
            double cap_r = nt * x.t_rollout, cap_t = nt * x.t_train;
            st[i] = x.t_total;
            ro[i] = (double)x.rollout_tokens / x.t_rollout;
            rg[i] = 100 * x.t_gemm_rollout / cap_r;
            tr[i] = (double)x.train_tokens / x.t_train;
            tg[i] = 100 * (x.t_gemm - x.t_gemm_rollout) / cap_t;
            tf[i] = 100 * x.t_fwd / cap_t;
            tb[i] = 100 * x.t_bwd / cap_t;
            tq[i] = 100 * x.t_quant / (nt * x.t_total);
            len += x.resp_len;
        }
        int n = steps;
        printf("%-13s %8zu %7.3f %8.2f | %10.0f %6.1f%% | %10.0f %6.1f%% %5.1f%% %5.1f%% | %5.1f%%\n", names[k],
               fp4s_rl_param_count(r), bench_median(st, n), len / n, bench_median(ro, n), bench_median(rg, n), bench_median(tr, n),
               bench_median(tg, n), bench_median(tf, n), bench_median(tb, n), bench_median(tq, n));
        fp4s_rl_close(&r);
    }
    printf("rollout/s: tokens the engine processed (prompt and response) per second of the rollout;\n"
           "train/s: tokens the trainer processed per second of training (the old log-probs' forward and\n"
           "each update's forward and backward); gemm%%, fwd%%, bwd%%: thread-seconds inside the BLAS calls,\n"
           "the trainer's forward and backward passes, over threads x the phase's wall time; quant%%:\n"
           "thread-seconds in quantizers over threads x the step's wall time (all phases). Medians.\n");
    return 0;
}
