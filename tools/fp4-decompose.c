/* fp4-decompose: split 4-bit quantization error into scale bias, dead zone and
 * grid noise, per tensor, block, row or channel, over one or many inputs. */
#include "cli.h"
#include "suggest.h"
#include "par.h"
#include "out/out.h"

#include <fp4scope/capture.h>
#include <fp4scope/decompose.h>
#include <fp4scope/spec.h>
#include <fp4scope/tensor.h>
#include <fp4scope/units.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-decompose [OPTION]... INPUT...\n"
        "Split the 4-bit quantization error e = Q(x) - x of each INPUT into scale bias,\n"
        "dead zone and grid noise (and e_scale into rounding, clipping and underflow).\n"
        "\n"
        "INPUT is file.npy, file.safetensors:NAME, file.h5:/dataset, or with --sites or\n"
        "--steps a capture file (fp4scope-capture/1) whose selected datasets are all used.\n"
        "\n"
        "Quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        "      --by G            tensor (default), block, row or channel groups\n"
        CLI_HELP_DZ_TIE
        "      --sites GLOB      capture sites to use (fnmatch; default all)\n"
        "      --steps LIST      capture steps, e.g. 0,5,10-20 or 0:100:10 (default all)\n"
        "      --sides LIST      capture sides: trainer,rollout,weight (default all three)\n"
        "      --json            JSON on stdout\n"
        "      --csv             CSV on stdout (one line per input, group and roll-up)\n"
        "  -o, --output FILE     also write an HDF5 report (layout in fp4-decompose(1))\n"
        "      --force           replace an existing HDF5 output (the man page, FILES)\n"
        "      --quiet           no progress line on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        "      --chunk N         elements per read chunk (default 2097152, 16777216 on the GPU)\n"
        "      --keep MIB|auto   NVFP4: MiB of the input kept from the amax pass so that it is\n"
        "                        read once (0: read it twice; default auto: 0 when the input\n"
        "                        is in the page cache, else 2048)\n"
        "      --device DEV      cpu (default), cuda or auto (the GPU when one is usable);\n"
        "                        list: what this build and machine can do\n"
        "      --show N          groups listed per input in the table (default 20, 0 = all)\n"
        "      --help            show this help and exit\n"
        "      --version         show version and features and exit\n"
        "\n"
        "Exit status: 0 ok, 2 usage (also --device cuda where the GPU cannot run),\n"
        "3 input unreadable or malformed or empty selection, 4 output not written,\n"
        "5 internal error.\n");
}

enum {
    OPT_FIRST_ = 256, OPT_BY, OPT_SIDES, OPT_KEEP, OPT_SHOW
};

/* step, site and side of "file.h5:/steps/<step>/<site>/<side>" (a capture
 * dataset addressed by path, as --sites would select it). */
static void capture_path_parts(const char *spec, int64_t *step, char **site, char **side)
{
    const char *p = strstr(spec, ":/steps/");
    if (!p) return;
    char *end;
    long long st = strtoll(p + 8, &end, 10);
    if (end == p + 8 || *end != '/') return;
    const char *s1 = end + 1, *s2 = strrchr(s1, '/');
    if (!s2 || s2 == s1 || !s2[1] || strchr(s2 + 1, ':')) return;
    if (strcmp(s2 + 1, "trainer") && strcmp(s2 + 1, "rollout") && strcmp(s2 + 1, "weight")) return;
    *step = st;
    *site = strndup(s1, (size_t)(s2 - s1));
    *side = xstrdup(s2 + 1);
}

typedef struct item {
    char *source;    /* source spec string */
    char *label;     /* what the user named: INPUT or capture entry */
    int64_t step;    /* -1 none */
    char *site, *side;
    bool synthetic;
    size_t rows, cols;
    fp4s_decomp *acc;
} item;

/* The file part of a source spec: before the last ':' when that names a file. */
static char *file_part(const char *spec)
{
    char *f = xstrdup(spec);
    if (access(f, F_OK) == 0) return f;
    char *c = strrchr(f, ':');
    if (c) *c = '\0';
    return f;
}

static bool side_wanted(const char *sides, const char *side)
{
    if (!sides) return !strcmp(side, "trainer") || !strcmp(side, "rollout") || !strcmp(side, "weight");
    return cli_list_has(sides, side);
}

static json_t *hist_json(const fp4s_decomp *acc, fp4s_decomp_hist_kind k)
{
    fp4s_decomp_hist h;
    fp4s_decomp_hist_get(acc, k, &h);
    json_t *o = json_object(), *e = json_array(), *c = json_array();
    for (int i = 0; i <= FP4S_HIST_BINS; i++)
        json_array_append_new(e, json_real(h.lo + (h.hi - h.lo) * i / FP4S_HIST_BINS));
    for (int i = 0; i < FP4S_HIST_BINS; i++) json_array_append_new(c, json_integer((json_int_t)h.counts[i]));
    json_object_set_new(o, "edges", e);
    json_object_set_new(o, "counts", c);
    return o;
}

static void csv_row(const char *kind, long long input, const item *it, long long group,
                    const fp4s_decomp_result *r)
{
    printf("%s,", kind);
    if (input >= 0) printf("%lld", input);
    putchar(',');
    if (it) cli_csv_str(it->label);
    putchar(',');
    if (it && it->step >= 0) printf("%lld", (long long)it->step);
    putchar(',');
    if (it && it->site) cli_csv_str(it->site);
    putchar(',');
    if (it && it->side) cli_csv_str(it->side);
    putchar(',');
    if (group >= 0) printf("%lld", group);
    out_csv_record(fp4s_rtype_decomp_result(), r);
    putchar('\n');
}

static void pct(char *buf, size_t n, double v)
{
    if (isfinite(v)) snprintf(buf, n, "%8.2f%%", 100.0 * v);
    else snprintf(buf, n, "%9s", "-");
}

static void num(char *buf, size_t n, double v, const char *fmt)
{
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "%s", isnan(v) ? "-" : (v > 0 ? "inf" : "-inf"));
}

/* Whether the inputs' block scales clamped at 448 are counted and worth a
 * line: NVFP4 with a static input scale (the only case where a block can
 * clamp), decomposed on the CPU (decompose.h: the GPU does not count them). */
static bool clamps_counted(const fp4s_spec *s, const fp4s_decomp *acc)
{
    return s->format == FP4S_NVFP4 && s->nv_input_scale > 0 && fp4s_decomp_device(acc) == FP4S_DEVICE_CPU;
}

static void human_result(const fp4s_decomp_result *r, bool blockstats, bool clamps)
{
    char a[32], b[32], m[32];
    num(a, sizeof a, r->relative_error, "%.4g");
    num(b, sizeof b, r->snr_db, "%.2f");
    num(m, sizeof m, r->mean_abs_error, "%.4g");
    printf("  elements %llu   relative error %s   SNR %s dB   mean |e| %s\n", (unsigned long long)r->n, a, b, m);
    printf("  %-28s %14s %10s\n", "component", "energy [x^2]", "of ||e||^2");
    struct { const char *n; double e; } rows[] = {
        {"total ||e||^2", r->energy_total},
        {"scale ||e_scale||^2", r->energy_scale},
        {"  rounding part", r->energy_scale_round},
        {"  clipping part", r->energy_scale_clip},
        {"  underflow part", r->energy_scale_underflow},
        {"dead zone ||e_dz||^2", r->energy_deadzone},
        {"grid ||e_grid||^2", r->energy_grid},
        {"cross 2<e_scale,e_grid>", r->cross_scale_grid},
        {"cross 2<e_scale,e_dz>", r->cross_scale_deadzone},
        {"cross 2<e_dz,e_grid>", r->cross_deadzone_grid},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        num(a, sizeof a, rows[i].e, "%14.6g");
        pct(b, sizeof b, r->energy_total > 0 ? rows[i].e / r->energy_total : NAN);
        printf("  %-28s %14s %10s\n", rows[i].n, a, b);
    }
    num(a, sizeof a, r->cos_scale_grid, "%.4f");
    printf("  cos(e_scale, e_grid) %s   ||x||^2 %.6g   amax %.6g\n", a, r->energy_x, r->amax);
    pct(a, sizeof a, r->ratio_removable);
    printf("  removable by a perfect scale (1 - dead zone - grid) %s of ||e||^2\n", a);
    pct(a, sizeof a, r->deadzone_fraction);
    pct(b, sizeof b, r->clip_fraction);
    printf("  dead zone %s of elements (%llu, %llu ties at 0.25, %llu zeros)   clipped %s (%llu)\n", a,
           (unsigned long long)r->deadzone, (unsigned long long)r->deadzone_ties,
           (unsigned long long)r->zeros, b, (unsigned long long)r->clipped);
    if (blockstats) {
        char g1[32], g2[32], g3[32], g4[32], d1[32], d2[32], d3[32], d4[32];
        num(g1, 32, r->gamma_mean, "%.4f");
        num(g2, 32, r->gamma_std, "%.4f");
        num(g3, 32, r->gamma_min, "%.4f");
        num(g4, 32, r->gamma_max, "%.4f");
        num(d1, 32, r->delta_mean, "%.4f");
        num(d2, 32, r->delta_std, "%.4f");
        num(d3, 32, r->delta_min, "%.4f");
        num(d4, 32, r->delta_max, "%.4f");
        printf("  blocks %llu (%llu all-zero)   gamma = s/s*: mean %s std %s min %s max %s\n",
               (unsigned long long)r->blocks, (unsigned long long)r->zero_blocks, g1, g2, g3, g4);
        pct(a, sizeof a, r->underflow_fraction);
        printf("  delta = log2 gamma: mean %s std %s min %s max %s   scale underflow %s of blocks (%llu)\n",
               d1, d2, d3, d4, a, (unsigned long long)r->underflow_blocks);
        if (clamps) {
            pct(a, sizeof a, r->blocks ? (double)r->scale_clamped / (double)r->blocks : NAN);
            printf("  block scales clamped at 448 (unrounded scale > 464) %s of blocks (%llu)\n", a,
                   (unsigned long long)r->scale_clamped);
        }
    }
    num(a, sizeof a, r->max_residual, "%.3g");
    num(b, sizeof b, r->identity_residual, "%.3g");
    printf("  check: worst element residual %s, energy identity residual %s\n", a, b);
    if (r->nonfinite || r->nonfinite_output)
        printf("  non-finite: %llu NaN, %llu Inf; %llu blocks excluded (%llu finite elements), %llu blocks with non-finite Q(x)\n",
               (unsigned long long)r->nan, (unsigned long long)r->inf,
               (unsigned long long)r->nonfinite_blocks, (unsigned long long)r->excluded,
               (unsigned long long)r->nonfinite_output);
}

/* --keep: MiB, or -1 for auto */
static long long parse_keep(const char *arg)
{
    const long long hi = (long long)1 << 30;
    if (!strcmp(arg, "auto")) return -1;
    if (!*arg || arg[strspn(arg, "0123456789")])
        cli_usage("--keep: expected auto or an integer in [0, %lld], got '%s'", hi, arg);
    return cli_parse_int("--keep", arg, 0, hi);
}

/* ---- per expert and per layer: the inputs of each (layer, expert, side), or
 * of each (layer, side), of a capture merged ---- */
typedef struct pool_acc {
    int64_t layer, expert; /* expert -1 in the per-layer view; layer -1: the site names none */
    const char *side;
    size_t inputs;
    fp4s_decomp *acc;
} pool_acc;

static int cmp_pool_acc(const void *a, const void *b)
{
    const pool_acc *x = a, *y = b;
    if (x->layer != y->layer) { /* sites that name no layer last */
        if (x->layer < 0 || y->layer < 0) return x->layer < 0 ? 1 : -1;
        return x->layer < y->layer ? -1 : 1;
    }
    if (x->expert != y->expert) return x->expert < y->expert ? -1 : 1;
    return strcmp(x->side, y->side);
}

/* by_expert: the inputs whose site names an expert, merged per (layer,
 * expert, side); else every input of a capture site merged per (layer, side),
 * none when no site names a layer. Tensor-grouped accumulators of spec s:
 * *nout of them, sorted by layer. */
static pool_acc *pool_merge(const item *items, size_t n, const fp4s_spec *s, const fp4s_decomp_opts *o,
                            bool by_expert, size_t *nout)
{
    pool_acc *v = NULL;
    size_t ne = 0;
    *nout = 0;
    if (!by_expert) {
        bool any_layer = false;
        for (size_t i = 0; i < n; i++)
            any_layer |= items[i].site && items[i].side && cli_site_layer(items[i].site) >= 0;
        if (!any_layer) return NULL;
    }
    fp4s_decomp_opts eo = *o;
    eo.by = FP4S_GROUP_TENSOR;
    for (size_t i = 0; i < n; i++) {
        if (!items[i].site || !items[i].side) continue;
        int64_t e = by_expert ? cli_site_index(items[i].site, "experts") : -1;
        if (by_expert && e < 0) continue;
        int64_t l = cli_site_layer(items[i].site);
        size_t j = 0;
        while (j < ne && (v[j].layer != l || v[j].expert != e || strcmp(v[j].side, items[i].side))) j++;
        if (j == ne) {
            v = xrealloc(v, (ne + 1) * sizeof *v);
            v[j] = (pool_acc){l, e, items[i].side, 0, NULL};
            int rc = fp4s_decomp_open(s, NULL, &eo, 0, 0, &v[j].acc);
            if (rc) exit(cli_report(rc));
            ne++;
        }
        v[j].inputs++;
        int rc = fp4s_decomp_merge(v[j].acc, items[i].acc);
        if (rc) exit(cli_report(rc));
    }
    if (ne) qsort(v, ne, sizeof *v, cmp_pool_acc);
    *nout = ne;
    return v;
}

static void pool_free(pool_acc *v, size_t n)
{
    for (size_t i = 0; i < n; i++) fp4s_decomp_close(&v[i].acc);
    free(v);
}

/* The error energy ||e||^2 of every input of a side, summed: what a pooled row's
 * share is of (NaN when there is none). */
static double side_energy(const item *items, size_t n, const char *side)
{
    double e = 0;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (!items[i].side || strcmp(items[i].side, side)) continue;
        fp4s_decomp_result r;
        fp4s_decomp_summary(items[i].acc, &r);
        e += r.energy_total;
        any = true;
    }
    return any ? e : NAN;
}

/* The inputs: each INPUT as it is, or the datasets of each capture that the
 * walker's selection (--sites, --steps) and --sides pick. */
static item *collect_items(char **inputs, int ninputs, const fp4s_unit_select *selp, const char *sides,
                           bool capture_mode, size_t *np)
{
    const fp4s_unit_select sel = *selp;
    int rc;
    size_t cap = 16, n = 0;
    item *items = xcalloc(cap, sizeof *items);
    for (int a = 0; a < ninputs; a++) {
        if (!capture_mode) {
            if (n == cap) {
                cap *= 2;
                items = realloc(items, cap * sizeof *items);
                if (!items) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
            }
            char *fp = file_part(inputs[a]);
            items[n] = (item){xstrdup(inputs[a]), xstrdup(inputs[a]), -1, NULL, NULL,
                              fp4s_decomp_file_synthetic(fp), 0, 0, NULL};
            capture_path_parts(inputs[a], &items[n].step, &items[n].site, &items[n].side);
            free(fp);
            n++;
            continue;
        }
        fp4s_capture_entry *ents = NULL;
        size_t ne = 0;
        rc = fp4s_capture_list_raw(inputs[a], &ents, &ne); /* a site whose sides differ is still decomposed side by side */
        if (rc) exit(cli_report(rc));
        bool syn = fp4s_decomp_file_synthetic(inputs[a]);
        for (size_t i = 0; i < ne; i++) {
            const fp4s_capture_entry *e = &ents[i];
            if (!fp4s_unit_select_match(&sel, e) || !side_wanted(sides, e->side)) continue;
            if (n == cap) {
                cap *= 2;
                items = realloc(items, cap * sizeof *items);
                if (!items) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
            }
            size_t need = fp4s_capture_entry_spec(inputs[a], e, NULL, 0);
            char *sp = malloc(need + 1);
            if (!sp) cli_die(FP4S_EXIT_INTERNAL, "out of memory");
            fp4s_capture_entry_spec(inputs[a], e, sp, need + 1);
            items[n] = (item){sp, xstrdup(sp), e->step, xstrdup(e->site), xstrdup(e->side), syn, e->rows, e->cols,
                              NULL};
            n++;
        }
        free(ents);
    }
    *np = n;
    return items;
}

/* --json: the per-layer or per-expert rows, NULL when there are none. */
static json_t *pool_json(const pool_acc *v, size_t nv, bool by_expert, const item *items, size_t n)
{
    if (!nv) return NULL;
    json_t *a = json_array();
    for (size_t j = 0; j < nv; j++) {
        fp4s_decomp_result r;
        fp4s_decomp_summary(v[j].acc, &r);
        json_t *o = json_object();
        json_object_set_new(o, "layer", v[j].layer >= 0 ? json_integer((json_int_t)v[j].layer) : json_null());
        if (by_expert) json_object_set_new(o, "expert", json_integer((json_int_t)v[j].expert));
        json_object_set_new(o, "side", json_string(v[j].side));
        json_object_set_new(o, "inputs", json_integer((json_int_t)v[j].inputs));
        double tot = side_energy(items, n, v[j].side);
        json_object_set_new(o, "share", cli_json_real(tot > 0 ? r.energy_total / tot : NAN));
        json_object_set_new(o, "summary", cli_decomp_json(&r, NULL));
        json_array_append_new(a, o);
    }
    return a;
}

/* --json: the inputs with their summaries, histograms and groups, the roll-up,
 * the per-layer and per-expert rows. */
static json_t *doc_json(const fp4s_spec *sp, const fp4s_decomp_opts *op, const item *items, size_t n,
                        const fp4s_decomp_result *rrp, const pool_acc *ly, size_t nly, const pool_acc *ex,
                        size_t nex)
{
    const fp4s_spec spec = *sp;
    const fp4s_decomp_opts opts = *op;
    const fp4s_decomp_result rr = *rrp;
    json_t *root = json_object();
    json_object_set_new(root, "tool", json_string("fp4-decompose"));
    json_object_set_new(root, "format", json_string(fp4s_format_name(spec.format)));
    json_object_set_new(root, "profile", json_string(spec.profile));
    json_object_set_new(root, "by", json_string(fp4s_group_name(opts.by)));
    if (spec.format == FP4S_MXFP4)
        json_object_set_new(root, "scale_rule", json_string(fp4s_mx_rule_name(spec.mx_rule)));
    json_object_set_new(root, "dz_tie", json_string(fp4s_dz_tie_name(opts.dz_tie)));
    char desc[512];
    fp4s_spec_describe(&spec, desc, sizeof desc);
    json_object_set_new(root, "spec", json_string(desc));
    json_t *ins = json_array();
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        json_t *o = json_object();
        json_object_set_new(o, "source", json_string(it->label));
        json_object_set_new(o, "step", it->step >= 0 ? json_integer(it->step) : json_null());
        json_object_set_new(o, "site", it->site ? json_string(it->site) : json_null());
        json_object_set_new(o, "side", it->side ? json_string(it->side) : json_null());
        json_object_set_new(o, "synthetic", json_boolean(it->synthetic));
        json_object_set_new(o, "rows", json_integer((json_int_t)it->rows));
        json_object_set_new(o, "cols", json_integer((json_int_t)it->cols));
        fp4s_decomp_result r;
        fp4s_decomp_summary(it->acc, &r);
        json_object_set_new(o, "summary", cli_decomp_json(&r, NULL));
        json_t *h = json_object();
        json_object_set_new(h, "delta", hist_json(it->acc, FP4S_HIST_DELTA));
        json_object_set_new(h, "error", hist_json(it->acc, FP4S_HIST_ERROR));
        json_object_set_new(o, "histograms", h);
        if (opts.by != FP4S_GROUP_TENSOR) {
            json_t *gs = json_array();
            size_t ng = fp4s_decomp_ngroups(it->acc);
            for (size_t g = 0; g < ng; g++) {
                fp4s_decomp_group(it->acc, g, &r);
                json_t *go = json_object();
                json_object_set_new(go, "group", json_integer((json_int_t)g)); /* the CSV's column */
                if (opts.by == FP4S_GROUP_BLOCK) {
                    size_t nb = it->cols / spec.block;
                    json_object_set_new(go, "row", json_integer((json_int_t)(g / nb)));
                    json_object_set_new(go, "block", json_integer((json_int_t)(g % nb)));
                }
                json_array_append_new(gs, cli_decomp_json(&r, go));
            }
            json_object_set_new(o, "groups", gs);
        }
        json_array_append_new(ins, o);
    }
    json_object_set_new(root, "inputs", ins);
    json_object_set_new(root, "rollup", cli_decomp_json(&rr, NULL));
    json_t *la = pool_json(ly, nly, false, items, n);
    if (la) json_object_set_new(root, "layers", la);
    json_t *ea = pool_json(ex, nex, true, items, n);
    if (ea) json_object_set_new(root, "experts", ea);
    return root;
}

/* --csv: a line per input, group and the roll-up. */
static int print_csv(const item *items, size_t n, const fp4s_decomp_result *rrp)
{
    const fp4s_decomp_result rr = *rrp;
    printf("kind,input,source,step,site,side,group");
    out_csv_header(fp4s_rtype_decomp_result(), NULL);
    putchar('\n');
    for (size_t i = 0; i < n; i++) {
        fp4s_decomp_result r;
        fp4s_decomp_summary(items[i].acc, &r);
        csv_row("input", (long long)i, &items[i], -1, &r);
        size_t ng = fp4s_decomp_ngroups(items[i].acc);
        for (size_t g = 0; g < ng; g++) {
            fp4s_decomp_group(items[i].acc, g, &r);
            csv_row("group", (long long)i, &items[i], (long long)g, &r);
        }
    }
    csv_row("rollup", -1, NULL, -1, &rr);
    return cli_stdout_flush();
}

/* Saturation per input of a capture (site, step, side), in the capture's
 * order: blocks, NVFP4 block scales clamped at 448, values clipped; so that
 * drift of a static input scale over the steps shows. */
static void saturation_table(const fp4s_spec *spec, const item *items, size_t n)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) any |= items[i].step >= 0 && items[i].site && items[i].side;
    if (!any) return;
    const bool nv = spec->format == FP4S_NVFP4;
    printf("\nsaturation per input (%s values clipped at the top of the grid):\n",
           nv ? "NVFP4 block scales clamped at E4M3's 448, and" : "MXFP4:");
    printf("  %6s %-40s %-8s %10s %10s %9s %12s %9s\n", "step", "site", "side", "blocks", "clamped", "of blocks",
           "clipped", "of values");
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        if (it->step < 0 || !it->site || !it->side) continue;
        fp4s_decomp_result r;
        fp4s_decomp_summary(it->acc, &r);
        char cl[32], cf[32], vf[32];
        if (nv && (spec->nv_input_scale <= 0 || fp4s_decomp_device(it->acc) == FP4S_DEVICE_CPU)) {
            snprintf(cl, sizeof cl, "%llu", (unsigned long long)r.scale_clamped);
            pct(cf, sizeof cf, r.blocks ? (double)r.scale_clamped / (double)r.blocks : NAN);
        } else {
            snprintf(cl, sizeof cl, "-");
            snprintf(cf, sizeof cf, "%9s", "-");
        }
        pct(vf, sizeof vf, r.clip_fraction);
        printf("  %6lld %-40s %-8s %10llu %10s %9s %12llu %9s\n", (long long)it->step, cli_safe(it->site),
               cli_safe(it->side), (unsigned long long)r.blocks, cl, cf, (unsigned long long)r.clipped, vf);
    }
}

/* The per-layer or per-expert table (nothing when there are no rows). */
static void pool_table(const pool_acc *v, size_t nv, bool by_expert, const item *items, size_t n)
{
    if (!nv) return;
    if (by_expert)
        printf("\nper expert (the inputs of each layer, expert and side merged; share: of the ||e||^2 of every\n"
               "input of that side; scale, deadzone, grid, cross: of the expert's own ||e||^2):\n");
    else
        printf("\nper layer (the inputs of each layer and side merged, attention and experts alike; share: of\n"
               "the ||e||^2 of every input of that side; scale, deadzone, grid, cross: of the layer's own\n"
               "||e||^2; layer -: the sites that name none):\n");
    printf("  %5s", "layer");
    if (by_expert) printf(" %6s", "expert");
    printf(" %-8s %6s %12s %11s %9s %9s %9s %9s %9s %9s\n", "side", "inputs", "n", "rel.error", "share", "scale",
           "deadzone", "grid", "cross", "dz frac");
    for (size_t j = 0; j < nv; j++) {
        fp4s_decomp_result r;
        fp4s_decomp_summary(v[j].acc, &r);
        char ly[24], re[32], s1[32], s2[32], s3[32], s4[32], dz[32], sh[32];
        if (v[j].layer >= 0) snprintf(ly, sizeof ly, "%lld", (long long)v[j].layer);
        else snprintf(ly, sizeof ly, "-");
        num(re, 32, r.relative_error, "%11.4g");
        pct(s1, 32, r.ratio_scale);
        pct(s2, 32, r.ratio_deadzone);
        pct(s3, 32, r.ratio_grid);
        pct(s4, 32, 1.0 - r.ratio_scale - r.ratio_deadzone - r.ratio_grid);
        pct(dz, 32, r.deadzone_fraction);
        double tot = side_energy(items, n, v[j].side);
        pct(sh, 32, tot > 0 ? r.energy_total / tot : NAN);
        printf("  %5s", ly);
        if (by_expert) printf(" %6lld", (long long)v[j].expert);
        printf(" %-8s %6zu %12llu %11s %9s %9s %9s %9s %9s %9s\n", v[j].side, v[j].inputs,
               (unsigned long long)r.n, re, sh, s1, s2, s3, s4, dz);
    }
}

/* The table: each input, its first `show` groups, the roll-up over several,
 * saturation, the per-layer and per-expert rows. */
static int print_table(const fp4s_spec *sp, const fp4s_decomp_opts *op, const item *items, size_t n,
                       const fp4s_decomp_result *rrp, size_t show, const pool_acc *ly, size_t nly,
                       const pool_acc *ex, size_t nex)
{
    const fp4s_spec spec = *sp;
    const fp4s_decomp_opts opts = *op;
    const fp4s_decomp_result rr = *rrp;
    char desc[512];
    fp4s_spec_describe(&spec, desc, sizeof desc);
    printf("quantizer: %s\n", desc);
    printf("dead-zone tie at |x/s*| = 0.25: %s\n", fp4s_dz_tie_name(opts.dz_tie));
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        fp4s_decomp_result r;
        fp4s_decomp_summary(it->acc, &r);
        printf("\n[%zu] %s  [%zu x %zu]%s\n", i, cli_safe(it->label), it->rows, it->cols,
               it->synthetic ? "  (synthetic capture)" : "");
        human_result(&r, true, clamps_counted(&spec, it->acc));
        size_t ng = fp4s_decomp_ngroups(it->acc);
        if (ng) {
            printf("  %s groups (shares of ||e||^2; cross = 1 - scale - deadzone - grid, the cross terms):\n"
                   "  %8s %10s %11s %9s %9s %9s %9s %9s %9s\n", fp4s_group_name(opts.by),
                   "group", "n", "rel.error", "scale", "deadzone", "grid", "cross", "cos", "dz frac");
            size_t lim = show == 0 || show > ng ? ng : show;
            for (size_t g = 0; g < lim; g++) {
                fp4s_decomp_group(it->acc, g, &r);
                char re[32], s1[32], s2[32], s3[32], s4[32], co[32], dz[32];
                num(re, 32, r.relative_error, "%11.4g");
                pct(s1, 32, r.ratio_scale);
                pct(s2, 32, r.ratio_deadzone);
                pct(s3, 32, r.ratio_grid);
                pct(s4, 32, 1.0 - r.ratio_scale - r.ratio_deadzone - r.ratio_grid);
                num(co, 32, r.cos_scale_grid, "%9.4f");
                pct(dz, 32, r.deadzone_fraction);
                printf("  %8zu %10llu %11s %9s %9s %9s %9s %9s %9s\n", g, (unsigned long long)r.n, re, s1, s2,
                       s3, s4, co, dz);
            }
            if (lim < ng) printf("  %8s (%zu more groups; --show 0 lists all, --json or --csv has them)\n", "...",
                                 ng - lim);
        }
    }
    if (n > 1) {
        printf("\nroll-up over %zu inputs\n", n);
        human_result(&rr, true, clamps_counted(&spec, items[0].acc));
    }
    saturation_table(&spec, items, n);
    pool_table(ly, nly, false, items, n);
    pool_table(ex, nex, true, items, n);
    return cli_stdout_flush();
}

typedef struct args {
    cli_common common;
    cli_quant qo;
    cli_analysis an;
    const char *by_s, *sides, *outpath;
    size_t show;
    long long keep_mib;
} args;

static void parse_args(int argc, char **argv, args *a)
{
    cli_quant_init(&a->qo);
    cli_common_init(&a->common, usage_text, true);
    a->show = 20;
    a->keep_mib = -1;
    static const struct option lo[] = {
        CLI_QUANT_LONGOPTS
        {"output", required_argument, NULL, 'o'},
        {"by", required_argument, NULL, OPT_BY},
        CLI_DZ_TIE_LONGOPTS
        CLI_SELECT_LONGOPTS
        {"sides", required_argument, NULL, OPT_SIDES},
        {"show", required_argument, NULL, OPT_SHOW},
        {"keep", required_argument, NULL, OPT_KEEP},
        CLI_REPORT_LONGOPTS
        CLI_THREADS_LONGOPTS
        CLI_CHUNK_LONGOPTS
        CLI_COMMON_LONGOPTS
        CLI_OUTPUT_LONGOPTS
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:o:", lo)) != -1) {
        switch (c) {
        case 'o': a->outpath = optarg; break;
        case OPT_BY: a->by_s = optarg; break;
        case OPT_SIDES: a->sides = optarg; break;
        case OPT_KEEP: a->keep_mib = parse_keep(optarg); break;
        case OPT_SHOW: a->show = (size_t)cli_parse_int("--show", optarg, 0, (long long)1 << 40); break;
        default: cli_option_rest(c, optarg, argv, &a->common, &a->qo, &a->an);
        }
    }
    cli_common_check(&a->common);
    if (optind >= argc) cli_usage("no INPUT given");
}

/* Decompose every input (over MPI ranks, rank 0 goes on with every
 * accumulator: par.h) and merge them into the roll-up *roll. Returns false
 * on the ranks that are done. */
static bool decompose_items(const fp4s_spec *spec, const fp4s_decomp_opts *opts, item *items, size_t n,
                            fp4s_decomp **roll)
{
    int rc;
    fp4s_decomp_opts ropts = *opts;
    ropts.by = FP4S_GROUP_TENSOR;
    if ((rc = fp4s_decomp_open(spec, NULL, &ropts, 0, 0, roll))) exit(cli_report(rc));
    const char **src = xcalloc(n, sizeof *src);
    const fp4s_spec **sp = xcalloc(n, sizeof *sp);
    const fp4s_decomp_opts **op = xcalloc(n, sizeof *op);
    size_t *rows = xcalloc(n, sizeof *rows), *cols = xcalloc(n, sizeof *cols);
    fp4s_decomp **acc = xcalloc(n, sizeof *acc);
    for (size_t i = 0; i < n; i++) {
        src[i] = items[i].source;
        sp[i] = spec;
        op[i] = opts;
        rows[i] = items[i].rows;
        cols[i] = items[i].cols;
    }
    if (!par_decomp(n, src, sp, op, rows, cols, acc)) return false;
    for (size_t i = 0; i < n; i++) items[i].acc = acc[i];
    free(src);
    free(sp);
    free(op);
    free(rows);
    free(cols);
    free(acc);
    for (size_t i = 0; i < n; i++) {
        items[i].rows = fp4s_decomp_rows(items[i].acc);
        items[i].cols = fp4s_decomp_cols(items[i].acc);
        if ((rc = fp4s_decomp_merge(*roll, items[i].acc))) exit(cli_report(rc));
    }
    return true;
}

int main(int argc, char **argv)
{
    cli_init("fp4-decompose");
    par_init();
    args a = {0};
    parse_args(argc, argv, &a);
    const cli_analysis an = a.an;
    const char *sides = a.sides, *outpath = a.outpath;
    fp4s_spec spec;
    cli_quant_spec(&a.qo, CLI_FORMATS_FP4, "the decomposition is", &spec);
    int rc;
    fp4s_decomp_opts opts;
    fp4s_decomp_opts_defaults(&opts);
    if (a.by_s && fp4s_group_parse(a.by_s, &opts.by)) cli_usage("--by: %s", fp4s_last_error());
    cli_dz_tie(an.dz_tie, &opts.dz_tie);
    if (a.common.chunk) opts.chunk_elems = a.common.chunk;
    if (a.keep_mib >= 0) opts.keep_bytes = (size_t)a.keep_mib << 20; /* else auto, the default */
    opts.device = cli_device(a.common.device_arg, &spec);
    long long *steps = NULL;
    size_t nsteps = 0;
    if (an.steps) steps = cli_parse_int_list("--steps", an.steps, &nsteps);
    fp4s_unit_select sel; /* the capture's datasets: the walker's selection, with --sides */
    fp4s_unit_select_defaults(&sel);
    sel.sites = an.sites;
    sel.steps = steps;
    sel.nsteps = nsteps;
    if (sides) {
        for (const char *p = sides; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyz,", *p)) cli_usage("--sides: expected a list like trainer,rollout");
    }
    bool capture_mode = an.sites || an.steps || sides;
    for (int i = optind; i < argc; i++) cli_input(argv[i]);
    if (outpath) cli_output(outpath);

    size_t n;
    item *items = collect_items(argv + optind, argc - optind, &sel, sides, capture_mode, &n);
    if (n == 0) {
        char hint[4096];
        cli_sites_hint(argv[optind], an.sites, hint, sizeof hint);
        cli_die(FP4S_EXIT_INPUT, "empty selection: no dataset matches%s%s%s%s%s%s%s",
                an.sites ? " --sites " : "", an.sites ? an.sites : "", an.steps ? " --steps " : "",
                an.steps ? an.steps : "", sides ? " --sides " : "", sides ? sides : "", hint);
    }
    fp4s_decomp *roll = NULL;
    if (!decompose_items(&spec, &opts, items, n, &roll)) return 0;
    if (outpath) {
        fp4s_decomp_item *di = xcalloc(n, sizeof *di);
        for (size_t i = 0; i < n; i++)
            di[i] = (fp4s_decomp_item){.source = items[i].label, .step = items[i].step, .site = items[i].site,
                                       .side = items[i].side, .synthetic = items[i].synthetic, .acc = items[i].acc};
        rc = fp4s_decomp_write_h5(outpath, &spec, di, n, roll);
        free(di);
        if (rc) exit(cli_report(rc));
        if ((rc = cli_commit())) exit(rc);
    }
    cli_progress_end();
    fp4s_decomp_result rr;
    fp4s_decomp_summary(roll, &rr);
    size_t nly = 0, nex = 0;
    pool_acc *ly = pool_merge(items, n, &spec, &opts, false, &nly);
    pool_acc *ex = pool_merge(items, n, &spec, &opts, true, &nex);
    int status;
    if (a.common.json) status = cli_json_print(doc_json(&spec, &opts, items, n, &rr, ly, nly, ex, nex));
    else if (a.common.csv) status = print_csv(items, n, &rr);
    else status = print_table(&spec, &opts, items, n, &rr, a.show, ly, nly, ex, nex);
    for (size_t i = 0; i < n; i++) {
        fp4s_decomp_close(&items[i].acc);
        free(items[i].source);
        free(items[i].label);
        free(items[i].site);
        free(items[i].side);
    }
    pool_free(ly, nly);
    pool_free(ex, nex);
    free(items);
    free(steps);
    fp4s_decomp_close(&roll);
    return status;
}
