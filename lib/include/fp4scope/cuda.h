/* CUDA kernels for the FP4 quantizers (optional).
 *
 * The GPU kernels reproduce the C reference (fp4s_quantize / fp4s_dequantize)
 * bit for bit: same E2M1 codes, same scale bytes, same dequantized floats, for
 * every input including ties, subnormals, saturating values, NaN/Inf and
 * all-zero blocks (tests/cuda checks this on a GPU). The GPU has no FP4 unit
 * in use here: FP4 is emulated exactly, in float32 operations rounded to
 * nearest in the reference's order, and integer bit arithmetic.
 *
 * Every function exists in every build. Without CUDA support compiled in, or
 * on a machine with no usable GPU, fp4s_cuda_available() returns false and the
 * ops return FP4S_ENOTSUP with a detail: callers fall back to the CPU.
 * fp4s_cuda_supports() answers for the spec alone in every build.
 *
 * Layout: input x is row-major [rows, cols] float32, BF16 or FP16 (the _ex
 * functions; the others take float32) with row stride ld (elements, ld >=
 * cols); cols must be a multiple of the block size. BF16 and FP16 values are
 * widened to float32 exactly, so they quantize as fp4s_quantize quantizes
 * fp4s_bf16_decode / fp4s_fp16_decode of them. Outputs are contiguous: codes
 * unpacked like fp4s_qout, [rows, cols] (one E2M1 code per byte, sign in bit
 * 3), or packed, [rows, cols/2] bytes in the spec's packing as
 * fp4s_pack_e2m1_block(s->packing, s->block, ...) writes each row (pairs:
 * byte i = q[2i] | q[2i+1] << 4; split: per block, byte j = q[j] | q[j+block/2]
 * << 4); scales [rows, cols/block] (E8M0 or E4M3 byte as the engine stores
 * it; NVFP4 2-D tiles repeat their scale on each row). The tensor scale
 * (NVFP4) comes from fp4s_tscale_init() on the tensor amax, which
 * fp4s_cuda_amax() computes on the device. Whole tensors only: 2-D tiles start
 * at row 0.
 *
 * Streams are passed as void * (a cudaStream_t; NULL is the default stream) so
 * this header needs no CUDA header. The d_ functions are asynchronous on that
 * stream: they check their arguments, launch, and report launch errors; an
 * error inside a kernel surfaces at the caller's next synchronisation. */
#ifndef FP4SCOPE_CUDA_H
#define FP4SCOPE_CUDA_H

#include <fp4scope/decompose.h>
#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* True when CUDA support is compiled in and at least one GPU can run the
 * kernels (compute capability of the built architecture or newer). */
FP4S_API bool fp4s_cuda_available(void);

/* Name and compute capability of the device in use ("NVIDIA H200, sm_90"),
 * or why none is usable; writes at most n bytes, returns the length needed. */
FP4S_API size_t fp4s_cuda_describe(char *buf, size_t n);

/* Which GPU the library uses (fp4scope-mpi(7), GPUs). Decided at the
 * library's first CUDA call, from a policy and the process's node-local
 * rank:
 *   "local"    the local rank modulo the number of visible devices (the
 *              default where a local rank is known);
 *   "current"  CUDA's current device of the calling thread, untouched (the
 *              default where no local rank is known: one process, device 0
 *              unless the caller chose another);
 *   "N"        visible device N;
 *   "N,M,..."  local rank i takes entry i modulo the list's length.
 * The policy is the last one given to fp4s_cuda_bind(), else the
 * environment's FP4S_GPU; the local rank the one given there (>= 0), else the
 * launcher's (fp4s_cuda_local_rank_env()). Devices are numbered as CUDA sees
 * them, after CUDA_VISIBLE_DEVICES. A policy that cannot be met (a malformed
 * FP4S_GPU, a device beyond those visible) leaves no usable GPU:
 * fp4s_cuda_available() is false and fp4s_cuda_describe() says why. */

/* Record policy how (NULL: FP4S_GPU's, or the default) and local rank
 * local_rank (< 0: the launcher's) for the first CUDA call; touches no GPU.
 * FP4S_EINVAL with a message for a malformed policy (then nothing changes). */
FP4S_API int fp4s_cuda_bind(const char *how, int local_rank);

/* The device ordinal policy how gives local rank local_rank (>= 0) among ndev
 * visible devices, into *ordinal; -1 for "current". FP4S_EINVAL for a
 * malformed policy, FP4S_ERANGE for a device >= ndev (or ndev < 1). Pure: the
 * rule fp4s_cuda_bind applies, for callers and tests. */
FP4S_API int fp4s_cuda_bind_ordinal(const char *how, int local_rank, int ndev, int *ordinal);

/* The node-local rank an MPI or batch launcher gives this process:
 * OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun), SLURM_LOCALID (srun),
 * MPI_LOCALRANKID (MPICH's Hydra), in that order; -1 when none is set or
 * readable. */
FP4S_API int fp4s_cuda_local_rank_env(void);

/* What this build and machine can do on the GPU: FP4S_CUDA_CAP_* bits.
 * BUILT: CUDA support is compiled in; DEVICE: a usable GPU is present (the
 * ops below then run); the others name what the kernels implement whenever
 * BUILT is set. */
enum fp4s_cuda_cap {
    FP4S_CUDA_CAP_BUILT     = 1u << 0,
    FP4S_CUDA_CAP_DEVICE    = 1u << 1,
    FP4S_CUDA_CAP_QUANTIZE  = 1u << 2, /* quantize, dequantize, amax (float32 input) */
    FP4S_CUDA_CAP_BF16      = 1u << 3, /* BF16 input */
    FP4S_CUDA_CAP_F16       = 1u << 4, /* FP16 input */
    FP4S_CUDA_CAP_PACKED    = 1u << 5, /* packed codes (pairs, split) */
    FP4S_CUDA_CAP_DECOMPOSE = 1u << 6, /* the decomposition on the GPU: fp4s_cuda_decomp_add and
                                        * fp4s_decomp_opts.device (<fp4scope/decompose.h>) */
    FP4S_CUDA_CAP_REMEDY    = 1u << 7  /* the remedies' GEMMs through cuBLAS and rac's kernels:
                                        * fp4s_remedy_eval_opts.device (<fp4scope/remedy.h>) */
};
FP4S_API unsigned fp4s_cuda_caps(void);

/* True when the kernels implement this spec (MXFP4: every scale rule, tie
 * rule, zero-sign and non-finite policy; NVFP4: the te, torchao, modelopt and
 * ggml recipes, 1-D and 2-D). False for FP8 and for invalid specs. Does not
 * look at the device: combine with fp4s_cuda_available(). */
FP4S_API bool fp4s_cuda_supports(const fp4s_spec *s);

/* Where quantizing with s on a device asked for as want runs: CPU stays
 * CPU; CUDA needs CUDA built in, a usable GPU and a spec the kernels
 * implement (FP4S_ENOTSUP naming what is missing); AUTO is CUDA where that
 * holds, else CPU. */
FP4S_API int fp4s_cuda_device_resolve(const fp4s_spec *s, fp4s_device want, fp4s_device *got);

/* Quantize device memory d_x into d_codes and d_scales (both device memory,
 * both required) on a stream. ts is the tensor scale (needed for NVFP4; may be
 * NULL for MXFP4). */
FP4S_API int fp4s_cuda_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                const float *d_x, size_t rows, size_t cols, size_t ld,
                                uint8_t *d_codes, uint8_t *d_scales, void *stream);

/* The same for input type dtype (FP4S_DT_F32, FP4S_DT_BF16 or FP4S_DT_F16;
 * another type is FP4S_EDTYPE) and codes one per byte (packed false) or
 * packed (true), in the layouts above. */
FP4S_API int fp4s_cuda_quantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                   const void *d_x, size_t rows, size_t cols, size_t ld, bool packed,
                                   uint8_t *d_codes, uint8_t *d_scales, void *stream);

/* Dequantize device codes and scales (layout above) into d_out [rows, cols]
 * (contiguous) on a stream. */
FP4S_API int fp4s_cuda_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                  const uint8_t *d_codes, const uint8_t *d_scales,
                                  size_t rows, size_t cols, float *d_out, void *stream);

FP4S_API int fp4s_cuda_dequantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                     const uint8_t *d_codes, const uint8_t *d_scales,
                                     size_t rows, size_t cols, float *d_out, void *stream);

/* Max |x| over the finite entries of device array d_x (as fp4s_amax) and the
 * number of NaN/Inf entries (nonfinite may be NULL; added to). Synchronises
 * the stream. _ex: input of type dtype as above. */
FP4S_API int fp4s_cuda_amax(const float *d_x, size_t rows, size_t cols, size_t ld,
                            float *amax, uint64_t *nonfinite, void *stream);
FP4S_API int fp4s_cuda_amax_ex(fp4s_dtype dtype, const void *d_x, size_t rows, size_t cols, size_t ld,
                               float *amax, uint64_t *nonfinite, void *stream);

/* The statistics fp4s_quantize would give for float32 device rows d_x
 * (counters, and err2/x2 through the same exact accumulators, so the same
 * bits as fp4s_quantize's fp4s_qstats), added into *st as fp4s_qstats_merge
 * adds. Synchronises the stream. */
FP4S_API int fp4s_cuda_qstats(const fp4s_spec *s, const fp4s_tscale *ts, const float *d_x, size_t rows,
                              size_t cols, size_t ld, fp4s_qstats *st, void *stream);

/* Host-memory conveniences: copy in, run on the default stream, copy out,
 * synchronise. x is [rows, cols] with row stride ld; codes/scales/out are
 * contiguous host buffers as above. */
FP4S_API int fp4s_cuda_quantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                     const float *x, size_t rows, size_t cols, size_t ld,
                                     uint8_t *codes, uint8_t *scales);
FP4S_API int fp4s_cuda_dequantize_host(const fp4s_spec *s, const fp4s_tscale *ts,
                                       const uint8_t *codes, const uint8_t *scales,
                                       size_t rows, size_t cols, float *out);
/* With an input type and packed codes (codes then hold rows * cols / 2 bytes). */
FP4S_API int fp4s_cuda_quantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                        const void *x, size_t rows, size_t cols, size_t ld, bool packed,
                                        uint8_t *codes, uint8_t *scales);
FP4S_API int fp4s_cuda_dequantize_host_ex(const fp4s_spec *s, const fp4s_tscale *ts, bool packed,
                                          const uint8_t *codes, const uint8_t *scales,
                                          size_t rows, size_t cols, float *out);

/* Everything fp4s_quantize gives for float32 host rows x in one call:
 * codes (one per byte, or packed), scale bytes, the dequantized values
 * [rows, cols] and the statistics added into *st; each output may be NULL
 * (not computed or not copied back). Bit for bit fp4s_quantize's. */
FP4S_API int fp4s_cuda_quantize_host_all(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows,
                                         size_t cols, size_t ld, bool packed, uint8_t *codes, uint8_t *scales,
                                         float *dequant, fp4s_qstats *st);

#ifdef __cplusplus
}
#endif
#endif
