#!/bin/sh
# No output of any tool destroys one of its inputs or an existing HDF5 file
# (issue 8, items 3 and 4): an output that is an input (by any name: the same
# string, ./x, a symbolic or a hard link, file:dataset) or another output is
# refused with exit 2 before anything is written; an existing HDF5 file is
# replaced only with --force, and the message says so.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY - <<'PY'
import numpy as np, h5py, json
rng = np.random.default_rng(3)
np.save('w.in.npy', rng.standard_normal((16, 64)).astype('<f4'))
np.save('x.in.npy', rng.standard_normal((32, 64)).astype('<f4'))
with h5py.File('act.in.h5', 'w') as f:
    f['weights/x'] = rng.standard_normal((16, 64)).astype('f4')
    f['weights/y'] = rng.standard_normal((16, 64)).astype('f4')
# a file with a 512-byte user block before the HDF5 superblock
with h5py.File('ub.in.h5', 'w', userblock_size=512) as f:
    f['d'] = np.zeros(4, 'f4')
with open('trace.in.csv', 'w') as f:
    f.write('step,seq,trainer_logprob,rollout_logprob\n')
    for s in range(12):
        for t in range(8):
            a = -1.0 - 0.01 * t
            f.write(f'{s},0,{a},{a - 0.001 * (s + 1)}\n')
PY
fp4-capture synth -o cap.in.h5 --steps 3 --act-every 1 --tokens 16 --hidden 64 --out-features 0 --seqs 1 --seq-len 4
fp4-capture synth -o cap2.in.h5 --seed 7 --steps 3 --act-every 1 --tokens 16 --hidden 64 --out-features 0 --seqs 1 --seq-len 4
fp4-decompose --json x.in.npy > rep.in.json
ln -s w.in.npy wlink.in.npy
ln w.in.npy whard.in.npy
cp rep.in.json rep.in.dat
cp rep.in.json r.in.gp
cp trace.in.csv p.in.dat
mkdir sub
for f in *.in.*; do cksum "$f"; done > sums.before

inputs_intact() {
    for f in *.in.*; do cksum "$f"; done > sums.after
    cmp -s sums.before sums.after || { diff sums.before sums.after >&2; fail "an input changed: $*"; }
    ls -A | grep -e '\.tmp\.' -e '\.fp4s-commit' >/dev/null && fail "temporaries left behind: $*"
    left=$(ls -A | grep -v -e '\.in\.' -e '^out\.txt$' -e '^err\.txt$' -e '^sums\.' -e '^sub$' || true)
    [ -z "$left" ] || fail "outputs written by a refused run ($*): $left"
}

# refused CODE TEXT CMD...: exit CODE, stderr names TEXT, nothing written
refused() {
    code=$1 text=$2
    shift 2
    expect_exit "$code" "$@"
    err_has "$text"
    err_has "nothing was written"
    inputs_intact "$*"
}

# ---- item 3: an output that names an input ----
refused 2 "is also an input" fp4-quant w.in.npy --dequant w.in.npy
refused 2 "is also an input" fp4-quant w.in.npy --codes ./w.in.npy
refused 2 "is also an input" fp4-quant w.in.npy --scales wlink.in.npy
refused 2 "is also an input" fp4-quant wlink.in.npy --dequant whard.in.npy
refused 2 "is also an input" fp4-quant act.in.h5:/weights/x -o act.in.h5 --force
refused 2 "is also an input" fp4-quant act.in.h5:/weights/x -o "$T/act.in.h5" --force
refused 2 "is also an input" fp4-decompose act.in.h5:/weights/x -o ./act.in.h5 --force
refused 2 "is also an input" fp4-decompose --sites '*' cap.in.h5 -o cap.in.h5 --force
refused 2 "is also an input" fp4-decompose x.in.npy w.in.npy -o sub/../w.in.npy
refused 2 "is also an input" fp4-channels x.in.npy -o x.in.npy
refused 2 "is also an input" fp4-channels x.in.npy --weight w.in.npy -o wlink.in.npy
refused 2 "is also an input" fp4-mismatch trace.in.csv -o trace.in.csv
refused 2 "is also an input" fp4-mismatch --json cap.in.h5 -o ./cap.in.h5 --force
refused 2 "is also an input" fp4-capture import x.in.npy -o x.in.npy --step 0 --side trainer
refused 2 "is also an input" fp4-capture import act.in.h5:/weights/x -o ./act.in.h5 -a --step 0 --side trainer
refused 2 "is also an input" fp4-capture merge cap.in.h5 cap2.in.h5 -o ./cap.in.h5 --force
refused 2 "is also an input" fp4-capture merge cap.in.h5 cap2.in.h5 -o "$T/sub/../cap2.in.h5" --force
# fp4-plot: the image, its script and its data files (NAME.dat, NAME.SERIES.dat)
refused 2 "is also an input" fp4-plot components rep.in.json -o rep.in.json --term dumb
refused 2 "is also an input" fp4-plot components rep.in.dat -o rep.in.png
refused 2 "is also an input" fp4-plot components r.in.gp -o r.in.svg
refused 2 "is also an input" fp4-plot mismatch --format csv p.in.dat --name in -o p.png
# the remedy tools (built with a BLAS)
if command -v fp4-remedy >/dev/null 2>&1; then
    refused 2 "is also an input" fp4-remedy --act x.in.npy --weight w.in.npy --remedy none -o whard.in.npy
    refused 2 "is also an input" fp4-compare --act x.in.npy --trainer-act x.in.npy --weight w.in.npy -o x.in.npy
fi
# ... or another output of the same run
refused 2 "named twice" fp4-quant w.in.npy --codes c.npy --dequant c.npy
refused 2 "are the same file" fp4-quant w.in.npy --codes c.npy --dequant ./c.npy
refused 2 "are the same file" fp4-quant w.in.npy -o q.h5 --codes sub/../q.h5
# devices are written in place and may repeat
expect_exit 0 fp4-quant w.in.npy --codes /dev/null --dequant /dev/null
inputs_intact "/dev/null twice"

# ---- item 4: an existing HDF5 file is replaced only with --force ----
expect_exit 0 fp4-quant w.in.npy -o q.h5
cp q.h5 q.keep
expect_exit 2 fp4-quant -f nvfp4 w.in.npy -o q.h5
err_has "holds HDF5 data"
err_has "--force"
cmp -s q.h5 q.keep || fail "a refused -o changed q.h5"
expect_exit 0 fp4-quant -f nvfp4 w.in.npy -o q.h5 --force
cmp -s q.h5 q.keep && fail "--force did not replace q.h5"
# the user block does not hide it; a non-HDF5 output is replaced as before
cp ub.in.h5 ub.h5
expect_exit 2 fp4-quant w.in.npy --dequant ub.h5
err_has "holds HDF5 data"
cmp -s ub.h5 ub.in.h5 || fail "a refused --dequant changed ub.h5"
expect_exit 0 fp4-quant w.in.npy --dequant d.npy
expect_exit 0 fp4-quant -f nvfp4 w.in.npy --dequant d.npy
# every tool that writes
cp cap.in.h5 cap.h5
expect_exit 2 fp4-capture import x.in.npy -o cap.h5 --step 0 --side trainer
err_has "--force"
expect_exit 2 fp4-capture synth -o cap.h5 --steps 2
expect_exit 2 fp4-capture merge cap2.in.h5 -o cap.h5
expect_exit 2 fp4-decompose x.in.npy -o cap.h5
expect_exit 2 fp4-channels x.in.npy -o cap.h5
expect_exit 2 fp4-mismatch trace.in.csv -o cap.h5
expect_exit 2 fp4-plot mismatch trace.in.csv -o cap.h5 --term dumb
cmp -s cap.h5 cap.in.h5 || fail "a refused run changed the capture"
expect_exit 0 fp4-capture import x.in.npy -o cap.h5 -a --step 9 --side trainer
expect_exit 0 fp4-capture import x.in.npy -o cap.h5 --step 0 --side trainer --force
[ "$(fp4-capture ls --json cap.h5 | grep -c '"path"')" = 1 ] || fail "import --force did not replace the capture"
expect_exit 0 fp4-channels x.in.npy -o set.h5
expect_exit 2 fp4-channels x.in.npy -o set.h5
expect_exit 0 fp4-channels x.in.npy -o set.h5 --force
expect_exit 0 fp4-decompose x.in.npy -o dec.h5
expect_exit 0 fp4-decompose x.in.npy -o dec.h5 --force
# ---- item 2: a file a live writer holds is never replaced, even with --force ----
if [ -x "${FP4S_BUILDDIR:-}/tests/capture/hold_writer" ]; then
    . "$FP4S_SRCDIR/tests/hold_writer.sh"
    hold_writer "$T/held.h5"
    cp held.h5 held.keep
    for cmd in "fp4-quant x.in.npy -o held.h5" "fp4-quant x.in.npy --dequant held.h5" \
               "fp4-decompose x.in.npy -o held.h5" "fp4-channels x.in.npy -o held.h5" \
               "fp4-mismatch trace.in.csv -o held.h5" "fp4-plot mismatch trace.in.csv --term dumb -o held.h5"; do
        # shellcheck disable=SC2086
        expect_exit 4 $cmd --force
        err_has "held by a live writer"
        cmp -s held.h5 held.keep || fail "$cmd --force changed the capture a live writer holds"
        ls -A | grep '\.tmp\.' && fail "$cmd left a temporary"
    done
    touch stop
    wait $writer || fail "the writer failed"
    rm -f held.h5 held.keep ready stop
fi
echo ok
