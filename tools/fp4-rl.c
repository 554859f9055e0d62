/* fp4-rl: a small MoE policy trained with GRPO whose rollout runs in the
 * numerics chosen (FP4, FP8, BF16, remedies), written to a capture; --demo
 * runs the standard comparison (man/fp4-rl.1). */
#include "cli.h"

#include <fp4scope/capture.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/outfile.h>
#include <fp4scope/rl.h>

#include "fp4s_config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    OPT_TASK = 256, OPT_STEPS, OPT_SEED, OPT_TRAINER, OPT_ROLLOUT, OPT_WPROFILE, OPT_REMEDY, OPT_QSITES,
    OPT_DRIFT, OPT_WIDTH, OPT_LAYERS, OPT_HEADS, OPT_EXPERTS, OPT_TOPK, OPT_EHIDDEN, OPT_AUX, OPT_PROMPTS,
    OPT_GROUP, OPT_TEMP, OPT_LR, OPT_BETA1, OPT_BETA2, OPT_WD, OPT_GCLIP, OPT_CLIP, OPT_MINIB, OPT_IS,
    OPT_ISCAP, OPT_SFT_LR, OPT_SFT_BATCH, OPT_SFT_MAX, OPT_SFT_TARGET, OPT_SFT_EVERY, OPT_EVAL_EVERY,
    OPT_EVAL_PROMPTS, OPT_ACT_EVERY, OPT_ACT_SITES, OPT_ACT_SEQS, OPT_MICRO, OPT_SHARD, OPT_STATS,
    OPT_AQN_END, OPT_AQN_STAGES, OPT_DEMO, OPT_DEMO_RUNS, OPT_SEEDS,
    OPT_OUTLIERS, OPT_OGAIN, OPT_OFRAC, OPT_GSIGMA
};

static const struct option longopts[] = {
    {"task", required_argument, NULL, OPT_TASK},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"trainer", required_argument, NULL, OPT_TRAINER},
    {"rollout", required_argument, NULL, OPT_ROLLOUT},
    {"profile", required_argument, NULL, 'p'},
    {"weight-profile", required_argument, NULL, OPT_WPROFILE},
    {"remedy", required_argument, NULL, OPT_REMEDY},
    {"aqn-end", required_argument, NULL, OPT_AQN_END},
    {"aqn-stages", required_argument, NULL, OPT_AQN_STAGES},
    {"quant-sites", required_argument, NULL, OPT_QSITES},
    {"drift", required_argument, NULL, OPT_DRIFT},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"experts", required_argument, NULL, OPT_EXPERTS},
    {"top-k", required_argument, NULL, OPT_TOPK},
    {"expert-hidden", required_argument, NULL, OPT_EHIDDEN},
    {"aux-coef", required_argument, NULL, OPT_AUX},
    {"prompts", required_argument, NULL, OPT_PROMPTS},
    {"group", required_argument, NULL, OPT_GROUP},
    {"temperature", required_argument, NULL, OPT_TEMP},
    {"lr", required_argument, NULL, OPT_LR},
    {"beta1", required_argument, NULL, OPT_BETA1},
    {"beta2", required_argument, NULL, OPT_BETA2},
    {"weight-decay", required_argument, NULL, OPT_WD},
    {"grad-clip", required_argument, NULL, OPT_GCLIP},
    {"clip-eps", required_argument, NULL, OPT_CLIP},
    {"minibatches", required_argument, NULL, OPT_MINIB},
    {"is-corr", required_argument, NULL, OPT_IS},
    {"is-cap", required_argument, NULL, OPT_ISCAP},
    {"sft-lr", required_argument, NULL, OPT_SFT_LR},
    {"sft-batch", required_argument, NULL, OPT_SFT_BATCH},
    {"sft-max-steps", required_argument, NULL, OPT_SFT_MAX},
    {"sft-target", required_argument, NULL, OPT_SFT_TARGET},
    {"sft-check-every", required_argument, NULL, OPT_SFT_EVERY},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"eval-prompts", required_argument, NULL, OPT_EVAL_PROMPTS},
    {"act-every", required_argument, NULL, OPT_ACT_EVERY},
    {"act-sites", required_argument, NULL, OPT_ACT_SITES},
    {"act-seqs", required_argument, NULL, OPT_ACT_SEQS},
    {"micro-batch", required_argument, NULL, OPT_MICRO},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"stats", required_argument, NULL, OPT_STATS},
    CLI_JSON_LONGOPTS
    CLI_OUTPUT_LONGOPTS
    CLI_GEMM_LONGOPTS
    {"demo", no_argument, NULL, OPT_DEMO},
    {"demo-runs", required_argument, NULL, OPT_DEMO_RUNS},
    {"seeds", required_argument, NULL, OPT_SEEDS},
    {"outliers", required_argument, NULL, OPT_OUTLIERS},
    {"outlier-gain", required_argument, NULL, OPT_OGAIN},
    {"outlier-frac", required_argument, NULL, OPT_OFRAC},
    {"gain-sigma", required_argument, NULL, OPT_GSIGMA},
    {"output", required_argument, NULL, 'o'},
    CLI_COMMON_LONGOPTS
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    printf("Usage: fp4-rl [OPTIONS] -o RUN.h5\n"
           "       fp4-rl --demo [-o DIR] [OPTIONS]\n"
           "Train a small MoE policy with GRPO whose rollout engine runs in the chosen\n"
           "numerics, and write every step to a capture (per-token trainer and rollout\n"
           "log-probs, activations of selected sites, per-step scalars).\n\n"
           "Numerics:\n"
           "  --trainer T         bf16, wfq (asymmetric QAT), w4a4qat (symmetric QAT), fp32 (bf16)\n"
           "  --rollout R         bf16, fp8, mxfp4, nvfp4, fp32 (bf16)\n"
           "  -p, --profile P     rollout quantizer profile (the format's default)\n"
           "  --weight-profile P  profile of the weights (te -> te-2d, fp8-1x128 -> fp8-128x128)\n"
           "  --remedy ITEM       a rollout remedy: rac:R[:RESID], mbs:G, of:A, keep:K, aqn:S, '+' joins\n"
           "  --aqn-end S --aqn-stages K   aqn schedule: last sigma (sigma/100), stages (10)\n"
           "  --quant-sites LIST  qkv,o,router,experts,head,all (all)\n"
           "  --drift D           rollout engine drift: none, splitk, splitk-bf16 (splitk)\n"
           "Policy:\n"
           "  --task T            sort or add (sort)\n"
           "  --width D --layers L --heads H --experts E --top-k K --expert-hidden F (128 2 4 4 2 2D)\n"
           "  --aux-coef A        load-balancing coefficient (0)\n"
           "  --outliers on|none  outlier channels in the norm gains (on), none: the control\n"
           "  --outlier-gain G --outlier-frac F --gain-sigma S   their shape (20 0.01 0.5)\n"
           "GRPO:\n"
           "  --steps N           RL steps (200)\n"
           "  --prompts P --group G  prompts per step and samples per prompt (64, 8)\n"
           "  --temperature T     sampling temperature (1)\n"
           "  --lr X              AdamW learning rate (1e-4); --beta1 --beta2 (0.9 0.99)\n"
           "  --weight-decay W    (0.01)   --grad-clip N (1)   --clip-eps E (0.2)\n"
           "  --minibatches M     updates per step, one epoch (2)\n"
           "  --is-corr C         none, tis, mis (none); --is-cap C (2)\n"
           "Warm start:\n"
           "  --sft-lr X --sft-batch N --sft-max-steps N --sft-target S --sft-check-every N\n"
           "                      (1e-3, 256, 1000, 0.4, 10)\n"
           "Output:\n"
           "  -o, --output FILE   the capture (a directory with --demo)\n"
           "  --stats FILE        per-step scalars as TSV\n"
           "  --eval-every N --eval-prompts N   held-out greedy accuracy (10, 256)\n"
           "  --act-every N --act-sites GLOBS --act-seqs N   activations (50, see man, 16)\n"
           "  --seed S (1)  --micro-batch N (64)  --shard N (64)\n"
           "  --gemm P            CPU GEMM: fixed (default: the same bits on any x86-64 CPU\n"
           "                      and thread count) or blas (faster; the bits depend on the CPU)\n"
           "  --json              summary as JSON on stdout\n"
           "  --force             overwrite an existing output\n"
           "  --quiet             no progress on stderr\n"
           "  --demo [--demo-runs LIST]   the comparison of bf16, nvfp4, quads, mxfp4, mxfp4-mbs-of\n"
           "                      (also quads-r0.05, quads-r1)\n"
           "  --seeds N           with --demo: every arm on seeds S..S+N-1, and a summary of\n"
           "                      means, 95%% t-intervals and paired tests against bf16\n"
           "  --help, --version\n\n"
           "Exit status: 0 ok, 2 usage, 4 output not written, 5 internal error, 128 + N when\n"
           "stopped by signal N (the steps done are kept).\n");
}

typedef struct tool {
    fp4s_rl_opts o;
    int steps;
    const char *out, *stats, *demo_runs;
    bool json, force, quiet, demo, numerics_given;
    int seeds;               /* --seeds N (1) */
} tool;

static double rl_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SIGINT, SIGTERM, SIGHUP (a closed terminal or ssh session): stop after the
 * step under way, commit what was done. */
static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }
static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- one run --------------------------------------------------------------------------------- */
typedef struct run_result {
    fp4s_rl_sft sft;
    fp4s_rl_stats *st;       /* [steps] */
    int steps_done;
    bool diverged, interrupted;
    char diverged_msg[256];
    size_t params;
    double seconds;
} run_result;

static void progress(const tool *t, const char *name, const fp4s_rl_stats *s, int total)
{
    if (t->quiet || !isatty(STDERR_FILENO)) return;
    if (s->step % 10 != 0 && s->step + 1 != total) return;
    fprintf(stderr, "%s: %s step %lld/%d reward %.3f mismatch %.4f entropy %.3f %.2fs/step\n", cli_prog(),
            name, (long long)s->step, total, s->reward, s->mismatch, s->entropy, s->t_total);
}

/* Warm start (unless from is given), then `steps` steps into a new capture at
 * path: the temporary of an output of the run's group (fp4scope/outfile.h),
 * renamed into place by the caller's commit, so that an existing capture is
 * replaced only by a finished one and a failed run leaves nothing. */
static int run_one(const tool *t, const fp4s_rl_opts *o, const char *name, const char *path, const float *from,
                   size_t nfrom, run_result *res)
{
    memset(res, 0, sizeof *res);
    fp4s_rl *r = NULL;
    fp4s_capture *cap = NULL;
    int rc = fp4s_rl_open(o, &r);
    if (rc) return rc;
    res->params = fp4s_rl_param_count(r);
    /* the capture first: an output that cannot be written fails before the warm start */
    fp4s_capture_opts co;
    fp4s_capture_opts_defaults(&co);
    co.producer = "fp4-rl";
    co.overwrite = true; /* the empty temporary fp4s_outfile_begin made */
    co.gzip = 4;
    if ((rc = fp4s_capture_create(path, &co, &cap))) goto done;
    if ((rc = fp4s_rl_capture_header(r, cap))) goto done;
    if (from) rc = fp4s_rl_set_policy(r, from, nfrom);
    else rc = fp4s_rl_warmstart(r, &res->sft);
    if (rc) goto done;
    if (!(res->st = calloc((size_t)t->steps + 1, sizeof *res->st))) {
        rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < t->steps && !stop_signal; k++) {
        rc = fp4s_rl_step(r, cap, &res->st[k]);
        if (rc == FP4S_ECHECK) { /* the policy diverged: the run ends here, the capture keeps its steps */
            res->diverged = true;
            snprintf(res->diverged_msg, sizeof res->diverged_msg, "%s", fp4s_last_error());
            rc = 0;
            break;
        }
        if (rc) goto done;
        res->steps_done = k + 1;
        res->seconds += res->st[k].t_total;
        progress(t, name, &res->st[k], t->steps);
    }
    res->interrupted = stop_signal != 0;
done:;
    int rc2 = fp4s_capture_close(&cap);
    if (!rc) rc = rc2;
    fp4s_rl_close(&r);
    return rc;
}

static int write_stats(const char *path, const run_result *res)
{
    size_t ns = fp4s_rl_stat_count(), cap = 4096 + (size_t)res->steps_done * ns * 24;
    char *buf = malloc(cap);
    if (!buf) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    size_t n = (size_t)snprintf(buf, cap, "step");
    for (size_t i = 0; i < ns; i++) n += (size_t)snprintf(buf + n, cap - n, "\t%s", fp4s_rl_stat_name(i));
    n += (size_t)snprintf(buf + n, cap - n, "\n");
    for (int k = 0; k < res->steps_done; k++) {
        n += (size_t)snprintf(buf + n, cap - n, "%lld", (long long)res->st[k].step);
        for (size_t i = 0; i < ns; i++) n += (size_t)snprintf(buf + n, cap - n, "\t%.6g", fp4s_rl_stat_value(&res->st[k], i));
        n += (size_t)snprintf(buf + n, cap - n, "\n");
    }
    int rc = cli_write_text(path, buf, n);
    free(buf);
    return rc;
}

static json_t *run_json(const fp4s_rl_opts *o, const run_result *res, const char *path)
{
    json_t *j = json_object();
    json_object_set_new(j, "capture", json_string(path));
    json_object_set_new(j, "trainer", json_string(fp4s_rl_trainer_name(o->trainer)));
    json_object_set_new(j, "rollout", json_string(fp4s_rl_rollout_name(o->rollout)));
    json_object_set_new(j, "profile", json_string(o->profile));
    json_object_set_new(j, "remedy", json_string(o->remedy));
    json_object_set_new(j, "params", json_integer((json_int_t)res->params));
    json_object_set_new(j, "steps", json_integer(res->steps_done));
    json_object_set_new(j, "diverged", json_boolean(res->diverged));
    json_object_set_new(j, "interrupted", json_boolean(res->interrupted));
    if (res->diverged) json_object_set_new(j, "diverged_detail", json_string(res->diverged_msg));
    json_t *sft = json_object();
    json_object_set_new(sft, "steps", json_integer(res->sft.steps));
    json_object_set_new(sft, "success", cli_json_real(res->sft.success));
    json_object_set_new(sft, "reached", json_boolean(res->sft.reached));
    json_object_set_new(sft, "seconds", cli_json_real(res->sft.seconds));
    json_object_set_new(j, "warm_start", sft);
    json_object_set_new(j, "seconds", cli_json_real(res->seconds));
    json_object_set_new(j, "steps_per_second", cli_json_real(res->seconds > 0 ? res->steps_done / res->seconds : NAN));
    json_t *steps = json_array();
    for (int k = 0; k < res->steps_done; k++) {
        json_t *s = json_object();
        json_object_set_new(s, "step", json_integer(res->st[k].step));
        for (size_t i = 0; i < fp4s_rl_stat_count(); i++)
            json_object_set_new(s, fp4s_rl_stat_name(i), cli_json_real(fp4s_rl_stat_value(&res->st[k], i)));
        json_array_append_new(steps, s);
    }
    json_object_set_new(j, "per_step", steps);
    return j;
}

/* ---- the demo ----------------------------------------------------------------------------- */
typedef struct demo_cfg {
    const char *name, *title;
    fp4s_rl_trainer trainer;
    fp4s_rl_rollout rollout;
    const char *remedy;
    bool extra;              /* only when --demo-runs names it */
} demo_cfg;

static const demo_cfg demo_cfgs[] = {
    {"bf16", "BF16 rollout", FP4S_RL_TRAINER_BF16, FP4S_RL_ROLLOUT_BF16, "", false},
    {"nvfp4", "naive NVFP4 W4A4", FP4S_RL_TRAINER_BF16, FP4S_RL_ROLLOUT_NVFP4, "", false},
    {"quads", "QUADS: wfq trainer, rac:0.25 rollout", FP4S_RL_TRAINER_WFQ, FP4S_RL_ROLLOUT_NVFP4, "rac:0.25", false},
    {"mxfp4", "naive MXFP4 W4A4", FP4S_RL_TRAINER_BF16, FP4S_RL_ROLLOUT_MXFP4, "", false},
    {"mxfp4-mbs-of", "MXFP4 + mbs:128 + of:0.5", FP4S_RL_TRAINER_BF16, FP4S_RL_ROLLOUT_MXFP4, "mbs:128+of:0.5", false},
    {"quads-r0.05", "QUADS: wfq trainer, rac:0.05 rollout", FP4S_RL_TRAINER_WFQ, FP4S_RL_ROLLOUT_NVFP4, "rac:0.05", true},
    {"quads-r1", "QUADS: wfq trainer, rac:1 rollout", FP4S_RL_TRAINER_WFQ, FP4S_RL_ROLLOUT_NVFP4, "rac:1", true},
};
#define NDEMO (sizeof demo_cfgs / sizeof demo_cfgs[0])
#define DEMO_LIST "bf16, nvfp4, quads, mxfp4, mxfp4-mbs-of (the default), quads-r0.05, quads-r1"

/* The demo's regime: cheap enough for 2 cores in minutes (see fp4-rl(1)). */
static void demo_defaults(tool *t)
{
    fp4s_rl_opts *o = &t->o;
    o->width = 64;
    o->prompts = 16;
    o->lr = 2e-4;
    o->eval_every = 20;
    o->eval_prompts = 128;
    o->act_every = 100;
    o->act_seqs = 8;
    t->steps = 300;
}

static int mkdir_p1(const char *dir)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    }
    return fp4s_error_set(FP4S_EWRITE, "%s: cannot create the directory: %s", dir, strerror(errno));
}

/* What a demo child leaves for the parent (shared memory). */
typedef struct demo_slot {
    int status;              /* the child's exit status */
    char err[512];           /* its message */
    run_result res;          /* res.st points into the parent's mapping: see stats */
} demo_slot;

static double window_mean(const fp4s_rl_stats *st, int n, int k, int w, size_t field)
{
    double s = 0;
    int c = 0;
    for (int i = k - w + 1; i <= k; i++)
        if (i >= 0 && i < n) {
            double v = fp4s_rl_stat_value(&st[i], field);
            if (!isnan(v)) s += v, c++;
        }
    return c ? s / c : NAN;
}

static size_t stat_index(const char *name)
{
    for (size_t i = 0; i < fp4s_rl_stat_count(); i++)
        if (!strcmp(fp4s_rl_stat_name(i), name)) return i;
    return 0;
}

/* DIR/<name>.dat: step, reward, its 10-step mean, mismatch, its 10-step
 * mean, held-out accuracy of both sides, entropy, argmax flips. */
static int write_plot_data(const char *path, const run_result *res)
{
    size_t cap = 256 + (size_t)res->steps_done * 200, n = 0;
    char *buf = malloc(cap);
    if (!buf) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    size_t ir = stat_index("reward"), im = stat_index("mismatch"), iar = stat_index("acc_rollout");
    size_t iat = stat_index("acc_trainer"), ie = stat_index("entropy"), iff = stat_index("flip_frac");
    n += (size_t)snprintf(buf + n, cap - n, "# step reward reward_mean10 mismatch mismatch_mean10 acc_rollout "
                          "acc_trainer entropy flip_frac\n");
    for (int k = 0; k < res->steps_done; k++) {
        const fp4s_rl_stats *st = &res->st[k];
        n += (size_t)snprintf(buf + n, cap - n, "%lld %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g\n", (long long)st->step,
                              st->reward, window_mean(res->st, res->steps_done, k, 10, ir), st->mismatch,
                              window_mean(res->st, res->steps_done, k, 10, im), fp4s_rl_stat_value(st, iar),
                              fp4s_rl_stat_value(st, iat), fp4s_rl_stat_value(st, ie), fp4s_rl_stat_value(st, iff));
    }
    int rc = cli_write_text(path, buf, n);
    free(buf);
    return rc;
}

/* Run gnuplot on DIR/demo.gp (FP4S_GNUPLOT, else the configured one); the
 * image is written to a temporary name and renamed. */
static int run_gnuplot(const char *dir, const char *script, const char *image)
{
    const char *prog = getenv("FP4S_GNUPLOT");
    if (!prog || !*prog) prog = FP4S_HAVE_GNUPLOT ? FP4S_GNUPLOT : NULL;
    if (!prog) return 1;
    char tmp[4200], fin[4200];
    snprintf(fin, sizeof fin, "%s/%s", dir, image);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, image);
    char expr[4400];
    snprintf(expr, sizeof expr, "outfile='.%s.tmp'", image);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return fp4s_error_set(FP4S_EINTERNAL, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) dup2(nul, STDOUT_FILENO);
        execlp(prog, "gnuplot", "-e", expr, script, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    struct stat sb;
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 127) {
        unlink(tmp);
        return 1; /* no gnuplot */
    }
    if (WEXITSTATUS(st) != 0 || stat(tmp, &sb) != 0 || sb.st_size == 0) {
        unlink(tmp);
        return fp4s_error_set(FP4S_EWRITE, "%s: gnuplot failed on %s/%s (kept for inspection)", fin, dir, script);
    }
    if (rename(tmp, fin) != 0) return fp4s_error_set(FP4S_EWRITE, "%s: %s", fin, strerror(errno));
    return 0;
}

/* DIR/demo.gp, into the run's output group (gnuplot draws it after the commit). */
static int write_demo_plot(const tool *t, const int *sel, size_t nsel, char onsets[][32], size_t nseeds)
{
    /* the script grows as it is written (no fixed buffer to overflow or cut) */
    char *gp = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&gp, &n);
    if (!f) return fp4s_error_set(FP4S_ENOMEM, "demo.gp: out of memory");
    fprintf(f,
        "# fp4-rl --demo: reward and rollout/trainer mismatch over GRPO steps (gnuplot demo.gp)\n"
        "if (!exists('outfile')) outfile = 'demo.png'\n"
        "set terminal pngcairo size 1000,1200 noenhanced font ',10'\n"
        "set output outfile\n"
        "set datafile missing 'nan'\n"
        "set grid\nset key outside right\nset xlabel 'step'\nset xrange [0:%d]\n"
        "# the same horizontal margins in every panel, so that a step is at one x in all three\n"
        "set lmargin at screen 0.09\nset rmargin at screen 0.76\n", t->steps);
    if (nseeds > 1)
        fprintf(f, "set style fill transparent solid 0.15 noborder\n"
                "set multiplot layout 3,1 title 'fp4-rl --demo --seeds %zu: means over the seeds, bands from the "
                "lowest to the highest seed, %d GRPO steps'\n", nseeds, t->steps);
    else
        fprintf(f, "set multiplot layout 3,1 title 'fp4-rl --demo: the same seed and warm start, %d GRPO steps'\n",
                t->steps);
    const char *panels[3][3] = {
        {"reward (10-step mean)", "3", "set yrange [0:1]"},
        {"mean |lp_t - lp_r| (nats, 10-step mean)", "5", "set logscale y; set yrange [*:*]; set format y '%.0e'"},
        {"held-out greedy accuracy, trainer numerics", "7", "unset logscale y; set yrange [0:1]; set format y '%g'"},
    };
    for (int pnl = 0; pnl < 3; pnl++) {
        fprintf(f, "%s\nset ylabel '%s'\nplot ", panels[pnl][2], panels[pnl][0]);
        if (nseeds > 1 && pnl < 2)
            for (size_t i = 0; i < nsel; i++)
                fprintf(f, "'%s.dat' using 1:%d:%d with filledcurves lc %zu notitle, ", demo_cfgs[sel[i]].name,
                        pnl ? 12 : 10, pnl ? 13 : 11, i + 1);
        for (size_t i = 0; i < nsel; i++) {
            const demo_cfg *d = &demo_cfgs[sel[i]];
            fprintf(f, "%s'%s.dat' using 1:%s with %s lw 2 lc %zu title '%s", i ? ", " : "", d->name, panels[pnl][1],
                    pnl == 2 ? "linespoints" : "lines", i + 1, d->name);
            if (pnl == 1 && strcmp(onsets[i], "none") && strcmp(onsets[i], "n/a"))
                fprintf(f, " (onset at %s)", onsets[i]);
            fputs("'", f);
        }
        fputs("\n", f);
    }
    fputs("unset multiplot\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        free(gp);
        return fp4s_error_set(FP4S_ENOMEM, "demo.gp: out of memory");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/demo.gp", t->out);
    int rc = cli_write_text(path, gp, n);
    free(gp);
    return rc;
}

/* The demo directory, when this run made it: removed at exit if it is still
 * empty (a demo that failed before its commit leaves nothing). */
static char demo_made_dir[4096];
static void demo_rmdir(void)
{
    if (demo_made_dir[0]) rmdir(demo_made_dir);
}

/* ---- the demo's runs: seeds x arms, in forked processes ---------------------------------------- */
/* A warm start made in a child, for the runs of one seed (shared memory:
 * the slot, then the policy's weights). */
typedef struct warm_slot {
    int status;
    char err[512];
    fp4s_rl_sft sft;
} warm_slot;

typedef struct demo_ctx {
    const tool *t;
    fp4s_rl_opts base;
    const int *sel;
    size_t nsel, nseeds, np;  /* arms, seeds, parameters */
    char *wshm;               /* [nseeds] warm_slot + np floats, wper bytes each */
    size_t wper;
    char *shm;                /* [nseeds * nsel] demo_slot + steps stats, per bytes each (job k * nsel + i) */
    size_t per;
    fp4s_outfile **ofs;       /* [nseeds * nsel] the captures' temporaries */
} demo_ctx;

static uint64_t demo_seed(const demo_ctx *c, size_t k) { return c->base.seed + (uint64_t)k; }
static warm_slot *demo_warm(const demo_ctx *c, size_t k) { return (warm_slot *)(c->wshm + k * c->wper); }
static demo_slot *demo_job(const demo_ctx *c, size_t j) { return (demo_slot *)(c->shm + j * c->per); }

/* DIR/<run> (one seed) or DIR/<run>.s<seed>, then .ext */
static void demo_path(const demo_ctx *c, size_t j, const char *ext, char *buf, size_t n)
{
    const demo_cfg *d = &demo_cfgs[c->sel[j % c->nsel]];
    if (c->nseeds == 1) snprintf(buf, n, "%s/%s.%s", c->t->out, d->name, ext);
    else snprintf(buf, n, "%s/%s.s%llu.%s", c->t->out, d->name, (unsigned long long)demo_seed(c, j / c->nsel), ext);
}

/* Child: the warm start of seed k (FP4S_THREADS threads for a single seed,
 * one when the seeds run side by side). */
static int warm_job(demo_ctx *c, size_t k)
{
    warm_slot *ws = demo_warm(c, k);
    if (c->nseeds > 1) fp4s_set_threads(1);
    fp4s_rl_opts o = c->base;
    o.seed = demo_seed(c, k);
    fp4s_rl *r = NULL;
    int rc = fp4s_rl_open(&o, &r);
    if (!rc) rc = fp4s_rl_warmstart(r, &ws->sft);
    if (!rc) memcpy(ws + 1, fp4s_rl_policy(r), c->np * sizeof(float));
    else snprintf(ws->err, sizeof ws->err, "warm start of seed %llu: %s", (unsigned long long)o.seed,
                  fp4s_last_error()[0] ? fp4s_last_error() : fp4s_strerror(rc));
    fp4s_rl_close(&r);
    ws->status = rc ? fp4s_exit_status(rc) : 0;
    return ws->status;
}

/* Child: arm j % nsel from the warm start of seed j / nsel, into its capture's temporary. */
static int run_job(demo_ctx *c, size_t j)
{
    const demo_cfg *d = &demo_cfgs[c->sel[j % c->nsel]];
    const warm_slot *ws = demo_warm(c, j / c->nsel);
    demo_slot *slot = demo_job(c, j);
    fp4s_set_threads(1);
    fp4s_rl_opts o = c->base;
    o.seed = demo_seed(c, j / c->nsel);
    o.trainer = d->trainer;
    o.rollout = d->rollout;
    snprintf(o.remedy, sizeof o.remedy, "%s", d->remedy);
    run_result res;
    int crc = run_one(c->t, &o, d->name, fp4s_outfile_tmppath(c->ofs[j]), (const float *)(ws + 1), c->np, &res);
    res.sft = ws->sft;
    int status = 0;
    if (crc) {
        snprintf(slot->err, sizeof slot->err, "%s (seed %llu): %s", d->name, (unsigned long long)o.seed,
                 fp4s_last_error()[0] ? fp4s_last_error() : fp4s_strerror(crc));
        status = fp4s_exit_status(crc);
    } else {
        memcpy(slot + 1, res.st, (size_t)res.steps_done * sizeof *res.st);
    }
    free(res.st);
    slot->res = res;
    slot->status = status;
    return status;
}

/* Run jobs 0..n-1 in forked children, at most par at once; a child killed
 * by a signal gets FP4S_EXIT_INTERNAL and a message in err(j). */
static void fork_pool(demo_ctx *c, size_t n, int (*fn)(demo_ctx *, size_t), int *status, char *(*err)(demo_ctx *, size_t))
{
    int par = fp4s_get_threads();
    if (par < 1) par = 1;
    pid_t *pids = xcalloc(n ? n : 1, sizeof *pids);
    size_t started = 0, running = 0;
    while (started < n || running) {
        if (started < n && running < (size_t)par) {
            size_t j = started++;
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) cli_die(FP4S_EXIT_INTERNAL, "fork: %s", strerror(errno));
            if (pid == 0) _exit(fn(c, j));
            pids[j] = pid;
            running++;
            continue;
        }
        int st;
        pid_t w = wait(&st);
        if (w < 0) {
            if (errno == EINTR) continue;
            cli_die(FP4S_EXIT_INTERNAL, "wait: %s", strerror(errno));
        }
        for (size_t j = 0; j < started; j++)
            if (pids[j] == w) {
                status[j] = WIFEXITED(st) ? WEXITSTATUS(st) : FP4S_EXIT_INTERNAL;
                if (!WIFEXITED(st))
                    snprintf(err(c, j), 512, "job %zu killed by signal %d", j, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
                running--;
            }
    }
    free(pids);
}
static char *warm_err(demo_ctx *c, size_t k) { return demo_warm(c, k)->err; }
static char *job_err(demo_ctx *c, size_t j) { return demo_job(c, j)->err; }

/* What the summary keeps of one run. */
typedef struct demo_row {
    double r0, r1, m0, m1, a0, a1, sps;
    double kurt, oratio, etop;  /* the outlier measures at the first evaluation */
    char onset[32];
    bool onset_found;
    int64_t onset_step;
} demo_row;

/* DIR/<run>.dat over seeds: per step the mean over seeds of write_plot_data's
 * columns, then the min and max over seeds of reward_mean10 and
 * mismatch_mean10 (the plot's bands). Steps that not every seed reached are
 * left out. */
static int write_plot_data_seeds(const char *path, const demo_ctx *c, size_t i)
{
    int n = INT32_MAX;
    for (size_t k = 0; k < c->nseeds; k++) {
        const run_result *res = &demo_job(c, k * c->nsel + i)->res;
        if (res->steps_done < n) n = res->steps_done;
    }
    size_t cap = 256 + (size_t)n * 300, len = 0;
    char *buf = malloc(cap);
    if (!buf) return fp4s_error_set(FP4S_ENOMEM, "out of memory");
    const char *names[] = {"reward", "mismatch", "acc_rollout", "acc_trainer", "entropy", "flip_frac"};
    size_t ix[6];
    for (int q = 0; q < 6; q++) ix[q] = stat_index(names[q]);
    len += (size_t)snprintf(buf + len, cap - len, "# means over %zu seeds: step reward reward_mean10 mismatch mismatch_mean10 "
                            "acc_rollout acc_trainer entropy flip_frac; min and max over seeds: reward_mean10 (10, 11) "
                            "mismatch_mean10 (12, 13)\n", c->nseeds);
    for (int s = 0; s < n; s++) {
        double col[8] = {0}, cnt[8] = {0}, rmin = INFINITY, rmax = -INFINITY, mmin = INFINITY, mmax = -INFINITY;
        for (size_t k = 0; k < c->nseeds; k++) {
            const run_result *res = &demo_job(c, k * c->nsel + i)->res;
            double v[8] = {res->st[s].reward, window_mean(res->st, n, s, 10, ix[0]), res->st[s].mismatch,
                           window_mean(res->st, n, s, 10, ix[1]), fp4s_rl_stat_value(&res->st[s], ix[2]),
                           fp4s_rl_stat_value(&res->st[s], ix[3]), fp4s_rl_stat_value(&res->st[s], ix[4]),
                           fp4s_rl_stat_value(&res->st[s], ix[5])};
            for (int q = 0; q < 8; q++)
                if (!isnan(v[q])) col[q] += v[q], cnt[q]++;
            rmin = fmin(rmin, v[1]), rmax = fmax(rmax, v[1]), mmin = fmin(mmin, v[3]), mmax = fmax(mmax, v[3]);
        }
        len += (size_t)snprintf(buf + len, cap - len, "%d", s);
        for (int q = 0; q < 8; q++) len += (size_t)snprintf(buf + len, cap - len, " %.6g", cnt[q] ? col[q] / cnt[q] : NAN);
        len += (size_t)snprintf(buf + len, cap - len, " %.6g %.6g %.6g %.6g\n", rmin, rmax, mmin, mmax);
    }
    int rc = cli_write_text(path, buf, len);
    free(buf);
    return rc;
}

/* The summary over seeds (--seeds N): per arm the mean of the final reward
 * with its t-interval, the paired tests against bf16, the final mismatch. */
static void seeds_summary(const demo_ctx *c, const demo_row *rows, FILE *f, json_t *jruns)
{
    size_t N = c->nseeds, ib = SIZE_MAX;
    for (size_t i = 0; i < c->nsel; i++)
        if (!strcmp(demo_cfgs[c->sel[i]].name, "bf16")) ib = i;
    double *x = xcalloc(N, sizeof *x), *b = xcalloc(N, sizeof *b), *m = xcalloc(N, sizeof *m);
    fprintf(f, "%-12s %-23s %-25s %9s %7s %8s %-27s %6s\n", "run", "reward [95% CI]", "vs bf16 [95% CI]",
            "paired-t p", "sign", "sign p", "mismatch [95% CI]", "onsets");
    for (size_t i = 0; i < c->nsel; i++) {
        const demo_cfg *d = &demo_cfgs[c->sel[i]];
        int onsets = 0;
        for (size_t k = 0; k < N; k++) {
            x[k] = rows[k * c->nsel + i].r1;
            m[k] = rows[k * c->nsel + i].m1;
            if (ib != SIZE_MAX) b[k] = rows[k * c->nsel + ib].r1;
            onsets += rows[k * c->nsel + i].onset_found;
        }
        fp4s_rl_seedstat sr, sm;
        bool pair = ib != SIZE_MAX && ib != i;
        int rc = fp4s_rl_seedstat_compute(x, pair ? b : NULL, N, 0.95, &sr);
        int rcm = rc ? rc : fp4s_rl_seedstat_compute(m, NULL, N, 0.95, &sm);
        if (rc || rcm) { /* a run without a final value (NaN), or no GSL: the means only */
            fprintf(f, "%-12s (no interval: %s)\n", d->name, fp4s_last_error());
            json_array_append_new(jruns, json_pack("{s:s,s:s}", "name", d->name, "error", fp4s_last_error()));
            continue;
        }
        char c1[64], c2[64], c3[64], c4[32], c5[32], c6[32];
        snprintf(c1, sizeof c1, "%.3f [%.3f, %.3f]", sr.mean, sr.lo, sr.hi);
        snprintf(c3, sizeof c3, "%.4f [%.4f, %.4f]", sm.mean, sm.lo, sm.hi);
        if (pair) {
            snprintf(c2, sizeof c2, "%+.3f [%+.3f, %+.3f]", sr.d_mean, sr.d_lo, sr.d_hi);
            snprintf(c4, sizeof c4, "%.2g", sr.p_t);
            snprintf(c5, sizeof c5, "%d/%d", sr.wins, sr.losses);
            snprintf(c6, sizeof c6, "%.2g", sr.p_sign);
        } else {
            snprintf(c2, sizeof c2, "-");
            snprintf(c4, sizeof c4, "-");
            snprintf(c5, sizeof c5, "-");
            snprintf(c6, sizeof c6, "-");
        }
        fprintf(f, "%-12s %-23s %-25s %9s %7s %8s %-27s %3d/%zu\n", d->name, c1, c2, c4, c5, c6, c3, onsets, N);
        json_t *j = json_object(), *jr = json_object(), *jx = json_array(), *jm = json_object(), *jmx = json_array();
        json_object_set_new(j, "name", json_string(d->name));
        json_object_set_new(j, "title", json_string(d->title));
        json_object_set_new(j, "trainer", json_string(fp4s_rl_trainer_name(d->trainer)));
        json_object_set_new(j, "rollout", json_string(fp4s_rl_rollout_name(d->rollout)));
        json_object_set_new(j, "remedy", json_string(d->remedy));
        for (size_t k = 0; k < N; k++) json_array_append_new(jx, cli_json_real(x[k]));
        json_object_set_new(jr, "values", jx);
        json_object_set_new(jr, "mean", cli_json_real(sr.mean));
        json_object_set_new(jr, "sd", cli_json_real(sr.sd));
        json_object_set_new(jr, "ci_low", cli_json_real(sr.lo));
        json_object_set_new(jr, "ci_high", cli_json_real(sr.hi));
        if (pair) {
            json_t *jp = json_object();
            json_object_set_new(jp, "diff_mean", cli_json_real(sr.d_mean));
            json_object_set_new(jp, "diff_sd", cli_json_real(sr.d_sd));
            json_object_set_new(jp, "diff_ci_low", cli_json_real(sr.d_lo));
            json_object_set_new(jp, "diff_ci_high", cli_json_real(sr.d_hi));
            json_object_set_new(jp, "t", cli_json_real(sr.t));
            json_object_set_new(jp, "p_paired_t", cli_json_real(sr.p_t));
            json_object_set_new(jp, "wins", json_integer(sr.wins));
            json_object_set_new(jp, "losses", json_integer(sr.losses));
            json_object_set_new(jp, "ties", json_integer(sr.ties));
            json_object_set_new(jp, "p_sign", cli_json_real(sr.p_sign));
            json_object_set_new(jr, "vs_bf16", jp);
        }
        json_object_set_new(j, "reward_last", jr);
        for (size_t k = 0; k < N; k++) json_array_append_new(jmx, cli_json_real(m[k]));
        json_object_set_new(jm, "values", jmx);
        json_object_set_new(jm, "mean", cli_json_real(sm.mean));
        json_object_set_new(jm, "ci_low", cli_json_real(sm.lo));
        json_object_set_new(jm, "ci_high", cli_json_real(sm.hi));
        json_object_set_new(j, "mismatch_last", jm);
        json_object_set_new(j, "onsets_found", json_integer(onsets));
        json_array_append_new(jruns, j);
    }
    fprintf(f, "%zu seeds (%llu..%llu), each arm from the seed's own warm start. reward, mismatch: each run's mean "
            "over the last tenth of the steps, then over seeds: mean [95%% Student t-interval, n - 1 = %zu df]; "
            "vs bf16: the paired difference over seeds (arm - bf16) [its 95%% t-interval]; paired-t p: two-sided "
            "paired t-test of a zero mean difference; sign: seeds where the arm's reward is above/below bf16's, "
            "sign p: exact two-sided sign test; onsets: runs where fp4-mismatch found a mismatch onset\n",
            N, (unsigned long long)demo_seed(c, 0), (unsigned long long)demo_seed(c, N - 1), N - 1);
    free(x);
    free(b);
    free(m);
}

/* a failed demo: the captures' temporaries unlinked and their handles freed
 * (nothing of the demo is committed); returns st */
static int demo_abort(demo_ctx *c, size_t njobs, int st)
{
    for (size_t j = 0; j < njobs; j++) fp4s_outfile_abort(&c->ofs[j]);
    free(c->ofs);
    c->ofs = NULL;
    return st;
}

static int run_demo(tool *t)
{
    catch_stop_signals(); /* the children stop after their step; the summary covers what ran */
    int sel[NDEMO];
    size_t nsel = 0;
    if (t->demo_runs) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", t->demo_runs);
        for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
            size_t i = 0;
            while (i < NDEMO && strcmp(demo_cfgs[i].name, tok)) i++;
            if (i == NDEMO) cli_usage("--demo-runs: unknown run '%s' (expected %s)", tok, DEMO_LIST);
            for (size_t j = 0; j < nsel; j++)
                if (sel[j] == (int)i) cli_usage("--demo-runs: '%s' twice", tok);
            sel[nsel++] = (int)i;
        }
    } else {
        for (size_t i = 0; i < NDEMO; i++)
            if (!demo_cfgs[i].extra) sel[nsel++] = (int)i;
    }
    demo_ctx c = {.t = t, .base = t->o, .sel = sel, .nsel = nsel, .nseeds = (size_t)t->seeds};
    c.base.steps = t->steps;
    size_t njobs = c.nseeds * nsel;
    struct stat dst;
    bool had_dir = stat(t->out, &dst) == 0;
    int rc = mkdir_p1(t->out);
    if (rc) cli_fail(rc);
    if (!had_dir && strlen(t->out) < sizeof demo_made_dir) snprintf(demo_made_dir, sizeof demo_made_dir, "%s", t->out);
    /* every output of the demo is one group: checked now, renamed into place
     * together once every run has finished (all or none) */
    char path[4200];
    for (size_t j = 0; j < njobs; j++) {
        demo_path(&c, j, "h5", path, sizeof path);
        cli_output(path);
        demo_path(&c, j, "tsv", path, sizeof path);
        cli_output(path);
    }
    for (size_t i = 0; i < nsel; i++) {
        snprintf(path, sizeof path, "%s/%s.dat", t->out, demo_cfgs[sel[i]].name);
        cli_output(path);
    }
    static const char *const dir_files[] = {"demo.gp", "summary.txt"};
    for (size_t e = 0; e < 2; e++) {
        snprintf(path, sizeof path, "%s/%s", t->out, dir_files[e]);
        cli_output(path);
    }
    /* the captures' temporaries, made here before the runs fork: each child
     * writes its capture there, this process commits them with the rest */
    c.ofs = xcalloc(njobs, sizeof *c.ofs);
    for (size_t j = 0; j < njobs; j++) {
        demo_path(&c, j, "h5", path, sizeof path);
        if ((rc = fp4s_outfile_begin(path, &c.ofs[j]))) cli_failf(rc, "%s", path);
    }
    /* the model's size, for the warm starts' shared memory */
    {
        fp4s_rl *r = NULL;
        if ((rc = fp4s_rl_open(&c.base, &r))) cli_fail(rc);
        c.np = fp4s_rl_param_count(r);
        fp4s_rl_close(&r);
    }
    double t0 = rl_wall();
    c.wper = (sizeof(warm_slot) + c.np * sizeof(float) + 63) / 64 * 64;
    c.per = (sizeof(demo_slot) + (size_t)t->steps * sizeof(fp4s_rl_stats) + 63) / 64 * 64;
    c.wshm = mmap(NULL, c.wper * c.nseeds, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c.shm = mmap(NULL, c.per * njobs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c.wshm == MAP_FAILED || c.shm == MAP_FAILED) cli_die(FP4S_EXIT_INTERNAL, "mmap: %s", strerror(errno));
    int *status = xcalloc(njobs, sizeof *status);
    /* 1. a warm start per seed */
    fork_pool(&c, c.nseeds, warm_job, status, warm_err);
    int st = 0;
    for (size_t k = 0; k < c.nseeds; k++) {
        warm_slot *ws = demo_warm(&c, k);
        if (status[k]) {
            fprintf(stderr, "%s: %s\n", cli_prog(), ws->err);
            if (!st) st = status[k];
        } else if (!t->quiet) {
            char sd[48] = "";
            if (c.nseeds > 1) snprintf(sd, sizeof sd, " (seed %llu)", (unsigned long long)demo_seed(&c, k));
            fprintf(stderr, "%s: warm start%s: %d supervised steps, sampled success %.3f (%.1f s)\n", cli_prog(), sd,
                    ws->sft.steps, ws->sft.success, ws->sft.seconds);
        }
    }
    if (st) {
        free(status);
        return demo_abort(&c, njobs, st);
    }
    /* 2. every arm of every seed */
    memset(status, 0, njobs * sizeof *status);
    fork_pool(&c, njobs, run_job, status, job_err);
    for (size_t j = 0; j < njobs; j++) {
        demo_slot *slot = demo_job(&c, j);
        slot->res.st = (fp4s_rl_stats *)(slot + 1);
        if (status[j]) {
            fprintf(stderr, "%s: %s\n", cli_prog(), slot->err);
            if (!st) st = status[j];
        }
    }
    free(status);
    if (st) return demo_abort(&c, njobs, st);
    /* the mismatch over steps as fp4-mismatch computes it, and its onset */
    fp4s_mm_opts mo;
    fp4s_mm_opts_defaults(&mo);
    fp4s_trace_opts to;
    fp4s_trace_opts_defaults(&to);
    fp4s_mm_onset_opts oo;
    fp4s_mm_onset_opts_defaults(&oo);
    demo_row *rows = xcalloc(njobs, sizeof *rows);
    for (size_t j = 0; j < njobs; j++) {
        const demo_cfg *d = &demo_cfgs[sel[j % nsel]];
        run_result *res = &demo_job(&c, j)->res;
        demo_row *row = &rows[j];
        if (c.nseeds == 1) {
            snprintf(path, sizeof path, "%s/%s.dat", t->out, d->name);
            if ((rc = write_plot_data(path, res))) cli_fail(rc);
        }
        demo_path(&c, j, "tsv", path, sizeof path);
        if ((rc = write_stats(path, res))) cli_fail(rc);
        fp4s_mm_result mr = {0};
        fp4s_mm_onset on = {0};
        /* the capture is read in its temporary, before the commit */
        int orc = fp4s_mm_analyze(fp4s_outfile_tmppath(c.ofs[j]), d->name, &mo, &to, &mr);
        char note[600] = "";
        if (orc) snprintf(note, sizeof note, "%s", fp4s_last_error());
        demo_path(&c, j, "h5", path, sizeof path);
        if ((rc = fp4s_outfile_commit(&c.ofs[j]))) cli_failf(rc, "%s", path); /* finished; cli_commit renames it */
        if (orc) { /* the run's scalars are in hand: the summary goes on without its onset */
            fprintf(stderr, "%s: %s: no onset: %s\n", cli_prog(), path, note);
        } else {
            const fp4s_mm_run *run = &mr.runs[0];
            int64_t *stp = xmalloc((run->nsteps + 1) * sizeof *stp);
            double *val = xmalloc((run->nsteps + 1) * sizeof *val);
            for (size_t k = 0; k < run->nsteps; k++) {
                stp[k] = run->steps[k].step;
                val[k] = run->steps[k].mean_abs;
            }
            orc = fp4s_mm_onset_find(stp, val, run->nsteps, &oo, &on);
            free(stp);
            free(val);
        }
        fp4s_mm_result_free(&mr);
        int n = res->steps_done, w = n / 10 > 10 ? n / 10 : (n < 10 ? n : 10);
        row->r0 = window_mean(res->st, n, w - 1, w, stat_index("reward"));
        row->r1 = window_mean(res->st, n, n - 1, w, stat_index("reward"));
        row->m0 = window_mean(res->st, n, w - 1, w, stat_index("mismatch"));
        row->m1 = window_mean(res->st, n, n - 1, w, stat_index("mismatch"));
        row->a0 = row->a1 = NAN;
        for (int k = 0; k < n; k++)
            if (!isnan(res->st[k].acc_trainer)) {
                if (isnan(row->a0)) row->a0 = res->st[k].acc_trainer;
                row->a1 = res->st[k].acc_trainer;
            }
        row->sps = res->seconds > 0 ? n / res->seconds : NAN;
        row->kurt = row->oratio = row->etop = NAN;
        for (int k = 0; k < n && isnan(row->kurt); k++)
            row->kurt = res->st[k].act_kurtosis, row->oratio = res->st[k].act_outlier_ratio, row->etop = res->st[k].err_top1;
        row->onset_found = orc == 0 && on.found;
        row->onset_step = on.step;
        if (row->onset_found) snprintf(row->onset, sizeof row->onset, "%lld", (long long)on.step);
        else snprintf(row->onset, sizeof row->onset, orc ? "n/a" : "none");
    }
    if (c.nseeds > 1)
        for (size_t i = 0; i < nsel; i++) {
            snprintf(path, sizeof path, "%s/%s.dat", t->out, demo_cfgs[sel[i]].name);
            if ((rc = write_plot_data_seeds(path, &c, i))) cli_fail(rc);
        }
    char onsets[NDEMO][32];
    for (size_t i = 0; i < nsel; i++) snprintf(onsets[i], sizeof onsets[i], "%s", c.nseeds == 1 ? rows[i].onset : "n/a");
    if ((rc = write_demo_plot(t, sel, nsel, onsets, c.nseeds))) cli_fail(rc);
    const warm_slot *w0 = demo_warm(&c, 0);
    char *summary = NULL;
    size_t sn = 0;
    FILE *f = open_memstream(&summary, &sn);
    if (!f) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    json_t *jruns = json_array();
    if (c.nseeds == 1) {
        fprintf(f, "%-14s %8s %8s %10s %10s %7s %8s %8s %7s\n", "run", "reward0", "reward", "mismatch0", "mismatch",
                "onset", "acc_tr0", "acc_tr", "steps/s");
        for (size_t i = 0; i < nsel; i++) {
            const demo_cfg *d = &demo_cfgs[sel[i]];
            const demo_row *row = &rows[i];
            fprintf(f, "%-14s %8.3f %8.3f %10.4g %10.4g %7s %8.3f %8.3f %7.2f\n", d->name, row->r0, row->r1, row->m0,
                    row->m1, row->onset, row->a0, row->a1, row->sps);
            demo_path(&c, i, "h5", path, sizeof path);
            json_t *j = run_json(&c.base, &demo_job(&c, i)->res, path);
            json_object_set_new(j, "name", json_string(d->name));
            json_object_set_new(j, "title", json_string(d->title));
            json_object_set_new(j, "trainer", json_string(fp4s_rl_trainer_name(d->trainer)));
            json_object_set_new(j, "rollout", json_string(fp4s_rl_rollout_name(d->rollout)));
            json_object_set_new(j, "remedy", json_string(d->remedy));
            json_object_set_new(j, "onset_step", row->onset_found ? json_integer(row->onset_step) : json_null());
            json_object_set_new(j, "reward_first", cli_json_real(row->r0));
            json_object_set_new(j, "reward_last", cli_json_real(row->r1));
            json_object_set_new(j, "mismatch_first", cli_json_real(row->m0));
            json_object_set_new(j, "mismatch_last", cli_json_real(row->m1));
            json_object_set_new(j, "act_kurtosis_first", cli_json_real(row->kurt));
            json_object_set_new(j, "act_outlier_ratio_first", cli_json_real(row->oratio));
            json_object_set_new(j, "err_top1_first", cli_json_real(row->etop));
            json_array_append_new(jruns, j);
        }
        fprintf(f, "reward, mismatch: means of the first and last %s; onset: fp4-mismatch's, on mean_abs; "
                "acc_tr: held-out greedy accuracy with the trainer's numerics, first and last\n"
                "warm start: %d steps, sampled success %.3f; %.0f s in all\n",
                "tenth of the steps", w0->sft.steps, w0->sft.success, rl_wall() - t0);
    } else {
        seeds_summary(&c, rows, f, jruns);
        fprintf(f, "%.0f s in all\n", rl_wall() - t0);
    }
    {
        double kk = 0, rr = 0, ee = 0;
        for (size_t j = 0; j < njobs; j++) kk += rows[j].kurt / njobs, rr += rows[j].oratio / njobs, ee += rows[j].etop / njobs;
        fprintf(f, "outlier structure (--outlier-gain %g --outlier-frac %g --gain-sigma %g): the trainer's inputs of "
                "qkv_proj and the experts at the first evaluation, mean over the runs: kurtosis %.3g, largest channel "
                "RMS %.3g times the median, %.3g of the NVFP4 error energy in the top 1%% of channels\n",
                c.base.outlier_gain, c.base.outlier_frac, c.base.gain_sigma, kk, rr, ee);
    }
    if (fclose(f)) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    snprintf(path, sizeof path, "%s/summary.txt", t->out);
    if ((rc = cli_write_text(path, summary, sn))) cli_fail(rc);
    if ((rc = cli_commit())) return rc; /* every run's files, demo.gp and summary.txt, all or none */
    /* the plot, from the committed script and data (its own temporary and rename) */
    rc = run_gnuplot(t->out, "demo.gp", "demo.png");
    if (rc < 0) cli_fail(rc);
    bool drawn = rc == 0;
    if (!drawn)
        fprintf(stderr, "%s: gnuplot not found: wrote %s/demo.gp and its data; run 'gnuplot demo.gp' in %s\n",
                cli_prog(), t->out, t->out);
    munmap(c.shm, c.per * njobs);
    munmap(c.wshm, c.wper * c.nseeds);
    free(rows);
    free(c.ofs);
    if (stop_signal)
        fprintf(stderr, "%s: interrupted by signal %d: the outputs hold the steps done\n", cli_prog(), (int)stop_signal);
    if (t->json) {
        json_t *j = json_object();
        json_object_set_new(j, "tool", json_string("fp4-rl"));
        json_object_set_new(j, "dir", json_string(t->out));
        json_object_set_new(j, "plot", drawn ? json_string("demo.png") : json_null());
        if (c.nseeds > 1) {
            json_t *js = json_array();
            for (size_t k = 0; k < c.nseeds; k++) json_array_append_new(js, json_integer((json_int_t)demo_seed(&c, k)));
            json_object_set_new(j, "seeds", js);
            json_object_set_new(j, "ci_level", json_real(0.95));
        }
        json_object_set_new(j, "runs", jruns);
        free(summary);
        int js = cli_json_print(j);
        return stop_signal ? 128 + (int)stop_signal : js;
    }
    json_decref(jruns);
    fputs(summary, stdout);
    free(summary);
    if (fflush(stdout)) return FP4S_EXIT_OUTPUT;
    return stop_signal ? 128 + (int)stop_signal : 0;
}

/* ---- options --------------------------------------------------------------------------------- */
static void copy_opt(char *dst, size_t n, const char *opt, const char *arg)
{
    if (strlen(arg) >= n) cli_usage("%s: '%s' is longer than %zu bytes", opt, arg, n - 1);
    snprintf(dst, n, "%s", arg);
}

static void parse(int argc, char **argv, tool *t)
{
    fp4s_rl_opts *o = &t->o;
    fp4s_rl_opts_defaults(o);
    t->steps = 200;
    t->seeds = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--demo")) demo_defaults(t);
    cli_common common;
    cli_common_init(&common, usage, false);
    int c;
    while ((c = cli_getopt(argc, argv, "o:p:", longopts)) != -1) {
        switch (c) {
        case OPT_TASK: if (fp4s_rl_task_parse(optarg, &o->task)) cli_usage("--task: %s", fp4s_last_error()); break;
        case OPT_STEPS: t->steps = (int)cli_parse_int("--steps", optarg, 1, 10000000); break;
        case OPT_SEED: o->seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_TRAINER: t->numerics_given = true; if (fp4s_rl_trainer_parse(optarg, &o->trainer)) cli_usage("--trainer: %s", fp4s_last_error()); break;
        case OPT_ROLLOUT: t->numerics_given = true; if (fp4s_rl_rollout_parse(optarg, &o->rollout)) cli_usage("--rollout: %s", fp4s_last_error()); break;
        case 'p': t->numerics_given = true; copy_opt(o->profile, sizeof o->profile, "--profile", optarg); break;
        case OPT_WPROFILE: t->numerics_given = true; copy_opt(o->weight_profile, sizeof o->weight_profile, "--weight-profile", optarg); break;
        case OPT_REMEDY: t->numerics_given = true; copy_opt(o->remedy, sizeof o->remedy, "--remedy", optarg); break;
        case OPT_AQN_END: o->aqn_end = cli_parse_double("--aqn-end", optarg, 0, 1); break;
        case OPT_AQN_STAGES: o->aqn_stages = (int)cli_parse_int("--aqn-stages", optarg, 2, 1000000); break;
        case OPT_QSITES: if (fp4s_rl_sites_parse(optarg, &o->quant_sites)) cli_usage("--quant-sites: %s", fp4s_last_error()); break;
        case OPT_DRIFT: if (fp4s_rl_drift_parse(optarg, &o->drift)) cli_usage("--drift: %s", fp4s_last_error()); break;
        case OPT_WIDTH: o->width = (int)cli_parse_int("--width", optarg, 32, 4096); break;
        case OPT_LAYERS: o->layers = (int)cli_parse_int("--layers", optarg, 1, 16); break;
        case OPT_HEADS: o->heads = (int)cli_parse_int("--heads", optarg, 1, 64); break;
        case OPT_EXPERTS: o->experts = (int)cli_parse_int("--experts", optarg, 1, 64); break;
        case OPT_TOPK: o->top_k = (int)cli_parse_int("--top-k", optarg, 1, 8); break;
        case OPT_EHIDDEN: o->expert_hidden = (int)cli_parse_int("--expert-hidden", optarg, 32, 16384); break;
        case OPT_AUX: o->aux_coef = cli_parse_double("--aux-coef", optarg, 0, 10); break;
        case OPT_PROMPTS: o->prompts = (int)cli_parse_int("--prompts", optarg, 1, FP4S_RL_MAX_SAMPLES / 2); break;
        case OPT_GROUP: o->group = (int)cli_parse_int("--group", optarg, 2, 1024); break;
        case OPT_TEMP: o->temperature = cli_parse_double("--temperature", optarg, 0.05, 20); break;
        case OPT_LR: o->lr = cli_parse_double("--lr", optarg, 0, 1); break;
        case OPT_BETA1: o->beta1 = cli_parse_double("--beta1", optarg, 0, 0.999999); break;
        case OPT_BETA2: o->beta2 = cli_parse_double("--beta2", optarg, 0, 0.999999999); break;
        case OPT_WD: o->weight_decay = cli_parse_double("--weight-decay", optarg, 0, 10); break;
        case OPT_GCLIP: o->grad_clip = cli_parse_double("--grad-clip", optarg, 0, 1e9); break;
        case OPT_CLIP: o->clip_eps = cli_parse_double("--clip-eps", optarg, 0, 10); break;
        case OPT_MINIB: o->minibatches = (int)cli_parse_int("--minibatches", optarg, 1, 1024); break;
        case OPT_IS: if (fp4s_rl_iscorr_parse(optarg, &o->is_corr)) cli_usage("--is-corr: %s", fp4s_last_error()); break;
        case OPT_ISCAP: o->is_cap = cli_parse_double("--is-cap", optarg, 1.000001, 1e6); break;
        case OPT_SFT_LR: o->sft_lr = cli_parse_double("--sft-lr", optarg, 0, 1); break;
        case OPT_SFT_BATCH: o->sft_batch = (int)cli_parse_int("--sft-batch", optarg, 1, FP4S_RL_MAX_SAMPLES); break;
        case OPT_SFT_MAX: o->sft_max_steps = (int)cli_parse_int("--sft-max-steps", optarg, 0, 10000000); break;
        case OPT_SFT_TARGET: o->sft_target = cli_parse_double("--sft-target", optarg, 0, 1); break;
        case OPT_SFT_EVERY: o->sft_check_every = (int)cli_parse_int("--sft-check-every", optarg, 1, 10000000); break;
        case OPT_EVAL_EVERY: o->eval_every = (int)cli_parse_int("--eval-every", optarg, 0, 10000000); break;
        case OPT_EVAL_PROMPTS: o->eval_prompts = (int)cli_parse_int("--eval-prompts", optarg, 1, FP4S_RL_MAX_SAMPLES); break;
        case OPT_ACT_EVERY: o->act_every = (int)cli_parse_int("--act-every", optarg, 0, 10000000); break;
        case OPT_ACT_SITES: copy_opt(o->act_sites, sizeof o->act_sites, "--act-sites", optarg); break;
        case OPT_ACT_SEQS: o->act_seqs = (int)cli_parse_int("--act-seqs", optarg, 1, FP4S_RL_MAX_SAMPLES); break;
        case OPT_MICRO: o->micro_batch = (int)cli_parse_int("--micro-batch", optarg, 1, 65536); break;
        case OPT_SHARD: o->shard = (int)cli_parse_int("--shard", optarg, 1, 4096); break;
        case OPT_STATS: t->stats = optarg; break;
        case CLI_OPT_FORCE: t->force = true; break; /* cli_force() once the options are read */
        case CLI_OPT_QUIET: t->quiet = true; break;
        case OPT_DEMO: t->demo = true; break;
        case OPT_DEMO_RUNS: t->demo_runs = optarg; break;
        case OPT_SEEDS: t->seeds = (int)cli_parse_int("--seeds", optarg, 1, 1000); break;
        case OPT_OUTLIERS:
            if (!strcmp(optarg, "none")) o->outlier_gain = 1, o->outlier_frac = 0, o->gain_sigma = 0;
            else if (strcmp(optarg, "on")) cli_usage("--outliers: expected on or none, got '%s'", optarg);
            break;
        case OPT_OGAIN: o->outlier_gain = cli_parse_double("--outlier-gain", optarg, 1, 1000); break;
        case OPT_OFRAC: o->outlier_frac = cli_parse_double("--outlier-frac", optarg, 0, 0.5); break;
        case OPT_GSIGMA: o->gain_sigma = cli_parse_double("--gain-sigma", optarg, 0, 3); break;
        case 'o': t->out = optarg; break;
        default:
            if (!cli_common_option(c, optarg, &common)) cli_usage("unknown option");
        }
    }
    t->json = common.json;
    if (optind < argc) cli_usage("unexpected argument '%s'", argv[optind]);
    o->steps = t->steps;
    if (!t->demo && !t->out) cli_usage("no output: give -o RUN.h5");
    if (t->demo && t->numerics_given)
        cli_usage("--demo runs its own numerics (%s): leave out --trainer, --rollout, -p, --weight-profile "
                  "and --remedy, or run them one by one without --demo", DEMO_LIST);
    if (t->demo_runs && !t->demo) cli_usage("--demo-runs needs --demo");
    if (t->seeds > 1 && !t->demo)
        cli_usage("--seeds runs the demo's arms on each seed and compares them with bf16: give --demo "
                  "(--demo-runs picks the arms), or run seeds one by one with --seed");
    if (t->demo && t->stats) cli_usage("--stats: the demo writes DIR/<run>.tsv itself");
    if (t->demo && !t->out) t->out = "fp4-rl-demo";
    if (fp4s_rl_opts_check(o)) cli_usage("%s", fp4s_last_error());
}

int main(int argc, char **argv)
{
    atexit(demo_rmdir); /* before cli_init: runs after its exit handler removed the temporaries */
    cli_init("fp4-rl");
    tool t = {0};
    parse(argc, argv, &t);
    if (t.force) cli_force();
    if (t.demo) return run_demo(&t);
    /* the outputs, checked before any work (an existing HDF5 file needs --force;
     * a directory that is not there fails now, not after the training) */
    cli_output(t.out);
    if (t.stats) cli_output(t.stats);
    catch_stop_signals();
    fp4s_outfile *of = NULL;
    int rc = fp4s_outfile_begin(t.out, &of);
    if (rc) cli_failf(rc, "%s", t.out);
    run_result res;
    rc = run_one(&t, &t.o, "run", fp4s_outfile_tmppath(of), NULL, 0, &res);
    if (!rc) rc = fp4s_outfile_commit(&of); /* finished; renamed into place with the stats by cli_commit */
    if (rc) {
        fp4s_outfile_abort(&of);
        free(res.st);
        cli_failf(rc, "%s", t.out);
    }
    if (res.diverged) fprintf(stderr, "%s: %s: stopped: %s\n", cli_prog(), t.out, res.diverged_msg);
    if (t.stats && (rc = write_stats(t.stats, &res))) {
        free(res.st);
        cli_failf(rc, "%s", t.stats);
    }
    if ((rc = cli_commit())) {
        free(res.st);
        return rc;
    }
    int status = 0;
    if (t.json) status = cli_json_print(run_json(&t.o, &res, t.out));
    free(res.st);
    if (res.interrupted) {
        fprintf(stderr, "%s: %s: interrupted by signal %d after %d steps (the capture and the stats hold them)\n",
                cli_prog(), t.out, (int)stop_signal, res.steps_done);
        return 128 + (int)stop_signal;
    }
    return status;
}
