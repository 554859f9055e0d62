#!/bin/sh
# Every EXAMPLES entry of man/fp4-mismatch.1 runs (tests/man lints the page).
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
. "$SRC/tests/mismatch/man_examples.sh"
run_man_examples fp4-mismatch.1
# the first example finds the planted onset at step 50 of run nvfp4
fp4-mismatch datasets/traces/planted.csv | grep -q "^onset: step 50 " || fail "planted.csv onset not at 50"
echo ok
