/* Private to lib/io: the source struct and the per-format open/read hooks. */
#ifndef FP4S_IO_INTERNAL_H
#define FP4S_IO_INTERNAL_H

#include <fp4scope/tensor.h>

#include "fp4s_config.h"

#include <stdbool.h>
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
#if FP4S_HAVE_JANSSON
#include <jansson.h>
/* Read and parse the JSON header of the safetensors file P (open as fd, fsize
 * bytes): *root an object (the caller decrefs it), *hlen_out its length; the
 * data buffer starts at 8 + *hlen_out. Every check of the sources (size
 * limits, JSON, an object) with messages naming P. The sources and the
 * checkpoint reader (ckpt.c) share it. */
int fp4s_st_read_header(const char *P, int fd, uint64_t fsize, json_t **root, uint64_t *hlen_out);
#endif
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

/* The bytes of rows [row0, row0 + nrows) of source s in its file: *off and
 * *len. A .npy or .safetensors tensor and a contiguous HDF5 dataset give
 * their own range; where it cannot be known (a chunked or compact HDF5
 * dataset), the whole file: *off 0, *len UINT64_MAX. */
void fp4s_source_data_range(const fp4s_source *s, size_t row0, size_t nrows, uint64_t *off, uint64_t *len);
/* HDF5's half: the file offset of a contiguous dataset's data, or
 * UINT64_MAX (h5.c). */
uint64_t fp4s_h5_src_data_offset(const struct fp4s_source *s);

/* ---- the page-cache probe (resident.c) ------------------------------------------- */
/* The least fraction of a range's pages in the page cache for which
 * fp4s_file_resident calls it resident. The question it answers for NVFP4's
 * amax pass (analysis/decompose/reader.c): is reading the rows again cheaper
 * than keeping a copy? On a 16-core host with a 1 GiB input in the page
 * cache, keeping cost 0.4 to 0.9 of a plain read more than reading again
 * (2.2-2.4x the plain read kept, 1.5-1.8x read twice). A page missing from
 * the cache costs a disk read, some 3 to 10 times a page from memory (more on
 * network storage). Reading again stays the cheaper while the missing
 * fraction m has m (disk/cache - 1) under that 0.4-0.9: m under 0.04 to
 * 0.45. Resident from 0.9 is at the cautious end of that range (a slow
 * disk); a file just written or just read (all of it) and a cold one (next
 * to none) are far from it either way. */
#define FP4S_RESIDENT_MIN 0.9
/* fp4s_file_resident's answer to a range of path (from byte off, len bytes;
 * a range past the end is cut to it): 1 when at least FP4S_RESIDENT_MIN of
 * its pages are in the page cache, 0 when fewer, -1 when the probe cannot
 * tell (not a regular file, an empty range, mmap or mincore refused). The
 * pages are not touched: nothing is read from the disk. A range of more than
 * FP4S_RESIDENT_WINDOWS x FP4S_RESIDENT_WINDOW pages (64 MiB of 4 KiB pages)
 * is sampled in FP4S_RESIDENT_WINDOWS windows of FP4S_RESIDENT_WINDOW pages
 * spread evenly over it (1/16 of 1 GiB: a page cache emptied from one end or
 * in the middle shows in the windows there). *fraction (may be NULL): the
 * fraction found resident, -1 when unknown. */
#define FP4S_RESIDENT_WINDOW 64
#define FP4S_RESIDENT_WINDOWS 256
int fp4s_file_resident(const char *path, uint64_t off, uint64_t len, double *fraction);
/* For tests of both answers on a machine where the page cache cannot be
 * emptied: fp4s_file_resident returns `result` (0, 1 or -1) without probing
 * until FP4S_RESIDENT_PROBE is passed back. Not thread-safe; tests only. */
#define FP4S_RESIDENT_PROBE 2
void fp4s_file_resident_force(int result);

/* The memory the kernel reports available for new work without swapping
 * (MemAvailable of /proc/meminfo, in bytes): the page cache it counts can
 * hold a file read once until it is read again. 0 where it cannot be read.
 * fp4s_mem_available_force(v): return v instead until FP4S_MEM_PROBE is
 * passed back (tests only, not thread-safe). */
uint64_t fp4s_mem_available(void);
#define FP4S_MEM_PROBE UINT64_MAX
void fp4s_mem_available_force(uint64_t v);

/* Full pread/pwrite-style loops (EINTR, short transfers). read returns the
 * number of bytes read (less than n only at end of file) or -1. */
ssize_t fp4s_pread_full(int fd, void *buf, size_t n, uint64_t off);

/* fp4s_file_commit for an output whose state was seen when the run decided
 * to write it (lock.c): existed false, the path must still be absent (a file
 * that appeared meanwhile is another writer's: FP4S_EBUSY "appeared while
 * this run was working", nothing replaced); existed true, it must still be
 * the file (dev, ino), or absent (FP4S_EBUSY "replaced by another process"
 * otherwise), and is swapped in one step where the file system can, so that
 * a file put there at the last moment is put back. tmp is left for the caller
 * on failure. */
int fp4s_file_commit_as(const char *tmp, const char *path, bool existed, uint64_t dev, uint64_t ino);

#endif
