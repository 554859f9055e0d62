/* fp4-channels: per-channel 4-bit error report of an activation [tokens, K],
 * ranking, selection of a compensation set, coverage curve and its cost. */
#include "cli.h"
#include "par.h"
#include "out/out.h"

#include <fp4scope/channels.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-channels [OPTION]... INPUT\n"
        "Per-channel quantization error of an activation INPUT [tokens, K] quantized\n"
        "along K: rank the channels, select a compensation set, print the coverage\n"
        "curve and the cost of compensating the set in a GEMM.\n"
        "\n"
        "INPUT and W are file.npy, file.safetensors:NAME or file.h5:/dataset.\n"
        "\n"
        "Quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        "      --score S         residual (default), relative, hcp (needs --weight), deadzone\n"
        "      --top K           select the K best channels\n"
        "      --ratio R         select ceil(R*K) channels, 0 < R <= 1 (default 0.125)\n"
        "      --weight W        weight [N, K] of the GEMM (for hcp and the cost)\n"
        CLI_HELP_WEIGHT_2D
        "      --n-out N         GEMM outputs N for the cost when no weight is given\n"
        CLI_HELP_DZ_TIE
        "      --show N          channels listed in the table (default 20, 0 = all)\n"
        "      --json            JSON on stdout\n"
        "      --csv             CSV of the channels on stdout, best first\n"
        "  -o, --output FILE     write the selected set: FILE.json as JSON, else HDF5\n"
        "      --force           replace an existing HDF5 output (the man page, FILES)\n"
        "      --quiet           no progress line on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        "      --chunk N         elements per read chunk (default 2097152, 16777216 on the GPU)\n"
        "      --device DEV      cpu (default), cuda or auto (the GPU when one is usable);\n"
        "                        list: what this build and machine can do\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 2 usage (also --device cuda where the GPU cannot run),\n"
        "3 input unreadable or malformed, 4 output not written, 5 internal error.\n");
}

enum {
    OPT_FIRST_ = 256, OPT_SCORE, OPT_TOP, OPT_RATIO, OPT_NOUT, OPT_SHOW
};

static json_t *report_json(const fp4s_spec *spec, const fp4s_channels_report *r, const char *src,
                           const char *weight)
{
    json_t *root = json_object();
    json_object_set_new(root, "tool", json_string("fp4-channels"));
    json_object_set_new(root, "format", json_string(fp4s_format_name(spec->format)));
    json_object_set_new(root, "profile", json_string(spec->profile));
    json_object_set_new(root, "score", json_string(fp4s_chscore_name(r->score)));
    json_t *sel = json_object();
    json_object_set_new(sel, "top", r->top ? json_integer((json_int_t)r->top) : json_null());
    json_object_set_new(sel, "ratio", isnan(r->ratio) ? json_null() : json_real(r->ratio));
    json_object_set_new(sel, "count", json_integer((json_int_t)r->count));
    json_object_set_new(root, "selection", sel);
    json_object_set_new(root, "source", json_string(src));
    json_object_set_new(root, "weight", weight ? json_string(weight) : json_null());
    json_object_set_new(root, "tokens", json_integer((json_int_t)r->tokens));
    json_object_set_new(root, "k", json_integer((json_int_t)r->k));
    char desc[512];
    fp4s_spec_describe(spec, desc, sizeof desc);
    json_object_set_new(root, "spec", json_string(desc));
    json_t *chs = json_array();
    for (size_t i = 0; i < r->k; i++)
        json_array_append_new(chs, out_json_record(fp4s_rtype_channel_stat(), &r->ch[i], NULL));
    json_object_set_new(root, "channels", chs);
    json_t *cov = json_array();
    for (size_t i = 0; i < r->ncoverage; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "ratio", json_real(r->coverage[i].ratio));
        json_object_set_new(p, "channels", json_integer((json_int_t)r->coverage[i].channels));
        json_object_set_new(p, "share", cli_json_real(r->coverage[i].share));
        json_array_append_new(cov, p);
    }
    json_object_set_new(root, "coverage", cov);
    json_t *cost = json_object();
    const fp4s_channels_cost *c = &r->cost;
    json_object_set_new(cost, "tokens", json_integer((json_int_t)c->tokens));
    json_object_set_new(cost, "n_out", json_integer((json_int_t)c->n_out));
    json_object_set_new(cost, "n_out_assumed", json_boolean(c->n_out_assumed));
    json_object_set_new(cost, "k", json_integer((json_int_t)c->k));
    json_object_set_new(cost, "selected", json_integer((json_int_t)c->selected));
    json_object_set_new(cost, "padded", json_integer((json_int_t)c->padded));
    json_object_set_new(cost, "flops_base", cli_json_real(c->flops_base));
    json_object_set_new(cost, "flops_extra", cli_json_real(c->flops_extra));
    json_object_set_new(cost, "flops_ratio", cli_json_real(c->flops_ratio));
    json_object_set_new(cost, "bytes_base", cli_json_real(c->bytes_base));
    json_object_set_new(cost, "bytes_extra", cli_json_real(c->bytes_extra));
    json_object_set_new(cost, "bytes_ratio", cli_json_real(c->bytes_ratio));
    json_object_set_new(root, "cost", cost);
    json_object_set_new(root, "summary", cli_decomp_json(&r->summary, NULL));
    if (r->have_weight) {
        json_object_set_new(root, "weight_tile2d", json_boolean(r->weight_tile2d));
        json_object_set_new(root, "weight_summary", cli_decomp_json(&r->weight_summary, NULL));
    }
    return root;
}

static void fmtv(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v)) snprintf(b, n, f, v);
    else snprintf(b, n, "%s", "-");
}

/* The command line, checked. */
typedef struct args {
    cli_common common;
    cli_quant qo;
    cli_analysis an;
    const char *score_s, *outpath, *input;
    bool have_top;
    long long top, show, nout;
    double ratio;
} args;

static void parse_args(int argc, char **argv, args *a)
{
    cli_quant qo;
    cli_quant_init(&qo);
    const char *score_s = NULL, *outpath = NULL;
    cli_analysis an = {0};
    bool have_top = false, have_ratio = false;
    cli_common common;
    cli_common_init(&common, usage_text, true);
    long long top = 0, show = 20, nout = 0;
    double ratio = 0.125;
    static const struct option lo[] = {
        CLI_QUANT_LONGOPTS
        {"output", required_argument, NULL, 'o'},
        {"score", required_argument, NULL, OPT_SCORE},
        {"top", required_argument, NULL, OPT_TOP},
        {"ratio", required_argument, NULL, OPT_RATIO},
        CLI_WEIGHT_LONGOPTS
        CLI_WEIGHT_2D_LONGOPTS
        {"n-out", required_argument, NULL, OPT_NOUT},
        CLI_DZ_TIE_LONGOPTS
        {"show", required_argument, NULL, OPT_SHOW},
        CLI_REPORT_LONGOPTS
        CLI_THREADS_LONGOPTS
        CLI_CHUNK_LONGOPTS
        CLI_COMMON_LONGOPTS
        CLI_OUTPUT_LONGOPTS
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:o:", lo)) != -1) {
        switch (c) {
        case 'o': outpath = optarg; break;
        case OPT_SCORE: score_s = optarg; break;
        case OPT_TOP: top = cli_parse_int("--top", optarg, 1, (long long)1 << 40); have_top = true; break;
        case OPT_RATIO:
            ratio = cli_parse_double("--ratio", optarg, 0.0, 1.0);
            if (!(ratio > 0.0)) cli_usage("--ratio: expected a number in (0, 1], got '%s'", optarg);
            have_ratio = true;
            break;
        case OPT_NOUT: nout = cli_parse_int("--n-out", optarg, 1, (long long)1 << 40); break;
        case OPT_SHOW: show = cli_parse_int("--show", optarg, 0, (long long)1 << 40); break;
        default: cli_option_rest(c, optarg, argv, &common, &qo, &an);
        }
    }
    cli_common_check(&common);
    if (have_top && have_ratio) cli_usage("--top and --ratio exclude each other");
    if (optind >= argc) cli_usage("no INPUT given");
    if (optind + 1 < argc) cli_usage("one INPUT expected, got %d", argc - optind);
    const char *input = argv[optind];

    *a = (args){common, qo, an, score_s, outpath, input, have_top, top, show, nout, ratio};
}

/* --csv: the channels, best first. */
static int print_csv(const fp4s_channels_report *r)
{
    printf("rank,channel,score,selected,energy_total,energy_scale,energy_deadzone,energy_grid,"
           "relative_error,residual_norm,amax,deadzone_fraction,mean_abs_dx,mean_abs_dw,hcp\n");
    for (size_t i = 0; i < r->k; i++) {
        const fp4s_channel_stat *s = &r->ch[i];
        double v[] = {s->score, NAN, s->energy_total, s->energy_scale, s->energy_deadzone, s->energy_grid,
                      s->relative_error, s->residual_norm, s->amax, s->deadzone_fraction,
                      s->mean_abs_dx, s->mean_abs_dw, s->hcp};
        printf("%zu,%zu", s->rank, s->channel);
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            if (k == 1) {
                printf(",%d", s->selected ? 1 : 0);
                continue;
            }
            if (isfinite(v[k])) printf(",%.17g", v[k]);
            else putchar(',');
        }
        putchar('\n');
    }
    return cli_stdout_flush();
}

/* The table: the tensor, the first `show` channels, the coverage and the cost. */
static int print_table(const fp4s_spec *sp, const fp4s_channels_report *r, const char *input, const char *weight,
                       long long show)
{
    const fp4s_spec spec = *sp;
    char desc[512];
    fp4s_spec_describe(&spec, desc, sizeof desc);
    printf("quantizer: %s\n", desc);
    printf("activation: %s  [%zu tokens x %zu channels]\n", input, r->tokens, r->k);
    if (r->have_weight)
        printf("weight:     %s  [%zu x %zu], %s scaling\n", weight, r->weight_rows, r->k,
               r->weight_tile2d ? "2-D 16x16" : "1-D");
    char a[32], b[32];
    fmtv(a, sizeof a, "%.4g", r->summary.relative_error);
    fmtv(b, sizeof b, "%.2f", r->summary.snr_db);
    printf("tensor: relative error %s, SNR %s dB, error energy %.6g\n", a, b, r->summary.energy_total);
    if (r->summary.nonfinite)
        printf("non-finite inputs: %llu (their blocks excluded)\n", (unsigned long long)r->summary.nonfinite);
    printf("score: %s; selected %zu of %zu channels (%s)\n\n", fp4s_chscore_name(r->score), r->count, r->k,
           r->top ? "--top" : "--ratio");
    printf("%6s %8s %12s %12s %10s %10s %8s %8s %8s %8s", "rank", "channel", "score", "||e_j||",
           "rel.err", "amax", "dz frac", "scale", "deadzone", "grid");
    if (r->have_weight) printf(" %10s %10s %10s", "mean|dX|", "mean|dW|", "hcp");
    putchar('\n');
    size_t lim = show == 0 || (size_t)show > r->k ? r->k : (size_t)show;
    for (size_t i = 0; i < lim; i++) {
        const fp4s_channel_stat *s = &r->ch[i];
        char sc[32], rn[32], re[32], am[32], dz[32], p1[32], p2[32], p3[32];
        fmtv(sc, 32, "%.5g", s->score);
        fmtv(rn, 32, "%.5g", s->residual_norm);
        fmtv(re, 32, "%.4g", s->relative_error);
        fmtv(am, 32, "%.4g", s->amax);
        fmtv(dz, 32, "%.2f%%", 100.0 * s->deadzone_fraction);
        double et = s->energy_total;
        fmtv(p1, 32, "%.1f%%", et > 0 ? 100.0 * s->energy_scale / et : NAN);
        fmtv(p2, 32, "%.1f%%", et > 0 ? 100.0 * s->energy_deadzone / et : NAN);
        fmtv(p3, 32, "%.1f%%", et > 0 ? 100.0 * s->energy_grid / et : NAN);
        printf("%6zu %8zu %12s %12s %10s %10s %8s %8s %8s %8s%s", s->rank, s->channel, sc, rn, re, am, dz, p1,
               p2, p3, "");
        if (r->have_weight) {
            char x1[32], x2[32], x3[32];
            fmtv(x1, 32, "%.4g", s->mean_abs_dx);
            fmtv(x2, 32, "%.4g", s->mean_abs_dw);
            fmtv(x3, 32, "%.4g", s->hcp);
            printf(" %10s %10s %10s", x1, x2, x3);
        }
        printf("%s\n", s->selected ? "  *" : "");
    }
    if (lim < r->k) printf("%6s (%zu more; --show 0 lists all)\n", "...", r->k - lim);
    printf("\ncoverage: share of the activation error energy held by the top r of channels\n");
    printf("%8s %9s %9s\n", "r", "channels", "share");
    for (size_t i = 0; i < r->ncoverage; i++) {
        char sh[32];
        fmtv(sh, 32, "%.2f%%", 100.0 * r->coverage[i].share);
        printf("%7.1f%% %9zu %9s\n", 100.0 * r->coverage[i].ratio, r->coverage[i].channels, sh);
    }
    const fp4s_channels_cost *cst = &r->cost;
    printf("\ncost of compensating %zu channels (padded to %zu) in a GEMM [%zu x %zu] x [%zu x %zu]%s:\n",
           cst->selected, cst->padded, cst->tokens, cst->k, cst->k, cst->n_out,
           cst->n_out_assumed ? " (N = K assumed; give --weight or --n-out)" : "");
    printf("  extra FLOPs %.4g (%.2f%% of %.4g)\n", cst->flops_extra, 100.0 * cst->flops_ratio, cst->flops_base);
    printf("  extra bytes %.4g (%.2f%% of %.4g FP4 operand bytes)\n", cst->bytes_extra,
           100.0 * cst->bytes_ratio, cst->bytes_base);
    return cli_stdout_flush();
}

int main(int argc, char **argv)
{
    cli_init("fp4-channels");
    par_init();
    args a;
    parse_args(argc, argv, &a);
    const cli_analysis an = a.an;
    const char *score_s = a.score_s, *outpath = a.outpath, *input = a.input;
    const cli_common common = a.common;
    fp4s_spec spec;
    cli_quant_spec(&a.qo, CLI_FORMATS_FP4, "per-channel reports are", &spec);
    int rc;
    fp4s_channels_opts o;
    fp4s_channels_opts_defaults(&o);
    if (score_s && fp4s_chscore_parse(score_s, &o.score)) cli_usage("--score: %s", fp4s_last_error());
    if (o.score == FP4S_SCORE_HCP && !an.weight) cli_usage("--score hcp needs --weight W");
    if (a.have_top) o.top = (size_t)a.top;
    o.ratio = a.ratio;
    if (an.weight_2d) o.weight_tile2d = cli_weight_2d(an.weight_2d);
    o.n_out = (size_t)a.nout;
    cli_dz_tie(an.dz_tie, &o.decomp.dz_tie);
    if (common.chunk) o.decomp.chunk_elems = common.chunk;
    o.decomp.device = cli_device(common.device_arg, &spec);

    cli_input(input);
    if (an.weight) cli_input(an.weight);
    if (outpath) cli_output(outpath);
    fp4s_channels_report *r = NULL;
    cli_progress_begin(input);
    rc = par_channels_run(&spec, &o, input, an.weight, &r); /* over MPI ranks: rank 0 goes on (par.h) */
    cli_progress_end();
    if (rc == PAR_DONE) return 0;
    if (rc) exit(cli_report(rc));

    if (outpath) {
        if (cli_ends_with(outpath, ".json")) {
            json_t *j = report_json(&spec, r, input, an.weight);
            rc = cli_json_write(outpath, j);
            json_decref(j);
        } else {
            rc = fp4s_channels_write_h5(outpath, &spec, r, input, an.weight);
        }
        if (rc) exit(cli_report(rc));
        if ((rc = cli_commit())) exit(rc);
    }

    int status;
    if (common.json) status = cli_json_print(report_json(&spec, r, input, an.weight));
    else if (common.csv) status = print_csv(r);
    else status = print_table(&spec, r, input, an.weight, a.show);
    fp4s_channels_free(&r);
    return status;
}
