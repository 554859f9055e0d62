#!/bin/sh
# fp4-capture: help, version, usage errors, synth, ls (table and --json), filters.
. "$(dirname "$0")/common.sh"
C=fp4-capture
expect 0 "" $C --help; grep -q "^Usage: fp4-capture import" "$T/out" || fail "--help text"
expect 0 "" $C --version; grep -q "fp4-capture (fp4scope)" "$T/out" || fail "--version text"
expect 2 "expected a command" $C
expect 2 "unknown command" $C frobnicate
expect 2 "unknown option" $C ls --bogus x.h5
expect 2 "exactly one" $C ls
expect 2 "-o CAP.h5 is required" $C synth
expect 2 "--tokens" $C synth -o "$T/x.h5" --tokens 0
expect 2 "--top-k 5 exceeds --experts 4" $C synth -o "$T/x.h5" --top-k 5
[ ! -e "$T/x.h5" ] || fail "failed synth left an output"

$C synth -o "$T/s.h5" --seed 5 --steps 3 --act-every 2 --tokens 24 --hidden 32 --out-features 8 --seqs 2 --seq-len 4
expect 0 "" $C ls "$T/s.h5"
grep -q "fp4scope-capture/1, producer fp4-capture synth (SYNTHETIC)" "$T/out" || fail "ls header"
grep -q "^ *2  layers.1.self_attn.qkv_proj  *rollout  *24 x 32  bfloat16" "$T/out" || fail "ls row"
grep -q "^ *const  layers.0.mlp.experts.3.up_proj  *weight  *8 x 32" "$T/out" || fail "ls const weight"
grep -q "^ *1  logprobs  *mask  *8  uint8" "$T/out" || fail "ls logprobs row"
expect 0 "" $C ls --check "$T/s.h5"; grep -q "check: ok" "$T/out" || fail "check ok"

expect 0 "" $C ls --json "$T/s.h5"
"$PY" - "$T/out" "$T/s.h5" <<'PYEOF'
import json, sys, h5py
j = json.load(open(sys.argv[1]))
f = h5py.File(sys.argv[2], 'r')
assert j['schema'] == 'fp4scope-capture/1' and j['synthetic'] is True and j['interrupted'] is False, j
assert j['steps'] == [0, 1, 2], j['steps']
assert 'layers.0.mlp.experts.2.up_proj' in j['sites'] and 'logprobs' not in j['sites']
n = 0
for d in j['datasets']:
    ds = f[d['path']]
    assert list(ds.shape) == d['shape'], (d, ds.shape)
    want = 'bfloat16' if ds.attrs.get('dtype') == 'bfloat16' else {'float32': 'float32', 'int64': 'int64', 'uint8': 'uint8'}[str(ds.dtype)]
    assert d['dtype'] == want, d
    assert d['bytes'] == ds.size * ds.dtype.itemsize
    n += 1
count = []
f.visititems(lambda name, o: count.append(name) if isinstance(o, h5py.Dataset) else None)
assert n == len(count), (n, len(count))
assert j['total_bytes'] == sum(d['bytes'] for d in j['datasets'])
PYEOF

expect 0 "" $C ls "$T/s.h5" --sites 'layers.0.mlp.experts.*' --steps 2 --sides trainer
[ "$(grep -c 'layers.0.mlp.experts' "$T/out")" = 4 ] || fail "filtered ls"
expect 3 "no dataset matches the selection" $C ls "$T/s.h5" --steps 7
expect 3 "no dataset matches" $C ls "$T/s.h5" --sites 'nothing.*'
echo ok
