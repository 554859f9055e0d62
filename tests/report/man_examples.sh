#!/bin/sh
# Run every command of the EXAMPLES section of fp4-report(1), in order, in a
# directory where datasets/ is the shipped one; each must exit 0 and print the
# path of the index.html it wrote.
set -eu
SRC=${FP4S_SRCDIR:?}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
ln -s "$SRC/datasets" datasets
sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$SRC/man/fp4-report.1" |
    sed -n '/^\.nf/,/^\.fi/p' | grep '^ *fp4-' | sed 's/\\-/-/g; s/^ *//' > cmds.txt
[ -s cmds.txt ] || { echo "fp4-report.1: no examples found" >&2; exit 1; }
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    if ! sh -c "$cmd" > out.txt 2> err.txt; then
        echo "FAIL: $cmd" >&2
        cat err.txt >&2
        exit 1
    fi
    idx=$(cat out.txt)
    case "$idx" in */index.html) ;; *) echo "FAIL: $cmd printed '$idx'" >&2; exit 1 ;; esac
    [ -s "$idx" ] || { echo "FAIL: $cmd: $idx is missing" >&2; exit 1; }
    echo "ok: $cmd"
done < cmds.txt
echo "$n man-page examples ran"
