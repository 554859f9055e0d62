#!/bin/sh
# The shipped captures are what their recipe in datasets/README.md makes:
# regenerate each with the documented command and compare every dataset and
# every synth_* attribute (only "created" may differ). Needs the GSL build (the
# shipped files use gsl_rng_mt19937); other builds check the labels only.
. "$(dirname "$0")/common.sh"
C=fp4-capture
D="$SRC/datasets"
for f in synth-moe.h5 synth-moe-gauss.h5 synth-tiny.h5 synth-dense-f32.h5 weight-small.npy; do
    [ -f "$D/$f" ] || fail "datasets/$f is missing"
done
# the regenerating commands, exactly as in datasets/README.md
grep -q "^build/tools/fp4-capture synth -o datasets/synth-moe.h5 --seed 42 --steps 12 --act-every 3 --onset 8$" "$D/README.md" || fail "README recipe for synth-moe.h5 changed"
$C synth -o "$T/synth-moe.h5" --seed 42 --steps 12 --act-every 3 --onset 8
grep -qxF 'build/tools/fp4-capture synth -o datasets/synth-moe-gauss.h5 --seed 42 --steps 12 --act-every 6 --onset 8 \' "$D/README.md" &&
    grep -qxF '    --tail-df 0 --hot-channels 0 --scale-sigma 0' "$D/README.md" || fail "README recipe for synth-moe-gauss.h5 changed"
$C synth -o "$T/synth-moe-gauss.h5" --seed 42 --steps 12 --act-every 6 --onset 8 \
    --tail-df 0 --hot-channels 0 --scale-sigma 0
$C synth -o "$T/synth-tiny.h5" --seed 7 --layers 1 --experts 2 --top-k 1 \
    --tokens 32 --hidden 64 --out-features 32 --hot-channels 2 --steps 4 --act-every 1 \
    --seqs 4 --seq-len 16 --onset 2
$C synth -o "$T/synth-dense-f32.h5" --seed 3 --experts 0 --layers 1 --f32 \
    --tokens 64 --steps 6 --act-every 2 --onset -1
"$PY" - "$D" "$T" <<'PYEOF'
import sys, h5py, numpy as np
D, T = sys.argv[1:]
total = 0
for name in ['synth-moe.h5', 'synth-moe-gauss.h5', 'synth-tiny.h5', 'synth-dense-f32.h5']:
    a, b = h5py.File(f'{D}/{name}', 'r'), h5py.File(f'{T}/{name}', 'r')
    assert a.attrs['synthetic'] == 1 and a.attrs['producer'] == 'fp4-capture synth', name
    rng_here = b.attrs['synth_rng']
    if rng_here != a.attrs['synth_rng']:
        print(f'{name}: this build uses {rng_here}, the shipped file {a.attrs["synth_rng"]}: values not compared')
        continue
    for k in a.attrs:
        if k != 'created':
            assert k in b.attrs and np.all(a.attrs[k] == b.attrs[k]), (name, k)
    pa, pb = [], []
    a.visititems(lambda n, o: pa.append(n) if isinstance(o, h5py.Dataset) else None)
    b.visititems(lambda n, o: pb.append(n) if isinstance(o, h5py.Dataset) else None)
    assert pa == pb, name
    for p in pa:
        assert a[p].dtype == b[p].dtype and a[p].shape == b[p].shape, (name, p)
        assert a[p][()].tobytes() == b[p][()].tobytes(), (name, p)
        total += 1
w = np.load(f'{D}/weight-small.npy')
src = h5py.File(f'{D}/synth-moe.h5', 'r')['/weights/layers.0.mlp.experts.0.up_proj'][()]
assert w.dtype == np.float32 and (w.view(np.uint32) >> 16 == src).all() and (w.view(np.uint32) & 0xffff == 0).all()
print(f'{total} datasets identical')
PYEOF

# The two regimes datasets/README.md documents (section Regimes), on the demo's
# site at step 0: synth-moe.h5 has persistent outlier channels (heavy tails, a
# few channels carry most of the error, compensating 5% of the channels
# removes much of it), synth-moe-gauss.h5 is the Gaussian control (none of it).
site=layers.0.self_attn.qkv_proj
regime() {  # regime FILE: "kurtosis top1share" of the rollout activations
    "$PY" - "$1" "$site" <<'PYEOF'
import sys, h5py, numpy as np
x = h5py.File(sys.argv[1], 'r')[f'/steps/0/{sys.argv[2]}/rollout'][()]
x = (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64).ravel()
x -= x.mean()
print('%.3f' % ((x**4).mean() / (x**2).mean()**2))
PYEOF
    fp4-channels -f nvfp4 -p te --json "$1:/steps/0/$site/rollout" | "$PY" -c '
import json, sys
print([c["share"] for c in json.load(sys.stdin)["coverage"] if abs(c["ratio"] - 0.01) < 1e-9][0])'
}
removed() {  # removed FILE FORMAT PROFILE: share of vs_wfq that rac:0.05 removes
    fp4-remedy -f "$2" -p "$3" -r none,rac:0.05 --sites "$site" --steps 0 --json "$1" | "$PY" -c '
import json, sys
j = json.load(sys.stdin)
print(1 - j[1]["out_rel_error_vs_wfq"] / j[0]["out_rel_error_vs_wfq"])'
}
in_range() { "$PY" -c "import sys; sys.exit(not ($2 <= $1 <= $3))" || fail "$4: $1 not in [$2, $3]"; }
# shellcheck disable=SC2046  # the two numbers as $1 and $2
set -- $(regime "$D/synth-moe.h5")
in_range "$1" 100 100000 "synth-moe.h5 kurtosis"
in_range "$2" 0.3 1 "synth-moe.h5 top-1% error share"
# shellcheck disable=SC2046  # the two numbers as $1 and $2
set -- $(regime "$D/synth-moe-gauss.h5")
in_range "$1" 2.8 3.2 "synth-moe-gauss.h5 kurtosis"
in_range "$2" 0 0.05 "synth-moe-gauss.h5 top-1% error share"
if command -v fp4-remedy > /dev/null; then
    in_range "$(removed "$D/synth-moe.h5" nvfp4 vllm)" 0.4 1 "synth-moe.h5 NVFP4 rac:0.05 removes"
    in_range "$(removed "$D/synth-moe.h5" mxfp4 ocp)" 0.5 1 "synth-moe.h5 MXFP4 rac:0.05 removes"
    in_range "$(removed "$D/synth-moe-gauss.h5" nvfp4 vllm)" 0 0.1 "synth-moe-gauss.h5 NVFP4 rac:0.05 removes"
    in_range "$(removed "$D/synth-moe-gauss.h5" mxfp4 ocp)" 0 0.1 "synth-moe-gauss.h5 MXFP4 rac:0.05 removes"
else
    echo "fp4-remedy not built (no BLAS): what rac removes not checked"
fi
size=$(du -ck "$D"/synth-*.h5 "$D"/weight-small.npy | tail -1 | cut -f1)
[ "$size" -lt 8192 ] || fail "shipped captures take $size KiB (limit 8 MiB)"
echo ok
