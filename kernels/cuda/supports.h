/* Which specs the CUDA kernels implement (internal). */
#ifndef FP4S_CUDA_SUPPORTS_H
#define FP4S_CUDA_SUPPORTS_H

#include <fp4scope/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* true if the kernels implement s; otherwise false and *why says why. */
bool fp4s_cu_supports_why(const fp4s_spec *s, const char **why);

#ifdef __cplusplus
}
#endif
#endif
