/* Shared libraries opened at run time instead of linked: the CPU BLAS
 * (core/blas.h) and cuBLAS (kernels/cuda/remedy.cu), which would otherwise be
 * loaded, and start their threads, in every program that links libfp4scope. */
#ifndef FP4S_CORE_DL_H
#define FP4S_CORE_DL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the first of names[0..nnames) that loads (RTLD_NOW | RTLD_LOCAL;
 * empty names are skipped) and stores the address of each of syms[0..nsyms)
 * in fns: the first nreq must be there, the others are NULL where absent.
 * Returns 0, or -1 with why in err (errlen bytes): "WHAT could not be loaded
 * (the loader's reason for the last name tried)", or "WHAT (FILE) has no SYM".
 * The library stays loaded for the life of the process. Not thread-safe on
 * its own: call it once (pthread_once, std::call_once). */
int fp4s_dl_load(const char *what, const char *const *names, size_t nnames, const char *const *syms,
                 size_t nsyms, size_t nreq, void **fns, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
