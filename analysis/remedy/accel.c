/* Accelerator profiles (dense peak rates and memory bandwidth from vendor
 * specifications, cited in fp4-remedy(1)) and the GEMM time model. */
#include "remedy_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Per GPU, dense (no 2:4 sparsity), TFLOPS and TB/s. fp4 = 0: no FP4 units. */
static const fp4s_accel accels[] = {
    {"b200", "NVIDIA B200 (HGX B200, 1000 W)", 9000, 4500, 2250, 75, 8.0,
     "NVIDIA HGX B200 specifications (8 GPUs: FP4 72 PFLOPS dense, FP8 72 and FP16/BF16 36 PFLOPS with "
     "sparsity, FP32 600 TFLOPS, 8 TB/s per GPU), divided by 8 and by 2 for sparsity",
     "FP32 is the non-tensor rate; measured HBM bandwidth is 7.7 TB/s (the bus is 7680 bits)"},
    {"b300", "NVIDIA B300 (HGX B300, Blackwell Ultra)", 13500, 4500, 2250, 75, 8.0,
     "NVIDIA HGX B300 specifications (8 GPUs: FP4 108 PFLOPS dense, FP8 72 and FP16/BF16 36 PFLOPS with "
     "sparsity, FP32 600 TFLOPS), divided by 8 and by 2 for sparsity",
     "FP4 dense not confirmed from NVIDIA's own page: the reproductions found give 108 or 144 PFLOPS"},
    {"gb300", "NVIDIA GB300 (GB300 NVL72, per GPU)", 15000, 5000, 2500, 83.3, 8.0,
     "NVIDIA GB300 NVL72 specifications (72 GPUs: FP4 1,080 PFLOPS dense, FP8 720 and FP16/BF16 360 PFLOPS "
     "with sparsity, FP32 6 PFLOPS, 576 TB/s), divided by 72 and by 2 for sparsity",
     "FP8, BF16 and FP32 rates not confirmed from a second source"},
    {"h100", "NVIDIA H100 SXM (no FP4 units)", 0, 1979, 989.5, 67, 3.35,
     "NVIDIA H100 Tensor Core GPU datasheet, SXM (FP8 3,958 and BF16 1,979 TFLOPS with sparsity, FP32 67 "
     "TFLOPS, 3.35 TB/s)", "no FP4 units: FP4 terms are priced at the FP8 rate"},
    {"h200", "NVIDIA H200 SXM (no FP4 units)", 0, 1979, 989.5, 67, 4.8,
     "NVIDIA H200 Tensor Core GPU datasheet, SXM (FP8 3,958 and BF16 1,979 TFLOPS with sparsity, FP32 67 "
     "TFLOPS, 4.8 TB/s)", "no FP4 units: FP4 terms are priced at the FP8 rate"},
    {"mi355x", "AMD Instinct MI355X", 10100, 5000, 2500, 157.3, 8.0,
     "AMD Instinct MI355X specifications (MXFP4 20.1 PFLOPS with sparsity, FP8 5 PFLOPS dense, FP32 157.3 "
     "TFLOPS, 8 TB/s HBM3E)",
     "BF16 dense (2.5 PFLOPS) not confirmed from AMD's specifications: taken as half the FP8 rate"},
};
#define NACCEL (sizeof accels / sizeof accels[0])

const fp4s_accel *fp4s_accel_list(size_t *n)
{
    if (n) *n = NACCEL;
    return accels;
}

int fp4s_accel_get(const char *name, const fp4s_accel **out)
{
    if (out) *out = NULL;
    if (!name || !out) return fp4s_error_set(FP4S_EINVAL, "accelerator: NULL argument");
    for (size_t i = 0; i < NACCEL; i++)
        if (!strcmp(accels[i].name, name)) {
            *out = &accels[i];
            return 0;
        }
    char names[256];
    size_t len = 0;
    for (size_t i = 0; i < NACCEL; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", accels[i].name);
    return fp4s_error_set(FP4S_EINVAL, "accelerator '%s': unknown (known: %s)", name, names);
}

int fp4s_remedy_time_predict(const fp4s_remedy_cost *c, const fp4s_accel *a, fp4s_remedy_time *t)
{
    if (!c || !a || !t) return fp4s_error_set(FP4S_EINVAL, "remedy time: NULL argument");
    memset(t, 0, sizeof *t);
    double r4 = a->fp4_tflops > 0 ? a->fp4_tflops : a->fp8_tflops;
    t->fp4_emulated = !(a->fp4_tflops > 0);
    double T = 1e12;
    t->compute_seconds = c->flops_fp4 / (r4 * T) + c->flops_fp8 / (a->fp8_tflops * T) +
                         c->flops_bf16 / (a->bf16_tflops * T) + c->flops_fp32 / (a->fp32_tflops * T);
    t->memory_seconds = c->bytes / (a->bandwidth_tbps * T);
    t->seconds = fmax(t->compute_seconds, t->memory_seconds);
    double fb = c->flops_base, M = (double)c->m, N = (double)c->n, K = (double)c->k;
    t->base_seconds = fmax(fb / (r4 * T), c->bytes_base / (a->bandwidth_tbps * T));
    t->fp8_seconds = fmax(fb / (a->fp8_tflops * T), ((M + N) * K + 2.0 * M * N) / (a->bandwidth_tbps * T));
    t->bf16_seconds = fmax(fb / (a->bf16_tflops * T), (2.0 * (M + N) * K + 2.0 * M * N) / (a->bandwidth_tbps * T));
    t->vs_base = t->base_seconds > 0 ? t->seconds / t->base_seconds : NAN;
    t->vs_fp8 = t->fp8_seconds > 0 ? t->seconds / t->fp8_seconds : NAN;
    t->vs_bf16 = t->bf16_seconds > 0 ? t->seconds / t->bf16_seconds : NAN;
    /* FP4-equivalent extra FLOPs: each unit's FLOPs at the FP4 rate's price */
    t->flops_fp4_equiv_extra = c->flops_fp4 + c->flops_fp8 * (r4 / a->fp8_tflops) +
                               c->flops_bf16 * (r4 / a->bf16_tflops) + c->flops_fp32 * (r4 / a->fp32_tflops) - fb;
    return 0;
}
