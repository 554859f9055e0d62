/* The structs a caller allocates, seen from a caller: for every row of
 * lib/core/abi_structs.h, sizeof in a program built against the installed
 * headers equals the library's fp4s_<name>_size() and, on the 64-bit ABIs,
 * the size recorded there (a struct that grew or whose reserved[] shrank
 * without a field taking its place fails here, as its library build fails
 * in abi.c); reserved[] is the struct's last member (fp4s_mm_metrics: its
 * slots v[]), so a field added before it keeps every offset; and the
 * functions that fill a struct with its defaults zero reserved[]. */
#include "core/abi_structs.h"

#include <fp4scope/fp4scope.h>
#include <fp4scope/outfile.h>
#include <fp4scope/rl.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int failures, checks;

static void check(int ok, const char *what, const char *name, size_t got, size_t want)
{
    checks++;
    if (!ok) {
        failures++;
        printf("FAIL fp4s_%s: %s (%zu, expected %zu)\n", name, what, got, want);
    }
}

/* The member m of type T ends the struct: nothing but tail padding after it. */
#define ENDS_WITH(T, m) (offsetof(T, m) + sizeof(((T *)0)->m) + _Alignof(T) > sizeof(T))

static void check_size(const char *name, size_t caller, size_t library, size_t recorded, int ends)
{
    check(caller == library, "sizeof in the caller differs from the library's size query", name, caller, library);
#if defined(__x86_64__) || defined(__aarch64__)
    check(caller == recorded, "size differs from the one recorded in abi_structs.h", name, caller, recorded);
#else
    (void)recorded;
#endif
    check(ends, "its room (reserved[]) is not the last member", name, 0, 1);
}

/* reserved[] of *p (n bytes at offset off) is all zero. */
static void check_zero(const char *name, const void *p, size_t off, size_t n)
{
    const unsigned char *b = (const unsigned char *)p + off;
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) nz += b[i] != 0;
    check(nz == 0, "the defaults leave reserved[] bytes non-zero", name, nz, 0);
}

#define DEFAULTS_ZERO(name, call)                                                          \
    do {                                                                                   \
        fp4s_##name v;                                                                     \
        memset(&v, 0xA5, sizeof v);                                                        \
        call;                                                                              \
        check_zero(#name, &v, offsetof(fp4s_##name, reserved), sizeof v.reserved);        \
    } while (0)

int main(void)
{
#define ROW(name, bytes, room) \
    check_size(#name, sizeof(fp4s_##name), fp4s_##name##_size(), (bytes), ENDS_WITH(fp4s_##name, room));
    FP4S_ABI_STRUCTS(ROW)
#undef ROW

    DEFAULTS_ZERO(capture_opts, fp4s_capture_opts_defaults(&v));
    DEFAULTS_ZERO(capture_meta, fp4s_capture_meta_defaults(&v));
    DEFAULTS_ZERO(synth_opts, fp4s_synth_opts_defaults(&v));
    DEFAULTS_ZERO(qfile_opts, fp4s_qfile_opts_defaults(&v));
    DEFAULTS_ZERO(decomp_opts, fp4s_decomp_opts_defaults(&v));
    DEFAULTS_ZERO(channels_opts, fp4s_channels_opts_defaults(&v));
    DEFAULTS_ZERO(mm_opts, fp4s_mm_opts_defaults(&v));
    DEFAULTS_ZERO(trace_opts, fp4s_trace_opts_defaults(&v));
    DEFAULTS_ZERO(mm_onset_opts, fp4s_mm_onset_opts_defaults(&v));
    DEFAULTS_ZERO(mm_changepoint_opts, fp4s_mm_changepoint_opts_defaults(&v));
    DEFAULTS_ZERO(remedy, fp4s_remedy_defaults(&v));
    DEFAULTS_ZERO(remedy_eval_opts, fp4s_remedy_eval_opts_defaults(&v));
    DEFAULTS_ZERO(logits_opts, fp4s_logits_opts_defaults(&v));
    DEFAULTS_ZERO(compare_opts, fp4s_compare_opts_defaults(&v));
    DEFAULTS_ZERO(rl_opts, fp4s_rl_opts_defaults(&v));
    DEFAULTS_ZERO(spec, fp4s_spec_profile(&v, FP4S_NVFP4, "te"));
    /* the options inside options */
    {
        fp4s_channels_opts c;
        memset(&c, 0xA5, sizeof c);
        fp4s_channels_opts_defaults(&c);
        check_zero("channels_opts.decomp", &c.decomp, offsetof(fp4s_decomp_opts, reserved), sizeof c.decomp.reserved);
        fp4s_logits_opts l;
        memset(&l, 0xA5, sizeof l);
        fp4s_logits_opts_defaults(&l);
        check_zero("logits_opts.mm", &l.mm, offsetof(fp4s_mm_opts, reserved), sizeof l.mm.reserved);
    }

    if (failures) {
        printf("%d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("ok: %d checks\n", checks);
    return 0;
}
