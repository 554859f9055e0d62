#!/bin/sh
# Two runs writing the same output: the one that commits second never
# replaces the first one's file (issue 24 item 6). Each run checks its
# outputs when it starts and renames them into place at its end; before the
# fix the rename replaced whatever was there then, so both runs exited 0 and
# the first writer's file was silently lost. Now the commit replaces only
# what was there when the run decided to write: nothing (a file that appeared
# meanwhile is refused: renameat2 RENAME_NOREPLACE), or that very file
# (swapped in one step, RENAME_EXCHANGE, and checked). The loser exits 4 and
# leaves no temporary; the winner's file is intact.
# Deterministic: the shim (hold_commit.c) stops run A at the rename of its
# output until the test has run B to its end.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
: "${FP4S_HOLD_SHIM:?}"
export ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
count_failures
$PY -c "
import numpy as np
for k in range(3):
    np.save(f'x{k}.in.npy', np.random.default_rng(k).standard_normal((64, 256), dtype=np.float32))
"
mkfifo hold.in.fifo

# held NAME CMD...: start CMD in the background, stopped at the rename of NAME
held() {
    name=$1
    shift
    FP4S_TEST_HOLD_FIFO="$T/hold.in.fifo" FP4S_TEST_HOLD_NAME=$name LD_PRELOAD="$FP4S_HOLD_SHIM" \
        "$@" > a-out.txt 2> a-err.txt &
    apid=$!
    exec 3> hold.in.fifo # returns once A has opened the FIFO: it is at its rename
}
release() {
    exec 3>&-
    set +e
    wait "$apid"
    arc=$?
    set -e
}
no_temporaries() {
    left=$(ls -A | grep -e '\.tmp\.' -e 'fp4s-commit' || true)
    [ -z "$left" ] || fail "$1: temporaries or journals left: $left"
}

# 1. a new output that appears while A works: B's file stays, A exits 4
for tool in quant remedy; do
    rm -f q.h5
    case $tool in
    quant) a() { fp4-quant -o q.h5 x0.in.npy; }; b() { fp4-quant -o q.h5 x1.in.npy; } ;;
    remedy) a() { fp4-remedy "$SRC/datasets/synth-tiny.h5" --steps 0 --sites 'layers.0.self_attn*' -o q.h5; }
        b() { fp4-remedy "$SRC/datasets/synth-tiny.h5" --steps 1 --sites 'layers.0.self_attn*' -o q.h5; } ;;
    esac
    held q.h5 a
    b > /dev/null
    cp q.h5 b.in.h5
    release
    [ "$arc" = 4 ] || fail "fp4-$tool: the run whose output appeared meanwhile exited $arc, not 4: $(cat a-err.txt)"
    grep -q "q.h5: appeared while this run was working (another process wrote it meanwhile); not replaced" a-err.txt ||
        fail "fp4-$tool: the message: $(cat a-err.txt)"
    cmp -s q.h5 b.in.h5 || fail "fp4-$tool: the other run's q.h5 was replaced"
    no_temporaries "fp4-$tool, new output"
    echo "ok: fp4-$tool -o: an output that appeared meanwhile is kept, the late run exits 4"
done

# 2. an existing output replaced by another run meanwhile (both with --force)
rm -f q.h5
fp4-quant -o q.h5 x2.in.npy > /dev/null
held q.h5 fp4-quant --force -o q.h5 x0.in.npy
fp4-quant --force -o q.h5 x1.in.npy > /dev/null
cp q.h5 b.in.h5
release
[ "$arc" = 4 ] || fail "replaced meanwhile: exit $arc, not 4: $(cat a-err.txt)"
grep -q "q.h5: replaced by another process while this run was working; not replaced" a-err.txt ||
    fail "replaced meanwhile: the message: $(cat a-err.txt)"
cmp -s q.h5 b.in.h5 || fail "replaced meanwhile: the other run's q.h5 was replaced"
no_temporaries "existing output"
echo "ok: an output replaced meanwhile by another run is kept, the late run exits 4"

# 3. nobody else: the held run replaces (or creates) its output as before
fp4-quant --force -o ref.in.h5 x0.in.npy > /dev/null
held q.h5 fp4-quant --force -o q.h5 x0.in.npy
release
[ "$arc" = 0 ] || fail "alone: exit $arc: $(cat a-err.txt)"
h5_same() { $PY "$SRC/tests/h5check.py" same "$1" "$2" > /dev/null; }
h5_same q.h5 ref.in.h5 || fail "alone: q.h5 is not the run's output"
rm q.h5
held q.h5 fp4-quant -o q.h5 x0.in.npy
release
[ "$arc" = 0 ] && h5_same q.h5 ref.in.h5 || fail "alone, new: exit $arc: $(cat a-err.txt)"
no_temporaries "alone"
echo "ok: a run alone commits as before"

# 4. two outputs, held before their commit journal is written: B writes the
#    one A renames first (nothing of A appears), or the one A renames second
#    (A's other output is in place, B's file kept, no journal to finish). (Once
#    A's journal exists, B is refused at its start: "another process is
#    committing it right now".)
rm -f q.h5 c.npy hold.in.fifo.name
held '*' fp4-quant -o q.h5 --codes c.npy x0.in.npy
first=$(cat hold.in.fifo.name)
release
[ "$arc" = 0 ] || fail "group alone: exit $arc: $(cat a-err.txt)"
second=q.h5
[ "$first" != q.h5 ] || second=c.npy
for victim in "$first" "$second"; do
    rm -f q.h5 c.npy
    held '*.fp4s-commit' fp4-quant -o q.h5 --codes c.npy x0.in.npy
    case $victim in
    q.h5) fp4-quant -o q.h5 x1.in.npy > /dev/null; other=c.npy ;;
    c.npy) fp4-quant --codes c.npy x1.in.npy > /dev/null; other=q.h5 ;;
    *) fail "held at $victim" ;;
    esac
    cp "$victim" "b.in.$victim"
    release
    [ "$arc" = 4 ] || fail "group, $victim taken: exit $arc: $(cat a-err.txt)"
    cmp -s "$victim" "b.in.$victim" || fail "group, $victim taken: the other run's $victim was replaced"
    if [ "$victim" = "$first" ]; then
        [ ! -e $other ] || fail "group, $victim taken: $other written although $victim was not (all or none)"
        grep -q "$victim: appeared while this run was working.*nothing was written" a-err.txt ||
            fail "group, $victim taken: the message: $(cat a-err.txt)"
    else
        [ -e $other ] || fail "group, $victim taken: $other not in place"
        grep -q "$victim: appeared while this run was working.*this run's version of it was dropped, and 1 of its 2 outputs are in place" a-err.txt ||
            fail "group, $victim taken: the message: $(cat a-err.txt)"
    fi
    no_temporaries "group, $victim taken"
done
echo "ok: two outputs: all or none when the first is taken; the other run's file always kept"

# 5. fp4-report's directory: created, or replaced with --force, meanwhile
for case in new force; do
    rm -rf rep
    [ $case = new ] || fp4-report "$SRC/datasets/synth-tiny.h5" --steps 2 --sites 'layers.0.self_attn*' --quiet -o rep > /dev/null
    held rep fp4-report "$SRC/datasets/synth-tiny.h5" --steps 0 --sites 'layers.0.self_attn*' --quiet --force -o rep
    rm -rf rep.b
    fp4-report "$SRC/datasets/synth-tiny.h5" --steps 1 --sites 'layers.0.self_attn*' --quiet --force -o rep > /dev/null
    cp -r rep rep.b
    release
    [ "$arc" = 4 ] || fail "fp4-report, $case: exit $arc: $(cat a-err.txt)"
    diff -r rep rep.b > /dev/null || fail "fp4-report, $case: the other run's report was replaced"
    case $case in
    new) grep -q "rep: appeared while this run was working" a-err.txt || fail "fp4-report, new: $(cat a-err.txt)" ;;
    force) grep -q "rep: replaced by another process while this run was working" a-err.txt ||
        fail "fp4-report, --force: $(cat a-err.txt)" ;;
    esac
    left=$(ls -A | grep '^\.rep\.' || true)
    [ -z "$left" ] || fail "fp4-report, $case: staging directories left: $left"
done
echo "ok: fp4-report: a report directory another run wrote meanwhile is kept, the late run exits 4"

# 6. fp4-rl: a capture that another process creates while it runs is kept
#    (exit 4), with a message that offers no option fp4-rl lacks (it said
#    "append with -a, or overwrite"; fp4-rl now commits its capture at the end
#    as every tool does, so the commit's message is the one seen)
rm -f rl.h5
held rl.h5 fp4-rl --width 32 --prompts 2 --group 2 --steps 1 --sft-max-steps 1 -o rl.h5
echo other > rl.h5
release
[ "$arc" = 4 ] || fail "fp4-rl: a capture created meanwhile: exit $arc: $(cat a-err.txt)"
grep -q "rl.h5: appeared while this run was working (another process wrote it meanwhile); not replaced" a-err.txt ||
    fail "fp4-rl: the message: $(cat a-err.txt)"
! grep -q -- "-a\b" a-err.txt || fail "fp4-rl offers -a: $(cat a-err.txt)"
[ "$(cat rl.h5)" = other ] || fail "fp4-rl: the other process's rl.h5 was changed"
echo "ok: fp4-rl: a capture created while it runs is kept, and the message fits fp4-rl"

# 7. a SIGKILLed fp4-report leaves its hidden staging directory (no handler
#    runs); a later run in the same directory removes it once its owner is
#    dead (it held a lock on it), and only it: not a live run's, not another
#    name, not a file
rm -rf rep rep2 rep3
rep_run() { fp4-report "$SRC/datasets/synth-tiny.h5" --steps 0 --sites 'layers.0.self_attn*' --quiet -o "$1"; }
held rep fp4-report "$SRC/datasets/synth-tiny.h5" --steps 0 --sites 'layers.0.self_attn*' --quiet -o rep
kill -s KILL "$apid"
release
old=$(( $(date +%s) - 120 ))
stale=$(ls -A | grep '^\.rep\.fp4-report\.' || true)
[ -n "$stale" ] || fail "no staging directory left by the killed run"
touch -d "@$old" "$stale"
held rep2 fp4-report "$SRC/datasets/synth-tiny.h5" --steps 0 --sites 'layers.0.self_attn*' --quiet -o rep2
live=$(ls -A | grep '^\.rep2\.fp4-report\.' || true)
[ -n "$live" ] || fail "no staging directory of the live run"
touch -d "@$old" "$live"
mkdir .other.XXXXXX
touch .x.fp4-report.abcdef
touch -d "@$old" .other.XXXXXX .x.fp4-report.abcdef
rep_run rep3 > /dev/null
[ ! -e "$stale" ] || fail "the killed run's staging directory was not removed"
[ -d "$live" ] || fail "a live run's staging directory was removed"
[ -d .other.XXXXXX ] && [ -f .x.fp4-report.abcdef ] || fail "something not a staging directory was removed"
release
[ "$arc" = 0 ] && [ -f rep2/index.html ] || fail "the live run: exit $arc: $(cat a-err.txt)"
echo "ok: a killed fp4-report's staging directory is removed by a later run, and only it"
failures_end
