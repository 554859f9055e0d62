/* Benchmark of the remedy evaluation (bench/RESULTS.md, section Remedies):
 * the full remedy list of fp4-remedy on one [M, K] x [N, K]^T site, the total
 * time of fp4s_remedy_eval beside the time its BLAS GEMMs take (the float64
 * references and every remedy's products), best of --reps with the spread.
 *
 * usage: bench_remedy [--m M] [--k K] [--n N] [--reps R] [--list LIST] [-f mxfp4|nvfp4]
 *                     [--no-decompose]
 * Defaults: M = 8192 tokens, K = N = 4096, 1 repetition, the default list of
 * fp4-remedy(1), MXFP4 ocp. The BLAS uses its own threads (OPENBLAS_NUM_THREADS). */
#include <fp4scope/remedy.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/splitmix.h"
#include "bench_util.h"

#define DEFAULT_LIST "bf16,wfq,w4a4qat,none,rac:0.125,rac:0.25,rac:0.5,rac:1,rac:0.25:bf16,rac:0.25:aug," \
                     "rac-rand:0.25,mbs:128,of:0.5,of:1,keep:1,mbs:128+of:0.5"

static uint64_t st = 0x9E3779B97F4A7C15ull;
static double urand(void) { return splitmix_unit(&st); }
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

int main(int argc, char **argv)
{
    size_t M = 8192, K = 4096, N = 4096;
    int reps = 1;
    const char *list = DEFAULT_LIST, *fmt = "mxfp4";
    bool decompose = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m") && i + 1 < argc) M = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) K = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) N = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--list") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) fmt = argv[++i];
        else if (!strcmp(argv[i], "--no-decompose")) decompose = false;
        else {
            fprintf(stderr, "usage: bench_remedy [--m M] [--k K] [--n N] [--reps R] [--list LIST] [-f FMT] "
                            "[--no-decompose]\n");
            return 2;
        }
    }
    fp4s_format f;
    fp4s_spec as, ws;
    if (fp4s_format_parse(fmt, &f) || fp4s_spec_profile(&as, f, NULL)) {
        fprintf(stderr, "bench_remedy: %s\n", fp4s_last_error());
        return 2;
    }
    fp4s_remedy_weight_spec(&as, -1, &ws);
    fp4s_remedy *rem;
    size_t nr;
    if (fp4s_remedy_list_parse(list, &rem, &nr)) {
        fprintf(stderr, "bench_remedy: %s\n", fp4s_last_error());
        return 2;
    }
    /* LLM-like activations: per-channel log-normal scales, 1% hot channels, Student-t-ish tails */
    float *X = malloc(M * K * sizeof *X), *Xt = malloc(M * K * sizeof *Xt), *W = malloc(N * K * sizeof *W);
    double *cs = malloc(K * sizeof *cs);
    if (!X || !Xt || !W || !cs) {
        fprintf(stderr, "bench_remedy: out of memory\n");
        return 5;
    }
    for (size_t j = 0; j < K; j++) cs[j] = exp(0.7 * gauss()) * (j % 97 == 13 ? 30.0 : 1.0);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < K; j++) {
            double g = gauss();
            X[i * K + j] = (float)(g * cs[j] * (urand() < 0.02 ? 4.0 : 1.0));
            Xt[i * K + j] = (float)(X[i * K + j] * (1 + 0x1p-12 * gauss()));
        }
    for (size_t i = 0; i < N * K; i++) W[i] = (float)(0.02 * gauss());
    fp4s_remedy_eval_opts o;
    fp4s_remedy_eval_opts_defaults(&o);
    o.decompose = decompose;
    fp4s_remedy_result *res = calloc(nr, sizeof *res);
    double best = INFINITY, worst = 0, gbest = 0, gworst = 0;
    fp4s_remedy_site site;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        int rc = fp4s_remedy_eval(rem, nr, &as, &ws, X, Xt, M, W, N, K, &o, &site, res);
        double t = bench_now() - t0;
        if (rc) {
            fprintf(stderr, "bench_remedy: %s\n", fp4s_last_error());
            return 5;
        }
        if (t < best) {
            best = t;
            gbest = site.gemm_seconds;
        }
        if (t > worst) {
            worst = t;
            gworst = site.gemm_seconds;
        }
        if (r + 1 < reps) fp4s_remedy_results_free(res, nr);
    }
    printf("site [%zu x %zu] x [%zu x %zu]^T, %s %s, %zu remedies, decompositions %s, %d run(s)\n", M, K, N, K, fmt,
           as.profile, nr, decompose ? "on" : "off", reps);
    printf("%-26s %10s %10s %9s\n", "remedy", "seconds", "gemm s", "out_err");
    for (size_t i = 0; i < nr; i++)
        printf("%-26s %10.3f %10.3f %9.4g\n", fp4s_remedy_label(&res[i].remedy), res[i].seconds,
               res[i].cost.gemm_seconds, res[i].out_rel_error);
    printf("total %.2f s (worst %.2f), BLAS GEMMs %.2f s (worst run %.2f): total / GEMMs = %.2f\n", best, worst, gbest,
           gworst, best / gbest);
    fp4s_remedy_results_free(res, nr);
    free(res);
    free(rem);
    free(X);
    free(Xt);
    free(W);
    free(cs);
    return 0;
}
