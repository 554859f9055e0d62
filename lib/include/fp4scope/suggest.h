/* Experimental API (not in <fp4scope/fp4scope.h>; may change between
 * releases: libfp4scope(3)).
 *
 * "Did you mean": the names nearest to a mistyped one (a profile, a metric,
 * a site, a dataset, an option), for messages. */
#ifndef FP4SCOPE_SUGGEST_H
#define FP4SCOPE_SUGGEST_H

#include <fp4scope/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The indices of up to max of names[0..n) close to word, nearest first, into
 * out; returns how many (0 when none is close). Close: the optimal string
 * alignment distance (insertions, deletions, substitutions and swaps of two
 * neighbours; letters compared without case) is at most a third of the
 * longer of the two (at least 1, at most 4); else the word (of 3 or more
 * characters) is a part of the name that starts at its beginning or after a
 * separator (. / _ - : @), as "qkv" of "layers.0.self_attn.qkv_proj". Ranked
 * by distance, then parts after every near miss, then the names' order. A
 * name equal to word is not offered. NULL names are skipped. */
FP4S_API size_t fp4s_suggest(const char *word, const char *const *names, size_t n, size_t *out, size_t max);

#ifdef __cplusplus
}
#endif
#endif
