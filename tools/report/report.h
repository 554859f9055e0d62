/* fp4-report's parts (not a library): the report directory written all or
 * none (outdir.c), HTML pages, tables with their CSV and figures with their
 * gnuplot script and data (html.c), the analyses through libfp4scope
 * (analyze.c), the main page's sections (sections.c) and the drill-down pages
 * site -> channel -> block (drill.c). fp4-report.c parses the command line. */
#ifndef FP4S_TOOLS_REPORT_H
#define FP4S_TOOLS_REPORT_H

#include "../plot/plot.h"

#include <fp4scope/advise.h>
#include <fp4scope/capture.h>
#include <fp4scope/channels.h>
#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/remedy.h>
#include <fp4scope/spec.h>
#include <fp4scope/record.h>
#include <fp4scope/units.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- outdir.c: the report directory ------------------------------------------------
 * Every file is written into a staging directory "<parent>/.<name>.XXXXXX"
 * beside REPORT_DIR; od_commit renames it into place with the asynchronous
 * signals blocked (an existing report is exchanged with it atomically, then
 * removed). Until then an interrupt, a signal or a failed exit removes the
 * staging directory: no half-written report appears. Checks at od_open (exit
 * 2, before any work): REPORT_DIR is not an input and holds none; if it
 * exists it is a directory that is empty, or (with --force) a report an
 * earlier fp4-report wrote (its MARKER file names the tool). */
#define OD_MARKER "fp4-report.json"
typedef struct outdir outdir;
/* Declare the inputs first (paths of files the run reads). */
void od_input(const char *path);
outdir *od_open(const char *target, bool force);
/* Path of a file of the report inside the staging directory (static buffer of
 * the caller). */
void od_path(const outdir *od, const char *rel, char *buf, size_t n);
void od_mkdir(outdir *od, const char *rel);
/* Write a whole file; exit 4 with a message on failure. */
void od_write(outdir *od, const char *rel, const char *data, size_t len);
/* Record a file another program wrote into the staging directory. */
void od_track(outdir *od, const char *rel);
const char *od_staging(const outdir *od);
const char *od_target(const outdir *od);
/* Rename into place: 0, or exit status 4 after a message. */
int od_commit(outdir *od);

/* ---- html.c: pages, tables, figures ------------------------------------------------ */
void html_esc(text *t, const char *s);                 /* &, <, >, ", ' escaped */
void html_escf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void html_begin(text *t, const char *title, const char *up); /* up: link back ("" none) */
void html_end(text *t);

/* A table: columns with a CSV name, an HTML heading and a number format
 * ("%.4g"; "pct": value x 100 with '%'; "int"; NULL: a string column). Cells
 * are added row by row; rt_emit writes DIR/ID.csv (every number with 17
 * significant digits) and the HTML table with a link to the CSV. */
typedef struct rt_col {
    const char *name, *head, *fmt, *title; /* title: tooltip text, may be NULL */
} rt_col;
typedef struct rt_cell {
    char *s;      /* string cell (owned) */
    double v;     /* number cell */
    char *href;   /* link (owned), or NULL */
    double shade; /* 0..1: background intensity, NaN for none */
    bool num;
    bool mark;    /* highlighted (the row one came from) */
} rt_cell;
typedef struct rtable {
    char id[128], title[256];
    const rt_col *cols;
    size_t ncol, ncell, cap; /* cells so far: rows = ncell / ncol */
    rt_cell *cells;
    size_t html_rows; /* rows shown in HTML (0 = all); the CSV has them all */
} rtable;
void rt_init(rtable *t, const char *id, const char *title, const rt_col *cols, size_t ncol);
void rt_s(rtable *t, const char *s);
void rt_n(rtable *t, double v);
void rt_link(rtable *t, const char *s, const char *href);
void rt_shade(rtable *t, double shade); /* of the last cell */
void rt_mark(rtable *t);                /* highlight the last cell */
/* Write DIR/ID.csv (dir "" = the report's top) and the HTML into page. */
void rt_emit(rtable *t, outdir *od, const char *dir, text *page);
void rt_free(rtable *t);

/* A figure: the data files and the script are written beside the image
 * (DIR/STEM.png, DIR/STEM.gp, DIR/STEM.*.dat) and gnuplot draws it in the
 * staging directory. Without gnuplot the script and data are written, the page
 * says how to draw the image, and a note goes to stderr once. */
typedef struct fig {
    char dir[256], stem[128];
    int width, height;
    text script;
} fig;
void fig_init(fig *f, const char *dir, const char *stem, int width, int height);
/* Write a data file STEM.SERIES.dat; returns its base name (static per call:
 * copy it into the script at once). */
const char *fig_data(fig *f, outdir *od, const char *series, const text *data);
/* Write the script, add <figure> with the caption to page; the image is drawn
 * by figs_draw (all figures in one gnuplot run, exit 4 when it fails). */
void fig_emit(fig *f, outdir *od, text *page, const char *caption);
void figs_draw(outdir *od);
int figs_missing(void); /* figures not drawn (no gnuplot, or gnuplot failed) */

/* ---- analyze.c: the analyses --------------------------------------------------------- */
typedef struct unit {       /* one (capture, step, site) with a rollout side */
    const fp4s_unit *wu;    /* the walker's unit (report.ul) */
    size_t cap;             /* index into the captures */
    int64_t step;
    const char *site;       /* these alias wu's */
    const char *xr, *xt, *w; /* source specs (xt, w NULL when absent) */
    size_t m, k, n;         /* shape of X and of W (n = 0 without W) */
    bool have_decomp, have_cmp, have_rem;
    fp4s_decomp_result dec; /* rollout activations under the spec */
    fp4s_compare_site cmp;  /* trainer vs rollout (needs xt and w) */
    fp4s_remedy_site rsite; /* remedies (needs w) */
    fp4s_remedy_result *rres;
    char *unavail;          /* the comparison or remedies are not built in: why (its first unit per rank) */
    bool have_fp8;          /* the site in FP8 (W8A8, the FP8 default profile): naive "none" */
    fp4s_remedy_result fp8;
} unit;

typedef struct disagree {   /* one (site, tensor, profile) */
    size_t site;            /* index into sites */
    const char *tensor;     /* "rollout" or "weight" */
    const char *profile;
    uint64_t n, differ, blocks, blocks_differ;
    double rel_diff;        /* ||Q_p - Q_ref|| / ||Q_ref|| */
} disagree;

typedef struct site_sum {   /* one site over its steps */
    char *site;
    size_t cap;
    size_t first_unit;      /* its unit with the first step */
    size_t nunits;
    double err2, x2;        /* decomposition energies pooled over steps */
    double e_scale, e_dz, e_grid, e_cross;
    fp4s_channels_report *ch; /* at the first step with a weight (or without), NULL if none */
    size_t ch_unit;
    double mismatch2, cmp_ref2; /* pooled compare */
    double cmp_contrib[FP4S_CMP_COUNT];
} site_sum;

typedef struct mm_row {     /* one mismatch run */
    fp4s_mm_run *run;
    double *v;              /* the metric per step */
    int64_t *st;            /* the steps */
    size_t nvalid;          /* steps with a finite value */
    int other;              /* nvalid = 0: a metric id the run has (for the hint), or -1 */
    bool have_onset, have_cp, have_trend;
    fp4s_mm_onset onset;
    fp4s_mm_changepoint cp;
    fp4s_mm_trend trend;
} mm_row;

typedef struct report_opts {
    const char *const *captures;
    size_t ncaptures;
    const char *const *traces;
    size_t ntraces;
    const char *const *names; /* display names of the captures (base names, or "demo") */
    fp4s_spec spec, wspec;
    fp4s_spec fp8spec;        /* FP8 (its default profile), for each site's "in FP8 instead" */
    const char *profiles;     /* NULL: every profile of the format */
    const char *sites, *steps_s;
    long long *steps;
    size_t nsteps;
    const char *remedy;
    const char *metric;
    const char *accel;
    const char *title;
    fp4s_trainer trainer;     /* what the shares are against (--trainer; default bf16) */
    const char *trainer_src;  /* where that came from ("--trainer", "the default") */
    const char *quant_src;    /* where the rollout's quantizer came from (-f/-p, the capture, the default) */
    bool quant_recorded, trainer_recorded; /* from the capture's root attributes */
    char cap_quant[100], cap_trainer[32]; /* what the capture records ("nvfp4 vllm", "wfq"; "" nothing) */
    const char *trainer_profile; /* the trainer's quantizer (--trainer-profile or the capture's; NULL: not known) */
    bool trainer_profile_recorded;
    double target;            /* --target: relative output error a site must get under (NaN: the default) */
    size_t top, drill;
    fp4s_mm_opts mo;
    fp4s_trace_opts to;
    fp4s_mm_onset_opts oo;
    bool demo;
    bool strict;              /* --strict: a (step, site) whose sides cannot be paired fails the run */
    const char *cmdline;
} report_opts;

typedef struct report {
    const report_opts *o;
    outdir *od;
    fp4s_units ul;            /* the walker's list */
    unit *units;
    size_t nunits;
    site_sum *sites;
    size_t nsites;
    disagree *dis;
    size_t ndis;
    char **profiles;          /* compared against o->spec's profile */
    size_t nprofiles;
    fp4s_remedy *rem;
    size_t nrem;
    const fp4s_accel *acc;
    const char *rem_unavailable; /* why the remedies/compare are missing (NULL: present) */
    fp4s_mm_result mm;
    mm_row *mmr;
    size_t nmm;
    int mm_metric;            /* id, or -1 for a scalar column */
    bool synthetic;
    size_t *order;            /* sites, worst first: by share of the output mismatch against the trainer
                               * (advice.c) when the remedies ran, else by relative error */
    bool by_share;            /* order is by share */
    struct site_advice *adv;  /* per site (advice.c), NULL without remedies */
    double target;            /* the target in force, and where it comes from */
    char target_src[256];
    bool none_added;          /* "none" was added to the remedy list for the shares */
    char **left;              /* sites left out ("site (K = 40)"): K not a multiple of the block */
    size_t nleft;
    int stage, nstages;       /* the analysis running, of how many (report_analyze; the writing is the last) */
    size_t nskipped;          /* (step, site) pairs left out: sides that cannot be paired */
    int ncmp;                 /* compare components shown: routing only where some unit is paired by id */
} report;

/* "fp4-report: <line>" on stderr for each step of the work, unless --quiet. */
extern bool rep_quiet;
void rep_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with "[stage/nstages] " before it (report.stage, nstages). */
struct report;
void rep_step(const struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void analyze_units(report *r);        /* units, decomposition, compare, remedies */
void analyze_sites(report *r);        /* pooled per site, channels, order */
void analyze_disagreement(report *r); /* profiles */
void analyze_mismatch(report *r);     /* captures' log-probs and the traces */

/* ---- advice.c: what to do about each site (fp4scope/advise.h) ----------------------------- */
typedef struct site_advice {
    bool have;                /* remedies ran on the site */
    double err2, ref2;        /* naive W4A4 against the trainer, pooled over steps */
    double share, rel;        /* of the output mismatch; relative error */
    double act_only, weight_only, input; /* each cause alone (pooled RMS) */
    fp4s_error_source dominant;
    double fp8_err;           /* the site in FP8 against the same kind of trainer (NaN: not run) */
    double target;            /* the relative output error the advice must reach */
    double *err, *vs_w4a4, *vs_fp8, *vs_bf16; /* per remedy (r->nrem) */
    fp4s_advice adv;
} site_advice;
void analyze_advice(report *r);       /* after analyze_sites: shares, order, advice */
/* The advised fix of a site as words ("rac:0.05", "FP8 for this layer", "keep W4A4"). */
const char *advice_label(const report *r, size_t site, char *buf, size_t n);
void write_summary_json(const report *r, json_t *j); /* fp4-report.json's "summary" */
void advice_free(report *r);
void report_free(report *r);

/* ---- summary.c: the summary and what the sections share ----------------------------- */
void site_label(const report *r, size_t s, char *buf, size_t n); /* "site" or "capture: site" */
void site_cell(report *r, rtable *t, size_t s);  /* the label, linked to its drill-down page */
double share(double a, double tot);              /* a / tot, NaN when tot is not > 0 */
size_t channels_for(const fp4s_channels_report *c, double frac); /* top channels holding frac */
double top_share(const fp4s_channels_report *c, size_t kk);      /* share the top kk hold */
/* One remedy pooled over every (step, site) it ran on. */
typedef struct rem_pool {
    double err2_bf16, ref2_bf16, err2_wfq, ref2_wfq, err2_own, ref2_own;
    double flops_base, flops_extra, flops_eq, bytes_base, bytes_extra;
    double secs, base_secs, fp8_secs, bf16_secs, act_err, act_bits;
    size_t n;
} rem_pool;
rem_pool *pool_remedies(const report *r);        /* r->nrem entries (free) */
double pool_err(const rem_pool *p);              /* output error vs the BF16 trainer */
double pool_err_wfq(const rem_pool *p);          /* ... vs the aligned wfq trainer */
double pool_flops(const rem_pool *p);            /* extra FP4-equivalent FLOPs / W4A4's */
void write_summary(report *r, text *pg, const rem_pool *rp);
/* Trainer vs rollout quantizer agreement (--trainer, --trainer-profile and the
 * profiles' disagreement): the summary's line and fp4-report.json's. */
typedef enum agree_status {
    AGREE_BF16,       /* a BF16 trainer quantizes nothing */
    AGREE_UNKNOWN,    /* the trainer's quantizer is not known */
    AGREE_SAME,       /* the same profile */
    AGREE_TRANSFORM,  /* one rotates (RHT), the other does not: not compared value by value */
    AGREE_COMPARED
} agree_status;
typedef struct agreement {
    agree_status status;
    const char *rotated, *plain; /* AGREE_TRANSFORM */
    uint64_t differ[2];          /* values that differ: rollout activations, weights */
    double frac[2], bfrac[2];    /* of the values, of the blocks */
    size_t worst;                /* the site of the largest share of differing values, or SIZE_MAX */
} agreement;
void agreement_of(const report *r, agreement *a);
const char *agree_status_name(agree_status s);

/* ---- sections.c / drill.c ------------------------------------------------------------ */
/* Every section's analysis, stage by stage (sections.c: the sections as rows). */
void report_analyze(report *r);
void write_index(report *r);
void write_drill(report *r);          /* the pages of the worst o->drill sites */
/* The relative file name of a site's drill-down page ("" when it has none). */
const char *drill_href(const report *r, size_t site);

/* "1.23e-04" style formatting of one value into buf. */
const char *fmtnum(char *buf, size_t n, const char *fmt, double v);

#endif
