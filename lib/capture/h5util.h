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

/* Natural order of site names: digit runs compare as numbers. */
int cap_natcmp(const char *a, const char *b);

#endif
