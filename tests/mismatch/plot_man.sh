#!/bin/sh
# Every EXAMPLES entry of man/fp4-plot.1 runs and makes its image.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
. "$SRC/tests/mismatch/man_examples.sh"
run_man_examples fp4-plot.1
fp4-plot mismatch "$SRC/datasets/traces/planted.csv" -o probe.png 2> probe.err
if ! grep -q "gnuplot not found" probe.err; then
    for f in mismatch.png k3.svg gap.pdf moe.png components.png hist.png channels.png; do
        [ -s "$f" ] || fail "example did not make $f"
    done
fi
for f in mismatch.gp k3.gp gap.gp moe.gp components.gp hist.gp channels.gp; do
    [ -s "$f" ] || fail "example did not write $f"
done
grep -q "onset synth-moe: step 8" moe.gp || fail "synth-moe.h5: planted onset 8 not marked"
echo ok
