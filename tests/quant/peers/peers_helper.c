/* ctypes entry points for peers_torch.py: fp4scope's codecs, scale rules and
 * quantizer over whole arrays. Built by meson against the core module
 * (BUILD/tests/quant/peers/libpeers.so; tests/quant/peers/meson.build). */
#include <string.h>

#include <fp4scope/quant.h>
#include "base/codec_internal.h"

void ph_e4m3_encode(const float *x, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = fp4s_e4m3_encode(x[i], FP4S_TIE_EVEN);
}

void ph_mx_k(int rule, const float *a, int32_t *k, size_t n)
{
    for (size_t i = 0; i < n; i++) k[i] = fp4s_mx_k((fp4s_mx_rule)rule, a[i], NULL);
}

/* Quantize x [rows, cols] with a profile; codes [rows, cols], scales
 * [rows, cols/block]. Returns 0 or a negative fp4s error. */
int ph_quant(const char *fmt, const char *profile, const float *x, size_t rows, size_t cols,
             uint8_t *codes, uint8_t *scales)
{
    fp4s_format f;
    fp4s_spec s;
    fp4s_tscale ts;
    int rc = fp4s_format_parse(fmt, &f);
    if (!rc) rc = fp4s_spec_profile(&s, f, profile);
    if (rc) return rc;
    rc = fp4s_tscale_init(&s, fp4s_spec_amax(&s, x, rows, cols, cols, NULL), &ts);
    if (rc) return rc;
    fp4s_qout o;
    memset(&o, 0, sizeof o);
    o.codes = codes;
    o.ld_codes = cols;
    o.scales = scales;
    o.ld_scales = cols / s.block;
    return fp4s_quantize(&s, &ts, x, rows, cols, cols, 0, &o, NULL);
}
