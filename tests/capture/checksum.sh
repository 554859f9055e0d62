#!/bin/sh
# Checksummed captures (issue 24 item 9): one damaged data byte gave other
# numbers with exit 0 (raw data carries no checksum). With the writer's
# checksum option (fp4-capture import --checksum; fp4s_capture_opts.checksum;
# the Python adapter's Capture(checksum=True) with the argument 'python')
# every chunk carries HDF5's Fletcher-32 checksum and a damaged byte fails the
# read: exit 3 naming the file and the dataset. Without it the same damage
# still reads (what fp4scope-capture(5) says).
. "$(dirname "$0")/common.sh"
C=fp4-capture
cd "$T"
"$PY" -c "
import numpy as np
rng = np.random.default_rng(9)
np.save('x.npy', rng.standard_normal((64, 64)).astype(np.float32))
np.save('w.npy', rng.standard_normal((32, 64)).astype(np.float32))
"
mk() { # mk OUT [--checksum]
    out=$1
    shift
    $C import x.npy -o "$out" --step 0 --side trainer --site l.q "$@"
    $C import x.npy -o "$out" -a --step 0 --side rollout --site l.q "$@"
    $C import w.npy -o "$out" -a --const --side weight --site l.q "$@"
}
if [ "${1:-}" = python ]; then
    # the adapter's argument
    FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so" PYTHONPATH="$SRC/tools/python" "$PY" -c "
import numpy as np, fp4scope
c = fp4scope.Capture('ck.h5', checksum=True)
c.put(0, 'l.q', 'trainer', np.load('x.npy'))
c.put(0, 'l.q', 'rollout', np.load('x.npy'))
c.close()
"
else
    mk ck.h5 --checksum
fi
mk plain.h5
# every dataset of ck.h5 has the filter, none of plain.h5
"$PY" - <<'EOF'
import h5py
for fn, want in (('ck.h5', True), ('plain.h5', False)):
    with h5py.File(fn, 'r') as f:
        ds = []
        f.visititems(lambda n, o: ds.append(o) if isinstance(o, h5py.Dataset) else None)
        assert ds, fn
        for d in ds:
            assert d.fletcher32 == want, (fn, d.name, d.fletcher32)
EOF
# damage one byte of the trainer's first chunk (an exponent: a visible change)
damage() {
    cp "$1" "$2"
    "$PY" - "$2" <<'EOF'
import sys, h5py
fn = sys.argv[1]
with h5py.File(fn, 'r') as f:
    ci = f['/steps/0/l.q/trainer'].id.get_chunk_info(0)
    # the high byte (sign and exponent) of an element in the middle
    off = ci.byte_offset + (ci.size // 2) // 4 * 4 + 3
b = bytearray(open(fn, 'rb').read())
b[off] ^= 0x20
open(fn, 'wb').write(b)
EOF
}
damage ck.h5 ckbad.h5
damage plain.h5 plainbad.h5
spec=/steps/0/l.q/trainer
for tool in "fp4-quant ckbad.h5:$spec" "fp4-decompose ckbad.h5:$spec" "fp4-channels ckbad.h5:$spec" \
    "fp4-decompose --sites l.q ckbad.h5"; do
    # shellcheck disable=SC2086
    expect 3 "ckbad.h5: /steps/0/l.q/trainer: cannot read rows 0..63 (HDF5: the data does not match its Fletcher-32 checksum: it is damaged)" $tool
    echo "ok: $tool: exit 3, the damaged chunk named"
done
if [ "${1:-}" != python ]; then
    expect 3 "Fletcher-32 checksum" fp4-compare ckbad.h5
    echo "ok: fp4-compare: exit 3"
fi
# the rest of the file reads, and so does an undamaged copy
fp4-quant ckbad.h5:/steps/0/l.q/rollout > /dev/null
fp4-quant ck.h5:$spec > a.txt
fp4-quant plain.h5:$spec > b.txt
sed 1d a.txt > a2.txt
sed 1d b.txt > b2.txt
cmp -s a2.txt b2.txt || fail "the checksummed capture reads other numbers than the plain one"
# without the checksum the damage goes unseen: other numbers, exit 0
fp4-quant plainbad.h5:$spec > c.txt
sed 1d c.txt > c2.txt
! cmp -s b2.txt c2.txt || fail "the damage changed nothing (not in the data?)"
echo "ok: without --checksum the same damage reads as other numbers, exit 0 (as documented)"
