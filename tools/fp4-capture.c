/* fp4-capture: make, inspect and join captures of schema fp4scope-capture/1.
 *   import SRC... -o CAP.h5 --step N --side S [--site TEMPLATE] [-a]
 *   ls CAP.h5 [--json] [--check]
 *   merge A.h5 B.h5... -o OUT.h5
 *   synth -o CAP.h5 [parameters] */
#include "cli.h"
#include "suggest.h"

#include <fp4scope/capture.h>
#include <fp4scope/tensor.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-capture import SRC... -o CAP.h5 --step N --side SIDE [OPTION]...\n"
        "       fp4-capture ls CAP.h5 [--json] [--check] [--sites GLOB] [--steps LIST] [--sides LIST]\n"
        "       fp4-capture merge A.h5 B.h5... -o OUT.h5\n"
        "       fp4-capture synth -o CAP.h5 [PARAMETER]...\n"
        "Make, list and join captures of trainer/rollout activations, weights and\n"
        "log-probs (HDF5 schema fp4scope-capture/1, see fp4scope-capture(5)).\n"
        "\n"
        "import: copy tensors into /steps/N/SITE/SIDE, bit for bit for float32, float16\n"
        "and bfloat16 (float64 is converted to float32). SRC is file.npy, file.h5:/dataset,\n"
        "file.safetensors (every tensor), file.safetensors:NAME or file.safetensors:GLOB\n"
        "('*' and '?' over tensor names; '\\*', '\\?' and '\\\\' match themselves).\n"
        "  -o, --output CAP.h5   capture to write (replaced atomically unless -a)\n"
        "      --force           replace an existing HDF5 file at the output\n"
        "      --quiet           no progress line on stderr\n"
        "  -a, --append          append to CAP.h5 (created if missing); rows are appended\n"
        "                        to datasets that exist\n"
        "      --step N          step number (required unless --const)\n"
        "      --side SIDE       trainer, rollout or weight (required)\n"
        "      --const           with --side weight: store once under /weights/SITE\n"
        "      --site TEMPLATE   site name; {name} the tensor name (HDF5: the dataset path\n"
        "                        with '/' as '.'; .npy: the file stem), {stem} the file\n"
        "                        stem, {1}..{9} the text matched by the 1st..9th '*' or '?'\n"
        "                        of the GLOB (default {name})\n"
        "      --gzip N          deflate level 0..9 for new datasets (default 0)\n"
        "      --checksum        a Fletcher-32 checksum on every chunk of new datasets,\n"
        "                        verified by every read (a damaged byte is an error)\n"
        "      --exact           NAME is a tensor name, not a pattern ('*', '?' and '\\'\n"
        "                        are themselves)\n"
        "\n"
        "ls: steps, sites, sides, shapes, dtypes and sizes, sorted by step, site, side.\n"
        "      --json            JSON on stdout\n"
        "      --check           also check trainer/rollout shapes per site, weight K and\n"
        "                        log-prob lengths; exit 1 if a check fails\n"
        "      --sites GLOB      only sites matching GLOB (fnmatch, '*' matches dots)\n"
        "      --steps LIST      only these steps (0,5,10-20 or 0:100:10)\n"
        "      --sides LIST      only these sides (trainer,rollout,weight,seq,...)\n"
        "\n"
        "merge: join captures (one per rank); a dataset in several inputs must be\n"
        "identical, else the merge fails naming both files.\n"
        "  -o, --output OUT.h5   merged capture (written atomically)\n"
        "      --force           replace an existing HDF5 file at the output\n"
        "      --quiet           no progress line on stderr\n"
        "      --gzip N          accepted for symmetry; datasets keep their own filters\n"
        "\n"
        "synth: a synthetic capture with LLM-like statistics, labelled synthetic = 1\n"
        "(every parameter and the seed are stored as root attributes synth_*).\n"
        "Random numbers: %s (GSL's Mersenne Twister when built with GSL).\n"
        "  -o, --output CAP.h5   output (written atomically)\n"
        "      --force           replace an existing HDF5 file at the output\n"
        "      --quiet           no progress line on stderr\n"
        "      --seed N          random seed (default 1)\n"
        "      --steps N         steps with log-probs (default 8)\n"
        "      --act-every N     activations at steps 0, N, 2N, ... (default 4)\n"
        "      --layers N        layers (default 2)\n"
        "      --experts N       MoE experts per layer, 0 = dense MLP (default 4)\n"
        "      --top-k N         experts per token (default 2)\n"
        "      --route-skew X    Zipf exponent of expert popularity (default 1)\n"
        "      --tokens N        tokens per step (default 128)\n"
        "      --hidden K        columns of every site (default 256)\n"
        "      --out-features N  rows of every weight, 0 = no weights (default 128)\n"
        "      --scale-sigma X   per-channel log-normal scale sigma (default 1)\n"
        "      --hot-channels N  persistent hot channels per layer (default 4)\n"
        "      --hot-factor X    their scale factor (default 40)\n"
        "      --tail-df X       Student-t degrees of freedom, 0 = Gaussian (default 4)\n"
        "      --drift X         per-step random walk of the log-scales (default 0.02)\n"
        "      --kernel-noise X  relative fp32 noise before the rollout's rounding\n"
        "                        (default 0.000244140625 = 2^-12)\n"
        "      --f32             store float32 instead of bfloat16\n"
        "      --weights-per-step  weights at every activation step, not once\n"
        "      --seqs N          sequences per step (default 8)\n"
        "      --seq-len N       tokens per sequence (default 32)\n"
        "      --lp-mismatch X   std of rollout - trainer log-prob (default 0.002)\n"
        "      --onset N         step from which the mismatch grows, -1 = never (default 5)\n"
        "      --lp-growth X     mismatch factor per step from the onset (default 2)\n"
        "      --gzip N          deflate level 0..9 (default 4)\n"
        "\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 1 a --check failed, 2 usage, 3 input missing, unreadable,\n"
        "malformed, of a newer schema, or a conflicting duplicate in merge, 4 output not\n"
        "written, 5 internal error.\n", fp4s_synth_rng_name());
}

enum {
    OPT_STEP = 256, OPT_SIDE, OPT_CONST, OPT_SITE, OPT_GZIP, OPT_CHECK,
    OPT_SIDES, OPT_SEED, OPT_SSTEPS, OPT_ACT_EVERY, OPT_LAYERS, OPT_EXPERTS, OPT_TOPK,
    OPT_SKEW, OPT_TOKENS, OPT_HIDDEN, OPT_OUTF, OPT_SSIGMA, OPT_HOT, OPT_HOTF, OPT_DF, OPT_DRIFT,
    OPT_KNOISE, OPT_F32, OPT_WPS, OPT_SEQS, OPT_SEQLEN, OPT_LPM, OPT_ONSET, OPT_LPG, OPT_EXACT, OPT_CHECKSUM
};

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Remove the temporary output and exit with rc. The library's detail names
 * the temporary it was given to write; the user knows the output's name. */
static _Noreturn void fail_output(int rc, fp4s_outfile **of, const char *out)
{
    const char *tmp = *of ? fp4s_outfile_tmppath(*of) : NULL;
    const char *d = fp4s_last_error();
    char msg[2048];
    size_t n = 0, tl = tmp ? strlen(tmp) : 0;
    while (*d && n + 1 < sizeof msg) {
        if (tl && strncmp(d, tmp, tl) == 0) {
            n += (size_t)snprintf(msg + n, sizeof msg - n, "%s", out);
            if (n >= sizeof msg) n = sizeof msg - 1;
            d += tl;
        } else {
            msg[n++] = *d++;
        }
    }
    msg[n] = '\0';
    fp4s_outfile_abort(of);
    if (msg[0]) fp4s_error_set(rc, "%s", msg);
    cli_fail(rc);
}

/* ---- glob with captures ------------------------------------------------------ */
#define MAXCAP 9
typedef struct caps {
    const char *start[MAXCAP];
    size_t len[MAXCAP];
    int n;
} caps;

/* Glob match of a tensor name: '*' any run of characters, '?' one, '\\x' the
 * character x itself (so that a name with '*' or '?' can be matched exactly),
 * recording what each wildcard matched (for {1}..{9}). When a character
 * fails, only the latest '*' takes one more character and the rest is
 * matched again: at most len(pattern) x len(name) steps, never the
 * exponential backtracking over every star. Each '*' matches as little as
 * the rest of the pattern allows. */
static void cap_set(caps *c, int k, const char *s, size_t len)
{
    if (k < MAXCAP) {
        c->start[k] = s;
        c->len[k] = len;
    }
}

static bool gmatch(const char *p, const char *s, caps *c)
{
    const char *star_p = NULL, *star_s = NULL;
    int star_k = 0, k = 0;
    while (*s) {
        if (*p == '*') {
            cap_set(c, k, s, 0);
            star_p = ++p;
            star_s = s;
            star_k = k++;
            continue;
        }
        if (*p == '?') {
            cap_set(c, k, s, 1);
            k++;
            p++;
            s++;
            continue;
        }
        const char *np = p + 1;
        char lit = *p;
        if (*p == '\\' && p[1]) {
            lit = p[1];
            np = p + 2;
        }
        if (*p && lit == *s) {
            p = np;
            s++;
            continue;
        }
        if (!star_p) return false;
        /* the latest star takes one more character */
        p = star_p;
        s = ++star_s;
        k = star_k + 1;
        if (star_k < MAXCAP) c->len[star_k] = (size_t)(s - c->start[star_k]);
    }
    while (*p == '*') {
        cap_set(c, k, s, 0);
        k++;
        p++;
    }
    return !*p;
}

/* Wildcards of a pattern, escaped ones not counted. */
static int count_wild(const char *p)
{
    int n = 0;
    for (; *p; p++) {
        if (*p == '\\' && p[1]) p++;
        else n += *p == '*' || *p == '?';
    }
    return n;
}

static bool has_glob(const char *p) { return count_wild(p) > 0; }

/* The name a pattern without wildcards stands for: escapes removed. */
static char *unescape(const char *p)
{
    char *o = xstrdup(p), *d = o;
    for (; *p; p++) {
        if (*p == '\\' && p[1]) p++;
        *d++ = *p;
    }
    *d = '\0';
    return o;
}

/* Expand a --site template. Returns malloc'ed string or NULL with *err set. */
static char *expand(const char *tpl, const char *name, const char *stem, const caps *c, const char **err)
{
    size_t cap = strlen(tpl) + strlen(name) * 4 + strlen(stem) * 4 + 256, n = 0;
    char *out = xmalloc(cap);
    for (const char *p = tpl; *p;) {
        const char *rep = NULL;
        size_t rl = 0, skip = 1;
        if (p[0] == '{' && p[1] == '{') {
            rep = "{";
            rl = 1;
            skip = 2;
        } else if (p[0] == '}' && p[1] == '}') {
            rep = "}";
            rl = 1;
            skip = 2;
        } else if (p[0] == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                *err = "unterminated '{' in --site";
                free(out);
                return NULL;
            }
            size_t kl = (size_t)(e - p - 1);
            if (kl == 4 && strncmp(p + 1, "name", 4) == 0) {
                rep = name;
                rl = strlen(name);
            } else if (kl == 4 && strncmp(p + 1, "stem", 4) == 0) {
                rep = stem;
                rl = strlen(stem);
            } else if (kl == 1 && p[1] >= '1' && p[1] <= '9') {
                int i = p[1] - '1';
                if (!c || i >= c->n) {
                    *err = "--site uses {N} beyond the wildcards of the source pattern";
                    free(out);
                    return NULL;
                }
                rep = c->start[i];
                rl = c->len[i];
            } else {
                *err = "unknown field in --site (use {name}, {stem}, {1}..{9})";
                free(out);
                return NULL;
            }
            skip = kl + 2;
        } else {
            rep = p;
            rl = 1;
        }
        if (n + rl + 1 > cap) {
            cap = (n + rl + 1) * 2;
            char *no = realloc(out, cap);
            if (!no) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
            out = no;
        }
        memcpy(out + n, rep, rl);
        n += rl;
        p += skip;
    }
    out[n] = '\0';
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *file_stem(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = xstrdup(b);
    char *d = strrchr(s, '.');
    if (d && d != s) *d = '\0';
    return s;
}

/* ---- import -------------------------------------------------------------------- */
typedef struct job {
    char *spec;  /* source spec */
    char *site;
} job;

static int import_one(fp4s_capture *c, const job *j, int64_t step, const char *side)
{
    fp4s_source *s;
    int rc = fp4s_source_open(j->spec, &s);
    if (rc) return rc;
    size_t rows = fp4s_source_rows(s), cols = fp4s_source_cols(s);
    fp4s_dtype dt = fp4s_source_dtype(s);
    bool raw = dt == FP4S_DT_F32 || dt == FP4S_DT_F16 || dt == FP4S_DT_BF16;
    if (!raw && dt != FP4S_DT_F64) {
        fp4s_source_close(&s);
        return fp4s_error_set(FP4S_EDTYPE, "%s: %s elements cannot be captured (float32, float16, "
                              "bfloat16 or float64)", j->spec, fp4s_dtype_name(dt));
    }
    if (!raw)
        fprintf(stderr, "%s: %s: float64 converted to float32 (not bit-exact)\n", cli_prog(), j->spec);
    /* rank >= 3 reads as [prod(leading), last]: keep the stored shape */
    fp4s_capture_meta meta;
    fp4s_capture_meta_defaults(&meta);
    uint64_t dims[FP4S_MAX_RANK];
    int rank = fp4s_source_shape(s, dims, FP4S_MAX_RANK);
    char shape[FP4S_MAX_RANK * 21 + 1] = "";
    if (rank >= 3) {
        size_t k = 0;
        for (int i = 0; i < rank; i++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
        meta.source_shape = shape;
    }
    fp4s_dtype st = raw ? dt : FP4S_DT_F32;
    size_t esz = fp4s_dtype_size(st);
    size_t rowb = cols * esz;
    size_t blk = (8u << 20) / (rowb ? rowb : 1);
    if (blk < 1) blk = 1;
    if (blk > rows) blk = rows ? rows : 1;
    void *buf = xmalloc(blk * cols * 4);
    for (size_t r0 = 0; r0 < rows && !rc; r0 += blk) {
        size_t nr = rows - r0 < blk ? rows - r0 : blk;
        rc = raw ? fp4s_source_read_raw(s, r0, nr, buf) : fp4s_source_read(s, r0, nr, buf, cols);
        if (!rc) rc = fp4s_capture_put(c, step, j->site, side, st, buf, nr, cols, cols, &meta);
        cli_progress(r0 + nr, rows);
    }
    free(buf);
    fp4s_source_close(&s);
    return rc;
}

/* Add a (spec, site) job; the site must be valid. When its text comes from
 * the tensor's name ({name}, {1}..{9}) a bad one is the input's fault: exit 3
 * naming the source file and the tensor. */
static void add_job(job **jobs, size_t *nj, size_t *cj, char *spec, char *site, const char *file,
                    const char *tensor, const char *tpl)
{
    if (fp4s_site_check(site)) {
        bool from_name = strstr(tpl, "{name}") != NULL;
        for (const char *p = tpl; *p && !from_name; p++)
            from_name = p[0] == '{' && p[1] >= '1' && p[1] <= '9' && p[2] == '}';
        if (from_name)
            cli_die(FP4S_EXIT_INPUT, "%s: tensor '%s' gives %s; choose the site name with --site", file,
                    tensor, fp4s_last_error());
        cli_usage("--site: %s", fp4s_last_error());
    }
    if (*nj == *cj) {
        *cj *= 2;
        job *nw = realloc(*jobs, *cj * sizeof **jobs);
        if (!nw) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
        *jobs = nw;
    }
    (*jobs)[*nj].spec = spec;
    (*jobs)[*nj].site = site;
    (*nj)++;
}

static int cmd_import(int argc, char **argv)
{
    static const struct option lo[] = {
        {"output", required_argument, 0, 'o'}, {"append", no_argument, 0, 'a'},
        {"step", required_argument, 0, OPT_STEP}, {"side", required_argument, 0, OPT_SIDE},
        {"const", no_argument, 0, OPT_CONST}, {"site", required_argument, 0, OPT_SITE},
        {"gzip", required_argument, 0, OPT_GZIP}, {"exact", no_argument, 0, OPT_EXACT},
        {"checksum", no_argument, 0, OPT_CHECKSUM},
        CLI_COMMON_LONGOPTS CLI_OUTPUT_LONGOPTS {0, 0, 0, 0}};
    const char *out = NULL, *side = NULL, *tpl = "{name}";
    bool append = false, cst = false, have_step = false, exact = false, checksum = false, force = false;
    int64_t step = 0;
    int gz = 0, ch;
    cli_common common;
    cli_common_init(&common, usage_text, false);
    while ((ch = cli_getopt(argc, argv, "o:a", lo)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case 'a': append = true; break;
        case OPT_STEP: step = cli_parse_int("--step", optarg, 0, FP4S_CAPTURE_MAX_STEP); have_step = true; break;
        case OPT_SIDE: side = optarg; break;
        case OPT_CONST: cst = true; break;
        case OPT_SITE: tpl = optarg; break;
        case OPT_GZIP: gz = (int)cli_parse_int("--gzip", optarg, 0, 9); break;
        case OPT_EXACT: exact = true; break;
        case OPT_CHECKSUM: checksum = true; break;
        case CLI_OPT_FORCE:
            force = true;
            cli_force();
            break;
        default:
            if (!cli_common_option(ch, optarg, &common)) cli_usage("import: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) cli_usage("import: no SRC given");
    if (!out) cli_usage("import: -o CAP.h5 is required");
    if (!side) cli_usage("import: --side trainer|rollout|weight is required");
    if (strcmp(side, "trainer") && strcmp(side, "rollout") && strcmp(side, "weight"))
        cli_usage("--side: expected trainer, rollout or weight, got '%s'", side);
    if (cst && strcmp(side, "weight")) cli_usage("--const needs --side weight");
    if (cst && have_step) cli_usage("--const and --step exclude each other");
    if (!cst && !have_step) cli_usage("import: --step N is required (or --const for weights)");
    if (cst) step = FP4S_CAPTURE_CONST_STEP;

    /* Expand the sources into (spec, site) jobs before touching the output. */
    size_t nj = 0, cj = 16;
    job *jobs = xmalloc(cj * sizeof *jobs);
    for (int a = optind; a < argc; a++) {
        const char *src = argv[a];
        char *file = xstrdup(src), *name = NULL;
        if (!is_file(file)) {
            /* the file part ends at the first ':' after which a file exists */
            char *colon = NULL;
            for (char *p = file; (p = strchr(p, ':')) != NULL; p++) {
                *p = '\0';
                if (is_file(file)) {
                    colon = p;
                    break;
                }
                *p = ':';
            }
            if (!colon) cli_die(FP4S_EXIT_INPUT, "%s: no such file", src);
            name = colon + 1;
        }
        char *stem = file_stem(file);
        bool st = cli_ends_with(file, ".safetensors");
        if (st && (!name || (!exact && has_glob(name)))) {
            size_t nn;
            char **names;
            int rc = fp4s_safetensors_names(file, &names, &nn);
            if (rc) {
                free(stem);
                free(file);
                cli_fail(rc);
            }
            size_t matched = 0;
            for (size_t i = 0; i < nn; i++) {
                caps c = {.n = name ? count_wild(name) : 0};
                if (name && !gmatch(name, names[i], &c)) continue;
                const char *err = NULL;
                char *site = expand(tpl, names[i], stem, name ? &c : NULL, &err);
                if (!site) cli_usage("%s", err);
                size_t L = strlen(file) + strlen(names[i]) + 2;
                char *spec = xmalloc(L);
                snprintf(spec, L, "%s:%s", file, names[i]);
                add_job(&jobs, &nj, &cj, spec, site, file, names[i], tpl);
                matched++;
            }
            fp4s_names_free(names, nn);
            if (!matched) cli_die(FP4S_EXIT_INPUT, "%s: no tensor matches '%s'", file, name ? name : "*");
        } else {
            if (name && !exact && has_glob(name))
                cli_usage("%s: patterns work for safetensors sources only", src);
            char *tensor = name ? (exact ? xstrdup(name) : unescape(name)) : NULL, *tname;
            if (!tensor)
                tname = xstrdup(stem);
            else {
                tname = xstrdup(tensor[0] == '/' ? tensor + 1 : tensor);
                for (char *p = tname; *p; p++)
                    if (*p == '/') *p = '.';
            }
            const char *err = NULL;
            char *site = expand(tpl, tname, stem, NULL, &err);
            if (!site) cli_usage("%s", err);
            free(tname);
            char *spec;
            if (tensor) {
                size_t L = strlen(file) + strlen(tensor) + 2;
                spec = xmalloc(L);
                snprintf(spec, L, "%s:%s", file, tensor);
            } else {
                spec = xstrdup(src);
            }
            add_job(&jobs, &nj, &cj, spec, site, file, tensor ? tensor : stem, tpl);
            free(tensor);
        }
        free(stem);
        free(file);
    }
    /* Two sources mapped to one site would silently append: refuse. */
    for (size_t i = 0; i < nj; i++)
        for (size_t k = i + 1; k < nj; k++)
            if (strcmp(jobs[i].site, jobs[k].site) == 0)
                cli_usage("import: %s and %s both map to site '%s' (use {name} or {1} in --site)",
                          jobs[i].spec, jobs[k].spec, jobs[i].site);
    for (int a = optind; a < argc; a++) cli_input(argv[a]);
    /* an existing capture: say what adds to it (-a) before what would destroy it (--force) */
    fp4s_capture_info ci;
    if (!append && !force && is_file(out) && fp4s_capture_info_read(out, &ci) == 0)
        cli_usage("import: %s exists and is a capture: -a/--append adds these tensors to it; --force replaces "
                  "it (what it holds is lost); nothing was written", out);
    if (append && is_file(out)) cli_output_append(out);
    else cli_output(out);

    fp4s_capture_opts o;
    fp4s_capture_opts_defaults(&o);
    o.gzip = gz;
    o.checksum = checksum;
    o.producer = "fp4-capture import";
    /* -o: a new capture in a temporary, renamed over OUT unless a live writer
     * holds OUT. -a: appended in place under the writer lock; a missing OUT is
     * made in a temporary and moved into place only if OUT is still missing:
     * when a concurrent import created it meanwhile, this one appends to that
     * file instead, so both land. */
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        fp4s_capture *c = NULL;
        fp4s_outfile *of = NULL;
        if (append && is_file(out)) {
            rc = fp4s_capture_open_append(out, &o, &c);
        } else {
            rc = fp4s_outfile_begin(out, &of);
            if (!rc) {
                o.overwrite = true;
                rc = fp4s_capture_create(fp4s_outfile_tmppath(of), &o, &c);
            }
        }
        if (rc) fail_output(rc, &of, out);
        /* one import is one transaction: a source that fails undoes the others */
        for (size_t i = 0; i < nj && !rc; i++) {
            cli_progress_begin(jobs[i].spec);
            rc = import_one(c, &jobs[i], step, side);
        }
        cli_progress_end();
        if (!rc) rc = fp4s_capture_close(&c);
        else {
            char keep[1024];
            snprintf(keep, sizeof keep, "%s", fp4s_last_error());
            if (fp4s_capture_abort(&c) == 0 && !of)
                snprintf(keep + strlen(keep), sizeof keep - strlen(keep),
                         " (nothing of this import was added to %s)", out);
            fp4s_error_set(rc, "%s", keep);
        }
        if (!rc && of && append) {
            rc = fp4s_file_commit(fp4s_outfile_tmppath(of), out, false);
            if (rc && is_file(out) && attempt < 4) {
                fp4s_outfile_abort(&of);
                continue; /* created by another import meanwhile: append to it */
            }
            if (!rc) fp4s_outfile_abort(&of); /* moved into place: only frees the handle */
        } else if (!rc && of) {
            rc = fp4s_outfile_commit(&of);
        }
        if (rc) fail_output(rc, &of, out);
        break;
    }
    if ((rc = cli_commit())) return rc;
    for (size_t i = 0; i < nj; i++) {
        free(jobs[i].spec);
        free(jobs[i].site);
    }
    free(jobs);
    return 0;
}

/* ---- ls ---------------------------------------------------------------------- */
static bool step_in(const long long *v, size_t n, int64_t s)
{
    if (!v) return true;
    for (size_t i = 0; i < n; i++)
        if (v[i] == s) return true;
    return false;
}

static void human_size(double b, char *buf, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static int cmd_ls(int argc, char **argv)
{
    static const struct option lo[] = {
        CLI_JSON_LONGOPTS {"check", no_argument, 0, OPT_CHECK},
        CLI_SELECT_LONGOPTS
        {"sides", required_argument, 0, OPT_SIDES}, CLI_COMMON_LONGOPTS {0, 0, 0, 0}};
    bool check = false;
    const char *sites = NULL, *sides = NULL;
    long long *steps = NULL;
    size_t nsteps = 0;
    int ch;
    cli_common common;
    cli_common_init(&common, usage_text, false);
    while ((ch = cli_getopt(argc, argv, "", lo)) != -1) {
        switch (ch) {
        case OPT_CHECK: check = true; break;
        case CLI_OPT_SITES: sites = optarg; break;
        case CLI_OPT_STEPS: free(steps); steps = cli_parse_int_list("--steps", optarg, &nsteps); break;
        case OPT_SIDES: sides = optarg; break;
        default:
            if (!cli_common_option(ch, optarg, &common)) cli_usage("ls: unknown option '%s'", argv[optind - 1]);
        }
    }
    const bool json = common.json;
    if (optind + 1 != argc) cli_usage("ls: expected exactly one CAP.h5");
    const char *file = argv[optind];
    fp4s_capture_info info;
    int rc = fp4s_capture_info_read(file, &info);
    if (rc) cli_fail(rc);
    fp4s_capture_entry *e;
    size_t n;
    rc = fp4s_capture_list_raw(file, &e, &n); /* --check reports a shape mismatch */
    if (rc) cli_fail(rc);
    int status = 0;
    char checkmsg[1024] = "";
    if (check) {
        rc = fp4s_capture_verify(file);
        if (rc) {
            snprintf(checkmsg, sizeof checkmsg, "%s", fp4s_last_error());
            status = FP4S_EXIT_CHECK;
        }
    }
    size_t matching = 0;
    for (size_t i = 0; i < n; i++)
        matching += step_in(steps, nsteps, e[i].step) &&
                    (!sites || fp4s_site_match(sites, e[i].site)) && (!sides || cli_list_has(sides, e[i].side));
    if (!matching && (steps || sites || sides)) {
        char hint[4096];
        cli_sites_hint(file, sites, hint, sizeof hint);
        cli_die(FP4S_EXIT_INPUT, "%s: no dataset matches the selection (--steps/--sites/--sides); "
                "the capture has %zu steps (%" PRId64 "..%" PRId64 ")%s", file, info.nsteps,
                info.first_step, info.last_step, hint);
    }
    double total = 0;
    size_t shown = 0;
    json_t *jd = json ? json_array() : NULL;
    if (!json) {
        /* names from the file are shown escaped: a site name may hold terminal escapes */
        printf("%s: %s, producer %s%s, created %s, %zu steps", cli_safe(file), cli_safe(info.schema),
               info.producer[0] ? cli_safe(info.producer) : "?", info.synthetic ? " (SYNTHETIC)" : "",
               info.created[0] ? cli_safe(info.created) : "?", info.nsteps);
        if (info.nsteps) printf(" (%" PRId64 "..%" PRId64 ")", info.first_step, info.last_step);
        printf("\n");
        if (info.interrupted)
            printf("interrupted: the writer did not close this file (killed or still running); "
                   "the flushed steps are listed%s\n", info.skipped ? ", unreadable objects skipped" : "");
        printf("%6s  %-44s %-8s %14s  %-8s %10s\n", "step", "site", "side", "shape", "dtype", "size");
    }
    for (size_t i = 0; i < n; i++) {
        if (!step_in(steps, nsteps, e[i].step)) continue;
        if (sites && !fp4s_site_match(sites, e[i].site)) continue;
        if (sides && !cli_list_has(sides, e[i].side)) continue;
        bool one = strcmp(e[i].site, "logprobs") == 0; /* 1-D fields */
        double bytes = (double)e[i].rows * (double)e[i].cols * (double)fp4s_dtype_size(e[i].dtype);
        total += bytes;
        shown++;
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "step", e[i].step >= 0 ? json_integer(e[i].step) : json_null());
            json_object_set_new(o, "site", json_string(e[i].site));
            json_object_set_new(o, "side", json_string(e[i].side));
            json_object_set_new(o, "path", json_string(e[i].path));
            json_t *sh = json_array();
            if (!one) json_array_append_new(sh, json_integer((json_int_t)e[i].rows));
            json_array_append_new(sh, json_integer((json_int_t)e[i].cols));
            json_object_set_new(o, "shape", sh);
            json_object_set_new(o, "dtype", json_string(fp4s_dtype_name(e[i].dtype)));
            json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
            json_array_append_new(jd, o);
        } else {
            char shape[64], sz[32], st[24];
            if (one)
                snprintf(shape, sizeof shape, "%zu", e[i].cols);
            else
                snprintf(shape, sizeof shape, "%zu x %zu", e[i].rows, e[i].cols);
            human_size(bytes, sz, sizeof sz);
            if (e[i].step >= 0)
                snprintf(st, sizeof st, "%" PRId64, e[i].step);
            else
                snprintf(st, sizeof st, "const");
            printf("%6s  %-44s %-8s %14s  %-8s %10s\n", st, cli_safe(e[i].site), cli_safe(e[i].side), shape,
                   fp4s_dtype_name(e[i].dtype), sz);
        }
    }
    if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "file", json_string(file));
        json_object_set_new(j, "schema", json_string(info.schema));
        json_object_set_new(j, "producer", json_string(info.producer));
        json_object_set_new(j, "created", json_string(info.created));
        json_object_set_new(j, "synthetic", json_boolean(info.synthetic));
        json_object_set_new(j, "interrupted", json_boolean(info.interrupted));
        json_object_set_new(j, "skipped", json_integer((json_int_t)info.skipped));
        json_t *js = json_array(), *jsites = json_array();
        for (size_t i = 0; i < n; i++) {
            if (e[i].step >= 0 && (i == 0 || e[i - 1].step != e[i].step))
                json_array_append_new(js, json_integer(e[i].step));
        }
        /* unique site names in listing order of first appearance, sorted */
        char **us = xmalloc((n + 1) * sizeof *us);
        size_t nu = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(e[i].site, "logprobs") == 0) continue;
            bool seen = false;
            for (size_t k = 0; k < nu && !seen; k++) seen = strcmp(us[k], e[i].site) == 0;
            if (!seen) us[nu++] = e[i].site;
        }
        qsort(us, nu, sizeof *us, cmp_str);
        for (size_t k = 0; k < nu; k++) json_array_append_new(jsites, json_string(us[k]));
        free(us);
        json_object_set_new(j, "steps", js);
        json_object_set_new(j, "sites", jsites);
        json_object_set_new(j, "datasets", jd);
        json_object_set_new(j, "total_bytes", json_integer((json_int_t)total));
        if (check) {
            json_object_set_new(j, "check_ok", json_boolean(status == 0));
            if (status) json_object_set_new(j, "check_error", json_string(checkmsg));
        }
        int r = cli_json_print(j);
        if (r) status = r;
    } else {
        char sz[32];
        human_size(total, sz, sizeof sz);
        printf("%zu datasets, %s (uncompressed)\n", shown, sz);
        if (check && !status) printf("check: ok\n");
    }
    if (status == FP4S_EXIT_CHECK) {
        fprintf(stderr, "%s: check failed: ", cli_prog());
        cli_fputs_safe(checkmsg, stderr);
        fputc('\n', stderr);
    }
    free(e);
    free(steps);
    return status;
}

/* ---- merge -------------------------------------------------------------------- */
static int cmd_merge(int argc, char **argv)
{
    static const struct option lo[] = {
        {"output", required_argument, 0, 'o'}, {"gzip", required_argument, 0, OPT_GZIP},
        CLI_COMMON_LONGOPTS CLI_OUTPUT_LONGOPTS {0, 0, 0, 0}};
    const char *out = NULL;
    int ch;
    cli_common common;
    cli_common_init(&common, usage_text, false);
    while ((ch = cli_getopt(argc, argv, "o:", lo)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case OPT_GZIP: (void)cli_parse_int("--gzip", optarg, 0, 9); break;
        default:
            if (!cli_common_option(ch, optarg, &common)) cli_usage("merge: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!out) cli_usage("merge: -o OUT.h5 is required");
    if (optind >= argc) cli_usage("merge: no input captures");
    for (int a = optind; a < argc; a++) cli_input(argv[a]);
    cli_output(out);
    fp4s_outfile *of;
    int rc = fp4s_outfile_begin(out, &of);
    if (rc) cli_fail(rc);
    fp4s_capture_opts o;
    fp4s_capture_opts_defaults(&o);
    o.overwrite = true;
    cli_progress_begin(out);
    rc = fp4s_capture_merge((const char *const *)(argv + optind), (size_t)(argc - optind),
                            fp4s_outfile_tmppath(of), &o);
    if (!rc) rc = fp4s_outfile_commit(&of);
    if (rc) fail_output(rc, &of, out);
    return cli_commit();
}

/* ---- synth -------------------------------------------------------------------- */
static int cmd_synth(int argc, char **argv)
{
    static const struct option lo[] = {
        {"output", required_argument, 0, 'o'}, {"seed", required_argument, 0, OPT_SEED},
        {"steps", required_argument, 0, OPT_SSTEPS}, {"act-every", required_argument, 0, OPT_ACT_EVERY},
        {"layers", required_argument, 0, OPT_LAYERS}, {"experts", required_argument, 0, OPT_EXPERTS},
        {"top-k", required_argument, 0, OPT_TOPK}, {"route-skew", required_argument, 0, OPT_SKEW},
        {"tokens", required_argument, 0, OPT_TOKENS}, {"hidden", required_argument, 0, OPT_HIDDEN},
        {"out-features", required_argument, 0, OPT_OUTF},
        {"scale-sigma", required_argument, 0, OPT_SSIGMA},
        {"hot-channels", required_argument, 0, OPT_HOT}, {"hot-factor", required_argument, 0, OPT_HOTF},
        {"tail-df", required_argument, 0, OPT_DF}, {"drift", required_argument, 0, OPT_DRIFT},
        {"kernel-noise", required_argument, 0, OPT_KNOISE}, {"f32", no_argument, 0, OPT_F32},
        {"weights-per-step", no_argument, 0, OPT_WPS}, {"seqs", required_argument, 0, OPT_SEQS},
        {"seq-len", required_argument, 0, OPT_SEQLEN}, {"lp-mismatch", required_argument, 0, OPT_LPM},
        {"onset", required_argument, 0, OPT_ONSET}, {"lp-growth", required_argument, 0, OPT_LPG},
        {"gzip", required_argument, 0, OPT_GZIP}, CLI_COMMON_LONGOPTS CLI_OUTPUT_LONGOPTS {0, 0, 0, 0}};
    fp4s_synth_opts s;
    fp4s_synth_opts_defaults(&s);
    const char *out = NULL;
    int ch;
    cli_common common;
    cli_common_init(&common, usage_text, false);
    while ((ch = cli_getopt(argc, argv, "o:", lo)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case OPT_SEED: s.seed = (uint64_t)cli_parse_int("--seed", optarg, 0, INT64_MAX); break;
        case OPT_SSTEPS: s.steps = (int)cli_parse_int("--steps", optarg, 1, 100000); break;
        case OPT_ACT_EVERY: s.act_every = (int)cli_parse_int("--act-every", optarg, 1, 100000); break;
        case OPT_LAYERS: s.layers = (int)cli_parse_int("--layers", optarg, 1, 1024); break;
        case OPT_EXPERTS: s.experts = (int)cli_parse_int("--experts", optarg, 0, 1024); break;
        case OPT_TOPK: s.top_k = (int)cli_parse_int("--top-k", optarg, 1, 1024); break;
        case OPT_SKEW: s.route_skew = cli_parse_double("--route-skew", optarg, 0, 10); break;
        case OPT_TOKENS: s.tokens = (int)cli_parse_int("--tokens", optarg, 1, 1 << 20); break;
        case OPT_HIDDEN: s.hidden = (int)cli_parse_int("--hidden", optarg, 1, 1 << 16); break;
        case OPT_OUTF: s.out_features = (int)cli_parse_int("--out-features", optarg, 0, 1 << 16); break;
        case OPT_SSIGMA: s.scale_sigma = cli_parse_double("--scale-sigma", optarg, 0, 10); break;
        case OPT_HOT: s.hot_channels = (int)cli_parse_int("--hot-channels", optarg, 0, 1 << 16); break;
        case OPT_HOTF: s.hot_factor = cli_parse_double("--hot-factor", optarg, 1e-6, 1e6); break;
        case OPT_DF: s.tail_df = cli_parse_double("--tail-df", optarg, 0, 1e6); break;
        case OPT_DRIFT: s.drift = cli_parse_double("--drift", optarg, 0, 1); break;
        case OPT_KNOISE: s.kernel_noise = cli_parse_double("--kernel-noise", optarg, 0, 0.1); break;
        case OPT_F32: s.bf16 = false; break;
        case OPT_WPS: s.weights_per_step = true; break;
        case OPT_SEQS: s.seqs = (int)cli_parse_int("--seqs", optarg, 0, 1 << 20); break;
        case OPT_SEQLEN: s.seq_len = (int)cli_parse_int("--seq-len", optarg, 1, 1 << 20); break;
        case OPT_LPM: s.lp_mismatch = cli_parse_double("--lp-mismatch", optarg, 0, 10); break;
        case OPT_ONSET: s.onset_step = (int)cli_parse_int("--onset", optarg, -1, 100000); break;
        case OPT_LPG: s.lp_growth = cli_parse_double("--lp-growth", optarg, 1, 100); break;
        case OPT_GZIP: s.gzip = (int)cli_parse_int("--gzip", optarg, 0, 9); break;
        default:
            if (!cli_common_option(ch, optarg, &common)) cli_usage("synth: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!out) cli_usage("synth: -o CAP.h5 is required");
    if (optind != argc) cli_usage("synth: unexpected argument '%s'", argv[optind]);
    if (s.experts && s.top_k > s.experts) cli_usage("--top-k %d exceeds --experts %d", s.top_k, s.experts);
    if (s.hot_channels > s.hidden) cli_usage("--hot-channels %d exceeds --hidden %d", s.hot_channels, s.hidden);
    cli_output(out);
    fp4s_outfile *of;
    cli_progress_begin(out);
    int rc = fp4s_outfile_begin(out, &of);
    if (!rc) rc = fp4s_capture_synth(fp4s_outfile_tmppath(of), &s);
    if (!rc) rc = fp4s_outfile_commit(&of);
    if (rc) fail_output(rc, &of, out);
    return cli_commit();
}

int main(int argc, char **argv)
{
    cli_init("fp4-capture");
    if (argc < 2) cli_usage("expected a command: import, ls, merge or synth");
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
    if (strcmp(cmd, "import") == 0) return cmd_import(argc, argv);
    if (strcmp(cmd, "ls") == 0) return cmd_ls(argc, argv);
    if (strcmp(cmd, "merge") == 0) return cmd_merge(argc, argv);
    if (strcmp(cmd, "synth") == 0) return cmd_synth(argc, argv);
    cli_usage("unknown command '%s' (import, ls, merge or synth)", cmd);
}
