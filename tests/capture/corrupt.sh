#!/bin/sh
# Damaged captures never kill a tool (issue 8.7): a variable-length string
# whose global-heap record claims gigabytes, a chunk larger than its dataset's
# fixed dimension, a dimension that claims terabytes, a damaged superblock. Each made at a place
# found by the structure's own bytes (the GCOL signature, the layout and
# dataspace messages), so that the test follows the writer. Every tool exits
# 3 naming the file, at once, without libhdf5 printing anything, and leaves
# the file as it was.
. "$(dirname "$0")/common.sh"
C=fp4-capture
# in the sanitizer build: libhdf5's own leaks on its error paths are not ours
export LSAN_OPTIONS="suppressions=$SRC/tests/capture/lsan-hdf5.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
"$PY" -c "
import numpy as np
np.save('$T/x.npy', np.linspace(-2, 2, 8 * 64, dtype=np.float32).reshape(8, 64))"
$C import "$T/x.npy" -o "$T/ok.h5" --step 0 --side trainer --site layers.0.q
$C import "$T/x.npy" -o "$T/ok.h5" -a --step 0 --side rollout --site layers.0.q
fp4-capture ls "$T/ok.h5" > /dev/null
"$PY" - "$T" <<'PYEOF'
import struct, sys
d = sys.argv[1]
src = open(f'{d}/ok.h5', 'rb').read()
def save(name, data):
    open(f'{d}/{name}.h5', 'wb').write(data)
# 1. the first global-heap object (the schema string) claims 3.7 GB
i = src.find(b'GCOL')
assert i > 0
b = bytearray(src); b[i + 24:i + 32] = struct.pack('<Q', 0xE0 << 24); save('heap', b)
# 2. the chunk dimensions [8, 64, 4] of both layout messages: 64 -> 54080 (a
#    chunk wider than the fixed dimension 64)
def patch_all(pat, at, new):
    b, i, n = bytearray(src), src.find(pat), 0
    while i >= 0:
        b[i + at:i + at + len(new)] = new
        n += 1
        i = src.find(pat, i + 1)
    assert n >= 2, 'expected the messages of both datasets'
    return b
save('chunk', patch_all(struct.pack('<III', 8, 64, 4), 4, struct.pack('<I', 54080)))
# 3. both dataspaces [8, 64] (max [unlimited, 64]): 8 rows -> 2^40
save('dims', patch_all(struct.pack('<QQQQ', 8, 64, 2**64 - 1, 64), 0, struct.pack('<Q', 2**40)))
# 4. the size of the superblock extension's object header, right after the
#    version 2 superblock (its top byte is byte 59): libhdf5 refuses the file
#    but keeps what it half-read, and printed "HDF5: infinite loop closing
#    library" at the tool's exit
assert src[:8] == b'\x89HDF\r\n\x1a\n' and src[8] == 2 and struct.unpack('<Q', src[20:28])[0] == 48
b = bytearray(src); b[59] = 0xE0; save('super', b)
PYEOF
# check NAME CMD...: exit 3 naming the file and the damage, at once, the input unchanged
check() {
    bad=$1; shift
    set +e
    timeout 10 "$@" >/dev/null 2>"$T/err"
    rc=$?
    set -e
    [ "$rc" = 3 ] || { cat "$T/err"; fail "$bad: $* exited $rc, expected 3"; }
    grep -q "$bad.h5" "$T/err" && grep -q "damaged" "$T/err" || { cat "$T/err"; fail "$bad: $*: message"; }
    ! grep -q "^HDF5" "$T/err" || { cat "$T/err"; fail "$bad: $*: libhdf5 printed (the library never prints)"; }
    cmp -s "$T/$bad.h5" "$T/before.h5" || fail "$bad: $* changed its input"
}
for bad in heap chunk dims super; do
    F=$T/$bad.h5
    cp "$F" "$T/before.h5"
    check $bad $C ls "$F"
    check $bad $C ls --check "$F"
    check $bad $C merge "$F" -o "$T/m.h5"
    check $bad fp4-decompose --sites '*' "$F"
    check $bad fp4-mismatch "$F"
    check $bad fp4-channels "$F:/steps/0/layers.0.q/rollout"
    check $bad fp4-quant "$F:/steps/0/layers.0.q/trainer"
    check $bad $C import "$F:/steps/0/layers.0.q/trainer" -o "$T/i.h5" --step 0 --side trainer
done
[ ! -e "$T/m.h5" ] && [ ! -e "$T/i.h5" ] || fail "an output was written from a damaged input"
echo ok
