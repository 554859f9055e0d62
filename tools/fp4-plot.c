/* fp4-plot: gnuplot figures of mismatch traces and of fp4-decompose /
 * fp4-channels reports. Writes OUT-stem.gp and its data next to the image so
 * the figure can be restyled, then runs gnuplot (man/fp4-plot.1). The command
 * line is parsed here; the plot kinds and the gnuplot runner are in plot/. */
#include "plot/plot.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_METRIC = 256, OPT_Y2, OPT_LOG, OPT_LINEAR, OPT_NAME, OPT_TERM, OPT_TITLE, OPT_SIZE, OPT_OUTPUT
}; /* the trace and onset options are CLI_OPT_* (cli.h) */

static const struct option longopts[] = {
    {"metric", required_argument, NULL, OPT_METRIC},
    {"y2", required_argument, NULL, OPT_Y2},
    {"log", no_argument, NULL, OPT_LOG},
    {"linear", no_argument, NULL, OPT_LINEAR},
    {"name", required_argument, NULL, OPT_NAME},
    {"term", required_argument, NULL, OPT_TERM},
    {"title", required_argument, NULL, OPT_TITLE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"output", required_argument, NULL, OPT_OUTPUT},
    CLI_TRACE_LONGOPTS
    CLI_OUTPUT_LONGOPTS
    CLI_COMMON_LONGOPTS
    {NULL, 0, NULL, 0},
};

/* The long name of an option id (for messages). */
static const char *option_name(int id)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == id) return o->name;
    return "?";
}

static void usage(void)
{
    printf("Usage: fp4-plot mismatch TRACE... [--metric M] [--log|--linear] -o OUT.png|.svg|.pdf\n"
           "       fp4-plot components REPORT... -o OUT (fp4-decompose --json: energy shares and energies\n"
           "                                         per site; several reports side by side)\n"
           "       fp4-plot channels REPORT -o OUT     (fp4-channels --json: sorted scores, top-k, coverage)\n"
           "       fp4-plot hist REPORT -o OUT         (fp4-decompose --json: delta and error histograms)\n"
           "Draws with gnuplot and writes the script OUT.gp and its data (OUT.dat or\n"
           "OUT.<series>.dat, OUT without its extension) next to the image; run\n"
           "'gnuplot OUT.gp' in that directory to redraw after editing.\n\n"
           "  -o, --output OUT    image path; the extension picks the terminal (.png pngcairo,\n"
           "                      .svg svg, .pdf pdfcairo)\n"
           "  --term T            pngcairo, svg, pdfcairo or dumb (text preview; -o - prints it)\n"
           "  --force             replace an existing HDF5 file in place of an output\n"
           "  --quiet             no progress line on stderr\n"
           "  --title TEXT        figure title\n"
           "  --size WxH          size in pixels (png, svg) or inches x 100 (pdf); default 1200x700\n"
           "mismatch:\n"
           "  --metric M          metric per step (default: as fp4-mismatch, the first of its\n"
           "                      default order with values in every run; fp4-mismatch(1))\n"
           "  --y2 NAME           also NAME per step on a second (right) axis: a per-step\n"
           "                      scalar of the log (reward) or another metric\n"
           "  --log | --linear    y scale (default: log when all values are > 0 and span >= 10x)\n"
           "  --name NAME         run name of the next TRACE\n"
           "  --is-cap C, --allow-positive, --skip-empty, --format F, --delim C, --col-* NAME,\n"
           "  --baseline-steps N, --margin R, --sigma K, --consecutive N: as in fp4-mismatch\n\n"
           "Without gnuplot (not installed, -Dgnuplot=disabled, or FP4S_GNUPLOT naming a\n"
           "missing program) the script and data are still written, a note says so, exit 0.\n"
           "Exit status: 0 ok, 2 usage, 3 bad input, 4 output not written (or gnuplot failed),\n"
           "5 internal error.\n");
}

int main(int argc, char **argv)
{
    cli_init("fp4-plot");
    if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
        usage();
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        cli_version();
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') cli_usage("expected a subcommand: mismatch, components, channels or hist");
    const char *sub = argv[1];
    if (strcmp(sub, "mismatch") && strcmp(sub, "components") && strcmp(sub, "channels") && strcmp(sub, "hist"))
        cli_usage("unknown subcommand '%s' (mismatch, components, channels, hist)", sub);
    plot p;
    memset(&p, 0, sizeof p);
    p.width = 1200;
    p.height = 700;
    const char *out = NULL, *term = NULL, *metric = NULL, *y2 = NULL;
    int scale = 0;
    fp4s_mm_opts mo;
    fp4s_mm_opts_defaults(&mo);
    fp4s_trace_opts to;
    fp4s_trace_opts_defaults(&to);
    fp4s_mm_onset_opts oo;
    fp4s_mm_onset_opts_defaults(&oo);
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    size_t nnames = 0;
    if (!names) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    int ismm = strcmp(sub, "mismatch") == 0;
    optind = 2;
    cli_common common;
    cli_common_init(&common, usage, false);
    int ch;
    while ((ch = cli_getopt(argc, argv, "o:", longopts)) != -1) {
        if (!ismm && ch != 'o' && ch != OPT_OUTPUT && ch != OPT_TERM && ch != OPT_TITLE && ch != OPT_SIZE &&
            ch != CLI_OPT_FORCE && ch != CLI_OPT_QUIET && ch != CLI_OPT_HELP && ch != CLI_OPT_VERSION)
            cli_usage("%s: option '--%s' applies to 'fp4-plot mismatch' only", sub, option_name(ch));
        switch (ch) {
        case 'o':
        case OPT_OUTPUT: out = optarg; break;
        case OPT_TERM: term = optarg; break;
        case OPT_TITLE: p.title = optarg; break;
        case OPT_SIZE: {
            int w, h;
            char extra;
            if (sscanf(optarg, "%dx%d%c", &w, &h, &extra) != 2 || w < 100 || h < 100 || w > 10000 || h > 10000)
                cli_usage("--size: expected WxH between 100x100 and 10000x10000, got '%s'", optarg);
            p.width = w;
            p.height = h;
            break;
        }
        case OPT_METRIC: metric = optarg; break;
        case OPT_Y2: y2 = optarg; break;
        case OPT_LOG: scale = 1; break;
        case OPT_LINEAR: scale = -1; break;
        case OPT_NAME: names[nnames++] = optarg; break;
        default:
            if (!cli_common_option(ch, optarg, &common) && !cli_trace_option(ch, optarg, &mo, &to, &oo))
                cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    int nin = argc - optind;
    for (int i = optind; i < argc; i++) cli_input(argv[i]);
    plot_setup(&p, out, term);
    int status;
    if (ismm) {
        status = cmd_mismatch(&p, nin, argv + optind, metric, y2, scale, names, nnames, &mo, &to, &oo);
    } else if (strcmp(sub, "components") == 0) {
        status = cmd_components(&p, nin, argv + optind);
    } else {
        if (nin != 1) cli_usage("%s: expected one REPORT (the JSON of fp4-%s --json), got %d", sub,
                                strcmp(sub, "channels") == 0 ? "channels" : "decompose", nin);
        if (strcmp(sub, "channels") == 0) status = cmd_channels(&p, argv[optind]);
        else status = cmd_hist(&p, argv[optind]);
    }
    tx_free(&p.script);
    for (size_t i = 0; i < p.nfiles; i++) {
        free(p.files[i]);
        free(p.tmps[i]);
    }
    free(p.files);
    free(p.tmps);
    free(names);
    return status;
}

