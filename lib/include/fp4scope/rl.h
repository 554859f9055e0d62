/* The RL testbed (fp4-rl(1)): a small decoder-only MoE policy trained with
 * GRPO in C, whose trainer and rollout engine differ only in the numerics
 * chosen, so that the rollout/trainer mismatch of an FP4 rollout can be
 * watched over training steps.
 *
 * Built when the library is built with a BLAS (-Dblas, fp4s_features() lists
 * "blas"); without one every function here returns FP4S_ENOTSUP. */
#ifndef FP4SCOPE_RL_H
#define FP4SCOPE_RL_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Classes of linear sites (bit masks): which layers go through the rollout's
 * quantizer. */
#define FP4S_RL_SITE_QKV     1u  /* layers.<l>.self_attn.qkv_proj */
#define FP4S_RL_SITE_O       2u  /* layers.<l>.self_attn.o_proj */
#define FP4S_RL_SITE_ROUTER  4u  /* layers.<l>.mlp.gate */
#define FP4S_RL_SITE_EXPERTS 8u  /* layers.<l>.mlp.experts.<e>.gate_up_proj and .down_proj */
#define FP4S_RL_SITE_HEAD   16u  /* lm_head */
#define FP4S_RL_SITE_ALL    31u

#ifdef __cplusplus
}
#endif
#endif
