/* fp4-ckpt check: what a profile makes of the trainer's weights, against the
 * checkpoint, per weight: the global scale, every block scale and every code. */
#include "ckpt_tool.h"

#include <fp4scope/quant.h>

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_TRAINER = 256, OPT_TSCALE, OPT_NAMES, OPT_TLAYOUT };

/* --trainer-layout: how a trainer matrix whose transpose has the same shape
 * (N == K) is read: -1 auto (gpt-oss stacks as [E, in, out], the others as
 * [out, in] like nn.Linear), 0 [out, in], 1 [in, out] */
static int trainer_layout = -1;

static void check_usage(void)
{
    printf("Usage: fp4-ckpt check [OPTION]... CKPT --trainer TRAINER\n"
           "See fp4-ckpt --help and fp4-ckpt(1).\n");
}

/* The trainer's matrix for a checkpoint weight, found by name: how it was found. */
typedef struct found {
    float *v;           /* [experts][rows][cols] */
    char how[1024];     /* the trainer tensor and the slice taken */
} found;

/* A stored shape as [lead..., a, b]: the product of the leading dimensions. */
static bool shape_ab(const fp4s_ckpt_tensor *t, size_t *lead, size_t *a, size_t *b)
{
    if (t->rank < 2 || t->rank > 8) return false;
    size_t l = 1;
    for (int i = 0; i < t->rank - 2; i++) l *= (size_t)t->dims[i];
    *lead = l;
    *a = (size_t)t->dims[t->rank - 2];
    *b = (size_t)t->dims[t->rank - 1];
    return true;
}

/* Copy [lead][a][b] src (rows r0..r0+n of each a, all of b, or transposed) into dst [lead][n][k]. */
static void take(const float *src, size_t lead, size_t a, size_t b, bool transposed, size_t r0, size_t n, size_t k,
                 float *dst)
{
    for (size_t e = 0; e < lead; e++)
        for (size_t r = 0; r < n; r++)
            for (size_t c = 0; c < k; c++)
                dst[(e * n + r) * k + c] =
                    transposed ? src[(e * a + c) * b + r0 + r] : src[(e * a + r0 + r) * b + c];
}

/* Read trainer tensor `name` if it holds `experts` matrices of [n, k] (or,
 * transposed, [k, n], as gpt-oss stores its experts: [E, in, out]). */
static int try_tensor(fp4s_ckpt *tr, const char *name, size_t experts, size_t n, size_t k, size_t r0, size_t rows_in,
                      bool prefer_in_out, found *f)
{
    const fp4s_ckpt_tensor *t = fp4s_ckpt_tensor_find(tr, name);
    size_t lead, a, b;
    if (!t || !shape_ab(t, &lead, &a, &b) || lead != experts) return 0;
    bool direct = a == rows_in && b == k, trans = a == k && b == rows_in;
    if (!direct && !trans) return 0;
    if (direct && trans) direct = !prefer_in_out;
    float *all;
    size_t cnt;
    int rc = fp4s_ckpt_read_tensor(tr, name, &all, &cnt);
    if (rc) return rc;
    f->v = xmalloc(experts * n * k * sizeof *f->v);
    take(all, lead, a, b, !direct, r0, n, k, f->v);
    free(all);
    if (rows_in != n)
        snprintf(f->how, sizeof f->how, "%s rows %zu..%zu%s", name, r0, r0 + n - 1, direct ? "" : " (transposed)");
    else
        snprintf(f->how, sizeof f->how, "%s%s", name, direct ? "" : " (transposed)");
    return 1;
}

/* Fused experts of the trainer ([E, 2I, H] gate_up_proj, [E, H, I] down_proj,
 * transformers' layout) for a checkpoint's per-expert P.experts.<e>.<proj>,
 * split as ModelOpt exports them (gate rows first, then up). */
static int try_fused(fp4s_ckpt *tr, const fp4s_ckpt_weight *w, found *f)
{
    const char *ex = strstr(w->name, ".experts.");
    if (!ex || w->experts != 1) return 0;
    const char *p = ex + 9;
    char *end;
    long e = strtol(p, &end, 10);
    if (end == p || *end != '.' || e < 0) return 0;
    const char *proj = end + 1;
    char base[512];
    snprintf(base, sizeof base, "%.*s.experts.", (int)(ex - w->name), w->name);
    char nm[600];
    const fp4s_ckpt_tensor *t;
    size_t lead, a, b;
    if (strcmp(proj, "gate_proj") == 0 || strcmp(proj, "up_proj") == 0) {
        snprintf(nm, sizeof nm, "%sgate_up_proj", base);
        t = fp4s_ckpt_tensor_find(tr, nm);
        if (!t || !shape_ab(t, &lead, &a, &b) || t->rank != 3 || (size_t)e >= lead) return 0;
        bool direct = a == 2 * w->rows && b == w->cols, trans = b == 2 * w->rows && a == w->cols;
        if (!direct && !trans) return 0;
        if (direct && trans) direct = trainer_layout != 1;
        size_t r0 = strcmp(proj, "gate_proj") == 0 ? 0 : w->rows;
        float *all;
        size_t cnt;
        int rc = fp4s_ckpt_read_tensor(tr, nm, &all, &cnt);
        if (rc) return rc;
        f->v = xmalloc(w->rows * w->cols * sizeof *f->v);
        take(all + (size_t)e * a * b, 1, a, b, !direct, r0, w->rows, w->cols, f->v);
        free(all);
        snprintf(f->how, sizeof f->how, "%s[%ld] rows %zu..%zu%s", nm, e, r0, r0 + w->rows - 1,
                 direct ? "" : " (transposed)");
        return 1;
    }
    if (strcmp(proj, "down_proj") == 0) {
        snprintf(nm, sizeof nm, "%sdown_proj", base);
        t = fp4s_ckpt_tensor_find(tr, nm);
        if (!t || !shape_ab(t, &lead, &a, &b) || t->rank != 3 || (size_t)e >= lead) return 0;
        bool direct = a == w->rows && b == w->cols, trans = a == w->cols && b == w->rows;
        if (!direct && !trans) return 0;
        if (direct && trans) direct = trainer_layout != 1;
        float *all;
        size_t cnt;
        int rc = fp4s_ckpt_read_tensor(tr, nm, &all, &cnt);
        if (rc) return rc;
        f->v = xmalloc(w->rows * w->cols * sizeof *f->v);
        take(all + (size_t)e * a * b, 1, a, b, !direct, 0, w->rows, w->cols, f->v);
        free(all);
        snprintf(f->how, sizeof f->how, "%s[%ld]%s", nm, e, direct ? "" : " (transposed)");
        return 1;
    }
    return 0;
}

/* 1 found, 0 not, < 0 a read error. */
static int trainer_matrix(fp4s_ckpt *tr, const fp4s_ckpt_weight *w, found *f)
{
    memset(f, 0, sizeof *f);
    char nm[600];
    snprintf(nm, sizeof nm, "%s.weight", w->name);
    bool in_out = trainer_layout < 0 ? w->layout == FP4S_CKPT_GPTOSS_MXFP4 : trainer_layout == 1;
    int r = try_tensor(tr, nm, w->experts, w->rows, w->cols, 0, w->rows, in_out, f);
    if (!r) r = try_tensor(tr, w->name, w->experts, w->rows, w->cols, 0, w->rows, in_out, f);
    if (!r) r = try_fused(tr, w, f);
    return r;
}

/* The fused group of a weight (vLLM's packed modules: q/k/v, gate/up, w1/w3):
 * the siblings' names, or 0 when it is in none. */
static size_t fused_siblings(const char *name, char sib[3][300])
{
    static const char *groups[][3] = {{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj", NULL},
                                      {"w1", "w3", NULL}};
    const char *dot = strrchr(name, '.');
    const char *leaf = dot ? dot + 1 : name;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        bool in = false;
        for (int i = 0; i < 3 && groups[g][i]; i++) in |= strcmp(leaf, groups[g][i]) == 0;
        if (!in) continue;
        size_t n = 0;
        for (int i = 0; i < 3 && groups[g][i]; i++)
            snprintf(sib[n++], 300, "%.*s%s", (int)(leaf - name), name, groups[g][i]);
        return n;
    }
    return 0;
}

typedef struct row {
    const fp4s_ckpt_weight *w;
    char profile[32], how[1024];
    bool have_trainer, differs;
    const char *global;   /* "equal", "shared (fused group)", "differs", "-" */
    double global_profile;
    fp4s_ckpt_check r;
} row;

int ckpt_cmd_check(int argc, char **argv)
{
    static const struct option lo[] = {CLI_QUANT_LONGOPTS {"trainer", required_argument, NULL, OPT_TRAINER},
                                       {"tensor-scale", required_argument, NULL, OPT_TSCALE},
                                       {"names", required_argument, NULL, OPT_NAMES},
                                       {"trainer-layout", required_argument, NULL, OPT_TLAYOUT}, CLI_REPORT_LONGOPTS
                                       CLI_OUTPUT_LONGOPTS CLI_COMMON_LONGOPTS {NULL, 0, NULL, 0}};
    cli_common common;
    cli_common_init(&common, check_usage, false);
    cli_quant q;
    cli_quant_init(&q);
    const char *trainer = NULL, *names = NULL;
    fp4s_ckpt_gs gs = FP4S_CKPT_GS_CHECKPOINT;
    int ch;
    while ((ch = cli_getopt(argc, argv, "f:p:", lo)) != -1) {
        switch (ch) {
        case OPT_TRAINER: trainer = optarg; break;
        case OPT_NAMES: names = optarg; break;
        case OPT_TLAYOUT:
            if (strcmp(optarg, "auto") == 0) trainer_layout = -1;
            else if (strcmp(optarg, "out-in") == 0) trainer_layout = 0;
            else if (strcmp(optarg, "in-out") == 0) trainer_layout = 1;
            else cli_usage("--trainer-layout: expected auto, out-in or in-out, got '%s'", optarg);
            break;
        case OPT_TSCALE:
            if (strcmp(optarg, "checkpoint") == 0) gs = FP4S_CKPT_GS_CHECKPOINT;
            else if (strcmp(optarg, "weights") == 0) gs = FP4S_CKPT_GS_WEIGHTS;
            else cli_usage("--tensor-scale: expected checkpoint or weights, got '%s'", optarg);
            break;
        default:
            if (!cli_common_option(ch, optarg, &common) && !cli_quant_option(ch, optarg, &q))
                cli_usage("check: unknown option '%s'", argv[optind - 1]);
        }
    }
    cli_common_check(&common);
    if (optind + 1 != argc) cli_usage("check: expected one CKPT");
    if (!trainer) cli_usage("check: --trainer TRAINER (the trainer's weights) is required");
    const char *path = argv[optind];
    fp4s_ckpt *c = ckpt_open_or_die(path);
    fp4s_ckpt *tr = ckpt_open_or_die(trainer);
    size_t nw = fp4s_ckpt_nweights(c), nr = 0;
    if (nw == 0) cli_die(FP4S_EXIT_INPUT, "%s: no quantized weight (fp4-ckpt ls --all %s lists its tensors)", path, path);
    row *rows = xcalloc(nw, sizeof *rows);
    cli_progress_begin("check");
    for (size_t i = 0; i < nw; i++) {
        const fp4s_ckpt_weight *w = fp4s_ckpt_weight_at(c, i);
        if (names && !fp4s_site_match(names, w->name)) continue;
        row *r = &rows[nr++];
        r->w = w;
        r->global = "-";
        cli_quant qq = q;
        qq.format = fp4s_format_name(w->format);
        if (!qq.profile) qq.profile = ckpt_default_profile(w->layout);
        fp4s_spec s;
        cli_quant_spec(&qq, CLI_FORMATS_FP4, "the check is", &s);
        snprintf(r->profile, sizeof r->profile, "%s", s.profile);
        found f;
        int rc = trainer_matrix(tr, w, &f);
        if (rc < 0) cli_fail(rc);
        if (rc == 0) {
            r->differs = true;
            cli_progress(i + 1, nw);
            continue;
        }
        r->have_trainer = true;
        snprintf(r->how, sizeof r->how, "%s", f.how);
        rc = fp4s_ckpt_compare(c, w, f.v, &s, gs, &r->r);
        if (rc) cli_failf(rc, "%s", w->name);
        r->differs = r->r.any;
        if (w->format == FP4S_NVFP4) {
            r->global_profile = r->r.global_profile;
            r->global = r->r.global_equal ? "equal" : "differs";
            char sib[3][300];
            size_t ns = w->experts == 1 ? fused_siblings(w->name, sib) : 0;
            if (!r->r.global_equal && ns) {
                /* a fused group's one scale: the profile's from the group's amax */
                float amax = 0;
                bool all = true;
                for (size_t k = 0; k < ns && all; k++) {
                    const fp4s_ckpt_weight *o = fp4s_ckpt_weight_find(c, sib[k]);
                    found g;
                    if (!o || trainer_matrix(tr, o, &g) != 1) {
                        all = false;
                        break;
                    }
                    amax = fp4s_amax_merge(amax, fp4s_spec_amax(&s, g.v, o->rows, o->cols, o->cols, NULL));
                    free(g.v);
                }
                fp4s_tscale ts;
                if (all && fp4s_tscale_init(&s, amax, &ts) == 0 && (float)w->global_scale == ts.s_dec) {
                    r->global = "shared (fused group)";
                    r->global_profile = ts.s_dec;
                }
            }
            if (strcmp(r->global, "differs") == 0) r->differs = true;
        }
        free(f.v);
        cli_progress(i + 1, nw);
    }
    cli_progress_end();
    if (nr == 0) cli_die(FP4S_EXIT_INPUT, "%s: no quantized weight matches --names %s", path, names);
    size_t bad = 0;
    for (size_t i = 0; i < nr; i++) bad += rows[i].differs;
    int status;
    if (common.json) {
        json_t *j = json_object(), *a = json_array();
        json_object_set_new(j, "checkpoint", json_string(path));
        json_object_set_new(j, "trainer", json_string(trainer));
        json_object_set_new(j, "tensor_scale", json_string(gs == FP4S_CKPT_GS_CHECKPOINT ? "checkpoint" : "weights"));
        for (size_t i = 0; i < nr; i++) {
            const row *r = &rows[i];
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(r->w->name));
            json_object_set_new(o, "layout", json_string(fp4s_ckpt_layout_name(r->w->layout)));
            json_object_set_new(o, "profile", json_string(r->profile));
            json_object_set_new(o, "trainer_tensor", r->have_trainer ? json_string(r->how) : json_null());
            json_object_set_new(o, "equal", json_boolean(!r->differs));
            json_object_set_new(o, "global_scale", json_string(r->global));
            json_object_set_new(o, "global_scale_checkpoint",
                                r->w->format == FP4S_NVFP4 ? cli_json_real(r->w->global_scale) : json_null());
            json_object_set_new(o, "global_scale_profile",
                                r->w->format == FP4S_NVFP4 && r->have_trainer ? cli_json_real(r->global_profile)
                                                                              : json_null());
            json_object_set_new(o, "blocks", json_integer((json_int_t)r->r.blocks));
            json_object_set_new(o, "scale_diff", json_integer((json_int_t)r->r.scale_diff));
            json_object_set_new(o, "elements", json_integer((json_int_t)r->r.elements));
            json_object_set_new(o, "code_diff", json_integer((json_int_t)r->r.code_diff));
            if (r->r.any) {
                json_t *fb = json_object();
                json_object_set_new(fb, "expert", json_integer((json_int_t)r->r.first_expert));
                json_object_set_new(fb, "row", json_integer((json_int_t)r->r.first_row));
                json_object_set_new(fb, "block", json_integer((json_int_t)r->r.first_block));
                json_object_set_new(o, "first_difference", fb);
            } else {
                json_object_set_new(o, "first_difference", json_null());
            }
            json_object_set_new(o, "rel_err", r->have_trainer ? cli_json_real(r->r.rel_err) : json_null());
            json_object_set_new(o, "max_abs_err", r->have_trainer ? cli_json_real(r->r.max_abs_err) : json_null());
            json_array_append_new(a, o);
        }
        json_object_set_new(j, "weights", a);
        json_object_set_new(j, "differ", json_integer((json_int_t)bad));
        status = cli_json_print(j);
    } else if (common.csv) {
        printf("name,layout,profile,trainer_tensor,equal,global_scale,global_scale_checkpoint,global_scale_profile,"
               "blocks,scale_diff,elements,code_diff,first_expert,first_row,first_block,rel_err\n");
        for (size_t i = 0; i < nr; i++) {
            const row *r = &rows[i];
            cli_csv_str(r->w->name);
            printf(",%s,%s,", fp4s_ckpt_layout_name(r->w->layout), r->profile);
            cli_csv_str(r->have_trainer ? r->how : "");
            printf(",%d,%s,", !r->differs, r->global);
            if (r->w->format == FP4S_NVFP4) printf("%.9g", r->w->global_scale);
            putchar(',');
            if (r->w->format == FP4S_NVFP4 && r->have_trainer) printf("%.9g", r->global_profile);
            printf(",%zu,%zu,%zu,%zu,", r->r.blocks, r->r.scale_diff, r->r.elements, r->r.code_diff);
            if (r->r.any) printf("%zu,%zu,%zu", r->r.first_expert, r->r.first_row, r->r.first_block);
            else printf(",,");
            putchar(',');
            if (r->have_trainer) printf("%.9g", r->r.rel_err);
            putchar('\n');
        }
        status = cli_stdout_flush();
    } else {
        printf("%s against %s (block scales and codes quantized with the %s global scale)\n", path, trainer,
               gs == FP4S_CKPT_GS_CHECKPOINT ? "checkpoint's" : "profile's own");
        for (size_t i = 0; i < nr; i++) {
            const row *r = &rows[i];
            printf("%-6s %s  [%s, profile %s]\n", r->differs ? "DIFFER" : "equal", r->w->name,
                   fp4s_ckpt_layout_name(r->w->layout), r->profile);
            if (!r->have_trainer) {
                printf("       no trainer weight found (looked for %s.weight, %s, and fused experts' gate_up_proj / "
                       "down_proj)\n", r->w->name, r->w->name);
                continue;
            }
            printf("       trainer: %s\n", r->how);
            if (r->w->format == FP4S_NVFP4)
                printf("       global scale: %s (checkpoint %.9g, profile %.9g)\n", r->global, r->w->global_scale,
                       r->global_profile);
            printf("       block scales: %zu of %zu differ; codes: %zu of %zu differ", r->r.scale_diff, r->r.blocks,
                   r->r.code_diff, r->r.elements);
            if (r->r.any) {
                size_t bs = r->w->format == FP4S_NVFP4 ? 16 : 32;
                printf("; first differing block: ");
                if (r->w->experts > 1) printf("expert %zu, ", r->r.first_expert);
                printf("row %zu, block %zu (columns %zu..%zu)", r->r.first_row, r->r.first_block,
                       r->r.first_block * bs, r->r.first_block * bs + bs - 1);
            }
            printf("\n       dequantized vs trainer: ||diff|| / ||trainer|| %.4g, max |diff| %.4g\n", r->r.rel_err,
                   r->r.max_abs_err);
        }
        printf("%zu of %zu weights differ\n", bad, nr);
        status = cli_stdout_flush();
    }
    free(rows);
    fp4s_ckpt_close(&c);
    fp4s_ckpt_close(&tr);
    if (status) return status;
    return bad ? FP4S_EXIT_CHECK : 0;
}
