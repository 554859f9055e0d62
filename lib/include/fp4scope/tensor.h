/* Tensor input and output.
 *
 * A source opens any supported tensor by one string and yields float32 rows:
 *   file.npy                    float32/float64/float16/uint8, C order
 *   file.safetensors:NAME       F32, F16, BF16, F64, U8
 *   file.h5:/path/to/dataset    float32, float64, float16, or BF16 stored as
 *                               uint16 with attribute dtype = "bfloat16"
 * of any rank from 1 to FP4S_MAX_RANK. A tensor of rank 3 or more (a PyTorch
 * activation dump [batch, seq, hidden]) reads as the matrix
 * [prod(leading dimensions), last]: rows of the last dimension, in C order;
 * fp4s_source_rank and fp4s_source_shape give the shape as stored.
 * The last ':' splits file and tensor, unless the whole spec is an existing
 * file (paths with ':') or only an earlier ':' leaves an existing file before
 * it (tensor names with ':'). A 1-D tensor reads as one row. Rows are read on demand (HDF5 by hyperslab,
 * .npy and safetensors by pread), so memory stays bounded by the chunk.
 *
 * HDF5 errors become fp4s error details (file, dataset, HDF5's innermost
 * message and the system's reason). HDF5's own automatic error printing is
 * off while a library function runs and the caller's handler is restored
 * when it returns.
 *
 * Outputs are written atomically: to a temporary file beside the target that is
 * renamed over it on commit and removed on abort, so a failed run leaves no
 * half-written file. */
#ifndef FP4SCOPE_TENSOR_H
#define FP4SCOPE_TENSOR_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4S_MAX_RANK 32 /* the most dimensions a source may have (as numpy and HDF5) */

typedef enum fp4s_dtype {
    FP4S_DT_F32 = 0, FP4S_DT_F64, FP4S_DT_F16, FP4S_DT_BF16,
    FP4S_DT_U8, FP4S_DT_U16, FP4S_DT_I32, FP4S_DT_I64
} fp4s_dtype;

FP4S_API const char *fp4s_dtype_name(fp4s_dtype d); /* "float32", "bfloat16", ... */
FP4S_API size_t fp4s_dtype_size(fp4s_dtype d);

/* ---- sources ----------------------------------------------------------------- */
typedef struct fp4s_source fp4s_source;

/* Open `spec` (see above). On failure *out is NULL and the detail names the
 * file, the tensor or dataset and the problem. The source owns its file handle;
 * close with fp4s_source_close. */
FP4S_API int fp4s_source_open(const char *spec, fp4s_source **out);
FP4S_API void fp4s_source_close(fp4s_source **src);

FP4S_API size_t fp4s_source_rows(const fp4s_source *src);
FP4S_API size_t fp4s_source_cols(const fp4s_source *src);
FP4S_API int fp4s_source_rank(const fp4s_source *src);   /* as stored: 1, 2, 3, ... */
/* The shape as stored: copies min(rank, max) dimensions into dims and
 * returns the rank. */
FP4S_API int fp4s_source_shape(const fp4s_source *src, uint64_t *dims, int max);
FP4S_API fp4s_dtype fp4s_source_dtype(const fp4s_source *src); /* stored dtype */
FP4S_API const char *fp4s_source_path(const fp4s_source *src); /* file part */
FP4S_API const char *fp4s_source_name(const fp4s_source *src); /* tensor/dataset part, "" for .npy */

/* Names of the tensors of a .safetensors file (without __metadata__), sorted,
 * from the header the sources read (same checks, same 100 MiB limit). The
 * caller frees them with fp4s_names_free(names, n). */
FP4S_API int fp4s_safetensors_names(const char *path, char ***names, size_t *n);
FP4S_API void fp4s_names_free(char **names, size_t n);

/* Read rows [row0, row0+nrows) converted to float32 into out (row stride ld >=
 * cols elements). Thread-safe for distinct sources only. */
FP4S_API int fp4s_source_read(fp4s_source *src, size_t row0, size_t nrows, float *out, size_t ld);

/* Read the raw stored bytes of rows (no conversion; for bit-exact import). */
FP4S_API int fp4s_source_read_raw(fp4s_source *src, size_t row0, size_t nrows, void *out);

/* Read a whole source into a newly malloc'ed float32 array [rows*cols]; the
 * caller frees *data. Convenience for small tensors and tests. */
FP4S_API int fp4s_source_read_all(const char *spec, float **data, size_t *rows, size_t *cols);

/* ---- atomic output files -------------------------------------------------------- */
typedef struct fp4s_outfile fp4s_outfile;

/* Begin writing `path`: creates a temporary "<path>.tmp.XXXXXX" in the same
 * directory (checked writable now). "-" means stdout where the writer supports it. */
FP4S_API int fp4s_outfile_begin(const char *path, fp4s_outfile **out);
FP4S_API const char *fp4s_outfile_tmppath(const fp4s_outfile *o); /* write here */
FP4S_API int fp4s_outfile_commit(fp4s_outfile **o);  /* fsync + rename */
FP4S_API void fp4s_outfile_abort(fp4s_outfile **o);  /* unlink the temporary; NULL ok */
/* Unlink every temporary of this process not yet committed or aborted (the
 * handles stay valid and must still be aborted). Async-signal-safe: for a
 * tool's SIGINT/SIGTERM handler, so an interrupted run leaves nothing behind. */
FP4S_API void fp4s_outfile_unlink_all(void);

/* ---- one writer per file: the lock every fp4scope writer takes ---------------------
 * A writer that modifies a file in place (the capture writer, fp4s_capture_*)
 * holds flock(2) LOCK_EX on it while it has it open, taken before it creates,
 * truncates or changes anything: a refused writer changes nothing. HDF5's
 * own file locking takes the same lock (LOCK_EX for writers, LOCK_SH for
 * readers), so h5py and other HDF5 programs are covered too. Replacing a file
 * (renaming a finished temporary over it) must not destroy what a live writer
 * is writing: fp4s_file_commit renames while holding LOCK_SH on the file it
 * replaces, and a writer that starts meanwhile checks after locking that the
 * path still names the file it locked. HDF5_USE_FILE_LOCKING=FALSE turns the
 * protocol off (as it does HDF5's); BEST_EFFORT writes without the lock where
 * the file system has no flock. man/fp4scope-capture.5 says what this gives. */

/* 0 when no live writer holds `path` (or it does not exist, or is not a
 * regular file); FP4S_EBUSY, the detail naming path, when one does. Use it to
 * refuse early, before the work; fp4s_file_commit is what guarantees it. */
FP4S_API int fp4s_file_held(const char *path);

/* Rename the finished file `tmp` to `path` (resolve symlinks first: a link at
 * `path` is replaced, not followed). replace: replace an existing file unless
 * a live writer holds it (FP4S_EBUSY; tmp is left for the caller to remove);
 * !replace: FP4S_EWRITE "already exists" when path exists, race-free (a file
 * that appears meanwhile is never replaced). Other failures FP4S_EWRITE with
 * the reason. tmp is fsync'ed before and the directory after the rename. */
FP4S_API int fp4s_file_commit(const char *tmp, const char *path, bool replace);

/* ---- .npy writer (streaming rows) --------------------------------------------------- */
typedef struct fp4s_npy_writer fp4s_npy_writer;
/* dtype: F32, U8, U16, I32 ...; rank 1 (cols ignored, rows = length) or 2. */
FP4S_API int fp4s_npy_writer_open(const char *path, fp4s_dtype dt, int rank,
                                  size_t rows, size_t cols, fp4s_npy_writer **out);
FP4S_API int fp4s_npy_writer_rows(fp4s_npy_writer *w, const void *data, size_t nrows);
/* Commits when all rows were written, else aborts with FP4S_EINTERNAL. */
FP4S_API int fp4s_npy_writer_close(fp4s_npy_writer **w);
FP4S_API void fp4s_npy_writer_abort(fp4s_npy_writer **w);
/* One-shot: write a whole array. */
FP4S_API int fp4s_npy_write(const char *path, fp4s_dtype dt, int rank, size_t rows,
                            size_t cols, const void *data);

#ifdef __cplusplus
}
#endif
#endif
