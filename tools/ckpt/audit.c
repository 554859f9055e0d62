/* fp4-ckpt audit: every linear layer of the trainer and of the rollout
 * checkpoint, whether each side quantizes it, and every disagreement. */
#include "ckpt_tool.h"

#include <fp4scope/capture.h>

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { OPT_TRAINER = 256, OPT_CONFIG, OPT_CHECK, OPT_TFMT, OPT_TPROF };

static void audit_usage(void)
{
    printf("Usage: fp4-ckpt audit [OPTION]... CKPT --trainer TRAINER\n"
           "See fp4-ckpt --help and fp4-ckpt(1).\n");
}

/* one linear module (a shard of a unit) of the rollout checkpoint */
typedef struct mod {
    char name[300];
    const fp4s_ckpt_weight *w; /* FP4 weight, NULL: a plain weight */
    size_t expert;             /* expert of a stack w (w->experts > 1) */
    int engine;                /* 1 the engine keeps it unquantized, 0 quantizes, -1 refuses the model */
    size_t entry;              /* the config entry that excludes it */
    char refuse[512];
} mod;

/* a GEMM: the shards fused into one (q/k/v, gate/up), per expert */
typedef struct unit {
    char key[300];             /* the fused name, without a leading "model." */
    size_t first, n;           /* its shards in the sorted module array */
    bool trainer;              /* the trainer quantizes it */
    char tfmt[32], tprof[32];
    char problems[1024];
} unit;

static int natcmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static const char *strip_model(const char *s)
{
    return strncmp(s, "model.", 6) == 0 ? s + 6 : s;
}

/* the unit of a module: q/k/v -> qkv_proj, gate/up -> gate_up_proj (per expert) */
static void unit_key(const char *name, char *buf, size_t n)
{
    static const char *fuse[][2] = {{"q_proj", "qkv_proj"}, {"k_proj", "qkv_proj"}, {"v_proj", "qkv_proj"},
                                    {"gate_proj", "gate_up_proj"}, {"up_proj", "gate_up_proj"},
                                    {"w1", "w13"}, {"w3", "w13"}};
    const char *s = strip_model(name);
    const char *dot = strrchr(s, '.');
    const char *leaf = dot ? dot + 1 : s;
    for (size_t i = 0; i < sizeof fuse / sizeof fuse[0]; i++)
        if (strcmp(leaf, fuse[i][0]) == 0) {
            snprintf(buf, n, "%.*s%s", (int)(leaf - s), s, fuse[i][1]);
            return;
        }
    snprintf(buf, n, "%s", s);
}

static int cmp_mod(const void *a, const void *b)
{
    char ka[300], kb[300];
    unit_key(((const mod *)a)->name, ka, sizeof ka);
    unit_key(((const mod *)b)->name, kb, sizeof kb);
    int c = natcmp(ka, kb);
    return c ? c : natcmp(((const mod *)a)->name, ((const mod *)b)->name);
}

static bool is_capture(const char *path)
{
    fp4s_capture_info in;
    return fp4s_capture_info_read(path, &in) == 0;
}

/* the trainer's quantized modules: name (glob), format, profile */
typedef struct tmod {
    char name[300], fmt[32], prof[32];
    bool used;
} tmod;

static tmod *read_trainer(const char *path, const char *fmt, const char *prof, size_t *n)
{
    tmod *v = NULL;
    size_t cap = 0;
    *n = 0;
    if (is_capture(path)) {
        fp4s_capture_entry *e;
        size_t ne;
        int rc = fp4s_capture_list_raw(path, &e, &ne);
        if (rc) cli_fail(rc);
        for (size_t i = 0; i < ne; i++) {
            if (e[i].step < 0 || strcmp(e[i].side, "trainer") || strcmp(e[i].site, "logprobs") == 0) continue;
            bool dup = false;
            for (size_t k = 0; k < *n && !dup; k++) dup = strcmp(v[k].name, e[i].site) == 0;
            if (dup) continue;
            if (*n == cap) v = xrealloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
            memset(&v[*n], 0, sizeof *v);
            snprintf(v[*n].name, sizeof v[*n].name, "%s", e[i].site);
            snprintf(v[*n].fmt, sizeof v[*n].fmt, "%s", fmt ? fmt : "?");
            snprintf(v[*n].prof, sizeof v[*n].prof, "%s", prof ? prof : "?");
            (*n)++;
        }
        free(e);
        if (*n == 0) cli_die(FP4S_EXIT_INPUT, "%s: the capture holds no trainer side", path);
        return v;
    }
    FILE *f = fopen(path, "r");
    if (!f) cli_die(FP4S_EXIT_INPUT, "%s: cannot open: %s", path, strerror(errno));
    char line[1024];
    size_t ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h) *h = '\0';
        char a[400] = "", b[64] = "", c[64] = "", d[8] = "";
        int got = sscanf(line, "%399s %63s %63s %7s", a, b, c, d);
        if (got <= 0) continue;
        if (got == 4 || strlen(a) >= 300 || strlen(b) >= 32 || strlen(c) >= 32)
            cli_die(FP4S_EXIT_INPUT, "%s:%zu: expected NAME [FORMAT [PROFILE]]", path, ln);
        if (*n == cap) v = xrealloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
        memset(&v[*n], 0, sizeof *v);
        snprintf(v[*n].name, sizeof v[*n].name, "%s", a);
        snprintf(v[*n].fmt, sizeof v[*n].fmt, "%s", got >= 2 ? b : fmt ? fmt : "?");
        snprintf(v[*n].prof, sizeof v[*n].prof, "%s", got >= 3 ? c : prof ? prof : "?");
        (*n)++;
    }
    fclose(f);
    return v;
}

static void add_problem(unit *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_problem(unit *u, const char *fmt, ...)
{
    size_t l = strlen(u->problems);
    if (l && l + 2 < sizeof u->problems) {
        strcat(u->problems, "; ");
        l += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->problems + l, sizeof u->problems - l, fmt, ap);
    va_end(ap);
}

/* the rollout of a unit: quantized by the engine with FP4 weights */
static bool rollout_quantized(const mod *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].engine == 0 && m[i].w) return true;
    return false;
}

int ckpt_cmd_audit(int argc, char **argv)
{
    static const struct option lo[] = {{"trainer", required_argument, NULL, OPT_TRAINER},
                                       {"config", required_argument, NULL, OPT_CONFIG},
                                       {"check", no_argument, NULL, OPT_CHECK},
                                       {"trainer-format", required_argument, NULL, OPT_TFMT},
                                       {"trainer-profile", required_argument, NULL, OPT_TPROF},
                                       CLI_REPORT_LONGOPTS CLI_OUTPUT_LONGOPTS CLI_COMMON_LONGOPTS {NULL, 0, NULL, 0}};
    cli_common common;
    cli_common_init(&common, audit_usage, false);
    const char *trainer = NULL, *config = NULL, *tfmt = NULL, *tprof = NULL;
    bool check = false;
    int ch;
    while ((ch = cli_getopt(argc, argv, "", lo)) != -1) {
        switch (ch) {
        case OPT_TRAINER: trainer = optarg; break;
        case OPT_CONFIG: config = optarg; break;
        case OPT_CHECK: check = true; break;
        case OPT_TFMT: tfmt = optarg; break;
        case OPT_TPROF: tprof = optarg; break;
        default:
            if (!cli_common_option(ch, optarg, &common)) cli_usage("audit: unknown option '%s'", argv[optind - 1]);
        }
    }
    cli_common_check(&common);
    if (optind + 1 != argc) cli_usage("audit: expected one CKPT");
    if (!trainer) cli_usage("audit: --trainer TRAINER (a capture or a list of quantized modules) is required");
    if (tfmt && strlen(tfmt) >= 32) cli_usage("--trainer-format: at most 31 characters");
    if (tprof && strlen(tprof) >= 32) cli_usage("--trainer-profile: at most 31 characters");
    const char *path = argv[optind];
    fp4s_ckpt *c = ckpt_open_or_die(path);
    char cdir[4096];
    if (!config) {
        struct stat st;
        snprintf(cdir, sizeof cdir, "%s", path);
        if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s", path);
            snprintf(cdir, sizeof cdir, "%s", dirname(tmp));
        }
        config = cdir;
    }
    fp4s_qconfig *q;
    int rc = fp4s_qconfig_open(config, &q);
    if (rc) cli_fail(rc);

    /* the checkpoint's linear modules: FP4 weights (stacks per expert), plain 2-D weights */
    size_t nm = 0, capm = 0;
    mod *m = NULL;
    for (size_t i = 0; i < fp4s_ckpt_nweights(c); i++) {
        const fp4s_ckpt_weight *w = fp4s_ckpt_weight_at(c, i);
        for (size_t e = 0; e < w->experts; e++) {
            if (nm == capm) m = xrealloc(m, (capm = capm ? 2 * capm : 256) * sizeof *m);
            memset(&m[nm], 0, sizeof *m);
            if (w->experts > 1) {
                const char *dot = strrchr(w->name, '.');
                snprintf(m[nm].name, sizeof m[nm].name, "%.*s.%zu%s", dot ? (int)(dot - w->name) : 0, w->name, e,
                         dot ? dot : w->name);
            } else {
                snprintf(m[nm].name, sizeof m[nm].name, "%s", w->name);
            }
            m[nm].w = w;
            m[nm].expert = e;
            nm++;
        }
    }
    for (size_t i = 0; i < fp4s_ckpt_ntensors(c); i++) {
        const fp4s_ckpt_tensor *t = fp4s_ckpt_tensor_at(c, i);
        size_t l = strlen(t->name);
        if (t->rank != 2 || l < 8 || strcmp(t->name + l - 7, ".weight") || strstr(t->name, "embed") ||
            strstr(t->name, "norm") || (strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16") && strcmp(t->dtype, "F32")))
            continue;
        char nm_[300];
        snprintf(nm_, sizeof nm_, "%.*s", (int)(l - 7), t->name);
        if (fp4s_ckpt_weight_find(c, nm_)) continue;
        if (nm == capm) m = xrealloc(m, (capm = capm ? 2 * capm : 256) * sizeof *m);
        memset(&m[nm], 0, sizeof *m);
        snprintf(m[nm].name, sizeof m[nm].name, "%s", nm_);
        nm++;
    }
    if (nm == 0) cli_die(FP4S_EXIT_INPUT, "%s: no linear weight (2-D *.weight or FP4 weight) in the checkpoint", path);
    qsort(m, nm, sizeof *m, cmp_mod);
    const char **names = xmalloc(nm * sizeof *names);
    for (size_t i = 0; i < nm; i++) names[i] = m[i].name;

    /* entries of the config that name no module: exit 3 for a name, a note for a pattern */
    size_t nx = fp4s_qconfig_nexclude(q);
    char unmatched[2048] = "";
    for (size_t i = 0; i < nx; i++) {
        bool hit = false;
        for (size_t k = 0; k < nm && !hit; k++) hit = fp4s_qconfig_entry_matches(q, i, m[k].name);
        if (hit) continue;
        if (!fp4s_qconfig_exclude_is_pattern(q, i))
            cli_die(FP4S_EXIT_INPUT, "%s: %s[%zu] '%s' names no module of the checkpoint %s", fp4s_qconfig_path(q),
                    fp4s_qconfig_key(q), i, fp4s_qconfig_exclude_at(q, i), path);
        size_t l = strlen(unmatched);
        snprintf(unmatched + l, sizeof unmatched - l, "%s%s", l ? ", " : "", fp4s_qconfig_exclude_at(q, i));
    }
    /* the engine's verdict per module */
    for (size_t i = 0; i < nm; i++) {
        rc = fp4s_qconfig_excludes(q, m[i].name, names, nm, &m[i].entry);
        if (rc < 0) {
            m[i].engine = -1;
            snprintf(m[i].refuse, sizeof m[i].refuse, "%s", fp4s_last_error());
        } else {
            m[i].engine = rc;
        }
    }
    /* units */
    size_t nu = 0;
    unit *u = xcalloc(nm, sizeof *u);
    for (size_t i = 0; i < nm; i++) {
        char k[300];
        unit_key(m[i].name, k, sizeof k);
        if (nu && strcmp(u[nu - 1].key, k) == 0) {
            u[nu - 1].n++;
            continue;
        }
        snprintf(u[nu].key, sizeof u[nu].key, "%s", k);
        u[nu].first = i;
        u[nu].n = 1;
        nu++;
    }
    /* the trainer side */
    size_t nt;
    tmod *t = read_trainer(trainer, tfmt, tprof, &nt);
    for (size_t i = 0; i < nt; i++) {
        char tk[300];
        unit_key(t[i].name, tk, sizeof tk);
        bool pattern = strpbrk(t[i].name, "*?[") != NULL;
        for (size_t k = 0; k < nu; k++) {
            bool hit = pattern ? fnmatch(t[i].name, u[k].key, 0) == 0 ||
                                     fnmatch(strip_model(t[i].name), u[k].key, 0) == 0
                               : strcmp(tk, u[k].key) == 0;
            for (size_t s = 0; !hit && pattern && s < u[k].n; s++)
                hit = fnmatch(t[i].name, m[u[k].first + s].name, 0) == 0;
            if (!hit) continue;
            t[i].used = true;
            u[k].trainer = true;
            snprintf(u[k].tfmt, sizeof u[k].tfmt, "%s", t[i].fmt);
            snprintf(u[k].tprof, sizeof u[k].tprof, "%s", t[i].prof);
        }
        if (!t[i].used)
            cli_die(FP4S_EXIT_INPUT, "%s: %s names no linear module of the checkpoint %s", trainer, t[i].name, path);
    }
    /* the disagreements */
    size_t bad = 0;
    for (size_t k = 0; k < nu; k++) {
        unit *x = &u[k];
        const mod *s = &m[x->first];
        bool ro = rollout_quantized(s, x->n), any_fp4 = false, all_fp4 = true;
        for (size_t j = 0; j < x->n; j++) {
            any_fp4 |= s[j].w != NULL;
            all_fp4 &= s[j].w != NULL;
            if (s[j].engine < 0) add_problem(x, "%s", s[j].refuse);
        }
        if (x->trainer && !ro) add_problem(x, "quantized by the trainer only");
        if (!x->trainer && ro) add_problem(x, "quantized by the rollout only");
        if (any_fp4 && !all_fp4) add_problem(x, "some shards hold FP4 weights, others BF16");
        for (size_t j = 0; j < x->n; j++) {
            if (s[j].w && s[j].engine == 1)
                add_problem(x, "%s holds FP4 weights the config excludes (%s)", s[j].name,
                            s[j].entry == SIZE_MAX ? "the method quantizes MoE experts only"
                                                   : fp4s_qconfig_exclude_at(q, s[j].entry));
            if (!s[j].w && s[j].engine == 0)
                add_problem(x, "the config quantizes %s but the checkpoint holds it unquantized", s[j].name);
        }
        if (x->trainer && ro && strcmp(x->tfmt, "?")) {
            const char *rf = fp4s_format_name(s[0].w ? s[0].w->format : FP4S_NVFP4);
            for (size_t j = 0; j < x->n; j++)
                if (s[j].w) rf = fp4s_format_name(s[j].w->format);
            if (strcasecmp(x->tfmt, rf)) add_problem(x, "format: trainer %s, rollout %s", x->tfmt, rf);
        }
        /* fused shards: one global (and input) scale, or vLLM takes the largest for all */
        double g0 = 0, i0 = 0;
        bool gd = false, id = false;
        for (size_t j = 0; j < x->n; j++) {
            if (!s[j].w || s[j].w->format != FP4S_NVFP4) continue;
            double g = fp4s_ckpt_global_scale(c, s[j].w, s[j].expert), in = s[j].w->input_scale;
            if (g0 == 0) g0 = g, i0 = in;
            gd |= (float)g != (float)g0;
            id |= (float)in != (float)i0;
        }
        if (gd) add_problem(x, "fused shards scaled differently (weight_scale_2 differs: vLLM uses the largest for all)");
        if (id) add_problem(x, "fused shards with different input_scale (vLLM uses the largest)");
        bad += x->problems[0] != '\0';
    }
    /* output */
    int status;
    if (common.json) {
        json_t *j = json_object(), *a = json_array();
        json_object_set_new(j, "checkpoint", json_string(path));
        json_object_set_new(j, "config", json_string(fp4s_qconfig_path(q)));
        json_object_set_new(j, "method", json_string(fp4s_qconfig_method_name(fp4s_qconfig_method_of(q))));
        json_object_set_new(j, "quant_algo", json_string(fp4s_qconfig_algo(q)));
        json_object_set_new(j, "trainer", json_string(trainer));
        for (size_t k = 0; k < nu; k++) {
            const unit *x = &u[k];
            json_t *o = json_object(), *sh = json_array();
            json_object_set_new(o, "layer", json_string(x->key));
            json_object_set_new(o, "trainer_quantized", json_boolean(x->trainer));
            json_object_set_new(o, "trainer_format", x->trainer ? json_string(x->tfmt) : json_null());
            json_object_set_new(o, "trainer_profile", x->trainer ? json_string(x->tprof) : json_null());
            json_object_set_new(o, "rollout_quantized", json_boolean(rollout_quantized(&m[x->first], x->n)));
            for (size_t s = 0; s < x->n; s++) {
                const mod *md = &m[x->first + s];
                json_t *so = json_object();
                json_object_set_new(so, "module", json_string(md->name));
                json_object_set_new(so, "layout", md->w ? json_string(fp4s_ckpt_layout_name(md->w->layout)) : json_null());
                json_object_set_new(so, "global_scale", md->w && md->w->format == FP4S_NVFP4
                                                            ? cli_json_real(fp4s_ckpt_global_scale(c, md->w, md->expert))
                                                            : json_null());
                json_object_set_new(so, "input_scale",
                                    md->w && md->w->input_scale > 0 ? cli_json_real(md->w->input_scale) : json_null());
                json_object_set_new(so, "engine", json_string(md->engine < 0 ? "refused" : md->engine ? "unquantized"
                                                                                                       : "quantized"));
                json_object_set_new(so, "excluded_by", md->engine == 1 && md->entry != SIZE_MAX
                                                           ? json_string(fp4s_qconfig_exclude_at(q, md->entry))
                                                           : json_null());
                json_array_append_new(sh, so);
            }
            json_object_set_new(o, "shards", sh);
            json_object_set_new(o, "problems", x->problems[0] ? json_string(x->problems) : json_null());
            json_array_append_new(a, o);
        }
        json_object_set_new(j, "layers", a);
        json_object_set_new(j, "disagreements", json_integer((json_int_t)bad));
        json_object_set_new(j, "unmatched_patterns", json_string(unmatched));
        status = cli_json_print(j);
    } else if (common.csv) {
        printf("layer,module,trainer_quantized,trainer_format,trainer_profile,layout,global_scale,input_scale,engine,"
               "excluded_by,problems\n");
        for (size_t k = 0; k < nu; k++)
            for (size_t s = 0; s < u[k].n; s++) {
                const mod *md = &m[u[k].first + s];
                cli_csv_str(u[k].key);
                putchar(',');
                cli_csv_str(md->name);
                printf(",%d,%s,%s,%s,", u[k].trainer, u[k].trainer ? u[k].tfmt : "", u[k].trainer ? u[k].tprof : "",
                       md->w ? fp4s_ckpt_layout_name(md->w->layout) : "");
                if (md->w && md->w->format == FP4S_NVFP4) printf("%.9g", fp4s_ckpt_global_scale(c, md->w, md->expert));
                putchar(',');
                if (md->w && md->w->input_scale > 0) printf("%.9g", md->w->input_scale);
                printf(",%s,", md->engine < 0 ? "refused" : md->engine ? "unquantized" : "quantized");
                cli_csv_str(md->engine == 1 && md->entry != SIZE_MAX ? fp4s_qconfig_exclude_at(q, md->entry) : "");
                putchar(',');
                cli_csv_str(u[k].problems);
                putchar('\n');
            }
        status = cli_stdout_flush();
    } else {
        printf("%s: %s %s (%s), %s activations; trainer %s\n", path, fp4s_qconfig_method_name(fp4s_qconfig_method_of(q)),
               fp4s_qconfig_algo(q)[0] ? fp4s_qconfig_algo(q) : "?", fp4s_qconfig_path(q),
               fp4s_qconfig_weight_only(q) ? "unquantized (weight-only)"
                                           : fp4s_qconfig_static_input(q) ? "static-scale" : "dynamic-scale",
               trainer);
        printf("  %-48s %-16s %-30s %s\n", "layer", "trainer", "rollout (engine: vLLM's rule)", "");
        for (size_t k = 0; k < nu; k++) {
            const unit *x = &u[k];
            const mod *s = &m[x->first];
            char tr[64], ro[200];
            if (x->trainer) snprintf(tr, sizeof tr, "%s/%s", x->tfmt, x->tprof);
            else snprintf(tr, sizeof tr, "bf16");
            bool rq = rollout_quantized(s, x->n);
            const mod *fq = NULL;
            for (size_t j = 0; j < x->n && !fq; j++)
                if (s[j].w) fq = &s[j];
            if (rq && fq)
                snprintf(ro, sizeof ro, "%s%s", fp4s_ckpt_layout_name(fq->w->layout),
                         fq->w->input_scale > 0 ? " static-act" : "");
            else if (s[0].engine == 1 && s[0].entry != SIZE_MAX)
                snprintf(ro, sizeof ro, "bf16 (excluded: %s)", fp4s_qconfig_exclude_at(q, s[0].entry));
            else
                snprintf(ro, sizeof ro, "bf16");
            printf("  %-48s %-16s %-30s %s\n", x->key, tr, ro, x->problems[0] ? "DISAGREE" : "ok");
            if (x->problems[0]) printf("      %s\n", x->problems);
        }
        if (unmatched[0]) printf("config patterns that match no module: %s\n", unmatched);
        printf("%zu of %zu layers disagree\n", bad, nu);
        status = cli_stdout_flush();
    }
    free(t);
    free(u);
    free(names);
    free(m);
    fp4s_qconfig_close(&q);
    fp4s_ckpt_close(&c);
    if (status) return status;
    return check && bad ? FP4S_EXIT_CHECK : 0;
}
