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

# the quantizer option group: every override of fp4-quant in every tool that quantizes
$PY -c "
import numpy as np
x = np.zeros((4, 32), '<f4'); x[:, 0] = 6; x[:, 1] = 5; x[:, 2] = 2.5; x[:, 3] = -0.25
np.save('ties.in.npy', x)"
qtools="fp4-decompose fp4-channels"
for t in $qtools; do
    expect_exit 0 $t --json ties.in.npy
    cp out.txt base.json
    expect_exit 0 $t --json --round rha --zero-sign drop ties.in.npy
    $PY - "$t" <<'PY'
import json, sys
a, b = json.load(open('base.json')), json.load(open('out.txt'))
assert 'round=rha' in b['spec'] and 'neg_zero=drop' in b['spec'], b['spec']
# -0.25 = m_b/24 is the dead-zone tie: round-to-nearest-even keeps it in the
# dead zone, round-half-away takes it out
da = (a['rollup'] if 'rollup' in a else a['summary'])['deadzone']
db = (b['rollup'] if 'rollup' in b else b['summary'])['deadzone']
assert da == db + 4, (sys.argv[1], da, db)
PY
    expect_exit 0 $t -f nvfp4 --recipe torchao --2d --global-scale decode --nonfinite ignore --json ties.in.npy
    expect_exit 2 $t -f nvfp4 --zero-block-code 3 ties.in.npy
    err_has "--zero-block-code applies to mxfp4 only"
    expect_exit 2 $t --recipe te ties.in.npy
    err_has "apply to nvfp4 only"
    expect_exit 2 $t -f fp8 ties.in.npy
    err_has "defined for mxfp4 and nvfp4"
    expect_exit 2 $t --round up ties.in.npy
    err_has "--round: expected one of rne"
    expect_exit 0 $t --help
    out_has "--zero-block-code C"
done

# --threads: any count is taken, at most FP4S_MAX_THREADS (256) run
expect_exit 0 fp4-quant --threads 300 --json x.in.npy
$PY -c "import json; j = json.load(open('out.txt')); assert j['threads'] == 256, j['threads']"
expect_exit 0 fp4-decompose --threads 1000 x.in.npy
expect_exit 0 fp4-channels --threads 4096 x.in.npy
FP4S_THREADS=5000 expect_exit 0 fp4-quant --json x.in.npy
$PY -c "import json; j = json.load(open('out.txt')); assert j['threads'] <= 256, j['threads']"
echo ok
