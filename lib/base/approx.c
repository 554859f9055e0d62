/* Emulation of the NVIDIA GPU instructions of the engines' quantize kernels
 * (see approx.h): rcp.approx.ftz.f32 from the measured table, ex2.approx.ftz.f32
 * of integers, and the float32 multiply and divide of code compiled with
 * -ftz=true. */
#include "base/approx.h"

#include <math.h>
#include <string.h>

#include "base/codec_internal.h"

/* approx_table.c, generated at build time from rcp_approx_ftz_sm90.h5 */
extern const unsigned char fp4s_rcp_approx_dev2[(1u << 23) / 4];

int fp4s_rcp_approx_dev(uint32_t m)
{
    m &= 0x7FFFFFu;
    unsigned c = (fp4s_rcp_approx_dev2[m >> 2] >> ((m & 3u) * 2)) & 3u;
    return c == 1 ? 1 : c == 2 ? -1 : 0;
}

float fp4s_rcp_approx_ftz(float x)
{
    uint32_t u = fp4s_f32_bits(x), s = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return fp4s_bits_f32(0x7FFFFFFFu);  /* NaN */
    if (a == 0x7F800000u) return fp4s_bits_f32(s);           /* 1/Inf = 0 */
    if (a < 0x00800000u) return fp4s_bits_f32(s | 0x7F800000u); /* 0, subnormal (ftz): Inf */
    uint32_t m = a & 0x7FFFFFu;
    /* 1/(1.m) correctly rounded: the double quotient rounded once more to
     * float is the float quotient (53 >= 2*24 + 2 bits) */
    float one_m = fp4s_bits_f32(0x3F800000u | m);
    uint32_t t = fp4s_f32_bits((float)(1.0 / (double)one_m)) + (uint32_t)fp4s_rcp_approx_dev(m);
    int re = (int)(t >> 23) - ((int)(a >> 23) - 127);
    if (re < 1) return fp4s_bits_f32(s);                      /* below 2^-126: flushed */
    return fp4s_bits_f32(s | ((uint32_t)re << 23) | (t & 0x7FFFFFu));
}

float fp4s_ex2_approx_ftz_int(int n)
{
    if (n < -126) return 0.0f;
    if (n > 127) return INFINITY;
    return fp4s_bits_f32((uint32_t)(n + 127) << 23);
}

/* +-0 for a subnormal (the sign kept) */
static inline float daz(float v)
{
    uint32_t u = fp4s_f32_bits(v);
    return (u & 0x7FFFFFFFu) < 0x00800000u ? fp4s_bits_f32(u & 0x80000000u) : v;
}

float fp4s_daz(float v) { return daz(v); }

/* The flush of a result computed exactly (or correctly rounded) in double:
 * +-0 when, rounded to 24 bits with an unbounded exponent, it is below
 * 2^-126, i.e. below 2^-126 * (1 - 2^-25) (the midpoint rounds to 2^-126,
 * whose mantissa is even); else its float rounding. */
static inline float ftz_round(double p)
{
    if (fabs(p) < 0x1p-126 * (1.0 - 0x1p-25)) return p < 0 || (p == 0 && signbit(p)) ? -0.0f : 0.0f;
    return (float)p;
}

float fp4s_mul_ftz(float a, float b)
{
    a = daz(a);
    b = daz(b);
    double p = (double)a * (double)b; /* exact: 24 x 24 bits */
    if (isnan(p) || isinf(p)) return (float)p;
    if (p == 0.0) return signbit(p) ? -0.0f : 0.0f;
    return ftz_round(p);
}

float fp4s_div_ftz(float a, float b)
{
    a = daz(a);
    b = daz(b);
    float q = a / b;                  /* IEEE; the flush below decides from the quotient */
    if (isnan(q) || isinf(q) || q == 0.0f) return q;
    /* near the boundary use the double quotient (correctly rounded to 53 bits,
     * which decides the 24-bit rounding unless it is within 2^-53 of a
     * midpoint, impossible for a quotient of two floats) */
    if (fabsf(q) < 0x1p-125f) return ftz_round((double)a / (double)b);
    return q;
}
