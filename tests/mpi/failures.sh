#!/bin/sh
# A failure on any rank (a missing input, a malformed tensor in one rank's
# share, an output refused, a failure after the gather) ends every rank with
# the status and the message one process gives, printed once, and nothing
# written.
. "$(dirname "$0")/common.sh"
fp4-capture synth -o c.h5 > /dev/null
site=layers.0.mlp.experts.0.up_proj
# a .npy of [64, 33]: 33 columns are not a multiple of the block size
hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (64, 33), }"
pad=$(( 64 - (10 + ${#hdr} + 1) % 64 ))
{ printf '\223NUMPY\001\000'; printf "\\$(printf %03o $(( (${#hdr} + pad + 1) % 256 )))\\$(printf %03o $(( (${#hdr} + pad + 1) / 256 )))"
  printf '%s%*s\n' "$hdr" "$pad" ''; head -c $((64 * 33 * 4)) /dev/zero; } > bad.npy

# expect STATUS NAME CMD...: one process, then P ranks (ranks in common.sh)
expect() {
    st=$1 name=$2
    shift 2
    set +e
    "$@" > /dev/null 2> ref.err
    r=$?
    set -e
    [ "$r" = "$st" ] || fail "$name: one process exits $r, expected $st"
    for p in $(ranks); do
        rm -f out.h5
        set +e
        mpi "$p" "$@" > /dev/null 2> got.err
        r=$?
        set -e
        [ "$r" = "$st" ] || fail "$name P=$p: exit $r, expected $st"
        # what the ranks printed, without mpirun's own notices (between lines of
        # dashes, and the blank lines it prints after them)
        sed '/^---------------*$/,/^---------------*$/d; /^$/d' got.err > got.msg
        [ "$(grep -c '^fp4-' got.msg)" = 1 ] || fail "$name P=$p: not one message: $(cat got.err)"
        cmp -s ref.err got.msg || fail "$name P=$p: message '$(cat got.msg)', one process: '$(cat ref.err)'"
        [ ! -e out.h5 ] || fail "$name P=$p: out.h5 written"
    done
    echo "ok: $name ($(cat ref.err))"
}

expect 3 "missing input" fp4-decompose c.h5:/weights/$site missing.npy -o out.h5
expect 3 "malformed tensor in one rank's share" fp4-decompose c.h5:/weights/$site bad.npy c.h5:/weights/$site -o out.h5
PS=3 expect 3 "malformed tensor, nvfp4" fp4-decompose -f nvfp4 bad.npy c.h5:/steps/0/$site/rollout -o out.h5
PS=4 expect 3 "missing trace" fp4-mismatch c.h5 missing.h5
# activations only: no range has a token, rank 0 reads it whole and says so
fp4-capture import c.h5:/steps/0/$site/rollout -o nolp.h5 --step 0 --side rollout > /dev/null
PS=2 expect 3 "a capture without log-probs" fp4-mismatch c.h5 nolp.h5
PS=3 expect 3 "missing baseline" fp4-mismatch --gate --baseline missing.csv c.h5
PS=2 expect 2 "bad option" fp4-channels --top 0 c.h5:/weights/$site
# --device cuda where the GPU cannot run (no GPU, or a build without CUDA): the
# one process's usage error, from every rank, once
if ! fp4-decompose --device cuda c.h5:/weights/$site > /dev/null 2>&1; then
    PS=2 expect 2 "--device cuda without a usable GPU" fp4-decompose --device cuda c.h5:/weights/$site -o out.h5
fi
expect 3 "after the gather (rank 0 alone)" fp4-remedy --logits c.h5
fp4-decompose c.h5:/weights/$site -o kept.h5 > /dev/null
before=$(h5text kept.h5)
expect 2 "existing report without --force" fp4-decompose c.h5:/weights/$site -o kept.h5
[ "$(h5text kept.h5)" = "$before" ] || fail "kept.h5 changed"
[ "$fails" = 0 ] || exit 1
echo "all failures agreed"
