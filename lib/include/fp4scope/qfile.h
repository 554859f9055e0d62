/* The packed quantized HDF5 file (fp4-quant -o), written row chunk by row
 * chunk, and a reader for it. The file explains itself to h5py alone:
 *
 *   /codes         uint8 [rows, cols/2]: two E2M1 codes per byte in the spec's
 *                  packing (pairs: byte i = q[2i] | q[2i+1] << 4; split: per
 *                  block of 32, byte j = q[j] | q[j+16] << 4).
 *                  FP8: uint8 [rows, cols], one E4M3 byte per element.
 *   /scales        uint8 [rows, cols/block]: the block scale bytes (E8M0 for
 *                  MXFP4, E4M3 for NVFP4; 2-D NVFP4 repeats a tile's scale on
 *                  each of its rows). FP8: float32 tile scales
 *                  [ceil(rows/tile_rows), cols/128], or [1, 1] per tensor.
 *   /tensor_scale  float32 scalar: the recorded tensor scale (NVFP4: per the
 *                  spec's global-scale convention; FP8 per tensor: amax/448;
 *                  otherwise 1; row-scaled NVFP4: 1).
 *   /row_scale, /row_decode_scale  row-scaled NVFP4 only (attribute
 *                  scale_scope "row"): float32 [rows, 1], each row's recorded
 *                  tensor scale (the global-scale convention) and the factor
 *                  its dequantization multiplies by (S_dec).
 *   root attributes: schema = "fp4scope-quant", schema_version, format,
 *   profile, block, shape, source, fp4scope_version, spec (the one-line
 *   fp4s_spec_describe text), one attribute per spec field, element_lut
 *   (float32 value of each element code), scale_lut (float32 value of each
 *   scale byte, FP4 formats), tensor_decode_scale (float32 factor applied after
 *   element * scale), and decode: a numpy recipe that rebuilds the dequantized
 *   tensor from the above, in the same float32 order of operations. */
#ifndef FP4SCOPE_QFILE_H
#define FP4SCOPE_QFILE_H

#include <fp4scope/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4S_QFILE_SCHEMA_VERSION 1

typedef struct fp4s_qfile_opts {
    const char *source;     /* input spec recorded in the file ("" if NULL) */
    size_t source_cols;     /* columns before zero padding (0: same as cols) */
    int source_rank;        /* rank of the input, 1 or 2 (0: 2) */
    int gzip;               /* 0 (default, none) .. 9 for codes and scales */
    const char *tool;       /* program recorded as created_by ("" if NULL) */
    uint32_t reserved[8]; /* zero; room for fields added later */
} fp4s_qfile_opts;
FP4S_API size_t fp4s_qfile_opts_size(void);

FP4S_API void fp4s_qfile_opts_defaults(fp4s_qfile_opts *o);

typedef struct fp4s_qfile fp4s_qfile;

/* Create path (atomically: a temporary renamed by fp4s_qfile_close) for a
 * [rows, cols] tensor quantized with s and ts (cols a multiple of the block).
 * opts may be NULL for the defaults. */
FP4S_API int fp4s_qfile_create(const char *path, const fp4s_spec *s, const fp4s_tscale *ts,
                               size_t rows, size_t cols, const fp4s_qfile_opts *opts,
                               fp4s_qfile **out);

/* Append the next nrows rows as fp4s_quantize produced them (unpacked codes
 * [nrows, cols] with stride ld_codes; FP4 scale bytes [nrows, cols/block];
 * FP8 tile scales for these rows, [ceil(nrows/tile_rows), cols/128] or the one
 * per-tensor scale). Chunks other than the last must hold a multiple of
 * fp4s_spec_row_align(s) rows. */
FP4S_API int fp4s_qfile_write(fp4s_qfile *q, size_t nrows,
                              const uint8_t *codes, size_t ld_codes,
                              const uint8_t *scales, size_t ld_scales,
                              const float *scale_f32, size_t ld_scale_f32);

/* Row-scaled NVFP4: the next nrows rows' recorded tensor scales and decode
 * factors (fp4s_qout.row_scale, and S_dec of fp4s_tscale_init of each row's
 * amax), in order; every row needs them before fp4s_qfile_close.
 * FP4S_EINVAL for a spec that is not row-scaled. */
FP4S_API int fp4s_qfile_write_row_scales(fp4s_qfile *q, size_t nrows, const float *row_scale,
                                         const float *row_decode);

/* Record the counters of the run as attributes (stats_*). Optional. */
FP4S_API int fp4s_qfile_set_stats(fp4s_qfile *q, const fp4s_qstats *st);

/* Finish: every row must have been written; renames the file into place.
 * On any failure the file is removed. *q is NULL afterwards. */
FP4S_API int fp4s_qfile_close(fp4s_qfile **q);
FP4S_API void fp4s_qfile_abort(fp4s_qfile **q);

/* ---- reader (tests, round trips) --------------------------------------- */
typedef struct fp4s_qfile_data {
    fp4s_format format;
    fp4s_packing packing;
    uint32_t block;
    size_t rows, cols;
    char profile[32];
    float tensor_scale;
    float tensor_decode_scale;
    uint8_t *codes;          /* unpacked [rows, cols] (malloc'ed) */
    uint8_t *scales;         /* FP4: [rows, cols/block] (malloc'ed), else NULL */
    float *scale_f32;        /* FP8: [scale_rows, scale_cols] (malloc'ed), else NULL */
    size_t scale_rows, scale_cols;
    float *row_scale;        /* row-scaled NVFP4: [rows] recorded row scales (malloc'ed), else NULL */
    float *row_decode_scale; /* row-scaled NVFP4: [rows] decode factors (malloc'ed), else NULL */
    uint32_t reserved[4]; /* zero; room for fields added later */
} fp4s_qfile_data;
FP4S_API size_t fp4s_qfile_data_size(void);

/* Read a whole file written by fp4s_qfile_*; the caller frees with
 * fp4s_qfile_data_free. Checks the schema and that shapes agree. */
FP4S_API int fp4s_qfile_read(const char *path, fp4s_qfile_data *d);
FP4S_API void fp4s_qfile_data_free(fp4s_qfile_data *d);

#ifdef __cplusplus
}
#endif
#endif
