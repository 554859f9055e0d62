/* Nibble packing of E2M1 codes: pairs (q[2i] | q[2i+1] << 4: torchao, TE,
 * cuBLAS, vLLM, ModelOpt) and split halves per block (ggml block_mxfp4 /
 * block_nvfp4 sub-blocks: qs[j] = q[j] | q[j + block/2] << 4). */
#include <fp4scope/quant.h>

static int pack_check(const char *what, fp4s_packing p, uint32_t block, const void *a,
                      size_t cols, const void *b)
{
    if (!a || !b) return fp4s_error_set(FP4S_EINVAL, "%s: missing buffer", what);
    if (cols % 2) return fp4s_error_set(FP4S_ESHAPE, "%s: %zu columns is odd", what, cols);
    if (p == FP4S_PACK_SPLIT) {
        if (block < 2 || block % 2)
            return fp4s_error_set(FP4S_EINVAL, "%s: split block %u must be even", what, block);
        if (cols % block)
            return fp4s_error_set(FP4S_ESHAPE, "%s: split packing needs a multiple of %u columns, got %zu",
                                  what, block, cols);
    } else if (p != FP4S_PACK_PAIRS) {
        return fp4s_error_set(FP4S_EINVAL, "%s: unknown packing %d", what, (int)p);
    }
    return 0;
}

int fp4s_pack_e2m1_block(fp4s_packing p, uint32_t block, const uint8_t *codes, size_t cols,
                         uint8_t *packed)
{
    int rc = pack_check("pack", p, block, codes, cols, packed);
    if (rc) return rc;
    if (p == FP4S_PACK_PAIRS) {
        for (size_t i = 0; i < cols / 2; i++)
            packed[i] = (uint8_t)((codes[2 * i] & 15) | (codes[2 * i + 1] & 15) << 4);
        return 0;
    }
    size_t h = block / 2;
    for (size_t b = 0; b < cols; b += block)
        for (size_t j = 0; j < h; j++)
            packed[b / 2 + j] = (uint8_t)((codes[b + j] & 15) | (codes[b + j + h] & 15) << 4);
    return 0;
}

int fp4s_unpack_e2m1_block(fp4s_packing p, uint32_t block, const uint8_t *packed, size_t cols,
                           uint8_t *codes)
{
    int rc = pack_check("unpack", p, block, packed, cols, codes);
    if (rc) return rc;
    if (p == FP4S_PACK_PAIRS) {
        for (size_t i = 0; i < cols / 2; i++) {
            codes[2 * i] = packed[i] & 15;
            codes[2 * i + 1] = packed[i] >> 4;
        }
        return 0;
    }
    size_t h = block / 2;
    for (size_t b = 0; b < cols; b += block)
        for (size_t j = 0; j < h; j++) {
            codes[b + j] = packed[b / 2 + j] & 15;
            codes[b + j + h] = packed[b / 2 + j] >> 4;
        }
    return 0;
}

int fp4s_pack_e2m1(fp4s_packing p, const uint8_t *codes, size_t cols, uint8_t *packed)
{
    return fp4s_pack_e2m1_block(p, 32, codes, cols, packed);
}

int fp4s_unpack_e2m1(fp4s_packing p, const uint8_t *packed, size_t cols, uint8_t *codes)
{
    return fp4s_unpack_e2m1_block(p, 32, packed, cols, codes);
}
