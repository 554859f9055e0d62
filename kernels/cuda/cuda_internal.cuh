/* Host-side helpers shared by the CUDA ops (internal, not installed). */
#ifndef FP4S_CUDA_INTERNAL_CUH
#define FP4S_CUDA_INTERNAL_CUH

#include <fp4scope/cuda.h>
#include <cuda_runtime.h>

#include "quant_block.cuh"

/* Map a CUDA error to a library error with a detail ("cuda: what: text"). */
int fp4s_cu_fail(cudaError_t e, const char *what);

/* Check a spec, tensor scale and shape for the kernels; fill the POD params.
 * need_ts: the spec uses the tensor scale (NVFP4). Records a detail. */
int fp4s_cu_prepare(const fp4s_spec *s, const fp4s_tscale *ts, size_t rows, size_t cols,
                    fp4s_cu_params *p);

/* The kernels' input type index (CU_DT_*) of a fp4s_dtype, or FP4S_EDTYPE
 * with a detail naming op for the types they do not read. */
int fp4s_cu_dtype(fp4s_dtype dt, const char *op);

/* The checks of a quantize call, on device or host buffers alike: the spec,
 * tensor scale and shape (fp4s_cu_prepare fills *p), the input type (*dt,
 * CU_DT_*), the buffers, the row stride and a usable GPU. 0 to go on, 1 when
 * there is nothing to quantize (rows or cols 0), else the error. */
int fp4s_cu_quantize_args(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype, const void *x,
                          size_t rows, size_t cols, size_t ld, const void *codes, const void *scales,
                          fp4s_cu_params *p, int *dt);

/* The same for a dequantize call: the spec, tensor scale and shape (*p), the
 * buffers and a usable GPU. 0 to go on, 1 when there is nothing to
 * dequantize, else the error. */
int fp4s_cu_dequantize_args(const fp4s_spec *s, const fp4s_tscale *ts, const void *codes, const void *scales,
                            const void *out, size_t rows, size_t cols, fp4s_cu_params *p);

/* Capability bits of modules beyond quantize (the decomposition). */
unsigned fp4s_cu_extra_caps(void);

/* The amax kernel launched on st (no check, no synchronisation): the largest
 * finite |x| of rows [rows, cols] (stride ld, type dt: CU_DT_*) into *d_bits
 * by atomicMax of its float32 bits, the count of NaN/Inf into *d_nf (both
 * device memory, accumulated: zero them first). */
void fp4s_cu_amax_async(int dt, const void *d_x, size_t rows, size_t cols, size_t ld, unsigned int *d_bits,
                        unsigned long long *d_nf, cudaStream_t st);

/* Blocks for a grid-stride launch of `threads` threads over `work` items. */
unsigned fp4s_cu_grid(size_t work, unsigned threads);

#include "emulate.h"

#endif
