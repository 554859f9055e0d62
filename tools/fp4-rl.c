/* fp4-rl: a small MoE policy trained with GRPO whose rollout runs in the
 * numerics chosen (FP4, FP8, BF16, remedies), written to a capture; --demo
 * runs the standard comparison (man/fp4-rl.1). */
#include "cli.h"

#include <fp4scope/capture.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/rl.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_TASK = 256, OPT_STEPS, OPT_SEED, OPT_TRAINER, OPT_ROLLOUT, OPT_WPROFILE, OPT_REMEDY, OPT_QSITES,
    OPT_DRIFT, OPT_WIDTH, OPT_LAYERS, OPT_HEADS, OPT_EXPERTS, OPT_TOPK, OPT_EHIDDEN, OPT_AUX, OPT_PROMPTS,
    OPT_GROUP, OPT_TEMP, OPT_LR, OPT_BETA1, OPT_BETA2, OPT_WD, OPT_GCLIP, OPT_CLIP, OPT_MINIB, OPT_IS,
    OPT_ISCAP, OPT_SFT_LR, OPT_SFT_BATCH, OPT_SFT_MAX, OPT_SFT_TARGET, OPT_SFT_EVERY, OPT_EVAL_EVERY,
    OPT_EVAL_PROMPTS, OPT_ACT_EVERY, OPT_ACT_SITES, OPT_ACT_SEQS, OPT_MICRO, OPT_SHARD, OPT_STATS,
    OPT_JSON, OPT_FORCE, OPT_QUIET, OPT_DEMO, OPT_HELP, OPT_VERSION
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
    {"json", no_argument, NULL, OPT_JSON},
    {"force", no_argument, NULL, OPT_FORCE},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"demo", no_argument, NULL, OPT_DEMO},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
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
           "  --remedy LIST       rollout remedies (rac:R[:RESID], mbs:G, of:A, keep:K, aqn:S, '+' joins)\n"
           "  --quant-sites LIST  qkv,o,router,experts,head,all (all)\n"
           "  --drift D           rollout engine drift: none, splitk, splitk-bf16 (splitk)\n"
           "Policy:\n"
           "  --task T            sort or add (sort)\n"
           "  --width D --layers L --heads H --experts E --top-k K --expert-hidden F (128 2 4 4 2 2D)\n"
           "  --aux-coef A        load-balancing coefficient (0)\n"
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
           "  --json              summary as JSON on stdout\n"
           "  --force             overwrite an existing output\n"
           "  --quiet             no progress on stderr\n"
           "  --help, --version\n\n"
           "Exit status: 0 ok, 2 usage, 3 bad input, 4 output not written, 5 internal error.\n");
}

typedef struct tool {
    fp4s_rl_opts o;
    int steps;
    const char *out, *stats;
    bool json, force, quiet, demo;
} tool;

/* ---- one run --------------------------------------------------------------------------------- */
typedef struct run_result {
    fp4s_rl_sft sft;
    fp4s_rl_stats *st;       /* [steps] */
    int steps_done;
    bool diverged;
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

/* Warm start (unless from is given), then `steps` steps into a new capture at path. */
static int run_one(const tool *t, const fp4s_rl_opts *o, const char *name, const char *path, fp4s_rl *from,
                   run_result *res)
{
    memset(res, 0, sizeof *res);
    fp4s_rl *r = NULL;
    fp4s_capture *cap = NULL;
    int rc = fp4s_rl_open(o, &r);
    if (rc) return rc;
    res->params = fp4s_rl_param_count(r);
    double t0 = 0;
    if (from) rc = fp4s_rl_copy_policy(r, from);
    else rc = fp4s_rl_warmstart(r, &res->sft);
    if (rc) goto done;
    fp4s_capture_opts co;
    fp4s_capture_opts_defaults(&co);
    co.producer = "fp4-rl";
    co.overwrite = t->force;
    co.gzip = 4;
    if ((rc = fp4s_capture_create(path, &co, &cap))) goto done;
    if ((rc = fp4s_rl_capture_header(r, cap))) goto done;
    if (!(res->st = calloc((size_t)t->steps + 1, sizeof *res->st))) {
        rc = fp4s_error_set(FP4S_ENOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < t->steps; k++) {
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
    (void)t0;
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
    int c;
    while ((c = getopt_long(argc, argv, "o:p:", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_TASK: if (fp4s_rl_task_parse(optarg, &o->task)) cli_usage("--task: %s", fp4s_last_error()); break;
        case OPT_STEPS: t->steps = (int)cli_parse_int("--steps", optarg, 1, 10000000); break;
        case OPT_SEED: o->seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_TRAINER: if (fp4s_rl_trainer_parse(optarg, &o->trainer)) cli_usage("--trainer: %s", fp4s_last_error()); break;
        case OPT_ROLLOUT: if (fp4s_rl_rollout_parse(optarg, &o->rollout)) cli_usage("--rollout: %s", fp4s_last_error()); break;
        case 'p': copy_opt(o->profile, sizeof o->profile, "--profile", optarg); break;
        case OPT_WPROFILE: copy_opt(o->weight_profile, sizeof o->weight_profile, "--weight-profile", optarg); break;
        case OPT_REMEDY: copy_opt(o->remedy, sizeof o->remedy, "--remedy", optarg); break;
        case OPT_QSITES: if (fp4s_rl_sites_parse(optarg, &o->quant_sites)) cli_usage("--quant-sites: %s", fp4s_last_error()); break;
        case OPT_DRIFT: if (fp4s_rl_drift_parse(optarg, &o->drift)) cli_usage("--drift: %s", fp4s_last_error()); break;
        case OPT_WIDTH: o->width = (int)cli_parse_int("--width", optarg, 32, 4096); break;
        case OPT_LAYERS: o->layers = (int)cli_parse_int("--layers", optarg, 1, 16); break;
        case OPT_HEADS: o->heads = (int)cli_parse_int("--heads", optarg, 1, 64); break;
        case OPT_EXPERTS: o->experts = (int)cli_parse_int("--experts", optarg, 1, 64); break;
        case OPT_TOPK: o->top_k = (int)cli_parse_int("--top-k", optarg, 1, 8); break;
        case OPT_EHIDDEN: o->expert_hidden = (int)cli_parse_int("--expert-hidden", optarg, 32, 16384); break;
        case OPT_AUX: o->aux_coef = cli_parse_double("--aux-coef", optarg, 0, 10); break;
        case OPT_PROMPTS: o->prompts = (int)cli_parse_int("--prompts", optarg, 1, 65536); break;
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
        case OPT_SFT_BATCH: o->sft_batch = (int)cli_parse_int("--sft-batch", optarg, 1, 65536); break;
        case OPT_SFT_MAX: o->sft_max_steps = (int)cli_parse_int("--sft-max-steps", optarg, 0, 10000000); break;
        case OPT_SFT_TARGET: o->sft_target = cli_parse_double("--sft-target", optarg, 0, 1); break;
        case OPT_SFT_EVERY: o->sft_check_every = (int)cli_parse_int("--sft-check-every", optarg, 1, 10000000); break;
        case OPT_EVAL_EVERY: o->eval_every = (int)cli_parse_int("--eval-every", optarg, 0, 10000000); break;
        case OPT_EVAL_PROMPTS: o->eval_prompts = (int)cli_parse_int("--eval-prompts", optarg, 1, 65536); break;
        case OPT_ACT_EVERY: o->act_every = (int)cli_parse_int("--act-every", optarg, 0, 10000000); break;
        case OPT_ACT_SITES: copy_opt(o->act_sites, sizeof o->act_sites, "--act-sites", optarg); break;
        case OPT_ACT_SEQS: o->act_seqs = (int)cli_parse_int("--act-seqs", optarg, 1, 65536); break;
        case OPT_MICRO: o->micro_batch = (int)cli_parse_int("--micro-batch", optarg, 1, 65536); break;
        case OPT_SHARD: o->shard = (int)cli_parse_int("--shard", optarg, 1, 4096); break;
        case OPT_STATS: t->stats = optarg; break;
        case OPT_JSON: t->json = true; break;
        case OPT_FORCE: t->force = true; break;
        case OPT_QUIET: t->quiet = true; break;
        case OPT_DEMO: t->demo = true; break;
        case 'o': t->out = optarg; break;
        case OPT_HELP: usage(); exit(0);
        case OPT_VERSION: cli_version(); exit(0);
        default: cli_usage("unknown option");
        }
    }
    if (optind < argc) cli_usage("unexpected argument '%s'", argv[optind]);
    if (!t->demo && !t->out) cli_usage("no output: give -o RUN.h5");
    if (fp4s_rl_opts_check(o)) cli_usage("%s", fp4s_last_error());
}

int main(int argc, char **argv)
{
    cli_init("fp4-rl");
    tool t = {0};
    parse(argc, argv, &t);
    if (t.demo) cli_usage("--demo: not yet");
    if (!t.force && access(t.out, F_OK) == 0)
        cli_die(FP4S_EXIT_OUTPUT, "%s: exists (use --force to replace it)", t.out);
    run_result res;
    int rc = run_one(&t, &t.o, "run", t.out, NULL, &res);
    if (rc) {
        free(res.st);
        cli_fail(rc);
    }
    if (res.diverged) fprintf(stderr, "%s: %s: stopped: %s\n", cli_prog(), t.out, res.diverged_msg);
    if (t.stats && (rc = write_stats(t.stats, &res))) {
        free(res.st);
        cli_failf(rc, "%s", t.stats);
    }
    int status = 0;
    if (t.json) status = cli_json_print(run_json(&t.o, &res, t.out));
    free(res.st);
    return status;
}
