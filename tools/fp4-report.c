/* fp4-report: the whole analysis of one run as a report a person reads, an
 * offline HTML page REPORT_DIR/index.html with its figures (PNG, gnuplot
 * script and data), every table as CSV and drill-down pages for the worst
 * sites (man/fp4-report.1). Everything is computed through libfp4scope; the
 * parts are in report/. */
#include "par.h"
#include "report/report.h"

#include <getopt.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_REMEDIES "none,rac:0.125,rac:0.25,rac:0.25:bf16,mbs:128,of:0.5,keep:1,mbs:128+of:0.5,bf16-rollout"

static void usage_text(void)
{
    printf(
        "Usage: fp4-report [OPTION]... CAPTURE.h5... [-o REPORT_DIR]\n"
        "       fp4-report [OPTION]... --demo [-o REPORT_DIR]\n"
        "The whole analysis of a run as one offline HTML report, REPORT_DIR/index.html:\n"
        "profile disagreement per site, the error decomposition per site and step, the\n"
        "top channels and their coverage, rollout vs trainer, the remedies and their\n"
        "cost, the log-prob mismatch over steps with its onset, and drill-down pages\n"
        "site -> channel -> block for the worst sites. Every table is also a CSV file\n"
        "and every figure has its gnuplot script and data beside it. Prints the path of\n"
        "index.html.\n"
        "\n"
        "  -o, --output DIR      the report directory (default: report)\n"
        "      --force           replace an earlier report in DIR\n"
        "      --demo            report on a synthetic capture made on the fly (the\n"
        "                        generator of datasets/synth-moe.h5)\n"
        "      --trace T         a log-prob trace or per-step scalar log for the mismatch\n"
        "                        section (repeatable; as fp4-mismatch reads them)\n"
        "  -r, --remedy LIST     remedies compared (fp4-remedy's grammar); default:\n"
        "                        " DEFAULT_REMEDIES "\n"
        "\n"
        "The reference quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        "      --profiles LIST   profiles compared with the reference (default: every\n"
        "                        other profile of the format)\n"
        "      --sites GLOB      capture sites (fnmatch; default all)\n"
        "      --steps LIST      capture steps, e.g. 0,5,10-20 (default all)\n"
        "      --metric M        mismatch metric per step (default mean_abs; any name\n"
        "                        fp4-mismatch --metric takes)\n"
        "      --accel NAME      accelerator of the remedies' time model (default b200)\n"
        "      --trainer T       what the rollout is compared with for the shares and the\n"
        "                        advice: bf16 (default), wfq (asymmetric QAT) or w4a4\n"
        "      --trainer-profile P  the profile of the trainer's quantizer (wfq, w4a4):\n"
        "                        its agreement with the rollout's is the summary's\n"
        "      --target REL      the relative output error a site's fix must reach\n"
        "                        (default: half of the site's naive W4A4 error)\n"
        "      --top N           channels shown per table (default 10)\n"
        "      --drill N         worst sites with drill-down pages (default 3; 0 = none)\n"
        "      --title TEXT      the report's title\n"
        CLI_HELP_STRICT
        "      --quiet           no progress on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        "  trace options (--is-cap, --delim, --col-*, --allow-positive, --skip-empty,\n"
        "  --dedupe, --baseline-steps, --margin, --sigma, --consecutive): as in\n"
        "                        fp4-mismatch, for the captures' log-probs and --trace\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 2 usage (also: REPORT_DIR is not a report, holds an input, or\n"
        "exists without --force), 3 input missing or malformed, 4 report not written,\n"
        "5 internal error. Nothing is written unless the whole report is.\n");
}

enum {
    OPT_DEMO = 256, OPT_TRACE, OPT_PROFILES, OPT_METRIC, OPT_ACCEL, OPT_TOP,
    OPT_DRILL, OPT_TITLE, OPT_TRAINER, OPT_TARGET, OPT_TRAINER_PROFILE
};

static char *join_cmdline(int argc, char **argv)
{
    text t = {0};
    tx_add(&t, "fp4-report");
    for (int i = 1; i < argc; i++) {
        if (strpbrk(argv[i], " \t'\"$*?\\") || !*argv[i]) {
            tx_add(&t, " '");
            for (const char *c = argv[i]; *c; c++) tx_add(&t, *c == '\'' ? "'\\''" : "%c", *c);
            tx_add(&t, "'");
        } else {
            tx_add(&t, " %s", argv[i]);
        }
    }
    return t.p;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The manifest: what made the report (also the mark that DIR is one, for --force). */
static void write_manifest(report *r, outdir *od)
{
    const report_opts *o = r->o;
    json_t *j = json_object();
    json_object_set_new(j, "tool", json_string("fp4-report"));
    json_object_set_new(j, "version", json_string(fp4s_version()));
    json_object_set_new(j, "command", json_string(o->cmdline));
    json_t *in = json_array();
    for (size_t c = 0; c < o->ncaptures; c++) json_array_append_new(in, json_string(o->demo ? "--demo" : o->captures[c]));
    json_object_set_new(j, "captures", in);
    json_t *tr = json_array();
    for (size_t t = 0; t < o->ntraces; t++) json_array_append_new(tr, json_string(o->traces[t]));
    json_object_set_new(j, "traces", tr);
    char desc[1024];
    fp4s_spec_describe(&o->spec, desc, sizeof desc);
    json_object_set_new(j, "quantizer", json_string(desc));
    fp4s_spec_describe(&o->wspec, desc, sizeof desc);
    json_object_set_new(j, "weight_quantizer", json_string(desc));
    json_object_set_new(j, "synthetic", json_boolean(r->synthetic));
    json_object_set_new(j, "sites", json_integer((json_int_t)r->nsites));
    json_object_set_new(j, "units", json_integer((json_int_t)r->nunits));
    json_object_set_new(j, "figures_not_drawn", json_integer(figs_missing()));
    write_summary_json(r, j);
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!s) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
    size_t n = strlen(s);
    char *t = xmalloc(n + 2);
    memcpy(t, s, n);
    t[n] = '\n';
    free(s);
    od_write(od, OD_MARKER, t, n + 1);
    free(t);
}

/* Defaults from what the first capture records (fp4scope-capture(5) "Root
 * attributes"): the rollout's format and profile unless -f or -p is given,
 * the trainer unless --trainer, its profile unless --trainer-profile. A
 * capture that cannot be opened is left to the inputs' checks. */
static void capture_defaults(const char *cap, cli_quant *qo, report_opts *o)
{
    static char fmt[32], prof[64], tr[32], tprof[64];
    const char *names[] = {"rollout_format", "rollout_profile", "trainer", "trainer_profile"};
    char *bufs[] = {fmt, prof, tr, tprof};
    size_t lens[] = {sizeof fmt, sizeof prof, sizeof tr, sizeof tprof};
    int got[4];
    for (int i = 0; i < 4; i++) {
        got[i] = fp4s_capture_root_str(cap, names[i], bufs[i], lens[i]);
        if (got[i] == FP4S_EOPEN) {
            fp4s_error_clear();
            return;
        }
        if (got[i] < 0) exit(cli_report(got[i]));
    }
    if (got[0]) snprintf(o->cap_quant, sizeof o->cap_quant, "%s%s%s", fmt, got[1] ? " " : "", got[1] ? prof : "");
    if (got[2]) snprintf(o->cap_trainer, sizeof o->cap_trainer, "%s", tr);
    if (got[0] && !qo->format && !qo->profile) {
        qo->format = fmt;
        qo->profile = got[1] ? prof : NULL;
        o->quant_src = got[1] ? "the capture's rollout_format and rollout_profile"
                              : "the capture's rollout_format (its default profile)";
        o->quant_recorded = true;
    }
    if (got[2] && strcmp(o->trainer_src, "--trainer")) {
        if (fp4s_trainer_parse(tr, &o->trainer))
            cli_die(FP4S_EXIT_INPUT, "%s: root attribute trainer: %s", cap, fp4s_last_error());
        o->trainer_src = "the capture's trainer attribute";
        o->trainer_recorded = true;
    }
    if (got[3] && !o->trainer_profile) {
        o->trainer_profile = tprof;
        o->trainer_profile_recorded = true;
    }
}

/* The command line into o (and *out, *force; the traces into o->traces),
 * checked; the quantizer specs made. */
static void parse_args(int argc, char **argv, report_opts *o, const char **out, bool *force)
{
    *out = "report";
    *force = false;
    cli_quant qo;
    cli_quant_init(&qo);
    /* the progress line shows fp4-report's own steps (the library's calls are parts of them) */
    fp4s_set_progress(NULL, NULL);
    cli_common common;
    cli_common_init(&common, usage_text, false);
    o->metric = "mean_abs";
    o->accel = "b200";
    o->top = 10;
    o->drill = 3;
    o->trainer = FP4S_TRAINER_BF16;
    o->trainer_src = "the default (--trainer bf16: a trainer in BF16, what most RL runs have)";
    o->target = NAN;
    fp4s_mm_opts_defaults(&o->mo);
    fp4s_trace_opts_defaults(&o->to);
    fp4s_mm_onset_opts_defaults(&o->oo);
    const char **traces = xcalloc((size_t)argc + 1, sizeof *traces);
    size_t ntr = 0;
    static const struct option lo[] = {
        {"output", required_argument, NULL, 'o'},
        {"demo", no_argument, NULL, OPT_DEMO},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"remedy", required_argument, NULL, 'r'},
        /* before the trace options: --format is the quantizer's format, as in every
         * analysis tool (a trace's format is found from its name or content) */
        CLI_QUANT_LONGOPTS
        {"profiles", required_argument, NULL, OPT_PROFILES},
        CLI_SELECT_LONGOPTS
        {"metric", required_argument, NULL, OPT_METRIC},
        {"accel", required_argument, NULL, OPT_ACCEL},
        {"top", required_argument, NULL, OPT_TOP},
        {"drill", required_argument, NULL, OPT_DRILL},
        {"title", required_argument, NULL, OPT_TITLE},
        CLI_STRICT_LONGOPTS
        {"trainer", required_argument, NULL, OPT_TRAINER},
        {"target", required_argument, NULL, OPT_TARGET},
        {"trainer-profile", required_argument, NULL, OPT_TRAINER_PROFILE},
        CLI_THREADS_LONGOPTS
        CLI_COMMON_LONGOPTS
        CLI_TRACE_LONGOPTS
        CLI_OUTPUT_LONGOPTS
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "o:r:f:p:", lo)) != -1) {
        switch (c) {
        case 'o': *out = optarg; break;
        case OPT_DEMO: o->demo = true; break;
        case OPT_TRACE: traces[ntr++] = optarg; break;
        case 'r': o->remedy = optarg; break;
        case OPT_PROFILES: o->profiles = optarg; break;
        case CLI_OPT_SITES: o->sites = optarg; break;
        case CLI_OPT_STEPS: o->steps_s = optarg; break;
        case OPT_METRIC: o->metric = optarg; break;
        case OPT_ACCEL: o->accel = optarg; break;
        case OPT_TOP: o->top = (size_t)cli_parse_int("--top", optarg, 1, 100000); break;
        case OPT_DRILL: o->drill = (size_t)cli_parse_int("--drill", optarg, 0, 1000); break;
        case OPT_TITLE: o->title = optarg; break;
        case CLI_OPT_STRICT: o->strict = true; break;
        case OPT_TRAINER:
            if (fp4s_trainer_parse(optarg, &o->trainer)) cli_usage("--trainer: %s", fp4s_last_error());
            o->trainer_src = "--trainer";
            break;
        case OPT_TARGET: o->target = cli_parse_double("--target", optarg, 0, 10); break;
        case OPT_TRAINER_PROFILE: o->trainer_profile = optarg; break;
        case CLI_OPT_FORCE: *force = true; break;
        case CLI_OPT_QUIET:
            cli_quiet();
            rep_quiet = true;
            break;
        default:
            if (!cli_common_option(c, optarg, &common) && !cli_quant_option(c, optarg, &qo) &&
                !cli_trace_option(c, optarg, &o->mo, &o->to, &o->oo))
                cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    size_t ncap = (size_t)(argc - optind);
    if (o->demo && ncap) cli_usage("--demo makes its own capture: give no CAPTURE with it");
    if (!o->demo && !ncap) cli_usage("no input: give one or more CAPTURE.h5, or --demo");
    o->quant_src = qo.format || qo.profile ? "-f/-p" : "the default (MXFP4, its default profile)";
    if (!o->demo) capture_defaults(argv[optind], &qo, o);
    cli_quant_spec(&qo, CLI_FORMATS_FP4, "the report is", &o->spec);
    fp4s_remedy_weight_spec(&o->spec, -1, &o->wspec);
    if (o->trainer_profile && o->trainer_profile_recorded) { /* the capture's, checked against its format */
        fp4s_spec tp;
        if (o->trainer == FP4S_TRAINER_BF16) o->trainer_profile = NULL; /* a BF16 trainer quantizes nothing */
        else if (fp4s_spec_profile(&tp, o->spec.format, o->trainer_profile))
            cli_die(FP4S_EXIT_INPUT, "%s: root attribute trainer_profile: %s", argv[optind], fp4s_last_error());
    } else if (o->trainer_profile) { /* a profile of the report's format, checked before any work */
        fp4s_spec tp;
        if (fp4s_spec_profile(&tp, o->spec.format, o->trainer_profile))
            cli_usage("--trainer-profile: %s", fp4s_last_error());
        if (o->trainer == FP4S_TRAINER_BF16)
            cli_usage("--trainer-profile: the trainer is bf16 (--trainer), which quantizes nothing");
    }
    if (fp4s_spec_profile(&o->fp8spec, FP4S_FP8, fp4s_default_profile(FP4S_FP8))) cli_fail(FP4S_EINTERNAL);
    if (o->steps_s) o->steps = cli_parse_int_list("--steps", o->steps_s, &o->nsteps);
    o->cmdline = join_cmdline(argc, argv);

    o->traces = traces;
    o->ntraces = ntr;
}

/* The remedies compared (-r, else the default list), with naive W4A4
 * ("none") added first when the list lacks it: the shares need it. */
static void make_remedies(report *r, const report_opts *o)
{
    int rc;
    const char *list = o->remedy ? o->remedy : DEFAULT_REMEDIES;
    if ((rc = fp4s_remedy_list_parse(list, &r->rem, &r->nrem))) cli_usage("--remedy: %s", fp4s_last_error());
    if (!o->remedy) {
        /* the default list keeps what the quantizer defines (mbs max needs power-of-two scales) */
        size_t k = 0;
        for (size_t q = 0; q < r->nrem; q++)
            if (fp4s_remedy_check(&r->rem[q], &o->spec, &o->wspec, 256) != FP4S_ENOTSUP) r->rem[k++] = r->rem[q];
        r->nrem = k;
    }
    { /* the shares need naive W4A4 ("none") on every site */
        bool has_none = false;
        for (size_t q = 0; q < r->nrem; q++) has_none |= fp4s_remedy_is_plain(&r->rem[q]);
        if (!has_none) {
            r->rem = xrealloc(r->rem, (r->nrem + 1) * sizeof *r->rem);
            memmove(r->rem + 1, r->rem, r->nrem * sizeof *r->rem);
            fp4s_remedy_parse("none", &r->rem[0]);
            r->nrem++;
            r->none_added = true;
        }
    }
}

int main(int argc, char **argv)
{
    cli_init("fp4-report");
    par_init();
    const char *out;
    bool force;
    report_opts o;
    memset(&o, 0, sizeof o);
    parse_args(argc, argv, &o, &out, &force);
    const char **traces = (const char **)o.traces;
    size_t ntr = o.ntraces, ncap = (size_t)(argc - optind);

    report r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    int rc = fp4s_accel_get(o.accel, &r.acc);
    if (rc) cli_usage("--accel: %s", fp4s_last_error());
    make_remedies(&r, &o);

    /* inputs, then the report directory: every refusal comes before any work */
    char **caps = xcalloc(ncap + 1, sizeof *caps);
    const char **names = xcalloc(ncap + 1, sizeof *names);
    char demo_dir[PATH_MAX] = "";
    if (o.demo) {
        const char *tmp = getenv("TMPDIR");
        snprintf(demo_dir, sizeof demo_dir, "%s/fp4-report.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(demo_dir)) cli_die(FP4S_EXIT_OUTPUT, "%s: cannot create a temporary directory", demo_dir);
        cli_scratch_add(demo_dir);
        char p[PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/demo.h5", demo_dir);
        cli_scratch_add(p);
        caps[0] = xstrdup(p);
        names[0] = "demo (synthetic)";
        ncap = 1;
    } else {
        for (size_t i = 0; i < ncap; i++) {
            caps[i] = xstrdup(argv[optind + (int)i]);
            names[i] = base_name(caps[i]);
            cli_input(caps[i]);
            od_input(caps[i]);
        }
    }
    for (size_t t = 0; t < ntr; t++) {
        cli_input(traces[t]);
        od_input(traces[t]);
    }
    o.captures = (const char *const *)caps;
    o.ncaptures = ncap;
    o.names = names;
    o.traces = traces;
    o.ntraces = ntr;
    /* over MPI ranks, rank 0 writes the report; the others compute their units (analyze.c) */
    outdir *od = par_rank() == 0 ? od_open(out, force) : NULL;
    r.od = od;
    if (o.demo) {
        fp4s_synth_opts so;
        fp4s_synth_opts_defaults(&so);
        so.seed = 42;
        so.steps = 12;
        so.act_every = 3;
        so.onset_step = 8;
        rep_progress("--demo: a synthetic capture (fp4-capture synth --seed 42 --steps 12 --act-every 3 --onset 8)");
        if ((rc = fp4s_capture_synth(caps[0], &so))) cli_fail(rc);
    }
    for (size_t i = 0; i < ncap; i++) {
        fp4s_capture_info info;
        if ((rc = fp4s_capture_info_read(caps[i], &info))) cli_fail(rc);
        r.synthetic |= info.synthetic;
    }

    report_analyze(&r);
    write_index(&r);
    write_drill(&r);
    figs_draw(od);
    write_manifest(&r, od);
    /* standard output first: a report whose path cannot be printed (a full
     * disk, a closed pipe) is not put in place either, as every tool's
     * outputs are committed only once standard output is written */
    printf("%s/index.html\n", od_target(od));
    int st = cli_stdout_flush();
    if (st == 0) st = od_commit(od);
    report_free(&r);
    for (size_t i = 0; i < ncap; i++) free(caps[i]);
    free(caps);
    free(names);
    free(traces);
    free(o.steps);
    free((char *)o.cmdline);
    return st;
}
