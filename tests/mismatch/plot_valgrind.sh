#!/bin/sh
# fp4-plot --term dumb -o - under valgrind: no invalid read or write, and the
# scratch directory is gone at exit (issue 8, item 9: the exit handler read a
# stack frame of main that had returned). Skipped without valgrind or gnuplot.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
command -v valgrind >/dev/null 2>&1 || { echo "no valgrind: skipped"; exit 77; }
{ [ "${FP4S_HAVE_GNUPLOT:-1}" = 1 ] && command -v gnuplot >/dev/null 2>&1; } || { echo "no gnuplot: skipped"; exit 77; }
if ldd "$(command -v fp4-plot)" 2>/dev/null | grep -q -e libasan -e libubsan; then
    echo "sanitizer build (valgrind cannot run it): skipped"; exit 77
fi
mkdir tmp
for sub in mismatch components; do
    if [ $sub = mismatch ]; then in="$SRC/datasets/traces/planted.csv"; else
        fp4-decompose --json "$SRC/datasets/weight-small.npy" > rep.json
        in=rep.json
    fi
    set +e
    TMPDIR="$T/tmp" valgrind -q --error-exitcode=99 fp4-plot $sub "$in" --term dumb -o - >out.txt 2>err.txt
    rc=$?
    set -e
    [ $rc = 0 ] || { cat err.txt >&2; fail "$sub: exit $rc under valgrind"; }
    [ -s out.txt ] || fail "$sub: no preview printed"
    [ -z "$(ls -A tmp)" ] || fail "$sub: scratch files left in TMPDIR: $(ls -A tmp)"
done
echo ok
