/* The quantize kernels for bf16 input (see quantize_kernels.cuh). */
#define FP4S_CUDA_QUANT_INSTANTIATE 1
#include "quantize_kernels.cuh"

template void fp4s_cu_quant_launch<CU_DT_BF16>(int, int, int, bool, unsigned, cudaStream_t, const fp4s_cu_params &,
                                            const void *, size_t, size_t, size_t, size_t, bool, bool, bool,
                                            uint8_t *, uint8_t *);
