#!/bin/sh
# Run every command of the EXAMPLES section of fp4-report(1), in order, in a
# directory where datasets/ is the shipped one; each must exit 0 and print the
# path of the index.html it wrote.
. "${FP4S_SRCDIR:?}/tests/lib.sh"
ln -s "$SRC/datasets" datasets
man_examples fp4-report.1 > cmds.txt
[ -s cmds.txt ] || fail "fp4-report.1: no examples found"
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
