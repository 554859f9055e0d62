#!/bin/sh
# Bad input: missing, not HDF5, truncated (interrupted copy), missing schema,
# newer major version, trainer/rollout shape mismatch, K mismatch, a file whose
# writer did not close it.
. "$(dirname "$0")/common.sh"
C=fp4-capture
expect 3 "missing.h5: cannot open" $C ls "$T/missing.h5"
echo "not hdf5 at all" > "$T/text.h5"
expect 3 "text.h5: not an HDF5 file" $C ls "$T/text.h5"
$C synth -o "$T/s.h5" --steps 2 --act-every 1 --tokens 16 --hidden 32 --out-features 8 --seqs 1 --seq-len 4
head -c 20000 "$T/s.h5" > "$T/cut.h5"
expect 3 "cut.h5: damaged or truncated HDF5 file" $C ls "$T/cut.h5"
"$PY" - "$T" <<'PYEOF'
import sys, shutil, h5py, numpy as np
d = sys.argv[1]
with h5py.File(f'{d}/noschema.h5', 'w') as f:
    f['/steps/0/a/trainer'] = np.zeros((2, 4), np.float32)
shutil.copy(f'{d}/s.h5', f'{d}/v2.h5')
with h5py.File(f'{d}/v2.h5', 'a') as f:
    f.attrs['fp4scope_schema'] = 'fp4scope-capture/2'
shutil.copy(f'{d}/s.h5', f'{d}/open.h5')
with h5py.File(f'{d}/open.h5', 'a') as f:
    f.attrs['writer_state'] = 'open'
shutil.copy(f'{d}/s.h5', f'{d}/badstep.h5')
with h5py.File(f'{d}/badstep.h5', 'a') as f:
    f['/steps/abc/x/trainer'] = np.zeros((1, 4), np.float32)
np.save(f'{d}/k32.npy', np.zeros((16, 32), np.float32))
np.save(f'{d}/k16.npy', np.zeros((16, 16), np.float32))
np.save(f'{d}/r8.npy', np.zeros((8, 32), np.float32))
PYEOF
expect 3 "noschema.h5: not an fp4scope capture: root attribute fp4scope_schema is missing" $C ls "$T/noschema.h5"
expect 3 "v2.h5: schema \"fp4scope-capture/2\" is newer than this reader" $C ls "$T/v2.h5"
expect 3 "newer than this reader" $C import "$T/k32.npy" -o "$T/v2.h5" -a --step 9 --side trainer
expect 3 "/steps/abc: step groups must be named by a decimal integer" $C ls "$T/badstep.h5"
expect 0 "" $C ls "$T/open.h5"
grep -q "^interrupted: the writer did not close this file" "$T/out" || fail "interrupted not reported"
$C ls --json "$T/open.h5" | grep -q '"interrupted": true' || fail "interrupted not in JSON"

# shape mismatch of one site: K refused at import, rows caught by ls --check
$C import "$T/k32.npy" -o "$T/m.h5" --step 0 --side trainer --site layers.0.up
expect 3 "share K" $C import "$T/k16.npy" -o "$T/m.h5" -a --step 0 --side rollout --site layers.0.up
$C import "$T/r8.npy" -o "$T/m.h5" -a --step 0 --side rollout --site layers.0.up
expect 0 "" $C ls "$T/m.h5"
expect 1 "trainer is \[16, 32\] but rollout is \[8, 32\]" $C ls --check "$T/m.h5"
$C ls --check --json "$T/m.h5" > "$T/j" 2>/dev/null || true
grep -q '"check_ok": false' "$T/j" || fail "check_ok not false in JSON"
# merge refuses it (capture(5)), naming both shapes
# each side of a site whose sides differ is still a tensor to decompose (the pairing is not its concern)
expect 0 "" fp4-decompose "$T/m.h5" --sites '*'
expect 3 "trainer is \[16, 32\] but rollout is \[8, 32\]" $C merge "$T/m.h5" -o "$T/mm.h5"

# steps beyond what a capture stores (2^53) are refused before anything is
# written; the largest one works and lists
expect 2 "--step" $C import "$T/k32.npy" -o "$T/big.h5" --step 1000000000000000000 --side trainer
[ ! -e "$T/big.h5" ] || fail "a refused --step left an output"
expect 2 "--step" $C import "$T/k32.npy" -o "$T/big.h5" --step 9007199254740993 --side trainer
$C import "$T/k32.npy" -o "$T/big.h5" --step 9007199254740992 --side trainer
expect 0 "" $C ls --json "$T/big.h5"
grep -q '9007199254740992' "$T/out" || fail "the largest step does not list"
# a step group of 19 digits written by another program still reads
"$PY" -c "
import h5py, numpy as np
f = h5py.File('$T/big.h5', 'a')
f['/steps/1000000000000000000/s/trainer'] = np.ones((2, 4), np.float32)"
expect 0 "" $C ls --json "$T/big.h5"
grep -q '1000000000000000000' "$T/out" || fail "a 19-digit step does not list"
echo ok
