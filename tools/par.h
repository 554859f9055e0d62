/* The analysis tools over MPI ranks (tools/par.c; not part of the library
 * API). Built with -Dmpi, a tool started by mpirun or srun splits its work
 * over the ranks; started any other way, or built without MPI, it is one
 * process and every call below does what the tool did before.
 *
 * What a rank does (fp4scope-mpi(7) has the user's side):
 * - par_init() after cli_init(): MPI_Init when the process was started by an
 *   MPI launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE in
 *   the environment; FP4S_MPI=0 never, FP4S_MPI=1 always). Ranks other than 0
 *   print nothing on standard output. Every rank's standard error is kept
 *   until the results are gathered, so that a failure is reported once:
 *   when a rank exits with a non-zero status before the results are
 *   gathered (any cli_die / cli_fail / exit), every rank learns it at the
 *   next exchange, rank 0 prints the message of the failure that comes first
 *   in the schedule (the unit set by par_mine or the row parts; the lowest
 *   rank on a tie) and every rank exits with its status. After the results
 *   are gathered, rank 0 alone goes on (outputs, reports) and the other
 *   ranks exit with rank 0's status.
 * - Threads per rank: FP4S_THREADS or --threads when given, else as one
 *   process (all CPUs), except in par_decomp, whose result does not depend
 *   on the threads: there the node's CPUs divided by its ranks.
 * - FP4S_MPI_VERBOSE=1: each rank says on standard error what it reads.
 * - Calls that return bool return true on the rank that goes on with the
 *   results (rank 0, or the one process) and false on the ranks that are
 *   done: the tool then returns 0 from main. */
#ifndef FP4S_TOOLS_PAR_H
#define FP4S_TOOLS_PAR_H

#include <fp4scope/channels.h>
#include <fp4scope/decompose.h>
#include <fp4scope/mismatch.h>
#include <fp4scope/record.h>
#include <fp4scope/remedy.h>

#include <stdbool.h>
#include <stddef.h>

void par_init(void);
bool par_active(void);     /* started by an MPI launcher (even with one rank) */
int par_rank(void);
int par_size(void);

/* Units scheduled whole, one rank each (round robin over the unit index:
 * i mod P): whether unit i is this rank's. It also names the unit a failure
 * from here on belongs to. */
bool par_mine(size_t i);

/* Decompose n sources (src[i] with spec[i] and opts[i]; rows[i]/cols[i] the
 * shape when known, 0 to have it read) into out[i], exactly as
 * fp4s_decomp_source would, failing as the tool did (exit with
 * cli_report). Over ranks: the rows of all sources are cut into P
 * contiguous ranges of equal size (on multiples of each spec's row
 * alignment, so that a large tensor is split and many small ones are not),
 * each rank reads and decomposes only its range (fp4s_decomp_source_rows;
 * NVFP4's tensor amax of a split tensor is the largest of its parts'), and
 * rank 0 merges the parts (fp4s_decomp_serialize, fp4s_decomp_merge). */
bool par_decomp(size_t n, const char *const *src, const fp4s_spec *const *spec,
                const fp4s_decomp_opts *const *opts, const size_t *rows, const size_t *cols,
                fp4s_decomp **out);

/* fp4s_channels_run, the two decompositions through par_decomp: 0 with
 * *out (the rank that goes on), PAR_DONE on the other ranks, or a negative
 * FP4S_E* code with the detail set. */
int par_channels_run(const fp4s_spec *s, const fp4s_channels_opts *o, const char *act, const char *weight,
                     fp4s_channels_report **out);

/* fp4s_mm_analyze over every trace (names[i] for i < nnames, else NULL):
 * 0 with res filled (the rank that goes on), PAR_DONE on the ranks that are
 * done, or a negative FP4S_E* code (the detail set; the one process only).
 * Over ranks: the steps of each capture are cut into P contiguous ranges
 * (fp4s_mm_analyze_part), a text trace is read whole by one rank (round
 * robin; '-' by rank 0), and rank 0 joins the runs in trace order. */
#define PAR_DONE 1
int par_mm_analyze(size_t n, const char *const *paths, const char *const *names, size_t nnames,
                   const fp4s_mm_opts *o, const fp4s_trace_opts *t, fp4s_mm_result *res);

/* Gather the per-unit results of par_mine's schedule to rank 0 as bytes:
 * put(ctx, i, b) serializes the results of unit i on the rank that computed
 * it (records of fp4scope/record.h), get(ctx, i, p, end) reads them back on
 * rank 0 (and advances *p), for the units rank 0 did not compute. Returns
 * true on the rank that goes on. */
bool par_gather_units(size_t n, void (*put)(void *ctx, size_t i, fp4s_buf *b),
                      void (*get)(void *ctx, size_t i, const unsigned char **p, const unsigned char *end),
                      void *ctx);

/* Gather the per-unit results of par_mine's schedule to rank 0: the n
 * results are at base + i * stride; rank 0 receives those of the units it
 * did not compute. */
bool par_gather_compare(fp4s_compare_site *base, size_t stride, size_t n);
/* fp4-remedy: info at info0 + i * stride and the nr results *(res0 + i * stride)
 * (malloc'ed arrays; rank 0 allocates those it receives). */
bool par_gather_remedy(fp4s_remedy_site *info0, fp4s_remedy_result **res0, size_t stride, size_t n,
                       size_t nr);

/* Work that is not split: rank 0 does all of it, the other ranks are done. */
bool par_root_only(void);

#endif
