/* Declarations of the double instantiation of the model (model_f64.c). */
#ifndef FP4S_TEST_RL_F64_H
#define FP4S_TEST_RL_F64_H
#include "rl_internal.h"
#define RL_REAL double
#define RL_T(n) n##_f64
#include "model_tmpl.h"
#undef RL_REAL
#undef RL_T
#endif
