/* fp4-quant: quantize a tensor to MXFP4, NVFP4 or FP8 exactly as a named engine
 * does, write codes/scales/dequantized values, summarize, or diff two profiles
 * element by element (man/fp4-quant.1). */
#include "cli.h"

#include <fp4scope/qfile.h>
#include <fp4scope/quant.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    OPT_FORMAT = 256, OPT_PROFILE, OPT_SCALE_RULE, OPT_ROUND, OPT_PAD, OPT_OUT, OPT_CODES, OPT_SCALES,
    OPT_DEQUANT, OPT_JSON, OPT_DIFF, OPT_LIST, OPT_ZERO_SIGN, OPT_PACKING, OPT_NONFINITE, OPT_GLOBAL,
    OPT_RECIPE, OPT_2D, OPT_1D, OPT_FP8_GRAN, OPT_ZERO_BLOCK, OPT_THREADS, OPT_REF, OPT_CHUNK, OPT_GZIP,
    OPT_SHOW, OPT_HELP, OPT_VERSION
};

static const struct option longopts[] = {
    {"format", required_argument, NULL, OPT_FORMAT},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"scale-rule", required_argument, NULL, OPT_SCALE_RULE},
    {"round", required_argument, NULL, OPT_ROUND},
    {"pad", no_argument, NULL, OPT_PAD},
    {"output", required_argument, NULL, OPT_OUT},
    {"codes", required_argument, NULL, OPT_CODES},
    {"scales", required_argument, NULL, OPT_SCALES},
    {"dequant", required_argument, NULL, OPT_DEQUANT},
    {"json", no_argument, NULL, OPT_JSON},
    {"diff", required_argument, NULL, OPT_DIFF},
    {"list-profiles", no_argument, NULL, OPT_LIST},
    {"zero-sign", required_argument, NULL, OPT_ZERO_SIGN},
    {"packing", required_argument, NULL, OPT_PACKING},
    {"nonfinite", required_argument, NULL, OPT_NONFINITE},
    {"global-scale", required_argument, NULL, OPT_GLOBAL},
    {"recipe", required_argument, NULL, OPT_RECIPE},
    {"2d", no_argument, NULL, OPT_2D},
    {"1d", no_argument, NULL, OPT_1D},
    {"fp8-gran", required_argument, NULL, OPT_FP8_GRAN},
    {"zero-block-code", required_argument, NULL, OPT_ZERO_BLOCK},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"ref", no_argument, NULL, OPT_REF},
    {"chunk-rows", required_argument, NULL, OPT_CHUNK},
    {"gzip", required_argument, NULL, OPT_GZIP},
    {"show", required_argument, NULL, OPT_SHOW},
    CLI_OUTPUT_LONGOPTS
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* The names of a table joined into buf (for help texts and messages). */
static const char *names(fp4s_name_kind kind, const char *sep, const char *last, char *buf, size_t n)
{
    fp4s_names(kind, sep, last, buf, n);
    return buf;
}

/* Print label (padded to column `indent`) and text wrapped before column 80,
 * continuation lines indented to `indent`. */
static void print_wrapped(const char *label, size_t indent, const char *text)
{
    printf("%-*s", (int)indent, label);
    size_t col = strlen(label) > indent ? strlen(label) : indent;
    bool fresh = true; /* nothing written on this line after the label or indent */
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w == 0) break;
        if (!fresh && col + 1 + w > 79) {
            printf("\n%*s", (int)indent, "");
            col = indent;
        } else if (!fresh) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)w, p);
        col += w;
        p += w;
        fresh = false;
    }
    putchar('\n');
}

/* Print an option's help prefix and the names of a table, continuation lines
 * in the description column. */
static void print_names(const char *prefix, fp4s_name_kind kind)
{
    char all[2048];
    print_wrapped(prefix, 24, names(kind, ", ", NULL, all, sizeof all));
}

static void usage(void)
{
    char a[256], c[256];
    printf("Usage: fp4-quant [-f %s] [-p PROFILE] [--scale-rule R] [--round T]\n"
           "                 [--pad] [-o OUT.h5] [--codes C.npy] [--scales S.npy] [--dequant D.npy]\n"
           "                 [--json] [--diff PROFILE] [--list-profiles] INPUT\n"
           "Quantize a tensor exactly as the engine a profile names does, and report what\n"
           "it did; or run it through two profiles and show where they disagree.\n"
           "INPUT: file.npy, file.safetensors:NAME or file.h5:/dataset (any rank; rank >= 3\n"
           "reads as [prod(leading), last]; blocks run along the last dimension).\n\n"
           "Quantizer (a profile fills every rule; options override it):\n"
           "  -f, --format F        %s (default: %s)\n"
           "  -p, --profile P       engine profile (default: %s for mxfp4, %s for nvfp4);\n"
           "                        see --list-profiles\n",
           names(FP4S_NAMES_FORMAT, "|", NULL, a, sizeof a), names(FP4S_NAMES_FORMAT, ", ", " or ", c, sizeof c),
           fp4s_format_name(FP4S_MXFP4), fp4s_default_profile(FP4S_MXFP4),
           fp4s_default_profile(FP4S_NVFP4));
    print_names("      --scale-rule R    MXFP4 shared-exponent rule: ", FP4S_NAMES_MX_RULE);
    print_names("      --round T         element tie rule: ", FP4S_NAMES_TIE);
    printf("      --zero-sign Z     keep (negatives rounding to 0 give -0) or drop\n");
    print_names("      --packing K       nibble packing of -o: ", FP4S_NAMES_PACKING);
    print_names("      --nonfinite N     NaN/Inf policy: ", FP4S_NAMES_NONFINITE);
    print_names("      --global-scale G  NVFP4 recorded tensor scale: ", FP4S_NAMES_GLOBAL_SCALE);
    print_names("      --recipe R        NVFP4 order of operations: ", FP4S_NAMES_NV_RECIPE);
    printf("      --2d, --1d        NVFP4 16x16 2-D (weights) or 1-D block scaling\n");
    print_names("      --fp8-gran G      FP8 scale granularity: ", FP4S_NAMES_FP8_GRAN);
    printf("      --zero-block-code C  MXFP4 E8M0 code of an all-zero block (0..254)\n"
           "      --pad             zero-pad the last dimension to a multiple of the block\n"
           "                        (without it a non-multiple is an error)\n"
           "Outputs (written atomically; a failure leaves none of them):\n"
           "  -o, --output OUT.h5   packed HDF5: codes, scales, tensor_scale, self-describing\n"
           "                        attributes and a numpy decode recipe\n"
           "      --codes C.npy     one code per element as uint8 (E2M1 0..15, sign in bit 3;\n"
           "                        FP8: the E4M3 byte), in the input's shape\n"
           "      --scales S.npy    scale bytes uint8 [rows, cols/block] (FP8: float32 tiles)\n"
           "      --dequant D.npy   dequantized float32 in the input's shape\n"
           "      --gzip L          gzip level 0..9 for -o (default 0)\n"
           "Report:\n"
           "      --json            summary as JSON on stdout instead of the table\n"
           "      --diff P2         also quantize with profile P2 (same format, its own\n"
           "                        rules) and report differing scale and element codes\n"
           "      --show N          differing positions listed by --diff (default 8)\n"
           "      --list-profiles   list the profiles and what each reproduces, then exit\n"
           "Execution:\n"
           "      --threads N       worker threads (default: FP4S_THREADS or all CPUs)\n"
           "      --ref             force the scalar reference kernels (as FP4S_FORCE_REF=1)\n"
           "      --chunk-rows N    rows per streamed chunk (default: about 1M elements)\n"
           "      --help, --version\n\n"
           "Exit status: 0 ok, 2 usage, 3 input unreadable, malformed or of the wrong\n"
           "shape, 4 output not written, 5 internal error.\n");
}

/* ---- option parsing helpers ---------------------------------------------------- */

/* The value of an option among the names of a table (its enum value), or a
 * usage error that lists them. */
static int parse_name(const char *opt, const char *arg, fp4s_name_kind kind)
{
    int i = fp4s_name_index(kind, arg);
    if (i < 0) {
        char alts[512];
        cli_usage("%s: expected one of %s, got '%s'", opt, names(kind, ", ", NULL, alts, sizeof alts), arg);
    }
    return i;
}

/* Explicit overrides of the profile's fields (-1 / NULL: not given). */
typedef struct {
    int mx_rule, tie, keep_neg_zero, packing, nonfinite, global_scale, recipe, tile2d, fp8_gran, zero_block;
} overrides;

static void apply_overrides(fp4s_spec *s, const overrides *o)
{
    if (o->mx_rule >= 0) s->mx_rule = (fp4s_mx_rule)o->mx_rule;
    if (o->tie >= 0) s->tie = (fp4s_tie)o->tie;
    if (o->keep_neg_zero >= 0) s->keep_neg_zero = o->keep_neg_zero;
    if (o->packing >= 0) s->packing = (fp4s_packing)o->packing;
    if (o->nonfinite >= 0) s->nonfinite = (fp4s_nonfinite)o->nonfinite;
    if (o->global_scale >= 0) s->global_scale = (fp4s_global_scale)o->global_scale;
    if (o->recipe >= 0) s->nv_recipe = (fp4s_nv_recipe)o->recipe;
    if (o->tile2d >= 0) s->tile2d = o->tile2d;
    if (o->fp8_gran >= 0 && s->format == FP4S_FP8) {
        /* the block size follows the granularity: 1 per tensor, 128 per tile */
        s->fp8_gran = (fp4s_fp8_gran)o->fp8_gran;
        s->block = s->fp8_gran == FP4S_FP8_TENSOR ? 1 : 128;
    } else if (o->fp8_gran >= 0) {
        s->fp8_gran = (fp4s_fp8_gran)o->fp8_gran;
    }
    if (o->zero_block >= 0) s->mx_zero_block_code = (uint8_t)o->zero_block;
}

static void make_spec(fp4s_spec *s, fp4s_format fmt, const char *profile, const overrides *o, const char *what)
{
    int rc = fp4s_spec_profile(s, fmt, profile);
    if (rc == FP4S_EINVAL) {
        char alts[1024];
        fp4s_name_kind kind = fmt == FP4S_MXFP4 ? FP4S_NAMES_PROFILE_MXFP4
                            : fmt == FP4S_NVFP4 ? FP4S_NAMES_PROFILE_NVFP4 : FP4S_NAMES_PROFILE_FP8;
        cli_usage("%s: unknown profile '%s' for %s; profiles: %s", what, profile, fp4s_format_name(fmt),
                  names(kind, ", ", NULL, alts, sizeof alts));
    }
    if (rc == FP4S_ENOTSUP) cli_usage("%s: profile '%s' does not define %s", what, profile, fp4s_format_name(fmt));
    if (rc) cli_fail(rc);
    if (o) apply_overrides(s, o);
    rc = fp4s_spec_check(s);
    if (rc) {
        const char *d = fp4s_last_error();
        cli_usage("%s: %s", what, (d && *d) ? d : fp4s_strerror(rc));
    }
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
        print_wrapped("  engine", 13, p->engine);
        print_wrapped("  version", 13, *p->version ? p->version : "-");
        print_wrapped("  device", 13, p->device);
        print_wrapped("  source", 13, *p->source ? p->source : "-");
        print_wrapped("  reproduces", 13, p->reproduces);
    }
    return json ? cli_json_print(arr) : 0;
}

/* ---- one quantizer run over a chunk ---------------------------------------------- */
typedef struct {
    fp4s_spec spec;
    fp4s_tscale ts;
    fp4s_qstats st;
    uint8_t *codes, *scales;
    float *sf32, *deq;
    size_t scale_cols;    /* FP4: blocks per row; FP8: scale columns */
    size_t sf_rows_chunk; /* FP8 scale rows per chunk buffer */
} run_t;

static bool is_fp4(const fp4s_spec *s) { return s->format != FP4S_FP8; }

static size_t fp8_tile_rows(const fp4s_spec *s, size_t rows)
{
    if (s->fp8_gran == FP4S_FP8_TENSOR) return rows;
    return s->fp8_gran == FP4S_FP8_128x128 ? 128 : 1;
}

static void run_alloc(run_t *r, size_t chunk, size_t rows, size_t pcols, bool need_deq)
{
    r->codes = xcalloc(chunk, pcols);
    if (is_fp4(&r->spec)) {
        r->scale_cols = fp4s_spec_blocks_per_row(&r->spec, pcols);
        r->scales = xcalloc(chunk, r->scale_cols);
    } else if (r->spec.fp8_gran == FP4S_FP8_TENSOR) {
        r->scale_cols = 1;
        r->sf_rows_chunk = 1;
        r->sf32 = xcalloc(1, sizeof(float));
    } else {
        r->scale_cols = fp4s_spec_blocks_per_row(&r->spec, pcols);
        size_t tr = fp8_tile_rows(&r->spec, rows);
        r->sf_rows_chunk = (chunk + tr - 1) / tr;
        r->sf32 = xcalloc(r->sf_rows_chunk * r->scale_cols, sizeof(float));
    }
    if (need_deq) r->deq = xcalloc(chunk * pcols, sizeof(float));
}

static void run_free(run_t *r)
{
    free(r->codes);
    free(r->scales);
    free(r->sf32);
    free(r->deq);
}

static int run_chunk(run_t *r, const float *x, size_t n, size_t pcols, size_t row0)
{
    fp4s_qout o = {0};
    o.codes = r->codes;
    o.ld_codes = pcols;
    if (r->scales) {
        o.scales = r->scales;
        o.ld_scales = r->scale_cols;
    }
    if (r->sf32) {
        o.scale_f32 = r->sf32;
        o.ld_scale_f32 = r->scale_cols;
    }
    if (r->deq) {
        o.dequant = r->deq;
        o.ld_dequant = pcols;
    }
    return fp4s_quantize(&r->spec, &r->ts, x, n, pcols, pcols, row0, &o, &r->st);
}

static bool needs_amax(const fp4s_spec *s)
{
    return s->format == FP4S_NVFP4 || (s->format == FP4S_FP8 && s->fp8_gran == FP4S_FP8_TENSOR);
}

/* ---- diff accounting ---------------------------------------------------------------- */
typedef struct {
    size_t row, col;
    float x, d1, d2;
    uint8_t c1, c2;
} diffpos;

typedef struct {
    uint64_t scales_total, scales_diff;
    uint64_t elems_total, elems_diff, deq_diff, nan_mismatch;
    double max_abs;
    size_t max_row, max_col;
    float max_x, max_d1, max_d2;
    bool have_max;
    uint64_t scale_first_row, scale_first_blk;
    bool have_scale_first;
    bool scale_layouts_differ;
    diffpos *pos;   /* first positions whose values differ through a code or scale */
    diffpos *rpos;  /* ... differ only by float rounding (same code and scale) */
    diffpos *cpos;  /* ... whose codes differ but values agree */
    size_t npos, nrpos, ncpos, show;
    uint64_t deq_rounding;
} diffacc;

static void diff_chunk(diffacc *a, const run_t *r1, const run_t *r2, const float *x, size_t n, size_t pcols,
                       size_t cols, size_t row0)
{
    if (is_fp4(&r1->spec)) {
        /* scale bytes of real (non-padding) blocks */
        size_t blk = r1->spec.block, nb = (cols + blk - 1) / blk;
        for (size_t i = 0; i < n; i++)
            for (size_t b = 0; b < nb; b++) {
                a->scales_total++;
                if (r1->scales[i * r1->scale_cols + b] != r2->scales[i * r2->scale_cols + b]) {
                    if (!a->have_scale_first) {
                        a->scale_first_row = row0 + i;
                        a->scale_first_blk = b;
                        a->have_scale_first = true;
                    }
                    a->scales_diff++;
                }
            }
    } else if (r1->spec.fp8_gran != r2->spec.fp8_gran) {
        a->scale_layouts_differ = true; /* tiles of different shapes: not comparable */
    } else {
        size_t tr = fp8_tile_rows(&r1->spec, SIZE_MAX);
        size_t srows = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? (row0 == 0) : (n + tr - 1) / tr;
        for (size_t i = 0; i < srows * r1->scale_cols; i++) {
            a->scales_total++;
            uint32_t u, v;
            memcpy(&u, &r1->sf32[i], 4);
            memcpy(&v, &r2->sf32[i], 4);
            if (u != v) a->scales_diff++;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t k = i * pcols + j;
            a->elems_total++;
            uint8_t c1 = r1->codes[k], c2 = r2->codes[k];
            float d1 = r1->deq[k], d2 = r2->deq[k];
            bool cd = c1 != c2;
            /* values differ numerically (-0 equals +0; NaN equals NaN) */
            bool dd = isnan(d1) ? !isnan(d2) : (isnan(d2) || d1 != d2);
            /* does the element's block (or tile) scale differ? */
            bool sd;
            if (is_fp4(&r1->spec)) {
                size_t b = j / r1->spec.block;
                sd = r1->scales[i * r1->scale_cols + b] != r2->scales[i * r2->scale_cols + b];
            } else if (a->scale_layouts_differ) {
                sd = true;
            } else {
                size_t tr = fp8_tile_rows(&r1->spec, SIZE_MAX);
                size_t si = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? 0 : (i / tr) * r1->scale_cols + j / 128;
                uint32_t u, v;
                memcpy(&u, &r1->sf32[si], 4);
                memcpy(&v, &r2->sf32[si], 4);
                sd = u != v;
            }
            if (cd) a->elems_diff++;
            if (dd) a->deq_diff++;
            if (dd && !cd && !sd) a->deq_rounding++;
            if (isnan(d1) != isnan(d2)) a->nan_mismatch++;
            diffpos p = {row0 + i, j, x[k], d1, d2, c1, c2};
            if (dd && (cd || sd)) {
                if (a->npos < a->show) a->pos[a->npos++] = p;
            } else if (dd) {
                if (a->nrpos < a->show) a->rpos[a->nrpos++] = p;
            } else if (cd) {
                if (a->ncpos < a->show) a->cpos[a->ncpos++] = p;
            }
            if (isfinite(d1) && isfinite(d2)) {
                double e = fabs((double)d1 - (double)d2);
                if (e > 0 && (!a->have_max || e > a->max_abs)) {
                    a->max_abs = e;
                    a->max_row = row0 + i;
                    a->max_col = j;
                    a->max_x = x[k];
                    a->max_d1 = d1;
                    a->max_d2 = d2;
                    a->have_max = true;
                }
            }
        }
}

/* ---- outputs, all committed together at the end --------------------------------------- */
typedef struct {
    const char *out_h5, *codes, *scales, *dequant;
    fp4s_qfile *qf;
    fp4s_npy_writer *wc, *ws, *wd;
    void *bufs[16];    /* the run's buffers, freed on a failure */
    run_t *runs[2];
} outputs;

static void outputs_abort(outputs *o)
{
    fp4s_qfile_abort(&o->qf);
    fp4s_npy_writer_abort(&o->wc);
    fp4s_npy_writer_abort(&o->ws);
    fp4s_npy_writer_abort(&o->wd);
    for (size_t i = 0; i < sizeof o->bufs / sizeof *o->bufs; i++) free(o->bufs[i]);
    for (int i = 0; i < 2; i++)
        if (o->runs[i]) run_free(o->runs[i]);
}

static _Noreturn void fail_out(outputs *o, int rc)
{
    int st = cli_report(rc);
    outputs_abort(o);
    exit(st);
}

/* ---- the chunk pipeline ----------------------------------------------------------------
 * Reading chunk i+1 (a thread), quantizing chunk i (the library's threads)
 * and writing chunk i-1 (a thread) overlap, so that with enough threads the
 * run takes about as long as its slowest stage instead of the sum of the
 * three (the reader alone, on one core, is the plain read; bench/RESULTS-H200.md).
 * The writes keep their order: one write job at a time, joined before the
 * next. A stage's error keeps its detail (fp4s_last_error is per thread).
 * HDF5 is called from one thread at a time: a read of an HDF5 source and a
 * write of the HDF5 output (-o) take the same lock (.npy and .safetensors
 * reads, .npy writes and the quantizer run beside anything). */
static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct job {
    pthread_t th;
    bool live;
    int rc;
    char err[1024];
    int (*fn)(struct job *);
    /* read */
    fp4s_source *src;
    float *buf;
    /* write */
    outputs *out;
    const run_t *r;
    uint8_t *codes, *scales, *crop8;
    float *sf32, *deq, *cropf;
    int rank;
    size_t rows, cols;
    /* both */
    size_t r0, n, pcols;
    bool h5; /* the job calls HDF5 */
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    if (j->h5) pthread_mutex_lock(&h5_lock);
    j->rc = j->fn(j);
    if (j->h5) pthread_mutex_unlock(&h5_lock);
    if (j->rc) snprintf(j->err, sizeof j->err, "%s", fp4s_last_error());
    return NULL;
}

/* Run j->fn on a thread (in this thread if none can be started). */
static void job_start(job *j)
{
    j->rc = 0;
    j->live = pthread_create(&j->th, NULL, job_main, j) == 0;
    if (!j->live) job_main(j);
}

static int job_wait(job *j)
{
    if (j->live) pthread_join(j->th, NULL);
    j->live = false;
    if (j->rc) return fp4s_error_set(j->rc, "%s", j->err);
    return 0;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int read_fn(job *j) { return fp4s_source_read(j->src, j->r0, j->n, j->buf, j->pcols); }

/* Write one quantized chunk (rows r0..r0+n) from the buffers the job holds. */
static int write_fn(job *j)
{
    const size_t n = j->n, cols = j->cols, pcols = j->pcols;
    outputs *out = j->out;
    const run_t *r1 = j->r;
    int rc = 0;
    if (out->qf) {
        rc = fp4s_qfile_write(out->qf, n, j->codes, pcols, j->scales, r1->scale_cols, j->sf32, r1->scale_cols);
        if (rc) return rc;
    }
    if (out->wc) {
        const uint8_t *src8 = j->codes;
        if (j->crop8) {
            for (size_t i = 0; i < n; i++) memcpy(j->crop8 + i * cols, j->codes + i * pcols, cols);
            src8 = j->crop8;
        }
        rc = fp4s_npy_writer_rows(out->wc, src8, j->rank == 1 ? cols : n);
        if (rc) return rc;
    }
    if (out->wd) {
        const float *srcf = j->deq;
        if (j->cropf) {
            for (size_t i = 0; i < n; i++) memcpy(j->cropf + i * cols, j->deq + i * pcols, cols * sizeof(float));
            srcf = j->cropf;
        }
        rc = fp4s_npy_writer_rows(out->wd, srcf, j->rank == 1 ? cols : n);
        if (rc) return rc;
    }
    if (out->ws) {
        if (is_fp4(&r1->spec)) {
            rc = fp4s_npy_writer_rows(out->ws, j->scales, n);
        } else {
            size_t tr = fp8_tile_rows(&r1->spec, j->rows);
            size_t ns = r1->spec.fp8_gran == FP4S_FP8_TENSOR ? (j->r0 == 0) : (n + tr - 1) / tr;
            rc = fp4s_npy_writer_rows(out->ws, j->sf32, ns);
        }
    }
    return rc;
}

static json_t *pos_json(const diffpos *pos, size_t n)
{
    json_t *fp = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "row", json_integer((json_int_t)pos[i].row));
        json_object_set_new(p, "col", json_integer((json_int_t)pos[i].col));
        json_object_set_new(p, "x", cli_json_real(pos[i].x));
        json_object_set_new(p, "code_a", json_integer(pos[i].c1));
        json_object_set_new(p, "code_b", json_integer(pos[i].c2));
        json_object_set_new(p, "a", cli_json_real(pos[i].d1));
        json_object_set_new(p, "b", cli_json_real(pos[i].d2));
        json_array_append_new(fp, p);
    }
    return fp;
}

/* ---- report helpers -------------------------------------------------------------------------- */
static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

static double rel_err(const fp4s_qstats *st) { return st->x2 > 0 ? sqrt(st->err2 / st->x2) : 0.0; }

static json_t *spec_json(const fp4s_spec *s)
{
    char desc[1024];
    fp4s_spec_describe(s, desc, sizeof desc);
    json_t *j = json_object();
    json_object_set_new(j, "profile", json_string(s->profile));
    json_object_set_new(j, "format", json_string(fp4s_format_name(s->format)));
    json_object_set_new(j, "block", json_integer(s->block));
    json_object_set_new(j, "round", json_string(fp4s_tie_name(s->tie)));
    json_object_set_new(j, "zero_sign", json_string(s->keep_neg_zero ? "keep" : "drop"));
    json_object_set_new(j, "packing", json_string(fp4s_packing_name(s->packing)));
    json_object_set_new(j, "nonfinite", json_string(fp4s_nonfinite_name(s->nonfinite)));
    if (s->format == FP4S_MXFP4) {
        json_object_set_new(j, "scale_rule", json_string(fp4s_mx_rule_name(s->mx_rule)));
        json_object_set_new(j, "zero_block_code", json_integer(s->mx_zero_block_code));
        json_object_set_new(j, "scale_is_ggml", json_boolean(s->mx_scale_is_ggml));
    } else if (s->format == FP4S_NVFP4) {
        json_object_set_new(j, "recipe", json_string(fp4s_nv_recipe_name(s->nv_recipe)));
        json_object_set_new(j, "global_scale", json_string(fp4s_global_scale_name(s->global_scale)));
        json_object_set_new(j, "scaling", json_string(s->tile2d ? "2d" : "1d"));
    } else {
        json_object_set_new(j, "fp8_gran", json_string(fp4s_fp8_gran_name(s->fp8_gran)));
    }
    json_object_set_new(j, "describe", json_string(desc));
    return j;
}

static json_t *stats_json(const run_t *r)
{
    const fp4s_qstats *st = &r->st;
    json_t *j = json_object();
    json_t *ts = json_object();
    json_object_set_new(ts, "amax", cli_json_real(r->ts.amax));
    if (r->spec.format == FP4S_NVFP4) {
        json_object_set_new(ts, "stored", cli_json_real(r->spec.global_scale == FP4S_GS_NONE ? 1.0 : r->ts.stored));
        json_object_set_new(ts, "s_enc", cli_json_real(r->ts.s_enc));
        json_object_set_new(ts, "s_dec", cli_json_real(r->ts.s_dec));
        json_object_set_new(ts, "convention", json_string(fp4s_global_scale_name(r->spec.global_scale)));
    } else if (r->spec.format == FP4S_FP8 && r->spec.fp8_gran == FP4S_FP8_TENSOR) {
        json_object_set_new(ts, "stored", cli_json_real(r->ts.fp8_scale));
    } else {
        json_object_set_new(ts, "stored", json_null());
    }
    json_object_set_new(j, "tensor_scale", ts);
    json_object_set_new(j, "elements", json_integer((json_int_t)st->elements));
    json_object_set_new(j, "blocks", json_integer((json_int_t)st->blocks));
    json_object_set_new(j, "saturated", json_integer((json_int_t)st->saturated));
    json_object_set_new(j, "zero_blocks", json_integer((json_int_t)st->zero_blocks));
    json_t *nf = json_object();
    json_object_set_new(nf, "total", json_integer((json_int_t)st->nonfinite));
    json_object_set_new(nf, "nan", json_integer((json_int_t)st->nan));
    json_object_set_new(nf, "inf", json_integer((json_int_t)st->inf));
    json_object_set_new(nf, "blocks", json_integer((json_int_t)st->nonfinite_blocks));
    json_object_set_new(nf, "policy", json_string(fp4s_nonfinite_name(r->spec.nonfinite)));
    json_object_set_new(j, "nonfinite", nf);
    json_object_set_new(j, "neg_zero", json_integer((json_int_t)st->neg_zero));
    json_object_set_new(j, "scale_underflow", json_integer((json_int_t)st->scale_underflow));
    json_object_set_new(j, "rel_error", cli_json_real(rel_err(st)));
    return j;
}

static void print_row(const char *label, const char *a, const char *b)
{
    if (b) printf("  %-28s %-22s %s\n", label, a, b);
    else printf("  %-28s %s\n", label, a);
}

static const char *fmt_count(char *buf, size_t n, uint64_t c, uint64_t of)
{
    if (of) snprintf(buf, n, "%llu (%.4g%%)", (unsigned long long)c, pct(c, of));
    else snprintf(buf, n, "%llu", (unsigned long long)c);
    return buf;
}

static void rules_rows(const fp4s_spec *a, const fp4s_spec *b)
{
    char x[96], y[96];
#define ROW(label, fa, fb) do { snprintf(x, sizeof x, "%s", fa); if (b) snprintf(y, sizeof y, "%s", fb); \
        print_row(label, x, b ? y : NULL); } while (0)
    if (a->format == FP4S_MXFP4) ROW("scale rule", fp4s_mx_rule_name(a->mx_rule), b ? fp4s_mx_rule_name(b->mx_rule) : "");
    if (a->format == FP4S_NVFP4) {
        ROW("recipe (fp32 op order)", fp4s_nv_recipe_name(a->nv_recipe), b ? fp4s_nv_recipe_name(b->nv_recipe) : "");
        ROW("tensor scale stored as", fp4s_global_scale_name(a->global_scale), b ? fp4s_global_scale_name(b->global_scale) : "");
        ROW("block scaling", a->tile2d ? "2-D 16x16" : "1-D", b ? (b->tile2d ? "2-D 16x16" : "1-D") : "");
    }
    if (a->format == FP4S_FP8) ROW("scale granularity", fp4s_fp8_gran_name(a->fp8_gran), b ? fp4s_fp8_gran_name(b->fp8_gran) : "");
    ROW("element ties", fp4s_tie_name(a->tie), b ? fp4s_tie_name(b->tie) : "");
    ROW("negative zero", a->keep_neg_zero ? "kept (-0)" : "dropped (+0)", b ? (b->keep_neg_zero ? "kept (-0)" : "dropped (+0)") : "");
    ROW("NaN/Inf policy", fp4s_nonfinite_name(a->nonfinite), b ? fp4s_nonfinite_name(b->nonfinite) : "");
    if (a->format == FP4S_MXFP4) {
        snprintf(x, sizeof x, "%u", a->mx_zero_block_code);
        if (b) snprintf(y, sizeof y, "%u", b->mx_zero_block_code);
        print_row("all-zero block scale code", x, b ? y : NULL);
    }
    if (a->format != FP4S_FP8) ROW("nibble packing", fp4s_packing_name(a->packing), b ? fp4s_packing_name(b->packing) : "");
#undef ROW
}

static void stats_rows(const run_t *a, const run_t *b)
{
    char x[96], y[96];
    snprintf(x, sizeof x, "%.6g", rel_err(&a->st));
    if (b) snprintf(y, sizeof y, "%.6g", rel_err(&b->st));
    print_row("rel. error ||Q(x)-x||/||x||", x, b ? y : NULL);
    if (a->spec.format == FP4S_NVFP4 || (a->spec.format == FP4S_FP8 && a->spec.fp8_gran == FP4S_FP8_TENSOR)) {
        float va = a->spec.format == FP4S_NVFP4 ? (a->spec.global_scale == FP4S_GS_NONE ? 1.0f : a->ts.stored) : a->ts.fp8_scale;
        snprintf(x, sizeof x, "%.9g", va);
        if (b) {
            float vb = b->spec.format == FP4S_NVFP4 ? (b->spec.global_scale == FP4S_GS_NONE ? 1.0f : b->ts.stored) : b->ts.fp8_scale;
            snprintf(y, sizeof y, "%.9g", vb);
        }
        print_row("tensor scale", x, b ? y : NULL);
    }
    print_row("saturated elements", fmt_count(x, sizeof x, a->st.saturated, a->st.elements),
              b ? fmt_count(y, sizeof y, b->st.saturated, b->st.elements) : NULL);
    print_row("all-zero blocks", fmt_count(x, sizeof x, a->st.zero_blocks, a->st.blocks),
              b ? fmt_count(y, sizeof y, b->st.zero_blocks, b->st.blocks) : NULL);
    if (a->spec.format != FP4S_FP8)
        print_row("elements coded -0", fmt_count(x, sizeof x, a->st.neg_zero, a->st.elements),
                  b ? fmt_count(y, sizeof y, b->st.neg_zero, b->st.elements) : NULL);
    if (a->spec.format != FP4S_FP8 && (a->st.scale_underflow || (b && b->st.scale_underflow)))
        print_row("scale underflow blocks", fmt_count(x, sizeof x, a->st.scale_underflow, a->st.blocks),
                  b ? fmt_count(y, sizeof y, b->st.scale_underflow, b->st.blocks) : NULL);
}

static const char *code_str(const fp4s_spec *s, uint8_t c, char *buf, size_t n)
{
    if (s->format == FP4S_FP8) snprintf(buf, n, "0x%02x", c);
    else snprintf(buf, n, "%2u", c);
    return buf;
}

/* ---- main --------------------------------------------------------------------------------------- */
int main(int argc, char **argv)
{
    cli_init("fp4-quant");
    const char *fmt_s = "mxfp4", *profile = NULL, *diff_profile = NULL;
    overrides ov = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    bool pad = false, json = false, list = false;
    long long chunk_rows = 0, show = 8;
    int gzip = 0;
    outputs out = {0};
    char alts[512];

    int c;
    while ((c = cli_getopt(argc, argv, "f:p:o:", longopts)) != -1) {
        switch (c) {
        case 'f': case OPT_FORMAT: fmt_s = optarg; break;
        case 'p': case OPT_PROFILE: profile = optarg; break;
        case 'o': case OPT_OUT: out.out_h5 = optarg; break;
        case OPT_SCALE_RULE: ov.mx_rule = parse_name("--scale-rule", optarg, FP4S_NAMES_MX_RULE); break;
        case OPT_ROUND: ov.tie = parse_name("--round", optarg, FP4S_NAMES_TIE); break;
        case OPT_ZERO_SIGN:
            if (strcmp(optarg, "keep") == 0) ov.keep_neg_zero = 1;
            else if (strcmp(optarg, "drop") == 0) ov.keep_neg_zero = 0;
            else cli_usage("--zero-sign: expected keep or drop, got '%s'", optarg);
            break;
        case OPT_PACKING: ov.packing = parse_name("--packing", optarg, FP4S_NAMES_PACKING); break;
        case OPT_NONFINITE: ov.nonfinite = parse_name("--nonfinite", optarg, FP4S_NAMES_NONFINITE); break;
        case OPT_GLOBAL: ov.global_scale = parse_name("--global-scale", optarg, FP4S_NAMES_GLOBAL_SCALE); break;
        case OPT_RECIPE: ov.recipe = parse_name("--recipe", optarg, FP4S_NAMES_NV_RECIPE); break;
        case OPT_FP8_GRAN: ov.fp8_gran = parse_name("--fp8-gran", optarg, FP4S_NAMES_FP8_GRAN); break;
        case OPT_2D: ov.tile2d = 1; break;
        case OPT_1D: ov.tile2d = 0; break;
        case OPT_ZERO_BLOCK: ov.zero_block = (int)cli_parse_int("--zero-block-code", optarg, 0, 254); break;
        case OPT_PAD: pad = true; break;
        case OPT_CODES: out.codes = optarg; break;
        case OPT_SCALES: out.scales = optarg; break;
        case OPT_DEQUANT: out.dequant = optarg; break;
        case OPT_JSON: json = true; break;
        case OPT_DIFF: diff_profile = optarg; break;
        case OPT_LIST: list = true; break;
        case OPT_THREADS: fp4s_set_threads((int)cli_parse_int("--threads", optarg, 1, 4096)); break;
        case OPT_REF: fp4s_kernels_force_ref(true); break;
        case OPT_CHUNK: chunk_rows = cli_parse_int("--chunk-rows", optarg, 1, 1LL << 40); break;
        case OPT_GZIP: gzip = (int)cli_parse_int("--gzip", optarg, 0, 9); break;
        case OPT_SHOW: show = cli_parse_int("--show", optarg, 0, 10000); break;
        case CLI_OPT_FORCE: cli_force(); break;
        case OPT_HELP: usage(); return 0;
        case OPT_VERSION: cli_version(); return 0;
        default: cli_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (list) return list_profiles(json) ? FP4S_EXIT_OUTPUT : 0;
    if (optind >= argc) cli_usage("missing INPUT");
    if (optind + 1 < argc) cli_usage("one INPUT expected, got %d ('%s' ...)", argc - optind, argv[optind + 1]);
    const char *input = argv[optind];

    fp4s_format fmt;
    if (fp4s_format_parse(fmt_s, &fmt))
        cli_usage("-f: expected %s, got '%s'", names(FP4S_NAMES_FORMAT, ", ", " or ", alts, sizeof alts), fmt_s);
    /* rules that the format does not have are a usage error, not silently ignored */
    if (fmt != FP4S_MXFP4 && ov.mx_rule >= 0) cli_usage("--scale-rule applies to mxfp4 only");
    if (fmt != FP4S_MXFP4 && ov.zero_block >= 0) cli_usage("--zero-block-code applies to mxfp4 only");
    if (fmt != FP4S_NVFP4 && (ov.global_scale >= 0 || ov.recipe >= 0 || ov.tile2d >= 0))
        cli_usage("--global-scale, --recipe, --2d and --1d apply to nvfp4 only");
    if (fmt != FP4S_FP8 && ov.fp8_gran >= 0) cli_usage("--fp8-gran applies to fp8 only");
    if (fmt == FP4S_FP8 && ov.packing >= 0) cli_usage("--packing applies to the 4-bit formats only");
    if (!profile) profile = fp4s_default_profile(fmt);
    run_t r1 = {0}, r2 = {0};
    make_spec(&r1.spec, fmt, profile, &ov, "-p");
    bool diff = diff_profile != NULL;
    if (diff) make_spec(&r2.spec, fmt, diff_profile, NULL, "--diff");

    /* every output checked against the input and each other before any work */
    const char *paths[4] = {out.out_h5, out.codes, out.scales, out.dequant};
    cli_input(input);
    for (int i = 0; i < 4; i++)
        if (paths[i]) cli_output(paths[i]);

    fp4s_source *src;
    int rc = fp4s_source_open(input, &src);
    if (rc) cli_fail(rc);
    size_t rows = fp4s_source_rows(src), cols = fp4s_source_cols(src);
    int rank = fp4s_source_rank(src);
    fp4s_dtype in_dt = fp4s_source_dtype(src);
    size_t blk = r1.spec.block, pcols = cols;
    /* -o with split packing groups 32 elements per 16 bytes: pad to that */
    size_t pad_to = (out.out_h5 && r1.spec.packing == FP4S_PACK_SPLIT && blk < 32) ? 32 : blk;
    char shape[64];
    if (rank == 1) snprintf(shape, sizeof shape, "(%zu,)", cols);
    else snprintf(shape, sizeof shape, "(%zu, %zu)", rows, cols);
    if (cols % blk) {
        if (!pad) {
            fp4s_source_close(&src);
            cli_die(FP4S_EXIT_INPUT, "%s: shape %s: last dimension %zu is not a multiple of the %s block size %zu "
                    "(use --pad to zero-pad it to %zu)", input, shape, cols, fp4s_format_name(fmt), blk,
                    (cols + blk - 1) / blk * blk);
        }
    }
    if (pad) pcols = (cols + pad_to - 1) / pad_to * pad_to;
    if (pcols % pad_to) {
        fp4s_source_close(&src);
        cli_die(FP4S_EXIT_INPUT, "%s: shape %s: -o with split nibble packing needs a last dimension that is a "
                "multiple of 32, not %zu (use --packing pairs, or --pad to zero-pad it to %zu)", input, shape,
                cols, (cols + 31) / 32 * 32);
    }

    /* chunking */
    size_t align = fp4s_spec_row_align(&r1.spec);
    if (diff) {
        size_t a2 = fp4s_spec_row_align(&r2.spec);
        if (a2 > align) align = a2;
        if (align % a2) align *= a2;
    }
    size_t chunk = chunk_rows ? (size_t)chunk_rows : ((size_t)1 << 20) / pcols;
    if (chunk < 1) chunk = 1;
    chunk = (chunk + align - 1) / align * align;
    if (chunk > rows) chunk = rows;
    /* two input buffers: one read while the other is quantized */
    float *xb[2] = {xcalloc(chunk, pcols * sizeof(float)), xcalloc(chunk, pcols * sizeof(float))};
    job rd = {.fn = read_fn, .src = src, .pcols = pcols, .h5 = !ends_with(input, ".npy") &&
              !strstr(input, ".safetensors")}; /* padding columns stay zero */

    /* pass 1: amax */
    float amax = 0.0f;
    if (needs_amax(&r1.spec) || (diff && needs_amax(&r2.spec))) {
        rd.buf = xb[0], rd.r0 = 0, rd.n = chunk;
        job_start(&rd);
        for (size_t r0 = 0, k = 0; r0 < rows; r0 += chunk, k ^= 1) {
            size_t n = rows - r0 < chunk ? rows - r0 : chunk;
            rc = job_wait(&rd);
            if (rc) cli_fail(rc);
            if (r0 + n < rows) {
                rd.buf = xb[k ^ 1], rd.r0 = r0 + n, rd.n = rows - rd.r0 < chunk ? rows - rd.r0 : chunk;
                job_start(&rd);
            }
            amax = fmaxf(amax, fp4s_amax(xb[k], n, pcols, pcols, NULL));
        }
    }
    rc = fp4s_tscale_init(&r1.spec, amax, &r1.ts);
    if (!rc && diff) rc = fp4s_tscale_init(&r2.spec, amax, &r2.ts);
    if (rc) cli_fail(rc);

    bool need_deq = diff || out.dequant;
    run_alloc(&r1, chunk, rows, pcols, need_deq);
    if (diff) run_alloc(&r2, chunk, rows, pcols, true);
    out.bufs[0] = xb[0];
    out.bufs[1] = xb[1];
    out.runs[0] = &r1;
    out.runs[1] = &r2;

    /* open every output now: unwritable paths fail before any work */
    if (out.out_h5) {
        fp4s_qfile_opts qo;
        fp4s_qfile_opts_defaults(&qo);
        qo.source = input;
        qo.source_cols = cols;
        qo.source_rank = rank;
        qo.gzip = gzip;
        qo.tool = "fp4-quant";
        rc = fp4s_qfile_create(out.out_h5, &r1.spec, &r1.ts, rows, pcols, &qo, &out.qf);
        if (rc) fail_out(&out, rc);
    }
    if (out.codes) {
        rc = rank == 1 ? fp4s_npy_writer_open(out.codes, FP4S_DT_U8, 1, cols, 0, &out.wc)
                       : fp4s_npy_writer_open(out.codes, FP4S_DT_U8, 2, rows, cols, &out.wc);
        if (rc) fail_out(&out, rc);
    }
    size_t srows_total = 0;
    if (out.scales) {
        if (is_fp4(&r1.spec)) {
            srows_total = rows;
            rc = fp4s_npy_writer_open(out.scales, FP4S_DT_U8, 2, rows, r1.scale_cols, &out.ws);
        } else {
            size_t tr = fp8_tile_rows(&r1.spec, rows);
            srows_total = r1.spec.fp8_gran == FP4S_FP8_TENSOR ? 1 : (rows + tr - 1) / tr;
            rc = fp4s_npy_writer_open(out.scales, FP4S_DT_F32, 2, srows_total, r1.scale_cols, &out.ws);
        }
        if (rc) fail_out(&out, rc);
    }
    if (out.dequant) {
        rc = rank == 1 ? fp4s_npy_writer_open(out.dequant, FP4S_DT_F32, 1, cols, 0, &out.wd)
                       : fp4s_npy_writer_open(out.dequant, FP4S_DT_F32, 2, rows, cols, &out.wd);
        if (rc) fail_out(&out, rc);
    }

    diffacc da = {0};
    da.show = (size_t)show;
    da.pos = xcalloc(da.show + 1, sizeof *da.pos);
    da.cpos = xcalloc(da.show + 1, sizeof *da.cpos);
    da.rpos = xcalloc(da.show + 1, sizeof *da.rpos);
    uint8_t *crop8 = pcols != cols && out.codes ? xcalloc(chunk, cols) : NULL;
    float *cropf = pcols != cols && out.dequant ? xcalloc(chunk, cols * sizeof(float)) : NULL;
    void *bufs[] = {xb[0], xb[1], da.pos, da.cpos, da.rpos, crop8, cropf};
    memcpy(out.bufs, bufs, sizeof bufs);

    /* pass 2: quantize chunk by chunk; two banks of outputs, one written while
     * the other is filled */
    uint8_t *cb[2] = {r1.codes, xcalloc(chunk, pcols)}, *sb[2] = {r1.scales, NULL};
    float *fb[2] = {r1.sf32, NULL}, *db[2] = {r1.deq, NULL};
    if (r1.scales) sb[1] = xcalloc(chunk, r1.scale_cols);
    if (r1.sf32) fb[1] = xcalloc(r1.sf_rows_chunk * r1.scale_cols, sizeof(float));
    if (r1.deq) db[1] = xcalloc(chunk * pcols, sizeof(float));
    /* the second bank goes with the other buffers on a failure (r1 then holds the first) */
    out.bufs[7] = cb[1], out.bufs[8] = sb[1], out.bufs[9] = fb[1], out.bufs[10] = db[1];
    job wr = {.fn = write_fn, .out = &out, .r = &r1, .crop8 = crop8, .cropf = cropf, .rank = rank,
              .rows = rows, .cols = cols, .pcols = pcols, .h5 = out.qf != NULL};
/* an error while a write may be running: let it end before the outputs go */
#define FAIL_PIPE(rc_)                                                  \
    do {                                                                \
        int rc__ = (rc_);                                               \
        char keep__[1024];                                              \
        snprintf(keep__, sizeof keep__, "%s", fp4s_last_error());       \
        job_wait(&wr);                                                  \
        job_wait(&rd);                                                  \
        r1.codes = cb[0], r1.scales = sb[0], r1.sf32 = fb[0], r1.deq = db[0]; \
        fail_out(&out, fp4s_error_set(rc__, "%s", keep__));             \
    } while (0)
    rd.buf = xb[0], rd.r0 = 0, rd.n = chunk;
    job_start(&rd);
    for (size_t r0 = 0, k = 0; r0 < rows; r0 += chunk, k ^= 1) {
        size_t n = rows - r0 < chunk ? rows - r0 : chunk;
        rc = job_wait(&rd);
        if (rc) FAIL_PIPE(rc);
        float *x = xb[k];
        if (r0 + n < rows) {
            rd.buf = xb[k ^ 1], rd.r0 = r0 + n, rd.n = rows - rd.r0 < chunk ? rows - rd.r0 : chunk;
            job_start(&rd);
        }
        r1.codes = cb[k], r1.scales = sb[k], r1.sf32 = fb[k], r1.deq = db[k];
        rc = run_chunk(&r1, x, n, pcols, r0);
        if (rc) FAIL_PIPE(rc);
        if (diff) {
            rc = run_chunk(&r2, x, n, pcols, r0);
            if (rc) FAIL_PIPE(rc);
            diff_chunk(&da, &r1, &r2, x, n, pcols, cols, r0);
        }
        rc = job_wait(&wr); /* the previous chunk's write */
        if (rc) FAIL_PIPE(rc);
        wr.codes = cb[k], wr.scales = sb[k], wr.sf32 = fb[k], wr.deq = db[k], wr.r0 = r0, wr.n = n;
        job_start(&wr);
    }
    rc = job_wait(&wr);
    if (rc) FAIL_PIPE(rc);
#undef FAIL_PIPE
    r1.codes = cb[0], r1.scales = sb[0], r1.sf32 = fb[0], r1.deq = db[0];
    free(cb[1]);
    free(sb[1]);
    free(fb[1]);
    free(db[1]);
    out.bufs[7] = out.bufs[8] = out.bufs[9] = out.bufs[10] = NULL;
    fp4s_source_close(&src);
    (void)srows_total;

    /* finish every output, then commit them together: all or none */
    const char *done[4];
    int ndone = 0;
    if (out.qf) {
        rc = fp4s_qfile_set_stats(out.qf, &r1.st);
        if (!rc) rc = fp4s_qfile_close(&out.qf);
        if (rc) fail_out(&out, rc);
        done[ndone++] = out.out_h5;
    }
    fp4s_npy_writer **ws[3] = {&out.wc, &out.ws, &out.wd};
    const char *wn[3] = {out.codes, out.scales, out.dequant};
    for (int i = 0; i < 3; i++) {
        if (!*ws[i]) continue;
        rc = fp4s_npy_writer_close(ws[i]);
        if (rc) fail_out(&out, rc);
        done[ndone++] = wn[i];
    }
    if ((rc = cli_commit()) != 0) {
        outputs_abort(&out);
        return rc;
    }

    /* ---- report (none when an output went to stdout) ---- */
    uint64_t nblocks = r1.st.blocks;
    bool to_stdout = false;
    for (int i = 0; i < 4; i++)
        if (paths[i] && strcmp(paths[i], "-") == 0) to_stdout = true;
    if (to_stdout) {
        rc = 0;
    } else if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "input", json_string(input));
        json_object_set_new(j, "dtype", json_string(fp4s_dtype_name(in_dt)));
        json_t *sh = json_array();
        if (rank == 2) json_array_append_new(sh, json_integer((json_int_t)rows));
        json_array_append_new(sh, json_integer((json_int_t)cols));
        json_object_set_new(j, "shape", sh);
        json_object_set_new(j, "padded_cols", json_integer((json_int_t)(pcols - cols)));
        json_object_set_new(j, "format", json_string(fp4s_format_name(fmt)));
        json_object_set_new(j, "profile", json_string(r1.spec.profile));
        json_object_set_new(j, "rules", spec_json(&r1.spec));
        json_object_set_new(j, "block", json_integer((json_int_t)blk));
        json_t *st = stats_json(&r1);
        json_object_update(j, st);
        json_decref(st);
        json_object_set_new(j, "kernels", json_string(fp4s_kernels_level()));
        json_object_set_new(j, "threads", json_integer(fp4s_get_threads()));
        if (diff) {
            json_t *d = json_object();
            json_object_set_new(d, "profile", json_string(r2.spec.profile));
            json_object_set_new(d, "rules", spec_json(&r2.spec));
            json_t *s2 = stats_json(&r2);
            json_object_update(d, s2);
            json_decref(s2);
            json_object_set_new(d, "scale_layouts_differ", json_boolean(da.scale_layouts_differ));
            json_object_set_new(d, "scale_codes_compared", json_integer((json_int_t)da.scales_total));
            json_object_set_new(d, "scale_codes_differ", json_integer((json_int_t)da.scales_diff));
            json_object_set_new(d, "scale_codes_differ_fraction", cli_json_real(da.scales_total ? (double)da.scales_diff / (double)da.scales_total : 0));
            if (da.have_scale_first) {
                json_t *fs = json_object();
                json_object_set_new(fs, "row", json_integer((json_int_t)da.scale_first_row));
                json_object_set_new(fs, "block", json_integer((json_int_t)da.scale_first_blk));
                json_object_set_new(d, "first_scale_difference", fs);
            } else {
                json_object_set_new(d, "first_scale_difference", json_null());
            }
            json_object_set_new(d, "element_codes_compared", json_integer((json_int_t)da.elems_total));
            json_object_set_new(d, "element_codes_differ", json_integer((json_int_t)da.elems_diff));
            json_object_set_new(d, "element_codes_differ_fraction", cli_json_real(da.elems_total ? (double)da.elems_diff / (double)da.elems_total : 0));
            json_object_set_new(d, "dequant_values_differ", json_integer((json_int_t)da.deq_diff));
            json_object_set_new(d, "dequant_values_differ_rounding_only", json_integer((json_int_t)da.deq_rounding));
            json_object_set_new(d, "nan_mismatch", json_integer((json_int_t)da.nan_mismatch));
            json_t *mx = json_object();
            json_object_set_new(mx, "abs", cli_json_real(da.have_max ? da.max_abs : 0.0));
            if (da.have_max) {
                json_object_set_new(mx, "row", json_integer((json_int_t)da.max_row));
                json_object_set_new(mx, "col", json_integer((json_int_t)da.max_col));
                json_object_set_new(mx, "x", cli_json_real(da.max_x));
                json_object_set_new(mx, "a", cli_json_real(da.max_d1));
                json_object_set_new(mx, "b", cli_json_real(da.max_d2));
            }
            json_object_set_new(d, "max_dequant_diff", mx);
            json_object_set_new(d, "first_differences", pos_json(da.pos, da.npos));
            json_object_set_new(d, "first_rounding_only_differences", pos_json(da.rpos, da.nrpos));
            json_object_set_new(d, "first_code_only_differences", pos_json(da.cpos, da.ncpos));
            json_object_set_new(j, "diff", d);
        }
        json_t *o = json_object();
        if (out.out_h5) json_object_set_new(o, "h5", json_string(out.out_h5));
        if (out.codes) json_object_set_new(o, "codes", json_string(out.codes));
        if (out.scales) json_object_set_new(o, "scales", json_string(out.scales));
        if (out.dequant) json_object_set_new(o, "dequant", json_string(out.dequant));
        json_object_set_new(j, "outputs", o);
        rc = cli_json_print(j);
    } else {
        char a[256], b[128];
        const char *pn1 = r1.spec.profile, *pn2 = diff ? r2.spec.profile : NULL;
        if (diff)
            printf("fp4-quant: %s through two %s profiles, %s vs %s\n", input, fp4s_format_name(fmt), pn1, pn2);
        else
            printf("fp4-quant: %s as %s, profile %s\n", input, fp4s_format_name(fmt), pn1);
        print_row("shape", shape, NULL);
        print_row("stored dtype", fp4s_dtype_name(in_dt), NULL);
        if (pcols != cols) {
            snprintf(a, sizeof a, "%zu zero columns added (last dim %zu -> %zu)", pcols - cols, cols, pcols);
            print_row("padding", a, NULL);
        }
        if (fmt == FP4S_FP8)
            snprintf(a, sizeof a, "%llu scale tiles (%s)", (unsigned long long)nblocks, fp4s_fp8_gran_name(r1.spec.fp8_gran));
        else
            snprintf(a, sizeof a, "%llu blocks of %zu", (unsigned long long)nblocks, blk);
        print_row("blocks", a, NULL);
        snprintf(a, sizeof a, "%.9g", (double)r1.ts.amax);
        if (needs_amax(&r1.spec) || (diff && needs_amax(&r2.spec))) print_row("tensor amax", a, NULL);
        snprintf(a, sizeof a, "%llu (NaN %llu, Inf %llu) in %llu blocks", (unsigned long long)r1.st.nonfinite,
                 (unsigned long long)r1.st.nan, (unsigned long long)r1.st.inf, (unsigned long long)r1.st.nonfinite_blocks);
        print_row("non-finite inputs", a, NULL);
        printf("\n");
        if (diff) print_row("", pn1, pn2);
        else print_row("rules", "", NULL);
        rules_rows(&r1.spec, diff ? &r2.spec : NULL);
        stats_rows(&r1, diff ? &r2 : NULL);
        if (diff) {
            printf("\n  where they disagree\n");
            if (da.scale_layouts_differ) {
                snprintf(a, sizeof a, "not comparable (%s vs %s tiles)", fp4s_fp8_gran_name(r1.spec.fp8_gran),
                         fp4s_fp8_gran_name(r2.spec.fp8_gran));
                print_row("scales differing", a, NULL);
            } else {
                print_row(fmt == FP4S_FP8 ? "scales differing" : "scale codes differing",
                          fmt_count(a, sizeof a, da.scales_diff, da.scales_total), NULL);
                snprintf(b, sizeof b, "of %llu %s", (unsigned long long)da.scales_total, fmt == FP4S_FP8 ? "tiles" : "blocks");
                printf("  %-28s %s\n", "", b);
                if (da.have_scale_first) {
                    snprintf(b, sizeof b, "first at row %llu, block %llu (cols %llu..%llu)",
                             (unsigned long long)da.scale_first_row, (unsigned long long)da.scale_first_blk,
                             (unsigned long long)(da.scale_first_blk * blk),
                             (unsigned long long)(da.scale_first_blk * blk + blk - 1));
                    printf("  %-28s %s\n", "", b);
                }
            }
            print_row("element codes differing", fmt_count(a, sizeof a, da.elems_diff, da.elems_total), NULL);
            snprintf(b, sizeof b, "of %llu elements", (unsigned long long)da.elems_total);
            printf("  %-28s %s\n", "", b);
            print_row("dequantized values differ", fmt_count(a, sizeof a, da.deq_diff, da.elems_total), NULL);
            if (da.deq_rounding) {
                snprintf(b, sizeof b, "%llu of them only in the last bits: same code and scale,",
                         (unsigned long long)da.deq_rounding);
                printf("  %-28s %s\n", "", b);
                printf("  %-28s %s\n", "", "the profiles multiply in another float order");
            }
            if (da.nan_mismatch) print_row("NaN in one only", fmt_count(a, sizeof a, da.nan_mismatch, da.elems_total), NULL);
            if (da.have_max) {
                snprintf(a, sizeof a, "%.6g at (row %zu, col %zu)", da.max_abs, da.max_row, da.max_col);
                print_row("largest |dequant diff|", a, NULL);
                snprintf(a, sizeof a, "x = %.6g: %s gives %.6g, %s gives %.6g", (double)da.max_x, pn1, (double)da.max_d1,
                         pn2, (double)da.max_d2);
                printf("  %-28s %s\n", "", a);
            } else {
                print_row("largest |dequant diff|", "0 (identical dequantized values)", NULL);
            }
            printf("\n  (code: %s)\n", fmt == FP4S_FP8 ? "the E4M3 byte" : "E2M1 0..15, sign in bit 3");
            for (int pass = 0; pass < 3; pass++) {
                const diffpos *pos = pass == 0 ? da.pos : pass == 1 ? da.cpos : da.rpos;
                size_t np = pass == 0 ? da.npos : pass == 1 ? da.ncpos : da.nrpos;
                /* the later lists only while the first leaves room */
                if (!np || (pass && da.npos >= da.show)) continue;
                if (pass == 2 && da.ncpos) continue;
                if (pass == 0)
                    printf("  first elements whose values differ through their code or scale\n");
                else if (pass == 1)
                    printf("  first elements with different codes but the same value (their scales differ too)\n");
                else
                    printf("  first elements whose values differ only in the last bits\n");
                char h1[48], h2[48];
                snprintf(h1, sizeof h1, "%s code value", pn1);
                snprintf(h2, sizeof h2, "%s code value", pn2);
                printf("  %6s %6s %13s  %20s  %20s %12s\n", "row", "col", "x", h1, h2, "difference");
                for (size_t i = 0; i < np; i++) {
                    char c1[8], c2[8];
                    double dd = (double)pos[i].d1 - (double)pos[i].d2;
                    printf("  %6zu %6zu %13.7g  %6s %13.7g  %6s %13.7g %12.6g\n", pos[i].row, pos[i].col,
                           (double)pos[i].x, code_str(&r1.spec, pos[i].c1, c1, sizeof c1), (double)pos[i].d1,
                           code_str(&r2.spec, pos[i].c2, c2, sizeof c2), (double)pos[i].d2, dd);
                }
            }
            if (!da.scale_layouts_differ && da.scales_diff == 0 && da.elems_diff == 0 && da.deq_diff == 0)
                printf("\n  in short: %s and %s agree on every %s and element code of this tensor", pn1, pn2,
                       fmt == FP4S_FP8 ? "tile scale" : "block scale");
            else if (da.scale_layouts_differ)
                printf("\n  in short: %s and %s differ in %.4g%% of the dequantized values", pn1, pn2,
                       pct(da.deq_diff - da.deq_rounding, da.elems_total));
            else
                printf("\n  in short: %s and %s differ in %.4g%% of the %s and %.4g%% of the dequantized values",
                       pn1, pn2, pct(da.scales_diff, da.scales_total), fmt == FP4S_FP8 ? "tile scales" : "block scales",
                       pct(da.deq_diff - da.deq_rounding, da.elems_total));
            if (da.have_max) printf(" (by up to %.6g)", da.max_abs);
            if (da.deq_rounding)
                printf(",\n  plus %.4g%% only in the last bits", pct(da.deq_rounding, da.elems_total));
            printf(";\n  relative error %.6g vs %.6g\n", rel_err(&r1.st), rel_err(&r2.st));
        }
        if (ndone) {
            printf("\n");
            for (int i = 0; i < ndone; i++) print_row(i ? "" : "written", done[i], NULL);
        }
        rc = cli_stdout_flush();
    }
    free(xb[0]);
    free(xb[1]);
    free(da.pos);
    free(da.cpos);
    free(da.rpos);
    free(crop8);
    free(cropf);
    run_free(&r1);
    run_free(&r2);
    return rc;
}
