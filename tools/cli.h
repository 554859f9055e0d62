/* Helpers shared by the fp4-* tools: messages, exit codes, strict number
 * parsing, --version, JSON output. Not part of the library API.
 *
 * Messages: "fp4-xxx: <detail>" on stderr. Exit statuses are the FP4S_EXIT_*
 * values of <fp4scope/common.h>: 0 ok, 1 a requested check failed, 2 usage,
 * 3 input unreadable or malformed, 4 output not written, 5 internal. */
#ifndef FP4S_TOOLS_CLI_H
#define FP4S_TOOLS_CLI_H

#include <fp4scope/capture.h>
#include <fp4scope/common.h>
#include <fp4scope/spec.h>
#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/units.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

/* Call first in main: the program name used in messages, and what every tool
 * shares at run time. SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE remove the
 * run's temporaries (its outputs not yet committed and its scratch files),
 * then end the process by the same signal. At exit, standard output is
 * flushed and checked (a failed write prints
 * "prog: stdout: REASON" and the exit status becomes 4, unless a failure was
 * reported already), and outputs not committed yet are committed or removed
 * (see cli_commit). The run's outputs form one output group
 * (fp4scope/outfile.h), opened here. */
void cli_init(const char *prog);
const char *cli_prog(void);

/* ---- memory: out of memory is exit 5 with a message -------------------------------- */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);   /* NULL gives "" */

/* ---- outputs ---------------------------------------------------------------------------
 * Every tool declares what it reads and what it will write before the work;
 * each declaration is checked at once (an output that is an input or another
 * output: exit 2; an existing HDF5 file without --force: exit 2; a file a live
 * writer holds: exit 4; nothing is written). Outputs begun by the writers join
 * the group; cli_commit() renames them all into place, all or none. A run
 * that ends with status 0 commits what is left (with glibc's on_exit; call
 * cli_commit to commit before printing a report), any other status removes it. */
enum { CLI_OPT_FORCE = 0x4100, CLI_OPT_QUIET };
/* --force, and --quiet (see the progress line below) */
#define CLI_OUTPUT_LONGOPTS {"force", no_argument, NULL, CLI_OPT_FORCE}, \
    {"quiet", no_argument, NULL, CLI_OPT_QUIET},
void cli_force(void);                   /* --force: existing HDF5 outputs may be replaced */
void cli_input(const char *spec);       /* a tensor spec, trace or report the run reads */
void cli_output(const char *path);      /* a file the run will replace */
void cli_output_append(const char *path); /* a file the run appends to in place */
/* Commit the group: 0, or the exit status after printing the reason. */
int cli_commit(void);

/* Scratch files and directories of the run (removed at exit and on a signal,
 * in reverse order). cli_scratch_remove removes one now. */
void cli_scratch_add(const char *path);
void cli_scratch_remove(const char *path);

/* ---- progress: one line on stderr while long work runs ------------------------------
 * "prog: WHAT 45% (12 s, about 15 s left)", drawn when standard error is a
 * terminal, once the work has run half a second, at most five times a second,
 * and erased before any message, report or exit; FP4S_PROGRESS=1 prints it as
 * a plain line every 2 s where stderr is not a terminal (a log), =0 never;
 * --quiet (cli_quiet) turns it off. The library's long calls report through
 * it (fp4s_set_progress, done by cli_init). cli_progress_begin starts a new
 * task (its label, the clock); cli_progress reports done of total. */
void cli_quiet(void);
void cli_progress_begin(const char *what);
void cli_progress(uint64_t done, uint64_t total);
void cli_progress_end(void);

/* Flush standard output: 0, or FP4S_EXIT_OUTPUT after "prog: stdout: REASON"
 * (printed once). */
int cli_stdout_flush(void);

/* Text from files (site and dataset names, producers, paths) printed to a
 * terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8
 * shown as \xNN, so that no name can move the cursor, clear the screen or
 * retitle the window. cli_safe returns one of 8 rotating thread-local
 * buffers (names up to about 270 bytes; longer ones are cut), for printf
 * arguments. Every message below goes through it. */
void cli_fputs_safe(const char *s, FILE *f);
const char *cli_safe(const char *s);

/* Print "prog: <fmt>" to stderr and exit with status. */
_Noreturn void cli_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "prog: <fmt>\nTry 'prog --help'." and exit 2. */
_Noreturn void cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report a library failure: "prog: <fp4s_last_error() or fp4s_strerror(code)>"
 * and exit with fp4s_exit_status(code). */
_Noreturn void cli_fail(int code);
/* Same, with "context: " before the detail. */
_Noreturn void cli_failf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the library detail (or strerror) with "prog: " and return the exit status. */
int cli_report(int code);

/* Strict parsers: the whole string must be a number in range, else a usage
 * error naming the option and the expected form. */
long long cli_parse_int(const char *opt, const char *arg, long long lo, long long hi);
double cli_parse_double(const char *opt, const char *arg, double lo, double hi);
/* Comma-separated list of integers, ranges "a-b" or "a:b:step" allowed
 * ("0,5,10-20"). Returns a malloc'ed sorted unique array and its length. */
long long *cli_parse_int_list(const char *opt, const char *arg, size_t *n);

/* getopt_long for every tool, with the same one message for a bad option:
 * "prog: unknown option '--x'" (or '-x'), "prog: option '--x' needs an
 * argument", then "Try 'prog --help'." and exit 2. shortopts without a
 * leading ':'. Returns the option's value, or -1 after the last option. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* item is one of the comma-separated words of list (a NULL list holds every item). */
bool cli_list_has(const char *list, const char *item);

/* Print, on stderr, each (step, site) the unit walker left out of l (its
 * sides could not be paired: fp4s_unit_select.strict false) with the reason,
 * and how many there were: "prog: left out: FILE: /steps/S/SITE: ... (--strict
 * fails instead)". Nothing when none was. */
struct fp4s_units;
void cli_units_skipped(const struct fp4s_units *l);

/* The index after "<key>." in a site name (cli_site_index("layers.3.mlp",
 * "layers") is 3; "experts" for an MoE expert), as the capture writer parses
 * its layer and expert attributes; -1 if none. cli_site_layer also takes
 * "layer.<n>". */
int64_t cli_site_index(const char *site, const char *key);
int64_t cli_site_layer(const char *site);

/* "--version" text: "prog (fp4scope) X.Y.Z\nfeatures: ..." (without cuda:
 * the tools with --device use cli_version_device). */
void cli_version(void);

/* ---- --device: every tool ------------------------------------------------------------
 * --device DEV (cpu, cuda, auto or list) is one of the common options
 * (CLI_COMMON_LONGOPTS, below): cli_common_option takes it through
 * cli_device_arg (list prints the capability report, cli_device_list, and
 * exits 0; a name other than the four is exit 2) into cli_common.device_arg;
 * a tool without a GPU path (cli_common_init with device false) refuses cuda
 * there and then (exit 2, "--device cuda: fp4-plot has no GPU path"), and
 * auto runs on the CPU silently. A tool with a GPU path resolves device_arg
 * for its work with cli_device_for (NULL: cpu): auto takes the GPU when it
 * can run that work, else the CPU, silently; cuda where it cannot run is
 * exit 2 with the reason ("--device cuda: no usable GPU (...)"). cli_device
 * is the decomposition's (for spec s). */
enum { CLI_OPT_DEVICE = 0x4110 }; /* clear of CLI_OPT_FORCE, CLI_OPT_QUIET, ... */
#define CLI_DEVICE_LONGOPTS {"device", required_argument, NULL, CLI_OPT_DEVICE},
typedef enum cli_gpu_work {
    CLI_GPU_NONE,      /* the tool has no GPU path */
    CLI_GPU_DECOMPOSE, /* the decomposition and per-channel statistics (fp4s_decomp_opts.device) */
    CLI_GPU_REMEDY,    /* the remedies' GEMMs and rac (fp4s_remedy_eval_opts.device) */
    CLI_GPU_QUANTIZE   /* the quantize kernels (fp4s_cuda_quantize_ex) */
} cli_gpu_work;
const char *cli_device_arg(const char *arg);
fp4s_device cli_device_for(const char *arg, cli_gpu_work w, const fp4s_spec *s);
fp4s_device cli_device(const char *arg, const fp4s_spec *s);
/* --device list: whether CUDA (and cuBLAS) is built in, the GPU found or why
 * none is usable, and which tools use it for what. */
void cli_device_list(void);
/* --version of a tool with --device: the features with cuda when it is
 * built in, and a line "gpu: ..." naming the GPU or why none is usable. */
void cli_version_device(void);

/* ---- the common option group --------------------------------------------------------
 * The options every tool spells alike, parsed in one place: --help, --version
 * and --device (CLI_COMMON_LONGOPTS, every tool), --json and --csv (CLI_REPORT_LONGOPTS; a tool
 * without CSV lists CLI_JSON_LONGOPTS), --threads N (CLI_THREADS_LONGOPTS: worker
 * threads, 1 to 4096), --chunk N (CLI_CHUNK_LONGOPTS: elements per read chunk) and
 * --gemm P (CLI_GEMM_LONGOPTS: fixed or blas, fp4s_set_gemm; FP4S_GEMM is checked by cli_init),
 * with --force and --quiet of CLI_OUTPUT_LONGOPTS. cli_common_option() applies one
 * (false for any other id): --help prints c->usage() and exits 0, --version prints
 * cli_version(), or cli_version_device() when c->device; --force and --quiet call
 * cli_force() and cli_quiet() (a tool that keeps --force itself handles
 * CLI_OPT_FORCE before it). cli_common_check(), after the last option: --json
 * with --csv is a usage error. */
enum {
    CLI_OPT_COMMON_FIRST = 0x4120, /* clear of CLI_OPT_DEVICE and the other groups */
    CLI_OPT_HELP = CLI_OPT_COMMON_FIRST,
    CLI_OPT_VERSION,
    CLI_OPT_JSON,
    CLI_OPT_CSV,
    CLI_OPT_THREADS,
    CLI_OPT_CHUNK,
    CLI_OPT_GEMM
};
#define CLI_COMMON_LONGOPTS {"help", no_argument, NULL, CLI_OPT_HELP}, \
    {"version", no_argument, NULL, CLI_OPT_VERSION}, CLI_DEVICE_LONGOPTS
#define CLI_JSON_LONGOPTS {"json", no_argument, NULL, CLI_OPT_JSON},
#define CLI_REPORT_LONGOPTS CLI_JSON_LONGOPTS {"csv", no_argument, NULL, CLI_OPT_CSV},
#define CLI_THREADS_LONGOPTS {"threads", required_argument, NULL, CLI_OPT_THREADS},
#define CLI_CHUNK_LONGOPTS {"chunk", required_argument, NULL, CLI_OPT_CHUNK},
/* --gemm fixed|blas: the CPU GEMM path (fp4s_set_gemm) of the tools with GEMMs */
#define CLI_GEMM_LONGOPTS {"gemm", required_argument, NULL, CLI_OPT_GEMM},
#define CLI_HELP_GEMM \
    "      --gemm P          CPU GEMM: fixed (default; the same bits on any CPU and\n" \
    "                        thread count) or blas (faster, machine-dependent bits)\n"
typedef struct cli_common {
    void (*usage)(void); /* --help */
    bool device;         /* the tool has a GPU path: --version names the GPU, --device is its to resolve */
    const char *device_arg; /* --device DEV as given (NULL: not given) */
    bool json, csv;      /* --json, --csv given */
    size_t chunk;        /* --chunk N; 0 when not given */
} cli_common;
void cli_common_init(cli_common *c, void (*usage)(void), bool device);
bool cli_common_option(int id, const char *arg, cli_common *c);
void cli_common_check(const cli_common *c);
/* The default of a tool's option switch: applies option c of the common,
 * quantizer and analysis groups (NULL: a group the tool does not take), else
 * the usage error "unknown option" (exit 2). */
struct cli_quant;
struct cli_analysis;
void cli_option_rest(int c, const char *arg, char *const *argv, cli_common *cm, struct cli_quant *q,
                     struct cli_analysis *an);

/* Dump JSON to stdout (indent 2, keys in insertion order, real numbers with 17
 * significant digits), then decref. Returns an exit status. */
int cli_json_print(json_t *j);
/* Write JSON j (as cli_json_print formats it, with a final newline) to path
 * atomically ("-": stdout); j is not consumed. The cli_write_text result. */
int cli_json_write(const char *path, const json_t *j);
/* The fields of a decomposition result (fp4s_decomp_fields) set in o (NULL: a
 * new object): counts as integers, the rest as cli_json_real. Returns o. */
json_t *cli_decomp_json(const fp4s_decomp_result *r, json_t *o);
/* JSON number for a double: NaN and Inf become null (JSON has neither). */
json_t *cli_json_real(double v);
/* The one place a CSV text cell is written (every --csv, the report's CSV
 * files, fp4-mismatch's): quoted (quotes doubled) when it holds a comma, a
 * quote, a line break or a space at either end; and a text a spreadsheet
 * would take for a formula (starting with =, +, -, @, a tab or a carriage
 * return; not a number such as -1.5, not a lone "-") quoted with a leading
 * apostrophe, "'=1+2", so that opening the file runs nothing. cli_csv_cell
 * returns it malloc'ed; cli_csv_fputs writes it; cli_csv_str writes it on
 * stdout (NULL prints nothing). */
char *cli_csv_cell(const char *s);
void cli_csv_fputs(const char *s, FILE *f);
void cli_csv_str(const char *s);

/* A static input scale: a number (decimal or hex float), or the single value
 * (the largest of several, as vLLM and SGLang take input_scale.max()) of a
 * tensor FILE:TENSOR (.safetensors of any shape and float dtype, rank 0
 * included; .npy and HDF5 through the source reader). Exit 2 for a malformed
 * or non-positive number, 3 for a file or tensor that cannot be read. */
float cli_input_scale(const char *arg);

/* ---- the quantizer option group ---------------------------------------------------
 * Every tool that quantizes takes the same options: -f FORMAT, -p PROFILE and
 * every override of a profile's rules (--scale-rule, --round, --zero-sign,
 * --packing, --nonfinite, --global-scale, --recipe, --2d/--1d, --fp8-gran,
 * --zero-block-code, and TransformerEngine's options --4over6-error,
 * --4over6-bound, --sr, --rht). CLI_QUANT_LONGOPTS expands to their struct option
 * entries ("f:p:" belongs in the short options), cli_quant_option() applies
 * one (false for any other id), cli_quant_usage() prints their help lines and
 * cli_quant_spec() makes the spec: an override of a rule the format does not
 * have, an unknown name or a format outside `formats` (a mask of 1 << fmt;
 * `what` says what is defined for them: "the decomposition is") is a usage
 * error. */
typedef struct cli_quant {
    const char *format, *profile; /* NULL: mxfp4, the format's default profile */
    int mx_rule, tie, keep_neg_zero, packing, nonfinite, global_scale, recipe, tile2d, fp8_gran,
        zero_block, four6_err, four6_bound; /* -1: not given */
    int sr, rht;                  /* -1: not given, 0: off, 1: on with sr_seed / rht_signs */
    uint32_t sr_seed;
    uint16_t rht_signs;
    int scope, tsrule, four6_math; /* -1: not given */
    const char *input_scale;      /* --input-scale VALUE|FILE:TENSOR (NULL: not given; "off": none) */
} cli_quant;
enum {
    CLI_OPT_QUANT_FIRST = 0x4200,
    CLI_OPT_SCALE_RULE = CLI_OPT_QUANT_FIRST,
    CLI_OPT_ROUND,
    CLI_OPT_ZERO_SIGN,
    CLI_OPT_PACKING,
    CLI_OPT_NONFINITE,
    CLI_OPT_GLOBAL_SCALE,
    CLI_OPT_RECIPE,
    CLI_OPT_2D,
    CLI_OPT_1D,
    CLI_OPT_FP8_GRAN,
    CLI_OPT_ZERO_BLOCK,
    CLI_OPT_4OVER6_ERR,
    CLI_OPT_4OVER6_BOUND,
    CLI_OPT_SR,
    CLI_OPT_RHT,
    CLI_OPT_SCOPE,
    CLI_OPT_TSRULE,
    CLI_OPT_INPUT_SCALE,
    CLI_OPT_4OVER6_MATH
};
#define CLI_QUANT_LONGOPTS \
    {"format", required_argument, NULL, 'f'}, \
    {"profile", required_argument, NULL, 'p'}, \
    {"scale-rule", required_argument, NULL, CLI_OPT_SCALE_RULE}, \
    {"round", required_argument, NULL, CLI_OPT_ROUND}, \
    {"zero-sign", required_argument, NULL, CLI_OPT_ZERO_SIGN}, \
    {"packing", required_argument, NULL, CLI_OPT_PACKING}, \
    {"nonfinite", required_argument, NULL, CLI_OPT_NONFINITE}, \
    {"global-scale", required_argument, NULL, CLI_OPT_GLOBAL_SCALE}, \
    {"recipe", required_argument, NULL, CLI_OPT_RECIPE}, \
    {"2d", no_argument, NULL, CLI_OPT_2D}, \
    {"1d", no_argument, NULL, CLI_OPT_1D}, \
    {"fp8-gran", required_argument, NULL, CLI_OPT_FP8_GRAN}, \
    {"zero-block-code", required_argument, NULL, CLI_OPT_ZERO_BLOCK}, \
    {"4over6-error", required_argument, NULL, CLI_OPT_4OVER6_ERR}, \
    {"4over6-bound", required_argument, NULL, CLI_OPT_4OVER6_BOUND}, \
    {"sr", required_argument, NULL, CLI_OPT_SR}, \
    {"rht", required_argument, NULL, CLI_OPT_RHT}, \
    {"scope", required_argument, NULL, CLI_OPT_SCOPE}, \
    {"tscale-rule", required_argument, NULL, CLI_OPT_TSRULE}, \
    {"input-scale", required_argument, NULL, CLI_OPT_INPUT_SCALE}, \
    {"4over6-math", required_argument, NULL, CLI_OPT_4OVER6_MATH},
#define CLI_FORMATS_FP4 ((1u << FP4S_MXFP4) | (1u << FP4S_NVFP4))
#define CLI_FORMATS_ALL (CLI_FORMATS_FP4 | (1u << FP4S_FP8))
void cli_quant_init(cli_quant *q);
bool cli_quant_option(int id, const char *arg, cli_quant *q);
void cli_quant_usage(unsigned formats);
fp4s_format cli_quant_format(const cli_quant *q, unsigned formats, const char *what);
void cli_quant_spec(const cli_quant *q, unsigned formats, const char *what, fp4s_spec *spec);
/* A profile alone, for a second quantizer such as fp4-quant --diff P2 (`opt`
 * names the option in messages). */
void cli_profile_spec(fp4s_format fmt, const char *profile, const char *opt, fp4s_spec *spec);
/* Print label (padded to column `indent`) and text wrapped before column 80. */
void cli_print_wrapped(const char *label, size_t indent, const char *text);

/* ---- the analysis option group ------------------------------------------------------
 * The options of the tools that analyse a linear site or a capture's sites
 * (fp4-compare, fp4-remedy, fp4-decompose, fp4-channels), spelled and parsed
 * alike: one site given as tensors, --act XR, --trainer-act XT and --weight W
 * (CLI_SITE_LONGOPTS; --weight alone: CLI_WEIGHT_LONGOPTS), --weight-2d M
 * (CLI_WEIGHT_2D_LONGOPTS), --dz-tie T (CLI_DZ_TIE_LONGOPTS) and a capture's
 * --sites GLOB and --steps LIST (CLI_SELECT_LONGOPTS; fp4-report and
 * fp4-capture ls take these two alone). cli_analysis_option()
 * keeps one argument as given in a zero-initialised cli_analysis (false for
 * any other id); each tool checks them after the last option, where its
 * messages come: cli_weight_2d() for --weight-2d, cli_dz_tie() for --dz-tie,
 * cli_parse_int_list("--steps", ...).
 * CLI_HELP_* are their help lines, where tools describe them alike. */
typedef struct cli_analysis {
    const char *act, *trainer_act, *weight; /* NULL: not given */
    const char *weight_2d, *dz_tie, *sites, *steps;
    bool strict; /* --strict: a (step, site) whose sides cannot be paired fails (cli_units) */
} cli_analysis;
enum {
    CLI_OPT_ANALYSIS_FIRST = 0x4300, /* clear of the quantizer group */
    CLI_OPT_ACT = CLI_OPT_ANALYSIS_FIRST,
    CLI_OPT_TRAINER_ACT,
    CLI_OPT_WEIGHT,
    CLI_OPT_WEIGHT_2D,
    CLI_OPT_DZ_TIE,
    CLI_OPT_SITES,
    CLI_OPT_STEPS,
    CLI_OPT_STRICT
};
#define CLI_WEIGHT_LONGOPTS {"weight", required_argument, NULL, CLI_OPT_WEIGHT},
#define CLI_SITE_LONGOPTS {"act", required_argument, NULL, CLI_OPT_ACT}, \
    {"trainer-act", required_argument, NULL, CLI_OPT_TRAINER_ACT}, CLI_WEIGHT_LONGOPTS
#define CLI_WEIGHT_2D_LONGOPTS {"weight-2d", required_argument, NULL, CLI_OPT_WEIGHT_2D},
#define CLI_DZ_TIE_LONGOPTS {"dz-tie", required_argument, NULL, CLI_OPT_DZ_TIE},
#define CLI_SELECT_LONGOPTS {"sites", required_argument, NULL, CLI_OPT_SITES}, \
    {"steps", required_argument, NULL, CLI_OPT_STEPS},
#define CLI_STRICT_LONGOPTS {"strict", no_argument, NULL, CLI_OPT_STRICT},
#define CLI_HELP_STRICT \
    "      --strict          fail on a (step, site) whose sides cannot be paired (default:\n" \
    "                        left out with a message)\n"
#define CLI_HELP_WEIGHT_2D \
    "      --weight-2d M     NVFP4 weight scaling: auto (default: 2-D for te), on, off\n"
#define CLI_HELP_DZ_TIE \
    "      --dz-tie T        dead-zone tie at |x/s*| = 0.25: spec (default), in, out\n"
#define CLI_HELP_SELECT \
    "      --sites GLOB      capture sites (fnmatch; default all)\n" \
    "      --steps LIST      capture steps, e.g. 0,5,10-20 (default all)\n"
bool cli_analysis_option(int id, const char *arg, cli_analysis *a);
/* --weight-2d auto|on|off (NULL: auto): -1, 1 or 0; another word is a usage error. */
int cli_weight_2d(const char *arg);
/* --dz-tie T into *t (arg NULL: *t unchanged); a word other than the ties is a usage error. */
void cli_dz_tie(const char *arg, fp4s_dz_tie *t);

/* The units of a site analysis (fp4scope/units.h) into *ul: with capture
 * NULL, the one site given as tensors (an->act, an->trainer_act,
 * an->weight); else the (step, site) pairs of the capture that --sites and
 * --steps select, a missing trainer side and weight getting trainer and
 * weight; a (step, site) whose sides cannot be paired is left out and said
 * (cli_units_skipped), or with an->strict fails. A failure exits with its
 * message; a selection whose every unit was left out is exit 3 ("no site left
 * to analyse"), an empty selection is exit 3,
 * "CAPTURE: no site WHATmatches[ --sites S][ --steps L]TAIL" (tail_nt in
 * place of tail when a unit was left out for lack of a trainer side).
 * *synthetic: whether the input is a synthetic capture. */
void cli_units(const char *capture, const cli_analysis *an, fp4s_unit_need trainer, fp4s_unit_need weight,
               const char *what, const char *tail, const char *tail_nt, fp4s_units *ul, bool *synthetic);

/* The trace-reading and onset options shared by fp4-mismatch and fp4-plot
 * mismatch (--is-cap, --format, --delim, --col-*, --allow-positive,
 * --skip-empty, --baseline-steps, --margin, --sigma, --consecutive):
 * CLI_TRACE_LONGOPTS expands to their struct option entries, and
 * cli_trace_option() applies one of them, returning false for any other id. */
enum {
    CLI_OPT_TRACE_FIRST = 0x4000,
    CLI_OPT_IS_CAP = CLI_OPT_TRACE_FIRST,
    CLI_OPT_FORMAT,
    CLI_OPT_DELIM,
    CLI_OPT_COL_STEP,
    CLI_OPT_COL_SEQ,
    CLI_OPT_COL_TRAINER,
    CLI_OPT_COL_ROLLOUT,
    CLI_OPT_COL_POS,
    CLI_OPT_COL_MASK,
    CLI_OPT_COL_RUN,
    CLI_OPT_ALLOW_POS,
    CLI_OPT_SKIP_EMPTY,
    CLI_OPT_BASELINE,
    CLI_OPT_MARGIN,
    CLI_OPT_SIGMA,
    CLI_OPT_CONSEC,
    CLI_OPT_DEDUPE
};
#define CLI_TRACE_LONGOPTS \
    {"is-cap", required_argument, NULL, CLI_OPT_IS_CAP}, \
    {"format", required_argument, NULL, CLI_OPT_FORMAT}, \
    {"delim", required_argument, NULL, CLI_OPT_DELIM}, \
    {"col-step", required_argument, NULL, CLI_OPT_COL_STEP}, \
    {"col-seq", required_argument, NULL, CLI_OPT_COL_SEQ}, \
    {"col-trainer", required_argument, NULL, CLI_OPT_COL_TRAINER}, \
    {"col-rollout", required_argument, NULL, CLI_OPT_COL_ROLLOUT}, \
    {"col-pos", required_argument, NULL, CLI_OPT_COL_POS}, \
    {"col-mask", required_argument, NULL, CLI_OPT_COL_MASK}, \
    {"col-run", required_argument, NULL, CLI_OPT_COL_RUN}, \
    {"allow-positive", no_argument, NULL, CLI_OPT_ALLOW_POS}, \
    {"skip-empty", no_argument, NULL, CLI_OPT_SKIP_EMPTY}, \
    {"baseline-steps", required_argument, NULL, CLI_OPT_BASELINE}, \
    {"margin", required_argument, NULL, CLI_OPT_MARGIN}, \
    {"sigma", required_argument, NULL, CLI_OPT_SIGMA}, \
    {"consecutive", required_argument, NULL, CLI_OPT_CONSEC}, \
    {"dedupe", no_argument, NULL, CLI_OPT_DEDUPE},
bool cli_trace_option(int id, const char *arg, fp4s_mm_opts *mo, fp4s_trace_opts *to,
                      fp4s_mm_onset_opts *oo);

/* True when `spec` (a path, or file:dataset / file.h5:/path) names an HDF5
 * capture whose root attribute synthetic = 1 (made by fp4-capture synth), so
 * that tools can label what they show as synthetic. Any failure: false. */
bool cli_source_synthetic(const char *spec);

/* Write a whole text blob to path atomically ("-" = stdout). */
int cli_write_text(const char *path, const char *text, size_t len);
/* True when s ends with suffix. */
bool cli_ends_with(const char *s, const char *suffix);

#endif
