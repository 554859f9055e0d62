/* Captures: trainer and rollout activations, weights and per-token log-probs
 * of an RL run in one HDF5 file of schema "fp4scope-capture/1"
 * (man/fp4scope-capture.5).
 *
 *   /                                attrs fp4scope_schema, producer, created
 *   /steps/<step>/<site>/trainer     [tokens, K] float32 or bf16 (uint16 + dtype="bfloat16")
 *   /steps/<step>/<site>/rollout     [tokens, K]
 *   /steps/<step>/<site>/weight      [N, K]  (or /weights/<site> when constant)
 *   /steps/<step>/logprobs/{trainer,rollout}  [T] float32
 *   /steps/<step>/logprobs/seq       [T] int64   sequence index of each token
 *   /steps/<step>/logprobs/pos       [T] int64   position within the response (optional)
 *   /steps/<step>/logprobs/mask      [T] uint8   1 = counted (optional, default all 1)
 *   /steps/<step>/logprobs/token     [T] int64   the sampled token of each row (optional; the
 *                                    logits path of fp4-remedy: see fp4scope-capture(5))
 *   /steps/<step>                    attrs step, and per-step scalars (float64, optional)
 *
 * <step> is a decimal integer, <site> a module path (dots, no slashes), e.g.
 * layers.3.mlp.experts.7.down_proj.
 *
 * Datasets are stored as float32, float16 (HDF5 IEEE half) or BF16 (uint16
 * with attribute dtype = "bfloat16"), exactly as they were put: nothing is
 * converted. Activations and weights are chunked and extendible along rows;
 * log-prob fields are 1-D and extendible.
 *
 * Thread-safety and ownership: a fp4s_capture handle belongs to one thread at
 * a time (HDF5 serial builds are not thread-safe: do not call any fp4s
 * function that opens an HDF5 file from two threads at once). One writer per
 * file: the writer holds the writer lock of <fp4scope/tensor.h> (flock, the
 * lock HDF5's own file locking takes) from before it creates or opens the
 * file until close; a second writer, or one started while a reader has the
 * file open, fails with FP4S_EBUSY and changes nothing (also with
 * overwrite). Ranks write one file each and `fp4-capture merge` joins them.
 * Every pointer passed to a put function stays owned by the caller and is not
 * kept after the call returns.
 *
 * Crash safety (HDF5 1.10): the writer keeps all HDF5 metadata in memory
 * between flushes (metadata cache evictions off), never reuses file space
 * (file-space strategy "none"), and commits each fp4s_capture_flush() in two
 * phases: first every new object is written while nothing already in the
 * file points to it (a new step is an anonymous group), then the new steps
 * are linked into /steps with a few small in-place writes. Guarantee, for a
 * writer killed at any moment (SIGKILL, OOM, a crashed rank): the file opens,
 * every step whose flush returned is listed and holds its bytes exactly, what
 * was put after the last flush is lost, and a step whose flush was under way
 * is either complete or absent (tests/capture/test_crash.c kills a writer at
 * random moments, 200 times in the slow suite). Limits: up to 2048 steps
 * and 2048 constant weights per file, /steps and /weights grow by rewriting
 * one index node in place; beyond that linking can split a node, and a kill
 * inside the second phase of that one flush could also lose links of earlier
 * steps of the node (not observed in testing, not excluded by the design).
 * Rows appended to a step that was already flushed (open_append on an old
 * step) are not covered for that step. Process kills only: after a power loss the guarantee is as good as
 * the fsync the flush ends with. The root attribute writer_state is "open"
 * until fp4s_capture_close(); readers
 * report such a file as interrupted (fp4s_capture_info). */
#ifndef FP4SCOPE_CAPTURE_H
#define FP4SCOPE_CAPTURE_H

#include <fp4scope/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4S_CAPTURE_SCHEMA "fp4scope-capture/1"
#define FP4S_CAPTURE_MAJOR 1

/* What a capture holds at one (step, site, side): the listing reader's row. */
typedef struct fp4s_capture_entry {
    int64_t step;          /* -1 for /weights/<site> */
    char site[256];        /* module path, or "logprobs" */
    char side[16];         /* "trainer", "rollout", "weight", or for logprobs the field */
    char path[512];        /* HDF5 path of the dataset inside the file */
    size_t rows, cols;     /* 1-D datasets: rows = 1, cols = length */
    fp4s_dtype dtype;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_capture_entry;
FP4S_API size_t fp4s_capture_entry_size(void);

/* List every dataset of a capture file, sorted by (step, site, side). Checks
 * the schema attribute and refuses a newer major version (FP4S_EVERSION), and
 * refuses a file in which the trainer and rollout sides of a (step, site)
 * have different shapes (FP4S_ESHAPE naming both: row i of the two sides is
 * the same token) unless both sides carry token ids (see fp4s_capture_put_ids:
 * then only K must agree). The caller frees *entries with free(). In an interrupted
 * file (see below) links left dangling by a writer killed while committing a
 * flush are skipped, not errors; fp4s_capture_info_read reports how many. */
FP4S_API int fp4s_capture_list(const char *file, fp4s_capture_entry **entries, size_t *n);
/* The same listing without the trainer/rollout shape check, for inspecting
 * a damaged capture (fp4-capture ls, fp4s_capture_verify). */
FP4S_API int fp4s_capture_list_raw(const char *file, fp4s_capture_entry **entries, size_t *n);

/* The largest step a capture stores: 2^53, so that every step survives JSON
 * and the double-precision step axes of the analyses exactly. The writer
 * refuses larger ones (FP4S_ERANGE). */
#define FP4S_CAPTURE_MAX_STEP INT64_C(9007199254740992)

/* Source spec string ("file.h5:/steps/3/site/rollout") for an entry, for
 * fp4s_source_open(). Writes at most n bytes; returns the length needed. */
FP4S_API size_t fp4s_capture_entry_spec(const char *file, const fp4s_capture_entry *e,
                                        char *buf, size_t n);

/* Is `site` a valid site name (fp4scope-capture(5): not empty, at most 255 bytes, no
 * '/' or control characters, not starting with '.', not "logprobs")? 0, or
 * FP4S_EINVAL with the reason. The writer checks every put with it. */
FP4S_API int fp4s_site_check(const char *site);

/* Every per-step scalar of a capture (the float attributes of each
 * /steps/<step> group other than "step"), sorted by step, then name. The
 * caller frees *out with free(); *n = 0 when there are none. */
typedef struct fp4s_capture_scalar {
    int64_t step;
    char name[64];
    double value;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_capture_scalar;
FP4S_API size_t fp4s_capture_scalar_size(void);
FP4S_API int fp4s_capture_scalars(const char *file, fp4s_capture_scalar **out, size_t *n);

/* Glob match of a site name (fnmatch(3) rules, '*' matches dots too). */
FP4S_API bool fp4s_site_match(const char *pattern, const char *site);

/* ---- file information ---------------------------------------------------------- */
typedef struct fp4s_capture_info {
    char schema[64];        /* root attribute fp4scope_schema */
    int major, minor;       /* parsed from it ("fp4scope-capture/1" is 1.0) */
    char producer[128];     /* root attribute producer ("" if absent) */
    char created[64];       /* root attribute created, ISO 8601 UTC ("" if absent) */
    bool synthetic;         /* root attribute synthetic = 1 (fp4-capture synth) */
    bool interrupted;       /* writer_state is "open": the writer did not close it
                               (killed, or still running); only flushed steps are there */
    size_t nsteps;          /* number of /steps/<step> groups */
    size_t skipped;         /* interrupted files only: unreadable objects that the
                               listing skipped (the commit the writer was killed in) */
    int64_t first_step, last_step; /* -1 when there are none */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_capture_info;
FP4S_API size_t fp4s_capture_info_size(void);

/* Read the root attributes of a capture. Errors: FP4S_EOPEN (missing,
 * unreadable, locked by a running writer), FP4S_EFORMAT (not HDF5, truncated,
 * missing or malformed fp4scope_schema), FP4S_EVERSION (newer major version). */
FP4S_API int fp4s_capture_info_read(const char *file, fp4s_capture_info *info);

/* A root string attribute of a capture (such as the quantizers a producer
 * records, rollout_format, rollout_profile, trainer and trainer_profile:
 * fp4scope-capture(5)) into buf (truncated to n - 1 bytes): 1 when present,
 * 0 when absent (buf ""), FP4S_EOPEN when the file cannot be opened,
 * FP4S_EFORMAT when the attribute is not a string. */
FP4S_API int fp4s_capture_root_str(const char *file, const char *name, char *buf, size_t n);

/* Find the trainer and rollout entries of (step, site). FP4S_ENOTFOUND names
 * the missing step, site or side; FP4S_ESHAPE when the two shapes differ (the
 * row counts may differ where both sides carry token ids).
 * Either output pointer may be NULL. */
FP4S_API int fp4s_capture_pair(const char *file, int64_t step, const char *site,
                               fp4s_capture_entry *trainer, fp4s_capture_entry *rollout);

/* Check a whole capture: trainer/rollout shapes equal per (step, site) (the
 * rows may differ where both sides carry ids), token ids well-formed (int64
 * [rows, 2], one per row, none repeated), weight K equal to the activation K,
 * log-prob fields of one length per step, site names well-formed. Returns 0 or the first problem (FP4S_ESHAPE/EFORMAT). */
FP4S_API int fp4s_capture_verify(const char *file);

/* ---- writer ---------------------------------------------------------------------- */
typedef struct fp4s_capture fp4s_capture;

#define FP4S_CAPTURE_CONST_STEP (-1) /* step for weights that do not change: /weights/<site> */

typedef struct fp4s_capture_opts {
    int gzip;              /* 0 = no compression (default), 1..9 = deflate level */
    bool shuffle;          /* byte shuffle before deflate (default true; only with gzip) */
    size_t chunk_rows;     /* rows per chunk of new datasets; 0 = about 1 MiB (default) */
    const char *producer;  /* root attribute on create; NULL = "libfp4scope <version>" */
    bool overwrite;        /* create: replace an existing file (default false) */
    uint32_t checksum;     /* 1: every chunk of new datasets carries a Fletcher-32
                              checksum (HDF5's filter), which every read verifies:
                              a damaged byte of the data is an error, not other
                              numbers. 0 (default): raw data carries no checksum */
    uint32_t reserved[7];  /* zero (the defaults); room for options added later */
} fp4s_capture_opts;

/* Fills o with the defaults, reserved included. fp4s_capture_opts_size() is
 * sizeof(fp4s_capture_opts) in the library: a binding that mirrors the struct
 * (the Python adapter) checks its copy against it. */
FP4S_API void fp4s_capture_opts_defaults(fp4s_capture_opts *o);
FP4S_API size_t fp4s_capture_opts_size(void);

/* Create a new capture at `path` (written in place, not through a temporary,
 * so that flushed steps survive a crash). Fails with FP4S_EWRITE if the file
 * exists and !o->overwrite, with FP4S_EBUSY if another process holds it (the
 * file is then left as it was). o may be NULL for the defaults. */
FP4S_API int fp4s_capture_create(const char *path, const fp4s_capture_opts *o, fp4s_capture **out);

/* Open an existing capture to append (new steps, sites, or rows of existing
 * datasets); FP4S_EBUSY while another process holds it. Checks the schema
 * like the readers. Compression and chunking of
 * datasets that exist are kept; o applies to new ones. */
FP4S_API int fp4s_capture_open_append(const char *path, const fp4s_capture_opts *o, fp4s_capture **out);

/* Optional attributes of an activation or weight dataset, written when the
 * dataset is created (ignored when rows are appended to an existing one). */
typedef struct fp4s_capture_meta {
    int64_t token_offset;  /* index of the first row in the step's token stream; -1 = none (default) */
    int64_t layer;         /* -2 = parse "layers.<n>" from the site (default), -1 = none */
    int64_t expert;        /* -2 = parse "experts.<n>" from the site (default), -1 = none */
    const char *source_shape; /* "2,128,4096": the stored shape of a tensor of rank 3 or more
                                 whose rows these are (attribute source_shape); NULL = none */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_capture_meta;
FP4S_API size_t fp4s_capture_meta_size(void);

FP4S_API void fp4s_capture_meta_defaults(fp4s_capture_meta *m);

/* Append rows [rows, cols] (row stride ld elements, ld >= cols) of dtype dt
 * (FP4S_DT_F32, FP4S_DT_F16 or FP4S_DT_BF16, stored as given, bit for bit) to
 * /steps/<step>/<site>/<side> (side "trainer", "rollout" or "weight"), or to
 * /weights/<site> when step is FP4S_CAPTURE_CONST_STEP and side is "weight".
 * The dataset is created on first use; later puts must have the same cols
 * (FP4S_ESHAPE) and dtype (FP4S_EDTYPE). Putting a side whose sibling side
 * already has a different cols fails with FP4S_ESHAPE. meta may be NULL. */
FP4S_API int fp4s_capture_put(fp4s_capture *c, int64_t step, const char *site, const char *side,
                              fp4s_dtype dt, const void *data, size_t rows, size_t cols,
                              size_t ld, const fp4s_capture_meta *meta);

/* Append n per-token log-probs of one step: trainer and rollout (float32) and
 * seq (int64) are required; pos (int64) and mask (uint8) may be NULL, but
 * every block of a step must give the same set of fields (FP4S_EINVAL). */
FP4S_API int fp4s_capture_put_logprobs(fp4s_capture *c, int64_t step, const float *trainer,
                                       const float *rollout, const int64_t *seq,
                                       const int64_t *pos, const uint8_t *mask, size_t n);

/* Append the n sampled token ids of one step to /steps/<step>/logprobs/token
 * (int64), row for row with the step's log-probs: what the log-prob of row i
 * is the log-prob of. With the final hidden states of both sides as the site
 * named by the root attribute lm_head_site (default "lm_head") and that
 * site's weight (the LM head), fp4-remedy --logits recomputes the per-token
 * log-probs under each remedy. Readers require the same length as
 * logprobs/trainer (fp4s_capture_verify). */
FP4S_API int fp4s_capture_put_tokens(fp4s_capture *c, int64_t step, const int64_t *token, size_t n);
/* ---- token ids -----------------------------------------------------------------------
 * Row i of an activation dataset /steps/<step>/<site>/<side> (side trainer or
 * rollout) may carry the id of its token: row i of the dataset
 * /steps/<step>/<site>/<side>_ids, [rows, 2] int64, holds (sequence,
 * position), the same numbering as logprobs/seq and logprobs/pos. With ids on
 * both sides the two sides of a site may hold different tokens (an MoE expert
 * that the rollout routed other tokens to than the trainer): readers pair
 * rows by id, and the rows one side holds alone are routing flips
 * (fp4scope-capture(5)). Without ids, row i of the two sides is the same
 * token, as before. */
#define FP4S_CAPTURE_IDS_SUFFIX "_ids"

/* Append the ids of n rows, ids[2*i] the sequence and ids[2*i+1] the position
 * of row i, to /steps/<step>/<site>/<side>_ids: the ids of the rows put last
 * to that side, in their order. Put the rows first: the ids may not outnumber
 * them (FP4S_EINVAL), and every row of a side that has ids needs one (the
 * readers refuse a side whose ids and rows differ in number). An id may
 * appear once per (step, site, side) (readers refuse repeats). */
FP4S_API int fp4s_capture_put_ids(fp4s_capture *c, int64_t step, const char *site, const char *side,
                                  const int64_t *ids, size_t n);

/* The ids of one side of a listing (an entry whose side is trainer or
 * rollout) as a new array [n][2] (sequence, position) that the caller frees
 * with free(). FP4S_ENOTFOUND when the side carries none; FP4S_EFORMAT with
 * the file, dataset and problem when they are malformed: not int64 [rows, 2],
 * another number of rows than the side, or one id on two rows (both named). */
FP4S_API int fp4s_capture_read_ids(const char *file, const fp4s_capture_entry *side, int64_t **ids,
                                   size_t *n);

/* The rows of two sides matched by id. a[k] and b[k] are the rows of the
 * same token on side A and side B, in increasing a[k]; only_a / only_b the
 * rows (increasing) whose id the other side lacks. */
typedef struct fp4s_id_match {
    size_t npairs, nonly_a, nonly_b;
    size_t *a, *b;
    size_t *only_a, *only_b;
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_id_match;
FP4S_API size_t fp4s_id_match_size(void);

/* Match the ids of side A ([na][2]) with those of side B ([nb][2]) in
 * O((na + nb) log(na + nb)). FP4S_EFORMAT when one side holds an id twice:
 * the detail says "side A" or "side B", the id and both rows (callers prefix
 * the file and dataset). *m is zeroed first and freed with
 * fp4s_id_match_free() (also after an error; NULL ok). */
FP4S_API int fp4s_ids_match(const int64_t *ids_a, size_t na, const int64_t *ids_b, size_t nb,
                            fp4s_id_match *m);
FP4S_API void fp4s_id_match_free(fp4s_id_match *m);

/* The share of a step's log-prob mismatch carried by a set of tokens (those
 * whose route flipped, say): over the step's counted log-prob rows (mask),
 * joined to the set by (seq, pos), the sum of |lp_t - lp_r| and of
 * (lp_t - lp_r)^2 over the tokens in the set, against the sums over all. The
 * attribution is by token (a flipped route also changes the later tokens of
 * its sequence through attention; those are not counted). */
typedef struct fp4s_flip_share {
    size_t tokens;        /* counted log-prob rows of the step */
    size_t in_set;        /* of those, in the set */
    size_t set_unmatched; /* ids of the set with no log-prob row (prompt tokens, or masked) */
    double abs_all, abs_set; /* sums of |lp_t - lp_r| */
    double sq_all, sq_set;   /* sums of (lp_t - lp_r)^2 */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_flip_share;
FP4S_API size_t fp4s_flip_share_size(void);

/* FP4S_ENOTFOUND when the step has no log-probs or no logprobs/pos (the ids
 * then cannot be joined). ids [n][2], repeats allowed (counted once). */
FP4S_API int fp4s_capture_flip_share(const char *file, int64_t step, const int64_t *ids, size_t n,
                                     fp4s_flip_share *out);

/* A per-step scalar (reward, accuracy, gradient norm, ...): a float64
 * attribute `name` of the group /steps/<step>. Put a step's scalars with the
 * step, before the fp4s_capture_flush() that commits it (FP4S_EINVAL for a
 * step already in the file); the same name again replaces the value. Names:
 * 1 to 63 bytes, no '/' or control characters, not "step". */
FP4S_API int fp4s_capture_put_scalar(fp4s_capture *c, int64_t step, const char *name, double value);

/* Attributes on the root ("/" or NULL) or any group/dataset path of the file
 * that exists ("/steps/3/layers.0.mlp/trainer"). The writer owns the root
 * attributes fp4scope_schema, producer, created and writer_state. */
FP4S_API int fp4s_capture_attr_str(fp4s_capture *c, const char *obj, const char *name, const char *value);
FP4S_API int fp4s_capture_attr_f64(fp4s_capture *c, const char *obj, const char *name, double value);
FP4S_API int fp4s_capture_attr_i64(fp4s_capture *c, const char *obj, const char *name, int64_t value);

/* Make everything put so far durable (H5Fflush + fsync). Call at each step
 * boundary: it is the crash-safety point described at the top. */
FP4S_API int fp4s_capture_flush(fp4s_capture *c);

/* Mark the file closed (writer_state = "closed"), flush and close. Returns the
 * first error of the final flush; *c is NULL afterwards either way. NULL ok. */
FP4S_API int fp4s_capture_close(fp4s_capture **c);

/* Undo everything put since the last flush (or since the file was opened)
 * and close: new steps and constant weights are dropped, sites and datasets
 * added to steps that were already in the file are removed, rows appended
 * to datasets that were there are cut back; the file then holds exactly what
 * the last flush committed (writer_state "closed"). Attributes set with
 * fp4s_capture_attr_* are not undone. For an all-or-nothing write of several
 * tensors (fp4-capture import -a). *c is NULL afterwards; NULL ok. */
FP4S_API int fp4s_capture_abort(fp4s_capture **c);

/* ---- merge --------------------------------------------------------------------- */
/* Join captures into a new file `out` (written in place; callers that want
 * atomic output pass a temporary path). A dataset present in several inputs
 * must be identical (same dtype, shape and bytes) or the merge fails with
 * FP4S_EDUP naming both files and the path. Root attributes come from the
 * first input that has them; synthetic is set if any input is synthetic, and
 * merged_from lists the inputs. */
FP4S_API int fp4s_capture_merge(const char *const *inputs, size_t n, const char *out,
                                const fp4s_capture_opts *o);

/* ---- synthetic captures -------------------------------------------------------- */
/* Parameters of fp4-capture synth (every one is stored as a root attribute
 * "synth_<name>", with synthetic = 1 and producer "fp4-capture synth"). */
typedef struct fp4s_synth_opts {
    uint64_t seed;         /* 1 */
    int steps;             /* 8: steps with log-probs */
    int act_every;         /* 4: activations at steps 0, act_every, 2*act_every, ... */
    int layers;            /* 2 */
    int experts;           /* 4 (0 = dense MLP only) */
    int top_k;             /* 2 experts per token */
    double route_skew;     /* 1.0: Zipf exponent of expert popularity (uneven tokens per expert) */
    int tokens;            /* 128 tokens per step */
    int hidden;            /* 256 = K of every site */
    int out_features;      /* 128 = N of the weights */
    double scale_sigma;    /* 1.0: per-channel scales exp(N(0, sigma^2)) */
    int hot_channels;      /* 4 persistent hot channels per layer */
    double hot_factor;     /* 40: their scale multiplier */
    double tail_df;        /* 4: Student-t degrees of freedom of the elements (0 = Gaussian) */
    double drift;          /* 0.02: per-step log-scale random walk */
    double kernel_noise;   /* 2^-12: relative fp32 perturbation before the rollout's BF16 rounding */
    bool bf16;             /* true: store BF16 (two BF16 engines); false: float32 */
    bool weights_per_step; /* false: weights once under /weights/<site> */
    int seqs;              /* 8 sequences per step */
    int seq_len;           /* 32 tokens per sequence */
    double lp_mismatch;    /* 0.002: std of rollout - trainer log-prob before the onset */
    int onset_step;        /* 5: first step whose mismatch grows (-1 = never) */
    double lp_growth;      /* 2.0: mismatch multiplied by this each step from the onset */
    int gzip;              /* 4: deflate level of the output (0 = none) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_synth_opts;
FP4S_API size_t fp4s_synth_opts_size(void);

FP4S_API void fp4s_synth_opts_defaults(fp4s_synth_opts *o);

/* Name of the random generator in use: "gsl_rng_mt19937" when built with GSL,
 * else "fp4s-xoshiro256ss" (same seed, different stream). */
FP4S_API const char *fp4s_synth_rng_name(void);

/* Write a synthetic capture to `path` (created or overwritten). */
FP4S_API int fp4s_capture_synth(const char *path, const fp4s_synth_opts *o);

#ifdef __cplusplus
}
#endif
#endif
