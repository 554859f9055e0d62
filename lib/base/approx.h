/* Emulation of the NVIDIA GPU instructions the rollout engines' quantize
 * kernels use (internal, not installed, not exported).
 *
 * Measured on an H200 (sm_90) over every float32 input by
 * scripts/gpu/engines/approx_scan.cu; bit-exact there, not claimed for other
 * architectures (fp4s_approx_arch names the one measured):
 *
 * - rcp.approx.ftz.f32: the result depends on the input's mantissa only (the
 *   exponent scales it exactly; zero and subnormal inputs give +-Inf, results
 *   below 2^-126 flush to +-0, Inf gives +-0, NaN the NaN 0x7FFFFFFF). The
 *   result for mantissa m is the correctly rounded 1/(1.m) plus a deviation of
 *   -1, 0 or +1 units in the last place, from the table
 *   lib/base/approx/rcp_approx_ftz_sm90.h5, compiled into the library.
 * - ex2.approx.ftz.f32 of an integer n: exactly 2^n for -126 <= n <= 127, 0
 *   below, +Inf above (its non-integer inputs are not emulated).
 * - mul.rn.ftz.f32: subnormal operands read as +-0, a product whose value
 *   rounded to 24 bits with an unbounded exponent is below 2^-126 flushes to
 *   +-0 (IEEE tininess after rounding; no other product differs from IEEE).
 * - div.rn.ftz.f32: the same flushing, by the same rule (4.2 M quotients
 *   near 2^-126 and 1 M random ones on the H200 agree).
 * - setp.*.ftz.f32 (a comparison compiled with -ftz=true): a subnormal operand
 *   compares as +-0 (seen in FlashInfer's PTX, and on the H200: its
 *   "vecMax != 0" is false for a block of subnormals).
 */
#ifndef FP4S_APPROX_H
#define FP4S_APPROX_H

#include <stdint.h>

/* "sm_90 (NVIDIA H200, ...)": the architecture the table was measured on. */
extern const char fp4s_approx_arch[];

float fp4s_rcp_approx_ftz(float x);
/* n outside [-160, 160] behaves as its end (0 or +Inf) */
float fp4s_ex2_approx_ftz_int(int n);
float fp4s_mul_ftz(float a, float b);
float fp4s_div_ftz(float a, float b);
/* a subnormal read as +-0 (the sign kept): an operand of an ftz instruction */
float fp4s_daz(float v);

/* The table: the deviation of rcp.approx.ftz.f32(1.m) from the correctly
 * rounded reciprocal, in ulps (-1, 0, +1), for mantissa m (0 .. 2^23-1). */
int fp4s_rcp_approx_dev(uint32_t m);

#endif
