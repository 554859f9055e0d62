/* fp4-quant: quantize a tensor to MXFP4, NVFP4 or FP8 exactly as a named engine
 * does, write codes/scales/dequantized values, summarize, or diff two profiles
 * element by element (man/fp4-quant.1). The command line is parsed here; the
 * passes, the outputs, the comparison and the report are in quant/. */
#include "quant/quant.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_PAD = 256, OPT_CODES, OPT_SCALES, OPT_DEQUANT, OPT_DIFF, OPT_LIST, OPT_REF, OPT_CHUNK,
    OPT_GZIP, OPT_SHOW, OPT_ROW_SCALES, OPT_IDENTIFY, OPT_IDENTIFY_SCALES
};

static const struct option longopts[] = {
    CLI_QUANT_LONGOPTS
    {"pad", no_argument, NULL, OPT_PAD},
    {"output", required_argument, NULL, 'o'},
    {"codes", required_argument, NULL, OPT_CODES},
    {"scales", required_argument, NULL, OPT_SCALES},
    {"dequant", required_argument, NULL, OPT_DEQUANT},
    {"row-scales", required_argument, NULL, OPT_ROW_SCALES},
    CLI_JSON_LONGOPTS
    {"diff", required_argument, NULL, OPT_DIFF},
    {"list-profiles", no_argument, NULL, OPT_LIST},
    CLI_THREADS_LONGOPTS
    {"ref", no_argument, NULL, OPT_REF},
    {"chunk-rows", required_argument, NULL, OPT_CHUNK},
    {"gzip", required_argument, NULL, OPT_GZIP},
    {"show", required_argument, NULL, OPT_SHOW},
    {"identify", required_argument, NULL, OPT_IDENTIFY},
    {"identify-scales", required_argument, NULL, OPT_IDENTIFY_SCALES},
    CLI_OUTPUT_LONGOPTS
    CLI_COMMON_LONGOPTS
    {NULL, 0, NULL, 0},
};

/* The names of a table joined into buf (for help texts). */
static const char *names(fp4s_name_kind kind, const char *sep, const char *last, char *buf, size_t n)
{
    fp4s_names(kind, sep, last, buf, n);
    return buf;
}

static void usage(void)
{
    char a[256];
    printf("Usage: fp4-quant [-f %s] [-p PROFILE] [--scale-rule R] [--round T]\n"
           "                 [--pad] [-o OUT.h5] [--codes C.npy] [--scales S.npy] [--dequant D.npy]\n"
           "                 [--json] [--diff PROFILE] [--list-profiles] INPUT\n"
           "Quantize a tensor exactly as the engine a profile names does, and report what\n"
           "it did; or run it through two profiles and show where they disagree.\n"
           "INPUT: file.npy, file.safetensors:NAME or file.h5:/dataset (any rank; rank >= 3\n"
           "reads as [prod(leading), last]; blocks run along the last dimension).\n\n"
           "Quantizer (a profile fills every rule; options override it):\n",
           names(FP4S_NAMES_FORMAT, "|", NULL, a, sizeof a));
    cli_quant_usage(CLI_FORMATS_ALL);
    printf("      --pad             zero-pad the last dimension to a multiple of the block\n"
           "                        (without it a non-multiple is an error)\n"
           "Outputs (written atomically; a failure leaves none of them):\n"
           "  -o, --output OUT.h5   packed HDF5: codes, scales, tensor_scale, self-describing\n"
           "                        attributes and a numpy decode recipe\n"
           "      --codes C.npy     one code per element as uint8 (E2M1 0..15, sign in bit 3;\n"
           "                        FP8: the E4M3 byte), in the input's shape\n"
           "      --scales S.npy    scale bytes uint8 [rows, cols/block] (FP8: float32 tiles)\n"
           "      --dequant D.npy   dequantized float32 in the input's shape\n"
           "      --row-scales R.npy  row-scaled NVFP4: each row's recorded tensor scale, float32 [rows]\n"
           "      --gzip L          gzip level 0..9 for -o (default 0)\n"
           "      --force           replace an existing HDF5 output (fp4-quant(1), FILES)\n"
           "      --quiet           no progress line on stderr\n"
           "Report:\n"
           "      --json            summary as JSON on stdout instead of the table\n"
           "      --diff P2         also quantize with profile P2 (same format, its own\n"
           "                        rules) and report differing scale and element codes\n"
           "      --show N          differing positions listed by --diff (default 8)\n"
           "      --list-profiles   list the profiles and what each reproduces, then exit\n"
           "      --identify C --identify-scales S\n"
           "                        which profile, or profile with one option changed,\n"
           "                        gives an engine's codes C (uint8 [rows, cols], or two a\n"
           "                        byte [rows, cols/2]) and scale bytes S [rows, blocks]\n"
           "                        from INPUT bit for bit; else the nearest --show of them\n"
           "Execution:\n"
           "      --threads N       worker threads (default: FP4S_THREADS or all CPUs; at most 256)\n"
           "      --ref             force the scalar reference kernels (as FP4S_FORCE_REF=1)\n"
           "      --chunk-rows N    rows per streamed chunk (default: about 1M elements,\n"
           "                        16M on the GPU)\n"
           "      --device DEV      where the quantizer runs: cpu (default), cuda (the GPU:\n"
           "                        the same codes, scales and statistics) or auto; list:\n"
           "                        what this build and machine can do\n"
           "      --help, --version\n\n"
           "Exit status: 0 ok, 1 --identify found no candidate that reproduces the\n"
           "engine's output, 2 usage, 3 input unreadable, malformed or of the wrong\n"
           "shape, 4 output not written, 5 internal error.\n");
}

/* --list-profiles: every row of the profile table (as JSON with --json). */
static int list_profiles(bool json)
{
    json_t *arr = json ? json_array() : NULL;
    const fp4s_profile_info *p;
    for (size_t i = 0; (p = fp4s_profile_at(i)); i++) {
        char f[64] = "";
        size_t k = 0;
        for (int fm = FP4S_MXFP4; fm <= FP4S_FP8; fm++)
            if (p->formats & (1u << fm))
                k += (size_t)snprintf(f + k, sizeof f - k, "%s%s", k ? "," : "", fp4s_format_name((fp4s_format)fm));
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "profile", json_string(p->name));
            json_object_set_new(o, "formats", json_string(f));
            json_object_set_new(o, "engine", json_string(p->engine));
            json_object_set_new(o, "version", json_string(p->version));
            json_object_set_new(o, "device", json_string(p->device));
            json_object_set_new(o, "source", json_string(p->source));
            json_object_set_new(o, "alias_of", p->alias_of ? json_string(p->alias_of) : json_null());
            json_object_set_new(o, "reproduces", json_string(p->reproduces));
            json_array_append_new(arr, o);
            continue;
        }
        printf("%s%s (%s)\n", i ? "\n" : "", p->name, f);
        if (p->alias_of) printf("  alias of   %s\n", p->alias_of);
        cli_print_wrapped("  engine", 13, p->engine);
        cli_print_wrapped("  version", 13, *p->version ? p->version : "-");
        cli_print_wrapped("  device", 13, p->device);
        cli_print_wrapped("  source", 13, *p->source ? p->source : "-");
        cli_print_wrapped("  reproduces", 13, p->reproduces);
    }
    return json ? cli_json_print(arr) : 0;
}

/* --identify: the quantizer options a search takes (-f, --input-scale) and no output */
static int identify(const cli_quant *q, const job *j, const char *codes, const char *scales, const char *diff,
                    long long show)
{
    if (!codes || !scales) cli_usage("--identify C and --identify-scales S go together");
    if (j->out_h5 || j->codes || j->scales || j->dequant || j->row_scales || diff || j->pad)
        cli_usage("--identify writes nothing: -o, --codes, --scales, --dequant, --row-scales, --diff and --pad "
                  "go without it");
    cli_quant none;
    cli_quant_init(&none);
    none.format = q->format;
    none.input_scale = q->input_scale;
    if (memcmp(&none, q, sizeof none))
        cli_usage("--identify searches every profile and option itself: of the quantizer options it takes -f and "
                  "--input-scale only");
    cli_input(j->input);
    cli_input(codes);
    cli_input(scales);
    return identify_run(j->input, codes, scales, q, j->json, (size_t)show);
}

int main(int argc, char **argv)
{
    cli_init("fp4-quant");
    cli_quant q;
    cli_quant_init(&q);
    const char *diff_profile = NULL, *id_codes = NULL, *id_scales = NULL;
    bool list = false, show_given = false;
    long long show = 8;
    job j;
    memset(&j, 0, sizeof j);

    cli_common common;
    cli_common_init(&common, usage, true);
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:o:", longopts)) != -1) {
        switch (c) {
        case 'o': j.out_h5 = optarg; break;
        case OPT_PAD: j.pad = true; break;
        case OPT_CODES: j.codes = optarg; break;
        case OPT_SCALES: j.scales = optarg; break;
        case OPT_DEQUANT: j.dequant = optarg; break;
        case OPT_ROW_SCALES: j.row_scales = optarg; break;
        case OPT_DIFF: diff_profile = optarg; break;
        case OPT_LIST: list = true; break;
        case OPT_REF: fp4s_kernels_force_ref(true); break;
        case OPT_CHUNK: j.chunk_rows = cli_parse_int("--chunk-rows", optarg, 1, 1LL << 40); break;
        case OPT_GZIP: j.gzip = (int)cli_parse_int("--gzip", optarg, 0, 9); break;
        case OPT_SHOW:
            show = cli_parse_int("--show", optarg, 0, 10000);
            show_given = true;
            break;
        case OPT_IDENTIFY: id_codes = optarg; break;
        case OPT_IDENTIFY_SCALES: id_scales = optarg; break;
        default:
            if (!cli_common_option(c, optarg, &common) && !cli_quant_option(c, optarg, &q))
                cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    j.json = common.json;
    if (list) return list_profiles(j.json) ? FP4S_EXIT_OUTPUT : 0;
    if (optind >= argc) cli_usage("missing INPUT");
    if (optind + 1 < argc) cli_usage("one INPUT expected, got %d ('%s' ...)", argc - optind, argv[optind + 1]);
    j.input = argv[optind];
    if (id_codes || id_scales) return identify(&q, &j, id_codes, id_scales, diff_profile, show_given ? show : 5);

    cli_quant_spec(&q, CLI_FORMATS_ALL, "quantization is", &j.r1.spec);
    j.diff = diff_profile != NULL;
    if (j.diff) cli_profile_spec(j.r1.spec.format, diff_profile, "--diff", &j.r2.spec);
    /* --device: each quantizer on the GPU where the kernels implement it */
    j.r1.cuda = cli_device_for(common.device_arg, CLI_GPU_QUANTIZE, &j.r1.spec) == FP4S_DEVICE_CUDA;
    if (j.diff) j.r2.cuda = cli_device_for(common.device_arg, CLI_GPU_QUANTIZE, &j.r2.spec) == FP4S_DEVICE_CUDA;
    j.da.show = (size_t)show;

    /* every output checked against the input and each other before any work */
    if (j.row_scales && !row_scaled(&j.r1.spec))
        cli_usage("--row-scales: the spec has one tensor scale, not one per row (take --scope row or a row-scaled "
                  "profile such as te-row)");
    const char *paths[5] = {j.out_h5, j.codes, j.scales, j.dequant, j.row_scales};
    cli_input(j.input);
    for (int i = 0; i < 5; i++)
        if (paths[i]) cli_output(paths[i]);

    job_open(&j);      /* the input, its shape, the chunks; pass 1: the tensor amax */
    outputs_open(&j);  /* unwritable paths fail before the work */
    job_quantize(&j);  /* pass 2 */
    outputs_finish(&j);
    int rc = cli_commit(); /* every output appears now, or none */
    if (rc) {
        job_free(&j);
        return rc;
    }
    bool to_stdout = false;
    for (int i = 0; i < 5; i++)
        if (paths[i] && strcmp(paths[i], "-") == 0) to_stdout = true;
    rc = to_stdout ? 0 : j.json ? report_json(&j) : report_text(&j);
    job_free(&j);
    return rc;
}
