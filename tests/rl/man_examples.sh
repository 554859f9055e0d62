#!/bin/sh
# Every EXAMPLES command of man/fp4-rl.1 runs, in order, in one directory.
# The shipped demo (minutes) runs only in the slow suite (FP4S_SLOW=1).
set -eu
. "$FP4S_SRCDIR/tests/rl/common.sh"
page=$SRC/man/fp4-rl.1
man_examples fp4-rl.1 > examples.txt
n=$(wc -l < examples.txt)
[ "$n" -ge 5 ] || fail "fp4-rl.1: only $n examples found"
ran=0
while IFS= read -r cmd; do
    case "$cmd" in
    "fp4-rl --demo -o demo")
        if [ "${FP4S_SLOW:-0}" != 1 ]; then echo "- $cmd (slow suite)"; continue; fi ;;
    esac
    echo "+ $cmd"
    sh -c "$cmd" > example.out 2> example.err || { cat example.err >&2; fail "example failed: $cmd"; }
    ran=$((ran + 1))
done < examples.txt
# what the examples must have produced
[ -s quads.tsv ] && head -1 quads.tsv | grep -q "^step	reward	acc_rollout" || fail "quads.tsv header"
[ "$(wc -l < quads.tsv)" -eq 5 ] || fail "quads.tsv: expected 4 steps"
for f in bf16.dat nvfp4.dat quads.dat mxfp4.dat mxfp4-mbs-of.dat demo.gp summary.txt; do
    [ -s "small-demo/$f" ] || fail "small-demo/$f missing"
done
for r in bf16 nvfp4 quads-r1; do
    for k in 1 2 3; do [ -s "seeds-demo/$r.s$k.h5" ] || fail "seeds-demo/$r.s$k.h5 missing"; done
done
grep -q "paired-t p" seeds-demo/summary.txt || fail "seeds-demo: no summary table over seeds"
head -1 control.tsv | grep -q "act_kurtosis" || fail "control.tsv: no outlier measures"
if [ "${FP4S_HAVE_GNUPLOT:-1}" = 1 ] && command -v gnuplot >/dev/null 2>&1; then [ -s small-demo/demo.png ] || fail "no demo.png"; fi
if [ "${FP4S_SLOW:-0}" = 1 ]; then
    [ -s demo/demo.png ] || [ -s demo/demo.gp ] || fail "the shipped demo wrote no plot"
    cat demo/summary.txt
fi
echo "$ran examples of fp4-rl.1 ran"
