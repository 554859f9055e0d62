/* The RL testbed without a BLAS: the handle cannot be opened. */
#include <fp4scope/rl.h>

#include <stddef.h>

static int no_blas(void)
{
    return fp4s_error_set(FP4S_ENOTSUP, "rl: the RL testbed needs a BLAS; this libfp4scope was built "
                          "without one (-Dblas=disabled or none found)");
}

int fp4s_rl_open(const fp4s_rl_opts *o, fp4s_rl **out)
{
    (void)o;
    if (out) *out = NULL;
    return no_blas();
}
void fp4s_rl_close(fp4s_rl **r) { if (r) *r = NULL; }
size_t fp4s_rl_param_count(const fp4s_rl *r) { (void)r; return 0; }
const fp4s_rl_opts *fp4s_rl_options(const fp4s_rl *r) { (void)r; return NULL; }
int fp4s_rl_warmstart(fp4s_rl *r, fp4s_rl_sft *rep) { (void)r; (void)rep; return no_blas(); }
int fp4s_rl_copy_policy(fp4s_rl *dst, const fp4s_rl *src) { (void)dst; (void)src; return no_blas(); }
int fp4s_rl_capture_header(const fp4s_rl *r, fp4s_capture *cap) { (void)r; (void)cap; return no_blas(); }
int fp4s_rl_step(fp4s_rl *r, fp4s_capture *cap, fp4s_rl_stats *st) { (void)r; (void)cap; (void)st; return no_blas(); }
const float *fp4s_rl_policy(const fp4s_rl *r) { (void)r; return NULL; }
int fp4s_rl_set_policy(fp4s_rl *r, const float *P, size_t n) { (void)r; (void)P; (void)n; return no_blas(); }
