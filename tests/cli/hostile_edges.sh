#!/bin/sh
# The small defects a hostile user found (issue 24 item 8), one section each;
# every section failed before its fix.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
count_failures
CAP="$SRC/datasets/synth-tiny.h5"

# --steps ranges whose span overflows int64, or that name too many values in
# all: before, 'a-b' with b - a past INT64_MAX passed the 10^7 bound and the
# loop x += step wrapped past INT64_MAX, growing the list without end (the
# tool ran until killed); ten ranges of 10^7 values each passed one by one.
for arg in 9223372036854775800:9223372036854775807:5 -9223372036854775807-9223372036854775807 \
    0-9999999,10000000-19999999 -9223372036854775808:9223372036854775807:1; do
    set +e
    timeout 20 fp4-capture ls "$CAP" --steps="$arg" > out.txt 2> err.txt
    rc=$?
    set -e
    case $arg in
    9223372036854775800:*) # two values, none of them in the capture
        [ "$rc" = 3 ] && grep -q "no dataset matches" err.txt || fail "--steps $arg: exit $rc: $(cat err.txt)" ;;
    *) [ "$rc" = 2 ] && grep -q -- "--steps: '$arg' names more than 10000000 values" err.txt ||
        fail "--steps $arg: exit $rc: $(cat err.txt)" ;;
    esac
done
expect_exit 0 fp4-capture ls "$CAP" --steps 0-9999999
echo "ok: --steps ranges near the ends of int64, and too long in all"

# fp4-plot hist of a report with 32 or more inputs: one data file per input
# and histogram; a fixed table of 64 scratch files ran out ("too many scratch
# files", exit 5) and leaked the name on that path
$PY -c "
import numpy as np
for i in range(40):
    np.save(f'h{i:02d}.in.npy', np.random.default_rng(i).standard_normal((4, 64)).astype(np.float32))
"
fp4-decompose --json h*.in.npy > h.in.json
mkdir tmp
expect_exit 0 env TMPDIR="$T/tmp" fp4-plot hist h.in.json -o hist.svg
[ -s hist.gp ] && [ -s hist.delta.39.dat ] || fail "fp4-plot hist: the script or the data of the 40th input missing"
if [ "${FP4S_HAVE_GNUPLOT:-0}" = 1 ]; then
    expect_exit 0 env TMPDIR="$T/tmp" fp4-plot hist h.in.json --term dumb -o -
    grep -q "h00.in.npy" out.txt || fail "fp4-plot hist -o -: nothing drawn"
fi
[ -z "$(ls -A tmp)" ] || fail "fp4-plot hist left scratch files: $(ls -A tmp)"
echo "ok: fp4-plot hist of 40 inputs"

# a read that fails names HDF5's reason: the error stack was cleared by the
# closes of the cleanup before the message was made ("cannot read rows 0..15
# (HDF5: )"), and the innermost frame of a missing filter is the plugin
# directory search, not the filter
$PY -c "
import h5py, numpy as np
with h5py.File('lzf.in.h5', 'w') as f:
    f.create_dataset('x', data=np.tile(np.arange(8, dtype=np.float32), (16, 8)), compression='lzf', chunks=(4, 64))
"
mkdir -p noplugins
HDF5_PLUGIN_PATH="$T/noplugins" expect_exit 3 fp4-quant lzf.in.h5:/x
expect_err "lzf.in.h5: /x: cannot read rows 0..15 (HDF5: required filter 'lzf' is not registered)"
! grep -q "(HDF5: )" err.txt || fail "an empty reason: $(cat err.txt)"
# ... and names the file once: fp4-report said "c.h5:/steps/0/x/rollout: c.h5:
# /steps/0/x/rollout: cannot read rows ..."
cp "$CAP" lzcap.in.h5
chmod u+w lzcap.in.h5
$PY -c "
import h5py, numpy as np
with h5py.File('lzcap.in.h5', 'a') as f:
    p = '/steps/0/layers.0.self_attn.qkv_proj/rollout'
    d = f[p]
    shape, attrs, mx = d.shape, dict(d.attrs), d.maxshape
    dt = d.dtype
    del f[p]
    n = f.create_dataset(p, data=np.zeros(shape, dt), compression='lzf', chunks=(8, 64), maxshape=mx)
    for k, v in attrs.items():
        n.attrs[k] = v
"
HDF5_PLUGIN_PATH="$T/noplugins" expect_exit 3 fp4-report lzcap.in.h5 --quiet -o lzrep
expect_err "fp4-report: lzcap.in.h5: /steps/0/layers.0.self_attn.qkv_proj/rollout: cannot read rows 0..31 (HDF5: required filter 'lzf' is not registered)"
[ "$(grep -o 'lzcap.in.h5' err.txt | wc -l)" = 1 ] || fail "the file is named more than once: $(cat err.txt)"
echo "ok: a failed read says why"

# fp4-report > /dev/full: exit 4, and no report (it was put in place before
# its path was printed); an earlier report stays as it was
if [ -w /dev/full ]; then
    rep() { fp4-report "$CAP" --steps 0 --sites 'layers.0.self_attn*' --quiet "$@"; }
    set +e
    rep -o rep > /dev/full 2> err.txt
    rc=$?
    set -e
    [ "$rc" = 4 ] && grep -q "stdout: write failed" err.txt || fail "fp4-report > /dev/full: exit $rc: $(cat err.txt)"
    [ ! -e rep ] || fail "fp4-report > /dev/full: the report was put in place"
    [ -z "$(ls -A | grep '^\.rep\.' || true)" ] || fail "fp4-report > /dev/full: a staging directory left"
    rep -o rep > /dev/null
    cp -r rep rep.before
    set +e
    rep --steps 1 --force -o rep > /dev/full 2> err.txt
    rc=$?
    set -e
    [ "$rc" = 4 ] || fail "fp4-report --force > /dev/full: exit $rc"
    diff -r rep rep.before > /dev/null || fail "fp4-report --force > /dev/full: the earlier report was replaced"
    echo "ok: fp4-report > /dev/full writes no report"
fi

# names read from a file reach the terminal escaped: a site name holding
# terminal escapes (clear the screen, retitle the window, a C1 CSI) was
# printed raw by fp4-capture ls, and in messages
cp "$CAP" evil.in.h5
chmod u+w evil.in.h5
$PY -c "
import h5py
with h5py.File('evil.in.h5', 'a') as f:
    f.move('/steps/0/layers.0.self_attn.qkv_proj', '/steps/0/layers.0.\x1b[2J\x1b]0;pwned\x07.q\x9b1m')
    f.attrs['producer'] = 'evil\x1b[31m'
"
# raw: stdout/stderr hold an ESC, BEL or C1 control (U+0080..U+009F as UTF-8)
raw() { $PY -c "
import sys
b = open(sys.argv[1], 'rb').read()
sys.exit(0 if (b'\x1b' in b or b'\x07' in b or any(b'\xc2' + bytes([c]) in b for c in range(0x80, 0xa0))) else 1)" "$1"; }
expect_exit 0 fp4-capture ls evil.in.h5
raw out.txt && fail "fp4-capture ls printed raw control characters"
grep -q 'layers.0.\\x1b\[2J\\x1b\]0;pwned\\x07.q\\xc2\\x9b1m' out.txt || fail "fp4-capture ls: the name is not shown escaped: $(grep pwned out.txt)"
set +e
fp4-quant "evil.in.h5:/steps/0/layers.0.$(printf '\033')[2J/x" > out.txt 2> err.txt
set -e
raw err.txt && fail "a message printed raw control characters"
grep -q 'layers.0.\\x1b\[2J/x: dataset not found' err.txt || fail "the message: $(cat err.txt)"
# the tables of the tools that read a capture, with such a site at every step
cp "$CAP" evil2.in.h5
chmod u+w evil2.in.h5
$PY -c "
import h5py
n = 'layers.0.\x1b[2J\x1b]0;pwned\x07q'
with h5py.File('evil2.in.h5', 'a') as f:
    for s in f['steps']:
        f.move(f'/steps/{s}/layers.0.self_attn.qkv_proj', f'/steps/{s}/' + n)
    f.move('/weights/layers.0.self_attn.qkv_proj', '/weights/' + n)
"
set -f
for tool in fp4-compare fp4-remedy "fp4-decompose --sites *" "fp4-capture ls --check"; do
    # shellcheck disable=SC2086
    expect_exit 0 $tool evil2.in.h5
    raw out.txt && fail "$tool printed raw control characters"
    raw err.txt && fail "$tool printed raw control characters on stderr"
done
set +f
echo "ok: names from files are printed escaped"

# CSV cells a spreadsheet would evaluate (=, +, -, @ first) are written as
# text, "'=...", in every CSV writer: site names and run names landed
# unquoted (fp4-compare --csv did not even quote a comma)
cp "$CAP" formula.in.h5
chmod u+w formula.in.h5
$PY -c "
import h5py
ren = {'layers.0.self_attn.qkv_proj': \"=cmd|' -C calc'!A0\", 'layers.0.mlp.experts.0.up_proj': '+1+2',
       'layers.0.mlp.experts.1.up_proj': '@SUM(A1),x'}
with h5py.File('formula.in.h5', 'a') as f:
    for s in f['steps']:
        for a, b in ren.items():
            if a in f['steps'][s]:
                f.move(f'/steps/{s}/{a}', f'/steps/{s}/{b}')
    for a, b in ren.items():
        if a in f['weights']:
            f.move(f'/weights/{a}', f'/weights/{b}')
"
printf 'step,k3\n0,1\n' > '-2+3.in.csv'
# no_formula FILE...: no cell starts with = + - @ (but numbers and "-"), and
# the three site names are there, as text
no_formula() { $PY - "$@" <<'EOF2'
import csv, sys
bad, seen = [], set()
for fn in sys.argv[1:]:
    for row in csv.reader(open(fn, newline='')):
        for c in row:
            seen.add(c)
            if c[:1] in ('=', '+', '-', '@', '\t', '\r') and c != '-':
                try:
                    float(c)
                except ValueError:
                    bad.append((fn, c))
if bad:
    sys.exit('formula cells: %r' % bad[:5])
EOF2
}
set -f
for tool in "fp4-compare --csv" "fp4-remedy --csv" "fp4-decompose --csv --sites *"; do
    # shellcheck disable=SC2086
    expect_exit 0 $tool formula.in.h5
    cp out.txt csv.txt
    no_formula csv.txt || fail "$tool: a cell would run as a formula"
    grep -q "\"'=cmd|' -C calc'!A0\"" csv.txt || fail "$tool: the site is not written as text"
done
set +f
expect_exit 0 fp4-mismatch --csv -- -2+3.in.csv
cp out.txt csv.txt
no_formula csv.txt || fail "fp4-mismatch --csv: a cell would run as a formula"
grep -q "^\"'-2+3.in\"," csv.txt || fail "fp4-mismatch --csv: the run name: $(head -2 csv.txt)"
fp4-report formula.in.h5 --quiet -o frep > /dev/null
no_formula frep/*.csv || fail "fp4-report: a CSV cell would run as a formula"
grep -q "'@SUM(A1),x" frep/sites.csv || fail "fp4-report: sites.csv lacks the site as text"
echo "ok: CSV cells that would run as formulas are written as text"
failures_end
