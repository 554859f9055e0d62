#!/bin/sh
# Run every command of the EXAMPLES section of man/fp4-quant.1 on fixtures
# named as in the page; each must exit 0 and print something.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
page="$FP4S_SRCDIR/man/fp4-quant.1"

$PY - <<'PY'
import numpy as np, h5py, json, struct
rng = np.random.default_rng(5)
np.save('T.npy', rng.standard_normal((64, 256)).astype('<f4'))
w = rng.standard_normal((32, 64)).astype('<f4')
bf = ((w.view('<u4') + 0x8000) >> 16).astype('<u2')
h = json.dumps({'layers.0.w': {'dtype': 'BF16', 'shape': [32, 64], 'data_offsets': [0, bf.nbytes]}}).encode()
open('model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bf.tobytes())
with h5py.File('act.h5', 'w') as f:
    f['act/x'] = rng.standard_normal((8, 100)).astype('f4')
PY

# the commands: lines of .EX blocks after .SH EXAMPLES, roff escapes undone
sed -n '/^\.SH EXAMPLES/,/^\.SH SEE ALSO/p' "$page" |
    sed -n '/^\.EX/,/^\.EE/p' | grep -v -e '^\.EX' -e '^\.EE' |
    sed -e 's/\\-/-/g' -e 's/\\(dq/"/g' >examples.txt
n=$(wc -l <examples.txt)
[ "$n" -eq 8 ] || fail "expected 8 examples in $page, found $n"

i=0
while IFS= read -r cmd; do
    i=$((i + 1))
    case $cmd in
    python3\ *) cmd="$PY ${cmd#python3 }" ;;
    fp4-quant\ *) ;;
    *) fail "example $i is neither fp4-quant nor python3: $cmd" ;;
    esac
    set +e
    sh -c "$cmd" >ex.out 2>ex.err
    rc=$?
    set -e
    if [ $rc -ne 0 ] || [ ! -s ex.out ]; then
        cat ex.out ex.err >&2
        fail "example $i exited $rc: $cmd"
    fi
    echo "example $i ok: $cmd"
done <examples.txt
[ -f w.h5 ] && [ -f c.npy ] && [ -f s.npy ] && [ -f d.npy ] || fail "example 3 did not write its outputs"
echo ok
