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
 *
 * <step> is a decimal integer, <site> a module path (dots, no slashes), e.g.
 * layers.3.mlp.experts.7.down_proj.
 *
 * Thread-safety and ownership: a fp4s_capture handle belongs to one thread at
 * a time (HDF5 serial builds are not thread-safe). One writer per file; ranks
 * write one file each and `fp4-capture merge` joins them. */
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
} fp4s_capture_entry;

/* List every dataset of a capture file, sorted by (step, site, side). Checks
 * the schema attribute and refuses a newer major version (FP4S_EVERSION). The
 * caller frees *entries with free(). */
FP4S_API int fp4s_capture_list(const char *file, fp4s_capture_entry **entries, size_t *n);

/* Source spec string ("file.h5:/steps/3/site/rollout") for an entry, for
 * fp4s_source_open(). Writes at most n bytes; returns the length needed. */
FP4S_API size_t fp4s_capture_entry_spec(const char *file, const fp4s_capture_entry *e,
                                        char *buf, size_t n);

/* Glob match of a site name (fnmatch(3) rules, '*' matches dots too). */
FP4S_API bool fp4s_site_match(const char *pattern, const char *site);

#ifdef __cplusplus
}
#endif
#endif
