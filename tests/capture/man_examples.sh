#!/bin/sh
# Runs every EXAMPLES command of man/fp4-capture.1 and man/fp4scope-capture.5
# (in a temporary directory with the fixtures the examples name) and checks
# that each succeeds.
. "$(dirname "$0")/common.sh"
mkdir -p "$T/bin" "$T/run"
py_shim "$T/bin"
ln -s "$SRC/datasets" "$T/run/datasets"
cd "$T/run"
"$PY" - <<'PYEOF'
import json, struct, numpy as np, h5py
rng = np.random.default_rng(1)
np.save('trainer_q.npy', rng.standard_normal((16, 64)).astype(np.float32))
np.save('rollout_q.npy', rng.standard_normal((16, 64)).astype(np.float32))
hdr, blobs, off = {}, [], 0
for e in range(3):
    b = rng.integers(0, 2**16, size=(8, 64), dtype=np.uint16).astype('<u2').tobytes()
    hdr[f'model.layers.3.mlp.experts.{e}.w1.weight'] = {'dtype': 'BF16', 'shape': [8, 64], 'data_offsets': [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(hdr).encode(); h += b' ' * (-len(h) % 8)
with open('dump.safetensors', 'wb') as f:
    f.write(struct.pack('<Q', len(h))); f.write(h); f.write(b''.join(blobs))
with h5py.File('act.h5', 'w') as f:
    f['/acts/x'] = rng.standard_normal((16, 64)).astype(np.float32)
PYEOF
fp4-capture import trainer_q.npy -o rank0.h5 --step 0 --side trainer --site layers.0.a
fp4-capture import trainer_q.npy -o rank1.h5 --step 0 --side trainer --site layers.0.b

n=0
for page in "$SRC/man/fp4-capture.1" "$SRC/man/fp4scope-capture.5"; do
    [ -f "$page" ] || continue
    # commands inside .EX/.EE of the EXAMPLES section; '\e' at the end joins lines
    sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$page" | sed -n '/^\.EX/,/^\.EE/p' | grep -v '^\.E[XE]' |
        sed -e 's/\\-/-/g' | awk '{ if (sub(/\\e$/, "")) { buf = buf $0 } else { print buf $0; buf = "" } }' |
        sed -e 's/\\e/\\/g' > "$T/cmds"
    while IFS= read -r cmd; do
        [ -n "$cmd" ] || continue
        n=$((n + 1))
        if ! PATH="$T/bin:$PATH" sh -c "$cmd" > "$T/ex.out" 2> "$T/ex.err"; then
            cat "$T/ex.err"
            fail "example failed ($page): $cmd"
        fi
    done < "$T/cmds"
done
[ "$n" -ge 10 ] || fail "only $n examples found"
# the examples produced what they say
fp4-capture ls cap.h5 | grep -q "layers.3.mlp.experts.2.w1" || fail "expert import example"
fp4-capture ls run.h5 | grep -q "layers.0.b" || fail "merge example"
echo "ok ($n examples)"
