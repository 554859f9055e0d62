#!/bin/sh
# fp4-batch: a row-scaled spec shows no coupling on the shipped captures and
# on plain inputs, a per-tensor spec does and its counts equal a numpy count;
# group files; the man page's examples; every bad input (exit 2 / 3).
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
D="$FP4S_SRCDIR/datasets"

$PY - <<'PY'
import numpy as np
g = np.random.default_rng(11)
x = (g.standard_normal((64, 64)) * np.exp(g.standard_normal(64) * 0.7)).astype('<f4')
x[np.arange(64) % 9 == 4] *= 12            # token spikes
np.save('x.in.npy', x)
ids = np.stack([np.arange(64) // 16, np.arange(64) % 16], 1).astype('<f4')   # 4 sequences of 16
np.save('ids.in.npy', ids)
np.save('w.in.npy', g.standard_normal((10, 64)).astype('<f4'))
np.save('tok.in.npy', (np.arange(64) % 10).astype('<f4'))
t = (np.arange(64) % 10).astype('<f4')
t[9] = 10
np.save('badtok.in.npy', t)
with open('groups.in.txt', 'w') as f:
    f.write('# seq pos group: even positions together, odd positions together\n')
    for i in range(64):
        f.write('%d %d %d\n' % (i // 16, i % 16, (i % 16) % 2))
with open('holes.in.txt', 'w') as f:
    f.write('0 0 1\n')
with open('twice.in.txt', 'w') as f:
    f.write('0 0 1\n0 0 2\n')
with open('bad.in.txt', 'w') as f:
    f.write('0 zero 1\n')
PY

# a row-scaled spec: no coupling at all, on every shipped capture
for cap in synth-dense-f32.h5 synth-tiny.h5 moe-h200.h5; do
    for p in te-row flashinfer-per-token vllm-per-token; do
        expect_exit 0 fp4-batch -f nvfp4 -p $p --seq-len 16 --trainer packed:32 --rollout decode:1,decode:4 --json \
            "$D/$cap"
        $PY -c "
import json
d = json.load(open('out.txt'))
assert d['sites'], 'no sites'
for s in d['sites'] + d['totals']:
    assert s['code_flips'] == 0 and s['scale_flips'] == 0 and s['rows_changed'] == 0, s"
    done
done
# per tensor: the grouping changes codes, and the counts are numpy's
expect_exit 0 fp4-batch -f nvfp4 -p te --ids ids.in.npy --trainer packed:32 --rollout decode:1,groups.in.txt \
    --act x.in.npy --weight w.in.npy --lm-head --tokens tok.in.npy --json
$PY - <<'PY'
import json, subprocess, numpy as np
d = json.load(open('out.txt'))
x = np.load('x.in.npy')
def codes(rows):
    np.save('sub.npy', x[rows])
    subprocess.run(['fp4-quant', '-f', 'nvfp4', '-p', 'te', '--codes', 'c.npy', 'sub.npy'], check=True,
                   capture_output=True)
    return np.load('c.npy')
def quant(groups):
    out = np.zeros(x.shape, np.uint8)
    for g in sorted(set(groups)):
        rows = [i for i in range(64) if groups[i] == g]
        out[rows] = codes(rows)
    return out
seq, pos = np.arange(64) // 16, np.arange(64) % 16
train = quant([i // 32 for i in range(64)])                 # packed:32: two sequences a micro-batch
for s, groups in zip(d['sites'], (list(range(64)), [p % 2 for p in pos])):
    roll = quant(groups)
    flips = int(((train != roll) & (((train | roll) & 7) != 0)).sum())
    assert s['code_flips'] == flips and flips > 0, (s['rollout'], s['code_flips'], flips)
    assert s['logprob_max_abs_diff'] > 0 and s['output_rel_diff'] > 0, s
PY
# the table and CSV forms
expect_exit 0 fp4-batch -f nvfp4 -p te --seq-len 16 --trainer packed:32 --rollout decode:2 "$D/synth-dense-f32.h5"
out_has "rollout composition: decode:2"
out_has "total"
expect_exit 0 fp4-batch -f nvfp4 -p te --seq-len 16 --rollout decode:2 --csv "$D/synth-dense-f32.h5"
out_has "rollout,step,site,rows"

bad3() { expect_exit 3 fp4-batch "$@"; err_has "$msg"; }
# the capture's own token ids: taken in place of --seq-len, and only the side asked for is read (the other may
# hold other rows: routing flips)
fp4-capture synth -o ids.in.h5 --tokens 64 --steps 1 > /dev/null
cp ids.in.h5 noids.in.h5
$PY - <<'PY'
import h5py, numpy as np
site = 'steps/0/layers.0.self_attn.qkv_proj'
with h5py.File('ids.in.h5', 'a') as f:
    for k in list(f['steps/0']):
        if k != 'layers.0.self_attn.qkv_proj' and k != 'logprobs':
            del f['steps/0/' + k]
    n = f[site + '/rollout'].shape[0]
    ids = np.stack([np.arange(n) // 16, np.arange(n) % 16], 1).astype(np.int64)
    f[site + '/rollout_ids'] = ids
    t = f[site + '/trainer'][()]
    del f[site + '/trainer']
    f[site + '/trainer'] = t[::-1][:-3]              # the trainer holds 3 tokens fewer, in reverse order
    f[site + '/trainer'].attrs['dtype'] = 'bfloat16'
    f[site + '/trainer_ids'] = ids[::-1][:-3]
PY
expect_exit 0 fp4-batch -f nvfp4 -p te --trainer packed:32 --rollout decode:2 --json --sites '*qkv_proj' ids.in.h5
cp out.txt ids.json
expect_exit 0 fp4-batch -f nvfp4 -p te --seq-len 16 --trainer packed:32 --rollout decode:2 --json \
    --sites 'layers.0.self_attn.qkv_proj' noids.in.h5
$PY - <<'PY'
import json
a, b = json.load(open('ids.json')), json.load(open('out.txt'))
assert a['sites'] == b['sites'] and a['sites'][0]['code_flips'] > 0, (a['sites'], b['sites'])
PY
expect_exit 0 fp4-batch -f nvfp4 -p te --side trainer --trainer packed:32 --rollout decode:2 --json ids.in.h5
$PY -c "
import json
d = json.load(open('out.txt'))
assert [s['rows'] for s in d['sites']] == [61], d['sites']"
msg="site layers.0.mlp.experts.0.up_proj step 0: the rollout side carries no token ids (/steps/0/layers.0.mlp.experts.0.up_proj/rollout_ids): give --seq-len N" \
    bad3 -f nvfp4 noids.in.h5

# the man page's examples, from the source tree
sed -n '/^\.SH EXAMPLES/,/^\.SH SEE ALSO/p' "$FP4S_SRCDIR/man/fp4-batch.1" | sed -n '/^\.EX/,/^\.EE/p' |
    grep -v -e '^\.EX' -e '^\.EE' | sed -e 's/\\-/-/g' >examples.txt
[ "$(wc -l <examples.txt)" -eq 2 ] || fail "expected 2 examples in fp4-batch.1"
while IFS= read -r cmd; do
    (cd "$FP4S_SRCDIR" && sh -c "$cmd") >ex.out 2>ex.err || { cat ex.out ex.err >&2; fail "example failed: $cmd"; }
    [ -s ex.out ] || fail "example printed nothing: $cmd"
done <examples.txt

# usage: exit 2
bad() { expect_exit 2 fp4-batch "$@"; err_has "$msg"; }
msg="batch composition 'waves:3': expected packed:TOKENS" bad -f nvfp4 --seq-len 4 --rollout waves:3 "$D/synth-tiny.h5"
msg="packed needs a size" bad -f nvfp4 --seq-len 4 --trainer packed "$D/synth-tiny.h5"
msg="--act needs --ids IDS or --seq-len N" bad -f nvfp4 --act x.in.npy
msg="--ids and --seq-len exclude each other" bad -f nvfp4 --act x.in.npy --ids ids.in.npy --seq-len 4
msg="--lm-head needs --weight W" bad -f nvfp4 --act x.in.npy --seq-len 4 --lm-head
msg="--side: expected rollout or trainer" bad -f nvfp4 --seq-len 4 --side both "$D/synth-tiny.h5"
msg="2-D tiles group rows by position" bad -f nvfp4 -p te-2d --act x.in.npy --seq-len 4
msg="--seq-len: expected" bad -f nvfp4 --act x.in.npy --seq-len 0
# input: exit 3
msg="missing.h5" bad3 -f nvfp4 --seq-len 4 missing.h5
msg="ids are [64, 2]; the activations w.in.npy need [10, 2]" bad3 -f nvfp4 --act w.in.npy --ids ids.in.npy
msg="holes.in.txt: w.in.npy" bad3 -f nvfp4 --act w.in.npy --seq-len 4 --rollout holes.in.txt
msg="is in two groups" bad3 -f nvfp4 --act x.in.npy --seq-len 4 --rollout twice.in.txt
msg="bad.in.txt:1: expected \"SEQ POS GROUP\"" bad3 -f nvfp4 --act x.in.npy --seq-len 4 --trainer bad.in.txt
msg="synth-tiny.h5: no site matches --sites nope" bad3 -f nvfp4 --seq-len 4 --sites nope "$D/synth-tiny.h5"
msg="is not an index into the vocabulary of 10" bad3 -f nvfp4 --act x.in.npy --seq-len 4 --weight w.in.npy \
    --lm-head --tokens badtok.in.npy
msg="x.in.npy: 4096 tokens for 64 rows" bad3 -f nvfp4 --act x.in.npy --seq-len 4 --weight w.in.npy --lm-head \
    --tokens x.in.npy
echo "batch-cli: ok"
