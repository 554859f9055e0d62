/* Reproducer of the gcc 13 -O2 miscompile of fp4s_tscale_init's old TE branch
 * (scripts/device/toolchain_check.sh builds it at several -O levels).
 *
 * old(): the code fp4scope had, e = 2688/amax, then clamped: S_enc must be
 * FLT_MAX when the quotient overflows (amax <= 0x1.5p-117), 1 only for
 * amax == 0. There is no undefined behaviour (a float division that
 * overflows is +Inf under C Annex F) and no fast-math flag. new(): the code
 * fp4scope has now (the quotient in double, rounded once to float; amax
 * tested before dividing). Prints both for a few amax values; exit 1 if
 * old() or new() is wrong. */
#include <float.h>
#include <math.h>
#include <stdio.h>

/* both with fp4s_tscale_init's argument check in front, which tells the
 * compiler that amax is in [0, FLT_MAX] */
__attribute__((noinline)) static float old_senc(float amax)
{
    if (!(amax >= 0.0f) || isinf(amax)) return -1.0f;
    float e = 2688.0f / amax;
    if (e > FLT_MAX) e = FLT_MAX;
    if (amax == 0.0f || e == 0.0f) e = 1.0f;
    return e;
}

__attribute__((noinline)) static float new_senc(float amax)
{
    if (!(amax >= 0.0f) || isinf(amax)) return -1.0f;
    float e = 1.0f;
    if (amax != 0.0f) {
        double q = 2688.0 / (double)amax;
        e = q > (double)FLT_MAX ? FLT_MAX : (float)q;
        if (e == 0.0f) e = 1.0f;
    }
    return e;
}

int main(void)
{
    static const float a[] = {0.0f, 1e-45f, 0x1p-126f, 0x1.5p-117f, 0x1.500002p-117f, 1.0f, 2688.0f};
    static const float want[] = {1.0f, FLT_MAX, FLT_MAX, FLT_MAX, 0x1.fffffcp127f, 2688.0f, 1.0f};
    int bad_old = 0, bad_new = 0;
    for (int i = 0; i < (int)(sizeof a / sizeof a[0]); i++) {
        volatile float x = a[i];
        float o = old_senc(x), n = new_senc(x);
        bad_old += o != want[i];
        bad_new += n != want[i];
        printf("amax %-15a old S_enc %-15a new S_enc %-15a %s\n", (double)a[i], (double)o, (double)n,
               o != want[i] ? "<- old wrong" : "");
    }
    printf("old: %d wrong, new: %d wrong\n", bad_old, bad_new);
    return bad_new ? 1 : 0;
}
