/* fp4scope: what every part of the library shares -- the export macro, error
 * codes, the per-thread error detail, compiled features and threading.
 *
 * Errors: every function that can fail returns an int, 0 on success or one of
 * the negative FP4S_E* codes. The library never prints and never exits. After a
 * failure, fp4s_last_error() returns a detail string for the calling thread that
 * names the file, dataset and problem ("x.npy: header: shape (3, 4, 5) has rank
 * 3, expected 1 or 2"). Tools print it and map the code to an exit status with
 * fp4s_exit_status(). */
#ifndef FP4SCOPE_COMMON_H
#define FP4SCOPE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(_WIN32)
#define FP4S_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FP4S_API __attribute__((visibility("default")))
#else
#define FP4S_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum fp4s_error {
    FP4S_OK        =   0,
    FP4S_EINVAL    =  -1, /* invalid argument or option value */
    FP4S_ENOMEM    =  -2, /* out of memory */
    FP4S_EOPEN     =  -3, /* input cannot be opened or read (missing, permissions) */
    FP4S_EFORMAT   =  -4, /* input is malformed, truncated or lies about itself */
    FP4S_EDTYPE    =  -5, /* unsupported data type */
    FP4S_ESHAPE    =  -6, /* wrong rank or shape, or shapes that do not match */
    FP4S_ENOTFOUND =  -7, /* tensor, dataset, step or site not found */
    FP4S_EWRITE    =  -8, /* output cannot be written */
    FP4S_EVERSION  =  -9, /* file written by a newer, incompatible schema version */
    FP4S_ENOTSUP   = -10, /* combination not supported (format/rule/profile) */
    FP4S_ERANGE    = -11, /* value out of range or size overflow */
    FP4S_EEMPTY    = -12, /* empty input or empty selection */
    FP4S_ECHECK    = -13, /* data failed a check the caller asked for */
    FP4S_EDUP      = -14, /* conflicting duplicate entry */
    FP4S_EINTERNAL = -15, /* a bug: please report */
    FP4S_EBUSY     = -16  /* output file held by a live writer (its lock); nothing changed */
};

/* Exit statuses used by every fp4-* tool (documented in each man page). */
enum fp4s_exit {
    FP4S_EXIT_OK    = 0, /* success */
    FP4S_EXIT_CHECK = 1, /* the data failed a check the user asked for */
    FP4S_EXIT_USAGE = 2, /* bad command line */
    FP4S_EXIT_INPUT = 3, /* input missing, unreadable or malformed */
    FP4S_EXIT_OUTPUT = 4, /* output could not be written */
    FP4S_EXIT_INTERNAL = 5 /* out of memory or an internal error */
};

/* Static English text for an error code; never NULL. */
FP4S_API const char *fp4s_strerror(int code);

/* Detail of the last failure on this thread (file, dataset, problem). Never
 * NULL; "" when nothing was recorded. Valid until the next failing call on the
 * same thread. */
FP4S_API const char *fp4s_last_error(void);

/* Record a failure detail for this thread and return `code` (so a library
 * function can `return fp4s_error_set(FP4S_EFORMAT, "%s: ...", path)`).
 * Exported for the tools and for extensions built on the library. */
FP4S_API int fp4s_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current detail with "prefix: " (adds context on the way up). */
FP4S_API void fp4s_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Forget this thread's detail (fp4s_last_error() then returns ""), e.g.
 * before a call whose failure detail the caller wants to tell apart. */
FP4S_API void fp4s_error_clear(void);

/* Structs a caller allocates (options, results, items of arrays passed in)
 * end in reserved[], zero (the _defaults functions zero it), the room for
 * fields added later: such a struct keeps its size and layout while the
 * library grows, so a program built against an older header keeps working.
 * fp4s_<struct>_size() (declared after each struct) is the library's sizeof
 * of it, for a binding that mirrors a struct (the Python adapter checks its
 * copies against it) or allocates one blindly. See libfp4scope(3). */

/* Map an error code to the tool exit status above. */
FP4S_API int fp4s_exit_status(int code);

/* Library version string, e.g. "0.1.0". */
FP4S_API const char *fp4s_version(void);

/* Space-separated list of compiled and detected features, like htslib's
 * fp4s_features(): "hdf5 gsl jansson blas cuda simd=avx512 threads=2". */
FP4S_API const char *fp4s_features(void);

/* The most worker threads the library runs: every count above it (from
 * fp4s_set_threads, FP4S_THREADS, the CPU count or a caller's nworkers) is
 * clamped to it where it is set. */
#define FP4S_MAX_THREADS 256

/* Threads used by the parallel kernels. 0 (default) means: the environment
 * variable FP4S_THREADS if set, else the number of online CPUs; at most
 * FP4S_MAX_THREADS either way. */
FP4S_API void fp4s_set_threads(int n);
FP4S_API int fp4s_get_threads(void);

/* Run fn(arg, i, n) for the work items [0, n) split into contiguous ranges over
 * up to fp4s_get_threads() threads. fn receives a half-open range [begin, end)
 * and the index of the worker. Returns the first non-zero value returned by a
 * worker in worker order (or 0), with that worker's fp4s_last_error() detail
 * copied to the calling thread. Items are split so that worker w always gets the
 * same range for the same n and thread count: results merged in worker order
 * are deterministic. */
typedef int (*fp4s_range_fn)(void *arg, size_t begin, size_t end, int worker);
FP4S_API int fp4s_parallel_for(size_t n, size_t grain, fp4s_range_fn fn, void *arg);

/* Progress of long calls (fp4s_decomp_source and what uses it, fp4s_mm_analyze,
 * fp4s_capture_merge, fp4s_capture_synth): fn(arg, done, total) is called on the calling thread
 * after each chunk, done growing to total in units of the call's choosing
 * (rows, bytes, steps; a call of two passes counts both). The tools draw it as
 * a line on a terminal. NULL (the default) turns it off; one setting per
 * process. fp4s_progress_report is how the library's loops report (an
 * extension may call it too). */
typedef void (*fp4s_progress_fn)(void *arg, uint64_t done, uint64_t total);
FP4S_API void fp4s_set_progress(fp4s_progress_fn fn, void *arg);
FP4S_API void fp4s_progress_report(uint64_t done, uint64_t total);

/* Dynamic schedule: up to nworkers workers (<= 0: fp4s_get_threads()) take the
 * next `piece` items of [0, n) until none is left, calling fn once per piece
 * with their worker index. Which worker gets which piece varies from run to
 * run, so use it only where the result does not depend on it (exact or
 * per-item outputs). After a failure the other workers stop at their next
 * piece; the result and detail are as for fp4s_parallel_for. */
FP4S_API int fp4s_parallel_dynamic(size_t n, size_t piece, int nworkers, fp4s_range_fn fn, void *arg);

/* The CPU GEMM of the remedies (fp4-remedy, fp4s_rlinear_*) and the RL
 * testbed (fp4-rl), one choice per process:
 *   FP4S_GEMM_FIXED (default): every output element summed in one fixed
 *     order (k = 0 .. K-1, each product and sum rounded, no fused
 *     multiply-add), so results are the same bits on any x86-64 CPU, SIMD
 *     level, thread count and MPI binding;
 *   FP4S_GEMM_BLAS: the BLAS (faster; one single-threaded call per fixed tile
 *     of the output: the same bits for any thread count on one machine, but
 *     another CPU may get other kernels and other bits).
 * The environment variable FP4S_GEMM (fixed or blas) sets it at the first
 * GEMM unless fp4s_set_gemm() came first. fp4s_set_gemm: FP4S_EINVAL for
 * an unknown value, FP4S_ENOTSUP for blas without a loadable BLAS. */
typedef enum fp4s_gemm_path { FP4S_GEMM_FIXED = 0, FP4S_GEMM_BLAS = 1 } fp4s_gemm_path;
FP4S_API int fp4s_set_gemm(fp4s_gemm_path p);
FP4S_API fp4s_gemm_path fp4s_get_gemm(void);
/* "fixed" or "blas", and back (FP4S_EINVAL naming the string). */
FP4S_API const char *fp4s_gemm_name(fp4s_gemm_path p);
FP4S_API int fp4s_gemm_parse(const char *s, fp4s_gemm_path *out);

#ifdef __cplusplus
}
#endif
#endif
