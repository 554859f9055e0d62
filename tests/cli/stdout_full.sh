#!/bin/sh
# Every tool checks standard output at exit: a write that failed (a full disk,
# here /dev/full) is exit 4 with one message that names stdout and the reason,
# never exit 0, never a message that blames the input (issue 8, item 15).
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
[ -w /dev/full ] || { echo "no /dev/full: skipped"; exit 77; }

$PY - <<'PY'
import numpy as np
np.save('x.in.npy', np.random.default_rng(1).standard_normal((32, 64)).astype('<f4'))
with open('t.in.csv', 'w') as f:
    f.write('step,seq,trainer_logprob,rollout_logprob\n')
    for s in range(12):
        for t in range(8):
            f.write(f'{s},0,-1.0,{-1.0 - 0.001 * (s + 1)}\n')
PY
fp4-capture synth -o cap.in.h5 --steps 2 --act-every 1 --tokens 16 --hidden 64 --out-features 0 --seqs 1 --seq-len 4
fp4-decompose --json x.in.npy > rep.in.json

full() {
    set +e
    "$@" >/dev/full 2>err.txt
    got=$?
    set -e
    [ "$got" = 4 ] || { cat err.txt >&2; fail "exit $got, expected 4: $* > /dev/full"; }
    err_has "stdout: write failed: No space left on device"
    [ "$(wc -l <err.txt)" = 1 ] || { cat err.txt >&2; fail "more than one message: $*"; }
}

extra=
command -v fp4-remedy >/dev/null 2>&1 && extra="fp4-remedy fp4-compare"
for t in fp4-quant fp4-decompose fp4-channels fp4-capture fp4-mismatch fp4-plot $extra; do
    full $t --help
    full $t --version
done
full fp4-quant x.in.npy
full fp4-quant --json x.in.npy
full fp4-quant --diff ceil x.in.npy
full fp4-quant --codes - x.in.npy
full fp4-quant --list-profiles
full fp4-decompose x.in.npy
full fp4-decompose --json x.in.npy
full fp4-decompose --csv --by row x.in.npy
full fp4-channels x.in.npy
full fp4-channels --json x.in.npy
full fp4-channels --csv x.in.npy
full fp4-capture ls cap.in.h5
full fp4-capture ls --json cap.in.h5
full fp4-mismatch t.in.csv
full fp4-mismatch --json t.in.csv
full fp4-mismatch --csv cap.in.h5
if [ "${FP4S_HAVE_GNUPLOT:-1}" = 1 ] && command -v gnuplot >/dev/null 2>&1; then
    full fp4-plot mismatch t.in.csv --term dumb -o -
    full fp4-plot components rep.in.json --term dumb -o -
fi
# a failed stdout after the outputs were committed: they stay, complete
full fp4-quant --dequant d.npy x.in.npy
$PY -c "import numpy as np; assert np.load('d.npy').shape == (32, 64)"
ls -A | grep -e '\.tmp\.' && fail "temporaries left behind"
echo ok
