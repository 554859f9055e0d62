/* What lib/base's thread pool (common.c) tells the layers above it. */
#ifndef FP4S_BASE_THREADS_H
#define FP4S_BASE_THREADS_H

#include <stdbool.h>

/* True on a thread running a worker of fp4s_parallel_for/_dynamic: a caller
 * there (core/gemm.h) does its own work on that thread rather than start a
 * nested pool. */
bool fp4s_in_parallel_worker(void);

#endif
