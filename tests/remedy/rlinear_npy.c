/* Test driver of the linear-forward call (fp4s_rlinear_*), for the numpy
 * cross-check: reads X and W (.npy), applies one remedy and writes Y and the
 * weight operand W^ as .npy; prints the cost as key=value lines.
 *
 *   rlinear_npy REMEDY FORMAT PROFILE WEIGHT2D X.npy W.npy Y.npy WHAT.npy
 *               [--tile ROWS] [--operands both|act|weight] [--order index|rank]
 * WEIGHT2D is -1 (auto), 0 or 1 (fp4s_remedy_weight_spec). */
#include <fp4scope/remedy.h>
#include <fp4scope/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int rc)
{
    fprintf(stderr, "rlinear_npy: %s\n", *fp4s_last_error() ? fp4s_last_error() : fp4s_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: rlinear_npy REMEDY FORMAT PROFILE WEIGHT2D X.npy W.npy Y.npy WHAT.npy [opts]\n");
        return 2;
    }
    fp4s_remedy r;
    int rc = fp4s_remedy_parse(argv[1], &r);
    if (rc) return fail(rc);
    for (int a = 9; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--tile")) r.rac_tile_rows = (size_t)strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--operands"))
            r.operands = !strcmp(argv[a + 1], "act") ? FP4S_OPERANDS_ACT
                       : !strcmp(argv[a + 1], "weight") ? FP4S_OPERANDS_WEIGHT : FP4S_OPERANDS_BOTH;
        else if (!strcmp(argv[a], "--order"))
            r.rac_order = !strcmp(argv[a + 1], "rank") ? FP4S_RAC_ORDER_RANK : FP4S_RAC_ORDER_INDEX;
        else {
            fprintf(stderr, "rlinear_npy: unknown option %s\n", argv[a]);
            return 2;
        }
    }
    fp4s_format fmt;
    if ((rc = fp4s_format_parse(argv[2], &fmt))) return fail(rc);
    fp4s_spec as, ws;
    if ((rc = fp4s_spec_profile(&as, fmt, argv[3]))) return fail(rc);
    fp4s_remedy_weight_spec(&as, atoi(argv[4]), &ws);
    float *x = NULL, *w = NULL;
    size_t m, k, n, k2;
    if ((rc = fp4s_source_read_all(argv[5], &x, &m, &k))) return fail(rc);
    if ((rc = fp4s_source_read_all(argv[6], &w, &n, &k2))) return fail(rc);
    if (k != k2) {
        fprintf(stderr, "rlinear_npy: K differs\n");
        return 1;
    }
    fp4s_rlinear *L = NULL;
    if ((rc = fp4s_rlinear_open(&r, &as, &ws, w, n, k, k, &L))) return fail(rc);
    float *y = malloc(m * n * sizeof *y);
    fp4s_remedy_cost c;
    if ((rc = fp4s_rlinear_forward(L, x, m, k, y, n, &c))) return fail(rc);
    if ((rc = fp4s_npy_write(argv[7], FP4S_DT_F32, 2, m, n, y))) return fail(rc);
    if ((rc = fp4s_npy_write(argv[8], FP4S_DT_F32, 2, n, k, fp4s_rlinear_weight(L)))) return fail(rc);
    printf("flops_fp4=%.17g\nflops_bf16=%.17g\nflops_fp32=%.17g\nflops_extra=%.17g\nbytes_extra=%.17g\n"
           "act_bits=%.17g\nweight_bits=%.17g\nrac_channels=%zu\nrac_padded=%zu\nrac_tiles=%zu\nkept=%.17g\n",
           c.flops_fp4, c.flops_bf16, c.flops_fp32, c.flops_extra, c.bytes_extra, c.act_bits, c.weight_bits,
           c.rac_channels, c.rac_padded, c.rac_tiles, c.kept);
    fp4s_rlinear_close(&L);
    free(x);
    free(w);
    free(y);
    return 0;
}
