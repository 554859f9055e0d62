/* The output modules of the tools (not a library API): one file per kind,
 * each rendering the rows of the library's record tables
 * (fp4scope/record.h), so that a field added to a record reaches every
 * output that shows its record:
 *   json.c   out_json_record: a record's output rows into a JSON object
 *   csv.c    out_csv_header, out_csv_record: the same rows as CSV cells
 * The HDF5 reports are the library's writers (fp4s_decomp_write_h5,
 * fp4s_remedy_write_h5, fp4s_channels_write_h5); human tables stay with
 * each tool, which chooses what a reader sees first. */
#ifndef FP4S_TOOLS_OUT_H
#define FP4S_TOOLS_OUT_H

#include <fp4scope/record.h>

#include <jansson.h>

/* Set every scalar row of t flagged FP4S_FF_OUTPUT into o (NULL: a new
 * object), in table order: counts and integers as JSON integers, bools as
 * booleans, strings as strings (NULL: null), reals through cli_json_real
 * (NaN and Inf: null), a fixed array of values as a JSON array. Rows of
 * heap arrays and embedded records are left to the caller. Returns o. */
json_t *out_json_record(const fp4s_rtype *t, const void *rec, json_t *o);

/* ",NAME" for each scalar output row of t (prefix before each name). */
void out_csv_header(const fp4s_rtype *t, const char *prefix);
/* ",VALUE" for each of those rows: counts as integers, reals with 17
 * significant digits, Inf as inf/-inf, NaN as an empty cell. */
void out_csv_record(const fp4s_rtype *t, const void *rec);

#endif
