#!/bin/sh
# The installed headers cite only documents that ship: every man page they
# name (fp4-quant(1), fp4scope-capture(5), libfp4scope(3), ...) is in man/,
# and every file of the tree they name (README.md, bench/RESULTS.md,
# kernels/cpu/quant_ref.c, ...) exists. A page or file that was renamed or
# never written fails here.
set -eu
SRC=${FP4S_SRCDIR:?}
bad=0 n=0
for h in "$SRC"/lib/include/fp4scope/*.h; do
    # man pages of the project: fp4-*, fp4scope-* and libfp4scope, with a section
    for ref in $(grep -oE '(^|[^A-Za-z0-9_.-])(fp4-[a-z0-9-]+|fp4scope(-[a-z0-9-]+)?|libfp4scope|capture|formats)\([1-8]\)' "$h" |
                 sed 's/^[^A-Za-z0-9]//' | sort -u); do
        n=$((n + 1))
        page=${ref%%(*}.$(printf '%s' "$ref" | sed 's/.*(\([1-8]\))/\1/')
        [ -f "$SRC/man/$page" ] || { echo "FAIL: ${h##*/} cites $ref: no man/$page" >&2; bad=1; }
    done
    # files of the tree: a path with a directory, or a *.md name
    for ref in $(grep -oE '(^|[ (])((lib|kernels|analysis|tools|tests|bench|scripts|man|datasets)/[A-Za-z0-9_./-]*[A-Za-z0-9_]|[A-Z][A-Za-z0-9_-]*\.md)' "$h" |
                 sed 's/^[ (]//' | sort -u); do
        n=$((n + 1))
        [ -e "$SRC/$ref" ] || { echo "FAIL: ${h##*/} cites $ref: not in the tree" >&2; bad=1; }
    done
done
[ "$n" -gt 0 ] || { echo "FAIL: no citations found (the patterns are broken)" >&2; exit 1; }
[ "$bad" -eq 0 ] || exit 1
echo "cited-docs: $n citations of man pages and files, all present"
