#!/bin/sh
# Runs every EXAMPLES command of man/fp4-ckpt.1 in a directory holding the
# checkpoints they name (tests/ckpt/make_ckpt.py) and checks that each succeeds.
. "$(dirname "$0")/../capture/common.sh"
cd "$T"
"$PY" "$SRC/tests/ckpt/make_ckpt.py" "$T"
printf 'model.layers.0.self_attn.*_proj nvfp4 modelopt\nmodel.layers.1.mlp.experts.* nvfp4 modelopt\n' > quantized.txt
n=0
sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$SRC/man/fp4-ckpt.1" | sed -n '/^\.EX/,/^\.EE/p' | grep -v '^\.E[XE]' |
    sed -e 's/\\-/-/g' > cmds
while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    n=$((n + 1))
    sh -c "$cmd" > ex.out 2> ex.err || { cat ex.err ex.out; fail "example failed: $cmd"; }
done < cmds
[ "$n" -ge 5 ] || fail "only $n examples found"
[ -s down0.npy ] || fail "the dequant example wrote nothing"
echo "ok ($n examples)"
