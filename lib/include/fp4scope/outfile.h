/* Experimental API (not in <fp4scope/fp4scope.h>: the tools' output
 * helpers; may change between releases: libfp4scope(3)).
 *
 * Output groups: the outputs of one run appear all or none, and never destroy
 * an input or a capture.
 *
 * Every file fp4scope writes is an fp4s_outfile (tensor.h): a temporary
 * "<target>.tmp.XXXXXX" beside the target, renamed over it on commit. A
 * group gathers the outputs of one run:
 *
 *   fp4s_outgroup *g;
 *   fp4s_outgroup_open(flags, &g);         // joins every fp4s_outfile_begin of this thread
 *   fp4s_outgroup_input(g, "c.h5:/w/x");   // what the run reads
 *   fp4s_outgroup_output(g, "q.h5", 0);    // what it will write: checked now
 *   ... the writers (npy, qfile, HDF5 reports, text) begin, write and commit ...
 *   fp4s_outgroup_commit(&g);              // now every output is renamed into place
 *
 * Checks, made when an output is declared (and, for one begun without being
 * declared, when it is begun), before anything of it exists: the output must
 * not be one of the inputs or another output of the group (files compared by
 * device and inode after resolving symbolic links; a new file by the
 * directory's device and inode and its name); an existing file that holds
 * HDF5 (a capture, a report, anyone's HDF5 data: the HDF5 signature at offset
 * 0 or a user-block offset 512, 1024, ...) is replaced only with
 * FP4S_OUT_FORCE; a file a live writer holds (fp4s_file_held) is never
 * replaced; and an output an interrupted commit left unfinished (see below) is
 * refused until that commit is finished. The commit replaces only what was
 * there at the check: nothing, or that very file (device and inode); a file
 * another process wrote there meanwhile is kept (FP4S_EBUSY, "appeared while
 * this run was working" / "replaced by another process while this run was
 * working"), checked for every member before the first rename and again by
 * each rename, which refuses to replace (RENAME_NOREPLACE) or swaps and checks
 * (RENAME_EXCHANGE). "-", devices and FIFOs are written in
 * place and not checked. A refusal returns FP4S_EINVAL (an output that names an
 * input or another output, or an existing HDF5 file without force: the tools'
 * exit status 2), FP4S_EBUSY (a live writer) or FP4S_EWRITE, with a detail
 * naming both files.
 *
 * Commit. While the group is open, fp4s_outfile_commit of a member only
 * finishes it (fsync); fp4s_outgroup_commit renames every member into place
 * with the asynchronous signals blocked (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
 * SIGPIPE, ...: one arriving meanwhile is delivered after the last rename; a
 * handler that runs on another thread meanwhile defers it through
 * fp4s_outfile_on_signal), so no signal can split a run's outputs. For two or more outputs a journal
 * "<first output>.fp4s-commit" is written (and fsync'ed) in every directory the
 * group writes to before the first rename and removed after the last: if the
 * process dies between two renames anyway (SIGKILL, a power loss), the journal
 * is a shell script that lists every temporary (each complete) and its target,
 * `sh JOURNAL` finishes the commit, and until then every output it names is
 * refused with a message that says so. fp4s_outgroup_abort (or a commit that
 * fails before its first rename) removes every temporary: nothing appears.
 *
 * A group belongs to the thread that opened it; one group per thread at a
 * time. */
#ifndef FP4SCOPE_OUTFILE_H
#define FP4SCOPE_OUTFILE_H

#include <fp4scope/common.h>
#include <fp4scope/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fp4s_outgroup fp4s_outgroup;

/* Group flags. */
#define FP4S_OUT_FORCE 1u  /* an existing HDF5 file may be replaced */
/* Output flags. */
#define FP4S_OUT_APPEND 1u /* modified in place (appended to), not replaced:
                              only the input, duplicate and live-writer checks */

/* Open a group and make it the current group of this thread. FP4S_EINVAL when
 * this thread already has one. */
FP4S_API int fp4s_outgroup_open(unsigned flags, fp4s_outgroup **g);

/* A file the run reads. `spec` is a tensor spec (file.npy, file:NAME,
 * file.h5:/dataset) or a plain path: every existing file it can name (the
 * whole string, or the part before any ':') counts. "-" and missing files are
 * ignored. Refuses (FP4S_EINVAL) when it is an output already declared. */
FP4S_API int fp4s_outgroup_input(fp4s_outgroup *g, const char *spec);

/* A file the run will write (see the checks above). */
FP4S_API int fp4s_outgroup_output(fp4s_outgroup *g, const char *path, unsigned flags);

/* Rename every member into place (see above) and free the group. Every member
 * begun must have been committed or aborted by its writer. On failure before
 * the first rename nothing is in place and every temporary is removed; a
 * failure after it (a rename refused by the file system) leaves the journal
 * naming what is left, and says so; a member that another process took during
 * the renames keeps that process's file, this run's version is dropped, the
 * others are put in place and FP4S_EBUSY says so. */
FP4S_API int fp4s_outgroup_commit(fp4s_outgroup **g);

/* Remove every temporary of the group and free it. NULL is fine. Members still
 * open keep their handles (their writers abort them as usual). */
FP4S_API void fp4s_outgroup_abort(fp4s_outgroup **g);

/* Replace the group's flags (for outputs declared or begun from now on);
 * returns the old ones. */
FP4S_API unsigned fp4s_outgroup_flags(fp4s_outgroup *g, unsigned flags);

/* For a signal handler (async-signal-safe), in place of
 * fp4s_outfile_unlink_all(): 0 when the temporaries are now removed (end the
 * process), 1 when a group commit is renaming them on another thread: the
 * signal is deferred, fp4s_outgroup_deferred_signal() returns it once the
 * commit is done, and the caller should then end the process by it. The
 * committing thread blocks the asynchronous signals itself; this covers the
 * process's other threads (a BLAS thread pool, for one). */
FP4S_API int fp4s_outfile_on_signal(int sig);
/* The signal deferred during the last commit (0 if none); clears it. */
FP4S_API int fp4s_outgroup_deferred_signal(void);

/* The current group of this thread, or NULL. */
FP4S_API fp4s_outgroup *fp4s_outgroup_current(void);

#ifdef __cplusplus
}
#endif
#endif
