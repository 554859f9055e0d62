#!/bin/sh
# fp4-plot writes real PNG/SVG/PDF files with their script and data, marks the
# onset, picks the y scale, handles a missing or failing gnuplot, and rejects
# bad reports and traces without leaving files behind.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
TR=$SRC/datasets/traces/planted.csv
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR" out

# Without gnuplot (-Dgnuplot=disabled or not installed) only the script and
# data can be checked: every subcommand writes them, notes it, exits 0.
if ! fp4-plot mismatch "$TR" -o out/probe.png 2> probe.err; then cat probe.err >&2; fail "probe run failed"; fi
if grep -q "gnuplot not found" probe.err; then
    for c in "mismatch $TR" "components $SRC/tests/mismatch/decompose_report.json" \
             "hist $SRC/tests/mismatch/decompose_report.json" "channels $SRC/tests/mismatch/channels_report.json"; do
        set -- $c
        fp4-plot "$1" "$2" -o "out/$1.png" 2> err.txt
        expect_err "gnuplot not found"
        [ -s "out/$1.gp" ] || fail "$1: no script without gnuplot"
        [ ! -e "out/$1.png" ] || fail "$1: image without gnuplot"
    done
    [ -s out/mismatch.nvfp4.dat ] && [ -s out/components.dat ] && [ -s out/channels.channels.dat ] || fail "data"
    echo "ok (gnuplot unavailable: checked the script-and-data output)"
    exit 0
fi
rm -f out/probe*

is_png() { [ "$(head -c 8 "$1" | od -An -c | tr -d ' \n')" = '211PNG\r\n032\n' ] || fail "$1 is not a PNG"; }

fp4-plot mismatch "$TR" -o out/mm.png
is_png out/mm.png
[ -s out/mm.gp ] && [ -s out/mm.nvfp4.dat ] && [ -s out/mm.bf16.dat ] || fail "script or data missing"
grep -q "^set arrow from 50, graph 0" out/mm.gp || fail "onset of nvfp4 (step 50) not marked"
grep -q "onset nvfp4: step 50" out/mm.gp || fail "onset label"
grep -q "^set logscale y" out/mm.gp || fail "mean_abs spans > 10x: log scale expected"
grep -q "'mm.nvfp4.dat' using 1:2" out/mm.gp || fail "script uses the data by base name"
[ "$(grep -c '^[0-9]' out/mm.nvfp4.dat)" = 80 ] || fail "80 steps in the data"
# the script redraws on its own, in its directory
(cd out && gnuplot mm.gp) && is_png out/mm.png
ls out | grep -q 'tmp' && fail "temporary files left in out/"

fp4-plot mismatch "$TR" --linear --title "my title" -o out/lin.svg
$PY -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith('svg'), r.tag" out/lin.svg
grep -q "my title" out/lin.svg || fail "title not in the SVG"
! grep -q "^set logscale" out/lin.gp || fail "--linear ignored"
fp4-plot mismatch "$TR" --metric k1 -o out/k1.pdf
[ "$(head -c 5 out/k1.pdf)" = "%PDF-" ] || fail "not a PDF"
! grep -q "^set logscale" out/k1.gp || fail "k1 has negative values: linear scale expected"
fp4-plot mismatch "$TR" --metric k1 --log -o out/k1log.png 2> err.txt
expect_err "values <= 0 of k1: those points are left out"
is_png out/k1log.png

# dumb preview on stdout, no temporary directory left
fp4-plot mismatch "$TR" --term dumb -o - > dumb.txt
grep -q "training step" dumb.txt || fail "dumb preview"
grep -q "nvfp4: step 50" dumb.txt || fail "dumb preview lacks the onset label"
[ -z "$(ls "$TMPDIR")" ] || fail "temporary directory left: $(ls "$TMPDIR")"

# reports
fp4-plot components "$SRC/tests/mismatch/decompose_report.json" -o out/comp.png
is_png out/comp.png
[ "$(grep -c '^[0-9]' out/comp.dat)" = 5 ] || fail "4 inputs + rollup expected in comp.dat"
grep -q '"layers.1.mlp.gate \[weight\]"' out/comp.dat || fail "site labels"
fp4-plot hist "$SRC/tests/mismatch/decompose_report.json" -o out/hist.svg
$PY -c "import sys, xml.etree.ElementTree as E; assert E.parse(sys.argv[1]).getroot().tag.endswith('svg')" out/hist.svg
[ -s out/hist.delta.0.dat ] && [ -s out/hist.error.3.dat ] || fail "histogram data"
fp4-plot channels "$SRC/tests/mismatch/channels_report.json" -o out/ch.png
is_png out/ch.png
[ "$(awk '!/^#/ && $4 == 1' out/ch.channels.dat | wc -l)" = 16 ] || fail "16 selected channels"
[ -s out/ch.coverage.dat ] || fail "coverage data"

# gnuplot missing: script and data written, a note, exit 0, no image
FP4S_GNUPLOT=/nonexistent/gnuplot fp4-plot mismatch "$TR" -o out/ng.png 2> err.txt
expect_err "gnuplot not found (/nonexistent/gnuplot); wrote out/ng.gp"
[ -s out/ng.gp ] && [ -s out/ng.nvfp4.dat ] || fail "no script/data without gnuplot"
[ ! -e out/ng.png ] || fail "image without gnuplot"
# gnuplot failing: exit 4, no image, no temporary
expect_exit 4 env FP4S_GNUPLOT=/bin/false fp4-plot mismatch "$TR" -o out/fail.png
expect_err "failed (exit status 1)"
[ ! -e out/fail.png ] || fail "image after a gnuplot failure"
ls out | grep -q 'fail.png.tmp' && fail "temporary image left"

# bad reports and traces: exit 3, nothing written
# bad_input FILE CONTENT KIND MESSAGE: fp4-plot KIND of FILE holding CONTENT
# (printf %b) exits 3 and says MESSAGE
bad_input() {
    printf '%b' "$2" > "$1"
    expect_exit 3 fp4-plot "$3" "$1" -o "out/bad-$1.png"
    expect_err "$4"
}
bad_input bad1.json '{"tool":"fp4-decompose","inputs":[{"summary":{"energy_scale":1}}]}' components \
    "bad1.json: inputs[0].summary: missing number 'energy_total'"
bad_input bad2.json '{"tool":"fp4-channels","channels":[]}' components \
    "\"tool\" is \"fp4-channels\", expected \"fp4-decompose\""
bad_input bad3.json '{"tool":"fp4-decompose","inputs":[{"histograms":{"delta":{"edges":[0,1],"counts":[1,2]},"error":{"edges":[0,1],"counts":[3]}}}]}' \
    hist "inputs[0].histograms.delta: 2 edges for 2 counts"
bad_input bad4.json '{"tool":"fp4-channels","channels":[{"channel":1,"score":"x"}]}' channels \
    "channels[0]: 'score' is not a number"
bad_input bad5.json 'not json' hist "bad5.json: invalid JSON"
bad_input bad.csv 'step,seq,trainer_logprob,rollout_logprob\n0,0,-1,oops\n' mismatch \
    "bad.csv: line 2: column 'rollout_logprob': expected a number, got 'oops'"
[ -z "$(ls out | grep '^bad-')" ] || fail "files written for bad input: $(ls out | grep '^bad-')"

# usage errors: exit 2
expect_exit 2 fp4-plot mismatch "$TR"
expect_err "-o OUT is required"
expect_exit 2 fp4-plot mismatch "$TR" -o out/x.gif
expect_exit 2 fp4-plot scatter "$TR" -o out/x.png
expect_exit 2 fp4-plot channels a.json b.json -o out/x.png
expect_exit 2 fp4-plot components --metric k3 bad1.json -o out/x.png
expect_err "components: option '--metric' applies to 'fp4-plot mismatch' only"
expect_exit 2 fp4-plot hist --is-cap 3 bad1.json -o out/x.png
expect_err "hist: option '--is-cap' applies to 'fp4-plot mismatch' only"
expect_exit 2 fp4-plot mismatch --metric nope "$TR" -o out/x.png
expect_exit 0 fp4-plot --help
grep -q "^Usage: fp4-plot mismatch" out.txt || fail "--help"
echo ok
