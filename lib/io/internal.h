/* Private to lib/io: the source struct and the per-format open/read hooks. */
#ifndef FP4S_IO_INTERNAL_H
#define FP4S_IO_INTERNAL_H

#include <fp4scope/tensor.h>

#include <stdint.h>
#include <sys/types.h>

enum fp4s_src_kind { FP4S_SRC_NPY = 1, FP4S_SRC_ST = 2, FP4S_SRC_H5 = 3 };

struct fp4s_source {
    enum fp4s_src_kind kind;
    char *path;            /* file part of the spec */
    char *name;            /* tensor or dataset part ("" for .npy) */
    size_t rows, cols;     /* rank >= 3: [prod(leading dimensions), last] */
    int rank;              /* as stored */
    uint64_t dims[FP4S_MAX_RANK]; /* the stored shape */
    fp4s_dtype dt;
    /* .npy and safetensors: raw little-endian rows at data_off */
    int fd;
    uint64_t data_off;
    /* HDF5 (hid_t values) */
    int64_t h5_file, h5_dset;
    /* conversion scratch */
    void *scratch;
    size_t scratch_cap;
};

/* Open hooks: fill rows/cols/rank/dt and the handle fields of s, or return a
 * negative code with the detail set. s->path/name are already set; fd is open
 * for the npy/safetensors hooks and fsize is the file size. */
int fp4s_npy_src_open(struct fp4s_source *s, uint64_t fsize);
int fp4s_st_src_open(struct fp4s_source *s, uint64_t fsize);
int fp4s_h5_src_open(struct fp4s_source *s);
/* Read nrows rows into out: as float32 rows with stride ld (raw == 0), or the
 * stored bytes contiguously (raw == 1). */
int fp4s_h5_src_read(struct fp4s_source *s, size_t row0, size_t nrows, void *out,
                     size_t ld, int raw);
void fp4s_h5_src_close(struct fp4s_source *s);

/* Parse a .npy header from the start of a buffer (len bytes available).
 * On success fills dtype, rank, shape (rows and columns: a rank >= 3 array
 * is [prod(leading), last], a 1-D one [1, n]), the stored dimensions (dims:
 * FP4S_MAX_RANK entries, or NULL) and the data offset. `what` names the file
 * in messages. Exposed for the unit tests through the static library. */
int fp4s_npy_parse_header(const char *what, const unsigned char *buf, size_t len,
                          fp4s_dtype *dt, int *rank, uint64_t shape[2],
                          uint64_t *data_off, uint64_t *dims);

/* rows = prod(dims[0..rank-2]), cols = dims[rank-1] (rank 1: 1 and dims[0]);
 * FP4S_ERANGE naming `what` if the product overflows. */
int fp4s_flatten_dims(const char *what, int rank, const uint64_t *dims, uint64_t *rows, uint64_t *cols);
/* "(2, 3, 4)" or "(5,)" */
void fp4s_dims_str(int rank, const uint64_t *dims, char *buf, size_t n);

/* Grow s->scratch to at least n bytes. */
int fp4s_src_scratch(struct fp4s_source *s, size_t n);

/* Full pread/pwrite-style loops (EINTR, short transfers). read returns the
 * number of bytes read (less than n only at end of file) or -1. */
ssize_t fp4s_pread_full(int fd, void *buf, size_t n, uint64_t off);

#endif
