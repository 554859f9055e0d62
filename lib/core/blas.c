/* The CPU BLAS, opened on first use (blas.h). */
#include "core/blas.h"
#include "base/dl.h"

#include <fp4scope/common.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if FP4S_HAVE_BLAS
static fp4s_blas_fns fns;
static const fp4s_blas_fns *loaded;
static char why[900];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    /* FP4S_BLAS, else the BLAS the build linked its check against: by the
     * name the dynamic loader found it under (so the search a linked library
     * gets: LD_LIBRARY_PATH, the cache), then by the file it was then */
    const char *env = getenv("FP4S_BLAS");
    const char *names[] = {FP4S_BLAS_NAME, FP4S_BLAS_PATH};
    const char *const *try = names;
    size_t ntry = 2;
    if (env && *env) {
        try = &env;
        ntry = 1;
    }
    char what[300];
    snprintf(what, sizeof what, "the BLAS %s%s", try[0], ntry == 1 ? " (FP4S_BLAS)" : "");
    const char *syms[] = {"cblas_sgemm", "cblas_dgemm", "openblas_set_num_threads"};
    void *p[3];
    if (fp4s_dl_load(what, try, ntry, syms, 3, 2, p, why, sizeof why)) return;
    memcpy(&fns.sgemm, &p[0], sizeof p[0]);
    memcpy(&fns.dgemm, &p[1], sizeof p[1]);
    memcpy(&fns.set_num_threads, &p[2], sizeof p[2]);
    loaded = &fns;
}

const fp4s_blas_fns *fp4s_blas(void)
{
    pthread_once(&once, load);
    if (!loaded) fp4s_error_set(FP4S_ENOTSUP, "%s", why);
    return loaded;
}
#else
const fp4s_blas_fns *fp4s_blas(void)
{
    fp4s_error_set(FP4S_ENOTSUP, "libfp4scope was built without a BLAS (-Dblas)");
    return NULL;
}
#endif
