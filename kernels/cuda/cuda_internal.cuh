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

/* Which 1-D quantize kernel runs: 8 (a thread per 8 elements, the default:
 * 1.3 to 1.5 times faster on the H200, bench/RESULTS.md) or 4 (a thread per
 * 4 elements), selected with FP4S_CUDA_VARIANT=4 in the environment
 * (scripts/device/cuda_check.sh tests and times both). Read once. */
int fp4s_cu_variant(void);

/* Blocks for a grid-stride launch of `threads` threads over `work` items. */
unsigned fp4s_cu_grid(size_t work, unsigned threads);

#include "emulate.h"

#endif
