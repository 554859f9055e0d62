#!/bin/sh
# Every page in man/ renders without a groff warning (-ww: all warnings; -t runs
# tbl for the pages with tables), and
# every tool named in the arguments (the build's fp4-* programs) has its
# section-1 page.
set -eu
SRC=${FP4S_SRCDIR:?}
# without groff the pages cannot be rendered: skipped (exit 77), the section-1
# page check below still runs first
for name in "$@"; do
    [ -f "$SRC/man/$name.1" ] || { echo "man-lint: $name has no man/$name.1" >&2; exit 1; }
done
if ! command -v groff >/dev/null 2>&1; then
    echo "SKIP: man-lint: groff not found (Debian: groff-base; scripts/deps.sh installs it)" >&2
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0 n=0
for page in "$SRC"/man/*.[1-8]; do
    n=$((n + 1))
    groff -t -man -Tutf8 -ww -z "$page" 2> "$T/err" || { echo "man-lint: groff failed on $page" >&2; bad=1; }
    if [ -s "$T/err" ]; then
        echo "man-lint: $page:" >&2
        cat "$T/err" >&2
        bad=1
    fi
done
[ "$n" -gt 0 ] || { echo "man-lint: no pages in $SRC/man" >&2; exit 1; }
for name in "$@"; do
    [ -f "$SRC/man/$name.1" ] || { echo "man-lint: $name has no man/$name.1" >&2; bad=1; }
done
[ "$bad" -eq 0 ] || exit 1
echo "man-lint: $n pages clean"
