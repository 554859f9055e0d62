#!/bin/sh
# One writer per file (fp4scope-capture(5), WRITING): a capture a live writer
# holds is never replaced or changed by fp4-capture import -o/-a, synth -o,
# merge -o or another tool's -o (exit 4, the file byte for byte as it was, no
# temporary left); two concurrent `import -a` into a new file both land.
. "$(dirname "$0")/common.sh"
. "$SRC/tests/hold_writer.sh"
C=fp4-capture
"$PY" -c "import numpy as np; np.save('$T/x.npy', np.arange(64, dtype=np.float32).reshape(2, 32))"
$C synth -o "$T/other.h5" --steps 2 --tokens 8 --hidden 32 --out-features 0 --seqs 1 --seq-len 8

# A live writer holds held.h5 (one flushed step) until $T/stop appears.
hold_writer "$T/held.h5"
cp "$T/held.h5" "$T/before.h5"
unchanged() {
    cmp -s "$T/held.h5" "$T/before.h5" || fail "$1 changed the capture a live writer holds"
    [ -z "$(ls "$T" | grep '\.tmp\.')" ] || fail "$1 left a temporary: $(ls "$T")"
}
expect 4 "held by a live writer" $C import "$T/x.npy" -o "$T/held.h5" --step 0 --side trainer
unchanged "import -o"
expect 4 "held by another writer" $C import "$T/x.npy" -a -o "$T/held.h5" --step 5 --side trainer
unchanged "import -a"
expect 4 "held by a live writer" $C synth -o "$T/held.h5" --steps 1 --tokens 8 --hidden 32
unchanged "synth -o"
expect 4 "held by a live writer" $C merge "$T/other.h5" -o "$T/held.h5"
unchanged "merge -o"
expect 4 "held by a live writer" fp4-quant "$T/x.npy" -o "$T/held.h5"
unchanged "fp4-quant -o"
# --force replaces an existing capture, never one that a live writer holds
expect 4 "held by a live writer" $C import "$T/x.npy" -o "$T/held.h5" --step 0 --side trainer --force
unchanged "import -o --force"
expect 4 "held by a live writer" $C synth -o "$T/held.h5" --steps 1 --tokens 8 --hidden 32 --force
unchanged "synth -o --force"
expect 4 "held by a live writer" fp4-quant "$T/x.npy" -o "$T/held.h5" --force
unchanged "fp4-quant -o --force"
touch "$T/stop"
wait $writer || fail "the writer failed"
expect 0 "" $C ls --json "$T/held.h5"
tr -d ' \n' < "$T/out" | grep -q '"steps":\[0,1\]' || fail "the writer's steps: $(cat "$T/out")"
grep -q '"interrupted": false' "$T/out" || fail "the writer did not close cleanly"

# Two imports appending into a capture that does not exist yet, started at
# once, again and again: both datasets land every time.
r=0
while [ $r -lt 12 ]; do
    rm -f "$T/new.h5"
    $C import "$T/x.npy" -a -o "$T/new.h5" --step 0 --side trainer --site a 2>"$T/e1" & p1=$!
    $C import "$T/x.npy" -a -o "$T/new.h5" --step 0 --side trainer --site b 2>"$T/e2" & p2=$!
    s1=0; s2=0
    wait $p1 || s1=$?
    wait $p2 || s2=$?
    # either both land, or the loser exits non-zero with a message
    $C ls --json "$T/new.h5" > "$T/ls.json" || fail "round $r: the capture is unreadable"
    for s in a b; do
        n=$(tr -d ' \n' < "$T/ls.json" | grep -o "\"site\":\"$s\"" | wc -l)
        if [ "$s" = a ]; then st=$s1; e="$T/e1"; else st=$s2; e="$T/e2"; fi
        if [ "$st" = 0 ]; then
            [ "$n" = 1 ] || fail "round $r: import of site $s exited 0 but its dataset is missing"
        else
            [ -s "$e" ] || fail "round $r: import of site $s failed without a message"
        fi
    done
    r=$((r + 1))
done
[ -z "$(ls "$T" | grep '\.tmp\.')" ] || fail "a temporary was left: $(ls "$T")"
echo ok
