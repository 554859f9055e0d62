#!/bin/sh
# What every tool shares on its command line (cli.c): a bad option is one
# message, alike everywhere, then "Try 'prog --help'." and exit 2 (fp4-mismatch
# printed getopt's message and its own); --threads above FP4S_MAX_THREADS is
# clamped, never a crash.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
$PY -c "import numpy as np; np.save('x.in.npy', np.random.default_rng(1).standard_normal((16, 64)).astype('<f4'))"

# bad OPT TOOL [SUBCOMMAND]: the unknown option, and a missing argument
two_lines() {
    [ "$(wc -l <err.txt)" = 2 ] || { cat err.txt >&2; fail "$*: expected one message and the hint"; }
    sed -n 2p err.txt | grep -q "^Try '.* --help'\.$" || { cat err.txt >&2; fail "$*: no hint"; }
}
extra=
command -v fp4-remedy >/dev/null 2>&1 && extra="fp4-remedy fp4-compare"
for t in fp4-quant fp4-decompose fp4-channels fp4-mismatch "fp4-plot mismatch" "fp4-capture import" \
         "fp4-capture ls" "fp4-capture merge" "fp4-capture synth" $extra; do
    prog=${t%% *}
    # shellcheck disable=SC2086
    expect_exit 2 $t --bogus x.in.npy
    err_has "$prog: unknown option '--bogus'"
    two_lines "$t --bogus"
    # shellcheck disable=SC2086
    expect_exit 2 $t --bogus=1 x.in.npy
    err_has "$prog: unknown option '--bogus'"
    two_lines "$t --bogus=1"
    # shellcheck disable=SC2086
    expect_exit 2 $t -Z x.in.npy
    err_has "$prog: unknown option '-Z'"
    two_lines "$t -Z"
done
for t in fp4-quant fp4-decompose fp4-channels fp4-mismatch "fp4-plot mismatch" "fp4-capture import" \
         "fp4-capture merge" "fp4-capture synth" $extra; do
    prog=${t%% *}
    # shellcheck disable=SC2086
    expect_exit 2 $t x.in.npy -o
    err_has "$prog: option '-o' needs an argument"
    two_lines "$t -o"
    # shellcheck disable=SC2086
    expect_exit 2 $t x.in.npy --output
    err_has "$prog: option '--output' needs an argument"
    two_lines "$t --output"
done

# --threads: any count is taken, at most FP4S_MAX_THREADS (256) run
expect_exit 0 fp4-quant --threads 300 --json x.in.npy
$PY -c "import json; j = json.load(open('out.txt')); assert j['threads'] == 256, j['threads']"
expect_exit 0 fp4-decompose --threads 1000 x.in.npy
expect_exit 0 fp4-channels --threads 4096 x.in.npy
FP4S_THREADS=5000 expect_exit 0 fp4-quant --json x.in.npy
$PY -c "import json; j = json.load(open('out.txt')); assert j['threads'] <= 256, j['threads']"
echo ok
