/* Which specs the CUDA kernels implement (internal). */
#ifndef FP4S_CUDA_SUPPORTS_H
#define FP4S_CUDA_SUPPORTS_H

#include <fp4scope/decompose.h>
#include <fp4scope/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* true if the kernels implement s; otherwise false and *why says why. */
bool fp4s_cu_supports_why(const fp4s_spec *s, const char **why);

/* Where work needing the capabilities need (FP4S_CUDA_CAP_*) on spec s (NULL:
 * any) runs when want is asked for (fp4s_cuda_device_resolve's contract). */
int fp4s_cu_resolve(unsigned need, const fp4s_spec *s, fp4s_device want, fp4s_device *got);

/* The device the first CUDA call takes (fp4s_cuda_bind's record, else
 * FP4S_GPU and the launcher's local rank) among ndev visible ones: 0 with
 * *ordinal (-1: leave CUDA's current device), else the error code with the
 * reason in why. */
int fp4s_cu_bind_resolve(int ndev, int *ordinal, char *why, size_t n);

#ifdef __cplusplus
}
#endif
#endif
