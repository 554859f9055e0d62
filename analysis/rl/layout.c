/* Parameter layout and linear sites of the RL testbed's model, its
 * counter-based random numbers and clock. */
#include "rl_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int rl_layout_init(rl_layout *lay, const rl_cfg *c)
{
    *lay = (rl_layout){0};
    size_t V = (size_t)c->V, T = (size_t)c->T, C = (size_t)c->C, E = (size_t)c->E, F = (size_t)c->F;
    size_t o = 0;
    lay->wte = o; o += V * C;
    lay->wpe = o; o += T * C;
    for (int l = 0; l < c->L; l++) {
        lay->l[l].ln1 = o; o += C;
        lay->l[l].qkv = o; o += 3 * C * C;
        lay->l[l].o = o; o += C * C;
        lay->l[l].ln2 = o; o += C;
        lay->l[l].router = o; o += E * C;
        lay->l[l].w13 = o; o += E * 2 * F * C;
        lay->l[l].w2 = o; o += E * C * F;
    }
    lay->lnf = o; o += C;
    lay->head = o; o += V * C;
    lay->total = o;
    lay->nsites = c->L * (3 + 2 * c->E) + 1;
    lay->sites = calloc((size_t)lay->nsites, sizeof *lay->sites);
    if (!lay->sites) return fp4s_error_set(FP4S_ENOMEM, "rl: out of memory");
    for (int l = 0; l < c->L; l++) {
        rl_site *s = &lay->sites[rl_site_qkv(c, l)];
        *s = (rl_site){RL_S_QKV, l, -1, 3 * C, C, lay->l[l].qkv, FP4S_RL_SITE_QKV, ""};
        snprintf(s->name, sizeof s->name, "layers.%d.self_attn.qkv_proj", l);
        s = &lay->sites[rl_site_o(c, l)];
        *s = (rl_site){RL_S_O, l, -1, C, C, lay->l[l].o, FP4S_RL_SITE_O, ""};
        snprintf(s->name, sizeof s->name, "layers.%d.self_attn.o_proj", l);
        s = &lay->sites[rl_site_router(c, l)];
        *s = (rl_site){RL_S_ROUTER, l, -1, E, C, lay->l[l].router, FP4S_RL_SITE_ROUTER, ""};
        snprintf(s->name, sizeof s->name, "layers.%d.mlp.gate", l);
        for (int e = 0; e < c->E; e++) {
            s = &lay->sites[rl_site_w13(c, l, e)];
            *s = (rl_site){RL_S_W13, l, e, 2 * F, C, lay->l[l].w13 + (size_t)e * 2 * F * C,
                           FP4S_RL_SITE_EXPERTS, ""};
            snprintf(s->name, sizeof s->name, "layers.%d.mlp.experts.%d.gate_up_proj", l, e);
            s = &lay->sites[rl_site_w2(c, l, e)];
            *s = (rl_site){RL_S_W2, l, e, C, F, lay->l[l].w2 + (size_t)e * C * F, FP4S_RL_SITE_EXPERTS, ""};
            snprintf(s->name, sizeof s->name, "layers.%d.mlp.experts.%d.down_proj", l, e);
        }
    }
    rl_site *s = &lay->sites[rl_site_head(c)];
    *s = (rl_site){RL_S_HEAD, -1, -1, V, C, lay->head, FP4S_RL_SITE_HEAD, "lm_head"};
    return 0;
}

void rl_layout_free(rl_layout *lay)
{
    if (!lay) return;
    free(lay->sites);
    lay->sites = NULL;
}

int rl_param_is_gain(const rl_layout *lay, const rl_cfg *c, size_t i)
{
    size_t C = (size_t)c->C;
    if (i >= lay->lnf && i < lay->lnf + C) return 1;
    for (int l = 0; l < c->L; l++)
        if ((i >= lay->l[l].ln1 && i < lay->l[l].ln1 + C) || (i >= lay->l[l].ln2 && i < lay->l[l].ln2 + C))
            return 1;
    return 0;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t rl_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

double rl_gauss(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    double u = rl_u01(rl_hash(a, b, c, 2 * d)), v = rl_u01(rl_hash(a, b, c, 2 * d + 1));
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

double rl_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
