/* Host emulation of the CUDA kernels (internal, not installed).
 *
 * The kernels' per-block arithmetic (quant_block.cuh) run on the CPU over a
 * whole tensor, in the same layout as fp4s_cuda_quantize/_dequantize. It is
 * compiled from the same source as the device code, so tests/cuda can check
 * that arithmetic against the C reference on machines without a GPU; the
 * GPU run then checks the device compilation of it. Not exported from the
 * shared library. */
#ifndef FP4S_CUDA_EMULATE_H
#define FP4S_CUDA_EMULATE_H

#include <fp4scope/quant.h>
#include <fp4scope/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

int fp4s_cuda_emulate_quantize(const fp4s_spec *s, const fp4s_tscale *ts,
                               const float *x, size_t rows, size_t cols, size_t ld,
                               uint8_t *codes, uint8_t *scales);
int fp4s_cuda_emulate_quantize_ex(const fp4s_spec *s, const fp4s_tscale *ts, fp4s_dtype dtype,
                                  const void *x, size_t rows, size_t cols, size_t ld, bool packed,
                                  uint8_t *codes, uint8_t *scales);
int fp4s_cuda_emulate_dequantize(const fp4s_spec *s, const fp4s_tscale *ts,
                                 const uint8_t *codes, const uint8_t *scales,
                                 size_t rows, size_t cols, float *out);

/* fp4s_cuda_qstats's arithmetic (qstats.cu) on the host, x in host memory. */
int fp4s_cuda_emulate_qstats(const fp4s_spec *s, const fp4s_tscale *ts, const float *x, size_t rows, size_t cols,
                             size_t ld, fp4s_qstats *st);

/* Every float32 magnitude up to 8 (and +Inf, FLT_MAX) through the kernels'
 * E2M1 encoders for each tie rule, against fp4s_e2m1_encode: the number of
 * disagreements (first one's bits in *first). Takes ~a minute. */
uint64_t fp4s_cuda_emulate_check_e2m1(uint32_t *first);

/* The kernels' division by a block factor (reciprocal and two FMAs) against
 * the IEEE division on n pseudo-random and planted pairs: disagreements. */
uint64_t fp4s_cuda_emulate_check_div(uint64_t seed, uint64_t n, float *first_x, float *first_t);

/* Groups the last emulated quantizations encoded through the packed BF16
 * path (cu_encode16_pk), and all groups; reset: start counting again. */
void fp4s_cuda_emulate_paths(uint64_t *packed, uint64_t *groups, bool reset);

/* Every BF16 pattern through the packed BF16 element path, every MXFP4 scale
 * code, RNE, RTZ and RHA, against fp4s_e2m1_encode: disagreements (first one's
 * pattern | scale code << 16 | tie << 24 in *first). */
uint64_t fp4s_cuda_emulate_check_bf16(uint32_t *first);

/* The same on the GPU against the integer threshold count (UINT64_MAX if it
 * could not run). */
uint64_t fp4s_cuda_device_check_bf16(uint32_t *first);

/* On the GPU: the float32 fast element path on every float32 magnitude up to
 * 8 (+Inf, FLT_MAX), both signs, RNE, RTZ and RHA, against the integer
 * threshold count (disagreements; UINT64_MAX if it could not run). */
uint64_t fp4s_cuda_device_check_e2m1(uint32_t *first);

/* On the GPU: the device's E4M3 conversion against the software encoder on
 * every float32 (disagreements; UINT64_MAX if it could not run). */
uint64_t fp4s_cuda_device_check_e4m3(uint32_t *first);

#ifdef __cplusplus
}
#endif
#endif
