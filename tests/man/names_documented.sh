#!/bin/sh
# Every name of the trait tables is documented: each NVFP4 recipe and MXFP4
# scale rule, with its aliases, in fp4-quant(1) (the --recipe and
# --scale-rule lists) and fp4scope-formats(7) (its row), each profile in
# fp4scope-formats(7). A new row without its documentation fails here.
# $1: the table_names program (prints "KIND NAME" lines from the library).
set -eu
SRC=${FP4S_SRCDIR:?}
names=${1:?usage: names_documented.sh TABLE_NAMES}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$names" > "$T/names" || { echo "FAIL: $names failed" >&2; exit 1; }
[ "$(grep -c '^recipe ' "$T/names")" -ge 1 ] && [ "$(grep -c '^profile ' "$T/names")" -ge 1 ] ||
    { echo "FAIL: $names printed no recipes or profiles" >&2; exit 1; }
bad=0 n=0
while read -r kind name; do
    case $kind in profile) pages=fp4scope-formats.7 ;; *) pages="fp4-quant.1 fp4scope-formats.7" ;; esac
    # the name as a word of the roff source: '-' may be written '\-'; not part of a longer
    # name (a letter, digit, '@', '.', '-' before it; a letter, digit, '@' or '\-' after it)
    e=$(printf '%s' "$name" | sed 's/[.@]/\\&/g; s/-/(\\\\-|-)/g')
    for page in $pages; do
        n=$((n + 1))
        if ! grep -Eq "(^|[^A-Za-z0-9@.-])$e(\$|[^A-Za-z0-9@\\\\-]|\\\\[^-])" "$SRC/man/$page"; then
            echo "FAIL: man/$page does not name the $kind $name" >&2
            bad=1
        fi
    done
done < "$T/names"
[ "$bad" -eq 0 ] || exit 1
echo "names-documented: $n names found in their pages"
