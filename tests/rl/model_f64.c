/* The model of analysis/rl/model.c compiled a second time, in double, for the
 * finite-difference checks of its backward passes (functions named *_f64). */
#include "rl_internal.h"
#define RL_DOUBLE 1
#define RL_REAL double
#define RL_T(n) n##_f64
#include "model_tmpl.h"
#include "model.c"
