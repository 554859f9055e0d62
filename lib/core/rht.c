/* TransformerEngine's random Hadamard transform (spec->rht, quant.h): each
 * 16-element block of a row times R = diag(signs) H16 / 4, rounded as TE's
 * BF16 matmul rounds its output; and the tensor amax after it (for
 * fp4s_spec_amax in quant.c). */
#include <fp4scope/quant.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sylvester's H16: H[i][j] = (-1)^popcount(i & j), the matrix of
 * transformer_engine/pytorch/tensor/nvfp4_tensor.py get_hadamard_matrix. */
static int h16(unsigned i, unsigned j) { return (__builtin_popcount(i & j) & 1) ? -1 : 1; }

static void rht_matrix(uint16_t signs, double r[16][16])
{
    for (unsigned i = 0; i < 16; i++)
        for (unsigned j = 0; j < 16; j++) r[i][j] = ((signs >> i) & 1 ? -0.25 : 0.25) * h16(i, j);
}

static void rht_block(const double r[16][16], const float *x, float *y)
{
    float out[16];
    for (unsigned j = 0; j < 16; j++) {
        double acc = 0.0; /* x_i * (+-0.25) and their sum are exact in double */
        for (unsigned k = 0; k < 16; k++) acc += (double)x[k] * r[k][j];
        out[j] = fp4s_bf16_decode(fp4s_bf16_encode((float)acc, FP4S_TIE_EVEN));
    }
    memcpy(y, out, sizeof out);
}

int fp4s_rht_apply(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld, float *y, size_t ldy)
{
    if (!s || (rows && cols && (!x || !y))) return fp4s_error_set(FP4S_EINVAL, "rht: NULL argument");
    if (cols % 16) return fp4s_error_set(FP4S_ESHAPE, "rht: %zu columns are not a multiple of 16", cols);
    if (ld < cols || ldy < cols) return fp4s_error_set(FP4S_EINVAL, "rht: row stride below %zu columns", cols);
    double r[16][16];
    rht_matrix(s->rht_signs, r);
    for (size_t i = 0; i < rows; i++)
        for (size_t c0 = 0; c0 < cols; c0 += 16) rht_block((const double(*)[16])r, x + i * ld + c0, y + i * ldy + c0);
    return 0;
}

/* max |y| over the finite values of the rotated rows, one 16-element block at
 * a time (no allocation); non-finite values are counted in the input. */
float fp4s_rht_amax(const fp4s_spec *s, const float *x, size_t rows, size_t cols, size_t ld, uint64_t *nonfinite)
{
    float m = 0.0f;
    if (ld < cols) ld = cols;
    double r[16][16];
    rht_matrix(s->rht_signs, r);
    for (size_t i = 0; i < rows; i++)
        for (size_t c0 = 0; c0 + 16 <= cols; c0 += 16) {
            float y[16];
            rht_block((const double(*)[16])r, x + i * ld + c0, y);
            for (int j = 0; j < 16; j++) {
                float a = fabsf(y[j]);
                if (a == a && a != INFINITY && a > m) m = a;
            }
        }
    if (nonfinite) (void)fp4s_amax(x, rows, cols, ld, nonfinite);
    return m;
}
