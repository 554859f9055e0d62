/* fp4-batch: batch coupling. A token's NVFP4 codes under one tensor scale
 * per batch depend on which tokens share the batch's amax; the trainer packs
 * sequences into micro-batches, the rollout engine batches them by decode
 * step. Every activation row is re-quantized under both compositions and what
 * changes only because of who shares the amax is counted, per site and step
 * (man/fp4-batch.1). The sites are the unit walker's (units.h), a unit's
 * results are fp4s_batch_result records (one per rollout plan), moved over
 * MPI ranks as bytes and rendered from the record table. */
#include "cli.h"
#include "par.h"
#include "out/out.h"

#include <fp4scope/batch.h>
#include <fp4scope/capture.h>
#include <fp4scope/quant.h>
#include <fp4scope/record.h>
#include <fp4scope/tensor.h>
#include <fp4scope/units.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_text(void)
{
    printf(
        "Usage: fp4-batch [OPTION]... CAPTURE.h5 [--sites GLOB] [--steps LIST]\n"
        "       fp4-batch [OPTION]... --act X [--ids IDS | --seq-len N] [--weight W [--lm-head]]\n"
        "Batch coupling: every activation row re-quantized under the trainer's batch\n"
        "composition and under the rollout's; the codes, block scales and output that\n"
        "change only because of which tokens share the tensor amax, per site and step.\n"
        "A row-scaled (per-token) spec shows none.\n"
        "\n"
        "Quantizer (a profile fills every rule; options override it):\n");
    cli_quant_usage(CLI_FORMATS_FP4);
    printf(
        "\n"
        "Compositions (PLAN: packed:TOKENS, decode:SEQS, tensor, row; or FILE of\n"
        "\"SEQ POS GROUP\" lines):\n"
        "      --trainer PLAN    the trainer's batches (default packed:4096: whole\n"
        "                        sequences packed into micro-batches of 4096 tokens)\n"
        "      --rollout PLAN[,PLAN...]  the rollout's (default decode:64: the tokens at\n"
        "                        one position of 64 sequences decoded together); each\n"
        "                        PLAN is compared with --trainer\n"
        "Token ids (sequence, position) of the rows:\n"
        "      --ids IDS         [rows, 2] tensor of (sequence, position) for --act\n"
        "      --seq-len N       rows without ids (a capture side's own ids come first):\n"
        "                        row i is position i mod N of sequence i / N\n"
        "Inputs:\n"
        CLI_HELP_SELECT
        "      --side S          the capture side re-quantized: rollout (default) or trainer\n"
        "      --act X           one tensor of activations instead of a capture\n"
        "      --weight W        the site's weight [N, K]: the output difference\n"
        "      --lm-head         W is the LM head: the change of each row's log-prob\n"
        "      --tokens T        with --lm-head: each row's sampled token (default: the\n"
        "                        argmax of the trainer composition's logits)\n"
        "Output:\n"
        "      --json, --csv     JSON or CSV (one line per plan, step and site) on stdout\n"
        "      --quiet           no progress line on stderr\n"
        "      --threads N       worker threads (default: all CPUs)\n"
        "      --help, --version\n"
        "\n"
        "Exit status: 0 ok, 2 usage, 3 input missing, unreadable or malformed,\n"
        "5 internal error.\n");
}

enum { OPT_FIRST_ = 256, OPT_TRAINER, OPT_ROLLOUT, OPT_IDS, OPT_SEQ_LEN, OPT_SIDE, OPT_LM_HEAD, OPT_TOKENS };

/* ---- compositions: a plan, or a file of (seq, pos, group) triples ---------------------- */
typedef struct comp {
    char name[256];
    fp4s_batch_plan plan;
    bool file;
    int64_t *tri; /* [n][3] sorted by (seq, pos) */
    size_t n;
} comp;

static int cmp_tri(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static void comp_load_file(comp *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) cli_die(FP4S_EXIT_INPUT, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1024;
    c->tri = xmalloc(cap * 3 * sizeof *c->tri);
    char line[512];
    size_t ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\0') continue;
        long long v[3];
        char tail[2];
        if (sscanf(p, "%lld %lld %lld %1s", &v[0], &v[1], &v[2], tail) != 3 || v[0] < 0 || v[1] < 0) {
            fclose(f);
            cli_die(FP4S_EXIT_INPUT, "%s:%zu: expected \"SEQ POS GROUP\" (three integers, ids >= 0)", path, ln);
        }
        if (c->n == cap) c->tri = xrealloc(c->tri, (cap *= 2) * 3 * sizeof *c->tri);
        for (int k = 0; k < 3; k++) c->tri[c->n * 3 + k] = v[k];
        c->n++;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) cli_die(FP4S_EXIT_INPUT, "%s: read error", path);
    if (c->n == 0) cli_die(FP4S_EXIT_INPUT, "%s: no groups (expected \"SEQ POS GROUP\" lines)", path);
    qsort(c->tri, c->n, 3 * sizeof *c->tri, cmp_tri);
    for (size_t i = 1; i < c->n; i++)
        if (c->tri[3 * i] == c->tri[3 * i - 3] && c->tri[3 * i + 1] == c->tri[3 * i - 2])
            cli_die(FP4S_EXIT_INPUT, "%s: token (%lld, %lld) is in two groups", path, (long long)c->tri[3 * i],
                    (long long)c->tri[3 * i + 1]);
    c->file = true;
}

static void comp_parse(comp *c, const char *arg, const char *opt)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", arg);
    if (!fp4s_batch_plan_parse(arg, &c->plan)) return;
    /* not a plan: a file of groups, if it looks like a path */
    if (strchr(arg, '/') || strchr(arg, '.')) {
        comp_load_file(c, arg);
        return;
    }
    cli_usage("%s: %s", opt, fp4s_last_error());
}

/* The group of each row under composition c. */
static void comp_groups(const comp *c, const int64_t *seq, const int64_t *pos, size_t rows, int64_t *g,
                        const char *what)
{
    if (!c->file) {
        int rc = fp4s_batch_groups(&c->plan, seq, pos, rows, g);
        if (rc) cli_failf(rc, "%s", what);
        return;
    }
    for (size_t i = 0; i < rows; i++) {
        int64_t key[3] = {seq[i], pos[i], 0};
        const int64_t *hit = bsearch(key, c->tri, c->n, 3 * sizeof *c->tri, cmp_tri);
        if (!hit)
            cli_die(FP4S_EXIT_INPUT, "%s: %s: token (%lld, %lld) of row %zu is in no group", c->name, what,
                    (long long)seq[i], (long long)pos[i], i);
        g[i] = hit[2];
    }
}

/* ---- the command line ------------------------------------------------------------------ */
typedef struct args {
    cli_common common;
    cli_quant qo;
    cli_analysis an;   /* --act, --weight, --sites, --steps */
    const char *capture, *trainer_s, *rollout_s, *ids, *tokens;
    bool trainer_side, lm_head;
    long long seq_len;
    comp tr;           /* the trainer's composition */
    comp *ro;          /* the rollout's, nro of them */
    size_t nro;
    fp4s_capture_entry *ents; /* the capture's listing (for the sides' token ids) */
    size_t nents;
} args;

static void parse_args(int argc, char **argv, args *a)
{
    cli_quant_init(&a->qo);
    cli_common_init(&a->common, usage_text, false);
    a->trainer_s = "packed:4096";
    a->rollout_s = "decode:64";
    static const struct option lo[] = {
        CLI_QUANT_LONGOPTS
        {"trainer", required_argument, NULL, OPT_TRAINER},
        {"rollout", required_argument, NULL, OPT_ROLLOUT},
        {"ids", required_argument, NULL, OPT_IDS},
        {"seq-len", required_argument, NULL, OPT_SEQ_LEN},
        {"side", required_argument, NULL, OPT_SIDE},
        {"act", required_argument, NULL, CLI_OPT_ACT},
        CLI_WEIGHT_LONGOPTS
        {"lm-head", no_argument, NULL, OPT_LM_HEAD},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        CLI_SELECT_LONGOPTS
        CLI_REPORT_LONGOPTS
        CLI_THREADS_LONGOPTS
        CLI_COMMON_LONGOPTS
        {"quiet", no_argument, NULL, CLI_OPT_QUIET},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = cli_getopt(argc, argv, "f:p:", lo)) != -1) {
        switch (c) {
        case OPT_TRAINER: a->trainer_s = optarg; break;
        case OPT_ROLLOUT: a->rollout_s = optarg; break;
        case OPT_IDS: a->ids = optarg; break;
        case OPT_SEQ_LEN: a->seq_len = cli_parse_int("--seq-len", optarg, 1, (long long)1 << 40); break;
        case OPT_SIDE:
            if (strcmp(optarg, "rollout") && strcmp(optarg, "trainer"))
                cli_usage("--side: expected rollout or trainer, got '%s'", optarg);
            a->trainer_side = !strcmp(optarg, "trainer");
            break;
        case OPT_LM_HEAD: a->lm_head = true; break;
        case OPT_TOKENS: a->tokens = optarg; break;
        default: cli_option_rest(c, optarg, argv, &a->common, &a->qo, &a->an);
        }
    }
    cli_common_check(&a->common);
    const cli_analysis *an = &a->an;
    const bool capture_mode = an->act == NULL;
    if (capture_mode && optind >= argc) cli_usage("no CAPTURE.h5 given (or --act X)");
    if (!capture_mode && optind < argc) cli_usage("--act takes no CAPTURE argument ('%s')", argv[optind]);
    if (capture_mode && optind + 1 < argc) cli_usage("one CAPTURE expected, got %d", argc - optind);
    if (capture_mode && (a->ids || an->weight || a->tokens)) cli_usage("--ids, --weight and --tokens go with --act");
    if (!capture_mode && (an->sites || an->steps)) cli_usage("--sites and --steps select capture sites, not --act");
    if (a->ids && a->seq_len) cli_usage("--ids and --seq-len exclude each other");
    if (!capture_mode && !a->ids && !a->seq_len) cli_usage("--act needs --ids IDS or --seq-len N");
    if (a->lm_head && !an->weight && !capture_mode) cli_usage("--lm-head needs --weight W");
    if (a->tokens && !a->lm_head) cli_usage("--tokens goes with --lm-head");
    a->capture = capture_mode ? argv[optind] : NULL;
    comp_parse(&a->tr, a->trainer_s, "--trainer");
    char *dup = xstrdup(a->rollout_s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        a->ro = xrealloc(a->ro, (a->nro + 1) * sizeof *a->ro);
        comp_parse(&a->ro[a->nro++], t, "--rollout");
    }
    free(dup);
    if (a->nro == 0) cli_usage("--rollout: no PLAN given");
}

/* ---- one unit: its rows under the trainer's composition and each rollout plan ----------- */

/* Refuses ids [m, 2] (freeing them) unless every row is a pair of integers 0 to 2^24. */
static void check_ids(float *ids, size_t m, const char *what)
{
    for (size_t i = 0; i < m; i++) {
        float s = ids[2 * i], p = ids[2 * i + 1];
        if (!(s >= 0 && p >= 0 && s < 16777216.0f && p < 16777216.0f) || s != floorf(s) || p != floorf(p)) {
            free(ids);
            cli_die(FP4S_EXIT_INPUT, "%s: row %zu: id (%g, %g) is not a pair of integers 0 to 2^24", what, i,
                    (double)s, (double)p);
        }
    }
}

/* (sequence, position) of each of m rows: from checked ids [m, 2], or from the row
 * index and --seq-len */
static void row_ids(const float *ids, size_t m, long long seq_len, int64_t *seq, int64_t *pos)
{
    for (size_t i = 0; i < m; i++) {
        if (ids) {
            float s = ids[2 * i], p = ids[2 * i + 1];
            seq[i] = (int64_t)s;
            pos[i] = (int64_t)p;
        } else {
            seq[i] = (int64_t)(i / (size_t)seq_len);
            pos[i] = (int64_t)(i % (size_t)seq_len);
        }
    }
}

/* --tokens: one vocabulary index per row (NULL when not given) */
static int64_t *read_tokens(const char *src, size_t m, size_t vocab)
{
    float *tf = NULL;
    size_t mt, kt;
    int rc = fp4s_source_read_all(src, &tf, &mt, &kt);
    if (rc) cli_failf(rc, "tokens");
    if (mt * kt != m) {
        free(tf);
        cli_die(FP4S_EXIT_INPUT, "%s: %zu tokens for %zu rows", src, mt * kt, m);
    }
    int64_t *tok = xmalloc(m * sizeof *tok);
    for (size_t i = 0; i < m; i++) {
        if (!(tf[i] >= 0) || tf[i] != floorf(tf[i]) || tf[i] >= (float)vocab) {
            double bad = (double)tf[i];
            free(tf);
            free(tok);
            cli_die(FP4S_EXIT_INPUT, "%s: token %zu (%g) is not an index into the vocabulary of %zu", src, i, bad,
                    vocab);
        }
        tok[i] = (int64_t)tf[i];
    }
    free(tf);
    return tok;
}

/* The capture entry of a unit's side (trainer or rollout). */
static const fp4s_capture_entry *side_entry(const args *a, const fp4s_unit *u)
{
    const char *side = a->trainer_side ? "trainer" : "rollout";
    for (size_t i = 0; i < a->nents; i++) {
        const fp4s_capture_entry *e = &a->ents[i];
        if (e->step == u->step && !strcmp(e->site, u->site) && !strcmp(e->side, side)) return e;
    }
    cli_die(FP4S_EXIT_INTERNAL, "%s: site %s step %lld: no %s side in the listing", a->capture, u->site,
            (long long)u->step, side);
}

/* (sequence, position) of each of m rows: the capture side's own ids, else --ids, else --seq-len.
 * *seqp and *posp are allocated only once the ids are known good: every refusal before that
 * exits with nothing of this unit's left allocated. */
static void unit_ids(const args *a, const fp4s_unit *u, const fp4s_capture_entry *e, size_t m, int64_t **seqp,
                     int64_t **posp)
{
    int rc;
    int64_t *seq, *pos;
    if (e) {
        int64_t *ids = NULL;
        size_t n = 0;
        rc = fp4s_capture_read_ids(a->capture, e, &ids, &n);
        if (rc == 0 && n == m) {
            *seqp = seq = xmalloc(m * sizeof *seq);
            *posp = pos = xmalloc(m * sizeof *pos);
            for (size_t i = 0; i < m; i++) {
                seq[i] = ids[2 * i];
                pos[i] = ids[2 * i + 1];
            }
            free(ids);
            return;
        }
        free(ids);
        if (rc == 0)
            cli_die(FP4S_EXIT_INPUT, "%s: %s%s: %zu ids for %zu rows", a->capture, e->path, FP4S_CAPTURE_IDS_SUFFIX, n,
                    m);
        if (rc != FP4S_ENOTFOUND) cli_fail(rc);
        if (!a->seq_len)
            cli_die(FP4S_EXIT_INPUT, "%s: site %s step %lld: the %s side carries no token ids (%s%s): give --seq-len N",
                    a->capture, u->site, (long long)u->step, e->side, e->path, FP4S_CAPTURE_IDS_SUFFIX);
    }
    float *ids = NULL;
    if (a->ids) {
        size_t mi, ki;
        if ((rc = fp4s_source_read_all(a->ids, &ids, &mi, &ki))) cli_failf(rc, "ids");
        if (mi != m || ki != 2) {
            free(ids);
            cli_die(FP4S_EXIT_INPUT, "%s: ids are [%zu, %zu]; the activations %s need [%zu, 2]", a->ids, mi, ki,
                    u->x, m);
        }
        check_ids(ids, m, a->ids);
    }
    *seqp = seq = xmalloc(m * sizeof *seq);
    *posp = pos = xmalloc(m * sizeof *pos);
    row_ids(ids, m, a->seq_len, seq, pos);
    free(ids);
}

/* res[p]: the unit's rows under the trainer's composition against rollout plan p */
static void eval_unit(const args *a, const fp4s_spec *spec, const fp4s_unit *u, fp4s_batch_result *res)
{
    /* only the side asked for is read: with token ids the other side may hold other rows (routing flips) */
    const fp4s_capture_entry *e = a->capture ? side_entry(a, u) : NULL;
    fp4s_unit v = *u;
    if (a->trainer_side) {
        v.x = u->xt;
        v.m = e->rows;
    }
    v.xt = NULL;
    fp4s_unit_data d;
    int rc = fp4s_unit_read(&v, &d);
    if (rc) cli_fail(rc);
    const float *x = d.x;
    size_t m = d.m, k = d.k;
    int64_t *seq, *pos;
    unit_ids(a, u, e, m, &seq, &pos);
    int64_t *ga = xmalloc(m * sizeof *ga), *gb = xmalloc(m * sizeof *gb);
    fp4s_batch_opts o;
    fp4s_batch_opts_defaults(&o);
    o.w = d.w;
    o.n = d.n;
    o.lm_head = a->lm_head && d.w;
    int64_t *tok = a->tokens && o.lm_head ? read_tokens(a->tokens, m, d.n) : NULL;
    o.token = tok;
    comp_groups(&a->tr, seq, pos, m, ga, u->x);
    for (size_t p = 0; p < a->nro; p++) {
        comp_groups(&a->ro[p], seq, pos, m, gb, u->x);
        memset(&res[p], 0, sizeof res[p]);
        if ((rc = fp4s_batch_eval(spec, x, m, k, k, ga, gb, &o, &res[p], NULL))) cli_failf(rc, "%s", u->x);
    }
    fp4s_unit_data_free(&d);
    free(tok);
    free(seq);
    free(pos);
    free(ga);
    free(gb);
}

/* ---- MPI: a unit's nro records as bytes ------------------------------------------------- */
typedef struct gather {
    fp4s_batch_result *res;
    size_t nro;
} gather;

static void put_unit(void *ctx, size_t i, fp4s_buf *b)
{
    const gather *g = ctx;
    for (size_t p = 0; p < g->nro; p++)
        if (fp4s_record_put(b, fp4s_rtype_batch_result(), &g->res[i * g->nro + p]))
            cli_die(FP4S_EXIT_INTERNAL, "out of memory");
}

static void get_unit(void *ctx, size_t i, const unsigned char **pp, const unsigned char *end)
{
    const gather *g = ctx;
    for (size_t p = 0; p < g->nro; p++)
        if (fp4s_record_get(pp, end, fp4s_rtype_batch_result(), &g->res[i * g->nro + p]))
            cli_die(FP4S_EXIT_INTERNAL, "unit %zu: a rank's batch record is malformed", i);
}

/* ---- outputs ----------------------------------------------------------------------------- */
static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : NAN; }
static double rel(double a, double b) { return b > 0 ? sqrt(a / b) : NAN; }

/* the shares and relative differences derived from a record, in output order */
enum { D_CODE_SHARE, D_SCALE_SHARE, D_DEQ, D_OUT, D_LP_MEAN, D_LP_MAX, D_KL, D_COUNT };
static const char *const dname[D_COUNT] = {"code_flip_share", "scale_flip_share", "dequant_rel_diff",
                                           "output_rel_diff", "logprob_mean_abs_diff", "logprob_max_abs_diff",
                                           "kl_mean"};

static void derived(const fp4s_batch_result *r, double *v)
{
    double lp = r->lp_rows ? (double)r->lp_rows : NAN;
    v[D_CODE_SHARE] = ratio(r->code_flips, r->elements);
    v[D_SCALE_SHARE] = ratio(r->scale_flips, r->blocks);
    v[D_DEQ] = rel(r->deq_diff2, r->x2);
    v[D_OUT] = rel(r->out_diff2, r->out_ref2);
    v[D_LP_MEAN] = r->lp_sum_abs / lp;
    v[D_LP_MAX] = r->lp_rows ? r->lp_max_abs : NAN;
    v[D_KL] = r->kl_sum / lp;
}

static json_t *rec_json(const char *plan, const char *site, int64_t step, const fp4s_batch_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "rollout", json_string(plan));
    json_object_set_new(o, "site", site ? json_string(site) : json_null());
    json_object_set_new(o, "step", step >= 0 ? json_integer(step) : json_null());
    out_json_record(fp4s_rtype_batch_result(), r, o);
    double v[D_COUNT];
    derived(r, v);
    for (int q = 0; q < D_COUNT; q++) json_object_set_new(o, dname[q], cli_json_real(v[q]));
    return o;
}

static const char *unit_site(const fp4s_unit *u) { return u->site ? u->site : u->x; }

/* the sum of plan p's records over every unit */
static fp4s_batch_result plan_total(const fp4s_batch_result *res, size_t nu, size_t nro, size_t p)
{
    fp4s_batch_result t = {0};
    for (size_t i = 0; i < nu; i++) fp4s_batch_result_merge(&t, &res[i * nro + p]);
    return t;
}

static int print_json(const args *a, const char *desc, const fp4s_units *ul, const fp4s_batch_result *res)
{
    json_t *root = json_object(), *arr = json_array(), *tot = json_array();
    json_object_set_new(root, "spec", json_string(desc));
    json_object_set_new(root, "trainer", json_string(a->tr.name));
    for (size_t i = 0; i < ul->n; i++)
        for (size_t p = 0; p < a->nro; p++)
            json_array_append_new(arr, rec_json(a->ro[p].name, unit_site(&ul->u[i]), ul->u[i].step,
                                                &res[i * a->nro + p]));
    json_object_set_new(root, "sites", arr);
    for (size_t p = 0; p < a->nro; p++) {
        fp4s_batch_result t = plan_total(res, ul->n, a->nro, p);
        json_array_append_new(tot, rec_json(a->ro[p].name, NULL, -1, &t));
    }
    json_object_set_new(root, "totals", tot);
    return cli_json_print(root);
}

static int print_csv(const args *a, const fp4s_units *ul, const fp4s_batch_result *res)
{
    printf("rollout,step,site");
    out_csv_header(fp4s_rtype_batch_result(), NULL);
    for (int q = 0; q < D_COUNT; q++) printf(",%s", dname[q]);
    putchar('\n');
    for (size_t p = 0; p < a->nro; p++)
        for (size_t i = 0; i < ul->n; i++) {
            const fp4s_batch_result *r = &res[i * a->nro + p];
            cli_csv_str(a->ro[p].name);
            printf(",%lld,", (long long)ul->u[i].step);
            cli_csv_str(unit_site(&ul->u[i]));
            out_csv_record(fp4s_rtype_batch_result(), r);
            double v[D_COUNT];
            derived(r, v);
            for (int q = 0; q < D_COUNT; q++) {
                if (isfinite(v[q])) printf(",%.17g", v[q]);
                else putchar(',');
            }
            putchar('\n');
        }
    return cli_stdout_flush();
}

static void fmt(char *b, size_t n, const char *f, double v)
{
    if (isfinite(v)) snprintf(b, n, f, v);
    else snprintf(b, n, "-");
}

static void table_row(const char *st, const char *site, const fp4s_batch_result *r, bool lm)
{
    char g[48], a[24], b[24], c[24], d1[24], d2[24];
    double v[D_COUNT];
    derived(r, v);
    snprintf(g, sizeof g, "%llu/%llu", (unsigned long long)r->groups_a, (unsigned long long)r->groups_b);
    fmt(a, sizeof a, "%.3f%%", 100.0 * v[D_CODE_SHARE]);
    fmt(b, sizeof b, "%.3f%%", 100.0 * v[D_SCALE_SHARE]);
    fmt(c, sizeof c, "%.2f%%", 100.0 * ratio(r->rows_changed, r->rows));
    fmt(d1, sizeof d1, "%.4g", v[D_DEQ]);
    fmt(d2, sizeof d2, "%.4g", v[D_OUT]);
    printf("%6s  %-40s %7llu %9s %9s %9s %9s %10s %10s", st, site, (unsigned long long)r->rows, g, a, b, c, d1, d2);
    if (lm) {
        char l1[24], l2[24];
        fmt(l1, sizeof l1, "%.4g", v[D_LP_MEAN]);
        fmt(l2, sizeof l2, "%.4g", v[D_LP_MAX]);
        printf(" %9s %9s", l1, l2);
    }
    putchar('\n');
}

static int print_table(const args *a, const char *desc, const fp4s_units *ul, const fp4s_batch_result *res)
{
    printf("quantizer: %s\ntrainer composition: %s\n", desc, a->tr.name);
    for (size_t p = 0; p < a->nro; p++) {
        printf("\nrollout composition: %s\n", a->ro[p].name);
        printf("%6s  %-40s %7s %9s %9s %9s %9s %10s %10s", "step", "site", "rows", "groups", "codes", "scales",
               "rows", "deq", "output");
        if (a->lm_head) printf(" %9s %9s", "|dlp|", "max|dlp|");
        printf("\n%6s  %-40s %7s %9s %9s %9s %9s %10s %10s", "", "", "", "T/R", "flipped", "flipped", "changed",
               "rel.diff", "rel.diff");
        if (a->lm_head) printf(" %9s %9s", "mean", "");
        putchar('\n');
        for (size_t i = 0; i < ul->n; i++) {
            char st[24];
            if (ul->u[i].step >= 0) snprintf(st, sizeof st, "%lld", (long long)ul->u[i].step);
            else snprintf(st, sizeof st, "-");
            table_row(st, unit_site(&ul->u[i]), &res[i * a->nro + p], a->lm_head);
        }
        fp4s_batch_result t = plan_total(res, ul->n, a->nro, p);
        table_row("total", "(all)", &t, a->lm_head);
    }
    return cli_stdout_flush();
}

int main(int argc, char **argv)
{
    cli_init("fp4-batch");
    par_init();
    args a = {0};
    parse_args(argc, argv, &a);
    fp4s_spec spec;
    cli_quant_spec(&a.qo, CLI_FORMATS_FP4, "batch coupling is", &spec);
    const char *inputs[] = {a.capture, a.an.act, a.an.weight, a.ids, a.tokens};
    for (int i = 0; i < 5; i++)
        if (inputs[i]) cli_input(inputs[i]);

    /* the units: one tensor, or the capture's (step, site) pairs with the side asked for */
    fp4s_units ul = {0};
    bool syn;
    int rc;
    fp4s_unit_need need_tr = a.trainer_side ? FP4S_UNIT_SKIP : FP4S_UNIT_OPTIONAL;
    cli_units(a.capture, &a.an, need_tr, FP4S_UNIT_OPTIONAL, a.trainer_side ? "with trainer activations " : "", "",
              " (only rollout sides there)", &ul, &syn);
    if (a.capture && (rc = fp4s_capture_list(a.capture, &a.ents, &a.nents))) exit(cli_report(rc));
    fp4s_batch_result *res = xcalloc(ul.n * a.nro, sizeof *res);
    cli_progress_begin(a.capture ? a.capture : a.an.act);
    for (size_t i = 0; i < ul.n; i++) {
        if (par_mine(i)) eval_unit(&a, &spec, &ul.u[i], &res[i * a.nro]); /* over MPI ranks: this rank's units */
        cli_progress(i + 1, ul.n);
    }
    cli_progress_end();
    gather g = {res, a.nro};
    if (!par_gather_units(ul.n, put_unit, get_unit, &g)) return 0; /* rank 0 goes on with every unit */

    char desc[512];
    fp4s_spec_describe(&spec, desc, sizeof desc);
    int status;
    if (a.common.json) status = print_json(&a, desc, &ul, res);
    else if (a.common.csv) status = print_csv(&a, &ul, res);
    else status = print_table(&a, desc, &ul, res);
    fp4s_units_free(&ul);
    free(res);
    free(a.tr.tri);
    for (size_t p = 0; p < a.nro; p++) free(a.ro[p].tri);
    free(a.ro);
    free(a.ents);
    return status;
}
