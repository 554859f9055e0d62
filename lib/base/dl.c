/* Shared libraries opened at run time (dl.h). */
#include "base/dl.h"

#include <dlfcn.h>
#include <stdio.h>

int fp4s_dl_load(const char *what, const char *const *names, size_t nnames, const char *const *syms,
                 size_t nsyms, size_t nreq, void **fns, char *err, size_t errlen)
{
    void *h = NULL;
    const char *name = "", *why = "no file name to try";
    for (size_t i = 0; i < nnames && !h; i++) {
        if (!names[i] || !*names[i]) continue;
        name = names[i];
        if (!(h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
            why = dlerror();
            if (!why) why = "?";
        }
    }
    if (!h) {
        snprintf(err, errlen, "%s could not be loaded (%s)", what, why);
        return -1;
    }
    for (size_t i = 0; i < nsyms; i++) {
        fns[i] = dlsym(h, syms[i]);
        if (!fns[i] && i < nreq) {
            snprintf(err, errlen, "%s (%s) has no %s", what, name, syms[i]);
            dlclose(h);
            return -1;
        }
    }
    return 0;
}
