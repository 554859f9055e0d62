/* Internal helpers of the capture module (not installed, not exported); the
 * shared HDF5 layer they build on is io/h5_internal.h. */
#ifndef FP4S_CAPTURE_H5UTIL_H
#define FP4S_CAPTURE_H5UTIL_H

#include <fp4scope/capture.h>

#include "io/h5_internal.h"

/* Open a capture for reading and check its schema; on failure records a
 * detail naming the file and returns a FP4S_E* code. */
int cap_open_read(const char *file, hid_t *out, fp4s_capture_info *info);
/* Check the schema attribute of an open file (used by the readers and by
 * open-for-append). Fills info if not NULL. */
int cap_check_schema(hid_t f, const char *file, fp4s_capture_info *info);

/* Group creation list of step, site and log-prob groups: new-style compact
 * groups (link messages in the object header), so that the large symbol-table
 * nodes of the file (see write.c) only apply to /, /steps and /weights.
 * Caller closes. */
hid_t cap_small_gcpl(void);

/* A per-step scalar's name: 1 to 63 bytes, no '/' or control character, not
 * "step" (the step group's own attribute). */
int cap_scalar_name_check(const char *file, const char *name);

/* Natural order of site names: digit runs compare as numbers. */
int cap_natcmp(const char *a, const char *b);

/* The token ids of the side e of an open capture (fp4s_capture_read_ids). */
int cap_read_ids_open(hid_t f, const char *file, const fp4s_capture_entry *e, int64_t **ids, size_t *n);

/* ---- the log-prob reader (lpread.c; the trace reader of analysis/mismatch) ---- */
typedef struct cap_lp cap_lp;
typedef struct cap_lp_step_info {
    size_t tokens;          /* length of the step's fields */
    bool has_pos, has_mask; /* optional fields present */
    bool f32;               /* trainer and rollout both float32 (else read as float64) */
} cap_lp_step_info;
/* Open a capture (checked like every reader: schema, major version
 * FP4S_CAPTURE_MAJOR, structure) and find the steps that hold
 * /steps/<step>/logprobs, in increasing order. FP4S_ENOTFOUND when none do. */
int cap_lp_open(const char *file, cap_lp **out);
size_t cap_lp_nsteps(const cap_lp *r);
int64_t cap_lp_step(const cap_lp *r, size_t i);
/* Open the fields of step i (closing the previous one): trainer, rollout and
 * seq required, 1-D, of one length with pos and mask (FP4S_ESHAPE naming
 * both lengths); trainer/rollout floating point, the others integers. */
int cap_lp_open_step(cap_lp *r, size_t i, cap_lp_step_info *info);
/* Read tokens [off, off+n) of the open step: trainer and rollout as float32
 * (f32) or float64, seq and pos as int64, mask as uint8 (pos and mask may be
 * NULL, and are skipped when the step has none). */
int cap_lp_read(cap_lp *r, size_t off, size_t n, bool f32, void *trainer, void *rollout, int64_t *seq,
                int64_t *pos, uint8_t *mask);
void cap_lp_close(cap_lp **r);

#endif
