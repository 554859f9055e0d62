#!/bin/sh
# fp4-capture merge: disjoint ranks join, identical duplicates pass, conflicting
# duplicates fail naming both files and leave no output.
. "$(dirname "$0")/common.sh"
C=fp4-capture
"$PY" -c "
import numpy as np
np.save('$T/x.npy', np.arange(12, dtype=np.float32).reshape(3, 4))
np.save('$T/y.npy', np.arange(12, dtype=np.float32).reshape(3, 4) + 1)
"
$C import "$T/x.npy" -o "$T/r0.h5" --step 0 --side trainer --site layers.0.rank0
$C import "$T/x.npy" -o "$T/r0.h5" -a --step 0 --side trainer --site layers.0.shared
$C import "$T/x.npy" -o "$T/r1.h5" --step 0 --side trainer --site layers.0.rank1
$C import "$T/x.npy" -o "$T/r1.h5" -a --step 1 --side rollout --site layers.0.rank1
$C import "$T/x.npy" -o "$T/r1.h5" -a --step 0 --side trainer --site layers.0.shared
$C import "$T/y.npy" -o "$T/r2.h5" --step 0 --side trainer --site layers.0.shared

$C merge "$T/r0.h5" "$T/r1.h5" -o "$T/m.h5"
$C ls --json "$T/m.h5" > "$T/j"
"$PY" - "$T/j" "$T/m.h5" <<'PYEOF'
import json, sys, h5py
j = json.load(open(sys.argv[1]))
paths = sorted(d['path'] for d in j['datasets'])
assert paths == ['/steps/0/layers.0.rank0/trainer', '/steps/0/layers.0.rank1/trainer',
                 '/steps/0/layers.0.shared/trainer', '/steps/1/layers.0.rank1/rollout'], paths
f = h5py.File(sys.argv[2], 'r')
assert f.attrs['producer'] == 'fp4-capture merge'
assert 'r0.h5' in f.attrs['merged_from'] and 'r1.h5' in f.attrs['merged_from']
assert f['/steps/0/layers.0.rank1/trainer'][()].tolist() == [[0,1,2,3],[4,5,6,7],[8,9,10,11]]
PYEOF

expect 3 "r0.h5 and .*r2.h5 both hold /steps/0/layers.0.shared/trainer with different contents" \
    $C merge "$T/r0.h5" "$T/r2.h5" -o "$T/bad.h5"
[ ! -e "$T/bad.h5" ] || fail "a failed merge left its output"
ls "$T" | grep -q '\.tmp\.' && fail "temporary file left behind"

# synthetic inputs stay labelled; merging a file with itself is a no-op join
$C synth -o "$T/s.h5" --steps 2 --act-every 1 --tokens 16 --hidden 32 --out-features 0 --seqs 1 --seq-len 4
$C merge "$T/s.h5" "$T/s.h5" -o "$T/ss.h5"
$C ls "$T/ss.h5" | grep -q "(SYNTHETIC)" || fail "merge lost the synthetic label"
[ "$($C ls --json "$T/s.h5" | grep -c '"path"')" = "$($C ls --json "$T/ss.h5" | grep -c '"path"')" ] || fail "self-merge changed the listing"
expect 2 "is also an input" $C merge "$T/s.h5" -o "$T/s.h5"
expect 2 "-o OUT.h5 is required" $C merge "$T/s.h5"
expect 3 "nope.h5" $C merge "$T/s.h5" "$T/nope.h5" -o "$T/x.h5"
echo ok
