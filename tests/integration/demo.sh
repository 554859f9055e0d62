#!/bin/sh
# The README's main job (scripts/demo.sh) runs on the shipped data and produces
# what the README promises: the onset at step 50, a compensation set, what
# compensating 5% of the channels removes in each regime, 4 images.
# Without gnuplot everything but the images is checked, then the test reports
# itself skipped (exit 77): the images are what it could not check.
set -eu
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# without the build's tools on PATH: demo.sh finds them from its BUILD_DIR argument (absolute here)
PATH=$(printf '%s\n' "$PATH" | tr ':' '\n' | grep -v -x "$FP4S_BUILDDIR/tools" | paste -s -d: -)
FP4S_OUT="$T/out" sh "$FP4S_SRCDIR/scripts/demo.sh" "$FP4S_BUILDDIR" > "$T/log" 2>&1 || {
    cat "$T/log"; echo "demo.sh failed"; exit 1; }
grep -q "^onset: step 50 " "$T/log" || { cat "$T/log"; echo "onset at step 50 not reported"; exit 1; }
grep -q "scale codes differing" "$T/log" || { echo "no profile diff table"; exit 1; }
grep -q "check: worst element residual 0," "$T/log" || { echo "decomposition identity not exact"; exit 1; }
# step 3b: the outlier regime of synth-moe.h5 against its Gaussian control
grep -q "^datasets/synth-moe.h5: NVFP4 activation error energy held by the top 1% of channels: [0-9.]*%$" "$T/log" &&
    grep -q "^datasets/synth-moe-gauss.h5: NVFP4 activation error energy held by the top 1% of channels: [0-9.]*%$" "$T/log" ||
    { cat "$T/log"; echo "no top-1% shares of the two regimes"; exit 1; }
if [ -x "$FP4S_BUILDDIR/tools/fp4-remedy" ]; then # built with a BLAS
    # shellcheck disable=SC2046  # the two percentages as $1 and $2
    set -- $(sed -n 's/^  => rac:0.05 removes \([0-9]*\)% of the error against the aligned trainer$/\1/p' "$T/log")
    [ $# = 2 ] && [ "$1" -ge 40 ] && [ "$2" -lt 10 ] ||
        { cat "$T/log"; echo "rac:0.05 removes $*%: expected >= 40% (outlier channels), < 10% (Gaussian control)"; exit 1; }
fi
grep -q "^The report: open .*/report/index.html" "$T/log" || { echo "the path of the report is not printed"; exit 1; }
for f in decompose.json channels.json channels-set.h5 mismatch.gp components.gp channels.gp hist.gp \
         report/index.html report/sites.csv report/fp4-report.json; do
    [ -s "$T/out/$f" ] || { echo "missing $f"; exit 1; }
done
if grep -q "gnuplot not found\|gnuplot is not" "$T/log"; then
    echo "SKIP: gnuplot is not available: the demo ran, its images were not made or checked"
    exit 77
fi
for f in mismatch components channels hist; do
    head -c 8 "$T/out/$f.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
        { echo "$f.png is not a PNG"; exit 1; }
done
echo "demo ok"
