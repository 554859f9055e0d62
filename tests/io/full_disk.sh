#!/bin/sh
# Every HDF5 and .npy writer on a full file system (issue 8.6): a tmpfs of
# 2 MiB, filled to leave 0 to 64 KiB, then fp4-quant -o/--dequant,
# fp4-decompose -o, fp4-channels -o set.h5, fp4-capture synth/merge/import
# -o and import -a. Each run either succeeds with a readable output, or exits
# 4 naming the output and "No space left on device"; never a signal, never
# a temporary left behind, and an existing capture keeps its steps.
# Needs a mount: as root in a private mount namespace (unshare -m), else in a
# user namespace (unshare -rm); skipped (77) when neither works.
set -eu
SRC=${FP4S_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ "${FP4S_IN_NS:-}" != 1 ]; then
    export FP4S_IN_NS=1
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then exec unshare -m sh "$0" "$@"; fi
    if unshare -rm true 2>/dev/null; then exec unshare -rm sh "$0" "$@"; fi
    echo "SKIP: cannot mount a small file system here (no root, no user namespaces)"; exit 77
fi
T=$(mktemp -d)
trap 'umount "$T/mnt" 2>/dev/null || true; rm -rf "$T"' EXIT
mkdir "$T/mnt"
mount -t tmpfs -o size=2m tmpfs "$T/mnt" || { echo "SKIP: mount -t tmpfs failed"; exit 77; }
M=$T/mnt
D=$SRC/datasets
# an output is readable: h5ls (Debian: hdf5-tools) walks it, else h5py does
if command -v h5ls >/dev/null 2>&1; then
    h5readable() { h5ls -r "$1" >/dev/null 2>&1; }
elif [ -n "${FP4S_PYTHON:-}" ]; then
    h5readable() { "$FP4S_PYTHON" "$SRC/tests/h5check.py" read "$1" >/dev/null 2>&1; }
else
    echo "SKIP: neither h5ls (Debian: hdf5-tools) nor a python3 with h5py (-Dpython) to read the outputs"; exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
runs=0; full=0
fill_keep() { # leave $1 KiB free
    avail=$(df -k "$M" | awk 'NR == 2 {print $4}')
    n=$((avail - $1))
    [ $n -le 0 ] || dd if=/dev/zero of="$M/fill" bs=1024 count=$n 2>/dev/null || true
}
fill() { rm -rf "$M"/*; fill_keep "$1"; }
# check OUT CMD...: run, then judge
check() {
    out=$1; shift
    set +e
    "$@" >"$T/stdout" 2>"$T/err"
    rc=$?
    set -e
    runs=$((runs + 1))
    [ $rc -lt 128 ] || { cat "$T/err"; fail "$* died by signal $((rc - 128))"; }
    if ls "$M" | grep -q '\.tmp\.'; then fail "$* left a temporary: $(ls "$M")"; fi
    if [ $rc = 0 ]; then
        [ -s "$out" ] || fail "$* exited 0 without $out"
        case "$out" in
        *.npy) ;;
        *) h5readable "$out" || fail "$* exited 0 but $out is unreadable" ;;
        esac
    else
        full=$((full + 1))
        [ $rc = 4 ] || { cat "$T/err"; fail "$* exited $rc, expected 0 or 4"; }
        grep -q "No space left on device" "$T/err" || { cat "$T/err"; fail "$*: the message lacks the reason"; }
        grep -q "$(basename "$out")" "$T/err" || { cat "$T/err"; fail "$*: the message does not name $out"; }
        grep -q '\.tmp\.' "$T/err" && { cat "$T/err"; fail "$*: the message names a temporary"; }
        [ ! -e "$out" ] || [ "${KEEP:-}" = 1 ] || fail "$* failed but left $out"
    fi
}
small="--steps 2 --tokens 16 --hidden 64 --out-features 8 --layers 1 --experts 2 --top-k 1"
fp4-capture synth -o "$T/a.h5" $small --seed 1 >/dev/null
fp4-capture import "$D/weight-small.npy" -o "$T/b.h5" --step 5 --side weight >/dev/null
SITE=$D/synth-tiny.h5:/steps/0/layers.0.self_attn.qkv_proj/rollout
for free in 0 4 16 64 256 700; do
    fill $free
    check "$M/q.h5" fp4-quant "$D/weight-small.npy" -o "$M/q.h5"
    fill $free
    check "$M/dq.npy" fp4-quant "$D/weight-small.npy" --dequant "$M/dq.npy"
    fill $free
    check "$M/d.h5" fp4-decompose "$D/synth-tiny.h5" --sites '*' --steps 0 -o "$M/d.h5"
    fill $free
    check "$M/set.h5" fp4-channels "$SITE" -o "$M/set.h5"
    fill $free
    check "$M/s.h5" fp4-capture synth -o "$M/s.h5" --steps 3 --tokens 256
    fill $free
    check "$M/m.h5" fp4-capture merge "$T/a.h5" "$T/b.h5" -o "$M/m.h5"
    fill $free
    check "$M/i.h5" fp4-capture import "$D/weight-small.npy" -o "$M/i.h5" --step 0 --side weight
    # appending to a capture on the full file system: the capture keeps its steps
    rm -rf "$M"/*
    cp "$T/a.h5" "$M/app.h5"
    fill_keep $free
    KEEP=1 check "$M/app.h5" fp4-capture import "$D/weight-small.npy" -a -o "$M/app.h5" --step 7 --side weight
    fp4-capture ls --json "$M/app.h5" > "$T/ls.json" || fail "import -a on a full disk made the capture unreadable"
    tr -d ' \n' < "$T/ls.json" | grep -q '"steps":\[0,1' || fail "import -a on a full disk lost steps: $(cat "$T/ls.json")"
done
[ $full -gt 0 ] || fail "no run hit the full file system: the test is not testing"
echo "ok: $runs runs, $full of them on a full file system, no signal"
