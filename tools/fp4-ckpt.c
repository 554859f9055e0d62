/* fp4-ckpt: the FP4 weights of a quantized checkpoint, as the rollout engine
 * loads them (man/fp4-ckpt.1).
 *   ls CKPT                        the quantized weights: layout, shape, scales
 *   dequant CKPT NAME -o OUT.npy   one weight dequantized exactly (float32)
 *   check CKPT --trainer T         what profile P makes of the trainer's weights,
 *                                  against the checkpoint (tools/ckpt/check.c)
 *   audit CKPT                     the quantized set of both sides (tools/ckpt/audit.c) */
#include "ckpt/ckpt_tool.h"

#include <fp4scope/tensor.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-ckpt ls [OPTION]... CKPT\n"
        "       fp4-ckpt dequant [OPTION]... CKPT NAME -o OUT.npy\n"
        "       fp4-ckpt check [OPTION]... CKPT --trainer TRAINER\n"
        "       fp4-ckpt audit [OPTION]... CKPT --trainer TRAINER\n"
        "The FP4 weights of a quantized checkpoint as a rollout engine loads them:\n"
        "ModelOpt NVFP4, compressed-tensors NVFP4 and MXFP4, and gpt-oss MXFP4\n"
        "safetensors (fp4-ckpt(1) names the producer source each layout detail was\n"
        "checked in). CKPT is a .safetensors file or a directory (the files of its\n"
        "model.safetensors.index.json, else every *.safetensors in it).\n"
        "\n"
        "ls: every quantized weight: layout, experts x N x K, global and input scales.\n"
        "      --all             also every other tensor (name, dtype, shape)\n"
        "      --json, --csv     JSON or CSV on stdout\n"
        "\n"
        "dequant: weight NAME (its module path, as ls shows it) dequantized with its\n"
        "producer's float32 arithmetic into a .npy [experts * N, K] float32.\n"
        "  -o, --output OUT.npy  output (written atomically)\n"
        "      --expert E        only expert E: [N, K]\n"
        "\n"
        "check: quantize the trainer's weights with profile P and compare, per weight,\n"
        "the global scale, every block scale and every element code with the\n"
        "checkpoint's; the first differing block is named. Exit 1 if a weight differs.\n"
        "      --trainer T       the trainer's weights (.safetensors file or directory)\n"
        "  -f, -p, ...           the quantizer (fp4-quant(1)'s options; default profile\n"
        "                        per layout: modelopt, te, ceil, ocp)\n"
        "      --tensor-scale S  checkpoint (default): quantize with the checkpoint's\n"
        "                        global scale, so block scales and codes are compared\n"
        "                        whatever its origin; weights: the profile's own\n"
        "      --names GLOB      only these weights (fnmatch, '*' matches dots)\n"
        "      --json, --csv     JSON or CSV on stdout\n"
        "\n"
        "audit: every linear layer of the trainer and of the checkpoint, whether each\n"
        "side quantizes it, in which format and scale mode, and every disagreement\n"
        "(a layer quantized on one side only, fused layers with different global\n"
        "scales). Exit 1 with --check when there is one.\n"
        "      --trainer T       the trainer side: a capture (its sites), a list of\n"
        "                        quantized modules (text: NAME [FORMAT [PROFILE]] a line),\n"
        "                        or the trainer's weights (every layer unquantized)\n"
        "      --config FILE     hf_quant_config.json or config.json (default: found in\n"
        "                        CKPT's directory)\n"
        "      --check           exit 1 when the two sides disagree\n"
        "      --json, --csv     JSON or CSV on stdout\n"
        "\n"
        "      --quiet           no progress line on stderr\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 1 a check failed (check: a weight differs; audit --check:\n"
        "a disagreement), 2 usage, 3 input missing, unreadable or malformed (a missing\n"
        "or malformed scale tensor, a config naming modules that do not exist), 4\n"
        "output not written, 5 internal error.\n");
}

enum { OPT_ALL = 256, OPT_EXPERT };

fp4s_ckpt *ckpt_open_or_die(const char *path)
{
    fp4s_ckpt *c;
    int rc = fp4s_ckpt_open(path, &c);
    if (rc) cli_fail(rc);
    return c;
}

const char *ckpt_default_profile(fp4s_ckpt_layout l)
{
    switch (l) {
    case FP4S_CKPT_MODELOPT_NVFP4: return "modelopt";
    case FP4S_CKPT_CT_NVFP4: return "te";
    case FP4S_CKPT_GPTOSS_MXFP4: return "ceil";
    case FP4S_CKPT_CT_MXFP4: return "ocp";
    }
    return NULL;
}

static void shape3(const fp4s_ckpt_weight *w, char *b, size_t n)
{
    if (w->experts > 1) snprintf(b, n, "%zu x %zu x %zu", w->experts, w->rows, w->cols);
    else snprintf(b, n, "%zu x %zu", w->rows, w->cols);
}

static void tshape(const fp4s_ckpt_tensor *t, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < t->rank && i < 8 && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%" PRIu64, i ? ", " : "", t->dims[i]);
    if (k < n) snprintf(b + k, n - k, "%s]", t->rank > 8 ? ", ..." : "");
}

static int cmd_ls(int argc, char **argv)
{
    static const struct option lo[] = {{"all", no_argument, NULL, OPT_ALL}, CLI_REPORT_LONGOPTS CLI_OUTPUT_LONGOPTS
                                       CLI_COMMON_LONGOPTS {NULL, 0, NULL, 0}};
    cli_common common;
    cli_common_init(&common, usage_text, false);
    bool all = false;
    int ch;
    while ((ch = cli_getopt(argc, argv, "", lo)) != -1) {
        if (ch == OPT_ALL) all = true;
        else if (!cli_common_option(ch, optarg, &common)) cli_usage("ls: unknown option '%s'", argv[optind - 1]);
    }
    cli_common_check(&common);
    if (optind + 1 != argc) cli_usage("ls: expected one CKPT");
    const char *path = argv[optind];
    fp4s_ckpt *c = ckpt_open_or_die(path);
    size_t nw = fp4s_ckpt_nweights(c), nt = fp4s_ckpt_ntensors(c);
    if (common.json) {
        json_t *j = json_object(), *a = json_array();
        json_object_set_new(j, "checkpoint", json_string(path));
        for (size_t i = 0; i < nw; i++) {
            const fp4s_ckpt_weight *w = fp4s_ckpt_weight_at(c, i);
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(w->name));
            json_object_set_new(o, "layout", json_string(fp4s_ckpt_layout_name(w->layout)));
            json_object_set_new(o, "format", json_string(fp4s_format_name(w->format)));
            json_object_set_new(o, "experts", json_integer((json_int_t)w->experts));
            json_object_set_new(o, "rows", json_integer((json_int_t)w->rows));
            json_object_set_new(o, "cols", json_integer((json_int_t)w->cols));
            json_object_set_new(o, "global_scale", w->format == FP4S_NVFP4 ? cli_json_real(w->global_scale) : json_null());
            json_object_set_new(o, "global_scale_stored",
                                w->format == FP4S_NVFP4 ? cli_json_real(w->global_stored) : json_null());
            json_object_set_new(o, "input_scale", w->input_scale > 0 ? cli_json_real(w->input_scale) : json_null());
            json_object_set_new(o, "codes", json_string(w->codes));
            json_object_set_new(o, "scales", json_string(w->scales));
            json_object_set_new(o, "global_scale_tensor", w->gscale[0] ? json_string(w->gscale) : json_null());
            json_object_set_new(o, "input_scale_tensor", w->iscale[0] ? json_string(w->iscale) : json_null());
            json_array_append_new(a, o);
        }
        json_object_set_new(j, "weights", a);
        json_object_set_new(j, "tensors", json_integer((json_int_t)nt));
        if (all) {
            json_t *ta = json_array();
            for (size_t i = 0; i < nt; i++) {
                const fp4s_ckpt_tensor *t = fp4s_ckpt_tensor_at(c, i);
                json_t *o = json_object(), *sh = json_array();
                json_object_set_new(o, "name", json_string(t->name));
                json_object_set_new(o, "dtype", json_string(t->dtype));
                for (int d = 0; d < t->rank && d < 8; d++) json_array_append_new(sh, json_integer((json_int_t)t->dims[d]));
                json_object_set_new(o, "shape", sh);
                json_object_set_new(o, "file", json_string(t->file));
                json_array_append_new(ta, o);
            }
            json_object_set_new(j, "all_tensors", ta);
        }
        fp4s_ckpt_close(&c);
        return cli_json_print(j);
    }
    if (common.csv) {
        printf("name,layout,format,experts,rows,cols,global_scale,input_scale\n");
        for (size_t i = 0; i < nw; i++) {
            const fp4s_ckpt_weight *w = fp4s_ckpt_weight_at(c, i);
            cli_csv_str(w->name);
            printf(",%s,%s,%zu,%zu,%zu,", fp4s_ckpt_layout_name(w->layout), fp4s_format_name(w->format), w->experts,
                   w->rows, w->cols);
            if (w->format == FP4S_NVFP4) printf("%.9g", w->global_scale);
            putchar(',');
            if (w->input_scale > 0) printf("%.9g", w->input_scale);
            putchar('\n');
        }
        fp4s_ckpt_close(&c);
        return cli_stdout_flush();
    }
    printf("%s: %zu quantized weights, %zu tensors\n", path, nw, nt);
    if (nw) printf("  %-52s %-26s %18s %13s %13s\n", "weight", "layout", "shape", "global", "input");
    for (size_t i = 0; i < nw; i++) {
        const fp4s_ckpt_weight *w = fp4s_ckpt_weight_at(c, i);
        char sh[64], g[32] = "-", in[32] = "-";
        shape3(w, sh, sizeof sh);
        if (w->format == FP4S_NVFP4) snprintf(g, sizeof g, "%.6g", w->global_scale);
        if (w->input_scale > 0) snprintf(in, sizeof in, "%.6g", w->input_scale);
        printf("  %-52s %-26s %18s %13s %13s\n", w->name, fp4s_ckpt_layout_name(w->layout), sh, g, in);
    }
    if (nw) printf("global and input: decode scales (amax / 2688 as ModelOpt stores them; compressed-tensors stores "
                   "their reciprocals)\n");
    if (all) {
        printf("tensors:\n");
        for (size_t i = 0; i < nt; i++) {
            const fp4s_ckpt_tensor *t = fp4s_ckpt_tensor_at(c, i);
            char sh[160];
            tshape(t, sh, sizeof sh);
            printf("  %-60s %-8s %s\n", t->name, t->dtype, sh);
        }
    }
    fp4s_ckpt_close(&c);
    return cli_stdout_flush();
}

static int cmd_dequant(int argc, char **argv)
{
    static const struct option lo[] = {{"output", required_argument, NULL, 'o'},
                                       {"expert", required_argument, NULL, OPT_EXPERT}, CLI_OUTPUT_LONGOPTS
                                       CLI_COMMON_LONGOPTS {NULL, 0, NULL, 0}};
    cli_common common;
    cli_common_init(&common, usage_text, false);
    const char *out = NULL;
    long long expert = -1;
    int ch;
    while ((ch = cli_getopt(argc, argv, "o:", lo)) != -1) {
        if (ch == 'o') out = optarg;
        else if (ch == OPT_EXPERT) expert = cli_parse_int("--expert", optarg, 0, 1LL << 40);
        else if (!cli_common_option(ch, optarg, &common)) cli_usage("dequant: unknown option '%s'", argv[optind - 1]);
    }
    cli_common_check(&common);
    if (optind + 2 != argc) cli_usage("dequant: expected CKPT NAME");
    if (!out) cli_usage("dequant: -o OUT.npy is required");
    const char *path = argv[optind], *name = argv[optind + 1];
    cli_input(path);
    cli_output(out);
    fp4s_ckpt *c = ckpt_open_or_die(path);
    const fp4s_ckpt_weight *w = fp4s_ckpt_weight_find(c, name);
    if (!w)
        cli_die(FP4S_EXIT_INPUT, "%s: no quantized weight named %s (fp4-ckpt ls %s lists them)", path, name, path);
    if (expert >= 0 && (size_t)expert >= w->experts)
        cli_die(FP4S_EXIT_USAGE, "--expert %lld: %s has %zu expert%s", expert, name, w->experts,
                w->experts == 1 ? "" : "s");
    size_t e0 = expert >= 0 ? (size_t)expert : 0, e1 = expert >= 0 ? e0 + 1 : w->experts;
    size_t per = w->rows * w->cols;
    float *v = xmalloc((e1 - e0) * per * sizeof *v);
    for (size_t e = e0; e < e1; e++) {
        int rc = fp4s_ckpt_dequant(c, w, e, v + (e - e0) * per);
        if (rc) cli_fail(rc);
    }
    int rc = fp4s_npy_write(out, FP4S_DT_F32, 2, (e1 - e0) * w->rows, w->cols, v);
    free(v);
    fp4s_ckpt_close(&c);
    if (rc) exit(cli_report(rc));
    return cli_commit();
}

int main(int argc, char **argv)
{
    cli_init("fp4-ckpt");
    if (argc < 2) cli_usage("expected a command: ls, dequant, check or audit");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage_text();
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        cli_version();
        return 0;
    }
    argv[1] = argv[0];
    argc--;
    argv++;
    if (strcmp(cmd, "ls") == 0) return cmd_ls(argc, argv);
    if (strcmp(cmd, "dequant") == 0) return cmd_dequant(argc, argv);
    if (strcmp(cmd, "check") == 0) return ckpt_cmd_check(argc, argv);
    if (strcmp(cmd, "audit") == 0) return ckpt_cmd_audit(argc, argv);
    cli_usage("unknown command '%s' (ls, dequant, check or audit)", cmd);
}
