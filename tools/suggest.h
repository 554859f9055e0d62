/* "Did you mean": the one helper every tool calls for a name it does not know
 * (a profile, a metric, a site, a dataset, an option). The ranking is the
 * library's fp4s_suggest (<fp4scope/suggest.h>); this file makes the
 * messages. Not part of the library API. */
#ifndef FP4S_TOOLS_SUGGEST_H
#define FP4S_TOOLS_SUGGEST_H

#include <fp4scope/spec.h>
#include <fp4scope/capture.h>

#include <stddef.h>

/* Names shown when listing what exists: at most this many, then "(N in all)". */
#define CLI_LIST_CAP 12
/* Candidates offered. */
#define CLI_SUGGEST_MAX 3

/* " did you mean 'k3' or 'k1'?" (with a leading space), "" when no name is
 * close; into buf, returned. */
const char *cli_did_you_mean(const char *word, const char *const *names, size_t n, char *buf, size_t len);
/* "a, b, c, ... (40 in all)": the first cap names (all when cap is 0), joined
 * with ", "; into buf, returned. */
const char *cli_name_list(const char *const *names, size_t n, size_t cap, char *buf, size_t len);
/* "prog: OPT: unknown WHAT 'word'; did you mean 'x'? WHATs: a, b, ... (N in all)" and exit 2
 * (what_plural names the list, e.g. "profiles for mxfp4"; opt NULL: no prefix). */
_Noreturn void cli_unknown(const char *opt, const char *what, const char *word, const char *what_plural,
                           const char *const *names, size_t n);
/* cli_did_you_mean for a glob (fnmatch's * ? [): its literal prefix against
 * the names cut to that length, each offered with the rest of the glob
 * ("layers.0.self_attn*" for "layers.0.self_atn*"); a word without wildcards
 * as cli_did_you_mean. */
const char *cli_did_you_mean_glob(const char *glob, const char *const *names, size_t n, char *buf, size_t len);
/* When --sites GLOB selects no site of the capture: ";  did you mean '...'?
 * sites: a, b, ... (N in all)", else "" (also when the capture cannot be
 * listed: the caller's own error says why). */
const char *cli_sites_hint(const char *capture, const char *glob, char *buf, size_t len);
/* The names (and aliases) of a table kind (fp4s_names) as an array, owned
 * by the caller: free with cli_names_free. */
const char **cli_kind_names(fp4s_name_kind kind, size_t *n);
void cli_names_free(const char **names, size_t n);

#endif
