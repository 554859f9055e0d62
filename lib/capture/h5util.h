/* Internal HDF5 helpers of the capture module (not installed, not exported). */
#ifndef FP4S_CAPTURE_H5UTIL_H
#define FP4S_CAPTURE_H5UTIL_H

#include <fp4scope/capture.h>
#include <hdf5.h>

/* Silence HDF5's automatic error printing for the duration of a library call
 * (the library never prints); restore the caller's handler afterwards. */
typedef struct cap_quiet {
    H5E_auto2_t func;
    void *data;
} cap_quiet;
void cap_quiet_begin(cap_quiet *q);
void cap_quiet_end(const cap_quiet *q);

/* Innermost message of the HDF5 error stack of this thread ("" if none). */
const char *cap_h5_msg(void);

/* Open a capture for reading and check its schema; on failure records a
 * detail naming the file and returns a FP4S_E* code. */
int cap_open_read(const char *file, hid_t *out, fp4s_capture_info *info);
/* Check the schema attribute of an open file (used by the readers and by
 * open-for-append). Fills info if not NULL. */
int cap_check_schema(hid_t f, const char *file, fp4s_capture_info *info);

/* String attribute: 1 found (copied, truncated to n-1), 0 absent, <0 error. */
int cap_attr_get_str(hid_t obj, const char *name, char *buf, size_t n);
int cap_attr_get_i64(hid_t obj, const char *name, int64_t *v); /* 1 found, 0 absent */
/* Create or replace a scalar attribute (variable-length UTF-8 string). */
int cap_attr_put_str(hid_t obj, const char *name, const char *value);
int cap_attr_put_f64(hid_t obj, const char *name, double value);
int cap_attr_put_i64(hid_t obj, const char *name, int64_t value);

/* Stored dtype of an open dataset: F32, F64, F16, BF16 (uint16 + dtype
 * attribute "bfloat16"), U8, U16, I32, I64; FP4S_EDTYPE otherwise. */
int cap_dset_dtype(hid_t d, fp4s_dtype *dt);
/* HDF5 type to write/read a fp4s dtype without conversion (caller closes). */
hid_t cap_h5_type(fp4s_dtype dt);

/* Does the absolute path exist, component by component (no errors). */
bool cap_path_exists(hid_t f, const char *path);

/* Group creation list of step, site and log-prob groups: new-style compact
 * groups (link messages in the object header), so that the large symbol-table
 * nodes of the file (see write.c) only apply to /, /steps and /weights.
 * Caller closes. */
hid_t cap_small_gcpl(void);

/* Natural order of site names: digit runs compare as numbers. */
int cap_natcmp(const char *a, const char *b);

#endif
